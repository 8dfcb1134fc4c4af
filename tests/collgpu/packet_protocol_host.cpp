/* SPDX-License-Identifier: MIT */
/*
 * The GPU backend's one-step LL packet kernels (coll_gpu_packet.cu:
 * allreduce, reduce-scatter, allgather, all-to-all), played on the host:
 * the file compiled by the host C++ compiler, each rank's grid played by
 * one CPU thread per block (a block of one thread), every rank's scratch in
 * this process. No GPU needed:
 *   packet_protocol_host [seed]     (default: four seeds, a few seconds)
 * For 2 to 5 ranks (one peer, all peers polled together, one at a time),
 * each with its own slot size for the big grid (some smaller than its
 * grid's threads), a sequence of calls that every rank makes in the same
 * order -- the four collectives mixed, on the three grids, integer and
 * float types with every operator, counts from one element to many chunks
 * (a last chunk of one packet among them), out of place, in place and at
 * odd offsets (no 8-byte word aligned) -- each checked exactly against the
 * oracle (tools/oracle/oracle.h, ORACLE_SMALL). A rank runs its calls as a
 * stream would: a call's blocks start once all of its previous call's
 * blocks ended and its buffers were checked and refilled; ranks are never
 * made to wait for each other, so they drift apart by calls, as on a GPU.
 * That is what the kernels' round rules must survive (LlRounds): slots and
 * counters shared by every kernel of a grid, any kernel after any other
 * (without the padding of a short last chunk, runs of 3-5 ranks here time
 * out within a few calls: a position rewritten before the peer read it).
 * Then every rank's round counters are compared: equal, block by block.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* what the kernels need from CUDA, for blocks of one thread */
struct uint4 {
  uint32_t x, y, z, w;
};
struct uint2 {
  uint32_t x, y;
};
struct Dim {
  unsigned x;
};
static const Dim threadIdx = {0}, blockDim = {1};
static thread_local Dim blockIdx = {0}, gridDim = {1};
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __grid_constant__
#define __shared__ static
static inline void __syncthreads() {}
static inline int __syncthreads_or(int p) { return p; }
static inline int __ffs(int x) { return __builtin_ffs(x); }
template <typename T>
static inline T __ldcs(const T* p) {
  return *p;
}
template <typename T>
static inline void __stcs(T* p, T v) {
  *p = v;
}

#include "coll/gpu/coll_gpu_packet.cu"
#include "harness.h"
#include "oracle.h"

#define MAXK 5
#define MAXG 4      /* blocks of the mid and big grids here */
#define CALLS 240   /* per rank count */
#define TIMEOUT_NS (60ull * 1000000000ull)

static_assert((int)MSCCLPP_COLL_ALLREDUCE == (int)ORACLE_ALLREDUCE && (int)MSCCLPP_COLL_ALLGATHER == (int)ORACLE_ALLGATHER &&
                  (int)MSCCLPP_COLL_REDUCESCATTER == (int)ORACLE_REDUCESCATTER &&
                  (int)MSCCLPP_COLL_ALLTOALL == (int)ORACLE_ALLTOALL,
              "coll_kind.h and oracle.h number the collectives alike");

static uint64_t seed_ = 12345;

/* One call, the same on every rank. */
struct Call {
  int kind, type, op, grid, placement;
  size_t count;
};

/* The abort object every rank's waits share, and its wait board (the
 * error word's page). */
static uint32_t abortFlag_, errorClaim_;
static uint64_t errorPage_[512];

struct Rank;
/* One run: k ranks, the big grid's slot size, the calls. */
struct Run {
  int k;
  uint64_t llSlot;
  Call calls[CALLS];
  uint8_t* scratch[MAXK];
  mscclppCollGpuDevState state[MAXK];
  Rank* ranks;
};

/* One rank: its block threads, its current launch and buffers. */
struct Rank {
  Run* run;
  int rank;
  pthread_barrier_t bar; /* its MAXG block threads: the stream order between its calls */
  Launch L;
  uint8_t *in, *out;    /* allocations */
  uint8_t *send, *recv; /* the call's buffers in them */
  size_t outBytes;
  int wrong;
};

struct Player {
  Rank* r;
  unsigned block;
};

