/* SPDX-License-Identifier: MIT */
/*
 * The host backend's element conversions and operators (coll_host_reduce.h),
 * checked against an independent reference: every finite value of each
 * format is enumerated (exactly, in double), and float inputs -- every
 * representable value, every midpoint between neighbours and the floats
 * just beside it, random floats, out-of-range values -- must convert to the
 * nearest one, ties to the even code; overflow goes to infinity (float16,
 * bfloat16) or saturates (fp8, CUDA's satfinite). Then a few operator cases
 * (wrap-around, NaN in max/min, rounding at each step, avg).
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coll/host/coll_host_reduce.h"
#include "harness.h"

struct format {
  const char* name;
  int bits;           /* 16 or 8 */
  uint32_t maxFinite; /* largest finite positive code */
  uint32_t overflow;  /* code for values past the top (inf, or maxFinite when saturating) */
  int saturates;
  float (*decode)(uint32_t);
  uint32_t (*encode)(float);
};

static float decHalf(uint32_t c) { return mscclppHalfToFloat((uint16_t)c); }
static uint32_t encHalf(float f) { return mscclppFloatToHalf(f); }
static float decBf16(uint32_t c) { return mscclppBf16ToFloat((uint16_t)c); }
static uint32_t encBf16(float f) { return mscclppFloatToBf16(f); }
static float decE4m3(uint32_t c) { return mscclppFp8e4m3ToFloat((uint8_t)c); }
static uint32_t encE4m3(float f) { return mscclppFloatToFp8e4m3(f); }
static float decE5m2(uint32_t c) { return mscclppFp8e5m2ToFloat((uint8_t)c); }
static uint32_t encE5m2(float f) { return mscclppFloatToFp8e5m2(f); }

static const struct format formats[] = {
    {"float16", 16, 0x7bff, 0x7c00, 0, decHalf, encHalf},
    {"bfloat16", 16, 0x7f7f, 0x7f80, 0, decBf16, encBf16},
    {"fp8e4m3", 8, 0x7e, 0x7e, 1, decE4m3, encE4m3},
    {"fp8e5m2", 8, 0x7b, 0x7b, 1, decE5m2, encE5m2},
};

/* Candidate values (positive codes 0..maxFinite, plus the overflow value
 * for non-saturating formats: the next power of two) in double. */
static double cand[0x8000];
static uint32_t candCode[0x8000];
static int ncand;

static int failures;

static void build(const struct format* f) {
  ncand = 0;
  for (uint32_t c = 0; c <= f->maxFinite; c++) {
    cand[ncand] = (double)f->decode(c);
    candCode[ncand++] = c;
  }
  if (!f->saturates) {
    cand[ncand] = 2.0 * (cand[ncand - 1] + (cand[ncand - 1] - cand[ncand - 2])) / 2.0; /* max + ulp = 2^(emax+1) */
    candCode[ncand++] = f->overflow;
  }
}

/* Nearest candidate of x >= 0, ties to the even code. */
static uint32_t reference(double x) {
  if (x >= cand[ncand - 1]) return candCode[ncand - 1];
  int lo = 0, hi = ncand - 1; /* cand[lo] <= x < cand[hi] */
  while (hi - lo > 1) {
    int mid = (lo + hi) / 2;
    if (cand[mid] <= x)
      lo = mid;
    else
      hi = mid;
  }
  double dl = x - cand[lo], dh = cand[hi] - x;
  if (dl < dh) return candCode[lo];
  if (dh < dl) return candCode[hi];
  return (candCode[lo] & 1) ? candCode[hi] : candCode[lo];
}

static void checkOne(const struct format* f, float x) {
  uint32_t want = reference((double)x), got = f->encode(x);
  uint32_t signBit = f->bits == 16 ? 0x8000u : 0x80u;
  uint32_t gotNeg = f->encode(-x);
  if (got != want || gotNeg != (want | signBit)) {
    if (failures++ < 10)
      fprintf(stderr, "%s: encode(%a) = 0x%x (of -x: 0x%x), expected 0x%x\n", f->name, (double)x, got, gotNeg, want);
  }
}

