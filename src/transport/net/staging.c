/* SPDX-License-Identifier: MIT */
/* Staging: GPU memory through pinned host rings (providers without
 * FI_HMEM). See staging.h. */
#include "transport/net/staging.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bytes.h"
#include "core/error.h"
#include "core/log.h"
#include "gpu/gpu_ipc.h"
#include "transport/net/link.h"


#if defined(__SANITIZE_THREAD__)
#define NET_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define NET_TSAN 1
#endif
#endif
#ifdef NET_TSAN
void AnnotateIgnoreReadsBegin(const char* file, int line);
void AnnotateIgnoreReadsEnd(const char* file, int line);
void AnnotateIgnoreWritesBegin(const char* file, int line);
void AnnotateIgnoreWritesEnd(const char* file, int line);
#endif

/* Place staged bytes from the ring at their destination on the host: the
 * peer's write, done by this process's proxy as a NIC would. Its order
 * against this process's own accesses comes from the peer (which wrote only
 * after this side let it, through the bootstrap or a semaphore) and the
 * signal that follows (a release store); ThreadSanitizer cannot see orders
 * that pass through another process, so under TSan the copy is not
 * tracked, like libfabric's own copies (net_ofi.c). */
static void placeRemoteBytes(void* dst, const void* src, size_t len) {
#ifdef NET_TSAN
  AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
  AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
#endif
  memcpy(dst, src, len);
#ifdef NET_TSAN
  AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
  AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
#endif
}


/* ---- opening and closing ------------------------------------------------------- */

mscclppResult_t mscclppNetStageOpenRecv(struct mscclppNetLink* l, int gpu) {
  struct mscclppNetStageRecv* r = &l->recv;
  MSCCLPP_RETURN_ON_ERROR(mscclppNetHostBuffer(l->eng.net, gpu,
                                               (size_t)MSCCLPP_NET_STAGE_SLOTS * MSCCLPP_NET_STAGE_SLOT_BYTES,
                                               &r->ring, &r->ringReg, &r->ringPinned));
  return gpu ? mscclppGpuIpcStreamCreate(&r->stream) : mscclppSuccess;
}

mscclppResult_t mscclppNetStageOpenSend(struct mscclppNetLink* l, int gpu, uint64_t addr, uint64_t key) {
  struct mscclppNetStageSend* s = &l->send;
  s->peerHasRing = 1;
  s->peerRingAddr = addr;
  s->peerRingKey = key;
  int unpinned = 0;
  MSCCLPP_RETURN_ON_ERROR(mscclppNetHostBuffer(l->eng.net, 0, (size_t)MSCCLPP_NET_STAGE_SLOTS * MSCCLPP_NET_STAGE_HEADER,
                                               &s->hdrs, &s->hdrReg, &unpinned));
  if (!gpu) return mscclppSuccess;
  MSCCLPP_RETURN_ON_ERROR(mscclppNetHostBuffer(l->eng.net, gpu,
                                               (size_t)MSCCLPP_NET_STAGE_SLOTS * MSCCLPP_NET_STAGE_CHUNK, &s->bounce,
                                               &s->bounceReg, &s->bouncePinned));
  return mscclppGpuIpcStreamCreate(&s->sendStream);
}

void mscclppNetStageClose(struct mscclppNetLink* l) {
  struct mscclppNet* net = l->eng.net;
  struct mscclppNetStageRecv* r = &l->recv;
  struct mscclppNetStageSend* s = &l->send;
  mscclppNetDeregister(net, &r->ringReg);
  mscclppNetDeregister(net, &s->hdrReg);
  mscclppNetDeregister(net, &s->bounceReg);
  if (r->ringPinned) (void)mscclppGpuIpcHostUnregister(r->ring);
  if (s->bouncePinned) (void)mscclppGpuIpcHostUnregister(s->bounce);
  if (r->stream) mscclppGpuIpcStreamDestroy(r->stream);
  if (s->sendStream) mscclppGpuIpcStreamDestroy(s->sendStream);
  free(r->ring);
  free(s->hdrs);
  free(s->bounce);
}

/* ---- sending ---------------------------------------------------------------------- */

#define STAGE_FROM_DEVICE 1u /* proto: the source is GPU memory, copied to the bounce slot first */
#define STAGE_COPY_ENQUEUED 2u
#define STAGE_COPIED 4u

int mscclppNetStageRingBusy(struct mscclppNetLink* l) {
  return l->send.peerHasRing && l->send.stageSubmitted != __atomic_load_n(&l->ctrl->credits, __ATOMIC_ACQUIRE);
}

/* The engine is about to post a STAGE operation, first in its queue: it
 * needs a free slot of the peer's ring, and a device source's bytes in the
 * slot's bounce buffer. The copy is enqueued once and then polled here on
 * each pass (never waited for with the endpoint's lock held). */
