/* SPDX-License-Identifier: MIT */
/* The operation engine: posting, per-connection queues, the completion
 * queue, progress and waits. See engine.h. */
#include "transport/net/engine.h"

#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "core/trace.h"
#include "core/util.h"
#include "transport/net/ofi_loader.h"

_Static_assert(sizeof(struct ofi_context2) <= 64, "fi_context2 fits the op's context bytes");

#define NOT_YET 1 /* postLocked: the op's prepare hook says wait */

pthread_mutex_t* mscclppNetLock(struct mscclppNet* net) { return &net->lock; }

static const char* errText(int rc) { return mscclppOfi()->strerror(rc < 0 ? -rc : rc); }

void mscclppNetSetRemoteHandler(struct mscclppNet* net, uint32_t tag, mscclppNetRemoteFn fn) {
  pthread_mutex_lock(&net->lock);
  if (tag < MSCCLPP_NET_CQ_TAGS) net->remote[tag] = fn;
  pthread_mutex_unlock(&net->lock);
}

/* ---- connections ---------------------------------------------------------------- */

mscclppResult_t mscclppNetConnAdd(struct mscclppNet* net, struct mscclppNetConn* nc) {
  pthread_mutex_lock(&net->lock);
  uint32_t id = 0;
  while (id < net->connEnd && net->conns[id] != NULL) id++;
  if (id == MSCCLPP_NET_MAX_CONNS) {
    pthread_mutex_unlock(&net->lock);
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_NET, "a rank has at most %d network connections",
                      MSCCLPP_NET_MAX_CONNS);
  }
  net->conns[id] = nc;
  if (id == net->connEnd) net->connEnd++;
  net->nConns++;
  nc->id = id;
  nc->net = net;
  pthread_mutex_unlock(&net->lock);
  return mscclppSuccess;
}

void mscclppNetConnPublish(struct mscclppNet* net, struct mscclppNetConn* nc) {
  pthread_mutex_lock(&net->lock);
  nc->ready = 1;
  pthread_mutex_unlock(&net->lock);
}

void mscclppNetConnRemove(struct mscclppNet* net, struct mscclppNetConn* nc) {
  pthread_mutex_lock(&net->lock);
  /* ops still queued are dropped (close waited, or gave up) */
  while (nc->qHead) {
    struct mscclppNetOp* o = nc->qHead;
    nc->qHead = o->next;
    o->next = net->freeOps;
    net->freeOps = o;
  }
  nc->qTail = NULL;
  int inFlight = nc->completed != nc->submitted || nc->sideInFlight != 0;
  nc->removed = 1;
  net->conns[nc->id] = NULL;
  while (net->connEnd > 0 && net->conns[net->connEnd - 1] == NULL) net->connEnd--;
  net->nConns--;
  if (inFlight) {
    nc->zombieNext = net->zombies;
    net->zombies = nc;
  }
  pthread_mutex_unlock(&net->lock);
  if (!inFlight) nc->hooks->destroy(nc);
}


void mscclppNetEngineRelease(struct mscclppNet* net) {
  while (net->zombies) {
    struct mscclppNetConn* z = net->zombies;
    net->zombies = z->zombieNext;
    z->hooks->destroy(z);
  }
  while (net->freeOps) {
    struct mscclppNetOp* o = net->freeOps;
    net->freeOps = o->next;
    free(o);
  }
}

/* ---- operations ------------------------------------------------------------------ */

struct mscclppNetOp* mscclppNetOpGet(struct mscclppNet* net) {
  pthread_mutex_lock(&net->lock);
  struct mscclppNetOp* o = mscclppNetOpGetLocked(net);
  pthread_mutex_unlock(&net->lock);
  return o;
}

struct mscclppNetOp* mscclppNetOpGetLocked(struct mscclppNet* net) {
  struct mscclppNetOp* o = net->freeOps;
  if (o) net->freeOps = o->next;
  if (o == NULL) o = malloc(sizeof(*o));
  if (o == NULL) {
    mscclppErr(mscclppSystemError, MSCCLPP_LOG_NET, "cannot allocate a network operation");
    return NULL;
  }
  memset(o, 0, offsetof(struct mscclppNetOp, data));
  return o;
}

void mscclppNetOpInject(struct mscclppNetOp* o, const void* bytes, size_t len, uint64_t raddr, uint64_t rkey) {
  memcpy(o->data, bytes, len);
  o->flags |= MSCCLPP_NET_OP_INJECT;
  o->nIov = 1;
  o->iov[0].buf = o->data;
  o->iov[0].desc = NULL;
  o->iov[0].len = len;
  o->nRma = 1;
  o->rma[0].addr = raddr;
  o->rma[0].key = rkey;
  o->rma[0].len = len;
}

static void opFreeLocked(struct mscclppNet* net, struct mscclppNetOp* o) {
  o->next = net->freeOps;
  net->freeOps = o;
}

