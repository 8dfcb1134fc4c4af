/* SPDX-License-Identifier: MIT */
/* The fd server and its client. Protocol in fd_share.h. */
#include "memory/fd_share.h"

#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bytes.h"
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log.h"

#define FD_MAGIC 0x4446534du /* "MSFD" */
#define FD_VERSION 1
#define FD_CHALLENGE_BYTES 24
#define FD_REQUEST_BYTES 24
#define FD_REPLY_BYTES 8
#define POLL_SLICE_MS 50

enum { FD_STATUS_OK = 0, FD_STATUS_UNKNOWN_ID = 1, FD_STATUS_BAD_PROOF = 2, FD_STATUS_BAD_REQUEST = 3 };

struct exportEntry {
  uint64_t id;
  int fd;
  uint8_t token[MSCCLPP_FD_TOKEN_BYTES];
};

struct mscclppFdServer {
  int listenFd;
  int wakeFd;
  pthread_t thread;
  atomic_int stop;
  double timeoutSec;
  char name[MSCCLPP_FD_SERVER_NAME_MAX];
  pthread_mutex_t lock; /* guards the table below */
  struct exportEntry* entries;
  size_t count, capacity;
  uint64_t nextId;
};

/* SipHash(token, nonce | id): the proof that the client was given the token. */
static uint64_t proof(const uint8_t token[MSCCLPP_FD_TOKEN_BYTES], const uint8_t nonce[16], uint64_t id) {
  uint8_t msg[24];
  memcpy(msg, nonce, 16);
  mscclppPutLE64(msg + 16, id);
  return mscclppSipHash(token, msg, sizeof(msg));
}

static int addrOf(const char* name, struct sockaddr_un* addr, socklen_t* len) {
  size_t n = strlen(name);
  if (n == 0 || n + 1 > sizeof(addr->sun_path)) return 0;
  memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  memcpy(addr->sun_path + 1, name, n); /* sun_path[0] = 0: abstract */
  *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
  return 1;
}

/* Wait for `events` on fd until the deadline, in slices that check the abort
 * flag. */
static mscclppResult_t waitIo(int fd, short events, mscclppDeadline deadline, const uint32_t* abortFlag,
                              const char* what) {
  for (;;) {
    if (abortFlag != NULL && __atomic_load_n(abortFlag, __ATOMIC_ACQUIRE))
      return mscclppErr(mscclppAborted, MSCCLPP_LOG_MEM, "%s: aborted", what);
    int left = mscclppDeadlineRemainingMs(deadline);
    if (left == 0 && mscclppDeadlinePassed(deadline))
      return mscclppErr(mscclppTimeout, MSCCLPP_LOG_MEM, "%s: timed out", what);
    struct pollfd p = {.fd = fd, .events = events};
    int r = poll(&p, 1, left < POLL_SLICE_MS ? (left > 0 ? left : 1) : POLL_SLICE_MS);
    if (r < 0) {
      if (errno == EINTR) continue;
      return mscclppErr(mscclppSystemError, MSCCLPP_LOG_MEM, "%s: poll: %s", what, strerror(errno));
    }
    if (r > 0) return mscclppSuccess; /* readable, writable, or hung up: the I/O call tells */
  }
}

static mscclppResult_t sendAll(int fd, const uint8_t* buf, size_t len, mscclppDeadline deadline,
                               const uint32_t* abortFlag, const char* what) {
  size_t done = 0;
  while (done < len) {
    ssize_t n = send(fd, buf + done, len - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      done += (size_t)n;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      MSCCLPP_RETURN_ON_ERROR(waitIo(fd, POLLOUT, deadline, abortFlag, what));
      continue;
    }
    return mscclppErr(mscclppRemoteError, MSCCLPP_LOG_MEM, "%s: send: %s", what, strerror(errno));
  }
  return mscclppSuccess;
}

/* Receive exactly len bytes; the first descriptor passed with them goes to
 * *passedFd (when not NULL; -1 when none came). */
