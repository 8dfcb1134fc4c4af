/* SPDX-License-Identifier: MIT */
/* FIFO and proxy on a GPU, next to the raw limit and its decomposition, in
 * one run (well under a minute):
 *  0. placement: the CPU side of every measurement (the raw echo thread, the
 *     proxy thread, the minimal consumer, the ring reader) runs pinned to ONE
 *     CPU, the same for all, and the main thread keeps off it (it sleeps in
 *     cudaDeviceSynchronize: blocking sync). By default that CPU is the one
 *     with the fastest raw echo in a short scan of every allowed CPU (the
 *     hardest baseline for the ratios), printed with the scan;
 *  1. raw: one GPU thread writes a counter to host-mapped memory, a CPU thread
 *     echoes it to host-mapped memory, the GPU spins on the echo; then the
 *     same with each ingredient of a push/sync added alone (a device-memory
 *     atomicAdd per round, a release store, a gpu-scope fence, acquire loads
 *     in the spin, a pause in the CPU's spin) and in the two combinations a
 *     push + sync performs;
 *  2. push -> proxy -> sync round trips, one trigger at a time (the handler
 *     does nothing): release push (mscclppFifoDevicePush), relaxed push, the
 *     semaphore variant, and the old claim policies;
 *  G. the goal figure, measured so that drift cannot land in the ratio: B
 *     blocks, each measuring, back to back and in an order rotated from block
 *     to block, (1) the raw echo, (1a) raw + atomic, (1p) raw with a pause in
 *     the echo's spin, (2m) the FIFO (real push and sync) served by a minimal
 *     consumer loop (poll the slot, store the tail; no service loop, no
 *     pause), and (2rs) the goal row: relaxed push -> proxy -> sync with the
 *     default claim policy. Every measurement has the same rounds, the same
 *     warm-up (in the same kernel launch, before the clock starts) and a
 *     fresh CPU thread on the same CPU; the proxy runs only during its own
 *     measurement. The goal figure is the MEDIAN over all blocks of the
 *     per-block ratio (2rs)/(1); every block is printed;
 *  3. push throughput (handler counts only) for several pusher layouts, each
 *     under the three claim policies side by side (old: claim then poll the
 *     tail over PCIe; claim then wait on the shared tail cache; check for
 *     space then claim), with the proxy's busy fraction and the pushers' wait
 *     counters; then proxy variants (pause before re-reading a stale slot);
 *     then the GPU side alone (pushes into a FIFO big enough never to fill,
 *     proxy stopped) and the proxy alone (draining those triggers);
 *  5. raw: GPU threads write 16-byte stores round a 512-slot host-mapped
 *     ring with no flow control, with the CPU idle and with a CPU thread
 *     reading the ring's lines like a proxy: how fast GPU writes land in
 *     lines the CPU keeps reading.
 * Usage: bench_fifo [rounds=40000] [triggers=1000000] [fifoSize=MSCCLPP_FIFO_SIZE] [blocks=10] [cpu=auto]
 *   rounds: per row of 1 and 2, and per kind in G (rounds / blocks per block);
 *   cpu: auto (scan, pin to the fastest), a CPU number (pin there), or -1 (no
 *   pinning: the echo thread and the proxy bind to the GPU's NUMA node, which
 *   is "anywhere" when the node is unknown, as before).
 * Prints "skipped: needs a GPU" and exits 0 without one. */
#include <cuda_runtime.h>
#include <pthread.h>
#include <sched.h>

/* Count the FIFO's slow-path events (pre-/post-claim waits, PCIe reads of
 * the tail); not claims, which would add an atomic per push. */
__device__ unsigned long long gFifoStats[4];
#define MSCCLPP_FIFO_DEVICE_STAT(c)                 \
  do {                                              \
    if ((c) != 3) atomicAdd(&gFifoStats[(c)], 1ull); \
  } while (0)

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu/gpu.h"
#include "mscclpp/fifo.h"
#include "mscclpp/fifo_device.h"
#include "mscclpp/proxy.h"
#include "mscclpp/semaphore.h"
#include "mscclpp/semaphore_device.h"
#include "proxy/proxy.h"
#include "bench_stats.h"

static_assert(MSCCLPP_FIFO_STAT_COUNT == 4 && MSCCLPP_FIFO_STAT_CLAIM == 3, "gFifoStats layout");

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

/* core/util.h is C only; the host clock the bench needs: */
static uint64_t nowNs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
#define BIG_FIFO (1 << 20)

static void cpuPause(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield" ::: "memory");
#endif
}

/* ---- 0. where the CPU side runs ------------------------------------------------------ */

/* cpu >= 0: the CPU side of a measurement runs pinned to that CPU; -1: the
 * echo thread binds to the GPU's NUMA node (`node`, -1: anywhere) and the
 * proxy binds itself as the library does. */
struct place {
  int cpu;
  int node;
};

static void setAffinity(const cpu_set_t* set) {
  int err = pthread_setaffinity_np(pthread_self(), sizeof(*set), set);
  if (err != 0) {
    fprintf(stderr, "pthread_setaffinity_np: %s\n", strerror(err));
    exit(1);
  }
}

static void placeSelf(const struct place* p) {
  if (p->cpu < 0) {
    mscclppCpuBindNumaNode(p->node);
    return;
  }
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(p->cpu, &one);
  setAffinity(&one);
}

/* The main thread: every allowed CPU but `cpu`. */
static void keepMainOff(const cpu_set_t* allowed, int cpu) {
  cpu_set_t rest = *allowed;
  if (cpu >= 0) CPU_CLR(cpu, &rest);
  setAffinity(&rest);
}

/* Start the proxy's thread at p: a new thread inherits its creator's
 * affinity, and the proxy is created with numaNode -1 when pinned (so it
 * does not bind itself elsewhere). */
static void proxyStartAt(mscclppProxy_t proxy, const struct place* p) {
  if (p->cpu < 0) {
    MK(mscclppProxyStart(proxy));
    return;
  }
  cpu_set_t saved;
  int err = pthread_getaffinity_np(pthread_self(), sizeof(saved), &saved);
  if (err != 0) {
    fprintf(stderr, "pthread_getaffinity_np: %s\n", strerror(err));
    exit(1);
  }
  placeSelf(p);
  MK(mscclppProxyStart(proxy));
  setAffinity(&saved);
}

/* ---- 1. raw echo and its decomposition ------------------------------------------------ */

