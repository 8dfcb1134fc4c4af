/* SPDX-License-Identifier: MIT */
/* Connections: endpoint exchange, transport selection, argument checks and
 * dispatch to the transports' ops tables. See transport.h. */
#include "transport/transport.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log.h"
#include "core/trace.h"
#include "core/util.h"
#include "gpu/gpu_ipc.h"
#include "mscclpp/trigger.h"

/* Same-host transports first: Auto takes the network only between hosts. */
const struct mscclppTransportOps* const mscclppTransports[] = {&mscclppTransportCudaIpcOps, &mscclppTransportHostShmOps,
                                                               &mscclppTransportNetOps};
const int mscclppTransportCount = (int)(sizeof(mscclppTransports) / sizeof(mscclppTransports[0]));

/* ---- selection ------------------------------------------------------------------ */

static const struct mscclppTransportOps* opsOf(uint32_t transport) {
  for (int i = 0; i < mscclppTransportCount; i++)
    if ((uint32_t)mscclppTransports[i]->transport == transport) return mscclppTransports[i];
  return NULL;
}

static void describe(const struct mscclppEndpoint* ep, char* buf, size_t len) {
  snprintf(buf, len, "rank %d (host '%s' id %016llx, pid %u, %s, transports%s%s%s)", ep->rank, ep->hostName,
           (unsigned long long)ep->hostHash, ep->pid, ep->device >= 0 ? "GPU" : "no GPU",
           (ep->available & mscclppTransportCudaIpc) ? " CudaIpc" : "",
           (ep->available & mscclppTransportHostShm) ? " HostShm" : "",
           (ep->available & mscclppTransportNet) ? " Net" : "");
}

mscclppResult_t mscclppTransportSelect(const struct mscclppEndpoint* local, const struct mscclppEndpoint* remote,
                                       const struct mscclppTransportOps** out) {
  char a[240], b[240], why[200] = "";
  describe(local, a, sizeof(a));
  describe(remote, b, sizeof(b));
  uint32_t req = local->requested ? local->requested : remote->requested;
  if (local->requested && remote->requested && local->requested != remote->requested)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_TRANSPORT,
                      "rank %d asked for transport %s and rank %d for %s on tag %d; ask for the same or Auto",
                      local->rank, mscclppTransportName((mscclppTransport_t)local->requested), remote->rank,
                      mscclppTransportName((mscclppTransport_t)remote->requested), local->tag);
  if (req != mscclppTransportAuto) {
    const struct mscclppTransportOps* ops = opsOf(req);
    if (ops == NULL)
      return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_TRANSPORT,
                        "transport %s is not available in this build (connecting %s and %s)",
                        mscclppTransportName((mscclppTransport_t)req), a, b);
    if (ops->check(local, remote, why, sizeof(why)) != mscclppSuccess)
      return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_TRANSPORT, "transport %s cannot join %s and %s: %s",
                        ops->name, a, b, why);
    *out = ops;
    return mscclppSuccess;
  }
  char reasons[600] = "";
  size_t used = 0;
  for (int i = 0; i < mscclppTransportCount; i++) {
    const struct mscclppTransportOps* ops = mscclppTransports[i];
    if (ops->check(local, remote, why, sizeof(why)) == mscclppSuccess) {
      *out = ops;
      return mscclppSuccess;
    }
    if (used < sizeof(reasons))
      used += (size_t)snprintf(reasons + used, sizeof(reasons) - used, "%s%s: %s", i ? "; " : "", ops->name, why);
  }
  char status[300] = "";
  used = 0;
  for (int i = 0; i < mscclppTransportCount; i++)
    if (mscclppTransports[i]->status != NULL && used < sizeof(status))
      used += (size_t)snprintf(status + used, sizeof(status) - used, "%s%s", used ? "; " : "",
                               mscclppTransports[i]->status());
  return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_TRANSPORT,
                    "no transport joins %s and %s (%s); ranks on different hosts need the network transport (%s)", a,
                    b, reasons, status);
}

/* ---- connections ------------------------------------------------------------------ */