static uint64_t next(uint64_t* s) {
  *s = oracleMix(*s + 0x9e3779b97f4a7c15ull);
  return *s;
}

static const int types[] = {mscclppInt32, mscclppFloat32, mscclppInt8, mscclppUint8, mscclppInt64, mscclppFloat64};
/* (the test's own: mscclppDataTypeSize would link the library's collective
 * layer, and with it its copy of the kernels' host stubs, beside these) */
static size_t typeSize(int t) {
  return t == mscclppInt8 || t == mscclppUint8 ? 1 : t == mscclppInt64 || t == mscclppFloat64 ? 8 : 4;
}

/* The sequence: each grid gets sizes around its chunk (its slot's packets
 * `per`: one packet, per - 1, per, per + 1 -- a last chunk of one packet --,
 * several chunks), the big grid most calls (its slot is small: many rounds). */
static void makeCalls(Run* run) {
  uint64_t s = seed_ ^ (uint64_t)run->k << 32 ^ run->llSlot;
  for (int c = 0; c < CALLS; c++) {
    Call* x = &run->calls[c];
    const int kinds[] = {MSCCLPP_COLL_ALLREDUCE, MSCCLPP_COLL_REDUCESCATTER, MSCCLPP_COLL_ALLGATHER,
                         MSCCLPP_COLL_ALLTOALL};
    x->kind = kinds[next(&s) % 4];
    x->type = types[next(&s) % (sizeof(types) / sizeof(types[0]))];
    const int reduces = x->kind == MSCCLPP_COLL_ALLREDUCE || x->kind == MSCCLPP_COLL_REDUCESCATTER;
    x->op = reduces ? (int)(next(&s) % mscclppNumOps) : ORACLE_COPY;
    const uint64_t g = next(&s) % 8;
    x->grid = g < 1 ? MSCCLPP_COLL_GPU_LL_SMALL : g < 2 ? MSCCLPP_COLL_GPU_LL_MID : MSCCLPP_COLL_GPU_LL_BIG;
    const uint64_t per = (x->grid == MSCCLPP_COLL_GPU_LL_SMALL ? MSCCLPP_COLL_GPU_LLSMALL_SLOT
                          : x->grid == MSCCLPP_COLL_GPU_LL_MID ? MSCCLPP_COLL_GPU_LLMID_SLOT
                                                               : run->llSlot) /
                         16;
    const uint64_t ts = typeSize(x->type);
    uint64_t packets;
    switch (next(&s) % 7) {
      case 0: packets = 1; break;
      case 1: packets = per > 1 ? per - 1 : 1; break;
      case 2: packets = per; break;
      case 3: packets = per + 1; break;
      case 4: packets = 2 * per + 1; break;
      case 5: packets = 1 + next(&s) % (3 * per); break;
      default: packets = x->grid == MSCCLPP_COLL_GPU_LL_BIG ? 5 * per + next(&s) % per : 1 + next(&s) % per; break;
    }
    /* a count whose bytes need `packets` words, odd where it can be */
    x->count = (packets * 8 - next(&s) % 8) / ts;
    if (x->count == 0) x->count = 1;
    x->placement = (int)(next(&s) % 3);
  }
}

/* Buffers, inputs and the launch of call c on rank r (its block 0, between
 * its calls). */
