/* SPDX-License-Identifier: MIT */
/*
 * Communicator creation, in one process (threads) and in forked processes:
 * bad input, ip:port (IPv4 and IPv6), the torchrun / Open MPI / Slurm
 * environments, two ranks claiming one rank, an nranks mismatch, a rank lost
 * during the rendezvous, timeouts, unique ids (forked and threaded), a peer
 * that left, and authenticated peers that send garbage or a cut message;
 * how many ranks share a GPU (comm/gpu_share.c).
 *
 * Forked tests come first: the parent has no live threads when it forks
 * (ThreadSanitizer refuses threads in a child of a multi-threaded parent).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/handshake.h"
#include "comm/comm.h"
#include "core/util.h"
#include "harness.h"
#include "mscclpp/comm.h"
#include "mscclpp/seed.h" /* mscclppBootStrapAllGather, the seed's spelling */

static double nowSec(void) { return (double)mscclppTimeNs() / 1e9; }

/* A port that was free a moment ago. */
static int freePort(int family) {
  int fd = socket(family, SOCK_STREAM, 0);
  union mscclppSocketAddr a;
  memset(&a, 0, sizeof(a));
  if (family == AF_INET6) {
    a.in6.sin6_family = AF_INET6;
    a.in6.sin6_addr = in6addr_loopback;
  } else {
    a.in4.sin_family = AF_INET;
    a.in4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  }
  socklen_t len = mscclppSocketAddrLen(&a);
  if (fd < 0 || bind(fd, &a.sa, len) != 0 || getsockname(fd, &a.sa, &len) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  close(fd);
  return mscclppSocketAddrPort(&a);
}

typedef int (*childFn)(int rank, void* arg);

/* Fork n children running fn(rank, arg); returns how many failed (a child
 * still running after timeoutSec is killed and counts as failed). */
static int runForked(int n, childFn fn, void* arg, double timeoutSec) {
  pid_t pids[64];
  fflush(stdout);
  fflush(stderr);
  for (int i = 0; i < n; i++) {
    pids[i] = fork();
    if (pids[i] == 0) exit(fn(i, arg));
  }
  int failed = 0, left = n;
  mscclppDeadline d = mscclppDeadlineIn(timeoutSec);
  while (left > 0) {
    for (int i = 0; i < n; i++) {
      if (pids[i] <= 0) continue;
      int st;
      pid_t got = waitpid(pids[i], &st, WNOHANG);
      if (got != pids[i]) continue;
      if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "child %d failed (status 0x%x)\n", i, st);
        failed++;
      }
      pids[i] = 0;
      left--;
    }
    if (left > 0 && mscclppDeadlinePassed(d)) {
      for (int i = 0; i < n; i++)
        if (pids[i] > 0) {
          fprintf(stderr, "child %d still running after %g s: killed\n", i, timeoutSec);
          kill(pids[i], SIGKILL);
          waitpid(pids[i], NULL, 0);
          failed++;
        }
      break;
    }
    struct timespec ts = {0, 5000000L};
    nanosleep(&ts, NULL);
  }
  return failed;
}

/* What every successful child checks: rank, size, an allgather, a ring
 * send/recv, a barrier, and destroy. Returns 0 when all is right. */
static int exercise(mscclppComm_t comm, int rank, int nranks) {
  int r = -1, n = -1, bad = 0;
  mscclppCommRank(comm, &r);
  mscclppCommSize(comm, &n);
  if (r != rank || n != nranks) bad++;
  int vals[64];
  for (int i = 0; i < nranks; i++) vals[i] = -1;
  vals[rank] = 1000 + rank;
  if (mscclppBootstrapAllGather(comm, vals, sizeof(int)) != mscclppSuccess) bad++;
  for (int i = 0; i < nranks; i++)
    if (vals[i] != 1000 + i) bad++;
  int to = (rank + 1) % nranks, from = (rank + nranks - 1) % nranks, got = -1;
  if (mscclppBootstrapSend(comm, to, 3, &rank, sizeof(rank)) != mscclppSuccess) bad++;
  if (mscclppBootstrapRecv(comm, from, 3, &got, sizeof(got)) != mscclppSuccess || got != from) bad++;
  if (mscclppBootstrapBarrier(comm) != mscclppSuccess) bad++;
  if (mscclppCommDestroy(comm) != mscclppSuccess) bad++;
  if (bad) fprintf(stderr, "rank %d of %d: %d checks failed: %s\n", rank, nranks, bad, mscclppGetLastError());
  return bad ? 1 : 0;
}

