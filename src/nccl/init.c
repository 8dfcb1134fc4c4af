/* SPDX-License-Identifier: MIT */
/*
 * NCCL communicators on mscclpp communicators, from their creation to their
 * end: unique ids, the wrapper and its checks, init (blocking, nonblocking,
 * inside a group), ncclCommInitAll, finalize, destroy, abort and revoke.
 * Split and shrink make their communicators with the same join (split.c).
 *
 * A join (the mscclpp communicator's creation, then the fallback NCCL's
 * communicator when MSCCLPP_NCCL_FALLBACK is set) runs on the caller's
 * thread when blocking and alone, else on a thread of its own
 * (nonblocking, ncclCommInitAll, grouped inits); its result lands in
 * comm->initState under comm->lock.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/comm.h"
#include "core/error.h"
#include "core/log.h"
#include "core/params.h"
#include "core/util.h"
#include "gpu/gpu.h"
#include "gpu/gpu_ipc.h"
#include "mscclpp/port_channel.h"
#include "nccl/nccl_internal.h"

/* Pass an mscclpp failure up as NCCL's status (already logged and recorded). */
static ncclResult_t fromM(mscclppResult_t res) { return mscclppNcclFromMscclpp(res); }

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  if (uniqueId == NULL) return mscclppNcclErr(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  _Static_assert(sizeof(ncclUniqueId) == sizeof(mscclppUniqueId), "unique id sizes");
  mscclppUniqueId id;
  mscclppResult_t res = mscclppGetUniqueId(&id);
  if (res != mscclppSuccess) return fromM(res);
  memcpy(uniqueId->internal, id.internal, sizeof(uniqueId->internal));
  return ncclSuccess;
}
NCCL_PROFILING_ALIAS(ncclGetUniqueId);

/* ---- the wrapper -------------------------------------------------------------------- */

ncclResult_t mscclppNcclCommCheck(const struct ncclComm* comm, const char* fn) {
  if (comm == NULL) return mscclppNcclErr(ncclInvalidArgument, "%s: comm is NULL", fn);
  if (comm->magic != MSCCLPP_NCCL_COMM_MAGIC)
    return mscclppNcclErr(ncclInvalidArgument, "%s: comm %p is not a live communicator", fn, (const void*)comm);
  return ncclSuccess;
}

/* Wait until the join has ended (the thread, if any, is joined). */
static void waitJoined(struct ncclComm* comm) {
  pthread_mutex_lock(&comm->lock);
  while (comm->joining) pthread_cond_wait(&comm->cond, &comm->lock);
  int joinIt = comm->joinThreadStarted;
  comm->joinThreadStarted = 0;
  pthread_mutex_unlock(&comm->lock);
  if (joinIt) pthread_join(comm->joinThread, NULL);
}

ncclResult_t mscclppNcclCommReady(struct ncclComm* comm, const char* fn) {
  ncclResult_t res = mscclppNcclCommCheck(comm, fn);
  if (res != ncclSuccess) return res;
  pthread_mutex_lock(&comm->lock);
  int notStarted = comm->joining && !comm->joinThreadStarted;
  pthread_mutex_unlock(&comm->lock);
  if (notStarted)
    return mscclppNcclErr(ncclInvalidUsage,
                          "%s: the communicator is created by the enclosing group; use it after ncclGroupEnd", fn);
  waitJoined(comm);
  pthread_mutex_lock(&comm->lock);
  ncclResult_t state = comm->initState;
  int finalized = comm->finalized;
  pthread_mutex_unlock(&comm->lock);
  if (state != ncclSuccess)
    return mscclppNcclErrAgain(state, "%s: the communicator's initialization failed: %s", fn, comm->initError);
  if (finalized) return mscclppNcclErr(ncclInvalidUsage, "%s: the communicator was finalized", fn);
  return ncclSuccess;
}

ncclResult_t mscclppNcclCommNotRevoked(struct ncclComm* comm, const char* fn) {
  pthread_mutex_lock(&comm->lock);
  int revoked = comm->revoked;
  pthread_mutex_unlock(&comm->lock);
  if (revoked)
    return mscclppNcclErr(ncclInvalidUsage,
                          "%s: the communicator was revoked; shrink it (ncclCommShrink) or destroy it", fn);
  return ncclSuccess;
}

