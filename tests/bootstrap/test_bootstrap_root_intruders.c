/* SPDX-License-Identifier: MIT */
/*
 * Intruders at the root while a real 4-rank job initializes (ip:port; rank 0
 * starts at once, the others 0.7 s later):
 *   - a silent client (connects, says nothing, stays connected),
 *   - a slow client (half a hello, then nothing),
 *   - a garbage client,
 *   - a client with a well-formed hello and a wrong secret (MAC),
 *   - a client with the right secret but the wrong purpose.
 * The job must complete well before the handshake timeout (20 s here), the
 * refused clients must see their connection closed without an ACK (or a
 * refusal status), and rank 0's log must name each refused address.
 */
#include <errno.h>
#include <poll.h>
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
#include "core/util.h"
#include "harness.h"
#include "mscclpp/comm.h"

#define NRANKS 4

static char rootText[64];

static int freePort(void) {
  union mscclppSocketAddr a;
  mscclppSocketResolve("127.0.0.1:1", AF_INET, &a, NULL);
  mscclppSocketAddrSetPort(&a, 0);
  int fd = -1;
  if (mscclppSocketListen(&a, 0, &fd) != mscclppSuccess) return -1;
  close(fd);
  return mscclppSocketAddrPort(&a);
}

static int rankMain(int rank) {
  if (rank > 0) usleep(700000);
  mscclppComm_t comm = NULL;
  if (mscclppCommInitRank(&comm, NRANKS, rank, rootText) != mscclppSuccess) {
    fprintf(stderr, "rank %d: init failed: %s\n", rank, mscclppGetLastError());
    return 1;
  }
  int vals[NRANKS] = {0};
  vals[rank] = rank + 1;
  int bad = mscclppBootstrapAllGather(comm, vals, sizeof(int)) != mscclppSuccess;
  for (int i = 0; i < NRANKS; i++) bad += vals[i] != i + 1;
  bad += mscclppBootstrapBarrier(comm) != mscclppSuccess;
  bad += mscclppCommDestroy(comm) != mscclppSuccess;
  return bad ? 1 : 0;
}

static int connectRoot(union mscclppSocketAddr* root, uint16_t* localPort) {
  int fd = -1;
  if (mscclppSocketConnect(root, mscclppDeadlineIn(10), 1, 1, &fd) != mscclppSuccess) return -1;
  union mscclppSocketAddr me;
  socklen_t len = sizeof(me);
  getsockname(fd, &me.sa, &len);
  *localPort = mscclppSocketAddrPort(&me);
  return fd;
}

/* 1 when the peer closes (EOF or reset) within 5 s and sends nothing more. */
static int closedWithoutAck(int fd) {
  mscclppDeadline d = mscclppDeadlineIn(5);
  uint8_t b[256];
  for (;;) {
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, mscclppDeadlineRemainingMs(d)) <= 0) return 0;
    ssize_t n = recv(fd, b, sizeof(b), 0);
    if (n == 0 || (n < 0 && errno == ECONNRESET)) return 1;
    if (n < 0) return 0;
    /* The challenge may still be unread (garbage was sent without reading it). */
    if (n == MSCCLPP_BS_CHALLENGE_BYTES && mscclppBootstrapParseChallenge(b, (size_t)n, b + 64, NULL) == mscclppSuccess)
      continue;
    return 0;
  }
}

