/* SPDX-License-Identifier: MIT */
/* A rank's bootstrap connections: the epoll set, reading (by whichever
 * thread is a connection's reader), peer states and rank 0's notices, and the
 * progress thread that accepts peers and reads idle connections. See
 * bootstrap_state.h for who owns what. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/bootstrap_state.h"
#include "core/error.h"
#include "core/log.h"
#include "core/util.h"

/* ---- shared helpers ------------------------------------------------------------ */

void mscclppBsHandOverLocked(struct mscclppBootstrap* bs, mscclppBootstrapHandler fn, void* arg,
                             struct mscclppBsMsg* list) {
  bs->handlerCalls++;
  pthread_mutex_unlock(&bs->lock);
  while (list != NULL) {
    struct mscclppBsMsg* m = list;
    list = m->next;
    fn(arg, m->tag, m->data, m->size);
    free(m);
  }
  pthread_mutex_lock(&bs->lock);
  bs->handlerCalls--;
  pthread_cond_broadcast(&bs->cond);
}

void mscclppBsWakeProgress(struct mscclppBootstrap* bs) {
  uint64_t one = 1;
  ssize_t ignored = write(bs->wakeFd, &one, sizeof(one));
  (void)ignored;
}

/* Watch fd for input in the progress thread's epoll set (or stop). */
int mscclppBsEpollAdd(struct mscclppBootstrap* bs, int fd, void* tag) {
  struct epoll_event ev;
  memset(&ev, 0, sizeof(ev));
  ev.events = EPOLLIN;
  ev.data.ptr = tag;
  return epoll_ctl(bs->epfd, EPOLL_CTL_ADD, fd, &ev);
}

void mscclppBsEpollDel(struct mscclppBootstrap* bs, int fd) {
  struct epoll_event ev;
  memset(&ev, 0, sizeof(ev));
  epoll_ctl(bs->epfd, EPOLL_CTL_DEL, fd, &ev);
}

/* The lost-rank error for an operation `op`; call without bs->lock. */
mscclppResult_t mscclppBsLostError(struct mscclppBootstrap* bs, const char* op) {
  char reason[REASON_BYTES];
  pthread_mutex_lock(&bs->lock);
  snprintf(reason, sizeof(reason), "%s", bs->lostReason);
  pthread_mutex_unlock(&bs->lock);
  /* The loss itself was logged at WARN when it was detected; every call
   * that fails because of it returns it without logging it again. */
  return mscclppErrAgain(mscclppRemoteError, MSCCLPP_LOG_BOOTSTRAP, "%s failed: %s", op, reason);
}

int mscclppBsIsLost(struct mscclppBootstrap* bs) {
  pthread_mutex_lock(&bs->lock);
  int lost = bs->lostRank >= 0;
  pthread_mutex_unlock(&bs->lock);
  return lost;
}

struct mscclppBsConn* mscclppBsConnNew(int fd, int peer, int outgoing, const char* peerText) {
  struct mscclppBsConn* c = (struct mscclppBsConn*)calloc(1, sizeof(*c));
  if (c == NULL) return NULL;
  c->kind = EV_CONN;
  c->fd = fd;
  c->peer = peer;
  c->outgoing = outgoing;
  snprintf(c->peerText, sizeof(c->peerText), "%s", peerText);
  return c;
}

/* Under bs->lock: record c and let the progress thread watch it. */
int mscclppBsConnAddLocked(struct mscclppBootstrap* bs, struct mscclppBsConn* c) {
  if (mscclppBsEpollAdd(bs, c->fd, c) != 0) return -1;
  if (bs->nconns == bs->connsCap) {
    int cap = bs->connsCap ? 2 * bs->connsCap : 16;
    struct mscclppBsConn** n = (struct mscclppBsConn**)realloc(bs->conns, (size_t)cap * sizeof(*n));
    if (n == NULL) {
      mscclppBsEpollDel(bs, c->fd);
      return -1;
    }
    bs->conns = n;
    bs->connsCap = cap;
  }
  bs->conns[bs->nconns++] = c;
  if (c->outgoing)
    bs->out[c->peer] = c;
  else
    bs->in[c->peer] = c;
  return 0;
}

