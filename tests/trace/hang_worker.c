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
 *                          time out; it waits until each has told it so
 *                          (a bootstrap message), or four timeouts, and
 *                          a second more, then leaves
 *   hang_worker bcast      rank 1 calls broadcast from rank 0 where the
 *                          others call allreduce (#2): rank 1 fails at once
 *                          on rank 0's chunk and stays a timeout and a
 *                          second; the others wait for its block and time
 *                          out, their waits published (peer, semaphore,
 *                          signals expected and arrived)
 *   hang_worker proxy      (2 ranks) no collective: a port channel each way
 *                          (host backend: shared memory); rank 0 stops its
 *                          proxy, then each rank pushes 3 puts with signal
 *                          of 1 KiB and waits for 4 signals: rank 0 gets 3,
 *                          rank 1 none (rank 0's triggers stay in its FIFO).
 *                          Both waits time out, their wait notes and rank
 *                          0's pending triggers in the reports.
 * Each rank exits 0 when its call #2 failed (or, for the silent rank, was
 * not made; in proxy mode, its wait timed out) as expected: what the test
 * checks is the launcher's diagnosis. HANG_RANKS_PER_HOST=L makes hosts of
 * L ranks (MSCCLPP_HOSTID): peers on other hosts go over the network
 * transport, through the proxy. HANG_DEVICE=1 (silent mode, on a GPU): the
 * buffers are device memory, so the GPU backend's kernels wait, and a
 * rank's call #2 fails when the communicator reports its kernel's timeout.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mscclpp/coll.h"
#include "mscclpp/comm.h"
#include "mscclpp/connection.h"
#include "mscclpp/core.h"
#include "mscclpp/memory.h"
#include "mscclpp/port_channel.h"
#include "mscclpp/port_channel_device.h"
#include "transport/net/net.h"

#define COUNT 256 /* 1 KiB of floats */
#define DONE_TAG 99 /* silent: a rank's call #2 has failed */

static double timeoutSec(void) {
  const char* t = getenv("MSCCLPP_TIMEOUT");
  return t != NULL ? atof(t) : 30.0;
}

static void pause50ms(void) {
  struct timespec ts = {0, 50 * 1000 * 1000};
  nanosleep(&ts, NULL);
}

/* The proxy mode: 1 when this rank's wait timed out as expected. */
static int proxyMode(mscclppComm_t comm, int rank, int nranks) {
  if (nranks != 2) {
    fprintf(stderr, "hang_worker proxy: needs 2 ranks\n");
    return 0;
  }
  const int peer = 1 - rank;
  const size_t bytes = 4 * 1024;
  void* buf = NULL;
  mscclppRegisteredMemory_t mem = NULL;
  mscclppConnection_t conn = NULL;
  mscclppPortChannel_t ch = NULL;
  mscclppPortChannelDeviceHandle h;
  if (mscclppMemAlloc(comm, mscclppMemKindHostShared, bytes, &buf) != mscclppSuccess ||
      mscclppMemoryRegister(comm, buf, bytes, mscclppTransportHostShm, &mem) != mscclppSuccess ||
      mscclppConnectionCreate(comm, peer, 7, mscclppTransportHostShm, &conn) != mscclppSuccess) {
    fprintf(stderr, "hang_worker: rank %d: setup: %s\n", rank, mscclppGetLastError());
    return 0;
  }
  mscclppPortChannelConfig pc = MSCCLPP_PORT_CHANNEL_CONFIG_INITIALIZER;
  pc.tag = 8;
  pc.local = mem;
  if (mscclppPortChannelCreate(comm, conn, &pc, &ch) != mscclppSuccess ||
      mscclppPortChannelGetDeviceHandle(ch, &h) != mscclppSuccess || mscclppBootstrapBarrier(comm) != mscclppSuccess) {
    fprintf(stderr, "hang_worker: rank %d: channel: %s\n", rank, mscclppGetLastError());
    return 0;
  }
  if (rank == 0 && mscclppCommProxyStop(comm) != mscclppSuccess) {
    fprintf(stderr, "hang_worker: rank 0: proxy stop: %s\n", mscclppGetLastError());
    return 0;
  }
  int good = 1;
  for (int i = 0; i < 3 && good; i++)
    good = mscclppPortChannelDevicePutWithSignal(&h, h.dst, (uint64_t)i * 1024, h.src, 0, 1024) == mscclppSuccess;
  mscclppResult_t r = mscclppSuccess;
  for (int i = 0; i < 4 && good && r == mscclppSuccess; i++) r = mscclppPortChannelDeviceWait(&h);
  if (!good || r != mscclppTimeout) {
    fprintf(stderr, "hang_worker: rank %d: the waits returned %d, expected a timeout: %s\n", rank, (int)r,
            mscclppGetLastError());
    good = 0;
  }
  /* as an application would: the error of the kernel's wait (its hang
   * report comes with it, the channel still there) */
  mscclppResult_t async = mscclppSuccess;
  (void)mscclppCommGetAsyncError(comm, &async);
  if (async != mscclppTimeout) {
    fprintf(stderr, "hang_worker: rank %d: the communicator's error is %d, expected a timeout\n", rank, (int)async);
    good = 0;
  }
  fflush(stderr);
  /* the channel, connection and memory go with the communicator's abort */
  (void)mscclppPortChannelDestroy(ch);
  (void)mscclppConnectionDestroy(conn);
  (void)mscclppMemoryDeregister(mem);
  (void)mscclppMemFree(comm, buf);
  return good;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "mismatch") != 0 && strcmp(mode, "silent") != 0 && strcmp(mode, "bcast") != 0 &&
      strcmp(mode, "proxy") != 0) {
    fprintf(stderr, "usage: hang_worker mismatch | silent | bcast | proxy\n");
    return 2;
  }
  const char* perHost = getenv("HANG_RANKS_PER_HOST");
  const char* rankEnv = getenv("MSCCLPP_RANK");
  if (perHost != NULL && rankEnv != NULL && atoi(perHost) > 0) {
    char host[32];
    snprintf(host, sizeof(host), "hang-host%d", atoi(rankEnv) / atoi(perHost));
    setenv("MSCCLPP_HOSTID", host, 1);
    if (!mscclppNetLibAvailable()) {
      printf("SKIP: ranks on several hosts need the network transport: %s\n", mscclppNetLibError());
      return 77;
    }
  }
  mscclppComm_t comm = NULL;
  if (mscclppCommInitFromEnv(&comm) != mscclppSuccess) {
    fprintf(stderr, "hang_worker: communicator: %s\n", mscclppGetLastError());
    return 1;
  }
  int rank = 0, nranks = 1;
  mscclppCommRank(comm, &rank);
  mscclppCommSize(comm, &nranks);
  if (strcmp(mode, "proxy") == 0) {
    int ok = proxyMode(comm, rank, nranks);
    (void)mscclppCommDestroy(comm);
    return ok ? 0 : 1;
  }
  static float hostA[COUNT * 64], hostB[COUNT * 64];
  float* a = hostA;
  float* b = hostB;
  const int device = getenv("HANG_DEVICE") != NULL && atoi(getenv("HANG_DEVICE")) != 0;
  if (device) { /* GPU buffers: the GPU backend's kernels (their values do not matter) */
    void *da = NULL, *db = NULL;
    if (mscclppMemAlloc(comm, mscclppMemKindDevice, sizeof(hostA), &da) != mscclppSuccess ||
        mscclppMemAlloc(comm, mscclppMemKindDevice, sizeof(hostB), &db) != mscclppSuccess) {
      fprintf(stderr, "hang_worker: rank %d: device buffers: %s\n", rank, mscclppGetLastError());
      return 1;
    }
    a = (float*)da;
    b = (float*)db;
  } else {
    for (int i = 0; i < COUNT; i++) a[i] = (float)rank;
  }
  int good = mscclppAllReduce(a, b, COUNT, mscclppFloat32, mscclppSum, comm, NULL) == mscclppSuccess;
  if (!good) fprintf(stderr, "hang_worker: rank %d: the first allreduce failed: %s\n", rank, mscclppGetLastError());
  fflush(stderr);
  if (good && (strcmp(mode, "mismatch") == 0 || strcmp(mode, "bcast") == 0)) {
    const int bcast = strcmp(mode, "bcast") == 0;
    mscclppResult_t res = rank != 1 ? mscclppAllReduce(a, b, COUNT, mscclppFloat32, mscclppSum, comm, NULL)
                          : bcast   ? mscclppBroadcast(a, b, COUNT, mscclppFloat32, 0, comm, NULL)
                                    : mscclppAllGather(a, b, COUNT, mscclppFloat32, comm, NULL);
    if (res == mscclppSuccess) {
      fprintf(stderr, "hang_worker: rank %d: the mismatched call succeeded\n", rank);
      good = 0;
    }
    if (bcast && rank == 1) { /* the others wait for this rank's block until they time out */
      fflush(stderr);
      for (double waited = 0; waited < timeoutSec() + 1; waited += 0.05) pause50ms();
    }
  } else if (good && rank != nranks - 1) {
    mscclppResult_t res = mscclppAllReduce(a, b, COUNT, mscclppFloat32, mscclppSum, comm, NULL);
    if (device && res == mscclppSuccess) {
      /* enqueued: its kernel times out on the GPU, and the communicator says so */
      mscclppResult_t async = mscclppSuccess;
      for (double waited = 0; waited < 4 * timeoutSec() && async == mscclppSuccess; waited += 0.05) {
        pause50ms();
        (void)mscclppCommGetAsyncError(comm, &async);
      }
      res = async;
    }
    if (res == mscclppSuccess) {
      fprintf(stderr, "hang_worker: rank %d: the call without rank %d succeeded\n", rank, nranks - 1);
      good = 0;
    }
    uint8_t done = 1; /* tell the silent rank that it may go */
    (void)mscclppBootstrapSend(comm, nranks - 1, DONE_TAG, &done, 1);
  } else if (good) {
    /* until every other rank's call has failed (or four timeouts) */
    for (int r = 0; r < nranks - 1; r++) {
      uint8_t done = 0;
      mscclppResult_t res = mscclppTimeout;
      for (int tries = 0; tries < 4 && res == mscclppTimeout; tries++)
        res = mscclppBootstrapRecv(comm, r, DONE_TAG, &done, 1);
    }
    for (int i = 0; i < 20; i++) pause50ms(); /* a second more, for the launcher's request of a report */
  }
  fflush(stderr);
  if (device) {
    (void)mscclppMemFree(comm, a);
    (void)mscclppMemFree(comm, b);
  }
  (void)mscclppCommDestroy(comm); /* the peers may be gone: its error does not matter here */
  return good ? 0 : 1;
}
