/* SPDX-License-Identifier: MIT */
/*
 * The collective API: argument checks, groups of send/recv, and the
 * dispatch of each call to where the selection table (select.c) says
 * (coll.h).
 */
#include "coll/coll.h"

#include <stdint.h>
#include <string.h>

#include "coll/hier/coll_hier.h"
#include "coll/plan/plan_coll.h"
#include "core/error.h"
#include "core/log.h"
#include "core/report.h"
#include "core/trace.h"
#include "gpu/gpu_ipc.h"

static const size_t typeSizes[mscclppNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
static const char* const typeNames[mscclppNumTypes] = {"int8",    "uint8",    "int32",   "uint32",
                                                       "int64",   "uint64",   "float16", "float32",
                                                       "float64", "bfloat16", "fp8e4m3", "fp8e5m2"};
static const char* const opNames[mscclppNumOps] = {"sum", "prod", "max", "min", "avg"};

size_t mscclppDataTypeSize(mscclppDataType_t datatype) {
  return (unsigned)datatype < mscclppNumTypes ? typeSizes[datatype] : 0;
}
const char* mscclppDataTypeName(mscclppDataType_t datatype) {
  return (unsigned)datatype < mscclppNumTypes ? typeNames[datatype] : "unknown";
}
const char* mscclppRedOpName(mscclppRedOp_t op) { return (unsigned)op < mscclppNumOps ? opNames[op] : "unknown"; }

/* ---- dispatch: the selection table's choice, run ----
 * Every collective, all-to-all (in place too) included, comes here from
 * run() below (all-to-all-v from mscclppAllToAllv, with checks of its own;
 * coll/hier/ for the steps on its children); groups of send/recv come to
 * runP2p. */

/* An execution plan for `a`: the one mscclppPlanExecute names, else the
 * first registered plan that matches (when MSCCLPP_ALGO forces nothing
 * else). Runs it and returns 1 in *ran; 0 when no plan applies. */
static mscclppResult_t dispatchPlan(struct mscclppComm* comm, const struct mscclppCollArgs* a, uint64_t bytes,
                                    mscclppCollBackend* backend, mscclppCollAlgo* algo, int* ran) {
  *ran = 0;
  struct mscclppPlan* plan = a->plan;
  mscclppCollBackend where = mscclppCollSelectBackend(comm, a->kind, MSCCLPP_COLL_ALGO_AUTO);
  if (plan == NULL && mscclppCollSelectPlans(a->kind, a->algo)) {
    plan = mscclppCollPlanPick(comm, a, where);
    if (plan == NULL && a->algo == MSCCLPP_COLL_ALGO_PLAN) mscclppCollSelectPlanFallback(comm, a->kind, bytes);
  }
  if (plan == NULL) return mscclppSuccess;
  *backend = where;
  *algo = MSCCLPP_COLL_ALGO_PLAN;
  *ran = 1;
  mscclppCollSelectTell(comm, a->kind, bytes, where, MSCCLPP_COLL_ALGO_PLAN, mscclppCollPlanName(plan));
  return mscclppCollPlanRun(comm, plan, a, where);
}

/* Run `a` where the selection table says; *backend and *algo say where,
 * for the trace. */
static mscclppResult_t dispatch(struct mscclppComm* comm, const struct mscclppCollArgs* a,
                                mscclppCollBackend* backend, mscclppCollAlgo* algo) {
  const uint64_t bytes = (uint64_t)a->count * a->typeSize;
  int ran = 0;
  mscclppResult_t res = dispatchPlan(comm, a, bytes, backend, algo, &ran);
  if (ran || res != mscclppSuccess) return res;
  if (mscclppCollSelectHier(comm, a->kind, a->algo)) {
    int ran = 0;
    /* the first hierarchical call makes the child communicators, maybe
     * while the caller's stream is being captured */
    int mode = mscclppGpuIpcCaptureRelax();
    mscclppResult_t res = mscclppCollHierAllReduce(comm, a, &ran);
    mscclppGpuIpcCaptureRestore(mode);
    *backend = MSCCLPP_COLL_BACKEND_HIER;
    *algo = MSCCLPP_COLL_ALGO_HIER;
    MSCCLPP_RETURN_ON_ERROR(res);
    if (ran) {
      mscclppCollSelectTell(comm, a->kind, bytes, MSCCLPP_COLL_BACKEND_HIER, MSCCLPP_COLL_ALGO_HIER, NULL);
      return mscclppSuccess;
    }
  }
  struct mscclppCollArgs b = *a;
  if (b.algo == MSCCLPP_COLL_ALGO_HIER || b.algo == MSCCLPP_COLL_ALGO_FLAT || b.algo == MSCCLPP_COLL_ALGO_PLAN)
    b.algo = MSCCLPP_COLL_ALGO_AUTO; /* this layer's choice, made: the backend's rules pick */
  *backend = mscclppCollSelectBackend(comm, b.kind, b.algo);
  if (b.kind == MSCCLPP_COLL_ALLTOALLV && *backend == MSCCLPP_COLL_BACKEND_PORT)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_COLL,
                      "mscclppAllToAllv on rank %d: the communicator spans hosts (%d of its %d ranks on this one); "
                      "on GPUs all-to-all-v runs only with every rank on one host (the port-channel family has no "
                      "all-to-all-v yet)",
                      comm->rank, comm->localNranks, comm->nranks);
  switch (*backend) {
    case MSCCLPP_COLL_BACKEND_PORT:
      *algo = MSCCLPP_COLL_ALGO_PORT;
      mscclppCollSelectTell(comm, b.kind, bytes, *backend, *algo, NULL);
      return mscclppCollPortRun(comm, &b);
    case MSCCLPP_COLL_BACKEND_GPU:
      b.algo = mscclppCollSelectGpu(comm, b.kind, b.algo, comm->nranks, bytes);
      *algo = b.algo;
      mscclppCollSelectTell(comm, b.kind, bytes, *backend, *algo, NULL);
      return mscclppCollGpuRun(comm, &b);
    default:
      *algo = MSCCLPP_COLL_ALGO_AUTO;
      mscclppCollSelectTell(comm, b.kind, bytes, *backend, *algo, NULL);
      return mscclppCollHostRun(comm, &b);
  }
}

