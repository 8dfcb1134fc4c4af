/* SPDX-License-Identifier: MIT */
/*
 * mscclpp connections: a transport joining this rank to one peer (or to
 * itself), and the operations a port channel's proxy performs on it.
 *
 * Transports:
 *   CudaIpc - the GPU's copy engines (cudaMemcpyAsync on the connection's own
 *             stream) between GPUs of the host, and between several ranks
 *             sharing one GPU (run them under MPS);
 *   HostShm - the CPU copies through shared mappings (the host backend);
 *   Net     - RMA writes over libfabric between any hosts (verbs, efa,
 *             tcp;ofi_rxm; MSCCLPP_NET_PROVIDER and MSCCLPP_NET_IFNAME pick
 *             provider and NIC; libfabric is loaded at run time). The port
 *             channel proxy drives its progress (it reads the completion
 *             queue on every idle loop: with providers of manual progress
 *             such as tcp, incoming data lands only then - a rank that
 *             receives through bare connections, without port channels,
 *             must call mscclppConnectionFlush to let it land). GPU memory
 *             is registered with FI_HMEM where the provider has it, else
 *             staged through pinned host buffers in 1 MiB chunks.
 * mscclppTransportAuto picks CudaIpc when both ranks of one host have a GPU,
 * else HostShm, and Net between hosts (hosts differ by name or network
 * namespace, or MSCCLPP_HOSTID).
 *
 * Ordering, per connection (operations of one connection are issued from one
 * thread at a time):
 *   write  - copies `size` bytes from local memory to the peer's memory.
 *            Writes are carried out in the order issued. When write returns,
 *            the source may NOT yet have been read (CudaIpc: the copy is
 *            enqueued) and the destination is not yet guaranteed visible;
 *            HostShm has completed the copy when it returns.
 *   signal - stores a 64-bit value, as one atomic 8-byte store, to the peer's
 *            memory (a semaphore), so that it becomes visible only after
 *            every write issued before it on this connection is visible
 *            (release order). Signals become visible in the order issued.
 *            Where the destination is memory the CPU reaches (host kinds),
 *            the store is a plain CPU store after the earlier copies are
 *            known complete (no CUDA call when none is pending); for device
 *            memory it is a stream-ordered 64-bit write behind the copies.
 *            This is MSCCL++'s updateAndSync.
 *   flush  - returns once every write and signal issued before it has
 *            completed and is visible to the peer, and the sources of those
 *            writes may be reused. Bounded by MSCCLPP_TIMEOUT. Net: the
 *            operations have completed at this side (sources reusable, the
 *            provider's completion semantics); visibility at the peer is
 *            what a signal orders.
 *   Net signal: the value is written after the data by an 8-byte RMA write
 *            the provider keeps in order (FI_ORDER_WAW: tcp, verbs), or
 *            once the data writes completed with FI_DELIVERY_COMPLETE
 *            (providers without write order: efa), or, after staged data,
 *            applied by the peer's proxy once the data is in place.
 * Nothing orders operations of different connections.
 */
#ifndef MSCCLPP_CONNECTION_H_
#define MSCCLPP_CONNECTION_H_

#include <stdint.h>

#include "mscclpp/comm.h"
#include "mscclpp/core.h"
#include "mscclpp/memory.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mscclppConnection* mscclppConnection_t;

/* Connect to `peer` (this rank included) with `transport`
 * (mscclppTransportAuto or one transport bit). Both ranks must call it with
 * each other's rank and the same tag; it exchanges endpoint descriptions
 * through the bootstrap and blocks until the peer's arrives (bounded by
 * MSCCLPP_TIMEOUT), so ranks may connect to their peers in any order. If one
 * rank names a transport and the other Auto, the named one is used.
 * Errors: mscclppInvalidArgument (NULL comm or conn, peer out of range, not
 *   exactly one transport bit), mscclppInvalidUsage (the ranks asked for
 *   different transports, the transport cannot join them - another host, no
 *   GPU on one side -, no libfabric, no provider with RMA, no domain
 *   matching MSCCLPP_NET_IFNAME; the message names both ranks' hosts and
 *   capabilities, or what libfabric offers), mscclppRemoteError (the peer
 *   sent an invalid or unauthenticated endpoint), mscclppTimeout or
 *   mscclppRemoteError when the peer cannot be reached over the network
 *   (each side proves the data path with an RMA write at creation), bootstrap errors (mscclppTimeout, ...). *conn is written
 *   only on success. */
