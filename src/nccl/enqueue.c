/* SPDX-License-Identifier: MIT */
/*
 * Collectives and send/recv: the NCCL calls become struct mscclppNcclOp
 * (group.c records or runs them); mscclppNcclOpsRun hands one
 * communicator's operations to mscclpp/coll.h in call order, its sends and
 * receives (gather and scatter included) as one mscclpp group. Operations
 * named in MSCCLPP_NCCL_FALLBACK_OPS, and collectives mscclpp refuses as
 * unsupported (mscclppInvalidUsage) when a fallback communicator exists, go
 * to the real NCCL instead. PreMulSum operators scale the input into a
 * temporary buffer, then sum.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "nccl/nccl_internal.h"

#ifdef MSCCLPP_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

const char* const mscclppNcclOpNames[MSCCLPP_NCCL_OP_KINDS] = {
    "allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall", "gather", "scatter", "send", "recv"};

static ncclResult_t fromM(mscclppResult_t r) { return mscclppNcclFromMscclpp(r); }

static int isP2p(enum mscclppNcclOpKind k) {
  return k == MSCCLPP_NCCL_OP_SEND || k == MSCCLPP_NCCL_OP_RECV || k == MSCCLPP_NCCL_OP_GATHER ||
         k == MSCCLPP_NCCL_OP_SCATTER;
}

/* A reduction with a PreMulSum operator: scale this rank's input, then sum. */
static ncclResult_t runPreMul(const struct mscclppNcclOp* o, const struct mscclppNcclUserOp* uop, size_t ts) {
  struct ncclComm* comm = o->comm;
  size_t inElems = o->kind == MSCCLPP_NCCL_OP_REDUCESCATTER ? o->count * (size_t)comm->nranks : o->count;
  if (inElems == 0) return ncclSuccess;
  if (o->send == NULL) return mscclppNcclErr(ncclInvalidArgument, "%s: sendbuff is NULL", mscclppNcclOpNames[o->kind]);
  void* tmp = NULL;
  ncclResult_t res = mscclppNcclTempAlloc(comm, inElems * ts, o->stream, &tmp);
  if (res != ncclSuccess) return res;
  res = mscclppNcclScale(comm, uop, tmp, o->send, inElems, o->stream);
  mscclppDataType_t t = (mscclppDataType_t)o->type;
  mscclppStream_t s = (mscclppStream_t)o->stream;
  if (res == ncclSuccess) {
    mscclppResult_t r = mscclppSuccess;
    switch (o->kind) {
      case MSCCLPP_NCCL_OP_ALLREDUCE: r = mscclppAllReduce(tmp, o->recv, o->count, t, mscclppSum, comm->mc, s); break;
      case MSCCLPP_NCCL_OP_REDUCE:
        r = mscclppReduce(tmp, o->recv, o->count, t, mscclppSum, o->root, comm->mc, s);
        break;
      case MSCCLPP_NCCL_OP_REDUCESCATTER:
        r = mscclppReduceScatter(tmp, o->recv, o->count, t, mscclppSum, comm->mc, s);
        break;
      default: r = mscclppErr(mscclppInternalError, MSCCLPP_LOG_NCCL, "PreMulSum on a collective without reduction");
    }
    res = fromM(r);
  }
  mscclppNcclTempFree(comm, tmp, o->stream);
  return res;
}

