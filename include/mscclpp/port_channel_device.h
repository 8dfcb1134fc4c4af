/* SPDX-License-Identifier: MIT */
/*
 * Port channels, the device side: what a kernel (or, on the host backend, a
 * CPU thread) calls. Host API: mscclpp/port_channel.h.
 *
 * A port channel joins this rank to one peer through the communicator's
 * proxy. Every call pushes ONE trigger into the communicator's FIFO; the
 * proxy's executor carries it out on the channel's connection, in FIFO
 * order, with the operations of one trigger in the order data -> flag ->
 * sync:
 *   put     DATA  copy `size` bytes from memory `src` + srcOffset (this
 *                 rank's) to memory `dst` + dstOffset (the peer's) with the
 *                 connection's copy engine (cudaMemcpyAsync on the proxy's
 *                 stream; memcpy on the host backend)
 *   signal  FLAG  add one to the peer's inbound semaphore of this channel,
 *                 visible only after every earlier put of the channel is
 *                 visible at the peer
 *   flush   SYNC  return once every put and signal pushed before (by any
 *                 thread, on any channel of the communicator) is complete at
 *                 its destination and its source may be reused
 * wait / poll consume signals the PEER sent on this channel (its inbound
 * semaphore lives in this rank's memory: device memory by default, so a
 * waiting kernel polls local memory).
 *
 * Memory ids: `dst` and `src` index the communicator's table of port channel
 * memories; the handle carries the two the channel was built with (the
 * peer's memory as `dst`, this rank's as `src`), and
 * mscclppPortChannelAddMemory gives ids of more. Limits of one trigger:
 * offsets < 4 GiB; larger sizes are cut into triggers of at most 1 GiB here.
 *
 * Every call returns mscclppSuccess, mscclppAborted (the communicator's
 * abort flag is up), mscclppTimeout (the FIFO stayed full, or a wait/flush
 * lasted longer than MSCCLPP_TIMEOUT; recorded as the first device error,
 * which raises the abort flag) or mscclppInvalidArgument (an offset out of
 * range; recorded too). Any number of threads may push on any channels at
 * once; one thread at a time may wait/poll on one channel.
 */
#ifndef MSCCLPP_PORT_CHANNEL_DEVICE_H_
#define MSCCLPP_PORT_CHANNEL_DEVICE_H_

#include <stdint.h>

#include "mscclpp/device.h"
#include "mscclpp/fifo_device.h"
#include "mscclpp/packet.h"
#include "mscclpp/semaphore_device.h"
#include "mscclpp/trigger.h"

/* Puts larger than this are cut into several triggers. */
#define MSCCLPP_PORT_CHANNEL_MAX_CHUNK (1ull << 30)

/* flags: the channel's transport writes small payloads itself
 * (mscclppConnection's inline writes: CUDA IPC with stream writes, host
 * shared memory), so puts of 1..8 bytes from the channel's own `src` travel
 * inside the trigger (MSCCLPP_TRIGGER_INLINE): the pushing thread reads the
 * bytes, and the proxy writes them and the signal with one driver call and
 * no copy engine. Clear it in a copy of the handle to force copies. */
#define MSCCLPP_PORT_CHANNEL_FLAG_INLINE 0x1u
/* flags: the pushing side can store to the channel's `dst` itself (CUDA IPC:
 * the peer's memory is mapped into this process; dstPtr/dstSize). An inline
 * put to `dst` then stores its bytes there before it pushes the trigger
 * (release order, so they are visible before the proxy signals), and marks
 * the trigger "stored". A proxy that has never written through the
 * connection itself (no copy, no proxy-written inline put) only signals -
 * with the semaphore in host-pinned memory, a CPU store: no driver call and
 * no copy engine on the path. Once it has, a write of its own might land
 * after the kernel's store, so it writes the bytes again behind its earlier
 * writes (FIFO order holds either way). Needs MSCCLPP_PORT_CHANNEL_FLAG_INLINE.
 * Clear it in a copy of the handle to leave the payload to the proxy. */
#define MSCCLPP_PORT_CHANNEL_FLAG_STORE 0x2u

/* Plain struct: copy it to kernels by value (or through device memory). */
typedef struct {
  mscclppFifoDeviceHandle fifo;          /* the communicator's trigger FIFO */
  mscclppSemaphoreDeviceHandle inbound;  /* signals from the peer (wait side only) */
  uint32_t semaphoreId;                  /* this channel's id at the proxy */
  uint32_t dst;                          /* memory id of the peer's memory */
  uint32_t src;                          /* memory id of this rank's memory */
  uint32_t flags;                        /* MSCCLPP_PORT_CHANNEL_FLAG_* */
  const uint8_t* srcPtr;                 /* memory `src` as the pushing side addresses it */
  uint64_t srcSize;                      /* its size in bytes */
  uint8_t* dstPtr;                       /* memory `dst` as the pushing side addresses it (FLAG_STORE) */
  uint64_t dstSize;                      /* its size in bytes (FLAG_STORE) */
} mscclppPortChannelDeviceHandle;

