/*
 * The device side of the trigger FIFO: what a kernel (or, on the host
 * backend, a CPU thread) calls. Host side: mscclpp/fifo.h.
 *
 * Memory:
 *   slots      size x 16 bytes, host-mapped: written by pushers (one 16-byte
 *              store each), read by the proxy (one 16-byte load each), never
 *              cleared (commit bits alternate per lap, see trigger.h)
 *   head       device memory: next position to claim (fetch-and-add)
 *   tailCache  device memory: the last tail a pusher read (a lower bound)
 *   tail       host-mapped, written by the proxy: positions < tail are taken
 *   completed  host-mapped, written by the proxy: positions < completed are
 *              complete at their destination (flush)
 * A push reads nothing over PCIe unless the FIFO looks full from tailCache.
 * Positions are 64-bit and never wrap.
 *
 * Every wait here is bounded by the handle's timeout and returns early when
 * the abort flag rises; a timeout is recorded as the first device error.
 * After any failure the FIFO is poisoned (a claimed position may never be
 * written): destroy it with its proxy.
 */
#ifndef MSCCLPP_FIFO_DEVICE_H_
#define MSCCLPP_FIFO_DEVICE_H_

#include <stdint.h>

#include "mscclpp/device.h"
#include "mscclpp/trigger.h"

/* Pass by value to kernels; get it from mscclppFifoGetDeviceHandle. */
typedef struct {
  uint64_t* slots;     /* 2 * size words, host-mapped */
  uint64_t* head;      /* device memory */
  uint64_t* tailCache; /* device memory */
  uint64_t* tail;      /* host-mapped */
  uint64_t* completed; /* host-mapped */
  uint32_t size;       /* slots, a power of two */
  uint32_t sizeLog2;
  mscclppWaitContext wait;
} mscclppFifoDeviceHandle;

/* Push a packed trigger (see mscclppTriggerPack / mscclppTriggerEncode; its
 * commit bits are ignored). Waits only while the FIFO is full. On success
 * *position is the trigger's position, for mscclppFifoDeviceSync/Flush.
 * Returns mscclppSuccess, mscclppAborted, or mscclppTimeout. */
MSCCLPP_DEVICE_INLINE mscclppResult_t mscclppFifoDevicePushTrigger(const mscclppFifoDeviceHandle* fifo,
                                                             mscclppTrigger trigger, uint64_t* position) {
  /* Read the cached tail before claiming, so that the two device-memory
   * latencies overlap: an older cached tail is still a lower bound of the
   * tail, which is all the check needs (and tail <= pos always holds). */
  uint64_t tailCache = mscclppLoadRelaxedGpu64(fifo->tailCache);
  uint64_t pos = mscclppAtomicClaim64(fifo->head);
  if (pos - tailCache >= fifo->size) {
    mscclppWaitState st = MSCCLPP_WAIT_STATE_INIT;
    for (;;) {
      uint64_t tail = mscclppLoadAcquireSys64(fifo->tail);
      if (pos - tail < fifo->size) {
        mscclppStoreRelaxed64(fifo->tailCache, tail);
        break;
      }
      mscclppResult_t r = mscclppWaitStep(&fifo->wait, &st, MSCCLPP_DEVICE_ERROR_TIMEOUT_PUSH, pos);
      if (r != mscclppSuccess) return r;
    }
  }
  uint64_t commit = (((pos >> fifo->sizeLog2) & 1u) ^ 1u) << 63;
  uint64_t* slot = fifo->slots + 2 * (pos & (fifo->size - 1));
  mscclppTriggerStore(slot, (trigger.value[0] & ~MSCCLPP_TRIGGER_COMMIT_BIT) | commit,
                      (trigger.value[1] & ~MSCCLPP_TRIGGER_COMMIT_BIT) | commit);
  *position = pos;
  return mscclppSuccess;
}

/* Check `fields` and push them. An out-of-range field returns
 * mscclppInvalidArgument and records MSCCLPP_DEVICE_ERROR_INVALID_TRIGGER
 * (field number and value), which raises the abort flag; nothing is pushed.
 * Otherwise as mscclppFifoDevicePushTrigger. */
MSCCLPP_DEVICE_INLINE mscclppResult_t mscclppFifoDevicePush(const mscclppFifoDeviceHandle* fifo,
                                                      const mscclppTriggerFields* fields, uint64_t* position) {
  int bad = mscclppTriggerCheck(fields);
  if (bad != MSCCLPP_TRIGGER_FIELD_OK) {
    mscclppDeviceRaise(&fifo->wait, MSCCLPP_DEVICE_ERROR_INVALID_TRIGGER, (unsigned)bad,
                       mscclppTriggerFieldValue(fields, bad));
    return mscclppInvalidArgument;
  }
  return mscclppFifoDevicePushTrigger(fifo, mscclppTriggerPack(fields), position);
}

/* 1 when the proxy has taken `position` (its handler has run). One read of
 * host-mapped memory; no wait. */
MSCCLPP_DEVICE_INLINE int mscclppFifoDevicePoll(const mscclppFifoDeviceHandle* fifo, uint64_t position) {
  return mscclppLoadAcquireSys64(fifo->tail) > position;
}

/* Wait until the proxy has taken `position`. mscclppSuccess, mscclppAborted
 * or mscclppTimeout. */
MSCCLPP_DEVICE_INLINE mscclppResult_t mscclppFifoDeviceSync(const mscclppFifoDeviceHandle* fifo, uint64_t position) {
  mscclppWaitState st = MSCCLPP_WAIT_STATE_INIT;
  while (mscclppLoadAcquireSys64(fifo->tail) <= position) {
    mscclppResult_t r = mscclppWaitStep(&fifo->wait, &st, MSCCLPP_DEVICE_ERROR_TIMEOUT_SYNC, position);
    if (r != mscclppSuccess) return r;
  }
  return mscclppSuccess;
}

/* Wait until everything up to and including `position` is complete at its
 * destination (the proxy advances `completed` when its copies for those
 * positions have finished, not merely started). mscclppSuccess,
 * mscclppAborted or mscclppTimeout. */
MSCCLPP_DEVICE_INLINE mscclppResult_t mscclppFifoDeviceFlush(const mscclppFifoDeviceHandle* fifo, uint64_t position) {
  mscclppWaitState st = MSCCLPP_WAIT_STATE_INIT;
  while (mscclppLoadAcquireSys64(fifo->completed) <= position) {
    mscclppResult_t r = mscclppWaitStep(&fifo->wait, &st, MSCCLPP_DEVICE_ERROR_TIMEOUT_FLUSH, position);
    if (r != mscclppSuccess) return r;
  }
  return mscclppSuccess;
}

#endif /* MSCCLPP_FIFO_DEVICE_H_ */
