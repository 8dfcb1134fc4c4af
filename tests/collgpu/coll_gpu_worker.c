/* SPDX-License-Identifier: MIT */
/*
 * GPU collectives, checked exactly, in real processes sharing the GPU(s):
 *   mscclpp-run -n N --mps -- coll_gpu_worker [maxBytes] [graph[=REPLAYS]]
 *   mscclpp-run -n N --mps -- coll_gpu_worker maxBytes big
 *   mscclpp-run -n N --mps -- coll_gpu_worker maxBytes order
 *   mscclpp-run -n N --mps -- coll_gpu_worker maxBytes alltoallv[=REPLAYS]
 *   mscclpp-run -n N --mps -- coll_gpu_worker maxBytes alltoallv_errors
 *   mscclpp-run -n N --mps -- coll_gpu_worker maxBytes p2p[=REPLAYS]
 *   mscclpp-run -n N --mps -- coll_gpu_worker maxBytes p2psmall[=REPLAYS]
 *   mscclpp-run -n N --mps -- coll_gpu_worker maxBytes edges[=REPLAYS]
 * Every collective x type x operator x placement (out of place, in place,
 * odd element offsets) x count (1, primes, ... up to maxBytes), output
 * poisoned before each call, inputs fresh per call. Inputs and expected
 * outputs are the oracle's (tools/oracle/oracle.h), as coll_worker's:
 * ORACLE_SMALL, small integers whose every partial result is exact in every
 * type (avg: the exact mean rounded once, which dividing the exact sum in
 * float gives too), random bits for the copies, repeating with a prime
 * period so that a GiB fills in a second; results compare bitwise.
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
 * All-to-all-v (after the matrix, or alone with "alltoallv"): new counts
 * every call, the same on every rank (oracleA2avCount of the call number):
 * every type, zeros, a rank that sends nothing (NULL sendbuff on some
 * calls), a rank that receives nothing, blocks out of rank order with
 * gaps, odd element offsets, buffers under 2 MiB (staged) and over
 * (exported); the counts are copied into device memory on the stream just
 * before each call, and the output, its slack and a guard after the
 * capacity, recvcounts and rdispls are checked exactly (blocks of at most
 * maxBytes / 8 / nranks elements). Then three calls with their count
 * copies captured in one CUDA graph, replayed 1000 times with "graph" or
 * "alltoallv" (graph=REPLAYS, alltoallv=REPLAYS: that many; 100 otherwise)
 * with the outputs poisoned first. Then, for three types, a graph of what an
 * MoE layer does around the call (a kernel draws new counts from a replay
 * number in device memory, one fills the blocks, one checks everything that
 * arrived), replayed as often: every replay a new call with new counts,
 * zeros, a rank that sends nothing and one that receives nothing included
 * (coll_gpu_worker_kernels.cu). Where the
 * communicator spans hosts the call must be refused (mscclppInvalidUsage).
 * "alltoallv_errors": rank 0 receives more than its capacity and rank 1
 * names a block outside its sendbuff in one call: each gets its error from
 * mscclppCommGetAsyncError, nothing is written past rank 0's capacity, and
 * every other rank's call succeeds.
 * "edges": the matrix of the collectives that run as one step of LL
 * packets (allreduce, allgather, reduce-scatter, all-to-all) only, with
 * more counts: 0, and around the packet grids' edges (4 KiB and 64 KiB of
 * bytes per block), the size rule's (64, 256 and 512 KiB) and a slot's
 * (blocks larger than one are sent in several rounds); then graph replays
 * (REPLAYS, default 100) of each, several rounds per call, in place and at
 * odd offsets. With MSCCLPP_ALGO forcing packet (scripts/gpu-run.sh) every
 * size takes the packets; without, each side of the rule's edges.
 * Send/recv patterns in groups (after the matrix, or alone with "p2p",
 * which adds receives posted larger than their sends; "p2psmall": only the
 * small sizes, several ops per pair, p2pSmall): see p2pPattern.
 * Exit 77 without a GPU.
 */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "mscclpp/coll.h"
#include "mscclpp/comm.h"
#include "oracle.h"

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
static int edges_;   /* "edges": the packet collectives at more counts (see the top) */
static int orderSeq_;
static const uint64_t seed_ = 12345; /* of the oracle's inputs; each call's own: oracleMix(seed_ ^ call) */
static uint64_t ncases_;

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

static const int kinds = 7; /* the oracle's numbers: allreduce allgather reducescatter broadcast reduce alltoall sendrecv */
static const char* kindName[] = {"allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall",
                                 "sendrecv"};

