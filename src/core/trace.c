/* SPDX-License-Identifier: MIT */
/*
 * Trace buffers and the trace file (trace.h).
 *
 * Buffers: each thread that records gets one buffer, registered once (under
 * the session lock) and found again through a thread-local pointer. A
 * buffer is a ring of RING_EVENTS events whose memory is faulted in when the
 * thread registers, and a spill file (unnamed, in $TMPDIR): when the
 * ring is full, its owner appends the whole ring to the file with one
 * pwrite(2) and starts over in the same memory. So recording an event stores
 * 128 bytes into memory that is already mapped and hot: no lock, no atomic
 * read-modify-write, no page fault, and one system call per RING_EVENTS
 * events. Event i (counted since the thread's first) is in the file at
 * i * 128 once i < spilled, else in ring slot i % RING_EVENTS. Fresh memory
 * on the call path is what tracing used to cost: a page fault per 32
 * events, dear on a virtual machine (bench/RESULTS.md, "MSCCLPP_TRACE
 * overhead"); the kernel fills the file's pages through its own mapping,
 * which takes no fault in this process. The times are ticks of the trace's
 * clock (trace.h), made CLOCK_MONOTONIC ns by the writer.
 *
 * Only the owner writes events: it fills the slot, then publishes it with a
 * release store of `count`. The writer of the file takes the buffer's
 * spillLock, reads `count` and `spilled` (acquire), copies the ring's part
 * of the session's events [base, count) and lets go: while it holds the
 * lock the owner cannot spill (it only try-locks, and drops the event when
 * that fails), so the slots it copies are not reused under it; the owner
 * goes on writing the slots after `count`, which the copy does not read.
 * The file's part is read after the lock is gone: the owner only appends
 * past it. Then the writer moves `base` to the count it read (release); the
 * owner loads base with acquire for the session's limit (`maxEvents` events
 * per thread; later ones are counted as dropped), and the file's pages of
 * events written are given back (a punched hole).
 *
 * Buffers live as long as the process (a thread may record at any time),
 * except those of threads that have exited, which the writer frees once it
 * has written them (a pthread key's destructor marks the exit).
 *
 * The file: the last communicator of the session to leave writes it (or the
 * atexit handler, for a process that exits with one alive): every buffer's
 * events of the session sorted by start time, one JSON object per line,
 * inside {"otherData":{...},\n"traceEvents":[ ... ]}: still one valid JSON
 * document, and a reader of this layout only ever parses one line at a time.
 */
#include "core/trace.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log.h"

#define RING_EVENTS 1024u /* a thread's ring: 128 KiB, 32 pages (one pwrite(2) per this many events) */
#define EVENT_BYTES ((uint64_t)sizeof(struct mscclppTraceEvent))
#define PATH_MAX_BYTES 512
#define TRACK_TID_BASE (1u << 30) /* tids of tracks that are not threads: after every thread id */

atomic_int mscclppTraceActive;
/* The open session's limit of events per thread (MSCCLPP_TRACE_EVENTS). */
static _Atomic uint64_t sessionMaxEvents = 1;

struct traceThread {
  struct traceThread* next;
  int tid;
  char name[32];
  struct mscclppTraceEvent* ring; /* RING_EVENTS events, faulted in at registration */
  int fd;                         /* the spill file; -1: none (the ring is all there is) */
  pthread_mutex_t spillLock;      /* the owner's spill against the writer's copy (see above) */
  _Atomic uint64_t count;         /* events recorded since the thread's first (owner: release) */
  _Atomic uint64_t spilled;       /* events [0, spilled) are in the file (owner, under spillLock) */
  _Atomic uint64_t base;          /* the current session's first event (writer: release) */
  _Atomic uint64_t dropped;
  atomic_int exited;
  /* the writer's (session.lock) */
  uint64_t end, fileEnd;          /* what it writes of this buffer: [base, end); [base, fileEnd) from the file */
  struct mscclppTraceEvent* copy; /* the ring's part, copied */
  void* map;                      /* the file's part, mapped */
  size_t mapBytes;
  uint64_t mapFirst;              /* the event at map's start */
};

struct traceTrack {
  struct traceTrack* next;
  uint32_t id;
  char name[64];
};

/* The session: one per process at a time (trace.h says why the flag is
 * global). Everything here is under `lock`. */
