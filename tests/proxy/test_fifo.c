/* SPDX-License-Identifier: MIT */
/* Unit tests of the trigger layout and of the FIFO without a proxy thread:
 * encode/decode and limits, the commit bit across laps, torn slots, the
 * consumer API, bounded device-side waits (timeout, abort) on the host
 * backend, device error words with a second value, and object lifetimes. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/util.h"
#include "gpu/abort.h"
#include "harness.h"
#include "mscclpp/fifo.h"
#include "mscclpp/fifo_device.h"
#include "mscclpp/trigger.h"
#include "proxy/fifo.h"

static mscclppTriggerFields userFields(uint32_t producer, uint32_t seq) {
  mscclppTriggerFields f = {0};
  f.op = MSCCLPP_TRIGGER_OP_USER_FIRST;
  f.dstOffset = producer;
  f.srcOffset = seq;
  f.size = seq & 0x7fffffffu;
  return f;
}

static void testLayout(void) {
  mscclppTriggerFields f = {0};
  f.op = MSCCLPP_TRIGGER_DATA | MSCCLPP_TRIGGER_FLAG | MSCCLPP_TRIGGER_SYNC;
  f.srcMemoryId = MSCCLPP_TRIGGER_MAX_MEMORIES - 1;
  f.dstMemoryId = 3;
  f.semaphoreId = MSCCLPP_TRIGGER_MAX_SEMAPHORES - 1;
  f.srcOffset = MSCCLPP_TRIGGER_MAX_OFFSET;
  f.dstOffset = 12345;
  f.size = MSCCLPP_TRIGGER_MAX_SIZE;
  mscclppTrigger t;
  CHECK_RES(mscclppTriggerEncode(&f, &t), mscclppSuccess);
  CHECK((t.value[0] & MSCCLPP_TRIGGER_COMMIT_BIT) == 0 && (t.value[1] & MSCCLPP_TRIGGER_COMMIT_BIT) == 0);
  mscclppTriggerFields g;
  mscclppTriggerUnpack(&t, &g);
  CHECK(memcmp(&f, &g, sizeof(f)) == 0);
  CHECK(mscclppTriggerOp(&t) == 7);
  /* every field round-trips at its limit and at zero; fields do not overlap */
  mscclppTriggerFields z = {0};
  z.op = MSCCLPP_TRIGGER_OP_USER_LAST;
  CHECK_RES(mscclppTriggerEncode(&z, &t), mscclppSuccess);
  mscclppTriggerUnpack(&t, &g);
  CHECK(g.op == MSCCLPP_TRIGGER_OP_USER_LAST && g.size == 0 && g.srcOffset == 0 && g.dstOffset == 0 &&
        g.srcMemoryId == 0 && g.dstMemoryId == 0 && g.semaphoreId == 0);
  CHECK(MSCCLPP_TRIGGER_LAYOUT_VERSION == 3);
  CHECK(sizeof(mscclppTrigger) == 16 && _Alignof(mscclppTrigger) == 16);
}

/* INLINE triggers: every size 1..8 with data using all 64 bits, at the
 * field limits; the other fields unpack as usual and the commit bits stay
 * free. */
