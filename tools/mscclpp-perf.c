/*
 * mscclpp-perf: time and check the collectives of mscclpp/coll.h, with the
 * flags and the table of nccl-tests.
 *
 *   mscclpp-perf <collective> [flags]
 *   collective: allreduce allgather reducescatter broadcast reduce alltoall sendrecv
 *
 * Ranks come from the launcher's environment (mscclppCommInitFromEnv:
 * mscclpp-run, mpirun, srun, torchrun). With CUDA compiled in and a device
 * present, each rank uses device localRank % deviceCount, cudaMalloc buffers
 * and its own stream, and is timed with CUDA events; otherwise it runs on the
 * host backend (malloc buffers, NULL stream, wall clock).
 *
 * Correctness (-c 1): before each checked call every rank fills its input
 * from (seed, call number, rank, element index) and poisons the output with
 * the expected value XOR a byte mask that changes every call, so a
 * collective that writes nothing (or writes last call's answer) is caught.
 * Values are chosen per type and operation so that every result is exactly
 * representable whatever the order of reduction:
 *   - copies (allgather, broadcast, alltoall, sendrecv): random bits,
 *     compared bit for bit;
 *   - sum / avg: at each index at most 8 ranks contribute a non-zero value
 *     (all ranks when there are <= 8): integers bounded so that no partial
 *     sum overflows; floating point: integers in [-K, K] with 8K <= 2^(m+1)
 *     (m = mantissa bits: fp8e5m2 {-1,0,1}, fp8e4m3 [-2,2]), so every
 *     partial sum is an exactly representable integer;
 *   - prod: at most 6 ranks per index contribute a factor other than 1:
 *     {1,2} (unsigned), {-2,-1,1,2} (signed), +-{0.5,1,2} (floating point):
 *     products are powers of two (or small integers) that every type holds;
 *   - max / min: random values over the type's range (floating point: any
 *     finite value but -0).
 * Integers, and sum/prod/max/min in floating point, must match exactly.
 * avg in floating point is the one tolerance: the expected value is
 * sum / nranks computed in double and rounded to the type, and the result may
 * differ by 1 ulp of the type (an implementation may divide before, during
 * or after summing). Integer avg is the truncating division of the sum.
 *
 * The reduce's recvbuff of a non-root rank must be left untouched; in-place
 * positions are those of coll.h. alltoall has no in-place form, and
 * sendrecv's in-place column is N/A as well (a send and a receive of one
 * group on the same buffer race).
 *
 * Exit status: 0; 1 when a call failed or any #wrong > 0; 2 for bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpu/gpu.h"
#include "mscclpp/coll.h"
#include "mscclpp/comm.h"
#include "mscclpp/core.h"

#ifdef MSCCLPP_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#define PROG "mscclpp-perf"
#define EXIT_FAIL 1
#define EXIT_USAGE 2
#define MAX_OFFSET_ELEMS 4096
#define SUM_ACTIVE_MAX 8
#define PROD_ACTIVE_MAX 6

/* ---- collectives ---------------------------------------------------------- */

enum coll { C_ALLREDUCE, C_ALLGATHER, C_REDUCESCATTER, C_BROADCAST, C_REDUCE, C_ALLTOALL, C_SENDRECV, C_COUNT };

static const struct {
  const char* name;
  const char* api; /* for error messages */
  int reduces;     /* takes an operator */
  int rooted;      /* takes a root */
  int inPlace;     /* has an in-place form we run */
} colls[C_COUNT] = {
    [C_ALLREDUCE] = {"allreduce", "mscclppAllReduce", 1, 0, 1},
    [C_ALLGATHER] = {"allgather", "mscclppAllGather", 0, 0, 1},
    [C_REDUCESCATTER] = {"reducescatter", "mscclppReduceScatter", 1, 0, 1},
    [C_BROADCAST] = {"broadcast", "mscclppBroadcast", 0, 1, 1},
    [C_REDUCE] = {"reduce", "mscclppReduce", 1, 1, 1},
    [C_ALLTOALL] = {"alltoall", "mscclppAllToAll", 0, 0, 0},
    [C_SENDRECV] = {"sendrecv", "mscclppSend/mscclppRecv (group)", 0, 0, 0},
};

/* Bus bandwidth = algorithm bandwidth * this (nccl-tests' PERFORMANCE.md). */
static double busFactor(enum coll c, int n) {
  switch (c) {
    case C_ALLREDUCE:
      return 2.0 * (n - 1) / n;
    case C_ALLGATHER:
    case C_REDUCESCATTER:
    case C_ALLTOALL:
      return (double)(n - 1) / n;
    default:
      return 1.0;
  }
}

/* ---- types ------------------------------------------------------------------ */

enum cls { CLS_INT, CLS_UINT, CLS_FLT };

static const struct {
  const char* names[3]; /* accepted spellings for -d; names[0] is printed */
  enum cls cls;
  int ebits, mbits; /* floating point: exponent and mantissa bits */
  int fn;           /* fp8e4m3: no infinity, only S.1111.111 is NaN */
} types[mscclppNumTypes] = {
    [mscclppInt8] = {{"int8", "char", NULL}, CLS_INT, 0, 0, 0},
    [mscclppUint8] = {{"uint8", NULL, NULL}, CLS_UINT, 0, 0, 0},
    [mscclppInt32] = {{"int32", "int", NULL}, CLS_INT, 0, 0, 0},
    [mscclppUint32] = {{"uint32", NULL, NULL}, CLS_UINT, 0, 0, 0},
    [mscclppInt64] = {{"int64", NULL, NULL}, CLS_INT, 0, 0, 0},
    [mscclppUint64] = {{"uint64", NULL, NULL}, CLS_UINT, 0, 0, 0},
    [mscclppFloat16] = {{"float16", "half", "fp16"}, CLS_FLT, 5, 10, 0},
    [mscclppFloat32] = {{"float32", "float", "fp32"}, CLS_FLT, 8, 23, 0},
    [mscclppFloat64] = {{"float64", "double", "fp64"}, CLS_FLT, 11, 52, 0},
    [mscclppBfloat16] = {{"bfloat16", "bf16", NULL}, CLS_FLT, 8, 7, 0},
    [mscclppFloat8e4m3] = {{"fp8e4m3", "f8e4m3", "e4m3"}, CLS_FLT, 4, 3, 1},
    [mscclppFloat8e5m2] = {{"fp8e5m2", "f8e5m2", "e5m2"}, CLS_FLT, 5, 2, 0},
};

static const char* typeName(int t) { return types[t].names[0]; }

static const char* const opNames[mscclppNumOps] = {"sum", "prod", "max", "min", "avg"};

/* ---- floating point in C (no CUDA): encode with round-to-nearest-even ------- */

static uint64_t dblBits(double d) {
  uint64_t b;
  memcpy(&b, &d, sizeof(b));
  return b;
}
static double bitsDbl(uint64_t b) {
  double d;
  memcpy(&d, &b, sizeof(d));
  return d;
}
static float bitsFlt(uint32_t b) {
  float f;
  memcpy(&f, &b, sizeof(f));
  return f;
}
/* 2^k for -1022 <= k <= 1023. */
static double pow2(int k) { return bitsDbl((uint64_t)(k + 1023) << 52); }

/* double -> a small IEEE-like format with ebits/mbits (half, bfloat16, fp8),
 * round to nearest even; overflow gives infinity (fp8e4m3: NaN). */
static uint32_t miniEncode(double v, int ebits, int mbits, int fn) {
  uint64_t b = dblBits(v);
  uint32_t sign = (uint32_t)(b >> 63) << (ebits + mbits);
  int dexp = (int)((b >> 52) & 0x7ff);
  uint64_t dman = b & ((UINT64_C(1) << 52) - 1);
  uint32_t expOnes = (1u << ebits) - 1;
  uint32_t nan = fn ? 0x7fu : ((expOnes << mbits) | (1u << (mbits - 1)));
  uint32_t inf = fn ? 0x7fu : (expOnes << mbits);
  if (dexp == 0x7ff) return dman != 0 ? nan : (sign | inf);
  if (dexp == 0) return sign; /* zero or a double subnormal: far below our formats */
  int bias = (1 << (ebits - 1)) - 1;
  int e = dexp - 1023;
  uint64_t sig = (UINT64_C(1) << 52) | dman;
  int shift = 52 - mbits;
  int normal = e >= 1 - bias;
  if (!normal) shift += (1 - bias) - e;
  uint64_t q;
  if (shift > 60) {
    q = 0;
  } else {
    q = sig >> shift;
    uint64_t rem = sig & ((UINT64_C(1) << shift) - 1), half = UINT64_C(1) << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) q++;
  }
  /* q carries into the exponent field by itself (the encoding is monotonic) */
  uint64_t bits = normal ? ((uint64_t)(e + bias) << mbits) + (q - (UINT64_C(1) << mbits)) : q;
  uint64_t maxFinite = fn ? 0x7e : ((uint64_t)expOnes << mbits) - 1;
  if (bits > maxFinite) return fn ? nan : (sign | inf);
  return sign | (uint32_t)bits;
}

