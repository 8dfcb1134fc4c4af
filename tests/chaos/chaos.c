/* SPDX-License-Identifier: MIT */
/*
 * Chaos trials: ranks run checked collectives, one (or two) of them
 * SIGKILLs itself at a random moment, and the survivors carry on, on a
 * communicator shrunk with ABORT, for 100 more checked calls.
 *
 *   chaos      [--trials N] [--seed S] [--ranks 4,8] [--calls C] [--verbose]
 *   chaos_nccl [--gpu] [--window W] [--max-count N] [--mem-slack MIB] [same options]
 *
 * The same trials run through two APIs, each its own executable (chaos.h):
 * `chaos` through the mscclpp API on the host backend (CI), `chaos_nccl`
 * through the NCCL API of libmscclpp_nccl.so (ncclCommInitRank,
 * ncclAllReduce, ncclBroadcast, ncclAlltoAll, ncclSend/ncclRecv in a group,
 * ncclCommGetAsyncError, ncclCommShrink with NCCL_SHRINK_ABORT,
 * ncclCommDestroy) -- on the host backend, or with --gpu on the GPU: device
 * buffers, one stream per rank, a window of calls enqueued before the rank
 * waits for them, so that kernels are in flight when a rank dies, and the
 * failure seen through ncclCommGetAsyncError while waiting.
 *
 * One process is the driver; it forks the ranks of each trial (no exec:
 * the driver starts no thread and never touches the library or CUDA) and
 * plays what an elastic launcher or a store plays for a real job: it
 * relays unique ids, sees which ranks died (their pipes close), tells the
 * survivors whom to exclude, and whether every survivor's shrink worked
 * before they go on (a shrink is not atomic across ranks: a member lost
 * during it fails it on some and not on others, who then drop the new
 * communicator and shrink again). Ranks report on a pipe, one line each:
 *   P ok th | P fail why     its buffers (and GPU context) are ready; th: its threads
 *   U ok hex | U fail why    a unique id it made (it serves its rendezvous)
 *   I ok|fail why            the communicator was created (or not)
 *   K t phase busy op        the victim, just before it kills itself (t:
 *                            CLOCK_MONOTONIC; busy: its kernels were in flight)
 *   F t th inflight op: why  a call failed (the rank waits for orders)
 *   S ok|fail t th why       its shrink worked (or not), and when it returned
 *   R t                      its first call on a new communicator succeeded
 *   D th                     its calls on the communicator are done
 *   Y th ok names            every communicator destroyed: its threads, and
 *                            whether they are back to P's count
 *   W what                   a wrong result (the trial fails)
 * and read orders: U (make an id), N (a new communicator from an id),
 * S (shrink), C (commit: destroy the parent, run the calls), X (drop the
 * new communicator), Y (destroy everything), E (exit).
 *
 * Each trial is one of these scenarios, in turn (seed t picks the ranks,
 * the victims, the moment):
 *   coll     a rank dies inside a collective (a timer fires during the loop;
 *            with --gpu, every other such trial dies right after enqueuing
 *            a call instead, its kernels surely in flight)
 *   group    a rank dies inside a group of send/recv (before its GroupEnd)
 *   init     a rank dies while the communicator is created; survivors that
 *            got one shrink it, else all start again (N)
 *   rank0    rank 0 dies inside a collective
 *   twice    a second rank dies inside the calls on the shrunk communicator
 *   shrink   a second rank dies while the others shrink
 * The checked calls cycle allreduce, broadcast, all-to-all and a group of
 * send/recv (ring both ways); every value depends on the member's original
 * rank, the communicator's generation and the call, so a stale or wrong
 * membership shows; outputs are poisoned before each call. The run fails on
 * a wrong result, a rank that did not report within HANG_SECONDS (a hang),
 * a survivor that exits badly, a shrink that fails without a new death, or
 * resources not given back: a survivor whose thread count (CUDA's own
 * threads aside) is not back to what it was before its first communicator
 * once every communicator is destroyed, and with --gpu device memory
 * (cudaMemGetInfo in an observer process, read while every rank waits for
 * orders) that does not come back to the trial's start (after a warm-up
 * communicator: warmUp says why), less the dead ranks' contexts and
 * buffers, within --mem-slack. It prints each trial's
 * seed, and the time from each kill to the first call that succeeded on
 * every survivor of the new communicator (the observer's pauses left out):
 * median and worst per rank count.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "chaos.h"

#define MAX_RANKS 8
#define HANG_SECONDS 25.0
#define MAX_ATTEMPTS 4
#define MAX_TRIALS 1024

enum scenario { SC_COLL, SC_GROUP, SC_INIT, SC_RANK0, SC_TWICE, SC_SHRINK, SC_COUNT };
static const char* const scenarioNames[SC_COUNT] = {"coll", "group", "init", "rank0", "twice", "shrink"};

/* Set by main before any fork: the same in the driver and in every rank. */
static const struct chaosApi* api = &chaosApi;
static int gpu;              /* --gpu: device buffers and kernels */
static int window = 1;       /* calls enqueued before a wait */
static size_t maxCount = 2048;

