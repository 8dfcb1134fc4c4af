/* SPDX-License-Identifier: MIT */
/*
 * Programs (plan_program.h) from loaded plans, and the sizes of one call:
 * how its message maps onto the plan's chunks (plan.h).
 */
#include <stdlib.h>
#include <string.h>

#include "coll/plan/plan.h"
#include "core/error.h"
#include "core/log.h"

/* MSCCL++'s scratch buffer for plans with reuse_resources (its
 * PREDFINED_SCRATCH_SIZE): their scratch chunks are cut from it. */
#define REUSE_SCRATCH_BYTES ((uint64_t)64 << 20)

static uint64_t alignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

mscclppResult_t mscclppPlanProgramBuild(const struct mscclppPlan* plan, int rank, mscclppPlanProgram** out) {
  if (rank < 0 || rank >= plan->nranks)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_COLL,
                      "execution plan %s is for %d ranks; there is no rank %d", plan->name, plan->nranks, rank);
  const struct mscclppPlanGpu* g = &plan->gpus[rank];
  size_t off = sizeof(mscclppPlanProgram);
  const size_t blocksOff = off;
  off = alignUp(off + (size_t)g->nBlocks * sizeof(mscclppPlanBlock), 8);
  const size_t opsOff = off;
  off = alignUp(off + (size_t)g->nOps * sizeof(mscclppPlanOp), 8);
  const size_t chOff = off;
  off = alignUp(off + (size_t)g->nChannels * sizeof(mscclppPlanChannel), 8);
  const size_t remOff = off;
  off = alignUp(off + (size_t)g->nRemotes * sizeof(mscclppPlanRemote), 8);
  const size_t semOff = off;
  off = alignUp(off + (size_t)g->nSemaphores * sizeof(uint32_t), 8);
  if (off > UINT32_MAX)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_COLL,
                      "execution plan %s: rank %d's program would be %zu bytes, more than 4 GiB", plan->name, rank,
                      off);
  uint8_t* mem = (uint8_t*)calloc(1, off);
  if (mem == NULL)
    return mscclppErr(mscclppSystemError, MSCCLPP_LOG_COLL, "out of memory for a program of %zu bytes", off);
  mscclppPlanProgram* p = (mscclppPlanProgram*)mem;
  p->magic = MSCCLPP_PLAN_PROGRAM_MAGIC;
  p->version = MSCCLPP_PLAN_PROGRAM_VERSION;
  p->bytes = (uint32_t)off;
  p->rank = rank;
  p->nranks = plan->nranks;
  p->collective = (uint8_t)plan->collective;
  p->protocol = (uint8_t)plan->protocol;
  p->flags = (uint8_t)((plan->inplace ? MSCCLPP_PLAN_FLAG_INPLACE : 0) |
                       (plan->reuseResources ? MSCCLPP_PLAN_FLAG_REUSE_SCRATCH : 0) |
                       (plan->doubleScratch ? MSCCLPP_PLAN_FLAG_DOUBLE_SCRATCH : 0));
  p->threadsPerBlock = plan->threadsPerBlock;
  p->alignment = plan->alignment;
  p->inputChunks = g->inputChunks;
  p->outputChunks = g->outputChunks;
  p->scratchChunks = g->scratchChunks;
  p->chunksPerBlock = plan->chunksPerBlock;
  p->nBlocks = g->nBlocks;
  p->nOps = g->nOps;
  p->nChannels = g->nChannels;
  p->nRemotes = g->nRemotes;
  p->nSemaphores = g->nSemaphores;
  p->nBarriers = g->nBarriers;
  p->blocksOffset = (uint32_t)blocksOff;
  p->opsOffset = (uint32_t)opsOff;
  p->channelsOffset = (uint32_t)chOff;
  p->remotesOffset = (uint32_t)remOff;
  p->semaphoresOffset = (uint32_t)semOff;
  p->scratchChunksAll = plan->maxScratchChunks;
  p->minMessageBytes = plan->minMessageBytes;
  p->maxMessageBytes = plan->maxMessageBytes;
  if (g->nBlocks) memcpy(mem + blocksOff, g->blocks, (size_t)g->nBlocks * sizeof(mscclppPlanBlock));
  if (g->nOps) memcpy(mem + opsOff, g->ops, (size_t)g->nOps * sizeof(mscclppPlanOp));
  if (g->nChannels) memcpy(mem + chOff, g->channels, (size_t)g->nChannels * sizeof(mscclppPlanChannel));
  if (g->nRemotes) memcpy(mem + remOff, g->remotes, (size_t)g->nRemotes * sizeof(mscclppPlanRemote));
  if (g->nSemaphores) memcpy(mem + semOff, g->semInit, (size_t)g->nSemaphores * sizeof(uint32_t));
  *out = p;
  return mscclppSuccess;
}

