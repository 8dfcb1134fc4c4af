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
