/* SPDX-License-Identifier: MIT */
/*
 * The bootstrap: the TCP control plane a communicator is built on.
 *
 * Design (details in bootstrap.c and root.c):
 *  - A job is (root address, 16-byte secret, nranks). The root is a thread
 *    that serves one rendezvous: every rank connects, proves the secret and
 *    sends its rank info (peer listener address, host identity); when all
 *    nranks have joined, the root sends everyone the table of all rank infos
 *    and a fresh session number, then exits. Duplicate ranks, an nranks
 *    mismatch, or a rank that disconnects before the others joined abort the
 *    rendezvous: every rank that joined, or joins later, gets the reason.
 *  - Each rank has a peer listener and one progress thread that accepts and
 *    authenticates peers and reads every connection, queueing the messages
 *    per source rank (so different tags never block each other and a large
 *    send never waits for the matching recv to be posted). A thread waiting
 *    in a recv reads its peer's connection itself meanwhile (the progress
 *    thread stands aside), so a message costs one wake-up, as on a raw
 *    socket.
 *  - A rank connects to a peer the first time it sends to it; that
 *    connection carries this rank's messages to the peer, in order.
 *  - Failure detection: every rank keeps its connection to rank 0 (the
 *    monitor). A connection that closes without a GOODBYE message means its
 *    rank was lost; rank 0 then tells every rank "rank r lost". A rank whose
 *    connection to rank 0 breaks treats rank 0 as lost. Once a rank is lost,
 *    every pending and later operation fails with mscclppRemoteError naming
 *    it. Destroy sends GOODBYE on every connection, so a rank that finishes
 *    early is "left", not lost: operations that need it fail, others go on.
 *    A rank that leaves after seeing a loss repeats the loss before its
 *    GOODBYE, so its peers fail naming the lost rank, not the one that left;
 *    a rank whose creation failed (it could not reach a peer that died
 *    before anyone noticed) reports itself lost, so that the others fail
 *    their creation too instead of waiting for the timeout.
 *    (After rank 0 has left, losses are seen only by the ranks connected to
 *    the lost rank, or as timeouts.)
 *  - Every wait is bounded by the timeout of the params snapshot and polls in
 *    short slices, so a lost peer is noticed within about 0.1 s.
 *  - Shrink (shrink.c): the ranks that outlived a loss agree, over their
 *    connections of this bootstrap, on a new bootstrap of themselves; no
 *    root and no rank 0 are needed.
 * Collectives (allgather, barrier) must be called by all ranks in the same
 * order, from one thread at a time per rank; point-to-point calls may come
 * from several threads.
 */
#ifndef MSCCLPP_SRC_BOOTSTRAP_BOOTSTRAP_H_
#define MSCCLPP_SRC_BOOTSTRAP_BOOTSTRAP_H_

#include <stddef.h>
#include <stdint.h>

#include "bootstrap/socket.h"
#include "bootstrap/wire.h"
#include "core/params.h"
#include "mscclpp/core.h"

/* How one rank finds its job. Built by the mscclppBootstrapJobFrom*
 * functions below (env.c). */
struct mscclppBootstrapJob {
  int rank;
  int nranks;
  union mscclppSocketAddr root;     /* where ranks connect to the root */
  int startRoot;                    /* this rank starts the root (rank 0 of ip:port / env creation) */
  union mscclppSocketAddr rootBind; /* where that root listens (root, or the wildcard for a host name) */
  uint8_t secret[MSCCLPP_BS_SECRET_BYTES];
  char rootText[MSCCLPP_SOCKET_HOST_MAX + 16]; /* the address as given, for messages */
  int envLocalRank;                            /* the launcher's local rank, or -1 */
  const char* source;                          /* "unique id", "ip:port", "MSCCLPP_RANK/MSCCLPP_NRANKS", "Open MPI", ... */
  const int* cancel; /* __atomic, may be NULL: nonzero ends a rendezvous still waiting for the others (mscclppAborted) */
};

/* ---- job descriptions (env.c) --------------------------------------------- */

/* From a unique id's 128 bytes. mscclppInvalidArgument for a garbage id. */
mscclppResult_t mscclppBootstrapJobFromId(const uint8_t id[MSCCLPP_BS_ID_BYTES], int rank, int nranks,
                                          struct mscclppBootstrapJob* job);
/* From "ip:port" (rank 0 listens there). The secret is MSCCLPP_COMM_SECRET
 * from `params` when set, else derived from the address text. */
mscclppResult_t mscclppBootstrapJobFromAddress(const struct mscclppParams* params, const char* ipPort, int rank,
                                               int nranks, struct mscclppBootstrapJob* job);
