/* SPDX-License-Identifier: MIT */
/*
 * mscclpp-perf's parts (tools/perf/): what one file of it gives the others.
 *   main.c     the sweep over sizes, types and operations; main
 *   opts.c     the vocabulary (collectives, types, operations) and the flags
 *   selftest.c --selftest: the oracle's own arithmetic
 *   run.c      buffers, devices, streams; one checked and timed measurement
 *   report.c   the table, -J's JSON and --plot's PNG
 * The checked inputs and their expected results are the oracle's
 * (tools/oracle/oracle.h), which the tests use too.
 */
#ifndef MSCCLPP_TOOLS_PERF_PERF_H_
#define MSCCLPP_TOOLS_PERF_PERF_H_

#include <stdint.h>
#include <stdio.h>

#include "mscclpp/coll.h"
#include "mscclpp/comm.h"
#include "mscclpp/core.h"
#include "mscclpp/plan.h"
#include "oracle.h"

#ifdef MSCCLPP_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#define PROG "mscclpp-perf"
#define EXIT_FAIL 1
#define EXIT_USAGE 2
#define MAX_OFFSET_ELEMS 4096

/* ---- vocabulary (opts.c) ---------------------------------------------------- */

/* The oracle's numbers where it has the collective (checkedCall passes
 * them on); all-to-all-v's counts are perf's own (oracleA2avParts). */
enum coll {
  C_ALLREDUCE = ORACLE_ALLREDUCE,
  C_ALLGATHER = ORACLE_ALLGATHER,
  C_REDUCESCATTER = ORACLE_REDUCESCATTER,
  C_BROADCAST = ORACLE_BROADCAST,
  C_REDUCE = ORACLE_REDUCE,
  C_ALLTOALL = ORACLE_ALLTOALL,
  C_SENDRECV = ORACLE_SENDRECV,
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

struct typeInfo {
  const char* names[3]; /* accepted spellings for -d; names[0] is printed */
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

/* --selftest (selftest.c): 0, or EXIT_FAIL (printed). */
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
