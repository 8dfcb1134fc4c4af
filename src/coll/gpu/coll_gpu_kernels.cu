/* SPDX-License-Identifier: MIT */
/*
 * The GPU backend's kernels (coll_gpu.h describes the algorithms and the
 * scratch layout). One body per algorithm: the reducing ones are templates
 * over the element type T and the operator OP, instantiated by the tables at
 * the end; the copy-only ones work on bytes.
 *
 * Element operators: integers with wrap-around (computed unsigned), float and
 * double natively, half / bfloat16 / fp8 through float with round-to-nearest
 * at each step. Avg is the sum, divided by nranks once at the end (integers:
 * truncating). Every element is reduced by exactly one rank, in rank order,
 * and copied to the others, so all ranks get bitwise identical results.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "coll/gpu/coll_gpu.h"
#include "coll/coll_kind.h"
#include "coll/coll_ops.cuh"
#include "mscclpp/coll.h"
#include "mscclpp/packet.h"

typedef struct mscclppCollGpuLaunch Launch;

/* Element operators (Op<T>, wordApply, wordDivide): coll_ops.cuh. */

/* ---- stream order under programmatic dependent launch --------------------------- */

/* Every kernel here starts with this. Launched with programmatic dependent
 * launch (mscclppCollGpuEnqueue's `pdl`), a kernel may be scheduled while
 * the kernel before it on its stream is still finishing; this waits until
 * that kernel has completed and its writes are visible. Nothing is read or
 * written before it, so the stream's order holds for all memory and only
 * the launch's latency overlaps the previous kernel's end, which shortens
 * every small call (H200: bench/HISTORY.md, "Where a small allreduce's time
 * goes" and "Figures moved out of code comments"). The kernels never let the
 * next one start early
 * (griddepcontrol.launch_dependents): its blocks would wait on SMs that
 * another rank's blocks of this call may still need, and calls hung so.
 * A no-op for a plain launch and before compute capability 9.0. */
