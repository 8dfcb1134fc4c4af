/* SPDX-License-Identifier: MIT */
/*
 * One rank of the multi-process bootstrap tests, started by mscclpp-run:
 *
 *   bootstrap_worker [all]     allgather (every byte checked), barrier, tagged
 *                              send/recv of 0, 1 and 1 MiB+13 bytes received
 *                              out of order, self send, size mismatch, messages
 *                              cut into pieces, a tag served by a handler,
 *                              all-to-all, threads sharing connections,
 *                              ranks per host
 *   bootstrap_worker hostid    MSCCLPP_HOSTID splits the ranks into two "hosts"
 *   bootstrap_worker kill V    rank V SIGKILLs itself while the others are in an
 *                              allgather; they must fail with an error naming
 *                              rank V within 10 s, then destroy cleanly
 *   bootstrap_worker intrude   clients with a wrong secret, garbage, nothing,
 *                              or a stale session hit this rank's listener
 *                              while the job runs; they are refused and the
 *                              job goes on
 *
 * Each rank prints "rank R: <mode> passed" (or SURVIVOR_OK for kill) and
 * exits 0 on success.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/handshake.h"
#include "comm/comm.h"
#include "core/util.h"
#include "harness.h"
#include "mscclpp/comm.h"
#include "mscclpp/seed.h" /* mscclppBootStrapAllGather, the seed's spelling */

static int rank = -1, nranks = -1;
static mscclppComm_t theComm; /* for RUN(), which calls functions without arguments */

static uint8_t pattern(int r, size_t i, int seed) { return (uint8_t)(r * 131 + (int)(i * 7) + seed * 17 + 1); }

static double nowSec(void) { return (double)mscclppTimeNs() / 1e9; }

static mscclppComm_t initComm(void) {
  mscclppComm_t comm = NULL;
  double t0 = nowSec();
  mscclppResult_t res = mscclppCommInitFromEnv(&comm);
  if (res != mscclppSuccess) {
    fprintf(stderr, "rank ?: mscclppCommInitFromEnv failed: %s: %s\n", mscclppGetErrorString(res),
            mscclppGetLastError());
    exit(1);
  }
  mscclppCommRank(comm, &rank);
  mscclppCommSize(comm, &nranks);
  printf("rank %d: init of %d ranks took %.1f ms\n", rank, nranks, (nowSec() - t0) * 1e3);
  fflush(stdout);
  return comm;
}

static void checkAllGather(mscclppComm_t comm, size_t bytes, int seed) {
  uint8_t* buf = (uint8_t*)malloc((size_t)nranks * bytes + 1);
  memset(buf, 0xEE, (size_t)nranks * bytes);
  for (size_t i = 0; i < bytes; i++) buf[(size_t)rank * bytes + i] = pattern(rank, i, seed);
  CHECK_RES(mscclppBootstrapAllGather(comm, buf, bytes), mscclppSuccess);
  size_t bad = 0;
  for (int r = 0; r < nranks; r++)
    for (size_t i = 0; i < bytes; i++)
      if (buf[(size_t)r * bytes + i] != pattern(r, i, seed)) bad++;
  if (bad) fprintf(stderr, "rank %d: allgather of %zu bytes per rank: %zu wrong bytes\n", rank, bytes, bad);
  CHECK(bad == 0);
  free(buf);
}

static void testAllGather(void) {
  mscclppComm_t comm = theComm;
  size_t sizes[] = {0, 1, 3, 1000, 65536 + 5};
  for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) checkAllGather(comm, sizes[k], (int)k);
  /* The seed's spelling. */
  int vals[1024];
  for (int i = 0; i < nranks; i++) vals[i] = -1;
  vals[rank] = rank * 10;
  CHECK_RES(mscclppBootStrapAllGather(comm, vals, (int)sizeof(int)), mscclppSuccess);
  for (int i = 0; i < nranks; i++) CHECK(vals[i] == i * 10);
  CHECK_RES(mscclppBootStrapAllGather(comm, vals, -1), mscclppInvalidArgument);
  CHECK_RES(mscclppBootstrapAllGather(comm, NULL, 4), mscclppInvalidArgument);
}