/* ---- peer states (the thread that reads a connection) -------------------------------- */

static void noticeBroadcast(struct mscclppBootstrap* bs, int subject, uint32_t status);

/* Record that `peer` left or was lost; rank 0 tells everyone. Called by a
 * connection's reader, without bs->lock. */
static void peerMark(struct mscclppBootstrap* bs, int peer, int state, const char* reason) {
  int broadcast = 0;
  pthread_mutex_lock(&bs->lock);
  if (bs->peerState[peer] < state) {
    bs->peerState[peer] = state;
    broadcast = bs->rank == 0;
    if (state == PEER_LOST && bs->lostRank < 0) {
      bs->lostRank = peer;
      snprintf(bs->lostReason, sizeof(bs->lostReason), "rank %d was lost: %s", peer, reason);
      MSCCLPP_WARN(MSCCLPP_LOG_BOOTSTRAP, "%s: rank %d was lost: %s", bs->where, peer, reason);
    } else if (state == PEER_LEFT) {
      MSCCLPP_INFO(MSCCLPP_LOG_BOOTSTRAP, "%s: rank %d left: %s", bs->where, peer, reason);
    }
  }
  pthread_cond_broadcast(&bs->cond);
  pthread_mutex_unlock(&bs->lock);
  if (broadcast) noticeBroadcast(bs, peer, state == PEER_LOST ? MSCCLPP_BS_PEER_LOST : MSCCLPP_BS_PEER_LEFT);
}

/* Rank 0: write PEER_STATUS(subject) on every rank's connection to us. */
static void noticeBroadcast(struct mscclppBootstrap* bs, int subject, uint32_t status) {
  uint8_t buf[MSCCLPP_BS_HEADER_BYTES + MSCCLPP_BS_PEER_STATUS_BYTES];
  struct mscclppBsHeader h = {MSCCLPP_BS_MSG_PEER_STATUS, 0, 0, MSCCLPP_BS_PEER_STATUS_BYTES};
  mscclppBootstrapEncodeHeader(&h, buf);
  mscclppBootstrapEncodePeerStatus(subject, status, buf + MSCCLPP_BS_HEADER_BYTES);
  mscclppDeadline d = mscclppDeadlineIn(NOTICE_SECONDS);
  pthread_mutex_lock(&bs->noticeLock);
  for (int r = 1; r < bs->nranks; r++) {
    if (r == subject) continue;
    pthread_mutex_lock(&bs->lock);
    struct mscclppBsConn* c = bs->in[r];
    int fd = (c != NULL && !c->eof) ? c->fd : -1;
    pthread_mutex_unlock(&bs->lock);
    if (fd < 0) continue;
    /* The fd stays open: only its reader closes it, and a reader that would
     * close it first takes noticeLock in connEnded. */
    if (mscclppSocketWriteAll(fd, buf, sizeof(buf), d) != mscclppSuccess)
      MSCCLPP_INFO(MSCCLPP_LOG_BOOTSTRAP, "%s: cannot tell rank %d about rank %d: %s", bs->where, r, subject,
                   strerror(errno));
  }
  pthread_mutex_unlock(&bs->noticeLock);
}

/* ---- reading connections (their current reader) --------------------------------------- */

/* The connection ended (EOF, error, or dropped for an invalid message, as
 * `how` says). After a goodbye that is a clean leave, otherwise a loss. */
