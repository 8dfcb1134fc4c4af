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
 *   recover_worker shrink
 *       planned shrinks of a healthy communicator (MSCCLPP_SHRINK_DEFAULT):
 *       without the last rank (named twice), without rank 0 (the new rank
 *       0 is the lowest member) and that child shrunk again, with nobody
 *       excluded; each child checked by allreduce and broadcast, the parent
 *       still working after each. Then members that pass different lists:
 *       every rank fails within seconds naming the lists, and the same
 *       shrink with one list works right after.
 *   recover_worker kill V[,W]
 *       rank V SIGKILLs itself while the others run allreduces; each
 *       survivor's call fails, a DEFAULT shrink is refused, a shrink with
 *       MSCCLPP_SHRINK_ABORT and V excluded gives a communicator whose
 *       collectives are checked; with W (another rank, numbered as at the
 *       start), W dies too and the survivors shrink that child. With one
 *       victim, every rank also holds a memory channel to the next rank
 *       on the parent: after the shrink its wait fails (mscclppAborted)
 *       instead of waiting, and it, its connection and its memory are
 *       destroyed before the parent. Each survivor prints
 *       SURVIVOR_OK and the time from the kill to its first collective that
 *       succeeded (tests/bootstrap/test_kill.sh checks).
 *   recover_worker grow V
 *       rank V SIGKILLs itself; the survivors shrink with ABORT, then grow
 *       back to the original size: the lowest survivor starts a new process
 *       (this program, "join"), which joins with the id mscclppCommGrowId
 *       gave; the grown communicator's collectives are checked on every
 *       rank, the new one included (its exit status too). A new rank that
 *       claims an old rank's number is refused first. Survivors print
 *       SURVIVOR_OK (tests/bootstrap/test_kill.sh checks).
 *
 * Prints "rank R: MODE passed".
 */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "mscclpp/coll.h"
#include "mscclpp/comm.h"
#include "mscclpp/connection.h"
#include "mscclpp/memory.h"
#include "mscclpp/memory_channel.h"
#include "mscclpp/memory_channel_device.h"

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
  /* in progress while this rank's blocked calls unwind, or already done:
   * a peer's revoke may have reached this rank and ended them first */
  mscclppResult_t r = mscclppCommRevoke(comm, MSCCLPP_REVOKE_DEFAULT);
  if (r != mscclppInProgress) CHECK_RES(r, mscclppSuccess);
  while (r == mscclppInProgress && nowSec() - t0 < 5) {
    sleepMs(1);
    r = mscclppCommRevoke(comm, MSCCLPP_REVOKE_DEFAULT);
  }
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

/* ---- shrink ------------------------------------------------------------------------------ */

/* Collectives on c (of `n` ranks, this one `r`) whose results depend on
 * every member: allreduce of the parent ranks, broadcast from the last. */
static void checkComm(mscclppComm_t c, int n, int r, int parentRank, const char* what) {
  int cn = -1, cr = -1;
  CHECK_RES(mscclppCommSize(c, &cn), mscclppSuccess);
  CHECK_RES(mscclppCommRank(c, &cr), mscclppSuccess);
  if (cn != n || cr != r) {
    fprintf(stderr, "rank %d: %s: rank %d of %d, expected %d of %d\n", rank, what, cr, cn, r, n);
    CHECK(0);
    return;
  }
  int32_t x[64], y[64];
  for (int i = 0; i < 64; i++) x[i] = parentRank * 1000 + i;
  CHECK_RES(mscclppAllReduce(x, y, 64, mscclppInt32, mscclppMax, c, NULL), mscclppSuccess);
  int32_t top = y[0] - 0; /* the largest parent rank among the members */
  for (int i = 0; i < 64; i++) CHECK(y[i] == top + i);
  int32_t b[8];
  for (int i = 0; i < 8; i++) b[i] = r == n - 1 ? 77 + i : -1;
  CHECK_RES(mscclppBroadcast(b, b, 8, mscclppInt32, n - 1, c, NULL), mscclppSuccess);
  for (int i = 0; i < 8; i++) CHECK(b[i] == 77 + i);
  printf("rank %d: %s: rank %d of %d, checked\n", rank, what, r, n);
}

