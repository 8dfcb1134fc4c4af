/* SPDX-License-Identifier: MIT */
/* Unit tests of the bootstrap's wire format (unique id, handshake records,
 * message headers, rank tables), address and interface parsing, job
 * descriptions from the environment, and the handshake over a real socket. */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/handshake.h"
#include "bootstrap/socket.h"
#include "bootstrap/wire.h"
#include "core/params.h"
#include "harness.h"

static const uint8_t secretA[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
static const uint8_t secretB[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 17};

static struct mscclppBsAddr addr4(uint32_t ip, uint16_t port) {
  struct mscclppBsAddr a;
  memset(&a, 0, sizeof(a));
  a.family = 4;
  a.port = port;
  uint32_t be = htonl(ip);
  memcpy(a.addr, &be, 4);
  return a;
}

static void testUniqueId(void) {
  struct mscclppBsId id, back;
  memset(&id, 0, sizeof(id));
  id.root = addr4(0x7f000001, 29500);
  memcpy(id.secret, secretA, 16);
  uint8_t buf[MSCCLPP_BS_ID_BYTES];
  mscclppBootstrapEncodeId(&id, buf);
  mscclppBsWhy why;
  CHECK_RES(mscclppBootstrapParseId(buf, sizeof(buf), &back, &why), mscclppSuccess);
  CHECK(back.root.family == 4 && back.root.port == 29500 && back.root.scopeId == 0);
  CHECK(memcmp(back.root.addr, id.root.addr, 16) == 0 && memcmp(back.secret, secretA, 16) == 0);
  /* Truncated, garbage, any flipped byte: refused, output untouched. */
  memset(&back, 0x55, sizeof(back));
  CHECK_RES(mscclppBootstrapParseId(buf, sizeof(buf) - 1, &back, &why), mscclppInvalidArgument);
  CHECK(strstr(why.text, "127 bytes") != NULL);
  CHECK(back.root.port == 0x5555);
  uint8_t garbage[MSCCLPP_BS_ID_BYTES];
  memset(garbage, 0xAB, sizeof(garbage));
  CHECK_RES(mscclppBootstrapParseId(garbage, sizeof(garbage), &back, &why), mscclppInvalidArgument);
  CHECK(strstr(why.text, "magic") != NULL);
  memset(garbage, 0, sizeof(garbage));
  CHECK_RES(mscclppBootstrapParseId(garbage, sizeof(garbage), &back, &why), mscclppInvalidArgument);
  for (size_t i = 0; i < sizeof(buf); i++) {
    uint8_t copy[MSCCLPP_BS_ID_BYTES];
    memcpy(copy, buf, sizeof(copy));
    copy[i] ^= 0x10;
    CHECK(mscclppBootstrapParseId(copy, sizeof(copy), &back, NULL) == mscclppInvalidArgument);
  }
  CHECK_RES(mscclppBootstrapParseId(NULL, 128, &back, &why), mscclppInvalidArgument);
}

static void testAddrAndRankInfo(void) {
  uint8_t buf[MSCCLPP_BS_RANK_INFO_BYTES];
  struct mscclppBsRankInfo info = {7, 1234, 0x1122334455667788ull, addr4(0x0a000001, 5000)}, back;
  mscclppBootstrapEncodeRankInfo(&info, buf);
  CHECK_RES(mscclppBootstrapParseRankInfo(buf, sizeof(buf), &back, NULL), mscclppSuccess);
  CHECK(back.rank == 7 && back.pid == 1234 && back.hostHash == info.hostHash && back.addr.port == 5000);
  mscclppBsWhy why;
  CHECK_RES(mscclppBootstrapParseRankInfo(buf, sizeof(buf) + 1, &back, &why), mscclppInvalidArgument);
  info.addr.port = 0;
  mscclppBootstrapEncodeRankInfo(&info, buf);
  CHECK_RES(mscclppBootstrapParseRankInfo(buf, sizeof(buf), &back, &why), mscclppInvalidArgument);
  CHECK(strstr(why.text, "port is 0") != NULL);
  info.addr = addr4(1, 1);
  info.addr.family = 5;
  mscclppBootstrapEncodeRankInfo(&info, buf);
  CHECK_RES(mscclppBootstrapParseRankInfo(buf, sizeof(buf), &back, &why), mscclppInvalidArgument);
  info.addr = addr4(1, 1);
  info.addr.addr[9] = 1; /* IPv4 with IPv6 bytes */
  mscclppBootstrapEncodeRankInfo(&info, buf);
  CHECK_RES(mscclppBootstrapParseRankInfo(buf, sizeof(buf), &back, &why), mscclppInvalidArgument);
  info.addr = addr4(1, 1);
  info.rank = -1;
  mscclppBootstrapEncodeRankInfo(&info, buf);
  CHECK_RES(mscclppBootstrapParseRankInfo(buf, sizeof(buf), &back, &why), mscclppInvalidArgument);
  /* Socket address <-> wire, both families. */
  union mscclppSocketAddr sa, sb;
  memset(&sa, 0, sizeof(sa));
  sa.in6.sin6_family = AF_INET6;
  sa.in6.sin6_port = htons(4242);
  inet_pton(AF_INET6, "fd00::2", &sa.in6.sin6_addr);
  struct mscclppBsAddr w;
  mscclppSocketAddrToWire(&sa, &w);
  CHECK(w.family == 6 && w.port == 4242);
  mscclppSocketAddrFromWire(&w, &sb);
  char text[MSCCLPP_SOCKET_ADDR_TEXT];
  mscclppSocketAddrToText(&sb, text, sizeof(text));
  CHECK(strcmp(text, "[fd00::2]:4242") == 0);
}

static void testHandshakeRecords(void) {
  uint8_t sn[16], cn[16];
  for (int i = 0; i < 16; i++) {
    sn[i] = (uint8_t)i;
    cn[i] = (uint8_t)(100 + i);
  }
  uint8_t ch[MSCCLPP_BS_CHALLENGE_BYTES], nonce[16];
  mscclppBootstrapEncodeChallenge(sn, ch);
  CHECK_RES(mscclppBootstrapParseChallenge(ch, sizeof(ch), nonce, NULL), mscclppSuccess);
  CHECK(memcmp(nonce, sn, 16) == 0);
  ch[4] = 9; /* version */
  mscclppBsWhy why;
  CHECK_RES(mscclppBootstrapParseChallenge(ch, sizeof(ch), nonce, &why), mscclppInvalidArgument);
  CHECK(strstr(why.text, "version 9") != NULL);

  struct mscclppBsHello h, back;
  memset(&h, 0, sizeof(h));
  memcpy(h.nonce, cn, 16);
  h.purpose = MSCCLPP_BS_PURPOSE_JOIN;
  h.rank = 3;
  h.nranks = 8;
  h.info = (struct mscclppBsRankInfo){3, 99, 5, addr4(0x7f000001, 1000)};
  uint8_t hb[MSCCLPP_BS_HELLO_BYTES];
  mscclppBootstrapEncodeHello(&h, secretA, sn, hb);
  CHECK_RES(mscclppBootstrapParseHello(hb, sizeof(hb), &back, NULL), mscclppSuccess);
  CHECK(back.rank == 3 && back.nranks == 8 && back.info.pid == 99 && back.purpose == MSCCLPP_BS_PURPOSE_JOIN);
  /* The MAC binds the secret, the server nonce and every hello byte. */
  CHECK(back.mac == mscclppBootstrapHelloMac(secretA, sn, hb));
  CHECK(back.mac != mscclppBootstrapHelloMac(secretB, sn, hb));
  uint8_t sn2[16];
  memcpy(sn2, sn, 16);
  sn2[15] ^= 1;
  CHECK(back.mac != mscclppBootstrapHelloMac(secretA, sn2, hb));
  hb[29] ^= 1; /* rank */
  CHECK(back.mac != mscclppBootstrapHelloMac(secretA, sn, hb));
  /* Layout errors. */
  h.rank = 8;
  h.info.rank = 8;
  mscclppBootstrapEncodeHello(&h, secretA, sn, hb);
  CHECK_RES(mscclppBootstrapParseHello(hb, sizeof(hb), &back, &why), mscclppInvalidArgument);
  h.rank = 3;
  h.info.rank = 4;
  mscclppBootstrapEncodeHello(&h, secretA, sn, hb);
  CHECK_RES(mscclppBootstrapParseHello(hb, sizeof(hb), &back, &why), mscclppInvalidArgument);
  CHECK(strstr(why.text, "names rank 4") != NULL);
  h.info.rank = 3;
  h.nranks = 0;
  mscclppBootstrapEncodeHello(&h, secretA, sn, hb);
  CHECK_RES(mscclppBootstrapParseHello(hb, sizeof(hb), &back, &why), mscclppInvalidArgument);
  h.nranks = 8;
  h.purpose = 7;
  mscclppBootstrapEncodeHello(&h, secretA, sn, hb);
  CHECK_RES(mscclppBootstrapParseHello(hb, sizeof(hb), &back, &why), mscclppInvalidArgument);
  h.purpose = MSCCLPP_BS_PURPOSE_PEER;
  h.session = 77;
  mscclppBootstrapEncodeHello(&h, secretA, sn, hb);
  CHECK_RES(mscclppBootstrapParseHello(hb, sizeof(hb), &back, &why), mscclppSuccess);
  CHECK(back.session == 77 && back.info.rank == 0);
  hb[50] = 1; /* a peer hello carries no rank info */
  CHECK_RES(mscclppBootstrapParseHello(hb, sizeof(hb), &back, &why), mscclppInvalidArgument);
  CHECK_RES(mscclppBootstrapParseHello(hb, 95, &back, &why), mscclppInvalidArgument);

  uint8_t ack[MSCCLPP_BS_ACK_BYTES];
  int32_t status;
  uint64_t mac;
  mscclppBootstrapEncodeAck(MSCCLPP_BS_ACK_WRONG_SESSION, secretA, cn, sn, ack);
  CHECK_RES(mscclppBootstrapParseAck(ack, sizeof(ack), &status, &mac, NULL), mscclppSuccess);
  CHECK(status == MSCCLPP_BS_ACK_WRONG_SESSION);
  CHECK(mac == mscclppBootstrapAckMac(secretA, cn, sn, ack));
  CHECK(mac != mscclppBootstrapAckMac(secretB, cn, sn, ack));
  CHECK(mac != mscclppBootstrapAckMac(secretA, sn, cn, ack)); /* nonces are not interchangeable */
  mscclppBootstrapEncodeAck(99, secretA, cn, sn, ack);
  CHECK_RES(mscclppBootstrapParseAck(ack, sizeof(ack), &status, &mac, &why), mscclppInvalidArgument);
  CHECK(strcmp(mscclppBootstrapAckText(MSCCLPP_BS_ACK_WRONG_NRANKS), "the ranks disagree on nranks") == 0);
}

static void testHeaders(void) {
  uint8_t b[MSCCLPP_BS_HEADER_BYTES];
  struct mscclppBsHeader h = {MSCCLPP_BS_MSG_DATA, MSCCLPP_BS_FLAG_COLL | MSCCLPP_BS_FLAG_MORE, -5, 1000}, back;
  mscclppBootstrapEncodeHeader(&h, b);
  CHECK_RES(mscclppBootstrapParseHeader(b, sizeof(b), &back, NULL), mscclppSuccess);
  CHECK(back.type == h.type && back.flags == h.flags && back.tag == -5 && back.size == 1000);
  mscclppBsWhy why;
  struct {
    struct mscclppBsHeader h;
    const char* expect;
  } bad[] = {
      {{MSCCLPP_BS_MSG_DATA, 0, 0, MSCCLPP_BS_MAX_MSG_BYTES + 1}, "exceeds the limit"},
      {{MSCCLPP_BS_MSG_DATA, 0, 0, UINT64_MAX}, "exceeds the limit"},
      {{MSCCLPP_BS_MSG_DATA, 0x80, 0, 1}, "unknown flags"},
      {{MSCCLPP_BS_MSG_DATA, MSCCLPP_BS_FLAG_MORE, 0, 0}, "MORE"},
      {{MSCCLPP_BS_MSG_GOODBYE, 0, 0, 1}, "expected 0"},
      {{MSCCLPP_BS_MSG_GOODBYE, 1, 0, 0}, "flags"},
      {{MSCCLPP_BS_MSG_PEER_STATUS, 0, 0, 9}, "expected 8"},
      {{MSCCLPP_BS_MSG_TABLE, 0, 0, 10}, "rank table"},
      {{MSCCLPP_BS_MSG_ERROR, 0, 0, 0}, "error message"},
      {{MSCCLPP_BS_MSG_ERROR, 0, 0, MSCCLPP_BS_MAX_ERROR_TEXT + 1}, "error message"},
      {{0, 0, 0, 0}, "unknown"},
      {{6, 0, 0, 0}, "unknown"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    mscclppBootstrapEncodeHeader(&bad[i].h, b);
    why.text[0] = '\0';
    CHECK_RES(mscclppBootstrapParseHeader(b, sizeof(b), &back, &why), mscclppInvalidArgument);
    if (strstr(why.text, bad[i].expect) == NULL) fprintf(stderr, "case %zu: \"%s\"\n", i, why.text);
    CHECK(strstr(why.text, bad[i].expect) != NULL);
  }
  mscclppBootstrapEncodeHeader(&h, b);
  b[0] ^= 0xff;
  CHECK_RES(mscclppBootstrapParseHeader(b, sizeof(b), &back, &why), mscclppInvalidArgument);
  CHECK(strstr(why.text, "magic") != NULL);
  CHECK_RES(mscclppBootstrapParseHeader(b, 15, &back, &why), mscclppInvalidArgument);

  uint8_t ps[MSCCLPP_BS_PEER_STATUS_BYTES];
  int32_t r;
  uint32_t s;
  mscclppBootstrapEncodePeerStatus(3, MSCCLPP_BS_PEER_LOST, ps);
  CHECK_RES(mscclppBootstrapParsePeerStatus(ps, sizeof(ps), 4, &r, &s, NULL), mscclppSuccess);
  CHECK(r == 3 && s == MSCCLPP_BS_PEER_LOST);
  CHECK_RES(mscclppBootstrapParsePeerStatus(ps, sizeof(ps), 3, &r, &s, &why), mscclppInvalidArgument);
  mscclppBootstrapEncodePeerStatus(1, 7, ps);
  CHECK_RES(mscclppBootstrapParsePeerStatus(ps, sizeof(ps), 3, &r, &s, &why), mscclppInvalidArgument);

  char text[8];
  const uint8_t raw[] = {'h', 'i', 0, '\n', 0xff, 'x', 'y', 'z', 'w', 'v'};
  CHECK_RES(mscclppBootstrapParseErrorText(raw, sizeof(raw), text, sizeof(text), NULL), mscclppSuccess);
  CHECK(strcmp(text, "hi???xy") == 0);
  CHECK_RES(mscclppBootstrapParseErrorText(raw, 0, text, sizeof(text), &why), mscclppInvalidArgument);
}

static void testTable(void) {
  enum { N = 5 };
  struct mscclppBsRankInfo infos[N], back[N];
  for (int i = 0; i < N; i++)
    infos[i] =
        (struct mscclppBsRankInfo){i, (uint32_t)(100 + i), (uint64_t)(i % 2), addr4(0x7f000001, (uint16_t)(2000 + i))};
  size_t n = mscclppBootstrapTableBytes(N);
  CHECK(n == 16 + 40 * N);
  uint8_t* buf = (uint8_t*)malloc(n);
  mscclppBootstrapEncodeTable(0xabcdefull, infos, N, buf);
  uint64_t session = 0;
  CHECK_RES(mscclppBootstrapParseTable(buf, n, N, &session, back, NULL), mscclppSuccess);
  CHECK(session == 0xabcdefull);
  for (int i = 0; i < N; i++) CHECK(back[i].rank == i && back[i].addr.port == 2000 + i && back[i].pid == 100u + i);
  mscclppBsWhy why;
  session = 1;
  CHECK_RES(mscclppBootstrapParseTable(buf, n, N + 1, &session, back, &why), mscclppInvalidArgument);
  CHECK(strstr(why.text, "has 5 ranks, expected 6") != NULL);
  CHECK(session == 1);
  CHECK_RES(mscclppBootstrapParseTable(buf, n - 1, N, &session, back, &why), mscclppInvalidArgument);
  CHECK_RES(mscclppBootstrapParseTable(buf, 8, N, &session, back, &why), mscclppInvalidArgument);
  /* Records out of order. */
  struct mscclppBsRankInfo t = infos[1];
  infos[1] = infos[2];
  infos[2] = t;
  mscclppBootstrapEncodeTable(1, infos, N, buf);
  CHECK_RES(mscclppBootstrapParseTable(buf, n, N, &session, back, &why), mscclppInvalidArgument);
  CHECK(strstr(why.text, "record 1 describes rank 2") != NULL);
  free(buf);
}

static void testShrinkRecord(void) {
  static const uint8_t secret[16] = {1, 2, 3};
  int32_t ex[10] = {0, 2, 3, 5, 8, 9, 11, 12, 13, 20};
  struct mscclppBsShrink r;
  memset(&r, 0, sizeof(r));
  r.what = MSCCLPP_BS_SHRINK_RESP;
  r.nexcluded = 10;
  r.from = 0x1122334455667788ull;
  r.echo = 42;
  r.excludedHash = mscclppBootstrapExcludedHash(secret, ex, 10);
  r.parentNranks = 32;
  for (int i = 0; i < MSCCLPP_BS_SHRINK_SHOWN; i++) r.shown[i] = ex[i];
  r.info = (struct mscclppBsRankInfo){3, 77, 9, addr4(0x7f000001, 4000)};
  snprintf(r.text, sizeof(r.text), "fine");
  uint8_t buf[MSCCLPP_BS_SHRINK_BYTES];
  mscclppBootstrapEncodeShrink(&r, buf);
  struct mscclppBsShrink back;
  mscclppBsWhy why;
  CHECK_RES(mscclppBootstrapParseShrink(buf, sizeof(buf), &back, &why), mscclppSuccess);
  CHECK(back.what == r.what && back.nexcluded == 10 && back.from == r.from && back.echo == 42);
  CHECK(back.excludedHash == r.excludedHash && back.parentNranks == 32 && back.info.rank == 3);
  CHECK(back.shown[7] == 12 && strcmp(back.text, "fine") == 0);
  /* the hash tells lists apart, past the shown ranks too */
  int32_t other[10];
  memcpy(other, ex, sizeof(other));
  other[9] = 21;
  CHECK(mscclppBootstrapExcludedHash(secret, other, 10) != r.excludedHash);
  CHECK(mscclppBootstrapExcludedHash(secret, ex, 9) != r.excludedHash);
  /* refused: wrong length, unsorted, too many excluded, echo rules, text */
  CHECK_RES(mscclppBootstrapParseShrink(buf, sizeof(buf) - 1, &back, &why), mscclppInvalidArgument);
  struct mscclppBsShrink bad = r;
  bad.shown[3] = 1;
  mscclppBootstrapEncodeShrink(&bad, buf);
  CHECK_RES(mscclppBootstrapParseShrink(buf, sizeof(buf), &back, &why), mscclppInvalidArgument);
  CHECK(strstr(why.text, "ascending") != NULL);
  bad = r;
  bad.nexcluded = 32;
  mscclppBootstrapEncodeShrink(&bad, buf);
  CHECK_RES(mscclppBootstrapParseShrink(buf, sizeof(buf), &back, &why), mscclppInvalidArgument);
  bad = r;
  bad.what = MSCCLPP_BS_SHRINK_REQ; /* a REQ answers nothing */
  mscclppBootstrapEncodeShrink(&bad, buf);
  CHECK_RES(mscclppBootstrapParseShrink(buf, sizeof(buf), &back, &why), mscclppInvalidArgument);
  bad.echo = 0;
  mscclppBootstrapEncodeShrink(&bad, buf);
  CHECK_RES(mscclppBootstrapParseShrink(buf, sizeof(buf), &back, &why), mscclppSuccess);
  CHECK(back.info.rank == 0); /* a REQ carries no rank info */
  bad = r;
  bad.echo = MSCCLPP_BS_SHRINK_ANY; /* only an ABORT answers any call */
  mscclppBootstrapEncodeShrink(&bad, buf);
  CHECK_RES(mscclppBootstrapParseShrink(buf, sizeof(buf), &back, &why), mscclppInvalidArgument);
  bad.what = MSCCLPP_BS_SHRINK_ABORT;
  mscclppBootstrapEncodeShrink(&bad, buf);
  CHECK_RES(mscclppBootstrapParseShrink(buf, sizeof(buf), &back, &why), mscclppSuccess);
  buf[128] = 0x07; /* not printable */
  CHECK_RES(mscclppBootstrapParseShrink(buf, sizeof(buf), &back, &why), mscclppInvalidArgument);
}

static void testHostPort(void) {
  char host[64];
  uint16_t port = 0;
  mscclppBsWhy why;
  struct {
    const char* text;
    const char* host;
    uint16_t port;
  } good[] = {
      {"127.0.0.1:5000", "127.0.0.1", 5000},
      {"[::1]:29500", "::1", 29500},
      {"[fe80::1%eth0]:1", "fe80::1%eth0", 1},
      {"node-7.example.com:65535", "node-7.example.com", 65535},
      {"h:00080", "h", 80},
  };
  for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
    CHECK_RES(mscclppSocketParseHostPort(good[i].text, host, sizeof(host), &port, &why), mscclppSuccess);
    CHECK(strcmp(host, good[i].host) == 0 && port == good[i].port);
  }
  const char* bad[] = {"",         "127.0.0.1", "127.0.0.1:",    ":5000",       "::1:5000",   "[::1]5000",
                       "[::1",     "1.2.3.4:0", "1.2.3.4:65536", "1.2.3.4:12a", "1.2.3.4:-1", "a b:1",
                       "x:123456", "[]:80",     "a]:80",         "[a[b]:1",     "1.2.3.4: 80"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    port = 4321;
    if (mscclppSocketParseHostPort(bad[i], host, sizeof(host), &port, &why) != mscclppInvalidArgument)
      fprintf(stderr, "accepted \"%s\"\n", bad[i]);
    CHECK(port == 4321);
  }
  CHECK_RES(mscclppSocketParseHostPort("::1:5000", host, sizeof(host), &port, &why), mscclppInvalidArgument);
  CHECK(strstr(why.text, "brackets") != NULL);
  char small[4];
  CHECK_RES(mscclppSocketParseHostPort("abcdef:1", small, sizeof(small), &port, &why), mscclppInvalidArgument);

  union mscclppSocketAddr a;
  int numeric = -1;
  CHECK_RES(mscclppSocketResolve("127.0.0.1:5000", AF_UNSPEC, &a, &numeric), mscclppSuccess);
  CHECK(numeric == 1 && a.sa.sa_family == AF_INET && mscclppSocketAddrPort(&a) == 5000);
  CHECK_RES(mscclppSocketResolve("[::1]:7", AF_UNSPEC, &a, &numeric), mscclppSuccess);
  CHECK(numeric == 1 && a.sa.sa_family == AF_INET6);
  CHECK_RES(mscclppSocketResolve("localhost:80", AF_INET, &a, &numeric), mscclppSuccess);
  CHECK(numeric == 0 && a.sa.sa_family == AF_INET);
  CHECK_RES(mscclppSocketResolve("127.0.0.1:5000", AF_INET6, &a, &numeric), mscclppInvalidArgument);
  CHECK_RES(mscclppSocketResolve("no-such-host.invalid:5000", AF_UNSPEC, &a, &numeric), mscclppInvalidArgument);
  CHECK(strstr(mscclppGetLastError(), "no-such-host.invalid") != NULL);

  int fam = -1;
  CHECK_RES(mscclppSocketParseFamily("", &fam), mscclppSuccess);
  CHECK(fam == AF_UNSPEC);
  CHECK_RES(mscclppSocketParseFamily("AF_INET6", &fam), mscclppSuccess);
  CHECK(fam == AF_INET6);
  CHECK_RES(mscclppSocketParseFamily("af_inet", &fam), mscclppSuccess);
  CHECK(fam == AF_INET);
  CHECK_RES(mscclppSocketParseFamily("AF_UNIX", &fam), mscclppInvalidArgument);
  CHECK(strstr(mscclppGetLastError(), "AF_UNIX") != NULL);
}

static void testIfname(void) {
  CHECK(mscclppSocketIfnameMatch("eth", "eth0"));
  CHECK(mscclppSocketIfnameMatch("eth", "eth10"));
  CHECK(!mscclppSocketIfnameMatch("eth", "ib0"));
  CHECK(mscclppSocketIfnameMatch("ib,eth", "eth1"));
  CHECK(!mscclppSocketIfnameMatch("^eth", "eth0"));
  CHECK(mscclppSocketIfnameMatch("^eth", "ib0"));
  CHECK(mscclppSocketIfnameMatch("=eth0", "eth0"));
  CHECK(!mscclppSocketIfnameMatch("=eth0", "eth01"));
  CHECK(!mscclppSocketIfnameMatch("^=eth0", "eth0"));
  CHECK(mscclppSocketIfnameMatch("^=eth0", "eth01"));
  CHECK(!mscclppSocketIfnameMatch("^docker,lo", "lo"));
  CHECK(!mscclppSocketIfnameMatch("^docker,lo", "docker0"));
  CHECK(mscclppSocketIfnameMatch("^docker,lo", "enp1s0"));
  CHECK(!mscclppSocketIfnameMatch("", "eth0"));
  CHECK(mscclppSocketIfnameMatch("^", "eth0"));
  CHECK(mscclppSocketIfnameMatch(",,eth,", "eth0"));
  CHECK(!mscclppSocketIfnameMatch(NULL, "eth0"));

  union mscclppSocketAddr a;
  char name[64];
  char text[MSCCLPP_SOCKET_ADDR_TEXT];
  CHECK_RES(mscclppSocketFindInterface("=lo", AF_INET, &a, name, sizeof(name)), mscclppSuccess);
  mscclppSocketAddrToText(&a, text, sizeof(text));
  CHECK(strcmp(name, "lo") == 0 && strcmp(text, "127.0.0.1:0") == 0);
  /* Default: not lo when something else is up. */
  CHECK_RES(mscclppSocketFindInterface("", AF_UNSPEC, &a, name, sizeof(name)), mscclppSuccess);
  printf("default interface: %s\n", name);
  CHECK_RES(mscclppSocketFindInterface("=no-such-if", AF_UNSPEC, &a, name, sizeof(name)), mscclppSystemError);
  CHECK(strstr(mscclppGetLastError(), "no-such-if") != NULL);
  /* The route toward loopback starts at loopback. */
  union mscclppSocketAddr remote, local;
  mscclppSocketResolve("127.0.0.1:9", AF_UNSPEC, &remote, NULL);
  CHECK_RES(mscclppSocketLocalAddrToward(&remote, &local), mscclppSuccess);
  mscclppSocketAddrToText(&local, text, sizeof(text));
  CHECK(strcmp(text, "127.0.0.1:0") == 0);
}

static void testListenErrors(void) {
  union mscclppSocketAddr a;
  mscclppSocketResolve("127.0.0.1:1", AF_UNSPEC, &a, NULL);
  mscclppSocketAddrSetPort(&a, 0);
  int fd1 = -1, fd2 = -1;
  CHECK_RES(mscclppSocketListen(&a, 1, &fd1), mscclppSuccess);
  CHECK(mscclppSocketAddrPort(&a) != 0);
  CHECK_RES(mscclppSocketListen(&a, 1, &fd2), mscclppSystemError);
  CHECK(strstr(mscclppGetLastError(), "in use") != NULL);
  /* Nobody listens: refused at once without retries, a timeout with them. */
  close(fd1);
  int fd = -1;
  CHECK_RES(mscclppSocketConnect(&a, mscclppDeadlineIn(5), 0, 1, &fd), mscclppRemoteError);
  uint64_t t0 = mscclppTimeNs();
  CHECK_RES(mscclppSocketConnect(&a, mscclppDeadlineIn(0.3), 1, 1, &fd), mscclppTimeout);
  double took = (double)(mscclppTimeNs() - t0) / 1e9;
  CHECK(took >= 0.25 && took < 2.0);
}

static void clearEnv(void) {
  const char* vars[] = {"MSCCLPP_RANK",         "MSCCLPP_NRANKS",
                        "MSCCLPP_LOCAL_RANK",   "MSCCLPP_COMM_ID",
                        "MSCCLPP_COMM_SECRET",  "OMPI_COMM_WORLD_RANK",
                        "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                        "SLURM_PROCID",         "SLURM_NTASKS",
                        "SLURM_LOCALID",        "RANK",
                        "WORLD_SIZE",           "LOCAL_RANK",
                        "MASTER_ADDR",          "MASTER_PORT",
                        "MSCCLPP_HOSTID",       "MSCCLPP_SOCKET_FAMILY",
                        "MSCCLPP_SOCKET_IFNAME"};
  for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) unsetenv(vars[i]);
}

