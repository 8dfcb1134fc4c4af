/* SPDX-License-Identifier: MIT */
/*
 * The GPU backend's LL packet collectives: allreduce, reduce-scatter,
 * allgather and all-to-all in one step on three grids (one set of slots and
 * round counters per grid, shared by the four), and allreduce in two phases
 * (packet2) with slots for a whole message (coll_gpu_kernels.cuh: what the
 * kernels share).
 */
#include "coll/gpu/coll_gpu_kernels.cuh"

/* ---- the one-step packet kernels' slots and polls ---------------------------------- */

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

/* ---- one step of LL packets: allreduce, reduce-scatter, allgather, all-to-all ---- */

/* The rounds of a one-step packet call that puts `npk` packets into every
 * slot it writes (the message's words, or one block's: the same count for
 * every slot and every rank). Chunk c goes in round base + c + 1 (flag: its
 * low 32 bits, parity: its lowest bit) and carries packets [c * per, c * per
 * + n) of the message; the block's counter is the grid's own (coll_gpu.h),
 * advanced by the block alone at the end.
 *
 * Why two parities are enough: a thread writes a slot position again two
 * rounds after it wrote it last, which is safe once the peer's thread that
 * reads that position has read it. Every packet kernel of a communicator
 * uses the grid of its size class and these loops, so packet index i of a
 * chunk belongs to thread i % threads in every round of every call, on every
 * rank, and that peer thread's packet of the round between says it is done:
 * it wrote it after its reads of the round before. Two rules keep that word
 * coming. Within a call, every chunk keeps the threads of its first chunk
 * busy (`busy`: a shorter last chunk is padded with packets that carry only
 * the flag, written and polled like the others): a thread with a packet in
 * round r but none in round r + 1 would wait for no word of the peer's
 * thread, the rest of the grid could end the call, and the next call's round
 * r + 2 could overwrite the position before the peer's thread read it (the
 * padding costs at most one packet per thread and peer, in a call of several
 * chunks only). Between calls, stream order: a call's kernel starts after
 * the rank's previous one ended, which had read packets of its last round
 * from every peer, which the peer's kernel wrote after its own previous
 * kernel ended. */
struct LlRounds {
  uint64_t* counter; /* this block's round counter of the grid */
  uint64_t base;     /* its value before the call */
  uint64_t npk;      /* packets per slot, in the whole call */
  uint64_t per;      /* packets per slot and chunk: what a slot holds */
  uint64_t nchunks;
  uint64_t busy; /* indices every chunk goes through at least: those of the first chunk that have a thread */
};

static __device__ __forceinline__ LlRounds llRounds(const Launch& L, uint64_t bytes) {
  LlRounds R;
  R.counter = L.llGrid == MSCCLPP_COLL_GPU_LL_SMALL ? &L.state->llRoundSmall
              : L.llGrid == MSCCLPP_COLL_GPU_LL_MID ? &L.state->llRoundMid[blockIdx.x]
                                                    : &L.state->llRound[blockIdx.x];
  R.base = *R.counter;
  R.npk = (bytes + 7) / 8;
  R.per = llSlotSize(L) / 16;
  R.nchunks = (R.npk + R.per - 1) / R.per;
  const uint64_t first = R.npk < R.per ? R.npk : R.per;
  const uint64_t nth = (uint64_t)gridDim.x * blockDim.x;
  R.busy = first < nth ? first : nth;
  return R;
}

/* Chunk c of R: the flag and parity of its round, its first packet p0, its
 * n packets of data, and the m >= n indices the threads go through (those
 * from n on are padding). */
struct LlChunk {
  uint32_t flag;
  int parity;
  uint64_t p0, n, m;
};

static __device__ __forceinline__ LlChunk llChunk(const LlRounds& R, uint64_t c) {
  LlChunk C;
  const uint64_t round = R.base + c + 1;
  C.flag = (uint32_t)round;
  C.parity = (int)(round & 1);
  C.p0 = c * R.per;
  C.n = R.npk - C.p0 < R.per ? R.npk - C.p0 : R.per;
  C.m = C.n > R.busy ? C.n : R.busy;
  return C;
}

