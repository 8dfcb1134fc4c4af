/*
 * The GPU backend, host side (kernels: coll_gpu_kernels.cu; layout and
 * algorithms: coll_gpu.h).
 *
 * Per communicator, made at the first collective: a scratch allocation in
 * device memory with a memory channel (CUDA IPC) to every peer, the device
 * counters, and a "board": a small page of host shared memory per rank that
 * every rank maps.
 *
 * Zero-copy ("direct") algorithms need every rank's user buffers mapped in
 * every rank. At each such call every rank writes, into its board slot for
 * the call's sequence number, the CUDA IPC handle, allocation id and offset
 * of its send and receive buffers, then reads the peers' slots (a host-side
 * rendezvous of the ranks of this host, bounded by MSCCLPP_TIMEOUT and the
 * abort flag; it waits for the peers' host threads to reach the same call,
 * not for their GPUs). A peer allocation is opened once (cudaIpcOpenMemHandle)
 * and cached by (peer, allocation id): the driver's buffer id is unique for
 * the process's life, so an address reused by a new allocation is never
 * mistaken for the old one. Buffers that cannot be shared that way (cuMem
 * or pool allocations, managed memory) are staged through a cached
 * cudaMalloc buffer of this rank (a device-to-device copy before and after
 * the kernel, on the caller's stream), which only this rank has to know.
 * Host setup calls run with the thread's stream-capture mode relaxed, so
 * the first call may itself be captured in a CUDA graph.
 */
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "coll/gpu/coll_gpu.h"
#include "core/error.h"
#include "core/log.h"
#include "core/util.h"

#ifndef MSCCLPP_HAVE_CUDA

mscclppResult_t mscclppCollGpuRun(struct mscclppComm* comm, const struct mscclppCollArgs* args) {
  (void)comm;
  (void)args;
  return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_COLL, "GPU collectives: this build has no CUDA");
}
mscclppResult_t mscclppCollGpuP2p(struct mscclppComm* comm, const struct mscclppCollP2pOp* ops, int nops,
                                  mscclppStream_t stream) {
  (void)comm;
  (void)ops;
  (void)nops;
  (void)stream;
  return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_COLL, "GPU send/recv: this build has no CUDA");
}
void mscclppCollGpuRelease(struct mscclppComm* comm) { (void)comm; }

#else

#include <cuda_runtime_api.h>

#include "gpu/abort.h"
#include "gpu/gpu_ipc.h"
#include "mscclpp/connection.h"
#include "mscclpp/memory.h"
#include "mscclpp/memory_channel.h"

#define MAXR MSCCLPP_COLL_GPU_MAX_RANKS
#define BOARD_SLOTS 4
#define OPEN_CACHE_MAX 1024
#define TAG_BASE 0x7d000000
#define STAGE_MIN_BYTES ((size_t)2 << 20)
/* The grid of every packet kernel. */
#define PACKET_SMALL_BYTES (4u << 10) /* one block of MSCCLPP_COLL_GPU_PACKET_THREADS: a packet per thread (8 KiB, two per thread, was slower) */
#define PACKET_MID_BYTES (64u << 10)  /* up to here 16 blocks: 4 ranks, 64 KiB took 4.9 us on 16, 5.3-5.5 on 33 */
#define PACKET_MID_BLOCKS 16u
_Static_assert(PACKET_MID_BYTES * 2 <= MSCCLPP_COLL_GPU_LLMID_SLOT, "a mid message fits one slot of packets");


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
  int packet2FallbackTold;  /* MSCCLPP_ALGO=allreduce=packet2 beyond its slots: said once */
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

static mscclppResult_t cudaFail(cudaError_t err, const char* what) {
  (void)cudaGetLastError();
  return mscclppErr(mscclppUnhandledCudaError, MSCCLPP_LOG_COLL, "%s: %s", what, cudaGetErrorString(err));
}
#define CUDA_TRY(call, what)                           \
  do {                                                 \
    cudaError_t e_ = (call);                           \
    if (e_ != cudaSuccess) return cudaFail(e_, what);  \
  } while (0)