static void clearLaunchEnv(void) {
  const char* vars[] = {"MSCCLPP_RANK",
                        "MSCCLPP_NRANKS",
                        "MSCCLPP_LOCAL_RANK",
                        "MSCCLPP_LOCAL_NRANKS",
                        "MSCCLPP_COMM_ID",
                        "MSCCLPP_COMM_SECRET",
                        "OMPI_COMM_WORLD_RANK",
                        "OMPI_COMM_WORLD_SIZE",
                        "OMPI_COMM_WORLD_LOCAL_RANK",
                        "SLURM_PROCID",
                        "SLURM_NTASKS",
                        "SLURM_LOCALID",
                        "RANK",
                        "WORLD_SIZE",
                        "LOCAL_RANK",
                        "MASTER_ADDR",
                        "MASTER_PORT"};
  for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) unsetenv(vars[i]);
}

/* ---- bad input (no threads survive these) ------------------------------------ */

static void testBadInput(void) {
  mscclppComm_t comm = (mscclppComm_t)0x1;
  mscclppUniqueId id;
  memset(&id, 0, sizeof(id));
  CHECK_RES(mscclppGetUniqueId(NULL), mscclppInvalidArgument);
  CHECK_RES(mscclppCommInitRankFromId(NULL, 2, id, 0), mscclppInvalidArgument);
  CHECK_RES(mscclppCommInitRankFromId(&comm, 0, id, 0), mscclppInvalidArgument);
  CHECK_RES(mscclppCommInitRankFromId(&comm, -3, id, 0), mscclppInvalidArgument);
  CHECK_RES(mscclppCommInitRankFromId(&comm, 2, id, 2), mscclppInvalidArgument);
  CHECK_RES(mscclppCommInitRankFromId(&comm, 2, id, -1), mscclppInvalidArgument);
  CHECK_RES(mscclppCommInitRankFromId(&comm, 2, id, 0), mscclppInvalidArgument); /* a zero id */
  CHECK(strstr(mscclppGetLastError(), "unique id") != NULL);
  memset(&id, 0x5a, sizeof(id));
  CHECK_RES(mscclppCommInitRankFromId(&comm, 2, id, 0), mscclppInvalidArgument); /* garbage */
  CHECK_RES(mscclppCommInitRank(NULL, 1, 0, "127.0.0.1:5000"), mscclppInvalidArgument);
  CHECK_RES(mscclppCommInitRank(&comm, 1, 0, NULL), mscclppInvalidArgument);
  CHECK_RES(mscclppCommInitRank(&comm, 0, 0, "127.0.0.1:5000"), mscclppInvalidArgument);
  CHECK_RES(mscclppCommInitRank(&comm, 2, 5, "127.0.0.1:5000"), mscclppInvalidArgument);
  CHECK(strstr(mscclppGetLastError(), "rank=5") != NULL);
  const char* malformed[] = {"", "127.0.0.1", "127.0.0.1:", "127.0.0.1:99999", "::1:5000", "[::1:5000", "host:port"};
  for (size_t i = 0; i < sizeof(malformed) / sizeof(malformed[0]); i++) {
    CHECK_RES(mscclppCommInitRank(&comm, 1, 0, malformed[i]), mscclppInvalidArgument);
    CHECK(strstr(mscclppGetLastError(), "malformed") != NULL);
  }
  CHECK(comm == (mscclppComm_t)0x1); /* never written on failure */
  CHECK_RES(mscclppCommInitFromEnv(NULL), mscclppInvalidArgument);
  clearLaunchEnv();
  CHECK_RES(mscclppCommInitFromEnv(&comm), mscclppInvalidUsage);
  setenv("MSCCLPP_TIMEOUT", "soon", 1);
  CHECK_RES(mscclppCommInitRank(&comm, 1, 0, "127.0.0.1:5000"), mscclppInvalidArgument);
  CHECK(strstr(mscclppGetLastError(), "MSCCLPP_TIMEOUT") != NULL);
  unsetenv("MSCCLPP_TIMEOUT");
  setenv("MSCCLPP_COMM_SECRET", "xyz", 1);
  CHECK_RES(mscclppCommInitRank(&comm, 1, 0, "127.0.0.1:5000"), mscclppInvalidArgument);
  unsetenv("MSCCLPP_COMM_SECRET");
  CHECK(comm == (mscclppComm_t)0x1);

  /* A port in use. */
  int port = freePort(AF_INET);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {
      .sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr = {htonl(INADDR_LOOPBACK)}};
  CHECK(bind(fd, (struct sockaddr*)&a, sizeof(a)) == 0 && listen(fd, 4) == 0);
  char addr[64];
  snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
  CHECK_RES(mscclppCommInitRank(&comm, 1, 0, addr), mscclppSystemError);
  CHECK(strstr(mscclppGetLastError(), "in use") != NULL);
  close(fd);
  /* An address that is not this host's. */
  CHECK_RES(mscclppCommInitRank(&comm, 1, 0, "192.0.2.254:5000"), mscclppSystemError);

  /* Calls on a NULL communicator. */
  int x;
  mscclppResult_t r;
  CHECK_RES(mscclppCommDestroy(NULL), mscclppInvalidArgument);
  CHECK_RES(mscclppCommRank(NULL, &x), mscclppInvalidArgument);
  CHECK_RES(mscclppCommSize(NULL, &x), mscclppInvalidArgument);
  CHECK_RES(mscclppCommLocalRank(NULL, &x), mscclppInvalidArgument);
  CHECK_RES(mscclppCommLocalSize(NULL, &x), mscclppInvalidArgument);
  CHECK_RES(mscclppCommGetAsyncError(NULL, &r), mscclppInvalidArgument);
  CHECK_RES(mscclppCommGetDevice(NULL, &x), mscclppInvalidArgument);
  CHECK_RES(mscclppGetDeviceCount(NULL), mscclppInvalidArgument);
  char desc[16];
  CHECK_RES(mscclppGetDeviceDescription(-1, desc, sizeof(desc)), mscclppInvalidArgument);
  CHECK_RES(mscclppBootstrapAllGather(NULL, &x, 4), mscclppInvalidArgument);
  CHECK_RES(mscclppBootStrapAllGather(NULL, &x, 4), mscclppInvalidArgument);
  CHECK_RES(mscclppBootstrapBarrier(NULL), mscclppInvalidArgument);
  CHECK_RES(mscclppBootstrapSend(NULL, 0, 0, &x, 4), mscclppInvalidArgument);
  CHECK_RES(mscclppBootstrapRecv(NULL, 0, 0, &x, 4), mscclppInvalidArgument);
}

