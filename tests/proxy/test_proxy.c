/* SPDX-License-Identifier: MIT */
/* The proxy service on the host backend, with CPU threads as producers:
 * many producers through a small FIFO (every trigger once, in per-producer
 * order; release and relaxed pushes; every claim policy), the proxy's
 * tuning variants (tail published every N triggers, prefetch, pause on a
 * stale slot) and its counters, back-pressure,
 * stop/start while pushing, handler errors, stop from
 * a handler, asynchronous completion (flush), device-reported errors,
 * idempotent start/stop, destroy while a producer still pushes, and
 * round trips with the producer and the proxy on ONE core (the host
 * backend's idle proxy must keep yielding it; the yield gate).
 * MSCCLPP_TEST_TRIGGERS overrides the 10^6 triggers of the many-producer
 * test (for slow sanitizer builds). */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/util.h"
#include "harness.h"
#include "mscclpp/fifo.h"
#include "mscclpp/fifo_device.h"
#include "mscclpp/proxy.h"
#include "proxy/proxy.h"

#define MAX_PRODUCERS 64

static void sleepMs(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* ---- a service: abort + FIFO + proxy --------------------------------------- */

struct service {
  mscclppAbort_t abort;
  mscclppFifo_t fifo;
  mscclppProxy_t proxy;
  mscclppFifoDeviceHandle h;
};

static void serviceInit(struct service* s, int fifoSize, double timeoutSec, mscclppProxyHandler handler,
                        mscclppProxyProgress progress, void* arg) {
  CHECK_RES(mscclppAbortCreate(-1, &s->abort), mscclppSuccess);
  mscclppFifoConfig fc = MSCCLPP_FIFO_CONFIG_INITIALIZER;
  fc.size = fifoSize;
  fc.timeoutSec = timeoutSec;
  fc.abort = s->abort;
  CHECK_RES(mscclppFifoCreate(&fc, &s->fifo), mscclppSuccess);
  mscclppProxyConfig pc = MSCCLPP_PROXY_CONFIG_INITIALIZER;
  pc.abort = s->abort;
  pc.timeoutSec = timeoutSec;
  pc.name = "test-proxy";
  CHECK_RES(mscclppProxyCreate(&pc, &s->proxy), mscclppSuccess);
  CHECK_RES(mscclppProxyAddFifo(s->proxy, s->fifo, handler, progress, arg), mscclppSuccess);
  CHECK_RES(mscclppFifoGetDeviceHandle(s->fifo, &s->h), mscclppSuccess);
}

static void serviceFini(struct service* s) {
  CHECK_RES(mscclppProxyDestroy(s->proxy), mscclppSuccess);
  CHECK_RES(mscclppFifoDestroy(s->fifo), mscclppSuccess);
  CHECK_RES(mscclppAbortDestroy(s->abort), mscclppSuccess);
}

/* ---- the checking handler: per-producer order, exactly once ------------------ */

struct checker {
  uint32_t next[MAX_PRODUCERS]; /* proxy thread only */
  uint64_t seen;                /* __atomic */
  uint64_t errors;              /* __atomic */
  uint64_t expectedPosition;
  int gate;       /* __atomic: the handler stalls while 0 */
  int stallFirst; /* stall on the first trigger only */
};

static mscclppProxyHandlerResult checkHandler(void* arg, const mscclppTrigger* t, uint64_t position) {
  struct checker* c = arg;
  if (c->stallFirst) {
    while (!__atomic_load_n(&c->gate, __ATOMIC_ACQUIRE)) sleepMs(1);
    c->stallFirst = 0;
  }
  mscclppTriggerFields f;
  mscclppTriggerUnpack(t, &f);
  int bad = f.op != MSCCLPP_TRIGGER_OP_USER_FIRST || f.dstOffset >= MAX_PRODUCERS ||
            f.srcOffset != c->next[f.dstOffset] || f.size != (f.srcOffset & 0x7fffffffu) ||
            position != c->expectedPosition;
  if (bad) {
    if (__atomic_fetch_add(&c->errors, 1, __ATOMIC_RELAXED) < 5)
      fprintf(stderr, "bad trigger at %llu: producer %llu seq %llu (expected %u), position expected %llu\n",
              (unsigned long long)position, (unsigned long long)f.dstOffset, (unsigned long long)f.srcOffset,
              f.dstOffset < MAX_PRODUCERS ? c->next[f.dstOffset] : 0, (unsigned long long)c->expectedPosition);
  } else {
    c->next[f.dstOffset]++;
  }
  c->expectedPosition = position + 1;
  __atomic_fetch_add(&c->seen, 1, __ATOMIC_RELEASE);
  return mscclppProxyHandlerContinue;
}

struct producer {
  mscclppFifoDeviceHandle h;
  uint32_t id;
  uint32_t count;
  int syncEvery; /* 0: never */
  mscclppResult_t res;
  uint32_t pushed; /* __atomic */
  int* quit;       /* optional: push until *quit */
};

static void* produce(void* arg) {
  struct producer* p = arg;
  p->res = mscclppSuccess;
  for (uint32_t i = 0; i < p->count || (p->quit != NULL && !__atomic_load_n(p->quit, __ATOMIC_ACQUIRE)); i++) {
    mscclppTriggerFields f = {0};
    f.op = MSCCLPP_TRIGGER_OP_USER_FIRST;
    f.dstOffset = p->id;
    f.srcOffset = i;
    f.size = i & 0x7fffffffu;
    uint64_t pos;
    if (p->id & 1) /* odd producers push with relaxed order */
      p->res = mscclppFifoDevicePushTrigger(&p->h, mscclppTriggerPack(&f), mscclppFifoOrderRelaxed, &pos);
    else
      p->res = mscclppFifoDevicePush(&p->h, &f, &pos);
    if (p->res != mscclppSuccess) break;
    __atomic_store_n(&p->pushed, i + 1, __ATOMIC_RELEASE);
    if (p->syncEvery && (i + 1) % (uint32_t)p->syncEvery == 0) {
      p->res = mscclppFifoDeviceSync(&p->h, pos);
      if (p->res != mscclppSuccess) break;
    }
  }
  return NULL;
}

static uint32_t totalTriggers(void) {
  const char* s = getenv("MSCCLPP_TEST_TRIGGERS");
  return s != NULL ? (uint32_t)strtoul(s, NULL, 10) : 1000000u;
}

static void manyProducersWith(int nProducers, int fifoSize, uint32_t policy, uint32_t total) {
  static struct checker c;
  memset(&c, 0, sizeof(c));
  c.gate = 1;
  struct service s;
  serviceInit(&s, fifoSize, 30.0, checkHandler, NULL, &c);
  s.h.claimPolicy = policy;
  CHECK_RES(mscclppProxyStart(s.proxy), mscclppSuccess);
  struct producer prod[MAX_PRODUCERS];
  pthread_t th[MAX_PRODUCERS];
  uint64_t t0 = mscclppTimeNs();
  for (int i = 0; i < nProducers; i++) {
    memset(&prod[i], 0, sizeof(prod[i]));
    prod[i].h = s.h;
    prod[i].id = (uint32_t)i;
    prod[i].count = total / (uint32_t)nProducers + (i < (int)(total % (uint32_t)nProducers) ? 1u : 0u);
    prod[i].syncEvery = i == 0 ? 1000 : 0; /* one producer also syncs now and then */
    pthread_create(&th[i], NULL, produce, &prod[i]);
  }
  for (int i = 0; i < nProducers; i++) {
    pthread_join(th[i], NULL);
    CHECK_RES(prod[i].res, mscclppSuccess);
  }
  CHECK_RES(mscclppProxyStop(s.proxy), mscclppSuccess); /* drains */
  double sec = (mscclppTimeNs() - t0) / 1e9;
  CHECK(__atomic_load_n(&c.seen, __ATOMIC_ACQUIRE) == total);
  CHECK(c.errors == 0);
  for (int i = 0; i < nProducers; i++) CHECK(c.next[i] == prod[i].count);
  printf("  %d producer(s), claim policy %u: %u triggers through a %d-slot FIFO in %.2f s (%.2f M/s)\n", nProducers,
         policy, total, fifoSize, sec, total / sec / 1e6);
  mscclppResult_t err;
  CHECK_RES(mscclppProxyGetAsyncError(s.proxy, &err), mscclppSuccess);
  CHECK(err == mscclppSuccess);
  serviceFini(&s);
}

static void manyProducers(int nProducers) {
  manyProducersWith(nProducers, 64, MSCCLPP_FIFO_CLAIM_DEFAULT, totalTriggers());
}

static void testOneProducer(void) { manyProducers(1); }
static void testFourProducers(void) { manyProducers(4); }
static void testThirtyTwoProducers(void) { manyProducers(32); }

/* Every claim policy, with more producers than slots and with a roomier
 * FIFO: every trigger once, in per-producer order, positions consecutive. */
static void testClaimPolicies(void) {
  const uint32_t policies[] = {MSCCLPP_FIFO_CLAIM_CHECK_FIRST, MSCCLPP_FIFO_CLAIM_FIRST_SHARED,
                               MSCCLPP_FIFO_CLAIM_FIRST_POLL};
  uint32_t total = totalTriggers() / 10;
  if (total < 1000) total = 1000;
  for (size_t k = 0; k < sizeof(policies) / sizeof(policies[0]); k++) {
    manyProducersWith(16, 4, policies[k], total / 5); /* host threads outnumber cores: slow */
    manyProducersWith(16, 64, policies[k], total);
  }
}

/* Every publication policy and prefetch distance passes the same checks; a
 * lone trigger is published at once even when the batch is large; the
 * counters count every trigger; tuning is refused while running. */
static void testTuningVariants(void) {
  const struct mscclppProxyTuning variants[] = {{1, 0, 1, 0}, {3, 1, 1, 0}, {64, 2, 1, 500},
                                                  {1000, 8, 0, 2000}};
  for (size_t v = 0; v < sizeof(variants) / sizeof(variants[0]); v++) {
    static struct checker c;
    memset(&c, 0, sizeof(c));
    c.gate = 1;
    struct service s;
    serviceInit(&s, 16, 30.0, checkHandler, NULL, &c);
    CHECK_RES(mscclppProxySetTuning(s.proxy, &variants[v]), mscclppSuccess);
    CHECK_RES(mscclppProxyStart(s.proxy), mscclppSuccess);
    CHECK_RES(mscclppProxySetTuning(s.proxy, &variants[v]), mscclppInvalidUsage);
    /* a lone trigger: Sync returns although the batch is not full */
    struct producer one = {0};
    one.h = s.h;
    one.id = 0;
    one.count = 1;
    one.syncEvery = 1;
    uint64_t t0 = mscclppTimeNs();
    produce(&one);
    CHECK_RES(one.res, mscclppSuccess);
    CHECK((mscclppTimeNs() - t0) / 1e9 < 5.0);
    struct producer prod[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
      memset(&prod[i], 0, sizeof(prod[i]));
      prod[i].h = s.h;
      prod[i].id = (uint32_t)i + 1;
      prod[i].count = 20000;
      prod[i].syncEvery = i == 0 ? 7 : 0;
      pthread_create(&th[i], NULL, produce, &prod[i]);
    }
    for (int i = 0; i < 4; i++) {
      pthread_join(th[i], NULL);
      CHECK_RES(prod[i].res, mscclppSuccess);
    }
    CHECK_RES(mscclppProxyStop(s.proxy), mscclppSuccess);
    CHECK(c.seen == 80001 && c.errors == 0 && c.next[0] == 1);
    for (int i = 1; i <= 4; i++) CHECK(c.next[i] == 20000);
    struct mscclppProxyStats st;
    CHECK_RES(mscclppProxyGetStats(s.proxy, &st), mscclppSuccess);
    CHECK(st.triggers == 80001);
    CHECK(variants[v].stats ? st.busyNs > 0 : st.busyNs == 0);
    serviceFini(&s);
  }
  struct mscclppProxyTuning zero = {0, 0, 0, 0};
  struct mscclppProxyTuning longPause = {1, 0, 0, 1000001};
  struct service s;
  serviceInit(&s, 16, 30.0, checkHandler, NULL, NULL);
  CHECK_RES(mscclppProxySetTuning(s.proxy, &zero), mscclppInvalidArgument);
  CHECK_RES(mscclppProxySetTuning(s.proxy, &longPause), mscclppInvalidArgument);
  CHECK_RES(mscclppProxySetTuning(s.proxy, NULL), mscclppInvalidArgument);
  CHECK_RES(mscclppProxyGetStats(NULL, NULL), mscclppInvalidArgument);
  serviceFini(&s);
}

/* A stalled handler: producers fill the FIFO and then wait; nothing is
 * overwritten. */
static void testBackpressure(void) {
  static struct checker c;
  memset(&c, 0, sizeof(c));
  c.stallFirst = 1;
  struct service s;
  serviceInit(&s, 16, 30.0, checkHandler, NULL, &c);
  CHECK_RES(mscclppProxyStart(s.proxy), mscclppSuccess);
  struct producer p = {0};
  p.h = s.h;
  p.count = 1000;
  pthread_t th;
  pthread_create(&th, NULL, produce, &p);
  /* the handler holds position 0 (not yet taken): positions 0..15 fit */
  for (int i = 0; i < 5000 && __atomic_load_n(&p.pushed, __ATOMIC_ACQUIRE) < 16; i++) sleepMs(1);
  sleepMs(20);
  CHECK(__atomic_load_n(&p.pushed, __ATOMIC_ACQUIRE) == 16);
  CHECK(__atomic_load_n(&c.seen, __ATOMIC_ACQUIRE) == 0);
  __atomic_store_n(&c.gate, 1, __ATOMIC_RELEASE);
  pthread_join(th, NULL);
  CHECK_RES(p.res, mscclppSuccess);
  CHECK_RES(mscclppProxyStop(s.proxy), mscclppSuccess);
  CHECK(c.seen == 1000 && c.errors == 0 && c.next[0] == 1000);
  serviceFini(&s);
}

/* Stop and start again and again while 4 producers push: nothing lost,
 * nothing twice, order kept; while stopped nothing is consumed. */
static void testStopWhilePushing(void) {
  static struct checker c;
  memset(&c, 0, sizeof(c));
  struct service s;
  serviceInit(&s, 32, 30.0, checkHandler, NULL, &c);
  struct producer prod[4];
  pthread_t th[4];
  for (int i = 0; i < 4; i++) {
    memset(&prod[i], 0, sizeof(prod[i]));
    prod[i].h = s.h;
    prod[i].id = (uint32_t)i;
    prod[i].count = 50000;
    pthread_create(&th[i], NULL, produce, &prod[i]);
  }
  int stopsWhileBusy = 0;
  for (int round = 0; round < 40; round++) {
    CHECK_RES(mscclppProxyStart(s.proxy), mscclppSuccess);
    sleepMs(2);
    CHECK_RES(mscclppProxyStop(s.proxy), mscclppSuccess);
    mscclppProxyRunState st;
    CHECK_RES(mscclppProxyGetRunState(s.proxy, &st), mscclppSuccess);
    CHECK(st == mscclppProxyStateIdle);
    uint64_t seen = __atomic_load_n(&c.seen, __ATOMIC_ACQUIRE);
    if (seen < 200000) stopsWhileBusy++;
    sleepMs(1);
    CHECK(__atomic_load_n(&c.seen, __ATOMIC_ACQUIRE) == seen); /* stopped means stopped */
  }
  CHECK(stopsWhileBusy > 0);
  CHECK_RES(mscclppProxyStart(s.proxy), mscclppSuccess);
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    CHECK_RES(prod[i].res, mscclppSuccess);
  }
  CHECK_RES(mscclppProxyStop(s.proxy), mscclppSuccess);
  CHECK(c.seen == 200000 && c.errors == 0);
  for (int i = 0; i < 4; i++) CHECK(c.next[i] == 50000);
  serviceFini(&s);
}

