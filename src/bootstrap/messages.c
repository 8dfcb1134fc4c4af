/* SPDX-License-Identifier: MIT */
/* Sending and receiving bootstrap messages, and the collectives built on
 * them (allgather, barrier). See bootstrap_state.h for who owns what. */
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
#include "core/trace.h"
#include "core/util.h"

static struct timespec monotonicIn(int ms) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  ts.tv_sec += ms / 1000;
  ts.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  return ts;
}

static int sliceMs(mscclppDeadline d) {
  int left = mscclppDeadlineRemainingMs(d);
  return left < WAIT_SLICE_MS ? left : WAIT_SLICE_MS;
}

/* ---- writing (application threads) ------------------------------------------------ */

struct mscclppBsOp mscclppBsOpOf(struct mscclppBootstrap* bs, const char* name, mscclppDeadline deadline) {
  struct mscclppBsOp o = {.name = name, .deadline = deadline, .interrupts = atomic_load(&bs->interrupts)};
  return o;
}

/* Why `o` must stop now, before or while it waits for `peer` (-1: no one):
 * an interrupt or a cancel, a lost rank (any, or the peer only with
 * o->survivors), or the peer left. mscclppSuccess when it may go on. */
static mscclppResult_t opCheck(struct mscclppBootstrap* bs, int peer, const struct mscclppBsOp* o) {
  if (atomic_load(&bs->interrupts) != o->interrupts) {
    char why[REASON_BYTES];
    pthread_mutex_lock(&bs->lock);
    snprintf(why, sizeof(why), "%s", bs->interruptWhy);
    pthread_mutex_unlock(&bs->lock);
    return mscclppErr(mscclppAborted, MSCCLPP_LOG_BOOTSTRAP, "%s failed: interrupted (%s)", o->name, why);
  }
  if (o->cancel != NULL && __atomic_load_n(o->cancel, __ATOMIC_ACQUIRE))
    return mscclppErr(mscclppAborted, MSCCLPP_LOG_BOOTSTRAP, "%s failed: cancelled", o->name);
  pthread_mutex_lock(&bs->lock);
  int lost = bs->lostRank >= 0;
  int state = peer >= 0 ? bs->peerState[peer] : PEER_ALIVE;
  pthread_mutex_unlock(&bs->lock);
  if (lost && !o->survivors) return mscclppBsLostError(bs, o->name);
  if (state == PEER_LOST)
    return mscclppErr(mscclppRemoteError, MSCCLPP_LOG_BOOTSTRAP, "%s failed: rank %d was lost", o->name, peer);
  if (state != PEER_ALIVE)
    return mscclppErr(mscclppRemoteError, MSCCLPP_LOG_BOOTSTRAP,
                      "%s failed: rank %d has left (destroyed its communicator)", o->name, peer);
  return mscclppSuccess;
}

static mscclppResult_t writeIov(struct mscclppBootstrap* bs, struct mscclppBsConn* c, struct iovec* iov, int iovcnt,
                                const struct mscclppBsOp* o) {
  while (iovcnt > 0) {
    struct msghdr mh;
    memset(&mh, 0, sizeof(mh));
    mh.msg_iov = iov;
    mh.msg_iovlen = (size_t)iovcnt;
    ssize_t n = sendmsg(c->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0) {
      size_t left = (size_t)n;
      while (iovcnt > 0 && left >= iov->iov_len) {
        left -= iov->iov_len;
        iov++;
        iovcnt--;
      }
      if (iovcnt > 0) {
        iov->iov_base = (uint8_t*)iov->iov_base + left;
        iov->iov_len -= left;
      }
      continue;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      int e = errno;
      /* Give the progress thread a moment to learn why (goodbye or loss). */
      struct timespec ts = {0, 20000000L};
      nanosleep(&ts, NULL);
      MSCCLPP_RETURN_ON_ERROR(opCheck(bs, c->peer, o));
      return mscclppErr(mscclppRemoteError, MSCCLPP_LOG_BOOTSTRAP, "%s failed: connection to rank %d (%s): %s",
                        o->name, c->peer, c->peerText, strerror(e));
    }
    MSCCLPP_RETURN_ON_ERROR(opCheck(bs, c->peer, o));
    if (mscclppDeadlinePassed(o->deadline))
      return mscclppErr(mscclppTimeout, MSCCLPP_LOG_BOOTSTRAP,
                        "%s timed out after %g s (MSCCLPP_TIMEOUT): rank %d does not read its messages", o->name,
                        bs->timeout, c->peer);
    struct pollfd p = {c->fd, POLLOUT, 0};
    poll(&p, 1, sliceMs(o->deadline));
  }
  return mscclppSuccess;
}