/* A one-rank job, and NULL outputs on a live communicator. */
static void testSingleRank(void) {
  char addr[64];
  snprintf(addr, sizeof(addr), "127.0.0.1:%d", freePort(AF_INET));
  mscclppComm_t comm = NULL;
  CHECK_RES(mscclppCommInitRank(&comm, 1, 0, addr), mscclppSuccess);
  if (comm == NULL) return;
  int lr = -1, ls = -1;
  CHECK_RES(mscclppCommLocalRank(comm, &lr), mscclppSuccess);
  CHECK_RES(mscclppCommLocalSize(comm, &ls), mscclppSuccess);
  CHECK(lr == 0 && ls == 1);
  CHECK_RES(mscclppCommRank(comm, NULL), mscclppInvalidArgument);
  CHECK_RES(mscclppCommGetAsyncError(comm, NULL), mscclppInvalidArgument);
  /* where its collectives run: the host backend without a GPU, else a device of this process */
  int dev = -2, ndev = -1;
  CHECK_RES(mscclppCommGetDevice(comm, &dev), mscclppSuccess);
  CHECK_RES(mscclppGetDeviceCount(&ndev), mscclppSuccess);
  CHECK(ndev == 0 ? dev == -1 : (dev >= 0 && dev < ndev));
  CHECK_RES(mscclppCommGetDevice(comm, NULL), mscclppInvalidArgument);
  uint8_t b[3] = {1, 2, 3};
  CHECK_RES(mscclppBootstrapAllGather(comm, b, 3), mscclppSuccess);
  CHECK(b[0] == 1 && b[2] == 3);
  CHECK_RES(mscclppBootstrapSend(comm, 0, 1, b, 3), mscclppSuccess);
  uint8_t c[3] = {0};
  CHECK_RES(mscclppBootstrapRecv(comm, 0, 1, c, 3), mscclppSuccess);
  CHECK(memcmp(b, c, 3) == 0);
  /* one rank: alone on its GPU (or without one); a hint from a parent wins */
  int share = 0;
  CHECK_RES(mscclppCommGpuShare(comm, &share), mscclppSuccess);
  CHECK(share == 1);
  comm->deviceShare = 3;
  CHECK_RES(mscclppCommGpuShare(comm, &share), mscclppSuccess);
  CHECK(share == 3);
  comm->deviceShare = 0;
  CHECK_RES(mscclppCommDestroy(comm), mscclppSuccess);
}

