/* SPDX-License-Identifier: MIT */
#include "bootstrap/socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log.h"

/* ---- addresses -------------------------------------------------------------- */

socklen_t mscclppSocketAddrLen(const union mscclppSocketAddr* a) {
  return a->sa.sa_family == AF_INET6 ? (socklen_t)sizeof(struct sockaddr_in6) : (socklen_t)sizeof(struct sockaddr_in);
}

void mscclppSocketAddrToText(const union mscclppSocketAddr* a, char* buf, size_t len) {
  char host[INET6_ADDRSTRLEN + IF_NAMESIZE + 2];
  if (a->sa.sa_family == AF_INET) {
    inet_ntop(AF_INET, &a->in4.sin_addr, host, sizeof(host));
    snprintf(buf, len, "%s:%u", host, (unsigned)ntohs(a->in4.sin_port));
  } else if (a->sa.sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &a->in6.sin6_addr, host, sizeof(host));
    char scope[IF_NAMESIZE + 2] = "";
    if (a->in6.sin6_scope_id != 0) {
      char name[IF_NAMESIZE];
      if (if_indextoname(a->in6.sin6_scope_id, name) != NULL)
        snprintf(scope, sizeof(scope), "%%%s", name);
      else
        snprintf(scope, sizeof(scope), "%%%u", (unsigned)a->in6.sin6_scope_id);
    }
    snprintf(buf, len, "[%s%s]:%u", host, scope, (unsigned)ntohs(a->in6.sin6_port));
  } else {
    snprintf(buf, len, "?");
  }
}

void mscclppSocketAddrToWire(const union mscclppSocketAddr* a, struct mscclppBsAddr* out) {
  memset(out, 0, sizeof(*out));
  if (a->sa.sa_family == AF_INET) {
    out->family = 4;
    out->port = ntohs(a->in4.sin_port);
    memcpy(out->addr, &a->in4.sin_addr, 4);
  } else {
    out->family = 6;
    out->port = ntohs(a->in6.sin6_port);
    out->scopeId = a->in6.sin6_scope_id;
    memcpy(out->addr, &a->in6.sin6_addr, 16);
  }
}

void mscclppSocketAddrFromWire(const struct mscclppBsAddr* w, union mscclppSocketAddr* out) {
  memset(out, 0, sizeof(*out));
  if (w->family == 4) {
    out->in4.sin_family = AF_INET;
    out->in4.sin_port = htons(w->port);
    memcpy(&out->in4.sin_addr, w->addr, 4);
  } else {
    out->in6.sin6_family = AF_INET6;
    out->in6.sin6_port = htons(w->port);
    out->in6.sin6_scope_id = w->scopeId;
    memcpy(&out->in6.sin6_addr, w->addr, 16);
  }
}

uint16_t mscclppSocketAddrPort(const union mscclppSocketAddr* a) {
  return ntohs(a->sa.sa_family == AF_INET6 ? a->in6.sin6_port : a->in4.sin_port);
}

void mscclppSocketAddrSetPort(union mscclppSocketAddr* a, uint16_t port) {
  if (a->sa.sa_family == AF_INET6)
    a->in6.sin6_port = htons(port);
  else
    a->in4.sin_port = htons(port);
}

void mscclppSocketAddrWildcard(const union mscclppSocketAddr* a, union mscclppSocketAddr* out) {
  uint16_t port = mscclppSocketAddrPort(a);
  memset(out, 0, sizeof(*out));
  if (a->sa.sa_family == AF_INET6) {
    out->in6.sin6_family = AF_INET6;
    out->in6.sin6_addr = in6addr_any;
  } else {
    out->in4.sin_family = AF_INET;
    out->in4.sin_addr.s_addr = htonl(INADDR_ANY);
  }
  mscclppSocketAddrSetPort(out, port);
}

static mscclppResult_t whyRefuse(mscclppBsWhy* why, const char* text, const char* what) {
  if (why != NULL) snprintf(why->text, sizeof(why->text), "\"%.80s\": %s", text, what);
  return mscclppInvalidArgument;
}

