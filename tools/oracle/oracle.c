/* SPDX-License-Identifier: MIT */
/* The oracle of collective results (what it is and what it may use: oracle.h). */
#include "oracle.h"

#include <string.h>

#include "core/fpconv.h" /* the one floating-point codec; nothing of src/coll */

#define SUM_ACTIVE_MAX 8 /* ORACLE_WIDE: ranks with a non-zero sum input per index */
#define PROD_ACTIVE_MAX 6 /* ... with a product input other than 1 */

const struct oracleType oracleTypes[mscclppNumTypes] = {
    [mscclppInt8] = {1, ORACLE_INT, 0, 0, 0},
    [mscclppUint8] = {1, ORACLE_UINT, 0, 0, 0},
    [mscclppInt32] = {4, ORACLE_INT, 0, 0, 0},
    [mscclppUint32] = {4, ORACLE_UINT, 0, 0, 0},
    [mscclppInt64] = {8, ORACLE_INT, 0, 0, 0},
    [mscclppUint64] = {8, ORACLE_UINT, 0, 0, 0},
    [mscclppFloat16] = {2, ORACLE_FLT, 5, 10, 0},
    [mscclppFloat32] = {4, ORACLE_FLT, 8, 23, 0},
    [mscclppFloat64] = {8, ORACLE_FLT, 11, 52, 0},
    [mscclppBfloat16] = {2, ORACLE_FLT, 8, 7, 0},
    [mscclppFloat8e4m3] = {1, ORACLE_FLT, 4, 3, 1},
    [mscclppFloat8e5m2] = {1, ORACLE_FLT, 5, 2, 0},
};

/* ---- element bytes <-> numbers (floating point: the codec of core/fpconv.h) -- */

uint64_t oracleBits(int t, const void* src) {
  uint64_t u = 0;
  memcpy(&u, src, oracleTypes[t].size); /* little endian */
  return u;
}

/* Signed distance in units in the last place: bits mapped to a line on which
 * neighbouring values are neighbouring integers (-0 and +0 both 0). */
static int64_t ordered(int t, const void* src) {
  uint64_t u = oracleBits(t, src);
  int bits = (int)oracleTypes[t].size * 8;
  uint64_t signBit = UINT64_C(1) << (bits - 1);
  int64_t mag = (int64_t)(u & (signBit - 1));
  return (u & signBit) ? -mag : mag;
}

void oraclePut(int t, struct oracleNum v, void* dst) {
  if (oracleTypes[t].cls == ORACLE_FLT) {
    (void)mscclppFloatEncode((mscclppDataType_t)t, v.d, dst);
    return;
  }
  uint64_t w = oracleTypes[t].cls == ORACLE_INT ? (uint64_t)v.s : v.u;
  memcpy(dst, &w, oracleTypes[t].size); /* little endian: the low bytes */
}

struct oracleNum oracleRound(int t, struct oracleNum v) {
  unsigned char b[8];
  oraclePut(t, v, b);
  struct oracleNum r = {0, 0, 0.0};
  if (oracleTypes[t].cls == ORACLE_FLT) {
    r.d = mscclppFloatDecode((mscclppDataType_t)t, b);
    return r;
  }
  uint64_t u = oracleBits(t, b);
  int bits = (int)oracleTypes[t].size * 8;
  uint64_t signBit = UINT64_C(1) << (bits - 1);
  r.u = u;
  r.s = bits == 64 ? (int64_t)u : (u & signBit) ? (int64_t)(u | ~((signBit << 1) - 1)) : (int64_t)u;
  return r;
}

struct oracleNum oracleApply(int op, struct oracleNum acc, struct oracleNum v) {
  switch (op) {
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
    case mscclppMin:
      if (v.s < acc.s) acc.s = v.s;
      if (v.u < acc.u) acc.u = v.u;
      if (v.d < acc.d) acc.d = v.d;
      break;
    default: /* sum, avg (divided at the end), PreMulSum (scaled inputs) */
      acc.s = (int64_t)((uint64_t)acc.s + (uint64_t)v.s);
      acc.u += v.u;
      acc.d += v.d;
      break;
  }
  return acc;
}

static inline uint64_t mix(uint64_t x) { /* splitmix64's finalizer */
  x += UINT64_C(0x9e3779b97f4a7c15);
  x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
  return x ^ (x >> 31);
}

uint64_t oracleMix(uint64_t x) { return mix(x); }

/* ---- input generation ------------------------------------------------------- */