static void testStartStopIdempotent(void) {
  static struct checker c;
  memset(&c, 0, sizeof(c));
  struct service s;
  serviceInit(&s, 8, 30.0, checkHandler, NULL, &c);
  mscclppProxyRunState st;
  CHECK_RES(mscclppProxyGetRunState(s.proxy, &st), mscclppSuccess);
  CHECK(st == mscclppProxyStateIdle);
  CHECK_RES(mscclppProxyStop(s.proxy), mscclppSuccess); /* stop when idle */
  CHECK_RES(mscclppProxyStart(s.proxy), mscclppSuccess);
  CHECK_RES(mscclppProxyStart(s.proxy), mscclppSuccess);
  CHECK_RES(mscclppProxyGetRunState(s.proxy, &st), mscclppSuccess);
  CHECK(st == mscclppProxyStateRunning);
  /* a FIFO cannot be added while running, nor served twice */
  CHECK_RES(mscclppProxyAddFifo(s.proxy, s.fifo, checkHandler, NULL, &c), mscclppInvalidUsage);
  struct producer p = {0};
  p.h = s.h;
  p.count = 100;
  p.syncEvery = 1;
  produce(&p);
  CHECK_RES(p.res, mscclppSuccess);
  CHECK_RES(mscclppProxyStop(s.proxy), mscclppSuccess);
  CHECK_RES(mscclppProxyStop(s.proxy), mscclppSuccess);
  CHECK(c.seen == 100);
  CHECK_RES(mscclppProxyAddFifo(s.proxy, s.fifo, checkHandler, NULL, &c), mscclppInvalidUsage); /* served */
  CHECK_RES(mscclppFifoDestroy(s.fifo), mscclppInvalidUsage);                                   /* served */
  CHECK_RES(mscclppProxyStart(NULL), mscclppInvalidArgument);
  serviceFini(&s);
}

