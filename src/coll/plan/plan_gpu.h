/* SPDX-License-Identifier: MIT */
/*
 * The GPU backend's executor of execution plans (plan_gpu.c: state,
 * channels, a call; plan_gpu_kernels.cu: the kernel).
 *
 * A plan's ops load and store peers' input, output and scratch. The GPU
 * backend learns peers' user buffers only through its export service and
 * a rendezvous inside its direct kernels; a plan addresses them anywhere
 * in any op, so this executor stages instead: per plan and communicator it
 * allocates one region of device memory per rank (scratch, input area,
 * output area: mscclppPlanRegionLayout), registered for CUDA IPC, that every
 * peer the plan links it with maps through a memory channel; the plan's
 * memory channels are memory channels over CUDA IPC and its port channels
 * real port channels, all on the region. A call is ONE kernel launch on the
 * caller's stream: the kernel copies the caller's input into the input
 * area, runs the thread blocks, and copies the output area out (the copies
 * cost one more read and write of the input and the output per call). A
 * space no peer addresses is not staged: the ops use the caller's buffer
 * (mscclppPlanGpuUnstageable says when). Nor is one the peers address
 * where the GPU backend's export service can map it for them (zero-copy:
 * mscclppPlanGpuShareable, mscclppCollGpuShare): the kernel then begins
 * by trading those addresses with the linked peers through mailboxes in
 * the regions (plan_gpu_interp.cuh, tradeAddresses).
 * Nothing in a call waits for a peer's host: every count the kernel needs
 * from one call to the next (LL flags, barrier rounds, the plan's
 * semaphores) lives in device counters, so a CUDA graph replays it.
 *
 * The region is made at the plan's first call on the communicator, and
 * made again, larger, by a call whose chunks do not fit: every rank
 * reaches that call with the same size, so all of them rebuild there (a
 * collective host step, like the backend's own first call; capture mode
 * relaxed, so it may happen while the stream is captured). Older regions
 * and their channels stay until the plan's state goes (kernels in flight
 * and captured graphs still use them).
 */
#ifndef MSCCLPP_SRC_COLL_PLAN_PLAN_GPU_H_
#define MSCCLPP_SRC_COLL_PLAN_PLAN_GPU_H_

#include "coll/coll.h"
#include "coll/plan/plan.h"

struct mscclppPlanGpuCtx;

/* "" when the GPU executor can run `plan` on comm, else why not (into why). */
const char* mscclppPlanGpuRefusal(struct mscclppComm* comm, const struct mscclppPlan* plan, char* why, size_t len);

/* Run `plan` for call `a` (every rank calls with the same plan and count):
 * enqueue the kernel on a->stream. *ctx is the plan's state, made at the
 * first call (ctxId: the same number on every rank, for the channels'
 * tags). Errors of the setup (mscclppSystemError, the channels'), and
 * mscclppUnhandledCudaError for a launch the runtime refused; a failure
 * inside the kernel (a timeout, a lost peer) is the communicator's
 * asynchronous error, as for every GPU collective. */
mscclppResult_t mscclppPlanGpuRun(struct mscclppComm* comm, struct mscclppPlanGpuCtx** ctx, int ctxId,
                                  struct mscclppPlan* plan, const struct mscclppCollArgs* a);

/* Free a state once this rank's kernels are done (waits for the device). */
void mscclppPlanGpuFree(struct mscclppComm* comm, struct mscclppPlanGpuCtx* ctx);

#endif /* MSCCLPP_SRC_COLL_PLAN_PLAN_GPU_H_ */
