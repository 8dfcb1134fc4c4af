/* SPDX-License-Identifier: MIT */
/* The public memory and connection API (include/mscclpp/memory.h,
 * include/mscclpp/connection.h): each call unpacks the communicator and
 * forwards to the memory or transport layer. The communicator's memory
 * context is made on first use, from the communicator's rank, job secret,
 * host identity, parameters and bootstrap. */
#include <stdlib.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "comm/comm.h"
#include "core/error.h"
#include "core/log.h"
#include "gpu/abort.h"
#include "memory/memory.h"
#include "mscclpp/connection.h"
#include "mscclpp/memory.h"
#include "transport/transport.h"

static mscclppResult_t bsSend(void* ctx, int peer, int tag, const void* data, size_t size) {
  return mscclppBootstrapSendTo((struct mscclppBootstrap*)ctx, peer, tag, data, size);
}

static mscclppResult_t bsRecv(void* ctx, int peer, int tag, void* data, size_t size) {
  return mscclppBootstrapRecvFrom((struct mscclppBootstrap*)ctx, peer, tag, data, size);
}

/* The communicator's memory context, made on first use (two threads racing
 * here both make one; one wins, the other is destroyed). */
static mscclppResult_t memOf(mscclppComm_t comm, const char* fn, struct mscclppMemContext** out) {
  if (comm == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_MEM, "%s: comm is NULL", fn);
  struct mscclppMemContext* ctx = __atomic_load_n(&comm->mem, __ATOMIC_ACQUIRE);
  if (ctx != NULL) {
    *out = ctx;
    return mscclppSuccess;
  }
  /* The communicator's abort object comes first: the memory layer's waits
   * (fd hand-over, flushes) give up when its flag rises. */
  struct mscclppAbort* abort = NULL;
  MSCCLPP_RETURN_ON_ERROR(mscclppCommAbortOf(comm, &abort));
  struct mscclppMemConfig cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.rank = comm->rank;
  mscclppBootstrapGetSecret(comm->bootstrap, cfg.secret);
  mscclppBootstrapHostIdentity(&comm->params, cfg.hostName, sizeof(cfg.hostName), &cfg.hostHash);
  cfg.timeoutSec = comm->params.timeout;
  cfg.abortFlag = abort->flagHost;
  cfg.bootstrap.ctx = comm->bootstrap;
  cfg.bootstrap.send = bsSend;
  cfg.bootstrap.recv = bsRecv;
  MSCCLPP_RETURN_ON_ERROR(mscclppMemContextCreate(&cfg, &ctx));
  struct mscclppMemContext* expected = NULL;
  if (!__atomic_compare_exchange_n(&comm->mem, &expected, ctx, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    (void)mscclppMemContextDestroy(ctx);
    ctx = expected;
  }
  *out = ctx;
  return mscclppSuccess;
}

/* ---- memory -------------------------------------------------------------------- */

mscclppResult_t mscclppMemAlloc(mscclppComm_t comm, mscclppMemKind_t kind, size_t size, void** ptr) {
  struct mscclppMemContext* ctx = NULL;
  MSCCLPP_RETURN_ON_ERROR(memOf(comm, "mscclppMemAlloc", &ctx));
  return mscclppMemContextAlloc(ctx, kind, size, ptr);
}

mscclppResult_t mscclppMemFree(mscclppComm_t comm, void* ptr) {
  struct mscclppMemContext* ctx = NULL;
  MSCCLPP_RETURN_ON_ERROR(memOf(comm, "mscclppMemFree", &ctx));
  return mscclppMemContextFree(ctx, ptr);
}

mscclppResult_t mscclppMemoryRegister(mscclppComm_t comm, void* ptr, size_t size, unsigned transports,
                                      mscclppRegisteredMemory_t* mem) {
  struct mscclppMemContext* ctx = NULL;
  MSCCLPP_RETURN_ON_ERROR(memOf(comm, "mscclppMemoryRegister", &ctx));
  return mscclppMemRegister(ctx, ptr, size, transports, mem);
}

mscclppResult_t mscclppMemoryDeregister(mscclppRegisteredMemory_t mem) { return mscclppMemDeregister(mem); }

/* The earlier spellings (memory.h): aliases, not a second implementation. */
mscclppResult_t mscclppRegisterMemory(mscclppComm_t comm, void* ptr, size_t size, unsigned transports,
                                      mscclppRegisteredMemory_t* mem) {
  return mscclppMemoryRegister(comm, ptr, size, transports, mem);
}

mscclppResult_t mscclppDeregisterMemory(mscclppRegisteredMemory_t mem) { return mscclppMemoryDeregister(mem); }

mscclppResult_t mscclppMemoryLookup(mscclppComm_t comm, const void* ptr, size_t size, mscclppRegisteredMemory_t* mem,
                                    size_t* offset) {
  struct mscclppMemContext* ctx = NULL;
  MSCCLPP_RETURN_ON_ERROR(memOf(comm, "mscclppMemoryLookup", &ctx));
  return mscclppMemLookup(ctx, ptr, size, mem, offset);
}

mscclppResult_t mscclppMemorySerialize(mscclppRegisteredMemory_t mem, void* buf, size_t bufSize, size_t* written) {
  return mscclppMemSerialize(mem, buf, bufSize, written);
}

mscclppResult_t mscclppMemoryOpen(mscclppComm_t comm, const void* buf, size_t size, mscclppRegisteredMemory_t* mem) {
  struct mscclppMemContext* ctx = NULL;
  MSCCLPP_RETURN_ON_ERROR(memOf(comm, "mscclppMemoryOpen", &ctx));
  return mscclppMemOpen(ctx, buf, size, mscclppInvalidArgument, mem);
}

mscclppResult_t mscclppMemoryClose(mscclppRegisteredMemory_t mem) { return mscclppMemClose(mem); }

mscclppResult_t mscclppMemorySend(mscclppComm_t comm, mscclppRegisteredMemory_t mem, int peer, int tag) {
  struct mscclppMemContext* ctx = NULL;
  MSCCLPP_RETURN_ON_ERROR(memOf(comm, "mscclppMemorySend", &ctx));
  return mscclppMemSend(ctx, mem, peer, tag);
}

mscclppResult_t mscclppMemoryRecv(mscclppComm_t comm, int peer, int tag, mscclppRegisteredMemory_t* mem) {
  struct mscclppMemContext* ctx = NULL;
  MSCCLPP_RETURN_ON_ERROR(memOf(comm, "mscclppMemoryRecv", &ctx));
  return mscclppMemRecv(ctx, peer, tag, mem);
}

static mscclppResult_t checkMem(mscclppRegisteredMemory_t mem, const void* out, const char* fn) {
  if (mem == NULL || out == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_MEM, "%s: NULL %s", fn, mem == NULL ? "mem" : "output");
  return mscclppSuccess;
}

mscclppResult_t mscclppMemoryPtr(mscclppRegisteredMemory_t mem, void** ptr) {
  MSCCLPP_RETURN_ON_ERROR(checkMem(mem, ptr, "mscclppMemoryPtr"));
  *ptr = mem->ptr;
  return mscclppSuccess;
}

mscclppResult_t mscclppMemoryDevicePtr(mscclppRegisteredMemory_t mem, void** devPtr) {
  MSCCLPP_RETURN_ON_ERROR(checkMem(mem, devPtr, "mscclppMemoryDevicePtr"));
  *devPtr = mem->devPtr;
  return mscclppSuccess;
}

mscclppResult_t mscclppMemorySize(mscclppRegisteredMemory_t mem, size_t* size) {
  MSCCLPP_RETURN_ON_ERROR(checkMem(mem, size, "mscclppMemorySize"));
  *size = (size_t)mem->size;
  return mscclppSuccess;
}

mscclppResult_t mscclppMemoryKind(mscclppRegisteredMemory_t mem, mscclppMemKind_t* kind) {
  MSCCLPP_RETURN_ON_ERROR(checkMem(mem, kind, "mscclppMemoryKind"));
  *kind = mem->kind;
  return mscclppSuccess;
}

mscclppResult_t mscclppMemoryTransports(mscclppRegisteredMemory_t mem, unsigned* transports) {
  MSCCLPP_RETURN_ON_ERROR(checkMem(mem, transports, "mscclppMemoryTransports"));
  *transports = mem->transports;
  return mscclppSuccess;
}

mscclppResult_t mscclppMemoryRank(mscclppRegisteredMemory_t mem, int* rank) {
  MSCCLPP_RETURN_ON_ERROR(checkMem(mem, rank, "mscclppMemoryRank"));
  *rank = mem->ownerRank;
  return mscclppSuccess;
}

/* ---- connections -------------------------------------------------------------------- */

mscclppResult_t mscclppConnectionCreate(mscclppComm_t comm, int peer, int tag, mscclppTransport_t transport,
                               mscclppConnection_t* conn) {
  struct mscclppMemContext* ctx = NULL;
  MSCCLPP_RETURN_ON_ERROR(memOf(comm, "mscclppConnectionCreate", &ctx));
  if (peer < 0 || peer >= comm->nranks)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_TRANSPORT, "mscclppConnectionCreate: peer %d is outside [0, %d)", peer,
                      comm->nranks);
  return mscclppConnCreate(ctx, peer, tag, transport, conn);
}

