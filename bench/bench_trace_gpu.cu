/* SPDX-License-Identifier: MIT */
/*
 * What recording a kernel block's start and end costs the kernel, by where
 * the record goes (MSCCLPP_TRACE's GPU events, src/coll/coll_trace.h):
 *
 *   none      no record (tracing off: the kernel tests one parameter)
 *   device    the library's way: the record's number from a counter in
 *             device memory, the record written to a ring in device memory
 *             with two 16-byte stores (mscclppCollTraceBlock itself)
 *   mapped    the same record written to pinned host memory mapped into
 *             the GPU, plain stores, no fence
 *   mapped+release  ... its last word stored with release order at system
 *             scope, as the first version of the GPU events did
 *   numbered  device's record (mscclppCollTraceWrite), numbered by the
 *             launch instead of the counter: what the counter costs
 *   atomic    device's counter alone, no record stored: what the record's
 *             stores cost at the kernel's end
 *   counter+1 store  device's counter and only the record's first 16-byte
 *             store: what the second store adds
 *   moving slot  numbered's stores into a slot that changes every µs
 *             (from the start time, no counter): whether a new slot costs
 *             what rewriting one does not
 *   counter, waited  device's record, its counter's answer awaited at the
 *             block's start instead of at its end
 *   counter, atomicAdd  device's record with its counter taken by CUDA's
 *             atomicAdd instead of the inline PTX the library uses: nvcc
 *             makes it a warp-aggregated add whose answer is shuffled to the
 *             lanes at once, so the thread waits for the trip at the start
 *             (what the library's record did until 2026-12-07)
 *   block counter  device's record numbered by a plain load of a counter
 *             at the start and a plain store of the next number at the end
 *             (no atomic: one block per counter)
 *
 * One block of 256 threads per kernel; the kernel's thread 0 spins for
 * `work` ns first (0, or the length of a small collective), the others
 * wait at a barrier. Timed two ways, each the median of 5 rounds, µs per
 * kernel: 20 000 launches back to back on a stream (eager: the host's
 * launch rate shows when the kernel is shorter), and a CUDA graph of 200
 * launches replayed 100 times (the device's time per kernel alone).
 *
 *   bench_trace_gpu            (exits 77 without a GPU)
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_stats.h"
#include "coll/coll_trace.h"

#define THREADS 256
#define EAGER 20000
#define GRAPH_LEN 200
#define GRAPH_REPLAYS 100
#define ROUNDS 5

enum { NONE, DEVICE, MAPPED, MAPPED_RELEASE, NUMBERED, ATOMIC, ONESTORE, MOVING, WAITED, ATOMICADD, BLOCKCTR, MODES };
static const char* const modeNames[MODES] = {"none",     "device",      "mapped",          "mapped+release",
                                             "numbered", "atomic",      "counter+1 store", "moving slot",
                                             "counter, waited", "counter, atomicAdd", "block counter"};

struct Params {
  struct mscclppCollTraceArgs trace;        /* DEVICE, NUMBERED, ATOMIC, ONESTORE, MOVING */
  struct mscclppCollTraceRecord* mapped;    /* MAPPED, MAPPED_RELEASE */
  uint64_t work;                            /* ns thread 0 spins */
};

static __device__ __forceinline__ void body(uint64_t work) {
  if (threadIdx.x == 0 && work > 0) {
    const uint64_t t0 = mscclppClockNs();
    while (mscclppClockNs() - t0 < work) {
    }
  }
  __syncthreads();
}