static double miniDecode(uint32_t bits, int ebits, int mbits, int fn) {
  uint32_t expOnes = (1u << ebits) - 1;
  int neg = (bits >> (ebits + mbits)) & 1;
  uint32_t e = (bits >> mbits) & expOnes, m = bits & ((1u << mbits) - 1);
  int bias = (1 << (ebits - 1)) - 1;
  double v;
  if (fn && e == expOnes && m == (1u << mbits) - 1) return bitsDbl(UINT64_C(0x7ff8000000000000));
  if (!fn && e == expOnes) v = m != 0 ? bitsDbl(UINT64_C(0x7ff8000000000000)) : bitsDbl(UINT64_C(0x7ff0000000000000));
  else if (e == 0) v = (double)m * pow2(1 - bias - mbits);
  else v = (double)((1u << mbits) + m) * pow2((int)e - bias - mbits);
  return neg ? -v : v;
}

/* Element bytes <-> numbers. */
static void putFloat(int t, double v, void* dst) {
  switch (t) {
    case mscclppFloat32: {
      float f = (float)v;
      memcpy(dst, &f, 4);
      break;
    }
    case mscclppFloat64:
      memcpy(dst, &v, 8);
      break;
    case mscclppFloat16:
    case mscclppBfloat16: {
      uint16_t h = (uint16_t)miniEncode(v, types[t].ebits, types[t].mbits, 0);
      memcpy(dst, &h, 2);
      break;
    }
    default: {
      uint8_t q = (uint8_t)miniEncode(v, types[t].ebits, types[t].mbits, types[t].fn);
      memcpy(dst, &q, 1);
      break;
    }
  }
}

static uint64_t rawBits(int t, const void* src) {
  uint64_t u = 0;
  memcpy(&u, src, mscclppDataTypeSize(t)); /* little endian */
  return u;
}

