/* SPDX-License-Identifier: MIT */
#include "bootstrap/wire.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/bytes.h"
#include "core/error.h"
#include "core/util.h"

/* ---- little-endian helpers ----------------------------------------------- */

static int allZero(const uint8_t* p, size_t n) {
  uint8_t acc = 0;
  for (size_t i = 0; i < n; i++) acc |= p[i];
  return acc == 0;
}

static mscclppResult_t refuse(mscclppBsWhy* why, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static mscclppResult_t refuse(mscclppBsWhy* why, const char* fmt, ...) {
  if (why != NULL) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why->text, sizeof(why->text), fmt, ap);
    va_end(ap);
  }
  return mscclppInvalidArgument;
}

static mscclppResult_t checkLen(const char* what, size_t len, size_t want, mscclppBsWhy* why) {
  if (len != want) return refuse(why, "%s is %zu bytes, expected %zu", what, len, want);
  return mscclppSuccess;
}

/* magic u32 | version u16 | kind u16: the start of every handshake record. */
static void putRecordHead(uint8_t* p, uint16_t kind) {
  mscclppPutLE32(p, MSCCLPP_BS_MAGIC);
  mscclppPutLE16(p + 4, MSCCLPP_BS_VERSION);
  mscclppPutLE16(p + 6, kind);
}
static mscclppResult_t checkRecordHead(const char* what, const uint8_t* p, uint16_t kind, mscclppBsWhy* why) {
  uint32_t magic = mscclppGetLE32(p);
  if (magic != MSCCLPP_BS_MAGIC)
    return refuse(why, "%s has magic 0x%08x, expected 0x%08x (not a mscclpp bootstrap peer?)", what, magic,
                  MSCCLPP_BS_MAGIC);
  uint16_t version = mscclppGetLE16(p + 4);
  if (version != MSCCLPP_BS_VERSION)
    return refuse(why, "%s has protocol version %u, this library speaks %u", what, version, MSCCLPP_BS_VERSION);
  uint16_t k = mscclppGetLE16(p + 6);
  if (k != kind) return refuse(why, "%s has record kind %u, expected %u", what, k, kind);
  return mscclppSuccess;
}

/* ---- address, rank info ---------------------------------------------------- */

void mscclppBootstrapEncodeAddr(const struct mscclppBsAddr* a, uint8_t out[MSCCLPP_BS_ADDR_BYTES]) {
  memset(out, 0, MSCCLPP_BS_ADDR_BYTES);
  out[0] = a->family;
  mscclppPutLE16(out + 2, a->port);
  mscclppPutLE32(out + 4, a->scopeId);
  memcpy(out + 8, a->addr, 16);
}

mscclppResult_t mscclppBootstrapParseAddr(const uint8_t* buf, size_t len, struct mscclppBsAddr* out,
                                          mscclppBsWhy* why) {
  if (buf == NULL || out == NULL) return refuse(why, "NULL argument");
  MSCCLPP_RETURN_ON_ERROR(checkLen("address record", len, MSCCLPP_BS_ADDR_BYTES, why));
  struct mscclppBsAddr a;
  a.family = buf[0];
  a.port = mscclppGetLE16(buf + 2);
  a.scopeId = mscclppGetLE32(buf + 4);
  memcpy(a.addr, buf + 8, 16);
  if (a.family != 4 && a.family != 6) return refuse(why, "address family %u is neither 4 nor 6", a.family);
  if (buf[1] != 0) return refuse(why, "address record reserved byte is %u, expected 0", buf[1]);
  if (a.port == 0) return refuse(why, "address port is 0");
  if (a.family == 4 && (a.scopeId != 0 || !allZero(a.addr + 4, 12)))
    return refuse(why, "IPv4 address record has non-zero IPv6-only bytes");
  *out = a;
  return mscclppSuccess;
}

void mscclppBootstrapEncodeRankInfo(const struct mscclppBsRankInfo* info, uint8_t out[MSCCLPP_BS_RANK_INFO_BYTES]) {
  mscclppPutLE32(out, (uint32_t)info->rank);
  mscclppPutLE32(out + 4, info->pid);
  mscclppPutLE64(out + 8, info->hostHash);
  mscclppBootstrapEncodeAddr(&info->addr, out + 16);
}

