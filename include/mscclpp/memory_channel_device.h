/* SPDX-License-Identifier: MIT */
/*
 * Memory channels, the device side: a kernel (or, on the host backend, CPU
 * threads) reads and writes the peer's memory directly -- through a CUDA IPC
 * mapping on a GPU, a shared mapping on the host backend -- with no proxy.
 * Host API: mscclpp/memory_channel.h.
 *
 * The handle holds two memories: `dst`, the peer's memory as this rank's
 * kernels address it, and `src`, this rank's own (the one the peer's channel
 * sees as its dst). Offsets are in bytes.
 *   put(dstOffset, srcOffset, bytes, tid, nthreads)  src -> peer's dst
 *   get(dstOffset, srcOffset, bytes, tid, nthreads)  peer's dst -> src
 *     (in both the first offset is the copy's destination: put writes the
 *     peer's memory at dstOffset; get writes this rank's at dstOffset)
 *     Many threads, any size, any alignment (mscclpp/memory_channel_copy.h).
 *   read/write of one 4-, 8- or 16-byte element of the peer's memory
 *   signal / wait / poll  a semaphore pair: signal adds one to the peer's
 *     inbound counter (a release store: this thread's earlier writes, to the
 *     peer's memory included, are visible first); wait consumes one signal
 *     from the peer (acquire: the peer's writes before its signal are
 *     visible after). Make other threads' writes happen before the
 *     signalling thread's (__syncthreads(); across blocks, signal from every
 *     block or synchronize them first). The release/acquire is at gpu scope
 *     when channel creation found both ranks' kernels on the same CUDA
 *     device and all the channel's memory in device memory (ranks sharing a
 *     GPU under MPS), at system scope otherwise (sem.scope).
 *   countsLoad / signalCounted / waitCounted / pollCounted / countsStore
 *     the same with the semaphore counters in registers for a run of
 *     operations of one thread (mscclppSemaphoreDeviceCounts).
 *   putPackets / unpackPackets  LL packets (mscclpp/packet.h) into the
 *     peer's memory, out of this rank's.
 * One thread at a time may signal, and one may wait/poll, per channel.
 */
#ifndef MSCCLPP_MEMORY_CHANNEL_DEVICE_H_
#define MSCCLPP_MEMORY_CHANNEL_DEVICE_H_

#include <stdint.h>

#include "mscclpp/device.h"
#include "mscclpp/memory_channel_copy.h"
#include "mscclpp/packet.h"
#include "mscclpp/semaphore_device.h"

/* Plain struct: copy it to kernels by value (or through device memory). */
typedef struct {
  uint8_t* dst;      /* the peer's memory (mapped) */
  uint8_t* src;      /* this rank's memory */
  uint64_t dstSize;
  uint64_t srcSize;
  /* inbound/expected: this rank's; outbound: the peer's inbound, mapped;
   * outboundCount: this rank's count of signals sent */
  mscclppSemaphoreDeviceHandle sem;
} mscclppMemoryChannelDeviceHandle;

/* ---- bulk copies ------------------------------------------------------------------ */

MSCCLPP_DEVICE_INLINE void mscclppMemoryChannelDevicePut(const mscclppMemoryChannelDeviceHandle* ch,
                                                         uint64_t dstOffset, uint64_t srcOffset, uint64_t bytes,
                                                         uint32_t tid, uint32_t nthreads) {
  mscclppCopyDevice(ch->dst + dstOffset, ch->src + srcOffset, bytes, tid, nthreads);
}

MSCCLPP_DEVICE_INLINE void mscclppMemoryChannelDeviceGet(const mscclppMemoryChannelDeviceHandle* ch,
                                                         uint64_t dstOffset, uint64_t srcOffset, uint64_t bytes,
                                                         uint32_t tid, uint32_t nthreads) {
  mscclppCopyDevice(ch->src + dstOffset, ch->dst + srcOffset, bytes, tid, nthreads);
}

/* ---- single elements of the peer's memory (offset aligned to the size) -------- */

