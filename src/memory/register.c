/* SPDX-License-Identifier: MIT */
/* Registration: what memory a pointer is, the handles other processes need,
 * and the record that describes it. See memory.h. */
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

/* ---- registration ------------------------------------------------------------------ */

/* With ctx->lock held: the allocation that holds ptr, and whether the whole
 * range fits in it. */
static struct mscclppMemAllocation* findAllocation(struct mscclppMemContext* ctx, uintptr_t p) {
  for (struct mscclppMemAllocation* a = ctx->allocs; a != NULL; a = a->next)
    if (p >= (uintptr_t)a->ptr && p < (uintptr_t)a->ptr + a->mapSize) return a;
  return NULL;
}

static mscclppResult_t checkTransports(struct mscclppMemContext* ctx, mscclppMemKind_t kind, void* ptr,
                                       unsigned* transports) {
  const unsigned known = mscclppTransportCudaIpc | mscclppTransportHostShm | mscclppTransportNet;
  unsigned t = *transports;
  if (t & ~known)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_MEM,
                      "registering %p: unknown transport bits 0x%x (known: 0x%x)", ptr, t & ~known, known);
  if (t == mscclppTransportAuto) {
    t = mscclppMemKindIsHost(kind) ? mscclppTransportHostShm : 0;
    if (ctx->hasGpu) t |= mscclppTransportCudaIpc;
    /* a transport that attached a hook is in use here (a Net connection exists) */
    for (int i = 0; i < MSCCLPP_MEM_TRANSPORT_SLOTS; i++)
      if (ctx->hooks[i].hook != NULL) t |= 1u << i;
  }
  if ((t & mscclppTransportHostShm) && !mscclppMemKindIsHost(kind))
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_MEM,
                      "registering %p: %s memory cannot use transport HostShm (the CPU copies there); use CudaIpc",
                      ptr, mscclppMemKindName(kind));
  if ((t & mscclppTransportCudaIpc) && !ctx->hasGpu)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_MEM,
                      "registering %p for transport CudaIpc: this process has no CUDA device", ptr);
  *transports = t;
  return mscclppSuccess;
}

/* With ctx->lock held: export a memory file or cuMem descriptor `fd` (the fd
 * server takes it, also on failure). */
static mscclppResult_t exportFdLocked(struct mscclppMemContext* ctx, int fd, uint64_t* id,
                                      uint8_t token[MSCCLPP_FD_TOKEN_BYTES]) {
  struct mscclppFdServer* server;
  mscclppResult_t res = mscclppMemFdServerLocked(ctx, &server);
  if (res != mscclppSuccess) {
    close(fd);
    return res;
  }
  return mscclppFdServerExport(server, fd, id, token);
}

static void fillFdSection(struct mscclppMemContext* ctx, struct mscclppMemRecord* rec, uint64_t id,
                          const uint8_t token[MSCCLPP_FD_TOKEN_BYTES], uint64_t offset, uint64_t mapSize) {
  rec->hasFd = 1;
  snprintf(rec->fd.server, sizeof(rec->fd.server), "%s", mscclppFdServerName(ctx->fdServer));
  rec->fd.exportId = id;
  memcpy(rec->fd.token, token, MSCCLPP_FD_TOKEN_BYTES);
  rec->fd.offset = offset;
  rec->fd.mapSize = mapSize;
}