static struct {
  pthread_mutex_t lock;
  struct traceThread* threads;
  struct traceTrack* tracks;
  int refs;     /* communicators holding the session */
  int written;  /* sessions this process has written */
  int atexitSet;
  char pathTemplate[PATH_MAX_BYTES];
  int identified, rank, nranks;
  uint64_t comm;
  int clockKnown;
  int64_t clockOffset, clockRtt;
} session = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* ---- the trace's clock: ticks to ns (trace.h's mscclppTraceNow) ----
 *
 * With the TSC as the trace's clock, (ticks, CLOCK_MONOTONIC ns) pairs are
 * read when a session opens, when it is written, and at spills at most
 * every PAIR_EVERY_NS; the writer maps a tick by the straight line through
 * the pairs on either side of it (the outermost two beyond them). NTP's
 * slewing of CLOCK_MONOTONIC bends that line only between pairs. */

#define PAIR_EVERY_NS 100000000ull /* 100 ms */

int mscclppTraceTsc;

struct clockPair {
  uint64_t tick, ns;
};

static struct {
  pthread_mutex_t lock;
  struct clockPair* v;
  size_t n, cap;
} pairs = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Whether this CPU's TSC is invariant (CPUID 0x80000007, EDX bit 8): the
 * same rate on every core, in every power state. */
static int tscInvariant(void) {
#if defined(__x86_64__)
  unsigned a = 0x80000000u, b = 0, c = 0, d = 0;
  __asm__ __volatile__("cpuid" : "+a"(a), "=b"(b), "=c"(c), "=d"(d));
  if (a < 0x80000007u) return 0;
  a = 0x80000007u;
  __asm__ __volatile__("cpuid" : "+a"(a), "=b"(b), "=c"(c), "=d"(d));
  return (d >> 8) & 1u;
#else
  return 0;
#endif
}

/* Add a pair now (force: even within PAIR_EVERY_NS of the last one, and
 * waiting for the lock; else a recording thread's, which never waits: the
 * writer holds the lock while it converts a session's times). */
static void clockPairAdd(int force) {
  if (!mscclppTraceTsc) return;
  if (force)
    pthread_mutex_lock(&pairs.lock);
  else if (pthread_mutex_trylock(&pairs.lock) != 0)
    return;
  /* the tick halfway between two reads that bracket the clock's reading;
   * of a few tries, the closest bracket (a thread descheduled between the
   * reads would widen it) */
  uint64_t tick = 0, ns = 0, width = UINT64_MAX;
  for (int i = 0; i < 5; i++) {
    const uint64_t a = mscclppTraceNow(), n = mscclppTimeNs(), b = mscclppTraceNow();
    if (b - a < width) {
      width = b - a;
      tick = a + (b - a) / 2;
      ns = n;
    }
  }
  if (force || pairs.n == 0 || ns - pairs.v[pairs.n - 1].ns >= PAIR_EVERY_NS) {
    if (pairs.n == pairs.cap) {
      size_t cap = pairs.cap == 0 ? 64 : 2 * pairs.cap;
      struct clockPair* grown = (struct clockPair*)realloc(pairs.v, cap * sizeof(*grown));
      if (grown != NULL) {
        pairs.v = grown;
        pairs.cap = cap;
      }
    }
    if (pairs.n < pairs.cap && (pairs.n == 0 || tick > pairs.v[pairs.n - 1].tick))
      pairs.v[pairs.n++] = (struct clockPair){tick, ns};
  }
  pthread_mutex_unlock(&pairs.lock);
}

/* ns of a tick (pairs.lock held; the writer added a pair just before, so
 * there are two at least). */
static uint64_t ticksToNs(uint64_t tick) {
  if (!mscclppTraceTsc || pairs.n < 2) return tick;
  size_t lo = 0, hi = pairs.n - 1; /* the segment [k, k + 1] that holds tick, or the outermost one */
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    if (pairs.v[mid].tick <= tick)
      lo = mid;
    else
      hi = mid;
  }
  const struct clockPair p = pairs.v[lo], q = pairs.v[lo + 1];
  const __int128 dt = (__int128)tick - (__int128)p.tick;
  const __int128 ns = (__int128)p.ns + dt * (__int128)(q.ns - p.ns) / (__int128)(q.tick - p.tick);
  return ns > 0 ? (uint64_t)ns : 1;
}

static pthread_once_t keyOnce = PTHREAD_ONCE_INIT;
static pthread_key_t exitKey;
static _Thread_local struct traceThread* self;

