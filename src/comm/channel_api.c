/* SPDX-License-Identifier: MIT */
/* The communicator's channel context (semaphores, opened peer memories, the
 * port channel proxy), made on first use with the abort object
 * (comm_abort.c), and the public channel API (include/mscclpp/port_channel.h,
 * memory_channel.h): each call finds that context and forwards to the channel
 * layer. */
#include <pthread.h>
#include <string.h>

#include "channel/channel.h"
#include "comm/comm.h"
#include "core/error.h"
#include "core/log.h"
#include "gpu/abort.h"

mscclppResult_t mscclppCommChannelsOf(struct mscclppComm* comm, struct mscclppMemContext* mctx,
                                      struct mscclppChannelContext** out) {
  struct mscclppAbort* abort = NULL;
  MSCCLPP_RETURN_ON_ERROR(mscclppCommAbortOf(comm, &abort));
  pthread_mutex_lock(&comm->lazyLock);
  mscclppResult_t res = mscclppSuccess;
  if (comm->channels == NULL) {
    struct mscclppChannelConfig cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.mctx = mctx;
    cfg.abort = abort;
    cfg.device = comm->device;
    cfg.timeoutSec = comm->params.timeout;
    cfg.fifoSize = (int)comm->params.fifoSize;
    struct mscclppChannelContext* made = NULL;
    res = mscclppChannelContextCreate(&cfg, &made);
    if (res == mscclppSuccess) __atomic_store_n(&comm->channels, made, __ATOMIC_RELEASE); /* comm_report.c reads it */
  }
  if (res == mscclppSuccess) *out = comm->channels;
  pthread_mutex_unlock(&comm->lazyLock);
  return res;
}

mscclppResult_t mscclppCommChannelsRelease(struct mscclppComm* comm) {
  pthread_mutex_lock(&comm->lazyLock);
  mscclppResult_t res = mscclppSuccess;
  int live = mscclppChannelContextLive(comm->channels);
  if (live > 0) {
    res = mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_INIT,
                     "mscclppCommDestroy: %d channel(s) of rank %d are still alive; destroy them first", live,
                     comm->rank);
  } else if (comm->channels != NULL) {
    res = mscclppChannelContextDestroy(comm->channels);
    comm->channels = NULL; /* the hang report's source was detached before (comm.c) */
  }
  pthread_mutex_unlock(&comm->lazyLock);
  return res;
}

/* The channel context of comm, checking that conn belongs to it. */
static mscclppResult_t channelsFor(mscclppComm_t comm, struct mscclppConnection* conn, const char* fn,
                                   struct mscclppChannelContext** ctx) {
  if (comm == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_CHANNEL, "%s: comm is NULL", fn);
  if (conn == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_CHANNEL, "%s: connection is NULL", fn);
  struct mscclppMemContext* mctx = __atomic_load_n(&comm->mem, __ATOMIC_ACQUIRE);
  if (mctx == NULL || conn->mctx != mctx)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_CHANNEL,
                      "%s: the connection (rank %d to rank %d) belongs to another communicator", fn, conn->rank,
                      conn->remoteRank);
  return mscclppCommChannelsOf(comm, mctx, ctx);
}

mscclppResult_t mscclppPortChannelCreate(mscclppComm_t comm, mscclppConnection_t conn,
                                         const mscclppPortChannelConfig* config, mscclppPortChannel_t* channel) {
  struct mscclppChannelContext* ctx = NULL;
  MSCCLPP_RETURN_ON_ERROR(channelsFor(comm, conn, "mscclppPortChannelCreate", &ctx));
  return mscclppPortChannelBuild(ctx, conn, config, channel);
}

mscclppResult_t mscclppMemoryChannelCreate(mscclppComm_t comm, mscclppConnection_t conn,
                                           const mscclppMemoryChannelConfig* config, mscclppMemoryChannel_t* channel) {
  struct mscclppChannelContext* ctx = NULL;
  MSCCLPP_RETURN_ON_ERROR(channelsFor(comm, conn, "mscclppMemoryChannelCreate", &ctx));
  return mscclppMemoryChannelBuild(ctx, conn, config, channel);
}

mscclppResult_t mscclppPortChannelAddMemory(mscclppComm_t comm, mscclppRegisteredMemory_t mem, uint32_t* id) {
  if (comm == NULL || mem == NULL || id == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_CHANNEL, "mscclppPortChannelAddMemory: NULL argument");
  struct mscclppMemContext* mctx = __atomic_load_n(&comm->mem, __ATOMIC_ACQUIRE);
  if (mem->ctx != mctx)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_CHANNEL,
                      "mscclppPortChannelAddMemory: memory %llu of rank %d belongs to another communicator",
                      (unsigned long long)mem->record.memId, mem->ownerRank);
  struct mscclppChannelContext* ctx = NULL;
  MSCCLPP_RETURN_ON_ERROR(mscclppCommChannelsOf(comm, mctx, &ctx));
  return mscclppPortChannelAddMem(ctx, mem, id);
}

mscclppResult_t mscclppCommProxyStart(mscclppComm_t comm) {
  if (comm == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_CHANNEL, "mscclppCommProxyStart: NULL");
  struct mscclppMemContext* mctx = __atomic_load_n(&comm->mem, __ATOMIC_ACQUIRE);
  if (mctx == NULL) return mscclppSuccess; /* no memory, hence no port channel yet: creation will start it */
  struct mscclppChannelContext* ctx = NULL;
  MSCCLPP_RETURN_ON_ERROR(mscclppCommChannelsOf(comm, mctx, &ctx));
  return mscclppChannelProxyStart(ctx);
}

mscclppResult_t mscclppCommProxyStop(mscclppComm_t comm) {
  if (comm == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_CHANNEL, "mscclppCommProxyStop: NULL");
  struct mscclppMemContext* mctx = __atomic_load_n(&comm->mem, __ATOMIC_ACQUIRE);
  if (mctx == NULL) return mscclppSuccess;
  struct mscclppChannelContext* ctx = NULL;
  MSCCLPP_RETURN_ON_ERROR(mscclppCommChannelsOf(comm, mctx, &ctx));
  return mscclppChannelProxyStop(ctx);
}

mscclppResult_t mscclppCommAbort(mscclppComm_t comm, const char* reason) {
  if (comm == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_CHANNEL, "mscclppCommAbort: NULL");
  struct mscclppAbort* abort = NULL;
  MSCCLPP_RETURN_ON_ERROR(mscclppCommAbortOf(comm, &abort));
  return mscclppAbortRaise(abort, mscclppAborted, reason != NULL ? reason : "aborted by the application");
}
