/* SPDX-License-Identifier: MIT */
/*
 * The GPU algorithm family "port": every collective and send/recv between
 * any ranks, on any hosts, through port channels (host side
 * coll_port.c, kernels coll_port_kernels.cu). coll_gpu.c hands a call
 * here when the communicator spans hosts or MSCCLPP_ALGO names "port".
 *
 * Each rank owns two regions of the same layout, cut into slots of
 * `slotBytes`:
 *   inbox  [from rank p][slot s]  at ((p * NBUF) + s) * slotBytes
 *   outbox [to rank q][slot s]    at ((nranks + q) * NBUF + s) * slotBytes
 * the slots for a peer on this host are in device memory (CUDA IPC: the
 * proxy's copy engine moves them), as are those for a peer over a network
 * whose provider reaches GPU memory (FI_HMEM); those for a peer over a
 * network that would stage GPU memory through host buffers are in pinned
 * host memory (made only when such a peer exists), which the kernel writes
 * and reads over PCIe: the proxy then posts the network write from the
 * outbox itself and the data lands in the inbox, with no CUDA copy or
 * stream on the way. A copy the proxy queues while the application's
 * kernels spin can wait behind them (the hierarchical allreduce's
 * cross-host step did: bench/HISTORY.md, "The hierarchical allreduce on
 * GPUs: found and fixed"), and staging through a bounce
 * buffer would cost a device copy per chunk anyway.
 * Rank a's chunks to rank b form one stream: chunk c is written by a's
 * kernel into outbox[b][c % NBUF], put (with a signal) by a's proxy into
 * b's inbox[a][c % NBUF]; b's kernel waits for the signal on the data
 * channel, uses the chunk, and gives the slot back with a signal on the
 * credit channel. Before it writes chunk c >= NBUF, a's kernel waits for
 * one credit: the credit of chunk c - NBUF, which also proves that a's
 * outbox slot has been read (the data arrived), so no flush is needed.
 * Chunk counts (sent, received) and the semaphores' counters live in device
 * memory, so a CUDA graph replays correctly.
 *
 * A collective runs in rounds, one chunk per stream and phase: first the
 * sends (reserve the outbox slots, fill them, put), then the receives
 * (wait, reduce or copy out, give back). Reductions are made by one rank per
 * element, in rank order 0..n-1, then copied, so every rank holds bitwise
 * the same result:
 *   allreduce      rank q reduces share q of every input (phase 1: share q
 *                  of each input to q), then sends it to every rank (phase
 *                  2)
 *   reducescatter  block q of each input to q, reduced there
 *   reduce         every input to the root, reduced there
 *   allgather      my input to every rank
 *   broadcast      the root's input to every rank
 *   alltoall       block q of my input to q
 *   sendrecv       each (direction, peer) of the group is a lane; round j
 *                  moves the j-th chunk of every lane (its ops in order)
 */
#ifndef MSCCLPP_SRC_COLL_COLL_PORT_H_
#define MSCCLPP_SRC_COLL_COLL_PORT_H_

#include <stdint.h>

#include "coll/coll_trace.h"
#include "mscclpp/core.h"
#include "mscclpp/port_channel_device.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MSCCLPP_COLL_PORT_MAX_RANKS 64
#define MSCCLPP_COLL_PORT_NBUF 2 /* slots per stream: chunk c and c - 1 may be in flight */
#define MSCCLPP_COLL_PORT_MAX_P2P 64
#define MSCCLPP_COLL_PORT_THREADS 512

/* The two port channels to one peer (device memory, indexed by rank). */
struct mscclppCollPortPeer {
  mscclppPortChannelDeviceHandle data;   /* puts into the peer's inbox, each with a signal */
  mscclppPortChannelDeviceHandle credit; /* signals only: a slot of the peer's stream is free again */
  uint8_t* base; /* the region holding this rank's inbox and outbox slots for the peer (the layout above) */
};

/* Device-resident counters of one communicator. */
struct mscclppCollPortDevState {
  uint64_t sent[MSCCLPP_COLL_PORT_MAX_RANKS];  /* chunks sent to each rank */
  uint64_t recvd[MSCCLPP_COLL_PORT_MAX_RANKS]; /* chunks received from each rank */
};

/* One collective launch, by value. The copy-only collectives pass type
 * uint8 and count in bytes. */
struct mscclppCollPortLaunch {
  int kind; /* mscclppCollKind */
  int type; /* mscclppDataType_t */
  int op;   /* mscclppRedOp_t */
  int rank;
  int nranks;
  int root;
  uint64_t count; /* elements (the API's count) */
  const uint8_t* send;
  uint8_t* recv;
  uint64_t slotBytes; /* a multiple of 64, the same on every rank */
  const struct mscclppCollPortPeer* peers;
  struct mscclppCollPortDevState* state;
  struct mscclppCollTraceArgs trace; /* MSCCLPP_TRACE's ring (NULL: not traced) */
};

struct mscclppCollPortP2p {
  int isSend;
  int peer;
  int lane; /* index of its (direction, peer) among the group's distinct ones */
  int pad;
  uint8_t* buf;
  uint64_t bytes;
};

/* A group of sends and receives (peers other than this rank). */
struct mscclppCollPortP2pList {
  uint32_t nops;
  uint32_t nlanes;
  uint64_t rounds; /* chunks of the longest lane */
  struct mscclppCollPortP2p ops[MSCCLPP_COLL_PORT_MAX_P2P];
};

/* coll_port_kernels.cu: enqueue a collective (p2p NULL) or a group of
 * sends and receives (`launch` then gives rank, nranks, scratch, slots,
 * peers and state) on `stream` (a cudaStream_t).
 * mscclppUnhandledCudaError with the launch error's text in *why. */
mscclppResult_t mscclppCollPortEnqueue(const struct mscclppCollPortLaunch* launch,
                                       const struct mscclppCollPortP2pList* p2p, void* stream, const char** why);

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_SRC_COLL_COLL_PORT_H_ */
