/* SPDX-License-Identifier: MIT */
/*
 * The GPU backend's send/recv kernels: small ops as LL packets into the
 * receiver's scratch (p2pLlOp), larger ones over channels through the
 * receiver's scratch or as zero-copy pulls (p2pKernel); a group whose ops are
 * all small runs p2pLlKernel (coll_gpu_kernels.cuh: what the kernels share).
 */
#include "coll/gpu/coll_gpu_kernels.cuh"

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

/* ---- small ops as LL packets ------------------------------------------------------- */

#define LL_PARTS MSCCLPP_COLL_GPU_P2PLL_PARTS
#define LL_PKTS MSCCLPP_COLL_GPU_P2PLL_PART_PKTS
#define LL_DEPTH MSCCLPP_COLL_GPU_P2PLL_DEPTH
/* Parts whose packets a thread loads together (a block serves several parts
 * where the lane has fewer blocks than the op has parts): one L2 round trip
 * per BATCH parts instead of one per part. p2pLlKernel takes LL_BATCH;
 * p2pKernel, capped at 64 registers, one (more would spill). */
#define LL_BATCH 4

/* Message m of rank `from`'s ring to rank `owner`, in owner's scratch. */
static __device__ __forceinline__ mscclppLLPacket16* p2pLlSlot(const Launch& L, int owner, int from, uint64_t m) {
  return (mscclppLLPacket16*)(L.scratch[owner] + MSCCLPP_COLL_GPU_P2PLL_OFF +
                              ((uint64_t)from * LL_DEPTH + m % LL_DEPTH) * MSCCLPP_COLL_GPU_P2PLL_SLOT);
}
static __device__ __forceinline__ mscclppLLPacket16* p2pLlHeader(mscclppLLPacket16* slot) {
  return (mscclppLLPacket16*)((uint8_t*)slot + MSCCLPP_COLL_GPU_P2PLL_HEADER_OFF);
}
/* ack[from][0 .. PARTS) in owner's flags: the messages of owner's ring to
 * `from` whose part p `from` has read. */
static __device__ __forceinline__ uint64_t* p2pLlAck(const Launch& L, int owner, int from) {
  return (uint64_t*)(L.scratch[owner] + MSCCLPP_COLL_GPU_P2PLL_ACK_OFF) + (uint64_t)from * LL_PARTS;
}
/* Packet q of a batch: part p0 + q * nb, the packet of thread t in it. */
static __device__ __forceinline__ uint64_t p2pLlPacket(uint32_t p0, int q, uint32_t nb, uint32_t t) {
  return (uint64_t)(p0 + (uint32_t)q * nb) * LL_PKTS + t;
}

/* Wait until the receiver has read every part of message `need` of this
 * ring (0: none to wait for): the slot it used is then free, header
 * included, which any of the receiver's blocks may read. A warp waits as
 * one: lane p < PARTS watches part p's ack (one 128-byte line), `seen` is
 * what it read; lane 0 keeps the wait's clock, its note and its verdict,
 * so that the warp leaves together. 0 when the wait failed. */
static __device__ int p2pLlCredit(const Launch& L, const uint64_t* ack, uint64_t need, uint64_t seen, int peer) {
  const uint32_t lane = threadIdx.x & 31u;
  mscclppWaitState w = MSCCLPP_WAIT_STATE_INIT;
  while (!__all_sync(0xffffffffu, seen >= need)) {
    const int bad = lane == 0 && collWaitStep(L, &w, need, peer, seen) != mscclppSuccess;
    if (__shfl_sync(0xffffffffu, bad, 0)) return 0;
    if (lane < LL_PARTS) seen = mscclppLoadRelaxedSys64(ack + lane);
  }
  if (lane == 0) mscclppWaitEnd(&L.wait, &w);
  return 1;
}

/* The sender's side of message m: each packet of its parts carries the
 * flag m with its 8 data bytes, written by one store into the receiver's
 * slot, so the receiver needs no other signal and no fence orders
 * anything; block 0 adds the header (the op's bytes, for a receive posted
 * larger than its send). The ack line and the data are loaded before m is
 * needed, so their latencies overlap the count's, and in steady state the
 * credit is already there (the receiver acked right after reading, DEPTH
 * messages ago). 1 when a wait failed. */