/* A handler failure is stored (code + text), raises abort, and producers
 * waiting on the FIFO return. */
struct failing {
  uint64_t failAt;
  int ownCode;
  mscclppAbort_t abort;
};

static mscclppProxyHandlerResult failingHandler(void* arg, const mscclppTrigger* t, uint64_t position) {
  (void)t;
  struct failing* f = arg;
  if (position == f->failAt) {
    if (f->ownCode) mscclppAbortRaise(f->abort, mscclppRemoteError, "copy to peer 3 failed");
    return mscclppProxyHandlerError;
  }
  return mscclppProxyHandlerContinue;
}

static void testHandlerError(void) {
  for (int ownCode = 0; ownCode < 2; ownCode++) {
    struct failing f = {100, ownCode, NULL};
    struct service s;
    serviceInit(&s, 16, 30.0, failingHandler, NULL, &f);
    f.abort = s.abort;
    CHECK_RES(mscclppProxyStart(s.proxy), mscclppSuccess);
    struct producer prod[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
      memset(&prod[i], 0, sizeof(prod[i]));
      prod[i].h = s.h;
      prod[i].id = (uint32_t)i;
      prod[i].count = 100000;
      prod[i].syncEvery = i == 0 ? 7 : 0;
      pthread_create(&th[i], NULL, produce, &prod[i]);
    }
    uint64_t t0 = mscclppTimeNs();
    for (int i = 0; i < 3; i++) {
      pthread_join(th[i], NULL);
      CHECK_RES(prod[i].res, mscclppAborted);
    }
    CHECK((mscclppTimeNs() - t0) / 1e9 < 5.0);
    mscclppResult_t err;
    CHECK_RES(mscclppProxyGetAsyncError(s.proxy, &err), mscclppSuccess);
    if (ownCode) {
      CHECK(err == mscclppRemoteError && strcmp(mscclppGetLastError(), "copy to peer 3 failed") == 0);
    } else {
      CHECK(err == mscclppInternalError && strstr(mscclppGetLastError(), "position 100") != NULL);
    }
    CHECK_RES(mscclppProxyStop(s.proxy), mscclppSuccess);
    CHECK_RES(mscclppProxyStart(s.proxy), mscclppAborted); /* no restart after an error */
    serviceFini(&s); /* aborted: pending triggers do not block destroy */
  }
}