mscclppResult_t mscclppBootstrapParseRankInfo(const uint8_t* buf, size_t len, struct mscclppBsRankInfo* out,
                                              mscclppBsWhy* why) {
  if (buf == NULL || out == NULL) return refuse(why, "NULL argument");
  MSCCLPP_RETURN_ON_ERROR(checkLen("rank info record", len, MSCCLPP_BS_RANK_INFO_BYTES, why));
  struct mscclppBsRankInfo info;
  info.rank = (int32_t)mscclppGetLE32(buf);
  info.pid = mscclppGetLE32(buf + 4);
  info.hostHash = mscclppGetLE64(buf + 8);
  if (info.rank < 0 || info.rank >= MSCCLPP_BS_MAX_RANKS)
    return refuse(why, "rank info names rank %d, outside [0, %d)", info.rank, MSCCLPP_BS_MAX_RANKS);
  MSCCLPP_RETURN_ON_ERROR(mscclppBootstrapParseAddr(buf + 16, MSCCLPP_BS_ADDR_BYTES, &info.addr, why));
  *out = info;
  return mscclppSuccess;
}

/* ---- unique id ------------------------------------------------------------- */

static const uint8_t idCheckKey[16] = {'m', 's', 'c', 'c', 'l', 'p', 'p', '-', 'u', 'n', 'i', 'q', 'u', 'e', 'i', 'd'};
#define ID_CHECK_OFFSET 120

void mscclppBootstrapEncodeId(const struct mscclppBsId* id, uint8_t out[MSCCLPP_BS_ID_BYTES]) {
  memset(out, 0, MSCCLPP_BS_ID_BYTES);
  mscclppPutLE32(out, MSCCLPP_BS_ID_MAGIC);
  mscclppPutLE16(out + 4, MSCCLPP_BS_VERSION);
  mscclppBootstrapEncodeAddr(&id->root, out + 8);
  memcpy(out + 32, id->secret, MSCCLPP_BS_SECRET_BYTES);
  mscclppPutLE64(out + ID_CHECK_OFFSET, mscclppSipHash(idCheckKey, out, ID_CHECK_OFFSET));
}

mscclppResult_t mscclppBootstrapParseId(const uint8_t* buf, size_t len, struct mscclppBsId* out, mscclppBsWhy* why) {
  if (buf == NULL || out == NULL) return refuse(why, "NULL argument");
  MSCCLPP_RETURN_ON_ERROR(checkLen("unique id", len, MSCCLPP_BS_ID_BYTES, why));
  uint32_t magic = mscclppGetLE32(buf);
  if (magic != MSCCLPP_BS_ID_MAGIC)
    return refuse(why, "unique id has magic 0x%08x, expected 0x%08x (not made by mscclppGetUniqueId?)", magic,
                  MSCCLPP_BS_ID_MAGIC);
  uint16_t version = mscclppGetLE16(buf + 4);
  if (version != MSCCLPP_BS_VERSION)
    return refuse(why, "unique id has version %u, this library reads %u", version, MSCCLPP_BS_VERSION);
  uint64_t check = mscclppGetLE64(buf + ID_CHECK_OFFSET);
  if (check != mscclppSipHash(idCheckKey, buf, ID_CHECK_OFFSET))
    return refuse(why, "unique id check value does not match its contents (corrupted or truncated id)");
  if (mscclppGetLE16(buf + 6) != 0 || !allZero(buf + 48, ID_CHECK_OFFSET - 48))
    return refuse(why, "unique id has non-zero reserved bytes");
  struct mscclppBsId id;
  MSCCLPP_RETURN_ON_ERROR(mscclppBootstrapParseAddr(buf + 8, MSCCLPP_BS_ADDR_BYTES, &id.root, why));
  memcpy(id.secret, buf + 32, MSCCLPP_BS_SECRET_BYTES);
  *out = id;
  return mscclppSuccess;
}

/* ---- handshake ------------------------------------------------------------- */