/* The connection to `peer`, made if needed; caller holds sendLocks[peer]. */
static mscclppResult_t connectNew(struct mscclppBootstrap* bs, int peer, const struct mscclppBsOp* o,
                                  struct mscclppBsConn** out) {
  struct mscclppBsConn* c = NULL;
  union mscclppSocketAddr addr;
  mscclppSocketAddrFromWire(&bs->peers[peer].addr, &addr);
  char text[MSCCLPP_SOCKET_ADDR_TEXT];
  mscclppSocketAddrToText(&addr, text, sizeof(text));
  int fd = -1;
  mscclppResult_t res = mscclppSocketConnect(&addr, o->deadline, 0, 1, &fd);
  if (res != mscclppSuccess) {
    MSCCLPP_RETURN_ON_ERROR(opCheck(bs, peer, o));
    char why[512]; /* a copy: the new message is written over the last error */
    snprintf(why, sizeof(why), "%s", mscclppGetLastError());
    return mscclppErr(res == mscclppTimeout ? mscclppTimeout : mscclppRemoteError, MSCCLPP_LOG_BOOTSTRAP,
                      "%s failed: cannot connect to rank %d at %s: %s", o->name, peer, text, why);
  }
  struct mscclppBsHello hello;
  memset(&hello, 0, sizeof(hello));
  hello.purpose = MSCCLPP_BS_PURPOSE_PEER;
  hello.rank = bs->rank;
  hello.nranks = bs->nranks;
  pthread_mutex_lock(&bs->lock);
  hello.session = bs->session;
  pthread_mutex_unlock(&bs->lock);
  char who[MSCCLPP_SOCKET_ADDR_TEXT + 16];
  snprintf(who, sizeof(who), "rank %d (%s)", peer, text);
  int32_t status = MSCCLPP_BS_ACK_OK;
  res = mscclppBootstrapHandshakeClient(
      fd, bs->secret, &hello, mscclppDeadlineMin(o->deadline, mscclppDeadlineIn(bs->handshakeTimeout)), who, &status);
  if (res == mscclppSuccess && status != MSCCLPP_BS_ACK_OK)
    res = mscclppErr(mscclppRemoteError, MSCCLPP_LOG_BOOTSTRAP, "%s failed: %s refused the connection: %s", o->name,
                     who, mscclppBootstrapAckText(status));
  if (res != mscclppSuccess) goto fail_close_fd;
  c = mscclppBsConnNew(fd, peer, 1, text);
  pthread_mutex_lock(&bs->lock);
  int added = c != NULL && mscclppBsConnAddLocked(bs, c) == 0;
  pthread_mutex_unlock(&bs->lock);
  if (!added) {
    free(c);
    res = mscclppErr(mscclppSystemError, MSCCLPP_LOG_BOOTSTRAP, "out of memory for a connection");
    goto fail_close_fd;
  }
  mscclppBsWakeProgress(bs);
  *out = c;
  return mscclppSuccess;

fail_close_fd:
  close(fd);
  return res;
}

mscclppResult_t mscclppBsConnectPeer(struct mscclppBootstrap* bs, int peer, const struct mscclppBsOp* o,
                                     struct mscclppBsConn** out) {
  pthread_mutex_lock(&bs->lock);
  struct mscclppBsConn* c = bs->out[peer];
  pthread_mutex_unlock(&bs->lock);
  if (c != NULL) {
    *out = c;
    return mscclppSuccess;
  }
  uint64_t t0 = mscclppTraceBegin();
  mscclppResult_t res = connectNew(bs, peer, o, out);
  if (t0 != 0)
    MSCCLPP_TRACE_EMIT(MSCCLPP_TRACE_BS_CONNECT, t0, mscclppTraceNow(), MSCCLPP_TRACE_I(peer), MSCCLPP_TRACE_I(res));
  return res;
}

static mscclppResult_t enqueueSelf(struct mscclppBootstrap* bs, uint8_t flags, int tag, const void* data, size_t size) {
  struct mscclppBsMsg* m = (struct mscclppBsMsg*)malloc(sizeof(*m) + size);
  if (m == NULL)
    return mscclppErr(mscclppSystemError, MSCCLPP_LOG_BOOTSTRAP, "out of memory for a %zu-byte message to self", size);
  m->next = NULL;
  m->flags = flags;
  m->tag = tag;
  m->size = size;
  m->data = (uint8_t*)(m + 1);
  if (size > 0) memcpy(m->data, data, size);
  pthread_mutex_lock(&bs->lock);
  mscclppBsQueuePushLocked(&bs->queues[bs->rank], m);
  pthread_cond_broadcast(&bs->cond);
  pthread_mutex_unlock(&bs->lock);
  return mscclppSuccess;
}

