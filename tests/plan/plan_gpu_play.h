/* SPDX-License-Identifier: MIT */
/*
 * The GPU executor's kernel played on the host (plan_gpu_play.cpp), for
 * plan_worker's play mode: a communicator of the host backend runs a plan
 * call through the very interpreter GPU ranks run (plan_gpu_interp.cuh)
 * and the very launch values (plan_gpu_launch.c), each thread block played
 * by `threads` CPU threads, regions in host shared memory linked as the
 * GPU executor links them (plan_link.h), and regions made again, larger,
 * by the same rule (mscclppPlanGpuCapFor) while older ones stay.
 */
#ifndef MSCCLPP_TESTS_PLAN_PLAN_GPU_PLAY_H_
#define MSCCLPP_TESTS_PLAN_PLAN_GPU_PLAY_H_

#include <stddef.h>

#include "mscclpp/coll.h"
#include "mscclpp/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* NULL when the play can run in this build, else why not. */
const char* planPlayRefusal(void);

/* 1 when the host play reduces elements of `type` (not the half, bfloat16
 * and fp8 types: coll_ops.cuh defines them for nvcc only). */
int planPlayReduces(mscclppDataType_t type);

/* One call of `plan` (every rank calls with the same plan and count),
 * complete on return. The plan's state is made at its first call and kept
 * until planPlayEnd. */
mscclppResult_t planPlayCall(mscclppComm_t comm, mscclppPlan_t plan, const void* send, void* recv, size_t count,
                             mscclppDataType_t type, mscclppRedOp_t op, unsigned threads);

/* Free the state of the plan played last (every rank, after its last call). */
void planPlayEnd(mscclppComm_t comm);

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_TESTS_PLAN_PLAN_GPU_PLAY_H_ */