static void testInlineLayout(void) {
  const uint64_t data = 0xF1E2D3C4B5A69788ull;
  for (uint32_t n = 1; n <= MSCCLPP_TRIGGER_INLINE_MAX; n++) {
    uint32_t op = MSCCLPP_TRIGGER_INLINE | MSCCLPP_TRIGGER_FLAG | MSCCLPP_TRIGGER_SYNC;
    mscclppTrigger t = mscclppTriggerPackInline(op, MSCCLPP_TRIGGER_MAX_MEMORIES - 1, MSCCLPP_TRIGGER_MAX_OFFSET,
                                                MSCCLPP_TRIGGER_MAX_SEMAPHORES - 1, data, n);
    CHECK((t.value[0] & MSCCLPP_TRIGGER_COMMIT_BIT) == 0 && (t.value[1] & MSCCLPP_TRIGGER_COMMIT_BIT) == 0);
    uint64_t d = 0;
    uint32_t size = 0;
    mscclppTriggerUnpackInline(&t, &d, &size);
    CHECK(size == n);
    CHECK(d == (n == 8 ? data : data & ((1ull << (8 * n)) - 1)));
    mscclppTriggerFields g;
    mscclppTriggerUnpack(&t, &g);
    CHECK(g.op == op && mscclppTriggerOpValid(g.op));
    CHECK(g.dstMemoryId == MSCCLPP_TRIGGER_MAX_MEMORIES - 1 && g.dstOffset == MSCCLPP_TRIGGER_MAX_OFFSET &&
          g.semaphoreId == MSCCLPP_TRIGGER_MAX_SEMAPHORES - 1);
    /* the commit bits set by a pusher do not change the payload */
    t.value[0] |= MSCCLPP_TRIGGER_COMMIT_BIT;
    t.value[1] |= MSCCLPP_TRIGGER_COMMIT_BIT;
    mscclppTriggerUnpackInline(&t, &d, &size);
    CHECK(size == n && d == (n == 8 ? data : data & ((1ull << (8 * n)) - 1)));
    /* the stored mark changes neither the payload nor the fields */
    CHECK(!mscclppTriggerInlineStored(&t));
    mscclppTrigger m = mscclppTriggerInlineMarkStored(t);
    CHECK(mscclppTriggerInlineStored(&m));
    mscclppTriggerUnpackInline(&m, &d, &size);
    CHECK(size == n && d == (n == 8 ? data : data & ((1ull << (8 * n)) - 1)));
    mscclppTriggerFields gm;
    mscclppTriggerUnpack(&m, &gm);
    CHECK(gm.op == op && gm.dstMemoryId == g.dstMemoryId && gm.dstOffset == g.dstOffset &&
          gm.semaphoreId == g.semaphoreId);
  }
  mscclppTrigger z = mscclppTriggerPackInline(MSCCLPP_TRIGGER_INLINE, 0, 0, 0, 0, 1);
  uint64_t d = 1;
  uint32_t size = 0;
  mscclppTriggerUnpackInline(&z, &d, &size);
  CHECK(d == 0 && size == 1);
}

static void testEncodeRejects(void) {
  mscclppTrigger t = {{77, 88}};
  struct {
    int field;
    mscclppTriggerFields f;
    const char* name;
  } cases[7];
  for (int i = 0; i < 7; i++) cases[i].f = userFields(0, 0);
  cases[0].f.op = 0, cases[0].name = "op";
  cases[1].f.srcMemoryId = MSCCLPP_TRIGGER_MAX_MEMORIES, cases[1].name = "srcMemoryId";
  cases[2].f.dstMemoryId = 100000, cases[2].name = "dstMemoryId";
  cases[3].f.srcOffset = MSCCLPP_TRIGGER_MAX_OFFSET + 1, cases[3].name = "srcOffset";
  cases[4].f.dstOffset = 1ull << 40, cases[4].name = "dstOffset";
  cases[5].f.size = MSCCLPP_TRIGGER_MAX_SIZE + 1, cases[5].name = "size";
  cases[6].f.semaphoreId = MSCCLPP_TRIGGER_MAX_SEMAPHORES, cases[6].name = "semaphoreId";
  for (int i = 0; i < 7; i++) {
    CHECK_RES(mscclppTriggerEncode(&cases[i].f, &t), mscclppInvalidArgument);
    CHECK(strstr(mscclppGetLastError(), cases[i].name) != NULL);
    CHECK(mscclppTriggerCheck(&cases[i].f) == i + 1);
  }
  CHECK(t.value[0] == 77 && t.value[1] == 88); /* untouched on failure */
  mscclppTriggerFields f = userFields(0, 0);
  f.op = MSCCLPP_TRIGGER_DATA | MSCCLPP_TRIGGER_INLINE; /* a trigger has a source or inline data, not both */
  CHECK_RES(mscclppTriggerEncode(&f, &t), mscclppInvalidArgument);
  f.op = 13; /* DATA|SYNC|INLINE */
  CHECK_RES(mscclppTriggerEncode(&f, &t), mscclppInvalidArgument);
  f.op = 15;
  CHECK_RES(mscclppTriggerEncode(&f, &t), mscclppInvalidArgument);
  f.op = 32;
  CHECK_RES(mscclppTriggerEncode(&f, &t), mscclppInvalidArgument);
  CHECK_RES(mscclppTriggerEncode(NULL, &t), mscclppInvalidArgument);
}