mscclppResult_t mscclppBsSendMsg(struct mscclppBootstrap* bs, int peer, uint8_t flags, int tag, const void* data,
                                 size_t size, const struct mscclppBsOp* o) {
  if (peer == bs->rank) {
    MSCCLPP_RETURN_ON_ERROR(opCheck(bs, -1, o));
    return enqueueSelf(bs, flags, tag, data, size);
  }
  pthread_mutex_lock(&bs->sendLocks[peer]);
  struct mscclppBsConn* c = NULL;
  mscclppResult_t res = opCheck(bs, peer, o);
  if (res == mscclppSuccess) res = mscclppBsConnectPeer(bs, peer, o, &c);
  const uint8_t* p = (const uint8_t*)data;
  size_t left = size;
  while (res == mscclppSuccess) {
    size_t piece = left < bs->maxPiece ? left : bs->maxPiece;
    struct mscclppBsHeader h = {MSCCLPP_BS_MSG_DATA, (uint8_t)(flags | (piece < left ? MSCCLPP_BS_FLAG_MORE : 0)), tag,
                                piece};
    uint8_t hdr[MSCCLPP_BS_HEADER_BYTES];
    mscclppBootstrapEncodeHeader(&h, hdr);
    struct iovec iov[2] = {{hdr, sizeof(hdr)}, {(void*)p, piece}};
    res = writeIov(bs, c, iov, piece > 0 ? 2 : 1, o);
    p += piece;
    left -= piece;
    if (left == 0) break;
  }
  pthread_mutex_unlock(&bs->sendLocks[peer]);
  return res;
}

/* ---- receiving (application threads) ----------------------------------------------- */

/* Under bs->lock: unlink the first message from `peer` in tag space `coll`
 * with `tag`. */
static struct mscclppBsMsg* takeLocked(struct mscclppBootstrap* bs, int peer, uint8_t coll, int tag) {
  struct mscclppBsQueue* q = &bs->queues[peer];
  struct mscclppBsMsg* prev = NULL;
  for (struct mscclppBsMsg* m = q->head; m != NULL; prev = m, m = m->next) {
    if ((m->flags & MSCCLPP_BS_FLAG_COLL) != coll || m->tag != tag) continue;
    if (prev)
      prev->next = m->next;
    else
      q->head = m->next;
    if (q->tail == m) q->tail = prev;
    m->next = NULL;
    return m;
  }
  return NULL;
}

int mscclppBsTakeQueued(struct mscclppBootstrap* bs, int peer, uint8_t coll, int tag, void* data, size_t size) {
  for (;;) {
    pthread_mutex_lock(&bs->lock);
    struct mscclppBsMsg* m = takeLocked(bs, peer, coll, tag);
    pthread_mutex_unlock(&bs->lock);
    if (m == NULL) return 0;
    int whole = m->size == size && !(m->flags & MSCCLPP_BS_FLAG_MORE);
    if (whole) memcpy(data, m->data, size);
    free(m);
    if (whole) return 1;
  }
}

