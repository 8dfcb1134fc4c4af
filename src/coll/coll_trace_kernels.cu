/* SPDX-License-Identifier: MIT */
/* The clock calibration of the GPU kernel events (coll_trace.c): one
 * thread answers the host's pings with its %globaltimer. */
#include <cuda_runtime.h>

#include "coll/coll_trace.h"

/* Bounded like every wait: a host that never pings (it gave up) is left
 * after this long. */
#define CLOCK_KERNEL_WAIT_NS 1000000000ull

__global__ void traceClockKernel(uint64_t* cells, uint32_t rounds) {
  const uint64_t deadline = mscclppClockNs() + CLOCK_KERNEL_WAIT_NS;
  for (uint32_t i = 1; i <= rounds; i++) {
    while (mscclppLoadAcquireSys64(&cells[MSCCLPP_COLL_TRACE_CELL_PING]) < i)
      if (mscclppClockNs() > deadline) return;
    mscclppStoreRelaxedSys64(&cells[MSCCLPP_COLL_TRACE_CELL_TIME], mscclppClockNs());
    mscclppStoreReleaseSys64(&cells[MSCCLPP_COLL_TRACE_CELL_PONG], i); /* the time is visible before the answer */
  }
}

extern "C" mscclppResult_t mscclppCollTraceClockEnqueue(uint64_t* cells, uint32_t rounds, void* stream,
                                                       const char** why) {
  traceClockKernel<<<1, 1, 0, (cudaStream_t)stream>>>(cells, rounds);
  cudaError_t err = cudaGetLastError();
  *why = cudaGetErrorString(err);
  return err == cudaSuccess ? mscclppSuccess : mscclppUnhandledCudaError;
}
