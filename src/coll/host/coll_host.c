/* SPDX-License-Identifier: MIT */
/*
 * The host backend of the collectives: the calling thread plays the kernel,
 * user buffers are plain host memory of each process, and data moves
 * through a scratch buffer of host shared memory over memory channels
 * (HostShm connections), so every collective exercises the memory records,
 * the HostShm transport, the semaphores and the memory channel device API
 * compiled as C.
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
 * Every call is a set of sends, copying receives and at most one reduction
 * chain, progressed round-robin with polls (no wait on one peer while
 * another could progress), which is what makes any group of send/recv
 * deadlock-free. A reduction chain applies its contributors chunk by chunk
 * in rank order (rank 0's value, then op rank 1's, ...), so every element is
 * reduced by one rank in one order: results are identical on every rank and
 * from run to run, and match the GPU kernels' order.
 *   allreduce      reduce-scatter of nranks blocks (each rank reduces its
 *                  block), then allgather of the reduced blocks
 *   reducescatter  each rank sends block r to rank r, which reduces
 *   reduce         every rank sends to the root, which reduces
 *   allgather, broadcast, alltoall   direct sends
 *   alltoallv      the counts first (one 8-byte message per peer), then
 *                  direct sends; a receive past the capacity is consumed
 *                  and dropped (xfer.keep)
 * Headers carry (kind, call number, message size, offset) and every chunk is
 * checked: ranks that call different collectives or sizes get an error
 * naming both instead of wrong data.
 *
 * Connections are made per peer at the first call that involves it (every
 * peer at the first collective; send/recv connect only their peers, in rank
 * order), so ranks that never talk to each other never wait for each other.
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
 *
 * Waits: a call that makes no progress for MSCCLPP_TIMEOUT fails with
 * mscclppTimeout (and raises the communicator's abort); when the abort is
 * raised (a lost peer: the watcher of comm_abort.c; a timeout elsewhere),
 * the call returns that error (mscclppRemoteError naming the lost rank) at
 * once, as does every later call.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "coll/host/coll_host_reduce.h"
#include "core/error.h"
#include "core/log.h"
#include "core/report.h"
#include "core/util.h"
#include "gpu/abort.h"
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

/* ---- state ------------------------------------------------------------------------- */

static void hostFree(struct mscclppComm* comm, struct mscclppCollHost* h) {
  for (int r = 0; r < h->nranks && h->peer != NULL; r++) {
    struct hostPeer* p = &h->peer[r];
    if (p->dataCh != NULL) (void)mscclppMemoryChannelDestroy(p->dataCh);
    if (p->creditCh != NULL) (void)mscclppMemoryChannelDestroy(p->creditCh);
    if (p->dataPortCh != NULL) (void)mscclppPortChannelDestroy(p->dataPortCh);
    if (p->creditPortCh != NULL) (void)mscclppPortChannelDestroy(p->creditPortCh);
    if (p->conn != NULL) (void)mscclppConnectionDestroy(p->conn);
  }
  if (h->scratchMem != NULL) (void)mscclppMemoryDeregister(h->scratchMem);
  if (h->scratch != NULL) (void)mscclppMemFree(comm, h->scratch);
  free(h->peer);
  free(h->temp);
  free(h);
}

void mscclppCollHostRelease(struct mscclppComm* comm, void* state) {
  /* No barrier: peers keep their mappings of this scratch and of the
   * semaphores when this rank frees its own (memory files), every credit
   * this rank owed was signalled before its last call returned (and, to a
   * remote peer, received: see the top), and ranks that only ever ran
   * send/recv with some peers may not all get here. */
  hostFree(comm, (struct mscclppCollHost*)state);
}

static size_t perPeerBytes(const struct mscclppComm* comm) {
  int64_t v = comm->params.collScratchBytes;
  size_t b = v < (int64_t)HOST_MIN_PER_PEER ? HOST_MIN_PER_PEER : (size_t)v;
  if (b > HOST_MAX_PER_PEER) b = HOST_MAX_PER_PEER;
  return b / (SLOTS * 64) * (SLOTS * 64);
}

/* The state, built privately (coll.h's first-use policy); a failed build
 * frees what it made (no peer has seen it: connections come later). */
