/* SPDX-License-Identifier: MIT */
/*
 * mscclpp communicators and the bootstrap (TCP control plane) they carry.
 *
 * A communicator joins nranks processes (or threads) through a root address.
 * Three ways to create one:
 *   - mscclppGetUniqueId on one rank, the id shipped to the others (MPI_Bcast,
 *     a file, ...), then mscclppCommInitRankFromId everywhere;
 *   - mscclppCommInitRank with the seed's "ip:port" string (rank 0 listens
 *     there);
 *   - mscclppCommInitFromEnv, from the launcher's environment (mscclpp-run,
 *     torchrun, Open MPI, Slurm; see README).
 * Every wait inside is bounded by MSCCLPP_TIMEOUT; a peer that dies makes the
 * surviving ranks' calls fail with mscclppRemoteError naming it.
 *
 * Security: every bootstrap connection proves the job secret (a random
 * 128-bit value in the unique id, or MSCCLPP_COMM_SECRET) by a
 * challenge-response before anything else is read from it; the secret itself
 * never travels. With ip:port or environment creation and no
 * MSCCLPP_COMM_SECRET, the secret is derived from the root address text: that
 * keeps ranks of other jobs out but is not secret (mscclpp-run always sets a
 * random MSCCLPP_COMM_SECRET).
 *
 * Interfaces: MSCCLPP_SOCKET_IFNAME (NCCL_SOCKET_IFNAME rules: prefixes, "^"
 * excludes, "=" exact) and MSCCLPP_SOCKET_FAMILY (AF_INET, AF_INET6) choose
 * the addresses; by default a rank listens on the address its host routes
 * from toward the root, and mscclppGetUniqueId uses the first interface that
 * is up, not loopback or docker* (loopback when nothing else is up).
 * Ranks with the same host identity (host name and network namespace, or
 * MSCCLPP_HOSTID) are on one host: that gives the local rank and size.
 */
#ifndef MSCCLPP_COMM_H_
#define MSCCLPP_COMM_H_

#include <stddef.h>

#include "mscclpp/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mscclppComm* mscclppComm_t;

#define MSCCLPP_UNIQUE_ID_BYTES 128
/* Opaque, 128 bytes: root address and a random 128-bit job secret. Treat it
 * as a secret: whoever holds it can join the job. */
typedef struct {
  char internal[MSCCLPP_UNIQUE_ID_BYTES];
} mscclppUniqueId;

/* Create a unique id and start the root listener in this process (a thread
 * that serves one job's rendezvous, then exits; it gives up after
 * MSCCLPP_TIMEOUT). The calling process must stay alive until the ranks have
 * joined. Returns mscclppInvalidArgument for NULL or a malformed parameter
 * (MSCCLPP_SOCKET_FAMILY, ...), mscclppSystemError when no interface or port
 * can be had. */
MSCCLPP_API mscclppResult_t mscclppGetUniqueId(mscclppUniqueId* uniqueId);

/* Join the job described by `id` as `rank` of `nranks`. Blocks until all
 * ranks have joined or MSCCLPP_TIMEOUT passes (mscclppTimeout).
 * Errors: mscclppInvalidArgument (NULL comm, nranks <= 0, rank out of range,
 * an id that is not one of mscclppGetUniqueId's), mscclppSystemError
 * (sockets), mscclppRemoteError (the root refused this rank's secret, two
 * ranks claimed the same rank, the ranks disagree on nranks, or a rank
 * disconnected before all joined: every rank that joined gets the reason),
 * mscclppTimeout. *comm is written only on success. */
MSCCLPP_API mscclppResult_t mscclppCommInitRankFromId(mscclppComm_t* comm, int nranks, mscclppUniqueId id, int rank);

/* The seed's form: rank 0 listens on ipPortPair ("10.0.0.1:50000",
 * "[fe80::1%eth0]:50000", "host:50000"; for a host name, on every address of
 * its family) and the others connect to it, retrying until rank 0 is up. The
 * job secret is MSCCLPP_COMM_SECRET (32 hex digits) when set, else derived
 * from the address text, which must then be the same string on every rank.
 * Errors as mscclppCommInitRankFromId, plus mscclppInvalidArgument for a
 * malformed address (an IPv6 address needs brackets) or secret, and
 * mscclppSystemError when the port is in use or the address is not this
 * host's (rank 0). */
MSCCLPP_API mscclppResult_t mscclppCommInitRank(mscclppComm_t* comm, int nranks, int rank, const char* ipPortPair);

