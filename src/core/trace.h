/* SPDX-License-Identifier: MIT */
/*
 * Tracing (MSCCLPP_TRACE): events recorded into per-thread buffers and
 * written, per process, as one Chrome trace-event JSON file (Perfetto and
 * chrome://tracing open it; tools/trace/ merges and summarises them).
 *
 * Off (the default) an event site costs one load of a global flag and one
 * predictable branch: no clock read, no allocation, no call. The flag is
 * process-global, as the log level is, because the sites are in every layer
 * (bootstrap, proxy, transports, collectives) and most have no communicator
 * at hand; what the flag guards is per thread (see trace.c).
 *
 * A site:
 *     uint64_t t0 = mscclppTraceBegin();            // 0 when off
 *     ... the work ...
 *     if (t0 != 0) MSCCLPP_TRACE_EMIT(MSCCLPP_TRACE_CONN_WRITE, t0, mscclppTraceNow(),
 *                                     MSCCLPP_TRACE_S(name), MSCCLPP_TRACE_I(peer), bytes);
 * or for an instant: if (mscclppTraceOn()) MSCCLPP_TRACE_EMIT(type, mscclppTraceNow(), 0, ...).
 *
 * The events, their JSON names and their arguments are the table below:
 * one row per event type, X(ID, "name", "category", "arguments"), where
 * "arguments" lists `name:kind` pairs in the order a site passes them;
 * kinds: i (signed), u (unsigned), x (hex, written as a string), s (a
 * string that lives as long as the process: a literal or a static table's
 * entry, passed with MSCCLPP_TRACE_S). A row whose name is "" takes its
 * event name from its first argument (a string). Sites pass at most
 * MSCCLPP_TRACE_MAX_ARGS arguments.
 */
#ifndef MSCCLPP_SRC_CORE_TRACE_H_
#define MSCCLPP_SRC_CORE_TRACE_H_

#include <stdatomic.h>
#include <stdint.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "core/util.h"
#include "mscclpp/core.h"

/* clang-format off */
#define MSCCLPP_TRACE_EVENT_TABLE(X) \
  X(COMM_INIT,      "comm_init",            "api",       "comm:x rank:i nranks:i local_rank:i local_nranks:i status:i") \
  X(COMM_DESTROY,   "comm_destroy",         "api",       "comm:x rank:i") \
  X(COLL,           "",                     "coll",      "coll:s count:u size:u type:s op:s root:i backend:s algo:s nranks:i comm:x seq:u status:i") \
  X(P2P,            "sendrecv",             "coll",      "sends:u recvs:u size:u backend:s nranks:i comm:x seq:u status:i") \
  X(BS_CREATE,      "bootstrap.create",     "bootstrap", "rank:i nranks:i status:i") \
  X(BS_RENDEZVOUS,  "bootstrap.rendezvous", "bootstrap", "rank:i nranks:i status:i") \
  X(BS_CONNECT,     "bootstrap.connect",    "bootstrap", "peer:i status:i") \
  X(BS_BARRIER,     "bootstrap.barrier",    "bootstrap", "nranks:i status:i") \
  X(BS_ALLGATHER,   "bootstrap.allgather",  "bootstrap", "bytes:u nranks:i status:i") \
  X(BS_CLOCK,       "bootstrap.clock_sync", "bootstrap", "offset_ns:i rtt_ns:i rounds:u status:i") \
  X(PROXY_TRIGGER,  "proxy.trigger",        "proxy",     "fifo:i pos:u op:s") \
  X(PROXY_COMPLETE, "proxy.completed",      "proxy",     "fifo:i pos:u") \
  X(CONN_WRITE,     "conn.write",           "transport", "transport:s peer:i bytes:u status:i") \
  X(CONN_INLINE,    "conn.write_inline",    "transport", "transport:s peer:i bytes:u signal:u status:i") \
  X(CONN_SIGNAL,    "conn.signal",          "transport", "transport:s peer:i value:u status:i") \
  X(CONN_FLUSH,     "conn.flush",           "transport", "transport:s peer:i status:i") \
  X(NET_WRITE,      "net.write",            "net",       "what:s peer:i bytes:u seq:u status:i") \
  X(NET_REMOTE,     "net.remote_data",      "net",       "peer:i tag:u") \
  X(GPU_BLOCK,      "",                     "gpu",       "kernel:s block:u sm:u seq:u comm:x") \
  X(GPU_CLOCK,      "gpu.clock_sync",       "gpu",       "device:i offset_ns:i rtt_ns:i synced:u") \
  X(USER,           "",                     "user",      "name:s detail:s value:u")
/* clang-format on */

#define MSCCLPP_TRACE_ID(id, name, cat, args) MSCCLPP_TRACE_##id,
enum mscclppTraceType { MSCCLPP_TRACE_EVENT_TABLE(MSCCLPP_TRACE_ID) MSCCLPP_TRACE_TYPES };
#undef MSCCLPP_TRACE_ID

#define MSCCLPP_TRACE_MAX_ARGS 13