static mscclppResult_t hostBuild(struct mscclppComm* comm, void** built) {
  struct mscclppCollHost* h = (struct mscclppCollHost*)calloc(1, sizeof(*h));
  if (h == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_COLL, "out of memory");
  h->rank = comm->rank;
  h->nranks = comm->nranks;
  h->timeout = comm->params.timeout;
  h->perPeer = perPeerBytes(comm);
  h->slotBytes = h->perPeer / SLOTS;
  h->payload = h->slotBytes - HEADER_BYTES;
  h->staging = comm->localNranks != comm->nranks;
  mscclppResult_t res = mscclppCommAbortOf(comm, &h->abort);
  h->peer = (struct hostPeer*)calloc((size_t)h->nranks, sizeof(*h->peer));
  h->temp = (uint8_t*)malloc(h->payload);
  if (res == mscclppSuccess && (h->peer == NULL || h->temp == NULL))
    res = mscclppErr(mscclppSystemError, MSCCLPP_LOG_COLL, "out of memory");
  size_t bytes = h->perPeer * (size_t)h->nranks * (h->staging ? 2 : 1);
  if (res == mscclppSuccess)
    res = mscclppMemAlloc(comm, mscclppMemKindHostShared, bytes, (void**)&h->scratch);
  if (res == mscclppSuccess)
    res = mscclppMemoryRegister(comm, h->scratch, bytes,
                                mscclppTransportHostShm | (h->staging ? mscclppTransportNet : 0), &h->scratchMem);
  if (res != mscclppSuccess) {
    hostFree(comm, h);
    return res;
  }
  MSCCLPP_INFO(MSCCLPP_LOG_COLL, "rank %d: host collectives, scratch %zu bytes (%d x %d slots of %zu bytes%s)",
               h->rank, bytes, h->nranks, SLOTS, h->slotBytes, h->staging ? ", and as many staging slots" : "");
  *built = h;
  return mscclppSuccess;
}

static mscclppResult_t hostState(struct mscclppComm* comm, struct mscclppCollHost** out) {
  return mscclppCollBackendState(comm, MSCCLPP_COLL_BACKEND_HOST, hostBuild, (void**)out);
}

/* The memory channels to a peer of this host (or this rank). */
static mscclppResult_t connectLocal(struct mscclppComm* comm, struct mscclppCollHost* h, int r) {
  struct hostPeer* p = &h->peer[r];
  MSCCLPP_RETURN_ON_ERROR(mscclppConnectionCreate(comm, r, TAG_CONN, mscclppTransportHostShm, &p->conn));
  mscclppMemoryChannelConfig mc = MSCCLPP_MEMORY_CHANNEL_CONFIG_INITIALIZER;
  mc.local = h->scratchMem;
  mc.tag = TAG_DATA;
  MSCCLPP_RETURN_ON_ERROR(mscclppMemoryChannelCreate(comm, p->conn, &mc, &p->dataCh));
  mc.tag = TAG_CREDIT;
  MSCCLPP_RETURN_ON_ERROR(mscclppMemoryChannelCreate(comm, p->conn, &mc, &p->creditCh));
  MSCCLPP_RETURN_ON_ERROR(mscclppMemoryChannelGetDeviceHandle(p->dataCh, &p->data));
  MSCCLPP_RETURN_ON_ERROR(mscclppMemoryChannelGetDeviceHandle(p->creditCh, &p->credit));
  if (p->data.dstSize < h->perPeer * (size_t)h->nranks)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_COLL,
                      "host collectives: rank %d's scratch is %llu bytes, rank %d expected %zu", r,
                      (unsigned long long)p->data.dstSize, h->rank, h->perPeer * (size_t)h->nranks);
  return mscclppSuccess;
}

/* The port channels to a peer of another host, over the network. */
static mscclppResult_t connectRemote(struct mscclppComm* comm, struct mscclppCollHost* h, int r) {
  struct hostPeer* p = &h->peer[r];
  MSCCLPP_RETURN_ON_ERROR(mscclppConnectionCreate(comm, r, TAG_CONN, mscclppTransportNet, &p->conn));
  mscclppPortChannelConfig pc = MSCCLPP_PORT_CHANNEL_CONFIG_INITIALIZER;
  pc.local = h->scratchMem;
  pc.tag = TAG_DATA;
  MSCCLPP_RETURN_ON_ERROR(mscclppPortChannelCreate(comm, p->conn, &pc, &p->dataPortCh));
  pc.tag = TAG_CREDIT;
  MSCCLPP_RETURN_ON_ERROR(mscclppPortChannelCreate(comm, p->conn, &pc, &p->creditPortCh));
  MSCCLPP_RETURN_ON_ERROR(mscclppPortChannelGetDeviceHandle(p->dataPortCh, &p->dataPort));
  MSCCLPP_RETURN_ON_ERROR(mscclppPortChannelGetDeviceHandle(p->creditPortCh, &p->creditPort));
  p->remote = 1;
  return mscclppSuccess;
}

/* Connect to `r` (both ranks reach this at their first call with each
 * other): the two ranks check that their scratch layouts agree; whether they
 * share a host is in the bootstrap's rank table. Then the data and credit
 * channels. */