/* A handler may stop its thread; Start resumes where it left off. */
static mscclppProxyHandlerResult stopAtTen(void* arg, const mscclppTrigger* t, uint64_t position) {
  (void)t;
  __atomic_fetch_add((uint64_t*)arg, 1, __ATOMIC_RELEASE);
  return position == 9 ? mscclppProxyHandlerStop : mscclppProxyHandlerContinue;
}

static void testHandlerStop(void) {
  uint64_t seen = 0;
  struct service s;
  serviceInit(&s, 32, 30.0, stopAtTen, NULL, &seen);
  struct producer p = {0};
  p.h = s.h;
  p.count = 20;
  produce(&p);
  CHECK_RES(p.res, mscclppSuccess);
  CHECK_RES(mscclppProxyStart(s.proxy), mscclppSuccess);
  mscclppProxyRunState st = mscclppProxyStateRunning;
  for (int i = 0; i < 10000 && st != mscclppProxyStateIdle; i++) {
    sleepMs(1);
    CHECK_RES(mscclppProxyGetRunState(s.proxy, &st), mscclppSuccess);
  }
  CHECK(st == mscclppProxyStateIdle);
  CHECK(__atomic_load_n(&seen, __ATOMIC_ACQUIRE) == 10);
  CHECK_RES(mscclppProxyStart(s.proxy), mscclppSuccess);
  CHECK_RES(mscclppFifoDeviceSync(&s.h, 19), mscclppSuccess);
  CHECK(__atomic_load_n(&seen, __ATOMIC_ACQUIRE) == 20);
  serviceFini(&s);
}

