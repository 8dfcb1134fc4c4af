/* SPDX-License-Identifier: MIT */
/*
 * The GPU backend's "port" algorithm family, host side: the per-communicator
 * state (connections, the registered scratch, two port channels per peer,
 * device counters), built at the first call (coll.h's first-use policy),
 * and the launches. Kernels and
 * the streams they run: coll_port_kernels.cu, coll_port.h.
 *
 * Only this rank's buffers are touched by its kernel (the data goes through
 * the scratch), so there is no rendezvous of user buffers: a call is an
 * enqueue, and works the same in a CUDA graph.
 */
#include "coll/coll.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "core/trace.h"
#include "gpu/gpu_ipc.h"

#ifndef MSCCLPP_HAVE_CUDA

mscclppResult_t mscclppCollPortRun(struct mscclppComm* comm, const struct mscclppCollArgs* args) {
  (void)comm;
  (void)args;
  return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_COLL,
                    "GPU collectives over port channels: this build has no CUDA");
}
mscclppResult_t mscclppCollPortP2p(struct mscclppComm* comm, const struct mscclppCollP2pOp* ops, int nops,
                                   mscclppStream_t stream) {
  (void)comm;
  (void)ops;
  (void)nops;
  (void)stream;
  return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_COLL, "GPU send/recv over port channels: this build has no CUDA");
}
void mscclppCollPortRelease(struct mscclppComm* comm, void* state) {
  (void)comm;
  (void)state;
}
mscclppResult_t mscclppCollPortPrepare(struct mscclppComm* comm) {
  (void)comm;
  return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_COLL,
                    "GPU collectives over port channels: this build has no CUDA");
}

#else

#include "coll/port/coll_port.h"
#include "gpu/gpu.h"
#include "mscclpp/connection.h"
#include "mscclpp/memory.h"
#include "mscclpp/port_channel.h"

#define MAXR MSCCLPP_COLL_PORT_MAX_RANKS
#define TAG_BASE 0x7e000000
#define SLOT_MIN ((uint64_t)64 << 10)
#define SLOT_MAX ((uint64_t)4 << 20)
#define SCRATCH_MAX ((uint64_t)512 << 20) /* all slots of one rank */

struct mscclppCollPort {
  int rank, nranks;
  int device; /* current when the state was built */
  uint64_t slotBytes;
  void* scratch; /* device memory: the slots for peers on this host */
  size_t scratchBytes;
  mscclppRegisteredMemory_t scratchMem;
  void* hostScratch; /* pinned host memory: the slots for peers over the network (NULL: none) */
  mscclppRegisteredMemory_t hostScratchMem;
  mscclppConnection_t conn[MAXR];
  mscclppPortChannel_t data[MAXR];
  mscclppPortChannel_t credit[MAXR];
  struct mscclppCollPortPeer* peers;     /* device */
  struct mscclppCollPortDevState* state; /* device */
};

void mscclppCollPortRelease(struct mscclppComm* comm, void* state) {
  struct mscclppCollPort* p = (struct mscclppCollPort*)state;
  mscclppGpuDeviceSynchronize(); /* this rank's kernels are done */
  /* ... and every rank's: nothing more is pushed to or waited from a peer */
  (void)mscclppBootstrapBarrier(comm);
  for (int r = 0; r < p->nranks; r++) {
    if (p->data[r] != NULL) (void)mscclppPortChannelDestroy(p->data[r]);
    if (p->credit[r] != NULL) (void)mscclppPortChannelDestroy(p->credit[r]);
  }
  for (int r = 0; r < p->nranks; r++)
    if (p->conn[r] != NULL) (void)mscclppConnectionDestroy(p->conn[r]);
  /* every peer has stopped writing into our scratch before we free it */
  (void)mscclppBootstrapBarrier(comm);
  if (p->scratchMem != NULL) (void)mscclppMemoryDeregister(p->scratchMem);
  if (p->scratch != NULL) (void)mscclppMemFree(comm, p->scratch);
  if (p->hostScratchMem != NULL) (void)mscclppMemoryDeregister(p->hostScratchMem);
  if (p->hostScratch != NULL) (void)mscclppMemFree(comm, p->hostScratch);
  mscclppGpuDeviceFree(p->device, p->peers);
  mscclppGpuDeviceFree(p->device, p->state);
  free(p);
}