void oracleInit(struct oracleCall* g, enum oracleShape shape, int type, int op, int nranks, uint64_t seed) {
  memset(g, 0, sizeof(*g));
  g->shape = shape;
  g->type = type;
  g->op = op;
  g->nranks = nranks;
  g->seed = seed;
  g->ts = oracleTypes[type].size;
  g->sumActive = nranks < SUM_ACTIVE_MAX ? nranks : SUM_ACTIVE_MAX;
  g->prodActive = nranks < PROD_ACTIVE_MAX ? nranks : PROD_ACTIVE_MAX;
  int bits = (int)g->ts * 8;
  uint64_t umax = bits == 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
  g->uLimit = umax / (uint64_t)g->sumActive;
  g->sLimit = (int64_t)((umax >> 1) / (uint64_t)g->sumActive);
  if (oracleTypes[type].cls == ORACLE_FLT) {
    int m = oracleTypes[type].mbits;
    int64_t exact = m + 1 >= 62 ? INT64_C(1) << 53 : INT64_C(1) << (m + 1);
    g->fLimit = exact / g->sumActive;
    if (g->fLimit > (INT64_C(1) << 20)) g->fLimit = INT64_C(1) << 20;
  }
}

/* The hash of rank r's input at index idx. */
static uint64_t inputHash(const struct oracleCall* g, int r, size_t idx) {
  if (g->shape == ORACLE_SMALL) idx %= ORACLE_PERIOD;
  return mix(g->seed ^ mix(((uint64_t)(uint32_t)r << 40) ^ (uint64_t)idx));
}

/* Does rank r contribute a value other than the identity at index idx? */
static int active(const struct oracleCall* g, int r, size_t idx, int nActive) {
  size_t n = (size_t)g->nranks;
  return ((size_t)r + n - idx % n) % n < (size_t)nActive;
}

/* A random finite floating-point value of the type, never -0. */
static double randomFloat(int t, uint64_t h) {
  int bits = (int)oracleTypes[t].size * 8;
  uint64_t u = bits == 64 ? h : h & ((UINT64_C(1) << bits) - 1);
  int eb = oracleTypes[t].ebits, mb = oracleTypes[t].mbits;
  uint64_t expMask = ((UINT64_C(1) << eb) - 1) << mb;
  if (oracleTypes[t].fn) {
    if ((u & 0x7f) == 0x7f) u &= ~UINT64_C(1); /* NaN -> 448 */
  } else if ((u & expMask) == expMask) {
    u &= ~(UINT64_C(1) << (eb + mb - 1)); /* inf/NaN -> the top exponent bit cleared */
  }
  double d = mscclppFloatDecode((mscclppDataType_t)t, &u); /* little endian: the low bytes */
  return d == 0 ? 0.0 : d;
}

/* The integer x in all three views. */
static struct oracleNum whole(int64_t x) {
  struct oracleNum v = {x, (uint64_t)x, (double)x};
  return v;
}

static struct oracleNum wideValue(const struct oracleCall* g, int r, size_t idx, uint64_t h) {
  struct oracleNum v = {0, 0, 0.0};
  enum oracleClass cls = oracleTypes[g->type].cls;
  int bits = (int)g->ts * 8;
  switch (g->op) {
    case mscclppProd:
      v = whole(1);
      if (!active(g, r, idx, g->prodActive)) break;
      if (cls == ORACLE_INT) {
        static const int64_t f[4] = {-2, -1, 1, 2};
        v.s = f[h & 3];
      } else if (cls == ORACLE_UINT) {
        v.u = 1 + (h & 1);
      } else {
        static const double f[6] = {-2.0, -1.0, -0.5, 0.5, 1.0, 2.0};
        v.d = f[h % 6];
      }
      break;
    case mscclppMax:
    case mscclppMin: /* anything */
      if (cls == ORACLE_INT) {
        uint64_t u = bits == 64 ? h : h & ((UINT64_C(1) << bits) - 1);
        uint64_t signBit = UINT64_C(1) << (bits - 1);
        v.s = bits == 64 ? (int64_t)h : (u & signBit) ? (int64_t)(u | ~((signBit << 1) - 1)) : (int64_t)u;
      } else if (cls == ORACLE_UINT) {
        v.u = bits == 64 ? h : h & ((UINT64_C(1) << bits) - 1);
      } else {
        v.d = randomFloat(g->type, h);
      }
      break;
    default: /* sum, avg, PreMulSum */
      if (!active(g, r, idx, g->sumActive)) break;
      if (cls == ORACLE_INT) v.s = (int64_t)(h % (2 * (uint64_t)g->sLimit + 1) - (uint64_t)g->sLimit);
      else if (cls == ORACLE_UINT) v.u = g->uLimit == UINT64_MAX ? h : h % (g->uLimit + 1);
      else v.d = (double)((int64_t)(h % (2 * (uint64_t)g->fLimit + 1)) - g->fLimit);
      break;
  }
  return v;
}

