/* SPDX-License-Identifier: MIT */
/* Transport Net: RMA over libfabric (verbs, efa, tcp;ofi_rxm, ...) between
 * ranks on different hosts (or, asked for explicitly, on one host).
 *
 * open   - attach the rank's endpoint (endpoint.c) on first use; exchange
 *          endpoint addresses and a registered control block through the
 *          bootstrap; each side writes the other's greeting into its control
 *          block with RMA and waits for its own, which proves the data path
 *          both ways ("peer unreachable" is decided here, bounded by
 *          MSCCLPP_TIMEOUT).
 * write  - RMA writes (fi_writemsg), split at the provider's message size;
 *          posted at once, or queued in order while the provider's queue is
 *          full (-FI_EAGAIN, tx queue size).
 * signal - per provider (net_internal.h, mscclppNetSignalMode):
 *          ORDERED (FI_ORDER_WAW for any size: tcp;ofi_rxm) an 8-byte
 *          injected write of the value right behind the data;
 *          FENCED (no write order: efa) data writes carry
 *          FI_DELIVERY_COMPLETE and the signal is posted only once every
 *          earlier operation of the connection has completed;
 *          through staging (below): the receiver's proxy applies it after
 *          the data before it is in place;
 *          with remote CQ data (below) once the semaphore is in the
 *          connection's signal table.
 * writeInline - 1..8 bytes a port channel's trigger carries, and a signal,
 *          in ONE message: where the provider orders writes and takes two
 *          targets per message (mscclppNetHasTwoTargetSignals: tcp;ofi_rxm;
 *          MSCCLPP_NET_SIGNAL=cq turns it off), an injected write of the
 *          bytes to their destination and then of the semaphore's new value
 *          to the semaphore, which the receiver's kernel sees with no work
 *          of its proxy (as a plain signal's 8-byte write: an absolute
 *          value); otherwise an injected write of the bytes whose remote CQ
 *          data names the semaphore (signal table, below). Without a
 *          signal, the injected write alone. Staged destinations, and
 *          signals while staged messages are outstanding, travel the ring
 *          as one INLINE slot (bytes and signal in the header). On the
 *          H200 VM's CPUs the second-target form brought the 8-byte
 *          putWithSignal ping-pong within its goal against a raw
 *          fi_inject_write ping-pong, which the CQ-data form missed
 *          (bench/RESULTS.md, "bench_net"; bench/HISTORY.md, "Network
 *          transport: what the inline put's message costs, and a cheaper
 *          one").
 * flush  - wait until every operation of the connection has completed
 *          locally (sources reusable); reads the completion queue while
 *          waiting; bounded and abortable.
 * query / progress - read the completion queue without waiting (manual
 *          progress providers place incoming data only then).
 *
 * Staging (GPU memory and a provider without FI_HMEM): staging.h.
 * Signals with remote CQ data: signal_cq.h. Signals while staged messages
 * are not yet consumed by the receiver (credits behind) go through the ring
 * instead, so that none overtakes a signal the receiver still holds back.
 * Without remote CQ data, or with the table full, or for a semaphore in GPU
 * memory: the injected write and an ordinary signal (two messages).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bytes.h"
#include "core/error.h"
#include "core/log.h"
#include "core/params.h"
#include "core/util.h"
#include "gpu/gpu_ipc.h"
#include "transport/net/link.h"
#include "transport/net/net_internal.h"
#include "transport/transport.h"

#define HELLO_MAGIC 0x544e534du /* "MSNT" */
#define HELLO_VERSION 2         /* 2: signal table, INLINE staging slots */
#define HELLO_PROV 32
#define HELLO_BYTES (64 + MSCCLPP_NET_ADDR_MAX + HELLO_PROV)
#define WRITE_PIECE ((size_t)1 << 30)

static mscclppResult_t netCheck(const struct mscclppEndpoint* a, const struct mscclppEndpoint* b, char* why,
                                size_t whyLen) {
  if (!(a->available & b->available & mscclppTransportNet)) {
    snprintf(why, whyLen, "rank %d cannot load libfabric",
             !(a->available & mscclppTransportNet) ? a->rank : b->rank);
    return mscclppInvalidUsage;
  }
  return mscclppSuccess;
}

static void linkDestroy(struct mscclppNetConn* nc) {
  struct mscclppNetLink* l = mscclppNetLinkOf(nc);
  mscclppNetDeregister(nc->net, &l->ctrlReg);
  mscclppNetStageClose(l);
  free(l->ctrl);
  free(l);
}

