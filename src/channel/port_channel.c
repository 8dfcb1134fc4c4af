/* SPDX-License-Identifier: MIT */
/* Port channels (mscclpp/port_channel.h) and the executor that carries out
 * their triggers on the proxy thread.
 *
 * The executor is the handler of the communicator's FIFO. Its tables map a
 * trigger's ids to what the connection layer needs:
 *   memory id    -> registered memory (this rank's, or a peer's opened here)
 *   semaphore id -> connection + the peer's inbound line + an outbound count
 * and it runs the operations of one trigger in the order DATA -> FLAG ->
 * SYNC:
 *   DATA  mscclppConnWrite (CudaIpc: cudaMemcpyAsync on the connection's
 *         stream; HostShm: memcpy)
 *   FLAG  outbound += 1; mscclppConnSignal of the new count to the peer's
 *         line, ordered after the connection's earlier writes (CudaIpc to
 *         device memory: a stream-ordered 64-bit write, no CPU wait; to host
 *         memory: a plain store once the stream has drained)
 *   SYNC  every connection with copies in flight drained
 * (Net: DATA is an RMA write, FLAG an ordered or fenced 8-byte write, or a
 * staged message the peer's proxy applies; see src/transport/net/staging.h.)
 *   INLINE  (instead of DATA) the trigger's own 1..8 bytes, written with the
 *         signal by mscclppConnWriteInline (CudaIpc: one cuStreamBatchMemOp
 *         of two stream writes, no copy engine; HostShm: memcpy + store)
 * Copies stay in flight when the handler returns; the progress callback
 * (called by the proxy when the FIFO is idle) queries the streams without
 * blocking and lets the proxy publish `completed`, which is what a kernel's
 * flush waits for.
 *
 * The tables are changed only while the proxy thread is stopped (channel
 * creation and destruction stop it, change them, and start it again), so the
 * thread reads them without locks or atomics.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "channel/channel.h"
#include "core/error.h"
#include "core/log.h"
#include "core/report.h"
#include "gpu/gpu.h"
#include "gpu/gpu_ipc.h"
#include "proxy/fifo.h"

#define MAX_MEMS ((int)MSCCLPP_TRIGGER_MAX_MEMORIES)
#define MAX_SEMS ((int)MSCCLPP_TRIGGER_MAX_SEMAPHORES)

struct portSem {
  struct mscclppConnection* conn; /* NULL: free */
  struct mscclppRegisteredMemory* remote;
  uint64_t remoteOffset;
  uint32_t connIndex;
  int peer;          /* conn's remote rank + 1 (0: never used), for the hang report (which reads no connection) */
  uint64_t outbound; /* proxy thread */
};

struct portConn {
  struct mscclppConnection* conn; /* NULL: free */
  int refs;
  int dirty; /* proxy thread: copies or signals may be in flight */
  /* proxy thread, sticky: the proxy has written data through this
   * connection (a copy, or an inline put's bytes). A kernel's own store of
   * an inline put (MSCCLPP_PORT_CHANNEL_FLAG_STORE) may then have been
   * overtaken by such a write issued or still in flight after it -- the
   * proxy cannot tell when the kernel stored -- so its bytes are written
   * again, behind them. While it stays 0, nothing but the kernels' stores
   * has written through the connection, and a stored put needs no write. */
  int proxyWrote;
  int needsProgress; /* mscclppConnProgress on every idle loop (Net) */
};

struct mscclppPortExecutor {
  struct mscclppChannelContext* ctx;
  struct mscclppAbort* abort;
  int device;
  mscclppFifo_t fifo;
  mscclppProxy_t proxy;
  pthread_mutex_t lock; /* the tables and `running`, on the application side */
  int running;          /* the proxy should run; stored with __atomic (the hang report reads it) */
  struct mscclppRegisteredMemory* mems[MAX_MEMS];
  int memRefs[MAX_MEMS];
  struct portSem sems[MAX_SEMS];
  struct portConn conns[MAX_SEMS];
  int anyDirty; /* proxy thread */
  int anyProgress; /* a connection needs progress (set while the thread is stopped) */
  int connEnd;     /* conns[connEnd..] are free (set while the thread is stopped): the proxy's passes stop there */
};

