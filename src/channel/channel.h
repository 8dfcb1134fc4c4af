/* SPDX-License-Identifier: MIT */
/*
 * The channel layer's state for one communicator (public API:
 * include/mscclpp/port_channel.h, memory_channel.h; the comm layer unpacks
 * the communicator and forwards here, src/comm/channel_api.c).
 *
 * A channel context owns:
 *  - semaphore arenas: registered memory holding the inbound counters peers
 *    signal (one 64-byte line each, never reused), of the kinds the channels
 *    ask for (device memory, pinned host, host shared), and local counter
 *    blocks (expected / outbound counts, written only by this rank's
 *    kernels, never registered);
 *  - a cache of the peers' memories it opened (one mapping per remote
 *    registration and process, shared by the channels that use it);
 *  - the port channel executor: the trigger FIFO, the proxy service that
 *    drains it, and the tables that map a trigger's ids to memories,
 *    connections and semaphores (port_channel.c).
 * It knows nothing of the communicator: it gets the memory context (rank,
 * bootstrap, timeout), the abort object and the device.
 */
#ifndef MSCCLPP_SRC_CHANNEL_CHANNEL_H_
#define MSCCLPP_SRC_CHANNEL_CHANNEL_H_

#include <pthread.h>
#include <stdint.h>

#include "gpu/abort.h"
#include "memory/memory.h"
#include "mscclpp/memory_channel.h"
#include "mscclpp/port_channel.h"
#include "mscclpp/proxy.h"
#include "transport/transport.h"

struct mscclppChannelConfig {
  struct mscclppMemContext* mctx;
  struct mscclppAbort* abort; /* retained by the context */
  int device;                 /* CUDA device of the kernels; MSCCLPP_HOST_BACKEND_DEVICE: host backend */
  double timeoutSec;
  int fifoSize;               /* 0: MSCCLPP_FIFO_SIZE */
};

struct mscclppChannelContext;

mscclppResult_t mscclppChannelContextCreate(const struct mscclppChannelConfig* cfg,
                                            struct mscclppChannelContext** ctx);
/* mscclppInvalidUsage, freeing nothing, while channels live; otherwise stop
 * the proxy, close the opened memories, free the arenas. NULL is ignored. */
mscclppResult_t mscclppChannelContextDestroy(struct mscclppChannelContext* ctx);
/* Number of live port and memory channels. */
int mscclppChannelContextLive(struct mscclppChannelContext* ctx);

mscclppResult_t mscclppChannelProxyStart(struct mscclppChannelContext* ctx);
mscclppResult_t mscclppChannelProxyStop(struct mscclppChannelContext* ctx);

/* Public semantics in include/mscclpp/port_channel.h / memory_channel.h. */
mscclppResult_t mscclppPortChannelBuild(struct mscclppChannelContext* ctx, struct mscclppConnection* conn,
                                        const mscclppPortChannelConfig* cfg, struct mscclppPortChannel** out);
/* The peer's memory of a port channel, as this rank's kernels address it. */
void* mscclppPortChannelRemotePtr(const struct mscclppPortChannel* ch);
mscclppResult_t mscclppPortChannelAddMem(struct mscclppChannelContext* ctx, struct mscclppRegisteredMemory* mem,
                                         uint32_t* id);
mscclppResult_t mscclppMemoryChannelBuild(struct mscclppChannelContext* ctx, struct mscclppConnection* conn,
                                          const mscclppMemoryChannelConfig* cfg, struct mscclppMemoryChannel** out);

/* ---- shared by channel.c, port_channel.c, memory_channel.c ------------------------ */

/* Kinds of semaphore arenas. */
enum mscclppSemArenaKind { MSCCLPP_SEM_ARENA_DEVICE = 0, MSCCLPP_SEM_ARENA_HOST_PINNED = 1, MSCCLPP_SEM_ARENA_HOST = 2 };
#define MSCCLPP_SEM_ARENA_KINDS 3