/* Connections with a staging ring of their own receive staged messages:
 * the engine calls staging's hooks for them. */
static const struct mscclppNetConnHooks plainHooks = {.destroy = linkDestroy};
static const struct mscclppNetConnHooks stagedHooks = {
    .progress = mscclppNetStageProgressLocked, .ahead = mscclppNetStageCreditLocked, .destroy = linkDestroy};

static mscclppResult_t netOpen(struct mscclppConnection* c) {
  const struct mscclppMemConfig* mcfg = mscclppMemContextConfig(c->mctx);
  struct mscclppParams params;
  MSCCLPP_RETURN_ON_ERROR(mscclppParamsLoad(&params));
  if (strcmp(params.netSignal, "auto") != 0 && strcmp(params.netSignal, "cq") != 0)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_NET, "MSCCLPP_NET_SIGNAL='%s': expected auto or cq",
                      params.netSignal);
  struct mscclppNetConfig cfg = {params.netProvider, params.netIfname, c->timeoutSec, c->abortFlag, c->rank,
                                 params.netSignal};
  struct mscclppNet* net = NULL;
  MSCCLPP_RETURN_ON_ERROR(mscclppNetOf(c->mctx, &cfg, &net));
  mscclppNetSetRemoteHandler(net, MSCCLPP_NET_TAG_STAGE, mscclppNetStageReceivedLocked);
  mscclppNetSetRemoteHandler(net, MSCCLPP_NET_TAG_SIGNAL, mscclppNetSignalReceivedLocked);
  const int gpu = mscclppMemContextHasGpu(c->mctx);
  /* Forced staging (tests) registers host memory as staged: receive rings
   * are needed then too. */
  const int staging = (gpu && !mscclppNetHasHmem(net)) || mscclppNetTestStagingOn();
  struct mscclppNetLink* l = calloc(1, sizeof(*l));
  if (l == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_NET, "cannot allocate a network connection");
  struct mscclppNetConn* nc = &l->eng;
  nc->net = net;
  nc->user = l;
  nc->hooks = staging ? &stagedHooks : &plainHooks;
  nc->rank = c->rank;
  nc->peerRank = c->remoteRank;
  l->conn = c;
  mscclppResult_t res = mscclppNetConnAdd(net, nc);
  if (res != mscclppSuccess) {
    free(l);
    return res;
  }
  uint64_t nonce = 0;
  if (mscclppRandomBytes(&nonce, sizeof(nonce)) != mscclppSuccess) nonce = mscclppTimeNs();
  nonce |= 1; /* never 0, the block's initial value */
  l->ctrl = mscclppNetPageAlloc(sizeof(struct mscclppNetCtrl));
  if (l->ctrl == NULL) {
    res = mscclppErr(mscclppSystemError, MSCCLPP_LOG_NET, "cannot allocate a control block");
    goto fail_remove;
  }
  res = mscclppNetRegisterHost(net, l->ctrl, sizeof(struct mscclppNetCtrl), &l->ctrlReg);
  if (res != mscclppSuccess) goto fail_remove;
  if (staging) {
    res = mscclppNetStageOpenRecv(l, gpu);
    if (res != mscclppSuccess) goto fail_remove;
  }

  /* ---- exchange through the bootstrap ---- */
  uint8_t msg[HELLO_BYTES];
  memset(msg, 0, sizeof(msg));
  uint8_t addr[MSCCLPP_NET_ADDR_MAX];
  size_t addrLen = 0;
  mscclppNetAddress(net, addr, &addrLen);
  mscclppPutLE32(msg, HELLO_MAGIC);
  mscclppPutLE16(msg + 4, HELLO_VERSION);
  mscclppPutLE16(msg + 6, (uint16_t)addrLen);
  mscclppPutLE32(msg + 8, nc->id);
  mscclppPutLE32(msg + 12, l->recv.ring ? 1u : 0u);
  mscclppPutLE64(msg + 16, l->ctrlReg.addr);
  mscclppPutLE64(msg + 24, l->ctrlReg.key);
  mscclppPutLE64(msg + 32, l->recv.ring ? l->recv.ringReg.addr : 0);
  mscclppPutLE64(msg + 40, l->recv.ring ? l->recv.ringReg.key : 0);
  mscclppPutLE32(msg + 48, MSCCLPP_NET_STAGE_SLOTS);
  mscclppPutLE32(msg + 52, MSCCLPP_NET_STAGE_CHUNK);
  mscclppPutLE64(msg + 56, nonce);
  memcpy(msg + 64, addr, addrLen);
  snprintf((char*)msg + 64 + MSCCLPP_NET_ADDR_MAX, HELLO_PROV, "%.31s", mscclppNetDescribe(net));
  const struct mscclppMemBootstrap* bs = &mcfg->bootstrap;
  res = bs->send(bs->ctx, c->remoteRank, c->tag, msg, sizeof(msg));
  if (res == mscclppSuccess) res = bs->recv(bs->ctx, c->remoteRank, c->tag, msg, sizeof(msg));
  if (res != mscclppSuccess) goto fail_remove;
  char theirProv[HELLO_PROV];
  memcpy(theirProv, msg + 64 + MSCCLPP_NET_ADDR_MAX, HELLO_PROV);
  theirProv[HELLO_PROV - 1] = '\0';
  size_t theirLen = mscclppGetLE16(msg + 6);
  uint32_t theirId = mscclppGetLE32(msg + 8), theirFlags = mscclppGetLE32(msg + 12);
  if (mscclppGetLE32(msg) != HELLO_MAGIC || mscclppGetLE16(msg + 4) != HELLO_VERSION || theirLen == 0 ||
      theirLen > MSCCLPP_NET_ADDR_MAX || theirId >= MSCCLPP_NET_MAX_CONNS || (theirFlags & ~1u) ||
      ((theirFlags & 1u) && (mscclppGetLE32(msg + 48) != MSCCLPP_NET_STAGE_SLOTS ||
                             mscclppGetLE32(msg + 52) != MSCCLPP_NET_STAGE_CHUNK))) {
    res = mscclppErr(mscclppRemoteError, MSCCLPP_LOG_NET,
                     "rank %d sent a malformed network connection message on tag %d (address %zu bytes, id %u, flags "
                     "0x%x)",
                     c->remoteRank, c->tag, theirLen, theirId, theirFlags);
    goto fail_remove;
  }
  char mine[HELLO_PROV];
  snprintf(mine, sizeof(mine), "%.31s", mscclppNetDescribe(net));
  if (strncmp(mine, theirProv, strcspn(mine, " ")) != 0 || strcspn(mine, " ") != strcspn(theirProv, " ")) {
    res = mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_NET,
                     "rank %d uses network provider '%s' and rank %d '%s': set the same MSCCLPP_NET_PROVIDER on both",
                     c->rank, mine, c->remoteRank, theirProv);
    goto fail_remove;
  }
  nc->peerId = theirId;
  l->peerCtrlAddr = mscclppGetLE64(msg + 16);
  l->peerCtrlKey = mscclppGetLE64(msg + 24);
  uint64_t theirNonce = mscclppGetLE64(msg + 56);
  res = mscclppNetInsertPeer(net, msg + 64, theirLen, &nc->fiAddr);
  if (res != mscclppSuccess) goto fail_remove;
  if (theirFlags & 1u) {
    res = mscclppNetStageOpenSend(l, gpu, mscclppGetLE64(msg + 32), mscclppGetLE64(msg + 40));
    if (res != mscclppSuccess) goto fail_remove;
  }

  /* ---- prove the data path both ways ---- */
  mscclppNetConnPublish(net, nc);
  struct mscclppNetOp* o = mscclppNetOpGet(net);
  if (o == NULL) {
    res = mscclppSystemError;
    goto fail_remove;
  }
  o->nc = nc;
  o->what = "signal";
  mscclppNetOpInject(o, &theirNonce, sizeof(theirNonce), l->peerCtrlAddr + offsetof(struct mscclppNetCtrl, hello),
                     l->peerCtrlKey);
  res = mscclppNetSubmit(net, o);
  /* errors name both ranks, the provider and "unreachable" (engine.c) */
  if (res == mscclppSuccess)
    res = mscclppNetWaitWord(net, nc, &l->ctrl->hello, nonce, "connection greeting (proving the network path)");
  if (res == mscclppSuccess) res = mscclppNetWaitIdle(net, nc, "connection greeting (proving the network path)");
  if (res != mscclppSuccess) goto fail_remove;
  c->priv = l;
  if (!mscclppNetHasHmem(net)) c->caps |= MSCCLPP_TRANSPORT_CAP_STAGES_DEVICE;
  MSCCLPP_INFO(MSCCLPP_LOG_NET, "rank %d connected to rank %d (tag %d) over %s%s", c->rank, c->remoteRank, c->tag,
               mscclppNetDescribe(net), l->recv.ring ? " with a staging ring" : "");
  return mscclppSuccess;
