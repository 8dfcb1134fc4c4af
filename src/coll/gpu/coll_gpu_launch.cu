/* SPDX-License-Identifier: MIT */
/*
 * The GPU backend's launches (coll_gpu.h: mscclppCollGpuEnqueue and its
 * kin): the kernel of a call's family and type, launched on the call's
 * stream, with programmatic dependent launch when asked.
 */
#include "coll/gpu/coll_gpu_kernels.cuh"

/* ---- dispatch ------------------------------------------------------------------------ */

/* The launch of `launch`'s grid on `stream`; `attr` holds the programmatic
 * dependent launch attribute when `pdl`. */
static cudaLaunchConfig_t launchConfig(const struct mscclppCollGpuLaunch* launch, void* stream, int pdl,
                                       cudaLaunchAttribute attr[1]) {
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(launch->nblocks);
  cfg.blockDim = dim3(launch->nthreads);
  cfg.stream = (cudaStream_t)stream;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  return cfg;
}

/* The launch's status, the error the runtime kept read to clear it. */
static mscclppResult_t launchStatus(cudaError_t err, const char** why) {
  cudaError_t last = cudaGetLastError();
  if (err == cudaSuccess) err = last;
  *why = cudaGetErrorString(err);
  return err == cudaSuccess ? mscclppSuccess : mscclppUnhandledCudaError;
}

/* The kernel of a collective's launch: its algorithm's, for its kind (the
 * one-step packet kernels: the reductions per type, the copies on bytes)
 * and type. */
static KernelFn kernelOf(const struct mscclppCollGpuLaunch* launch) {
  if (launch->algo == MSCCLPP_COLL_GPU_ALGO_PACKET2) return mscclppCollGpuPacket2Kernel(launch->type);
  if (launch->algo != MSCCLPP_COLL_GPU_ALGO_PACKET) return mscclppCollGpuDirectKernel(launch->type);
  if (launch->kind == MSCCLPP_COLL_ALLGATHER || launch->kind == MSCCLPP_COLL_ALLTOALL)
    return mscclppCollGpuPacketCopyKernel();
  return mscclppCollGpuPacketKernel(launch->type);
}

extern "C" mscclppResult_t mscclppCollGpuEnqueue(const struct mscclppCollGpuLaunch* launch,
                                                 const struct mscclppCollGpuP2pList* p2p, void* stream, int pdl,
                                                 const char** why) {
  cudaLaunchAttribute attr[1];
  cudaLaunchConfig_t cfg = launchConfig(launch, stream, pdl, attr);
  cudaError_t err;
  if (p2p != NULL) {
    err = cudaLaunchKernelEx(&cfg, mscclppCollGpuP2pKernel(), *launch, *p2p);
  } else {
    err = cudaLaunchKernelEx(&cfg, kernelOf(launch), *launch);
  }
  return launchStatus(err, why);
}

extern "C" mscclppResult_t mscclppCollGpuEnqueueP2pLl(const struct mscclppCollGpuLaunch* launch,
                                                      const struct mscclppCollGpuP2pLlList* list, void* stream,
                                                      int pdl, const char** why) {
  cudaLaunchAttribute attr[1];
  cudaLaunchConfig_t cfg = launchConfig(launch, stream, pdl, attr);
  return launchStatus(cudaLaunchKernelEx(&cfg, mscclppCollGpuP2pLlKernel(), *launch, *list), why);
}

extern "C" mscclppResult_t mscclppCollGpuEnqueueAllToAllv(const struct mscclppCollGpuLaunch* launch,
                                                          const struct mscclppCollGpuCounts* counts, void* stream,
                                                          int pdl, const char** why) {
  cudaLaunchAttribute attr[1];
  cudaLaunchConfig_t cfg = launchConfig(launch, stream, pdl, attr);
  return launchStatus(cudaLaunchKernelEx(&cfg, mscclppCollGpuAllToAllvKernel(), *launch, *counts), why);
}

extern "C" int mscclppCollGpuDirectBlocksPerSm(int type, uint32_t nthreads) {
  int n = 0;
  if (type < 0 || type >= mscclppNumTypes ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, mscclppCollGpuDirectKernel(type), (int)nthreads, 0) != cudaSuccess) {
    (void)cudaGetLastError();
    return 1;
  }
  return n > 0 ? n : 1;
}
