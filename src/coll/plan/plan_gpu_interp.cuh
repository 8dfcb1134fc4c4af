/* SPDX-License-Identifier: MIT */
/*
 * The GPU executor's interpreter (plan_gpu_kernels.cu launches it): one
 * kernel that interprets a program (plan_program.h). Block b of the grid is the plan's thread block
 * b, with the plan's threads per block; what each op does is
 * plan_program.h's list, addresses from mscclppPlanOperandRange as on the
 * host. One kernel for every element type: the type is a launch value,
 * switched on only in the word reductions and the average's division
 * (coll_ops.cuh's operators, as the built-in kernels use). A kernel per
 * type made nvcc compile the interpreter 12 times (minutes on a small
 * machine); the switch is uniform across the block.
 *
 * A call (plan_gpu.h says why it stages):
 *   1. every block takes its execution number (its LL flag, and the half
 *      of a double scratch) from its device counter;
 *   2. where the input is staged, the grid copies the caller's input into
 *      the input area of this rank's region (each block padded to k
 *      chunks); where it is not (no padding, and no peer addresses it:
 *      mscclppPlanGpuUnstageable, or every peer maps it: ...Shareable),
 *      the ops read the caller's own. Where peers address inputs or
 *      outputs (L.trade), block 0 trades addresses with every linked peer
 *      (tradeAddresses). Then the grid syncs, and every block reads the
 *      peers' traded addresses;
 *   3. each block runs its ops;
 *   4. the grid syncs; where the output is staged it copies the output area
 *      out (dividing for avg) and syncs again; then block 0 meets every
 *      linked peer (plan_host.c's endBarrier says why).
 * Between two ops of a block there is a __syncthreads(): the writes of one
 * op by any thread are done before the next op reads them or a thread
 * signals them. Signals are sent by one thread per channel after that
 * barrier (the release is cumulative over what the barrier ordered); a
 * wait's acquire is followed by the block's barrier before anything else.
 * Every wait is bounded by MSCCLPP_TIMEOUT and ends when the abort flag is
 * raised (the channels' waits through their handles, the executor's own
 * through the launch's wait context); a block whose op fails leaves, and
 * the raised abort ends every other wait.
 *
 * Written for nvcc and for a host C++ compiler that plays the blocks on CPU
 * threads (tests/plan/plan_gpu_play.cpp, in CI): without nvcc only the
 * integer and native float types reduce (coll_ops.cuh), and the CUDA names
 * come from the test's shims.
 */
#ifndef MSCCLPP_SRC_COLL_PLAN_PLAN_GPU_INTERP_CUH_
#define MSCCLPP_SRC_COLL_PLAN_PLAN_GPU_INTERP_CUH_

#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#endif
#include <stdint.h>

#include "coll/coll_ops.cuh"
#include "coll/plan/plan_gpu_launch.h"
#include "mscclpp/coll.h"
#include "mscclpp/packet.h"

typedef struct mscclppPlanGpuLaunch Launch;

/* One block's view of the current op's window (inside a pipeline). */
struct Blk {
  mscclppPlanCallShape shape; /* with this execution's flag and scratch half */
  const mscclppPlanRemote* rem;
  uint64_t window, unit;
  uint64_t traded[MSCCLPP_PLAN_GPU_MAX_RANKS][2]; /* peer q's input and output as mapped here (0: in its region) */
};

/* ---- addresses ----------------------------------------------------------------------- */

static __device__ __forceinline__ mscclppPlanRange rangeOf(const Blk& b, const mscclppPlanOp* op,
                                                           const mscclppPlanOperand* o) {
  return mscclppPlanOperandRange(o, op, &b.shape, b.window, b.unit);
}

/* The rank that owns the operand's buffer. */
static __device__ __forceinline__ int ownerOf(const Launch& L, const Blk& b, const mscclppPlanOperand* o) {
  return (o->flags & MSCCLPP_PLAN_OPERAND_REMOTE) ? b.rem[o->remote].rank : L.rank;
}

/* The operand's first byte as this rank addresses it (packets: the first
 * packet's): this rank's where L.mine says (the caller's own input and
 * output where they are not staged), a peer's where it traded it (its own
 * buffer, mapped here) or else in its region. */