static mscclppResult_t recvAll(int fd, uint8_t* buf, size_t len, int* passedFd, mscclppDeadline deadline,
                               const uint32_t* abortFlag, const char* what) {
  size_t done = 0;
  if (passedFd != NULL) *passedFd = -1;
  while (done < len) {
    union {
      struct cmsghdr hdr;
      char space[CMSG_SPACE(sizeof(int))];
    } control;
    struct iovec iov = {.iov_base = buf + done, .iov_len = len - done};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (passedFd != NULL) {
      msg.msg_control = control.space;
      msg.msg_controllen = sizeof(control.space);
    }
    ssize_t n = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n > 0) {
      for (struct cmsghdr* c = passedFd != NULL ? CMSG_FIRSTHDR(&msg) : NULL; c != NULL; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len >= CMSG_LEN(sizeof(int))) {
          int got;
          memcpy(&got, CMSG_DATA(c), sizeof(got));
          if (*passedFd < 0)
            *passedFd = got;
          else
            close(got);
        }
      }
      done += (size_t)n;
      continue;
    }
    if (n == 0) {
      if (passedFd != NULL && *passedFd >= 0) close(*passedFd);
      return mscclppErr(mscclppRemoteError, MSCCLPP_LOG_MEM, "%s: connection closed after %zu of %zu bytes", what,
                        done, len);
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      mscclppResult_t res = waitIo(fd, POLLIN, deadline, abortFlag, what);
      if (res != mscclppSuccess) {
        if (passedFd != NULL && *passedFd >= 0) close(*passedFd);
        return res;
      }
      continue;
    }
    if (passedFd != NULL && *passedFd >= 0) close(*passedFd);
    return mscclppErr(mscclppRemoteError, MSCCLPP_LOG_MEM, "%s: recv: %s", what, strerror(errno));
  }
  return mscclppSuccess;
}

/* ---- server ------------------------------------------------------------------ */

static void sendReply(int c, uint32_t status, int fd, mscclppDeadline deadline) {
  uint8_t reply[FD_REPLY_BYTES];
  mscclppPutLE32(reply, FD_MAGIC);
  mscclppPutLE32(reply + 4, status);
  if (fd < 0) {
    (void)sendAll(c, reply, sizeof(reply), deadline, NULL, "fd server reply");
    return;
  }
  union {
    struct cmsghdr hdr;
    char space[CMSG_SPACE(sizeof(int))];
  } control;
  memset(&control, 0, sizeof(control));
  struct iovec iov = {.iov_base = reply, .iov_len = sizeof(reply)};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.space,
                       .msg_controllen = sizeof(control.space)};
  struct cmsghdr* c0 = CMSG_FIRSTHDR(&msg);
  c0->cmsg_level = SOL_SOCKET;
  c0->cmsg_type = SCM_RIGHTS;
  c0->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c0), &fd, sizeof(fd));
  /* An empty socket takes 8 bytes at once; a client that reads nothing is
   * its own problem. */
  if (sendmsg(c, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof(reply))
    MSCCLPP_INFO(MSCCLPP_LOG_MEM, "fd server: sending a descriptor failed: %s", strerror(errno));
}

