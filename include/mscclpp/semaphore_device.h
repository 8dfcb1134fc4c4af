/*
 * Semaphores, the side that signals and the side that waits, as kernels (or
 * host-backend threads, or the host side of a semaphore) call them. Host
 * API: mscclpp/semaphore.h.
 *
 * A semaphore is a pair of 64-bit counters:
 *   inbound        where signals land; only ever grows
 *   expected       the waiter's count of signals it has consumed
 * and, on the signalling side,
 *   outbound       where this side's signals are written; today the same
 *                  object's inbound, later a peer's inbound mapped into this
 *                  process (CUDA IPC, host shared memory) -- no other change
 *   outboundCount  the signaller's count of signals sent
 * signal: outboundCount += 1, then a release store of it to *outbound (data
 * written before by the signalling thread is visible first).
 * wait:   expected += 1, then spin until an acquire load of *inbound reaches
 * it (bounded by the timeout, abortable).
 * One signalling thread and one waiting thread at a time per semaphore (no
 * atomics to peer or host memory are needed, which PCIe may not offer).
 */
#ifndef MSCCLPP_SEMAPHORE_DEVICE_H_
#define MSCCLPP_SEMAPHORE_DEVICE_H_

#include <stdint.h>

#include "mscclpp/device.h"

/* Pointers as the using side sees them; NULL for what that side may not do
 * (a kernel's handle of a host-to-device semaphore cannot signal). */
typedef struct {
  uint64_t* inbound;
  uint64_t* expected;
  uint64_t* outbound;
  uint64_t* outboundCount;
  mscclppWaitContext wait;
} mscclppSemaphoreDeviceHandle;

/* Send one signal. Call from one thread at a time; make other threads'
 * writes that must precede the signal happen before (e.g. __syncthreads()). */
MSCCLPP_DEVICE_INLINE void mscclppSemaphoreDeviceSignal(const mscclppSemaphoreDeviceHandle* sem) {
  uint64_t v = *sem->outboundCount + 1;
  *sem->outboundCount = v;
  mscclppStoreReleaseSys64(sem->outbound, v);
}

/* Consume one signal if it has arrived: 1 if it had, 0 otherwise (nothing
 * consumed). No wait. */
MSCCLPP_DEVICE_INLINE int mscclppSemaphoreDevicePoll(const mscclppSemaphoreDeviceHandle* sem) {
  uint64_t want = *sem->expected + 1;
  if (mscclppLoadAcquireSys64(sem->inbound) < want) return 0;
  *sem->expected = want;
  return 1;
}

/* Wait for one signal and consume it. mscclppSuccess, mscclppAborted, or
 * mscclppTimeout (recorded as MSCCLPP_DEVICE_ERROR_TIMEOUT_SEMAPHORE, which
 * raises the abort flag). After a failure the signal is not consumed. */
MSCCLPP_DEVICE_INLINE mscclppResult_t mscclppSemaphoreDeviceWait(const mscclppSemaphoreDeviceHandle* sem) {
  uint64_t want = *sem->expected + 1;
  mscclppWaitState st = MSCCLPP_WAIT_STATE_INIT;
  /* Spin with relaxed loads (an acquire per poll costs a fence each time);
   * once the count is seen, one acquire load of the same word synchronizes
   * with the signaller's release store of it (or a later one), so its
   * earlier writes are visible when this returns. The abort flag and the
   * clock are read only every MSCCLPP_WAIT_CHECK_INTERVAL polls. */
  while (mscclppLoadRelaxedSys64(sem->inbound) < want) {
    mscclppResult_t r = mscclppWaitStep(&sem->wait, &st, MSCCLPP_DEVICE_ERROR_TIMEOUT_SEMAPHORE, want);
    if (r != mscclppSuccess) return r;
  }
  (void)mscclppLoadAcquireSys64(sem->inbound);
  *sem->expected = want;
  return mscclppSuccess;
}

#endif /* MSCCLPP_SEMAPHORE_DEVICE_H_ */