static __device__ __forceinline__ uint8_t* addrOf(const Launch& L, const Blk& b, const mscclppPlanOperand* o,
                                                  const mscclppPlanRange& r) {
  const int q = ownerOf(L, b, o);
  if (q == L.rank) return L.mine[o->space] + r.offset;
  if (o->space != MSCCLPP_PLAN_SCRATCH && b.traded[q][o->space] != 0)
    return (uint8_t*)(uintptr_t)b.traded[q][o->space] + r.offset;
  return L.base[q] + L.off[q][o->space] + r.offset;
}

/* Its offset in its owner's region (port channels address regions by offset). */
static __device__ __forceinline__ uint64_t regionOffOf(const Launch& L, const Blk& b, const mscclppPlanOperand* o,
                                                       const mscclppPlanRange& r) {
  return L.off[ownerOf(L, b, o)][o->space] + r.offset;
}

/* ---- the executor's own waits -------------------------------------------------------- */

/* Spin (thread 0 of a block) until *p >= v: bounded, abortable. */
static __device__ mscclppResult_t counterWait(const Launch& L, const uint64_t* p, uint64_t v) {
  mscclppWaitState st = MSCCLPP_WAIT_STATE_INIT;
  while (mscclppLoadRelaxedGpu64(p) < v) {
    mscclppResult_t r = mscclppWaitStep(&L.wait, &st, MSCCLPP_DEVICE_ERROR_TIMEOUT_SEMAPHORE, v);
    if (r != mscclppSuccess) return r;
  }
  return mscclppSuccess;
}

/* Barrier of `n` blocks of this grid on counter *c (which only grows: the
 * arrival's round ends at the next multiple of n). Called by every thread;
 * every block's writes before it are visible to the others' threads after
 * it. Returns nonzero in every thread when the wait failed. */
static __device__ int blocksBarrier(const Launch& L, uint64_t* c, uint32_t n) {
  __syncthreads();
  int bad = 0;
  if (threadIdx.x == 0) {
    __threadfence(); /* this block's writes (ordered before by the barrier) before the arrival */
    uint64_t arrival = (uint64_t)atomicAdd((unsigned long long*)c, 1ull);
    bad = counterWait(L, c, (arrival / n + 1) * n) != mscclppSuccess;
    __threadfence(); /* the others' writes, published before their arrivals, before ours after */
  }
  return __syncthreads_or(bad);
}

/* LL16: wait until packet p carries `flag`; its two data words. */
static __device__ __forceinline__ mscclppResult_t packetWait(const Launch& L, const mscclppLLPacket16* p,
                                                             uint32_t flag, uint64_t* data) {
  mscclppWaitState st = MSCCLPP_WAIT_STATE_INIT;
  while (!mscclppLL16Check(mscclppLL16Load(p), flag, data)) {
    mscclppResult_t r = mscclppWaitStep(&L.wait, &st, MSCCLPP_DEVICE_ERROR_TIMEOUT_SEMAPHORE, flag);
    if (r != mscclppSuccess) return r;
  }
  return mscclppSuccess;
}

/* ---- ops ----------------------------------------------------------------------------- */

/* PUT, PUT_WITH_SIGNAL(_AND_FLUSH). Memory channels: every thread copies
 * into the peer's memory. Port channels: thread 0 pushes the triggers, in
 * the order of the pairs (a signal of a pair follows its put; a pair with
 * nothing in this window still signals, as the peer waits for it). */
static __device__ int opPut(const Launch& L, const Blk& b, const mscclppPlanOp* op) {
  const uint32_t tid = threadIdx.x, nth = blockDim.x;
  for (int i = 0; i < op->nSrc; i++) {
    const mscclppPlanOperand *s = &op->operand[i], *d = &op->operand[op->nSrc + i];
    mscclppPlanRange sr = rangeOf(b, op, s), dr = rangeOf(b, op, d);
    uint64_t bytes = sr.bytes < dr.bytes ? sr.bytes : dr.bytes;
    if (op->channelType == MSCCLPP_PLAN_CHANNEL_MEMORY) {
      mscclppCopyDevice(addrOf(L, b, d, dr), addrOf(L, b, s, sr), bytes, tid, nth);
      continue;
    }
    if (tid != 0) continue;
    const mscclppPortChannelDeviceHandle* h = &L.port[op->ids[i]];
    const uint64_t dOff = regionOffOf(L, b, d, dr), sOff = regionOffOf(L, b, s, sr);
    mscclppResult_t r = mscclppSuccess;
    if (op->code == MSCCLPP_PLAN_OP_PUT) {
      if (bytes > 0) r = mscclppPortChannelDevicePut(h, h->dst, dOff, h->src, sOff, bytes);
    } else if (bytes == 0) {
      r = mscclppPortChannelDeviceSignal(h);
      if (r == mscclppSuccess && op->code == MSCCLPP_PLAN_OP_PUT_WITH_SIGNAL_AND_FLUSH)
        r = mscclppPortChannelDeviceFlush(h);
    } else if (op->code == MSCCLPP_PLAN_OP_PUT_WITH_SIGNAL) {
      r = mscclppPortChannelDevicePutWithSignal(h, h->dst, dOff, h->src, sOff, bytes);
    } else {
      r = mscclppPortChannelDevicePutWithSignalAndFlush(h, h->dst, dOff, h->src, sOff, bytes);
    }
    if (r != mscclppSuccess) return 1;
  }
  return 0;
}