static void serveClient(struct mscclppFdServer* s, int c) {
  mscclppDeadline deadline = mscclppDeadlineIn(s->timeoutSec);
  struct ucred cred = {0};
  socklen_t credLen = sizeof(cred);
  if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &credLen) != 0 || cred.uid != geteuid()) {
    MSCCLPP_INFO(MSCCLPP_LOG_MEM, "fd server %s: refused a client of another user (uid %u)", s->name,
                 (unsigned)cred.uid);
    return;
  }
  uint8_t challenge[FD_CHALLENGE_BYTES];
  mscclppPutLE32(challenge, FD_MAGIC);
  mscclppPutLE16(challenge + 4, FD_VERSION);
  mscclppPutLE16(challenge + 6, 0);
  if (mscclppRandomBytes(challenge + 8, 16) != mscclppSuccess) return;
  if (sendAll(c, challenge, sizeof(challenge), deadline, NULL, "fd server challenge") != mscclppSuccess) return;
  uint8_t req[FD_REQUEST_BYTES];
  if (recvAll(c, req, sizeof(req), NULL, deadline, NULL, "fd server request") != mscclppSuccess) return;
  if (mscclppGetLE32(req) != FD_MAGIC || mscclppGetLE16(req + 4) != FD_VERSION) {
    sendReply(c, FD_STATUS_BAD_REQUEST, -1, deadline);
    return;
  }
  uint64_t id = mscclppGetLE64(req + 8);
  uint64_t mac = mscclppGetLE64(req + 16);
  pthread_mutex_lock(&s->lock);
  struct exportEntry* e = NULL;
  for (size_t i = 0; i < s->count; i++)
    if (s->entries[i].id == id) e = &s->entries[i];
  if (e == NULL) {
    sendReply(c, FD_STATUS_UNKNOWN_ID, -1, deadline);
  } else {
    uint64_t diff = proof(e->token, challenge + 8, id) ^ mac;
    if (diff != 0)
      sendReply(c, FD_STATUS_BAD_PROOF, -1, deadline);
    else
      sendReply(c, FD_STATUS_OK, e->fd, deadline); /* under the lock: unexport cannot close it meanwhile */
  }
  pthread_mutex_unlock(&s->lock);
}

static void* serverMain(void* arg) {
  struct mscclppFdServer* s = arg;
  for (;;) {
    struct pollfd p[2] = {{.fd = s->listenFd, .events = POLLIN}, {.fd = s->wakeFd, .events = POLLIN}};
    /* Not a wait for a peer: the server idles here until a client comes or
     * mscclppFdServerDestroy wakes it. */
    int r = poll(p, 2, -1);
    if (atomic_load_explicit(&s->stop, memory_order_acquire)) break;
    if (r < 0) {
      if (errno == EINTR) continue;
      MSCCLPP_WARN(MSCCLPP_LOG_MEM, "fd server %s: poll: %s; it stops serving", s->name, strerror(errno));
      break;
    }
    if (p[0].revents & POLLIN) {
      int c = accept4(s->listenFd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (c < 0) continue;
      serveClient(s, c);
      close(c);
    }
  }
  return NULL;
}

mscclppResult_t mscclppFdServerCreate(double timeoutSec, struct mscclppFdServer** server) {
  struct mscclppFdServer* s = calloc(1, sizeof(*s));
  if (s == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_MEM, "cannot allocate an fd server");
  mscclppResult_t res;
  s->timeoutSec = timeoutSec;
  s->nextId = 1;
  atomic_init(&s->stop, 0);
  uint8_t rnd[8];
  char hex[17];
  res = mscclppRandomBytes(rnd, sizeof(rnd));
  if (res != mscclppSuccess) goto fail_free;
  mscclppHexEncode(rnd, sizeof(rnd), hex);
  snprintf(s->name, sizeof(s->name), "mscclpp-fd-%d-%s", (int)getpid(), hex);
  s->listenFd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s->listenFd < 0) {
    res = mscclppErr(mscclppSystemError, MSCCLPP_LOG_MEM, "fd server: socket(AF_UNIX): %s", strerror(errno));
    goto fail_free;
  }
  struct sockaddr_un addr;
  socklen_t addrLen = 0;
  addrOf(s->name, &addr, &addrLen);
  if (bind(s->listenFd, (struct sockaddr*)&addr, addrLen) != 0 || listen(s->listenFd, 128) != 0) {
    res = mscclppErr(mscclppSystemError, MSCCLPP_LOG_MEM, "fd server: bind/listen on abstract socket %s: %s", s->name,
                     strerror(errno));
    goto fail_close_listen;
  }
  s->wakeFd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (s->wakeFd < 0) {
    res = mscclppErr(mscclppSystemError, MSCCLPP_LOG_MEM, "fd server: eventfd: %s", strerror(errno));
    goto fail_close_listen;
  }
  pthread_mutex_init(&s->lock, NULL);
  int err = pthread_create(&s->thread, NULL, serverMain, s);
  if (err != 0) {
    res = mscclppErr(mscclppSystemError, MSCCLPP_LOG_MEM, "fd server: pthread_create: %s", strerror(err));
    goto fail_close_wake;
  }
  MSCCLPP_INFO(MSCCLPP_LOG_MEM, "fd server listening on abstract socket %s", s->name);
  *server = s;
  return mscclppSuccess;
fail_close_wake:
  pthread_mutex_destroy(&s->lock);
  close(s->wakeFd);
fail_close_listen:
  close(s->listenFd);
fail_free:
  free(s);
  return res;
}

