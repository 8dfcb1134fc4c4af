/* SPDX-License-Identifier: MIT */
/*
 * The host backend's progress engine (coll_host.h says how chunks travel).
 *
 * Every call is a set of sends, copying receives and at most one reduction
 * chain, progressed round-robin with polls (no wait on one peer while
 * another could progress), which is what makes any group of send/recv
 * deadlock-free. A reduction chain applies its contributors chunk by chunk
 * in rank order (rank 0's value, then op rank 1's, ...), so every element is
 * reduced by one rank in one order: results are identical on every rank and
 * from run to run, and match the GPU kernels' order.
 *
 * Waits: a call that makes no progress for MSCCLPP_TIMEOUT fails with
 * mscclppTimeout (and raises the communicator's abort); when the abort is
 * raised (a lost peer: the watcher of comm_abort.c; a timeout elsewhere),
 * the call returns that error (mscclppRemoteError naming the lost rank) at
 * once, as does every later call.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "coll/host/coll_host.h"
#include "core/error.h"
#include "core/log.h"
#include "core/report.h"
#include "core/util.h"
#include "gpu/abort.h"

/* ---- the progress engine ------------------------------------------------------------ */

static uint8_t* mySlot(struct mscclppCollHost* h, int from, uint64_t chunk) {
  return h->scratch + (size_t)from * h->perPeer + (size_t)(chunk % SLOTS) * h->slotBytes;
}

/* Offset of this rank's slot for `chunk` in a peer's scratch. */
static size_t peerSlotOffset(const struct mscclppCollHost* h, uint64_t chunk) {
  return (size_t)h->rank * h->perPeer + (size_t)(chunk % SLOTS) * h->slotBytes;
}

/* Offset in this rank's scratch of the staging copy of a remote peer's slot. */
static size_t stagingOffset(const struct mscclppCollHost* h, int to, uint64_t chunk) {
  return ((size_t)h->nranks + (size_t)to) * h->perPeer + (size_t)(chunk % SLOTS) * h->slotBytes;
}

/* Fail the call and the communicator (later calls fail at once): the abort
 * records and logs the reason, and returns `code`. */
static mscclppResult_t failWith(struct engine* e, mscclppResult_t code, const char* why) {
  return mscclppAbortRaisef(e->h->abort, code, "%s", why);
}

/* The abort is up: return its error (a lost peer: mscclppRemoteError). */
mscclppResult_t mscclppCollHostFailAborted(struct mscclppComm* comm, const char* name) {
  mscclppResult_t e = mscclppSuccess;
  if (mscclppCommAsyncError(comm, &e) != mscclppSuccess || e == mscclppSuccess) e = mscclppAborted;
  /* the abort logged its reason when it was raised */
  return mscclppErrWrap(e, MSCCLPP_LOG_COLL, "%s on rank %d: the communicator is aborted", name, comm->rank);
}

/* ---- the two kinds of peers: memory channels (this host), port channels (remote) ---- */

/* One data signal from the peer consumed, if one has arrived. */
static int pollData(struct hostPeer* p) {
  return p->remote ? mscclppPortChannelDevicePoll(&p->dataPort) : mscclppMemoryChannelDevicePoll(&p->data);
}

/* One credit signal from the peer consumed, if one has arrived. */
static int pollCredit(struct hostPeer* p) {
  return p->remote ? mscclppPortChannelDevicePoll(&p->creditPort) : mscclppMemoryChannelDevicePoll(&p->credit);
}

/* Hand a slot back to the peer. A port channel push fails only when the
 * communicator is aborted or the FIFO stayed full for MSCCLPP_TIMEOUT (then
 * recorded as its error). */
static mscclppResult_t signalCredit(struct engine* e, struct hostPeer* p) {
  if (!p->remote) {
    mscclppMemoryChannelDeviceSignal(&p->credit);
    return mscclppSuccess;
  }
  if (mscclppPortChannelDeviceSignal(&p->creditPort) != mscclppSuccess)
    return mscclppCollHostFailAborted(e->comm, e->name);
  return mscclppSuccess;
}

/* Write chunk `chunk` (header, then c payload bytes) into this rank's slot
 * of peer `to` and signal it: stores through the mapping for a peer of this
 * host; for a remote one, into the staging copy, then a put with the signal
 * behind it. */
