/* SPDX-License-Identifier: MIT */
/* The channel context: semaphore arenas, the cache of opened peer memories,
 * and the creation handshake both channel kinds share (channel.h). */
#include "channel/channel.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bytes.h"
#include "core/error.h"
#include "core/log.h"
#include "gpu/gpu.h"
#include "memory/record.h"

#define ARENA_SLOTS 256u
#define SLOT_BYTES MSCCLPP_CACHE_LINE
#define HELLO_MAGIC 0x4843534du /* "MSCH" */
#define HELLO_VERSION 1u
#define HELLO_BYTES 32

/* What each line of an arena is, for the hang report (channel.h,
 * mscclppChannelSemLookup). */
struct semInfo {
  uint32_t id;
  int peer;
  uint32_t kind; /* MSCCLPP_CHANNEL_KIND_* */
  int tag;
};

/* Registered memory holding inbound counters, one line each. A new arena
 * is published (ctx->arenas) and a line counted (used) with release order
 * after it is filled in: the report reads them without the lock. */
struct semArena {
  enum mscclppSemArenaKind kind;
  void* ptr;
  struct mscclppRegisteredMemory* mem;
  uint32_t used; /* __atomic */
  struct semArena* next;
  struct semInfo info[ARENA_SLOTS];
};

/* Unregistered memory of the kernels' device holding expected / outbound
 * counts, one line per semaphore end. */
struct counterBlock {
  void* ptr;
  uint32_t used;
  struct counterBlock* next;
};

/* A peer's registration opened here, shared by the channels that use it. */
struct openedMem {
  int rank;
  uint64_t memId;
  struct mscclppRegisteredMemory* mem;
  int refs;
  struct openedMem* next;
};

struct mscclppChannelContext {
  struct mscclppMemContext* mctx;
  struct mscclppAbort* abort;
  int device;
  double timeoutSec;
  int fifoSize;
  pthread_mutex_t lock; /* everything below */
  struct semArena* arenas;
  struct counterBlock* counters;
  struct openedMem* opened;
  struct mscclppPortExecutor* exec; /* __atomic (the report reads it) */
  int live;
  uint32_t semIds; /* semaphore ends made so far: the last id */
};

static const char* arenaKindName(enum mscclppSemArenaKind k) {
  switch (k) {
    case MSCCLPP_SEM_ARENA_DEVICE: return "device";
    case MSCCLPP_SEM_ARENA_HOST_PINNED: return "host pinned";
    case MSCCLPP_SEM_ARENA_HOST: return "host shared";
  }
  return "?";
}

mscclppResult_t mscclppChannelContextCreate(const struct mscclppChannelConfig* cfg,
                                            struct mscclppChannelContext** out) {
  if (cfg == NULL || cfg->mctx == NULL || cfg->abort == NULL || out == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_CHANNEL, "mscclppChannelContextCreate: NULL argument");
  struct mscclppChannelContext* ctx = calloc(1, sizeof(*ctx));
  if (ctx == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_CHANNEL, "cannot allocate a channel context");
  ctx->mctx = cfg->mctx;
  ctx->abort = cfg->abort;
  ctx->device = cfg->device < 0 ? MSCCLPP_HOST_BACKEND_DEVICE : cfg->device;
  ctx->timeoutSec = cfg->timeoutSec;
  ctx->fifoSize = cfg->fifoSize;
  pthread_mutex_init(&ctx->lock, NULL);
  mscclppAbortRetain(ctx->abort);
  mscclppMemContextRetain(ctx->mctx);
  *out = ctx;
  return mscclppSuccess;
}

int mscclppChannelContextLive(struct mscclppChannelContext* ctx) {
  if (ctx == NULL) return 0;
  pthread_mutex_lock(&ctx->lock);
  int n = ctx->live;
  pthread_mutex_unlock(&ctx->lock);
  return n;
}