void mscclppBootstrapEncodeChallenge(const uint8_t nonce[MSCCLPP_BS_NONCE_BYTES],
                                     uint8_t out[MSCCLPP_BS_CHALLENGE_BYTES]) {
  memset(out, 0, MSCCLPP_BS_CHALLENGE_BYTES);
  putRecordHead(out, MSCCLPP_BS_KIND_CHALLENGE);
  memcpy(out + 8, nonce, MSCCLPP_BS_NONCE_BYTES);
}

mscclppResult_t mscclppBootstrapParseChallenge(const uint8_t* buf, size_t len, uint8_t nonce[MSCCLPP_BS_NONCE_BYTES],
                                               mscclppBsWhy* why) {
  if (buf == NULL || nonce == NULL) return refuse(why, "NULL argument");
  MSCCLPP_RETURN_ON_ERROR(checkLen("challenge", len, MSCCLPP_BS_CHALLENGE_BYTES, why));
  MSCCLPP_RETURN_ON_ERROR(checkRecordHead("challenge", buf, MSCCLPP_BS_KIND_CHALLENGE, why));
  if (!allZero(buf + 24, 8)) return refuse(why, "challenge has non-zero reserved bytes");
  memcpy(nonce, buf + 8, MSCCLPP_BS_NONCE_BYTES);
  return mscclppSuccess;
}

#define HELLO_MAC_OFFSET 88
static const char helloDomain[16] = "mscclpp-hello";
static const char ackDomain[16] = "mscclpp-ack";

uint64_t mscclppBootstrapHelloMac(const uint8_t secret[MSCCLPP_BS_SECRET_BYTES],
                                  const uint8_t serverNonce[MSCCLPP_BS_NONCE_BYTES], const uint8_t* hello88) {
  uint8_t m[16 + MSCCLPP_BS_NONCE_BYTES + HELLO_MAC_OFFSET];
  memcpy(m, helloDomain, 16);
  memcpy(m + 16, serverNonce, MSCCLPP_BS_NONCE_BYTES);
  memcpy(m + 32, hello88, HELLO_MAC_OFFSET);
  return mscclppSipHash(secret, m, sizeof(m));
}

void mscclppBootstrapEncodeHello(const struct mscclppBsHello* hello, const uint8_t secret[MSCCLPP_BS_SECRET_BYTES],
                                 const uint8_t serverNonce[MSCCLPP_BS_NONCE_BYTES],
                                 uint8_t out[MSCCLPP_BS_HELLO_BYTES]) {
  memset(out, 0, MSCCLPP_BS_HELLO_BYTES);
  putRecordHead(out, MSCCLPP_BS_KIND_HELLO);
  memcpy(out + 8, hello->nonce, MSCCLPP_BS_NONCE_BYTES);
  mscclppPutLE32(out + 24, hello->purpose);
  mscclppPutLE32(out + 28, (uint32_t)hello->rank);
  mscclppPutLE32(out + 32, (uint32_t)hello->nranks);
  mscclppPutLE64(out + 40, hello->session);
  if (hello->purpose == MSCCLPP_BS_PURPOSE_JOIN) mscclppBootstrapEncodeRankInfo(&hello->info, out + 48);
  mscclppPutLE64(out + HELLO_MAC_OFFSET, mscclppBootstrapHelloMac(secret, serverNonce, out));
}