static mscclppResult_t putChunk(struct engine* e, int to, uint64_t chunk, const struct chunkHeader* hd,
                                const uint8_t* payload, size_t c) {
  struct mscclppCollHost* h = e->h;
  struct hostPeer* p = &h->peer[to];
  if (!p->remote) {
    uint8_t* slot = p->data.dst + peerSlotOffset(h, chunk);
    memcpy(slot, hd, sizeof(*hd));
    memcpy(slot + HEADER_BYTES, payload, c);
    mscclppMemoryChannelDeviceSignal(&p->data); /* release: header and payload first */
    return mscclppSuccess;
  }
  size_t so = stagingOffset(h, to, chunk);
  memcpy(h->scratch + so, hd, sizeof(*hd));
  memcpy(h->scratch + so + HEADER_BYTES, payload, c);
  /* release: the proxy's copy sees the stores above */
  if (mscclppPortChannelDevicePutWithSignal(&p->dataPort, p->dataPort.dst, peerSlotOffset(h, chunk), p->dataPort.src,
                                            so, HEADER_BYTES + c) != mscclppSuccess)
    return mscclppCollHostFailAborted(e->comm, e->name);
  return mscclppSuccess;
}

static int xferReady(const struct engine* e, const struct xfer* t) {
  return t->after < 0 || e->x[t->after].done == e->x[t->after].bytes;
}

static size_t chunkOf(const struct mscclppCollHost* h, size_t bytes, size_t done) {
  return bytes - done < h->payload ? bytes - done : h->payload;
}

/* The next chunk from t->peer if it has arrived (header checked), else NULL. */
static mscclppResult_t arrivedChunk(struct engine* e, const struct xfer* t, const uint8_t** payload) {
  struct mscclppCollHost* h = e->h;
  struct hostPeer* p = &h->peer[t->peer];
  *payload = NULL;
  if (p->arrived == p->used) {
    if (!pollData(p)) return mscclppSuccess;
    p->arrived++;
  }
  const uint8_t* slot = mySlot(h, t->peer, p->used);
  struct chunkHeader hd;
  memcpy(&hd, slot, sizeof(hd));
  size_t c = chunkOf(h, t->bytes, t->done);
  if (hd.magic != HEADER_MAGIC || hd.kind != (uint32_t)e->kind || hd.seq != e->seq || hd.msgBytes != t->bytes ||
      hd.offset != t->done || hd.bytes != c) {
    char why[512];
    snprintf(why, sizeof(why),
             "%s on rank %d: rank %d sent %llu bytes of %s (call #%llu, offset %llu) where %zu bytes of %s (call "
             "#%llu, offset %zu) were expected: the ranks called different collectives, sizes or send/recv pairs",
             e->name, h->rank, t->peer, (unsigned long long)hd.msgBytes,
             hd.magic == HEADER_MAGIC ? mscclppCollKindName((mscclppCollKind)hd.kind) : "a corrupt message",
             (unsigned long long)hd.seq, (unsigned long long)hd.offset, t->bytes, mscclppCollKindName(e->kind),
             (unsigned long long)e->seq, t->done);
    return failWith(e, mscclppInvalidUsage, why);
  }
  *payload = slot + HEADER_BYTES;
  return mscclppSuccess;
}

/* The chunk of t->peer just consumed: hand its slot back. */
static mscclppResult_t releaseChunk(struct engine* e, struct xfer* t, size_t c) {
  struct hostPeer* p = &e->h->peer[t->peer];
  p->used++;
  t->done += c;
  return signalCredit(e, p);
}

/* Send t's next chunk if a slot of the peer is free (*sent = 1). */
static mscclppResult_t trySend(struct engine* e, struct xfer* t, int* sent) {
  struct mscclppCollHost* h = e->h;
  struct hostPeer* p = &h->peer[t->peer];
  *sent = 0;
  if (p->sent - p->credits >= SLOTS) {
    if (!pollCredit(p)) return mscclppSuccess;
    p->credits++;
  }
  size_t c = chunkOf(h, t->bytes, t->done);
  struct chunkHeader hd = {HEADER_MAGIC, (uint32_t)e->kind, e->seq, t->bytes, t->done, c, {0, 0, 0}};
  MSCCLPP_RETURN_ON_ERROR(putChunk(e, t->peer, p->sent, &hd, t->buf + t->done, c));
  p->sent++;
  t->done += c;
  *sent = 1;
  return mscclppSuccess;
}

/* A finished send to a remote peer: wait (poll) until the peer has credited
 * every chunk sent to it, so nothing is in flight when the call returns.
 * *pending = 1 while some are not. */
static void drainCredits(struct hostPeer* p, int* pending, int* moved) {
  if (!p->remote || p->credits == p->sent) return;
  if (pollCredit(p)) {
    p->credits++;
    *moved = 1;
  }
  if (p->credits != p->sent) *pending = 1;
}

