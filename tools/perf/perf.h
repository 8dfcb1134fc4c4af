/* SPDX-License-Identifier: MIT */
/*
 * mscclpp-perf's parts (tools/perf/): what one file of it gives the others.
 *   main.c     the sweep over sizes, types and operations; main
 *   opts.c     the vocabulary (collectives, types, operations) and the flags
 *   check.c    the checked inputs and their expected results
 *   selftest.c --selftest: the checker's own arithmetic
 *   run.c      buffers, devices, streams; one checked and timed measurement
 *   report.c   the table, -J's JSON and --plot's PNG
 */
#ifndef MSCCLPP_TOOLS_PERF_PERF_H_
#define MSCCLPP_TOOLS_PERF_PERF_H_

#include <stdint.h>
#include <stdio.h>

#include "mscclpp/coll.h"
#include "mscclpp/comm.h"
#include "mscclpp/core.h"
#include "mscclpp/plan.h"

#ifdef MSCCLPP_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#define PROG "mscclpp-perf"
#define EXIT_FAIL 1
#define EXIT_USAGE 2
#define MAX_OFFSET_ELEMS 4096
#define SUM_ACTIVE_MAX 8
#define PROD_ACTIVE_MAX 6

/* ---- vocabulary (opts.c) ---------------------------------------------------- */

enum coll {
  C_ALLREDUCE,
  C_ALLGATHER,
  C_REDUCESCATTER,
  C_BROADCAST,
  C_REDUCE,
  C_ALLTOALL,
  C_SENDRECV,
  C_ALLTOALLV,
  C_COUNT
};

struct collInfo {
  const char* name;
  const char* api; /* for error messages */
  int reduces;     /* takes an operator */
  int rooted;      /* takes a root */
  int inPlace;     /* has an in-place form we run */
};
extern const struct collInfo colls[C_COUNT];

enum cls { CLS_INT, CLS_UINT, CLS_FLT };

struct typeInfo {
  const char* names[3]; /* accepted spellings for -d; names[0] is printed */
  enum cls cls;
  int ebits, mbits; /* floating point: exponent and mantissa bits */
  int fn;           /* fp8e4m3: no infinity, only S.1111.111 is NaN */
};
extern const struct typeInfo types[mscclppNumTypes];
extern const char* const opNames[mscclppNumOps];

/* Bus bandwidth = algorithm bandwidth * this (nccl-tests' PERFORMANCE.md). */
double busFactor(enum coll c, int n);
const char* typeName(int t);

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
  int progressSec; /* --progress */
  const char* tracePath; /* --trace: MSCCLPP_TRACE for this run */
  const char* planPath;  /* --plan: the execution plan timed beside the built-in algorithm */
  mscclppPlan_t plan;    /* ... loaded by parseArgs (its collective is the run's) */
  mscclppPlanInfo planInfo;
};

extern int quiet; /* not rank 0: print no usage text */

/* The rank (and local rank) the launcher gave, before the communicator
 * exists: for device selection and to print usage errors once. -1: none. */
void envRanks(int* rank, int* localRank);
void usage(FILE* f);
/* 0: parsed; 1: help printed (or --selftest passed); -1: bad usage
 * (printed); -2: --selftest failed. */
int parseArgs(int argc, char** argv, struct opts* o);

/* ---- checked inputs and expected results (check.c) -------------------------- */

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

uint64_t rawBits(int t, const void* src);
void putNum(int t, struct num v, void* dst);
uint64_t mix64(uint64_t x);
void genInit(struct gen* g, enum coll c, int type, int op, int nranks, int rank, int root, uint64_t seed);
/* Rank r's input value at index idx, for a reduction. */
struct num genValue(const struct gen* g, int r, size_t idx);
/* Rank r's input element idx, as bytes. */
void genElem(const struct gen* g, int r, size_t idx, void* dst);
void genRange(const struct gen* g, int r, size_t first, size_t n, unsigned char* dst);
/* acc op v in each of the three views (signed integers wrap around). */
struct num numApply(int op, struct num acc, struct num v);
/* The exact reduction over all ranks of input index idx, as bytes. */
void reduceElem(const struct gen* g, size_t idx, void* dst);
/* 1 when `got` is not an acceptable result for `exp`. */
int elemWrong(const struct gen* g, const void* got, const void* exp);

