/* SPDX-License-Identifier: MIT */
/*
 * The hang report: per communicator, a lock-free "where am I" record (the
 * last call issued and completed on the host side, the wait the host is in),
 * and a writer that prints every live record of the process to stderr,
 * async-signal-safely (write(2) only), when a wait times out and, where
 * asked (MSCCLPP_REPORT=1, which mscclpp-run --report sets), on SIGUSR1.
 * mscclpp-run --report reads the reports of every rank and prints one
 * diagnosis (docs/DESIGN.md, "The hang report").
 *
 * The records are a fixed pool of MSCCLPP_REPORT_RECORDS slots that live as
 * long as the process, so that a signal handler never reads freed memory: a
 * communicator takes a slot at creation and gives it back at destruction; a
 * communicator made while every slot is taken has none (NULL), and the
 * hot-path functions below do nothing for it.
 *
 * Writers: only the thread that makes a communicator's calls writes its
 * record, with relaxed stores (no fence, no read-modify-write); a reader
 * (the report) may see one field of an update and not the next, which a
 * report, a snapshot of a stuck process, tolerates. Strings are pointers to
 * literals or static tables.
 *
 * Details (what a communicator's device-side waits wait for, its proxy's
 * queue) come from a source the layer above attaches to the record (comm
 * layer, comm/comm_report.c): the writer calls it with the record, and it
 * prints lines with the line functions below. Whatever a source reads must
 * stay mapped until it is unpublished and mscclppReportSync() has
 * returned: a writer in flight (another thread's timeout report, a signal
 * handler) counts itself, and Sync waits until none is left.
 *
 * Report format, one line per item, each starting "mscclpp-report: ":
 *   mscclpp-report: pid=P why=W records=K [detail=TEXT]
 *   mscclpp-report: pid=P comm=0xID rank=R nranks=N issued=KIND#SEQ completed=SEQ state=S
 *   mscclpp-report: pid=P comm=0xID rank=R wait=WHAT peer=Q sem=ID chan=NAME expect=V [has=V] call=KIND#SEQ
 *                   waited_ms=T timeout_ms=T
 *   mscclpp-report: pid=P comm=0xID rank=R devwait=WHAT state=waiting|timedout [peer=Q] [sem=ID chan=NAME]
 *                   expect=V has=V [call=KIND#SEQ] [waited_ms=T] where=BLOCK.THREAD|tTHREAD
 *   mscclpp-report: pid=P comm=0xID rank=R proxy=NAME tail=T [head=H] completed=C pending=N
 *   mscclpp-report: pid=P comm=0xID rank=R trigger=POS op=OP chan=C peer=Q bytes=B [dst=M src=M]
 *   mscclpp-report: pid=P end
 * W: signal (SIGUSR1), timeout (a wait gave up), error (another first error
 * of an abort object, with MSCCLPP_REPORT=1). S: idle (the last call issued
 * has completed), in-call, failed (it returned an error). issued=none#0
 * before the first call. A wait line (the host's own wait: the host
 * backend's collectives) comes only while a wait is published; sem is the
 * semaphore's id in the communicator's channels (0: none), chan what it
 * carries, has the signals arrived so far. A devwait line is a note of the
 * wait board (mscclpp/device.h, mscclppWaitNote): a device-side wait (a
 * kernel's, or a host-backend thread playing one) that has lasted 10 ms or
 * timed out; WHAT is semaphore, fifo-push, fifo-sync, fifo-flush or flag (a
 * collective kernel's). Proxy lines: a FIFO of the communicator's proxy,
 * then its first pending triggers decoded (chan: the trigger's semaphore
 * id, i.e. the port channel).
 */
#ifndef MSCCLPP_SRC_CORE_REPORT_H_
#define MSCCLPP_SRC_CORE_REPORT_H_

#include <stdint.h>

#include "core/params.h"

#define MSCCLPP_REPORT_RECORDS 64
#define MSCCLPP_REPORT_PREFIX "mscclpp-report: "