/* The word at packet index i of chunk C of a buffer of `bytes` bytes
 * (0 for padding). */
static __device__ __forceinline__ uint64_t llWordOf(const Launch& L, const LlChunk& C, const uint8_t* p, uint64_t i,
                                                    uint64_t bytes) {
  return i < C.n ? loadWord(p, (C.p0 + i) * 8, bytes, L.vec16) : 0;
}

/* Chunk C's packets from this rank to every peer's slot [me]: to rank q
 * the words of `in` + q * inStride (inStride 0: the same words to all),
 * `bytes` bytes from there; thread tid of nth sends indices tid, tid + nth,
 * ... of the chunk, padding included. */
static __device__ __forceinline__ void llSend(const Launch& L, const LlChunk& C, const uint8_t* in, uint64_t inStride,
                                              uint64_t bytes, uint64_t tid, uint64_t nth) {
  const int k = L.nranks, me = L.rank;
  for (uint64_t i = tid; i < C.m; i += nth) {
    uint64_t v = inStride == 0 ? llWordOf(L, C, in, i, bytes) : 0;
    for (int q = 0; q < k; q++) {
      if (q == me) continue;
      if (inStride != 0) v = llWordOf(L, C, in + (uint64_t)q * inStride, i, bytes);
      mscclppLL16Write(llSlot(L, q, C.parity, me) + i, (uint32_t)v, (uint32_t)(v >> 32), C.flag);
    }
  }
}

/* LL16 one-step allreduce and reduce-scatter, chunked through the slots
 * (LlRounds): for each chunk, my words for rank q -- allreduce: my input;
 * reduce-scatter: my input's block q -- go to its slot [me], then I reduce
 * (in rank order) my own words -- my input, or its block `me` -- with the
 * peers' packets in my slots. Rank order is the direct kernel's too (its
 * reduceToAll takes the inputs in rank order), so both give the same bits.
 * `count` is the output's elements (reduce-scatter: a block's). In place
 * (reduce-scatter: my output is my input's block `me`) needs nothing: each
 * output word is written by the thread that loaded it, after it did. */
template <typename T>
__global__ void __launch_bounds__(MSCCLPP_COLL_GPU_PACKET_THREADS, 1) packetReduceKernel(const __grid_constant__ Launch L) {
  mscclppCollTraceBlock traceBlock(L.trace);
  streamOrderWait();
  traceBlock.restart();
  const int k = L.nranks, me = L.rank;
  const uint64_t bytes = L.count * sizeof(T);
  const LlRounds R = llRounds(L, bytes);
  const uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const uint64_t nth = (uint64_t)gridDim.x * blockDim.x;
  const uint64_t inStride = L.kind == MSCCLPP_COLL_REDUCESCATTER ? bytes : 0; /* of the input's blocks */
  const uint8_t* in = L.send[me];
  const uint8_t* inMine = in + (uint64_t)me * inStride;
  uint8_t* out = L.recv[me];
  int failed = 0;
  for (uint64_t c = 0; c < R.nchunks && !failed; c++) {
    const LlChunk C = llChunk(R, c);
    llSend(L, C, in, inStride, bytes, tid, nth);
    for (uint64_t i = tid; i < C.m && !failed; i += nth) {
      const uint64_t mine = llWordOf(L, C, inMine, i, bytes);
      uint64_t acc = 0;
      if (!llReduceArrived<T>(L, llSlot(L, me, C.parity, 0), R.per, i, C.flag, mine, &acc)) {
        failed = 1;
        break;
      }
      if (i >= C.n) continue; /* padding */
      if (L.op == mscclppAvg) wordDivide<T, uint64_t>(acc, k);
      storeWord(out, (C.p0 + i) * 8, bytes, acc, L.vec16);
    }
  }
  /* Each block advances its own copy of the round counter (coll_gpu.h). */
  if (__syncthreads_or(failed)) return;
  if (threadIdx.x == 0) *R.counter = R.base + R.nchunks;
}