ncclResult_t mscclppNcclCommNew(int nranks, int rank, int device, int blocking, const char* name,
                                struct ncclComm** out) {
  struct ncclComm* c = (struct ncclComm*)calloc(1, sizeof(*c));
  if (c == NULL) return mscclppNcclErr(ncclSystemError, "out of memory for a communicator");
  pthread_mutex_init(&c->lock, NULL);
  pthread_cond_init(&c->cond, NULL);
  c->magic = MSCCLPP_NCCL_COMM_MAGIC;
  c->initState = ncclInProgress;
  c->nranks = nranks;
  c->rank = rank;
  c->device = device;
  c->blocking = blocking;
  snprintf(c->name, sizeof(c->name), "%s", name != NULL ? name : "");
  *out = c;
  return ncclSuccess;
}

void mscclppNcclCommFree(struct ncclComm* c) {
  struct mscclppNcclRegistration* r = c->regs;
  while (r != NULL) {
    struct mscclppNcclRegistration* next = r->next;
    r->magic = 0;
    free(r);
    r = next;
  }
  free(c->shrinkExclude);
  c->magic = 0;
  pthread_cond_destroy(&c->cond);
  pthread_mutex_destroy(&c->lock);
  free(c);
}

/* The CUDA device current on this thread, or the host backend's. */
static int currentDevice(void) {
  int dev = MSCCLPP_HOST_BACKEND_DEVICE;
  if (mscclppGpuIpcAvailable() && mscclppGpuIpcCurrentDevice(&dev) != mscclppSuccess)
    dev = MSCCLPP_HOST_BACKEND_DEVICE;
  return dev;
}

/* Read what matters of a config: magic checked, fields only within its size
 * (an older NCCL's smaller struct is accepted). */
ncclResult_t mscclppNcclReadConfig(const ncclConfig_t* config, const char* fn, int defaultBlocking, int* blocking,
                                   const char** name) {
  *blocking = defaultBlocking;
  *name = NULL;
  if (config == NULL) return ncclSuccess;
  if (config->magic != MSCCLPP_NCCL_CONFIG_MAGIC)
    return mscclppNcclErr(ncclInvalidArgument,
                          "%s: config->magic is 0x%x, not 0x%x: initialize ncclConfig_t with NCCL_CONFIG_INITIALIZER",
                          fn, config->magic, MSCCLPP_NCCL_CONFIG_MAGIC);
  if (config->size < offsetof(ncclConfig_t, blocking) + sizeof(int))
    return mscclppNcclErr(ncclInvalidArgument, "%s: config->size %zu is too small for an ncclConfig_t", fn,
                          config->size);
  if (config->blocking != NCCL_CONFIG_UNDEF_INT) {
    if (config->blocking != 0 && config->blocking != 1)
      return mscclppNcclErr(ncclInvalidArgument, "%s: config->blocking is %d, not 0 or 1", fn, config->blocking);
    *blocking = config->blocking;
  }
  if (config->size >= offsetof(ncclConfig_t, commName) + sizeof(const char*)) *name = config->commName;
  return ncclSuccess;
}

/* The join proper: the mscclpp communicator, then the fallback's. Runs on
 * the caller's thread or a join thread; touches only comm's join fields. */
