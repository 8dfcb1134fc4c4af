/* SPDX-License-Identifier: MIT */
/* Transport HostShm: the CPU copies through shared mappings of host memory
 * (the host backend, and host memory between ranks of one host).
 *
 * write  - memmove; complete and visible (to acquire loads) when it returns.
 * signal - one 64-bit store with release order: a reader that loads the
 *          value with acquire order sees every earlier write.
 * flush  - a full fence; nothing is ever pending. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "transport/transport.h"

static mscclppResult_t shmCheck(const struct mscclppEndpoint* a, const struct mscclppEndpoint* b, char* why,
                                size_t whyLen) {
  if (!(a->available & b->available & mscclppTransportHostShm)) {
    snprintf(why, whyLen, "a side cannot run it");
    return mscclppInvalidUsage;
  }
  if (a->hostHash != b->hostHash) {
    snprintf(why, whyLen, "the ranks are on different hosts ('%s' and '%s')", a->hostName, b->hostName);
    return mscclppInvalidUsage;
  }
  return mscclppSuccess;
}

static mscclppResult_t shmOpen(struct mscclppConnection* conn) {
  (void)conn;
  return mscclppSuccess;
}

static mscclppResult_t shmClose(struct mscclppConnection* conn) {
  (void)conn;
  return mscclppSuccess;
}

static mscclppResult_t shmWrite(struct mscclppConnection* conn, struct mscclppRegisteredMemory* dst,
                                uint64_t dstOffset, struct mscclppRegisteredMemory* src, uint64_t srcOffset,
                                uint64_t size) {
  (void)conn;
  /* Registrations for HostShm are host memory (register.c refuses others). */
  memmove((char*)dst->ptr + dstOffset, (const char*)src->ptr + srcOffset, size);
  return mscclppSuccess;
}

static mscclppResult_t shmSignal(struct mscclppConnection* conn, struct mscclppRegisteredMemory* dst,
                                 uint64_t dstOffset, uint64_t value) {
  (void)conn;
  __atomic_store_n((uint64_t*)((char*)dst->ptr + dstOffset), value, __ATOMIC_RELEASE);
  return mscclppSuccess;
}

static mscclppResult_t shmWriteInline(struct mscclppConnection* conn, struct mscclppRegisteredMemory* dst,
                                      uint64_t dstOffset, const void* bytes, uint32_t size,
                                      struct mscclppRegisteredMemory* sigDst, uint64_t sigOffset, uint64_t sigValue) {
  memcpy((char*)dst->ptr + dstOffset, bytes, size);
  return sigDst != NULL ? shmSignal(conn, sigDst, sigOffset, sigValue) : mscclppSuccess;
}

static mscclppResult_t shmFlush(struct mscclppConnection* conn) {
  (void)conn;
  atomic_thread_fence(memory_order_seq_cst);
  return mscclppSuccess;
}

static mscclppResult_t shmQuery(struct mscclppConnection* conn, int* idle) {
  (void)conn;
  *idle = 1; /* writes complete before they return */
  return mscclppSuccess;
}

static int shmAvailable(const struct mscclppEndpoint* local, int wanted) {
  (void)local;
  (void)wanted;
  return 1;
}

/* The semaphore in pinned host memory where there is a GPU: the CPU stores
 * into it, the kernel polls it. */
static const struct mscclppTransportAttrs shmAttrs = {.caps = MSCCLPP_TRANSPORT_CAP_WRITE_INLINE,
                                                      .semDevice = MSCCLPP_TRANSPORT_SEM_PINNED_ON_GPU,
                                                      .semAuto = MSCCLPP_TRANSPORT_SEM_PINNED_ON_GPU};

const struct mscclppTransportOps mscclppTransportHostShmOps = {
    .name = "HostShm",
    .transport = mscclppTransportHostShm,
    .attrs = &shmAttrs,
    .available = shmAvailable,
    .check = shmCheck,
    .open = shmOpen,
    .close = shmClose,
    .write = shmWrite,
    .signal = shmSignal,
    .writeInline = shmWriteInline,
    .flush = shmFlush,
    .query = shmQuery,
};
