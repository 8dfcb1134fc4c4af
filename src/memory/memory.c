/* SPDX-License-Identifier: MIT */
/* Memory contexts and the allocation of shareable memory. See memory.h. */
#include "memory/memory.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log.h"
#include "core/util.h"
#include "gpu/gpu_ipc.h"
#include "memory/fd_share.h"
#include "memory/memory_internal.h"
#include "memory/shm.h"

static pthread_once_t tokenOnce = PTHREAD_ONCE_INIT;
static uint64_t processToken;

static void tokenInit(void) {
  if (mscclppRandomBytes(&processToken, sizeof(processToken)) != mscclppSuccess)
    processToken = mscclppTimeNs() ^ ((uint64_t)getpid() << 32);
}

uint64_t mscclppMemProcessToken(void) {
  pthread_once(&tokenOnce, tokenInit);
  return processToken;
}

const char* mscclppTransportName(mscclppTransport_t t) {
  switch (t) {
    case mscclppTransportAuto: return "Auto";
    case mscclppTransportCudaIpc: return "CudaIpc";
    case mscclppTransportHostShm: return "HostShm";
    case mscclppTransportNet: return "Net";
  }
  return "unknown";
}

const char* mscclppMemKindName(mscclppMemKind_t kind) {
  switch (kind) {
    case mscclppMemKindHost: return "Host";
    case mscclppMemKindHostShared: return "HostShared";
    case mscclppMemKindHostPinned: return "HostPinned";
    case mscclppMemKindDevice: return "Device";
    case mscclppMemKindDeviceCuMem: return "DeviceCuMem";
  }
  return "unknown";
}

/* ---- context ------------------------------------------------------------------ */

mscclppResult_t mscclppMemContextCreate(const struct mscclppMemConfig* cfg, struct mscclppMemContext** out) {
  if (cfg == NULL || out == NULL || cfg->bootstrap.send == NULL || cfg->bootstrap.recv == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_MEM, "mscclppMemContextCreate: NULL configuration");
  if (cfg->rank < 0)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_MEM, "memory context for rank %d", cfg->rank);
  struct mscclppMemContext* ctx = calloc(1, sizeof(*ctx));
  if (ctx == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_MEM, "cannot allocate a memory context");
  ctx->cfg = *cfg;
  ctx->cfg.hostName[MSCCLPP_HOST_NAME_MAX - 1] = '\0';
  ctx->hasGpu = mscclppGpuIpcAvailable();
  ctx->nextMemId = 1;
  pthread_mutex_init(&ctx->lock, NULL);
  (void)mscclppMemProcessToken();
  *out = ctx;
  return mscclppSuccess;
}

mscclppResult_t mscclppMemContextDestroy(struct mscclppMemContext* ctx) {
  if (ctx == NULL) return mscclppSuccess;
  pthread_mutex_lock(&ctx->lock);
  int regs = 0, opened = 0, allocs = 0;
  for (struct mscclppRegisteredMemory* m = ctx->mems; m != NULL; m = m->next)
    *(m->origin == MSCCLPP_MEM_REGISTERED ? &regs : &opened) += 1;
  for (struct mscclppMemAllocation* a = ctx->allocs; a != NULL; a = a->next) allocs++;
  int users = ctx->users;
  pthread_mutex_unlock(&ctx->lock);
  if (regs || opened || allocs || users)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_MEM,
                      "rank %d still has %d registered memories, %d opened memories, %d allocations and %d "
                      "connections; release them first",
                      ctx->cfg.rank, regs, opened, allocs, users);
  mscclppFdServerDestroy(ctx->fdServer);
  for (int i = 0; i < MSCCLPP_MEM_TRANSPORT_SLOTS; i++)
    if (ctx->hooks[i].hook != NULL) ctx->hooks[i].hook->destroy(ctx->hooks[i].state);
  pthread_mutex_destroy(&ctx->lock);
  free(ctx);
  return mscclppSuccess;
}

const struct mscclppMemConfig* mscclppMemContextConfig(const struct mscclppMemContext* ctx) { return &ctx->cfg; }

int mscclppMemContextHasGpu(const struct mscclppMemContext* ctx) { return ctx->hasGpu; }

void mscclppMemContextRetain(struct mscclppMemContext* ctx) {
  pthread_mutex_lock(&ctx->lock);
  ctx->users++;
  pthread_mutex_unlock(&ctx->lock);
}

void mscclppMemContextRelease(struct mscclppMemContext* ctx) {
  pthread_mutex_lock(&ctx->lock);
  ctx->users--;
  pthread_mutex_unlock(&ctx->lock);
}

_Static_assert((mscclppTransportCudaIpc | mscclppTransportHostShm | mscclppTransportNet) ==
                   (1u << MSCCLPP_MEM_TRANSPORT_SLOTS) - 1,
               "one registration slot per transport bit");