static mscclppFifo_t makeFifo(int size, double timeoutSec, mscclppAbort_t abort) {
  mscclppFifoConfig cfg = MSCCLPP_FIFO_CONFIG_INITIALIZER;
  cfg.size = size;
  cfg.timeoutSec = timeoutSec;
  cfg.abort = abort;
  mscclppFifo_t fifo = NULL;
  CHECK_RES(mscclppFifoCreate(&cfg, &fifo), mscclppSuccess);
  return fifo;
}

static void testCreateRejects(void) {
  mscclppFifoConfig cfg = MSCCLPP_FIFO_CONFIG_INITIALIZER;
  mscclppFifo_t fifo = NULL;
  cfg.size = 100;
  CHECK_RES(mscclppFifoCreate(&cfg, &fifo), mscclppInvalidArgument);
  CHECK(strstr(mscclppGetLastError(), "power of two") != NULL);
  cfg.size = 1;
  CHECK_RES(mscclppFifoCreate(&cfg, &fifo), mscclppInvalidArgument);
  cfg.size = 64;
  cfg.structSize = 8;
  CHECK_RES(mscclppFifoCreate(&cfg, &fifo), mscclppInvalidArgument);
  CHECK(strstr(mscclppGetLastError(), "structSize") != NULL);
  CHECK_RES(mscclppFifoCreate(NULL, &fifo), mscclppInvalidArgument);
  CHECK(fifo == NULL);
  /* MSCCLPP_FIFO_SIZE is the default */
  setenv("MSCCLPP_FIFO_SIZE", "32", 1);
  fifo = makeFifo(0, 0, NULL);
  int size = 0;
  CHECK_RES(mscclppFifoGetSize(fifo, &size), mscclppSuccess);
  CHECK(size == 32);
  CHECK_RES(mscclppFifoDestroy(fifo), mscclppSuccess);
  setenv("MSCCLPP_FIFO_SIZE", "48", 1);
  CHECK_RES(mscclppFifoCreate(&(mscclppFifoConfig)MSCCLPP_FIFO_CONFIG_INITIALIZER, &fifo), mscclppInvalidArgument);
  unsetenv("MSCCLPP_FIFO_SIZE");
}