static mscclppResult_t connectPeer(struct mscclppComm* comm, struct mscclppCollHost* h, int r) {
  struct hostPeer* p = &h->peer[r];
  if (p->connected) return mscclppSuccess;
  int remote = 0;
  if (r != h->rank) {
    uint64_t mine[2] = {h->perPeer, (uint64_t)h->staging}, theirs[2] = {0, 0};
    MSCCLPP_RETURN_ON_ERROR(mscclppBootstrapSend(comm, r, TAG_SIZE, mine, sizeof(mine)));
    MSCCLPP_RETURN_ON_ERROR(mscclppBootstrapRecv(comm, r, TAG_SIZE, theirs, sizeof(theirs)));
    if (theirs[0] != mine[0])
      return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_COLL,
                        "host collectives: rank %d uses %llu scratch bytes per peer and rank %d %llu: set the same "
                        "MSCCLPP_COLL_SCRATCH_BYTES on every rank",
                        h->rank, (unsigned long long)mine[0], r, (unsigned long long)theirs[0]);
    if (theirs[1] != mine[1])
      return mscclppErr(mscclppInternalError, MSCCLPP_LOG_COLL,
                        "host collectives: ranks %d and %d disagree on whether the communicator spans hosts", h->rank,
                        r);
    remote = mscclppBootstrapHostHashOf(comm->bootstrap, r) != mscclppBootstrapHostHashOf(comm->bootstrap, h->rank);
  }
  if (remote && !h->staging)
    return mscclppErr(mscclppInternalError, MSCCLPP_LOG_COLL,
                      "host collectives: rank %d is on another host than rank %d, but the communicator was made "
                      "with all ranks on one host",
                      r, h->rank);
  MSCCLPP_RETURN_ON_ERROR(remote ? connectRemote(comm, h, r) : connectLocal(comm, h, r));
  MSCCLPP_INFO(MSCCLPP_LOG_COLL, "rank %d: host collectives to rank %d over %s", h->rank, r,
               remote ? "port channels (network)" : "memory channels (shared memory)");
  p->connected = 1;
  return mscclppSuccess;
}

/* ---- the progress engine ------------------------------------------------------------ */

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

static uint8_t* mySlot(struct mscclppCollHost* h, int from, uint64_t chunk) {
  return h->scratch + (size_t)from * h->perPeer + (size_t)(chunk % SLOTS) * h->slotBytes;
}

/* Offset of this rank's slot for `chunk` in a peer's scratch. */
static size_t peerSlotOffset(const struct mscclppCollHost* h, uint64_t chunk) {
  return (size_t)h->rank * h->perPeer + (size_t)(chunk % SLOTS) * h->slotBytes;
}

/* Offset in this rank's scratch of the staging copy of a remote peer's slot. */
static size_t stagingOffset(const struct mscclppCollHost* h, int to, uint64_t chunk) {
  return ((size_t)h->nranks + (size_t)to) * h->perPeer + (size_t)(chunk % SLOTS) * h->slotBytes;
}

/* Fail the call and the communicator (later calls fail at once): the abort
 * records and logs the reason, and returns `code`. */
static mscclppResult_t failWith(struct engine* e, mscclppResult_t code, const char* why) {
  return mscclppAbortRaisef(e->h->abort, code, "%s", why);
}

/* The abort is up: return its error (a lost peer: mscclppRemoteError). */
static mscclppResult_t failAborted(struct mscclppComm* comm, const char* name) {
  mscclppResult_t e = mscclppSuccess;
  if (mscclppCommAsyncError(comm, &e) != mscclppSuccess || e == mscclppSuccess) e = mscclppAborted;
  /* the abort logged its reason when it was raised */
  return mscclppErrWrap(e, MSCCLPP_LOG_COLL, "%s on rank %d: the communicator is aborted", name, comm->rank);
}

/* ---- the two kinds of peers: memory channels (this host), port channels (remote) ---- */

/* One data signal from the peer consumed, if one has arrived. */
static int pollData(struct hostPeer* p) {
  return p->remote ? mscclppPortChannelDevicePoll(&p->dataPort) : mscclppMemoryChannelDevicePoll(&p->data);
}

/* One credit signal from the peer consumed, if one has arrived. */
static int pollCredit(struct hostPeer* p) {
  return p->remote ? mscclppPortChannelDevicePoll(&p->creditPort) : mscclppMemoryChannelDevicePoll(&p->credit);
}

/* Hand a slot back to the peer. A port channel push fails only when the
 * communicator is aborted or the FIFO stayed full for MSCCLPP_TIMEOUT (then
 * recorded as its error). */
static mscclppResult_t signalCredit(struct engine* e, struct hostPeer* p) {
  if (!p->remote) {
    mscclppMemoryChannelDeviceSignal(&p->credit);
    return mscclppSuccess;
  }
  if (mscclppPortChannelDeviceSignal(&p->creditPort) != mscclppSuccess) return failAborted(e->comm, e->name);
  return mscclppSuccess;
}

/* Write chunk `chunk` (header, then c payload bytes) into this rank's slot
 * of peer `to` and signal it: stores through the mapping for a peer of this
 * host; for a remote one, into the staging copy, then a put with the signal
 * behind it. */