mscclppResult_t mscclppChannelContextDestroy(struct mscclppChannelContext* ctx) {
  if (ctx == NULL) return mscclppSuccess;
  int live = mscclppChannelContextLive(ctx);
  if (live > 0)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_CHANNEL,
                      "%d channel(s) are still alive: destroy them before the communicator", live);
  mscclppResult_t res = mscclppSuccess;
  if (ctx->exec != NULL) mscclppPortExecutorDestroy(ctx->exec);
  for (struct openedMem* o = ctx->opened; o != NULL;) {
    struct openedMem* next = o->next;
    mscclppResult_t r = mscclppMemClose(o->mem);
    if (res == mscclppSuccess) res = r;
    free(o);
    o = next;
  }
  for (struct semArena* a = ctx->arenas; a != NULL;) {
    struct semArena* next = a->next;
    mscclppResult_t r = mscclppMemDeregister(a->mem);
    if (res == mscclppSuccess) res = r;
    r = mscclppMemContextFree(ctx->mctx, a->ptr);
    if (res == mscclppSuccess) res = r;
    free(a);
    a = next;
  }
  for (struct counterBlock* b = ctx->counters; b != NULL;) {
    struct counterBlock* next = b->next;
    mscclppGpuDeviceFree(ctx->device, b->ptr);
    free(b);
    b = next;
  }
  mscclppMemContextRelease(ctx->mctx);
  mscclppAbortRelease(ctx->abort);
  pthread_mutex_destroy(&ctx->lock);
  free(ctx);
  return res;
}

struct mscclppAbort* mscclppChannelContextAbort(struct mscclppChannelContext* ctx) { return ctx->abort; }
int mscclppChannelContextDevice(const struct mscclppChannelContext* ctx) { return ctx->device; }
double mscclppChannelContextTimeout(const struct mscclppChannelContext* ctx) { return ctx->timeoutSec; }

mscclppResult_t mscclppChannelContextExecutor(struct mscclppChannelContext* ctx, struct mscclppPortExecutor** exec) {
  mscclppResult_t res = mscclppSuccess;
  pthread_mutex_lock(&ctx->lock);
  if (ctx->exec == NULL) {
    struct mscclppPortExecutor* e = NULL;
    res = mscclppPortExecutorCreate(ctx, ctx->fifoSize, &e);
    if (res == mscclppSuccess) __atomic_store_n(&ctx->exec, e, __ATOMIC_RELEASE);
  }
  if (res == mscclppSuccess) *exec = ctx->exec;
  pthread_mutex_unlock(&ctx->lock);
  return res;
}

mscclppResult_t mscclppChannelProxyStart(struct mscclppChannelContext* ctx) {
  struct mscclppPortExecutor* exec = NULL;
  MSCCLPP_RETURN_ON_ERROR(mscclppChannelContextExecutor(ctx, &exec));
  return mscclppPortExecutorStart(exec);
}

mscclppResult_t mscclppChannelProxyStop(struct mscclppChannelContext* ctx) {
  pthread_mutex_lock(&ctx->lock);
  struct mscclppPortExecutor* exec = ctx->exec;
  pthread_mutex_unlock(&ctx->lock);
  return exec != NULL ? mscclppPortExecutorStop(exec) : mscclppSuccess;
}

/* ---- arenas ------------------------------------------------------------------- */

/* With ctx->lock held: a fresh inbound line of `kind` and a fresh line of
 * local counters, for a semaphore of a channel of `chanKind` to `peer` on
 * `tag`. */