MSCCLPP_API mscclppResult_t mscclppConnectionCreate(mscclppComm_t comm, int peer, int tag, mscclppTransport_t transport,
                                           mscclppConnection_t* conn);

/* Flush (bounded) and free the connection. Returns the flush's error, if
 * any, after freeing. NULL is mscclppInvalidArgument. */
MSCCLPP_API mscclppResult_t mscclppConnectionDestroy(mscclppConnection_t conn);

/* Copy `size` bytes from src + srcOffset to dst + dstOffset (see ordering
 * above). src must be memory of this rank (registered here, or opened from
 * this rank's record), dst memory of the connection's peer (opened from its
 * record; for a connection to this rank, memory of this rank); both
 * registered for the connection's transport. size 0 does nothing. The two
 * ranges must not overlap (as memcpy).
 * Errors: mscclppInvalidArgument (NULL, a range past the end of either
 *   memory - the message names offset, size and the memory's size -, memory
 *   of the wrong rank, of another communicator, or not registered for this
 *   transport, ranges that overlap in this process),
 *   mscclppUnhandledCudaError. */
MSCCLPP_API mscclppResult_t mscclppConnectionWrite(mscclppConnection_t conn, mscclppRegisteredMemory_t dst,
                                                   uint64_t dstOffset, mscclppRegisteredMemory_t src,
                                                   uint64_t srcOffset, uint64_t size);

/* Store `value` at dst + dstOffset (8-byte aligned) after the earlier writes
 * (see ordering above). dst as for mscclppConnectionWrite. Errors as
 * mscclppConnectionWrite, plus mscclppInvalidArgument for an unaligned
 * address, and mscclppTimeout / mscclppAborted while waiting for earlier
 * copies to complete. */
MSCCLPP_API mscclppResult_t mscclppConnectionSignal(mscclppConnection_t conn, mscclppRegisteredMemory_t dst,
                                                    uint64_t dstOffset, uint64_t value);

/* Wait until everything issued on the connection is complete and visible.
 * mscclppTimeout after MSCCLPP_TIMEOUT, mscclppAborted when the
 * communicator is aborted, mscclppUnhandledCudaError when a copy failed. */
MSCCLPP_API mscclppResult_t mscclppConnectionFlush(mscclppConnection_t conn);

/* The transport in use, and the peer's rank. mscclppInvalidArgument for NULL. */
MSCCLPP_API mscclppResult_t mscclppConnectionTransport(mscclppConnection_t conn, mscclppTransport_t* transport);
MSCCLPP_API mscclppResult_t mscclppConnectionRemoteRank(mscclppConnection_t conn, int* rank);

/* What a connection can do or needs. Code that adapts to its connections
 * asks these instead of which transport it is, so that it stays right for
 * transports added later. One bit each; a connection has a fixed set from
 * its creation on. */
typedef enum {
  /* A port channel's small puts travel inside the trigger: the proxy writes
   * them, and their signal, without reading the source buffer
   * (MSCCLPP_PORT_CHANNEL_FLAG_INLINE; CudaIpc, HostShm, Net). */
  mscclppConnectionCapWriteInline = 1u << 0,
  /* Data from the peer lands only while this side drives the connection:
   * a port channel's proxy does it on every pass; without port channels,
   * call mscclppConnectionFlush (Net with providers of manual progress). */
  mscclppConnectionCapNeedsProgress = 1u << 1,
  /* On a GPU, kernels may store into the peer's memory through a mapping
   * of it (MSCCLPP_PORT_CHANNEL_FLAG_STORE; CudaIpc). */
  mscclppConnectionCapPeerStore = 1u << 2,
  /* GPU memory travels through pinned host buffers, a copy per chunk on
   * each side (Net with a provider without FI_HMEM): a caller that can
   * keep its data in pinned host memory for this peer avoids those copies. */
  mscclppConnectionCapStagesDeviceMemory = 1u << 3,
  /* The transport reaches ranks on other hosts, through a NIC (Net; also
   * when both ranks share a host). */
  mscclppConnectionCapCrossHost = 1u << 4
} mscclppConnectionCap_t;

/* *has = 1 when conn has capability `cap` (one mscclppConnectionCap_t
 * value), else 0. mscclppInvalidArgument for NULL, or for a value that is
 * not one capability. *has is written only on success. */
MSCCLPP_API mscclppResult_t mscclppConnectionHasCapability(mscclppConnection_t conn, mscclppConnectionCap_t cap,
                                                           int* has);

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_CONNECTION_H_ */