mscclppResult_t mscclppConnCreate(struct mscclppMemContext* mctx, int peer, int tag, mscclppTransport_t transport,
                                  struct mscclppConnection** out) {
  if (mctx == NULL || out == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_TRANSPORT, "mscclppConnectionCreate: NULL %s",
                      mctx == NULL ? "communicator" : "conn");
  uint32_t t = (uint32_t)transport;
  const uint32_t known = mscclppTransportCudaIpc | mscclppTransportHostShm | mscclppTransportNet;
  if ((t & ~known) || (t & (t - 1)))
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_TRANSPORT,
                      "mscclppConnectionCreate: transport 0x%x is not Auto or one transport", t);
  if (peer < 0) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_TRANSPORT, "mscclppConnectionCreate: peer %d", peer);
  const struct mscclppMemConfig* cfg = mscclppMemContextConfig(mctx);
  struct mscclppConnection* c = calloc(1, sizeof(*c));
  if (c == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_TRANSPORT, "cannot allocate a connection");
  c->mctx = mctx;
  c->rank = cfg->rank;
  c->remoteRank = peer;
  c->tag = tag;
  c->timeoutSec = cfg->timeoutSec;
  c->abortFlag = cfg->abortFlag;
  struct mscclppEndpoint* ep = &c->local;
  ep->rank = cfg->rank;
  ep->peer = peer;
  ep->tag = tag;
  ep->pid = (uint32_t)getpid();
  ep->processToken = mscclppMemProcessToken();
  ep->hostHash = cfg->hostHash;
  snprintf(ep->hostName, sizeof(ep->hostName), "%s", cfg->hostName);
  ep->device = -1;
  if (mscclppMemContextHasGpu(mctx) && mscclppGpuIpcCurrentDevice(&ep->device) != mscclppSuccess) ep->device = -1;
  ep->available = 0;
  for (int i = 0; i < mscclppTransportCount; i++) {
    const struct mscclppTransportOps* ops = mscclppTransports[i];
    if (ops->available(ep, t == mscclppTransportAuto || t == (uint32_t)ops->transport))
      ep->available |= (uint32_t)ops->transport;
  }
  ep->requested = t;

  mscclppResult_t res;
  uint8_t buf[MSCCLPP_ENDPOINT_BYTES];
  mscclppEndpointEncode(ep, cfg->secret, buf);
  const struct mscclppMemBootstrap* bs = &cfg->bootstrap;
  res = bs->send(bs->ctx, peer, tag, buf, sizeof(buf));
  if (res != mscclppSuccess) goto fail_free;
  res = bs->recv(bs->ctx, peer, tag, buf, sizeof(buf));
  if (res != mscclppSuccess) goto fail_free;
  char why[200];
  if (mscclppEndpointDecode(buf, cfg->secret, &c->remote, why, sizeof(why)) != mscclppSuccess) {
    res = mscclppErr(mscclppRemoteError, MSCCLPP_LOG_TRANSPORT, "rank %d refused the endpoint of rank %d (tag %d): %s",
                     cfg->rank, peer, tag, why);
    goto fail_free;
  }
  if (c->remote.rank != peer || c->remote.peer != cfg->rank || c->remote.tag != tag) {
    res = mscclppErr(mscclppRemoteError, MSCCLPP_LOG_TRANSPORT,
                     "rank %d connecting to rank %d on tag %d got an endpoint of rank %d for rank %d on tag %d",
                     cfg->rank, peer, tag, c->remote.rank, c->remote.peer, c->remote.tag);
    goto fail_free;
  }
  c->sameProcess = c->remote.pid == ep->pid && c->remote.processToken == ep->processToken &&
                   c->remote.hostHash == ep->hostHash;
  res = mscclppTransportSelect(&c->local, &c->remote, &c->ops);
  if (res != mscclppSuccess) goto fail_free;
  c->caps = c->ops->attrs->caps;
  res = c->ops->open(c);
  if (res != mscclppSuccess) goto fail_free;
  mscclppMemContextRetain(mctx);
  MSCCLPP_INFO(MSCCLPP_LOG_TRANSPORT, "rank %d connected to rank %d (tag %d) with transport %s%s", cfg->rank, peer,
               tag, c->ops->name, c->sameProcess ? " (same process)" : "");
  *out = c;
  return mscclppSuccess;
fail_free:
  free(c);
  return res;
}

mscclppResult_t mscclppConnDestroy(struct mscclppConnection* c) {
  if (c == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_TRANSPORT, "mscclppConnectionDestroy: NULL");
  mscclppResult_t res = c->ops->close(c);
  mscclppMemContextRelease(c->mctx);
  free(c);
  return res;
}

/* Is mem usable as `what` (source on this rank, or destination on the
 * peer) of an access [offset, offset+size) on conn? */
