/* SPDX-License-Identifier: MIT */
/* The abort object: flag, device error word, first error (see abort.h). */
#include "gpu/abort.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "core/log.h"
#include "core/report.h"
#include "core/util.h"
#include "gpu/gpu.h"
#include "mscclpp/trigger.h"

uint64_t mscclppHostClockNs(void) { return mscclppTimeNs(); }

/* Host-backend waits yield only while that lets another thread run
 * (mscclppYieldGated); with nobody else wanting the core, once every 20 us.
 * Per thread: its waits share its core. A 1 us interval made the memory
 * channel's host ping-pong slower on 16 cores; 20 us left it where it was
 * (bench/HISTORY.md, "Network transport on the GPU machine's CPUs", the
 * runs that committed the 20 us interval: bench_channel_host; and "Figures
 * moved out of code comments"). */
#define WAIT_SPARSE_YIELD_NS 20000u
static __thread struct mscclppYieldGate waitYield;

void mscclppHostWaitBackoff(uint64_t waitedNs) {
  /* Yield-only for the first millisecond: a sleep costs at least the timer
   * slack (50 us), which a host-backend ping-pong over the network pays on
   * every hop (bench_net's ping-pong was several times slower with sleeps
   * after 20 us than with yields: bench/HISTORY.md, "Figures moved out of
   * code comments"). */
  if (waitedNs < 1000000) {
    mscclppYieldGated(&waitYield, WAIT_SPARSE_YIELD_NS);
    return;
  }
  uint64_t ns = waitedNs / 4 < 100000 ? waitedNs / 4 : 100000;
  struct timespec ts = {0, (long)ns};
  nanosleep(&ts, NULL);
}

/* The host-mapped page: the flag (line 0), the device error word and its
 * second value (line 1), the host waiters' claim (line 2), the wait board
 * (mscclppWaitNote: MSCCLPP_WAIT_BOARD_FROM_ERROR_WORD bytes after the error
 * word). */
#define ABORT_MAPPED_BYTES 4096
_Static_assert(MSCCLPP_CACHE_LINE + MSCCLPP_WAIT_BOARD_FROM_ERROR_WORD >= 3 * MSCCLPP_CACHE_LINE &&
                   MSCCLPP_CACHE_LINE + MSCCLPP_WAIT_BOARD_FROM_ERROR_WORD +
                           MSCCLPP_WAIT_BOARD_NOTES * sizeof(mscclppWaitNote) <=
                       ABORT_MAPPED_BYTES &&
                   MSCCLPP_WAIT_BOARD_FROM_ERROR_WORD % MSCCLPP_CACHE_LINE == 0,
               "the wait board lies in the abort object's page, after its three lines, on line boundaries");

uint32_t mscclppHostThreadNumber(void) {
  static uint32_t next;
  static __thread uint32_t mine;
  if (mine == 0) mine = __atomic_add_fetch(&next, 1, __ATOMIC_RELAXED);
  return mine;
}

const mscclppWaitNote* mscclppAbortWaitBoard(const struct mscclppAbort* abort) {
  return (const mscclppWaitNote*)((const char*)abort->errorWordHost + MSCCLPP_WAIT_BOARD_FROM_ERROR_WORD);
}

mscclppResult_t mscclppAbortCreate(int device, mscclppAbort_t* abort) {
  if (abort == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_GPU, "mscclppAbortCreate: abort is NULL");
  if (device < 0) device = MSCCLPP_HOST_BACKEND_DEVICE;
  struct mscclppAbort* a = calloc(1, sizeof(*a));
  if (a == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_GPU, "cannot allocate an abort object");
  a->device = device;
  mscclppResult_t res = mscclppGpuHostAllocMapped(device, ABORT_MAPPED_BYTES, &a->mappedHost, &a->mappedDev);
  if (res != mscclppSuccess) goto fail_free_object;
  res = mscclppGpuDeviceAlloc(device, MSCCLPP_CACHE_LINE, (void**)&a->claimDev);
  if (res != mscclppSuccess) goto fail_free_mapped;
  a->flagHost = (uint32_t*)a->mappedHost;
  a->flagDev = (uint32_t*)a->mappedDev;
  a->errorWordHost = (uint64_t*)((char*)a->mappedHost + MSCCLPP_CACHE_LINE);
  a->errorWordDev = (uint64_t*)((char*)a->mappedDev + MSCCLPP_CACHE_LINE);
  a->firstError = mscclppSuccess;
  pthread_mutex_init(&a->mu, NULL);
  *abort = a;
  return mscclppSuccess;

fail_free_mapped:
  mscclppGpuHostFreeMapped(device, a->mappedHost);
fail_free_object:
  free(a);
  return res;
}

