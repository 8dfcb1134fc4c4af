/* SPDX-License-Identifier: MIT */
/* mscclpp-perf: buffers, devices and streams; one checked and timed measurement. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "perf.h"

/* The library logged the reason where it decided it; printing it again here
 * would show every failure twice per rank. It is printed only when that log
 * line did not reach stderr (MSCCLPP_DEBUG=NONE, a subsystem filter,
 * MSCCLPP_DEBUG_FILE). */
void callFailed(struct ctx* c, const char* what, mscclppResult_t res) {
  if (!mscclppLastErrorShown()) {
    fprintf(stderr, PROG ": rank %d: %s failed: %s: %s\n", c->rank, what, mscclppGetErrorString(res),
            mscclppGetLastError());
    fflush(stderr);
  }
  c->failed = 1;
}

#ifdef MSCCLPP_HAVE_CUDA
int cudaOk(struct ctx* c, cudaError_t e, const char* what) {
  if (e == cudaSuccess) return 1;
  fprintf(stderr, PROG ": rank %d: %s failed: %s\n", c->rank, what, cudaGetErrorString(e));
  fflush(stderr);
  c->failed = 1;
  return 0;
}
#endif

/* GPU copies and fills go on the collectives' own stream and are waited
 * for: the stream is non-blocking, so it would not wait for work of the
 * legacy default stream, and cudaMemcpy from pageable memory may return
 * before its DMA has landed. */
int copyToBuf(struct ctx* c, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return 1;
#ifdef MSCCLPP_HAVE_CUDA
  if (c->gpu)
    return cudaOk(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, (cudaStream_t)c->stream),
                  "cudaMemcpyAsync to the device") &&
           cudaOk(c, cudaStreamSynchronize((cudaStream_t)c->stream), "cudaStreamSynchronize");
#endif
  (void)c;
  memcpy(dst, src, bytes);
  return 1;
}

int copyFromBuf(struct ctx* c, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return 1;
#ifdef MSCCLPP_HAVE_CUDA
  if (c->gpu)
    return cudaOk(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, (cudaStream_t)c->stream),
                  "cudaMemcpyAsync from the device") &&
           cudaOk(c, cudaStreamSynchronize((cudaStream_t)c->stream), "cudaStreamSynchronize");
#endif
  (void)c;
  memcpy(dst, src, bytes);
  return 1;
}

int zeroBuf(struct ctx* c, void* dst, size_t bytes) {
  if (bytes == 0) return 1;
#ifdef MSCCLPP_HAVE_CUDA
  if (c->gpu)
    return cudaOk(c, cudaMemsetAsync(dst, 0, bytes, (cudaStream_t)c->stream), "cudaMemsetAsync") &&
           cudaOk(c, cudaStreamSynchronize((cudaStream_t)c->stream), "cudaStreamSynchronize");
#endif
  (void)c;
  memset(dst, 0, bytes);
  return 1;
}

/* Wait for the stream, then for errors the GPU reported after the calls
 * returned. */
int syncStream(struct ctx* c) {
#ifdef MSCCLPP_HAVE_CUDA
  if (c->gpu && !cudaOk(c, cudaStreamSynchronize((cudaStream_t)c->stream), "cudaStreamSynchronize")) return 0;
#endif
  mscclppResult_t async = mscclppSuccess;
  mscclppResult_t res = mscclppCommGetAsyncError(c->comm, &async);
  if (res != mscclppSuccess) {
    callFailed(c, "mscclppCommGetAsyncError", res);
    return 0;
  }
  if (async != mscclppSuccess) {
    callFailed(c, "a collective (asynchronous error)", async);
    return 0;
  }
  return 1;
}

static double nowUs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

/* ---- one call --------------------------------------------------------------- */

