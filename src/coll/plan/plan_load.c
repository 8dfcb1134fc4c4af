/* SPDX-License-Identifier: MIT */
/*
 * Reading MSCCL++'s JSON execution plans (plan.h): jansson parses the text,
 * this file checks every field and turns each rank's thread blocks into op
 * records in the program's terms (plan_program.h).
 *
 * The format, as MSCCL++'s DSL (python/mscclpp/language, v0.10) writes it
 * and its executor (src/core/executor/execution_plan.cc) reads it:
 *   { name, collective, protocol: "Simple" | "LL", inplace,
 *     reuse_resources, num_threads_per_block, use_double_scratch_buffer,
 *     buffer_alignment, min_message_size, max_message_size,
 *     gpus: [ { id, input_chunks, output_chunks, scratch_chunks,
 *               channels: [ { channel_type, connected_to: [rank...] } ],
 *               remote_buffers: [ { rank, type, access_channel_types } ],
 *               semaphores: [ { init_value } ],
 *               threadblocks: [ { id, channels: [ { channel_type, channel_ids } ],
 *                                 remote_buffer_refs: [ { access_channel_type, remote_buffer_ids } ],
 *                                 ops: [ { name, ... } ] } ] } ] }
 * An op's channel_ids index its thread block's channels of the op's
 * channel_type; a remote operand's buffer_id indexes its thread block's
 * remote_buffer_refs of that type, which index the rank's remote_buffers;
 * a thread block's channel_ids index the rank's channels of that type in
 * the order of "channels". Chunk indices and sizes count chunks.
 *
 * Numbers are read as doubles (JSON_DECODE_INT_AS_REAL): the DSL writes
 * max_message_size as 2^64 - 1, which jansson's 64-bit signed integers
 * cannot hold; every integer field is then checked to be a whole number in
 * its range (sizes above 2^53 round, which no limit of a message size
 * notices). Unknown fields are ignored, as MSCCL++ ignores them.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/plan/plan.h"
#include "core/error.h"
#include "core/log.h"
#include "mscclpp/packet.h"

static const char* const opNames[MSCCLPP_PLAN_OPS] = {
    [MSCCLPP_PLAN_OP_NOP] = "nop",
    [MSCCLPP_PLAN_OP_BARRIER] = "barrier",
    [MSCCLPP_PLAN_OP_PUT] = "put",
    [MSCCLPP_PLAN_OP_PUT_PACKETS] = "ppkt",
    [MSCCLPP_PLAN_OP_READ_PUT_PACKETS] = "rppkt",
    [MSCCLPP_PLAN_OP_PUT_WITH_SIGNAL] = "pws",
    [MSCCLPP_PLAN_OP_PUT_WITH_SIGNAL_AND_FLUSH] = "pwsf",
    [MSCCLPP_PLAN_OP_GET] = "get",
    [MSCCLPP_PLAN_OP_COPY] = "copy",
    [MSCCLPP_PLAN_OP_COPY_PACKETS] = "cpkt",
    [MSCCLPP_PLAN_OP_UNPACK_PACKETS] = "upkt",
    [MSCCLPP_PLAN_OP_SIGNAL] = "signal",
    [MSCCLPP_PLAN_OP_WAIT] = "wait",
    [MSCCLPP_PLAN_OP_FLUSH] = "flush",
    [MSCCLPP_PLAN_OP_REDUCE] = "re",
    [MSCCLPP_PLAN_OP_REDUCE_PACKETS] = "repkt",
    [MSCCLPP_PLAN_OP_REDUCE_COPY_PACKETS] = "recpkt",
    [MSCCLPP_PLAN_OP_REDUCE_SEND] = "res",
    [MSCCLPP_PLAN_OP_REDUCE_SEND_PACKETS] = "respkt",
    [MSCCLPP_PLAN_OP_REDUCE_COPY_SEND_PACKETS] = "recspkt",
    [MSCCLPP_PLAN_OP_READ_REDUCE] = "rre",
    [MSCCLPP_PLAN_OP_READ_REDUCE_SEND] = "rres",
    [MSCCLPP_PLAN_OP_RELAXED_SIGNAL] = "rlxsignal",
    [MSCCLPP_PLAN_OP_RELAXED_WAIT] = "rlxwait",
    [MSCCLPP_PLAN_OP_PIPELINE] = "pipeline",
    [MSCCLPP_PLAN_OP_SEM_ACQUIRE] = "sem_acquire",
    [MSCCLPP_PLAN_OP_SEM_RELEASE] = "sem_release",
};

static const char* const collectiveNames[MSCCLPP_PLAN_COLLECTIVES] = {
    [MSCCLPP_PLAN_ALLREDUCE] = "allreduce",
    [MSCCLPP_PLAN_ALLGATHER] = "allgather",
    [MSCCLPP_PLAN_REDUCESCATTER] = "reducescatter",
    [MSCCLPP_PLAN_ALLTOALL] = "alltoall",
};

const char* mscclppPlanOpName(mscclppPlanOpCode code) {
  return (unsigned)code < MSCCLPP_PLAN_OPS ? opNames[code] : "unknown";
}

const char* mscclppPlanCollectiveName(mscclppPlanCollective c) {
  return (unsigned)c < MSCCLPP_PLAN_COLLECTIVES ? collectiveNames[c] : "unknown";
}

void mscclppPlanRetain(struct mscclppPlan* plan) { __atomic_add_fetch(&plan->refs, 1, __ATOMIC_RELAXED); }

static void planFree(struct mscclppPlan* plan) {
  for (int r = 0; r < plan->nranks && plan->gpus != NULL; r++) {
    struct mscclppPlanGpu* g = &plan->gpus[r];
    free(g->blocks);
    free(g->ops);
    free(g->channels);
    free(g->remotes);
    free(g->semInit);
  }
  free(plan->gpus);
  free(plan);
}

void mscclppPlanRelease(struct mscclppPlan* plan) {
  if (plan != NULL && __atomic_sub_fetch(&plan->refs, 1, __ATOMIC_ACQ_REL) == 0) planFree(plan);
}

#define MAX_FILE_BYTES ((size_t)256 << 20)

#ifndef MSCCLPP_HAVE_JANSSON

static mscclppResult_t parse(const char* json, size_t len, const char* source, int quiet, struct mscclppPlan** plan) {
  (void)json;
  (void)len;
  (void)plan;
  if (quiet) /* the caller warns */
    return mscclppErrQuiet(mscclppInvalidUsage, MSCCLPP_LOG_COLL,
                           "cannot load execution plan %s: this build of mscclpp has no JSON parser (it was built "
                           "without jansson: install libjansson-dev and rebuild)",
                           source);
  return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_COLL,
                    "cannot load execution plan %s: this build of mscclpp has no JSON parser (it was built without "
                    "jansson: install libjansson-dev and rebuild)",
                    source);
}