/* ---- the proxy thread's side ---------------------------------------------------------- */

static mscclppProxyHandlerResult fail(struct mscclppPortExecutor* e, mscclppResult_t res, uint64_t pos,
                                      const char* what) {
  mscclppAbortRaiseLogged(e->abort, mscclppErrWrap(res == mscclppSuccess ? mscclppInternalError : res,
                                                   MSCCLPP_LOG_CHANNEL,
                                                   "port channel proxy: %s at FIFO position %" PRIu64 " failed", what,
                                                   pos));
  return mscclppProxyHandlerError;
}

static mscclppProxyHandlerResult failf(struct mscclppPortExecutor* e, mscclppResult_t res, uint64_t pos,
                                       const char* fmt, unsigned a, unsigned b) {
  char what[160];
  snprintf(what, sizeof(what), fmt, a, b);
  mscclppAbortRaisef(e->abort, res, "port channel proxy: trigger at FIFO position %" PRIu64 ": %s", pos, what);
  return mscclppProxyHandlerError;
}

/* Drain every connection with work in flight. */
static mscclppResult_t drainAll(struct mscclppPortExecutor* e) {
  for (int i = 0; i < e->connEnd; i++) {
    struct portConn* c = &e->conns[i];
    if (!c->dirty) continue;
    MSCCLPP_RETURN_ON_ERROR(mscclppConnFlush(c->conn));
    c->dirty = 0;
  }
  e->anyDirty = 0;
  return mscclppSuccess;
}

static mscclppProxyHandlerResult execHandle(void* arg, const mscclppTrigger* t, uint64_t pos) {
  struct mscclppPortExecutor* e = arg;
  mscclppTriggerFields f;
  mscclppTriggerUnpack(t, &f);
  if (f.op & ~MSCCLPP_TRIGGER_BUILTIN_MASK)
    return failf(e, mscclppInvalidUsage, pos, "operation %u (semaphore %u) is not a port channel operation", f.op,
                 f.semaphoreId);
  if (f.semaphoreId >= (uint32_t)MAX_SEMS || e->sems[f.semaphoreId].conn == NULL)
    return failf(e, mscclppInvalidArgument, pos, "semaphore id %u (op %u) is not a live port channel", f.semaphoreId,
                 f.op);
  struct portSem* s = &e->sems[f.semaphoreId];
  struct portConn* pc = &e->conns[s->connIndex];
  if (f.op & MSCCLPP_TRIGGER_DATA) {
    struct mscclppRegisteredMemory* dst = f.dstMemoryId < (uint32_t)MAX_MEMS ? e->mems[f.dstMemoryId] : NULL;
    struct mscclppRegisteredMemory* src = f.srcMemoryId < (uint32_t)MAX_MEMS ? e->mems[f.srcMemoryId] : NULL;
    if (dst == NULL || src == NULL)
      return failf(e, mscclppInvalidArgument, pos, "memory id %u (dst) or %u (src) is not a registered port memory",
                   f.dstMemoryId, f.srcMemoryId);
    mscclppResult_t res = mscclppConnWrite(s->conn, dst, f.dstOffset, src, f.srcOffset, f.size);
    if (res != mscclppSuccess) return fail(e, res, pos, "put");
    pc->dirty = 1;
    pc->proxyWrote = 1;
    e->anyDirty = 1;
  }
  int signalled = 0;
  /* A stored inline put: the pusher's own stores are the payload when the
   * proxy has never written through this connection; otherwise the bytes
   * are written again behind those writes (FIFO order; see proxyWrote). */
  int storedDone = (f.op & MSCCLPP_TRIGGER_INLINE) && mscclppTriggerInlineStored(t) && !pc->proxyWrote;
  if ((f.op & MSCCLPP_TRIGGER_INLINE) && !storedDone) {
    struct mscclppRegisteredMemory* dst = f.dstMemoryId < (uint32_t)MAX_MEMS ? e->mems[f.dstMemoryId] : NULL;
    if (dst == NULL)
      return failf(e, mscclppInvalidArgument, pos, "memory id %u (dst of an inline put, semaphore %u) is not a registered port memory",
                   f.dstMemoryId, f.semaphoreId);
    uint64_t data;
    uint32_t size;
    mscclppTriggerUnpackInline(t, &data, &size);
    uint8_t bytes[MSCCLPP_TRIGGER_INLINE_MAX];
    for (uint32_t i = 0; i < size; i++) bytes[i] = (uint8_t)(data >> (8 * i));
    signalled = (f.op & MSCCLPP_TRIGGER_FLAG) != 0;
    mscclppResult_t res = mscclppConnWriteInline(s->conn, dst, f.dstOffset, bytes, size, signalled ? s->remote : NULL,
                                                 s->remoteOffset, s->outbound + 1);
    if (res != mscclppSuccess) return fail(e, res, pos, "inline put");
    if (signalled) s->outbound++;
    pc->dirty = 1;
    pc->proxyWrote = 1;
    e->anyDirty = 1;
  }
  if ((f.op & MSCCLPP_TRIGGER_FLAG) && !signalled) {
    s->outbound++;
    mscclppResult_t res = mscclppConnSignal(s->conn, s->remote, s->remoteOffset, s->outbound);
    if (res != mscclppSuccess) return fail(e, res, pos, "signal");
    pc->dirty = 1;
    e->anyDirty = 1;
  }
  if (f.op & MSCCLPP_TRIGGER_SYNC) {
    mscclppResult_t res = drainAll(e);
    if (res != mscclppSuccess) return fail(e, res, pos, "flush");
  }
  return mscclppProxyHandlerContinue;
}