/* One collective (not send/recv, gather or scatter) on mscclpp. */
static ncclResult_t runColl(const struct mscclppNcclOp* o) {
  struct ncclComm* comm = o->comm;
  mscclppComm_t mc = comm->mc;
  mscclppDataType_t t = (mscclppDataType_t)o->type;
  mscclppStream_t s = (mscclppStream_t)o->stream;
  int reduces = o->kind == MSCCLPP_NCCL_OP_ALLREDUCE || o->kind == MSCCLPP_NCCL_OP_REDUCE ||
                o->kind == MSCCLPP_NCCL_OP_REDUCESCATTER;
  if (reduces) {
    struct mscclppNcclUserOp uop;
    int isUser = 0;
    ncclResult_t res = mscclppNcclUserOpGet(comm, o->op, o->type, mscclppNcclOpNames[o->kind], &uop, &isUser);
    if (res != ncclSuccess) return res;
    if (isUser) {
      size_t ts = mscclppDataTypeSize(t);
      if (ts == 0)
        return mscclppNcclErr(ncclInvalidArgument, "%s: unknown data type %d", mscclppNcclOpNames[o->kind],
                              (int)o->type);
      return runPreMul(o, &uop, ts);
    }
  }
  mscclppRedOp_t op = (mscclppRedOp_t)o->op;
  mscclppResult_t r = mscclppSuccess;
  switch (o->kind) {
    case MSCCLPP_NCCL_OP_ALLREDUCE: r = mscclppAllReduce(o->send, o->recv, o->count, t, op, mc, s); break;
    case MSCCLPP_NCCL_OP_ALLGATHER: r = mscclppAllGather(o->send, o->recv, o->count, t, mc, s); break;
    case MSCCLPP_NCCL_OP_REDUCESCATTER: r = mscclppReduceScatter(o->send, o->recv, o->count, t, op, mc, s); break;
    case MSCCLPP_NCCL_OP_BROADCAST: r = mscclppBroadcast(o->send, o->recv, o->count, t, o->root, mc, s); break;
    case MSCCLPP_NCCL_OP_REDUCE: r = mscclppReduce(o->send, o->recv, o->count, t, op, o->root, mc, s); break;
    case MSCCLPP_NCCL_OP_ALLTOALL: r = mscclppAllToAll(o->send, o->recv, o->count, t, mc, s); break;
    default: r = mscclppErr(mscclppInternalError, MSCCLPP_LOG_NCCL, "runColl: operation %d", (int)o->kind);
  }
  if (r == mscclppInvalidUsage && comm->real != NULL) {
    MSCCLPP_INFO(MSCCLPP_LOG_NCCL,
                 "%s: not supported by mscclpp here (reason logged above); running it on the fallback NCCL",
                 mscclppNcclOpNames[o->kind]);
    return mscclppNcclFallbackRun(o);
  }
  return fromM(r);
}

/* Queue a send/recv (or gather/scatter's) on the open mscclpp group. */
static ncclResult_t queueP2p(const struct mscclppNcclOp* o, mscclppStream_t s) {
  struct ncclComm* comm = o->comm;
  mscclppComm_t mc = comm->mc;
  mscclppDataType_t t = (mscclppDataType_t)o->type;
  size_t ts = mscclppDataTypeSize(t);
  const char* fn = mscclppNcclOpNames[o->kind];
  switch (o->kind) {
    case MSCCLPP_NCCL_OP_SEND: return fromM(mscclppSend(o->send, o->count, t, o->root, mc, s));
    case MSCCLPP_NCCL_OP_RECV: return fromM(mscclppRecv(o->recv, o->count, t, o->root, mc, s));
    case MSCCLPP_NCCL_OP_GATHER:
    case MSCCLPP_NCCL_OP_SCATTER: {
      if (ts == 0) return mscclppNcclErr(ncclInvalidArgument, "%s: unknown data type %d", fn, (int)o->type);
      if (o->root < 0 || o->root >= comm->nranks)
        return mscclppNcclErr(ncclInvalidArgument, "%s: root %d is not a rank of 0..%d", fn, o->root, comm->nranks - 1);
      if (o->count == 0) return ncclSuccess;
      int gather = o->kind == MSCCLPP_NCCL_OP_GATHER;
      size_t bytes = o->count * ts;
      if (comm->rank != o->root)
        return gather ? fromM(mscclppSend(o->send, o->count, t, o->root, mc, s))
                      : fromM(mscclppRecv(o->recv, o->count, t, o->root, mc, s));
      /* the root: one receive (gather) or send (scatter) per rank */
      uint8_t* many = gather ? (uint8_t*)o->recv : (uint8_t*)(uintptr_t)o->send;
      if (many == NULL)
        return mscclppNcclErr(ncclInvalidArgument, "%s: the root's %s is NULL", fn, gather ? "recvbuff" : "sendbuff");
      for (int r = 0; r < comm->nranks; r++) {
        uint8_t* slot = many + (size_t)r * bytes;
        mscclppResult_t m;
        if (r == comm->rank) {
          /* in place: the root's own slice is already there */
          if ((gather && (const void*)slot == o->send) || (!gather && (void*)slot == o->recv)) continue;
          m = gather ? mscclppSend(o->send, o->count, t, r, mc, s) : mscclppRecv(o->recv, o->count, t, r, mc, s);
          if (m != mscclppSuccess) return fromM(m);
        }
        m = gather ? mscclppRecv(slot, o->count, t, r, mc, s) : mscclppSend(slot, o->count, t, r, mc, s);
        if (m != mscclppSuccess) return fromM(m);
      }
      return ncclSuccess;
    }
    default: return mscclppNcclErr(ncclInternalError, "queueP2p: operation %d", (int)o->kind);
  }
}

