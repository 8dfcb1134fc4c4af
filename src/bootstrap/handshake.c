/* SPDX-License-Identifier: MIT */
#include "bootstrap/handshake.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log.h"
#include "core/util.h"

mscclppResult_t mscclppBootstrapPendingStart(struct mscclppBsPending* p, int fd, const union mscclppSocketAddr* peer,
                                             double timeoutSeconds, const char* where) {
  memset(p, 0, sizeof(*p));
  p->fd = fd;
  p->deadline = mscclppDeadlineIn(timeoutSeconds);
  mscclppSocketAddrToText(peer, p->peerText, sizeof(p->peerText));
  mscclppResult_t res = mscclppRandomBytes(p->serverNonce, sizeof(p->serverNonce));
  if (res != mscclppSuccess) {
    close(fd);
    return res;
  }
  uint8_t challenge[MSCCLPP_BS_CHALLENGE_BYTES];
  mscclppBootstrapEncodeChallenge(p->serverNonce, challenge);
  ssize_t n = send(fd, challenge, sizeof(challenge), MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n != (ssize_t)sizeof(challenge)) {
    int e = n < 0 ? errno : EAGAIN;
    close(fd);
    return mscclppErrQuiet(mscclppRemoteError, MSCCLPP_LOG_BOOTSTRAP, "%s: cannot send the challenge to %s: %s", where,
                           p->peerText, strerror(e));
  }
  return mscclppSuccess;
}