void mscclppCollGpuRelease(struct mscclppComm* comm) {
  mscclppCollPortRelease(comm);
  struct mscclppCollGpu* g = comm->collGpu;
  if (g == NULL) return;
  (void)cudaDeviceSynchronize(); /* kernels that use the channels must be done */
  for (int i = 0; i < g->nopen; i++) (void)mscclppGpuIpcCloseHandle(g->open[i].base);
  free(g->open);
  for (int r = 0; r < g->nranks; r++) {
    if (g->chan[r] != NULL) (void)mscclppMemoryChannelDestroy(g->chan[r]);
    if (g->conn[r] != NULL) (void)mscclppConnectionDestroy(g->conn[r]);
    if (g->peerBoardMem[r] != NULL) (void)mscclppMemoryClose(g->peerBoardMem[r]);
  }
  /* every peer must have closed what it opened of ours before we free it */
  (void)mscclppBootstrapBarrier(comm);
  if (g->scratchMem != NULL) (void)mscclppDeregisterMemory(g->scratchMem);
  if (g->scratch != NULL) (void)mscclppMemFree(comm, g->scratch);
  if (g->boardMem != NULL) (void)mscclppDeregisterMemory(g->boardMem);
  if (g->board != NULL) (void)mscclppMemFree(comm, g->board);
  if (g->state != NULL) (void)cudaFree(g->state);
  for (int i = 0; i < 2; i++)
    if (g->stage[i] != NULL) (void)cudaFree(g->stage[i]);
  for (int i = 0; i < g->nretired; i++) (void)cudaFree(g->retired[i]);
  free(g);
  comm->collGpu = NULL;
}

