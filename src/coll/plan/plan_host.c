/* SPDX-License-Identifier: MIT */
/*
 * The host executor of execution plans, its state and a call (plan_host.h
 * says how it stages): the region of host shared memory per plan, the
 * connections and channels the plan asks for, and each call's copies in
 * and out around the run of the thread blocks (plan_host_run.c).
 *
 * Channels pair as MSCCL++ pairs them (plan_link.h); every peer is linked
 * in rank order, so that no two ranks wait for each other in a cycle.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/plan/plan_host_ctx.h"
#include "core/error.h"
#include "core/log.h"
#include "gpu/abort.h"
#include "mscclpp/memory.h"

/* Bootstrap tags of plan states: 0x7d, the state's number (low 8 bits),
 * then 16 bits for the connection (0), the mapping (1) and the channels. */
#define TAG_BASE 0x7d000000
static int tagBaseOf(int ctxId) { return TAG_BASE + (ctxId & 0xff) * 0x10000; }

#define MIN_CAP_CHUNK ((uint64_t)1024)

void mscclppPlanHostLayout(const struct mscclppPlanHostCtx* x, int rank, uint64_t c, struct planLayout* l) {
  mscclppPlanRegionLayout(x->plan, rank, x->capChunk, c, l->off, &l->bytes);
}

/* ---- the region and its peers -------------------------------------------------- */

static void peersUnlink(struct mscclppPlanHostCtx* x) {
  for (int q = 0; x->peer != NULL && q < x->nranks; q++) {
    struct planHostPeer* p = &x->peer[q];
    mscclppPlanLinkFree(&p->link);
    p->base = NULL;
    p->bytes = 0;
  }
}

static void regionFree(struct mscclppComm* comm, struct mscclppPlanHostCtx* x) {
  peersUnlink(x);
  if (x->regionMem != NULL) (void)mscclppMemoryDeregister(x->regionMem);
  if (x->region != NULL) (void)mscclppMemFree(comm, x->region);
  x->regionMem = NULL;
  x->region = NULL;
  x->regionBytes = 0;
  x->capChunk = 0;
}

/* Link peer q (plan_link.h): its region must hold chunks up to capChunk. */
static mscclppResult_t linkPeer(struct mscclppComm* comm, struct mscclppPlanHostCtx* x, int q) {
  struct planHostPeer* p = &x->peer[q];
  struct planLayout l;
  mscclppPlanHostLayout(x, q, x->capChunk, &l);
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanLinkCreate(comm, x->plan, q, tagBaseOf(x->ctxId), mscclppTransportHostShm,
                                                x->regionMem, l.bytes, &p->link));
  p->base = (uint8_t*)p->link.mapH.dst;
  p->bytes = p->link.mapH.dstSize;
  return mscclppSuccess;
}

/* Make the region for chunk size cap and link every peer the plan needs
 * (every rank does it in the same call). */
static mscclppResult_t regionBuild(struct mscclppComm* comm, struct mscclppPlanHostCtx* x, uint64_t cap) {
  x->capChunk = cap; /* the layout sizes the scratch by it */
  struct planLayout l;
  mscclppPlanHostLayout(x, x->rank, cap, &l);
  x->regionBytes = l.bytes < 4096 ? 4096 : l.bytes;
  MSCCLPP_RETURN_ON_ERROR(mscclppMemAlloc(comm, mscclppMemKindHostShared, x->regionBytes, (void**)&x->region));
  MSCCLPP_RETURN_ON_ERROR(
      mscclppMemoryRegister(comm, x->region, x->regionBytes, mscclppTransportHostShm, &x->regionMem));
  for (int q = 0; q < x->nranks; q++)
    if (x->peer[q].linked) MSCCLPP_RETURN_ON_ERROR(linkPeer(comm, x, q));
  const size_t nlinks = x->nranks > 0 ? (size_t)x->nranks : 1;
  const struct mscclppPlanLink** links = (const struct mscclppPlanLink**)calloc(nlinks, sizeof(*links));
  if (links == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_COLL, "out of memory");
  for (int q = 0; q < x->nranks; q++) links[q] = &x->peer[q].link;
  mscclppResult_t res = mscclppPlanLinkHandles(x->prog, links, x->memH, x->portH);
  free(links);
  MSCCLPP_RETURN_ON_ERROR(res);
  MSCCLPP_INFO(MSCCLPP_LOG_COLL,
               "rank %d: execution plan %s on the host backend: region of %llu bytes (chunks up to %llu bytes), %u "
               "channels",
               x->rank, x->plan->name, (unsigned long long)x->regionBytes, (unsigned long long)cap, x->prog->nChannels);
  return mscclppSuccess;
}

