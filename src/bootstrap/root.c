/* SPDX-License-Identifier: MIT */
/*
 * The root: one thread that serves one job's rendezvous.
 *
 * It accepts connections, runs the server side of the handshake on each
 * (non-blocking: a silent client waits out its own handshake timeout without
 * delaying anyone), and keeps each joined rank's connection. When all nranks
 * ranks have joined it sends each the rank table (with a fresh random
 * session number) and exits. It aborts the rendezvous, sending the reason as
 * an ERROR message to every joined rank, when two connections claim the same
 * rank, when a rank's nranks differs from the first one's, when a joined rank
 * disconnects, when it is stopped, or at its deadline (MSCCLPP_TIMEOUT after
 * it started). After an abort it keeps answering late joiners with the same
 * reason until it is stopped or its deadline passes.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/handshake.h"
#include "core/error.h"
#include "core/log.h"
#include "core/util.h"

#define ROOT_MAX_PENDING 1024
#define ROOT_REPLY_SECONDS 2.0

struct rootRank {
  int fd; /* -1: not joined */
  struct mscclppBsRankInfo info;
  char peerText[MSCCLPP_SOCKET_ADDR_TEXT];
};

struct mscclppBootstrapRoot {
  int listenFd;
  int wakeFd;
  pthread_t thread;
  atomic_int stop;
  int detached;
  uint8_t secret[MSCCLPP_BS_SECRET_BYTES];
  double handshakeTimeout;
  mscclppDeadline deadline;
  double timeout;
  char addrText[MSCCLPP_SOCKET_ADDR_TEXT];
  int nranks; /* -1 until the first rank joins */
  int firstRank;
  int joined;
  struct rootRank* ranks;
  struct mscclppBsPending* pending;
  int npending;
  int aborted;
  char abortText[MSCCLPP_BS_MAX_ERROR_TEXT];
};

static void sendError(int fd, const char* text, mscclppDeadline deadline) {
  size_t n = strlen(text);
  if (n == 0) return;
  if (n > MSCCLPP_BS_MAX_ERROR_TEXT) n = MSCCLPP_BS_MAX_ERROR_TEXT;
  struct mscclppBsHeader h = {MSCCLPP_BS_MSG_ERROR, 0, 0, n};
  uint8_t buf[MSCCLPP_BS_HEADER_BYTES + MSCCLPP_BS_MAX_ERROR_TEXT];
  mscclppBootstrapEncodeHeader(&h, buf);
  memcpy(buf + MSCCLPP_BS_HEADER_BYTES, text, n);
  (void)mscclppSocketWriteAll(fd, buf, MSCCLPP_BS_HEADER_BYTES + n, deadline);
}

static void rootAbort(struct mscclppBootstrapRoot* r, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static void rootAbort(struct mscclppBootstrapRoot* r, const char* fmt, ...) {
  if (r->aborted) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->abortText, sizeof(r->abortText), fmt, ap);
  va_end(ap);
  r->aborted = 1;
  MSCCLPP_WARN(MSCCLPP_LOG_BOOTSTRAP, "root %s: rendezvous aborted: %s", r->addrText, r->abortText);
  mscclppDeadline d = mscclppDeadlineIn(ROOT_REPLY_SECONDS);
  for (int i = 0; r->ranks != NULL && i < r->nranks; i++) {
    if (r->ranks[i].fd < 0) continue;
    sendError(r->ranks[i].fd, r->abortText, d);
    close(r->ranks[i].fd);
    r->ranks[i].fd = -1;
  }
  r->joined = 0;
}

static void removePending(struct mscclppBootstrapRoot* r, int i, int closeFd) {
  if (closeFd) close(r->pending[i].fd);
  r->pending[i] = r->pending[r->npending - 1];
  r->npending--;
}

