/* SPDX-License-Identifier: MIT */
/*
 * The hang report (report.h): the pool of records, the SIGUSR1 handler and
 * the writer. The writer runs in a signal handler, so it formats into stack
 * buffers by hand and calls nothing but write(2) and clock_gettime(2), both
 * async-signal-safe; it takes no lock (a handler that interrupts a thread
 * holding one would deadlock). The records' sources (report.h) run inside
 * it under the same rules. A writer counts itself in `writers` for its
 * whole run, so that mscclppReportSync can tell when nothing a source
 * unpublished is read any more (a count, not a lock: a handler that
 * interrupts the thread in Sync finishes before Sync goes on).
 */
#include "core/report.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"

/* Process-global, as the trace flag is: a signal handler has no other way to
 * find the communicators, and the slots must outlive them (report.h). */
static struct mscclppReportRecord pool[MSCCLPP_REPORT_RECORDS];
static int reportAllErrors;    /* __atomic: some communicator was made with MSCCLPP_REPORT=1 */
static int handlerState;       /* __atomic: 0 not tried, 1 installed, 2 refused (another handler) */
static int writers;            /* __atomic: reports being written now */
static int writerTid;          /* __atomic: the thread writing a report's lines now, 0 when none */
static int signalDeferred;     /* __atomic: SIGUSR1 came while its thread wrote a report */

/* ---- formatting into a line, by hand ---- */

static void put(struct mscclppReportLine* l, const char* s) {
  if (s == NULL) s = "?";
  for (; *s != '\0' && l->len < sizeof(l->buf) - 1; s++) l->buf[l->len++] = (*s == '\n' || *s == '\r') ? ' ' : *s;
}

static void putU(struct mscclppReportLine* l, uint64_t v) {
  char tmp[24];
  int n = 0;
  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v != 0);
  while (n > 0 && l->len < sizeof(l->buf) - 1) l->buf[l->len++] = tmp[--n];
}

static void putI(struct mscclppReportLine* l, int64_t v) {
  if (v < 0) {
    put(l, "-");
    putU(l, (uint64_t)0 - (uint64_t)v);
  } else {
    putU(l, (uint64_t)v);
  }
}

static void putHex(struct mscclppReportLine* l, uint64_t v) {
  static const char digits[] = "0123456789abcdef";
  put(l, "0x");
  for (int i = 15; i >= 0 && l->len < sizeof(l->buf) - 1; i--) l->buf[l->len++] = digits[(v >> (4 * i)) & 15];
}

/* The line's prefix: "mscclpp-report: pid=P ". */
static void start(struct mscclppReportLine* l, int64_t pid) {
  l->len = 0;
  put(l, MSCCLPP_REPORT_PREFIX "pid=");
  putI(l, pid);
}

