/* SPDX-License-Identifier: MIT */
/*
 * One rank of the execution plan tests on the host backend, started by
 * mscclpp-run (mscclpp-run -n N plan_worker MODE ...):
 *
 *   plan_worker run PATH [maxBytes]
 *       PATH is a plan or a directory of plans (*.json); every plan for
 *       this rank count runs through mscclppPlanExecute for several element
 *       types and operators and for sizes of 1 element up to about maxBytes
 *       per rank (default 256 KiB), odd counts included (staged and padded)
 *       and sizes that divide into the plan's chunks (used as they are),
 *       in place exactly when the plan is. Every call has fresh inputs, an
 *       output poisoned with the expected value's complement and guard
 *       bytes after it; results are checked element by element against the
 *       oracle of collective results (tools/oracle/oracle.h: mscclpp-perf's
 *       inputs, oracleExpected, oracleWrong), the tests' one oracle,
 *       independent of the library's reduction code. Plans for other rank counts are listed as skipped;
 *       the run fails when it ran none.
 *   plan_worker compare PATH
 *       each plan of PATH against the built-in algorithm of its collective:
 *       the same inputs through mscclppPlanExecute and through the plain
 *       collective call (no plan registered) give the same bytes.
 *   plan_worker cache PATH
 *       MSCCLPP_CACHE_DIR: a directory holding PATH's plans, a malformed
 *       plan and a plan for another rank count; the communicator registers
 *       exactly the plans for its rank count (the others are skipped, not
 *       fatal), a plain collective call that matches a plan runs it (the
 *       plan's run counter moves, the result is right) and one that does
 *       not (the other in-place form) runs the built-in algorithm.
 *   plan_worker graph PATH [maxBytes [replays]]          (CUDA builds)
 *       each plan captured in a CUDA graph (a call of about maxBytes per
 *       rank, and one of an odd count) and replayed `replays` times
 *       (default 100); every 10th replay has fresh inputs and a poisoned
 *       output, checked exactly after it, as is the last one.
 *   plan_worker play PATH [maxBytes [threads]]
 *       run's calls through the GPU executor's kernel played on the host
 *       (plan_gpu_play.h), `threads` (default 2) CPU threads per thread
 *       block, on the host backend; the reductions of the half, bfloat16
 *       and fp8 types are left out (the host play has no such arithmetic).
 * With MSCCLPP_PLAN_WORKER_GPU=1 (CUDA builds) every call runs on the GPU
 * backend: the buffers are copied to device memory as prepared (poison and
 * guard bytes included), the call runs on a stream, and the whole buffer
 * comes back to be checked; without a GPU the worker says so and exits 77.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coll/plan/plan_coll.h"
#include "harness.h"
#include "mscclpp/coll.h"
#include "mscclpp/comm.h"
#include "mscclpp/plan.h"
#include "oracle.h" /* tools/oracle */
#ifdef MSCCLPP_PLAN_PLAY
#include "plan_gpu_play.h"
#endif