static void testBarrier(void) {
  mscclppComm_t comm = theComm;
  for (int i = 0; i < 5; i++) CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
}

static void sendPattern(mscclppComm_t comm, int peer, int tag, size_t bytes, int seed) {
  uint8_t* buf = (uint8_t*)malloc(bytes + 1);
  for (size_t i = 0; i < bytes; i++) buf[i] = pattern(rank, i, seed);
  CHECK_RES(mscclppBootstrapSend(comm, peer, tag, buf, bytes), mscclppSuccess);
  free(buf);
}

static void recvPattern(mscclppComm_t comm, int peer, int tag, size_t bytes, int seed) {
  uint8_t* buf = (uint8_t*)malloc(bytes + 1);
  memset(buf, 0, bytes + 1);
  CHECK_RES(mscclppBootstrapRecv(comm, peer, tag, buf, bytes), mscclppSuccess);
  size_t bad = 0;
  for (size_t i = 0; i < bytes; i++)
    if (buf[i] != pattern(peer, i, seed)) bad++;
  if (bad) fprintf(stderr, "rank %d: recv from %d tag %d (%zu bytes): %zu wrong bytes\n", rank, peer, tag, bytes, bad);
  CHECK(bad == 0);
  free(buf);
}

static void testSendRecv(void) {
  mscclppComm_t comm = theComm;
  int to = (rank + 1) % nranks, from = (rank - 1 + nranks) % nranks;
  const size_t big = ((size_t)1 << 20) + 13;
  /* Sent in tag order, received in reverse: the later tags must not wait for
   * the earlier ones. */
  sendPattern(comm, to, 1, 0, 1);
  sendPattern(comm, to, 2, 1, 2);
  sendPattern(comm, to, 3, big, 3);
  sendPattern(comm, to, -7, 100, 4);
  recvPattern(comm, from, -7, 100, 4);
  recvPattern(comm, from, 3, big, 3);
  recvPattern(comm, from, 2, 1, 2);
  recvPattern(comm, from, 1, 0, 1);
  /* Same tag: in order. */
  sendPattern(comm, to, 5, 10, 50);
  sendPattern(comm, to, 5, 20, 51);
  recvPattern(comm, from, 5, 10, 50);
  recvPattern(comm, from, 5, 20, 51);
  /* Self. */
  sendPattern(comm, rank, 9, 1000, 9);
  sendPattern(comm, rank, 9, 0, 10);
  recvPattern(comm, rank, 9, 1000, 9);
  recvPattern(comm, rank, 9, 0, 10);
  /* A size mismatch consumes the message and is reported; the next one works. */
  sendPattern(comm, to, 11, 10, 11);
  sendPattern(comm, to, 12, 10, 12);
  uint8_t tmp[64];
  CHECK_RES(mscclppBootstrapRecv(comm, from, 11, tmp, 20), mscclppInvalidUsage);
  CHECK(strstr(mscclppGetLastError(), "sent 10 bytes") != NULL);
  recvPattern(comm, from, 12, 10, 12);
  /* Bad arguments. */
  CHECK_RES(mscclppBootstrapSend(comm, nranks, 0, tmp, 1), mscclppInvalidArgument);
  CHECK_RES(mscclppBootstrapRecv(comm, -1, 0, tmp, 1), mscclppInvalidArgument);
  CHECK_RES(mscclppBootstrapSend(comm, to, 0, NULL, 1), mscclppInvalidArgument);
  CHECK_RES(mscclppBootstrapSend(NULL, to, 0, tmp, 1), mscclppInvalidArgument);
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
}

/* Large messages travel as pieces; cut them small here to test that. */
static void testPieces(void) {
  mscclppComm_t comm = theComm;
  int to = (rank + 1) % nranks, from = (rank - 1 + nranks) % nranks;
  mscclppBootstrapSetMaxPieceForTest(comm->bootstrap, 4096);
  sendPattern(comm, to, 13, 100003, 13);
  sendPattern(comm, to, 14, 10000, 14);
  sendPattern(comm, to, 15, 8192, 15);
  recvPattern(comm, from, 13, 100003, 13);
  uint8_t* buf = (uint8_t*)malloc(10000);
  CHECK_RES(mscclppBootstrapRecv(comm, from, 14, buf, 5000), mscclppInvalidUsage);
  free(buf);
  recvPattern(comm, from, 15, 8192, 15);
  checkAllGather(comm, 10000, 77); /* collectives in pieces too */
  mscclppBootstrapSetMaxPieceForTest(comm->bootstrap, MSCCLPP_BS_MAX_MSG_BYTES);
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
}