/* Ranks counted by their GPU's UUID: the same device, others, unknown ones. */
static void testGpuShareCount(void) {
  struct mscclppGpuIdent all[5];
  memset(all, 0, sizeof(all));
  for (int r = 0; r < 4; r++) {
    all[r].known = 1;
    all[r].uuid[0] = r < 3 ? 0xAA : 0xBB; /* ranks 0-2 on one GPU, rank 3 on another */
    all[r].uuid[15] = 7;
  }
  /* rank 4: no GPU (or an unreadable UUID), even if its bytes match */
  all[4].uuid[0] = 0xAA;
  all[4].uuid[15] = 7;
  CHECK(mscclppGpuShareCount(all, 5, 0) == 3);
  CHECK(mscclppGpuShareCount(all, 5, 2) == 3);
  CHECK(mscclppGpuShareCount(all, 5, 3) == 1);
  CHECK(mscclppGpuShareCount(all, 5, 4) == 1);
  all[1].uuid[15] = 8; /* a different last byte is a different GPU */
  CHECK(mscclppGpuShareCount(all, 5, 0) == 2);
  CHECK(mscclppGpuShareCount(all, 5, 1) == 1);
  CHECK(mscclppGpuShareCount(all, 5, 5) == 1); /* out of range: alone */
}

/* A bounded wait: rank 0 of 2 alone. */
static void testInitTimeout(void) {
  char addr[64];
  snprintf(addr, sizeof(addr), "127.0.0.1:%d", freePort(AF_INET));
  setenv("MSCCLPP_TIMEOUT", "1", 1);
  mscclppComm_t comm = NULL;
  double t0 = nowSec();
  mscclppResult_t res = mscclppCommInitRank(&comm, 2, 0, addr);
  double took = nowSec() - t0;
  unsetenv("MSCCLPP_TIMEOUT");
  CHECK(res == mscclppTimeout || res == mscclppRemoteError);
  CHECK(strstr(mscclppGetLastError(), "MSCCLPP_TIMEOUT") != NULL);
  CHECK(took >= 0.9 && took < 5.0);
  CHECK(comm == NULL);
}

/* ---- forked jobs ---------------------------------------------------------------- */

struct job {
  int nranks;
  char addr[80];
  int mode;
};

static int childIpPort(int rank, void* arg) {
  struct job* j = (struct job*)arg;
  mscclppComm_t comm = NULL;
  if (rank > 0) usleep(20000 * (unsigned)rank); /* late joiners retry until the root is up */
  mscclppResult_t res = mscclppCommInitRank(&comm, j->nranks, rank, j->addr);
  if (res != mscclppSuccess) {
    fprintf(stderr, "rank %d: init failed: %s\n", rank, mscclppGetLastError());
    return 1;
  }
  return exercise(comm, rank, j->nranks);
}

static void testIpPort(void) {
  struct job j = {4, "", 0};
  snprintf(j.addr, sizeof(j.addr), "127.0.0.1:%d", freePort(AF_INET));
  CHECK(runForked(j.nranks, childIpPort, &j, 30) == 0);
  /* A host name: rank 0 listens on the wildcard address. */
  snprintf(j.addr, sizeof(j.addr), "localhost:%d", freePort(AF_INET));
  j.nranks = 3;
  CHECK(runForked(j.nranks, childIpPort, &j, 30) == 0);
}

static void testIpv6(void) {
  int port = freePort(AF_INET6);
  if (port < 0) {
    printf("no IPv6 loopback here: IPv6 case not run\n");
    return;
  }
  struct job j = {3, "", 0};
  snprintf(j.addr, sizeof(j.addr), "[::1]:%d", port);
  CHECK(runForked(j.nranks, childIpPort, &j, 30) == 0);
}

enum { ENV_TORCHRUN, ENV_OMPI, ENV_SLURM };