static size_t opBytes(const struct mscclppNetOp* o) {
  size_t n = 0;
  for (int i = 0; i < o->nIov; i++) n += o->iov[i].len;
  return n;
}

void mscclppNetConnFailLocked(struct mscclppNetConn* nc, const char* fmt, ...) {
  if (nc->error != mscclppSuccess) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(nc->errText, sizeof(nc->errText), fmt, ap);
  va_end(ap);
  nc->error = mscclppRemoteError;
}

/* Posting: 0, NOT_YET (the prepare hook's), -FI_EAGAIN, or another
 * negative error. */
static int postLocked(struct mscclppNet* net, struct mscclppNetOp* o) {
  if (o->hooks != NULL && o->hooks->prepare != NULL) {
    int r = o->hooks->prepare(o);
    if (r <= 0) return r == 0 ? NOT_YET : r;
  }
  struct iovec iov[2];
  void* desc[2] = {NULL, NULL};
  struct ofi_rma_iov rma[2];
  for (int i = 0; i < o->nIov; i++) {
    iov[i].iov_base = (void*)o->iov[i].buf;
    iov[i].iov_len = o->iov[i].len;
    desc[i] = o->iov[i].desc;
  }
  for (int i = 0; i < o->nRma; i++) {
    rma[i].addr = o->rma[i].addr;
    rma[i].len = o->rma[i].len;
    rma[i].key = o->rma[i].key;
  }
  struct ofi_msg_rma msg;
  memset(&msg, 0, sizeof(msg));
  uint64_t flags = OFI_COMPLETION;
  if (o->flags & MSCCLPP_NET_OP_INJECT) flags |= OFI_INJECT;
  if (o->flags & MSCCLPP_NET_OP_DELIVERY) flags |= OFI_DELIVERY_COMPLETE;
  if (o->flags & MSCCLPP_NET_OP_CQ_DATA) {
    msg.data = o->cqData;
    flags |= OFI_REMOTE_CQ_DATA;
  }
  msg.msg_iov = iov;
  msg.desc = desc;
  msg.iov_count = (size_t)o->nIov;
  msg.addr = (ofi_addr_t)o->nc->fiAddr;
  msg.rma_iov = rma;
  msg.rma_iov_count = (size_t)o->nRma;
  msg.context = o->fiContext;
  uint64_t t0 = mscclppTraceBegin();
  int rc = (int)ofi_writemsg(net->ep, &msg, flags);
  if (rc == 0) o->traceNs = t0;
  if (rc == 0 && o->hooks != NULL && o->hooks->posted != NULL) o->hooks->posted(o);
  return rc;
}

static int readyLocked(struct mscclppNet* net, struct mscclppNetOp* o) {
  if (net->inflight >= net->txDepth) return 0;
  if (o->fence && o->nc->completed < o->seq) return 0;
  return 1;
}

static void readCqLocked(struct mscclppNet* net);
static mscclppResult_t reportLocked(struct mscclppNetConn* nc);

int mscclppNetPostSideLocked(struct mscclppNet* net, struct mscclppNetOp* o) {
  struct mscclppNetConn* nc = o->nc;
  int rc = nc->error != mscclppSuccess || net->inflight >= net->txDepth ? NOT_YET : postLocked(net, o);
  if (rc != 0) {
    if (rc != NOT_YET && rc != -OFI_EAGAIN)
      mscclppNetConnFailLocked(nc, "%s from rank %d to rank %d over %s could not be posted: %s", o->what, nc->rank,
                               nc->peerRank, net->desc, errText(rc));
    opFreeLocked(net, o);
    return rc == NOT_YET || rc == -OFI_EAGAIN ? 1 : rc;
  }
  o->side = 1;
  nc->sideInFlight++;
  net->inflight++;
  return 0;
}

void mscclppNetKickLocked(struct mscclppNet* net, struct mscclppNetConn* nc) {
  int retried = 0;
  if (nc->hooks->ahead != NULL) nc->hooks->ahead(nc);
  while (nc->qHead != NULL) {
    struct mscclppNetOp* o = nc->qHead;
    if (nc->error != mscclppSuccess) {
      /* the connection failed: what is queued will never be posted */
      nc->qHead = o->next;
      if (nc->qHead == NULL) nc->qTail = NULL;
      nc->queued--;
      nc->completed++;
      opFreeLocked(net, o);
      continue;
    }
    if (!readyLocked(net, o)) break;
    int rc = postLocked(net, o);
    if (rc == NOT_YET) break;
    if (rc == -OFI_EAGAIN) {
      if (retried++) break;
      readCqLocked(net); /* completions free provider resources */
      continue;
    }
    nc->qHead = o->next;
    if (nc->qHead == NULL) nc->qTail = NULL;
    nc->queued--;
    if (rc != 0) {
      mscclppNetConnFailLocked(nc, "%s of %zu bytes from rank %d to rank %d over %s could not be posted: %s", o->what,
                               opBytes(o), nc->rank, nc->peerRank, net->desc, errText(rc));
      nc->completed++;
      opFreeLocked(net, o);
      continue;
    }
    net->inflight++;
  }
}

