/* SPDX-License-Identifier: MIT */
/*
 * LL ("low latency") packets: data and a flag written together by ONE store,
 * so a reader that sees the flag sees the data with it -- no fence, no
 * separate signal. Two formats:
 *
 *   mscclppLLPacket8   8 bytes:  data (4 B) | flag (4 B)          one 64-bit store
 *   mscclppLLPacket16  16 bytes: data0 | flag | data1 | flag      one 16-byte store
 *                      (each 8-byte half carries the flag, so a reader that
 *                      gets the two halves from different stores -- the host
 *                      backend writes them with two 64-bit stores -- sees a
 *                      mismatched flag and reads again)
 *
 * A packet buffer carries 4 (LL8) or 8 (LL16) data bytes per packet. The
 * writer stamps every packet with the round's flag; the reader waits until
 * a packet carries the flag it expects. Use a flag that changes every round
 * (round number + 1: never 0, since buffers start zeroed), so a buffer needs
 * no reset between rounds. A buffer may be written again for round r + 1
 * only once the reader has consumed round r in it; alternating two buffers
 * by round parity gives that for free when both sides exchange every round
 * (a peer that sends round r + 1 has read round r - 1).
 *
 * mscclppPutPackets{8,16}(dstPkts, src, bytes, tid, nthreads, flag) packs
 * `bytes` data bytes (any size: the last packet is zero-padded; src of any
 * alignment) into packets at dstPkts (packet-aligned: 8 or 16 bytes);
 * mscclppUnpackPackets{8,16}(dst, srcPkts, bytes, tid, nthreads, flag, wait)
 * waits for each packet of the round and writes exactly `bytes` data bytes
 * to dst (any alignment). Threads stride over packets. Unpack returns
 * mscclppSuccess, mscclppAborted or mscclppTimeout (recorded as a device
 * semaphore timeout with the flag as value, which raises the abort flag).
 * Bytes of packet memory needed: mscclppPacketBytes{8,16}(bytes).
 */
#ifndef MSCCLPP_PACKET_H_
#define MSCCLPP_PACKET_H_

#include <stdint.h>

#include "mscclpp/device.h"

typedef struct {
  uint32_t data;
  uint32_t flag;
} __attribute__((aligned(8))) mscclppLLPacket8;

typedef struct {
  uint32_t data0;
  uint32_t flag0;
  uint32_t data1;
  uint32_t flag1;
} __attribute__((aligned(16))) mscclppLLPacket16;

MSCCLPP_STATIC_ASSERT(sizeof(mscclppLLPacket8) == 8, "an LL8 packet is 8 bytes");
MSCCLPP_STATIC_ASSERT(sizeof(mscclppLLPacket16) == 16, "an LL16 packet is 16 bytes");

#define MSCCLPP_LL8_DATA_BYTES 4u
#define MSCCLPP_LL16_DATA_BYTES 8u

MSCCLPP_HOST_DEVICE_INLINE uint64_t mscclppPacketCount8(uint64_t bytes) {
  return (bytes + MSCCLPP_LL8_DATA_BYTES - 1) / MSCCLPP_LL8_DATA_BYTES;
}
MSCCLPP_HOST_DEVICE_INLINE uint64_t mscclppPacketCount16(uint64_t bytes) {
  return (bytes + MSCCLPP_LL16_DATA_BYTES - 1) / MSCCLPP_LL16_DATA_BYTES;
}
/* Packet memory for `bytes` data bytes. */
MSCCLPP_HOST_DEVICE_INLINE uint64_t mscclppPacketBytes8(uint64_t bytes) { return mscclppPacketCount8(bytes) * 8u; }
MSCCLPP_HOST_DEVICE_INLINE uint64_t mscclppPacketBytes16(uint64_t bytes) { return mscclppPacketCount16(bytes) * 16u; }

/* ---- one packet ---------------------------------------------------------------- */

/* Write one LL8 packet: a single 64-bit store. */
MSCCLPP_DEVICE_INLINE void mscclppLL8Write(mscclppLLPacket8* p, uint32_t data, uint32_t flag) {
#if defined(MSCCLPP_DEVICE_CUDA)
  __asm__ __volatile__("st.volatile.v2.u32 [%0], {%1,%2};" ::"l"(p), "r"(data), "r"(flag) : "memory");
#else
  __atomic_store_n((uint64_t*)p, (uint64_t)data | (uint64_t)flag << 32, __ATOMIC_RELAXED);
#endif
}

