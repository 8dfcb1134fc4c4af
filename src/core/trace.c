/* SPDX-License-Identifier: MIT */
/*
 * Trace buffers and the trace file (trace.h).
 *
 * Buffers: each thread that records gets one buffer, registered once (under
 * the session lock) and found again through a thread-local pointer. A buffer
 * is a ring of `capacity` events in chunks of CHUNK_EVENTS, allocated by
 * the owner when first used. Only the owner writes events: it fills the
 * slot, then publishes it with a release store of `count`, so recording
 * takes no lock and no atomic read-modify-write. The writer of the file
 * reads a buffer's events [base, count) after an acquire load of count
 * (it may do so while the owner goes on recording), then moves `base` to
 * what it read with a release store; the owner loads base with acquire
 * before reusing a slot, so a slot is overwritten only after the writer
 * has read it. A session records at most `capacity` events per thread;
 * later ones are counted as dropped.
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
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log.h"

#define CHUNK_EVENTS 4096u
#define PATH_MAX_BYTES 512
#define TRACK_TID_BASE (1u << 30) /* tids of tracks that are not threads: after every thread id */

atomic_int mscclppTraceActive;

struct traceThread {
  struct traceThread* next;
  int tid;
  char name[32];
  uint64_t capacity; /* events; a multiple of CHUNK_EVENTS */
  struct mscclppTraceEvent** chunks;
  _Atomic uint64_t count; /* events recorded since the thread's first (owner: release) */
  _Atomic uint64_t base;  /* the current session's first event (writer: release) */
  _Atomic uint64_t dropped;
  atomic_int exited;
  uint64_t end; /* the writer's: what it writes of this buffer (session.lock) */
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
  int64_t maxEvents;
  int identified, rank, nranks;
  uint64_t comm;
  int clockKnown;
  int64_t clockOffset, clockRtt;
} session = {.lock = PTHREAD_MUTEX_INITIALIZER};

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

static struct traceThread* threadRegister(void) {
  pthread_once(&keyOnce, makeKey);
  pthread_mutex_lock(&session.lock);
  int64_t maxEvents = session.maxEvents > 0 ? session.maxEvents : 1;
  pthread_mutex_unlock(&session.lock);
  uint64_t capacity = ((uint64_t)maxEvents + CHUNK_EVENTS - 1) / CHUNK_EVENTS * CHUNK_EVENTS;
  struct traceThread* th = (struct traceThread*)calloc(1, sizeof(*th));
  if (th == NULL) return NULL;
  th->chunks = (struct mscclppTraceEvent**)calloc(capacity / CHUNK_EVENTS, sizeof(*th->chunks));
  if (th->chunks == NULL) {
    free(th);
    return NULL;
  }
  th->capacity = capacity;
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

void mscclppTraceEmit(uint32_t type, uint32_t track, uint64_t t0, uint64_t t1, int nargs, const uint64_t* args) {
  struct traceThread* th = self;
  if (th == NULL && (th = threadRegister()) == NULL) return;
  uint64_t i = atomic_load_explicit(&th->count, memory_order_relaxed);
  if (i - atomic_load_explicit(&th->base, memory_order_acquire) >= th->capacity) {
    atomic_fetch_add_explicit(&th->dropped, 1, memory_order_relaxed);
    return;
  }
  uint64_t slot = i % th->capacity;
  struct mscclppTraceEvent* chunk = th->chunks[slot / CHUNK_EVENTS];
  if (chunk == NULL) {
    chunk = (struct mscclppTraceEvent*)malloc(CHUNK_EVENTS * sizeof(*chunk));
    if (chunk == NULL) {
      atomic_fetch_add_explicit(&th->dropped, 1, memory_order_relaxed);
      return;
    }
    th->chunks[slot / CHUNK_EVENTS] = chunk;
  }
  struct mscclppTraceEvent* e = &chunk[slot % CHUNK_EVENTS];
  if (nargs > MSCCLPP_TRACE_MAX_ARGS) nargs = MSCCLPP_TRACE_MAX_ARGS;
  e->t0 = t0;
  e->t1 = t1;
  e->type = (uint16_t)type;
  e->nargs = (uint16_t)nargs;
  e->track = track;
  for (int k = 0; k < nargs; k++) e->arg[k] = args[k];
  atomic_store_explicit(&th->count, i + 1, memory_order_release);
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
};

static int byTime(const void* a, const void* b) {
  const struct mscclppTraceEvent* x = ((const struct entry*)a)->e;
  const struct mscclppTraceEvent* y = ((const struct entry*)b)->e;
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
  const struct argSpec* s = &specs[e->type];
  const char* name = typeTable[e->type].name;
  if (name[0] == '\0') name = e->nargs > 0 ? (const char*)(uintptr_t)e->arg[0] : "?";
  fprintf(f, "{\"ph\":\"%s\",\"name\":", e->t1 != 0 ? "X" : "i");
  putString(f, name);
  fprintf(f, ",\"cat\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":", typeTable[e->type].cat, pid, trackTid(en));
  putMicros(f, e->t0);
  if (e->t1 != 0) {
    fputs(",\"dur\":", f);
    putMicros(f, e->t1 > e->t0 ? e->t1 - e->t0 : 0);
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

/* Write the session (session.lock held), then start the next one after it:
 * every buffer's base moves past what was written (an event recorded while
 * this runs goes into the next session's file), and buffers of exited
 * threads are freed. */
static void writeSession(void) {
  size_t n = 0;
  uint64_t dropped = 0;
  for (struct traceThread* th = session.threads; th != NULL; th = th->next) {
    th->end = atomic_load_explicit(&th->count, memory_order_acquire);
    n += (size_t)(th->end - atomic_load(&th->base));
  }
  struct entry* ent = (struct entry*)malloc((n > 0 ? n : 1) * sizeof(*ent));
  size_t k = 0;
  for (struct traceThread* th = session.threads; th != NULL; th = th->next) {
    dropped += atomic_exchange(&th->dropped, 0);
    for (uint64_t i = atomic_load(&th->base); ent != NULL && i < th->end; i++) {
      uint64_t slot = i % th->capacity;
      ent[k].e = &th->chunks[slot / CHUNK_EVENTS][slot % CHUNK_EVENTS];
      ent[k].th = th;
      k++;
    }
  }
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
    if (atomic_load(&th->exited)) {
      *link = th->next;
      for (uint64_t c = 0; c < th->capacity / CHUNK_EVENTS; c++) free(th->chunks[c]);
      free(th->chunks);
      free(th);
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
    session.maxEvents = maxEvents;
    session.identified = 0;
    session.comm = 0;
    session.clockKnown = 0;
    session.clockOffset = session.clockRtt = 0;
    if (!session.atexitSet && atexit(writeAtExit) == 0) session.atexitSet = 1;
    atomic_store(&mscclppTraceActive, 1);
  }
  session.refs++;
  pthread_mutex_unlock(&session.lock);
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
