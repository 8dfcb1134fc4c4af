/* SPDX-License-Identifier: MIT */
/*
 * The GPU backend's shared definitions: what coll_gpu.c (host, C) passes to
 * the kernels (coll_gpu_kernels.cuh lists their files), and the layout of
 * each rank's scratch.
 *
 * Every rank owns one scratch allocation of device memory that every other
 * rank maps (a memory channel per peer); it holds
 *   flags   barrier flags   bar[block][rank]   (written by rank `rank`'s block)
 *           (two words per rank unused: the old send/recv counters)
 *           p2pll acks: ack[rank][part] (written by rank `rank`)
 *           pointers ptr[rank]  (direct kernels: rank `rank`'s buffers)
 *           counts   a2av[rank] (alltoallv: rank `rank`'s input, as the
 *                    owner maps it, and its count and displacement for
 *                    the owner)
 *   p2pll   send/recv as LL16 packets: MAX_RANKS x P2PLL_DEPTH slots (slot
 *           (q, j): message j of rank q's ring to the owner)
 *   ll      LL16 packets, two parities x MAX_RANKS slots (slot q: from rank q)
 *   p2p     nranks slots (slot q: data from rank q), P2P_CHANNELS x
 *           P2P_DEPTH chunks each
 *   ll2     LL16 packets of the two-phase allreduce: two parities x two
 *           phases x nranks slots (slot q: from rank q); a parity's half
 *           holds the largest slots, a call packs its slots at the start
 *           of its half (slots as large as its share)
 *   p2pctl  send/recv control words, nranks x P2P_PEER_CTL_BYTES (below)
 * Counters only grow (epochs, rounds, chunk numbers), so nothing is reset
 * between calls; their running values live in mscclppCollGpuDevState in
 * device memory, so a CUDA graph replays correctly.
 *
 * Algorithms ("direct": zero-copy; every rank's user buffers are mapped into
 * every other rank through CUDA IPC by the peers' export services, and the
 * kernels trade the mapped addresses at their first barrier, see
 * coll_gpu_export.c):
 *   allreduce/packet   one kernel, LL16 packets: every rank writes its input
 *                      into every peer's scratch, then reduces its own copy;
 *                      chunked through the LL slots for any size
 *   allgather/packet, reducescatter/packet, alltoall/packet
 *                      the same step with blocks: rank r writes its input
 *                      (allgather) or its input's block q (the others) into
 *                      rank q's slot r, then copies or reduces (in rank
 *                      order) what arrived; one slot's message is a block,
 *                      so a block of B bytes moves as an allreduce of B
 *                      does. The four share the grids, slots and round
 *                      counters (see LlRounds, coll_gpu_packet.cu), and use
 *                      only this rank's buffers: no export, no barrier
 *   allreduce/packet2  two phases of LL16 packets: rank r sends share q of its
 *                      input to rank q; rank q reduces its share and sends the
 *                      result to every peer (each rank moves 2(k-1)/k of the
 *                      data as packets, against k-1 times for packet); the
 *                      whole message fits the ll2 slots (no chunks)
 *   allreduce/rsag     rank r reduces chunk r of all inputs and writes it into
 *                      every output (reduce-scatter and allgather fused:
 *                      each byte read once and written once)
 *   allgather/direct   rank r writes its input into every output
 *   reducescatter/direct, reduce/direct, broadcast/direct (chunk r of the
 *                      root's input to every output), alltoall/direct (pull)
 *   alltoallv/direct   pull, with the counts traded at the first barrier
 *                      (the a2av slots): every block learns the whole column
 *                      and packs it itself; the grid is the same for every
 *                      call, as no host knows the sizes
 *   sendrecv           per (sender, receiver) pair MSCCLPP_COLL_GPU_P2P_CHANNELS
 *                      channels, each a ring of MSCCLPP_COLL_GPU_P2P_DEPTH
 *                      messages (ready at the receiver, ack at the sender,
 *                      message numbers that only grow). A message is a
 *                      chunk of data in the receiver's scratch, or, where
 *                      the receiver maps the sender's buffer, a pointer to
 *                      it: the receiver then pulls the channel's share
 *                      straight from the sender's buffer (zero-copy). The
 *                      sender chooses per send, the receiver follows what
 *                      each message says; the lanes (direction, peer) of a
 *                      group share the grid (see p2pKernel). Sends and
 *                      receives of at most MSCCLPP_COLL_P2P_LL_MAX bytes
 *                      (the smallest of the ranks' values, at most
 *                      P2PLL_CAP) travel as LL16 packets instead, a ring of
 *                      P2PLL_DEPTH messages per (sender, receiver) in the
 *                      receiver's p2pll slots (see p2pLlOp): no ready flag,
 *                      no fence, so a small send/recv costs what a one-shot
 *                      packet allreduce does
 * A direct kernel is: barrier with every peer (their inputs are ready),
 * work, barrier (every peer is done with this rank's buffers).
 */
