/* SPDX-License-Identifier: MIT */
/* Opening a record in this process (the owner's pointer, or a mapping of
 * another process's memory), closing, and records through the bootstrap.
 * See memory.h. */
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

/* Map another process's memory described by rec into this one. */
static mscclppResult_t mapRemote(struct mscclppMemContext* ctx, struct mscclppRegisteredMemory* m) {
  const struct mscclppMemRecord* rec = &m->record;
  const struct mscclppMemConfig* cfg = &ctx->cfg;
  mscclppMemKind_t kind = (mscclppMemKind_t)rec->kind;
  if (rec->hostHash != cfg->hostHash)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_MEM,
                      "memory %llu of rank %d lives on host '%s' (id %016llx), but rank %d is on host '%s' (id "
                      "%016llx): transports CudaIpc and HostShm reach only the same host",
                      (unsigned long long)rec->memId, m->ownerRank, rec->hostName, (unsigned long long)rec->hostHash,
                      cfg->rank, cfg->hostName, (unsigned long long)cfg->hostHash);
  if (mscclppMemKindIsHost(kind) && !rec->hasFd)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_MEM,
                      "memory %llu of rank %d (%s, at 0x%llx) was not allocated by mscclppMemAlloc, so another process "
                      "cannot map it; allocate it with mscclppMemAlloc(comm, mscclppMemKindHostShared or "
                      "mscclppMemKindHostPinned, ...)",
                      (unsigned long long)rec->memId, m->ownerRank, mscclppMemKindName(kind),
                      (unsigned long long)rec->addr);
  if (!mscclppMemKindIsHost(kind) && !ctx->hasGpu)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_MEM,
                      "memory %llu of rank %d is %s memory, and this process (rank %d) has no CUDA device to map it",
                      (unsigned long long)rec->memId, m->ownerRank, mscclppMemKindName(kind), cfg->rank);
  mscclppDeadline deadline = mscclppDeadlineIn(cfg->timeoutSec);
  if (kind == mscclppMemKindDevice) {
    if (!rec->hasCudaIpc)
      return mscclppErr(mscclppRemoteError, MSCCLPP_LOG_MEM, "device memory %llu of rank %d has no CUDA IPC handle",
                        (unsigned long long)rec->memId, m->ownerRank);
    void* base = NULL;
    MSCCLPP_RETURN_ON_ERROR(mscclppGpuIpcOpenHandle(rec->cudaIpc.handle, &base));
    m->mapping = MSCCLPP_MEM_MAP_CUDA_IPC;
    m->mapBase = base;
    m->mapSize = rec->cudaIpc.allocSize;
    m->ptr = m->devPtr = (void*)((uintptr_t)base + rec->cudaIpc.offset);
    return mscclppSuccess;
  }
  if (!rec->hasFd)
    return mscclppErr(mscclppRemoteError, MSCCLPP_LOG_MEM, "%s memory %llu of rank %d has no file descriptor export",
                      mscclppMemKindName(kind), (unsigned long long)rec->memId, m->ownerRank);
  int fd = -1;
  MSCCLPP_RETURN_ON_ERROR(
      mscclppFdFetch(rec->fd.server, rec->fd.exportId, rec->fd.token, m->ownerRank, deadline, cfg->abortFlag, &fd));
  mscclppResult_t res;
  void* base = NULL;
  if (kind == mscclppMemKindDeviceCuMem) {
    res = mscclppGpuCuMemImportFd(fd, (size_t)rec->fd.mapSize, &base);
    close(fd);
    if (res != mscclppSuccess) return res;
    m->mapping = MSCCLPP_MEM_MAP_CUMEM;
    m->mapBase = base;
    m->mapSize = (size_t)rec->fd.mapSize;
    m->ptr = m->devPtr = (void*)((uintptr_t)base + rec->fd.offset);
    return mscclppSuccess;
  }
  res = mscclppShmMap(fd, (size_t)rec->fd.mapSize, &base);
  close(fd);
  if (res != mscclppSuccess) return res;
  m->mapping = MSCCLPP_MEM_MAP_SHM;
  m->mapBase = base;
  m->mapSize = (size_t)rec->fd.mapSize;
  m->ptr = (void*)((uintptr_t)base + rec->fd.offset);
  m->devPtr = m->ptr;
  if (kind == mscclppMemKindHostPinned && ctx->hasGpu) {
    void* devBase = NULL;
    res = mscclppGpuIpcHostRegister(base, m->mapSize, &devBase);
    if (res != mscclppSuccess) {
      mscclppShmUnmap(base, m->mapSize);
      return res;
    }
    m->hostRegistered = 1;
    m->devPtr = (void*)((uintptr_t)devBase + rec->fd.offset);
  }
  return mscclppSuccess;
}