void mscclppMemContextAttach(struct mscclppMemContext* ctx, mscclppTransport_t t,
                             const struct mscclppMemTransportHook* hook, void* state, void** attached) {
  int s = mscclppMemTransportSlot(t);
  if (s < 0) { /* a transport bug, not a user's: nothing is attached */
    *attached = NULL;
    return;
  }
  pthread_mutex_lock(&ctx->lock);
  if (ctx->hooks[s].hook == NULL) {
    ctx->hooks[s].hook = hook;
    ctx->hooks[s].state = state;
  }
  *attached = ctx->hooks[s].state;
  pthread_mutex_unlock(&ctx->lock);
}

void* mscclppMemContextHookState(struct mscclppMemContext* ctx, mscclppTransport_t t) {
  int s = mscclppMemTransportSlot(t);
  if (s < 0) return NULL;
  pthread_mutex_lock(&ctx->lock);
  void* state = ctx->hooks[s].state;
  pthread_mutex_unlock(&ctx->lock);
  return state;
}

void* mscclppMemHookHandle(const struct mscclppRegisteredMemory* m, mscclppTransport_t t) {
  int s = mscclppMemTransportSlot(t);
  if (s < 0 || !__atomic_load_n(&m->hooked[s].ready, __ATOMIC_ACQUIRE)) return NULL;
  return m->hooked[s].handle;
}

mscclppResult_t mscclppMemPrepare(struct mscclppRegisteredMemory* m, mscclppTransport_t t) {
  int s = mscclppMemTransportSlot(t);
  if (s >= 0 && __atomic_load_n(&m->hooked[s].ready, __ATOMIC_ACQUIRE)) return mscclppSuccess;
  if (s < 0 || m->origin != MSCCLPP_MEM_REGISTERED || !(m->transports & (uint32_t)t))
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_MEM,
                      "memory %llu of rank %d is not a registration of this process for transport %s",
                      (unsigned long long)m->record.memId, m->ownerRank, mscclppTransportName(t));
  struct mscclppMemContext* ctx = m->ctx;
  mscclppResult_t res = mscclppSuccess;
  pthread_mutex_lock(&ctx->lock);
  if (!m->hooked[s].ready) {
    const struct mscclppMemHookSlot* slot = &ctx->hooks[s];
    if (slot->hook == NULL) {
      res = mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_MEM,
                       "memory %llu of rank %d is registered for transport %s, but this communicator has no %s "
                       "connection yet: create a connection with transport %s before sending its record",
                       (unsigned long long)m->record.memId, m->ownerRank, mscclppTransportName(t),
                       mscclppTransportName(t), mscclppTransportName(t));
    } else {
      void* handle = NULL;
      res = slot->hook->reg(slot->state, m, &m->record, &handle);
      if (res == mscclppSuccess) {
        m->hooked[s].handle = handle;
        __atomic_store_n(&m->hooked[s].ready, 1, __ATOMIC_RELEASE);
      }
    }
  }
  pthread_mutex_unlock(&ctx->lock);
  return res;
}

void mscclppMemUnhookLocked(struct mscclppMemContext* ctx, struct mscclppRegisteredMemory* m) {
  for (int s = 0; s < MSCCLPP_MEM_TRANSPORT_SLOTS; s++) {
    if (!m->hooked[s].ready || ctx->hooks[s].hook == NULL) continue;
    ctx->hooks[s].hook->dereg(ctx->hooks[s].state, m->hooked[s].handle);
    m->hooked[s].handle = NULL;
    __atomic_store_n(&m->hooked[s].ready, 0, __ATOMIC_RELEASE);
  }
}

mscclppResult_t mscclppMemFdServerLocked(struct mscclppMemContext* ctx, struct mscclppFdServer** server) {
  if (ctx->fdServer == NULL) MSCCLPP_RETURN_ON_ERROR(mscclppFdServerCreate(ctx->cfg.timeoutSec, &ctx->fdServer));
  *server = ctx->fdServer;
  return mscclppSuccess;
}

void mscclppMemLink(struct mscclppMemContext* ctx, struct mscclppRegisteredMemory* m) {
  m->prev = NULL;
  m->next = ctx->mems;
  if (ctx->mems != NULL) ctx->mems->prev = m;
  ctx->mems = m;
}

void mscclppMemUnlink(struct mscclppMemContext* ctx, struct mscclppRegisteredMemory* m) {
  if (m->prev != NULL)
    m->prev->next = m->next;
  else
    ctx->mems = m->next;
  if (m->next != NULL) m->next->prev = m->prev;
}

/* ---- allocation ------------------------------------------------------------------ */

static void freeAllocation(struct mscclppMemAllocation* a) {
  switch (a->kind) {
    case mscclppMemKindHostShared:
    case mscclppMemKindHostPinned:
      if (a->hostRegistered) (void)mscclppGpuIpcHostUnregister(a->ptr);
      mscclppShmUnmap(a->ptr, a->mapSize);
      if (a->fd >= 0) close(a->fd);
      break;
    case mscclppMemKindDevice:
      (void)mscclppGpuIpcFree(a->ptr);
      break;
    case mscclppMemKindDeviceCuMem:
      (void)mscclppGpuCuMemUnmap(a->ptr, a->mapSize);
      break;
    case mscclppMemKindHost:
      break;
  }
  free(a);
}

