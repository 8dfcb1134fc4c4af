/* SPDX-License-Identifier: MIT */
/*
 * Many-thread copies for kernels (and host-backend threads): the body of
 * memory channel put/get, also usable on any two pointers a kernel reaches.
 *
 * mscclppCopyDevice(dst, src, bytes, tid, nthreads): thread `tid` of
 * `nthreads` cooperating threads copies its share; together they copy every
 * byte exactly once, for any size and any alignment of either pointer:
 *  - on the GPU, the widest word both pointers can share (16, 8, 4 bytes, or
 *    single bytes when dst and src differ in alignment modulo 4): leading
 *    bytes up to that alignment and the trailing remainder go byte by byte,
 *    the middle in words, unrolled four deep, threads striding so that a
 *    warp touches consecutive words;
 *  - on the host backend, each thread memcpy's one contiguous share.
 * No ordering: publish with a semaphore signal after all threads are done.
 */
#ifndef MSCCLPP_MEMORY_CHANNEL_COPY_H_
#define MSCCLPP_MEMORY_CHANNEL_COPY_H_

#include <stdint.h>

#include "mscclpp/device.h"

#if !defined(MSCCLPP_DEVICE_CUDA)
#include <string.h>
#endif

/* 16 bytes moved by one load and one store. */
#if defined(MSCCLPP_DEVICE_CUDA)
typedef uint4 mscclppVec16;
#else
typedef struct {
  uint64_t lo, hi;
} __attribute__((aligned(16))) mscclppVec16;
#endif

#if defined(MSCCLPP_DEVICE_CUDA)
/* One body per word type: copy n words, threads strided, 4 loads in flight
 * before the 4 stores. */
#define MSCCLPP_DEFINE_COPY_WORDS(name, T)                                                          \
  MSCCLPP_DEVICE_INLINE void name(T* d, const T* s, uint64_t n, uint32_t tid, uint32_t nthreads) { \
    uint64_t i = tid;                                                                               \
    const uint64_t stride = nthreads;                                                               \
    for (; i + 3 * stride < n; i += 4 * stride) {                                                   \
      T a = s[i], b = s[i + stride], c = s[i + 2 * stride], e = s[i + 3 * stride];                  \
      d[i] = a;                                                                                     \
      d[i + stride] = b;                                                                            \
      d[i + 2 * stride] = c;                                                                        \
      d[i + 3 * stride] = e;                                                                        \
    }                                                                                               \
    for (; i < n; i += stride) d[i] = s[i];                                                         \
  }
MSCCLPP_DEFINE_COPY_WORDS(mscclppCopyWords16, mscclppVec16)
MSCCLPP_DEFINE_COPY_WORDS(mscclppCopyWords8, uint64_t)
MSCCLPP_DEFINE_COPY_WORDS(mscclppCopyWords4, uint32_t)
MSCCLPP_DEFINE_COPY_WORDS(mscclppCopyWords1, uint8_t)
#undef MSCCLPP_DEFINE_COPY_WORDS
#endif

MSCCLPP_DEVICE_INLINE void mscclppCopyDevice(void* dst, const void* src, uint64_t bytes, uint32_t tid,
                                             uint32_t nthreads) {
  if (nthreads == 0 || tid >= nthreads || bytes == 0) return;
#if defined(MSCCLPP_DEVICE_CUDA)
  uint8_t* d = (uint8_t*)dst;
  const uint8_t* s = (const uint8_t*)src;
  uintptr_t mis = (uintptr_t)d ^ (uintptr_t)s;
  uint32_t width = (mis & 15) == 0 ? 16u : (mis & 7) == 0 ? 8u : (mis & 3) == 0 ? 4u : 1u;
  if (width == 1u) {
    mscclppCopyWords1(d, s, bytes, tid, nthreads);
    return;
  }
  uint64_t head = ((uint64_t)width - ((uintptr_t)d & (width - 1))) & (width - 1);
  if (head > bytes) head = bytes;
  uint64_t words = (bytes - head) / width;
  uint64_t tailStart = head + words * width;
  /* the ragged ends: at most width-1 bytes each, one byte per thread */
  for (uint64_t i = tid; i < head; i += nthreads) d[i] = s[i];
  for (uint64_t i = tailStart + tid; i < bytes; i += nthreads) d[i] = s[i];
  switch (width) {
    case 16: mscclppCopyWords16((mscclppVec16*)(d + head), (const mscclppVec16*)(s + head), words, tid, nthreads); break;
    case 8: mscclppCopyWords8((uint64_t*)(d + head), (const uint64_t*)(s + head), words, tid, nthreads); break;
    default: mscclppCopyWords4((uint32_t*)(d + head), (const uint32_t*)(s + head), words, tid, nthreads); break;
  }
#else
  /* contiguous shares, 64-byte multiples, so threads do not share lines */
  uint64_t share = (bytes + nthreads - 1) / nthreads;
  share = (share + 63) & ~(uint64_t)63;
  uint64_t begin = (uint64_t)tid * share;
  if (begin >= bytes) return;
  uint64_t n = bytes - begin < share ? bytes - begin : share;
  memcpy((uint8_t*)dst + begin, (const uint8_t*)src + begin, (size_t)n);
#endif
}

#endif /* MSCCLPP_MEMORY_CHANNEL_COPY_H_ */
