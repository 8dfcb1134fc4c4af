/* SPDX-License-Identifier: MIT */
/*
 * The bootstrap's wire format: every byte the bootstrap puts on a socket, or
 * into a unique id, is encoded and parsed here, nowhere else.
 *
 * All integers are little-endian, all records have fixed sizes (except a
 * message body, whose length the header states), and every parser takes an
 * explicit length, checks every bound and writes its output only on success.
 * The parsers are pure (no I/O, no logging, no allocation) so the fuzzer
 * (tests/fuzz/fuzz_bootstrap.c) can drive them directly; on failure they
 * return mscclppInvalidArgument (mscclppRemoteError would be the caller's
 * choice) and, when `why` is not NULL, a sentence that names the bad value.
 *
 * Connection life (see bootstrap.c for the protocol around it):
 *   server -> client  CHALLENGE (32 bytes): magic, version, server nonce
 *   client -> server  HELLO     (96 bytes): client nonce, purpose, rank,
 *                     nranks, session, rank info, MAC over both nonces
 *   server -> client  ACK       (24 bytes): status, MAC over both nonces
 *   then messages: a 16-byte header (magic, type, flags, tag, size) and
 *   `size` bytes of body.
 * The MACs are SipHash-2-4 keyed by the 16-byte job secret; the secret itself
 * never travels.
 */
#ifndef MSCCLPP_SRC_BOOTSTRAP_WIRE_H_
#define MSCCLPP_SRC_BOOTSTRAP_WIRE_H_

#include <stddef.h>
#include <stdint.h>

#include "mscclpp/core.h"

#define MSCCLPP_BS_VERSION 1
#define MSCCLPP_BS_MAGIC 0x4253434du    /* "MCSB": handshake records */
#define MSCCLPP_BS_MSG_MAGIC 0x4d42u    /* "BM": message headers */
#define MSCCLPP_BS_ID_MAGIC 0x4449534du /* "MSID": unique ids */
#define MSCCLPP_BS_SECRET_BYTES 16
#define MSCCLPP_BS_NONCE_BYTES 16
#define MSCCLPP_BS_ID_BYTES 128
/* Largest body one message may carry. Larger user messages travel as several
 * messages (flag MORE on all but the last). */
#define MSCCLPP_BS_MAX_MSG_BYTES ((uint64_t)1 << 30)
#define MSCCLPP_BS_MAX_RANKS (1 << 20)
#define MSCCLPP_BS_MAX_ERROR_TEXT 512

#define MSCCLPP_BS_ADDR_BYTES 24
#define MSCCLPP_BS_RANK_INFO_BYTES 40
#define MSCCLPP_BS_CHALLENGE_BYTES 32
#define MSCCLPP_BS_HELLO_BYTES 96
#define MSCCLPP_BS_ACK_BYTES 24
#define MSCCLPP_BS_HEADER_BYTES 16
#define MSCCLPP_BS_TABLE_HEADER_BYTES 16
#define MSCCLPP_BS_PEER_STATUS_BYTES 8

/* Why a parser refused its input. */
typedef struct {
  char text[160];
} mscclppBsWhy;

/* A socket address as it travels: family 4 or 6, port, IPv6 scope id, and 16
 * address bytes (an IPv4 address in the first 4, the rest zero). */
struct mscclppBsAddr {
  uint8_t family;
  uint16_t port;
  uint32_t scopeId;
  uint8_t addr[16];
};

/* What a rank tells the root about itself; the root sends all of them back. */
struct mscclppBsRankInfo {
  int32_t rank;
  uint32_t pid;              /* for log lines only */
  uint64_t hostHash;         /* ranks with equal hashes share a host */
  struct mscclppBsAddr addr; /* the rank's peer listener */
};

/* ---- unique id (128 bytes) ------------------------------------------------
 * 0 magic u32 | 4 version u16 | 6 zero u16 | 8 root address (24) |
 * 32 secret (16) | 48 zeros (72) | 120 check u64 = SipHash(fixed key, 0..120)
 * The check only catches garbage and truncation; it is not a signature. */
