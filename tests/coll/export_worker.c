/* SPDX-License-Identifier: MIT */
/*
 * The GPU collectives' export protocol (coll/gpu/coll_gpu_export.c) played
 * by CPU processes, with mapping operations that stand in for CUDA IPC (a
 * "mapping" of rank o's allocation id in rank m is the number F(m, o, id)):
 *   mscclpp-run -n N -- export_worker
 * Checked, in order:
 *  - no wait for a peer's application: rank 0 has every peer map a new
 *    allocation while the peers' application threads sleep outside the
 *    library; it gets the answers long before they wake up;
 *  - every rank gets every peer's mapping of each of its allocations right;
 *    a second export of the same allocations asks nothing (no new opens);
 *  - an allocation that replaced an older one at the same address: the
 *    service makes the new mapping and retires the old one without closing
 *    it (a close waits for the process's kernels); the application thread
 *    takes it and closes it;
 *  - several allocations in one round trip (one given twice: asked once);
 *  - a mapping that fails: the caller gets the peer's reason, and the next
 *    export works;
 *  - asked without waiting (send/recv's way): the answer filed later, a
 *    second ask asks nothing, a refusal is not asked again;
 *  - stop closes every mapping the service made (ASan/TSan watch the rest).
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll/gpu/coll_gpu_state.h"
#include "core/error.h"
#include "core/log.h"
#include "core/util.h"
#include "harness.h"
#include "mscclpp/comm.h"

static int rank_, nranks_;
static mscclppComm_t comm_;
static atomic_int opens, closes, starts;

#define FAIL_ID 0xbad

static uint64_t mapping(int me, int owner, uint64_t id) {
  return ((uint64_t)0x1000 + (uint64_t)me * 0x100 + (uint64_t)owner) << 32 | id << 12;
}

/* A handle names its owner and allocation id. */
static void makeHandle(struct ownBuf* b, uint64_t id, uint64_t base) {
  memset(b, 0, sizeof(*b));
  b->id = id;
  b->base = base;
  int32_t owner = rank_;
  memcpy(b->handle, &owner, sizeof(owner));
  memcpy(b->handle + 8, &id, sizeof(id));
}

static void fakeStart(void* ctx, int device) {
  (void)ctx;
  (void)device;
  atomic_fetch_add(&starts, 1);
}
static mscclppResult_t fakeOpen(void* ctx, const uint8_t handle[MSCCLPP_GPU_IPC_HANDLE_BYTES], void** base) {
  (void)ctx;
  int32_t owner;
  uint64_t id;
  memcpy(&owner, handle, sizeof(owner));
  memcpy(&id, handle + 8, sizeof(id));
  if (id == FAIL_ID)
    return mscclppErr(mscclppUnhandledCudaError, MSCCLPP_LOG_COLL, "test: allocation %llu cannot be mapped",
                      (unsigned long long)id);
  atomic_fetch_add(&opens, 1);
  *base = (void*)(uintptr_t)mapping(rank_, owner, id);
  return mscclppSuccess;
}
static mscclppResult_t fakeClose(void* ctx, void* base) {
  (void)ctx;
  (void)base;
  atomic_fetch_add(&closes, 1);
  return mscclppSuccess;
}

static double nowSec(void) { return (double)mscclppTimeNs() / 1e9; }

/* The sum over ranks of v. */
static int sumOver(int v) {
  int* all = (int*)calloc((size_t)nranks_, sizeof(int));
  all[rank_] = v;
  CHECK_RES(mscclppBootstrapAllGather(comm_, all, sizeof(int)), mscclppSuccess);
  int s = 0;
  for (int r = 0; r < nranks_; r++) s += all[r];
  free(all);
  return s;
}

static void checkMapped(struct mscclppCollGpu* g, uint64_t id, const uint64_t* mapped) {
  for (int p = 0; p < nranks_; p++) {
    if (p == rank_) continue;
    if (mapped[p] != mapping(p, rank_, id)) {
      fprintf(stderr, "rank %d: allocation %llu in rank %d: 0x%llx, expected 0x%llx\n", rank_,
              (unsigned long long)id, p, (unsigned long long)mapped[p],
              (unsigned long long)mapping(p, rank_, id));
      CHECK(0);
    }
  }
  (void)g;
}