/* Wait until every packet of [pk, + bytes of data) carries `flag` (threads
 * stride over the packets). */
static __device__ int packetsArrived(const Launch& L, const uint8_t* pk, uint64_t bytes, uint32_t flag) {
  const mscclppLLPacket16* p = (const mscclppLLPacket16*)pk;
  const uint64_t n = mscclppPacketCount16(bytes);
  for (uint64_t i = threadIdx.x; i < n; i += blockDim.x) {
    uint64_t v;
    if (packetWait(L, &p[i], flag, &v) != mscclppSuccess) return 1;
  }
  return 0;
}

/* PUT_PACKETS and READ_PUT_PACKETS: packets into peers' scratch. */
static __device__ int opPutPackets(const Launch& L, const Blk& b, const mscclppPlanOp* op) {
  const uint32_t tid = threadIdx.x, nth = blockDim.x, flag = b.shape.flag;
  const int reads = op->code == MSCCLPP_PLAN_OP_READ_PUT_PACKETS;
  if (reads && op->channelType == MSCCLPP_PLAN_CHANNEL_PORT) {
    /* the proxy copies the packets as they are: all must have arrived */
    mscclppPlanRange sr = rangeOf(b, op, &op->operand[0]);
    if (__syncthreads_or(packetsArrived(L, addrOf(L, b, &op->operand[0], sr), sr.bytes, flag))) return 1;
  }
  for (int i = 0; i < op->nDst; i++) {
    const mscclppPlanOperand *s = &op->operand[reads ? 0 : i], *d = &op->operand[op->nSrc + i];
    mscclppPlanRange sr = rangeOf(b, op, s), dr = rangeOf(b, op, d);
    if (sr.bytes == 0) continue;
    if (op->channelType == MSCCLPP_PLAN_CHANNEL_PORT) { /* 2 packet bytes per data byte */
      if (tid == 0) {
        const mscclppPortChannelDeviceHandle* h = &L.port[op->ids[i]];
        if (mscclppPortChannelDevicePut(h, h->dst, regionOffOf(L, b, d, dr), h->src, regionOffOf(L, b, s, sr),
                                        2 * sr.bytes) != mscclppSuccess)
          return 1;
      }
      continue;
    }
    if (!reads) {
      mscclppPutPackets16(addrOf(L, b, d, dr), addrOf(L, b, s, sr), sr.bytes, tid, nth, flag);
      continue;
    }
    /* this rank's packets, each forwarded (one 16-byte store) once it arrived */
    const mscclppLLPacket16* in = (const mscclppLLPacket16*)addrOf(L, b, s, sr);
    mscclppLLPacket16* out = (mscclppLLPacket16*)addrOf(L, b, d, dr);
    const uint64_t n = mscclppPacketCount16(sr.bytes);
    for (uint64_t k = tid; k < n; k += nth) {
      uint64_t v;
      if (packetWait(L, &in[k], flag, &v) != mscclppSuccess) return 1;
      mscclppLL16Write(&out[k], (uint32_t)v, (uint32_t)(v >> 32), flag);
    }
  }
  return 0;
}

/* UNPACK_PACKETS: this rank's scratch packets (waited for) -> plain local. */
static __device__ int opUnpack(const Launch& L, const Blk& b, const mscclppPlanOp* op) {
  mscclppPlanRange sr = rangeOf(b, op, &op->operand[0]), dr = rangeOf(b, op, &op->operand[1]);
  return mscclppUnpackPackets16(addrOf(L, b, &op->operand[1], dr), addrOf(L, b, &op->operand[0], sr), sr.bytes,
                                threadIdx.x, blockDim.x, b.shape.flag, &L.wait) != mscclppSuccess;
}