#ifndef MSCCLPP_SRC_COLL_COLL_GPU_H_
#define MSCCLPP_SRC_COLL_COLL_GPU_H_

#include <stddef.h>
#include <stdint.h>

#include "coll/coll_trace.h"
#include "mscclpp/device.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MSCCLPP_COLL_GPU_MAX_RANKS 8
/* Threads per block of the LL-packet allreduce (its kernel's launch bound). */
#define MSCCLPP_COLL_GPU_PACKET_THREADS 512u
#define MSCCLPP_COLL_GPU_MAX_BLOCKS 128
#define MSCCLPP_COLL_GPU_MAX_P2P 64

/* Scratch layout (byte offsets). */
#define MSCCLPP_COLL_GPU_BAR_OFF 0
#define MSCCLPP_COLL_GPU_READY_OFF (MSCCLPP_COLL_GPU_MAX_BLOCKS * MSCCLPP_COLL_GPU_MAX_RANKS * 8)
#define MSCCLPP_COLL_GPU_ACK_OFF (MSCCLPP_COLL_GPU_READY_OFF + MSCCLPP_COLL_GPU_MAX_RANKS * 8)
/* pointer slots: ptr[rank] = {send, recv}, rank `rank`'s buffers as mapped
 * in the owner of the scratch (written by the direct kernels' first
 * barrier, coll_gpu_direct.cu) */
#define MSCCLPP_COLL_GPU_PTR_OFF (MSCCLPP_COLL_GPU_ACK_OFF + MSCCLPP_COLL_GPU_MAX_RANKS * 8)
#define MSCCLPP_COLL_GPU_FLAGS_BYTES 16384
/* The one-step packet kernels (allreduce, reduce-scatter, allgather,
 * all-to-all) run on three grids, chosen by the bytes one slot receives per
 * call (an allreduce's input, a block of the others'); each grid has its own
 * LL slots and round counters, which every kernel on it shares (a packet
 * index must map to the same thread in every round that uses a slot, so
 * grids cannot share them):
 *   small  one block, messages up to 4 KiB
 *   mid    at most 16 blocks, up to 64 KiB (more blocks cost time here)
 *   big    an SM's worth per block, above (more blocks buy bandwidth) */
#define MSCCLPP_COLL_GPU_LLSMALL_OFF MSCCLPP_COLL_GPU_FLAGS_BYTES
#define MSCCLPP_COLL_GPU_LLSMALL_SLOT 16384
#define MSCCLPP_COLL_GPU_LLMID_OFF \
  (MSCCLPP_COLL_GPU_LLSMALL_OFF + 2 * MSCCLPP_COLL_GPU_MAX_RANKS * MSCCLPP_COLL_GPU_LLSMALL_SLOT)
#define MSCCLPP_COLL_GPU_LLMID_SLOT 131072
/* Send/recv as LL16 packets (p2pLlOp, coll_gpu_p2p.cu). An op of B bytes
 * is one message of its pair's ring, cut into parts of P2PLL_PART bytes
 * (part p: block p % nblocks of the lane, on either side, so the two sides
 * need not have the same grid). A slot holds the largest message as
 * packets (twice its bytes), then a header packet (the sender's byte count)
 * on its own 128-byte line. The region follows the mid LL slots so that a
 * small call touches the first pages of the scratch, as the allreduce does;
 * it is sized for MAX_RANKS so that the later offsets stay constants. */
