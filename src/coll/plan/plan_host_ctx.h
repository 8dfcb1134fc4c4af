/* SPDX-License-Identifier: MIT */
/*
 * The host executor's state of one plan on one communicator, shared by its
 * two files: plan_host.c (region, channels, staging) and plan_host_run.c
 * (the thread blocks). See plan_host.h for the design.
 */
#ifndef MSCCLPP_SRC_COLL_PLAN_PLAN_HOST_CTX_H_
#define MSCCLPP_SRC_COLL_PLAN_PLAN_HOST_CTX_H_

#include <stdint.h>

#include "coll/host/coll_host_reduce.h"
#include "coll/plan/plan_host.h"
#include "coll/plan/plan_link.h"
#include "mscclpp/connection.h"
#include "mscclpp/memory_channel.h"
#include "mscclpp/port_channel.h"

/* Where a rank's buffers are in its region, for one chunk size. */
struct planLayout {
  uint64_t off[MSCCLPP_PLAN_SPACES]; /* input, output, scratch */
  uint64_t bytes;                    /* the region's bytes in use */
};

/* What this rank holds of a peer (or of itself). */
struct planHostPeer {
  int linked;                  /* the plan connects the two (channels or buffers, either way) */
  struct mscclppPlanLink link; /* HostShm: connection, mapping of the peer's region, channels */
  uint8_t* base;               /* the peer's region as mapped here */
  uint64_t bytes;
};

struct mscclppPlanHostCtx {
  struct mscclppPlan* plan;
  mscclppPlanProgram* prog;
  int ctxId;
  int rank, nranks;
  struct mscclppAbort* abort;
  double timeout;
  /* the region: this rank's input, output and scratch areas */
  uint64_t capChunk; /* the chunk size the regions hold (every rank's) */
  uint8_t* region;
  uint64_t regionBytes;
  mscclppRegisteredMemory_t regionMem;
  struct planHostPeer* peer; /* [nranks] */
  /* program channel i: a memory or a port channel handle */
  mscclppMemoryChannelDeviceHandle* memH;
  mscclppPortChannelDeviceHandle* portH;
  int64_t* sem;  /* the plan's semaphores (initialised once) */
  uint32_t flag; /* executions so far (the LL flag of the current one) */
  /* per call (the layout depends on the chunk size) */
  uint8_t** remotes;   /* [nRemotes]: each remote buffer as mapped here */
  uint64_t* remoteOff; /* [nRemotes]: its offset in its owner's region (port channel puts) */
  uint8_t* tmp;        /* reductions' and packets' scratch: two halves of tmpBytes each */
  uint64_t tmpBytes;
};

/* The buffers of one call, as the ops address them. */
struct planCall {
  struct mscclppPlanHostCtx* x;
  mscclppPlanCallShape shape;
  uint8_t* local[MSCCLPP_PLAN_SPACES]; /* this rank's input, output, scratch */
  struct planLayout mine;
  mscclppHostReduceFn reduce;
  size_t typeSize;
  const char* name; /* the plan's, for messages */
};

/* Where `rank`'s areas are in its region for chunk size c (plan_host.c):
 * the scratch first (at 0, sized for x->capChunk), then input and output. */
void mscclppPlanHostLayout(const struct mscclppPlanHostCtx* x, int rank, uint64_t chunkBytes, struct planLayout* l);

/* Run every thread block of the program to its end (plan_host_run.c).
 * mscclppTimeout (raising the abort) after MSCCLPP_TIMEOUT without
 * progress, naming what each block waits for; the abort's error when it is
 * raised; a port channel's failure. */
mscclppResult_t mscclppPlanHostExecute(struct mscclppComm* comm, struct planCall* call);

#endif /* MSCCLPP_SRC_COLL_PLAN_PLAN_HOST_CTX_H_ */