static mscclppResult_t putChunk(struct engine* e, int to, uint64_t chunk, const struct chunkHeader* hd,
                                const uint8_t* payload, size_t c) {
  struct mscclppCollHost* h = e->h;
  struct hostPeer* p = &h->peer[to];
  if (!p->remote) {
    uint8_t* slot = p->data.dst + peerSlotOffset(h, chunk);
    memcpy(slot, hd, sizeof(*hd));
    memcpy(slot + HEADER_BYTES, payload, c);
    mscclppMemoryChannelDeviceSignal(&p->data); /* release: header and payload first */
    return mscclppSuccess;
  }
  size_t so = stagingOffset(h, to, chunk);
  memcpy(h->scratch + so, hd, sizeof(*hd));
  memcpy(h->scratch + so + HEADER_BYTES, payload, c);
  /* release: the proxy's copy sees the stores above */
  if (mscclppPortChannelDevicePutWithSignal(&p->dataPort, p->dataPort.dst, peerSlotOffset(h, chunk), p->dataPort.src,
                                            so, HEADER_BYTES + c) != mscclppSuccess)
    return failAborted(e->comm, e->name);
  return mscclppSuccess;
}

static int xferReady(const struct engine* e, const struct xfer* t) {
  return t->after < 0 || e->x[t->after].done == e->x[t->after].bytes;
}

static size_t chunkOf(const struct mscclppCollHost* h, size_t bytes, size_t done) {
  return bytes - done < h->payload ? bytes - done : h->payload;
}

/* The next chunk from t->peer if it has arrived (header checked), else NULL. */
static mscclppResult_t arrivedChunk(struct engine* e, const struct xfer* t, const uint8_t** payload) {
  struct mscclppCollHost* h = e->h;
  struct hostPeer* p = &h->peer[t->peer];
  *payload = NULL;
  if (p->arrived == p->used) {
    if (!pollData(p)) return mscclppSuccess;
    p->arrived++;
  }
  const uint8_t* slot = mySlot(h, t->peer, p->used);
  struct chunkHeader hd;
  memcpy(&hd, slot, sizeof(hd));
  size_t c = chunkOf(h, t->bytes, t->done);
  if (hd.magic != HEADER_MAGIC || hd.kind != (uint32_t)e->kind || hd.seq != e->seq || hd.msgBytes != t->bytes ||
      hd.offset != t->done || hd.bytes != c) {
    char why[512];
    snprintf(why, sizeof(why),
             "%s on rank %d: rank %d sent %llu bytes of %s (call #%llu, offset %llu) where %zu bytes of %s (call "
             "#%llu, offset %zu) were expected: the ranks called different collectives, sizes or send/recv pairs",
             e->name, h->rank, t->peer, (unsigned long long)hd.msgBytes,
             hd.magic == HEADER_MAGIC ? mscclppCollKindName((mscclppCollKind)hd.kind) : "a corrupt message",
             (unsigned long long)hd.seq, (unsigned long long)hd.offset, t->bytes, mscclppCollKindName(e->kind),
             (unsigned long long)e->seq, t->done);
    return failWith(e, mscclppInvalidUsage, why);
  }
  *payload = slot + HEADER_BYTES;
  return mscclppSuccess;
}

/* The chunk of t->peer just consumed: hand its slot back. */
static mscclppResult_t releaseChunk(struct engine* e, struct xfer* t, size_t c) {
  struct hostPeer* p = &e->h->peer[t->peer];
  p->used++;
  t->done += c;
  return signalCredit(e, p);
}

/* Send t's next chunk if a slot of the peer is free (*sent = 1). */
static mscclppResult_t trySend(struct engine* e, struct xfer* t, int* sent) {
  struct mscclppCollHost* h = e->h;
  struct hostPeer* p = &h->peer[t->peer];
  *sent = 0;
  if (p->sent - p->credits >= SLOTS) {
    if (!pollCredit(p)) return mscclppSuccess;
    p->credits++;
  }
  size_t c = chunkOf(h, t->bytes, t->done);
  struct chunkHeader hd = {HEADER_MAGIC, (uint32_t)e->kind, e->seq, t->bytes, t->done, c, {0, 0, 0}};
  MSCCLPP_RETURN_ON_ERROR(putChunk(e, t->peer, p->sent, &hd, t->buf + t->done, c));
  p->sent++;
  t->done += c;
  *sent = 1;
  return mscclppSuccess;
}

/* A finished send to a remote peer: wait (poll) until the peer has credited
 * every chunk sent to it, so nothing is in flight when the call returns.
 * *pending = 1 while some are not. */
static void drainCredits(struct hostPeer* p, int* pending, int* moved) {
  if (!p->remote || p->credits == p->sent) return;
  if (pollCredit(p)) {
    p->credits++;
    *moved = 1;
  }
  if (p->credits != p->sent) *pending = 1;
}

static mscclppResult_t tryRecv(struct engine* e, struct xfer* t, int* moved) {
  const uint8_t* src = NULL;
  MSCCLPP_RETURN_ON_ERROR(arrivedChunk(e, t, &src));
  if (src == NULL) return mscclppSuccess;
  size_t c = chunkOf(e->h, t->bytes, t->done);
  if (t->done < t->keep) memcpy(t->buf + t->done, src, t->keep - t->done < c ? t->keep - t->done : c);
  MSCCLPP_RETURN_ON_ERROR(releaseChunk(e, t, c));
  *moved = 1;
  return mscclppSuccess;
}

