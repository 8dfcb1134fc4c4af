/* SPDX-License-Identifier: MIT */
/* The FIFO and proxy on the host backend (a CPU thread plays the kernel), next
 * to the raw limit, in one run:
 *  0. placement: the producer side (the main thread: raw echo's pinger, the
 *     pusher) runs pinned to CPU P, the other side (the echo thread, the
 *     proxy thread, the minimal consumer) to CPU Q, the same for all;
 *  1. raw: thread A stores a counter into a cache line, thread B echoes it into
 *     another line, A spins on the echo; measured with and without a pause
 *     instruction in the spin loops, and the faster one is the reference;
 *  2. push -> proxy -> sync, one trigger at a time (handler does nothing);
 *     push -> proxy handler signals a host-to-device semaphore -> producer
 *     waits on it through its device handle;
 *  G. the goal figure, as bench_fifo's: B blocks, each measuring back to
 *     back, in an order rotated from block to block, (1a) the raw echo with
 *     pause, (1b) without, (2m) the FIFO (real push and sync) served by a
 *     minimal consumer loop (poll the slot, take, publish; no service loop,
 *     no pause) and (2) push -> proxy -> sync; the same rounds and warm-up
 *     (before the clock starts) for each, a fresh second thread on Q each
 *     time, the proxy running only during its own measurement. The figure is
 *     the MEDIAN over blocks of the per-block ratio (2) / min((1a), (1b));
 *     every block is printed;
 *  3. push throughput from 1 producer thread (handler does nothing);
 *  2t, 3t: (2) and (3) again with the GPU's proxy defaults (tail published
 *     every 8 triggers and when the FIFO is empty, prefetch 2 lines), for
 *     comparison with the host backend's (after every trigger, no prefetch).
 * Usage: bench_fifo_host [rounds=240000] [triggers=5000000] [fifoSize=MSCCLPP_FIFO_SIZE] [blocks=12] [cpus=auto]
 *   rounds: per row of 1 and 2, and per kind in G (rounds / blocks per block);
 *   cpus: auto (P = the lowest allowed CPU, Q = the highest), "P,Q", or -1
 *   (no pinning: the scheduler places both sides).
 * Needs two idle cores: both sides busy-poll. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "mscclpp/fifo.h"
#include "mscclpp/fifo_device.h"
#include "mscclpp/proxy.h"
#include "mscclpp/semaphore.h"
#include "mscclpp/semaphore_device.h"
#include "proxy/fifo.h"
#include "proxy/proxy.h"
#include "bench_stats.h"

#define MK(expr)                                                                                          \
  do {                                                                                                    \
    mscclppResult_t r_ = (expr);                                                                          \
    if (r_ != mscclppSuccess) {                                                                           \
      fprintf(stderr, "%s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #expr, mscclppGetErrorString(r_),     \
              mscclppGetLastError());                                                                     \
      exit(1);                                                                                            \
    }                                                                                                     \
  } while (0)

/* ---- 0. placement ------------------------------------------------------------------- */

/* CPU of the calling thread: pinned to `cpu` (>= 0), or left as it is (-1). */
static void pinSelf(int cpu) {
  if (cpu < 0) return;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  int err = pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
  if (err != 0) {
    fprintf(stderr, "pthread_setaffinity_np(%d): %s\n", cpu, strerror(err));
    exit(1);
  }
}

struct placement {
  int p; /* producer side (main thread), -1: not pinned */
  int q; /* the other side */
};

/* Start the proxy's thread on CPU q: a new thread inherits its creator's
 * affinity (the proxy is created with numaNode -1 and keeps it). */
static void proxyStartOn(mscclppProxy_t proxy, const struct placement* pl) {
  pinSelf(pl->q);
  MK(mscclppProxyStart(proxy));
  pinSelf(pl->p);
}

/* ---- 1. raw echo of a cache line -------------------------------------------------- */

/* ping and pong in different 128-byte pairs of lines: x86's adjacent-line
 * prefetcher would otherwise drag one side's line along with the other's
 * (the FIFO's slots and its tail line are far apart too). */
struct lines {
  uint64_t ping __attribute__((aligned(128)));
  uint64_t pong __attribute__((aligned(128)));
  int rounds;
  int pause;
  int cpu;
};

