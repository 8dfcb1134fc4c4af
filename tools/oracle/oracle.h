/* SPDX-License-Identifier: MIT */
/*
 * The oracle of collective results: the inputs of a checked call and what
 * the call must leave, for mscclpp-perf and for every test that checks a
 * collective's output.
 *
 * Independent of the library's reduction code: it includes nothing of
 * src/coll and computes every expected value on its own, exactly (integers
 * in 64 bits with wrap-around, floating point in double on values chosen so
 * that every partial result is exact), rounding once to the type at the
 * end. It shares one thing with the library, the floating-point codec
 * (src/core/fpconv.h, the one codec: issue #19), so a program that links
 * the oracle also links the codec: mscclpp_internal holds it, and a
 * program that may reach no library symbol compiles src/core/fpconv.c
 * itself. Nothing here calls the library.
 *
 * Inputs are a function of (seed, rank, index): every rank computes every
 * other rank's inputs, so no expected value travels between ranks.
 */
#ifndef MSCCLPP_TOOLS_ORACLE_ORACLE_H_
#define MSCCLPP_TOOLS_ORACLE_ORACLE_H_

#include <stddef.h>
#include <stdint.h>

#include "mscclpp/coll.h" /* the type and operator numbers; no function of it is called */

#ifdef __cplusplus
extern "C" {
#endif

/* ---- types ------------------------------------------------------------------ */

enum oracleClass { ORACLE_INT, ORACLE_UINT, ORACLE_FLT };

struct oracleType {
  size_t size;
  enum oracleClass cls;
  int ebits, mbits; /* floating point: exponent and mantissa bits */
  int fn;           /* fp8e4m3: no infinity, only S.1111.111 is NaN */
};
extern const struct oracleType oracleTypes[mscclppNumTypes];

/* A number of a type: the field of its class (ORACLE_INT: s, ORACLE_UINT:
 * u, ORACLE_FLT: d); arithmetic keeps all three. */
struct oracleNum {
  int64_t s;
  uint64_t u;
  double d;
};

/* The element bits of type t at src, little endian, in the low bytes. */
uint64_t oracleBits(int t, const void* src);
/* Store v as one element of type t (floating point: the codec; integers:
 * the low bytes, so wrapped to the width). */
void oraclePut(int t, struct oracleNum v, void* dst);
/* v as the type holds it: rounded (floating point) or wrapped (integers). */
struct oracleNum oracleRound(int t, struct oracleNum v);
/* acc op v in each of the three views (integers wrap around, as the
 * collectives' integer operators do). op: an mscclppRedOp_t but avg (sum). */
struct oracleNum oracleApply(int op, struct oracleNum acc, struct oracleNum v);

/* splitmix64's finalizer: the hash of every input. */
uint64_t oracleMix(uint64_t x);

/* ---- one checked call ------------------------------------------------------- */

/* The inputs, chosen for what the checker wants of the results. */
enum oracleShape {
  /* mscclpp-perf's (and the plan tests'): values that reach far into each
   * type at any rank count: sums of integers up to the type's exact range
   * over at most 8 ranks active per index, products of +-0.5, 1 and 2 over
   * at most 6, random finite values for max and min. Floating-point results
   * compare as numbers, avg within 1 ulp (oracleWrong). */
  ORACLE_WIDE,
};

/* The operator of a call that only moves data: its inputs are random bits,
 * compared bitwise. */
#define ORACLE_COPY (-1)

/* What one checked call computes. */
struct oracleCall {
  enum oracleShape shape;
  int type, op, nranks; /* op: an mscclppRedOp_t or ORACLE_COPY */
  uint64_t seed;        /* fresh per call: ranks agree on it */
  size_t ts;            /* the element size */
  /* ORACLE_WIDE's limits */
  int64_t sLimit;  /* sum/avg: signed values in [-sLimit, sLimit] */
  uint64_t uLimit; /* sum/avg: unsigned values in [0, uLimit] */
  int64_t fLimit;  /* sum/avg: floating-point integers in [-fLimit, fLimit] */
  int sumActive, prodActive;
};

void oracleInit(struct oracleCall* g, enum oracleShape shape, int type, int op, int nranks, uint64_t seed);
/* What rank r brings to the reduction at index idx: its input value. */
struct oracleNum oracleValue(const struct oracleCall* g, int r, size_t idx);
/* Rank r's input element idx, as bytes. */
void oracleInput(const struct oracleCall* g, int r, size_t idx, void* dst);
/* Rank r's input elements [first, first + n). */
void oracleInputs(const struct oracleCall* g, int r, size_t first, size_t n, void* dst);
/* The exact reduction over all ranks of input index idx, as bytes. */
void oracleReduced(const struct oracleCall* g, size_t idx, void* dst);
/* oracleReduced of indices [first, first + n). */
void oracleReductions(const struct oracleCall* g, size_t first, size_t n, void* dst);
/* 1 when `got` is not an acceptable result for `exp` (an element of the
 * call's type): bitwise, but ORACLE_WIDE's floating-point results, which
 * compare as numbers (avg: within 1 ulp, as a kernel may divide in float). */
int oracleWrong(const struct oracleCall* g, const void* got, const void* exp);

/* ---- collectives ------------------------------------------------------------ */

/* The collectives whose output the oracle knows (mscclpp's, in the order of
 * its own numbering). */
enum oracleColl {
  ORACLE_ALLREDUCE,
  ORACLE_ALLGATHER,
  ORACLE_REDUCESCATTER,
  ORACLE_BROADCAST,
  ORACLE_REDUCE,
  ORACLE_ALLTOALL,
  ORACLE_SENDRECV, /* a ring: each rank sends to rank + 1, receives from rank - 1 */
};

/* A rank's input and output sizes, in elements, for the API's count. The
 * input is always oracleInputs(g, rank, 0, oracleInElems(...)). */
size_t oracleInElems(enum oracleColl c, size_t count, int nranks);
size_t oracleOutElems(enum oracleColl c, size_t count, int nranks);
/* What collective c must leave in rank `rank`'s output (root: broadcast's
 * and reduce's), oracleOutElems(c, count, nranks) elements. Reduce: the
 * root's (a non-root's output is not written: the caller checks it as it
 * was). */
void oracleExpected(const struct oracleCall* g, enum oracleColl c, int rank, int root, size_t count, void* dst);

/* ---- all-to-all-v's counts -------------------------------------------------- */

/* mscclpp-perf's: every rank sends `count` elements in all and receives
 * `count` (its bandwidth is comparable with all-to-all's). n - 1 random cuts
 * of [0, count] give n parts (some 0) and a shift, a function of the seed:
 * rank s sends part[(d - s + shift) mod n] elements to rank d. */
void oracleA2avParts(uint64_t seed, int n, size_t count, size_t* part, int* shift);
size_t oracleA2avPartCount(const size_t* part, int shift, int n, int s, int d);
/* Rank s's displacement for rank d: its blocks packed in rank order. */
size_t oracleA2avPartDispl(const size_t* part, int shift, int n, int s, int d);

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_TOOLS_ORACLE_ORACLE_H_ */