static mscclppResult_t jobFromEnv(struct mscclppBootstrapJob* job) {
  struct mscclppParams p;
  mscclppResult_t res = mscclppParamsLoad(&p);
  if (res != mscclppSuccess) return res;
  return mscclppBootstrapJobFromEnv(&p, job);
}

static void testEnv(void) {
  struct mscclppBootstrapJob job;
  char text[MSCCLPP_SOCKET_ADDR_TEXT];
  clearEnv();
  CHECK_RES(jobFromEnv(&job), mscclppInvalidUsage);
  CHECK(strstr(mscclppGetLastError(), "MSCCLPP_RANK") != NULL);

  /* mscclpp-run */
  setenv("MSCCLPP_RANK", "2", 1);
  CHECK_RES(jobFromEnv(&job), mscclppInvalidUsage);
  CHECK(strstr(mscclppGetLastError(), "MSCCLPP_NRANKS") != NULL);
  setenv("MSCCLPP_NRANKS", "4", 1);
  CHECK_RES(jobFromEnv(&job), mscclppInvalidUsage);
  CHECK(strstr(mscclppGetLastError(), "MSCCLPP_COMM_ID") != NULL);
  setenv("MSCCLPP_COMM_ID", "127.0.0.1:4567", 1);
  setenv("MSCCLPP_LOCAL_RANK", "2", 1);
  setenv("MSCCLPP_COMM_SECRET", "00112233445566778899aabbccddeeff", 1);
  CHECK_RES(jobFromEnv(&job), mscclppSuccess);
  CHECK(job.rank == 2 && job.nranks == 4 && job.envLocalRank == 2 && !job.startRoot);
  CHECK(strcmp(job.source, "MSCCLPP_RANK/MSCCLPP_NRANKS") == 0 && job.secret[1] == 0x11 && job.secret[15] == 0xff);
  mscclppSocketAddrToText(&job.root, text, sizeof(text));
  CHECK(strcmp(text, "127.0.0.1:4567") == 0);
  setenv("MSCCLPP_COMM_SECRET", "0011", 1);
  CHECK_RES(jobFromEnv(&job), mscclppInvalidArgument);
  CHECK(strstr(mscclppGetLastError(), "MSCCLPP_COMM_SECRET") != NULL);
  unsetenv("MSCCLPP_COMM_SECRET");
  setenv("MSCCLPP_RANK", "4", 1);
  CHECK_RES(jobFromEnv(&job), mscclppInvalidArgument);
  CHECK(strstr(mscclppGetLastError(), "MSCCLPP_RANK=4") != NULL);
  setenv("MSCCLPP_RANK", "0", 1);
  setenv("MSCCLPP_COMM_ID", "127.0.0.1", 1);
  CHECK_RES(jobFromEnv(&job), mscclppInvalidArgument);
  CHECK(strstr(mscclppGetLastError(), "MSCCLPP_COMM_ID") != NULL);
  setenv("MSCCLPP_COMM_ID", "[::1]:4567", 1);
  CHECK_RES(jobFromEnv(&job), mscclppSuccess);
  CHECK(job.startRoot && job.root.sa.sa_family == AF_INET6);
  /* Without MSCCLPP_COMM_SECRET: derived from the address text. */
  uint8_t derived[16];
  mscclppBootstrapDeriveSecret("[::1]:4567", derived);
  CHECK(memcmp(derived, job.secret, 16) == 0);
  uint8_t other[16];
  mscclppBootstrapDeriveSecret("[::1]:4568", other);
  CHECK(memcmp(derived, other, 16) != 0);

  /* Open MPI, with MSCCLPP_COMM_ID. */
  clearEnv();
  setenv("OMPI_COMM_WORLD_RANK", "1", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
  CHECK_RES(jobFromEnv(&job), mscclppInvalidUsage);
  CHECK(strstr(mscclppGetLastError(), "Open MPI") != NULL);
  setenv("MSCCLPP_COMM_ID", "127.0.0.1:4000", 1);
  CHECK_RES(jobFromEnv(&job), mscclppSuccess);
  CHECK(job.rank == 1 && job.nranks == 3 && job.envLocalRank == 1 && strcmp(job.source, "Open MPI") == 0);
  setenv("OMPI_COMM_WORLD_SIZE", "three", 1);
  CHECK_RES(jobFromEnv(&job), mscclppInvalidArgument);
  CHECK(strstr(mscclppGetLastError(), "OMPI_COMM_WORLD_SIZE=\"three\"") != NULL);

  /* Slurm. */
  clearEnv();
  setenv("SLURM_PROCID", "5", 1);
  setenv("SLURM_NTASKS", "6", 1);
  setenv("MSCCLPP_COMM_ID", "127.0.0.1:4000", 1);
  CHECK_RES(jobFromEnv(&job), mscclppSuccess);
  CHECK(job.rank == 5 && job.nranks == 6 && job.envLocalRank == -1 && strcmp(job.source, "Slurm") == 0);

  /* torchrun: MASTER_ADDR / MASTER_PORT, names and bare IPv6 included. */
  clearEnv();
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "2", 1);
  setenv("LOCAL_RANK", "0", 1);
  setenv("MASTER_ADDR", "localhost", 1);
  CHECK_RES(jobFromEnv(&job), mscclppInvalidUsage);
  CHECK(strstr(mscclppGetLastError(), "MASTER_PORT") != NULL);
  setenv("MASTER_PORT", "29500", 1);
  CHECK_RES(jobFromEnv(&job), mscclppSuccess);
  CHECK(job.rank == 0 && job.nranks == 2 && job.startRoot && strcmp(job.source, "torchrun") == 0);
  /* A host name: rank 0 binds the wildcard address. */
  mscclppSocketAddrToText(&job.rootBind, text, sizeof(text));
  CHECK(strcmp(text, "0.0.0.0:29500") == 0 || strcmp(text, "[::]:29500") == 0);
  setenv("MASTER_ADDR", "::1", 1);
  CHECK_RES(jobFromEnv(&job), mscclppSuccess);
  CHECK(strcmp(job.rootText, "[::1]:29500") == 0);
  setenv("MASTER_PORT", "0", 1);
  CHECK_RES(jobFromEnv(&job), mscclppInvalidArgument);
  CHECK(strstr(mscclppGetLastError(), "MASTER_ADDR:MASTER_PORT") != NULL);
  /* MSCCLPP_RANK wins over torchrun's. */
  setenv("MASTER_PORT", "29500", 1);
  setenv("MSCCLPP_RANK", "1", 1);
  setenv("MSCCLPP_NRANKS", "2", 1);
  CHECK_RES(jobFromEnv(&job), mscclppSuccess);
  CHECK(job.rank == 1 && strcmp(job.source, "MSCCLPP_RANK/MSCCLPP_NRANKS") == 0);
  clearEnv();
}