/* One recorded event: 128 bytes, two cache lines. */
struct mscclppTraceEvent {
  uint64_t t0;    /* trace ticks (mscclppTraceNow), or CLOCK_MONOTONIC ns with MSCCLPP_TRACE_TIME_NS */
  uint64_t t1;    /* end (a span), or 0 (an instant) */
  uint16_t type;  /* enum mscclppTraceType, | MSCCLPP_TRACE_TIME_NS */
  uint16_t nargs;
  uint32_t track; /* 0: the recording thread's; else a track of its own (mscclppTraceTrackName) */
  uint64_t arg[MSCCLPP_TRACE_MAX_ARGS];
};
_Static_assert(sizeof(struct mscclppTraceEvent) == 128, "a trace event is two cache lines");

/* Nonzero while a trace session is open (set and cleared by trace.c). */
extern atomic_int mscclppTraceActive;

static inline int mscclppTraceOn(void) {
  return __builtin_expect(atomic_load_explicit(&mscclppTraceActive, memory_order_relaxed) != 0, 0);
}
/* Nonzero when the trace's clock is the TSC (set at the process's first
 * session, never changed after). */
extern int mscclppTraceTsc;

/* The trace's clock, in ticks: the time-stamp counter on x86-64 where it
 * is invariant (it counts at a constant rate on every core; one rdtsc is
 * about half of a clock_gettime, and a traced call reads two), else
 * CLOCK_MONOTONIC ns. trace.c turns ticks into CLOCK_MONOTONIC ns when it
 * writes the file, from (ticks, ns) pairs it reads now and then. Never 0. */
static inline uint64_t mscclppTraceNow(void) {
#if defined(__x86_64__)
  if (__builtin_expect(mscclppTraceTsc != 0, 1)) return __rdtsc();
#endif
  return mscclppTimeNs();
}
/* The start of a span: the time when tracing is on, else 0 (no clock read). */
static inline uint64_t mscclppTraceBegin(void) { return mscclppTraceOn() ? mscclppTraceNow() : 0; }

/* A type's flag: the event's times are CLOCK_MONOTONIC ns, not ticks (a
 * GPU block's, from %globaltimer). */
#define MSCCLPP_TRACE_TIME_NS 0x8000u

/* Record one event on the calling thread's buffer (track 0) or on `track`.
 * Never fails: an event past the buffer's capacity is counted as dropped. */
void mscclppTraceEmit(uint32_t type, uint32_t track, uint64_t t0, uint64_t t1, int nargs, const uint64_t* args);

#define MSCCLPP_TRACE_S(s) ((uint64_t)(uintptr_t)(const char*)(s))
#define MSCCLPP_TRACE_I(v) ((uint64_t)(int64_t)(v))
#define MSCCLPP_TRACE_EMIT_ON(type, track, t0, t1, ...)                                                \
  do {                                                                                                  \
    const uint64_t trace_args_[] = {__VA_ARGS__};                                                        \
    mscclppTraceEmit((type), (track), (t0), (t1), (int)(sizeof(trace_args_) / sizeof(trace_args_[0])), \
                     trace_args_);                                                                      \
  } while (0)
#define MSCCLPP_TRACE_EMIT(type, t0, t1, ...) MSCCLPP_TRACE_EMIT_ON((type), 0u, (t0), (t1), __VA_ARGS__)

/* Count n events that were lost before they could be recorded (a GPU's
 * ring overrun): the file's "dropped" says how many events are missing. */
void mscclppTraceDrop(uint64_t n);

/* ---- tracks that are not threads (a GPU's blocks) ---- */

/* A track of its own for events a thread records on behalf of something
 * else: id in [1, 2^31), named `name` in the trace (copied; the first name
 * given to an id is kept). */
void mscclppTraceTrackName(uint32_t track, const char* name);

/* ---- the session ---- */

/* Open the process's trace session, or join the one open (every traced
 * communicator holds it from its creation to its destruction). `pathTemplate`
 * is MSCCLPP_TRACE: %r the rank, %p the pid, %h the host name, %% a '%'.
 * `maxEvents` (MSCCLPP_TRACE_EVENTS) bounds each thread's buffer.
 * mscclppInvalidArgument for an empty template or maxEvents < 1. */
mscclppResult_t mscclppTraceAcquire(const char* pathTemplate, int64_t maxEvents);
/* Name the file: the first communicator to call it in a session gives its
 * rank, size and id; later calls return 0 and change nothing. 1: this
 * communicator names the session's file. */
int mscclppTraceSetIdentity(int rank, int nranks, uint64_t comm);
/* The clock offset to the naming communicator's rank 0 (add it to this
 * process's times to get rank 0's), and the round trip it was measured
 * with, for the file's metadata. */
void mscclppTraceSetClock(int64_t offsetNs, int64_t rttNs);
/* Leave the session; the last one out writes the file (a failure to write
 * is logged, never returned: tracing never fails a communicator) and closes
 * the session. A process that exits with the session open writes it at
 * exit. */
void mscclppTraceRelease(void);

#endif /* MSCCLPP_SRC_CORE_TRACE_H_ */