/* Push and consume by hand through many laps; every slot is read once. */
static void testLapsAndConsumer(void) {
  mscclppFifo_t fifo = makeFifo(4, 5.0, NULL);
  mscclppFifoDeviceHandle h;
  CHECK_RES(mscclppFifoGetDeviceHandle(fifo, &h), mscclppSuccess);
  mscclppTrigger t;
  uint64_t pos = 0;
  int ready = 1;
  CHECK_RES(mscclppFifoPoll(fifo, &t, &pos, &ready), mscclppSuccess);
  CHECK(ready == 0); /* zeroed slots are not fresh */
  CHECK_RES(mscclppFifoPop(fifo), mscclppInvalidUsage);
  for (uint32_t i = 0; i < 1000; i++) {
    mscclppTriggerFields f = userFields(1, i);
    uint64_t p = 0;
    CHECK_RES(mscclppFifoDevicePush(&h, &f, &p), mscclppSuccess);
    CHECK(p == i);
    CHECK(!mscclppFifoDevicePoll(&h, p));
    CHECK_RES(mscclppFifoPoll(fifo, &t, &pos, &ready), mscclppSuccess);
    CHECK(ready == 1 && pos == i);
    mscclppTriggerFields g;
    mscclppTriggerUnpack(&t, &g);
    CHECK(g.srcOffset == i && g.dstOffset == 1 && g.op == MSCCLPP_TRIGGER_OP_USER_FIRST);
    CHECK_RES(mscclppFifoPop(fifo), mscclppSuccess);
    CHECK(mscclppFifoDevicePoll(&h, p));
    CHECK_RES(mscclppFifoDeviceSync(&h, p), mscclppSuccess);
    CHECK_RES(mscclppFifoPoll(fifo, &t, &pos, &ready), mscclppSuccess);
    CHECK(ready == 0); /* the previous lap's trigger in the next slot is stale */
    CHECK_RES(mscclppFifoComplete(fifo, i + 1), mscclppSuccess);
    CHECK_RES(mscclppFifoDeviceFlush(&h, p), mscclppSuccess);
  }
  CHECK_RES(mscclppFifoComplete(fifo, 2000), mscclppInvalidArgument); /* beyond the tail */
  CHECK_RES(mscclppFifoComplete(fifo, 10), mscclppInvalidArgument);   /* backwards */
  CHECK_RES(mscclppFifoDestroy(fifo), mscclppSuccess);
}

/* A slot whose two words carry different laps (a torn 16-byte write) is not
 * fresh; once both words are written it is. */
static void testTornSlot(void) {
  mscclppFifo_t fifo = makeFifo(2, 5.0, NULL);
  struct mscclppFifo* f = fifo;
  mscclppTrigger t;
  uint64_t pos;
  int ready;
  /* lap 0 expects commit 1 in both words */
  f->slotsHost[0] = MSCCLPP_TRIGGER_COMMIT_BIT | 5;
  CHECK_RES(mscclppFifoPoll(fifo, &t, &pos, &ready), mscclppSuccess);
  CHECK(ready == 0);
  f->slotsHost[1] = MSCCLPP_TRIGGER_COMMIT_BIT | ((uint64_t)MSCCLPP_TRIGGER_OP_USER_FIRST << 58);
  CHECK_RES(mscclppFifoPoll(fifo, &t, &pos, &ready), mscclppSuccess);
  CHECK(ready == 1 && t.value[0] == 5);
  CHECK_RES(mscclppFifoPop(fifo), mscclppSuccess);
  f->slotsHost[2] = MSCCLPP_TRIGGER_COMMIT_BIT; /* position 1, word 0 only */
  CHECK_RES(mscclppFifoPoll(fifo, &t, &pos, &ready), mscclppSuccess);
  CHECK(ready == 0);
  f->slotsHost[3] = MSCCLPP_TRIGGER_COMMIT_BIT;
  CHECK_RES(mscclppFifoPop(fifo), mscclppSuccess);
  /* position 2 (lap 1) expects commit 0: slot 0 still holds lap 0 */
  CHECK_RES(mscclppFifoPoll(fifo, &t, &pos, &ready), mscclppSuccess);
  CHECK(ready == 0);
  f->slotsHost[0] = 9; /* word 0 of lap 1, word 1 still lap 0: torn */
  CHECK_RES(mscclppFifoPoll(fifo, &t, &pos, &ready), mscclppSuccess);
  CHECK(ready == 0);
  f->slotsHost[1] = 0;
  CHECK_RES(mscclppFifoPoll(fifo, &t, &pos, &ready), mscclppSuccess);
  CHECK(ready == 1 && pos == 2 && t.value[0] == 9);
  CHECK_RES(mscclppFifoPop(fifo), mscclppSuccess);
  CHECK_RES(mscclppFifoDestroy(fifo), mscclppSuccess);
}