mscclppResult_t mscclppPlanParse(const char* json, size_t len, const char* source, struct mscclppPlan** out) {
  return parse(json, len, source, 0, out);
}

#else /* MSCCLPP_HAVE_JANSSON */

#include "coll/plan/plan_read.h"
/* gpus[r]'s channels, remote buffers and semaphores (first pass: every
 * rank's, before any thread block, so that operands can check a peer's chunks). */
static mscclppResult_t readGpuTables(struct reader* rd, const json_t* gj, int r) {
  struct mscclppPlan* plan = rd->plan;
  struct mscclppPlanGpu* g = &plan->gpus[r];
  char at[64], p[320], q[320];
  mscclppPlanReadPath(at, sizeof(at), "gpus[%d]", r);
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadObject(rd, gj, at));
  uint32_t id = 0;
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadU32(rd, gj, at, "id", 1, 0, 0, MSCCLPP_PLAN_MAX_RANKS, &id));
  if ((int)id != r) return FAIL(rd, "%s.id is %u: the gpus are listed in rank order, so it must be %d", at, id, r);
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadU32(rd, gj, at, "input_chunks", 1, 0, 0, INT32_MAX, &g->inputChunks));
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadU32(rd, gj, at, "output_chunks", 1, 0, 0, INT32_MAX, &g->outputChunks));
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadU32(rd, gj, at, "scratch_chunks", 1, 0, 0, INT32_MAX, &g->scratchChunks));

  /* channels: memory first, then port, each in the order listed */
  json_t* chans;
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadArray(rd, gj, at, "channels", 1, &chans));
  size_t total = 0;
  for (size_t i = 0; i < json_array_size(chans); i++) {
    mscclppPlanReadPath(p, sizeof(p), "%s.channels[%zu]", at, i);
    json_t* c = json_array_get(chans, i);
    MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadObject(rd, c, p));
    const char* ts = NULL;
    MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadString(rd, c, p, "channel_type", 1, &ts));
    uint8_t t = 0;
    mscclppPlanReadJoin(q, sizeof(q), p, "channel_type");
    MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadChannelType(rd, ts, q, 0, &t));
    json_t* to;
    MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadArray(rd, c, p, "connected_to", 1, &to));
    total += json_array_size(to);
  }
  if (total > 65535) return FAIL(rd, "%s has %zu channels, more than the executor takes (65535)", at, total);
  g->channels = (mscclppPlanChannel*)calloc(total + 1, sizeof(*g->channels));
  if (g->channels == NULL) return mscclppPlanReadFail(rd, mscclppSystemError, "out of memory");
  for (int pass = MSCCLPP_PLAN_CHANNEL_MEMORY; pass <= MSCCLPP_PLAN_CHANNEL_PORT; pass++) {
    uint32_t typeIndex = 0;
    for (size_t i = 0; i < json_array_size(chans); i++) {
      json_t* c = json_array_get(chans, i);
      uint8_t t = strcmp(json_string_value(json_object_get(c, "channel_type")), "memory") == 0
                      ? MSCCLPP_PLAN_CHANNEL_MEMORY
                      : MSCCLPP_PLAN_CHANNEL_PORT;
      if (t != pass) continue;
      json_t* to = json_object_get(c, "connected_to");
      for (size_t k = 0; k < json_array_size(to); k++) {
        mscclppPlanReadPath(q, sizeof(q), "%s.channels[%zu].connected_to[%zu]", at, i, k);
        uint64_t peer = 0;
        MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadWhole(rd, json_array_get(to, k), q, 0, 1e9, &peer));
        if (peer >= (uint64_t)plan->nranks)
          return FAIL(rd, "%s %llu is out of range: the plan has %d ranks", q, (unsigned long long)peer, plan->nranks);
        mscclppPlanChannel* ch = &g->channels[g->nChannels];
        ch->type = t;
        ch->typeIndex = (uint16_t)typeIndex++;
        ch->peer = (int32_t)peer;
        for (uint32_t j = 0; j < g->nChannels; j++)
          if (g->channels[j].type == t && g->channels[j].peer == (int32_t)peer) ch->pairIndex++;
        g->nChannels++;
      }
    }
    if (pass == MSCCLPP_PLAN_CHANNEL_MEMORY) g->nMemoryChannels = g->nChannels;
  }

  json_t* rbs;
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadArray(rd, gj, at, "remote_buffers", 1, &rbs));
  size_t nrb = json_array_size(rbs);
  if (nrb > 65535) return FAIL(rd, "%s.remote_buffers has %zu entries, more than the executor takes (65535)", at, nrb);
  g->remotes = (mscclppPlanRemote*)calloc(nrb + 1, sizeof(*g->remotes));
  if (g->remotes == NULL) return mscclppPlanReadFail(rd, mscclppSystemError, "out of memory");
  for (size_t i = 0; i < nrb; i++) {
    mscclppPlanReadPath(p, sizeof(p), "%s.remote_buffers[%zu]", at, i);
    json_t* b = json_array_get(rbs, i);
    MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadObject(rd, b, p));
    mscclppPlanRemote* rem = &g->remotes[i];
    uint64_t rank = 0;
    MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadWholeField(rd, b, p, "rank", 1, 0, 0, 1e9, &rank));
    if (rank >= (uint64_t)plan->nranks)
      return FAIL(rd, "%s.rank %llu is out of range: the plan has %d ranks", p, (unsigned long long)rank, plan->nranks);
    rem->rank = (int32_t)rank;
    const char* type = NULL;
    MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadString(rd, b, p, "type", 1, &type));
    mscclppPlanReadJoin(q, sizeof(q), p, "type");
    MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadSpace(rd, type, q, &rem->space));
    json_t* acc;
    MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadArray(rd, b, p, "access_channel_types", 1, &acc));
    if (json_array_size(acc) == 0) return FAIL(rd, "%s.access_channel_types is empty", p);
    for (size_t k = 0; k < json_array_size(acc); k++) {
      mscclppPlanReadPath(q, sizeof(q), "%s.access_channel_types[%zu]", p, k);
      json_t* a = json_array_get(acc, k);
      char bb[64];
      if (!json_is_string(a))
        return FAIL(rd, "%s must be a string, got %s", q, mscclppPlanReadDescribe(a, bb, sizeof(bb)));
      uint8_t t = 0;
      MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadChannelType(rd, json_string_value(a), q, 0, &t));
      rem->access |= (uint8_t)(1u << t);
    }
    g->nRemotes++;
  }

  json_t* sems;
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadArray(rd, gj, at, "semaphores", 0, &sems));
  size_t ns = sems != NULL ? json_array_size(sems) : 0;
  if (ns > 65535) return FAIL(rd, "%s.semaphores has %zu entries, more than the executor takes (65535)", at, ns);
  g->semInit = (uint32_t*)calloc(ns + 1, sizeof(uint32_t));
  if (g->semInit == NULL) return mscclppPlanReadFail(rd, mscclppSystemError, "out of memory");
  for (size_t i = 0; i < ns; i++) {
    mscclppPlanReadPath(p, sizeof(p), "%s.semaphores[%zu]", at, i);
    json_t* s = json_array_get(sems, i);
    MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadObject(rd, s, p));
    MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadU32(rd, s, p, "init_value", 1, 0, 0, INT32_MAX, &g->semInit[i]));
    g->nSemaphores++;
  }
  return mscclppSuccess;
}