static void testShrink(mscclppComm_t comm) {
  if (nranks < 3) {
    printf("rank %d: shrink needs 3 ranks or more\n", rank);
    CHECK(0);
    return;
  }
  mscclppComm_t c = NULL;
  /* without the last rank, named twice */
  if (rank != nranks - 1) {
    int ex[2] = {nranks - 1, nranks - 1};
    CHECK_RES(mscclppCommShrink(comm, ex, 2, &c, MSCCLPP_SHRINK_DEFAULT), mscclppSuccess);
    if (c != NULL) {
      checkComm(c, nranks - 1, rank, rank, "without the last rank");
      CHECK_RES(mscclppCommDestroy(c), mscclppSuccess);
    }
  }
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  checkComm(comm, nranks, rank, rank, "the parent after it");
  /* without rank 0; that child again without its last rank */
  if (rank != 0) {
    int ex = 0;
    c = NULL;
    CHECK_RES(mscclppCommShrink(comm, &ex, 1, &c, MSCCLPP_SHRINK_DEFAULT), mscclppSuccess);
    if (c != NULL) {
      checkComm(c, nranks - 1, rank - 1, rank, "without rank 0");
      if (rank != nranks - 1) {
        int ex2 = nranks - 2;
        mscclppComm_t cc = NULL;
        CHECK_RES(mscclppCommShrink(c, &ex2, 1, &cc, MSCCLPP_SHRINK_DEFAULT), mscclppSuccess);
        if (cc != NULL) {
          checkComm(cc, nranks - 2, rank - 1, rank, "a shrink of that");
          CHECK_RES(mscclppCommDestroy(cc), mscclppSuccess);
        }
      }
      CHECK_RES(mscclppCommDestroy(c), mscclppSuccess);
    }
  }
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  /* nobody excluded */
  c = NULL;
  CHECK_RES(mscclppCommShrink(comm, NULL, 0, &c, MSCCLPP_SHRINK_DEFAULT), mscclppSuccess);
  if (c != NULL) {
    checkComm(c, nranks, rank, rank, "nobody excluded");
    CHECK_RES(mscclppCommDestroy(c), mscclppSuccess);
  }
  /* bad arguments fail on the caller only */
  int bad = nranks;
  CHECK_RES(mscclppCommShrink(comm, &bad, 1, &c, MSCCLPP_SHRINK_DEFAULT), mscclppInvalidArgument);
  CHECK_RES(mscclppCommShrink(comm, &rank, 1, &c, MSCCLPP_SHRINK_DEFAULT), mscclppInvalidArgument);
  CHECK_RES(mscclppCommShrink(comm, NULL, 0, &c, 7), mscclppInvalidArgument);
  CHECK_RES(mscclppCommShrink(comm, NULL, 0, NULL, MSCCLPP_SHRINK_DEFAULT), mscclppInvalidArgument);
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  /* different lists: rank 0 excludes the last rank, which calls too */
  c = NULL;
  int last = nranks - 1;
  double t0 = nowSec();
  mscclppResult_t r = mscclppCommShrink(comm, &last, rank == 0 ? 1 : 0, &c, MSCCLPP_SHRINK_DEFAULT);
  double took = nowSec() - t0;
  printf("rank %d: different lists: %s after %.2f s: %s\n", rank, mscclppGetErrorString(r), took,
         mscclppGetLastError());
  CHECK(r == mscclppInvalidUsage || r == mscclppRemoteError);
  CHECK(c == NULL);
  CHECK(took < 5.0);
  CHECK(strstr(mscclppGetLastError(), "same list") != NULL || strstr(mscclppGetLastError(), "gave it up") != NULL);
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  /* the same shrink with one list works right after */
  CHECK_RES(mscclppCommShrink(comm, NULL, 0, &c, MSCCLPP_SHRINK_DEFAULT), mscclppSuccess);
  if (c != NULL) {
    checkComm(c, nranks, rank, rank, "after the failed one");
    CHECK_RES(mscclppCommDestroy(c), mscclppSuccess);
  }
}

/* ---- kill ---------------------------------------------------------------------------------- */

/* Allreduce on c until one fails (a peer died); the victim dies at the
 * third. Returns the failed call's status (mscclppSuccess if all 1000
 * passed). */
static mscclppResult_t runUntilFailure(mscclppComm_t c, int me, int victim, double* killedAt) {
  float x[4096], y[4096];
  for (int it = 0; it < 1000; it++) {
    if (me == victim && it == 3) {
      printf("rank %d: KILLED_AT %.6f\n", rank, nowSec());
      fflush(stdout);
      raise(SIGKILL);
    }
    for (int i = 0; i < 4096; i++) x[i] = (float)(i % 7);
    mscclppResult_t r = mscclppAllReduce(x, y, 4096, mscclppFloat32, mscclppSum, c, NULL);
    if (r != mscclppSuccess) {
      printf("rank %d: allreduce %d: %s: %s\n", rank, it, mscclppGetErrorString(r), mscclppGetLastError());
      return r;
    }
    if (it == 2) *killedAt = nowSec(); /* about when the victim dies: its kill is printed exactly */
  }
  return mscclppSuccess;
}

