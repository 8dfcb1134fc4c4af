/* SPDX-License-Identifier: MIT */
/*
 * The GPU backend's send/recv kernel: channels through the receiver's
 * scratch or zero-copy pulls (coll_gpu_kernels.cuh: what the kernels share).
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

P2pKernelFn mscclppCollGpuP2pKernel(void) { return p2pKernel; }
