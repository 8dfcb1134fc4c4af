/* SPDX-License-Identifier: MIT */
/*
 * mscclppCommGrowId and mscclppCommGrow: a communicator of a
 * communicator's ranks and new processes. The id is an ordinary unique id
 * whose root runs in the process of the communicator's rank 0, handed to
 * every member over the communicator's bootstrap; members keep their
 * ranks, new processes take the ranks after them, and everyone joins at
 * that root as at a creation. A check after the rendezvous (one allgather)
 * makes a rank that claimed a member's place, or members that disagree on
 * their old size, an error on every rank rather than a communicator with
 * the wrong ranks. The new communicator shares nothing with the old one,
 * as after a shrink.
 */
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/error.h"
#include "core/log.h"
#include "core/params.h"

mscclppResult_t mscclppCommGrowId(mscclppComm_t comm, mscclppUniqueId* id) {
  if (comm == NULL || id == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_INIT, "mscclppCommGrowId: comm or id is NULL");
  /* rank 0's slot is the id; the others' are ignored */
  mscclppUniqueId* all = (mscclppUniqueId*)calloc((size_t)comm->nranks, sizeof(*all));
  if (all == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_INIT, "mscclppCommGrowId: out of memory");
  mscclppResult_t res = mscclppSuccess;
  if (comm->rank == 0) res = mscclppGetUniqueId(&all[0]);
  /* every rank takes part either way, so that none waits for rank 0 */
  mscclppResult_t gathered = mscclppBootstrapAllGather(comm, all, sizeof(*all));
  if (res == mscclppSuccess) res = gathered;
  if (res == mscclppSuccess) {
    static const mscclppUniqueId zero;
    if (memcmp(&all[0], &zero, sizeof(zero)) == 0)
      res = mscclppErr(mscclppRemoteError, MSCCLPP_LOG_INIT,
                       "mscclppCommGrowId: rank 0 could not make the id (see its log)");
    else
      *id = all[0];
  }
  free(all);
  return res;
}

/* What each rank of the grown communicator says it was: checked on every
 * rank after the rendezvous. */
struct growInfo {
  int32_t member; /* 1: a rank of the old communicator */
  int32_t oldSize;
};

mscclppResult_t mscclppCommGrow(mscclppComm_t comm, int nranks, const mscclppUniqueId* id, int rank,
                                mscclppComm_t* newcomm) {
  static const char fn[] = "mscclppCommGrow";
  if (id == NULL || newcomm == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_INIT, "%s: id or newcomm is NULL", fn);
  struct mscclppParams params;
  if (comm != NULL) {
    if (nranks <= comm->nranks)
      return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_INIT, "%s: nranks=%d does not grow a communicator of %d",
                        fn, nranks, comm->nranks);
    rank = comm->rank;
    params = comm->params; /* as a shrink: the members keep theirs */
  } else {
    MSCCLPP_RETURN_ON_ERROR(mscclppParamsLoad(&params));
    mscclppLogConfigure(&params);
  }
  if (nranks <= 0 || nranks > MSCCLPP_BS_MAX_RANKS || rank < 0 || rank >= nranks)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_INIT, "%s: rank %d of nranks %d is out of range", fn, rank,
                      nranks);
  struct mscclppBootstrapJob job;
  MSCCLPP_RETURN_ON_ERROR(mscclppBootstrapJobFromId((const uint8_t*)id->internal, rank, nranks, &job));
  job.source = comm != NULL ? "grow (member)" : "grow (new rank)";
  struct mscclppBootstrap* bs = NULL;
  MSCCLPP_RETURN_ON_ERROR(mscclppBootstrapCreate(&job, &params, &bs));
  mscclppComm_t c = NULL;
  MSCCLPP_RETURN_ON_ERROR(mscclppCommFromBootstrap(&params, bs, job.source, 0, &c));
  struct growInfo* all = (struct growInfo*)calloc((size_t)nranks, sizeof(*all));
  mscclppResult_t res = all == NULL ? mscclppErr(mscclppSystemError, MSCCLPP_LOG_INIT, "%s: out of memory", fn)
                                    : mscclppSuccess;
  if (res == mscclppSuccess) {
    all[rank].member = comm != NULL;
    all[rank].oldSize = comm != NULL ? comm->nranks : 0;
    res = mscclppBootstrapAllGather(c, all, sizeof(*all));
  }
  int oldSize = 0, members = 0;
  for (int r = 0; r < nranks && res == mscclppSuccess; r++) {
    if (!all[r].member) continue;
    members++;
    if (oldSize == 0) oldSize = all[r].oldSize;
    if (all[r].oldSize != oldSize)
      res = mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_INIT,
                       "%s: members disagree on the old size (%d and %d): they grow different communicators", fn,
                       oldSize, all[r].oldSize);
  }
  for (int r = 0; r < nranks && res == mscclppSuccess; r++)
    if (all[r].member != (r < oldSize))
      res = mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_INIT,
                       "%s: rank %d is %s, but the %d old ranks keep ranks 0..%d and new ones come after them", fn, r,
                       all[r].member ? "an old rank" : "a new rank", oldSize, oldSize - 1);
  if (res == mscclppSuccess && members != oldSize)
    res = mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_INIT, "%s: %d of the %d old ranks joined", fn, members,
                     oldSize);
  free(all);
  if (res == mscclppSuccess && comm != NULL && comm->deviceShare > 0) mscclppCommSetDeviceShare(c, comm->deviceShare);
  if (res == mscclppSuccess) res = mscclppCommPrepare(c);
  if (res != mscclppSuccess) {
    (void)mscclppCommDestroy(c);
    return res;
  }
  *newcomm = c;
  return mscclppSuccess;
}
