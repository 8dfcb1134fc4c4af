/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the parsers of the memory and transport layers: the
 * memory record (record.c) and the connection endpoint (endpoint.c).
 *
 * The first input byte picks a mode; odd modes re-authenticate the rest with
 * the fixed secret (patch the MAC), so the fuzzer reaches the checks behind
 * authentication too. Whatever parses must encode back to bytes that parse to
 * the same value. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "memory/record.h"
#include "transport/transport.h"

static const uint8_t secret[MSCCLPP_SECRET_BYTES] = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2, 3, 4, 5, 6};

static void patchMac(uint8_t* b, size_t n) {
  if (n < 8) return;
  uint64_t mac = mscclppSipHash(secret, b, n - 8);
  for (int i = 0; i < 8; i++) b[n - 8 + i] = (uint8_t)(mac >> (8 * i));
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > 4096) return 0;
  int mode = data[0];
  uint8_t* b = malloc(size);
  memcpy(b, data + 1, size - 1);
  size_t n = size - 1;
  char why[200];
  if ((mode & 2) == 0) {
    if (mode & 1) patchMac(b, n);
    struct mscclppMemRecord rec, again;
    if (mscclppMemRecordDecode(b, n, secret, &rec, why, sizeof(why)) == mscclppSuccess) {
      uint8_t out[MSCCLPP_MEM_RECORD_MAX];
      size_t m = mscclppMemRecordEncode(&rec, secret, out, sizeof(out));
      if (m > sizeof(out) || mscclppMemRecordDecode(out, m, secret, &again, why, sizeof(why)) != mscclppSuccess ||
          memcmp(&rec, &again, sizeof(rec)) != 0)
        abort();
    }
  } else if (n >= MSCCLPP_ENDPOINT_BYTES) {
    if (mode & 1) patchMac(b, MSCCLPP_ENDPOINT_BYTES);
    struct mscclppEndpoint ep, again;
    if (mscclppEndpointDecode(b, secret, &ep, why, sizeof(why)) == mscclppSuccess) {
      uint8_t out[MSCCLPP_ENDPOINT_BYTES];
      mscclppEndpointEncode(&ep, secret, out);
      if (mscclppEndpointDecode(out, secret, &again, why, sizeof(why)) != mscclppSuccess ||
          memcmp(&ep, &again, sizeof(ep)) != 0)
        abort();
    }
  }
  free(b);
  return 0;
}