static void testPushTimeout(void) {
  mscclppAbort_t abort;
  CHECK_RES(mscclppAbortCreate(-1, &abort), mscclppSuccess);
  mscclppFifo_t fifo = makeFifo(4, 0.1, abort);
  mscclppFifoDeviceHandle h;
  CHECK_RES(mscclppFifoGetDeviceHandle(fifo, &h), mscclppSuccess);
  uint64_t p;
  mscclppTriggerFields fl = userFields(0, 0);
  for (int i = 0; i < 4; i++) CHECK_RES(mscclppFifoDevicePush(&h, &fl, &p), mscclppSuccess);
  uint64_t t0 = mscclppTimeNs();
  CHECK_RES(mscclppFifoDevicePush(&h, &fl, &p), mscclppTimeout); /* full, nobody consumes */
  double waited = (mscclppTimeNs() - t0) / 1e9;
  CHECK(waited >= 0.09 && waited < 2.0);
  mscclppResult_t err = mscclppSuccess;
  CHECK_RES(mscclppAbortGetError(abort, &err), mscclppSuccess);
  CHECK(err == mscclppTimeout);
  CHECK(strstr(mscclppGetLastError(), "position 4") != NULL && strstr(mscclppGetLastError(), "full") != NULL);
  int set = 0;
  CHECK_RES(mscclppAbortIsSet(abort, &set), mscclppSuccess);
  CHECK(set == 1);
  /* once aborted, every wait returns at once */
  t0 = mscclppTimeNs();
  CHECK_RES(mscclppFifoDeviceSync(&h, 3), mscclppAborted);
  CHECK((mscclppTimeNs() - t0) / 1e9 < 1.0);
  CHECK_RES(mscclppAbortDestroy(abort), mscclppInvalidUsage); /* the FIFO uses it */
  CHECK_RES(mscclppFifoDestroy(fifo), mscclppSuccess);        /* aborted: pending triggers allowed */
  CHECK_RES(mscclppAbortDestroy(abort), mscclppSuccess);
}

static void testSyncAndFlushTimeout(void) {
  for (int which = 0; which < 2; which++) {
    mscclppAbort_t abort;
    CHECK_RES(mscclppAbortCreate(-1, &abort), mscclppSuccess);
    mscclppFifo_t fifo = makeFifo(8, 0.05, abort);
    mscclppFifoDeviceHandle h;
    CHECK_RES(mscclppFifoGetDeviceHandle(fifo, &h), mscclppSuccess);
    mscclppTriggerFields fl = userFields(0, 0);
    uint64_t p = 0;
    CHECK_RES(mscclppFifoDevicePush(&h, &fl, &p), mscclppSuccess);
    if (which == 0) {
      CHECK_RES(mscclppFifoDeviceSync(&h, p), mscclppTimeout);
    } else {
      CHECK_RES(mscclppFifoPop(fifo), mscclppSuccess); /* taken but never completed */
      CHECK_RES(mscclppFifoDeviceSync(&h, p), mscclppSuccess);
      CHECK_RES(mscclppFifoDeviceFlush(&h, p), mscclppTimeout);
    }
    mscclppResult_t err;
    CHECK_RES(mscclppAbortGetError(abort, &err), mscclppSuccess);
    CHECK(err == mscclppTimeout);
    CHECK(strstr(mscclppGetLastError(), which == 0 ? "take FIFO position 0" : "complete (flush)") != NULL);
    CHECK_RES(mscclppFifoDestroy(fifo), mscclppSuccess);
    CHECK_RES(mscclppAbortDestroy(abort), mscclppSuccess);
  }
}

/* The default bound is MSCCLPP_TIMEOUT, read when the FIFO is created. */
static void testEnvTimeout(void) {
  setenv("MSCCLPP_TIMEOUT", "0.1", 1);
  mscclppFifo_t fifo = makeFifo(2, 0.0, NULL);
  unsetenv("MSCCLPP_TIMEOUT");
  mscclppFifoDeviceHandle h;
  CHECK_RES(mscclppFifoGetDeviceHandle(fifo, &h), mscclppSuccess);
  CHECK(h.wait.timeoutNs == 100000000ull);
  mscclppTriggerFields fl = userFields(0, 0);
  uint64_t p;
  CHECK_RES(mscclppFifoDevicePush(&h, &fl, &p), mscclppSuccess);
  uint64_t t0 = mscclppTimeNs();
  CHECK_RES(mscclppFifoDeviceSync(&h, p), mscclppTimeout);
  double waited = (mscclppTimeNs() - t0) / 1e9;
  CHECK(waited >= 0.09 && waited < 2.0);
  CHECK_RES(mscclppFifoDestroy(fifo), mscclppSuccess);
}