/* 1 and *data when the packet carries `flag`; 0 otherwise. One load. */
MSCCLPP_DEVICE_INLINE int mscclppLL8TryRead(const mscclppLLPacket8* p, uint32_t flag, uint32_t* data) {
#if defined(MSCCLPP_DEVICE_CUDA)
  uint32_t d, f;
  __asm__ __volatile__("ld.volatile.v2.u32 {%0,%1}, [%2];" : "=r"(d), "=r"(f) : "l"(p) : "memory");
#else
  uint64_t v = __atomic_load_n((const uint64_t*)p, __ATOMIC_RELAXED);
  uint32_t d = (uint32_t)v, f = (uint32_t)(v >> 32);
#endif
  if (f != flag) return 0;
  *data = d;
  return 1;
}

/* Write one LL16 packet: a single 16-byte store on the GPU (two 8-byte
 * stores, each with the flag, on the host backend). */
MSCCLPP_DEVICE_INLINE void mscclppLL16Write(mscclppLLPacket16* p, uint32_t data0, uint32_t data1, uint32_t flag) {
#if defined(MSCCLPP_DEVICE_CUDA)
  __asm__ __volatile__("st.volatile.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(data0), "r"(flag), "r"(data1),
                       "r"(flag)
                       : "memory");
#else
  uint64_t* w = (uint64_t*)p;
  __atomic_store_n(&w[0], (uint64_t)data0 | (uint64_t)flag << 32, __ATOMIC_RELAXED);
  __atomic_store_n(&w[1], (uint64_t)data1 | (uint64_t)flag << 32, __ATOMIC_RELAXED);
#endif
}

/* One LL16 packet as read, not yet checked: a reader that polls several
 * packets issues all their loads (mscclppLL16Load) before it checks any
 * (mscclppLL16Check), so the loads travel together instead of one after the
 * other. */
typedef struct {
  uint32_t data0, flag0, data1, flag1;
} mscclppLL16Raw;

MSCCLPP_DEVICE_INLINE mscclppLL16Raw mscclppLL16Load(const mscclppLLPacket16* p) {
  mscclppLL16Raw r;
#if defined(MSCCLPP_DEVICE_CUDA)
  __asm__ __volatile__("ld.volatile.v4.u32 {%0,%1,%2,%3}, [%4];"
                       : "=r"(r.data0), "=r"(r.flag0), "=r"(r.data1), "=r"(r.flag1)
                       : "l"(p)
                       : "memory");
#else
  const uint64_t* w = (const uint64_t*)p;
  uint64_t v0 = __atomic_load_n(&w[0], __ATOMIC_RELAXED);
  uint64_t v1 = __atomic_load_n(&w[1], __ATOMIC_RELAXED);
  r.data0 = (uint32_t)v0, r.flag0 = (uint32_t)(v0 >> 32), r.data1 = (uint32_t)v1, r.flag1 = (uint32_t)(v1 >> 32);
#endif
  return r;
}

/* 1 and the packet's 8 data bytes (little endian) in *data when both flags
 * are `flag`; 0 otherwise. */
MSCCLPP_DEVICE_INLINE int mscclppLL16Check(mscclppLL16Raw r, uint32_t flag, uint64_t* data) {
  if (r.flag0 != flag || r.flag1 != flag) return 0;
  *data = (uint64_t)r.data0 | (uint64_t)r.data1 << 32;
  return 1;
}

MSCCLPP_DEVICE_INLINE int mscclppLL16TryRead(const mscclppLLPacket16* p, uint32_t flag, uint32_t* data0,
                                             uint32_t* data1) {
  uint64_t v;
  if (!mscclppLL16Check(mscclppLL16Load(p), flag, &v)) return 0;
  *data0 = (uint32_t)v;
  *data1 = (uint32_t)(v >> 32);
  return 1;
}

/* ---- data bytes <-> words ---------------------------------------------------------- */

