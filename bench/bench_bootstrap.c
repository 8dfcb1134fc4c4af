/* SPDX-License-Identifier: MIT */
/*
 * Bootstrap benchmark, one process per rank:
 *
 *   mscclpp-run -n N build/bench/bench_bootstrap [iterations per block, default 100]
 *
 * Prints (rank 0):
 *   - the time to create the communicator (mscclppCommInitFromEnv), max and
 *     mean over ranks;
 *   - a 1 KiB ping-pong between ranks 0 and 1 through the bootstrap
 *     (send/recv) and, in the same run between the same two processes, over a
 *     raw blocking TCP socket on loopback with TCP_NODELAY: the round trips and
 *     their ratio;
 *   - an allgather of 1 KiB per rank (mean over iterations, max over ranks)
 *     through the bootstrap and, in the same run, the same algorithm (Bruck:
 *     ceil(log2 N) steps, send to rank - k, receive from rank + k) over raw
 *     blocking TCP sockets between the same processes, and the ratio.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/util.h"
#include "mscclpp/comm.h"

#define MSG 1024
#define BLOCKS 5

static int cmpDouble(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static double median(double* v, int n) {
  qsort(v, (size_t)n, sizeof(double), cmpDouble);
  return v[n / 2];
}

static double nowUs(void) { return (double)mscclppTimeNs() / 1e3; }

#define CHECK_OK(call)                                                                                 \
  do {                                                                                                 \
    mscclppResult_t r_ = (call);                                                                       \
    if (r_ != mscclppSuccess) {                                                                        \
      fprintf(stderr, "%s failed: %s: %s\n", #call, mscclppGetErrorString(r_), mscclppGetLastError()); \
      exit(1);                                                                                         \
    }                                                                                                  \
  } while (0)

static int readAll(int fd, void* p, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t k = recv(fd, (char*)p + got, n - got, 0);
    if (k <= 0) return -1;
    got += (size_t)k;
  }
  return 0;
}

static int writeAll(int fd, const void* p, size_t n) {
  size_t put = 0;
  while (put < n) {
    ssize_t k = send(fd, (const char*)p + put, n - put, MSG_NOSIGNAL);
    if (k <= 0) return -1;
    put += (size_t)k;
  }
  return 0;
}

/* Raw TCP 1 KiB ping-pong between ranks 0 and 1; returns the mean round trip
 * in microseconds on rank 0 (0 elsewhere). */
static double rawConnectUs; /* rank 0: connect + first round trip, cold */

/* A raw TCP connection between ranks 0 and 1 (-1 on other ranks). */
static int rawPairSetup(mscclppComm_t comm, int rank) {
  static char buf[MSG];
  if (rank == 1) {
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0, .sin_addr = {htonl(INADDR_LOOPBACK)}};
    socklen_t len = sizeof(a);
    if (bind(l, (struct sockaddr*)&a, sizeof(a)) != 0 || listen(l, 1) != 0 ||
        getsockname(l, (struct sockaddr*)&a, &len) != 0) {
      perror("raw listener");
      exit(1);
    }
    int port = ntohs(a.sin_port);
    CHECK_OK(mscclppBootstrapSend(comm, 0, 100, &port, sizeof(port)));
    int fd = accept(l, NULL, NULL);
    close(l);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (readAll(fd, buf, MSG) != 0 || writeAll(fd, buf, MSG) != 0) exit(1);
    return fd;
  }
  if (rank != 0) return -1;
  int port = 0;
  CHECK_OK(mscclppBootstrapRecv(comm, 1, 100, &port, sizeof(port)));
  double c0 = nowUs();
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {
      .sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr = {htonl(INADDR_LOOPBACK)}};
  if (connect(fd, (struct sockaddr*)&a, sizeof(a)) != 0) {
    perror("raw connect");
    exit(1);
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (writeAll(fd, buf, MSG) != 0 || readAll(fd, buf, MSG) != 0) exit(1);
  rawConnectUs = nowUs() - c0;
  return fd;
}

/* Raw TCP 1 KiB ping-pong on that connection: mean round trip (rank 0). */
static double rawPingPong(int fd, int rank, int iters) {
  static char buf[MSG];
  if (rank > 1) return 0;
  double t0 = 0;
  int warm = iters / 10;
  for (int i = 0; i < iters + warm; i++) {
    if (i == warm) t0 = nowUs();
    int bad = rank == 0 ? writeAll(fd, buf, MSG) != 0 || readAll(fd, buf, MSG) != 0
                        : readAll(fd, buf, MSG) != 0 || writeAll(fd, buf, MSG) != 0;
    if (bad) {
      fprintf(stderr, "raw ping-pong failed\n");
      exit(1);
    }
  }
  return (nowUs() - t0) / iters;
}