mscclppResult_t mscclppSocketParseHostPort(const char* text, char* host, size_t hostLen, uint16_t* port,
                                           mscclppBsWhy* why) {
  if (text == NULL || host == NULL || port == NULL || hostLen == 0) {
    if (why != NULL) snprintf(why->text, sizeof(why->text), "NULL argument");
    return mscclppInvalidArgument;
  }
  const char* hostStart;
  size_t hostN;
  const char* portText;
  if (text[0] == '[') {
    const char* close = strchr(text, ']');
    if (close == NULL) return whyRefuse(why, text, "'[' without ']' (expected [ipv6]:port)");
    hostStart = text + 1;
    hostN = (size_t)(close - hostStart);
    if (close[1] != ':') return whyRefuse(why, text, "expected ':' and a port after ']'");
    portText = close + 2;
    if (memchr(hostStart, '[', hostN) != NULL) return whyRefuse(why, text, "nested '['");
  } else {
    const char* colon = strrchr(text, ':');
    if (colon == NULL) return whyRefuse(why, text, "no port (expected ip:port, [ipv6]:port or host:port)");
    hostStart = text;
    hostN = (size_t)(colon - text);
    if (memchr(hostStart, ':', hostN) != NULL)
      return whyRefuse(why, text, "an IPv6 address needs brackets: [addr]:port");
    if (memchr(hostStart, ']', hostN) != NULL) return whyRefuse(why, text, "']' without '['");
    portText = colon + 1;
  }
  if (hostN == 0) return whyRefuse(why, text, "empty host");
  if (hostN >= hostLen) return whyRefuse(why, text, "host name too long");
  for (size_t i = 0; i < hostN; i++) {
    unsigned char c = (unsigned char)hostStart[i];
    if (c <= ' ' || c >= 0x7f) return whyRefuse(why, text, "host contains a space or a non-ASCII byte");
  }
  size_t pn = strlen(portText);
  if (pn == 0) return whyRefuse(why, text, "empty port");
  if (pn > 5) return whyRefuse(why, text, "port is not a number in [1, 65535]");
  unsigned long p = 0;
  for (size_t i = 0; i < pn; i++) {
    if (portText[i] < '0' || portText[i] > '9') return whyRefuse(why, text, "port is not a decimal number");
    p = p * 10 + (unsigned long)(portText[i] - '0');
  }
  if (p == 0 || p > 65535) return whyRefuse(why, text, "port is not in [1, 65535]");
  memcpy(host, hostStart, hostN);
  host[hostN] = '\0';
  *port = (uint16_t)p;
  return mscclppSuccess;
}

static const char* familyName(int family) {
  return family == AF_INET ? "AF_INET" : family == AF_INET6 ? "AF_INET6" : "any";
}

mscclppResult_t mscclppSocketResolve(const char* text, int family, union mscclppSocketAddr* out, int* isNumeric) {
  char host[MSCCLPP_SOCKET_HOST_MAX];
  uint16_t port;
  mscclppBsWhy why;
  if (mscclppSocketParseHostPort(text, host, sizeof(host), &port, &why) != mscclppSuccess)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_BOOTSTRAP, "malformed address %s", why.text);
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof(hints));
  hints.ai_family = family;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST;
  int numeric = 1;
  int rc = getaddrinfo(host, NULL, &hints, &res);
  if (rc == EAI_NONAME) {
    numeric = 0;
    hints.ai_flags = AI_ADDRCONFIG;
    rc = getaddrinfo(host, NULL, &hints, &res);
  }
  if (rc != 0 || res == NULL) {
    if (res) freeaddrinfo(res);
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_BOOTSTRAP, "cannot resolve \"%s\" (family %s): %s", host,
                      familyName(family), rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
  }
  const struct addrinfo* pick = NULL;
  for (const struct addrinfo* ai = res; ai != NULL && pick == NULL; ai = ai->ai_next)
    if (ai->ai_family == AF_INET) pick = ai;
  for (const struct addrinfo* ai = res; ai != NULL && pick == NULL; ai = ai->ai_next)
    if (ai->ai_family == AF_INET6) pick = ai;
  if (pick == NULL) {
    freeaddrinfo(res);
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_BOOTSTRAP, "\"%s\" has no IPv4 or IPv6 address", host);
  }
  union mscclppSocketAddr a;
  memset(&a, 0, sizeof(a));
  memcpy(&a, pick->ai_addr, pick->ai_addrlen < sizeof(a) ? pick->ai_addrlen : sizeof(a));
  freeaddrinfo(res);
  mscclppSocketAddrSetPort(&a, port);
  *out = a;
  if (isNumeric) *isNumeric = numeric;
  return mscclppSuccess;
}

