/* SPDX-License-Identifier: MIT */
/*
 * The plan loader's reading of a thread block (plan_read.h): its channels
 * and remote buffer references, and each op -- its name, channels and
 * operands, checked against what the op does (MSCCL++'s executor,
 * src/core/include/execution_kernel.hpp, is the reference for what each op
 * reads and writes) and against the buffers' chunks, and written as a
 * program op record (plan_program.h).
 */
#ifdef MSCCLPP_HAVE_JANSSON

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/plan/plan_read.h"
#include "core/error.h"

void mscclppPlanTbViewFree(struct tbView* v) {
  for (int t = 0; t < 3; t++) {
    free(v->ch[t]);
    free(v->rb[t]);
  }
  memset(v, 0, sizeof(*v));
}

static mscclppResult_t newOp(struct gpuReader* gr, mscclppPlanOp** op) {
  struct mscclppPlanGpu* g = gr->g;
  if (g->nOps == gr->opCap) {
    uint32_t cap = gr->opCap == 0 ? 64 : gr->opCap * 2;
    mscclppPlanOp* ops = (mscclppPlanOp*)realloc(g->ops, (size_t)cap * sizeof(*ops));
    if (ops == NULL) return mscclppPlanReadFail(gr->rd, mscclppSystemError, "out of memory for %u ops", cap);
    g->ops = ops;
    gr->opCap = cap;
  }
  *op = &g->ops[g->nOps++];
  memset(*op, 0, sizeof(**op));
  (*op)->tbgSize = 1;
  return mscclppSuccess;
}

/* Chunks of `space` on rank r. */
static uint32_t chunksOf(const struct mscclppPlan* plan, int r, int space) {
  const struct mscclppPlanGpu* g = &plan->gpus[r];
  return space == MSCCLPP_PLAN_INPUT    ? g->inputChunks
         : space == MSCCLPP_PLAN_OUTPUT ? g->outputChunks
                                        : g->scratchChunks;
}

/* Operand classes an op allows at a position. */
enum {
  K_LOCAL = 1,          /* this rank's buffer, plain data */
  K_SCRATCH_PKT = 4,    /* this rank's scratch, LL packets (MSCCL++'s DSL keeps packets in scratch only) */
  K_REMOTE = 8,         /* a peer's buffer, plain data */
  K_REMOTE_SCR_PKT = 16 /* a peer's scratch, LL packets */
};

/* Read one src_buff / dst_buff entry (path p) into *o, as class `kinds`
 * allows, and check its chunks against its buffer. */
static mscclppResult_t readOperand(struct gpuReader* gr, const struct tbView* tb, const json_t* v, const char* p,
                                   int op, uint8_t chType, int kinds, mscclppPlanOperand* o) {
  struct reader* rd = gr->rd;
  const struct mscclppPlan* plan = rd->plan;
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadObject(rd, v, p));
  if (json_object_get(v, "switch_channel_id") != NULL) return FAIL(rd, "%s: " MULTICAST_REFUSED, p);
  json_t* bid = json_object_get(v, "buffer_id");
  const char* type = NULL;
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadString(rd, v, p, "type", bid == NULL, &type));
  int owner = gr->rank;
  memset(o, 0, sizeof(*o));
  char q[320];
  if (bid != NULL) {
    if (!(kinds & (K_REMOTE | K_REMOTE_SCR_PKT)))
      return FAIL(rd, "%s has a buffer_id (a peer's buffer), but this operand must be this rank's buffer (\"type\")",
                  p);
    if (chType == MSCCLPP_PLAN_CHANNEL_NONE)
      return FAIL(rd, "%s names a peer's buffer (buffer_id) but the op has no channel_type to reach it", p);
    uint64_t id = 0;
    mscclppPlanReadJoin(q, sizeof(q), p, "buffer_id");
    MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadWhole(rd, bid, q, 0, 65535, &id));
    if (id >= tb->nRb[chType])
      return FAIL(rd, "%s %llu is out of range: the thread block has %u remote buffers reached over %s channels", q,
                  (unsigned long long)id, tb->nRb[chType], mscclppPlanChannelTypeName(chType));
    uint32_t rid = tb->rb[chType][id];
    const mscclppPlanRemote* rem = &gr->g->remotes[rid];
    o->flags |= MSCCLPP_PLAN_OPERAND_REMOTE;
    o->remote = (uint16_t)rid;
    o->space = rem->space;
    owner = rem->rank;
    if (kinds & K_REMOTE_SCR_PKT) {
      if (rem->space != MSCCLPP_PLAN_SCRATCH)
        return FAIL(rd, "%s: LL packets go to a peer's scratch, but remote buffer %u is rank %d's %s", p, rid,
                    rem->rank, mscclppPlanSpaceNames[rem->space]);
      o->flags |= MSCCLPP_PLAN_OPERAND_PACKET;
    }
  } else {
    if (!(kinds & (K_LOCAL | K_SCRATCH_PKT)))
      return FAIL(rd, "%s has a \"type\" (this rank's buffer), but this operand must be a peer's buffer (buffer_id)",
                  p);
    mscclppPlanReadJoin(q, sizeof(q), p, "type");
    MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadSpace(rd, type, q, &o->space));
    if (kinds & K_SCRATCH_PKT) {
      if (o->space != MSCCLPP_PLAN_SCRATCH)
        return FAIL(rd, "%s \"%s\": %s's LL packets are in this rank's scratch (\"s\")", q, type,
                    mscclppPlanOpName((mscclppPlanOpCode)op));
      o->flags |= MSCCLPP_PLAN_OPERAND_PACKET;
    }
  }
  uint64_t index = 0, size = 0;
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadWholeField(rd, v, p, "index", 1, 0, 0, 4294967295.0, &index));
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadWholeField(rd, v, p, "size", 1, 0, 0, 4294967295.0, &size));
  if (size == 0) return FAIL(rd, "%s.size is 0: an operand covers at least one chunk", p);
  /* (packets are in scratch only, which an LL plan has twice as large) */
  uint32_t have = chunksOf(plan, owner, o->space);
  char whose[48];
  if (o->flags & MSCCLPP_PLAN_OPERAND_REMOTE)
    snprintf(whose, sizeof(whose), "rank %d's %s", owner, mscclppPlanSpaceNames[o->space]);
  else
    snprintf(whose, sizeof(whose), "%s", mscclppPlanSpaceNames[o->space]);
  if (index >= have) {
    mscclppPlanReadJoin(q, sizeof(q), p, "index");
    return FAIL(rd, "%s %llu is out of range: %s has %u chunks", q, (unsigned long long)index, whose, have);
  }
  if (index + size > have)
    return FAIL(rd, "%s: chunks %llu to %llu (index %llu, size %llu) are out of range: %s has %u chunks", p,
                (unsigned long long)index, (unsigned long long)(index + size - 1), (unsigned long long)index,
                (unsigned long long)size, whose, have);
  o->chunk = (uint32_t)index;
  o->count = (uint32_t)size;
  return mscclppSuccess;
}

