/* SPDX-License-Identifier: MIT */
/*
 * The GPU backend, host side (kernels: coll_gpu_kernels.cuh; layout and
 * algorithms: coll_gpu.h).
 *
 * Per communicator, made when the communicator is made (mscclppCollPrepare)
 * or else at the first collective: a scratch allocation in device memory
 * with a memory channel (CUDA IPC) to every peer, the device counters, and
 * this rank's export service.
 *
 * Zero-copy ("direct") algorithms need every rank's user buffers mapped in
 * every rank: each rank has its peers map its buffers through their export
 * services, once per allocation, and the kernels trade the addresses
 * (coll_gpu_export.c); no call waits for a peer's application thread.
 * Buffers that cannot be shared that way (cuMem or pool allocations,
 * managed memory, small cudaMalloc blocks) are staged through a cached
 * cudaMalloc buffer of this rank (a device-to-device copy before and after
 * the kernel, on the caller's stream).
 *
 * Send/recv (mscclppCollGpuP2p) has no barrier to trade addresses at: the
 * sender asks the receiver to map its buffer without waiting for the
 * answer, and sends through the receiver's scratch until a later call finds
 * it; then the receiver pulls (p2pKernel, coll_gpu_p2p.cu).
 *
 * All-to-all-v (runAllToAllv) has its counts in device memory, so no host
 * knows its sizes: its kernel learns them from the peers at its first
 * barrier, and its grid is the same for every call.
 *
 * A call, in parts: its sizes (callSizes), the algorithm the selection
 * table chose (coll/select.c, in args->algo), the grid (directGrid; the
 * packet algorithms': coll_gpu_packet_host.c), this rank's buffers staged
 * where needed (stageIn, stageOut) and exported (direct algorithms only),
 * the launch.
 * Host setup calls run with the thread's stream-capture mode relaxed, so
 * the first call may itself be captured in a CUDA graph.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "coll/gpu/coll_gpu.h"
#include "core/error.h"
#include "core/log.h"
#include "core/report.h"
#include "core/trace.h"

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
void mscclppCollGpuRelease(struct mscclppComm* comm, void* state) {
  (void)comm;
  (void)state;
}
mscclppResult_t mscclppCollGpuPrepare(struct mscclppComm* comm) {
  (void)comm;
  return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_COLL, "GPU collectives: this build has no CUDA");
}
mscclppResult_t mscclppCollGpuExportHint(struct mscclppComm* comm, const void* buf) {
  (void)comm;
  (void)buf;
  return mscclppSuccess;
}
void mscclppCollGpuShare(struct mscclppComm* comm, const void* const* bufs, int n,
                         uint64_t (*mapped)[MSCCLPP_COLL_SHARE_RANKS]) {
  (void)comm;
  (void)bufs;
  memset(mapped, 0, (size_t)n * sizeof(*mapped));
}
void mscclppCollGpuLaunchBefore(struct mscclppComm* comm, mscclppStream_t stream) {
  (void)comm;
  (void)stream;
}
void mscclppCollGpuLaunchAfter(struct mscclppComm* comm, mscclppStream_t stream) {
  (void)comm;
  (void)stream;
}

#else

#include "coll/gpu/coll_gpu_state.h"
#include "gpu/abort.h"
#include "gpu/gpu.h"

#define TAG_BASE MSCCLPP_COLL_GPU_TAG_BASE
MSCCLPP_STATIC_ASSERT(MSCCLPP_COLL_SHARE_RANKS == MAXR, "mscclppCollGpuShare's rows are the backend's ranks");

void mscclppCollGpuRelease(struct mscclppComm* comm, void* state) {
  struct mscclppCollGpu* g = (struct mscclppCollGpu*)state;
  mscclppGpuDeviceSynchronize(); /* kernels that use the channels must be done */
  for (int i = 0; i < g->nreaping; i++) (void)mscclppCollGpuServiceClose(g->service, g->reaping[i]);
  free(g->reaping);
  mscclppGpuMarkDestroy(g->reapMark);
  mscclppCollGpuServiceStop(g->service); /* closes what this rank's kernels used of the peers' */
  for (int r = 0; r < g->nranks; r++) {
    if (g->chan[r] != NULL) (void)mscclppMemoryChannelDestroy(g->chan[r]);
    if (g->conn[r] != NULL) (void)mscclppConnectionDestroy(g->conn[r]);
  }
  /* every peer must have closed what it opened of ours before we free it */
  (void)mscclppBootstrapBarrier(comm);
  if (g->scratchMem != NULL) (void)mscclppMemoryDeregister(g->scratchMem);
  if (g->scratch != NULL) (void)mscclppMemFree(comm, g->scratch);
  mscclppGpuDeviceFree(g->device, g->state);
  for (int i = 0; i < 2; i++) mscclppGpuDeviceFree(g->device, g->stage[i]);
  for (int i = 0; i < g->nretired; i++) mscclppGpuDeviceFree(g->device, g->retired[i]);
  free(g);
}

/* The largest send/recv that travels as packets: MSCCLPP_COLL_P2P_LL_MAX,
 * at most what the slots hold, and the smallest of every rank's choice: a
 * receiver polls the packet ring only for an op its sender put there, and
 * each side decides from its own count and this value. */