static mscclppResult_t execProgress(void* arg, int* allDone) {
  struct mscclppPortExecutor* e = arg;
  *allDone = 1;
  /* Connections that need it (Net: providers with manual progress place a
   * peer's incoming writes only while this process reads its completion
   * queue) advance on every idle loop, with or without work of our own.
   * Their completion errors (mscclppRemoteError) fail the proxy, which
   * raises the communicator's abort with that status. */
  if (!e->anyDirty && !e->anyProgress) return mscclppSuccess;
  int still = 0;
  for (int i = 0; i < e->connEnd; i++) {
    struct portConn* c = &e->conns[i];
    if (c->dirty) {
      int idle = 0;
      MSCCLPP_RETURN_ON_ERROR(mscclppConnQuery(c->conn, &idle)); /* also progresses (Net) */
      if (idle)
        c->dirty = 0;
      else
        still = 1;
    } else if (c->conn != NULL && c->needsProgress) {
      MSCCLPP_RETURN_ON_ERROR(mscclppConnProgress(c->conn));
    }
  }
  e->anyDirty = still;
  *allDone = !still;
  return mscclppSuccess;
}

/* ---- the hang report ------------------------------------------------------------------- */

/* How many pending triggers the report decodes. */
#define REPORT_TRIGGERS 4

static const char* triggerOpName(uint32_t op) {
  static const char* const names[MSCCLPP_TRIGGER_BUILTIN_MASK + 1] = {
      "none",         "put",          "signal",          "put+signal",
      "flush",        "put+flush",    "signal+flush",    "put+signal+flush",
      "inline",       "put+inline",   "inline+signal",   "put+inline+signal",
      "inline+flush", "put+inline+flush", "inline+signal+flush", "put+inline+signal+flush"};
  return op <= MSCCLPP_TRIGGER_BUILTIN_MASK ? names[op] : "user";
}

/* channel.h. Runs in a signal handler: loads only. The tables change only
 * while the proxy is stopped and under e->lock, which this does not take: a
 * half-changed entry gives a wrong number in a report, never a bad
 * pointer (no connection or memory is dereferenced). */
