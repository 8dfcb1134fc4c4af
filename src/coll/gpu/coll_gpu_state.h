/* SPDX-License-Identifier: MIT */
/*
 * The GPU backend's host side, shared by its files (not by the kernels:
 * coll_gpu.h is what they share): the per-communicator state and the
 * board.
 *   coll_gpu.c        the state (built at the first call), and each call in
 *                     parts: sizes, grid, staging, launch
 *   coll_gpu_board.c  this rank's buffers as CUDA IPC handles, the peers'
 *                     buffers mapped, the per-call rendezvous on the board
 */
#ifndef MSCCLPP_SRC_COLL_GPU_COLL_GPU_STATE_H_
#define MSCCLPP_SRC_COLL_GPU_COLL_GPU_STATE_H_

#include <stddef.h>
#include <stdint.h>

#include "coll/gpu/coll_gpu.h"
#include "comm/comm.h"
#include "gpu/gpu_ipc.h"
#include "mscclpp/coll.h"
#include "mscclpp/connection.h"
#include "mscclpp/memory.h"
#include "mscclpp/memory_channel.h"

#define MAXR MSCCLPP_COLL_GPU_MAX_RANKS
#define BOARD_SLOTS 4
#define OPEN_CACHE_MAX 1024
/* cudaMalloc allocations smaller than this are staged (coll_gpu_board.c
 * says why); staging buffers are at least this large. */
#define STAGE_MIN_BYTES ((size_t)2 << 20)

/* One rank's description of one call's buffers. */
struct boardBuf {
  uint64_t id;     /* allocation id (0: none) */
  uint64_t base;   /* the allocation's address in its owner's process */
  uint64_t offset; /* of the buffer in the allocation */
  uint8_t handle[MSCCLPP_GPU_IPC_HANDLE_BYTES];
};
struct boardEntry {
  uint64_t seq; /* written last, with release */
  uint64_t pad[7];
  struct boardBuf buf[2]; /* send, recv */
} __attribute__((aligned(64)));

struct openEntry {
  int peer;
  uint64_t id;
  uint64_t peerBase; /* the allocation's address in the peer */
  void* base;        /* where it is mapped here */
};
struct ownEntry {
  uint64_t id;
  uint8_t handle[MSCCLPP_GPU_IPC_HANDLE_BYTES];
};

struct mscclppCollGpu {
  int rank, nranks, device, nsm, sharing;
  uint32_t packetBlocks;
  uint32_t directBlocksMax; /* MSCCLPP_COLL_DIRECT_BLOCKS, 0: no limit */
  int pdl;                  /* launch with programmatic dependent launch (MSCCLPP_COLL_PDL, compute capability >= 9) */
  int directOcc[mscclppNumTypes]; /* direct kernel blocks per SM (0: not asked yet) */
  uint32_t scopeGpu;
  mscclppWaitContext wait;
  struct mscclppAbort* abort;
  /* scratch and channels */
  void* scratch;
  size_t scratchBytes;
  uint64_t llSlotBytes, p2pSlotBytes, ll2SlotBytes;
  mscclppRegisteredMemory_t scratchMem;
  mscclppConnection_t conn[MAXR];
  mscclppMemoryChannel_t chan[MAXR];
  uint8_t* scratchOf[MAXR];
  struct mscclppCollGpuDevState* state;
  /* board */
  struct boardEntry* board; /* mine: BOARD_SLOTS entries */
  mscclppRegisteredMemory_t boardMem;
  mscclppRegisteredMemory_t peerBoardMem[MAXR];
  struct boardEntry* boardOf[MAXR];
  uint64_t seq;
  /* caches */
  struct openEntry* open;
  int nopen;
  struct ownEntry own[64];
  int nown, ownNext;
  void* stage[2]; /* send, recv staging (cudaMalloc; never freed before destroy) */
  size_t stageBytes[2];
  void* retired[64];
  int nretired;
};

/* Describe a buffer of this rank for the board (*shareable = 1), or say it
 * must be staged (*shareable = 0). */
mscclppResult_t mscclppCollGpuDescribeOwn(struct mscclppCollGpu* g, const void* p, struct boardBuf* b,
                                          int* shareable);

/* Publish this rank's buffers (`mine`: send, recv) for the next call on
 * the board, wait (MSCCLPP_TIMEOUT, the abort flag) until every peer has
 * published the same call, and map the peers' buffers into L->send[] and
 * L->recv[] (this rank's: localSend, localRecv). */
mscclppResult_t mscclppCollGpuRendezvous(struct mscclppComm* comm, struct mscclppCollGpu* g,
                                         const struct boardBuf mine[2], struct mscclppCollGpuLaunch* L,
                                         const uint8_t* localSend, uint8_t* localRecv);

#endif /* MSCCLPP_SRC_COLL_GPU_COLL_GPU_STATE_H_ */
