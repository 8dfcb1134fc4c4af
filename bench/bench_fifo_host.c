/* The FIFO and proxy on the host backend (a CPU thread plays the kernel), next
 * to the raw limit, in one run:
 *  1. raw: thread A stores a counter into a cache line, thread B echoes it into
 *     another line, A spins on the echo; measured with and without a pause
 *     instruction in the spin loops, and the faster one is the reference;
 *  2. push -> proxy -> sync, one trigger at a time (handler does nothing);
 *     push -> proxy handler signals a host-to-device semaphore -> producer
 *     waits on it through its device handle;
 *  3. push throughput from 1 producer thread (handler does nothing);
 *  2t, 3t: (2) and (3) again with the GPU's proxy defaults (tail published
 *     every 8 triggers and when the FIFO is empty, prefetch 2 lines), for
 *     comparison with the host backend's (after every trigger, no prefetch).
 * Usage: bench_fifo_host [rounds=200000] [triggers=5000000] [fifoSize=MSCCLPP_FIFO_SIZE]
 * Needs two idle cores: both sides busy-poll. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/util.h"
#include "mscclpp/fifo.h"
#include "mscclpp/fifo_device.h"
#include "mscclpp/proxy.h"
#include "mscclpp/semaphore.h"
#include "mscclpp/semaphore_device.h"
#include "proxy/proxy.h"

#define MK(expr)                                                                                          \
  do {                                                                                                    \
    mscclppResult_t r_ = (expr);                                                                          \
    if (r_ != mscclppSuccess) {                                                                           \
      fprintf(stderr, "%s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #expr, mscclppGetErrorString(r_),     \
              mscclppGetLastError());                                                                     \
      exit(1);                                                                                            \
    }                                                                                                     \
  } while (0)

/* ---- 1. raw echo of a cache line -------------------------------------------------- */

struct lines {
  uint64_t ping __attribute__((aligned(64)));
  uint64_t pong __attribute__((aligned(64)));
  int rounds;
  int pause;
};

static void* echo(void* arg) {
  struct lines* l = arg;
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

static double rawRoundTripUs(int rounds, int pause) {
  static struct lines l;
  l.ping = l.pong = 0;
  l.rounds = rounds;
  l.pause = pause;
  pthread_t th;
  pthread_create(&th, NULL, echo, &l);
  mscclppDeadline d = mscclppDeadlineIn(30);
  uint64_t t0 = mscclppTimeNs();
  for (int i = 1; i <= rounds; i++) {
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

static double roundTripUs(const mscclppFifoDeviceHandle* fifo, const mscclppSemaphoreDeviceHandle* sem, int rounds) {
  mscclppTriggerFields f = {0};
  f.op = sem != NULL ? MSCCLPP_TRIGGER_FLAG : MSCCLPP_TRIGGER_OP_USER_FIRST;
  uint64_t t0 = mscclppTimeNs();
  for (int i = 0; i < rounds; i++) {
    uint64_t pos;
    MK(mscclppFifoDevicePush(fifo, &f, &pos));
    MK(sem != NULL ? mscclppSemaphoreDeviceWait(sem) : mscclppFifoDeviceSync(fifo, pos));
  }
  return (mscclppTimeNs() - t0) / 1e3 / rounds;
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

int main(int argc, char** argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 200000;
  uint32_t triggers = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 10) : 5000000u;
  int fifoSize = argc > 3 ? atoi(argv[3]) : 0;

  rawRoundTripUs(rounds / 10 + 1, 1); /* warm-up */
  double rawPause = rawRoundTripUs(rounds, 1);
  double rawSpin = rawRoundTripUs(rounds, 0);
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
  mscclppProxy_t proxy;
  MK(mscclppProxyCreate(&pc, &proxy));
  MK(mscclppProxyAddFifo(proxy, fifo, handler, NULL, &hs));
  MK(mscclppProxyStart(proxy));
  mscclppFifoDeviceHandle fh;
  mscclppSemaphoreDeviceHandle sh;
  MK(mscclppFifoGetDeviceHandle(fifo, &fh));
  MK(mscclppSemaphoreGetDeviceHandle(hs.sem, &sh));

  roundTripUs(&fh, NULL, rounds / 10 + 1);
  double rt = roundTripUs(&fh, NULL, rounds);
  roundTripUs(&fh, &sh, rounds / 10 + 1);
  double rtSem = roundTripUs(&fh, &sh, rounds);
  throughput(&fh, triggers / 10 + 1);
  double tput = throughput(&fh, triggers);
  MK(mscclppProxyStop(proxy));
  struct mscclppProxyTuning gpuTuning = MSCCLPP_PROXY_TUNING_DEFAULT;
  MK(mscclppProxySetTuning(proxy, &gpuTuning));
  MK(mscclppProxyStart(proxy));
  roundTripUs(&fh, NULL, rounds / 10 + 1);
  double rtGpuDefaults = roundTripUs(&fh, NULL, rounds);
  double tputGpuDefaults = throughput(&fh, triggers);
  MK(mscclppProxyStop(proxy));
  mscclppResult_t err;
  MK(mscclppProxyGetAsyncError(proxy, &err));

  printf("bench_fifo_host: FIFO size %d, %d round trips, %u triggers for throughput\n", size, rounds, triggers);
  printf("%-56s %10s %8s\n", "measurement", "value", "vs (1)=min(1a,1b)");
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
  printf("async error: %s\n", mscclppGetErrorString(err));

  MK(mscclppProxyDestroy(proxy));
  MK(mscclppFifoDestroy(fifo));
  MK(mscclppSemaphoreDestroy(hs.sem));
  MK(mscclppAbortDestroy(abort));
  return err == mscclppSuccess ? 0 : 1;
}
