/* SPDX-License-Identifier: MIT */
/*
 * ncclCommSplit and ncclCommShrink: the members of the new communicator,
 * and its join (init.c) on a new id (split) or on the survivors' own
 * bootstrap (shrink).
 */
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/error.h"
#include "nccl/nccl_internal.h"

/* Tags of the new id's messages on the parent's bootstrap. Fixed: messages
 * of a pair with one tag arrive in order, and a leader sends only to ranks
 * that take part (and receive), so consecutive splits never mix. */
#define TAG_SPLIT 0x6e430001

/* ---- split and shrink ------------------------------------------------------------ */

struct splitEntry {
  int color;
  int key;
  int rank;
};

static int splitCmp(const void* a, const void* b) {
  const struct splitEntry* x = (const struct splitEntry*)a;
  const struct splitEntry* y = (const struct splitEntry*)b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return x->rank < y->rank ? -1 : (x->rank > y->rank);
}

/* members[0..n) are parent ranks in new-rank order, this rank at index me:
 * members[0] makes the id and sends it to the others over the parent. */
static ncclResult_t shareId(struct ncclComm* parent, const int* members, int n, int me, int tag, ncclUniqueId* id,
                            const char* fn) {
  if (me == 0) {
    ncclResult_t res = ncclGetUniqueId(id);
    if (res != ncclSuccess) return res;
    for (int i = 1; i < n; i++) {
      mscclppResult_t r = mscclppBootstrapSend(parent->mc, members[i], tag, id, sizeof(*id));
      if (r != mscclppSuccess)
        return mscclppNcclErrWrap(r, "%s: sending the new communicator's id to parent rank %d failed", fn, members[i]);
    }
    return ncclSuccess;
  }
  mscclppResult_t r = mscclppBootstrapRecv(parent->mc, members[0], tag, id, sizeof(*id));
  if (r != mscclppSuccess)
    return mscclppNcclErrWrap(r, "%s: receiving the new communicator's id from parent rank %d failed", fn, members[0]);
  return ncclSuccess;
}

static ncclResult_t childJoin(struct ncclComm* parent, const ncclUniqueId* id, int n, int newRank, int deviceShare,
                              ncclConfig_t* config, ncclComm_t* newcomm, const char* fn) {
  int blocking;
  const char* name;
  ncclResult_t res = mscclppNcclReadConfig(config, fn, parent->blocking, &blocking, &name);
  if (res != ncclSuccess) return res;
  struct ncclComm* c = NULL;
  res = mscclppNcclCommNew(n, newRank, parent->device, blocking, name, &c);
  if (res != ncclSuccess) return res;
  c->joinKind = MSCCLPP_NCCL_JOIN_SPLIT;
  c->deviceShare = deviceShare;
  memcpy(c->id.internal, id->internal, sizeof(c->id.internal));
  return mscclppNcclJoinDispatch(c, newcomm);
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  static const char fn[] = "ncclCommSplit";
  ncclResult_t res = mscclppNcclCommReady(comm, fn);
  if (res != ncclSuccess) return res;
  if (newcomm == NULL) return mscclppNcclErr(ncclInvalidArgument, "%s: newcomm is NULL", fn);
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
    return mscclppNcclErr(ncclInvalidArgument, "%s: color %d is negative and not NCCL_SPLIT_NOCOLOR", fn, color);
  int n = comm->nranks;
  struct splitEntry* all = (struct splitEntry*)calloc((size_t)n, sizeof(*all));
  int* members = (int*)calloc((size_t)n, sizeof(int));
  if (all == NULL || members == NULL) {
    free(all);
    free(members);
    return mscclppNcclErr(ncclSystemError, "%s: out of memory", fn);
  }
  all[comm->rank].color = color;
  all[comm->rank].key = key;
  all[comm->rank].rank = comm->rank;
  mscclppResult_t r = mscclppBootstrapAllGather(comm->mc, all, sizeof(*all));
  if (r != mscclppSuccess) {
    res = mscclppNcclErrWrap(r, "%s: exchanging colors and keys failed", fn);
    goto done;
  }
  /* every parent rank takes part, those that join no child too */
  int share = 1;
  r = mscclppCommGpuShare(comm->mc, &share);
  if (r != mscclppSuccess) {
    res = mscclppNcclErrWrap(r, "%s: finding the ranks that share this GPU failed", fn);
    goto done;
  }
  if (color == NCCL_SPLIT_NOCOLOR) {
    *newcomm = NULL;
    goto done;
  }
  /* this color's ranks, by key then parent rank */
  int m = 0;
  for (int i = 0; i < n; i++)
    if (all[i].color == color) all[m++] = all[i];
  qsort(all, (size_t)m, sizeof(*all), splitCmp);
  int me = -1;
  for (int i = 0; i < m; i++) {
    members[i] = all[i].rank;
    if (all[i].rank == comm->rank) me = i;
  }
  ncclUniqueId id;
  res = shareId(comm, members, m, me, TAG_SPLIT, &id, fn);
  if (res == ncclSuccess) res = childJoin(comm, &id, m, me, share, config, newcomm, fn);
done:
  free(all);
  free(members);
  return res;
}
NCCL_PROFILING_ALIAS(ncclCommSplit);