/* Create from the environment: rank and size from MSCCLPP_RANK/NRANKS
 * (mscclpp-run), OMPI_COMM_WORLD_RANK/SIZE, SLURM_PROCID/NTASKS or
 * RANK/WORLD_SIZE (torchrun), the first pair found; the root from
 * MSCCLPP_COMM_ID or MASTER_ADDR:MASTER_PORT (rank 0 listens there: when
 * torch.distributed already holds MASTER_PORT, set MSCCLPP_COMM_ID to another
 * port); the secret as for mscclppCommInitRank. mscclppInvalidUsage names
 * what is missing, mscclppInvalidArgument what does not parse; otherwise as
 * mscclppCommInitRank. */
MSCCLPP_API mscclppResult_t mscclppCommInitFromEnv(mscclppComm_t* comm);

/* Leave the job and free everything. Safe after a peer failure. Returns
 * mscclppInvalidUsage (and frees nothing) while objects created from the
 * communicator are still alive. NULL is mscclppInvalidArgument. */
MSCCLPP_API mscclppResult_t mscclppCommDestroy(mscclppComm_t comm);

/* This rank, the number of ranks, this rank among the ranks of its host, and
 * the number of ranks on its host. */
MSCCLPP_API mscclppResult_t mscclppCommRank(mscclppComm_t comm, int* rank);
MSCCLPP_API mscclppResult_t mscclppCommSize(mscclppComm_t comm, int* nranks);
MSCCLPP_API mscclppResult_t mscclppCommLocalRank(mscclppComm_t comm, int* localRank);
MSCCLPP_API mscclppResult_t mscclppCommLocalSize(mscclppComm_t comm, int* localNranks);

/* Where comm's collectives run: the CUDA device (0 and up; the one current
 * when comm was created, or when it was first used with
 * MSCCLPP_COLL_PREPARE=0), whose memory their buffers must be in and whose
 * streams they take, or -1 for the host backend (no GPU: buffers in host
 * memory, each call complete when it returns). */
MSCCLPP_API mscclppResult_t mscclppCommGetDevice(mscclppComm_t comm, int* device);

/* The first asynchronous error (a failed proxy operation, a lost peer, a
 * timeout in a device wait) or mscclppSuccess; the text is in
 * mscclppGetLastError() of the caller after this returns a failure code in
 * *asyncError. */
MSCCLPP_API mscclppResult_t mscclppCommGetAsyncError(mscclppComm_t comm, mscclppResult_t* asyncError);

/* ---- after a failure: revoke and shrink --------------------------------------- */

#define MSCCLPP_REVOKE_DEFAULT 0

/* Stop everything in flight on comm, on this rank only (no peer takes
 * part): the communicator's abort flag goes up, so that every wait of its
 * collectives, kernels, proxy and channels returns mscclppAborted, and
 * bootstrap operations in progress on any thread (mscclppBootstrap*,
 * and those collectives make) fail with mscclppAborted. From then on every
 * collective, send/recv and channel operation on comm fails with the
 * communicator's first error (mscclppAborted when the revoke came first);
 * mscclppCommGetAsyncError reports it. What remains possible is what
 * needs no in-flight work: mscclppCommShrink, new bootstrap operations
 * (which fail as usual if a peer was lost) and mscclppCommDestroy.
 * Returns mscclppInProgress while a call on comm is still running on
 * another thread, and mscclppSuccess once none is (quiescent); call it
 * again to ask. On a GPU the kernels already enqueued end at their next
 * poll of the flag; revoke does not wait for the device.
 * flags must be MSCCLPP_REVOKE_DEFAULT. Errors: mscclppInvalidArgument
 * (NULL, unknown flags), those of making the abort object (its first use). */
MSCCLPP_API mscclppResult_t mscclppCommRevoke(mscclppComm_t comm, int flags);

#define MSCCLPP_SHRINK_DEFAULT 0 /* a healthy communicator (or a revoked one) */
#define MSCCLPP_SHRINK_ABORT 1   /* after a failure: revoke the communicator first */

