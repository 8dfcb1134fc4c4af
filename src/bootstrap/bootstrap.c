/* SPDX-License-Identifier: MIT */
/* A rank's bootstrap: create (listener, progress thread, rendezvous through
 * the root, the monitor connection to rank 0, a first barrier), destroy
 * (goodbyes), and queries. See bootstrap.h for the design and
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
#include "core/trace.h"
#include "core/util.h"

static int addrEqual(const struct mscclppBsAddr* a, const struct mscclppBsAddr* b) {
  return a->family == b->family && a->port == b->port && a->scopeId == b->scopeId &&
         memcmp(a->addr, b->addr, sizeof(a->addr)) == 0;
}

/* ---- rendezvous ------------------------------------------------------------------- */

static mscclppResult_t rendezvous(struct mscclppBootstrap* bs, const struct mscclppBootstrapJob* job,
                                  const struct mscclppBsRankInfo* me, mscclppDeadline deadline) {
  int fd = -1;
  /* quiet: the failure is decided and logged here, once, with the socket's
   * reason and what the address was */
  mscclppResult_t res = mscclppSocketConnect(&job->root, deadline, 1, 1, &fd);
  if (res != mscclppSuccess) {
    char why[512];
    snprintf(why, sizeof(why), "%s", mscclppGetLastError());
    return mscclppErr(res, MSCCLPP_LOG_BOOTSTRAP, "rank %d cannot reach the root %s (from %s): %s", bs->rank,
                      job->rootText, job->source, why);
  }
  char who[MSCCLPP_SOCKET_HOST_MAX + 32];
  snprintf(who, sizeof(who), "the root %s", job->rootText);
  struct mscclppBsHello hello;
  memset(&hello, 0, sizeof(hello));
  hello.purpose = MSCCLPP_BS_PURPOSE_JOIN;
  hello.rank = bs->rank;
  hello.nranks = bs->nranks;
  hello.info = *me;
  int32_t status = MSCCLPP_BS_ACK_OK;
  res = mscclppBootstrapHandshakeClient(
      fd, bs->secret, &hello, mscclppDeadlineMin(deadline, mscclppDeadlineIn(bs->handshakeTimeout)), who, &status);
  if (res != mscclppSuccess) goto fail_close_fd;
  if (status != MSCCLPP_BS_ACK_OK) {
    res = mscclppErr(mscclppRemoteError, MSCCLPP_LOG_BOOTSTRAP, "%s refused rank %d: %s", who, bs->rank,
                     mscclppBootstrapAckText(status));
    goto fail_close_fd;
  }
  /* The table comes once every rank has joined. A join that can be
   * cancelled (a communicator aborted while it joins) waits for it in
   * slices, so that it ends at once rather than at the deadline. */
  while (job->cancel != NULL && !mscclppDeadlinePassed(deadline)) {
    if (__atomic_load_n(job->cancel, __ATOMIC_ACQUIRE)) {
      res = mscclppErr(mscclppAborted, MSCCLPP_LOG_BOOTSTRAP, "rank %d: joining through %s was cancelled", bs->rank,
                       who);
      goto fail_close_fd;
    }
    struct pollfd p = {fd, POLLIN, 0};
    int rc = poll(&p, 1, 50);
    if (rc > 0 || (rc < 0 && errno != EINTR)) break; /* what came (or the error) is read below */
  }
  uint8_t hdr[MSCCLPP_BS_HEADER_BYTES];
  int eof = 0;
  res = mscclppSocketReadAll(fd, hdr, sizeof(hdr), deadline, &eof);
  if (res != mscclppSuccess) {
    if (res == mscclppTimeout)
      res = mscclppErr(mscclppTimeout, MSCCLPP_LOG_BOOTSTRAP,
                       "rank %d: no rank table from %s within %g s (MSCCLPP_TIMEOUT): not all %d ranks joined",
                       bs->rank, who, bs->timeout, bs->nranks);
    else
      res = mscclppErr(mscclppRemoteError, MSCCLPP_LOG_BOOTSTRAP,
                       "rank %d: %s closed the connection before sending the rank table", bs->rank, who);
    goto fail_close_fd;
  }
  struct mscclppBsHeader h;
  mscclppBsWhy why;
  res = mscclppBootstrapParseHeader(hdr, sizeof(hdr), &h, &why);
  if (res == mscclppSuccess && h.type != MSCCLPP_BS_MSG_TABLE && h.type != MSCCLPP_BS_MSG_ERROR) {
    snprintf(why.text, sizeof(why.text), "message type %u instead of a rank table", h.type);
    res = mscclppRemoteError;
  }
  if (res != mscclppSuccess) {
    res = mscclppErr(mscclppRemoteError, MSCCLPP_LOG_BOOTSTRAP, "rank %d: %s sent an invalid reply: %s", bs->rank, who,
                     why.text);
    goto fail_close_fd;
  }
  if (h.type == MSCCLPP_BS_MSG_ERROR) {
    uint8_t body[MSCCLPP_BS_MAX_ERROR_TEXT];
    char text[MSCCLPP_BS_MAX_ERROR_TEXT + 1];
    if (mscclppSocketReadAll(fd, body, h.size, deadline, NULL) != mscclppSuccess ||
        mscclppBootstrapParseErrorText(body, h.size, text, sizeof(text), NULL) != mscclppSuccess)
      snprintf(text, sizeof(text), "(the reason did not arrive)");
    res = mscclppErr(mscclppRemoteError, MSCCLPP_LOG_BOOTSTRAP, "rank %d: %s aborted the rendezvous: %s", bs->rank, who,
                     text);
    goto fail_close_fd;
  }
  if (h.size != mscclppBootstrapTableBytes(bs->nranks)) {
    res = mscclppErr(mscclppRemoteError, MSCCLPP_LOG_BOOTSTRAP,
                     "rank %d: the rank table from %s has %llu bytes, expected %zu for %d ranks", bs->rank, who,
                     (unsigned long long)h.size, mscclppBootstrapTableBytes(bs->nranks), bs->nranks);
    goto fail_close_fd;
  }
  uint8_t* body = (uint8_t*)malloc(h.size);
  if (body == NULL) {
    res = mscclppErr(mscclppSystemError, MSCCLPP_LOG_BOOTSTRAP, "out of memory for the rank table");
    goto fail_close_fd;
  }
  res = mscclppSocketReadAll(fd, body, h.size, deadline, NULL);
  uint64_t session = 0;
  if (res != mscclppSuccess) {
    res = mscclppErr(mscclppRemoteError, MSCCLPP_LOG_BOOTSTRAP, "rank %d: the rank table from %s was cut short",
                     bs->rank, who);
  } else if (mscclppBootstrapParseTable(body, h.size, bs->nranks, &session, bs->peers, &why) != mscclppSuccess) {
    res = mscclppErr(mscclppRemoteError, MSCCLPP_LOG_BOOTSTRAP, "rank %d: invalid rank table from %s: %s", bs->rank,
                     who, why.text);
  } else if (!addrEqual(&bs->peers[bs->rank].addr, &me->addr) || bs->peers[bs->rank].hostHash != me->hostHash) {
    res = mscclppErr(mscclppRemoteError, MSCCLPP_LOG_BOOTSTRAP,
                     "rank %d: the rank table from %s does not list this rank as it joined", bs->rank, who);
  }
  free(body);
  if (res != mscclppSuccess) goto fail_close_fd;
  close(fd);
  pthread_mutex_lock(&bs->lock);
  bs->session = session;
  bs->sessionKnown = 1;
  pthread_mutex_unlock(&bs->lock);
  mscclppBsWakeProgress(bs); /* peers that connected early wait to be admitted */
  return mscclppSuccess;

fail_close_fd:
  close(fd);
  return res;
}