/* A thread's exit: the writer frees its buffer once it has written it. An
 * event recorded later on this thread (another key's destructor) gets a
 * buffer of its own. */
static void threadExited(void* p) {
  self = NULL;
  atomic_store(&((struct traceThread*)p)->exited, 1);
}
static void makeKey(void) { (void)pthread_key_create(&exitKey, threadExited); }

static void threadFree(struct traceThread* th) {
  if (th->ring != NULL) munmap(th->ring, RING_EVENTS * EVENT_BYTES);
  if (th->fd >= 0) close(th->fd);
  pthread_mutex_destroy(&th->spillLock);
  free(th);
}

/* A spill file: an unnamed file in $TMPDIR (else /tmp), whose page cache
 * the kernel fills for less than a memory file's pages (those are zeroed
 * first); else a memory file; else none (-1): then the ring is all there
 * is, and a session keeps at most RING_EVENTS events of the thread, the
 * rest counted as dropped. Nothing outlives the process: the file has no
 * name. */
static int spillFileOpen(void) {
  const char* dir = getenv("TMPDIR");
  int fd = open(dir != NULL && dir[0] != '\0' ? dir : "/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0 && (dir == NULL || dir[0] == '\0' || (fd = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600)) < 0))
    fd = (int)syscall(SYS_memfd_create, "mscclpp-trace", 1u /* MFD_CLOEXEC */);
  return fd;
}

/* The calling thread's buffer: its ring mapped and every page of it touched
 * now, so that recording never faults; NULL when memory is short (its events
 * are then lost). */
static struct traceThread* threadRegister(void) {
  pthread_once(&keyOnce, makeKey);
  struct traceThread* th = (struct traceThread*)calloc(1, sizeof(*th));
  if (th == NULL) return NULL;
  th->fd = -1;
  pthread_mutex_init(&th->spillLock, NULL);
  void* ring = mmap(NULL, RING_EVENTS * EVENT_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                    -1, 0);
  if (ring == MAP_FAILED) {
    threadFree(th);
    return NULL;
  }
  th->ring = (struct mscclppTraceEvent*)ring;
  memset(th->ring, 0, RING_EVENTS * EVENT_BYTES); /* every page written once: populated where MAP_POPULATE is not */
  th->fd = spillFileOpen();
  th->tid = (int)syscall(SYS_gettid);
  if (pthread_getname_np(pthread_self(), th->name, sizeof(th->name)) != 0) th->name[0] = '\0';
  pthread_mutex_lock(&session.lock);
  th->next = session.threads;
  session.threads = th;
  pthread_mutex_unlock(&session.lock);
  (void)pthread_setspecific(exitKey, th);
  self = th;
  return th;
}

/* Append the full ring, events [sp, sp + RING_EVENTS) in slot order (spills
 * start at 0 and go by whole rings), to the file. 0, or -1 when the writer
 * holds the buffer or the file cannot grow: the ring stays as it is. */
static int spill(struct traceThread* th, uint64_t sp) {
  if (th->fd < 0 || pthread_mutex_trylock(&th->spillLock) != 0) return -1;
  const char* p = (const char*)th->ring;
  size_t left = RING_EVENTS * EVENT_BYTES;
  off_t at = (off_t)(sp * EVENT_BYTES);
  while (left > 0) {
    ssize_t w = pwrite(th->fd, p, left, at);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    p += w;
    at += w;
    left -= (size_t)w;
  }
  if (left == 0) atomic_store_explicit(&th->spilled, sp + RING_EVENTS, memory_order_release);
  pthread_mutex_unlock(&th->spillLock);
  clockPairAdd(0); /* a system call's worth of time already: keep the tick line straight over long runs */
  return left == 0 ? 0 : -1;
}

void mscclppTraceEmit(uint32_t type, uint32_t track, uint64_t t0, uint64_t t1, int nargs, const uint64_t* args) {
  struct traceThread* th = self;
  if (th == NULL && (th = threadRegister()) == NULL) return;
  const uint64_t i = atomic_load_explicit(&th->count, memory_order_relaxed);
  const uint64_t base = atomic_load_explicit(&th->base, memory_order_acquire);
  const uint64_t sp = atomic_load_explicit(&th->spilled, memory_order_relaxed); /* only this thread moves it */
  /* full: the session's limit; or the ring, and it cannot be spilled (no
   * file: a slot is free again once the writer has taken its event) */
  if (i - base >= atomic_load_explicit(&sessionMaxEvents, memory_order_relaxed) ||
      (i - sp >= RING_EVENTS && (th->fd >= 0 ? spill(th, sp) != 0 : i - base >= RING_EVENTS))) {
    atomic_fetch_add_explicit(&th->dropped, 1, memory_order_relaxed);
    return;
  }
  struct mscclppTraceEvent* e = &th->ring[i % RING_EVENTS];
  if (nargs > MSCCLPP_TRACE_MAX_ARGS) nargs = MSCCLPP_TRACE_MAX_ARGS;
  e->t0 = t0;
  e->t1 = t1;
  e->type = (uint16_t)type;
  e->nargs = (uint16_t)nargs;
  e->track = track;
  for (int k = 0; k < nargs; k++) e->arg[k] = args[k];
  atomic_store_explicit(&th->count, i + 1, memory_order_release);
}

/* ---- an application's spans (mscclpp/core.h) ---- */

/* Events hold string pointers until the file is written: an application's
 * strings are copied once each and kept (reachable) until the process
 * ends, at most USER_STRINGS of them. */
#define USER_STRINGS 4096
#define USER_BUCKETS 256
struct userString {
  struct userString* next;
  char text[];
};
static pthread_mutex_t userLock = PTHREAD_MUTEX_INITIALIZER;
static struct userString* userTable[USER_BUCKETS];
static int userCount;

static const char* userIntern(const char* s) {
  if (s == NULL) s = "";
  uint32_t h = 2166136261u; /* FNV-1a */
  for (const unsigned char* c = (const unsigned char*)s; *c != '\0'; c++) h = (h ^ *c) * 16777619u;
  pthread_mutex_lock(&userLock);
  struct userString** head = &userTable[h % USER_BUCKETS];
  struct userString* u = *head;
  while (u != NULL && strcmp(u->text, s) != 0) u = u->next;
  if (u == NULL && userCount < USER_STRINGS) {
    size_t len = strlen(s);
    u = (struct userString*)malloc(sizeof(*u) + len + 1);
    if (u != NULL) {
      memcpy(u->text, s, len + 1);
      u->next = *head;
      *head = u;
      userCount++;
    }
  }
  pthread_mutex_unlock(&userLock);
  return u != NULL ? u->text : "(more distinct names than the trace keeps)";
}

MSCCLPP_API uint64_t mscclppTraceStart(void) { return mscclppTraceBegin(); }

MSCCLPP_API void mscclppTraceEnd(uint64_t t0, const char* name, const char* detail, uint64_t value) {
  if (t0 == 0 || name == NULL || !mscclppTraceOn()) return;
  const uint64_t t1 = mscclppTraceNow();
  MSCCLPP_TRACE_EMIT(MSCCLPP_TRACE_USER, t0, t1, MSCCLPP_TRACE_S(userIntern(name)), MSCCLPP_TRACE_S(userIntern(detail)),
                     value);
}

void mscclppTraceDrop(uint64_t n) {
  struct traceThread* th = self;
  if (th == NULL && (th = threadRegister()) == NULL) return;
  atomic_fetch_add_explicit(&th->dropped, n, memory_order_relaxed);
}

void mscclppTraceTrackName(uint32_t track, const char* name) {
  pthread_mutex_lock(&session.lock);
  struct traceTrack* t = session.tracks;
  while (t != NULL && t->id != track) t = t->next;
  if (t == NULL && (t = (struct traceTrack*)calloc(1, sizeof(*t))) != NULL) {
    t->id = track;
    snprintf(t->name, sizeof(t->name), "%s", name);
    t->next = session.tracks;
    session.tracks = t;
  }
  pthread_mutex_unlock(&session.lock);
}

/* ---- the event table, as the writer reads it ---- */

#define MSCCLPP_TRACE_ROW(id, name, cat, args) {name, cat, args},
static const struct {
  const char* name;
  const char* cat;
  const char* args;
} typeTable[MSCCLPP_TRACE_TYPES] = {MSCCLPP_TRACE_EVENT_TABLE(MSCCLPP_TRACE_ROW)};
#undef MSCCLPP_TRACE_ROW

struct argSpec {
  int n;
  char kind[MSCCLPP_TRACE_MAX_ARGS];
  char name[MSCCLPP_TRACE_MAX_ARGS][24];
};

static void parseSpec(const char* text, struct argSpec* s) {
  memset(s, 0, sizeof(*s));
  const char* p = text;
  while (*p != '\0' && s->n < MSCCLPP_TRACE_MAX_ARGS) {
    while (*p == ' ') p++;
    const char* colon = strchr(p, ':');
    if (colon == NULL) break;
    size_t len = (size_t)(colon - p);
    if (len >= sizeof(s->name[0])) len = sizeof(s->name[0]) - 1;
    memcpy(s->name[s->n], p, len);
    s->kind[s->n] = colon[1];
    s->n++;
    p = colon + 2;
  }
}

/* ---- the file ---- */

static void putString(FILE* f, const char* s) {
  fputc('"', f);
  for (const unsigned char* c = (const unsigned char*)(s != NULL ? s : ""); *c != '\0'; c++) {
    if (*c == '"' || *c == '\\')
      fprintf(f, "\\%c", *c);
    else if (*c < 0x20)
      fprintf(f, "\\u%04x", *c);
    else
      fputc(*c, f);
  }
  fputc('"', f);
}

/* Microseconds with three decimals, exactly (no floating point). */
static void putMicros(FILE* f, uint64_t ns) { fprintf(f, "%" PRIu64 ".%03u", ns / 1000, (unsigned)(ns % 1000)); }

static void expandPath(const char* tmpl, int rank, int written, char* out, size_t size) {
  char host[256] = "unknown";
  if (gethostname(host, sizeof(host)) != 0) snprintf(host, sizeof(host), "unknown");
  host[sizeof(host) - 1] = '\0';
  char* dot = strchr(host, '.');
  if (dot != NULL) *dot = '\0';
  size_t o = 0;
  for (const char* p = tmpl; *p != '\0' && o + 1 < size; p++) {
    char tmp[280];
    if (p[0] == '%' && (p[1] == 'r' || p[1] == 'p' || p[1] == 'h' || p[1] == '%')) {
      if (p[1] == 'r')
        snprintf(tmp, sizeof(tmp), "%d", rank);
      else if (p[1] == 'p')
        snprintf(tmp, sizeof(tmp), "%d", (int)getpid());
      else if (p[1] == 'h')
        snprintf(tmp, sizeof(tmp), "%s", host);
      else
        snprintf(tmp, sizeof(tmp), "%%");
      for (const char* t = tmp; *t != '\0' && o + 1 < size; t++) out[o++] = *t;
      p++;
    } else {
      out[o++] = *p;
    }
  }
  out[o] = '\0';
  /* A later session of the same process must not overwrite the first's file. */
  if (written > 0) {
    size_t len = strlen(out);
    snprintf(out + len, size - len, ".%d", written + 1);
  }
}

struct entry {
  const struct mscclppTraceEvent* e;
  const struct traceThread* th;
  uint64_t t0, t1; /* CLOCK_MONOTONIC ns (t1 0: an instant) */
};

static int byTime(const void* a, const void* b) {
  const struct entry* x = (const struct entry*)a;
  const struct entry* y = (const struct entry*)b;
  if (x->t0 != y->t0) return x->t0 < y->t0 ? -1 : 1;
  /* the enclosing span first */
  uint64_t ex = x->t1 > x->t0 ? x->t1 : x->t0, ey = y->t1 > y->t0 ? y->t1 : y->t0;
  if (ex != ey) return ex > ey ? -1 : 1;
  return 0;
}

static int trackTid(const struct entry* en) {
  return en->e->track != 0 ? (int)(TRACK_TID_BASE + en->e->track) : en->th->tid;
}

static void putEvent(FILE* f, int pid, const struct entry* en, const struct argSpec* specs) {
  const struct mscclppTraceEvent* e = en->e;
  const unsigned type = e->type & ~MSCCLPP_TRACE_TIME_NS; /* < MSCCLPP_TRACE_TYPES: the writer checked */
  const struct argSpec* s = &specs[type];
  const char* name = typeTable[type].name;
  if (name[0] == '\0') name = e->nargs > 0 ? (const char*)(uintptr_t)e->arg[0] : "?";
  fprintf(f, "{\"ph\":\"%s\",\"name\":", en->t1 != 0 ? "X" : "i");
  putString(f, name);
  fprintf(f, ",\"cat\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":", typeTable[type].cat, pid, trackTid(en));
  putMicros(f, en->t0);
  if (en->t1 != 0) {
    fputs(",\"dur\":", f);
    putMicros(f, en->t1 > en->t0 ? en->t1 - en->t0 : 0);
  } else {
    fputs(",\"s\":\"t\"", f);
  }
  fputs(",\"args\":{", f);
  int n = e->nargs < s->n ? e->nargs : s->n;
  for (int k = 0; k < n; k++) {
    if (k > 0) fputc(',', f);
    fprintf(f, "\"%s\":", s->name[k]);
    uint64_t v = e->arg[k];
    switch (s->kind[k]) {
      case 'i':
        fprintf(f, "%" PRId64, (int64_t)v);
        break;
      case 'x':
        fprintf(f, "\"0x%016" PRIx64 "\"", v);
        break;
      case 's':
        putString(f, (const char*)(uintptr_t)v);
        break;
      default:
        fprintf(f, "%" PRIu64, v);
        break;
    }
  }
  fputs("}}", f);
}

/* Write the session's events (session.lock held). 0 or -1 (logged). */
static int writeFile(const char* path, const struct entry* ent, size_t n, uint64_t dropped) {
  static struct argSpec specs[MSCCLPP_TRACE_TYPES];
  for (int t = 0; t < MSCCLPP_TRACE_TYPES; t++) parseSpec(typeTable[t].args, &specs[t]);
  FILE* f = fopen(path, "w");
  if (f == NULL) {
    MSCCLPP_WARN(MSCCLPP_LOG_ENV, "MSCCLPP_TRACE: cannot create \"%s\": %s; the trace is lost", path, strerror(errno));
    return -1;
  }
  char host[256] = "unknown";
  if (gethostname(host, sizeof(host)) != 0) snprintf(host, sizeof(host), "unknown");
  host[sizeof(host) - 1] = '\0';
  /* Trace viewers take a process per pid; Perfetto gives pid 0 the kernel's
   * swapper's meaning, so rank r is pid r + 1 (its name says the rank). */
  const int rank = session.identified ? session.rank : 0, pid = rank + 1;
  fprintf(f,
          "{\"otherData\":{\"format\":\"mscclpp-trace\",\"version\":1,"
          "\"rank\":%d,\"nranks\":%d,\"comm\":\"0x%016" PRIx64 "\",\"pid\":%d,\"host\":",
          session.identified ? session.rank : -1, session.identified ? session.nranks : 0, session.comm, (int)getpid());
  putString(f, host);
  fprintf(f,
          ",\"clock\":\"CLOCK_MONOTONIC\",\"clock_synced\":%d,\"clock_offset_ns\":%" PRId64 ",\"clock_rtt_ns\":%" PRId64
          ",\"events\":%zu,\"dropped\":%" PRIu64 "},\n\"traceEvents\":[\n",
          session.clockKnown, session.clockOffset, session.clockRtt, n, dropped);
  char label[320];
  snprintf(label, sizeof(label), "rank %d (%s, pid %d)", rank, host, (int)getpid());
  fprintf(f, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":", pid, pid);
  putString(f, label);
  fprintf(f, "}},\n{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"tid\":%d,\"args\":{\"sort_index\":%d}}",
          pid, pid, rank);
  for (const struct traceThread* th = session.threads; th != NULL; th = th->next) {
    if (th->end == atomic_load(&th->base)) continue; /* nothing of this session */
    fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":", pid, th->tid);
    char name[64];
    snprintf(name, sizeof(name), "%s (%d)", th->name[0] != '\0' ? th->name : "thread", th->tid);
    putString(f, name);
    fputs("}}", f);
  }
  for (const struct traceTrack* t = session.tracks; t != NULL; t = t->next) {
    fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":", pid,
            (int)(TRACK_TID_BASE + t->id));
    putString(f, t->name);
    fputs("}}", f);
  }
  for (size_t i = 0; i < n; i++) {
    fputs(",\n", f);
    putEvent(f, pid, &ent[i], specs);
  }
  fputs("\n]}\n", f);
  int bad = ferror(f);
  if (fclose(f) != 0) bad = 1;
  if (bad) {
    MSCCLPP_WARN(MSCCLPP_LOG_ENV, "MSCCLPP_TRACE: writing \"%s\" failed: %s", path, strerror(errno));
    return -1;
  }
  MSCCLPP_INFO(MSCCLPP_LOG_ENV, "MSCCLPP_TRACE: %zu events written to %s", n, path);
  return 0;
}

