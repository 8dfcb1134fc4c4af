/* SPDX-License-Identifier: MIT */
/*
 * The GPU backend's direct (zero-copy) kernels: allreduce, reduce,
 * reduce-scatter, allgather, broadcast and all-to-all, each rank's blocks
 * reading and writing every rank's user buffers once the first barrier has
 * traded their addresses (coll_gpu_kernels.cuh: what they share).
 */
#include "coll/gpu/coll_gpu_kernels.cuh"

/* ---- direct (zero-copy) kernels -------------------------------------------------- */

/* The first barrier of a direct kernel, which also trades buffers: the
 * launch holds this rank's buffers as each peer maps them (send[p],
 * recv[p]; the export service made those mappings, coll_gpu_export.c), and
 * thread p writes them into peer p's pointer slot before it releases the
 * barrier flag; after the acquire it reads peer p's buffers, as mapped
 * here, from this rank's slot. So no host thread waits for a peer's to
 * learn its buffers. Every block writes the same values; a slot is not
 * rewritten before the peer's blocks have read it, as every rank's next
 * call starts after the final barrier of this one. `vec` is cleared when
 * a peer's buffer breaks 16-byte alignment. */
static __device__ int exchangeBarrier(const Launch& L, uint64_t value, const uint8_t** send, uint8_t** recv,
                                      int* vec) {
  __syncthreads();
  int failed = 0;
  int p = threadIdx.x;
  if (p == L.rank) {
    send[p] = L.send[p];
    recv[p] = L.recv[p];
  } else if (p < L.nranks) {
    volatile uint64_t* out = (volatile uint64_t*)(L.scratch[p] + MSCCLPP_COLL_GPU_PTR_OFF) + 2 * L.rank;
    out[0] = (uint64_t)(uintptr_t)L.send[p];
    out[1] = (uint64_t)(uintptr_t)L.recv[p];
    flagStore(L, barFlag(L, p, blockIdx.x, L.rank), value);
    failed = flagWait(L, barFlag(L, L.rank, blockIdx.x, p), value, p) != mscclppSuccess;
    const volatile uint64_t* in = (const volatile uint64_t*)(L.scratch[L.rank] + MSCCLPP_COLL_GPU_PTR_OFF) + 2 * p;
    uint64_t s = in[0], r = in[1];
    send[p] = (const uint8_t*)(uintptr_t)s;
    recv[p] = (uint8_t*)(uintptr_t)r;
    if (((s | r) & 15) != 0) *vec = 0;
  }
  return __syncthreads_or(failed);
}

/* dst[d] = src for d < ndst, `bytes` bytes; vectorized when `vec`. */
static __device__ void copyToAll(uint8_t* const* dst, int ndst, const uint8_t* src, uint64_t bytes, int vec,
                                 uint64_t tid, uint64_t nthreads) {
  uint64_t done = 0;
  if (vec) {
    uint64_t nv = bytes / 16;
    const uint4* s = (const uint4*)src;
    /* four vectors in flight per thread, then the rest one by one; loads
     * and stores marked streaming (each byte is touched once: keep it from
     * evicting what the peers still need in L2) */
    uint64_t i = tid;
    for (; i + 3 * nthreads < nv; i += 4 * nthreads) {
      uint4 v0 = __ldcs(s + i), v1 = __ldcs(s + i + nthreads), v2 = __ldcs(s + i + 2 * nthreads),
            v3 = __ldcs(s + i + 3 * nthreads);
      for (int d = 0; d < ndst; d++) {
        uint4* o = (uint4*)dst[d];
        __stcs(o + i, v0);
        __stcs(o + i + nthreads, v1);
        __stcs(o + i + 2 * nthreads, v2);
        __stcs(o + i + 3 * nthreads, v3);
      }
    }
    for (; i < nv; i += nthreads) {
      uint4 v = __ldcs(s + i);
      for (int d = 0; d < ndst; d++) __stcs((uint4*)dst[d] + i, v);
    }
    done = nv * 16;
  }
  for (uint64_t i = done + tid; i < bytes; i += nthreads) {
    uint8_t v = src[i];
    for (int d = 0; d < ndst; d++) dst[d][i] = v;
  }
}