/* Is op forced to the fallback by MSCCLPP_NCCL_FALLBACK_OPS? (PreMulSum
 * operators are mscclpp's own: such calls stay here.) */
static int forced(const struct mscclppNcclOp* o) {
  if (o->comm->real == NULL || (o->comm->fallbackOps & (1u << o->kind)) == 0) return 0;
  int reduces = o->kind == MSCCLPP_NCCL_OP_ALLREDUCE || o->kind == MSCCLPP_NCCL_OP_REDUCE ||
                o->kind == MSCCLPP_NCCL_OP_REDUCESCATTER;
  return !reduces || (int)o->op < (int)ncclNumOps;
}

#ifdef MSCCLPP_HAVE_CUDA
/* The p2p operations of one group use several streams: make `main` wait for
 * the others before, and the others wait for `main` after (each=1). */
static ncclResult_t joinStreams(const struct mscclppNcclOp* ops, int nops, cudaStream_t main, int after) {
  for (int i = 0; i < nops; i++) {
    if (!isP2p(ops[i].kind) || ops[i].stream == main || forced(&ops[i])) continue;
    int dup = 0;
    for (int j = 0; j < i && !dup; j++) dup = isP2p(ops[j].kind) && ops[j].stream == ops[i].stream;
    if (dup) continue;
    cudaEvent_t ev;
    cudaStream_t from = after ? main : (cudaStream_t)ops[i].stream;
    cudaStream_t to = after ? (cudaStream_t)ops[i].stream : main;
    cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventRecord(ev, from);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(to, ev, 0);
    (void)cudaEventDestroy(ev);
    if (e != cudaSuccess)
      return mscclppNcclErr(ncclUnhandledCudaError, "ordering a group's streams: %s", cudaGetErrorString(e));
  }
  return ncclSuccess;
}
#endif

ncclResult_t mscclppNcclOpsRun(const struct mscclppNcclOp* ops, int nops) {
  struct ncclComm* comm = ops[0].comm;
  ncclResult_t res = mscclppNcclCommReady(comm, mscclppNcclOpNames[ops[0].kind]);
  if (res == ncclSuccess) res = mscclppNcclCommNotRevoked(comm, mscclppNcclOpNames[ops[0].kind]);
  if (res != ncclSuccess) return res;
  if (nops == 1 && !isP2p(ops[0].kind)) return forced(&ops[0]) ? mscclppNcclFallbackRun(&ops[0]) : runColl(&ops[0]);

  /* every send/recv of the group goes on the first one's stream */
  int nfwd = 0, np2p = 0;
  cudaStream_t p2pStream = NULL;
  for (int i = 0; i < nops; i++) {
    if (forced(&ops[i])) {
      nfwd++;
    } else if (isP2p(ops[i].kind)) {
      if (np2p++ == 0) p2pStream = ops[i].stream;
    }
  }
  int severalStreams = 0;
  for (int i = 0; i < nops; i++)
    if (isP2p(ops[i].kind) && !forced(&ops[i]) && ops[i].stream != p2pStream) severalStreams = 1;
  (void)severalStreams; /* streams exist only in CUDA builds */
#ifdef MSCCLPP_HAVE_CUDA
  if (severalStreams && comm->device >= 0) {
    res = joinStreams(ops, nops, p2pStream, 0);
    if (res != ncclSuccess) return res;
  }
#endif

  (void)mscclppGroupStart();
  for (int i = 0; i < nops && res == ncclSuccess; i++) {
    if (forced(&ops[i])) continue;
    if (isP2p(ops[i].kind))
      res = queueP2p(&ops[i], (mscclppStream_t)p2pStream);
    else
      res = runColl(&ops[i]);
  }
  ncclResult_t end = fromM(mscclppGroupEnd());
  if (res == ncclSuccess) res = end;
#ifdef MSCCLPP_HAVE_CUDA
  if (res == ncclSuccess && severalStreams && comm->device >= 0) res = joinStreams(ops, nops, p2pStream, 1);
#endif
  if (res != ncclSuccess || nfwd == 0) return res;

  res = mscclppNcclFallbackGroup(1);
  for (int i = 0; i < nops && res == ncclSuccess; i++)
    if (forced(&ops[i])) res = mscclppNcclFallbackRun(&ops[i]);
  ncclResult_t fend = mscclppNcclFallbackGroup(0);
  return res != ncclSuccess ? res : fend;
}

