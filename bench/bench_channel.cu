/* SPDX-License-Identifier: MIT */
/*
 * Channel benchmarks on a GPU, 2 ranks (sharing one GPU under MPS, or one
 * GPU each), each figure next to the raw operation timed in the same run:
 *
 *   mscclpp-run -n 2 --mps -- bench_channel [quick]
 *
 *  (1) port channel 8-byte putWithSignal ping-pong (rank 0 puts+signals,
 *      rank 1 waits and answers), one kernel thread per rank, timed in the
 *      kernel. (1a) the default: semaphore in pinned host memory, the 8
 *      bytes stored by the kernel through the IPC mapping and the signal a
 *      CPU store by the proxy; (1b) semaphore in device memory (the proxy
 *      writes payload and signal with one cuStreamBatchMemOp); (1c) host
 *      semaphore, payload inside the trigger written by the proxy; (1d)
 *      copy engine + stream-ordered signal; (1e)/(1f) signal only, host /
 *      device semaphore.
 *      Goal <= 10 us per round trip (MSCCL++'s figure: bench/RESULTS.md,
 *      "bench_channel").
 *  (2) memory channel signal/wait ping-pong against the raw flag ping-pong
 *      through the same CUDA IPC mapping (volatile store to the peer, spin on
 *      a volatile load of the own flag). Goal <= 1.0 us (the raw
 *      ping-pong's figure: bench/RESULTS.md, "bench_channel", row (2r)).
 *      Rows: (2a) system-scope release/acquire (forced; what channels used
 *      before the same-device check), (2) the scope the channel chose (gpu
 *      when both ranks share the device), (2c) that scope with the counters
 *      in registers (the *Counted calls), (2d) counters in registers at
 *      system scope. (2o)/(2p): the raw ORDERED ping-pong
 *      (a release store, an acquiring spin; nothing else) at gpu / system
 *      scope -- the floor for a signal/wait that orders data.
 *  (3) put bandwidth, rank 0 -> rank 1's buffer, 1 MiB .. 1 GiB (64 MiB in
 *      quick mode): cudaMemcpyAsync D2D into the peer's mapping (the raw
 *      copy, `iters` of them back to back in a stream), memory channel put
 *      (all SMs, `iters` kernels back to back), port channel put (one kernel
 *      pushing `iters` puts, one trigger each, then a flush; the proxy's
 *      cudaMemcpyAsync). Goal >= 90% of cudaMemcpyAsync at >= 64 MiB.
 * Exits 77 without a GPU; needs exactly 2 ranks.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mscclpp/comm.h"
#include "mscclpp/connection.h"
#include "mscclpp/memory.h"
#include "mscclpp/memory_channel.h"
#include "mscclpp/port_channel.h"

#include "bench_check.h"

/* results[0]: status, results[1]: elapsed ns */

/* signalOnly: signal instead of putWithSignal (what the data costs on top). */
__device__ mscclppResult_t portSend(const mscclppPortChannelDeviceHandle* h, uint64_t dstOff, int signalOnly) {
  return signalOnly ? mscclppPortChannelDeviceSignal(h) : mscclppPortChannelDevicePutWithSignal(h, h->dst, dstOff, h->src, 0, 8);
}

__global__ void portPingPong(mscclppPortChannelDeviceHandle h, uint64_t dstOff, int iters, int warmup, int initiator,
                             int signalOnly, uint64_t* results) {
  mscclppResult_t r = mscclppSuccess;
  uint64_t t0 = 0;
  for (int i = 0; i < warmup + iters && r == mscclppSuccess; i++) {
    if (i == warmup) t0 = mscclppClockNs();
    if (initiator) {
      r = portSend(&h, dstOff, signalOnly);
      if (r == mscclppSuccess) r = mscclppPortChannelDeviceWait(&h);
    } else {
      r = mscclppPortChannelDeviceWait(&h);
      if (r == mscclppSuccess) r = portSend(&h, dstOff, signalOnly);
    }
  }
  results[1] = mscclppClockNs() - t0;
  results[0] = (uint64_t)r;
}

/* The wait as it was before the fence: spin with relaxed loads, then a
 * second, acquiring load of the word (gpu scope), no abort/clock checks
 * except a spin bound. For comparison only. */