/* One checked call; placement 0 out of place, 1 in place, 2 odd offsets. */
static int runOne(mscclppComm_t comm, cudaStream_t s, int kind, mscclppDataType_t t, mscclppRedOp_t op, size_t count,
                  int placement, int graph) {
  const size_t ts = mscclppDataTypeSize(t);
  const enum oracleColl coll = (enum oracleColl)kind;
  const size_t inElems = oracleInElems(coll, count, nranks_), outElems = oracleOutElems(coll, count, nranks_);
  const int root = nranks_ - 1;
  size_t pad = placement == 2 ? 3 : 0;
  size_t maxElems = inElems > outElems ? inElems : outElems; /* in place, one buffer holds both */
  size_t allocIn = (inElems + pad + 1) * ts, allocOut = (maxElems + pad + 1) * ts;
  uint8_t *din = NULL, *dout = NULL;
  CUDA_OK(cudaMalloc((void**)&din, allocIn));
  CUDA_OK(cudaMalloc((void**)&dout, allocOut));
  uint8_t* hin = malloc(inElems * ts + 1); /* (+1: count 0) */
  uint8_t* hexp = malloc(outElems * ts + 1);
  uint8_t* hout = malloc(outElems * ts + 1);
  const int reduces = kind == 0 || kind == 2 || kind == 4;
  struct oracleCall call;
  oracleInit(&call, ORACLE_SMALL, t, reduces ? (int)op : ORACLE_COPY, nranks_, oracleMix(seed_ ^ ++ncases_));
  oracleInputs(&call, rank_, 0, inElems, hin);
  oracleExpected(&call, coll, rank_, root, count, hexp);
  int checkOut = 1;
  if (kind == 4 && rank_ != root) checkOut = 0;
  /* A graph replays the call replays_ times on the same buffers: in place,
   * every replay of an all-to-all transposes the blocks again, so after an
   * even number of replays each rank holds its input again. */
  if (graph && placement == 1 && kind == 5 && replays_ % 2 == 0) memcpy(hexp, hin, outElems * ts);
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
    if (memcmp(hout, hexp, outElems * ts) != 0) { /* the first element that differs, and how many do */
      size_t first = 0, ndiff = 0;
      for (size_t i = 0; i < outElems; i++)
        if (memcmp(hout + i * ts, hexp + i * ts, ts) != 0 && ndiff++ == 0) first = i;
      uint64_t got = 0, want = 0;
      memcpy(&got, hout + first * ts, ts);
      memcpy(&want, hexp + first * ts, ts);
      fprintf(stderr,
              "rank %d: %s %s %s count %zu placement %d graph %d: element %zu is 0x%llx, expected 0x%llx "
              "(%zu of %zu elements differ)\n",
              rank_, kindName[kind], mscclppDataTypeName(t), mscclppRedOpName(op), count, placement, graph, first,
              (unsigned long long)got, (unsigned long long)want, ndiff, outElems);
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

/* ---- all-to-all-v ---------------------------------------------------------------------- */

#define A2AV_GUARD 64
#define A2AV_MAX_RANKS 64

static size_t a2avMaxCount_ = (size_t)1 << 20; /* elements per block: maxBytes / 8 / nranks */
static int a2avReplays_ = 100;                  /* graph replays: replays_ with "graph" or "alltoallv" */

/* One call's buffers: this rank's blocks out of rank order with gaps, the
 * capacities with slack, and what must come out. */
struct a2avCase {
  int k;
  mscclppDataType_t t;
  size_t ts, sendcap, recvcap, total, sent;
  size_t counts[2 * A2AV_MAX_RANKS]; /* sendcounts, sdispls */
  size_t want[2 * A2AV_MAX_RANKS];   /* recvcounts, rdispls */
  uint8_t *hin, *hexp;               /* sendcap elements; recvcap elements and the guard */
  uint8_t *din, *dout;               /* allocations; the call's buffers start k % 3 / k % 5 elements in */
  size_t* dcnt;                      /* device: sendcounts, sdispls, recvcounts, rdispls */
  const void* send;                  /* NULL on some calls that send nothing */
  void* recv;                        /* NULL when the capacity is 0 */
};

static void a2avMake(struct a2avCase* c, int k, mscclppDataType_t t) {
  const int n = nranks_;
  memset(c, 0, sizeof(*c));
  c->k = k;
  c->t = t;
  c->ts = mscclppDataTypeSize(t);
  size_t at = 0;
  for (int j = 0; j < n; j++) {
    int d = (j + k) % n;
    c->counts[d] = oracleA2avCount(seed_, k, n, rank_, d, a2avMaxCount_);
    at += (size_t)((k + d) % 3);
    /* a zero count's displacement is not read */
    c->counts[n + d] = c->counts[d] > 0 || k % 4 != 0 ? at : (size_t)1 << 40;
    at += c->counts[d];
    c->sent += c->counts[d];
  }
  c->sendcap = at + (size_t)(k % 2);
  oracleA2avRecv(seed_, k, n, rank_, a2avMaxCount_, c->want, c->want + n);
  c->total = c->want[n + n - 1] + c->want[n - 1];
  c->recvcap = c->total + (size_t)(k % 3);
  const size_t ts = c->ts;
  c->hin = calloc(c->sendcap + 1, ts);
  c->hexp = malloc(c->recvcap * ts + A2AV_GUARD);
  for (int d = 0; d < n; d++) oracleA2avBlock(seed_, k, rank_, d, c->counts[d] * ts, c->hin + c->counts[n + d] * ts);
  for (int s = 0; s < n; s++) oracleA2avBlock(seed_, k, s, rank_, c->want[s] * ts, c->hexp + c->want[n + s] * ts);
  memset(c->hexp + c->total * ts, 0xA5, (c->recvcap - c->total) * ts + A2AV_GUARD);
  CUDA_OK(cudaMalloc((void**)&c->din, (c->sendcap + 3) * ts));
  CUDA_OK(cudaMalloc((void**)&c->dout, (c->recvcap + 5) * ts + A2AV_GUARD));
  CUDA_OK(cudaMalloc((void**)&c->dcnt, 4 * (size_t)n * sizeof(size_t)));
  c->send = c->din + (size_t)(k % 3) * ts;
  c->recv = c->dout + (size_t)(k % 5) * ts;
  if (c->sent == 0 && k % 4 < 2) {
    c->send = NULL;
    c->sendcap = 0;
  }
  if (c->recvcap == 0) c->recv = NULL;
}

/* The output, the guard after the capacity and the counts, after the
 * stream is done; 0 when right. */
static int a2avCheck(const struct a2avCase* c, const char* how) {
  const size_t ts = c->ts, n = (size_t)nranks_, bytes = c->recvcap * ts + A2AV_GUARD;
  uint8_t* hout = malloc(bytes);
  size_t got[2 * A2AV_MAX_RANKS];
  CUDA_OK(cudaMemcpy(hout, c->dout + (size_t)(c->k % 5) * ts, bytes, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(got, c->dcnt + 2 * n, 2 * n * sizeof(size_t), cudaMemcpyDeviceToHost));
  int bad = 0;
  for (size_t s = 0; s < 2 * n && !bad; s++)
    if (got[s] != c->want[s]) {
      fprintf(stderr, "rank %d: alltoallv %s call %d %s: %s[%zu] is %zu, expected %zu\n", rank_, how, c->k,
              mscclppDataTypeName(c->t), s < n ? "recvcounts" : "rdispls", s % n, got[s], c->want[s]);
      bad = 1;
    }
  if (!bad && memcmp(hout, c->hexp, bytes) != 0)
    for (size_t b = 0; b < bytes && !bad; b++)
      if (hout[b] != c->hexp[b]) {
        fprintf(stderr,
                "rank %d: alltoallv %s call %d %s: byte %zu is 0x%02x, expected 0x%02x (%s; %zu elements arrived, "
                "capacity %zu)\n",
                rank_, how, c->k, mscclppDataTypeName(c->t), b, hout[b], c->hexp[b],
                b < c->total * ts ? "data" : "past the data: must stay as it was", c->total, c->recvcap);
        bad = 1;
      }
  free(hout);
  return bad;
}

static void a2avFree(mscclppComm_t comm, struct a2avCase* c) {
  /* peers may still map these: free only after everyone is done with them */
  mscclppBootstrapBarrier(comm);
  CUDA_OK(cudaFree(c->din));
  CUDA_OK(cudaFree(c->dout));
  CUDA_OK(cudaFree(c->dcnt));
  free(c->hin);
  free(c->hexp);
}

/* The buffers before the call, on the stream: input, poisoned output and
 * result counts. */
static void a2avPrepare(const struct a2avCase* c, cudaStream_t s) {
  const size_t ts = c->ts, n = (size_t)nranks_;
  CUDA_OK(cudaMemcpyAsync(c->din + (size_t)(c->k % 3) * ts, c->hin, c->sendcap * ts, cudaMemcpyHostToDevice, s));
  CUDA_OK(cudaMemsetAsync(c->dout, 0xA5, (c->recvcap + 5) * ts + A2AV_GUARD, s));
  CUDA_OK(cudaMemsetAsync(c->dcnt + 2 * n, 0xFF, 2 * n * sizeof(size_t), s));
  CUDA_OK(cudaStreamSynchronize(s));
}

static mscclppResult_t a2avCall(const struct a2avCase* c, mscclppComm_t comm, cudaStream_t s) {
  const size_t n = (size_t)nranks_;
  return mscclppAllToAllv(c->send, c->sendcap, c->dcnt, c->dcnt + n, c->recv, c->recvcap, c->dcnt + 2 * n,
                          c->dcnt + 3 * n, c->t, comm, s);
}

/* The result of the call and the communicator's asynchronous error after
 * the stream is done; 0 when both are success. */
static int a2avStatus(mscclppComm_t comm, cudaStream_t s, mscclppResult_t res, const struct a2avCase* c,
                      const char* how) {
  CUDA_OK(cudaStreamSynchronize(s));
  mscclppResult_t async = mscclppSuccess;
  mscclppCommGetAsyncError(comm, &async);
  if (res == mscclppSuccess && async == mscclppSuccess) return 0;
  fprintf(stderr, "rank %d: alltoallv %s call %d %s: result %d async %d: %s\n", rank_, how, c->k,
          mscclppDataTypeName(c->t), (int)res, (int)async, mscclppGetLastError());
  return 1;
}

/* Eager calls: every type, new counts every call. */
static int a2avEager(mscclppComm_t comm, cudaStream_t s, int* calls) {
  int bad = 0;
  for (int k = 0; k < 5 * mscclppNumTypes; k++) {
    struct a2avCase c;
    a2avMake(&c, k, (mscclppDataType_t)(k % mscclppNumTypes));
    a2avPrepare(&c, s);
    const size_t n = (size_t)nranks_;
    /* the counts reach device memory on the stream, just before the call */
    CUDA_OK(cudaMemcpyAsync(c.dcnt, c.counts, 2 * n * sizeof(size_t), cudaMemcpyHostToDevice, s));
    mscclppResult_t res = a2avCall(&c, comm, s);
    int wrong = a2avStatus(comm, s, res, &c, "eager");
    if (!wrong) wrong = a2avCheck(&c, "eager");
    bad += wrong;
    (*calls)++;
    a2avFree(comm, &c);
  }
  return bad;
}

/* Three calls with new counts each, their count copies captured with them
 * in one CUDA graph, replayed a2avReplays_ times after the outputs are
 * poisoned and the live counts cleared. */
static int a2avGraph(mscclppComm_t comm, cudaStream_t s, int* calls) {
  enum { G = 3 };
  static const mscclppDataType_t types[G] = {mscclppFloat32, mscclppBfloat16, mscclppInt8};
  const size_t n = (size_t)nranks_;
  struct a2avCase c[G];
  size_t* sets[G];
  int bad = 0;
  for (int j = 0; j < G; j++) {
    a2avMake(&c[j], 1000 + j, types[j]);
    a2avPrepare(&c[j], s);
    CUDA_OK(cudaMalloc((void**)&sets[j], 2 * n * sizeof(size_t)));
    CUDA_OK(cudaMemcpy(sets[j], c[j].counts, 2 * n * sizeof(size_t), cudaMemcpyHostToDevice));
  }
  /* landed before the non-blocking stream reads them (a copy from pageable
   * memory may return before its DMA does) */
  CUDA_OK(cudaDeviceSynchronize());
  cudaGraph_t g = NULL;
  cudaGraphExec_t ge = NULL;
  mscclppResult_t res = mscclppSuccess;
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int j = 0; j < G && res == mscclppSuccess; j++) {
    /* what the router kernel of an MoE layer would do: write the counts */
    CUDA_OK(cudaMemcpyAsync(c[j].dcnt, sets[j], 2 * n * sizeof(size_t), cudaMemcpyDeviceToDevice, s));
    res = a2avCall(&c[j], comm, s);
  }
  CUDA_OK(cudaStreamEndCapture(s, &g));
  if (res == mscclppSuccess) {
    CUDA_OK(cudaGraphInstantiate(&ge, g, 0));
    for (int j = 0; j < G; j++) {
      CUDA_OK(cudaMemsetAsync(c[j].dout, 0xA5, (c[j].recvcap + 5) * c[j].ts + A2AV_GUARD, s));
      CUDA_OK(cudaMemsetAsync(c[j].dcnt, 0, 2 * n * sizeof(size_t), s));
      CUDA_OK(cudaMemsetAsync(c[j].dcnt + 2 * n, 0xFF, 2 * n * sizeof(size_t), s));
    }
    for (int i = 0; i < a2avReplays_; i++) CUDA_OK(cudaGraphLaunch(ge, s));
  }
  if (a2avStatus(comm, s, res, &c[0], "graph")) bad = 1;
  for (int j = 0; j < G && !bad; j++) bad += a2avCheck(&c[j], "graph");
  if (ge != NULL) cudaGraphExecDestroy(ge);
  if (g != NULL) cudaGraphDestroy(g);
  for (int j = 0; j < G; j++) {
    a2avFree(comm, &c[j]);
    CUDA_OK(cudaFree(sets[j]));
  }
  (*calls) += G;
  return bad;
}

/* coll_gpu_worker_kernels.cu: around an all-to-all-v replayed from a graph */
cudaError_t collGpuReplayGen(uint64_t* replay, int me, int k, uint64_t maxCount, size_t* sendcounts, size_t* sdispls,
                             cudaStream_t s);
cudaError_t collGpuReplayFill(const uint64_t* replay, int me, int k, const size_t* sendcounts, const size_t* sdispls,
                              void* send, size_t ts, cudaStream_t s);
cudaError_t collGpuReplayCheck(const uint64_t* replay, int me, int k, uint64_t maxCount, const size_t* recvcounts,
                               const size_t* rdispls, const void* recv, size_t ts, uint64_t recvcap,
                               unsigned long long* err, cudaStream_t s);

/* One CUDA graph of what an MoE layer does around an all-to-all-v, with
 * nothing from the host between replays: the output poisoned, a kernel
 * that draws new counts from the replay number it keeps in device memory,
 * a kernel that fills the blocks, the call, and a kernel that checks
 * everything that arrived (coll_gpu_worker_kernels.cu); replayed
 * a2avReplays_ times, so every replay is a new call with new counts
 * (zeros, a rank that sends nothing, one that receives nothing), checked.
 * Odd element offsets; up to maxCount elements per block (type `t`
 * decides whether the input is staged (under 2 MiB) or exported). */
static int a2avReplay(mscclppComm_t comm, cudaStream_t s, mscclppDataType_t t, uint64_t maxCount) {
  const size_t n = (size_t)nranks_, ts = mscclppDataTypeSize(t);
  if (maxCount > a2avMaxCount_) maxCount = a2avMaxCount_;
  const size_t sendcap = n * (maxCount + 2) + 1, recvcap = n * maxCount + n % 3;
  uint8_t *din, *dout;
  size_t* dcnt;
  uint64_t* replay;
  unsigned long long* err;
  CUDA_OK(cudaMalloc((void**)&din, (sendcap + 1) * ts));
  CUDA_OK(cudaMalloc((void**)&dout, (recvcap + 3) * ts));
  CUDA_OK(cudaMalloc((void**)&dcnt, 4 * n * sizeof(size_t)));
  CUDA_OK(cudaMalloc((void**)&replay, sizeof(uint64_t)));
  CUDA_OK(cudaMalloc((void**)&err, 3 * sizeof(unsigned long long)));
  CUDA_OK(cudaMemset(replay, 0, sizeof(uint64_t)));
  CUDA_OK(cudaMemset(err, 0, 3 * sizeof(unsigned long long)));
  CUDA_OK(cudaDeviceSynchronize());
  uint8_t *send = din + ts, *recv = dout + 3 * ts;
  cudaGraph_t g = NULL;
  cudaGraphExec_t ge = NULL;
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  CUDA_OK(cudaMemsetAsync(recv, 0xA5, recvcap * ts, s));
  CUDA_OK(cudaMemsetAsync(dcnt + 2 * n, 0xFF, 2 * n * sizeof(size_t), s));
  CUDA_OK(collGpuReplayGen(replay, rank_, nranks_, maxCount, dcnt, dcnt + n, s));
  CUDA_OK(collGpuReplayFill(replay, rank_, nranks_, dcnt, dcnt + n, send, ts, s));
  mscclppResult_t res =
      mscclppAllToAllv(send, sendcap, dcnt, dcnt + n, recv, recvcap, dcnt + 2 * n, dcnt + 3 * n, t, comm, s);
  CUDA_OK(collGpuReplayCheck(replay, rank_, nranks_, maxCount, dcnt + 2 * n, dcnt + 3 * n, recv, ts, recvcap, err, s));
  CUDA_OK(cudaStreamEndCapture(s, &g));
  if (res == mscclppSuccess) {
    CUDA_OK(cudaGraphInstantiate(&ge, g, 0));
    for (int i = 0; i < a2avReplays_; i++) CUDA_OK(cudaGraphLaunch(ge, s));
  }
  CUDA_OK(cudaStreamSynchronize(s));
  mscclppResult_t async = mscclppSuccess;
  mscclppCommGetAsyncError(comm, &async);
  unsigned long long e[3] = {0, 0, 0};
  uint64_t replays = 0;
  CUDA_OK(cudaMemcpy(e, err, sizeof(e), cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(&replays, replay, sizeof(replays), cudaMemcpyDeviceToHost));
  int bad = 0;
  if (res != mscclppSuccess || async != mscclppSuccess) {
    fprintf(stderr, "rank %d: alltoallv replayed %s: result %d async %d: %s\n", rank_, mscclppDataTypeName(t),
            (int)res, (int)async, mscclppGetLastError());
    bad = 1;
  } else if (replays != (uint64_t)a2avReplays_) {
    fprintf(stderr, "rank %d: alltoallv replayed %s: the graph ran %llu times, not %d\n", rank_,
            mscclppDataTypeName(t), (unsigned long long)replays, a2avReplays_);
    bad = 1;
  } else if (e[0] != 0) {
    const unsigned long long code = e[1] - 1;
    if (code >= (1ull << 62))
      fprintf(stderr, "rank %d: alltoallv replayed %s: %llu wrong, first at replay %llu: %s[%llu]\n", rank_,
              mscclppDataTypeName(t), e[0], e[2], (code & 16) ? "rdispls" : "recvcounts", code & 15);
    else if (code >= (1ull << 61))
      fprintf(stderr, "rank %d: alltoallv replayed %s: %llu wrong, first at replay %llu: byte %llu past the data "
              "(before the capacity) was written\n", rank_, mscclppDataTypeName(t), e[0], e[2], code - (1ull << 61));
    else
      fprintf(stderr, "rank %d: alltoallv replayed %s: %llu wrong, first at replay %llu: output byte %llu\n", rank_,
              mscclppDataTypeName(t), e[0], e[2], code);
    bad = 1;
  }
  if (rank_ == 0 && !bad)
    printf("alltoallv in a graph with new counts every replay, %s, up to %llu elements a block: %d replays checked\n",
           mscclppDataTypeName(t), (unsigned long long)maxCount, a2avReplays_);
  if (ge != NULL) cudaGraphExecDestroy(ge);
  if (g != NULL) cudaGraphDestroy(g);
  mscclppBootstrapBarrier(comm); /* peers may still map these */
  CUDA_OK(cudaFree(din));
  CUDA_OK(cudaFree(dout));
  CUDA_OK(cudaFree(dcnt));
  CUDA_OK(cudaFree(replay));
  CUDA_OK(cudaFree(err));
  return bad;
}

/* a2avReplay for three types: bytes (every alignment; under 2 MiB, so
 * staged), bfloat16 and float32 (exported). */
static int a2avReplays(mscclppComm_t comm, cudaStream_t s, int* calls) {
  int bad = a2avReplay(comm, s, mscclppUint8, (uint64_t)1 << 16);
  bad += a2avReplay(comm, s, mscclppBfloat16, (uint64_t)1 << 19);
  bad += a2avReplay(comm, s, mscclppFloat32, (uint64_t)1 << 18);
  *calls += 3 * a2avReplays_;
  return bad;
}

/* The all-to-all-v checks; a communicator across hosts must refuse it. */
static int a2avTests(mscclppComm_t comm, cudaStream_t s, int* calls) {
  int localN = 0;
  mscclppCommLocalSize(comm, &localN);
  if (localN != nranks_) {
    struct a2avCase c;
    a2avMake(&c, 0, mscclppFloat32);
    mscclppResult_t res = a2avCall(&c, comm, s);
    int bad = res != mscclppInvalidUsage || strstr(mscclppGetLastError(), "spans hosts") == NULL;
    printf("rank %d: alltoallv across hosts: %s (%s)%s\n", rank_, mscclppGetErrorString(res), mscclppGetLastError(),
           bad ? ": WRONG, expected a refusal" : "");
    (*calls)++;
    a2avFree(comm, &c);
    return bad;
  }
  return a2avEager(comm, s, calls) + a2avGraph(comm, s, calls) + a2avReplays(comm, s, calls);
}

/* Rank 0 receives 7 elements more than its capacity and rank 1 names a
 * block for rank 2 % nranks that ends past its sendbuff, in one call. */
static int a2avErrors(mscclppComm_t comm, cudaStream_t s) {
  const int n = nranks_, bd = 2 % n;
  struct a2avCase c;
  memset(&c, 0, sizeof(c));
  c.k = 77;
  c.t = mscclppInt32;
  c.ts = 4;
  const size_t per = 1000;
  for (int d = 0; d < n; d++) {
    c.counts[d] = per;
    c.counts[n + d] = (size_t)d * per;
  }
  c.sendcap = (size_t)n * per;
  if (rank_ == 1) c.counts[n + bd] = c.sendcap - 3;
  for (int r = 0; r < n; r++) {
    c.want[r] = r == 1 && rank_ == bd ? 0 : per;
    c.want[n + r] = c.total;
    c.total += c.want[r];
  }
  c.recvcap = rank_ == 0 ? c.total - 7 : c.total;
  c.hin = calloc(c.sendcap + 1, c.ts);
  c.hexp = malloc(c.total * c.ts + A2AV_GUARD);
  for (int d = 0; d < n; d++) oracleA2avBlock(seed_, c.k, rank_, d, per * c.ts, c.hin + (size_t)d * per * c.ts);
  for (int r = 0; r < n; r++) oracleA2avBlock(seed_, c.k, r, rank_, c.want[r] * c.ts, c.hexp + c.want[n + r] * c.ts);
  memset(c.hexp + c.recvcap * c.ts, 0xA5, A2AV_GUARD);
  CUDA_OK(cudaMalloc((void**)&c.din, (c.sendcap + 3) * c.ts));
  CUDA_OK(cudaMalloc((void**)&c.dout, (c.recvcap + 5) * c.ts + A2AV_GUARD));
  CUDA_OK(cudaMalloc((void**)&c.dcnt, 4 * (size_t)n * sizeof(size_t)));
  c.send = c.din + (size_t)(c.k % 3) * c.ts;
  c.recv = c.dout + (size_t)(c.k % 5) * c.ts;
  a2avPrepare(&c, s);
  CUDA_OK(cudaMemcpyAsync(c.dcnt, c.counts, 2 * (size_t)n * sizeof(size_t), cudaMemcpyHostToDevice, s));
  mscclppResult_t res = a2avCall(&c, comm, s);
  CUDA_OK(cudaStreamSynchronize(s));
  mscclppResult_t async = mscclppSuccess;
  mscclppCommGetAsyncError(comm, &async);
  const char* why = async != mscclppSuccess ? mscclppGetLastError() : "";
  printf("rank %d: alltoallv with bad counts: returned %s, asynchronous error %s: %s\n", rank_,
         mscclppGetErrorString(res), mscclppGetErrorString(async), why);
  int bad = res != mscclppSuccess;
  char want[3][64];
  snprintf(want[0], sizeof(want[0]), "rank %d:", rank_);
  if (rank_ == 0) {
    snprintf(want[1], sizeof(want[1]), "%zu elements arrived", c.total);
    snprintf(want[2], sizeof(want[2]), "recvcapacity %zu", c.recvcap);
    bad |= async != mscclppInvalidUsage;
  } else if (rank_ == 1) {
    snprintf(want[1], sizeof(want[1]), "block for rank %d ", bd);
    snprintf(want[2], sizeof(want[2]), "sendcapacity %zu", c.sendcap);
    bad |= async != mscclppInvalidArgument;
  } else {
    bad |= async != mscclppSuccess;
  }
  for (int i = 0; i < 3 && rank_ <= 1; i++) bad |= strstr(why, want[i]) == NULL;
  if (bad) fprintf(stderr, "rank %d: alltoallv_errors: WRONG status or message\n", rank_);
  bad += a2avCheck(&c, "errors");
  a2avFree(comm, &c);
  return bad;
}

/* ---- send/recv patterns ---------------------------------------------------------------- */

/* Grouped send/recv in the patterns programs use, on buffers kept across
 * calls, checked exactly: ring, pairs (rank r with r ^ 1; a rank without a
 * partner sends to itself), gather (every rank to the last, which posts
 * its receives first), scatter (rank 0 to every rank) and all-to-all, every
 * rank itself included. Each (sender, receiver) has its own sizes (odd, at
 * odd offsets in the allocations) and its own bytes, new every call. Four
 * eager calls: a first call on buffers the peers have not mapped goes
 * through their scratch, later ones zero-copy once the mappings are
 * learned (MSCCLPP_COLL_P2P_ZERO_COPY); results must be identical. Each
 * call's sends are overwritten on the stream right after it (a send must
 * not complete before its receiver has pulled it). Then the call captured
 * in a CUDA graph with the poisoning of the outputs, replayed; the first
 * P2P_FRESH replays and the last get new sends first and are checked (a
 * replay that found a slot's packets or message numbers of the replay
 * before would deliver that replay's bytes). With `small`, allocations
 * under 2 MiB (never shared: always the scratch).
 * The shape says the sizes: one op per (sender, receiver) of about `base`
 * bytes, or, base 0, P2P_PER_PAIR ops per pair in one group, more than the
 * packet ring's depth, sizes from p2pSizes (0, one byte, primes, both sides
 * of the packet path's default limit and of a 4 KiB one, a scratch chunk
 * and more), small and large mixed on a pair. `more`: each receive is
 * posted that many bytes larger than its send, where both stay on one side
 * of the packet limit and within one scratch chunk (a count mismatch that
 * completed before the packet path: the receive gets the send's bytes;
 * as packets the rest of the last word is zeros, the rest untouched). */
enum { P2P_RING, P2P_PAIRS, P2P_GATHER, P2P_SCATTER, P2P_ALLTOALL, P2P_PATTERNS };
static const char* p2pName[] = {"ring", "pairs", "gather", "scatter", "alltoall"};
#define P2P_MAX_OPS 64 /* the GPU backend's most per group */
#define P2P_PER_PAIR 8
#define P2P_FRESH 4
static int p2pReplays_ = 10; /* with "graph" or "p2p": replays_, at most 100 */
static const size_t p2pSizes[] = {0,     1,     2,     3,     7,     13,    31,    127,   1021,  4093,  4096,
                                  4099,  8191,  32749, 32768, 32771, 65521, 65536, 65537, 98317, 131101};
#define P2P_NSIZES (sizeof(p2pSizes) / sizeof(p2pSizes[0]))
#define P2P_NSMALL 17 /* p2pSizes up to 65521: packets at the default limit */
#define P2P_CHUNK ((size_t)64 << 10) /* a scratch chunk with the default MSCCLPP_COLL_SCRATCH_BYTES */

struct p2pShape {
  size_t base;    /* one op per pair of about this many bytes; 0: P2P_PER_PAIR from p2pSizes */
  int rot;        /* where each pair starts in p2pSizes */
  int smallSizes; /* sizes from the first P2P_NSMALL only */
  size_t more;    /* receives posted this much larger than their sends */
  int split;      /* two ops per pair, `base` bytes then a small one; a rank that only sends posts each send
                     as a call of its own while its receiver groups both (NCCL allows it: the two sides need
                     not group alike) */
};

struct p2pOp {
  int isSend, peer, j; /* j: the op's place among this rank's ops with `peer` in that direction */
  size_t bytes;        /* posted */
  size_t sent;         /* a receive's: its send's bytes */
  size_t off;          /* in this rank's send or receive allocation */
};

/* MSCCLPP_COLL_P2P_LL_MAX as the library takes it (every rank has the
 * same environment). */
static size_t p2pLlMax(void) {
  const char* v = getenv("MSCCLPP_COLL_P2P_LL_MAX");
  size_t m = v != NULL ? (size_t)strtoull(v, NULL, 0) : (size_t)65536;
  return m < 65536 ? m : 65536;
}

/* Whether rank s sends to rank d in the pattern. */
static int p2pEdge(int pattern, int s, int d) {
  const int n = nranks_;
  switch (pattern) {
    case P2P_RING: return d == (s + 1) % n;
    case P2P_PAIRS: return d == ((s ^ 1) < n ? (s ^ 1) : s);
    case P2P_GATHER: return d == n - 1;
    case P2P_SCATTER: return s == 0;
    default: return 1;
  }
}

static size_t p2pBytes(size_t base, int s, int d) { return base + (size_t)16 * (size_t)d + (size_t)(2 * s + 1); }

/* Ops per pair: as many as keep every rank's group within P2P_MAX_OPS. */
static int p2pPerPair(int pattern, const struct p2pShape* sh) {
  if (sh->split) return 2;
  if (sh->base != 0) return 1;
  const int n = nranks_;
  const int pairs = pattern == P2P_ALLTOALL ? 2 * n : pattern == P2P_GATHER || pattern == P2P_SCATTER ? n + 1 : 2;
  const int per = P2P_MAX_OPS / pairs;
  return per < P2P_PER_PAIR ? per : P2P_PER_PAIR;
}

/* The bytes op j from rank s to rank d sends. */
static size_t p2pSent(const struct p2pShape* sh, int s, int d, int j) {
  if (sh->split) return j == 0 ? p2pBytes(sh->base, s, d) : p2pBytes(1000, s, d);
  if (sh->base != 0) return p2pBytes(sh->base, s, d);
  const size_t n = sh->smallSizes ? P2P_NSMALL : P2P_NSIZES;
  return p2pSizes[((size_t)sh->rot + 3 * (size_t)s + 7 * (size_t)d + 5 * (size_t)j) % n];
}

/* What the receive of a send of `sent` bytes posts. */
static size_t p2pPosted(const struct p2pShape* sh, size_t sent) {
  const size_t r = sent + sh->more, ll = p2pLlMax();
  if (sent == 0 || r > P2P_CHUNK || (sent <= ll) != (r <= ll)) return sent;
  return r;
}

/* The tag of op j's bytes in call `call` of the pattern (the oracle's k). */
static int p2pTag(int pattern, int call, int j) { return 1000 * pattern + call + 100000 * j; }

/* This rank's ops, in the order it posts them; *sendEnd, *recvEnd: bytes of
 * the allocations they use. */
static int p2pOps(int pattern, const struct p2pShape* sh, struct p2pOp* ops, size_t* sendEnd, size_t* recvEnd) {
  const int n = nranks_, me = rank_, per = p2pPerPair(pattern, sh);
  int nops = 0;
  size_t so = 1, ro = 3;
  const int recvFirst = pattern == P2P_GATHER;
  for (int pass = 0; pass < 2; pass++) {
    const int sends = recvFirst ? pass == 1 : pass == 0;
    for (int j = 0; j < per; j++)
      for (int q = 0; q < n; q++) {
        if (sends ? !p2pEdge(pattern, me, q) : !p2pEdge(pattern, q, me)) continue;
        struct p2pOp* o = &ops[nops++];
        o->isSend = sends;
        o->peer = q;
        o->j = j;
        o->sent = sends ? p2pSent(sh, me, q, j) : p2pSent(sh, q, me, j);
        o->bytes = sends ? o->sent : p2pPosted(sh, o->sent);
        size_t* at = sends ? &so : &ro;
        o->off = *at;
        *at += o->bytes + (size_t)(q % 3) + 5;
      }
  }
  *sendEnd = so;
  *recvEnd = ro;
  return nops;
}

static mscclppResult_t p2pCall(mscclppComm_t comm, cudaStream_t s, const struct p2pOp* ops, int nops, uint8_t* dsend,
                               uint8_t* drecv, int split) {
  int receives = 0;
  for (int i = 0; i < nops; i++) receives += !ops[i].isSend;
  if (split && receives == 0) { /* each send a call of its own (its own launch) */
    for (int i = 0; i < nops; i++) {
      mscclppResult_t res = mscclppSend(dsend + ops[i].off, ops[i].bytes, mscclppUint8, ops[i].peer, comm, s);
      if (res != mscclppSuccess) return res;
    }
    return mscclppSuccess;
  }
  mscclppGroupStart();
  for (int i = 0; i < nops; i++) {
    if (ops[i].isSend)
      mscclppSend(dsend + ops[i].off, ops[i].bytes, mscclppUint8, ops[i].peer, comm, s);
    else
      mscclppRecv(drecv + ops[i].off, ops[i].bytes, mscclppUint8, ops[i].peer, comm, s);
  }
  return mscclppGroupEnd();
}

/* The receive allocation after call `call`: each receive's bytes, 0xA5
 * around. A receive posted larger than its send: as packets, zeros to the
 * end of the send's last 8-byte word, then untouched; through the scratch
 * the bytes past the send are not defined (not compared). */
static int p2pCheck(const struct p2pOp* ops, int nops, const uint8_t* hout, uint8_t* hexp, size_t recvEnd, int pattern,
                    int call, const char* how) {
  memset(hexp, 0xA5, recvEnd);
  for (int i = 0; i < nops; i++) {
    const struct p2pOp* o = &ops[i];
    if (o->isSend) continue;
    oracleA2avBlock(seed_, p2pTag(pattern, call, o->j), o->peer, rank_, o->sent, hexp + o->off);
    if (o->bytes == o->sent) continue;
    if (o->bytes <= p2pLlMax()) {
      const size_t end = (o->sent + 7) / 8 * 8 < o->bytes ? (o->sent + 7) / 8 * 8 : o->bytes;
      memset(hexp + o->off + o->sent, 0, end - o->sent);
    } else {
      memcpy(hexp + o->off + o->sent, hout + o->off + o->sent, o->bytes - o->sent);
    }
  }
  if (memcmp(hout, hexp, recvEnd) == 0) return 0;
  for (size_t b = 0; b < recvEnd; b++)
    if (hout[b] != hexp[b]) {
      int from = -1, j = -1;
      size_t bytes = 0;
      for (int i = 0; i < nops; i++)
        if (!ops[i].isSend && b >= ops[i].off && b < ops[i].off + ops[i].bytes) {
          from = ops[i].peer;
          j = ops[i].j;
          bytes = ops[i].sent;
        }
      fprintf(stderr,
              "rank %d: send/recv %s %s call %d: byte %zu is 0x%02x, expected 0x%02x (%s %d, its op %d of %zu bytes)\n",
              rank_, p2pName[pattern], how, call, b, hout[b], hexp[b],
              from >= 0 ? "from rank" : "outside the receives:", from, j, bytes);
      break;
    }
  return 1;
}

static void p2pFillSends(const struct p2pOp* ops, int nops, uint8_t* hin, int pattern, int call) {
  for (int i = 0; i < nops; i++)
    if (ops[i].isSend)
      oracleA2avBlock(seed_, p2pTag(pattern, call, ops[i].j), rank_, ops[i].peer, ops[i].bytes, hin + ops[i].off);
}

static int p2pStatus(mscclppComm_t comm, cudaStream_t s, mscclppResult_t res, int pattern, const char* how) {
  CUDA_OK(cudaStreamSynchronize(s));
  mscclppResult_t async = mscclppSuccess;
  mscclppCommGetAsyncError(comm, &async);
  if (res == mscclppSuccess && async == mscclppSuccess) return 0;
  fprintf(stderr, "rank %d: send/recv %s %s: result %d async %d: %s\n", rank_, p2pName[pattern], how, (int)res,
          (int)async, mscclppGetLastError());
  return 1;
}

static int p2pPattern(mscclppComm_t comm, cudaStream_t s, int pattern, const struct p2pShape* sh, int small,
                      int* calls) {
  struct p2pOp ops[P2P_MAX_OPS];
  size_t sendEnd = 0, recvEnd = 0;
  const int nops = p2pOps(pattern, sh, ops, &sendEnd, &recvEnd);
  const size_t minAlloc = (size_t)4 << 20;
  const size_t sendAlloc = small || sendEnd >= minAlloc ? sendEnd : minAlloc;
  const size_t recvAlloc = small || recvEnd >= minAlloc ? recvEnd : minAlloc;
  if (small && (sendAlloc >= ((size_t)2 << 20) || recvAlloc >= ((size_t)2 << 20))) return 0;
  uint8_t *dsend, *drecv;
  CUDA_OK(cudaMalloc((void**)&dsend, sendAlloc));
  CUDA_OK(cudaMalloc((void**)&drecv, recvAlloc));
  uint8_t* hin[2] = {calloc(sendEnd, 1), calloc(sendEnd, 1)};
  uint8_t* hout = malloc(recvEnd);
  uint8_t* hexp = malloc(recvEnd);
  char how[96];
  const char* what = sh->split ? "sends apart, " : sh->base != 0 ? "" : sh->smallSizes ? "small sizes, " : "sizes, ";
  snprintf(how, sizeof(how), "%s%s%s", what, sh->more != 0 ? "larger receives, " : "",
           small ? "small allocations" : "eager");
  int bad = 0;
  const int eager = 4;
  p2pFillSends(ops, nops, hin[0], pattern, 0);
  CUDA_OK(cudaMemcpyAsync(dsend, hin[0], sendEnd, cudaMemcpyHostToDevice, s));
  for (int call = 0; call < eager && !bad; call++) {
    CUDA_OK(cudaMemsetAsync(drecv, 0xA5, recvEnd, s));
    mscclppResult_t res = p2pCall(comm, s, ops, nops, dsend, drecv, sh->split);
    /* the next call's sends, right behind this call on the stream */
    uint8_t* next = hin[(call + 1) % 2];
    p2pFillSends(ops, nops, next, pattern, call + 1);
    CUDA_OK(cudaMemcpyAsync(dsend, next, sendEnd, cudaMemcpyHostToDevice, s));
    CUDA_OK(cudaMemcpyAsync(hout, drecv, recvEnd, cudaMemcpyDeviceToHost, s));
    bad += p2pStatus(comm, s, res, pattern, how);
    if (call == 0) usleep(20000); /* the peers' answers (their mappings of the buffers) come meanwhile */
    if (!bad) bad += p2pCheck(ops, nops, hout, hexp, recvEnd, pattern, call, how);
    (*calls)++;
  }
  if (!bad) { /* captured: the outputs poisoned, then the call; the sends hold call `eager`'s bytes */
    snprintf(how, sizeof(how), "%s%s%s", what, sh->more != 0 ? "larger receives, " : "",
             small ? "graph, small allocations" : "graph");
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CUDA_OK(cudaMemsetAsync(drecv, 0xA5, recvEnd, s));
    mscclppResult_t res = p2pCall(comm, s, ops, nops, dsend, drecv, sh->split);
    CUDA_OK(cudaStreamEndCapture(s, &g));
    const int replays = p2pReplays_;
    if (res == mscclppSuccess) CUDA_OK(cudaGraphInstantiate(&ge, g, 0));
    bad += p2pStatus(comm, s, res, pattern, how);
    for (int i = 0; i < replays && !bad; i++) {
      const int fresh = i < P2P_FRESH || i == replays - 1, call = eager + i;
      if (fresh && i > 0) { /* new sends, right behind the replay before on the stream */
        uint8_t* next = hin[call % 2];
        p2pFillSends(ops, nops, next, pattern, call);
        CUDA_OK(cudaMemcpyAsync(dsend, next, sendEnd, cudaMemcpyHostToDevice, s));
      }
      CUDA_OK(cudaGraphLaunch(ge, s));
      if (!fresh) continue;
      CUDA_OK(cudaMemcpyAsync(hout, drecv, recvEnd, cudaMemcpyDeviceToHost, s));
      bad += p2pStatus(comm, s, mscclppSuccess, pattern, how);
      if (!bad) bad += p2pCheck(ops, nops, hout, hexp, recvEnd, pattern, call, how);
      (*calls)++;
    }
    if (ge != NULL) cudaGraphExecDestroy(ge);
    if (g != NULL) cudaGraphDestroy(g);
  }
  mscclppBootstrapBarrier(comm); /* peers may still map these */
  CUDA_OK(cudaFree(dsend));
  CUDA_OK(cudaFree(drecv));
  free(hin[0]);
  free(hin[1]);
  free(hout);
  free(hexp);
  return bad;
}

/* Small sizes, the packet path's (MSCCLPP_COLL_P2P_LL_MAX) and around its
 * limit: several ops per pair in one group, mixed with larger ones, in
 * allocations the peers map and in ones under 2 MiB (where they fit), the
 * second time with the sizes turned (each pair's sizes change from group
 * to group); small ones only (with few ranks a group of packets only,
 * p2pLlKernel, more of them per pair than the ring has slots); with
 * `larger`, then receives posted larger than their sends (the GPU
 * backend's own send/recv only: the port family refuses a send to this
 * rank that does not match its receive). */
static int p2pSmall(mscclppComm_t comm, cudaStream_t s, int pattern, int larger, int* calls) {
  const struct p2pShape sizes = {0, pattern, 0, 0, 0}, turned = {0, pattern + 11, 0, 0, 0},
                        small = {0, pattern + 3, 1, 0, 0}, more = {0, pattern + 5, 0, 5, 0},
                        apart = {(size_t)1 << 20, 0, 0, 0, 1};
  int bad = p2pPattern(comm, s, pattern, &sizes, 0, calls);
  bad += p2pPattern(comm, s, pattern, &turned, 1, calls);
  bad += p2pPattern(comm, s, pattern, &small, 0, calls);
  if (larger) bad += p2pPattern(comm, s, pattern, &more, 0, calls);
  /* gather: the senders post a large send and then a packet-sized one as two
   * launches, the receiver both in one group (the large one many chunks,
   * zero-copy once mapped: its launch ends only when the receiver pulled it) */
  if (pattern == P2P_GATHER) bad += p2pPattern(comm, s, pattern, &apart, 0, calls);
  return bad;
}

/* Every pattern at a size of many chunks (each pair's block about
 * maxBytes / 2 / nranks, at most 4 MiB: zero-copy once mapped), at one of a
 * few KiB (as packets, unless MSCCLPP_COLL_P2P_LL_MAX is lower), in
 * allocations under 2 MiB (the scratch), and the small sizes (p2pSmall,
 * with `larger`); with `smallOnly`, only those. */
static int p2pTests(mscclppComm_t comm, cudaStream_t s, size_t maxBytes, int smallOnly, int larger, int* calls) {
  size_t big = maxBytes / 2 / (size_t)nranks_;
  if (big > ((size_t)4 << 20)) big = (size_t)4 << 20;
  const struct p2pShape bigShape = {big, 0, 0, 0, 0}, few = {3000, 0, 0, 0, 0}, mid = {(size_t)96 << 10, 0, 0, 0, 0};
  int bad = 0;
  for (int pattern = 0; pattern < P2P_PATTERNS; pattern++) {
    int b = 0;
    if (!smallOnly) {
      b += p2pPattern(comm, s, pattern, &bigShape, 0, calls);
      b += p2pPattern(comm, s, pattern, &few, 0, calls);
      b += p2pPattern(comm, s, pattern, &mid, 1, calls);
    }
    b += p2pSmall(comm, s, pattern, larger, calls);
    if (rank_ == 0) printf("send/recv %s: %s\n", p2pName[pattern], b ? "WRONG" : "ok");
    bad += b;
  }
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
  edges_ = argc > 2 && strncmp(argv[2], "edges", 5) == 0;
  if (edges_) {
    graph = 1;
    replays_ = argv[2][5] == '=' ? atoi(argv[2] + 6) : 100;
  }
  const int a2avOnly = argc > 2 && strncmp(argv[2], "alltoallv", 9) == 0 && strcmp(argv[2], "alltoallv_errors") != 0;
  const int a2avErr = argc > 2 && strcmp(argv[2], "alltoallv_errors") == 0;
  const int p2pOnly = argc > 2 && strncmp(argv[2], "p2p", 3) == 0;
  const int p2pSmallOnly = p2pOnly && strncmp(argv[2], "p2psmall", 8) == 0;
  if (p2pOnly && argv[2][p2pSmallOnly ? 8 : 3] == '=') replays_ = atoi(argv[2] + (p2pSmallOnly ? 9 : 4));
  if (a2avOnly && argv[2][9] == '=') replays_ = atoi(argv[2] + 10);
  if (graph || a2avOnly) a2avReplays_ = replays_;
  if (graph || p2pOnly) p2pReplays_ = replays_ < 100 ? replays_ : 100;
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
  /* "edges" adds these (then in the first four types of edgeTypes only, or
   * float32 and int8 above 65537 as every count): 0; blocks of 4 KiB and
   * 64 KiB (the small and mid packet grids' ends) and around them; 64, 256
   * and 512 KiB (int8: the size rule's limits for more than 4, up to 4 and
   * up to 2 ranks) and one more; a block of 1 MiB (int8: one slot of the
   * default scratch) and a prime above */
  const size_t edgeCounts[] = {0,     2,      5,      509,    4093,   4096,   4097,    8191,
                               16381, 65536,  262144, 262145, 524288, 524289, 1048576, 1048583};
  const mscclppDataType_t edgeTypes[] = {mscclppInt8, mscclppFloat32, mscclppBfloat16, mscclppUint64};
  const size_t nbase = sizeof(counts) / sizeof(counts[0]);
  const size_t nall = nbase + (edges_ ? sizeof(edgeCounts) / sizeof(edgeCounts[0]) : 0);
  int failures = 0, calls = 0, matrixKinds = kinds;
  a2avMaxCount_ = maxBytes / 8 / (size_t)nranks_ > 0 ? maxBytes / 8 / (size_t)nranks_ : 1;
  if (nranks_ > A2AV_MAX_RANKS) {
    fprintf(stderr, "coll_gpu_worker: %d ranks; its all-to-all-v checks hold up to %d\n", nranks_, A2AV_MAX_RANKS);
    return 1;
  }
  if (a2avErr) {
    failures += a2avErrors(comm, s);
    calls++;
    matrixKinds = 0;
  } else if (p2pOnly) {
    failures += p2pTests(comm, s, maxBytes, p2pSmallOnly, 1, &calls);
    matrixKinds = 0;
  } else if (a2avOnly) {
    failures += a2avTests(comm, s, &calls);
    matrixKinds = 0;
  } else if (argc > 2 && strcmp(argv[2], "big") == 0) {
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
    if (edges_ && kind != 0 && kind != 1 && kind != 2 && kind != 5) continue; /* the packet collectives only */
    for (int t = 0; t < mscclppNumTypes; t++) {
      for (int op = 0; op < (reduces ? mscclppNumOps : 1); op++) {
        for (size_t c = 0; c < nall; c++) {
          const int extra = c >= nbase;
          if (extra && t != (int)edgeTypes[0] && t != (int)edgeTypes[1] && t != (int)edgeTypes[2] &&
              t != (int)edgeTypes[3])
            continue;
          size_t count = extra ? edgeCounts[c - nbase] : counts[c];
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
  if (edges_) { /* replays of the packet collectives: several rounds per call, in place, odd offsets */
    const int packetKinds[] = {1, 2, 5};
    for (int i = 0; i < 3; i++) {
      const int kind = packetKinds[i];
      const size_t k = (size_t)nranks_;
      if ((size_t)262147 * 4 * k <= maxBytes)
        failures += runOne(comm, s, kind, mscclppFloat32, mscclppSum, 262147, 0, 1), calls++;
      failures += runOne(comm, s, kind, mscclppInt8, mscclppMax, 4097, 2, 1), calls++;
      /* in place: allgather and all-to-all give the same output at every
       * replay (all-to-all: an even number of them), reduce-scatter does not */
      if (kind != 2) failures += runOne(comm, s, kind, mscclppFloat32, mscclppSum, 1031, 1, 1), calls++;
    }
  }
  if (matrixKinds > 0 && !order_ && !edges_) failures += a2avTests(comm, s, &calls);
  if (matrixKinds > 0 && !order_ && !edges_) failures += p2pTests(comm, s, maxBytes, 0, 0, &calls);
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
