/* SPDX-License-Identifier: MIT */
/*
 * GPU collectives, checked exactly, in real processes sharing the GPU(s):
 *   mscclpp-run -n N --mps -- coll_gpu_worker [maxBytes] [graph[=REPLAYS]]
 *   mscclpp-run -n N --mps -- coll_gpu_worker maxBytes big
 *   mscclpp-run -n N --mps -- coll_gpu_worker maxBytes order
 * Every collective x type x operator x placement (out of place, in place,
 * odd element offsets) x count (1, primes, ... up to maxBytes), output
 * poisoned before each call, inputs fresh per call. Inputs are small
 * integers chosen so that the exact result is representable in every type
 * (sum: 0..2, or 0..1 for fp8 e5m2; prod: 1..2; max/min: 0..6; avg: the same
 * value on every rank for floating types), so results compare bitwise.
 * "graph": also capture each collective once in a CUDA graph and replay it
 * 1000 times (graph=REPLAYS: that many), checking after the last replay
 * (inputs unchanged). "big": only the largest calls, for sizes the full
 * matrix would take too long at (1 GiB): every collective with the largest
 * count whose buffers fit maxBytes -- float32 sum out of place and in place,
 * int8 max at an odd count and odd offsets (the byte paths) -- then
 * float32 allreduce and allgather at that size captured in a CUDA graph and
 * replayed 20 times. "order": the matrix, but rank 0 makes each call
 * first and the others only once its call has returned (told through a
 * file): NCCL's contract that no call waits for a peer's host thread;
 * a call that waited would leave the others waiting for the word (60 s).
 * The GPU collectives over port channels run the same
 * checks: tests/collgpu/run_port.sh.
 * Exit 77 without a GPU.
 */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/fpconv.h"
#include "harness.h"
#include "mscclpp/coll.h"
#include "mscclpp/comm.h"

#define CUDA_OK(x)                                                                             \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));       \
      exit(1);                                                                                 \
    }                                                                                          \
  } while (0)

static int rank_, nranks_;
static int replays_ = 1000;
static int order_;   /* "order": rank 0 calls first, the others only after its call returned */
static int orderSeq_;

/* The side channel of "order": files, not the library, as a program that
 * synchronises its ranks through MPI, a store or a file would. */