mscclppResult_t mscclppSocketParseFamily(const char* text, int* family) {
  if (text == NULL || *text == '\0') {
    *family = AF_UNSPEC;
  } else if (strcasecmp(text, "AF_INET") == 0 || strcmp(text, "4") == 0 || strcasecmp(text, "ipv4") == 0) {
    *family = AF_INET;
  } else if (strcasecmp(text, "AF_INET6") == 0 || strcmp(text, "6") == 0 || strcasecmp(text, "ipv6") == 0) {
    *family = AF_INET6;
  } else {
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_BOOTSTRAP,
                      "MSCCLPP_SOCKET_FAMILY=\"%s\" is not AF_INET or AF_INET6", text);
  }
  return mscclppSuccess;
}

/* ---- interfaces ------------------------------------------------------------- */

int mscclppSocketIfnameMatch(const char* spec, const char* ifname) {
  if (spec == NULL || ifname == NULL) return 0;
  int exclude = 0, exact = 0;
  if (*spec == '^') {
    exclude = 1;
    spec++;
  }
  if (*spec == '=') {
    exact = 1;
    spec++;
  }
  int matched = 0;
  const char* p = spec;
  while (*p != '\0' && !matched) {
    const char* end = strchr(p, ',');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    if (n > 0) {
      if (exact)
        matched = strlen(ifname) == n && strncmp(ifname, p, n) == 0;
      else
        matched = strncmp(ifname, p, n) == 0;
    }
    p += n;
    if (*p == ',') p++;
  }
  return exclude ? !matched : matched;
}

mscclppResult_t mscclppSocketFindInterface(const char* spec, int family, union mscclppSocketAddr* out, char* ifname,
                                           size_t ifnameLen) {
  struct ifaddrs* list = NULL;
  if (getifaddrs(&list) != 0)
    return mscclppErr(mscclppSystemError, MSCCLPP_LOG_BOOTSTRAP, "getifaddrs failed: %s", strerror(errno));
  int userSpec = spec != NULL && *spec != '\0';
  /* Without MSCCLPP_SOCKET_IFNAME: first anything but loopback and docker
   * bridges, then (a single-host job on a machine without a network) lo. */
  const char* passes[2] = {userSpec ? spec : "^docker,lo", userSpec ? NULL : "docker,lo"};
  int families[2] = {family == AF_UNSPEC ? AF_INET : family, family == AF_UNSPEC ? AF_INET6 : AF_UNSPEC};
  const struct ifaddrs* pick = NULL;
  for (int p = 0; p < 2 && pick == NULL && passes[p] != NULL; p++) {
    for (int f = 0; f < 2 && pick == NULL && families[f] != AF_UNSPEC; f++) {
      for (const struct ifaddrs* i = list; i != NULL && pick == NULL; i = i->ifa_next) {
        if (i->ifa_addr == NULL || i->ifa_addr->sa_family != families[f]) continue;
        if (!(i->ifa_flags & IFF_UP)) continue;
        if (families[f] == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&((const struct sockaddr_in6*)i->ifa_addr)->sin6_addr))
          continue;
        if (!mscclppSocketIfnameMatch(passes[p], i->ifa_name)) continue;
        pick = i;
      }
    }
  }
  if (pick == NULL) {
    freeifaddrs(list);
    return mscclppErr(mscclppSystemError, MSCCLPP_LOG_BOOTSTRAP,
                      "no network interface is up with an address of family %s%s%s%s", familyName(family),
                      userSpec ? " and a name selected by MSCCLPP_SOCKET_IFNAME=\"" : "", userSpec ? spec : "",
                      userSpec ? "\"" : "");
  }
  union mscclppSocketAddr a;
  memset(&a, 0, sizeof(a));
  memcpy(&a, pick->ifa_addr,
         pick->ifa_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in));
  mscclppSocketAddrSetPort(&a, 0);
  if (ifname != NULL && ifnameLen > 0) snprintf(ifname, ifnameLen, "%s", pick->ifa_name);
  freeifaddrs(list);
  *out = a;
  return mscclppSuccess;
}