mscclppResult_t mscclppAbortDestroy(mscclppAbort_t abort) {
  if (abort == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_GPU, "mscclppAbortDestroy: abort is NULL");
  int refs = __atomic_load_n(&abort->refs, __ATOMIC_ACQUIRE);
  if (refs > 0)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_GPU,
                      "abort object still used by %d FIFO(s), proxies or semaphores: destroy them first", refs);
  mscclppGpuDeviceFree(abort->device, abort->claimDev);
  mscclppGpuHostFreeMapped(abort->device, abort->mappedHost);
  pthread_mutex_destroy(&abort->mu);
  free(abort);
  return mscclppSuccess;
}

void mscclppAbortRetain(struct mscclppAbort* abort) { __atomic_fetch_add(&abort->refs, 1, __ATOMIC_ACQ_REL); }
void mscclppAbortRelease(struct mscclppAbort* abort) { __atomic_fetch_sub(&abort->refs, 1, __ATOMIC_ACQ_REL); }

/* Record (code, text) if first; raise the flag either way. */
static void record(struct mscclppAbort* abort, mscclppResult_t code, const char* text) {
  int first = 0;
  pthread_mutex_lock(&abort->mu);
  if (__atomic_load_n(&abort->firstError, __ATOMIC_RELAXED) == mscclppSuccess) {
    snprintf(abort->text, sizeof(abort->text), "%s", text);
    __atomic_store_n(&abort->firstError, (int)code, __ATOMIC_RELEASE);
    first = 1;
  }
  pthread_mutex_unlock(&abort->mu);
  __atomic_store_n(abort->flagHost, 1u, __ATOMIC_RELEASE);
  /* the hang report of every communicator of the process, while the wait
   * that failed is still published in its record (core/report.h) */
  if (first) mscclppReportOnAbort(code, text);
}

void mscclppAbortRecord(struct mscclppAbort* abort, mscclppResult_t code, const char* text) {
  record(abort, code, text);
}

mscclppResult_t mscclppAbortRaisef(struct mscclppAbort* abort, mscclppResult_t code, const char* fmt, ...) {
  char text[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  record(abort, code, text);
  return mscclppErr(code, MSCCLPP_LOG_PROXY, "%s", text);
}

mscclppResult_t mscclppAbortRaiseLogged(struct mscclppAbort* abort, mscclppResult_t code) {
  record(abort, code, mscclppGetLastError());
  return code;
}

mscclppResult_t mscclppAbortRaise(mscclppAbort_t abort, mscclppResult_t code, const char* reason) {
  if (abort == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_GPU, "mscclppAbortRaise: abort is NULL");
  if (code == mscclppSuccess || (int)code < 0 || code >= mscclppNumResults)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_GPU, "mscclppAbortRaise: code %d is not a failure",
                      (int)code);
  const char* text = reason != NULL ? reason : mscclppGetErrorString(code);
  record(abort, code, text);
  MSCCLPP_WARN(MSCCLPP_LOG_PROXY, "abort raised: %s (%s)", text, mscclppGetErrorString(code));
  return mscclppSuccess;
}

void mscclppDeviceErrorDescribe(uint64_t word, uint64_t second, char* buf, size_t len) {
  uint64_t value = MSCCLPP_DEVICE_ERROR_VALUE(word);
  unsigned detail = MSCCLPP_DEVICE_ERROR_DETAIL(word);
  switch (MSCCLPP_DEVICE_ERROR_KIND(word)) {
    case MSCCLPP_DEVICE_ERROR_TIMEOUT_PUSH:
      snprintf(buf, len, "kernel timed out pushing FIFO position %" PRIu64 ": the FIFO stayed full (proxy not draining)",
               value);
      break;
    case MSCCLPP_DEVICE_ERROR_TIMEOUT_SYNC:
      snprintf(buf, len, "kernel timed out waiting for the proxy to take FIFO position %" PRIu64, value);
      break;
    case MSCCLPP_DEVICE_ERROR_TIMEOUT_FLUSH:
      snprintf(buf, len, "kernel timed out waiting for FIFO position %" PRIu64 " to complete (flush)", value);
      break;
    case MSCCLPP_DEVICE_ERROR_TIMEOUT_SEMAPHORE:
      snprintf(buf, len, "semaphore wait timed out waiting for signal number %" PRIu64, value);
      break;
    case MSCCLPP_DEVICE_ERROR_INVALID_TRIGGER:
      snprintf(buf, len, "kernel pushed a trigger whose field '%s' is out of range (value %" PRIu64 ")",
               mscclppTriggerFieldName(MSCCLPP_DEVICE_ERROR_DETAIL(word)), value);
      break;
    case MSCCLPP_DEVICE_ERROR_RECV_OVERFLOW: /* the host backend's message (coll/host/) in the same words */
      snprintf(buf, len,
               "mscclppAllToAllv on rank %u: %" PRIu64 " elements arrived, more than recvcapacity %" PRIu64
               "; those past it were dropped (recvcounts says what each rank sent)",
               detail, second, value);
      break;
    case MSCCLPP_DEVICE_ERROR_SEND_RANGE:
      snprintf(buf, len,
               "mscclppAllToAllv on rank %u: the block for rank %u ends at element %" PRIu64
               ", past sendcapacity %" PRIu64 " (sdispls[%u] + sendcounts[%u]); it was sent as empty",
               detail >> 4, detail & 15u, second, value, detail & 15u, detail & 15u);
      break;
    default:
      snprintf(buf, len, "kernel reported unknown error word 0x%" PRIx64, word);
      break;
  }
}