/* The call's number on comm, counted only while tracing. */
static uint64_t traceSeq(struct mscclppComm* comm) {
  struct mscclppCollState* st = NULL;
  return mscclppCollStateOf(comm, &st) == mscclppSuccess ? ++st->traceSeq : 0;
}

/* nccl-tests' "size": the larger of this rank's input and output. */
static uint64_t callSize(const struct mscclppComm* comm, const struct mscclppCollArgs* a) {
  uint64_t bytes = (uint64_t)a->count * a->typeSize;
  if (a->kind == MSCCLPP_COLL_ALLGATHER || a->kind == MSCCLPP_COLL_REDUCESCATTER || a->kind == MSCCLPP_COLL_ALLTOALL)
    bytes *= (uint64_t)comm->nranks;
  return bytes;
}

mscclppResult_t mscclppCollDispatch(struct mscclppComm* comm, const struct mscclppCollArgs* a) {
  /* the hang report's record: relaxed stores, nothing else (core/report.h) */
  const uint64_t issued = mscclppReportIssue(comm->report, mscclppCollKindName(a->kind));
  uint64_t t0 = mscclppTraceBegin();
  const uint64_t seq = t0 != 0 ? traceSeq(comm) : 0; /* before the launch, whose kernel events name it */
  mscclppCollBackend backend = MSCCLPP_COLL_BACKEND_HOST;
  mscclppCollAlgo algo = MSCCLPP_COLL_ALGO_AUTO;
  mscclppResult_t res = dispatch(comm, a, &backend, &algo);
  mscclppReportDone(comm->report, issued, res == mscclppSuccess);
  if (t0 != 0)
    MSCCLPP_TRACE_EMIT(MSCCLPP_TRACE_COLL, t0, mscclppTraceNow(), MSCCLPP_TRACE_S(mscclppCollKindName(a->kind)),
                       (uint64_t)a->count, callSize(comm, a), MSCCLPP_TRACE_S(mscclppDataTypeName(a->type)),
                       MSCCLPP_TRACE_S(mscclppRedOpName(a->op)), MSCCLPP_TRACE_I(a->root),
                       MSCCLPP_TRACE_S(mscclppCollBackendName(backend)), MSCCLPP_TRACE_S(mscclppCollAlgoName(algo)),
                       MSCCLPP_TRACE_I(comm->nranks), comm->id, seq, MSCCLPP_TRACE_I(res));
  return res;
}