/* ---- create / destroy ---------------------------------------------------------------- */

static mscclppResult_t chooseListenAddress(const struct mscclppBootstrapJob* job, const struct mscclppParams* params,
                                           union mscclppSocketAddr* addr) {
  int family;
  MSCCLPP_RETURN_ON_ERROR(mscclppSocketParseFamily(params->socketFamily, &family));
  if (params->socketIfname[0] != '\0') {
    /* The user chose interfaces: use the first one, in the root's family
     * unless MSCCLPP_SOCKET_FAMILY says otherwise. */
    int fam = family != AF_UNSPEC ? family : job->root.sa.sa_family;
    return mscclppSocketFindInterface(params->socketIfname, fam, addr, NULL, 0);
  }
  /* Otherwise: the address this host would use to reach the root. */
  return mscclppSocketLocalAddrToward(&job->root, addr);
}

mscclppResult_t mscclppBsAlloc(int rank, int nranks, const struct mscclppParams* params,
                               const uint8_t secret[MSCCLPP_BS_SECRET_BYTES], struct mscclppBootstrap** out) {
  int n = nranks;
  struct mscclppBootstrap* bs = (struct mscclppBootstrap*)calloc(1, sizeof(*bs));
  if (bs == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_BOOTSTRAP, "out of memory for the bootstrap");
  bs->rank = rank;
  bs->nranks = n;
  bs->timeout = params->timeout;
  bs->handshakeTimeout = params->bootstrapHandshakeTimeout;
  if (bs->handshakeTimeout > bs->timeout) bs->handshakeTimeout = bs->timeout;
  memcpy(bs->secret, secret, sizeof(bs->secret));
  snprintf(bs->where, sizeof(bs->where), "rank %d", rank);
  bs->listenFd = -1;
  bs->wakeFd = -1;
  bs->epfd = -1;
  bs->wakeKind = EV_WAKE;
  bs->listenKind = EV_LISTEN;
  bs->lostRank = -1;
  bs->maxPiece = MSCCLPP_BS_MAX_MSG_BYTES;
  atomic_init(&bs->stop, 0);
  atomic_init(&bs->interrupts, 0);
  pthread_mutex_init(&bs->lock, NULL);
  pthread_mutex_init(&bs->noticeLock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&bs->cond, &ca);
  pthread_condattr_destroy(&ca);
  bs->peers = (struct mscclppBsRankInfo*)calloc((size_t)n, sizeof(*bs->peers));
  bs->in = (struct mscclppBsConn**)calloc((size_t)n, sizeof(*bs->in));
  bs->out = (struct mscclppBsConn**)calloc((size_t)n, sizeof(*bs->out));
  bs->queues = (struct mscclppBsQueue*)calloc((size_t)n, sizeof(*bs->queues));
  bs->peerState = (int*)calloc((size_t)n, sizeof(*bs->peerState));
  bs->sendLocks = (pthread_mutex_t*)calloc((size_t)n, sizeof(*bs->sendLocks));
  if (!bs->peers || !bs->in || !bs->out || !bs->queues || !bs->peerState || !bs->sendLocks) {
    mscclppBootstrapDestroy(bs);
    return mscclppErr(mscclppSystemError, MSCCLPP_LOG_BOOTSTRAP, "out of memory for %d ranks", n);
  }
  for (int i = 0; i < n; i++) pthread_mutex_init(&bs->sendLocks[i], NULL);
  *out = bs;
  return mscclppSuccess;
}