/* The writer's view of one buffer's events of the session, [base, end)
 * (session.lock held): the ring's part copied under the spill lock, the
 * file's part mapped. 0, or -1 when memory is short (then nothing is held). */
static int snapshotTake(struct traceThread* th) {
  const uint64_t base = atomic_load_explicit(&th->base, memory_order_relaxed); /* only the writer moves it */
  th->copy = NULL;
  th->map = NULL;
  th->mapBytes = 0;
  pthread_mutex_lock(&th->spillLock);
  th->end = atomic_load_explicit(&th->count, memory_order_acquire);
  th->fileEnd = atomic_load_explicit(&th->spilled, memory_order_acquire);
  const uint64_t from = th->fileEnd > base ? th->fileEnd : base;
  int ok = 1;
  if (th->end > from) {
    th->copy = (struct mscclppTraceEvent*)malloc((size_t)(th->end - from) * EVENT_BYTES);
    ok = th->copy != NULL;
    for (uint64_t i = from; ok && i < th->end; i++) th->copy[i - from] = th->ring[i % RING_EVENTS];
  }
  pthread_mutex_unlock(&th->spillLock);
  if (ok && th->fileEnd > base) {
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    th->mapFirst = base * EVENT_BYTES / page * page;
    th->mapBytes = (size_t)(th->fileEnd * EVENT_BYTES - th->mapFirst);
    void* map = mmap(NULL, th->mapBytes, PROT_READ, MAP_SHARED, th->fd, (off_t)th->mapFirst);
    if (map == MAP_FAILED) {
      th->mapBytes = 0;
      ok = 0;
    } else {
      th->map = map;
    }
  }
  if (!ok) {
    free(th->copy);
    th->copy = NULL;
  }
  return ok ? 0 : -1;
}