/* LL16 one-step allgather and all-to-all, on bytes (`count` is a block's
 * bytes: what one rank sends one peer; the element type does not matter):
 * for each chunk, my block for each peer -- allgather: my input; all-to-all:
 * my input's block q for rank q -- goes to its slot [me], then I copy my own
 * block and unpack each peer's packets into its block of my output. In
 * place (allgather: my input is my output's block `me`; all-to-all: my
 * input is my output) needs no staging: my own block is then where it
 * belongs, and each word of the other blocks is written by the thread that
 * loaded the input's word at that place to send it, after it did. */
__global__ void __launch_bounds__(MSCCLPP_COLL_GPU_PACKET_THREADS, 1) packetCopyKernel(const __grid_constant__ Launch L) {
  mscclppCollTraceBlock traceBlock(L.trace);
  streamOrderWait();
  traceBlock.restart();
  const int k = L.nranks, me = L.rank;
  const uint64_t bytes = L.count;
  const LlRounds R = llRounds(L, bytes);
  const uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const uint64_t nth = (uint64_t)gridDim.x * blockDim.x;
  const uint64_t inStride = L.kind == MSCCLPP_COLL_ALLTOALL ? bytes : 0; /* of the input's blocks */
  const uint8_t* in = L.send[me];
  uint8_t* out = L.recv[me];
  const uint8_t* inMine = in + (uint64_t)me * inStride;
  uint8_t* outMine = out + (uint64_t)me * bytes;
  int failed = 0;
  for (uint64_t c = 0; c < R.nchunks && !failed; c++) {
    const LlChunk C = llChunk(R, c);
    llSend(L, C, in, inStride, bytes, tid, nth);
    const mscclppLLPacket16* slot0 = llSlot(L, me, C.parity, 0);
    for (uint64_t i = tid; i < C.m && !failed; i += nth) {
      const uint64_t off = (C.p0 + i) * 8;
      if (i < C.n && inMine != outMine) storeWord(outMine, off, bytes, loadWord(inMine, off, bytes, L.vec16), L.vec16);
      if (k > 2 && k <= LL_POLL_TOGETHER) { /* every peer's packet at once */
        uint64_t got[LL_POLL_TOGETHER];
        if (!llPollTogether(L, slot0, R.per, i, C.flag, llPeers(k, me), got)) {
          failed = 1;
          break;
        }
        if (i >= C.n) continue; /* padding */
#pragma unroll
        for (int q = 0; q < LL_POLL_TOGETHER; q++)
          if (q < k && q != me) storeWord(out + (uint64_t)q * bytes, off, bytes, got[q], L.vec16);
        continue;
      }
      for (int q = 0; q < k; q++) {
        uint64_t v = 0;
        if (q == me) continue;
        if (!llPollOne(L, slot0 + q * R.per + i, C.flag, (threadIdx.x & 31u) == 0 ? q : -1, &v)) {
          failed = 1;
          break;
        }
        if (i < C.n) storeWord(out + (uint64_t)q * bytes, off, bytes, v, L.vec16);
      }
    }
  }
  if (__syncthreads_or(failed)) return;
  if (threadIdx.x == 0) *R.counter = R.base + R.nchunks;
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
  mscclppCollTraceBlock traceBlock(L.trace);
  streamOrderWait();
  traceBlock.restart();
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

#ifdef __CUDACC__ /* (a host compiler plays the bodies above: tests/collgpu/packet_protocol_host.cpp) */
static const KernelFn packetKernels[mscclppNumTypes] = MSCCLPP_COLL_TYPE_TABLE(packetReduceKernel);
static const KernelFn packet2Kernels[mscclppNumTypes] = MSCCLPP_COLL_TYPE_TABLE(packet2AllReduceKernel);

KernelFn mscclppCollGpuPacketKernel(int type) { return packetKernels[type]; }
KernelFn mscclppCollGpuPacketCopyKernel(void) { return packetCopyKernel; }
KernelFn mscclppCollGpuPacket2Kernel(int type) { return packet2Kernels[type]; }
#endif