static int stagePrepare(struct mscclppNetOp* o) {
  struct mscclppNetLink* l = mscclppNetLinkOf(o->nc);
  struct mscclppNetStageSend* s = &l->send;
  if (s->sentSlots - l->ctrl->credits >= MSCCLPP_NET_STAGE_SLOTS) return 0;
  uint32_t slot = (uint32_t)(s->sentSlots % MSCCLPP_NET_STAGE_SLOTS);
  if ((o->proto & STAGE_FROM_DEVICE) && !(o->proto & STAGE_COPIED)) {
    uint8_t* b = s->bounce + (size_t)slot * MSCCLPP_NET_STAGE_CHUNK;
    /* a failure here fails the connection with EIO: say which */
    if (!(o->proto & STAGE_COPY_ENQUEUED)) {
      if (mscclppGpuIpcMemcpyAsync(s->sendStream, b, o->iov[1].buf, o->iov[1].len) != mscclppSuccess) {
        MSCCLPP_WARN(MSCCLPP_LOG_NET, "staging %zu bytes from device memory to the bounce slot failed: %s",
                     o->iov[1].len, mscclppGetLastError());
        return -EIO;
      }
      o->proto |= STAGE_COPY_ENQUEUED;
    }
    int done = 0;
    if (mscclppGpuIpcStreamQuery(s->sendStream, &done) != mscclppSuccess) {
      MSCCLPP_WARN(MSCCLPP_LOG_NET, "waiting for the copy to the bounce slot failed: %s", mscclppGetLastError());
      return -EIO;
    }
    if (!done) return 0;
    o->iov[1].buf = b;
    o->iov[1].desc = s->bounceReg.desc;
    o->proto |= STAGE_COPIED;
  }
  uint8_t* h = s->hdrs + (size_t)slot * MSCCLPP_NET_STAGE_HEADER;
  memcpy(h, o->data, MSCCLPP_NET_STAGE_HEADER);
  mscclppPutLE64(h + 8, s->sentSlots); /* seq */
  o->iov[0].buf = h;
  o->iov[0].desc = s->hdrReg.desc;
  o->iov[0].len = MSCCLPP_NET_STAGE_HEADER;
  o->rma[0].addr = s->peerRingAddr + (uint64_t)slot * MSCCLPP_NET_STAGE_SLOT_BYTES;
  o->rma[0].key = s->peerRingKey;
  o->rma[0].len = MSCCLPP_NET_STAGE_HEADER + (o->nIov == 2 ? o->iov[1].len : 0);
  o->cqData = mscclppNetCqData(MSCCLPP_NET_TAG_STAGE, o->nc->peerId, slot);
  return 1;
}

static void stagePosted(struct mscclppNetOp* o) { mscclppNetLinkOf(o->nc)->send.sentSlots++; }

static const struct mscclppNetOpHooks stageOpHooks = {.prepare = stagePrepare, .posted = stagePosted};

/* A STAGE operation with its header: type, address, length, value. */
static struct mscclppNetOp* stageOpLocked(struct mscclppNetLink* l, uint32_t type, uint64_t addr, uint64_t len,
                                          uint64_t value) {
  struct mscclppNet* net = l->eng.net;
  struct mscclppNetOp* o = mscclppNetOpGetLocked(net);
  if (o == NULL) return NULL;
  o->nc = &l->eng;
  o->what = "staged write";
  o->hooks = &stageOpHooks;
  o->flags = MSCCLPP_NET_OP_CQ_DATA |
             (mscclppNetSignalModeOf(net) == MSCCLPP_NET_SIGNAL_FENCED ? MSCCLPP_NET_OP_DELIVERY : 0u);
  o->nIov = 1;
  o->iov[0].len = MSCCLPP_NET_STAGE_HEADER;
  o->nRma = 1;
  uint8_t* hdr = (uint8_t*)o->data;
  memset(hdr, 0, MSCCLPP_NET_STAGE_HEADER);
  mscclppPutLE32(hdr, MSCCLPP_NET_STAGE_MAGIC);
  mscclppPutLE32(hdr + 4, type);
  mscclppPutLE64(hdr + 16, addr);
  mscclppPutLE64(hdr + 24, len);
  mscclppPutLE64(hdr + 32, value);
  l->send.stageSubmitted++;
  return o;
}