/* Event i of the snapshot (base <= i < end). */
static const struct mscclppTraceEvent* snapshotEvent(const struct traceThread* th, uint64_t base, uint64_t i) {
  if (i < th->fileEnd)
    return (const struct mscclppTraceEvent*)((const char*)th->map + (i * EVENT_BYTES - th->mapFirst));
  return &th->copy[i - (th->fileEnd > base ? th->fileEnd : base)];
}

/* Let go of the snapshot; the file's pages of events now written go back
 * to the system. */
static void snapshotRelease(struct traceThread* th) {
  free(th->copy);
  th->copy = NULL;
  if (th->map != NULL) munmap(th->map, th->mapBytes);
  th->map = NULL;
  const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), done = th->fileEnd * EVENT_BYTES / page * page;
  if (th->fd >= 0 && done > 0)
    (void)fallocate(th->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, (off_t)done); /* memory back; best effort */
}

/* Write the session (session.lock held), then start the next one after it:
 * every buffer's base moves past what was written (an event recorded while
 * this runs goes into the next session's file), and buffers of exited
 * threads are freed. */
static void writeSession(void) {
  size_t n = 0;
  uint64_t dropped = 0;
  for (struct traceThread* th = session.threads; th != NULL; th = th->next) {
    const uint64_t base = atomic_load_explicit(&th->base, memory_order_relaxed);
    if (snapshotTake(th) != 0) {
      MSCCLPP_WARN(MSCCLPP_LOG_ENV,
                   "MSCCLPP_TRACE: out of memory reading thread %d's %" PRIu64 " events; they are lost", th->tid,
                   th->end - base);
      dropped += th->end - base;
      th->fileEnd = 0; /* nothing held: snapshotRelease frees nothing more */
      continue;
    }
    n += (size_t)(th->end - base);
  }
  struct entry* ent = (struct entry*)malloc((n > 0 ? n : 1) * sizeof(*ent));
  size_t k = 0;
  clockPairAdd(1); /* the ticks' line reaches the events just taken */
  pthread_mutex_lock(&pairs.lock);
  for (struct traceThread* th = session.threads; th != NULL; th = th->next) {
    dropped += atomic_exchange(&th->dropped, 0);
    const uint64_t base = atomic_load_explicit(&th->base, memory_order_relaxed);
    if (th->map == NULL && th->copy == NULL) continue; /* nothing, or lost above */
    for (uint64_t i = base; ent != NULL && i < th->end; i++) {
      const struct mscclppTraceEvent* e = snapshotEvent(th, base, i);
      if ((e->type & ~MSCCLPP_TRACE_TIME_NS) >= MSCCLPP_TRACE_TYPES) { /* not an event type: a caller's mistake */
        dropped++;
        continue;
      }
      const int ns = (e->type & MSCCLPP_TRACE_TIME_NS) != 0;
      ent[k].e = e;
      ent[k].th = th;
      ent[k].t0 = ns ? e->t0 : ticksToNs(e->t0);
      ent[k].t1 = e->t1 == 0 ? 0 : ns ? e->t1 : ticksToNs(e->t1);
      if (ent[k].t1 != 0 && ent[k].t1 <= ent[k].t0) ent[k].t1 = ent[k].t0 + 1; /* a span stays a span */
      k++;
    }
  }
  pthread_mutex_unlock(&pairs.lock);
  char path[PATH_MAX_BYTES + 16];
  expandPath(session.pathTemplate, session.identified ? session.rank : -1, session.written, path, sizeof(path));
  if (ent == NULL) {
    MSCCLPP_WARN(MSCCLPP_LOG_ENV, "MSCCLPP_TRACE: out of memory sorting %zu events; \"%s\" not written", n, path);
  } else {
    qsort(ent, k, sizeof(*ent), byTime);
    (void)writeFile(path, ent, k, dropped);
    free(ent);
  }
  session.written++;
  /* the next session starts after what was written (or lost) */
  struct traceThread** link = &session.threads;
  while (*link != NULL) {
    struct traceThread* th = *link;
    snapshotRelease(th);
    if (atomic_load(&th->exited)) {
      *link = th->next;
      threadFree(th);
      continue;
    }
    atomic_store_explicit(&th->base, th->end, memory_order_release);
    link = &th->next;
  }
}

