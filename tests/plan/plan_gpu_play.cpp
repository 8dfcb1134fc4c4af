/* SPDX-License-Identifier: MIT */
/*
 * The GPU executor's kernel played on the host (plan_gpu_play.h says what
 * for). The interpreter (src/coll/plan/plan_gpu_interp.cuh) is compiled by
 * the host C++ compiler with the shims below: each thread block of a call
 * is played by `threads` CPU threads at once (fewer than a GPU block, so
 * that the ops' thread strides and the channel and end-barrier loops over
 * more ids than threads run), __syncthreads is the block's barrier, and
 * every block of every rank runs at the same time, as the plan needs
 * (they wait for each other). The host side is plan_gpu.c's on host
 * memory: the region (scratch, input and output areas) in host shared
 * memory, linked with the peers by mscclppPlanLinkCreate over HostShm, the
 * launch values from mscclppPlanGpuLaunchCall, device counters in host
 * memory that only grow, older regions kept when a larger call makes a
 * new one. So CI runs the kernel's op semantics, its LL flags and scratch
 * halves per block, its staging, grid barriers and end barrier, and its
 * region growth on every plan the host executor runs; not the GPU's
 * memory model (x86 keeps stores in order) nor its timing.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- what the interpreter needs from CUDA ---------------------------------------- */

struct uint4 {
  uint32_t x, y, z, w;
};
struct Dim {
  unsigned x;
};
static thread_local Dim threadIdx = {0}, blockIdx = {0}, blockDim = {1}, gridDim = {1};
#define __global__
#define __device__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __grid_constant__

/* A played block's barrier, and the three words __syncthreads_or takes in
 * turn (a word is cleared two calls after its use: every thread has read
 * it, and none sets it again before thread 0 cleared it). */
struct BlockSync {
  pthread_barrier_t bar;
  int acc[3];
};
static thread_local BlockSync* blockSync_;
static thread_local unsigned orCalls_;

static inline void __syncthreads() {
  if (blockDim.x > 1) pthread_barrier_wait(&blockSync_->bar);
}
static inline int __syncthreads_or(int p) {
  if (blockDim.x == 1) return p;
  const unsigned k = orCalls_++ % 3;
  if (p) __atomic_store_n(&blockSync_->acc[k], 1, __ATOMIC_RELAXED);
  pthread_barrier_wait(&blockSync_->bar);
  const int r = __atomic_load_n(&blockSync_->acc[k], __ATOMIC_RELAXED);
  if (threadIdx.x == 0) __atomic_store_n(&blockSync_->acc[(k + 2) % 3], 0, __ATOMIC_RELAXED);
  return r;
}
#if defined(__SANITIZE_THREAD__)
/* ThreadSanitizer does not model fences (GCC refuses them under it): the
 * play is not run there (planPlayRefusal) */
static inline void __threadfence() {}
#else
static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
#endif
static inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
  return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
static inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long expected,
                                           unsigned long long v) {
  __atomic_compare_exchange_n(p, &expected, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return expected;
}

extern "C" {
#include "coll/coll.h"
#include "coll/plan/plan.h"
#include "coll/plan/plan_coll.h"
#include "coll/plan/plan_link.h"
#include "core/error.h"
#include "gpu/abort.h"
}
#include "coll/plan/plan_gpu_interp.cuh"
#include "plan_gpu_play.h"

#define MAXR MSCCLPP_PLAN_GPU_MAX_RANKS
/* Bootstrap tags: 0x7a (the GPU executor has 0x7b), a state number, then
 * plan_link.h's low 16 bits. */
#define TAG_BASE 0x7a000000

/* One region and its links (plan_gpu.c's gpuGen, on host memory). */
struct Gen {
  uint64_t cap;
  void* region;
  mscclppRegisteredMemory_t regionMem;
  mscclppPlanLink peer[MAXR];
  mscclppMemoryChannelDeviceHandle* mem;
  mscclppPortChannelDeviceHandle* port;
  mscclppMemoryChannelDeviceHandle link[MAXR];
  /* plans that trade: the caller's buffers of a call, played in host
   * shared memory that the peers map (the GPU's export of a cudaMalloc
   * buffer): the input and output are copied in and out around the call,
   * and the peers address them through the traded addresses (theirs[q]:
   * where rank q maps this area), apart from the region */
  void* user;
  uint64_t userBytes;
  mscclppRegisteredMemory_t userMem;
  mscclppMemoryChannel_t userMap[MAXR];
  uint64_t theirs[MAXR];
  Gen* older;
};

/* The played plan's state (plan_gpu.c's mscclppPlanGpuCtx). */
struct Play {
  struct mscclppPlan* plan;
  mscclppPlanProgram* prog;
  uint64_t* ctr;
  int tagBase, rank, nranks;
  mscclppPlanGpuRank who;
  uint64_t calls, directIn, directOut; /* calls, and those whose input / output were the caller's own */
  uint64_t zeroCopy;                   /* calls whose peers addressed this rank's buffers through the trade */
  mscclppWaitContext wait;
  struct mscclppAbort* abort;
  Gen* gen;
};
static Play* play_;
static int states_;

static void genFree(struct mscclppComm* comm, Gen* g) {
  for (int q = 0; q < MAXR; q++)
    if (g->userMap[q] != NULL) (void)mscclppMemoryChannelDestroy(g->userMap[q]);
  if (g->userMem != NULL) (void)mscclppMemoryDeregister(g->userMem);
  if (g->user != NULL) (void)mscclppMemFree(comm, g->user);
  for (int q = 0; q < MAXR; q++) mscclppPlanLinkFree(&g->peer[q]);
  if (g->regionMem != NULL) (void)mscclppMemoryDeregister(g->regionMem);
  if (g->region != NULL) (void)mscclppMemFree(comm, g->region);
  free(g->mem);
  free(g->port);
  free(g);
}

static mscclppResult_t genBuild(struct mscclppComm* comm, Play* x, Gen* g) {
  const uint64_t bytes = mscclppPlanGpuRegionBytes(x->plan, x->rank, g->cap, NULL);
  MSCCLPP_RETURN_ON_ERROR(mscclppMemAlloc(comm, mscclppMemKindHostShared, bytes, &g->region));
  MSCCLPP_RETURN_ON_ERROR(mscclppMemoryRegister(comm, g->region, bytes, mscclppTransportHostShm, &g->regionMem));
  for (int q = 0; q < x->nranks; q++) {
    if (!(x->who.linkedMask >> q & 1u)) continue;
    const uint64_t peerBytes = mscclppPlanGpuRegionBytes(x->plan, q, g->cap, NULL);
    MSCCLPP_RETURN_ON_ERROR(mscclppPlanLinkCreate(comm, x->plan, q, x->tagBase, mscclppTransportHostShm,
                                                  g->regionMem, peerBytes, &g->peer[q]));
    g->link[q] = g->peer[q].mapH;
  }
  if (x->who.trade) {
    /* the played caller buffers: twice the region (input and output for
     * any call this region takes), mapped by every linked peer, and where
     * each peer maps this rank's learned from all ranks' rows */
    g->userBytes = 2 * bytes;
    MSCCLPP_RETURN_ON_ERROR(mscclppMemAlloc(comm, mscclppMemKindHostShared, g->userBytes, &g->user));
    MSCCLPP_RETURN_ON_ERROR(
        mscclppMemoryRegister(comm, g->user, g->userBytes, mscclppTransportHostShm, &g->userMem));
    uint64_t* rows = (uint64_t*)calloc((size_t)x->nranks * MAXR, sizeof(uint64_t));
    if (rows == NULL) return mscclppSystemError;
    mscclppResult_t res = mscclppSuccess;
    for (int q = 0; q < x->nranks && res == mscclppSuccess; q++) {
      if (!(x->who.linkedMask >> q & 1u)) continue;
      mscclppMemoryChannelConfig mc = MSCCLPP_MEMORY_CHANNEL_CONFIG_INITIALIZER;
      mc.local = g->userMem;
      mc.tag = x->tagBase + 0xffff;
      res = mscclppMemoryChannelCreate(comm, g->peer[q].conn, &mc, &g->userMap[q]);
      mscclppMemoryChannelDeviceHandle h;
      if (res == mscclppSuccess) res = mscclppMemoryChannelGetDeviceHandle(g->userMap[q], &h);
      if (res == mscclppSuccess) rows[(size_t)x->rank * MAXR + q] = (uint64_t)(uintptr_t)h.dst;
    }
    if (res == mscclppSuccess) res = mscclppBootstrapAllGatherBytes(comm->bootstrap, rows, MAXR * sizeof(uint64_t));
    for (int q = 0; q < x->nranks && res == mscclppSuccess; q++) g->theirs[q] = rows[(size_t)q * MAXR + x->rank];
    free(rows);
    MSCCLPP_RETURN_ON_ERROR(res);
  }
  const size_t nch = (size_t)x->prog->nChannels + 1;
  g->mem = (mscclppMemoryChannelDeviceHandle*)calloc(nch, sizeof(*g->mem));
  g->port = (mscclppPortChannelDeviceHandle*)calloc(nch, sizeof(*g->port));
  if (g->mem == NULL || g->port == NULL) return mscclppSystemError;
  const mscclppPlanLink* links[MAXR];
  for (int q = 0; q < x->nranks; q++) links[q] = &g->peer[q];
  return mscclppPlanLinkHandles(x->prog, links, g->mem, g->port);
}

static mscclppResult_t playCreate(struct mscclppComm* comm, struct mscclppPlan* plan, Play** out) {
  Play* x = (Play*)calloc(1, sizeof(Play));
  if (x == NULL) return mscclppSystemError;
  mscclppPlanRetain(plan);
  x->plan = plan;
  x->rank = comm->rank;
  x->nranks = comm->nranks;
  x->tagBase = TAG_BASE + (states_++ & 0xff) * 0x10000;
  *out = x; /* planPlayEnd frees it, whatever failed below */
  if (comm->nranks > MAXR) return mscclppInvalidUsage;
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanProgramBuild(plan, comm->rank, &x->prog));
  MSCCLPP_RETURN_ON_ERROR(mscclppCommAbortOf(comm, &x->abort));
  mscclppAbortWaitContext(x->abort, comm->params.timeout, 0, &x->wait);
  const uint64_t words = MSCCLPP_PLAN_GPU_CTR_WORDS(x->prog->nBlocks, x->prog->nSemaphores);
  x->ctr = (uint64_t*)calloc(words, sizeof(uint64_t));
  if (x->ctr == NULL) return mscclppSystemError;
  const uint32_t* init = mscclppPlanProgramSemInit(x->prog);
  for (uint32_t i = 0; i < x->prog->nSemaphores; i++) x->ctr[MSCCLPP_PLAN_GPU_CTR_EXEC + x->prog->nBlocks + i] = init[i];
  for (int q = 0; q < x->nranks; q++)
    if (q != x->rank && (mscclppPlanReaches(plan, x->rank, q) || mscclppPlanReaches(plan, q, x->rank)))
      x->who.linkedMask |= 1u << q;
  x->who.rank = x->rank;
  x->who.nranks = x->nranks;
  x->who.unstageable = mscclppPlanGpuUnstageable(plan, x->rank);
  x->who.shareable = mscclppPlanGpuShareable(plan, x->rank);
  x->who.trade = mscclppPlanGpuTrades(plan);
  return mscclppSuccess;
}

