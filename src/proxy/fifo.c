/* SPDX-License-Identifier: MIT */
/* The trigger FIFO, host side (see fifo.h and mscclpp/fifo_device.h). */
#include "proxy/fifo.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "core/params.h"

#define FIFO_MAX_SIZE (1 << 24)

mscclppResult_t mscclppTriggerEncode(const mscclppTriggerFields* fields, mscclppTrigger* trigger) {
  if (fields == NULL || trigger == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_PROXY, "mscclppTriggerEncode: NULL argument");
  int bad = mscclppTriggerCheck(fields);
  if (bad != MSCCLPP_TRIGGER_FIELD_OK) {
    uint64_t limit = 0;
    switch (bad) {
      case MSCCLPP_TRIGGER_FIELD_SRC_MEMORY_ID:
      case MSCCLPP_TRIGGER_FIELD_DST_MEMORY_ID: limit = MSCCLPP_TRIGGER_MAX_MEMORIES - 1; break;
      case MSCCLPP_TRIGGER_FIELD_SRC_OFFSET:
      case MSCCLPP_TRIGGER_FIELD_DST_OFFSET: limit = MSCCLPP_TRIGGER_MAX_OFFSET; break;
      case MSCCLPP_TRIGGER_FIELD_SIZE: limit = MSCCLPP_TRIGGER_MAX_SIZE; break;
      case MSCCLPP_TRIGGER_FIELD_SEMAPHORE_ID: limit = MSCCLPP_TRIGGER_MAX_SEMAPHORES - 1; break;
      default: break;
    }
    if (bad == MSCCLPP_TRIGGER_FIELD_OP)
      return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_PROXY,
                        "trigger op %u is invalid: use a nonzero combination of DATA|FLAG|SYNC (1..7) or a user op "
                        "%u..%u",
                        fields->op, MSCCLPP_TRIGGER_OP_USER_FIRST, MSCCLPP_TRIGGER_OP_USER_LAST);
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_PROXY, "trigger field %s = %" PRIu64 " exceeds its limit %" PRIu64,
                      mscclppTriggerFieldName(bad), mscclppTriggerFieldValue(fields, bad), limit);
  }
  *trigger = mscclppTriggerPack(fields);
  return mscclppSuccess;
}

static int log2u(uint32_t v) {
  int l = 0;
  while ((1u << l) < v) l++;
  return l;
}

mscclppResult_t mscclppFifoCreate(const mscclppFifoConfig* config, mscclppFifo_t* fifo) {
  if (config == NULL || fifo == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_PROXY, "mscclppFifoCreate: NULL argument");
  if (config->structSize != sizeof(mscclppFifoConfig))
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_PROXY,
                      "mscclppFifoConfig.structSize is %zu, expected %zu: start from MSCCLPP_FIFO_CONFIG_INITIALIZER",
                      config->structSize, sizeof(mscclppFifoConfig));
  struct mscclppParams params;
  MSCCLPP_RETURN_ON_ERROR(mscclppParamsLoad(&params));
  int64_t size = config->size != 0 ? config->size : params.fifoSize;
  if (size < 2 || size > FIFO_MAX_SIZE || (size & (size - 1)) != 0)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_PROXY, "FIFO size %lld must be a power of two in [2, %d]",
                      (long long)size, FIFO_MAX_SIZE);
  if (config->timeoutSec < 0)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_PROXY, "FIFO timeout %g s must be >= 0 (0: MSCCLPP_TIMEOUT)",
                      config->timeoutSec);
  int device = config->device < 0 ? MSCCLPP_HOST_BACKEND_DEVICE : config->device;

  struct mscclppFifo* f = aligned_alloc(64, (sizeof(*f) + 63) / 64 * 64);
  if (f == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_PROXY, "cannot allocate a FIFO object");
  memset(f, 0, sizeof(*f));
  f->device = device;
  f->size = (uint32_t)size;
  f->sizeLog2 = (uint32_t)log2u(f->size);
  f->timeoutSec = config->timeoutSec > 0 ? config->timeoutSec : params.timeout;
  mscclppResult_t res = mscclppAbortAcquire(config->abort, device, &f->abort, &f->ownsAbort);
  if (res != mscclppSuccess) goto fail_free_object;

  size_t slotBytes = (size_t)f->size * sizeof(mscclppTrigger);
  res = mscclppGpuHostAllocMapped(device, slotBytes + 3 * MSCCLPP_CACHE_LINE, &f->mappedHost, &f->mappedDev);
  if (res != mscclppSuccess) goto fail_drop_abort;
  f->slotsHost = (uint64_t*)f->mappedHost;
  f->slotsDev = (uint64_t*)f->mappedDev;
  f->tailHost = (uint64_t*)((char*)f->mappedHost + slotBytes);
  f->tailDev = (uint64_t*)((char*)f->mappedDev + slotBytes);
  f->completedHost = (uint64_t*)((char*)f->mappedHost + slotBytes + MSCCLPP_CACHE_LINE);
  f->completedDev = (uint64_t*)((char*)f->mappedDev + slotBytes + MSCCLPP_CACHE_LINE);
  f->headReadback = (uint64_t*)((char*)f->mappedHost + slotBytes + 2 * MSCCLPP_CACHE_LINE);

  res = mscclppGpuDeviceAlloc(device, 2 * MSCCLPP_CACHE_LINE, &f->devMem);
  if (res != mscclppSuccess) goto fail_free_mapped;
  f->headDev = (uint64_t*)f->devMem;
  f->tailCacheDev = (uint64_t*)((char*)f->devMem + MSCCLPP_CACHE_LINE);

  res = mscclppGpuStreamCreate(device, &f->stream);
  if (res != mscclppSuccess) goto fail_free_device;
  MSCCLPP_INFO(MSCCLPP_LOG_PROXY, "FIFO %p: %u slots, device %d, timeout %g s", (void*)f, f->size, device,
               f->timeoutSec);
  *fifo = f;
  return mscclppSuccess;