/* Read array `key` of op (path at) into operand[first ..): n entries, the
 * first `nFirst` of class k0 (k0 == 0: none special), the rest of class kN. */
static mscclppResult_t readOperands(struct gpuReader* gr, const struct tbView* tb, const json_t* opj, const char* at,
                                    const char* key, uint8_t chType, const int* kinds, int nKinds, int minN,
                                    mscclppPlanOp* op, int first, uint8_t* n) {
  struct reader* rd = gr->rd;
  json_t* arr;
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadArray(rd, opj, at, key, minN > 0, &arr));
  size_t cnt = arr != NULL ? json_array_size(arr) : 0;
  const char* name = mscclppPlanOpName((mscclppPlanOpCode)op->code);
  if ((int)cnt < minN) return FAIL(rd, "%s.%s has %zu entries; %s takes at least %d", at, key, cnt, name, minN);
  if (first + cnt > MSCCLPP_PLAN_MAX_OPERANDS)
    return FAIL(rd, "%s has %zu %s entries, more than the executor takes (%d src_buff and dst_buff entries in all)", at,
                cnt, key, MSCCLPP_PLAN_MAX_OPERANDS);
  for (size_t i = 0; i < cnt; i++) {
    char p[320];
    mscclppPlanReadPath(p, sizeof(p), "%s.%s[%zu]", at, key, i);
    int k = kinds[i < (size_t)nKinds ? i : (size_t)nKinds - 1];
    MSCCLPP_RETURN_ON_ERROR(
        readOperand(gr, tb, json_array_get(arr, i), p, op->code, chType, k, &op->operand[first + i]));
  }
  *n = (uint8_t)cnt;
  return mscclppSuccess;
}

/* An op without operands must not carry any. */
static mscclppResult_t noOperands(struct reader* rd, const json_t* opj, const char* at, const char* name) {
  json_t* s = json_object_get(opj, "src_buff");
  json_t* d = json_object_get(opj, "dst_buff");
  if ((s != NULL && (!json_is_array(s) || json_array_size(s) > 0)) ||
      (d != NULL && (!json_is_array(d) || json_array_size(d) > 0)))
    return FAIL(rd, "%s: %s takes no src_buff or dst_buff", at, name);
  return mscclppSuccess;
}