/* Up to 8 bytes at p (any alignment) as a little-endian word; missing bytes 0. */
MSCCLPP_DEVICE_INLINE uint64_t mscclppPacketGather(const uint8_t* p, uint32_t n) {
  if (n == 8 && ((uintptr_t)p & 7) == 0) return *(const uint64_t*)p;
  if (n == 4 && ((uintptr_t)p & 3) == 0) return *(const uint32_t*)p;
  uint64_t v = 0;
  for (uint32_t i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

/* The low n bytes of v to p (any alignment). */
MSCCLPP_DEVICE_INLINE void mscclppPacketScatter(uint8_t* p, uint64_t v, uint32_t n) {
  if (n == 8 && ((uintptr_t)p & 7) == 0) {
    *(uint64_t*)p = v;
    return;
  }
  if (n == 4 && ((uintptr_t)p & 3) == 0) {
    *(uint32_t*)p = (uint32_t)v;
    return;
  }
  for (uint32_t i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* ---- many packets --------------------------------------------------------------- */

MSCCLPP_DEVICE_INLINE void mscclppPutPackets16(void* dstPkts, const void* src, uint64_t bytes, uint32_t tid,
                                               uint32_t nthreads, uint32_t flag) {
  mscclppLLPacket16* pk = (mscclppLLPacket16*)dstPkts;
  const uint8_t* s = (const uint8_t*)src;
  uint64_t n = mscclppPacketCount16(bytes);
  for (uint64_t i = tid; i < n; i += nthreads) {
    uint64_t off = i * MSCCLPP_LL16_DATA_BYTES;
    uint32_t m = bytes - off < MSCCLPP_LL16_DATA_BYTES ? (uint32_t)(bytes - off) : MSCCLPP_LL16_DATA_BYTES;
    uint64_t v = mscclppPacketGather(s + off, m);
    mscclppLL16Write(&pk[i], (uint32_t)v, (uint32_t)(v >> 32), flag);
  }
}

MSCCLPP_DEVICE_INLINE mscclppResult_t mscclppUnpackPackets16(void* dst, const void* srcPkts, uint64_t bytes,
                                                             uint32_t tid, uint32_t nthreads, uint32_t flag,
                                                             const mscclppWaitContext* wait) {
  const mscclppLLPacket16* pk = (const mscclppLLPacket16*)srcPkts;
  uint8_t* d = (uint8_t*)dst;
  uint64_t n = mscclppPacketCount16(bytes);
  for (uint64_t i = tid; i < n; i += nthreads) {
    uint32_t d0, d1;
    mscclppWaitState st = MSCCLPP_WAIT_STATE_INIT;
    while (!mscclppLL16TryRead(&pk[i], flag, &d0, &d1)) {
      mscclppResult_t r = mscclppWaitStep(wait, &st, MSCCLPP_DEVICE_ERROR_TIMEOUT_SEMAPHORE, flag);
      if (r != mscclppSuccess) return r;
    }
    mscclppWaitEnd(wait, &st);
    uint64_t off = i * MSCCLPP_LL16_DATA_BYTES;
    uint32_t m = bytes - off < MSCCLPP_LL16_DATA_BYTES ? (uint32_t)(bytes - off) : MSCCLPP_LL16_DATA_BYTES;
    mscclppPacketScatter(d + off, (uint64_t)d0 | (uint64_t)d1 << 32, m);
  }
  return mscclppSuccess;
}

MSCCLPP_DEVICE_INLINE void mscclppPutPackets8(void* dstPkts, const void* src, uint64_t bytes, uint32_t tid,
                                              uint32_t nthreads, uint32_t flag) {
  mscclppLLPacket8* pk = (mscclppLLPacket8*)dstPkts;
  const uint8_t* s = (const uint8_t*)src;
  uint64_t n = mscclppPacketCount8(bytes);
  for (uint64_t i = tid; i < n; i += nthreads) {
    uint64_t off = i * MSCCLPP_LL8_DATA_BYTES;
    uint32_t m = bytes - off < MSCCLPP_LL8_DATA_BYTES ? (uint32_t)(bytes - off) : MSCCLPP_LL8_DATA_BYTES;
    mscclppLL8Write(&pk[i], (uint32_t)mscclppPacketGather(s + off, m), flag);
  }
}

MSCCLPP_DEVICE_INLINE mscclppResult_t mscclppUnpackPackets8(void* dst, const void* srcPkts, uint64_t bytes,
                                                            uint32_t tid, uint32_t nthreads, uint32_t flag,
                                                            const mscclppWaitContext* wait) {
  const mscclppLLPacket8* pk = (const mscclppLLPacket8*)srcPkts;
  uint8_t* d = (uint8_t*)dst;
  uint64_t n = mscclppPacketCount8(bytes);
  for (uint64_t i = tid; i < n; i += nthreads) {
    uint32_t v;
    mscclppWaitState st = MSCCLPP_WAIT_STATE_INIT;
    while (!mscclppLL8TryRead(&pk[i], flag, &v)) {
      mscclppResult_t r = mscclppWaitStep(wait, &st, MSCCLPP_DEVICE_ERROR_TIMEOUT_SEMAPHORE, flag);
      if (r != mscclppSuccess) return r;
    }
    mscclppWaitEnd(wait, &st);
    uint64_t off = i * MSCCLPP_LL8_DATA_BYTES;
    uint32_t m = bytes - off < MSCCLPP_LL8_DATA_BYTES ? (uint32_t)(bytes - off) : MSCCLPP_LL8_DATA_BYTES;
    mscclppPacketScatter(d + off, v, m);
  }
  return mscclppSuccess;
}

#endif /* MSCCLPP_PACKET_H_ */