mscclppResult_t mscclppBsStart(struct mscclppBootstrap* bs, const union mscclppSocketAddr* addr) {
  bs->listenAddr = *addr;
  MSCCLPP_RETURN_ON_ERROR(mscclppSocketListen(&bs->listenAddr, 0, &bs->listenFd));
  bs->wakeFd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  bs->epfd = epoll_create1(EPOLL_CLOEXEC);
  if (bs->wakeFd < 0 || bs->epfd < 0 || mscclppBsEpollAdd(bs, bs->wakeFd, &bs->wakeKind) != 0 ||
      mscclppBsEpollAdd(bs, bs->listenFd, &bs->listenKind) != 0)
    return mscclppErr(mscclppSystemError, MSCCLPP_LOG_BOOTSTRAP, "eventfd/epoll setup failed: %s", strerror(errno));
  int rc = pthread_create(&bs->progress, NULL, mscclppBsProgressMain, bs);
  if (rc != 0)
    return mscclppErr(mscclppSystemError, MSCCLPP_LOG_BOOTSTRAP, "cannot start the bootstrap thread: %s", strerror(rc));
  bs->progressStarted = 1;
  return mscclppSuccess;
}

mscclppResult_t mscclppBsFinishJoin(struct mscclppBootstrap* bs, mscclppDeadline deadline, int envLocalRank) {
  uint64_t mine = bs->peers[bs->rank].hostHash;
  bs->localRank = 0;
  bs->localNranks = 0;
  for (int i = 0; i < bs->nranks; i++) {
    if (bs->peers[i].hostHash != mine) continue;
    if (i < bs->rank) bs->localRank++;
    bs->localNranks++;
  }
  if (envLocalRank >= 0 && envLocalRank != bs->localRank)
    MSCCLPP_INFO(MSCCLPP_LOG_BOOTSTRAP,
                 "rank %d: the launcher says local rank %d, the host identities say %d of %d (MSCCLPP_HOSTID "
                 "overrides the identity)",
                 bs->rank, envLocalRank, bs->localRank, bs->localNranks);
  /* The monitor: every rank keeps a connection to rank 0. */
  if (bs->rank != 0) {
    pthread_mutex_lock(&bs->sendLocks[0]);
    struct mscclppBsConn* c;
    struct mscclppBsOp o = mscclppBsOpOf(bs, "connecting to rank 0", deadline);
    mscclppResult_t res = mscclppBsConnectPeer(bs, 0, &o, &c);
    pthread_mutex_unlock(&bs->sendLocks[0]);
    MSCCLPP_RETURN_ON_ERROR(res);
  }
  /* Everyone is up and connected to rank 0 before anyone returns. */
  MSCCLPP_RETURN_ON_ERROR(mscclppBootstrapBarrierWait(bs));
  MSCCLPP_INFO(MSCCLPP_LOG_BOOTSTRAP, "rank %d of %d: bootstrap ready (local rank %d of %d)", bs->rank, bs->nranks,
               bs->localRank, bs->localNranks);
  return mscclppSuccess;
}