void mscclppPortExecutorReport(const struct mscclppPortExecutor* e, const struct mscclppReportRecord* rec) {
  const struct mscclppFifo* f = e->fifo;
  uint64_t tail = 0, completed = 0, head = 0;
  int headKnown = 0;
  mscclppFifoSnapshot(f, &tail, &completed, &head, &headKnown);
  /* the pushed triggers from the tail on, by their commit bits (a GPU's
   * head is in device memory) */
  mscclppTrigger first[REPORT_TRIGGERS];
  uint64_t pending = 0;
  for (mscclppTrigger t; pending < f->size && mscclppFifoPeek(f, tail + pending, &t); pending++)
    if (pending < REPORT_TRIGGERS) first[pending] = t;
  struct mscclppReportLine l;
  mscclppReportLineStart(&l, rec);
  mscclppReportLineStr(&l, "proxy", "port");
  mscclppReportLineStr(&l, "state", __atomic_load_n(&e->running, __ATOMIC_RELAXED) ? "running" : "stopped");
  mscclppReportLineU(&l, "tail", tail);
  if (headKnown) mscclppReportLineU(&l, "head", head);
  mscclppReportLineU(&l, "completed", completed);
  mscclppReportLineU(&l, "pending", pending);
  mscclppReportLineEmit(&l);
  for (uint64_t i = 0; i < pending && i < REPORT_TRIGGERS; i++) {
    mscclppTriggerFields fl;
    mscclppTriggerUnpack(&first[i], &fl);
    uint64_t bytes = fl.size;
    if (fl.op & MSCCLPP_TRIGGER_INLINE) {
      uint64_t data;
      uint32_t n;
      mscclppTriggerUnpackInline(&first[i], &data, &n);
      bytes = n;
    } else if (!(fl.op & MSCCLPP_TRIGGER_DATA)) {
      bytes = 0;
    }
    mscclppReportLineStart(&l, rec);
    mscclppReportLineU(&l, "trigger", tail + i);
    mscclppReportLineStr(&l, "op", triggerOpName(fl.op));
    mscclppReportLineU(&l, "chan", fl.semaphoreId);
    const int peer =
        fl.semaphoreId < (uint32_t)MAX_SEMS ? __atomic_load_n(&e->sems[fl.semaphoreId].peer, __ATOMIC_RELAXED) : 0;
    if (peer > 0) mscclppReportLineI(&l, "peer", peer - 1);
    mscclppReportLineU(&l, "bytes", bytes);
    if (fl.op & (MSCCLPP_TRIGGER_DATA | MSCCLPP_TRIGGER_INLINE)) mscclppReportLineU(&l, "dst", fl.dstMemoryId);
    if (fl.op & MSCCLPP_TRIGGER_DATA) mscclppReportLineU(&l, "src", fl.srcMemoryId);
    mscclppReportLineEmit(&l);
  }
}

/* ---- the executor ---------------------------------------------------------------------- */

mscclppResult_t mscclppPortExecutorCreate(struct mscclppChannelContext* ctx, int fifoSize,
                                          struct mscclppPortExecutor** out) {
  struct mscclppPortExecutor* e = calloc(1, sizeof(*e));
  if (e == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_CHANNEL, "cannot allocate a port executor");
  e->ctx = ctx;
  e->abort = mscclppChannelContextAbort(ctx);
  e->device = mscclppChannelContextDevice(ctx);
  pthread_mutex_init(&e->lock, NULL);
  mscclppFifoConfig fc = MSCCLPP_FIFO_CONFIG_INITIALIZER;
  fc.device = e->device;
  fc.size = fifoSize;
  fc.timeoutSec = mscclppChannelContextTimeout(ctx);
  fc.abort = e->abort;
  mscclppResult_t res = mscclppFifoCreate(&fc, &e->fifo);
  if (res != mscclppSuccess) goto fail_free;
  mscclppProxyConfig pc = MSCCLPP_PROXY_CONFIG_INITIALIZER;
  pc.device = e->device;
  pc.abort = e->abort;
  pc.timeoutSec = fc.timeoutSec;
  pc.name = "mscclpp-port";
  res = mscclppProxyCreate(&pc, &e->proxy);
  if (res != mscclppSuccess) goto fail_destroy_fifo;
  res = mscclppProxyAddFifo(e->proxy, e->fifo, execHandle, execProgress, e);
  if (res != mscclppSuccess) goto fail_destroy_proxy;
  *out = e;
  return mscclppSuccess;
fail_destroy_proxy:
  mscclppProxyDestroy(e->proxy);
fail_destroy_fifo:
  mscclppFifoDestroy(e->fifo);
fail_free:
  pthread_mutex_destroy(&e->lock);
  free(e);
  return res;
}