/* Check that each barrier's thread blocks can all meet. */
static mscclppResult_t checkBarriers(struct gpuReader* gr) {
  const uint32_t nb = gr->g->nBlocks;
  for (uint32_t b = 0; b < gr->g->nBarriers; b++) {
    if (gr->barrierBlocks[b] == 0) continue;
    uint32_t users = 0, uses = 0;
    int uneven = 0;
    for (uint32_t t = 0; t < nb; t++) {
      uint32_t u = gr->barrierUses[(size_t)b * nb + t];
      if (u == 0) continue;
      if (uses != 0 && u != uses) uneven = 1;
      uses = u;
      users++;
    }
    if (gr->barrierPipelined[b]) continue; /* uses inside pipelines depend on the message size */
    if (users != gr->barrierBlocks[b])
      return FAIL(gr->rd,
                  "gpus[%d]: barrier %u waits for num_threadblocks %u thread blocks but %u of rank %d's thread "
                  "blocks use it: it would never complete",
                  gr->rank, b, gr->barrierBlocks[b], users, gr->rank);
    if (uneven)
      return FAIL(gr->rd, "gpus[%d]: the thread blocks of barrier %u do not all pass it the same number of times",
                  gr->rank, b);
  }
  return mscclppSuccess;
}

/* gpus[r]'s thread blocks (second pass). */
static mscclppResult_t readGpuBlocks(struct reader* rd, const json_t* gj, int r) {
  struct mscclppPlan* plan = rd->plan;
  struct mscclppPlanGpu* g = &plan->gpus[r];
  char at[64];
  mscclppPlanReadPath(at, sizeof(at), "gpus[%d]", r);
  json_t* tbs;
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadArray(rd, gj, at, "threadblocks", 1, &tbs));
  size_t n = json_array_size(tbs);
  if (n > 65535) return FAIL(rd, "%s.threadblocks has %zu entries, more than the executor takes (65535)", at, n);
  g->nBlocks = (uint32_t)n;
  g->blocks = (mscclppPlanBlock*)calloc(n + 1, sizeof(*g->blocks));
  struct gpuReader gr = {rd, r, g, 0, {0}, NULL, {0}};
  gr.barrierUses = (uint32_t*)calloc((size_t)MSCCLPP_PLAN_MAX_BARRIERS * (n + 1), sizeof(uint32_t));
  if (g->blocks == NULL || gr.barrierUses == NULL) {
    free(gr.barrierUses);
    return mscclppPlanReadFail(rd, mscclppSystemError, "out of memory");
  }
  mscclppResult_t res = mscclppSuccess;
  for (size_t t = 0; t < n && res == mscclppSuccess; t++) {
    char p[320];
    mscclppPlanReadPath(p, sizeof(p), "%s.threadblocks[%zu]", at, t);
    json_t* tbj = json_array_get(tbs, t);
    res = mscclppPlanReadObject(rd, tbj, p);
    uint32_t id = 0;
    if (res == mscclppSuccess) res = mscclppPlanReadU32(rd, tbj, p, "id", 1, 0, 0, 65535, &id);
    if (res == mscclppSuccess && id != t)
      res = FAIL(rd, "%s.id is %u: thread blocks are listed in id order, so it must be %zu", p, id, t);
    struct tbView v;
    memset(&v, 0, sizeof(v));
    if (res == mscclppSuccess) res = mscclppPlanReadTbView(&gr, tbj, p, &v);
    json_t* ops = NULL;
    if (res == mscclppSuccess) res = mscclppPlanReadArray(rd, tbj, p, "ops", 1, &ops);
    g->blocks[t].firstOp = g->nOps;
    for (size_t i = 0; res == mscclppSuccess && i < json_array_size(ops); i++) {
      char q[320];
      mscclppPlanReadPath(q, sizeof(q), "%s.ops[%zu]", p, i);
      res = mscclppPlanReadOp(&gr, &v, (uint32_t)t, json_array_get(ops, i), q, 0);
    }
    g->blocks[t].nOps = g->nOps - g->blocks[t].firstOp;
    mscclppPlanTbViewFree(&v);
  }
  if (res == mscclppSuccess) res = checkBarriers(&gr);
  free(gr.barrierUses);
  return res;
}