mscclppResult_t mscclppConnectionDestroy(mscclppConnection_t conn) { return mscclppConnDestroy(conn); }

mscclppResult_t mscclppConnectionWrite(mscclppConnection_t conn, mscclppRegisteredMemory_t dst, uint64_t dstOffset,
                                       mscclppRegisteredMemory_t src, uint64_t srcOffset, uint64_t size) {
  return mscclppConnWrite(conn, dst, dstOffset, src, srcOffset, size);
}

mscclppResult_t mscclppConnectionSignal(mscclppConnection_t conn, mscclppRegisteredMemory_t dst, uint64_t dstOffset,
                                        uint64_t value) {
  return mscclppConnSignal(conn, dst, dstOffset, value);
}

mscclppResult_t mscclppConnectionFlush(mscclppConnection_t conn) { return mscclppConnFlush(conn); }

mscclppResult_t mscclppConnectionTransport(mscclppConnection_t conn, mscclppTransport_t* transport) {
  if (conn == NULL || transport == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_TRANSPORT, "mscclppConnectionTransport: NULL argument");
  *transport = conn->ops->transport;
  return mscclppSuccess;
}

mscclppResult_t mscclppConnectionHasCapability(mscclppConnection_t conn, mscclppConnectionCap_t cap, int* has) {
  uint32_t c = (uint32_t)cap;
  if (conn == NULL || has == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_TRANSPORT, "mscclppConnectionHasCapability: NULL argument");
  if (c == 0 || (c & (c - 1)) != 0 || (c & ~MSCCLPP_TRANSPORT_CAP_ALL) != 0)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_TRANSPORT,
                      "mscclppConnectionHasCapability: 0x%x is not one mscclppConnectionCap_t value", c);
  *has = mscclppConnHasCap(conn, c);
  return mscclppSuccess;
}

mscclppResult_t mscclppConnectionRemoteRank(mscclppConnection_t conn, int* rank) {
  if (conn == NULL || rank == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_TRANSPORT, "mscclppConnectionRemoteRank: NULL argument");
  *rank = conn->remoteRank;
  return mscclppSuccess;
}