/* A new communicator of comm's ranks other than excludeRanks[0..
 * excludeCount) (any order, repeats allowed), numbered in comm's rank
 * order: the rank that was r is r minus the excluded ranks below it. Every
 * member (every rank not excluded) calls it with the same list; excluded
 * ranks do not. It needs no new unique id and nothing from the excluded
 * ranks, and it works when they are dead, rank 0 included: the members
 * agree over comm's connections among themselves and build a new bootstrap
 * led by the lowest member. The new communicator shares nothing with comm
 * (its own bootstrap, error domain, memory, channels, proxy and collective
 * state, built afresh) and inherits comm's parameters (MSCCLPP_TIMEOUT,
 * ...); comm stays until mscclppCommDestroy, which every rank calls, and
 * keeps working after a DEFAULT shrink (shrink it again as often as
 * needed).
 * flags: MSCCLPP_SHRINK_DEFAULT on a healthy (or revoked) communicator;
 * MSCCLPP_SHRINK_ABORT after a failure (a peer lost, a timeout): comm is
 * revoked first (mscclppCommRevoke) and its calls on other threads have
 * returned before the members agree.
 * Every wait is bounded by MSCCLPP_TIMEOUT. Errors: mscclppInvalidArgument
 * (NULL, bad flags, a rank out of range or this rank excluded),
 * mscclppInvalidUsage (DEFAULT on a failed communicator that is not
 * revoked; a member that comm knows lost or gone; members passing
 * different lists, or an excluded rank calling, reported to every rank
 * concerned while they call together, the message naming both lists; an
 * excluded rank that calls after the members are done waits until they
 * destroy comm), mscclppRemoteError (a member
 * was lost during the shrink, or gave it up: shrink comm again without it;
 * a member that got further may hold a new communicator to destroy, so
 * members should agree, e.g. through a store, that all succeeded before
 * they go on), mscclppAborted, mscclppTimeout. *newcomm is written only on
 * success. */
MSCCLPP_API mscclppResult_t mscclppCommShrink(mscclppComm_t comm, const int* excludeRanks, int excludeCount,
                                              mscclppComm_t* newcomm, int flags);

/* ---- growing: new processes join a communicator's ranks ------------------------ */

/* An id for growing comm: every rank of comm calls it (rank 0 makes the id
 * and starts its rendezvous in its own process, as mscclppGetUniqueId does,
 * and the others get it over comm's bootstrap). Hand it to the new
 * processes; rank 0's process must stay alive until they have joined.
 * Treat it as a secret. Errors: mscclppInvalidArgument (NULL), those of
 * mscclppGetUniqueId (on rank 0; mscclppRemoteError on the others) and of
 * the bootstrap. */
MSCCLPP_API mscclppResult_t mscclppCommGrowId(mscclppComm_t comm, mscclppUniqueId* id);

/* A new communicator of nranks ranks: comm's ranks, which keep their
 * numbers (they pass comm; `rank` is ignored), and new processes, which
 * pass comm = NULL and their rank, from comm's size up. Everyone passes the
 * id of mscclppCommGrowId and the same nranks, and waits until all have
 * joined (MSCCLPP_TIMEOUT). The new communicator shares nothing with comm,
 * which stays until it is destroyed; members inherit comm's parameters, new
 * ranks read theirs from the environment. Errors: mscclppInvalidArgument
 * (NULL, nranks not above comm's size, a rank out of range), those of
 * mscclppCommInitRankFromId, and mscclppInvalidUsage on every rank when a
 * new rank took an old rank's number or the members are not all there. */
MSCCLPP_API mscclppResult_t mscclppCommGrow(mscclppComm_t comm, int nranks, const mscclppUniqueId* id, int rank,
                                            mscclppComm_t* newcomm);

/* ---- bootstrap operations (host, blocking, bounded by MSCCLPP_TIMEOUT) ----
 * All return mscclppInvalidArgument for a NULL comm or bad arguments,
 * mscclppRemoteError once any rank was lost (naming it) or when the peer an
 * operation needs has destroyed its communicator, and mscclppTimeout. The
 * collectives (allgather, barrier) must be called by every rank in the same
 * order, from one thread at a time; send and recv may be called from several
 * threads. */

/* data holds nranks * bytesPerRank bytes; this rank's slice (at rank *
 * bytesPerRank) is sent, the others are filled in. */
MSCCLPP_API mscclppResult_t mscclppBootstrapAllGather(mscclppComm_t comm, void* data, size_t bytesPerRank);

/* Returns when every rank has entered the barrier. */
MSCCLPP_API mscclppResult_t mscclppBootstrapBarrier(mscclppComm_t comm);

/* Tagged point-to-point messages of any size (0 included; any int tag).
 * Messages between a pair with the same tag arrive in order; different tags
 * do not block one another (messages that arrive before their recv is posted
 * are queued, so a send never waits for the matching recv). Recv fails with
 * mscclppInvalidUsage if the matching message's size differs from `size`
 * (the message is consumed). A peer may be this rank. */
MSCCLPP_API mscclppResult_t mscclppBootstrapSend(mscclppComm_t comm, int peer, int tag, const void* data, size_t size);
MSCCLPP_API mscclppResult_t mscclppBootstrapRecv(mscclppComm_t comm, int peer, int tag, void* data, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_COMM_H_ */
