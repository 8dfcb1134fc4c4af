/* SPDX-License-Identifier: MIT */
/*
 * The host values of the GPU executor's launch (plan_gpu_launch.h), apart
 * from plan_gpu.c's CUDA code, so that the host play of the kernel
 * (tests/plan/plan_gpu_play.cpp) builds its launches with this very code.
 */
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

void mscclppPlanGpuLaunchCall(const struct mscclppPlan* plan, const struct mscclppPlanSizes* sz, uint64_t capChunk,
                              int rank, int nranks, uint32_t linkedMask, const struct mscclppCollArgs* a,
                              struct mscclppPlanGpuLaunch* L) {
  memset(L, 0, sizeof(*L));
  const uint64_t scratchBytes = mscclppPlanScratchBytes(plan, capChunk);
  mscclppPlanCallShapeOf(plan, sz, 1, scratchBytes, &L->shape); /* the kernel sets flag and scratchOffset */
  L->halfScratch = scratchBytes / 2;
  L->doubleScratch = (uint32_t)plan->doubleScratch;
  for (int q = 0; q < nranks; q++) {
    uint64_t bytes = 0;
    mscclppPlanRegionLayout(plan, q, capChunk, sz->chunkBytes, L->off[q], &bytes);
  }
  L->linkedMask = linkedMask;
  L->send = (const uint8_t*)a->send;
  L->recv = (uint8_t*)a->recv;
  L->blockBytes = sz->blockBytes;
  L->paddedBytes = (uint64_t)plan->chunksPerBlock * sz->chunkBytes;
  L->inBlocks = sz->inBlocks;
  L->outBlocks = sz->outBlocks;
  L->rank = rank;
  L->nranks = nranks;
  L->type = (int)a->type;
  L->op = (int)(a->op == mscclppAvg ? mscclppSum : a->op);
  L->divide = a->op == mscclppAvg && (a->kind == MSCCLPP_COLL_ALLREDUCE || a->kind == MSCCLPP_COLL_REDUCESCATTER);
}