/* alltoallv's counts for one call, the same on every rank (a function of
 * the seed): `count` split into n parts (some 0), and a shift; rank s
 * sends part[(d - s + shift) mod n] elements to rank d, so that every
 * rank sends `count` elements in all and receives `count`. */
void a2avParts(uint64_t seed, int n, size_t count, size_t* part, int* shift);
size_t a2avCount(const size_t* part, int shift, int n, int s, int d);
/* Rank s's displacement for rank d: its blocks packed in rank order. */
size_t a2avDispl(const size_t* part, int shift, int n, int s, int d);
int selfTest(void);

/* ---- the run (run.c) -------------------------------------------------------- */

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
  struct meas m[2]; /* out-of-place, in-place; with --plan: the built-in algorithm, the plan (the plan's form) */
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
  /* alltoallv: sets of (sendcounts, sdispls), nranks each, in the
   * collective's memory (device or host): a cycle of a2avNsets for the
   * timed calls, then one for the checked call; the calls' recvcounts and
   * rdispls; a host image of the sets */
  size_t* a2avCounts;
  size_t* a2avOut;
  size_t* a2avHost;
  size_t* a2avPart; /* host: one plan's parts (a2avParts) */
  int a2avNsets, a2avNext;
  struct row* rows;
  size_t nrows, capRows;
  int failed; /* a call failed: stop */
  int usePlan; /* --plan: launch() runs the plan (mscclppPlanExecute) */
};

/* ---- one call --------------------------------------------------------------- */

/* Counts and buffers of one (size, type, placement). */
struct call {
  size_t count;     /* the API's count argument */
  size_t sendElems; /* this rank's input */
  size_t recvElems; /* this rank's output */
  size_t bytes;     /* the "size" column: max(send, recv) bytes (alltoallv: what each rank sends) */
  int type, op, root, inPlace;
  size_t ts;
  void* send;
  void* recv;
};

struct rankInfo {
  int32_t pid, device;
  char host[64];
  char desc[192];
};


void callFailed(struct ctx* c, const char* what, mscclppResult_t res);
#ifdef MSCCLPP_HAVE_CUDA
int cudaOk(struct ctx* c, cudaError_t e, const char* what);
#endif
int copyToBuf(struct ctx* c, void* dst, const void* src, size_t bytes);
int copyFromBuf(struct ctx* c, void* dst, const void* src, size_t bytes);
int zeroBuf(struct ctx* c, void* dst, size_t bytes);
int syncStream(struct ctx* c);
void setupCall(const struct ctx* c, size_t bytes, int type, int op, int inPlace, struct call* k);
mscclppResult_t launch(struct ctx* c, const struct call* k);
/* Measure one placement; every rank gets the combined result. */
int measure(struct ctx* c, const struct call* k, struct meas* m);
/* alltoallv's buffers for counts (main): 0, or -1 after a failure (printed). */
int a2avAlloc(struct ctx* c);
void a2avFree(struct ctx* c);
void* allocBuf(struct ctx* c, size_t bytes);
void freeBuf(struct ctx* c, void* p);
int selectDevice(struct ctx* c);
int createStream(struct ctx* c);
void destroyStream(struct ctx* c);

/* ---- output (report.c) ------------------------------------------------------ */

void printRow(const struct ctx* c, const struct row* r);
int writeJson(const struct ctx* c, const struct rankInfo* info, double avgBus, int64_t totalWrong);
/* --plot: 1 drawn, 0 skipped (gnuplot missing, said on stderr), -1 failed. */
int writePlot(const struct ctx* c);
/* Gather and (rank 0) print who runs where. */
int printHeader(struct ctx* c, struct rankInfo** infoOut);

#endif /* MSCCLPP_TOOLS_PERF_PERF_H_ */
