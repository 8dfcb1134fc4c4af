/* SPDX-License-Identifier: MIT */
/*
 * A rank's link with one peer of an execution plan (plan_link.h), made and
 * freed the same way by the host and the GPU executor.
 */
#include <stdlib.h>
#include <string.h>

#include "coll/plan/plan_link.h"
#include "core/error.h"
#include "core/log.h"

/* Channels of rank `from`'s of `type` to rank `to`. */
static int channelsTo(const struct mscclppPlan* plan, int from, int to, int type) {
  const struct mscclppPlanGpu* g = &plan->gpus[from];
  int n = 0;
  for (uint32_t i = 0; i < g->nChannels; i++) n += g->channels[i].type == type && g->channels[i].peer == to;
  return n;
}

int mscclppPlanReaches(const struct mscclppPlan* plan, int a, int b) {
  const struct mscclppPlanGpu* g = &plan->gpus[a];
  for (uint32_t i = 0; i < g->nChannels; i++)
    if (g->channels[i].peer == b) return 1;
  for (uint32_t i = 0; i < g->nRemotes; i++)
    if (g->remotes[i].rank == b) return 1;
  return 0;
}

/* Channels of a type with peer q: as many as the side with more has. */
static int pairedChannels(const struct mscclppPlan* plan, int rank, int q, int type) {
  int mine = channelsTo(plan, rank, q, type);
  int theirs = channelsTo(plan, q, rank, type);
  return mine > theirs ? mine : theirs;
}

mscclppResult_t mscclppPlanLinkCreate(struct mscclppComm* comm, const struct mscclppPlan* plan, int peer, int tagBase,
                                      mscclppTransport_t transport, mscclppRegisteredMemory_t region,
                                      uint64_t peerBytes, struct mscclppPlanLink* p) {
  const int q = peer;
  MSCCLPP_RETURN_ON_ERROR(mscclppConnectionCreate(comm, q, tagBase, transport, &p->conn));
  mscclppMemoryChannelConfig mc = MSCCLPP_MEMORY_CHANNEL_CONFIG_INITIALIZER;
  mc.local = region;
  mc.tag = tagBase + 1;
  MSCCLPP_RETURN_ON_ERROR(mscclppMemoryChannelCreate(comm, p->conn, &mc, &p->map));
  MSCCLPP_RETURN_ON_ERROR(mscclppMemoryChannelGetDeviceHandle(p->map, &p->mapH));
  if (p->mapH.dstSize < peerBytes)
    return mscclppErr(mscclppInternalError, MSCCLPP_LOG_COLL,
                      "execution plan %s: rank %d's region is %llu bytes, rank %d expected %llu", plan->name, q,
                      (unsigned long long)p->mapH.dstSize, comm->rank, (unsigned long long)peerBytes);
  p->nMem = pairedChannels(plan, comm->rank, q, MSCCLPP_PLAN_CHANNEL_MEMORY);
  p->nPort = pairedChannels(plan, comm->rank, q, MSCCLPP_PLAN_CHANNEL_PORT);
  p->mem = (mscclppMemoryChannel_t*)calloc((size_t)p->nMem + 1, sizeof(*p->mem));
  p->port = (mscclppPortChannel_t*)calloc((size_t)p->nPort + 1, sizeof(*p->port));
  if (p->mem == NULL || p->port == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_COLL, "out of memory");
  for (int j = 0; j < p->nMem; j++) {
    mc.tag = tagBase + ((2 + j) & 0xffff);
    MSCCLPP_RETURN_ON_ERROR(mscclppMemoryChannelCreate(comm, p->conn, &mc, &p->mem[j]));
  }
  mscclppPortChannelConfig pc = MSCCLPP_PORT_CHANNEL_CONFIG_INITIALIZER;
  pc.local = region;
  for (int j = 0; j < p->nPort; j++) {
    pc.tag = tagBase + ((2 + p->nMem + j) & 0xffff);
    MSCCLPP_RETURN_ON_ERROR(mscclppPortChannelCreate(comm, p->conn, &pc, &p->port[j]));
  }
  return mscclppSuccess;
}

mscclppResult_t mscclppPlanLinkHandles(const mscclppPlanProgram* prog, const struct mscclppPlanLink* const* peer,
                                       mscclppMemoryChannelDeviceHandle* mem, mscclppPortChannelDeviceHandle* port) {
  const mscclppPlanChannel* ch = mscclppPlanProgramChannels(prog);
  for (uint32_t i = 0; i < prog->nChannels; i++) {
    const struct mscclppPlanLink* p = peer[ch[i].peer];
    if (ch[i].type == MSCCLPP_PLAN_CHANNEL_MEMORY)
      MSCCLPP_RETURN_ON_ERROR(mscclppMemoryChannelGetDeviceHandle(p->mem[ch[i].pairIndex], &mem[i]));
    else
      MSCCLPP_RETURN_ON_ERROR(mscclppPortChannelGetDeviceHandle(p->port[ch[i].pairIndex], &port[i]));
  }
  return mscclppSuccess;
}

void mscclppPlanLinkFree(struct mscclppPlanLink* p) {
  for (int j = 0; p->port != NULL && j < p->nPort; j++)
    if (p->port[j] != NULL) (void)mscclppPortChannelDestroy(p->port[j]);
  for (int j = 0; p->mem != NULL && j < p->nMem; j++)
    if (p->mem[j] != NULL) (void)mscclppMemoryChannelDestroy(p->mem[j]);
  if (p->map != NULL) (void)mscclppMemoryChannelDestroy(p->map);
  if (p->conn != NULL) (void)mscclppConnectionDestroy(p->conn);
  free(p->port);
  free(p->mem);
  memset(p, 0, sizeof(*p));
}
