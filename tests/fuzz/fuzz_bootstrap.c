/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the bootstrap's parsers (src/bootstrap/wire.c and the
 * pure address/interface parsers of src/bootstrap/socket.c).
 *
 * The first input byte picks a parser; the rest is its input. Besides "no
 * crash, no sanitizer report", every input a parser accepts must encode back
 * to the same bytes (the formats are canonical), which the target checks.
 *
 *   cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DMSCCLPP_ENABLE_CUDA=OFF -DMSCCLPP_BUILD_FUZZ=ON
 *   cmake --build build-fuzz --target fuzz_bootstrap
 *   build-fuzz/tests/fuzz/fuzz_bootstrap -max_total_time=30
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/socket.h"
#include "bootstrap/wire.h"

#define REQUIRE(cond)              \
  do {                             \
    if (!(cond)) __builtin_trap(); \
  } while (0)

static const uint8_t key[16] = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2, 3, 4, 5, 6};

static void fuzzHeader(const uint8_t* d, size_t n) {
  struct mscclppBsHeader h;
  if (mscclppBootstrapParseHeader(d, n, &h, NULL) != mscclppSuccess) return;
  uint8_t out[MSCCLPP_BS_HEADER_BYTES];
  mscclppBootstrapEncodeHeader(&h, out);
  REQUIRE(n == sizeof(out) && memcmp(out, d, n) == 0);
  REQUIRE(h.type == MSCCLPP_BS_MSG_DATA ? h.size <= MSCCLPP_BS_MAX_MSG_BYTES
                                        : h.size <= 16 + 40ull * MSCCLPP_BS_MAX_RANKS);
}

static void fuzzChallenge(const uint8_t* d, size_t n) {
  uint8_t nonce[MSCCLPP_BS_NONCE_BYTES];
  if (mscclppBootstrapParseChallenge(d, n, nonce, NULL) != mscclppSuccess) return;
  uint8_t out[MSCCLPP_BS_CHALLENGE_BYTES];
  mscclppBootstrapEncodeChallenge(nonce, out);
  REQUIRE(n == sizeof(out) && memcmp(out, d, n) == 0);
}

static void fuzzHello(const uint8_t* d, size_t n) {
  struct mscclppBsHello h;
  if (mscclppBootstrapParseHello(d, n, &h, NULL) != mscclppSuccess) return;
  REQUIRE(h.rank >= 0 && h.rank < h.nranks && h.nranks <= MSCCLPP_BS_MAX_RANKS);
  uint8_t out[MSCCLPP_BS_HELLO_BYTES];
  uint8_t nonce[MSCCLPP_BS_NONCE_BYTES] = {0};
  mscclppBootstrapEncodeHello(&h, key, nonce, out);
  REQUIRE(n == sizeof(out) && memcmp(out, d, 88) == 0);
  /* The MAC the encoder wrote is the one the server checks against. */
  struct mscclppBsHello back;
  REQUIRE(mscclppBootstrapParseHello(out, sizeof(out), &back, NULL) == mscclppSuccess);
  REQUIRE(back.mac == mscclppBootstrapHelloMac(key, nonce, out));
}

static void fuzzAck(const uint8_t* d, size_t n) {
  int32_t status;
  uint64_t mac;
  if (mscclppBootstrapParseAck(d, n, &status, &mac, NULL) != mscclppSuccess) return;
  REQUIRE(status >= 0 && status <= MSCCLPP_BS_ACK_MAX);
  REQUIRE(mscclppBootstrapAckText(status) != NULL);
  uint8_t out[MSCCLPP_BS_ACK_BYTES], nonce[MSCCLPP_BS_NONCE_BYTES] = {0};
  mscclppBootstrapEncodeAck(status, key, nonce, nonce, out);
  REQUIRE(n == sizeof(out) && memcmp(out, d, 16) == 0);
}

static void fuzzRankInfo(const uint8_t* d, size_t n) {
  struct mscclppBsRankInfo info;
  if (mscclppBootstrapParseRankInfo(d, n, &info, NULL) != mscclppSuccess) return;
  uint8_t out[MSCCLPP_BS_RANK_INFO_BYTES];
  mscclppBootstrapEncodeRankInfo(&info, out);
  REQUIRE(n == sizeof(out) && memcmp(out, d, n) == 0);
  /* And through a socket address and back. */
  union mscclppSocketAddr sa;
  struct mscclppBsAddr w;
  mscclppSocketAddrFromWire(&info.addr, &sa);
  mscclppSocketAddrToWire(&sa, &w);
  REQUIRE(w.family == info.addr.family && w.port == info.addr.port && memcmp(w.addr, info.addr.addr, 16) == 0);
  char text[MSCCLPP_SOCKET_ADDR_TEXT];
  mscclppSocketAddrToText(&sa, text, sizeof(text));
}