/* ---- across ranks: signals meet waits ----------------------------------------- */

/* Signals sent and waits made on each channel of each rank, outside
 * pipelines; a channel used inside a pipeline is not checked (its count
 * depends on the message size). Channel i of rank a to b pairs with the
 * channel of b to a of the same type and pair index (plan_program.h). */
static mscclppResult_t checkSignals(struct reader* rd) {
  struct mscclppPlan* plan = rd->plan;
  const int n = plan->nranks;
  uint64_t** sig = (uint64_t**)calloc((size_t)n, sizeof(uint64_t*));
  uint64_t** wt = (uint64_t**)calloc((size_t)n, sizeof(uint64_t*));
  uint8_t** piped = (uint8_t**)calloc((size_t)n, sizeof(uint8_t*));
  mscclppResult_t res = mscclppSuccess;
  if (sig == NULL || wt == NULL || piped == NULL) res = mscclppPlanReadFail(rd, mscclppSystemError, "out of memory");
  for (int r = 0; r < n && res == mscclppSuccess; r++) {
    const struct mscclppPlanGpu* g = &plan->gpus[r];
    sig[r] = (uint64_t*)calloc(g->nChannels + 1, sizeof(uint64_t));
    wt[r] = (uint64_t*)calloc(g->nChannels + 1, sizeof(uint64_t));
    piped[r] = (uint8_t*)calloc(g->nChannels + 1, 1);
    if (sig[r] == NULL || wt[r] == NULL || piped[r] == NULL) {
      res = mscclppPlanReadFail(rd, mscclppSystemError, "out of memory");
      break;
    }
    for (uint32_t b = 0; b < g->nBlocks; b++) {
      uint32_t end = g->blocks[b].firstOp + g->blocks[b].nOps, pipeEnd = 0;
      for (uint32_t i = g->blocks[b].firstOp; i < end; i++) {
        const mscclppPlanOp* op = &g->ops[i];
        if (op->code == MSCCLPP_PLAN_OP_PIPELINE) pipeEnd = i + 1 + op->nInner;
        const int inPipe = i < pipeEnd;
        int isSig = op->code == MSCCLPP_PLAN_OP_SIGNAL || op->code == MSCCLPP_PLAN_OP_RELAXED_SIGNAL ||
                    op->code == MSCCLPP_PLAN_OP_PUT_WITH_SIGNAL ||
                    op->code == MSCCLPP_PLAN_OP_PUT_WITH_SIGNAL_AND_FLUSH;
        int isWait = op->code == MSCCLPP_PLAN_OP_WAIT || op->code == MSCCLPP_PLAN_OP_RELAXED_WAIT;
        if (!isSig && !isWait) continue;
        for (int k = 0; k < op->nIds; k++) {
          if (inPipe) piped[r][op->ids[k]] = 1;
          (isSig ? sig : wt)[r][op->ids[k]]++;
        }
      }
    }
  }
  for (int a = 0; a < n && res == mscclppSuccess; a++) {
    const struct mscclppPlanGpu* ga = &plan->gpus[a];
    for (uint32_t i = 0; i < ga->nChannels && res == mscclppSuccess; i++) {
      const mscclppPlanChannel* ca = &ga->channels[i];
      if (sig[a][i] == 0 || piped[a][i]) continue;
      /* its counterpart on the peer */
      const struct mscclppPlanGpu* gb = &plan->gpus[ca->peer];
      uint64_t waits = 0;
      int found = 0;
      for (uint32_t j = 0; j < gb->nChannels; j++) {
        const mscclppPlanChannel* cb = &gb->channels[j];
        if (cb->type == ca->type && cb->peer == a && cb->pairIndex == ca->pairIndex) {
          if (piped[ca->peer][j])
            found = 2;
          else
            found = 1, waits = wt[ca->peer][j];
        }
      }
      if (found == 2) continue;
      if (waits != sig[a][i])
        res = FAIL(rd,
                   "rank %d signals rank %d %llu times on its %s channel %u (channel number %u to rank %d), but rank "
                   "%d waits %llu times on its counterpart: a wait would never end, or signals would pile up",
                   a, ca->peer, (unsigned long long)sig[a][i], mscclppPlanChannelTypeName(ca->type), ca->typeIndex,
                   ca->pairIndex, ca->peer, ca->peer, (unsigned long long)waits);
    }
    /* waits with no signal on the other side at all */
    for (uint32_t i = 0; i < ga->nChannels && res == mscclppSuccess; i++) {
      const mscclppPlanChannel* ca = &ga->channels[i];
      if (wt[a][i] == 0 || piped[a][i]) continue;
      const struct mscclppPlanGpu* gb = &plan->gpus[ca->peer];
      int found = 0;
      for (uint32_t j = 0; j < gb->nChannels; j++) {
        const mscclppPlanChannel* cb = &gb->channels[j];
        if (cb->type == ca->type && cb->peer == a && cb->pairIndex == ca->pairIndex) found = 1;
      }
      if (!found)
        res = FAIL(rd,
                   "rank %d waits on its %s channel %u to rank %d, but rank %d has no %s channel to rank %d to "
                   "signal it (it has fewer than %u): the wait would never end",
                   a, mscclppPlanChannelTypeName(ca->type), ca->typeIndex, ca->peer, ca->peer,
                   mscclppPlanChannelTypeName(ca->type), a, ca->pairIndex + 1);
    }
  }
  for (int r = 0; r < n; r++) {
    if (sig != NULL) free(sig[r]);
    if (wt != NULL) free(wt[r]);
    if (piped != NULL) free(piped[r]);
  }
  free(sig);
  free(wt);
  free(piped);
  return res;
}