/* One contributor of the chain's current chunk, if it is there. */
static mscclppResult_t chainStep(struct engine* e, struct chain* ch, int* moved) {
  size_t c = chunkOf(e->h, ch->bytes, ch->done);
  uint8_t* dst = ch->dst + ch->done;
  if (ch->aliased && ch->saved != ch->done + 1) {
    memcpy(e->h->temp, ch->local + ch->done, c); /* before contributor 0 overwrites it */
    ch->saved = ch->done + 1;
  }
  int j = ch->contrib[ch->pos];
  const uint8_t* src;
  struct xfer* t = NULL;
  if (j < 0) {
    src = ch->aliased ? e->h->temp : ch->local + ch->done;
  } else {
    t = &e->x[j];
    MSCCLPP_RETURN_ON_ERROR(arrivedChunk(e, t, &src));
    if (src == NULL) return mscclppSuccess;
  }
  if (ch->pos == 0) {
    if (src != dst) memcpy(dst, src, c);
  } else {
    ch->reduce(dst, src, c / ch->typeSize);
  }
  if (t != NULL) MSCCLPP_RETURN_ON_ERROR(releaseChunk(e, t, c));
  if (++ch->pos == ch->n) {
    if (ch->divide != NULL) ch->divide(dst, c / ch->typeSize, e->h->nranks);
    ch->done += c;
    ch->pos = 0;
  }
  *moved = 1;
  return mscclppSuccess;
}

/* The peer this rank waits for when nothing moves: the first unfinished
 * transfer's (a receive waits for the peer's data signal, a send for its
 * credit), else a finished send's last credits. -1 when none. */
static int waitedPeer(const struct engine* e, int* isSend) {
  const struct mscclppCollHost* h = e->h;
  for (int i = 0; i < e->nx; i++)
    if (e->x[i].done < e->x[i].bytes) {
      *isSend = e->x[i].isSend;
      return e->x[i].peer;
    }
  for (int i = 0; i < e->nx; i++) { /* draining: the credits of the last chunks */
    const struct hostPeer* p = &h->peer[e->x[i].peer];
    if (e->x[i].isSend && p->credits != p->sent) {
      *isSend = 1;
      return e->x[i].peer;
    }
  }
  *isSend = 0;
  return -1;
}

/* The semaphore a wait on peer p polls: the data channel's for a receive,
 * the credit channel's for a send. */
static const mscclppSemaphoreDeviceHandle* waitedSem(const struct hostPeer* p, int isSend) {
  if (p->remote) return isSend ? &p->creditPort.inbound : &p->dataPort.inbound;
  return isSend ? &p->credit.sem : &p->data.sem;
}

/* Publish the wait in the hang report's record (core/report.h): which peer,
 * which semaphore (its id, and its inbound counter, from which the report
 * reads the signals arrived so far), which signal number. */
static void publishWait(const struct engine* e, uint64_t idleSince) {
  int isSend = 0;
  int peer = waitedPeer(e, &isSend);
  struct mscclppReportWait w = {isSend ? "send" : "receive", isSend ? "credit" : "data", 0, peer, 0, NULL};
  if (peer >= 0) {
    const struct hostPeer* p = &e->h->peer[peer];
    const mscclppSemaphoreDeviceHandle* sem = waitedSem(p, isSend);
    w.expect = isSend ? p->credits + 1 : p->arrived + 1;
    w.sem = sem->id;
    w.counter = sem->inbound; /* host memory on the host backend */
  }
  mscclppReportWaitBegin(e->comm->report, &w, idleSince, (uint64_t)(e->h->timeout * 1e3));
}

/* Idle this long before the wait is published in the report's record: a
 * hang lasts far longer, and the calls that wait less pay nothing. */
#define REPORT_WAIT_AFTER_NS 1000000u