static void prepare(Rank* r, int c) {
  const Run* run = r->run;
  const Call* x = &run->calls[c];
  const size_t ts = typeSize(x->type);
  const enum oracleColl coll = (enum oracleColl)x->kind;
  const size_t inElems = oracleInElems(coll, x->count, run->k), outElems = oracleOutElems(coll, x->count, run->k);
  const size_t maxElems = inElems > outElems ? inElems : outElems;
  const size_t pad = x->placement == 2 ? 3 : 0;
  r->in = (uint8_t*)malloc((inElems + pad + 1) * ts);
  r->out = (uint8_t*)malloc((maxElems + pad + 1) * ts);
  memset(r->out, 0xA5, (maxElems + pad + 1) * ts);
  r->send = r->in + (x->placement == 2 ? ts : 0);
  r->recv = r->out + (x->placement == 2 ? 3 * ts : 0);
  if (x->placement == 1) { /* in place, as coll.h defines it */
    const size_t block = x->count * ts;
    switch (x->kind) {
      case MSCCLPP_COLL_ALLGATHER: r->send = r->recv + (size_t)r->rank * block; break;
      case MSCCLPP_COLL_REDUCESCATTER: r->send = r->recv; r->recv = r->send + (size_t)r->rank * block; break;
      default: r->send = r->recv; break;
    }
  }
  r->outBytes = outElems * ts;
  struct oracleCall call;
  oracleInit(&call, ORACLE_SMALL, x->type, x->op, run->k, oracleMix(seed_ ^ (uint64_t)c));
  oracleInputs(&call, r->rank, 0, inElems, r->send);
  Launch* L = &r->L;
  memset(L, 0, sizeof(*L));
  L->kind = x->kind;
  L->algo = MSCCLPP_COLL_GPU_ALGO_PACKET;
  L->type = x->type;
  L->op = x->op == ORACLE_COPY ? mscclppSum : x->op;
  L->rank = r->rank;
  L->nranks = run->k;
  L->count = x->count;
  L->send[r->rank] = r->send;
  L->recv[r->rank] = r->recv;
  /* as coll_gpu_packet_host.c sets them */
  const size_t block = x->count * ts;
  uintptr_t bits = (uintptr_t)r->send | (uintptr_t)r->recv;
  if (x->kind != MSCCLPP_COLL_ALLREDUCE) bits |= (uintptr_t)block;
  L->vec16 = (bits & 7) == 0;
  if (x->kind == MSCCLPP_COLL_ALLGATHER || x->kind == MSCCLPP_COLL_ALLTOALL) {
    L->type = mscclppUint8;
    L->count = block;
  }
  for (int q = 0; q < run->k; q++) L->scratch[q] = run->scratch[q];
  L->state = (mscclppCollGpuDevState*)&run->state[r->rank];
  L->wait.abortFlag = &abortFlag_;
  L->wait.errorClaim = &errorClaim_;
  L->wait.errorWord = errorPage_;
  L->wait.timeoutNs = TIMEOUT_NS;
  L->scopeGpu = 1;
  L->llGrid = (uint32_t)x->grid;
  L->nblocks = x->grid == MSCCLPP_COLL_GPU_LL_SMALL ? 1 : x->grid == MSCCLPP_COLL_GPU_LL_MID ? 3 : MAXG;
  L->nthreads = 1;
  L->llSlotBytes = run->llSlot;
  L->callSeq = (uint64_t)c + 1;
}

/* Call c's output on rank r, then its buffers freed. */
static const char* kindName(int kind) {
  return kind == MSCCLPP_COLL_ALLREDUCE       ? "allreduce"
         : kind == MSCCLPP_COLL_REDUCESCATTER ? "reducescatter"
         : kind == MSCCLPP_COLL_ALLGATHER     ? "allgather"
                                              : "alltoall";
}

static void check(Rank* r, int c) {
  const Run* run = r->run;
  const Call* x = &run->calls[c];
  uint8_t* want = (uint8_t*)malloc(r->outBytes + 1);
  struct oracleCall call;
  oracleInit(&call, ORACLE_SMALL, x->type, x->op, run->k, oracleMix(seed_ ^ (uint64_t)c));
  oracleExpected(&call, (enum oracleColl)x->kind, r->rank, 0, x->count, want);
  if (memcmp(want, r->recv, r->outBytes) != 0 && r->wrong++ < 5) {
    size_t b = 0;
    while (want[b] == r->recv[b]) b++;
    fprintf(stderr,
            "%d ranks, slot %llu: rank %d, call %d (%s, type %d, op %d, count %zu, grid %d, placement %d): byte %zu of "
            "%zu is 0x%02x, expected 0x%02x\n",
            run->k, (unsigned long long)run->llSlot, r->rank, c, kindName(x->kind),
            x->type, x->op, x->count, x->grid, x->placement, b, r->outBytes, r->recv[b], want[b]);
  }
  free(want);
  free(r->in);
  free(r->out);
}

static void play(const Launch& L) {
  switch (L.kind) {
    case MSCCLPP_COLL_ALLREDUCE:
    case MSCCLPP_COLL_REDUCESCATTER:
#define PLAY(T)          \
  packetReduceKernel<T>(L); \
  return
      switch (L.type) {
        case mscclppInt32: PLAY(int32_t);
        case mscclppFloat32: PLAY(float);
        case mscclppInt8: PLAY(int8_t);
        case mscclppUint8: PLAY(uint8_t);
        case mscclppInt64: PLAY(int64_t);
        default: PLAY(double);
      }
#undef PLAY
    default:
      packetCopyKernel(L);
  }
}