/* One semaphore end, as channel creation sets it up. */
struct mscclppSemEnd {
  /* this rank's inbound line: registered memory + offset */
  struct mscclppRegisteredMemory* inboundMem;
  uint64_t inboundOffset;
  uint64_t* inboundDev;       /* as kernels see it */
  uint64_t* expectedDev;      /* local counter block */
  uint64_t* outboundCountDev; /* local counter block */
  uint32_t id;                /* the semaphore's number in the context (1, 2, ...): its handle's id */
  /* the peer's inbound line, opened here */
  struct mscclppRegisteredMemory* remoteMem;
  uint64_t remoteOffset;
};

/* What both sides of a channel tell each other at creation. */
struct mscclppChannelPeerInfo {
  struct mscclppRegisteredMemory* mem;    /* the peer's `local` memory, opened (cached) */
  struct mscclppRegisteredMemory* semMem; /* the peer's semaphore arena, opened (cached) */
  uint64_t semOffset;
};

#define MSCCLPP_CHANNEL_KIND_PORT 1u
#define MSCCLPP_CHANNEL_KIND_MEMORY 2u

/* Allocate this rank's semaphore end in an arena of `kind`, exchange
 * (local memory record, semaphore) with the peer of conn under tag, and
 * open the peer's (through the cache). On success *end and *peer are set
 * and the opened memories are referenced (release with
 * mscclppChannelRelease). */
mscclppResult_t mscclppChannelExchange(struct mscclppChannelContext* ctx, struct mscclppConnection* conn, int tag,
                                       uint32_t channelKind, enum mscclppSemArenaKind kind,
                                       struct mscclppRegisteredMemory* local, struct mscclppSemEnd* end,
                                       struct mscclppChannelPeerInfo* peer);
/* Drop the references mscclppChannelExchange took (closing opened memories
 * no channel uses any more) and count the channel out. */
mscclppResult_t mscclppChannelRelease(struct mscclppChannelContext* ctx, struct mscclppChannelPeerInfo* peer);

/* ---- the hang report (core/report.h): read from a signal handler ----------------
 * These read the context without locks and call only async-signal-safe
 * functions; the context must stay alive while they run (its communicator
 * detaches its report source before destroying it). */

/* What semaphore `id` (a handle's id) is: its channel's peer, kind
 * (MSCCLPP_CHANNEL_KIND_*) and tag, and its inbound counter if this
 * process's host can read it (NULL for device memory). 0 when the id is
 * unknown. */
struct mscclppChannelSemInfo {
  int peer;
  uint32_t kind;
  int tag;
  const uint64_t* inboundHost;
};
int mscclppChannelSemLookup(const struct mscclppChannelContext* ctx, uint32_t id, struct mscclppChannelSemInfo* out);
/* "port", "memory" */
const char* mscclppChannelKindName(uint32_t kind);

/* Report lines of the port channels' proxy (port_channel.c): its FIFO's
 * counters and first pending triggers decoded. Nothing without a port
 * channel executor. */
struct mscclppReportRecord;
struct mscclppPortExecutor;
void mscclppChannelReportProxy(const struct mscclppChannelContext* ctx, const struct mscclppReportRecord* rec);
void mscclppPortExecutorReport(const struct mscclppPortExecutor* exec, const struct mscclppReportRecord* rec);

/* The context's fields the channel files read. */
struct mscclppAbort* mscclppChannelContextAbort(struct mscclppChannelContext* ctx);
int mscclppChannelContextDevice(const struct mscclppChannelContext* ctx);
double mscclppChannelContextTimeout(const struct mscclppChannelContext* ctx);
/* The port executor (created on first use; its FIFO added to the proxy). */
struct mscclppPortExecutor;
mscclppResult_t mscclppChannelContextExecutor(struct mscclppChannelContext* ctx, struct mscclppPortExecutor** exec);

/* port_channel.c */
mscclppResult_t mscclppPortExecutorCreate(struct mscclppChannelContext* ctx, int fifoSize,
                                          struct mscclppPortExecutor** exec);
void mscclppPortExecutorDestroy(struct mscclppPortExecutor* exec);
mscclppResult_t mscclppPortExecutorStart(struct mscclppPortExecutor* exec);
mscclppResult_t mscclppPortExecutorStop(struct mscclppPortExecutor* exec);

#endif /* MSCCLPP_SRC_CHANNEL_CHANNEL_H_ */