extern "C" void planPlayEnd(mscclppComm_t comm) {
  Play* x = play_;
  play_ = NULL;
  if (x == NULL) return;
  if (x->rank == 0)
    printf("play %s: %llu calls, %llu on the caller's input, %llu on the caller's output (not staged), %llu "
           "zero-copy (peers on the caller's buffers)\n",
           x->plan->name, (unsigned long long)x->calls, (unsigned long long)x->directIn,
           (unsigned long long)x->directOut, (unsigned long long)x->zeroCopy);
  while (x->gen != NULL) {
    Gen* g = x->gen;
    x->gen = g->older;
    genFree(comm, g);
  }
  free(x->ctr);
  free(x->prog);
  mscclppPlanRelease(x->plan);
  free(x);
}

/* ---- a call: every block's threads at once --------------------------------------- */

struct Player {
  const mscclppPlanGpuLaunch* L;
  BlockSync* sync;
  unsigned block, thread, nBlocks, nThreads;
};

static void* playThread(void* arg) {
  const Player* p = (const Player*)arg;
  blockIdx.x = p->block;
  gridDim.x = p->nBlocks;
  threadIdx.x = p->thread;
  blockDim.x = p->nThreads;
  blockSync_ = p->sync;
  orCalls_ = 0;
  planKernel(*p->L);
  return NULL;
}