struct waiter {
  mscclppFifoDeviceHandle h;
  mscclppResult_t res;
  uint64_t returnedNs;
};

static void* pushUntilFull(void* arg) {
  struct waiter* w = arg;
  mscclppTriggerFields fl = userFields(0, 0);
  uint64_t p;
  do {
    w->res = mscclppFifoDevicePush(&w->h, &fl, &p);
  } while (w->res == mscclppSuccess);
  w->returnedNs = mscclppTimeNs();
  return NULL;
}

static void testAbortWakesPusher(void) {
  mscclppAbort_t abort;
  CHECK_RES(mscclppAbortCreate(-1, &abort), mscclppSuccess);
  mscclppFifo_t fifo = makeFifo(8, 30.0, abort);
  struct waiter w;
  CHECK_RES(mscclppFifoGetDeviceHandle(fifo, &w.h), mscclppSuccess);
  pthread_t th;
  pthread_create(&th, NULL, pushUntilFull, &w);
  struct timespec ts = {0, 30 * 1000 * 1000};
  nanosleep(&ts, NULL);
  uint64_t t0 = mscclppTimeNs();
  CHECK_RES(mscclppAbortRaise(abort, mscclppAborted, "test abort"), mscclppSuccess);
  pthread_join(th, NULL);
  CHECK(w.res == mscclppAborted);
  CHECK((w.returnedNs - t0) / 1e9 < 2.0); /* promptly, even on a loaded 2-core machine */
  mscclppResult_t err;
  CHECK_RES(mscclppAbortGetError(abort, &err), mscclppSuccess);
  CHECK(err == mscclppAborted && strcmp(mscclppGetLastError(), "test abort") == 0);
  /* first error wins */
  CHECK_RES(mscclppAbortRaise(abort, mscclppRemoteError, "later"), mscclppSuccess);
  CHECK_RES(mscclppAbortGetError(abort, &err), mscclppSuccess);
  CHECK(err == mscclppAborted);
  CHECK_RES(mscclppAbortRaise(abort, mscclppSuccess, "no"), mscclppInvalidArgument);
  CHECK_RES(mscclppFifoDestroy(fifo), mscclppSuccess);
  CHECK_RES(mscclppAbortDestroy(abort), mscclppSuccess);
}

/* An out-of-range field pushed from the "device" is refused, recorded with
 * the field's name and value, and raises the abort flag. */
static void testDevicePushRejects(void) {
  mscclppAbort_t abort;
  CHECK_RES(mscclppAbortCreate(-1, &abort), mscclppSuccess);
  mscclppFifo_t fifo = makeFifo(8, 5.0, abort);
  mscclppFifoDeviceHandle h;
  CHECK_RES(mscclppFifoGetDeviceHandle(fifo, &h), mscclppSuccess);
  mscclppTriggerFields fl = userFields(0, 0);
  fl.size = 3000000000ull;
  uint64_t p = 99;
  CHECK_RES(mscclppFifoDevicePush(&h, &fl, &p), mscclppInvalidArgument);
  CHECK(p == 99);
  mscclppResult_t err;
  CHECK_RES(mscclppAbortGetError(abort, &err), mscclppSuccess);
  CHECK(err == mscclppInvalidArgument);
  CHECK(strstr(mscclppGetLastError(), "'size'") != NULL && strstr(mscclppGetLastError(), "3000000000") != NULL);
  uint64_t pending = 1;
  CHECK_RES(mscclppFifoPending(fifo, &pending), mscclppSuccess);
  CHECK(pending == 0); /* nothing was claimed */
  CHECK_RES(mscclppFifoDestroy(fifo), mscclppSuccess);
  CHECK_RES(mscclppAbortDestroy(abort), mscclppSuccess);
}