/* acc op v for every element of a word W (uint4 or uint64_t) of elements
 * of mscclppDataType_t `type`. Not inlined: one copy of the 12 types'
 * code, called from the reduction loops. */
template <typename W>
static __device__ __noinline__ W wordReduce(W acc, W v, int type, int op) {
  switch (type) {
    case mscclppInt8:
      wordApply<int8_t, W>(acc, v, op);
      break;
    case mscclppUint8:
      wordApply<uint8_t, W>(acc, v, op);
      break;
    case mscclppInt32:
      wordApply<int32_t, W>(acc, v, op);
      break;
    case mscclppUint32:
      wordApply<uint32_t, W>(acc, v, op);
      break;
    case mscclppInt64:
      wordApply<int64_t, W>(acc, v, op);
      break;
    case mscclppUint64:
      wordApply<uint64_t, W>(acc, v, op);
      break;
    case mscclppFloat32:
      wordApply<float, W>(acc, v, op);
      break;
    case mscclppFloat64:
      wordApply<double, W>(acc, v, op);
      break;
#ifdef __CUDACC__
    case mscclppFloat16:
      wordApply<__half, W>(acc, v, op);
      break;
    case mscclppBfloat16:
      wordApply<__nv_bfloat16, W>(acc, v, op);
      break;
    case mscclppFloat8e4m3:
      wordApply<__nv_fp8_e4m3, W>(acc, v, op);
      break;
    default: /* mscclppFloat8e5m2 (the enqueue refuses any other type) */
      wordApply<__nv_fp8_e5m2, W>(acc, v, op);
      break;
#else
    default: /* the host play runs the types above only */
      break;
#endif
  }
  return acc;
}

/* The reductions: dst[0] = src[0] op src[1] op ... (any operand plain,
 * local or a peer's, or LL packets waited for), then the result to every
 * dst (plain, or packets with this execution's flag). 16-byte words when
 * no operand is packets and all are aligned, else 8-byte words (one
 * packet's data each). */
static __device__ int opReduce(const Launch& L, const Blk& b, const mscclppPlanOp* op) {
  const uint32_t tid = threadIdx.x, nth = blockDim.x, flag = b.shape.flag;
  const int nS = op->nSrc, nD = op->nDst;
  /* one array for both (sources, then destinations): the kernel's stack
   * frame must stay within CUDA's default stack limit (see planKernel) */
  uint8_t* ptr[MSCCLPP_PLAN_MAX_OPERANDS];
  uint8_t* const* const src = ptr;
  uint8_t* const* const dst = ptr + nS;
  uint64_t bytes = rangeOf(b, op, &op->operand[0]).bytes;
  if (bytes == 0) return 0;
  uint32_t pkS = 0, pkD = 0; /* bit i: operand i is packets */
  uintptr_t bits = (uintptr_t)bytes;
  for (int i = 0; i < nS + nD; i++) {
    const mscclppPlanOperand* o = &op->operand[i];
    uint8_t* p = addrOf(L, b, o, rangeOf(b, op, o));
    int pk = (o->flags & MSCCLPP_PLAN_OPERAND_PACKET) != 0;
    ptr[i] = p;
    if (i < nS)
      pkS |= (uint32_t)pk << i;
    else
      pkD |= (uint32_t)pk << (i - nS);
    bits |= (uintptr_t)p;
  }
  if ((pkS | pkD) == 0 && (bits & 15) == 0) {
    const uint64_t n = bytes / 16;
    for (uint64_t k = tid; k < n; k += nth) {
      uint4 acc = ((const uint4*)src[0])[k];
      for (int s = 1; s < nS; s++) {
        acc = wordReduce<uint4>(acc, ((const uint4*)src[s])[k], L.type, L.op);
      }
      for (int d = 0; d < nD; d++) ((uint4*)dst[d])[k] = acc;
    }
    return 0;
  }
  const uint64_t n = mscclppPacketCount16(bytes);
  for (uint64_t k = tid; k < n; k += nth) {
    const uint64_t at = k * MSCCLPP_LL16_DATA_BYTES;
    const uint32_t m = bytes - at < MSCCLPP_LL16_DATA_BYTES ? (uint32_t)(bytes - at) : MSCCLPP_LL16_DATA_BYTES;
    uint64_t acc = 0;
    for (int s = 0; s < nS; s++) {
      uint64_t v;
      if (pkS >> s & 1u) {
        if (packetWait(L, (const mscclppLLPacket16*)src[s] + k, flag, &v) != mscclppSuccess) return 1;
      } else {
        v = mscclppPacketGather(src[s] + at, m);
      }
      if (s == 0)
        acc = v;
      else
        acc = wordReduce<uint64_t>(acc, v, L.type, L.op); /* bytes past m are never stored */
    }
    for (int d = 0; d < nD; d++) {
      if (pkD >> d & 1u)
        mscclppLL16Write((mscclppLLPacket16*)dst[d] + k, (uint32_t)acc, (uint32_t)(acc >> 32), flag);
      else
        mscclppPacketScatter(dst[d] + at, acc, m);
    }
  }
  return 0;
}

