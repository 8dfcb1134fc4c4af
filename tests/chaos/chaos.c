/* SPDX-License-Identifier: MIT */
/*
 * Chaos trials on the host backend: ranks run checked collectives, one (or
 * two) of them SIGKILLs itself at a random moment, and the survivors carry
 * on, on a communicator shrunk with MSCCLPP_SHRINK_ABORT, for 100 more
 * checked calls.
 *
 *   chaos [--trials N] [--seed S] [--ranks 4,8] [--calls C] [--verbose]
 *
 * One process is the driver; it forks the ranks of each trial (no exec:
 * the driver starts no thread and never touches the library) and plays what
 * an elastic launcher or a store plays for a real job: it sees which ranks
 * died (their pipes close), tells the survivors whom to exclude, and
 * whether every survivor's shrink worked before they go on (a shrink is not
 * atomic across ranks: a member lost during it fails it on some and not on
 * others, who then drop the new communicator and shrink again). Ranks
 * report on a pipe, one line each:
 *   I ok|fail          the communicator was created (or not)
 *   K t phase op       the victim, just before it kills itself (t: CLOCK_MONOTONIC)
 *   F t op why         a call failed (the rank waits for orders)
 *   S ok|fail t why    its shrink worked (or not), and when it returned
 *   R t                its first call on a new communicator succeeded
 *   D                  its calls on the communicator are done
 *   W what             a wrong result (the trial fails)
 * and read orders: S (shrink), C (commit: destroy the parent, run the
 * calls), X (drop the new communicator), N (a new communicator from
 * scratch, after a death during creation left some ranks without one),
 * E (destroy and exit).
 *
 * Each trial is one of these scenarios, in turn (seed t picks the ranks,
 * the victims, the moment):
 *   coll     a rank dies inside a collective (a timer fires during the loop)
 *   group    a rank dies inside a group of send/recv (before its GroupEnd)
 *   init     a rank dies while the communicator is created; survivors that
 *            got one shrink it, else all start again (N)
 *   rank0    rank 0 dies inside a collective
 *   twice    a second rank dies inside the calls on the shrunk communicator
 *   shrink   a second rank dies while the others shrink
 * The checked calls cycle allreduce, broadcast, all-to-all and a group of
 * send/recv (ring both ways); every value depends on the member's original
 * rank, the communicator's generation and the call, so a stale or wrong
 * membership shows. The run fails on a wrong result, a rank that did not
 * report within HANG_SECONDS (a hang), a survivor that exits badly, or a
 * shrink that fails without a new death. It prints each trial's seed, and
 * the time from each kill to the first call that succeeded on every
 * survivor of the new communicator: median and worst per rank count.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mscclpp/coll.h"
#include "mscclpp/comm.h"

#define MAX_RANKS 8
#define HANG_SECONDS 25.0
#define MAX_ATTEMPTS 4
#define MAX_COUNT 2048

enum scenario { SC_COLL, SC_GROUP, SC_INIT, SC_RANK0, SC_TWICE, SC_SHRINK, SC_COUNT };
static const char* const scenarioNames[SC_COUNT] = {"coll", "group", "init", "rank0", "twice", "shrink"};

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
  /* a rank killed before it reaches the root is only noticed at the
   * timeout, so creation is given a short one */
  p.timeout = p.sc == SC_INIT ? 4.0 : 15.0;
  return p;
}

/* ---- a rank -------------------------------------------------------------------------- */

static struct plan plan;
static int me;          /* original rank */
static int repFd = -1;  /* reports to the driver */
static FILE* cmdIn;     /* orders from the driver */
static const char* curOp = "start"; /* what the main thread is in, for the kill report; __atomic */
#define SET_OP(name) __atomic_store_n(&curOp, (name), __ATOMIC_RELAXED)
static int wrong;

