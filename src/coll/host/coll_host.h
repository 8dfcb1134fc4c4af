/* SPDX-License-Identifier: MIT */
/*
 * The host backend of the collectives, shared by its files: the calling
 * thread plays the kernel, user buffers are plain host memory of each
 * process, and data moves through a scratch buffer of host shared memory
 * over memory channels (HostShm connections), so every collective exercises
 * the memory records, the HostShm transport, the semaphores and the memory
 * channel device API compiled as C.
 *   coll_host_state.c   the per-communicator state: scratch, and the
 *                       connections and channels to each peer
 *   coll_host_engine.c  the progress engine: chunks through slots, credits,
 *                       reduction chains, waits
 *   coll_host.c         each collective and send/recv as transfers and a
 *                       chain for the engine
 *
 * Scratch: each rank allocates nranks regions (one per sending rank, this
 * one included, for send/recv to itself) of SLOTS slots; a slot is a 64-byte
 * header and `payload` bytes. A sender writes chunk after chunk of a
 * message into ITS region of the receiver's scratch (through the channel's
 * mapped `dst`), in slot order, and signals the receiver's "data" channel;
 * the receiver consumes the chunks in order (copying or reducing them into
 * its output) and signals the sender's "credit" channel once a slot may be
 * reused. Two memory channels per peer keep the two kinds of signals on
 * their own semaphores. Counters of chunks sent, credited, arrived and used
 * live here and persist from call to call: the chunks of a pair form one
 * ordered stream.
 *
 * Headers carry (kind, call number, message size, offset) and every chunk is
 * checked: ranks that call different collectives or sizes get an error
 * naming both instead of wrong data.
 *
 * Peers on other hosts (host identity: host name and network namespace, or
 * MSCCLPP_HOSTID) get the same slots, headers and credits over the network
 * transport: a Net connection and two port channels (data, credit) on the
 * scratch, registered for Net too. A sender cannot store into a remote slot,
 * so it writes the header and payload into its own staging copy of the
 * slot (a second set of nranks regions after the receive regions, made only
 * when the communicator spans hosts) and the proxy puts it into the peer's
 * slot with the data signal behind it (putWithSignal); the receiver polls
 * that signal and hands the slot back with a port channel signal on the
 * credit channel. The staging slot of chunk k is rewritten only once chunk
 * k's credit is back (the receiver has read the chunk, so the put has read
 * its source). A call with a remote peer also waits until the peer has
 * credited every chunk sent to it: when a call returns, nothing is in flight
 * between this rank and its remote peers, so a rank may leave (destroy the
 * communicator) while the others go on.
 */
#ifndef MSCCLPP_SRC_COLL_HOST_COLL_HOST_H_
#define MSCCLPP_SRC_COLL_HOST_COLL_HOST_H_

#include <stddef.h>
#include <stdint.h>

#include "coll/coll.h"
#include "coll/host/coll_host_reduce.h"
#include "mscclpp/connection.h"
#include "mscclpp/memory.h"
#include "mscclpp/memory_channel.h"
#include "mscclpp/port_channel.h"

#define SLOTS 2
#define HEADER_BYTES 64
#define HOST_MAX_PER_PEER ((size_t)1 << 20) /* the host backend uses at most this per peer */
#define HOST_MIN_PER_PEER ((size_t)4096)
#define TAG_CONN 0x7c000000
#define TAG_DATA 0x7c000001
#define TAG_CREDIT 0x7c000002
#define TAG_SIZE 0x7c000003
#define HEADER_MAGIC 0x4843534du /* "MSCH" */
#define MAX_RANKS 256 /* contributors of a chain */

struct chunkHeader {
  uint32_t magic;
  uint32_t kind; /* mscclppCollKind */
  uint64_t seq;  /* collective call number; 0 for send/recv */
  uint64_t msgBytes;
  uint64_t offset;
  uint64_t bytes;
  uint64_t reserved[3];
};
_Static_assert(sizeof(struct chunkHeader) == HEADER_BYTES, "header fills its 64 bytes");

