/* SPDX-License-Identifier: MIT */
/*
 * ncclGroupStart / ncclGroupEnd: what is called in between is recorded on
 * this thread and run at the outermost ncclGroupEnd:
 *   1. communicator inits (ncclCommInitRank*, ncclCommSplit) start, each on
 *      its own thread, so one thread can create every rank of a clique; the
 *      blocking ones are waited for;
 *   2. operations, per communicator in call order (enqueue.c: its sends and
 *      receives as one mscclpp group). With several communicators each runs
 *      on a thread of its own (current device: the communicator's), since a
 *      rank's call may wait on the host for its peers' calls.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "gpu/gpu.h"
#include "nccl/nccl_internal.h"

static _Thread_local int depth;
static _Thread_local struct mscclppNcclOp* ops;
static _Thread_local int nops, capOps;
static _Thread_local struct ncclComm** joins;
static _Thread_local int njoins, capJoins;
static _Thread_local ncclResult_t groupError; /* first error of a call inside the group */

int mscclppNcclGroupActive(void) { return depth > 0; }

ncclResult_t ncclGroupStart(void) {
  if (depth == 0) groupError = ncclSuccess;
  depth++;
  return ncclSuccess;
}
NCCL_PROFILING_ALIAS(ncclGroupStart);

static ncclResult_t grow(void** arr, int* cap, int need, size_t elem) {
  if (need <= *cap) return ncclSuccess;
  int nc = *cap ? *cap * 2 : 64;
  while (nc < need) nc *= 2;
  void* p = realloc(*arr, (size_t)nc * elem);
  if (p == NULL) return mscclppNcclErr(ncclSystemError, "out of memory recording a group's calls");
  *arr = p;
  *cap = nc;
  return ncclSuccess;
}

ncclResult_t mscclppNcclGroupAddJoin(struct ncclComm* comm) {
  ncclResult_t res = grow((void**)&joins, &capJoins, njoins + 1, sizeof(*joins));
  if (res != ncclSuccess) return res;
  joins[njoins++] = comm;
  return ncclSuccess;
}

ncclResult_t mscclppNcclOpSubmit(const struct mscclppNcclOp* op, const char* fn) {
  ncclResult_t res = mscclppNcclCommCheck(op->comm, fn);
  if (res == ncclSuccess) res = mscclppNcclCommNotRevoked(op->comm, fn);
  if (res == ncclSuccess && depth > 0) res = grow((void**)&ops, &capOps, nops + 1, sizeof(*ops));
  if (res != ncclSuccess) {
    if (depth > 0 && groupError == ncclSuccess) groupError = res;
    return res;
  }
  if (depth == 0) return mscclppNcclOpsRun(op, 1);
  ops[nops++] = *op;
  return ncclSuccess;
}

/* One communicator's share of the group, run on a thread of its own. */
struct commRun {
  const struct mscclppNcclOp* ops;
  int nops;
  pthread_t thread;
  int started;
  ncclResult_t res;
  char error[1024];
};

static void* commRunMain(void* arg) {
  struct commRun* cr = (struct commRun*)arg;
  struct ncclComm* comm = cr->ops[0].comm;
  cr->res = ncclSuccess;
  if (comm->device >= 0) cr->res = mscclppNcclFromMscclpp(mscclppGpuSetDevice(comm->device));
  if (cr->res == ncclSuccess) cr->res = mscclppNcclOpsRun(cr->ops, cr->nops);
  if (cr->res != ncclSuccess) snprintf(cr->error, sizeof(cr->error), "%s", mscclppGetLastError());
  return NULL;
}

