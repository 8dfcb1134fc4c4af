/* SPDX-License-Identifier: MIT */
#include "core/util.h"

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "core/error.h"
#include "core/log.h"

uint64_t mscclppTimeNs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int mscclppYieldGated(struct mscclppYieldGate* g, uint64_t sparseNs) {
  uint64_t now = mscclppTimeNs();
  if (g->fast >= MSCCLPP_YIELD_FAST_RUN && now - g->endNs < sparseNs) return 0;
  sched_yield();
  g->endNs = mscclppTimeNs();
  if (g->endNs - now >= MSCCLPP_YIELD_FAST_NS) g->fast = 0;
  else if (g->fast < MSCCLPP_YIELD_FAST_RUN) g->fast++;
  return 1;
}

mscclppDeadline mscclppDeadlineIn(double seconds) {
  mscclppDeadline d;
  uint64_t now = mscclppTimeNs();
  if (seconds <= 0) {
    d.endNs = now;
  } else if (seconds > 1e9) {
    d.endNs = UINT64_MAX;
  } else {
    d.endNs = now + (uint64_t)(seconds * 1e9);
  }
  return d;
}

int mscclppDeadlinePassed(mscclppDeadline d) { return mscclppTimeNs() >= d.endNs; }

int mscclppDeadlineRemainingMs(mscclppDeadline d) {
  uint64_t now = mscclppTimeNs();
  if (now >= d.endNs) return 0;
  uint64_t ms = (d.endNs - now + 999999) / 1000000;
  return ms > INT32_MAX ? INT32_MAX : (int)ms;
}

mscclppResult_t mscclppRandomBytes(void* buf, size_t n) {
  uint8_t* p = (uint8_t*)buf;
  while (n > 0) {
    ssize_t got = getrandom(p, n, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return mscclppErr(mscclppSystemError, MSCCLPP_LOG_INIT, "getrandom failed: %s", strerror(errno));
    }
    p += got;
    n -= (size_t)got;
  }
  return mscclppSuccess;
}

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND            \
  do {                      \
    v0 += v1;               \
    v1 = ROTL(v1, 13);      \
    v1 ^= v0;               \
    v0 = ROTL(v0, 32);      \
    v2 += v3;               \
    v3 = ROTL(v3, 16);      \
    v3 ^= v2;               \
    v0 += v3;               \
    v3 = ROTL(v3, 21);      \
    v3 ^= v0;               \
    v2 += v1;               \
    v1 = ROTL(v1, 17);      \
    v1 ^= v2;               \
    v2 = ROTL(v2, 32);      \
  } while (0)

static uint64_t load64le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

uint64_t mscclppSipHash(const uint8_t key[16], const void* data, size_t len) {
  const uint8_t* in = (const uint8_t*)data;
  uint64_t k0 = load64le(key), k1 = load64le(key + 8);
  uint64_t v0 = 0x736f6d6570736575ull ^ k0, v1 = 0x646f72616e646f6dull ^ k1;
  uint64_t v2 = 0x6c7967656e657261ull ^ k0, v3 = 0x7465646279746573ull ^ k1;
  size_t full = len & ~(size_t)7;
  for (size_t i = 0; i < full; i += 8) {
    uint64_t m = load64le(in + i);
    v3 ^= m;
    SIPROUND;
    SIPROUND;
    v0 ^= m;
  }
  uint64_t b = ((uint64_t)len) << 56;
  for (size_t i = 0; i < (len & 7); i++) b |= ((uint64_t)in[full + i]) << (8 * i);
  v3 ^= b;
  SIPROUND;
  SIPROUND;
  v0 ^= b;
  v2 ^= 0xff;
  SIPROUND;
  SIPROUND;
  SIPROUND;
  SIPROUND;
  return v0 ^ v1 ^ v2 ^ v3;
}

void mscclppHexEncode(const uint8_t* in, size_t n, char* out) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = digits[in[i] >> 4];
    out[2 * i + 1] = digits[in[i] & 15];
  }
  out[2 * n] = '\0';
}

static int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

mscclppResult_t mscclppHexDecode(const char* in, uint8_t* out, size_t n) {
  if (strlen(in) != 2 * n) return mscclppInvalidArgument;
  for (size_t i = 0; i < n; i++) {
    int hi = hexValue(in[2 * i]), lo = hexValue(in[2 * i + 1]);
    if (hi < 0 || lo < 0) return mscclppInvalidArgument;
    out[i] = (uint8_t)(hi << 4 | lo);
  }
  return mscclppSuccess;
}