static struct oracleNum smallValue(const struct oracleCall* g, uint64_t h) {
  int unsignedType = oracleTypes[g->type].cls == ORACLE_UINT;
  if (g->op == mscclppProd) {
    int64_t v = (h & 1) ? 2 : 1;
    return whole(!unsignedType && (h & 2) ? -v : v);
  }
  /* the range that keeps 8 ranks' sums exact in the type: fp8 e5m2 holds
   * the integers up to 8, e4m3 up to 16, the others well past 64 */
  uint64_t range = g->type == mscclppFloat8e5m2 ? 1 : g->type == mscclppFloat8e4m3 ? 2 : 8;
  if (unsignedType) return whole((int64_t)(h % (range + 1)));
  return whole((int64_t)(h % (2 * range + 1)) - (int64_t)range);
}

/* Rank r's input value at index idx, as the shape draws it. */
static struct oracleNum inputValue(const struct oracleCall* g, int r, size_t idx) {
  uint64_t h = inputHash(g, r, idx);
  return g->shape == ORACLE_SMALL ? smallValue(g, h) : wideValue(g, r, idx, h);
}

struct oracleNum oracleValue(const struct oracleCall* g, int r, size_t idx) {
  struct oracleNum v = inputValue(g, r, idx);
  if (g->op == ORACLE_PREMULSUM) { /* the input times the rank's scalar, as the type holds it */
    double s = g->scalars[r];
    v.s = (int64_t)((uint64_t)v.s * (uint64_t)(int64_t)s);
    v.u *= (uint64_t)s;
    v.d *= s;
    v = oracleRound(g->type, v);
  }
  return v;
}

void oracleInput(const struct oracleCall* g, int r, size_t idx, void* dst) {
  if (g->op == ORACLE_COPY) { /* random bits */
    uint64_t h = inputHash(g, r, idx);
    memcpy(dst, &h, g->ts);
    return;
  }
  oraclePut(g->type, inputValue(g, r, idx), dst);
}

/* dst[0, have) holds a whole number of periods: repeat it up to `bytes`,
 * doubling. */
static void repeat(unsigned char* dst, size_t have, size_t bytes) {
  while (have < bytes) {
    size_t c = bytes - have < have ? bytes - have : have;
    memcpy(dst + have, dst, c);
    have += c;
  }
}

/* The first period of a range (or all of it), then copies. */
static size_t directElems(const struct oracleCall* g, size_t n) {
  return g->shape == ORACLE_SMALL && n > ORACLE_PERIOD ? ORACLE_PERIOD : n;
}

void oracleInputs(const struct oracleCall* g, int r, size_t first, size_t n, void* dst) {
  unsigned char* d = dst;
  size_t direct = directElems(g, n);
  for (size_t k = 0; k < direct; k++) oracleInput(g, r, first + k, d + k * g->ts);
  repeat(d, direct * g->ts, n * g->ts);
}

void oracleReduced(const struct oracleCall* g, size_t idx, void* dst) {
  enum oracleClass cls = oracleTypes[g->type].cls;
  int op = g->op == ORACLE_PREMULSUM ? mscclppSum : g->op;
  struct oracleNum acc = oracleValue(g, 0, idx);
  for (int r = 1; r < g->nranks; r++) acc = oracleApply(op, acc, oracleValue(g, r, idx));
  if (op == mscclppAvg) { /* integers: the sum as the type wraps it, truncated; floats: rounded once */
    if (cls != ORACLE_FLT) acc = oracleRound(g->type, acc);
    if (cls == ORACLE_INT) acc.s /= g->nranks;
    else if (cls == ORACLE_UINT) acc.u /= (uint64_t)g->nranks;
    else acc.d /= g->nranks;
  }
  oraclePut(g->type, acc, dst);
}

void oracleReductions(const struct oracleCall* g, size_t first, size_t n, void* dst) {
  unsigned char* d = dst;
  size_t direct = directElems(g, n);
  for (size_t k = 0; k < direct; k++) oracleReduced(g, first + k, d + k * g->ts);
  repeat(d, direct * g->ts, n * g->ts);
}

int oracleWrong(const struct oracleCall* g, const void* got, const void* exp) {
  if (g->shape != ORACLE_WIDE || g->op == ORACLE_COPY || oracleTypes[g->type].cls != ORACLE_FLT)
    return memcmp(got, exp, g->ts) != 0;
  double dg = mscclppFloatDecode((mscclppDataType_t)g->type, got);
  if (g->op == mscclppAvg) {
    if (dg != dg) return 1; /* NaN */
    int64_t d = ordered(g->type, got) - ordered(g->type, exp);
    return d > 1 || d < -1;
  }
  return !(dg == mscclppFloatDecode((mscclppDataType_t)g->type, exp));
}

/* ---- collectives ------------------------------------------------------------ */

size_t oracleInElems(enum oracleColl c, size_t count, int nranks) {
  return c == ORACLE_REDUCESCATTER || c == ORACLE_ALLTOALL || c == ORACLE_SCATTER ? count * (size_t)nranks : count;
}

