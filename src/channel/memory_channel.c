/* Memory channels (mscclpp/memory_channel.h): the peer's memory and inbound
 * semaphore line mapped into this process, so kernels load and store them
 * directly. Creation is the shared handshake of channel.c plus checks that
 * the kernels of this rank can address what the peer offered. */
#include <stdlib.h>
#include <string.h>

#include "channel/channel.h"
#include "core/error.h"
#include "core/log.h"

struct mscclppMemoryChannel {
  struct mscclppChannelContext* ctx;
  struct mscclppChannelPeerInfo peer;
  mscclppMemoryChannelDeviceHandle handle;
};

/* Can kernels of this process (GPU: through devPtr; host backend: CPU
 * threads) load and store m directly? */
static int directlyAddressable(const struct mscclppRegisteredMemory* m, int device) {
  if (device < 0) return m->hostAccessible; /* host backend: CPU threads */
  switch (m->kind) {
    case mscclppMemKindDevice:
    case mscclppMemKindDeviceCuMem: return 1;
    case mscclppMemKindHostPinned: return m->devPtr != NULL;
    default: return 0; /* host memory the GPU has no mapping of */
  }
}

mscclppResult_t mscclppMemoryChannelBuild(struct mscclppChannelContext* ctx, struct mscclppConnection* conn,
                                          const mscclppMemoryChannelConfig* cfg, struct mscclppMemoryChannel** out) {
  static const char fn[] = "mscclppMemoryChannelCreate";
  if (ctx == NULL || conn == NULL || cfg == NULL || out == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_CHANNEL, "%s: NULL %s", fn,
                      conn == NULL ? "connection" : cfg == NULL ? "config" : "channel");
  if (cfg->structSize != sizeof(mscclppMemoryChannelConfig))
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_CHANNEL,
                      "mscclppMemoryChannelConfig.structSize is %zu, expected %zu: start from "
                      "MSCCLPP_MEMORY_CHANNEL_CONFIG_INITIALIZER",
                      cfg->structSize, sizeof(mscclppMemoryChannelConfig));
  const struct mscclppRegisteredMemory* local = cfg->local;
  if (local == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_CHANNEL, "%s: config->local is NULL", fn);
  if (local->ctx != conn->mctx || local->ownerRank != conn->rank)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_CHANNEL,
                      "%s: local memory %llu is not this rank's memory of the connection's communicator", fn,
                      (unsigned long long)local->record.memId);
  int device = mscclppChannelContextDevice(ctx);
  if (!directlyAddressable(local, device))
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_CHANNEL,
                      "%s: local memory %llu is %s memory, which this rank's %s cannot load and store directly", fn,
                      (unsigned long long)local->record.memId, mscclppMemKindName(local->kind),
                      device < 0 ? "threads" : "kernels");
  enum mscclppSemArenaKind kind = device < 0 ? MSCCLPP_SEM_ARENA_HOST : MSCCLPP_SEM_ARENA_DEVICE;
  struct mscclppMemoryChannel* ch = calloc(1, sizeof(*ch));
  if (ch == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_CHANNEL, "cannot allocate a memory channel");
  ch->ctx = ctx;
  struct mscclppSemEnd end;
  memset(&end, 0, sizeof(end));
  mscclppResult_t res = mscclppChannelExchange(ctx, conn, cfg->tag, MSCCLPP_CHANNEL_KIND_MEMORY, kind,
                                               (struct mscclppRegisteredMemory*)local, &end, &ch->peer);
  if (res != mscclppSuccess) {
    free(ch);
    return res;
  }
  const struct mscclppRegisteredMemory* rm = ch->peer.mem;
  if (!directlyAddressable(rm, device) || !directlyAddressable(ch->peer.semMem, device)) {
    res = mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_CHANNEL,
                     "%s: rank %d offers %s memory %llu, which rank %d's %s cannot map for loads and stores (use "
                     "device memory on a GPU, memory from mscclppMemAlloc HostShared on the host backend)",
                     fn, conn->remoteRank, mscclppMemKindName(rm->kind), (unsigned long long)rm->record.memId,
                     conn->rank, device < 0 ? "threads" : "kernels");
    mscclppChannelRelease(ctx, &ch->peer);
    free(ch);
    return res;
  }
  mscclppMemoryChannelDeviceHandle* h = &ch->handle;
  h->dst = (uint8_t*)rm->devPtr;
  h->dstSize = rm->size;
  h->src = (uint8_t*)local->devPtr;
  h->srcSize = local->size;
  h->sem.inbound = end.inboundDev;
  h->sem.expected = end.expectedDev;
  h->sem.outbound = (uint64_t*)((char*)ch->peer.semMem->devPtr + ch->peer.semOffset);
  h->sem.outboundCount = end.outboundCountDev;
  mscclppAbortWaitContext(mscclppChannelContextAbort(ctx), mscclppChannelContextTimeout(ctx), 1, &h->sem.wait);
  MSCCLPP_INFO(MSCCLPP_LOG_CHANNEL, "memory channel rank %d -> rank %d (tag %d): peer memory %p (%llu bytes)",
               conn->rank, conn->remoteRank, cfg->tag, (void*)h->dst, (unsigned long long)h->dstSize);
  *out = ch;
  return mscclppSuccess;
}

mscclppResult_t mscclppMemoryChannelDestroy(mscclppMemoryChannel_t ch) {
  if (ch == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_CHANNEL, "mscclppMemoryChannelDestroy: NULL");
  mscclppResult_t res = mscclppChannelRelease(ch->ctx, &ch->peer);
  free(ch);
  return res;
}

mscclppResult_t mscclppMemoryChannelGetDeviceHandle(mscclppMemoryChannel_t ch,
                                                    mscclppMemoryChannelDeviceHandle* handle) {
  if (ch == NULL || handle == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_CHANNEL,
                      "mscclppMemoryChannelGetDeviceHandle: NULL argument");
  *handle = ch->handle;
  return mscclppSuccess;
}
