/* SPDX-License-Identifier: MIT */
/*
 * The element operators of the GPU collectives, shared by the GPU
 * backend's kernel files (coll_gpu_kernels.cuh lists them) and
 * coll_port_kernels.cu (CUDA only).
 *
 * Integers with wrap-around (computed unsigned), float and double natively,
 * half / bfloat16 / fp8 through float with round-to-nearest at each step.
 * Op<T>::apply(a, b, op) reduces two values, Op<T>::divide(a, n) divides by
 * n (avg); wordApply / wordDivide do it for every element of a word W
 * (uint64_t or uint4). Without nvcc (a host compiler playing the kernels,
 * as tests do) only the integer and native float types are defined.
 */
#ifndef MSCCLPP_SRC_COLL_COLL_OPS_CUH_
#define MSCCLPP_SRC_COLL_COLL_OPS_CUH_

#include <stdint.h>
#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#endif

#include "mscclpp/coll.h"

template <typename T>
struct UnsignedOf {
  typedef T type;
};
template <>
struct UnsignedOf<int8_t> {
  typedef uint8_t type;
};
template <>
struct UnsignedOf<int32_t> {
  typedef uint32_t type;
};
template <>
struct UnsignedOf<int64_t> {
  typedef uint64_t type;
};

template <typename T>
static __device__ __forceinline__ T intApply(T a, T b, int op) {
  typedef typename UnsignedOf<T>::type UT;
  switch (op) {
    case mscclppProd:
      return (T)((UT)a * (UT)b);
    case mscclppMax:
      return a > b ? a : b;
    case mscclppMin:
      return a < b ? a : b;
    default:
      return (T)((UT)a + (UT)b);
  }
}

template <typename F>
static __device__ __forceinline__ F fltApply(F a, F b, int op) {
  switch (op) {
    case mscclppProd:
      return a * b;
    case mscclppMax:
      return a > b ? a : (b > a ? b : (a != a ? a : b)); /* NaN wins */
    case mscclppMin:
      return a < b ? a : (b < a ? b : (a != a ? a : b));
    default:
      return a + b;
  }
}

/* Each type: how to reduce two values and to divide by n. */
template <typename T>
struct Op {
  static __device__ __forceinline__ T apply(T a, T b, int op) { return intApply<T>(a, b, op); }
  static __device__ __forceinline__ T divide(T a, int n) { return (T)(a / (T)n); }
};
template <>
struct Op<float> {
  static __device__ __forceinline__ float apply(float a, float b, int op) { return fltApply<float>(a, b, op); }
  static __device__ __forceinline__ float divide(float a, int n) { return a / (float)n; }
};
template <>
struct Op<double> {
  static __device__ __forceinline__ double apply(double a, double b, int op) { return fltApply<double>(a, b, op); }
  static __device__ __forceinline__ double divide(double a, int n) { return a / (double)n; }
};

#ifdef __CUDACC__
/* The 16- and 8-bit floats: through float, rounded to nearest (the types'
 * float constructors) after every step. */
template <typename T>
struct OpViaFloat {
  static __device__ __forceinline__ T apply(T a, T b, int op) { return T(fltApply<float>((float)a, (float)b, op)); }
  static __device__ __forceinline__ T divide(T a, int n) { return T((float)a / (float)n); }
};
template <>
struct Op<__half> : OpViaFloat<__half> {};
template <>
struct Op<__nv_bfloat16> : OpViaFloat<__nv_bfloat16> {};
template <>
struct Op<__nv_fp8_e4m3> : OpViaFloat<__nv_fp8_e4m3> {};
template <>
struct Op<__nv_fp8_e5m2> : OpViaFloat<__nv_fp8_e5m2> {};
#endif

/* Reduce a word W (uint64_t or uint4) of elements T in place. */
template <typename T, typename W>
static __device__ __forceinline__ void wordApply(W& acc, const W& v, int op) {
  T* a = reinterpret_cast<T*>(&acc);
  const T* b = reinterpret_cast<const T*>(&v);
#pragma unroll
  for (int i = 0; i < (int)(sizeof(W) / sizeof(T)); i++) a[i] = Op<T>::apply(a[i], b[i], op);
}
template <typename T, typename W>
static __device__ __forceinline__ void wordDivide(W& acc, int n) {
  T* a = reinterpret_cast<T*>(&acc);
#pragma unroll
  for (int i = 0; i < (int)(sizeof(W) / sizeof(T)); i++) a[i] = Op<T>::divide(a[i], n);
}

/* ---- ranges shared by the kernels ------------------------------------------------- */

/* Rank r's share [*b, *e) of n units, each share starting at a multiple of
 * `align` units. */
static __device__ __forceinline__ void shareOf(uint64_t n, int nranks, int r, uint64_t align, uint64_t* b,
                                               uint64_t* e) {
  uint64_t per = (n + nranks - 1) / nranks;
  per = (per + align - 1) / align * align;
  uint64_t lo = per * (uint64_t)r, hi = lo + per;
  *b = lo < n ? lo : n;
  *e = hi < n ? hi : n;
}

/* dst[d][i] = op over r < nsrc of src[r][i] (in src order), for i < count
 * elements, then /nranks for avg; vectorized when `vec`. */
template <typename T>
static __device__ void reduceToAll(uint8_t* const* dst, int ndst, const uint8_t* const* src, int nsrc, uint64_t count,
                                   int op, int nranks, int vec, uint64_t tid, uint64_t nthreads) {
  uint64_t done = 0;
  if (vec) {
    const uint64_t per = 16 / sizeof(T);
    uint64_t nv = count / per;
    uint64_t i = tid;
    for (; i + nthreads < nv; i += 2 * nthreads) { /* two vectors in flight per thread */
      uint4 a0 = ((const uint4*)src[0])[i], a1 = ((const uint4*)src[0])[i + nthreads];
      for (int r = 1; r < nsrc; r++) {
        uint4 v0 = ((const uint4*)src[r])[i], v1 = ((const uint4*)src[r])[i + nthreads];
        wordApply<T, uint4>(a0, v0, op);
        wordApply<T, uint4>(a1, v1, op);
      }
      if (op == mscclppAvg) {
        wordDivide<T, uint4>(a0, nranks);
        wordDivide<T, uint4>(a1, nranks);
      }
      for (int d = 0; d < ndst; d++) {
        ((uint4*)dst[d])[i] = a0;
        ((uint4*)dst[d])[i + nthreads] = a1;
      }
    }
    for (; i < nv; i += nthreads) {
      uint4 acc = ((const uint4*)src[0])[i];
      for (int r = 1; r < nsrc; r++) {
        uint4 v = ((const uint4*)src[r])[i];
        wordApply<T, uint4>(acc, v, op);
      }
      if (op == mscclppAvg) wordDivide<T, uint4>(acc, nranks);
      for (int d = 0; d < ndst; d++) ((uint4*)dst[d])[i] = acc;
    }
    done = nv * per;
  }
  for (uint64_t i = done + tid; i < count; i += nthreads) {
    T acc = ((const T*)src[0])[i];
    for (int r = 1; r < nsrc; r++) acc = Op<T>::apply(acc, ((const T*)src[r])[i], op);
    if (op == mscclppAvg) acc = Op<T>::divide(acc, nranks);
    for (int d = 0; d < ndst; d++) ((T*)dst[d])[i] = acc;
  }
}

#endif /* MSCCLPP_SRC_COLL_COLL_OPS_CUH_ */