/* SEM_ACQUIRE / SEM_RELEASE on the plan's semaphores (thread 0). */
static __device__ int opSemaphore(const Launch& L, const mscclppPlanOp* op) {
  if (threadIdx.x != 0) return 0;
  int64_t* sem = (int64_t*)(L.ctr + MSCCLPP_PLAN_GPU_CTR_EXEC + L.prog->nBlocks);
  for (int i = 0; i < op->nIds; i++) {
    unsigned long long* s = (unsigned long long*)&sem[op->ids[i]];
    if (op->code == MSCCLPP_PLAN_OP_SEM_RELEASE) {
      __threadfence(); /* the block's writes (ordered by the op's barrier) before the release */
      atomicAdd(s, 1ull);
      continue;
    }
    mscclppWaitState st = MSCCLPP_WAIT_STATE_INIT;
    for (;;) {
      long long v = (long long)mscclppLoadRelaxedGpu64((const uint64_t*)s);
      if (v > 0 && atomicCAS(s, (unsigned long long)v, (unsigned long long)(v - 1)) == (unsigned long long)v) break;
      if (mscclppWaitStep(&L.wait, &st, MSCCLPP_DEVICE_ERROR_TIMEOUT_SEMAPHORE, op->ids[i]) != mscclppSuccess)
        return 1;
    }
    __threadfence(); /* the releaser's writes before ours after */
  }
  return 0;
}

/* One channel op on channel `id`. */
/* The relaxed forms run as the full ones here. A plan signals relaxed
 * where MSCCL++'s executor needs no ordering: at a kernel's start, to say
 * "my buffers are ready", the input having been written before the kernel
 * began (stream order). Here the input area is written by this kernel's
 * stage-in, so a peer that reads it after that signal (allreduce-rsag,
 * reducescatter-direct) needs the release and the acquire. */
static __device__ int channelOp(const Launch& L, const mscclppPlanOp* op, uint16_t id) {
  const int port = op->channelType == MSCCLPP_PLAN_CHANNEL_PORT;
  switch (op->code) {
    case MSCCLPP_PLAN_OP_SIGNAL:
    case MSCCLPP_PLAN_OP_RELAXED_SIGNAL:
      if (port) return mscclppPortChannelDeviceSignal(&L.port[id]) != mscclppSuccess;
      mscclppMemoryChannelDeviceSignal(&L.mem[id]);
      return 0;
    case MSCCLPP_PLAN_OP_WAIT:
    case MSCCLPP_PLAN_OP_RELAXED_WAIT:
      if (port) return mscclppPortChannelDeviceWait(&L.port[id]) != mscclppSuccess;
      return mscclppMemoryChannelDeviceWait(&L.mem[id]) != mscclppSuccess;
    default: /* FLUSH */
      return mscclppPortChannelDeviceFlush(&L.port[id]) != mscclppSuccess;
  }
}

/* SIGNAL, WAIT (and relaxed), FLUSH: thread t takes ids[t], ids[t + n],
 * ... (n threads), the channels in parallel; a channel listed twice is
 * taken by the thread of its first place, as many times as listed (one
 * thread at a time per channel). A block of fewer threads than ids takes
 * them all too (a plan may list more channels than it has threads). */
static __device__ int opChannels(const Launch& L, const mscclppPlanOp* op) {
  for (uint32_t i = threadIdx.x; i < op->nIds; i += blockDim.x) {
    const uint16_t id = op->ids[i];
    int first = 1;
    for (uint32_t j = 0; j < i && first; j++) first = op->ids[j] != id;
    if (!first) continue;
    for (uint32_t j = i; j < op->nIds; j++)
      if (op->ids[j] == id && channelOp(L, op, id)) return 1;
  }
  return 0;
}

