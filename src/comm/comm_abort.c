/* SPDX-License-Identifier: MIT */
/* The communicator's error domain, made on first use:
 *  - the abort object (for the device current at that moment, or the host
 *    backend without a GPU), shared by the memory layer's waits, the proxy,
 *    the FIFO and every channel's device waits; a child communicator may
 *    borrow its parent's;
 *  - a watcher thread that turns a peer lost by the bootstrap into an abort,
 *    so that kernels and proxy waits on the surviving ranks return within
 *    about WATCH_PERIOD_NS instead of running into the timeout, and a
 *    kernel's error word into the first error (and its hang report) when
 *    no proxy thread reads it;
 *  - the asynchronous error the application reads;
 *  - revoke: the abort raised and the bootstrap interrupted by the
 *    application, and whether calls are still running.
 * See comm.h for the fields. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/comm.h"
#include "core/error.h"
#include "core/log.h"
#include "core/report.h"
#include "gpu/abort.h"
#include "gpu/gpu.h"
#include "gpu/gpu_ipc.h"

#define WATCH_PERIOD_NS 20000000L /* 20 ms */

static void* watchMain(void* arg) {
  struct mscclppComm* comm = arg;
  pthread_setname_np(pthread_self(), "mscclpp-watch");
  /* Once the abort is raised there is nothing left to tell, but the thread
   * stays until mscclppCommAbortRelease joins it: a program that exits
   * without destroying its communicator must not leave a finished,
   * never-joined thread behind (ThreadSanitizer reports it as a leak). */
  int told = 0;
  while (!__atomic_load_n(&comm->watcherStop, __ATOMIC_ACQUIRE)) {
    if (!told && mscclppBootstrapGetLostStatus(comm->bootstrap) != mscclppSuccess) {
      mscclppAbortRaiseLogged(comm->abort, mscclppRemoteError); /* the bootstrap logged the loss */
      told = 1;
    }
    /* a kernel's error word (a device-side timeout, say) becomes the first
     * error here, with the hang report it writes, even when no proxy thread
     * runs to read it */
    if (!told && mscclppAbortPollDevice(comm->abort) != mscclppSuccess) told = 1;
    if (!told && mscclppAbortIsRaised(comm->abort)) told = 1;
    struct timespec ts = {0, WATCH_PERIOD_NS};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

/* With comm->lazyLock held. */
static mscclppResult_t abortLocked(struct mscclppComm* comm) {
  if (comm->abort != NULL) return mscclppSuccess;
  int device = MSCCLPP_HOST_BACKEND_DEVICE;
  if (mscclppGpuIpcAvailable() && mscclppGpuIpcCurrentDevice(&device) != mscclppSuccess)
    device = MSCCLPP_HOST_BACKEND_DEVICE;
  struct mscclppAbort* abort = NULL;
  MSCCLPP_RETURN_ON_ERROR(mscclppAbortCreate(device, &abort));
  comm->device = device;
  __atomic_store_n(&comm->abort, abort, __ATOMIC_RELEASE); /* the hang report reads it (comm_report.c) */
  __atomic_store_n(&comm->watcherStop, 0, __ATOMIC_RELEASE);
  int err = pthread_create(&comm->watcher, NULL, watchMain, comm);
  if (err != 0) {
    __atomic_store_n(&comm->abort, (struct mscclppAbort*)NULL, __ATOMIC_RELEASE);
    mscclppReportSync();
    mscclppAbortDestroy(abort);
    return mscclppErr(mscclppSystemError, MSCCLPP_LOG_INIT, "cannot start the peer-loss watcher: %s", strerror(err));
  }
  comm->watcherRunning = 1;
  MSCCLPP_INFO(MSCCLPP_LOG_INIT, "rank %d: communicator device %d%s", comm->rank, device,
               device < 0 ? " (host backend)" : "");
  return mscclppSuccess;
}

mscclppResult_t mscclppCommAbortOf(struct mscclppComm* comm, struct mscclppAbort** abort) {
  pthread_mutex_lock(&comm->lazyLock);
  mscclppResult_t res = abortLocked(comm);
  if (res == mscclppSuccess) *abort = comm->abort;
  pthread_mutex_unlock(&comm->lazyLock);
  return res;
}

mscclppResult_t mscclppCommBorrowAbort(struct mscclppComm* child, struct mscclppComm* parent) {
  struct mscclppAbort* abort = NULL;
  MSCCLPP_RETURN_ON_ERROR(mscclppCommAbortOf(parent, &abort));
  pthread_mutex_lock(&child->lazyLock);
  mscclppResult_t res = mscclppSuccess;
  if (child->abort != NULL) {
    res = mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_INIT,
                     "rank %d: the communicator already has its own abort object; it cannot share rank %d's",
                     child->rank, parent->rank);
  } else {
    child->abortBorrowed = 1;
    child->device = parent->device;
    __atomic_store_n(&child->abort, abort, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&child->lazyLock);
  return res;
}

void mscclppCommAbortRelease(struct mscclppComm* comm) {
  pthread_mutex_lock(&comm->lazyLock);
  if (comm->abortBorrowed) {
    comm->abort = NULL; /* the lender frees it */
    comm->abortBorrowed = 0;
  }
  if (comm->watcherRunning) {
    __atomic_store_n(&comm->watcherStop, 1, __ATOMIC_RELEASE);
    pthread_join(comm->watcher, NULL);
    comm->watcherRunning = 0;
  }
  if (comm->abort != NULL && mscclppAbortDestroy(comm->abort) == mscclppSuccess) comm->abort = NULL;
  pthread_mutex_unlock(&comm->lazyLock);
}

mscclppResult_t mscclppCommAsyncError(struct mscclppComm* comm, mscclppResult_t* error) {
  pthread_mutex_lock(&comm->lazyLock);
  struct mscclppAbort* abort = comm->abort;
  pthread_mutex_unlock(&comm->lazyLock);
  mscclppResult_t e = mscclppSuccess;
  if (abort != NULL) MSCCLPP_RETURN_ON_ERROR(mscclppAbortGetError(abort, &e));
  if (e == mscclppSuccess) e = mscclppBootstrapGetLostStatus(comm->bootstrap);
  *error = e;
  return mscclppSuccess;
}

mscclppResult_t mscclppCommRevoke(mscclppComm_t comm, int flags) {
  if (comm == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_INIT, "mscclppCommRevoke: comm is NULL");
  if (flags != MSCCLPP_REVOKE_DEFAULT)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_INIT,
                      "mscclppCommRevoke: flags 0x%x: only MSCCLPP_REVOKE_DEFAULT (0) is defined", (unsigned)flags);
  if (!__atomic_load_n(&comm->revoked, __ATOMIC_ACQUIRE)) {
    struct mscclppAbort* abort = NULL;
    MSCCLPP_RETURN_ON_ERROR(mscclppCommAbortOf(comm, &abort));
    if (!__atomic_exchange_n(&comm->revoked, 1, __ATOMIC_ACQ_REL)) {
      /* the application asked for it: INFO, and the text every failed
       * call will return (unless an error came first) */
      char text[96];
      snprintf(text, sizeof(text), "rank %d: the communicator was revoked (mscclppCommRevoke)", comm->rank);
      MSCCLPP_INFO(MSCCLPP_LOG_INIT, "%s", text);
      mscclppAbortRecord(abort, mscclppAborted, text);
      mscclppBootstrapInterrupt(comm->bootstrap, "the communicator was revoked");
    }
  }
  return __atomic_load_n(&comm->activeCalls, __ATOMIC_ACQUIRE) > 0 ? mscclppInProgress : mscclppSuccess;
}
