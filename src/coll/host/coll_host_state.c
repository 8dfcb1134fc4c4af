/* SPDX-License-Identifier: MIT */
/*
 * The host backend's state on a communicator (coll_host.h): the scratch,
 * made at the first call, and the connections to peers.
 *
 * Connections are made per peer at the first call that involves it (every
 * peer at the first collective; send/recv connect only their peers, in rank
 * order), so ranks that never talk to each other never wait for each other.
 */
#include <stdint.h>
#include <stdlib.h>

#include "coll/host/coll_host.h"
#include "core/error.h"
#include "core/log.h"
#include "gpu/abort.h"

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
   * remote peer, received: see coll_host.h), and ranks that only ever ran
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

mscclppResult_t mscclppCollHostState(struct mscclppComm* comm, struct mscclppCollHost** out) {
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
mscclppResult_t mscclppCollHostConnect(struct mscclppComm* comm, struct mscclppCollHost* h, int r) {
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