/* One op; nonzero in every thread when it failed. */
static __device__ int runOp(const Launch& L, const Blk& b, const mscclppPlanOp* op) {
  __syncthreads(); /* the previous op's writes, by every thread, before this one */
  const uint32_t tid = threadIdx.x, nth = blockDim.x;
  int bad = 0;
  switch (op->code) {
    case MSCCLPP_PLAN_OP_NOP:
      break;
    case MSCCLPP_PLAN_OP_BARRIER:
      return blocksBarrier(L, L.ctr + MSCCLPP_PLAN_GPU_CTR_BARRIER + op->barrier, op->arg0);
    case MSCCLPP_PLAN_OP_SIGNAL:
    case MSCCLPP_PLAN_OP_RELAXED_SIGNAL:
    case MSCCLPP_PLAN_OP_WAIT:
    case MSCCLPP_PLAN_OP_RELAXED_WAIT:
    case MSCCLPP_PLAN_OP_FLUSH:
      bad = opChannels(L, op);
      break;
    case MSCCLPP_PLAN_OP_PUT:
    case MSCCLPP_PLAN_OP_PUT_WITH_SIGNAL:
    case MSCCLPP_PLAN_OP_PUT_WITH_SIGNAL_AND_FLUSH:
      bad = opPut(L, b, op);
      break;
    case MSCCLPP_PLAN_OP_GET:
    case MSCCLPP_PLAN_OP_COPY:
      for (int i = 0; i < op->nSrc; i++) {
        const mscclppPlanOperand *s = &op->operand[i], *d = &op->operand[op->nSrc + i];
        mscclppPlanRange sr = rangeOf(b, op, s), dr = rangeOf(b, op, d);
        mscclppCopyDevice(addrOf(L, b, d, dr), addrOf(L, b, s, sr), sr.bytes < dr.bytes ? sr.bytes : dr.bytes, tid,
                          nth);
      }
      break;
    case MSCCLPP_PLAN_OP_COPY_PACKETS: {
      mscclppPlanRange sr = rangeOf(b, op, &op->operand[0]), dr = rangeOf(b, op, &op->operand[1]);
      mscclppPutPackets16(addrOf(L, b, &op->operand[1], dr), addrOf(L, b, &op->operand[0], sr), sr.bytes, tid, nth,
                          b.shape.flag);
      break;
    }
    case MSCCLPP_PLAN_OP_UNPACK_PACKETS:
      bad = opUnpack(L, b, op);
      break;
    case MSCCLPP_PLAN_OP_PUT_PACKETS:
    case MSCCLPP_PLAN_OP_READ_PUT_PACKETS:
      bad = opPutPackets(L, b, op);
      break;
    case MSCCLPP_PLAN_OP_REDUCE:
    case MSCCLPP_PLAN_OP_REDUCE_SEND:
    case MSCCLPP_PLAN_OP_READ_REDUCE:
    case MSCCLPP_PLAN_OP_READ_REDUCE_SEND:
    case MSCCLPP_PLAN_OP_REDUCE_PACKETS:
    case MSCCLPP_PLAN_OP_REDUCE_COPY_PACKETS:
    case MSCCLPP_PLAN_OP_REDUCE_SEND_PACKETS:
    case MSCCLPP_PLAN_OP_REDUCE_COPY_SEND_PACKETS:
      bad = opReduce(L, b, op);
      break;
    case MSCCLPP_PLAN_OP_SEM_ACQUIRE:
    case MSCCLPP_PLAN_OP_SEM_RELEASE:
      bad = opSemaphore(L, op);
      break;
    default: /* the loader refuses every other code */
      bad = 1;
      break;
  }
  return __syncthreads_or(bad);
}

/* The block's ops, pipelines unrolled into their iterations. */
static __device__ int runBlock(const Launch& L, Blk& b, const mscclppPlanOp* ops, uint32_t first, uint32_t n) {
  for (uint32_t pc = first; pc < first + n;) {
    const mscclppPlanOp* op = &ops[pc];
    if (op->code != MSCCLPP_PLAN_OP_PIPELINE) {
      if (runOp(L, b, op)) return 1;
      pc++;
      continue;
    }
    const uint64_t iters = mscclppPlanPipelineIterations(op, &b.shape);
    for (uint64_t it = 0; it < iters; it++) {
      b.window = it * op->arg0;
      b.unit = op->arg0;
      for (uint32_t k = 1; k <= op->nInner; k++)
        if (runOp(L, b, &ops[pc + k])) return 1;
    }
    b.window = 0;
    b.unit = UINT64_MAX;
    pc += 1u + op->nInner;
  }
  return 0;
}

