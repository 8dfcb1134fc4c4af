/* SPDX-License-Identifier: MIT */
/*
 * The host values of the GPU executor's launch (plan_gpu_launch.h), apart
 * from plan_gpu.c's CUDA code, so that the host play of the kernel
 * (tests/plan/plan_gpu_play.cpp) builds its launches with this very code.
 */
#include <stdint.h>
#include <string.h>

#include "coll/coll.h"
#include "coll/plan/plan.h"
#include "coll/plan/plan_gpu_launch.h"

#define MIN_CAP_CHUNK ((uint64_t)4096)

uint64_t mscclppPlanGpuCapFor(uint64_t cap, uint64_t chunkBytes) {
  if (cap > 0 && chunkBytes <= cap) return cap;
  uint64_t c = 1;
  while (c < chunkBytes) c <<= 1;
  if (c < 2 * cap) c = 2 * cap;
  return c < MIN_CAP_CHUNK ? MIN_CAP_CHUNK : c;
}

/* Spaces of `rank` that its ops may address in the caller's buffers, by
 * the rules both Unstageable and Shareable share: no port channels (the
 * proxy addresses regions by offset); out of place, no input that any rank
 * writes (the caller's input is read-only: a plan that keeps a temporary
 * there stays staged); in place, both or neither (they are one buffer).
 * `peersToo`: a space its peers address may be one too. */
static uint32_t directSpaces(const struct mscclppPlan* plan, int rank, int peersToo) {
  const uint32_t in = 1u << MSCCLPP_PLAN_INPUT, out = 1u << MSCCLPP_PLAN_OUTPUT;
  uint32_t m = in | out;
  for (int q = 0; q < plan->nranks; q++) {
    const struct mscclppPlanGpu* g = &plan->gpus[q];
    if (g->nMemoryChannels < g->nChannels) return 0; /* port channels */
    for (uint32_t j = 0; j < g->nRemotes && !peersToo; j++)
      if (g->remotes[j].rank == rank) m &= ~(1u << g->remotes[j].space);
    for (uint32_t i = 0; i < g->nOps && !plan->inplace; i++)
      for (int d = g->ops[i].nSrc; d < g->ops[i].nSrc + g->ops[i].nDst; d++) {
        const mscclppPlanOperand* o = &g->ops[i].operand[d];
        const int owner = (o->flags & MSCCLPP_PLAN_OPERAND_REMOTE) ? (int)g->remotes[o->remote].rank : q;
        if (owner == rank && o->space == MSCCLPP_PLAN_INPUT) m &= ~in;
      }
  }
  return plan->inplace && m != (in | out) ? 0 : m;
}

/* The spaces of `rank` some peer has a remote buffer in. */
static uint32_t peerAddressed(const struct mscclppPlan* plan, int rank) {
  uint32_t m = 0;
  for (int q = 0; q < plan->nranks; q++)
    for (uint32_t j = 0; j < plan->gpus[q].nRemotes; j++)
      if (plan->gpus[q].remotes[j].rank == rank && plan->gpus[q].remotes[j].space != MSCCLPP_PLAN_SCRATCH)
        m |= 1u << plan->gpus[q].remotes[j].space;
  return m;
}

uint32_t mscclppPlanGpuUnstageable(const struct mscclppPlan* plan, int rank) { return directSpaces(plan, rank, 0); }

uint32_t mscclppPlanGpuShareable(const struct mscclppPlan* plan, int rank) {
  const uint32_t addressed = peerAddressed(plan, rank), m = directSpaces(plan, rank, 1);
  if (addressed == 0) return 0; /* nothing to share: Unstageable says it all */
  /* in place, the input lies in the output: both are shared (m is both or
   * neither), the one allocation mapped once */
  return plan->inplace ? m : m & addressed;
}

int mscclppPlanGpuTrades(const struct mscclppPlan* plan) {
  for (int q = 0; q < plan->nranks; q++) {
    const struct mscclppPlanGpu* g = &plan->gpus[q];
    if (g->nMemoryChannels < g->nChannels) return 0;
  }
  for (int q = 0; q < plan->nranks; q++)
    if (peerAddressed(plan, q) != 0) return 1;
  return 0;
}