/* An asynchronous handler: flush returns only once progress says done. */
struct asyncState {
  int done; /* __atomic */
  int calls;
};

static mscclppProxyHandlerResult asyncHandler(void* arg, const mscclppTrigger* t, uint64_t position) {
  (void)arg;
  (void)t;
  (void)position;
  return mscclppProxyHandlerContinue;
}

static mscclppResult_t asyncProgress(void* arg, int* allDone) {
  struct asyncState* a = arg;
  a->calls++;
  *allDone = __atomic_load_n(&a->done, __ATOMIC_ACQUIRE);
  return mscclppSuccess;
}

struct flusher {
  mscclppFifoDeviceHandle h;
  mscclppResult_t res;
  uint64_t doneNs;
};

static void* pushAndFlush(void* arg) {
  struct flusher* f = arg;
  mscclppTriggerFields fl = {0};
  fl.op = MSCCLPP_TRIGGER_DATA;
  uint64_t pos;
  f->res = mscclppFifoDevicePush(&f->h, &fl, &pos);
  if (f->res == mscclppSuccess) f->res = mscclppFifoDeviceSync(&f->h, pos);
  if (f->res == mscclppSuccess) f->res = mscclppFifoDeviceFlush(&f->h, pos);
  f->doneNs = mscclppTimeNs();
  return NULL;
}