static int childEnv(int rank, void* arg) {
  struct job* j = (struct job*)arg;
  clearLaunchEnv();
  char r[16], n[16];
  snprintf(r, sizeof(r), "%d", rank);
  snprintf(n, sizeof(n), "%d", j->nranks);
  if (j->mode == ENV_TORCHRUN) {
    setenv("RANK", r, 1);
    setenv("WORLD_SIZE", n, 1);
    setenv("LOCAL_RANK", r, 1);
    char* colon = strrchr(j->addr, ':');
    *colon = '\0';
    setenv("MASTER_ADDR", j->addr, 1);
    setenv("MASTER_PORT", colon + 1, 1);
  } else if (j->mode == ENV_OMPI) {
    setenv("OMPI_COMM_WORLD_RANK", r, 1);
    setenv("OMPI_COMM_WORLD_SIZE", n, 1);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", r, 1);
    setenv("MSCCLPP_COMM_ID", j->addr, 1);
    setenv("MSCCLPP_COMM_SECRET", "0123456789abcdef0123456789ABCDEF", 1);
  } else {
    setenv("SLURM_PROCID", r, 1);
    setenv("SLURM_NTASKS", n, 1);
    setenv("SLURM_LOCALID", r, 1);
    setenv("MSCCLPP_COMM_ID", j->addr, 1);
  }
  mscclppComm_t comm = NULL;
  if (mscclppCommInitFromEnv(&comm) != mscclppSuccess) {
    fprintf(stderr, "rank %d: init from env (mode %d) failed: %s\n", rank, j->mode, mscclppGetLastError());
    return 1;
  }
  int lr = -1;
  mscclppCommLocalRank(comm, &lr);
  if (lr != rank) return 1;
  return exercise(comm, rank, j->nranks);
}

static void testEnvLaunchers(void) {
  for (int mode = ENV_TORCHRUN; mode <= ENV_SLURM; mode++) {
    struct job j = {3, "", mode};
    snprintf(j.addr, sizeof(j.addr), "127.0.0.1:%d", freePort(AF_INET));
    CHECK(runForked(j.nranks, childEnv, &j, 30) == 0);
  }
}

/* Children that must fail quickly with mscclppRemoteError and `expect` in
 * the reason. mode 0: ranks 0, 1, 1 of 3; mode 1: rank 0 of 2 and rank 1 of 3. */
struct badJob {
  char addr[80];
  int mode;
  const char* expect;
};

static int childBad(int child, void* arg) {
  struct badJob* b = (struct badJob*)arg;
  setenv("MSCCLPP_TIMEOUT", "20", 1);
  int rank = b->mode == 0 ? (child == 0 ? 0 : 1) : child;
  int nranks = b->mode == 0 ? 3 : (child == 0 ? 2 : 3);
  if (child == 2) usleep(1000000); /* the others have joined by then */
  mscclppComm_t comm = NULL;
  double t0 = nowSec();
  mscclppResult_t res = mscclppCommInitRank(&comm, nranks, rank, b->addr);
  double took = nowSec() - t0;
  int ok = res == mscclppRemoteError && strstr(mscclppGetLastError(), b->expect) != NULL && took < 10;
  if (!ok)
    fprintf(stderr, "child %d (rank %d of %d): got %s after %.1f s: %s\n", child, rank, nranks,
            mscclppGetErrorString(res), took, mscclppGetLastError());
  return ok ? 0 : 1;
}

static void testDuplicateRank(void) {
  struct badJob b = {"", 0, "claimed twice"};
  snprintf(b.addr, sizeof(b.addr), "127.0.0.1:%d", freePort(AF_INET));
  CHECK(runForked(3, childBad, &b, 30) == 0);
}

static void testNranksMismatch(void) {
  struct badJob b = {"", 1, "nranks"};
  snprintf(b.addr, sizeof(b.addr), "127.0.0.1:%d", freePort(AF_INET));
  CHECK(runForked(2, childBad, &b, 30) == 0);
}

/* A rank that joins and vanishes before the others joined aborts the
 * rendezvous. The vanishing rank is a raw client that knows the (derived)
 * secret. */