/* With ctx->lock held: kind, handles and record sections of [ptr, ptr+size). */
static mscclppResult_t describeLocked(struct mscclppMemContext* ctx, struct mscclppRegisteredMemory* m,
                                      unsigned* transports) {
  struct mscclppMemRecord* rec = &m->record;
  void* ptr = m->ptr;
  uintptr_t p = (uintptr_t)ptr;
  size_t size = m->size;
  struct mscclppMemAllocation* a = findAllocation(ctx, p);
  if (a != NULL) {
    /* Memory of mscclppMemAlloc: kind and handles are known. */
    uintptr_t base = (uintptr_t)a->ptr;
    if (size > base + a->mapSize - p)
      return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_MEM,
                        "registering [%p, +%zu): the range runs past the end of its allocation at %p (%zu bytes)",
                        ptr, size, a->ptr, a->mapSize);
    m->kind = a->kind;
    MSCCLPP_RETURN_ON_ERROR(checkTransports(ctx, m->kind, ptr, transports));
    rec->device = a->device;
    m->devPtr = (void*)((uintptr_t)a->devPtr + (p - base));
    if (a->kind == mscclppMemKindDevice) {
      MSCCLPP_RETURN_ON_ERROR(mscclppGpuIpcGetHandle(a->ptr, rec->cudaIpc.handle));
      rec->hasCudaIpc = 1;
      rec->cudaIpc.offset = p - base;
      rec->cudaIpc.allocSize = a->mapSize;
    } else {
      if (!a->exported) {
        int fd = -1;
        if (a->kind == mscclppMemKindDeviceCuMem) {
          MSCCLPP_RETURN_ON_ERROR(mscclppGpuCuMemExportFd(a->ptr, &fd));
        } else {
          fd = a->fd; /* the fd server owns it from here on */
          a->fd = -1;
        }
        MSCCLPP_RETURN_ON_ERROR(exportFdLocked(ctx, fd, &a->exportId, a->token));
        a->exported = 1;
      }
      fillFdSection(ctx, rec, a->exportId, a->token, p - base, a->mapSize);
    }
    m->alloc = a;
    return mscclppSuccess;
  }

  /* Memory from elsewhere: ask CUDA what it is. */
  struct mscclppGpuPtrInfo info;
  MSCCLPP_RETURN_ON_ERROR(mscclppGpuIpcQueryPointer(ptr, &info));
  switch (info.type) {
    case MSCCLPP_GPU_PTR_HOST:
      m->kind = mscclppMemKindHost;
      break;
    case MSCCLPP_GPU_PTR_HOST_PINNED:
      m->kind = mscclppMemKindHostPinned;
      break;
    case MSCCLPP_GPU_PTR_DEVICE:
      m->kind = mscclppMemKindDevice;
      break;
    case MSCCLPP_GPU_PTR_DEVICE_CUMEM:
      m->kind = mscclppMemKindDeviceCuMem;
      break;
    case MSCCLPP_GPU_PTR_MANAGED:
    default:
      return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_MEM,
                        "registering %p: managed memory (cudaMallocManaged) cannot be shared between processes; use "
                        "cudaMalloc or mscclppMemAlloc",
                        ptr);
  }
  MSCCLPP_RETURN_ON_ERROR(checkTransports(ctx, m->kind, ptr, transports));
  if (mscclppMemKindIsHost(m->kind)) {
    MSCCLPP_INFO(MSCCLPP_LOG_MEM,
                 "registered %s memory %p (%zu bytes) is not from mscclppMemAlloc: only this process can open it",
                 mscclppMemKindName(m->kind), ptr, size);
    return mscclppSuccess;
  }
  rec->device = info.device;
  if (p < info.allocBase || size > info.allocBase + info.allocSize - p)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_MEM,
                      "registering [%p, +%zu): the range runs past the end of its allocation at 0x%llx (%zu bytes)",
                      ptr, size, (unsigned long long)info.allocBase, info.allocSize);
  if (m->kind == mscclppMemKindDevice) {
    MSCCLPP_RETURN_ON_ERROR(mscclppGpuIpcGetHandle((void*)info.allocBase, rec->cudaIpc.handle));
    rec->hasCudaIpc = 1;
    rec->cudaIpc.offset = p - info.allocBase;
    rec->cudaIpc.allocSize = info.allocSize;
    return mscclppSuccess;
  }
  int fd = -1;
  uint64_t id;
  uint8_t token[MSCCLPP_FD_TOKEN_BYTES];
  MSCCLPP_RETURN_ON_ERROR(mscclppGpuCuMemExportFd((void*)info.allocBase, &fd));
  MSCCLPP_RETURN_ON_ERROR(exportFdLocked(ctx, fd, &id, token));
  m->cuMemExported = 1;
  fillFdSection(ctx, rec, id, token, p - info.allocBase, info.allocSize);
  return mscclppSuccess;
}