static mscclppResult_t agreeP2pLlMax(struct mscclppComm* comm, uint64_t* out) {
  uint64_t mine = (uint64_t)comm->params.collP2pLlMax; /* >= 0: mscclppParamsLoad checks */
  if (mine > MSCCLPP_COLL_GPU_P2PLL_CAP) mine = MSCCLPP_COLL_GPU_P2PLL_CAP;
  uint64_t agreed = mine;
  MSCCLPP_RETURN_ON_ERROR(mscclppCollAgreeMin(comm, mine, &agreed));
  if (agreed != mine)
    MSCCLPP_INFO(MSCCLPP_LOG_COLL,
                 "rank %d: send/recv as packets up to %llu bytes, the smallest of the ranks' MSCCLPP_COLL_P2P_LL_MAX "
                 "(here %llu)",
                 comm->rank, (unsigned long long)agreed, (unsigned long long)mine);
  *out = agreed;
  return mscclppSuccess;
}

/* The state's setup on g (zeroed; every rank reaches the same call). On
 * failure what was made stays in g for mscclppCollGpuRelease. */
static mscclppResult_t gpuSetup(struct mscclppComm* comm, struct mscclppCollGpu* g) {
  g->rank = comm->rank;
  g->nranks = comm->nranks;
  struct mscclppGpuDeviceInfo dev;
  MSCCLPP_RETURN_ON_ERROR(mscclppGpuCurrentDeviceInfo(&dev));
  g->device = dev.device;
  g->nsm = dev.smCount;
  MSCCLPP_RETURN_ON_ERROR(mscclppCommAbortOf(comm, &g->abort));
  mscclppAbortWaitContext(g->abort, comm->params.timeout, 1, &g->wait);

  /* scratch: flags | small, mid LL slots | p2pll slots | LL 2 x nranks slots | p2p nranks slots | ... (coll_gpu.h) */
  uint64_t per = comm->params.collScratchBytes > 65536 ? (uint64_t)comm->params.collScratchBytes : 65536;
  per = per / 64 * 64;
  g->p2pSlotBytes = per;
  g->llSlotBytes = per / 4 / 16 * 16;
  /* a share of the largest two-phase message, as packets (twice its bytes) */
  g->ll2SlotBytes = ((MSCCLPP_COLL_GPU_LL2_MAX_BYTES / 8 + g->nranks - 1) / g->nranks * 16 + 63) / 64 * 64;
  g->scratchBytes = MSCCLPP_COLL_GPU_SCRATCH_BYTES(g->nranks, g->llSlotBytes, g->p2pSlotBytes, g->ll2SlotBytes);
  MSCCLPP_RETURN_ON_ERROR(mscclppMemAlloc(comm, mscclppMemKindDevice, g->scratchBytes, &g->scratch));
  MSCCLPP_RETURN_ON_ERROR(
      mscclppMemoryRegister(comm, g->scratch, g->scratchBytes, mscclppTransportCudaIpc, &g->scratchMem));
  /* zeroed on the library's stream: the first call may be captured */
  MSCCLPP_RETURN_ON_ERROR(mscclppGpuDeviceAlloc(g->device, sizeof(*g->state), (void**)&g->state));
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
  MSCCLPP_RETURN_ON_ERROR(agreeP2pLlMax(comm, &g->p2pLlMax));
  /* The packet grid: an SM's worth per block, as many as stay resident with
   * every rank's blocks (more blocks than 16 made the mid sizes much faster
   * and left 8-64 KiB where they were: bench/HISTORY.md, "Collectives:
   * packet grids"), or MSCCLPP_COLL_PACKET_BLOCKS. */
  uint32_t cap = (uint32_t)(g->nsm / g->sharing);
  if (cap > MSCCLPP_COLL_GPU_MAX_BLOCKS) cap = MSCCLPP_COLL_GPU_MAX_BLOCKS;
  g->packetBlocks = comm->params.collPacketBlocks > 0 && (uint32_t)comm->params.collPacketBlocks < cap
                        ? (uint32_t)comm->params.collPacketBlocks
                        : cap;
  if (g->packetBlocks < 1) g->packetBlocks = 1;
  g->directBlocksMax = comm->params.collDirectBlocks > 0 ? (uint32_t)comm->params.collDirectBlocks : 0;
  g->pdl = comm->params.collPdl != 0 && dev.ccMajor >= 9;
  g->p2pZeroCopy = comm->params.collP2pZeroCopy != 0;
  g->p2pZeroCopyMin = (uint64_t)comm->params.collP2pZeroCopyMin; /* >= 0: mscclppParamsLoad checks */
  MSCCLPP_RETURN_ON_ERROR(mscclppCollGpuServiceStart(comm, g->device, NULL, &g->service));
  MSCCLPP_INFO(MSCCLPP_LOG_COLL,
               "rank %d of %d: GPU collectives on device %d (%d SMs), which %d ranks share (grids sized for that), "
               "%s scope, scratch %zu bytes, send/recv as packets up to %llu bytes",
               g->rank, g->nranks, g->device, g->nsm, g->sharing, g->scopeGpu ? "gpu" : "system", g->scratchBytes,
               (unsigned long long)g->p2pLlMax);
  return mscclppSuccess;
}


/* The state, built privately (coll.h's first-use policy). A failed build
 * hands what it made to the slot: peers may have mapped its scratch, so it
 * is released at destroy, with every rank. */