void mscclppFdServerDestroy(struct mscclppFdServer* s) {
  if (s == NULL) return;
  atomic_store_explicit(&s->stop, 1, memory_order_release);
  uint64_t one = 1;
  if (write(s->wakeFd, &one, sizeof(one)) != (ssize_t)sizeof(one))
    MSCCLPP_WARN(MSCCLPP_LOG_MEM, "fd server %s: wake-up write failed: %s", s->name, strerror(errno));
  pthread_join(s->thread, NULL);
  for (size_t i = 0; i < s->count; i++) close(s->entries[i].fd);
  free(s->entries);
  pthread_mutex_destroy(&s->lock);
  close(s->wakeFd);
  close(s->listenFd);
  free(s);
}

const char* mscclppFdServerName(const struct mscclppFdServer* s) { return s->name; }

mscclppResult_t mscclppFdServerExport(struct mscclppFdServer* s, int fd, uint64_t* id,
                                      uint8_t token[MSCCLPP_FD_TOKEN_BYTES]) {
  struct exportEntry e = {.fd = fd};
  mscclppResult_t res = mscclppRandomBytes(e.token, sizeof(e.token));
  if (res != mscclppSuccess) {
    close(fd);
    return res;
  }
  pthread_mutex_lock(&s->lock);
  if (s->count == s->capacity) {
    size_t cap = s->capacity ? 2 * s->capacity : 8;
    struct exportEntry* grown = realloc(s->entries, cap * sizeof(*grown));
    if (grown == NULL) {
      pthread_mutex_unlock(&s->lock);
      close(fd);
      return mscclppErr(mscclppSystemError, MSCCLPP_LOG_MEM, "fd server: cannot grow the export table");
    }
    s->entries = grown;
    s->capacity = cap;
  }
  e.id = s->nextId++;
  s->entries[s->count++] = e;
  pthread_mutex_unlock(&s->lock);
  *id = e.id;
  memcpy(token, e.token, sizeof(e.token));
  return mscclppSuccess;
}

mscclppResult_t mscclppFdServerUnexport(struct mscclppFdServer* s, uint64_t id) {
  pthread_mutex_lock(&s->lock);
  for (size_t i = 0; i < s->count; i++) {
    if (s->entries[i].id == id) {
      close(s->entries[i].fd);
      s->entries[i] = s->entries[--s->count];
      pthread_mutex_unlock(&s->lock);
      return mscclppSuccess;
    }
  }
  pthread_mutex_unlock(&s->lock);
  return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_MEM, "fd server %s: export %llu does not exist", s->name,
                    (unsigned long long)id);
}

/* ---- client ------------------------------------------------------------------ */