static mscclppResult_t launch(const mscclppPlanGpuLaunch* L, unsigned nBlocks, unsigned nThreads) {
  const unsigned n = nBlocks * nThreads;
  BlockSync* sync = (BlockSync*)calloc(nBlocks, sizeof(BlockSync));
  Player* players = (Player*)calloc(n, sizeof(Player));
  pthread_t* threads = (pthread_t*)calloc(n, sizeof(pthread_t));
  mscclppResult_t res = sync != NULL && players != NULL && threads != NULL ? mscclppSuccess : mscclppSystemError;
  for (unsigned b = 0; b < nBlocks && res == mscclppSuccess; b++) pthread_barrier_init(&sync[b].bar, NULL, nThreads);
  unsigned started = 0;
  for (unsigned i = 0; i < n && res == mscclppSuccess; i++, started++) {
    players[i] = Player{L, &sync[i / nThreads], i / nThreads, i % nThreads, nBlocks, nThreads};
    if (pthread_create(&threads[i], NULL, playThread, &players[i]) != 0) res = mscclppSystemError;
  }
  /* a block short of threads would wait at its barrier for ever */
  if (res != mscclppSuccess && started > 0) {
    fprintf(stderr, "plan_gpu_play: could not start %u threads\n", n);
    exit(1);
  }
  for (unsigned i = 0; i < started; i++) pthread_join(threads[i], NULL);
  for (unsigned b = 0; sync != NULL && b < nBlocks && res == mscclppSuccess; b++) pthread_barrier_destroy(&sync[b].bar);
  free(threads);
  free(players);
  free(sync);
  return res;
}

extern "C" const char* planPlayRefusal(void) {
#if defined(__SANITIZE_THREAD__)
  return "ThreadSanitizer does not model the fences the kernel's barriers rely on";
#else
  return NULL;
#endif
}

extern "C" int planPlayReduces(mscclppDataType_t type) {
  return type != mscclppFloat16 && type != mscclppBfloat16 && type != mscclppFloat8e4m3 && type != mscclppFloat8e5m2;
}