template <int BATCH>
static __device__ __forceinline__ int p2pLlSend(const Launch& L, int peer, const uint8_t* buf, uint64_t bytes,
                                                uint64_t m, uint32_t b, uint32_t nb) {
  const uint64_t npk = (bytes + 7) / 8;
  const uint32_t nparts = (uint32_t)((npk + LL_PKTS - 1) / LL_PKTS);
  const int aligned = ((uintptr_t)buf & 7) == 0;
  const uint64_t* ack = p2pLlAck(L, L.rank, peer);
  const uint32_t lane = threadIdx.x & 31u;
  uint64_t seen = lane < LL_PARTS ? mscclppLoadRelaxedSys64(ack + lane) : ~0ull;
  int credit = 0; /* warp-uniform */
  for (uint32_t t = threadIdx.x; t < LL_PKTS; t += blockDim.x)
    for (uint32_t p0 = b; p0 < nparts; p0 += BATCH * nb) {
      uint64_t v[BATCH];
#pragma unroll
      for (int q = 0; q < BATCH; q++) {
        const uint64_t i = p2pLlPacket(p0, q, nb, t);
        v[q] = p0 + q * nb < nparts && i < npk ? loadWord(buf, i * 8, bytes, aligned) : 0;
      }
      if (!credit) {
        if (!p2pLlCredit(L, ack, m > LL_DEPTH ? m - LL_DEPTH : 0, seen, peer)) return 1;
        credit = 1;
      }
      const uint32_t flag = (uint32_t)m;
      mscclppLLPacket16* slot = p2pLlSlot(L, peer, L.rank, m);
      if (t == 0 && p0 == 0) mscclppLL16Write(p2pLlHeader(slot), (uint32_t)bytes, (uint32_t)(bytes >> 32), flag);
#pragma unroll
      for (int q = 0; q < BATCH; q++) {
        const uint64_t i = p2pLlPacket(p0, q, nb, t);
        if (p0 + q * nb < nparts && i < npk) mscclppLL16Write(slot + i, (uint32_t)v[q], (uint32_t)(v[q] >> 32), flag);
      }
    }
  return 0;
}

/* The receiver's side of message m: each thread polls its packets of a
 * batch together (all loads before any check) until they carry flag m,
 * and stores their bytes. A packet past the end of a smaller send never
 * comes: the header, polled with them, gives the send's size, and those
 * bytes are left as they were (the last sent word's padding is zeros). 1
 * when a wait failed. */
template <int BATCH>
static __device__ __forceinline__ int p2pLlRecv(const Launch& L, int peer, uint8_t* buf, uint64_t bytes, uint64_t m,
                                                uint32_t b, uint32_t nb) {
  const uint32_t flag = (uint32_t)m;
  const uint64_t npk = (bytes + 7) / 8;
  const uint32_t nparts = (uint32_t)((npk + LL_PKTS - 1) / LL_PKTS);
  const int aligned = ((uintptr_t)buf & 7) == 0;
  mscclppLLPacket16* slot = p2pLlSlot(L, L.rank, peer, m);
  const mscclppLLPacket16* header = p2pLlHeader(slot);
  const int note = (threadIdx.x & 31u) == 0 ? peer : -1;
  uint64_t sent = ~0ull; /* packets of the send, once its header is seen */
  for (uint32_t t = threadIdx.x; t < LL_PKTS; t += blockDim.x)
    for (uint32_t p0 = b; p0 < nparts; p0 += BATCH * nb) {
      uint32_t missing = 0;
#pragma unroll
      for (int q = 0; q < BATCH; q++)
        if (p0 + q * nb < nparts && p2pLlPacket(p0, q, nb, t) < npk) missing |= 1u << q;
      mscclppWaitState w = MSCCLPP_WAIT_STATE_INIT;
      while (missing != 0) {
        mscclppLL16Raw raw[BATCH];
#pragma unroll
        for (int q = 0; q < BATCH; q++)
          if (missing & (1u << q)) raw[q] = mscclppLL16Load(slot + p2pLlPacket(p0, q, nb, t));
        const mscclppLL16Raw h = mscclppLL16Load(header);
#pragma unroll
        for (int q = 0; q < BATCH; q++) {
          uint64_t v;
          if ((missing & (1u << q)) && mscclppLL16Check(raw[q], flag, &v)) {
            storeWord(buf, p2pLlPacket(p0, q, nb, t) * 8, bytes, v, aligned);
            missing &= ~(1u << q);
          }
        }
        uint64_t hb;
        if (missing != 0 && sent == ~0ull && mscclppLL16Check(h, flag, &hb)) sent = (hb + 7) / 8;
#pragma unroll
        for (int q = 0; q < BATCH; q++)
          if (p2pLlPacket(p0, q, nb, t) >= sent) missing &= ~(1u << q);
        if (missing == 0) break;
        if (collWaitStep(L, &w, flag, note, MSCCLPP_WAIT_OBSERVED_UNKNOWN) != mscclppSuccess) return 1;
      }
      mscclppWaitEnd(&L.wait, &w);
    }
  return 0;
}