static void connEnded(struct mscclppBootstrap* bs, struct mscclppBsConn* c, const char* how, int forceLost) {
  /* noticeLock first: a notice broadcast may be writing on this fd. */
  pthread_mutex_lock(&bs->noticeLock);
  pthread_mutex_lock(&bs->lock);
  int clean = c->goodbye && !forceLost;
  c->eof = 1;
  int fd = -1;
  if (!c->outgoing) {
    /* This thread is the connection's reader: nobody else uses the fd. */
    fd = c->fd;
    c->fd = -1;
  } else {
    /* Application threads may still write on it (and fail); destroy closes it. */
    mscclppBsEpollDel(bs, c->fd);
  }
  pthread_mutex_unlock(&bs->lock);
  if (fd >= 0) close(fd); /* closing also removes it from the epoll set */
  pthread_mutex_unlock(&bs->noticeLock);
  if (c->msg != NULL) {
    free(c->msg);
    c->msg = NULL;
  }
  if (clean) {
    peerMark(bs, c->peer, PEER_LEFT, "said goodbye");
    return;
  }
  char reason[REASON_BYTES];
  snprintf(reason, sizeof(reason), "%s (%.200s) %.200s", c->outgoing ? "the connection to it" : "its connection to this rank",
           c->peerText, how);
  peerMark(bs, c->peer, PEER_LOST, reason);
}

static void connProtocolError(struct mscclppBootstrap* bs, struct mscclppBsConn* c, const char* what) {
  char how[REASON_BYTES];
  snprintf(how, sizeof(how), "carried an invalid message (%s) and was dropped", what);
  connEnded(bs, c, how, 1);
}

static void connDeliver(struct mscclppBootstrap* bs, struct mscclppBsConn* c) {
  const struct mscclppBsHeader* h = &c->cur;
  if (h->type == MSCCLPP_BS_MSG_DATA) {
    struct mscclppBsMsg* m = c->msg;
    c->msg = NULL;
    pthread_mutex_lock(&bs->lock);
    if (m->flags == 0) { /* one piece in the user tag space: a handler's? */
      for (int i = 0; i < bs->nhandlers; i++) {
        if (bs->handlers[i].tag != m->tag) continue;
        m->tag = c->peer; /* (mscclppBsHandOverLocked's list) */
        mscclppBsHandOverLocked(bs, bs->handlers[i].fn, bs->handlers[i].arg, m);
        pthread_mutex_unlock(&bs->lock);
        return;
      }
    }
    mscclppBsQueuePushLocked(&bs->queues[c->peer], m);
    pthread_cond_broadcast(&bs->cond);
    pthread_mutex_unlock(&bs->lock);
  } else if (h->type == MSCCLPP_BS_MSG_GOODBYE) {
    pthread_mutex_lock(&bs->lock);
    c->goodbye = 1;
    pthread_mutex_unlock(&bs->lock);
    peerMark(bs, c->peer, PEER_LEFT, "said goodbye");
  } else if (h->type == MSCCLPP_BS_MSG_PEER_STATUS) {
    int32_t subject;
    uint32_t status;
    mscclppBsWhy why;
    if (mscclppBootstrapParsePeerStatus(c->small, sizeof(c->small), bs->nranks, &subject, &status, &why) !=
        mscclppSuccess) {
      connProtocolError(bs, c, why.text);
      return;
    }
    if (subject == bs->rank) return; /* someone thinks we left: nothing to do */
    char reason[96];
    if (status == MSCCLPP_BS_PEER_LOST && subject == c->peer)
      snprintf(reason, sizeof(reason), "its creation of the communicator failed and it gave up");
    else if (status == MSCCLPP_BS_PEER_LOST && c->peer == 0)
      snprintf(reason, sizeof(reason), "its connection to rank 0 closed without a goodbye (reported by rank 0)");
    else if (status == MSCCLPP_BS_PEER_LOST)
      snprintf(reason, sizeof(reason), "reported by rank %d as it left", c->peer);
    else
      snprintf(reason, sizeof(reason), "said goodbye (reported by rank %d)", c->peer);
    peerMark(bs, subject, status == MSCCLPP_BS_PEER_LOST ? PEER_LOST : PEER_LEFT, reason);
  }
}

/* Read what is available on c (up to a budget, for fairness). A waiting
 * receiver stops after one whole data message (saving the read that would
 * only say "nothing more"); the progress thread reads until the socket is
 * empty. */