mscclppResult_t mscclppBsRecvAny(struct mscclppBootstrap* bs, uint8_t coll, int tag, const uint8_t* mustLive,
                                 void* data, size_t size, const struct mscclppBsOp* o, int* from) {
  enum { GOT, LOST, GONE, STOPPED, TIMEOUT } why;
  int n = bs->nranks, start = 0, gone = -1, goneState = PEER_ALIVE;
  struct mscclppBsMsg* m = NULL;
  pthread_mutex_lock(&bs->lock);
  for (;;) {
    if (atomic_load(&bs->interrupts) != o->interrupts ||
        (o->cancel != NULL && __atomic_load_n(o->cancel, __ATOMIC_ACQUIRE))) {
      why = STOPPED;
      break;
    }
    if (bs->lostRank >= 0 && !o->survivors) {
      why = LOST;
      break;
    }
    /* round robin from where the last look stopped: no sender starves */
    for (int k = 0; k < n && m == NULL; k++) {
      int p = (start + k) % n;
      if (p == bs->rank || (m = takeLocked(bs, p, coll, tag)) == NULL) continue;
      *from = p;
      start = p + 1;
    }
    if (m != NULL) {
      why = GOT;
      break;
    }
    for (int p = 0; p < n && gone < 0; p++) {
      struct mscclppBsConn* c = bs->in[p];
      if (mustLive[p] && bs->peerState[p] != PEER_ALIVE && (c == NULL || c->eof)) {
        gone = p;
        goneState = bs->peerState[p];
      }
    }
    if (gone >= 0) {
      why = GONE;
      break;
    }
    if (mscclppDeadlinePassed(o->deadline)) {
      why = TIMEOUT;
      break;
    }
    /* the progress thread reads the connections and signals each message */
    struct timespec ts = monotonicIn(sliceMs(o->deadline));
    pthread_cond_timedwait(&bs->cond, &bs->lock, &ts);
  }
  pthread_mutex_unlock(&bs->lock);
  switch (why) {
    case GOT: {
      int whole = m->size == size && !(m->flags & MSCCLPP_BS_FLAG_MORE);
      size_t got = m->size;
      if (whole) memcpy(data, m->data, size);
      free(m);
      if (!whole)
        return mscclppErr(mscclppRemoteError, MSCCLPP_LOG_BOOTSTRAP,
                          "%s: rank %d sent a message of %zu bytes where one of %zu was expected", o->name, *from, got,
                          size);
      return mscclppSuccess;
    }
    case LOST:
      return mscclppBsLostError(bs, o->name);
    case STOPPED:
      return opCheck(bs, -1, o);
    case GONE:
      return mscclppErr(mscclppRemoteError, MSCCLPP_LOG_BOOTSTRAP, "%s failed: rank %d %s", o->name, gone,
                        goneState == PEER_LOST ? "was lost" : "has left (destroyed its communicator)");
    default:
      if (o->quietTimeout) return mscclppErrAgain(mscclppTimeout, MSCCLPP_LOG_BOOTSTRAP, "%s: deadline", o->name);
      return mscclppErr(mscclppTimeout, MSCCLPP_LOG_BOOTSTRAP, "%s timed out after %g s (MSCCLPP_TIMEOUT)", o->name,
                        bs->timeout);
  }
}

/* Wait for the next message from `peer` in tag space `coll` with `tag`.
 * While waiting, read the connection from peer ourselves when nobody else
 * is reading it (see the top of this file). */
static mscclppResult_t waitMsg(struct mscclppBootstrap* bs, int peer, uint8_t coll, int tag,
                               const struct mscclppBsOp* o, struct mscclppBsMsg** out) {
  enum { GOT, LOST, GONE, STOPPED, TIMEOUT } why;
  struct mscclppBsConn* owned = NULL;
  int ownedWatched = 0; /* owned's fd is still in the progress thread's epoll set */
  int goneState = PEER_ALIVE;
  pthread_mutex_lock(&bs->lock);
  for (;;) {
    if (atomic_load(&bs->interrupts) != o->interrupts ||
        (o->cancel != NULL && __atomic_load_n(o->cancel, __ATOMIC_ACQUIRE))) {
      why = STOPPED;
      break;
    }
    if (bs->lostRank >= 0 && !o->survivors) {
      why = LOST;
      break;
    }
    *out = takeLocked(bs, peer, coll, tag);
    if (*out != NULL) {
      why = GOT;
      break;
    }
    struct mscclppBsConn* c = bs->in[peer];
    /* A peer that left may still have messages in flight on its connection. */
    if (bs->peerState[peer] != PEER_ALIVE && (c == NULL || c->eof)) {
      why = GONE;
      goneState = bs->peerState[peer];
      break;
    }
    if (mscclppDeadlinePassed(o->deadline)) {
      why = TIMEOUT;
      break;
    }
    if (owned == NULL && c != NULL && !c->eof && !c->reader && !c->progressReading) {
      /* Take it over and first read what has already arrived: often our
       * message, and then the epoll set is never touched. (Meanwhile the
       * progress thread skips the fd: c->reader.) */
      c->reader = 1;
      owned = c;
      ownedWatched = 1;
      pthread_mutex_unlock(&bs->lock);
      mscclppBsConnRead(bs, owned, 1);
      pthread_mutex_lock(&bs->lock);
      continue;
    }
    if (owned != NULL && !owned->eof) {
      /* We must block: stop the progress thread from waking on this fd. */
      if (ownedWatched) {
        mscclppBsEpollDel(bs, owned->fd);
        ownedWatched = 0;
      }
      int fd = owned->fd; /* only its reader (us) closes it */
      pthread_mutex_unlock(&bs->lock);
      struct pollfd p = {fd, POLLIN, 0};
      if (poll(&p, 1, sliceMs(o->deadline)) > 0) mscclppBsConnRead(bs, owned, 1);
      pthread_mutex_lock(&bs->lock);
      continue;
    }
    /* Someone else reads it (or nobody has connected yet): wait for them. */
    struct timespec ts = monotonicIn(sliceMs(o->deadline));
    pthread_cond_timedwait(&bs->cond, &bs->lock, &ts);
  }
  if (owned != NULL) {
    owned->reader = 0;
    if (!owned->eof && !ownedWatched && mscclppBsEpollAdd(bs, owned->fd, owned) != 0)
      MSCCLPP_WARN(MSCCLPP_LOG_BOOTSTRAP, "%s: cannot watch the connection from rank %d again: %s", bs->where, peer,
                   strerror(errno));
    pthread_cond_broadcast(&bs->cond); /* another thread may wait to read it */
  }
  pthread_mutex_unlock(&bs->lock);
  switch (why) {
    case GOT:
      return mscclppSuccess;
    case LOST:
      return mscclppBsLostError(bs, o->name);
    case STOPPED:
      return opCheck(bs, -1, o);
    case GONE:
      if (goneState == PEER_LOST) /* only with o->survivors: else the loss came first */
        return mscclppErr(mscclppRemoteError, MSCCLPP_LOG_BOOTSTRAP,
                          "%s failed: rank %d was lost before it sent the message this rank waits for", o->name, peer);
      return mscclppErr(mscclppRemoteError, MSCCLPP_LOG_BOOTSTRAP,
                        "%s failed: rank %d has left (destroyed its communicator) without sending the message this "
                        "rank waits for",
                        o->name, peer);
    default:
      if (o->quietTimeout) return mscclppTimeout; /* the caller says what it means */
      return mscclppErr(mscclppTimeout, MSCCLPP_LOG_BOOTSTRAP,
                        "%s timed out after %g s (MSCCLPP_TIMEOUT) waiting for rank %d", o->name, bs->timeout, peer);
  }
}