#define MSCCLPP_REPORT_KINDS 16 /* the kinds of the last calls, by number (a device note names a call by number) */

struct mscclppReportRecord;
/* Prints a communicator's details (report.h top); `rec` is its record. */
typedef void (*mscclppReportSource)(void* arg, const struct mscclppReportRecord* rec);

struct mscclppReportRecord {
  uint32_t used; /* __atomic: 1 while a communicator holds the slot */
  int rank, nranks;
  uint64_t commId;
  /* the application thread's calls (relaxed stores) */
  const char* issuedKind; /* a literal: "allreduce", "sendrecv", ... */
  uint64_t issuedSeq;     /* calls issued on the communicator, counted from 1 */
  uint64_t completedSeq;  /* the last call that returned success */
  uint64_t failedSeq;     /* the last call that returned an error */
  const char* kinds[MSCCLPP_REPORT_KINDS]; /* kinds[seq % 16]: the kind of call seq */
  /* the wait the host is in (relaxed stores; waiting last on begin, first on end) */
  uint32_t waiting;
  const char* waitWhat; /* "receive", "send", ... */
  const char* waitChan; /* what the semaphore carries: "data", "credit", ... */
  uint32_t waitSem;     /* the semaphore's id (mscclppSemaphoreDeviceHandle.id); 0: none */
  int waitPeer;
  uint64_t waitExpect;            /* the signal number waited for */
  const uint64_t* waitCounter;    /* the semaphore's inbound counter (host memory), or NULL */
  uint64_t waitSinceNs;           /* mscclppHostClockNs() */
  uint64_t waitTimeoutMs;
  /* the details' source (mscclppReportAttach); __atomic */
  mscclppReportSource source;
  void* sourceArg;
};

/* Take a record for a communicator (rank of nranks, its job hash); NULL when
 * the pool is empty. With params->report != 0, install the SIGUSR1 handler
 * (once per process; never over an application's own handler, which is then
 * named in a warning) and print the report on every abort's first error,
 * not only on timeouts. */
struct mscclppReportRecord* mscclppReportOpen(const struct mscclppParams* params, int rank, int nranks,
                                              uint64_t commId);
/* Give the record back (NULL: nothing). */
void mscclppReportClose(struct mscclppReportRecord* rec);

/* Write the report of every live record to stderr: `why` a literal
 * ("timeout", "signal", ...), `detail` one line of text or NULL. Uses only
 * write(2) and stack memory: safe in a signal handler. */
void mscclppReportWrite(const char* why, const char* detail);

/* An abort object's first error (gpu/abort.c): a report when it is a
 * timeout, or when MSCCLPP_REPORT=1 asked for reports on every error. */
void mscclppReportOnAbort(mscclppResult_t code, const char* text);

/* Attach the details' source of a record (NULL record: nothing); one per
 * record, replacing any. Detach unpublishes it and waits for the writers
 * in flight (mscclppReportSync): afterwards nothing the source reads is
 * read any more. */
void mscclppReportAttach(struct mscclppReportRecord* rec, mscclppReportSource fn, void* arg);
void mscclppReportDetach(struct mscclppReportRecord* rec);
/* Wait until no report is being written (at most about 2 s: a writer
 * blocked on a full stderr is given up on, with a warning). Call it after
 * unpublishing something a source reads, before freeing it. */
void mscclppReportSync(void);

/* The kind of call `seq` of the record, while it is among the last
 * MSCCLPP_REPORT_KINDS; NULL otherwise. */
const char* mscclppReportKindOf(const struct mscclppReportRecord* rec, uint64_t seq);

/* ---- lines, for sources: write(2) only, stack memory, no lock ---- */

