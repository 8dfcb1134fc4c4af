/* SPDX-License-Identifier: MIT */
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
 * Release and acquire are at system scope unless the handle says both ends
 * run on one GPU (MSCCLPP_SEMAPHORE_SCOPE_GPU). The *Counted forms keep the
 * two counters in registers for a run of operations of one thread.
 * One signalling thread and one waiting thread at a time per semaphore (no
 * atomics to peer or host memory are needed, which PCIe may not offer).
 */
#ifndef MSCCLPP_SEMAPHORE_DEVICE_H_
#define MSCCLPP_SEMAPHORE_DEVICE_H_

#include <stddef.h>
#include <stdint.h>

#include "mscclpp/device.h"

/* Memory-model scope of a semaphore's release (signal) and acquire (wait).
 * SYS, the zero value, is always correct. GPU is for a semaphore whose
 * signaller and waiter both run on the same CUDA device (ranks sharing one
 * GPU under MPS): the PTX .gpu scope covers every thread of one device,
 * whatever process launched it, and a gpu-scope release costs far less than
 * a system-scope one. Only channel creation sets GPU, after checking that
 * both ends' kernels run on the same physical device (memory_channel.c); a
 * semaphore the CPU, a copy engine or another GPU signals stays SYS. On the
 * host backend both are the same C11 atomics. */
#define MSCCLPP_SEMAPHORE_SCOPE_SYS 0u
#define MSCCLPP_SEMAPHORE_SCOPE_GPU 1u

/* Pointers as the using side sees them; NULL for what that side may not do
 * (a kernel's handle of a host-to-device semaphore cannot signal). */
typedef struct {
  uint64_t* inbound;
  uint64_t* expected;
  uint64_t* outbound;
  uint64_t* outboundCount;
  mscclppWaitContext wait;
  uint32_t scope; /* MSCCLPP_SEMAPHORE_SCOPE_*; 0 (SYS) unless creation proved GPU enough */
  /* The semaphore's number in its communicator's channels (1, 2, ...; 0:
   * none, as for mscclppSemaphoreCreate's): a wait that lasts names it in
   * its wait note (mscclppWaitNote), and the hang report names its peer. */
  uint32_t id;
} mscclppSemaphoreDeviceHandle;

/* The two counters of one semaphore held in registers by the ONE thread
 * that signals and waits on it, for a run of operations: load them once
 * (mscclppSemaphoreDeviceCountsLoad), call the *Counted operations, store
 * them back (mscclppSemaphoreDeviceCountsStore) before the kernel ends or
 * another thread takes over the semaphore -- the counters must persist
 * across kernel launches. Saves the dependent load of a counter from device
 * memory (an L2 round trip after the acquire that invalidated L1) before
 * each signal and wait. Between load and store no other thread (nor the
 * plain, uncounted calls) may signal or wait on the semaphore. */
typedef struct {
  uint64_t sent;     /* signals sent (the outbound count); 0 when the side cannot signal */
  uint64_t consumed; /* signals consumed (the expected count) */
} mscclppSemaphoreDeviceCounts;

MSCCLPP_DEVICE_INLINE mscclppSemaphoreDeviceCounts mscclppSemaphoreDeviceCountsLoad(
    const mscclppSemaphoreDeviceHandle* sem) {
  mscclppSemaphoreDeviceCounts c;
  c.sent = sem->outboundCount != NULL ? *sem->outboundCount : 0;
  c.consumed = sem->expected != NULL ? *sem->expected : 0;
  return c;
}

MSCCLPP_DEVICE_INLINE void mscclppSemaphoreDeviceCountsStore(const mscclppSemaphoreDeviceHandle* sem,
                                                             const mscclppSemaphoreDeviceCounts* c) {
  if (sem->outboundCount != NULL) *sem->outboundCount = c->sent;
  if (sem->expected != NULL) *sem->expected = c->consumed;
}

/* Send one signal with the count in registers (see the plain form). The
 * release is at the handle's scope; one uniform branch per call. */