static double nowSec(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void sleepUs(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* ---- a trial's plan (the same in the driver and in every rank: forked) ---------- */

struct plan {
  uint64_t seed;
  enum scenario sc;
  int n;
  int victim1;      /* original rank */
  int killIter1;    /* coll, group, rank0, twice, shrink: the iteration at which it arms */
  long delayUs1;    /* coll, rank0, twice, shrink: after arming; init: after the start of creation */
  int inflight1;    /* coll with --gpu: die right after enqueuing call killIter1 */
  int victim2;      /* twice, shrink: original rank, or -1 */
  int killIter2;    /* twice: iteration on the shrunk communicator */
  long delayUs2;    /* twice: after arming; shrink: after the shrink order arrived */
  double timeout;   /* MSCCLPP_TIMEOUT of the ranks */
};

static struct plan makePlan(uint64_t seed, int trial, const int* sizes, int nsizes) {
  struct plan p;
  memset(&p, 0, sizeof(p));
  uint64_t r = mix(seed);
  p.seed = seed;
  p.sc = (enum scenario)(trial % SC_COUNT);
  p.n = sizes[(trial / SC_COUNT + (int)(r % 2)) % nsizes];
  r = mix(r);
  p.victim1 = p.sc == SC_RANK0 ? 0 : (int)(r % (uint64_t)p.n);
  r = mix(r);
  p.killIter1 = 2 + (int)(r % 20);
  r = mix(r);
  p.delayUs1 = p.sc == SC_INIT ? (long)(r % 15000) : (long)(r % 3000);
  p.victim2 = -1;
  if (p.sc == SC_TWICE || p.sc == SC_SHRINK) {
    r = mix(r);
    p.victim2 = (int)(r % (uint64_t)(p.n - 1));
    if (p.victim2 >= p.victim1) p.victim2++;
    r = mix(r);
    p.killIter2 = 1 + (int)(r % 60);
    r = mix(r);
    p.delayUs2 = p.sc == SC_SHRINK ? (long)(r % 4000) : (long)(r % 3000);
  }
  /* (drawn last: the host trials' plans stay those of earlier versions) */
  p.inflight1 = gpu && p.sc == SC_COLL && (mix(seed ^ 0x1f1f1f1full) & 1);
  /* a rank killed before it reaches the root is only noticed at the
   * timeout, so creation is given a short one */
  p.timeout = p.sc == SC_INIT ? 4.0 : 15.0;
  return p;
}

/* ---- threads ----------------------------------------------------------------------- */

/* This process's threads other than CUDA's own (named "cuda..."): the
 * library's, the application's. names, if not NULL, gets their names. */
/* ThreadSanitizer starts one background thread of its own, lazily (after
 * the baseline is taken), named like the process: allowed on top of the
 * baseline in TSan builds. */
#if defined(__SANITIZE_THREAD__)
#define SANITIZER_THREADS 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SANITIZER_THREADS 1
#endif
#endif
#ifndef SANITIZER_THREADS
#define SANITIZER_THREADS 0
#endif

static int countThreads(char* names, size_t len) {
  DIR* d = opendir("/proc/self/task");
  if (d == NULL) return -1;
  int n = 0;
  size_t at = 0;
  if (names != NULL && len > 0) names[0] = '\0';
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char path[300], comm[64] = "";
    snprintf(path, sizeof(path), "/proc/self/task/%.200s/comm", e->d_name);
    FILE* f = fopen(path, "r");
    if (f != NULL) {
      if (fgets(comm, sizeof(comm), f) == NULL) comm[0] = '\0';
      fclose(f);
    }
    comm[strcspn(comm, "\n")] = '\0';
    if (strncmp(comm, "cuda", 4) == 0) continue;
    n++;
    if (names != NULL && at + strlen(comm) + 2 < len) at += (size_t)snprintf(names + at, len - at, "%s,", comm);
  }
  closedir(d);
  return n;
}

/* ---- a rank -------------------------------------------------------------------------- */

static struct plan plan;
static int me;          /* original rank */
static int repFd = -1;  /* reports to the driver */
static FILE* cmdIn;     /* orders from the driver */
static int baseThreads; /* before the first communicator */
static const char* curOp = "start"; /* what the main thread is in, for the kill report; __atomic */
#define SET_OP(name) __atomic_store_n(&curOp, (name), __ATOMIC_RELAXED)
static int wrong;

static void report(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static void report(const char* fmt, ...) {
  char line[800];
  va_list ap;
  va_start(ap, fmt);
  int len = vsnprintf(line, sizeof(line) - 1, fmt, ap);
  va_end(ap);
  if (len < 0) return;
  if (len > (int)sizeof(line) - 2) len = (int)sizeof(line) - 2;
  for (int i = 0; i < len; i++)
    if (line[i] == '\n') line[i] = ' ';
  line[len++] = '\n';
  ssize_t ignored = write(repFd, line, (size_t)len); /* one write: whole lines on the pipe */
  (void)ignored;
}

static void die(const char* phase) {
  report("K %.6f %s %d %s", nowSec(), phase, api->busy(), __atomic_load_n(&curOp, __ATOMIC_RELAXED));
  raise(SIGKILL);
}

static void dieInGroup(void) { die("group"); }

struct timer {
  long delayUs;
  const char* phase;
};

static void* timerMain(void* arg) {
  struct timer* t = arg;
  sleepUs(t->delayUs);
  die(t->phase);
  return NULL;
}

static void armTimer(long delayUs, const char* phase) {
  static struct timer t;
  t.delayUs = delayUs;
  t.phase = phase;
  pthread_t th;
  pthread_create(&th, NULL, timerMain, &t);
  pthread_detach(th);
}

/* The value member `who` (an original rank, or a tag built from one)
 * contributes at element i of call `it` on communicator generation `gen`:
 * small, so that sums of 8 fit. */
static int32_t val(int gen, int it, int who, size_t i) {
  return (int32_t)((mix(plan.seed ^ ((uint64_t)gen << 40) ^ ((uint64_t)it << 20) ^ (uint64_t)who) + i * 7) & 0xffff);
}

/* Up to `max` elements: uniform at the host backend's sizes, else spread
 * over the powers of two (small and large calls take different paths). */
static size_t countOf(int gen, int it, size_t max) {
  uint64_t h = mix(plan.seed * 31 + (uint64_t)gen * 7919 + (uint64_t)it);
  if (max <= 2048) return 1 + (size_t)(h % max);
  int bits = 0;
  while (((size_t)2 << bits) <= max) bits++;
  size_t top = (size_t)1 << (1 + h % (uint64_t)bits);
  size_t c = 1 + (size_t)(mix(h) % top);
  return c < max ? c : max;
}

struct world {
  void* comm;
  int gen;
  int m;
  int orig[MAX_RANKS]; /* original rank of each member, by new rank */
  int rank;            /* this rank in it */
};

static void checkEq(const char* what, int it, size_t i, int32_t got, int32_t want) {
  if (got == want) return;
  if (wrong++ < 3) report("W %s call %d element %zu: %d, expected %d", what, it, i, got, want);
}

/* Call `it` (allreduce, broadcast, all-to-all, group, by it % 4) of w,
 * its buffers in `slot`: the call it makes. */
static struct chaosCall describe(const struct world* w, int it, int slot) {
  struct chaosCall c = {(enum chaosOp)(it % 4), slot, 0, w->m, 0, (w->rank + 1) % w->m, (w->rank + w->m - 1) % w->m};
  c.count = countOf(w->gen, it, c.op == CHAOS_ALLTOALL ? maxCount / MAX_RANKS : maxCount);
  c.root = it / 4 % w->m;
  return c;
}

static int issue(const struct world* w, int it, int slot, int killInGroup, char* why, size_t len) {
  const struct chaosCall c = describe(w, it, slot);
  const int r = w->rank, gen = w->gen;
  int32_t* a = api->host(slot, CHAOS_A);
  int32_t* cc = api->host(slot, CHAOS_C);
  int32_t* b = api->host(slot, CHAOS_B);
  static const char* const names[] = {"allreduce", "broadcast", "alltoall", "group"};
  switch (c.op) {
    case CHAOS_ALLREDUCE:
      for (size_t i = 0; i < c.count; i++) a[i] = val(gen, it, w->orig[r], i);
      break;
    case CHAOS_BROADCAST:
      for (size_t i = 0; i < c.count; i++) a[i] = r == c.root ? val(gen, it, w->orig[c.root], i) : -1;
      break;
    case CHAOS_ALLTOALL:
      for (int q = 0; q < c.m; q++)
        for (size_t i = 0; i < c.count; i++) a[(size_t)q * c.count + i] = val(gen, it, w->orig[r] * 64 + w->orig[q], i);
      break;
    case CHAOS_SENDRECV:
      for (size_t i = 0; i < c.count; i++) {
        a[i] = val(gen, it, 1000 + w->orig[r], i);
        cc[i] = val(gen, it, 2000 + w->orig[r], i);
      }
      break;
  }
  /* the outputs poisoned: no expected value is negative */
  size_t out = c.op == CHAOS_ALLTOALL ? (size_t)c.m * c.count : c.op == CHAOS_BROADCAST ? 0 : c.count;
  for (size_t i = 0; i < out; i++) b[i] = (int32_t)0xa5a5a5a5u;
  if (c.op == CHAOS_SENDRECV)
    for (size_t i = 0; i < c.count; i++) b[maxCount + i] = (int32_t)0xa5a5a5a5u;
  SET_OP(names[c.op]);
  int rc = api->call(w->comm, &c, killInGroup ? dieInGroup : NULL, why, len);
  SET_OP("between");
  return rc;
}

static void check(const struct world* w, int it, int slot) {
  const struct chaosCall c = describe(w, it, slot);
  const int m = w->m, r = w->rank, gen = w->gen;
  const int32_t* a = api->host(slot, CHAOS_A);
  const int32_t* b = api->host(slot, CHAOS_B);
  switch (c.op) {
    case CHAOS_ALLREDUCE:
      for (size_t i = 0; i < c.count; i++) {
        int32_t want = 0;
        for (int q = 0; q < m; q++) want += val(gen, it, w->orig[q], i);
        checkEq("allreduce", it, i, b[i], want);
      }
      break;
    case CHAOS_BROADCAST:
      for (size_t i = 0; i < c.count; i++) checkEq("broadcast", it, i, a[i], val(gen, it, w->orig[c.root], i));
      break;
    case CHAOS_ALLTOALL:
      for (int q = 0; q < m; q++)
        for (size_t i = 0; i < c.count; i++)
          checkEq("alltoall", it, (size_t)q * c.count + i, b[(size_t)q * c.count + i],
                  val(gen, it, w->orig[q] * 64 + w->orig[r], i));
      break;
    case CHAOS_SENDRECV:
      for (size_t i = 0; i < c.count; i++) {
        checkEq("recv from prev", it, i, b[i], val(gen, it, 1000 + w->orig[c.prev], i));
        checkEq("recv from next", it, i, b[maxCount + i], val(gen, it, 2000 + w->orig[c.next], i));
      }
      break;
  }
}

/* Calls on w, a window at a time, until one fails (reported F) or `calls`
 * are done (D). The first success on a new communicator is reported (R).
 * The victim arms its kill at call armIter: a timer (armPhase), its death
 * inside the group (groupKill: at the first group from there), or right
 * after enqueuing it (inflight). */
static void runCalls(struct world* w, int calls, int armIter, long armDelayUs, const char* armPhase, int groupKill,
                     int inflight) {
  char why[600];
  for (int it = 0; calls < 0 || it < calls;) {
    int batch = it == 0 ? 1 : window;
    if (calls >= 0 && batch > calls - it) batch = calls - it;
    int rc = 0, inFlight = 0;
    for (int j = 0; j < batch && rc == 0; j++) {
      int k = it + j;
      if (k == armIter && armPhase != NULL) {
        if (groupKill && k % 4 != 3)
          armIter++; /* wait for a group */
        else if (!groupKill && !inflight)
          armTimer(armDelayUs, armPhase);
      }
      rc = issue(w, k, j, groupKill && armPhase != NULL && k == armIter, why, sizeof(why));
      if (inflight && armPhase != NULL && k == armIter) die("inflight");
    }
    if (rc == 0) {
      SET_OP("wait");
      rc = api->wait(w->comm, HANG_SECONDS - 5, &inFlight, why, sizeof(why));
      SET_OP("between");
    }
    if (rc != 0) {
      report("F %.6f %d %d %s: %s", nowSec(), countThreads(NULL, 0), inFlight, __atomic_load_n(&curOp, __ATOMIC_RELAXED),
             why);
      return;
    }
    for (int j = 0; j < batch; j++) check(w, it + j, j);
    if (it == 0) report("R %.6f", nowSec());
    it += batch;
  }
  report("D %d", countThreads(NULL, 0));
}

/* "m o0 o1 ...": the members' original ranks, into w (this rank's index). */
static int readMembers(char** p, struct world* w) {
  w->m = (int)strtol(*p, p, 10);
  w->rank = -1;
  for (int i = 0; i < w->m && i < MAX_RANKS; i++) {
    w->orig[i] = (int)strtol(*p, p, 10);
    if (w->orig[i] == me) w->rank = i;
  }
  return w->m > 0 && w->m <= MAX_RANKS && w->rank >= 0 ? 0 : -1;
}

/* Destroy both communicators; 0 if both went well. */
static int destroyAll(struct world* cur, struct world* next) {
  char why[600];
  int bad = 0;
  if (next->comm != NULL && api->destroy(next->comm, why, sizeof(why)) != 0) bad = 1;
  if (cur->comm != NULL && api->destroy(cur->comm, why, sizeof(why)) != 0) bad = 1;
  next->comm = cur->comm = NULL;
  return bad;
}

static int rankMain(int rank) {
  me = rank;
  if (!gpu) setenv("CUDA_VISIBLE_DEVICES", "", 1);
  setenv("CUDA_MODULE_LOADING", "EAGER", 1); /* kernels loaded with the context: not counted as a leak later */
  char t[32];
  snprintf(t, sizeof(t), "%g", plan.timeout);
  setenv("MSCCLPP_TIMEOUT", t, 1);
  char why[600];
  if (api->setup(gpu ? rank : -1, window, maxCount, why, sizeof(why)) != 0) {
    report("P fail %s", why);
    return 3;
  }
  baseThreads = countThreads(NULL, 0);
  report("P ok %d", baseThreads);
  struct world cur = {NULL, 0, 0, {0}, 0}, next = {NULL, 0, 0, {0}, 0};
  int shrinks = 0, destroyFailed = 0;
  char line[1024];
  while (fgets(line, sizeof(line), cmdIn) != NULL) {
    char* p = line + 1;
    int calls = 0, gen = 0, rc = 0;
    switch (line[0]) {
      case 'U': { /* a unique id, its rendezvous served here */
        char hex[CHAOS_ID_CHARS];
        if (api->uniqueId(hex, why, sizeof(why)) != 0)
          report("U fail %s", why);
        else
          report("U ok %s", hex);
        break;
      }
      case 'N': { /* N gen calls id m o0 ...: a new communicator */
        gen = (int)strtol(p, &p, 10);
        calls = (int)strtol(p, &p, 10);
        char id[CHAOS_ID_CHARS];
        int used = 0;
        if (sscanf(p, " %299s%n", id, &used) != 1) return 3;
        p += used;
        destroyFailed |= destroyAll(&cur, &next);
        if (readMembers(&p, &cur) != 0) return 3;
        cur.gen = gen;
        if (gen == 0 && plan.sc == SC_INIT && rank == plan.victim1) armTimer(plan.delayUs1, "init");
        SET_OP("init");
        rc = api->init(id, cur.m, cur.rank, &cur.comm, why, sizeof(why));
        SET_OP("between");
        report("I %s %s", rc == 0 ? "ok" : "fail", rc == 0 ? "" : why);
        if (rc != 0) {
          cur.comm = NULL;
          break;
        }
        if (gen == 0 && rank == plan.victim1 && plan.sc != SC_INIT)
          runCalls(&cur, calls, plan.killIter1, plan.delayUs1, plan.sc == SC_GROUP ? "group" : "coll",
                   plan.sc == SC_GROUP, plan.inflight1);
        else
          runCalls(&cur, calls, -1, 0, NULL, 0, 0);
        break;
      }
      case 'S': { /* S calls m o0 o1 ... k e0 e1 ...: shrink cur without e* */
        calls = (int)strtol(p, &p, 10);
        (void)calls;
        if (readMembers(&p, &next) != 0) return 3;
        int k = (int)strtol(p, &p, 10), ex[MAX_RANKS];
        for (int i = 0; i < k && i < MAX_RANKS; i++) ex[i] = (int)strtol(p, &p, 10);
        if (plan.sc == SC_SHRINK && rank == plan.victim2 && shrinks == 0) armTimer(plan.delayUs2, "shrink");
        shrinks++;
        next.comm = NULL;
        SET_OP("shrink");
        rc = api->shrink(cur.comm, ex, k, &next.comm, why, sizeof(why));
        SET_OP("between");
        if (rc != 0) next.comm = NULL;
        report("S %s %.6f %d %s", rc == 0 ? "ok" : "fail", nowSec(), countThreads(NULL, 0), rc == 0 ? "" : why);
        break;
      }
      case 'X': /* the shrink failed somewhere: drop what this one made */
        if (next.comm != NULL && api->destroy(next.comm, why, sizeof(why)) != 0) destroyFailed = 1;
        next.comm = NULL;
        break;
      case 'C': { /* C gen calls: go on on the shrunk communicator */
        gen = (int)strtol(p, &p, 10);
        calls = (int)strtol(p, &p, 10);
        if (api->destroy(cur.comm, why, sizeof(why)) != 0) destroyFailed = 1;
        cur = next;
        cur.gen = gen;
        next.comm = NULL;
        int second = plan.sc == SC_TWICE && rank == plan.victim2 && gen == 1;
        runCalls(&cur, calls, second ? plan.killIter2 : -1, plan.delayUs2, second ? "twice" : NULL, 0, 0);
        break;
      }
      case 'Y': { /* destroy everything; the threads must go (a detached
                   * rendezvous of a failed creation ends within the timeout) */
        destroyFailed |= destroyAll(&cur, &next);
        double until = nowSec() + plan.timeout + 2;
        int th = countThreads(NULL, 0);
        while (th > baseThreads + SANITIZER_THREADS && nowSec() < until) {
          sleepUs(1000);
          th = countThreads(NULL, 0);
        }
        char names[400];
        countThreads(names, sizeof(names));
        report("Y %d %d %s", th, th <= baseThreads + SANITIZER_THREADS && !destroyFailed, names);
        break;
      }
      case 'E':
        destroyFailed |= destroyAll(&cur, &next);
        api->teardown();
        return wrong == 0 && !destroyFailed ? 0 : 1;
      default:
        return 3;
    }
  }
  return 4; /* the driver went away */
}

/* ---- the observer (--gpu): device memory, read by a process of its own -------------- */

static pid_t obsPid = -1;
static int obsCmd = -1, obsRep = -1;

/* Free device memory, once it is steady (a dead process's memory is given
 * back by the driver or the MPS server a little after its death). */
static int observerMain(int cmd, int rep) {
  char c;
  while (read(cmd, &c, 1) == 1) {
    if (c != 'M') break;
    char why[300] = "", line[400];
    size_t freeB = 0, total = 0, last = (size_t)-1;
    int rc = 0;
    for (int i = 0; i < 60; i++) {
      rc = api->deviceMemory(&freeB, &total, why, sizeof(why));
      if (rc != 0 || freeB == last) break;
      last = freeB;
      sleepUs(5000);
    }
    int len = rc == 0 ? snprintf(line, sizeof(line), "%zu %zu\n", freeB, total)
                      : snprintf(line, sizeof(line), "fail %s\n", why);
    if (write(rep, line, (size_t)len) != len) break;
  }
  return 0;
}

static int observerStart(char* why, size_t len) {
  int cp[2], rp[2];
  if (pipe(cp) != 0 || pipe(rp) != 0) {
    snprintf(why, len, "pipe: %s", strerror(errno));
    return -1;
  }
  pid_t pid = fork();
  if (pid == 0) {
    close(cp[1]);
    close(rp[0]);
    exit(observerMain(cp[0], rp[1]));
  }
  close(cp[0]);
  close(rp[1]);
  obsPid = pid;
  obsCmd = cp[1];
  obsRep = rp[0];
  fcntl(obsCmd, F_SETFD, FD_CLOEXEC);
  fcntl(obsRep, F_SETFD, FD_CLOEXEC);
  return 0;
}

/* Free device memory in MiB, or -1 (why). */
static double observe(char* why, size_t len) {
  if (write(obsCmd, "M", 1) != 1) {
    snprintf(why, len, "the observer is gone");
    return -1;
  }
  char line[400];
  size_t at = 0;
  double until = nowSec() + 10;
  while (at < sizeof(line) - 1 && (at == 0 || line[at - 1] != '\n')) {
    struct pollfd pf = {obsRep, POLLIN, 0};
    int left = (int)((until - nowSec()) * 1000);
    if (left <= 0 || poll(&pf, 1, left) <= 0) {
      snprintf(why, len, "the observer did not answer within 10 s");
      return -1;
    }
    ssize_t got = read(obsRep, line + at, 1);
    if (got <= 0) {
      snprintf(why, len, "the observer is gone");
      return -1;
    }
    at++;
  }
  line[at] = '\0';
  line[strcspn(line, "\n")] = '\0';
  if (strncmp(line, "fail", 4) == 0) {
    snprintf(why, len, "cudaMemGetInfo: %.*s", (int)(len > 20 ? len - 20 : 0), line + 5);
    return -1;
  }
  return (double)strtoull(line, NULL, 10) / (1024.0 * 1024.0);
}

static void observerStop(void) {
  if (obsPid < 0) return;
  close(obsCmd);
  close(obsRep);
  waitpid(obsPid, NULL, 0);
  obsPid = -1;
}

/* ---- the driver ------------------------------------------------------------------------ */

enum { ST_BUSY, ST_WAIT, ST_DONE, ST_DEAD };

struct child {
  pid_t pid;
  int rep, cmd; /* read reports / write orders */
  int state;    /* ST_* */
  int hasComm;  /* a communicator it can shrink */
  int shrinkOk;
  int yOk;      /* Y: its threads are back, its destroys worked */
  int threads[4]; /* at P (before any communicator), F (with the parent), D (the shrunk one only), Y (none) */
  double failedAt; /* F: its call failed */
  double shrunkAt; /* S: its shrink returned */
  double firstOk;  /* R of the current communicator */
  char id[CHAOS_ID_CHARS]; /* U */
  char buf[4096];
  size_t len;
  char last[800]; /* its last report */
};

struct trialResult {
  int ok, hang, wrongs, spurious;
  int bad; /* a rank's setup or a measurement failed (why says which) */
  double recovery[2]; /* kill -> every survivor's first success, per kill; -1 if not measured */
  double phase[3];    /* the first kill, recovered by one shrink: kill -> last survivor's failed call,
                       * -> last shrink returned, -> last first success; -1 if not measured */
  const char* how[2];
  int kills, victimBusy;       /* kills reported, and how many with the victim's kernels in flight */
  int failedWaits, failsInFlight; /* survivors' failed waits, and how many with kernels in flight */
  int survivors, threadsBack;  /* survivors at the end, and those whose threads came back */
  int parentThreads, childThreads; /* of the first survivor: threads of a communicator (P -> F, P -> D) */
  double memResidue, memParent, memChild; /* MiB: left after all destroys; freed per survivor by the
                                           * parent's destroy, by the child's; NAN if not measured */
  char why[800];
};

static struct child kids[MAX_RANKS];
static int verbose;
static double memSlack = 8;

static void order(struct child* k, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static void order(struct child* k, const char* fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  int len = vsnprintf(line, sizeof(line) - 1, fmt, ap);
  va_end(ap);
  line[len++] = '\n';
  ssize_t ignored = write(k->cmd, line, (size_t)len);
  (void)ignored;
}

struct deaths {
  double killedAt[2];
  int nkills;
};

/* The observer's pauses of a trial (all ranks idle meanwhile): left out of
 * the recovery times. */
struct pauses {
  double at[16], took[16];
  int n;
};

static double pausedBetween(const struct pauses* ps, double from, double to) {
  double s = 0;
  for (int i = 0; i < ps->n; i++)
    if (ps->at[i] >= from && ps->at[i] < to) s += ps->took[i];
  return s;
}

/* One report line of rank i. */
static void onLine(int i, char* line, struct deaths* d, struct trialResult* tr) {
  struct child* k = &kids[i];
  snprintf(k->last, sizeof(k->last), "%s", line);
  if (verbose) printf("    [%d] %s\n", i, line);
  char* p = line + 2;
  switch (line[0]) {
    case 'P':
      k->state = ST_WAIT;
      if (strncmp(line, "P ok", 4) == 0) {
        k->threads[0] = (int)strtol(line + 5, NULL, 10);
      } else if (!tr->bad) {
        tr->bad = 1;
        snprintf(tr->why, sizeof(tr->why), "rank %d: %.700s", i, line);
      }
      break;
    case 'U':
      k->state = ST_WAIT;
      k->id[0] = '\0';
      if (strncmp(line, "U ok ", 5) == 0) snprintf(k->id, sizeof(k->id), "%.*s", (int)sizeof(k->id) - 1, line + 5);
      break;
    case 'I':
      k->hasComm = strncmp(line, "I ok", 4) == 0;
      if (!k->hasComm) k->state = ST_WAIT;
      break;
    case 'K': {
      double t = strtod(p, &p);
      if (d->nkills < 2) d->killedAt[d->nkills] = t;
      d->nkills++;
      strtok(p, " "); /* the phase */
      char* busy = strtok(NULL, " ");
      tr->kills++;
      tr->victimBusy += busy != NULL && atoi(busy) == 1;
      break;
    }
    case 'F':
      k->failedAt = strtod(p, &p);
      k->threads[1] = (int)strtol(p, &p, 10);
      tr->failedWaits++;
      tr->failsInFlight += (int)strtol(p, &p, 10) == 1;
      k->state = ST_WAIT;
      break;
    case 'S':
      k->shrinkOk = strncmp(line, "S ok", 4) == 0;
      k->shrunkAt = strtod(line + (k->shrinkOk ? 5 : 7), NULL);
      k->state = ST_WAIT;
      break;
    case 'R':
      k->firstOk = strtod(p, NULL);
      break;
    case 'D':
      k->threads[2] = (int)strtol(p, NULL, 10);
      k->state = ST_DONE;
      break;
    case 'Y':
      k->threads[3] = (int)strtol(p, &p, 10);
      k->yOk = (int)strtol(p, &p, 10) == 1;
      k->state = ST_WAIT;
      break;
    case 'W':
      tr->wrongs++;
      snprintf(tr->why, sizeof(tr->why), "rank %d: wrong result: %.700s", i, line + 2);
      break;
    default:
      break;
  }
}

/* A member whose own shrink had succeeded may die (the shrink scenario's
 * second victim) before a peer's shrink ends, which then fails for that
 * death; its pipe's end can reach the driver after every report. Before a
 * failed shrink is called spurious, the members' pipes are watched for
 * that end (POLLHUP: nothing is read, the live ones wait for orders) for
 * up to ms milliseconds. 1 when a member died. */
#define LATE_DEATH_MS 2000
static int lateDeath(const int* members, int nm, int ms) {
  double deadline = nowSec() + ms / 1000.0;
  for (;;) {
    struct pollfd pf[MAX_RANKS];
    int idx[MAX_RANKS], np = 0;
    for (int i = 0; i < nm; i++) {
      if (kids[members[i]].state == ST_DEAD) return 1;
      pf[np].fd = kids[members[i]].rep;
      pf[np].events = 0; /* POLLHUP and POLLERR are reported anyway */
      idx[np++] = members[i];
    }
    int left = (int)((deadline - nowSec()) * 1000);
    if (left <= 0) return 0;
    if (poll(pf, (nfds_t)np, left) < 0 && errno != EINTR) return 0;
    for (int j = 0; j < np; j++)
      if (pf[j].revents & (POLLHUP | POLLERR)) {
        kids[idx[j]].state = ST_DEAD;
        kids[idx[j]].hasComm = 0;
      }
  }
}

/* Read reports until no rank is busy (each waits for orders, is done or
 * is dead); 0, or -1 on a hang. */
static int settle(int n, struct deaths* d, struct trialResult* tr) {
  double deadline = nowSec() + HANG_SECONDS;
  for (;;) {
    int busy = 0;
    struct pollfd pf[MAX_RANKS];
    int idx[MAX_RANKS], np = 0;
    for (int i = 0; i < n; i++) {
      if (kids[i].state == ST_DEAD) continue;
      if (kids[i].state == ST_BUSY) busy = 1;
      pf[np].fd = kids[i].rep;
      pf[np].events = POLLIN;
      idx[np++] = i;
    }
    if (!busy) return 0;
    int left = (int)((deadline - nowSec()) * 1000);
    if (left <= 0) return -1;
    if (poll(pf, (nfds_t)np, left) < 0 && errno != EINTR) return -1;
    for (int j = 0; j < np; j++) {
      if (!(pf[j].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      struct child* k = &kids[idx[j]];
      ssize_t got = read(k->rep, k->buf + k->len, sizeof(k->buf) - 1 - k->len);
      if (got <= 0) { /* it exited: a victim, or a crash (checked at the end) */
        k->state = ST_DEAD;
        k->hasComm = 0;
        continue;
      }
      k->len += (size_t)got;
      char* nl;
      while ((nl = memchr(k->buf, '\n', k->len)) != NULL) {
        *nl = '\0';
        char line[sizeof(k->last)];
        snprintf(line, sizeof(line), "%s", k->buf);
        onLine(idx[j], line, d, tr);
        size_t used = (size_t)(nl - k->buf) + 1;
        memmove(k->buf, nl + 1, k->len - used);
        k->len -= used;
      }
    }
  }
}

static int isVictim(const struct plan* p, int i) { return i == p->victim1 || i == p->victim2; }

/* Free device memory (MiB) while every rank waits: NAN without --gpu or on
 * failure (why in tr), the pause recorded. */
static double measure(struct pauses* ps, struct trialResult* tr) {
  if (!gpu) return NAN;
  double t0 = nowSec();
  char why[400];
  double f = observe(why, sizeof(why));
  if (ps->n < 16) {
    ps->at[ps->n] = t0;
    ps->took[ps->n++] = nowSec() - t0;
  }
  if (f < 0) {
    if (!tr->bad) snprintf(tr->why, sizeof(tr->why), "device memory: %s", why);
    tr->bad = 1;
    return NAN;
  }
  return f;
}

/* A new communicator of `members` (original ranks): the first makes a
 * unique id, every member gets it with N. 0, or -1 (why in tr). */
static int create(const int* members, int m, int gen, int calls, struct deaths* d, struct trialResult* tr) {
  struct child* k0 = &kids[members[0]];
  k0->state = ST_BUSY;
  order(k0, "U");
  if (settle(MAX_RANKS, d, tr) != 0 || k0->state == ST_DEAD || k0->id[0] == '\0') {
    snprintf(tr->why, sizeof(tr->why), "rank %d made no unique id: %.700s", members[0], k0->last);
    return -1;
  }
  char list[128];
  size_t at = 0;
  for (int i = 0; i < m; i++) at += (size_t)snprintf(list + at, sizeof(list) - at, " %d", members[i]);
  char id[CHAOS_ID_CHARS];
  snprintf(id, sizeof(id), "%s", k0->id);
  for (int i = 0; i < m; i++) {
    kids[members[i]].state = ST_BUSY;
    order(&kids[members[i]], "N %d %d %s %d%s", gen, calls, id, m, list);
  }
  return 0;
}

/* With --gpu, a communicator of every rank runs WARM_CALLS checked calls and
 * is destroyed before the trial's baseline of device memory is read. What a
 * process keeps once its first communicator is gone is the process's, not a
 * leak of the trial's communicators: on the H200 each rank kept 10 MiB
 * whether it had held one, two or three communicators (not yet traced to
 * its owner; most likely the driver's per-context reservation made at a
 * kernel's first launch). The trial's own communicators are all measured
 * against it, so a leak per communicator still shows. */
#define WARM_GEN 1000
#define WARM_CALLS 8
static int warmUp(int n, struct deaths* d, struct trialResult* tr) {
  int members[MAX_RANKS];
  for (int i = 0; i < n; i++) members[i] = i;
  if (create(members, n, WARM_GEN, WARM_CALLS, d, tr) != 0) return -1;
  if (settle(n, d, tr) != 0) {
    snprintf(tr->why, sizeof(tr->why), "the warm-up communicator's calls did not end within %g s", HANG_SECONDS);
    return -1;
  }
  for (int i = 0; i < n; i++)
    if (kids[i].state != ST_DONE) {
      snprintf(tr->why, sizeof(tr->why), "rank %d: the warm-up communicator failed: %.700s", i, kids[i].last);
      return -1;
    }
  for (int i = 0; i < n; i++) {
    kids[i].state = ST_BUSY;
    order(&kids[i], "Y");
  }
  if (settle(n, d, tr) != 0) {
    snprintf(tr->why, sizeof(tr->why), "destroying the warm-up communicator did not end within %g s", HANG_SECONDS);
    return -1;
  }
  for (int i = 0; i < n; i++) {
    if (kids[i].state == ST_DEAD || !kids[i].yOk) {
      snprintf(tr->why, sizeof(tr->why), "rank %d: after the warm-up communicator: %.700s", i, kids[i].last);
      return -1;
    }
    kids[i].hasComm = kids[i].yOk = 0;
    kids[i].firstOk = kids[i].failedAt = 0;
    kids[i].threads[1] = kids[i].threads[2] = kids[i].threads[3] = 0;
  }
  return 0;
}

static void runTrial(const struct plan* p, int calls, struct trialResult* tr) {
  memset(tr, 0, sizeof(*tr));
  tr->recovery[0] = tr->recovery[1] = -1;
  tr->phase[0] = tr->phase[1] = tr->phase[2] = -1;
  tr->memResidue = tr->memParent = tr->memChild = NAN;
  double lastFailed = 0, lastShrunk = 0;
  double memEmpty = NAN, memBase = NAN, memS = NAN, memD = NAN, memE = NAN;
  struct pauses ps;
  memset(&ps, 0, sizeof(ps));
  int n = p->n;
  for (int i = 0; i < MAX_RANKS; i++) kids[i].state = ST_DEAD; /* settle(MAX_RANKS) skips the unused */
  memEmpty = measure(&ps, tr);
  fflush(stdout);
  for (int i = 0; i < n; i++) {
    int rp[2], cp[2];
    if (pipe(rp) != 0 || pipe(cp) != 0) {
      snprintf(tr->why, sizeof(tr->why), "pipe: %s", strerror(errno));
      return;
    }
    pid_t pid = fork();
    if (pid == 0) {
      for (int j = 0; j < i; j++) {
        close(kids[j].rep);
        close(kids[j].cmd);
      }
      if (obsPid >= 0) {
        close(obsCmd);
        close(obsRep);
      }
      close(rp[0]);
      close(cp[1]);
      repFd = rp[1];
      cmdIn = fdopen(cp[0], "r");
      plan = *p;
      exit(rankMain(i)); /* exit, not _exit: LeakSanitizer checks each rank */
    }
    close(rp[1]);
    close(cp[0]);
    memset(&kids[i], 0, sizeof(kids[i]));
    kids[i].pid = pid;
    kids[i].rep = rp[0];
    kids[i].cmd = cp[1];
    kids[i].state = ST_BUSY;
    fcntl(kids[i].cmd, F_SETFD, FD_CLOEXEC);
    fcntl(kids[i].rep, F_SETFD, FD_CLOEXEC);
  }
  struct deaths d = {{0, 0}, 0};
  int members[MAX_RANKS], m = n, gen = 0, recovered = 0, attempts = 0, ready = 0;
  for (int i = 0; i < n; i++) members[i] = i;
  if (settle(n, &d, tr) != 0) {
    tr->hang = 1;
    snprintf(tr->why, sizeof(tr->why), "the ranks' setup did not end within %g s", HANG_SECONDS);
  } else if (!tr->bad && gpu && warmUp(n, &d, tr) != 0) {
    tr->bad = 1;
  } else if (!tr->bad) {
    memBase = measure(&ps, tr);
    ready = !tr->bad && create(members, n, 0, -1, &d, tr) == 0;
  }
  while (ready) {
    if (settle(n, &d, tr) != 0) {
      tr->hang = 1;
      int stuck = -1;
      for (int i = 0; i < n && stuck < 0; i++)
        if (kids[i].state == ST_BUSY) stuck = i;
      snprintf(tr->why, sizeof(tr->why), "rank %d reported nothing for %g s; its last report: %.600s", stuck,
               HANG_SECONDS, stuck >= 0 ? kids[stuck].last : "");
      break;
    }
    int alive = 0, done = 0, noComm = 0;
    for (int i = 0; i < m; i++) {
      struct child* k = &kids[members[i]];
      if (k->state == ST_DEAD) continue;
      alive++;
      done += k->state == ST_DONE;
      noComm += !k->hasComm;
    }
    /* every survivor's first success on the new communicator: the kills
     * before the earliest of them are recovered */
    if (gen > 0) {
      double first = 0, last = 0;
      int all = 1;
      for (int i = 0; i < m; i++) {
        struct child* k = &kids[members[i]];
        if (k->state == ST_DEAD) continue;
        if (k->firstOk == 0) all = 0;
        if (first == 0 || k->firstOk < first) first = k->firstOk;
        if (k->firstOk > last) last = k->firstOk;
      }
      if (all && recovered == 0 && d.nkills == 1 && d.killedAt[0] < first && lastShrunk > 0) {
        tr->phase[0] = lastFailed - d.killedAt[0];
        tr->phase[1] = lastShrunk - lastFailed;
        tr->phase[2] = last - lastShrunk - pausedBetween(&ps, lastShrunk, last);
      }
      for (; all && recovered < d.nkills && recovered < 2 && d.killedAt[recovered] < first; recovered++)
        tr->recovery[recovered] = last - d.killedAt[recovered] - pausedBetween(&ps, d.killedAt[recovered], last);
    }
    if (alive == 0) {
      snprintf(tr->why, sizeof(tr->why), "every rank died");
      break;
    }
    if (done == alive) {
      tr->ok = tr->wrongs == 0 && tr->spurious == 0 && !tr->bad;
      break;
    }
    for (int i = 0; i < n; i++) kids[i].firstOk = 0;
    /* the members still alive, in the current communicator's order */
    int next[MAX_RANKS], nn = 0, ex[MAX_RANKS], nex = 0;
    for (int i = 0; i < m; i++) {
      if (kids[members[i]].state == ST_DEAD)
        ex[nex++] = i;
      else
        next[nn++] = members[i];
    }
    if (noComm > 0) {
      /* creation failed somewhere: start again from scratch */
      tr->how[0] = tr->how[1] = "re-init";
      gen++;
      if (create(next, nn, gen, calls, &d, tr) != 0) break;
      memcpy(members, next, sizeof(next));
      m = nn;
      continue;
    }
    if (++attempts > MAX_ATTEMPTS) {
      snprintf(tr->why, sizeof(tr->why), "%d shrinks failed in a row; rank %d's last report: %.600s", MAX_ATTEMPTS,
               next[0], kids[next[0]].last);
      break;
    }
    if (nex == 0) {
      snprintf(tr->why, sizeof(tr->why), "a call failed but nobody died; rank %d's last report: %.600s", next[0],
               kids[next[0]].last);
      break;
    }
    lastFailed = 0;
    for (int i = 0; i < nn; i++)
      if (kids[next[i]].failedAt > lastFailed) lastFailed = kids[next[i]].failedAt;
    char list[256];
    size_t at = (size_t)snprintf(list, sizeof(list), "%d", nn);
    for (int i = 0; i < nn; i++) at += (size_t)snprintf(list + at, sizeof(list) - at, " %d", next[i]);
    at += (size_t)snprintf(list + at, sizeof(list) - at, " %d", nex);
    for (int i = 0; i < nex; i++) at += (size_t)snprintf(list + at, sizeof(list) - at, " %d", ex[i]);
    for (int i = 0; i < nn; i++) {
      kids[next[i]].state = ST_BUSY;
      kids[next[i]].shrinkOk = 0;
      order(&kids[next[i]], "S %d %s", calls, list);
    }
    if (settle(n, &d, tr) != 0) {
      tr->hang = 1;
      snprintf(tr->why, sizeof(tr->why), "a shrink did not end within %g s", HANG_SECONDS);
      break;
    }
    int allOk = 1, newDeath = 0;
    for (int i = 0; i < nn; i++) {
      if (kids[next[i]].state == ST_DEAD)
        newDeath = 1;
      else if (!kids[next[i]].shrinkOk)
        allOk = 0;
    }
    if (!allOk && !newDeath) newDeath = lateDeath(next, nn, LATE_DEATH_MS);
    if (!allOk || newDeath) {
      /* not every member has the new communicator: drop it everywhere and
       * shrink the same parent again without whoever died */
      for (int i = 0; i < nn; i++)
        if (kids[next[i]].state != ST_DEAD) order(&kids[next[i]], "X");
      if (!newDeath) {
        int bad = -1;
        for (int i = 0; i < nn && bad < 0; i++)
          if (kids[next[i]].state != ST_DEAD && !kids[next[i]].shrinkOk) bad = next[i];
        tr->spurious++;
        snprintf(tr->why, sizeof(tr->why), "a shrink failed on rank %d without a new death: %.600s", bad,
                 bad >= 0 ? kids[bad].last : "");
      }
      for (int i = 0; i < nn; i++)
        if (kids[next[i]].state != ST_DEAD) kids[next[i]].state = ST_WAIT;
      continue;
    }
    attempts = 0;
    lastShrunk = 0;
    for (int i = 0; i < nn; i++)
      if (kids[next[i]].shrunkAt > lastShrunk) lastShrunk = kids[next[i]].shrunkAt;
    memS = measure(&ps, tr); /* every survivor holds the parent and the shrunk one */
    gen++;
    tr->how[0] = tr->how[0] ? tr->how[0] : "shrink";
    tr->how[1] = "shrink";
    for (int i = 0; i < nn; i++) {
      kids[next[i]].state = ST_BUSY;
      order(&kids[next[i]], "C %d %d", gen, calls);
    }
    memcpy(members, next, sizeof(next));
    m = nn;
  }
  /* the end: every live rank destroys what it has (its threads must go
   * back to what it had before), then exits; victims were SIGKILLed */
  if (tr->ok) {
    memD = measure(&ps, tr); /* the survivors hold the shrunk communicator only */
    for (int i = 0; i < n; i++)
      if (kids[i].state != ST_DEAD) {
        kids[i].state = ST_BUSY;
        order(&kids[i], "Y");
      }
    if (settle(n, &d, tr) != 0) {
      tr->ok = 0;
      tr->hang = 1;
      snprintf(tr->why, sizeof(tr->why), "destroying the communicators did not end within %g s", HANG_SECONDS);
    }
    memE = measure(&ps, tr);
    for (int i = 0; i < n; i++) {
      if (kids[i].state == ST_DEAD) continue;
      tr->survivors++;
      tr->threadsBack += kids[i].yOk;
      if (tr->survivors == 1) { /* (no F report when its creation failed) */
        tr->parentThreads = kids[i].threads[1] > 0 ? kids[i].threads[1] - kids[i].threads[0] : -1;
        tr->childThreads = kids[i].threads[2] - kids[i].threads[0];
      }
      if (!kids[i].yOk && tr->ok > 0) {
        tr->ok = 0;
        snprintf(tr->why, sizeof(tr->why),
                 "rank %d: %d threads (or a failed destroy) after every communicator was destroyed, %d before the "
                 "first: %.600s",
                 i, kids[i].threads[3], kids[i].threads[0], kids[i].last);
      }
    }
    if (gpu && tr->survivors > 0) {
      double perRank = (memEmpty - memBase) / n; /* a rank's context and buffers */
      tr->memResidue = (memEmpty - tr->survivors * perRank) - memE;
      tr->memParent = (memD - memS) / tr->survivors;
      tr->memChild = (memE - memD) / tr->survivors;
      if (!(tr->memResidue <= memSlack) && tr->ok > 0) {
        tr->ok = 0;
        snprintf(tr->why, sizeof(tr->why),
                 "%.1f MiB of device memory not given back after every communicator was destroyed (free: %.1f MiB "
                 "before the ranks started, %.1f with them, %.1f at the end with %d of %d ranks; slack %.1f)",
                 tr->memResidue, memEmpty, memBase, memE, tr->survivors, n, memSlack);
      }
    }
    if (tr->bad) tr->ok = 0;
  }
  for (int i = 0; i < n; i++)
    if (kids[i].state != ST_DEAD) order(&kids[i], "E");
  for (int i = 0; i < n; i++) {
    if (tr->hang) kill(kids[i].pid, SIGKILL);
    int status = 0;
    double until = nowSec() + 20;
    while (waitpid(kids[i].pid, &status, WNOHANG) == 0) {
      if (nowSec() > until) {
        kill(kids[i].pid, SIGKILL);
        if (tr->ok) snprintf(tr->why, sizeof(tr->why), "rank %d did not exit", i);
        tr->ok = 0;
      }
      sleepUs(1000);
    }
    int killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
    if (!tr->hang && !(killed && isVictim(p, i)) && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      if (tr->ok)
        snprintf(tr->why, sizeof(tr->why), "rank %d ended with %s %d", i, WIFSIGNALED(status) ? "signal" : "status",
                 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
      tr->ok = 0;
    }
    close(kids[i].rep);
    close(kids[i].cmd);
  }
}

static int cmpDouble(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static double medianOf(double* v, int n) {
  qsort(v, (size_t)n, sizeof(double), cmpDouble);
  return v[n / 2];
}

static const char* const usage =
    "usage: %s [--trials N] [--seed S] [--ranks 4,8] [--calls C] [--verbose]\n"
    "          [--gpu] [--window W] [--max-count N] [--mem-slack MIB]   (--gpu: chaos_nccl only)\n";

int main(int argc, char** argv) {
  int trials = 24, calls = 100, windowSet = 0, countSet = 0;
  uint64_t seed = 1;
  int sizes[4] = {4, 8}, nsizes = 2, sizesSet = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--trials") == 0 && i + 1 < argc) {
      trials = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
      seed = strtoull(argv[++i], NULL, 0);
    } else if (strcmp(argv[i], "--calls") == 0 && i + 1 < argc) {
      calls = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--ranks") == 0 && i + 1 < argc) {
      nsizes = 0;
      sizesSet = 1;
      for (char* p = argv[++i]; *p && nsizes < 4; p += *p == ',') {
        sizes[nsizes] = (int)strtol(p, &p, 10);
        if (sizes[nsizes] < 3 || sizes[nsizes] > MAX_RANKS) {
          fprintf(stderr, "--ranks: 3..%d ranks\n", MAX_RANKS);
          return 2;
        }
        nsizes++;
      }
    } else if (strcmp(argv[i], "--gpu") == 0) {
      gpu = 1;
    } else if (strcmp(argv[i], "--window") == 0 && i + 1 < argc) {
      window = atoi(argv[++i]);
      windowSet = 1;
    } else if (strcmp(argv[i], "--max-count") == 0 && i + 1 < argc) {
      maxCount = strtoull(argv[++i], NULL, 0);
      countSet = 1;
    } else if (strcmp(argv[i], "--mem-slack") == 0 && i + 1 < argc) {
      memSlack = strtod(argv[++i], NULL);
    } else if (strcmp(argv[i], "--verbose") == 0) {
      verbose = 1;
    } else {
      fprintf(stderr, usage, argv[0]);
      return 2;
    }
  }
  if (gpu && api->deviceMemory == NULL) {
    fprintf(stderr, "%s: --gpu: the %s API runs on the host backend only here (use chaos_nccl)\n", argv[0], api->name);
    return 2;
  }
  /* on the GPU: four calls in flight at a time, up to 1 MiB each (the
   * packet, two-phase and zero-copy kernels), 4 ranks sharing the GPU */
  if (gpu && !windowSet) window = 4;
  if (gpu && !countSet) maxCount = 1 << 18;
  if (gpu && !sizesSet) {
    sizes[0] = 4;
    nsizes = 1;
  }
  if (window < 1 || window > 16 || maxCount < MAX_RANKS || maxCount > (1u << 26) || trials > MAX_TRIALS) {
    fprintf(stderr, "%s: --window 1..16, --max-count %d..%u, --trials up to %d\n", argv[0], MAX_RANKS, 1u << 26,
            MAX_TRIALS);
    return 2;
  }
  signal(SIGPIPE, SIG_IGN); /* orders to a rank that just died */
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (gpu) {
    char why[400];
    if (observerStart(why, sizeof(why)) != 0) {
      fprintf(stderr, "%s: %s\n", argv[0], why);
      return 1;
    }
    if (observe(why, sizeof(why)) < 0) {
      printf("SKIPPED: --gpu: no device memory to observe (%s)\n", why);
      observerStop();
      return 77;
    }
  }
  const char* lib = api->library != NULL ? api->library() : NULL;
  printf("chaos: the %s API%s%s%s, %d trials from seed %llu, window %d, up to %zu elements per call\n", api->name,
         lib ? " of " : "", lib ? lib : "", gpu ? " on the GPU" : " on the host backend", trials,
         (unsigned long long)seed, window, maxCount);
  double t0 = nowSec();
  int failed = 0, hangs = 0, wrongs = 0, kills = 0, victimBusy = 0, waits = 0, waitsBusy = 0;
  int survivors = 0, threadsBack = 0;
  static double times[2][2 * MAX_TRIALS], phases[2][3][MAX_TRIALS], residue[MAX_TRIALS], parentMem[MAX_TRIALS];
  int ntimes[2] = {0, 0}, nphases[2] = {0, 0}, nmem = 0;
  double worstResidue = -1e30;
  for (int t = 0; t < trials; t++) {
    struct plan p = makePlan(seed + (uint64_t)t, t, sizes, nsizes);
    struct trialResult tr;
    double ts = nowSec();
    runTrial(&p, calls, &tr);
    char v2[48] = "";
    if (p.victim2 >= 0) snprintf(v2, sizeof(v2), ", then rank %d", p.victim2);
    char rec[96] = "";
    int s = p.n == 8;
    for (int k = 0; k < 2; k++) {
      if (tr.recovery[k] < 0) continue;
      size_t at = strlen(rec);
      snprintf(rec + at, sizeof(rec) - at, "%s%.3f s (%s)", at ? ", " : "", tr.recovery[k], tr.how[k] ? tr.how[k] : "?");
      if (tr.how[k] != NULL && strcmp(tr.how[k], "shrink") == 0 && ntimes[s] < 2 * MAX_TRIALS)
        times[s][ntimes[s]++] = tr.recovery[k];
    }
    if (tr.phase[0] >= 0 && nphases[s] < MAX_TRIALS) {
      for (int k = 0; k < 3; k++) phases[s][k][nphases[s]] = tr.phase[k];
      nphases[s]++;
    }
    char res[200] = "";
    if (tr.survivors > 0) {
      char pt[16] = "-";
      if (tr.parentThreads >= 0) snprintf(pt, sizeof(pt), "+%d", tr.parentThreads);
      snprintf(res, sizeof(res), ", threads %s (parent) +%d (shrunk) %s (end)", pt, tr.childThreads,
               tr.threadsBack == tr.survivors ? "+0" : "NOT BACK");
    }
    if (tr.memResidue == tr.memResidue) { /* not NAN */
      size_t at = strlen(res);
      snprintf(res + at, sizeof(res) - at, ", memory freed per survivor %.1f MiB (parent) %.1f (shrunk), left %.1f",
               tr.memParent, tr.memChild, tr.memResidue);
      residue[nmem] = tr.memResidue;
      parentMem[nmem++] = tr.memParent;
      if (tr.memResidue > worstResidue) worstResidue = tr.memResidue;
    }
    printf("trial %2d seed %llu: %-6s %d ranks, kill rank %d%s%s: %s, recovered %s, %.2f s%s%s%s\n", t,
           (unsigned long long)p.seed, scenarioNames[p.sc], p.n, p.victim1, p.inflight1 ? " (in flight)" : "", v2,
           tr.ok ? "ok" : "FAILED", rec[0] ? rec : "-", nowSec() - ts, res, tr.ok ? "" : ": ", tr.ok ? "" : tr.why);
    failed += !tr.ok;
    hangs += tr.hang;
    wrongs += tr.wrongs;
    kills += tr.kills;
    victimBusy += tr.victimBusy;
    waits += tr.failedWaits;
    waitsBusy += tr.failsInFlight;
    survivors += tr.survivors;
    threadsBack += tr.threadsBack;
  }
  observerStop();
  printf("chaos: %d trials, %d failed, %d hangs, %d wrong results, %.1f s\n", trials, failed, hangs, wrongs,
         nowSec() - t0);
  for (int s = 0; s < 2; s++) {
    if (ntimes[s] == 0) continue;
    double med = medianOf(times[s], ntimes[s]);
    printf("kill to first collective on the shrunk communicator, %s ranks: median %.3f s, worst %.3f s (%d kills)\n",
           s ? "8" : "4 (and other)", med, times[s][ntimes[s] - 1], ntimes[s]);
    if (nphases[s] == 0) continue;
    static const char* const names[3] = {"every survivor's call failed", "shrink", "first collective"};
    printf("  of which (medians of %d single kills):", nphases[s]);
    for (int k = 0; k < 3; k++) printf("%s %s %.3f s", k ? "," : "", names[k], medianOf(phases[s][k], nphases[s]));
    printf("\n");
  }
  if (gpu)
    printf("kernels in flight: in the victim at %d of %d kills; in the survivor at %d of %d failed waits\n", victimBusy,
           kills, waitsBusy, waits);
  printf("resources: threads back to their count before the first communicator on %d of %d survivors", threadsBack,
         survivors);
  if (nmem > 0) {
    double worstCopy = worstResidue;
    printf("; device memory left after every communicator was destroyed: median %.1f MiB, worst %.1f MiB (slack "
           "%.1f); freed by destroying the parent: median %.1f MiB per survivor",
           medianOf(residue, nmem), worstCopy, memSlack, medianOf(parentMem, nmem));
  }
  printf("\n");
  return failed ? 1 : 0;
}