MSCCLPP_DEVICE_INLINE uint32_t mscclppMemoryChannelDeviceRead32(const mscclppMemoryChannelDeviceHandle* ch,
                                                                uint64_t offset) {
  return *(volatile const uint32_t*)(ch->dst + offset);
}
MSCCLPP_DEVICE_INLINE void mscclppMemoryChannelDeviceWrite32(const mscclppMemoryChannelDeviceHandle* ch,
                                                             uint64_t offset, uint32_t v) {
  *(volatile uint32_t*)(ch->dst + offset) = v;
}
MSCCLPP_DEVICE_INLINE uint64_t mscclppMemoryChannelDeviceRead64(const mscclppMemoryChannelDeviceHandle* ch,
                                                                uint64_t offset) {
  return *(volatile const uint64_t*)(ch->dst + offset);
}
MSCCLPP_DEVICE_INLINE void mscclppMemoryChannelDeviceWrite64(const mscclppMemoryChannelDeviceHandle* ch,
                                                             uint64_t offset, uint64_t v) {
  *(volatile uint64_t*)(ch->dst + offset) = v;
}
MSCCLPP_DEVICE_INLINE mscclppVec16 mscclppMemoryChannelDeviceRead128(const mscclppMemoryChannelDeviceHandle* ch,
                                                                     uint64_t offset) {
  return *(const mscclppVec16*)(ch->dst + offset);
}
MSCCLPP_DEVICE_INLINE void mscclppMemoryChannelDeviceWrite128(const mscclppMemoryChannelDeviceHandle* ch,
                                                              uint64_t offset, mscclppVec16 v) {
  *(mscclppVec16*)(ch->dst + offset) = v;
}

/* ---- synchronization ------------------------------------------------------------- */

MSCCLPP_DEVICE_INLINE void mscclppMemoryChannelDeviceSignal(const mscclppMemoryChannelDeviceHandle* ch) {
  mscclppSemaphoreDeviceSignal(&ch->sem);
}

MSCCLPP_DEVICE_INLINE mscclppResult_t mscclppMemoryChannelDeviceWait(const mscclppMemoryChannelDeviceHandle* ch) {
  return mscclppSemaphoreDeviceWait(&ch->sem);
}

MSCCLPP_DEVICE_INLINE int mscclppMemoryChannelDevicePoll(const mscclppMemoryChannelDeviceHandle* ch) {
  return mscclppSemaphoreDevicePoll(&ch->sem);
}

/* Synchronization only (mscclppSemaphoreDeviceRelaxedSignal/Wait): no
 * data is ordered by them; for LL packets or a pure rendezvous. */
MSCCLPP_DEVICE_INLINE void mscclppMemoryChannelDeviceRelaxedSignal(const mscclppMemoryChannelDeviceHandle* ch) {
  mscclppSemaphoreDeviceRelaxedSignal(&ch->sem);
}

MSCCLPP_DEVICE_INLINE mscclppResult_t mscclppMemoryChannelDeviceRelaxedWait(const mscclppMemoryChannelDeviceHandle* ch) {
  return mscclppSemaphoreDeviceRelaxedWait(&ch->sem);
}

/* The counters in registers (mscclppSemaphoreDeviceCounts): one thread
 *   mscclppSemaphoreDeviceCounts c = mscclppMemoryChannelDeviceCountsLoad(&h);
 *   ... mscclppMemoryChannelDeviceSignalCounted(&h, &c);
 *       r = mscclppMemoryChannelDeviceWaitCounted(&h, &c); ...
 *   mscclppMemoryChannelDeviceCountsStore(&h, &c);   (before the kernel ends)
 * No other thread, and no plain signal/wait/poll, on this channel between
 * the load and the store. */
MSCCLPP_DEVICE_INLINE mscclppSemaphoreDeviceCounts mscclppMemoryChannelDeviceCountsLoad(
    const mscclppMemoryChannelDeviceHandle* ch) {
  return mscclppSemaphoreDeviceCountsLoad(&ch->sem);
}

MSCCLPP_DEVICE_INLINE void mscclppMemoryChannelDeviceCountsStore(const mscclppMemoryChannelDeviceHandle* ch,
                                                                 const mscclppSemaphoreDeviceCounts* c) {
  mscclppSemaphoreDeviceCountsStore(&ch->sem, c);
}

