/* SPDX-License-Identifier: MIT */
/* Semaphores on the host backend: host-to-host through the host API, and
 * host-to-device / device-to-device through their device handles with CPU
 * threads as the kernels. Signal/wait/poll counts, ping-pong ordering,
 * bounded waits (timeout) and abort. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/util.h"
#include "harness.h"
#include "mscclpp/semaphore.h"

#define ROUNDS 20000

static mscclppSemaphore_t makeSem(mscclppSemaphoreKind kind, double timeoutSec, mscclppAbort_t abort) {
  mscclppSemaphoreConfig cfg = MSCCLPP_SEMAPHORE_CONFIG_INITIALIZER;
  cfg.kind = kind;
  cfg.timeoutSec = timeoutSec;
  cfg.abort = abort;
  mscclppSemaphore_t sem = NULL;
  CHECK_RES(mscclppSemaphoreCreate(&cfg, &sem), mscclppSuccess);
  return sem;
}

/* ---- host-to-host ping-pong: data written before a signal is seen after the wait */

struct pingPong {
  mscclppSemaphore_t ping, pong;
  uint64_t data; /* written by one side before it signals */
  int errors;
  mscclppResult_t res;
};

static void* h2hResponder(void* arg) {
  struct pingPong* pp = arg;
  for (uint64_t i = 1; i <= ROUNDS; i++) {
    pp->res = mscclppSemaphoreWait(pp->ping);
    if (pp->res != mscclppSuccess) return NULL;
    if (pp->data != 2 * i - 1) pp->errors++;
    pp->data = 2 * i;
    pp->res = mscclppSemaphoreSignal(pp->pong);
    if (pp->res != mscclppSuccess) return NULL;
  }
  return NULL;
}

static void testHostToHostPingPong(void) {
  struct pingPong pp = {0};
  pp.ping = makeSem(mscclppSemaphoreHostToHost, 30.0, NULL);
  pp.pong = makeSem(mscclppSemaphoreHostToHost, 30.0, NULL);
  pthread_t th;
  pthread_create(&th, NULL, h2hResponder, &pp);
  int errors = 0;
  uint64_t t0 = mscclppTimeNs();
  for (uint64_t i = 1; i <= ROUNDS; i++) {
    pp.data = 2 * i - 1;
    CHECK_RES(mscclppSemaphoreSignal(pp.ping), mscclppSuccess);
    CHECK_RES(mscclppSemaphoreWait(pp.pong), mscclppSuccess);
    if (pp.data != 2 * i) errors++;
  }
  pthread_join(th, NULL);
  printf("  host-to-host ping-pong: %.2f us per round trip\n", (mscclppTimeNs() - t0) / 1e3 / ROUNDS);
  CHECK_RES(pp.res, mscclppSuccess);
  CHECK(errors == 0 && pp.errors == 0);
  CHECK_RES(mscclppSemaphoreDestroy(pp.ping), mscclppSuccess);
  CHECK_RES(mscclppSemaphoreDestroy(pp.pong), mscclppSuccess);
}

static void testHostToHostPollAndCounts(void) {
  mscclppSemaphore_t sem = makeSem(mscclppSemaphoreHostToHost, 30.0, NULL);
  int got = 7;
  CHECK_RES(mscclppSemaphorePoll(sem, &got), mscclppSuccess);
  CHECK(got == 0);
  for (int i = 0; i < 3; i++) CHECK_RES(mscclppSemaphoreSignal(sem), mscclppSuccess);
  CHECK_RES(mscclppSemaphorePoll(sem, &got), mscclppSuccess);
  CHECK(got == 1);
  CHECK_RES(mscclppSemaphoreWait(sem), mscclppSuccess);
  CHECK_RES(mscclppSemaphorePoll(sem, &got), mscclppSuccess);
  CHECK(got == 1);
  CHECK_RES(mscclppSemaphorePoll(sem, &got), mscclppSuccess); /* three signals, three consumed */
  CHECK(got == 0);
  mscclppSemaphoreDeviceHandle h;
  CHECK_RES(mscclppSemaphoreGetDeviceHandle(sem, &h), mscclppInvalidUsage);
  CHECK_RES(mscclppSemaphoreDestroy(sem), mscclppSuccess);
}