static void writeAtExit(void) {
  pthread_mutex_lock(&session.lock);
  if (session.refs > 0) {
    atomic_store(&mscclppTraceActive, 0);
    writeSession();
    session.refs = 0;
  }
  pthread_mutex_unlock(&session.lock);
}

mscclppResult_t mscclppTraceAcquire(const char* pathTemplate, int64_t maxEvents) {
  if (pathTemplate == NULL || pathTemplate[0] == '\0')
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_ENV, "MSCCLPP_TRACE: the path is empty");
  if (strlen(pathTemplate) >= PATH_MAX_BYTES)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_ENV, "MSCCLPP_TRACE: the path is longer than %d bytes",
                      PATH_MAX_BYTES - 1);
  if (maxEvents < 1)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_ENV, "MSCCLPP_TRACE_EVENTS=%" PRId64 " must be >= 1",
                      maxEvents);
  pthread_mutex_lock(&session.lock);
  if (session.refs == 0) {
    snprintf(session.pathTemplate, sizeof(session.pathTemplate), "%s", pathTemplate);
    atomic_store(&sessionMaxEvents, (uint64_t)maxEvents);
    session.identified = 0;
    session.comm = 0;
    session.clockKnown = 0;
    session.clockOffset = session.clockRtt = 0;
    if (!session.atexitSet && atexit(writeAtExit) == 0) session.atexitSet = 1;
    static int clockChosen;
    if (!clockChosen) { /* once: ticks already recorded keep their meaning */
      mscclppTraceTsc = tscInvariant();
      clockChosen = 1;
    }
    clockPairAdd(1);
    atomic_store(&mscclppTraceActive, 1);
  }
  session.refs++;
  pthread_mutex_unlock(&session.lock);
  /* the creating thread records the collectives: its ring is made now, not
   * at its first call */
  if (self == NULL) (void)threadRegister();
  return mscclppSuccess;
}

int mscclppTraceSetIdentity(int rank, int nranks, uint64_t comm) {
  pthread_mutex_lock(&session.lock);
  int first = session.refs > 0 && !session.identified;
  if (first) {
    session.identified = 1;
    session.rank = rank;
    session.nranks = nranks;
    session.comm = comm;
  }
  pthread_mutex_unlock(&session.lock);
  return first;
}

void mscclppTraceSetClock(int64_t offsetNs, int64_t rttNs) {
  pthread_mutex_lock(&session.lock);
  session.clockKnown = 1;
  session.clockOffset = offsetNs;
  session.clockRtt = rttNs;
  pthread_mutex_unlock(&session.lock);
}

void mscclppTraceRelease(void) {
  pthread_mutex_lock(&session.lock);
  if (session.refs > 0 && --session.refs == 0) {
    atomic_store(&mscclppTraceActive, 0);
    writeSession();
  }
  pthread_mutex_unlock(&session.lock);
}