static mscclppResult_t p2pDispatch(struct mscclppComm* comm, const struct mscclppCollP2pOp* ops, int nops,
                                   mscclppStream_t stream, mscclppCollBackend* backend) {
  mscclppCollAlgo forced = MSCCLPP_COLL_ALGO_AUTO;
  MSCCLPP_RETURN_ON_ERROR(mscclppCollSelectForced(comm, MSCCLPP_COLL_SENDRECV, &forced));
  *backend = mscclppCollSelectBackend(comm, MSCCLPP_COLL_SENDRECV, forced);
  uint64_t bytes = 0;
  for (int i = 0; i < nops; i++) bytes += ops[i].bytes;
  mscclppCollSelectTell(comm, MSCCLPP_COLL_SENDRECV, bytes, *backend,
                        *backend == MSCCLPP_COLL_BACKEND_PORT  ? MSCCLPP_COLL_ALGO_PORT
                        : *backend == MSCCLPP_COLL_BACKEND_GPU ? MSCCLPP_COLL_ALGO_DIRECT
                                                               : MSCCLPP_COLL_ALGO_AUTO,
                        NULL);
  switch (*backend) {
    case MSCCLPP_COLL_BACKEND_PORT:
      return mscclppCollPortP2p(comm, ops, nops, stream);
    case MSCCLPP_COLL_BACKEND_GPU:
      return mscclppCollGpuP2p(comm, ops, nops, stream);
    default:
      return mscclppCollHostP2p(comm, ops, nops);
  }
}

static mscclppResult_t runP2pTraced(struct mscclppComm* comm, const struct mscclppCollP2pOp* ops, int nops,
                                    mscclppStream_t stream) {
  const uint64_t issued = mscclppReportIssue(comm->report, mscclppCollKindName(MSCCLPP_COLL_SENDRECV));
  uint64_t t0 = mscclppTraceBegin();
  const uint64_t seq = t0 != 0 ? traceSeq(comm) : 0;
  mscclppCollBackend backend = MSCCLPP_COLL_BACKEND_HOST;
  mscclppResult_t res = p2pDispatch(comm, ops, nops, stream, &backend);
  mscclppReportDone(comm->report, issued, res == mscclppSuccess);
  if (t0 != 0) {
    uint64_t sends = 0, sent = 0, received = 0;
    for (int i = 0; i < nops; i++) {
      sends += ops[i].isSend != 0;
      *(ops[i].isSend ? &sent : &received) += ops[i].bytes;
    }
    MSCCLPP_TRACE_EMIT(MSCCLPP_TRACE_P2P, t0, mscclppTraceNow(), sends, (uint64_t)nops - sends,
                       sent > received ? sent : received, MSCCLPP_TRACE_S(mscclppCollBackendName(backend)),
                       MSCCLPP_TRACE_I(comm->nranks), comm->id, seq, MSCCLPP_TRACE_I(res));
  }
  return res;
}

/* Every call is counted while it runs: a revoked communicator is quiescent
 * once none is left (mscclppCommRevoke). */
static mscclppResult_t runP2p(struct mscclppComm* comm, const struct mscclppCollP2pOp* ops, int nops,
                              mscclppStream_t stream) {
  if (nops == 0) return mscclppSuccess;
  mscclppCommCallBegin(comm);
  mscclppResult_t res = runP2pTraced(comm, ops, nops, stream);
  mscclppCommCallEnd(comm);
  return res;
}

