/* SPDX-License-Identifier: MIT */
/*
 * The seed's API on the host backend (mscclpp/seed.h), one rank per
 * process under mscclpp-run: mscclppCommInitRank with the launcher's
 * ip:port, mscclppBootStrapAllGather, mscclppConnect to every peer over one
 * host shared buffer (declared in a different order on every rank),
 * mscclppConnectionSetup, mscclppProxyLaunch; then one CPU thread per peer
 * (the seed kernel's warps) puts this rank's slot into the peer's buffer
 * with a signal and waits for the peer's, for several rounds; every slot is
 * checked; mscclppProxyStop (chosen by argument type) and mscclppCommDestroy
 * (which frees what setup built) end it. Prints "rank R: seed passed".
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "mscclpp/mscclpp.h"
#include "mscclpp/seed.h"

#define MAX_RANKS 16
#define SLOT 65536
#define ROUNDS 20

static int rank, nranks;
static uint8_t* buf;

static uint8_t byteOf(int r, int round, size_t i) { return (uint8_t)(r * 37 + round * 11 + i * 7 + (i >> 8)); }

struct warp {
  const mscclppDevConn* conn;
  int round;
  mscclppResult_t res;
};

static void* warpMain(void* arg) {
  struct warp* w = arg;
  uint64_t off = (uint64_t)rank * SLOT;
  w->res = mscclppDevConnPutWithSignal(w->conn, off, off, SLOT);
  if (w->res == mscclppSuccess) w->res = mscclppDevConnWait(w->conn);
  if (w->res == mscclppSuccess) w->res = mscclppDevConnFlush(w->conn);
  return NULL;
}

int main(void) {
  setenv("CUDA_VISIBLE_DEVICES", "", 1);
  const char* ipPort = getenv("MSCCLPP_COMM_ID");
  const char* r = getenv("MSCCLPP_RANK");
  const char* n = getenv("MSCCLPP_NRANKS");
  if (ipPort == NULL || r == NULL || n == NULL) {
    fprintf(stderr, "run me under mscclpp-run\n");
    return 2;
  }
  rank = atoi(r);
  nranks = atoi(n);
  if (nranks < 2 || nranks > MAX_RANKS) return 2;
  mscclppComm_t comm = NULL;
  CHECK_RES(mscclppCommInitRank(&comm, nranks, rank, ipPort), mscclppSuccess);
  if (comm == NULL) return 1;
  int ranks[MAX_RANKS];
  ranks[rank] = rank;
  CHECK_RES(mscclppBootStrapAllGather(comm, ranks, (int)sizeof(int)), mscclppSuccess);
  for (int i = 0; i < nranks; i++) CHECK(ranks[i] == i);

  size_t bytes = (size_t)nranks * SLOT;
  void* p = NULL;
  CHECK_RES(mscclppMemAlloc(comm, mscclppMemKindHostShared, bytes, &p), mscclppSuccess);
  buf = p;
  uint64_t flag = 0;
  mscclppDevConn conns[MAX_RANKS];
  int nconns = 0;
  /* declare in a rank-dependent order: setup must not deadlock on it */
  for (int k = 1; k < nranks; k++) {
    int peer = (rank + (rank % 2 ? k : nranks - k)) % nranks;
    CHECK_RES(mscclppConnect(comm, &conns[nconns++], peer, buf, bytes, &flag, 5, mscclppTransportP2P, NULL),
              mscclppSuccess);
  }
  CHECK_RES(mscclppConnect(comm, &conns[0], rank, buf, bytes, &flag, 5, mscclppTransportP2P, "mlx5_0"),
            mscclppInvalidUsage);
  CHECK_RES(mscclppConnect(comm, &conns[0], nranks, buf, bytes, &flag, 5, mscclppTransportP2P, NULL),
            mscclppInvalidArgument);
  CHECK_RES(mscclppConnectionSetup(comm), mscclppSuccess);
  CHECK_RES(mscclppConnectionSetup(comm), mscclppInvalidUsage);
  CHECK_RES(mscclppProxyLaunch(comm), mscclppSuccess);
  if (harnessFailures_) return 1;
  for (int i = 0; i < nconns; i++) CHECK(conns[i].localBuff == buf && conns[i].remoteBuff != NULL);

  for (int round = 0; round < ROUNDS && harnessFailures_ == 0; round++) {
    for (size_t i = 0; i < SLOT; i++) buf[(size_t)rank * SLOT + i] = byteOf(rank, round, i);
    pthread_t th[MAX_RANKS];
    struct warp w[MAX_RANKS];
    for (int i = 0; i < nconns; i++) {
      w[i] = (struct warp){&conns[i], round, mscclppSuccess};
      pthread_create(&th[i], NULL, warpMain, &w[i]);
    }
    for (int i = 0; i < nconns; i++) {
      pthread_join(th[i], NULL);
      CHECK_RES(w[i].res, mscclppSuccess);
    }
    for (int q = 0; q < nranks; q++) {
      size_t bad = 0;
      for (size_t i = 0; i < SLOT; i++) bad += buf[(size_t)q * SLOT + i] != byteOf(q, round, i);
      if (bad) fprintf(stderr, "rank %d: round %d: slot of rank %d has %zu wrong bytes\n", rank, round, q, bad);
      CHECK(bad == 0);
    }
    /* the next round rewrites the slots: everybody has checked this one */
    CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  }
  /* mscclppProxyStop: the communicator's (seed) and the proxy service's
   * (mscclpp/proxy.h) share the name; the argument picks. */
  CHECK_RES(mscclppProxyStop(comm), mscclppSuccess);
  mscclppProxy_t none = NULL;
  CHECK_RES(mscclppProxyStop(none), mscclppInvalidArgument);
  mscclppResult_t async = mscclppInternalError;
  CHECK_RES(mscclppCommGetAsyncError(comm, &async), mscclppSuccess);
  CHECK(async == mscclppSuccess);
  CHECK_RES(mscclppMemFree(comm, buf), mscclppInvalidUsage); /* setup registered it; destroy frees that */
  CHECK_RES(mscclppCommDestroy(comm), mscclppInvalidUsage);  /* ... but the memory itself is still allocated */
  /* Free the allocation once the registration is gone: destroy refused
   * above after releasing the seed's objects, so now the buffer can go. */
  CHECK_RES(mscclppMemFree(comm, buf), mscclppSuccess);
  CHECK_RES(mscclppCommDestroy(comm), mscclppSuccess);
  int ok = harnessFailures_ == 0;
  if (ok) printf("rank %d: seed passed\n", rank);
  fflush(stdout);
  return ok ? 0 : 1;
}