/* Make the state on first use (every rank reaches the same call). */
static mscclppResult_t gpuState(struct mscclppComm* comm, struct mscclppCollGpu** out) {
  if (comm->collGpu != NULL) {
    *out = comm->collGpu;
    return mscclppSuccess;
  }
  if (comm->nranks > MAXR)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_COLL,
                      "GPU collectives: %d ranks on one host; this release supports up to %d", comm->nranks, MAXR);
  struct mscclppCollGpu* g = (struct mscclppCollGpu*)calloc(1, sizeof(*g));
  if (g == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_COLL, "out of memory");
  comm->collGpu = g;
  g->rank = comm->rank;
  g->nranks = comm->nranks;
  mscclppResult_t res = mscclppSuccess;
  int dev = 0;
  CUDA_TRY(cudaGetDevice(&dev), "cudaGetDevice");
  g->device = dev;
  CUDA_TRY(cudaDeviceGetAttribute(&g->nsm, cudaDevAttrMultiProcessorCount, dev), "cudaDeviceGetAttribute");
  MSCCLPP_RETURN_ON_ERROR(mscclppCommAbortOf(comm, &g->abort));
  mscclppAbortWaitContext(g->abort, comm->params.timeout, 1, &g->wait);

  /* scratch: flags | small LL slots | LL 2 x nranks slots | p2p nranks slots (coll_gpu.h) */
  uint64_t per = comm->params.collScratchBytes > 65536 ? (uint64_t)comm->params.collScratchBytes : 65536;
  per = per / 64 * 64;
  g->p2pSlotBytes = per;
  g->llSlotBytes = per / 4 / 16 * 16;
  /* a share of the largest two-phase message, as packets (twice its bytes) */
  g->ll2SlotBytes = ((MSCCLPP_COLL_GPU_LL2_MAX_BYTES / 8 + g->nranks - 1) / g->nranks * 16 + 63) / 64 * 64;
  g->scratchBytes = MSCCLPP_COLL_GPU_SCRATCH_BYTES(g->nranks, g->llSlotBytes, g->p2pSlotBytes, g->ll2SlotBytes);
  MSCCLPP_RETURN_ON_ERROR(mscclppMemAlloc(comm, mscclppMemKindDevice, g->scratchBytes, &g->scratch));
  MSCCLPP_RETURN_ON_ERROR(
      mscclppRegisterMemory(comm, g->scratch, g->scratchBytes, mscclppTransportCudaIpc, &g->scratchMem));
  CUDA_TRY(cudaMalloc((void**)&g->state, sizeof(*g->state)), "cudaMalloc(collective state)");
  MSCCLPP_RETURN_ON_ERROR(mscclppGpuIpcZero(g->state, sizeof(*g->state))); /* the first call may be captured */
  g->scratchOf[g->rank] = (uint8_t*)g->scratch;
  g->scopeGpu = 1;
  for (int r = 0; r < g->nranks; r++) {
    if (r == g->rank) continue;
    MSCCLPP_RETURN_ON_ERROR(mscclppConnectionCreate(comm, r, TAG_BASE, mscclppTransportCudaIpc, &g->conn[r]));
    mscclppMemoryChannelConfig mc = MSCCLPP_MEMORY_CHANNEL_CONFIG_INITIALIZER;
    mc.tag = TAG_BASE + 1;
    mc.local = g->scratchMem;
    MSCCLPP_RETURN_ON_ERROR(mscclppMemoryChannelCreate(comm, g->conn[r], &mc, &g->chan[r]));
    mscclppMemoryChannelDeviceHandle h;
    MSCCLPP_RETURN_ON_ERROR(mscclppMemoryChannelGetDeviceHandle(g->chan[r], &h));
    g->scratchOf[r] = h.dst;
    if (h.sem.scope != MSCCLPP_SEMAPHORE_SCOPE_GPU) g->scopeGpu = 0;
  }
  /* The ranks on this GPU: this communicator's, or more where a parent
   * (a hierarchy's child, an ncclCommSplit) said so. */
  MSCCLPP_RETURN_ON_ERROR(mscclppCommGpuShare(comm, &g->sharing));
  /* The packet grid: an SM's worth per block, as many as stay resident with
   * every rank's blocks (16 blocks: 512 KiB took 11.5 us with 2 ranks; 64:
   * 5.4 us; no change at 8-64 KiB), or MSCCLPP_COLL_PACKET_BLOCKS. */
  uint32_t cap = (uint32_t)(g->nsm / g->sharing);
  if (cap > MSCCLPP_COLL_GPU_MAX_BLOCKS) cap = MSCCLPP_COLL_GPU_MAX_BLOCKS;
  g->packetBlocks = comm->params.collPacketBlocks > 0 && (uint32_t)comm->params.collPacketBlocks < cap
                        ? (uint32_t)comm->params.collPacketBlocks
                        : cap;
  if (g->packetBlocks < 1) g->packetBlocks = 1;
  g->directBlocksMax = comm->params.collDirectBlocks > 0 ? (uint32_t)comm->params.collDirectBlocks : 0;
  int major = 0;
  CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), "cudaDeviceGetAttribute");
  g->pdl = comm->params.collPdl != 0 && major >= 9;
  /* the board */
  size_t boardBytes = BOARD_SLOTS * sizeof(struct boardEntry);
  MSCCLPP_RETURN_ON_ERROR(mscclppMemAlloc(comm, mscclppMemKindHostShared, boardBytes, (void**)&g->board));
  MSCCLPP_RETURN_ON_ERROR(mscclppRegisterMemory(comm, g->board, boardBytes, mscclppTransportHostShm, &g->boardMem));
  g->boardOf[g->rank] = g->board;
  for (int r = 0; r < g->nranks && res == mscclppSuccess; r++)
    if (r != g->rank) res = mscclppMemorySend(comm, g->boardMem, r, TAG_BASE + 2);
  for (int r = 0; r < g->nranks && res == mscclppSuccess; r++) {
    if (r == g->rank) continue;
    res = mscclppMemoryRecv(comm, r, TAG_BASE + 2, &g->peerBoardMem[r]);
    if (res == mscclppSuccess) res = mscclppMemoryPtr(g->peerBoardMem[r], (void**)&g->boardOf[r]);
  }
  MSCCLPP_RETURN_ON_ERROR(res);
  g->open = (struct openEntry*)calloc(OPEN_CACHE_MAX, sizeof(*g->open));
  if (g->open == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_COLL, "out of memory");
  MSCCLPP_INFO(MSCCLPP_LOG_COLL,
               "rank %d of %d: GPU collectives on device %d (%d SMs), which %d ranks share (grids sized for that), "
               "%s scope, scratch %zu bytes",
               g->rank, g->nranks, dev, g->nsm, g->sharing, g->scopeGpu ? "gpu" : "system", g->scratchBytes);
  *out = g;
  return mscclppSuccess;
}

/* ---- buffers: IPC handles, staging, the board ----------------------------------- */