void setupCall(const struct ctx* c, size_t bytes, int type, int op, int inPlace, struct call* k) {
  size_t ts = mscclppDataTypeSize(type), n = (size_t)c->nranks;
  size_t count = bytes / ts;
  memset(k, 0, sizeof(*k));
  k->type = type;
  k->op = op;
  k->root = c->o.root;
  k->inPlace = inPlace;
  k->ts = ts;
  switch (c->o.coll) {
    case C_ALLGATHER:
      k->count = count / n;
      k->sendElems = k->count;
      k->recvElems = k->count * n;
      break;
    case C_REDUCESCATTER:
      k->count = count / n;
      k->sendElems = k->count * n;
      k->recvElems = k->count;
      break;
    case C_ALLTOALL:
      k->count = count / n;
      k->sendElems = k->recvElems = k->count * n;
      break;
    default:
      k->count = k->sendElems = k->recvElems = count;
      break;
  }
  k->bytes = (k->sendElems > k->recvElems ? k->sendElems : k->recvElems) * ts;
  unsigned char* sendBuf = c->sendBase + c->o.offsetElems * ts;
  unsigned char* recvBuf = c->recvBase + c->o.offsetElems * ts;
  if (!inPlace) {
    k->send = sendBuf;
    k->recv = recvBuf;
  } else if (c->o.coll == C_ALLGATHER) {
    k->recv = recvBuf;
    k->send = recvBuf + (size_t)c->rank * k->count * ts;
  } else if (c->o.coll == C_REDUCESCATTER) {
    k->send = recvBuf;
    k->recv = recvBuf + (size_t)c->rank * k->count * ts;
  } else {
    k->send = k->recv = recvBuf;
  }
}

/* ---- alltoallv's counts ------------------------------------------------------ */

/* At most this many count sets cycle through the timed calls (-n of them,
 * each with its own, when -n is no larger). */
#define A2AV_MAX_SETS 1024

int a2avAlloc(struct ctx* c) {
  if (c->o.coll != C_ALLTOALLV) return 0;
  c->a2avNsets = c->o.iters < A2AV_MAX_SETS ? c->o.iters : A2AV_MAX_SETS;
  size_t setBytes = 2 * (size_t)c->nranks * sizeof(size_t);
  c->a2avCounts = allocBuf(c, (size_t)(c->a2avNsets + 1) * setBytes);
  c->a2avOut = allocBuf(c, setBytes);
  c->a2avHost = malloc((size_t)(c->a2avNsets + 1) * setBytes);
  c->a2avPart = malloc((size_t)c->nranks * sizeof(size_t));
  if (c->a2avCounts == NULL || c->a2avOut == NULL || c->a2avHost == NULL || c->a2avPart == NULL) {
    if (c->a2avHost == NULL || c->a2avPart == NULL)
      fprintf(stderr, PROG ": rank %d: out of memory for the count sets\n", c->rank);
    return -1;
  }
  return 0;
}

void a2avFree(struct ctx* c) {
  freeBuf(c, c->a2avCounts);
  freeBuf(c, c->a2avOut);
  free(c->a2avHost);
  free(c->a2avPart);
  c->a2avCounts = c->a2avOut = c->a2avHost = c->a2avPart = NULL;
}

/* The plan from `seed` for `count` elements in all (c->a2avPart and the
 * returned shift), and this rank's (sendcounts, sdispls) of it in host set
 * `set`. */
static int a2avPlan(struct ctx* c, int set, uint64_t seed, size_t count) {
  const int n = c->nranks;
  size_t* out = c->a2avHost + (size_t)set * 2 * (size_t)n;
  int shift = 0;
  oracleA2avParts(seed, n, count, c->a2avPart, &shift);
  for (int d = 0; d < n; d++) {
    out[d] = oracleA2avPartCount(c->a2avPart, shift, n, c->rank, d);
    out[n + d] = oracleA2avPartDispl(c->a2avPart, shift, n, c->rank, d);
  }
  return shift;
}

/* The timed calls' count sets for a call of `count` elements in all, new
 * every call (each size its own), uploaded before the timing. */
static int a2avUploadTimed(struct ctx* c, size_t count) {
  for (int i = 0; i < c->a2avNsets; i++)
    a2avPlan(c, i, oracleMix(c->o.seed ^ oracleMix(UINT64_C(0x7469) ^ ((uint64_t)count << 16) ^ (uint64_t)i)), count);
  c->a2avNext = 0;
  return copyToBuf(c, c->a2avCounts, c->a2avHost, (size_t)c->a2avNsets * 2 * (size_t)c->nranks * sizeof(size_t));
}

static mscclppResult_t launchAllToAllv(struct ctx* c, const struct call* k, int set) {
  const size_t n = (size_t)c->nranks;
  const size_t* in = c->a2avCounts + (size_t)set * 2 * n;
  return mscclppAllToAllv(k->send, k->count, in, in + n, k->recv, k->count, c->a2avOut, c->a2avOut + n,
                          (mscclppDataType_t)k->type, c->comm, c->stream);
}