/* Several threads of each rank send and receive on the same pair of
 * connections at once, each with its own tag: messages must neither mix nor
 * wait for each other. */
#define NTHREADS 4
#define NMSGS 50
struct threadArg {
  int t;
  int bad;
};

static void* threadTraffic(void* arg) {
  struct threadArg* a = (struct threadArg*)arg;
  int to = (rank + 1) % nranks, from = (rank - 1 + nranks) % nranks;
  int tag = 100 + a->t;
  for (int i = 0; i < NMSGS; i++) {
    int v[3] = {rank, a->t, i};
    size_t size = (size_t)(i % 3 == 0 ? 12 : 4000 + i);
    uint8_t* buf = (uint8_t*)calloc(1, size);
    memcpy(buf, v, sizeof(v));
    if (mscclppBootstrapSend(theComm, to, tag, buf, size) != mscclppSuccess) a->bad++;
    memset(buf, 0, size);
    if (mscclppBootstrapRecv(theComm, from, tag, buf, size) != mscclppSuccess) a->bad++;
    memcpy(v, buf, sizeof(v));
    if (v[0] != from || v[1] != a->t || v[2] != i) a->bad++;
    free(buf);
  }
  return NULL;
}

static void testThreads(void) {
  pthread_t th[NTHREADS];
  struct threadArg args[NTHREADS];
  for (int t = 0; t < NTHREADS; t++) {
    args[t] = (struct threadArg){t, 0};
    pthread_create(&th[t], NULL, threadTraffic, &args[t]);
  }
  for (int t = 0; t < NTHREADS; t++) {
    pthread_join(th[t], NULL);
    CHECK(args[t].bad == 0);
  }
  CHECK_RES(mscclppBootstrapBarrier(theComm), mscclppSuccess);
}

static void testAllToAll(void) {
  mscclppComm_t comm = theComm;
  for (int p = 0; p < nranks; p++) sendPattern(comm, p, 20, 64, 20 + rank);
  for (int p = 0; p < nranks; p++) recvPattern(comm, p, 20, 64, 20 + p);
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
}

static int envInt(const char* name) {
  const char* v = getenv(name);
  return v ? atoi(v) : -100;
}

static void testLocal(void) {
  mscclppComm_t comm = theComm;
  int lr = -1, ls = -1;
  CHECK_RES(mscclppCommLocalRank(comm, &lr), mscclppSuccess);
  CHECK_RES(mscclppCommLocalSize(comm, &ls), mscclppSuccess);
  CHECK(rank == envInt("MSCCLPP_RANK") && nranks == envInt("MSCCLPP_NRANKS"));
  /* One host: the launcher's local rank is the rank. */
  CHECK(lr == envInt("MSCCLPP_LOCAL_RANK"));
  CHECK(ls == nranks);
  mscclppResult_t async = mscclppInternalError;
  CHECK_RES(mscclppCommGetAsyncError(comm, &async), mscclppSuccess);
  CHECK(async == mscclppSuccess);
}

/* A layer above serves its peers through a handler (mscclppBootstrapSetHandler):
 * messages sent before it is set reach it when it is set, later ones as
 * they arrive, in order per sender; other tags are queued as usual; once
 * removed, the tag is queued again. */
#define HANDLER_TAG 0x6a000001
static struct {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int n;
  int peer[8];
  uint32_t value[8];
} got = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, {0}, {0}};

static void onMessage(void* arg, int peer, const void* data, size_t size) {
  CHECK(arg == &got);
  uint32_t v = 0;
  if (size == sizeof(v)) memcpy(&v, data, sizeof(v));
  pthread_mutex_lock(&got.lock);
  if (got.n < 8) {
    got.peer[got.n] = size == sizeof(v) ? peer : -1;
    got.value[got.n] = v;
    got.n++;
  }
  pthread_cond_broadcast(&got.cond);
  pthread_mutex_unlock(&got.lock);
}