fail_remove:
  mscclppNetConnRemove(net, nc);
  return res;
}

static mscclppResult_t netClose(struct mscclppConnection* c) {
  struct mscclppNetLink* l = c->priv;
  if (l == NULL) return mscclppSuccess;
  struct mscclppNetConn* nc = &l->eng;
  mscclppResult_t res = mscclppNetWaitIdle(nc->net, nc, "closing the connection");
  mscclppNetConnRemove(nc->net, nc);
  c->priv = NULL;
  return res;
}

/* The local descriptor of src (providers with FI_MR_LOCAL) and whether it is
 * device memory. */
static mscclppResult_t sourceOf(struct mscclppRegisteredMemory* src, void** desc) {
  *desc = NULL;
  struct mscclppRegisteredMemory* reg = src;
  if (src->origin != MSCCLPP_MEM_REGISTERED) {
    size_t off = 0;
    MSCCLPP_RETURN_ON_ERROR(mscclppMemLookup(src->ctx, src->ptr, (size_t)src->size, &reg, &off));
  }
  MSCCLPP_RETURN_ON_ERROR(mscclppMemPrepare(reg, mscclppTransportNet));
  *desc = ((const struct mscclppNetReg*)mscclppMemHookHandle(reg, mscclppTransportNet))->desc;
  return mscclppSuccess;
}