mscclppResult_t launch(struct ctx* c, const struct call* k) {
  mscclppComm_t comm = c->comm;
  mscclppStream_t s = c->stream;
  mscclppDataType_t t = (mscclppDataType_t)k->type;
  mscclppRedOp_t op = (mscclppRedOp_t)k->op;
  if (c->usePlan) return mscclppPlanExecute(comm, c->o.plan, k->send, k->recv, k->count, t, op, s);
  switch (c->o.coll) {
    case C_ALLREDUCE:
      return mscclppAllReduce(k->send, k->recv, k->count, t, op, comm, s);
    case C_ALLGATHER:
      return mscclppAllGather(k->send, k->recv, k->count, t, comm, s);
    case C_REDUCESCATTER:
      return mscclppReduceScatter(k->send, k->recv, k->count, t, op, comm, s);
    case C_BROADCAST:
      return mscclppBroadcast(k->send, k->recv, k->count, t, k->root, comm, s);
    case C_REDUCE:
      return mscclppReduce(k->send, k->recv, k->count, t, op, k->root, comm, s);
    case C_ALLTOALL:
      return mscclppAllToAll(k->send, k->recv, k->count, t, comm, s);
    case C_ALLTOALLV: { /* the next set of the cycle */
      int set = c->a2avNext;
      c->a2avNext = (set + 1) % c->a2avNsets;
      return launchAllToAllv(c, k, set);
    }
    default: {
      int n = c->nranks, r = c->rank;
      mscclppResult_t res = mscclppGroupStart();
      if (res != mscclppSuccess) return res;
      mscclppResult_t r1 = mscclppSend(k->send, k->count, t, (r + 1) % n, comm, s);
      mscclppResult_t r2 = mscclppRecv(k->recv, k->count, t, (r - 1 + n) % n, comm, s);
      res = mscclppGroupEnd();
      if (r1 != mscclppSuccess) return r1;
      if (r2 != mscclppSuccess) return r2;
      return res;
    }
  }
}

/* Checked call: fill, poison, run, compare. Returns this rank's wrong count,
 * or -1 after a failure (printed). */
