/* SPDX-License-Identifier: MIT */
/*
 * The hierarchical allreduce (coll_hier.h): for a communicator whose hosts
 * each hold L ranks (host identity as the bootstrap sees it: host name and
 * network namespace, or MSCCLPP_HOSTID), with s = count / L and l this
 * rank's index among its host's ranks (by rank):
 *   1. reduce-scatter over `local` (the L ranks of this host):
 *      send -> recv + l*s, s elements each;
 *   2. allreduce over `cross` (the rank of index l on every host, hosts in
 *      the order of their lowest rank), in place on recv + l*s;
 *   3. allgather over `local`, in place from recv + l*s into recv.
 * Each step is an ordinary call of the collective layer on a child
 * communicator (mscclppCollDispatch), so each runs on whatever backend runs
 * the child: on a GPU the local steps are the single-host kernels; on the
 * host backend the local steps go through shared memory and the cross step
 * over the network. Only 1/L of the data of each rank goes over the
 * network, and each network step has one rank per host.
 *
 * Reduction order: element i is reduced within each host in local-rank
 * order, then across hosts in host order - deterministic, the same on every
 * rank, but a different association than the flat path's rank order (floats
 * may differ from it in the last bits). Avg divides at each level (by L,
 * then by the number of hosts), which loses nothing only for floats with L
 * a power of two: other avg calls take the flat path.
 *
 * The children: made once, at the first call that runs hierarchically
 * (every rank reaches it: it is an allreduce with the same count). The
 * lowest rank of each group makes a unique id (mscclppGetUniqueId) and sends
 * it to the group over the parent's bootstrap, then every member joins with
 * mscclppCommInitRankFromId, local groups first, then cross groups (no
 * rank waits in one group while a member waits in another). A child takes
 * the parent's parameters (MSCCLPP_TIMEOUT, scratch size, ...), device and
 * abort object (mscclppCommBorrowAbort): one error domain, so a rank lost
 * anywhere or an error in a child fails the parent's later calls at once,
 * and a lost rank is named in the parent's numbering. The children live
 * until the parent's destruction releases the collective state.
 */
#include "coll/hier/coll_hier.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "core/log.h"

#define TAG_ID_LOCAL 0x7c000010
#define TAG_ID_CROSS 0x7c000011
#define LOST_WAIT_SEC 2.0 /* how long a failed step waits for the parent to name a lost rank */

enum { LAYOUT_UNKNOWN = 0, LAYOUT_UNEVEN, LAYOUT_EVEN };

struct mscclppCollHier {
  int layout;
  int perHost;         /* L: ranks per host (LAYOUT_EVEN) */
  int hosts;           /* H */
  int localIndex;      /* l */
  int hostIndex;       /* this host's index among the hosts */
  int* localMembers;   /* parent ranks of this host's group, L of them */
  int* crossMembers;   /* parent ranks of this rank's cross group, H of them */
  mscclppResult_t makeFailed; /* making the children failed: later calls fail the same way */
  int fallbackTold;           /* MSCCLPP_ALGO=allreduce=hier fell back to flat once (logged) */
  struct mscclppComm* local;
  struct mscclppComm* cross;
};

void mscclppCollHierRelease(struct mscclppComm* comm, void* state) {
  struct mscclppCollHier* s = (struct mscclppCollHier*)state;
  /* cross first: it was made last. A failed destroy has logged its
   * reason; these lines only say which child it was. */
  if (s->cross != NULL && mscclppCommDestroy(s->cross) != mscclppSuccess)
    MSCCLPP_INFO(MSCCLPP_LOG_COLL, "rank %d: destroying the cross-host communicator failed (reason logged above)",
                 comm->rank);
  if (s->local != NULL && mscclppCommDestroy(s->local) != mscclppSuccess)
    MSCCLPP_INFO(MSCCLPP_LOG_COLL, "rank %d: destroying the host-local communicator failed (reason logged above)",
                 comm->rank);
  free(s->localMembers);
  free(s->crossMembers);
  free(s);
}

/* The hosts' layout, from every rank's host identity (the bootstrap's rank
 * table: no exchange). */