static mscclppResult_t allocEndLocked(struct mscclppChannelContext* ctx, enum mscclppSemArenaKind kind,
                                      uint32_t chanKind, int peer, int tag, struct mscclppSemEnd* end) {
  struct semArena* a = ctx->arenas;
  while (a != NULL && (a->kind != kind || a->used == ARENA_SLOTS)) a = a->next;
  if (a == NULL) {
    a = calloc(1, sizeof(*a));
    if (a == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_CHANNEL, "cannot allocate a semaphore arena");
    a->kind = kind;
    mscclppMemKind_t memKind = kind == MSCCLPP_SEM_ARENA_DEVICE        ? mscclppMemKindDevice
                               : kind == MSCCLPP_SEM_ARENA_HOST_PINNED ? mscclppMemKindHostPinned
                                                                       : mscclppMemKindHostShared;
    size_t bytes = (size_t)ARENA_SLOTS * SLOT_BYTES;
    mscclppResult_t res = mscclppMemContextAlloc(ctx->mctx, memKind, bytes, &a->ptr);
    if (res != mscclppSuccess) {
      free(a);
      return res;
    }
    res = mscclppMemRegister(ctx->mctx, a->ptr, bytes, mscclppTransportAuto, &a->mem);
    if (res != mscclppSuccess) {
      mscclppMemContextFree(ctx->mctx, a->ptr);
      free(a);
      return res;
    }
    a->next = ctx->arenas;
    __atomic_store_n(&ctx->arenas, a, __ATOMIC_RELEASE);
    MSCCLPP_INFO(MSCCLPP_LOG_CHANNEL, "new %s semaphore arena of %u lines", arenaKindName(kind), ARENA_SLOTS);
  }
  struct counterBlock* b = ctx->counters;
  while (b != NULL && b->used == ARENA_SLOTS) b = b->next;
  if (b == NULL) {
    b = calloc(1, sizeof(*b));
    if (b == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_CHANNEL, "cannot allocate a counter block");
    mscclppResult_t res = mscclppGpuDeviceAlloc(ctx->device, (size_t)ARENA_SLOTS * SLOT_BYTES, &b->ptr);
    if (res != mscclppSuccess) {
      free(b);
      return res;
    }
    b->next = ctx->counters;
    ctx->counters = b;
  }
  const uint32_t slot = a->used;
  const uint64_t off = (uint64_t)slot * SLOT_BYTES;
  struct semInfo* info = &a->info[slot];
  info->id = ++ctx->semIds;
  info->peer = peer;
  info->kind = chanKind;
  info->tag = tag;
  __atomic_store_n(&a->used, slot + 1, __ATOMIC_RELEASE);
  end->id = info->id;
  end->inboundMem = a->mem;
  end->inboundOffset = off;
  end->inboundDev = (uint64_t*)((char*)a->mem->devPtr + off);
  char* line = (char*)b->ptr + (size_t)b->used++ * SLOT_BYTES;
  end->expectedDev = (uint64_t*)line;
  end->outboundCountDev = (uint64_t*)(line + 8);
  return mscclppSuccess;
}

/* ---- opened memories ------------------------------------------------------------ */

/* With ctx->lock held: open a record (or reuse the mapping of the same
 * registration) and reference it. */
static mscclppResult_t openCachedLocked(struct mscclppChannelContext* ctx, int peer, const uint8_t* buf, size_t len,
                                        struct mscclppRegisteredMemory** out) {
  const struct mscclppMemConfig* mcfg = mscclppMemContextConfig(ctx->mctx);
  struct mscclppMemRecord rec;
  char why[200];
  if (mscclppMemRecordDecode(buf, len, mcfg->secret, &rec, why, sizeof(why)) != mscclppSuccess)
    return mscclppErr(mscclppRemoteError, MSCCLPP_LOG_CHANNEL, "rank %d sent an invalid memory record: %s", peer, why);
  if (rec.ownerRank != peer)
    return mscclppErr(mscclppRemoteError, MSCCLPP_LOG_CHANNEL,
                      "rank %d sent a record of memory owned by rank %d for its channel", peer, rec.ownerRank);
  for (struct openedMem* o = ctx->opened; o != NULL; o = o->next) {
    if (o->rank == rec.ownerRank && o->memId == rec.memId) {
      o->refs++;
      *out = o->mem;
      return mscclppSuccess;
    }
  }
  struct openedMem* o = calloc(1, sizeof(*o));
  if (o == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_CHANNEL, "cannot allocate an opened-memory entry");
  mscclppResult_t res = mscclppMemOpen(ctx->mctx, buf, len, mscclppRemoteError, &o->mem);
  if (res != mscclppSuccess) {
    free(o);
    return res;
  }
  o->rank = rec.ownerRank;
  o->memId = rec.memId;
  o->refs = 1;
  o->next = ctx->opened;
  ctx->opened = o;
  *out = o->mem;
  return mscclppSuccess;
}

/* With ctx->lock held: drop one reference; close at zero. */
static mscclppResult_t releaseCachedLocked(struct mscclppChannelContext* ctx, struct mscclppRegisteredMemory* mem) {
  if (mem == NULL) return mscclppSuccess;
  for (struct openedMem** p = &ctx->opened; *p != NULL; p = &(*p)->next) {
    struct openedMem* o = *p;
    if (o->mem != mem) continue;
    if (--o->refs > 0) return mscclppSuccess;
    *p = o->next;
    mscclppResult_t res = mscclppMemClose(o->mem);
    free(o);
    return res;
  }
  return mscclppErr(mscclppInternalError, MSCCLPP_LOG_CHANNEL, "released memory %p is not in the opened cache",
                    (void*)mem);
}