mscclppResult_t mscclppMemRegister(struct mscclppMemContext* ctx, void* ptr, size_t size, unsigned transports,
                                   struct mscclppRegisteredMemory** out) {
  if (ctx == NULL || ptr == NULL || out == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_MEM, "mscclppMemoryRegister: NULL %s",
                      ctx == NULL ? "communicator" : ptr == NULL ? "ptr" : "mem");
  if (size == 0)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_MEM, "mscclppMemoryRegister(%p): size 0", ptr);
  if ((uintptr_t)ptr > UINTPTR_MAX - size)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_MEM, "mscclppMemoryRegister(%p, %zu): the range wraps", ptr,
                      size);
  struct mscclppRegisteredMemory* m = calloc(1, sizeof(*m));
  if (m == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_MEM, "cannot allocate a registration");
  m->ctx = ctx;
  m->origin = MSCCLPP_MEM_REGISTERED;
  m->ptr = ptr;
  m->devPtr = ptr;
  m->size = size;
  m->ownerRank = ctx->cfg.rank;
  m->sameProcess = 1;
  m->record.device = -1;

  pthread_mutex_lock(&ctx->lock);
  mscclppResult_t res = describeLocked(ctx, m, &transports);
  if (res != mscclppSuccess) {
    pthread_mutex_unlock(&ctx->lock);
    free(m);
    return res;
  }
  m->transports = transports;
  m->hostAccessible = mscclppMemKindIsHost(m->kind);
  struct mscclppMemRecord* rec = &m->record;
  rec->memId = ctx->nextMemId++;
  rec->ownerRank = ctx->cfg.rank;
  rec->ownerPid = (uint32_t)getpid();
  rec->processToken = mscclppMemProcessToken();
  rec->hostHash = ctx->cfg.hostHash;
  snprintf(rec->hostName, sizeof(rec->hostName), "%s", ctx->cfg.hostName);
  rec->kind = (uint32_t)m->kind;
  rec->transports = transports;
  rec->addr = (uint64_t)(uintptr_t)ptr;
  rec->devAddr = (uint64_t)(uintptr_t)m->devPtr;
  rec->size = size;
  if (m->alloc != NULL) m->alloc->liveRegs++;
  mscclppMemLink(ctx, m);
  unsigned hookNow = 0; /* transports of this registration whose hook is attached */
  for (int i = 0; i < MSCCLPP_MEM_TRANSPORT_SLOTS; i++)
    if ((transports & (1u << i)) && ctx->hooks[i].hook != NULL) hookNow |= 1u << i;
  pthread_mutex_unlock(&ctx->lock);
  /* Those transports register now (errors such as a provider's refused
   * registration surface here, not later). */
  for (int i = 0; i < MSCCLPP_MEM_TRANSPORT_SLOTS && res == mscclppSuccess; i++)
    if (hookNow & (1u << i)) res = mscclppMemPrepare(m, (mscclppTransport_t)(1u << i));
  if (res != mscclppSuccess) {
    pthread_mutex_lock(&ctx->lock);
    mscclppMemUnhookLocked(ctx, m);
    if (m->alloc != NULL) m->alloc->liveRegs--;
    mscclppMemUnlink(ctx, m);
    if (m->cuMemExported) (void)mscclppFdServerUnexport(ctx->fdServer, m->record.fd.exportId);
    pthread_mutex_unlock(&ctx->lock);
    free(m);
    return res;
  }
  MSCCLPP_INFO(MSCCLPP_LOG_MEM, "rank %d registered %s memory %p (%zu bytes) for transports 0x%x as memory %llu",
               ctx->cfg.rank, mscclppMemKindName(m->kind), ptr, size, transports, (unsigned long long)rec->memId);
  *out = m;
  return mscclppSuccess;
}