static mscclppResult_t checkMem(const struct mscclppConnection* c, const struct mscclppRegisteredMemory* m,
                                const char* what, int wantRank, uint64_t offset, uint64_t size) {
  if (m == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_TRANSPORT, "%s: %s memory is NULL", c->ops->name, what);
  if (m->ctx != c->mctx)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_TRANSPORT,
                      "%s memory %llu of rank %d belongs to another communicator than the connection", what,
                      (unsigned long long)m->record.memId, m->ownerRank);
  if (m->ownerRank != wantRank)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_TRANSPORT,
                      "%s memory %llu belongs to rank %d, but the connection from rank %d to rank %d needs memory of "
                      "rank %d there",
                      what, (unsigned long long)m->record.memId, m->ownerRank, c->rank, c->remoteRank, wantRank);
  if (!mscclppConnCarries(c, m))
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_TRANSPORT,
                      "%s memory %llu of rank %d is not registered for transport %s (its transports: 0x%x)", what,
                      (unsigned long long)m->record.memId, m->ownerRank, c->ops->name, m->transports);
  if (offset > m->size || size > m->size - offset)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_TRANSPORT,
                      "%s range [offset %llu, +%llu bytes) runs past the end of memory %llu of rank %d (%llu bytes)",
                      what, (unsigned long long)offset, (unsigned long long)size, (unsigned long long)m->record.memId,
                      m->ownerRank, (unsigned long long)m->size);
  return mscclppSuccess;
}

static mscclppResult_t checkSignalDst(struct mscclppConnection* c, struct mscclppRegisteredMemory* dst,
                                      uint64_t dstOffset) {
  MSCCLPP_RETURN_ON_ERROR(checkMem(c, dst, "signal destination", c->remoteRank, dstOffset, sizeof(uint64_t)));
  if (((uintptr_t)dst->ptr + dstOffset) % sizeof(uint64_t) != 0)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_TRANSPORT,
                      "signal at offset %llu of memory %llu of rank %d: the address is not 8-byte aligned",
                      (unsigned long long)dstOffset, (unsigned long long)dst->record.memId, dst->ownerRank);
  return mscclppSuccess;
}

mscclppResult_t mscclppConnWrite(struct mscclppConnection* c, struct mscclppRegisteredMemory* dst, uint64_t dstOffset,
                                 struct mscclppRegisteredMemory* src, uint64_t srcOffset, uint64_t size) {
  if (c == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_TRANSPORT, "write on a NULL connection");
  MSCCLPP_RETURN_ON_ERROR(checkMem(c, dst, "destination", c->remoteRank, dstOffset, size));
  MSCCLPP_RETURN_ON_ERROR(checkMem(c, src, "source", c->rank, srcOffset, size));
  if (size == 0) return mscclppSuccess;
  uintptr_t d = (uintptr_t)dst->ptr + dstOffset, s = (uintptr_t)src->ptr + srcOffset;
  if (d < s + size && s < d + size)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_TRANSPORT,
                      "write of %llu bytes: source (offset %llu of memory %llu) and destination (offset %llu of memory "
                      "%llu) overlap",
                      (unsigned long long)size, (unsigned long long)srcOffset, (unsigned long long)src->record.memId,
                      (unsigned long long)dstOffset, (unsigned long long)dst->record.memId);
  uint64_t t0 = mscclppTraceBegin();
  mscclppResult_t res = c->ops->write(c, dst, dstOffset, src, srcOffset, size);
  if (t0 != 0)
    MSCCLPP_TRACE_EMIT(MSCCLPP_TRACE_CONN_WRITE, t0, mscclppTraceNow(), MSCCLPP_TRACE_S(c->ops->name),
                       MSCCLPP_TRACE_I(c->remoteRank), size, MSCCLPP_TRACE_I(res));
  return res;
}

mscclppResult_t mscclppConnSignal(struct mscclppConnection* c, struct mscclppRegisteredMemory* dst,
                                  uint64_t dstOffset, uint64_t value) {
  if (c == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_TRANSPORT, "signal on a NULL connection");
  MSCCLPP_RETURN_ON_ERROR(checkSignalDst(c, dst, dstOffset));
  uint64_t t0 = mscclppTraceBegin();
  mscclppResult_t res = c->ops->signal(c, dst, dstOffset, value);
  if (t0 != 0)
    MSCCLPP_TRACE_EMIT(MSCCLPP_TRACE_CONN_SIGNAL, t0, mscclppTraceNow(), MSCCLPP_TRACE_S(c->ops->name),
                       MSCCLPP_TRACE_I(c->remoteRank), value, MSCCLPP_TRACE_I(res));
  return res;
}

