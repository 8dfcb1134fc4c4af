/* SPDX-License-Identifier: MIT */
/*
 * The chaos trials' calls (chaos.h) through the mscclpp API, on the host
 * backend: buffers are host memory, every call returns when it is done,
 * shrink is mscclppCommShrink with MSCCLPP_SHRINK_ABORT.
 */
#include <stdio.h>
#include <stdlib.h>

#include "chaos.h"
#include "mscclpp/coll.h"
#include "mscclpp/comm.h"

static int32_t* bufs; /* per slot: A, C, B */
static size_t maxCount;

static int fail(mscclppResult_t res, const char* what, char* why, size_t len) {
  snprintf(why, len, "%s: %s: %s", what, mscclppGetErrorString(res), mscclppGetLastError());
  return -1;
}

static int setup(int gpu, int slots, size_t count, char* why, size_t len) {
  if (gpu >= 0) {
    snprintf(why, len, "the mscclpp API runs on the host backend only in these trials");
    return -1;
  }
  maxCount = count;
  bufs = (int32_t*)calloc((size_t)slots * 4 * count, sizeof(int32_t));
  if (bufs == NULL) {
    snprintf(why, len, "out of memory");
    return -1;
  }
  return 0;
}

static void teardown(void) {
  free(bufs);
  bufs = NULL;
}

static int32_t* host(int slot, enum chaosBuf which) { return bufs + chaosBufOffset(slot, which, maxCount); }

static int uniqueId(char hex[CHAOS_ID_CHARS], char* why, size_t len) {
  mscclppUniqueId id;
  mscclppResult_t res = mscclppGetUniqueId(&id);
  if (res != mscclppSuccess) return fail(res, "mscclppGetUniqueId", why, len);
  chaosIdToHex(id.internal, sizeof(id.internal), hex);
  return 0;
}

static int init(const char* hex, int nranks, int rank, void** comm, char* why, size_t len) {
  mscclppUniqueId id;
  if (chaosIdFromHex(hex, id.internal, sizeof(id.internal), why, len) != 0) return -1;
  mscclppComm_t c = NULL;
  mscclppResult_t res = mscclppCommInitRankFromId(&c, nranks, id, rank);
  if (res != mscclppSuccess) return fail(res, "mscclppCommInitRankFromId", why, len);
  *comm = c;
  return 0;
}

static int shrink(void* comm, const int* exclude, int count, void** child, char* why, size_t len) {
  mscclppComm_t c = NULL;
  mscclppResult_t res = mscclppCommShrink((mscclppComm_t)comm, exclude, count, &c, MSCCLPP_SHRINK_ABORT);
  if (res != mscclppSuccess) return fail(res, "mscclppCommShrink", why, len);
  *child = c;
  return 0;
}

static int destroy(void* comm, char* why, size_t len) {
  mscclppResult_t res = mscclppCommDestroy((mscclppComm_t)comm);
  return res == mscclppSuccess ? 0 : fail(res, "mscclppCommDestroy", why, len);
}

static int call(void* comm, const struct chaosCall* c, void (*inGroup)(void), char* why, size_t len) {
  mscclppComm_t m = (mscclppComm_t)comm;
  int32_t *a = host(c->slot, CHAOS_A), *cc = host(c->slot, CHAOS_C), *b = host(c->slot, CHAOS_B);
  mscclppResult_t res = mscclppSuccess;
  switch (c->op) {
    case CHAOS_ALLREDUCE:
      res = mscclppAllReduce(a, b, c->count, mscclppInt32, mscclppSum, m, NULL);
      return res == mscclppSuccess ? 0 : fail(res, "mscclppAllReduce", why, len);
    case CHAOS_BROADCAST:
      res = mscclppBroadcast(a, a, c->count, mscclppInt32, c->root, m, NULL);
      return res == mscclppSuccess ? 0 : fail(res, "mscclppBroadcast", why, len);
    case CHAOS_ALLTOALL:
      res = mscclppAllToAll(a, b, c->count, mscclppInt32, m, NULL);
      return res == mscclppSuccess ? 0 : fail(res, "mscclppAllToAll", why, len);
    case CHAOS_SENDRECV:
      mscclppGroupStart();
      mscclppSend(a, c->count, mscclppInt32, c->next, m, NULL);
      if (inGroup != NULL) inGroup();
      mscclppSend(cc, c->count, mscclppInt32, c->prev, m, NULL);
      mscclppRecv(b, c->count, mscclppInt32, c->prev, m, NULL);
      mscclppRecv(b + maxCount, c->count, mscclppInt32, c->next, m, NULL);
      res = mscclppGroupEnd();
      return res == mscclppSuccess ? 0 : fail(res, "the send/recv group", why, len);
  }
  snprintf(why, len, "unknown call %d", (int)c->op);
  return -1;
}

/* Every call was done when it returned. */
static int waitCalls(void* comm, double seconds, int* inFlight, char* why, size_t len) {
  (void)comm;
  (void)seconds;
  (void)why;
  (void)len;
  *inFlight = 0;
  return 0;
}

static int busy(void) { return -1; }

const struct chaosApi chaosApi = {
    .name = "mscclpp",
    .setup = setup,
    .teardown = teardown,
    .host = host,
    .uniqueId = uniqueId,
    .init = init,
    .shrink = shrink,
    .destroy = destroy,
    .call = call,
    .wait = waitCalls,
    .busy = busy,
    .library = NULL,
    .deviceMemory = NULL,
};