__device__ mscclppResult_t waitByAcquireLoad(const mscclppMemoryChannelDeviceHandle* h, mscclppSemaphoreDeviceCounts* c) {
  uint64_t want = c->consumed + 1, spins = 0;
  while (mscclppLoadRelaxedSys64(h->sem.inbound) < want)
    if (++spins > (1ull << 32)) return mscclppTimeout;
  (void)mscclppLoadAcquireGpu64(h->sem.inbound);
  c->consumed = want;
  return mscclppSuccess;
}

/* The wait spinning with acquiring loads (gpu scope) every poll: no second
 * load after the value is seen. For comparison only. */
__device__ mscclppResult_t waitByAcquireSpin(const mscclppMemoryChannelDeviceHandle* h, mscclppSemaphoreDeviceCounts* c) {
  uint64_t want = c->consumed + 1, spins = 0;
  while (mscclppLoadAcquireGpu64(h->sem.inbound) < want)
    if (++spins > (1ull << 32)) return mscclppTimeout;
  c->consumed = want;
  return mscclppSuccess;
}

/* counted: the semaphore counters in registers for the whole loop
 * (mscclppMemoryChannelDeviceCountsLoad/Store), else the plain calls;
 * counted == 2: in registers, waits by waitByAcquireLoad; counted == 3: in
 * registers, relaxed signal/wait (synchronization only); counted == 4: in
 * registers, waits by waitByAcquireSpin. */
__global__ void memPingPong(mscclppMemoryChannelDeviceHandle h, int iters, int warmup, int initiator, int counted,
                            uint64_t* results) {
  mscclppResult_t r = mscclppSuccess;
  uint64_t t0 = 0;
  if (counted) {
    mscclppSemaphoreDeviceCounts c = mscclppMemoryChannelDeviceCountsLoad(&h);
    for (int i = 0; i < warmup + iters && r == mscclppSuccess; i++) {
      if (i == warmup) t0 = mscclppClockNs();
      if (counted == 3) { /* relaxed: synchronization only */
        if (initiator) {
          mscclppMemoryChannelDeviceRelaxedSignalCounted(&h, &c);
          r = mscclppMemoryChannelDeviceRelaxedWaitCounted(&h, &c);
        } else {
          r = mscclppMemoryChannelDeviceRelaxedWaitCounted(&h, &c);
          mscclppMemoryChannelDeviceRelaxedSignalCounted(&h, &c);
        }
      } else if (initiator) {
        mscclppMemoryChannelDeviceSignalCounted(&h, &c);
        r = counted == 2   ? waitByAcquireLoad(&h, &c)
            : counted == 4 ? waitByAcquireSpin(&h, &c)
                           : mscclppMemoryChannelDeviceWaitCounted(&h, &c);
      } else {
        r = counted == 2   ? waitByAcquireLoad(&h, &c)
            : counted == 4 ? waitByAcquireSpin(&h, &c)
                           : mscclppMemoryChannelDeviceWaitCounted(&h, &c);
        mscclppMemoryChannelDeviceSignalCounted(&h, &c);
      }
    }
    results[1] = mscclppClockNs() - t0;
    mscclppMemoryChannelDeviceCountsStore(&h, &c);
  } else {
    for (int i = 0; i < warmup + iters && r == mscclppSuccess; i++) {
      if (i == warmup) t0 = mscclppClockNs();
      if (initiator) {
        mscclppMemoryChannelDeviceSignal(&h);
        r = mscclppMemoryChannelDeviceWait(&h);
      } else {
        r = mscclppMemoryChannelDeviceWait(&h);
        mscclppMemoryChannelDeviceSignal(&h);
      }
    }
    results[1] = mscclppClockNs() - t0;
  }
  results[0] = (uint64_t)r;
}

/* The raw operations: the round number stored into the peer's flag
 * through the IPC mapping, a spin on the own flag; no counters, no abort
 * checks (bounded so a broken peer cannot hang it). mode 0: volatile store
 * and spin (no ordering: the raw limit); 1 / 2: a release store and an
 * acquiring spin at gpu / system scope -- what the memory model's
 * release/acquire alone costs on this GPU, the floor for any signal/wait
 * that orders data. */