MSCCLPP_DEVICE_INLINE void mscclppMemoryChannelDeviceSignalCounted(const mscclppMemoryChannelDeviceHandle* ch,
                                                                   mscclppSemaphoreDeviceCounts* c) {
  mscclppSemaphoreDeviceSignalCounted(&ch->sem, c);
}

MSCCLPP_DEVICE_INLINE mscclppResult_t mscclppMemoryChannelDeviceWaitCounted(const mscclppMemoryChannelDeviceHandle* ch,
                                                                            mscclppSemaphoreDeviceCounts* c) {
  return mscclppSemaphoreDeviceWaitCounted(&ch->sem, c);
}

MSCCLPP_DEVICE_INLINE void mscclppMemoryChannelDeviceRelaxedSignalCounted(const mscclppMemoryChannelDeviceHandle* ch,
                                                                          mscclppSemaphoreDeviceCounts* c) {
  mscclppSemaphoreDeviceRelaxedSignalCounted(&ch->sem, c);
}

MSCCLPP_DEVICE_INLINE mscclppResult_t mscclppMemoryChannelDeviceRelaxedWaitCounted(
    const mscclppMemoryChannelDeviceHandle* ch, mscclppSemaphoreDeviceCounts* c) {
  return mscclppSemaphoreDeviceRelaxedWaitCounted(&ch->sem, c);
}

MSCCLPP_DEVICE_INLINE int mscclppMemoryChannelDevicePollCounted(const mscclppMemoryChannelDeviceHandle* ch,
                                                                mscclppSemaphoreDeviceCounts* c) {
  return mscclppSemaphoreDevicePollCounted(&ch->sem, c);
}

/* ---- LL packets ------------------------------------------------------------------- */

/* Pack `bytes` of this rank's memory at srcOffset into LL16 packets in the
 * peer's memory at dstOffset (16-byte aligned; mscclppPacketBytes16(bytes)
 * bytes of it). */
MSCCLPP_DEVICE_INLINE void mscclppMemoryChannelDevicePutPackets(const mscclppMemoryChannelDeviceHandle* ch,
                                                                uint64_t dstOffset, uint64_t srcOffset,
                                                                uint64_t bytes, uint32_t tid, uint32_t nthreads,
                                                                uint32_t flag) {
  mscclppPutPackets16(ch->dst + dstOffset, ch->src + srcOffset, bytes, tid, nthreads, flag);
}

/* Wait for the LL16 packets of round `flag` that the peer put into this
 * rank's memory at pktOffset and write their `bytes` data bytes to this
 * rank's memory at dstOffset. mscclppSuccess, mscclppAborted or
 * mscclppTimeout. */
MSCCLPP_DEVICE_INLINE mscclppResult_t mscclppMemoryChannelDeviceUnpackPackets(
    const mscclppMemoryChannelDeviceHandle* ch, uint64_t dstOffset, uint64_t pktOffset, uint64_t bytes, uint32_t tid,
    uint32_t nthreads, uint32_t flag) {
  return mscclppUnpackPackets16(ch->src + dstOffset, ch->src + pktOffset, bytes, tid, nthreads, flag, &ch->sem.wait);
}

/* The same with LL8 packets (4 data bytes per 8-byte packet). */
MSCCLPP_DEVICE_INLINE void mscclppMemoryChannelDevicePutPackets8(const mscclppMemoryChannelDeviceHandle* ch,
                                                                 uint64_t dstOffset, uint64_t srcOffset,
                                                                 uint64_t bytes, uint32_t tid, uint32_t nthreads,
                                                                 uint32_t flag) {
  mscclppPutPackets8(ch->dst + dstOffset, ch->src + srcOffset, bytes, tid, nthreads, flag);
}

MSCCLPP_DEVICE_INLINE mscclppResult_t mscclppMemoryChannelDeviceUnpackPackets8(
    const mscclppMemoryChannelDeviceHandle* ch, uint64_t dstOffset, uint64_t pktOffset, uint64_t bytes, uint32_t tid,
    uint32_t nthreads, uint32_t flag) {
  return mscclppUnpackPackets8(ch->src + dstOffset, ch->src + pktOffset, bytes, tid, nthreads, flag, &ch->sem.wait);
}

#endif /* MSCCLPP_MEMORY_CHANNEL_DEVICE_H_ */