static void fuzzTable(const uint8_t* d, size_t n) {
  if (n < 1) return;
  int nranks = 1 + d[0] % 64;
  struct mscclppBsRankInfo infos[64];
  uint64_t session;
  if (mscclppBootstrapParseTable(d + 1, n - 1, nranks, &session, infos, NULL) != mscclppSuccess) return;
  size_t bytes = mscclppBootstrapTableBytes(nranks);
  REQUIRE(bytes == n - 1);
  uint8_t* out = (uint8_t*)malloc(bytes);
  mscclppBootstrapEncodeTable(session, infos, nranks, out);
  REQUIRE(memcmp(out, d + 1, bytes) == 0);
  free(out);
}

static void fuzzPeerStatus(const uint8_t* d, size_t n) {
  if (n < 1) return;
  int nranks = 1 + d[0];
  int32_t rank;
  uint32_t status;
  if (mscclppBootstrapParsePeerStatus(d + 1, n - 1, nranks, &rank, &status, NULL) != mscclppSuccess) return;
  REQUIRE(rank >= 0 && rank < nranks);
  uint8_t out[MSCCLPP_BS_PEER_STATUS_BYTES];
  mscclppBootstrapEncodePeerStatus(rank, status, out);
  REQUIRE(n - 1 == sizeof(out) && memcmp(out, d + 1, sizeof(out)) == 0);
}

static void fuzzErrorText(const uint8_t* d, size_t n) {
  if (n < 1) return;
  size_t outLen = 2 + d[0];
  char* out = (char*)malloc(outLen);
  if (mscclppBootstrapParseErrorText(d + 1, n - 1, out, outLen, NULL) == mscclppSuccess) {
    size_t len = strlen(out);
    REQUIRE(len < outLen && len <= n - 1);
    for (size_t i = 0; i < len; i++) REQUIRE(out[i] >= 0x20 && out[i] < 0x7f);
  }
  free(out);
}

static void fuzzId(const uint8_t* d, size_t n) {
  struct mscclppBsId id;
  if (mscclppBootstrapParseId(d, n, &id, NULL) != mscclppSuccess) return;
  uint8_t out[MSCCLPP_BS_ID_BYTES];
  mscclppBootstrapEncodeId(&id, out);
  REQUIRE(n == sizeof(out) && memcmp(out, d, n) == 0);
}

static void fuzzShrink(const uint8_t* d, size_t n) {
  struct mscclppBsShrink r;
  if (mscclppBootstrapParseShrink(d, n, &r, NULL) != mscclppSuccess) return;
  REQUIRE(r.nexcluded < (uint32_t)r.parentNranks && r.from != 0 && strlen(r.text) <= MSCCLPP_BS_SHRINK_TEXT);
  uint8_t out[MSCCLPP_BS_SHRINK_BYTES];
  mscclppBootstrapEncodeShrink(&r, out);
  REQUIRE(n == sizeof(out) && memcmp(out, d, n) == 0);
}

static void fuzzHostPort(const uint8_t* d, size_t n) {
  char* text = (char*)malloc(n + 1);
  memcpy(text, d, n);
  text[n] = '\0';
  char host[64];
  uint16_t port;
  mscclppBsWhy why;
  if (mscclppSocketParseHostPort(text, host, sizeof(host), &port, &why) == mscclppSuccess) {
    REQUIRE(port != 0 && strlen(host) > 0 && strlen(host) < sizeof(host));
    /* Printing it back the canonical way parses to the same. */
    char again[96], host2[64];
    uint16_t port2;
    snprintf(again, sizeof(again), strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, (unsigned)port);
    REQUIRE(mscclppSocketParseHostPort(again, host2, sizeof(host2), &port2, NULL) == mscclppSuccess);
    REQUIRE(port2 == port && strcmp(host, host2) == 0);
  }
  free(text);
}

