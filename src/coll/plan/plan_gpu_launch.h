/* SPDX-License-Identifier: MIT */
/*
 * What the GPU executor's host side (plan_gpu.c, C) hands its kernel
 * (plan_gpu_kernels.cu): one launch's parameters, by value, and the layout
 * of the device counters. See plan_gpu.h for the design.
 *
 * Device counters of one plan state (uint64_t words, zeroed once, never
 * reset: they only grow, so a CUDA graph replays correctly):
 *   [GRID]                 arrivals at the grid-wide syncs around the ops
 *   [BARRIER + b]          arrivals at the plan's BARRIER b
 *   [EXEC + block]         executions block `block` has started (its LL flag)
 *   [EXEC + nBlocks + s]   the plan's semaphore s (signed; semInit[] at creation)
 */
#ifndef MSCCLPP_SRC_COLL_PLAN_PLAN_GPU_LAUNCH_H_
#define MSCCLPP_SRC_COLL_PLAN_PLAN_GPU_LAUNCH_H_

#include <stddef.h>
#include <stdint.h>

#include "coll/plan/plan_program.h"
#include "mscclpp/memory_channel_device.h"
#include "mscclpp/port_channel_device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Ranks of a plan the GPU executor runs (the GPU backend's: one host). */
#define MSCCLPP_PLAN_GPU_MAX_RANKS 8
#define MSCCLPP_PLAN_GPU_MAX_THREADS 1024u

#define MSCCLPP_PLAN_GPU_CTR_GRID 0
#define MSCCLPP_PLAN_GPU_CTR_BARRIER 1
#define MSCCLPP_PLAN_GPU_CTR_EXEC (MSCCLPP_PLAN_GPU_CTR_BARRIER + MSCCLPP_PLAN_MAX_BARRIERS)
/* Words of counters for a program of nBlocks blocks and nSem semaphores. */
#define MSCCLPP_PLAN_GPU_CTR_WORDS(nBlocks, nSem) (MSCCLPP_PLAN_GPU_CTR_EXEC + (uint64_t)(nBlocks) + (uint64_t)(nSem))

struct mscclppPlanGpuLaunch {
  const mscclppPlanProgram* prog;                 /* device copy of this rank's program */
  const mscclppMemoryChannelDeviceHandle* mem;    /* [nChannels]: program channel i, when a memory channel */
  const mscclppPortChannelDeviceHandle* port;     /* [nChannels]: program channel i, when a port channel */
  const mscclppMemoryChannelDeviceHandle* link;   /* [nranks]: a channel per linked peer (the end barrier) */
  uint64_t* ctr;                                  /* the device counters (above) */
  uint8_t* base[MSCCLPP_PLAN_GPU_MAX_RANKS];      /* every linked rank's region as mapped here (this rank's: mine) */
  uint64_t off[MSCCLPP_PLAN_GPU_MAX_RANKS][MSCCLPP_PLAN_SPACES]; /* where each rank's buffers are in its region */
  uint8_t* mine[MSCCLPP_PLAN_SPACES];             /* this rank's buffers as its ops address them: in the region,
                                                     or the caller's input and output where not staged */
  uint32_t staged;                                /* bit s: space s (input, output) is staged through the region */
  uint32_t trade;                                 /* 1: the ranks trade their input and output addresses first */
  uint64_t pub[MSCCLPP_PLAN_GPU_MAX_RANKS][2];    /* trade: [q][s] this rank's space s as rank q maps it
                                                     (0: in this rank's region, where q finds it by base[]) */
  uint64_t mailOff[MSCCLPP_PLAN_GPU_MAX_RANKS];   /* trade: each rank's mailbox in its region */
  uint8_t* region;                                /* this rank's region (its mailbox) */
  mscclppPlanCallShape shape;                     /* flag and scratchOffset are set by the kernel */
  uint64_t halfScratch;                           /* double scratch: the odd executions' half starts here */
  const uint8_t* send;                            /* the caller's buffers */
  uint8_t* recv;
  uint64_t blockBytes;                            /* B: one rank's block as the caller has it */
  uint64_t paddedBytes;                           /* k * c: the same block in the region */
  uint32_t inBlocks, outBlocks;
  int rank, nranks;
  int type;                                       /* mscclppDataType_t */
  int op;                                         /* mscclppRedOp_t of the reductions (avg: sum) */
  int divide;                                     /* avg: divide the output by nranks at the copy out */
  uint32_t doubleScratch;
  uint32_t linkedMask;                            /* bit q: the end barrier meets rank q */
  mscclppWaitContext wait;                        /* the communicator's abort and MSCCLPP_TIMEOUT */
};

struct mscclppPlan;
struct mscclppPlanSizes;
struct mscclppCollArgs;

/* What a rank's launches share, fixed for a plan state. */
struct mscclppPlanGpuRank {
  int rank, nranks;
  uint32_t linkedMask;  /* bit q: rank q is linked (the end barrier meets it) */
  uint32_t unstageable; /* bit s: space s may be the caller's own buffer (mscclppPlanGpuUnstageable) */
  uint32_t shareable;   /* bit s: ... once its peers map it (mscclppPlanGpuShareable) */
  int trade;            /* the plan's calls trade addresses (mscclppPlanGpuTrades) */
};