static mscclppResult_t gpuBuild(struct mscclppComm* comm, void** built) {
  if (comm->nranks > MAXR)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_COLL,
                      "GPU collectives: %d ranks on one host; this release supports up to %d", comm->nranks, MAXR);
  struct mscclppCollGpu* g = (struct mscclppCollGpu*)calloc(1, sizeof(*g));
  if (g == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_COLL, "out of memory");
  *built = g;
  return gpuSetup(comm, g);
}

static mscclppResult_t gpuState(struct mscclppComm* comm, struct mscclppCollGpu** out) {
  return mscclppCollBackendState(comm, MSCCLPP_COLL_BACKEND_GPU, gpuBuild, (void**)out);
}

/* ---- staging ---------------------------------------------------------------------- */

mscclppResult_t mscclppCollGpuStageBuffer(struct mscclppCollGpu* g, int which, size_t bytes, void** out) {
  if (g->stageBytes[which] < bytes) {
    if (g->stage[which] != NULL) {
      /* peers may still map it: keep it until destroy */
      if (g->nretired == 64)
        return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_COLL, "too many staging buffer resizes");
      g->retired[g->nretired++] = g->stage[which];
      g->stage[which] = NULL;
    }
    size_t sz = bytes < STAGE_MIN_BYTES ? STAGE_MIN_BYTES : bytes;
    MSCCLPP_RETURN_ON_ERROR(mscclppGpuDeviceAlloc(g->device, sz, &g->stage[which]));
    g->stageBytes[which] = sz;
  }
  *out = g->stage[which];
  return mscclppSuccess;
}