MSCCLPP_DEVICE_INLINE void mscclppSemaphoreDeviceSignalCounted(const mscclppSemaphoreDeviceHandle* sem,
                                                               mscclppSemaphoreDeviceCounts* c) {
  uint64_t v = ++c->sent;
  if (sem->scope == MSCCLPP_SEMAPHORE_SCOPE_GPU)
    mscclppStoreReleaseGpu64(sem->outbound, v);
  else
    mscclppStoreReleaseSys64(sem->outbound, v);
}

/* One acquire load of the inbound counter at the handle's scope. */
MSCCLPP_DEVICE_INLINE uint64_t mscclppSemaphoreDeviceLoadAcquire(const mscclppSemaphoreDeviceHandle* sem) {
  return sem->scope == MSCCLPP_SEMAPHORE_SCOPE_GPU ? mscclppLoadAcquireGpu64(sem->inbound)
                                                   : mscclppLoadAcquireSys64(sem->inbound);
}

MSCCLPP_DEVICE_INLINE int mscclppSemaphoreDevicePollCounted(const mscclppSemaphoreDeviceHandle* sem,
                                                            mscclppSemaphoreDeviceCounts* c) {
  uint64_t want = c->consumed + 1;
  if (mscclppSemaphoreDeviceLoadAcquire(sem) < want) return 0;
  c->consumed = want;
  return 1;
}

/* The wait's spin after its first poll `seen` (a relaxed load of *inbound).
 * Spin with relaxed loads (an acquire per poll costs a fence each time);
 * once the count is seen, one acquire load of the same word synchronizes
 * with the signaller's release store of it (or a later one), so its earlier
 * writes are visible when this returns. The abort flag and the clock are
 * read only every MSCCLPP_WAIT_CHECK_INTERVAL polls. */
MSCCLPP_DEVICE_INLINE mscclppResult_t mscclppSemaphoreDeviceSpin(const mscclppSemaphoreDeviceHandle* sem,
                                                                 uint64_t seen, uint64_t want) {
  mscclppWaitState st = MSCCLPP_WAIT_STATE_INIT;
  while (seen < want) {
    const mscclppWaitWho who = {seen, 0, MSCCLPP_WAIT_PEER_UNKNOWN, sem->id};
    mscclppResult_t r = mscclppWaitStepWho(&sem->wait, &st, MSCCLPP_DEVICE_ERROR_TIMEOUT_SEMAPHORE, want, &who);
    if (r != mscclppSuccess) return r;
    seen = mscclppLoadRelaxedSys64(sem->inbound);
  }
  mscclppWaitEnd(&sem->wait, &st);
  (void)mscclppSemaphoreDeviceLoadAcquire(sem);
  return mscclppSuccess;
}

MSCCLPP_DEVICE_INLINE mscclppResult_t mscclppSemaphoreDeviceWaitCounted(const mscclppSemaphoreDeviceHandle* sem,
                                                                        mscclppSemaphoreDeviceCounts* c) {
  uint64_t want = c->consumed + 1;
  mscclppResult_t r = mscclppSemaphoreDeviceSpin(sem, mscclppLoadRelaxedSys64(sem->inbound), want);
  if (r == mscclppSuccess) c->consumed = want;
  return r;
}

/* Relaxed signal and wait: synchronization only. The signal orders none of
 * this thread's earlier writes before it, and the wait makes none of the
 * signaller's writes visible: for data that carries its own validity (LL
 * packets) or is ordered by other means, or a pure rendezvous. They skip
 * the release fence and the acquire load, which are most of a signal/wait
 * ping-pong's cost between ranks on one GPU (bench_channel rows 2 and 2f).
 * Counts are shared with the ordered forms (mix them freely). As MSCCL++'s
 * relaxedSignal / relaxedWait. */
MSCCLPP_DEVICE_INLINE void mscclppSemaphoreDeviceRelaxedSignalCounted(const mscclppSemaphoreDeviceHandle* sem,
                                                                      mscclppSemaphoreDeviceCounts* c) {
  mscclppStoreRelaxedSys64(sem->outbound, ++c->sent);
}

