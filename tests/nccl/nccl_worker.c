/* SPDX-License-Identifier: MIT */
/*
 * The NCCL API of libmscclpp_nccl.so on the host backend (host buffers), in
 * real processes started by mscclpp-run. Compiled against our nccl.h and
 * linked to the library only (no mscclpp symbol is reachable).
 *
 *   nccl_worker api       every call of the API (see main)
 *   nccl_worker kill V    rank V SIGKILLs itself after a first allreduce;
 *                         every survivor's ncclCommGetAsyncError must report
 *                         an error within 10 s, a later allreduce must fail
 *                         (not hang), and ncclCommAbort must return; prints
 *                         SURVIVOR_OK (tests/bootstrap/test_kill.sh checks)
 *   nccl_worker shrink V  rank V SIGKILLs itself after a first allreduce; each
 *                         survivor sees ncclRemoteError, NCCL_SHRINK_DEFAULT
 *                         is refused, NCCL_SHRINK_ABORT without V gives a
 *                         communicator whose collectives are checked (blocking,
 *                         then a nonblocking shrink of it with nobody
 *                         excluded); the parent is aborted (odd ranks) or
 *                         finalized and destroyed (even ranks, as PyTorch's
 *                         shrink_group does); prints SURVIVOR_OK
 *   nccl_worker exit-live nccl-tests' parallel init: every rank exits with its
 *                         communicator alive, at its own moment; exit 0 each
 *   nccl_worker fallback  MSCCLPP_NCCL_FALLBACK errors (one process)
 *
 * The first unique id travels through a file named after the job's
 * MSCCLPP_COMM_SECRET (mscclpp-run sets a fresh one per run); later ids
 * travel by ncclBroadcast on an existing communicator.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/fpconv.h"
#include "nccl/nccl.h"
#include "oracle.h" /* tools/oracle: inputs and expected outputs */

/* Host-side calls of NCCL's device API and teams (nccl_device/core.h);
 * teamAbi has the layout of NCCL's struct ncclTeam. */
struct teamAbi {
  int nRanks, rank, stride;
};
ncclResult_t ncclDevCommCreate(ncclComm_t comm, const void* reqs, void* outDevComm);
struct teamAbi ncclTeamWorld(ncclComm_t comm);
int ncclTeamRankToWorld(ncclComm_t comm, struct teamAbi team, int rank);

static int failures;
static int rank = -1, nranks = 0;

#define CHECK(cond)                                                                      \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      fprintf(stderr, "rank %d: %s:%d: CHECK failed: %s\n", rank, __FILE__, __LINE__, #cond); \
      failures++;                                                                        \
    }                                                                                    \
  } while (0)

