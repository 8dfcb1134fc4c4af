/* FIFO and proxy on a GPU, next to the raw limit, in one run:
 *  1. raw: one GPU thread writes a counter to host-mapped memory, a CPU thread
 *     echoes it to host-mapped memory, the GPU spins on the echo;
 *  2. push -> proxy -> sync, one trigger at a time (handler does nothing);
 *     push -> proxy handler signals a host-to-device semaphore -> GPU waits;
 *  3. push throughput, handler does nothing: 1 block and 132 blocks, ONE
 *     pushing thread per block, each block syncing on its last trigger.
 * Usage: bench_fifo [rounds=20000] [triggers=1000000] [fifoSize=MSCCLPP_FIFO_SIZE]
 * Prints "skipped: needs a GPU" and exits 0 without one. */
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu.h"
#include "mscclpp/fifo.h"
#include "mscclpp/fifo_device.h"
#include "mscclpp/proxy.h"
#include "mscclpp/semaphore.h"
#include "mscclpp/semaphore_device.h"

#define CK(expr)                                                                                \
  do {                                                                                          \
    cudaError_t e_ = (expr);                                                                    \
    if (e_ != cudaSuccess) {                                                                    \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_));  \
      exit(1);                                                                                  \
    }                                                                                           \
  } while (0)