#ifdef MSCCLPP_HAVE_CUDA
#include <cuda_runtime_api.h>
#define CUDA_OK(x)                                                                       \
  do {                                                                                   \
    cudaError_t e_ = (x);                                                                \
    if (e_ != cudaSuccess) {                                                             \
      fprintf(stderr, "rank %d: %s:%d %s: %s\n", rank, __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                           \
    }                                                                                    \
  } while (0)
static cudaStream_t stream_;
#endif
static int gpu_;           /* calls run on the GPU backend, buffers in device memory */
static unsigned playThreads_; /* plan calls run by the GPU executor's kernel played on the host, so many threads a block */

#define GUARD 64

static int rank = -1, nranks = -1;
static mscclppComm_t comm;
static uint64_t serial;

/* mscclppPlanRunCount's answer (a failed call is a failed check). */
static uint64_t runsOf(mscclppComm_t c, mscclppPlan_t plan) {
  uint64_t runs = UINT64_MAX;
  CHECK_RES(mscclppPlanRunCount(c, plan, &runs), mscclppSuccess);
  return runs;
}
static long calls, skippedPlans;

static enum oracleColl collOf(const char* name) {
  if (strcmp(name, "allgather") == 0) return ORACLE_ALLGATHER;
  if (strcmp(name, "reducescatter") == 0) return ORACLE_REDUCESCATTER;
  if (strcmp(name, "alltoall") == 0) return ORACLE_ALLTOALL;
  return ORACLE_ALLREDUCE;
}

/* One call's buffers and expectations. */
struct pcall {
  enum oracleColl c;
  int type, op, inplace;
  size_t count, ts, sendElems, recvElems;
  uint8_t *buf, *send, *recv; /* send and recv inside buf (in place: one region) */
  uint8_t* exp;
  struct oracleCall g;
  size_t bytes; /* of buf */
};

static void prepare(struct pcall* k) {
  const size_t cnt = k->count, ts = k->ts;
  oracleInit(&k->g, ORACLE_WIDE, k->type, k->op, nranks, oracleMix(0x5eed ^ oracleMix(++serial)));
  k->sendElems = oracleInElems(k->c, cnt, nranks);
  k->recvElems = oracleOutElems(k->c, cnt, nranks);
  size_t elems = k->sendElems > k->recvElems ? k->sendElems : k->recvElems;
  size_t bytes = (k->inplace ? elems : k->sendElems + k->recvElems) * ts + 2 * GUARD + 64;
  k->bytes = (bytes + 63) / 64 * 64;
  k->buf = (uint8_t*)aligned_alloc(64, k->bytes);
  k->exp = (uint8_t*)malloc(k->recvElems * ts + 1);
  if (k->buf == NULL || k->exp == NULL) {
    fprintf(stderr, "rank %d: out of memory\n", rank);
    exit(1);
  }
  memset(k->buf, 0x5c, bytes);
  oracleExpected(&k->g, k->c, rank, 0, cnt, k->exp);
  const uint8_t mask = (uint8_t)(0xa5 ^ (serial * 0x3b)) | 1; /* never 0: every poisoned byte differs */
  if (!k->inplace) {
    k->send = k->buf + 64;
    k->recv = k->send + k->sendElems * ts + GUARD;
    oracleInputs(&k->g, rank, 0, k->sendElems, k->send);
    for (size_t b = 0; b < k->recvElems * ts; b++) k->recv[b] = k->exp[b] ^ mask;
  } else {
    uint8_t* base = k->buf + 64;
    switch (k->c) {
      case ORACLE_ALLGATHER:
        k->recv = base;
        k->send = base + (size_t)rank * cnt * ts;
        for (size_t b = 0; b < k->recvElems * ts; b++) k->recv[b] = k->exp[b] ^ mask;
        oracleInputs(&k->g, rank, 0, cnt, k->send);
        break;
      case ORACLE_REDUCESCATTER:
        k->send = base;
        k->recv = base + (size_t)rank * cnt * ts;
        oracleInputs(&k->g, rank, 0, k->sendElems, k->send);
        break;
      default: /* allreduce, alltoall: the buffer is the input */
        k->send = k->recv = base;
        oracleInputs(&k->g, rank, 0, k->sendElems, k->send);
        break;
    }
  }
}

/* Compare the output with the expected values and the guard bytes; count what is wrong. */
static long verify(const struct pcall* k, const char* what) {
  long wrong = 0;
  for (size_t i = 0; i < k->recvElems; i++) {
    if (!oracleWrong(&k->g, k->recv + i * k->ts, k->exp + i * k->ts)) continue;
    if (wrong++ < 3) {
      char got[24] = "", want[24] = "";
      for (size_t b = 0; b < k->ts; b++) {
        snprintf(got + 2 * b, 3, "%02x", k->recv[i * k->ts + b]);
        snprintf(want + 2 * b, 3, "%02x", k->exp[i * k->ts + b]);
      }
      fprintf(stderr, "rank %d: FAIL %s %s %s count %zu %s: element %zu is %s, expected %s\n", rank, what,
              mscclppDataTypeName((mscclppDataType_t)k->type), k->op >= 0 ? mscclppRedOpName((mscclppRedOp_t)k->op) : "-", k->count, k->inplace ? "in-place" : "out-of-place",
              i, got, want);
    }
  }
  const uint8_t* guard = k->recv + k->recvElems * k->ts;
  int guardOk = 1;
  for (size_t b = 0; b < GUARD && !k->inplace; b++) guardOk &= guard[b] == 0x5c;
  if (!guardOk) {
    fprintf(stderr, "rank %d: FAIL %s count %zu: bytes after the output were written\n", rank, what, k->count);
    wrong++;
  }
  return wrong;
}

static void freeCall(struct pcall* k) {
  free(k->buf);
  free(k->exp);
}

/* The (type, op) pairs a collective is checked with. */
struct combo {
  int type, op;
};
static const struct combo reduceCombos[] = {{mscclppFloat32, mscclppSum}, {mscclppInt32, mscclppSum},
                                            {mscclppBfloat16, mscclppSum}, {mscclppUint8, mscclppMax},
                                            {mscclppFloat64, mscclppProd}, {mscclppFloat32, mscclppAvg}};
static const struct combo copyCombos[] = {{mscclppFloat32, mscclppSum}, {mscclppInt8, mscclppSum},
                                          {mscclppFloat16, mscclppSum}};

/* Issue the call (plan NULL: the plain collective call) on send/recv, as
 * they are where the call runs, on `stream`. */
static mscclppResult_t issue(mscclppPlan_t plan, const struct pcall* k, const void* send, void* recv,
                             mscclppStream_t stream) {
  mscclppDataType_t t = (mscclppDataType_t)k->type;
  mscclppRedOp_t op = (mscclppRedOp_t)(k->op >= 0 ? k->op : mscclppSum);
  if (plan != NULL) return mscclppPlanExecute(comm, plan, send, recv, k->count, t, op, stream);
  switch (k->c) {
    case ORACLE_ALLREDUCE: return mscclppAllReduce(send, recv, k->count, t, op, comm, stream);
    case ORACLE_ALLGATHER: return mscclppAllGather(send, recv, k->count, t, comm, stream);
    case ORACLE_REDUCESCATTER: return mscclppReduceScatter(send, recv, k->count, t, op, comm, stream);
    default: return mscclppAllToAll(send, recv, k->count, t, comm, stream);
  }
}

/* The call on the host buffers, or on device copies of them (gpu_). */
static mscclppResult_t callOn(mscclppPlan_t plan, struct pcall* k) {
#ifdef MSCCLPP_PLAN_PLAY
  if (plan != NULL && playThreads_ > 0)
    return planPlayCall(comm, plan, k->send, k->recv, k->count, (mscclppDataType_t)k->type,
                        (mscclppRedOp_t)(k->op >= 0 ? k->op : mscclppSum), playThreads_);
#endif
  if (!gpu_) return issue(plan, k, k->send, k->recv, NULL);
#ifdef MSCCLPP_HAVE_CUDA
  uint8_t* d = NULL;
  CUDA_OK(cudaMalloc((void**)&d, k->bytes));
  /* on the call's stream: cudaMemcpy from pageable memory may return
   * before its DMA lands, and a non-blocking stream does not wait for it
   * (the H100 showed LL plans reading a rank's stale input so) */
  CUDA_OK(cudaMemcpyAsync(d, k->buf, k->bytes, cudaMemcpyHostToDevice, stream_));
  mscclppResult_t res = issue(plan, k, d + (k->send - k->buf), d + (k->recv - k->buf), stream_);
  CUDA_OK(cudaMemcpyAsync(k->buf, d, k->bytes, cudaMemcpyDeviceToHost, stream_));
  CUDA_OK(cudaStreamSynchronize(stream_));
  CUDA_OK(cudaFree(d));
  return res;
#else
  return mscclppInvalidUsage;
#endif
}

static mscclppResult_t callPlan(mscclppPlan_t plan, struct pcall* k) { return callOn(plan, k); }
static mscclppResult_t callBuiltin(struct pcall* k) { return callOn(NULL, k); }

/* Plans to run: PATH itself, or its *.json (sorted). */
static int listPlans(const char* path, char names[][512], int max) {
  if (strlen(path) > 5 && strcmp(path + strlen(path) - 5, ".json") == 0) {
    snprintf(names[0], 512, "%s", path);
    return 1;
  }
  char cmd[1024];
  snprintf(cmd, sizeof(cmd), "ls -1 %s/*.json 2>/dev/null", path);
  FILE* f = popen(cmd, "r");
  int n = 0;
  while (f != NULL && n < max && fgets(names[n], 512, f) != NULL) {
    names[n][strcspn(names[n], "\n")] = '\0';
    n++;
  }
  if (f != NULL) pclose(f);
  return n;
}

/* Load `path`; NULL (counted as skipped) when it is for another rank count. */
static mscclppPlan_t loadFor(const char* path, mscclppPlanInfo* info) {
  mscclppPlan_t plan = NULL;
  CHECK_RES(mscclppPlanLoadFile(path, &plan), mscclppSuccess);
  if (plan == NULL) return NULL;
  CHECK_RES(mscclppPlanGetInfo(plan, info), mscclppSuccess);
  if (info->nranks != nranks) {
    if (rank == 0) printf("skip %s: a plan for %d ranks\n", path, info->nranks);
    skippedPlans++;
    (void)mscclppPlanDestroy(plan);
    return NULL;
  }
  return plan;
}

/* Element counts per block for a plan: 1 element, odd counts, and counts
 * that divide into the plan's chunks, up to about maxBytes. */
static int cmpSize(const void* a, const void* b) {
  size_t x = *(const size_t*)a, y = *(const size_t*)b;
  return x < y ? -1 : x > y;
}

/* Per-rank counts of ts-byte elements a call of at most maxBytes per rank
 * may have that the plan takes (its message range), ascending: the
 * smallest sizes, one chunk each, odd ones, the largest, and the bottom of
 * the plan's range (its smallest message, the next odd count and the next
 * whole chunks, even above maxBytes up to RANGE_BOTTOM_MAX), so that a
 * plan for a band of large sizes runs too, staged and not. */
#define RANGE_BOTTOM_MAX (4u << 20)
static int countsFor(const mscclppPlanInfo* info, size_t ts, size_t maxBytes, size_t* out) {
  size_t exact = (size_t)info->chunksPerBlock * 16 / ts; /* one 16-byte-aligned chunk each */
  const uint64_t per = (uint64_t)ts * (strcmp(info->collective, "allreduce") == 0 ? 1 : (uint64_t)nranks);
  size_t lo = (size_t)((info->minMessageBytes + per - 1) / per);
  /* the range's bottom three: its smallest count, an odd one (padded) and
   * a whole number of chunks (not padded: the caller's own buffers) */
  size_t cand[] = {1, 3, exact, 7 * exact, 1000 + 3, 64 * exact, 4099, maxBytes / ts / 2 * 2 + 1,
                   maxBytes / ts / exact * exact, lo, lo | 1, (lo + exact - 1) / exact * exact};
  int n = 0;
  const size_t ncand = sizeof(cand) / sizeof(cand[0]);
  for (size_t i = 0; i < ncand; i++) {
    size_t c = cand[i];
    if (c == 0 || c * ts > (i + 3 >= ncand && maxBytes < RANGE_BOTTOM_MAX ? RANGE_BOTTOM_MAX : maxBytes)) continue;
    uint64_t msg = (uint64_t)c * per;
    if (msg < info->minMessageBytes || msg > info->maxMessageBytes) continue;
    int seen = 0;
    for (int j = 0; j < n; j++) seen |= out[j] == c;
    if (!seen) out[n++] = c;
  }
  qsort(out, (size_t)n, sizeof(*out), cmpSize);
  return n;
}

/* The first odd count of counts[0..n) (staged and padded), else the first. */
static size_t oddOf(const size_t* counts, int n) {
  for (int i = 0; i < n; i++)
    if (counts[i] % 2 == 1) return counts[i];
  return counts[0];
}

/* fn(plan, its info, arg) for each plan of path for this rank count (the
 * others are skipped, saying so); none at all is a failure. */
typedef void (*planFn)(mscclppPlan_t plan, const mscclppPlanInfo* info, void* arg);
static void forEachPlan(const char* path, planFn fn, void* arg) {
  static char names[256][512];
  int np = listPlans(path, names, 256);
  int ran = 0;
  for (int p = 0; p < np; p++) {
    mscclppPlanInfo info = MSCCLPP_PLAN_INFO_INITIALIZER;
    mscclppPlan_t plan = loadFor(names[p], &info);
    if (plan == NULL) continue;
    fn(plan, &info, arg);
#ifdef MSCCLPP_PLAN_PLAY
    if (playThreads_ > 0) planPlayEnd(comm);
#endif
    ran++;
    CHECK_RES(mscclppPlanDestroy(plan), mscclppSuccess);
  }
  if (ran == 0) {
    fprintf(stderr, "rank %d: FAIL: no plan of %s is for %d ranks\n", rank, path, nranks);
    harnessFailures_++;
  }
}

/* Two float32 counts the plan takes up to maxBytes per rank: an odd one
 * (staged, padded) and the largest (one when they are the same); none is a
 * failure. */
static int twoSizes(const mscclppPlanInfo* info, size_t maxBytes, size_t out[2]) {
  size_t all[16];
  int na = countsFor(info, 4, maxBytes, all), n = 0;
  if (na > 0) out[n++] = oddOf(all, na);
  if (na > 0 && all[na - 1] != out[0]) out[n++] = all[na - 1];
  if (n == 0) {
    fprintf(stderr, "rank %d: FAIL %s: no size up to %zu bytes per rank is in its message range\n", rank, info->name,
            maxBytes);
    harnessFailures_++;
  }
  return n;
}

static void runOne(mscclppPlan_t plan, const mscclppPlanInfo* info, void* arg) {
  const size_t maxBytes = *(const size_t*)arg;
  enum oracleColl c = collOf(info->collective);
  const int reduces = c == ORACLE_ALLREDUCE || c == ORACLE_REDUCESCATTER;
  const struct combo* combos = reduces ? reduceCombos : copyCombos;
  int ncombos = reduces ? (int)(sizeof(reduceCombos) / sizeof(reduceCombos[0]))
                        : (int)(sizeof(copyCombos) / sizeof(copyCombos[0]));
  long before = harnessFailures_, callsBefore = calls;
  for (int t = 0; t < ncombos; t++) {
#ifdef MSCCLPP_PLAN_PLAY
    if (playThreads_ > 0 && reduces && !planPlayReduces((mscclppDataType_t)combos[t].type)) continue;
#endif
    size_t ts = mscclppDataTypeSize((mscclppDataType_t)combos[t].type), counts[16];
    int nc = countsFor(info, ts, maxBytes, counts);
    for (int n = 0; n < nc; n++) {
      struct pcall k = {c, combos[t].type, combos[t].op, info->inplace, counts[n], ts, 0, 0, NULL, NULL, NULL, NULL};
      prepare(&k);
      CHECK_RES(callPlan(plan, &k), mscclppSuccess);
      harnessFailures_ += verify(&k, info->name) != 0;
      calls++;
      freeCall(&k);
    }
  }
  if (calls == callsBefore) {
    fprintf(stderr, "rank %d: FAIL %s: no size up to %zu bytes per rank is in its message range\n", rank, info->name,
            maxBytes);
    harnessFailures_++;
  }
  if (rank == 0)
    printf("%s %s (%s, %s, %s, %d thread blocks)\n", harnessFailures_ == before ? "PASS" : "FAIL", info->name,
           info->collective, info->protocol, info->inplace ? "in-place" : "out-of-place", info->threadblocks);
}

static void modeRun(const char* path, size_t maxBytes) { forEachPlan(path, runOne, &maxBytes); }

static void compareOne(mscclppPlan_t plan, const mscclppPlanInfo* info, void* arg) {
  (void)arg;
  enum oracleColl c = collOf(info->collective);
  int op = c == ORACLE_ALLREDUCE || c == ORACLE_REDUCESCATTER ? mscclppAvg : ORACLE_COPY;
  size_t counts[2];
  int nc = twoSizes(info, 1u << 20, counts);
  for (int i = 0; i < nc; i++) {
    struct pcall a = {c, mscclppFloat32, op, info->inplace, counts[i], 4, 0, 0, NULL, NULL, NULL, NULL};
    prepare(&a);
    uint64_t keep = serial;
    struct pcall b = a;
    serial = keep - 1; /* the same seed: the same inputs */
    prepare(&b);
    CHECK_RES(callPlan(plan, &a), mscclppSuccess);
    CHECK_RES(callBuiltin(&b), mscclppSuccess);
    if (memcmp(a.recv, b.recv, a.recvElems * a.ts) != 0) {
      fprintf(stderr, "rank %d: FAIL %s count %zu: the plan's output differs from the built-in algorithm's\n", rank,
              info->name, a.count);
      harnessFailures_++;
    }
    harnessFailures_ += verify(&a, info->name) != 0;
    freeCall(&a);
    freeCall(&b);
    calls += 2;
  }
  if (rank == 0) printf("compared %s with the built-in %s\n", info->name, info->collective);
}

static void modeCompare(const char* path) { forEachPlan(path, compareOne, NULL); }

#ifdef MSCCLPP_HAVE_CUDA
/* One plan call captured in a graph and replayed (see the top). */
static void graphOne(mscclppPlan_t plan, const mscclppPlanInfo* info, size_t count, int replays) {
  enum oracleColl c = collOf(info->collective);
  const int reduces = c == ORACLE_ALLREDUCE || c == ORACLE_REDUCESCATTER;
  struct pcall k = {c, mscclppFloat32, reduces ? mscclppSum : -1, info->inplace, count, 4, 0, 0, NULL, NULL, NULL, NULL};
  prepare(&k);
  uint8_t* d = NULL;
  CUDA_OK(cudaMalloc((void**)&d, k.bytes));
  CUDA_OK(cudaMemcpyAsync(d, k.buf, k.bytes, cudaMemcpyHostToDevice, stream_)); /* as callOn says */
  CUDA_OK(cudaStreamSynchronize(stream_));
  cudaGraph_t g = NULL;
  cudaGraphExec_t ge = NULL;
  CUDA_OK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
  mscclppResult_t res = issue(plan, &k, d + (k.send - k.buf), d + (k.recv - k.buf), stream_);
  CUDA_OK(cudaStreamEndCapture(stream_, &g));
  CHECK_RES(res, mscclppSuccess);
  CUDA_OK(cudaGraphInstantiate(&ge, g, 0));
  long bad = 0;
  for (int i = 0; i < replays && res == mscclppSuccess; i++) {
    int check = i % 10 == 0 || i == replays - 1;
    if (check && i > 0) { /* fresh inputs, poisoned output: the same geometry, so the same offsets */
      /* after the replays before it (the stream does not wait for the
       * legacy stream's copies) */
      CUDA_OK(cudaStreamSynchronize(stream_));
      freeCall(&k);
      prepare(&k);
      CUDA_OK(cudaMemcpyAsync(d, k.buf, k.bytes, cudaMemcpyHostToDevice, stream_));
      CUDA_OK(cudaStreamSynchronize(stream_));
    }
    CUDA_OK(cudaGraphLaunch(ge, stream_));
    if (!check) continue;
    CUDA_OK(cudaMemcpyAsync(k.buf, d, k.bytes, cudaMemcpyDeviceToHost, stream_));
    CUDA_OK(cudaStreamSynchronize(stream_));
    bad += verify(&k, info->name) != 0;
    calls++;
    /* every rank's check done before anyone's next inputs go in (the
     * replays in between read the inputs as they are) */
    CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  }
  harnessFailures_ += bad != 0;
  if (rank == 0)
    printf("%s %s graph: count %zu, %d replays\n", bad == 0 ? "PASS" : "FAIL", info->name, count, replays);
  CUDA_OK(cudaGraphExecDestroy(ge));
  CUDA_OK(cudaGraphDestroy(g));
  CUDA_OK(cudaFree(d));
  freeCall(&k);
}

struct graphArgs {
  size_t maxBytes;
  int replays;
};
static void graphPlan(mscclppPlan_t plan, const mscclppPlanInfo* info, void* arg) {
  const struct graphArgs* g = (const struct graphArgs*)arg;
  size_t counts[2];
  int nc = twoSizes(info, g->maxBytes, counts); /* an odd one (staged, padded), the largest */
  for (int i = 0; i < nc; i++) graphOne(plan, info, counts[i], g->replays);
}
#endif

static void modeGraph(const char* path, size_t maxBytes, int replays) {
#ifdef MSCCLPP_HAVE_CUDA
  struct graphArgs g = {maxBytes, replays};
  forEachPlan(path, graphPlan, &g);
#else
  (void)path;
  (void)maxBytes;
  (void)replays;
  fprintf(stderr, "plan_worker graph: this build has no CUDA\n");
  harnessFailures_++;
#endif
}

static void copyFile(const char* from, const char* to) {
  FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
  char buf[65536];
  size_t n;
  while (in != NULL && out != NULL && (n = fread(buf, 1, sizeof(buf), in)) > 0) fwrite(buf, 1, n, out);
  if (in != NULL) fclose(in);
  if (out != NULL) fclose(out);
}

static void modeCache(const char* path) {
  /* the cache directory: PATH's plans, a malformed one, one for another rank count */
  static char names[256][512];
  int np = listPlans(path, names, 256);
  char dir[128], cmd[256];
  snprintf(dir, sizeof(dir), "/tmp/mscclpp_plan_cache_%d", (int)getpid());
  if (mkdir(dir, 0700) != 0) {
    fprintf(stderr, "rank %d: FAIL: cannot make %s\n", rank, dir);
    harnessFailures_++;
    return;
  }
  int expected = 0;
  for (int p = 0; p < np; p++) {
    const char* base = strrchr(names[p], '/') ? strrchr(names[p], '/') + 1 : names[p];
    char to[1024];
    snprintf(to, sizeof(to), "%s/%.512s", dir, base);
    copyFile(names[p], to);
    mscclppPlan_t pl = NULL;
    if (mscclppPlanLoadFile(names[p], &pl) == mscclppSuccess) {
      mscclppPlanInfo in = MSCCLPP_PLAN_INFO_INITIALIZER;
      (void)mscclppPlanGetInfo(pl, &in);
      expected += in.nranks == nranks;
      (void)mscclppPlanDestroy(pl);
    }
  }
  char bad[700];
  snprintf(bad, sizeof(bad), "%s/zz_malformed.json", dir);
  FILE* f = fopen(bad, "w");
  if (f != NULL) {
    fputs("{\"name\": \"broken\", \"collective\": \"allreduce\", \"gpus\": [", f);
    fclose(f);
  }
  /* a second communicator, made with MSCCLPP_CACHE_DIR set (its id from rank 0) */
  mscclppUniqueId* ids = (mscclppUniqueId*)calloc((size_t)nranks, sizeof(mscclppUniqueId));
  if (rank == 0) CHECK_RES(mscclppGetUniqueId(&ids[0]), mscclppSuccess);
  CHECK_RES(mscclppBootstrapAllGather(comm, ids, sizeof(mscclppUniqueId)), mscclppSuccess);
  setenv("MSCCLPP_CACHE_DIR", dir, 1);
  mscclppComm_t c2 = NULL;
  CHECK_RES(mscclppCommInitRankFromId(&c2, nranks, ids[0], rank), mscclppSuccess);
  unsetenv("MSCCLPP_CACHE_DIR");
  free(ids);
  snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
  if (system(cmd) != 0) harnessFailures_++;
  if (c2 == NULL) return;
  int n = -1;
  CHECK_RES(mscclppPlanRegisteredCount(c2, &n), mscclppSuccess);
  if (n != expected) {
    fprintf(stderr, "rank %d: FAIL: MSCCLPP_CACHE_DIR registered %d plans, expected %d\n", rank, n, expected);
    harnessFailures_++;
  }
  mscclppComm_t keep = comm;
  comm = c2;
  for (int i = 0; i < n; i++) {
    mscclppPlan_t plan = NULL;
    CHECK_RES(mscclppPlanRegisteredAt(c2, i, &plan), mscclppSuccess);
    mscclppPlanInfo info = MSCCLPP_PLAN_INFO_INITIALIZER;
    CHECK_RES(mscclppPlanGetInfo(plan, &info), mscclppSuccess);
    enum oracleColl c = collOf(info.collective);
    int op = c == ORACLE_ALLREDUCE || c == ORACLE_REDUCESCATTER ? mscclppSum : ORACLE_COPY;
    /* a call the plan matches runs it: its counter moves */
    uint64_t runs = runsOf(c2, plan);
    struct pcall k = {c, mscclppFloat32, op, info.inplace, 333, 4, 0, 0, NULL, NULL, NULL, NULL};
    prepare(&k);
    CHECK_RES(callBuiltin(&k), mscclppSuccess); /* the plain collective call: the selection table picks */
    harnessFailures_ += verify(&k, info.name) != 0;
    freeCall(&k);
    uint64_t after = runsOf(c2, plan);
    /* an earlier plan of the same collective and form may have taken it */
    int taken = after == runs + 1;
    for (int j = 0; j < i && !taken; j++) {
      mscclppPlan_t earlier = NULL;
      (void)mscclppPlanRegisteredAt(c2, j, &earlier);
      mscclppPlanInfo ei = MSCCLPP_PLAN_INFO_INITIALIZER;
      (void)mscclppPlanGetInfo(earlier, &ei);
      taken = strcmp(ei.collective, info.collective) == 0 && ei.inplace == info.inplace;
    }
    if (!taken) {
      fprintf(stderr, "rank %d: FAIL: a matching %s call did not run plan %s (runs %llu -> %llu)\n", rank,
              info.collective, info.name, (unsigned long long)runs, (unsigned long long)after);
      harnessFailures_++;
    }
    /* the other in-place form runs the built-in algorithm */
    struct pcall o = {c, mscclppFloat32, op, !info.inplace, 333, 4, 0, 0, NULL, NULL, NULL, NULL};
    prepare(&o);
    uint64_t before = runsOf(c2, plan);
    CHECK_RES(callBuiltin(&o), mscclppSuccess);
    harnessFailures_ += verify(&o, info.name) != 0;
    CHECK(runsOf(c2, plan) == before);
    freeCall(&o);
    calls += 2;
  }
  comm = keep;
  if (rank == 0) printf("MSCCLPP_CACHE_DIR: %d plans registered and selected\n", n);
  CHECK_RES(mscclppCommDestroy(c2), mscclppSuccess);
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: plan_worker run|compare|cache|graph|play PATH [maxBytes [replays|threads]]\n");
    return 2;
  }
  if (strcmp(argv[1], "play") == 0) {
    playThreads_ = argc > 4 ? (unsigned)atoi(argv[4]) : 2;
#ifndef MSCCLPP_PLAN_PLAY
    printf("skipped: the play of the GPU executor's kernel needs a C++ compiler\n");
    return 77;
#else
    if (planPlayRefusal() != NULL) {
      printf("skipped: %s\n", planPlayRefusal());
      return 77;
    }
#endif
    if (playThreads_ == 0 || playThreads_ > 64) {
      fprintf(stderr, "plan_worker play: threads per block must be 1 to 64\n");
      return 2;
    }
  }
  const char* g = getenv("MSCCLPP_PLAN_WORKER_GPU");
  gpu_ = (g != NULL && atoi(g) != 0) || strcmp(argv[1], "graph") == 0;
#ifdef MSCCLPP_HAVE_CUDA
  int ndev = 0;
  if (gpu_ && (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0)) {
    printf("skipped: needs a GPU\n");
    return 77;
  }
  if (gpu_) CUDA_OK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
#else
  if (gpu_) {
    printf("skipped: needs a CUDA build\n");
    return 77;
  }
#endif
  CHECK_RES(mscclppCommInitFromEnv(&comm), mscclppSuccess);
  if (comm == NULL) return 1;
  CHECK_RES(mscclppCommRank(comm, &rank), mscclppSuccess);
  CHECK_RES(mscclppCommSize(comm, &nranks), mscclppSuccess);
  size_t maxBytes = argc > 3 ? strtoull(argv[3], NULL, 0) : (size_t)256 << 10;
  if (strcmp(argv[1], "run") == 0 || strcmp(argv[1], "play") == 0) modeRun(argv[2], maxBytes);
  else if (strcmp(argv[1], "compare") == 0) modeCompare(argv[2]);
  else if (strcmp(argv[1], "cache") == 0) modeCache(argv[2]);
  else if (strcmp(argv[1], "graph") == 0) modeGraph(argv[2], maxBytes, argc > 4 ? atoi(argv[4]) : 100);
  else {
    fprintf(stderr, "plan_worker: unknown mode %s\n", argv[1]);
    return 2;
  }
  CHECK_RES(mscclppCommDestroy(comm), mscclppSuccess);
  if (rank == 0) printf("rank 0: %ld checked calls, %ld plans for other rank counts skipped\n", calls, skippedPlans);
  return harnessFinish();
}
