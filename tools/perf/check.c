/* SPDX-License-Identifier: MIT */
/* mscclpp-perf: the checked inputs and their expected results (rules: main.c). */
#include <stdint.h>
#include <string.h>

#include "core/fpconv.h"
#include "perf.h"

/* ---- element bytes <-> numbers (floating point: the codec of core/fpconv.h) -- */

uint64_t rawBits(int t, const void* src) {
  uint64_t u = 0;
  memcpy(&u, src, mscclppDataTypeSize(t)); /* little endian */
  return u;
}

/* Signed distance in units in the last place: bits mapped to a line on which
 * neighbouring values are neighbouring integers (-0 and +0 both 0). */
static int64_t ordered(int t, const void* src) {
  uint64_t u = rawBits(t, src);
  int bits = (int)mscclppDataTypeSize(t) * 8;
  uint64_t signBit = UINT64_C(1) << (bits - 1);
  int64_t mag = (int64_t)(u & (signBit - 1));
  return (u & signBit) ? -mag : mag;
}

static void putInt(int t, int64_t s, uint64_t u, void* dst) {
  uint64_t v = types[t].cls == CLS_INT ? (uint64_t)s : u;
  memcpy(dst, &v, mscclppDataTypeSize(t)); /* little endian: the low bytes */
}

/* ---- input generation ------------------------------------------------------- */

uint64_t mix64(uint64_t x) { /* splitmix64's finalizer */
  x += UINT64_C(0x9e3779b97f4a7c15);
  x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
  return x ^ (x >> 31);
}



void genInit(struct gen* g, enum coll c, int type, int op, int nranks, int rank, int root, uint64_t seed) {
  memset(g, 0, sizeof(*g));
  g->coll = c;
  g->type = type;
  g->op = colls[c].reduces ? op : -1;
  g->nranks = nranks;
  g->rank = rank;
  g->root = root;
  g->seed = seed;
  g->ts = mscclppDataTypeSize(type);
  g->sumActive = nranks < SUM_ACTIVE_MAX ? nranks : SUM_ACTIVE_MAX;
  g->prodActive = nranks < PROD_ACTIVE_MAX ? nranks : PROD_ACTIVE_MAX;
  int bits = (int)g->ts * 8;
  uint64_t umax = bits == 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
  g->uLimit = umax / (uint64_t)g->sumActive;
  g->sLimit = (int64_t)((umax >> 1) / (uint64_t)g->sumActive);
  if (types[type].cls == CLS_FLT) {
    int m = types[type].mbits;
    int64_t exact = m + 1 >= 62 ? INT64_C(1) << 53 : INT64_C(1) << (m + 1);
    g->fLimit = exact / g->sumActive;
    if (g->fLimit > (INT64_C(1) << 20)) g->fLimit = INT64_C(1) << 20;
  }
}

/* Does rank r contribute a value other than the identity at index idx? */
static int active(const struct gen* g, int r, size_t idx, int nActive) {
  size_t n = (size_t)g->nranks;
  return ((size_t)r + n - idx % n) % n < (size_t)nActive;
}

/* A random finite floating-point value of the type, never -0. */
static double randomFloat(int t, uint64_t h) {
  int bits = (int)mscclppDataTypeSize(t) * 8;
  uint64_t u = bits == 64 ? h : h & ((UINT64_C(1) << bits) - 1);
  int eb = types[t].ebits, mb = types[t].mbits;
  uint64_t expMask = ((UINT64_C(1) << eb) - 1) << mb;
  if (types[t].fn) {
    if ((u & 0x7f) == 0x7f) u &= ~UINT64_C(1); /* NaN -> 448 */
  } else if ((u & expMask) == expMask) {
    u &= ~(UINT64_C(1) << (eb + mb - 1)); /* inf/NaN -> the top exponent bit cleared */
  }
  double d = mscclppFloatDecode((mscclppDataType_t)t, &u); /* little endian: the low bytes */
  return d == 0 ? 0.0 : d;
}

/* Rank r's input value at index idx, for a reduction. */
struct num genValue(const struct gen* g, int r, size_t idx) {
  struct num v = {0, 0, 0.0};
  uint64_t h = mix64(g->seed ^ mix64(((uint64_t)(uint32_t)r << 40) ^ (uint64_t)idx));
  enum cls cls = types[g->type].cls;
  int bits = (int)g->ts * 8;
  switch (g->op) {
    case mscclppSum:
    case mscclppAvg:
      if (!active(g, r, idx, g->sumActive)) break;
      if (cls == CLS_INT) v.s = (int64_t)(h % (2 * (uint64_t)g->sLimit + 1) - (uint64_t)g->sLimit);
      else if (cls == CLS_UINT) v.u = g->uLimit == UINT64_MAX ? h : h % (g->uLimit + 1);
      else v.d = (double)((int64_t)(h % (2 * (uint64_t)g->fLimit + 1)) - g->fLimit);
      break;
    case mscclppProd:
      v.s = 1;
      v.u = 1;
      v.d = 1.0;
      if (!active(g, r, idx, g->prodActive)) break;
      if (cls == CLS_INT) {
        static const int64_t f[4] = {-2, -1, 1, 2};
        v.s = f[h & 3];
      } else if (cls == CLS_UINT) {
        v.u = 1 + (h & 1);
      } else {
        static const double f[6] = {-2.0, -1.0, -0.5, 0.5, 1.0, 2.0};
        v.d = f[h % 6];
      }
      break;
    default: /* max, min: anything */
      if (cls == CLS_INT) {
        uint64_t u = bits == 64 ? h : h & ((UINT64_C(1) << bits) - 1);
        uint64_t signBit = UINT64_C(1) << (bits - 1);
        v.s = bits == 64 ? (int64_t)h : (u & signBit) ? (int64_t)(u | ~((signBit << 1) - 1)) : (int64_t)u;
      } else if (cls == CLS_UINT) {
        v.u = bits == 64 ? h : h & ((UINT64_C(1) << bits) - 1);
      } else {
        v.d = randomFloat(g->type, h);
      }
      break;
  }
  return v;
}