static mscclppResult_t needNet(const struct mscclppConnection* c, const struct mscclppRegisteredMemory* m,
                               const char* what) {
  if (!m->record.hasNet)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_NET,
                      "%s memory %llu of rank %d carries no network registration (register it for transport Net, "
                      "after a Net connection exists or before its record is sent)",
                      what, (unsigned long long)m->record.memId, m->ownerRank);
  (void)c;
  return mscclppSuccess;
}

static uint32_t fencedFlag(const struct mscclppNet* net) {
  return mscclppNetSignalModeOf(net) == MSCCLPP_NET_SIGNAL_FENCED ? MSCCLPP_NET_OP_DELIVERY : 0u;
}

static int staged(const struct mscclppRegisteredMemory* m) {
  return (m->record.net.flags & MSCCLPP_MEM_NET_STAGED) != 0;
}

static mscclppResult_t netWrite(struct mscclppConnection* c, struct mscclppRegisteredMemory* dst, uint64_t dstOffset,
                                struct mscclppRegisteredMemory* src, uint64_t srcOffset, uint64_t size) {
  struct mscclppNetLink* l = c->priv;
  struct mscclppNetConn* nc = &l->eng;
  struct mscclppNet* net = nc->net;
  MSCCLPP_RETURN_ON_ERROR(needNet(c, dst, "destination"));
  void* desc = NULL;
  MSCCLPP_RETURN_ON_ERROR(sourceOf(src, &desc));
  const int srcDevice = !src->hostAccessible;
  const uint8_t* s = (const uint8_t*)src->ptr + srcOffset;
  if (!staged(dst) && !(srcDevice && !mscclppNetHasHmem(net))) {
    for (uint64_t off = 0; off < size;) {
      uint64_t n = size - off < WRITE_PIECE ? size - off : WRITE_PIECE;
      struct mscclppNetOp* o = mscclppNetOpGet(net);
      if (o == NULL) return mscclppSystemError;
      o->nc = nc;
      o->what = "write";
      o->flags = fencedFlag(net);
      o->nIov = 1;
      o->iov[0].buf = s + off;
      o->iov[0].desc = desc;
      o->iov[0].len = (size_t)n;
      o->nRma = 1;
      o->rma[0].addr = dst->record.net.addr + dstOffset + off;
      o->rma[0].key = dst->record.net.key;
      o->rma[0].len = (size_t)n;
      MSCCLPP_RETURN_ON_ERROR(mscclppNetSubmit(net, o));
      off += n;
    }
    return mscclppSuccess;
  }
  if (!l->send.peerHasRing)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_NET,
                      "write to memory %llu of rank %d needs staging (GPU memory, provider %s without FI_HMEM), but "
                      "rank %d keeps no staging ring on this connection",
                      (unsigned long long)dst->record.memId, dst->ownerRank, mscclppNetDescribe(net), c->remoteRank);
  return mscclppNetStageWrite(l, dst->record.addr + dstOffset, s, desc, size, srcDevice && !mscclppNetHasHmem(net));
}