/* A pending connection proved the secret: take it as a joining rank. */
static void rootHandleJoin(struct mscclppBootstrapRoot* r, struct mscclppBsPending* p) {
  const struct mscclppBsHello* h = &p->hello;
  if (h->purpose != MSCCLPP_BS_PURPOSE_JOIN) {
    MSCCLPP_WARN(MSCCLPP_LOG_BOOTSTRAP, "root %s: %s (rank %d) connected as a peer, not to join; refused", r->addrText,
                 p->peerText, h->rank);
    (void)mscclppBootstrapPendingAck(p, r->secret, MSCCLPP_BS_ACK_WRONG_PURPOSE);
    close(p->fd);
    return;
  }
  if (mscclppBootstrapPendingAck(p, r->secret, MSCCLPP_BS_ACK_OK) != mscclppSuccess) {
    close(p->fd);
    return;
  }
  mscclppDeadline replyDeadline = mscclppDeadlineIn(ROOT_REPLY_SECONDS);
  if (r->aborted) {
    sendError(p->fd, r->abortText, replyDeadline);
    close(p->fd);
    return;
  }
  if (r->nranks < 0) {
    r->ranks = (struct rootRank*)calloc((size_t)h->nranks, sizeof(*r->ranks));
    if (r->ranks == NULL) {
      rootAbort(r, "out of memory for %d ranks", h->nranks);
      sendError(p->fd, r->abortText, replyDeadline);
      close(p->fd);
      return;
    }
    for (int i = 0; i < h->nranks; i++) r->ranks[i].fd = -1;
    r->nranks = h->nranks;
    r->firstRank = h->rank;
  } else if (h->nranks != r->nranks) {
    rootAbort(r, "rank %d (%s) says nranks=%d but rank %d (the first to join) said nranks=%d", h->rank, p->peerText,
              h->nranks, r->firstRank, r->nranks);
    sendError(p->fd, r->abortText, replyDeadline);
    close(p->fd);
    return;
  }
  struct rootRank* rr = &r->ranks[h->rank];
  if (rr->fd >= 0) {
    rootAbort(r, "rank %d was claimed twice: by %s (pid %u) and by %s (pid %u)", h->rank, rr->peerText, rr->info.pid,
              p->peerText, h->info.pid);
    sendError(p->fd, r->abortText, replyDeadline);
    close(p->fd);
    return;
  }
  rr->fd = p->fd;
  rr->info = h->info;
  snprintf(rr->peerText, sizeof(rr->peerText), "%s", p->peerText);
  r->joined++;
  MSCCLPP_INFO(MSCCLPP_LOG_BOOTSTRAP, "root %s: rank %d joined from %s (%d of %d)", r->addrText, h->rank, p->peerText,
               r->joined, r->nranks);
}

static void rootDistribute(struct mscclppBootstrapRoot* r) {
  size_t bodyBytes = mscclppBootstrapTableBytes(r->nranks);
  uint8_t* buf = (uint8_t*)malloc(MSCCLPP_BS_HEADER_BYTES + bodyBytes);
  struct mscclppBsRankInfo* infos = (struct mscclppBsRankInfo*)calloc((size_t)r->nranks, sizeof(*infos));
  uint64_t session = 0;
  if (buf == NULL || infos == NULL || mscclppRandomBytes(&session, sizeof(session)) != mscclppSuccess) {
    free(buf);
    free(infos);
    rootAbort(r, "out of memory (or no randomness) for the rank table of %d ranks", r->nranks);
    return;
  }
  session |= 1; /* never 0, the JOIN value */
  for (int i = 0; i < r->nranks; i++) infos[i] = r->ranks[i].info;
  struct mscclppBsHeader h = {MSCCLPP_BS_MSG_TABLE, 0, 0, bodyBytes};
  mscclppBootstrapEncodeHeader(&h, buf);
  mscclppBootstrapEncodeTable(session, infos, r->nranks, buf + MSCCLPP_BS_HEADER_BYTES);
  free(infos);
  MSCCLPP_INFO(MSCCLPP_LOG_BOOTSTRAP, "root %s: all %d ranks joined; sending the rank table", r->addrText, r->nranks);
  mscclppDeadline d = mscclppDeadlineMin(r->deadline, mscclppDeadlineIn(r->timeout));
  for (int i = 0; i < r->nranks; i++) {
    if (mscclppSocketWriteAll(r->ranks[i].fd, buf, MSCCLPP_BS_HEADER_BYTES + bodyBytes, d) != mscclppSuccess)
      MSCCLPP_WARN(MSCCLPP_LOG_BOOTSTRAP, "root %s: cannot send the rank table to rank %d (%s): %s", r->addrText, i,
                   r->ranks[i].peerText, strerror(errno));
    close(r->ranks[i].fd);
    r->ranks[i].fd = -1;
  }
  free(buf);
}

static void rootMissingList(struct mscclppBootstrapRoot* r, char* out, size_t len) {
  size_t o = 0;
  out[0] = '\0';
  int shown = 0;
  for (int i = 0; i < r->nranks && o + 16 < len; i++) {
    if (r->ranks[i].fd >= 0) continue;
    if (shown == 16) {
      snprintf(out + o, len - o, ", ...");
      break;
    }
    o += (size_t)snprintf(out + o, len - o, "%s%d", shown ? ", " : "", i);
    shown++;
  }
}