void mscclppPortExecutorDestroy(struct mscclppPortExecutor* e) {
  if (e == NULL) return;
  if (mscclppProxyDestroy(e->proxy) != mscclppSuccess) {
    /* A kernel is still pushing, or a handler hangs: raise the abort so that
     * everything lets go, then try once more. */
    mscclppAbortRaisef(e->abort, mscclppAborted, "communicator destroyed while its proxy was busy");
    if (mscclppProxyDestroy(e->proxy) != mscclppSuccess) { /* it logged why */
      MSCCLPP_INFO(MSCCLPP_LOG_CHANNEL, "the proxy that could not be stopped was a port channel's; it is leaked");
      return;
    }
  }
  if (mscclppFifoDestroy(e->fifo) != mscclppSuccess) /* it logged why */
    MSCCLPP_INFO(MSCCLPP_LOG_CHANNEL, "the FIFO that could not be freed was a port channel's; it is leaked");
  pthread_mutex_destroy(&e->lock);
  free(e);
}

mscclppResult_t mscclppPortExecutorStart(struct mscclppPortExecutor* e) {
  pthread_mutex_lock(&e->lock);
  mscclppResult_t res = mscclppProxyStart(e->proxy);
  if (res == mscclppSuccess) __atomic_store_n(&e->running, 1, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&e->lock);
  return res;
}

mscclppResult_t mscclppPortExecutorStop(struct mscclppPortExecutor* e) {
  pthread_mutex_lock(&e->lock);
  mscclppResult_t res = mscclppProxyStop(e->proxy);
  __atomic_store_n(&e->running, 0, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&e->lock);
  return res;
}

/* With e->lock held: stop the thread so the tables can change. */
static mscclppResult_t pauseLocked(struct mscclppPortExecutor* e) { return mscclppProxyStop(e->proxy); }

/* With e->lock held: run again if it should (not after an abort: nothing
 * would be served, and tearing down must still work). */
static mscclppResult_t resumeLocked(struct mscclppPortExecutor* e) {
  if (!e->running || mscclppAbortIsRaised(e->abort)) return mscclppSuccess;
  return mscclppProxyStart(e->proxy);
}

/* With e->lock held and the thread stopped. */
static mscclppResult_t addMemLocked(struct mscclppPortExecutor* e, struct mscclppRegisteredMemory* mem, uint32_t* id) {
  int freeSlot = -1;
  for (int i = 0; i < MAX_MEMS; i++) {
    if (e->mems[i] == mem) {
      e->memRefs[i]++;
      *id = (uint32_t)i;
      return mscclppSuccess;
    }
    if (e->mems[i] == NULL && freeSlot < 0) freeSlot = i;
  }
  if (freeSlot < 0)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_CHANNEL,
                      "a communicator's port channels use at most %d memories at a time", MAX_MEMS);
  e->mems[freeSlot] = mem;
  e->memRefs[freeSlot] = 1;
  *id = (uint32_t)freeSlot;
  return mscclppSuccess;
}

static void dropMemLocked(struct mscclppPortExecutor* e, uint32_t id) {
  if (id < (uint32_t)MAX_MEMS && e->mems[id] != NULL && --e->memRefs[id] == 0) e->mems[id] = NULL;
}

static mscclppResult_t addSemLocked(struct mscclppPortExecutor* e, struct mscclppConnection* conn,
                                    struct mscclppRegisteredMemory* remote, uint64_t remoteOffset, uint32_t* id) {
  int semSlot = -1, connSlot = -1, connFree = -1;
  for (int i = 0; i < MAX_SEMS && semSlot < 0; i++)
    if (e->sems[i].conn == NULL) semSlot = i;
  for (int i = 0; i < MAX_SEMS; i++) {
    if (e->conns[i].conn == conn) {
      connSlot = i;
      break;
    }
    if (e->conns[i].conn == NULL && connFree < 0) connFree = i;
  }
  if (semSlot < 0)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_CHANNEL,
                      "a communicator has at most %d port channels at a time", MAX_SEMS);
  if (connSlot < 0) {
    connSlot = connFree; /* a free one exists: there are no more connections than channels */
    e->conns[connSlot].conn = conn;
    e->conns[connSlot].refs = 0;
    e->conns[connSlot].dirty = 0;
    e->conns[connSlot].proxyWrote = 0;
    e->conns[connSlot].needsProgress = mscclppConnNeedsProgress(conn);
    if (e->conns[connSlot].needsProgress) e->anyProgress = 1;
    if (connSlot >= e->connEnd) e->connEnd = connSlot + 1;
  }
  e->conns[connSlot].refs++;
  struct portSem* s = &e->sems[semSlot];
  s->conn = conn;
  s->remote = remote;
  s->remoteOffset = remoteOffset;
  s->connIndex = (uint32_t)connSlot;
  __atomic_store_n(&s->peer, conn->remoteRank + 1, __ATOMIC_RELAXED);
  s->outbound = 0;
  *id = (uint32_t)semSlot;
  return mscclppSuccess;
}

