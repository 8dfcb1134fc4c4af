/* SPDX-License-Identifier: MIT */
/*
 * Sockets for the bootstrap: addresses ("ip:port", "[v6]:port", "host:port"),
 * the choice of interface (MSCCLPP_SOCKET_IFNAME, MSCCLPP_SOCKET_FAMILY),
 * listening, connecting and whole-buffer I/O bounded by a deadline.
 *
 * Every socket is created non-blocking and close-on-exec; blocking behaviour
 * comes from poll() with the deadline, so no call here can wait forever.
 */
#ifndef MSCCLPP_SRC_BOOTSTRAP_SOCKET_H_
#define MSCCLPP_SRC_BOOTSTRAP_SOCKET_H_

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "bootstrap/wire.h"
#include "core/util.h"
#include "mscclpp/core.h"

union mscclppSocketAddr {
  struct sockaddr sa;
  struct sockaddr_in in4;
  struct sockaddr_in6 in6;
};

/* Room for "[ipv6%scope]:port" and a terminator. */
#define MSCCLPP_SOCKET_ADDR_TEXT 96
#define MSCCLPP_SOCKET_HOST_MAX 256

socklen_t mscclppSocketAddrLen(const union mscclppSocketAddr* a);
/* "10.0.0.1:5000", "[::1]:5000", "[fe80::1%eth0]:5000"; "?" for an unknown family. */
void mscclppSocketAddrToText(const union mscclppSocketAddr* a, char* buf, size_t len);
void mscclppSocketAddrToWire(const union mscclppSocketAddr* a, struct mscclppBsAddr* out);
void mscclppSocketAddrFromWire(const struct mscclppBsAddr* w, union mscclppSocketAddr* out);
uint16_t mscclppSocketAddrPort(const union mscclppSocketAddr* a);
void mscclppSocketAddrSetPort(union mscclppSocketAddr* a, uint16_t port);
/* The wildcard address (0.0.0.0 or ::) of a's family with a's port. */
void mscclppSocketAddrWildcard(const union mscclppSocketAddr* a, union mscclppSocketAddr* out);

/* Split "host:port", "[v6]:port" or "[v6%scope]:port" into the host (without
 * brackets) and the port (1..65535, decimal). An unbracketed host with a colon
 * is refused (use brackets for IPv6). Pure; writes outputs only on success;
 * mscclppInvalidArgument with `why` otherwise. */
mscclppResult_t mscclppSocketParseHostPort(const char* text, char* host, size_t hostLen, uint16_t* port,
                                           mscclppBsWhy* why);

/* Resolve "host:port" (host: an IPv4/IPv6 literal or a name) with an optional
 * family (AF_UNSPEC, AF_INET, AF_INET6). *isNumeric tells whether the host
 * was a literal. Logs and returns mscclppInvalidArgument on failure. */
mscclppResult_t mscclppSocketResolve(const char* text, int family, union mscclppSocketAddr* out, int* isNumeric);

/* MSCCLPP_SOCKET_FAMILY: "" -> AF_UNSPEC; "AF_INET"/"4"/"ipv4" -> AF_INET;
 * "AF_INET6"/"6"/"ipv6" -> AF_INET6 (case-insensitive). Logs on failure. */
mscclppResult_t mscclppSocketParseFamily(const char* text, int* family);

/* NCCL_SOCKET_IFNAME rules: a comma list of name prefixes; a leading '^'
 * selects the interfaces that match none of them; '=' (after an optional '^')
 * makes every entry an exact name. Empty entries are ignored. Returns 1 when
 * `ifname` is selected by `spec`. Pure. */
int mscclppSocketIfnameMatch(const char* spec, const char* ifname);

/* The address of the first usable interface: up, with an address of the
 * family (IPv4 preferred when AF_UNSPEC; IPv6 link-local skipped), selected
 * by `spec`; when spec is empty: any but lo* and docker*, and lo when nothing
 * else is up. Port 0. `ifname` (may be NULL) gets the interface's name. */
mscclppResult_t mscclppSocketFindInterface(const char* spec, int family, union mscclppSocketAddr* out, char* ifname,
                                           size_t ifnameLen);

/* The local address the kernel would send from to reach `remote` (a UDP
 * connect and getsockname; nothing is sent). Port 0. */
mscclppResult_t mscclppSocketLocalAddrToward(const union mscclppSocketAddr* remote, union mscclppSocketAddr* local);

/* Listen on *addr (port 0: any); *addr gets the bound address. `reuse` sets
 * SO_REUSEADDR (a fixed, well-known port). A port in use is
 * mscclppSystemError naming it. */
mscclppResult_t mscclppSocketListen(union mscclppSocketAddr* addr, int reuse, int* fd);

/* Connect to addr before `deadline`. retryRefused: keep trying while the
 * connection is refused (the listener may not be up yet), with a backoff.
 * Returns mscclppTimeout when the deadline passes, mscclppRemoteError when
 * the peer refuses and retryRefused is 0, mscclppSystemError otherwise.
 * Failures are logged unless `quiet`, which leaves them to the caller. */
mscclppResult_t mscclppSocketConnect(const union mscclppSocketAddr* addr, mscclppDeadline deadline, int retryRefused,
                                     int quiet, int* fd);

/* Accept one connection (non-blocking listener): 1 and *fd, 0 when none is
 * waiting, -1 on an error worth logging (errno set). */
int mscclppSocketAccept(int listenFd, int* fd, union mscclppSocketAddr* peer);

/* Read or write exactly n bytes before the deadline. Read: mscclppRemoteError
 * on EOF (*eof set when eof != NULL) or a reset, mscclppTimeout. These do not
 * log: the caller knows what the bytes were for. */
mscclppResult_t mscclppSocketReadAll(int fd, void* buf, size_t n, mscclppDeadline deadline, int* eof);
mscclppResult_t mscclppSocketWriteAll(int fd, const void* buf, size_t n, mscclppDeadline deadline);

/* The earlier of two deadlines. */
static inline mscclppDeadline mscclppDeadlineMin(mscclppDeadline a, mscclppDeadline b) {
  return a.endNs < b.endNs ? a : b;
}

#endif /* MSCCLPP_SRC_BOOTSTRAP_SOCKET_H_ */
