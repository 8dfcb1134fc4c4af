/* SPDX-License-Identifier: MIT */
/* The FIFO, proxy service and semaphores on a real GPU:
 *  - 1, 32 and 1024 pushing threads (across blocks) through a small FIFO,
 *    a FIFO smaller than a warp, the lanes of each warp pushing to two
 *    FIFOs, and 132 blocks x 32 threads through 8 and 512 slots under every
 *    claim policy; release and relaxed pushes mixed in each warp, lanes leaving the
 *    loop at different times: every trigger seen once, in per-thread order;
 *  - push -> proxy handler signals a host-to-device semaphore -> kernel waits;
 *  - device-to-device semaphore ping-pong between two blocks (data checked);
 *    host-to-device signals consumed by a kernel;
 *  - a device-side timeout, an abort reaching a waiting kernel, and an
 *    out-of-range trigger field: each returns its status in the kernel and
 *    reaches the host as the async error.
 * Exits 77 (skipped) without a GPU. `test_fifo_gpu quick` divides the counts
 * by 10 (for compute-sanitizer --tool memcheck / racecheck). */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu/gpu.h"
#include "harness.h"
#include "mscclpp/fifo.h"
#include "mscclpp/fifo_device.h"
#include "mscclpp/proxy.h"
#include "mscclpp/semaphore.h"
#include "mscclpp/semaphore_device.h"

#define MAX_THREADS (132 * 32)

static int gScale = 1; /* divisor of the counts */

#define CUDA_CHECK(expr)                                                                       \
  do {                                                                                         \
    cudaError_t e_ = (expr);                                                                   \
    if (e_ != cudaSuccess) {                                                                   \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
      harnessFailures_++;                                                                      \
    }                                                                                          \
  } while (0)