static void testJobFromAddressAndId(void) {
  clearEnv();
  struct mscclppParams p;
  CHECK_RES(mscclppParamsLoad(&p), mscclppSuccess);
  struct mscclppBootstrapJob job;
  CHECK_RES(mscclppBootstrapJobFromAddress(&p, NULL, 0, 1, &job), mscclppInvalidArgument);
  CHECK_RES(mscclppBootstrapJobFromAddress(&p, "127.0.0.1:80", 1, 1, &job), mscclppInvalidArgument);
  CHECK_RES(mscclppBootstrapJobFromAddress(&p, "127.0.0.1:80", 0, 0, &job), mscclppInvalidArgument);
  CHECK_RES(mscclppBootstrapJobFromAddress(&p, "127.0.0.1:80", 0, 1, &job), mscclppSuccess);
  CHECK(job.startRoot && memcmp(&job.root, &job.rootBind, sizeof(job.root)) == 0);
  snprintf(p.socketFamily, sizeof(p.socketFamily), "AF_BAD");
  CHECK_RES(mscclppBootstrapJobFromAddress(&p, "127.0.0.1:80", 0, 1, &job), mscclppInvalidArgument);

  uint8_t id[MSCCLPP_BS_ID_BYTES];
  struct mscclppBsId bid;
  bid.root = addr4(0x7f000001, 999);
  memcpy(bid.secret, secretA, 16);
  mscclppBootstrapEncodeId(&bid, id);
  CHECK_RES(mscclppBootstrapJobFromId(id, 3, 4, &job), mscclppSuccess);
  CHECK(job.rank == 3 && !job.startRoot && memcmp(job.secret, secretA, 16) == 0);
  CHECK(strcmp(job.rootText, "127.0.0.1:999") == 0);
  CHECK_RES(mscclppBootstrapJobFromId(id, 4, 4, &job), mscclppInvalidArgument);
  id[40] ^= 1;
  CHECK_RES(mscclppBootstrapJobFromId(id, 0, 4, &job), mscclppInvalidArgument);
  CHECK(strstr(mscclppGetLastError(), "unique id") != NULL);
}

