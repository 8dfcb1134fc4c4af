/* SPDX-License-Identifier: MIT */
/*
 * The seed's test, ported to the seed API as kept by mscclpp/seed.h:
 * ranks join with mscclppCommInitRank(ip:port), gather each other's data
 * sizes with mscclppBootStrapAllGather, declare one connection per peer
 * with mscclppConnect over one device buffer, run mscclppConnectionSetup
 * and mscclppProxyLaunch; then one kernel has a warp per peer: lane 0 puts
 * this rank's slot into the peer's buffer and signals (the seed's data +
 * flag), then waits for the peer's. The kernel is captured in a CUDA graph
 * and replayed; every replay's data is checked (a different pattern each
 * time), and the graph's time per iteration printed. mscclppProxyStop and
 * mscclppCommDestroy end it.
 *
 *   mscclpp-run -n N --mps -- seed_test_gpu [quick]
 *
 * (mscclpp-run sets MSCCLPP_COMM_ID=ip:port, MSCCLPP_RANK, MSCCLPP_NRANKS.)
 * Exits 77 without a GPU.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "mscclpp/seed.h"

#define MAX_RANKS 32

#define CUDA_CHECK(expr)                                                                                \
  do {                                                                                                  \
    cudaError_t e_ = (expr);                                                                            \
    if (e_ != cudaSuccess) {                                                                            \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_));            \
      harnessFailures_++;                                                                               \
    }                                                                                                   \
  } while (0)

/* Each warp w serves one peer: lane 0 does put + signal (in one trigger) and
 * waits for the peer's. The data for round `round` is written by the warp's
 * lanes into this rank's slot first. */
__global__ void seedKernel(const mscclppDevConn* conns, int nconns, int rank, uint64_t slot, const uint32_t* round,
                           int* status) {
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp == 0) {
    /* this rank's slot: slot bytes of (rank, round) */
    uint32_t r = *round;
    uint32_t* mine = (uint32_t*)((char*)conns[0].localBuff + (uint64_t)rank * slot);
    for (uint64_t i = lane; i < slot / 4; i += 32) mine[i] = (uint32_t)(rank * 1000003u) ^ (uint32_t)i ^ (r << 20);
  }
  __syncthreads();
  if (warp >= nconns || lane != 0) return;
  const mscclppDevConn* c = &conns[warp];
  uint64_t off = (uint64_t)rank * slot;
  mscclppResult_t res = mscclppDevConnPutWithSignal(c, off, off, slot);
  if (res == mscclppSuccess) res = mscclppDevConnWait(c);
  if (res != mscclppSuccess) atomicExch(status, (int)res);
}

__global__ void bumpRound(uint32_t* round) { ++*round; }