static void* echo(void* arg) {
  struct lines* l = arg;
  pinSelf(l->cpu);
  mscclppDeadline d = mscclppDeadlineIn(30);
  for (int i = 1; i <= l->rounds; i++) {
    unsigned spins = 0;
    while (__atomic_load_n(&l->ping, __ATOMIC_ACQUIRE) != (uint64_t)i) {
      if (l->pause) __builtin_ia32_pause();
      if ((++spins & 0xfffff) == 0 && mscclppDeadlinePassed(d)) return NULL;
    }
    __atomic_store_n(&l->pong, (uint64_t)i, __ATOMIC_RELEASE);
  }
  return NULL;
}

/* `warm` untimed rounds, then `rounds` timed ones. */
static double rawRoundTripUs(int warm, int rounds, int pause, const struct placement* pl) {
  static struct lines l;
  l.ping = l.pong = 0;
  l.rounds = warm + rounds;
  l.pause = pause;
  l.cpu = pl->q;
  pthread_t th;
  pthread_create(&th, NULL, echo, &l);
  mscclppDeadline d = mscclppDeadlineIn(30);
  uint64_t t0 = mscclppTimeNs();
  for (int i = 1; i <= warm + rounds; i++) {
    if (i == warm + 1) t0 = mscclppTimeNs();
    __atomic_store_n(&l.ping, (uint64_t)i, __ATOMIC_RELEASE);
    unsigned spins = 0;
    while (__atomic_load_n(&l.pong, __ATOMIC_ACQUIRE) != (uint64_t)i) {
      if (pause) __builtin_ia32_pause();
      if ((++spins & 0xfffff) == 0 && mscclppDeadlinePassed(d)) {
        fprintf(stderr, "raw echo timed out\n");
        exit(1);
      }
    }
  }
  double us = (mscclppTimeNs() - t0) / 1e3 / rounds;
  pthread_join(th, NULL);
  return us;
}

/* ---- 2, 3. the FIFO ---------------------------------------------------------------------- */

struct handlerState {
  mscclppSemaphore_t sem;
  uint64_t count;
};

static mscclppProxyHandlerResult handler(void* arg, const mscclppTrigger* t, uint64_t position) {
  (void)position;
  struct handlerState* s = arg;
  s->count++;
  if (mscclppTriggerOp(t) == MSCCLPP_TRIGGER_FLAG) mscclppSemaphoreSignal(s->sem);
  return mscclppProxyHandlerContinue;
}

/* `warm` untimed round trips, then `rounds` timed ones. */
static double roundTripUs(const mscclppFifoDeviceHandle* fifo, const mscclppSemaphoreDeviceHandle* sem, int warm,
                          int rounds) {
  mscclppTriggerFields f = {0};
  f.op = sem != NULL ? MSCCLPP_TRIGGER_FLAG : MSCCLPP_TRIGGER_OP_USER_FIRST;
  uint64_t t0 = mscclppTimeNs();
  for (int i = 0; i < warm + rounds; i++) {
    if (i == warm) t0 = mscclppTimeNs();
    uint64_t pos;
    MK(mscclppFifoDevicePush(fifo, &f, &pos));
    MK(sem != NULL ? mscclppSemaphoreDeviceWait(sem) : mscclppFifoDeviceSync(fifo, pos));
  }
  return (mscclppTimeNs() - t0) / 1e3 / rounds;
}

/* The consumer side of the FIFO protocol and nothing else (the proxy's
 * per-trigger steps, without its service loop: no abort checks, handler,
 * batching or idle pause) on a FIFO no proxy serves, for `n` triggers. */
struct minimalConsumer {
  struct mscclppFifo* fifo;
  uint64_t n;
  int cpu;
  int ok;
};

static void* minimalConsumerThread(void* arg) {
  struct minimalConsumer* m = arg;
  pinSelf(m->cpu);
  mscclppDeadline d = mscclppDeadlineIn(30);
  m->ok = 0;
  for (uint64_t k = 0; k < m->n; k++) {
    mscclppTrigger t;
    unsigned spins = 0;
    while (!mscclppFifoHostPoll(m->fifo, &t)) {
      if ((++spins & 0xfffff) == 0 && mscclppDeadlinePassed(d)) return NULL; /* the producer times out too */
    }
    mscclppFifoHostTake(m->fifo);
    mscclppFifoHostPublish(m->fifo);
    mscclppFifoHostComplete(m->fifo, m->fifo->hostTail);
  }
  m->ok = 1;
  return NULL;
}