void mscclppBsConnRead(struct mscclppBootstrap* bs, struct mscclppBsConn* c, int oneMessage) {
  size_t budget = READ_BUDGET_BYTES;
  while (budget > 0) {
    uint8_t* dst;
    size_t want;
    if (!c->inBody) {
      dst = c->hdr + c->hdrGot;
      want = sizeof(c->hdr) - c->hdrGot;
    } else if (c->cur.type == MSCCLPP_BS_MSG_DATA) {
      dst = c->msg->data + c->bodyGot;
      want = c->cur.size - c->bodyGot;
    } else {
      dst = c->small + c->bodyGot;
      want = c->cur.size - c->bodyGot;
    }
    if (want > budget) want = budget;
    ssize_t n = recv(c->fd, dst, want, MSG_DONTWAIT);
    if (n == 0) {
      connEnded(bs, c, "closed without a goodbye (the process died or was killed?)", 0);
      return;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      char how[128];
      snprintf(how, sizeof(how), "failed without a goodbye (%s)", strerror(errno));
      connEnded(bs, c, how, 0);
      return;
    }
    budget -= (size_t)n;
    if (!c->inBody) {
      c->hdrGot += (size_t)n;
      if (c->hdrGot < sizeof(c->hdr)) continue;
      c->hdrGot = 0;
      mscclppBsWhy why;
      if (mscclppBootstrapParseHeader(c->hdr, sizeof(c->hdr), &c->cur, &why) != mscclppSuccess) {
        connProtocolError(bs, c, why.text);
        return;
      }
      uint8_t type = c->cur.type;
      /* Data comes on incoming connections; rank 0's notices on our
       * connection to it; any rank that leaves after a loss repeats it. */
      int ok = (type == MSCCLPP_BS_MSG_DATA && !c->outgoing) || type == MSCCLPP_BS_MSG_GOODBYE ||
               type == MSCCLPP_BS_MSG_PEER_STATUS;
      if (!ok) {
        char what[96];
        snprintf(what, sizeof(what), "message type %u is not expected on a%s connection", type,
                 c->outgoing ? "n outgoing" : "n incoming");
        connProtocolError(bs, c, what);
        return;
      }
      c->bodyGot = 0;
      if (type == MSCCLPP_BS_MSG_DATA) {
        c->msg = (struct mscclppBsMsg*)malloc(sizeof(struct mscclppBsMsg) + c->cur.size);
        if (c->msg == NULL) {
          connProtocolError(bs, c, "out of memory for its message");
          return;
        }
        c->msg->next = NULL;
        c->msg->flags = c->cur.flags;
        c->msg->tag = c->cur.tag;
        c->msg->size = c->cur.size;
        c->msg->data = (uint8_t*)(c->msg + 1);
      }
      if (c->cur.size > 0) {
        c->inBody = 1;
        continue;
      }
    } else {
      c->bodyGot += (size_t)n;
      if (c->bodyGot < c->cur.size) continue;
      c->inBody = 0;
    }
    int data = c->cur.type == MSCCLPP_BS_MSG_DATA;
    connDeliver(bs, c);
    if (c->eof || (oneMessage && data)) return;
  }
}

/* ---- the progress thread: accepting peers, reading idle connections ------------------- */

/* Forget pending entry i (closing its fd unless it moved to a connection). */
static void pendingRemove(struct mscclppBootstrap* bs, int i, int closeFd) {
  struct mscclppBsPendingEntry* e = bs->pending[i];
  if (closeFd) close(e->p.fd); /* also leaves the epoll set */
  free(e);
  bs->pending[i] = bs->pending[bs->npending - 1];
  bs->npending--;
}

