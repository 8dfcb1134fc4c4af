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
  /* The tests': small integers -- sum, avg, max and min in [-8, 8] ([0, 8]
   * unsigned, [-2, 2] fp8 e4m3, [-1, 1] fp8 e5m2), prod +-1 and +-2 (1 and
   * 2 unsigned) -- so that at up to 8 ranks every partial result is exact in
   * every type, whatever the order of reduction, and avg's one rounding is
   * the same whether a kernel divides in float or in double: results
   * compare bitwise. Inputs repeat every ORACLE_PERIOD indices, so that a
   * GiB of inputs or expected values fills by copying (oracleInputs). */
  ORACLE_SMALL,
};

/* ORACLE_SMALL's period: a prime, so no chunk or block size of the library
 * is a multiple of it. */
#define ORACLE_PERIOD 65521

/* The operator of a call that only moves data: its inputs are random bits,
 * compared bitwise. */
#define ORACLE_COPY (-1)

/* NCCL's PreMulSum (ncclRedOpCreatePreMulSum): every rank's input times its
 * own scalar (rounded to the type), then summed. An operator of the NCCL
 * layer, not of mscclpp, checked by nccl_worker; its scalars are a call's
 * `scalars` (oracleInit leaves them NULL: set before use). */
#define ORACLE_PREMULSUM mscclppNumOps

/* What one checked call computes. */
struct oracleCall {
  enum oracleShape shape;
  int type, op, nranks;  /* op: an mscclppRedOp_t, ORACLE_PREMULSUM or ORACLE_COPY */
  uint64_t seed;         /* fresh per call: ranks agree on it */
  size_t ts;             /* the element size */
  const double* scalars; /* ORACLE_PREMULSUM: rank r's scalar is scalars[r] */
  /* ORACLE_WIDE's limits */
  int64_t sLimit;  /* sum/avg: signed values in [-sLimit, sLimit] */
  uint64_t uLimit; /* sum/avg: unsigned values in [0, uLimit] */
  int64_t fLimit;  /* sum/avg: floating-point integers in [-fLimit, fLimit] */
  int sumActive, prodActive;
};

void oracleInit(struct oracleCall* g, enum oracleShape shape, int type, int op, int nranks, uint64_t seed);
/* What rank r brings to the reduction at index idx: its input value
 * (ORACLE_PREMULSUM: times its scalar, rounded to the type). */
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
 * its own numbering, then NCCL's gather and scatter, which nccl_worker
 * checks). */
enum oracleColl {
  ORACLE_ALLREDUCE,
  ORACLE_ALLGATHER,
  ORACLE_REDUCESCATTER,
  ORACLE_BROADCAST,
  ORACLE_REDUCE,
  ORACLE_ALLTOALL,
  ORACLE_SENDRECV, /* a ring: each rank sends to rank + 1, receives from rank - 1 */
  ORACLE_GATHER,
  ORACLE_SCATTER,
};

/* A rank's input and output sizes, in elements, for the API's count (the
 * root's, for gather and scatter). The input is always oracleInputs(g,
 * rank, 0, oracleInElems(...)). */
size_t oracleInElems(enum oracleColl c, size_t count, int nranks);
size_t oracleOutElems(enum oracleColl c, size_t count, int nranks);
/* What collective c must leave in rank `rank`'s output (root: broadcast's,
 * reduce's, gather's, scatter's), oracleOutElems(c, count, nranks)
 * elements. Reduce: the root's (a non-root's output is not written: the
 * caller checks it as it was); gather: the root's. */
void oracleExpected(const struct oracleCall* g, enum oracleColl c, int rank, int root, size_t count, void* dst);

/* ---- messages (send/recv, all-to-all-v blocks) ------------------------------ */

/* The bytes of the message named by `key` (the caller's: a pair of ranks, a
 * call number), the same on every rank. */
void oracleBytes(uint64_t seed, uint64_t key, size_t bytes, void* dst);

/* ---- all-to-all-v's counts -------------------------------------------------- */

/* mscclpp-perf's: every rank sends `count` elements in all and receives
 * `count` (its bandwidth is comparable with all-to-all's). n - 1 random cuts
 * of [0, count] give n parts (some 0) and a shift, a function of the seed:
 * rank s sends part[(d - s + shift) mod n] elements to rank d. */
void oracleA2avParts(uint64_t seed, int n, size_t count, size_t* part, int* shift);
size_t oracleA2avPartCount(const size_t* part, int shift, int n, int s, int d);
/* Rank s's displacement for rank d: its blocks packed in rank order. */
size_t oracleA2avPartDispl(const size_t* part, int shift, int n, int s, int d);

/* The tests' (coll_worker, coll_gpu_worker): call k's count from rank s to
 * rank d of n, any matrix: counts of 0, 1, primes up to 4099; on odd calls
 * one rank sends nothing, every third call one rank receives nothing. Where
 * maxCount is over 4099, every fifth call's counts reach up to it (the GPU's
 * exported buffers); every count is at most maxCount. */
size_t oracleA2avCount(uint64_t seed, int k, int n, int s, int d, size_t maxCount);
/* The bytes of block (s -> d) of call k (oracleBytes of the three). */
void oracleA2avBlock(uint64_t seed, int k, int s, int d, size_t bytes, void* dst);
/* What rank `me` must get back as recvcounts and rdispls (its blocks packed
 * in rank order) from call k of oracleA2avCount. */
void oracleA2avRecv(uint64_t seed, int k, int n, int me, size_t maxCount, size_t* recvcounts, size_t* rdispls);

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_TOOLS_ORACLE_ORACLE_H_ */