/* After `victim` (a rank of c) died: refuse DEFAULT, shrink with ABORT,
 * check the child. */
static mscclppComm_t recoverFrom(mscclppComm_t c, int n, int me, int victim, int parentRank, double* firstOk) {
  mscclppComm_t child = NULL;
  CHECK_RES(mscclppCommShrink(c, &victim, 1, &child, MSCCLPP_SHRINK_DEFAULT), mscclppInvalidUsage);
  CHECK(strstr(mscclppGetLastError(), "MSCCLPP_SHRINK_ABORT") != NULL);
  double t0 = nowSec();
  CHECK_RES(mscclppCommShrink(c, &victim, 1, &child, MSCCLPP_SHRINK_ABORT), mscclppSuccess);
  if (child == NULL) return NULL;
  float x = 1, y = 0;
  CHECK_RES(mscclppAllReduce(&x, &y, 1, mscclppFloat32, mscclppSum, child, NULL), mscclppSuccess);
  *firstOk = nowSec();
  CHECK(y == (float)(n - 1));
  printf("rank %d: shrink took %.3f s, first allreduce %.3f s after it\n", rank, *firstOk - t0, 0.0);
  checkComm(child, n - 1, me < victim ? me : me - 1, parentRank, "after the kill");
  /* the parent refuses collectives now, and its destroy works */
  CHECK(mscclppAllReduce(&x, &y, 1, mscclppFloat32, mscclppSum, c, NULL) != mscclppSuccess);
  return child;
}

/* What a user built on a communicator: memory channels around a ring. */
struct userObjects {
  void* buf;
  mscclppRegisteredMemory_t mem;
  mscclppConnection_t conn[2];
  mscclppMemoryChannel_t ch[2];
};

static void userBuild(mscclppComm_t comm, struct userObjects* u) {
  memset(u, 0, sizeof(*u));
  CHECK_RES(mscclppMemAlloc(comm, mscclppMemKindHostShared, 4096, &u->buf), mscclppSuccess);
  CHECK_RES(mscclppMemoryRegister(comm, u->buf, 4096, mscclppTransportHostShm, &u->mem), mscclppSuccess);
  int peers[2] = {(rank + 1) % nranks, (rank + nranks - 1) % nranks};
  /* each connection waits for its peer's: make them in one global order
   * of the ring's edges (by their lower, then higher rank), or the ring
   * waits for itself */
  int lo0 = rank < peers[0] ? rank : peers[0], hi0 = rank ^ peers[0] ^ lo0;
  int lo1 = rank < peers[1] ? rank : peers[1], hi1 = rank ^ peers[1] ^ lo1;
  if (lo1 < lo0 || (lo1 == lo0 && hi1 < hi0)) {
    int t = peers[0];
    peers[0] = peers[1];
    peers[1] = t;
  }
  for (int k = 0; k < 2; k++) {
    CHECK_RES(mscclppConnectionCreate(comm, peers[k], 77, mscclppTransportHostShm, &u->conn[k]), mscclppSuccess);
    mscclppMemoryChannelConfig mc = MSCCLPP_MEMORY_CHANNEL_CONFIG_INITIALIZER;
    mc.local = u->mem;
    mc.tag = 78;
    if (u->conn[k] != NULL) CHECK_RES(mscclppMemoryChannelCreate(comm, u->conn[k], &mc, &u->ch[k]), mscclppSuccess);
  }
}

/* After the shrink: the parent's channels fail at once, then go. */
static void userRelease(struct userObjects* u) {
  for (int k = 0; k < 2; k++) {
    if (u->ch[k] == NULL) continue;
    mscclppMemoryChannelDeviceHandle h;
    CHECK_RES(mscclppMemoryChannelGetDeviceHandle(u->ch[k], &h), mscclppSuccess);
    double t0 = nowSec();
    CHECK_RES(mscclppMemoryChannelDeviceWait(&h), mscclppAborted); /* nobody signals it */
    CHECK(nowSec() - t0 < 1.0);
  }
  for (int k = 0; k < 2; k++) {
    if (u->ch[k] != NULL) CHECK_RES(mscclppMemoryChannelDestroy(u->ch[k]), mscclppSuccess);
    if (u->conn[k] != NULL) CHECK_RES(mscclppConnectionDestroy(u->conn[k]), mscclppSuccess);
  }
  if (u->mem != NULL) CHECK_RES(mscclppMemoryDeregister(u->mem), mscclppSuccess);
}

