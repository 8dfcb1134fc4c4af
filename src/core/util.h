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