/* ---- the API ---------------------------------------------------------------------- */

static ncclResult_t submit(enum mscclppNcclOpKind kind, const void* send, void* recv, size_t count, ncclDataType_t type,
                           ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream, const char* fn) {
  struct mscclppNcclOp o = {kind, send, recv, count, type, op, root, comm, stream};
  return mscclppNcclOpSubmit(&o, fn);
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return submit(MSCCLPP_NCCL_OP_ALLREDUCE, sendbuff, recvbuff, count, datatype, op, 0, comm, stream, "ncclAllReduce");
}
NCCL_PROFILING_ALIAS(ncclAllReduce);

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  return submit(MSCCLPP_NCCL_OP_ALLGATHER, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, comm, stream,
                "ncclAllGather");
}
NCCL_PROFILING_ALIAS(ncclAllGather);

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return submit(MSCCLPP_NCCL_OP_REDUCESCATTER, sendbuff, recvbuff, recvcount, datatype, op, 0, comm, stream,
                "ncclReduceScatter");
}
NCCL_PROFILING_ALIAS(ncclReduceScatter);

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  return submit(MSCCLPP_NCCL_OP_BROADCAST, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream,
                "ncclBroadcast");
}
NCCL_PROFILING_ALIAS(ncclBroadcast);

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream) {
  return submit(MSCCLPP_NCCL_OP_BROADCAST, buff, buff, count, datatype, ncclSum, root, comm, stream, "ncclBcast");
}
NCCL_PROFILING_ALIAS(ncclBcast);

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  return submit(MSCCLPP_NCCL_OP_REDUCE, sendbuff, recvbuff, count, datatype, op, root, comm, stream, "ncclReduce");
}
NCCL_PROFILING_ALIAS(ncclReduce);

ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                          ncclComm_t comm, cudaStream_t stream) {
  return submit(MSCCLPP_NCCL_OP_ALLTOALL, sendbuff, recvbuff, count, datatype, ncclSum, 0, comm, stream,
                "ncclAlltoAll");
}
NCCL_PROFILING_ALIAS(ncclAlltoAll);

ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream) {
  return submit(MSCCLPP_NCCL_OP_GATHER, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream, "ncclGather");
}
NCCL_PROFILING_ALIAS(ncclGather);

ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream) {
  return submit(MSCCLPP_NCCL_OP_SCATTER, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream,
                "ncclScatter");
}
NCCL_PROFILING_ALIAS(ncclScatter);

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return submit(MSCCLPP_NCCL_OP_SEND, sendbuff, NULL, count, datatype, ncclSum, peer, comm, stream, "ncclSend");
}
NCCL_PROFILING_ALIAS(ncclSend);

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return submit(MSCCLPP_NCCL_OP_RECV, NULL, recvbuff, count, datatype, ncclSum, peer, comm, stream, "ncclRecv");
}
NCCL_PROFILING_ALIAS(ncclRecv);