static void testFlushWaitsForProgress(void) {
  struct asyncState a = {0, 0};
  struct service s;
  serviceInit(&s, 8, 30.0, asyncHandler, asyncProgress, &a);
  CHECK_RES(mscclppProxyStart(s.proxy), mscclppSuccess);
  struct flusher f = {s.h, mscclppInternalError, 0};
  pthread_t th;
  pthread_create(&th, NULL, pushAndFlush, &f);
  sleepMs(30);
  uint64_t t0 = mscclppTimeNs();
  __atomic_store_n(&a.done, 1, __ATOMIC_RELEASE);
  pthread_join(th, NULL);
  CHECK_RES(f.res, mscclppSuccess);
  CHECK(f.doneNs >= t0); /* not before the copies were done */
  CHECK_RES(mscclppProxyStop(s.proxy), mscclppSuccess);
  CHECK(a.calls > 0);
  serviceFini(&s);
}

/* A "kernel" error (an out-of-range field) reaches the proxy's async error
 * and wakes a producer that waits. */
static void testDeviceErrorReachesProxy(void) {
  static struct checker c;
  memset(&c, 0, sizeof(c));
  c.stallFirst = 1; /* keep the FIFO full so that the producer waits */
  struct service s;
  serviceInit(&s, 4, 30.0, checkHandler, NULL, &c);
  CHECK_RES(mscclppProxyStart(s.proxy), mscclppSuccess);
  struct producer p = {0};
  p.h = s.h;
  p.count = 100;
  pthread_t th;
  pthread_create(&th, NULL, produce, &p);
  sleepMs(20);
  mscclppTriggerFields bad = {0};
  bad.op = MSCCLPP_TRIGGER_DATA;
  bad.srcMemoryId = 600;
  uint64_t pos;
  CHECK_RES(mscclppFifoDevicePush(&s.h, &bad, &pos), mscclppInvalidArgument);
  pthread_join(th, NULL);
  CHECK_RES(p.res, mscclppAborted);
  __atomic_store_n(&c.gate, 1, __ATOMIC_RELEASE);
  mscclppResult_t err;
  CHECK_RES(mscclppProxyGetAsyncError(s.proxy, &err), mscclppSuccess);
  CHECK(err == mscclppInvalidArgument && strstr(mscclppGetLastError(), "srcMemoryId") != NULL);
  serviceFini(&s);
}

/* Destroy while a producer is still pushing: an error, no hang, no free;
 * after the producer is done, destroy works. */