static void testHandler(void) {
  mscclppComm_t comm = theComm;
  if (nranks < 2) return;
  int to = (rank + 1) % nranks, from = (rank - 1 + nranks) % nranks;
  struct mscclppBootstrap* bs = comm->bootstrap;
  for (uint32_t v = 1; v <= 2; v++) CHECK_RES(mscclppBootstrapSend(comm, to, HANDLER_TAG, &v, sizeof(v)), mscclppSuccess);
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  CHECK_RES(mscclppBootstrapSetHandler(bs, HANDLER_TAG, onMessage, &got), mscclppSuccess);
  CHECK_RES(mscclppBootstrapSetHandler(bs, HANDLER_TAG, onMessage, &got), mscclppInvalidUsage);
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  for (uint32_t v = 3; v <= 4; v++) CHECK_RES(mscclppBootstrapSend(comm, to, HANDLER_TAG, &v, sizeof(v)), mscclppSuccess);
  sendPattern(comm, to, HANDLER_TAG + 1, 64, 21); /* another tag: queued */
  recvPattern(comm, from, HANDLER_TAG + 1, 64, 21);
  double deadline = nowSec() + 10;
  pthread_mutex_lock(&got.lock);
  while (got.n < 4 && nowSec() < deadline) {
    pthread_mutex_unlock(&got.lock);
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
    pthread_mutex_lock(&got.lock);
  }
  CHECK(got.n == 4);
  for (int i = 0; i < got.n && i < 4; i++) {
    CHECK(got.peer[i] == from);
    CHECK(got.value[i] == (uint32_t)i + 1);
  }
  pthread_mutex_unlock(&got.lock);
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  CHECK_RES(mscclppBootstrapSetHandler(bs, HANDLER_TAG, NULL, NULL), mscclppSuccess);
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  uint32_t v = 5, w = 0;
  CHECK_RES(mscclppBootstrapSend(comm, to, HANDLER_TAG, &v, sizeof(v)), mscclppSuccess);
  CHECK_RES(mscclppBootstrapRecv(comm, from, HANDLER_TAG, &w, sizeof(w)), mscclppSuccess);
  CHECK(w == 5);
  CHECK(got.n == 4);
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
}

static int modeAll(void) {
  mscclppComm_t comm = initComm();
  theComm = comm;
  RUN(testLocal);
  RUN(testAllGather);
  RUN(testBarrier);
  RUN(testSendRecv);
  RUN(testPieces);
  RUN(testHandler);
  RUN(testAllToAll);
  RUN(testThreads);
  CHECK_RES(mscclppCommDestroy(comm), mscclppSuccess);
  int rc = harnessFinish();
  if (rc == 0) printf("rank %d: all passed\n", rank);
  return rc;
}

static int modeHostId(void) {
  /* Two fake hosts: even and odd ranks. */
  int r = envInt("MSCCLPP_RANK");
  setenv("MSCCLPP_HOSTID", r % 2 ? "host-odd" : "host-even", 1);
  mscclppComm_t comm = initComm();
  int lr = -1, ls = -1;
  mscclppCommLocalRank(comm, &lr);
  mscclppCommLocalSize(comm, &ls);
  CHECK(lr == rank / 2);
  CHECK(ls == (rank % 2 ? nranks / 2 : (nranks + 1) / 2));
  /* Everyone agrees: gather (localRank, localSize). */
  int info[2 * 1024];
  info[2 * rank] = lr;
  info[2 * rank + 1] = ls;
  CHECK_RES(mscclppBootstrapAllGather(comm, info, 2 * sizeof(int)), mscclppSuccess);
  for (int i = 0; i < nranks; i++) CHECK(info[2 * i] == i / 2);
  CHECK_RES(mscclppCommDestroy(comm), mscclppSuccess);
  if (harnessFailures_ != 0) return 1;
  printf("rank %d: hostid passed (local rank %d of %d)\n", rank, lr, ls);
  return 0;
}