void putNum(int t, struct num v, void* dst) {
  if (types[t].cls == CLS_FLT) (void)mscclppFloatEncode((mscclppDataType_t)t, v.d, dst);
  else putInt(t, v.s, v.u, dst);
}

/* Rank r's input element idx, as bytes. */
void genElem(const struct gen* g, int r, size_t idx, void* dst) {
  if (g->op < 0) { /* copy: random bits */
    uint64_t h = mix64(g->seed ^ mix64(((uint64_t)(uint32_t)r << 40) ^ (uint64_t)idx));
    memcpy(dst, &h, g->ts);
    return;
  }
  putNum(g->type, genValue(g, r, idx), dst);
}

void genRange(const struct gen* g, int r, size_t first, size_t n, unsigned char* dst) {
  for (size_t k = 0; k < n; k++) genElem(g, r, first + k, dst + k * g->ts);
}

/* acc op v in each of the three views (signed integers wrap around, as the
 * collectives' integer operators do). */
struct num numApply(int op, struct num acc, struct num v) {
  switch (op) {
    case mscclppSum:
    case mscclppAvg:
      acc.s = (int64_t)((uint64_t)acc.s + (uint64_t)v.s);
      acc.u += v.u;
      acc.d += v.d;
      break;
    case mscclppProd:
      acc.s = (int64_t)((uint64_t)acc.s * (uint64_t)v.s);
      acc.u *= v.u;
      acc.d *= v.d;
      break;
    case mscclppMax:
      if (v.s > acc.s) acc.s = v.s;
      if (v.u > acc.u) acc.u = v.u;
      if (v.d > acc.d) acc.d = v.d;
      break;
    default:
      if (v.s < acc.s) acc.s = v.s;
      if (v.u < acc.u) acc.u = v.u;
      if (v.d < acc.d) acc.d = v.d;
      break;
  }
  return acc;
}

/* The exact reduction over all ranks of input index idx, as bytes. */
void reduceElem(const struct gen* g, size_t idx, void* dst) {
  enum cls cls = types[g->type].cls;
  struct num acc = genValue(g, 0, idx);
  for (int r = 1; r < g->nranks; r++) acc = numApply(g->op, acc, genValue(g, r, idx));
  if (g->op == mscclppAvg) {
    if (cls == CLS_INT) acc.s /= g->nranks;
    else if (cls == CLS_UINT) acc.u /= (uint64_t)g->nranks;
    else acc.d /= g->nranks;
  }
  putNum(g->type, acc, dst);
}

/* 1 when `got` is not an acceptable result for `exp`. */
int elemWrong(const struct gen* g, const void* got, const void* exp) {
  if (g->op < 0 || types[g->type].cls != CLS_FLT) return memcmp(got, exp, g->ts) != 0;
  if (g->op == mscclppAvg) {
    double dg = mscclppFloatDecode((mscclppDataType_t)g->type, got);
    if (dg != dg) return 1; /* NaN */
    int64_t d = ordered(g->type, got) - ordered(g->type, exp);
    return d > 1 || d < -1;
  }
  double dg = mscclppFloatDecode((mscclppDataType_t)g->type, got), de = mscclppFloatDecode((mscclppDataType_t)g->type, exp);
  return !(dg == de);
}

/* ---- alltoallv's counts ----------------------------------------------------- */

/* n - 1 random cuts of [0, count] give the parts; on half the calls one
 * part is merged into the next, so a pair sends nothing even at large
 * sizes. */
void a2avParts(uint64_t seed, int n, size_t count, size_t* part, int* shift) {
  uint64_t h = mix64(seed ^ UINT64_C(0xa2a7a2a7));
  *shift = (int)(h % (uint64_t)n);
  /* the cuts, sorted (insertion: n is small), in part[0..n-2] */
  for (int j = 0; j < n - 1; j++) {
    size_t cut = (size_t)(mix64(h + (uint64_t)j + 1) % ((uint64_t)count + 1));
    int i = j;
    for (; i > 0 && part[i - 1] > cut; i--) part[i] = part[i - 1];
    part[i] = cut;
  }
  size_t prev = 0;
  for (int j = 0; j < n; j++) {
    size_t cut = j < n - 1 ? part[j] : count;
    part[j] = cut - prev;
    prev = cut;
  }
  if (n > 1 && (h >> 32) % 2 == 0) {
    int j = (int)((h >> 40) % (uint64_t)(n - 1));
    part[j + 1] += part[j];
    part[j] = 0;
  }
}

size_t a2avCount(const size_t* part, int shift, int n, int s, int d) { return part[((d - s + shift) % n + n) % n]; }

size_t a2avDispl(const size_t* part, int shift, int n, int s, int d) {
  size_t at = 0;
  for (int j = 0; j < d; j++) at += a2avCount(part, shift, n, s, j);
  return at;
}