static void testDestroyWhilePushing(void) {
  static struct checker c;
  memset(&c, 0, sizeof(c));
  struct service s;
  serviceInit(&s, 16, 30.0, checkHandler, NULL, &c);
  int quit = 0;
  struct producer p = {0};
  p.h = s.h;
  p.quit = &quit;
  pthread_t th;
  pthread_create(&th, NULL, produce, &p);
  /* 1. proxy idle, the producer waits on a full FIFO: deterministic refusal */
  for (int i = 0; i < 5000 && __atomic_load_n(&p.pushed, __ATOMIC_ACQUIRE) < 16; i++) sleepMs(1);
  CHECK(__atomic_load_n(&p.pushed, __ATOMIC_ACQUIRE) == 16);
  uint64_t t0 = mscclppTimeNs();
  CHECK_RES(mscclppProxyDestroy(s.proxy), mscclppInvalidUsage);
  CHECK(strstr(mscclppGetLastError(), "still pushing") != NULL);
  CHECK((mscclppTimeNs() - t0) / 1e9 < 5.0);
  mscclppProxyRunState st;
  CHECK_RES(mscclppProxyGetRunState(s.proxy, &st), mscclppSuccess);
  CHECK(st == mscclppProxyStateIdle); /* left as it was */
  CHECK_RES(mscclppProxyStart(s.proxy), mscclppSuccess);
  __atomic_store_n(&quit, 1, __ATOMIC_RELEASE);
  pthread_join(th, NULL);
  CHECK_RES(p.res, mscclppSuccess);
  /* 2. proxy running, a "kernel" in the middle of a push (position claimed,
   * slot not yet written): destroy refuses and leaves the proxy running */
  uint64_t hole = mscclppAtomicClaim64(s.h.head, 1);
  t0 = mscclppTimeNs();
  CHECK_RES(mscclppProxyDestroy(s.proxy), mscclppInvalidUsage);
  CHECK((mscclppTimeNs() - t0) / 1e9 < 5.0);
  CHECK_RES(mscclppProxyGetRunState(s.proxy, &st), mscclppSuccess);
  CHECK(st == mscclppProxyStateRunning);
  /* the push completes: the proxy takes it */
  mscclppTriggerFields f = {0};
  f.op = MSCCLPP_TRIGGER_OP_USER_FIRST;
  f.srcOffset = p.pushed;
  f.size = p.pushed;
  mscclppTrigger t = mscclppTriggerPack(&f);
  uint64_t commit = (((hole >> s.h.sizeLog2) & 1u) ^ 1u) << 63;
  mscclppTriggerStore(s.h.slots + 2 * (hole & (s.h.size - 1)), t.value[0] | commit, t.value[1] | commit);
  CHECK_RES(mscclppFifoDeviceSync(&s.h, hole), mscclppSuccess);
  CHECK_RES(mscclppProxyStop(s.proxy), mscclppSuccess);
  CHECK(c.seen == __atomic_load_n(&p.pushed, __ATOMIC_ACQUIRE) + 1 && c.errors == 0);
  serviceFini(&s);
}

static void testConfigRejects(void) {
  mscclppProxy_t proxy = NULL;
  mscclppProxyConfig pc = MSCCLPP_PROXY_CONFIG_INITIALIZER;
  pc.structSize = 4;
  CHECK_RES(mscclppProxyCreate(&pc, &proxy), mscclppInvalidArgument);
  pc.structSize = sizeof(pc);
  pc.numaNode = -7;
  CHECK_RES(mscclppProxyCreate(&pc, &proxy), mscclppInvalidArgument);
  CHECK(proxy == NULL);
  /* a FIFO of another error domain */
  pc.numaNode = MSCCLPP_PROXY_NUMA_FROM_DEVICE;
  CHECK_RES(mscclppProxyCreate(&pc, &proxy), mscclppSuccess);
  mscclppFifo_t fifo;
  mscclppFifoConfig fc = MSCCLPP_FIFO_CONFIG_INITIALIZER;
  fc.size = 8;
  CHECK_RES(mscclppFifoCreate(&fc, &fifo), mscclppSuccess);
  CHECK_RES(mscclppProxyAddFifo(proxy, fifo, checkHandler, NULL, NULL), mscclppInvalidArgument);
  mscclppAbort_t abort;
  CHECK_RES(mscclppProxyGetAbort(proxy, &abort), mscclppSuccess);
  CHECK_RES(mscclppAbortDestroy(abort), mscclppInvalidUsage);
  CHECK_RES(mscclppFifoDestroy(fifo), mscclppSuccess);
  CHECK_RES(mscclppProxyDestroy(proxy), mscclppSuccess);
  /* MSCCLPP_NUMA_BIND=0 and a backoff: still serves */
  setenv("MSCCLPP_NUMA_BIND", "0", 1);
  setenv("MSCCLPP_PROXY_BACKOFF_US", "50", 1);
  static struct checker c;
  memset(&c, 0, sizeof(c));
  struct service s;
  serviceInit(&s, 8, 30.0, checkHandler, NULL, &c);
  CHECK_RES(mscclppProxyStart(s.proxy), mscclppSuccess);
  struct producer p = {0};
  p.h = s.h;
  p.count = 1000;
  p.syncEvery = 10;
  produce(&p);
  CHECK_RES(p.res, mscclppSuccess);
  CHECK_RES(mscclppProxyStop(s.proxy), mscclppSuccess);
  CHECK(c.seen == 1000 && c.errors == 0);
  serviceFini(&s);
  unsetenv("MSCCLPP_NUMA_BIND");
  unsetenv("MSCCLPP_PROXY_BACKOFF_US");
}