int mscclppBootstrapPendingRead(struct mscclppBsPending* p, const uint8_t secret[MSCCLPP_BS_SECRET_BYTES],
                                const char* where) {
  if (p->helloDone) return MSCCLPP_BS_PENDING_DONE;
  while (p->got < sizeof(p->buf)) {
    ssize_t n = recv(p->fd, p->buf + p->got, sizeof(p->buf) - p->got, MSG_DONTWAIT);
    if (n > 0) {
      p->got += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    MSCCLPP_WARN(MSCCLPP_LOG_BOOTSTRAP,
                 "%s: refused connection from %s: it %s after %zu of %d hello bytes, without proving the job secret",
                 where, p->peerText, n == 0 ? "closed" : "reset the connection", p->got, MSCCLPP_BS_HELLO_BYTES);
    return MSCCLPP_BS_PENDING_REFUSED;
  }
  /* Refuse garbage as soon as the first bytes show it, without waiting for a
   * whole hello. */
  static const uint8_t head[8] = {MSCCLPP_BS_MAGIC & 0xff,         (MSCCLPP_BS_MAGIC >> 8) & 0xff,
                                  (MSCCLPP_BS_MAGIC >> 16) & 0xff, (MSCCLPP_BS_MAGIC >> 24) & 0xff,
                                  MSCCLPP_BS_VERSION & 0xff,       MSCCLPP_BS_VERSION >> 8,
                                  MSCCLPP_BS_KIND_HELLO,           0};
  size_t cmp = p->got < sizeof(head) ? p->got : sizeof(head);
  if (memcmp(p->buf, head, cmp) != 0 && p->got < sizeof(p->buf)) {
    MSCCLPP_WARN(MSCCLPP_LOG_BOOTSTRAP,
                 "%s: refused connection from %s: its first bytes are not a mscclpp hello (wrong program, or "
                 "garbage)",
                 where, p->peerText);
    return MSCCLPP_BS_PENDING_REFUSED;
  }
  if (p->got < sizeof(p->buf)) return MSCCLPP_BS_PENDING_MORE;
  mscclppBsWhy why;
  struct mscclppBsHello hello;
  if (mscclppBootstrapParseHello(p->buf, sizeof(p->buf), &hello, &why) != mscclppSuccess) {
    MSCCLPP_WARN(MSCCLPP_LOG_BOOTSTRAP, "%s: refused connection from %s: malformed hello: %s", where, p->peerText,
                 why.text);
    return MSCCLPP_BS_PENDING_REFUSED;
  }
  if (hello.mac != mscclppBootstrapHelloMac(secret, p->serverNonce, p->buf)) {
    MSCCLPP_WARN(MSCCLPP_LOG_BOOTSTRAP,
                 "%s: refused connection from %s (claims rank %d of %d): wrong job secret (hello MAC mismatch)", where,
                 p->peerText, hello.rank, hello.nranks);
    return MSCCLPP_BS_PENDING_REFUSED;
  }
  p->hello = hello;
  p->helloDone = 1;
  return MSCCLPP_BS_PENDING_DONE;
}

mscclppResult_t mscclppBootstrapPendingAck(struct mscclppBsPending* p, const uint8_t secret[MSCCLPP_BS_SECRET_BYTES],
                                           int32_t status) {
  uint8_t ack[MSCCLPP_BS_ACK_BYTES];
  mscclppBootstrapEncodeAck(status, secret, p->hello.nonce, p->serverNonce, ack);
  ssize_t n = send(p->fd, ack, sizeof(ack), MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n != (ssize_t)sizeof(ack))
    return mscclppErrQuiet(mscclppRemoteError, MSCCLPP_LOG_BOOTSTRAP, "cannot send the handshake ack to %s: %s",
                           p->peerText, n < 0 ? strerror(errno) : "short write");
  return mscclppSuccess;
}

mscclppResult_t mscclppBootstrapHandshakeClient(int fd, const uint8_t secret[MSCCLPP_BS_SECRET_BYTES],
                                                struct mscclppBsHello* hello, mscclppDeadline deadline,
                                                const char* peerText, int32_t* ackStatus) {
  uint8_t challenge[MSCCLPP_BS_CHALLENGE_BYTES];
  int eof = 0;
  mscclppResult_t res = mscclppSocketReadAll(fd, challenge, sizeof(challenge), deadline, &eof);
  if (res != mscclppSuccess)
    return mscclppErr(res, MSCCLPP_LOG_BOOTSTRAP, "%s %s before sending its challenge%s", peerText,
                      res == mscclppTimeout ? "timed out"
                      : eof                 ? "closed the connection"
                                            : "reset the connection",
                      res == mscclppTimeout ? "" : " (not a mscclpp bootstrap listener, or shutting down)");
  uint8_t serverNonce[MSCCLPP_BS_NONCE_BYTES];
  mscclppBsWhy why;
  if (mscclppBootstrapParseChallenge(challenge, sizeof(challenge), serverNonce, &why) != mscclppSuccess)
    return mscclppErr(mscclppRemoteError, MSCCLPP_LOG_BOOTSTRAP, "%s sent a malformed challenge: %s", peerText,
                      why.text);
  MSCCLPP_RETURN_ON_ERROR(mscclppRandomBytes(hello->nonce, sizeof(hello->nonce)));
  uint8_t out[MSCCLPP_BS_HELLO_BYTES];
  mscclppBootstrapEncodeHello(hello, secret, serverNonce, out);
  res = mscclppSocketWriteAll(fd, out, sizeof(out), deadline);
  if (res != mscclppSuccess)
    return mscclppErr(res, MSCCLPP_LOG_BOOTSTRAP, "sending the hello to %s failed: %s", peerText, strerror(errno));
  uint8_t ack[MSCCLPP_BS_ACK_BYTES];
  res = mscclppSocketReadAll(fd, ack, sizeof(ack), deadline, &eof);
  if (res != mscclppSuccess)
    return mscclppErr(res, MSCCLPP_LOG_BOOTSTRAP, "%s %s", peerText,
                      res == mscclppTimeout ? "did not answer the hello before the timeout"
                                            : "refused the hello (closed the connection): is the job secret the "
                                              "same on every rank?");
  int32_t status;
  uint64_t mac;
  if (mscclppBootstrapParseAck(ack, sizeof(ack), &status, &mac, &why) != mscclppSuccess)
    return mscclppErr(mscclppRemoteError, MSCCLPP_LOG_BOOTSTRAP, "%s sent a malformed ack: %s", peerText, why.text);
  if (mac != mscclppBootstrapAckMac(secret, hello->nonce, serverNonce, ack))
    return mscclppErr(mscclppRemoteError, MSCCLPP_LOG_BOOTSTRAP,
                      "%s failed to prove the job secret (ack MAC mismatch): refusing it", peerText);
  *ackStatus = status;
  return mscclppSuccess;
}