static mscclppResult_t checkBuf(const char* fn, const char* what, const void* p, size_t count, size_t typeSize) {
  if (count == 0) return mscclppSuccess;
  if (p == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_COLL, "%s: %s is NULL", fn, what);
  if ((uintptr_t)p % typeSize != 0)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_COLL, "%s: %s %p is not aligned to its %zu-byte elements", fn,
                      what, p, typeSize);
  return mscclppSuccess;
}

static mscclppResult_t checkCommon(const char* fn, struct mscclppComm* comm, mscclppDataType_t type, size_t* typeSize) {
  if (comm == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_COLL, "%s: comm is NULL", fn);
  if ((unsigned)type >= mscclppNumTypes)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_COLL, "%s: unknown data type %d", fn, (int)type);
  *typeSize = typeSizes[type];
  return mscclppSuccess;
}

/* ---- groups
 * ---------------------------------------------------------------------- */

#define GROUP_MAX_OPS 4096

static _Thread_local int groupDepth;
static _Thread_local int groupCount;
static _Thread_local struct mscclppComm* groupComm;
static _Thread_local mscclppStream_t groupStream;
static _Thread_local mscclppResult_t groupError;
static _Thread_local struct mscclppCollP2pOp groupOps[GROUP_MAX_OPS];

mscclppResult_t mscclppGroupStart(void) {
  if (groupDepth == 0) {
    groupCount = 0;
    groupComm = NULL;
    groupStream = NULL;
    groupError = mscclppSuccess;
  }
  groupDepth++;
  return mscclppSuccess;
}

mscclppResult_t mscclppGroupEnd(void) {
  if (groupDepth == 0)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_COLL, "mscclppGroupEnd without mscclppGroupStart");
  if (--groupDepth > 0) return mscclppSuccess;
  mscclppResult_t res = groupError;
  if (res == mscclppSuccess && groupComm != NULL) res = runP2p(groupComm, groupOps, groupCount, groupStream);
  groupCount = 0;
  groupComm = NULL;
  return res;
}

static mscclppResult_t p2p(const char* fn, int isSend, void* buf, size_t count, mscclppDataType_t type, int peer,
                           struct mscclppComm* comm, mscclppStream_t stream) {
  size_t ts = 1;
  mscclppResult_t res = checkCommon(fn, comm, type, &ts);
  if (res == mscclppSuccess) res = checkBuf(fn, isSend ? "sendbuff" : "recvbuff", buf, count, ts);
  if (res == mscclppSuccess && (peer < 0 || peer >= comm->nranks))
    res = mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_COLL, "%s: peer %d is not a rank of 0..%d", fn, peer,
                     comm->nranks - 1);
  struct mscclppCollP2pOp op = {isSend, peer, buf, count * ts};
  if (groupDepth == 0) {
    if (res != mscclppSuccess) return res;
    return runP2p(comm, &op, 1, stream);
  }
  if (res == mscclppSuccess && groupComm != NULL && (groupComm != comm || groupStream != stream))
    res = mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_COLL,
                     "%s: one group's sends and receives must use one "
                     "communicator and one stream",
                     fn);
  if (res == mscclppSuccess && groupCount == GROUP_MAX_OPS)
    res = mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_COLL, "%s: more than %d sends and receives in one group", fn,
                     GROUP_MAX_OPS);
  if (res != mscclppSuccess) {
    if (groupError == mscclppSuccess) groupError = res;
    return res;
  }
  groupComm = comm;
  groupStream = stream;
  groupOps[groupCount++] = op;
  return mscclppSuccess;
}

mscclppResult_t mscclppSend(const void* sendbuff, size_t count, mscclppDataType_t datatype, int peer,
                            mscclppComm_t comm, mscclppStream_t stream) {
  return p2p("mscclppSend", 1, (void*)(uintptr_t)sendbuff, count, datatype, peer, comm, stream);
}

