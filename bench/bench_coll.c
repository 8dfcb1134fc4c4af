/* SPDX-License-Identifier: MIT */
/*
 * GPU collectives against the HBM roofline and MSCCL++ (../shared/ANCHORS.md),
 * in one run:  mscclpp-run -n N --mps -- bench_coll [maxBytes [first]]
 *
 * 1. the roofline: a 1 GiB device-to-device cudaMemcpyAsync, timed here
 *    (bytes read + written per second);
 * 2. allreduce and allgather, fp32 sum, 1 KiB .. maxBytes (256 MiB default)
 *    per rank, out of place: time per call from CUDA events around 20 calls
 *    launched one by one ("stream"), and around 15 back-to-back replays of
 *    a CUDA graph of 20 captured calls ("graph": the kernels' own time,
 *    without the host's launch cost; 300 calls, as MSCCL++'s
 *    allreduce_test_perf times them, so that the ranks' skew in starting
 *    the replay is spread over as many calls as in its figures); the host
 *    launch cost per call is printed apart. The
 *    roofline time for k ranks sharing one GPU: allreduce 2·k·S / B,
 *    allgather (k+1)·S / B, with S the bytes of each rank's output
 *    (allgather) or input (allreduce) and B the copy's bytes per second.
 *    algbw = S / time, as nccl-tests. Allgather also shows the raw
 *    fan-out copy (bench_coll_kernels.cu): one process, one kernel reading
 *    S and writing k*S bytes -- the best an SM copy does with the
 *    allgather's mix of reads and writes -- and the allgather against it;
 *    the same fan-out split among the ranks, all at once, with no barrier
 *    (what the allgather's kernels move, less their synchronization);
 *    then the allgather in place (graph), as MSCCL++'s allgather_test_perf
 *    runs it for the anchor figures, against both the roofline above and
 *    its own least traffic k·S (the input is already in the output).
 * 3. allreduce by algorithm (packet, packet2 to 2 MiB, rsag) at 1 KiB .. 8 MiB, graph times,
 *    which is what the size rule in coll_gpu.c is set from.
 * 4. allreduce's first call on buffers new to the peers, 1 MiB .. maxBytes:
 *    the export of its allocations included, against the same call again
 *    and the roofline ("first": the roofline and this section only).
 * Every rank times itself; rank 0 prints the slowest rank's figures.
 */
#include <stdio.h>
#ifndef MSCCLPP_HAVE_CUDA
int main(void) {
  printf("SKIPPED: bench_coll needs a CUDA build\n");
  return 77;
}
#else
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/comm.h" /* the algorithm comparison sets the communicator's MSCCLPP_ALGO */
#include "mscclpp/coll.h"
#include "mscclpp/comm.h"

#include "bench_check.h"
#include "bench_time.h"

