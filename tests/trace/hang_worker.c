/* SPDX-License-Identifier: MIT */
/*
 * A program that hangs on purpose, for the hang report's tests
 * (test_hang_report.sh, under mscclpp-run --report and a short
 * MSCCLPP_TIMEOUT), on the host backend. Every rank first makes one
 * allreduce that works (#1), then:
 *   hang_worker mismatch   rank 1 calls allgather where the others call
 *                          allreduce (#2): every rank's call fails (the host
 *                          backend sees the other collective's messages)
 *   hang_worker silent     the last rank never calls #2: the others' waits
 *                          time out; it waits until they have gone (its
 *                          communicator reports the lost peers), or four
 *                          timeouts, then leaves
 * Each rank exits 0 when its call #2 failed (or, for the silent rank, was
 * not made) as expected: what the test checks is the launcher's diagnosis.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mscclpp/coll.h"
#include "mscclpp/comm.h"
#include "mscclpp/core.h"

#define COUNT 256 /* 1 KiB of floats */

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "mismatch") != 0 && strcmp(mode, "silent") != 0) {
    fprintf(stderr, "usage: hang_worker mismatch | silent\n");
    return 2;
  }
  mscclppComm_t comm = NULL;
  if (mscclppCommInitFromEnv(&comm) != mscclppSuccess) {
    fprintf(stderr, "hang_worker: communicator: %s\n", mscclppGetLastError());
    return 1;
  }
  int rank = 0, nranks = 1;
  mscclppCommRank(comm, &rank);
  mscclppCommSize(comm, &nranks);
  static float a[COUNT * 64], b[COUNT * 64];
  for (int i = 0; i < COUNT; i++) a[i] = (float)rank;
  int good = mscclppAllReduce(a, b, COUNT, mscclppFloat32, mscclppSum, comm, NULL) == mscclppSuccess;
  if (!good) fprintf(stderr, "hang_worker: rank %d: the first allreduce failed: %s\n", rank, mscclppGetLastError());
  fflush(stderr);
  if (good && strcmp(mode, "mismatch") == 0) {
    mscclppResult_t res = rank == 1 ? mscclppAllGather(a, b, COUNT, mscclppFloat32, comm, NULL)
                                    : mscclppAllReduce(a, b, COUNT, mscclppFloat32, mscclppSum, comm, NULL);
    if (res == mscclppSuccess) {
      fprintf(stderr, "hang_worker: rank %d: the mismatched call succeeded\n", rank);
      good = 0;
    }
  } else if (good && rank != nranks - 1) {
    if (mscclppAllReduce(a, b, COUNT, mscclppFloat32, mscclppSum, comm, NULL) == mscclppSuccess) {
      fprintf(stderr, "hang_worker: rank %d: the call without rank %d succeeded\n", rank, nranks - 1);
      good = 0;
    }
  } else if (good) {
    const char* t = getenv("MSCCLPP_TIMEOUT");
    double limit = 4 * (t != NULL ? atof(t) : 30.0);
    struct timespec pause = {0, 50 * 1000 * 1000};
    mscclppResult_t async = mscclppSuccess;
    for (double waited = 0; waited < limit; waited += 0.05) {
      if (mscclppCommGetAsyncError(comm, &async) == mscclppSuccess && async != mscclppSuccess) break;
      nanosleep(&pause, NULL);
    }
  }
  fflush(stderr);
  (void)mscclppCommDestroy(comm); /* the peers may be gone: its error does not matter here */
  return good ? 0 : 1;
}