struct mscclppBsId {
  struct mscclppBsAddr root;
  uint8_t secret[MSCCLPP_BS_SECRET_BYTES];
};
void mscclppBootstrapEncodeId(const struct mscclppBsId* id, uint8_t out[MSCCLPP_BS_ID_BYTES]);
mscclppResult_t mscclppBootstrapParseId(const uint8_t* buf, size_t len, struct mscclppBsId* out, mscclppBsWhy* why);

/* ---- address and rank info records --------------------------------------- */
void mscclppBootstrapEncodeAddr(const struct mscclppBsAddr* a, uint8_t out[MSCCLPP_BS_ADDR_BYTES]);
/* Family 4 or 6, port != 0, IPv4: bytes 4..15 and scope zero. */
mscclppResult_t mscclppBootstrapParseAddr(const uint8_t* buf, size_t len, struct mscclppBsAddr* out, mscclppBsWhy* why);
void mscclppBootstrapEncodeRankInfo(const struct mscclppBsRankInfo* info, uint8_t out[MSCCLPP_BS_RANK_INFO_BYTES]);
/* rank >= 0 and a valid address. */
mscclppResult_t mscclppBootstrapParseRankInfo(const uint8_t* buf, size_t len, struct mscclppBsRankInfo* out,
                                              mscclppBsWhy* why);

/* ---- handshake ------------------------------------------------------------ */
enum { MSCCLPP_BS_KIND_CHALLENGE = 1, MSCCLPP_BS_KIND_HELLO = 2, MSCCLPP_BS_KIND_ACK = 3, MSCCLPP_BS_KIND_SHRINK = 4 };
/* Why a client connects: to join at the root, or as a rank to a rank. */
enum { MSCCLPP_BS_PURPOSE_JOIN = 1, MSCCLPP_BS_PURPOSE_PEER = 2 };

void mscclppBootstrapEncodeChallenge(const uint8_t nonce[MSCCLPP_BS_NONCE_BYTES],
                                     uint8_t out[MSCCLPP_BS_CHALLENGE_BYTES]);
mscclppResult_t mscclppBootstrapParseChallenge(const uint8_t* buf, size_t len, uint8_t nonce[MSCCLPP_BS_NONCE_BYTES],
                                               mscclppBsWhy* why);

struct mscclppBsHello {
  uint8_t nonce[MSCCLPP_BS_NONCE_BYTES]; /* the client's */
  uint32_t purpose;
  int32_t rank;
  int32_t nranks;
  uint64_t session;              /* PEER: the session the root handed out; JOIN: 0 */
  struct mscclppBsRankInfo info; /* JOIN: the joining rank; PEER: zeros except rank */
  uint64_t mac;
};
/* Encodes `hello` with its MAC computed from `secret` and the server's nonce
 * (hello->mac is ignored). */
void mscclppBootstrapEncodeHello(const struct mscclppBsHello* hello, const uint8_t secret[MSCCLPP_BS_SECRET_BYTES],
                                 const uint8_t serverNonce[MSCCLPP_BS_NONCE_BYTES],
                                 uint8_t out[MSCCLPP_BS_HELLO_BYTES]);
/* Checks the layout: magic, version, kind, purpose, 0 <= rank < nranks <=
 * MSCCLPP_BS_MAX_RANKS, zero reserved bytes, and for JOIN a rank info whose
 * rank is `rank`. The MAC is returned in out->mac, not checked. */
mscclppResult_t mscclppBootstrapParseHello(const uint8_t* buf, size_t len, struct mscclppBsHello* out,
                                           mscclppBsWhy* why);
/* The MAC a HELLO must carry: SipHash(secret, "mscclpp-hello" | server nonce |
 * hello bytes 0..88). */
uint64_t mscclppBootstrapHelloMac(const uint8_t secret[MSCCLPP_BS_SECRET_BYTES],
                                  const uint8_t serverNonce[MSCCLPP_BS_NONCE_BYTES], const uint8_t* hello88);