static int modeKill(int victim) {
  mscclppComm_t comm = initComm();
  if (victim < 0 || victim >= nranks) {
    fprintf(stderr, "victim %d out of range\n", victim);
    return 2;
  }
  uint8_t* buf = (uint8_t*)calloc((size_t)nranks, 4096);
  for (int iter = 0; iter < 1000; iter++) {
    if (rank == victim && iter == 3) {
      printf("rank %d: killing myself in the middle of allgather %d\n", rank, iter);
      fflush(stdout);
      struct timespec ts = {0, 300000000L}; /* the others are waiting in the allgather by now */
      nanosleep(&ts, NULL);
      raise(SIGKILL);
    }
    double t0 = nowSec();
    mscclppResult_t res = mscclppBootstrapAllGather(comm, buf, 4096);
    if (res == mscclppSuccess) continue;
    double waited = nowSec() - t0;
    char want[32];
    snprintf(want, sizeof(want), "rank %d", victim);
    const char* why = mscclppGetLastError();
    printf("rank %d: allgather %d failed after %.2f s: %s: %s\n", rank, iter, waited, mscclppGetErrorString(res), why);
    CHECK(res == mscclppRemoteError);
    CHECK(strstr(why, want) != NULL);
    CHECK(waited < 10.0);
    CHECK(iter == 3);
    /* Later calls fail at once, naming the same rank. */
    t0 = nowSec();
    CHECK_RES(mscclppBootstrapBarrier(comm), mscclppRemoteError);
    CHECK(strstr(mscclppGetLastError(), want) != NULL);
    CHECK(nowSec() - t0 < 1.0);
    mscclppResult_t async = mscclppSuccess;
    CHECK_RES(mscclppCommGetAsyncError(comm, &async), mscclppSuccess);
    CHECK(async == mscclppRemoteError);
    CHECK_RES(mscclppCommDestroy(comm), mscclppSuccess);
    free(buf);
    if (harnessFailures_ == 0) printf("SURVIVOR_OK rank %d after %.2f s\n", rank, waited);
    return harnessFailures_ == 0 ? 0 : 1;
  }
  printf("rank %d: FAIL: 1000 allgathers succeeded although rank %d should have died\n", rank, victim);
  return 1;
}

/* ---- intrude: clients against this rank's own peer listener ---------------------- */

struct intruders {
  union mscclppSocketAddr addr;
  uint8_t secret[MSCCLPP_BS_SECRET_BYTES];
  uint64_t session;
  int silentFd;
  int failures;
};

static int connectTo(const union mscclppSocketAddr* addr) {
  int fd = -1;
  if (mscclppSocketConnect(addr, mscclppDeadlineIn(5), 0, 1, &fd) != mscclppSuccess) return -1;
  return fd;
}

/* 1 when the server closes the connection (EOF) within 5 s without sending
 * anything after the challenge. */
static int expectClosed(int fd) {
  uint8_t b[64];
  mscclppDeadline d = mscclppDeadlineIn(5);
  for (;;) {
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, mscclppDeadlineRemainingMs(d)) <= 0) return 0;
    ssize_t n = recv(fd, b, sizeof(b), 0);
    if (n == 0 || (n < 0 && errno == ECONNRESET)) return 1;
    if (n < 0) return 0;
    return 0; /* bytes after the challenge: an ACK we should not have got */
  }
}