#define NCHECK(expr, expected)                                                                            \
  do {                                                                                                    \
    ncclResult_t got_ = (expr);                                                                           \
    if (got_ != (expected)) {                                                                             \
      fprintf(stderr, "rank %d: %s:%d: %s returned %d (%s), expected %d; last error: %s\n", rank, __FILE__, \
              __LINE__, #expr, (int)got_, ncclGetErrorString(got_), (int)(expected), ncclGetLastError(NULL)); \
      failures++;                                                                                         \
    }                                                                                                     \
  } while (0)

#define OK(expr) NCHECK(expr, ncclSuccess)

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void section(const char* name) {
  printf("-- %s\n", name);
  fflush(stdout);
}

/* ---- the first id: rank 0 writes a file, the others read it ---- */

static void idPath(char* buf, size_t len) {
  const char* secret = getenv("MSCCLPP_COMM_SECRET");
  snprintf(buf, len, "/tmp/mscclpp-nccl-test-%s-%d.id", secret ? secret : "nosecret", (int)getppid());
}

static int shareFirstId(ncclUniqueId* id) {
  char path[256], tmp[300];
  idPath(path, sizeof(path));
  if (rank == 0) {
    if (ncclGetUniqueId(id) != ncclSuccess) return -1;
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE* f = fopen(tmp, "wb");
    if (f == NULL || fwrite(id, sizeof(*id), 1, f) != 1) return -1;
    fclose(f);
    return rename(tmp, path);
  }
  double deadline = now() + 30;
  while (now() < deadline) {
    FILE* f = fopen(path, "rb");
    if (f != NULL) {
      size_t got = fread(id, sizeof(*id), 1, f);
      fclose(f);
      if (got == 1) return 0;
    }
    usleep(10000);
  }
  return -1;
}

static void removeFirstId(void) {
  char path[256];
  idPath(path, sizeof(path));
  unlink(path);
}

/* A new id from rank `root` of comm, to every rank of comm. */
static void shareId(ncclComm_t comm, int root, ncclUniqueId* id) {
  int r;
  OK(ncclCommUserRank(comm, &r));
  if (r == root) OK(ncclGetUniqueId(id));
  OK(ncclBroadcast(id, id, sizeof(*id), ncclInt8, root, comm, NULL));
}

/* Poll until the nonblocking operation ends; its result. */
static ncclResult_t waitInit(ncclComm_t comm) {
  ncclResult_t st = ncclInProgress;
  double deadline = now() + 30;
  while (now() < deadline) {
    if (ncclCommGetAsyncError(comm, &st) != ncclSuccess) return ncclInternalError;
    if (st != ncclInProgress) return st;
    usleep(1000);
  }
  return ncclInProgress;
}

/* ---- collectives: inputs and expected outputs from the oracle of
 * collective results (tools/oracle/oracle.h, linked without the library:
 * it needs only the codec, core/fpconv.c, compiled into this program) ---- */

static uint64_t checkSerial; /* every rank makes the same checked calls in the same order */

/* A fresh checked call of `n` ranks (the oracle's seed: the call's number). */
static void checkedCall(struct oracleCall* g, enum oracleShape shape, ncclDataType_t type, int op, int n) {
  oracleInit(g, shape, (int)type, op, n, oracleMix(UINT64_C(0x6e63636c) ^ ++checkSerial));
}

/* How many elements of `out` are not what collective c leaves on rank `me`. */
static int wrongCount(const struct oracleCall* g, enum oracleColl c, int me, int root, size_t count, const void* out) {
  const size_t n = oracleOutElems(c, count, g->nranks);
  uint8_t* exp = malloc(n * g->ts);
  oracleExpected(g, c, me, root, count, exp);
  int bad = 0;
  for (size_t i = 0; i < n; i++) bad += oracleWrong(g, (const uint8_t*)out + i * g->ts, exp + i * g->ts);
  free(exp);
  return bad;
}

/* The bytes of message `tag` from rank `from` to rank `to`. */
static void message(int from, int to, int tag, size_t bytes, void* dst) {
  oracleBytes(UINT64_C(0x6d7367), ((uint64_t)(uint32_t)from << 40) ^ ((uint64_t)(uint32_t)to << 20) ^ (uint64_t)tag,
              bytes, dst);
}

/* How many of n elements of size ts differ between got and want. */
static int differ(const void* got, const void* want, size_t n, size_t ts) {
  int bad = 0;
  for (size_t i = 0; i < n; i++) bad += memcmp((const uint8_t*)got + i * ts, (const uint8_t*)want + i * ts, ts) != 0;
  return bad;
}

static void testAllReduce(ncclComm_t comm) {
  section("allreduce");
  enum { N = 1000 };
  uint8_t* in = malloc(N * sizeof(double));
  uint8_t* out = malloc(N * sizeof(double));
  struct oracleCall g;
  /* sum, prod, max, min, avg on float */
  ncclRedOp_t ops[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
  for (int o = 0; o < 5; o++) {
    checkedCall(&g, ORACLE_SMALL, ncclFloat32, ops[o], nranks);
    oracleInputs(&g, rank, 0, N, in);
    OK(ncclAllReduce(in, out, N, ncclFloat32, ops[o], comm, NULL));
    int bad = wrongCount(&g, ORACLE_ALLREDUCE, rank, 0, N, out);
    if (bad) fprintf(stderr, "rank %d: allreduce float op %d: %d wrong\n", rank, (int)ops[o], bad);
    CHECK(bad == 0);
  }
  /* int32 sum in place */
  checkedCall(&g, ORACLE_SMALL, ncclInt32, ncclSum, nranks);
  oracleInputs(&g, rank, 0, N, out);
  OK(ncclAllReduce(out, out, N, ncclInt32, ncclSum, comm, NULL));
  CHECK(wrongCount(&g, ORACLE_ALLREDUCE, rank, 0, N, out) == 0);
  /* bf16, fp16, fp8e4m3, int64 (wide values: the high bits), uint8, float64 */
  static const struct {
    ncclDataType_t type;
    ncclRedOp_t op;
    enum oracleShape shape;
  } typed[] = {{ncclBfloat16, ncclSum, ORACLE_SMALL}, {ncclFloat16, ncclMax, ORACLE_SMALL},
               {ncclFloat8e4m3, ncclSum, ORACLE_SMALL}, {ncclUint8, ncclSum, ORACLE_SMALL},
               {ncclInt64, ncclSum, ORACLE_WIDE},     {ncclFloat64, ncclAvg, ORACLE_SMALL}};
  int bad = 0;
  for (size_t k = 0; k < sizeof(typed) / sizeof(typed[0]); k++) {
    checkedCall(&g, typed[k].shape, typed[k].type, typed[k].op, nranks);
    oracleInputs(&g, rank, 0, 64, in);
    OK(ncclAllReduce(in, out, 64, typed[k].type, typed[k].op, comm, NULL));
    bad += wrongCount(&g, ORACLE_ALLREDUCE, rank, 0, 64, out);
  }
  if (bad) fprintf(stderr, "rank %d: typed allreduces: %d wrong\n", rank, bad);
  CHECK(bad == 0);
  free(in);
  free(out);
}

static void testCollectives(ncclComm_t comm) {
  section("allgather, reducescatter, broadcast, bcast, reduce, alltoall, gather, scatter");
  enum { C = 257 };
  int n = nranks;
  int32_t* send = malloc((size_t)C * n * sizeof(int32_t));
  int32_t* recv = malloc((size_t)C * n * sizeof(int32_t));
  const size_t all = (size_t)C * n * sizeof(int32_t);
  struct oracleCall g;
  int bad = 0;
  /* allgather, out of place and in place */
  checkedCall(&g, ORACLE_SMALL, ncclInt32, ORACLE_COPY, n);
  oracleInputs(&g, rank, 0, C, send);
  OK(ncclAllGather(send, recv, C, ncclInt32, comm, NULL));
  bad += wrongCount(&g, ORACLE_ALLGATHER, rank, 0, C, recv);
  memset(recv, 0, all);
  oracleInputs(&g, rank, 0, C, recv + rank * C);
  OK(ncclAllGather(recv + rank * C, recv, C, ncclInt32, comm, NULL));
  bad += wrongCount(&g, ORACLE_ALLGATHER, rank, 0, C, recv);
  CHECK(bad == 0);
  /* reduce-scatter (sum, max) and in place */
  struct oracleCall sum;
  checkedCall(&sum, ORACLE_SMALL, ncclInt32, ncclSum, n);
  oracleInputs(&sum, rank, 0, (size_t)C * n, send);
  OK(ncclReduceScatter(send, recv, C, ncclInt32, ncclSum, comm, NULL));
  bad += wrongCount(&sum, ORACLE_REDUCESCATTER, rank, 0, C, recv);
  checkedCall(&g, ORACLE_SMALL, ncclInt32, ncclMax, n);
  oracleInputs(&g, rank, 0, (size_t)C * n, send);
  OK(ncclReduceScatter(send, recv, C, ncclInt32, ncclMax, comm, NULL));
  bad += wrongCount(&g, ORACLE_REDUCESCATTER, rank, 0, C, recv);
  oracleInputs(&sum, rank, 0, (size_t)C * n, recv);
  OK(ncclReduceScatter(recv, recv + rank * C, C, ncclInt32, ncclSum, comm, NULL));
  bad += wrongCount(&sum, ORACLE_REDUCESCATTER, rank, 0, C, recv + rank * C);
  CHECK(bad == 0);
  /* broadcast from the last rank; bcast (in place) from rank 0 */
  int root = n - 1;
  checkedCall(&g, ORACLE_SMALL, ncclInt32, ORACLE_COPY, n);
  memset(send, 0xff, C * sizeof(int32_t));
  if (rank == root) oracleInputs(&g, root, 0, C, send);
  memset(recv, 0xfe, C * sizeof(int32_t));
  OK(ncclBroadcast(send, recv, C, ncclInt32, root, comm, NULL));
  bad += wrongCount(&g, ORACLE_BROADCAST, rank, root, C, recv);
  checkedCall(&g, ORACLE_SMALL, ncclInt32, ORACLE_COPY, n);
  memset(recv, 0xff, C * sizeof(int32_t));
  if (rank == 0) oracleInputs(&g, 0, 0, C, recv);
  OK(ncclBcast(recv, C, ncclInt32, 0, comm, NULL));
  bad += wrongCount(&g, ORACLE_BROADCAST, rank, 0, C, recv);
  CHECK(bad == 0);
  /* reduce to rank 1 % n (non-roots pass NULL recvbuff) */
  root = 1 % n;
  checkedCall(&g, ORACLE_SMALL, ncclInt32, ncclSum, n);
  oracleInputs(&g, rank, 0, C, send);
  OK(ncclReduce(send, rank == root ? recv : NULL, C, ncclInt32, ncclSum, root, comm, NULL));
  if (rank == root) bad += wrongCount(&g, ORACLE_REDUCE, rank, root, C, recv);
  CHECK(bad == 0);
  /* all-to-all */
  checkedCall(&g, ORACLE_SMALL, ncclInt32, ORACLE_COPY, n);
  oracleInputs(&g, rank, 0, (size_t)C * n, send);
  OK(ncclAlltoAll(send, recv, C, ncclInt32, comm, NULL));
  bad += wrongCount(&g, ORACLE_ALLTOALL, rank, 0, C, recv);
  CHECK(bad == 0);
  /* all-to-all in place (NCCL accepts it: nccl-tests' alltoall runs it) */
  oracleInputs(&g, rank, 0, (size_t)C * n, recv);
  OK(ncclAlltoAll(recv, recv, C, ncclInt32, comm, NULL));
  bad += wrongCount(&g, ORACLE_ALLTOALL, rank, 0, C, recv);
  CHECK(bad == 0);
  /* gather to rank 0, out of place and in place; scatter from the last */
  checkedCall(&g, ORACLE_SMALL, ncclInt32, ORACLE_COPY, n);
  oracleInputs(&g, rank, 0, C, send);
  memset(recv, 0, all);
  OK(ncclGather(send, recv, C, ncclInt32, 0, comm, NULL));
  if (rank == 0) bad += wrongCount(&g, ORACLE_GATHER, rank, 0, C, recv);
  oracleInputs(&g, rank, 0, C, recv); /* root 0: its slice is recv + 0 */
  OK(ncclGather(rank == 0 ? recv : send, recv, C, ncclInt32, 0, comm, NULL));
  if (rank == 0) bad += wrongCount(&g, ORACLE_GATHER, rank, 0, C, recv);
  root = n - 1;
  checkedCall(&g, ORACLE_SMALL, ncclInt32, ORACLE_COPY, n);
  oracleInputs(&g, rank, 0, (size_t)C * n, send);
  OK(ncclScatter(send, recv, C, ncclInt32, root, comm, NULL));
  bad += wrongCount(&g, ORACLE_SCATTER, rank, root, C, recv);
  CHECK(bad == 0);
  /* count 0 does nothing; NULL buffers with count 0 are fine */
  OK(ncclAllReduce(NULL, NULL, 0, ncclFloat32, ncclSum, comm, NULL));
  free(send);
  free(recv);
}

static void testSendRecv(ncclComm_t comm) {
  section("send/recv: pairs, group ring, group all-to-all, nested groups with collectives");
  enum { C = 1500 };
  const size_t bytes = C * sizeof(int64_t);
  int n = nranks;
  int64_t* s = malloc((size_t)C * n * sizeof(int64_t));
  int64_t* r = malloc((size_t)C * n * sizeof(int64_t));
  int64_t* want = malloc(bytes);
  int bad = 0;
  /* blocking pairs outside a group: rank 2k with 2k+1 */
  int partner = rank ^ 1;
  if (partner < n) {
    message(rank, partner, 0, bytes, s);
    if (rank < partner) {
      OK(ncclSend(s, C, ncclInt64, partner, comm, NULL));
      OK(ncclRecv(r, C, ncclInt64, partner, comm, NULL));
    } else {
      OK(ncclRecv(r, C, ncclInt64, partner, comm, NULL));
      OK(ncclSend(s, C, ncclInt64, partner, comm, NULL));
    }
    message(partner, rank, 0, bytes, want);
    bad += differ(r, want, C, sizeof(int64_t));
  }
  CHECK(bad == 0);
  /* a ring inside a group: send right, receive from the left (every rank
   * sends first: only a group makes this deadlock-free) */
  for (int round = 0; round < 3; round++) {
    int right = (rank + 1) % n, left = (rank - 1 + n) % n;
    message(rank, right, 1 + round, bytes, s);
    OK(ncclGroupStart());
    OK(ncclSend(s, C, ncclInt64, right, comm, NULL));
    OK(ncclRecv(r, C, ncclInt64, left, comm, NULL));
    OK(ncclGroupEnd());
    message(left, rank, 1 + round, bytes, want);
    bad += differ(r, want, C, sizeof(int64_t));
  }
  CHECK(bad == 0);
  /* all-to-all by send/recv (self included), nested groups */
  for (int p = 0; p < n; p++) message(rank, p, 4, bytes, s + p * C);
  memset(r, 0, (size_t)C * n * sizeof(int64_t));
  OK(ncclGroupStart());
  for (int p = 0; p < n; p++) {
    OK(ncclGroupStart());
    OK(ncclSend(s + p * C, C, ncclInt64, p, comm, NULL));
    OK(ncclRecv(r + p * C, C, ncclInt64, p, comm, NULL));
    OK(ncclGroupEnd());
  }
  OK(ncclGroupEnd());
  for (int p = 0; p < n; p++) {
    message(p, rank, 4, bytes, want);
    bad += differ(r + p * C, want, C, sizeof(int64_t));
  }
  CHECK(bad == 0);
  /* a group of collectives (coalesced, as PyTorch does) and one mixed with
   * a ring exchange, all of one input */
  float a[16], b[16], c[16 * 8], ring[16];
  struct oracleCall g;
  checkedCall(&g, ORACLE_SMALL, ncclFloat32, ncclSum, n);
  oracleInputs(&g, rank, 0, 16, a);
  OK(ncclGroupStart());
  OK(ncclAllReduce(a, b, 16, ncclFloat32, ncclSum, comm, NULL));
  OK(ncclAllGather(a, c, 16, ncclFloat32, comm, NULL));
  OK(ncclSend(a, 16, ncclFloat32, (rank + 1) % n, comm, NULL));
  OK(ncclRecv(ring, 16, ncclFloat32, (rank - 1 + n) % n, comm, NULL));
  OK(ncclGroupEnd());
  bad += wrongCount(&g, ORACLE_ALLREDUCE, rank, 0, 16, b);
  bad += wrongCount(&g, ORACLE_SENDRECV, rank, 0, 16, ring);
  if (n <= 8) bad += wrongCount(&g, ORACLE_ALLGATHER, rank, 0, 16, c);
  CHECK(bad == 0);
  /* an error inside a group is returned by ncclGroupEnd too */
  OK(ncclGroupStart());
  NCHECK(ncclSend(s, C, ncclInt64, n + 5, comm, NULL), ncclSuccess); /* recorded; checked when run */
  NCHECK(ncclGroupEnd(), ncclInvalidArgument);
  free(s);
  free(r);
  free(want);
}

static void testPreMulSum(ncclComm_t comm) {
  section("PreMulSum operators");
  enum { N = 100 };
  double scalars[64]; /* the oracle's view of each rank's scalar */
  struct oracleCall g;
  int32_t x[N], y[N];
  checkedCall(&g, ORACLE_SMALL, ncclInt32, ORACLE_PREMULSUM, nranks);
  for (int r = 0; r < nranks; r++) scalars[r] = r + 1;
  g.scalars = scalars;
  oracleInputs(&g, rank, 0, N, x);
  int32_t scalar = rank + 1;
  ncclRedOp_t op;
  OK(ncclRedOpCreatePreMulSum(&op, &scalar, ncclInt32, ncclScalarHostImmediate, comm));
  CHECK((int)op >= (int)ncclNumOps);
  scalar = 1000; /* immediate: the value was read at creation */
  OK(ncclAllReduce(x, y, N, ncclInt32, op, comm, NULL));
  int bad = wrongCount(&g, ORACLE_ALLREDUCE, rank, 0, N, y);
  CHECK(bad == 0);
  /* the wrong type is refused; a destroyed operator too */
  NCHECK(ncclAllReduce(x, y, N, ncclFloat32, op, comm, NULL), ncclInvalidArgument);
  OK(ncclRedOpDestroy(op, comm));
  NCHECK(ncclRedOpDestroy(op, comm), ncclInvalidArgument);
  NCHECK(ncclAllReduce(x, y, N, ncclInt32, op, comm, NULL), ncclInvalidArgument);
  NCHECK(ncclRedOpDestroy(ncclSum, comm), ncclInvalidArgument);
  /* "device" residence (host memory on the host backend): read when the
   * collective runs; reduce-scatter and reduce */
  float fscalar = 0.0f, fx[N * 8], fy[N * 8];
  OK(ncclRedOpCreatePreMulSum(&op, &fscalar, ncclFloat32, ncclScalarDevice, comm));
  fscalar = 0.5f * (float)(rank + 1);
  checkedCall(&g, ORACLE_SMALL, ncclFloat32, ORACLE_PREMULSUM, nranks);
  for (int r = 0; r < nranks; r++) scalars[r] = 0.5 * (r + 1);
  g.scalars = scalars;
  oracleInputs(&g, rank, 0, (size_t)N * nranks, fx);
  OK(ncclReduceScatter(fx, fy, N, ncclFloat32, op, comm, NULL));
  bad += wrongCount(&g, ORACLE_REDUCESCATTER, rank, 0, N, fy);
  OK(ncclReduce(fx, rank == 0 ? fy : NULL, N, ncclFloat32, op, 0, comm, NULL));
  if (rank == 0) bad += wrongCount(&g, ORACLE_REDUCE, rank, 0, N, fy);
  OK(ncclRedOpDestroy(op, comm));
  /* bf16 */
  uint16_t bs = mscclppFloatToBf16(2.0f), bx[N], by[N];
  checkedCall(&g, ORACLE_SMALL, ncclBfloat16, ORACLE_PREMULSUM, nranks);
  for (int r = 0; r < nranks; r++) scalars[r] = 2.0;
  g.scalars = scalars;
  oracleInputs(&g, rank, 0, N, bx);
  OK(ncclRedOpCreatePreMulSum(&op, &bs, ncclBfloat16, ncclScalarHostImmediate, comm));
  OK(ncclAllReduce(bx, by, N, ncclBfloat16, op, comm, NULL));
  bad += wrongCount(&g, ORACLE_ALLREDUCE, rank, 0, N, by);
  OK(ncclRedOpDestroy(op, comm));
  if (bad) fprintf(stderr, "rank %d: PreMulSum: %d wrong\n", rank, bad);
  CHECK(bad == 0);
}

static void testMemory(ncclComm_t comm) {
  section("ncclMemAlloc, registrations, windows");
  void* p = NULL;
  OK(ncclMemAlloc(&p, 1 << 20));
  CHECK(p != NULL);
  CHECK(((unsigned char*)p)[12345] == 0);
  int local = 5;
  NCHECK(ncclMemFree(&local), ncclInvalidArgument);
  NCHECK(ncclMemAlloc(&p, 0), ncclInvalidArgument);
  void* h1 = NULL;
  void* h2 = NULL;
  OK(ncclCommRegister(comm, p, 1 << 20, &h1));
  OK(ncclCommRegister(comm, p, 4096, &h2));
  CHECK(h1 != NULL && h2 != NULL && h1 != h2);
  /* collectives on registered memory */
  float* f = (float*)p;
  for (int i = 0; i < 1024; i++) f[i] = 1.0f;
  OK(ncclAllReduce(f, f, 1024, ncclFloat32, ncclSum, comm, NULL));
  CHECK(f[1023] == (float)nranks);
  OK(ncclCommDeregister(comm, h1));
  NCHECK(ncclCommDeregister(comm, h1), ncclInvalidArgument);
  OK(ncclCommDeregister(comm, h2));
  NCHECK(ncclCommRegister(comm, NULL, 16, &h1), ncclInvalidArgument);
  ncclWindow_t win = NULL;
  OK(ncclCommWindowRegister(comm, p, 1 << 20, &win, NCCL_WIN_COLL_SYMMETRIC));
  CHECK(win != NULL);
  NCHECK(ncclCommDeregister(comm, (void*)win), ncclInvalidArgument); /* a window is not a registration */
  OK(ncclCommWindowDeregister(comm, win));
  /* a registration left behind is freed with the communicator */
  OK(ncclCommRegister(comm, p, 64, &h1));
  OK(ncclMemFree(p));
  OK(ncclMemFree(NULL));
}

static void testErrors(ncclComm_t comm) {
  section("errors");
  float x[4] = {0};
  int v = 0;
  NCHECK(ncclAllReduce(x, x, 4, ncclFloat32, ncclSum, NULL, NULL), ncclInvalidArgument);
  CHECK(strstr(ncclGetLastError(NULL), "NULL") != NULL);
  NCHECK(ncclAllReduce(x, x, 4, (ncclDataType_t)42, ncclSum, comm, NULL), ncclInvalidArgument);
  CHECK(strstr(ncclGetLastError(NULL), "42") != NULL);
  NCHECK(ncclAllReduce(x, x, 4, ncclFloat32, (ncclRedOp_t)4000, comm, NULL), ncclInvalidArgument);
  NCHECK(ncclBroadcast(x, x, 4, ncclFloat32, nranks + 3, comm, NULL), ncclInvalidArgument);
  NCHECK(ncclSend(x, 4, ncclFloat32, -1, comm, NULL), ncclInvalidArgument);
  NCHECK(ncclCommCount(comm, NULL), ncclInvalidArgument);
  NCHECK(ncclCommCount(NULL, &v), ncclInvalidArgument);
  NCHECK(ncclGetVersion(NULL), ncclInvalidArgument);
  /* the failure was returned by the call itself; the group only has to end */
  (void)ncclGroupEnd();
  NCHECK(ncclCommRevoke(comm, 1), ncclInvalidArgument); /* flags must be NCCL_REVOKE_DEFAULT */
  OK(ncclCommRevoke(NULL, 0));
  OK(ncclGroupStart());
  NCHECK(ncclGroupSimulateEnd(NULL), ncclInvalidUsage);
  NCHECK(ncclGroupEnd(), ncclInvalidUsage); /* the group was ended */
  ncclComm_t bad = NULL;
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.magic = 0;
  NCHECK(ncclCommInitRankConfig(&bad, 2, id, 0, &cfg), ncclInvalidArgument);
  NCHECK(ncclCommInitRank(&bad, 2, id, 5), ncclInvalidArgument);
  NCHECK(ncclCommInitRank(NULL, 2, id, 0), ncclInvalidArgument);
  CHECK(bad == NULL);
  /* device API: not supported, said clearly */
  char devComm[4096];
  NCHECK(ncclDevCommCreate(comm, NULL, devComm), ncclInvalidUsage);
  /* nccl-tests prints ncclGetLastError(NULL) next to the status: it must name the call */
  CHECK(strstr(ncclGetLastError(NULL), "ncclDevCommCreate") != NULL);
  CHECK(strstr(ncclGetLastError(comm), "ncclDevCommCreate") != NULL);
  OK(ncclGroupStart()); /* as nccl-tests -D calls it */
  NCHECK(ncclDevCommCreate(comm, NULL, devComm), ncclInvalidUsage);
  CHECK(strstr(ncclGetLastError(NULL), "ncclDevCommCreate") != NULL);
  CHECK(strstr(ncclGetLastError(comm), "ncclDevCommCreate") != NULL);
  /* the failure was returned by the call itself; the group only has to end */
  (void)ncclGroupEnd();
  struct teamAbi world = ncclTeamWorld(comm);
  CHECK(world.nRanks == nranks && world.rank == rank && world.stride == 1);
  CHECK(ncclTeamRankToWorld(comm, world, nranks - 1) == nranks - 1);
  /* every status has a string */
  for (int r = 0; r <= ncclNumResults; r++) CHECK(ncclGetErrorString((ncclResult_t)r)[0] != '\0');
}

static void testQueries(ncclComm_t comm) {
  section("version, queries");
  int v = 0, c = 0, r = -1, d = 99;
  OK(ncclGetVersion(&v));
  CHECK(v == 22809 && v == NCCL_VERSION_CODE);
  OK(ncclCommCount(comm, &c));
  OK(ncclCommUserRank(comm, &r));
  OK(ncclCommCuDevice(comm, &d));
  CHECK(c == nranks && r == rank && d == -1);
  ncclResult_t e = ncclInternalError;
  OK(ncclCommGetAsyncError(comm, &e));
  CHECK(e == ncclSuccess);
  ncclResetDebugInit();
}

static void testInitModes(ncclComm_t world) {
  section("nonblocking init, init in a group, config name, scalable");
  ncclUniqueId id;
  shareId(world, 0, &id);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  cfg.commName = "nonblocking";
  ncclComm_t nb = NULL;
  NCHECK(ncclCommInitRankConfig(&nb, nranks, id, rank, &cfg), ncclInProgress);
  CHECK(nb != NULL);
  int c = 0;
  OK(ncclCommCount(nb, &c)); /* known before the join ends */
  CHECK(c == nranks);
  NCHECK(waitInit(nb), ncclSuccess);
  float x = (float)rank, y = -1;
  OK(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, nb, NULL));
  CHECK(y == (float)(nranks * (nranks - 1) / 2));
  /* a collective right after a nonblocking init waits for the join */
  shareId(world, nranks - 1, &id);
  ncclComm_t nb2 = NULL;
  NCHECK(ncclCommInitRankConfig(&nb2, nranks, id, rank, &cfg), ncclInProgress);
  OK(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclMax, nb2, NULL));
  CHECK(y == (float)(nranks - 1));
  OK(ncclCommFinalize(nb2));
  NCHECK(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclMax, nb2, NULL), ncclInvalidUsage);
  OK(ncclCommDestroy(nb2));
  /* inside a group: joined at ncclGroupEnd */
  shareId(world, 0, &id);
  ncclComm_t g = NULL;
  OK(ncclGroupStart());
  OK(ncclCommInitRank(&g, nranks, id, rank));
  CHECK(g != NULL);
  OK(ncclGroupEnd());
  OK(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclMin, g, NULL));
  CHECK(y == 0.0f);
  OK(ncclCommDestroy(g));
  /* scalable init: several ids (every rank passes the same list) */
  ncclUniqueId ids[2];
  shareId(world, 0, &ids[0]);
  shareId(world, nranks - 1, &ids[1]);
  ncclComm_t sc = NULL;
  OK(ncclCommInitRankScalable(&sc, nranks, rank, 2, ids, NULL));
  OK(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, sc, NULL));
  CHECK(y == (float)(nranks * (nranks - 1) / 2));
  OK(ncclCommDestroy(sc));
  OK(ncclCommDestroy(nb));
}