struct mscclppReportLine {
  char buf[512];
  size_t len;
};
/* "mscclpp-report: pid=P comm=0xID rank=R" */
void mscclppReportLineStart(struct mscclppReportLine* l, const struct mscclppReportRecord* rec);
/* " key=value" */
void mscclppReportLineStr(struct mscclppReportLine* l, const char* key, const char* value);
void mscclppReportLineU(struct mscclppReportLine* l, const char* key, uint64_t value);
void mscclppReportLineI(struct mscclppReportLine* l, const char* key, int64_t value);
/* " key=KIND#SEQ" of the record's call `seq` ("?" for a kind no longer known) */
void mscclppReportLineCall(struct mscclppReportLine* l, const char* key, const struct mscclppReportRecord* rec,
                           uint64_t seq);
/* Write the line and a newline to stderr. */
void mscclppReportLineEmit(struct mscclppReportLine* l);

/* ---- hot path: relaxed stores only ---- */

/* A call starts: its number in *seq (0 without a record). */
static inline uint64_t mscclppReportIssue(struct mscclppReportRecord* rec, const char* kind) {
  if (rec == NULL) return 0;
  uint64_t seq = __atomic_load_n(&rec->issuedSeq, __ATOMIC_RELAXED) + 1; /* only this thread writes it */
  __atomic_store_n(&rec->kinds[seq % MSCCLPP_REPORT_KINDS], kind, __ATOMIC_RELAXED);
  __atomic_store_n(&rec->issuedKind, kind, __ATOMIC_RELAXED);
  __atomic_store_n(&rec->issuedSeq, seq, __ATOMIC_RELAXED);
  return seq;
}

/* The call `seq` returned (ok: with success). */
static inline void mscclppReportDone(struct mscclppReportRecord* rec, uint64_t seq, int ok) {
  if (rec == NULL) return;
  __atomic_store_n(ok ? &rec->completedSeq : &rec->failedSeq, seq, __ATOMIC_RELAXED);
}

/* The number of the call in progress (the last issued; 0 without a
 * record): what a backend tells its kernels, whose wait notes name it. */
static inline uint64_t mscclppReportCurrent(const struct mscclppReportRecord* rec) {
  return rec == NULL ? 0 : __atomic_load_n(&rec->issuedSeq, __ATOMIC_RELAXED);
}

/* What the host waits for: `what` it does ("receive", "send"), from `peer`,
 * on semaphore `sem` (its id; 0: none) that carries `chan` ("data",
 * "credit"), signal number `expect`; `counter` is the semaphore's inbound
 * counter in host memory (the report reads the signals arrived so far from
 * it) or NULL. */
struct mscclppReportWait {
  const char* what;
  const char* chan;
  uint32_t sem;
  int peer;
  uint64_t expect;
  const uint64_t* counter;
};

/* The host waits as `w` says, since sinceNs, for at most timeoutMs. */
static inline void mscclppReportWaitBegin(struct mscclppReportRecord* rec, const struct mscclppReportWait* w,
                                          uint64_t sinceNs, uint64_t timeoutMs) {
  if (rec == NULL) return;
  __atomic_store_n(&rec->waitWhat, w->what, __ATOMIC_RELAXED);
  __atomic_store_n(&rec->waitChan, w->chan, __ATOMIC_RELAXED);
  __atomic_store_n(&rec->waitSem, w->sem, __ATOMIC_RELAXED);
  __atomic_store_n(&rec->waitPeer, w->peer, __ATOMIC_RELAXED);
  __atomic_store_n(&rec->waitExpect, w->expect, __ATOMIC_RELAXED);
  __atomic_store_n(&rec->waitCounter, w->counter, __ATOMIC_RELAXED);
  __atomic_store_n(&rec->waitSinceNs, sinceNs, __ATOMIC_RELAXED);
  __atomic_store_n(&rec->waitTimeoutMs, timeoutMs, __ATOMIC_RELAXED);
  __atomic_store_n(&rec->waiting, 1u, __ATOMIC_RELAXED);
}

static inline void mscclppReportWaitEnd(struct mscclppReportRecord* rec) {
  if (rec != NULL) __atomic_store_n(&rec->waiting, 0u, __ATOMIC_RELAXED);
}

#endif /* MSCCLPP_SRC_CORE_REPORT_H_ */
