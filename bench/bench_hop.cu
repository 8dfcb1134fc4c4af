/* SPDX-License-Identifier: MIT */
/*
 * What one cross-rank hop costs inside a kernel, with every rank taking
 * part, against the rank count:
 *
 *   mscclpp-run -n N --mps -- bench_hop        (N = 2, 4 or 8)
 *
 * Each rank runs one block with one thread per peer, over memory channels
 * to every peer (CUDA IPC). A round: every thread signals its peer, waits
 * for its peer's signal, then the block synchronizes -- an all-to-all
 * barrier, the step every multi-phase collective pays per phase. Rounds per
 * second are timed in the kernel (%globaltimer), 100 000 rounds:
 *   relaxed   relaxed signal/wait (no data ordered: the LL packets' case)
 *   ordered   release/acquire signal/wait (the barriers' case)
 * and, for reference, the same with ONE peer only (ranks paired r ^ 1), the
 * others idle: what the ping-pong rows of bench_channel measure, one way.
 * Exits 77 without a GPU; N must be a power of two.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mscclpp/comm.h"
#include "mscclpp/connection.h"
#include "mscclpp/memory.h"
#include "mscclpp/memory_channel.h"

#include "bench_check.h"

#define MAXR 8


struct Handles {
  mscclppMemoryChannelDeviceHandle h[MAXR];
};

/* thread t serves peer h[t]; npeers threads take part (others idle) */
__global__ void hopRounds(const __grid_constant__ Handles H, int npeers, int iters, int warmup, int ordered,
                          uint64_t* results) {
  const int t = threadIdx.x;
  mscclppResult_t r = mscclppSuccess;
  mscclppSemaphoreDeviceCounts c;
  if (t < npeers) c = mscclppMemoryChannelDeviceCountsLoad(&H.h[t]);
  uint64_t t0 = 0;
  int failed = 0;
  for (int i = 0; i < warmup + iters; i++) {
    if (i == warmup && t == 0) t0 = mscclppClockNs();
    if (t < npeers && r == mscclppSuccess) {
      if (ordered) {
        mscclppMemoryChannelDeviceSignalCounted(&H.h[t], &c);
        r = mscclppMemoryChannelDeviceWaitCounted(&H.h[t], &c);
      } else {
        mscclppMemoryChannelDeviceRelaxedSignalCounted(&H.h[t], &c);
        r = mscclppMemoryChannelDeviceRelaxedWaitCounted(&H.h[t], &c);
      }
    }
    failed = __syncthreads_or(r != mscclppSuccess);
    if (failed) break;
  }
  if (t == 0) {
    results[1] = mscclppClockNs() - t0;
    results[0] = failed ? (uint64_t)mscclppTimeout : 0;
  }
  if (t < npeers) mscclppMemoryChannelDeviceCountsStore(&H.h[t], &c);
}

int main(void) {
  mscclppComm_t comm = NULL;
  int nranks = 0, dev = 0;
  int joined = benchGpuJoin(&comm, &nranks, &dev);
  if (joined != 0) return joined;
  if (nranks < 2 || nranks > MAXR || (nranks & (nranks - 1)) != 0) {
    fprintf(stderr, "bench_hop: run with 2, 4 or 8 ranks\n");
    return 2;
  }
  void* buf = NULL;
  mscclppRegisteredMemory_t mem;
  MSCCLPP_OK(mscclppMemAlloc(comm, mscclppMemKindDevice, 4096, &buf));
  MSCCLPP_OK(mscclppMemoryRegister(comm, buf, 4096, mscclppTransportCudaIpc, &mem));
  Handles all, pair;
  memset(&all, 0, sizeof(all));
  memset(&pair, 0, sizeof(pair));
  mscclppConnection_t conn[MAXR];
  mscclppMemoryChannel_t ch[MAXR];
  for (int d = 1; d < nranks; d++) { /* pairwise order: no rank waits on a busy peer */
    int peer = rank ^ d;
    MSCCLPP_OK(mscclppConnectionCreate(comm, peer, 1, mscclppTransportCudaIpc, &conn[d]));
    mscclppMemoryChannelConfig mc = MSCCLPP_MEMORY_CHANNEL_CONFIG_INITIALIZER;
    mc.tag = 2;
    mc.local = mem;
    MSCCLPP_OK(mscclppMemoryChannelCreate(comm, conn[d], &mc, &ch[d]));
    MSCCLPP_OK(mscclppMemoryChannelGetDeviceHandle(ch[d], &all.h[d - 1]));
    if (d == 1) pair.h[0] = all.h[0];
  }
  uint64_t* dRes;
  CUDA_OK(cudaMalloc(&dRes, 2 * sizeof(uint64_t)));
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const int iters = 100000, warm = 1000;
  const char* rows[4] = {"all peers, relaxed signal/wait", "all peers, ordered signal/wait",
                         "one peer (r^1), relaxed signal/wait", "one peer (r^1), ordered signal/wait"};
  if (rank == 0) printf("bench_hop: %d ranks, one block per rank, %d rounds\n%-44s %12s\n", nranks, iters, "round",
                        "us per round");
  for (int v = 0; v < 4; v++) {
    MSCCLPP_OK(mscclppBootstrapBarrier(comm));
    const int one = v >= 2;
    hopRounds<<<1, 32, 0, s>>>(one ? pair : all, one ? 1 : nranks - 1, iters, warm, v & 1, dRes);
    CUDA_OK(cudaStreamSynchronize(s));
    uint64_t res[2];
    CUDA_OK(cudaMemcpy(res, dRes, sizeof(res), cudaMemcpyDeviceToHost));
    if (res[0] != 0) {
      fprintf(stderr, "rank %d: %s failed\n", rank, rows[v]);
      return 1;
    }
    double us = (double)res[1] / iters / 1e3, all_[MAXR];
    all_[rank] = us;
    MSCCLPP_OK(mscclppBootstrapAllGather(comm, all_, sizeof(double)));
    double mx = 0;
    for (int r = 0; r < nranks; r++) mx = all_[r] > mx ? all_[r] : mx;
    if (rank == 0) printf("%-44s %12.3f\n", rows[v], mx);
    fflush(stdout);
  }
  MSCCLPP_OK(mscclppBootstrapBarrier(comm));
  for (int d = 1; d < nranks; d++) {
    MSCCLPP_OK(mscclppMemoryChannelDestroy(ch[d]));
    MSCCLPP_OK(mscclppConnectionDestroy(conn[d]));
  }
  MSCCLPP_OK(mscclppBootstrapBarrier(comm));
  MSCCLPP_OK(mscclppMemoryDeregister(mem));
  MSCCLPP_OK(mscclppMemFree(comm, buf));
  CUDA_OK(cudaFree(dRes));
  CUDA_OK(cudaStreamDestroy(s));
  MSCCLPP_OK(mscclppCommDestroy(comm));
  return 0;
}