int main(int argc, char** argv) {
  int quick = argc > 1 && strcmp(argv[1], "quick") == 0;
  int ndevices = 0;
  if (cudaGetDeviceCount(&ndevices) != cudaSuccess || ndevices == 0) harnessSkip("needs a GPU");
  const char* ipPort = getenv("MSCCLPP_COMM_ID");
  const char* r = getenv("MSCCLPP_RANK");
  const char* n = getenv("MSCCLPP_NRANKS");
  if (ipPort == NULL || r == NULL || n == NULL) {
    fprintf(stderr, "run me under mscclpp-run (MSCCLPP_COMM_ID, MSCCLPP_RANK, MSCCLPP_NRANKS)\n");
    return 2;
  }
  int rank = atoi(r), nranks = atoi(n);
  if (nranks < 2 || nranks > MAX_RANKS) {
    fprintf(stderr, "seed_test_gpu: 2..%d ranks\n", MAX_RANKS);
    return 2;
  }
  int ndev = 0;
  CUDA_CHECK(cudaGetDeviceCount(&ndev));
  const char* lr = getenv("MSCCLPP_LOCAL_RANK");
  CUDA_CHECK(cudaSetDevice((lr != NULL ? atoi(lr) : rank) % ndev));

  mscclppComm_t comm = NULL;
  CHECK_RES(mscclppCommInitRank(&comm, nranks, rank, ipPort), mscclppSuccess);
  if (comm == NULL) return 1;
  /* the seed's allgather: every rank's slot size must agree */
  uint64_t slot = quick ? 4096 : (1u << 20);
  int sizes[MAX_RANKS];
  sizes[rank] = (int)slot;
  CHECK_RES(mscclppBootStrapAllGather(comm, sizes, (int)sizeof(int)), mscclppSuccess);
  for (int i = 0; i < nranks; i++) CHECK(sizes[i] == (int)slot);

  size_t bytes = (size_t)nranks * slot;
  void* buf = NULL;
  uint64_t* flag = NULL;
  CUDA_CHECK(cudaMalloc(&buf, bytes));
  CUDA_CHECK(cudaMalloc(&flag, sizeof(uint64_t)));
  CUDA_CHECK(cudaMemset(buf, 0, bytes));
  mscclppDevConn conns[MAX_RANKS];
  int nconns = 0;
  for (int p = 0; p < nranks; p++) {
    if (p == rank) continue;
    CHECK_RES(mscclppConnect(comm, &conns[nconns++], p, buf, bytes, flag, 0, mscclppTransportP2P, NULL),
              mscclppSuccess);
  }
  CHECK_RES(mscclppConnect(comm, &conns[0], 0, buf, bytes, flag, 0, mscclppTransportP2P, "mlx5_0"),
            mscclppInvalidUsage);
  CHECK_RES(mscclppConnectionSetup(comm), mscclppSuccess);
  CHECK_RES(mscclppProxyLaunch(comm), mscclppSuccess);
  if (harnessFailures_) return 1;

  mscclppDevConn* dConns = NULL;
  uint32_t* dRound = NULL;
  int* dStatus = NULL;
  CUDA_CHECK(cudaMalloc(&dConns, sizeof(conns)));
  CUDA_CHECK(cudaMemcpy(dConns, conns, sizeof(conns), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMalloc(&dRound, sizeof(uint32_t)));
  CUDA_CHECK(cudaMemset(dRound, 0, sizeof(uint32_t)));
  CUDA_CHECK(cudaMalloc(&dStatus, sizeof(int)));
  CUDA_CHECK(cudaMemset(dStatus, 0, sizeof(int)));
  /* the copy from pageable memory and the memsets ran on the legacy stream,
   * which the non-blocking stream below does not wait for */
  CUDA_CHECK(cudaDeviceSynchronize());

  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  const int perGraph = 10;
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < perGraph; i++) {
    bumpRound<<<1, 1, 0, stream>>>(dRound);
    seedKernel<<<1, 32 * nconns, 0, stream>>>(dConns, nconns, rank, slot, dRound, dStatus);
  }
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));

  const int launches = quick ? 3 : 50;
  uint32_t* host = (uint32_t*)malloc(bytes);
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  float totalMs = 0;
  for (int l = 0; l < launches && harnessFailures_ == 0; l++) {
    CUDA_CHECK(cudaEventRecord(e0, stream));
    CUDA_CHECK(cudaGraphLaunch(exec, stream));
    CUDA_CHECK(cudaEventRecord(e1, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    if (l > 0) totalMs += ms; /* the first launch warms up */
    int st = -1;
    CUDA_CHECK(cudaMemcpy(&st, dStatus, sizeof(int), cudaMemcpyDeviceToHost));
    CHECK(st == 0);
    /* after the replay every peer's slot holds its last round's data */
    uint32_t round = (uint32_t)((l + 1) * perGraph);
    CUDA_CHECK(cudaMemcpy(host, buf, bytes, cudaMemcpyDeviceToHost));
    for (int p = 0; p < nranks; p++) {
      const uint32_t* s = host + (size_t)p * slot / 4;
      size_t bad = 0;
      for (uint64_t i = 0; i < slot / 4; i++) bad += s[i] != ((uint32_t)(p * 1000003u) ^ (uint32_t)i ^ (round << 20));
      if (bad) fprintf(stderr, "rank %d: launch %d: slot of rank %d has %zu wrong words\n", rank, l, p, bad);
      CHECK(bad == 0);
    }
    /* nobody starts the next replay (which rewrites its slot) before
     * everyone has checked this one */
    CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  }
  if (launches > 1 && harnessFailures_ == 0)
    printf("rank %d: %d peers, %llu bytes each: %.2f us per iteration (put+signal and wait per warp, CUDA graph)\n",
           rank, nconns, (unsigned long long)slot, 1000.0 * totalMs / ((launches - 1) * perGraph));

  CHECK_RES(mscclppProxyStop(comm), mscclppSuccess);
  mscclppResult_t async = mscclppInternalError;
  CHECK_RES(mscclppCommGetAsyncError(comm, &async), mscclppSuccess);
  CHECK(async == mscclppSuccess);
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));
  CUDA_CHECK(cudaStreamDestroy(stream));
  CHECK_RES(mscclppCommDestroy(comm), mscclppSuccess);
  CUDA_CHECK(cudaFree(buf));
  CUDA_CHECK(cudaFree(flag));
  CUDA_CHECK(cudaFree(dConns));
  CUDA_CHECK(cudaFree(dRound));
  CUDA_CHECK(cudaFree(dStatus));
  free(host);
  int ok = harnessFailures_ == 0;
  if (ok) printf("rank %d: seed passed\n", rank);
  fflush(stdout);
  return ok ? 0 : 1;
}
