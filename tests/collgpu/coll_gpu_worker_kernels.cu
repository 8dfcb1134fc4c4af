/* SPDX-License-Identifier: MIT */
/*
 * coll_gpu_worker's device side for all-to-all-v replayed from a CUDA
 * graph with new counts every replay (coll_gpu_worker.c, a2avReplay): what
 * an MoE layer's router and next kernel do around the call, with nothing
 * from the host between replays.
 *   gen    one thread: the replay number r = ++*replay (device memory, so
 *          that every replay of the graph counts anew), this rank's counts
 *          and displacements for r: blocks in a rotating order with gaps of
 *          0..2 elements, counts of 0, 1, a prime or anything up to
 *          maxCount; on about one replay in eight a rank sends nothing, on
 *          one in eleven a rank receives nothing;
 *   fill   this rank's blocks with bytes of (r, rank, destination, index);
 *   check  what arrived, exactly: recvcounts and rdispls against every
 *          source's counts for r (every rank computes them alike), every
 *          byte of every block, and the slack between the total and the
 *          capacity still the poison the graph writes before the call.
 * Mismatches are counted on the device (err[0]); the first one's code
 * (err[1], + 1) and replay (err[2]) say what it was.
 */
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

static __device__ __forceinline__ uint64_t mix64(uint64_t x) { /* splitmix64's finalizer */
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* Elements rank s sends rank d at replay r. */
static __device__ uint64_t replayCount(uint64_t r, int s, int d, uint64_t maxCount) {
  if ((mix64(r * 0x51ull ^ (uint64_t)s ^ 0x5e4dull) & 7) == 0) return 0; /* s sends nothing */
  if (mix64(r * 0x53ull ^ (uint64_t)d ^ 0x7ecull) % 11 == 0) return 0;   /* d receives nothing */
  const uint64_t h = mix64((r << 20) ^ ((uint64_t)s << 10) ^ (uint64_t)d ^ 0xc0ull);
  uint64_t c;
  switch (h & 7) {
    case 0: c = 0; break;
    case 1: c = 1; break;
    case 2: c = 4099; break;
    default: c = (h >> 8) % (maxCount + 1); break;
  }
  return c < maxCount ? c : maxCount;
}

/* Byte i of block (s -> d) at replay r. */
static __device__ __forceinline__ uint8_t replayByte(uint64_t r, int s, int d, uint64_t i) {
  const uint64_t w = mix64(mix64((r << 24) ^ ((uint64_t)s << 12) ^ (uint64_t)d) + i / 8);
  return (uint8_t)(w >> (8 * (i % 8)));
}

__global__ void genKernel(uint64_t* replay, int me, int k, uint64_t maxCount, size_t* sendcounts, size_t* sdispls) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  const uint64_t r = *replay + 1;
  *replay = r;
  uint64_t at = 0;
  for (int j = 0; j < k; j++) {
    const int d = (int)((j + r) % (uint64_t)k);
    at += mix64(r ^ ((uint64_t)d << 32) ^ 0x9a9ull) % 3; /* a gap */
    sendcounts[d] = replayCount(r, me, d, maxCount);
    sdispls[d] = at;
    at += sendcounts[d];
  }
}

__global__ void fillKernel(const uint64_t* replay, int me, int k, const size_t* sendcounts, const size_t* sdispls,
                           uint8_t* send, uint64_t ts) {
  const uint64_t r = *replay;
  const uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x, nth = (uint64_t)gridDim.x * blockDim.x;
  for (int d = 0; d < k; d++) {
    uint8_t* b = send + sdispls[d] * ts;
    const uint64_t n = sendcounts[d] * ts;
    for (uint64_t i = tid; i < n; i += nth) b[i] = replayByte(r, me, d, i);
  }
}

static __device__ __forceinline__ void noteBad(unsigned long long* err, unsigned long long n, unsigned long long code,
                                               uint64_t r) {
  atomicAdd(&err[0], n);
  if (atomicCAS(&err[1], 0ull, code + 1) == 0ull) err[2] = r;
}

/* codes: 2^62 + s: recvcounts[s]; 2^62 + 16 + s: rdispls[s]; 2^61 + i: slack
 * byte i (from the output's start) overwritten; else the byte's offset in
 * the output. */
__global__ void checkKernel(const uint64_t* replay, int me, int k, uint64_t maxCount, const size_t* recvcounts,
                            const size_t* rdispls, const uint8_t* recv, uint64_t ts, uint64_t recvcap,
                            unsigned long long* err) {
  const uint64_t r = *replay;
  const uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x, nth = (uint64_t)gridDim.x * blockDim.x;
  unsigned long long nbad = 0, first = 0;
  uint64_t at = 0;
  for (int s = 0; s < k; s++) {
    const uint64_t c = replayCount(r, s, me, maxCount);
    if (tid == 0 && recvcounts[s] != c) noteBad(err, 1, (1ull << 62) + (unsigned long long)s, r);
    if (tid == 0 && rdispls[s] != at) noteBad(err, 1, (1ull << 62) + 16 + (unsigned long long)s, r);
    const uint8_t* b = recv + at * ts;
    for (uint64_t i = tid; i < c * ts; i += nth)
      if (b[i] != replayByte(r, s, me, i) && nbad++ == 0) first = at * ts + i;
    at += c;
  }
  for (uint64_t i = at * ts + tid; i < recvcap * ts; i += nth)
    if (recv[i] != 0xA5 && nbad++ == 0) first = (1ull << 61) + i;
  if (nbad) noteBad(err, nbad, first, r);
}

extern "C" cudaError_t collGpuReplayGen(uint64_t* replay, int me, int k, uint64_t maxCount, size_t* sendcounts,
                                        size_t* sdispls, cudaStream_t s) {
  genKernel<<<1, 32, 0, s>>>(replay, me, k, maxCount, sendcounts, sdispls);
  return cudaGetLastError();
}

extern "C" cudaError_t collGpuReplayFill(const uint64_t* replay, int me, int k, const size_t* sendcounts,
                                         const size_t* sdispls, void* send, size_t ts, cudaStream_t s) {
  fillKernel<<<256, 256, 0, s>>>(replay, me, k, sendcounts, sdispls, (uint8_t*)send, ts);
  return cudaGetLastError();
}

extern "C" cudaError_t collGpuReplayCheck(const uint64_t* replay, int me, int k, uint64_t maxCount,
                                          const size_t* recvcounts, const size_t* rdispls, const void* recv, size_t ts,
                                          uint64_t recvcap, unsigned long long* err, cudaStream_t s) {
  checkKernel<<<256, 256, 0, s>>>(replay, me, k, maxCount, recvcounts, rdispls, (const uint8_t*)recv, ts, recvcap, err);
  return cudaGetLastError();
}