static void* rootMain(void* arg) {
  struct mscclppBootstrapRoot* r = (struct mscclppBootstrapRoot*)arg;
  struct pollfd* fds = NULL;
  int fdsCap = 0;
  int warnedFull = 0;
  for (;;) {
    if (!r->aborted && r->nranks > 0 && r->joined == r->nranks) {
      rootDistribute(r);
      break;
    }
    if (atomic_load(&r->stop)) {
      rootAbort(r, "the root was stopped (its rank failed) before all ranks joined");
      break;
    }
    if (mscclppDeadlinePassed(r->deadline)) {
      if (r->nranks > 0) {
        char missing[256];
        rootMissingList(r, missing, sizeof(missing));
        rootAbort(r, "timed out after %g s (MSCCLPP_TIMEOUT) with %d of %d ranks joined; missing ranks: %s", r->timeout,
                  r->joined, r->nranks, missing);
      } else {
        rootAbort(r, "timed out after %g s (MSCCLPP_TIMEOUT) before any rank joined", r->timeout);
      }
      break;
    }
    int want = 2 + r->npending + (r->nranks > 0 ? r->nranks : 0);
    if (want > fdsCap) {
      struct pollfd* n = (struct pollfd*)realloc(fds, (size_t)want * sizeof(*fds));
      if (n == NULL) {
        rootAbort(r, "out of memory");
        break;
      }
      fds = n;
      fdsCap = want;
    }
    int nf = 0;
    fds[nf++] = (struct pollfd){r->wakeFd, POLLIN, 0};
    fds[nf++] = (struct pollfd){r->listenFd, POLLIN, 0};
    int pendBase = nf;
    int timeoutMs = mscclppDeadlineRemainingMs(r->deadline);
    for (int i = 0; i < r->npending; i++) {
      fds[nf++] = (struct pollfd){r->pending[i].fd, POLLIN, 0};
      int left = mscclppDeadlineRemainingMs(r->pending[i].deadline);
      if (left < timeoutMs) timeoutMs = left;
    }
    int rankBase = nf;
    for (int i = 0; i < r->nranks; i++)
      if (r->ranks[i].fd >= 0) fds[nf++] = (struct pollfd){r->ranks[i].fd, POLLIN, 0};
    if (timeoutMs > 1000) timeoutMs = 1000;
    int rc = poll(fds, (nfds_t)nf, timeoutMs);
    if (rc < 0 && errno != EINTR) {
      rootAbort(r, "poll failed: %s", strerror(errno));
      break;
    }
    if (rc <= 0) goto expire;
    if (fds[0].revents) {
      uint64_t v;
      ssize_t ignored = read(r->wakeFd, &v, sizeof(v));
      (void)ignored;
    }
    /* Joined ranks send nothing until the table: readable means gone. */
    for (int k = rankBase; k < nf && !r->aborted; k++) {
      if (fds[k].revents == 0) continue;
      for (int i = 0; i < r->nranks; i++) {
        if (r->ranks[i].fd != fds[k].fd) continue;
        rootAbort(r, "rank %d (%s) disconnected before all ranks joined", i, r->ranks[i].peerText);
        break;
      }
    }
    /* Pending handshakes, from the last so that removal keeps indexes valid. */
    for (int k = rankBase - 1; k >= pendBase; k--) {
      if (fds[k].revents == 0) continue;
      int i = k - pendBase;
      int st = mscclppBootstrapPendingRead(&r->pending[i], r->secret, "root");
      if (st == MSCCLPP_BS_PENDING_REFUSED) {
        removePending(r, i, 1);
      } else if (st == MSCCLPP_BS_PENDING_DONE) {
        struct mscclppBsPending p = r->pending[i];
        removePending(r, i, 0);
        rootHandleJoin(r, &p);
      }
    }
    if (fds[1].revents) {
      for (;;) {
        int fd;
        union mscclppSocketAddr peer;
        int got = mscclppSocketAccept(r->listenFd, &fd, &peer);
        if (got == 0) break;
        if (got < 0) {
          MSCCLPP_WARN(MSCCLPP_LOG_BOOTSTRAP, "root %s: accept failed: %s", r->addrText, strerror(errno));
          break;
        }
        if (r->npending >= ROOT_MAX_PENDING) {
          if (!warnedFull)
            MSCCLPP_WARN(MSCCLPP_LOG_BOOTSTRAP,
                         "root %s: %d connections are waiting to prove the job secret; refusing more", r->addrText,
                         ROOT_MAX_PENDING);
          warnedFull = 1;
          close(fd);
          continue;
        }
        if (r->npending % 64 == 0) {
          struct mscclppBsPending* n =
              (struct mscclppBsPending*)realloc(r->pending, (size_t)(r->npending + 64) * sizeof(*n));
          if (n == NULL) {
            close(fd);
            continue;
          }
          r->pending = n;
        }
        if (mscclppBootstrapPendingStart(&r->pending[r->npending], fd, &peer, r->handshakeTimeout, "root") ==
            mscclppSuccess)
          r->npending++;
      }
    }
  expire:
    for (int i = r->npending - 1; i >= 0; i--) {
      if (!mscclppDeadlinePassed(r->pending[i].deadline)) continue;
      MSCCLPP_WARN(MSCCLPP_LOG_BOOTSTRAP,
                   "root %s: refused connection from %s: it did not prove the job secret within %g s "
                   "(MSCCLPP_BOOTSTRAP_HANDSHAKE_TIMEOUT)",
                   r->addrText, r->pending[i].peerText, r->handshakeTimeout);
      removePending(r, i, 1);
    }
  }
  free(fds);
  for (int i = 0; i < r->npending; i++) close(r->pending[i].fd);
  free(r->pending);
  r->pending = NULL;
  r->npending = 0;
  for (int i = 0; r->ranks != NULL && i < r->nranks; i++)
    if (r->ranks[i].fd >= 0) close(r->ranks[i].fd);
  free(r->ranks);
  r->ranks = NULL;
  close(r->listenFd);
  r->listenFd = -1;
  if (r->detached) {
    close(r->wakeFd);
    free(r);
  }
  return NULL;
}