static mscclppResult_t deviceErrorStatus(uint64_t word) {
  switch (MSCCLPP_DEVICE_ERROR_KIND(word)) {
    case MSCCLPP_DEVICE_ERROR_INVALID_TRIGGER:
    case MSCCLPP_DEVICE_ERROR_SEND_RANGE:
      return mscclppInvalidArgument;
    case MSCCLPP_DEVICE_ERROR_RECV_OVERFLOW:
      return mscclppInvalidUsage;
    default:
      return mscclppTimeout;
  }
}

mscclppResult_t mscclppAbortPollDevice(struct mscclppAbort* abort) {
  uint64_t word = __atomic_load_n(abort->errorWordHost, __ATOMIC_ACQUIRE);
  if (word == 0) return mscclppSuccess;
  mscclppResult_t code = deviceErrorStatus(word);
  char text[512];
  mscclppDeviceErrorDescribe(word, __atomic_load_n(abort->errorWordHost + 1, __ATOMIC_RELAXED), text, sizeof(text));
  /* Recorded by every caller that sees the word (the first record wins, the
   * others change nothing), so that the first error is set when this
   * returns: the thread that takes the word may still be on its way to
   * record() while another asks mscclppAbortGetError. Logged once. */
  if (__atomic_exchange_n(&abort->deviceErrorTaken, 1, __ATOMIC_ACQ_REL) == 0)
    mscclppAbortRaisef(abort, code, "%s", text);
  else
    record(abort, code, text);
  return code;
}

mscclppResult_t mscclppAbortGetError(mscclppAbort_t abort, mscclppResult_t* error) {
  if (abort == NULL || error == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_GPU, "mscclppAbortGetError: NULL argument");
  mscclppAbortPollDevice(abort);
  mscclppResult_t code = (mscclppResult_t)__atomic_load_n(&abort->firstError, __ATOMIC_ACQUIRE);
  if (code != mscclppSuccess) {
    char text[1024];
    pthread_mutex_lock(&abort->mu);
    snprintf(text, sizeof(text), "%s", abort->text);
    pthread_mutex_unlock(&abort->mu);
    mscclppErrAgain(code, MSCCLPP_LOG_PROXY, "%s", text); /* logged when it was raised */
  }
  *error = code;
  return mscclppSuccess;
}

mscclppResult_t mscclppAbortIsSet(mscclppAbort_t abort, int* isSet) {
  if (abort == NULL || isSet == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_GPU, "mscclppAbortIsSet: NULL argument");
  *isSet = mscclppAbortIsRaised(abort);
  return mscclppSuccess;
}

void mscclppAbortWaitContext(const struct mscclppAbort* abort, double timeoutSec, int deviceView,
                             mscclppWaitContext* ctx) {
  ctx->abortFlag = deviceView ? abort->flagDev : abort->flagHost;
  ctx->errorWord = deviceView ? abort->errorWordDev : abort->errorWordHost;
  /* Host-side waiters claim through the same word as the kernels only on the
   * host backend, where "device memory" is host memory. A host thread of a
   * CUDA build must not touch device memory: it gets its own claim word. */
  ctx->errorClaim = (deviceView || abort->device < 0) ? abort->claimDev
                                                     : (uint32_t*)((char*)abort->mappedHost + 2 * MSCCLPP_CACHE_LINE);
  double ns = timeoutSec * 1e9;
  ctx->timeoutNs = ns <= 0 ? 0 : ns > 1.8e19 ? UINT64_MAX : (uint64_t)ns;
}

mscclppResult_t mscclppAbortAcquire(struct mscclppAbort* given, int device, struct mscclppAbort** abort, int* owned) {
  if (device < 0) device = MSCCLPP_HOST_BACKEND_DEVICE;
  if (given != NULL) {
    if (given->device != device)
      return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_PROXY,
                        "abort object belongs to device %d but the object is created for device %d", given->device,
                        device);
    mscclppAbortRetain(given);
    *abort = given;
    *owned = 0;
    return mscclppSuccess;
  }
  struct mscclppAbort* mine;
  MSCCLPP_RETURN_ON_ERROR(mscclppAbortCreate(device, &mine));
  mscclppAbortRetain(mine);
  *abort = mine;
  *owned = 1;
  return mscclppSuccess;
}

void mscclppAbortDrop(struct mscclppAbort* abort, int owned) {
  if (abort == NULL) return;
  mscclppAbortRelease(abort);
  if (owned) mscclppAbortDestroy(abort);
}