static void dropSemLocked(struct mscclppPortExecutor* e, uint32_t id) {
  struct portSem* s = &e->sems[id];
  struct portConn* c = &e->conns[s->connIndex];
  if (--c->refs == 0) {
    c->conn = NULL;
    c->dirty = 0;
    c->proxyWrote = 0;
    c->needsProgress = 0;
    while (e->connEnd > 0 && e->conns[e->connEnd - 1].conn == NULL) e->connEnd--;
    e->anyProgress = 0;
    for (int i = 0; i < e->connEnd; i++) e->anyProgress |= e->conns[i].conn != NULL && e->conns[i].needsProgress;
  }
  /* peer stays: the hang report still names it for triggers pushed before */
  s->conn = NULL;
  s->remote = NULL;
  s->remoteOffset = 0;
  s->connIndex = 0;
  s->outbound = 0;
}

/* ---- port channels --------------------------------------------------------------------- */

struct mscclppPortChannel {
  struct mscclppChannelContext* ctx;
  struct mscclppPortExecutor* exec;
  struct mscclppChannelPeerInfo peer;
  mscclppPortChannelDeviceHandle handle;
};

mscclppResult_t mscclppPortChannelAddMem(struct mscclppChannelContext* ctx, struct mscclppRegisteredMemory* mem,
                                         uint32_t* id) {
  if (ctx == NULL || mem == NULL || id == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_CHANNEL, "mscclppPortChannelAddMemory: NULL argument");
  struct mscclppPortExecutor* e = NULL;
  MSCCLPP_RETURN_ON_ERROR(mscclppChannelContextExecutor(ctx, &e));
  pthread_mutex_lock(&e->lock);
  mscclppResult_t res = pauseLocked(e);
  if (res == mscclppSuccess) res = addMemLocked(e, mem, id);
  mscclppResult_t r2 = resumeLocked(e);
  pthread_mutex_unlock(&e->lock);
  return res != mscclppSuccess ? res : r2;
}

static mscclppResult_t checkLocal(const struct mscclppConnection* conn, const struct mscclppRegisteredMemory* m,
                                  const char* fn) {
  if (m == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_CHANNEL, "%s: config->local is NULL", fn);
  if (m->ctx != conn->mctx)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_CHANNEL,
                      "%s: local memory %llu belongs to another communicator than the connection", fn,
                      (unsigned long long)m->record.memId);
  if (m->ownerRank != conn->rank)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_CHANNEL,
                      "%s: local memory %llu belongs to rank %d, not to this rank %d", fn,
                      (unsigned long long)m->record.memId, m->ownerRank, conn->rank);
  if (!mscclppConnCarries(conn, m))
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_CHANNEL,
                      "%s: local memory %llu is not registered for transport %s (its transports: 0x%x)", fn,
                      (unsigned long long)m->record.memId, conn->ops->name, m->transports);
  return mscclppSuccess;
}

/* The arena of a semaphore whose home the transport's attributes give. */
static enum mscclppSemArenaKind portArena(enum mscclppTransportSemHome home, int device) {
  switch (home) {
    case MSCCLPP_TRANSPORT_SEM_PINNED: return MSCCLPP_SEM_ARENA_HOST_PINNED;
    case MSCCLPP_TRANSPORT_SEM_PINNED_ON_GPU: return device < 0 ? MSCCLPP_SEM_ARENA_HOST : MSCCLPP_SEM_ARENA_HOST_PINNED;
    case MSCCLPP_TRANSPORT_SEM_DEVICE: break;
  }
  return device < 0 ? MSCCLPP_SEM_ARENA_HOST : MSCCLPP_SEM_ARENA_DEVICE;
}