/* Describe a buffer of this rank for the board, or say it must be staged. */
static mscclppResult_t describeOwn(struct mscclppCollGpu* g, const void* p, struct boardBuf* b, int* shareable) {
  struct mscclppGpuPtrInfo info;
  MSCCLPP_RETURN_ON_ERROR(mscclppGpuIpcQueryPointer(p, &info));
  /* cudaMalloc allocations under 2 MiB may share their 2 MiB block with
   * others, and CUDA IPC maps whole blocks: a second handle into an already
   * mapped block fails ("already mapped"). Such buffers are staged. */
  *shareable = info.type == MSCCLPP_GPU_PTR_DEVICE && info.device == g->device && info.bufferId != 0 &&
               info.allocSize >= STAGE_MIN_BYTES;
  if (!*shareable) return mscclppSuccess;
  b->id = info.bufferId;
  b->base = info.allocBase;
  b->offset = (uint64_t)((uintptr_t)p - info.allocBase);
  for (int i = 0; i < g->nown; i++)
    if (g->own[i].id == info.bufferId) {
      memcpy(b->handle, g->own[i].handle, sizeof(b->handle));
      return mscclppSuccess;
    }
  struct ownEntry* e = &g->own[g->ownNext];
  g->ownNext = (g->ownNext + 1) % 64;
  if (g->nown < 64) g->nown++;
  MSCCLPP_RETURN_ON_ERROR(mscclppGpuIpcGetHandle((void*)info.allocBase, e->handle));
  e->id = info.bufferId;
  memcpy(b->handle, e->handle, sizeof(b->handle));
  return mscclppSuccess;
}

static mscclppResult_t stageBuffer(struct mscclppCollGpu* g, int which, size_t bytes, void** out) {
  if (g->stageBytes[which] < bytes) {
    if (g->stage[which] != NULL) {
      /* peers may still map it: keep it until destroy */
      if (g->nretired == 64)
        return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_COLL, "too many staging buffer resizes");
      g->retired[g->nretired++] = g->stage[which];
      g->stage[which] = NULL;
    }
    size_t sz = bytes < STAGE_MIN_BYTES ? STAGE_MIN_BYTES : bytes;
    CUDA_TRY(cudaMalloc(&g->stage[which], sz), "cudaMalloc(collective staging buffer)");
    g->stageBytes[which] = sz;
  }
  *out = g->stage[which];
  return mscclppSuccess;
}

static mscclppResult_t openPeer(struct mscclppCollGpu* g, int peer, const struct boardBuf* b, uint8_t** ptr) {
  for (int i = 0; i < g->nopen; i++)
    if (g->open[i].peer == peer && g->open[i].id == b->id) {
      *ptr = (uint8_t*)g->open[i].base + b->offset;
      return mscclppSuccess;
    }
  /* A mapping of an older allocation of this peer at the same address is
   * stale (the peer freed it; the new one has another id): close it, or
   * CUDA refuses to map the new one ("already mapped"). The kernels that
   * used it have completed on the peer, which freed it after its call. */
  for (int i = 0; i < g->nopen; i++)
    if (g->open[i].peer == peer && g->open[i].peerBase == b->base) {
      MSCCLPP_RETURN_ON_ERROR(mscclppGpuIpcCloseHandle(g->open[i].base));
      g->open[i] = g->open[--g->nopen];
      break;
    }
  if (g->nopen == OPEN_CACHE_MAX)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_COLL,
                      "more than %d distinct peer buffers used in collectives; register fewer", OPEN_CACHE_MAX);
  void* base = NULL;
  MSCCLPP_RETURN_ON_ERROR(mscclppGpuIpcOpenHandle(b->handle, &base));
  g->open[g->nopen].peer = peer;
  g->open[g->nopen].id = b->id;
  g->open[g->nopen].peerBase = b->base;
  g->open[g->nopen].base = base;
  g->nopen++;
  *ptr = (uint8_t*)base + b->offset;
  return mscclppSuccess;
}

