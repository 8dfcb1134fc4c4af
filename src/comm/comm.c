/* SPDX-License-Identifier: MIT */
/* Communicator creation and destruction, queries, and the public bootstrap
 * operations (which forward to the bootstrap layer). */
#include "comm/comm.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "core/report.h"
#include "core/trace.h"
#include "gpu/abort.h"
#include "memory/memory.h"
#include "mscclpp/seed.h"

static mscclppResult_t checkComm(mscclppComm_t comm, const char* fn) {
  if (comm == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_INIT, "%s: comm is NULL", fn);
  return mscclppSuccess;
}

static mscclppResult_t checkRanks(int nranks, int rank, const char* fn) {
  if (nranks <= 0 || nranks > MSCCLPP_BS_MAX_RANKS)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_INIT, "%s: nranks=%d is outside [1, %d]", fn, nranks,
                      MSCCLPP_BS_MAX_RANKS);
  if (rank < 0 || rank >= nranks)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_INIT, "%s: rank=%d is outside [0, nranks=%d)", fn, rank,
                      nranks);
  return mscclppSuccess;
}

/* Load the parameter snapshot and configure logging from it. */
static mscclppResult_t loadParams(struct mscclppParams* params) {
  MSCCLPP_RETURN_ON_ERROR(mscclppParamsLoad(params));
  mscclppLogConfigure(params);
  return mscclppSuccess;
}

static mscclppCommPrepareFn prepareHook;

void mscclppCommSetPrepareHook(mscclppCommPrepareFn fn) { prepareHook = fn; }

mscclppResult_t mscclppCommPrepare(struct mscclppComm* comm) {
  if (prepareHook == NULL) return mscclppSuccess; /* it reads MSCCLPP_COLL_PREPARE itself */
  return prepareHook(comm);
}

/* Round trips with rank 0 that measure a traced communicator's clock offset. */
#define TRACE_CLOCK_ROUNDS 8

/* A traced communicator names the trace file if it is the process's first,
 * and measures its clock offset to its rank 0 (every traced communicator
 * does, so that its ranks agree without asking each other). */
static mscclppResult_t traceStart(struct mscclppComm* comm) {
  int names = mscclppTraceSetIdentity(comm->rank, comm->nranks, comm->id);
  int64_t offset = 0, rtt = 0;
  MSCCLPP_RETURN_ON_ERROR(mscclppBootstrapClockSync(comm->bootstrap, TRACE_CLOCK_ROUNDS, &offset, &rtt));
  if (names) mscclppTraceSetClock(offset, rtt);
  return mscclppSuccess;
}

static void traceCreated(const struct mscclppComm* comm, int rank, int nranks, uint64_t t0, mscclppResult_t res) {
  MSCCLPP_TRACE_EMIT(MSCCLPP_TRACE_COMM_INIT, t0, mscclppTraceNow(), comm != NULL ? comm->id : 0,
                     MSCCLPP_TRACE_I(rank), MSCCLPP_TRACE_I(nranks),
                     MSCCLPP_TRACE_I(comm != NULL ? comm->localRank : -1),
                     MSCCLPP_TRACE_I(comm != NULL ? comm->localNranks : 0), MSCCLPP_TRACE_I(res));
}

/* mscclppCommFromBootstrap once the trace session is held (traced) and the
 * creation's span has begun (t0, 0 when not tracing): both are the
 * communicator's from here, given back on failure. */