mscclppResult_t mscclppBsRecvMsg(struct mscclppBootstrap* bs, int peer, uint8_t coll, int tag, void* data, size_t size,
                                 const struct mscclppBsOp* o) {
  size_t got = 0;
  size_t total = 0; /* bytes the sender sent, pieces included */
  for (;;) {
    struct mscclppBsMsg* m = NULL;
    MSCCLPP_RETURN_ON_ERROR(waitMsg(bs, peer, coll, tag, o, &m));
    total += m->size;
    if (got + m->size <= size) {
      if (m->size > 0) memcpy((uint8_t*)data + got, m->data, m->size);
      got += m->size;
    } else {
      got = size + 1; /* mismatch: keep consuming the pieces */
    }
    int more = (m->flags & MSCCLPP_BS_FLAG_MORE) != 0;
    free(m);
    if (!more) break;
  }
  if (got != size)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_BOOTSTRAP,
                      "%s: rank %d sent %zu bytes but the receive expects %zu (the message was consumed)", o->name,
                      peer, total, size);
  return mscclppSuccess;
}

/* ---- operations -------------------------------------------------------------------- */

static mscclppResult_t checkPeer(const struct mscclppBootstrap* bs, int peer, const char* op) {
  if (peer < 0 || peer >= bs->nranks)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_BOOTSTRAP, "%s: peer %d is outside [0, %d)", op, peer,
                      bs->nranks);
  return mscclppSuccess;
}

mscclppResult_t mscclppBootstrapSendTo(struct mscclppBootstrap* bs, int peer, int tag, const void* data, size_t size) {
  char op[64];
  snprintf(op, sizeof(op), "send to rank %d (tag %d, %zu bytes)", peer, tag, size);
  MSCCLPP_RETURN_ON_ERROR(checkPeer(bs, peer, op));
  if (data == NULL && size > 0)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_BOOTSTRAP, "%s: data is NULL", op);
  struct mscclppBsOp o = mscclppBsOpOf(bs, op, mscclppDeadlineIn(bs->timeout));
  return mscclppBsSendMsg(bs, peer, 0, tag, data, size, &o);
}

mscclppResult_t mscclppBootstrapRecvFrom(struct mscclppBootstrap* bs, int peer, int tag, void* data, size_t size) {
  char op[64];
  snprintf(op, sizeof(op), "recv from rank %d (tag %d, %zu bytes)", peer, tag, size);
  MSCCLPP_RETURN_ON_ERROR(checkPeer(bs, peer, op));
  if (data == NULL && size > 0)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_BOOTSTRAP, "%s: data is NULL", op);
  struct mscclppBsOp o = mscclppBsOpOf(bs, op, mscclppDeadlineIn(bs->timeout));
  return mscclppBsRecvMsg(bs, peer, 0, tag, data, size, &o);
}

