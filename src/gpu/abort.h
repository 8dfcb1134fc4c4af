/* SPDX-License-Identifier: MIT */
/*
 * The abort object's insides (public API: include/mscclpp/abort.h). It lives
 * in the gpu layer because its flag and device-error word need host-mapped
 * memory. The hot path (kernels, the proxy loop) only loads the flag; the
 * mutex is taken only when an error is recorded or read.
 */
#ifndef MSCCLPP_SRC_GPU_ABORT_H_
#define MSCCLPP_SRC_GPU_ABORT_H_

#include <pthread.h>
#include <stdint.h>

#include "mscclpp/abort.h"
#include "mscclpp/device.h"

#ifdef __cplusplus
extern "C" {
#endif

struct mscclppAbort {
  int device;
  /* One host-mapped page: the flag on the first cache line, the device error
   * word and its second value (mscclppDeviceRaiseWide) on the second. */
  void* mappedHost;
  void* mappedDev;
  uint32_t* flagHost;
  uint32_t* flagDev;
  uint64_t* errorWordHost;
  uint64_t* errorWordDev;
  uint32_t* claimDev; /* device memory: kernels' first-wins claim */
  int refs;           /* users (FIFOs, proxies, semaphores); __atomic */
  int firstError;     /* mscclppResult_t; __atomic, written under mu */
  int deviceErrorTaken;
  pthread_mutex_t mu;
  char text[1024];
};

/* A user of the abort object: mscclppAbortDestroy refuses while refs > 0. */
void mscclppAbortRetain(struct mscclppAbort* abort);
void mscclppAbortRelease(struct mscclppAbort* abort);

/* Record (code, message) as in mscclppAbortRaise (first wins, flag raised),
 * log it at WARN in PROXY, make it the calling thread's last error, return
 * code. */
mscclppResult_t mscclppAbortRaisef(struct mscclppAbort* abort, mscclppResult_t code, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Raise for a failure that was logged where it was decided and is the
 * calling thread's last error (mscclppErrWrap may add context first): record
 * (code, last error) as mscclppAbortRaisef does, without logging it again.
 * Returns code. */
mscclppResult_t mscclppAbortRaiseLogged(struct mscclppAbort* abort, mscclppResult_t code);

/* Record (code, text) as mscclppAbortRaisef does (first wins, flag raised)
 * without logging it or touching the caller's last error: for an abort the
 * application asked for, which its caller logs as it sees fit. */
void mscclppAbortRecord(struct mscclppAbort* abort, mscclppResult_t code, const char* text);

/* 1 when the flag is up. One load; fine on hot paths. */
static inline int mscclppAbortIsRaised(const struct mscclppAbort* abort) {
  return __atomic_load_n(abort->flagHost, __ATOMIC_ACQUIRE) != 0;
}

/* If a kernel recorded an error, raise it (once) as (status, text). Returns
 * the recorded status, or mscclppSuccess when the word is empty. One load of
 * host memory when nothing happened. */
mscclppResult_t mscclppAbortPollDevice(struct mscclppAbort* abort);

/* The wait context of a device handle. deviceView = 1: pointers as kernels
 * see them; 0: as host threads see them (the host sides of semaphores). */
void mscclppAbortWaitContext(const struct mscclppAbort* abort, double timeoutSec, int deviceView,
                             mscclppWaitContext* ctx);

/* The wait board (mscclpp/device.h, mscclppWaitNote) as the host reads it:
 * MSCCLPP_WAIT_BOARD_NOTES notes, read with relaxed loads (the hang report
 * reads them from a signal handler). */
const mscclppWaitNote* mscclppAbortWaitBoard(const struct mscclppAbort* abort);

/* Text for a device error word and its second value ("FIFO full for 30 s at
 * position 12"). */
void mscclppDeviceErrorDescribe(uint64_t word, uint64_t second, char* buf, size_t len);

/* An abort object given in a config, or a private one created for the user
 * (device `device`); retained either way. *owned = 1 for a private one, which
 * the caller destroys after releasing it. */
mscclppResult_t mscclppAbortAcquire(struct mscclppAbort* given, int device, struct mscclppAbort** abort, int* owned);
/* Undo mscclppAbortAcquire. */
void mscclppAbortDrop(struct mscclppAbort* abort, int owned);

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_SRC_GPU_ABORT_H_ */