static mscclppResult_t learnLayout(struct mscclppComm* comm, struct mscclppCollHier* s) {
  const int n = comm->nranks, me = comm->rank;
  int* hostOf = (int*)calloc((size_t)n, sizeof(int));
  int* size = (int*)calloc((size_t)n, sizeof(int));
  mscclppResult_t res = mscclppSuccess;
  if (hostOf == NULL || size == NULL) {
    res = mscclppErr(mscclppSystemError, MSCCLPP_LOG_COLL, "out of memory");
    goto free_arrays;
  }
  /* hosts numbered in the order of their lowest rank */
  int hosts = 0;
  for (int r = 0; r < n; r++) {
    const uint64_t id = mscclppBootstrapHostHashOf(comm->bootstrap, r);
    int h = -1;
    for (int q = 0; q < r && h < 0; q++)
      if (mscclppBootstrapHostHashOf(comm->bootstrap, q) == id) h = hostOf[q];
    hostOf[r] = h >= 0 ? h : hosts++;
    size[hostOf[r]]++;
  }
  int even = 1;
  for (int h = 1; h < hosts; h++) even &= size[h] == size[0];
  s->hosts = hosts;
  s->hostIndex = hostOf[me];
  s->perHost = size[s->hostIndex];
  s->localIndex = 0;
  for (int r = 0; r < me; r++) s->localIndex += hostOf[r] == s->hostIndex;
  if (even) {
    s->localMembers = (int*)calloc((size_t)s->perHost, sizeof(int));
    s->crossMembers = (int*)calloc((size_t)hosts, sizeof(int));
    if (s->localMembers == NULL || s->crossMembers == NULL) {
      res = mscclppErr(mscclppSystemError, MSCCLPP_LOG_COLL, "out of memory");
      goto free_arrays;
    }
    /* size[] now counts the ranks of each host seen so far */
    memset(size, 0, (size_t)n * sizeof(int));
    for (int r = 0; r < n; r++) {
      int h = hostOf[r], index = size[h]++;
      if (h == s->hostIndex) s->localMembers[index] = r;
      if (index == s->localIndex) s->crossMembers[h] = r;
    }
  }
  s->layout = even ? LAYOUT_EVEN : LAYOUT_UNEVEN;
  MSCCLPP_INFO(MSCCLPP_LOG_COLL, "rank %d: %d hosts, %s; this rank is %d of %d on host %d", me, hosts,
               even ? "the same number of ranks on each" : "different numbers of ranks (no hierarchy)",
               s->localIndex, s->perHost, s->hostIndex);
free_arrays:
  free(hostOf);
  free(size);
  return res;
}

/* One child communicator of `members` (parent ranks; this rank is members[me]). */
static mscclppResult_t makeChild(struct mscclppComm* comm, const int* members, int m, int me, int tag,
                                 const char* what, struct mscclppComm** out) {
  mscclppUniqueId id;
  if (me == 0) {
    MSCCLPP_RETURN_ON_ERROR(mscclppGetUniqueId(&id));
    for (int i = 1; i < m; i++) MSCCLPP_RETURN_ON_ERROR(mscclppBootstrapSend(comm, members[i], tag, &id, sizeof(id)));
  } else {
    MSCCLPP_RETURN_ON_ERROR(mscclppBootstrapRecv(comm, members[0], tag, &id, sizeof(id)));
  }
  struct mscclppComm* child = NULL;
  /* prepared below, once it borrows the parent's abort object and knows
   * how many ranks share its GPU */
  mscclppResult_t res = mscclppCommInitRankFromIdUnprepared(&child, m, id, me, NULL);
  mscclppLogSetRank(comm->rank); /* the child's creation set its own */
  if (res != mscclppSuccess) return res;
  /* the bootstrap copied what it reads from the parameters at creation: the
   * child may take the parent's now */
  child->params = comm->params;
  res = mscclppCommBorrowAbort(child, comm);
  if (res != mscclppSuccess) {
    (void)mscclppCommDestroy(child);
    return res;
  }
  MSCCLPP_INFO(MSCCLPP_LOG_COLL, "rank %d: %s communicator made, rank %d of %d", comm->rank, what, me, m);
  *out = child;
  return mscclppSuccess;
}

static mscclppResult_t makeChildren(struct mscclppComm* comm, struct mscclppCollHier* s) {
  if (s->makeFailed != mscclppSuccess) /* logged by that call */
    return mscclppErrAgain(s->makeFailed, MSCCLPP_LOG_COLL,
                           "allreduce on rank %d: the hierarchy's child communicators could not be made at an "
                           "earlier call",
                           comm->rank);
  /* How many of the parent's ranks run on this rank's GPU. Ranks of
   * different hosts share a GPU only when hosts are pretended on one
   * machine (the tests), but then each child would size its kernels for its
   * own ranks alone and together they would ask for more resident blocks
   * than the GPU holds (their kernels wait for each other: a hang). */
  int share = 1;
  mscclppResult_t res = mscclppCommGpuShare(comm, &share);
  if (res == mscclppSuccess)
    res = makeChild(comm, s->localMembers, s->perHost, s->localIndex, TAG_ID_LOCAL, "host-local", &s->local);
  if (res == mscclppSuccess)
    res = makeChild(comm, s->crossMembers, s->hosts, s->hostIndex, TAG_ID_CROSS, "cross-host", &s->cross);
  if (res == mscclppSuccess) {
    mscclppCommSetDeviceShare(s->local, share);
    mscclppCommSetDeviceShare(s->cross, share);
    res = mscclppCommPrepare(s->local);
    if (res == mscclppSuccess) res = mscclppCommPrepare(s->cross);
  }
  if (res == mscclppSuccess) {
    if (share > 1)
      MSCCLPP_INFO(MSCCLPP_LOG_COLL, "rank %d: %d ranks of the job share this GPU: the children size their kernels so",
                   comm->rank, share);
    return mscclppSuccess;
  }
  s->makeFailed = res;
  if (s->local != NULL) (void)mscclppCommDestroy(s->local);
  s->local = NULL;
  return mscclppErrWrap(res, MSCCLPP_LOG_COLL,
                        "allreduce on rank %d: making the hierarchy's child communicators failed", comm->rank);
}

