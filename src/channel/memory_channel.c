/* SPDX-License-Identifier: MIT */
/* Memory channels (mscclpp/memory_channel.h): the peer's memory and inbound
 * semaphore line mapped into this process, so kernels load and store them
 * directly. Creation is the shared handshake of channel.c plus checks that
 * the kernels of this rank can address what the peer offered. */
#include <stdlib.h>
#include <string.h>

#include "channel/channel.h"
#include "core/bytes.h"
#include "core/error.h"
#include "core/log.h"
#include "gpu/gpu.h"

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

static int isDeviceMemory(const struct mscclppRegisteredMemory* m) {
  return m->kind == mscclppMemKindDevice || m->kind == mscclppMemKindDeviceCuMem;
}

/* After the shared handshake, each side tells the other where its kernels
 * run and whether its own words of the channel live there, so both can
 * decide whether gpu-scope release/acquire is enough:
 *   magic u32 "MSDV" | bus id length u32 | host hash u64 |
 *   flags u32 (bit 0: this side's memory and inbound semaphore are device
 *   memory of its kernels' device) | reserved u32 (0) |
 *   PCI bus id of the kernels' device (BUS_ID_BYTES, NUL padded; length 0
 *   on the host backend).
 * The PCI bus id names the physical device whatever CUDA_VISIBLE_DEVICES
 * each process has; the host hash keeps two hosts apart. Both sides compare
 * the same values, so they reach the same answer. */
#define DEVICE_MSG_MAGIC 0x5644534du /* "MSDV" */
#define DEVICE_MSG_LOCAL_ON_DEVICE 1u
#define BUS_ID_BYTES 32
#define DEVICE_MSG_BYTES (24 + BUS_ID_BYTES)

/* *gpuScope = 1 when both sides' kernels run on the same device and both
 * keep their memory and inbound semaphore in it (myLocalOnDevice, and the
 * peer's flag). */
static mscclppResult_t exchangeDevice(struct mscclppConnection* conn, int tag, int device, int myLocalOnDevice,
                                      int* gpuScope) {
  const struct mscclppMemConfig* mcfg = mscclppMemContextConfig(conn->mctx);
  const struct mscclppMemBootstrap* bs = &mcfg->bootstrap;
  char mine[BUS_ID_BYTES];
  memset(mine, 0, sizeof(mine));
  if (device >= 0) MSCCLPP_RETURN_ON_ERROR(mscclppGpuPciBusId(device, mine, sizeof(mine)));
  uint8_t msg[DEVICE_MSG_BYTES];
  memset(msg, 0, sizeof(msg));
  mscclppPutLE32(msg, DEVICE_MSG_MAGIC);
  mscclppPutLE32(msg + 4, (uint32_t)strlen(mine));
  mscclppPutLE64(msg + 8, mcfg->hostHash);
  mscclppPutLE32(msg + 16, myLocalOnDevice ? DEVICE_MSG_LOCAL_ON_DEVICE : 0u);
  memcpy(msg + 24, mine, strlen(mine));
  MSCCLPP_RETURN_ON_ERROR(bs->send(bs->ctx, conn->remoteRank, tag, msg, sizeof(msg)));
  MSCCLPP_RETURN_ON_ERROR(bs->recv(bs->ctx, conn->remoteRank, tag, msg, sizeof(msg)));
  uint32_t magic = mscclppGetLE32(msg), len = mscclppGetLE32(msg + 4);
  uint64_t theirHost = mscclppGetLE64(msg + 8);
  uint32_t theirFlags = mscclppGetLE32(msg + 16);
  if (magic != DEVICE_MSG_MAGIC || len >= BUS_ID_BYTES)
    return mscclppErr(mscclppRemoteError, MSCCLPP_LOG_CHANNEL,
                      "rank %d sent a memory channel device message on tag %d with magic 0x%08x and bus id length "
                      "%u (expected 0x%08x and < %d)",
                      conn->remoteRank, tag, magic, len, DEVICE_MSG_MAGIC, BUS_ID_BYTES);
  char theirs[BUS_ID_BYTES];
  memcpy(theirs, msg + 24, len);
  theirs[len] = '\0';
  *gpuScope = device >= 0 && len > 0 && theirHost == mcfg->hostHash && strcmp(theirs, mine) == 0 &&
              myLocalOnDevice && (theirFlags & DEVICE_MSG_LOCAL_ON_DEVICE) != 0;
  return mscclppSuccess;
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
  /* gpu scope only when both ranks' kernels run on one device and every
   * word the channel's signals order or publish lives in that device's
   * memory (the data either side puts, both inbound counters). Any host
   * memory, another device or the host backend: system scope. */
  int gpuScope = 0;
  int myLocalOnDevice = device >= 0 && isDeviceMemory(local) && local->record.device == device &&
                        isDeviceMemory(end.inboundMem) && end.inboundMem->record.device == device;
  res = exchangeDevice(conn, cfg->tag, device, myLocalOnDevice, &gpuScope);
  if (res != mscclppSuccess) {
    mscclppChannelRelease(ctx, &ch->peer);
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
  h->sem.id = end.id;
  mscclppAbortWaitContext(mscclppChannelContextAbort(ctx), mscclppChannelContextTimeout(ctx), 1, &h->sem.wait);
  h->sem.scope = gpuScope ? MSCCLPP_SEMAPHORE_SCOPE_GPU : MSCCLPP_SEMAPHORE_SCOPE_SYS;
  MSCCLPP_INFO(MSCCLPP_LOG_CHANNEL,
               "memory channel rank %d -> rank %d (tag %d): peer memory %p (%llu bytes), %s-scope signal/wait",
               conn->rank, conn->remoteRank, cfg->tag, (void*)h->dst, (unsigned long long)h->dstSize,
               h->sem.scope == MSCCLPP_SEMAPHORE_SCOPE_GPU ? "gpu" : "system");
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

size_t mscclppMemoryChannelDeviceHandleSize(void) { return sizeof(mscclppMemoryChannelDeviceHandle); }
