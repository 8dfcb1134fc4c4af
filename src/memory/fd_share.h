/* SPDX-License-Identifier: MIT */
/*
 * Handing file descriptors to other processes of the same host: a memory
 * file (host shared memory) or an exported cuMem allocation.
 *
 * The owner runs an fd server: one thread listening on an abstract Unix
 * socket ("\0mscclpp-fd-<pid>-<random>", reachable in the owner's network
 * namespace, which the host identity includes). Each exported descriptor has
 * an id and a random 16-byte token; the memory record that names them
 * travels through the authenticated bootstrap. A peer connects, receives a
 * nonce, answers SipHash(token, nonce | id), and gets the descriptor back by
 * SCM_RIGHTS. The server also refuses processes of another user
 * (SO_PEERCRED), and the token itself never travels on the socket.
 *
 *   server -> client  CHALLENGE 24 B: magic u32, version u16, 0 u16, nonce[16]
 *   client -> server  REQUEST   24 B: magic u32, version u16, 0 u16, id u64, mac u64
 *   server -> client  REPLY      8 B: magic u32, status u32 (+ the fd when status 0)
 *
 * Integers are little-endian.
 */
#ifndef MSCCLPP_SRC_MEMORY_FD_SHARE_H_
#define MSCCLPP_SRC_MEMORY_FD_SHARE_H_

#include <stdatomic.h>
#include <stdint.h>

#include "core/util.h"
#include "mscclpp/core.h"

#define MSCCLPP_FD_SERVER_NAME_MAX 64 /* with its NUL */
#define MSCCLPP_FD_TOKEN_BYTES 16

struct mscclppFdServer;

/* Start a server; per-client I/O is bounded by timeoutSec. */
mscclppResult_t mscclppFdServerCreate(double timeoutSec, struct mscclppFdServer** server);
/* Stop the thread, close every exported descriptor. NULL is ignored. */
void mscclppFdServerDestroy(struct mscclppFdServer* server);
/* The socket's name (printable; the abstract address is a NUL then this). */
const char* mscclppFdServerName(const struct mscclppFdServer* server);

/* Export `fd`: the server takes ownership of it (closes it on unexport or
 * destroy, also on failure here). Writes a new id and token. */
mscclppResult_t mscclppFdServerExport(struct mscclppFdServer* server, int fd, uint64_t* id,
                                      uint8_t token[MSCCLPP_FD_TOKEN_BYTES]);
/* Stop serving `id` and close its descriptor. mscclppInvalidArgument for an
 * unknown id. */
mscclppResult_t mscclppFdServerUnexport(struct mscclppFdServer* server, uint64_t id);

/* Fetch descriptor `id` from server `name` (the caller closes *fd). Waits at
 * most until `deadline`, checking *abortFlag (may be NULL). `ownerRank` only
 * names the peer in messages. Errors: mscclppRemoteError (server gone,
 * refused the id or the proof, broke the protocol), mscclppTimeout,
 * mscclppAborted, mscclppSystemError. */
mscclppResult_t mscclppFdFetch(const char* name, uint64_t id, const uint8_t token[MSCCLPP_FD_TOKEN_BYTES],
                               int ownerRank, mscclppDeadline deadline, const uint32_t* abortFlag, int* fd);

#endif /* MSCCLPP_SRC_MEMORY_FD_SHARE_H_ */
