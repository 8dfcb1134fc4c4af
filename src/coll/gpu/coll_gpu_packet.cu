/* SPDX-License-Identifier: MIT */
/*
 * The GPU backend's LL packet allreduces: in one phase on three grids, and
 * in two phases (packet2) with slots for a whole message
 * (coll_gpu_kernels.cuh: what the kernels share).
 */
#include "coll/gpu/coll_gpu_kernels.cuh"

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
  mscclppCollTraceBlock traceBlock(L.trace);
  streamOrderWait();
  traceBlock.restart();
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

static const KernelFn packetKernels[mscclppNumTypes] = MSCCLPP_COLL_TYPE_TABLE(packetAllReduceKernel);
static const KernelFn packet2Kernels[mscclppNumTypes] = MSCCLPP_COLL_TYPE_TABLE(packet2AllReduceKernel);

KernelFn mscclppCollGpuPacketKernel(int type) { return packetKernels[type]; }
KernelFn mscclppCollGpuPacket2Kernel(int type) { return packet2Kernels[type]; }