/* The survivors make the new communicator themselves (mscclppCommShrink:
 * no new id, nothing from the excluded ranks, rank 0 among them or not). */
ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                            ncclConfig_t* config, int shrinkFlags) {
  static const char fn[] = "ncclCommShrink";
  ncclResult_t res = mscclppNcclCommReady(comm, fn);
  if (res != ncclSuccess) return res;
  if (newcomm == NULL) return mscclppNcclErr(ncclInvalidArgument, "%s: newcomm is NULL", fn);
  if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT)
    return mscclppNcclErr(ncclInvalidArgument, "%s: unknown shrinkFlags 0x%x", fn, shrinkFlags);
  if (excludeRanksCount < 0 || (excludeRanksCount > 0 && excludeRanksList == NULL))
    return mscclppNcclErr(ncclInvalidArgument, "%s: excludeRanksCount=%d with list %p", fn, excludeRanksCount,
                          (void*)excludeRanksList);
  int n = comm->nranks;
  char* excluded = (char*)calloc((size_t)n, 1);
  if (excluded == NULL) return mscclppNcclErr(ncclSystemError, "%s: out of memory", fn);
  for (int i = 0; i < excludeRanksCount && res == ncclSuccess; i++) {
    int x = excludeRanksList[i];
    if (x < 0 || x >= n)
      res = mscclppNcclErr(ncclInvalidArgument, "%s: excluded rank %d is not a rank of 0..%d", fn, x, n - 1);
    else if (x == comm->rank)
      res = mscclppNcclErr(ncclInvalidArgument,
                           "%s: this rank (%d) is in the exclude list; excluded ranks do not call it", fn, x);
    else
      excluded[x] = 1;
  }
  pthread_mutex_lock(&comm->lock);
  int revoked = comm->revoked;
  pthread_mutex_unlock(&comm->lock);
  if (res == ncclSuccess && shrinkFlags == NCCL_SHRINK_DEFAULT && !revoked) {
    /* said here, not by a background join */
    mscclppResult_t failed = mscclppSuccess;
    (void)mscclppCommGetAsyncError(comm->mc, &failed);
    if (failed != mscclppSuccess)
      res = mscclppNcclErr(ncclInvalidUsage,
                           "%s: the parent communicator has failed (%s); shrink it with NCCL_SHRINK_ABORT (or revoke "
                           "it first)",
                           fn, mscclppGetLastError());
  }
  int m = 0, me = 0;
  for (int i = 0; i < n; i++) {
    if (excluded[i]) continue;
    if (i == comm->rank) me = m;
    m++;
  }
  free(excluded);
  int blocking;
  const char* name;
  if (res == ncclSuccess) res = mscclppNcclReadConfig(config, fn, comm->blocking, &blocking, &name);
  struct ncclComm* c = NULL;
  if (res == ncclSuccess) res = mscclppNcclCommNew(m, me, comm->device, blocking, name, &c);
  if (res != ncclSuccess) return res;
  c->joinKind = MSCCLPP_NCCL_JOIN_SHRINK;
  c->deviceShare = comm->mc->deviceShare; /* the excluded ranks take no part: the parent's own hint is passed on */
  c->shrinkFlags = shrinkFlags == NCCL_SHRINK_ABORT ? MSCCLPP_SHRINK_ABORT : MSCCLPP_SHRINK_DEFAULT;
  c->shrinkCount = excludeRanksCount;
  c->shrinkExclude = (int*)malloc((size_t)(excludeRanksCount > 0 ? excludeRanksCount : 1) * sizeof(int));
  if (c->shrinkExclude == NULL) {
    mscclppNcclCommFree(c);
    return mscclppNcclErr(ncclSystemError, "%s: out of memory", fn);
  }
  if (excludeRanksCount > 0) memcpy(c->shrinkExclude, excludeRanksList, (size_t)excludeRanksCount * sizeof(int));
  if (shrinkFlags == NCCL_SHRINK_ABORT) { /* NCCL: the parent's operations end; it is revoked */
    pthread_mutex_lock(&comm->lock);
    if (!comm->revoked) comm->revoked = MSCCLPP_NCCL_REVOKED_BY_SHRINK;
    pthread_mutex_unlock(&comm->lock);
  }
  pthread_mutex_lock(&comm->lock);
  comm->pendingShrinks++; /* the parent outlives the join (destroy waits) */
  pthread_mutex_unlock(&comm->lock);
  c->shrinkParent = comm;
  return mscclppNcclJoinDispatch(c, newcomm);
}
NCCL_PROFILING_ALIAS(ncclCommShrink);
