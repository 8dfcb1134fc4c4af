/* SPDX-License-Identifier: MIT */
/*
 * The GPU backend's all-to-all-v, with the counts in device memory
 * (coll_gpu_kernels.cuh: what the kernels share).
 */
#include "coll/gpu/coll_gpu_kernels.cuh"

/* ---- all-to-all-v ----------------------------------------------------------------- */

/* a + b, staying at UINT64_MAX past it (a total past any capacity). */
static __device__ __forceinline__ uint64_t addSat(uint64_t a, uint64_t b) { return a + b < a ? UINT64_MAX : a + b; }

/* Rank `from`'s count slot in rank `owner`'s scratch (coll_gpu.h). */
static __device__ __forceinline__ volatile uint64_t* a2avSlot(const Launch& L, int owner, int from) {
  return (volatile uint64_t*)(L.scratch[owner] + MSCCLPP_COLL_GPU_A2AV_OFF) + 4 * from;
}

/* All-to-all-v with the counts in device memory (coll.h, mscclppAllToAllv):
 * a direct kernel that pulls. At the first barrier thread p of every block
 * reads this rank's count and displacement for rank p from the caller's
 * arrays, checks the block against sendbuff (a block outside it is sent as
 * empty) and writes them, with this rank's input as p maps it, into p's
 * slot [me] before it releases the barrier flag; after the acquire it reads
 * what rank p sends here from this rank's slot [p]. A slot is rewritten
 * only by a later call, which starts after the final barrier of this one
 * (as the pointer slots of exchangeBarrier). Every block then holds the
 * whole column and packs it itself, with no step across blocks; block 0
 * writes recvcounts and rdispls for the next kernel. Every block copies its
 * share of each source's block, up to the receive capacity, from that
 * rank's input into this rank's output. Counts that do not fit are raised
 * by the last of this rank's blocks to pass the final barrier: raised
 * earlier, the abort could make a block still waiting at a barrier give up
 * before it stored its flag, and leave a peer waiting; so the call
 * completes on every rank. */
__global__ void __launch_bounds__(1024)
    allToAllvKernel(const __grid_constant__ Launch L, const __grid_constant__ struct mscclppCollGpuCounts V) {
  streamOrderWait();
  __shared__ uint64_t epoch, total, badEnd;
  __shared__ const uint8_t* src[MSCCLPP_COLL_GPU_MAX_RANKS];
  __shared__ uint64_t cnt[MSCCLPP_COLL_GPU_MAX_RANKS], sdisp[MSCCLPP_COLL_GPU_MAX_RANKS],
      rdisp[MSCCLPP_COLL_GPU_MAX_RANKS];
  __shared__ int bad; /* 1 + a destination whose block lies outside sendbuff; 0: none */
  const int k = L.nranks, me = L.rank, p = threadIdx.x;
  if (threadIdx.x == 0) {
    epoch = L.state->epoch[blockIdx.x];
    bad = 0;
  }
  __syncthreads();
  int failed = 0;
  if (p < k) {
    uint64_t c = V.sendcounts[p];
    uint64_t d = c > 0 ? V.sdispls[p] : 0; /* a zero count's displacement is not read */
    if (c > V.sendCapacity || d > V.sendCapacity - c) {
      if (atomicCAS(&bad, 0, p + 1) == 0) badEnd = addSat(d, c);
      c = 0;
      d = 0;
    }
    if (p == me) {
      src[p] = L.send[me];
      cnt[p] = c;
      sdisp[p] = d;
    } else {
      volatile uint64_t* out = a2avSlot(L, p, me);
      out[0] = (uint64_t)(uintptr_t)L.send[p];
      out[1] = c;
      out[2] = d;
      flagStore(L, barFlag(L, p, blockIdx.x, me), epoch + 1);
      failed = flagWait(L, barFlag(L, me, blockIdx.x, p), epoch + 1, p) != mscclppSuccess;
      const volatile uint64_t* in = a2avSlot(L, me, p);
      src[p] = (const uint8_t*)(uintptr_t)in[0];
      cnt[p] = in[1];
      sdisp[p] = in[2];
    }
  }
  if (__syncthreads_or(failed)) return;
  if (threadIdx.x == 0) {
    uint64_t t = 0;
    for (int q = 0; q < k; q++) {
      rdisp[q] = t;
      t = addSat(t, cnt[q]);
    }
    total = t;
  }
  __syncthreads();
  if (blockIdx.x == 0 && p < k) {
    V.recvcounts[p] = cnt[p];
    V.rdispls[p] = rdisp[p];
  }
  const uint64_t ts = V.typeSize, cap = V.recvCapacity;
  const uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const uint64_t nth = (uint64_t)gridDim.x * blockDim.x;
  for (int q = 0; q < k; q++) {
    /* the elements of q's block that fit: rdisp[q] < cap bounds every offset below */
    const uint64_t n = rdisp[q] >= cap ? 0 : cnt[q] < cap - rdisp[q] ? cnt[q] : cap - rdisp[q];
    if (n == 0) continue;
    copyAnyAlign(L.recv[me] + rdisp[q] * ts, src[q] + sdisp[q] * ts, n * ts, tid, nth);
  }
  if (blockBarrier(L, epoch + 2)) return;
  if (threadIdx.x != 0) return;
  L.state->epoch[blockIdx.x] = epoch + 2;
  /* every block of a call counts itself; the one that makes the count a
   * multiple of the grid is the call's last (every block saw the same
   * counts, so any can raise) */
  const unsigned long long done = atomicAdd((unsigned long long*)&L.state->a2avBlocksDone, 1ull) + 1ull;
  if (done % gridDim.x == 0) {
    /* the error word's value holds 48 bits: a capacity past that shows as its largest */
    const uint64_t max48 = 0xffffffffffffull;
    if (total > cap)
      mscclppDeviceRaiseWide(&L.wait, MSCCLPP_DEVICE_ERROR_RECV_OVERFLOW, (unsigned)me, cap < max48 ? cap : max48,
                             total);
    else if (bad != 0)
      mscclppDeviceRaiseWide(&L.wait, MSCCLPP_DEVICE_ERROR_SEND_RANGE, (unsigned)(me << 4 | (bad - 1)),
                             V.sendCapacity < max48 ? V.sendCapacity : max48, badEnd);
  }
}

AllToAllvKernelFn mscclppCollGpuAllToAllvKernel(void) { return allToAllvKernel; }
