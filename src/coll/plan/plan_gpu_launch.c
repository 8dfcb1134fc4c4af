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

uint32_t mscclppPlanGpuUnstageable(const struct mscclppPlan* plan, int rank) {
  uint32_t m = 1u << MSCCLPP_PLAN_INPUT | 1u << MSCCLPP_PLAN_OUTPUT;
  for (int q = 0; q < plan->nranks; q++) {
    const struct mscclppPlanGpu* g = &plan->gpus[q];
    if (g->nMemoryChannels < g->nChannels) return 0; /* port channels */
    for (uint32_t j = 0; j < g->nRemotes; j++)
      if (g->remotes[j].rank == rank) m &= ~(1u << g->remotes[j].space);
  }
  /* out of place, the caller's input is read-only: a plan that writes its
   * input area (a temporary there) keeps it staged */
  const struct mscclppPlanGpu* g = &plan->gpus[rank];
  for (uint32_t i = 0; i < g->nOps && !plan->inplace; i++)
    for (int d = g->ops[i].nSrc; d < g->ops[i].nSrc + g->ops[i].nDst; d++) {
      const mscclppPlanOperand* o = &g->ops[i].operand[d];
      if (!(o->flags & MSCCLPP_PLAN_OPERAND_REMOTE) && o->space == MSCCLPP_PLAN_INPUT)
        m &= ~(1u << MSCCLPP_PLAN_INPUT);
    }
  const uint32_t both = 1u << MSCCLPP_PLAN_INPUT | 1u << MSCCLPP_PLAN_OUTPUT;
  return plan->inplace && (m & both) != both ? 0 : m & both;
}

void mscclppPlanGpuLaunchCall(const struct mscclppPlan* plan, const struct mscclppPlanGpuRank* who,
                              const struct mscclppPlanSizes* sz, uint64_t capChunk, uint8_t* region,
                              const struct mscclppCollArgs* a, struct mscclppPlanGpuLaunch* L) {
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
   * the region: the same layout (no padding), aligned as the region's */
  const uint32_t in = 1u << MSCCLPP_PLAN_INPUT, out = 1u << MSCCLPP_PLAN_OUTPUT;
  uint32_t direct = who->unstageable;
  if (sz->padded || (((uintptr_t)a->send | (uintptr_t)a->recv) & 15) != 0) direct = 0;
  if (L->divide) direct &= ~out;
  if (plan->inplace && direct != (in | out)) direct = 0;
  L->staged = (in | out) & ~direct;
  const uint64_t* off = L->off[who->rank];
  L->mine[MSCCLPP_PLAN_INPUT] = (direct & in) ? (uint8_t*)a->send : region + off[MSCCLPP_PLAN_INPUT];
  L->mine[MSCCLPP_PLAN_OUTPUT] = (direct & out) ? (uint8_t*)a->recv : region + off[MSCCLPP_PLAN_OUTPUT];
  L->mine[MSCCLPP_PLAN_SCRATCH] = region + off[MSCCLPP_PLAN_SCRATCH];
}
