/* Transport Net: RMA over libfabric (verbs, efa, tcp;ofi_rxm, ...) between
 * ranks on different hosts (or, asked for explicitly, on one host).
 *
 * open   - attach the rank's endpoint (net_ofi.c) on first use; exchange
 *          endpoint addresses and a registered control block through the
 *          bootstrap; each side writes the other's greeting into its control
 *          block with RMA and waits for its own, which proves the data path
 *          both ways ("peer unreachable" is decided here, bounded by
 *          MSCCLPP_TIMEOUT).
 * write  - RMA writes (fi_writemsg), split at the provider's message size;
 *          posted at once, or queued in order while the provider's queue is
 *          full (-FI_EAGAIN, tx queue size).
 * signal - per provider (net_ofi.h, mscclppNetSignalMode):
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
 *          H200 VM's CPUs the second-target form took the 8-byte
 *          putWithSignal ping-pong from 1.55-1.60x a raw fi_inject_write
 *          ping-pong to 1.06-1.18x (bench/RESULTS.md, 2026-12-03).
 * flush  - wait until every operation of the connection has completed
 *          locally (sources reusable); reads the completion queue while
 *          waiting; bounded and abortable.
 * query / progress - read the completion queue without waiting (manual
 *          progress providers place incoming data only then).
 *
 * Staging (GPU memory and a provider without FI_HMEM): memory the provider
 * cannot reach is registered "staged" (record flag). A side that may
 * receive staged data keeps a ring of MSCCLPP_NET_STAGE_SLOTS slots (header
 * + 1 MiB chunk) in pinned host memory per connection. The sender writes
 * header + chunk into the next slot with remote CQ data naming the
 * connection and slot (a device source is first copied to a pinned bounce
 * slot); the receiver, when it reads that completion, checks the header
 * (sequence, length, destination inside one of its Net registrations) and
 * copies the chunk to its destination (cudaMemcpyAsync on its stream; memcpy
 * for host memory). Signals after staged data travel the same ring and are
 * applied only once every earlier copy has completed (stream-ordered for a
 * device semaphore). The receiver returns credits (slots consumed) with an
 * 8-byte write into the sender's control block; the sender never has more
 * than MSCCLPP_NET_STAGE_SLOTS slots outstanding. Chunks pipeline: the
 * network carries chunk k+1 while the GPU copies chunk k.
 *
 * Signals with remote CQ data (providers with 4 bytes of it and 8-byte
 * injects, when an inline put cannot carry its signal as a second target):
 * the first time a connection signals a host semaphore word, the
 * sender writes the word's address (the receiver's own) into the next free
 * entry of the receiver's signal table (its control block), ordered before
 * what follows as a signal is; from then on EVERY signal to that word is a
 * write carrying remote CQ data (table index, the value's low byte): the
 * inline put's bytes, or 8 bytes into the control block's scratch word.
 * The receiver's proxy, reading the completion, checks the entry (8-byte
 * aligned, inside a host memory it registered for Net) and advances the
 * word by one; the low byte must match. Since every later signal to the
 * word takes this path, in order, the receiver's count is exact. Signals
 * while staged messages are not yet consumed by the receiver (credits
 * behind) go through the ring instead, so that none overtakes a signal the
 * receiver still holds back. Without remote CQ data, or with the table
 * full, or for a semaphore in GPU memory: the injected write and an
 * ordinary signal (two messages).
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
#include "transport/net/net_ofi.h"
#include "transport/transport.h"

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

static void* alignedZalloc(size_t bytes) {
  void* p = NULL;
  size_t n = (bytes + 4095) & ~(size_t)4095;
  if (posix_memalign(&p, 4096, n) != 0) return NULL;
  memset(p, 0, n);
  return p;
}

static void ncDestroy(struct mscclppNetConn* nc) {
  struct mscclppNet* net = nc->net;
  mscclppNetDeregister(net, &nc->ctrlReg);
  mscclppNetDeregister(net, &nc->ringReg);
  mscclppNetDeregister(net, &nc->hdrReg);
  mscclppNetDeregister(net, &nc->bounceReg);
  if (nc->ringPinned) (void)mscclppGpuIpcHostUnregister(nc->ring);
  if (nc->bouncePinned) (void)mscclppGpuIpcHostUnregister(nc->bounce);
  if (nc->stream) mscclppGpuIpcStreamDestroy(nc->stream);
  if (nc->sendStream) mscclppGpuIpcStreamDestroy(nc->sendStream);
  free(nc->ctrl);
  free(nc->ring);
  free(nc->hdrs);
  free(nc->bounce);
  free(nc);
}

/* Pinned (when there is a GPU) and registered host buffer. */
static mscclppResult_t hostBuffer(struct mscclppNet* net, int gpu, size_t bytes, uint8_t** ptr,
                                  struct mscclppMemNetReg* reg, int* pinned) {
  uint8_t* p = alignedZalloc(bytes);
  if (p == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_NET, "cannot allocate %zu bytes for staging", bytes);
  *ptr = p;
  if (gpu) {
    void* dev = NULL;
    MSCCLPP_RETURN_ON_ERROR(mscclppGpuIpcHostRegister(p, (bytes + 4095) & ~(size_t)4095, &dev));
    *pinned = 1;
  }
  return mscclppNetRegisterHost(net, p, bytes, reg);
}

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
  struct mscclppNetConn* nc = calloc(1, sizeof(*nc));
  if (nc == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_NET, "cannot allocate a network connection");
  nc->net = net;
  nc->conn = c;
  nc->rank = c->rank;
  nc->peerRank = c->remoteRank;
  nc->destroy = ncDestroy;
  mscclppResult_t res = mscclppNetConnAdd(net, nc);
  if (res != mscclppSuccess) {
    free(nc);
    return res;
  }
  const int gpu = mscclppMemContextHasGpu(c->mctx);
  int staging = (gpu && !mscclppNetHasHmem(net));
  uint64_t nonce = 0;
  if (mscclppRandomBytes(&nonce, sizeof(nonce)) != mscclppSuccess) nonce = mscclppTimeNs();
  nonce |= 1; /* never 0, the block's initial value */
  nc->ctrl = alignedZalloc(sizeof(struct mscclppNetCtrl));
  if (nc->ctrl == NULL) {
    res = mscclppErr(mscclppSystemError, MSCCLPP_LOG_NET, "cannot allocate a control block");
    goto fail_remove;
  }
  res = mscclppNetRegisterHost(net, nc->ctrl, sizeof(struct mscclppNetCtrl), &nc->ctrlReg);
  if (res != mscclppSuccess) goto fail_remove;
  /* Forced staging (tests) registers host memory as staged: receive rings
   * are needed then too. */
  if (mscclppNetTestStagingOn()) staging = 1;
  if (staging) {
    res = hostBuffer(net, gpu, (size_t)MSCCLPP_NET_STAGE_SLOTS * MSCCLPP_NET_STAGE_SLOT_BYTES, &nc->ring, &nc->ringReg,
                     &nc->ringPinned);
    if (res == mscclppSuccess && gpu) res = mscclppGpuIpcStreamCreate(&nc->stream);
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
  mscclppPutLE32(msg + 12, nc->ring ? 1u : 0u);
  mscclppPutLE64(msg + 16, nc->ctrlReg.addr);
  mscclppPutLE64(msg + 24, nc->ctrlReg.key);
  mscclppPutLE64(msg + 32, nc->ring ? nc->ringReg.addr : 0);
  mscclppPutLE64(msg + 40, nc->ring ? nc->ringReg.key : 0);
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
  nc->peerCtrlAddr = mscclppGetLE64(msg + 16);
  nc->peerCtrlKey = mscclppGetLE64(msg + 24);
  nc->peerHasRing = (theirFlags & 1u) != 0;
  nc->peerRingAddr = mscclppGetLE64(msg + 32);
  nc->peerRingKey = mscclppGetLE64(msg + 40);
  uint64_t theirNonce = mscclppGetLE64(msg + 56);
  res = mscclppNetInsertPeer(net, msg + 64, theirLen, &nc->fiAddr);
  if (res != mscclppSuccess) goto fail_remove;
  if (nc->peerHasRing) {
    int unpinned = 0;
    res = hostBuffer(net, 0, (size_t)MSCCLPP_NET_STAGE_SLOTS * MSCCLPP_NET_STAGE_HEADER, &nc->hdrs, &nc->hdrReg,
                     &unpinned);
    if (res == mscclppSuccess && gpu) {
      res = hostBuffer(net, gpu, (size_t)MSCCLPP_NET_STAGE_SLOTS * MSCCLPP_NET_STAGE_CHUNK, &nc->bounce,
                       &nc->bounceReg, &nc->bouncePinned);
      if (res == mscclppSuccess) res = mscclppGpuIpcStreamCreate(&nc->sendStream);
    }
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
  o->kind = MSCCLPP_NET_OP_SIGNAL;
  o->raddr = nc->peerCtrlAddr + offsetof(struct mscclppNetCtrl, hello);
  o->rkey = nc->peerCtrlKey;
  o->value = theirNonce;
  res = mscclppNetSubmit(net, o);
  /* errors name both ranks, the provider and "unreachable" (net_ofi.c) */
  if (res == mscclppSuccess)
    res = mscclppNetWaitWord(net, nc, &nc->ctrl->hello, nonce, "connection greeting (proving the network path)");
  if (res == mscclppSuccess) res = mscclppNetWaitIdle(net, nc, "connection greeting (proving the network path)");
  if (res != mscclppSuccess) goto fail_remove;
  c->net = nc;
  MSCCLPP_INFO(MSCCLPP_LOG_NET, "rank %d connected to rank %d (tag %d) over %s%s", c->rank, c->remoteRank, c->tag,
               mscclppNetDescribe(net), nc->ring ? " with a staging ring" : "");
  return mscclppSuccess;
fail_remove:
  mscclppNetConnRemove(net, nc);
  return res;
}

static mscclppResult_t netClose(struct mscclppConnection* c) {
  struct mscclppNetConn* nc = c->net;
  if (nc == NULL) return mscclppSuccess;
  mscclppResult_t res = mscclppNetWaitIdle(nc->net, nc, "closing the connection");
  mscclppNetConnRemove(nc->net, nc);
  c->net = NULL;
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
  MSCCLPP_RETURN_ON_ERROR(mscclppMemNetPrepare(reg));
  *desc = reg->net.desc;
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

static void stageHeader(struct mscclppNetOp* o, uint32_t type, uint64_t addr, uint64_t len, uint64_t value) {
  memset(o->hdr, 0, sizeof(o->hdr));
  mscclppPutLE32(o->hdr, MSCCLPP_NET_STAGE_MAGIC);
  mscclppPutLE32(o->hdr + 4, type);
  mscclppPutLE64(o->hdr + 16, addr);
  mscclppPutLE64(o->hdr + 24, len);
  mscclppPutLE64(o->hdr + 32, value);
}

static mscclppResult_t netWrite(struct mscclppConnection* c, struct mscclppRegisteredMemory* dst, uint64_t dstOffset,
                                struct mscclppRegisteredMemory* src, uint64_t srcOffset, uint64_t size) {
  struct mscclppNetConn* nc = c->net;
  struct mscclppNet* net = nc->net;
  MSCCLPP_RETURN_ON_ERROR(needNet(c, dst, "destination"));
  void* desc = NULL;
  MSCCLPP_RETURN_ON_ERROR(sourceOf(src, &desc));
  const int srcDevice = !src->hostAccessible;
  const int staged = (dst->record.net.flags & MSCCLPP_MEM_NET_STAGED) || (srcDevice && !mscclppNetHasHmem(net));
  const uint8_t* s = (const uint8_t*)src->ptr + srcOffset;
  if (!staged) {
    for (uint64_t off = 0; off < size;) {
      uint64_t n = size - off < WRITE_PIECE ? size - off : WRITE_PIECE;
      struct mscclppNetOp* o = mscclppNetOpGet(net);
      if (o == NULL) return mscclppSystemError;
      o->nc = nc;
      o->kind = MSCCLPP_NET_OP_WRITE;
      o->buf = s + off;
      o->desc = desc;
      o->len = (size_t)n;
      o->raddr = dst->record.net.addr + dstOffset + off;
      o->rkey = dst->record.net.key;
      MSCCLPP_RETURN_ON_ERROR(mscclppNetSubmit(net, o));
      off += n;
    }
    return mscclppSuccess;
  }
  if (!nc->peerHasRing)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_NET,
                      "write to memory %llu of rank %d needs staging (GPU memory, provider %s without FI_HMEM), but "
                      "rank %d keeps no staging ring on this connection",
                      (unsigned long long)dst->record.memId, dst->ownerRank, mscclppNetDescribe(net), c->remoteRank);
  for (uint64_t off = 0; off < size; off += MSCCLPP_NET_STAGE_CHUNK) {
    uint64_t n = size - off < MSCCLPP_NET_STAGE_CHUNK ? size - off : MSCCLPP_NET_STAGE_CHUNK;
    struct mscclppNetOp* o = mscclppNetOpGet(net);
    if (o == NULL) return mscclppSystemError;
    o->nc = nc;
    o->kind = MSCCLPP_NET_OP_STAGE;
    o->needsCredit = 1;
    o->buf = s + off;
    o->desc = desc;
    o->len = (size_t)n;
    o->bounceFromDevice = srcDevice && !mscclppNetHasHmem(net);
    stageHeader(o, MSCCLPP_NET_STAGE_DATA, dst->record.addr + dstOffset + off, n, 0);
    nc->stageSubmitted++;
    MSCCLPP_RETURN_ON_ERROR(mscclppNetSubmit(net, o));
  }
  nc->stagedSinceSignal = 1;
  return mscclppSuccess;
}

/* Staged messages the receiver has not consumed yet: a signal now must
 * travel the ring too, behind any signal it holds back. */
static int ringBusy(struct mscclppNetConn* nc) {
  return nc->peerHasRing && nc->stageSubmitted != __atomic_load_n(&nc->ctrl->credits, __ATOMIC_ACQUIRE);
}

/* The receiver's address of a signal destination (its own pointer). */
static uint64_t sigAddrOf(const struct mscclppRegisteredMemory* dst, uint64_t dstOffset) {
  return dst->record.addr + dstOffset;
}

/* The index of `addr` in the connection's signal table, or -1. */
static int sigFind(struct mscclppNetConn* nc, uint64_t addr) {
  if (nc->nSigs > 0 && nc->sigAddrs[nc->lastSig] == addr) return (int)nc->lastSig;
  for (uint32_t i = 0; i < nc->nSigs; i++)
    if (nc->sigAddrs[i] == addr) {
      nc->lastSig = i;
      return (int)i;
    }
  return -1;
}

/* The op carrying a signal as remote CQ data, `len` bytes of `value` to
 * raddr/rkey (the inline payload, or the scratch word). */
static void cqSignalOp(struct mscclppNetOp* o, struct mscclppNetConn* nc, int index, uint64_t sigValue) {
  o->kind = MSCCLPP_NET_OP_INLINE;
  o->cqData = MSCCLPP_NET_CQ_SIGNAL | nc->peerId << 16 | (uint32_t)index << 8 | (uint32_t)(sigValue & 0xffu);
  o->fence = mscclppNetSignalModeOf(nc->net) == MSCCLPP_NET_SIGNAL_FENCED;
}

/* With net->lock held: put `addr` into the peer's signal table (a free
 * entry; -1 when full or the provider has no remote CQ data). The entry's
 * write is submitted before any signal that names it, and ordered before
 * them as signals are (fenced providers: those wait for its delivery). */
static mscclppResult_t sigAddLocked(struct mscclppNetConn* nc, uint64_t addr, int* index) {
  *index = -1;
  if (!mscclppNetHasCqSignals(nc->net) || nc->nSigs >= MSCCLPP_NET_SIG_SLOTS) return mscclppSuccess;
  struct mscclppNetOp* o = mscclppNetOpGetLocked(nc->net);
  if (o == NULL) return mscclppSystemError;
  uint32_t i = nc->nSigs++;
  nc->sigAddrs[i] = addr;
  nc->lastSig = i;
  o->nc = nc;
  o->kind = MSCCLPP_NET_OP_INLINE;
  o->len = sizeof(uint64_t);
  o->value = addr;
  o->raddr = nc->peerCtrlAddr + offsetof(struct mscclppNetCtrl, sigAddr) + (uint64_t)i * sizeof(uint64_t);
  o->rkey = nc->peerCtrlKey;
  *index = (int)i;
  return mscclppNetSubmitLocked(nc->net, o);
}

static int hostKind(mscclppMemKind_t k) { return k != mscclppMemKindDevice && k != mscclppMemKindDeviceCuMem; }

/* With net->lock held (one acquisition per signal or inline put). */
static mscclppResult_t signalLocked(struct mscclppConnection* c, struct mscclppRegisteredMemory* dst,
                                    uint64_t dstOffset, uint64_t value) {
  struct mscclppNetConn* nc = c->net;
  struct mscclppNet* net = nc->net;
  const int staged = (dst->record.net.flags & MSCCLPP_MEM_NET_STAGED) || nc->stagedSinceSignal || ringBusy(nc);
  if (staged && !nc->peerHasRing)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_NET,
                      "signal to memory %llu of rank %d needs staging, but rank %d keeps no staging ring",
                      (unsigned long long)dst->record.memId, dst->ownerRank, c->remoteRank);
  int index = staged ? -1 : sigFind(nc, sigAddrOf(dst, dstOffset));
  struct mscclppNetOp* o = mscclppNetOpGetLocked(net);
  if (o == NULL) return mscclppSystemError;
  o->nc = nc;
  if (staged) {
    o->kind = MSCCLPP_NET_OP_STAGE;
    o->needsCredit = 1;
    stageHeader(o, MSCCLPP_NET_STAGE_SIGNAL, dst->record.addr + dstOffset, 0, value);
    nc->stagedSinceSignal = 0;
    nc->stageSubmitted++;
  } else if (index >= 0) {
    /* the word counts through remote CQ data now: so must this signal */
    cqSignalOp(o, nc, index, value);
    o->len = sizeof(uint64_t);
    o->value = value;
    o->raddr = nc->peerCtrlAddr + offsetof(struct mscclppNetCtrl, sigScratch);
    o->rkey = nc->peerCtrlKey;
  } else {
    o->kind = MSCCLPP_NET_OP_SIGNAL;
    o->fence = mscclppNetSignalModeOf(net) == MSCCLPP_NET_SIGNAL_FENCED;
    o->raddr = dst->record.net.addr + dstOffset;
    o->rkey = dst->record.net.key;
    o->value = value;
  }
  return mscclppNetSubmitLocked(net, o);
}