mscclppResult_t mscclppBootstrapParseHello(const uint8_t* buf, size_t len, struct mscclppBsHello* out,
                                           mscclppBsWhy* why) {
  if (buf == NULL || out == NULL) return refuse(why, "NULL argument");
  MSCCLPP_RETURN_ON_ERROR(checkLen("hello", len, MSCCLPP_BS_HELLO_BYTES, why));
  MSCCLPP_RETURN_ON_ERROR(checkRecordHead("hello", buf, MSCCLPP_BS_KIND_HELLO, why));
  struct mscclppBsHello h;
  memset(&h, 0, sizeof(h));
  memcpy(h.nonce, buf + 8, MSCCLPP_BS_NONCE_BYTES);
  h.purpose = mscclppGetLE32(buf + 24);
  h.rank = (int32_t)mscclppGetLE32(buf + 28);
  h.nranks = (int32_t)mscclppGetLE32(buf + 32);
  h.session = mscclppGetLE64(buf + 40);
  h.mac = mscclppGetLE64(buf + HELLO_MAC_OFFSET);
  if (h.purpose != MSCCLPP_BS_PURPOSE_JOIN && h.purpose != MSCCLPP_BS_PURPOSE_PEER)
    return refuse(why, "hello has purpose %u, expected %d (join) or %d (peer)", h.purpose, MSCCLPP_BS_PURPOSE_JOIN,
                  MSCCLPP_BS_PURPOSE_PEER);
  if (h.nranks <= 0 || h.nranks > MSCCLPP_BS_MAX_RANKS)
    return refuse(why, "hello has nranks %d, outside [1, %d]", h.nranks, MSCCLPP_BS_MAX_RANKS);
  if (h.rank < 0 || h.rank >= h.nranks) return refuse(why, "hello has rank %d, outside [0, %d)", h.rank, h.nranks);
  if (mscclppGetLE32(buf + 36) != 0) return refuse(why, "hello has non-zero reserved bytes");
  if (h.purpose == MSCCLPP_BS_PURPOSE_JOIN) {
    if (h.session != 0)
      return refuse(why, "join hello carries session %llu, expected 0", (unsigned long long)h.session);
    MSCCLPP_RETURN_ON_ERROR(mscclppBootstrapParseRankInfo(buf + 48, MSCCLPP_BS_RANK_INFO_BYTES, &h.info, why));
    if (h.info.rank != h.rank)
      return refuse(why, "join hello is from rank %d but its rank info names rank %d", h.rank, h.info.rank);
  } else if (!allZero(buf + 48, MSCCLPP_BS_RANK_INFO_BYTES)) {
    return refuse(why, "peer hello carries a rank info record (must be zeros)");
  }
  *out = h;
  return mscclppSuccess;
}

const char* mscclppBootstrapAckText(int32_t status) {
  switch (status) {
    case MSCCLPP_BS_ACK_OK:
      return "accepted";
    case MSCCLPP_BS_ACK_WRONG_PURPOSE:
      return "wrong kind of listener (a rank's listener reached as the root, or the reverse)";
    case MSCCLPP_BS_ACK_WRONG_NRANKS:
      return "the ranks disagree on nranks";
    case MSCCLPP_BS_ACK_WRONG_SESSION:
      return "the peer belongs to another run of the job (session differs)";
    case MSCCLPP_BS_ACK_DUPLICATE:
      return "this rank is already connected to the peer";
    case MSCCLPP_BS_ACK_CLOSING:
      return "the peer is shutting down";
    default:
      return "unknown status";
  }
}

void mscclppBootstrapEncodeAck(int32_t status, const uint8_t secret[MSCCLPP_BS_SECRET_BYTES],
                               const uint8_t clientNonce[MSCCLPP_BS_NONCE_BYTES],
                               const uint8_t serverNonce[MSCCLPP_BS_NONCE_BYTES], uint8_t out[MSCCLPP_BS_ACK_BYTES]) {
  memset(out, 0, MSCCLPP_BS_ACK_BYTES);
  putRecordHead(out, MSCCLPP_BS_KIND_ACK);
  mscclppPutLE32(out + 8, (uint32_t)status);
  mscclppPutLE64(out + 16, mscclppBootstrapAckMac(secret, clientNonce, serverNonce, out));
}

uint64_t mscclppBootstrapAckMac(const uint8_t secret[MSCCLPP_BS_SECRET_BYTES],
                                const uint8_t clientNonce[MSCCLPP_BS_NONCE_BYTES],
                                const uint8_t serverNonce[MSCCLPP_BS_NONCE_BYTES], const uint8_t* ack16) {
  uint8_t m[16 + 2 * MSCCLPP_BS_NONCE_BYTES + 16];
  memcpy(m, ackDomain, 16);
  memcpy(m + 16, clientNonce, MSCCLPP_BS_NONCE_BYTES);
  memcpy(m + 32, serverNonce, MSCCLPP_BS_NONCE_BYTES);
  memcpy(m + 48, ack16, 16);
  return mscclppSipHash(secret, m, sizeof(m));
}

