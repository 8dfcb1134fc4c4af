/* SPDX-License-Identifier: MIT */
/*
 * Element operators of the host backend (rules: coll_host_reduce.h). One
 * loop body (REDUCE_BODY) instantiated per (type, operator) by the X-macro
 * tables below; no per-type copy of an algorithm.
 */
#include "coll/host/coll_host_reduce.h"

#include <string.h>

/* ---- element operators ------------------------------------------------------------- */

/* Integers: N##Sum ... N##Div on the storage type T, wrapping in UT; DT is
 * the type the division is done in. */
#define INT_OPS(N, T, UT, DT)                                                    \
  static inline T N##Load(T x) { return x; }                                     \
  static inline T N##Store(T x) { return x; }                                    \
  static inline T N##Sum(T a, T b) { return (T)(UT)((UT)a + (UT)b); }            \
  static inline T N##Prod(T a, T b) { return (T)(UT)((UT)a * (UT)b); }           \
  static inline T N##Max(T a, T b) { return a > b ? a : b; }                     \
  static inline T N##Min(T a, T b) { return a < b ? a : b; }                     \
  static inline T N##Quot(T a, int n) { return (T)((DT)a / (DT)n); }

/* Floating point: the operators on the computation type A (NaN wins in
 * max/min), loads/stores convert from/to the storage type T. */
#define FLT_OPS(N, T, A, LOAD, STORE)                                             \
  static inline A N##Load(T x) { return LOAD(x); }                               \
  static inline T N##Store(A x) { return STORE(x); }                             \
  static inline A N##Sum(A a, A b) { return a + b; }                             \
  static inline A N##Prod(A a, A b) { return a * b; }                            \
  static inline A N##Max(A a, A b) { return a > b ? a : (b > a ? b : (a != a ? a : b)); } \
  static inline A N##Min(A a, A b) { return a < b ? a : (b < a ? b : (a != a ? a : b)); } \
  static inline A N##Quot(A a, int n) { return a / (A)n; }

#define IDENTITY(x) (x)

INT_OPS(i8, int8_t, uint8_t, int64_t)
INT_OPS(u8, uint8_t, uint8_t, uint64_t)
INT_OPS(i32, int32_t, uint32_t, int64_t)
INT_OPS(u32, uint32_t, uint32_t, uint64_t)
INT_OPS(i64, int64_t, uint64_t, int64_t)
INT_OPS(u64, uint64_t, uint64_t, uint64_t)
FLT_OPS(f16, uint16_t, float, mscclppHalfToFloat, mscclppFloatToHalf)
FLT_OPS(f32, float, float, IDENTITY, IDENTITY)
FLT_OPS(f64, double, double, IDENTITY, IDENTITY)
FLT_OPS(bf16, uint16_t, float, mscclppBf16ToFloat, mscclppFloatToBf16)
FLT_OPS(e4m3, uint8_t, float, mscclppFp8e4m3ToFloat, mscclppFloatToFp8e4m3)
FLT_OPS(e5m2, uint8_t, float, mscclppFp8e5m2ToFloat, mscclppFloatToFp8e5m2)

/* The one loop body, instantiated per (type N with storage T, operator OP). */
#define REDUCE_BODY(N, T, OP)                                                            \
  static void reduce_##N##_##OP(void* dstv, const void* srcv, size_t n) {                \
    T* restrict d = (T*)dstv;                                                            \
    const T* restrict s = (const T*)srcv;                                                \
    for (size_t i = 0; i < n; i++) d[i] = N##Store(N##OP(N##Load(d[i]), N##Load(s[i]))); \
  }
#define DIVIDE_BODY(N, T)                                                                \
  static void divide_##N(void* dstv, size_t n, int nranks) {                             \
    T* restrict d = (T*)dstv;                                                            \
    for (size_t i = 0; i < n; i++) d[i] = N##Store(N##Quot(N##Load(d[i]), nranks));     \
  }
#define INSTANTIATE(N, T) \
  REDUCE_BODY(N, T, Sum)  \
  REDUCE_BODY(N, T, Prod) \
  REDUCE_BODY(N, T, Max)  \
  REDUCE_BODY(N, T, Min)  \
  DIVIDE_BODY(N, T)

/* In mscclppDataType_t order. */
#define HOST_TYPES(X) \
  X(i8, int8_t)       \
  X(u8, uint8_t)      \
  X(i32, int32_t)     \
  X(u32, uint32_t)    \
  X(i64, int64_t)     \
  X(u64, uint64_t)    \
  X(f16, uint16_t)    \
  X(f32, float)       \
  X(f64, double)      \
  X(bf16, uint16_t)   \
  X(e4m3, uint8_t)    \
  X(e5m2, uint8_t)

HOST_TYPES(INSTANTIATE)

struct typeOps {
  mscclppHostReduceFn reduce[4]; /* sum, prod, max, min (mscclppRedOp_t order) */
  mscclppHostDivideFn divide;
};

#define TABLE_ROW(N, T) {{reduce_##N##_Sum, reduce_##N##_Prod, reduce_##N##_Max, reduce_##N##_Min}, divide_##N},
static const struct typeOps typeOpsTable[mscclppNumTypes] = {HOST_TYPES(TABLE_ROW)};

_Static_assert(sizeof(typeOpsTable) / sizeof(typeOpsTable[0]) == mscclppNumTypes, "one row per data type");
_Static_assert(mscclppSum == 0 && mscclppProd == 1 && mscclppMax == 2 && mscclppMin == 3 && mscclppAvg == 4,
               "reduce[] is indexed by mscclppRedOp_t");

mscclppHostReduceFn mscclppHostReduceFnOf(mscclppDataType_t type, mscclppRedOp_t op) {
  if ((unsigned)type >= mscclppNumTypes || (unsigned)op >= mscclppNumOps) return NULL;
  return typeOpsTable[type].reduce[op == mscclppAvg ? mscclppSum : op];
}

mscclppHostDivideFn mscclppHostDivideFnOf(mscclppDataType_t type) {
  return (unsigned)type < mscclppNumTypes ? typeOpsTable[type].divide : NULL;
}