mscclppResult_t mscclppNetSubmitLocked(struct mscclppNet* net, struct mscclppNetOp* o) {
  struct mscclppNetConn* nc = o->nc;
  o->seq = nc->submitted++;
  o->next = NULL;
  if (nc->qTail) nc->qTail->next = o;
  else nc->qHead = o;
  nc->qTail = o;
  nc->queued++;
  mscclppNetKickLocked(net, nc);
  return reportLocked(nc);
}

mscclppResult_t mscclppNetSubmit(struct mscclppNet* net, struct mscclppNetOp* o) {
  pthread_mutex_lock(&net->lock);
  mscclppResult_t err = mscclppNetSubmitLocked(net, o);
  pthread_mutex_unlock(&net->lock);
  return err;
}

/* ---- the completion queue ------------------------------------------------------- */

/* An operation left the completion queue, done (mscclppSuccess) or failed:
 * it is traced as one span, from its posting to here. */
static void opDoneLocked(struct mscclppNet* net, struct mscclppNetOp* o, mscclppResult_t status) {
  struct mscclppNetConn* nc = o->nc;
  if (o->traceNs != 0 && mscclppTraceOn())
    MSCCLPP_TRACE_EMIT(MSCCLPP_TRACE_NET_WRITE, o->traceNs, mscclppTraceNow(), MSCCLPP_TRACE_S(o->what),
                       MSCCLPP_TRACE_I(nc != NULL ? nc->peerRank : -1), (uint64_t)opBytes(o), o->seq,
                       MSCCLPP_TRACE_I(status));
  net->inflight--;
  if (nc != NULL && !nc->removed) {
    if (o->side) nc->sideInFlight--;
    else nc->completed++;
  }
  opFreeLocked(net, o);
}

/* Remote CQ data (layout in engine.h; the peer's bytes: checked). */
static void remoteLocked(struct mscclppNet* net, uint32_t d) {
  uint32_t tag = d >> MSCCLPP_NET_CQ_TAG_SHIFT, id = (d >> 16) & MSCCLPP_NET_CQ_ID_MASK;
  struct mscclppNetConn* nc = id < net->connEnd ? net->conns[id] : NULL;
  /* a peer sends remote data only after both greetings (ready before) */
  if (nc == NULL || !nc->ready || nc->removed) {
    MSCCLPP_WARN(MSCCLPP_LOG_NET, "rank %d: remote data (tag %u) for unknown connection %u dropped", net->rank, tag,
                 id);
    return;
  }
  if (net->remote[tag] == NULL) {
    MSCCLPP_WARN(MSCCLPP_LOG_NET, "rank %d: remote data with unknown tag %u from rank %d dropped", net->rank, tag,
                 nc->peerRank);
    return;
  }
  if (mscclppTraceOn())
    MSCCLPP_TRACE_EMIT(MSCCLPP_TRACE_NET_REMOTE, mscclppTraceNow(), 0, MSCCLPP_TRACE_I(nc->peerRank), (uint64_t)tag);
  net->remote[tag](nc, d & MSCCLPP_NET_CQ_PAYLOAD_MASK);
}

static void readCqLocked(struct mscclppNet* net) {
  const struct mscclppOfiLib* lib = mscclppOfi();
  for (int round = 0; round < 64; round++) {
    struct ofi_cq_data_entry e[16];
    ssize_t n = ofi_cq_read(net->cq, e, 16);
    if (n == -OFI_EAGAIN) return;
    if (n == -OFI_EAVAIL) {
      struct ofi_cq_err_entry err;
      memset(&err, 0, sizeof(err));
      if (ofi_cq_readerr(net->cq, &err, 0) != 1) return;
      char prov[160] = "";
      ofi_cq_strerror(net->cq, err.prov_errno, err.err_data, prov, sizeof(prov));
      struct mscclppNetOp* o = err.op_context;
      if (o != NULL && !(err.flags & OFI_REMOTE_CQ_DATA)) {
        struct mscclppNetConn* nc = o->nc;
        if (nc != NULL && !nc->removed)
          mscclppNetConnFailLocked(nc,
                                   "%s of %zu bytes from rank %d to rank %d over %s failed: %s (provider: %s); the "
                                   "peer is unreachable or gone",
                                   o->what, opBytes(o), nc->rank, nc->peerRank, net->desc, lib->strerror(err.err),
                                   prov);
        opDoneLocked(net, o, mscclppRemoteError);
      } else {
        MSCCLPP_WARN(MSCCLPP_LOG_NET, "rank %d: network completion error without an operation: %s (provider: %s)",
                     net->rank, lib->strerror(err.err), prov);
      }
      continue;
    }
    if (n < 0) {
      MSCCLPP_WARN(MSCCLPP_LOG_NET, "rank %d: fi_cq_read failed: %s", net->rank, lib->strerror((int)-n));
      return;
    }
    for (ssize_t i = 0; i < n; i++) {
      if (e[i].flags & OFI_REMOTE_CQ_DATA) remoteLocked(net, (uint32_t)e[i].data);
      else if (e[i].op_context != NULL) opDoneLocked(net, e[i].op_context, mscclppSuccess);
    }
    if (n < 16) return;
  }
}