#define RAW_ATOMIC 1u     /* an atomicAdd on device memory per round; its result feeds the ping */
#define RAW_RELEASE 2u    /* ping with st.release.sys (what a release push's store costs) */
#define RAW_GPU_FENCE 4u  /* fence.acq_rel.gpu before the ping (for comparison only: not offered) */
#define RAW_ACQUIRE 8u    /* spin with ld.acquire.sys (what Sync does) instead of volatile loads */
#define RAW_LOAD 16u      /* an ld.relaxed.gpu of device memory per round; the atomic (if any) waits for it */
#define RAW_CPU_PAUSE 32u /* the CPU's echo spins with a pause instruction (as the proxy's idle pass) */

/* `warm` untimed rounds, then `rounds` timed ones, in one launch. */
__global__ void rawEchoKernel(uint64_t* ping, uint64_t* pong, uint64_t* counter, unsigned mode, int warm, int rounds,
                              uint64_t* out) {
  uint64_t start = mscclppClockNs(), t0 = start;
  int ok = 1;
  for (int i = 1; i <= warm + rounds && ok; i++) {
    if (i == warm + 1) t0 = mscclppClockNs();
    uint64_t v = (uint64_t)i;
    uint64_t add = 1;
    if (mode & RAW_LOAD) {
      if (mscclppLoadRelaxedGpu64(counter + 8) == ~0ull) v = 0; /* never true: the ping waits for the load */
      add = v != 0 ? 1 : 2;                                     /* and so does the atomic */
    }
    if (mode & RAW_ATOMIC) {
      if (mscclppAtomicClaim64(counter, add) == ~0ull) v = 0; /* never true; makes the ping wait for the atomic */
    }
    if (mode & RAW_RELEASE) {
      mscclppStoreReleaseSys64(ping, v);
    } else {
      if (mode & RAW_GPU_FENCE) __asm__ __volatile__("fence.acq_rel.gpu;" ::: "memory");
      *(volatile uint64_t*)ping = v;
    }
    uint32_t spins = 0;
    for (;;) {
      uint64_t got = (mode & RAW_ACQUIRE) ? mscclppLoadAcquireSys64(pong) : *(volatile uint64_t*)pong;
      if (got == (uint64_t)i) break;
      if ((++spins & 1023u) == 0 && mscclppClockNs() - start > RAW_TIMEOUT_NS) {
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
  int pause;
  struct place place;
};

static void* echoThread(void* arg) {
  struct echoArgs* a = (struct echoArgs*)arg;
  placeSelf(&a->place);
  uint64_t deadline = nowNs() + 30000000000ull;
  for (int i = 1; i <= a->rounds; i++) {
    unsigned spins = 0;
    while (*a->ping != (uint64_t)i) {
      if (a->pause) cpuPause();
      if ((++spins & 0xfffffu) == 0 && nowNs() > deadline) return NULL; /* the kernel times out too */
    }
    *a->pong = (uint64_t)i;
  }
  return NULL;
}

static double rawRoundTripUs(unsigned mode, int warm, int rounds, const struct place* place) {
  void *h, *d;
  MK(mscclppGpuHostAllocMapped(0, 4096, &h, &d));
  uint64_t *out, *counter;
  CK(cudaMalloc(&out, 2 * sizeof(uint64_t)));
  CK(cudaMalloc(&counter, 128));
  CK(cudaMemset(counter, 0, 128));
  struct echoArgs a = {(volatile uint64_t*)h, (volatile uint64_t*)((char*)h + 128), warm + rounds,
                       (mode & RAW_CPU_PAUSE) != 0, *place};
  pthread_t th;
  pthread_create(&th, NULL, echoThread, &a);
  rawEchoKernel<<<1, 1>>>((uint64_t*)d, (uint64_t*)((char*)d + 128), counter, mode, warm, rounds, out);
  CK(cudaDeviceSynchronize());
  pthread_join(th, NULL);
  uint64_t res[2];
  CK(cudaMemcpy(res, out, sizeof(res), cudaMemcpyDeviceToHost));
  CK(cudaFree(out));
  CK(cudaFree(counter));
  mscclppGpuHostFreeMapped(0, h);
  if (!res[1]) {
    fprintf(stderr, "raw echo (mode %u) timed out\n", mode);
    exit(1);
  }
  return res[0] / 1e3 / rounds;
}

/* ---- 2. FIFO round trips ------------------------------------------------------------- */

/* `warm` untimed round trips, then `rounds` timed ones, in one launch. */
__global__ void fifoRoundTripKernel(mscclppFifoDeviceHandle fifo, mscclppSemaphoreDeviceHandle sem, int useSem,
                                    int relaxed, int warm, int rounds, uint64_t* out) {
  uint64_t t0 = mscclppClockNs();
  mscclppResult_t r = mscclppSuccess;
  for (int i = 0; i < warm + rounds && r == mscclppSuccess; i++) {
    if (i == warm) t0 = mscclppClockNs();
    mscclppTriggerFields f = {};
    f.op = useSem ? MSCCLPP_TRIGGER_FLAG : MSCCLPP_TRIGGER_OP_USER_FIRST;
    uint64_t pos;
    r = relaxed ? mscclppFifoDevicePushTrigger(&fifo, mscclppTriggerPack(&f), mscclppFifoOrderRelaxed, &pos)
                : mscclppFifoDevicePush(&fifo, &f, &pos);
    if (r == mscclppSuccess) r = useSem ? mscclppSemaphoreDeviceWait(&sem) : mscclppFifoDeviceSync(&fifo, pos);
  }
  out[0] = mscclppClockNs() - t0;
  out[1] = (uint64_t)r;
}

/* One timed launch of fifoRoundTripKernel (useSem 0 / 1, relaxed push);
 * us per round trip. */
static double fifoRoundTripUs(const mscclppFifoDeviceHandle* fh, const mscclppSemaphoreDeviceHandle* sh, int useSem,
                              int relaxed, int warm, int rounds, uint64_t* out, const char* id) {
  fifoRoundTripKernel<<<1, 1>>>(*fh, *sh, useSem, relaxed, warm, rounds, out);
  CK(cudaDeviceSynchronize());
  uint64_t res[2];
  CK(cudaMemcpy(res, out, sizeof(res), cudaMemcpyDeviceToHost));
  if (res[1] != mscclppSuccess) {
    fprintf(stderr, "round-trip kernel %s failed: %s\n", id, mscclppGetErrorString((mscclppResult_t)res[1]));
    exit(1);
  }
  return res[0] / 1e3 / rounds;
}

/* ---- 2m. the FIFO served by a minimal consumer ------------------------------------------ */

/* The consumer side of the FIFO protocol and nothing else: spin (no pause)
 * on the slot at the next position until both of its commit bits say
 * "fresh", then store tail and completed (as the proxy publishes them), for
 * `n` triggers. No service loop (abort checks, handler, batching, idle
 * pause): with the real push and sync on the GPU, (2rs) - (2m) is what the
 * proxy's loop costs. Runs on a FIFO no proxy serves. */
struct minimalConsumer {
  volatile uint64_t* slots; /* host views of the FIFO's mapped block */
  volatile uint64_t* tail;
  volatile uint64_t* completed;
  uint32_t size, sizeLog2;
  uint64_t next; /* next position to take */
  uint64_t n;
  struct place place;
  int ok;
};

static void* minimalConsumerThread(void* arg) {
  struct minimalConsumer* m = (struct minimalConsumer*)arg;
  placeSelf(&m->place);
  uint64_t deadline = nowNs() + 30000000000ull;
  m->ok = 0;
  for (uint64_t k = 0; k < m->n; k++) {
    uint64_t pos = m->next;
    volatile uint64_t* slot = m->slots + 2 * (pos & (m->size - 1));
    uint64_t want = (((pos >> m->sizeLog2) & 1u) ^ 1u) << 63;
    unsigned spins = 0;
    /* a torn read shows mismatched commit bits: read again */
    while (((slot[0] ^ want) | (slot[1] ^ want)) & MSCCLPP_TRIGGER_COMMIT_BIT) {
      if ((++spins & 0xfffffu) == 0 && nowNs() > deadline) return NULL; /* the kernel times out too */
    }
    m->next = pos + 1;
    *m->tail = pos + 1;
    *m->completed = pos + 1;
  }
  m->ok = 1;
  return NULL;
}

static volatile uint64_t* hostView(void* devPtr) {
  cudaPointerAttributes a;
  CK(cudaPointerGetAttributes(&a, devPtr));
  if (a.hostPointer == NULL) {
    fprintf(stderr, "no host view of %p\n", devPtr);
    exit(1);
  }
  return (volatile uint64_t*)a.hostPointer;
}

static double minimalRoundTripUs(struct minimalConsumer* m, const mscclppFifoDeviceHandle* fh,
                                 const mscclppSemaphoreDeviceHandle* sh, int warm, int rounds, uint64_t* out) {
  m->n = (uint64_t)(warm + rounds);
  pthread_t th;
  pthread_create(&th, NULL, minimalConsumerThread, m);
  double us = fifoRoundTripUs(fh, sh, 0, 1, warm, rounds, out, "(2m)");
  pthread_join(th, NULL);
  if (!m->ok) {
    fprintf(stderr, "minimal consumer timed out\n");
    exit(1);
  }
  return us;
}

/* ---- 3. throughput ---------------------------------------------------------------------- */

/* Every thread pushes perThread triggers, then (doSync) waits for its last. */
__global__ void fifoThroughputKernel(mscclppFifoDeviceHandle fifo, int relaxed, uint32_t perThread, int doSync,
                                     uint64_t* out) {
  mscclppResult_t r = mscclppSuccess;
  uint64_t pos = 0;
  for (uint32_t i = 0; i < perThread && r == mscclppSuccess; i++) {
    mscclppTriggerFields f = {};
    f.op = MSCCLPP_TRIGGER_OP_USER_FIRST;
    f.srcOffset = i;
    r = relaxed ? mscclppFifoDevicePushTrigger(&fifo, mscclppTriggerPack(&f), mscclppFifoOrderRelaxed, &pos)
                : mscclppFifoDevicePush(&fifo, &f, &pos);
  }
  if (r == mscclppSuccess && doSync) r = mscclppFifoDeviceSync(&fifo, pos);
  if (r != mscclppSuccess) out[1] = (uint64_t)r;
}

struct handlerState {
  mscclppSemaphore_t sem;
};

static mscclppProxyHandlerResult benchHandler(void* arg, const mscclppTrigger* t, uint64_t position) {
  (void)position;
  struct handlerState* s = (struct handlerState*)arg;
  if (mscclppTriggerOp(t) == MSCCLPP_TRIGGER_FLAG) mscclppSemaphoreSignal(s->sem);
  return mscclppProxyHandlerContinue;
}

static void setTuning(mscclppProxy_t proxy, uint32_t tailBatch, uint32_t prefetchLines, int stats,
                      uint32_t stalePauseNs, const struct place* place) {
  struct mscclppProxyTuning t = {tailBatch, prefetchLines, stats, stalePauseNs};
  MK(mscclppProxyStop(proxy));
  MK(mscclppProxySetTuning(proxy, &t));
  proxyStartAt(proxy, place);
}

struct tputResult {
  double mps;        /* achieved, million triggers per second */
  double nsPer;      /* wall ns per trigger */
  double proxyNsPer; /* proxy busy ns per trigger */
  double busyFrac;   /* proxy busy time / wall time */
  double perK[3];    /* pre-claim waits, post-claim waits, PCIe tail reads per 1000 triggers */
};

/* One throughput run of `blocks` x `threads` pushers, `total` triggers in
 * all (rounded down to a multiple of the pushers). */
static struct tputResult throughput(mscclppProxy_t proxy, mscclppFifoDeviceHandle fh, int blocks, int threads,
                                    int relaxed, uint32_t total, int doSync, uint64_t* out) {
  uint32_t perThread = total / (uint32_t)(blocks * threads);
  if (perThread == 0) perThread = 1;
  CK(cudaMemset(out, 0, 2 * sizeof(uint64_t)));
  if (doSync) { /* warm-up */
    fifoThroughputKernel<<<blocks, threads>>>(fh, relaxed, perThread / 20 + 1, 1, out);
    CK(cudaDeviceSynchronize());
  }
  unsigned long long zero[4] = {0, 0, 0, 0}, stats[4];
  CK(cudaMemcpyToSymbol(gFifoStats, zero, sizeof(zero)));
  struct mscclppProxyStats s0, s1;
  MK(mscclppProxyGetStats(proxy, &s0));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  CK(cudaEventRecord(e0));
  fifoThroughputKernel<<<blocks, threads>>>(fh, relaxed, perThread, doSync, out);
  CK(cudaEventRecord(e1));
  CK(cudaEventSynchronize(e1));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  MK(mscclppProxyGetStats(proxy, &s1));
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  CK(cudaMemcpyFromSymbol(stats, gFifoStats, sizeof(stats)));
  uint64_t res[2];
  CK(cudaMemcpy(res, out, sizeof(res), cudaMemcpyDeviceToHost));
  if (res[1] != 0) {
    fprintf(stderr, "throughput kernel (%d x %d, claim policy %u) failed: %s\n", blocks, threads, fh.claimPolicy,
            mscclppGetErrorString((mscclppResult_t)res[1]));
    exit(1);
  }
  double n = (double)perThread * blocks * threads;
  struct tputResult r;
  r.mps = n / (ms / 1e3) / 1e6;
  r.nsPer = ms * 1e6 / n;
  double dt = (double)(s1.triggers - s0.triggers);
  r.proxyNsPer = dt > 0 ? (double)(s1.busyNs - s0.busyNs) / dt : 0;
  r.busyFrac = (double)(s1.busyNs - s0.busyNs) / (ms * 1e6);
  for (int k = 0; k < 3; k++) r.perK[k] = 1000.0 * (double)stats[k] / n;
  return r;
}

static void printTput(const char* id, const char* label, struct tputResult r) {
  printf("%-5s %-62s %7.2f M/s %7.1f ns %7.1f ns %5.0f%%\n", id, label, r.mps, r.nsPer, r.proxyNsPer,
         100 * r.busyFrac);
}

/* ---- 5. raw: GPU writes landing in lines the CPU reads -------------------------------- */

/* Thread t writes positions t, t + n, t + 2n, ... (n threads: the order in
 * which FIFO claims interleave) into a ring of `slots` 16-byte slots, one
 * relaxed 16-byte store each, no flow control. */
__global__ void ringWriteKernel(uint64_t* ring, uint32_t slots, uint32_t perThread) {
  uint64_t n = (uint64_t)gridDim.x * blockDim.x;
  uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (uint32_t i = 0; i < perThread; i++) {
    uint64_t p = t + i * n;
    mscclppTriggerStoreRelaxed(ring + 2 * (p & (slots - 1)), p, p);
  }
}

struct ringReader {
  volatile uint64_t* ring;
  uint32_t slots;
  struct place place;
  volatile int stop;
  uint64_t sink;
  uint64_t passes;
};

/* Read the first word of every line of the ring, round and round (a proxy
 * polling and prefetching keeps a few of them cached; this keeps all). */
static void* ringReaderThread(void* arg) {
  struct ringReader* r = (struct ringReader*)arg;
  placeSelf(&r->place);
  uint64_t sum = 0, passes = 0;
  while (!r->stop) {
    for (uint32_t s = 0; s < r->slots; s += 4) sum += r->ring[2 * s];
    passes++;
  }
  r->sink = sum;
  r->passes = passes;
  return NULL;
}

/* M/s of 16-byte GPU stores into a 512-slot host-mapped ring. */
static double ringWriteRate(int blocks, int threads, uint32_t total, int cpuReads, const struct place* place) {
  const uint32_t slots = 512;
  void *h, *d;
  MK(mscclppGpuHostAllocMapped(0, slots * 16, &h, &d));
  memset(h, 0, slots * 16);
  uint32_t perThread = total / (uint32_t)(blocks * threads);
  struct ringReader rd;
  rd.ring = (volatile uint64_t*)h;
  rd.slots = slots;
  rd.place = *place;
  rd.stop = 0;
  pthread_t th;
  if (cpuReads) pthread_create(&th, NULL, ringReaderThread, &rd);
  ringWriteKernel<<<blocks, threads>>>((uint64_t*)d, slots, perThread / 20 + 1); /* warm-up */
  CK(cudaDeviceSynchronize());
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  CK(cudaEventRecord(e0));
  ringWriteKernel<<<blocks, threads>>>((uint64_t*)d, slots, perThread);
  CK(cudaEventRecord(e1));
  CK(cudaEventSynchronize(e1));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  if (cpuReads) {
    rd.stop = 1;
    pthread_join(th, NULL);
  }
  mscclppGpuHostFreeMapped(0, h);
  return (double)perThread * blocks * threads / (ms / 1e3) / 1e6;
}

/* Proxy alone: start it on a FIFO already holding `n` triggers; time until
 * it has taken them all. */
static double drainNsPerTrigger(mscclppProxy_t proxy, uint64_t n, const struct place* place) {
  struct mscclppProxyStats s0, s;
  MK(mscclppProxyGetStats(proxy, &s0));
  uint64_t t0 = nowNs();
  proxyStartAt(proxy, place);
  do {
    MK(mscclppProxyGetStats(proxy, &s));
    if (nowNs() - t0 > 30000000000ull) {
      fprintf(stderr, "drain: the proxy took %llu of %llu triggers in 30 s\n",
              (unsigned long long)(s.triggers - s0.triggers), (unsigned long long)n);
      exit(1);
    }
  } while (s.triggers - s0.triggers < n);
  double ns = (double)(nowNs() - t0) / (double)n;
  MK(mscclppProxyStop(proxy));
  return ns;
}

static const char* policyName(uint32_t p) {
  return p == MSCCLPP_FIFO_CLAIM_CHECK_FIRST   ? "check, then claim"
         : p == MSCCLPP_FIFO_CLAIM_FIRST_SHARED ? "claim, shared wait"
                                                : "claim, poll (old)";
}


/* The CPU with the fastest raw echo (1) among the allowed ones, printing
 * the scan; -1 when fewer than two CPUs are allowed (the main thread could
 * not keep off the pinned one). */
static int scanCpus(const cpu_set_t* allowed, int node) {
  if (CPU_COUNT(allowed) < 2) {
    printf("placement: %d CPU allowed: not pinned\n", CPU_COUNT(allowed));
    return -1;
  }
  const int n = 2000, warm = 200;
  int best = -1;
  double bestUs = 0;
  printf("CPU scan: raw echo (1), echo thread pinned to each allowed CPU, %d round trips each, us:", n);
  for (int c = 0; c < CPU_SETSIZE; c++) {
    if (!CPU_ISSET(c, allowed)) continue;
    keepMainOff(allowed, c);
    struct place p = {c, node};
    double us = rawRoundTripUs(0, warm, n, &p);
    printf(" %d:%.3f", c, us);
    if (best < 0 || us < bestUs) {
      best = c;
      bestUs = us;
    }
  }
  printf("\n");
  return best;
}

int main(int argc, char** argv) {
  if (mscclppGpuDeviceCount() == 0) {
    printf("bench_fifo: skipped: needs a GPU\n");
    return 0;
  }
  int rounds = argc > 1 ? atoi(argv[1]) : 40000;
  uint32_t triggers = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 10) : 1000000u;
  int fifoSize = argc > 3 ? atoi(argv[3]) : 0;
  int blocks = argc > 4 ? atoi(argv[4]) : 10;
  const char* cpuArg = argc > 5 ? argv[5] : "auto";
  if (rounds < 100 || triggers < 10000 || triggers > BIG_FIFO || blocks < 1 || rounds / blocks < 100) {
    fprintf(stderr,
            "bench_fifo: rounds >= 100, 10000 <= triggers <= %d, blocks >= 1 and rounds / blocks >= 100, "
            "please\n",
            BIG_FIFO);
    return 2;
  }
  uint64_t benchStart = nowNs();
  /* The main thread sleeps while kernels run instead of spinning on a CPU
   * (kernels are timed on the GPU; the CPU side of each measurement has
   * its own CPU). */
  cudaError_t flagsErr = cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync);
  CK(cudaSetDevice(0));
  char desc[256];
  MK(mscclppGpuDescribe(0, desc, sizeof(desc)));
  int node = -1;
  mscclppGpuNumaNode(0, &node);
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  printf("bench_fifo on %s\n", desc);
  if (flagsErr != cudaSuccess)
    printf("note: cudaSetDeviceFlags(BlockingSync): %s; the main thread spins\n", cudaGetErrorString(flagsErr));

  /* ---- 0 ---- */
  warmKernel<<<1, 1>>>();
  CK(cudaDeviceSynchronize());
  cpu_set_t allowed;
  if (pthread_getaffinity_np(pthread_self(), sizeof(allowed), &allowed) != 0) CPU_ZERO(&allowed);
  struct place place = {-1, node};
  if (strcmp(cpuArg, "auto") == 0) {
    place.cpu = scanCpus(&allowed, node);
  } else {
    place.cpu = atoi(cpuArg);
    if (place.cpu >= 0 && (place.cpu >= CPU_SETSIZE || !CPU_ISSET(place.cpu, &allowed) || CPU_COUNT(&allowed) < 2)) {
      fprintf(stderr, "bench_fifo: cpu %d is not one of the %d allowed CPUs (or the only one)\n", place.cpu,
              CPU_COUNT(&allowed));
      return 2;
    }
  }
  if (place.cpu >= 0) {
    keepMainOff(&allowed, place.cpu);
    printf("placement: echo, proxy, consumer and ring-reader threads pinned to CPU %d (%s); main thread on the other "
           "%d allowed CPUs\n",
           place.cpu, strcmp(cpuArg, "auto") == 0 ? "fastest in the scan" : "asked", CPU_COUNT(&allowed) - 1);
  } else {
    printf("placement: not pinned; threads bind to the GPU's NUMA node %d (-1: anywhere)\n", node);
  }

  /* ---- 1 ---- */
  const int warm = rounds / 10 + 1;
  rawRoundTripUs(0, warm, rounds / 10 + 1, &place); /* warm-up */
  struct {
    const char* id;
    unsigned mode;
    const char* label;
    double us;
  } raw[] = {
      {"(1)", 0, "raw GPU->host-mapped->CPU echo->GPU round trip (volatile)", 0},
      {"(1a)", RAW_ATOMIC, "(1) + atomicAdd on device memory per round", 0},
      {"(1b)", RAW_RELEASE, "(1) with st.release.sys ping", 0},
      {"(1c)", RAW_GPU_FENCE, "(1) with fence.acq_rel.gpu before the ping", 0},
      {"(1d)", RAW_ACQUIRE, "(1) spinning with ld.acquire.sys", 0},
      {"(1e)", RAW_ATOMIC | RAW_RELEASE, "(1a)+(1b): the raw part of release push (claim first)", 0},
      {"(1g)", RAW_LOAD, "(1) + ld.relaxed.gpu of device memory per round", 0},
      {"(1h)", RAW_LOAD | RAW_ATOMIC, "(1) + that load, then the atomicAdd (check, then claim)", 0},
      {"(1i)", RAW_LOAD | RAW_ATOMIC | RAW_RELEASE, "(1h)+(1b): the raw part of release push (check first)", 0},
      {"(1p)", RAW_CPU_PAUSE, "(1) with a pause in the CPU's spin (as the proxy's idle pass)", 0},
  };
  enum { R1 = 0, R1A = 1, R1E = 5, R1H = 7, R1I = 8 };
  const int nRaw = (int)(sizeof(raw) / sizeof(raw[0]));
  for (int k = 0; k < nRaw; k++) raw[k].us = rawRoundTripUs(raw[k].mode, warm, rounds, &place);
  double base = raw[R1].us;

  /* ---- services ---- */
  mscclppAbort_t abort;
  MK(mscclppAbortCreate(0, &abort));
  mscclppSemaphoreConfig sc = MSCCLPP_SEMAPHORE_CONFIG_INITIALIZER;
  sc.kind = mscclppSemaphoreHostToDevice;
  sc.device = 0;
  sc.abort = abort;
  struct handlerState hs = {NULL};
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
  if (place.cpu >= 0) pc.numaNode = -1; /* keep the CPU it inherits (proxyStartAt) */
  mscclppProxy_t proxy;
  MK(mscclppProxyCreate(&pc, &proxy));
  MK(mscclppProxyAddFifo(proxy, fifo, benchHandler, NULL, &hs));
  mscclppFifoDeviceHandle fh;
  mscclppSemaphoreDeviceHandle sh;
  MK(mscclppFifoGetDeviceHandle(fifo, &fh));
  MK(mscclppSemaphoreGetDeviceHandle(hs.sem, &sh));
  /* (2m)'s FIFO: the same configuration, served by the minimal consumer */
  mscclppFifo_t mfifo;
  MK(mscclppFifoCreate(&fc, &mfifo));
  mscclppFifoDeviceHandle mh;
  MK(mscclppFifoGetDeviceHandle(mfifo, &mh));
  struct minimalConsumer mc;
  memset(&mc, 0, sizeof(mc));
  mc.slots = hostView(mh.slots);
  mc.tail = hostView(mh.tail);
  mc.completed = hostView(mh.completed);
  mc.size = mh.size;
  mc.sizeLog2 = mh.sizeLog2;
  mc.place = place;
  uint64_t* out;
  CK(cudaMalloc(&out, 2 * sizeof(uint64_t)));
  const uint32_t defBatch = MSCCLPP_PROXY_TAIL_BATCH_DEFAULT, defPrefetch = MSCCLPP_PROXY_PREFETCH_LINES_DEFAULT;
  const uint32_t CHECK_FIRST = MSCCLPP_FIFO_CLAIM_CHECK_FIRST, SHARED = MSCCLPP_FIFO_CLAIM_FIRST_SHARED,
                 OLD = MSCCLPP_FIFO_CLAIM_FIRST_POLL;

  /* ---- 2 ---- */
  struct {
    const char* id;
    int useSem, relaxed;
    uint32_t policy;
    const char* label;
    int rawIndex;
    double us;
  } rt[] = {
      {"(2)", 0, 0, CHECK_FIRST, "push (release: mscclppFifoDevicePush) -> proxy -> sync", R1I, 0},
      {"(2o)", 0, 0, OLD, "(2), old claim policy (claim first)", R1E, 0},
      {"(2r)", 0, 1, CHECK_FIRST, "push (relaxed) -> proxy -> sync", R1H, 0},
      {"(2ro)", 0, 1, OLD, "(2r), old claim policy (claim first)", R1A, 0},
      {"(2rs)", 0, 1, SHARED, "(2r), claim first, shared tail cache (default policy)", R1A, 0},
      {"(2s)", 1, 1, CHECK_FIRST, "push (relaxed) -> proxy signals H2D semaphore -> GPU wait", R1H, 0},
      {"(2ss)", 1, 1, SHARED, "(2s), default claim policy", R1A, 0},
  };
  const int nRt = (int)(sizeof(rt) / sizeof(rt[0]));
  const int R2RS = 4;
  {
    struct mscclppProxyTuning t = {defBatch, defPrefetch, 0, 0};
    MK(mscclppProxySetTuning(proxy, &t));
  }
  proxyStartAt(proxy, &place);
  for (int k = 0; k < nRt; k++) {
    mscclppFifoDeviceHandle h = fh;
    h.claimPolicy = rt[k].policy;
    rt[k].us = fifoRoundTripUs(&h, &sh, rt[k].useSem, rt[k].relaxed, warm, rounds, out, rt[k].id);
  }
  MK(mscclppProxyStop(proxy)); /* it runs only during its own measurements in G */

  printf("FIFO size %d, %d round trips per row (after %d untimed ones in the same launch), %u triggers per "
         "throughput run, %d SMs, GPU NUMA node %d\n",
         size, rounds, warm, triggers, sms, node);
  printf("GPU proxy defaults: tail published after the first trigger of a pass, every %u, and when the FIFO is "
         "empty; prefetch %u lines\n",
         defBatch, defPrefetch);
  printf("claim policies: old = claim, then each full pusher polls the tail over PCIe (sleeps %u ns per missing "
         "slot, max %u); shared = claim, then wait on the device-side tail cache that one waiter per %u ns "
         "refreshes; check = wait for space on that cache, then claim (default: %s)\n",
         MSCCLPP_FIFO_FULL_SLEEP_NS_PER_SLOT, MSCCLPP_FIFO_FULL_SLEEP_MAX_NS, MSCCLPP_FIFO_TAIL_REFRESH_NS,
         policyName(MSCCLPP_FIFO_CLAIM_DEFAULT));
  printf("\n%-5s %-62s %9s %8s %s\n", "", "latency (one GPU thread), each row measured once", "value", "vs (1)",
         "vs its raw part");
  for (int k = 0; k < nRaw; k++)
    printf("%-5s %-62s %6.3f us %7.2fx\n", raw[k].id, raw[k].label, raw[k].us, raw[k].us / base);
  for (int k = 0; k < nRt; k++)
    printf("%-5s %-62s %6.3f us %7.2fx  %5.2fx of %s\n", rt[k].id, rt[k].label, rt[k].us, rt[k].us / base,
           rt[k].us / raw[rt[k].rawIndex].us, raw[rt[k].rawIndex].id);
  fflush(stdout);

  /* ---- G ---- */
  enum { G_RAW, G_ATOMIC, G_PAUSE, G_MIN, G_OURS, NG };
  static const char* gId[NG] = {"(1)", "(1a)", "(1p)", "(2m)", "(2rs)"};
  const int perBlock = rounds / blocks, gWarm = perBlock / 10 + 1;
  double* g = (double*)calloc((size_t)blocks * NG, sizeof(double));
  double* tmp = (double*)calloc((size_t)blocks, sizeof(double));
  if (g == NULL || tmp == NULL) {
    fprintf(stderr, "bench_fifo: out of memory\n");
    return 1;
  }
  printf("\ngoal measurement: %d blocks; in each, every kind below for %d round trips (after %d untimed ones in the "
         "same launch), in an order rotated from block to block, the CPU side on %s\n",
         blocks, perBlock, gWarm, place.cpu >= 0 ? "the pinned CPU" : "whatever CPU it gets");
  printf("  (1) raw echo; (1a) + device atomicAdd; (1p) echo spinning with pause; (2m) relaxed push -> minimal "
         "consumer (slot poll, tail store) -> sync; (2rs) relaxed push -> proxy -> sync (goal row)\n");
  printf("%-6s %-26s %8s %8s %8s %8s %8s %9s\n", "block", "order", gId[0], gId[1], gId[2], gId[3], gId[4], "(2rs)/(1)");
  mscclppFifoDeviceHandle gh = fh;
  gh.claimPolicy = SHARED;
  for (int b = 0; b < blocks; b++) {
    char order[64] = "";
    for (int j = 0; j < NG; j++) {
      int k = (b + j) % NG;
      double us = 0;
      switch (k) {
        case G_RAW: us = rawRoundTripUs(0, gWarm, perBlock, &place); break;
        case G_ATOMIC: us = rawRoundTripUs(RAW_ATOMIC, gWarm, perBlock, &place); break;
        case G_PAUSE: us = rawRoundTripUs(RAW_CPU_PAUSE, gWarm, perBlock, &place); break;
        case G_MIN: us = minimalRoundTripUs(&mc, &mh, &sh, gWarm, perBlock, out); break;
        default:
          proxyStartAt(proxy, &place);
          us = fifoRoundTripUs(&gh, &sh, 0, 1, gWarm, perBlock, out, "(2rs)");
          MK(mscclppProxyStop(proxy));
          break;
      }
      g[b * NG + k] = us;
      snprintf(order + strlen(order), sizeof(order) - strlen(order), "%s%s", j ? "," : "", gId[k]);
    }
    const double* r = &g[b * NG];
    printf("%-6d %-26s %8.3f %8.3f %8.3f %8.3f %8.3f %8.3fx\n", b + 1, order, r[G_RAW], r[G_ATOMIC], r[G_PAUSE],
           r[G_MIN], r[G_OURS], r[G_OURS] / r[G_RAW]);
    fflush(stdout);
  }
  /* medians of each kind's figure and of the per-block ratios */
  double med[NG];
  for (int k = 0; k < NG; k++) {
    for (int b = 0; b < blocks; b++) tmp[b] = g[b * NG + k];
    med[k] = benchSortMedian(tmp, blocks);
  }
  struct {
    const char* label;
    int num, den;
    double med, lo, hi;
  } gr[] = {
      {"(2rs)/(1)   goal: our round trip against the raw echo", G_OURS, G_RAW, 0, 0, 0},
      {"(1a)/(1)    the device atomic's share", G_ATOMIC, G_RAW, 0, 0, 0},
      {"(1p)/(1)    a pause in the CPU's spin", G_PAUSE, G_RAW, 0, 0, 0},
      {"(2m)/(1a)   FIFO protocol beyond raw + atomic", G_MIN, G_ATOMIC, 0, 0, 0},
      {"(2rs)/(2m)  the proxy's service loop", G_OURS, G_MIN, 0, 0, 0},
      {"(2rs)/(1a)  everything beyond raw + atomic", G_OURS, G_ATOMIC, 0, 0, 0},
  };
  const int nGr = (int)(sizeof(gr) / sizeof(gr[0]));
  for (int q = 0; q < nGr; q++) {
    for (int b = 0; b < blocks; b++) tmp[b] = g[b * NG + gr[q].num] / g[b * NG + gr[q].den];
    gr[q].med = benchSortMedian(tmp, blocks); /* sorted: tmp[0] is the least, tmp[blocks - 1] the most */
    gr[q].lo = tmp[0];
    gr[q].hi = tmp[blocks - 1];
  }
  printf("%-6s %-26s %8.3f %8.3f %8.3f %8.3f %8.3f %8.3fx\n", "median", "(of each column)", med[0], med[1], med[2],
         med[3], med[4], gr[0].med);
  printf("per-block ratios, median [least, most] over %d blocks:\n", blocks);
  for (int q = 0; q < nGr; q++) printf("  %-52s %6.3fx [%.3f, %.3f]\n", gr[q].label, gr[q].med, gr[q].lo, gr[q].hi);
  double goal = gr[0].med;
  free(tmp);
  free(g);
  fflush(stdout);

  /* ---- 3 ---- */
  printf("\nthroughput (handler counts only), M/s achieved and (proxy busy %%: near 100%% = the proxy thread is the "
         "limit),\nper claim policy; then, for the default policy, per 1000 triggers: claims that waited before / "
         "after claiming, PCIe reads of the tail\n");
  printf("%-5s %-42s %15s %15s %15s %6s %6s %6s %6s\n", "", "pushers", "old", "shared", "check*", "*/old", "pre",
         "post", "tailrd");
  struct {
    const char* id;
    int blocks, threads, relaxed;
    const char* label;
  } tp[] = {
      {"(3a)", 1, 1, 0, "1 block x 1 thread, release push"},
      {"(3b)", 1, 1, 1, "1 block x 1 thread, relaxed push"},
      {"(3c)", sms, 1, 0, "SMs blocks x 1 thread, release push"},
      {"(3d)", sms, 1, 1, "SMs blocks x 1 thread, relaxed push"},
      {"(3k)", sms, 32, 1, "SMs blocks x 32 threads (one warp), relaxed"},
      {"(3l)", 8, 128, 1, "8 blocks x 128 threads, relaxed"},
  };
  const int nTp = (int)(sizeof(tp) / sizeof(tp[0]));
  const uint32_t policies[3] = {OLD, SHARED, CHECK_FIRST};
  struct tputResult main3d = {0, 0, 0, 0, {0, 0, 0}}, old3d = main3d, one3b = main3d;
  setTuning(proxy, defBatch, defPrefetch, 1, 0, &place);
  for (int k = 0; k < nTp; k++) {
    struct tputResult r[3];
    for (int q = 0; q < 3; q++) {
      mscclppFifoDeviceHandle h = fh;
      h.claimPolicy = policies[q];
      r[q] = throughput(proxy, h, tp[k].blocks, tp[k].threads, tp[k].relaxed, triggers, 1, out);
    }
    char label[96];
    snprintf(label, sizeof(label), "%s", tp[k].label);
    if (strncmp(label, "SMs", 3) == 0) snprintf(label, sizeof(label), "%d%s", sms, tp[k].label + 3);
    char cell[3][32];
    for (int q = 0; q < 3; q++) snprintf(cell[q], sizeof(cell[q]), "%7.2f (%3.0f%%)", r[q].mps, 100 * r[q].busyFrac);
    printf("%-5s %-42s %15s %15s %15s %5.2fx %6.1f %6.1f %6.1f\n", tp[k].id, label, cell[0], cell[1], cell[2],
           r[2].mps / r[0].mps, r[2].perK[0], r[2].perK[1], r[2].perK[2]);
    if (strcmp(tp[k].id, "(3d)") == 0) {
      main3d = r[2];
      old3d = r[0];
    }
    if (strcmp(tp[k].id, "(3b)") == 0) one3b = r[2];
    fflush(stdout);
  }

  printf("\nproxy variants, default claim policy: wall/trig = 1 / achieved rate; proxy/trig = the proxy thread's "
         "busy time per trigger\n");
  printf("%-5s %-62s %11s %10s %10s %6s\n", "", "", "achieved", "wall/trig", "proxy/trig", "busy");
  printTput("(3d)", "(3d) again, as above", main3d);
  struct {
    const char* id;
    int blocks, threads;
    uint32_t pauseNs;
    const char* label;
  } pv[] = {
      {"(3p)", sms, 1, 100, "(3d), proxy pauses 100 ns before re-reading a stale slot"},
      {"(3q)", sms, 1, 500, "(3d), proxy pauses 500 ns before re-reading a stale slot"},
      {"(3r)", 1, 1, 100, "(3b), proxy pauses 100 ns before re-reading a stale slot"},
      {"(3s)", sms, 32, 100, "(3k), proxy pauses 100 ns before re-reading a stale slot"},
  };
  for (size_t k = 0; k < sizeof(pv) / sizeof(pv[0]); k++) {
    setTuning(proxy, defBatch, defPrefetch, 1, pv[k].pauseNs, &place);
    struct tputResult r = throughput(proxy, fh, pv[k].blocks, pv[k].threads, 1, triggers, 1, out);
    printTput(pv[k].id, pv[k].label, r);
    fflush(stdout);
  }
  printTput("(3b)", "(3b) as above, for (3r)", one3b);
  MK(mscclppProxyStop(proxy));
  mscclppResult_t err;
  MK(mscclppProxyGetAsyncError(proxy, &err));

  /* GPU side alone, then the proxy alone, on a FIFO that never fills. */
  mscclppFifoConfig bc = fc;
  bc.size = BIG_FIFO;
  mscclppFifo_t big;
  MK(mscclppFifoCreate(&bc, &big));
  mscclppProxyConfig bpc = pc;
  bpc.name = "bench-drain";
  mscclppProxy_t drain;
  MK(mscclppProxyCreate(&bpc, &drain));
  MK(mscclppProxyAddFifo(drain, big, benchHandler, NULL, &hs));
  struct mscclppProxyTuning dt = MSCCLPP_PROXY_TUNING_DEFAULT;
  dt.stats = 1;
  MK(mscclppProxySetTuning(drain, &dt));
  mscclppFifoDeviceHandle bh;
  MK(mscclppFifoGetDeviceHandle(big, &bh));
  struct {
    const char* id;
    int threads;
    const char* label;
  } cap[] = {{"(4a)", 1, " blocks x 1 thread, relaxed, proxy stopped"},
             {"(4b)", 32, " blocks x 32 threads, relaxed, proxy stopped"}};
  double drainNs[2];
  printf("\n");
  for (int k = 0; k < 2; k++) {
    struct tputResult r = throughput(drain, bh, sms, cap[k].threads, 1, triggers, 0, out);
    char label[96];
    snprintf(label, sizeof(label), "GPU alone: %d%s", sms, cap[k].label);
    printf("%-5s %-62s %7.2f M/s %7.1f ns\n", cap[k].id, label, r.mps, r.nsPer);
    uint32_t perThread = triggers / (uint32_t)(sms * cap[k].threads);
    drainNs[k] = drainNsPerTrigger(drain, (uint64_t)perThread * sms * cap[k].threads, &place);
    printf("%-5s %-62s %7.2f M/s %7.1f ns\n", k == 0 ? "(4c)" : "(4d)",
           k == 0 ? "proxy alone: drains (4a)'s triggers (16 MiB ring, mostly uncached)"
                  : "proxy alone: drains (4b)'s triggers (16 MiB ring, mostly uncached)",
           1e3 / drainNs[k], drainNs[k]);
    fflush(stdout);
  }
  mscclppResult_t drainErr;
  MK(mscclppProxyGetAsyncError(drain, &drainErr));

  /* ---- 5 ---- */
  printf("\nraw: GPU 16-byte relaxed stores round a 512-slot (8 KiB) host-mapped ring, no flow control\n");
  double ring[4];
  ring[0] = ringWriteRate(sms, 1, triggers, 0, &place);
  ring[1] = ringWriteRate(sms, 1, triggers, 1, &place);
  ring[2] = ringWriteRate(1, 1, triggers / 4, 0, &place);
  ring[3] = ringWriteRate(1, 1, triggers / 4, 1, &place);
  char ringLabel[96];
  snprintf(ringLabel, sizeof(ringLabel), "%d blocks x 1 thread, CPU idle", sms);
  printf("%-5s %-62s %7.2f M/s\n", "(5a)", ringLabel, ring[0]);
  printf("%-5s %-62s %7.2f M/s %5.2fx of (5a)\n", "(5b)", "(5a) while a CPU thread keeps reading every ring line",
         ring[1], ring[1] / ring[0]);
  printf("%-5s %-62s %7.2f M/s\n", "(5c)", "1 block x 1 thread, CPU idle", ring[2]);
  printf("%-5s %-62s %7.2f M/s %5.2fx of (5c)\n", "(5d)", "(5c) while a CPU thread keeps reading every ring line",
         ring[3], ring[3] / ring[2]);

  printf("\ngoal 1: relaxed push round trip with the default claim policy (2rs) = %.3fx of the raw echo (1): median "
         "of %d per-block ratios (least %.3f, most %.3f): %s (<= 1.15x); (2rs) measured once above: %.2fx; release "
         "push (2) = %.2fx of (1), %.2fx of (1i) which pays the same fence\n",
         goal, blocks, gr[0].lo, gr[0].hi, goal <= 1.15 ? "met" : "NOT met", rt[R2RS].us / base, rt[0].us / base,
         rt[0].us / raw[R1I].us);
  printf("goal 2: (3d) %.2f M/s (old claim policy %.2f M/s, %.1fx); proxy busy %.0f%%, %.1f ns per trigger: %s\n",
         main3d.mps, old3d.mps, main3d.mps / old3d.mps, 100 * main3d.busyFrac, main3d.proxyNsPer,
         main3d.busyFrac >= 0.9 ? "limited by the proxy thread" : "NOT limited by the proxy thread (GPU side or PCIe)");
  printf("async errors: %s / %s; bench time %.1f s\n", mscclppGetErrorString(err), mscclppGetErrorString(drainErr),
         (nowNs() - benchStart) / 1e9);

  CK(cudaFree(out));
  MK(mscclppProxyDestroy(drain));
  MK(mscclppProxyDestroy(proxy));
  MK(mscclppFifoDestroy(big));
  MK(mscclppFifoDestroy(fifo));
  MK(mscclppFifoDestroy(mfifo));
  MK(mscclppSemaphoreDestroy(hs.sem));
  MK(mscclppAbortDestroy(abort));
  return err == mscclppSuccess && drainErr == mscclppSuccess ? 0 : 1;
}
