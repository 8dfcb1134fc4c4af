/* SPDX-License-Identifier: MIT */
/*
 * Proving the job secret on a new connection (the root's and every rank's
 * listener use the server side; joining ranks and connecting peers the client
 * side).
 *
 *   server: CHALLENGE(server nonce)         -> client
 *   client: HELLO(client nonce, ..., MAC)   -> server   MAC = SipHash(secret, server nonce | hello)
 *   server: ACK(status, MAC)                -> client   MAC = SipHash(secret, client nonce | server nonce | ack)
 *
 * Nothing else is read from a connection before its HELLO checks out, and a
 * server never reads past the HELLO. A server refuses (closes without an
 * ACK, logs a WARN naming the peer address) a client that sends anything
 * malformed, a wrong MAC, or nothing within the handshake timeout. The
 * server side is a non-blocking state machine so that a silent or slow
 * client never delays the others; the client side blocks up to a deadline.
 */
#ifndef MSCCLPP_SRC_BOOTSTRAP_HANDSHAKE_H_
#define MSCCLPP_SRC_BOOTSTRAP_HANDSHAKE_H_

#include "bootstrap/socket.h"
#include "bootstrap/wire.h"

/* One accepted connection that has not proven the secret yet. */
struct mscclppBsPending {
  int fd;
  mscclppDeadline deadline;
  uint8_t serverNonce[MSCCLPP_BS_NONCE_BYTES];
  uint8_t buf[MSCCLPP_BS_HELLO_BYTES];
  size_t got;
  int helloDone;               /* the HELLO was read, parsed and its MAC checked */
  struct mscclppBsHello hello; /* valid when helloDone */
  char peerText[MSCCLPP_SOCKET_ADDR_TEXT];
};

enum { MSCCLPP_BS_PENDING_MORE = 0, MSCCLPP_BS_PENDING_DONE = 1, MSCCLPP_BS_PENDING_REFUSED = -1 };

/* Take ownership of an accepted fd and send the challenge. On failure the fd
 * is closed (and the failure logged at INFO). `where` names the listener in
 * log lines ("root", "rank 3"). */
mscclppResult_t mscclppBootstrapPendingStart(struct mscclppBsPending* p, int fd, const union mscclppSocketAddr* peer,
                                             double timeoutSeconds, const char* where);

/* Read what has arrived. DONE: p->hello holds a HELLO whose MAC is right.
 * REFUSED: the client was refused (logged at WARN with its address); the
 * caller closes p->fd. MORE: call again when readable. */
int mscclppBootstrapPendingRead(struct mscclppBsPending* p, const uint8_t secret[MSCCLPP_BS_SECRET_BYTES],
                                const char* where);

/* Send the ACK for a DONE pending connection (non-blocking; a 24-byte write
 * to a fresh socket). mscclppRemoteError if it cannot be written. */
mscclppResult_t mscclppBootstrapPendingAck(struct mscclppBsPending* p, const uint8_t secret[MSCCLPP_BS_SECRET_BYTES],
                                           int32_t status);

/* Client side on a connected fd: read the challenge, send `hello` (its nonce
 * and MAC are filled in here), read and check the ACK, all before `deadline`.
 * *ackStatus gets the server's status (MSCCLPP_BS_ACK_*); a refusal is the
 * caller's to report. `peerText` names the server in errors. */
mscclppResult_t mscclppBootstrapHandshakeClient(int fd, const uint8_t secret[MSCCLPP_BS_SECRET_BYTES],
                                                struct mscclppBsHello* hello, mscclppDeadline deadline,
                                                const char* peerText, int32_t* ackStatus);

#endif /* MSCCLPP_SRC_BOOTSTRAP_HANDSHAKE_H_ */