template <int MODE>
__global__ void __launch_bounds__(THREADS) recordKernel(const __grid_constant__ Params P) {
  if (MODE == DEVICE) {
    mscclppCollTraceBlock traceBlock(P.trace);
    body(P.work);
    return;
  }
  if (MODE == WAITED || MODE == ATOMICADD || MODE == BLOCKCTR) {
    uint64_t start = 0;
    unsigned long long n = 0;
    unsigned long long* ctr = MSCCLPP_COLL_TRACE_COUNTER(P.trace.ring);
    if (threadIdx.x == 0) {
      start = mscclppClockNs();
      if (MODE == WAITED) {
        n = mscclppCollTraceNumber(P.trace.ring);
        if (n == ~0ull) __trap(); /* reads the answer: the thread waits for it here */
      } else if (MODE == ATOMICADD) {
        n = atomicAdd(ctr, 1ull);
      } else {
        n = *(volatile unsigned long long*)ctr;
      }
    }
    body(P.work);
    if (threadIdx.x != 0) return;
    if (MODE == BLOCKCTR) *(volatile unsigned long long*)ctr = n + 1;
    mscclppCollTraceWrite(P.trace, n, start);
    return;
  }
  if (MODE == NUMBERED || MODE == ATOMIC || MODE == ONESTORE || MODE == MOVING) {
    /* mscclppCollTraceBlock's record without its counter (every launch
     * number 0, or a number from the clock), its counter without the record
     * (the answer kept live by a store that never runs), or its counter and
     * the record's first store */
    uint64_t start = 0;
    unsigned long long n = 0;
    if (threadIdx.x == 0) {
      start = mscclppClockNs();
      if (MODE == ATOMIC || MODE == ONESTORE) n = mscclppCollTraceNumber(P.trace.ring);
    }
    body(P.work);
    if (threadIdx.x != 0) return;
    if (MODE == NUMBERED) {
      mscclppCollTraceWrite(P.trace, 0, start);
    } else if (MODE == MOVING) {
      mscclppCollTraceWrite(P.trace, start >> 10, start);
    } else if (MODE == ONESTORE) {
      struct mscclppCollTraceRecord* r = &P.trace.ring[n & (MSCCLPP_COLL_TRACE_SLOTS - 1)];
      const uint64_t check = (uint64_t)(n + 1) << 32 | ((mscclppClockNs() - start) & 0xffffffffull);
      __asm__ __volatile__("st.global.cg.v2.u64 [%0], {%1, %2};" ::"l"(&r->start), "l"(start), "l"(check) : "memory");
    } else if (start == 0xffffffffffffffffull) {
      P.mapped[0].stamp = n;
    }
    return;
  }
  uint64_t start = 0;
  if (MODE != NONE && threadIdx.x == 0) start = mscclppClockNs();
  body(P.work);
  if (MODE == NONE || threadIdx.x != 0) return;
  /* a slot per launch is enough here: the host never reads them */
  volatile uint64_t* r = reinterpret_cast<volatile uint64_t*>(&P.mapped[blockIdx.x]);
  uint32_t sm;
  __asm__ __volatile__("mov.u32 %0, %%smid;" : "=r"(sm));
  r[0] = start;
  r[1] = mscclppClockNs() - start;
  r[2] = sm;
  if (MODE == MAPPED_RELEASE)
    __asm__ __volatile__("st.release.sys.global.u64 [%0], %1;" ::"l"(r + 3), "l"(start + 1) : "memory");
  else
    r[3] = start + 1;
}

/* One kernel per record, in the modes' order. */
static void (*const kernels[MODES])(const Params) = {
    recordKernel<NONE>,     recordKernel<DEVICE>, recordKernel<MAPPED>,   recordKernel<MAPPED_RELEASE>,
    recordKernel<NUMBERED>, recordKernel<ATOMIC>, recordKernel<ONESTORE>, recordKernel<MOVING>,
    recordKernel<WAITED>,   recordKernel<ATOMICADD>, recordKernel<BLOCKCTR>};

static void launch(int mode, const Params& p, cudaStream_t s) { kernels[mode]<<<1, THREADS, 0, s>>>(p); }

#define CK(x)                                                                         \
  do {                                                                                \
    cudaError_t e_ = (x);                                                             \
    if (e_ != cudaSuccess) {                                                          \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                        \
    }                                                                                 \
  } while (0)

static double eagerUs(int mode, const Params& p, cudaStream_t s, cudaEvent_t a, cudaEvent_t b) {
  for (int i = 0; i < 200; i++) launch(mode, p, s);
  CK(cudaEventRecord(a, s));
  for (int i = 0; i < EAGER; i++) launch(mode, p, s);
  CK(cudaEventRecord(b, s));
  CK(cudaEventSynchronize(b));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, a, b));
  return ms * 1000.0 / EAGER;
}