static double nowUs(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static mscclppComm_t comm;
static int nranks_;

static double maxOver(double v) { return benchMaxOver(comm, nranks_, v); }

/* bench_coll_kernels.cu */
cudaError_t benchCollFanout(const void* src, void* dst, int k, size_t bytes, int blocks, cudaStream_t s);
cudaError_t benchCollFanoutBulk(const void* src, void* dst, int k, size_t bytes, int blocks, cudaStream_t s);
cudaError_t benchCollFanoutCheck(const void* src, const void* dst, int k, size_t bytes, unsigned long long* bad);

typedef cudaError_t (*fanFn)(const void* src, void* dst, int k, size_t bytes, int blocks, cudaStream_t s);

/* One fan-out (`bytes` of src written k times into dst, on `blocks`
 * blocks) checked byte for byte, dst poisoned first; then `reps` of them
 * back to back, timed: us per fan-out. `together`: a bootstrap barrier
 * before the timing (every rank calls). */
static double fanTimedUs(fanFn fan, const char* what, const void* src, void* dst, size_t bytes, int blocks, int reps,
                         int together, cudaStream_t s, cudaEvent_t e0, cudaEvent_t e1) {
  /* on s: a non-blocking stream does not wait for the legacy stream's work */
  CUDA_OK(cudaMemsetAsync(dst, 0x5A, bytes * (size_t)nranks_, s));
  CUDA_OK(fan(src, dst, nranks_, bytes, blocks, s));
  CUDA_OK(cudaStreamSynchronize(s));
  unsigned long long bad = 0;
  CUDA_OK(benchCollFanoutCheck(src, dst, nranks_, bytes, &bad));
  if (bad != 0) {
    fprintf(stderr, "rank %d: %s copied %llu bytes wrong at %zu bytes\n", rank, what, bad, bytes);
    exit(1);
  }
  if (together) MSCCLPP_OK(mscclppBootstrapBarrier(comm));
  CUDA_OK(cudaEventRecord(e0, s));
  for (int i = 0; i < reps; i++) CUDA_OK(fan(src, dst, nranks_, bytes, blocks, s));
  CUDA_OK(cudaEventRecord(e1, s));
  CUDA_OK(cudaEventSynchronize(e1));
  float ms;
  CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
  return ms * 1e3 / reps;
}

/* The raw fan-out of `bytes` of output per rank for k ranks (rank 0 alone;
 * the others wait), us per copy. */
static double fanoutUs(int bulk, const void* src, void* dst, size_t bytes, int blocks, cudaStream_t s,
                       cudaEvent_t e0, cudaEvent_t e1) {
  double us = 0;
  if (rank == 0)
    us = fanTimedUs(bulk ? benchCollFanoutBulk : benchCollFanout, bulk ? "the raw fan-out (bulk)" : "the raw fan-out",
                    src, dst, bytes, blocks, bytes >= (64u << 20) ? 5 : 20, 0, s, e0, e1);
  return maxOver(us);
}

/* The raw fan-out split among the ranks as an allgather splits it: every
 * rank at once copies its own S/k bytes k times into a buffer of its own
 * (`bytes / k` of src into dst, nsm / k blocks), with no barrier and no
 * peer; copies back to back after a bootstrap barrier (100 from 64 MiB, so
 * that the ranks' skew in starting is a small part of the run), us per copy
 * of the slowest rank. It is what the ranks' kernels move without the
 * synchronization an allgather needs; ranks that do not overlap for the
 * whole run make it look a little faster. */
static double allRanksFanoutUs(const void* src, void* dst, size_t bytes, int blocks, cudaStream_t s, cudaEvent_t e0,
                               cudaEvent_t e1) {
  return maxOver(fanTimedUs(benchCollFanout, "the all-ranks fan-out", src, dst, bytes / (size_t)nranks_ / 16 * 16,
                            blocks, bytes >= ((size_t)64 << 20) ? 100 : 20, 1, s, e0, e1));
}

/* ag: 0 allreduce, 1 allgather, 2 allgather in place (this rank's input is
 * its block of the output, as MSCCL++'s allgather_test_perf runs it). */
static void call(int ag, const void* in, void* out, size_t bytes, cudaStream_t s) {
  const size_t count = bytes / (size_t)nranks_ / 4;
  if (ag == 2)
    MSCCLPP_OK(mscclppAllGather((const float*)out + (size_t)rank * count, out, count, mscclppFloat32, comm, s));
  else if (ag)
    MSCCLPP_OK(mscclppAllGather(in, out, count, mscclppFloat32, comm, s));
  else
    MSCCLPP_OK(mscclppAllReduce(in, out, bytes / 4, mscclppFloat32, mscclppSum, comm, s));
}

/* Replays of the graph per measurement (MSCCL++'s cudaGraphLaunches). */
#define GRAPH_REPLAYS 15

/* Time per call of `iters` calls captured in one CUDA graph, replayed
 * GRAPH_REPLAYS times back to back. */
static double graphTimeUs(int ag, void* in, void* out, size_t bytes, cudaStream_t s, cudaEvent_t e0, cudaEvent_t e1,
                          int iters) {
  cudaGraph_t g;
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < iters; i++) call(ag, in, out, bytes, s);
  CUDA_OK(cudaStreamEndCapture(s, &g));
  return maxOver(benchGraphReplayUs(comm, g, GRAPH_REPLAYS, s, e0, e1) / iters / GRAPH_REPLAYS);
}