static char* readFile(const char* path) {
  FILE* f = fopen(path, "r");
  if (f == NULL) return NULL;
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

static void testIntruders(void) {
  char logDir[] = "/tmp/mscclpp-intruders-XXXXXX";
  CHECK(mkdtemp(logDir) != NULL);
  char pattern[128];
  snprintf(pattern, sizeof(pattern), "%s/log.%%p", logDir);
  setenv("MSCCLPP_DEBUG_FILE", pattern, 1);
  setenv("MSCCLPP_DEBUG", "WARN", 1);
  setenv("MSCCLPP_BOOTSTRAP_HANDSHAKE_TIMEOUT", "20", 1);
  setenv("MSCCLPP_TIMEOUT", "30", 1);
  unsetenv("MSCCLPP_COMM_SECRET");
  int port = freePort();
  snprintf(rootText, sizeof(rootText), "127.0.0.1:%d", port);

  double t0 = (double)mscclppTimeNs() / 1e9;
  pid_t pids[NRANKS];
  fflush(stdout);
  for (int r = 0; r < NRANKS; r++) {
    pids[r] = fork();
    if (pids[r] == 0) exit(rankMain(r));
  }
  union mscclppSocketAddr root;
  CHECK_RES(mscclppSocketResolve(rootText, AF_UNSPEC, &root, NULL), mscclppSuccess);
  uint16_t silentPort = 0, slowPort = 0, junkPort = 0, wrongPort = 0, purposePort = 0;
  int silent = connectRoot(&root, &silentPort);
  CHECK(silent >= 0);

  /* Slow: half a hello. */
  int slow = connectRoot(&root, &slowPort);
  uint8_t challenge[MSCCLPP_BS_CHALLENGE_BYTES], nonce[MSCCLPP_BS_NONCE_BYTES];
  CHECK_RES(mscclppSocketReadAll(slow, challenge, sizeof(challenge), mscclppDeadlineIn(5), NULL), mscclppSuccess);
  CHECK_RES(mscclppBootstrapParseChallenge(challenge, sizeof(challenge), nonce, NULL), mscclppSuccess);
  struct mscclppBsHello h;
  memset(&h, 0, sizeof(h));
  h.purpose = MSCCLPP_BS_PURPOSE_JOIN;
  h.rank = 1;
  h.nranks = NRANKS;
  h.info.rank = 1;
  h.info.addr.family = 4;
  h.info.addr.port = 9;
  h.info.addr.addr[0] = 127;
  h.info.addr.addr[3] = 1;
  uint8_t secret[16], wrong[16], hello[MSCCLPP_BS_HELLO_BYTES];
  mscclppBootstrapDeriveSecret(rootText, secret);
  mscclppBootstrapEncodeHello(&h, secret, nonce, hello);
  CHECK(send(slow, hello, 40, MSG_NOSIGNAL) == 40);

  /* Garbage. */
  int junk = connectRoot(&root, &junkPort);
  uint8_t bytes[300];
  for (size_t i = 0; i < sizeof(bytes); i++) bytes[i] = (uint8_t)(i * 37 + 11);
  CHECK(send(junk, bytes, sizeof(bytes), MSG_NOSIGNAL) == (ssize_t)sizeof(bytes));
  CHECK(closedWithoutAck(junk));
  close(junk);

  /* A well-formed hello with a wrong secret. */
  int wrongFd = connectRoot(&root, &wrongPort);
  CHECK_RES(mscclppSocketReadAll(wrongFd, challenge, sizeof(challenge), mscclppDeadlineIn(5), NULL), mscclppSuccess);
  mscclppBootstrapParseChallenge(challenge, sizeof(challenge), nonce, NULL);
  memcpy(wrong, secret, 16);
  wrong[7] ^= 0x40;
  mscclppBootstrapEncodeHello(&h, wrong, nonce, hello);
  CHECK(send(wrongFd, hello, sizeof(hello), MSG_NOSIGNAL) == (ssize_t)sizeof(hello));
  CHECK(closedWithoutAck(wrongFd));
  close(wrongFd);

  /* The right secret, the wrong purpose: refused with a status. */
  int purpose = connectRoot(&root, &purposePort);
  struct mscclppBsHello p;
  memset(&p, 0, sizeof(p));
  p.purpose = MSCCLPP_BS_PURPOSE_PEER;
  p.rank = 1;
  p.nranks = NRANKS;
  int32_t status = -1;
  CHECK_RES(mscclppBootstrapHandshakeClient(purpose, secret, &p, mscclppDeadlineIn(5), "root", &status),
            mscclppSuccess);
  CHECK(status == MSCCLPP_BS_ACK_WRONG_PURPOSE);
  close(purpose);

  /* The job completes while the silent and slow clients hold on. */
  int failed = 0;
  for (int r = 0; r < NRANKS; r++) {
    int st = -1;
    waitpid(pids[r], &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) failed++;
  }
  double took = (double)mscclppTimeNs() / 1e9 - t0;
  printf("job of %d ranks completed in %.2f s with intruders at the root\n", NRANKS, took);
  CHECK(failed == 0);
  CHECK(took < 10.0);
  close(silent);
  close(slow);

  char path[192];
  snprintf(path, sizeof(path), "%s/log.%d", logDir, (int)pids[0]);
  char* log = readFile(path);
  CHECK(log != NULL);
  if (log != NULL) {
    char want[96];
    snprintf(want, sizeof(want), "refused connection from 127.0.0.1:%u", wrongPort);
    CHECK(strstr(log, want) != NULL && strstr(log, "wrong job secret") != NULL);
    snprintf(want, sizeof(want), "refused connection from 127.0.0.1:%u", junkPort);
    CHECK(strstr(log, want) != NULL);
    snprintf(want, sizeof(want), "127.0.0.1:%u (rank 1) connected as a peer", purposePort);
    CHECK(strstr(log, want) != NULL);
    if (harnessFailures_) fprintf(stderr, "rank 0's log:\n%s\n", log);
  }
  for (int r = 0; r < NRANKS; r++) {
    snprintf(path, sizeof(path), "%s/log.%d", logDir, (int)pids[r]);
    unlink(path);
  }
  rmdir(logDir);
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  RUN(testIntruders);
  return harnessFinish();
}