mscclppResult_t mscclppPortChannelBuild(struct mscclppChannelContext* ctx, struct mscclppConnection* conn,
                                        const mscclppPortChannelConfig* cfg, struct mscclppPortChannel** out) {
  static const char fn[] = "mscclppPortChannelCreate";
  if (ctx == NULL || conn == NULL || cfg == NULL || out == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_CHANNEL, "%s: NULL %s", fn,
                      conn == NULL ? "connection" : cfg == NULL ? "config" : "channel");
  if (cfg->structSize != sizeof(mscclppPortChannelConfig))
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_CHANNEL,
                      "mscclppPortChannelConfig.structSize is %zu, expected %zu: start from "
                      "MSCCLPP_PORT_CHANNEL_CONFIG_INITIALIZER",
                      cfg->structSize, sizeof(mscclppPortChannelConfig));
  MSCCLPP_RETURN_ON_ERROR(checkLocal(conn, cfg->local, fn));
  int device = mscclppChannelContextDevice(ctx);
  enum mscclppSemArenaKind kind;
  switch (cfg->semaphoreMem) {
    case mscclppPortSemaphoreAuto:
      kind = portArena(mscclppConnAttrs(conn)->semAuto, device);
      break;
    case mscclppPortSemaphoreDevice:
      kind = portArena(mscclppConnAttrs(conn)->semDevice, device);
      break;
    case mscclppPortSemaphoreHostPinned:
      if (device < 0)
        return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_CHANNEL,
                          "%s: semaphoreMem HostPinned needs a GPU (this communicator runs the host backend)", fn);
      kind = MSCCLPP_SEM_ARENA_HOST_PINNED;
      break;
    default:
      return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_CHANNEL, "%s: unknown semaphoreMem %d", fn,
                        (int)cfg->semaphoreMem);
  }
  struct mscclppPortExecutor* e = NULL;
  MSCCLPP_RETURN_ON_ERROR(mscclppChannelContextExecutor(ctx, &e));
  struct mscclppPortChannel* ch = calloc(1, sizeof(*ch));
  if (ch == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_CHANNEL, "cannot allocate a port channel");
  ch->ctx = ctx;
  ch->exec = e;
  struct mscclppSemEnd end;
  memset(&end, 0, sizeof(end));
  mscclppResult_t res =
      mscclppChannelExchange(ctx, conn, cfg->tag, MSCCLPP_CHANNEL_KIND_PORT, kind, cfg->local, &end, &ch->peer);
  if (res != mscclppSuccess) goto fail_free;
  if (!mscclppConnCarries(conn, ch->peer.mem) || !mscclppConnCarries(conn, ch->peer.semMem)) {
    res = mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_CHANNEL,
                     "%s: the memory rank %d offers (transports 0x%x) is not registered for transport %s", fn,
                     conn->remoteRank, ch->peer.mem->transports, conn->ops->name);
    goto fail_release;
  }

  uint32_t semId = 0, dstId = 0, srcId = 0;
  mscclppPortChannelDeviceHandle* h = &ch->handle;
  int added = 0;
  pthread_mutex_lock(&e->lock);
  res = pauseLocked(e);
  if (res == mscclppSuccess && mscclppAbortIsRaised(e->abort))
    res = mscclppErr(mscclppAborted, MSCCLPP_LOG_CHANNEL, "%s: the communicator was aborted", fn);
  if (res == mscclppSuccess) res = mscclppFifoGetDeviceHandle(e->fifo, &h->fifo);
  if (res == mscclppSuccess) res = addMemLocked(e, ch->peer.mem, &dstId);
  if (res == mscclppSuccess) {
    res = addMemLocked(e, cfg->local, &srcId);
    if (res != mscclppSuccess) dropMemLocked(e, dstId);
  }
  if (res == mscclppSuccess) {
    res = addSemLocked(e, conn, end.remoteMem, end.remoteOffset, &semId);
    if (res != mscclppSuccess) {
      dropMemLocked(e, dstId);
      dropMemLocked(e, srcId);
    }
  }
  added = res == mscclppSuccess;
  if (added) {
    __atomic_store_n(&e->running, 1, __ATOMIC_RELAXED); /* creation starts the proxy */
    res = resumeLocked(e);
    if (res != mscclppSuccess) {
      dropSemLocked(e, semId);
      dropMemLocked(e, dstId);
      dropMemLocked(e, srcId);
    }
  } else {
    resumeLocked(e);
  }
  pthread_mutex_unlock(&e->lock);
  if (res != mscclppSuccess) goto fail_release;

  h->inbound.inbound = end.inboundDev;
  h->inbound.expected = end.expectedDev;
  h->inbound.outbound = NULL;
  h->inbound.outboundCount = NULL;
  h->inbound.id = end.id;
  mscclppAbortWaitContext(e->abort, mscclppChannelContextTimeout(ctx), 1, &h->inbound.wait);
  h->semaphoreId = semId;
  h->dst = dstId;
  h->src = srcId;
  h->srcPtr = (const uint8_t*)cfg->local->devPtr;
  h->srcSize = cfg->local->size;
  h->flags = mscclppConnCanWriteInline(conn) && cfg->local->devPtr != NULL ? MSCCLPP_PORT_CHANNEL_FLAG_INLINE : 0u;
  /* A transport that maps the peer's memory (CudaIpc) from a GPU: kernels
   * may store small puts into it themselves (MSCCLPP_PORT_CHANNEL_FLAG_STORE). */
  if ((h->flags & MSCCLPP_PORT_CHANNEL_FLAG_INLINE) && mscclppConnHasCap(conn, MSCCLPP_TRANSPORT_CAP_PEER_STORE) &&
      device >= 0 && ch->peer.mem->devPtr != NULL) {
    h->flags |= MSCCLPP_PORT_CHANNEL_FLAG_STORE;
    h->dstPtr = (uint8_t*)ch->peer.mem->devPtr;
    h->dstSize = ch->peer.mem->size;
  }
  MSCCLPP_INFO(MSCCLPP_LOG_CHANNEL, "port channel rank %d -> rank %d (tag %d, %s): semaphore %u, dst %u, src %u",
               conn->rank, conn->remoteRank, cfg->tag, conn->ops->name, semId, dstId, srcId);
  *out = ch;
  return mscclppSuccess;