/* channel_ids of op (path at): indices into the block's channels of type t. */
static mscclppResult_t readChannelIds(struct gpuReader* gr, const struct tbView* tb, const json_t* opj, const char* at,
                                      int required, mscclppPlanOp* op) {
  struct reader* rd = gr->rd;
  json_t* arr;
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadArray(rd, opj, at, "channel_ids", required, &arr));
  if (arr == NULL) return mscclppSuccess;
  size_t n = json_array_size(arr);
  if (required && n == 0)
    return FAIL(rd, "%s.channel_ids is empty; %s needs at least one channel", at,
                mscclppPlanOpName((mscclppPlanOpCode)op->code));
  if (n > MSCCLPP_PLAN_MAX_IDS)
    return FAIL(rd, "%s.channel_ids has %zu entries, more than the executor takes (%d)", at, n, MSCCLPP_PLAN_MAX_IDS);
  if (n > 0 && op->channelType == MSCCLPP_PLAN_CHANNEL_NONE)
    return FAIL(rd, "%s has channel_ids but no channel_type", at);
  for (size_t i = 0; i < n; i++) {
    char p[320];
    mscclppPlanReadPath(p, sizeof(p), "%s.channel_ids[%zu]", at, i);
    uint64_t id = 0;
    MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadWhole(rd, json_array_get(arr, i), p, 0, 65535, &id));
    if (id >= tb->nCh[op->channelType])
      return FAIL(rd, "%s %llu is out of range: the thread block has %u %s channels", p, (unsigned long long)id,
                  tb->nCh[op->channelType], mscclppPlanChannelTypeName(op->channelType));
    op->ids[i] = (uint16_t)tb->ch[op->channelType][id];
  }
  op->nIds = (uint8_t)n;
  return mscclppSuccess;
}

/* The op's channel_type: `allowed` is a mask of (1 << type); required when
 * it allows no NONE. */
static mscclppResult_t readChannelType(struct reader* rd, const json_t* opj, const char* at, unsigned allowed,
                                       mscclppPlanOp* op) {
  const int needed = !(allowed & (1u << MSCCLPP_PLAN_CHANNEL_NONE));
  const char* s = NULL;
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadString(rd, opj, at, "channel_type", needed, &s));
  op->channelType = MSCCLPP_PLAN_CHANNEL_NONE;
  if (s == NULL) return mscclppSuccess;
  char p[320];
  mscclppPlanReadJoin(p, sizeof(p), at, "channel_type");
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadChannelType(rd, s, p, 1, &op->channelType));
  if (!(allowed & (1u << op->channelType))) {
    const char* want = allowed == (1u << MSCCLPP_PLAN_CHANNEL_PORT)     ? "\"port\""
                       : allowed == (1u << MSCCLPP_PLAN_CHANNEL_MEMORY) ? "\"memory\""
                       : (allowed & 1u)                                 ? "\"none\""
                                                                        : "\"memory\" or \"port\"";
    return FAIL(rd, "%s \"%s\": %s works over %s channels", p, s, mscclppPlanOpName((mscclppPlanOpCode)op->code), want);
  }
  return mscclppSuccess;
}

#define CH_NONE (1u << MSCCLPP_PLAN_CHANNEL_NONE)
#define CH_MEM (1u << MSCCLPP_PLAN_CHANNEL_MEMORY)
#define CH_PORT (1u << MSCCLPP_PLAN_CHANNEL_PORT)

/* All operands of op have the count of the first. */
static mscclppResult_t sameCounts(struct reader* rd, const mscclppPlanOp* op, const char* at) {
  int n = op->nSrc + op->nDst;
  for (int i = 1; i < n; i++)
    if (op->operand[i].count != op->operand[0].count)
      return FAIL(rd, "%s: %s[%d] has size %u but src_buff[0] has %u: the operands of %s cover equal chunks", at,
                  i < op->nSrc ? "src_buff" : "dst_buff", i < op->nSrc ? i : i - op->nSrc, op->operand[i].count,
                  op->operand[0].count, mscclppPlanOpName((mscclppPlanOpCode)op->code));
  return mscclppSuccess;
}

/* put/get-like ops: src[i] pairs with dst[i], of equal sizes. */
static mscclppResult_t pairedCounts(struct reader* rd, const mscclppPlanOp* op, const char* at) {
  if (op->nSrc != op->nDst)
    return FAIL(rd, "%s: %s has %u src_buff and %u dst_buff entries; they go in pairs", at,
                mscclppPlanOpName((mscclppPlanOpCode)op->code), op->nSrc, op->nDst);
  for (int i = 0; i < op->nSrc; i++)
    if (op->operand[i].count != op->operand[op->nSrc + i].count)
      return FAIL(rd, "%s: src_buff[%d] has size %u and dst_buff[%d] %u: a pair covers equal chunks", at, i,
                  op->operand[i].count, i, op->operand[op->nSrc + i].count);
  return mscclppSuccess;
}

/* Port ops: channel ids[i] carries dst[i] and leads to its owner. */
static mscclppResult_t portPairs(struct gpuReader* gr, const mscclppPlanOp* op, const char* at) {
  struct reader* rd = gr->rd;
  if (op->nIds != op->nDst)
    return FAIL(rd,
                "%s: %s over port channels has %u dst_buff entries and %u channel_ids; each destination has its "
                "channel",
                at, mscclppPlanOpName((mscclppPlanOpCode)op->code), op->nDst, op->nIds);
  for (int i = 0; i < op->nDst; i++) {
    const mscclppPlanOperand* d = &op->operand[op->nSrc + i];
    int owner = gr->g->remotes[d->remote].rank, peer = gr->g->channels[op->ids[i]].peer;
    if (owner != peer)
      return FAIL(rd, "%s: dst_buff[%d] is rank %d's buffer but channel_ids[%d] is a port channel to rank %d", at, i,
                  owner, i, peer);
  }
  return mscclppSuccess;
}

