/* SPDX-License-Identifier: MIT */
/* The library's host-mapped memory outlives CUDA's teardown. The watcher and
 * proxy threads store into it (the abort flag, FIFO and semaphores) and may
 * still run when a program resets the device or exits with a communicator
 * alive -- nccl-tests' parallel init (-p 1) does both, and its ranks crashed
 * in the watcher when a peer left after the reset. Here: an abort object and
 * a mapped allocation made, cudaDeviceReset, then the abort raised (the
 * watcher's store), the memory written, and both freed: no fault, the flag
 * reads raised. Exits 77 (skipped) without a GPU. */
#include <cuda_runtime_api.h>
#include <string.h>

#include "gpu/gpu.h"
#include "harness.h"
#include "mscclpp/abort.h"

static void testStoresAfterDeviceReset(void) {
  mscclppAbort_t abort = NULL;
  void *host = NULL, *dev = NULL;
  CHECK_RES(mscclppAbortCreate(0, &abort), mscclppSuccess);
  CHECK_RES(mscclppGpuHostAllocMapped(0, 3 * 4096 + 5, &host, &dev), mscclppSuccess);
  if (abort == NULL || host == NULL) return;
  CHECK(cudaDeviceReset() == cudaSuccess);
  memset(host, 0x5a, 3 * 4096 + 5);
  CHECK_RES(mscclppAbortRaise(abort, mscclppRemoteError, "a peer left after the device reset"), mscclppSuccess);
  int set = 0;
  CHECK_RES(mscclppAbortIsSet(abort, &set), mscclppSuccess);
  CHECK(set == 1);
  mscclppGpuHostFreeMapped(0, host);
  CHECK_RES(mscclppAbortDestroy(abort), mscclppSuccess);
}

int main(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) harnessSkip("no GPU");
  RUN(testStoresAfterDeviceReset);
  return harnessFinish();
}
