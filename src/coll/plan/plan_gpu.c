/* SPDX-License-Identifier: MIT */
/*
 * The GPU executor of execution plans, host side (plan_gpu.h says how it
 * stages and why): the plan's state on a communicator, its regions and
 * channels, and each call's launch.
 *
 * Channels pair as plan_link.h says, as the host executor's do; peers are
 * linked in rank order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/plan/plan_gpu.h"
#include "core/error.h"
#include "core/log.h"

#ifndef MSCCLPP_HAVE_CUDA

const char* mscclppPlanGpuRefusal(struct mscclppComm* comm, const struct mscclppPlan* plan, char* why, size_t len) {
  (void)comm;
  (void)plan;
  snprintf(why, len, "this build has no CUDA");
  return why;
}
mscclppResult_t mscclppPlanGpuRun(struct mscclppComm* comm, struct mscclppPlanGpuCtx** ctx, int ctxId,
                                  struct mscclppPlan* plan, const struct mscclppCollArgs* a) {
  (void)comm;
  (void)ctx;
  (void)ctxId;
  (void)a;
  return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_COLL, "execution plan %s: this build has no CUDA", plan->name);
}
void mscclppPlanGpuFree(struct mscclppComm* comm, struct mscclppPlanGpuCtx* ctx) {
  (void)comm;
  (void)ctx;
}

#else

#include "coll/plan/plan_gpu_launch.h"
#include "coll/plan/plan_link.h"
#include "comm/comm.h"
#include "gpu/abort.h"
#include "gpu/gpu.h"
#include "gpu/gpu_ipc.h"
#include "mscclpp/connection.h"
#include "mscclpp/memory.h"
#include "mscclpp/memory_channel.h"
#include "mscclpp/port_channel.h"

#define MAXR MSCCLPP_PLAN_GPU_MAX_RANKS
MSCCLPP_STATIC_ASSERT(MAXR == MSCCLPP_COLL_SHARE_RANKS, "the GPU backend shares buffers with up to as many ranks");
/* Bootstrap tags of the GPU executor's states: 0x7b, the state's number
 * (low 8 bits), then 16 bits for the connection (0), the mapping (1) and
 * the channels (apart from the host executor's 0x7d and the backends'). */
#define TAG_BASE 0x7b000000
static int tagBaseOf(int ctxId) { return TAG_BASE + (ctxId & 0xff) * 0x10000; }

/* One region and what links it with the peers, for chunks up to capChunk.
 * Kept until the state goes: kernels in flight and captured graphs use it. */
struct gpuGen {
  uint64_t capChunk;
  void* region;
  uint64_t regionBytes;
  mscclppRegisteredMemory_t regionMem;
  struct mscclppPlanLink peer[MAXR]; /* CUDA IPC */
  mscclppMemoryChannelDeviceHandle* dMem; /* device: [nChannels] */
  mscclppPortChannelDeviceHandle* dPort;  /* device: [nChannels] */
  mscclppMemoryChannelDeviceHandle* dLink; /* device: [nranks] */
  struct gpuGen* older;
};

struct mscclppPlanGpuCtx {
  struct mscclppPlan* plan;
  mscclppPlanProgram* prog; /* host copy */
  void* dProg;              /* device copy */
  uint64_t* dCtr;           /* device counters (plan_gpu_launch.h) */
  int ctxId, rank, nranks, device;
  int linked[MAXR];
  struct mscclppPlanGpuRank who; /* what its launches share (linked peers as a mask, unstageable spaces) */
  mscclppWaitContext wait;
  struct gpuGen* gen; /* the current one; older ones chained */
};

/* ---- what the executor takes ----------------------------------------------------- */

