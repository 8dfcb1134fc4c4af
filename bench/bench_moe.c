/* SPDX-License-Identifier: MIT */
/*
 * A mixture-of-experts layer's dispatch + combine step, three ways in one
 * run (issue 23):
 *   mscclpp-run -n N --mps -- bench_moe [-i STEPS] [-c CHECKED] [-t TOKENS] [-H HIDDEN] [--nccl PATH]
 *
 * The step, per rank: TOKENS tokens (4096) of HIDDEN bfloat16 values
 * (7168); each token routed to 8 of 32 experts, spread evenly over the
 * ranks (N divides 32), by a router kernel that draws new routing every
 * step (bench_moe_kernels.cu); the tokens packed so that each destination's
 * rows are contiguous (a row per token and chosen expert, in (expert,
 * token) order), the dispatch (rows to their experts' ranks), a stand-in
 * expert (each received row doubled), the combine (rows back to their
 * tokens' ranks, in the order they left) and the un-permute (each token's
 * 8 rows summed, weight 1). The result is exactly 16 x the token, and the
 * un-permute compares every element of every step with it (no extra
 * memory traffic: x is recomputed from its seed, not read).
 *
 * The ways:
 *   (a) ours: mscclppAllToAllv with the counts on the GPU -- the router
 *       writes sendcounts/sdispls, the dispatch's kernel writes what
 *       arrived (recvcounts/rdispls), which the expert and the combine read
 *       on the GPU; the host never waits, so the whole step is captured in
 *       one CUDA graph. Timed replayed from that graph, and eager.
 *   (b) the usual way, as PyTorch's all_to_all_single with split sizes
 *       (Megatron's token dispatcher): the counts exchanged on the GPU
 *       (ncclAlltoAll), copied to the host (cudaMemcpyAsync + stream
 *       synchronize), then ncclGroupStart + per-peer ncclSend/ncclRecv for
 *       the dispatch and again for the combine, through our NCCL library
 *       (libmscclpp_nccl.so, dlopen'ed: --nccl PATH, default lib/ beside
 *       this executable, as scripts/gpu-build.sh stages it). Eager (the host
 *       sync cannot be captured).
 *   (c) the HBM roofline: the bytes the step reads and writes, every rank's
 *       (they share the GPU), at the device-to-device copy rate timed at
 *       the start of this run (cudaMemcpyAsync of 1 GiB, bytes read +
 *       written per second). Per rank and step, with R = TOKENS * HIDDEN * 2
 *       bytes: pack R + 8R, dispatch 8R + 8R, expert 8R + 8R (in place),
 *       combine 8R + 8R, un-permute 8R + R: 66R.
 * Time per step: CUDA events around STEPS steps (20) back to back after a
 * bootstrap barrier, the slowest rank. Before the timing, CHECKED steps (3)
 * of each way also check every row the dispatch delivered against the
 * token it must be (each rank recomputes its peers' routing), the received
 * counts and displacements, and (a) the combine's counts; then a few steps
 * with an event between phases give the phase breakdown.
 * Exit: 0, 1 when a check failed or a call failed, 77 without a GPU.
 */
#include <stdio.h>
#ifndef MSCCLPP_HAVE_CUDA
int main(void) {
  printf("SKIPPED: bench_moe needs a CUDA build\n");
  return 77;
}
#else
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mscclpp/coll.h"
#include "mscclpp/comm.h"
#include "nccl/nccl.h" /* NCCL's types, for the dlopen'ed library's calls */

#include "bench_check.h"
#include "bench_time.h"

#define EXPERTS 32
#define TOPK 8

/* bench_moe_kernels.cu */
cudaError_t benchMoeInitTokens(void* tok, int rank, uint32_t tokens, uint32_t hidden, cudaStream_t s);
cudaError_t benchMoeRoute(uint64_t* step, int advance, uint64_t seed, int rank, int nranks, uint32_t tokens,
                          uint32_t hidden, int32_t* pos, int32_t* rowTok, size_t* sendcounts, size_t* sdispls,
                          cudaStream_t s);
cudaError_t benchMoePack(const void* tok, const int32_t* pos, void* send, uint32_t tokens, uint32_t hidden,
                         cudaStream_t s);
cudaError_t benchMoeScale(void* buf, const size_t* recvcounts, const size_t* rdispls, int nranks, uint64_t hostTotal,
                          uint64_t cap, cudaStream_t s);