static __device__ __forceinline__ void rawStore(uint64_t* p, uint64_t v, int mode) {
  if (mode == 0)
    *(volatile uint64_t*)p = v;
  else if (mode == 1)
    mscclppStoreReleaseGpu64(p, v);
  else
    mscclppStoreReleaseSys64(p, v);
}

static __device__ __forceinline__ uint64_t rawLoad(const uint64_t* p, int mode) {
  return mode == 0 ? *(const volatile uint64_t*)p : mode == 1 ? mscclppLoadAcquireGpu64(p) : mscclppLoadAcquireSys64(p);
}

__global__ void rawPingPong(uint64_t* peerFlag, uint64_t* myFlag, int iters, int warmup, int initiator, int mode,
                            uint64_t* results) {
  uint64_t t0 = 0;
  int ok = 1;
  for (int i = 1; i <= warmup + iters && ok; i++) {
    if (i == warmup + 1) t0 = mscclppClockNs();
    uint64_t spins = 0;
    if (initiator) rawStore(peerFlag, (uint64_t)i, mode);
    while (rawLoad(myFlag, mode) < (uint64_t)i)
      if (++spins > (1ull << 32)) ok = 0;
    if (!initiator) rawStore(peerFlag, (uint64_t)i, mode);
  }
  results[1] = mscclppClockNs() - t0;
  results[0] = ok ? 0 : (uint64_t)mscclppTimeout;
}

__global__ void memPut(mscclppMemoryChannelDeviceHandle h, uint64_t dstOff, uint64_t srcOff, uint64_t bytes) {
  mscclppMemoryChannelDevicePut(&h, dstOff, srcOff, bytes, blockIdx.x * blockDim.x + threadIdx.x,
                                gridDim.x * blockDim.x);
}

/* `count` puts back to back (the proxy queues each copy as it comes, as a
 * stream of cudaMemcpyAsync would), then one flush. */
__global__ void portPut(mscclppPortChannelDeviceHandle h, uint64_t dstOff, uint64_t bytes, int count,
                        uint64_t* results) {
  mscclppResult_t r = mscclppSuccess;
  for (int i = 0; i < count && r == mscclppSuccess; i++) r = mscclppPortChannelDevicePut(&h, h.dst, dstOff, h.src, 0, bytes);
  if (r == mscclppSuccess) r = mscclppPortChannelDeviceFlush(&h);
  results[0] = (uint64_t)r;
}

static uint64_t* dRes;
static uint64_t hRes[2];

static double finish(mscclppComm_t comm, cudaStream_t s, const char* what) {
  CUDA_OK(cudaStreamSynchronize(s));
  CUDA_OK(cudaMemcpy(hRes, dRes, sizeof(hRes), cudaMemcpyDeviceToHost));
  if (hRes[0] != 0) {
    fprintf(stderr, "rank %d: %s failed: %s\n", rank, what, mscclppGetErrorString((mscclppResult_t)hRes[0]));
    exit(1);
  }
  MSCCLPP_OK(mscclppBootstrapBarrier(comm));
  return (double)hRes[1];
}

