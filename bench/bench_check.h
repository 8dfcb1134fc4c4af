/*
 * The checks the GPU channel benchmarks share: a failed CUDA or mscclpp
 * call prints the rank, the call and the reason, and exits 1. The file
 * that includes this defines `static int rank` (-1 until known).
 */
#ifndef MSCCLPP_BENCH_BENCH_CHECK_H_
#define MSCCLPP_BENCH_BENCH_CHECK_H_

#include <stdio.h>
#include <stdlib.h>

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

#endif /* MSCCLPP_BENCH_BENCH_CHECK_H_ */
