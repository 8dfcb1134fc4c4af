/* The endpoint a rank sends when it connects: encoding and parsing (pure
 * functions, no I/O or logging; the fuzzer drives the parser directly). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/util.h"
#include "transport/transport.h"

/* ---- endpoint wire format ----------------------------------------------------------
 *   0 magic u32 "MSEP" | 4 version u16 | 6 zero u16 | 8 rank i32 | 12 peer i32
 *  16 tag i32 | 20 pid u32 | 24 process token u64 | 32 host hash u64
 *  40 available u32 | 44 requested u32 | 48 device i32 | 52 host name length u8
 *  53 host name (63, zero padded) | 116 zero u32 | 120 SipHash(secret, 0..120) */
#define EP_MAGIC 0x5045534du /* "MSEP" */
#define EP_VERSION 1
#define EP_NAME_OFF 53
#define EP_NAME_MAX (MSCCLPP_HOST_NAME_MAX - 1)
#define EP_MAC_OFF 120
_Static_assert(EP_NAME_OFF + EP_NAME_MAX + 4 == EP_MAC_OFF, "endpoint layout");
_Static_assert(EP_MAC_OFF + 8 == MSCCLPP_ENDPOINT_BYTES, "endpoint size");

static void put16(uint8_t* p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}
static void put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint16_t get16(const uint8_t* p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t get32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
  return v;
}
static uint64_t get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

void mscclppEndpointEncode(const struct mscclppEndpoint* ep, const uint8_t secret[MSCCLPP_SECRET_BYTES],
                           uint8_t buf[MSCCLPP_ENDPOINT_BYTES]) {
  memset(buf, 0, MSCCLPP_ENDPOINT_BYTES);
  put32(buf, EP_MAGIC);
  put16(buf + 4, EP_VERSION);
  put32(buf + 8, (uint32_t)ep->rank);
  put32(buf + 12, (uint32_t)ep->peer);
  put32(buf + 16, (uint32_t)ep->tag);
  put32(buf + 20, ep->pid);
  put64(buf + 24, ep->processToken);
  put64(buf + 32, ep->hostHash);
  put32(buf + 40, ep->available);
  put32(buf + 44, ep->requested);
  put32(buf + 48, (uint32_t)ep->device);
  size_t n = strnlen(ep->hostName, EP_NAME_MAX);
  buf[52] = (uint8_t)n;
  memcpy(buf + EP_NAME_OFF, ep->hostName, n);
  put64(buf + EP_MAC_OFF, mscclppSipHash(secret, buf, EP_MAC_OFF));
}

static mscclppResult_t refuse(char* why, size_t whyLen, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
static mscclppResult_t refuse(char* why, size_t whyLen, const char* fmt, ...) {
  if (why != NULL && whyLen > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, whyLen, fmt, ap);
    va_end(ap);
  }
  return mscclppInvalidArgument;
}

mscclppResult_t mscclppEndpointDecode(const uint8_t buf[MSCCLPP_ENDPOINT_BYTES],
                                      const uint8_t secret[MSCCLPP_SECRET_BYTES], struct mscclppEndpoint* out,
                                      char* why, size_t whyLen) {
  if (get32(buf) != EP_MAGIC) return refuse(why, whyLen, "not an endpoint (magic 0x%08x)", get32(buf));
  if (get16(buf + 4) != EP_VERSION)
    return refuse(why, whyLen, "endpoint version %u; this library reads version %u", get16(buf + 4), EP_VERSION);
  if ((mscclppSipHash(secret, buf, EP_MAC_OFF) ^ get64(buf + EP_MAC_OFF)) != 0)
    return refuse(why, whyLen, "endpoint fails authentication: made by another job (another secret) or altered");
  struct mscclppEndpoint ep;
  memset(&ep, 0, sizeof(ep));
  ep.rank = (int)get32(buf + 8);
  ep.peer = (int)get32(buf + 12);
  ep.tag = (int)get32(buf + 16);
  ep.pid = get32(buf + 20);
  ep.processToken = get64(buf + 24);
  ep.hostHash = get64(buf + 32);
  ep.available = get32(buf + 40);
  ep.requested = get32(buf + 44);
  ep.device = (int)get32(buf + 48);
  size_t n = buf[52];
  if (n > EP_NAME_MAX) return refuse(why, whyLen, "endpoint host name length %zu (at most %d)", n, EP_NAME_MAX);
  for (size_t i = 0; i < n; i++)
    if (buf[EP_NAME_OFF + i] < 0x20 || buf[EP_NAME_OFF + i] > 0x7e)
      return refuse(why, whyLen, "endpoint host name has byte 0x%02x", buf[EP_NAME_OFF + i]);
  memcpy(ep.hostName, buf + EP_NAME_OFF, n);
  const uint32_t known = mscclppTransportCudaIpc | mscclppTransportHostShm | mscclppTransportNet;
  if ((ep.available & ~known) || (ep.requested & ~known) || (ep.requested & (ep.requested - 1)))
    return refuse(why, whyLen, "endpoint has transports 0x%x, asks for 0x%x", ep.available, ep.requested);
  *out = ep;
  return mscclppSuccess;
}

