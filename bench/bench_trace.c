/* SPDX-License-Identifier: MIT */
/*
 * The cost of one traced collective span (MSCCLPP_TRACE, src/core/trace.c):
 * the site of mscclppCollDispatch (a clock read before the call, one after,
 * one event of 13 arguments) repeated, tracing off and on, against a clock
 * read alone (CLOCK_MONOTONIC, and the trace's clock: trace.h). Each
 * figure is the median of ROUNDS rounds of `spans` spans, in wall time and
 * in the thread's CPU time (the second leaves out the time a loaded machine
 * gives to others). The session is opened once and written
 * at the end to a file under $TMPDIR (removed), as a traced run's would be.
 *
 *   bench_trace [spans per round (default 200000)]
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "bench_stats.h"
#include "core/trace.h"
#include "core/util.h"

#define ROUNDS 9

static uint64_t cpuNs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* One round of n spans as mscclppCollDispatch records them. */
static void spans(int n, volatile uint64_t* sink) {
  for (int i = 0; i < n; i++) {
    const uint64_t t0 = mscclppTraceBegin();
    *sink += (uint64_t)i; /* the call */
    if (t0 != 0)
      MSCCLPP_TRACE_EMIT(MSCCLPP_TRACE_COLL, t0, mscclppTraceNow(), MSCCLPP_TRACE_S("allreduce"), 256u, 1024u,
                         MSCCLPP_TRACE_S("float"), MSCCLPP_TRACE_S("sum"), MSCCLPP_TRACE_I(-1),
                         MSCCLPP_TRACE_S("host"), MSCCLPP_TRACE_S("auto"), MSCCLPP_TRACE_I(2), 0x1234u, (uint64_t)i,
                         MSCCLPP_TRACE_I(0));
  }
}

static void clockReads(int n, volatile uint64_t* sink) {
  for (int i = 0; i < n; i++) *sink += mscclppTimeNs();
}

static void traceClockReads(int n, volatile uint64_t* sink) {
  for (int i = 0; i < n; i++) *sink += mscclppTraceNow();
}

static void measure(const char* what, void (*body)(int, volatile uint64_t*), int n) {
  double wall[ROUNDS], cpu[ROUNDS];
  volatile uint64_t sink = 0;
  body(n / 10 > 0 ? n / 10 : 1, &sink); /* warm */
  for (int r = 0; r < ROUNDS; r++) {
    const uint64_t w0 = mscclppTimeNs(), c0 = cpuNs();
    body(n, &sink);
    cpu[r] = (double)(cpuNs() - c0) / n;
    wall[r] = (double)(mscclppTimeNs() - w0) / n;
  }
  printf("%-34s %9.2f %9.2f\n", what, benchSortMedian(wall, ROUNDS), benchSortMedian(cpu, ROUNDS));
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 200000;
  if (n < 1) {
    fprintf(stderr, "usage: bench_trace [spans per round >= 1]\n");
    return 2;
  }
  const char* tmp = getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp";
  char path[512];
  snprintf(path, sizeof(path), "%s/bench_trace.%d.json", tmp, (int)getpid());
  printf("# %d spans per round, median of %d rounds, ns per span\n", n, ROUNDS);
  printf("%-34s %9s %9s\n", "#", "wall", "cpu");
  measure("clock read (mscclppTimeNs)", clockReads, n);
  measure("span, tracing off", spans, n);
  /* every event of the rounds is kept: room for all of them */
  if (mscclppTraceAcquire(path, (int64_t)n * (ROUNDS + 1) + 16) != mscclppSuccess) return 1;
  measure("trace clock read (mscclppTraceNow)", traceClockReads, n);
  measure("span, tracing on", spans, n);
  const uint64_t w0 = mscclppTimeNs();
  mscclppTraceRelease();
  printf("%-34s %9.2f ms\n", "writing the file (after the rounds)", (double)(mscclppTimeNs() - w0) / 1e6);
  unlink(path);
  return 0;
}