/* ---- the creation handshake ------------------------------------------------------- */

const char* mscclppChannelKindName(uint32_t k) {
  return k == MSCCLPP_CHANNEL_KIND_PORT ? "port" : k == MSCCLPP_CHANNEL_KIND_MEMORY ? "memory" : "unknown";
}
#define channelKindName mscclppChannelKindName

/* Hello: magic u32 | version u32 | channel kind u32 | sender rank u32 |
 * semaphore offset u64 | memory record length u32 | semaphore record length
 * u32; then both records. */
mscclppResult_t mscclppChannelExchange(struct mscclppChannelContext* ctx, struct mscclppConnection* conn, int tag,
                                       uint32_t channelKind, enum mscclppSemArenaKind kind,
                                       struct mscclppRegisteredMemory* local, struct mscclppSemEnd* end,
                                       struct mscclppChannelPeerInfo* peerOut) {
  const struct mscclppMemConfig* mcfg = mscclppMemContextConfig(ctx->mctx);
  const struct mscclppMemBootstrap* bs = &mcfg->bootstrap;
  const int peer = conn->remoteRank, rank = mcfg->rank;
  mscclppResult_t res;

  pthread_mutex_lock(&ctx->lock);
  res = allocEndLocked(ctx, kind, channelKind, peer, tag, end);
  pthread_mutex_unlock(&ctx->lock);
  if (res != mscclppSuccess) return res;

  uint8_t* msg = malloc(HELLO_BYTES + 2 * MSCCLPP_MEM_RECORD_MAX);
  if (msg == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_CHANNEL, "cannot allocate a channel message");
  size_t memLen = 0, semLen = 0;
  res = mscclppMemSerialize(local, msg + HELLO_BYTES, MSCCLPP_MEM_RECORD_MAX, &memLen);
  if (res == mscclppSuccess)
    res = mscclppMemSerialize(end->inboundMem, msg + HELLO_BYTES + memLen, MSCCLPP_MEM_RECORD_MAX, &semLen);
  if (res != mscclppSuccess) goto out_free;
  mscclppPutLE32(msg, HELLO_MAGIC);
  mscclppPutLE32(msg + 4, HELLO_VERSION);
  mscclppPutLE32(msg + 8, channelKind);
  mscclppPutLE32(msg + 12, (uint32_t)rank);
  mscclppPutLE64(msg + 16, end->inboundOffset);
  mscclppPutLE32(msg + 24, (uint32_t)memLen);
  mscclppPutLE32(msg + 28, (uint32_t)semLen);
  res = bs->send(bs->ctx, peer, tag, msg, HELLO_BYTES);
  if (res == mscclppSuccess) res = bs->send(bs->ctx, peer, tag, msg + HELLO_BYTES, memLen + semLen);
  if (res != mscclppSuccess) goto out_free;

  res = bs->recv(bs->ctx, peer, tag, msg, HELLO_BYTES);
  if (res != mscclppSuccess) goto out_free;
  uint32_t magic = mscclppGetLE32(msg), version = mscclppGetLE32(msg + 4), theirKind = mscclppGetLE32(msg + 8), theirRank = mscclppGetLE32(msg + 12);
  uint64_t semOffset = mscclppGetLE64(msg + 16);
  uint32_t theirMemLen = mscclppGetLE32(msg + 24), theirSemLen = mscclppGetLE32(msg + 28);
  if (magic != HELLO_MAGIC || version != HELLO_VERSION) {
    res = mscclppErr(mscclppRemoteError, MSCCLPP_LOG_CHANNEL,
                     "rank %d answered channel creation on tag %d with something else (magic 0x%08x, version %u): "
                     "did both ranks create a channel with this tag?",
                     peer, tag, magic, version);
    goto out_free;
  }
  if (theirKind != channelKind || theirRank != (uint32_t)peer) {
    res = mscclppErr(mscclppRemoteError, MSCCLPP_LOG_CHANNEL,
                     "rank %d creates a %s channel on tag %d (as rank %u) while rank %d creates a %s channel", peer,
                     channelKindName(theirKind), tag, theirRank, rank, channelKindName(channelKind));
    goto out_free;
  }
  if (theirMemLen == 0 || theirMemLen > MSCCLPP_MEM_RECORD_MAX || theirSemLen == 0 ||
      theirSemLen > MSCCLPP_MEM_RECORD_MAX || semOffset % SLOT_BYTES != 0) {
    res = mscclppErr(mscclppRemoteError, MSCCLPP_LOG_CHANNEL,
                     "rank %d sent a channel message with record lengths %u and %u and semaphore offset %" PRIu64
                     " (records have 1..%d bytes, offsets are multiples of %d)",
                     peer, theirMemLen, theirSemLen, semOffset, MSCCLPP_MEM_RECORD_MAX, SLOT_BYTES);
    goto out_free;
  }
  res = bs->recv(bs->ctx, peer, tag, msg + HELLO_BYTES, (size_t)theirMemLen + theirSemLen);
  if (res != mscclppSuccess) goto out_free;

  struct mscclppChannelPeerInfo info = {NULL, NULL, semOffset};
  pthread_mutex_lock(&ctx->lock);
  res = openCachedLocked(ctx, peer, msg + HELLO_BYTES, theirMemLen, &info.mem);
  if (res == mscclppSuccess) {
    res = openCachedLocked(ctx, peer, msg + HELLO_BYTES + theirMemLen, theirSemLen, &info.semMem);
    if (res != mscclppSuccess) releaseCachedLocked(ctx, info.mem);
  }
  if (res == mscclppSuccess && (semOffset + sizeof(uint64_t) > info.semMem->size)) {
    res = mscclppErr(mscclppRemoteError, MSCCLPP_LOG_CHANNEL,
                     "rank %d put its semaphore at offset %" PRIu64 " of a %" PRIu64 "-byte memory", peer, semOffset,
                     info.semMem->size);
    releaseCachedLocked(ctx, info.semMem);
    releaseCachedLocked(ctx, info.mem);
  }
  if (res == mscclppSuccess) ctx->live++;
  pthread_mutex_unlock(&ctx->lock);
  if (res != mscclppSuccess) goto out_free;
  end->remoteMem = info.semMem;
  end->remoteOffset = semOffset;
  *peerOut = info;
out_free:
  free(msg);
  return res;
}