mscclppResult_t mscclppMemOpen(struct mscclppMemContext* ctx, const void* buf, size_t size, mscclppResult_t badRecord,
                               struct mscclppRegisteredMemory** out) {
  if (ctx == NULL || buf == NULL || out == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_MEM, "mscclppMemoryOpen: NULL %s",
                      ctx == NULL ? "communicator" : buf == NULL ? "buffer" : "mem");
  struct mscclppRegisteredMemory* m = calloc(1, sizeof(*m));
  if (m == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_MEM, "cannot allocate an opened memory");
  char why[200];
  if (mscclppMemRecordDecode(buf, size, ctx->cfg.secret, &m->record, why, sizeof(why)) != mscclppSuccess) {
    free(m);
    return mscclppErr(badRecord, MSCCLPP_LOG_MEM, "rank %d refused a memory record: %s", ctx->cfg.rank, why);
  }
  const struct mscclppMemRecord* rec = &m->record;
  m->ctx = ctx;
  m->origin = MSCCLPP_MEM_OPENED;
  m->size = rec->size;
  m->kind = (mscclppMemKind_t)rec->kind;
  m->transports = rec->transports;
  m->ownerRank = rec->ownerRank;
  m->hostAccessible = mscclppMemKindIsHost(m->kind);
  m->sameProcess = rec->ownerPid == (uint32_t)getpid() && rec->processToken == mscclppMemProcessToken() &&
                   rec->hostHash == ctx->cfg.hostHash;
  if (m->sameProcess) {
    /* The owner's own addresses (CUDA cannot open a handle of its own process). */
    m->ptr = (void*)(uintptr_t)rec->addr;
    m->devPtr = (void*)(uintptr_t)rec->devAddr;
  } else if (rec->hasNet && (rec->hostHash != ctx->cfg.hostHash || (mscclppMemKindIsHost(m->kind) && !rec->hasFd) ||
                              (!mscclppMemKindIsHost(m->kind) && !ctx->hasGpu))) {
    /* Only the network transport reaches it (another host, or memory no
     * mapping of this process can reach): nothing to map; the transport
     * addresses it with the record's NET section. */
    m->ptr = m->devPtr = NULL;
    m->hostAccessible = 0;
  } else {
    mscclppResult_t res = mapRemote(ctx, m);
    if (res != mscclppSuccess) {
      free(m);
      return res;
    }
  }
  pthread_mutex_lock(&ctx->lock);
  mscclppMemLink(ctx, m);
  pthread_mutex_unlock(&ctx->lock);
  MSCCLPP_INFO(MSCCLPP_LOG_MEM, "rank %d opened %s memory %llu of rank %d (%llu bytes) at %p%s", ctx->cfg.rank,
               mscclppMemKindName(m->kind), (unsigned long long)rec->memId, m->ownerRank,
               (unsigned long long)m->size, m->ptr, m->sameProcess ? " (same process)" : "");
  *out = m;
  return mscclppSuccess;
}

mscclppResult_t mscclppMemClose(struct mscclppRegisteredMemory* m) {
  if (m == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_MEM, "mscclppMemoryClose: NULL mem");
  if (m->origin != MSCCLPP_MEM_OPENED)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_MEM,
                      "mscclppMemoryClose: memory %llu at %p was registered here; use mscclppMemoryDeregister",
                      (unsigned long long)m->record.memId, m->ptr);
  struct mscclppMemContext* ctx = m->ctx;
  mscclppResult_t res = mscclppSuccess;
  switch (m->mapping) {
    case MSCCLPP_MEM_MAP_CUDA_IPC:
      res = mscclppGpuIpcCloseHandle(m->mapBase);
      break;
    case MSCCLPP_MEM_MAP_CUMEM:
      res = mscclppGpuCuMemUnmap(m->mapBase, m->mapSize);
      break;
    case MSCCLPP_MEM_MAP_SHM:
      if (m->hostRegistered) res = mscclppGpuIpcHostUnregister(m->mapBase);
      mscclppShmUnmap(m->mapBase, m->mapSize);
      break;
    case MSCCLPP_MEM_MAP_NONE:
      break;
  }
  pthread_mutex_lock(&ctx->lock);
  mscclppMemUnlink(ctx, m);
  pthread_mutex_unlock(&ctx->lock);
  free(m);
  return res;
}

mscclppResult_t mscclppMemSend(struct mscclppMemContext* ctx, const struct mscclppRegisteredMemory* m, int peer,
                               int tag) {
  if (ctx == NULL || m == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_MEM, "mscclppMemorySend: NULL %s",
                      ctx == NULL ? "communicator" : "mem");
  uint8_t buf[MSCCLPP_MEM_RECORD_MAX];
  size_t n = 0;
  MSCCLPP_RETURN_ON_ERROR(mscclppMemSerialize(m, buf, sizeof(buf), &n));
  uint8_t len[8];
  for (int i = 0; i < 8; i++) len[i] = (uint8_t)((uint64_t)n >> (8 * i));
  const struct mscclppMemBootstrap* bs = &ctx->cfg.bootstrap;
  MSCCLPP_RETURN_ON_ERROR(bs->send(bs->ctx, peer, tag, len, sizeof(len)));
  return bs->send(bs->ctx, peer, tag, buf, n);
}

mscclppResult_t mscclppMemRecv(struct mscclppMemContext* ctx, int peer, int tag, struct mscclppRegisteredMemory** m) {
  if (ctx == NULL || m == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_MEM, "mscclppMemoryRecv: NULL %s",
                      ctx == NULL ? "communicator" : "mem");
  const struct mscclppMemBootstrap* bs = &ctx->cfg.bootstrap;
  uint8_t len[8];
  MSCCLPP_RETURN_ON_ERROR(bs->recv(bs->ctx, peer, tag, len, sizeof(len)));
  uint64_t n = 0;
  for (int i = 0; i < 8; i++) n |= (uint64_t)len[i] << (8 * i);
  if (n == 0 || n > MSCCLPP_MEM_RECORD_MAX)
    return mscclppErr(mscclppRemoteError, MSCCLPP_LOG_MEM,
                      "rank %d announced a memory record of %llu bytes (tag %d); records have at most %d",
                      peer, (unsigned long long)n, tag, MSCCLPP_MEM_RECORD_MAX);
  uint8_t buf[MSCCLPP_MEM_RECORD_MAX];
  MSCCLPP_RETURN_ON_ERROR(bs->recv(bs->ctx, peer, tag, buf, (size_t)n));
  return mscclppMemOpen(ctx, buf, (size_t)n, mscclppRemoteError, m);
}
