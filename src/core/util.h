/* SPDX-License-Identifier: MIT */
/* Small utilities every layer uses: clocks, deadlines, random bytes, SipHash. */
#ifndef MSCCLPP_SRC_CORE_UTIL_H_
#define MSCCLPP_SRC_CORE_UTIL_H_

#include <stddef.h>
#include <stdint.h>

#include "mscclpp/core.h"

/* Monotonic clock in nanoseconds. */
uint64_t mscclppTimeNs(void);

/* A point in monotonic time after which a bounded wait gives up. */
typedef struct {
  uint64_t endNs;
} mscclppDeadline;

/* A deadline `seconds` from now (seconds <= 0 means already expired). */
mscclppDeadline mscclppDeadlineIn(double seconds);
/* 1 when the deadline has passed. */
int mscclppDeadlinePassed(mscclppDeadline d);
/* Milliseconds left, clamped to [0, INT32_MAX] (for poll()). */
int mscclppDeadlineRemainingMs(mscclppDeadline d);

/* Yielding a core only while that lets another thread run (the host
 * backend's spinning threads usually outnumber the cores). A yield that
 * hands the core over takes the other thread's turn, microseconds; one with
 * nobody else runnable on this core returns at once (bench/HISTORY.md,
 * "Network transport on the GPU machine's CPUs", the breakdown of one hop
 * on the 2-core machine) and only costs the spinner its next polls.
 * mscclppYieldGated yields and times the yield; after
 * MSCCLPP_YIELD_FAST_RUN fast ones in a row it skips yields for `sparseNs`
 * after the last, until one is slow (someone wanted the core): then it
 * yields on every call again. A thread that newly queues behind the caller
 * waits at most sparseNs once. Start with a zeroed gate; one gate per
 * thread. */
#define MSCCLPP_YIELD_FAST_NS 1000u
#define MSCCLPP_YIELD_FAST_RUN 32u
struct mscclppYieldGate {
  uint64_t endNs; /* when the last yield returned */
  uint32_t fast;  /* fast yields in a row (saturates at MSCCLPP_YIELD_FAST_RUN) */
};
/* Yield now unless the gate says it is not needed; 1 when it yielded. */
int mscclppYieldGated(struct mscclppYieldGate* g, uint64_t sparseNs);

/* Fill buf with n cryptographically random bytes (getrandom). */
mscclppResult_t mscclppRandomBytes(void* buf, size_t n);

/* SipHash-2-4 of data under a 16-byte key: a keyed PRF used to prove
 * knowledge of the job secret without sending it. */
uint64_t mscclppSipHash(const uint8_t key[16], const void* data, size_t len);

/* Hex encode n bytes into out (2n+1 bytes). */
void mscclppHexEncode(const uint8_t* in, size_t n, char* out);
/* Decode exactly 2n hex digits; mscclppInvalidArgument otherwise (not logged). */
mscclppResult_t mscclppHexDecode(const char* in, uint8_t* out, size_t n);

#endif /* MSCCLPP_SRC_CORE_UTIL_H_ */