static int testKill(mscclppComm_t comm, const char* victims) {
  int v1 = atoi(victims);
  const char* comma = strchr(victims, ',');
  int v2 = comma != NULL ? atoi(comma + 1) : -1;
  struct userObjects u;
  memset(&u, 0, sizeof(u));
  if (v2 < 0) userBuild(comm, &u);
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  double killedAt = 0, firstOk = 0;
  CHECK(runUntilFailure(comm, rank, v1, &killedAt) != mscclppSuccess);
  mscclppComm_t c1 = recoverFrom(comm, nranks, rank, v1, rank, &firstOk);
  if (v2 < 0) {
    userRelease(&u);
    if (u.buf != NULL) CHECK_RES(mscclppMemFree(comm, u.buf), mscclppSuccess);
  }
  CHECK_RES(mscclppCommDestroy(comm), mscclppSuccess);
  if (c1 == NULL) return 1;
  printf("rank %d: recovered %.3f s after the first kill\n", rank, firstOk - killedAt);
  if (v2 >= 0) {
    int me = rank < v1 ? rank : rank - 1;
    int w = v2 < v1 ? v2 : v2 - 1; /* in c1 */
    CHECK(runUntilFailure(c1, me, w, &killedAt) != mscclppSuccess);
    mscclppComm_t c2 = recoverFrom(c1, nranks - 1, me, w, rank, &firstOk);
    CHECK_RES(mscclppCommDestroy(c1), mscclppSuccess);
    if (c2 == NULL) return 1;
    printf("rank %d: recovered %.3f s after the second kill\n", rank, firstOk - killedAt);
    c1 = c2;
  }
  CHECK_RES(mscclppCommDestroy(c1), mscclppSuccess);
  if (harnessFailures_ == 0) printf("SURVIVOR_OK rank %d\n", rank);
  return harnessFailures_ == 0 ? 0 : 1;
}

/* ---- grow ------------------------------------------------------------------------------- */

static void hexOf(const void* p, size_t n, char* out) {
  for (size_t i = 0; i < n; i++) sprintf(out + 2 * i, "%02x", ((const unsigned char*)p)[i]);
}

static int unhex(const char* s, void* p, size_t n) {
  if (strlen(s) != 2 * n) return -1;
  for (size_t i = 0; i < n; i++) {
    unsigned v;
    if (sscanf(s + 2 * i, "%2x", &v) != 1) return -1;
    ((unsigned char*)p)[i] = (unsigned char)v;
  }
  return 0;
}

/* Start this program as a new rank that joins with `id`. */
static pid_t spawnJoiner(const mscclppUniqueId* id, int n, int r, int expectFail) {
  char hex[2 * sizeof(*id) + 1], ns[16], rs[16];
  hexOf(id, sizeof(*id), hex);
  snprintf(ns, sizeof(ns), "%d", n);
  snprintf(rs, sizeof(rs), "%d", r);
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    execl("/proc/self/exe", "recover_worker", expectFail ? "join-refused" : "join", hex, ns, rs, (char*)NULL);
    _exit(127);
  }
  return pid;
}

/* The grown communicator of n ranks, every rank's part: sums and a
 * broadcast from the new rank. */
static void checkGrown(mscclppComm_t g, int n, int r) {
  int gn = -1, gr = -1;
  CHECK_RES(mscclppCommSize(g, &gn), mscclppSuccess);
  CHECK_RES(mscclppCommRank(g, &gr), mscclppSuccess);
  CHECK(gn == n && gr == r);
  int32_t x[256], y[256];
  for (int i = 0; i < 256; i++) x[i] = r + i;
  CHECK_RES(mscclppAllReduce(x, y, 256, mscclppInt32, mscclppSum, g, NULL), mscclppSuccess);
  for (int i = 0; i < 256; i++) CHECK(y[i] == n * (n - 1) / 2 + n * i);
  for (int i = 0; i < 256; i++) x[i] = r == n - 1 ? 5 * i : -1;
  CHECK_RES(mscclppBroadcast(x, x, 256, mscclppInt32, n - 1, g, NULL), mscclppSuccess);
  for (int i = 0; i < 256; i++) CHECK(x[i] == 5 * i);
}

/* The new process: join, check, leave; or (refused) fail to join with an
 * old rank's number. */