static void testHostIdentity(void) {
  clearEnv();
  struct mscclppParams p;
  CHECK_RES(mscclppParamsLoad(&p), mscclppSuccess);
  char text[512];
  uint64_t h1, h2, h3;
  mscclppBootstrapHostIdentity(&p, text, sizeof(text), &h1);
  CHECK(strstr(text, ":netns-") != NULL);
  mscclppBootstrapHostIdentity(&p, NULL, 0, &h2);
  CHECK(h1 == h2);
  snprintf(p.hostId, sizeof(p.hostId), "my-host");
  mscclppBootstrapHostIdentity(&p, text, sizeof(text), &h3);
  CHECK(strcmp(text, "my-host") == 0 && h3 != h1);
}

/* The handshake over a real TCP connection: server state machine in this
 * thread, blocking client in another. */
struct clientArgs {
  union mscclppSocketAddr addr;
  const uint8_t* secret;
  mscclppResult_t res;
  int32_t status;
};

static void* clientMain(void* arg) {
  struct clientArgs* a = (struct clientArgs*)arg;
  int fd = -1;
  a->res = mscclppSocketConnect(&a->addr, mscclppDeadlineIn(5), 0, 1, &fd);
  if (a->res != mscclppSuccess) return NULL;
  struct mscclppBsHello h;
  memset(&h, 0, sizeof(h));
  h.purpose = MSCCLPP_BS_PURPOSE_PEER;
  h.rank = 1;
  h.nranks = 2;
  h.session = 5;
  a->res = mscclppBootstrapHandshakeClient(fd, a->secret, &h, mscclppDeadlineIn(5), "test server", &a->status);
  close(fd);
  return NULL;
}