/* ---- the top ---------------------------------------------------------------------- */

/* Blocks of the input and the output of a collective on n ranks. */
static void blocksOf(mscclppPlanCollective c, int n, uint32_t* in, uint32_t* out) {
  *in = (c == MSCCLPP_PLAN_REDUCESCATTER || c == MSCCLPP_PLAN_ALLTOALL) ? (uint32_t)n : 1;
  *out = (c == MSCCLPP_PLAN_ALLGATHER || c == MSCCLPP_PLAN_ALLTOALL) ? (uint32_t)n : 1;
}

static mscclppResult_t readTop(struct reader* rd, const json_t* top) {
  struct mscclppPlan* plan = rd->plan;
  char b[64];
  if (!json_is_object(top))
    return FAIL(rd, "the plan must be a JSON object, got %s", mscclppPlanReadDescribe(top, b, sizeof(b)));
  const char* s = NULL;
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadString(rd, top, "", "name", 1, &s));
  if (strlen(s) == 0 || strlen(s) >= sizeof(plan->name))
    return FAIL(rd, "name must have 1 to %zu characters (it has %zu)", sizeof(plan->name) - 1, strlen(s));
  snprintf(plan->name, sizeof(plan->name), "%s", s);
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadString(rd, top, "", "collective", 1, &s));
  int c = -1;
  for (int k = 0; k < MSCCLPP_PLAN_COLLECTIVES; k++)
    if (strcmp(s, collectiveNames[k]) == 0) c = k;
  if (c < 0)
    return FAIL(rd, "collective \"%s\" is not one the executor runs (allreduce, allgather, reducescatter, alltoall)",
                s);
  plan->collective = (mscclppPlanCollective)c;
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadString(rd, top, "", "protocol", 1, &s));
  if (strcmp(s, "Simple") == 0)
    plan->protocol = MSCCLPP_PLAN_SIMPLE;
  else if (strcmp(s, "LL") == 0)
    plan->protocol = MSCCLPP_PLAN_LL;
  else
    return FAIL(rd, "protocol \"%s\" is not \"Simple\" or \"LL\"", s);
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadBool(rd, top, "", "inplace", 1, 0, &plan->inplace));
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadBool(rd, top, "", "reuse_resources", 0, 0, &plan->reuseResources));
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadBool(rd, top, "", "use_double_scratch_buffer", 0, 0, &plan->doubleScratch));
  MSCCLPP_RETURN_ON_ERROR(
      mscclppPlanReadU32(rd, top, "", "num_threads_per_block", 0, 1024, 1, 1024, &plan->threadsPerBlock));
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadU32(rd, top, "", "buffer_alignment", 0, 16, 1, 1u << 20, &plan->alignment));
  if ((plan->alignment & (plan->alignment - 1)) != 0)
    return FAIL(rd, "buffer_alignment %u is not a power of two", plan->alignment);
  if (plan->protocol == MSCCLPP_PLAN_LL && plan->alignment < MSCCLPP_LL16_DATA_BYTES)
    return FAIL(rd, "buffer_alignment %u is less than the %u data bytes of an LL packet", plan->alignment,
                MSCCLPP_LL16_DATA_BYTES);
  MSCCLPP_RETURN_ON_ERROR(
      mscclppPlanReadWholeField(rd, top, "", "min_message_size", 0, 0, 0, 1.9e19, &plan->minMessageBytes));
  MSCCLPP_RETURN_ON_ERROR(
      mscclppPlanReadWholeField(rd, top, "", "max_message_size", 0, UINT64_MAX, 0, 1.9e19, &plan->maxMessageBytes));
  if (plan->minMessageBytes > plan->maxMessageBytes)
    return FAIL(rd, "min_message_size %llu is more than max_message_size %llu",
                (unsigned long long)plan->minMessageBytes, (unsigned long long)plan->maxMessageBytes);

  json_t* gpus;
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadArray(rd, top, "", "gpus", 1, &gpus));
  size_t n = json_array_size(gpus);
  if (n == 0 || n > MSCCLPP_PLAN_MAX_RANKS)
    return FAIL(rd, "gpus has %zu entries; a plan is for 1 to %d ranks", n, MSCCLPP_PLAN_MAX_RANKS);
  plan->gpus = (struct mscclppPlanGpu*)calloc(n, sizeof(*plan->gpus));
  if (plan->gpus == NULL) return mscclppPlanReadFail(rd, mscclppSystemError, "out of memory");
  plan->nranks = (int)n;
  for (size_t r = 0; r < n; r++) MSCCLPP_RETURN_ON_ERROR(readGpuTables(rd, json_array_get(gpus, r), (int)r));

  /* every rank's blocks of the collective are cut into the same k chunks */
  uint32_t inBlocks, outBlocks;
  blocksOf(plan->collective, (int)n, &inBlocks, &outBlocks);
  for (size_t r = 0; r < n; r++) {
    const struct mscclppPlanGpu* g = &plan->gpus[r];
    if (g->inputChunks == 0 || g->outputChunks == 0 || g->inputChunks % inBlocks != 0 ||
        g->outputChunks % outBlocks != 0 || g->inputChunks / inBlocks != g->outputChunks / outBlocks)
      return FAIL(rd,
                  "gpus[%zu]: input_chunks %u and output_chunks %u do not cut %s's blocks (%u of the input, %u of "
                  "the output on %zu ranks) into the same number of chunks",
                  r, g->inputChunks, g->outputChunks, collectiveNames[plan->collective], inBlocks, outBlocks, n);
    uint32_t k = g->inputChunks / inBlocks;
    if (r > 0 && k != plan->chunksPerBlock)
      return FAIL(rd, "gpus[%zu] cuts each block into %u chunks but gpus[0] into %u: all ranks must agree", r, k,
                  plan->chunksPerBlock);
    plan->chunksPerBlock = k;
  }
  for (size_t r = 0; r < n; r++) {
    MSCCLPP_RETURN_ON_ERROR(readGpuBlocks(rd, json_array_get(gpus, r), (int)r));
    if (plan->gpus[r].nBlocks > plan->maxBlocks) plan->maxBlocks = plan->gpus[r].nBlocks;
    if (plan->gpus[r].scratchChunks > plan->maxScratchChunks) plan->maxScratchChunks = plan->gpus[r].scratchChunks;
  }
  return checkSignals(rd);
}