/* Run the recorded operations: grouped by communicator, order kept. */
static ncclResult_t runOps(struct mscclppNcclOp* list, int n) {
  if (n <= 0) return ncclSuccess;
  int ncomms = 0;
  for (int i = 0; i < n; i++) {
    int seen = 0;
    for (int j = 0; j < i && !seen; j++) seen = list[j].comm == list[i].comm;
    ncomms += !seen;
  }
  if (ncomms == 1) return mscclppNcclOpsRun(list, n);
  /* partition by communicator, call order kept within each */
  struct mscclppNcclOp* sorted = (struct mscclppNcclOp*)malloc((size_t)n * sizeof(*sorted));
  struct commRun* runs = (struct commRun*)calloc((size_t)ncomms, sizeof(*runs));
  if (sorted == NULL || runs == NULL) {
    free(sorted);
    free(runs);
    return mscclppNcclErr(ncclSystemError, "out of memory running a group");
  }
  int k = 0, r = 0;
  for (int i = 0; i < n; i++) {
    int seen = 0;
    for (int j = 0; j < i && !seen; j++) seen = list[j].comm == list[i].comm;
    if (seen) continue;
    runs[r].ops = &sorted[k];
    for (int j = i; j < n; j++)
      if (list[j].comm == list[i].comm) sorted[k++] = list[j];
    runs[r].nops = (int)(&sorted[k] - runs[r].ops);
    r++;
  }
  ncclResult_t res = ncclSuccess;
  for (int i = 0; i < ncomms; i++) {
    int err = pthread_create(&runs[i].thread, NULL, commRunMain, &runs[i]);
    if (err != 0) {
      res = mscclppNcclErr(ncclSystemError, "cannot start a thread for a group's communicator: %s", strerror(err));
      break;
    }
    runs[i].started = 1;
  }
  for (int i = 0; i < ncomms; i++) {
    if (!runs[i].started) continue;
    pthread_join(runs[i].thread, NULL);
    if (res == ncclSuccess && runs[i].res != ncclSuccess) {
      res = runs[i].res;
      (void)mscclppNcclErrAgain(res, "%s", runs[i].error); /* logged on the worker thread */
    }
  }
  free(sorted);
  free(runs);
  return res;
}

/* Start the recorded inits; wait for the blocking ones. */
static ncclResult_t runJoins(struct ncclComm** list, int n) {
  ncclResult_t res = ncclSuccess;
  for (int i = 0; i < n; i++) {
    ncclResult_t r = mscclppNcclCommJoinStart(list[i]);
    if (res == ncclSuccess) res = r;
  }
  for (int i = 0; i < n; i++) {
    if (!list[i]->blocking) continue;
    pthread_mutex_lock(&list[i]->lock);
    while (list[i]->joining) pthread_cond_wait(&list[i]->cond, &list[i]->lock);
    ncclResult_t st = list[i]->initState;
    pthread_mutex_unlock(&list[i]->lock);
    if (res == ncclSuccess && st != ncclSuccess) res = mscclppNcclErrAgain(st, "ncclGroupEnd: %s", list[i]->initError);
  }
  return res;
}

ncclResult_t ncclGroupEnd(void) {
  if (depth == 0) return mscclppNcclErr(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--depth > 0) return ncclSuccess;
  /* take the lists: what runs below may start groups of its own */
  struct mscclppNcclOp* myOps = ops;
  int myNops = nops;
  struct ncclComm** myJoins = joins;
  int myNjoins = njoins;
  ncclResult_t res = groupError;
  ops = NULL;
  nops = capOps = 0;
  joins = NULL;
  njoins = capJoins = 0;
  groupError = ncclSuccess;

  int anyNonblocking = 0;
  ncclResult_t jr = runJoins(myJoins, myNjoins);
  for (int i = 0; i < myNjoins; i++) anyNonblocking |= !myJoins[i]->blocking;
  if (res == ncclSuccess) res = jr;
  if (res == ncclSuccess) res = runOps(myOps, myNops);
  free(myOps);
  free(myJoins);
  if (res == ncclSuccess && anyNonblocking) return ncclInProgress;
  return res;
}
NCCL_PROFILING_ALIAS(ncclGroupEnd);

ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  (void)simInfo;
  if (depth == 0) return mscclppNcclErr(ncclInvalidUsage, "ncclGroupSimulateEnd without ncclGroupStart");
  if (--depth == 0) {
    /* nothing runs: drop the record (recorded inits fail, saying so) */
    for (int i = 0; i < njoins; i++) {
      struct ncclComm* c = joins[i];
      pthread_mutex_lock(&c->lock);
      c->joining = 0;
      c->initState = ncclInvalidUsage;
      snprintf(c->initError, sizeof(c->initError), "created inside a group ended by ncclGroupSimulateEnd");
      pthread_mutex_unlock(&c->lock);
    }
    free(ops);
    free(joins);
    ops = NULL;
    joins = NULL;
    nops = capOps = njoins = capJoins = 0;
  }
  return mscclppNcclErr(ncclInvalidUsage,
                        "ncclGroupSimulateEnd is not supported by mscclpp (it has no cost model); the "
                        "group was ended without running its operations");
}
NCCL_PROFILING_ALIAS(ncclGroupSimulateEnd);