/* Bruck's allgather: ceil(log2(n)) rounds; in round k (1, 2, 4, ...) a rank
 * sends the blocks it has to rank - k and receives as many from rank + k.
 * Block i of tmp is then rank + i's. */
static mscclppResult_t allGather(struct mscclppBootstrap* bs, void* data, size_t bytesPerRank) {
  int n = bs->nranks, r = bs->rank;
  if (data == NULL && bytesPerRank > 0)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_BOOTSTRAP, "allgather: data is NULL");
  if (bytesPerRank > SIZE_MAX / (size_t)n)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_BOOTSTRAP,
                      "allgather: %zu bytes per rank times %d ranks "
                      "overflows",
                      bytesPerRank, n);
  if (mscclppBsIsLost(bs)) return mscclppBsLostError(bs, "allgather");
  int tag = (int)(bs->collSeq++ & 0x7fffffff);
  if (n == 1 || bytesPerRank == 0) return mscclppSuccess;
  mscclppDeadline deadline = mscclppDeadlineIn(bs->timeout);
  unsigned interrupts = atomic_load(&bs->interrupts); /* as the whole collective began */
  uint8_t* tmp = (uint8_t*)malloc((size_t)n * bytesPerRank);
  if (tmp == NULL)
    return mscclppErr(mscclppSystemError, MSCCLPP_LOG_BOOTSTRAP, "allgather: out of memory for %zu bytes",
                      (size_t)n * bytesPerRank);
  uint8_t* d = (uint8_t*)data;
  memcpy(tmp, d + (size_t)r * bytesPerRank, bytesPerRank);
  int have = 1;
  mscclppResult_t res = mscclppSuccess;
  for (int k = 1; k < n && res == mscclppSuccess; k <<= 1) {
    int cnt = k < n - have ? k : n - have;
    int dst = (r - k + n) % n, src = (r + k) % n;
    char op[96];
    snprintf(op, sizeof(op), "allgather round %d (send to rank %d, recv from rank %d)", k, dst, src);
    struct mscclppBsOp o = mscclppBsOpOf(bs, op, deadline);
    o.interrupts = interrupts;
    res = mscclppBsSendMsg(bs, dst, MSCCLPP_BS_FLAG_COLL, tag, tmp, (size_t)cnt * bytesPerRank, &o);
    if (res == mscclppSuccess)
      res = mscclppBsRecvMsg(bs, src, MSCCLPP_BS_FLAG_COLL, tag, tmp + (size_t)have * bytesPerRank,
                             (size_t)cnt * bytesPerRank, &o);
    have += cnt;
  }
  if (res == mscclppSuccess)
    for (int i = 0; i < n; i++)
      memcpy(d + (size_t)((r + i) % n) * bytesPerRank, tmp + (size_t)i * bytesPerRank, bytesPerRank);
  free(tmp);
  return res;
}

mscclppResult_t mscclppBootstrapAllGatherBytes(struct mscclppBootstrap* bs, void* data, size_t bytesPerRank) {
  uint64_t t0 = mscclppTraceBegin();
  mscclppResult_t res = allGather(bs, data, bytesPerRank);
  if (t0 != 0)
    MSCCLPP_TRACE_EMIT(MSCCLPP_TRACE_BS_ALLGATHER, t0, mscclppTraceNow(), bytesPerRank, MSCCLPP_TRACE_I(bs->nranks),
                       MSCCLPP_TRACE_I(res));
  return res;
}

/* Dissemination barrier: the allgather's pattern with empty messages. */
static mscclppResult_t barrier(struct mscclppBootstrap* bs) {
  int n = bs->nranks, r = bs->rank;
  if (mscclppBsIsLost(bs)) return mscclppBsLostError(bs, "barrier");
  int tag = (int)(bs->collSeq++ & 0x7fffffff);
  mscclppDeadline deadline = mscclppDeadlineIn(bs->timeout);
  unsigned interrupts = atomic_load(&bs->interrupts);
  for (int k = 1; k < n; k <<= 1) {
    int dst = (r - k + n) % n, src = (r + k) % n;
    char op[96];
    snprintf(op, sizeof(op), "barrier round %d (send to rank %d, recv from rank %d)", k, dst, src);
    struct mscclppBsOp o = mscclppBsOpOf(bs, op, deadline);
    o.interrupts = interrupts;
    MSCCLPP_RETURN_ON_ERROR(mscclppBsSendMsg(bs, dst, MSCCLPP_BS_FLAG_COLL, tag, NULL, 0, &o));
    MSCCLPP_RETURN_ON_ERROR(mscclppBsRecvMsg(bs, src, MSCCLPP_BS_FLAG_COLL, tag, NULL, 0, &o));
  }
  return mscclppSuccess;
}