void mscclppPlanHostFree(struct mscclppComm* comm, struct mscclppPlanHostCtx* x) {
  if (x == NULL) return;
  regionFree(comm, x);
  free(x->peer);
  free(x->memH);
  free(x->portH);
  free(x->sem);
  free(x->remotes);
  free(x->remoteOff);
  free(x->tmp);
  free(x->prog);
  mscclppPlanRelease(x->plan);
  free(x);
}

static mscclppResult_t ctxCreate(struct mscclppComm* comm, int ctxId, struct mscclppPlan* plan,
                                 struct mscclppPlanHostCtx** out) {
  struct mscclppPlanHostCtx* x = (struct mscclppPlanHostCtx*)calloc(1, sizeof(*x));
  if (x == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_COLL, "out of memory");
  mscclppPlanRetain(plan);
  x->plan = plan;
  x->ctxId = ctxId;
  x->rank = comm->rank;
  x->nranks = comm->nranks;
  x->timeout = comm->params.timeout;
  mscclppResult_t res = mscclppPlanProgramBuild(plan, comm->rank, &x->prog);
  if (res == mscclppSuccess) res = mscclppCommAbortOf(comm, &x->abort);
  if (res == mscclppSuccess) {
    const mscclppPlanProgram* p = x->prog;
    x->peer = (struct planHostPeer*)calloc((size_t)x->nranks, sizeof(*x->peer));
    x->memH = (mscclppMemoryChannelDeviceHandle*)calloc(p->nChannels + 1, sizeof(*x->memH));
    x->portH = (mscclppPortChannelDeviceHandle*)calloc(p->nChannels + 1, sizeof(*x->portH));
    x->sem = (int64_t*)calloc(p->nSemaphores + 1, sizeof(*x->sem));
    x->remotes = (uint8_t**)calloc(p->nRemotes + 1, sizeof(*x->remotes));
    x->remoteOff = (uint64_t*)calloc(p->nRemotes + 1, sizeof(*x->remoteOff));
    if (x->peer == NULL || x->memH == NULL || x->portH == NULL || x->sem == NULL || x->remotes == NULL ||
        x->remoteOff == NULL)
      res = mscclppErr(mscclppSystemError, MSCCLPP_LOG_COLL, "out of memory");
  }
  if (res != mscclppSuccess) {
    mscclppPlanHostFree(comm, x);
    return res;
  }
  const uint32_t* init = mscclppPlanProgramSemInit(x->prog);
  for (uint32_t i = 0; i < x->prog->nSemaphores; i++) x->sem[i] = init[i];
  for (int q = 0; q < x->nranks; q++)
    x->peer[q].linked = mscclppPlanReaches(plan, x->rank, q) || mscclppPlanReaches(plan, q, x->rank);
  *out = x;
  return mscclppSuccess;
}

/* ---- a call ------------------------------------------------------------------------ */

/* The end of every call, once this rank's output is copied out: every
 * linked peer has finished the call too before any rank's next call touches
 * a peer's region. The region outlives the call (staging): without this a
 * fast rank's next call puts into a peer's output area before that peer
 * copied the last call's out, overwrites its own input area while a peer
 * still reads it, or (LL plans without a double scratch) writes a peer's
 * scratch before the peer read the last call's packets. MSCCL++'s executor,
 * on the caller's own buffers, relies on the plan and on timing there.
 * Signal every linked peer, then wait for each one's signal (bounded,
 * abortable). */
static mscclppResult_t endBarrier(struct mscclppComm* comm, struct mscclppPlanHostCtx* x) {
  for (int q = 0; q < x->nranks; q++)
    if (q != x->rank && x->peer[q].linked) mscclppMemoryChannelDeviceSignal(&x->peer[q].link.mapH);
  uint64_t since = mscclppHostClockNs();
  for (int q = 0; q < x->nranks; q++) {
    if (q == x->rank || !x->peer[q].linked) continue;
    while (!mscclppMemoryChannelDevicePoll(&x->peer[q].link.mapH)) {
      if (mscclppAbortIsRaised(x->abort)) {
        mscclppResult_t e = mscclppSuccess;
        if (mscclppCommAsyncError(comm, &e) != mscclppSuccess || e == mscclppSuccess) e = mscclppAborted;
        return mscclppErrWrap(e, MSCCLPP_LOG_COLL, "execution plan %s on rank %d: the communicator is aborted",
                              x->plan->name, x->rank);
      }
      uint64_t waited = mscclppHostClockNs() - since;
      if ((double)waited > x->timeout * 1e9)
        return mscclppAbortRaisef(x->abort, mscclppTimeout,
                                  "execution plan %s on rank %d: rank %d did not end the call within MSCCLPP_TIMEOUT "
                                  "(%.1f s)",
                                  x->plan->name, x->rank, q, x->timeout);
      mscclppHostWaitBackoff(waited);
    }
  }
  return mscclppSuccess;
}

