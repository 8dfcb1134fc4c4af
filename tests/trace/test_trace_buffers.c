/* SPDX-License-Identifier: MIT */
/*
 * The trace buffers (src/core/trace.c) in one process: events past a
 * thread's ring go through its spill file and come back whole and in order
 * (three threads, several rings each), the session's limit per thread drops
 * and counts the rest, and a thread that records while sessions are written
 * loses nothing it does not count: every event it recorded is in exactly
 * one file, or counted as dropped; and the file's times are
 * CLOCK_MONOTONIC ns, whatever clock recorded them.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/trace.h"
#include "harness.h"

#define RING 1024 /* trace.c's RING_EVENTS: the tests go well past it */

static char dir[256];
static int written; /* sessions this process has written: trace.c names the later files <path>.<n + 1> */

/* The file of the session that is written next. */
static void nextFile(const char* name, char* path, size_t size) {
  if (written == 0)
    snprintf(path, size, "%s/%s", dir, name);
  else
    snprintf(path, size, "%s/%s.%d", dir, name, written + 1);
  written++;
}

/* An instant whose arguments say who recorded it and its number. */
static void record(int who, uint64_t i) {
  MSCCLPP_TRACE_EMIT(MSCCLPP_TRACE_NET_REMOTE, mscclppTraceNow(), 0, MSCCLPP_TRACE_I(who), i);
}

/* What a session's file holds of the events recorded here. */
struct fileSummary {
  long events, dropped; /* the metadata's */
  long seen[4];         /* net.remote_data events per `who` */
  long outOfOrder;      /* events of one `who` whose number is not after the last one's */
  long gaps;            /* ... or more than one after it (events dropped between) */
  uint64_t last[4];
  int haveLast[4];
  double ts[4][2]; /* the first two events' times of each `who`, ns */
  int ok;
};

static int readFile(const char* path, struct fileSummary* s) {
  memset(s, 0, sizeof(*s));
  FILE* f = fopen(path, "r");
  if (f == NULL) return -1;
  char line[1024];
  while (fgets(line, sizeof(line), f) != NULL) {
    const char* m = strstr(line, "\"otherData\"");
    if (m != NULL) {
      const char* e = strstr(line, "\"events\":");
      const char* d = strstr(line, "\"dropped\":");
      if (e != NULL) s->events = strtol(e + 9, NULL, 10);
      if (d != NULL) s->dropped = strtol(d + 10, NULL, 10);
      s->ok = e != NULL && d != NULL;
      continue;
    }
    if (strstr(line, "\"name\":\"net.remote_data\"") == NULL) continue;
    const char* p = strstr(line, "\"peer\":");
    const char* t = strstr(line, "\"tag\":");
    if (p == NULL || t == NULL) continue;
    long who = strtol(p + 7, NULL, 10);
    uint64_t i = strtoull(t + 6, NULL, 10);
    if (who < 0 || who > 3) continue;
    const char* ts = strstr(line, "\"ts\":");
    if (ts != NULL && s->seen[who] < 2) s->ts[who][s->seen[who]] = strtod(ts + 5, NULL) * 1000.0;
    if (s->haveLast[who] && i <= s->last[who]) s->outOfOrder++;
    if (s->haveLast[who] && i > s->last[who] + 1) s->gaps++;
    s->last[who] = i;
    s->haveLast[who] = 1;
    s->seen[who]++;
  }
  fclose(f);
  return 0;
}

struct worker {
  int who;
  uint64_t n;
};

static void* recordMany(void* p) {
  const struct worker* w = (const struct worker*)p;
  for (uint64_t i = 0; i < w->n; i++) record(w->who, i);
  return NULL;
}

/* Three threads, each 5.5 rings of events: all of them in the file, each
 * thread's in its order (a thread's times never go back, and ties keep
 * their order), none dropped. */
static void testSpillRoundTrip(void) {
  char tmpl[300], path[300];
  snprintf(tmpl, sizeof(tmpl), "%s/spill%%r.json", dir);
  nextFile("spill-1.json", path, sizeof(path)); /* %r: no communicator named the session */
  CHECK_RES(mscclppTraceAcquire(tmpl, 1 << 20), mscclppSuccess);
  const uint64_t n = RING * 5 + RING / 2;
  struct worker w[3] = {{0, n}, {1, n}, {2, n}};
  pthread_t t[2];
  CHECK(pthread_create(&t[0], NULL, recordMany, &w[1]) == 0);
  CHECK(pthread_create(&t[1], NULL, recordMany, &w[2]) == 0);
  recordMany(&w[0]);
  pthread_join(t[0], NULL);
  pthread_join(t[1], NULL);
  mscclppTraceRelease();
  struct fileSummary s;
  CHECK(readFile(path, &s) == 0);
  CHECK(s.ok);
  CHECK(s.events == (long)(3 * n));
  CHECK(s.dropped == 0);
  for (int k = 0; k < 3; k++) {
    CHECK(s.seen[k] == (long)n);
    CHECK(s.haveLast[k] && s.last[k] == n - 1);
  }
  CHECK(s.outOfOrder == 0 && s.gaps == 0);
  unlink(path);
}

/* MSCCLPP_TRACE_EVENTS=N: the first N events of the session are kept, the
 * rest counted as dropped; the next session starts with room again. */