/* ACK status: why a server refused an authenticated client. */
enum {
  MSCCLPP_BS_ACK_OK = 0,
  MSCCLPP_BS_ACK_WRONG_PURPOSE = 1, /* PEER at the root, JOIN at a rank */
  MSCCLPP_BS_ACK_WRONG_NRANKS = 2,
  MSCCLPP_BS_ACK_WRONG_SESSION = 3, /* a rank of another run of the job */
  MSCCLPP_BS_ACK_DUPLICATE = 4,     /* this rank is already connected */
  MSCCLPP_BS_ACK_CLOSING = 5,       /* the server is shutting down */
  MSCCLPP_BS_ACK_MAX = 5
};
const char* mscclppBootstrapAckText(int32_t status);
void mscclppBootstrapEncodeAck(int32_t status, const uint8_t secret[MSCCLPP_BS_SECRET_BYTES],
                               const uint8_t clientNonce[MSCCLPP_BS_NONCE_BYTES],
                               const uint8_t serverNonce[MSCCLPP_BS_NONCE_BYTES], uint8_t out[MSCCLPP_BS_ACK_BYTES]);
/* Layout checks only; *mac gets the MAC to compare with mscclppBootstrapAckMac. */
mscclppResult_t mscclppBootstrapParseAck(const uint8_t* buf, size_t len, int32_t* status, uint64_t* mac,
                                         mscclppBsWhy* why);
uint64_t mscclppBootstrapAckMac(const uint8_t secret[MSCCLPP_BS_SECRET_BYTES],
                                const uint8_t clientNonce[MSCCLPP_BS_NONCE_BYTES],
                                const uint8_t serverNonce[MSCCLPP_BS_NONCE_BYTES], const uint8_t* ack16);

/* ---- messages ------------------------------------------------------------- */
enum {
  MSCCLPP_BS_MSG_DATA = 1,        /* tagged payload; flags MORE, COLL */
  MSCCLPP_BS_MSG_GOODBYE = 2,     /* clean close follows; empty */
  MSCCLPP_BS_MSG_PEER_STATUS = 3, /* rank r left or was lost: rank 0 -> all, or a rank leaving after a loss */
  MSCCLPP_BS_MSG_TABLE = 4,       /* root -> rank: everyone's rank info */
  MSCCLPP_BS_MSG_ERROR = 5,       /* root -> rank: the rendezvous failed; text */
  MSCCLPP_BS_MSG_TYPE_MAX = 5
};
enum {
  MSCCLPP_BS_FLAG_MORE = 1, /* more pieces of the same message follow */
  MSCCLPP_BS_FLAG_COLL = 2, /* internal tag space (collectives) */
  MSCCLPP_BS_FLAGS_ALL = 3
};
/* 0 magic u16 | 2 type u8 | 3 flags u8 | 4 tag i32 | 8 size u64 */
struct mscclppBsHeader {
  uint8_t type;
  uint8_t flags;
  int32_t tag;
  uint64_t size;
};
void mscclppBootstrapEncodeHeader(const struct mscclppBsHeader* h, uint8_t out[MSCCLPP_BS_HEADER_BYTES]);
/* Checks magic, type, flags (only DATA has any), tag (0 except DATA) and size
 * per type: DATA <= MSCCLPP_BS_MAX_MSG_BYTES, GOODBYE 0, PEER_STATUS 8, TABLE
 * within MSCCLPP_BS_MAX_RANKS records, ERROR 1..MSCCLPP_BS_MAX_ERROR_TEXT. */
mscclppResult_t mscclppBootstrapParseHeader(const uint8_t* buf, size_t len, struct mscclppBsHeader* out,
                                            mscclppBsWhy* why);

/* PEER_STATUS body: 0 rank i32 | 4 status u32 */
enum { MSCCLPP_BS_PEER_LEFT = 1, MSCCLPP_BS_PEER_LOST = 2 };
void mscclppBootstrapEncodePeerStatus(int32_t rank, uint32_t status, uint8_t out[MSCCLPP_BS_PEER_STATUS_BYTES]);
mscclppResult_t mscclppBootstrapParsePeerStatus(const uint8_t* buf, size_t len, int nranks, int32_t* rank,
                                                uint32_t* status, mscclppBsWhy* why);

/* TABLE body: 0 session u64 | 8 count u32 | 12 zero u32 | count rank infos */
size_t mscclppBootstrapTableBytes(int nranks);
void mscclppBootstrapEncodeTable(uint64_t session, const struct mscclppBsRankInfo* infos, int nranks, uint8_t* out);
/* count must equal nranks and record i must describe rank i; `infos` has room
 * for nranks records. */
