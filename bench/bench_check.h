/* SPDX-License-Identifier: MIT */
/*
 * What the GPU benchmarks share: checks (a failed CUDA or mscclpp
 * call prints the rank, the call and the reason, and exits 1) and joining
 * the job. The file that includes this includes cuda_runtime.h and
 * mscclpp/comm.h first.
 */
#ifndef MSCCLPP_BENCH_BENCH_CHECK_H_
#define MSCCLPP_BENCH_BENCH_CHECK_H_

#include <stdio.h>
#include <stdlib.h>

/* This process's rank, for the messages (-1 until benchGpuJoin). */
static int rank = -1;

#define CUDA_OK(expr)                                                                                    \
  do {                                                                                                   \
    cudaError_t e_ = (expr);                                                                             \
    if (e_ != cudaSuccess) {                                                                             \
      fprintf(stderr, "rank %d: %s:%d: %s: %s\n", rank, __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
      exit(1);                                                                                           \
    }                                                                                                    \
  } while (0)
#define MSCCLPP_OK(expr)                                                                                 \
  do {                                                                                                   \
    mscclppResult_t r_ = (expr);                                                                         \
    if (r_ != mscclppSuccess) {                                                                          \
      fprintf(stderr, "rank %d: %s: %s: %s\n", rank, #expr, mscclppGetErrorString(r_), mscclppGetLastError()); \
      exit(1);                                                                                           \
    }                                                                                                    \
  } while (0)

/* Join the job (mscclppCommInitFromEnv), set `rank`, *nranks and the
 * device (local rank modulo the devices); *dev receives it. 0 on success,
 * 77 (the "skipped" exit status) without a GPU. */
static inline int benchGpuJoin(mscclppComm_t* comm, int* nranks, int* dev) {
  int ndev = 0, localRank = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    printf("SKIPPED: needs a GPU\n");
    return 77;
  }
  MSCCLPP_OK(mscclppCommInitFromEnv(comm));
  mscclppCommRank(*comm, &rank);
  mscclppCommSize(*comm, nranks);
  mscclppCommLocalRank(*comm, &localRank);
  *dev = localRank % ndev;
  CUDA_OK(cudaSetDevice(*dev));
  return 0;
}

#endif /* MSCCLPP_BENCH_BENCH_CHECK_H_ */