static void testSessionLimit(void) {
  char tmpl[300], path[300];
  snprintf(tmpl, sizeof(tmpl), "%s/limit.json", dir);
  const uint64_t limit = RING + 100, n = 3 * RING;
  for (int session = 0; session < 2; session++) {
    CHECK_RES(mscclppTraceAcquire(tmpl, (int64_t)limit), mscclppSuccess);
    for (uint64_t i = 0; i < n; i++) record(3, i);
    mscclppTraceRelease();
    nextFile("limit.json", path, sizeof(path));
    struct fileSummary s;
    CHECK(readFile(path, &s) == 0);
    CHECK(s.ok);
    CHECK(s.events == (long)limit);
    CHECK(s.dropped == (long)(n - limit));
    CHECK(s.seen[3] == (long)limit);
    CHECK(s.haveLast[3] && s.last[3] == limit - 1);
    CHECK(s.outOfOrder == 0 && s.gaps == 0);
    unlink(path);
  }
}

static atomic_int stop;
static uint64_t recorded;

static void* recordUntilStopped(void* p) {
  (void)p;
  uint64_t i = 0;
  while (!atomic_load(&stop)) {
    record(1, i++);
    if (i % 256 == 0) usleep(1000); /* paced: a few rings per session, not millions of drops */
  }
  recorded = i;
  return NULL;
}

/* Sessions opened and written while another thread records: what the
 * files hold and what they count as dropped add up to what it recorded,
 * and each file has its events in order (with gaps where some were
 * dropped: the writer held the buffer when its ring was full). */
static void testWriteWhileRecording(void) {
  char tmpl[300], path[8][300];
  snprintf(tmpl, sizeof(tmpl), "%s/busy.json", dir);
  pthread_t t;
  atomic_store(&stop, 0);
  CHECK_RES(mscclppTraceAcquire(tmpl, 1 << 20), mscclppSuccess);
  CHECK(pthread_create(&t, NULL, recordUntilStopped, NULL) == 0);
  const int sessions = 6;
  for (int k = 0; k < sessions; k++) {
    usleep(5000);
    mscclppTraceRelease();
    nextFile("busy.json", path[k], sizeof(path[k]));
    if (k == sessions - 1) {
      atomic_store(&stop, 1);
      pthread_join(t, NULL);
    }
    CHECK_RES(mscclppTraceAcquire(tmpl, 1 << 20), mscclppSuccess);
  }
  mscclppTraceRelease(); /* the events recorded after the last write */
  nextFile("busy.json", path[sessions], sizeof(path[sessions]));
  long total = 0;
  for (int k = 0; k <= sessions; k++) {
    struct fileSummary s;
    CHECK(readFile(path[k], &s) == 0);
    CHECK(s.ok);
    CHECK(s.outOfOrder == 0);
    total += s.seen[1] + s.dropped;
    unlink(path[k]);
  }
  printf("recorded %" PRIu64 " events across %d written sessions; files and drops hold %ld\n", recorded,
         sessions + 1, total);
  CHECK(recorded > (uint64_t)RING); /* the thread went through its ring */
  CHECK(total == (long)recorded);
}

/* The file's times are CLOCK_MONOTONIC ns whatever the trace's clock
 * (trace.h: the TSC where it is invariant): an event recorded between two
 * readings of CLOCK_MONOTONIC is written between them (within 5 us), at
 * the session's start and 50 ms later. */
static void testTimesAreMonotonicNs(void) {
  char tmpl[300], path[300];
  snprintf(tmpl, sizeof(tmpl), "%s/clock.json", dir);
  CHECK_RES(mscclppTraceAcquire(tmpl, 1 << 20), mscclppSuccess);
  uint64_t before[2], after[2];
  for (int k = 0; k < 2; k++) {
    if (k > 0) usleep(50000);
    before[k] = mscclppTimeNs();
    record(0, (uint64_t)k);
    after[k] = mscclppTimeNs();
  }
  mscclppTraceRelease();
  nextFile("clock.json", path, sizeof(path));
  struct fileSummary s;
  CHECK(readFile(path, &s) == 0);
  CHECK(s.seen[0] == 2);
  for (int k = 0; k < 2 && s.seen[0] == 2; k++) {
    printf("event %d: %.0f ns after the clock read before it, %.0f ns before the one after (TSC clock: %d)\n", k,
           s.ts[0][k] - (double)before[k], (double)after[k] - s.ts[0][k], mscclppTraceTsc);
    CHECK(s.ts[0][k] >= (double)before[k] - 5000.0);
    CHECK(s.ts[0][k] <= (double)after[k] + 5000.0);
  }
  unlink(path);
}

int main(int argc, char** argv) {
  harnessInit(argc, argv);
  const char* tmp = getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp";
  snprintf(dir, sizeof(dir), "%s/trace_buffers.XXXXXX", tmp);
  if (mkdtemp(dir) == NULL) {
    perror("mkdtemp");
    return 1;
  }
  RUN(testSpillRoundTrip);
  RUN(testSessionLimit);
  RUN(testWriteWhileRecording);
  RUN(testTimesAreMonotonicNs);
  rmdir(dir);
  return harnessFinish();
}