static void testWaitTimeout(void) {
  mscclppAbort_t abort;
  CHECK_RES(mscclppAbortCreate(-1, &abort), mscclppSuccess);
  mscclppSemaphore_t sem = makeSem(mscclppSemaphoreHostToHost, 0.05, abort);
  uint64_t t0 = mscclppTimeNs();
  CHECK_RES(mscclppSemaphoreWait(sem), mscclppTimeout);
  double sec = (mscclppTimeNs() - t0) / 1e9;
  CHECK(sec >= 0.045 && sec < 2.0);
  mscclppResult_t err;
  CHECK_RES(mscclppAbortGetError(abort, &err), mscclppSuccess);
  CHECK(err == mscclppTimeout && strstr(mscclppGetLastError(), "semaphore") != NULL);
  /* once aborted, waits return at once even with a signal missing */
  CHECK_RES(mscclppSemaphoreWait(sem), mscclppAborted);
  CHECK_RES(mscclppAbortDestroy(abort), mscclppInvalidUsage);
  CHECK_RES(mscclppSemaphoreDestroy(sem), mscclppSuccess);
  CHECK_RES(mscclppAbortDestroy(abort), mscclppSuccess);
}

struct waiter {
  mscclppSemaphore_t sem;
  mscclppSemaphoreDeviceHandle h; /* device-side waiter when sem == NULL */
  mscclppResult_t res;
  uint64_t doneNs;
};

static void* waitOnce(void* arg) {
  struct waiter* w = arg;
  w->res = w->sem != NULL ? mscclppSemaphoreWait(w->sem) : mscclppSemaphoreDeviceWait(&w->h);
  w->doneNs = mscclppTimeNs();
  return NULL;
}

/* abort reaches a host waiter and a "kernel" waiter promptly */
static void testAbortWakesWaiters(void) {
  mscclppAbort_t abort;
  CHECK_RES(mscclppAbortCreate(-1, &abort), mscclppSuccess);
  mscclppSemaphore_t h2h = makeSem(mscclppSemaphoreHostToHost, 30.0, abort);
  mscclppSemaphore_t d2d = makeSem(mscclppSemaphoreDeviceToDevice, 30.0, abort);
  struct waiter w[2];
  memset(w, 0, sizeof(w));
  w[0].sem = h2h;
  CHECK_RES(mscclppSemaphoreGetDeviceHandle(d2d, &w[1].h), mscclppSuccess);
  pthread_t th[2];
  for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, waitOnce, &w[i]);
  struct timespec ts = {0, 20 * 1000 * 1000};
  nanosleep(&ts, NULL);
  uint64_t t0 = mscclppTimeNs();
  CHECK_RES(mscclppAbortRaise(abort, mscclppAborted, "stop"), mscclppSuccess);
  for (int i = 0; i < 2; i++) {
    pthread_join(th[i], NULL);
    CHECK_RES(w[i].res, mscclppAborted);
    CHECK((w[i].doneNs - t0) / 1e9 < 2.0); /* promptly, even on a loaded 2-core machine */
  }
  CHECK_RES(mscclppSemaphoreDestroy(h2h), mscclppSuccess);
  CHECK_RES(mscclppSemaphoreDestroy(d2d), mscclppSuccess);
  CHECK_RES(mscclppAbortDestroy(abort), mscclppSuccess);
}

/* ---- host-to-device and device-to-device with "kernel" threads ------------------ */

struct devSide {
  mscclppSemaphoreDeviceHandle waitOn; /* H2D: host signals it */
  mscclppSemaphoreDeviceHandle reply;  /* D2D: this side signals, main "kernel" waits */
  uint64_t* data;
  int errors;
  mscclppResult_t res;
};