/* From the launcher's environment: rank and size from MSCCLPP_RANK/NRANKS,
 * OMPI_COMM_WORLD_RANK/SIZE, SLURM_PROCID/NTASKS or RANK/WORLD_SIZE (first
 * found), the root from MSCCLPP_COMM_ID or MASTER_ADDR:MASTER_PORT.
 * mscclppInvalidUsage names what is missing, mscclppInvalidArgument what does
 * not parse. */
mscclppResult_t mscclppBootstrapJobFromEnv(const struct mscclppParams* params, struct mscclppBootstrapJob* job);
/* The secret used when MSCCLPP_COMM_SECRET is unset: a hash of the root
 * address text. It proves that a peer was given the same address (a stale
 * or stray process of another job is refused); it is not secret. */
void mscclppBootstrapDeriveSecret(const char* rootText, uint8_t secret[MSCCLPP_BS_SECRET_BYTES]);
/* Host identity: MSCCLPP_HOSTID when set, else "hostname:netns-inode" (the
 * inode of /proc/self/ns/net: containers with their own network namespace
 * are different hosts). `text` (may be NULL) gets the identity, *hash its
 * 64-bit hash. */
void mscclppBootstrapHostIdentity(const struct mscclppParams* params, char* text, size_t textLen, uint64_t* hash);

/* ---- the root (root.c) ------------------------------------------------------ */

struct mscclppBootstrapRoot;
/* Start a root listening on *bindAddr (port 0 picks one; *bindAddr gets the
 * bound address). detached: the root frees itself when done (unique ids);
 * otherwise the caller must mscclppBootstrapRootStop it. */
mscclppResult_t mscclppBootstrapRootStart(const struct mscclppParams* params, union mscclppSocketAddr* bindAddr,
                                          const uint8_t secret[MSCCLPP_BS_SECRET_BYTES], int detached,
                                          struct mscclppBootstrapRoot** root);
/* Wait for a non-detached root to finish (a finished rendezvous completes its
 * replies; one still gathering ranks is cancelled) and free it. NULL is a
 * no-op. */
void mscclppBootstrapRootStop(struct mscclppBootstrapRoot* root);

/* A new unique id: pick an interface (MSCCLPP_SOCKET_IFNAME/FAMILY), a random
 * secret, start a detached root there. */
mscclppResult_t mscclppBootstrapCreateId(const struct mscclppParams* params, uint8_t id[MSCCLPP_BS_ID_BYTES]);

/* ---- a rank's bootstrap (bootstrap.c) --------------------------------------- */

struct mscclppBootstrap;

/* Join the job: start the peer listener and progress thread (and the root
 * when job->startRoot), rendezvous, connect to rank 0, and pass a barrier.
 * Bounded by params->timeout. *out is written only on success. */
mscclppResult_t mscclppBootstrapCreate(const struct mscclppBootstrapJob* job, const struct mscclppParams* params,
                                       struct mscclppBootstrap** out);
/* Say goodbye to every peer and free everything. Works after failures. */
void mscclppBootstrapDestroy(struct mscclppBootstrap* bs);

/* This rank and the number of ranks. */
void mscclppBootstrapIdentity(const struct mscclppBootstrap* bs, int* rank, int* nranks);
/* This rank among the ranks of its host, and their number. */
void mscclppBootstrapLocalInfo(const struct mscclppBootstrap* bs, int* localRank, int* localNranks);
/* The host identity (mscclppBootstrapHostIdentity's hash) of `rank`, from the
 * rank table every rank received at the rendezvous; 0 for a rank out of
 * range. Equal for ranks of one host. */
uint64_t mscclppBootstrapHostHashOf(const struct mscclppBootstrap* bs, int rank);

/* Point-to-point, any size; the same (peer, tag) keeps order. A peer may be
 * this rank. Recv of a message whose size differs from `size` consumes it
 * and returns mscclppInvalidUsage. */
mscclppResult_t mscclppBootstrapSendTo(struct mscclppBootstrap* bs, int peer, int tag, const void* data, size_t size);
mscclppResult_t mscclppBootstrapRecvFrom(struct mscclppBootstrap* bs, int peer, int tag, void* data, size_t size);
/* A handler of the messages with `tag` (user tag space) from any peer,
 * for a layer above that serves its peers without its application thread
 * (register it before peers may send such messages). It is called on
 * whichever thread reads the message (the progress thread, or a thread
 * waiting in a receive), without the bootstrap's locks, and must neither
 * block nor call the bootstrap: it copies what it needs and hands the work
 * to a thread of its own. Such messages are not queued for
 * mscclppBootstrapRecvFrom; they must fit one piece (bs->maxPiece; larger
 * ones are queued as usual). fn NULL removes the handler, after every call
 * of it has returned. mscclppInvalidUsage when MAX_HANDLERS tags have one. */
typedef void (*mscclppBootstrapHandler)(void* arg, int peer, const void* data, size_t size);
mscclppResult_t mscclppBootstrapSetHandler(struct mscclppBootstrap* bs, int tag, mscclppBootstrapHandler fn,
                                           void* arg);