mscclppResult_t mscclppBootstrapRootStart(const struct mscclppParams* params, union mscclppSocketAddr* bindAddr,
                                          const uint8_t secret[MSCCLPP_BS_SECRET_BYTES], int detached,
                                          struct mscclppBootstrapRoot** root) {
  struct mscclppBootstrapRoot* r = (struct mscclppBootstrapRoot*)calloc(1, sizeof(*r));
  if (r == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_BOOTSTRAP, "out of memory for the root");
  r->listenFd = -1;
  r->wakeFd = -1;
  r->detached = detached;
  r->nranks = -1;
  memcpy(r->secret, secret, sizeof(r->secret));
  r->timeout = params->timeout;
  r->handshakeTimeout = params->bootstrapHandshakeTimeout;
  r->deadline = mscclppDeadlineIn(params->timeout);
  atomic_init(&r->stop, 0);
  mscclppResult_t res = mscclppSocketListen(bindAddr, 1, &r->listenFd);
  if (res != mscclppSuccess) goto fail_free;
  mscclppSocketAddrToText(bindAddr, r->addrText, sizeof(r->addrText));
  r->wakeFd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (r->wakeFd < 0) {
    res = mscclppErr(mscclppSystemError, MSCCLPP_LOG_BOOTSTRAP, "eventfd failed: %s", strerror(errno));
    goto fail_close_listener;
  }
  MSCCLPP_INFO(MSCCLPP_LOG_BOOTSTRAP, "root listening on %s", r->addrText);
  /* A detached root may finish and free itself at any time after this. */
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  if (detached) pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t thread;
  int rc = pthread_create(&thread, &attr, rootMain, r);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    res = mscclppErr(mscclppSystemError, MSCCLPP_LOG_BOOTSTRAP, "cannot start the root thread: %s", strerror(rc));
    goto fail_close_wake;
  }
  if (detached) {
    if (root) *root = NULL;
  } else {
    r->thread = thread;
    *root = r;
  }
  return mscclppSuccess;

fail_close_wake:
  close(r->wakeFd);
fail_close_listener:
  close(r->listenFd);
fail_free:
  free(r);
  return res;
}

void mscclppBootstrapRootStop(struct mscclppBootstrapRoot* r) {
  if (r == NULL) return;
  atomic_store(&r->stop, 1);
  uint64_t one = 1;
  ssize_t ignored = write(r->wakeFd, &one, sizeof(one));
  (void)ignored;
  pthread_join(r->thread, NULL);
  close(r->wakeFd);
  free(r);
}

mscclppResult_t mscclppBootstrapCreateId(const struct mscclppParams* params, uint8_t id[MSCCLPP_BS_ID_BYTES]) {
  int family;
  MSCCLPP_RETURN_ON_ERROR(mscclppSocketParseFamily(params->socketFamily, &family));
  union mscclppSocketAddr addr;
  char ifname[64];
  MSCCLPP_RETURN_ON_ERROR(mscclppSocketFindInterface(params->socketIfname, family, &addr, ifname, sizeof(ifname)));
  struct mscclppBsId bid;
  MSCCLPP_RETURN_ON_ERROR(mscclppRandomBytes(bid.secret, sizeof(bid.secret)));
  MSCCLPP_RETURN_ON_ERROR(mscclppBootstrapRootStart(params, &addr, bid.secret, 1, NULL));
  mscclppSocketAddrToWire(&addr, &bid.root);
  char text[MSCCLPP_SOCKET_ADDR_TEXT];
  mscclppSocketAddrToText(&addr, text, sizeof(text));
  MSCCLPP_INFO(MSCCLPP_LOG_BOOTSTRAP, "unique id: root on %s (interface %s)", text, ifname);
  mscclppBootstrapEncodeId(&bid, id);
  return mscclppSuccess;
}