/* Bytes of one slot: MSCCLPP_COLL_SCRATCH_BYTES per peer for its inbox and
 * outbox slots, within [SLOT_MIN, SLOT_MAX] and SCRATCH_MAX in all; the
 * smallest of every rank's choice, so that the layouts agree. */
static mscclppResult_t agreeSlotBytes(struct mscclppComm* comm, uint64_t* out) {
  uint64_t slot = (uint64_t)comm->params.collScratchBytes / (2 * MSCCLPP_COLL_PORT_NBUF);
  uint64_t cap = SCRATCH_MAX / (2 * MSCCLPP_COLL_PORT_NBUF * (uint64_t)comm->nranks);
  if (slot > cap) slot = cap;
  if (slot > SLOT_MAX) slot = SLOT_MAX;
  if (slot < SLOT_MIN) slot = SLOT_MIN;
  slot = slot / 4096 * 4096;
  return mscclppCollAgreeMin(comm, slot, out);
}

/* The state's setup on p (zeroed; every rank reaches the same call). On
 * failure what was made stays in p for mscclppCollPortRelease. */
static mscclppResult_t portSetup(struct mscclppComm* comm, struct mscclppCollPort* p) {
  p->rank = comm->rank;
  MSCCLPP_RETURN_ON_ERROR(mscclppGpuIpcCurrentDevice(&p->device));
  p->nranks = comm->nranks;
  MSCCLPP_RETURN_ON_ERROR(agreeSlotBytes(comm, &p->slotBytes));
  /* connections first: the regions' registrations then cover their transports */
  int nets = 0, hostSlots = 0, isHost[MAXR] = {0};
  for (int r = 0; r < p->nranks; r++) {
    if (r == p->rank) continue;
    MSCCLPP_RETURN_ON_ERROR(mscclppConnectionCreate(comm, r, TAG_BASE, mscclppTransportAuto, &p->conn[r]));
    int net = 0;
    MSCCLPP_RETURN_ON_ERROR(mscclppConnectionHasCapability(p->conn[r], mscclppConnectionCapCrossHost, &net));
    nets += net;
    MSCCLPP_RETURN_ON_ERROR(
        mscclppConnectionHasCapability(p->conn[r], mscclppConnectionCapStagesDeviceMemory, &isHost[r]));
    hostSlots += isHost[r];
  }
  /* the two regions (coll_port.h): device memory, and pinned host memory
   * for the peers over a network that would stage device memory */
  p->scratchBytes = (size_t)(2 * MSCCLPP_COLL_PORT_NBUF * (uint64_t)p->nranks * p->slotBytes);
  MSCCLPP_RETURN_ON_ERROR(mscclppMemAlloc(comm, mscclppMemKindDevice, p->scratchBytes, &p->scratch));
  MSCCLPP_RETURN_ON_ERROR(
      mscclppMemoryRegister(comm, p->scratch, p->scratchBytes, mscclppTransportAuto, &p->scratchMem));
  void* hostDev = NULL;
  if (hostSlots > 0) {
    MSCCLPP_RETURN_ON_ERROR(mscclppMemAlloc(comm, mscclppMemKindHostPinned, p->scratchBytes, &p->hostScratch));
    MSCCLPP_RETURN_ON_ERROR(
        mscclppMemoryRegister(comm, p->hostScratch, p->scratchBytes, mscclppTransportNet, &p->hostScratchMem));
    MSCCLPP_RETURN_ON_ERROR(mscclppMemoryDevicePtr(p->hostScratchMem, &hostDev));
  }
  size_t peersBytes = sizeof(struct mscclppCollPortPeer) * (size_t)p->nranks;
  struct mscclppCollPortPeer* hostPeers = (struct mscclppCollPortPeer*)calloc(1, peersBytes);
  if (hostPeers == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_COLL, "out of memory");
  mscclppResult_t res = mscclppSuccess;
  for (int r = 0; r < p->nranks && res == mscclppSuccess; r++) {
    if (r == p->rank) continue;
    mscclppPortChannelConfig pc = MSCCLPP_PORT_CHANNEL_CONFIG_INITIALIZER;
    pc.local = isHost[r] ? p->hostScratchMem : p->scratchMem;
    hostPeers[r].base = (uint8_t*)(isHost[r] ? hostDev : p->scratch);
    pc.tag = TAG_BASE + 1;
    res = mscclppPortChannelCreate(comm, p->conn[r], &pc, &p->data[r]);
    pc.tag = TAG_BASE + 2;
    if (res == mscclppSuccess) res = mscclppPortChannelCreate(comm, p->conn[r], &pc, &p->credit[r]);
    if (res == mscclppSuccess) res = mscclppPortChannelGetDeviceHandle(p->data[r], &hostPeers[r].data);
    if (res == mscclppSuccess) res = mscclppPortChannelGetDeviceHandle(p->credit[r], &hostPeers[r].credit);
  }
  if (res == mscclppSuccess) res = mscclppGpuDeviceAlloc(p->device, peersBytes, (void**)&p->peers);
  if (res == mscclppSuccess) res = mscclppGpuMemcpy(p->device, p->peers, hostPeers, peersBytes);
  free(hostPeers);
  MSCCLPP_RETURN_ON_ERROR(res);
  /* zeroed on the library's stream: the first call may be captured */
  MSCCLPP_RETURN_ON_ERROR(mscclppGpuDeviceAlloc(p->device, sizeof(*p->state), (void**)&p->state));
  MSCCLPP_INFO(MSCCLPP_LOG_COLL,
               "rank %d: GPU collectives over port channels to %d peers (%d over the network), slots of %llu bytes, "
               "scratch %zu bytes of device memory%s",
               p->rank, p->nranks - 1, nets, (unsigned long long)p->slotBytes, p->scratchBytes,
               hostSlots > 0 ? " and as much pinned host memory (the slots of peers over the network)" : "");
  return mscclppSuccess;
}