/* data: nranks * bytesPerRank bytes, this rank's slice at rank * bytesPerRank. */
mscclppResult_t mscclppBootstrapAllGatherBytes(struct mscclppBootstrap* bs, void* data, size_t bytesPerRank);
mscclppResult_t mscclppBootstrapBarrierWait(struct mscclppBootstrap* bs);

/* This rank's clock offset to rank 0's (add it to this rank's
 * CLOCK_MONOTONIC time to get rank 0's) in *offsetNs, measured over
 * `rounds` round trips with rank 0; *rttNs is the round trip the offset
 * comes from (the offset is good to about half of it). Rank 0 gets 0 and 0.
 * A collective: every rank calls it, in the same order as the other
 * collectives. */
mscclppResult_t mscclppBootstrapClockSync(struct mscclppBootstrap* bs, int rounds, int64_t* offsetNs, int64_t* rttNs);

/* For checks that must name a rank that does not come (MSCCLPP_CHECK_CALLS):
 * `table` (nranks * bytes) gets every rank's `bytes` at its rank's place and
 * present[r] says whether rank r gave them: rank 0 waits waitSec at most
 * for all (keep it below MSCCLPP_TIMEOUT, which bounds how long the others
 * wait for rank 0's answer). A collective among checks: every rank calls
 * it, in the same order as the other checks; its tags are apart from the
 * other collectives', so that checks that not every rank made (a revoke
 * interrupted them) leave those in step. */
mscclppResult_t mscclppBootstrapGatherCheck(struct mscclppBootstrap* bs, const void* mine, size_t bytes, double waitSec,
                                            void* table, uint8_t* present);

/* A 64-bit name of this bootstrap's job, equal on every rank of it and
 * different for each rendezvous (a hash of the job secret and the
 * session the root chose): what traces call the communicator. */
uint64_t mscclppBootstrapJobHash(const struct mscclppBootstrap* bs);

/* The job secret, for other layers whose connections must prove it too
 * (e.g. with mscclppSipHash over both sides' nonces, as the bootstrap does). */
void mscclppBootstrapGetSecret(const struct mscclppBootstrap* bs, uint8_t secret[MSCCLPP_BS_SECRET_BYTES]);

/* Make every operation in progress now (send, recv, allgather, barrier, on
 * any thread) fail with mscclppAborted, saying "interrupted (why)", within
 * one wait slice; operations begun later are not affected. A revoked
 * communicator's calls use it, so that none waits for a peer that has
 * stopped too. */
void mscclppBootstrapInterrupt(struct mscclppBootstrap* bs, const char* why);

/* ---- shrinking (shrink.c) ---------------------------------------------------- */

/* A new bootstrap of parent's ranks other than excluded[0..nexcluded)
 * (ascending, without this rank), numbered in parent-rank order, made by
 * those ranks together over the parent's connections: no root, no unique
 * id, nothing from the excluded ranks; it works after losses (a rank 0
 * lost included) as long as the members reach each other. Every member
 * calls it with the same list; members that pass different lists fail
 * with mscclppInvalidUsage naming both, as does an excluded rank that
 * calls it while the members do (shrink.c says when it waits instead). A
 * member lost meanwhile fails it with mscclppRemoteError on the others,
 * who then shrink the same parent again without it. Bounded by
 * params->timeout (the child's parameters); *cancel (may be NULL) nonzero
 * ends its waits with mscclppAborted. One shrink of a parent at a time per
 * process; the parent stays usable (and must be destroyed by the caller). */
mscclppResult_t mscclppBootstrapShrink(struct mscclppBootstrap* parent, const int* excluded, int nexcluded,
                                       const struct mscclppParams* params, const int* cancel,
                                       struct mscclppBootstrap** out);

/* mscclppRemoteError (the reason becomes the caller's last error) when a rank
 * was lost, mscclppSuccess otherwise. */
mscclppResult_t mscclppBootstrapGetLostStatus(struct mscclppBootstrap* bs);

/* For tests: what a peer needs to connect to this rank (listener address,
 * job secret, session), and the largest piece a message is cut into
 * (default MSCCLPP_BS_MAX_MSG_BYTES). Built only into the tests' copy of
 * the library (MSCCLPP_TEST_HOOKS). */
#ifdef MSCCLPP_TEST_HOOKS
void mscclppBootstrapTestView(struct mscclppBootstrap* bs, union mscclppSocketAddr* listenAddr,
                              uint8_t secret[MSCCLPP_BS_SECRET_BYTES], uint64_t* session);
void mscclppBootstrapSetMaxPieceForTest(struct mscclppBootstrap* bs, size_t bytes);
#endif

#endif /* MSCCLPP_SRC_BOOTSTRAP_BOOTSTRAP_H_ */