mscclppResult_t mscclppBootstrapParseAck(const uint8_t* buf, size_t len, int32_t* status, uint64_t* mac,
                                         mscclppBsWhy* why) {
  if (buf == NULL || status == NULL || mac == NULL) return refuse(why, "NULL argument");
  MSCCLPP_RETURN_ON_ERROR(checkLen("ack", len, MSCCLPP_BS_ACK_BYTES, why));
  MSCCLPP_RETURN_ON_ERROR(checkRecordHead("ack", buf, MSCCLPP_BS_KIND_ACK, why));
  int32_t s = (int32_t)mscclppGetLE32(buf + 8);
  if (s < 0 || s > MSCCLPP_BS_ACK_MAX) return refuse(why, "ack has unknown status %d", s);
  if (mscclppGetLE32(buf + 12) != 0) return refuse(why, "ack has non-zero reserved bytes");
  *status = s;
  *mac = mscclppGetLE64(buf + 16);
  return mscclppSuccess;
}

/* ---- messages -------------------------------------------------------------- */

void mscclppBootstrapEncodeHeader(const struct mscclppBsHeader* h, uint8_t out[MSCCLPP_BS_HEADER_BYTES]) {
  mscclppPutLE16(out, MSCCLPP_BS_MSG_MAGIC);
  out[2] = h->type;
  out[3] = h->flags;
  mscclppPutLE32(out + 4, (uint32_t)h->tag);
  mscclppPutLE64(out + 8, h->size);
}

mscclppResult_t mscclppBootstrapParseHeader(const uint8_t* buf, size_t len, struct mscclppBsHeader* out,
                                            mscclppBsWhy* why) {
  if (buf == NULL || out == NULL) return refuse(why, "NULL argument");
  MSCCLPP_RETURN_ON_ERROR(checkLen("message header", len, MSCCLPP_BS_HEADER_BYTES, why));
  uint16_t magic = mscclppGetLE16(buf);
  if (magic != MSCCLPP_BS_MSG_MAGIC)
    return refuse(why, "message header has magic 0x%04x, expected 0x%04x", magic, MSCCLPP_BS_MSG_MAGIC);
  struct mscclppBsHeader h;
  h.type = buf[2];
  h.flags = buf[3];
  h.tag = (int32_t)mscclppGetLE32(buf + 4);
  h.size = mscclppGetLE64(buf + 8);
  if (h.type < 1 || h.type > MSCCLPP_BS_MSG_TYPE_MAX) return refuse(why, "message type %u is unknown", h.type);
  if (h.type == MSCCLPP_BS_MSG_DATA) {
    if ((h.flags & ~MSCCLPP_BS_FLAGS_ALL) != 0) return refuse(why, "data message has unknown flags 0x%02x", h.flags);
    if (h.size > MSCCLPP_BS_MAX_MSG_BYTES)
      return refuse(why, "data message of %llu bytes exceeds the limit of %llu", (unsigned long long)h.size,
                    (unsigned long long)MSCCLPP_BS_MAX_MSG_BYTES);
    /* A piece followed by more pieces is never empty. */
    if ((h.flags & MSCCLPP_BS_FLAG_MORE) && h.size == 0) return refuse(why, "empty data piece marked MORE");
    *out = h;
    return mscclppSuccess;
  }
  if (h.flags != 0 || h.tag != 0)
    return refuse(why, "message type %u has flags 0x%02x and tag %d, expected zeros", h.type, h.flags, h.tag);
  switch (h.type) {
    case MSCCLPP_BS_MSG_GOODBYE:
      if (h.size != 0)
        return refuse(why, "goodbye message has %llu bytes of body, expected 0", (unsigned long long)h.size);
      break;
    case MSCCLPP_BS_MSG_PEER_STATUS:
      if (h.size != MSCCLPP_BS_PEER_STATUS_BYTES)
        return refuse(why, "peer status message has %llu bytes of body, expected %d", (unsigned long long)h.size,
                      MSCCLPP_BS_PEER_STATUS_BYTES);
      break;
    case MSCCLPP_BS_MSG_TABLE: {
      uint64_t max = MSCCLPP_BS_TABLE_HEADER_BYTES + (uint64_t)MSCCLPP_BS_MAX_RANKS * MSCCLPP_BS_RANK_INFO_BYTES;
      if (h.size < MSCCLPP_BS_TABLE_HEADER_BYTES + MSCCLPP_BS_RANK_INFO_BYTES || h.size > max)
        return refuse(why, "rank table message of %llu bytes is outside [%d, %llu]", (unsigned long long)h.size,
                      MSCCLPP_BS_TABLE_HEADER_BYTES + MSCCLPP_BS_RANK_INFO_BYTES, (unsigned long long)max);
      break;
    }
    case MSCCLPP_BS_MSG_ERROR:
      if (h.size == 0 || h.size > MSCCLPP_BS_MAX_ERROR_TEXT)
        return refuse(why, "error message of %llu bytes is outside [1, %d]", (unsigned long long)h.size,
                      MSCCLPP_BS_MAX_ERROR_TEXT);
      break;
    default:
      break;
  }
  *out = h;
  return mscclppSuccess;
}