static double nowSec(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- a service on device 0 ------------------------------------------------------ */

struct service {
  mscclppAbort_t abort;
  mscclppFifo_t fifo;
  mscclppProxy_t proxy;
  mscclppFifoDeviceHandle h;
  cudaStream_t stream;
};

static void serviceInit(struct service* s, int fifoSize, double timeoutSec, mscclppProxyHandler handler, void* arg) {
  CHECK_RES(mscclppAbortCreate(0, &s->abort), mscclppSuccess);
  mscclppFifoConfig fc = MSCCLPP_FIFO_CONFIG_INITIALIZER;
  fc.device = 0;
  fc.size = fifoSize;
  fc.timeoutSec = timeoutSec;
  fc.abort = s->abort;
  CHECK_RES(mscclppFifoCreate(&fc, &s->fifo), mscclppSuccess);
  mscclppProxyConfig pc = MSCCLPP_PROXY_CONFIG_INITIALIZER;
  pc.device = 0;
  pc.abort = s->abort;
  pc.name = "gpu-test-proxy";
  CHECK_RES(mscclppProxyCreate(&pc, &s->proxy), mscclppSuccess);
  CHECK_RES(mscclppProxyAddFifo(s->proxy, s->fifo, handler, NULL, arg), mscclppSuccess);
  CHECK_RES(mscclppFifoGetDeviceHandle(s->fifo, &s->h), mscclppSuccess);
  CUDA_CHECK(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
}

static void serviceFini(struct service* s) {
  CUDA_CHECK(cudaStreamDestroy(s->stream));
  CHECK_RES(mscclppProxyDestroy(s->proxy), mscclppSuccess);
  CHECK_RES(mscclppFifoDestroy(s->fifo), mscclppSuccess);
  CHECK_RES(mscclppAbortDestroy(s->abort), mscclppSuccess);
}

/* ---- many pushing threads ------------------------------------------------------------ */

struct checker {
  uint32_t next[MAX_THREADS];
  uint64_t seen; /* __atomic */
  uint64_t errors;
};

static mscclppProxyHandlerResult checkHandler(void* arg, const mscclppTrigger* t, uint64_t position) {
  struct checker* c = (struct checker*)arg;
  mscclppTriggerFields f;
  mscclppTriggerUnpack(t, &f);
  if (f.op != MSCCLPP_TRIGGER_OP_USER_FIRST || f.dstOffset >= MAX_THREADS || f.srcOffset != c->next[f.dstOffset] ||
      f.size != f.srcOffset) {
    if (c->errors++ < 5)
      fprintf(stderr, "bad trigger at %llu: thread %llu seq %llu\n", (unsigned long long)position,
              (unsigned long long)f.dstOffset, (unsigned long long)f.srcOffset);
  } else {
    c->next[f.dstOffset]++;
  }
  __atomic_fetch_add(&c->seen, 1, __ATOMIC_RELEASE);
  return mscclppProxyHandlerContinue;
}

/* Each thread pushes perThread + tid % 3 triggers (thread id, sequence), so
 * the lanes of a warp leave the loop at different times; threads with bit 1
 * of their id set push with relaxed order through mscclppFifoDevicePushTrigger,
 * the others with mscclppFifoDevicePush (release), so the lanes of a warp
 * also push from two call sites. With twoFifos, odd threads push to FIFO b:
 * the lanes of one warp push to two FIFOs at once. Each thread then waits
 * for its last trigger: Sync for even threads, Flush for odd ones. */
__device__ __host__ static uint32_t countOf(uint32_t tid, uint32_t perThread) { return perThread + tid % 3; }

__global__ void pushKernel(mscclppFifoDeviceHandle a, mscclppFifoDeviceHandle b, int twoFifos, uint32_t perThread,
                           int* status) {
  uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x;
  const mscclppFifoDeviceHandle* fifo = (twoFifos && (tid & 1)) ? &b : &a;
  uint32_t count = countOf(tid, perThread);
  mscclppResult_t r = mscclppSuccess;
  uint64_t pos = 0;
  for (uint32_t i = 0; i < count && r == mscclppSuccess; i++) {
    mscclppTriggerFields f = {};
    f.op = MSCCLPP_TRIGGER_OP_USER_FIRST;
    f.dstOffset = tid;
    f.srcOffset = i;
    f.size = i;
    if (tid & 2)
      r = mscclppFifoDevicePushTrigger(fifo, mscclppTriggerPack(&f), mscclppFifoOrderRelaxed, &pos);
    else
      r = mscclppFifoDevicePush(fifo, &f, &pos);
  }
  if (r == mscclppSuccess && count > 0)
    r = (tid & 1) ? mscclppFifoDeviceFlush(fifo, pos) : mscclppFifoDeviceSync(fifo, pos);
  status[tid] = (int)r;
}

static void runPushersWith(int blocks, int threadsPerBlock, uint32_t perThread, int fifoSize, int nFifos,
                           uint32_t policy) {
  static struct checker c[2];
  memset(c, 0, sizeof(c));
  mscclppAbort_t abort;
  CHECK_RES(mscclppAbortCreate(0, &abort), mscclppSuccess);
  mscclppFifoConfig fc = MSCCLPP_FIFO_CONFIG_INITIALIZER;
  fc.device = 0;
  fc.size = fifoSize;
  fc.timeoutSec = 30.0;
  fc.abort = abort;
  mscclppProxyConfig pc = MSCCLPP_PROXY_CONFIG_INITIALIZER;
  pc.device = 0;
  pc.abort = abort;
  pc.name = "gpu-test-proxy";
  mscclppProxy_t proxy;
  CHECK_RES(mscclppProxyCreate(&pc, &proxy), mscclppSuccess);
  mscclppFifo_t fifo[2] = {NULL, NULL};
  mscclppFifoDeviceHandle h[2];
  for (int k = 0; k < nFifos; k++) {
    CHECK_RES(mscclppFifoCreate(&fc, &fifo[k]), mscclppSuccess);
    CHECK_RES(mscclppProxyAddFifo(proxy, fifo[k], checkHandler, NULL, &c[k]), mscclppSuccess);
    CHECK_RES(mscclppFifoGetDeviceHandle(fifo[k], &h[k]), mscclppSuccess);
    h[k].claimPolicy = policy;
  }
  if (nFifos == 1) h[1] = h[0];
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CHECK_RES(mscclppProxyStart(proxy), mscclppSuccess);
  int n = blocks * threadsPerBlock;
  int* status = NULL;
  CUDA_CHECK(cudaMalloc(&status, n * sizeof(int)));
  CUDA_CHECK(cudaMemsetAsync(status, 0xff, n * sizeof(int), stream));
  double t0 = nowSec();
  pushKernel<<<blocks, threadsPerBlock, 0, stream>>>(h[0], h[1], nFifos == 2, perThread, status);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaStreamSynchronize(stream));
  double sec = nowSec() - t0;
  int hostStatus[MAX_THREADS];
  CUDA_CHECK(cudaMemcpy(hostStatus, status, n * sizeof(int), cudaMemcpyDeviceToHost));
  int bad = 0;
  for (int i = 0; i < n; i++) bad += hostStatus[i] != mscclppSuccess;
  CHECK(bad == 0);
  CHECK_RES(mscclppProxyStop(proxy), mscclppSuccess);
  uint64_t total = 0;
  for (int i = 0; i < n; i++) {
    uint32_t want = countOf((uint32_t)i, perThread);
    int k = nFifos == 2 ? (i & 1) : 0;
    total += want;
    CHECK(c[k].next[i] == want);
    if (nFifos == 2) CHECK(c[k ^ 1].next[i] == 0);
  }
  CHECK(__atomic_load_n(&c[0].seen, __ATOMIC_ACQUIRE) + __atomic_load_n(&c[1].seen, __ATOMIC_ACQUIRE) == total);
  CHECK(c[0].errors == 0 && c[1].errors == 0);
  mscclppResult_t err;
  CHECK_RES(mscclppProxyGetAsyncError(proxy, &err), mscclppSuccess);
  CHECK(err == mscclppSuccess);
  printf("  %d block(s) x %d thread(s), %d FIFO(s) of %d slots, claim policy %u: %llu triggers in %.3f s (%.2f M/s)\n",
         blocks, threadsPerBlock, nFifos, fifoSize, policy, (unsigned long long)total, sec, total / sec / 1e6);
  CUDA_CHECK(cudaFree(status));
  CUDA_CHECK(cudaStreamDestroy(stream));
  CHECK_RES(mscclppProxyDestroy(proxy), mscclppSuccess);
  for (int k = 0; k < nFifos; k++) CHECK_RES(mscclppFifoDestroy(fifo[k]), mscclppSuccess);
  CHECK_RES(mscclppAbortDestroy(abort), mscclppSuccess);
}

static void runPushers(int blocks, int threadsPerBlock, uint32_t perThread, int fifoSize, int nFifos) {
  runPushersWith(blocks, threadsPerBlock, perThread, fifoSize, nFifos, MSCCLPP_FIFO_CLAIM_DEFAULT);
}

static void testOneThread(void) { runPushers(1, 1, 20000 / gScale, 128, 1); }
static void testThirtyTwoThreads(void) { runPushers(4, 8, 2000 / gScale, 128, 1); }
static void testThousandThreads(void) { runPushers(8, 128, 500 / gScale, 128, 1); }
/* 32 lanes push at once into 8 slots: a warp claims in chunks of 8. */
static void testFifoSmallerThanWarp(void) { runPushers(2, 64, 300 / gScale, 8, 1); }
/* Even and odd lanes of each warp push to two FIFOs of one proxy. */
static void testTwoFifosPerWarp(void) { runPushers(4, 64, 500 / gScale, 64, 2); }

/* 132 blocks x one warp (every lane pushes: warp-aggregated claims), on a
 * FIFO smaller than a warp and on the default-size one, under every claim
 * policy. */
static void testManyWarpsEveryPolicy(void) {
  const uint32_t policies[] = {MSCCLPP_FIFO_CLAIM_CHECK_FIRST, MSCCLPP_FIFO_CLAIM_FIRST_SHARED,
                               MSCCLPP_FIFO_CLAIM_FIRST_POLL};
  for (size_t k = 0; k < sizeof(policies) / sizeof(policies[0]); k++) {
    runPushersWith(132, 32, 40 / gScale, 8, 1, policies[k]);
    runPushersWith(132, 32, 100 / gScale, 512, 1, policies[k]);
  }
}

/* ---- push -> proxy signals a host-to-device semaphore -> kernel waits ------------- */

static mscclppProxyHandlerResult signalHandler(void* arg, const mscclppTrigger* t, uint64_t position) {
  (void)t;
  (void)position;
  return mscclppSemaphoreSignal((mscclppSemaphore_t)arg) == mscclppSuccess ? mscclppProxyHandlerContinue
                                                                           : mscclppProxyHandlerError;
}

__global__ void roundTripKernel(mscclppFifoDeviceHandle fifo, mscclppSemaphoreDeviceHandle sem, int rounds,
                                int* status) {
  mscclppResult_t r = mscclppSuccess;
  for (int i = 0; i < rounds && r == mscclppSuccess; i++) {
    mscclppTriggerFields f = {};
    f.op = MSCCLPP_TRIGGER_FLAG;
    uint64_t pos;
    r = mscclppFifoDevicePush(&fifo, &f, &pos);
    if (r == mscclppSuccess) r = mscclppSemaphoreDeviceWait(&sem);
  }
  *status = (int)r;
}

static void testProxySignalsDevice(void) {
  mscclppAbort_t abort;
  CHECK_RES(mscclppAbortCreate(0, &abort), mscclppSuccess);
  mscclppSemaphoreConfig sc = MSCCLPP_SEMAPHORE_CONFIG_INITIALIZER;
  sc.kind = mscclppSemaphoreHostToDevice;
  sc.device = 0;
  sc.abort = abort;
  mscclppSemaphore_t sem;
  CHECK_RES(mscclppSemaphoreCreate(&sc, &sem), mscclppSuccess);
  mscclppFifoConfig fc = MSCCLPP_FIFO_CONFIG_INITIALIZER;
  fc.device = 0;
  fc.size = 16;
  fc.abort = abort;
  mscclppFifo_t fifo;
  CHECK_RES(mscclppFifoCreate(&fc, &fifo), mscclppSuccess);
  mscclppProxyConfig pc = MSCCLPP_PROXY_CONFIG_INITIALIZER;
  pc.device = 0;
  pc.abort = abort;
  mscclppProxy_t proxy;
  CHECK_RES(mscclppProxyCreate(&pc, &proxy), mscclppSuccess);
  CHECK_RES(mscclppProxyAddFifo(proxy, fifo, signalHandler, NULL, sem), mscclppSuccess);
  CHECK_RES(mscclppProxyStart(proxy), mscclppSuccess);
  mscclppFifoDeviceHandle fh;
  mscclppSemaphoreDeviceHandle dh;
  CHECK_RES(mscclppFifoGetDeviceHandle(fifo, &fh), mscclppSuccess);
  CHECK_RES(mscclppSemaphoreGetDeviceHandle(sem, &dh), mscclppSuccess);
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  int* status;
  CUDA_CHECK(cudaMalloc(&status, sizeof(int)));
  CUDA_CHECK(cudaMemsetAsync(status, 0xff, sizeof(int), stream));
  int rounds = 5000 / gScale;
  double t0 = nowSec();
  roundTripKernel<<<1, 1, 0, stream>>>(fh, dh, rounds, status);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  double us = (nowSec() - t0) * 1e6 / rounds;
  int st = -1;
  CUDA_CHECK(cudaMemcpy(&st, status, sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(st == mscclppSuccess);
  printf("  push -> proxy signals semaphore -> kernel wait: %.2f us per round trip (incl. launch)\n", us);
  mscclppResult_t err;
  CHECK_RES(mscclppProxyGetAsyncError(proxy, &err), mscclppSuccess);
  CHECK(err == mscclppSuccess);
  CUDA_CHECK(cudaFree(status));
  CUDA_CHECK(cudaStreamDestroy(stream));
  CHECK_RES(mscclppProxyDestroy(proxy), mscclppSuccess);
  CHECK_RES(mscclppFifoDestroy(fifo), mscclppSuccess);
  CHECK_RES(mscclppSemaphoreDestroy(sem), mscclppSuccess);
  CHECK_RES(mscclppAbortDestroy(abort), mscclppSuccess);
}

/* ---- semaphores without a proxy ----------------------------------------------------- */

__global__ void pingPongKernel(mscclppSemaphoreDeviceHandle a, mscclppSemaphoreDeviceHandle b, int* data, int rounds,
                               int* status) {
  mscclppResult_t r = mscclppSuccess;
  int errors = 0;
  if (threadIdx.x != 0) return;
  for (int i = 1; i <= rounds && r == mscclppSuccess; i++) {
    if (blockIdx.x == 0) {
      data[0] = i; /* visible before the signal (release) */
      mscclppSemaphoreDeviceSignal(&a);
      r = mscclppSemaphoreDeviceWait(&b);
      if (r == mscclppSuccess && ((volatile int*)data)[1] != i) errors++;
    } else {
      r = mscclppSemaphoreDeviceWait(&a);
      if (r == mscclppSuccess && ((volatile int*)data)[0] != i) errors++;
      data[1] = i;
      mscclppSemaphoreDeviceSignal(&b);
    }
  }
  status[blockIdx.x] = r != mscclppSuccess ? (int)r : errors > 0 ? 100 : 0;
}

__global__ void waitManyKernel(mscclppSemaphoreDeviceHandle sem, int n, int* status) {
  mscclppResult_t r = mscclppSuccess;
  for (int i = 0; i < n && r == mscclppSuccess; i++) r = mscclppSemaphoreDeviceWait(&sem);
  *status = (int)r;
}

static void testSemaphores(void) {
  mscclppAbort_t abort;
  CHECK_RES(mscclppAbortCreate(0, &abort), mscclppSuccess);
  mscclppSemaphoreConfig sc = MSCCLPP_SEMAPHORE_CONFIG_INITIALIZER;
  sc.device = 0;
  sc.abort = abort;
  sc.kind = mscclppSemaphoreDeviceToDevice;
  mscclppSemaphore_t a, b, h2d;
  CHECK_RES(mscclppSemaphoreCreate(&sc, &a), mscclppSuccess);
  CHECK_RES(mscclppSemaphoreCreate(&sc, &b), mscclppSuccess);
  sc.kind = mscclppSemaphoreHostToDevice;
  CHECK_RES(mscclppSemaphoreCreate(&sc, &h2d), mscclppSuccess);
  mscclppSemaphoreDeviceHandle ha, hb, hh;
  CHECK_RES(mscclppSemaphoreGetDeviceHandle(a, &ha), mscclppSuccess);
  CHECK_RES(mscclppSemaphoreGetDeviceHandle(b, &hb), mscclppSuccess);
  CHECK_RES(mscclppSemaphoreGetDeviceHandle(h2d, &hh), mscclppSuccess);
  int *data, *status;
  CUDA_CHECK(cudaMalloc(&data, 2 * sizeof(int)));
  CUDA_CHECK(cudaMalloc(&status, 3 * sizeof(int)));
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CUDA_CHECK(cudaMemsetAsync(status, 0xff, 3 * sizeof(int), stream));
  int rounds = 10000 / gScale;
  double t0 = nowSec();
  pingPongKernel<<<2, 32, 0, stream>>>(ha, hb, data, rounds, status);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  printf("  device-to-device ping-pong between two blocks: %.2f us per round trip\n",
         (nowSec() - t0) * 1e6 / rounds);
  /* host-to-device: the host signals n times; the kernel consumes n */
  int n = 1000 / gScale;
  waitManyKernel<<<1, 1, 0, stream>>>(hh, n, status + 2);
  for (int i = 0; i < n; i++) CHECK_RES(mscclppSemaphoreSignal(h2d), mscclppSuccess);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  int st[3];
  CUDA_CHECK(cudaMemcpy(st, status, sizeof(st), cudaMemcpyDeviceToHost));
  CHECK(st[0] == 0 && st[1] == 0 && st[2] == 0);
  uint64_t expected = 0;
  CUDA_CHECK(cudaMemcpy(&expected, hh.expected, sizeof(expected), cudaMemcpyDeviceToHost));
  CHECK(expected == (uint64_t)n);
  mscclppResult_t err;
  CHECK_RES(mscclppAbortGetError(abort, &err), mscclppSuccess);
  CHECK(err == mscclppSuccess);
  CUDA_CHECK(cudaStreamDestroy(stream));
  CUDA_CHECK(cudaFree(data));
  CUDA_CHECK(cudaFree(status));
  CHECK_RES(mscclppSemaphoreDestroy(a), mscclppSuccess);
  CHECK_RES(mscclppSemaphoreDestroy(b), mscclppSuccess);
  CHECK_RES(mscclppSemaphoreDestroy(h2d), mscclppSuccess);
  CHECK_RES(mscclppAbortDestroy(abort), mscclppSuccess);
}

/* ---- failures reach the kernel and the host ------------------------------------------ */

__global__ void pushThenSyncKernel(mscclppFifoDeviceHandle fifo, int* status) {
  mscclppTriggerFields f = {};
  f.op = MSCCLPP_TRIGGER_DATA;
  uint64_t pos = 0;
  mscclppResult_t r = mscclppFifoDevicePush(&fifo, &f, &pos);
  if (r == mscclppSuccess) r = mscclppFifoDeviceSync(&fifo, pos);
  *status = (int)r;
}

static mscclppProxyHandlerResult nopHandler(void* arg, const mscclppTrigger* t, uint64_t position) {
  (void)arg;
  (void)t;
  (void)position;
  return mscclppProxyHandlerContinue;
}

static void testDeviceTimeout(void) {
  struct service s;
  serviceInit(&s, 16, 0.2, nopHandler, NULL); /* proxy never started */
  int* status;
  CUDA_CHECK(cudaMalloc(&status, sizeof(int)));
  double t0 = nowSec();
  pushThenSyncKernel<<<1, 1, 0, s.stream>>>(s.h, status);
  CUDA_CHECK(cudaStreamSynchronize(s.stream));
  double sec = nowSec() - t0;
  int st = -1;
  CUDA_CHECK(cudaMemcpy(&st, status, sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(st == mscclppTimeout);
  CHECK(sec >= 0.15 && sec < 10.0);
  mscclppResult_t err;
  CHECK_RES(mscclppProxyGetAsyncError(s.proxy, &err), mscclppSuccess);
  CHECK(err == mscclppTimeout && strstr(mscclppGetLastError(), "take FIFO position 0") != NULL);
  CUDA_CHECK(cudaFree(status));
  serviceFini(&s); /* aborted: the unconsumed trigger does not block destroy */
}

static void testAbortReachesKernel(void) {
  mscclppAbort_t abort;
  CHECK_RES(mscclppAbortCreate(0, &abort), mscclppSuccess);
  mscclppSemaphoreConfig sc = MSCCLPP_SEMAPHORE_CONFIG_INITIALIZER;
  sc.device = 0;
  sc.abort = abort;
  sc.kind = mscclppSemaphoreDeviceToDevice;
  sc.timeoutSec = 30.0;
  mscclppSemaphore_t sem;
  CHECK_RES(mscclppSemaphoreCreate(&sc, &sem), mscclppSuccess);
  mscclppSemaphoreDeviceHandle h;
  CHECK_RES(mscclppSemaphoreGetDeviceHandle(sem, &h), mscclppSuccess);
  int* status;
  CUDA_CHECK(cudaMalloc(&status, sizeof(int)));
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  waitManyKernel<<<1, 1, 0, stream>>>(h, 1, status);
  struct timespec ts = {0, 100 * 1000 * 1000};
  nanosleep(&ts, NULL);
  CHECK(cudaStreamQuery(stream) == cudaErrorNotReady); /* still waiting */
  double t0 = nowSec();
  CHECK_RES(mscclppAbortRaise(abort, mscclppAborted, "test abort"), mscclppSuccess);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  double sec = nowSec() - t0;
  int st = -1;
  CUDA_CHECK(cudaMemcpy(&st, status, sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(st == mscclppAborted);
  CHECK(sec < 5.0);
  printf("  abort reached the waiting kernel in %.3f ms\n", sec * 1e3);
  CUDA_CHECK(cudaStreamDestroy(stream));
  CUDA_CHECK(cudaFree(status));
  CHECK_RES(mscclppSemaphoreDestroy(sem), mscclppSuccess);
  CHECK_RES(mscclppAbortDestroy(abort), mscclppSuccess);
}

__global__ void badPushKernel(mscclppFifoDeviceHandle fifo, int* status) {
  mscclppTriggerFields f = {};
  f.op = MSCCLPP_TRIGGER_DATA;
  f.size = 1ull << 31; /* one past MSCCLPP_TRIGGER_MAX_SIZE */
  uint64_t pos = 0;
  *status = (int)mscclppFifoDevicePush(&fifo, &f, &pos);
}

static void testBadTriggerOnDevice(void) {
  struct service s;
  serviceInit(&s, 16, 30.0, nopHandler, NULL);
  CHECK_RES(mscclppProxyStart(s.proxy), mscclppSuccess);
  int* status;
  CUDA_CHECK(cudaMalloc(&status, sizeof(int)));
  badPushKernel<<<1, 1, 0, s.stream>>>(s.h, status);
  CUDA_CHECK(cudaStreamSynchronize(s.stream));
  int st = -1;
  CUDA_CHECK(cudaMemcpy(&st, status, sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(st == mscclppInvalidArgument);
  mscclppResult_t err;
  CHECK_RES(mscclppProxyGetAsyncError(s.proxy, &err), mscclppSuccess);
  CHECK(err == mscclppInvalidArgument && strstr(mscclppGetLastError(), "'size'") != NULL &&
        strstr(mscclppGetLastError(), "2147483648") != NULL);
  CUDA_CHECK(cudaFree(status));
  serviceFini(&s);
}

int main(int argc, char** argv) {
  if (mscclppGpuDeviceCount() == 0) harnessSkip("needs a GPU");
  if (argc > 1 && strcmp(argv[1], "quick") == 0) gScale = 10;
  CUDA_CHECK(cudaSetDevice(0));
  RUN(testOneThread);
  RUN(testThirtyTwoThreads);
  RUN(testThousandThreads);
  RUN(testFifoSmallerThanWarp);
  RUN(testTwoFifosPerWarp);
  RUN(testManyWarpsEveryPolicy);
  RUN(testProxySignalsDevice);
  RUN(testSemaphores);
  RUN(testDeviceTimeout);
  RUN(testAbortReachesKernel);
  RUN(testBadTriggerOnDevice);
  return harnessFinish();
}
