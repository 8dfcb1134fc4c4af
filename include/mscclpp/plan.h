/* SPDX-License-Identifier: MIT */
/*
 * Execution plans: collective algorithms as data.
 *
 * A plan is a JSON file in MSCCL++'s execution-plan format, as MSCCL++'s
 * Python DSL (mscclpp.language, v0.10) writes it: for every rank and
 * thread block, the operations (put, get, copy, reduce, signal/wait, LL
 * packets, ...) to run over memory and port channels on the input, output
 * and scratch buffers, in chunks. The library loads and validates it, turns
 * it into a compact program per rank and runs it with its executor.
 *
 *   mscclppPlan_t plan;
 *   mscclppPlanLoadFile("allreduce_ll_4.json", &plan);   // any rank, any time
 *   mscclppPlanRegister(comm, plan);        // every rank registers the same plans
 *   mscclppAllReduce(...);                  // a matching call runs the plan
 *   mscclppPlanExecute(comm, plan, ...);    // or run it explicitly
 *   mscclppPlanDestroy(plan);               // the communicator keeps its own reference
 *
 * A registered plan runs a collective call (mscclppAllReduce, ...,
 * and so ncclAllReduce through libmscclpp_nccl) when its collective, rank
 * count, in-place or out-of-place form and message size range
 * (min/max_message_size: the input's bytes, the output's for allgather)
 * match the call, unless MSCCLPP_ALGO forces an algorithm for that
 * collective. Plans are tried in the order they were registered; the first
 * that matches runs. MSCCLPP_CACHE_DIR names a directory whose *.json plans
 * every communicator registers when it is created (plans for another rank
 * count are skipped; a malformed file is a warning naming it, never an
 * error of the creation).
 *
 * Collectives: allreduce, allgather, reducescatter, alltoall. Switch
 * channels (NVLS multicast) are refused: multicast is not allowed on the
 * machines this library targets. Any element type; the call's reduction
 * operator is applied (sum, prod, max, min; avg as the sum divided by the
 * rank count at the end). Where the executor runs: the host backend (CPU
 * threads play the thread blocks; every message size: buffers whose size
 * does not divide into the plan's chunks are staged and padded) runs plans;
 * on a GPU communicator the GPU executor (one kernel per call) runs them,
 * unless MSCCLPP_PLAN_GPU=0: then no plan is selected there and
 * mscclppPlanExecute returns mscclppInvalidUsage saying so.
 *
 * A build without jansson (the JSON parser) has the API, but loading
 * returns mscclppInvalidUsage saying so.
 */
#ifndef MSCCLPP_PLAN_H_
#define MSCCLPP_PLAN_H_

#include <stddef.h>
#include <stdint.h>

#include "mscclpp/coll.h"
#include "mscclpp/comm.h"
#include "mscclpp/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mscclppPlan* mscclppPlan_t;

/* Load and validate a plan from a file / from `len` bytes of JSON text
 * (not necessarily NUL-terminated). Everything is checked: the JSON itself
 * (jansson's line and column), every field's presence and type, every
 * operation's name and operands, chunk, channel, rank, thread block,
 * barrier and semaphore ranges; the message names the JSON path and the
 * value ("gpus[1].threadblocks[3].ops[7].src_buff[0].index 40 is out of
 * range: input has 16 chunks"). Errors: mscclppInvalidArgument (NULL
 * argument, unreadable file, invalid plan), mscclppInvalidUsage (built
 * without jansson), mscclppSystemError (out of memory). *plan is written
 * only on success. */
MSCCLPP_API mscclppResult_t mscclppPlanLoadFile(const char* path, mscclppPlan_t* plan);
MSCCLPP_API mscclppResult_t mscclppPlanLoadString(const char* json, size_t len, mscclppPlan_t* plan);

/* Drop the caller's handle. Communicators that registered the plan keep
 * their own reference until they unregister it or are destroyed.
 * mscclppInvalidArgument for NULL. */
MSCCLPP_API mscclppResult_t mscclppPlanDestroy(mscclppPlan_t plan);

/* What a plan is. Start from MSCCLPP_PLAN_INFO_INITIALIZER. The strings
 * belong to the plan and live as long as it. */