static void* intruderMain(void* arg) {
  struct intruders* in = (struct intruders*)arg;
  uint8_t challenge[MSCCLPP_BS_CHALLENGE_BYTES];
  /* Wrong secret: a well-formed hello with a wrong MAC. */
  int fd = connectTo(&in->addr);
  if (fd < 0 || mscclppSocketReadAll(fd, challenge, sizeof(challenge), mscclppDeadlineIn(5), NULL) != mscclppSuccess) {
    in->failures++;
  } else {
    uint8_t nonce[MSCCLPP_BS_NONCE_BYTES], hello[MSCCLPP_BS_HELLO_BYTES], wrong[MSCCLPP_BS_SECRET_BYTES];
    mscclppBootstrapParseChallenge(challenge, sizeof(challenge), nonce, NULL);
    memcpy(wrong, in->secret, sizeof(wrong));
    wrong[0] ^= 1;
    struct mscclppBsHello h;
    memset(&h, 0, sizeof(h));
    h.purpose = MSCCLPP_BS_PURPOSE_PEER;
    h.rank = (rank + 1) % nranks;
    h.nranks = nranks;
    h.session = in->session;
    mscclppBootstrapEncodeHello(&h, wrong, nonce, hello);
    send(fd, hello, sizeof(hello), MSG_NOSIGNAL);
    if (!expectClosed(fd)) {
      fprintf(stderr, "rank %d: a hello with a wrong secret was not refused\n", rank);
      in->failures++;
    }
  }
  if (fd >= 0) close(fd);
  /* Garbage. */
  fd = connectTo(&in->addr);
  if (fd < 0 || mscclppSocketReadAll(fd, challenge, sizeof(challenge), mscclppDeadlineIn(5), NULL) != mscclppSuccess) {
    in->failures++;
  } else {
    uint8_t junk[200];
    memset(junk, 0xAB, sizeof(junk));
    send(fd, junk, sizeof(junk), MSG_NOSIGNAL);
    if (!expectClosed(fd)) {
      fprintf(stderr, "rank %d: garbage was not refused\n", rank);
      in->failures++;
    }
  }
  if (fd >= 0) close(fd);
  /* Right secret, stale session: refused with a status. */
  fd = connectTo(&in->addr);
  struct mscclppBsHello h;
  memset(&h, 0, sizeof(h));
  h.purpose = MSCCLPP_BS_PURPOSE_PEER;
  h.rank = (rank + 1) % nranks;
  h.nranks = nranks;
  h.session = in->session + 2;
  int32_t status = -1;
  if (fd < 0 ||
      mscclppBootstrapHandshakeClient(fd, in->secret, &h, mscclppDeadlineIn(5), "self", &status) != mscclppSuccess ||
      status != MSCCLPP_BS_ACK_WRONG_SESSION) {
    fprintf(stderr, "rank %d: a stale session was not refused (status %d)\n", rank, status);
    in->failures++;
  }
  if (fd >= 0) close(fd);
  /* Right secret, wrong nranks. */
  fd = connectTo(&in->addr);
  h.session = in->session;
  h.nranks = nranks + 1;
  status = -1;
  if (fd < 0 ||
      mscclppBootstrapHandshakeClient(fd, in->secret, &h, mscclppDeadlineIn(5), "self", &status) != mscclppSuccess ||
      status != MSCCLPP_BS_ACK_WRONG_NRANKS) {
    fprintf(stderr, "rank %d: a wrong nranks was not refused (status %d)\n", rank, status);
    in->failures++;
  }
  if (fd >= 0) close(fd);
  return NULL;
}

static int modeIntrude(void) {
  /* The silent client must outlive the job's operations. */
  setenv("MSCCLPP_BOOTSTRAP_HANDSHAKE_TIMEOUT", "30", 1);
  mscclppComm_t comm = initComm();
  theComm = comm;
  struct intruders in;
  memset(&in, 0, sizeof(in));
  mscclppBootstrapTestView(comm->bootstrap, &in.addr, in.secret, &in.session);
  in.silentFd = connectTo(&in.addr); /* connects and says nothing */
  CHECK(in.silentFd >= 0);
  pthread_t t;
  pthread_create(&t, NULL, intruderMain, &in);
  double t0 = nowSec();
  for (int i = 0; i < 20; i++) {
    checkAllGather(comm, 256, i);
    CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  }
  testAllToAll();
  double took = nowSec() - t0;
  pthread_join(t, NULL);
  CHECK(in.failures == 0);
  CHECK(took < 10.0);
  close(in.silentFd);
  CHECK_RES(mscclppCommDestroy(comm), mscclppSuccess);
  if (harnessFailures_ != 0) return 1;
  printf("rank %d: intrude passed (operations took %.2f s while refused clients came and went)\n", rank, took);
  return 0;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char* mode = argc > 1 ? argv[1] : "all";
  if (strcmp(mode, "all") == 0) return modeAll();
  if (strcmp(mode, "hostid") == 0) return modeHostId();
  if (strcmp(mode, "kill") == 0 && argc > 2) return modeKill(atoi(argv[2]));
  if (strcmp(mode, "intrude") == 0) return modeIntrude();
  fprintf(stderr, "usage: %s [all | hostid | kill VICTIM | intrude]\n", argv[0]);
  return 2;
}
