/* SPDX-License-Identifier: MIT */
/*
 * mscclppCommShrink: a new communicator of some of a communicator's ranks,
 * made by them alone. With MSCCLPP_SHRINK_ABORT the parent is revoked first
 * (comm_abort.c) and its calls in flight have returned before the members
 * agree; the agreement and the new bootstrap are the bootstrap layer's
 * (bootstrap/shrink.c). The new communicator shares nothing with the
 * parent: its own bootstrap, abort object, memory and channels, and
 * collective state built afresh (the prepare hook), so that nothing made
 * for the old membership is used by the new one. The parent keeps what it
 * has until it is destroyed; after an ABORT its operations fail with its
 * first error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/comm.h"
#include "core/error.h"
#include "core/log.h"
#include "core/util.h"

static int intCmp(const void* a, const void* b) {
  int x = *(const int*)a, y = *(const int*)b;
  return x < y ? -1 : x > y;
}

/* Revoke comm and wait (MSCCLPP_TIMEOUT at most) until no call runs on it. */
static mscclppResult_t revokeQuiescent(struct mscclppComm* comm, const int* cancel) {
  mscclppDeadline d = mscclppDeadlineIn(comm->params.timeout);
  for (;;) {
    mscclppResult_t r = mscclppCommRevoke(comm, MSCCLPP_REVOKE_DEFAULT);
    if (r != mscclppInProgress) return r;
    if (cancel != NULL && __atomic_load_n(cancel, __ATOMIC_ACQUIRE))
      return mscclppErr(mscclppAborted, MSCCLPP_LOG_INIT, "mscclppCommShrink: cancelled while revoking the parent");
    if (mscclppDeadlinePassed(d))
      return mscclppErr(mscclppTimeout, MSCCLPP_LOG_INIT,
                        "mscclppCommShrink: a call on the parent communicator (rank %d) did not return within %g s "
                        "(MSCCLPP_TIMEOUT) after it was revoked",
                        comm->rank, comm->params.timeout);
    struct timespec ts = {0, 200000}; /* the calls return within a poll of the abort flag */
    nanosleep(&ts, NULL);
  }
}

mscclppResult_t mscclppCommShrinkUnprepared(mscclppComm_t comm, const int* excludeRanks, int excludeCount, int flags,
                                            const int* cancel, mscclppComm_t* newcomm) {
  static const char fn[] = "mscclppCommShrink";
  if (comm == NULL || newcomm == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_INIT, "%s: comm or newcomm is NULL", fn);
  if (flags != MSCCLPP_SHRINK_DEFAULT && flags != MSCCLPP_SHRINK_ABORT)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_INIT,
                      "%s: flags 0x%x: MSCCLPP_SHRINK_DEFAULT (0) or MSCCLPP_SHRINK_ABORT (1)", fn, (unsigned)flags);
  if (excludeCount < 0 || (excludeCount > 0 && excludeRanks == NULL))
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_INIT, "%s: excludeCount=%d with list %p", fn, excludeCount,
                      (const void*)excludeRanks);
  int* ex = (int*)malloc((size_t)(excludeCount > 0 ? excludeCount : 1) * sizeof(int));
  if (ex == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_INIT, "%s: out of memory", fn);
  mscclppResult_t res = mscclppSuccess;
  for (int i = 0; i < excludeCount && res == mscclppSuccess; i++) {
    int x = excludeRanks[i];
    if (x < 0 || x >= comm->nranks)
      res = mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_INIT, "%s: excluded rank %d is not a rank of 0..%d", fn, x,
                       comm->nranks - 1);
    else if (x == comm->rank)
      res = mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_INIT,
                       "%s: this rank (%d) is in the exclusion list; excluded ranks do not call it", fn, x);
    ex[i] = x;
  }
  /* ascending, each rank once: what the members compare */
  int n = 0;
  if (res == mscclppSuccess && excludeCount > 0) {
    qsort(ex, (size_t)excludeCount, sizeof(int), intCmp);
    for (int i = 0; i < excludeCount; i++)
      if (n == 0 || ex[i] != ex[n - 1]) ex[n++] = ex[i];
  }
  if (res == mscclppSuccess && flags == MSCCLPP_SHRINK_ABORT) {
    res = revokeQuiescent(comm, cancel);
  } else if (res == mscclppSuccess && !__atomic_load_n(&comm->revoked, __ATOMIC_ACQUIRE)) {
    /* calls may still run on the failed parent: stopping them is ABORT's */
    mscclppResult_t e = mscclppSuccess;
    res = mscclppCommAsyncError(comm, &e);
    if (res == mscclppSuccess && e != mscclppSuccess) {
      char why[512]; /* a copy: the new message is written over the last error */
      snprintf(why, sizeof(why), "%s", mscclppGetLastError());
      res = mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_INIT,
                       "%s: the communicator has failed (%s); shrink it with MSCCLPP_SHRINK_ABORT, or revoke it "
                       "first",
                       fn, why);
    }
  }
  struct mscclppBootstrap* bs = NULL;
  if (res == mscclppSuccess) res = mscclppBootstrapShrink(comm->bootstrap, ex, n, &comm->params, cancel, &bs);
  free(ex);
  if (res != mscclppSuccess) return res;
  return mscclppCommFromBootstrap(&comm->params, bs, flags == MSCCLPP_SHRINK_ABORT ? "shrink after abort" : "shrink",
                                  0, newcomm);
}

mscclppResult_t mscclppCommShrink(mscclppComm_t comm, const int* excludeRanks, int excludeCount,
                                  mscclppComm_t* newcomm, int flags) {
  if (newcomm == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_INIT, "mscclppCommShrink: newcomm is NULL");
  mscclppComm_t child = NULL;
  MSCCLPP_RETURN_ON_ERROR(mscclppCommShrinkUnprepared(comm, excludeRanks, excludeCount, flags, NULL, &child));
  /* the excluded ranks' GPUs no longer count, but the parent's own hint
   * (a communicator made from a larger job) still holds */
  if (comm->deviceShare > 0) mscclppCommSetDeviceShare(child, comm->deviceShare);
  mscclppResult_t res = mscclppCommPrepare(child);
  if (res != mscclppSuccess) {
    (void)mscclppCommDestroy(child); /* the hook logged why */
    return res;
  }
  *newcomm = child;
  return mscclppSuccess;
}