/* Publish my buffers for call `seq` and map every peer's. */
static mscclppResult_t rendezvous(struct mscclppComm* comm, struct mscclppCollGpu* g, const struct boardBuf mine[2],
                                  struct mscclppCollGpuLaunch* L, const uint8_t* localSend, uint8_t* localRecv) {
  uint64_t seq = ++g->seq;
  struct boardEntry* e = &g->board[seq % BOARD_SLOTS];
  memcpy(e->buf, mine, sizeof(e->buf));
  __atomic_store_n(&e->seq, seq, __ATOMIC_RELEASE);
  L->send[g->rank] = localSend;
  L->recv[g->rank] = localRecv;
  mscclppDeadline deadline = mscclppDeadlineIn(comm->params.timeout);
  for (int r = 0; r < g->nranks; r++) {
    if (r == g->rank) continue;
    const struct boardEntry* pe = &g->boardOf[r][seq % BOARD_SLOTS];
    uint32_t spins = 0;
    while (__atomic_load_n(&pe->seq, __ATOMIC_ACQUIRE) != seq) {
      if (++spins % 1024 == 0) {
        if (mscclppAbortIsRaised(g->abort))
          return mscclppErr(mscclppAborted, MSCCLPP_LOG_COLL,
                            "collective: the communicator was aborted while waiting for rank %d", r);
        if (mscclppDeadlinePassed(deadline))
          return mscclppErr(mscclppTimeout, MSCCLPP_LOG_COLL,
                            "collective #%llu: rank %d did not reach the call within MSCCLPP_TIMEOUT",
                            (unsigned long long)seq, r);
        sched_yield();
      }
    }
    struct boardBuf b[2];
    memcpy(b, pe->buf, sizeof(b));
    L->send[r] = NULL;
    L->recv[r] = NULL;
    if (b[0].id != 0) MSCCLPP_RETURN_ON_ERROR(openPeer(g, r, &b[0], (uint8_t**)&L->send[r]));
    if (b[1].id != 0) MSCCLPP_RETURN_ON_ERROR(openPeer(g, r, &b[1], &L->recv[r]));
  }
  return mscclppSuccess;
}

/* ---- launches ------------------------------------------------------------------- */

/* Bytes of input up to which allreduce uses LL packets rather than the
 * direct kernel (two barriers): where the two cross on the H200 (bench_coll's
 * algorithm table, bench/RESULTS.md). Packets cost k-1 remote writes of twice
 * the data per rank, so the crossing comes earlier with more ranks. */
/* Where packets stop beating the direct kernel (bench_coll's "by algorithm"
 * table, H200, packet grid of SMs / ranks sharing the GPU). */
static uint64_t packetMaxBytes(int nranks) {
  return nranks <= 2 ? (512u << 10) : nranks <= 4 ? (256u << 10) : (64u << 10);
}

/* The allreduce algorithm for `bytes` per rank on k ranks (MSCCLPP_ALGO's
 * choice when it names one that applies): one-shot packets, two-phase
 * packets (3-4 ranks, from the one-shot's reach to PACKET2_MAX_BYTES), else
 * rsag. H200, 4 ranks, graph us (bench_coll's algorithm table,
 * bench/RESULTS.md): 512 KiB packet 13.1 / packet2 9.0 / rsag 10.5;
 * 256 KiB 6.9 / 7.9 / 10.2; 1 MiB 22.4 / 13.7 / 11.1. Two ranks: packet2
 * never wins; more than 4: not measured. */
#define PACKET2_MAX_BYTES ((uint64_t)512 << 10)
_Static_assert(PACKET2_MAX_BYTES <= MSCCLPP_COLL_GPU_LL2_MAX_BYTES, "the two-phase slots hold the message");
static int allreduceAlgo(struct mscclppCollGpu* g, const char* forced, int k, uint64_t bytes) {
  if (forced != NULL && strcmp(forced, "packet") == 0) return MSCCLPP_COLL_GPU_ALGO_PACKET;
  if (forced != NULL && strcmp(forced, "packet2") == 0) {
    if (bytes <= MSCCLPP_COLL_GPU_LL2_MAX_BYTES) return MSCCLPP_COLL_GPU_ALGO_PACKET2;
    if (!g->packet2FallbackTold) {
      g->packet2FallbackTold = 1;
      MSCCLPP_INFO(MSCCLPP_LOG_COLL,
                   "rank %d: MSCCLPP_ALGO=allreduce=packet2 serves up to %llu bytes per rank; a call of %llu bytes "
                   "takes the size rule's algorithm (said once)",
                   g->rank, (unsigned long long)MSCCLPP_COLL_GPU_LL2_MAX_BYTES, (unsigned long long)bytes);
    }
  }
  if (forced != NULL && strcmp(forced, "rsag") == 0) return MSCCLPP_COLL_GPU_ALGO_DIRECT;
  if (bytes <= packetMaxBytes(k)) return MSCCLPP_COLL_GPU_ALGO_PACKET;
  if (k > 2 && k <= 4 && bytes <= PACKET2_MAX_BYTES) return MSCCLPP_COLL_GPU_ALGO_PACKET2;
  return MSCCLPP_COLL_GPU_ALGO_DIRECT;
}