fail_release:
  mscclppChannelRelease(ctx, &ch->peer);
fail_free:
  free(ch);
  return res;
}

mscclppResult_t mscclppPortChannelDestroy(mscclppPortChannel_t ch) {
  if (ch == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_CHANNEL, "mscclppPortChannelDestroy: NULL");
  struct mscclppPortExecutor* e = ch->exec;
  pthread_mutex_lock(&e->lock);
  mscclppResult_t res = pauseLocked(e);
  if (res == mscclppSuccess) {
    dropSemLocked(e, ch->handle.semaphoreId);
    dropMemLocked(e, ch->handle.dst);
    dropMemLocked(e, ch->handle.src);
  }
  mscclppResult_t r2 = resumeLocked(e);
  pthread_mutex_unlock(&e->lock);
  if (res != mscclppSuccess) return res; /* the proxy would not stop: keep the channel */
  res = mscclppChannelRelease(ch->ctx, &ch->peer);
  free(ch);
  return res != mscclppSuccess ? res : r2;
}

mscclppResult_t mscclppPortChannelGetDeviceHandle(mscclppPortChannel_t ch, mscclppPortChannelDeviceHandle* handle) {
  if (ch == NULL || handle == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_CHANNEL, "mscclppPortChannelGetDeviceHandle: NULL argument");
  *handle = ch->handle;
  return mscclppSuccess;
}

void* mscclppPortChannelRemotePtr(const struct mscclppPortChannel* ch) { return ch->peer.mem->devPtr; }

size_t mscclppPortChannelDeviceHandleSize(void) { return sizeof(mscclppPortChannelDeviceHandle); }