fail_free_device:
  mscclppGpuDeviceFree(device, f->devMem);
fail_free_mapped:
  mscclppGpuHostFreeMapped(device, f->mappedHost);
fail_drop_abort:
  mscclppAbortDrop(f->abort, f->ownsAbort);
fail_free_object:
  free(f);
  return res;
}

mscclppResult_t mscclppFifoPending(struct mscclppFifo* f, uint64_t* pending) {
  uint64_t head;
  if (f->device < 0) {
    head = __atomic_load_n(f->headDev, __ATOMIC_ACQUIRE);
  } else {
    MSCCLPP_RETURN_ON_ERROR(mscclppGpuMemcpyAsync(f->stream, f->headReadback, f->headDev, sizeof(uint64_t)));
    MSCCLPP_RETURN_ON_ERROR(mscclppGpuStreamSynchronize(f->stream, f->timeoutSec));
    head = __atomic_load_n(f->headReadback, __ATOMIC_ACQUIRE);
  }
  uint64_t tail = __atomic_load_n(f->tailHost, __ATOMIC_ACQUIRE);
  *pending = head > tail ? head - tail : 0;
  return mscclppSuccess;
}

void mscclppFifoSnapshot(const struct mscclppFifo* f, uint64_t* tail, uint64_t* completed, uint64_t* head,
                         int* headKnown) {
  *tail = __atomic_load_n(f->tailHost, __ATOMIC_ACQUIRE);
  *completed = __atomic_load_n(f->completedHost, __ATOMIC_ACQUIRE);
  *headKnown = f->device < 0; /* device memory is host memory there */
  *head = *headKnown ? __atomic_load_n(f->headDev, __ATOMIC_ACQUIRE) : 0;
}

int mscclppFifoPeek(const struct mscclppFifo* f, uint64_t pos, mscclppTrigger* trigger) {
  uint64_t w0, w1;
  mscclppTriggerLoad(f->slotsHost + 2 * (pos & (f->size - 1)), &w0, &w1);
  uint64_t want = (((pos >> f->sizeLog2) & 1u) ^ 1u) << 63;
  if (((w0 ^ want) | (w1 ^ want)) & MSCCLPP_TRIGGER_COMMIT_BIT) return 0;
  trigger->value[0] = w0 & ~MSCCLPP_TRIGGER_COMMIT_BIT;
  trigger->value[1] = w1 & ~MSCCLPP_TRIGGER_COMMIT_BIT;
  return 1;
}