struct hostPeer {
  int connected;
  int remote; /* on another host: port channels over Net, else memory channels over HostShm */
  mscclppConnection_t conn;
  mscclppMemoryChannel_t dataCh, creditCh;
  mscclppMemoryChannelDeviceHandle data;   /* data.dst: the peer's scratch */
  mscclppMemoryChannelDeviceHandle credit; /* signals: slots of the peer's region freed */
  mscclppPortChannel_t dataPortCh, creditPortCh;
  mscclppPortChannelDeviceHandle dataPort;   /* remote: puts into the peer's scratch, and their signals */
  mscclppPortChannelDeviceHandle creditPort; /* remote: the credit signals */
  uint64_t sent;                           /* chunks written into the peer's slots */
  uint64_t credits;                        /* credit signals consumed from the peer */
  uint64_t arrived;                        /* data signals consumed from the peer */
  uint64_t used;                           /* chunks of the peer consumed (and credited) */
};

struct mscclppCollHost {
  int rank, nranks;
  struct mscclppAbort* abort;
  size_t perPeer, slotBytes, payload;
  int staging;     /* the communicator spans hosts: the scratch has staging regions after the receive regions */
  uint8_t* scratch;
  mscclppRegisteredMemory_t scratchMem;
  uint8_t* temp; /* payload bytes: this rank's own chunk while an in-place chain overwrites it */
  struct hostPeer* peer;
  uint64_t seq; /* collectives run */
  double timeout;
};

/* ---- the progress engine's call (coll_host_engine.c) ------------------------------ */

struct xfer {
  int peer;
  int isSend;
  int inChain; /* a contributor of the chain (progressed by it) */
  int after;   /* index of the previous transfer with the same peer and direction, or -1 */
  uint8_t* buf;
  size_t bytes;
  size_t done;
  size_t keep; /* a receive: bytes stored in buf; the rest arrives and is dropped (alltoallv past its capacity) */
};

struct chain {
  uint8_t* dst;
  const uint8_t* local; /* this rank's contribution */
  size_t bytes, done;
  size_t saved; /* 1 + offset of the chunk whose local part is in temp */
  int n, pos;
  int contrib[MAX_RANKS]; /* xfer index, or -1 for local, in rank order */
  int aliased;                                /* local == dst and local is not first */
  mscclppHostReduceFn reduce;
  mscclppHostDivideFn divide; /* avg, else NULL */
  size_t typeSize;
};

struct engine {
  struct mscclppComm* comm;
  struct mscclppCollHost* h;
  const char* name;
  mscclppCollKind kind;
  uint64_t seq;
  struct xfer* x;
  int nx;
  struct chain* chain; /* or NULL */
};

/* The state of comm, made at its first use by every rank (coll.h's
 * first-use policy; coll_host_state.c). */
mscclppResult_t mscclppCollHostState(struct mscclppComm* comm, struct mscclppCollHost** out);

/* Connect to rank r unless connected (both ranks reach this at their first
 * call with each other; coll_host_state.c). */
mscclppResult_t mscclppCollHostConnect(struct mscclppComm* comm, struct mscclppCollHost* h, int r);

/* The abort is up: return its error (a lost peer: mscclppRemoteError). */
mscclppResult_t mscclppCollHostFailAborted(struct mscclppComm* comm, const char* name);

/* Add a transfer of `bytes` with `peer` to the call (none when 0 bytes). */
void mscclppCollHostAddXfer(struct engine* e, int peer, int isSend, const void* buf, size_t bytes);

/* A chain reducing `bytes` into dst: this rank's value from `local`, every
 * other rank's received, in rank order. */
void mscclppCollHostSetChain(struct engine* e, struct chain* ch, const struct mscclppCollArgs* a, void* dst,
                             const void* local, size_t bytes);

/* Run the engine until the call is done or fails. */
mscclppResult_t mscclppCollHostEngineRun(struct engine* e);

#endif /* MSCCLPP_SRC_COLL_HOST_COLL_HOST_H_ */