static void emit(struct mscclppReportLine* l) {
  l->buf[l->len++] = '\n'; /* put() leaves room for it */
  size_t off = 0;
  while (off < l->len) {
    ssize_t n = write(2, l->buf + off, l->len - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    off += (size_t)n;
  }
}

static uint64_t nowNs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- lines for sources ---- */

void mscclppReportLineStart(struct mscclppReportLine* l, const struct mscclppReportRecord* rec) {
  struct mscclppReportLine* m = l;
  start(m, (int64_t)getpid());
  put(m, " comm=");
  putHex(m, __atomic_load_n(&rec->commId, __ATOMIC_RELAXED));
  put(m, " rank=");
  putI(m, __atomic_load_n(&rec->rank, __ATOMIC_RELAXED));
}

void mscclppReportLineStr(struct mscclppReportLine* l, const char* key, const char* value) {
  struct mscclppReportLine* m = l;
  put(m, " ");
  put(m, key);
  put(m, "=");
  put(m, value);
}

void mscclppReportLineU(struct mscclppReportLine* l, const char* key, uint64_t value) {
  struct mscclppReportLine* m = l;
  put(m, " ");
  put(m, key);
  put(m, "=");
  putU(m, value);
}

void mscclppReportLineI(struct mscclppReportLine* l, const char* key, int64_t value) {
  struct mscclppReportLine* m = l;
  put(m, " ");
  put(m, key);
  put(m, "=");
  putI(m, value);
}

const char* mscclppReportKindOf(const struct mscclppReportRecord* rec, uint64_t seq) {
  uint64_t issued = __atomic_load_n(&rec->issuedSeq, __ATOMIC_RELAXED);
  if (seq == 0 || seq > issued || issued - seq >= MSCCLPP_REPORT_KINDS) return NULL;
  return __atomic_load_n(&rec->kinds[seq % MSCCLPP_REPORT_KINDS], __ATOMIC_RELAXED);
}

void mscclppReportLineCall(struct mscclppReportLine* l, const char* key, const struct mscclppReportRecord* rec,
                           uint64_t seq) {
  const char* kind = mscclppReportKindOf(rec, seq);
  struct mscclppReportLine* m = l;
  put(m, " ");
  put(m, key);
  put(m, "=");
  put(m, seq == 0 ? "none" : kind != NULL ? kind : "?");
  put(m, "#");
  putU(m, seq);
}

void mscclppReportLineEmit(struct mscclppReportLine* l) { emit(l); }

/* One report's lines together: a second writer (a thread's error report
 * and the SIGUSR1 handler, say) waits up to 200 ms for the first to finish,
 * so that a reader can tell which report a line belongs to (mscclpp-run
 * reads a call found in progress by an error report as failing). No lock:
 * a handler that interrupted this thread's own report cannot wait for it
 * (the SIGUSR1 report is then written after it, onReportSignal), and a
 * stuck writer only delays the next. 1: this call has the turn; 0: it
 * writes without; -1: this thread's own report is being written. */
static int reportTurn(void) {
  const int me = (int)gettid();
  for (int i = 0; i < 400; i++) {
    int none = 0;
    if (__atomic_compare_exchange_n(&writerTid, &none, me, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return 1;
    if (none == me) return -1;
    struct timespec ts = {0, 500000};
    nanosleep(&ts, NULL);
  }
  return 0;
}

static void writeReport(const char* why, const char* detail, int turn);

void mscclppReportWrite(const char* why, const char* detail) { writeReport(why, detail, reportTurn()); }

static void writeReport(const char* why, const char* detail, int turn) {
  int saved = errno;
  __atomic_add_fetch(&writers, 1, __ATOMIC_SEQ_CST); /* before any source is read (mscclppReportSync) */
  const int64_t pid = (int64_t)getpid();
  struct mscclppReportLine l;
  int n = 0;
  for (int i = 0; i < MSCCLPP_REPORT_RECORDS; i++) n += __atomic_load_n(&pool[i].used, __ATOMIC_ACQUIRE) == 1;
  start(&l, pid);
  put(&l, " why=");
  put(&l, why);
  put(&l, " records=");
  putI(&l, n);
  if (detail != NULL) {
    put(&l, " detail=");
    put(&l, detail);
  }
  emit(&l);
  for (int i = 0; i < MSCCLPP_REPORT_RECORDS; i++) {
    const struct mscclppReportRecord* r = &pool[i];
    if (__atomic_load_n(&r->used, __ATOMIC_ACQUIRE) != 1) continue; /* free, or being filled */
    const uint64_t commId = __atomic_load_n(&r->commId, __ATOMIC_RELAXED);
    const int rank = __atomic_load_n(&r->rank, __ATOMIC_RELAXED);
    const uint64_t issued = __atomic_load_n(&r->issuedSeq, __ATOMIC_RELAXED);
    const uint64_t completed = __atomic_load_n(&r->completedSeq, __ATOMIC_RELAXED);
    const uint64_t failed = __atomic_load_n(&r->failedSeq, __ATOMIC_RELAXED);
    const char* kind = __atomic_load_n(&r->issuedKind, __ATOMIC_RELAXED);
    start(&l, pid);
    put(&l, " comm=");
    putHex(&l, commId);
    put(&l, " rank=");
    putI(&l, rank);
    put(&l, " nranks=");
    putI(&l, __atomic_load_n(&r->nranks, __ATOMIC_RELAXED));
    put(&l, " issued=");
    put(&l, issued == 0 || kind == NULL ? "none" : kind);
    put(&l, "#");
    putU(&l, issued);
    put(&l, " completed=");
    putU(&l, completed);
    put(&l, " state=");
    put(&l, issued == completed ? "idle" : issued == failed ? "failed" : "in-call");
    emit(&l);
    if (__atomic_load_n(&r->waiting, __ATOMIC_RELAXED) == 0) continue;
    const uint64_t since = __atomic_load_n(&r->waitSinceNs, __ATOMIC_RELAXED);
    const uint64_t now = nowNs();
    start(&l, pid);
    put(&l, " comm=");
    putHex(&l, commId);
    put(&l, " rank=");
    putI(&l, rank);
    put(&l, " wait=");
    put(&l, __atomic_load_n(&r->waitWhat, __ATOMIC_RELAXED));
    put(&l, " peer=");
    putI(&l, __atomic_load_n(&r->waitPeer, __ATOMIC_RELAXED));
    put(&l, " sem=");
    putU(&l, __atomic_load_n(&r->waitSem, __ATOMIC_RELAXED));
    put(&l, " chan=");
    put(&l, __atomic_load_n(&r->waitChan, __ATOMIC_RELAXED));
    put(&l, " expect=");
    putU(&l, __atomic_load_n(&r->waitExpect, __ATOMIC_RELAXED));
    const uint64_t* counter = __atomic_load_n(&r->waitCounter, __ATOMIC_RELAXED);
    if (counter != NULL) {
      put(&l, " has=");
      putU(&l, __atomic_load_n(counter, __ATOMIC_RELAXED));
    }
    put(&l, " call=");
    put(&l, issued == 0 || kind == NULL ? "none" : kind);
    put(&l, "#");
    putU(&l, issued);
    put(&l, " waited_ms=");
    putU(&l, now > since ? (now - since) / 1000000u : 0);
    put(&l, " timeout_ms=");
    putU(&l, __atomic_load_n(&r->waitTimeoutMs, __ATOMIC_RELAXED));
    emit(&l);
  }
  /* the details, once every record's own lines are out */
  for (int i = 0; i < MSCCLPP_REPORT_RECORDS; i++) {
    const struct mscclppReportRecord* r = &pool[i];
    if (__atomic_load_n(&r->used, __ATOMIC_ACQUIRE) != 1) continue;
    mscclppReportSource fn = __atomic_load_n(&r->source, __ATOMIC_SEQ_CST);
    void* arg = __atomic_load_n(&r->sourceArg, __ATOMIC_SEQ_CST);
    if (fn != NULL && arg != NULL) fn(arg, r);
  }
  start(&l, pid);
  put(&l, " end");
  emit(&l);
  __atomic_sub_fetch(&writers, 1, __ATOMIC_SEQ_CST);
  if (turn == 1) {
    __atomic_store_n(&writerTid, 0, __ATOMIC_RELEASE);
    if (__atomic_exchange_n(&signalDeferred, 0, __ATOMIC_ACQ_REL)) writeReport("signal", NULL, reportTurn());
  }
  errno = saved;
}

void mscclppReportAttach(struct mscclppReportRecord* rec, mscclppReportSource fn, void* arg) {
  if (rec == NULL) return;
  __atomic_store_n(&rec->source, (mscclppReportSource)NULL, __ATOMIC_SEQ_CST);
  __atomic_store_n(&rec->sourceArg, arg, __ATOMIC_SEQ_CST);
  __atomic_store_n(&rec->source, fn, __ATOMIC_SEQ_CST);
}

void mscclppReportDetach(struct mscclppReportRecord* rec) {
  if (rec == NULL) return;
  __atomic_store_n(&rec->source, (mscclppReportSource)NULL, __ATOMIC_SEQ_CST);
  __atomic_store_n(&rec->sourceArg, (void*)NULL, __ATOMIC_SEQ_CST);
  mscclppReportSync();
}

void mscclppReportSync(void) {
  /* seq_cst with the writers' increment: a writer that did not see the
   * unpublished pointer is counted here, one that comes later cannot see
   * it. A writer blocked in write(2) (nobody reads stderr) would hold this
   * forever: after about 2 s it is given up on. */
  for (int i = 0; i < 2000 && __atomic_load_n(&writers, __ATOMIC_SEQ_CST) != 0; i++) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  if (__atomic_load_n(&writers, __ATOMIC_SEQ_CST) != 0)
    MSCCLPP_WARN(MSCCLPP_LOG_INIT, "hang report: a report still being written after 2 s (stderr blocked?); going on");
}

static void onReportSignal(int sig) {
  (void)sig;
  const int turn = reportTurn();
  if (turn == -1) { /* this thread was writing a report: the signal's comes right after it */
    __atomic_store_n(&signalDeferred, 1, __ATOMIC_RELEASE);
    return;
  }
  writeReport("signal", NULL, turn);
}

/* Install the SIGUSR1 handler unless the application has its own. */
static void installHandler(void) {
  int expected = 0;
  if (!__atomic_compare_exchange_n(&handlerState, &expected, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return;
  struct sigaction old;
  memset(&old, 0, sizeof(old));
  if (sigaction(SIGUSR1, NULL, &old) == 0 && (old.sa_flags & SA_SIGINFO) == 0 && old.sa_handler != SIG_DFL &&
      old.sa_handler != SIG_IGN) {
    __atomic_store_n(&handlerState, 2, __ATOMIC_RELEASE);
    MSCCLPP_WARN(MSCCLPP_LOG_INIT,
                 "MSCCLPP_REPORT=1: SIGUSR1 already has a handler in this process; leaving it (no report on "
                 "SIGUSR1; reports on timeouts still come)");
    return;
  }
  if ((old.sa_flags & SA_SIGINFO) != 0 && old.sa_sigaction != NULL) {
    __atomic_store_n(&handlerState, 2, __ATOMIC_RELEASE);
    MSCCLPP_WARN(MSCCLPP_LOG_INIT,
                 "MSCCLPP_REPORT=1: SIGUSR1 already has a handler in this process; leaving it (no report on "
                 "SIGUSR1; reports on timeouts still come)");
    return;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = onReportSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  if (sigaction(SIGUSR1, &sa, NULL) != 0) {
    __atomic_store_n(&handlerState, 2, __ATOMIC_RELEASE);
    MSCCLPP_WARN(MSCCLPP_LOG_INIT, "MSCCLPP_REPORT=1: cannot install the SIGUSR1 handler: %s", strerror(errno));
  }
}

struct mscclppReportRecord* mscclppReportOpen(const struct mscclppParams* params, int rank, int nranks,
                                              uint64_t commId) {
  if (params->report != 0) {
    __atomic_store_n(&reportAllErrors, 1, __ATOMIC_RELAXED);
    installHandler();
  }
  for (int i = 0; i < MSCCLPP_REPORT_RECORDS; i++) {
    struct mscclppReportRecord* r = &pool[i];
    uint32_t expected = 0;
    if (__atomic_load_n(&r->used, __ATOMIC_RELAXED) != 0 ||
        !__atomic_compare_exchange_n(&r->used, &expected, 2u, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
      continue;
    /* 2 while it is filled: the writer skips it */
    __atomic_store_n(&r->rank, rank, __ATOMIC_RELAXED);
    __atomic_store_n(&r->nranks, nranks, __ATOMIC_RELAXED);
    __atomic_store_n(&r->commId, commId, __ATOMIC_RELAXED);
    __atomic_store_n(&r->issuedKind, (const char*)NULL, __ATOMIC_RELAXED);
    __atomic_store_n(&r->issuedSeq, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&r->completedSeq, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&r->failedSeq, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&r->waiting, 0u, __ATOMIC_RELAXED);
    __atomic_store_n(&r->waitCounter, (const uint64_t*)NULL, __ATOMIC_RELAXED);
    for (int k = 0; k < MSCCLPP_REPORT_KINDS; k++) __atomic_store_n(&r->kinds[k], (const char*)NULL, __ATOMIC_RELAXED);
    __atomic_store_n(&r->source, (mscclppReportSource)NULL, __ATOMIC_RELAXED);
    __atomic_store_n(&r->sourceArg, (void*)NULL, __ATOMIC_RELAXED);
    __atomic_store_n(&r->used, 1u, __ATOMIC_RELEASE);
    return r;
  }
  MSCCLPP_INFO(MSCCLPP_LOG_INIT, "hang report: all %d records in use; communicator 0x%016llx of rank %d has none",
               MSCCLPP_REPORT_RECORDS, (unsigned long long)commId, rank);
  return NULL;
}

void mscclppReportClose(struct mscclppReportRecord* rec) {
  if (rec == NULL) return;
  mscclppReportDetach(rec);
  __atomic_store_n(&rec->used, 0u, __ATOMIC_RELEASE);
}

void mscclppReportOnAbort(mscclppResult_t code, const char* text) {
  if (code == mscclppTimeout)
    mscclppReportWrite("timeout", text);
  else if (__atomic_load_n(&reportAllErrors, __ATOMIC_RELAXED))
    mscclppReportWrite("error", text);
}
