/* SPDX-License-Identifier: MIT */
/*
 * The host backend's collectives and send/recv (coll_host.h: how data
 * moves; coll_host_engine.c: the engine that moves it). Each call is a set
 * of transfers and at most one reduction chain:
 *   allreduce      reduce-scatter of nranks blocks (each rank reduces its
 *                  block), then allgather of the reduced blocks
 *   reducescatter  each rank sends block r to rank r, which reduces
 *   reduce         every rank sends to the root, which reduces
 *   allgather, broadcast, alltoall   direct sends
 *   alltoallv      the counts first (one 8-byte message per peer), then
 *                  direct sends; a receive past the capacity is consumed
 *                  and dropped (xfer.keep)
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coll/host/coll_host.h"
#include "core/error.h"
#include "core/log.h"
#include "gpu/abort.h"

/* ---- collectives ------------------------------------------------------------------- */

static void copyLocal(void* dst, const void* src, size_t bytes) {
  if (bytes > 0 && dst != src) memmove(dst, src, bytes);
}

/* Block b of nranks over count elements: [lo, hi). */
static void blockOf(size_t count, int nranks, int b, size_t* lo, size_t* hi) {
  *lo = (size_t)((unsigned __int128)count * (unsigned)b / (unsigned)nranks);
  *hi = (size_t)((unsigned __int128)count * (unsigned)(b + 1) / (unsigned)nranks);
}

/* a + b, staying at SIZE_MAX past it (a total past any capacity). */
static size_t addSat(size_t a, size_t b) { return a + b < a ? SIZE_MAX : a + b; }

/* All-to-all-v (coll.h, mscclppAllToAllv). The count of every block goes
 * to its receiver first (one 8-byte message per peer; a block outside
 * sendbuff goes as 0), then the blocks. Each rank stores what it receives
 * packed in rank order up to its capacity and drops the rest as it
 * arrives, so every rank's call completes and the pairs' chunk streams stay
 * in step. What was found wrong is raised as the communicator's error once
 * the call is complete, as the GPU kernel does after its last barrier. */
static mscclppResult_t hostAllToAllv(struct engine* e, const struct mscclppCollArgs* a) {
  struct mscclppCollHost* h = e->h;
  const struct mscclppCollCounts* v = a->v;
  const int me = h->rank, n = h->nranks;
  const size_t ts = a->typeSize, cap = v->recvCapacity;
  const uint8_t* send = (const uint8_t*)a->send;
  uint8_t* recv = (uint8_t*)a->recv;
  uint64_t out[MAX_RANKS], in[MAX_RANKS]; /* elements to / from each rank */
  size_t sdisp[MAX_RANKS], rdisp[MAX_RANKS];
  int badRank = -1;
  size_t badEnd = 0;
  for (int d = 0; d < n; d++) {
    size_t c = v->sendcounts[d], s = c > 0 ? v->sdispls[d] : 0; /* a zero count's displacement is not read */
    if (c > v->sendCapacity || s > v->sendCapacity - c) {
      if (badRank < 0) {
        badRank = d;
        badEnd = addSat(s, c);
      }
      c = 0;
      s = 0;
    }
    out[d] = c;
    sdisp[d] = s;
  }
  for (int r = 0; r < n; r++) {
    if (r == me) continue;
    mscclppCollHostAddXfer(e, r, 1, &out[r], sizeof(out[r]));
    mscclppCollHostAddXfer(e, r, 0, &in[r], sizeof(in[r]));
  }
  in[me] = out[me];
  MSCCLPP_RETURN_ON_ERROR(mscclppCollHostEngineRun(e));
  size_t total = 0;
  for (int r = 0; r < n; r++) {
    rdisp[r] = total;
    total = addSat(total, in[r]);
  }
  for (int r = 0; r < n; r++) {
    v->recvcounts[r] = in[r];
    v->rdispls[r] = rdisp[r];
  }
  e->nx = 0;
  e->chain = NULL;
  for (int r = 0; r < n; r++) {
    /* elements of r's block that fit: rdisp[r] < cap bounds every offset below */
    size_t keep = rdisp[r] >= cap ? 0 : in[r] < cap - rdisp[r] ? in[r] : cap - rdisp[r];
    uint8_t* dst = keep > 0 ? recv + rdisp[r] * ts : NULL;
    if (r == me) {
      if (keep > 0) copyLocal(dst, send + sdisp[me] * ts, keep * ts);
      continue;
    }
    if (out[r] > 0) mscclppCollHostAddXfer(e, r, 1, send + sdisp[r] * ts, out[r] * ts);
    if (in[r] > 0) {
      mscclppCollHostAddXfer(e, r, 0, dst, in[r] * ts);
      e->x[e->nx - 1].keep = keep * ts;
    }
  }
  MSCCLPP_RETURN_ON_ERROR(mscclppCollHostEngineRun(e));
  if (total > cap)
    return mscclppAbortRaisef(h->abort, mscclppInvalidUsage,
                              "mscclppAllToAllv on rank %d: %zu elements arrived, more than recvcapacity %zu; those "
                              "past it were dropped (recvcounts says what each rank sent)",
                              me, total, cap);
  if (badRank >= 0)
    return mscclppAbortRaisef(h->abort, mscclppInvalidArgument,
                              "mscclppAllToAllv on rank %d: the block for rank %d ends at element %zu, past "
                              "sendcapacity %zu (sdispls[%d] + sendcounts[%d]); it was sent as empty",
                              me, badRank, badEnd, v->sendCapacity, badRank, badRank);
  return mscclppSuccess;
}