static void fuzzIfname(const uint8_t* d, size_t n) {
  char* text = (char*)malloc(n + 2);
  memcpy(text, d, n);
  text[n] = '\0';
  text[n + 1] = '\0';
  /* "spec\0name": the name is what follows the first NUL (maybe empty). */
  const char* name = text + strlen(text) + 1;
  int m = mscclppSocketIfnameMatch(text, name);
  REQUIRE(m == 0 || m == 1);
  if (text[0] != '^' && text[0] != '=') {
    /* Excluding the same list selects exactly the others. */
    size_t len = strlen(text);
    char* inv = (char*)malloc(len + 2);
    inv[0] = '^';
    memcpy(inv + 1, text, len + 1);
    REQUIRE(mscclppSocketIfnameMatch(inv, name) == !m);
    free(inv);
  }
  free(text);
}

/* Valid records built from the input's bytes, then one byte changed: reaches
 * the checks after the magic and the length without a seed corpus. */
static void fuzzMutatedValid(const uint8_t* d, size_t n) {
  if (n < 4) return;
  uint8_t which = d[0] % 6, pos = d[1], val = d[2];
  d += 3;
  n -= 3;
  uint8_t buf[MSCCLPP_BS_SHRINK_BYTES]; /* the largest record */
  memset(buf, 0, sizeof(buf));
  size_t len = 0;
  struct mscclppBsRankInfo info = {0, 1, 2, {4, 80, 0, {127, 0, 0, 1}}};
  if (n >= 2) info.addr.port = (uint16_t)(d[0] | d[1] << 8 | 1);
  switch (which) {
    case 0: {
      struct mscclppBsHeader h = {(uint8_t)(1 + (n ? d[0] % 5 : 0)), 0, 0, n > 1 ? d[1] : 0};
      mscclppBootstrapEncodeHeader(&h, buf);
      len = MSCCLPP_BS_HEADER_BYTES;
      break;
    }
    case 1: {
      struct mscclppBsHello h;
      memset(&h, 0, sizeof(h));
      h.purpose = n > 2 && d[2] & 1 ? MSCCLPP_BS_PURPOSE_PEER : MSCCLPP_BS_PURPOSE_JOIN;
      h.nranks = 4;
      h.info = info;
      mscclppBootstrapEncodeHello(&h, key, key, buf);
      len = MSCCLPP_BS_HELLO_BYTES;
      break;
    }
    case 2: {
      struct mscclppBsId id;
      id.root = info.addr;
      memcpy(id.secret, key, 16);
      mscclppBootstrapEncodeId(&id, buf);
      len = MSCCLPP_BS_ID_BYTES;
      break;
    }
    case 3:
      mscclppBootstrapEncodeTable(5, &info, 1, buf);
      len = mscclppBootstrapTableBytes(1);
      break;
    case 4: {
      struct mscclppBsShrink r;
      memset(&r, 0, sizeof(r));
      r.what = MSCCLPP_BS_SHRINK_RESP;
      r.from = 9;
      r.echo = 7;
      r.parentNranks = 8;
      r.nexcluded = 1;
      r.shown[0] = 3;
      for (int i = 1; i < MSCCLPP_BS_SHRINK_SHOWN; i++) r.shown[i] = -1;
      r.info = info;
      mscclppBootstrapEncodeShrink(&r, buf);
      len = MSCCLPP_BS_SHRINK_BYTES;
      break;
    }
    default:
      mscclppBootstrapEncodeAck(n ? d[0] % 6 : 0, key, key, key, buf);
      len = MSCCLPP_BS_ACK_BYTES;
      break;
  }
  buf[pos % len] = val;
  fuzzHeader(buf, len);
  fuzzHello(buf, len);
  fuzzId(buf, len);
  uint8_t tb[1 + sizeof(buf)];
  tb[0] = 0;
  memcpy(tb + 1, buf, len);
  fuzzTable(tb, len + 1);
  fuzzAck(buf, len);
  fuzzShrink(buf, len);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t* d = data + 1;
  size_t n = size - 1;
  switch (data[0] % 13) {
    case 0:
      fuzzHeader(d, n);
      break;
    case 1:
      fuzzChallenge(d, n);
      break;
    case 2:
      fuzzHello(d, n);
      break;
    case 3:
      fuzzAck(d, n);
      break;
    case 4:
      fuzzRankInfo(d, n);
      break;
    case 5:
      fuzzTable(d, n);
      break;
    case 6:
      fuzzPeerStatus(d, n);
      break;
    case 7:
      fuzzErrorText(d, n);
      break;
    case 8:
      fuzzId(d, n);
      break;
    case 9:
      fuzzHostPort(d, n);
      break;
    case 10:
      fuzzIfname(d, n);
      break;
    case 11:
      fuzzShrink(d, n);
      break;
    default:
      fuzzMutatedValid(d, n);
      break;
  }
  return 0;
}
