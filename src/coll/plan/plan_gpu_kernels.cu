/* SPDX-License-Identifier: MIT */
/*
 * The GPU executor's kernel for nvcc (plan_gpu_interp.cuh: the
 * interpreter; plan_gpu_launch.h: what the host side hands it): its launch
 * and its occupancy.
 */
#include <cuda_runtime.h>

#include "coll/plan/plan_gpu_interp.cuh"

/* ---- dispatch --------------------------------------------------------------------------- */

extern "C" mscclppResult_t mscclppPlanGpuEnqueue(const struct mscclppPlanGpuLaunch* L, uint32_t nBlocks,
                                                 uint32_t nthreads, void* stream, const char** why) {
  if (L->type < 0 || L->type >= mscclppNumTypes) {
    *why = "no kernel for this data type";
    return mscclppInvalidArgument;
  }
  planKernel<<<dim3(nBlocks), dim3(nthreads), 0, (cudaStream_t)stream>>>(*L);
  cudaError_t err = cudaGetLastError();
  *why = cudaGetErrorString(err);
  return err == cudaSuccess ? mscclppSuccess : mscclppUnhandledCudaError;
}

extern "C" int mscclppPlanGpuBlocksPerSm(int type, uint32_t nthreads) {
  int n = 0;
  if (type < 0 || type >= mscclppNumTypes ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, planKernel, (int)nthreads, 0) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

/* A kernel whose stack frame exceeds the device's stack limit (CUDA's
 * default: 1 KiB a thread) makes every launch grow the local memory and,
 * unless the context keeps it (cudaDeviceLmemResizeToMax), shrink it again
 * after: on the H100 that cost ~19 us a call (4 ranks, graph replays),
 * when the frame was 1744 bytes (bench/HISTORY.md, 2026-12-08). The frame is kept under the
 * default (the launch values bound as __grid_constant__, one operand array
 * in opReduce); where a build's is larger anyway, the limit is raised once
 * to fit it. */
extern "C" mscclppResult_t mscclppPlanGpuFitStack(size_t* frame, const char** why) {
  cudaFuncAttributes attr;
  size_t limit = 0;
  cudaError_t err = cudaFuncGetAttributes(&attr, planKernel);
  if (err == cudaSuccess) err = cudaDeviceGetLimit(&limit, cudaLimitStackSize);
  *frame = err == cudaSuccess ? attr.localSizeBytes : 0;
  if (err == cudaSuccess && attr.localSizeBytes > limit)
    err = cudaDeviceSetLimit(cudaLimitStackSize, attr.localSizeBytes);
  *why = cudaGetErrorString(err);
  if (err != cudaSuccess) (void)cudaGetLastError();
  return err == cudaSuccess ? mscclppSuccess : mscclppUnhandledCudaError;
}