/* One op of a lane as message m of its pair's packet ring; block b of the
 * lane's nb serves parts b, b + nb, ... (b < PARTS). Every block of both
 * sides goes through every packet op of the lane, in order, whatever parts
 * it serves, so each keeps the count of messages (p2pLlCounters) and each
 * acks every part it serves for every message, an op with fewer parts
 * included: a sender waiting for part p's ack of message m - DEPTH always
 * gets it. The receiver acks after a block barrier, with release order:
 * its reads of the slot come before the sender may overwrite it. Waits are
 * for an earlier message of the ring (credit) or this one (packets); a
 * block goes through its lane's ops, packet and channel ones, in the order
 * they were posted, on both sides, so what a wait needs from the peer comes
 * from an op posted no later: no cycle, whatever the two sides' block counts
 * or how they grouped the ops into launches. Returns nonzero in every thread
 * when a wait failed. */
template <int BATCH>
static __device__ __forceinline__ int p2pLlOp(const Launch& L, int isSend, int peer, uint8_t* buf, uint64_t bytes,
                                              uint64_t m, uint32_t b, uint32_t nb) {
  const int failed =
      isSend ? p2pLlSend<BATCH>(L, peer, buf, bytes, m, b, nb) : p2pLlRecv<BATCH>(L, peer, buf, bytes, m, b, nb);
  if (__syncthreads_or(failed)) return 1;
  if (!isSend && threadIdx.x < LL_PARTS && threadIdx.x % nb == b) flagStore(L, p2pLlAck(L, peer, L.rank) + threadIdx.x, m);
  return 0;
}

/* p2pLlOp for p2pKernel, out of line: its loop keeps its own registers. */
static __device__ __noinline__ int p2pLlOpCall(const Launch& L, int isSend, int peer, uint8_t* buf, uint64_t bytes,
                                               uint64_t m, uint32_t b, uint32_t nb) {
  return p2pLlOp<1>(L, isSend, peer, buf, bytes, m, b, nb);
}

/* A lane's count of packet messages (coll_gpu.h: one copy per part). A
 * block b < PARTS reads its part b's copy when it starts (the messages
 * before this launch), numbers its packet ops from there, and, after its
 * last barrier, writes the copies of the parts it serves: each copy has
 * one writer per launch, and the next launch's blocks read them after this
 * kernel (stream order), so graphs replay. */
static __device__ __forceinline__ uint64_t* p2pLlCounters(const Launch& L, int isSend, int peer) {
  return isSend ? L.state->p2pLlSent[peer] : L.state->p2pLlRecv[peer];
}
static __device__ __forceinline__ void p2pLlEnd(uint64_t* counters, uint64_t base, uint32_t n, uint32_t b,
                                                uint32_t nb) {
  if (n != 0 && threadIdx.x < LL_PARTS && threadIdx.x % nb == b) counters[threadIdx.x] = base + n;
}

/* A group whose ops all travel as packets: a lane per (direction, peer),
 * at most PARTS blocks each (p2pGrid); no shared memory, no barrier but
 * the one per op. */