mscclppResult_t mscclppMemDeregister(struct mscclppRegisteredMemory* m) {
  if (m == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_MEM, "mscclppMemoryDeregister: NULL mem");
  if (m->origin != MSCCLPP_MEM_REGISTERED)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_MEM,
                      "mscclppMemoryDeregister: memory %llu of rank %d was opened, not registered here; close it with "
                      "mscclppMemoryClose",
                      (unsigned long long)m->record.memId, m->ownerRank);
  struct mscclppMemContext* ctx = m->ctx;
  pthread_mutex_lock(&ctx->lock);
  mscclppMemUnhookLocked(ctx, m);
  if (m->cuMemExported) (void)mscclppFdServerUnexport(ctx->fdServer, m->record.fd.exportId);
  if (m->alloc != NULL) m->alloc->liveRegs--;
  mscclppMemUnlink(ctx, m);
  pthread_mutex_unlock(&ctx->lock);
  free(m);
  return mscclppSuccess;
}

mscclppResult_t mscclppMemLookup(struct mscclppMemContext* ctx, const void* ptr, size_t size,
                                 struct mscclppRegisteredMemory** mem, size_t* offset) {
  if (ctx == NULL || mem == NULL || offset == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_MEM, "mscclppMemoryLookup: NULL argument");
  uintptr_t p = (uintptr_t)ptr;
  struct mscclppRegisteredMemory* found = NULL;
  pthread_mutex_lock(&ctx->lock);
  for (struct mscclppRegisteredMemory* m = ctx->mems; m != NULL && found == NULL; m = m->next) {
    uintptr_t b = (uintptr_t)m->ptr;
    if (m->origin == MSCCLPP_MEM_REGISTERED && p >= b && p - b <= m->size && size <= m->size - (p - b)) found = m;
  }
  pthread_mutex_unlock(&ctx->lock);
  if (found == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_MEM,
                      "pointer %p (%zu bytes) is not inside memory registered by rank %d; register it first", ptr,
                      size, ctx->cfg.rank);
  *mem = found;
  *offset = (size_t)(p - (uintptr_t)found->ptr);
  return mscclppSuccess;
}

/* ---- records ------------------------------------------------------------------ */

mscclppResult_t mscclppMemSerialize(const struct mscclppRegisteredMemory* m, void* buf, size_t bufSize,
                                    size_t* written) {
  if (m == NULL || written == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_MEM, "mscclppMemorySerialize: NULL %s",
                      m == NULL ? "mem" : "written");
  /* Registrations for a transport with a hook (Net: the provider's key in
   * the record's NET section) get the hook's registration once the
   * transport is attached; before that the record serves the other
   * transports only. */
  if (m->origin == MSCCLPP_MEM_REGISTERED)
    for (int i = 0; i < MSCCLPP_MEM_TRANSPORT_SLOTS; i++) {
      mscclppTransport_t t = (mscclppTransport_t)(1u << i);
      if ((m->transports & (uint32_t)t) && !__atomic_load_n(&m->hooked[i].ready, __ATOMIC_ACQUIRE) &&
          mscclppMemContextHookState(m->ctx, t) != NULL)
        MSCCLPP_RETURN_ON_ERROR(mscclppMemPrepare((struct mscclppRegisteredMemory*)m, t));
    }
  size_t need = mscclppMemRecordSize(&m->record);
  if (buf == NULL) {
    *written = need;
    return mscclppSuccess;
  }
  if (bufSize < need)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_MEM,
                      "mscclppMemorySerialize: the record takes %zu bytes, the buffer has %zu", need, bufSize);
  *written = mscclppMemRecordEncode(&m->record, m->ctx->cfg.secret, buf, bufSize);
  return mscclppSuccess;
}