/* A pending connection proved the secret and we know our session: take it. */
static void pendingAdmit(struct mscclppBootstrap* bs, struct mscclppBsPending* p) {
  const struct mscclppBsHello* h = &p->hello;
  int32_t status = MSCCLPP_BS_ACK_OK;
  if (h->purpose != MSCCLPP_BS_PURPOSE_PEER)
    status = MSCCLPP_BS_ACK_WRONG_PURPOSE;
  else if (h->nranks != bs->nranks)
    status = MSCCLPP_BS_ACK_WRONG_NRANKS;
  else if (h->session != bs->session)
    status = MSCCLPP_BS_ACK_WRONG_SESSION;
  else if (h->rank == bs->rank)
    status = MSCCLPP_BS_ACK_DUPLICATE;
  struct mscclppBsConn* c = NULL;
  if (status == MSCCLPP_BS_ACK_OK) {
    pthread_mutex_lock(&bs->lock);
    struct mscclppBsConn* old = bs->in[h->rank];
    if (old != NULL && !old->eof) {
      status = MSCCLPP_BS_ACK_DUPLICATE;
    } else {
      c = mscclppBsConnNew(p->fd, h->rank, 0, p->peerText);
      if (c == NULL || mscclppBsConnAddLocked(bs, c) != 0) {
        free(c);
        c = NULL;
        status = MSCCLPP_BS_ACK_CLOSING;
      }
    }
    pthread_mutex_unlock(&bs->lock);
  }
  if (status != MSCCLPP_BS_ACK_OK) {
    MSCCLPP_WARN(MSCCLPP_LOG_BOOTSTRAP, "%s: refused connection from %s (rank %d of %d): %s", bs->where, p->peerText,
                 h->rank, h->nranks, mscclppBootstrapAckText(status));
    (void)mscclppBootstrapPendingAck(p, bs->secret, status);
    close(p->fd);
    return;
  }
  /* Registered before the ACK goes out: by the time the peer can send (or
   * say goodbye to rank 0), this rank reads its connection. */
  MSCCLPP_TRACE(MSCCLPP_LOG_BOOTSTRAP, "%s: rank %d connected from %s", bs->where, h->rank, p->peerText);
  (void)mscclppBootstrapPendingAck(p, bs->secret, MSCCLPP_BS_ACK_OK);
}

static void acceptAll(struct mscclppBootstrap* bs) {
  for (;;) {
    int fd;
    union mscclppSocketAddr peer;
    int got = mscclppSocketAccept(bs->listenFd, &fd, &peer);
    if (got == 0) return;
    if (got < 0) {
      MSCCLPP_WARN(MSCCLPP_LOG_BOOTSTRAP, "%s: accept failed: %s", bs->where, strerror(errno));
      return;
    }
    if (bs->npending >= MAX_PENDING) {
      MSCCLPP_WARN(MSCCLPP_LOG_BOOTSTRAP, "%s: %d connections are proving the job secret already; dropping one more",
                   bs->where, MAX_PENDING);
      close(fd);
      continue;
    }
    if (bs->npending == bs->pendingCap) {
      int cap = bs->pendingCap ? 2 * bs->pendingCap : 16;
      struct mscclppBsPendingEntry** n = (struct mscclppBsPendingEntry**)realloc(bs->pending, (size_t)cap * sizeof(*n));
      if (n == NULL) {
        close(fd);
        continue;
      }
      bs->pending = n;
      bs->pendingCap = cap;
    }
    struct mscclppBsPendingEntry* e = (struct mscclppBsPendingEntry*)calloc(1, sizeof(*e));
    if (e == NULL) {
      close(fd);
      continue;
    }
    e->kind = EV_PENDING;
    if (mscclppBootstrapPendingStart(&e->p, fd, &peer, bs->handshakeTimeout, bs->where) != mscclppSuccess) {
      free(e); /* PendingStart closed fd */
      continue;
    }
    if (mscclppBsEpollAdd(bs, fd, e) != 0) {
      MSCCLPP_WARN(MSCCLPP_LOG_BOOTSTRAP, "%s: cannot watch a new connection: %s", bs->where, strerror(errno));
      close(fd);
      free(e);
      continue;
    }
    bs->pending[bs->npending++] = e;
  }
}

/* The progress thread's turn at reading c, unless an application thread is
 * reading it. */