__global__ void __launch_bounds__(MSCCLPP_COLL_GPU_P2PLL_THREADS)
    p2pLlKernel(const __grid_constant__ Launch L, const __grid_constant__ struct mscclppCollGpuP2pLlList P) {
  mscclppCollTraceBlock traceBlock(L.trace);
  streamOrderWait();
  traceBlock.restart();
  uint32_t lane = P.nlanes;
  for (uint32_t i = 0; i < P.nlanes; i++)
    if (blockIdx.x >= P.lanes[i].first && blockIdx.x < (uint32_t)P.lanes[i].first + P.lanes[i].nblocks) lane = i;
  if (lane == P.nlanes) return;
  const int isSend = P.lanes[lane].isSend, peer = P.lanes[lane].peer;
  const uint32_t nb = P.lanes[lane].nblocks, b = blockIdx.x - P.lanes[lane].first;
  if (b >= LL_PARTS) return;
  uint64_t* const counters = p2pLlCounters(L, isSend, peer);
  const uint64_t base = counters[b];
  uint32_t n = 0;
  for (uint32_t o = 0; o < P.nops; o++) {
    if (P.ops[o].isSend != isSend || P.ops[o].peer != peer) continue;
    if (p2pLlOp<LL_BATCH>(L, isSend, peer, P.ops[o].buf, P.ops[o].bytes, base + ++n, b, nb)) return;
  }
  p2pLlEnd(counters, base, n, b, nb);
}

/* ---- channels: larger ops ------------------------------------------------------------ */

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
 * each written by the one block that serves the channel, so graphs replay.
 * An op marked ll travels as packets instead (p2pLlOp, blocks b < PARTS of
 * the lane, in its place among the ops); its ring and counters are the pair's
 * packet ring, apart from the channels', so mixing the two on a pair keeps
 * both in step. */
__global__ void __launch_bounds__(1024)
    p2pKernel(const __grid_constant__ Launch L, const __grid_constant__ struct mscclppCollGpuP2pList P) {
  mscclppCollTraceBlock traceBlock(L.trace);
  streamOrderWait();
  traceBlock.restart();
  __shared__ int lane;
  __shared__ uint64_t msg[P2P_CH];   /* messages of the channels this block serves */
  __shared__ uint64_t lastZ[P2P_CH]; /* sender: its last zero-copy message per channel (0: none) */
  __shared__ uint64_t cur, zc, zsrc; /* the message at hand (set by thread 0 before a barrier) */
  __shared__ uint64_t llBase;        /* packet messages of the lane before this launch (p2pLlCounters) */
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
  if (threadIdx.x == 0 && b < LL_PARTS) llBase = p2pLlCounters(L, isSend, peer)[b];
  __syncthreads();
  /* The lane's ops in their order, packet ops among channel ops: the two
   * sides may group the same ops differently (one launch here, several
   * there), and only program order keeps every wait pointing at an earlier
   * op of the pair (running a launch's packet ops first would deadlock a
   * receiver whose group held a large op the sender's earlier launch was
   * still sending). A packet op is a call (p2pLlOpCall) so that its
   * registers stay out of the channel path's, capped at 64 by 1024-thread
   * blocks. */
  uint32_t llN = 0; /* packet ops of the lane so far (blocks b < PARTS only) */
  const uint64_t chunk = P.chunkBytes;
  for (uint32_t o = 0; o < P.nops; o++) {
    if (P.ops[o].isSend != isSend || P.ops[o].peer != peer) continue;
    if (P.ops[o].ll) {
      if (b < LL_PARTS && p2pLlOpCall(L, isSend, peer, P.ops[o].buf, P.ops[o].bytes, llBase + ++llN, b, nb)) return;
      continue;
    }
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
  if (b < LL_PARTS) p2pLlEnd(p2pLlCounters(L, isSend, peer), llBase, llN, b, nb);
}

P2pKernelFn mscclppCollGpuP2pKernel(void) { return p2pKernel; }
P2pLlKernelFn mscclppCollGpuP2pLlKernel(void) { return p2pLlKernel; }