/* A device error with a second value (mscclppAllToAllv's counts): both
 * values and the rank reach the text; the first error wins. */
static void testDeviceRaiseWide(void) {
  mscclppAbort_t abort;
  CHECK_RES(mscclppAbortCreate(-1, &abort), mscclppSuccess);
  mscclppWaitContext ctx;
  mscclppAbortWaitContext(abort, 5.0, 1, &ctx);
  mscclppDeviceRaiseWide(&ctx, MSCCLPP_DEVICE_ERROR_RECV_OVERFLOW, 2, 23, 5000000000ull);
  mscclppDeviceRaiseWide(&ctx, MSCCLPP_DEVICE_ERROR_SEND_RANGE, 0x12, 1, 2);
  mscclppResult_t err;
  CHECK_RES(mscclppAbortGetError(abort, &err), mscclppSuccess);
  CHECK(err == mscclppInvalidUsage);
  const char* why = mscclppGetLastError();
  CHECK(strstr(why, "rank 2:") != NULL && strstr(why, "5000000000 elements arrived") != NULL &&
        strstr(why, "recvcapacity 23") != NULL);
  int set = 0;
  CHECK_RES(mscclppAbortIsSet(abort, &set), mscclppSuccess);
  CHECK(set == 1);
  CHECK_RES(mscclppAbortDestroy(abort), mscclppSuccess);
  CHECK_RES(mscclppAbortCreate(-1, &abort), mscclppSuccess);
  mscclppAbortWaitContext(abort, 5.0, 1, &ctx);
  mscclppDeviceRaiseWide(&ctx, MSCCLPP_DEVICE_ERROR_SEND_RANGE, 1u << 4 | 3u, 40, 47);
  CHECK_RES(mscclppAbortGetError(abort, &err), mscclppSuccess);
  CHECK(err == mscclppInvalidArgument);
  why = mscclppGetLastError();
  CHECK(strstr(why, "rank 1:") != NULL && strstr(why, "block for rank 3 ends at element 47") != NULL &&
        strstr(why, "sendcapacity 40") != NULL);
  CHECK_RES(mscclppAbortDestroy(abort), mscclppSuccess);
}

static void testDestroyRefusesPending(void) {
  mscclppFifo_t fifo = makeFifo(8, 5.0, NULL);
  mscclppFifoDeviceHandle h;
  CHECK_RES(mscclppFifoGetDeviceHandle(fifo, &h), mscclppSuccess);
  mscclppTriggerFields fl = userFields(0, 0);
  uint64_t p;
  CHECK_RES(mscclppFifoDevicePush(&h, &fl, &p), mscclppSuccess);
  CHECK_RES(mscclppFifoDestroy(fifo), mscclppInvalidUsage);
  CHECK(strstr(mscclppGetLastError(), "still pushing") != NULL);
  CHECK_RES(mscclppFifoPop(fifo), mscclppSuccess);
  CHECK_RES(mscclppFifoDestroy(fifo), mscclppSuccess);
  CHECK_RES(mscclppFifoDestroy(NULL), mscclppInvalidArgument);
}

int main(void) {
  RUN(testLayout);
  RUN(testInlineLayout);
  RUN(testEncodeRejects);
  RUN(testCreateRejects);
  RUN(testLapsAndConsumer);
  RUN(testTornSlot);
  RUN(testPushTimeout);
  RUN(testSyncAndFlushTimeout);
  RUN(testEnvTimeout);
  RUN(testAbortWakesPusher);
  RUN(testDevicePushRejects);
  RUN(testDeviceRaiseWide);
  RUN(testDestroyRefusesPending);
  return harnessFinish();
}