mscclppResult_t mscclppChannelRelease(struct mscclppChannelContext* ctx, struct mscclppChannelPeerInfo* peer) {
  pthread_mutex_lock(&ctx->lock);
  mscclppResult_t res = releaseCachedLocked(ctx, peer->mem);
  mscclppResult_t r2 = releaseCachedLocked(ctx, peer->semMem);
  ctx->live--;
  pthread_mutex_unlock(&ctx->lock);
  peer->mem = peer->semMem = NULL;
  return res != mscclppSuccess ? res : r2;
}

/* ---- the hang report ---------------------------------------------------------------- */

int mscclppChannelSemLookup(const struct mscclppChannelContext* ctx, uint32_t id, struct mscclppChannelSemInfo* out) {
  if (ctx == NULL || id == 0) return 0;
  for (const struct semArena* a = __atomic_load_n(&ctx->arenas, __ATOMIC_ACQUIRE); a != NULL; a = a->next) {
    const uint32_t used = __atomic_load_n(&a->used, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < used && i < ARENA_SLOTS; i++) {
      if (a->info[i].id != id) continue;
      out->peer = a->info[i].peer;
      out->kind = a->info[i].kind;
      out->tag = a->info[i].tag;
      /* device memory of a GPU is not the host's to read */
      out->inboundHost = a->kind != MSCCLPP_SEM_ARENA_DEVICE || ctx->device < 0
                             ? (const uint64_t*)(const void*)((const char*)a->ptr + (size_t)i * SLOT_BYTES)
                             : NULL;
      return 1;
    }
  }
  return 0;
}

void mscclppChannelReportProxy(const struct mscclppChannelContext* ctx, const struct mscclppReportRecord* rec) {
  if (ctx == NULL) return;
  const struct mscclppPortExecutor* e = __atomic_load_n(&ctx->exec, __ATOMIC_ACQUIRE);
  if (e != NULL) mscclppPortExecutorReport(e, rec);
}
