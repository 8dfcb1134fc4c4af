/* SPDX-License-Identifier: MIT */
/*
 * Execution plans as a backend of the collective layer (plan_coll.c): the
 * plans registered on a communicator, the pick of the selection table
 * (coll.c's dispatch asks it before its own rules), and the run of a plan on
 * the backend where the call runs (the host backend today: plan_host.h).
 */
#ifndef MSCCLPP_SRC_COLL_PLAN_PLAN_COLL_H_
#define MSCCLPP_SRC_COLL_PLAN_PLAN_COLL_H_

#include <stdint.h>

#include "coll/coll.h"
#include "coll/plan/plan.h"

/* A plan the communicator knows: registered (selectable), or only run
 * through mscclppPlanExecute; its executor state, made at its first run. */
struct mscclppPlanEntry {
  struct mscclppPlan* plan; /* a reference of its own */
  int registered;
  uint64_t runs;                   /* calls run with it on this communicator (mscclppPlanRunCount) */
  struct mscclppPlanHostCtx* host; /* the host executor's state, or NULL */
  struct mscclppPlanGpuCtx* gpu;   /* the GPU executor's state, or NULL */
};

struct mscclppPlanRegistry {
  int n, cap;
  struct mscclppPlanEntry* e; /* in registration order */
  int nextCtxId;              /* executor states made so far (every rank counts alike) */
  int cacheLoaded;            /* MSCCLPP_CACHE_DIR was read */
};

/* MSCCLPP_CACHE_DIR's plans for comm, registered (at creation, from the
 * prepare hook; once). Never fails: a plan for another rank count is
 * skipped (INFO), an unreadable one is a warning naming the file. */
void mscclppCollPlanLoadCache(struct mscclppComm* comm);

/* The first registered plan that runs call `a` on `backend`, or NULL. */
struct mscclppPlan* mscclppCollPlanPick(struct mscclppComm* comm, const struct mscclppCollArgs* a,
                                        mscclppCollBackend backend);

/* mscclppPlanExecute's checks of `a` against a->plan (before any
 * communication): the rank count, one host, the in-place form, the
 * message size, a backend with an executor. mscclppInvalidArgument /
 * mscclppInvalidUsage naming the values. */
mscclppResult_t mscclppCollPlanCheck(const char* fn, struct mscclppComm* comm, const struct mscclppCollArgs* a);

/* Run `plan` for `a` on `backend`. */
mscclppResult_t mscclppCollPlanRun(struct mscclppComm* comm, struct mscclppPlan* plan, const struct mscclppCollArgs* a,
                                   mscclppCollBackend backend);

/* The collective a plan implements, as the collective layer numbers them. */
mscclppCollKind mscclppCollPlanKind(const struct mscclppPlan* plan);
const char* mscclppCollPlanName(const struct mscclppPlan* plan);

/* Free comm's plans and their executor states (comm destruction). */
void mscclppCollPlanRelease(struct mscclppComm* comm, struct mscclppPlanRegistry* reg);

#endif /* MSCCLPP_SRC_COLL_PLAN_PLAN_COLL_H_ */
