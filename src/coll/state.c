/* SPDX-License-Identifier: MIT */
/*
 * The collective layer's per-communicator state and its one first-use
 * policy (coll.h): build privately, publish only when complete, remember a
 * failed build.
 */
#include <stdio.h>
#include <stdlib.h>

#include "coll/coll.h"
#include "coll/hier/coll_hier.h"
#include "coll/plan/plan_coll.h"
#include "core/error.h"
#include "core/log.h"

/* What a slot holds for its backend's release: the complete state or what
 * a failed build left. */
static void* slotTake(struct mscclppCollSlot* slot) {
  void* p = slot->ready != NULL ? slot->ready : slot->remains;
  slot->ready = NULL;
  slot->remains = NULL;
  return p;
}

/* comm's release hook (comm.h): every backend's state, then the layer's. */
static void collRelease(struct mscclppComm* comm) {
  struct mscclppCollState* st = comm->coll;
  if (st == NULL) return;
  void* p;
  /* execution plans' states: their connections and channels are comm's */
  mscclppCollPlanRelease(comm, st->plans);
  st->plans = NULL;
  /* the hierarchy's children first: they use the parent's abort object */
  if ((p = slotTake(&st->slot[MSCCLPP_COLL_BACKEND_HIER])) != NULL) mscclppCollHierRelease(comm, p);
  if ((p = slotTake(&st->slot[MSCCLPP_COLL_BACKEND_HOST])) != NULL) mscclppCollHostRelease(comm, p);
  if ((p = slotTake(&st->slot[MSCCLPP_COLL_BACKEND_PORT])) != NULL) mscclppCollPortRelease(comm, p);
  if ((p = slotTake(&st->slot[MSCCLPP_COLL_BACKEND_GPU])) != NULL) mscclppCollGpuRelease(comm, p);
  mscclppCollTraceDestroy(st->gpuTrace); /* after the releases, which waited for the kernels */
  mscclppCollCheckRelease(st->check);
  comm->coll = NULL;
  free(st);
}

mscclppResult_t mscclppCollStateOf(struct mscclppComm* comm, struct mscclppCollState** state) {
  if (comm->coll == NULL) {
    struct mscclppCollState* st = (struct mscclppCollState*)calloc(1, sizeof(*st));
    if (st == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_COLL, "out of memory");
    comm->coll = st;
    comm->collRelease = collRelease;
  }
  *state = comm->coll;
  return mscclppSuccess;
}

mscclppResult_t mscclppCollBackendState(struct mscclppComm* comm, mscclppCollBackend backend,
                                        mscclppCollBuildFn build, void** state) {
  struct mscclppCollState* st = NULL;
  MSCCLPP_RETURN_ON_ERROR(mscclppCollStateOf(comm, &st));
  struct mscclppCollSlot* slot = &st->slot[backend];
  if (slot->ready != NULL) {
    *state = slot->ready;
    return mscclppSuccess;
  }
  if (slot->failure != mscclppSuccess) /* logged by that call */
    return mscclppErrAgain(mscclppInvalidUsage, MSCCLPP_LOG_COLL,
                           "rank %d: %s collectives: the setup of this communicator's state failed at an earlier call "
                           "(%s: %s); destroy the communicator",
                           comm->rank, mscclppCollBackendName(backend), mscclppGetErrorString(slot->failure),
                           slot->why);
  void* built = NULL;
  mscclppResult_t res = build(comm, &built);
  if (res != mscclppSuccess) {
    /* the build logged why, where it decided; keep what it made for the
     * release at destroy, and never hand it to a call */
    slot->failure = res;
    snprintf(slot->why, sizeof(slot->why), "%s", mscclppGetLastError());
    slot->remains = built;
    return res;
  }
  slot->ready = built;
  *state = built;
  return mscclppSuccess;
}

mscclppResult_t mscclppCollPrepare(struct mscclppComm* comm) {
  /* MSCCLPP_CACHE_DIR's plans, whatever MSCCLPP_COLL_PREPARE says: reading
   * files waits for no peer, and calls must find them registered */
  mscclppCollPlanLoadCache(comm);
  if (comm->params.collPrepare == 0) return mscclppSuccess;
  /* a bad MSCCLPP_ALGO is reported by the first call that reads it */
  if (comm->nranks == 1 || !mscclppCollSelectParses(comm)) return mscclppSuccess;
  int need[MSCCLPP_COLL_BACKENDS] = {0};
  for (int k = 0; k < MSCCLPP_COLL_KINDS; k++) {
    mscclppCollAlgo forced = MSCCLPP_COLL_ALGO_AUTO;
    MSCCLPP_RETURN_ON_ERROR(mscclppCollSelectForced(comm, (mscclppCollKind)k, &forced));
    if (mscclppCollSelectHier(comm, (mscclppCollKind)k, forced)) continue;
    need[mscclppCollSelectBackend(comm, (mscclppCollKind)k, forced)] = 1;
  }
  /* every rank computes the same set (MSCCLPP_ALGO and the layout are the
   * job's), so every rank builds the same states, in this order */
  if (need[MSCCLPP_COLL_BACKEND_GPU]) MSCCLPP_RETURN_ON_ERROR(mscclppCollGpuPrepare(comm));
  if (need[MSCCLPP_COLL_BACKEND_PORT]) MSCCLPP_RETURN_ON_ERROR(mscclppCollPortPrepare(comm));
  return mscclppSuccess;
}

/* The communicator layer runs the hook at creation (comm.h); it cannot
 * call this layer itself. */
__attribute__((constructor)) static void registerPrepare(void) { mscclppCommSetPrepareHook(mscclppCollPrepare); }

mscclppResult_t mscclppCollAgreeMin(struct mscclppComm* comm, uint64_t mine, uint64_t* agreed) {
  uint64_t* all = (uint64_t*)calloc((size_t)comm->nranks, sizeof(uint64_t));
  if (all == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_COLL, "out of memory");
  all[comm->rank] = mine;
  mscclppResult_t res = mscclppBootstrapAllGather(comm, all, sizeof(uint64_t));
  uint64_t least = mine;
  for (int r = 0; r < comm->nranks && res == mscclppSuccess; r++)
    if (all[r] < least) least = all[r];
  free(all);
  MSCCLPP_RETURN_ON_ERROR(res);
  *agreed = least;
  return mscclppSuccess;
}