void mscclppBootstrapEncodePeerStatus(int32_t rank, uint32_t status, uint8_t out[MSCCLPP_BS_PEER_STATUS_BYTES]) {
  mscclppPutLE32(out, (uint32_t)rank);
  mscclppPutLE32(out + 4, status);
}

mscclppResult_t mscclppBootstrapParsePeerStatus(const uint8_t* buf, size_t len, int nranks, int32_t* rank,
                                                uint32_t* status, mscclppBsWhy* why) {
  if (buf == NULL || rank == NULL || status == NULL) return refuse(why, "NULL argument");
  MSCCLPP_RETURN_ON_ERROR(checkLen("peer status", len, MSCCLPP_BS_PEER_STATUS_BYTES, why));
  int32_t r = (int32_t)mscclppGetLE32(buf);
  uint32_t s = mscclppGetLE32(buf + 4);
  if (r < 0 || r >= nranks) return refuse(why, "peer status names rank %d, outside [0, %d)", r, nranks);
  if (s != MSCCLPP_BS_PEER_LEFT && s != MSCCLPP_BS_PEER_LOST) return refuse(why, "peer status %u is unknown", s);
  *rank = r;
  *status = s;
  return mscclppSuccess;
}

size_t mscclppBootstrapTableBytes(int nranks) {
  return MSCCLPP_BS_TABLE_HEADER_BYTES + (size_t)nranks * MSCCLPP_BS_RANK_INFO_BYTES;
}

void mscclppBootstrapEncodeTable(uint64_t session, const struct mscclppBsRankInfo* infos, int nranks, uint8_t* out) {
  mscclppPutLE64(out, session);
  mscclppPutLE32(out + 8, (uint32_t)nranks);
  mscclppPutLE32(out + 12, 0);
  for (int i = 0; i < nranks; i++)
    mscclppBootstrapEncodeRankInfo(&infos[i],
                                   out + MSCCLPP_BS_TABLE_HEADER_BYTES + (size_t)i * MSCCLPP_BS_RANK_INFO_BYTES);
}

mscclppResult_t mscclppBootstrapParseTable(const uint8_t* buf, size_t len, int nranks, uint64_t* session,
                                           struct mscclppBsRankInfo* infos, mscclppBsWhy* why) {
  if (buf == NULL || session == NULL || infos == NULL) return refuse(why, "NULL argument");
  if (nranks <= 0 || nranks > MSCCLPP_BS_MAX_RANKS) return refuse(why, "expected nranks %d is out of range", nranks);
  if (len < MSCCLPP_BS_TABLE_HEADER_BYTES)
    return refuse(why, "rank table is %zu bytes, shorter than its %d-byte header", len, MSCCLPP_BS_TABLE_HEADER_BYTES);
  uint32_t count = mscclppGetLE32(buf + 8);
  if (count != (uint32_t)nranks) return refuse(why, "rank table has %u ranks, expected %d", count, nranks);
  if (mscclppGetLE32(buf + 12) != 0) return refuse(why, "rank table has non-zero reserved bytes");
  MSCCLPP_RETURN_ON_ERROR(checkLen("rank table", len, mscclppBootstrapTableBytes(nranks), why));
  for (int i = 0; i < nranks; i++) {
    struct mscclppBsRankInfo info;
    const uint8_t* rec = buf + MSCCLPP_BS_TABLE_HEADER_BYTES + (size_t)i * MSCCLPP_BS_RANK_INFO_BYTES;
    mscclppResult_t res = mscclppBootstrapParseRankInfo(rec, MSCCLPP_BS_RANK_INFO_BYTES, &info, why);
    if (res != mscclppSuccess) return res;
    if (info.rank != i) return refuse(why, "rank table record %d describes rank %d", i, info.rank);
  }
  /* Validated: now write the outputs. */
  *session = mscclppGetLE64(buf);
  for (int i = 0; i < nranks; i++)
    mscclppBootstrapParseRankInfo(buf + MSCCLPP_BS_TABLE_HEADER_BYTES + (size_t)i * MSCCLPP_BS_RANK_INFO_BYTES,
                                  MSCCLPP_BS_RANK_INFO_BYTES, &infos[i], NULL);
  return mscclppSuccess;
}