static void fillCommon(const struct mscclppComm* comm, struct mscclppCollGpu* g, struct mscclppCollGpuLaunch* L) {
  L->callSeq = mscclppReportCurrent(comm->report); /* the kernels' wait notes name the call */
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


/* ---- a call, in parts ------------------------------------------------------------ */

/* The sizes of one call on this rank. */
struct gpuCall {
  size_t inBytes, outBytes; /* of this rank's input and output */
  int hasSend, hasRecv;     /* this rank reads an input / writes an output */
};

static void callSizes(const struct mscclppComm* comm, const struct mscclppCollArgs* a, struct gpuCall* c) {
  const size_t k = (size_t)comm->nranks;
  c->inBytes = a->count * a->typeSize;
  c->outBytes = a->count * a->typeSize;
  switch (a->kind) {
    case MSCCLPP_COLL_ALLGATHER:
      c->outBytes *= k;
      break;
    case MSCCLPP_COLL_REDUCESCATTER:
      c->inBytes *= k;
      break;
    case MSCCLPP_COLL_ALLTOALL:
      c->inBytes *= k;
      c->outBytes *= k;
      break;
    default:
      break;
  }
  c->hasSend = !(a->kind == MSCCLPP_COLL_BROADCAST && comm->rank != a->root);
  c->hasRecv = !(a->kind == MSCCLPP_COLL_REDUCE && comm->rank != a->root);
}

/* The kernels' name for the algorithm the selection table chose. */
static int kernelAlgo(mscclppCollAlgo algo) {
  return algo == MSCCLPP_COLL_ALGO_PACKET    ? MSCCLPP_COLL_GPU_ALGO_PACKET
         : algo == MSCCLPP_COLL_ALGO_PACKET2 ? MSCCLPP_COLL_GPU_ALGO_PACKET2
                                             : MSCCLPP_COLL_GPU_ALGO_DIRECT;
}

/* The direct kernel's grid, from the bytes each rank moves: its input
 * (allgather), its output (reduce-scatter, all-to-all), or its share of the
 * output (the others). */
static void directGrid(struct mscclppCollGpu* g, const struct mscclppCollArgs* a, const struct gpuCall* c,
                       struct mscclppCollGpuLaunch* L) {
  const int k = g->nranks;
  uint64_t work = a->kind == MSCCLPP_COLL_ALLGATHER                                          ? c->inBytes
                  : a->kind == MSCCLPP_COLL_REDUCESCATTER || a->kind == MSCCLPP_COLL_ALLTOALL ? c->outBytes
                                                                                              : (c->outBytes + k - 1) / k;
  if (a->kind == MSCCLPP_COLL_ALLGATHER || a->kind == MSCCLPP_COLL_BROADCAST) {
    /* fan-out copies (one read, every output written): one block of 512
     * threads per SM among the ranks sharing the GPU. Fewer accesses in
     * flight than the full grid below reach more of HBM's rate for this
     * mix, and the smaller blocks meet at the barriers sooner (on the H200
     * a 256 MiB allgather came closer to its roofline with 2 and 4 ranks,
     * and small ones got faster). The reductions lose bandwidth on this
     * grid, so they keep the full one. bench/HISTORY.md, "Allgather's grid"
     * and "Figures moved out of code comments". */
    L->nthreads = 512;
    L->nblocks = blocksFor(g, work, 32u << 10, 1);
  } else {
    L->nthreads = 1024;
    if (g->directOcc[L->type] == 0) g->directOcc[L->type] = mscclppCollGpuDirectBlocksPerSm(L->type, L->nthreads);
    L->nblocks = blocksFor(g, work, 32u << 10, g->directOcc[L->type]);
  }
  if (g->directBlocksMax > 0 && L->nblocks > g->directBlocksMax) L->nblocks = g->directBlocksMax;
}

/* This rank's buffers for a direct kernel, described for export
 * (mine[0]: send, mine[1]: recv); those that cannot be shared are replaced
 * by staging buffers (*kSend, *kRecv), the input copied in on the stream. */
static mscclppResult_t stageIn(struct mscclppCollGpu* g, const struct mscclppCollArgs* a, const struct gpuCall* c,
                               mscclppStream_t stream, struct ownBuf mine[2], const uint8_t** kSend, uint8_t** kRecv,
                               int* stagedRecv) {
  const uint8_t* send = (const uint8_t*)a->send;
  uint8_t* recv = (uint8_t*)a->recv;
  int inPlace = c->hasSend && c->hasRecv && send >= recv && send < recv + c->outBytes;
  /* An in-place all-to-all pulls every peer's block of the input that the
   * peers overwrite with their own output: the input is staged aside. */
  int stageAside = inPlace && a->kind == MSCCLPP_COLL_ALLTOALL;
  int stagedSend = 0;
  *kSend = send;
  *kRecv = recv;
  *stagedRecv = 0;
  if (c->hasRecv) {
    int ok = 0;
    MSCCLPP_RETURN_ON_ERROR(mscclppCollGpuDescribeOwn(g, recv, &mine[1], &ok));
    if (!ok) {
      MSCCLPP_RETURN_ON_ERROR(mscclppCollGpuStageBuffer(g, 1, c->outBytes, (void**)kRecv));
      *stagedRecv = 1;
      MSCCLPP_RETURN_ON_ERROR(mscclppCollGpuDescribeOwn(g, *kRecv, &mine[1], &ok));
    }
  }
  if (!c->hasSend) return mscclppSuccess;
  int ok = 0;
  if (inPlace && *stagedRecv && !stageAside) {
    *kSend = *kRecv + (send - recv);
    stagedSend = 1;
    MSCCLPP_RETURN_ON_ERROR(mscclppCollGpuDescribeOwn(g, *kSend, &mine[0], &ok));
  } else {
    if (!stageAside) MSCCLPP_RETURN_ON_ERROR(mscclppCollGpuDescribeOwn(g, send, &mine[0], &ok));
    if (!ok) {
      MSCCLPP_RETURN_ON_ERROR(mscclppCollGpuStageBuffer(g, 0, c->inBytes, (void**)kSend));
      stagedSend = 1;
      MSCCLPP_RETURN_ON_ERROR(mscclppCollGpuDescribeOwn(g, *kSend, &mine[0], &ok));
    }
  }
  if (stagedSend) {
    MSCCLPP_RETURN_ON_ERROR(mscclppGpuMemcpyOnAppStream(stream, (void*)*kSend, send, c->inBytes));
  }
  return mscclppSuccess;
}

/* Peers' mappings that newer allocations replaced (coll_gpu_export.c) are
 * closed here, on the application thread before a launch, once the mark
 * recorded after this rank's last launch is done: closing a mapping waits
 * for every kernel of the process, and one of ours still running may be
 * waiting for a peer whose host waits for us (NCCL lets it). Not while the
 * stream is captured: a record there marks nothing that runs now. Kernels
 * of this communicator launched from graphs replayed since, or on another
 * stream than the last call's, are not covered by the mark: a mapping is
 * then closed while they run, and the close waits for them. */
static void reapBefore(struct mscclppCollGpu* g, mscclppStream_t stream) {
  if (g->nreaping == 0 || !g->reapArmed) return;
  int done = 0;
  if (mscclppGpuMarkDone(g->reapMark, &done) != mscclppSuccess || !done) return;
  if (mscclppGpuStreamCapturing(stream)) return;
  for (int i = 0; i < g->nreaping; i++)
    if (mscclppCollGpuServiceClose(g->service, g->reaping[i]) != mscclppSuccess)
      MSCCLPP_INFO(MSCCLPP_LOG_COLL, "rank %d: closing a replaced mapping of a peer's buffer: %s", g->rank,
                   mscclppGetLastError());
  g->nreaping = 0;
  g->reapArmed = 0;
}

/* After a launch: take what the service retired, and mark the launch. */
static void reapAfter(struct mscclppCollGpu* g, mscclppStream_t stream) {
  if (g->nreaping == 0 && mscclppCollGpuServiceRetired(g->service) == 0) return;
  if (mscclppCollGpuServiceRetired(g->service) > 0) {
    void** list = NULL;
    int n = 0;
    (void)mscclppCollGpuServiceTakeRetired(g->service, &list, &n);
    if (g->nreaping + n > g->capReaping) {
      int cap = 2 * (g->nreaping + n);
      void** grown = (void**)realloc(g->reaping, (size_t)cap * sizeof(*grown));
      if (grown == NULL) { /* the mappings stay until the communicator goes */
        MSCCLPP_WARN(MSCCLPP_LOG_COLL, "rank %d: out of memory: %d replaced mappings of peers' buffers stay open",
                     g->rank, n);
        free(list);
        return;
      }
      g->reaping = grown;
      g->capReaping = cap;
    }
    for (int i = 0; i < n; i++) g->reaping[g->nreaping++] = list[i];
    free(list);
  }
  if (g->reapMark == NULL && mscclppGpuMarkCreate(&g->reapMark) != mscclppSuccess) return;
  int recorded = 0;
  if (mscclppGpuMarkRecord(g->reapMark, stream, &recorded) == mscclppSuccess && recorded) g->reapArmed = 1;
}

mscclppResult_t mscclppCollGpuLaunchKernel(struct mscclppComm* comm, struct mscclppCollGpu* g,
                                           struct mscclppCollGpuLaunch* L, const struct mscclppCollGpuP2pList* p2p,
                                           const struct mscclppCollGpuP2pLlList* ll, mscclppStream_t stream,
                                           const char* what) {
  if (mscclppTraceOn()) mscclppCollTraceKernel(comm, g->device, L->nblocks, what, stream, &L->trace);
  const char* why = NULL;
  reapBefore(g, stream);
  mscclppResult_t res = ll != NULL ? mscclppCollGpuEnqueueP2pLl(L, ll, (void*)stream, g->pdl, &why)
                                   : mscclppCollGpuEnqueue(L, p2p, (void*)stream, g->pdl, &why);
  if (res != mscclppSuccess) return mscclppErr(res, MSCCLPP_LOG_COLL, "launching the %s kernel: %s", what, why);
  reapAfter(g, stream);
  return mscclppSuccess;
}

/* L->send[p], L->recv[p] for a direct kernel: this rank's buffers as each
 * peer maps them ([rank]: as they are here). */
static mscclppResult_t exportBuffers(struct mscclppComm* comm, struct mscclppCollGpu* g, const struct ownBuf mine[2],
                                     const uint8_t* kSend, uint8_t* kRecv, struct mscclppCollGpuLaunch* L) {
  uint64_t mapped[2][MAXR];
  memset(mapped, 0, sizeof(mapped));
  /* both buffers in one round trip per peer (a first call on new buffers
   * waits for the peers' mappings once, not twice) */
  MSCCLPP_RETURN_ON_ERROR(mscclppCollGpuExportMany(comm, g, mine, 2, mapped));
  for (int s = 0; s < 2; s++) {
    for (int p = 0; p < g->nranks; p++) {
      uint64_t a = mine[s].id != 0 && p != g->rank ? mapped[s][p] + mine[s].offset : 0;
      if (s == 0)
        L->send[p] = p == g->rank ? kSend : (const uint8_t*)(uintptr_t)a;
      else
        L->recv[p] = p == g->rank ? kRecv : (uint8_t*)(uintptr_t)a;
    }
  }
  return mscclppSuccess;
}

/* A direct kernel: this rank's buffers (staged when they cannot be
 * shared) exported to the peers, the launch, the output copied out of its
 * staging buffer. */
static mscclppResult_t runDirect(struct mscclppComm* comm, struct mscclppCollGpu* g, const struct mscclppCollArgs* a,
                                 const struct gpuCall* c, struct mscclppCollGpuLaunch* L) {
  mscclppStream_t stream = a->stream;
  struct ownBuf mine[2];
  memset(mine, 0, sizeof(mine));
  const uint8_t* kSend = NULL;
  uint8_t* kRecv = NULL;
  int stagedRecv = 0;
  MSCCLPP_RETURN_ON_ERROR(stageIn(g, a, c, stream, mine, &kSend, &kRecv, &stagedRecv));
  MSCCLPP_RETURN_ON_ERROR(exportBuffers(comm, g, mine, kSend, kRecv, L));
  /* alignment of this rank's pointers and of every offset the kernel adds
   * (the kernel checks the peers' pointers) */
  uintptr_t bits = (uintptr_t)kSend | (uintptr_t)kRecv;
  if (a->kind == MSCCLPP_COLL_ALLGATHER || a->kind == MSCCLPP_COLL_REDUCESCATTER || a->kind == MSCCLPP_COLL_ALLTOALL)
    bits |= (uintptr_t)(a->count * a->typeSize);
  L->vec16 = (bits & 15) == 0;
  if (a->kind == MSCCLPP_COLL_ALLGATHER || a->kind == MSCCLPP_COLL_BROADCAST || a->kind == MSCCLPP_COLL_ALLTOALL) {
    L->type = mscclppUint8; /* copy-only: bytes */
    L->count = a->count * a->typeSize;
  }
  directGrid(g, a, c, L);
  MSCCLPP_RETURN_ON_ERROR(mscclppCollGpuLaunchKernel(comm, g, L, NULL, NULL, stream, mscclppCollKindName(a->kind)));
  if (stagedRecv && c->hasRecv) { /* staging out */
    MSCCLPP_RETURN_ON_ERROR(mscclppGpuMemcpyOnAppStream(stream, a->recv, kRecv, c->outBytes));
  }
  return mscclppSuccess;
}

/* An all-to-all-v (coll.h). No rank knows the sizes, and every rank's grid
 * must be the same: one block per SM among the ranks sharing the GPU, for
 * every call. The peers pull from this rank's input, which is exported to
 * them (an input that cannot be shared is staged whole: sendcapacity
 * elements); only this rank writes its output, which needs neither. The
 * counts stay on the device: the kernel reads and writes them. */
static mscclppResult_t runAllToAllv(struct mscclppComm* comm, struct mscclppCollGpu* g,
                                    const struct mscclppCollArgs* a) {
  const struct mscclppCollCounts* v = a->v;
  struct mscclppCollGpuLaunch L;
  memset(&L, 0, sizeof(L));
  fillCommon(comm, g, &L);
  L.kind = MSCCLPP_COLL_ALLTOALLV;
  L.algo = MSCCLPP_COLL_GPU_ALGO_DIRECT;
  L.type = mscclppUint8;
  const size_t sendBytes = v->sendCapacity * a->typeSize;
  const uint8_t* kSend = (const uint8_t*)a->send;
  if (g->nranks > 1 && sendBytes > 0) {
    struct ownBuf mine;
    memset(&mine, 0, sizeof(mine));
    int ok = 0;
    MSCCLPP_RETURN_ON_ERROR(mscclppCollGpuDescribeOwn(g, kSend, &mine, &ok));
    if (!ok) {
      MSCCLPP_RETURN_ON_ERROR(mscclppCollGpuStageBuffer(g, 0, sendBytes, (void**)&kSend));
      MSCCLPP_RETURN_ON_ERROR(mscclppCollGpuDescribeOwn(g, kSend, &mine, &ok));
      if (!ok)
        return mscclppErr(mscclppInternalError, MSCCLPP_LOG_COLL,
                          "mscclppAllToAllv: the staging buffer of %zu bytes cannot be shared with the peers",
                          sendBytes);
      MSCCLPP_RETURN_ON_ERROR(mscclppGpuMemcpyOnAppStream(a->stream, (void*)kSend, a->send, sendBytes));
    }
    uint64_t mapped[MAXR] = {0};
    MSCCLPP_RETURN_ON_ERROR(mscclppCollGpuExport(comm, g, &mine, mapped));
    for (int p = 0; p < g->nranks; p++)
      if (p != g->rank) L.send[p] = (const uint8_t*)(uintptr_t)(mapped[p] + mine.offset);
  }
  L.send[g->rank] = kSend;
  L.recv[g->rank] = (uint8_t*)a->recv;
  L.nthreads = 1024;
  L.nblocks = blocksFor(g, MSCCLPP_COLL_GPU_MAX_BLOCKS, 1, 1);
  if (g->directBlocksMax > 0 && L.nblocks > g->directBlocksMax) L.nblocks = g->directBlocksMax;
  const struct mscclppCollGpuCounts counts = {v->sendcounts, v->sdispls,       v->recvcounts,   v->rdispls,
                                              a->typeSize,    v->sendCapacity, v->recvCapacity};
  const char* why = NULL;
  mscclppResult_t res = mscclppCollGpuEnqueueAllToAllv(&L, &counts, (void*)a->stream, g->pdl, &why);
  if (res != mscclppSuccess) return mscclppErr(res, MSCCLPP_LOG_COLL, "launching the alltoallv kernel: %s", why);
  return mscclppSuccess;
}

/* The call, with the thread's capture mode relaxed by the caller. */
static mscclppResult_t gpuRun(struct mscclppComm* comm, const struct mscclppCollArgs* a) {
  if (a->kind == MSCCLPP_COLL_ALLTOALLV) { /* even one rank runs the kernel: the counts are on the device */
    struct mscclppCollGpu* g = NULL;
    MSCCLPP_RETURN_ON_ERROR(gpuState(comm, &g));
    return runAllToAllv(comm, g, a);
  }
  struct gpuCall c;
  callSizes(comm, a, &c);
  if (comm->nranks == 1) { /* one rank: a copy (every operator of one value is the value) */
    if (c.hasRecv && a->send != a->recv) {
      MSCCLPP_RETURN_ON_ERROR(mscclppGpuMemcpyOnAppStream(a->stream, a->recv, a->send, c.outBytes));
    }
    return mscclppSuccess;
  }
  struct mscclppCollGpu* g = NULL;
  MSCCLPP_RETURN_ON_ERROR(gpuState(comm, &g));
  struct mscclppCollGpuLaunch L;
  memset(&L, 0, sizeof(L));
  fillCommon(comm, g, &L);
  L.kind = (int)a->kind;
  L.type = (int)a->type;
  L.op = (int)a->op;
  L.root = a->root;
  L.count = a->count;
  L.algo = kernelAlgo(a->algo);
  if (L.algo != MSCCLPP_COLL_GPU_ALGO_DIRECT) return mscclppCollGpuRunPacket(comm, g, a, c.inBytes, c.outBytes, &L);
  return runDirect(comm, g, a, &c, &L);
}

mscclppResult_t mscclppCollGpuPrepare(struct mscclppComm* comm) {
  if (comm->nranks == 1 || comm->nranks > MAXR) return mscclppSuccess;
  struct mscclppCollGpu* g = NULL;
  return gpuState(comm, &g);
}

mscclppResult_t mscclppCollGpuExportHint(struct mscclppComm* comm, const void* buf) {
  struct mscclppCollState* st = comm->coll;
  struct mscclppCollGpu* g = st != NULL ? (struct mscclppCollGpu*)st->slot[MSCCLPP_COLL_BACKEND_GPU].ready : NULL;
  if (g == NULL || buf == NULL) return mscclppSuccess;
  struct ownBuf b;
  int shareable = 0;
  MSCCLPP_RETURN_ON_ERROR(mscclppCollGpuDescribeOwn(g, buf, &b, &shareable));
  if (!shareable) return mscclppSuccess;
  uint64_t mapped[MAXR];
  return mscclppCollGpuExport(comm, g, &b, mapped);
}

static struct mscclppCollGpu* readyState(struct mscclppComm* comm) {
  struct mscclppCollState* st = comm->coll;
  return st != NULL ? (struct mscclppCollGpu*)st->slot[MSCCLPP_COLL_BACKEND_GPU].ready : NULL;
}

void mscclppCollGpuLaunchBefore(struct mscclppComm* comm, mscclppStream_t stream) {
  struct mscclppCollGpu* g = readyState(comm);
  if (g != NULL) reapBefore(g, stream);
}

void mscclppCollGpuLaunchAfter(struct mscclppComm* comm, mscclppStream_t stream) {
  struct mscclppCollGpu* g = readyState(comm);
  if (g != NULL) reapAfter(g, stream);
}

void mscclppCollGpuShare(struct mscclppComm* comm, const void* const* bufs, int n,
                         uint64_t (*mapped)[MSCCLPP_COLL_SHARE_RANKS]) {
  memset(mapped, 0, (size_t)n * sizeof(*mapped));
  struct mscclppCollGpu* g = readyState(comm);
  if (g == NULL || n <= 0 || n > 2) return;
  struct ownBuf b[2];
  memset(b, 0, sizeof(b));
  for (int i = 0; i < n; i++) {
    int ok = 0;
    if (bufs[i] != NULL && mscclppCollGpuDescribeOwn(g, bufs[i], &b[i], &ok) != mscclppSuccess) ok = 0;
    if (!ok) memset(&b[i], 0, sizeof(b[i])); /* id 0: not asked, staged */
  }
  uint64_t m[2][MAXR];
  memset(m, 0, sizeof(m));
  if (mscclppCollGpuExportMany(comm, g, b, n, m) != mscclppSuccess) {
    MSCCLPP_INFO(MSCCLPP_LOG_COLL, "rank %d: the peers could not map a buffer for zero-copy (staged instead): %s",
                 g->rank, mscclppGetLastError());
    return;
  }
  for (int i = 0; i < n; i++)
    for (int p = 0; p < g->nranks; p++)
      if (b[i].id != 0 && p != g->rank && m[i][p] != 0) mapped[i][p] = m[i][p] + b[i].offset;
}

mscclppResult_t mscclppCollGpuRun(struct mscclppComm* comm, const struct mscclppCollArgs* a) {
  int mode = mscclppGpuIpcCaptureRelax();
  mscclppResult_t res = gpuRun(comm, a);
  mscclppGpuIpcCaptureRestore(mode);
  return res;
}

/* A send's buffer as its receiver maps it (p2pKernel pulls from it), or
 * NULL: through the receiver's scratch. Sends as packets never pull (their
 * receiver polls its packet slots). Sends of one chunk or less always
 * go through the scratch (one copy each side, and the sender need not wait
 * for the receiver), and so do sends under MSCCLPP_COLL_P2P_ZERO_COPY_MIN:
 * the scratch pipeline is faster there (the pull costs a fixed latency that
 * only large sends hide). The mapping is learned without waiting: a first use
 * asks the peer's export service and goes through the scratch; a later
 * call finds the answer (mscclppCollGpuExportCollect). Only while the
 * stream is captured is the answer waited for (one round trip to the
 * peer's service, as the direct collectives do): a graph keeps the path it
 * was captured with. *capturing: -1 until a send needs to know (asking
 * costs a CUDA call, which a group of small sends does without). */
static mscclppResult_t p2pSource(struct mscclppComm* comm, struct mscclppCollGpu* g, const struct mscclppCollP2pOp* op,
                                 uint64_t chunk, mscclppStream_t stream, int* capturing, const uint8_t** src) {
  *src = NULL;
  if (!op->isSend || !g->p2pZeroCopy || op->bytes <= g->p2pLlMax || op->bytes <= chunk ||
      op->bytes < g->p2pZeroCopyMin)
    return mscclppSuccess;
  if (op->peer == g->rank) {
    *src = (const uint8_t*)op->buf;
    return mscclppSuccess;
  }
  struct ownBuf b;
  memset(&b, 0, sizeof(b));
  int ok = 0;
  MSCCLPP_RETURN_ON_ERROR(mscclppCollGpuDescribeOwn(g, op->buf, &b, &ok));
  if (!ok) return mscclppSuccess; /* cannot be shared: the scratch */
  uint64_t mapped = 0;
  if (!mscclppCollGpuExportKnown(g, op->peer, b.id, &mapped)) {
    if (*capturing < 0) *capturing = mscclppGpuStreamCapturing(stream);
    if (!*capturing) return mscclppCollGpuExportAsk(comm, g, &b, op->peer);
    uint64_t all[MAXR] = {0};
    MSCCLPP_RETURN_ON_ERROR(mscclppCollGpuExport(comm, g, &b, all));
    mapped = all[op->peer];
  }
  *src = (const uint8_t*)(uintptr_t)(mapped + b.offset);
  return mscclppSuccess;
}

/* The grid of a send/recv launch: a lane per distinct (direction, peer),
 * in the order of the ops. A lane whose sends all go zero-copy only posts
 * messages: one block. The others (every receive: its sender decides how
 * the data comes) share this rank's part of the device (one block per SM
 * among the ranks sharing it, one per chunk of the group's bytes, or per
 * packet part where every op is packets), each at most one block per
 * channel or part it uses. A group of packet ops only runs p2pLlKernel
 * (smaller blocks); any other, p2pKernel. */
static void p2pGrid(const struct mscclppCollGpu* g, struct mscclppCollGpuP2pList* P, uint64_t totalBytes, int allLl,
                    struct mscclppCollGpuLaunch* L) {
  uint64_t want[2 * MAXR];
  int work[2 * MAXR];
  P->nlanes = 0;
  for (uint32_t i = 0; i < P->nops; i++) {
    const struct mscclppCollGpuP2p* op = &P->ops[i];
    uint32_t l = 0;
    while (l < P->nlanes && !(P->lanes[l].isSend == op->isSend && P->lanes[l].peer == op->peer)) l++;
    if (l == P->nlanes) {
      P->lanes[l].isSend = (int8_t)op->isSend;
      P->lanes[l].peer = (int8_t)op->peer;
      want[l] = 1;
      work[l] = 0;
      P->nlanes++;
    }
    uint64_t ch = op->ll ? (op->bytes + MSCCLPP_COLL_GPU_P2PLL_PART - 1) / MSCCLPP_COLL_GPU_P2PLL_PART
                         : (op->bytes + P->chunkBytes - 1) / P->chunkBytes;
    if (ch > MSCCLPP_COLL_GPU_P2P_CHANNELS) ch = MSCCLPP_COLL_GPU_P2P_CHANNELS;
    if (ch > want[l]) want[l] = ch;
    if (!op->isSend || op->src == NULL) work[l] = 1;
  }
  uint32_t budget = blocksFor(g, totalBytes, allLl ? MSCCLPP_COLL_GPU_P2PLL_PART : P->chunkBytes, 1);
  if (g->directBlocksMax > 0 && budget > g->directBlocksMax) budget = g->directBlocksMax;
  uint32_t nwork = 0, idle = 0;
  for (uint32_t l = 0; l < P->nlanes; l++) *(work[l] ? &nwork : &idle) += 1;
  const uint32_t share = nwork > 0 && budget > idle + nwork ? (budget - idle) / nwork : 1;
  uint32_t first = 0;
  for (uint32_t l = 0; l < P->nlanes; l++) {
    uint64_t n = work[l] ? (share < want[l] ? share : want[l]) : 1;
    P->lanes[l].first = (uint16_t)first;
    P->lanes[l].nblocks = (uint16_t)n;
    first += (uint32_t)n;
  }
  L->nblocks = first;
  L->nthreads = allLl ? MSCCLPP_COLL_GPU_P2PLL_THREADS : 1024;
}

/* The op list of p2pLlKernel, from p2pGrid's (every op is packets). */
static void p2pLlList(const struct mscclppCollGpuP2pList* P, struct mscclppCollGpuP2pLlList* Q) {
  Q->nops = P->nops;
  Q->nlanes = P->nlanes;
  memcpy(Q->lanes, P->lanes, sizeof(Q->lanes));
  for (uint32_t i = 0; i < P->nops; i++) {
    struct mscclppCollGpuP2pLlOp* q = &Q->ops[i];
    q->buf = P->ops[i].buf;
    q->bytes = (uint32_t)P->ops[i].bytes;
    q->isSend = P->ops[i].isSend;
    q->peer = P->ops[i].peer;
    q->pad = 0;
  }
}

mscclppResult_t mscclppCollGpuP2p(struct mscclppComm* comm, const struct mscclppCollP2pOp* ops, int nops,
                                  mscclppStream_t stream) {
  if (nops > MSCCLPP_COLL_GPU_MAX_P2P)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_COLL,
                      "a group of %d sends and receives; the GPU backend takes up to %d per group", nops,
                      MSCCLPP_COLL_GPU_MAX_P2P);
  int mode = mscclppGpuIpcCaptureRelax();
  struct mscclppCollGpu* g = NULL;
  mscclppResult_t res = gpuState(comm, &g);
  if (res == mscclppSuccess) {
    struct mscclppCollGpuLaunch L;
    memset(&L, 0, sizeof(L));
    fillCommon(comm, g, &L);
    L.kind = MSCCLPP_COLL_SENDRECV;
    static _Thread_local struct mscclppCollGpuP2pList P;
    P.nops = 0;
    P.chunkBytes = g->p2pSlotBytes / (MSCCLPP_COLL_GPU_P2P_CHANNELS * MSCCLPP_COLL_GPU_P2P_DEPTH) / 16 * 16;
    mscclppCollGpuExportCollect(g);
    int capturing = -1;
    uint64_t total = 0;
    uint32_t nll = 0;
    for (int i = 0; i < nops && res == mscclppSuccess; i++) {
      if (ops[i].bytes == 0) continue;
      struct mscclppCollGpuP2p* op = &P.ops[P.nops];
      memset(op, 0, sizeof(*op));
      op->isSend = (int8_t)ops[i].isSend;
      op->peer = (int8_t)ops[i].peer;
      op->ll = ops[i].bytes <= g->p2pLlMax; /* the peer decides the same from the same count */
      op->buf = (uint8_t*)ops[i].buf;
      op->bytes = ops[i].bytes;
      res = p2pSource(comm, g, &ops[i], P.chunkBytes, stream, &capturing, &op->src);
      total += ops[i].bytes;
      nll += op->ll;
      P.nops++;
    }
    if (res == mscclppSuccess && P.nops > 0) {
      const int allLl = nll == P.nops && P.nops <= MSCCLPP_COLL_GPU_P2PLL_MAX_OPS;
      p2pGrid(g, &P, total, allLl, &L);
      if (allLl) {
        static _Thread_local struct mscclppCollGpuP2pLlList Q;
        p2pLlList(&P, &Q);
        res = mscclppCollGpuLaunchKernel(comm, g, &L, NULL, &Q, stream, "sendrecv");
      } else {
        res = mscclppCollGpuLaunchKernel(comm, g, &L, &P, NULL, stream, "sendrecv");
      }
    }
  }
  mscclppGpuIpcCaptureRestore(mode);
  return res;
}

#endif /* MSCCLPP_HAVE_CUDA */