static mscclppResult_t fromBootstrap(const struct mscclppParams* params, struct mscclppBootstrap* bs,
                                     const char* source, int prepare, int traced, uint64_t t0, mscclppComm_t* out) {
  struct mscclppComm* comm = (struct mscclppComm*)calloc(1, sizeof(*comm));
  if (comm == NULL) {
    int rank = -1, nranks = 0;
    mscclppBootstrapIdentity(bs, &rank, &nranks);
    mscclppBootstrapDestroy(bs);
    mscclppResult_t res = mscclppErr(mscclppSystemError, MSCCLPP_LOG_INIT, "out of memory for a communicator");
    if (t0 != 0) traceCreated(NULL, rank, nranks, t0, res);
    if (traced) mscclppTraceRelease();
    return res;
  }
  comm->params = *params;
  comm->device = -1;
  pthread_mutex_init(&comm->lazyLock, NULL);
  comm->bootstrap = bs;
  mscclppBootstrapIdentity(bs, &comm->rank, &comm->nranks);
  mscclppLogSetRank(comm->rank);
  comm->id = mscclppBootstrapJobHash(bs);
  comm->traced = traced;
  comm->report = mscclppReportOpen(&comm->params, comm->rank, comm->nranks, comm->id);
  mscclppCommReportAttach(comm);
  mscclppBootstrapLocalInfo(comm->bootstrap, &comm->localRank, &comm->localNranks);
  MSCCLPP_INFO(MSCCLPP_LOG_INIT, "communicator created: rank %d of %d, local rank %d of %d (%s)", comm->rank,
               comm->nranks, comm->localRank, comm->localNranks, source);
  mscclppResult_t res = mscclppSuccess;
  if (traced) res = traceStart(comm);
  if (res == mscclppSuccess && prepare) res = mscclppCommPrepare(comm); /* the hook logs why it fails */
  if (t0 != 0) traceCreated(comm, comm->rank, comm->nranks, t0, res);
  if (res != mscclppSuccess) {
    (void)mscclppCommDestroy(comm); /* leaves the trace session too */
    return res;
  }
  *out = comm;
  return mscclppSuccess;
}

mscclppResult_t mscclppCommFromBootstrap(const struct mscclppParams* params, struct mscclppBootstrap* bs,
                                         const char* source, int prepare, mscclppComm_t* out) {
  const int traced = params->trace[0] != '\0';
  if (traced) {
    mscclppResult_t res = mscclppTraceAcquire(params->trace, params->traceEvents);
    if (res != mscclppSuccess) {
      mscclppBootstrapDestroy(bs);
      return res;
    }
  }
  return fromBootstrap(params, bs, source, prepare, traced, mscclppTraceBegin(), out);
}

static mscclppResult_t commCreate(const struct mscclppParams* params, const struct mscclppBootstrapJob* job,
                                  int prepare, mscclppComm_t* out) {
  mscclppLogSetRank(job->rank);
  /* the session is held before the bootstrap, so that its phases are traced */
  const int traced = params->trace[0] != '\0';
  if (traced) MSCCLPP_RETURN_ON_ERROR(mscclppTraceAcquire(params->trace, params->traceEvents));
  uint64_t t0 = mscclppTraceBegin();
  struct mscclppBootstrap* bs = NULL;
  mscclppResult_t res = mscclppBootstrapCreate(job, params, &bs);
  if (res != mscclppSuccess) {
    if (t0 != 0) traceCreated(NULL, job->rank, job->nranks, t0, res);
    if (traced) mscclppTraceRelease();
    return res;
  }
  return fromBootstrap(params, bs, job->source, prepare, traced, t0, out);
}

mscclppResult_t mscclppGetUniqueId(mscclppUniqueId* uniqueId) {
  if (uniqueId == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_INIT, "mscclppGetUniqueId: uniqueId is NULL");
  struct mscclppParams params;
  MSCCLPP_RETURN_ON_ERROR(loadParams(&params));
  uint8_t id[MSCCLPP_BS_ID_BYTES];
  MSCCLPP_RETURN_ON_ERROR(mscclppBootstrapCreateId(&params, id));
  _Static_assert(sizeof(uniqueId->internal) == MSCCLPP_BS_ID_BYTES, "unique id size");
  memcpy(uniqueId->internal, id, sizeof(id));
  return mscclppSuccess;
}

static mscclppResult_t initFromId(mscclppComm_t* comm, int nranks, mscclppUniqueId id, int rank, int prepare,
                                  const int* cancel) {
  static const char fn[] = "mscclppCommInitRankFromId";
  if (comm == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_INIT, "%s: comm is NULL", fn);
  MSCCLPP_RETURN_ON_ERROR(checkRanks(nranks, rank, fn));
  struct mscclppParams params;
  MSCCLPP_RETURN_ON_ERROR(loadParams(&params));
  struct mscclppBootstrapJob job;
  MSCCLPP_RETURN_ON_ERROR(mscclppBootstrapJobFromId((const uint8_t*)id.internal, rank, nranks, &job));
  job.cancel = cancel;
  return commCreate(&params, &job, prepare, comm);
}