/* The yield gate's deterministic parts: a fresh gate yields; one that saw
 * a run of fast yields skips them for the interval after the last; a slow
 * yield (or an interval of 0) brings back a yield per call. */
static void testYieldGate(void) {
  struct mscclppYieldGate g = {0, 0};
  CHECK(mscclppYieldGated(&g, 1000000000ull) == 1);
  g.fast = MSCCLPP_YIELD_FAST_RUN;
  g.endNs = mscclppTimeNs();
  CHECK(mscclppYieldGated(&g, 1000000000ull) == 0);
  CHECK(mscclppYieldGated(&g, 0) == 1);
  g.fast = 0;
  g.endNs = mscclppTimeNs();
  CHECK(mscclppYieldGated(&g, 1000000000ull) == 1);
}

/* The producer and the proxy pinned to one CPU (the proxy thread inherits
 * its creator's affinity): every round trip needs the idle proxy to hand
 * the core back. A proxy that stopped yielding on a shared core holds it
 * for a scheduler slice per round trip (milliseconds); one that yields only
 * every PROXY_HOST_SPARSE_YIELD_NS (as it may while nobody else wants its
 * core), about that interval. Yielding on every idle pass, a round trip
 * costs a few switches, well under the bound checked below (figures of the
 * 2-core CI machine: bench/HISTORY.md, "Figures moved out of code
 * comments"). The best of several batches is checked, so that a load burst
 * in one does not fail the test. */
static void testSharedCoreRoundTrips(void) {
  cpu_set_t saved, one;
  CHECK(pthread_getaffinity_np(pthread_self(), sizeof(saved), &saved) == 0);
  int cpu = -1;
  for (int i = 0; i < CPU_SETSIZE && cpu < 0; i++)
    if (CPU_ISSET(i, &saved)) cpu = i;
  CHECK(cpu >= 0);
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  CHECK(pthread_setaffinity_np(pthread_self(), sizeof(one), &one) == 0);
  static struct checker c;
  memset(&c, 0, sizeof(c));
  struct service s;
  serviceInit(&s, 64, 30.0, checkHandler, NULL, &c);
  CHECK_RES(mscclppProxyStart(s.proxy), mscclppSuccess);
  const uint32_t batches = 6, rounds = 1000;
  double best = 1e30;
  for (uint32_t b = 0; b < batches; b++) {
    struct producer p = {0};
    p.h = s.h;
    p.id = b; /* its own sequence in the checker */
    p.count = rounds;
    p.syncEvery = 1;
    uint64_t t0 = mscclppTimeNs();
    produce(&p);
    double us = (double)(mscclppTimeNs() - t0) / 1e3 / rounds;
    CHECK_RES(p.res, mscclppSuccess);
    if (b > 0 && us < best) best = us; /* batch 0 warms up */
  }
  CHECK_RES(mscclppProxyStop(s.proxy), mscclppSuccess);
  CHECK(pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved) == 0);
  printf("  one core: push + sync round trip %.2f us (best batch)\n", best);
  /* A machine busier than its cores (another build beside the tests) slows
   * even a yielding proxy past the bound; the failure this test is for costs
   * the sparse-yield interval or a scheduler slice on an idle machine too, so
   * the bound is only checked where the load leaves a core to share. */
  double load[1] = {0};
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  if (best >= 12.0 && getloadavg(load, 1) == 1 && load[0] > (double)ncpu)
    printf("  not checked: load average %.1f on %ld CPUs\n", load[0], ncpu);
  else
    CHECK(best < 12.0);
  CHECK(c.seen == batches * rounds && c.errors == 0);
  serviceFini(&s);
}

int main(void) {
  RUN(testOneProducer);
  RUN(testFourProducers);
  RUN(testThirtyTwoProducers);
  RUN(testClaimPolicies);
  RUN(testTuningVariants);
  RUN(testBackpressure);
  RUN(testStopWhilePushing);
  RUN(testStartStopIdempotent);
  RUN(testHandlerError);
  RUN(testHandlerStop);
  RUN(testFlushWaitsForProgress);
  RUN(testDeviceErrorReachesProxy);
  RUN(testDestroyWhilePushing);
  RUN(testConfigRejects);
  RUN(testYieldGate);
  RUN(testSharedCoreRoundTrips);
  return harnessFinish();
}