static void tokenPath(char* buf, size_t len, int seq) {
  const char* secret = getenv("MSCCLPP_COMM_SECRET");
  snprintf(buf, len, "/tmp/mscclpp-order-%s-%d-%d", secret ? secret : "nosecret", (int)getppid(), seq);
}
static void tokenPost(int seq) {
  char path[256];
  tokenPath(path, sizeof(path), seq);
  FILE* f = fopen(path, "w");
  if (f != NULL) fclose(f);
}
/* 0 when the token came within 60 s. */
static int tokenWait(int seq) {
  char path[256];
  tokenPath(path, sizeof(path), seq);
  for (int i = 0; i < 60000; i++) {
    FILE* f = fopen(path, "r");
    if (f != NULL) {
      fclose(f);
      return 0;
    }
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  fprintf(stderr, "rank %d: rank 0's word for call %d never came: its call waited for this rank's\n", rank_, seq);
  return 1;
}

/* An exact small non-negative integer in the bits of `type` (floating
 * point: the codec of core/fpconv.h). */
static void encode(mscclppDataType_t type, uint64_t v, uint8_t* out) {
  if (mscclppFloatEncode(type, (double)v, out) != 0)
    memcpy(out, &v, mscclppDataTypeSize(type)); /* little-endian truncation: wrap-around */
}

static int isFloat(mscclppDataType_t t) {
  return t == mscclppFloat16 || t == mscclppFloat32 || t == mscclppFloat64 || t == mscclppBfloat16 ||
         t == mscclppFloat8e4m3 || t == mscclppFloat8e5m2;
}

static uint64_t value(mscclppDataType_t t, mscclppRedOp_t op, int r, uint64_t i) {
  switch (op) {
    case mscclppProd: return 1 + (i + (uint64_t)r) % 2;
    case mscclppMax:
    case mscclppMin: return (i * 5 + (uint64_t)r * 3) % 7;
    case mscclppAvg: return isFloat(t) ? i % 3 : (i + (uint64_t)r) % 3;
    default: return t == mscclppFloat8e5m2 ? (i + (uint64_t)r) % 2 : (i + 2 * (uint64_t)r) % 3;
  }
}

static uint64_t reduced(mscclppDataType_t t, mscclppRedOp_t op, uint64_t i) {
  uint64_t acc = value(t, op, 0, i);
  for (int r = 1; r < nranks_; r++) {
    uint64_t v = value(t, op, r, i);
    switch (op) {
      case mscclppProd: acc *= v; break;
      case mscclppMax: acc = v > acc ? v : acc; break;
      case mscclppMin: acc = v < acc ? v : acc; break;
      default: acc += v; break;
    }
  }
  if (op == mscclppAvg) acc /= (uint64_t)nranks_;
  return acc;
}

/* value() and reduced() repeat every PERIOD indices (their periods are 2, 3
 * and 7): the inputs and expected outputs are filled from tables of encoded
 * elements, so that buffers of a GiB fill in a second. */
#define PERIOD 42
struct patterns {
  size_t ts;
  uint8_t* val; /* [rank][i % PERIOD] */
  uint8_t* red; /* [i % PERIOD] */
};

static void patternsMake(struct patterns* p, mscclppDataType_t t, mscclppRedOp_t op) {
  p->ts = mscclppDataTypeSize(t);
  p->val = malloc((size_t)nranks_ * PERIOD * p->ts);
  p->red = malloc(PERIOD * p->ts);
  for (int j = 0; j < PERIOD; j++) {
    for (int r = 0; r < nranks_; r++)
      encode(t, value(t, op, r, (uint64_t)j), p->val + ((size_t)r * PERIOD + j) * p->ts);
    encode(t, reduced(t, op, (uint64_t)j), p->red + (size_t)j * p->ts);
  }
}

/* n elements from `table` (PERIOD encoded elements), element i being
 * table[(phase + i) % PERIOD]: one period written, then copied in doubling
 * blocks. */
static void fillPeriodic(uint8_t* dst, size_t n, const struct patterns* p, const uint8_t* table, size_t phase) {
  const size_t ts = p->ts, first = n < PERIOD ? n : PERIOD;
  for (size_t i = 0; i < first; i++) memcpy(dst + i * ts, table + ((phase + i) % PERIOD) * ts, ts);
  for (size_t done = first; done < n;) { /* [0, done) repeats with period PERIOD, and done is a multiple of it */
    size_t m = done < n - done ? done : n - done;
    memcpy(dst + done * ts, dst, m * ts);
    done += m;
  }
}

/* The output `kind` must leave on this rank (coll_gpu_worker's inputs). */
static void fillExpected(uint8_t* hexp, int kind, size_t count, size_t outElems, int root, const struct patterns* p) {
  const size_t ts = p->ts, k = (size_t)nranks_;
  switch (kind) {
    case 0: case 4: fillPeriodic(hexp, outElems, p, p->red, 0); break;
    case 1: /* block q: rank q's input */
      for (size_t q = 0; q < k; q++) fillPeriodic(hexp + q * count * ts, count, p, p->val + q * PERIOD * ts, 0);
      break;
    case 2: fillPeriodic(hexp, outElems, p, p->red, ((size_t)rank_ * count) % PERIOD); break;
    case 3: fillPeriodic(hexp, outElems, p, p->val + (size_t)root * PERIOD * ts, 0); break;
    case 5: /* block q: block rank_ of rank q's input */
      for (size_t q = 0; q < k; q++)
        fillPeriodic(hexp + q * count * ts, count, p, p->val + q * PERIOD * ts, ((size_t)rank_ * count) % PERIOD);
      break;
    default: /* sendrecv: the previous rank's input */
      fillPeriodic(hexp, outElems, p, p->val + (size_t)((rank_ - 1 + nranks_) % nranks_) * PERIOD * ts, 0);
      break;
  }
}

static const int kinds = 7; /* allreduce allgather reducescatter broadcast reduce alltoall sendrecv */
static const char* kindName[] = {"allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall",
                                 "sendrecv"};

/* One checked call; placement 0 out of place, 1 in place, 2 odd offsets. */
static int runOne(mscclppComm_t comm, cudaStream_t s, int kind, mscclppDataType_t t, mscclppRedOp_t op, size_t count,
                  int placement, int graph) {
  const size_t ts = mscclppDataTypeSize(t), k = (size_t)nranks_;
  size_t inElems = count, outElems = count;
  if (kind == 1) outElems *= k;
  if (kind == 2 || kind == 5) inElems *= k;
  if (kind == 5) outElems *= k;
  const int root = nranks_ - 1;
  size_t pad = placement == 2 ? 3 : 0;
  size_t maxElems = inElems > outElems ? inElems : outElems; /* in place, one buffer holds both */
  size_t allocIn = (inElems + pad + 1) * ts, allocOut = (maxElems + pad + 1) * ts;
  uint8_t *din = NULL, *dout = NULL;
  CUDA_OK(cudaMalloc((void**)&din, allocIn));
  CUDA_OK(cudaMalloc((void**)&dout, allocOut));
  uint8_t* hin = malloc(inElems * ts);
  uint8_t* hexp = malloc(outElems * ts);
  uint8_t* hout = malloc(outElems * ts);
  struct patterns pat;
  patternsMake(&pat, t, op);
  fillPeriodic(hin, inElems, &pat, pat.val + (size_t)rank_ * PERIOD * ts, 0);
  fillExpected(hexp, kind, count, outElems, root, &pat);
  free(pat.val);
  free(pat.red);
  int checkOut = 1;
  if (kind == 4 && rank_ != root) checkOut = 0;
  /* everything on the collective's stream: a non-blocking stream does not
   * wait for the legacy stream's work */
  CUDA_OK(cudaMemsetAsync(dout, 0xA5, allocOut, s));
  CUDA_OK(cudaMemsetAsync(din, 0x5A, allocIn, s));
  uint8_t* send = din + (placement == 2 ? ts : 0);
  uint8_t* recv = dout + (placement == 2 ? 3 * ts : 0);
  if (placement == 1) { /* in place */
    switch (kind) {
      case 1: send = recv + (size_t)rank_ * count * ts; break;
      case 2: send = recv; recv = send + (size_t)rank_ * count * ts; break;
      default: send = recv; break;
    }
  }
  CUDA_OK(cudaMemcpyAsync(send, hin, inElems * ts, cudaMemcpyHostToDevice, s));
  CUDA_OK(cudaStreamSynchronize(s));
  mscclppResult_t res = mscclppSuccess;
  cudaGraph_t g = NULL;
  cudaGraphExec_t ge = NULL;
  int seq = ++orderSeq_, late = 0;
  if (order_ && rank_ != 0) late = tokenWait(seq);
  if (graph) CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  switch (kind) {
    case 0: res = mscclppAllReduce(send, recv, count, t, op, comm, s); break;
    case 1: res = mscclppAllGather(send, recv, count, t, comm, s); break;
    case 2: res = mscclppReduceScatter(send, recv, count, t, op, comm, s); break;
    case 3: res = mscclppBroadcast(send, recv, count, t, root, comm, s); break;
    case 4: res = mscclppReduce(send, recv, count, t, op, root, comm, s); break;
    case 5: res = mscclppAllToAll(send, recv, count, t, comm, s); break;
    case 6:
      mscclppGroupStart();
      mscclppSend(send, count, t, (rank_ + 1) % nranks_, comm, s);
      mscclppRecv(recv, count, t, (rank_ - 1 + nranks_) % nranks_, comm, s);
      res = mscclppGroupEnd();
      break;
  }
  if (order_ && rank_ == 0) tokenPost(seq);
  if (graph) {
    CUDA_OK(cudaStreamEndCapture(s, &g));
    CUDA_OK(cudaGraphInstantiate(&ge, g, 0));
    for (int i = 0; i < replays_ && res == mscclppSuccess; i++) CUDA_OK(cudaGraphLaunch(ge, s));
  }
  CUDA_OK(cudaStreamSynchronize(s));
  mscclppResult_t async = mscclppSuccess;
  mscclppCommGetAsyncError(comm, &async);
  int bad = late;
  if (res != mscclppSuccess || async != mscclppSuccess) {
    fprintf(stderr, "rank %d: %s %s %s count %zu placement %d: result %d async %d: %s\n", rank_, kindName[kind],
            mscclppDataTypeName(t), mscclppRedOpName(op), count, placement, (int)res, (int)async,
            mscclppGetLastError());
    bad = 1;
  } else if (checkOut) {
    CUDA_OK(cudaMemcpy(hout, recv, outElems * ts, cudaMemcpyDeviceToHost));
    if (memcmp(hout, hexp, outElems * ts) != 0) /* then the first element that differs */
      for (size_t i = 0; i < outElems && !bad; i++)
        if (memcmp(hout + i * ts, hexp + i * ts, ts) != 0) {
          uint64_t got = 0, want = 0;
          memcpy(&got, hout + i * ts, ts);
          memcpy(&want, hexp + i * ts, ts);
          fprintf(stderr,
                  "rank %d: %s %s %s count %zu placement %d graph %d: element %zu is 0x%llx, expected 0x%llx\n", rank_,
                  kindName[kind], mscclppDataTypeName(t), mscclppRedOpName(op), count, placement, graph, i,
                  (unsigned long long)got, (unsigned long long)want);
          bad = 1;
        }
  }
  if (ge != NULL) cudaGraphExecDestroy(ge);
  if (g != NULL) cudaGraphDestroy(g);
  free(hin);
  free(hexp);
  free(hout);
  /* peers may still map these: free only after everyone is done with them */
  mscclppBootstrapBarrier(comm);
  if (order_ && rank_ == 0) {
    char path[256];
    tokenPath(path, sizeof(path), seq);
    unlink(path);
  }
  CUDA_OK(cudaFree(din));
  CUDA_OK(cudaFree(dout));
  return bad;
}

/* runOne, and how long it took (rank 0 says: a slow big run shows where it is). */
static int bigOne(mscclppComm_t comm, cudaStream_t s, int kind, mscclppDataType_t t, mscclppRedOp_t op, size_t count,
                  int placement, int graph) {
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  int bad = runOne(comm, s, kind, t, op, count, placement, graph);
  clock_gettime(CLOCK_MONOTONIC, &b);
  if (rank_ == 0)
    printf("big: %s %s count %zu placement %d graph %d: %s, %.1f s\n", kindName[kind], mscclppDataTypeName(t), count,
           placement, graph, bad ? "WRONG" : "ok", (double)(b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9);
  fflush(stdout);
  return bad;
}

int main(int argc, char** argv) {
  size_t maxBytes = argc > 1 ? strtoull(argv[1], NULL, 0) : (16u << 20);
  int graph = argc > 2 && strncmp(argv[2], "graph", 5) == 0;
  order_ = argc > 2 && strcmp(argv[2], "order") == 0;
  if (graph && argv[2][5] == '=') replays_ = atoi(argv[2] + 6);
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) harnessSkip("no GPU");
  const char* lr = getenv("MSCCLPP_LOCAL_RANK");
  CUDA_OK(cudaSetDevice((lr ? atoi(lr) : 0) % ndev));
  mscclppComm_t comm;
  CHECK_RES(mscclppCommInitFromEnv(&comm), mscclppSuccess);
  mscclppCommRank(comm, &rank_);
  mscclppCommSize(comm, &nranks_);
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  /* 16 * 16411: a multiple of 16 bytes in every type (the vector paths) that no larger power of two divides */
  const size_t counts[] = {1, 3, 17, 1031, 65537, 262147, (size_t)16 * 16411, (size_t)1 << 20, (size_t)4 << 20,
                           (size_t)16 << 20};
  int failures = 0, calls = 0, matrixKinds = kinds;
  if (argc > 2 && strcmp(argv[2], "big") == 0) {
    for (int kind = 0; kind < kinds; kind++) {
      const size_t scale = (kind == 1 || kind == 2 || kind == 5) ? (size_t)nranks_ : 1;
      const size_t c32 = maxBytes / scale / 4, c8 = (maxBytes / scale - 7) | 1; /* odd offsets pad the buffers */
      failures += bigOne(comm, s, kind, mscclppFloat32, mscclppSum, c32, 0, 0);
      if (kind != 6) failures += bigOne(comm, s, kind, mscclppFloat32, mscclppSum, c32, 1, 0);
      failures += bigOne(comm, s, kind, mscclppInt8, mscclppMax, c8, 2, 0);
      calls += kind != 6 ? 3 : 2;
    }
    replays_ = 20;
    failures += bigOne(comm, s, 0, mscclppFloat32, mscclppSum, maxBytes / 4, 0, 1);
    failures += bigOne(comm, s, 1, mscclppFloat32, mscclppSum, maxBytes / (size_t)nranks_ / 4, 0, 1);
    calls += 2;
    matrixKinds = 0; /* the full matrix is skipped */
  }
  for (int kind = 0; kind < matrixKinds; kind++) {
    int reduces = kind == 0 || kind == 2 || kind == 4;
    for (int t = 0; t < mscclppNumTypes; t++) {
      for (int op = 0; op < (reduces ? mscclppNumOps : 1); op++) {
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
          size_t count = counts[c];
          size_t ts = mscclppDataTypeSize((mscclppDataType_t)t);
          size_t scale = (kind == 1 || kind == 2 || kind == 5) ? (size_t)nranks_ : 1;
          if (count * ts * scale > maxBytes) continue;
          /* large counts: float32 and int8 with sum and max only, to keep the run short */
          if (count > 65537 && ((t != mscclppFloat32 && t != mscclppInt8) || (op != mscclppSum && op != mscclppMax)))
            continue;
          for (int placement = 0; placement < 3; placement++) {
            if (placement == 1 && kind == 6) continue; /* a send and a receive of one buffer */
            failures += runOne(comm, s, kind, (mscclppDataType_t)t, (mscclppRedOp_t)op, count, placement, 0);
            calls++;
          }
        }
      }
    }
  }
  if (graph)
    for (int kind = 0; kind < matrixKinds; kind++) {
      failures += runOne(comm, s, kind, mscclppFloat32, mscclppSum, 1031, 0, 1);
      failures += runOne(comm, s, kind, mscclppBfloat16, mscclppSum, (size_t)1 << 20, 0, 1);
      calls += 2;
    }
  if (graph && matrixKinds > 5) { /* in-place all-to-all stages its input: captured too */
    failures += runOne(comm, s, 5, mscclppFloat32, mscclppSum, 65537, 1, 1);
    calls++;
  }
  int localN = 0;
  mscclppCommLocalSize(comm, &localN);
  printf("rank %d (%d of %d ranks on its host): %d checked calls, %d wrong\n", rank_, localN, nranks_, calls,
         failures);
  CHECK(failures == 0);
  cudaStreamDestroy(s);
  CHECK_RES(mscclppCommDestroy(comm), mscclppSuccess);
  harnessFinish(); /* (no RUN here: it counts CHECKs only inside RUN) */
  return harnessFailures_ ? 1 : 0;
}