int main(int argc, char** argv) {
  size_t maxBytes = argc > 1 ? strtoull(argv[1], NULL, 0) : (256u << 20);
  const int firstOnly = argc > 2 && strcmp(argv[2], "first") == 0; /* section 4 only */
  int dev = 0;
  int joined = benchGpuJoin(&comm, &nranks_, &dev);
  if (joined != 0) return joined;
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));

  /* 1. roofline (rank 0 alone, the others wait) */
  double copyBps = benchCopyRoofline(comm, nranks_, s, e0, e1);
  if (rank == 0)
    printf("roofline: device-to-device copy of 1 GiB: %.2f TB/s counting bytes read + written\n", copyBps / 1e12);

  size_t allocIn = maxBytes, allocOut = maxBytes;
  void *in, *out;
  CUDA_OK(cudaMalloc(&in, allocIn));
  CUDA_OK(cudaMalloc(&out, allocOut));
  CUDA_OK(cudaMemset(in, 0, allocIn));
  CUDA_OK(cudaDeviceSynchronize()); /* the collectives run on a non-blocking stream */
  /* the raw fan-out's buffers (rank 0): one output's worth of inputs, k outputs */
  void *fanSrc = NULL, *fanDst = NULL;
  int fanBlocks = 0, fanBulkBlocks = 0, nsm = 0;
  CUDA_OK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev));
  if (rank == 0) {
    CUDA_OK(cudaMalloc(&fanSrc, maxBytes));
    CUDA_OK(cudaMalloc(&fanDst, maxBytes * (size_t)nranks_));
    /* pseudo-random bytes: a misplaced chunk shows */
    uint32_t* h = malloc(maxBytes);
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < maxBytes / 4; i++) {
      x ^= x << 13;
      x ^= x >> 17;
      x ^= x << 5;
      h[i] = x;
    }
    CUDA_OK(cudaMemcpy(fanSrc, h, maxBytes, cudaMemcpyHostToDevice));
    free(h);
    /* one 512-thread block per SM: the best grid for this copy (bench/HISTORY.md, "Allgather's grid") */
    fanBlocks = nsm;
    fanBulkBlocks = nsm * 3; /* 64 KiB of stages each: three per SM */
  }
  const int iters = 20;
  for (int ag = 0; ag < (firstOnly ? 0 : 2); ag++) {
    if (rank == 0)
      printf("\n%s fp32, %d ranks: time per call (slowest rank)\n%10s %12s %12s %12s %10s %12s %10s%s\n",
             ag ? "allgather (bytes: each rank's output)" : "allreduce (bytes per rank)", nranks_, "bytes",
             "stream us", "graph us", "launch us", "algbw GB/s", "roofline us", "of roofl.",
             ag ? "  fan-out us  of roofl.  ours/fan-out     bulk us  of roofl.  all-ranks us  of roofl."
                  "  in-place us  of roofl.  of k*S"
                : "");
    for (size_t bytes = 1024; bytes <= maxBytes; bytes *= 2) {
      /* warm-up (first call of a size maps the buffers) */
      for (int i = 0; i < 3; i++) call(ag, in, out, bytes, s);
      CUDA_OK(cudaStreamSynchronize(s));
      MSCCLPP_OK(mscclppBootstrapBarrier(comm));
      double h0 = nowUs();
      CUDA_OK(cudaEventRecord(e0, s));
      for (int i = 0; i < iters; i++) call(ag, in, out, bytes, s);
      double launchUs = (nowUs() - h0) / iters;
      CUDA_OK(cudaEventRecord(e1, s));
      CUDA_OK(cudaEventSynchronize(e1));
      float ms;
      CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
      double streamUs = ms * 1e3 / iters;
      double graphUs = graphTimeUs(ag, in, out, bytes, s, e0, e1, iters);
      mscclppResult_t async;
      mscclppCommGetAsyncError(comm, &async);
      if (async != mscclppSuccess) {
        fprintf(stderr, "rank %d: async error %d: %s\n", rank, async, mscclppGetLastError());
        return 1;
      }
      streamUs = maxOver(streamUs);
      launchUs = maxOver(launchUs);
      double k = nranks_;
      double roof = ag ? (k + 1) * bytes / copyBps * 1e6 : 2 * k * bytes / copyBps * 1e6;
      double best = graphUs < streamUs ? graphUs : streamUs;
      double algbw = bytes / (best * 1e-6) / 1e9;
      double fan = ag ? fanoutUs(0, fanSrc, fanDst, bytes, fanBlocks, s, e0, e1) : 0;
      double fanAll = ag ? allRanksFanoutUs(in, out, bytes, nsm / nranks_ > 0 ? nsm / nranks_ : 1, s, e0, e1) : 0;
      double fanBulk = ag ? fanoutUs(1, fanSrc, fanDst, bytes, fanBulkBlocks, s, e0, e1) : 0;
      /* in place: the input is already in the output, so k*S bytes is the
       * least it moves; also shown against the out-of-place roofline */
      double inPlace = 0;
      if (ag) {
        for (int i = 0; i < 3; i++) call(2, in, out, bytes, s);
        inPlace = graphTimeUs(2, in, out, bytes, s, e0, e1, iters);
      }
      if (rank == 0) {
        printf("%10zu %12.2f %12.2f %12.2f %10.1f %12.2f %9.0f%%", bytes, streamUs, graphUs, launchUs, algbw, roof,
               100.0 * roof / best);
        if (ag)
          printf(" %11.2f %9.0f%% %13.2f %11.2f %9.0f%% %12.2f %9.0f%% %12.2f %9.0f%% %7.0f%%", fan, 100.0 * roof / fan,
                 best / fan, fanBulk, 100.0 * roof / fanBulk, fanAll, 100.0 * roof / fanAll, inPlace,
                 100.0 * roof / inPlace, 100.0 * roof * k / (k + 1) / inPlace);
        printf("\n");
      }
    }
  }
  /* 3. algorithms side by side (packet2 up to the size its slots hold) */
  static const char* const algos[] = {"packet", "packet2", "rsag"};
  if (rank == 0)
    printf("\nallreduce fp32 by algorithm, %d ranks, graph us per call\n%10s %10s %10s %10s\n", nranks_, "bytes",
           algos[0], algos[1], algos[2]);
  struct mscclppComm* c = (struct mscclppComm*)comm;
  char saved[sizeof(c->params.algo)];
  memcpy(saved, c->params.algo, sizeof(saved));
  for (size_t bytes = 1024; !firstOnly && bytes <= maxBytes && bytes <= ((size_t)8 << 20); bytes *= 2) {
    double t[3];
    for (int a = 0; a < 3; a++) {
      t[a] = 0;
      if (a == 1 && bytes > ((size_t)2 << 20)) continue;
      snprintf(c->params.algo, sizeof(c->params.algo), "allreduce=%s", algos[a]);
      for (int i = 0; i < 3; i++) call(0, in, out, bytes, s);
      t[a] = graphTimeUs(0, in, out, bytes, s, e0, e1, iters);
    }
    if (rank == 0) {
      char p2[16] = "         -"; /* packet2: beyond its slots */
      if (t[1] > 0) snprintf(p2, sizeof(p2), "%10.2f", t[1]);
      printf("%10zu %10.2f %s %10.2f\n", bytes, t[0], p2, t[2]);
    }
  }
  memcpy(c->params.algo, saved, sizeof(saved));
  CUDA_OK(cudaFree(in));
  CUDA_OK(cudaFree(out));

  /* 4. the first call on new buffers: every rank allocates its input and
   * output anew (never seen by the peers), the ranks line up on the host,
   * and each times its first allreduce from the call to the end of its
   * kernel: that includes asking each peer's export service to map the two
   * allocations (no peer's application thread takes part). Then the same
   * call again on the same buffers, and the roofline. */
  if (rank == 0)
    printf("\nallreduce fp32, first call on new buffers, %d ranks (slowest rank, us)\n%10s %12s %12s %12s %10s\n",
           nranks_, "bytes", "first us", "again us", "roofline us", "first of roofl.");
  for (size_t bytes = (size_t)1 << 20; bytes <= maxBytes; bytes *= 16) {
    void *fin, *fout;
    CUDA_OK(cudaMalloc(&fin, bytes));
    CUDA_OK(cudaMalloc(&fout, bytes));
    CUDA_OK(cudaMemset(fin, 0, bytes));
    CUDA_OK(cudaDeviceSynchronize());
    MSCCLPP_OK(mscclppBootstrapBarrier(comm));
    double t0 = nowUs();
    call(0, fin, fout, bytes, s);
    CUDA_OK(cudaStreamSynchronize(s));
    double first = maxOver(nowUs() - t0);
    MSCCLPP_OK(mscclppBootstrapBarrier(comm));
    t0 = nowUs();
    call(0, fin, fout, bytes, s);
    CUDA_OK(cudaStreamSynchronize(s));
    double again = maxOver(nowUs() - t0);
    double roof = 2.0 * nranks_ * (double)bytes / copyBps * 1e6;
    if (rank == 0) printf("%10zu %12.1f %12.1f %12.2f %9.0f%%\n", bytes, first, again, roof, 100.0 * roof / first);
    MSCCLPP_OK(mscclppBootstrapBarrier(comm)); /* the peers are done with them */
    CUDA_OK(cudaFree(fin));
    CUDA_OK(cudaFree(fout));
  }
  if (fanSrc) CUDA_OK(cudaFree(fanSrc));
  if (fanDst) CUDA_OK(cudaFree(fanDst));
  MSCCLPP_OK(mscclppCommDestroy(comm));
  return 0;
}
#endif /* MSCCLPP_HAVE_CUDA */