mscclppResult_t mscclppBootstrapParseErrorText(const uint8_t* buf, size_t len, char* out, size_t outLen,
                                               mscclppBsWhy* why) {
  if (buf == NULL || out == NULL || outLen < 2) return refuse(why, "NULL argument or no room for the text");
  if (len == 0 || len > MSCCLPP_BS_MAX_ERROR_TEXT)
    return refuse(why, "error text of %zu bytes is outside [1, %d]", len, MSCCLPP_BS_MAX_ERROR_TEXT);
  size_t n = len < outLen - 1 ? len : outLen - 1;
  for (size_t i = 0; i < n; i++) out[i] = (buf[i] >= 0x20 && buf[i] < 0x7f) ? (char)buf[i] : '?';
  out[n] = '\0';
  return mscclppSuccess;
}

/* ---- shrink records ------------------------------------------------------------ */

uint64_t mscclppBootstrapExcludedHash(const uint8_t secret[MSCCLPP_BS_SECRET_BYTES], const int32_t* excluded, int n) {
  /* "mscclpp-exclude" | count | ranks, hashed in pieces of at most 64 ranks
   * chained through the running value */
  uint8_t buf[16 + 8 + 4 * 64];
  memcpy(buf, "mscclpp-exclude", 16);
  uint64_t h = (uint64_t)(uint32_t)n;
  int i = 0;
  do {
    int k = n - i < 64 ? n - i : 64;
    mscclppPutLE64(buf + 16, h);
    for (int j = 0; j < k; j++) mscclppPutLE32(buf + 24 + 4 * j, (uint32_t)excluded[i + j]);
    h = mscclppSipHash(secret, buf, 24 + 4 * (size_t)k);
    i += k;
  } while (i < n);
  return h;
}

void mscclppBootstrapEncodeShrink(const struct mscclppBsShrink* rec, uint8_t out[MSCCLPP_BS_SHRINK_BYTES]) {
  memset(out, 0, MSCCLPP_BS_SHRINK_BYTES);
  putRecordHead(out, MSCCLPP_BS_KIND_SHRINK);
  mscclppPutLE32(out + 8, rec->what);
  mscclppPutLE32(out + 12, rec->nexcluded);
  mscclppPutLE64(out + 16, rec->from);
  mscclppPutLE64(out + 24, rec->echo);
  mscclppPutLE64(out + 32, rec->excludedHash);
  mscclppPutLE32(out + 40, (uint32_t)rec->parentNranks);
  for (int i = 0; i < MSCCLPP_BS_SHRINK_SHOWN; i++) mscclppPutLE32(out + 48 + 4 * i, (uint32_t)rec->shown[i]);
  if (rec->what == MSCCLPP_BS_SHRINK_RESP) mscclppBootstrapEncodeRankInfo(&rec->info, out + 80);
  size_t n = strnlen(rec->text, MSCCLPP_BS_SHRINK_TEXT);
  mscclppPutLE16(out + 120, (uint16_t)n);
  memcpy(out + 128, rec->text, n);
}

