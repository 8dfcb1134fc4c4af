/* SPDX-License-Identifier: MIT */
/*
 * Revoke and shrink through the mscclpp API (mscclpp/comm.h), one rank per
 * process under mscclpp-run, on the host backend:
 *
 *   recover_worker revoke
 *       every rank but 0 is inside an allreduce (rank 0 never calls it) and
 *       inside a bootstrap receive nobody answers, each on its own thread,
 *       when its main thread revokes the communicator: revoke says
 *       mscclppInProgress until both calls have returned mscclppAborted,
 *       then mscclppSuccess, within a second; later collectives fail with
 *       mscclppAborted, mscclppCommGetAsyncError says so, new bootstrap
 *       operations still work (a barrier of every rank), and destroy works.
 *
 * Prints "rank R: MODE passed".
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "mscclpp/coll.h"
#include "mscclpp/comm.h"

static int rank, nranks;

static double nowSec(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void sleepMs(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* ---- revoke ---------------------------------------------------------------------------- */

struct blocked {
  mscclppComm_t comm;
  int kind; /* 0: allreduce, 1: bootstrap receive */
  int entered;
  mscclppResult_t res;
  char why[512];
};

static void* blockedMain(void* arg) {
  struct blocked* b = arg;
  float x[1024], y[1024];
  memset(x, 0, sizeof(x));
  __atomic_store_n(&b->entered, 1, __ATOMIC_RELEASE);
  if (b->kind == 0)
    b->res = mscclppAllReduce(x, y, 1024, mscclppFloat32, mscclppSum, b->comm, NULL);
  else
    b->res = mscclppBootstrapRecv(b->comm, (rank + 1) % nranks, 4242, x, sizeof(x));
  snprintf(b->why, sizeof(b->why), "%s", mscclppGetLastError());
  return NULL;
}

static void testRevoke(mscclppComm_t comm) {
  float x[16] = {0}, y[16];
  CHECK_RES(mscclppAllReduce(x, y, 16, mscclppFloat32, mscclppSum, comm, NULL), mscclppSuccess);
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  struct blocked b[2] = {{comm, 0, 0, mscclppSuccess, ""}, {comm, 1, 0, mscclppSuccess, ""}};
  pthread_t t[2];
  int nt = 0;
  for (int k = rank == 0 ? 1 : 0; k < 2; k++) pthread_create(&t[nt++], NULL, blockedMain, &b[k]);
  for (int k = rank == 0 ? 1 : 0; k < 2; k++)
    while (!__atomic_load_n(&b[k].entered, __ATOMIC_ACQUIRE)) sleepMs(1);
  sleepMs(200); /* both are waiting by now */
  double t0 = nowSec();
  CHECK_RES(mscclppCommRevoke(comm, MSCCLPP_REVOKE_DEFAULT), mscclppInProgress);
  mscclppResult_t r;
  while ((r = mscclppCommRevoke(comm, MSCCLPP_REVOKE_DEFAULT)) == mscclppInProgress && nowSec() - t0 < 5) sleepMs(1);
  double took = nowSec() - t0;
  CHECK_RES(r, mscclppSuccess);
  printf("rank %d: revoke quiescent after %.3f s\n", rank, took);
  CHECK(took < 1.0);
  for (int k = 0; k < nt; k++) pthread_join(t[k], NULL);
  for (int k = rank == 0 ? 1 : 0; k < 2; k++) {
    printf("rank %d: blocked %s returned %s: %s\n", rank, k == 0 ? "allreduce" : "receive",
           mscclppGetErrorString(b[k].res), b[k].why);
    CHECK(b[k].res == mscclppAborted);
    CHECK(strstr(b[k].why, "revoked") != NULL);
  }
  /* later collectives fail at once, naming the revoke */
  CHECK_RES(mscclppAllReduce(x, y, 16, mscclppFloat32, mscclppSum, comm, NULL), mscclppAborted);
  CHECK(strstr(mscclppGetLastError(), "revoked") != NULL);
  CHECK_RES(mscclppBroadcast(x, y, 16, mscclppFloat32, 0, comm, NULL), mscclppAborted);
  mscclppResult_t async = mscclppSuccess;
  CHECK_RES(mscclppCommGetAsyncError(comm, &async), mscclppSuccess);
  CHECK(async == mscclppAborted);
  /* revoke again: quiescent; bad arguments */
  CHECK_RES(mscclppCommRevoke(comm, MSCCLPP_REVOKE_DEFAULT), mscclppSuccess);
  CHECK_RES(mscclppCommRevoke(comm, 1), mscclppInvalidArgument);
  CHECK_RES(mscclppCommRevoke(NULL, MSCCLPP_REVOKE_DEFAULT), mscclppInvalidArgument);
  /* new bootstrap operations work: every rank is revoked and here */
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "revoke";
  setenv("CUDA_VISIBLE_DEVICES", "", 1); /* the host backend, also on a GPU machine */
  mscclppComm_t comm = NULL;
  mscclppResult_t res = mscclppCommInitFromEnv(&comm);
  if (res != mscclppSuccess) {
    fprintf(stderr, "mscclppCommInitFromEnv: %s: %s\n", mscclppGetErrorString(res), mscclppGetLastError());
    return 1;
  }
  mscclppCommRank(comm, &rank);
  mscclppCommSize(comm, &nranks);
  if (strcmp(mode, "revoke") == 0) {
    testRevoke(comm);
  } else {
    fprintf(stderr, "usage: recover_worker revoke\n");
    return 2;
  }
  CHECK_RES(mscclppCommDestroy(comm), mscclppSuccess);
  int ok = harnessFailures_ == 0;
  printf("rank %d: %s %s\n", rank, mode, ok ? "passed" : "FAILED");
  return ok ? 0 : 1;
}