int main(void) {
  CHECK_RES(mscclppCommInitFromEnv(&comm_), mscclppSuccess);
  mscclppCommRank(comm_, &rank_);
  mscclppCommSize(comm_, &nranks_);
  struct mscclppCollGpu* g = (struct mscclppCollGpu*)calloc(1, sizeof(*g));
  g->rank = rank_;
  g->nranks = nranks_;
  struct mscclppCollGpuMapOps ops = {fakeStart, fakeOpen, fakeClose, NULL};
  struct mscclppCollGpuService* svc = NULL;
  CHECK_RES(mscclppCollGpuServiceStart(comm_, -1, &ops, &svc), mscclppSuccess);
  CHECK_RES(mscclppBootstrapBarrier(comm_), mscclppSuccess);
  uint64_t mapped[MSCCLPP_COLL_GPU_MAX_RANKS];
  struct ownBuf b;

  /* no wait for a peer's application thread */
  const double nap = 1.5;
  if (rank_ == 0) {
    makeHandle(&b, 1, 0x7000000);
    double t0 = nowSec();
    CHECK_RES(mscclppCollGpuExport(comm_, g, &b, mapped), mscclppSuccess);
    double took = nowSec() - t0;
    printf("rank 0: %d peers mapped a new allocation in %.1f ms while their applications slept %.1f s\n",
           nranks_ - 1, took * 1e3, nap);
    CHECK(took < nap / 2);
    checkMapped(g, 1, mapped);
  } else {
    struct timespec ts = {1, 500000000};
    nanosleep(&ts, NULL); /* outside the library */
  }
  CHECK_RES(mscclppBootstrapBarrier(comm_), mscclppSuccess);

  /* every rank's allocations, then the same again: no new opens */
  for (uint64_t id = 2; id <= 5; id++) {
    makeHandle(&b, id, 0x8000000 * id);
    CHECK_RES(mscclppCollGpuExport(comm_, g, &b, mapped), mscclppSuccess);
    checkMapped(g, id, mapped);
  }
  CHECK_RES(mscclppBootstrapBarrier(comm_), mscclppSuccess);
  int before = sumOver(atomic_load(&opens));
  for (uint64_t id = 2; id <= 5; id++) {
    makeHandle(&b, id, 0x8000000 * id);
    CHECK_RES(mscclppCollGpuExport(comm_, g, &b, mapped), mscclppSuccess);
    checkMapped(g, id, mapped);
  }
  CHECK_RES(mscclppBootstrapBarrier(comm_), mscclppSuccess);
  CHECK(sumOver(atomic_load(&opens)) == before);

  /* a new allocation at an old one's address: the old mapping is retired,
   * not closed by the service; the application thread closes it */
  int closedBefore = sumOver(atomic_load(&closes));
  makeHandle(&b, 6, 0x8000000 * 2);
  CHECK_RES(mscclppCollGpuExport(comm_, g, &b, mapped), mscclppSuccess);
  checkMapped(g, 6, mapped);
  CHECK_RES(mscclppBootstrapBarrier(comm_), mscclppSuccess);
  CHECK(sumOver(atomic_load(&closes)) == closedBefore);
  CHECK(mscclppCollGpuServiceRetired(svc) == nranks_ - 1); /* each peer's allocation 2 */
  void** retired = NULL;
  int nretired = -1;
  CHECK_RES(mscclppCollGpuServiceTakeRetired(svc, &retired, &nretired), mscclppSuccess);
  CHECK(nretired == nranks_ - 1);
  CHECK(mscclppCollGpuServiceRetired(svc) == 0);
  for (int i = 0; i < nretired; i++) {
    int found = 0; /* one of the old mappings of allocation 2 of a peer */
    for (int p = 0; p < nranks_; p++)
      if (p != rank_ && (uint64_t)(uintptr_t)retired[i] == mapping(rank_, p, 2)) found = 1;
    CHECK(found);
    CHECK_RES(mscclppCollGpuServiceClose(svc, retired[i]), mscclppSuccess);
  }
  free(retired);
  CHECK_RES(mscclppBootstrapBarrier(comm_), mscclppSuccess);
  CHECK(sumOver(atomic_load(&closes)) == closedBefore + nranks_ * (nranks_ - 1));
  /* and once more, left for stop to close */
  makeHandle(&b, 8, 0x8000000 * 3);
  CHECK_RES(mscclppCollGpuExport(comm_, g, &b, mapped), mscclppSuccess);
  checkMapped(g, 8, mapped);
  CHECK_RES(mscclppBootstrapBarrier(comm_), mscclppSuccess);
  CHECK(mscclppCollGpuServiceRetired(svc) == nranks_ - 1);

  /* several allocations in one round trip: two new ones, one of them given
   * twice, and an empty entry; each peer maps each new one once */
  {
    int opensBefore = sumOver(atomic_load(&opens));
    struct ownBuf many[4];
    makeHandle(&many[0], 9, 0xb000000);
    makeHandle(&many[1], 10, 0xc000000);
    many[2] = many[0];
    memset(&many[3], 0, sizeof(many[3]));
    uint64_t got[4][MSCCLPP_COLL_GPU_MAX_RANKS];
    memset(got, 0, sizeof(got));
    CHECK_RES(mscclppCollGpuExportMany(comm_, g, many, 4, got), mscclppSuccess);
    checkMapped(g, 9, got[0]);
    checkMapped(g, 10, got[1]);
    checkMapped(g, 9, got[2]);
    for (int p = 0; p < nranks_; p++) CHECK(got[3][p] == 0);
    CHECK_RES(mscclppBootstrapBarrier(comm_), mscclppSuccess);
    CHECK(sumOver(atomic_load(&opens)) == opensBefore + 2 * nranks_ * (nranks_ - 1));
  }

  /* a mapping that fails: the peer's reason, then the next export works */
  if (nranks_ > 1) {
    makeHandle(&b, FAIL_ID, 0x9000000);
    mscclppResult_t res = mscclppCollGpuExport(comm_, g, &b, mapped);
    CHECK(res == mscclppUnhandledCudaError);
    CHECK(strstr(mscclppGetLastError(), "cannot be mapped") != NULL);
    makeHandle(&b, 7, 0xa000000);
    CHECK_RES(mscclppCollGpuExport(comm_, g, &b, mapped), mscclppSuccess);
    checkMapped(g, 7, mapped);
  }
  CHECK_RES(mscclppBootstrapBarrier(comm_), mscclppSuccess);

  /* mappings learned without waiting (send/recv): Ask sends and returns,
   * the answer is filed by Collect; a second Ask asks nothing; a refusal
   * is remembered (not asked again) */
  g->service = svc;
  if (nranks_ > 1) {
    const int peer = (rank_ + 1) % nranks_;
    const int opensBefore = sumOver(atomic_load(&opens));
    uint64_t m = 0;
    makeHandle(&b, 20, 0xd000000);
    CHECK(!mscclppCollGpuExportKnown(g, peer, 20, &m));
    CHECK_RES(mscclppCollGpuExportAsk(comm_, g, &b, peer), mscclppSuccess);
    CHECK_RES(mscclppCollGpuExportAsk(comm_, g, &b, peer), mscclppSuccess);
    CHECK(g->nasked == 1);
    makeHandle(&b, FAIL_ID, 0x9000000);
    CHECK_RES(mscclppCollGpuExportAsk(comm_, g, &b, peer), mscclppSuccess);
    CHECK(g->nasked == 2);
    for (int i = 0; i < 10000 && g->nasked > 0 && !(g->nasked == 1 && g->asked[0].state == 2); i++) {
      mscclppCollGpuExportCollect(g);
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL);
    }
    CHECK(mscclppCollGpuExportKnown(g, peer, 20, &m));
    CHECK(m == mapping(peer, rank_, 20));
    CHECK(g->nasked == 1 && g->asked[0].id == FAIL_ID && g->asked[0].state == 2);
    CHECK_RES(mscclppCollGpuExportAsk(comm_, g, &b, peer), mscclppSuccess); /* refused: not asked again */
    CHECK(g->nasked == 1);
    makeHandle(&b, 20, 0xd000000);
    CHECK_RES(mscclppCollGpuExportAsk(comm_, g, &b, peer), mscclppSuccess); /* known: nothing asked */
    CHECK(g->nasked == 1);
    CHECK_RES(mscclppBootstrapBarrier(comm_), mscclppSuccess);
    CHECK(sumOver(atomic_load(&opens)) == opensBefore + nranks_);
  }
  CHECK_RES(mscclppBootstrapBarrier(comm_), mscclppSuccess);

  mscclppCollGpuServiceStop(svc);
  CHECK(atomic_load(&starts) == 1);
  CHECK(atomic_load(&opens) == atomic_load(&closes));
  free(g);
  CHECK_RES(mscclppCommDestroy(comm_), mscclppSuccess);
  int rc = harnessFinish();
  if (rc == 0) printf("rank %d: export protocol passed\n", rank_);
  return rc;
}