mscclppResult_t mscclppBootstrapBarrierWait(struct mscclppBootstrap* bs) {
  uint64_t t0 = mscclppTraceBegin();
  mscclppResult_t res = barrier(bs);
  if (t0 != 0)
    MSCCLPP_TRACE_EMIT(MSCCLPP_TRACE_BS_BARRIER, t0, mscclppTraceNow(), MSCCLPP_TRACE_I(bs->nranks),
                       MSCCLPP_TRACE_I(res));
  return res;
}

/* Clock offset to rank 0, NTP's way: rank r sends its time t0, rank 0
 * answers with its own t1, r reads t2 on arrival; rank 0's clock then read
 * t1 at about r's (t0 + t2) / 2, to within half the round trip, and the
 * round with the shortest trip is kept. Rank 0 serves the ranks one after
 * the other, so no rank's rounds queue behind another's. */
mscclppResult_t mscclppBootstrapClockSync(struct mscclppBootstrap* bs, int rounds, int64_t* offsetNs, int64_t* rttNs) {
  uint64_t start = mscclppTraceBegin();
  int n = bs->nranks, r = bs->rank;
  if (mscclppBsIsLost(bs)) return mscclppBsLostError(bs, "clock sync");
  int tag = (int)(bs->collSeq++ & 0x7fffffff);
  struct mscclppBsOp o = mscclppBsOpOf(bs, "clock sync", mscclppDeadlineIn(bs->timeout));
  mscclppResult_t res = mscclppSuccess;
  int64_t best = INT64_MAX, offset = 0;
  if (r == 0) {
    for (int peer = 1; peer < n && res == mscclppSuccess; peer++)
      for (int i = 0; i < rounds && res == mscclppSuccess; i++) {
        uint64_t t;
        res = mscclppBsRecvMsg(bs, peer, MSCCLPP_BS_FLAG_COLL, tag, &t, sizeof(t), &o);
        t = mscclppTimeNs();
        if (res == mscclppSuccess)
          res = mscclppBsSendMsg(bs, peer, MSCCLPP_BS_FLAG_COLL, tag, &t, sizeof(t), &o);
      }
    best = 0;
  } else {
    for (int i = 0; i < rounds && res == mscclppSuccess; i++) {
      uint64_t t0 = mscclppTimeNs(), t1 = 0;
      res = mscclppBsSendMsg(bs, 0, MSCCLPP_BS_FLAG_COLL, tag, &t0, sizeof(t0), &o);
      if (res == mscclppSuccess)
        res = mscclppBsRecvMsg(bs, 0, MSCCLPP_BS_FLAG_COLL, tag, &t1, sizeof(t1), &o);
      uint64_t t2 = mscclppTimeNs();
      if (res == mscclppSuccess && (int64_t)(t2 - t0) < best) {
        best = (int64_t)(t2 - t0);
        offset = (int64_t)(t1 - t0) - best / 2;
      }
    }
  }
  if (start != 0)
    MSCCLPP_TRACE_EMIT(MSCCLPP_TRACE_BS_CLOCK, start, mscclppTraceNow(), MSCCLPP_TRACE_I(offset),
                       MSCCLPP_TRACE_I(best), (uint64_t)rounds, MSCCLPP_TRACE_I(res));
  if (res != mscclppSuccess) return res;
  *offsetNs = offset;
  *rttNs = best;
  return mscclppSuccess;
}

/* Rank 0 gathers every rank's bytes within waitSec, then sends each rank
 * the table and the ranks that answered; the others send theirs and wait
 * for that (MSCCLPP_TIMEOUT). A rank that does not answer in time is only
 * marked absent: naming it is the point. The verdict goes to the absent
 * ones too, so that one that comes late finds it and fails the same way. */
