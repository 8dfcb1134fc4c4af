/* SPDX-License-Identifier: MIT */
/* Small statistics shared by the benchmarks (C and CUDA sources). */
#ifndef MSCCLPP_BENCH_BENCH_STATS_H_
#define MSCCLPP_BENCH_BENCH_STATS_H_

/* Sort v[0..n) in place (n is a handful of blocks) and return its median. */
static inline double benchSortMedian(double* v, int n) {
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
      double t = v[j];
      v[j] = v[j - 1];
      v[j - 1] = t;
    }
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#endif /* MSCCLPP_BENCH_BENCH_STATS_H_ */