const char* mscclppPlanGpuRefusal(struct mscclppComm* comm, const struct mscclppPlan* plan, char* why, size_t len) {
  why[0] = '\0';
  if (comm->params.planGpu != 1)
    snprintf(why, len, "MSCCLPP_PLAN_GPU=%lld turns the GPU executor of execution plans off (1 runs it)",
             (long long)comm->params.planGpu);
  else if (plan->nranks > MAXR)
    snprintf(why, len, "execution plan %s is for %d ranks; the GPU executor takes up to %d", plan->name, plan->nranks,
             MAXR);
  else if (plan->threadsPerBlock == 0 || plan->threadsPerBlock > MSCCLPP_PLAN_GPU_MAX_THREADS)
    snprintf(why, len, "execution plan %s has %u threads per block; the GPU executor takes 1 to %u", plan->name,
             plan->threadsPerBlock, MSCCLPP_PLAN_GPU_MAX_THREADS);
  return why;
}

/* Every rank's blocks must be resident at once (they wait for each other). */
static mscclppResult_t checkResident(struct mscclppComm* comm, const struct mscclppPlan* plan, int type) {
  struct mscclppGpuDeviceInfo dev;
  MSCCLPP_RETURN_ON_ERROR(mscclppGpuCurrentDeviceInfo(&dev));
  int sharing = 1;
  MSCCLPP_RETURN_ON_ERROR(mscclppCommGpuShare(comm, &sharing));
  int perSm = mscclppPlanGpuBlocksPerSm(type, plan->threadsPerBlock);
  if (perSm <= 0) return mscclppSuccess; /* unknown: the launch will say */
  uint64_t room = (uint64_t)dev.smCount * (uint64_t)perSm;
  uint64_t need = (uint64_t)plan->maxBlocks * (uint64_t)(sharing > 0 ? sharing : 1);
  if (need > room)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_COLL,
                      "execution plan %s: %u thread blocks of %u threads per rank, %d ranks on device %d: %llu blocks "
                      "must run at once (they wait for each other), and the device holds %llu (%d SMs x %d)",
                      plan->name, plan->maxBlocks, plan->threadsPerBlock, sharing, dev.device,
                      (unsigned long long)need, (unsigned long long)room, dev.smCount, perSm);
  return mscclppSuccess;
}

/* ---- device uploads --------------------------------------------------------------- */

/* Copy to the device on the library's own stream and wait for it alone:
 * never behind the application's kernels, and legal while the caller's
 * stream is being captured. */
static mscclppResult_t upload(struct mscclppPlanGpuCtx* x, void* dst, const void* src, size_t bytes) {
  mscclppGpuStream_t s = NULL;
  MSCCLPP_RETURN_ON_ERROR(mscclppGpuStreamCreate(x->device, &s));
  mscclppResult_t res = mscclppGpuMemcpyAsync(s, dst, src, bytes);
  if (res == mscclppSuccess) res = mscclppGpuStreamSynchronize(s, 60.0);
  mscclppGpuStreamDestroy(s);
  return res;
}

static mscclppResult_t deviceCopyOf(struct mscclppPlanGpuCtx* x, const void* src, size_t bytes, void** out) {
  MSCCLPP_RETURN_ON_ERROR(mscclppGpuDeviceAlloc(x->device, bytes > 0 ? bytes : 16, out));
  return bytes > 0 ? upload(x, *out, src, bytes) : mscclppSuccess;
}

/* ---- generations ---------------------------------------------------------------- */

static void genFree(struct mscclppComm* comm, struct mscclppPlanGpuCtx* x, struct gpuGen* g) {
  for (int q = 0; q < x->nranks; q++) mscclppPlanLinkFree(&g->peer[q]);
  if (g->regionMem != NULL) (void)mscclppMemoryDeregister(g->regionMem);
  if (g->region != NULL) (void)mscclppMemFree(comm, g->region);
  mscclppGpuDeviceFree(x->device, g->dMem);
  mscclppGpuDeviceFree(x->device, g->dPort);
  mscclppGpuDeviceFree(x->device, g->dLink);
  free(g);
}