static ncclResult_t joinRun(struct ncclComm* comm, mscclppComm_t* mcOut) {
  if (comm->device >= 0) {
    mscclppResult_t r = mscclppGpuSetDevice(comm->device);
    if (r != mscclppSuccess) return fromM(r);
  }
  mscclppComm_t mc = NULL;
  mscclppResult_t r;
  if (comm->joinKind == MSCCLPP_NCCL_JOIN_SHRINK) {
    r = mscclppCommShrinkUnprepared(comm->shrinkParent->mc, comm->shrinkExclude, comm->shrinkCount, comm->shrinkFlags,
                                    &comm->cancel, &mc);
  } else {
    mscclppUniqueId id;
    memcpy(id.internal, comm->id.internal, sizeof(id.internal));
    r = mscclppCommInitRankFromIdUnprepared(&mc, comm->nranks, id, comm->rank, &comm->cancel);
  }
  if (r != mscclppSuccess) return fromM(r);
  /* a split's ranks may share their GPU with the parent's others, whose
   * kernels run beside theirs: the GPU collectives size their grids so */
  mscclppCommSetDeviceShare(mc, comm->deviceShare);
  /* the collective state, now that every rank is here: no later call
   * waits for a peer (NCCL's contract) */
  r = mscclppCommPrepare(mc);
  if (r != mscclppSuccess) {
    (void)mscclppCommDestroy(mc);
    return fromM(r);
  }
  struct mscclppParams params;
  r = mscclppParamsLoad(&params);
  ncclResult_t res = fromM(r);
  if (res == ncclSuccess) res = mscclppNcclFallbackParseOps(params.ncclFallbackOps, &comm->fallbackOps);
  if (res == ncclSuccess && params.ncclFallback[0] != '\0') {
    comm->mc = mc; /* the fallback's id travels on it */
    res = mscclppNcclFallbackCommCreate(comm);
    comm->mc = NULL;
  } else if (res == ncclSuccess && comm->fallbackOps != 0) {
    res =
        mscclppNcclErr(ncclInvalidArgument, "MSCCLPP_NCCL_FALLBACK_OPS=\"%s\" is set but MSCCLPP_NCCL_FALLBACK is not",
                       params.ncclFallbackOps);
  }
  if (res != ncclSuccess) {
    (void)mscclppCommDestroy(mc);
    return res;
  }
  MSCCLPP_INFO(MSCCLPP_LOG_NCCL, "ncclComm %p%s%s: rank %d of %d on %s%d%s", (void*)comm, comm->name[0] ? " " : "",
               comm->name, comm->rank, comm->nranks, comm->device >= 0 ? "device " : "the host backend",
               comm->device >= 0 ? comm->device : 0, comm->real != NULL ? ", with the fallback NCCL" : "");
  *mcOut = mc;
  return ncclSuccess;
}

/* A shrink's join has ended (or will not start): the parent may be
 * destroyed. */
static void releaseParent(struct ncclComm* c) {
  struct ncclComm* parent = c->shrinkParent;
  if (parent == NULL) return;
  c->shrinkParent = NULL;
  pthread_mutex_lock(&parent->lock);
  parent->pendingShrinks--;
  pthread_cond_broadcast(&parent->cond);
  pthread_mutex_unlock(&parent->lock);
}

/* Join threads of communicators aborted while they joined, still cleaning
 * up. A process that exits right after such an abort gives them a moment
 * (at most ABANDONED_WAIT_MS) to release their threads and sockets rather
 * than leaving them half torn down. */
static int abandonedJoins;
#define ABANDONED_WAIT_MS 2000
__attribute__((destructor)) static void waitAbandonedJoins(void) {
  for (int i = 0; i < ABANDONED_WAIT_MS && __atomic_load_n(&abandonedJoins, __ATOMIC_ACQUIRE) > 0; i++) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
}

/* Record the join's result; free everything if the communicator was
 * abandoned meanwhile. */
static void joinFinish(struct ncclComm* comm, ncclResult_t res, mscclppComm_t mc) {
  releaseParent(comm);
  pthread_mutex_lock(&comm->lock);
  if (res != ncclSuccess) snprintf(comm->initError, sizeof(comm->initError), "%s", mscclppGetLastError());
  comm->mc = mc;
  comm->initState = res;
  comm->joining = 0;
  int abandoned = comm->abandoned;
  pthread_cond_broadcast(&comm->cond);
  pthread_mutex_unlock(&comm->lock);
  if (abandoned) { /* the thread is detached and nobody else holds comm */
    if (mc != NULL) {
      (void)mscclppCommAbort(mc, "ncclCommAbort during initialization");
      mscclppNcclFallbackCommDestroy(comm, 1);
      (void)mscclppCommDestroy(mc);
    }
    mscclppNcclCommFree(comm);
  }
  if (abandoned) __atomic_sub_fetch(&abandonedJoins, 1, __ATOMIC_RELEASE);
}

static void* joinMain(void* arg) {
  struct ncclComm* comm = (struct ncclComm*)arg;
  mscclppComm_t mc = NULL;
  ncclResult_t res = joinRun(comm, &mc);
  joinFinish(comm, res, mc);
  return NULL;
}