static mscclppResult_t engineLoop(struct engine* e, int* published) {
  struct mscclppCollHost* h = e->h;
  uint64_t idleSince = 0;
  for (;;) {
    int moved = 0, left = 0;
    int draining = 0;
    for (int i = 0; i < e->nx; i++) {
      struct xfer* t = &e->x[i];
      if (t->inChain) continue;
      if (t->done == t->bytes) {
        if (t->isSend) drainCredits(&h->peer[t->peer], &draining, &moved);
        continue;
      }
      left = 1;
      if (!xferReady(e, t)) continue;
      if (t->isSend) {
        int sent = 1;
        while (t->done < t->bytes && sent) {
          MSCCLPP_RETURN_ON_ERROR(trySend(e, t, &sent));
          moved |= sent;
        }
      } else {
        MSCCLPP_RETURN_ON_ERROR(tryRecv(e, t, &moved));
      }
    }
    if (e->chain != NULL && e->chain->done < e->chain->bytes) {
      left = 1;
      int m;
      do {
        m = 0;
        MSCCLPP_RETURN_ON_ERROR(chainStep(e, e->chain, &m));
        moved |= m;
      } while (m && e->chain->done < e->chain->bytes);
    }
    if (!left && !draining) return mscclppSuccess;
    if (moved) {
      idleSince = 0;
      if (*published) {
        mscclppReportWaitEnd(e->comm->report);
        *published = 0;
      }
      continue;
    }
    if (mscclppAbortIsRaised(h->abort)) return failAborted(e->comm, e->name);
    uint64_t now = mscclppHostClockNs();
    if (idleSince == 0) idleSince = now;
    if (!*published && now - idleSince > REPORT_WAIT_AFTER_NS) {
      publishWait(e, idleSince);
      *published = 1;
    }
    if ((double)(now - idleSince) > h->timeout * 1e9) {
      int waitSend = 0;
      int waitPeer = waitedPeer(e, &waitSend);
      char why[256];
      snprintf(why, sizeof(why),
               "%s on rank %d: no progress for MSCCLPP_TIMEOUT (%.1f s) while %s rank %d (did every rank make the "
               "same calls?)",
               e->name, h->rank, h->timeout, waitSend ? "sending to" : "receiving from", waitPeer);
      return failWith(e, mscclppTimeout, why);
    }
    mscclppHostWaitBackoff(now - idleSince);
  }
}

/* Run the engine until the call is done or fails. A failure (timeout, a
 * peer's mismatched call, the abort) raises the abort, which writes the
 * report while the wait is still published; the wait is withdrawn after. */
static mscclppResult_t engineRun(struct engine* e) {
  int published = 0;
  mscclppResult_t res = engineLoop(e, &published);
  if (published) mscclppReportWaitEnd(e->comm->report);
  return res;
}

/* ---- collectives ------------------------------------------------------------------- */

static void addXfer(struct engine* e, int peer, int isSend, const void* buf, size_t bytes) {
  if (bytes == 0) return;
  struct xfer* t = &e->x[e->nx];
  t->peer = peer;
  t->isSend = isSend;
  t->inChain = 0;
  t->after = -1;
  for (int i = e->nx - 1; i >= 0; i--)
    if (e->x[i].peer == peer && e->x[i].isSend == isSend) {
      t->after = i;
      break;
    }
  t->buf = (uint8_t*)(uintptr_t)buf;
  t->bytes = bytes;
  t->done = 0;
  t->keep = bytes;
  e->nx++;
}

/* A chain reducing `bytes` into dst: this rank's value from `local`, every
 * other rank's received, in rank order. */
static void setChain(struct engine* e, struct chain* ch, const struct mscclppCollArgs* a, void* dst, const void* local,
                     size_t bytes) {
  struct mscclppCollHost* h = e->h;
  e->chain = NULL;
  if (bytes == 0) return;
  ch->dst = (uint8_t*)dst;
  ch->local = (const uint8_t*)local;
  ch->bytes = bytes;
  ch->done = 0;
  ch->saved = 0;
  ch->pos = 0;
  ch->n = h->nranks;
  ch->aliased = local == dst && h->rank != 0;
  ch->reduce = mscclppHostReduceFnOf(a->type, a->op);
  ch->divide = a->op == mscclppAvg ? mscclppHostDivideFnOf(a->type) : NULL;
  ch->typeSize = a->typeSize;
  for (int r = 0; r < h->nranks; r++) {
    if (r == h->rank) {
      ch->contrib[r] = -1;
      continue;
    }
    addXfer(e, r, 0, NULL, bytes);
    e->x[e->nx - 1].inChain = 1;
    ch->contrib[r] = e->nx - 1;
  }
  e->chain = ch;
}

static void copyLocal(void* dst, const void* src, size_t bytes) {
  if (bytes > 0 && dst != src) memmove(dst, src, bytes);
}

/* Block b of nranks over count elements: [lo, hi). */
static void blockOf(size_t count, int nranks, int b, size_t* lo, size_t* hi) {
  *lo = (size_t)((unsigned __int128)count * (unsigned)b / (unsigned)nranks);
  *hi = (size_t)((unsigned __int128)count * (unsigned)(b + 1) / (unsigned)nranks);
}

/* a + b, staying at SIZE_MAX past it (a total past any capacity). */
static size_t addSat(size_t a, size_t b) { return a + b < a ? SIZE_MAX : a + b; }

/* All-to-all-v (coll.h, mscclppAllToAllv). The count of every block goes
 * to its receiver first (one 8-byte message per peer; a block outside
 * sendbuff goes as 0), then the blocks. Each rank stores what it receives
 * packed in rank order up to its capacity and drops the rest as it
 * arrives, so every rank's call completes and the pairs' chunk streams stay
 * in step. What was found wrong is raised as the communicator's error once
 * the call is complete, as the GPU kernel does after its last barrier. */