static int runJoin(const char* hex, int n, int r, int refused) {
  mscclppUniqueId id;
  if (unhex(hex, &id, sizeof(id)) != 0) return 2;
  mscclppComm_t g = NULL;
  if (refused) {
    CHECK_RES(mscclppCommGrow(NULL, n, &id, r, &g), mscclppRemoteError);
    printf("joiner claiming rank %d: %s\n", r, mscclppGetLastError());
    return harnessFailures_ ? 1 : 0;
  }
  CHECK_RES(mscclppCommGrow(NULL, n, &id, r, &g), mscclppSuccess);
  if (g == NULL) return 1;
  checkGrown(g, n, r);
  CHECK_RES(mscclppCommDestroy(g), mscclppSuccess);
  printf("joiner (rank %d of %d): %s\n", r, n, harnessFailures_ ? "FAILED" : "JOINED_OK");
  return harnessFailures_ ? 1 : 0;
}

static int testGrow(mscclppComm_t comm, int victim) {
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  double killedAt = 0, firstOk = 0;
  CHECK(runUntilFailure(comm, rank, victim, &killedAt) != mscclppSuccess);
  mscclppComm_t c = recoverFrom(comm, nranks, rank, victim, rank, &firstOk);
  CHECK_RES(mscclppCommDestroy(comm), mscclppSuccess);
  if (c == NULL) return 1;
  int me = rank < victim ? rank : rank - 1;
  /* arguments refused on the caller only */
  mscclppUniqueId id;
  mscclppComm_t g = NULL;
  CHECK_RES(mscclppCommGrow(c, nranks - 1, &id, 0, &g), mscclppInvalidArgument);
  CHECK_RES(mscclppCommGrowId(NULL, &id), mscclppInvalidArgument);
  /* a new rank that claims a member's number: everyone is refused */
  CHECK_RES(mscclppCommGrowId(c, &id), mscclppSuccess);
  pid_t joiner = me == 0 ? spawnJoiner(&id, nranks, 1, 1) : -1;
  double t0 = nowSec();
  CHECK_RES(mscclppCommGrow(c, nranks, &id, -1, &g), mscclppRemoteError);
  printf("rank %d: grow with a duplicate rank refused after %.2f s: %s\n", rank, nowSec() - t0,
         mscclppGetLastError());
  CHECK(nowSec() - t0 < 5.0);
  if (joiner > 0) {
    int status = 0;
    waitpid(joiner, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  /* grow back to nranks: the lowest survivor starts the new rank */
  t0 = nowSec();
  CHECK_RES(mscclppCommGrowId(c, &id), mscclppSuccess);
  joiner = me == 0 ? spawnJoiner(&id, nranks, nranks - 1, 0) : -1;
  CHECK_RES(mscclppCommGrow(c, nranks, &id, -1, &g), mscclppSuccess);
  if (g != NULL) {
    printf("rank %d: grown back to %d ranks in %.3f s\n", rank, nranks, nowSec() - t0);
    checkGrown(g, nranks, me);
    CHECK_RES(mscclppCommDestroy(g), mscclppSuccess);
  }
  CHECK_RES(mscclppCommDestroy(c), mscclppSuccess);
  if (joiner > 0) {
    int status = 0;
    waitpid(joiner, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  if (harnessFailures_ == 0) printf("SURVIVOR_OK rank %d\n", rank);
  return harnessFailures_ == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "revoke";
  setenv("CUDA_VISIBLE_DEVICES", "", 1); /* the host backend, also on a GPU machine */
  if (strncmp(mode, "join", 4) == 0 && argc > 4)
    return runJoin(argv[2], atoi(argv[3]), atoi(argv[4]), strcmp(mode, "join-refused") == 0);
  mscclppComm_t comm = NULL;
  mscclppResult_t res = mscclppCommInitFromEnv(&comm);
  if (res != mscclppSuccess) {
    fprintf(stderr, "mscclppCommInitFromEnv: %s: %s\n", mscclppGetErrorString(res), mscclppGetLastError());
    return 1;
  }
  mscclppCommRank(comm, &rank);
  mscclppCommSize(comm, &nranks);
  if (strcmp(mode, "kill") == 0 && argc > 2) return testKill(comm, argv[2]);
  if (strcmp(mode, "grow") == 0 && argc > 2) return testGrow(comm, atoi(argv[2]));
  if (strcmp(mode, "revoke") == 0) {
    testRevoke(comm);
  } else if (strcmp(mode, "shrink") == 0) {
    testShrink(comm);
  } else {
    fprintf(stderr, "usage: recover_worker revoke | shrink | kill V[,W] | grow V | join ID N R\n");
    return 2;
  }
  CHECK_RES(mscclppCommDestroy(comm), mscclppSuccess);
  int ok = harnessFailures_ == 0;
  printf("rank %d: %s %s\n", rank, mode, ok ? "passed" : "FAILED");
  return ok ? 0 : 1;
}