int main(int argc, char** argv) {
  int quick = argc > 1 && strcmp(argv[1], "quick") == 0;
  mscclppComm_t comm = NULL;
  int nranks = 0, dev = 0, ndev = 0;
  int joined = benchGpuJoin(&comm, &nranks, &dev);
  if (joined != 0) return joined;
  if (nranks != 2) {
    fprintf(stderr, "bench_channel: run with 2 ranks (mscclpp-run -n 2 --mps -- bench_channel)\n");
    return 2;
  }
  CUDA_OK(cudaGetDeviceCount(&ndev));
  cudaDeviceProp prop;
  CUDA_OK(cudaGetDeviceProperties(&prop, dev));
  const int peer = 1 - rank;
  const uint64_t maxBytes = quick ? (64ull << 20) : (1ull << 30);
  const uint64_t half = maxBytes + 4096; /* SRC [0, half) | DST [half, 2 half) */
  const uint64_t flagOff = 2 * half;     /* raw ping-pong flags */
  const uint64_t total = 2 * half + 4096;

  void* buf = NULL;
  mscclppRegisteredMemory_t mem;
  MSCCLPP_OK(mscclppMemAlloc(comm, mscclppMemKindDevice, total, &buf));
  MSCCLPP_OK(mscclppMemoryRegister(comm, buf, total, mscclppTransportCudaIpc, &mem));
  mscclppConnection_t conn;
  MSCCLPP_OK(mscclppConnectionCreate(comm, peer, 1, mscclppTransportCudaIpc, &conn));
  mscclppPortChannelConfig pc = MSCCLPP_PORT_CHANNEL_CONFIG_INITIALIZER;
  pc.tag = 2;
  pc.local = mem;
  mscclppPortChannel_t port, portDev;
  MSCCLPP_OK(mscclppPortChannelCreate(comm, conn, &pc, &port));
  pc.tag = 3;
  pc.semaphoreMem = mscclppPortSemaphoreDevice;
  MSCCLPP_OK(mscclppPortChannelCreate(comm, conn, &pc, &portDev));
  mscclppMemoryChannelConfig mc = MSCCLPP_MEMORY_CHANNEL_CONFIG_INITIALIZER;
  mc.tag = 4;
  mc.local = mem;
  mscclppMemoryChannel_t memCh;
  MSCCLPP_OK(mscclppMemoryChannelCreate(comm, conn, &mc, &memCh));
  mscclppPortChannelDeviceHandle ph, phDev;
  mscclppMemoryChannelDeviceHandle mh;
  MSCCLPP_OK(mscclppPortChannelGetDeviceHandle(port, &ph));
  MSCCLPP_OK(mscclppPortChannelGetDeviceHandle(portDev, &phDev));
  MSCCLPP_OK(mscclppMemoryChannelGetDeviceHandle(memCh, &mh));
  CUDA_OK(cudaMalloc(&dRes, sizeof(hRes)));
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  MSCCLPP_OK(mscclppBootstrapBarrier(comm));
  if (rank == 0) {
    printf("bench_channel: 2 ranks on %s (device %d of %d, %d SMs)%s\n", prop.name, dev, ndev,
           prop.multiProcessorCount, ndev == 1 ? ", sharing it (run under MPS)" : "");
    printf("%-64s %12s %12s\n", "measurement", "value", "vs raw");
  }

  /* (1) port channel ping-pong */
  const int ppIters = quick ? 2000 : 20000, ppWarm = 200;
  /* rows (1a)..(1h), see the top of the file */
  enum { PORT_VARIANTS = 6 };
  double portNs[PORT_VARIANTS];
  mscclppPortChannelDeviceHandle pv[PORT_VARIANTS];
  pv[0] = ph;
  pv[1] = phDev;
  pv[2] = ph;
  pv[2].flags &= ~MSCCLPP_PORT_CHANNEL_FLAG_STORE;
  pv[3] = ph;
  pv[3].flags &= ~(MSCCLPP_PORT_CHANNEL_FLAG_INLINE | MSCCLPP_PORT_CHANNEL_FLAG_STORE);
  pv[4] = ph;
  pv[5] = phDev;
  for (int v = 0; v < PORT_VARIANTS; v++) {
    portPingPong<<<1, 1, 0, s>>>(pv[v], half, ppIters, ppWarm, rank == 0, v == 4 || v == 5, dRes);
    portNs[v] = finish(comm, s, "port ping-pong") / ppIters;
  }
  /* (2) memory channel vs raw */
  const int mpIters = quick ? 20000 : 200000;
  double rawModeNs[3]; /* volatile, ordered gpu scope, ordered system scope */
  for (int mode = 0; mode < 3; mode++) {
    CUDA_OK(cudaMemset((char*)buf + flagOff, 0, 4096));
    CUDA_OK(cudaDeviceSynchronize()); /* the memset is asynchronous: done before the peer's first store */
    MSCCLPP_OK(mscclppBootstrapBarrier(comm));
    rawPingPong<<<1, 1, 0, s>>>((uint64_t*)(mh.dst + flagOff), (uint64_t*)(mh.src + flagOff), mpIters, 1000,
                                rank == 0, mode, dRes);
    rawModeNs[mode] = finish(comm, s, "raw ping-pong") / mpIters;
  }
  const double rawNs = rawModeNs[0], *rawOrdNs = rawModeNs + 1;
  /* [0] plain calls, system scope (what every channel used before the scope
   *     check); [1] plain calls, the channel's scope; [2] counters in
   *     registers, the channel's scope; [3] counters in registers, system
   *     scope. The system-scope rows force the handle's scope field; both
   *     ranks do the same. */
  mscclppMemoryChannelDeviceHandle mhSys = mh;
  mhSys.sem.scope = MSCCLPP_SEMAPHORE_SCOPE_SYS;
  double memVar[7];
  for (int v = 0; v < 7; v++) {
    memPingPong<<<1, 1, 0, s>>>(v == 0 || v == 3 ? mhSys : mh, mpIters, 1000, rank == 0,
                                v == 4 ? 2 : v == 5 ? 3 : v == 6 ? 4 : v >= 2, dRes);
    memVar[v] = finish(comm, s, "memory channel ping-pong") / mpIters;
  }
  double memNs = memVar[1];
  const char* chScope = mh.sem.scope == MSCCLPP_SEMAPHORE_SCOPE_GPU ? "gpu" : "system";
  if (rank == 0) {
    static const char* const portRow[PORT_VARIANTS] = {
        "(1a) port putWithSignal 8 B ping-pong, default (round trip)",
        "(1b) the same, semaphore in device memory (stream writes)",
        "(1c) the same, host semaphore, payload written by the proxy",
        "(1d) the same, inline off (copy engine + stream-ordered signal)",
        "(1e) port signal-only ping-pong, default (host semaphore)",
        "(1f) port signal-only ping-pong, device semaphore"};
    for (int v = 0; v < PORT_VARIANTS; v++) printf("%-64s %9.2f us %12s\n", portRow[v], portNs[v] / 1e3, "");
    printf("%-64s %9.2f us   (channel flags 0x%x)\n", "     (1a) one way", portNs[0] / 2e3, ph.flags);
    printf("%-64s %9.3f us %11.2fx\n", "(2r) raw flag ping-pong through the CUDA IPC mapping (round trip)", rawNs / 1e3,
           1.0);
    printf("%-64s %9.3f us %11.2fx\n", "(2o) raw ordered ping-pong (st.release/ld.acquire), gpu scope",
           rawOrdNs[0] / 1e3, rawOrdNs[0] / rawNs);
    printf("%-64s %9.3f us %11.2fx\n", "(2p) raw ordered ping-pong (st.release/ld.acquire), system scope",
           rawOrdNs[1] / 1e3, rawOrdNs[1] / rawNs);
    char label[128];
    printf("%-64s %9.3f us %11.2fx\n", "(2a) memory channel signal/wait ping-pong, system scope", memVar[0] / 1e3,
           memVar[0] / rawNs);
    snprintf(label, sizeof(label), "(2)  memory channel signal/wait ping-pong, channel's scope (%s)", chScope);
    printf("%-64s %9.3f us %11.2fx\n", label, memVar[1] / 1e3, memVar[1] / rawNs);
    snprintf(label, sizeof(label), "(2c) the same, counters in registers (%s scope)", chScope);
    printf("%-64s %9.3f us %11.2fx\n", label, memVar[2] / 1e3, memVar[2] / rawNs);
    printf("%-64s %9.3f us %11.2fx\n", "(2d) the same, counters in registers, system scope", memVar[3] / 1e3,
           memVar[3] / rawNs);
    snprintf(label, sizeof(label), "(2e) as (2c), acquire by a second load (the old wait), %s", chScope);
    printf("%-64s %9.3f us %11.2fx\n", label, memVar[4] / 1e3, memVar[4] / rawNs);
    printf("%-64s %9.3f us %11.2fx\n", "(2f) relaxed signal/wait (no data ordered), counters in registers",
           memVar[5] / 1e3, memVar[5] / rawNs);
    snprintf(label, sizeof(label), "(2g) as (2c), spinning with acquire loads, %s", chScope);
    printf("%-64s %9.3f us %11.2fx\n", label, memVar[6] / 1e3, memVar[6] / rawNs);
    printf("goal (1) <= 10 us round trip (MSCCL++ 48 us), default channel (1a): %s (%.2f us)\n",
           portNs[0] <= 10e3 ? "met" : "NOT met", portNs[0] / 1e3);
    printf("goal (2) <= 1.0 us (plain calls, row (2)): %s; with counters in registers (2c): %s\n",
           memNs <= 1e3 ? "met" : "NOT met", memVar[2] <= 1e3 ? "met" : "NOT met");
    printf("     (2c) against the raw ordered floor (2o): %.2fx; relaxed (2f) against raw (2r): %.2fx\n",
           memVar[2] / rawOrdNs[0], memVar[5] / rawNs);
    printf("\n(3) put bandwidth rank 0 -> rank 1, GB/s (1e9 B/s)\n%12s %14s %20s %20s\n", "size", "cudaMemcpyAsync",
           "memory put (ratio)", "port put (ratio)");
  }
  fflush(stdout);

  /* (3) bandwidth */
  cudaEvent_t e0, e1;
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));
  int blocks = prop.multiProcessorCount * 4;
  int goalMet = 1;
  for (uint64_t bytes = 1ull << 20; bytes <= maxBytes; bytes *= 4) {
    int iters = (int)((4ull << 30) / bytes);
    if (iters > 50) iters = 50;
    if (iters < 5) iters = 5;
    float ms[3] = {0, 0, 0};
    if (rank == 0) {
      for (int k = 0; k < 3; k++) {
        for (int i = -1; i < iters; i++) { /* i == -1: warm-up, untimed */
          if (i == 0) CUDA_OK(cudaEventRecord(e0, s));
          if (k == 0) {
            CUDA_OK(cudaMemcpyAsync(mh.dst + half, mh.src, bytes, cudaMemcpyDeviceToDevice, s));
          } else if (k == 1) {
            memPut<<<blocks, 512, 0, s>>>(mh, half, 0, bytes);
          } else if (i == -1) {
            portPut<<<1, 1, 0, s>>>(ph, half, bytes, 1, dRes);
          } else if (i == 0) {
            portPut<<<1, 1, 0, s>>>(ph, half, bytes, iters, dRes);
          }
        }
        CUDA_OK(cudaEventRecord(e1, s));
        CUDA_OK(cudaStreamSynchronize(s));
        CUDA_OK(cudaEventElapsedTime(&ms[k], e0, e1));
        if (k == 2) {
          CUDA_OK(cudaMemcpy(hRes, dRes, sizeof(hRes), cudaMemcpyDeviceToHost));
          if (hRes[0] != 0) {
            fprintf(stderr, "port put failed: %s\n", mscclppGetErrorString((mscclppResult_t)hRes[0]));
            exit(1);
          }
        }
      }
      double gbs[3];
      for (int k = 0; k < 3; k++) gbs[k] = (double)bytes * iters / (ms[k] * 1e-3) / 1e9;
      printf("%9llu MiB %14.1f %12.1f (%5.2f) %12.1f (%5.2f)\n", (unsigned long long)(bytes >> 20), gbs[0], gbs[1],
             gbs[1] / gbs[0], gbs[2], gbs[2] / gbs[0]);
      if (bytes >= (64ull << 20) && (gbs[1] < 0.9 * gbs[0] || gbs[2] < 0.9 * gbs[0])) goalMet = 0;
      fflush(stdout);
    }
    MSCCLPP_OK(mscclppBootstrapBarrier(comm));
  }
  mscclppResult_t async = mscclppSuccess;
  MSCCLPP_OK(mscclppCommGetAsyncError(comm, &async));
  if (rank == 0)
    printf("goal (3) >= 90%% of cudaMemcpyAsync at >= 64 MiB: %s; async error: %s\n", goalMet ? "met" : "NOT met",
           mscclppGetErrorString(async));

  MSCCLPP_OK(mscclppBootstrapBarrier(comm));
  MSCCLPP_OK(mscclppPortChannelDestroy(port));
  MSCCLPP_OK(mscclppPortChannelDestroy(portDev));
  MSCCLPP_OK(mscclppMemoryChannelDestroy(memCh));
  MSCCLPP_OK(mscclppConnectionDestroy(conn));
  MSCCLPP_OK(mscclppBootstrapBarrier(comm));
  MSCCLPP_OK(mscclppMemoryDeregister(mem));
  MSCCLPP_OK(mscclppMemFree(comm, buf));
  CUDA_OK(cudaStreamDestroy(s));
  CUDA_OK(cudaFree(dRes));
  MSCCLPP_OK(mscclppCommDestroy(comm));
  return 0;
}
