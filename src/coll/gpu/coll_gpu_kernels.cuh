/* SPDX-License-Identifier: MIT */
/*
 * What the GPU backend's kernel files share (coll_gpu.h describes the
 * algorithms and the scratch layout): the stream-order wait every kernel
 * starts with, the flags and the block barrier, the copy for any
 * alignment, and the tables of each family's kernels by element type.
 *   coll_gpu_direct.cu     the direct (zero-copy) kernels
 *   coll_gpu_alltoallv.cu  all-to-all-v with its counts in device memory
 *   coll_gpu_packet.cu     the LL packet collectives: allreduce in one and
 *                          two phases; allgather, reduce-scatter and
 *                          all-to-all in one
 *   coll_gpu_p2p.cu        send/recv
 *   coll_gpu_launch.cu     the launches: a call's kernel, on its stream
 * One body per algorithm: the reducing ones are templates over the element
 * type T and the operator OP, instantiated once each, by the table of their
 * own file (MSCCLPP_COLL_TYPE_TABLE); the copy-only ones work on bytes. The
 * launch file reaches a family's kernels through the functions below, as
 * host pointers; a kernel's code lives in its family's file alone.
 *
 * Element operators: integers with wrap-around (computed unsigned), float and
 * double natively, half / bfloat16 / fp8 through float with round-to-nearest
 * at each step. Avg is the sum, divided by nranks once at the end (integers:
 * truncating). Every element is reduced by exactly one rank, in rank order,
 * and copied to the others, so all ranks get bitwise identical results.
 */
#ifndef MSCCLPP_SRC_COLL_GPU_COLL_GPU_KERNELS_CUH_
#define MSCCLPP_SRC_COLL_GPU_COLL_GPU_KERNELS_CUH_

#include <stdint.h>
#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#else
/* The host compiler, playing the packet kernels on CPU threads
 * (tests/collgpu/packet_protocol_host.cpp, which defines what they need of
 * CUDA): only the integer and native float types, and no kernel tables. */
#include <sched.h>
#endif

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
 * written before it but the trace's record counter (coll_trace.h), so the
 * stream's order holds for all memory and only
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
#if defined(MSCCLPP_DEVICE_HOST)
  /* host threads playing the kernels outnumber the cores: let the one
   * waited for run */
  sched_yield();
#endif
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

/* ---- copies and reductions over ranges ------------------------------------------ */

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

/* ---- words of LL packets ------------------------------------------------------- */

/* The 8 bytes of a buffer of `bytes` bytes at `off` (fewer at its end, the
 * rest 0): one load where p is 8-byte aligned (`aligned`), bytes otherwise.
 * The packet kernels (an allreduce's input, a send's buffer) put a word in
 * each LL16 packet. */
static __device__ __forceinline__ uint64_t loadWord(const uint8_t* p, uint64_t off, uint64_t bytes, int aligned) {
  uint32_t m = bytes - off < 8 ? (uint32_t)(bytes - off) : 8u;
  if (aligned && m == 8) return *(const uint64_t*)(p + off);
  return mscclppPacketGather(p + off, m);
}

/* loadWord's converse: v's bytes into the buffer, none past its end. */
static __device__ __forceinline__ void storeWord(uint8_t* p, uint64_t off, uint64_t bytes, uint64_t v, int aligned) {
  uint32_t m = bytes - off < 8 ? (uint32_t)(bytes - off) : 8u;
  if (aligned && m == 8) {
    *(uint64_t*)(p + off) = v;
    return;
  }
  mscclppPacketScatter(p + off, v, m);
}

/* ---- the kernels of each family, for the launches ------------------------------ */

typedef void (*KernelFn)(const Launch);
typedef void (*P2pKernelFn)(const Launch, const struct mscclppCollGpuP2pList);
typedef void (*P2pLlKernelFn)(const Launch, const struct mscclppCollGpuP2pLlList);
typedef void (*AllToAllvKernelFn)(const Launch, const struct mscclppCollGpuCounts);

/* One kernel per element type, in mscclppDataType_t's order. */
#define MSCCLPP_COLL_TYPE_TABLE(K)                                                                             \
  {K<int8_t>,         K<uint8_t>, K<int32_t>, K<uint32_t>,       K<int64_t>,      K<uint64_t>, K<__half>, \
   K<float>,          K<double>,  K<__nv_bfloat16>, K<__nv_fp8_e4m3>, K<__nv_fp8_e5m2>}

/* The kernel of a family for element type `type` (0 <= type < mscclppNumTypes). */
KernelFn mscclppCollGpuDirectKernel(int type);          /* coll_gpu_direct.cu */
KernelFn mscclppCollGpuPacketKernel(int type); /* coll_gpu_packet.cu: allreduce and reduce-scatter */
KernelFn mscclppCollGpuPacketCopyKernel(void);          /* coll_gpu_packet.cu: allgather, all-to-all (bytes) */
KernelFn mscclppCollGpuPacket2Kernel(int type);         /* coll_gpu_packet.cu */
P2pKernelFn mscclppCollGpuP2pKernel(void);              /* coll_gpu_p2p.cu */
P2pLlKernelFn mscclppCollGpuP2pLlKernel(void);          /* coll_gpu_p2p.cu */
AllToAllvKernelFn mscclppCollGpuAllToAllvKernel(void);  /* coll_gpu_alltoallv.cu */

#endif /* MSCCLPP_SRC_COLL_GPU_COLL_GPU_KERNELS_CUH_ */