static int64_t checkedCall(struct ctx* c, const struct call* k) {
  struct oracleCall g;
  uint64_t seed = oracleMix(c->o.seed ^ oracleMix(++c->checkSerial));
  oracleInit(&g, ORACLE_WIDE, k->type, colls[c->o.coll].reduces ? k->op : ORACLE_COPY, c->nranks, seed);
  size_t ts = k->ts, n = (size_t)c->nranks, cnt = k->count;
  int rank = c->rank;
  unsigned char mask = (unsigned char)(0xa5 ^ (c->checkSerial * 0x3b));
  if (mask == 0) mask = 0xa5;
  int untouched = c->o.coll == C_REDUCE && rank != k->root; /* output must stay as it was */

  unsigned char* img = c->hImg;
  /* the expected output */
  unsigned char* exp = c->hExp;
  int a2avShift = 0;
  if (c->o.coll == C_ALLTOALLV) {
    /* this call's plan (the check's own set, after the timed ones): rank
     * s's block for this rank, from its input at its displacement */
    a2avShift = a2avPlan(c, c->a2avNsets, g.seed, cnt);
    size_t at = 0;
    for (int s = 0; s < (int)n; s++) {
      size_t m = oracleA2avPartCount(c->a2avPart, a2avShift, (int)n, s, rank);
      size_t from = oracleA2avPartDispl(c->a2avPart, a2avShift, (int)n, s, rank);
      oracleInputs(&g, s, from, m, exp + at * ts);
      at += m;
    }
    size_t setBytes = 2 * n * sizeof(size_t);
    if (!copyToBuf(c, c->a2avCounts + (size_t)c->a2avNsets * 2 * n, c->a2avHost + (size_t)c->a2avNsets * 2 * n,
                   setBytes))
      return -1;
    /* recvcounts and rdispls poisoned: the call must write them */
    memset(img, 0xff, setBytes);
    if (!copyToBuf(c, c->a2avOut, img, setBytes)) return -1;
  } else if (!untouched) {
    oracleExpected(&g, (enum oracleColl)c->o.coll, rank, k->root, cnt, exp);
  }

  /* the buffers before the call */
  if (!k->inPlace) {
    oracleInputs(&g, rank, 0, k->sendElems, img);
    if (!copyToBuf(c, k->send, img, k->sendElems * ts)) return -1;
    size_t rb = k->recvElems * ts;
    if (untouched) {
      memset(img, mask, rb);
      memcpy(exp, img, rb);
    } else {
      for (size_t b = 0; b < rb; b++) img[b] = exp[b] ^ mask;
    }
    if (!copyToBuf(c, k->recv, img, rb)) return -1;
  } else {
    size_t elems;
    switch (c->o.coll) {
      case C_BROADCAST:
        elems = cnt;
        if (rank == k->root) oracleInputs(&g, rank, 0, cnt, img);
        else
          for (size_t b = 0; b < cnt * ts; b++) img[b] = exp[b] ^ mask;
        break;
      case C_ALLGATHER:
        elems = k->recvElems;
        for (size_t b = 0; b < elems * ts; b++) img[b] = exp[b] ^ mask;
        oracleInputs(&g, rank, 0, cnt, img + (size_t)rank * cnt * ts);
        break;
      default: /* allreduce, reduce, reducescatter: the buffer is the input */
        elems = k->sendElems;
        oracleInputs(&g, rank, 0, elems, img);
        if (untouched) memcpy(exp, img, elems * ts);
        break;
    }
    /* the in-place base is recv for all but reducescatter, whose base is send */
    void* base = c->o.coll == C_REDUCESCATTER ? k->send : k->recv;
    if (!copyToBuf(c, base, img, elems * ts)) return -1;
  }
  mscclppResult_t res = mscclppBootstrapBarrier(c->comm);
  if (res != mscclppSuccess) {
    callFailed(c, "mscclppBootstrapBarrier", res);
    return -1;
  }
  res = c->o.coll == C_ALLTOALLV ? launchAllToAllv(c, k, c->a2avNsets) : launch(c, k);
  if (res != mscclppSuccess) {
    callFailed(c, colls[c->o.coll].api, res);
    return -1;
  }
  if (!syncStream(c)) return -1;
  int64_t wrong = 0;
  if (c->o.coll == C_ALLTOALLV) { /* recvcounts and rdispls */
    size_t* got = (size_t*)c->hOut;
    if (!copyFromBuf(c, got, c->a2avOut, 2 * n * sizeof(size_t))) return -1;
    size_t at = 0;
    for (int s = 0; s < (int)n; s++) {
      size_t m = oracleA2avPartCount(c->a2avPart, a2avShift, (int)n, s, rank);
      if (got[s] != m || got[n + s] != at) {
        if (wrong < 3)
          fprintf(stderr,
                  PROG ": rank %d: alltoallv %s count %zu: from rank %d recvcounts %zu rdispls %zu, expected %zu "
                       "%zu\n",
                  rank, typeName(k->type), k->count, s, got[s], got[n + s], m, at);
        wrong++;
      }
      at += m;
    }
  }
  unsigned char* out = c->hOut;
  size_t rb = k->recvElems * ts;
  if (c->o.injectError && rank == 0 && k->recvElems > 0) {
    /* corrupt one element where the call wrote it: a high bit of its top byte */
    unsigned char* p = (unsigned char*)k->recv + (k->recvElems / 2) * ts;
    unsigned char e[8];
    size_t top = (ts - 1) & 7;
    if (!copyFromBuf(c, e, p, ts)) return -1;
    e[top] ^= 0x40;
    if (!copyToBuf(c, p, e, ts)) return -1;
  }
  if (!copyFromBuf(c, out, k->recv, rb)) return -1;
  for (size_t i = 0; i < k->recvElems; i++) {
    if (untouched ? memcmp(out + i * ts, exp + i * ts, ts) != 0 : oracleWrong(&g, out + i * ts, exp + i * ts)) {
      if (wrong < 3) {
        char gb[24], eb[24];
        uint64_t gu = oracleBits(k->type, out + i * ts), eu = oracleBits(k->type, exp + i * ts);
        snprintf(gb, sizeof(gb), "0x%0*" PRIx64, (int)ts * 2, gu);
        snprintf(eb, sizeof(eb), "0x%0*" PRIx64, (int)ts * 2, eu);
        fprintf(stderr,
                PROG ": rank %d: %s %s %s count %zu %s: element %zu is %s, expected %s%s\n", rank,
                colls[c->o.coll].name, typeName(k->type), colls[c->o.coll].reduces ? opNames[k->op] : "", k->count,
                k->inPlace ? "in-place" : "out-of-place", i, gb, eb,
                untouched ? " (a non-root's recvbuff must stay untouched)" : "");
      }
      wrong++;
    }
  }
  if (wrong > 0) fflush(stderr);
  return wrong;
}

