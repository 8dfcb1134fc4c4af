/* SPDX-License-Identifier: MIT */
/*
 * The GPU backend's host side, shared by its files (not by the kernels:
 * coll_gpu.h is what they share): the per-communicator state and the
 * export of this rank's buffers to its peers.
 *   coll_gpu.c         the state (built when the communicator is made, or at
 *                      the first call), and each call in parts: sizes,
 *                      grid, staging, launch
 *   coll_gpu_export.c  this rank's buffers as CUDA IPC handles, mapped by
 *                      the peers' export services; this rank's service
 *   coll_gpu_packet_host.c  a call of a packet algorithm: its grid, what it
 *                      stages, the launch
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
#define OPEN_CACHE_MAX 1024 /* peers' allocations one service maps */
#define OWN_CACHE 64        /* this rank's allocations with a handle made */
#define EXPORT_CACHE 256    /* per peer: this rank's allocations it maps, remembered */
/* cudaMalloc allocations smaller than this are staged (coll_gpu_export.c
 * says why); staging buffers are at least this large. */
#define STAGE_MIN_BYTES ((size_t)2 << 20)

/* Bootstrap tags of the GPU backend (user tag space, kept clear of the
 * values applications use in practice) */
#define MSCCLPP_COLL_GPU_TAG_BASE 0x7d000000
#define MSCCLPP_COLL_GPU_TAG_EXPORT (MSCCLPP_COLL_GPU_TAG_BASE + 3)
#define MSCCLPP_COLL_GPU_TAG_EXPORT_REPLY (MSCCLPP_COLL_GPU_TAG_BASE + 4)
/* answers to requests nobody waits for (mscclppCollGpuExportAsk), taken by
 * a handler */
#define MSCCLPP_COLL_GPU_TAG_EXPORT_ASYNC (MSCCLPP_COLL_GPU_TAG_BASE + 5)
#define ASK_MAX 64 /* (peer, allocation) asked without waiting, not yet answered or refused */

/* One of this rank's buffers, as a peer can map it. */
struct ownBuf {
  uint64_t id;     /* allocation id (0: none) */
  uint64_t base;   /* the allocation's address in this process */
  uint64_t offset; /* of the buffer in the allocation */
  uint8_t handle[MSCCLPP_GPU_IPC_HANDLE_BYTES];
};

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
struct exportedEntry {
  uint64_t id;     /* this rank's allocation */
  uint64_t mapped; /* its address in the peer */
};

struct mscclppCollGpuService;

struct mscclppCollGpu {
  int rank, nranks, device, nsm, sharing;
  uint32_t packetBlocks;
  uint32_t directBlocksMax; /* MSCCLPP_COLL_DIRECT_BLOCKS, 0: no limit */
  int p2pZeroCopy;          /* MSCCLPP_COLL_P2P_ZERO_COPY: sends the receiver maps go zero-copy */
  uint64_t p2pZeroCopyMin;  /* MSCCLPP_COLL_P2P_ZERO_COPY_MIN: from this many bytes */
  uint64_t p2pLlMax;        /* MSCCLPP_COLL_P2P_LL_MAX as the ranks agreed: ops up to this many bytes as packets */
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
  /* buffers: this rank's with a handle, those the peers map, the service */
  struct ownEntry own[OWN_CACHE];
  int nown, ownNext;
  struct exportedEntry exported[MAXR][EXPORT_CACHE];
  int nexported[MAXR], exportNext[MAXR];
  uint64_t exportSeq;
  /* asked without waiting (state 1: no answer yet; 2: the peer refused,
   * not asked again) */
  struct {
    int peer, state;
    uint64_t id;
  } asked[ASK_MAX];
  int nasked;
  struct mscclppCollGpuService* service;
  /* peers' mappings the service retired, taken by the application thread,
   * closed once the mark (recorded after this rank's last launch) is done */
  void** reaping;
  int nreaping, capReaping;
  struct mscclppGpuMark* reapMark;
  int reapArmed;
  void* stage[2]; /* send, recv staging (cudaMalloc; never freed before destroy) */
  size_t stageBytes[2];
  void* retired[64];
  int nretired;
};

/* Describe a buffer of this rank for export (*shareable = 1), or say it
 * must be staged (*shareable = 0). */
mscclppResult_t mscclppCollGpuDescribeOwn(struct mscclppCollGpu* g, const void* p, struct ownBuf* b,
                                          int* shareable);

/* mapped[p] = where peer p maps this rank's allocation b (b->base there),
 * for every peer; a peer that does not map it yet is asked to, through its
 * export service (one bootstrap round trip, bounded by MSCCLPP_TIMEOUT; it
 * never waits for the peer's application thread). */
mscclppResult_t mscclppCollGpuExport(struct mscclppComm* comm, struct mscclppCollGpu* g, const struct ownBuf* b,
                                     uint64_t mapped[MSCCLPP_COLL_GPU_MAX_RANKS]);
