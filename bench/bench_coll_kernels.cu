/* SPDX-License-Identifier: MIT */
/*
 * The raw operation bench_coll measures allgather against: a fan-out copy
 * in ONE process, without channels, barriers or peers. k "virtual ranks"
 * each read their share of S bytes once and write it into k outputs of S
 * bytes, so the kernel reads S and writes k*S bytes -- exactly what an
 * allgather of k ranks on one GPU must move, (k+1)*S. It is the best a copy
 * by the SMs does with that mix of reads and writes on this GPU, timed in
 * the same run as the allgather and the copy-engine roofline.
 * Linked into bench_coll (bench/CMakeLists.txt: <name>_kernels.cu).
 */
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

/* v: 16-byte vectors of src; dst holds k outputs of n vectors each. Four
 * vectors in flight per thread; streaming loads and stores (each byte is
 * touched once). */
__global__ void __launch_bounds__(512) fanoutKernel(const uint4* __restrict__ src, uint4* __restrict__ dst, int k,
                                                    uint64_t n) {
  const uint64_t nth = (uint64_t)gridDim.x * blockDim.x;
  uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + 3 * nth < n; i += 4 * nth) {
    uint4 v0 = __ldcs(src + i), v1 = __ldcs(src + i + nth), v2 = __ldcs(src + i + 2 * nth),
          v3 = __ldcs(src + i + 3 * nth);
    for (int d = 0; d < k; d++) {
      uint4* o = dst + (uint64_t)d * n;
      __stcs(o + i, v0);
      __stcs(o + i + nth, v1);
      __stcs(o + i + 2 * nth, v2);
      __stcs(o + i + 3 * nth, v3);
    }
  }
  for (; i < n; i += nth) {
    uint4 v = __ldcs(src + i);
    for (int d = 0; d < k; d++) __stcs(dst + (uint64_t)d * n + i, v);
  }
}

/* The same fan-out with Hopper's bulk copies (TMA): one thread per block
 * loads a chunk into shared memory (cp.async.bulk ... mbarrier) and stores
 * it to the k outputs (cp.async.bulk.global.shared::cta), FANOUT_STAGES
 * chunks in flight. Only for sm_90 and later; elsewhere it does nothing
 * (benchCollFanoutBulk says so). */
#define FANOUT_CHUNK 16384u
#define FANOUT_STAGES 4
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
static __device__ __forceinline__ void bulkLoad(uint32_t sdst, const void* gsrc, uint32_t n, uint32_t bar) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(n) : "memory");
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(sdst),
               "l"(gsrc), "r"(n), "r"(bar)
               : "memory");
}
static __device__ __forceinline__ void barWait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done)
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
}
#endif