static void fillCommon(struct mscclppCollGpu* g, struct mscclppCollGpuLaunch* L) {
  L->rank = g->rank;
  L->nranks = g->nranks;
  for (int r = 0; r < g->nranks; r++) L->scratch[r] = g->scratchOf[r];
  L->state = g->state;
  L->wait = g->wait;
  L->scopeGpu = g->scopeGpu;
  L->llSlotBytes = g->llSlotBytes;
  L->p2pSlotBytes = g->p2pSlotBytes;
  L->ll2SlotBytes = g->ll2SlotBytes;
}

/* Blocks for `bytes` of work per rank: about one per `unit` bytes, at most
 * this rank's share of what the device holds at once, `perSm` blocks per SM
 * (every rank's blocks must be resident together, as they wait for each
 * other). */
static uint32_t blocksFor(const struct mscclppCollGpu* g, uint64_t bytes, uint64_t unit, int perSm) {
  uint64_t cap = (uint64_t)(g->nsm * perSm / g->sharing);
  if (cap < 1) cap = 1;
  if (cap > MSCCLPP_COLL_GPU_MAX_BLOCKS) cap = MSCCLPP_COLL_GPU_MAX_BLOCKS;
  uint64_t n = (bytes + unit - 1) / unit;
  if (n < 1) n = 1;
  return (uint32_t)(n < cap ? n : cap);
}