cudaError_t benchMoeUnpermute(const void* comb, const int32_t* pos, void* out, int rank, uint32_t tokens,
                              uint32_t hidden, unsigned long long* err, cudaStream_t s);
cudaError_t benchMoeCheckDispatch(const void* recv, const size_t* recvcounts, const size_t* rdispls, int me, int src,
                                  const size_t* peerCounts, const size_t* peerDispls, const int32_t* peerRowTok,
                                  uint32_t hidden, uint64_t capRows, unsigned long long* err, cudaStream_t s);

static mscclppComm_t comm;
static int nranks_;

static double maxOver(double v) { return benchMaxOver(comm, nranks_, v); }

/* ---- our NCCL library, dlopen'ed --------------------------------------------------- */

struct ncclApi {
  void* handle;
  ncclResult_t (*getUniqueId)(ncclUniqueId*);
  ncclResult_t (*commInitRank)(ncclComm_t*, int, ncclUniqueId, int);
  ncclResult_t (*commDestroy)(ncclComm_t);
  ncclResult_t (*commGetAsyncError)(ncclComm_t, ncclResult_t*);
  const char* (*getErrorString)(ncclResult_t);
  const char* (*getLastError)(ncclComm_t);
  ncclResult_t (*groupStart)(void);
  ncclResult_t (*groupEnd)(void);
  ncclResult_t (*alltoAll)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*send)(const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*recv)(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
};

static struct ncclApi nccl;
static ncclComm_t ncomm;