/* The state, built privately (coll.h's first-use policy). A failed build
 * hands what it made to the slot: peers may hold channels to it, so it is
 * released at destroy, with every rank. */
static mscclppResult_t portBuild(struct mscclppComm* comm, void** built) {
  if (comm->nranks > MAXR)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_COLL,
                      "GPU collectives over port channels: %d ranks; this release supports up to %d", comm->nranks,
                      MAXR);
  struct mscclppCollPort* p = (struct mscclppCollPort*)calloc(1, sizeof(*p));
  if (p == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_COLL, "out of memory");
  *built = p;
  return portSetup(comm, p);
}

static mscclppResult_t portState(struct mscclppComm* comm, struct mscclppCollPort** out) {
  return mscclppCollBackendState(comm, MSCCLPP_COLL_BACKEND_PORT, portBuild, (void**)out);
}

mscclppResult_t mscclppCollPortPrepare(struct mscclppComm* comm) {
  if (comm->nranks == 1 || comm->nranks > MAXR) return mscclppSuccess;
  struct mscclppCollPort* p = NULL;
  return portState(comm, &p);
}

static void fillCommon(const struct mscclppCollPort* p, struct mscclppCollPortLaunch* L) {
  L->rank = p->rank;
  L->nranks = p->nranks;
  L->slotBytes = p->slotBytes;
  L->peers = p->peers;
  L->state = p->state;
}

mscclppResult_t mscclppCollPortRun(struct mscclppComm* comm, const struct mscclppCollArgs* a) {
  int mode = mscclppGpuIpcCaptureRelax();
  mscclppResult_t res = mscclppSuccess;
  const int copyOnly =
      a->kind == MSCCLPP_COLL_ALLGATHER || a->kind == MSCCLPP_COLL_BROADCAST || a->kind == MSCCLPP_COLL_ALLTOALL;
  if (comm->nranks == 1) { /* a copy (every operator of one value is the value) */
    if (a->send != a->recv) {
      res = mscclppGpuMemcpyOnAppStream(a->stream, a->recv, a->send, a->count * a->typeSize);
    }
    goto restore;
  }
  struct mscclppCollPort* p = NULL;
  res = portState(comm, &p);
  if (res != mscclppSuccess) goto restore;
  struct mscclppCollPortLaunch L;
  memset(&L, 0, sizeof(L));
  fillCommon(p, &L);
  L.kind = (int)a->kind;
  L.type = copyOnly ? (int)mscclppUint8 : (int)a->type;
  L.op = (int)a->op;
  L.root = a->root;
  L.count = copyOnly ? a->count * a->typeSize : a->count;
  L.send = (const uint8_t*)a->send;
  L.recv = (uint8_t*)a->recv;
  if (mscclppTraceOn()) mscclppCollTraceKernel(comm, p->device, 1, mscclppCollKindName(a->kind), a->stream, &L.trace);
  const char* why = NULL;
  res = mscclppCollPortEnqueue(&L, NULL, a->stream, &why);
  if (res != mscclppSuccess)
    res = mscclppErr(res, MSCCLPP_LOG_COLL, "launching the %s kernel over port channels: %s",
                     mscclppCollKindName(a->kind), why);
restore:
  mscclppGpuIpcCaptureRestore(mode);
  return res;
}