typedef struct {
  size_t structSize;        /* sizeof(mscclppPlanInfo) */
  const char* name;         /* the plan's "name" */
  const char* collective;   /* "allreduce", "allgather", "reducescatter", "alltoall" */
  const char* protocol;     /* "Simple" or "LL" */
  int nranks;               /* ranks it is written for */
  int inplace;              /* 1: runs in-place calls; 0: out-of-place calls */
  uint64_t minMessageBytes; /* message size range it accepts (the input's bytes, the output's for allgather) */
  uint64_t maxMessageBytes;
  int threadblocks;    /* thread blocks (of the rank with the most) */
  int threadsPerBlock; /* num_threads_per_block */
  int chunksPerBlock;  /* chunks each rank's block of the collective is cut into */
} mscclppPlanInfo;

#define MSCCLPP_PLAN_INFO_INITIALIZER \
  { sizeof(mscclppPlanInfo), NULL, NULL, NULL, 0, 0, 0, 0, 0, 0, 0 }

/* Fill *info. mscclppInvalidArgument for NULL or a wrong structSize. */
MSCCLPP_API mscclppResult_t mscclppPlanGetInfo(mscclppPlan_t plan, mscclppPlanInfo* info);

/* Make `plan` one the collective calls of comm may run (see the top). Not
 * collective, but every rank must register the same plans in the same
 * order, or ranks would run different algorithms for one call. The
 * communicator holds a reference. Errors: mscclppInvalidArgument (NULL,
 * a plan for another rank count, naming both), mscclppInvalidUsage (the
 * plan is registered on comm already). */
MSCCLPP_API mscclppResult_t mscclppPlanRegister(mscclppComm_t comm, mscclppPlan_t plan);

/* Forget a registered plan (its resources on comm are freed once every
 * rank has unregistered it: at the next collective call or at destroy).
 * mscclppInvalidArgument for NULL or a plan not registered on comm. */
MSCCLPP_API mscclppResult_t mscclppPlanUnregister(mscclppComm_t comm, mscclppPlan_t plan);

/* Register every *.json plan in directory `dir` (in file name order), as
 * MSCCLPP_CACHE_DIR does: plans for another rank count are skipped (INFO),
 * a file that does not load is skipped with a warning naming it and why.
 * *registered (may be NULL) counts the plans registered. Errors:
 * mscclppInvalidArgument (NULL, a directory that cannot be read). */
MSCCLPP_API mscclppResult_t mscclppPlanRegisterDir(mscclppComm_t comm, const char* dir, int* registered);

/* How many plans are registered on comm, and the i-th (0 <= i < count) of
 * them (a borrowed handle, valid while it stays registered). */
MSCCLPP_API mscclppResult_t mscclppPlanRegisteredCount(mscclppComm_t comm, int* count);
MSCCLPP_API mscclppResult_t mscclppPlanRegisteredAt(mscclppComm_t comm, int i, mscclppPlan_t* plan);

/* How many calls on comm `plan` has run, by selection or through
 * mscclppPlanExecute, since comm first ran or registered it (0 for a plan
 * it never saw; unregistering forgets the count): whether the selection
 * picks a plan for the calls it was meant for. On a GPU communicator a
 * run is counted when its kernel is enqueued. Read it from the thread
 * that makes comm's calls, or between calls. mscclppInvalidArgument for
 * NULL. */
MSCCLPP_API mscclppResult_t mscclppPlanRunCount(mscclppComm_t comm, mscclppPlan_t plan, uint64_t* runs);

/* Run `plan` for one call, whatever is registered: the collective the plan
 * implements, with that collective's arguments (count as mscclppAllReduce
 * / mscclppAllGather (sendcount) / mscclppReduceScatter (recvcount) /
 * mscclppAllToAll (count per peer) take it). `op` is ignored by allgather
 * and alltoall. Every rank calls it with the same plan and count. The call
 * must be in-place (NCCL's positions, see mscclpp/coll.h) exactly when the
 * plan is. Errors: those of the collective call, and mscclppInvalidArgument
 * (a plan for another rank count, a call of the wrong in-place form, a
 * message size outside the plan's range: the message names the values),
 * mscclppInvalidUsage (no executor for this communicator's backend yet:
 * GPU communicators). */
MSCCLPP_API mscclppResult_t mscclppPlanExecute(mscclppComm_t comm, mscclppPlan_t plan, const void* sendbuff,
                                               void* recvbuff, size_t count, mscclppDataType_t datatype,
                                               mscclppRedOp_t op, mscclppStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_PLAN_H_ */