static void testSplit(ncclComm_t world) {
  section("split (blocking, nonblocking, NOCOLOR), shrink");
  /* two colors, reversed order inside each */
  ncclComm_t sub = NULL;
  OK(ncclCommSplit(world, rank % 2, -rank, &sub, NULL));
  CHECK(sub != NULL);
  int members = (nranks - rank % 2 + 1) / 2, c = 0, r = -1;
  OK(ncclCommCount(sub, &c));
  OK(ncclCommUserRank(sub, &r));
  CHECK(c == members);
  CHECK(r == members - 1 - rank / 2);
  int32_t x = rank, y = -1;
  OK(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, sub, NULL));
  int32_t e = 0;
  for (int q = rank % 2; q < nranks; q += 2) e += q;
  CHECK(y == e);
  /* the last rank stays out; the others split nonblocking */
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclComm_t sub2 = (ncclComm_t)(uintptr_t)1;
  ncclResult_t res = ncclCommSplit(world, rank == nranks - 1 ? NCCL_SPLIT_NOCOLOR : 7, 0, &sub2, &cfg);
  if (rank == nranks - 1) {
    NCHECK(res, ncclSuccess);
    CHECK(sub2 == NULL);
  } else {
    NCHECK(res, ncclInProgress);
    NCHECK(waitInit(sub2), ncclSuccess);
    OK(ncclCommCount(sub2, &c));
    CHECK(c == nranks - 1);
    OK(ncclAllReduce(&x, &y, 1, ncclInt32, ncclMax, sub2, NULL));
    CHECK(y == nranks - 2);
    OK(ncclCommDestroy(sub2));
  }
  /* split of a split */
  ncclComm_t subsub = NULL;
  OK(ncclCommSplit(sub, 0, 0, &subsub, NULL));
  OK(ncclCommCount(subsub, &c));
  CHECK(c == members);
  OK(ncclCommDestroy(subsub));
  OK(ncclCommDestroy(sub));
  /* shrink: rank 0 is excluded and does not call */
  if (nranks > 1 && rank != 0) {
    int excl = 0;
    ncclComm_t sh = NULL;
    OK(ncclCommShrink(world, &excl, 1, &sh, NULL, NCCL_SHRINK_DEFAULT));
    OK(ncclCommCount(sh, &c));
    OK(ncclCommUserRank(sh, &r));
    CHECK(c == nranks - 1 && r == rank - 1);
    OK(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, sh, NULL));
    CHECK(y == nranks * (nranks - 1) / 2);
    OK(ncclCommDestroy(sh));
  }
  /* every rank out of the shrink section before the world is used again */
  OK(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, world, NULL));
}