/* ---- sizes ------------------------------------------------------------------ */

static void blocksOf(const struct mscclppPlan* plan, int n, uint32_t* in, uint32_t* out) {
  mscclppPlanCollective c = plan->collective;
  *in = (c == MSCCLPP_PLAN_REDUCESCATTER || c == MSCCLPP_PLAN_ALLTOALL) ? (uint32_t)n : 1;
  *out = (c == MSCCLPP_PLAN_ALLGATHER || c == MSCCLPP_PLAN_ALLTOALL) ? (uint32_t)n : 1;
}

uint64_t mscclppPlanMessageBytes(const struct mscclppPlan* plan, int n, uint64_t blockBytes) {
  uint32_t in, out;
  blocksOf(plan, n, &in, &out);
  return (plan->collective == MSCCLPP_PLAN_ALLGATHER ? out : in) * blockBytes;
}

int mscclppPlanAcceptsBytes(const struct mscclppPlan* plan, int nranks, uint64_t blockBytes) {
  uint64_t m = mscclppPlanMessageBytes(plan, nranks, blockBytes);
  return m >= plan->minMessageBytes && m <= plan->maxMessageBytes;
}

mscclppResult_t mscclppPlanSizesOf(const struct mscclppPlan* plan, int nranks, size_t count, size_t typeSize,
                                   struct mscclppPlanSizes* s) {
  memset(s, 0, sizeof(*s));
  blocksOf(plan, nranks, &s->inBlocks, &s->outBlocks);
  s->blockBytes = (uint64_t)count * typeSize;
  s->inputBytes = s->inBlocks * s->blockBytes;
  s->outputBytes = s->outBlocks * s->blockBytes;
  s->messageBytes = mscclppPlanMessageBytes(plan, nranks, s->blockBytes);
  if (s->messageBytes < plan->minMessageBytes || s->messageBytes > plan->maxMessageBytes)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_COLL,
                      "execution plan %s takes messages of %llu to %llu bytes (%s); this call has %llu", plan->name,
                      (unsigned long long)plan->minMessageBytes, (unsigned long long)plan->maxMessageBytes,
                      plan->collective == MSCCLPP_PLAN_ALLGATHER ? "the output's bytes" : "the input's bytes",
                      (unsigned long long)s->messageBytes);
  s->granule = plan->alignment > typeSize ? plan->alignment : typeSize;
  const uint64_t k = plan->chunksPerBlock;
  if (s->blockBytes % (k * s->granule) == 0) {
    s->chunkBytes = s->blockBytes / k;
  } else {
    s->chunkBytes = alignUp((s->blockBytes + k - 1) / k, s->granule);
    s->padded = 1;
  }
  return mscclppSuccess;
}

/* MSCCL++'s scratch chunk size with reuse_resources (calMaxScratchChunkSize),
 * from the largest scratch of any rank so that every rank agrees on where a
 * peer's scratch chunk is (MSCCL++ uses each rank's own, the same for the
 * symmetric plans its DSL writes). 0 without reuse_resources. */