mscclppResult_t mscclppRecv(void* recvbuff, size_t count, mscclppDataType_t datatype, int peer, mscclppComm_t comm,
                            mscclppStream_t stream) {
  return p2p("mscclppRecv", 0, recvbuff, count, datatype, peer, comm, stream);
}

/* ---- collectives
 * ----------------------------------------------------------------- */

static mscclppResult_t run(const char* fn, struct mscclppCollArgs* a, struct mscclppComm* comm, size_t sendElems,
                           size_t recvElems, int needSend, int needRecv) {
  MSCCLPP_RETURN_ON_ERROR(checkCommon(fn, comm, a->type, &a->typeSize));
  if ((unsigned)a->op >= mscclppNumOps)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_COLL, "%s: unknown reduction operator %d", fn, (int)a->op);
  if (a->root < 0 || a->root >= comm->nranks)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_COLL, "%s: root %d is not a rank of 0..%d", fn, a->root,
                      comm->nranks - 1);
  if (a->count > SIZE_MAX / a->typeSize / (size_t)comm->nranks)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_COLL, "%s: count %zu is too large", fn, a->count);
  if (needSend) MSCCLPP_RETURN_ON_ERROR(checkBuf(fn, "sendbuff", a->send, sendElems, a->typeSize));
  if (needRecv) MSCCLPP_RETURN_ON_ERROR(checkBuf(fn, "recvbuff", a->recv, recvElems, a->typeSize));
  if (a->plan != NULL && a->count > 0) MSCCLPP_RETURN_ON_ERROR(mscclppCollPlanCheck(fn, comm, a));
  MSCCLPP_RETURN_ON_ERROR(mscclppCollSelectForced(comm, a->kind, &a->algo));
  /* Counted from the call check on (it waits on the bootstrap, and a
   * revoke interrupts it). The check comes after the checks of this rank's
   * own arguments, which fail before any communication; a revoked
   * communicator skips it, so that its calls fail at once with its first
   * error instead of waiting on peers that have stopped. */
  mscclppCommCallBegin(comm);
  mscclppResult_t res = mscclppSuccess;
  if (comm->params.checkCalls != 0 && !__atomic_load_n(&comm->revoked, __ATOMIC_ACQUIRE))
    res = mscclppCollCheckCall(comm, a);
  if (res == mscclppSuccess && a->count > 0) res = mscclppCollDispatch(comm, a);
  mscclppCommCallEnd(comm);
  return res;
}

#define COLL_ARGS(k, s, r, c, t, o, rt, st) \
  { (k), (s), (r), (c), (t), 0, (o), (rt), (st), MSCCLPP_COLL_ALGO_AUTO, NULL, NULL }

mscclppResult_t mscclppAllReduce(const void* sendbuff, void* recvbuff, size_t count, mscclppDataType_t datatype,
                                 mscclppRedOp_t op, mscclppComm_t comm, mscclppStream_t stream) {
  struct mscclppCollArgs a = COLL_ARGS(MSCCLPP_COLL_ALLREDUCE, sendbuff, recvbuff, count, datatype, op, 0, stream);
  return run("mscclppAllReduce", &a, comm, count, count, 1, 1);
}

mscclppResult_t mscclppAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, mscclppDataType_t datatype,
                                 mscclppComm_t comm, mscclppStream_t stream) {
  struct mscclppCollArgs a =
      COLL_ARGS(MSCCLPP_COLL_ALLGATHER, sendbuff, recvbuff, sendcount, datatype, mscclppSum, 0, stream);
  size_t n = comm != NULL ? (size_t)comm->nranks : 1;
  return run("mscclppAllGather", &a, comm, sendcount, sendcount * n, 1, 1);
}