mscclppResult_t mscclppCommInitRankFromId(mscclppComm_t* comm, int nranks, mscclppUniqueId id, int rank) {
  return initFromId(comm, nranks, id, rank, 1, NULL);
}

mscclppResult_t mscclppCommInitRankFromIdUnprepared(mscclppComm_t* comm, int nranks, mscclppUniqueId id, int rank,
                                                   const int* cancel) {
  return initFromId(comm, nranks, id, rank, 0, cancel);
}

mscclppResult_t mscclppCommInitRank(mscclppComm_t* comm, int nranks, int rank, const char* ipPortPair) {
  static const char fn[] = "mscclppCommInitRank";
  if (comm == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_INIT, "%s: comm is NULL", fn);
  if (ipPortPair == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_INIT, "%s: ipPortPair is NULL", fn);
  MSCCLPP_RETURN_ON_ERROR(checkRanks(nranks, rank, fn));
  struct mscclppParams params;
  MSCCLPP_RETURN_ON_ERROR(loadParams(&params));
  struct mscclppBootstrapJob job;
  MSCCLPP_RETURN_ON_ERROR(mscclppBootstrapJobFromAddress(&params, ipPortPair, rank, nranks, &job));
  return commCreate(&params, &job, 1, comm);
}

mscclppResult_t mscclppCommInitFromEnv(mscclppComm_t* comm) {
  if (comm == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_INIT, "mscclppCommInitFromEnv: comm is NULL");
  struct mscclppParams params;
  MSCCLPP_RETURN_ON_ERROR(loadParams(&params));
  struct mscclppBootstrapJob job;
  MSCCLPP_RETURN_ON_ERROR(mscclppBootstrapJobFromEnv(&params, &job));
  return commCreate(&params, &job, 1, comm);
}

mscclppResult_t mscclppCommDestroy(mscclppComm_t comm) {
  MSCCLPP_RETURN_ON_ERROR(checkComm(comm, "mscclppCommDestroy"));
  uint64_t t0 = mscclppTraceBegin();
  /* a kernel's error not read yet becomes the first error now, its hang
   * report with this communicator's details; then the report reads no more
   * of it (a refusal below attaches again) */
  struct mscclppAbort* abort = __atomic_load_n(&comm->abort, __ATOMIC_ACQUIRE);
  if (abort != NULL) (void)mscclppAbortPollDevice(abort);
  mscclppCommReportDetach(comm);
  if (comm->collRelease != NULL) comm->collRelease(comm); /* collectives' channels and scratch */
  mscclppSeedRelease(comm);                               /* the seed API's connections are the comm's */
  mscclppResult_t res = mscclppCommChannelsRelease(comm); /* refuses while channels live */
  if (res == mscclppSuccess) res = mscclppMemContextDestroy(comm->mem); /* refuses while memory or connections live */
  if (res != mscclppSuccess) {
    mscclppCommReportAttach(comm);
    return res;
  }
  mscclppCommAbortRelease(comm); /* after the memory layer's waits and the proxy are gone */
  mscclppBootstrapDestroy(comm->bootstrap);
  if (t0 != 0)
    MSCCLPP_TRACE_EMIT(MSCCLPP_TRACE_COMM_DESTROY, t0, mscclppTraceNow(), comm->id, MSCCLPP_TRACE_I(comm->rank));
  if (comm->traced) mscclppTraceRelease(); /* the last one out writes the file */
  mscclppReportClose(comm->report);
  pthread_mutex_destroy(&comm->lazyLock);
  free(comm);
  return mscclppSuccess;
}

mscclppResult_t mscclppCommRank(mscclppComm_t comm, int* rank) {
  MSCCLPP_RETURN_ON_ERROR(checkComm(comm, "mscclppCommRank"));
  if (rank == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_INIT, "mscclppCommRank: rank is NULL");
  *rank = comm->rank;
  return mscclppSuccess;
}

mscclppResult_t mscclppCommSize(mscclppComm_t comm, int* nranks) {
  MSCCLPP_RETURN_ON_ERROR(checkComm(comm, "mscclppCommSize"));
  if (nranks == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_INIT, "mscclppCommSize: nranks is NULL");
  *nranks = comm->nranks;
  return mscclppSuccess;
}