static mscclppResult_t hostAllToAllv(struct engine* e, const struct mscclppCollArgs* a) {
  struct mscclppCollHost* h = e->h;
  const struct mscclppCollCounts* v = a->v;
  const int me = h->rank, n = h->nranks;
  const size_t ts = a->typeSize, cap = v->recvCapacity;
  const uint8_t* send = (const uint8_t*)a->send;
  uint8_t* recv = (uint8_t*)a->recv;
  uint64_t out[MAX_RANKS], in[MAX_RANKS]; /* elements to / from each rank */
  size_t sdisp[MAX_RANKS], rdisp[MAX_RANKS];
  int badRank = -1;
  size_t badEnd = 0;
  for (int d = 0; d < n; d++) {
    size_t c = v->sendcounts[d], s = c > 0 ? v->sdispls[d] : 0; /* a zero count's displacement is not read */
    if (c > v->sendCapacity || s > v->sendCapacity - c) {
      if (badRank < 0) {
        badRank = d;
        badEnd = addSat(s, c);
      }
      c = 0;
      s = 0;
    }
    out[d] = c;
    sdisp[d] = s;
  }
  for (int r = 0; r < n; r++) {
    if (r == me) continue;
    addXfer(e, r, 1, &out[r], sizeof(out[r]));
    addXfer(e, r, 0, &in[r], sizeof(in[r]));
  }
  in[me] = out[me];
  MSCCLPP_RETURN_ON_ERROR(engineRun(e));
  size_t total = 0;
  for (int r = 0; r < n; r++) {
    rdisp[r] = total;
    total = addSat(total, in[r]);
  }
  for (int r = 0; r < n; r++) {
    v->recvcounts[r] = in[r];
    v->rdispls[r] = rdisp[r];
  }
  e->nx = 0;
  e->chain = NULL;
  for (int r = 0; r < n; r++) {
    /* elements of r's block that fit: rdisp[r] < cap bounds every offset below */
    size_t keep = rdisp[r] >= cap ? 0 : in[r] < cap - rdisp[r] ? in[r] : cap - rdisp[r];
    uint8_t* dst = keep > 0 ? recv + rdisp[r] * ts : NULL;
    if (r == me) {
      if (keep > 0) copyLocal(dst, send + sdisp[me] * ts, keep * ts);
      continue;
    }
    if (out[r] > 0) addXfer(e, r, 1, send + sdisp[r] * ts, out[r] * ts);
    if (in[r] > 0) {
      addXfer(e, r, 0, dst, in[r] * ts);
      e->x[e->nx - 1].keep = keep * ts;
    }
  }
  MSCCLPP_RETURN_ON_ERROR(engineRun(e));
  if (total > cap)
    return mscclppAbortRaisef(h->abort, mscclppInvalidUsage,
                              "mscclppAllToAllv on rank %d: %zu elements arrived, more than recvcapacity %zu; those "
                              "past it were dropped (recvcounts says what each rank sent)",
                              me, total, cap);
  if (badRank >= 0)
    return mscclppAbortRaisef(h->abort, mscclppInvalidArgument,
                              "mscclppAllToAllv on rank %d: the block for rank %d ends at element %zu, past "
                              "sendcapacity %zu (sdispls[%d] + sendcounts[%d]); it was sent as empty",
                              me, badRank, badEnd, v->sendCapacity, badRank, badRank);
  return mscclppSuccess;
}