mscclppResult_t mscclppMemContextAlloc(struct mscclppMemContext* ctx, mscclppMemKind_t kind, size_t size, void** ptr) {
  if (ctx == NULL || ptr == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_MEM, "mscclppMemAlloc: NULL %s",
                      ctx == NULL ? "communicator" : "ptr");
  if (size == 0) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_MEM, "mscclppMemAlloc: size 0");
  struct mscclppMemAllocation* a = calloc(1, sizeof(*a));
  if (a == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_MEM, "cannot allocate an allocation record");
  a->kind = kind;
  a->size = size;
  a->fd = -1;
  a->device = -1;
  mscclppResult_t res;
  switch (kind) {
    case mscclppMemKindHostShared:
    case mscclppMemKindHostPinned:
      res = mscclppShmCreate(size, &a->fd, &a->ptr, &a->mapSize);
      if (res != mscclppSuccess) goto fail_free;
      a->devPtr = a->ptr;
      /* Without a GPU (host backend) pinned memory is plain shared memory. */
      if (kind == mscclppMemKindHostPinned && ctx->hasGpu) {
        res = mscclppGpuIpcHostRegister(a->ptr, a->mapSize, &a->devPtr);
        if (res != mscclppSuccess) {
          mscclppShmUnmap(a->ptr, a->mapSize);
          close(a->fd);
          goto fail_free;
        }
        a->hostRegistered = 1;
      }
      break;
    case mscclppMemKindDevice:
      if (ctx->hasGpu) (void)mscclppGpuIpcCurrentDevice(&a->device);
      res = mscclppGpuIpcMalloc(size, &a->ptr);
      if (res != mscclppSuccess) goto fail_free;
      a->mapSize = size;
      a->devPtr = a->ptr;
      break;
    case mscclppMemKindDeviceCuMem:
      if (ctx->hasGpu) (void)mscclppGpuIpcCurrentDevice(&a->device);
      res = mscclppGpuCuMemAlloc(size, &a->ptr, &a->mapSize);
      if (res != mscclppSuccess) goto fail_free;
      a->devPtr = a->ptr;
      break;
    case mscclppMemKindHost:
      res = mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_MEM,
                       "mscclppMemAlloc of kind Host: use malloc (or kind HostShared for memory other processes open)");
      goto fail_free;
    default:
      res = mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_MEM, "mscclppMemAlloc: unknown memory kind %d", (int)kind);
      goto fail_free;
  }
  pthread_mutex_lock(&ctx->lock);
  a->next = ctx->allocs;
  ctx->allocs = a;
  pthread_mutex_unlock(&ctx->lock);
  MSCCLPP_INFO(MSCCLPP_LOG_MEM, "allocated %zu bytes of %s memory at %p (%zu mapped)", size, mscclppMemKindName(kind),
               a->ptr, a->mapSize);
  *ptr = a->ptr;
  return mscclppSuccess;
fail_free:
  free(a);
  return res;
}

mscclppResult_t mscclppMemContextFree(struct mscclppMemContext* ctx, void* ptr) {
  if (ctx == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_MEM, "mscclppMemFree: NULL communicator");
  pthread_mutex_lock(&ctx->lock);
  struct mscclppMemAllocation** link = &ctx->allocs;
  while (*link != NULL && (*link)->ptr != ptr) link = &(*link)->next;
  struct mscclppMemAllocation* a = *link;
  if (a == NULL) {
    struct mscclppMemAllocation* inside = NULL;
    for (struct mscclppMemAllocation* b = ctx->allocs; b != NULL; b = b->next)
      if ((uintptr_t)ptr > (uintptr_t)b->ptr && (uintptr_t)ptr < (uintptr_t)b->ptr + b->mapSize) inside = b;
    void* base = inside != NULL ? inside->ptr : NULL;
    pthread_mutex_unlock(&ctx->lock);
    if (base != NULL)
      return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_MEM,
                        "mscclppMemFree(%p): the pointer is inside the allocation at %p; free that", ptr, base);
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_MEM,
                      "mscclppMemFree(%p): the pointer did not come from mscclppMemAlloc of this communicator", ptr);
  }
  if (a->liveRegs > 0) {
    int n = a->liveRegs;
    pthread_mutex_unlock(&ctx->lock);
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_MEM,
                      "mscclppMemFree(%p): %d registration(s) still cover it; deregister them first", ptr, n);
  }
  *link = a->next;
  if (a->exported) (void)mscclppFdServerUnexport(ctx->fdServer, a->exportId);
  pthread_mutex_unlock(&ctx->lock);
  freeAllocation(a);
  return mscclppSuccess;
}