static void* playerMain(void* arg) {
  Player* p = (Player*)arg;
  Rank* r = p->r;
  blockIdx.x = p->block;
  for (int c = 0; c < CALLS; c++) {
    if (p->block == 0) prepare(r, c);
    pthread_barrier_wait(&r->bar);
    if (p->block < r->L.nblocks) {
      gridDim.x = r->L.nblocks;
      play(r->L);
    }
    pthread_barrier_wait(&r->bar);
    if (p->block == 0) check(r, c);
  }
  return NULL;
}

static int runOnce(int k, uint64_t llSlot) {
  Run* run = (Run*)calloc(1, sizeof(Run));
  run->k = k;
  run->llSlot = llSlot;
  makeCalls(run);
  const size_t scratchBytes = MSCCLPP_COLL_GPU_LL_OFF + 2 * (uint64_t)k * llSlot;
  for (int q = 0; q < k; q++) run->scratch[q] = (uint8_t*)calloc(1, scratchBytes);
  Rank ranks[MAXK];
  Player players[MAXK * MAXG];
  pthread_t threads[MAXK * MAXG];
  run->ranks = ranks;
  for (int q = 0; q < k; q++) {
    memset(&ranks[q], 0, sizeof(ranks[q]));
    ranks[q].run = run;
    ranks[q].rank = q;
    pthread_barrier_init(&ranks[q].bar, NULL, MAXG);
    for (unsigned b = 0; b < MAXG; b++) {
      players[q * MAXG + b] = {&ranks[q], b};
      pthread_create(&threads[q * MAXG + b], NULL, playerMain, &players[q * MAXG + b]);
    }
  }
  for (int i = 0; i < k * MAXG; i++) pthread_join(threads[i], NULL);
  int wrong = 0;
  for (int q = 0; q < k; q++) {
    wrong += ranks[q].wrong;
    pthread_barrier_destroy(&ranks[q].bar);
  }
  /* every block of every rank counted the same rounds on each grid */
  uint64_t rounds = run->state[0].llRoundSmall;
  for (int q = 0; q < k; q++) {
    CHECK(run->state[q].llRoundSmall == run->state[0].llRoundSmall);
    for (int b = 0; b < MAXG; b++) {
      CHECK(b >= 3 || run->state[q].llRoundMid[b] == run->state[0].llRoundMid[0]);
      CHECK(run->state[q].llRound[b] == run->state[0].llRound[0]);
    }
  }
  rounds += run->state[0].llRoundMid[0] + run->state[0].llRound[0];
  printf("%d ranks, big slot %llu bytes (%llu packets): %d calls each, %llu rounds, %d wrong\n", k,
         (unsigned long long)llSlot, (unsigned long long)(llSlot / 16), CALLS, (unsigned long long)rounds, wrong);
  for (int q = 0; q < k; q++) free(run->scratch[q]);
  free(run);
  return wrong;
}

int main(int argc, char** argv) {
  /* a few sequences (each about a second), or the one of the seed given */
  const uint64_t seeds[] = {12345, 1, 2, 3};
  const int nseeds = argc > 1 ? 1 : (int)(sizeof(seeds) / sizeof(seeds[0]));
  for (int i = 0; i < nseeds && !harnessFailures_; i++) {
    seed_ = argc > 1 ? strtoull(argv[1], NULL, 0) : seeds[i];
    printf("seed %llu\n", (unsigned long long)seed_);
    /* big-grid slots of 32 packets (more than the grid's 4 threads), 3
     * (fewer) and 10 (a last chunk shorter than the threads) */
    CHECK(runOnce(2, 512) == 0);
    CHECK(runOnce(3, 48) == 0);
    CHECK(runOnce(4, 512) == 0);
    CHECK(runOnce(5, 160) == 0);
    CHECK(abortFlag_ == 0);
  }
  harnessFinish(); /* (no RUN here: it counts CHECKs only inside RUN) */
  return harnessFailures_ ? 1 : 0;
}