MSCCLPP_DEVICE_INLINE mscclppResult_t mscclppSemaphoreDeviceRelaxedWaitCounted(const mscclppSemaphoreDeviceHandle* sem,
                                                                               mscclppSemaphoreDeviceCounts* c) {
  uint64_t want = c->consumed + 1;
  mscclppWaitState st = MSCCLPP_WAIT_STATE_INIT;
  uint64_t seen;
  while ((seen = mscclppLoadRelaxedSys64(sem->inbound)) < want) {
    const mscclppWaitWho who = {seen, 0, MSCCLPP_WAIT_PEER_UNKNOWN, sem->id};
    mscclppResult_t r = mscclppWaitStepWho(&sem->wait, &st, MSCCLPP_DEVICE_ERROR_TIMEOUT_SEMAPHORE, want, &who);
    if (r != mscclppSuccess) return r;
  }
  mscclppWaitEnd(&sem->wait, &st);
  c->consumed = want;
  return mscclppSuccess;
}

MSCCLPP_DEVICE_INLINE void mscclppSemaphoreDeviceRelaxedSignal(const mscclppSemaphoreDeviceHandle* sem) {
  mscclppSemaphoreDeviceCounts c;
  c.sent = *sem->outboundCount;
  mscclppSemaphoreDeviceRelaxedSignalCounted(sem, &c);
  *sem->outboundCount = c.sent;
}

MSCCLPP_DEVICE_INLINE mscclppResult_t mscclppSemaphoreDeviceRelaxedWait(const mscclppSemaphoreDeviceHandle* sem) {
  mscclppSemaphoreDeviceCounts c;
  c.consumed = *sem->expected;
  mscclppResult_t r = mscclppSemaphoreDeviceRelaxedWaitCounted(sem, &c);
  if (r == mscclppSuccess) *sem->expected = c.consumed;
  return r;
}

/* Send one signal. Call from one thread at a time; make other threads'
 * writes that must precede the signal happen before (e.g. __syncthreads()).
 * The count is stored back after the release store, so the release's fence
 * does not also wait for that bookkeeping store. */
MSCCLPP_DEVICE_INLINE void mscclppSemaphoreDeviceSignal(const mscclppSemaphoreDeviceHandle* sem) {
  mscclppSemaphoreDeviceCounts c;
  c.sent = *sem->outboundCount;
  mscclppSemaphoreDeviceSignalCounted(sem, &c);
  *sem->outboundCount = c.sent;
}

/* Consume one signal if it has arrived: 1 if it had, 0 otherwise (nothing
 * consumed). No wait. */
MSCCLPP_DEVICE_INLINE int mscclppSemaphoreDevicePoll(const mscclppSemaphoreDeviceHandle* sem) {
  mscclppSemaphoreDeviceCounts c;
  c.consumed = *sem->expected;
  if (!mscclppSemaphoreDevicePollCounted(sem, &c)) return 0;
  *sem->expected = c.consumed;
  return 1;
}

/* Wait for one signal and consume it. mscclppSuccess, mscclppAborted, or
 * mscclppTimeout (recorded as MSCCLPP_DEVICE_ERROR_TIMEOUT_SEMAPHORE, which
 * raises the abort flag). After a failure the signal is not consumed. The
 * load of *expected and the first poll of *inbound are issued together
 * (neither depends on the other), so the counter costs no extra round
 * trip. */
MSCCLPP_DEVICE_INLINE mscclppResult_t mscclppSemaphoreDeviceWait(const mscclppSemaphoreDeviceHandle* sem) {
  uint64_t consumed = *sem->expected;
  uint64_t seen = mscclppLoadRelaxedSys64(sem->inbound);
  uint64_t want = consumed + 1;
  mscclppResult_t r = mscclppSemaphoreDeviceSpin(sem, seen, want);
  if (r == mscclppSuccess) *sem->expected = want;
  return r;
}

#endif /* MSCCLPP_SEMAPHORE_DEVICE_H_ */