mscclppResult_t mscclppNetStageWrite(struct mscclppNetLink* l, uint64_t dstAddr, const uint8_t* src, void* desc,
                                     uint64_t size, int fromDevice) {
  struct mscclppNet* net = l->eng.net;
  pthread_mutex_t* lock = mscclppNetLock(net);
  for (uint64_t off = 0; off < size; off += MSCCLPP_NET_STAGE_CHUNK) {
    uint64_t n = size - off < MSCCLPP_NET_STAGE_CHUNK ? size - off : MSCCLPP_NET_STAGE_CHUNK;
    pthread_mutex_lock(lock);
    struct mscclppNetOp* o = stageOpLocked(l, MSCCLPP_NET_STAGE_DATA, dstAddr + off, n, 0);
    mscclppResult_t res = mscclppSystemError;
    if (o != NULL) {
      o->nIov = 2;
      o->iov[1].buf = src + off;
      o->iov[1].desc = desc;
      o->iov[1].len = (size_t)n;
      o->proto = fromDevice ? STAGE_FROM_DEVICE : 0u;
      res = mscclppNetSubmitLocked(net, o);
    }
    pthread_mutex_unlock(lock);
    MSCCLPP_RETURN_ON_ERROR(res);
  }
  pthread_mutex_lock(lock);
  l->send.stagedSinceSignal = 1;
  pthread_mutex_unlock(lock);
  return mscclppSuccess;
}

mscclppResult_t mscclppNetStageSignalLocked(struct mscclppNetLink* l, uint64_t sigAddr, uint64_t value) {
  struct mscclppNetOp* o = stageOpLocked(l, MSCCLPP_NET_STAGE_SIGNAL, sigAddr, 0, value);
  if (o == NULL) return mscclppSystemError;
  l->send.stagedSinceSignal = 0;
  return mscclppNetSubmitLocked(l->eng.net, o);
}

mscclppResult_t mscclppNetStageInlineLocked(struct mscclppNetLink* l, uint64_t dstAddr, const void* bytes,
                                            uint32_t size, uint64_t sigAddr, uint64_t sigValue) {
  struct mscclppNetOp* o =
      stageOpLocked(l, MSCCLPP_NET_STAGE_INLINE, dstAddr, size, sigAddr != 0 ? sigValue : 0);
  if (o == NULL) return mscclppSystemError;
  uint8_t* hdr = (uint8_t*)o->data;
  mscclppPutLE64(hdr + MSCCLPP_NET_STAGE_INLINE_SIG, sigAddr);
  memcpy(hdr + MSCCLPP_NET_STAGE_INLINE_BYTES, bytes, size);
  l->send.stagedSinceSignal = sigAddr == 0;
  return mscclppNetSubmitLocked(l->eng.net, o);
}

/* ---- receiving (the engine's hooks) ----------------------------------------------- */