/* The smallest power of two >= v. */
static uint64_t pow2Above(uint64_t v) {
  uint64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

/* Chunks the largest operand of the program covers. */
static uint64_t maxOperandChunks(const mscclppPlanProgram* p) {
  const mscclppPlanOp* ops = mscclppPlanProgramOps(p);
  uint64_t m = 1;
  for (uint32_t i = 0; i < p->nOps; i++)
    for (int k = 0; k < ops[i].nSrc + ops[i].nDst; k++)
      if (ops[i].operand[k].count > m) m = ops[i].operand[k].count;
  return m;
}

mscclppResult_t mscclppPlanHostRun(struct mscclppComm* comm, struct mscclppPlanHostCtx** ctx, int ctxId,
                                   struct mscclppPlan* plan, const struct mscclppCollArgs* a) {
  struct mscclppPlanSizes sz;
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanSizesOf(plan, comm->nranks, a->count, a->typeSize, &sz));
  if (*ctx == NULL) MSCCLPP_RETURN_ON_ERROR(ctxCreate(comm, ctxId, plan, ctx));
  struct mscclppPlanHostCtx* x = *ctx;
  if (sz.chunkBytes > x->capChunk) {
    /* every rank reaches this call with the same size: all rebuild here */
    uint64_t cap = pow2Above(sz.chunkBytes);
    if (cap < 2 * x->capChunk) cap = 2 * x->capChunk;
    if (cap < MIN_CAP_CHUNK) cap = MIN_CAP_CHUNK;
    regionFree(comm, x);
    mscclppResult_t res = regionBuild(comm, x, cap);
    if (res != mscclppSuccess) {
      regionFree(comm, x); /* the next call tries again (and its peers with it, or it times out) */
      return mscclppErrWrap(res, MSCCLPP_LOG_COLL, "execution plan %s on rank %d: setting up the host executor",
                            plan->name, x->rank);
    }
  }
  const uint64_t c = sz.chunkBytes, k = plan->chunksPerBlock;
  uint64_t tmp = 2 * maxOperandChunks(x->prog) * c;
  if (tmp > x->tmpBytes) {
    free(x->tmp);
    x->tmp = (uint8_t*)malloc(2 * tmp);
    x->tmpBytes = x->tmp != NULL ? tmp : 0;
    if (x->tmp == NULL)
      return mscclppErr(mscclppSystemError, MSCCLPP_LOG_COLL, "out of memory for %llu bytes of reduction scratch",
                        (unsigned long long)(2 * tmp));
  }
  if (++x->flag == 0) x->flag = 1; /* LL flags are never 0 (buffers start zeroed) */

  struct planCall call;
  memset(&call, 0, sizeof(call));
  call.x = x;
  call.name = plan->name;
  call.typeSize = a->typeSize;
  call.reduce = mscclppHostReduceFnOf(a->type, a->op == mscclppAvg ? mscclppSum : a->op);
  mscclppPlanCallShapeOf(plan, &sz, x->flag, mscclppPlanScratchBytes(plan, x->capChunk), &call.shape);
  mscclppPlanHostLayout(x, x->rank, c, &call.mine);
  for (int s = 0; s < MSCCLPP_PLAN_SPACES; s++) call.local[s] = x->region + call.mine.off[s];
  const mscclppPlanRemote* rem = mscclppPlanProgramRemotes(x->prog);
  for (uint32_t j = 0; j < x->prog->nRemotes; j++) {
    struct planLayout l;
    mscclppPlanHostLayout(x, rem[j].rank, c, &l);
    x->remoteOff[j] = l.off[rem[j].space];
    x->remotes[j] = x->peer[rem[j].rank].base + l.off[rem[j].space];
  }

  /* the caller's input into the input area, each block padded to k chunks */
  const uint64_t B = sz.blockBytes, padded = k * c;
  const uint8_t* send = (const uint8_t*)a->send;
  uint8_t* recv = (uint8_t*)a->recv;
  for (uint32_t b = 0; b < sz.inBlocks; b++) {
    uint8_t* dst = call.local[MSCCLPP_PLAN_INPUT] + b * padded;
    memmove(dst, send + b * B, B);
    if (padded > B) memset(dst + B, 0, padded - B);
  }
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanHostExecute(comm, &call));
  for (uint32_t b = 0; b < sz.outBlocks; b++) memmove(recv + b * B, call.local[MSCCLPP_PLAN_OUTPUT] + b * padded, B);
  MSCCLPP_RETURN_ON_ERROR(endBarrier(comm, x));
  if (a->op == mscclppAvg && (a->kind == MSCCLPP_COLL_ALLREDUCE || a->kind == MSCCLPP_COLL_REDUCESCATTER))
    mscclppHostDivideFnOf(a->type)(recv, sz.outBlocks * a->count, comm->nranks);
  return mscclppSuccess;
}