template <typename T>
static __device__ void directWork(const Launch& L, const uint8_t* const* send, uint8_t* const* recv, int vec16) {
  const int k = L.nranks, me = L.rank;
  const uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const uint64_t nth = (uint64_t)gridDim.x * blockDim.x;
  const uint64_t ts = sizeof(T);
  const uint64_t vecElems = 16 / ts;
  uint8_t* dst[MSCCLPP_COLL_GPU_MAX_RANKS];
  const uint8_t* src[MSCCLPP_COLL_GPU_MAX_RANKS];
  uint64_t b, e;
  switch (L.kind) {
    case MSCCLPP_COLL_ALLREDUCE: /* rsag: my share of every input, reduced into every output */
      shareOf(L.count, k, me, vecElems, &b, &e);
      if (b >= e) return;
      for (int r = 0; r < k; r++) {
        src[r] = send[r] + b * ts;
        dst[r] = recv[r] + b * ts;
      }
      reduceToAll<T>(dst, k, src, k, e - b, L.op, k, vec16, tid, nth);
      return;
    case MSCCLPP_COLL_REDUCE: /* my share of every input, reduced into the root's output */
      shareOf(L.count, k, me, vecElems, &b, &e);
      if (b >= e) return;
      for (int r = 0; r < k; r++) src[r] = send[r] + b * ts;
      dst[0] = recv[L.root] + b * ts;
      reduceToAll<T>(dst, 1, src, k, e - b, L.op, k, vec16, tid, nth);
      return;
    case MSCCLPP_COLL_REDUCESCATTER: /* block me of every input into my output */
      for (int r = 0; r < k; r++) src[r] = send[r] + (uint64_t)me * L.count * ts;
      dst[0] = recv[me];
      reduceToAll<T>(dst, 1, src, k, L.count, L.op, k, vec16, tid, nth);
      return;
    case MSCCLPP_COLL_ALLGATHER: { /* my input into every output (bytes: T is uint8_t) */
      /* in place (my input is my output's slot): no copy onto itself */
      const int inPlace = send[me] == recv[me] + (uint64_t)me * L.count;
      int nd = 0;
      for (int r = 0; r < k; r++)
        if (!(inPlace && r == me)) dst[nd++] = recv[r] + (uint64_t)me * L.count;
      copyToAll(dst, nd, send[me], L.count, vec16, tid, nth);
      return;
    }
    case MSCCLPP_COLL_BROADCAST: { /* my share of the root's input into every output */
      shareOf(L.count, k, me, 16, &b, &e);
      if (b >= e) return;
      int nd = 0;
      for (int r = 0; r < k; r++) /* in place at the root: no copy onto itself */
        if (!(r == L.root && recv[r] == send[L.root])) dst[nd++] = recv[r] + b;
      copyToAll(dst, nd, send[L.root] + b, e - b, vec16, tid, nth);
      return;
    }
    case MSCCLPP_COLL_ALLTOALL: /* block me of every input into my output (pull) */
      for (int r = 0; r < k; r++) {
        dst[0] = recv[me] + (uint64_t)r * L.count;
        copyToAll(dst, 1, send[r] + (uint64_t)me * L.count, L.count, vec16, tid, nth);
      }
      return;
    default:
      return;
  }
}

template <typename T>
__global__ void __launch_bounds__(1024) directKernel(const __grid_constant__ Launch L) {
  mscclppCollTraceBlock traceBlock(L.trace);
  streamOrderWait();
  traceBlock.restart();
  __shared__ uint64_t epoch;
  __shared__ const uint8_t* send[MSCCLPP_COLL_GPU_MAX_RANKS];
  __shared__ uint8_t* recv[MSCCLPP_COLL_GPU_MAX_RANKS];
  __shared__ int vec16;
  if (threadIdx.x == 0) {
    epoch = L.state->epoch[blockIdx.x];
    vec16 = L.vec16;
  }
  __syncthreads();
  if (exchangeBarrier(L, epoch + 1, send, recv, &vec16)) return;
  directWork<T>(L, send, recv, vec16);
  if (blockBarrier(L, epoch + 2)) return;
  if (threadIdx.x == 0) L.state->epoch[blockIdx.x] = epoch + 2;
}

static const KernelFn directKernels[mscclppNumTypes] = MSCCLPP_COLL_TYPE_TABLE(directKernel);

KernelFn mscclppCollGpuDirectKernel(int type) { return directKernels[type]; }