static void testInitAll(void) {
  section("ncclCommInitAll (3 ranks in this process) and a multi-communicator group");
  ncclComm_t comms[3] = {NULL, NULL, NULL};
  OK(ncclCommInitAll(comms, 3, NULL));
  float x[3][8], y[3][8], z[3][8];
  struct oracleCall g; /* of the three ranks, not of this job's */
  checkedCall(&g, ORACLE_SMALL, ncclFloat32, ncclSum, 3);
  for (int i = 0; i < 3; i++) oracleInputs(&g, i, 0, 8, x[i]);
  /* one thread drives the three ranks: only a group makes that possible */
  OK(ncclGroupStart());
  for (int i = 0; i < 3; i++) OK(ncclAllReduce(x[i], y[i], 8, ncclFloat32, ncclSum, comms[i], NULL));
  for (int i = 0; i < 3; i++) {
    OK(ncclSend(x[i], 8, ncclFloat32, (i + 1) % 3, comms[i], NULL));
    OK(ncclRecv(z[(i + 1) % 3], 8, ncclFloat32, i, comms[(i + 1) % 3], NULL));
  }
  OK(ncclGroupEnd());
  int bad = 0;
  for (int i = 0; i < 3; i++)
    bad += wrongCount(&g, ORACLE_ALLREDUCE, i, 0, 8, y[i]) + wrongCount(&g, ORACLE_SENDRECV, i, 0, 8, z[i]);
  CHECK(bad == 0);
  int rk = -1;
  OK(ncclCommUserRank(comms[2], &rk));
  CHECK(rk == 2);
  for (int i = 0; i < 3; i++) OK(ncclCommDestroy(comms[i]));
  NCHECK(ncclCommInitAll(comms, 0, NULL), ncclInvalidArgument);
}