static mscclppResult_t netSignal(struct mscclppConnection* c, struct mscclppRegisteredMemory* dst, uint64_t dstOffset,
                                 uint64_t value) {
  MSCCLPP_RETURN_ON_ERROR(needNet(c, dst, "signal destination"));
  pthread_mutex_t* lock = mscclppNetLock(c->net->net);
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
  struct mscclppNetConn* nc = c->net;
  struct mscclppNet* net = nc->net;
  const int sigStaged =
      sigDst != NULL && ((sigDst->record.net.flags & MSCCLPP_MEM_NET_STAGED) || nc->stagedSinceSignal || ringBusy(nc));
  if ((dst->record.net.flags & MSCCLPP_MEM_NET_STAGED) || sigStaged) {
    /* one INLINE slot of the ring: the bytes, then the signal, applied by the receiver in order */
    if (!nc->peerHasRing)
      return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_NET,
                        "inline write to memory %llu of rank %d needs staging, but rank %d keeps no staging ring",
                        (unsigned long long)dst->record.memId, dst->ownerRank, c->remoteRank);
    struct mscclppNetOp* o = mscclppNetOpGetLocked(net);
    if (o == NULL) return mscclppSystemError;
    o->nc = nc;
    o->kind = MSCCLPP_NET_OP_STAGE;
    o->needsCredit = 1;
    stageHeader(o, MSCCLPP_NET_STAGE_INLINE, dst->record.addr + dstOffset, size, sigDst != NULL ? sigValue : 0);
    mscclppPutLE64(o->hdr + MSCCLPP_NET_STAGE_INLINE_SIG, sigDst != NULL ? sigAddrOf(sigDst, sigOffset) : 0);
    memcpy(o->hdr + MSCCLPP_NET_STAGE_INLINE_BYTES, bytes, size);
    nc->stagedSinceSignal = sigDst == NULL;
    nc->stageSubmitted++;
    return mscclppNetSubmitLocked(net, o);
  }
  int index = -1, twoTargets = 0;
  if (sigDst != NULL && hostKind(sigDst->kind)) {
    index = sigFind(nc, sigAddrOf(sigDst, sigOffset));
    /* a word already counted through CQ data stays so (the receiver adds
     * one per such signal; a second target writes the absolute value) */
    twoTargets = index < 0 && mscclppNetHasTwoTargetSignals(net);
    if (index < 0 && !twoTargets) MSCCLPP_RETURN_ON_ERROR(sigAddLocked(nc, sigAddrOf(sigDst, sigOffset), &index));
  }
  struct mscclppNetOp* o = mscclppNetOpGetLocked(net);
  if (o == NULL) return mscclppSystemError;
  o->nc = nc;
  if (index >= 0) cqSignalOp(o, nc, index, sigValue);
  if (twoTargets) { /* the bytes, then the semaphore's new value, in one message */
    o->sigTarget = 1;
    o->sigRaddr = sigDst->record.net.addr + sigOffset;
    o->sigRkey = sigDst->record.net.key;
    o->sigValue = sigValue;
  }
  o->kind = MSCCLPP_NET_OP_INLINE;
  o->len = size;
  memcpy(&o->value, bytes, size);
  o->raddr = dst->record.net.addr + dstOffset;
  o->rkey = dst->record.net.key;
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
  pthread_mutex_t* lock = mscclppNetLock(c->net->net);
  pthread_mutex_lock(lock);
  mscclppResult_t res = writeInlineLocked(c, dst, dstOffset, bytes, size, sigDst, sigOffset, sigValue);
  pthread_mutex_unlock(lock);
  return res;
}