#define NCCL_OK(expr)                                                                                           \
  do {                                                                                                          \
    ncclResult_t r_ = (expr);                                                                                   \
    if (r_ != ncclSuccess) {                                                                                    \
      fprintf(stderr, "rank %d: %s: %s: %s\n", rank, #expr, nccl.getErrorString(r_), nccl.getLastError(ncomm)); \
      exit(1);                                                                                                  \
    }                                                                                                           \
  } while (0)

/* One symbol into *fn (a function pointer of the right type, whose bytes
 * dlsym's object pointer gives). 0 when absent. */
static int ncclSym(const char* name, void* fn, size_t size) {
  void* p = dlsym(nccl.handle, name);
  if (p == NULL) return 0;
  memcpy(fn, &p, size);
  return 1;
}
#define NCCL_SYM(field, name) ok &= ncclSym(name, &nccl.field, sizeof(nccl.field))

/* Load `path`, or lib/libmscclpp_nccl.so beside this executable, or the
 * loader's libmscclpp_nccl.so. 0 on success; the reason in why. */
static int ncclLoad(const char* path, char* why, size_t whyLen) {
  char here[4096];
  const char* tries[3];
  int n = 0;
  if (path != NULL) {
    tries[n++] = path;
  } else {
    ssize_t len = readlink("/proc/self/exe", here, sizeof(here) - 32);
    if (len > 0) {
      here[len] = '\0';
      char* slash = strrchr(here, '/');
      if (slash != NULL) {
        strcpy(slash + 1, "lib/libmscclpp_nccl.so");
        tries[n++] = here;
      }
    }
    tries[n++] = "libmscclpp_nccl.so";
  }
  for (int i = 0; i < n && nccl.handle == NULL; i++) {
    nccl.handle = dlopen(tries[i], RTLD_NOW | RTLD_LOCAL);
    if (nccl.handle == NULL) snprintf(why, whyLen, "%s", dlerror());
  }
  if (nccl.handle == NULL) return 1;
  int ok = 1;
  NCCL_SYM(getUniqueId, "ncclGetUniqueId");
  NCCL_SYM(commInitRank, "ncclCommInitRank");
  NCCL_SYM(commDestroy, "ncclCommDestroy");
  NCCL_SYM(commGetAsyncError, "ncclCommGetAsyncError");
  NCCL_SYM(getErrorString, "ncclGetErrorString");
  NCCL_SYM(getLastError, "ncclGetLastError");
  NCCL_SYM(groupStart, "ncclGroupStart");
  NCCL_SYM(groupEnd, "ncclGroupEnd");
  NCCL_SYM(alltoAll, "ncclAlltoAll");
  NCCL_SYM(send, "ncclSend");
  NCCL_SYM(recv, "ncclRecv");
  if (!ok) {
    snprintf(why, whyLen, "a symbol of the NCCL API is missing (ncclAlltoAll needs NCCL 2.28's API)");
    return 1;
  }
  return 0;
}

/* ---- this rank's step ---------------------------------------------------------------- */

/* Device arrays of nranks size_t each (cnt + i * nranks). */
enum {
  C_SENDCOUNTS, /* the router's */
  C_SDISPLS,
  C_RECVCOUNTS,  /* the dispatch's: (a) its kernel, (b) the count exchange */
  C_RDISPLS,     /* (a) the dispatch's kernel; (b) uploaded by the checked steps */
  C_COMB_COUNTS, /* the combine's (a) */
  C_COMB_DISPLS,
  C_PEER_COUNTS, /* a peer's routing, recomputed by the checks */
  C_PEER_DISPLS,
  C_NUM
};

struct moe {
  uint32_t tokens, hidden;
  uint64_t seed;
  uint64_t capRows;  /* rows the dispatch's receive buffer holds */
  uint64_t sendRows; /* TOKENS * TOPK */
  void *tok, *send, *recv, *comb, *out;
  int32_t *pos, *peerPos, *peerRowTok;
  size_t* cnt;
  uint64_t* step;
  unsigned long long* err; /* [0] wrong elements, [1] the first one's code + 1 */
  size_t* hcnt;            /* pinned: (b)'s sendcounts, recvcounts */
  size_t* hdispl;          /* (b)'s sdispls, rdispls, host */
};

static size_t* cntOf(const struct moe* m, int which) { return m->cnt + (size_t)which * (size_t)nranks_; }

/* Phases, for the breakdown. */
enum { PH_ROUTE, PH_COUNTS, PH_DISPATCH, PH_EXPERT, PH_COMBINE, PH_UNPERMUTE, PH_NUM };
static const char* const phaseName[PH_NUM] = {"route+pack", "counts->host", "dispatch",
                                              "expert",     "combine",      "unpermute"};
/* Bytes read + written by one rank's phase, in units of R (bench header). */
static const double phaseR[PH_NUM] = {1 + TOPK, 0, 2 * TOPK, 2 * TOPK, 2 * TOPK, TOPK + 1};

static void mark(cudaEvent_t* ev, int phase, cudaStream_t s) {
  if (ev != NULL) CUDA_OK(cudaEventRecord(ev[phase], s));
}

/* The wrong elements so far; exits naming `what` when any. */
static void checkErr(const struct moe* m, cudaStream_t s, const char* what) {
  unsigned long long e[2];
  CUDA_OK(cudaStreamSynchronize(s));
  CUDA_OK(cudaMemcpy(e, m->err, sizeof(e), cudaMemcpyDeviceToHost));
  if (e[0] == 0) return;
  unsigned long long code = e[1] - 1;
  if (code >= (1ull << 62))
    fprintf(stderr, "rank %d: %s: %llu wrong; first: %s from rank %llu\n", rank, what, e[0],
            (code & 64) ? "rdispls" : "recvcounts", code & 63);
  else
    fprintf(stderr, "rank %d: %s: %llu wrong elements; first: element %llu (row %llu, column %llu)\n", rank, what, e[0],
            code, code / m->hidden, code % m->hidden);
  exit(1);
}

/* Every row rank `me` received from every rank, against the token it must
 * be (each peer's routing of this step recomputed here), before the expert. */
static void checkDispatch(struct moe* m, cudaStream_t s) {
  for (int src = 0; src < nranks_; src++) {
    CUDA_OK(benchMoeRoute(m->step, 0, m->seed, src, nranks_, m->tokens, m->hidden, m->peerPos, m->peerRowTok,
                          cntOf(m, C_PEER_COUNTS), cntOf(m, C_PEER_DISPLS), s));
    CUDA_OK(benchMoeCheckDispatch(m->recv, cntOf(m, C_RECVCOUNTS), cntOf(m, C_RDISPLS), rank, src,
                                  cntOf(m, C_PEER_COUNTS), cntOf(m, C_PEER_DISPLS), m->peerRowTok, m->hidden,
                                  m->capRows, m->err, s));
  }
  checkErr(m, s, "the dispatch");
}

/* (a): the whole step on the stream, no host wait (capturable). `ev`:
 * events at the phase boundaries (NULL: none); `check`: the checked step. */
static void stepOurs(struct moe* m, cudaStream_t s, cudaEvent_t* ev, int check) {
  const size_t H = m->hidden;
  mark(ev, PH_ROUTE, s);
  CUDA_OK(benchMoeRoute(m->step, 1, m->seed, rank, nranks_, m->tokens, m->hidden, m->pos, NULL, cntOf(m, C_SENDCOUNTS),
                        cntOf(m, C_SDISPLS), s));
  CUDA_OK(benchMoePack(m->tok, m->pos, m->send, m->tokens, m->hidden, s));
  mark(ev, PH_COUNTS, s);
  mark(ev, PH_DISPATCH, s);
  MSCCLPP_OK(mscclppAllToAllv(m->send, m->sendRows * H, cntOf(m, C_SENDCOUNTS), cntOf(m, C_SDISPLS), m->recv,
                              m->capRows * H, cntOf(m, C_RECVCOUNTS), cntOf(m, C_RDISPLS), mscclppBfloat16, comm, s));
  if (check) checkDispatch(m, s);
  mark(ev, PH_EXPERT, s);
  CUDA_OK(benchMoeScale(m->recv, cntOf(m, C_RECVCOUNTS), cntOf(m, C_RDISPLS), nranks_, 0, m->capRows * H, s));
  mark(ev, PH_COMBINE, s);
  MSCCLPP_OK(mscclppAllToAllv(m->recv, m->capRows * H, cntOf(m, C_RECVCOUNTS), cntOf(m, C_RDISPLS), m->comb,
                              m->sendRows * H, cntOf(m, C_COMB_COUNTS), cntOf(m, C_COMB_DISPLS), mscclppBfloat16, comm,
                              s));
  mark(ev, PH_UNPERMUTE, s);
  CUDA_OK(benchMoeUnpermute(m->comb, m->pos, m->out, rank, m->tokens, m->hidden, m->err, s));
  mark(ev, PH_NUM, s);
  if (check) {                                     /* the combine brought back what left: its counts are the router's */
    size_t routed[2 * EXPERTS], back[2 * EXPERTS]; /* counts, then displacements */
    const size_t bytes = 2 * (size_t)nranks_ * sizeof(size_t);
    CUDA_OK(cudaStreamSynchronize(s));
    CUDA_OK(cudaMemcpy(routed, cntOf(m, C_SENDCOUNTS), bytes, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(back, cntOf(m, C_COMB_COUNTS), bytes, cudaMemcpyDeviceToHost));
    for (int d = 0; d < 2 * nranks_; d++)
      if (routed[d] != back[d]) {
        fprintf(stderr, "rank %d: the combine's %s[%d] is %zu, the router's %zu\n", rank,
                d < nranks_ ? "recvcounts" : "rdispls", d % nranks_, back[d], routed[d]);
        exit(1);
      }
    checkErr(m, s, "the combine");
  }
}

/* (b): the counts to the host, then grouped sends and receives. */
static void stepUsual(struct moe* m, cudaStream_t s, cudaEvent_t* ev, int check) {
  const size_t H = m->hidden, n = (size_t)nranks_;
  const size_t ts = 2;
  size_t *sc = m->hcnt, *rc = m->hcnt + n, *sd = m->hdispl, *rd = m->hdispl + n;
  mark(ev, PH_ROUTE, s);
  CUDA_OK(benchMoeRoute(m->step, 1, m->seed, rank, nranks_, m->tokens, m->hidden, m->pos, NULL, cntOf(m, C_SENDCOUNTS),
                        cntOf(m, C_SDISPLS), s));
  CUDA_OK(benchMoePack(m->tok, m->pos, m->send, m->tokens, m->hidden, s));
  mark(ev, PH_COUNTS, s);
  /* the split sizes: exchanged on the GPU, then read by the host */
  NCCL_OK(nccl.alltoAll(cntOf(m, C_SENDCOUNTS), cntOf(m, C_RECVCOUNTS), 1, ncclUint64, ncomm, s));
  CUDA_OK(cudaMemcpyAsync(sc, cntOf(m, C_SENDCOUNTS), n * sizeof(size_t), cudaMemcpyDeviceToHost, s));
  CUDA_OK(cudaMemcpyAsync(rc, cntOf(m, C_RECVCOUNTS), n * sizeof(size_t), cudaMemcpyDeviceToHost, s));
  CUDA_OK(cudaStreamSynchronize(s));
  size_t at = 0, rt = 0;
  for (size_t p = 0; p < n; p++) {
    sd[p] = at;
    rd[p] = rt;
    at += sc[p];
    rt += rc[p];
  }
  if (rt > m->capRows * H) {
    fprintf(stderr, "rank %d: (b): %zu elements arrive, more than the %llu the buffer holds\n", rank, rt,
            (unsigned long long)(m->capRows * H));
    exit(1);
  }
  mark(ev, PH_DISPATCH, s);
  NCCL_OK(nccl.groupStart());
  for (size_t p = 0; p < n; p++) {
    if (sc[p] > 0) NCCL_OK(nccl.send((const char*)m->send + sd[p] * ts, sc[p], ncclBfloat16, (int)p, ncomm, s));
    if (rc[p] > 0) NCCL_OK(nccl.recv((char*)m->recv + rd[p] * ts, rc[p], ncclBfloat16, (int)p, ncomm, s));
  }
  NCCL_OK(nccl.groupEnd());
  if (check) {
    CUDA_OK(cudaMemcpyAsync(cntOf(m, C_RDISPLS), rd, n * sizeof(size_t), cudaMemcpyHostToDevice, s));
    checkDispatch(m, s);
  }
  mark(ev, PH_EXPERT, s);
  CUDA_OK(benchMoeScale(m->recv, NULL, NULL, nranks_, rt, m->capRows * H, s));
  mark(ev, PH_COMBINE, s);
  NCCL_OK(nccl.groupStart());
  for (size_t p = 0; p < n; p++) {
    if (rc[p] > 0) NCCL_OK(nccl.send((const char*)m->recv + rd[p] * ts, rc[p], ncclBfloat16, (int)p, ncomm, s));
    if (sc[p] > 0) NCCL_OK(nccl.recv((char*)m->comb + sd[p] * ts, sc[p], ncclBfloat16, (int)p, ncomm, s));
  }
  NCCL_OK(nccl.groupEnd());
  mark(ev, PH_UNPERMUTE, s);
  CUDA_OK(benchMoeUnpermute(m->comb, m->pos, m->out, rank, m->tokens, m->hidden, m->err, s));
  mark(ev, PH_NUM, s);
  if (check) checkErr(m, s, "the combine");
}

typedef void (*stepFn)(struct moe* m, cudaStream_t s, cudaEvent_t* ev, int check);

/* Both ways' failures that the calls did not return. */
static void asyncOk(const char* what) {
  mscclppResult_t a = mscclppSuccess;
  mscclppCommGetAsyncError(comm, &a);
  if (a != mscclppSuccess) {
    fprintf(stderr, "rank %d: %s: asynchronous error %s: %s\n", rank, what, mscclppGetErrorString(a),
            mscclppGetLastError());
    exit(1);
  }
  if (ncomm != NULL) {
    ncclResult_t na = ncclSuccess;
    NCCL_OK(nccl.commGetAsyncError(ncomm, &na));
    if (na != ncclSuccess) {
      fprintf(stderr, "rank %d: %s: NCCL asynchronous error %s: %s\n", rank, what, nccl.getErrorString(na),
              nccl.getLastError(ncomm));
      exit(1);
    }
  }
}

/* The checked steps, then `nb` steps with a sync after each for the phase
 * breakdown (us per phase, slowest rank, into ph). */
static void checkedAndPhases(struct moe* m, stepFn step, int checked, int nb, cudaStream_t s, cudaEvent_t* ev,
                             double* ph, const char* what) {
  for (int i = 0; i < checked; i++) step(m, s, NULL, 1);
  asyncOk(what);
  double acc[PH_NUM] = {0};
  for (int i = 0; i < nb; i++) {
    CUDA_OK(cudaStreamSynchronize(s));
    MSCCLPP_OK(mscclppBootstrapBarrier(comm));
    step(m, s, ev, 0);
    CUDA_OK(cudaEventSynchronize(ev[PH_NUM]));
    for (int p = 0; p < PH_NUM; p++) {
      float ms = 0;
      CUDA_OK(cudaEventElapsedTime(&ms, ev[p], ev[p + 1]));
      acc[p] += ms * 1e3;
    }
  }
  for (int p = 0; p < PH_NUM; p++) ph[p] = maxOver(nb > 0 ? acc[p] / nb : 0);
}

/* us per step of `iters` steps back to back (eager), slowest rank. */
static double timedEager(struct moe* m, stepFn step, int iters, cudaStream_t s, cudaEvent_t e0, cudaEvent_t e1) {
  CUDA_OK(cudaStreamSynchronize(s));
  MSCCLPP_OK(mscclppBootstrapBarrier(comm));
  CUDA_OK(cudaEventRecord(e0, s));
  for (int i = 0; i < iters; i++) step(m, s, NULL, 0);
  CUDA_OK(cudaEventRecord(e1, s));
  CUDA_OK(cudaEventSynchronize(e1));
  float ms = 0;
  CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
  return maxOver(ms * 1e3 / iters);
}

/* (a) captured once in a CUDA graph, replayed `iters` times: us per step. */
static double timedGraph(struct moe* m, int iters, cudaStream_t s, cudaEvent_t e0, cudaEvent_t e1) {
  cudaGraph_t g;
  CUDA_OK(cudaStreamSynchronize(s));
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  stepOurs(m, s, NULL, 0);
  CUDA_OK(cudaStreamEndCapture(s, &g));
  return maxOver(benchGraphReplayUs(comm, g, iters, s, e0, e1) / iters);
}

static void usage(void) {
  fprintf(stderr,
          "usage: bench_moe [-i STEPS] [-c CHECKED] [-t TOKENS] [-H HIDDEN] [--nccl PATH] [--no-nccl]\n"
          "  -i  timed steps per way (20); -c  checked steps per way (3); -t  tokens per rank (4096);\n"
          "  -H  bfloat16 values per token (7168, a multiple of 8); --nccl  libmscclpp_nccl.so for way (b)\n"
          "  (default: lib/ beside this executable); --no-nccl  skip way (b)\n");
  exit(2);
}

int main(int argc, char** argv) {
  int iters = 20, checked = 3, noNccl = 0;
  unsigned long tokens = 4096, hidden = 7168;
  const char* ncclPath = NULL;
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--no-nccl") == 0) {
      noNccl = 1;
      continue;
    }
    if (v == NULL) usage();
    if (strcmp(a, "-i") == 0)
      iters = atoi(v);
    else if (strcmp(a, "-c") == 0)
      checked = atoi(v);
    else if (strcmp(a, "-t") == 0)
      tokens = strtoul(v, NULL, 0);
    else if (strcmp(a, "-H") == 0)
      hidden = strtoul(v, NULL, 0);
    else if (strcmp(a, "--nccl") == 0)
      ncclPath = v;
    else
      usage();
    i++;
  }
  if (iters < 1 || checked < 0 || tokens < 1 || tokens > 12288 || hidden < 8 || hidden % 8 != 0 ||
      hidden > (1ul << 20)) {
    fprintf(stderr, "bench_moe: -i >= 1, -c >= 0, 1 <= -t <= 12288 (the router's shared memory), -H a multiple of 8\n");
    return 2;
  }
  int dev = 0;
  int joined = benchGpuJoin(&comm, &nranks_, &dev);
  if (joined != 0) return joined;
  if (EXPERTS % nranks_ != 0) {
    fprintf(stderr, "bench_moe: %d ranks; the %d experts are spread evenly, so the ranks must divide %d\n", nranks_,
            EXPERTS, EXPERTS);
    return 2;
  }
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t e0, e1, ev[PH_NUM + 1];
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));
  for (int p = 0; p <= PH_NUM; p++) CUDA_OK(cudaEventCreate(&ev[p]));

  /* (b)'s library and communicator */
  char why[512] = "";
  int haveNccl = !noNccl && ncclLoad(ncclPath, why, sizeof(why)) == 0;
  if (!noNccl && !haveNccl) {
    fprintf(stderr, "rank %d: bench_moe: cannot load our NCCL library for way (b): %s (--nccl PATH, or --no-nccl)\n",
            rank, why);
    return 1;
  }
  if (haveNccl) {
    ncclUniqueId* ids = calloc((size_t)nranks_, sizeof(ncclUniqueId));
    if (rank == 0) NCCL_OK(nccl.getUniqueId(&ids[0]));
    MSCCLPP_OK(mscclppBootstrapAllGather(comm, ids, sizeof(ncclUniqueId)));
    NCCL_OK(nccl.commInitRank(&ncomm, nranks_, ids[0], rank));
    free(ids);
  }

  /* (c): the copy rate (rank 0 alone; the others wait) */
  double copyBps = benchCopyRoofline(comm, nranks_, s, e0, e1);

  /* this rank's buffers */
  struct moe m;
  memset(&m, 0, sizeof(m));
  m.tokens = (uint32_t)tokens;
  m.hidden = (uint32_t)hidden;
  m.seed = 0x6d6f65ull;
  m.sendRows = (uint64_t)tokens * TOPK;
  /* a rank receives TOKENS * TOPK rows on average; binomial spread, far
   * below 25% at these sizes (an overflow is an error, reported) */
  m.capRows = m.sendRows + m.sendRows / 4 + 64;
  const size_t rowBytes = (size_t)hidden * 2;
  CUDA_OK(cudaMalloc(&m.tok, (size_t)tokens * rowBytes));
  CUDA_OK(cudaMalloc(&m.send, m.sendRows * rowBytes));
  CUDA_OK(cudaMalloc(&m.recv, m.capRows * rowBytes));
  CUDA_OK(cudaMalloc(&m.comb, m.sendRows * rowBytes));
  CUDA_OK(cudaMalloc(&m.out, (size_t)tokens * rowBytes));
  CUDA_OK(cudaMalloc((void**)&m.pos, m.sendRows * sizeof(int32_t)));
  CUDA_OK(cudaMalloc((void**)&m.peerPos, m.sendRows * sizeof(int32_t)));
  CUDA_OK(cudaMalloc((void**)&m.peerRowTok, m.sendRows * sizeof(int32_t)));
  CUDA_OK(cudaMalloc((void**)&m.cnt, C_NUM * (size_t)nranks_ * sizeof(size_t)));
  CUDA_OK(cudaMalloc((void**)&m.step, sizeof(uint64_t)));
  CUDA_OK(cudaMalloc((void**)&m.err, 2 * sizeof(unsigned long long)));
  CUDA_OK(cudaMallocHost((void**)&m.hcnt, 2 * (size_t)nranks_ * sizeof(size_t)));
  m.hdispl = calloc(2 * (size_t)nranks_, sizeof(size_t));
  CUDA_OK(cudaMemset(m.step, 0, sizeof(uint64_t)));
  CUDA_OK(cudaMemset(m.err, 0, 2 * sizeof(unsigned long long)));
  CUDA_OK(cudaMemset(m.cnt, 0, C_NUM * (size_t)nranks_ * sizeof(size_t)));
  CUDA_OK(benchMoeInitTokens(m.tok, rank, m.tokens, m.hidden, s));
  CUDA_OK(cudaStreamSynchronize(s));

  const double R = (double)tokens * (double)rowBytes;
  const double k = nranks_;
  const double roofUs = k * 66.0 * R / copyBps * 1e6;
  if (rank == 0) {
    printf(
        "bench_moe: %d ranks on one GPU, per rank %lu tokens x %lu bfloat16, top-%d of %d experts (%d per rank), "
        "new routing every step\n",
        nranks_, tokens, hidden, TOPK, EXPERTS, EXPERTS / nranks_);
    printf("roofline: device-to-device copy of 1 GiB: %.2f TB/s counting bytes read + written\n", copyBps / 1e12);
    printf(
        "bytes per step, read + written, all %d ranks: %.1f MiB (pack %.0f, dispatch %.0f, expert %.0f, "
        "combine %.0f, un-permute %.0f)\n",
        nranks_, k * 66.0 * R / 1048576.0, k * (1 + TOPK) * R / 1048576.0, k * 2 * TOPK * R / 1048576.0,
        k * 2 * TOPK * R / 1048576.0, k * 2 * TOPK * R / 1048576.0, k * (1 + TOPK) * R / 1048576.0);
    fflush(stdout);
  }

  /* (a), then (b) */
  const int nb = 5;
  double phA[PH_NUM], phB[PH_NUM];
  checkedAndPhases(&m, stepOurs, checked, nb, s, ev, phA, "(a)");
  double eagerA = timedEager(&m, stepOurs, iters, s, e0, e1);
  double graphA = timedGraph(&m, iters, s, e0, e1);
  checkErr(&m, s, "(a)'s timed steps");
  asyncOk("(a)");
  double eagerB = 0;
  if (haveNccl) {
    checkedAndPhases(&m, stepUsual, checked, nb, s, ev, phB, "(b)");
    eagerB = timedEager(&m, stepUsual, iters, s, e0, e1);
    checkErr(&m, s, "(b)'s timed steps");
    asyncOk("(b)");
  }

  (void)maxOver(0); /* every rank's checks passed (a rank that failed has exited: this fails) */
  if (rank == 0) {
    printf("\n%-62s %12s %12s %12s\n", "way (slowest rank)", "us/step", "/ (a) graph", "of roofline");
    printf("%-62s %12.1f %11.2fx %11.0f%%\n", "(a) ours: mscclppAllToAllv, counts on the GPU, CUDA graph", graphA, 1.0,
           100.0 * roofUs / graphA);
    printf("%-62s %12.1f %11.2fx %11.0f%%\n", "(a) ours, eager", eagerA, eagerA / graphA, 100.0 * roofUs / eagerA);
    if (haveNccl)
      printf("%-62s %12.1f %11.2fx %11.0f%%\n", "(b) counts to the host + grouped ncclSend/ncclRecv, eager", eagerB,
             eagerB / graphA, 100.0 * roofUs / eagerB);
    else
      printf("%-62s %12s\n", "(b) counts to the host + grouped ncclSend/ncclRecv", "not run (--no-nccl)");
    printf("%-62s %12.1f %11.2fx %11.0f%%\n", "(c) HBM roofline", roofUs, roofUs / graphA, 100.0);
    printf("\nphases, eager with a sync after each step, us (slowest rank; %% of the phase's roofline)\n%-14s", "");
    for (int p = 0; p < PH_NUM; p++) printf(" %18s", phaseName[p]);
    printf("\n");
    for (int w = 0; w < (haveNccl ? 2 : 1); w++) {
      const double* ph = w ? phB : phA;
      printf("%-14s", w ? "(b)" : "(a)");
      for (int p = 0; p < PH_NUM; p++) {
        const double r = k * phaseR[p] * R / copyBps * 1e6;
        if (r > 0 && ph[p] > 0)
          printf(" %10.1f (%4.0f%%)", ph[p], 100.0 * r / ph[p]);
        else
          printf(" %18.1f", ph[p]);
      }
      printf("\n");
    }
    printf("%-14s", "roofline");
    for (int p = 0; p < PH_NUM; p++) printf(" %18.1f", k * phaseR[p] * R / copyBps * 1e6);
    printf("\n\n");
    printf(
        "checked: %d steps of each way with every delivered row, the received counts and the combined tokens "
        "compared exactly, and every timed step's combined tokens: 0 wrong\n",
        checked);
    const double best = graphA < eagerA ? graphA : eagerA;
    if (haveNccl)
      printf(
          "goal (issue 23): (a) >= 1.5x faster than (b): %s (graph %.2fx, eager %.2fx); (a) >= 70%% of the "
          "roofline: %s (%.0f%%)\n",
          eagerB / best >= 1.5 ? "met" : "NOT met", eagerB / graphA, eagerB / eagerA,
          roofUs / best >= 0.7 ? "met" : "NOT met", 100.0 * roofUs / best);
  }
  if (haveNccl) NCCL_OK(nccl.commDestroy(ncomm));
  MSCCLPP_OK(mscclppBootstrapBarrier(comm)); /* the peers are done with this rank's buffers */
  CUDA_OK(cudaFree(m.tok));
  CUDA_OK(cudaFree(m.send));
  CUDA_OK(cudaFree(m.recv));
  CUDA_OK(cudaFree(m.comb));
  CUDA_OK(cudaFree(m.out));
  CUDA_OK(cudaFree(m.pos));
  CUDA_OK(cudaFree(m.peerPos));
  CUDA_OK(cudaFree(m.peerRowTok));
  CUDA_OK(cudaFree(m.cnt));
  CUDA_OK(cudaFree(m.step));
  CUDA_OK(cudaFree(m.err));
  CUDA_OK(cudaFreeHost(m.hcnt));
  free(m.hdispl);
  MSCCLPP_OK(mscclppCommDestroy(comm));
  return 0;
}
#endif /* MSCCLPP_HAVE_CUDA */
