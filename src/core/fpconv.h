/* SPDX-License-Identifier: MIT */
/*
 * The one codec of the 16- and 8-bit floating-point types (float16,
 * bfloat16, fp8 e4m3 and e5m2) to and from float, in C, for the host
 * backend's reductions, the tests' and mscclpp-perf's expected values: what
 * the host backend computes and what a checker expects round the same way.
 *
 * Rounding: to nearest, ties to even, subnormals included (a double rounded
 * through float first rounds the same way: float keeps at least 2p+2 bits of
 * every target's p).
 * Overflow policy -- the GPU kernels' (coll_ops.cuh), which are those of
 * NCCL: float16 and bfloat16 sums go through __float2half_rn /
 * __float2bfloat16_rn (and __hadd), which round past the largest finite
 * value to infinity; fp8 results go through the __nv_fp8_e4m3/e5m2
 * constructors, which convert with __NV_SATFINITE:
 *  - float16: IEEE binary16; overflow rounds to infinity; NaN -> 0x7fff;
 *  - bfloat16: the top half of a float, rounded to nearest-even; overflow
 *    rounds to infinity; NaN -> 0x7fff;
 *  - fp8 e4m3 (OCP E4M3FN: bias 7, no infinity, NaN = S.1111.111, max 448)
 *    and e5m2 (bias 15, max 57344): out-of-range values and infinities
 *    saturate to the largest finite value of their sign; NaN -> 0x7f.
 * Decoding is exact (every value of these formats is a float).
 */
#ifndef MSCCLPP_SRC_CORE_FPCONV_H_
#define MSCCLPP_SRC_CORE_FPCONV_H_

#include <stdint.h>

#include "mscclpp/coll.h"

float mscclppHalfToFloat(uint16_t h);
uint16_t mscclppFloatToHalf(float f);
float mscclppBf16ToFloat(uint16_t h);
uint16_t mscclppFloatToBf16(float f);
float mscclppFp8e4m3ToFloat(uint8_t x);
uint8_t mscclppFloatToFp8e4m3(float f);
float mscclppFp8e5m2ToFloat(uint8_t x);
uint8_t mscclppFloatToFp8e5m2(float f);

/* Store v as one element of the floating-point type t at dst (float64
 * exactly, float32 by C's conversion, the others by the rules above).
 * Returns 0, or -1 (nothing written) when t is not a floating-point type. */
int mscclppFloatEncode(mscclppDataType_t t, double v, void* dst);

/* The value of the element of floating-point type t at src, or a NaN when t
 * is not a floating-point type. */
double mscclppFloatDecode(mscclppDataType_t t, const void* src);

#endif /* MSCCLPP_SRC_CORE_FPCONV_H_ */