static __device__ __forceinline__ void streamOrderWait(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* ---- flags and barriers -------------------------------------------------------- */

static __device__ __forceinline__ void flagStore(const Launch& L, uint64_t* p, uint64_t v) {
  if (L.scopeGpu)
    mscclppStoreReleaseGpu64(p, v);
  else
    mscclppStoreReleaseSys64(p, v);
}

/* One step of a bounded wait, cheap while the wait is short: the clock
 * (%globaltimer) is read every 1024 polls, and the abort flag -- a read of
 * host memory over PCIe, about a microsecond -- only once the wait has
 * lasted COLL_WAIT_QUIET_NS; from then on every 1024 polls. A wait that
 * lasts MSCCLPP_WAIT_NOTE_AFTER_NS writes its note on the wait board (who:
 * `peer`, the value `seen` -- MSCCLPP_WAIT_OBSERVED_UNKNOWN when the poll
 * reads packets, not a counter -- and the call), which the hang report
 * reads; mscclppWaitEnd takes it back. peer < 0: no note (the packet polls
 * leave it to one lane per warp: every thread of a block polls there). A timeout makes the note final, is
 * recorded as a device semaphore timeout with `value` and raises the abort
 * flag (mscclppWaitStep's contract). */
#define COLL_WAIT_QUIET_NS 20000ull
static __device__ __forceinline__ mscclppResult_t collWaitStep(const Launch& L, mscclppWaitState* w, uint64_t value,
                                                               int peer, uint64_t seen) {
  if ((++w->spins & 1023u) != 0) return mscclppSuccess;
  uint64_t now = mscclppClockNs();
  if (w->startNs == 0) {
    w->startNs = now;
    return mscclppSuccess;
  }
  uint64_t waited = now - w->startNs;
  if (waited < COLL_WAIT_QUIET_NS) return mscclppSuccess;
  if (mscclppLoadRelaxedSys32(L.wait.abortFlag) != 0) {
    mscclppWaitNoteDrop(&L.wait, w);
    return mscclppAborted;
  }
  const int out = waited > L.wait.timeoutNs;
  if (peer >= 0 && (out || (w->note == 0 && waited > MSCCLPP_WAIT_NOTE_AFTER_NS))) {
    const mscclppWaitWho who = {seen, L.callSeq, (uint32_t)peer, 0};
    mscclppWaitNoteWrite(&L.wait, w, out ? MSCCLPP_WAIT_NOTE_TIMEDOUT : MSCCLPP_WAIT_NOTE_WAITING,
                         MSCCLPP_WAIT_NOTE_FLAG, value, &who);
  }
  if (out) {
    mscclppDeviceRaise(&L.wait, MSCCLPP_DEVICE_ERROR_TIMEOUT_SEMAPHORE, 0, value);
    return mscclppTimeout;
  }
  return mscclppSuccess;
}

/* Spin until *p >= v (bounded, abortable; `peer` writes it), then acquire. */
static __device__ mscclppResult_t flagWait(const Launch& L, const uint64_t* p, uint64_t v, int peer) {
  mscclppWaitState w = MSCCLPP_WAIT_STATE_INIT;
  uint64_t seen;
  while ((seen = mscclppLoadRelaxedSys64(p)) < v) {
    mscclppResult_t r = collWaitStep(L, &w, v, peer, seen);
    if (r != mscclppSuccess) return r;
  }
  mscclppWaitEnd(&L.wait, &w);
  if (L.scopeGpu)
    (void)mscclppLoadAcquireGpu64(p);
  else
    (void)mscclppLoadAcquireSys64(p);
  return mscclppSuccess;
}

static __device__ __forceinline__ uint64_t* barFlag(const Launch& L, int owner, int block, int from) {
  return (uint64_t*)(L.scratch[owner] + MSCCLPP_COLL_GPU_BAR_OFF) + (size_t)block * MSCCLPP_COLL_GPU_MAX_RANKS + from;
}

/* Block-level barrier with the same block of every peer: this block's
 * earlier writes (to any rank's memory) are visible to the peers' blocks
 * after theirs return, and theirs to this one. Returns nonzero (in every
 * thread) when a wait failed. */
static __device__ int blockBarrier(const Launch& L, uint64_t value) {
  __syncthreads();
  int failed = 0;
  int p = threadIdx.x;
  if (p < L.nranks && p != L.rank) {
    flagStore(L, barFlag(L, p, blockIdx.x, L.rank), value);
    failed = flagWait(L, barFlag(L, L.rank, blockIdx.x, p), value, p) != mscclppSuccess;
  }
  return __syncthreads_or(failed);
}

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

/* ---- copies and reductions over ranges ------------------------------------------ */

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



/* 16 bytes from p, which is aligned to sizeof(W), in loads of W (uint4,
 * uint2, uint32_t, uint16_t or uint8_t), streaming. */
template <typename W>
static __device__ __forceinline__ uint4 loadVec(const uint8_t* p) {
  union {
    uint4 v;
    W w[16 / sizeof(W)];
  } u;
#pragma unroll
  for (int j = 0; j < (int)(16 / sizeof(W)); j++) u.w[j] = __ldcs((const W*)p + j);
  return u.v;
}

/* nv 16-byte vectors into dst (16-byte aligned) from src (aligned to
 * sizeof(W)); four in flight per thread, as copyToAll. */
template <typename W>
static __device__ void copyVecs(uint4* dst, const uint8_t* src, uint64_t nv, uint64_t tid, uint64_t nth) {
  uint64_t i = tid;
  for (; i + 3 * nth < nv; i += 4 * nth) {
    uint4 v0 = loadVec<W>(src + 16 * i), v1 = loadVec<W>(src + 16 * (i + nth)),
          v2 = loadVec<W>(src + 16 * (i + 2 * nth)), v3 = loadVec<W>(src + 16 * (i + 3 * nth));
    __stcs(dst + i, v0);
    __stcs(dst + i + nth, v1);
    __stcs(dst + i + 2 * nth, v2);
    __stcs(dst + i + 3 * nth, v3);
  }
  for (; i < nv; i += nth) __stcs(dst + i, loadVec<W>(src + 16 * i));
}

/* dst = src, `bytes` bytes, whatever the two addresses' alignments: the
 * bytes before dst's first 16-byte boundary one by one, then 16-byte
 * stores of loads as wide as src's alignment from there allows (16, 8, 4,
 * 2 or 1 bytes), then the last bytes one by one. copyToAll vectorizes only
 * when both addresses are 16-byte aligned and copies everything else byte
 * by byte, one byte per thread and no loads in flight: an all-to-all-v's
 * blocks start wherever the counts put them (float32 counts: a multiple of
 * 16 bytes one time in four), and that byte loop made it 3x slower than
 * all-to-all at 256 MiB (bench/RESULTS.md, H100 2026-12-05 18:04). */
static __device__ void copyAnyAlign(uint8_t* dst, const uint8_t* src, uint64_t bytes, uint64_t tid, uint64_t nth) {
  uint64_t head = (16 - ((uintptr_t)dst & 15)) & 15;
  if (head > bytes) head = bytes;
  for (uint64_t i = tid; i < head; i += nth) dst[i] = src[i];
  dst += head;
  src += head;
  bytes -= head;
  const uint64_t nv = bytes / 16;
  uint4* d = (uint4*)dst; /* 16-byte aligned (or nv == 0) */
  const uintptr_t a = (uintptr_t)src & 15;
  if (a == 0)
    copyVecs<uint4>(d, src, nv, tid, nth);
  else if ((a & 7) == 0)
    copyVecs<uint2>(d, src, nv, tid, nth);
  else if ((a & 3) == 0)
    copyVecs<uint32_t>(d, src, nv, tid, nth);
  else if ((a & 1) == 0)
    copyVecs<uint16_t>(d, src, nv, tid, nth);
  else
    copyVecs<uint8_t>(d, src, nv, tid, nth);
  for (uint64_t i = nv * 16 + tid; i < bytes; i += nth) dst[i] = src[i];
}

/* ---- direct (zero-copy) kernels -------------------------------------------------- */

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
  streamOrderWait();
  mscclppCollTraceBlock traceBlock(L.trace);
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

/* ---- LL packet allreduce ----------------------------------------------------------- */

/* The LL region and slot size of the launch's grid (coll_gpu.h). */
static __device__ __forceinline__ uint64_t llSlotSize(const Launch& L) {
  return L.llGrid == MSCCLPP_COLL_GPU_LL_SMALL ? MSCCLPP_COLL_GPU_LLSMALL_SLOT
         : L.llGrid == MSCCLPP_COLL_GPU_LL_MID ? MSCCLPP_COLL_GPU_LLMID_SLOT
                                               : L.llSlotBytes;
}

static __device__ __forceinline__ mscclppLLPacket16* llSlot(const Launch& L, int owner, int parity, int from) {
  const uint64_t off = L.llGrid == MSCCLPP_COLL_GPU_LL_SMALL ? MSCCLPP_COLL_GPU_LLSMALL_OFF
                       : L.llGrid == MSCCLPP_COLL_GPU_LL_MID ? MSCCLPP_COLL_GPU_LLMID_OFF
                                                             : MSCCLPP_COLL_GPU_LL_OFF;
  return (mscclppLLPacket16*)(L.scratch[owner] + off + ((uint64_t)parity * L.nranks + from) * llSlotSize(L));
}

static __device__ __forceinline__ uint64_t loadWord(const uint8_t* p, uint64_t off, uint64_t bytes, int aligned) {
  uint32_t m = bytes - off < 8 ? (uint32_t)(bytes - off) : 8u;
  if (aligned && m == 8) return *(const uint64_t*)(p + off);
  return mscclppPacketGather(p + off, m);
}

static __device__ __forceinline__ void storeWord(uint8_t* p, uint64_t off, uint64_t bytes, uint64_t v, int aligned) {
  uint32_t m = bytes - off < 8 ? (uint32_t)(bytes - off) : 8u;
  if (aligned && m == 8) {
    *(uint64_t*)(p + off) = v;
    return;
  }
  mscclppPacketScatter(p + off, v, m);
}

/* Ranks up to which the packet allreduce polls all peers' packets together
 * (more do not fit the registers; with 4 ranks on one H200 it made the small
 * sizes faster: bench/HISTORY.md, "Collectives (issue: collectives)", the
 * A/B of loading all missing packets before checking any). */
#define LL_POLL_TOGETHER 4

/* Poll the packets at index i of the slots of the ranks in `missing` (a
 * bit per rank; rank q's slot starts at slot0 + q * stride) until each has
 * this round's flag; got[q] receives rank q's data. Every pass issues the
 * loads of all missing packets before checking any: one L2 round trip per
 * pass, not one per peer. Ranks < LL_POLL_TOGETHER only. 0 when the wait
 * failed (recorded by collWaitStep). */
static __device__ __forceinline__ int llPollTogether(const Launch& L, const mscclppLLPacket16* slot0, uint64_t stride,
                                                     uint64_t i, uint32_t flag, uint32_t missing, uint64_t* got) {
  mscclppWaitState w = MSCCLPP_WAIT_STATE_INIT;
  for (;;) {
    mscclppLL16Raw raw[LL_POLL_TOGETHER];
#pragma unroll
    for (int q = 0; q < LL_POLL_TOGETHER; q++)
      if (missing & (1u << q)) raw[q] = mscclppLL16Load(slot0 + q * stride + i);
#pragma unroll
    for (int q = 0; q < LL_POLL_TOGETHER; q++)
      if ((missing & (1u << q)) && mscclppLL16Check(raw[q], flag, &got[q])) missing &= ~(1u << q);
    if (missing == 0) {
      mscclppWaitEnd(&L.wait, &w);
      return 1;
    }
    if (collWaitStep(L, &w, flag, (threadIdx.x & 31u) == 0 ? __ffs(missing) - 1 : -1,
                     MSCCLPP_WAIT_OBSERVED_UNKNOWN) != mscclppSuccess) return 0;
  }
}

/* One packet, polled until it has this round's flag. */
static __device__ __forceinline__ int llPollOne(const Launch& L, const mscclppLLPacket16* p, uint32_t flag, int peer,
                                                uint64_t* v) {
  mscclppWaitState w = MSCCLPP_WAIT_STATE_INIT;
  while (!mscclppLL16Check(mscclppLL16Load(p), flag, v))
    if (collWaitStep(L, &w, flag, peer, MSCCLPP_WAIT_OBSERVED_UNKNOWN) != mscclppSuccess) return 0;
  mscclppWaitEnd(&L.wait, &w);
  return 1;
}

/* The ranks other than me below k, as a mask for llPollTogether. */
static __device__ __forceinline__ uint32_t llPeers(int k, int me) {
  uint32_t m = 0;
#pragma unroll
  for (int q = 0; q < LL_POLL_TOGETHER; q++)
    if (q < k && q != me) m |= 1u << q;
  return m;
}

/* Word i of this round from every rank, reduced in rank order (this
 * rank's own word is `mine`; rank q's packet is slot0[q * stride + i]) into
 * *acc, once the peers' packets have arrived. 0 when the wait failed. */
template <typename T>
static __device__ __forceinline__ int llReduceArrived(const Launch& L, const mscclppLLPacket16* slot0, uint64_t stride,
                                                      uint64_t i, uint32_t flag, uint64_t mine, uint64_t* acc) {
  const int k = L.nranks, me = L.rank;
  if (k > 2 && k <= LL_POLL_TOGETHER) { /* all peers at once */
    uint64_t got[LL_POLL_TOGETHER];
    if (!llPollTogether(L, slot0, stride, i, flag, llPeers(k, me), got)) return 0;
    *acc = me == 0 ? mine : got[0];
#pragma unroll
    for (int q = 1; q < LL_POLL_TOGETHER; q++)
      if (q < k) {
        /* a value, not `q == me ? mine : got[q]` as a reference: choosing
         * between two addresses put got[] in local memory */
        const uint64_t v = q == me ? mine : got[q];
        wordApply<T, uint64_t>(*acc, v, L.op);
      }
    return 1;
  }
  /* one peer (faster than the loop above with 2 ranks), or more than fit
   * the registers: one peer at a time */
  for (int q = 0; q < k; q++) {
    uint64_t v = mine;
    if (q != me && !llPollOne(L, slot0 + q * stride + i, flag, (threadIdx.x & 31u) == 0 ? q : -1, &v)) return 0;
    if (q == 0)
      *acc = v;
    else
      wordApply<T, uint64_t>(*acc, v, L.op);
  }
  return 1;
}

/* LL16 one-shot allreduce, chunked through the slots: for each chunk, my
 * words go to every peer's slot [me], then I reduce (in rank order) my own
 * words with the peers' packets in my slots. Every packet kernel of a
 * communicator has the same grid, so the same thread handles the same
 * packet index in every round of every call, which is what makes two
 * parities enough (packet.h). */
template <typename T>
__global__ void __launch_bounds__(MSCCLPP_COLL_GPU_PACKET_THREADS, 1) packetAllReduceKernel(const __grid_constant__ Launch L) {
  streamOrderWait();
  mscclppCollTraceBlock traceBlock(L.trace);
  const int k = L.nranks, me = L.rank;
  const uint64_t bytes = L.count * sizeof(T);
  const uint64_t npk = (bytes + 7) / 8;
  const uint64_t per = llSlotSize(L) / 16;
  const uint64_t nchunks = (npk + per - 1) / per;
  const uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const uint64_t nth = (uint64_t)gridDim.x * blockDim.x;
  uint64_t* counter = L.llGrid == MSCCLPP_COLL_GPU_LL_SMALL ? &L.state->llRoundSmall
                      : L.llGrid == MSCCLPP_COLL_GPU_LL_MID ? &L.state->llRoundMid[blockIdx.x]
                                                            : &L.state->llRound[blockIdx.x];
  const uint64_t base = *counter;
  const uint8_t* in = L.send[me];
  uint8_t* out = L.recv[me];
  int failed = 0;
  for (uint64_t c = 0; c < nchunks && !failed; c++) {
    const uint64_t round = base + c + 1;
    const uint32_t flag = (uint32_t)round;
    const int parity = (int)(round & 1);
    const uint64_t p0 = c * per;
    const uint64_t n = npk - p0 < per ? npk - p0 : per;
    for (uint64_t i = tid; i < n; i += nth) {
      uint64_t v = loadWord(in, (p0 + i) * 8, bytes, L.vec16);
      for (int q = 0; q < k; q++)
        if (q != me) mscclppLL16Write(llSlot(L, q, parity, me) + i, (uint32_t)v, (uint32_t)(v >> 32), flag);
    }
    for (uint64_t i = tid; i < n && !failed; i += nth) {
      const uint64_t mine = loadWord(in, (p0 + i) * 8, bytes, L.vec16);
      uint64_t acc = 0;
      if (!llReduceArrived<T>(L, llSlot(L, me, parity, 0), llSlotSize(L) / 16, i, flag, mine, &acc)) {
        failed = 1;
        break;
      }
      if (L.op == mscclppAvg) wordDivide<T, uint64_t>(acc, k);
      storeWord(out, (p0 + i) * 8, bytes, acc, L.vec16);
    }
  }
  /* Each block advances its own copy of the round counter (coll_gpu.h). */
  if (__syncthreads_or(failed)) return;
  if (threadIdx.x == 0) *counter = base + nchunks;
}

/* ---- LL packet allreduce in two phases ------------------------------------------- */

/* My slot for packets from rank `from` in rank `owner`'s ll2 region (coll_gpu.h):
 * phase 0 carries inputs to their share's owner, phase 1 reduced shares.
 * Each parity has its own half of the region (2 * nranks largest slots);
 * inside it, slots are `slotBytes` apart -- the call's share of packets,
 * not the largest slot -- so that a small call touches a few pages of each
 * rank's scratch, not slots a MiB apart. Every rank computes the same size
 * from the same count. A call of another size lays out its parity's half
 * differently, which is harmless: the last call to use that half (two
 * calls before) has ended on every rank (see the kernel), and the halves
 * never overlap. */
static __device__ __forceinline__ mscclppLLPacket16* ll2Slot(const Launch& L, uint64_t slotBytes, int owner,
                                                             int parity, int phase, int from) {
  uint8_t* base = L.scratch[owner] + MSCCLPP_COLL_GPU_LL2_OFF(L.nranks, L.llSlotBytes, L.p2pSlotBytes) +
                  (uint64_t)parity * 2 * L.nranks * L.ll2SlotBytes;
  return (mscclppLLPacket16*)(base + ((uint64_t)phase * L.nranks + from) * slotBytes);
}

/* Words (8 bytes) of the message are cut into nranks shares; share q is
 * reduced by rank q. Phase 0: my words of share q go to rank q as packets.
 * Phase 1: I reduce my share (in rank order: bitwise the same result on
 * every rank) into my output and send it to every peer as packets. Phase 2:
 * the peers' reduced shares into my output. A call's packets all fit the
 * slots, so a slot is written once per call; the two parities alternate
 * between calls, and a rank's call c+2 writes only after its call c+1 has
 * received every peer's packets, which the peers send after their call c
 * ended (stream order): nothing of call c is still unread. Flags are call
 * numbers (every block of every rank counts the same calls). */
template <typename T>
__global__ void __launch_bounds__(MSCCLPP_COLL_GPU_PACKET_THREADS, 1)
    packet2AllReduceKernel(const __grid_constant__ Launch L) {
  streamOrderWait();
  mscclppCollTraceBlock traceBlock(L.trace);
  const int k = L.nranks, me = L.rank;
  const uint64_t bytes = L.count * sizeof(T);
  const uint64_t npk = (bytes + 7) / 8;
  const uint64_t share = (npk + k - 1) / k;
  /* <= L.ll2SlotBytes: a share of a message of at most LL2_MAX_BYTES */
  const uint64_t slotBytes = (share * 16 + 63) / 64 * 64;
  const uint64_t stride = slotBytes / 16;
  const uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const uint64_t nth = (uint64_t)gridDim.x * blockDim.x;
  uint64_t* counter = &L.state->ll2Round[blockIdx.x];
  const uint64_t round = *counter + 1;
  const uint32_t flag = (uint32_t)round;
  const int parity = (int)(round & 1);
  const uint8_t* in = L.send[me];
  uint8_t* out = L.recv[me];
  const uint64_t mine0 = (uint64_t)me * share;
  const uint64_t myLen = mine0 >= npk ? 0 : npk - mine0 < share ? npk - mine0 : share;
  int failed = 0;
  /* phase 0 */
  for (uint64_t i = tid; i < share; i += nth)
    for (int q = 0; q < k; q++) {
      const uint64_t w = (uint64_t)q * share + i;
      if (q == me || w >= npk) continue;
      const uint64_t v = loadWord(in, w * 8, bytes, L.vec16);
      mscclppLL16Write(ll2Slot(L, slotBytes, q, parity, 0, me) + i, (uint32_t)v, (uint32_t)(v >> 32), flag);
    }
  /* phase 1 */
  const mscclppLLPacket16* in0 = ll2Slot(L, slotBytes, me, parity, 0, 0);
  for (uint64_t i = tid; i < myLen; i += nth) {
    const uint64_t w = mine0 + i;
    uint64_t acc = 0;
    if (!llReduceArrived<T>(L, in0, stride, i, flag, loadWord(in, w * 8, bytes, L.vec16), &acc)) {
      failed = 1;
      break;
    }
    if (L.op == mscclppAvg) wordDivide<T, uint64_t>(acc, k);
    storeWord(out, w * 8, bytes, acc, L.vec16);
    for (int q = 0; q < k; q++)
      if (q != me)
        mscclppLL16Write(ll2Slot(L, slotBytes, q, parity, 1, me) + i, (uint32_t)acc, (uint32_t)(acc >> 32), flag);
  }
  /* phase 2 */
  const mscclppLLPacket16* res0 = ll2Slot(L, slotBytes, me, parity, 1, 0);
  for (uint64_t i = tid; i < share && !failed; i += nth) {
    if (k > 2 && k <= LL_POLL_TOGETHER) { /* every peer's share at once */
      uint32_t peers = 0;
#pragma unroll
      for (int q = 0; q < LL_POLL_TOGETHER; q++)
        if (q < k && q != me && (uint64_t)q * share + i < npk) peers |= 1u << q;
      uint64_t got[LL_POLL_TOGETHER];
      if (!llPollTogether(L, res0, stride, i, flag, peers, got)) {
        failed = 1;
        break;
      }
#pragma unroll
      for (int q = 0; q < LL_POLL_TOGETHER; q++)
        if (peers & (1u << q)) storeWord(out, ((uint64_t)q * share + i) * 8, bytes, got[q], L.vec16);
      continue;
    }
    for (int q = 0; q < k && !failed; q++) {
      const uint64_t w = (uint64_t)q * share + i;
      uint64_t v = 0;
      if (q == me || w >= npk) continue;
      if (!llPollOne(L, res0 + q * stride + i, flag, (threadIdx.x & 31u) == 0 ? q : -1, &v))
        failed = 1;
      else
        storeWord(out, w * 8, bytes, v, L.vec16);
    }
  }
  if (__syncthreads_or(failed)) return;
  if (threadIdx.x == 0) *counter = round;
}

/* ---- send/recv --------------------------------------------------------------------- */

#define P2P_CH MSCCLPP_COLL_GPU_P2P_CHANNELS
#define P2P_DEPTH MSCCLPP_COLL_GPU_P2P_DEPTH

/* A channel's control line (coll_gpu.h): written by the sender, read by
 * the receiver. desc[m % DEPTH] describes message m: zc 0, the data is in
 * the channel's scratch slot m % DEPTH; zc 1, the receiver pulls the
 * channel's share of the op from src (the sender's buffer as the receiver
 * maps it). */
struct P2pCtl {
  uint64_t ready; /* messages posted */
  uint64_t unused;
  struct {
    uint64_t zc;
    uint64_t src;
  } desc[P2P_DEPTH];
};

static __device__ __forceinline__ uint8_t* p2pCtlBase(const Launch& L, int owner) {
  return L.scratch[owner] + MSCCLPP_COLL_GPU_P2PCTL_OFF(L.nranks, L.llSlotBytes, L.p2pSlotBytes, L.ll2SlotBytes);
}
/* Messages from `from` on channel c, in `owner`'s scratch. */
static __device__ __forceinline__ P2pCtl* p2pCtl(const Launch& L, int owner, int from, uint32_t c) {
  return (P2pCtl*)(p2pCtlBase(L, owner) + (uint64_t)from * MSCCLPP_COLL_GPU_P2P_PEER_CTL_BYTES +
                   (uint64_t)c * MSCCLPP_COLL_GPU_P2P_CTL_BYTES);
}
/* Messages of `owner` that `from` took on channel c, in `owner`'s scratch. */
static __device__ __forceinline__ uint64_t* p2pAck(const Launch& L, int owner, int from, uint32_t c) {
  return (uint64_t*)(p2pCtlBase(L, owner) + (uint64_t)from * MSCCLPP_COLL_GPU_P2P_PEER_CTL_BYTES +
                     (uint64_t)P2P_CH * MSCCLPP_COLL_GPU_P2P_CTL_BYTES) +
         c;
}
/* The data of message m on channel c from `from`, in `owner`'s p2p slot. */
static __device__ __forceinline__ uint8_t* p2pData(const Launch& L, uint64_t chunk, int owner, int from, uint32_t c,
                                                   uint64_t m) {
  return L.scratch[owner] + MSCCLPP_COLL_GPU_P2P_OFF(L.nranks, L.llSlotBytes) + (uint64_t)from * L.p2pSlotBytes +
         ((uint64_t)c * P2P_DEPTH + m % P2P_DEPTH) * chunk;
}

/* Send/recv. Block b of a lane (a direction and peer, P.lanes; its nb
 * blocks) serves the channels c = b, b + nb, ... of that pair, and each op
 * of the lane in order. An op of B bytes has nchunks = ceil(B / chunk)
 * chunks and uses channels 0 .. min(nchunks, CHANNELS) - 1, whichever way
 * it travels, so both sides agree on the messages of every channel:
 *   through the scratch  chunk j goes on channel j % CHANNELS, a message
 *                        each: the sender waits until the ring slot is
 *                        free (ack >= m - DEPTH), copies the chunk into
 *                        the receiver's scratch and releases ready = m;
 *                        the receiver acquires ready >= m, copies the
 *                        chunk out and releases ack = m
 *   zero-copy            one message per channel, with the address of the
 *                        sender's buffer as the receiver maps it; the
 *                        receiver pulls the channel's contiguous share of
 *                        the op straight into its buffer, then acks. The
 *                        sender's blocks only post, and wait, before the
 *                        kernel ends, for every such message's ack (the
 *                        buffer may be reused once the send completes)
 * The sender decides (coll_gpu.c: zero-copy where the receiver maps the
 * buffer); the receiver reads the descriptor of each message. Ordering:
 * the data or the descriptor is written before ready's release and read
 * after its acquire; the receiver's reads of a message (scratch or the
 * sender's buffer) come before its ack's release, and the sender reuses a
 * slot, or lets its kernel end, only after acquiring that ack. Every block
 * of a lane goes through its messages in the order (op, channel, message),
 * on both sides, and each wait is for an earlier message of the same
 * channel or the message itself: no cycle, whatever the two sides' block
 * counts. The message counters live in the device state, one per channel,
 * each written by the one block that serves the channel, so graphs replay. */
__global__ void __launch_bounds__(1024)
    p2pKernel(const __grid_constant__ Launch L, const __grid_constant__ struct mscclppCollGpuP2pList P) {
  streamOrderWait();
  mscclppCollTraceBlock traceBlock(L.trace);
  __shared__ int lane;
  __shared__ uint64_t msg[P2P_CH];   /* messages of the channels this block serves */
  __shared__ uint64_t lastZ[P2P_CH]; /* sender: its last zero-copy message per channel (0: none) */
  __shared__ uint64_t cur, zc, zsrc; /* the message at hand (set by thread 0 before a barrier) */
  if (threadIdx.x == 0) {
    lane = -1;
    for (uint32_t i = 0; i < P.nlanes; i++)
      if (blockIdx.x >= P.lanes[i].first && blockIdx.x < (uint32_t)P.lanes[i].first + P.lanes[i].nblocks) lane = (int)i;
  }
  __syncthreads();
  if (lane < 0) return;
  const int isSend = P.lanes[lane].isSend, peer = P.lanes[lane].peer, me = L.rank;
  const uint32_t nb = P.lanes[lane].nblocks, b = blockIdx.x - P.lanes[lane].first;
  const int sender = isSend ? me : peer, receiver = isSend ? peer : me;
  uint64_t* counters = isSend ? L.state->p2pSent[peer] : L.state->p2pRecv[peer];
  for (uint32_t c = threadIdx.x; c < P2P_CH; c += blockDim.x)
    if (c % nb == b) {
      msg[c] = counters[c];
      lastZ[c] = 0;
    }
  __syncthreads();
  const uint64_t chunk = P.chunkBytes;
  for (uint32_t o = 0; o < P.nops; o++) {
    if (P.ops[o].isSend != isSend || P.ops[o].peer != peer) continue;
    const uint64_t bytes = P.ops[o].bytes;
    uint8_t* const buf = P.ops[o].buf;
    const uint8_t* const src = P.ops[o].src;
    const uint64_t nchunks = (bytes + chunk - 1) / chunk;
    const uint32_t active = nchunks < P2P_CH ? (uint32_t)nchunks : P2P_CH;
    if (isSend && src != NULL) { /* zero-copy: thread 0 posts a message per channel */
      int bad = 0;
      if (threadIdx.x == 0)
        for (uint32_t c = b; c < active && !bad; c += nb) {
          P2pCtl* ctl = p2pCtl(L, receiver, sender, c);
          const uint64_t m = ++msg[c];
          if (m > P2P_DEPTH && flagWait(L, p2pAck(L, sender, receiver, c), m - P2P_DEPTH, peer) != mscclppSuccess) {
            bad = 1;
            break;
          }
          volatile uint64_t* d = &ctl->desc[m % P2P_DEPTH].zc;
          d[0] = 1;
          d[1] = (uint64_t)(uintptr_t)src;
          flagStore(L, &ctl->ready, m);
          lastZ[c] = m;
        }
      if (__syncthreads_or(bad)) return;
      continue;
    }
    for (uint32_t c = b; c < active; c += nb) {
      P2pCtl* ctl = p2pCtl(L, receiver, sender, c);
      uint64_t* ack = p2pAck(L, sender, receiver, c);
      for (uint64_t j = c; j < nchunks; j += P2P_CH) {
        int bad = 0;
        if (threadIdx.x == 0) {
          const uint64_t m = ++msg[c];
          cur = m;
          if (isSend) {
            bad = m > P2P_DEPTH && flagWait(L, ack, m - P2P_DEPTH, peer) != mscclppSuccess;
          } else {
            bad = flagWait(L, &ctl->ready, m, peer) != mscclppSuccess;
            if (!bad) {
              const volatile uint64_t* d = &ctl->desc[m % P2P_DEPTH].zc;
              zc = d[0];
              zsrc = d[1];
            }
          }
        }
        if (__syncthreads_or(bad)) return;
        const uint64_t m = cur;
        const int pull = !isSend && zc != 0;
        /* one copy site (each inlined copyAnyAlign costs registers) */
        uint8_t* dst;
        const uint8_t* from;
        uint64_t n;
        if (pull) { /* the channel's contiguous share of the op, from the sender's buffer */
          const uint64_t per = ((bytes + active - 1) / active + 15) / 16 * 16;
          const uint64_t s0 = (uint64_t)c * per < bytes ? (uint64_t)c * per : bytes;
          n = bytes - s0 < per ? bytes - s0 : per;
          dst = buf + s0;
          from = (const uint8_t*)(uintptr_t)zsrc + s0;
        } else {
          const uint64_t off = j * chunk;
          n = bytes - off < chunk ? bytes - off : chunk;
          uint8_t* slot = p2pData(L, chunk, receiver, sender, c, m);
          dst = isSend ? slot : buf + off;
          from = isSend ? buf + off : slot;
        }
        copyAnyAlign(dst, from, n, threadIdx.x, blockDim.x);
        __syncthreads(); /* every thread's copy of this message is done */
        if (threadIdx.x == 0) {
          if (isSend) {
            ((volatile uint64_t*)&ctl->desc[m % P2P_DEPTH].zc)[0] = 0;
            flagStore(L, &ctl->ready, m);
          } else {
            flagStore(L, ack, m);
          }
        }
        if (pull) break; /* one message carried the channel's whole share */
      }
    }
  }
  /* a sender's zero-copy buffers: pulled by the receiver before this ends */
  int bad = 0;
  if (isSend && threadIdx.x == 0)
    for (uint32_t c = b; c < P2P_CH && !bad; c += nb)
      if (lastZ[c] != 0) bad = flagWait(L, p2pAck(L, sender, receiver, c), lastZ[c], peer) != mscclppSuccess;
  if (__syncthreads_or(bad)) return;
  for (uint32_t c = threadIdx.x; c < P2P_CH; c += blockDim.x)
    if (c % nb == b) counters[c] = msg[c];
}

/* ---- dispatch ------------------------------------------------------------------------ */

typedef void (*KernelFn)(const Launch);

#define MSCCLPP_COLL_TYPE_TABLE(K)                                                                             \
  {K<int8_t>,         K<uint8_t>, K<int32_t>, K<uint32_t>,       K<int64_t>,      K<uint64_t>, K<__half>, \
   K<float>,          K<double>,  K<__nv_bfloat16>, K<__nv_fp8_e4m3>, K<__nv_fp8_e5m2>}

static const KernelFn directKernels[mscclppNumTypes] = MSCCLPP_COLL_TYPE_TABLE(directKernel);
static const KernelFn packetKernels[mscclppNumTypes] = MSCCLPP_COLL_TYPE_TABLE(packetAllReduceKernel);
static const KernelFn packet2Kernels[mscclppNumTypes] = MSCCLPP_COLL_TYPE_TABLE(packet2AllReduceKernel);

/* The launch of `launch`'s grid on `stream`; `attr` holds the programmatic
 * dependent launch attribute when `pdl`. */
static cudaLaunchConfig_t launchConfig(const struct mscclppCollGpuLaunch* launch, void* stream, int pdl,
                                       cudaLaunchAttribute attr[1]) {
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(launch->nblocks);
  cfg.blockDim = dim3(launch->nthreads);
  cfg.stream = (cudaStream_t)stream;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  return cfg;
}

/* The launch's status, the error the runtime kept read to clear it. */
static mscclppResult_t launchStatus(cudaError_t err, const char** why) {
  cudaError_t last = cudaGetLastError();
  if (err == cudaSuccess) err = last;
  *why = cudaGetErrorString(err);
  return err == cudaSuccess ? mscclppSuccess : mscclppUnhandledCudaError;
}

extern "C" mscclppResult_t mscclppCollGpuEnqueue(const struct mscclppCollGpuLaunch* launch,
                                                 const struct mscclppCollGpuP2pList* p2p, void* stream, int pdl,
                                                 const char** why) {
  cudaLaunchAttribute attr[1];
  cudaLaunchConfig_t cfg = launchConfig(launch, stream, pdl, attr);
  cudaError_t err;
  if (p2p != NULL) {
    err = cudaLaunchKernelEx(&cfg, p2pKernel, *launch, *p2p);
  } else {
    KernelFn fn = launch->algo == MSCCLPP_COLL_GPU_ALGO_PACKET    ? packetKernels[launch->type]
                  : launch->algo == MSCCLPP_COLL_GPU_ALGO_PACKET2 ? packet2Kernels[launch->type]
                                                                  : directKernels[launch->type];
    err = cudaLaunchKernelEx(&cfg, fn, *launch);
  }
  return launchStatus(err, why);
}

extern "C" mscclppResult_t mscclppCollGpuEnqueueAllToAllv(const struct mscclppCollGpuLaunch* launch,
                                                          const struct mscclppCollGpuCounts* counts, void* stream,
                                                          int pdl, const char** why) {
  cudaLaunchAttribute attr[1];
  cudaLaunchConfig_t cfg = launchConfig(launch, stream, pdl, attr);
  return launchStatus(cudaLaunchKernelEx(&cfg, allToAllvKernel, *launch, *counts), why);
}

extern "C" int mscclppCollGpuDirectBlocksPerSm(int type, uint32_t nthreads) {
  int n = 0;
  if (type < 0 || type >= mscclppNumTypes ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, directKernels[type], (int)nthreads, 0) != cudaSuccess) {
    (void)cudaGetLastError();
    return 1;
  }
  return n > 0 ? n : 1;
}