/* The same for b[0..nb) (nb <= MSCCLPP_COLL_GPU_EXPORT_MAX) in one round
 * trip per peer: every request is sent before any answer is read; entries
 * with id 0 are skipped, and an allocation given twice is asked once. */
#define MSCCLPP_COLL_GPU_EXPORT_MAX 4
mscclppResult_t mscclppCollGpuExportMany(struct mscclppComm* comm, struct mscclppCollGpu* g, const struct ownBuf* b,
                                         int nb, uint64_t (*mapped)[MSCCLPP_COLL_GPU_MAX_RANKS]);

/* Mappings learned without waiting (send/recv): Known says where peer
 * maps this rank's allocation `id`, when an answer came (1) or not (0).
 * Ask sends peer's service a request for b and returns at once (nothing
 * when it is known, asked already or refused); its answer arrives on the
 * bootstrap's thread, and Collect, on the application thread, files the
 * answers that came into the cache that Known and Export read. */
int mscclppCollGpuExportKnown(const struct mscclppCollGpu* g, int peer, uint64_t id, uint64_t* mapped);
mscclppResult_t mscclppCollGpuExportAsk(struct mscclppComm* comm, struct mscclppCollGpu* g, const struct ownBuf* b,
                                        int peer);
void mscclppCollGpuExportCollect(struct mscclppCollGpu* g);

/* How a service maps a peer's allocation in this process (its thread calls
 * them): threadStart once (may be NULL), open a handle, close what open
 * gave. NULL ops: CUDA IPC on `device` (CUDA builds only). */
struct mscclppCollGpuMapOps {
  void (*threadStart)(void* ctx, int device);
  mscclppResult_t (*open)(void* ctx, const uint8_t handle[MSCCLPP_GPU_IPC_HANDLE_BYTES], void** base);
  mscclppResult_t (*close)(void* ctx, void* base);
  void* ctx;
};

/* Mappings of peers' allocations that newer allocations at the same
 * addresses replaced. The service never closes one itself: closing a CUDA
 * IPC mapping waits for every kernel of the process, and one of this
 * rank's kernels may be waiting for the very peer whose request the
 * service serves. The application thread takes them and closes them once
 * this rank's kernels are done. Retired: how many wait (a hint, read
 * without the lock). TakeRetired moves them to *list (the caller frees
 * it), Close closes one with the service's operations. */
int mscclppCollGpuServiceRetired(struct mscclppCollGpuService* s);
mscclppResult_t mscclppCollGpuServiceTakeRetired(struct mscclppCollGpuService* s, void*** list, int* n);
mscclppResult_t mscclppCollGpuServiceClose(struct mscclppCollGpuService* s, void* base);

/* This rank's export service: a thread, and the bootstrap handler that
 * feeds it. Stop removes the handler, joins the thread and closes every
 * mapping it made, retired ones too (NULL: nothing). */
mscclppResult_t mscclppCollGpuServiceStart(struct mscclppComm* comm, int device, const struct mscclppCollGpuMapOps* ops,
                                           struct mscclppCollGpuService** out);
void mscclppCollGpuServiceStop(struct mscclppCollGpuService* s);

/* ---- a call's parts that several files use (coll_gpu.c) ---- */

struct mscclppCollArgs;

/* g's staging buffer `which` (0: inputs, 1: outputs) of at least `bytes`
 * in *out: made or grown now (a grown one's old buffer is kept until
 * destroy, as peers may map it). mscclppInvalidUsage after 64 resizes. */
mscclppResult_t mscclppCollGpuStageBuffer(struct mscclppCollGpu* g, int which, size_t bytes, void** out);

/* Enqueue L on `stream` (with the op list of a send/recv launch: p2p for
 * p2pKernel, ll for p2pLlKernel; NULL for a collective); `what` names the
 * kernel in the error and the trace (a string that lives as long as the
 * process). */
mscclppResult_t mscclppCollGpuLaunchKernel(struct mscclppComm* comm, struct mscclppCollGpu* g,
                                           struct mscclppCollGpuLaunch* L, const struct mscclppCollGpuP2pList* p2p,
                                           const struct mscclppCollGpuP2pLlList* ll, mscclppStream_t stream,
                                           const char* what);

/* A call of a packet algorithm (coll_gpu_packet_host.c): L is filled with
 * everything but this rank's buffers, the grid and the alignment; inBytes
 * and outBytes are this rank's input and output. */
mscclppResult_t mscclppCollGpuRunPacket(struct mscclppComm* comm, struct mscclppCollGpu* g,
                                        const struct mscclppCollArgs* a, size_t inBytes, size_t outBytes,
                                        struct mscclppCollGpuLaunch* L);

#endif /* MSCCLPP_SRC_COLL_GPU_COLL_GPU_STATE_H_ */
