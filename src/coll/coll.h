/*
 * The collective layer's inside: what the API (coll.c) hands to a backend.
 *
 * coll.c checks the arguments, resolves groups of send/recv, picks the
 * backend (the GPU when the communicator has a device, else the host
 * backend; for allreduce across hosts, first the hierarchy of coll_hier.c
 * on child communicators, coll/hier/) and calls it with one mscclppCollArgs (a
 * collective) or a list of mscclppCollP2pOp (a group of sends and
 * receives). A backend keeps its per-communicator state (scratch memory,
 * channels to every peer, round counters) behind comm->collHost /
 * comm->collGpu (the hierarchy: comm->collHier), made on first use, which
 * every rank reaches at the same collective call; comm destruction calls
 * mscclppCollRelease.
 */
#ifndef MSCCLPP_SRC_COLL_COLL_H_
#define MSCCLPP_SRC_COLL_COLL_H_

#include <stddef.h>

#include "comm/comm.h"
#include "mscclpp/coll.h"

#include "coll/coll_kind.h"

/* "allreduce", ... as MSCCLPP_ALGO and mscclppCollAlgoNames spell them. */
const char* mscclppCollKindName(mscclppCollKind kind);

/* One collective call, checked. `count` is the API's count argument (per
 * rank for allgather/alltoall, the output's for reduce-scatter). */
struct mscclppCollArgs {
  mscclppCollKind kind;
  const void* send;
  void* recv;
  size_t count;
  mscclppDataType_t type;
  size_t typeSize;
  mscclppRedOp_t op; /* mscclppSum for the copy-only collectives */
  int root;          /* broadcast, reduce; 0 otherwise */
  mscclppStream_t stream;
  const char* algo;  /* MSCCLPP_ALGO's choice for this collective, or NULL */
};

/* One send or receive of a group (or a lone mscclppSend/Recv). */
struct mscclppCollP2pOp {
  int isSend;
  int peer;
  void* buf; /* the send buffer (read only) or the receive buffer */
  size_t bytes;
};

/* MSCCLPP_ALGO's entry for `kind` ("allreduce=rsag,allgather=packet" of
 * comm's parameters), copied into buf; *algo = NULL when it names none. An
 * unknown collective or algorithm is mscclppInvalidArgument naming it. */
mscclppResult_t mscclppCollForcedAlgo(const struct mscclppComm* comm, mscclppCollKind kind, char* buf, size_t bufSize,
                                      const char** algo);

/* Run a checked call (count > 0) on comm: the hierarchical allreduce
 * (coll_hier.h) where it applies, else comm's backend. The API calls it, and
 * coll_hier.c for the steps on its child communicators. Sets comm's
 * collRelease. */
mscclppResult_t mscclppCollDispatch(struct mscclppComm* comm, const struct mscclppCollArgs* a);

/* The host backend (coll/host/coll_host.c): runs the call to completion on this
 * thread. */
mscclppResult_t mscclppCollHostRun(struct mscclppComm* comm, const struct mscclppCollArgs* args);
mscclppResult_t mscclppCollHostP2p(struct mscclppComm* comm, const struct mscclppCollP2pOp* ops, int nops);
void mscclppCollHostRelease(struct mscclppComm* comm);

/* The GPU backend (coll/gpu/coll_gpu.c, kernels in coll/gpu/coll_gpu_kernels.cu): enqueues on the
 * stream. Built only with CUDA; without it these return
 * mscclppInvalidUsage. */
mscclppResult_t mscclppCollGpuRun(struct mscclppComm* comm, const struct mscclppCollArgs* args);
mscclppResult_t mscclppCollGpuP2p(struct mscclppComm* comm, const struct mscclppCollP2pOp* ops, int nops,
                                  mscclppStream_t stream);
void mscclppCollGpuRelease(struct mscclppComm* comm);

/* The GPU backend's "port" family (coll/port/coll_port.c; streams, scratch
 * layout and algorithms: coll/port/coll_port.h). The GPU backend hands a
 * call here when mscclppCollPortWanted says so. */

/* 1 when the call must or may use the port family: the communicator spans
 * hosts (nothing else reaches every rank), or MSCCLPP_ALGO chose "port" for
 * this collective (`algo`, as coll.c resolved it) or, for send/recv
 * (kind MSCCLPP_COLL_SENDRECV, algo NULL), named sendrecv=port. */
int mscclppCollPortWanted(const struct mscclppComm* comm, mscclppCollKind kind, const char* algo);

/* Enqueue the collective / the group of sends and receives on its stream.
 * The first call of a communicator (which every rank reaches) connects to
 * every peer (transport Auto: CUDA IPC on the host, Net between hosts),
 * allocates and registers the scratch and builds two port channels per peer.
 * Errors: mscclppInvalidUsage (more than MSCCLPP_COLL_PORT_MAX_RANKS ranks,
 * a group of more than MSCCLPP_COLL_PORT_MAX_P2P operations, sends to self
 * that do not match the receives from self), and those of the connection,
 * memory, channel and CUDA calls, logged where they are decided. */
mscclppResult_t mscclppCollPortRun(struct mscclppComm* comm, const struct mscclppCollArgs* args);
mscclppResult_t mscclppCollPortP2p(struct mscclppComm* comm, const struct mscclppCollP2pOp* ops, int nops,
                                   mscclppStream_t stream);

/* Free the communicator's port state (after its kernels; every rank calls
 * it: it holds two bootstrap barriers). */
void mscclppCollPortRelease(struct mscclppComm* comm);

#endif /* MSCCLPP_SRC_COLL_COLL_H_ */