static mscclppResult_t readPipeline(struct gpuReader* gr, const struct tbView* tb, uint32_t tbIndex, const json_t* opj,
                                    const char* at, uint32_t self) {
  struct reader* rd = gr->rd;
  json_t* ic;
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadField(rd, opj, at, "iter_context", 1, &ic));
  char p[320];
  mscclppPlanReadJoin(p, sizeof(p), at, "iter_context");
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadObject(rd, ic, p));
  uint32_t unit = 0, nChunks = 0;
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadU32(rd, ic, p, "unit_size", 1, 0, 1, UINT32_MAX, &unit));
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadU32(rd, ic, p, "num_chunks", 1, 0, 1, UINT32_MAX, &nChunks));
  if (unit % rd->plan->alignment != 0)
    return FAIL(rd, "%s.unit_size %u is not a multiple of buffer_alignment %u", p, unit, rd->plan->alignment);
  json_t* ops;
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadArray(rd, opj, at, "ops", 1, &ops));
  if (json_array_size(ops) == 0) return FAIL(rd, "%s.ops is empty: a pipeline repeats at least one op", at);
  uint32_t before = gr->g->nOps;
  for (size_t i = 0; i < json_array_size(ops); i++) {
    char q[320];
    mscclppPlanReadPath(q, sizeof(q), "%s.ops[%zu]", at, i);
    MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadOp(gr, tb, tbIndex, json_array_get(ops, i), q, 1));
  }
  mscclppPlanOp* op = &gr->g->ops[self]; /* ops may have moved */
  uint32_t inner = gr->g->nOps - before;
  if (inner > UINT16_MAX) return FAIL(rd, "%s has %u ops, more than a pipeline takes (%u)", at, inner, UINT16_MAX);
  op->nInner = (uint16_t)inner;
  op->arg0 = unit;
  struct mscclppPlan* plan = rd->plan;
  uint32_t a = plan->pipelineUnitGcd, b = unit;
  while (b != 0) {
    uint32_t t = a % b;
    a = b;
    b = t;
  }
  plan->pipelineUnitGcd = a;
  op->arg1 = nChunks;
  return mscclppSuccess;
}