mscclppResult_t mscclppBootstrapParseTable(const uint8_t* buf, size_t len, int nranks, uint64_t* session,
                                           struct mscclppBsRankInfo* infos, mscclppBsWhy* why);

/* ---- shrink records ---------------------------------------------------------
 * What the ranks of a shrink (shrink.c) send each other as DATA messages on
 * the parent's connections, one fixed-size record each:
 *   0 magic u32 | 4 version u16 | 6 kind u16 (SHRINK) | 8 what u32 |
 *   12 nexcluded u32 | 16 from u64 | 24 echo u64 | 32 excludedHash u64 |
 *   40 parent nranks u32 | 44 zero u32 | 48 the first 8 excluded ranks
 *   (ascending, -1 after the last) | 80 rank info (40; RESP only, else
 *   zeros) | 120 text length u16 | 122 zeros (6) | 128 text (256, zero
 *   padded)
 * `from` is the sender's call id (random, not 0), `echo` the call id of the
 * request a RESP, EXCLUDED or ABORT answers (0 in a REQ; an ABORT may say
 * MSCCLPP_BS_SHRINK_ANY: "my call failed before I read your request").
 * excludedHash is
 * mscclppBootstrapExcludedHash of the sender's whole list: two records
 * name the same exclusion list when counts and hashes are equal. */
#define MSCCLPP_BS_SHRINK_BYTES 384
#define MSCCLPP_BS_SHRINK_SHOWN 8 /* excluded ranks a record spells out, for messages */
#define MSCCLPP_BS_SHRINK_TEXT 256
#define MSCCLPP_BS_SHRINK_ANY UINT64_MAX
enum {
  MSCCLPP_BS_SHRINK_REQ = 1,      /* a member asks another for its RESP */
  MSCCLPP_BS_SHRINK_RESP = 2,     /* the answer: the sender's list, new listener; its call id is its nonce */
  MSCCLPP_BS_SHRINK_ABORT = 3,    /* the sender gave the shrink up; text says why */
  MSCCLPP_BS_SHRINK_EXCLUDED = 4, /* the sender excludes the receiver, which asked */
  MSCCLPP_BS_SHRINK_WHAT_MAX = 4
};
struct mscclppBsShrink {
  uint32_t what;
  uint32_t nexcluded;
  uint64_t from;
  uint64_t echo;
  uint64_t excludedHash;
  int32_t parentNranks;
  int32_t shown[MSCCLPP_BS_SHRINK_SHOWN];
  struct mscclppBsRankInfo info;
  char text[MSCCLPP_BS_SHRINK_TEXT + 1]; /* terminated */
};
/* The keyed hash of an exclusion list (ascending ranks). */
uint64_t mscclppBootstrapExcludedHash(const uint8_t secret[MSCCLPP_BS_SECRET_BYTES], const int32_t* excluded, int n);
/* rec->text is cut to MSCCLPP_BS_SHRINK_TEXT bytes. */
void mscclppBootstrapEncodeShrink(const struct mscclppBsShrink* rec, uint8_t out[MSCCLPP_BS_SHRINK_BYTES]);
/* Checks the layout: head, what, from != 0, echo 0 exactly in a REQ and
 * MSCCLPP_BS_SHRINK_ANY only in an ABORT,
 * 0 <= nexcluded < parent nranks <= MSCCLPP_BS_MAX_RANKS, the shown ranks
 * ascending inside [0, parent nranks) then -1, zero reserved bytes and
 * padding, a valid rank info in a RESP (zeros otherwise), printable text. */
mscclppResult_t mscclppBootstrapParseShrink(const uint8_t* buf, size_t len, struct mscclppBsShrink* out,
                                            mscclppBsWhy* why);

/* ERROR body: text bytes, no terminator. `out` (outLen >= 2) gets a
 * terminated copy, cut to fit, with bytes outside printable ASCII as '?'. */
mscclppResult_t mscclppBootstrapParseErrorText(const uint8_t* buf, size_t len, char* out, size_t outLen,
                                               mscclppBsWhy* why);

#endif /* MSCCLPP_SRC_BOOTSTRAP_WIRE_H_ */
