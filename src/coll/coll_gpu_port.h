/*
 * The GPU backend's "port" algorithm family, host side (coll_gpu_port.c;
 * streams, scratch layout and algorithms: coll_port.h). coll_gpu.c hands a
 * call here when mscclppCollPortWanted says so.
 */
#ifndef MSCCLPP_SRC_COLL_COLL_GPU_PORT_H_
#define MSCCLPP_SRC_COLL_COLL_GPU_PORT_H_

#include "coll/coll.h"

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

#endif /* MSCCLPP_SRC_COLL_COLL_GPU_PORT_H_ */