static mscclppResult_t create(const struct mscclppBootstrapJob* job, const struct mscclppParams* params,
                              struct mscclppBootstrap** out) {
  if (job == NULL || params == NULL || out == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_BOOTSTRAP, "mscclppBootstrapCreate: NULL argument");
  if (job->nranks <= 0 || job->nranks > MSCCLPP_BS_MAX_RANKS || job->rank < 0 || job->rank >= job->nranks)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_BOOTSTRAP, "rank %d of nranks %d is out of range", job->rank,
                      job->nranks);
  if (!(params->bootstrapHandshakeTimeout > 0))
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_BOOTSTRAP,
                      "MSCCLPP_BOOTSTRAP_HANDSHAKE_TIMEOUT=%g must be > 0 seconds", params->bootstrapHandshakeTimeout);
  mscclppDeadline deadline = mscclppDeadlineIn(params->timeout);
  struct mscclppBootstrap* bs = NULL;
  MSCCLPP_RETURN_ON_ERROR(mscclppBsAlloc(job->rank, job->nranks, params, job->secret, &bs));
  struct mscclppBootstrapRoot* root = NULL;
  struct mscclppBsRankInfo me;
  memset(&me, 0, sizeof(me));
  me.rank = job->rank;
  me.pid = (uint32_t)getpid();
  char hostId[MSCCLPP_PARAM_STR_MAX + 96];
  mscclppBootstrapHostIdentity(params, hostId, sizeof(hostId), &me.hostHash);
  union mscclppSocketAddr listenAddr;
  mscclppResult_t res = chooseListenAddress(job, params, &listenAddr);
  if (res == mscclppSuccess) res = mscclppBsStart(bs, &listenAddr);
  if (res != mscclppSuccess) goto fail_destroy;
  mscclppSocketAddrToWire(&bs->listenAddr, &me.addr);
  {
    char listenText[MSCCLPP_SOCKET_ADDR_TEXT];
    mscclppSocketAddrToText(&bs->listenAddr, listenText, sizeof(listenText));
    MSCCLPP_INFO(MSCCLPP_LOG_BOOTSTRAP, "rank %d of %d: joining through %s (%s); listening on %s; host %s", job->rank,
                 job->nranks, job->rootText, job->source, listenText, hostId);
  }

  if (job->startRoot) {
    union mscclppSocketAddr bind = job->rootBind;
    res = mscclppBootstrapRootStart(params, &bind, job->secret, 0, &root);
    if (res != mscclppSuccess) goto fail_destroy;
  }
  uint64_t t0 = mscclppTraceBegin();
  res = rendezvous(bs, job, &me, deadline);
  if (t0 != 0)
    MSCCLPP_TRACE_EMIT(MSCCLPP_TRACE_BS_RENDEZVOUS, t0, mscclppTraceNow(), MSCCLPP_TRACE_I(job->rank),
                       MSCCLPP_TRACE_I(job->nranks), MSCCLPP_TRACE_I(res));
  mscclppBootstrapRootStop(root); /* done: it has sent every table, or it is cancelled */
  root = NULL;
  if (res == mscclppSuccess) res = mscclppBsFinishJoin(bs, deadline, job->envLocalRank);
  if (res != mscclppSuccess) goto fail_destroy;
  *out = bs;
  return mscclppSuccess;