static mscclppResult_t parse(const char* json, size_t len, const char* source, int quiet, struct mscclppPlan** out) {
  struct reader rd = {source, NULL, 0, quiet};
  json_error_t jerr;
  json_t* top = json_loadb(json, len, JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL, &jerr);
  if (top == NULL)
    return mscclppPlanReadFail(&rd, mscclppInvalidArgument, "not valid JSON: line %d, column %d: %s", jerr.line,
                               jerr.column, jerr.text);
  struct mscclppPlan* plan = (struct mscclppPlan*)calloc(1, sizeof(*plan));
  if (plan == NULL) {
    json_decref(top);
    return mscclppPlanReadFail(&rd, mscclppSystemError, "out of memory");
  }
  plan->refs = 1;
  snprintf(plan->source, sizeof(plan->source), "%s", source);
  rd.plan = plan;
  mscclppResult_t res = readTop(&rd, top);
  json_decref(top);
  if (res != mscclppSuccess) {
    planFree(plan);
    return res;
  }
  *out = plan;
  return mscclppSuccess;
}

mscclppResult_t mscclppPlanParse(const char* json, size_t len, const char* source, struct mscclppPlan** out) {
  return parse(json, len, source, 0, out);
}

#endif /* MSCCLPP_HAVE_JANSSON */