mscclppResult_t mscclppFdFetch(const char* name, uint64_t id, const uint8_t token[MSCCLPP_FD_TOKEN_BYTES],
                               int ownerRank, mscclppDeadline deadline, const uint32_t* abortFlag, int* fd) {
  struct sockaddr_un addr;
  socklen_t addrLen = 0;
  if (!addrOf(name, &addr, &addrLen))
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_MEM, "fd server name '%s' of rank %d is invalid", name,
                      ownerRank);
  char what[160];
  snprintf(what, sizeof(what), "fetching shared memory %llu from rank %d (fd server %s)", (unsigned long long)id,
           ownerRank, name);
  if (abortFlag != NULL && __atomic_load_n(abortFlag, __ATOMIC_ACQUIRE))
    return mscclppErr(mscclppAborted, MSCCLPP_LOG_MEM, "%s: aborted", what);
  int c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (c < 0) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_MEM, "%s: socket: %s", what, strerror(errno));
  mscclppResult_t res;
  for (;;) {
    if (connect(c, (struct sockaddr*)&addr, addrLen) == 0) break;
    if (errno == EAGAIN || errno == EINTR) { /* backlog full: the server is busy */
      if (abortFlag != NULL && __atomic_load_n(abortFlag, __ATOMIC_ACQUIRE)) {
        res = mscclppErr(mscclppAborted, MSCCLPP_LOG_MEM, "%s: aborted", what);
        goto fail_close;
      }
      if (mscclppDeadlinePassed(deadline)) {
        res = mscclppErr(mscclppTimeout, MSCCLPP_LOG_MEM, "%s: server busy until the timeout", what);
        goto fail_close;
      }
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL);
      continue;
    }
    res = mscclppErr(mscclppRemoteError, MSCCLPP_LOG_MEM,
                     "%s: connect: %s (the process has exited, destroyed its communicator, or is on another host "
                     "or network namespace)",
                     what, strerror(errno));
    goto fail_close;
  }
  struct ucred cred = {0};
  socklen_t credLen = sizeof(cred);
  if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &credLen) != 0 || cred.uid != geteuid()) {
    res = mscclppErr(mscclppRemoteError, MSCCLPP_LOG_MEM, "%s: the server runs as uid %u, not as this user (%u)", what,
                     (unsigned)cred.uid, (unsigned)geteuid());
    goto fail_close;
  }
  uint8_t challenge[FD_CHALLENGE_BYTES];
  res = recvAll(c, challenge, sizeof(challenge), NULL, deadline, abortFlag, what);
  if (res != mscclppSuccess) goto fail_close;
  if (mscclppGetLE32(challenge) != FD_MAGIC || mscclppGetLE16(challenge + 4) != FD_VERSION) {
    res = mscclppErr(mscclppRemoteError, MSCCLPP_LOG_MEM, "%s: not an mscclpp fd server (magic 0x%08x, version %u)",
                     what, mscclppGetLE32(challenge), mscclppGetLE16(challenge + 4));
    goto fail_close;
  }
  uint8_t req[FD_REQUEST_BYTES];
  mscclppPutLE32(req, FD_MAGIC);
  mscclppPutLE16(req + 4, FD_VERSION);
  mscclppPutLE16(req + 6, 0);
  mscclppPutLE64(req + 8, id);
  mscclppPutLE64(req + 16, proof(token, challenge + 8, id));
  res = sendAll(c, req, sizeof(req), deadline, abortFlag, what);
  if (res != mscclppSuccess) goto fail_close;
  uint8_t reply[FD_REPLY_BYTES];
  int got = -1;
  res = recvAll(c, reply, sizeof(reply), &got, deadline, abortFlag, what);
  if (res != mscclppSuccess) goto fail_close;
  uint32_t status = mscclppGetLE32(reply + 4);
  if (mscclppGetLE32(reply) != FD_MAGIC || status != FD_STATUS_OK || got < 0) {
    if (got >= 0) close(got);
    const char* why = status == FD_STATUS_UNKNOWN_ID  ? "the memory is no longer exported (freed or deregistered)"
                      : status == FD_STATUS_BAD_PROOF ? "the server refused the proof (token from another record?)"
                      : status == FD_STATUS_OK        ? "no descriptor came with the reply"
                                                      : "the server refused the request";
    res = mscclppErr(mscclppRemoteError, MSCCLPP_LOG_MEM, "%s: %s", what, why);
    goto fail_close;
  }
  close(c);
  *fd = got;
  return mscclppSuccess;
fail_close:
  close(c);
  return res;
}