/* Link peer q for this generation: its region must hold chunks up to capChunk. */
static mscclppResult_t linkPeer(struct mscclppComm* comm, struct mscclppPlanGpuCtx* x, struct gpuGen* g, int q) {
  const uint64_t bytes = mscclppPlanGpuRegionBytes(x->plan, q, g->capChunk, NULL);
  return mscclppPlanLinkCreate(comm, x->plan, q, tagBaseOf(x->ctxId), mscclppTransportCudaIpc, g->regionMem, bytes,
                               &g->peer[q]);
}

/* A new generation for chunks up to cap (every rank makes it in the same call). */
static mscclppResult_t genBuild(struct mscclppComm* comm, struct mscclppPlanGpuCtx* x, uint64_t cap,
                                struct gpuGen* g) {
  const mscclppPlanProgram* prog = x->prog;
  g->capChunk = cap;
  g->regionBytes = mscclppPlanGpuRegionBytes(x->plan, x->rank, cap, NULL);
  MSCCLPP_RETURN_ON_ERROR(mscclppMemAlloc(comm, mscclppMemKindDevice, g->regionBytes, &g->region));
  MSCCLPP_RETURN_ON_ERROR(
      mscclppMemoryRegister(comm, g->region, g->regionBytes, mscclppTransportCudaIpc, &g->regionMem));
  for (int q = 0; q < x->nranks; q++)
    if (x->linked[q]) MSCCLPP_RETURN_ON_ERROR(linkPeer(comm, x, g, q));
  const size_t nch = (size_t)prog->nChannels + 1;
  mscclppMemoryChannelDeviceHandle* mem = (mscclppMemoryChannelDeviceHandle*)calloc(nch, sizeof(*mem));
  mscclppPortChannelDeviceHandle* port = (mscclppPortChannelDeviceHandle*)calloc(nch, sizeof(*port));
  mscclppMemoryChannelDeviceHandle link[MAXR];
  memset(link, 0, sizeof(link));
  mscclppResult_t res = mem != NULL && port != NULL
                            ? mscclppSuccess
                            : mscclppErr(mscclppSystemError, MSCCLPP_LOG_COLL, "out of memory");
  const struct mscclppPlanLink* links[MAXR];
  for (int q = 0; q < x->nranks; q++) {
    links[q] = &g->peer[q];
    if (x->linked[q]) link[q] = g->peer[q].mapH;
  }
  if (res == mscclppSuccess) res = mscclppPlanLinkHandles(prog, links, mem, port);
  if (res == mscclppSuccess) res = deviceCopyOf(x, mem, prog->nChannels * sizeof(*mem), (void**)&g->dMem);
  if (res == mscclppSuccess) res = deviceCopyOf(x, port, prog->nChannels * sizeof(*port), (void**)&g->dPort);
  if (res == mscclppSuccess) res = deviceCopyOf(x, link, sizeof(link), (void**)&g->dLink);
  free(mem);
  free(port);
  if (res == mscclppSuccess)
    MSCCLPP_INFO(MSCCLPP_LOG_COLL,
                 "rank %d: execution plan %s on the GPU: region of %llu bytes (chunks up to %llu bytes), %u channels",
                 x->rank, x->plan->name, (unsigned long long)g->regionBytes, (unsigned long long)cap, prog->nChannels);
  return res;
}

/* ---- the state ------------------------------------------------------------------ */

void mscclppPlanGpuFree(struct mscclppComm* comm, struct mscclppPlanGpuCtx* x) {
  if (x == NULL) return;
  mscclppGpuDeviceSynchronize(); /* this rank's kernels that use the regions and channels are done */
  while (x->gen != NULL) {
    struct gpuGen* g = x->gen;
    x->gen = g->older;
    genFree(comm, x, g);
  }
  mscclppGpuDeviceFree(x->device, x->dProg);
  mscclppGpuDeviceFree(x->device, x->dCtr);
  free(x->prog);
  mscclppPlanRelease(x->plan);
  free(x);
}