fail_destroy:
  mscclppBootstrapRootStop(root);
  bs->creationFailed = 1;
  mscclppBootstrapDestroy(bs);
  return res;
}

mscclppResult_t mscclppBootstrapCreate(const struct mscclppBootstrapJob* job, const struct mscclppParams* params,
                                       struct mscclppBootstrap** out) {
  uint64_t t0 = mscclppTraceBegin();
  mscclppResult_t res = create(job, params, out);
  if (t0 != 0)
    MSCCLPP_TRACE_EMIT(MSCCLPP_TRACE_BS_CREATE, t0, mscclppTraceNow(), MSCCLPP_TRACE_I(job != NULL ? job->rank : -1),
                       MSCCLPP_TRACE_I(job != NULL ? job->nranks : 0), MSCCLPP_TRACE_I(res));
  return res;
}

uint64_t mscclppBootstrapJobHash(const struct mscclppBootstrap* bs) {
  uint64_t session = bs->session;
  return mscclppSipHash(bs->secret, &session, sizeof(session));
}

void mscclppBootstrapDestroy(struct mscclppBootstrap* bs) {
  if (bs == NULL) return;
  if (bs->progressStarted) {
    atomic_store(&bs->stop, 1);
    mscclppBsWakeProgress(bs);
    pthread_join(bs->progress, NULL);
    bs->progressStarted = 0;
  }
  /* Goodbye on every live connection, then a half close so it reaches the
   * peer before the close; unread input is drained so that the close does
   * not turn into a reset. */
  /* A rank that leaves after a loss repeats the loss first, so that a peer
   * waiting for it learns the cause, not only that it left. */
  /* A rank whose creation failed reports itself lost: its peers still in
   * the creation's barrier fail now rather than at the timeout (a rank
   * that finished creating and left at once is only "left", and its
   * messages are still delivered). */
  uint8_t bye[3 * MSCCLPP_BS_HEADER_BYTES + 2 * MSCCLPP_BS_PEER_STATUS_BYTES];
  size_t byeLen = 0;
  int notices[2] = {bs->lostRank, bs->creationFailed ? bs->rank : -1};
  for (int k = 0; k < 2; k++) {
    if (notices[k] < 0) continue;
    struct mscclppBsHeader ps = {MSCCLPP_BS_MSG_PEER_STATUS, 0, 0, MSCCLPP_BS_PEER_STATUS_BYTES};
    mscclppBootstrapEncodeHeader(&ps, bye + byeLen);
    mscclppBootstrapEncodePeerStatus(notices[k], MSCCLPP_BS_PEER_LOST, bye + byeLen + MSCCLPP_BS_HEADER_BYTES);
    byeLen += MSCCLPP_BS_HEADER_BYTES + MSCCLPP_BS_PEER_STATUS_BYTES;
  }
  struct mscclppBsHeader h = {MSCCLPP_BS_MSG_GOODBYE, 0, 0, 0};
  mscclppBootstrapEncodeHeader(&h, bye + byeLen);
  byeLen += MSCCLPP_BS_HEADER_BYTES;
  mscclppDeadline d = mscclppDeadlineIn(GOODBYE_SECONDS);
  for (int i = 0; i < bs->nconns; i++) {
    struct mscclppBsConn* c = bs->conns[i];
    if (c->fd >= 0) {
      if (!c->eof && c->peer != bs->lostRank) {
        (void)mscclppSocketWriteAll(c->fd, bye, byeLen, d);
        shutdown(c->fd, SHUT_WR);
      }
      uint8_t sink[4096];
      for (int k = 0; k < 64 && recv(c->fd, sink, sizeof(sink), MSG_DONTWAIT) > 0; k++) {
      }
      close(c->fd);
    }
    free(c->msg);
    free(c);
  }
  free(bs->conns);
  for (int i = 0; i < bs->npending; i++) {
    close(bs->pending[i]->p.fd);
    free(bs->pending[i]);
  }
  free(bs->pending);
  if (bs->listenFd >= 0) close(bs->listenFd);
  if (bs->wakeFd >= 0) close(bs->wakeFd);
  if (bs->epfd >= 0) close(bs->epfd);
  if (bs->queues != NULL) {
    for (int i = 0; i < bs->nranks; i++) {
      struct mscclppBsMsg* m = bs->queues[i].head;
      while (m != NULL) {
        struct mscclppBsMsg* next = m->next;
        free(m);
        m = next;
      }
    }
  }
  if (bs->sendLocks != NULL)
    for (int i = 0; i < bs->nranks; i++) pthread_mutex_destroy(&bs->sendLocks[i]);
  free(bs->sendLocks);
  free(bs->queues);
  free(bs->peerState);
  free(bs->in);
  free(bs->out);
  free(bs->peers);
  pthread_cond_destroy(&bs->cond);
  pthread_mutex_destroy(&bs->noticeLock);
  pthread_mutex_destroy(&bs->lock);
  free(bs);
}

