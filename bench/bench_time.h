/* SPDX-License-Identifier: MIT */
/*
 * What the GPU benchmarks time the same way: the slowest rank's figure,
 * the device-to-device copy roofline, and replays of a CUDA graph. Every
 * rank calls each of these (they end in a bootstrap collective or
 * barrier). The file that includes this includes cuda_runtime.h and
 * mscclpp/comm.h first.
 */
#ifndef MSCCLPP_BENCH_BENCH_TIME_H_
#define MSCCLPP_BENCH_BENCH_TIME_H_

#include <stdlib.h>

#include "bench_check.h"

/* The largest of every rank's v: the slowest rank's figure. */
static inline double benchMaxOver(mscclppComm_t comm, int nranks, double v) {
  double* all = calloc((size_t)nranks, sizeof(double));
  all[rank] = v;
  MSCCLPP_OK(mscclppBootstrapAllGather(comm, all, sizeof(double)));
  double m = 0;
  for (int i = 0; i < nranks; i++) m = all[i] > m ? all[i] : m;
  free(all);
  return m;
}

/* The roofline: a device-to-device cudaMemcpyAsync of 1 GiB on s, one to
 * warm up, then 10 timed with e0 and e1, in bytes read + written per
 * second. Rank 0 measures alone (the others wait at the end), and every
 * rank returns its figure. */
static inline double benchCopyRoofline(mscclppComm_t comm, int nranks, cudaStream_t s, cudaEvent_t e0, cudaEvent_t e1) {
  double copyBps = 0;
  if (rank == 0) {
    size_t n = (size_t)1 << 30;
    void *a, *b;
    CUDA_OK(cudaMalloc(&a, n));
    CUDA_OK(cudaMalloc(&b, n));
    CUDA_OK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, s));
    CUDA_OK(cudaEventRecord(e0, s));
    for (int i = 0; i < 10; i++) CUDA_OK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, s));
    CUDA_OK(cudaEventRecord(e1, s));
    CUDA_OK(cudaEventSynchronize(e1));
    float ms;
    CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
    copyBps = 2.0 * n * 10 / (ms / 1e3);
    CUDA_OK(cudaFree(a));
    CUDA_OK(cudaFree(b));
  }
  return benchMaxOver(comm, nranks, copyBps);
}

/* Graph g (captured by the caller on s), instantiated and launched once to
 * warm up, then, after a bootstrap barrier, replayed `reps` times back to
 * back: the replays' time in us (CUDA events e0, e1), this rank's. g and
 * its instance are destroyed. */
static inline double benchGraphReplayUs(mscclppComm_t comm, cudaGraph_t g, int reps, cudaStream_t s, cudaEvent_t e0,
                                        cudaEvent_t e1) {
  cudaGraphExec_t ge;
  CUDA_OK(cudaGraphInstantiate(&ge, g, 0));
  CUDA_OK(cudaGraphLaunch(ge, s));
  CUDA_OK(cudaStreamSynchronize(s));
  MSCCLPP_OK(mscclppBootstrapBarrier(comm));
  CUDA_OK(cudaEventRecord(e0, s));
  for (int r = 0; r < reps; r++) CUDA_OK(cudaGraphLaunch(ge, s));
  CUDA_OK(cudaEventRecord(e1, s));
  CUDA_OK(cudaEventSynchronize(e1));
  float ms = 0;
  CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
  CUDA_OK(cudaGraphExecDestroy(ge));
  CUDA_OK(cudaGraphDestroy(g));
  return ms * 1e3;
}

#endif /* MSCCLPP_BENCH_BENCH_TIME_H_ */