/* ---- staging --------------------------------------------------------------------------- */

/* The caller's input into the input area, each block padded with zeros. */
static __device__ void stageIn(const Launch& L, uint64_t gtid, uint64_t gnth) {
  uint8_t* area = L.mine[MSCCLPP_PLAN_INPUT];
  const uint64_t B = L.blockBytes, P = L.paddedBytes;
  for (uint32_t k = 0; k < L.inBlocks; k++) {
    uint8_t* d = area + k * P;
    mscclppCopyDevice(d, L.send + k * B, B, (uint32_t)gtid, (uint32_t)gnth);
    for (uint64_t i = B + gtid; i < P; i += gnth) d[i] = 0;
  }
}

/* d[i] = s[i] / n for the `bytes` bytes of elements T (grid-strided). */
template <typename T>
static __device__ void divideOut(uint8_t* dst, const uint8_t* src, uint64_t bytes, int n, uint64_t gtid,
                                 uint64_t gnth) {
  const T* s = (const T*)src;
  T* d = (T*)dst;
  for (uint64_t i = gtid; i < bytes / sizeof(T); i += gnth) d[i] = Op<T>::divide(s[i], n);
}

/* divideOut for mscclppDataType_t `type`. */
static __device__ __noinline__ void divideOutAs(int type, uint8_t* d, const uint8_t* s, uint64_t bytes, int n,
                                                uint64_t gtid, uint64_t gnth) {
  switch (type) {
    case mscclppInt8:
      divideOut<int8_t>(d, s, bytes, n, gtid, gnth);
      break;
    case mscclppUint8:
      divideOut<uint8_t>(d, s, bytes, n, gtid, gnth);
      break;
    case mscclppInt32:
      divideOut<int32_t>(d, s, bytes, n, gtid, gnth);
      break;
    case mscclppUint32:
      divideOut<uint32_t>(d, s, bytes, n, gtid, gnth);
      break;
    case mscclppInt64:
      divideOut<int64_t>(d, s, bytes, n, gtid, gnth);
      break;
    case mscclppUint64:
      divideOut<uint64_t>(d, s, bytes, n, gtid, gnth);
      break;
    case mscclppFloat32:
      divideOut<float>(d, s, bytes, n, gtid, gnth);
      break;
    case mscclppFloat64:
      divideOut<double>(d, s, bytes, n, gtid, gnth);
      break;
#ifdef __CUDACC__
    case mscclppFloat16:
      divideOut<__half>(d, s, bytes, n, gtid, gnth);
      break;
    case mscclppBfloat16:
      divideOut<__nv_bfloat16>(d, s, bytes, n, gtid, gnth);
      break;
    case mscclppFloat8e4m3:
      divideOut<__nv_fp8_e4m3>(d, s, bytes, n, gtid, gnth);
      break;
    default: /* mscclppFloat8e5m2 */
      divideOut<__nv_fp8_e5m2>(d, s, bytes, n, gtid, gnth);
      break;
#else
    default: /* the host play runs the types above only */
      break;
#endif
  }
}

/* The output area out to the caller, divided by nranks for avg. */
static __device__ void stageOut(const Launch& L, uint64_t gtid, uint64_t gnth) {
  const uint8_t* area = L.mine[MSCCLPP_PLAN_OUTPUT];
  const uint64_t B = L.blockBytes, P = L.paddedBytes;
  for (uint32_t k = 0; k < L.outBlocks; k++) {
    if (!L.divide)
      mscclppCopyDevice(L.recv + k * B, area + k * P, B, (uint32_t)gtid, (uint32_t)gnth);
    else
      divideOutAs(L.type, L.recv + k * B, area + k * P, B, L.nranks, gtid, gnth);
  }
}

/* Block 0's last step, once every block's share of the output is out:
 * every linked peer has finished this execution before any rank's next
 * one touches a peer's region (plan_host.c's endBarrier says why). */
static __device__ int endBarrier(const Launch& L) {
  int bad = 0;
  for (int q = (int)threadIdx.x; q < L.nranks && !bad; q += (int)blockDim.x)
    if (L.linkedMask >> q & 1u) {
      mscclppMemoryChannelDeviceSignal(&L.link[q]);
      bad = mscclppMemoryChannelDeviceWait(&L.link[q]) != mscclppSuccess;
    }
  return __syncthreads_or(bad);
}