static uint64_t reuseChunkBytes(const struct mscclppPlan* plan) {
  if (!plan->reuseResources || plan->maxScratchChunks == 0) return 0;
  uint64_t bytes = plan->doubleScratch ? REUSE_SCRATCH_BYTES / 2 : REUSE_SCRATCH_BYTES;
  return alignUp((bytes + plan->maxScratchChunks - 1) / plan->maxScratchChunks, plan->alignment);
}

uint64_t mscclppPlanScratchChunkBytes(const struct mscclppPlan* plan, uint64_t chunkBytes) {
  uint64_t s = reuseChunkBytes(plan);
  return s != 0 && s < chunkBytes ? s : chunkBytes;
}

uint64_t mscclppPlanScratchBytes(const struct mscclppPlan* plan, uint64_t chunkBytes) {
  uint64_t s = reuseChunkBytes(plan);
  /* with reuse, a pipelined window wraps at s past a chunk's start, so
   * every chunk may reach s bytes further */
  uint64_t data = (uint64_t)plan->maxScratchChunks * (s > chunkBytes ? s : chunkBytes);
  if (plan->protocol == MSCCLPP_PLAN_LL) data *= 2;
  if (plan->doubleScratch) data *= 2;
  return data;
}

void mscclppPlanCallShapeOf(const struct mscclppPlan* plan, const struct mscclppPlanSizes* sizes, uint32_t flag,
                            uint64_t scratchBytes, mscclppPlanCallShape* shape) {
  memset(shape, 0, sizeof(*shape));
  shape->chunkBytes = sizes->chunkBytes;
  shape->scratchChunkBytes = mscclppPlanScratchChunkBytes(plan, sizes->chunkBytes);
  shape->scratchWrap = reuseChunkBytes(plan);
  shape->granule = sizes->granule;
  shape->flag = flag;
  if (plan->doubleScratch && (flag & 1u) == 0) shape->scratchOffset = scratchBytes / 2;
}

static uint64_t align64(uint64_t v) { return (v + 63) / 64 * 64; }

void mscclppPlanRegionLayout(const struct mscclppPlan* plan, int rank, uint64_t capChunk, uint64_t c,
                             uint64_t off[MSCCLPP_PLAN_SPACES], uint64_t* bytes) {
  const struct mscclppPlanGpu* g = &plan->gpus[rank];
  const uint64_t inB = (uint64_t)g->inputChunks * c, outB = (uint64_t)g->outputChunks * c;
  const uint64_t block = (uint64_t)plan->chunksPerBlock * c;
  const uint64_t io = align64(mscclppPlanScratchBytes(plan, capChunk));
  off[MSCCLPP_PLAN_SCRATCH] = 0;
  uint64_t end;
  if (!plan->inplace) {
    off[MSCCLPP_PLAN_INPUT] = io;
    off[MSCCLPP_PLAN_OUTPUT] = io + align64(inB);
    end = off[MSCCLPP_PLAN_OUTPUT] + outB;
  } else if (plan->collective == MSCCLPP_PLAN_ALLGATHER) { /* the input is the rank's block of the output */
    off[MSCCLPP_PLAN_OUTPUT] = io;
    off[MSCCLPP_PLAN_INPUT] = io + (uint64_t)rank * block;
    end = io + outB;
  } else if (plan->collective == MSCCLPP_PLAN_REDUCESCATTER) { /* the output is the rank's block of the input */
    off[MSCCLPP_PLAN_INPUT] = io;
    off[MSCCLPP_PLAN_OUTPUT] = io + (uint64_t)rank * block;
    end = io + inB;
  } else {
    off[MSCCLPP_PLAN_INPUT] = off[MSCCLPP_PLAN_OUTPUT] = io;
    end = io + (inB > outB ? inB : outB);
  }
  *bytes = end;
}