mscclppResult_t mscclppCommLocalRank(mscclppComm_t comm, int* localRank) {
  MSCCLPP_RETURN_ON_ERROR(checkComm(comm, "mscclppCommLocalRank"));
  if (localRank == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_INIT, "mscclppCommLocalRank: localRank is NULL");
  *localRank = comm->localRank;
  return mscclppSuccess;
}

mscclppResult_t mscclppCommLocalSize(mscclppComm_t comm, int* localNranks) {
  MSCCLPP_RETURN_ON_ERROR(checkComm(comm, "mscclppCommLocalSize"));
  if (localNranks == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_INIT, "mscclppCommLocalSize: localNranks is NULL");
  *localNranks = comm->localNranks;
  return mscclppSuccess;
}

mscclppResult_t mscclppCommGetDevice(mscclppComm_t comm, int* device) {
  MSCCLPP_RETURN_ON_ERROR(checkComm(comm, "mscclppCommGetDevice"));
  if (device == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_INIT, "mscclppCommGetDevice: device is NULL");
  struct mscclppAbort* abort = NULL; /* made on first use, with the device (comm_abort.c) */
  MSCCLPP_RETURN_ON_ERROR(mscclppCommAbortOf(comm, &abort));
  *device = comm->device;
  return mscclppSuccess;
}

mscclppResult_t mscclppCommGetAsyncError(mscclppComm_t comm, mscclppResult_t* asyncError) {
  MSCCLPP_RETURN_ON_ERROR(checkComm(comm, "mscclppCommGetAsyncError"));
  if (asyncError == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_INIT, "mscclppCommGetAsyncError: asyncError is NULL");
  /* The abort object's first error (proxy, kernels, application), else a
   * peer the bootstrap lost. */
  return mscclppCommAsyncError(comm, asyncError);
}

mscclppResult_t mscclppBootstrapAllGather(mscclppComm_t comm, void* data, size_t bytesPerRank) {
  MSCCLPP_RETURN_ON_ERROR(checkComm(comm, "mscclppBootstrapAllGather"));
  mscclppCommCallBegin(comm);
  mscclppResult_t res = mscclppBootstrapAllGatherBytes(comm->bootstrap, data, bytesPerRank);
  mscclppCommCallEnd(comm);
  return res;
}

mscclppResult_t mscclppBootStrapAllGather(mscclppComm_t comm, void* data, int bytesPerRank) {
  MSCCLPP_RETURN_ON_ERROR(checkComm(comm, "mscclppBootStrapAllGather"));
  if (bytesPerRank < 0)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_BOOTSTRAP, "mscclppBootStrapAllGather: bytesPerRank=%d < 0",
                      bytesPerRank);
  return mscclppBootstrapAllGather(comm, data, (size_t)bytesPerRank);
}

mscclppResult_t mscclppBootstrapBarrier(mscclppComm_t comm) {
  MSCCLPP_RETURN_ON_ERROR(checkComm(comm, "mscclppBootstrapBarrier"));
  mscclppCommCallBegin(comm);
  mscclppResult_t res = mscclppBootstrapBarrierWait(comm->bootstrap);
  mscclppCommCallEnd(comm);
  return res;
}

mscclppResult_t mscclppBootstrapSend(mscclppComm_t comm, int peer, int tag, const void* data, size_t size) {
  MSCCLPP_RETURN_ON_ERROR(checkComm(comm, "mscclppBootstrapSend"));
  mscclppCommCallBegin(comm);
  mscclppResult_t res = mscclppBootstrapSendTo(comm->bootstrap, peer, tag, data, size);
  mscclppCommCallEnd(comm);
  return res;
}

mscclppResult_t mscclppBootstrapRecv(mscclppComm_t comm, int peer, int tag, void* data, size_t size) {
  MSCCLPP_RETURN_ON_ERROR(checkComm(comm, "mscclppBootstrapRecv"));
  mscclppCommCallBegin(comm);
  mscclppResult_t res = mscclppBootstrapRecvFrom(comm->bootstrap, peer, tag, data, size);
  mscclppCommCallEnd(comm);
  return res;
}