/* Block 0's part of the address trade (L.trade): this rank's input and
 * output as each linked peer maps them (0: in this rank's region) into
 * that peer's mailbox, then the peer met on the link channel (whose
 * release orders the slot's stores before the signal). A peer writes a
 * mailbox again only in its next call, after this rank's end barrier,
 * which every block of this rank passes after reading it. */
static __device__ int tradeAddresses(const Launch& L) {
  int bad = 0;
  for (int q = (int)threadIdx.x; q < L.nranks && !bad; q += (int)blockDim.x)
    if (L.linkedMask >> q & 1u) {
      volatile uint64_t* slot = (volatile uint64_t*)(L.base[q] + L.mailOff[q]) + 2 * L.rank;
      slot[0] = L.pub[q][0];
      slot[1] = L.pub[q][1];
      mscclppMemoryChannelDeviceSignal(&L.link[q]);
      bad = mscclppMemoryChannelDeviceWait(&L.link[q]) != mscclppSuccess;
    }
  return __syncthreads_or(bad);
}

/* Every block, after the grid sync that follows the trade: what the peers
 * put in this rank's mailbox. */
static __device__ void readMailbox(const Launch& L, Blk& b) {
  const volatile uint64_t* box = (const volatile uint64_t*)(L.region + L.mailOff[L.rank]);
  for (int q = 0; q < L.nranks; q++)
    for (int s = 0; s < 2; s++) b.traded[q][s] = (L.linkedMask >> q & 1u) ? box[2 * q + s] : 0;
}

/* ---- the kernel ------------------------------------------------------------------------ */

/* static: the host play (tests/plan/plan_gpu_play.cpp) compiles this file
 * too, and its program links the library, whose copy would clash */
static __global__ void __launch_bounds__(MSCCLPP_PLAN_GPU_MAX_THREADS) planKernel(const __grid_constant__ Launch L) {
  const mscclppPlanProgram* prog = L.prog;
  /* this block's count (every block of every rank counts alike), read by
   * every thread before thread 0 advances it */
  uint64_t* exec = L.ctr + MSCCLPP_PLAN_GPU_CTR_EXEC + blockIdx.x;
  const uint64_t e = *exec + 1;
  __syncthreads();
  if (threadIdx.x == 0) *exec = e;
  Blk b;
  b.shape = L.shape;
  b.shape.flag = (uint32_t)((e - 1) % 0xffffffffull) + 1u; /* 1, 2, ..., never 0 (buffers start zeroed) */
  b.shape.scratchOffset = (L.doubleScratch && (b.shape.flag & 1u) == 0) ? L.halfScratch : 0;
  b.rem = mscclppPlanProgramRemotes(prog);
  b.window = 0;
  b.unit = UINT64_MAX;
  const uint64_t gtid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x, gnth = (uint64_t)gridDim.x * blockDim.x;
  uint64_t* grid = L.ctr + MSCCLPP_PLAN_GPU_CTR_GRID;

  /* the staged input and the traded addresses are complete, everywhere,
   * after one grid sync */
  if (L.staged & (1u << MSCCLPP_PLAN_INPUT)) stageIn(L, gtid, gnth);
  if (L.trade && blockIdx.x == 0 && tradeAddresses(L)) return;
  if ((L.staged & (1u << MSCCLPP_PLAN_INPUT)) || L.trade)
    if (blocksBarrier(L, grid, gridDim.x)) return;
  for (int q = 0; q < MSCCLPP_PLAN_GPU_MAX_RANKS; q++) b.traded[q][0] = b.traded[q][1] = 0;
  if (L.trade) readMailbox(L, b);
  const mscclppPlanBlock* blk = &mscclppPlanProgramBlocks(prog)[blockIdx.x];
  if (runBlock(L, b, mscclppPlanProgramOps(prog), blk->firstOp, blk->nOps)) return;
  if (blocksBarrier(L, grid, gridDim.x)) return;
  if (L.staged & (1u << MSCCLPP_PLAN_OUTPUT)) {
    stageOut(L, gtid, gnth);
    if (blocksBarrier(L, grid, gridDim.x)) return;
  }
  if (blockIdx.x == 0) (void)endBarrier(L);
}

#endif /* MSCCLPP_SRC_COLL_PLAN_PLAN_GPU_INTERP_CUH_ */