mscclppResult_t mscclppBootstrapGatherCheck(struct mscclppBootstrap* bs, const void* mine, size_t bytes, double waitSec,
                                            void* table, uint8_t* present) {
  int n = bs->nranks, r = bs->rank;
  if (mscclppBsIsLost(bs)) return mscclppBsLostError(bs, "call check");
  /* Its own counter and tags, INT32_MIN + 0 .. 2^30 - 1 (the collectives'
   * are >= 0, the shrink's -1): only the ranks that reach a call check
   * count it, and a revoke can stop a check that rank 0 never began. On one
   * shared counter those ranks' later bootstrap collectives (the barrier
   * after a revoke, say) would then use other tags than rank 0's and read
   * its stale fingerprints as their messages. */
  int tag = (int)(0x80000000u | (bs->checkSeq++ & 0x3fffffffu));
  const size_t verdict = (size_t)n * bytes + (size_t)n;
  uint8_t* buf = (uint8_t*)malloc(verdict);
  if (buf == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_BOOTSTRAP, "call check: out of memory");
  mscclppResult_t res = mscclppSuccess;
  if (r == 0) {
    struct mscclppBsOp gather = mscclppBsOpOf(bs, "call check", mscclppDeadlineIn(waitSec));
    gather.quietTimeout = 1; /* a rank that does not answer in time is absent, not an error */
    memcpy(buf, mine, bytes);
    uint8_t* got = buf + (size_t)n * bytes;
    got[0] = 1;
    for (int p = 1; p < n && res == mscclppSuccess; p++) {
      res = mscclppBsRecvMsg(bs, p, MSCCLPP_BS_FLAG_COLL, tag, buf + (size_t)p * bytes, bytes, &gather);
      got[p] = res == mscclppSuccess;
      if (res == mscclppTimeout) res = mscclppSuccess;
    }
    struct mscclppBsOp send = mscclppBsOpOf(bs, "call check", mscclppDeadlineIn(bs->timeout));
    send.interrupts = gather.interrupts;
    for (int p = 1; p < n && res == mscclppSuccess; p++) {
      mscclppResult_t s = mscclppBsSendMsg(bs, p, MSCCLPP_BS_FLAG_COLL, tag, buf, verdict, &send);
      if (s != mscclppSuccess && got[p]) res = s; /* an absent rank may be gone */
    }
  } else {
    mscclppDeadline deadline = mscclppDeadlineIn(bs->timeout);
    struct mscclppBsOp send = mscclppBsOpOf(bs, "call check", deadline);
    struct mscclppBsOp verdictOp = mscclppBsOpOf(bs, "call check (rank 0's verdict)", deadline);
    verdictOp.interrupts = send.interrupts;
    res = mscclppBsSendMsg(bs, 0, MSCCLPP_BS_FLAG_COLL, tag, mine, bytes, &send);
    if (res == mscclppSuccess) res = mscclppBsRecvMsg(bs, 0, MSCCLPP_BS_FLAG_COLL, tag, buf, verdict, &verdictOp);
  }
  if (res == mscclppSuccess) {
    memcpy(table, buf, (size_t)n * bytes);
    memcpy(present, buf + (size_t)n * bytes, (size_t)n);
  }
  free(buf);
  return res;
}

mscclppResult_t mscclppBootstrapSetHandler(struct mscclppBootstrap* bs, int tag, mscclppBootstrapHandler fn,
                                           void* arg) {
  pthread_mutex_lock(&bs->lock);
  int i = 0;
  while (i < bs->nhandlers && bs->handlers[i].tag != tag) i++;
  mscclppResult_t res = mscclppSuccess;
  if (fn == NULL) {
    if (i < bs->nhandlers) bs->handlers[i] = bs->handlers[--bs->nhandlers];
    /* a call that began before the removal may still use arg */
    while (bs->handlerCalls > 0) pthread_cond_wait(&bs->cond, &bs->lock);
  } else if (i < bs->nhandlers) {
    res = mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_BOOTSTRAP, "%s: tag %d already has a handler", bs->where, tag);
  } else if (bs->nhandlers == MAX_HANDLERS) {
    res = mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_BOOTSTRAP, "%s: more than %d message handlers", bs->where,
                     MAX_HANDLERS);
  } else {
    bs->handlers[bs->nhandlers].tag = tag;
    bs->handlers[bs->nhandlers].fn = fn;
    bs->handlers[bs->nhandlers].arg = arg;
    bs->nhandlers++;
    /* messages that came before the handler: it gets them now */
    struct mscclppBsMsg* early = NULL;
    struct mscclppBsMsg** tail = &early;
    for (int peer = 0; peer < bs->nranks; peer++) {
      struct mscclppBsQueue* q = &bs->queues[peer];
      struct mscclppBsMsg* prev = NULL;
      for (struct mscclppBsMsg* m = q->head; m != NULL;) {
        struct mscclppBsMsg* next = m->next;
        if (m->flags == 0 && m->tag == tag) {
          if (prev)
            prev->next = next;
          else
            q->head = next;
          if (q->tail == m) q->tail = prev;
          m->next = NULL;
          m->tag = peer; /* the list keeps the sender here; the tag is known */
          *tail = m;
          tail = &m->next;
        } else {
          prev = m;
        }
        m = next;
      }
    }
    if (early != NULL) mscclppBsHandOverLocked(bs, fn, arg, early);
  }
  pthread_mutex_unlock(&bs->lock);
  return res;
}