static mscclppResult_t tryRecv(struct engine* e, struct xfer* t, int* moved) {
  const uint8_t* src = NULL;
  MSCCLPP_RETURN_ON_ERROR(arrivedChunk(e, t, &src));
  if (src == NULL) return mscclppSuccess;
  size_t c = chunkOf(e->h, t->bytes, t->done);
  if (t->done < t->keep) memcpy(t->buf + t->done, src, t->keep - t->done < c ? t->keep - t->done : c);
  MSCCLPP_RETURN_ON_ERROR(releaseChunk(e, t, c));
  *moved = 1;
  return mscclppSuccess;
}

/* One contributor of the chain's current chunk, if it is there. */
static mscclppResult_t chainStep(struct engine* e, struct chain* ch, int* moved) {
  size_t c = chunkOf(e->h, ch->bytes, ch->done);
  uint8_t* dst = ch->dst + ch->done;
  if (ch->aliased && ch->saved != ch->done + 1) {
    memcpy(e->h->temp, ch->local + ch->done, c); /* before contributor 0 overwrites it */
    ch->saved = ch->done + 1;
  }
  int j = ch->contrib[ch->pos];
  const uint8_t* src;
  struct xfer* t = NULL;
  if (j < 0) {
    src = ch->aliased ? e->h->temp : ch->local + ch->done;
  } else {
    t = &e->x[j];
    MSCCLPP_RETURN_ON_ERROR(arrivedChunk(e, t, &src));
    if (src == NULL) return mscclppSuccess;
  }
  if (ch->pos == 0) {
    if (src != dst) memcpy(dst, src, c);
  } else {
    ch->reduce(dst, src, c / ch->typeSize);
  }
  if (t != NULL) MSCCLPP_RETURN_ON_ERROR(releaseChunk(e, t, c));
  if (++ch->pos == ch->n) {
    if (ch->divide != NULL) ch->divide(dst, c / ch->typeSize, e->h->nranks);
    ch->done += c;
    ch->pos = 0;
  }
  *moved = 1;
  return mscclppSuccess;
}

/* The peer this rank waits for when nothing moves: the first unfinished
 * transfer's (a receive waits for the peer's data signal, a send for its
 * credit), else a finished send's last credits. -1 when none. */
static int waitedPeer(const struct engine* e, int* isSend) {
  const struct mscclppCollHost* h = e->h;
  for (int i = 0; i < e->nx; i++)
    if (e->x[i].done < e->x[i].bytes) {
      *isSend = e->x[i].isSend;
      return e->x[i].peer;
    }
  for (int i = 0; i < e->nx; i++) { /* draining: the credits of the last chunks */
    const struct hostPeer* p = &h->peer[e->x[i].peer];
    if (e->x[i].isSend && p->credits != p->sent) {
      *isSend = 1;
      return e->x[i].peer;
    }
  }
  *isSend = 0;
  return -1;
}

/* The semaphore a wait on peer p polls: the data channel's for a receive,
 * the credit channel's for a send. */
static const mscclppSemaphoreDeviceHandle* waitedSem(const struct hostPeer* p, int isSend) {
  if (p->remote) return isSend ? &p->creditPort.inbound : &p->dataPort.inbound;
  return isSend ? &p->credit.sem : &p->data.sem;
}

/* Publish the wait in the hang report's record (core/report.h): which peer,
 * which semaphore (its id, and its inbound counter, from which the report
 * reads the signals arrived so far), which signal number. */
static void publishWait(const struct engine* e, uint64_t idleSince) {
  int isSend = 0;
  int peer = waitedPeer(e, &isSend);
  struct mscclppReportWait w = {isSend ? "send" : "receive", isSend ? "credit" : "data", 0, peer, 0, NULL};
  if (peer >= 0) {
    const struct hostPeer* p = &e->h->peer[peer];
    const mscclppSemaphoreDeviceHandle* sem = waitedSem(p, isSend);
    w.expect = isSend ? p->credits + 1 : p->arrived + 1;
    w.sem = sem->id;
    w.counter = sem->inbound; /* host memory on the host backend */
  }
  mscclppReportWaitBegin(e->comm->report, &w, idleSince, (uint64_t)(e->h->timeout * 1e3));
}

/* Idle this long before the wait is published in the report's record: a
 * hang lasts far longer, and the calls that wait less pay nothing. */
#define REPORT_WAIT_AFTER_NS 1000000u