#define MK(expr)                                                                                           \
  do {                                                                                                     \
    mscclppResult_t r_ = (expr);                                                                           \
    if (r_ != mscclppSuccess) {                                                                            \
      fprintf(stderr, "%s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #expr, mscclppGetErrorString(r_),      \
              mscclppGetLastError());                                                                      \
      exit(1);                                                                                             \
    }                                                                                                      \
  } while (0)

#define RAW_TIMEOUT_NS 10000000000ull

/* ---- 1. raw echo -------------------------------------------------------------------- */

__global__ void rawEchoKernel(volatile uint64_t* ping, volatile uint64_t* pong, int rounds, uint64_t* out) {
  uint64_t t0 = mscclppClockNs();
  int ok = 1;
  for (int i = 1; i <= rounds && ok; i++) {
    *ping = (uint64_t)i;
    uint32_t spins = 0;
    while (*pong != (uint64_t)i) {
      if ((++spins & 1023u) == 0 && mscclppClockNs() - t0 > RAW_TIMEOUT_NS) {
        ok = 0;
        break;
      }
    }
  }
  out[0] = mscclppClockNs() - t0;
  out[1] = ok;
}

__global__ void warmKernel(void) {}

struct echoArgs {
  volatile uint64_t* ping;
  volatile uint64_t* pong;
  int rounds;
  int node;
};

static void* echoThread(void* arg) {
  struct echoArgs* a = (struct echoArgs*)arg;
  mscclppCpuBindNumaNode(a->node);
  double start = 0;
  for (int i = 1; i <= a->rounds; i++) {
    int spins = 0;
    while (*a->ping != (uint64_t)i) {
      if (++spins == 1 << 20) { /* bounded: give up after ~10 s without progress */
        spins = 0;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        double now = ts.tv_sec + ts.tv_nsec * 1e-9;
        if (start == 0) start = now;
        else if (now - start > 10) return NULL;
      }
    }
    *a->pong = (uint64_t)i;
  }
  return NULL;
}

static double rawRoundTripUs(int rounds, int node) {
  void *h, *d;
  MK(mscclppGpuHostAllocMapped(0, 4096, &h, &d));
  volatile uint64_t* pingH = (volatile uint64_t*)h;
  volatile uint64_t* pongH = (volatile uint64_t*)((char*)h + 128);
  uint64_t* out;
  CK(cudaMalloc(&out, 2 * sizeof(uint64_t)));
  struct echoArgs a = {pingH, pongH, rounds, node};
  pthread_t th;
  pthread_create(&th, NULL, echoThread, &a);
  rawEchoKernel<<<1, 1>>>((volatile uint64_t*)d, (volatile uint64_t*)((char*)d + 128), rounds, out);
  CK(cudaDeviceSynchronize());
  pthread_join(th, NULL);
  uint64_t res[2];
  CK(cudaMemcpy(res, out, sizeof(res), cudaMemcpyDeviceToHost));
  CK(cudaFree(out));
  mscclppGpuHostFreeMapped(0, h);
  if (!res[1]) {
    fprintf(stderr, "raw echo timed out\n");
    exit(1);
  }
  return res[0] / 1e3 / rounds;
}

/* ---- 2. FIFO round trips ------------------------------------------------------------- */

__global__ void fifoRoundTripKernel(mscclppFifoDeviceHandle fifo, mscclppSemaphoreDeviceHandle sem, int useSem,
                                    int rounds, uint64_t* out) {
  uint64_t t0 = mscclppClockNs();
  mscclppResult_t r = mscclppSuccess;
  for (int i = 0; i < rounds && r == mscclppSuccess; i++) {
    mscclppTriggerFields f = {};
    f.op = useSem ? MSCCLPP_TRIGGER_FLAG : MSCCLPP_TRIGGER_OP_USER_FIRST;
    uint64_t pos;
    r = mscclppFifoDevicePush(&fifo, &f, &pos);
    if (r == mscclppSuccess) r = useSem ? mscclppSemaphoreDeviceWait(&sem) : mscclppFifoDeviceSync(&fifo, pos);
  }
  out[0] = mscclppClockNs() - t0;
  out[1] = (uint64_t)r;
}

/* ---- 3. throughput ---------------------------------------------------------------------- */

__global__ void fifoThroughputKernel(mscclppFifoDeviceHandle fifo, uint32_t perBlock, uint64_t* out) {
  mscclppResult_t r = mscclppSuccess;
  uint64_t pos = 0;
  for (uint32_t i = 0; i < perBlock && r == mscclppSuccess; i++) {
    mscclppTriggerFields f = {};
    f.op = MSCCLPP_TRIGGER_OP_USER_FIRST;
    f.srcOffset = i;
    r = mscclppFifoDevicePush(&fifo, &f, &pos);
  }
  if (r == mscclppSuccess) r = mscclppFifoDeviceSync(&fifo, pos);
  if (r != mscclppSuccess) out[1] = (uint64_t)r;
}

struct handlerState {
  mscclppSemaphore_t sem;
  uint64_t count;
};

static mscclppProxyHandlerResult benchHandler(void* arg, const mscclppTrigger* t, uint64_t position) {
  (void)position;
  struct handlerState* s = (struct handlerState*)arg;
  s->count++;
  if (mscclppTriggerOp(t) == MSCCLPP_TRIGGER_FLAG) mscclppSemaphoreSignal(s->sem);
  return mscclppProxyHandlerContinue;
}

int main(int argc, char** argv) {
  if (mscclppGpuDeviceCount() == 0) {
    printf("bench_fifo: skipped: needs a GPU\n");
    return 0;
  }
  int rounds = argc > 1 ? atoi(argv[1]) : 20000;
  uint32_t triggers = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 10) : 1000000u;
  int fifoSize = argc > 3 ? atoi(argv[3]) : 0;
  CK(cudaSetDevice(0));
  char desc[256];
  MK(mscclppGpuDescribe(0, desc, sizeof(desc)));
  int node = -1;
  mscclppGpuNumaNode(0, &node);
  printf("bench_fifo on %s\n", desc);

  warmKernel<<<1, 1>>>();
  CK(cudaDeviceSynchronize());
  rawRoundTripUs(rounds / 10 + 1, node); /* warm-up */
  double raw = rawRoundTripUs(rounds, node);

  mscclppAbort_t abort;
  MK(mscclppAbortCreate(0, &abort));
  mscclppSemaphoreConfig sc = MSCCLPP_SEMAPHORE_CONFIG_INITIALIZER;
  sc.kind = mscclppSemaphoreHostToDevice;
  sc.device = 0;
  sc.abort = abort;
  struct handlerState hs = {NULL, 0};
  MK(mscclppSemaphoreCreate(&sc, &hs.sem));
  mscclppFifoConfig fc = MSCCLPP_FIFO_CONFIG_INITIALIZER;
  fc.device = 0;
  fc.size = fifoSize;
  fc.abort = abort;
  mscclppFifo_t fifo;
  MK(mscclppFifoCreate(&fc, &fifo));
  int size = 0;
  MK(mscclppFifoGetSize(fifo, &size));
  mscclppProxyConfig pc = MSCCLPP_PROXY_CONFIG_INITIALIZER;
  pc.device = 0;
  pc.abort = abort;
  pc.name = "bench-proxy";
  mscclppProxy_t proxy;
  MK(mscclppProxyCreate(&pc, &proxy));
  MK(mscclppProxyAddFifo(proxy, fifo, benchHandler, NULL, &hs));
  MK(mscclppProxyStart(proxy));
  mscclppFifoDeviceHandle fh;
  mscclppSemaphoreDeviceHandle sh;
  MK(mscclppFifoGetDeviceHandle(fifo, &fh));
  MK(mscclppSemaphoreGetDeviceHandle(hs.sem, &sh));
  uint64_t* out;
  CK(cudaMalloc(&out, 2 * sizeof(uint64_t)));
  uint64_t res[2];

  double rt[2];
  for (int useSem = 0; useSem < 2; useSem++) {
    fifoRoundTripKernel<<<1, 1>>>(fh, sh, useSem, rounds / 10 + 1, out); /* warm-up */
    fifoRoundTripKernel<<<1, 1>>>(fh, sh, useSem, rounds, out);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(res, out, sizeof(res), cudaMemcpyDeviceToHost));
    if (res[1] != mscclppSuccess) {
      fprintf(stderr, "round-trip kernel failed: %s\n", mscclppGetErrorString((mscclppResult_t)res[1]));
      return 1;
    }
    rt[useSem] = res[0] / 1e3 / rounds;
  }

  int blockCounts[2] = {1, 132};
  double tput[2];
  for (int k = 0; k < 2; k++) {
    int blocks = blockCounts[k];
    uint32_t perBlock = triggers / (uint32_t)blocks;
    CK(cudaMemset(out, 0, 2 * sizeof(uint64_t)));
    fifoThroughputKernel<<<blocks, 1>>>(fh, perBlock / 10 + 1, out); /* warm-up */
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaEventRecord(e0));
    fifoThroughputKernel<<<blocks, 1>>>(fh, perBlock, out);
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    CK(cudaMemcpy(res, out, sizeof(res), cudaMemcpyDeviceToHost));
    if (res[1] != 0) {
      fprintf(stderr, "throughput kernel failed: %s\n", mscclppGetErrorString((mscclppResult_t)res[1]));
      return 1;
    }
    tput[k] = (double)perBlock * blocks / (ms / 1e3);
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
  }
  MK(mscclppProxyStop(proxy));
  mscclppResult_t err;
  MK(mscclppProxyGetAsyncError(proxy, &err));

  printf("FIFO size %d, %d round trips, %u triggers for throughput, proxy NUMA node %d\n", size, rounds, triggers,
         node);
  printf("%-58s %10s %8s\n", "measurement", "value", "vs (1)");
  printf("%-58s %8.3f us %8s\n", "(1) raw GPU->host-mapped->CPU echo->GPU round trip", raw, "1.00x");
  printf("%-58s %8.3f us %7.2fx\n", "(2) push -> proxy -> sync round trip", rt[0], rt[0] / raw);
  printf("%-58s %8.3f us %7.2fx\n", "(2b) push -> proxy signals H2D semaphore -> GPU wait", rt[1], rt[1] / raw);
  for (int k = 0; k < 2; k++) {
    double nsPer = 1e9 / tput[k];
    char label[96];
    snprintf(label, sizeof(label), "(3) push throughput, %d block(s) x 1 pushing thread", blockCounts[k]);
    printf("%-58s %7.2f M/s  (%.1f ns/trigger = %.3fx of (1))\n", label, tput[k] / 1e6, nsPer, nsPer / 1e3 / raw);
  }
  printf("goal: (2) within 1.15x of (1): %s; async error: %s\n", rt[0] <= 1.15 * raw ? "met" : "NOT met",
         mscclppGetErrorString(err));

  CK(cudaFree(out));
  MK(mscclppProxyDestroy(proxy));
  MK(mscclppFifoDestroy(fifo));
  MK(mscclppSemaphoreDestroy(hs.sem));
  MK(mscclppAbortDestroy(abort));
  return err == mscclppSuccess ? 0 : 1;
}