/* The receiver's address of a signal destination (its own pointer). */
static uint64_t sigAddrOf(const struct mscclppRegisteredMemory* dst, uint64_t dstOffset) {
  return dst->record.addr + dstOffset;
}

static int hostKind(mscclppMemKind_t k) { return k != mscclppMemKindDevice && k != mscclppMemKindDeviceCuMem; }

/* With net->lock held (one acquisition per signal or inline put). */
static mscclppResult_t signalLocked(struct mscclppConnection* c, struct mscclppRegisteredMemory* dst,
                                    uint64_t dstOffset, uint64_t value) {
  struct mscclppNetLink* l = c->priv;
  struct mscclppNet* net = l->eng.net;
  const int viaRing = staged(dst) || l->send.stagedSinceSignal || mscclppNetStageRingBusy(l);
  if (viaRing && !l->send.peerHasRing)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_NET,
                      "signal to memory %llu of rank %d needs staging, but rank %d keeps no staging ring",
                      (unsigned long long)dst->record.memId, dst->ownerRank, c->remoteRank);
  if (viaRing) return mscclppNetStageSignalLocked(l, sigAddrOf(dst, dstOffset), value);
  int index = mscclppNetSigFind(&l->sig, sigAddrOf(dst, dstOffset));
  struct mscclppNetOp* o = mscclppNetOpGetLocked(net);
  if (o == NULL) return mscclppSystemError;
  o->nc = &l->eng;
  if (index >= 0) {
    /* the word counts through remote CQ data now: so must this signal */
    o->what = "inline write";
    mscclppNetOpInject(o, &value, sizeof(value), l->peerCtrlAddr + offsetof(struct mscclppNetCtrl, sigScratch),
                       l->peerCtrlKey);
    o->flags |= fencedFlag(net);
    mscclppNetSigMark(o, l, index, value);
  } else {
    o->what = "signal";
    mscclppNetOpInject(o, &value, sizeof(value), dst->record.net.addr + dstOffset, dst->record.net.key);
    o->fence = mscclppNetSignalModeOf(net) == MSCCLPP_NET_SIGNAL_FENCED;
  }
  return mscclppNetSubmitLocked(net, o);
}

static mscclppResult_t netSignal(struct mscclppConnection* c, struct mscclppRegisteredMemory* dst, uint64_t dstOffset,
                                 uint64_t value) {
  MSCCLPP_RETURN_ON_ERROR(needNet(c, dst, "signal destination"));
  struct mscclppNetLink* l = c->priv;
  pthread_mutex_t* lock = mscclppNetLock(l->eng.net);
  pthread_mutex_lock(lock);
  mscclppResult_t res = signalLocked(c, dst, dstOffset, value);
  pthread_mutex_unlock(lock);
  return res;
}

/* With net->lock held. */
static mscclppResult_t writeInlineLocked(struct mscclppConnection* c, struct mscclppRegisteredMemory* dst,
                                         uint64_t dstOffset, const void* bytes, uint32_t size,
                                         struct mscclppRegisteredMemory* sigDst, uint64_t sigOffset,
                                         uint64_t sigValue) {
  struct mscclppNetLink* l = c->priv;
  struct mscclppNet* net = l->eng.net;
  const int sigStaged =
      sigDst != NULL && (staged(sigDst) || l->send.stagedSinceSignal || mscclppNetStageRingBusy(l));
  if (staged(dst) || sigStaged) {
    /* one INLINE slot of the ring: the bytes, then the signal, applied by the receiver in order */
    if (!l->send.peerHasRing)
      return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_NET,
                        "inline write to memory %llu of rank %d needs staging, but rank %d keeps no staging ring",
                        (unsigned long long)dst->record.memId, dst->ownerRank, c->remoteRank);
    return mscclppNetStageInlineLocked(l, dst->record.addr + dstOffset, bytes, size,
                                       sigDst != NULL ? sigAddrOf(sigDst, sigOffset) : 0, sigValue);
  }
  int index = -1, twoTargets = 0;
  if (sigDst != NULL && hostKind(sigDst->kind)) {
    index = mscclppNetSigFind(&l->sig, sigAddrOf(sigDst, sigOffset));
    /* a word already counted through CQ data stays so (the receiver adds
     * one per such signal; a second target writes the absolute value) */
    twoTargets = index < 0 && mscclppNetHasTwoTargetSignals(net);
    if (index < 0 && !twoTargets) MSCCLPP_RETURN_ON_ERROR(mscclppNetSigAddLocked(l, sigAddrOf(sigDst, sigOffset), &index));
  }
  struct mscclppNetOp* o = mscclppNetOpGetLocked(net);
  if (o == NULL) return mscclppSystemError;
  o->nc = &l->eng;
  o->what = "inline write";
  mscclppNetOpInject(o, bytes, size, dst->record.net.addr + dstOffset, dst->record.net.key);
  o->flags |= fencedFlag(net);
  if (index >= 0) mscclppNetSigMark(o, l, index, sigValue);
  if (twoTargets) { /* the bytes, then the semaphore's new value, in one message */
    o->data[1] = sigValue;
    o->nIov = 2;
    o->iov[1].buf = &o->data[1];
    o->iov[1].desc = NULL;
    o->iov[1].len = sizeof(uint64_t);
    o->nRma = 2;
    o->rma[1].addr = sigDst->record.net.addr + sigOffset;
    o->rma[1].key = sigDst->record.net.key;
    o->rma[1].len = sizeof(uint64_t);
  }
  MSCCLPP_RETURN_ON_ERROR(mscclppNetSubmitLocked(net, o));
  /* no table entry (no remote CQ data, table full, a GPU semaphore): an ordinary signal behind the bytes */
  return sigDst != NULL && index < 0 && !twoTargets ? signalLocked(c, sigDst, sigOffset, sigValue) : mscclppSuccess;
}