static void testAbort(ncclComm_t world) {
  section("abort: of a joined communicator, of one still joining");
  ncclUniqueId id;
  shareId(world, 0, &id);
  ncclComm_t c = NULL;
  OK(ncclCommInitRank(&c, nranks, id, rank));
  OK(ncclCommAbort(c));
  OK(ncclCommAbort(NULL));
  /* a nonblocking init that can never complete (nranks + 1 ranks): abort
   * returns at once, and the join it cancels ends within 50 ms (before
   * the process exits: ThreadSanitizer sees no thread left behind) */
  shareId(world, 0, &id);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclComm_t never = NULL;
  NCHECK(ncclCommInitRankConfig(&never, nranks + 1, id, rank, &cfg), ncclInProgress);
  ncclResult_t st = ncclSuccess;
  OK(ncclCommGetAsyncError(never, &st));
  CHECK(st == ncclInProgress);
  double t0 = now();
  OK(ncclCommAbort(never));
  CHECK(now() - t0 < 1.0);
}

/* NCCL 2.28's revoke: local, then quiescent; collectives refused, finalize
 * and a second revoke invalid, destroy fine; a nonblocking communicator
 * reports its state through ncclCommGetAsyncError. */
static void testRevoke(ncclComm_t world) {
  section("revoke (blocking, nonblocking)");
  ncclComm_t c = NULL;
  OK(ncclCommSplit(world, 0, rank, &c, NULL));
  float x = 1, y = 0;
  OK(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, c, NULL));
  OK(ncclCommRevoke(c, NCCL_REVOKE_DEFAULT)); /* blocking: quiescent on return */
  ncclResult_t st = ncclInternalError;
  OK(ncclCommGetAsyncError(c, &st));
  CHECK(st == ncclSuccess);
  NCHECK(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, c, NULL), ncclInvalidUsage);
  CHECK(strstr(ncclGetLastError(NULL), "revoked") != NULL);
  NCHECK(ncclSend(&x, 1, ncclFloat32, 0, c, NULL), ncclInvalidUsage);
  OK(ncclGroupStart());
  NCHECK(ncclBroadcast(&x, &y, 1, ncclFloat32, 0, c, NULL), ncclInvalidUsage);
  NCHECK(ncclGroupEnd(), ncclInvalidUsage);
  NCHECK(ncclCommRevoke(c, NCCL_REVOKE_DEFAULT), ncclInvalidArgument); /* twice */
  NCHECK(ncclCommFinalize(c), ncclInvalidArgument);
  /* a revoked communicator still shrinks (here without its last rank) */
  if (rank != nranks - 1) {
    int last = nranks - 1, cnt = 0;
    ncclComm_t sh = NULL;
    OK(ncclCommShrink(c, &last, 1, &sh, NULL, NCCL_SHRINK_DEFAULT));
    OK(ncclCommCount(sh, &cnt));
    CHECK(cnt == nranks - 1);
    x = (float)rank;
    OK(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclMax, sh, NULL));
    CHECK(y == (float)(nranks - 2));
    OK(ncclCommDestroy(sh));
  }
  OK(ncclCommDestroy(c));
  /* nonblocking: ncclSuccess or ncclInProgress, then the state settles */
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclComm_t nb = NULL;
  ncclResult_t res = ncclCommSplit(world, 0, rank, &nb, &cfg);
  CHECK(res == ncclSuccess || res == ncclInProgress);
  NCHECK(waitInit(nb), ncclSuccess);
  res = ncclCommRevoke(nb, NCCL_REVOKE_DEFAULT);
  CHECK(res == ncclSuccess || res == ncclInProgress);
  NCHECK(waitInit(nb), ncclSuccess);
  NCHECK(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, nb, NULL), ncclInvalidUsage);
  /* a revoked communicator still splits */
  ncclComm_t sp = NULL;
  ncclConfig_t bcfg = NCCL_CONFIG_INITIALIZER;
  bcfg.blocking = 1;
  OK(ncclCommSplit(nb, 0, rank, &sp, &bcfg));
  OK(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, sp, NULL));
  OK(ncclCommDestroy(sp));
  OK(ncclCommDestroy(nb));
  /* a nonblocking shrink that cannot complete (rank 0 stays out): aborting
   * it returns at once, and the world (its parent) goes on */
  if (rank != 0) {
    ncclComm_t never = NULL;
    NCHECK(ncclCommShrink(world, NULL, 0, &never, &cfg, NCCL_SHRINK_DEFAULT), ncclInProgress);
    usleep(100000);
    ncclResult_t st = ncclSuccess;
    OK(ncclCommGetAsyncError(never, &st));
    CHECK(st == ncclInProgress);
    double t0 = now();
    OK(ncclCommAbort(never));
    CHECK(now() - t0 < 1.0);
  }
  x = 1;
  OK(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, world, NULL));
  CHECK(y == (float)nranks);
}