void mscclppNetStageReceivedLocked(struct mscclppNetConn* nc, uint32_t slot) {
  struct mscclppNetLink* l = mscclppNetLinkOf(nc);
  struct mscclppNetStageRecv* r = &l->recv;
  if (nc->error != mscclppSuccess || nc->removed) return;
  if (r->ring == NULL) {
    mscclppNetConnFailLocked(nc, "rank %d sent staged data to rank %d, which keeps no staging ring", nc->peerRank,
                             nc->rank);
    return;
  }
  const uint8_t* s = r->ring + (size_t)(slot % MSCCLPP_NET_STAGE_SLOTS) * MSCCLPP_NET_STAGE_SLOT_BYTES;
  uint32_t magic = mscclppGetLE32(s), type = mscclppGetLE32(s + 4);
  uint64_t seq = mscclppGetLE64(s + 8), addr = mscclppGetLE64(s + 16), len = mscclppGetLE64(s + 24),
           value = mscclppGetLE64(s + 32);
  /* what the slot asks for: data (len bytes from `bytes` to addr), then a signal (value to sigAddr) */
  uint64_t sigAddr = 0;
  const uint8_t* bytes = s + MSCCLPP_NET_STAGE_HEADER;
  int valid = slot == r->recvSeq % MSCCLPP_NET_STAGE_SLOTS && magic == MSCCLPP_NET_STAGE_MAGIC && seq == r->recvSeq;
  switch (type) {
    case MSCCLPP_NET_STAGE_DATA: valid &= len <= MSCCLPP_NET_STAGE_CHUNK; break;
    case MSCCLPP_NET_STAGE_SIGNAL:
      valid &= len == 0;
      sigAddr = addr;
      valid &= sigAddr != 0;
      break;
    case MSCCLPP_NET_STAGE_INLINE:
      valid &= len >= 1 && len <= 8;
      sigAddr = mscclppGetLE64(s + MSCCLPP_NET_STAGE_INLINE_SIG);
      bytes = s + MSCCLPP_NET_STAGE_INLINE_BYTES;
      break;
    default: valid = 0;
  }
  if (!valid || sigAddr % 8 != 0) {
    mscclppNetConnFailLocked(nc,
                             "rank %d sent rank %d a malformed staging message (slot %u, sequence %llu where %llu "
                             "was due, type %u, %llu bytes)",
                             nc->peerRank, nc->rank, slot, (unsigned long long)seq, (unsigned long long)r->recvSeq,
                             type, (unsigned long long)len);
    return;
  }
  const struct mscclppRegisteredMemory* m = NULL;
  const struct mscclppRegisteredMemory* sm = NULL;
  if (len > 0) m = mscclppNetFindLocalLocked(nc->net, addr, len);
  if (sigAddr != 0) sm = mscclppNetFindLocalLocked(nc->net, sigAddr, sizeof(uint64_t));
  if ((len > 0 && m == NULL) || (sigAddr != 0 && sm == NULL)) {
    uint64_t badAddr = len > 0 && m == NULL ? addr : sigAddr, span = len > 0 && m == NULL ? len : sizeof(uint64_t);
    mscclppNetConnFailLocked(nc,
                             "rank %d sent rank %d %llu staged bytes for address 0x%llx, outside every memory it "
                             "registered for Net",
                             nc->peerRank, nc->rank, (unsigned long long)span, (unsigned long long)badAddr);
    return;
  }
  if (((m != NULL && !m->hostAccessible) || (sm != NULL && !sm->hostAccessible)) && r->stream == NULL) {
    mscclppNetConnFailLocked(nc, "staged data for GPU memory at 0x%llx, but rank %d has no GPU stream",
                             (unsigned long long)(m != NULL && !m->hostAccessible ? addr : sigAddr), nc->rank);
    return;
  }
  r->recvSeq++;
  mscclppResult_t res = mscclppSuccess;
  if (m != NULL) {
    if (!m->hostAccessible) {
      res = mscclppGpuIpcMemcpyAsync(r->stream, (void*)(uintptr_t)addr, bytes, (size_t)len);
      r->copyEnqueued = r->recvSeq;
    } else {
      placeRemoteBytes((void*)(uintptr_t)addr, bytes, (size_t)len);
      if (r->copyEnqueued <= r->consumed && sm == NULL) r->consumed = r->recvSeq;
    }
  }
  if (res == mscclppSuccess && sm != NULL) {
    const int pending = r->copyEnqueued > r->consumed;
    if (!sm->hostAccessible) {
      res = mscclppGpuIpcWriteValue64Async(r->stream, (void*)(uintptr_t)sigAddr, value); /* behind the copies */
      r->copyEnqueued = r->recvSeq;
    } else if (pending) {
      int i = r->nHeld++;
      r->held[i].addr = (uint64_t*)(uintptr_t)sigAddr;
      r->held[i].value = value;
      r->held[i].afterSeq = r->recvSeq;
    } else {
      __atomic_store_n((uint64_t*)(uintptr_t)sigAddr, value, __ATOMIC_RELEASE);
      r->consumed = r->recvSeq;
    }
  }
  if (res != mscclppSuccess)
    mscclppNetConnFailLocked(nc, "copying staged data to GPU memory at 0x%llx failed: %s",
                             (unsigned long long)(m != NULL ? addr : sigAddr), mscclppGetLastError());
}

void mscclppNetStageProgressLocked(struct mscclppNetConn* nc) {
  struct mscclppNetStageRecv* r = &mscclppNetLinkOf(nc)->recv;
  if (nc->error != mscclppSuccess || nc->removed) return;
  if (r->copyEnqueued > r->consumed) {
    int done = 0;
    if (mscclppGpuIpcStreamQuery(r->stream, &done) != mscclppSuccess) {
      mscclppNetConnFailLocked(nc, "staging copies of rank %d failed: %s", nc->rank, mscclppGetLastError());
      return;
    }
    if (!done) return;
    for (int i = 0; i < r->nHeld; i++)
      __atomic_store_n(r->held[i].addr, r->held[i].value, __ATOMIC_RELEASE);
    r->nHeld = 0;
    r->consumed = r->recvSeq;
  }
}


void mscclppNetStageCreditLocked(struct mscclppNetConn* nc) {
  struct mscclppNetLink* l = mscclppNetLinkOf(nc);
  struct mscclppNetStageRecv* r = &l->recv;
  if (r->consumed <= r->creditSent || nc->error != mscclppSuccess) return;
  struct mscclppNetOp* o = mscclppNetOpGetLocked(nc->net);
  if (o == NULL) return; /* retried on the next pass */
  o->nc = nc;
  o->what = "staging credit";
  uint64_t value = r->consumed;
  mscclppNetOpInject(o, &value, sizeof(value), l->peerCtrlAddr + offsetof(struct mscclppNetCtrl, credits),
                     l->peerCtrlKey);
  /* values only grow, and posting keeps their order */
  if (mscclppNetPostSideLocked(nc->net, o) == 0) r->creditSent = value;
}