static int childLostDuringJoin(int child, void* arg) {
  struct badJob* b = (struct badJob*)arg;
  setenv("MSCCLPP_TIMEOUT", "20", 1);
  if (child == 2) {
    usleep(1000000); /* the real ranks have joined by then */
    union mscclppSocketAddr root;
    if (mscclppSocketResolve(b->addr, AF_UNSPEC, &root, NULL) != mscclppSuccess) return 1;
    int fd = -1;
    if (mscclppSocketConnect(&root, mscclppDeadlineIn(10), 1, 1, &fd) != mscclppSuccess) return 1;
    struct mscclppBsHello h;
    memset(&h, 0, sizeof(h));
    h.purpose = MSCCLPP_BS_PURPOSE_JOIN;
    h.rank = 2;
    h.nranks = 4;
    h.info.rank = 2;
    h.info.addr.family = 4;
    h.info.addr.port = 9;
    h.info.addr.addr[0] = 127;
    h.info.addr.addr[3] = 1;
    uint8_t secret[16];
    mscclppBootstrapDeriveSecret(b->addr, secret);
    int32_t status = -1;
    if (mscclppBootstrapHandshakeClient(fd, secret, &h, mscclppDeadlineIn(10), "root", &status) != mscclppSuccess ||
        status != MSCCLPP_BS_ACK_OK)
      return 1;
    close(fd); /* joined, then gone */
    return 0;
  }
  mscclppComm_t comm = NULL;
  double t0 = nowSec();
  mscclppResult_t res = mscclppCommInitRank(&comm, 4, child, b->addr);
  double took = nowSec() - t0;
  int ok = res == mscclppRemoteError && strstr(mscclppGetLastError(), "rank 2") != NULL && took < 10;
  if (!ok)
    fprintf(stderr, "child %d: got %s after %.1f s: %s\n", child, mscclppGetErrorString(res), took,
            mscclppGetLastError());
  return ok ? 0 : 1;
}

static void testLostDuringJoin(void) {
  struct badJob b = {"", 0, ""};
  snprintf(b.addr, sizeof(b.addr), "127.0.0.1:%d", freePort(AF_INET));
  CHECK(runForked(3, childLostDuringJoin, &b, 30) == 0);
}

/* Unique id, forked ranks: the children are forked first and read the id
 * from a pipe, so the parent's root thread never meets fork(). */
static int uidPipes[8][2];

static int childUid(int rank, void* arg) {
  (void)arg;
  mscclppUniqueId id;
  size_t got = 0;
  while (got < sizeof(id)) {
    ssize_t n = read(uidPipes[rank][0], (char*)&id + got, sizeof(id) - got);
    if (n <= 0) return 1;
    got += (size_t)n;
  }
  mscclppComm_t comm = NULL;
  if (mscclppCommInitRankFromId(&comm, 8, id, rank) != mscclppSuccess) {
    fprintf(stderr, "rank %d: init from id failed: %s\n", rank, mscclppGetLastError());
    return 1;
  }
  return exercise(comm, rank, 8);
}