ncclResult_t mscclppNcclCommJoinStart(struct ncclComm* comm) {
  pthread_mutex_lock(&comm->lock);
  comm->joining = 1;
  int err = pthread_create(&comm->joinThread, NULL, joinMain, comm);
  if (err == 0) comm->joinThreadStarted = 1;
  pthread_mutex_unlock(&comm->lock);
  if (err != 0) {
    ncclResult_t res =
        mscclppNcclErr(ncclSystemError, "cannot start the thread that initializes a communicator: %s", strerror(err));
    joinFinish(comm, res, NULL);
    return res;
  }
  return ncclSuccess;
}

/* Join now (blocking), in the background (nonblocking), or at ncclGroupEnd.
 * On a blocking failure the wrapper is freed and *out untouched. */
ncclResult_t mscclppNcclJoinDispatch(struct ncclComm* c, ncclComm_t* out) {
  if (mscclppNcclGroupActive()) {
    c->joining = 1; /* started by ncclGroupEnd */
    ncclResult_t res = mscclppNcclGroupAddJoin(c);
    if (res != ncclSuccess) {
      releaseParent(c);
      mscclppNcclCommFree(c);
      return res;
    }
    *out = c;
    return ncclSuccess;
  }
  if (c->blocking) {
    mscclppComm_t mc = NULL;
    ncclResult_t res = joinRun(c, &mc);
    releaseParent(c);
    if (res != ncclSuccess) {
      mscclppNcclCommFree(c);
      return res;
    }
    c->mc = mc;
    c->initState = ncclSuccess;
    *out = c;
    return ncclSuccess;
  }
  ncclResult_t res = mscclppNcclCommJoinStart(c);
  *out = c; /* its state tells the failure */
  return res != ncclSuccess ? res : ncclInProgress;
}

