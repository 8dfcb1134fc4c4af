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

/* Create a unique id and start the root listener in this process (it serves
 * one job's rendezvous, then exits; it gives up after MSCCLPP_TIMEOUT).
 * Returns mscclppInvalidArgument for NULL, mscclppSystemError when no
 * interface or port can be had. */
MSCCLPP_API mscclppResult_t mscclppGetUniqueId(mscclppUniqueId* uniqueId);

/* Join the job described by `id` as `rank` of `nranks`. Blocks until all
 * ranks have joined or MSCCLPP_TIMEOUT passes (mscclppTimeout).
 * Errors: mscclppInvalidArgument (NULL comm, nranks <= 0, rank out of range,
 * malformed id), mscclppSystemError (sockets), mscclppRemoteError (a peer
 * failed or disagreed on nranks), mscclppTimeout. *comm is written only on
 * success. */
MSCCLPP_API mscclppResult_t mscclppCommInitRankFromId(mscclppComm_t* comm, int nranks, mscclppUniqueId id, int rank);

/* The seed's form: rank 0 listens on ipPortPair ("10.0.0.1:50000",
 * "[fe80::1%eth0]:50000", "host:50000"); the others connect to it. The job
 * secret is MSCCLPP_COMM_SECRET when set, else derived from the address.
 * Errors as mscclppCommInitRankFromId, plus mscclppInvalidArgument for a
 * malformed address and mscclppSystemError when the port is in use. */
MSCCLPP_API mscclppResult_t mscclppCommInitRank(mscclppComm_t* comm, int nranks, int rank, const char* ipPortPair);

/* Create from the environment: rank and size from MSCCLPP_RANK/NRANKS
 * (mscclpp-run), OMPI_COMM_WORLD_RANK/SIZE, SLURM_PROCID/NTASKS or
 * RANK/WORLD_SIZE (torchrun), in that order; the root from MSCCLPP_COMM_ID or
 * MASTER_ADDR:MASTER_PORT. mscclppInvalidUsage names what is missing. */
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

/* The first asynchronous error (a failed proxy operation, a lost peer, a
 * timeout in a device wait) or mscclppSuccess; the text is in
 * mscclppGetLastError() of the caller after this returns a failure code in
 * *asyncError. */
MSCCLPP_API mscclppResult_t mscclppCommGetAsyncError(mscclppComm_t comm, mscclppResult_t* asyncError);

/* ---- bootstrap operations (host, blocking, bounded by MSCCLPP_TIMEOUT) ---- */

/* data holds nranks * bytesPerRank bytes; this rank's slice (at rank *
 * bytesPerRank) is sent, the others are filled in. */
MSCCLPP_API mscclppResult_t mscclppBootstrapAllGather(mscclppComm_t comm, void* data, size_t bytesPerRank);
/* The seed's spelling of the same. */
MSCCLPP_API mscclppResult_t mscclppBootStrapAllGather(mscclppComm_t comm, void* data, int bytesPerRank);

/* Returns when every rank has entered the barrier. */
MSCCLPP_API mscclppResult_t mscclppBootstrapBarrier(mscclppComm_t comm);

/* Tagged point-to-point messages of any size (0 included). Messages between
 * a pair with the same tag arrive in order; different tags do not block one
 * another. Recv fails with mscclppInvalidUsage if the matching message's size
 * differs from `size` (the message is consumed). A peer may be this rank. */
MSCCLPP_API mscclppResult_t mscclppBootstrapSend(mscclppComm_t comm, int peer, int tag, const void* data, size_t size);
MSCCLPP_API mscclppResult_t mscclppBootstrapRecv(mscclppComm_t comm, int peer, int tag, void* data, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_COMM_H_ */
