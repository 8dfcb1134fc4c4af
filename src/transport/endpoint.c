/* SPDX-License-Identifier: MIT */
/* The endpoint a rank sends when it connects: encoding and parsing (pure
 * functions, no I/O or logging; the fuzzer drives the parser directly). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/bytes.h"
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

void mscclppEndpointEncode(const struct mscclppEndpoint* ep, const uint8_t secret[MSCCLPP_SECRET_BYTES],
                           uint8_t buf[MSCCLPP_ENDPOINT_BYTES]) {
  memset(buf, 0, MSCCLPP_ENDPOINT_BYTES);
  mscclppPutLE32(buf, EP_MAGIC);
  mscclppPutLE16(buf + 4, EP_VERSION);
  mscclppPutLE32(buf + 8, (uint32_t)ep->rank);
  mscclppPutLE32(buf + 12, (uint32_t)ep->peer);
  mscclppPutLE32(buf + 16, (uint32_t)ep->tag);
  mscclppPutLE32(buf + 20, ep->pid);
  mscclppPutLE64(buf + 24, ep->processToken);
  mscclppPutLE64(buf + 32, ep->hostHash);
  mscclppPutLE32(buf + 40, ep->available);
  mscclppPutLE32(buf + 44, ep->requested);
  mscclppPutLE32(buf + 48, (uint32_t)ep->device);
  size_t n = strnlen(ep->hostName, EP_NAME_MAX);
  buf[52] = (uint8_t)n;
  memcpy(buf + EP_NAME_OFF, ep->hostName, n);
  mscclppPutLE64(buf + EP_MAC_OFF, mscclppSipHash(secret, buf, EP_MAC_OFF));
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
  if (mscclppGetLE32(buf) != EP_MAGIC) return refuse(why, whyLen, "not an endpoint (magic 0x%08x)", mscclppGetLE32(buf));
  if (mscclppGetLE16(buf + 4) != EP_VERSION)
    return refuse(why, whyLen, "endpoint version %u; this library reads version %u", mscclppGetLE16(buf + 4), EP_VERSION);
  if ((mscclppSipHash(secret, buf, EP_MAC_OFF) ^ mscclppGetLE64(buf + EP_MAC_OFF)) != 0)
    return refuse(why, whyLen, "endpoint fails authentication: made by another job (another secret) or altered");
  struct mscclppEndpoint ep;
  memset(&ep, 0, sizeof(ep));
  ep.rank = (int)mscclppGetLE32(buf + 8);
  ep.peer = (int)mscclppGetLE32(buf + 12);
  ep.tag = (int)mscclppGetLE32(buf + 16);
  ep.pid = mscclppGetLE32(buf + 20);
  ep.processToken = mscclppGetLE64(buf + 24);
  ep.hostHash = mscclppGetLE64(buf + 32);
  ep.available = mscclppGetLE32(buf + 40);
  ep.requested = mscclppGetLE32(buf + 44);
  ep.device = (int)mscclppGetLE32(buf + 48);
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