mscclppResult_t mscclppSocketLocalAddrToward(const union mscclppSocketAddr* remote, union mscclppSocketAddr* local) {
  char text[MSCCLPP_SOCKET_ADDR_TEXT];
  mscclppSocketAddrToText(remote, text, sizeof(text));
  int fd = socket(remote->sa.sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return mscclppErr(mscclppSystemError, MSCCLPP_LOG_BOOTSTRAP, "socket for a route lookup failed: %s",
                      strerror(errno));
  union mscclppSocketAddr a;
  socklen_t len = sizeof(a);
  if (connect(fd, &remote->sa, mscclppSocketAddrLen(remote)) != 0 || getsockname(fd, &a.sa, &len) != 0) {
    int e = errno;
    close(fd);
    return mscclppErr(mscclppSystemError, MSCCLPP_LOG_BOOTSTRAP, "no route to %s: %s", text, strerror(e));
  }
  close(fd);
  mscclppSocketAddrSetPort(&a, 0);
  *local = a;
  return mscclppSuccess;
}

/* ---- connections ------------------------------------------------------------- */

static void setNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

mscclppResult_t mscclppSocketListen(union mscclppSocketAddr* addr, int reuse, int* fd) {
  char text[MSCCLPP_SOCKET_ADDR_TEXT];
  mscclppSocketAddrToText(addr, text, sizeof(text));
  int s = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s < 0)
    return mscclppErr(mscclppSystemError, MSCCLPP_LOG_BOOTSTRAP, "socket for listening on %s failed: %s", text,
                      strerror(errno));
  int one = 1;
  if (reuse) setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(s, &addr->sa, mscclppSocketAddrLen(addr)) != 0) {
    int e = errno;
    close(s);
    if (e == EADDRINUSE)
      return mscclppErr(mscclppSystemError, MSCCLPP_LOG_BOOTSTRAP,
                        "cannot listen on %s: the port is in use (another job, or a stale process?)", text);
    return mscclppErr(mscclppSystemError, MSCCLPP_LOG_BOOTSTRAP, "cannot bind %s: %s", text, strerror(e));
  }
  if (listen(s, SOMAXCONN) != 0) {
    int e = errno;
    close(s);
    return mscclppErr(mscclppSystemError, MSCCLPP_LOG_BOOTSTRAP, "listen on %s failed: %s", text, strerror(e));
  }
  socklen_t len = sizeof(*addr);
  union mscclppSocketAddr bound;
  if (getsockname(s, &bound.sa, &len) != 0) {
    int e = errno;
    close(s);
    return mscclppErr(mscclppSystemError, MSCCLPP_LOG_BOOTSTRAP, "getsockname on %s failed: %s", text, strerror(e));
  }
  *addr = bound;
  *fd = s;
  return mscclppSuccess;
}

static int refusedLike(int e) {
  return e == ECONNREFUSED || e == ETIMEDOUT || e == ECONNRESET || e == EHOSTUNREACH || e == ENETUNREACH ||
         e == ECONNABORTED;
}