/* Sends to this rank and receives from it, the i-th with the i-th, as
 * device copies on the stream. */
static mscclppResult_t selfCopies(const struct mscclppCollP2pOp* ops, int nops, mscclppStream_t stream) {
  int s = 0, r = 0;
  for (;;) {
    while (s < nops && !(ops[s].isSend && ops[s].peer < 0)) s++;
    while (r < nops && !(!ops[r].isSend && ops[r].peer < 0)) r++;
    if (s == nops && r == nops) return mscclppSuccess;
    if (s == nops || r == nops || ops[s].bytes != ops[r].bytes)
      return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_COLL,
                        "send/recv group: the sends to this rank do not match its receives from itself (count "
                        "and sizes)");
    if (ops[s].buf != ops[r].buf)
      MSCCLPP_RETURN_ON_ERROR(mscclppGpuMemcpyOnAppStream(stream, ops[r].buf, ops[s].buf, ops[s].bytes));
    s++;
    r++;
  }
}

mscclppResult_t mscclppCollPortP2p(struct mscclppComm* comm, const struct mscclppCollP2pOp* ops, int nops,
                                   mscclppStream_t stream) {
  if (nops > MSCCLPP_COLL_PORT_MAX_P2P)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_COLL,
                      "a group of %d sends and receives; the GPU backend over port channels takes up to %d per group",
                      nops, MSCCLPP_COLL_PORT_MAX_P2P);
  int mode = mscclppGpuIpcCaptureRelax();
  static _Thread_local struct mscclppCollPortP2pList P;
  struct mscclppCollP2pOp self[MSCCLPP_COLL_PORT_MAX_P2P];
  int nself = 0;
  uint64_t laneChunks[MSCCLPP_COLL_PORT_MAX_P2P];
  struct mscclppCollPort* p = NULL;
  mscclppResult_t res = mscclppSuccess;
  P.nops = 0;
  P.nlanes = 0;
  P.rounds = 0;
  int needKernel = 0;
  for (int i = 0; i < nops; i++) needKernel |= ops[i].bytes > 0 && ops[i].peer != comm->rank;
  if (needKernel) res = portState(comm, &p);
  for (int i = 0; i < nops && res == mscclppSuccess; i++) {
    if (ops[i].bytes == 0) continue;
    if (ops[i].peer == comm->rank) {
      self[nself] = ops[i];
      self[nself++].peer = -1;
      continue;
    }
    uint32_t lane = 0;
    while (lane < P.nlanes) {
      const struct mscclppCollPortP2p* first = NULL;
      for (uint32_t j = 0; j < P.nops && first == NULL; j++)
        if (P.ops[j].lane == (int)lane) first = &P.ops[j];
      if (first->isSend == ops[i].isSend && first->peer == ops[i].peer) break;
      lane++;
    }
    if (lane == P.nlanes) laneChunks[P.nlanes++] = 0;
    struct mscclppCollPortP2p* o = &P.ops[P.nops++];
    o->isSend = ops[i].isSend;
    o->peer = ops[i].peer;
    o->lane = (int)lane;
    o->pad = 0;
    o->buf = (uint8_t*)ops[i].buf;
    o->bytes = ops[i].bytes;
    laneChunks[lane] += (ops[i].bytes + p->slotBytes - 1) / p->slotBytes;
    if (laneChunks[lane] > P.rounds) P.rounds = laneChunks[lane];
  }
  if (res == mscclppSuccess) res = selfCopies(self, nself, stream);
  if (res == mscclppSuccess && P.nops > 0) {
    struct mscclppCollPortLaunch L;
    memset(&L, 0, sizeof(L));
    fillCommon(p, &L);
    L.kind = MSCCLPP_COLL_SENDRECV;
    if (mscclppTraceOn()) mscclppCollTraceKernel(comm, p->device, 1, "sendrecv", stream, &L.trace);
    const char* why = NULL;
    res = mscclppCollPortEnqueue(&L, &P, (void*)stream, &why);
    if (res != mscclppSuccess)
      res = mscclppErr(res, MSCCLPP_LOG_COLL, "launching the send/recv kernel over port channels: %s", why);
  }
  mscclppGpuIpcCaptureRestore(mode);
  return res;
}

#endif /* MSCCLPP_HAVE_CUDA */
