/* SPDX-License-Identifier: MIT */
// One rank of the --mps test: runs a kernel on GPU (local rank % devices)
// and prints "rank R sum S" (S = 32 when the kernel ran).
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

__global__ void mpsProbeAdd(int* p) { atomicAdd(p, 1); }

int main(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    printf("no GPU\n");
    return 1;
  }
  const char* lr = getenv("MSCCLPP_LOCAL_RANK");
  const char* r = getenv("MSCCLPP_RANK");
  int dev = (lr ? atoi(lr) : 0) % n;
  int* p = NULL;
  int h = 0;
  cudaError_t e = cudaSetDevice(dev);
  if (e == cudaSuccess) e = cudaMalloc(&p, sizeof(int));
  if (e == cudaSuccess) e = cudaMemset(p, 0, sizeof(int));
  if (e == cudaSuccess) {
    mpsProbeAdd<<<1, 32>>>(p);
    e = cudaMemcpy(&h, p, sizeof(int), cudaMemcpyDeviceToHost);
  }
  printf("rank %s dev %d sum %d (%s)\n", r ? r : "?", dev, h, cudaGetErrorString(e));
  if (p != NULL) cudaFree(p);
  return e == cudaSuccess && h == 32 ? 0 : 1;
}