static ncclResult_t initRank(ncclComm_t* comm, int nranks, const ncclUniqueId* id, int rank, ncclConfig_t* config,
                             const char* fn) {
  if (comm == NULL) return mscclppNcclErr(ncclInvalidArgument, "%s: comm is NULL", fn);
  if (nranks <= 0) return mscclppNcclErr(ncclInvalidArgument, "%s: nranks=%d must be positive", fn, nranks);
  if (rank < 0 || rank >= nranks)
    return mscclppNcclErr(ncclInvalidArgument, "%s: rank=%d is outside [0, nranks=%d)", fn, rank, nranks);
  int blocking;
  const char* name;
  ncclResult_t res = mscclppNcclReadConfig(config, fn, 1, &blocking, &name);
  if (res != ncclSuccess) return res;
  struct ncclComm* c = NULL;
  res = mscclppNcclCommNew(nranks, rank, currentDevice(), blocking, name, &c);
  if (res != ncclSuccess) return res;
  c->joinKind = MSCCLPP_NCCL_JOIN_ID;
  memcpy(c->id.internal, id->internal, sizeof(c->id.internal));
  return mscclppNcclJoinDispatch(c, comm);
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config) {
  return initRank(comm, nranks, &commId, rank, config, "ncclCommInitRankConfig");
}
NCCL_PROFILING_ALIAS(ncclCommInitRankConfig);

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return initRank(comm, nranks, &commId, rank, NULL, "ncclCommInitRank");
}
NCCL_PROFILING_ALIAS(ncclCommInitRank);

ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                                      ncclConfig_t* config) {
  static const char fn[] = "ncclCommInitRankScalable";
  if (nId <= 0 || commIds == NULL)
    return mscclppNcclErr(ncclInvalidArgument, "%s: nId=%d ids at %p: at least one id is needed", fn, nId,
                          (void*)commIds);
  if (nId > 1)
    MSCCLPP_INFO(MSCCLPP_LOG_NCCL, "%s: %d ids given; mscclpp joins through the first and ignores the others", fn,
                 nId);
  return initRank(newcomm, nranks, &commIds[0], myrank, config, fn);
}
NCCL_PROFILING_ALIAS(ncclCommInitRankScalable);

ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) {
  static const char fn[] = "ncclCommInitAll";
  if (comm == NULL) return mscclppNcclErr(ncclInvalidArgument, "%s: comm is NULL", fn);
  if (ndev <= 0) return mscclppNcclErr(ncclInvalidArgument, "%s: ndev=%d must be positive", fn, ndev);
  int ngpus = mscclppGpuIpcAvailable() ? mscclppGpuDeviceCount() : 0;
  for (int i = 0; i < ndev; i++) {
    int dev = devlist != NULL ? devlist[i] : i;
    if (ngpus > 0 && (dev < 0 || dev >= ngpus))
      return mscclppNcclErr(ncclInvalidArgument, "%s: device %d (rank %d) is not one of the %d devices", fn, dev, i,
                            ngpus);
  }
  ncclUniqueId id;
  ncclResult_t res = ncclGetUniqueId(&id);
  if (res != ncclSuccess) return res;
  struct ncclComm** made = (struct ncclComm**)calloc((size_t)ndev, sizeof(*made));
  if (made == NULL) return mscclppNcclErr(ncclSystemError, "%s: out of memory", fn);
  for (int i = 0; i < ndev && res == ncclSuccess; i++) {
    int dev = ngpus > 0 ? (devlist != NULL ? devlist[i] : i) : MSCCLPP_HOST_BACKEND_DEVICE;
    res = mscclppNcclCommNew(ndev, i, dev, 1, NULL, &made[i]);
    if (res != ncclSuccess) break;
    made[i]->joinKind = MSCCLPP_NCCL_JOIN_ID;
    memcpy(made[i]->id.internal, id.internal, sizeof(id.internal));
    res = mscclppNcclCommJoinStart(made[i]);
  }
  /* wait for every started join (they fail by timeout if one never started) */
  for (int i = 0; i < ndev; i++) {
    if (made[i] == NULL) continue;
    waitJoined(made[i]);
    if (res == ncclSuccess && made[i]->initState != ncclSuccess) {
      res = made[i]->initState;
      (void)mscclppNcclErrAgain(res, "%s: rank %d: %s", fn, i, made[i]->initError);
    }
  }
  if (res != ncclSuccess) {
    for (int i = 0; i < ndev; i++) {
      if (made[i] == NULL) continue;
      if (made[i]->mc != NULL) {
        mscclppNcclFallbackCommDestroy(made[i], 1);
        (void)mscclppCommDestroy(made[i]->mc);
      }
      mscclppNcclCommFree(made[i]);
    }
    free(made);
    return res;
  }
  for (int i = 0; i < ndev; i++) comm[i] = made[i];
  free(made);
  return ncclSuccess;
}
NCCL_PROFILING_ALIAS(ncclCommInitAll);

/* ---- finalize, destroy, abort ---------------------------------------------------- */

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  ncclResult_t res = mscclppNcclCommReady(comm, "ncclCommFinalize");
  if (res != ncclSuccess) return res;
  pthread_mutex_lock(&comm->lock);
  int byApp = comm->revoked == MSCCLPP_NCCL_REVOKED_BY_APP;
  if (!byApp) comm->finalized = 1; /* (after an ABORT shrink nothing is left to flush) */
  pthread_mutex_unlock(&comm->lock);
  if (byApp) /* NCCL's header: finalize after revoke is invalid */
    return mscclppNcclErr(ncclInvalidArgument, "ncclCommFinalize: the communicator was revoked; destroy it instead");
  return ncclSuccess;
}
NCCL_PROFILING_ALIAS(ncclCommFinalize);