static void* deviceResponder(void* arg) {
  struct devSide* d = arg;
  for (uint64_t i = 1; i <= ROUNDS; i++) {
    d->res = mscclppSemaphoreDeviceWait(&d->waitOn);
    if (d->res != mscclppSuccess) return NULL;
    if (__atomic_load_n(d->data, __ATOMIC_RELAXED) != i) d->errors++;
    mscclppSemaphoreDeviceSignal(&d->reply);
  }
  return NULL;
}

static void testHostToDeviceAndDeviceToDevice(void) {
  mscclppSemaphore_t h2d = makeSem(mscclppSemaphoreHostToDevice, 30.0, NULL);
  mscclppSemaphore_t d2d = makeSem(mscclppSemaphoreDeviceToDevice, 30.0, NULL);
  CHECK_RES(mscclppSemaphoreWait(h2d), mscclppInvalidUsage); /* a kernel waits on it */
  CHECK_RES(mscclppSemaphoreSignal(d2d), mscclppInvalidUsage); /* a kernel signals it */
  uint64_t data = 0;
  struct devSide d = {0};
  CHECK_RES(mscclppSemaphoreGetDeviceHandle(h2d, &d.waitOn), mscclppSuccess);
  CHECK_RES(mscclppSemaphoreGetDeviceHandle(d2d, &d.reply), mscclppSuccess);
  CHECK(d.waitOn.outbound == NULL); /* the kernel side of host-to-device cannot signal */
  d.data = &data;
  mscclppSemaphoreDeviceHandle mainWait = d.reply;
  pthread_t th;
  pthread_create(&th, NULL, deviceResponder, &d);
  uint64_t t0 = mscclppTimeNs();
  for (uint64_t i = 1; i <= ROUNDS; i++) {
    __atomic_store_n(&data, i, __ATOMIC_RELAXED);
    CHECK_RES(mscclppSemaphoreSignal(h2d), mscclppSuccess); /* release: data first */
    CHECK_RES(mscclppSemaphoreDeviceWait(&mainWait), mscclppSuccess);
  }
  pthread_join(th, NULL);
  printf("  host-to-device + device-to-device ping-pong: %.2f us per round trip\n",
         (mscclppTimeNs() - t0) / 1e3 / ROUNDS);
  CHECK_RES(d.res, mscclppSuccess);
  CHECK(d.errors == 0);
  CHECK(mscclppSemaphoreDevicePoll(&mainWait) == 0);
  CHECK_RES(mscclppSemaphoreDestroy(h2d), mscclppSuccess);
  CHECK_RES(mscclppSemaphoreDestroy(d2d), mscclppSuccess);
}

static void testCreateRejects(void) {
  mscclppSemaphoreConfig cfg = MSCCLPP_SEMAPHORE_CONFIG_INITIALIZER;
  mscclppSemaphore_t sem = NULL;
  cfg.kind = (mscclppSemaphoreKind)7;
  CHECK_RES(mscclppSemaphoreCreate(&cfg, &sem), mscclppInvalidArgument);
  cfg.kind = mscclppSemaphoreHostToHost;
  cfg.structSize = 3;
  CHECK_RES(mscclppSemaphoreCreate(&cfg, &sem), mscclppInvalidArgument);
  CHECK_RES(mscclppSemaphoreCreate(NULL, &sem), mscclppInvalidArgument);
  CHECK(sem == NULL);
  CHECK_RES(mscclppSemaphoreSignal(NULL), mscclppInvalidArgument);
  CHECK_RES(mscclppSemaphoreDestroy(NULL), mscclppInvalidArgument);
}

int main(void) {
  RUN(testHostToHostPingPong);
  RUN(testHostToHostPollAndCounts);
  RUN(testWaitTimeout);
  RUN(testAbortWakesWaiters);
  RUN(testHostToDeviceAndDeviceToDevice);
  RUN(testCreateRejects);
  return harnessFinish();
}
