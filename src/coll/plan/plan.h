/* SPDX-License-Identifier: MIT */
/*
 * Execution plans inside the library: a loaded, validated plan
 * (plan_load.c reads MSCCL++'s JSON format into it), the programs made from
 * it (plan_program.c), and what the collective layer asks of them.
 *
 * A struct mscclppPlan holds every rank's part already in the program's
 * terms (plan_program.h): per rank, the thread blocks' op records with
 * channel and remote buffer references resolved from thread-block-local ids
 * to the rank's tables. A program for one rank is that rank's part laid out
 * as one block (mscclppPlanProgramBuild). The plan is immutable once loaded
 * and reference-counted (a communicator that registered it holds a
 * reference), so any thread may read it.
 */
#ifndef MSCCLPP_SRC_COLL_PLAN_PLAN_H_
#define MSCCLPP_SRC_COLL_PLAN_PLAN_H_

#include <stddef.h>
#include <stdint.h>

#include "coll/plan/plan_program.h"
#include "mscclpp/core.h"
#include "mscclpp/plan.h"

#define MSCCLPP_PLAN_MAX_RANKS 1024
#define MSCCLPP_PLAN_NAME_MAX 128

/* One rank's part of a plan (the plan's gpus[rank]). */
struct mscclppPlanGpu {
  uint32_t inputChunks, outputChunks, scratchChunks;
  uint32_t nBlocks, nOps, nChannels, nRemotes, nSemaphores, nBarriers;
  mscclppPlanBlock* blocks;
  mscclppPlanOp* ops;
  mscclppPlanChannel* channels; /* memory channels first, then port channels */
  uint32_t nMemoryChannels;     /* channels[0 .. nMemoryChannels) are memory channels */
  mscclppPlanRemote* remotes;
  uint32_t* semInit;
};

struct mscclppPlan {
  int refs; /* __atomic: the user's handle and each registration */
  char name[MSCCLPP_PLAN_NAME_MAX];
  char source[256]; /* the file it came from, or "<string>" */
  mscclppPlanCollective collective;
  mscclppPlanProtocol protocol;
  int inplace, reuseResources, doubleScratch;
  uint32_t threadsPerBlock, alignment;
  uint64_t minMessageBytes, maxMessageBytes;
  uint32_t chunksPerBlock;   /* k: the same on every rank */
  uint32_t maxBlocks;        /* thread blocks of the rank with the most */
  uint32_t maxScratchChunks; /* scratch_chunks of the rank with the most: every rank's scratch is that large */
  uint32_t pipelineUnitGcd;  /* the greatest common divisor of the pipelines' unit_size; 0: no pipeline */
  int nranks;
  struct mscclppPlanGpu* gpus;
};

/* The collective's name as MSCCL++ writes it ("allreduce", ...). */
const char* mscclppPlanCollectiveName(mscclppPlanCollective c);
/* The op's name as MSCCL++'s JSON spells it ("put", "rres", ...). */
const char* mscclppPlanOpName(mscclppPlanOpCode code);

/* Parse and validate `len` bytes of JSON (plan_load.c). `source` names
 * them in messages (a path, or "<string>"). mscclppInvalidArgument with a
 * message naming the JSON path and the value for anything wrong (jansson's
 * line and column for bad JSON); mscclppSystemError when out of memory;
 * mscclppInvalidUsage in a build without jansson. The plan starts with one
 * reference. */
mscclppResult_t mscclppPlanParse(const char* json, size_t len, const char* source, struct mscclppPlan** plan);
/* Read `path` and parse it. mscclppInvalidArgument also for a file that
 * cannot be read (naming it and errno's text). */
mscclppResult_t mscclppPlanParseFile(const char* path, struct mscclppPlan** plan);
/* The same, logging why it fails at INFO only: the caller warns (a
 * directory of plans, where a bad file is skipped). */
mscclppResult_t mscclppPlanParseFileQuiet(const char* path, struct mscclppPlan** plan);