static int serveOne(int listenFd, const uint8_t* secret, int32_t ackStatus) {
  struct mscclppBsPending p;
  int fd = -1;
  union mscclppSocketAddr peer;
  mscclppDeadline d = mscclppDeadlineIn(5);
  while (mscclppSocketAccept(listenFd, &fd, &peer) != 1 && !mscclppDeadlinePassed(d)) usleep(1000);
  if (fd < 0 || mscclppBootstrapPendingStart(&p, fd, &peer, 5, "test") != mscclppSuccess) return -2;
  int st;
  while ((st = mscclppBootstrapPendingRead(&p, secret, "test")) == MSCCLPP_BS_PENDING_MORE &&
         !mscclppDeadlinePassed(p.deadline))
    usleep(1000);
  if (st == MSCCLPP_BS_PENDING_DONE) {
    if (p.hello.rank != 1 || p.hello.session != 5) st = -3;
    mscclppBootstrapPendingAck(&p, secret, ackStatus);
  }
  close(p.fd);
  return st;
}

static void testHandshake(void) {
  union mscclppSocketAddr a;
  mscclppSocketResolve("127.0.0.1:1", AF_UNSPEC, &a, NULL);
  mscclppSocketAddrSetPort(&a, 0);
  int lfd = -1;
  CHECK_RES(mscclppSocketListen(&a, 0, &lfd), mscclppSuccess);
  struct clientArgs c = {a, secretA, mscclppInternalError, -1};
  pthread_t t;
  /* Same secret: accepted, status delivered. */
  pthread_create(&t, NULL, clientMain, &c);
  CHECK(serveOne(lfd, secretA, MSCCLPP_BS_ACK_DUPLICATE) == MSCCLPP_BS_PENDING_DONE);
  pthread_join(t, NULL);
  CHECK_RES(c.res, mscclppSuccess);
  CHECK(c.status == MSCCLPP_BS_ACK_DUPLICATE);
  /* Different secrets: the server refuses, the client is told. */
  c.secret = secretB;
  pthread_create(&t, NULL, clientMain, &c);
  CHECK(serveOne(lfd, secretA, MSCCLPP_BS_ACK_OK) == MSCCLPP_BS_PENDING_REFUSED);
  pthread_join(t, NULL);
  CHECK_RES(c.res, mscclppRemoteError);
  close(lfd);
}

int main(void) {
  setenv("MSCCLPP_DEBUG", "NONE", 1);
  RUN(testUniqueId);
  RUN(testAddrAndRankInfo);
  RUN(testHandshakeRecords);
  RUN(testHeaders);
  RUN(testTable);
  RUN(testShrinkRecord);
  RUN(testHostPort);
  RUN(testIfname);
  RUN(testListenErrors);
  RUN(testEnv);
  RUN(testJobFromAddressAndId);
  RUN(testHostIdentity);
  RUN(testHandshake);
  return harnessFinish();
}
