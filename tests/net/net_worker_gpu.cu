/*
 * GPU memory over the network transport through the staging path (a
 * provider without FI_HMEM, e.g. tcp;ofi_rxm), 2 ranks started by
 * mscclpp-run (under MPS when they share a GPU):
 *
 *   MSCCLPP_NET_PROVIDER='tcp;ofi_rxm' MSCCLPP_NET_IFNAME==lo \
 *     mscclpp-run -n 2 --mps -- net_worker_gpu [MAXBYTES]
 *
 * Each rank registers cudaMalloc memory (SRC | DST) for transport Net,
 * connects to the other rank with Net and builds a port channel; for sizes
 * from 1 B to MAXBYTES (odd sizes and offsets, several 1 MiB staging chunks
 * at the top) both ranks run, one kernel per operation, put+signal,
 * putWithSignal, putWithSignalAndFlush and put+flush+signal; the receiving
 * kernel compares its DST with the expected bytes right after its wait
 * returns (a semaphore raised before the last chunk is in GPU memory fails
 * there), and the host checks the guard bytes. Puts of 1..8 bytes run
 * twice: inside the trigger (the handle's INLINE flag, which Net sets; the
 * bytes and the signal travel as one staging message) and as copies.
 * Exits 77 without a GPU.
 * Prints "rank R: gpu staged passed".
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "mscclpp/comm.h"
#include "mscclpp/connection.h"
#include "mscclpp/memory.h"
#include "mscclpp/port_channel.h"

#define GUARD 0xA5

static int rank = -1;

#define CUDA_CHECK(expr)                                                                                     \
  do {                                                                                                       \
    cudaError_t e_ = (expr);                                                                                 \
    if (e_ != cudaSuccess) {                                                                                 \
      fprintf(stderr, "rank %d: %s:%d: %s: %s\n", rank, __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
      harnessFailures_++;                                                                                    \
    }                                                                                                        \
  } while (0)

enum { PUT_SIGNAL, PUT_WITH_SIGNAL, PUT_WITH_SIGNAL_FLUSH, PUT_FLUSH_SIGNAL, OPS };

__global__ void opKernel(mscclppPortChannelDeviceHandle h, int op, uint64_t dstOff, uint64_t srcOff, uint64_t size,
                         const volatile uint8_t* dst, const uint8_t* expect, unsigned long long* firstBad,
                         int* status) {
  __shared__ int res;
  if (threadIdx.x == 0) {
    mscclppResult_t r;
    switch (op) {
      case PUT_SIGNAL:
        r = mscclppPortChannelDevicePut(&h, h.dst, dstOff, h.src, srcOff, size);
        if (r == mscclppSuccess) r = mscclppPortChannelDeviceSignal(&h);
        break;
      case PUT_WITH_SIGNAL: r = mscclppPortChannelDevicePutWithSignal(&h, h.dst, dstOff, h.src, srcOff, size); break;
      case PUT_WITH_SIGNAL_FLUSH:
        r = mscclppPortChannelDevicePutWithSignalAndFlush(&h, h.dst, dstOff, h.src, srcOff, size);
        break;
      default:
        r = mscclppPortChannelDevicePut(&h, h.dst, dstOff, h.src, srcOff, size);
        if (r == mscclppSuccess) r = mscclppPortChannelDeviceFlush(&h);
        if (r == mscclppSuccess) r = mscclppPortChannelDeviceSignal(&h);
        break;
    }
    if (r == mscclppSuccess) r = mscclppPortChannelDeviceWait(&h);
    res = (int)r;
    *status = res;
  }
  __syncthreads();
  if (res != 0) return;
  for (uint64_t i = threadIdx.x; i < size; i += blockDim.x)
    if (dst[i] != expect[i]) {
      atomicMin(firstBad, (unsigned long long)i);
      break;
    }
}

__global__ void ackKernel(mscclppPortChannelDeviceHandle h, int* status) {
  mscclppResult_t r = mscclppPortChannelDeviceFlush(&h);
  if (r == mscclppSuccess) r = mscclppPortChannelDeviceSignal(&h);
  if (r == mscclppSuccess) r = mscclppPortChannelDeviceWait(&h);
  *status = (int)r;
}

static void pattern(uint8_t* p, size_t n, int r, int iter) {
  uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(r + 1) + (uint64_t)iter * 0x632be59bd9b4e019ull;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    p[i] = (uint8_t)x;
  }
}

int main(int argc, char** argv) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    printf("SKIP: no GPU\n");
    return 77;
  }
  size_t maxBytes = argc > 1 ? strtoull(argv[1], NULL, 0) : (64u << 20);
  mscclppComm_t comm;
  if (mscclppCommInitFromEnv(&comm) != mscclppSuccess) {
    fprintf(stderr, "init: %s\n", mscclppGetLastError());
    return 1;
  }
  int nranks = 0, localRank = 0;
  mscclppCommRank(comm, &rank);
  mscclppCommSize(comm, &nranks);
  mscclppCommLocalRank(comm, &localRank);
  if (nranks != 2) {
    fprintf(stderr, "net_worker_gpu runs with 2 ranks\n");
    return 2;
  }
  CUDA_CHECK(cudaSetDevice(localRank % ndev));
  const int peer = 1 - rank;
  const size_t S = maxBytes + 64;
  void* p = NULL;
  CHECK_RES(mscclppMemAlloc(comm, mscclppMemKindDevice, 2 * S, &p), mscclppSuccess);
  uint8_t* dbuf = (uint8_t*)p;
  uint8_t *dExpect = NULL, *hbuf = NULL, *hexp = NULL;
  unsigned long long* dFirstBad = NULL;
  int* dStatus = NULL;
  CUDA_CHECK(cudaMalloc(&dExpect, S));
  CUDA_CHECK(cudaMalloc(&dFirstBad, sizeof(*dFirstBad)));
  CUDA_CHECK(cudaMalloc(&dStatus, sizeof(int)));
  CUDA_CHECK(cudaMallocHost(&hbuf, S));
  hexp = (uint8_t*)malloc(S);
  CUDA_CHECK(cudaMemset(dbuf + S, GUARD, S));
  mscclppConnection_t conn = NULL;
  CHECK_RES(mscclppConnectionCreate(comm, peer, 51, mscclppTransportNet, &conn), mscclppSuccess);
  mscclppRegisteredMemory_t mem = NULL;
  CHECK_RES(mscclppRegisterMemory(comm, dbuf, 2 * S, mscclppTransportNet, &mem), mscclppSuccess);
  mscclppPortChannelConfig pc = MSCCLPP_PORT_CHANNEL_CONFIG_INITIALIZER;
  pc.tag = 52;
  pc.local = mem;
  mscclppPortChannel_t ch = NULL;
  CHECK_RES(mscclppPortChannelCreate(comm, conn, &pc, &ch), mscclppSuccess);
  mscclppPortChannelDeviceHandle h;
  CHECK_RES(mscclppPortChannelGetDeviceHandle(ch, &h), mscclppSuccess);
  if (harnessFailures_) return 1;

  CHECK(h.flags & MSCCLPP_PORT_CHANNEL_FLAG_INLINE);
  const uint64_t sizes[][3] = {{1, 0, 0},         {8, 0, 0},           {3, 1, 2},             {4, 4, 8},
                               {63, 7, 1},          {4097, 13, 5},         {1 << 20, 0, 0},
                               {(1 << 20) + 7, 5, 3}, {(3 << 20) + 1, 1, 2}, {16 << 20, 0, 0}, {64 << 20, 0, 0}};
  int iter = 0;
  for (size_t c = 0; c < sizeof(sizes) / sizeof(sizes[0]) && !harnessFailures_; c++) {
    uint64_t size = sizes[c][0], srcOff = sizes[c][1], dstOff = sizes[c][2];
    if (size + srcOff > S || size + dstOff > S - 64 + 64) continue;
    /* small puts: OPS inline, then OPS as copies */
    const int runs = size <= MSCCLPP_TRIGGER_INLINE_MAX ? 2 * OPS : OPS;
    for (int run = 0; run < runs && !harnessFailures_; run++, iter++) {
      const int op = run % OPS;
      mscclppPortChannelDeviceHandle hOp = h;
      if (run >= OPS) hOp.flags &= ~MSCCLPP_PORT_CHANNEL_FLAG_INLINE;
      pattern(hbuf, size, rank, iter); /* what I send */
      CUDA_CHECK(cudaMemcpy(dbuf + srcOff, hbuf, size, cudaMemcpyHostToDevice));
      pattern(hexp, size, peer, iter); /* what I must receive */
      CUDA_CHECK(cudaMemcpy(dExpect, hexp, size, cudaMemcpyHostToDevice));
      CUDA_CHECK(cudaMemset(dFirstBad, 0xff, sizeof(*dFirstBad)));
      opKernel<<<1, 256>>>(hOp, op, S + dstOff, srcOff, size, dbuf + S + dstOff, dExpect, dFirstBad, dStatus);
      CUDA_CHECK(cudaDeviceSynchronize());
      int st = -1;
      unsigned long long bad = 0;
      CUDA_CHECK(cudaMemcpy(&st, dStatus, sizeof(st), cudaMemcpyDeviceToHost));
      CUDA_CHECK(cudaMemcpy(&bad, dFirstBad, sizeof(bad), cudaMemcpyDeviceToHost));
      if (st != 0 || bad != ~0ull)
        fprintf(stderr,
                "rank %d: op %d (%s), %llu bytes: status %d, first bad byte %lld (the semaphore overtook its "
                "data?)\n",
                rank, op, (hOp.flags & MSCCLPP_PORT_CHANNEL_FLAG_INLINE) ? "inline" : "copy",
                (unsigned long long)size, st, bad == ~0ull ? -1LL : (long long)bad);
      CHECK(st == 0 && bad == ~0ull);
      uint8_t g[2] = {GUARD, GUARD};
      if (dstOff > 0) CUDA_CHECK(cudaMemcpy(&g[0], dbuf + S + dstOff - 1, 1, cudaMemcpyDeviceToHost));
      CUDA_CHECK(cudaMemcpy(&g[1], dbuf + S + dstOff + size, 1, cudaMemcpyDeviceToHost));
      CHECK(g[0] == GUARD && g[1] == GUARD);
      CUDA_CHECK(cudaMemset(dbuf + S, GUARD, S));
      CUDA_CHECK(cudaDeviceSynchronize());
      ackKernel<<<1, 1>>>(h, dStatus);
      CUDA_CHECK(cudaDeviceSynchronize());
      CUDA_CHECK(cudaMemcpy(&st, dStatus, sizeof(st), cudaMemcpyDeviceToHost));
      CHECK(st == 0);
    }
    printf("rank %d: %llu bytes x %d operations: %s\n", rank, (unsigned long long)size, OPS,
           harnessFailures_ ? "FAILED" : "ok");
  }
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  CHECK_RES(mscclppPortChannelDestroy(ch), mscclppSuccess);
  CHECK_RES(mscclppConnectionDestroy(conn), mscclppSuccess);
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  CHECK_RES(mscclppDeregisterMemory(mem), mscclppSuccess);
  CHECK_RES(mscclppMemFree(comm, dbuf), mscclppSuccess);
  CHECK_RES(mscclppCommDestroy(comm), mscclppSuccess);
  printf("rank %d: gpu staged %s\n", rank, harnessFailures_ ? "FAILED" : "passed");
  return harnessFailures_ ? 1 : 0;
}