static mscclppResult_t netFlush(struct mscclppConnection* c) { return mscclppNetWaitIdle(c->net->net, c->net, "flush"); }

static mscclppResult_t netQuery(struct mscclppConnection* c, int* idle) {
  return mscclppNetProgress(c->net->net, c->net, idle);
}

static mscclppResult_t netProgress(struct mscclppConnection* c) { return mscclppNetProgress(c->net->net, c->net, NULL); }

int mscclppConnStagesDeviceMemory(const struct mscclppConnection* c) {
  return c != NULL && c->ops == &mscclppTransportNetOps && c->net != NULL && !mscclppNetHasHmem(c->net->net);
}

const struct mscclppTransportOps mscclppTransportNetOps = {
    .name = "Net",
    .transport = mscclppTransportNet,
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

/* ---- staging, receive side (with net->lock held; called from net_ofi.c) ---------- */

void mscclppNetStageReceivedLocked(struct mscclppNetConn* nc, uint32_t slot) {
  if (nc->error != mscclppSuccess || nc->conn == NULL) return;
  if (nc->ring == NULL) {
    mscclppNetConnFailLocked(nc, "rank %d sent staged data to rank %d, which keeps no staging ring", nc->peerRank,
                             nc->rank);
    return;
  }
  const uint8_t* s = nc->ring + (size_t)(slot % MSCCLPP_NET_STAGE_SLOTS) * MSCCLPP_NET_STAGE_SLOT_BYTES;
  uint32_t magic = mscclppGetLE32(s), type = mscclppGetLE32(s + 4);
  uint64_t seq = mscclppGetLE64(s + 8), addr = mscclppGetLE64(s + 16), len = mscclppGetLE64(s + 24),
           value = mscclppGetLE64(s + 32);
  /* what the slot asks for: data (len bytes from `bytes` to addr), then a signal (value to sigAddr) */
  uint64_t sigAddr = 0;
  const uint8_t* bytes = s + MSCCLPP_NET_STAGE_HEADER;
  int valid = slot == nc->recvSeq % MSCCLPP_NET_STAGE_SLOTS && magic == MSCCLPP_NET_STAGE_MAGIC && seq == nc->recvSeq;
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
                             nc->peerRank, nc->rank, slot, (unsigned long long)seq, (unsigned long long)nc->recvSeq,
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
  if (((m != NULL && !m->hostAccessible) || (sm != NULL && !sm->hostAccessible)) && nc->stream == NULL) {
    mscclppNetConnFailLocked(nc, "staged data for GPU memory at 0x%llx, but rank %d has no GPU stream",
                             (unsigned long long)(m != NULL && !m->hostAccessible ? addr : sigAddr), nc->rank);
    return;
  }
  nc->recvSeq++;
  mscclppResult_t res = mscclppSuccess;
  if (m != NULL) {
    if (!m->hostAccessible) {
      res = mscclppGpuIpcMemcpyAsync(nc->stream, (void*)(uintptr_t)addr, bytes, (size_t)len);
      nc->copyEnqueued = nc->recvSeq;
    } else {
      placeRemoteBytes((void*)(uintptr_t)addr, bytes, (size_t)len);
      if (nc->copyEnqueued <= nc->consumed && sm == NULL) nc->consumed = nc->recvSeq;
    }
  }
  if (res == mscclppSuccess && sm != NULL) {
    const int pending = nc->copyEnqueued > nc->consumed;
    if (!sm->hostAccessible) {
      res = mscclppGpuIpcWriteValue64Async(nc->stream, (void*)(uintptr_t)sigAddr, value); /* behind the copies */
      nc->copyEnqueued = nc->recvSeq;
    } else if (pending) {
      int i = nc->nHeld++;
      nc->heldSignals[i].addr = (uint64_t*)(uintptr_t)sigAddr;
      nc->heldSignals[i].value = value;
      nc->heldSignals[i].afterSeq = nc->recvSeq;
    } else {
      __atomic_store_n((uint64_t*)(uintptr_t)sigAddr, value, __ATOMIC_RELEASE);
      nc->consumed = nc->recvSeq;
    }
  }
  if (res != mscclppSuccess)
    mscclppNetConnFailLocked(nc, "copying staged data to GPU memory at 0x%llx failed: %s",
                             (unsigned long long)(m != NULL ? addr : sigAddr), mscclppGetLastError());
}

void mscclppNetSignalReceivedLocked(struct mscclppNetConn* nc, uint32_t index, uint32_t low) {
  if (nc->error != mscclppSuccess || nc->conn == NULL) return;
  uint64_t addr = index < MSCCLPP_NET_SIG_SLOTS ? __atomic_load_n(&nc->ctrl->sigAddr[index], __ATOMIC_ACQUIRE) : 0;
  const struct mscclppRegisteredMemory* m =
      addr != 0 && addr % 8 == 0 ? mscclppNetFindLocalLocked(nc->net, addr, sizeof(uint64_t)) : NULL;
  if (m == NULL || !m->hostAccessible) {
    mscclppNetConnFailLocked(nc,
                             "rank %d signalled rank %d through table entry %u, address 0x%llx: not an aligned word "
                             "of host memory registered for Net",
                             nc->peerRank, nc->rank, index, (unsigned long long)addr);
    return;
  }
  uint64_t* w = (uint64_t*)(uintptr_t)addr;
  uint64_t next = __atomic_load_n(w, __ATOMIC_RELAXED) + 1; /* only this connection's signals change the word */
  if ((next & 0xffu) != low) {
    mscclppNetConnFailLocked(nc,
                             "rank %d signalled rank %d out of sequence (table entry %u at 0x%llx: value byte 0x%02x "
                             "where 0x%02x was due)",
                             nc->peerRank, nc->rank, index, (unsigned long long)addr, low, (unsigned)(next & 0xffu));
    return;
  }
  __atomic_store_n(w, next, __ATOMIC_RELEASE);
}

void mscclppNetStageProgressLocked(struct mscclppNetConn* nc) {
  if (nc->error != mscclppSuccess || nc->conn == NULL) return;
  if (nc->copyEnqueued > nc->consumed) {
    int done = 0;
    if (mscclppGpuIpcStreamQuery(nc->stream, &done) != mscclppSuccess) {
      mscclppNetConnFailLocked(nc, "staging copies of rank %d failed: %s", nc->rank, mscclppGetLastError());
      return;
    }
    if (!done) return;
    for (int i = 0; i < nc->nHeld; i++)
      __atomic_store_n(nc->heldSignals[i].addr, nc->heldSignals[i].value, __ATOMIC_RELEASE);
    nc->nHeld = 0;
    nc->consumed = nc->recvSeq;
  }
  /* Credits go out ahead of the connection's queued operations (which may
   * themselves wait for the peer's credits): net_ofi.c posts them first. */
  if (nc->consumed > nc->creditSent) mscclppNetKickLocked(nc->net, nc);
}