/* The bytes and the signal under one acquisition of the endpoint's lock. */
static mscclppResult_t netWriteInline(struct mscclppConnection* c, struct mscclppRegisteredMemory* dst,
                                      uint64_t dstOffset, const void* bytes, uint32_t size,
                                      struct mscclppRegisteredMemory* sigDst, uint64_t sigOffset, uint64_t sigValue) {
  MSCCLPP_RETURN_ON_ERROR(needNet(c, dst, "destination"));
  if (sigDst != NULL) MSCCLPP_RETURN_ON_ERROR(needNet(c, sigDst, "signal destination"));
  struct mscclppNetLink* l = c->priv;
  pthread_mutex_t* lock = mscclppNetLock(l->eng.net);
  pthread_mutex_lock(lock);
  mscclppResult_t res = writeInlineLocked(c, dst, dstOffset, bytes, size, sigDst, sigOffset, sigValue);
  pthread_mutex_unlock(lock);
  return res;
}

static mscclppResult_t netFlush(struct mscclppConnection* c) {
  struct mscclppNetLink* l = c->priv;
  return mscclppNetWaitIdle(l->eng.net, &l->eng, "flush");
}

static mscclppResult_t netQuery(struct mscclppConnection* c, int* idle) {
  struct mscclppNetLink* l = c->priv;
  return mscclppNetProgress(l->eng.net, &l->eng, idle);
}

static mscclppResult_t netProgress(struct mscclppConnection* c) {
  struct mscclppNetLink* l = c->priv;
  return mscclppNetProgress(l->eng.net, &l->eng, NULL);
}

/* Offered when libfabric loads; the provider is opened only if the network
 * is chosen (its errors are reported then). */
static int netAvailable(const struct mscclppEndpoint* local, int wanted) {
  (void)local;
  return wanted && mscclppNetLibAvailable();
}

static const char* netStatus(void) {
  static __thread char text[300];
  snprintf(text, sizeof(text), "libfabric: %s", mscclppNetLibAvailable() ? "loaded" : mscclppNetLibError());
  return text;
}

/* Semaphores in pinned host memory on both backends: the provider (or, when
 * staging, the receiving proxy) writes them and kernels poll them; a
 * HostShared arena may predate the network connection and then lacks the
 * Net registration. */
static const struct mscclppTransportAttrs netAttrs = {
    .caps = MSCCLPP_TRANSPORT_CAP_WRITE_INLINE | MSCCLPP_TRANSPORT_CAP_NEEDS_PROGRESS |
            MSCCLPP_TRANSPORT_CAP_CROSS_HOST,
    .semDevice = MSCCLPP_TRANSPORT_SEM_PINNED,
    .semAuto = MSCCLPP_TRANSPORT_SEM_PINNED};

const struct mscclppTransportOps mscclppTransportNetOps = {
    .name = "Net",
    .transport = mscclppTransportNet,
    .attrs = &netAttrs,
    .available = netAvailable,
    .status = netStatus,
    .check = netCheck,
    .open = netOpen,
    .close = netClose,
    .write = netWrite,
    .signal = netSignal,
    .writeInline = netWriteInline,
    .flush = netFlush,
    .query = netQuery,
    .progress = netProgress,
};