static double getFloat(int t, const void* src) {
  uint64_t u = rawBits(t, src);
  switch (t) {
    case mscclppFloat32:
      return bitsFlt((uint32_t)u);
    case mscclppFloat64:
      return bitsDbl(u);
    default:
      return miniDecode((uint32_t)u, types[t].ebits, types[t].mbits, types[t].fn);
  }
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

static uint64_t mix64(uint64_t x) { /* splitmix64's finalizer */
  x += UINT64_C(0x9e3779b97f4a7c15);
  x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
  return x ^ (x >> 31);
}

/* What one checked call computes. */
struct gen {
  enum coll coll;
  int type, op, nranks, root, rank;
  uint64_t seed; /* fresh per checked call */
  size_t ts;
  int64_t sLimit;   /* sum/avg: signed values in [-sLimit, sLimit] */
  uint64_t uLimit;  /* sum/avg: unsigned values in [0, uLimit] */
  int64_t fLimit;   /* sum/avg: floating-point integers in [-fLimit, fLimit] */
  int sumActive, prodActive;
};

/* A number of the type (the field of its class). */
struct num {
  int64_t s;
  uint64_t u;
  double d;
};

static void genInit(struct gen* g, enum coll c, int type, int op, int nranks, int rank, int root, uint64_t seed) {
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
  double d;
  if (t == mscclppFloat32) d = bitsFlt((uint32_t)u);
  else if (t == mscclppFloat64) d = bitsDbl(u);
  else d = miniDecode((uint32_t)u, eb, mb, types[t].fn);
  return d == 0 ? 0.0 : d;
}

/* Rank r's input value at index idx, for a reduction. */
static struct num genValue(const struct gen* g, int r, size_t idx) {
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

static void putNum(int t, struct num v, void* dst) {
  if (types[t].cls == CLS_FLT) putFloat(t, v.d, dst);
  else putInt(t, v.s, v.u, dst);
}

/* Rank r's input element idx, as bytes. */
static void genElem(const struct gen* g, int r, size_t idx, void* dst) {
  if (g->op < 0) { /* copy: random bits */
    uint64_t h = mix64(g->seed ^ mix64(((uint64_t)(uint32_t)r << 40) ^ (uint64_t)idx));
    memcpy(dst, &h, g->ts);
    return;
  }
  putNum(g->type, genValue(g, r, idx), dst);
}

static void genRange(const struct gen* g, int r, size_t first, size_t n, unsigned char* dst) {
  for (size_t k = 0; k < n; k++) genElem(g, r, first + k, dst + k * g->ts);
}

/* acc op v in each of the three views (signed integers wrap around, as the
 * collectives' integer operators do). */
static struct num numApply(int op, struct num acc, struct num v) {
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
static void reduceElem(const struct gen* g, size_t idx, void* dst) {
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
static int elemWrong(const struct gen* g, const void* got, const void* exp) {
  if (g->op < 0 || types[g->type].cls != CLS_FLT) return memcmp(got, exp, g->ts) != 0;
  if (g->op == mscclppAvg) {
    double dg = getFloat(g->type, got);
    if (dg != dg) return 1; /* NaN */
    int64_t d = ordered(g->type, got) - ordered(g->type, exp);
    return d > 1 || d < -1;
  }
  double dg = getFloat(g->type, got), de = getFloat(g->type, exp);
  return !(dg == de);
}


/* ---- --selftest: the checker's own arithmetic -------------------------------- */

/* x rounded to type t (floating point) or wrapped to its width (integers). */
static struct num roundTo(int t, struct num x) {
  unsigned char b[8];
  putNum(t, x, b);
  struct num r = {0, 0, 0.0};
  if (types[t].cls == CLS_FLT) {
    r.d = getFloat(t, b);
  } else {
    uint64_t u = rawBits(t, b);
    int bits = (int)mscclppDataTypeSize(t) * 8;
    uint64_t signBit = UINT64_C(1) << (bits - 1);
    r.u = u;
    r.s = bits == 64 ? (int64_t)u : (u & signBit) ? (int64_t)(u | ~((signBit << 1) - 1)) : (int64_t)u;
  }
  return r;
}

static int selfTest(void) {
  int fails = 0;
  static const int minis[4] = {mscclppFloat16, mscclppBfloat16, mscclppFloat8e4m3, mscclppFloat8e5m2};
  for (int k = 0; k < 4; k++) {
    int t = minis[k], eb = types[t].ebits, mb = types[t].mbits, fn = types[t].fn;
    uint32_t npat = 1u << (eb + mb + 1);
    for (uint32_t p = 0; p < npat; p++) {
      double v = miniDecode(p, eb, mb, fn);
      if (v != v) continue;
      if (miniEncode(v, eb, mb, fn) != p) {
        if (fails++ < 10) fprintf(stderr, "selftest: %s 0x%x -> %g -> 0x%x\n", typeName(t), p, v, miniEncode(v, eb, mb, fn));
      }
      /* ties to even, and just off the midpoint, between p and p + 1 (positive, finite) */
      uint32_t q = p + 1;
      if ((p >> (eb + mb)) != 0 || q >= npat / 2) continue;
      double w = miniDecode(q, eb, mb, fn);
      if (w != w || w - w != 0) continue;
      double mid = (v + w) / 2, eps = (w - v) / 1024;
      uint32_t even = (p & 1) ? q : p;
      if (miniEncode(mid, eb, mb, fn) != even || miniEncode(mid - eps, eb, mb, fn) != p ||
          miniEncode(mid + eps, eb, mb, fn) != q) {
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
               {mscclppFloat8e4m3, -0x1p-9, 0x81},  {mscclppFloat8e4m3, 480.0, 0x7f},
               {mscclppFloat8e5m2, 1.0, 0x3c},      {mscclppFloat8e5m2, 57344.0, 0x7b},
               {mscclppFloat8e5m2, -0x1p-16, 0x81}, {mscclppFloat8e5m2, 65536.0, 0x7c}};
  for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
    int t = known[i].type;
    uint32_t got = miniEncode(known[i].v, types[t].ebits, types[t].mbits, types[t].fn);
    if (got != known[i].bits && fails++ < 20)
      fprintf(stderr, "selftest: %s(%g) = 0x%x, expected 0x%x\n", typeName(t), known[i].v, got, known[i].bits);
  }
  /* bfloat16 against the usual bit trick on float32 */
  uint64_t h = 1;
  for (int i = 0; i < 200000; i++) {
    h = mix64(h);
    uint32_t u = (uint32_t)h;
    float f = bitsFlt(u);
    if (f != f) continue;
    uint32_t ref = (u + 0x7fffu + ((u >> 16) & 1)) >> 16;
    if ((ref & 0x7f80) == 0x7f80 && (u & 0x7f800000) != 0x7f800000) ref &= 0xff80; /* overflow: infinity */
    uint32_t got = miniEncode(f, 8, 7, 0);
    if (got != ref && fails++ < 30) fprintf(stderr, "selftest: bfloat16(0x%08x) = 0x%x, expected 0x%x\n", u, got, ref);
  }
  /* The generated inputs reduce exactly (avg: within 1 ulp) in any order,
   * rounding to the type after every step. */
  static const int nranksList[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 33};
  for (size_t ni = 0; ni < sizeof(nranksList) / sizeof(nranksList[0]); ni++) {
    int n = nranksList[ni];
    int order[64];
    for (int t = 0; t < mscclppNumTypes; t++) {
      for (int op = 0; op < mscclppNumOps; op++) {
        struct gen g;
        genInit(&g, C_ALLREDUCE, t, op, n, 0, 0, mix64((uint64_t)(n * 100 + t * 10 + op)));
        for (size_t idx = 0; idx < 3000; idx++) {
          for (int r = 0; r < n; r++) order[r] = r;
          for (int r = n - 1; r > 0; r--) {
            h = mix64(h);
            int j = (int)(h % (uint64_t)(r + 1)), x = order[r];
            order[r] = order[j];
            order[j] = x;
          }
          struct num acc = genValue(&g, order[0], idx);
          for (int r = 1; r < n; r++) {
            acc = numApply(op, acc, genValue(&g, order[r], idx));
            acc = roundTo(t, acc);
          }
          if (op == mscclppAvg) {
            acc.s /= n;
            acc.u /= (uint64_t)n;
            acc.d /= n;
          }
          unsigned char got[8], exp[8];
          putNum(t, acc, got);
          reduceElem(&g, idx, exp);
          if (elemWrong(&g, got, exp) && fails++ < 40)
            fprintf(stderr, "selftest: %s %s %d ranks index %zu: 0x%" PRIx64 " in some order, expected 0x%" PRIx64 "\n",
                    typeName(t), opNames[op], n, idx, rawBits(t, got), rawBits(t, exp));
        }
      }
    }
  }
  printf("selftest: %s (%d failures)\n", fails ? "FAILED" : "OK", fails);
  return fails ? EXIT_FAIL : 0;
}

/* ---- options ---------------------------------------------------------------- */

struct opts {
  enum coll coll;
  size_t minBytes, maxBytes, stepBytes;
  size_t stepFactor; /* > 1: multiply; else add stepBytes */
  int iters, warmup, check, blocking, graphLaunches, average;
  int typeList[mscclppNumTypes], ntypes;
  int opList[mscclppNumOps], nops;
  int root;
  const char* jsonPath;
  const char* plotPath;
  int injectError;
  size_t offsetElems;
  uint64_t seed;
};

/* The rank (and local rank) the launcher gave, before the communicator
 * exists: for device selection and to print usage errors once. -1: none. */
static void envRanks(int* rank, int* localRank) {
  static const char* const rankVars[] = {"MSCCLPP_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "RANK"};
  static const char* const localVars[] = {"MSCCLPP_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
                                          "LOCAL_RANK"};
  *rank = -1;
  *localRank = -1;
  for (size_t i = 0; i < sizeof(rankVars) / sizeof(rankVars[0]); i++) {
    const char* r = getenv(rankVars[i]);
    if (r == NULL) continue;
    *rank = atoi(r);
    const char* l = getenv(localVars[i]);
    if (l != NULL) *localRank = atoi(l);
    return;
  }
}

static int quiet; /* not rank 0: print no usage text */

static void usage(FILE* f) {
  if (quiet) return;
  fprintf(f,
          "usage: " PROG " <collective> [flags]\n"
          "  collective: allreduce allgather reducescatter broadcast reduce alltoall sendrecv\n"
          "  -b, --minbytes <size>      smallest size (default 32M); sizes take K, M, G (x1024)\n"
          "  -e, --maxbytes <size>      largest size (default 32M)\n"
          "  -i, --stepbytes <size>     add this between sizes (default 1M) unless -f is given\n"
          "  -f, --stepfactor <n>       multiply by n between sizes\n"
          "  -n, --iters <n>            timed iterations (default 20)\n"
          "  -w, --warmup_iters <n>     untimed iterations first (default 1)\n"
          "  -c, --check <0/1>          check results (default 1)\n"
          "  -d, --datatype <type>      int8 uint8 int32 uint32 int64 uint64 half/float16 bfloat16\n"
          "                             float/float32 double/float64 fp8e4m3 fp8e5m2, a comma-separated\n"
          "                             list, or all (default float)\n"
          "  -o, --op <op>              sum prod max min avg, a comma-separated list, or all (default sum)\n"
          "  -r, --root <rank>          root of broadcast and reduce (default 0)\n"
          "  -z, --blocking <0/1>       synchronize after every call (default 0)\n"
          "  -G, --cudagraph <n>        capture the -n calls in a CUDA graph and launch it n times\n"
          "  -a, --average <0/1/2/3>    time reported: 0 rank 0's, 1 average, 2 min, 3 max over ranks\n"
          "                             (default 1)\n"
          "  -J, --json <file>          also write the results as JSON\n"
          "      --plot <file.png>      bus bandwidth and latency against size (needs gnuplot)\n"
          "      --offset <elements>    buffers start this many elements into their allocation\n"
          "      --seed <n>             seed of the checked inputs\n"
          "  -t, -g <1>                 accepted for nccl-tests scripts: one thread, one GPU per process\n"
          "  -h, --help\n"
          "Run one process per rank under a launcher: mscclpp-run -n 4 -- " PROG
          " allreduce -b 8 -e 128M -f 2\n"
          "(mscclpp-run --mps for several ranks on one GPU), mpirun, srun or torchrun.\n");
}

static int parseSize(const char* flag, const char* s, size_t* out) {
  char* end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || end == s || s[0] == '-') goto fail_bad;
  unsigned long long mult = 1;
  switch (*end) {
    case 'k':
    case 'K':
      mult = 1ull << 10;
      end++;
      break;
    case 'm':
    case 'M':
      mult = 1ull << 20;
      end++;
      break;
    case 'g':
    case 'G':
      mult = 1ull << 30;
      end++;
      break;
    default:
      break;
  }
  if (mult > 1 && *end == 'i') end++;
  if (*end == 'B' || *end == 'b') end++;
  if (*end != '\0') goto fail_bad;
  if (v > SIZE_MAX / mult) goto fail_bad;
  *out = (size_t)(v * mult);
  return 0;
fail_bad:
  if (!quiet) fprintf(stderr, PROG ": %s \"%s\" is not a size (a number with an optional K, M or G)\n", flag, s);
  return -1;
}

static int parseInt(const char* flag, const char* s, long lo, long hi, int* out) {
  char* end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) {
    if (!quiet) fprintf(stderr, PROG ": %s \"%s\" is not an integer in %ld..%ld\n", flag, s, lo, hi);
    return -1;
  }
  *out = (int)v;
  return 0;
}

/* Does entry `idx` of the -d / -o vocabulary spell s[0..len)? */
static int typeMatches(int idx, const char* s, size_t len) {
  for (int k = 0; k < 3; k++)
    if (types[idx].names[k] != NULL && strlen(types[idx].names[k]) == len && strncmp(types[idx].names[k], s, len) == 0)
      return 1;
  return 0;
}
static int opMatches(int idx, const char* s, size_t len) {
  return strlen(opNames[idx]) == len && strncmp(opNames[idx], s, len) == 0;
}

/* -d / -o: "all" (the n entries in order) or a comma-separated list of
 * names, each matched by `matches`; duplicates are kept once. `what` and
 * `vocabulary` make the error message. */
static int parseList(const char* flag, const char* arg, int n, int (*matches)(int, const char*, size_t),
                     const char* what, const char* vocabulary, int* list, int* count) {
  if (strcmp(arg, "all") == 0) {
    for (int i = 0; i < n; i++) list[i] = i;
    *count = n;
    return 0;
  }
  *count = 0;
  for (const char* s = arg; *s;) {
    size_t len = strcspn(s, ",");
    int found = -1;
    for (int i = 0; i < n && found < 0; i++)
      if (matches(i, s, len)) found = i;
    if (found < 0) {
      if (!quiet)
        fprintf(stderr, PROG ": %s \"%.*s\" is not %s (%s, a comma-separated list, or all)\n", flag, (int)len, s, what,
                vocabulary);
      return -1;
    }
    int dup = 0;
    for (int i = 0; i < *count; i++) dup |= list[i] == found;
    if (!dup) list[(*count)++] = found;
    s += len + (s[len] == ',');
  }
  if (*count == 0) {
    if (!quiet) fprintf(stderr, PROG ": %s needs %s\n", flag, what);
    return -1;
  }
  return 0;
}

static int parseType(const char* arg, struct opts* o) {
  return parseList("-d", arg, mscclppNumTypes, typeMatches, "a type",
                   "int8 uint8 int32 uint32 int64 uint64 half float16 bfloat16 float float32 double float64 fp8e4m3 "
                   "fp8e5m2",
                   o->typeList, &o->ntypes);
}

static int parseOp(const char* arg, struct opts* o) {
  return parseList("-o", arg, mscclppNumOps, opMatches, "an operation", "sum prod max min avg", o->opList, &o->nops);
}

enum { OPT_PLOT = 256, OPT_INJECT, OPT_OFFSET, OPT_SEED };

/* 0: parsed; 1: help printed (or --selftest passed); -1: bad usage
 * (printed); -2: --selftest failed. */
static int parseArgs(int argc, char** argv, struct opts* o) {
  memset(o, 0, sizeof(*o));
  o->minBytes = o->maxBytes = 32u << 20;
  o->stepBytes = 1u << 20;
  o->stepFactor = 1;
  o->iters = 20;
  o->warmup = 1;
  o->check = 1;
  o->average = 1;
  o->typeList[0] = mscclppFloat32;
  o->ntypes = 1;
  o->opList[0] = mscclppSum;
  o->nops = 1;
  o->seed = UINT64_C(0x6d7363636c707066);
  if (argc < 2) {
    usage(stderr);
    return -1;
  }
  if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
    usage(stdout);
    return 1;
  }
  if (strcmp(argv[1], "--selftest") == 0) return selfTest() == 0 ? 1 : -2;
  int c;
  for (c = 0; c < C_COUNT; c++)
    if (strcmp(argv[1], colls[c].name) == 0) break;
  if (c == C_COUNT) {
    if (!quiet)
      fprintf(stderr,
              PROG ": \"%s\" is not a collective (allreduce allgather reducescatter broadcast reduce alltoall "
                   "sendrecv)\n",
              argv[1]);
    return -1;
  }
  o->coll = (enum coll)c;
  static const struct option longOpts[] = {
      {"minbytes", required_argument, NULL, 'b'},   {"maxbytes", required_argument, NULL, 'e'},
      {"stepbytes", required_argument, NULL, 'i'},  {"stepfactor", required_argument, NULL, 'f'},
      {"iters", required_argument, NULL, 'n'},      {"warmup_iters", required_argument, NULL, 'w'},
      {"check", required_argument, NULL, 'c'},      {"datatype", required_argument, NULL, 'd'},
      {"op", required_argument, NULL, 'o'},         {"root", required_argument, NULL, 'r'},
      {"blocking", required_argument, NULL, 'z'},   {"cudagraph", required_argument, NULL, 'G'},
      {"average", required_argument, NULL, 'a'},    {"json", required_argument, NULL, 'J'},
      {"nthreads", required_argument, NULL, 't'},   {"ngpus", required_argument, NULL, 'g'},
      {"plot", required_argument, NULL, OPT_PLOT},  {"inject-error", no_argument, NULL, OPT_INJECT},
      {"offset", required_argument, NULL, OPT_OFFSET}, {"seed", required_argument, NULL, OPT_SEED},
      {"help", no_argument, NULL, 'h'},             {NULL, 0, NULL, 0}};
  optind = 2;
  opterr = !quiet;
  int ch, one;
  size_t factor;
  while ((ch = getopt_long(argc, argv, "b:e:i:f:n:w:c:d:o:r:z:G:a:J:t:g:h", longOpts, NULL)) != -1) {
    switch (ch) {
      case 'b':
        if (parseSize("-b", optarg, &o->minBytes)) return -1;
        break;
      case 'e':
        if (parseSize("-e", optarg, &o->maxBytes)) return -1;
        break;
      case 'i':
        if (parseSize("-i", optarg, &o->stepBytes)) return -1;
        o->stepFactor = 1;
        break;
      case 'f':
        if (parseSize("-f", optarg, &factor) || factor < 1) return -1;
        o->stepFactor = factor;
        break;
      case 'n':
        if (parseInt("-n", optarg, 1, INT_MAX, &o->iters)) return -1;
        break;
      case 'w':
        if (parseInt("-w", optarg, 0, INT_MAX, &o->warmup)) return -1;
        break;
      case 'c':
        if (parseInt("-c", optarg, 0, 1, &o->check)) return -1;
        break;
      case 'd':
        if (parseType(optarg, o)) return -1;
        break;
      case 'o':
        if (parseOp(optarg, o)) return -1;
        break;
      case 'r':
        if (parseInt("-r", optarg, 0, INT_MAX, &o->root)) return -1;
        break;
      case 'z':
        if (parseInt("-z", optarg, 0, 1, &o->blocking)) return -1;
        break;
      case 'G':
        if (parseInt("-G", optarg, 0, INT_MAX, &o->graphLaunches)) return -1;
        break;
      case 'a':
        if (parseInt("-a", optarg, 0, 3, &o->average)) return -1;
        break;
      case 'J':
        o->jsonPath = optarg;
        break;
      case 't':
      case 'g':
        if (parseInt(ch == 't' ? "-t" : "-g", optarg, 1, 1, &one)) {
          if (!quiet)
            fprintf(stderr, PROG ": one process per rank: run more ranks with the launcher instead of -%c\n", ch);
          return -1;
        }
        break;
      case OPT_PLOT:
        o->plotPath = optarg;
        break;
      case OPT_INJECT:
        o->injectError = 1;
        break;
      case OPT_OFFSET:
        if (parseSize("--offset", optarg, &o->offsetElems)) return -1;
        if (o->offsetElems > MAX_OFFSET_ELEMS) {
          if (!quiet) fprintf(stderr, PROG ": --offset %zu is more than %d elements\n", o->offsetElems, MAX_OFFSET_ELEMS);
          return -1;
        }
        break;
      case OPT_SEED: {
        char* end = NULL;
        errno = 0;
        o->seed = strtoull(optarg, &end, 0);
        if (errno != 0 || end == optarg || *end != '\0') {
          if (!quiet) fprintf(stderr, PROG ": --seed \"%s\" is not a number\n", optarg);
          return -1;
        }
        break;
      }
      case 'h':
        usage(stdout);
        return 1;
      default:
        usage(stderr);
        return -1;
    }
  }
  if (optind < argc) {
    if (!quiet) fprintf(stderr, PROG ": unexpected argument \"%s\"\n", argv[optind]);
    return -1;
  }
  if (o->minBytes > o->maxBytes) {
    if (!quiet) fprintf(stderr, PROG ": -b %zu is larger than -e %zu\n", o->minBytes, o->maxBytes);
    return -1;
  }
  if (o->injectError && !o->check) {
    if (!quiet) fprintf(stderr, PROG ": --inject-error needs -c 1\n");
    return -1;
  }
  return 0;
}

/* ---- the run's state -------------------------------------------------------- */

struct meas {
  int valid;     /* 0: N/A */
  double us;     /* combined over ranks per -a */
  double algbw;  /* GB/s */
  double busbw;  /* GB/s */
  int64_t wrong; /* summed over ranks; -1: not checked */
};

struct row {
  size_t bytes, count;
  int type, op, root;
  struct meas m[2]; /* out-of-place, in-place */
};

struct ctx {
  struct opts o;
  mscclppComm_t comm;
  int rank, nranks, localRank, localNranks;
  int gpu, device;
  mscclppStream_t stream;
#ifdef MSCCLPP_HAVE_CUDA
  cudaEvent_t ev0, ev1;
#endif
  unsigned char* sendBase; /* device (or host backend) allocations */
  unsigned char* recvBase;
  size_t bufBytes;
  unsigned char *hImg, *hExp, *hOut; /* host images for checks */
  uint64_t checkSerial;
  struct row* rows;
  size_t nrows, capRows;
  int failed; /* a call failed: stop */
};

/* Static: everything stays reachable when a failure exits early. */
static struct ctx g_ctx;

static void callFailed(struct ctx* c, const char* what, mscclppResult_t res) {
  fprintf(stderr, PROG ": rank %d: %s failed: %s: %s\n", c->rank, what, mscclppGetErrorString(res),
          mscclppGetLastError());
  fflush(stderr);
  c->failed = 1;
}

#ifdef MSCCLPP_HAVE_CUDA
static int cudaOk(struct ctx* c, cudaError_t e, const char* what) {
  if (e == cudaSuccess) return 1;
  fprintf(stderr, PROG ": rank %d: %s failed: %s\n", c->rank, what, cudaGetErrorString(e));
  fflush(stderr);
  c->failed = 1;
  return 0;
}
#endif

/* GPU copies and fills go on the collectives' own stream and are waited
 * for: the stream is non-blocking, so it would not wait for work of the
 * legacy default stream, and cudaMemcpy from pageable memory may return
 * before its DMA has landed. */
static int copyToBuf(struct ctx* c, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return 1;
#ifdef MSCCLPP_HAVE_CUDA
  if (c->gpu)
    return cudaOk(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, (cudaStream_t)c->stream),
                  "cudaMemcpyAsync to the device") &&
           cudaOk(c, cudaStreamSynchronize((cudaStream_t)c->stream), "cudaStreamSynchronize");
#endif
  (void)c;
  memcpy(dst, src, bytes);
  return 1;
}

static int copyFromBuf(struct ctx* c, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return 1;
#ifdef MSCCLPP_HAVE_CUDA
  if (c->gpu)
    return cudaOk(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, (cudaStream_t)c->stream),
                  "cudaMemcpyAsync from the device") &&
           cudaOk(c, cudaStreamSynchronize((cudaStream_t)c->stream), "cudaStreamSynchronize");
#endif
  (void)c;
  memcpy(dst, src, bytes);
  return 1;
}

static int zeroBuf(struct ctx* c, void* dst, size_t bytes) {
  if (bytes == 0) return 1;
#ifdef MSCCLPP_HAVE_CUDA
  if (c->gpu)
    return cudaOk(c, cudaMemsetAsync(dst, 0, bytes, (cudaStream_t)c->stream), "cudaMemsetAsync") &&
           cudaOk(c, cudaStreamSynchronize((cudaStream_t)c->stream), "cudaStreamSynchronize");
#endif
  (void)c;
  memset(dst, 0, bytes);
  return 1;
}

/* Wait for the stream, then for errors the GPU reported after the calls
 * returned. */
static int syncStream(struct ctx* c) {
#ifdef MSCCLPP_HAVE_CUDA
  if (c->gpu && !cudaOk(c, cudaStreamSynchronize((cudaStream_t)c->stream), "cudaStreamSynchronize")) return 0;
#endif
  mscclppResult_t async = mscclppSuccess;
  mscclppResult_t res = mscclppCommGetAsyncError(c->comm, &async);
  if (res != mscclppSuccess) {
    callFailed(c, "mscclppCommGetAsyncError", res);
    return 0;
  }
  if (async != mscclppSuccess) {
    callFailed(c, "a collective (asynchronous error)", async);
    return 0;
  }
  return 1;
}

static double nowUs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

/* ---- one call --------------------------------------------------------------- */

/* Counts and buffers of one (size, type, placement). */
struct call {
  size_t count;     /* the API's count argument */
  size_t sendElems; /* this rank's input */
  size_t recvElems; /* this rank's output */
  size_t bytes;     /* the "size" column: max(send, recv) bytes */
  int type, op, root, inPlace;
  size_t ts;
  void* send;
  void* recv;
};

static void setupCall(const struct ctx* c, size_t bytes, int type, int op, int inPlace, struct call* k) {
  size_t ts = mscclppDataTypeSize(type), n = (size_t)c->nranks;
  size_t count = bytes / ts;
  memset(k, 0, sizeof(*k));
  k->type = type;
  k->op = op;
  k->root = c->o.root;
  k->inPlace = inPlace;
  k->ts = ts;
  switch (c->o.coll) {
    case C_ALLGATHER:
      k->count = count / n;
      k->sendElems = k->count;
      k->recvElems = k->count * n;
      break;
    case C_REDUCESCATTER:
      k->count = count / n;
      k->sendElems = k->count * n;
      k->recvElems = k->count;
      break;
    case C_ALLTOALL:
      k->count = count / n;
      k->sendElems = k->recvElems = k->count * n;
      break;
    default:
      k->count = k->sendElems = k->recvElems = count;
      break;
  }
  k->bytes = (k->sendElems > k->recvElems ? k->sendElems : k->recvElems) * ts;
  unsigned char* sendBuf = c->sendBase + c->o.offsetElems * ts;
  unsigned char* recvBuf = c->recvBase + c->o.offsetElems * ts;
  if (!inPlace) {
    k->send = sendBuf;
    k->recv = recvBuf;
  } else if (c->o.coll == C_ALLGATHER) {
    k->recv = recvBuf;
    k->send = recvBuf + (size_t)c->rank * k->count * ts;
  } else if (c->o.coll == C_REDUCESCATTER) {
    k->send = recvBuf;
    k->recv = recvBuf + (size_t)c->rank * k->count * ts;
  } else {
    k->send = k->recv = recvBuf;
  }
}

static mscclppResult_t launch(struct ctx* c, const struct call* k) {
  mscclppComm_t comm = c->comm;
  mscclppStream_t s = c->stream;
  mscclppDataType_t t = (mscclppDataType_t)k->type;
  mscclppRedOp_t op = (mscclppRedOp_t)k->op;
  switch (c->o.coll) {
    case C_ALLREDUCE:
      return mscclppAllReduce(k->send, k->recv, k->count, t, op, comm, s);
    case C_ALLGATHER:
      return mscclppAllGather(k->send, k->recv, k->count, t, comm, s);
    case C_REDUCESCATTER:
      return mscclppReduceScatter(k->send, k->recv, k->count, t, op, comm, s);
    case C_BROADCAST:
      return mscclppBroadcast(k->send, k->recv, k->count, t, k->root, comm, s);
    case C_REDUCE:
      return mscclppReduce(k->send, k->recv, k->count, t, op, k->root, comm, s);
    case C_ALLTOALL:
      return mscclppAllToAll(k->send, k->recv, k->count, t, comm, s);
    default: {
      int n = c->nranks, r = c->rank;
      mscclppResult_t res = mscclppGroupStart();
      if (res != mscclppSuccess) return res;
      mscclppResult_t r1 = mscclppSend(k->send, k->count, t, (r + 1) % n, comm, s);
      mscclppResult_t r2 = mscclppRecv(k->recv, k->count, t, (r - 1 + n) % n, comm, s);
      res = mscclppGroupEnd();
      if (r1 != mscclppSuccess) return r1;
      if (r2 != mscclppSuccess) return r2;
      return res;
    }
  }
}

/* Checked call: fill, poison, run, compare. Returns this rank's wrong count,
 * or -1 after a failure (printed). */
static int64_t checkedCall(struct ctx* c, const struct call* k) {
  struct gen g;
  uint64_t seed = mix64(c->o.seed ^ mix64(++c->checkSerial));
  genInit(&g, c->o.coll, k->type, k->op, c->nranks, c->rank, k->root, seed);
  size_t ts = k->ts, n = (size_t)c->nranks, cnt = k->count;
  int rank = c->rank;
  unsigned char mask = (unsigned char)(0xa5 ^ (c->checkSerial * 0x3b));
  if (mask == 0) mask = 0xa5;
  int untouched = c->o.coll == C_REDUCE && rank != k->root; /* output must stay as it was */

  /* the expected output */
  unsigned char* exp = c->hExp;
  if (!untouched) {
    for (size_t i = 0; i < k->recvElems; i++) {
      unsigned char* e = exp + i * ts;
      switch (c->o.coll) {
        case C_ALLREDUCE:
        case C_REDUCE:
          reduceElem(&g, i, e);
          break;
        case C_REDUCESCATTER:
          reduceElem(&g, (size_t)rank * cnt + i, e);
          break;
        case C_BROADCAST:
          genElem(&g, k->root, i, e);
          break;
        case C_ALLGATHER:
          genElem(&g, (int)(i / cnt), i % cnt, e);
          break;
        case C_ALLTOALL:
          genElem(&g, (int)(i / cnt), (size_t)rank * cnt + i % cnt, e);
          break;
        default: /* sendrecv */
          genElem(&g, (int)((n + (size_t)rank - 1) % n), i, e);
          break;
      }
    }
  }

  /* the buffers before the call */
  unsigned char* img = c->hImg;
  if (!k->inPlace) {
    genRange(&g, rank, 0, k->sendElems, img);
    if (!copyToBuf(c, k->send, img, k->sendElems * ts)) return -1;
    size_t rb = k->recvElems * ts;
    if (untouched) {
      memset(img, mask, rb);
      memcpy(exp, img, rb);
    } else {
      for (size_t b = 0; b < rb; b++) img[b] = exp[b] ^ mask;
    }
    if (!copyToBuf(c, k->recv, img, rb)) return -1;
  } else {
    size_t elems;
    switch (c->o.coll) {
      case C_BROADCAST:
        elems = cnt;
        if (rank == k->root) genRange(&g, rank, 0, cnt, img);
        else
          for (size_t b = 0; b < cnt * ts; b++) img[b] = exp[b] ^ mask;
        break;
      case C_ALLGATHER:
        elems = k->recvElems;
        for (size_t b = 0; b < elems * ts; b++) img[b] = exp[b] ^ mask;
        genRange(&g, rank, 0, cnt, img + (size_t)rank * cnt * ts);
        break;
      default: /* allreduce, reduce, reducescatter: the buffer is the input */
        elems = k->sendElems;
        genRange(&g, rank, 0, elems, img);
        if (untouched) memcpy(exp, img, elems * ts);
        break;
    }
    /* the in-place base is recv for all but reducescatter, whose base is send */
    void* base = c->o.coll == C_REDUCESCATTER ? k->send : k->recv;
    if (!copyToBuf(c, base, img, elems * ts)) return -1;
  }
  mscclppResult_t res = mscclppBootstrapBarrier(c->comm);
  if (res != mscclppSuccess) {
    callFailed(c, "mscclppBootstrapBarrier", res);
    return -1;
  }
  res = launch(c, k);
  if (res != mscclppSuccess) {
    callFailed(c, colls[c->o.coll].api, res);
    return -1;
  }
  if (!syncStream(c)) return -1;
  unsigned char* out = c->hOut;
  size_t rb = k->recvElems * ts;
  if (c->o.injectError && rank == 0 && k->recvElems > 0) {
    /* corrupt one element where the call wrote it: a high bit of its top byte */
    unsigned char* p = (unsigned char*)k->recv + (k->recvElems / 2) * ts;
    unsigned char e[8];
    size_t top = (ts - 1) & 7;
    if (!copyFromBuf(c, e, p, ts)) return -1;
    e[top] ^= 0x40;
    if (!copyToBuf(c, p, e, ts)) return -1;
  }
  if (!copyFromBuf(c, out, k->recv, rb)) return -1;
  int64_t wrong = 0;
  for (size_t i = 0; i < k->recvElems; i++) {
    if (untouched ? memcmp(out + i * ts, exp + i * ts, ts) != 0 : elemWrong(&g, out + i * ts, exp + i * ts)) {
      if (wrong < 3) {
        char gb[24], eb[24];
        uint64_t gu = rawBits(k->type, out + i * ts), eu = rawBits(k->type, exp + i * ts);
        snprintf(gb, sizeof(gb), "0x%0*" PRIx64, (int)ts * 2, gu);
        snprintf(eb, sizeof(eb), "0x%0*" PRIx64, (int)ts * 2, eu);
        fprintf(stderr,
                PROG ": rank %d: %s %s %s count %zu %s: element %zu is %s, expected %s%s\n", rank,
                colls[c->o.coll].name, typeName(k->type), colls[c->o.coll].reduces ? opNames[k->op] : "", k->count,
                k->inPlace ? "in-place" : "out-of-place", i, gb, eb,
                untouched ? " (a non-root's recvbuff must stay untouched)" : "");
      }
      wrong++;
    }
  }
  if (wrong > 0) fflush(stderr);
  return wrong;
}

/* Timed iterations: this rank's microseconds per call, or -1 after a
 * failure (printed). */
static double timedCalls(struct ctx* c, const struct call* k) {
  const struct opts* o = &c->o;
  /* In place, each call reduces the last one's result: start from zeros,
   * which every operation keeps (no overflow, no infinities). */
  if (k->inPlace && colls[o->coll].reduces) {
    void* base = o->coll == C_REDUCESCATTER ? k->send : k->recv;
    if (!zeroBuf(c, base, k->bytes)) return -1;
  }
  for (int w = 0; w < o->warmup; w++) {
    mscclppResult_t res = launch(c, k);
    if (res != mscclppSuccess) {
      callFailed(c, colls[o->coll].api, res);
      return -1;
    }
    if (o->blocking && !syncStream(c)) return -1;
  }
  if (!syncStream(c)) return -1;
  mscclppResult_t res = mscclppBootstrapBarrier(c->comm);
  if (res != mscclppSuccess) {
    callFailed(c, "mscclppBootstrapBarrier", res);
    return -1;
  }
#ifdef MSCCLPP_HAVE_CUDA
  if (c->gpu) {
    cudaStream_t s = (cudaStream_t)c->stream;
    float ms = 0;
    double calls = o->iters;
    if (o->graphLaunches > 0) {
      cudaGraph_t graph = NULL;
      cudaGraphExec_t exec = NULL;
      if (!cudaOk(c, cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture")) return -1;
      for (int i = 0; i < o->iters; i++) {
        res = launch(c, k);
        if (res != mscclppSuccess) {
          callFailed(c, colls[o->coll].api, res);
          (void)cudaStreamEndCapture(s, &graph);
          if (graph != NULL) (void)cudaGraphDestroy(graph);
          return -1;
        }
      }
      if (!cudaOk(c, cudaStreamEndCapture(s, &graph), "cudaStreamEndCapture")) return -1;
      if (!cudaOk(c, cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate")) {
        (void)cudaGraphDestroy(graph);
        return -1;
      }
      int ok = cudaOk(c, cudaEventRecord(c->ev0, s), "cudaEventRecord");
      for (int l = 0; ok && l < o->graphLaunches; l++) ok = cudaOk(c, cudaGraphLaunch(exec, s), "cudaGraphLaunch");
      ok = ok && cudaOk(c, cudaEventRecord(c->ev1, s), "cudaEventRecord");
      ok = ok && syncStream(c);
      ok = ok && cudaOk(c, cudaEventElapsedTime(&ms, c->ev0, c->ev1), "cudaEventElapsedTime");
      (void)cudaGraphExecDestroy(exec);
      (void)cudaGraphDestroy(graph);
      if (!ok) return -1;
      calls *= o->graphLaunches;
    } else {
      if (!cudaOk(c, cudaEventRecord(c->ev0, s), "cudaEventRecord")) return -1;
      for (int i = 0; i < o->iters; i++) {
        res = launch(c, k);
        if (res != mscclppSuccess) {
          callFailed(c, colls[o->coll].api, res);
          return -1;
        }
        if (o->blocking && !syncStream(c)) return -1;
      }
      if (!cudaOk(c, cudaEventRecord(c->ev1, s), "cudaEventRecord")) return -1;
      if (!syncStream(c)) return -1;
      if (!cudaOk(c, cudaEventElapsedTime(&ms, c->ev0, c->ev1), "cudaEventElapsedTime")) return -1;
    }
    return ms * 1e3 / calls;
  }
#endif
  double t0 = nowUs();
  for (int i = 0; i < o->iters; i++) {
    res = launch(c, k);
    if (res != mscclppSuccess) {
      callFailed(c, colls[o->coll].api, res);
      return -1;
    }
  }
  if (!syncStream(c)) return -1;
  return (nowUs() - t0) / o->iters;
}

/* Measure one placement; every rank gets the combined result. */
static int measure(struct ctx* c, const struct call* k, struct meas* m) {
  struct {
    double us;
    int64_t wrong;
  } mine = {0, 0}, *all;
  memset(m, 0, sizeof(*m));
  m->valid = 1;
  if (c->o.check) {
    mine.wrong = checkedCall(c, k);
    if (mine.wrong < 0) return -1;
  }
  mine.us = timedCalls(c, k);
  if (mine.us < 0) return -1;
  all = calloc((size_t)c->nranks, sizeof(*all));
  if (all == NULL) {
    fprintf(stderr, PROG ": out of memory\n");
    return -1;
  }
  all[c->rank] = mine;
  mscclppResult_t res = mscclppBootstrapAllGather(c->comm, all, sizeof(*all));
  if (res != mscclppSuccess) {
    free(all);
    callFailed(c, "mscclppBootstrapAllGather", res);
    return -1;
  }
  double t = all[0].us, sum = 0, mn = all[0].us, mx = all[0].us;
  int64_t wrong = 0;
  for (int r = 0; r < c->nranks; r++) {
    sum += all[r].us;
    if (all[r].us < mn) mn = all[r].us;
    if (all[r].us > mx) mx = all[r].us;
    wrong += all[r].wrong;
  }
  free(all);
  switch (c->o.average) {
    case 1:
      t = sum / c->nranks;
      break;
    case 2:
      t = mn;
      break;
    case 3:
      t = mx;
      break;
    default:
      break;
  }
  m->us = t;
  m->algbw = t > 0 ? (double)k->bytes / (t * 1e3) : 0; /* bytes/us/1e3 = GB/s */
  m->busbw = m->algbw * busFactor(c->o.coll, c->nranks);
  m->wrong = c->o.check ? wrong : -1;
  return 0;
}

/* ---- output ----------------------------------------------------------------- */

static void fmtTime(double us, char* buf, size_t len) {
  if (us >= 10000.0) snprintf(buf, len, "%7.0f", us);
  else if (us >= 100.0) snprintf(buf, len, "%7.1f", us);
  else snprintf(buf, len, "%7.2f", us);
}

static void printRow(const struct ctx* c, const struct row* r) {
  char root[16];
  snprintf(root, sizeof(root), "%d", colls[c->o.coll].rooted ? r->root : -1);
  printf("%12zu  %12zu  %8s  %6s  %6s", r->bytes, r->count, typeName(r->type),
         colls[c->o.coll].reduces ? opNames[r->op] : "none", root);
  for (int p = 0; p < 2; p++) {
    const struct meas* m = &r->m[p];
    if (!m->valid) {
      printf("  %7s  %6s  %6s  %5s", "N/A", "N/A", "N/A", "N/A");
      continue;
    }
    char t[32], w[32];
    fmtTime(m->us, t, sizeof(t));
    if (m->wrong < 0) snprintf(w, sizeof(w), "N/A");
    else snprintf(w, sizeof(w), "%" PRId64, m->wrong);
    printf("  %7s  %6.2f  %6.2f  %5s", t, m->algbw, m->busbw, w);
  }
  printf("\n");
  fflush(stdout);
}

struct rankInfo {
  int32_t pid, device;
  char host[64];
  char desc[192];
};

static void jsonString(FILE* f, const char* s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
    else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
    else fputc(ch, f);
  }
  fputc('"', f);
}

static int writeJson(const struct ctx* c, const struct rankInfo* info, double avgBus, int64_t totalWrong) {
  const struct opts* o = &c->o;
  FILE* f = fopen(o->jsonPath, "w");
  if (f == NULL) {
    fprintf(stderr, PROG ": -J %s: %s\n", o->jsonPath, strerror(errno));
    return -1;
  }
  int version = 0;
  (void)mscclppGetVersion(&version);
  fprintf(f, "{\n  \"tool\": \"mscclpp-perf\",\n  \"version\": %d,\n  \"collective\": \"%s\",\n", version,
          colls[o->coll].name);
  fprintf(f, "  \"nranks\": %d,\n  \"backend\": \"%s\",\n", c->nranks, c->gpu ? "gpu" : "host");
  fprintf(f,
          "  \"config\": {\"minBytes\": %zu, \"maxBytes\": %zu, \"stepBytes\": %zu, \"stepFactor\": %zu, "
          "\"iters\": %d, \"warmupIters\": %d, \"check\": %d, \"blocking\": %d, \"cudaGraphLaunches\": %d, "
          "\"average\": %d, \"root\": %d, \"offsetElements\": %zu},\n",
          o->minBytes, o->maxBytes, o->stepBytes, o->stepFactor, o->iters, o->warmup, o->check, o->blocking,
          o->graphLaunches, o->average, o->root, o->offsetElems);
  fprintf(f, "  \"ranks\": [");
  for (int r = 0; r < c->nranks; r++) {
    fprintf(f, "%s\n    {\"rank\": %d, \"pid\": %d, \"host\": ", r ? "," : "", r, info[r].pid);
    jsonString(f, info[r].host);
    fprintf(f, ", \"device\": %d, \"description\": ", info[r].device);
    jsonString(f, info[r].desc);
    fprintf(f, "}");
  }
  fprintf(f, "\n  ],\n  \"results\": [");
  for (size_t i = 0; i < c->nrows; i++) {
    const struct row* r = &c->rows[i];
    fprintf(f, "%s\n    {\"size\": %zu, \"count\": %zu, \"type\": \"%s\", \"redop\": \"%s\", \"root\": %d", i ? "," : "",
            r->bytes, r->count, typeName(r->type), colls[o->coll].reduces ? opNames[r->op] : "none",
            colls[o->coll].rooted ? r->root : -1);
    for (int p = 0; p < 2; p++) {
      const struct meas* m = &r->m[p];
      fprintf(f, ", \"%s\": ", p == 0 ? "outOfPlace" : "inPlace");
      if (!m->valid) {
        fprintf(f, "null");
        continue;
      }
      fprintf(f, "{\"time_us\": %.3f, \"algbw_GBps\": %.4f, \"busbw_GBps\": %.4f, \"wrong\": ", m->us, m->algbw,
              m->busbw);
      if (m->wrong < 0) fprintf(f, "null}");
      else fprintf(f, "%" PRId64 "}", m->wrong);
    }
    fprintf(f, "}");
  }
  fprintf(f, "\n  ],\n  \"avgBusBandwidth_GBps\": %.4f,\n  \"wrong\": ", avgBus);
  if (o->check) fprintf(f, "%" PRId64 "\n}\n", totalWrong);
  else fprintf(f, "null\n}\n");
  if (fclose(f) != 0) {
    fprintf(stderr, PROG ": -J %s: %s\n", o->jsonPath, strerror(errno));
    return -1;
  }
  return 0;
}

/* An executable `name` in PATH, into buf. */
static int findInPath(const char* name, char* buf, size_t len) {
  const char* path = getenv("PATH");
  if (path == NULL) return 0;
  while (*path) {
    const char* end = strchr(path, ':');
    size_t n = end ? (size_t)(end - path) : strlen(path);
    int w = snprintf(buf, len, "%.*s/%s", (int)n, n ? path : ".", name);
    if (w > 0 && (size_t)w < len && access(buf, X_OK) == 0) return 1;
    path += n + (end != NULL);
  }
  return 0;
}

/* A gnuplot string literal: single quotes, doubled inside. */
static void gnuplotQuoted(FILE* f, const char* s) {
  fputc('\'', f);
  for (; *s; s++) {
    if (*s == '\'') fputc('\'', f);
    fputc(*s, f);
  }
  fputc('\'', f);
}

/* --plot: 0 done or skipped (gnuplot missing), -1 failed. */
static int writePlot(const struct ctx* c) {
  const struct opts* o = &c->o;
  char gnuplot[4096];
  if (!findInPath("gnuplot", gnuplot, sizeof(gnuplot))) {
    fprintf(stderr, PROG ": --plot %s: gnuplot is not in PATH (apt-get install gnuplot-nox); no plot drawn\n",
            o->plotPath);
    return 0;
  }
  char dataPath[] = "/tmp/mscclpp-perf-data-XXXXXX";
  char scriptPath[] = "/tmp/mscclpp-perf-plot-XXXXXX";
  int df = mkstemp(dataPath);
  if (df < 0) {
    fprintf(stderr, PROG ": --plot: mkstemp: %s\n", strerror(errno));
    return -1;
  }
  int sf = mkstemp(scriptPath);
  if (sf < 0) {
    fprintf(stderr, PROG ": --plot: mkstemp: %s\n", strerror(errno));
    close(df);
    unlink(dataPath);
    return -1;
  }
  FILE* d = fdopen(df, "w");
  FILE* s = fdopen(sf, "w");
  if (d == NULL || s == NULL) {
    fprintf(stderr, PROG ": --plot: fdopen: %s\n", strerror(errno));
    if (d) fclose(d);
    else close(df);
    if (s) fclose(s);
    else close(sf);
    unlink(dataPath);
    unlink(scriptPath);
    return -1;
  }
  /* one data block per (type, op), rows of non-zero size (log axis) */
  int nseries = 0;
  char titles[mscclppNumTypes * mscclppNumOps][48];
  for (size_t i = 0; i < c->nrows;) {
    size_t j = i;
    int any = 0;
    for (; j < c->nrows && c->rows[j].type == c->rows[i].type && c->rows[j].op == c->rows[i].op; j++) {
      const struct row* r = &c->rows[j];
      if (r->bytes == 0) continue;
      any = 1;
      fprintf(d, "%zu %.6f %.6f %.6f %.6f\n", r->bytes, r->m[0].us, r->m[0].busbw, r->m[1].valid ? r->m[1].us : 0,
              r->m[1].valid ? r->m[1].busbw : 0);
    }
    if (any && nseries < mscclppNumTypes * mscclppNumOps) {
      snprintf(titles[nseries], sizeof(titles[nseries]), "%s%s%s", typeName(c->rows[i].type),
               colls[o->coll].reduces ? " " : "", colls[o->coll].reduces ? opNames[c->rows[i].op] : "");
      nseries++;
      fprintf(d, "\n\n");
    }
    i = j;
  }
  fclose(d);
  int inPlace = colls[o->coll].inPlace;
  fprintf(s, "set terminal png size 1400,560\nset output ");
  gnuplotQuoted(s, o->plotPath);
  fprintf(s,
          "\nset multiplot layout 1,2 title 'mscclpp-perf %s, %d ranks (%s)'\n"
          "set logscale x 2\nset format x '%%.0b%%BB'\nset xlabel 'size (bytes)'\nset grid\nset key left top\n"
          "set ylabel 'bus bandwidth (GB/s)'\n",
          colls[o->coll].name, c->nranks, c->gpu ? "GPU" : "host backend");
  for (int pass = 0; pass < 2; pass++) {
    if (pass == 1) fprintf(s, "set logscale y 10\nset ylabel 'time (us)'\n");
    int col = pass == 0 ? 3 : 2;
    fprintf(s, "plot ");
    if (nseries == 0) fprintf(s, "1/0 notitle");
    for (int k = 0; k < nseries; k++) {
      fprintf(s, "%s", k ? ", " : "");
      gnuplotQuoted(s, dataPath);
      fprintf(s, " index %d using 1:%d with linespoints title '%s out-of-place'", k, col, titles[k]);
      if (inPlace) {
        fprintf(s, ", ");
        gnuplotQuoted(s, dataPath);
        fprintf(s, " index %d using 1:%d with linespoints dashtype 2 title '%s in-place'", k, col + 2, titles[k]);
      }
    }
    fprintf(s, "\n");
  }
  fprintf(s, "unset multiplot\n");
  fclose(s);
  int rc = -1;
  pid_t pid = fork();
  if (pid == 0) {
    execl(gnuplot, "gnuplot", scriptPath, (char*)NULL);
    _exit(127);
  }
  if (pid > 0) {
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    rc = WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
    if (rc != 0) fprintf(stderr, PROG ": --plot %s: gnuplot failed (status %d)\n", o->plotPath, st);
  } else {
    fprintf(stderr, PROG ": --plot: fork: %s\n", strerror(errno));
  }
  unlink(dataPath);
  unlink(scriptPath);
  return rc;
}

/* ---- setup ------------------------------------------------------------------ */


static void* allocBuf(struct ctx* c, size_t bytes) {
  if (bytes == 0) bytes = 1;
#ifdef MSCCLPP_HAVE_CUDA
  if (c->gpu) {
    void* p = NULL;
    if (!cudaOk(c, cudaMalloc(&p, bytes), "cudaMalloc")) return NULL;
    if (!zeroBuf(c, p, bytes)) {
      (void)cudaFree(p);
      return NULL;
    }
    return p;
  }
#endif
  void* p = malloc(bytes);
  if (p == NULL) {
    fprintf(stderr, PROG ": rank %d: cannot allocate %zu bytes\n", c->rank, bytes);
    c->failed = 1;
  } else {
    memset(p, 0, bytes);
  }
  return p;
}

static void freeBuf(struct ctx* c, void* p) {
  if (p == NULL) return;
#ifdef MSCCLPP_HAVE_CUDA
  if (c->gpu) {
    (void)cudaFree(p);
    return;
  }
#endif
  (void)c;
  free(p);
}

static int selectDevice(struct ctx* c) {
  c->device = MSCCLPP_HOST_BACKEND_DEVICE;
  c->gpu = 0;
#ifdef MSCCLPP_HAVE_CUDA
  int count = mscclppGpuDeviceCount();
  if (count <= 0) return 0;
  int envRank, envLocal;
  envRanks(&envRank, &envLocal);
  int local = envLocal >= 0 ? envLocal : (envRank >= 0 ? envRank : 0);
  c->device = local % count;
  c->gpu = 1;
  if (!cudaOk(c, cudaSetDevice(c->device), "cudaSetDevice")) return -1;
#else
  (void)c;
#endif
  return 0;
}

static int createStream(struct ctx* c) {
  c->stream = NULL;
#ifdef MSCCLPP_HAVE_CUDA
  if (c->gpu) {
    cudaStream_t s;
    if (!cudaOk(c, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate")) return -1;
    c->stream = (mscclppStream_t)s;
    if (!cudaOk(c, cudaEventCreate(&c->ev0), "cudaEventCreate")) return -1;
    if (!cudaOk(c, cudaEventCreate(&c->ev1), "cudaEventCreate")) return -1;
  }
#endif
  return 0;
}

static void destroyStream(struct ctx* c) {
#ifdef MSCCLPP_HAVE_CUDA
  if (c->gpu && c->stream != NULL) {
    (void)cudaEventDestroy(c->ev0);
    (void)cudaEventDestroy(c->ev1);
    (void)cudaStreamDestroy((cudaStream_t)c->stream);
  }
#endif
  c->stream = NULL;
}

/* Gather and (rank 0) print who runs where. */
static int printHeader(struct ctx* c, struct rankInfo** infoOut) {
  const struct opts* o = &c->o;
  struct rankInfo* info = calloc((size_t)c->nranks, sizeof(*info));
  if (info == NULL) {
    fprintf(stderr, PROG ": out of memory\n");
    return -1;
  }
  struct rankInfo* me = &info[c->rank];
  me->pid = (int32_t)getpid();
  me->device = c->device;
  if (gethostname(me->host, sizeof(me->host)) != 0) snprintf(me->host, sizeof(me->host), "?");
  me->host[sizeof(me->host) - 1] = '\0';
  if (c->gpu) {
    if (mscclppGpuDescribe(c->device, me->desc, sizeof(me->desc)) != mscclppSuccess)
      snprintf(me->desc, sizeof(me->desc), "device %d", c->device);
  } else {
    snprintf(me->desc, sizeof(me->desc), "host backend (no GPU)");
  }
  mscclppResult_t res = mscclppBootstrapAllGather(c->comm, info, sizeof(*info));
  if (res != mscclppSuccess) {
    free(info);
    callFailed(c, "mscclppBootstrapAllGather", res);
    return -1;
  }
  *infoOut = info;
  if (c->rank != 0) return 0;
  int version = 0;
  (void)mscclppGetVersion(&version);
  printf("# mscclpp-perf %s: mscclpp %d.%d.%d, %d ranks, %s\n", colls[o->coll].name, version / 10000,
         version / 100 % 100, version % 100, c->nranks, c->gpu ? "GPU" : "host backend");
  if (o->stepFactor > 1)
    printf("# minBytes %zu maxBytes %zu step: %zu(factor) warmup iters: %d iters: %d validation: %d graph: %d "
           "blocking: %d average: %d\n",
           o->minBytes, o->maxBytes, o->stepFactor, o->warmup, o->iters, o->check, o->graphLaunches, o->blocking,
           o->average);
  else
    printf("# minBytes %zu maxBytes %zu step: %zu(bytes) warmup iters: %d iters: %d validation: %d graph: %d "
           "blocking: %d average: %d\n",
           o->minBytes, o->maxBytes, o->stepBytes, o->warmup, o->iters, o->check, o->graphLaunches, o->blocking,
           o->average);
  const char* algo = getenv("MSCCLPP_ALGO");
  if (algo != NULL && algo[0] != '\0') printf("# MSCCLPP_ALGO=%s\n", algo);
  printf("#\n# Using devices\n");
  for (int r = 0; r < c->nranks; r++)
    printf("#  Rank %2d Pid %7d on %10s device %2d %s\n", r, info[r].pid, info[r].host, info[r].device, info[r].desc);
  printf("#\n");
  printf("# %58s out-of-place %23s in-place\n", "", "");
  printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "size", "count", "type", "redop",
         "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
  printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)", "(elements)", "", "", "",
         "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  fflush(stdout);
  return 0;
}

static int addRow(struct ctx* c, const struct row* r) {
  if (c->nrows == c->capRows) {
    size_t cap = c->capRows ? c->capRows * 2 : 64;
    struct row* p = realloc(c->rows, cap * sizeof(*p));
    if (p == NULL) {
      fprintf(stderr, PROG ": out of memory\n");
      return -1;
    }
    c->rows = p;
    c->capRows = cap;
  }
  c->rows[c->nrows++] = *r;
  return 0;
}

static size_t nextSize(const struct opts* o, size_t size) {
  size_t next;
  if (o->stepFactor > 1) {
    if (size == 0) return 1;
    if (size > SIZE_MAX / o->stepFactor) return SIZE_MAX;
    next = size * o->stepFactor;
  } else {
    if (o->stepBytes == 0 || size > SIZE_MAX - o->stepBytes) return SIZE_MAX;
    next = size + o->stepBytes;
  }
  return next;
}

/* All sizes, types and ops. 0: ran (rows hold #wrong), -1: a call failed. */
static int runAll(struct ctx* c) {
  const struct opts* o = &c->o;
  int nops = colls[o->coll].reduces ? o->nops : 1;
  for (int ti = 0; ti < o->ntypes; ti++) {
    for (int oi = 0; oi < nops; oi++) {
      int type = o->typeList[ti], op = colls[o->coll].reduces ? o->opList[oi] : mscclppSum;
      size_t lastBytes = SIZE_MAX;
      for (size_t size = o->minBytes; size <= o->maxBytes; size = nextSize(o, size)) {
        struct row r;
        memset(&r, 0, sizeof(r));
        for (int p = 0; p < 2; p++) {
          struct call k;
          setupCall(c, size, type, op, p, &k);
          if (p == 0) {
            if (k.bytes == lastBytes) break; /* a size that rounds to the last one's count */
            lastBytes = k.bytes;
            r.bytes = k.bytes;
            r.count = k.count;
            r.type = type;
            r.op = op;
            r.root = o->root;
          }
          if (p == 1 && !colls[o->coll].inPlace) continue;
          if (measure(c, &k, &r.m[p]) != 0) return -1;
        }
        if (r.m[0].valid) {
          if (c->rank == 0) printRow(c, &r);
          if (addRow(c, &r) != 0) return -1;
        }
        if (size == SIZE_MAX) break;
      }
    }
  }
  return 0;
}

int main(int argc, char** argv) {
  struct ctx* c = &g_ctx;
  int envRank, envLocal;
  envRanks(&envRank, &envLocal);
  quiet = envRank > 0;
  int pr = parseArgs(argc, argv, &c->o);
  if (pr != 0) return pr > 0 ? 0 : pr == -2 ? EXIT_FAIL : EXIT_USAGE;
  const struct opts* o = &c->o;
  c->rank = envRank >= 0 ? envRank : 0;

  if (selectDevice(c) != 0) return EXIT_FAIL;
  mscclppResult_t res = mscclppCommInitFromEnv(&c->comm);
  if (res != mscclppSuccess) {
    callFailed(c, "mscclppCommInitFromEnv", res);
    return EXIT_FAIL;
  }
  (void)mscclppCommRank(c->comm, &c->rank);
  (void)mscclppCommSize(c->comm, &c->nranks);
  (void)mscclppCommLocalRank(c->comm, &c->localRank);
  (void)mscclppCommLocalSize(c->comm, &c->localNranks);
  if (o->root >= c->nranks) {
    if (c->rank == 0) fprintf(stderr, PROG ": -r %d is not a rank of 0..%d\n", o->root, c->nranks - 1);
    (void)mscclppCommDestroy(c->comm);
    return EXIT_USAGE;
  }
  if (c->gpu) {
    int count = mscclppGpuDeviceCount();
    if (c->localRank % count != c->device)
      fprintf(stderr,
              PROG ": rank %d: warning: the launcher's environment gave no local rank matching this host's "
                   "(%d); using device %d\n",
              c->rank, c->localRank, c->device);
    if (c->localNranks > count && !mscclppGpuMpsRunning(NULL) && c->localRank == 0)
      fprintf(stderr,
              PROG ": warning: %d ranks share %d GPU%s on this host and no CUDA MPS daemon answers (%s/control): "
                   "without MPS the GPU time-slices between the ranks' processes, so a collective's kernels do "
                   "not run at the same time and every step waits for a context switch; the numbers will be far "
                   "below the hardware's. Run under MPS: mscclpp-run --mps, or nvidia-cuda-mps-control -d.\n",
              c->localNranks, count, count > 1 ? "s" : "",
              getenv("CUDA_MPS_PIPE_DIRECTORY") ? getenv("CUDA_MPS_PIPE_DIRECTORY") : "/tmp/nvidia-mps");
  }
  if (o->graphLaunches > 0 && !c->gpu && c->rank == 0)
    fprintf(stderr, PROG ": -G %d: CUDA graphs need a GPU; the host backend runs the calls directly\n",
            o->graphLaunches);
  int exitCode = EXIT_FAIL;
  struct rankInfo* info = NULL;
  if (createStream(c) != 0) goto fail_destroy_comm;
  c->bufBytes = o->maxBytes + o->offsetElems * 8;
  c->sendBase = allocBuf(c, c->bufBytes);
  c->recvBase = allocBuf(c, c->bufBytes);
  if (c->sendBase == NULL || c->recvBase == NULL) goto fail_free_bufs;
  if (o->check) {
    size_t hb = o->maxBytes ? o->maxBytes : 1;
    c->hImg = malloc(hb);
    c->hExp = malloc(hb);
    c->hOut = malloc(hb);
    if (c->hImg == NULL || c->hExp == NULL || c->hOut == NULL) {
      fprintf(stderr, PROG ": rank %d: cannot allocate 3 x %zu bytes of host memory for the checks\n", c->rank, hb);
      goto fail_free_bufs;
    }
  }
  if (printHeader(c, &info) != 0) goto fail_free_bufs;
  if (runAll(c) != 0) goto fail_free_bufs;

  /* footer */
  int64_t totalWrong = 0;
  double busSum = 0;
  int busCount = 0;
  for (size_t i = 0; i < c->nrows; i++)
    for (int p = 0; p < 2; p++) {
      const struct meas* m = &c->rows[i].m[p];
      if (!m->valid) continue;
      busSum += m->busbw;
      busCount++;
      if (m->wrong > 0) totalWrong += m->wrong;
    }
  double avgBus = busCount ? busSum / busCount : 0;
  exitCode = totalWrong > 0 ? EXIT_FAIL : 0;
  if (c->rank == 0) {
    if (o->check) printf("# Out of bounds values : %" PRId64 " %s\n", totalWrong, totalWrong ? "FAILED" : "OK");
    printf("# Avg bus bandwidth    : %g \n#\n", avgBus);
    fflush(stdout);
    if (o->jsonPath != NULL && writeJson(c, info, avgBus, totalWrong) != 0) exitCode = EXIT_FAIL;
    if (o->plotPath != NULL && writePlot(c) != 0) exitCode = EXIT_FAIL;
  }

fail_free_bufs:
  free(info);
  free(c->hImg);
  free(c->hExp);
  free(c->hOut);
  free(c->rows);
  freeBuf(c, c->sendBase);
  freeBuf(c, c->recvBase);
  destroyStream(c);
fail_destroy_comm:
  if (c->failed) {
    /* a peer may be stuck in a call we left: exiting closes our sockets, so it
     * learns at once instead of waiting for the timeout */
    return EXIT_FAIL;
  }
  res = mscclppCommDestroy(c->comm);
  if (res != mscclppSuccess) {
    callFailed(c, "mscclppCommDestroy", res);
    return EXIT_FAIL;
  }
  return exitCode;
}