mscclppResult_t mscclppPlanReadOp(struct gpuReader* gr, const struct tbView* tb, uint32_t tbIndex, const json_t* opj,
                                  const char* at, int inPipeline) {
  struct reader* rd = gr->rd;
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadObject(rd, opj, at));
  const char* name = NULL;
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadString(rd, opj, at, "name", 1, &name));
  int code = -1;
  for (int c = 0; c < MSCCLPP_PLAN_OPS; c++)
    if (strcmp(name, mscclppPlanOpName((mscclppPlanOpCode)c)) == 0) code = c;
  if (code < 0) {
    if (strcmp(name, "glres") == 0 || strcmp(name, "glre") == 0 || strcmp(name, "gstore") == 0 ||
        strcmp(name, "gstorepkt") == 0)
      return FAIL(rd, "%s.name \"%s\": " MULTICAST_REFUSED, at, name);
    return FAIL(rd,
                "%s.name \"%s\" is not an operation (nop, barrier, put, pws, pwsf, get, copy, signal, wait, "
                "rlxsignal, rlxwait, flush, re, res, rre, rres, ppkt, rppkt, cpkt, upkt, repkt, respkt, recpkt, "
                "recspkt, pipeline, sem_acquire, sem_release)",
                at, name);
  }
  uint32_t self = 0;
  mscclppPlanOp* op = NULL;
  MSCCLPP_RETURN_ON_ERROR(newOp(gr, &op));
  self = gr->g->nOps - 1;
  op->code = (uint8_t)code;
  const int isPacket = code == MSCCLPP_PLAN_OP_PUT_PACKETS || code == MSCCLPP_PLAN_OP_READ_PUT_PACKETS ||
                       code == MSCCLPP_PLAN_OP_COPY_PACKETS || code == MSCCLPP_PLAN_OP_UNPACK_PACKETS ||
                       code == MSCCLPP_PLAN_OP_REDUCE_PACKETS || code == MSCCLPP_PLAN_OP_REDUCE_COPY_PACKETS ||
                       code == MSCCLPP_PLAN_OP_REDUCE_SEND_PACKETS || code == MSCCLPP_PLAN_OP_REDUCE_COPY_SEND_PACKETS;
  if (isPacket && rd->plan->protocol != MSCCLPP_PLAN_LL)
    return FAIL(rd,
                "%s: %s is an LL packet operation, but the plan's protocol is \"Simple\" (packets need \"LL\", "
                "which doubles the scratch)",
                at, name);
  if (inPipeline && (isPacket || code == MSCCLPP_PLAN_OP_PIPELINE))
    return FAIL(rd, "%s: %s cannot be inside a pipeline (MSCCL++'s executor would repeat it whole at every iteration)",
                at, name);

  /* common optional fields */
  const char* rop = NULL;
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadString(rd, opj, at, "reduce_op", 0, &rop));
  if (rop != NULL) {
    if (strcmp(rop, "sum") == 0)
      op->reduceOp = MSCCLPP_PLAN_REDUCE_SUM;
    else if (strcmp(rop, "min") == 0)
      op->reduceOp = MSCCLPP_PLAN_REDUCE_MIN;
    else if (strcmp(rop, "max") == 0)
      op->reduceOp = MSCCLPP_PLAN_REDUCE_MAX;
    else
      return FAIL(rd, "%s.reduce_op \"%s\" is not \"sum\", \"min\" or \"max\"", at, rop);
  }
  json_t* tbg = json_object_get(opj, "tbg_info");
  if (tbg != NULL) {
    char p[320];
    mscclppPlanReadJoin(p, sizeof(p), at, "tbg_info");
    MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadObject(rd, tbg, p));
    uint32_t id = 0, size = 0;
    MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadU32(rd, tbg, p, "tbg_size", 1, 1, 1, 65535, &size));
    MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadU32(rd, tbg, p, "tb_id", 1, 0, 0, 65535, &id));
    if (id >= size) return FAIL(rd, "%s.tb_id %u is out of range: the group has %u thread blocks", p, id, size);
    op->tbgId = (uint16_t)id;
    op->tbgSize = (uint16_t)size;
  }

  static const int L[] = {K_LOCAL}, R[] = {K_REMOTE}, SP[] = {K_SCRATCH_PKT}, RSP[] = {K_REMOTE_SCR_PKT},
                   L_R[] = {K_LOCAL, K_LOCAL | K_REMOTE}, L_SP[] = {K_LOCAL, K_SCRATCH_PKT},
                   L_RSP[] = {K_LOCAL, K_REMOTE_SCR_PKT}, L_SP_RSP[] = {K_LOCAL, K_SCRATCH_PKT, K_REMOTE_SCR_PKT},
                   L_Rd[] = {K_LOCAL, K_REMOTE};
  const uint8_t NONE = MSCCLPP_PLAN_CHANNEL_NONE;
  switch (code) {
    case MSCCLPP_PLAN_OP_NOP:
      MSCCLPP_RETURN_ON_ERROR(noOperands(rd, opj, at, name));
      break;
    case MSCCLPP_PLAN_OP_BARRIER: {
      MSCCLPP_RETURN_ON_ERROR(noOperands(rd, opj, at, name));
      uint32_t id = 0, n = 0;
      MSCCLPP_RETURN_ON_ERROR(
          mscclppPlanReadU32(rd, opj, at, "barrier_id", 1, 0, 0, MSCCLPP_PLAN_MAX_BARRIERS - 1, &id));
      MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadU32(rd, opj, at, "num_threadblocks", 1, 0, 1, 65535, &n));
      if (n > gr->g->nBlocks)
        return FAIL(rd, "%s.num_threadblocks %u is more than rank %d's %u thread blocks", at, n, gr->rank,
                    gr->g->nBlocks);
      if (gr->barrierBlocks[id] != 0 && gr->barrierBlocks[id] != n)
        return FAIL(rd, "%s: barrier %u is for %u thread blocks here but for %u elsewhere on rank %d", at, id, n,
                    gr->barrierBlocks[id], gr->rank);
      gr->barrierBlocks[id] = n;
      if (inPipeline)
        gr->barrierPipelined[id] = 1;
      else
        gr->barrierUses[(size_t)id * gr->g->nBlocks + tbIndex]++;
      if (id + 1 > gr->g->nBarriers) gr->g->nBarriers = id + 1;
      op->barrier = (uint16_t)id;
      op->arg0 = n;
      break;
    }
    case MSCCLPP_PLAN_OP_SIGNAL:
    case MSCCLPP_PLAN_OP_WAIT:
    case MSCCLPP_PLAN_OP_RELAXED_SIGNAL:
    case MSCCLPP_PLAN_OP_RELAXED_WAIT:
    case MSCCLPP_PLAN_OP_FLUSH:
      MSCCLPP_RETURN_ON_ERROR(noOperands(rd, opj, at, name));
      MSCCLPP_RETURN_ON_ERROR(
          readChannelType(rd, opj, at, code == MSCCLPP_PLAN_OP_FLUSH ? CH_PORT : CH_MEM | CH_PORT, op));
      MSCCLPP_RETURN_ON_ERROR(readChannelIds(gr, tb, opj, at, 1, op));
      break;
    case MSCCLPP_PLAN_OP_PUT:
    case MSCCLPP_PLAN_OP_PUT_WITH_SIGNAL:
    case MSCCLPP_PLAN_OP_PUT_WITH_SIGNAL_AND_FLUSH:
      MSCCLPP_RETURN_ON_ERROR(
          readChannelType(rd, opj, at, code == MSCCLPP_PLAN_OP_PUT ? CH_MEM | CH_PORT : CH_PORT, op));
      MSCCLPP_RETURN_ON_ERROR(readChannelIds(gr, tb, opj, at, op->channelType == MSCCLPP_PLAN_CHANNEL_PORT, op));
      MSCCLPP_RETURN_ON_ERROR(readOperands(gr, tb, opj, at, "src_buff", op->channelType, L, 1, 1, op, 0, &op->nSrc));
      MSCCLPP_RETURN_ON_ERROR(
          readOperands(gr, tb, opj, at, "dst_buff", op->channelType, R, 1, 1, op, op->nSrc, &op->nDst));
      MSCCLPP_RETURN_ON_ERROR(pairedCounts(rd, op, at));
      if (op->channelType == MSCCLPP_PLAN_CHANNEL_PORT) MSCCLPP_RETURN_ON_ERROR(portPairs(gr, op, at));
      break;
    case MSCCLPP_PLAN_OP_GET:
      MSCCLPP_RETURN_ON_ERROR(readChannelType(rd, opj, at, CH_MEM, op));
      MSCCLPP_RETURN_ON_ERROR(readChannelIds(gr, tb, opj, at, 0, op));
      MSCCLPP_RETURN_ON_ERROR(readOperands(gr, tb, opj, at, "src_buff", op->channelType, R, 1, 1, op, 0, &op->nSrc));
      MSCCLPP_RETURN_ON_ERROR(
          readOperands(gr, tb, opj, at, "dst_buff", op->channelType, L, 1, 1, op, op->nSrc, &op->nDst));
      MSCCLPP_RETURN_ON_ERROR(pairedCounts(rd, op, at));
      break;
    case MSCCLPP_PLAN_OP_COPY:
    case MSCCLPP_PLAN_OP_COPY_PACKETS:
    case MSCCLPP_PLAN_OP_UNPACK_PACKETS:
      MSCCLPP_RETURN_ON_ERROR(readChannelType(rd, opj, at, CH_NONE, op));
      MSCCLPP_RETURN_ON_ERROR(readOperands(gr, tb, opj, at, "src_buff", NONE,
                                           code == MSCCLPP_PLAN_OP_UNPACK_PACKETS ? SP : L, 1, 1, op, 0, &op->nSrc));
      MSCCLPP_RETURN_ON_ERROR(readOperands(gr, tb, opj, at, "dst_buff", NONE,
                                           code == MSCCLPP_PLAN_OP_COPY_PACKETS ? SP : L, 1, 1, op, op->nSrc,
                                           &op->nDst));
      if (op->nSrc != 1 || op->nDst != 1)
        return FAIL(rd, "%s: %s takes one src_buff and one dst_buff entry (it has %u and %u)", at, name, op->nSrc,
                    op->nDst);
      MSCCLPP_RETURN_ON_ERROR(sameCounts(rd, op, at));
      break;
    case MSCCLPP_PLAN_OP_PUT_PACKETS:
      MSCCLPP_RETURN_ON_ERROR(readChannelType(rd, opj, at, CH_MEM | CH_PORT, op));
      MSCCLPP_RETURN_ON_ERROR(readChannelIds(gr, tb, opj, at, op->channelType == MSCCLPP_PLAN_CHANNEL_PORT, op));
      MSCCLPP_RETURN_ON_ERROR(readOperands(gr, tb, opj, at, "src_buff", op->channelType,
                                           op->channelType == MSCCLPP_PLAN_CHANNEL_PORT ? SP : L, 1, 1, op, 0,
                                           &op->nSrc));
      MSCCLPP_RETURN_ON_ERROR(
          readOperands(gr, tb, opj, at, "dst_buff", op->channelType, RSP, 1, 1, op, op->nSrc, &op->nDst));
      MSCCLPP_RETURN_ON_ERROR(pairedCounts(rd, op, at));
      if (op->channelType == MSCCLPP_PLAN_CHANNEL_PORT) MSCCLPP_RETURN_ON_ERROR(portPairs(gr, op, at));
      break;
    case MSCCLPP_PLAN_OP_READ_PUT_PACKETS:
      MSCCLPP_RETURN_ON_ERROR(readChannelType(rd, opj, at, CH_MEM | CH_PORT, op));
      MSCCLPP_RETURN_ON_ERROR(readChannelIds(gr, tb, opj, at, op->channelType == MSCCLPP_PLAN_CHANNEL_PORT, op));
      MSCCLPP_RETURN_ON_ERROR(readOperands(gr, tb, opj, at, "src_buff", op->channelType, SP, 1, 1, op, 0, &op->nSrc));
      MSCCLPP_RETURN_ON_ERROR(
          readOperands(gr, tb, opj, at, "dst_buff", op->channelType, RSP, 1, 1, op, op->nSrc, &op->nDst));
      if (op->nSrc != 1) return FAIL(rd, "%s: rppkt reads one src_buff entry (it has %u)", at, op->nSrc);
      MSCCLPP_RETURN_ON_ERROR(sameCounts(rd, op, at));
      if (op->channelType == MSCCLPP_PLAN_CHANNEL_PORT) MSCCLPP_RETURN_ON_ERROR(portPairs(gr, op, at));
      break;
    case MSCCLPP_PLAN_OP_REDUCE:
    case MSCCLPP_PLAN_OP_REDUCE_SEND:
    case MSCCLPP_PLAN_OP_READ_REDUCE:
    case MSCCLPP_PLAN_OP_READ_REDUCE_SEND: {
      const int reads = code == MSCCLPP_PLAN_OP_READ_REDUCE || code == MSCCLPP_PLAN_OP_READ_REDUCE_SEND;
      const int sends = code == MSCCLPP_PLAN_OP_REDUCE_SEND || code == MSCCLPP_PLAN_OP_READ_REDUCE_SEND;
      MSCCLPP_RETURN_ON_ERROR(readChannelType(rd, opj, at, reads || sends ? CH_MEM : CH_NONE | CH_MEM, op));
      MSCCLPP_RETURN_ON_ERROR(readChannelIds(gr, tb, opj, at, 0, op));
      MSCCLPP_RETURN_ON_ERROR(readOperands(gr, tb, opj, at, "src_buff", op->channelType, reads ? L_R : L, reads ? 2 : 1,
                                           reads ? 2 : 1, op, 0, &op->nSrc));
      MSCCLPP_RETURN_ON_ERROR(readOperands(gr, tb, opj, at, "dst_buff", op->channelType, sends ? L_Rd : L,
                                           sends ? 2 : 1, sends ? 2 : 1, op, op->nSrc, &op->nDst));
      if (!sends && op->nDst != 1) return FAIL(rd, "%s: %s writes one dst_buff entry (it has %u)", at, name, op->nDst);
      MSCCLPP_RETURN_ON_ERROR(sameCounts(rd, op, at));
      break;
    }
    case MSCCLPP_PLAN_OP_REDUCE_PACKETS:
    case MSCCLPP_PLAN_OP_REDUCE_COPY_PACKETS:
    case MSCCLPP_PLAN_OP_REDUCE_SEND_PACKETS:
    case MSCCLPP_PLAN_OP_REDUCE_COPY_SEND_PACKETS: {
      const int copies =
          code == MSCCLPP_PLAN_OP_REDUCE_COPY_PACKETS || code == MSCCLPP_PLAN_OP_REDUCE_COPY_SEND_PACKETS;
      const int sends = code == MSCCLPP_PLAN_OP_REDUCE_SEND_PACKETS || code == MSCCLPP_PLAN_OP_REDUCE_COPY_SEND_PACKETS;
      MSCCLPP_RETURN_ON_ERROR(readChannelType(rd, opj, at, sends ? CH_MEM : CH_NONE | CH_MEM, op));
      MSCCLPP_RETURN_ON_ERROR(readChannelIds(gr, tb, opj, at, 0, op));
      MSCCLPP_RETURN_ON_ERROR(readOperands(gr, tb, opj, at, "src_buff", op->channelType, L_SP, 2, 1, op, 0, &op->nSrc));
      const int* dk = copies ? (sends ? L_SP_RSP : L_SP) : (sends ? L_RSP : L);
      int nk = copies ? (sends ? 3 : 2) : (sends ? 2 : 1);
      MSCCLPP_RETURN_ON_ERROR(
          readOperands(gr, tb, opj, at, "dst_buff", op->channelType, dk, nk, nk, op, op->nSrc, &op->nDst));
      if (!sends && op->nDst != nk)
        return FAIL(rd, "%s: %s writes %d dst_buff entries (it has %u)", at, name, nk, op->nDst);
      MSCCLPP_RETURN_ON_ERROR(sameCounts(rd, op, at));
      break;
    }
    case MSCCLPP_PLAN_OP_PIPELINE:
      MSCCLPP_RETURN_ON_ERROR(noOperands(rd, opj, at, name));
      MSCCLPP_RETURN_ON_ERROR(readPipeline(gr, tb, tbIndex, opj, at, self));
      break;
    case MSCCLPP_PLAN_OP_SEM_ACQUIRE:
    case MSCCLPP_PLAN_OP_SEM_RELEASE: {
      MSCCLPP_RETURN_ON_ERROR(noOperands(rd, opj, at, name));
      json_t* arr;
      MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadArray(rd, opj, at, "semaphore_ids", 1, &arr));
      size_t n = json_array_size(arr);
      if (n == 0) return FAIL(rd, "%s.semaphore_ids is empty", at);
      if (n > MSCCLPP_PLAN_MAX_IDS)
        return FAIL(rd, "%s.semaphore_ids has %zu entries, more than the executor takes (%d)", at, n,
                    MSCCLPP_PLAN_MAX_IDS);
      for (size_t i = 0; i < n; i++) {
        char p[320];
        mscclppPlanReadPath(p, sizeof(p), "%s.semaphore_ids[%zu]", at, i);
        uint64_t id = 0;
        MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadWhole(rd, json_array_get(arr, i), p, 0, 65535, &id));
        if (id >= gr->g->nSemaphores)
          return FAIL(rd, "%s %llu is out of range: rank %d has %u semaphores", p, (unsigned long long)id, gr->rank,
                      gr->g->nSemaphores);
        gr->g->ops[self].ids[i] = (uint16_t)id;
      }
      gr->g->ops[self].nIds = (uint8_t)n;
      break;
    }
    default:
      return mscclppPlanReadFail(rd, mscclppInternalError, "%s: op %s has no reader", at, name);
  }
  return mscclppSuccess;
}