static mscclppResult_t engineLoop(struct engine* e, int* published) {
  struct mscclppCollHost* h = e->h;
  uint64_t idleSince = 0;
  for (;;) {
    int moved = 0, left = 0;
    int draining = 0;
    for (int i = 0; i < e->nx; i++) {
      struct xfer* t = &e->x[i];
      if (t->inChain) continue;
      if (t->done == t->bytes) {
        if (t->isSend) drainCredits(&h->peer[t->peer], &draining, &moved);
        continue;
      }
      left = 1;
      if (!xferReady(e, t)) continue;
      if (t->isSend) {
        int sent = 1;
        while (t->done < t->bytes && sent) {
          MSCCLPP_RETURN_ON_ERROR(trySend(e, t, &sent));
          moved |= sent;
        }
      } else {
        MSCCLPP_RETURN_ON_ERROR(tryRecv(e, t, &moved));
      }
    }
    if (e->chain != NULL && e->chain->done < e->chain->bytes) {
      left = 1;
      int m;
      do {
        m = 0;
        MSCCLPP_RETURN_ON_ERROR(chainStep(e, e->chain, &m));
        moved |= m;
      } while (m && e->chain->done < e->chain->bytes);
    }
    if (!left && !draining) return mscclppSuccess;
    if (moved) {
      idleSince = 0;
      if (*published) {
        mscclppReportWaitEnd(e->comm->report);
        *published = 0;
      }
      continue;
    }
    if (mscclppAbortIsRaised(h->abort)) return mscclppCollHostFailAborted(e->comm, e->name);
    uint64_t now = mscclppHostClockNs();
    if (idleSince == 0) idleSince = now;
    if (!*published && now - idleSince > REPORT_WAIT_AFTER_NS) {
      publishWait(e, idleSince);
      *published = 1;
    }
    if ((double)(now - idleSince) > h->timeout * 1e9) {
      int waitSend = 0;
      int waitPeer = waitedPeer(e, &waitSend);
      char why[256];
      snprintf(why, sizeof(why),
               "%s on rank %d: no progress for MSCCLPP_TIMEOUT (%.1f s) while %s rank %d (did every rank make the "
               "same calls?)",
               e->name, h->rank, h->timeout, waitSend ? "sending to" : "receiving from", waitPeer);
      return failWith(e, mscclppTimeout, why);
    }
    mscclppHostWaitBackoff(now - idleSince);
  }
}

/* Run the engine until the call is done or fails. A failure (timeout, a
 * peer's mismatched call, the abort) raises the abort, which writes the
 * report while the wait is still published; the wait is withdrawn after. */
mscclppResult_t mscclppCollHostEngineRun(struct engine* e) {
  int published = 0;
  mscclppResult_t res = engineLoop(e, &published);
  if (published) mscclppReportWaitEnd(e->comm->report);
  return res;
}

/* ---- a call's transfers and chain ---------------------------------------------------- */

void mscclppCollHostAddXfer(struct engine* e, int peer, int isSend, const void* buf, size_t bytes) {
  if (bytes == 0) return;
  struct xfer* t = &e->x[e->nx];
  t->peer = peer;
  t->isSend = isSend;
  t->inChain = 0;
  t->after = -1;
  for (int i = e->nx - 1; i >= 0; i--)
    if (e->x[i].peer == peer && e->x[i].isSend == isSend) {
      t->after = i;
      break;
    }
  t->buf = (uint8_t*)(uintptr_t)buf;
  t->bytes = bytes;
  t->done = 0;
  t->keep = bytes;
  e->nx++;
}

/* A chain reducing `bytes` into dst: this rank's value from `local`, every
 * other rank's received, in rank order. */
void mscclppCollHostSetChain(struct engine* e, struct chain* ch, const struct mscclppCollArgs* a, void* dst,
                             const void* local, size_t bytes) {
  struct mscclppCollHost* h = e->h;
  e->chain = NULL;
  if (bytes == 0) return;
  ch->dst = (uint8_t*)dst;
  ch->local = (const uint8_t*)local;
  ch->bytes = bytes;
  ch->done = 0;
  ch->saved = 0;
  ch->pos = 0;
  ch->n = h->nranks;
  ch->aliased = local == dst && h->rank != 0;
  ch->reduce = mscclppHostReduceFnOf(a->type, a->op);
  ch->divide = a->op == mscclppAvg ? mscclppHostDivideFnOf(a->type) : NULL;
  ch->typeSize = a->typeSize;
  for (int r = 0; r < h->nranks; r++) {
    if (r == h->rank) {
      ch->contrib[r] = -1;
      continue;
    }
    mscclppCollHostAddXfer(e, r, 0, NULL, bytes);
    e->x[e->nx - 1].inChain = 1;
    ch->contrib[r] = e->nx - 1;
  }
  e->chain = ch;
}