#define MSCCLPP_COLL_GPU_P2PLL_CAP 65536u /* the largest op; MSCCLPP_COLL_P2P_LL_MAX is clamped to it */
#define MSCCLPP_COLL_GPU_P2PLL_PART 4096u /* 512 packets: one per thread of a P2PLL_THREADS block */
#define MSCCLPP_COLL_GPU_P2PLL_PARTS (MSCCLPP_COLL_GPU_P2PLL_CAP / MSCCLPP_COLL_GPU_P2PLL_PART)
#define MSCCLPP_COLL_GPU_P2PLL_PART_PKTS (MSCCLPP_COLL_GPU_P2PLL_PART / 8u)
#define MSCCLPP_COLL_GPU_P2PLL_DEPTH 4u
#define MSCCLPP_COLL_GPU_P2PLL_HEADER_OFF ((uint64_t)2 * MSCCLPP_COLL_GPU_P2PLL_CAP)
#define MSCCLPP_COLL_GPU_P2PLL_SLOT (MSCCLPP_COLL_GPU_P2PLL_HEADER_OFF + 128u)
#define MSCCLPP_COLL_GPU_P2PLL_OFF \
  (MSCCLPP_COLL_GPU_LLMID_OFF + 2 * MSCCLPP_COLL_GPU_MAX_RANKS * MSCCLPP_COLL_GPU_LLMID_SLOT)
#define MSCCLPP_COLL_GPU_LL_OFF                                                                         \
  (MSCCLPP_COLL_GPU_P2PLL_OFF +                                                                         \
   (uint64_t)MSCCLPP_COLL_GPU_MAX_RANKS * MSCCLPP_COLL_GPU_P2PLL_DEPTH * MSCCLPP_COLL_GPU_P2PLL_SLOT)
/* Threads per block of the send/recv kernel when every op of the group
 * travels as packets (p2pLlKernel), and the most ops it takes: a send and
 * a receive with every rank (larger groups run p2pKernel, which takes
 * packet ops too). */
#define MSCCLPP_COLL_GPU_P2PLL_THREADS 512u
#define MSCCLPP_COLL_GPU_P2PLL_MAX_OPS (2 * MSCCLPP_COLL_GPU_MAX_RANKS)
/* The regions after the big grid's LL slots, for k ranks and the slot sizes
 * of mscclppCollGpuLaunch: p2p (k slots), then ll2 (4k slots), then the end
 * of the scratch. */
#define MSCCLPP_COLL_GPU_P2P_OFF(k, llSlot) (MSCCLPP_COLL_GPU_LL_OFF + 2 * (uint64_t)(k) * (llSlot))
#define MSCCLPP_COLL_GPU_LL2_OFF(k, llSlot, p2pSlot) (MSCCLPP_COLL_GPU_P2P_OFF(k, llSlot) + (uint64_t)(k) * (p2pSlot))
/* send/recv control words, after the ll2 slots: per peer q, channel c
 *   ctl  64 bytes {ready, unused, desc[DEPTH] of {zero-copy, source}}:
 *        messages from rank q on channel c (written by q)
 *   ack  8 bytes after the ctl array: messages rank q took from this
 *        rank on channel c (written by q) */
#define MSCCLPP_COLL_GPU_P2P_CHANNELS 64
#define MSCCLPP_COLL_GPU_P2P_DEPTH 2
#define MSCCLPP_COLL_GPU_P2P_CTL_BYTES 64
#define MSCCLPP_COLL_GPU_P2P_PEER_CTL_BYTES \
  (MSCCLPP_COLL_GPU_P2P_CHANNELS * (MSCCLPP_COLL_GPU_P2P_CTL_BYTES + 8))
#define MSCCLPP_COLL_GPU_P2PCTL_OFF(k, llSlot, p2pSlot, ll2Slot) \
  (MSCCLPP_COLL_GPU_LL2_OFF(k, llSlot, p2pSlot) + 4 * (uint64_t)(k) * (ll2Slot))
#define MSCCLPP_COLL_GPU_SCRATCH_BYTES(k, llSlot, p2pSlot, ll2Slot) \
  (MSCCLPP_COLL_GPU_P2PCTL_OFF(k, llSlot, p2pSlot, ll2Slot) + (uint64_t)(k) * MSCCLPP_COLL_GPU_P2P_PEER_CTL_BYTES)