extern "C" mscclppResult_t planPlayCall(mscclppComm_t comm, mscclppPlan_t plan, const void* send, void* recv,
                                        size_t count, mscclppDataType_t type, mscclppRedOp_t op, unsigned threads) {
  if (play_ != NULL && play_->plan != plan) planPlayEnd(comm);
  if (play_ == NULL) MSCCLPP_RETURN_ON_ERROR(playCreate(comm, plan, &play_));
  Play* x = play_;
  struct mscclppCollArgs a;
  memset(&a, 0, sizeof(a));
  a.kind = mscclppCollPlanKind(plan);
  a.send = send;
  a.recv = recv;
  a.count = count;
  a.type = type;
  a.typeSize = mscclppDataTypeSize(type);
  a.op = op;
  struct mscclppPlanSizes sz;
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanSizesOf(plan, x->nranks, count, a.typeSize, &sz));
  const uint64_t cap = mscclppPlanGpuCapFor(x->gen != NULL ? x->gen->cap : 0, sz.chunkBytes);
  if (x->gen == NULL || cap != x->gen->cap) {
    Gen* g = (Gen*)calloc(1, sizeof(Gen));
    if (g == NULL) return mscclppSystemError;
    g->cap = cap;
    g->older = x->gen;
    x->gen = g;
    MSCCLPP_RETURN_ON_ERROR(genBuild(comm, x, g));
  }
  Gen* g = x->gen;
  /* a shareable space of an unpadded call: the caller's buffers played
   * in the peers' reach (Gen's user). Not every rank at every call: a
   * rank's choice is its own (a GPU rank stages a buffer CUDA IPC cannot
   * share), so a third of the calls of each rank, in turn, stage and
   * publish 0 while their peers share */
  uint64_t shared[2][MAXR];
  memset(shared, 0, sizeof(shared));
  uint8_t *userRecv = NULL, *span = NULL;
  size_t spanBytes = 0;
  if (x->who.shareable != 0 && !sz.padded && (x->calls + (uint64_t)x->rank) % 3 != 0) {
    uint8_t* u = (uint8_t*)g->user;
    uint8_t *s8 = (uint8_t*)send, *r8 = (uint8_t*)recv, *userSend = NULL;
    if (s8 < r8 + sz.outputBytes && r8 < s8 + sz.inputBytes) { /* in place: one span, as the caller has it */
      span = s8 < r8 ? s8 : r8;
      uint8_t* end = s8 + sz.inputBytes > r8 + sz.outputBytes ? s8 + sz.inputBytes : r8 + sz.outputBytes;
      spanBytes = (size_t)(end - span);
      memcpy(u, span, spanBytes);
      userSend = u + (s8 - span);
      userRecv = u + (r8 - span);
    } else {
      userRecv = u;
      userSend = u + g->userBytes / 2;
      memcpy(userRecv, recv, sz.outputBytes);
      memcpy(userSend, send, sz.inputBytes);
    }
    a.send = userSend;
    a.recv = userRecv;
    for (int q = 0; q < x->nranks; q++)
      if (x->who.linkedMask >> q & 1u) {
        shared[MSCCLPP_PLAN_INPUT][q] = g->theirs[q] + (uint64_t)(userSend - u);
        shared[MSCCLPP_PLAN_OUTPUT][q] = g->theirs[q] + (uint64_t)(userRecv - u);
      }
  }
  mscclppPlanGpuLaunch L;
  mscclppPlanGpuLaunchCall(plan, &x->who, &sz, g->cap, (uint8_t*)g->region, &a, (const uint64_t(*)[MAXR])shared,
                           &L);
  L.prog = x->prog;
  L.mem = g->mem;
  L.port = g->port;
  L.link = g->link;
  L.ctr = x->ctr;
  for (int q = 0; q < x->nranks; q++)
    if (x->who.linkedMask >> q & 1u) L.base[q] = g->peer[q].mapH.dst;
  L.wait = x->wait;
  x->calls++;
  x->directIn += !(L.staged & (1u << MSCCLPP_PLAN_INPUT));
  x->directOut += !(L.staged & (1u << MSCCLPP_PLAN_OUTPUT));
  int traded = 0;
  for (int q = 0; q < x->nranks; q++) traded |= L.pub[q][0] != 0 || L.pub[q][1] != 0;
  x->zeroCopy += traded;
  MSCCLPP_RETURN_ON_ERROR(launch(&L, x->prog->nBlocks, threads > 0 ? threads : 1));
  if (span != NULL)
    memcpy(span, g->user, spanBytes);
  else if (userRecv != NULL)
    memcpy(recv, userRecv, sz.outputBytes);
  if (mscclppAbortIsRaised(x->abort)) {
    fprintf(stderr, "rank %d: execution plan %s: a wait of the played kernel failed (the abort is raised)\n", x->rank,
            x->plan->name);
    return mscclppRemoteError;
  }
  return mscclppSuccess;
}