static mscclppResult_t parseFile(const char* path, int quiet, struct mscclppPlan** plan) {
  FILE* f = fopen(path, "rb");
  if (f == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_COLL, "cannot read execution plan %s: %s", path,
                      strerror(errno));
  char* buf = NULL;
  size_t len = 0, cap = 0;
  mscclppResult_t res = mscclppSuccess;
  for (;;) {
    if (len == cap) {
      if (cap >= MAX_FILE_BYTES) {
        res = mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_COLL,
                         "execution plan %s is larger than %zu MiB, more than a plan can need", path,
                         MAX_FILE_BYTES >> 20);
        break;
      }
      cap = cap == 0 ? 65536 : cap * 2;
      char* grown = (char*)realloc(buf, cap);
      if (grown == NULL) {
        res = mscclppErr(mscclppSystemError, MSCCLPP_LOG_COLL, "out of memory reading execution plan %s", path);
        break;
      }
      buf = grown;
    }
    size_t got = fread(buf + len, 1, cap - len, f);
    len += got;
    if (got == 0) {
      if (ferror(f))
        res = mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_COLL, "cannot read execution plan %s: %s", path,
                         strerror(errno));
      break;
    }
  }
  fclose(f);
  if (res == mscclppSuccess) res = parse(buf, len, path, quiet, plan);
  free(buf);
  return res;
}

mscclppResult_t mscclppPlanParseFile(const char* path, struct mscclppPlan** plan) { return parseFile(path, 0, plan); }

mscclppResult_t mscclppPlanParseFileQuiet(const char* path, struct mscclppPlan** plan) {
  return parseFile(path, 1, plan);
}