static void sleepMs(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

mscclppResult_t mscclppSocketConnect(const union mscclppSocketAddr* addr, mscclppDeadline deadline, int retryRefused,
                                     int quiet, int* fd) {
  char text[MSCCLPP_SOCKET_ADDR_TEXT];
  mscclppSocketAddrToText(addr, text, sizeof(text));
  /* quiet: logged at INFO (a caller that retries expects failures) */
#define fail(...) (quiet ? mscclppErrQuiet(__VA_ARGS__) : mscclppErr(__VA_ARGS__))
  int backoffMs = 5;
  int lastErr = 0;
  for (;;) {
    int s = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s < 0)
      return fail(mscclppSystemError, MSCCLPP_LOG_BOOTSTRAP, "socket to connect to %s failed: %s", text,
                  strerror(errno));
    int err = 0;
    if (connect(s, &addr->sa, mscclppSocketAddrLen(addr)) != 0) {
      err = errno;
      if (err == EINPROGRESS || err == EINTR) {
        struct pollfd p = {s, POLLOUT, 0};
        int rc;
        do {
          rc = poll(&p, 1, mscclppDeadlineRemainingMs(deadline));
        } while (rc < 0 && errno == EINTR);
        if (rc == 0) {
          close(s);
          return fail(mscclppTimeout, MSCCLPP_LOG_BOOTSTRAP, "connect to %s timed out", text);
        }
        socklen_t len = sizeof(err);
        if (rc < 0 || getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      }
    }
    if (err == 0) {
      setNoDelay(s);
      *fd = s;
      return mscclppSuccess;
    }
    close(s);
    lastErr = err;
    if (!refusedLike(err)) {
      return fail(mscclppSystemError, MSCCLPP_LOG_BOOTSTRAP, "connect to %s failed: %s", text, strerror(err));
    }
    if (!retryRefused)
      return fail(mscclppRemoteError, MSCCLPP_LOG_BOOTSTRAP, "connect to %s failed: %s", text, strerror(err));
    int left = mscclppDeadlineRemainingMs(deadline);
    if (left <= 0) break;
    sleepMs(backoffMs < left ? backoffMs : left);
    if (backoffMs < 100) backoffMs *= 2;
  }
  return fail(mscclppTimeout, MSCCLPP_LOG_BOOTSTRAP, "could not connect to %s before the timeout (last error: %s)",
              text, strerror(lastErr));
}
#undef fail

int mscclppSocketAccept(int listenFd, int* fd, union mscclppSocketAddr* peer) {
  socklen_t len = sizeof(*peer);
  int s = accept4(listenFd, &peer->sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (s < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED || errno == EPROTO) return 0;
    return -1;
  }
  setNoDelay(s);
  *fd = s;
  return 1;
}

/* Wait until fd is ready for `events` or the deadline passes (mscclppTimeout,
 * errno ETIMEDOUT); EINTR counts as ready (the caller tries again). */
static mscclppResult_t waitFd(int fd, short events, mscclppDeadline deadline) {
  struct pollfd pf = {fd, events, 0};
  int left = mscclppDeadlineRemainingMs(deadline);
  if (left <= 0) {
    errno = ETIMEDOUT;
    return mscclppTimeout;
  }
  if (poll(&pf, 1, left) < 0 && errno != EINTR) return mscclppSystemError;
  return mscclppSuccess;
}

mscclppResult_t mscclppSocketReadAll(int fd, void* buf, size_t n, mscclppDeadline deadline, int* eof) {
  uint8_t* p = (uint8_t*)buf;
  if (eof) *eof = 0;
  while (n > 0) {
    ssize_t got = recv(fd, p, n, MSG_DONTWAIT);
    if (got > 0) {
      p += got;
      n -= (size_t)got;
      continue;
    }
    if (got == 0) {
      if (eof) *eof = 1;
      errno = ECONNRESET;
      return mscclppRemoteError;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return mscclppRemoteError;
    mscclppResult_t r = waitFd(fd, POLLIN, deadline);
    if (r != mscclppSuccess) return r;
  }
  return mscclppSuccess;
}

mscclppResult_t mscclppSocketWriteAll(int fd, const void* buf, size_t n, mscclppDeadline deadline) {
  const uint8_t* p = (const uint8_t*)buf;
  while (n > 0) {
    ssize_t put = send(fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (put > 0) {
      p += put;
      n -= (size_t)put;
      continue;
    }
    if (put < 0 && errno == EINTR) continue;
    if (put < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return mscclppRemoteError;
    mscclppResult_t r = waitFd(fd, POLLOUT, deadline);
    if (r != mscclppSuccess) return r;
  }
  return mscclppSuccess;
}