mscclppResult_t mscclppReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, mscclppDataType_t datatype,
                                     mscclppRedOp_t op, mscclppComm_t comm, mscclppStream_t stream) {
  struct mscclppCollArgs a =
      COLL_ARGS(MSCCLPP_COLL_REDUCESCATTER, sendbuff, recvbuff, recvcount, datatype, op, 0, stream);
  size_t n = comm != NULL ? (size_t)comm->nranks : 1;
  return run("mscclppReduceScatter", &a, comm, recvcount * n, recvcount, 1, 1);
}

mscclppResult_t mscclppBroadcast(const void* sendbuff, void* recvbuff, size_t count, mscclppDataType_t datatype,
                                 int root, mscclppComm_t comm, mscclppStream_t stream) {
  struct mscclppCollArgs a =
      COLL_ARGS(MSCCLPP_COLL_BROADCAST, sendbuff, recvbuff, count, datatype, mscclppSum, root, stream);
  int isRoot = comm != NULL && comm->rank == root;
  return run("mscclppBroadcast", &a, comm, count, count, isRoot, 1);
}

mscclppResult_t mscclppReduce(const void* sendbuff, void* recvbuff, size_t count, mscclppDataType_t datatype,
                              mscclppRedOp_t op, int root, mscclppComm_t comm, mscclppStream_t stream) {
  struct mscclppCollArgs a = COLL_ARGS(MSCCLPP_COLL_REDUCE, sendbuff, recvbuff, count, datatype, op, root, stream);
  int isRoot = comm != NULL && comm->rank == root;
  return run("mscclppReduce", &a, comm, count, count, 1, isRoot);
}

mscclppResult_t mscclppAllToAll(const void* sendbuff, void* recvbuff, size_t count, mscclppDataType_t datatype,
                                mscclppComm_t comm, mscclppStream_t stream) {
  struct mscclppCollArgs a =
      COLL_ARGS(MSCCLPP_COLL_ALLTOALL, sendbuff, recvbuff, count, datatype, mscclppSum, 0, stream);
  size_t n = comm != NULL ? (size_t)comm->nranks : 1;
  return run("mscclppAllToAll", &a, comm, count * n, count * n, 1, 1);
}

/* A plan's call: the arguments of the collective it implements (mscclpp/plan.h). */
mscclppResult_t mscclppPlanExecute(mscclppComm_t comm, mscclppPlan_t plan, const void* sendbuff, void* recvbuff,
                                   size_t count, mscclppDataType_t datatype, mscclppRedOp_t op,
                                   mscclppStream_t stream) {
  static const char fn[] = "mscclppPlanExecute";
  if (plan == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_COLL, "%s: plan is NULL", fn);
  const mscclppCollKind kind = mscclppCollPlanKind(plan);
  const int reduces = kind == MSCCLPP_COLL_ALLREDUCE || kind == MSCCLPP_COLL_REDUCESCATTER;
  struct mscclppCollArgs a =
      COLL_ARGS(kind, sendbuff, recvbuff, count, datatype, reduces ? op : mscclppSum, 0, stream);
  a.plan = plan;
  size_t n = comm != NULL ? (size_t)comm->nranks : 1;
  size_t sendElems = count * (kind == MSCCLPP_COLL_REDUCESCATTER || kind == MSCCLPP_COLL_ALLTOALL ? n : 1);
  size_t recvElems = count * (kind == MSCCLPP_COLL_ALLGATHER || kind == MSCCLPP_COLL_ALLTOALL ? n : 1);
  return run(fn, &a, comm, sendElems, recvElems, 1, 1);
}

/* ---- all-to-all-v
 * ---------------------------------------------------------------- */

/* One argument's bytes, for the overlap checks. */
struct argRange {
  const char* what;
  uintptr_t lo;
  size_t bytes;
  int written; /* the call writes it */
};

static int rangesOverlap(const struct argRange* a, const struct argRange* b) {
  if (a->bytes == 0 || b->bytes == 0) return 0;
  return a->lo <= b->lo ? b->lo - a->lo < a->bytes : a->lo - b->lo < b->bytes;
}