/* ---- progress and waits --------------------------------------------------------- */

static mscclppResult_t reportLocked(struct mscclppNetConn* nc) {
  if (nc->error == mscclppSuccess) return mscclppSuccess;
  if (!nc->errReported) {
    nc->errReported = 1;
    return mscclppErr(nc->error, MSCCLPP_LOG_NET, "%s", nc->errText);
  }
  return nc->error;
}

static void progressLocked(struct mscclppNet* net) {
  readCqLocked(net);
  for (uint32_t i = 0; i < net->connEnd; i++) {
    struct mscclppNetConn* c = net->conns[i];
    if (c == NULL || !c->ready) continue;
    if (c->hooks->progress != NULL) c->hooks->progress(c);
    if (c->qHead != NULL || c->hooks->ahead != NULL) mscclppNetKickLocked(net, c);
  }
}

mscclppResult_t mscclppNetProgress(struct mscclppNet* net, struct mscclppNetConn* nc, int* idle) {
  pthread_mutex_lock(&net->lock);
  /* One completion-queue read per round over the endpoint's connections
   * (the proxy progresses each of its connections on every pass): read
   * unless the queue was read since nc's last call, by a call for another
   * connection. So between two calls for one connection the queue is
   * always read at least once, and a pass over K connections reads it once,
   * not K times. */
  if (nc == NULL || nc->progressSeen == net->cqReads) {
    progressLocked(net);
    net->cqReads++;
  }
  mscclppResult_t res = mscclppSuccess;
  if (nc != NULL) {
    nc->progressSeen = net->cqReads;
    if (idle) *idle = nc->completed == nc->submitted && nc->sideInFlight == 0;
    res = reportLocked(nc);
  }
  pthread_mutex_unlock(&net->lock);
  return res;
}

static mscclppResult_t waitCheck(struct mscclppNet* net, struct mscclppNetConn* nc, mscclppDeadline d,
                                 const char* what, uint64_t* spins) {
  if (net->abortFlag != NULL && __atomic_load_n(net->abortFlag, __ATOMIC_ACQUIRE))
    return mscclppErr(mscclppAborted, MSCCLPP_LOG_NET, "%s (rank %d to rank %d): aborted", what, nc->rank,
                      nc->peerRank);
  if (mscclppDeadlinePassed(d))
    return mscclppErr(mscclppTimeout, MSCCLPP_LOG_NET,
                      "%s (rank %d to rank %d over %s): not done after %.3g s (%llu of %llu operations complete): the "
                      "peer is unreachable, gone, or not making progress",
                      what, nc->rank, nc->peerRank, net->desc, net->timeoutSec, (unsigned long long)nc->completed,
                      (unsigned long long)nc->submitted);
  if ((++*spins & 63) == 0) sched_yield(); /* the peer may need this core (2-core CI) */
  return mscclppSuccess;
}

mscclppResult_t mscclppNetWaitIdle(struct mscclppNet* net, struct mscclppNetConn* nc, const char* what) {
  mscclppDeadline d = mscclppDeadlineIn(net->timeoutSec);
  uint64_t spins = 0;
  for (;;) {
    int idle = 0;
    MSCCLPP_RETURN_ON_ERROR(mscclppNetProgress(net, nc, &idle));
    if (idle) return mscclppSuccess;
    MSCCLPP_RETURN_ON_ERROR(waitCheck(net, nc, d, what, &spins));
  }
}

mscclppResult_t mscclppNetWaitWord(struct mscclppNet* net, struct mscclppNetConn* nc, volatile uint64_t* word,
                                   uint64_t value, const char* what) {
  mscclppDeadline d = mscclppDeadlineIn(net->timeoutSec);
  uint64_t spins = 0;
  for (;;) {
    MSCCLPP_RETURN_ON_ERROR(mscclppNetProgress(net, nc, NULL));
    if (__atomic_load_n(word, __ATOMIC_ACQUIRE) == value) return mscclppSuccess;
    MSCCLPP_RETURN_ON_ERROR(waitCheck(net, nc, d, what, &spins));
  }
}