MSCCLPP_STATIC_ASSERT(16 + 16 * MSCCLPP_COLL_GPU_P2P_DEPTH <= MSCCLPP_COLL_GPU_P2P_CTL_BYTES,
                      "a channel's ready word and descriptors fit its control line");

/* count slots: a2av[rank] = {input, count, displacement, unused} */
#define MSCCLPP_COLL_GPU_A2AV_OFF (MSCCLPP_COLL_GPU_PTR_OFF + 16 * MSCCLPP_COLL_GPU_MAX_RANKS)

/* p2pll acks: ack[rank][part] = the messages of the owner's ring to `rank`
 * whose part `part` rank `rank` has read (a 128-byte line per rank) */
#define MSCCLPP_COLL_GPU_P2PLL_ACK_OFF (MSCCLPP_COLL_GPU_A2AV_OFF + 32 * MSCCLPP_COLL_GPU_MAX_RANKS)

MSCCLPP_STATIC_ASSERT(MSCCLPP_COLL_GPU_P2PLL_ACK_OFF + 8 * MSCCLPP_COLL_GPU_MAX_RANKS * MSCCLPP_COLL_GPU_P2PLL_PARTS <=
                          MSCCLPP_COLL_GPU_FLAGS_BYTES,
                      "the flags region holds the pointer and count slots and the p2pll acks");
MSCCLPP_STATIC_ASSERT(MSCCLPP_COLL_GPU_P2PLL_ACK_OFF % 128 == 0 && MSCCLPP_COLL_GPU_P2PLL_PARTS * 8 == 128,
                      "a rank's p2pll acks fill one 128-byte line (one load reads them all)");
MSCCLPP_STATIC_ASSERT(MSCCLPP_COLL_GPU_P2PLL_PARTS * MSCCLPP_COLL_GPU_P2PLL_PART == MSCCLPP_COLL_GPU_P2PLL_CAP &&
                          MSCCLPP_COLL_GPU_P2PLL_PART_PKTS == MSCCLPP_COLL_GPU_P2PLL_THREADS &&
                          MSCCLPP_COLL_GPU_P2PLL_PARTS <= 32,
                      "parts cover the largest op, a packet per thread; the acks fit half a warp");
MSCCLPP_STATIC_ASSERT(MSCCLPP_COLL_GPU_P2PLL_OFF % 128 == 0 && MSCCLPP_COLL_GPU_P2PLL_SLOT % 128 == 0,
                      "p2pll slots start on 128-byte lines");
MSCCLPP_STATIC_ASSERT((MSCCLPP_COLL_GPU_P2PLL_DEPTH & (MSCCLPP_COLL_GPU_P2PLL_DEPTH - 1)) == 0,
                      "the ring depth divides 2^32: a slot is reused by messages whose flags differ");
MSCCLPP_STATIC_ASSERT(MSCCLPP_COLL_GPU_MAX_RANKS <= 16,
                      "a rank and a destination share the 8-bit detail of MSCCLPP_DEVICE_ERROR_SEND_RANGE");

/* Device-resident counters of one communicator. */
struct mscclppCollGpuDevState {
  uint64_t epoch[MSCCLPP_COLL_GPU_MAX_BLOCKS]; /* barrier epochs, per block index */
  uint64_t llRoundSmall;                          /* LL rounds of the one-block packet kernel */
  uint64_t llRoundMid[MSCCLPP_COLL_GPU_MAX_BLOCKS]; /* LL rounds of the mid grid, per block */
  uint64_t llRound[MSCCLPP_COLL_GPU_MAX_BLOCKS]; /* LL rounds used so far, kept by each block: every
                                                    packet kernel of a communicator has the same grid,
                                                    so the copies stay equal, with no atomics */
  uint64_t ll2Round[MSCCLPP_COLL_GPU_MAX_BLOCKS]; /* calls of the two-phase packet kernel, per block (one grid) */
  /* send/recv messages sent to / taken from each rank, per channel (a
   * channel is served by one block of a launch: no atomics) */
  uint64_t p2pSent[MSCCLPP_COLL_GPU_MAX_RANKS][MSCCLPP_COLL_GPU_P2P_CHANNELS];
  uint64_t p2pRecv[MSCCLPP_COLL_GPU_MAX_RANKS][MSCCLPP_COLL_GPU_P2P_CHANNELS];
  /* packet messages sent to / taken from each rank, one copy per part (each
   * written by the one block that serves the part; every message counts in
   * every copy, so the copies stay equal) */
  uint64_t p2pLlSent[MSCCLPP_COLL_GPU_MAX_RANKS][MSCCLPP_COLL_GPU_P2PLL_PARTS];
  uint64_t p2pLlRecv[MSCCLPP_COLL_GPU_MAX_RANKS][MSCCLPP_COLL_GPU_P2PLL_PARTS];
  uint64_t a2avBlocksDone; /* blocks of all-to-all-v calls past their final barrier (atomic; every call has the
                              same grid, so a multiple of it ends a call) */
};

