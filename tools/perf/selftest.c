/* SPDX-License-Identifier: MIT */
/* mscclpp-perf --selftest: the oracle's own arithmetic (tools/oracle/). */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fpconv.h"
#include "perf.h"

/* The codec (core/fpconv.h) on bit patterns of the small type t. */
static uint32_t enc(int t, double v) {
  uint32_t bits = 0;
  (void)mscclppFloatEncode((mscclppDataType_t)t, v, &bits); /* little endian: the low bytes */
  return bits;
}
static double dec(int t, uint32_t bits) { return mscclppFloatDecode((mscclppDataType_t)t, &bits); }

/* The largest finite code of t with the sign of `bits` (fp8 saturates to it). */
static uint32_t satFinite(int t, uint32_t bits) {
  int eb = oracleTypes[t].ebits, mb = oracleTypes[t].mbits;
  uint32_t sign = bits & (1u << (eb + mb));
  return sign | (oracleTypes[t].fn ? 0x7eu : (((1u << eb) - 1) << mb) - 1);
}

int selfTest(void) {
  int fails = 0;
  static const int minis[4] = {mscclppFloat16, mscclppBfloat16, mscclppFloat8e4m3, mscclppFloat8e5m2};
  for (int k = 0; k < 4; k++) {
    int t = minis[k], eb = oracleTypes[t].ebits, mb = oracleTypes[t].mbits;
    int saturates = t == mscclppFloat8e4m3 || t == mscclppFloat8e5m2;
    uint32_t npat = 1u << (eb + mb + 1);
    for (uint32_t p = 0; p < npat; p++) {
      double v = dec(t, p);
      if (v != v) continue;
      /* every value comes back; an fp8 infinity saturates (e5m2 has them) */
      uint32_t back = saturates && v - v != 0 ? satFinite(t, p) : p;
      if (enc(t, v) != back) {
        if (fails++ < 10) fprintf(stderr, "selftest: %s 0x%x -> %g -> 0x%x\n", typeName(t), p, v, enc(t, v));
      }
      /* ties to even, and just off the midpoint, between p and p + 1 (positive, finite) */
      uint32_t q = p + 1;
      if ((p >> (eb + mb)) != 0 || q >= npat / 2) continue;
      double w = dec(t, q);
      if (w != w || w - w != 0) continue;
      double mid = (v + w) / 2, eps = (w - v) / 1024;
      uint32_t even = (p & 1) ? q : p;
      if (enc(t, mid) != even || enc(t, mid - eps) != p || enc(t, mid + eps) != q) {
        if (fails++ < 10) fprintf(stderr, "selftest: %s rounding between 0x%x and 0x%x wrong\n", typeName(t), p, q);
      }
    }
  }
  static const struct {
    int type;
    double v;
    uint32_t bits;
  } known[] = {{mscclppFloat16, 1.0, 0x3c00},       {mscclppFloat16, -2.0, 0xc000},
               {mscclppFloat16, 65504.0, 0x7bff},   {mscclppFloat16, 65520.0, 0x7c00},
               {mscclppFloat16, 0x1p-24, 0x0001},   {mscclppFloat16, 0x1p-25, 0x0000},
               {mscclppFloat16, 0.1, 0x2e66},       {mscclppBfloat16, 1.0, 0x3f80},
               {mscclppBfloat16, 3.140625, 0x4049}, {mscclppBfloat16, -0.5, 0xbf00},
               {mscclppFloat8e4m3, 1.0, 0x38},      {mscclppFloat8e4m3, 448.0, 0x7e},
               {mscclppFloat8e4m3, -0x1p-9, 0x81},  {mscclppFloat8e5m2, 1.0, 0x3c},
               {mscclppFloat8e5m2, 57344.0, 0x7b},  {mscclppFloat8e5m2, -0x1p-16, 0x81},
               /* overflow: float16 and bfloat16 round to infinity, fp8 saturates (fpconv.h) */
               {mscclppFloat16, -1e6, 0xfc00},      {mscclppBfloat16, 0x1p128, 0x7f80},
               {mscclppFloat8e4m3, 480.0, 0x7e},    {mscclppFloat8e4m3, -1e9, 0xfe},
               {mscclppFloat8e5m2, 65536.0, 0x7b},  {mscclppFloat8e5m2, -1e9, 0xfb}};
  for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
    int t = known[i].type;
    uint32_t got = enc(t, known[i].v);
    if (got != known[i].bits && fails++ < 20)
      fprintf(stderr, "selftest: %s(%g) = 0x%x, expected 0x%x\n", typeName(t), known[i].v, got, known[i].bits);
  }
  /* bfloat16 against the usual bit trick on float32 */
  uint64_t h = 1;
  for (int i = 0; i < 200000; i++) {
    h = oracleMix(h);
    uint32_t u = (uint32_t)h;
    float f;
    memcpy(&f, &u, sizeof(f));
    if (f != f) continue;
    uint32_t ref = (u + 0x7fffu + ((u >> 16) & 1)) >> 16;
    if ((ref & 0x7f80) == 0x7f80 && (u & 0x7f800000) != 0x7f800000) ref &= 0xff80; /* overflow: infinity */
    uint32_t got = enc(mscclppBfloat16, f);
    if (got != ref && fails++ < 30) fprintf(stderr, "selftest: bfloat16(0x%08x) = 0x%x, expected 0x%x\n", u, got, ref);
  }
  /* The generated inputs reduce exactly in any order, rounding to the type
   * after every step: ORACLE_WIDE at any rank count (avg within 1 ulp),
   * ORACLE_SMALL at up to 8 ranks bitwise, its avg divided in double and
   * in float (as a kernel on a 16- or 8-bit type does) alike. */
  static const int nranksList[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 33};
  static const struct {
    enum oracleShape shape;
    int maxRanks;
  } shapes[] = {{ORACLE_WIDE, 64}, {ORACLE_SMALL, 8}};
  for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++) {
    for (size_t ni = 0; ni < sizeof(nranksList) / sizeof(nranksList[0]); ni++) {
      int n = nranksList[ni];
      int order[64];
      if (n > shapes[si].maxRanks) continue;
      for (int t = 0; t < mscclppNumTypes; t++) {
        for (int op = 0; op < mscclppNumOps; op++) {
          struct oracleCall g;
          oracleInit(&g, shapes[si].shape, t, op, n, oracleMix((uint64_t)(si * 10000 + n * 100 + t * 10 + op)));
          for (size_t idx = 0; idx < 3000; idx++) {
            for (int r = 0; r < n; r++) order[r] = r;
            for (int r = n - 1; r > 0; r--) {
              h = oracleMix(h);
              int j = (int)(h % (uint64_t)(r + 1)), x = order[r];
              order[r] = order[j];
              order[j] = x;
            }
            struct oracleNum acc = oracleValue(&g, order[0], idx);
            for (int r = 1; r < n; r++) acc = oracleRound(t, oracleApply(op, acc, oracleValue(&g, order[r], idx)));
            struct oracleNum inFloat = acc;
            if (op == mscclppAvg) {
              if (g.shape == ORACLE_SMALL && t != mscclppFloat64) inFloat.d = (double)((float)acc.d / (float)n);
              else inFloat.d = acc.d / n;
              acc.s /= n;
              acc.u /= (uint64_t)n;
              acc.d /= n;
              inFloat.s = acc.s;
              inFloat.u = acc.u;
            }
            unsigned char got[8], gotFloat[8], exp[8];
            oraclePut(t, acc, got);
            oraclePut(t, inFloat, gotFloat);
            oracleReduced(&g, idx, exp);
            if ((oracleWrong(&g, got, exp) || oracleWrong(&g, gotFloat, exp)) && fails++ < 40)
              fprintf(stderr,
                      "selftest: %s %s %s %d ranks index %zu: 0x%" PRIx64 " (avg in float: 0x%" PRIx64
                      ") in some order, expected 0x%" PRIx64 "\n",
                      g.shape == ORACLE_SMALL ? "small" : "wide", typeName(t), opNames[op], n, idx,
                      oracleBits(t, got), oracleBits(t, gotFloat), oracleBits(t, exp));
          }
        }
      }
    }
  }
  /* Ranges of a periodic shape (filled by copying) are its elements. */
  {
    struct oracleCall g;
    const size_t first = 7, cnt = 2 * ORACLE_PERIOD + 11;
    oracleInit(&g, ORACLE_SMALL, mscclppInt32, mscclppSum, 3, 99);
    int32_t* range = malloc(cnt * sizeof(int32_t));
    int32_t* sums = malloc(cnt * sizeof(int32_t));
    if (range == NULL || sums == NULL) {
      fails++;
    } else {
      oracleInputs(&g, 2, first, cnt, range);
      oracleReductions(&g, first, cnt, sums);
      for (size_t i = 0; i < cnt; i++) {
        int32_t one, sum;
        oracleInput(&g, 2, first + i, &one);
        oracleReduced(&g, first + i, &sum);
        if ((one != range[i] || sum != sums[i]) && fails++ < 50)
          fprintf(stderr, "selftest: a periodic range's element %zu differs from the element itself\n", i);
      }
    }
    free(range);
    free(sums);
  }
  printf("selftest: %s (%d failures)\n", fails ? "FAILED" : "OK", fails);
  return fails ? EXIT_FAIL : 0;
}