/* Timed iterations: this rank's microseconds per call, or -1 after a
 * failure (printed). */
static double timedCalls(struct ctx* c, const struct call* k) {
  const struct opts* o = &c->o;
  /* In place, each call reduces the last one's result: start from zeros,
   * which every operation keeps (no overflow, no infinities). */
  if (k->inPlace && colls[o->coll].reduces) {
    void* base = o->coll == C_REDUCESCATTER ? k->send : k->recv;
    if (!zeroBuf(c, base, k->bytes)) return -1;
  }
  for (int w = 0; w < o->warmup; w++) {
    mscclppResult_t res = launch(c, k);
    if (res != mscclppSuccess) {
      callFailed(c, colls[o->coll].api, res);
      return -1;
    }
    if (o->blocking && !syncStream(c)) return -1;
  }
  if (!syncStream(c)) return -1;
  mscclppResult_t res = mscclppBootstrapBarrier(c->comm);
  if (res != mscclppSuccess) {
    callFailed(c, "mscclppBootstrapBarrier", res);
    return -1;
  }
#ifdef MSCCLPP_HAVE_CUDA
  if (c->gpu) {
    cudaStream_t s = (cudaStream_t)c->stream;
    float ms = 0;
    double calls = o->iters;
    if (o->graphLaunches > 0) {
      cudaGraph_t graph = NULL;
      cudaGraphExec_t exec = NULL;
      if (!cudaOk(c, cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture")) return -1;
      for (int i = 0; i < o->iters; i++) {
        res = launch(c, k);
        if (res != mscclppSuccess) {
          callFailed(c, colls[o->coll].api, res);
          (void)cudaStreamEndCapture(s, &graph);
          if (graph != NULL) (void)cudaGraphDestroy(graph);
          return -1;
        }
      }
      if (!cudaOk(c, cudaStreamEndCapture(s, &graph), "cudaStreamEndCapture")) return -1;
      if (!cudaOk(c, cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate")) {
        (void)cudaGraphDestroy(graph);
        return -1;
      }
      int ok = cudaOk(c, cudaEventRecord(c->ev0, s), "cudaEventRecord");
      for (int l = 0; ok && l < o->graphLaunches; l++) ok = cudaOk(c, cudaGraphLaunch(exec, s), "cudaGraphLaunch");
      ok = ok && cudaOk(c, cudaEventRecord(c->ev1, s), "cudaEventRecord");
      ok = ok && syncStream(c);
      ok = ok && cudaOk(c, cudaEventElapsedTime(&ms, c->ev0, c->ev1), "cudaEventElapsedTime");
      (void)cudaGraphExecDestroy(exec);
      (void)cudaGraphDestroy(graph);
      if (!ok) return -1;
      calls *= o->graphLaunches;
    } else {
      if (!cudaOk(c, cudaEventRecord(c->ev0, s), "cudaEventRecord")) return -1;
      for (int i = 0; i < o->iters; i++) {
        res = launch(c, k);
        if (res != mscclppSuccess) {
          callFailed(c, colls[o->coll].api, res);
          return -1;
        }
        if (o->blocking && !syncStream(c)) return -1;
      }
      if (!cudaOk(c, cudaEventRecord(c->ev1, s), "cudaEventRecord")) return -1;
      if (!syncStream(c)) return -1;
      if (!cudaOk(c, cudaEventElapsedTime(&ms, c->ev0, c->ev1), "cudaEventElapsedTime")) return -1;
    }
    return ms * 1e3 / calls;
  }
#endif
  double t0 = nowUs();
  for (int i = 0; i < o->iters; i++) {
    res = launch(c, k);
    if (res != mscclppSuccess) {
      callFailed(c, colls[o->coll].api, res);
      return -1;
    }
  }
  if (!syncStream(c)) return -1;
  return (nowUs() - t0) / o->iters;
}

/* Measure one placement; every rank gets the combined result. */
int measure(struct ctx* c, const struct call* k, struct meas* m) {
  struct {
    double us;
    int64_t wrong;
  } mine = {0, 0}, *all;
  memset(m, 0, sizeof(*m));
  m->valid = 1;
  if (c->o.check) {
    mine.wrong = checkedCall(c, k);
    if (mine.wrong < 0) return -1;
  }
  if (c->o.coll == C_ALLTOALLV && !a2avUploadTimed(c, k->count)) return -1;
  mine.us = timedCalls(c, k);
  if (mine.us < 0) return -1;
  all = calloc((size_t)c->nranks, sizeof(*all));
  if (all == NULL) {
    fprintf(stderr, PROG ": out of memory\n");
    return -1;
  }
  all[c->rank] = mine;
  mscclppResult_t res = mscclppBootstrapAllGather(c->comm, all, sizeof(*all));
  if (res != mscclppSuccess) {
    free(all);
    callFailed(c, "mscclppBootstrapAllGather", res);
    return -1;
  }
  double t = all[0].us, sum = 0, mn = all[0].us, mx = all[0].us;
  int64_t wrong = 0;
  for (int r = 0; r < c->nranks; r++) {
    sum += all[r].us;
    if (all[r].us < mn) mn = all[r].us;
    if (all[r].us > mx) mx = all[r].us;
    wrong += all[r].wrong;
  }
  free(all);
  switch (c->o.average) {
    case 1:
      t = sum / c->nranks;
      break;
    case 2:
      t = mn;
      break;
    case 3:
      t = mx;
      break;
    default:
      break;
  }
  m->us = t;
  m->algbw = t > 0 ? (double)k->bytes / (t * 1e3) : 0; /* bytes/us/1e3 = GB/s */
  m->busbw = m->algbw * busFactor(c->o.coll, c->nranks);
  m->wrong = c->o.check ? wrong : -1;
  return 0;
}


/* ---- setup ------------------------------------------------------------------ */


void* allocBuf(struct ctx* c, size_t bytes) {
  if (bytes == 0) bytes = 1;
#ifdef MSCCLPP_HAVE_CUDA
  if (c->gpu) {
    void* p = NULL;
    if (!cudaOk(c, cudaMalloc(&p, bytes), "cudaMalloc")) return NULL;
    if (!zeroBuf(c, p, bytes)) {
      (void)cudaFree(p);
      return NULL;
    }
    return p;
  }
#endif
  void* p = malloc(bytes);
  if (p == NULL) {
    fprintf(stderr, PROG ": rank %d: cannot allocate %zu bytes\n", c->rank, bytes);
    c->failed = 1;
  } else {
    memset(p, 0, bytes);
  }
  return p;
}

void freeBuf(struct ctx* c, void* p) {
  if (p == NULL) return;
#ifdef MSCCLPP_HAVE_CUDA
  if (c->gpu) {
    (void)cudaFree(p);
    return;
  }
#endif
  (void)c;
  free(p);
}

int selectDevice(struct ctx* c) {
  c->device = -1; /* the host backend */
  c->gpu = 0;
#ifdef MSCCLPP_HAVE_CUDA
  int count = 0;
  if (mscclppGetDeviceCount(&count) != mscclppSuccess || count <= 0) return 0;
  int envRank, envLocal;
  envRanks(&envRank, &envLocal);
  int local = envLocal >= 0 ? envLocal : (envRank >= 0 ? envRank : 0);
  c->device = local % count;
  c->gpu = 1;
  if (!cudaOk(c, cudaSetDevice(c->device), "cudaSetDevice")) return -1;
#else
  (void)c;
#endif
  return 0;
}

int createStream(struct ctx* c) {
  c->stream = NULL;
#ifdef MSCCLPP_HAVE_CUDA
  if (c->gpu) {
    cudaStream_t s;
    if (!cudaOk(c, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate")) return -1;
    c->stream = (mscclppStream_t)s;
    if (!cudaOk(c, cudaEventCreate(&c->ev0), "cudaEventCreate")) return -1;
    if (!cudaOk(c, cudaEventCreate(&c->ev1), "cudaEventCreate")) return -1;
  }
#endif
  return 0;
}

void destroyStream(struct ctx* c) {
#ifdef MSCCLPP_HAVE_CUDA
  if (c->gpu && c->stream != NULL) {
    (void)cudaEventDestroy(c->ev0);
    (void)cudaEventDestroy(c->ev1);
    (void)cudaStreamDestroy((cudaStream_t)c->stream);
  }
#endif
  c->stream = NULL;
}