size_t oracleOutElems(enum oracleColl c, size_t count, int nranks) {
  return c == ORACLE_ALLGATHER || c == ORACLE_ALLTOALL || c == ORACLE_GATHER ? count * (size_t)nranks : count;
}

void oracleExpected(const struct oracleCall* g, enum oracleColl c, int rank, int root, size_t count, void* dst) {
  unsigned char* d = dst;
  const size_t block = count * g->ts;
  switch (c) {
    case ORACLE_ALLREDUCE:
    case ORACLE_REDUCE:
      oracleReductions(g, 0, count, d);
      break;
    case ORACLE_REDUCESCATTER: /* block `rank` of the reduction */
      oracleReductions(g, (size_t)rank * count, count, d);
      break;
    case ORACLE_BROADCAST:
      oracleInputs(g, root, 0, count, d);
      break;
    case ORACLE_ALLGATHER:
    case ORACLE_GATHER: /* block q: rank q's input */
      for (int q = 0; q < g->nranks; q++) oracleInputs(g, q, 0, count, d + (size_t)q * block);
      break;
    case ORACLE_ALLTOALL: /* block q: block `rank` of rank q's input */
      for (int q = 0; q < g->nranks; q++) oracleInputs(g, q, (size_t)rank * count, count, d + (size_t)q * block);
      break;
    case ORACLE_SCATTER: /* block `rank` of the root's input */
      oracleInputs(g, root, (size_t)rank * count, count, d);
      break;
    case ORACLE_SENDRECV: /* the previous rank's input */
      oracleInputs(g, (rank - 1 + g->nranks) % g->nranks, 0, count, d);
      break;
  }
}

/* ---- messages --------------------------------------------------------------- */

void oracleBytes(uint64_t seed, uint64_t key, size_t bytes, void* dst) {
  unsigned char* d = dst;
  uint64_t base = mix(seed ^ mix(key ^ UINT64_C(0x6d657373)));
  for (size_t j = 0; j < bytes; j += 8) {
    uint64_t v = mix(base + j);
    memcpy(d + j, &v, bytes - j < 8 ? bytes - j : 8); /* little endian: the low bytes of the last word */
  }
}

/* ---- all-to-all-v's counts -------------------------------------------------- */

/* n - 1 random cuts of [0, count] give the parts; on half the calls one
 * part is merged into the next, so a pair sends nothing even at large
 * sizes. */
void oracleA2avParts(uint64_t seed, int n, size_t count, size_t* part, int* shift) {
  uint64_t h = mix(seed ^ UINT64_C(0xa2a7a2a7));
  *shift = (int)(h % (uint64_t)n);
  /* the cuts, sorted (insertion: n is small), in part[0..n-2] */
  for (int j = 0; j < n - 1; j++) {
    size_t cut = (size_t)(mix(h + (uint64_t)j + 1) % ((uint64_t)count + 1));
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

size_t oracleA2avPartCount(const size_t* part, int shift, int n, int s, int d) {
  return part[((d - s + shift) % n + n) % n];
}

size_t oracleA2avPartDispl(const size_t* part, int shift, int n, int s, int d) {
  size_t at = 0;
  for (int j = 0; j < d; j++) at += oracleA2avPartCount(part, shift, n, s, j);
  return at;
}

#define A2AV_TABLE_MAX 4099

size_t oracleA2avCount(uint64_t seed, int k, int n, int s, int d, size_t maxCount) {
  static const size_t counts[] = {0, 0, 1, 2, 3, 5, 7, 13, 31, 257, 1021, A2AV_TABLE_MAX};
  if (k % 2 == 1 && s == (k / 2) % n) return 0;
  if (k % 3 == 2 && d == (k / 3) % n) return 0;
  uint64_t h = mix(seed ^ mix(((uint64_t)k << 20) ^ ((uint64_t)s << 10) ^ (uint64_t)d));
  size_t c = counts[h % (sizeof(counts) / sizeof(counts[0]))];
  if (maxCount > A2AV_TABLE_MAX && k % 5 == 4) c = c * 251 + (size_t)((h >> 32) % 4096);
  return c < maxCount ? c : maxCount;
}

void oracleA2avBlock(uint64_t seed, int k, int s, int d, size_t bytes, void* dst) {
  oracleBytes(seed, ((uint64_t)(uint32_t)k << 32) ^ ((uint64_t)(uint16_t)s << 16) ^ (uint64_t)(uint16_t)d, bytes, dst);
}

void oracleA2avRecv(uint64_t seed, int k, int n, int me, size_t maxCount, size_t* recvcounts, size_t* rdispls) {
  size_t at = 0;
  for (int s = 0; s < n; s++) {
    recvcounts[s] = oracleA2avCount(seed, k, n, s, me, maxCount);
    rdispls[s] = at;
    at += recvcounts[s];
  }
}