static void progressReadConn(struct mscclppBootstrap* bs, struct mscclppBsConn* c) {
  pthread_mutex_lock(&bs->lock);
  int mine = !c->reader && !c->eof;
  if (mine) c->progressReading = 1;
  pthread_mutex_unlock(&bs->lock);
  if (!mine) return;
  mscclppBsConnRead(bs, c, 0);
  pthread_mutex_lock(&bs->lock);
  c->progressReading = 0;
  pthread_cond_broadcast(&bs->cond); /* a thread may wait to take it over */
  pthread_mutex_unlock(&bs->lock);
}

void* mscclppBsProgressMain(void* arg) {
  struct mscclppBootstrap* bs = (struct mscclppBootstrap*)arg;
  mscclppLogSetRank(bs->rank);
  struct epoll_event evs[64];
  while (!atomic_load(&bs->stop)) {
    int timeoutMs = 1000;
    for (int i = 0; i < bs->npending; i++) {
      int left = mscclppDeadlineRemainingMs(bs->pending[i]->p.deadline);
      if (left < timeoutMs) timeoutMs = left;
    }
    int n = epoll_wait(bs->epfd, evs, (int)(sizeof(evs) / sizeof(evs[0])), timeoutMs);
    if (n < 0 && errno != EINTR) {
      MSCCLPP_WARN(MSCCLPP_LOG_BOOTSTRAP, "%s: epoll_wait failed in the progress thread: %s", bs->where,
                   strerror(errno));
      struct timespec ts = {0, 10000000L};
      nanosleep(&ts, NULL);
      continue;
    }
    for (int k = 0; k < n; k++) {
      int kind = *(int*)evs[k].data.ptr;
      if (kind == EV_WAKE) {
        uint64_t v;
        ssize_t ignored = read(bs->wakeFd, &v, sizeof(v));
        (void)ignored;
      } else if (kind == EV_LISTEN) {
        acceptAll(bs);
      } else if (kind == EV_CONN) {
        progressReadConn(bs, (struct mscclppBsConn*)evs[k].data.ptr);
      } else if (kind == EV_PENDING) {
        struct mscclppBsPendingEntry* e = (struct mscclppBsPendingEntry*)evs[k].data.ptr;
        int st = mscclppBootstrapPendingRead(&e->p, bs->secret, bs->where);
        if (st == MSCCLPP_BS_PENDING_MORE) continue;
        for (int i = 0; i < bs->npending; i++) {
          if (bs->pending[i] != e) continue;
          if (st == MSCCLPP_BS_PENDING_REFUSED) {
            pendingRemove(bs, i, 1);
          } else {
            /* DONE: it sends nothing more until its ACK; stop watching. */
            mscclppBsEpollDel(bs, e->p.fd);
          }
          break;
        }
      }
    }
    pthread_mutex_lock(&bs->lock);
    int sessionKnown = bs->sessionKnown;
    pthread_mutex_unlock(&bs->lock);
    if (sessionKnown) {
      for (int i = bs->npending - 1; i >= 0; i--) {
        if (!bs->pending[i]->p.helloDone) continue;
        struct mscclppBsPending p = bs->pending[i]->p;
        pendingRemove(bs, i, 0);
        pendingAdmit(bs, &p);
      }
    }
    for (int i = bs->npending - 1; i >= 0; i--) {
      struct mscclppBsPending* p = &bs->pending[i]->p;
      if (!mscclppDeadlinePassed(p->deadline)) continue;
      MSCCLPP_WARN(MSCCLPP_LOG_BOOTSTRAP,
                   "%s: refused connection from %s: it did not %s within %g s (MSCCLPP_BOOTSTRAP_HANDSHAKE_TIMEOUT)",
                   bs->where, p->peerText,
                   p->helloDone ? "get admitted (this rank had no rank table yet)" : "prove the job secret",
                   bs->handshakeTimeout);
      pendingRemove(bs, i, 1);
    }
  }
  return NULL;
}