static mscclppResult_t ctxCreate(struct mscclppComm* comm, int ctxId, struct mscclppPlan* plan,
                                 struct mscclppPlanGpuCtx** out) {
  struct mscclppPlanGpuCtx* x = (struct mscclppPlanGpuCtx*)calloc(1, sizeof(*x));
  if (x == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_COLL, "out of memory");
  mscclppPlanRetain(plan);
  x->plan = plan;
  x->ctxId = ctxId;
  x->rank = comm->rank;
  x->nranks = comm->nranks;
  struct mscclppGpuDeviceInfo dev;
  struct mscclppAbort* abort = NULL;
  mscclppResult_t res = mscclppGpuCurrentDeviceInfo(&dev);
  if (res == mscclppSuccess) {
    x->device = dev.device;
    res = mscclppPlanProgramBuild(plan, comm->rank, &x->prog);
  }
  if (res == mscclppSuccess) res = mscclppCommAbortOf(comm, &abort);
  if (res == mscclppSuccess) {
    mscclppAbortWaitContext(abort, comm->params.timeout, 1, &x->wait);
    res = deviceCopyOf(x, x->prog, x->prog->bytes, &x->dProg);
  }
  if (res == mscclppSuccess) {
    /* counters: zero, then the semaphores' initial values */
    const uint64_t words = MSCCLPP_PLAN_GPU_CTR_WORDS(x->prog->nBlocks, x->prog->nSemaphores);
    uint64_t* ctr = (uint64_t*)calloc(words, sizeof(uint64_t));
    if (ctr == NULL) {
      res = mscclppErr(mscclppSystemError, MSCCLPP_LOG_COLL, "out of memory");
    } else {
      const uint32_t* init = mscclppPlanProgramSemInit(x->prog);
      for (uint32_t i = 0; i < x->prog->nSemaphores; i++)
        ctr[MSCCLPP_PLAN_GPU_CTR_EXEC + x->prog->nBlocks + i] = init[i];
      res = deviceCopyOf(x, ctr, words * sizeof(uint64_t), (void**)&x->dCtr);
      free(ctr);
    }
  }
  if (res != mscclppSuccess) {
    mscclppPlanGpuFree(comm, x);
    return res;
  }
  for (int q = 0; q < x->nranks; q++) {
    x->linked[q] = q != x->rank && (mscclppPlanReaches(plan, x->rank, q) || mscclppPlanReaches(plan, q, x->rank));
    x->who.linkedMask |= (uint32_t)x->linked[q] << q;
  }
  x->who.rank = x->rank;
  x->who.nranks = x->nranks;
  x->who.unstageable = mscclppPlanGpuUnstageable(plan, x->rank);
  x->who.shareable = mscclppPlanGpuShareable(plan, x->rank);
  x->who.trade = mscclppPlanGpuTrades(plan);
  *out = x;
  /* zero-copy goes through the GPU backend's export service: its state is
   * built here, where every rank of a trading plan comes (its first call).
   * Without it this rank stages (publishing 0), which its peers follow. */
  if (x->who.trade && mscclppCollGpuPrepare(comm) != mscclppSuccess)
    MSCCLPP_INFO(MSCCLPP_LOG_COLL, "rank %d: execution plan %s stages its buffers (no export service: %s)", x->rank,
                 plan->name, mscclppGetLastError());
  return mscclppSuccess;
}

/* ---- a call ------------------------------------------------------------------------- */