enum { MSCCLPP_COLL_GPU_ALGO_PACKET = 0, MSCCLPP_COLL_GPU_ALGO_DIRECT = 1, MSCCLPP_COLL_GPU_ALGO_PACKET2 = 2 };
/* The largest message (bytes per rank) of the two-phase packet allreduce:
 * its slots hold the whole message (4 x this much scratch per rank). */
#define MSCCLPP_COLL_GPU_LL2_MAX_BYTES ((uint64_t)2 << 20)
enum { MSCCLPP_COLL_GPU_LL_SMALL = 0, MSCCLPP_COLL_GPU_LL_MID = 1, MSCCLPP_COLL_GPU_LL_BIG = 2 };

struct mscclppCollGpuP2p {
  int8_t isSend;
  int8_t peer;
  uint8_t ll; /* 1: as packets (p2pLlOp); the peer's matching op says the same */
  uint8_t pad[5];
  uint8_t* buf;
  uint64_t bytes;
  /* a send the receiver pulls: buf as the peer maps it; NULL: through the
   * peer's scratch. Receives: NULL (each message says). */
  const uint8_t* src;
};

/* The blocks of one lane (a distinct direction and peer of the op list):
 * [first, first + nblocks) of the grid. */
struct mscclppCollGpuP2pLane {
  int8_t isSend;
  int8_t peer;
  uint16_t first;
  uint16_t nblocks;
  uint16_t pad;
};

/* Everything one launch needs, by value (kernel parameters). */
struct mscclppCollGpuLaunch {
  int kind;  /* mscclppCollKind */
  int algo;  /* MSCCLPP_COLL_GPU_ALGO_* */
  int type;  /* mscclppDataType_t (the copy-only collectives pass uint8 and bytes) */
  int op;    /* mscclppRedOp_t */
  int rank;
  int nranks;
  int root;
  int vec16; /* this rank's pointers (and every chunk start) are 16-byte aligned; direct
                kernels also check the peers' */
  uint64_t count; /* elements (the API's count) */
  /* direct: [rank] this rank's input and output; [p] the same buffers as
   * rank p maps them, for the kernel to hand to p. packet: [rank] only. */
  const uint8_t* send[MSCCLPP_COLL_GPU_MAX_RANKS];
  uint8_t* recv[MSCCLPP_COLL_GPU_MAX_RANKS];
  uint8_t* scratch[MSCCLPP_COLL_GPU_MAX_RANKS];    /* every rank's scratch, mapped here */
  struct mscclppCollGpuDevState* state;
  mscclppWaitContext wait;
  uint32_t scopeGpu; /* 1: every rank runs on this device (gpu-scope release/acquire) */
  uint32_t nblocks;
  uint32_t nthreads;
  uint32_t llGrid;       /* packet kernel: MSCCLPP_COLL_GPU_LL_SMALL, _MID or _BIG (its slots and counters) */
  uint64_t llSlotBytes;  /* bytes of one slot of the big grid's LL region */
  uint64_t p2pSlotBytes; /* bytes of one p2p slot (CHANNELS x DEPTH chunks) */
  uint64_t ll2SlotBytes; /* bytes of one slot of the two-phase packet region */
  uint64_t callSeq;      /* the call's number on the communicator (core/report.h): long waits' notes name it */
  struct mscclppCollTraceArgs trace; /* MSCCLPP_TRACE's ring (NULL: not traced) */
};