void mscclppPlanRetain(struct mscclppPlan* plan);
/* Drops a reference; the last frees the plan. */
void mscclppPlanRelease(struct mscclppPlan* plan);

/* The program of `rank` (plan_program.c): one malloc'ed block of
 * program->bytes bytes, freed with free(). mscclppInvalidArgument for a
 * rank out of range; mscclppSystemError when out of memory. */
mscclppResult_t mscclppPlanProgramBuild(const struct mscclppPlan* plan, int rank, mscclppPlanProgram** program);

/* ---- one call's sizes (plan_program.c) ---- */

/* How a call of `count` elements of `typeSize` bytes (the collective API's
 * count: per rank for allgather and alltoall, the output's for
 * reduce-scatter) maps onto the plan. */
struct mscclppPlanSizes {
  uint64_t blockBytes; /* B: one rank's block of the collective, as the caller has it */
  uint64_t chunkBytes; /* c */
  uint64_t granule;    /* max(alignment, typeSize) */
  int padded;          /* 1: B is not k whole granule-aligned chunks; buffers are staged, padded */
  uint64_t inputBytes; /* the caller's input and output, as the collective API counts them */
  uint64_t outputBytes;
  uint64_t messageBytes;        /* what min/max_message_size bound: input bytes, output bytes for allgather */
  uint32_t inBlocks, outBlocks; /* blocks of the input and the output */
};

/* Fill *sizes for a call. mscclppInvalidArgument when the message size is
 * outside the plan's [min, max] (naming both). */
mscclppResult_t mscclppPlanSizesOf(const struct mscclppPlan* plan, int nranks, size_t count, size_t typeSize,
                                   struct mscclppPlanSizes* sizes);
/* 1 when a call of this many bytes per rank is inside the plan's message size range. */
int mscclppPlanAcceptsBytes(const struct mscclppPlan* plan, int nranks, uint64_t blockBytes);
/* What min/max_message_size bound for a call of blockBytes per rank. */
uint64_t mscclppPlanMessageBytes(const struct mscclppPlan* plan, int nranks, uint64_t blockBytes);

/* The call shape of execution number `flag` (1, 2, ...): the same on
 * every rank (scratch sizes come from the largest scratch of any rank).
 * scratchBytes: every rank's scratch as allocated for the buffer set (at
 * least mscclppPlanScratchBytes of this call's chunk size): with a double
 * scratch, its halves stay where they are whatever the call's size, so that
 * a rank already in the next execution never writes where a peer still
 * reads the one before. */
void mscclppPlanCallShapeOf(const struct mscclppPlan* plan, const struct mscclppPlanSizes* sizes, uint32_t flag,
                            uint64_t scratchBytes, mscclppPlanCallShape* shape);
/* Bytes of every rank's scratch for chunk size c: the largest
 * scratch_chunks of any rank (LL: doubled; double scratch: doubled again). */
uint64_t mscclppPlanScratchBytes(const struct mscclppPlan* plan, uint64_t chunkBytes);
/* Where `rank`'s buffers are in the region an executor stages a plan's
 * calls in (one allocation per rank that its peers map): the scratch
 * first, at 0, sized for chunks of capChunk bytes (so that its halves stay
 * where they are whatever a call's size, see mscclppPlanCallShapeOf), then
 * input and output for chunk size c, overlapping as the in-place form
 * says. off[] is indexed by mscclppPlanSpace; *bytes is where the region's
 * used part ends. The host and the GPU executor both lay regions out so. */
void mscclppPlanRegionLayout(const struct mscclppPlan* plan, int rank, uint64_t capChunk, uint64_t chunkBytes,
                             uint64_t off[MSCCLPP_PLAN_SPACES], uint64_t* bytes);
/* sc (plan_program.h): MSCCL++'s scratch chunk size with reuse_resources, else c. */
uint64_t mscclppPlanScratchChunkBytes(const struct mscclppPlan* plan, uint64_t chunkBytes);

#endif /* MSCCLPP_SRC_COLL_PLAN_PLAN_H_ */