static int runApi(void) {
  ncclUniqueId id;
  if (shareFirstId(&id) != 0) {
    fprintf(stderr, "rank %d: could not share the first unique id\n", rank);
    return 1;
  }
  ncclComm_t world = NULL;
  OK(ncclCommInitRank(&world, nranks, id, rank));
  if (world == NULL) return 1;
  float one = 1, sum = 0;
  OK(ncclAllReduce(&one, &sum, 1, ncclFloat32, ncclSum, world, NULL));
  if (rank == 0) removeFirstId();
  testQueries(world);
  testAllReduce(world);
  testCollectives(world);
  testSendRecv(world);
  testPreMulSum(world);
  testMemory(world);
  testErrors(world);
  testInitModes(world);
  testSplit(world);
  testRevoke(world);
  if (rank == 0) testInitAll();
  testAbort(world);
  OK(ncclAllReduce(&one, &sum, 1, ncclFloat32, ncclSum, world, NULL));
  CHECK(sum == (float)nranks);
  OK(ncclCommFinalize(world));
  OK(ncclCommDestroy(world));
  printf("rank %d: %s (%d failures)\n", rank, failures ? "FAILED" : "all NCCL API checks passed", failures);
  return failures ? 1 : 0;
}

/* A rank SIGKILLs itself; the survivors see it. */
static int runKill(int victim) {
  ncclUniqueId id;
  if (shareFirstId(&id) != 0) return 1;
  ncclComm_t comm = NULL;
  OK(ncclCommInitRank(&comm, nranks, id, rank));
  if (comm == NULL) return 1;
  float x[256], y[256];
  for (int i = 0; i < 256; i++) x[i] = 1;
  OK(ncclAllReduce(x, y, 256, ncclFloat32, ncclSum, comm, NULL));
  if (rank == 0) removeFirstId();
  if (failures) return 1;
  if (rank == victim) {
    fflush(stdout);
    raise(SIGKILL);
  }
  double t0 = now();
  ncclResult_t st = ncclSuccess;
  while (now() - t0 < 10) {
    OK(ncclCommGetAsyncError(comm, &st));
    if (st != ncclSuccess) break;
    usleep(10000);
  }
  double seen = now() - t0;
  printf("rank %d: async error %d (%s) after %.2f s: %s\n", rank, (int)st, ncclGetErrorString(st), seen,
         ncclGetLastError(comm));
  CHECK(st == ncclRemoteError);
  /* later calls fail at once instead of hanging */
  double t1 = now();
  ncclResult_t res = ncclAllReduce(x, y, 256, ncclFloat32, ncclSum, comm, NULL);
  CHECK(res != ncclSuccess);
  CHECK(now() - t1 < 5);
  double t2 = now();
  OK(ncclCommAbort(comm));
  CHECK(now() - t2 < 5);
  if (failures == 0) printf("SURVIVOR_OK rank %d\n", rank);
  fflush(stdout);
  return failures ? 1 : 0;
}