static mscclppResult_t gpuRun(struct mscclppComm* comm, struct mscclppPlanGpuCtx** ctx, int ctxId,
                              struct mscclppPlan* plan, const struct mscclppCollArgs* a) {
  struct mscclppPlanSizes sz;
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanSizesOf(plan, comm->nranks, a->count, a->typeSize, &sz));
  if (*ctx == NULL) {
    MSCCLPP_RETURN_ON_ERROR(checkResident(comm, plan, (int)a->type));
    size_t frame = 0;
    const char* why = NULL;
    if (mscclppPlanGpuFitStack(&frame, &why) != mscclppSuccess)
      MSCCLPP_INFO(MSCCLPP_LOG_COLL,
                   "rank %d: could not fit the stack limit to the plan kernel's frame (%zu bytes; each launch may "
                   "resize the local memory): %s",
                   comm->rank, frame, why);
    MSCCLPP_RETURN_ON_ERROR(ctxCreate(comm, ctxId, plan, ctx));
  }
  struct mscclppPlanGpuCtx* x = *ctx;
  const uint64_t cap = mscclppPlanGpuCapFor(x->gen != NULL ? x->gen->capChunk : 0, sz.chunkBytes);
  if (x->gen == NULL || cap != x->gen->capChunk) {
    /* every rank reaches this call with the same size: all build here */
    struct gpuGen* g = (struct gpuGen*)calloc(1, sizeof(*g));
    if (g == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_COLL, "out of memory");
    g->older = x->gen;
    x->gen = g; /* kept even when the build fails: peers may have mapped what it made */
    mscclppResult_t res = genBuild(comm, x, cap, g);
    if (res != mscclppSuccess) {
      g->capChunk = 0; /* the next call builds again (and its peers with it, or it times out) */
      return mscclppErrWrap(res, MSCCLPP_LOG_COLL, "execution plan %s on rank %d: setting up the GPU executor",
                            plan->name, x->rank);
    }
  }
  struct gpuGen* g = x->gen;
  /* where the peers map the caller's buffers (spaces they address) */
  uint64_t shared[2][MAXR];
  memset(shared, 0, sizeof(shared));
  if (x->who.shareable != 0) {
    const void* bufs[2] = {(x->who.shareable & 1u) ? a->send : NULL, (x->who.shareable & 2u) ? a->recv : NULL};
    mscclppCollGpuShare(comm, bufs, 2, shared);
  }
  struct mscclppPlanGpuLaunch L;
  mscclppPlanGpuLaunchCall(plan, &x->who, &sz, g->capChunk, (uint8_t*)g->region, a,
                           (const uint64_t(*)[MAXR])shared, &L);
  L.prog = (const mscclppPlanProgram*)x->dProg;
  L.mem = g->dMem;
  L.port = g->dPort;
  L.link = g->dLink;
  L.ctr = x->dCtr;
  for (int q = 0; q < x->nranks; q++)
    if (x->linked[q]) L.base[q] = g->peer[q].mapH.dst;
  L.wait = x->wait;
  const char* why = NULL;
  if (x->who.shareable != 0) mscclppCollGpuLaunchBefore(comm, a->stream);
  mscclppResult_t res = mscclppPlanGpuEnqueue(&L, x->prog->nBlocks, plan->threadsPerBlock, (void*)a->stream, &why);
  if (res != mscclppSuccess)
    return mscclppErr(res, MSCCLPP_LOG_COLL, "execution plan %s on rank %d: launching its kernel: %s", plan->name,
                      x->rank, why);
  if (x->who.shareable != 0) mscclppCollGpuLaunchAfter(comm, a->stream);
  return mscclppSuccess;
}

mscclppResult_t mscclppPlanGpuRun(struct mscclppComm* comm, struct mscclppPlanGpuCtx** ctx, int ctxId,
                                  struct mscclppPlan* plan, const struct mscclppCollArgs* a) {
  int mode = mscclppGpuIpcCaptureRelax(); /* the first call (or a larger one) may be captured */
  mscclppResult_t res = gpuRun(comm, ctx, ctxId, plan, a);
  mscclppGpuIpcCaptureRestore(mode);
  return res;
}

#endif /* MSCCLPP_HAVE_CUDA */