/* A step failed on a child: the parent's call fails with the child's
 * reason (logged by the child). When a rank was lost, the parent's bootstrap
 * names it in the parent's numbering (it may learn it a moment after the
 * child did), and that becomes the reason. */
static mscclppResult_t stepFailed(struct mscclppComm* comm, const char* step, mscclppResult_t res) {
  if (res != mscclppInvalidArgument && res != mscclppInvalidUsage) {
    mscclppDeadline dl = mscclppDeadlineIn(LOST_WAIT_SEC);
    for (;;) {
      if (mscclppBootstrapGetLostStatus(comm->bootstrap) != mscclppSuccess) {
        res = mscclppRemoteError;
        break;
      }
      if (mscclppDeadlinePassed(dl)) break;
      struct timespec ts = {0, 10000000L};
      nanosleep(&ts, NULL);
    }
  }
  return mscclppErrWrap(res, MSCCLPP_LOG_COLL, "allreduce on rank %d (hierarchical): the %s failed", comm->rank, step);
}

/* The state's first part, built privately (coll.h's first-use policy): the
 * hosts' layout. The children are made at the first call that runs
 * hierarchically (makeChildren: a failure there is remembered too). */
static mscclppResult_t hierBuild(struct mscclppComm* comm, void** built) {
  struct mscclppCollHier* s = (struct mscclppCollHier*)calloc(1, sizeof(*s));
  if (s == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_COLL, "out of memory");
  mscclppResult_t res = learnLayout(comm, s);
  if (res != mscclppSuccess) {
    mscclppCollHierRelease(comm, s);
    return res;
  }
  *built = s;
  return mscclppSuccess;
}

mscclppResult_t mscclppCollHierAllReduce(struct mscclppComm* comm, const struct mscclppCollArgs* a, int* ran) {
  *ran = 0;
  struct mscclppCollHier* s = NULL;
  MSCCLPP_RETURN_ON_ERROR(mscclppCollBackendState(comm, MSCCLPP_COLL_BACKEND_HIER, hierBuild, (void**)&s));
  /* avg divides at each level: exact only for floats and L a power of two
   * (integers would truncate the partial sums) */
  int avgInexact = a->op == mscclppAvg && (a->type < mscclppFloat16 || (s->perHost & (s->perHost - 1)) != 0);
  if (s->layout != LAYOUT_EVEN || s->perHost < 2 || s->hosts < 2 || a->count % (size_t)s->perHost != 0 ||
      avgInexact) {
    if (a->algo == MSCCLPP_COLL_ALGO_HIER && !s->fallbackTold) {
      s->fallbackTold = 1;
      MSCCLPP_INFO(MSCCLPP_LOG_COLL,
                   "rank %d: MSCCLPP_ALGO=allreduce=hier does not apply to %zu elements, %s, over %d hosts of %s: "
                   "the flat path (said once)",
                   comm->rank, a->count, mscclppRedOpName(a->op), s->hosts,
                   s->layout == LAYOUT_EVEN ? "equal ranks" : "unequal ranks");
    }
    return mscclppSuccess;
  }
  if (s->local == NULL) MSCCLPP_RETURN_ON_ERROR(makeChildren(comm, s));
  *ran = 1;

  const size_t seg = a->count / (size_t)s->perHost;
  uint8_t* mine = (uint8_t*)a->recv + (size_t)s->localIndex * seg * a->typeSize;
  struct mscclppCollArgs rs = *a, ar = *a, ag = *a;
  rs.kind = MSCCLPP_COLL_REDUCESCATTER;
  rs.recv = mine;
  rs.count = seg;
  MSCCLPP_RETURN_ON_ERROR(mscclppCollSelectForced(comm, rs.kind, &rs.algo));
  ar.send = mine;
  ar.recv = mine;
  ar.count = seg;
  ar.algo = MSCCLPP_COLL_ALGO_AUTO; /* one rank per host: the backend's own choice */
  ag.kind = MSCCLPP_COLL_ALLGATHER;
  ag.send = mine;
  ag.count = seg;
  ag.op = mscclppSum;
  MSCCLPP_RETURN_ON_ERROR(mscclppCollSelectForced(comm, ag.kind, &ag.algo));

  mscclppResult_t res = mscclppCollDispatch(s->local, &rs);
  if (res != mscclppSuccess) return stepFailed(comm, "reduce-scatter among this host's ranks", res);
  res = mscclppCollDispatch(s->cross, &ar);
  if (res != mscclppSuccess) return stepFailed(comm, "allreduce across the hosts", res);
  res = mscclppCollDispatch(s->local, &ag);
  if (res != mscclppSuccess) return stepFailed(comm, "allgather among this host's ranks", res);
  return mscclppSuccess;
}