/* The recovery a PyTorch job makes after a rank dies: shrink with ABORT. */
static int runShrink(int victim) {
  ncclUniqueId id;
  if (shareFirstId(&id) != 0) return 1;
  ncclComm_t comm = NULL;
  OK(ncclCommInitRank(&comm, nranks, id, rank));
  if (comm == NULL) return 1;
  float x[256], y[256];
  for (int i = 0; i < 256; i++) x[i] = 1;
  OK(ncclAllReduce(x, y, 256, ncclFloat32, ncclSum, comm, NULL));
  if (rank == 0) removeFirstId();
  if (failures) return 1;
  if (rank == victim) {
    fflush(stdout);
    raise(SIGKILL);
  }
  double t0 = now();
  ncclResult_t st = ncclSuccess;
  while (now() - t0 < 10) {
    OK(ncclCommGetAsyncError(comm, &st));
    if (st != ncclSuccess) break;
    usleep(1000);
  }
  CHECK(st == ncclRemoteError);
  ncclComm_t sh = NULL;
  NCHECK(ncclCommShrink(comm, &victim, 1, &sh, NULL, NCCL_SHRINK_DEFAULT), ncclInvalidUsage);
  CHECK(strstr(ncclGetLastError(NULL), "NCCL_SHRINK_ABORT") != NULL);
  OK(ncclCommShrink(comm, &victim, 1, &sh, NULL, NCCL_SHRINK_ABORT));
  double took = now() - t0;
  int c = 0, r = -1;
  OK(ncclCommCount(sh, &c));
  OK(ncclCommUserRank(sh, &r));
  CHECK(c == nranks - 1 && r == (rank < victim ? rank : rank - 1));
  for (int i = 0; i < 256; i++) x[i] = (float)rank;
  OK(ncclAllReduce(x, y, 256, ncclFloat32, ncclSum, sh, NULL));
  float want = (float)(nranks * (nranks - 1) / 2 - victim);
  for (int i = 0; i < 256; i++) CHECK(y[i] == want);
  /* the parent refuses collectives (revoked); odd ranks abort it, even
   * ranks release it as PyTorch's shrink_group does: finalize, wait until
   * ncclCommGetAsyncError is no longer ncclInProgress, destroy */
  NCHECK(ncclAllReduce(x, y, 256, ncclFloat32, ncclSum, comm, NULL), ncclInvalidUsage);
  if (rank % 2) {
    OK(ncclCommAbort(comm));
  } else {
    OK(ncclCommFinalize(comm));
    NCHECK(waitInit(comm), ncclSuccess);
    OK(ncclCommDestroy(comm));
  }
  /* a nonblocking shrink of the new one, nobody excluded */
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclComm_t again = NULL;
  ncclResult_t res = ncclCommShrink(sh, NULL, 0, &again, &cfg, NCCL_SHRINK_DEFAULT);
  CHECK(res == ncclSuccess || res == ncclInProgress);
  NCHECK(waitInit(again), ncclSuccess);
  OK(ncclBroadcast(x, y, 256, ncclFloat32, 0, again, NULL));
  for (int i = 0; i < 256; i++) CHECK(y[i] == (victim == 0 ? 1.0f : 0.0f));
  OK(ncclCommDestroy(again));
  OK(ncclCommDestroy(sh));
  printf("rank %d: recovered %.3f s after the failure was seen\n", rank, took);
  if (failures == 0) printf("SURVIVOR_OK rank %d\n", rank);
  fflush(stdout);
  return failures ? 1 : 0;
}

