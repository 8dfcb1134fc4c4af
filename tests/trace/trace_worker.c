/* SPDX-License-Identifier: MIT */
/*
 * A program for the trace tests (tests/trace/): it runs, on the host
 * backend, a known sequence of calls that a trace must show in order.
 *   trace_worker all        every collective and a send/recv group, at
 *                           1 KiB and 64 KiB per rank (14 calls)
 *   trace_worker mismatch   (with MSCCLPP_CHECK_CALLS=1) rank 1 calls
 *                           allgather where the others call allreduce: every
 *                           rank must fail that call naming rank 1 and both
 *                           calls, and the next call must work again
 *   trace_worker late       (with MSCCLPP_CHECK_CALLS=1) the last rank makes
 *                           its second call only after half of MSCCLPP_TIMEOUT
 *                           and a second: every rank must fail it naming that
 *                           rank and its last call, then go on
 * COLL_RANKS_PER_HOST=L puts ranks r*L .. r*L+L-1 on one pretend host
 * (MSCCLPP_HOSTID), so that peers on other hosts go through port channels,
 * the proxy and the network transport, whose events the trace then has too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mscclpp/coll.h"
#include "mscclpp/comm.h"
#include "mscclpp/core.h"

static mscclppComm_t comm;
static int rank, nranks;

static int ok(mscclppResult_t res, const char* what) {
  if (res == mscclppSuccess) return 1;
  fprintf(stderr, "rank %d: %s: %s: %s\n", rank, what, mscclppGetErrorString(res), mscclppGetLastError());
  return 0;
}

/* Every collective once with `bytes` per rank (float32), then a ring of
 * send/recv in one group. */
static int allOnce(size_t bytes, float* a, float* b) {
  size_t count = bytes / sizeof(float), part = count / (size_t)nranks;
  int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  int good = ok(mscclppAllReduce(a, b, count, mscclppFloat32, mscclppSum, comm, NULL), "allreduce") &&
             ok(mscclppAllGather(a, b, part, mscclppFloat32, comm, NULL), "allgather") &&
             ok(mscclppReduceScatter(a, b, part, mscclppFloat32, mscclppSum, comm, NULL), "reducescatter") &&
             ok(mscclppBroadcast(a, b, count, mscclppFloat32, 1 % nranks, comm, NULL), "broadcast") &&
             ok(mscclppReduce(a, b, count, mscclppFloat32, mscclppSum, 0, comm, NULL), "reduce") &&
             ok(mscclppAllToAll(a, b, part, mscclppFloat32, comm, NULL), "alltoall");
  if (!good) return 0;
  return ok(mscclppGroupStart(), "group start") && ok(mscclppSend(a, count, mscclppFloat32, next, comm, NULL), "send") &&
         ok(mscclppRecv(b, count, mscclppFloat32, prev, comm, NULL), "recv") && ok(mscclppGroupEnd(), "group end");
}

/* A call that must fail on every rank with a message that has every one of
 * `needles` (NULL-terminated). */
static int failsNaming(mscclppResult_t res, const char* what, const char* const* needles) {
  if (res == mscclppSuccess) {
    fprintf(stderr, "rank %d: %s succeeded; the check should have failed it\n", rank, what);
    return 0;
  }
  const char* why = mscclppGetLastError();
  printf("rank %d: %s failed as it should: %s\n", rank, what, why);
  int good = res == mscclppInvalidUsage;
  for (const char* const* n = needles; *n != NULL; n++)
    if (strstr(why, *n) == NULL) {
      fprintf(stderr, "rank %d: the message does not say \"%s\"\n", rank, *n);
      good = 0;
    }
  return good;
}

static int mismatch(float* a, float* b) {
  int good = ok(mscclppAllReduce(a, b, 1024, mscclppFloat32, mscclppSum, comm, NULL), "allreduce #1");
  mscclppResult_t res = rank == 1 ? mscclppAllGather(a, b, 256, mscclppFloat32, comm, NULL)
                                  : mscclppAllReduce(a, b, 1024, mscclppFloat32, mscclppSum, comm, NULL);
  char others[64];
  if (nranks == 2)
    snprintf(others, sizeof(others), "rank 0 called allreduce #2");
  else if (nranks == 3)
    snprintf(others, sizeof(others), "ranks 0, 2 called allreduce #2");
  else
    snprintf(others, sizeof(others), "ranks 0, 2-%d called allreduce #2", nranks - 1);
  const char* needles[] = {"rank 1 called allgather #2 (count 256, float32)", others, "(count 1024, float32, sum)",
                           "the ranks called different collectives", NULL};
  good = failsNaming(res, "the mismatched call #2", needles) && good;
  return ok(mscclppAllReduce(a, b, 1024, mscclppFloat32, mscclppSum, comm, NULL), "allreduce #3 after it") && good;
}