static ncclResult_t destroyOrAbort(ncclComm_t comm, int abort, const char* fn) {
  ncclResult_t res = mscclppNcclCommCheck(comm, fn);
  if (res != ncclSuccess) return res;
  pthread_mutex_lock(&comm->lock);
  int notStarted = comm->joining && !comm->joinThreadStarted;
  int joining = comm->joining;
  if (abort && joining && !notStarted) {
    /* let the join thread free everything when it ends (a shrink's waits
     * end at once) */
    __atomic_store_n(&comm->cancel, 1, __ATOMIC_RELEASE);
    comm->abandoned = 1;
    __atomic_add_fetch(&abandonedJoins, 1, __ATOMIC_RELAXED);
    comm->joinThreadStarted = 0;
    comm->magic = 0;
    pthread_detach(comm->joinThread);
    pthread_mutex_unlock(&comm->lock);
    return ncclSuccess;
  }
  pthread_mutex_unlock(&comm->lock);
  if (notStarted)
    return mscclppNcclErr(ncclInvalidUsage,
                          "%s: the communicator is created by the enclosing group; call it after ncclGroupEnd", fn);
  waitJoined(comm);
  pthread_mutex_lock(&comm->lock);
  if (abort && comm->pendingShrinks > 0) /* their waits on it end */
    (void)mscclppCommRevoke(comm->mc, MSCCLPP_REVOKE_DEFAULT);
  while (comm->pendingShrinks > 0) pthread_cond_wait(&comm->cond, &comm->lock); /* they use comm->mc */
  pthread_mutex_unlock(&comm->lock);
  if (comm->mc != NULL) {
    if (abort) (void)mscclppCommAbort(comm->mc, "ncclCommAbort");
    mscclppNcclFallbackCommDestroy(comm, abort);
    mscclppResult_t r = mscclppCommDestroy(comm->mc);
    if (r != mscclppSuccess) return fromM(r);
    comm->mc = NULL;
  }
  mscclppNcclCommFree(comm);
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) { return destroyOrAbort(comm, 0, "ncclCommDestroy"); }
NCCL_PROFILING_ALIAS(ncclCommDestroy);

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == NULL) return ncclSuccess; /* NCCL accepts NULL here */
  return destroyOrAbort(comm, 1, "ncclCommAbort");
}
NCCL_PROFILING_ALIAS(ncclCommAbort);

/* Revoke comm->mc; a blocking communicator waits (MSCCLPP_TIMEOUT at most)
 * until it is quiescent. ncclInProgress when it is not yet (nonblocking). */
static ncclResult_t revokeMc(struct ncclComm* comm, const char* fn) {
  mscclppResult_t r = mscclppCommRevoke(comm->mc, MSCCLPP_REVOKE_DEFAULT);
  if (r == mscclppInProgress && comm->blocking) {
    mscclppDeadline d = mscclppDeadlineIn(comm->mc->params.timeout);
    while (r == mscclppInProgress && !mscclppDeadlinePassed(d)) {
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL);
      r = mscclppCommRevoke(comm->mc, MSCCLPP_REVOKE_DEFAULT);
    }
    if (r == mscclppInProgress)
      return mscclppNcclErr(ncclInternalError,
                            "%s: a call on the communicator did not return within %g s (MSCCLPP_TIMEOUT) after it was "
                            "revoked",
                            fn, comm->mc->params.timeout);
  }
  if (r == mscclppInProgress) return ncclInProgress;
  return r == mscclppSuccess ? ncclSuccess : mscclppNcclErrWrap(r, "%s", fn);
}

ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  static const char fn[] = "ncclCommRevoke";
  if (comm == NULL) return ncclSuccess; /* as ncclCommDestroy */
  ncclResult_t res = mscclppNcclCommReady(comm, fn);
  if (res != ncclSuccess) return res;
  if (revokeFlags != NCCL_REVOKE_DEFAULT)
    return mscclppNcclErr(ncclInvalidArgument, "%s: revokeFlags 0x%x must be NCCL_REVOKE_DEFAULT (0)", fn,
                          (unsigned)revokeFlags);
  pthread_mutex_lock(&comm->lock);
  int again = comm->revoked;
  if (!again) comm->revoked = MSCCLPP_NCCL_REVOKED_BY_APP;
  pthread_mutex_unlock(&comm->lock);
  if (again) return mscclppNcclErr(ncclInvalidArgument, "%s: the communicator is revoked already", fn);
  res = revokeMc(comm, fn);
  if (comm->real != NULL) {
    /* the fallback's work in flight stops too, where its NCCL can */
    ncclResult_t (*realRevoke)(void*, int) = (ncclResult_t(*)(void*, int))mscclppNcclFallbackSymbol(fn);
    if (realRevoke != NULL) (void)realRevoke(comm->real, revokeFlags);
  }
  return res;
}
NCCL_PROFILING_ALIAS(ncclCommRevoke);