uint64_t mscclppPlanGpuRegionBytes(const struct mscclppPlan* plan, int rank, uint64_t capChunk, uint64_t* mailOff) {
  uint64_t off[MSCCLPP_PLAN_SPACES], bytes = 0;
  mscclppPlanRegionLayout(plan, rank, capChunk, capChunk, off, &bytes);
  const uint64_t mail = (bytes + 255) & ~(uint64_t)255;
  if (mailOff != NULL) *mailOff = mail;
  const uint64_t total = mail + MSCCLPP_PLAN_GPU_MAIL_BYTES;
  return total < 4096 ? 4096 : total;
}

void mscclppPlanGpuLaunchCall(const struct mscclppPlan* plan, const struct mscclppPlanGpuRank* who,
                              const struct mscclppPlanSizes* sz, uint64_t capChunk, uint8_t* region,
                              const struct mscclppCollArgs* a, const uint64_t (*shared)[MSCCLPP_PLAN_GPU_MAX_RANKS],
                              struct mscclppPlanGpuLaunch* L) {
  memset(L, 0, sizeof(*L));
  const uint64_t scratchBytes = mscclppPlanScratchBytes(plan, capChunk);
  mscclppPlanCallShapeOf(plan, sz, 1, scratchBytes, &L->shape); /* the kernel sets flag and scratchOffset */
  L->halfScratch = scratchBytes / 2;
  L->doubleScratch = (uint32_t)plan->doubleScratch;
  for (int q = 0; q < who->nranks; q++) {
    uint64_t bytes = 0;
    mscclppPlanRegionLayout(plan, q, capChunk, sz->chunkBytes, L->off[q], &bytes);
  }
  L->linkedMask = who->linkedMask;
  L->send = (const uint8_t*)a->send;
  L->recv = (uint8_t*)a->recv;
  L->blockBytes = sz->blockBytes;
  L->paddedBytes = (uint64_t)plan->chunksPerBlock * sz->chunkBytes;
  L->inBlocks = sz->inBlocks;
  L->outBlocks = sz->outBlocks;
  L->rank = who->rank;
  L->nranks = who->nranks;
  L->type = (int)a->type;
  L->op = (int)(a->op == mscclppAvg ? mscclppSum : a->op);
  L->divide = a->op == mscclppAvg && (a->kind == MSCCLPP_COLL_ALLREDUCE || a->kind == MSCCLPP_COLL_REDUCESCATTER);
  /* the caller's buffers as the ops' input and output where nothing needs
   * the region (or every peer maps them): the same layout (no padding),
   * aligned as the region's */
  const uint32_t in = 1u << MSCCLPP_PLAN_INPUT, out = 1u << MSCCLPP_PLAN_OUTPUT;
  uint32_t share = 0;
  for (int s = 0; s < 2 && shared != NULL; s++) {
    int all = 1;
    for (int q = 0; q < who->nranks; q++)
      if ((who->linkedMask >> q & 1u) && shared[s][q] == 0) all = 0;
    if (all && (who->shareable >> s & 1u)) share |= 1u << s;
  }
  uint32_t direct = who->unstageable | share;
  if (sz->padded || (((uintptr_t)a->send | (uintptr_t)a->recv) & 15) != 0) direct = 0;
  if (L->divide) direct &= ~out;
  if (plan->inplace && direct != (in | out)) direct = 0;
  L->staged = (in | out) & ~direct;
  const uint64_t* off = L->off[who->rank];
  L->mine[MSCCLPP_PLAN_INPUT] = (direct & in) ? (uint8_t*)a->send : region + off[MSCCLPP_PLAN_INPUT];
  L->mine[MSCCLPP_PLAN_OUTPUT] = (direct & out) ? (uint8_t*)a->recv : region + off[MSCCLPP_PLAN_OUTPUT];
  L->mine[MSCCLPP_PLAN_SCRATCH] = region + off[MSCCLPP_PLAN_SCRATCH];
  L->region = region;
  L->trade = (uint32_t)who->trade;
  for (int q = 0; q < who->nranks && who->trade; q++) {
    (void)mscclppPlanGpuRegionBytes(plan, q, capChunk, &L->mailOff[q]);
    for (int s = 0; s < 2; s++)
      if ((direct & share) >> s & 1u) L->pub[q][s] = shared[s][q];
  }
}