mscclppResult_t mscclppConnWriteInline(struct mscclppConnection* c, struct mscclppRegisteredMemory* dst,
                                       uint64_t dstOffset, const void* bytes, uint32_t size,
                                       struct mscclppRegisteredMemory* sigDst, uint64_t sigOffset, uint64_t sigValue) {
  if (c == NULL || bytes == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_TRANSPORT, "inline write on a NULL connection or payload");
  if (size < 1 || size > MSCCLPP_TRIGGER_INLINE_MAX)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_TRANSPORT, "inline write of %u bytes (1..%u)", size,
                      MSCCLPP_TRIGGER_INLINE_MAX);
  MSCCLPP_RETURN_ON_ERROR(checkMem(c, dst, "destination", c->remoteRank, dstOffset, size));
  if (sigDst != NULL) MSCCLPP_RETURN_ON_ERROR(checkSignalDst(c, sigDst, sigOffset));
  uint64_t t0 = mscclppTraceBegin();
  mscclppResult_t res = c->ops->writeInline(c, dst, dstOffset, bytes, size, sigDst, sigOffset, sigValue);
  if (t0 != 0)
    MSCCLPP_TRACE_EMIT(MSCCLPP_TRACE_CONN_INLINE, t0, mscclppTraceNow(), MSCCLPP_TRACE_S(c->ops->name),
                       MSCCLPP_TRACE_I(c->remoteRank), (uint64_t)size, (uint64_t)(sigDst != NULL),
                       MSCCLPP_TRACE_I(res));
  return res;
}

int mscclppConnCanWriteInline(const struct mscclppConnection* c) {
  return mscclppConnHasCap(c, MSCCLPP_TRANSPORT_CAP_WRITE_INLINE);
}

int mscclppConnStagesDeviceMemory(const struct mscclppConnection* c) {
  return mscclppConnHasCap(c, MSCCLPP_TRANSPORT_CAP_STAGES_DEVICE);
}

const struct mscclppTransportAttrs* mscclppConnAttrs(const struct mscclppConnection* c) { return c->ops->attrs; }

int mscclppConnHasCap(const struct mscclppConnection* c, uint32_t cap) { return c != NULL && (c->caps & cap) == cap; }

int mscclppConnCarries(const struct mscclppConnection* c, const struct mscclppRegisteredMemory* m) {
  return (m->transports & (uint32_t)c->ops->transport) != 0;
}

mscclppResult_t mscclppConnQuery(struct mscclppConnection* c, int* idle) {
  if (c == NULL || idle == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_TRANSPORT, "query on a NULL connection or output");
  return c->ops->query(c, idle);
}

int mscclppConnNeedsProgress(const struct mscclppConnection* c) {
  return mscclppConnHasCap(c, MSCCLPP_TRANSPORT_CAP_NEEDS_PROGRESS);
}

mscclppResult_t mscclppConnProgress(struct mscclppConnection* c) {
  return mscclppConnNeedsProgress(c) ? c->ops->progress(c) : mscclppSuccess;
}

mscclppResult_t mscclppConnFlush(struct mscclppConnection* c) {
  if (c == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_TRANSPORT, "flush on a NULL connection");
  uint64_t t0 = mscclppTraceBegin();
  mscclppResult_t res = c->ops->flush(c);
  if (t0 != 0)
    MSCCLPP_TRACE_EMIT(MSCCLPP_TRACE_CONN_FLUSH, t0, mscclppTraceNow(), MSCCLPP_TRACE_S(c->ops->name),
                       MSCCLPP_TRACE_I(c->remoteRank), MSCCLPP_TRACE_I(res));
  return res;
}

/* ---- for slots a transport cannot fill --------------------------------------------- */

static mscclppResult_t unsupported(const struct mscclppConnection* c, const char* op) {
  return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_TRANSPORT, "%s is not supported by transport %s", op,
                    c != NULL && c->ops != NULL ? c->ops->name : "(none)");
}

mscclppResult_t mscclppTransportUnsupportedWrite(struct mscclppConnection* c, struct mscclppRegisteredMemory* dst,
                                                 uint64_t dstOffset, struct mscclppRegisteredMemory* src,
                                                 uint64_t srcOffset, uint64_t size) {
  (void)dst;
  (void)dstOffset;
  (void)src;
  (void)srcOffset;
  (void)size;
  return unsupported(c, "write");
}

mscclppResult_t mscclppTransportUnsupportedSignal(struct mscclppConnection* c, struct mscclppRegisteredMemory* dst,
                                                  uint64_t dstOffset, uint64_t value) {
  (void)dst;
  (void)dstOffset;
  (void)value;
  return unsupported(c, "signal");
}

mscclppResult_t mscclppTransportUnsupportedWriteInline(struct mscclppConnection* c,
                                                       struct mscclppRegisteredMemory* dst, uint64_t dstOffset,
                                                       const void* bytes, uint32_t size,
                                                       struct mscclppRegisteredMemory* sigDst, uint64_t sigOffset,
                                                       uint64_t sigValue) {
  (void)dst;
  (void)dstOffset;
  (void)bytes;
  (void)size;
  (void)sigDst;
  (void)sigOffset;
  (void)sigValue;
  return unsupported(c, "inline write");
}

mscclppResult_t mscclppTransportUnsupportedFlush(struct mscclppConnection* c) { return unsupported(c, "flush"); }