static void testUidForked(void) {
  for (int i = 0; i < 8; i++) CHECK(pipe(uidPipes[i]) == 0);
  pid_t pids[8];
  fflush(stdout);
  fflush(stderr);
  for (int i = 0; i < 8; i++) {
    pids[i] = fork();
    if (pids[i] == 0) exit(childUid(i, NULL));
  }
  mscclppUniqueId id;
  CHECK_RES(mscclppGetUniqueId(&id), mscclppSuccess);
  for (int i = 0; i < 8; i++) {
    CHECK(write(uidPipes[i][1], &id, sizeof(id)) == (ssize_t)sizeof(id));
    close(uidPipes[i][1]);
    close(uidPipes[i][0]);
  }
  for (int i = 0; i < 8; i++) {
    int st = -1;
    waitpid(pids[i], &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
}

/* ---- threaded jobs (after all forks) ------------------------------------------------ */

#define MAXT 8
struct tjob {
  int nranks;
  mscclppUniqueId id;
  mscclppComm_t comms[MAXT];
  mscclppResult_t res[MAXT];
  int check[MAXT];
};
struct targ {
  struct tjob* job;
  int rank;
};

static void* threadInit(void* arg) {
  struct targ* a = (struct targ*)arg;
  struct tjob* j = a->job;
  j->res[a->rank] = mscclppCommInitRankFromId(&j->comms[a->rank], j->nranks, j->id, a->rank);
  return NULL;
}

/* Start nranks threads that each create their rank; join them. */
static int threadJob(struct tjob* j, int nranks) {
  j->nranks = nranks;
  if (mscclppGetUniqueId(&j->id) != mscclppSuccess) return 0;
  pthread_t t[MAXT];
  struct targ a[MAXT];
  for (int r = 0; r < nranks; r++) {
    a[r] = (struct targ){j, r};
    j->comms[r] = NULL;
    pthread_create(&t[r], NULL, threadInit, &a[r]);
  }
  int ok = 1;
  for (int r = 0; r < nranks; r++) {
    pthread_join(t[r], NULL);
    if (j->res[r] != mscclppSuccess) ok = 0;
  }
  return ok;
}

static void* threadExercise(void* arg) {
  struct targ* a = (struct targ*)arg;
  a->job->check[a->rank] = exercise(a->job->comms[a->rank], a->rank, a->job->nranks);
  return NULL;
}

static void testUidThreads(void) {
  static struct tjob j;
  memset(&j, 0, sizeof(j));
  CHECK(threadJob(&j, 4));
  pthread_t t[4];
  struct targ a[4];
  for (int r = 0; r < 4; r++) {
    a[r] = (struct targ){&j, r};
    pthread_create(&t[r], NULL, threadExercise, &a[r]);
  }
  for (int r = 0; r < 4; r++) {
    pthread_join(t[r], NULL);
    CHECK(j.check[r] == 0);
  }
}

/* Rank 1 leaves; rank 0's receive from it fails at once (not at the
 * timeout), and that is not an asynchronous error. Then a receive nobody
 * sends times out. */
static void testLeftPeerAndTimeout(void) {
  static struct tjob j;
  memset(&j, 0, sizeof(j));
  setenv("MSCCLPP_TIMEOUT", "2", 1);
  int ok = threadJob(&j, 3);
  unsetenv("MSCCLPP_TIMEOUT");
  CHECK(ok);
  if (!ok) return;
  mscclppComm_t c0 = j.comms[0], c2 = j.comms[2];
  int x = 0;
  double t0 = nowSec();
  CHECK_RES(mscclppBootstrapRecv(c0, 2, 5, &x, sizeof(x)), mscclppTimeout);
  double took = nowSec() - t0;
  CHECK(took >= 1.9 && took < 5);
  CHECK(strstr(mscclppGetLastError(), "rank 2") != NULL);
  /* A message sent before leaving is still delivered. */
  CHECK_RES(mscclppBootstrapSend(j.comms[1], 0, 6, &x, sizeof(x)), mscclppSuccess);
  CHECK_RES(mscclppCommDestroy(j.comms[1]), mscclppSuccess);
  CHECK_RES(mscclppBootstrapRecv(c0, 1, 6, &x, sizeof(x)), mscclppSuccess);
  t0 = nowSec();
  CHECK_RES(mscclppBootstrapRecv(c0, 1, 7, &x, sizeof(x)), mscclppRemoteError);
  CHECK(strstr(mscclppGetLastError(), "rank 1 has left") != NULL);
  CHECK(nowSec() - t0 < 1.5);
  /* Rank 0 knows now: sending to rank 1 fails too. */
  CHECK_RES(mscclppBootstrapSend(c0, 1, 7, &x, sizeof(x)), mscclppRemoteError);
  CHECK(strstr(mscclppGetLastError(), "rank 1 has left") != NULL);
  /* Rank 2 and rank 0 still work together. */
  CHECK_RES(mscclppBootstrapSend(c2, 0, 8, &x, sizeof(x)), mscclppSuccess);
  CHECK_RES(mscclppBootstrapRecv(c0, 2, 8, &x, sizeof(x)), mscclppSuccess);
  mscclppResult_t async = mscclppInternalError;
  CHECK_RES(mscclppCommGetAsyncError(c0, &async), mscclppSuccess);
  CHECK(async == mscclppSuccess);
  CHECK_RES(mscclppCommDestroy(c0), mscclppSuccess);
  CHECK_RES(mscclppCommDestroy(c2), mscclppSuccess);
}

/* Authenticated peers that misbehave, at ranks of a 5-rank job whose
 * initial barrier connected 0->4,3,1 (so rank 2 has no connection from
 * rank 0) and 1->0,4,2 (so rank 3 has none from rank 1). */
static int connectAs(mscclppComm_t target, int claimRank, int nranks, int32_t* status) {
  union mscclppSocketAddr addr;
  uint8_t secret[16];
  uint64_t session;
  mscclppBootstrapTestView(target->bootstrap, &addr, secret, &session);
  int fd = -1;
  if (mscclppSocketConnect(&addr, mscclppDeadlineIn(5), 0, 1, &fd) != mscclppSuccess) return -1;
  struct mscclppBsHello h;
  memset(&h, 0, sizeof(h));
  h.purpose = MSCCLPP_BS_PURPOSE_PEER;
  h.rank = claimRank;
  h.nranks = nranks;
  h.session = session;
  if (mscclppBootstrapHandshakeClient(fd, secret, &h, mscclppDeadlineIn(5), "target", status) != mscclppSuccess) {
    close(fd);
    return -1;
  }
  return fd;
}

static int waitAsync(mscclppComm_t c, const char* expect) {
  mscclppDeadline d = mscclppDeadlineIn(5);
  while (!mscclppDeadlinePassed(d)) {
    mscclppResult_t async = mscclppSuccess;
    mscclppCommGetAsyncError(c, &async);
    if (async != mscclppSuccess) {
      if (strstr(mscclppGetLastError(), expect) == NULL) fprintf(stderr, "async error: %s\n", mscclppGetLastError());
      return async == mscclppRemoteError && strstr(mscclppGetLastError(), expect) != NULL;
    }
    usleep(10000);
  }
  return 0;
}

static void testMisbehavingPeers(void) {
  static struct tjob j;
  memset(&j, 0, sizeof(j));
  CHECK(threadJob(&j, 5));
  /* A second connection from a rank already connected: refused. */
  int32_t status = -1;
  int fd = connectAs(j.comms[2], 1, 5, &status);
  CHECK(fd >= 0 && status == MSCCLPP_BS_ACK_DUPLICATE);
  if (fd >= 0) close(fd);
  /* "Rank 0" sends a header with a bad magic to rank 2. */
  fd = connectAs(j.comms[2], 0, 5, &status);
  CHECK(fd >= 0 && status == MSCCLPP_BS_ACK_OK);
  uint8_t junk[16];
  memset(junk, 0x77, sizeof(junk));
  if (fd >= 0) send(fd, junk, sizeof(junk), MSG_NOSIGNAL);
  CHECK(waitAsync(j.comms[2], "rank 0 was lost: its connection to this rank"));
  CHECK(strstr(mscclppGetLastError(), "invalid message") != NULL);
  if (fd >= 0) close(fd);
  /* "Rank 1" sends a header announcing 100 bytes, 10 of them, and closes. */
  fd = connectAs(j.comms[3], 1, 5, &status);
  CHECK(fd >= 0 && status == MSCCLPP_BS_ACK_OK);
  uint8_t msg[MSCCLPP_BS_HEADER_BYTES + 10];
  struct mscclppBsHeader h = {MSCCLPP_BS_MSG_DATA, 0, 1, 100};
  mscclppBootstrapEncodeHeader(&h, msg);
  memset(msg + MSCCLPP_BS_HEADER_BYTES, 1, 10);
  if (fd >= 0) {
    send(fd, msg, sizeof(msg), MSG_NOSIGNAL);
    close(fd);
  }
  CHECK(waitAsync(j.comms[3], "rank 1 was lost"));
  /* Rank 3's operations now fail at once, naming rank 1. */
  int x = 0;
  CHECK_RES(mscclppBootstrapRecv(j.comms[3], 4, 1, &x, sizeof(x)), mscclppRemoteError);
  CHECK(strstr(mscclppGetLastError(), "rank 1 was lost") != NULL);
  /* Destroy works everywhere after that. */
  for (int r = 0; r < 5; r++) CHECK_RES(mscclppCommDestroy(j.comms[r]), mscclppSuccess);
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  clearLaunchEnv();
  unsetenv("MSCCLPP_HOSTID");
  RUN(testBadInput);
  RUN(testSingleRank);
  RUN(testGpuShareCount);
  RUN(testInitTimeout);
  RUN(testIpPort);
  RUN(testIpv6);
  RUN(testEnvLaunchers);
  RUN(testDuplicateRank);
  RUN(testNranksMismatch);
  RUN(testLostDuringJoin);
  RUN(testUidForked); /* the last fork: it leaves a root thread behind for a moment */
  RUN(testUidThreads);
  RUN(testLeftPeerAndTimeout);
  RUN(testMisbehavingPeers);
  return harnessFinish();
}