static int late(float* a, float* b) {
  int good = ok(mscclppAllReduce(a, b, 1024, mscclppFloat32, mscclppSum, comm, NULL), "allreduce #1");
  if (rank == nranks - 1) {
    const char* t = getenv("MSCCLPP_TIMEOUT");
    double wait = (t != NULL ? atof(t) : 30.0) / 2 + 1;
    struct timespec ts = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
    nanosleep(&ts, NULL);
  }
  char who[64];
  snprintf(who, sizeof(who), "rank %d did not call within", nranks - 1);
  const char* needles[] = {who, "its last call was allreduce #1 (count 1024, float32, sum)", NULL};
  mscclppResult_t res = mscclppAllReduce(a, b, 1024, mscclppFloat32, mscclppSum, comm, NULL);
  good = failsNaming(res, "call #2, which one rank made late", needles) && good;
  return ok(mscclppAllReduce(a, b, 1024, mscclppFloat32, mscclppSum, comm, NULL), "allreduce #3 after it") && good;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "all";
  setenv("CUDA_VISIBLE_DEVICES", "", 1); /* the host backend, also on a GPU machine */
  const char* perHost = getenv("COLL_RANKS_PER_HOST");
  const char* envRank = getenv("MSCCLPP_RANK");
  if (perHost != NULL && envRank != NULL && atoi(perHost) > 0) {
    char id[32];
    snprintf(id, sizeof(id), "trace-host-%d", atoi(envRank) / atoi(perHost));
    setenv("MSCCLPP_HOSTID", id, 1);
  }
  if (!ok(mscclppCommInitFromEnv(&comm), "mscclppCommInitFromEnv")) return 1;
  mscclppCommRank(comm, &rank);
  mscclppCommSize(comm, &nranks);
  const size_t maxBytes = (size_t)64 << 10;
  float* a = (float*)calloc(maxBytes / sizeof(float), sizeof(float));
  float* b = (float*)calloc(maxBytes / sizeof(float) * (size_t)nranks, sizeof(float));
  int good = a != NULL && b != NULL;
  if (strcmp(mode, "all") == 0) {
    /* an application's own span (mscclppTraceStart/End) around the calls,
     * its name and detail in buffers overwritten after: the trace keeps
     * copies (test_trace.sh looks for them) */
    uint64_t t0 = mscclppTraceStart();
    const char* tracing = getenv("MSCCLPP_TRACE");
    if ((t0 != 0) != (tracing != NULL && tracing[0] != '\0')) {
      fprintf(stderr, "rank %d: FAIL: mscclppTraceStart() is %s with MSCCLPP_TRACE \"%s\"\n", rank,
              t0 != 0 ? "not 0" : "0", tracing != NULL ? tracing : "(unset)");
      good = 0;
    }
    good = good && allOnce(1024, a, b) && allOnce(maxBytes, a, b);
    char name[32], detail[32];
    snprintf(name, sizeof(name), "worker.step");
    snprintf(detail, sizeof(detail), "1 KiB and 64 KiB");
    mscclppTraceEnd(t0, name, detail, 14);
    mscclppTraceEnd(0, "worker.never", NULL, 0); /* t0 0: nothing */
    /* through volatile: a plain memset of buffers not read again is a dead store the compiler drops */
    volatile char* vn = name;
    volatile char* vd = detail;
    for (size_t i = 0; i + 1 < sizeof(name); i++) vn[i] = vd[i] = 'x';
  } else if (strcmp(mode, "mismatch") == 0 && nranks >= 2) {
    good = good && mismatch(a, b);
  } else if (strcmp(mode, "late") == 0 && nranks >= 2) {
    good = good && late(a, b);
  } else {
    fprintf(stderr, "usage: trace_worker all | mismatch | late (mismatch and late: 2 ranks or more)\n");
    good = 0;
  }
  good = ok(mscclppCommDestroy(comm), "mscclppCommDestroy") && good;
  free(a);
  free(b);
  printf("rank %d: %s %s\n", rank, mode, good ? "passed" : "FAILED");
  return good ? 0 : 1;
}