/* Push a put of 1..MSCCLPP_TRIGGER_INLINE_MAX bytes with its data inside the
 * trigger when the channel allows it (see MSCCLPP_PORT_CHANNEL_FLAG_INLINE)
 * and the source is the channel's own `src`, in range: returns 1 and *r the
 * push's result; 0 when the put must be a copy. The bytes are read here,
 * so the trigger needs no release for them; what it still needs is that
 * what happened before the push (a wait that let the peer finish with the
 * destination) happens before the proxy's write. On the GPU the trigger's
 * store cannot become visible before an earlier acquire of this thread, and
 * the proxy's write is issued after it reads the trigger: a relaxed push
 * (a release made the 8-byte ping-pong slower: bench/HISTORY.md, "Port
 * channels: small puts inside the trigger"). The host backend follows
 * the C11 model, where that chain needs the release (free on x86); its
 * absence was a ThreadSanitizer report. */
#if defined(MSCCLPP_DEVICE_CUDA)
#define MSCCLPP_PORT_CHANNEL_INLINE_ORDER mscclppFifoOrderRelaxed
#else
#define MSCCLPP_PORT_CHANNEL_INLINE_ORDER mscclppFifoOrderRelease
#endif
MSCCLPP_DEVICE_INLINE int mscclppPortChannelDevicePushInline(const mscclppPortChannelDeviceHandle* ch, uint32_t dst,
                                                              uint64_t dstOffset, uint32_t src, uint64_t srcOffset,
                                                              uint64_t size, uint32_t lastOps, uint64_t* position,
                                                              mscclppResult_t* r) {
  if (!(ch->flags & MSCCLPP_PORT_CHANNEL_FLAG_INLINE) || src != ch->src || size == 0 ||
      size > MSCCLPP_TRIGGER_INLINE_MAX || srcOffset > ch->srcSize || ch->srcSize - srcOffset < size ||
      dstOffset > MSCCLPP_TRIGGER_MAX_OFFSET || dst >= MSCCLPP_TRIGGER_MAX_MEMORIES)
    return 0;
  const uint64_t v = mscclppPacketGather(ch->srcPtr + srcOffset, (uint32_t)size);
  mscclppTrigger t =
      mscclppTriggerPackInline(MSCCLPP_TRIGGER_INLINE | lastOps, dst, dstOffset, ch->semaphoreId, v, (uint32_t)size);
  mscclppFifoOrder order = MSCCLPP_PORT_CHANNEL_INLINE_ORDER;
  if ((ch->flags & MSCCLPP_PORT_CHANNEL_FLAG_STORE) && dst == ch->dst && dstOffset <= ch->dstSize &&
      ch->dstSize - dstOffset >= size) {
    mscclppPacketScatter(ch->dstPtr + dstOffset, v, (uint32_t)size);
    t = mscclppTriggerInlineMarkStored(t);
    order = mscclppFifoOrderRelease; /* the stores are visible before the proxy can signal */
  }
  *r = mscclppFifoDevicePushTrigger(&ch->fifo, t, order, position);
  return 1;
}

/* Push one trigger of this channel; *position is its FIFO position. */
MSCCLPP_DEVICE_INLINE mscclppResult_t mscclppPortChannelDevicePush(const mscclppPortChannelDeviceHandle* ch,
                                                                   uint32_t op, uint32_t dst, uint64_t dstOffset,
                                                                   uint32_t src, uint64_t srcOffset, uint64_t size,
                                                                   mscclppFifoOrder order, uint64_t* position) {
  mscclppTriggerFields f;
  f.op = op;
  f.srcMemoryId = src;
  f.dstMemoryId = dst;
  f.semaphoreId = ch->semaphoreId;
  f.srcOffset = srcOffset;
  f.dstOffset = dstOffset;
  f.size = size;
  int bad = mscclppTriggerCheck(&f);
  if (bad != MSCCLPP_TRIGGER_FIELD_OK) {
    mscclppDeviceRaise(&ch->fifo.wait, MSCCLPP_DEVICE_ERROR_INVALID_TRIGGER, (unsigned)bad,
                       mscclppTriggerFieldValue(&f, bad));
    return mscclppInvalidArgument;
  }
  return mscclppFifoDevicePushTrigger(&ch->fifo, mscclppTriggerPack(&f), order, position);
}

/* Copy [src + srcOffset, +size) to [dst + dstOffset, +size), in chunks of at
 * most MSCCLPP_PORT_CHANNEL_MAX_CHUNK; `lastOps` (FLAG, SYNC) ride on the
 * last chunk. Release order: writes of this thread to the source before the
 * call are seen by the copy. Puts of at most 8 bytes may travel inline
 * (mscclppPortChannelDevicePushInline). */
