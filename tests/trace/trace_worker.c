/* SPDX-License-Identifier: MIT */
/*
 * A program for the trace tests (tests/trace/): it runs, on the host
 * backend, a known sequence of calls that a trace must show in order.
 *   trace_worker all        every collective and a send/recv group, at
 *                           1 KiB and 64 KiB per rank (14 calls)
 * COLL_RANKS_PER_HOST=L puts ranks r*L .. r*L+L-1 on one pretend host
 * (MSCCLPP_HOSTID), so that peers on other hosts go through port channels,
 * the proxy and the network transport, whose events the trace then has too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    good = good && allOnce(1024, a, b) && allOnce(maxBytes, a, b);
  } else {
    fprintf(stderr, "usage: trace_worker all\n");
    good = 0;
  }
  good = ok(mscclppCommDestroy(comm), "mscclppCommDestroy") && good;
  free(a);
  free(b);
  printf("rank %d: %s %s\n", rank, mode, good ? "passed" : "FAILED");
  return good ? 0 : 1;
}