mscclppResult_t mscclppBootstrapParseShrink(const uint8_t* buf, size_t len, struct mscclppBsShrink* out,
                                            mscclppBsWhy* why) {
  if (buf == NULL || out == NULL) return refuse(why, "NULL argument");
  MSCCLPP_RETURN_ON_ERROR(checkLen("shrink record", len, MSCCLPP_BS_SHRINK_BYTES, why));
  MSCCLPP_RETURN_ON_ERROR(checkRecordHead("shrink record", buf, MSCCLPP_BS_KIND_SHRINK, why));
  struct mscclppBsShrink r;
  memset(&r, 0, sizeof(r));
  r.what = mscclppGetLE32(buf + 8);
  if (r.what < MSCCLPP_BS_SHRINK_REQ || r.what > MSCCLPP_BS_SHRINK_WHAT_MAX)
    return refuse(why, "shrink record says %u, not one of 1..%d", r.what, MSCCLPP_BS_SHRINK_WHAT_MAX);
  r.nexcluded = mscclppGetLE32(buf + 12);
  r.from = mscclppGetLE64(buf + 16);
  r.echo = mscclppGetLE64(buf + 24);
  if (r.from == 0) return refuse(why, "shrink record has call id 0");
  if ((r.echo == 0) != (r.what == MSCCLPP_BS_SHRINK_REQ))
    return refuse(why, "shrink record of kind %u %s", r.what, r.echo == 0 ? "answers no call" : "answers a call");
  if (r.echo == MSCCLPP_BS_SHRINK_ANY && r.what != MSCCLPP_BS_SHRINK_ABORT)
    return refuse(why, "shrink record of kind %u answers any call", r.what);
  r.excludedHash = mscclppGetLE64(buf + 32);
  uint32_t n = mscclppGetLE32(buf + 40);
  if (n == 0 || n > MSCCLPP_BS_MAX_RANKS)
    return refuse(why, "shrink record's parent has %u ranks, outside [1, %d]", n, MSCCLPP_BS_MAX_RANKS);
  r.parentNranks = (int32_t)n;
  if (r.nexcluded >= n)
    return refuse(why, "shrink record excludes %u of %u ranks: none would be left", r.nexcluded, n);
  if (!allZero(buf + 44, 4)) return refuse(why, "shrink record has non-zero reserved bytes");
  int32_t prev = -1;
  for (int i = 0; i < MSCCLPP_BS_SHRINK_SHOWN; i++) {
    int32_t x = (int32_t)mscclppGetLE32(buf + 48 + 4 * i);
    if ((uint32_t)i < r.nexcluded) {
      if (x <= prev || x >= r.parentNranks)
        return refuse(why, "shrink record's excluded rank %d (at %d) is not ascending inside [0, %d)", x, i,
                      r.parentNranks);
      prev = x;
    } else if (x != -1) {
      return refuse(why, "shrink record shows rank %d after its %u excluded ranks", x, r.nexcluded);
    }
    r.shown[i] = x;
  }
  if (r.what == MSCCLPP_BS_SHRINK_RESP) {
    MSCCLPP_RETURN_ON_ERROR(mscclppBootstrapParseRankInfo(buf + 80, MSCCLPP_BS_RANK_INFO_BYTES, &r.info, why));
  } else if (!allZero(buf + 80, MSCCLPP_BS_RANK_INFO_BYTES)) {
    return refuse(why, "shrink record of kind %u carries a rank info", r.what);
  }
  size_t tl = mscclppGetLE16(buf + 120);
  if (tl > MSCCLPP_BS_SHRINK_TEXT) return refuse(why, "shrink record's text of %zu bytes is too long", tl);
  if (!allZero(buf + 122, 6) || !allZero(buf + 128 + tl, MSCCLPP_BS_SHRINK_TEXT - tl))
    return refuse(why, "shrink record has non-zero reserved bytes or padding");
  for (size_t i = 0; i < tl; i++) {
    uint8_t c = buf[128 + i];
    if (c < 0x20 || c > 0x7e) return refuse(why, "shrink record's text has byte 0x%02x at %zu", c, i);
    r.text[i] = (char)c;
  }
  r.text[tl] = '\0';
  *out = r;
  return mscclppSuccess;
}