MSCCLPP_DEVICE_INLINE mscclppResult_t mscclppPortChannelDevicePutOps(const mscclppPortChannelDeviceHandle* ch,
                                                                     uint32_t dst, uint64_t dstOffset, uint32_t src,
                                                                     uint64_t srcOffset, uint64_t size,
                                                                     uint32_t lastOps, uint64_t* position) {
  mscclppResult_t r0;
  if (mscclppPortChannelDevicePushInline(ch, dst, dstOffset, src, srcOffset, size, lastOps, position, &r0)) return r0;
  for (;;) {
    uint64_t n = size > MSCCLPP_PORT_CHANNEL_MAX_CHUNK ? MSCCLPP_PORT_CHANNEL_MAX_CHUNK : size;
    int last = n == size;
    mscclppResult_t r = mscclppPortChannelDevicePush(ch, MSCCLPP_TRIGGER_DATA | (last ? lastOps : 0u), dst,
                                                     dstOffset, src, srcOffset, n, mscclppFifoOrderRelease, position);
    if (r != mscclppSuccess || last) return r;
    dstOffset += n;
    srcOffset += n;
    size -= n;
  }
}

/* put: copy size bytes from memory src (this rank's) at srcOffset to memory
 * dst (the peer's) at dstOffset. Returns once the trigger is pushed. */
MSCCLPP_DEVICE_INLINE mscclppResult_t mscclppPortChannelDevicePut(const mscclppPortChannelDeviceHandle* ch,
                                                                  uint32_t dst, uint64_t dstOffset, uint32_t src,
                                                                  uint64_t srcOffset, uint64_t size) {
  uint64_t pos;
  return mscclppPortChannelDevicePutOps(ch, dst, dstOffset, src, srcOffset, size, 0u, &pos);
}

/* signal: one more signal on the peer's inbound semaphore, after every
 * earlier put of this channel is visible there. */
MSCCLPP_DEVICE_INLINE mscclppResult_t mscclppPortChannelDeviceSignal(const mscclppPortChannelDeviceHandle* ch) {
  uint64_t pos;
  return mscclppPortChannelDevicePush(ch, MSCCLPP_TRIGGER_FLAG, 0, 0, 0, 0, 0, mscclppFifoOrderRelaxed, &pos);
}

/* put then signal, in one trigger (one chunk of at most 1 GiB). */
MSCCLPP_DEVICE_INLINE mscclppResult_t mscclppPortChannelDevicePutWithSignal(const mscclppPortChannelDeviceHandle* ch,
                                                                            uint32_t dst, uint64_t dstOffset,
                                                                            uint32_t src, uint64_t srcOffset,
                                                                            uint64_t size) {
  uint64_t pos;
  return mscclppPortChannelDevicePutOps(ch, dst, dstOffset, src, srcOffset, size, MSCCLPP_TRIGGER_FLAG, &pos);
}

/* put, signal and flush: returns when the data and the signal are visible
 * at the peer (and everything pushed before is complete). */
MSCCLPP_DEVICE_INLINE mscclppResult_t mscclppPortChannelDevicePutWithSignalAndFlush(
    const mscclppPortChannelDeviceHandle* ch, uint32_t dst, uint64_t dstOffset, uint32_t src, uint64_t srcOffset,
    uint64_t size) {
  uint64_t pos = 0;
  mscclppResult_t r = mscclppPortChannelDevicePutOps(ch, dst, dstOffset, src, srcOffset, size,
                                                     MSCCLPP_TRIGGER_FLAG | MSCCLPP_TRIGGER_SYNC, &pos);
  if (r != mscclppSuccess) return r;
  return mscclppFifoDeviceFlush(&ch->fifo, pos);
}

/* flush: returns when every put and signal pushed before this call (by any
 * thread, on any port channel of the communicator) is complete at its
 * destination, so their sources may be overwritten. */
MSCCLPP_DEVICE_INLINE mscclppResult_t mscclppPortChannelDeviceFlush(const mscclppPortChannelDeviceHandle* ch) {
  uint64_t pos = 0;
  mscclppResult_t r =
      mscclppPortChannelDevicePush(ch, MSCCLPP_TRIGGER_SYNC, 0, 0, 0, 0, 0, mscclppFifoOrderRelaxed, &pos);
  if (r != mscclppSuccess) return r;
  return mscclppFifoDeviceFlush(&ch->fifo, pos);
}

/* wait: consume one signal from the peer, waiting for it (bounded,
 * abortable). The peer's puts signalled before it are visible once this
 * returns mscclppSuccess. */
MSCCLPP_DEVICE_INLINE mscclppResult_t mscclppPortChannelDeviceWait(const mscclppPortChannelDeviceHandle* ch) {
  return mscclppSemaphoreDeviceWait(&ch->inbound);
}

/* poll: 1 and one signal consumed if one has arrived, else 0. */
MSCCLPP_DEVICE_INLINE int mscclppPortChannelDevicePoll(const mscclppPortChannelDeviceHandle* ch) {
  return mscclppSemaphoreDevicePoll(&ch->inbound);
}

#endif /* MSCCLPP_PORT_CHANNEL_DEVICE_H_ */