/* The operations of one send/recv launch (a second kernel parameter, so
 * that the other kernels' parameters stay small: launch cost grows with
 * them). */
struct mscclppCollGpuP2pList {
  uint32_t nops;
  uint32_t nlanes;
  uint64_t chunkBytes; /* of a scratch message: p2pSlotBytes / (CHANNELS x DEPTH), a multiple of 16 */
  struct mscclppCollGpuP2pLane lanes[2 * MSCCLPP_COLL_GPU_MAX_RANKS];
  struct mscclppCollGpuP2p ops[MSCCLPP_COLL_GPU_MAX_P2P];
};

/* The operations of a send/recv launch whose ops all travel as packets
 * (p2pLlKernel): the lanes as p2pGrid made them, and a smaller op than
 * mscclppCollGpuP2p (the launch is on the critical path of a small call,
 * and its cost grows with the parameters). */
struct mscclppCollGpuP2pLlOp {
  uint8_t* buf;
  uint32_t bytes; /* <= MSCCLPP_COLL_GPU_P2PLL_CAP */
  int8_t isSend;
  int8_t peer;
  uint16_t pad;
};
struct mscclppCollGpuP2pLlList {
  uint32_t nops;
  uint32_t nlanes;
  struct mscclppCollGpuP2pLane lanes[2 * MSCCLPP_COLL_GPU_MAX_RANKS];
  struct mscclppCollGpuP2pLlOp ops[MSCCLPP_COLL_GPU_P2PLL_MAX_OPS];
};
MSCCLPP_STATIC_ASSERT(sizeof(struct mscclppCollGpuP2pLlOp) == 16, "a packet op is 16 bytes of kernel parameters");

/* The counts of an all-to-all-v launch (coll.h, mscclppAllToAllv; a second
 * kernel parameter, as the p2p list): this rank's arrays in device memory,
 * nranks elements each, and the capacities in elements. */
struct mscclppCollGpuCounts {
  const size_t* sendcounts;
  const size_t* sdispls;
  size_t* recvcounts;
  size_t* rdispls;
  uint64_t typeSize;
  uint64_t sendCapacity;
  uint64_t recvCapacity;
};

/* coll_gpu_launch.cu: how many blocks of `nthreads` threads of the direct
 * kernel for `type` fit on one SM at once (registers, shared memory). Every
 * rank's blocks must be resident together, as they wait for each other. */
int mscclppCollGpuDirectBlocksPerSm(int type, uint32_t nthreads);

/* coll_gpu_launch.cu: enqueue the launch on `stream` (a cudaStream_t); `p2p`
 * is the op list of a sendrecv launch, NULL otherwise. `pdl`: launch with
 * programmatic dependent launch (compute capability 9.0 and later only):
 * every kernel waits for the previous kernel on the stream before its first
 * memory access, so only the launch overlaps that kernel's end.
 * mscclppUnhandledCudaError with the launch error's text in *why. */
mscclppResult_t mscclppCollGpuEnqueue(const struct mscclppCollGpuLaunch* launch,
                                      const struct mscclppCollGpuP2pList* p2p, void* stream, int pdl,
                                      const char** why);

/* coll_gpu_launch.cu: enqueue the send/recv kernel of a group whose ops
 * all travel as packets, as mscclppCollGpuEnqueue does. */
mscclppResult_t mscclppCollGpuEnqueueP2pLl(const struct mscclppCollGpuLaunch* launch,
                                           const struct mscclppCollGpuP2pLlList* list, void* stream, int pdl,
                                           const char** why);

/* coll_gpu_launch.cu: enqueue the all-to-all-v kernel (`launch` holds this
 * rank's input as each peer maps it, and its output), as
 * mscclppCollGpuEnqueue does. */
mscclppResult_t mscclppCollGpuEnqueueAllToAllv(const struct mscclppCollGpuLaunch* launch,
                                               const struct mscclppCollGpuCounts* counts, void* stream, int pdl,
                                               const char** why);

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_SRC_COLL_COLL_GPU_H_ */