/* A rank's mailbox, where its linked peers put their traded addresses at
 * the start of a call (slot [q][s]: rank q's space s, 0 for its region's).
 * It follows the region's used part (mscclppPlanGpuRegionBytes). */
#define MSCCLPP_PLAN_GPU_MAIL_BYTES (MSCCLPP_PLAN_GPU_MAX_RANKS * 2 * sizeof(uint64_t))

/* plan_gpu_launch.c: the spaces of `rank` (a bit per mscclppPlanSpace,
 * input and output only) that its ops may address in the caller's own
 * buffers instead of the staged region: those no peer addresses (no peer
 * has a remote buffer there, so nobody needs it mapped) in a plan without
 * port channels (the proxy addresses regions by offset), less an input
 * the plan writes out of place (the caller's input is read-only); in
 * place, both or neither (they are one buffer). A call still stages a
 * space when its blocks are padded, a buffer is not 16-byte aligned, or
 * (the output) avg divides on the way out. */
uint32_t mscclppPlanGpuUnstageable(const struct mscclppPlan* plan, int rank);

/* The spaces of `rank` (input, output) that its peers address and that
 * may still be the caller's own buffers, mapped by those peers (zero-copy,
 * the addresses traded at the start of each call): the rules of
 * mscclppPlanGpuUnstageable but for the peers' addressing, and an input no
 * rank writes (out of place). A call shares such a space when it would not
 * stage it and its buffer could be mapped by every peer. */
uint32_t mscclppPlanGpuShareable(const struct mscclppPlan* plan, int rank);

/* Whether a plan's calls begin with the address trade: some rank's input
 * or output is addressed by a peer and the plan has no port channels. The
 * same answer on every rank (from the plan alone): every linked pair
 * trades, or none does. */
int mscclppPlanGpuTrades(const struct mscclppPlan* plan);

/* The bytes of `rank`'s region for chunks up to capChunk: its layout
 * (mscclppPlanRegionLayout), the mailbox after it (*mailOff), at least
 * 4 KiB. What each rank allocates and what its peers expect of it. */
uint64_t mscclppPlanGpuRegionBytes(const struct mscclppPlan* plan, int rank, uint64_t capChunk, uint64_t* mailOff);

/* plan_gpu_launch.c (no CUDA: tests/plan/plan_gpu_play.cpp runs it too).
 * The chunk size a plan state's regions are made for when a call of
 * chunkBytes comes to regions for `cap` (0: none yet): `cap` when the
 * chunks fit, else the next power of two, at least twice `cap` (a size that
 * grows step by step rebuilds a few times, not at every call), and at
 * least 4 KiB. */
uint64_t mscclppPlanGpuCapFor(uint64_t cap, uint64_t chunkBytes);

/* Everything of call `a`'s launch on rank who->rank but the device
 * handles and the peers' regions: its shape, the offsets of every rank's
 * buffers in its region (regions for chunks up to capChunk; this rank's at
 * `region`), which spaces are staged and where this rank's are, what it
 * trades, the staging sizes, type, op and the caller's buffers. shared[s]
 * (NULL: none) is where each peer maps the caller's buffer of space s (the
 * input a->send, the output a->recv), [q] 0 where q does not: a shareable
 * space is shared only when every linked peer maps it. The caller sets
 * prog, mem, port, link, ctr, base[] and wait. */
void mscclppPlanGpuLaunchCall(const struct mscclppPlan* plan, const struct mscclppPlanGpuRank* who,
                              const struct mscclppPlanSizes* sz, uint64_t capChunk, uint8_t* region,
                              const struct mscclppCollArgs* a, const uint64_t (*shared)[MSCCLPP_PLAN_GPU_MAX_RANKS],
                              struct mscclppPlanGpuLaunch* L);

/* plan_gpu_kernels.cu: enqueue the executor's kernel for `L` on `stream`
 * (a cudaStream_t): L->prog's nBlocks blocks of `nthreads` threads.
 * mscclppUnhandledCudaError with the runtime's text in *why. */
mscclppResult_t mscclppPlanGpuEnqueue(const struct mscclppPlanGpuLaunch* L, uint32_t nBlocks, uint32_t nthreads,
                                      void* stream, const char** why);

/* plan_gpu_kernels.cu: the kernel's stack frame in *frame, and the
 * device's stack limit raised to it where it is lower (each launch would
 * otherwise grow and shrink the local memory). mscclppUnhandledCudaError
 * with the runtime's text in *why. */
mscclppResult_t mscclppPlanGpuFitStack(size_t* frame, const char** why);

/* plan_gpu_kernels.cu: blocks of `nthreads` threads of the kernel for
 * `type` that one SM holds at once (every block of every rank must be
 * resident together: they wait for each other); 0 when unknown. */
int mscclppPlanGpuBlocksPerSm(int type, uint32_t nthreads);

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_SRC_COLL_PLAN_PLAN_GPU_LAUNCH_H_ */