static void testConversions(void) {
  uint64_t rng = 88172645463325252ull;
  for (size_t k = 0; k < sizeof(formats) / sizeof(formats[0]); k++) {
    const struct format* f = &formats[k];
    failures = 0;
    build(f);
    /* every code decodes and encodes back (NaN aside) */
    uint32_t ncodes = 1u << f->bits;
    for (uint32_t c = 0; c < ncodes; c++) {
      float v = f->decode(c);
      if (isnan(v) || (isinf(v) && f->saturates)) continue; /* satfinite: inf -> max */
      if (f->encode(v) != c && failures++ < 10)
        fprintf(stderr, "%s: code 0x%x -> %a -> 0x%x\n", f->name, c, (double)v, f->encode(v));
    }
    /* values, midpoints, their neighbours */
    for (int i = 0; i + 1 < ncand; i++) {
      float a = (float)cand[i], m = (float)((cand[i] + cand[i + 1]) / 2);
      if ((double)m != (cand[i] + cand[i + 1]) / 2) continue; /* not a float (never, for these formats) */
      checkOne(f, a);
      checkOne(f, m);
      checkOne(f, nextafterf(m, 0.0f));
      checkOne(f, nextafterf(m, INFINITY));
    }
    /* random floats over the whole range, and far past the top */
    for (int i = 0; i < 200000; i++) {
      rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
      uint32_t bits = (uint32_t)rng & 0x7f7fffffu;
      float x;
      memcpy(&x, &bits, sizeof(x));
      checkOne(f, x);
    }
    checkOne(f, 1e30f);
    checkOne(f, FLT_MAX);
    /* specials */
    uint32_t signBit = f->bits == 16 ? 0x8000u : 0x80u;
    CHECK(f->encode(INFINITY) == f->overflow);
    CHECK(f->encode(-INFINITY) == (f->overflow | signBit));
    CHECK(isnan(f->decode(f->encode(NAN))));
    CHECK(f->encode(-0.0f) == signBit);
    CHECK(failures == 0);
  }
  CHECK(mscclppFloatToHalf(NAN) == 0x7fff);
  CHECK(mscclppFloatToBf16(NAN) == 0x7fff);
  CHECK(mscclppFloatToFp8e4m3(NAN) == 0x7f);
  CHECK(mscclppFloatToFp8e5m2(NAN) == 0x7f);
  CHECK(isnan(mscclppFp8e4m3ToFloat(0x7f)) && isnan(mscclppFp8e4m3ToFloat(0xff)));
  CHECK(mscclppFp8e4m3ToFloat(0x7e) == 448.0f);
  CHECK(mscclppFp8e5m2ToFloat(0x7b) == 57344.0f);
  CHECK(isinf(mscclppFp8e5m2ToFloat(0x7c)) && isnan(mscclppFp8e5m2ToFloat(0x7d)));
  CHECK(isinf(mscclppHalfToFloat(0x7c00)) && isnan(mscclppHalfToFloat(0x7c01)));
  CHECK(mscclppHalfToFloat(0x0001) == 0x1p-24f);
  CHECK(mscclppFp8e4m3ToFloat(0x01) == 0x1p-9f);
  CHECK(mscclppFp8e5m2ToFloat(0x01) == 0x1p-16f);
  CHECK(mscclppFloatToHalf(65520.0f) == 0x7c00); /* the midpoint past 65504 rounds to infinity */
  CHECK(mscclppFloatToHalf(65519.0f) == 0x7bff);
  CHECK(mscclppFloatToFp8e4m3(500.0f) == 0x7e);
}

static void testOperators(void) {
  int8_t a8[2] = {100, -128}, b8[2] = {100, -1};
  mscclppHostReduceFnOf(mscclppInt8, mscclppSum)(a8, b8, 2);
  CHECK(a8[0] == -56 && a8[1] == 127); /* wrap-around */
  uint8_t u[1] = {16}, v[1] = {16};
  mscclppHostReduceFnOf(mscclppUint8, mscclppProd)(u, v, 1);
  CHECK(u[0] == 0);
  int32_t s[2] = {-5, 3}, t[2] = {2, -9};
  mscclppHostReduceFnOf(mscclppInt32, mscclppMax)(s, t, 2);
  CHECK(s[0] == 2 && s[1] == 3);
  mscclppHostReduceFnOf(mscclppInt32, mscclppMin)(s, t, 2);
  CHECK(s[0] == 2 && s[1] == -9);
  uint64_t big[1] = {~0ull}, one[1] = {1};
  mscclppHostReduceFnOf(mscclppUint64, mscclppAvg)(big, one, 1); /* avg reduces as sum */
  CHECK(big[0] == 0);
  int8_t d8[2] = {-7, 7};
  mscclppHostDivideFnOf(mscclppInt8)(d8, 2, 2);
  CHECK(d8[0] == -3 && d8[1] == 3); /* truncating */
  float f[2] = {NAN, 1.0f}, g[2] = {1.0f, NAN};
  mscclppHostReduceFnOf(mscclppFloat32, mscclppMax)(f, g, 2);
  CHECK(isnan(f[0]) && isnan(f[1]));
  uint16_t h[2] = {mscclppFloatToHalf(2048.0f), mscclppFloatToHalf(2048.0f)};
  uint16_t k[2] = {mscclppFloatToHalf(1.0f), mscclppFloatToHalf(3.0f)};
  mscclppHostReduceFnOf(mscclppFloat16, mscclppSum)(h, k, 2);
  CHECK(mscclppHalfToFloat(h[0]) == 2048.0f && mscclppHalfToFloat(h[1]) == 2052.0f); /* rounded each step */
  uint16_t bh[1] = {mscclppFloatToBf16(3.0f)};
  mscclppHostDivideFnOf(mscclppBfloat16)(bh, 1, 3);
  CHECK(bh[0] == mscclppFloatToBf16(1.0f));
  uint8_t e[1] = {mscclppFloatToFp8e4m3(448.0f)}, e2[1] = {mscclppFloatToFp8e4m3(448.0f)};
  mscclppHostReduceFnOf(mscclppFloat8e4m3, mscclppSum)(e, e2, 1);
  CHECK(e[0] == 0x7e); /* saturates */
  double x[1] = {0.1}, y[1] = {0.2};
  mscclppHostReduceFnOf(mscclppFloat64, mscclppSum)(x, y, 1);
  CHECK(x[0] == 0.1 + 0.2);
  CHECK(mscclppHostReduceFnOf(mscclppNumTypes, mscclppSum) == NULL);
  CHECK(mscclppHostReduceFnOf(mscclppInt8, mscclppNumOps) == NULL);
}

int main(void) {
  RUN(testConversions);
  RUN(testOperators);
  return harnessFinish();
}