/* ---- operations -------------------------------------------------------------------- */


void mscclppBootstrapIdentity(const struct mscclppBootstrap* bs, int* rank, int* nranks) {
  *rank = bs->rank;
  *nranks = bs->nranks;
}

void mscclppBootstrapLocalInfo(const struct mscclppBootstrap* bs, int* localRank, int* localNranks) {
  if (localRank) *localRank = bs->localRank;
  if (localNranks) *localNranks = bs->localNranks;
}

uint64_t mscclppBootstrapHostHashOf(const struct mscclppBootstrap* bs, int rank) {
  return rank >= 0 && rank < bs->nranks ? bs->peers[rank].hostHash : 0;
}

void mscclppBootstrapInterrupt(struct mscclppBootstrap* bs, const char* why) {
  pthread_mutex_lock(&bs->lock);
  snprintf(bs->interruptWhy, sizeof(bs->interruptWhy), "%s", why);
  atomic_fetch_add(&bs->interrupts, 1);
  pthread_cond_broadcast(&bs->cond); /* waiters on the condition look again at once */
  pthread_mutex_unlock(&bs->lock);
}

mscclppResult_t mscclppBootstrapGetLostStatus(struct mscclppBootstrap* bs) {
  if (!mscclppBsIsLost(bs)) return mscclppSuccess;
  return mscclppBsLostError(bs, "communicator");
}

void mscclppBootstrapGetSecret(const struct mscclppBootstrap* bs, uint8_t secret[MSCCLPP_BS_SECRET_BYTES]) {
  memcpy(secret, bs->secret, MSCCLPP_BS_SECRET_BYTES);
}

#ifdef MSCCLPP_TEST_HOOKS
void mscclppBootstrapTestView(struct mscclppBootstrap* bs, union mscclppSocketAddr* listenAddr,
                              uint8_t secret[MSCCLPP_BS_SECRET_BYTES], uint64_t* session) {
  if (listenAddr) *listenAddr = bs->listenAddr;
  if (secret) memcpy(secret, bs->secret, MSCCLPP_BS_SECRET_BYTES);
  if (session) {
    pthread_mutex_lock(&bs->lock);
    *session = bs->session;
    pthread_mutex_unlock(&bs->lock);
  }
}

void mscclppBootstrapSetMaxPieceForTest(struct mscclppBootstrap* bs, size_t bytes) {
  bs->maxPiece = bytes > 0 ? bytes : 1;
}
#endif