mscclppResult_t mscclppFifoDestroy(mscclppFifo_t fifo) {
  if (fifo == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_PROXY, "mscclppFifoDestroy: fifo is NULL");
  if (__atomic_load_n(&fifo->attached, __ATOMIC_ACQUIRE))
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_PROXY,
                      "FIFO %p is still served by a proxy service: destroy the proxy first", (void*)fifo);
  if (!mscclppAbortIsRaised(fifo->abort)) {
    uint64_t pending = 0;
    MSCCLPP_RETURN_ON_ERROR(mscclppFifoPending(fifo, &pending));
    if (pending > 0)
      return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_PROXY,
                        "FIFO %p has %" PRIu64 " pushed trigger(s) not consumed: a kernel is still pushing; wait for "
                        "it (or abort) before destroying",
                        (void*)fifo, pending);
  }
  mscclppGpuStreamDestroy(fifo->stream);
  mscclppGpuDeviceFree(fifo->device, fifo->devMem);
  mscclppGpuHostFreeMapped(fifo->device, fifo->mappedHost);
  mscclppAbortDrop(fifo->abort, fifo->ownsAbort);
  free(fifo);
  return mscclppSuccess;
}

mscclppResult_t mscclppFifoGetDeviceHandle(mscclppFifo_t fifo, mscclppFifoDeviceHandle* handle) {
  if (fifo == NULL || handle == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_PROXY, "mscclppFifoGetDeviceHandle: NULL argument");
  mscclppFifoDeviceHandle h;
  memset(&h, 0, sizeof(h));
  h.slots = fifo->slotsDev;
  h.head = fifo->headDev;
  h.tailCache = fifo->tailCacheDev;
  h.tail = fifo->tailDev;
  h.completed = fifo->completedDev;
  h.size = fifo->size;
  h.sizeLog2 = fifo->sizeLog2;
  h.fullSleepNsPerSlot = MSCCLPP_FIFO_FULL_SLEEP_NS_PER_SLOT;
  h.claimPolicy = MSCCLPP_FIFO_CLAIM_DEFAULT;
  h.tailRefreshNs = MSCCLPP_FIFO_TAIL_REFRESH_NS;
  mscclppAbortWaitContext(fifo->abort, fifo->timeoutSec, 1, &h.wait);
  *handle = h;
  return mscclppSuccess;
}

mscclppResult_t mscclppFifoGetAbort(mscclppFifo_t fifo, mscclppAbort_t* abort) {
  if (fifo == NULL || abort == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_PROXY, "mscclppFifoGetAbort: NULL argument");
  *abort = fifo->abort;
  return mscclppSuccess;
}

mscclppResult_t mscclppFifoGetSize(mscclppFifo_t fifo, int* size) {
  if (fifo == NULL || size == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_PROXY, "mscclppFifoGetSize: NULL argument");
  *size = (int)fifo->size;
  return mscclppSuccess;
}

mscclppResult_t mscclppFifoPoll(mscclppFifo_t fifo, mscclppTrigger* trigger, uint64_t* position, int* ready) {
  if (fifo == NULL || trigger == NULL || position == NULL || ready == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_PROXY, "mscclppFifoPoll: NULL argument");
  mscclppTrigger t;
  if (mscclppFifoHostPoll(fifo, &t)) {
    *trigger = t;
    *position = fifo->hostTail;
    *ready = 1;
  } else {
    *ready = 0;
  }
  return mscclppSuccess;
}

mscclppResult_t mscclppFifoPop(mscclppFifo_t fifo) {
  if (fifo == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_PROXY, "mscclppFifoPop: fifo is NULL");
  mscclppTrigger t;
  if (!mscclppFifoHostPoll(fifo, &t))
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_PROXY, "mscclppFifoPop: no fresh trigger at position %" PRIu64,
                      fifo->hostTail);
  mscclppFifoHostPop(fifo);
  return mscclppSuccess;
}

mscclppResult_t mscclppFifoComplete(mscclppFifo_t fifo, uint64_t end) {
  if (fifo == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_PROXY, "mscclppFifoComplete: fifo is NULL");
  if (end > fifo->hostTail || end < fifo->hostCompleted)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_PROXY,
                      "mscclppFifoComplete(%" PRIu64 "): must lie in [completed %" PRIu64 ", tail %" PRIu64 "]", end,
                      fifo->hostCompleted, fifo->hostTail);
  mscclppFifoHostComplete(fifo, end);
  return mscclppSuccess;
}