/* A thread block's channels and remote_buffer_refs. */
mscclppResult_t mscclppPlanReadTbView(struct gpuReader* gr, const json_t* tbj, const char* at, struct tbView* v) {
  struct reader* rd = gr->rd;
  const struct mscclppPlanGpu* g = gr->g;
  json_t* chans;
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadArray(rd, tbj, at, "channels", 0, &chans));
  for (size_t i = 0; chans != NULL && i < json_array_size(chans); i++) {
    char p[320];
    mscclppPlanReadPath(p, sizeof(p), "%s.channels[%zu]", at, i);
    json_t* c = json_array_get(chans, i);
    MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadObject(rd, c, p));
    const char* ts = NULL;
    MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadString(rd, c, p, "channel_type", 1, &ts));
    uint8_t t = 0;
    char q[320];
    mscclppPlanReadJoin(q, sizeof(q), p, "channel_type");
    MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadChannelType(rd, ts, q, 0, &t));
    json_t* ids;
    MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadArray(rd, c, p, "channel_ids", 1, &ids));
    size_t n = json_array_size(ids);
    uint32_t have = t == MSCCLPP_PLAN_CHANNEL_MEMORY ? g->nMemoryChannels : g->nChannels - g->nMemoryChannels;
    uint32_t* grown = (uint32_t*)realloc(v->ch[t], (v->nCh[t] + n + 1) * sizeof(uint32_t));
    if (grown == NULL) return mscclppPlanReadFail(rd, mscclppSystemError, "out of memory");
    v->ch[t] = grown;
    for (size_t k = 0; k < n; k++) {
      mscclppPlanReadPath(q, sizeof(q), "%s.channel_ids[%zu]", p, k);
      uint64_t id = 0;
      MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadWhole(rd, json_array_get(ids, k), q, 0, 65535, &id));
      if (id >= have)
        return FAIL(rd, "%s %llu is out of range: rank %d has %u %s channels", q, (unsigned long long)id, gr->rank,
                    have, mscclppPlanChannelTypeName(t));
      v->ch[t][v->nCh[t]++] = (uint32_t)id + (t == MSCCLPP_PLAN_CHANNEL_PORT ? g->nMemoryChannels : 0);
    }
  }
  json_t* refs;
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadArray(rd, tbj, at, "remote_buffer_refs", 0, &refs));
  for (size_t i = 0; refs != NULL && i < json_array_size(refs); i++) {
    char p[320], q[320];
    mscclppPlanReadPath(p, sizeof(p), "%s.remote_buffer_refs[%zu]", at, i);
    json_t* r = json_array_get(refs, i);
    MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadObject(rd, r, p));
    const char* ts = NULL;
    MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadString(rd, r, p, "access_channel_type", 1, &ts));
    uint8_t t = 0;
    mscclppPlanReadJoin(q, sizeof(q), p, "access_channel_type");
    MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadChannelType(rd, ts, q, 0, &t));
    json_t* ids;
    MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadArray(rd, r, p, "remote_buffer_ids", 1, &ids));
    size_t n = json_array_size(ids);
    uint32_t* grown = (uint32_t*)realloc(v->rb[t], (v->nRb[t] + n + 1) * sizeof(uint32_t));
    if (grown == NULL) return mscclppPlanReadFail(rd, mscclppSystemError, "out of memory");
    v->rb[t] = grown;
    for (size_t k = 0; k < n; k++) {
      mscclppPlanReadPath(q, sizeof(q), "%s.remote_buffer_ids[%zu]", p, k);
      uint64_t id = 0;
      MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadWhole(rd, json_array_get(ids, k), q, 0, 65535, &id));
      if (id >= g->nRemotes)
        return FAIL(rd, "%s %llu is out of range: rank %d has %u remote buffers", q, (unsigned long long)id, gr->rank,
                    g->nRemotes);
      if (!(g->remotes[id].access & (1u << t)))
        return FAIL(rd, "%s: remote buffer %llu of rank %d is not reached over %s channels (its access_channel_types)",
                    q, (unsigned long long)id, gr->rank, mscclppPlanChannelTypeName(t));
      v->rb[t][v->nRb[t]++] = (uint32_t)id;
    }
  }
  return mscclppSuccess;
}

#endif /* MSCCLPP_HAVE_JANSSON */