static double minimalRoundTripUs(struct minimalConsumer* m, const mscclppFifoDeviceHandle* fh, int warm, int rounds) {
  m->n = (uint64_t)(warm + rounds);
  pthread_t th;
  pthread_create(&th, NULL, minimalConsumerThread, m);
  double us = roundTripUs(fh, NULL, warm, rounds);
  pthread_join(th, NULL);
  if (!m->ok) {
    fprintf(stderr, "minimal consumer timed out\n");
    exit(1);
  }
  return us;
}

static double throughput(const mscclppFifoDeviceHandle* fifo, uint32_t triggers) {
  mscclppTriggerFields f = {0};
  f.op = MSCCLPP_TRIGGER_OP_USER_FIRST;
  uint64_t t0 = mscclppTimeNs(), pos = 0;
  for (uint32_t i = 0; i < triggers; i++) {
    f.srcOffset = i;
    MK(mscclppFifoDevicePush(fifo, &f, &pos));
  }
  MK(mscclppFifoDeviceSync(fifo, pos));
  return triggers / ((mscclppTimeNs() - t0) / 1e9);
}


static double min2(double a, double b) { return a < b ? a : b; }

int main(int argc, char** argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 240000;
  uint32_t triggers = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 10) : 5000000u;
  int fifoSize = argc > 3 ? atoi(argv[3]) : 0;
  int blocks = argc > 4 ? atoi(argv[4]) : 12;
  const char* cpus = argc > 5 ? argv[5] : "auto";
  if (rounds < 100 || triggers < 1 || blocks < 1 || rounds / blocks < 100) {
    fprintf(stderr, "bench_fifo_host: rounds >= 100, triggers >= 1, blocks >= 1 and rounds / blocks >= 100, please\n");
    return 2;
  }

  /* ---- 0 ---- */
  cpu_set_t allowed;
  if (pthread_getaffinity_np(pthread_self(), sizeof(allowed), &allowed) != 0) CPU_ZERO(&allowed);
  struct placement pl = {-1, -1};
  if (strcmp(cpus, "auto") == 0) {
    for (int c = 0; c < CPU_SETSIZE; c++)
      if (CPU_ISSET(c, &allowed)) {
        if (pl.p < 0) pl.p = c;
        pl.q = c;
      }
    if (pl.p == pl.q) pl.p = pl.q = -1;
  } else if (strcmp(cpus, "-1") != 0) {
    if (sscanf(cpus, "%d,%d", &pl.p, &pl.q) != 2 || pl.p < 0 || pl.q < 0 || pl.p == pl.q || pl.p >= CPU_SETSIZE ||
        pl.q >= CPU_SETSIZE || !CPU_ISSET(pl.p, &allowed) || !CPU_ISSET(pl.q, &allowed)) {
      fprintf(stderr, "bench_fifo_host: cpus \"%s\": use auto, -1, or P,Q (two different allowed CPUs)\n", cpus);
      return 2;
    }
  }
  pinSelf(pl.p);

  const int warm = rounds / 10 + 1;
  rawRoundTripUs(warm, rounds / 10 + 1, 1, &pl); /* warm-up */
  double rawPause = rawRoundTripUs(warm, rounds, 1, &pl);
  double rawSpin = rawRoundTripUs(warm, rounds, 0, &pl);
  double raw = rawPause < rawSpin ? rawPause : rawSpin;

  mscclppAbort_t abort;
  MK(mscclppAbortCreate(-1, &abort));
  mscclppSemaphoreConfig sc = MSCCLPP_SEMAPHORE_CONFIG_INITIALIZER;
  sc.kind = mscclppSemaphoreHostToDevice;
  sc.abort = abort;
  struct handlerState hs = {NULL, 0};
  MK(mscclppSemaphoreCreate(&sc, &hs.sem));
  mscclppFifoConfig fc = MSCCLPP_FIFO_CONFIG_INITIALIZER;
  fc.size = fifoSize;
  fc.abort = abort;
  mscclppFifo_t fifo;
  MK(mscclppFifoCreate(&fc, &fifo));
  int size = 0;
  MK(mscclppFifoGetSize(fifo, &size));
  mscclppProxyConfig pc = MSCCLPP_PROXY_CONFIG_INITIALIZER;
  pc.abort = abort;
  pc.name = "bench-proxy";
  if (pl.q >= 0) pc.numaNode = -1; /* keep the CPU it inherits (proxyStartOn) */
  mscclppProxy_t proxy;
  MK(mscclppProxyCreate(&pc, &proxy));
  MK(mscclppProxyAddFifo(proxy, fifo, handler, NULL, &hs));
  mscclppFifoDeviceHandle fh;
  mscclppSemaphoreDeviceHandle sh;
  MK(mscclppFifoGetDeviceHandle(fifo, &fh));
  MK(mscclppSemaphoreGetDeviceHandle(hs.sem, &sh));
  /* (2m)'s FIFO: the same configuration, served by the minimal consumer */
  mscclppFifo_t mfifo;
  MK(mscclppFifoCreate(&fc, &mfifo));
  mscclppFifoDeviceHandle mh;
  MK(mscclppFifoGetDeviceHandle(mfifo, &mh));
  struct minimalConsumer mc = {mfifo, 0, pl.q, 0};

  proxyStartOn(proxy, &pl);
  double rt = roundTripUs(&fh, NULL, warm, rounds);
  double rtSem = roundTripUs(&fh, &sh, warm, rounds);
  throughput(&fh, triggers / 10 + 1);
  double tput = throughput(&fh, triggers);
  MK(mscclppProxyStop(proxy)); /* it runs only during its own measurements in G */

  /* ---- G ---- */
  enum { G_PAUSE, G_SPIN, G_MIN, G_OURS, NG };
  static const char* gId[NG] = {"(1a)", "(1b)", "(2m)", "(2)"};
  const int perBlock = rounds / blocks, gWarm = perBlock / 10 + 1;
  double* g = calloc((size_t)blocks * NG, sizeof(double));
  double* tmp = calloc((size_t)blocks, sizeof(double));
  if (g == NULL || tmp == NULL) {
    fprintf(stderr, "bench_fifo_host: out of memory\n");
    return 1;
  }
  printf("bench_fifo_host: FIFO size %d, %d round trips per row (after %d untimed ones), %u triggers for throughput; ",
         size, rounds, warm, triggers);
  if (pl.p >= 0)
    printf("producer side pinned to CPU %d, echo / proxy / consumer to CPU %d\n", pl.p, pl.q);
  else
    printf("not pinned\n");
  printf("\ngoal measurement: %d blocks; in each, every kind for %d round trips (after %d untimed ones), in an order "
         "rotated from block to block\n",
         blocks, perBlock, gWarm);
  printf("  (1a) raw echo, pause in spin; (1b) plain spin; (2m) push -> minimal consumer (poll, take, publish) -> "
         "sync; (2) push -> proxy -> sync\n");
  printf("%-6s %-22s %8s %8s %8s %8s %14s\n", "block", "order", gId[0], gId[1], gId[2], gId[3], "(2)/min(1a,1b)");
  for (int b = 0; b < blocks; b++) {
    char order[64] = "";
    for (int j = 0; j < NG; j++) {
      int k = (b + j) % NG;
      double us = 0;
      switch (k) {
        case G_PAUSE: us = rawRoundTripUs(gWarm, perBlock, 1, &pl); break;
        case G_SPIN: us = rawRoundTripUs(gWarm, perBlock, 0, &pl); break;
        case G_MIN: us = minimalRoundTripUs(&mc, &mh, gWarm, perBlock); break;
        default:
          proxyStartOn(proxy, &pl);
          us = roundTripUs(&fh, NULL, gWarm, perBlock);
          MK(mscclppProxyStop(proxy));
          break;
      }
      g[b * NG + k] = us;
      snprintf(order + strlen(order), sizeof(order) - strlen(order), "%s%s", j ? "," : "", gId[k]);
    }
    double* r = &g[b * NG];
    printf("%-6d %-22s %8.3f %8.3f %8.3f %8.3f %13.3fx\n", b + 1, order, r[G_PAUSE], r[G_SPIN], r[G_MIN], r[G_OURS],
           r[G_OURS] / min2(r[G_PAUSE], r[G_SPIN]));
    fflush(stdout);
  }
  double med[NG];
  for (int k = 0; k < NG; k++) {
    for (int b = 0; b < blocks; b++) tmp[b] = g[b * NG + k];
    med[k] = benchSortMedian(tmp, blocks);
  }
  double goal[3], lo[3], hi[3]; /* (2)/raw, (2m)/raw, (2)/(2m) */
  for (int q = 0; q < 3; q++) {
    for (int b = 0; b < blocks; b++) {
      const double* r = &g[b * NG];
      double rawB = min2(r[G_PAUSE], r[G_SPIN]);
      tmp[b] = q == 0 ? r[G_OURS] / rawB : q == 1 ? r[G_MIN] / rawB : r[G_OURS] / r[G_MIN];
    }
    goal[q] = benchSortMedian(tmp, blocks);
    lo[q] = tmp[0];
    hi[q] = tmp[blocks - 1];
  }
  printf("%-6s %-22s %8.3f %8.3f %8.3f %8.3f %13.3fx\n", "median", "(of each column)", med[G_PAUSE], med[G_SPIN],
         med[G_MIN], med[G_OURS], goal[0]);
  printf("per-block ratios, median [least, most] over %d blocks:\n", blocks);
  printf("  %-44s %6.3fx [%.3f, %.3f]\n", "(2)/raw   our round trip against the raw echo", goal[0], lo[0], hi[0]);
  printf("  %-44s %6.3fx [%.3f, %.3f]\n", "(2m)/raw  the FIFO protocol alone", goal[1], lo[1], hi[1]);
  printf("  %-44s %6.3fx [%.3f, %.3f]\n", "(2)/(2m)  the proxy's service loop", goal[2], lo[2], hi[2]);
  free(tmp);
  free(g);

  struct mscclppProxyTuning gpuTuning = MSCCLPP_PROXY_TUNING_DEFAULT;
  MK(mscclppProxySetTuning(proxy, &gpuTuning));
  proxyStartOn(proxy, &pl);
  double rtGpuDefaults = roundTripUs(&fh, NULL, warm, rounds);
  double tputGpuDefaults = throughput(&fh, triggers);
  MK(mscclppProxyStop(proxy));
  mscclppResult_t err;
  MK(mscclppProxyGetAsyncError(proxy, &err));

  printf("\n%-56s %10s %8s\n", "measured once each", "value", "vs (1)=min(1a,1b)");
  printf("%-56s %8.3f us %7.2fx\n", "(1a) raw CPU->CPU cache-line echo, pause in spin", rawPause, rawPause / raw);
  printf("%-56s %8.3f us %7.2fx\n", "(1b) raw CPU->CPU cache-line echo, plain spin", rawSpin, rawSpin / raw);
  printf("%-56s %8.3f us %7.2fx\n", "(2) push -> proxy -> sync round trip", rt, rt / raw);
  printf("%-56s %8.3f us %7.2fx\n", "(2b) push -> proxy signals semaphore -> wait", rtSem, rtSem / raw);
  printf("%-56s %7.2f M/s  (%.1f ns/trigger = %.3fx of (1))\n", "(3) push throughput, 1 producer thread", tput / 1e6,
         1e9 / tput, 1e6 / tput / raw);
  printf("%-56s %8.3f us %7.2fx\n", "(2t) (2) with the GPU proxy defaults (batch 8, prefetch)", rtGpuDefaults,
         rtGpuDefaults / raw);
  printf("%-56s %7.2f M/s  (%.1f ns/trigger)\n", "(3t) (3) with the GPU proxy defaults (batch 8, prefetch)",
         tputGpuDefaults / 1e6, 1e9 / tputGpuDefaults);
  printf("goal figure: (2) = %.3fx of the raw echo, median of %d per-block ratios (least %.3f, most %.3f)\n", goal[0],
         blocks, lo[0], hi[0]);
  printf("async error: %s\n", mscclppGetErrorString(err));

  MK(mscclppProxyDestroy(proxy));
  MK(mscclppFifoDestroy(fifo));
  MK(mscclppFifoDestroy(mfifo));
  MK(mscclppSemaphoreDestroy(hs.sem));
  MK(mscclppAbortDestroy(abort));
  return err == mscclppSuccess ? 0 : 1;
}