/* The same ping-pong through the bootstrap. */
static double bootstrapPingPong(mscclppComm_t comm, int rank, int iters) {
  static char buf[MSG];
  int warm = iters / 10;
  double t0 = 0;
  if (rank == 0) {
    for (int i = 0; i < iters + warm; i++) {
      if (i == warm) t0 = nowUs();
      CHECK_OK(mscclppBootstrapSend(comm, 1, 7, buf, MSG));
      CHECK_OK(mscclppBootstrapRecv(comm, 1, 7, buf, MSG));
    }
    return (nowUs() - t0) / iters;
  }
  if (rank == 1) {
    for (int i = 0; i < iters + warm; i++) {
      CHECK_OK(mscclppBootstrapRecv(comm, 0, 7, buf, MSG));
      CHECK_OK(mscclppBootstrapSend(comm, 0, 7, buf, MSG));
    }
  }
  return 0;
}

/* Bruck's allgather over raw blocking TCP sockets, the same pattern as the
 * bootstrap's (round k: send to rank - k, receive from rank + k), for the
 * same processes: what the bootstrap's allgather is measured against. */
struct rawBruck {
  int nsteps;
  int sendFd[32];
  int recvFd[32];
};

static void rawBruckSetup(mscclppComm_t comm, int rank, int nranks, struct rawBruck* rb) {
  int l = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0, .sin_addr = {htonl(INADDR_LOOPBACK)}};
  socklen_t len = sizeof(a);
  if (bind(l, (struct sockaddr*)&a, sizeof(a)) != 0 || listen(l, 64) != 0 ||
      getsockname(l, (struct sockaddr*)&a, &len) != 0) {
    perror("raw listener");
    exit(1);
  }
  int* ports = (int*)calloc((size_t)nranks, sizeof(int));
  ports[rank] = ntohs(a.sin_port);
  CHECK_OK(mscclppBootstrapAllGather(comm, ports, sizeof(int)));
  rb->nsteps = 0;
  int one = 1;
  for (int k = 1; k < nranks; k <<= 1, rb->nsteps++) {
    int dst = (rank - k + nranks) % nranks;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in d = {
        .sin_family = AF_INET, .sin_port = htons((uint16_t)ports[dst]), .sin_addr = {htonl(INADDR_LOOPBACK)}};
    if (connect(fd, (struct sockaddr*)&d, sizeof(d)) != 0) {
      perror("raw connect");
      exit(1);
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    int hello[2] = {rank, rb->nsteps};
    writeAll(fd, hello, sizeof(hello));
    rb->sendFd[rb->nsteps] = fd;
  }
  for (int s = 0; s < rb->nsteps; s++) {
    int fd = accept(l, NULL, NULL);
    int hello[2];
    if (fd < 0 || readAll(fd, hello, sizeof(hello)) != 0 || hello[1] < 0 || hello[1] >= rb->nsteps) {
      fprintf(stderr, "raw accept failed\n");
      exit(1);
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    rb->recvFd[hello[1]] = fd;
  }
  close(l);
  free(ports);
}

static void rawBruckAllGather(const struct rawBruck* rb, int rank, int nranks, char* data, char* tmp) {
  memcpy(tmp, data + (size_t)rank * MSG, MSG);
  int have = 1;
  for (int s = 0, k = 1; s < rb->nsteps; s++, k <<= 1) {
    int cnt = k < nranks - have ? k : nranks - have;
    if (writeAll(rb->sendFd[s], tmp, (size_t)cnt * MSG) != 0 ||
        readAll(rb->recvFd[s], tmp + (size_t)have * MSG, (size_t)cnt * MSG) != 0) {
      fprintf(stderr, "raw allgather failed\n");
      exit(1);
    }
    have += cnt;
  }
  for (int i = 0; i < nranks; i++) memcpy(data + (size_t)((rank + i) % nranks) * MSG, tmp + (size_t)i * MSG, MSG);
}

int main(int argc, char** argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 100;
  if (iters < 10) iters = 10;
  mscclppComm_t comm = NULL;
  double t0 = nowUs();
  CHECK_OK(mscclppCommInitFromEnv(&comm));
  double initUs = nowUs() - t0;
  int rank, nranks;
  mscclppCommRank(comm, &rank);
  mscclppCommSize(comm, &nranks);
  double* all = (double*)calloc((size_t)nranks, sizeof(double));
  all[rank] = initUs;
  CHECK_OK(mscclppBootstrapAllGather(comm, all, sizeof(double)));
  double initMax = 0, initMean = 0, initMin = 1e30;
  for (int i = 0; i < nranks; i++) {
    if (all[i] > initMax) initMax = all[i];
    if (all[i] < initMin) initMin = all[i];
    initMean += all[i] / nranks;
  }

  /* Ping-pong: blocks of raw and bootstrap alternate (machine noise hits
   * both alike); each figure is the median of its blocks. */
  double raw = 0, boot = 0;
  if (nranks >= 2) {
    int fd = rawPairSetup(comm, rank);
    double rawB[BLOCKS], bootB[BLOCKS];
    for (int b = 0; b < BLOCKS; b++) {
      CHECK_OK(mscclppBootstrapBarrier(comm));
      rawB[b] = rawPingPong(fd, rank, iters);
      CHECK_OK(mscclppBootstrapBarrier(comm));
      bootB[b] = bootstrapPingPong(comm, rank, iters);
    }
    raw = median(rawB, BLOCKS);
    boot = median(bootB, BLOCKS);
    if (fd >= 0) close(fd);
    CHECK_OK(mscclppBootstrapBarrier(comm));
  }

  /* Allgather: alternating blocks of the bootstrap's and the raw one; per
   * rank the median block mean, then the max over ranks. */
  char* data = (char*)malloc((size_t)nranks * MSG);
  char* tmp = (char*)malloc((size_t)nranks * MSG);
  struct rawBruck rb;
  if (nranks >= 2) rawBruckSetup(comm, rank, nranks, &rb);
  int warm = iters / 10;
  double agB[BLOCKS], rawAgB[BLOCKS];
  for (int b = 0; b < BLOCKS; b++) {
    memset(data, rank, (size_t)nranks * MSG);
    for (int i = 0; i < warm; i++) CHECK_OK(mscclppBootstrapAllGather(comm, data, MSG));
    CHECK_OK(mscclppBootstrapBarrier(comm));
    t0 = nowUs();
    for (int i = 0; i < iters; i++) CHECK_OK(mscclppBootstrapAllGather(comm, data, MSG));
    agB[b] = (nowUs() - t0) / iters;
    for (int i = 0; i < nranks; i++)
      if (data[(size_t)i * MSG] != (char)i) {
        fprintf(stderr, "allgather result wrong\n");
        return 1;
      }
    rawAgB[b] = 0;
    if (nranks < 2) continue;
    memset(data, rank, (size_t)nranks * MSG);
    CHECK_OK(mscclppBootstrapBarrier(comm));
    for (int i = 0; i < warm; i++) rawBruckAllGather(&rb, rank, nranks, data, tmp);
    CHECK_OK(mscclppBootstrapBarrier(comm));
    t0 = nowUs();
    for (int i = 0; i < iters; i++) rawBruckAllGather(&rb, rank, nranks, data, tmp);
    rawAgB[b] = (nowUs() - t0) / iters;
    for (int i = 0; i < nranks; i++)
      if (data[(size_t)i * MSG] != (char)i) {
        fprintf(stderr, "raw allgather result wrong\n");
        return 1;
      }
    CHECK_OK(mscclppBootstrapBarrier(comm));
  }
  double agMax = 0, rawAgMax = 0;
  all[rank] = median(agB, BLOCKS);
  CHECK_OK(mscclppBootstrapAllGather(comm, all, sizeof(double)));
  for (int i = 0; i < nranks; i++)
    if (all[i] > agMax) agMax = all[i];
  all[rank] = median(rawAgB, BLOCKS);
  CHECK_OK(mscclppBootstrapAllGather(comm, all, sizeof(double)));
  for (int i = 0; i < nranks; i++)
    if (all[i] > rawAgMax) rawAgMax = all[i];
  if (nranks >= 2)
    for (int s = 0; s < rb.nsteps; s++) {
      close(rb.sendFd[s]);
      close(rb.recvFd[s]);
    }
  free(tmp);

  if (rank == 0) {
    int steps = 0;
    while ((1 << steps) < nranks) steps++;
    char host[64] = "?";
    gethostname(host, sizeof(host));
    printf(
        "bench_bootstrap: %d ranks on %s (%ld online CPUs), %d blocks of %d iterations, %d-byte messages; "
        "bootstrap and raw blocks alternate, figures are medians of block means\n",
        nranks, host, sysconf(_SC_NPROCESSORS_ONLN), BLOCKS, iters, MSG);
    printf(
        "init                       max %10.1f us   mean %10.1f us   min %10.1f us (over ranks; max includes "
        "waiting for the last rank to start, min is the last rank's own cost)\n",
        initMax, initMean, initMin);
    if (nranks >= 2) printf("raw TCP connect + first 1 KiB round trip (cold) %.1f us, for scale\n", rawConnectUs);
    if (nranks >= 2) {
      printf("ping-pong 1 KiB rank 0<->1 bootstrap %8.1f us   raw TCP %8.1f us   ratio %.2f (round trip)\n", boot, raw,
             boot / raw);
      printf(
          "allgather 1 KiB/rank       bootstrap %8.1f us   raw TCP %8.1f us   ratio %.2f (same algorithm, "
          "%d steps; mean over iterations, max over ranks)\n",
          agMax, rawAgMax, agMax / rawAgMax, steps);
    } else {
      printf("allgather 1 KiB/rank       bootstrap %8.1f us   (one rank: no network)\n", agMax);
    }
  }
  free(all);
  free(data);
  CHECK_OK(mscclppCommDestroy(comm));
  return 0;
}