static double graphUs(int mode, const Params& p, cudaStream_t s, cudaEvent_t a, cudaEvent_t b) {
  cudaGraph_t g;
  cudaGraphExec_t x;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < GRAPH_LEN; i++) launch(mode, p, s);
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&x, g, 0));
  CK(cudaGraphLaunch(x, s));
  CK(cudaEventRecord(a, s));
  for (int i = 0; i < GRAPH_REPLAYS; i++) CK(cudaGraphLaunch(x, s));
  CK(cudaEventRecord(b, s));
  CK(cudaEventSynchronize(b));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, a, b));
  CK(cudaGraphExecDestroy(x));
  CK(cudaGraphDestroy(g));
  return ms * 1000.0 / (GRAPH_LEN * GRAPH_REPLAYS);
}

int main(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    printf("SKIP: needs a GPU\n");
    return 77;
  }
  cudaStream_t s;
  cudaEvent_t a, b;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  void* ring = NULL;
  CK(cudaMalloc(&ring, MSCCLPP_COLL_TRACE_RING_BYTES));
  CK(cudaMemset(ring, 0, MSCCLPP_COLL_TRACE_RING_BYTES));
  void* ring2 = NULL;
  CK(cudaMalloc(&ring2, MSCCLPP_COLL_TRACE_RING_BYTES));
  CK(cudaMemset(ring2, 0, MSCCLPP_COLL_TRACE_RING_BYTES));
  void* mappedHost = NULL;
  void* mappedDev = NULL;
  CK(cudaHostAlloc(&mappedHost, 4096, cudaHostAllocMapped));
  CK(cudaHostGetDevicePointer(&mappedDev, mappedHost, 0));
  const uint64_t works[2] = {0, 3000};
  printf("# one block of %d threads per kernel; us per kernel, median of %d rounds\n", THREADS, ROUNDS);
  printf("# %-16s %8s %10s %10s %10s %10s\n", "record", "work ns", "eager", "vs none", "graph", "vs none");
  for (int w = 0; w < 2; w++) {
    double base[2] = {0, 0};
    for (int mode = 0; mode < MODES; mode++) {
      Params p;
      memset(&p, 0, sizeof(p));
      p.work = works[w];
      /* the device ring: DEVICE's alone counts on it (the check below);
       * the others use a second one */
      if (mode != NONE && mode != MAPPED && mode != MAPPED_RELEASE) {
        p.trace.ring = (struct mscclppCollTraceRecord*)(mode == DEVICE ? ring : ring2);
        p.trace.seq = 1;
      }
      p.mapped = (struct mscclppCollTraceRecord*)mappedDev;
      double e[ROUNDS], g[ROUNDS];
      for (int r = 0; r < ROUNDS; r++) {
        e[r] = eagerUs(mode, p, s, a, b);
        g[r] = graphUs(mode, p, s, a, b);
      }
      const double em = benchSortMedian(e, ROUNDS), gm = benchSortMedian(g, ROUNDS);
      if (mode == NONE) {
        base[0] = em;
        base[1] = gm;
      }
      printf("  %-16s %8llu %10.3f %+9.1f%% %10.3f %+9.1f%%\n", modeNames[mode], (unsigned long long)works[w], em,
             100.0 * (em / base[0] - 1), gm, 100.0 * (gm / base[1] - 1));
    }
  }
  /* every traced launch numbered a record, graph replays included, and the
   * newest record is whole */
  const uint64_t expected = 2ull * ROUNDS * (200 + EAGER + GRAPH_LEN * (1 + GRAPH_REPLAYS));
  uint64_t counted = 0;
  CK(cudaMemcpy(&counted, MSCCLPP_COLL_TRACE_COUNTER((struct mscclppCollTraceRecord*)ring), sizeof(counted),
                cudaMemcpyDeviceToHost));
  struct mscclppCollTraceRecord last;
  CK(cudaMemcpy(&last, (struct mscclppCollTraceRecord*)ring + ((counted - 1) & (MSCCLPP_COLL_TRACE_SLOTS - 1)),
                sizeof(last), cudaMemcpyDeviceToHost));
  const int whole = last.stamp == counted && (uint32_t)(last.check >> 32) == (uint32_t)counted &&
                    (uint32_t)(last.info >> 32) == 1u;
  printf("# device ring: %llu records numbered of %llu launches, the last one %s\n", (unsigned long long)counted,
         (unsigned long long)expected, whole ? "whole" : "NOT WHOLE");
  CK(cudaFreeHost(mappedHost));
  CK(cudaFree(ring));
  CK(cudaFree(ring2));
  return counted == expected && whole ? 0 : 1;
}