mscclppResult_t mscclppCollGpuRun(struct mscclppComm* comm, const struct mscclppCollArgs* a) {
  if (mscclppCollPortWanted(comm, a->kind, a->algo)) return mscclppCollPortRun(comm, a); /* coll_port.c */
  enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  CUDA_TRY(cudaThreadExchangeStreamCaptureMode(&mode), "cudaThreadExchangeStreamCaptureMode");
  mscclppResult_t res = mscclppSuccess;
  struct mscclppCollGpu* g = NULL;
  cudaStream_t stream = (cudaStream_t)a->stream;
  const size_t ts = a->typeSize;
  const int k = comm->nranks;
  /* bytes of each rank's input and output */
  size_t inBytes = a->count * ts, outBytes = a->count * ts;
  switch (a->kind) {
    case MSCCLPP_COLL_ALLGATHER:
      outBytes *= (size_t)k;
      break;
    case MSCCLPP_COLL_REDUCESCATTER:
      inBytes *= (size_t)k;
      break;
    case MSCCLPP_COLL_ALLTOALL:
      inBytes *= (size_t)k;
      outBytes *= (size_t)k;
      break;
    default:
      break;
  }
  const uint8_t* send = (const uint8_t*)a->send;
  uint8_t* recv = (uint8_t*)a->recv;
  int hasSend = !(a->kind == MSCCLPP_COLL_BROADCAST && comm->rank != a->root);
  int hasRecv = !(a->kind == MSCCLPP_COLL_REDUCE && comm->rank != a->root);
  if (k == 1) { /* one rank: a copy (every operator of one value is the value) */
    if (hasRecv && send != recv) {
      cudaError_t e = cudaMemcpyAsync(recv, send, outBytes, cudaMemcpyDeviceToDevice, stream);
      if (e != cudaSuccess) res = cudaFail(e, "cudaMemcpyAsync");
    }
    goto restore;
  }
  res = gpuState(comm, &g);
  if (res != mscclppSuccess) goto restore;
  {
    struct mscclppCollGpuLaunch L;
    memset(&L, 0, sizeof(L));
    fillCommon(g, &L);
    L.kind = (int)a->kind;
    L.type = (int)a->type;
    L.op = (int)a->op;
    L.root = a->root;
    L.count = a->count;
    int algo = a->kind == MSCCLPP_COLL_ALLREDUCE ? allreduceAlgo(g, a->algo, k, inBytes) : MSCCLPP_COLL_GPU_ALGO_DIRECT;
    if (algo != MSCCLPP_COLL_GPU_ALGO_DIRECT) {
      /* packets: no rendezvous, only my own buffers are used */
      L.algo = algo;
      L.send[g->rank] = send;
      L.recv[g->rank] = recv;
      L.vec16 = (((uintptr_t)send | (uintptr_t)recv) & 7) == 0;
      /* the same grid for every packet kernel of a kind (see the kernels):
       * blocks without packets only advance their counters */
      L.nthreads = MSCCLPP_COLL_GPU_PACKET_THREADS;
      if (algo == MSCCLPP_COLL_GPU_ALGO_PACKET2) {
        L.nblocks = g->packetBlocks;
      } else if (inBytes <= PACKET_SMALL_BYTES) { /* the three grids (coll_gpu.h) */
        L.nblocks = 1;
        L.llGrid = MSCCLPP_COLL_GPU_LL_SMALL;
      } else if (inBytes <= PACKET_MID_BYTES) {
        L.nblocks = g->packetBlocks < PACKET_MID_BLOCKS ? g->packetBlocks : PACKET_MID_BLOCKS;
        L.llGrid = MSCCLPP_COLL_GPU_LL_MID;
      } else {
        L.nblocks = g->packetBlocks;
        L.llGrid = MSCCLPP_COLL_GPU_LL_BIG;
      }
      const char* why = NULL;
      res = mscclppCollGpuEnqueue(&L, NULL, stream, g->pdl, &why);
      if (res != mscclppSuccess) res = mscclppErr(res, MSCCLPP_LOG_COLL, "launching the allreduce kernel: %s", why);
      goto restore;
    }
    /* direct: my buffers (staged when they cannot be shared), then the peers' */
    L.algo = MSCCLPP_COLL_GPU_ALGO_DIRECT;
    struct boardBuf mine[2];
    memset(mine, 0, sizeof(mine));
    const uint8_t* kSend = send;
    uint8_t* kRecv = recv;
    int inPlace = hasSend && hasRecv && send >= recv && send < recv + outBytes;
    /* An in-place all-to-all pulls every peer's block of the input that the
     * peers overwrite with their own output: the input is staged aside. */
    int stageIn = inPlace && a->kind == MSCCLPP_COLL_ALLTOALL;
    int stagedRecv = 0, stagedSend = 0;
    if (hasRecv) {
      int ok = 0;
      res = describeOwn(g, recv, &mine[1], &ok);
      if (res == mscclppSuccess && !ok) {
        res = stageBuffer(g, 1, outBytes, (void**)&kRecv);
        if (res == mscclppSuccess) res = describeOwn(g, kRecv, &mine[1], &ok);
        stagedRecv = 1;
      }
      if (res != mscclppSuccess) goto restore;
    }
    if (hasSend) {
      int ok = 0;
      if (inPlace && stagedRecv && !stageIn) {
        kSend = kRecv + (send - recv);
        res = describeOwn(g, kSend, &mine[0], &ok);
        stagedSend = 1;
      } else {
        if (!stageIn) res = describeOwn(g, send, &mine[0], &ok);
        if (res == mscclppSuccess && !ok) {
          res = stageBuffer(g, 0, inBytes, (void**)&kSend);
          if (res == mscclppSuccess) res = describeOwn(g, kSend, &mine[0], &ok);
          stagedSend = 1;
        }
      }
      if (res != mscclppSuccess) goto restore;
      if (stagedSend) {
        cudaError_t e = cudaMemcpyAsync((void*)kSend, send, inBytes, cudaMemcpyDeviceToDevice, stream);
        if (e != cudaSuccess) {
          res = cudaFail(e, "cudaMemcpyAsync (staging in)");
          goto restore;
        }
      }
    }
    res = rendezvous(comm, g, mine, &L, kSend, kRecv);
    if (res != mscclppSuccess) goto restore;
    /* alignment of every pointer and of every offset the kernel adds */
    uintptr_t bits = 0;
    for (int r = 0; r < k; r++) bits |= (uintptr_t)L.send[r] | (uintptr_t)L.recv[r];
    if (a->kind == MSCCLPP_COLL_ALLGATHER || a->kind == MSCCLPP_COLL_REDUCESCATTER ||
        a->kind == MSCCLPP_COLL_ALLTOALL)
      bits |= (uintptr_t)(a->count * ts);
    L.vec16 = (bits & 15) == 0;
    int copyOnly = a->kind == MSCCLPP_COLL_ALLGATHER || a->kind == MSCCLPP_COLL_BROADCAST ||
                   a->kind == MSCCLPP_COLL_ALLTOALL;
    if (copyOnly) {
      L.type = mscclppUint8;
      L.count = a->count * ts;
    }
    /* bytes each rank moves: its input (allgather), its output (reduce-scatter,
     * all-to-all), or its share of the output (the others) */
    uint64_t work = a->kind == MSCCLPP_COLL_ALLGATHER                                          ? inBytes
                    : a->kind == MSCCLPP_COLL_REDUCESCATTER || a->kind == MSCCLPP_COLL_ALLTOALL ? outBytes
                                                                                                : (outBytes + k - 1) / k;
    if (a->kind == MSCCLPP_COLL_ALLGATHER || a->kind == MSCCLPP_COLL_BROADCAST) {
      /* fan-out copies (one read, every output written): one block of 512
       * threads per SM among the ranks sharing the GPU. Fewer accesses in
       * flight than the full grid below reach more of HBM's rate for this
       * mix, and the smaller blocks meet at the barriers sooner (H200, 256
       * MiB allgather: 88% -> 89-90% of its roofline with 2 ranks, 87% -> 88%
       * with 4; 1 KiB 0.3-0.4 us faster). The reductions lose bandwidth on
       * this grid (256 MiB allreduce 287 -> 314 us), so they keep the full
       * one. bench/RESULTS.md, eighth session. */
      L.nthreads = 512;
      L.nblocks = blocksFor(g, work, 32u << 10, 1);
    } else {
      L.nthreads = 1024;
      if (g->directOcc[L.type] == 0) g->directOcc[L.type] = mscclppCollGpuDirectBlocksPerSm(L.type, L.nthreads);
      L.nblocks = blocksFor(g, work, 32u << 10, g->directOcc[L.type]);
    }
    if (g->directBlocksMax > 0 && L.nblocks > g->directBlocksMax) L.nblocks = g->directBlocksMax;
    const char* why = NULL;
    res = mscclppCollGpuEnqueue(&L, NULL, stream, g->pdl, &why);
    if (res != mscclppSuccess) {
      res = mscclppErr(res, MSCCLPP_LOG_COLL, "launching the %s kernel: %s", mscclppCollKindName(a->kind), why);
      goto restore;
    }
    if (stagedRecv && hasRecv) {
      cudaError_t e = cudaMemcpyAsync(recv, kRecv, outBytes, cudaMemcpyDeviceToDevice, stream);
      if (e != cudaSuccess) res = cudaFail(e, "cudaMemcpyAsync (staging out)");
    }
  }
restore:
  (void)cudaThreadExchangeStreamCaptureMode(&mode);
  return res;
}