__global__ void __launch_bounds__(32) fanoutBulkKernel(const uint8_t* src, uint8_t* dst, int k, uint64_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) uint8_t stage[];
  __shared__ __align__(8) uint64_t bars[FANOUT_STAGES];
  if (threadIdx.x != 0) return;
  const uint32_t sbase = (uint32_t)__cvta_generic_to_shared(stage);
  const uint32_t bbase = (uint32_t)__cvta_generic_to_shared(bars);
  for (int s = 0; s < FANOUT_STAGES; s++) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bbase + 8 * s));
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  const uint64_t nch = (bytes + FANOUT_CHUNK - 1) / FANOUT_CHUNK;
  /* my j-th chunk is blockIdx.x + j * gridDim.x, in stage j % FANOUT_STAGES */
  uint64_t mine = nch > blockIdx.x ? (nch - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
  for (uint64_t j = 0; j < mine && j < FANOUT_STAGES; j++) {
    uint64_t off = (blockIdx.x + j * gridDim.x) * (uint64_t)FANOUT_CHUNK;
    uint32_t n = bytes - off < FANOUT_CHUNK ? (uint32_t)(bytes - off) : FANOUT_CHUNK;
    bulkLoad(sbase + (uint32_t)j * FANOUT_CHUNK, src + off, n, bbase + 8 * (uint32_t)j);
  }
  for (uint64_t j = 0; j < mine; j++) {
    const uint32_t s = (uint32_t)(j % FANOUT_STAGES);
    uint64_t off = (blockIdx.x + j * gridDim.x) * (uint64_t)FANOUT_CHUNK;
    uint32_t n = bytes - off < FANOUT_CHUNK ? (uint32_t)(bytes - off) : FANOUT_CHUNK;
    barWait(bbase + 8 * s, (uint32_t)((j / FANOUT_STAGES) & 1));
    for (int d = 0; d < k; d++)
      asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst + (uint64_t)d * bytes + off),
                   "r"(sbase + s * FANOUT_CHUNK), "r"(n)
                   : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    /* the stage of chunk j-1 is free once its stores have read it: refill it */
    if (j >= 1 && j - 1 + FANOUT_STAGES < mine) {
      asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
      const uint64_t r = j - 1 + FANOUT_STAGES;
      const uint32_t rs = (uint32_t)(r % FANOUT_STAGES);
      uint64_t roff = (blockIdx.x + r * gridDim.x) * (uint64_t)FANOUT_CHUNK;
      uint32_t rn = bytes - roff < FANOUT_CHUNK ? (uint32_t)(bytes - roff) : FANOUT_CHUNK;
      bulkLoad(sbase + rs * FANOUT_CHUNK, src + roff, rn, bbase + 8 * rs);
    }
  }
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
#endif
}

/* As benchCollFanout, with bulk copies; cudaErrorNotSupported below sm_90. */
extern "C" cudaError_t benchCollFanoutBulk(const void* src, void* dst, int k, size_t bytes, int blocks,
                                           cudaStream_t s) {
  int dev, major;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  if (e != cudaSuccess) return e;
  if (major < 9) return cudaErrorNotSupported;
  const int smem = FANOUT_STAGES * FANOUT_CHUNK;
  e = cudaFuncSetAttribute(fanoutBulkKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (e != cudaSuccess) return e;
  fanoutBulkKernel<<<blocks, 32, smem, s>>>((const uint8_t*)src, (uint8_t*)dst, k, (uint64_t)bytes);
  return cudaGetLastError();
}

/* Bytes of dst (k copies of `bytes`) that differ from src, counted on the device. */
__global__ void fanoutCheckKernel(const uint8_t* src, const uint8_t* dst, int k, uint64_t bytes,
                                  unsigned long long* bad) {
  unsigned long long n = 0;
  for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < bytes; i += (uint64_t)gridDim.x * blockDim.x)
    for (int d = 0; d < k; d++) n += dst[(uint64_t)d * bytes + i] != src[i];
  if (n) atomicAdd(bad, n);
}

extern "C" cudaError_t benchCollFanoutCheck(const void* src, const void* dst, int k, size_t bytes,
                                            unsigned long long* badHost) {
  unsigned long long* d = NULL;
  cudaError_t e = cudaMalloc(&d, sizeof(*d));
  if (e != cudaSuccess) return e;
  e = cudaMemset(d, 0, sizeof(*d));
  if (e == cudaSuccess) {
    fanoutCheckKernel<<<1024, 256>>>((const uint8_t*)src, (const uint8_t*)dst, k, (uint64_t)bytes, d);
    e = cudaMemcpy(badHost, d, sizeof(*d), cudaMemcpyDeviceToHost);
  }
  cudaFree(d);
  return e;
}

/* src: `bytes` (a multiple of 16); dst: k * bytes. Enqueues one kernel. */
extern "C" cudaError_t benchCollFanout(const void* src, void* dst, int k, size_t bytes, int blocks,
                                       cudaStream_t s) {
  fanoutKernel<<<blocks, 512, 0, s>>>((const uint4*)src, (uint4*)dst, k, (uint64_t)(bytes / 16));
  return cudaGetLastError();
}