mscclppResult_t mscclppCollHostRun(struct mscclppComm* comm, const struct mscclppCollArgs* a) {
  const char* name = mscclppCollKindName(a->kind);
  if (comm->nranks > MAX_RANKS)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_COLL, "%s: %d ranks; the host backend supports up to %d", name,
                      comm->nranks, MAX_RANKS);
  struct mscclppCollHost* h;
  MSCCLPP_RETURN_ON_ERROR(mscclppCollHostState(comm, &h));
  if (mscclppAbortIsRaised(h->abort)) return mscclppCollHostFailAborted(comm, name);
  for (int r = 0; r < h->nranks; r++)
    if (r != h->rank) MSCCLPP_RETURN_ON_ERROR(mscclppCollHostConnect(comm, h, r));
  h->seq++;
  const int me = h->rank, n = h->nranks;
  const size_t ts = a->typeSize, cb = a->count * ts;
  const uint8_t* send = (const uint8_t*)a->send;
  uint8_t* recv = (uint8_t*)a->recv;
  struct xfer xs[2 * MAX_RANKS];
  struct chain ch;
  struct engine e = {comm, h, name, a->kind, h->seq, xs, 0, NULL};
  switch (a->kind) {
    case MSCCLPP_COLL_ALLREDUCE: {
      size_t lo, hi;
      for (int r = 0; r < n; r++) {
        if (r == me) continue;
        blockOf(a->count, n, r, &lo, &hi);
        mscclppCollHostAddXfer(&e, r, 1, send + lo * ts, (hi - lo) * ts);
      }
      blockOf(a->count, n, me, &lo, &hi);
      mscclppCollHostSetChain(&e, &ch, a, recv + lo * ts, send + lo * ts, (hi - lo) * ts);
      MSCCLPP_RETURN_ON_ERROR(mscclppCollHostEngineRun(&e));
      /* allgather of the reduced blocks */
      e.nx = 0;
      e.chain = NULL;
      for (int r = 0; r < n; r++) {
        if (r == me) continue;
        mscclppCollHostAddXfer(&e, r, 1, recv + lo * ts, (hi - lo) * ts);
        size_t rlo, rhi;
        blockOf(a->count, n, r, &rlo, &rhi);
        mscclppCollHostAddXfer(&e, r, 0, recv + rlo * ts, (rhi - rlo) * ts);
      }
      return mscclppCollHostEngineRun(&e);
    }
    case MSCCLPP_COLL_REDUCESCATTER:
      for (int r = 0; r < n; r++)
        if (r != me) mscclppCollHostAddXfer(&e, r, 1, send + (size_t)r * cb, cb);
      mscclppCollHostSetChain(&e, &ch, a, recv, send + (size_t)me * cb, cb);
      return mscclppCollHostEngineRun(&e);
    case MSCCLPP_COLL_REDUCE:
      if (me == a->root)
        mscclppCollHostSetChain(&e, &ch, a, recv, send, cb);
      else
        mscclppCollHostAddXfer(&e, a->root, 1, send, cb);
      return mscclppCollHostEngineRun(&e);
    case MSCCLPP_COLL_ALLGATHER:
      for (int r = 0; r < n; r++) {
        if (r == me) continue;
        mscclppCollHostAddXfer(&e, r, 1, send, cb);
        mscclppCollHostAddXfer(&e, r, 0, recv + (size_t)r * cb, cb);
      }
      copyLocal(recv + (size_t)me * cb, send, cb);
      return mscclppCollHostEngineRun(&e);
    case MSCCLPP_COLL_BROADCAST:
      if (me == a->root) {
        for (int r = 0; r < n; r++)
          if (r != me) mscclppCollHostAddXfer(&e, r, 1, send, cb);
        copyLocal(recv, send, cb);
      } else {
        mscclppCollHostAddXfer(&e, a->root, 0, recv, cb);
      }
      return mscclppCollHostEngineRun(&e);
    case MSCCLPP_COLL_ALLTOALL: {
      /* In place, block r is sent to r and received from r in interleaved
       * chunks: the receive would overwrite what the send has still to read,
       * so the input is copied aside first (a call completes on return, so
       * the copy lives for the call only). */
      uint8_t* copy = NULL;
      if (send == recv) {
        copy = (uint8_t*)malloc((size_t)n * cb);
        if (copy == NULL)
          return mscclppErr(mscclppSystemError, MSCCLPP_LOG_COLL, "%s in place: out of memory for a copy of %zu bytes",
                            name, (size_t)n * cb);
        memcpy(copy, send, (size_t)n * cb);
        send = copy;
      }
      for (int r = 0; r < n; r++) {
        if (r == me) continue;
        mscclppCollHostAddXfer(&e, r, 1, send + (size_t)r * cb, cb);
        mscclppCollHostAddXfer(&e, r, 0, recv + (size_t)r * cb, cb);
      }
      copyLocal(recv + (size_t)me * cb, send + (size_t)me * cb, cb);
      mscclppResult_t res = mscclppCollHostEngineRun(&e);
      free(copy);
      return res;
    }
    case MSCCLPP_COLL_ALLTOALLV:
      return hostAllToAllv(&e, a);
    default:
      return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_COLL, "host collectives: unknown collective %d",
                        (int)a->kind);
  }
}

