/* SPDX-License-Identifier: MIT */
/*
 * What a rank holds of a peer that an execution plan links it with, the
 * same for both executors (plan_host.c: HostShm on host shared memory;
 * plan_gpu.c: CUDA IPC on device memory): the connection, the mapping of
 * the peer's region, and the plan's channels with that peer.
 *
 * Channels pair as MSCCL++ pairs them: rank a's j-th channel of a type to b
 * holds a semaphore pair with b's j-th channel of that type to a. A rank
 * makes, per peer and type, as many channels as the side with more has
 * (MSCCL++ makes the missing ones "unpaired" the same way), each with the
 * tag of its number, so that both sides' creations meet. The executors
 * link their peers in rank order, so that no two ranks wait for each other
 * in a cycle.
 */
#ifndef MSCCLPP_SRC_COLL_PLAN_PLAN_LINK_H_
#define MSCCLPP_SRC_COLL_PLAN_PLAN_LINK_H_

#include <stdint.h>

#include "coll/plan/plan.h"
#include "comm/comm.h"
#include "mscclpp/connection.h"
#include "mscclpp/memory.h"
#include "mscclpp/memory_channel.h"
#include "mscclpp/port_channel.h"

struct mscclppPlanLink {
  mscclppConnection_t conn;   /* of the executor's transport */
  mscclppMemoryChannel_t map; /* maps the peer's region; its semaphore ends calls of racy LL plans */
  mscclppMemoryChannelDeviceHandle mapH;
  int nMem, nPort;             /* channels made with the peer: max of both sides' counts per type */
  mscclppMemoryChannel_t* mem; /* [nMem] */
  mscclppPortChannel_t* port;  /* [nPort] */
};

/* Does rank a reach rank b in `plan` (a channel to b, or one of b's
 * buffers)? Two ranks are linked when either reaches the other. */
int mscclppPlanReaches(const struct mscclppPlan* plan, int a, int b);

/* Link comm's rank with `peer` (both call it, in the same order of peers):
 * a connection over `transport`, a memory channel on `region` (this rank's
 * region, registered for `transport`) that maps the peer's, and the plan's
 * memory and port channels with the peer, also on `region`. Bootstrap tags
 * are tagBase + 0 (the connection), + 1 (the mapping), + 2... (the
 * channels); tagBase names the executor and the plan's state and leaves
 * the low 16 bits free. mscclppInternalError when the peer's region is
 * smaller than peerBytes (the layout this rank expects of it),
 * mscclppSystemError when out of memory, and the connection's and
 * channels' errors. On failure, what was made stays in *link for
 * mscclppPlanLinkFree. */
mscclppResult_t mscclppPlanLinkCreate(struct mscclppComm* comm, const struct mscclppPlan* plan, int peer, int tagBase,
                                      mscclppTransport_t transport, mscclppRegisteredMemory_t region,
                                      uint64_t peerBytes, struct mscclppPlanLink* link);

/* The device handle of every channel of `prog` from the links with its
 * peers (peer[q]: the link with rank q, made): program channel i's into
 * mem[i] (a memory channel) or port[i] (a port channel), the pair the
 * channel's number with its peer names. The channels' errors. */
mscclppResult_t mscclppPlanLinkHandles(const mscclppPlanProgram* prog, const struct mscclppPlanLink* const* peer,
                                       mscclppMemoryChannelDeviceHandle* mem, mscclppPortChannelDeviceHandle* port);

/* Destroy what *link holds (channels, mapping, connection) and zero it;
 * a zeroed or partly made link is fine. */
void mscclppPlanLinkFree(struct mscclppPlanLink* link);

#endif /* MSCCLPP_SRC_COLL_PLAN_PLAN_LINK_H_ */
