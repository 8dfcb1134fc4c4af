/* SPDX-License-Identifier: MIT */
/*
 * The host backend's executor of execution plans (plan_host.c: staging,
 * channels and a call; plan_host_run.c: the thread blocks).
 *
 * Ranks of the host backend are processes whose buffers are plain host
 * memory that peers cannot map, while a plan's ops load and store peers'
 * input, output and scratch. So each rank stages: per plan it allocates one
 * region of host shared memory (input area, output area, scratch),
 * registered for HostShm, that every peer the plan connects it with maps
 * through a memory channel; a call copies the caller's input into the
 * input area (padding each block to the plan's chunks when the size does
 * not divide), runs the program over the regions, and copies the output
 * area back. The plan's memory channels are memory channels over HostShm
 * connections and its port channels real port channels (the proxy copies
 * with memcpy), both on the same region, so every signal, wait, put and
 * flush goes through the library's own channel code. CPU threads play the
 * thread blocks: the calling thread runs every block in turn, switching at
 * each op that waits (a wait, a barrier, a semaphore, packets not yet
 * arrived), so blocks that wait for each other make progress without a
 * thread each (the CI machine has 2 cores for up to 8 ranks of up to 64
 * blocks).
 */
#ifndef MSCCLPP_SRC_COLL_PLAN_PLAN_HOST_H_
#define MSCCLPP_SRC_COLL_PLAN_PLAN_HOST_H_

#include "coll/coll.h"
#include "coll/plan/plan.h"

struct mscclppPlanHostCtx;

/* Run `plan` for call `a` on comm (every rank calls, with the same plan
 * and count). *ctx is the plan's state on comm, made at the first call
 * (ctxId: the same number on every rank, for the channels' tags) and
 * rebuilt when a call needs a larger region. */
mscclppResult_t mscclppPlanHostRun(struct mscclppComm* comm, struct mscclppPlanHostCtx** ctx, int ctxId,
                                   struct mscclppPlan* plan, const struct mscclppCollArgs* a);

/* Free a state (local: peers keep their mappings of the region). */
void mscclppPlanHostFree(struct mscclppComm* comm, struct mscclppPlanHostCtx* ctx);

#endif /* MSCCLPP_SRC_COLL_PLAN_PLAN_HOST_H_ */