/* ---- send/recv ------------------------------------------------------------------------ */

mscclppResult_t mscclppCollHostP2p(struct mscclppComm* comm, const struct mscclppCollP2pOp* ops, int nops) {
  const char* name = nops == 1 ? (ops[0].isSend ? "mscclppSend" : "mscclppRecv") : "send/recv group";
  struct mscclppCollHost* h;
  MSCCLPP_RETURN_ON_ERROR(mscclppCollHostState(comm, &h));
  if (mscclppAbortIsRaised(h->abort)) return mscclppCollHostFailAborted(comm, name);
  /* connect the peers this call needs, in rank order (every pair connects at
   * its first call with each other; the order keeps that deadlock-free) */
  uint8_t* need = (uint8_t*)calloc((size_t)h->nranks, 1);
  struct xfer* xs = (struct xfer*)calloc((size_t)nops, sizeof(*xs));
  if (need == NULL || xs == NULL) {
    free(need);
    free(xs);
    return mscclppErr(mscclppSystemError, MSCCLPP_LOG_COLL, "out of memory");
  }
  for (int i = 0; i < nops; i++)
    if (ops[i].bytes > 0) need[ops[i].peer] = 1;
  mscclppResult_t res = mscclppSuccess;
  for (int r = 0; r < h->nranks && res == mscclppSuccess; r++)
    if (need[r]) res = mscclppCollHostConnect(comm, h, r);
  if (res == mscclppSuccess) {
    struct engine e = {comm, h, name, MSCCLPP_COLL_SENDRECV, 0, xs, 0, NULL};
    for (int i = 0; i < nops; i++) mscclppCollHostAddXfer(&e, ops[i].peer, ops[i].isSend, ops[i].buf, ops[i].bytes);
    res = mscclppCollHostEngineRun(&e);
  }
  free(need);
  free(xs);
  return res;
}