mscclppResult_t mscclppAllToAllv(const void* sendbuff, size_t sendcapacity, const size_t* sendcounts,
                                 const size_t* sdispls, void* recvbuff, size_t recvcapacity, size_t* recvcounts,
                                 size_t* rdispls, mscclppDataType_t datatype, mscclppComm_t comm,
                                 mscclppStream_t stream) {
  static const char fn[] = "mscclppAllToAllv";
  size_t ts = 1;
  MSCCLPP_RETURN_ON_ERROR(checkCommon(fn, comm, datatype, &ts));
  const void* arrays[4] = {sendcounts, sdispls, recvcounts, rdispls};
  static const char* const arrayNames[4] = {"sendcounts", "sdispls", "recvcounts", "rdispls"};
  for (int i = 0; i < 4; i++) {
    if (arrays[i] == NULL)
      return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_COLL,
                        "%s: %s is NULL (it holds one count per rank, %d, zeros included)", fn, arrayNames[i],
                        comm->nranks);
    if ((uintptr_t)arrays[i] % sizeof(size_t) != 0)
      return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_COLL, "%s: %s %p is not aligned to size_t", fn,
                        arrayNames[i], arrays[i]);
  }
  if (sendcapacity > SIZE_MAX / ts || recvcapacity > SIZE_MAX / ts)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_COLL,
                      "%s: a capacity of %zu elements of %zu bytes is too large", fn,
                      sendcapacity > recvcapacity ? sendcapacity : recvcapacity, ts);
  MSCCLPP_RETURN_ON_ERROR(checkBuf(fn, "sendbuff", sendbuff, sendcapacity, ts));
  MSCCLPP_RETURN_ON_ERROR(checkBuf(fn, "recvbuff", recvbuff, recvcapacity, ts));
  /* What the call writes overlaps nothing else: the kernel reads the inputs
   * while other blocks write, so an overlap would be a race. */
  const size_t countBytes = (size_t)comm->nranks * sizeof(size_t);
  const struct argRange r[6] = {
      {"sendbuff", (uintptr_t)sendbuff, sendcapacity * ts, 0},   {"sendcounts", (uintptr_t)sendcounts, countBytes, 0},
      {"sdispls", (uintptr_t)sdispls, countBytes, 0},           {"recvbuff", (uintptr_t)recvbuff, recvcapacity * ts, 1},
      {"recvcounts", (uintptr_t)recvcounts, countBytes, 1},     {"rdispls", (uintptr_t)rdispls, countBytes, 1}};
  for (int i = 0; i < 6; i++)
    for (int j = i + 1; j < 6; j++) {
      if (!(r[i].written || r[j].written) || !rangesOverlap(&r[i], &r[j])) continue;
      if (i == 0 && j == 3)
        return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_COLL,
                          "%s: in place is not supported: sendbuff %p (%zu elements) and recvbuff %p (%zu "
                          "elements) overlap; receive into another buffer",
                          fn, sendbuff, sendcapacity, recvbuff, recvcapacity);
      return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_COLL,
                        "%s: %s (%p, %zu bytes) overlaps %s (%p, %zu bytes): what the call writes must overlap "
                        "nothing else",
                        fn, r[i].what, (void*)r[i].lo, r[i].bytes, r[j].what, (void*)r[j].lo, r[j].bytes);
    }
  struct mscclppCollCounts v = {sendcounts, sdispls, recvcounts, rdispls, sendcapacity, recvcapacity};
  struct mscclppCollArgs a =
      COLL_ARGS(MSCCLPP_COLL_ALLTOALLV, sendbuff, recvbuff, recvcapacity, datatype, mscclppSum, 0, stream);
  a.typeSize = ts;
  a.v = &v;
  MSCCLPP_RETURN_ON_ERROR(mscclppCollSelectForced(comm, a.kind, &a.algo));
  /* no shortcut for zero capacities: every rank takes part and the counts are written */
  mscclppCommCallBegin(comm);
  mscclppResult_t res = mscclppCollDispatch(comm, &a);
  mscclppCommCallEnd(comm);
  return res;
}