mscclppResult_t mscclppCollHostRun(struct mscclppComm* comm, const struct mscclppCollArgs* a) {
  const char* name = mscclppCollKindName(a->kind);
  if (comm->nranks > MAX_RANKS)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_COLL, "%s: %d ranks; the host backend supports up to %d", name,
                      comm->nranks, MAX_RANKS);
  struct mscclppCollHost* h;
  MSCCLPP_RETURN_ON_ERROR(hostState(comm, &h));
  if (mscclppAbortIsRaised(h->abort)) return failAborted(comm, name);
  for (int r = 0; r < h->nranks; r++)
    if (r != h->rank) MSCCLPP_RETURN_ON_ERROR(connectPeer(comm, h, r));
  h->seq++;
  const int me = h->rank, n = h->nranks;
  const size_t ts = a->typeSize, cb = a->count * ts;
  const uint8_t* send = (const uint8_t*)a->send;
  uint8_t* recv = (uint8_t*)a->recv;
  struct xfer xs[2 * MAX_RANKS];
  struct chain ch;
  struct engine e = {comm, h, name, a->kind, h->seq, xs, 0, NULL};
  switch (a->kind) {
    case MSCCLPP_COLL_ALLREDUCE: {
      size_t lo, hi;
      for (int r = 0; r < n; r++) {
        if (r == me) continue;
        blockOf(a->count, n, r, &lo, &hi);
        addXfer(&e, r, 1, send + lo * ts, (hi - lo) * ts);
      }
      blockOf(a->count, n, me, &lo, &hi);
      setChain(&e, &ch, a, recv + lo * ts, send + lo * ts, (hi - lo) * ts);
      MSCCLPP_RETURN_ON_ERROR(engineRun(&e));
      /* allgather of the reduced blocks */
      e.nx = 0;
      e.chain = NULL;
      for (int r = 0; r < n; r++) {
        if (r == me) continue;
        addXfer(&e, r, 1, recv + lo * ts, (hi - lo) * ts);
        size_t rlo, rhi;
        blockOf(a->count, n, r, &rlo, &rhi);
        addXfer(&e, r, 0, recv + rlo * ts, (rhi - rlo) * ts);
      }
      return engineRun(&e);
    }
    case MSCCLPP_COLL_REDUCESCATTER:
      for (int r = 0; r < n; r++)
        if (r != me) addXfer(&e, r, 1, send + (size_t)r * cb, cb);
      setChain(&e, &ch, a, recv, send + (size_t)me * cb, cb);
      return engineRun(&e);
    case MSCCLPP_COLL_REDUCE:
      if (me == a->root)
        setChain(&e, &ch, a, recv, send, cb);
      else
        addXfer(&e, a->root, 1, send, cb);
      return engineRun(&e);
    case MSCCLPP_COLL_ALLGATHER:
      for (int r = 0; r < n; r++) {
        if (r == me) continue;
        addXfer(&e, r, 1, send, cb);
        addXfer(&e, r, 0, recv + (size_t)r * cb, cb);
      }
      copyLocal(recv + (size_t)me * cb, send, cb);
      return engineRun(&e);
    case MSCCLPP_COLL_BROADCAST:
      if (me == a->root) {
        for (int r = 0; r < n; r++)
          if (r != me) addXfer(&e, r, 1, send, cb);
        copyLocal(recv, send, cb);
      } else {
        addXfer(&e, a->root, 0, recv, cb);
      }
      return engineRun(&e);
    case MSCCLPP_COLL_ALLTOALL: {
      /* In place, block r is sent to r and received from r in interleaved
       * chunks: the receive would overwrite what the send has still to read,
       * so the input is copied aside first (a call completes on return, so
       * the copy lives for the call only). */
      uint8_t* copy = NULL;
      if (send == recv) {
        copy = (uint8_t*)malloc((size_t)n * cb);
        if (copy == NULL)
          return mscclppErr(mscclppSystemError, MSCCLPP_LOG_COLL, "%s in place: out of memory for a copy of %zu bytes",
                            name, (size_t)n * cb);
        memcpy(copy, send, (size_t)n * cb);
        send = copy;
      }
      for (int r = 0; r < n; r++) {
        if (r == me) continue;
        addXfer(&e, r, 1, send + (size_t)r * cb, cb);
        addXfer(&e, r, 0, recv + (size_t)r * cb, cb);
      }
      copyLocal(recv + (size_t)me * cb, send + (size_t)me * cb, cb);
      mscclppResult_t res = engineRun(&e);
      free(copy);
      return res;
    }
    case MSCCLPP_COLL_ALLTOALLV:
      return hostAllToAllv(&e, a);
    default:
      return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_COLL, "host collectives: unknown collective %d",
                        (int)a->kind);
  }
}

/* ---- send/recv ------------------------------------------------------------------------ */

mscclppResult_t mscclppCollHostP2p(struct mscclppComm* comm, const struct mscclppCollP2pOp* ops, int nops) {
  const char* name = nops == 1 ? (ops[0].isSend ? "mscclppSend" : "mscclppRecv") : "send/recv group";
  struct mscclppCollHost* h;
  MSCCLPP_RETURN_ON_ERROR(hostState(comm, &h));
  if (mscclppAbortIsRaised(h->abort)) return failAborted(comm, name);
  /* connect the peers this call needs, in rank order (every pair connects at
   * its first call with each other; the order keeps that deadlock-free) */
  uint8_t* need = (uint8_t*)calloc((size_t)h->nranks, 1);
  struct xfer* xs = (struct xfer*)calloc((size_t)nops, sizeof(*xs));
  if (need == NULL || xs == NULL) {
    free(need);
    free(xs);
    return mscclppErr(mscclppSystemError, MSCCLPP_LOG_COLL, "out of memory");
  }
  for (int i = 0; i < nops; i++)
    if (ops[i].bytes > 0) need[ops[i].peer] = 1;
  mscclppResult_t res = mscclppSuccess;
  for (int r = 0; r < h->nranks && res == mscclppSuccess; r++)
    if (need[r]) res = connectPeer(comm, h, r);
  if (res == mscclppSuccess) {
    struct engine e = {comm, h, name, MSCCLPP_COLL_SENDRECV, 0, xs, 0, NULL};
    for (int i = 0; i < nops; i++) addXfer(&e, ops[i].peer, ops[i].isSend, ops[i].buf, ops[i].bytes);
    res = engineRun(&e);
  }
  free(need);
  free(xs);
  return res;
}
