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
 * Report format, one line per item, each starting "mscclpp-report: ":
 *   mscclpp-report: pid=P why=W records=K [detail=TEXT]
 *   mscclpp-report: pid=P comm=0xID rank=R nranks=N issued=KIND#SEQ completed=SEQ state=S
 *   mscclpp-report: pid=P comm=0xID rank=R wait=WHAT peer=Q sem=NAME expect=V call=KIND#SEQ waited_ms=T timeout_ms=T
 *   mscclpp-report: pid=P end
 * W: signal (SIGUSR1), timeout (a wait gave up), error (another first error
 * of an abort object, with MSCCLPP_REPORT=1). S: idle (the last call issued
 * has completed), in-call, failed (it returned an error). issued=none#0
 * before the first call. A wait line comes only while a wait is published.
 */
#ifndef MSCCLPP_SRC_CORE_REPORT_H_
#define MSCCLPP_SRC_CORE_REPORT_H_

#include <stdint.h>

#include "core/params.h"

#define MSCCLPP_REPORT_RECORDS 64
#define MSCCLPP_REPORT_PREFIX "mscclpp-report: "

struct mscclppReportRecord {
  uint32_t used; /* __atomic: 1 while a communicator holds the slot */
  int rank, nranks;
  uint64_t commId;
  /* the application thread's calls (relaxed stores) */
  const char* issuedKind; /* a literal: "allreduce", "sendrecv", ... */
  uint64_t issuedSeq;     /* calls issued on the communicator, counted from 1 */
  uint64_t completedSeq;  /* the last call that returned success */
  uint64_t failedSeq;     /* the last call that returned an error */
  /* the wait the host is in (relaxed stores; waiting last on begin, first on end) */
  uint32_t waiting;
  const char* waitWhat; /* "receive", "send credit", ... */
  const char* waitSem;  /* which semaphore: "data", "credit", ... */
  int waitPeer;
  uint64_t waitExpect; /* the signal number waited for */
  uint64_t waitSinceNs; /* mscclppHostClockNs() */
  uint64_t waitTimeoutMs;
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

/* ---- hot path: relaxed stores only ---- */

/* A call starts: its number in *seq (0 without a record). */
static inline uint64_t mscclppReportIssue(struct mscclppReportRecord* rec, const char* kind) {
  if (rec == NULL) return 0;
  uint64_t seq = __atomic_load_n(&rec->issuedSeq, __ATOMIC_RELAXED) + 1; /* only this thread writes it */
  __atomic_store_n(&rec->issuedKind, kind, __ATOMIC_RELAXED);
  __atomic_store_n(&rec->issuedSeq, seq, __ATOMIC_RELAXED);
  return seq;
}

/* The call `seq` returned (ok: with success). */
static inline void mscclppReportDone(struct mscclppReportRecord* rec, uint64_t seq, int ok) {
  if (rec == NULL) return;
  __atomic_store_n(ok ? &rec->completedSeq : &rec->failedSeq, seq, __ATOMIC_RELAXED);
}

/* The host waits for `peer` (what, which semaphore, which signal number),
 * since sinceNs, for at most timeoutMs. */
static inline void mscclppReportWaitBegin(struct mscclppReportRecord* rec, const char* what, const char* sem, int peer,
                                          uint64_t expect, uint64_t sinceNs, uint64_t timeoutMs) {
  if (rec == NULL) return;
  __atomic_store_n(&rec->waitWhat, what, __ATOMIC_RELAXED);
  __atomic_store_n(&rec->waitSem, sem, __ATOMIC_RELAXED);
  __atomic_store_n(&rec->waitPeer, peer, __ATOMIC_RELAXED);
  __atomic_store_n(&rec->waitExpect, expect, __ATOMIC_RELAXED);
  __atomic_store_n(&rec->waitSinceNs, sinceNs, __ATOMIC_RELAXED);
  __atomic_store_n(&rec->waitTimeoutMs, timeoutMs, __ATOMIC_RELAXED);
  __atomic_store_n(&rec->waiting, 1u, __ATOMIC_RELAXED);
}

static inline void mscclppReportWaitEnd(struct mscclppReportRecord* rec) {
  if (rec != NULL) __atomic_store_n(&rec->waiting, 0u, __ATOMIC_RELAXED);
}

#endif /* MSCCLPP_SRC_CORE_REPORT_H_ */