/* nccl-tests' parallel init (-p 1), which exits with its communicators alive:
 * init and buffer allocation inside groups, checked reduce-scatters, the
 * buffers freed while the communicator still holds them, then each rank
 * leaves at its own moment without ncclCommDestroy, so the ranks still here
 * see their peers go while the library's threads run. Every rank must exit
 * 0 (no crash at exit, no sanitizer report). */
static ncclComm_t liveAtExit; /* referenced to the end, as nccl-tests' array of communicators */

static int runExitLive(void) {
  ncclUniqueId id;
  if (shareFirstId(&id) != 0) return 1;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  OK(ncclGroupStart());
  OK(ncclCommInitRankConfig(&liveAtExit, nranks, id, rank, &config));
  OK(ncclGroupEnd());
  if (liveAtExit == NULL) return 1;
  enum { C = 4099 };
  float *send = NULL, *recv = NULL;
  OK(ncclGroupStart());
  OK(ncclMemAlloc((void**)&send, (size_t)C * nranks * sizeof(float)));
  OK(ncclMemAlloc((void**)&recv, (size_t)C * sizeof(float)));
  OK(ncclGroupEnd());
  if (send == NULL || recv == NULL) return 1;
  for (int it = 0; it < 20; it++) {
    struct oracleCall g;
    checkedCall(&g, ORACLE_SMALL, ncclFloat32, ncclSum, nranks);
    oracleInputs(&g, rank, 0, (size_t)C * nranks, send);
    OK(ncclReduceScatter(send, recv, C, ncclFloat32, ncclSum, liveAtExit, NULL));
    CHECK(wrongCount(&g, ORACLE_REDUCESCATTER, rank, 0, C, recv) == 0);
  }
  if (rank == 0) removeFirstId();
  OK(ncclMemFree(send));
  OK(ncclMemFree(recv));
  usleep((useconds_t)rank * 150000); /* rank 0 first: the others see it leave */
  printf("EXIT_LIVE rank %d %s\n", rank, failures ? "failed" : "ok");
  fflush(stdout);
  return failures ? 1 : 0;
}

/* MSCCLPP_NCCL_FALLBACK: bad settings are clear errors (one process). */
static int runFallback(const char* self, const char* real) {
  rank = 0;
  nranks = 1;
  ncclUniqueId id;
  ncclComm_t c = NULL;
  section("MSCCLPP_NCCL_FALLBACK_OPS without MSCCLPP_NCCL_FALLBACK");
  setenv("MSCCLPP_NCCL_FALLBACK_OPS", "allreduce", 1);
  OK(ncclGetUniqueId(&id));
  NCHECK(ncclCommInitRank(&c, 1, id, 0), ncclInvalidArgument);
  CHECK(strstr(ncclGetLastError(NULL), "MSCCLPP_NCCL_FALLBACK") != NULL);
  section("a path that does not load");
  setenv("MSCCLPP_NCCL_FALLBACK", "/nonexistent/libnccl.so.2", 1);
  OK(ncclGetUniqueId(&id));
  NCHECK(ncclCommInitRank(&c, 1, id, 0), ncclInvalidArgument);
  CHECK(strstr(ncclGetLastError(NULL), "/nonexistent/libnccl.so.2") != NULL);
  section("this library itself");
  setenv("MSCCLPP_NCCL_FALLBACK", self, 1);
  OK(ncclGetUniqueId(&id));
  NCHECK(ncclCommInitRank(&c, 1, id, 0), ncclInvalidArgument);
  CHECK(strstr(ncclGetLastError(NULL), "this library itself") != NULL);
  section("an unknown operation name");
  unsetenv("MSCCLPP_NCCL_FALLBACK");
  setenv("MSCCLPP_NCCL_FALLBACK_OPS", "allreduce,frobnicate", 1);
  OK(ncclGetUniqueId(&id));
  NCHECK(ncclCommInitRank(&c, 1, id, 0), ncclInvalidArgument);
  CHECK(strstr(ncclGetLastError(NULL), "frobnicate") != NULL);
  unsetenv("MSCCLPP_NCCL_FALLBACK_OPS");
  if (real != NULL && real[0] != '\0') {
    /* NVIDIA's NCCL loads; without a GPU its communicator cannot be made,
     * which fails the init with its reason */
    section("NVIDIA's library as the fallback");
    setenv("MSCCLPP_NCCL_FALLBACK", real, 1);
    OK(ncclGetUniqueId(&id));
    ncclResult_t res = ncclCommInitRank(&c, 1, id, 0);
    printf("fallback init: %d (%s): %s\n", (int)res, ncclGetErrorString(res), ncclGetLastError(NULL));
    if (res == ncclSuccess) {
      float x = 2, y = 0;
      OK(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, c, NULL));
      OK(ncclCommDestroy(c));
    } else {
      CHECK(strstr(ncclGetLastError(NULL), "fallback NCCL") != NULL);
    }
    unsetenv("MSCCLPP_NCCL_FALLBACK");
  }
  section("without a fallback, a 1-rank communicator works");
  OK(ncclGetUniqueId(&id));
  OK(ncclCommInitRank(&c, 1, id, 0));
  float x = 2, y = 0;
  OK(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, c, NULL));
  CHECK(y == 2);
  OK(ncclCommDestroy(c));
  printf("fallback checks: %s (%d failures)\n", failures ? "FAILED" : "passed", failures);
  return failures ? 1 : 0;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char* mode = argc > 1 ? argv[1] : "api";
  if (strcmp(mode, "fallback") == 0) return runFallback(argc > 2 ? argv[2] : "", argc > 3 ? argv[3] : NULL);
  const char* r = getenv("MSCCLPP_RANK");
  const char* n = getenv("MSCCLPP_NRANKS");
  if (r == NULL || n == NULL) {
    fprintf(stderr, "run me under mscclpp-run: MSCCLPP_RANK/MSCCLPP_NRANKS are unset\n");
    return 2;
  }
  rank = atoi(r);
  nranks = atoi(n);
  if (strcmp(mode, "api") == 0) return runApi();
  if (strcmp(mode, "kill") == 0 && argc > 2) return runKill(atoi(argv[2]));
  if (strcmp(mode, "shrink") == 0 && argc > 2) return runShrink(atoi(argv[2]));
  if (strcmp(mode, "exit-live") == 0) return runExitLive();
  fprintf(stderr, "usage: nccl_worker api | kill VICTIM | shrink VICTIM | exit-live | fallback SELF [REAL]\n");
  return 2;
}
