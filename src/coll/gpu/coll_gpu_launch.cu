/* SPDX-License-Identifier: MIT */
/*
 * The GPU backend's launches (coll_gpu.h: mscclppCollGpuEnqueue and its
 * kin): the kernel of a call's family and type, launched on the call's
 * stream, with programmatic dependent launch when asked.
 */
#include "coll/gpu/coll_gpu_kernels.cuh"

/* ---- dispatch ------------------------------------------------------------------------ */

/* `kernel` on `launch`'s grid on `stream`, with the programmatic dependent
 * launch attribute when `pdl`, given the launch and the kernel's further
 * arguments (an op list, the counts); the launch's status, the error the
 * runtime kept read to clear it. */
template <typename... Extra>
static mscclppResult_t launchOn(const struct mscclppCollGpuLaunch* launch, void* stream, int pdl, const char** why,
                                void (*kernel)(Launch, Extra...), const Extra&... extra) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(launch->nblocks);
  cfg.blockDim = dim3(launch->nthreads);
  cfg.stream = (cudaStream_t)stream;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, *launch, extra...);
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
  if (p2p != NULL) return launchOn(launch, stream, pdl, why, mscclppCollGpuP2pKernel(), *p2p);
  return launchOn(launch, stream, pdl, why, kernelOf(launch));
}

extern "C" mscclppResult_t mscclppCollGpuEnqueueP2pLl(const struct mscclppCollGpuLaunch* launch,
                                                      const struct mscclppCollGpuP2pLlList* list, void* stream,
                                                      int pdl, const char** why) {
  return launchOn(launch, stream, pdl, why, mscclppCollGpuP2pLlKernel(), *list);
}

extern "C" mscclppResult_t mscclppCollGpuEnqueueAllToAllv(const struct mscclppCollGpuLaunch* launch,
                                                          const struct mscclppCollGpuCounts* counts, void* stream,
                                                          int pdl, const char** why) {
  return launchOn(launch, stream, pdl, why, mscclppCollGpuAllToAllvKernel(), *counts);
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