mscclppResult_t mscclppCollGpuP2p(struct mscclppComm* comm, const struct mscclppCollP2pOp* ops, int nops,
                                  mscclppStream_t stream) {
  if (mscclppCollPortWanted(comm, MSCCLPP_COLL_SENDRECV, NULL)) return mscclppCollPortP2p(comm, ops, nops, stream);
  if (nops > MSCCLPP_COLL_GPU_MAX_P2P)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_COLL,
                      "a group of %d sends and receives; the GPU backend takes up to %d per group", nops,
                      MSCCLPP_COLL_GPU_MAX_P2P);
  enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  CUDA_TRY(cudaThreadExchangeStreamCaptureMode(&mode), "cudaThreadExchangeStreamCaptureMode");
  struct mscclppCollGpu* g = NULL;
  mscclppResult_t res = gpuState(comm, &g);
  if (res == mscclppSuccess) {
    struct mscclppCollGpuLaunch L;
    memset(&L, 0, sizeof(L));
    fillCommon(g, &L);
    L.kind = MSCCLPP_COLL_SENDRECV;
    static _Thread_local struct mscclppCollGpuP2pList P;
    P.nops = 0;
    uint32_t lanes = 0;
    for (int i = 0; i < nops; i++) {
      if (ops[i].bytes == 0) continue;
      int dup = 0;
      for (uint32_t j = 0; j < P.nops; j++)
        if (P.ops[j].isSend == ops[i].isSend && P.ops[j].peer == ops[i].peer) dup = 1;
      lanes += !dup;
      P.ops[P.nops].isSend = ops[i].isSend;
      P.ops[P.nops].peer = ops[i].peer;
      P.ops[P.nops].buf = (uint8_t*)ops[i].buf;
      P.ops[P.nops].bytes = ops[i].bytes;
      P.nops++;
    }
    if (P.nops > 0) {
      L.nblocks = lanes;
      L.nthreads = 1024;
      const char* why = NULL;
      res = mscclppCollGpuEnqueue(&L, &P, (void*)stream, g->pdl, &why);
      if (res != mscclppSuccess) res = mscclppErr(res, MSCCLPP_LOG_COLL, "launching the send/recv kernel: %s", why);
    }
  }
  (void)cudaThreadExchangeStreamCaptureMode(&mode);
  return res;
}

#endif /* MSCCLPP_HAVE_CUDA */