static void report(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static void report(const char* fmt, ...) {
  char line[600];
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
  report("K %.6f %s %s", nowSec(), phase, __atomic_load_n(&curOp, __ATOMIC_RELAXED));
  raise(SIGKILL);
}

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

static size_t countOf(int gen, int it, size_t max) {
  return 1 + (size_t)(mix(plan.seed * 31 + (uint64_t)gen * 7919 + (uint64_t)it) % max);
}

struct world {
  mscclppComm_t comm;
  int gen;
  int m;
  int orig[MAX_RANKS]; /* original rank of each member, by new rank */
  int rank;            /* this rank in it */
};

static int32_t bufA[MAX_RANKS * MAX_COUNT], bufB[MAX_RANKS * MAX_COUNT], bufC[MAX_COUNT];

static void checkEq(const char* what, int it, size_t i, int32_t got, int32_t want) {
  if (got == want) return;
  if (wrong++ < 3) report("W %s call %d element %zu: %d, expected %d", what, it, i, got, want);
}

/* One checked call, by iteration: allreduce, broadcast, all-to-all, group. */
static mscclppResult_t checkedCall(struct world* w, int it, int dieInGroup) {
  const int m = w->m, r = w->rank, gen = w->gen;
  mscclppResult_t res = mscclppSuccess;
  switch (it % 4) {
    case 0: {
      size_t c = countOf(gen, it, MAX_COUNT);
      for (size_t i = 0; i < c; i++) bufA[i] = val(gen, it, w->orig[r], i);
      SET_OP("allreduce");
      res = mscclppAllReduce(bufA, bufB, c, mscclppInt32, mscclppSum, w->comm, NULL);
      SET_OP("between");
      if (res != mscclppSuccess) return res;
      for (size_t i = 0; i < c; i++) {
        int32_t want = 0;
        for (int q = 0; q < m; q++) want += val(gen, it, w->orig[q], i);
        checkEq("allreduce", it, i, bufB[i], want);
      }
      break;
    }
    case 1: {
      size_t c = countOf(gen, it, MAX_COUNT);
      int root = it / 4 % m;
      for (size_t i = 0; i < c; i++) bufA[i] = r == root ? val(gen, it, w->orig[root], i) : -1;
      SET_OP("broadcast");
      res = mscclppBroadcast(bufA, bufA, c, mscclppInt32, root, w->comm, NULL);
      SET_OP("between");
      if (res != mscclppSuccess) return res;
      for (size_t i = 0; i < c; i++) checkEq("broadcast", it, i, bufA[i], val(gen, it, w->orig[root], i));
      break;
    }
    case 2: {
      size_t c = countOf(gen, it, MAX_COUNT / MAX_RANKS);
      for (int q = 0; q < m; q++)
        for (size_t i = 0; i < c; i++) bufA[(size_t)q * c + i] = val(gen, it, w->orig[r] * 64 + w->orig[q], i);
      SET_OP("alltoall");
      res = mscclppAllToAll(bufA, bufB, c, mscclppInt32, w->comm, NULL);
      SET_OP("between");
      if (res != mscclppSuccess) return res;
      for (int q = 0; q < m; q++)
        for (size_t i = 0; i < c; i++)
          checkEq("alltoall", it, (size_t)q * c + i, bufB[(size_t)q * c + i], val(gen, it, w->orig[q] * 64 + w->orig[r], i));
      break;
    }
    default: {
      size_t c = countOf(gen, it, MAX_COUNT);
      int next = (r + 1) % m, prev = (r + m - 1) % m;
      for (size_t i = 0; i < c; i++) {
        bufA[i] = val(gen, it, 1000 + w->orig[r], i);
        bufC[i] = val(gen, it, 2000 + w->orig[r], i);
      }
      SET_OP("group");
      mscclppGroupStart();
      mscclppSend(bufA, c, mscclppInt32, next, w->comm, NULL);
      if (dieInGroup) die("group");
      mscclppSend(bufC, c, mscclppInt32, prev, w->comm, NULL);
      mscclppRecv(bufB, c, mscclppInt32, prev, w->comm, NULL);
      mscclppRecv(bufB + MAX_COUNT, c, mscclppInt32, next, w->comm, NULL);
      res = mscclppGroupEnd();
      SET_OP("between");
      if (res != mscclppSuccess) return res;
      for (size_t i = 0; i < c; i++) {
        checkEq("recv from prev", it, i, bufB[i], val(gen, it, 1000 + w->orig[prev], i));
        checkEq("recv from next", it, i, bufB[MAX_COUNT + i], val(gen, it, 2000 + w->orig[next], i));
      }
      break;
    }
  }
  return mscclppSuccess;
}

/* Calls on w until one fails (reported F) or `calls` are done (D). The
 * first success on a new communicator is reported (R). */
static void runCalls(struct world* w, int calls, int armIter, long armDelayUs, const char* armPhase, int groupKill) {
  for (int it = 0; calls < 0 || it < calls; it++) {
    if (it == armIter && armPhase != NULL) {
      if (groupKill && it % 4 != 3) {
        armIter++; /* wait for a group */
      } else if (!groupKill) {
        armTimer(armDelayUs, armPhase);
      }
    }
    mscclppResult_t res = checkedCall(w, it, groupKill && it == armIter);
    if (res != mscclppSuccess) {
      report("F %.6f %s %s: %s", nowSec(), __atomic_load_n(&curOp, __ATOMIC_RELAXED), mscclppGetErrorString(res),
             mscclppGetLastError());
      return;
    }
    if (it == 0) report("R %.6f", nowSec());
  }
  report("D");
}

static void setEnvRank(int rank, int n, const char* commId, const char* secret) {
  char b[32];
  snprintf(b, sizeof(b), "%d", rank);
  setenv("MSCCLPP_RANK", b, 1);
  snprintf(b, sizeof(b), "%d", n);
  setenv("MSCCLPP_NRANKS", b, 1);
  setenv("MSCCLPP_COMM_ID", commId, 1);
  setenv("MSCCLPP_COMM_SECRET", secret, 1);
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

static int rankMain(int rank, const char* commId, const char* secret) {
  me = rank;
  setenv("CUDA_VISIBLE_DEVICES", "", 1);
  char t[32];
  snprintf(t, sizeof(t), "%g", plan.timeout);
  setenv("MSCCLPP_TIMEOUT", t, 1);
  setEnvRank(rank, plan.n, commId, secret);
  struct world cur = {NULL, 0, plan.n, {0}, rank}, next = {NULL, 0, 0, {0}, 0};
  for (int i = 0; i < plan.n; i++) cur.orig[i] = i;
  if (plan.sc == SC_INIT && rank == plan.victim1) armTimer(plan.delayUs1, "init");
  SET_OP("init");
  mscclppResult_t res = mscclppCommInitFromEnv(&cur.comm);
  SET_OP("between");
  report("I %s %s", res == mscclppSuccess ? "ok" : "fail", res == mscclppSuccess ? "" : mscclppGetLastError());
  if (res == mscclppSuccess) {
    int armIter = -1;
    const char* phase = NULL;
    if (rank == plan.victim1 && plan.sc != SC_INIT) {
      armIter = plan.killIter1;
      phase = plan.sc == SC_GROUP ? "group" : "coll";
    }
    runCalls(&cur, -1, armIter, plan.delayUs1, phase, plan.sc == SC_GROUP);
  }
  int shrinks = 0;
  char line[512];
  while (fgets(line, sizeof(line), cmdIn) != NULL) {
    char* p = line + 1;
    int calls = 0, gen = 0;
    switch (line[0]) {
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
        res = mscclppCommShrink(cur.comm, ex, k, &next.comm, MSCCLPP_SHRINK_ABORT);
        SET_OP("between");
        report("S %s %.6f %s", res == mscclppSuccess ? "ok" : "fail", nowSec(),
               res == mscclppSuccess ? "" : mscclppGetLastError());
        break;
      }
      case 'X': /* the shrink failed somewhere: drop what this one made */
        if (next.comm != NULL) (void)mscclppCommDestroy(next.comm);
        next.comm = NULL;
        break;
      case 'C': { /* C gen calls: go on on the shrunk communicator */
        gen = (int)strtol(p, &p, 10);
        calls = (int)strtol(p, &p, 10);
        (void)mscclppCommDestroy(cur.comm);
        cur = next;
        cur.gen = gen;
        next.comm = NULL;
        int second = plan.sc == SC_TWICE && rank == plan.victim2 && gen == 1;
        runCalls(&cur, calls, second ? plan.killIter2 : -1, plan.delayUs2, second ? "twice" : NULL, 0);
        break;
      }
      case 'N': { /* N gen calls commId secret m o0 ...: a new communicator */
        gen = (int)strtol(p, &p, 10);
        calls = (int)strtol(p, &p, 10);
        char id[64], sec[64];
        int used = 0;
        if (sscanf(p, " %63s %63s%n", id, sec, &used) != 2) return 3;
        p += used;
        if (cur.comm != NULL) (void)mscclppCommDestroy(cur.comm);
        if (next.comm != NULL) (void)mscclppCommDestroy(next.comm);
        next.comm = NULL;
        if (readMembers(&p, &cur) != 0) return 3;
        cur.gen = gen;
        cur.comm = NULL;
        setEnvRank(cur.rank, cur.m, id, sec);
        SET_OP("init");
        res = mscclppCommInitFromEnv(&cur.comm);
        SET_OP("between");
        report("I %s %s", res == mscclppSuccess ? "ok" : "fail", res == mscclppSuccess ? "" : mscclppGetLastError());
        if (res == mscclppSuccess) runCalls(&cur, calls, -1, 0, NULL, 0);
        break;
      }
      case 'E':
        if (next.comm != NULL) (void)mscclppCommDestroy(next.comm);
        res = cur.comm != NULL ? mscclppCommDestroy(cur.comm) : mscclppSuccess;
        return wrong == 0 && res == mscclppSuccess ? 0 : 1;
      default:
        return 3;
    }
  }
  return 4; /* the driver went away */
}

/* ---- the driver ------------------------------------------------------------------------ */

enum { ST_BUSY, ST_WAIT, ST_DONE, ST_DEAD };

struct child {
  pid_t pid;
  int rep, cmd; /* read reports / write orders */
  int state;    /* ST_* */
  int hasComm;  /* a communicator it can shrink */
  int shrinkOk;
  double failedAt; /* F: its call failed */
  double shrunkAt; /* S: its shrink returned */
  double firstOk;  /* R of the current communicator */
  char buf[4096];
  size_t len;
  char last[600]; /* its last report */
};

struct trialResult {
  int ok, hang, wrongs, spurious;
  double recovery[2]; /* kill -> every survivor's first success, per kill; -1 if not measured */
  double phase[3];    /* the first kill, recovered by one shrink: kill -> last survivor's failed call,
                       * -> last shrink returned, -> last first success; -1 if not measured */
  const char* how[2];
  char why[600];
};

static struct child kids[MAX_RANKS];
static int verbose;

static void order(struct child* k, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static void order(struct child* k, const char* fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  int len = vsnprintf(line, sizeof(line) - 1, fmt, ap);
  va_end(ap);
  line[len++] = '\n';
  ssize_t ignored = write(k->cmd, line, (size_t)len);
  (void)ignored;
}

static int freePort(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = -1;
  if (bind(fd, (struct sockaddr*)&a, sizeof(a)) == 0 && getsockname(fd, (struct sockaddr*)&a, &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

static void newJob(char* commId, size_t idLen, char* secret) {
  snprintf(commId, idLen, "127.0.0.1:%d", freePort());
  for (int i = 0; i < 32; i++) secret[i] = "0123456789abcdef"[mix(nowSec() * 1e9 + i) % 16];
  secret[32] = '\0';
}

struct deaths {
  double killedAt[2];
  int nkills;
};

/* One report line of rank i. */
static void onLine(int i, char* line, struct deaths* d, struct trialResult* tr) {
  struct child* k = &kids[i];
  snprintf(k->last, sizeof(k->last), "%s", line);
  if (verbose) printf("    [%d] %s\n", i, line);
  switch (line[0]) {
    case 'I':
      k->hasComm = strncmp(line, "I ok", 4) == 0;
      if (!k->hasComm) k->state = ST_WAIT;
      break;
    case 'K':
      if (d->nkills < 2) d->killedAt[d->nkills] = strtod(line + 2, NULL);
      d->nkills++;
      break;
    case 'F':
      k->failedAt = strtod(line + 2, NULL);
      k->state = ST_WAIT;
      break;
    case 'S':
      k->shrinkOk = strncmp(line, "S ok", 4) == 0;
      k->shrunkAt = strtod(line + (k->shrinkOk ? 5 : 7), NULL);
      k->state = ST_WAIT;
      break;
    case 'R':
      k->firstOk = strtod(line + 2, NULL);
      break;
    case 'D':
      k->state = ST_DONE;
      break;
    case 'W':
      tr->wrongs++;
      snprintf(tr->why, sizeof(tr->why), "rank %d: wrong result: %.400s", i, line + 2);
      break;
    default:
      break;
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

static void runTrial(const struct plan* p, int calls, struct trialResult* tr) {
  memset(tr, 0, sizeof(*tr));
  tr->recovery[0] = tr->recovery[1] = -1;
  tr->phase[0] = tr->phase[1] = tr->phase[2] = -1;
  double lastFailed = 0, lastShrunk = 0;
  int n = p->n;
  char commId[64], secret[40];
  newJob(commId, sizeof(commId), secret);
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
      close(rp[0]);
      close(cp[1]);
      repFd = rp[1];
      cmdIn = fdopen(cp[0], "r");
      plan = *p;
      exit(rankMain(i, commId, secret)); /* exit, not _exit: LeakSanitizer checks each rank */
    }
    close(rp[1]);
    close(cp[0]);
    memset(&kids[i], 0, sizeof(kids[i]));
    kids[i].pid = pid;
    kids[i].rep = rp[0];
    kids[i].cmd = cp[1];
    kids[i].state = ST_BUSY;
    fcntl(kids[i].cmd, F_SETFD, FD_CLOEXEC);
  }
  struct deaths d = {{0, 0}, 0};
  int members[MAX_RANKS], m = n, gen = 0, recovered = 0, attempts = 0;
  for (int i = 0; i < n; i++) members[i] = i;
  for (;;) {
    if (settle(n, &d, tr) != 0) {
      tr->hang = 1;
      int stuck = -1;
      for (int i = 0; i < n && stuck < 0; i++)
        if (kids[i].state == ST_BUSY) stuck = i;
      snprintf(tr->why, sizeof(tr->why), "rank %d reported nothing for %g s; its last report: %.400s", stuck,
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
        tr->phase[2] = last - lastShrunk;
      }
      for (; all && recovered < d.nkills && recovered < 2 && d.killedAt[recovered] < first; recovered++)
        tr->recovery[recovered] = last - d.killedAt[recovered];
    }
    if (alive == 0) {
      snprintf(tr->why, sizeof(tr->why), "every rank died");
      break;
    }
    if (done == alive) {
      tr->ok = tr->wrongs == 0 && tr->spurious == 0;
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
      const char* how = "re-init";
      tr->how[0] = tr->how[1] = how;
      newJob(commId, sizeof(commId), secret);
      gen++;
      char list[128];
      size_t at = 0;
      for (int i = 0; i < nn; i++) at += (size_t)snprintf(list + at, sizeof(list) - at, " %d", next[i]);
      for (int i = 0; i < nn; i++) {
        kids[next[i]].state = ST_BUSY;
        order(&kids[next[i]], "N %d %d %s %s %d%s", gen, calls, commId, secret, nn, list);
      }
      memcpy(members, next, sizeof(next));
      m = nn;
      continue;
    }
    if (++attempts > MAX_ATTEMPTS) {
      snprintf(tr->why, sizeof(tr->why), "%d shrinks failed in a row; rank %d's last report: %.400s", MAX_ATTEMPTS,
               next[0], kids[next[0]].last);
      break;
    }
    if (nex == 0) {
      snprintf(tr->why, sizeof(tr->why), "a call failed but nobody died; rank %d's last report: %.400s", next[0],
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
        snprintf(tr->why, sizeof(tr->why), "a shrink failed on rank %d without a new death: %.400s", bad,
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
  /* the end: every live rank destroys and exits; victims were SIGKILLed */
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

int main(int argc, char** argv) {
  int trials = 24, calls = 100;
  uint64_t seed = 1;
  int sizes[4] = {4, 8}, nsizes = 2;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--trials") == 0 && i + 1 < argc) {
      trials = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
      seed = strtoull(argv[++i], NULL, 0);
    } else if (strcmp(argv[i], "--calls") == 0 && i + 1 < argc) {
      calls = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--ranks") == 0 && i + 1 < argc) {
      nsizes = 0;
      for (char* p = argv[++i]; *p && nsizes < 4; p += *p == ',') {
        sizes[nsizes] = (int)strtol(p, &p, 10);
        if (sizes[nsizes] < 3 || sizes[nsizes] > MAX_RANKS) {
          fprintf(stderr, "--ranks: 3..%d ranks\n", MAX_RANKS);
          return 2;
        }
        nsizes++;
      }
    } else if (strcmp(argv[i], "--verbose") == 0) {
      verbose = 1;
    } else {
      fprintf(stderr, "usage: chaos [--trials N] [--seed S] [--ranks 4,8] [--calls C] [--verbose]\n");
      return 2;
    }
  }
  signal(SIGPIPE, SIG_IGN); /* orders to a rank that just died */
  setvbuf(stdout, NULL, _IOLBF, 0);
  double t0 = nowSec();
  int failed = 0, hangs = 0, wrongs = 0;
  double times[2][2 * 256], phases[2][3][256];
  int ntimes[2] = {0, 0}, nphases[2] = {0, 0};
  for (int t = 0; t < trials; t++) {
    struct plan p = makePlan(seed + (uint64_t)t, t, sizes, nsizes);
    struct trialResult tr;
    double ts = nowSec();
    runTrial(&p, calls, &tr);
    char v2[48] = "";
    if (p.victim2 >= 0) snprintf(v2, sizeof(v2), ", then rank %d", p.victim2);
    char rec[96] = "";
    for (int k = 0; k < 2; k++) {
      if (tr.recovery[k] < 0) continue;
      size_t at = strlen(rec);
      snprintf(rec + at, sizeof(rec) - at, "%s%.3f s (%s)", at ? ", " : "", tr.recovery[k], tr.how[k] ? tr.how[k] : "?");
      if (tr.how[k] != NULL && strcmp(tr.how[k], "shrink") == 0 && ntimes[p.n == 8] < 2 * 256)
        times[p.n == 8][ntimes[p.n == 8]++] = tr.recovery[k];
    }
    if (tr.phase[0] >= 0 && nphases[p.n == 8] < 256) {
      for (int k = 0; k < 3; k++) phases[p.n == 8][k][nphases[p.n == 8]] = tr.phase[k];
      nphases[p.n == 8]++;
    }
    printf("trial %2d seed %llu: %-6s %d ranks, kill rank %d%s: %s, recovered %s, %.2f s%s%s\n", t,
           (unsigned long long)p.seed, scenarioNames[p.sc], p.n, p.victim1, v2, tr.ok ? "ok" : "FAILED",
           rec[0] ? rec : "-", nowSec() - ts, tr.ok ? "" : ": ", tr.ok ? "" : tr.why);
    failed += !tr.ok;
    hangs += tr.hang;
    wrongs += tr.wrongs;
  }
  printf("chaos: %d trials, %d failed, %d hangs, %d wrong results, %.1f s\n", trials, failed, hangs, wrongs,
         nowSec() - t0);
  for (int s = 0; s < 2; s++) {
    if (ntimes[s] == 0) continue;
    qsort(times[s], (size_t)ntimes[s], sizeof(double), cmpDouble);
    printf("kill to first collective on the shrunk communicator, %s ranks: median %.3f s, worst %.3f s (%d kills)\n",
           s ? "8" : "4 (and other)", times[s][ntimes[s] / 2], times[s][ntimes[s] - 1], ntimes[s]);
    if (nphases[s] == 0) continue;
    static const char* const names[3] = {"every survivor's call failed", "shrink", "first collective"};
    printf("  of which (medians of %d single kills):", nphases[s]);
    for (int k = 0; k < 3; k++) {
      qsort(phases[s][k], (size_t)nphases[s], sizeof(double), cmpDouble);
      printf("%s %s %.3f s", k ? "," : "", names[k], phases[s][k][nphases[s] / 2]);
    }
    printf("\n");
  }
  return failed ? 1 : 0;
}
