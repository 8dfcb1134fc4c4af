/* SPDX-License-Identifier: MIT */
/*
 * The protocol of the GPU collectives over port channels (coll_port.h),
 * played on the host backend: coll_port_kernels.cu compiled by the host C++
 * compiler, its kernel bodies run by one CPU thread per rank as a block of
 * one thread, over real port channels (host shared memory, the proxy), with
 * small slots so that every call runs many rounds and reuses every slot:
 *   mscclpp-run -n N -- port_protocol_host
 * Every collective (int32 with each operator, float sum, bytes for the
 * copies) and send/recv groups, out of place, in place and at odd offsets,
 * checked exactly against the oracle of collective results
 * (tools/oracle/oracle.h: ORACLE_SMALL, as the GPU worker's), then the
 * counters checked equal on both sides of every stream. No GPU needed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* what the kernels need from CUDA, for one thread */
struct uint4 {
  uint32_t x, y, z, w;
};
static struct { unsigned x; } threadIdx = {0}, blockDim = {1};
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __grid_constant__
#define __shared__ static
static inline void __syncthreads() {}
static inline int __syncthreads_or(int p) { return p; }

#include "coll/port/coll_port_kernels.cu"
#include "harness.h"
#include "mscclpp/comm.h"
#include "mscclpp/connection.h"
#include "mscclpp/memory.h"
#include "mscclpp/port_channel.h"
#include "oracle.h"

#define SLOT 4096
#define TAG 0x7e100000

static int rank_, nranks_;

static const uint64_t seed_ = 12345; /* of the oracle's inputs; each call's own: oracleMix(seed_ ^ call) */
static uint64_t ncases_;

/* The kernels' collective numbers are the oracle's. */
static_assert((int)MSCCLPP_COLL_ALLREDUCE == (int)ORACLE_ALLREDUCE && (int)MSCCLPP_COLL_ALLGATHER == (int)ORACLE_ALLGATHER &&
                  (int)MSCCLPP_COLL_REDUCESCATTER == (int)ORACLE_REDUCESCATTER &&
                  (int)MSCCLPP_COLL_BROADCAST == (int)ORACLE_BROADCAST && (int)MSCCLPP_COLL_REDUCE == (int)ORACLE_REDUCE &&
                  (int)MSCCLPP_COLL_ALLTOALL == (int)ORACLE_ALLTOALL,
              "coll_kind.h and oracle.h number the collectives alike");

/* The element type T as the oracle knows it. */
template <typename T>
static int typeOf();
template <>
int typeOf<int32_t>() { return mscclppInt32; }
template <>
int typeOf<float>() { return mscclppFloat32; }
template <>
int typeOf<int8_t>() { return mscclppInt8; }
template <>
int typeOf<uint8_t>() { return mscclppUint8; }

/* Two regions of the slot layout, as the library keeps (device memory for
 * peers on the host, pinned host memory for peers over the network): here
 * the link between ranks a and b uses region (a + b) % 2 on both sides, so
 * a kernel that took the wrong region for a peer would read or write the
 * wrong slots and fail the checks. */
struct Port {
  mscclppRegisteredMemory_t mem[2];
  void* scratch[2];
  mscclppConnection_t conn[MAXR];
  mscclppPortChannel_t data[MAXR], credit[MAXR];
  struct mscclppCollPortPeer peers[MAXR];
  struct mscclppCollPortDevState state;
};

static void setup(mscclppComm_t comm, Port* p, PortLaunch* L) {
  memset(p, 0, sizeof(*p));
  for (int r = 0; r < nranks_; r++)
    if (r != rank_) CHECK_RES(mscclppConnectionCreate(comm, r, TAG, mscclppTransportAuto, &p->conn[r]), mscclppSuccess);
  size_t bytes = (size_t)2 * NBUF * nranks_ * SLOT;
  for (int i = 0; i < 2; i++) {
    CHECK_RES(mscclppMemAlloc(comm, mscclppMemKindHostShared, bytes, &p->scratch[i]), mscclppSuccess);
    CHECK_RES(mscclppMemoryRegister(comm, p->scratch[i], bytes, mscclppTransportAuto, &p->mem[i]), mscclppSuccess);
  }
  for (int r = 0; r < nranks_; r++) {
    if (r == rank_) continue;
    const int region = (rank_ + r) % 2;
    mscclppPortChannelConfig pc = MSCCLPP_PORT_CHANNEL_CONFIG_INITIALIZER;
    pc.local = p->mem[region];
    p->peers[r].base = (uint8_t*)p->scratch[region];
    pc.tag = TAG + 1;
    CHECK_RES(mscclppPortChannelCreate(comm, p->conn[r], &pc, &p->data[r]), mscclppSuccess);
    pc.tag = TAG + 2;
    CHECK_RES(mscclppPortChannelCreate(comm, p->conn[r], &pc, &p->credit[r]), mscclppSuccess);
    CHECK_RES(mscclppPortChannelGetDeviceHandle(p->data[r], &p->peers[r].data), mscclppSuccess);
    CHECK_RES(mscclppPortChannelGetDeviceHandle(p->credit[r], &p->peers[r].credit), mscclppSuccess);
  }
  memset(L, 0, sizeof(*L));
  L->rank = rank_;
  L->nranks = nranks_;
  L->slotBytes = SLOT;
  L->peers = p->peers;
  L->state = &p->state;
}

static void teardown(mscclppComm_t comm, Port* p) {
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  for (int r = 0; r < nranks_; r++) {
    if (p->data[r] != NULL) CHECK_RES(mscclppPortChannelDestroy(p->data[r]), mscclppSuccess);
    if (p->credit[r] != NULL) CHECK_RES(mscclppPortChannelDestroy(p->credit[r]), mscclppSuccess);
  }
  for (int r = 0; r < nranks_; r++)
    if (p->conn[r] != NULL) CHECK_RES(mscclppConnectionDestroy(p->conn[r]), mscclppSuccess);
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  for (int i = 0; i < 2; i++) {
    CHECK_RES(mscclppMemoryDeregister(p->mem[i]), mscclppSuccess);
    CHECK_RES(mscclppMemFree(comm, p->scratch[i]), mscclppSuccess);
  }
}

/* One checked collective of elements T; placement 0 out of place, 1 in
 * place, 2 odd element offsets. Returns 1 when wrong. */
template <typename T>
static int runColl(mscclppComm_t comm, PortLaunch L, int kind, int op, uint64_t count, int placement) {
  const uint64_t ts = sizeof(T);
  const int root = nranks_ - 1;
  const enum oracleColl coll = (enum oracleColl)kind;
  const uint64_t inElems = oracleInElems(coll, count, nranks_), outElems = oracleOutElems(coll, count, nranks_);
  int copy = kind == MSCCLPP_COLL_ALLGATHER || kind == MSCCLPP_COLL_BROADCAST || kind == MSCCLPP_COLL_ALLTOALL;
  struct oracleCall g;
  oracleInit(&g, ORACLE_SMALL, typeOf<T>(), copy ? ORACLE_COPY : op, nranks_, oracleMix(seed_ ^ ++ncases_));
  uint64_t maxElems = inElems > outElems ? inElems : outElems;
  uint8_t* inAlloc = (uint8_t*)malloc((inElems + 4) * ts);
  uint8_t* outAlloc = (uint8_t*)malloc((maxElems + 4) * ts);
  memset(outAlloc, 0xA5, (maxElems + 4) * ts);
  uint8_t* send = inAlloc + (placement == 2 ? ts : 0); /* odd element offsets: no 16-byte vectors */
  uint8_t* recv = outAlloc + (placement == 2 ? 3 * ts : 0);
  if (placement == 1) {
    if (kind == MSCCLPP_COLL_ALLGATHER)
      send = recv + rank_ * count * ts;
    else if (kind == MSCCLPP_COLL_REDUCESCATTER) {
      send = recv;
      recv = send + rank_ * count * ts;
    } else
      send = recv;
  }
  oracleInputs(&g, rank_, 0, inElems, send);
  L.kind = kind;
  L.op = op;
  L.root = root;
  L.count = count;
  L.send = send;
  L.recv = recv;
  if (copy) {
    L.count = count * ts;
    portCollKernel<uint8_t>(L);
  } else {
    portCollKernel<T>(L);
  }
  int bad = 0;
  uint8_t* want = (uint8_t*)malloc(outElems * ts + 1);
  oracleExpected(&g, coll, rank_, root, count, want);
  if (!(kind == MSCCLPP_COLL_REDUCE && rank_ != root))
    for (uint64_t i = 0; i < outElems && !bad; i++)
      if (oracleWrong(&g, recv + i * ts, want + i * ts)) {
        fprintf(stderr, "rank %d: kind %d op %d size %zu count %llu placement %d: element %llu is wrong\n", rank_, kind,
                op, sizeof(T), (unsigned long long)count, placement, (unsigned long long)i);
        bad = 1;
      }
  free(want);
  free(inAlloc);
  free(outAlloc);
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  return bad;
}

/* A group: two sends to rank+1 and two receives from rank-1, interleaved
 * (two ops per lane, in order), of `bytes` and bytes/2+1. */
static int runP2p(mscclppComm_t comm, PortLaunch L, uint64_t bytes) {
  static PortP2pList P;
  memset(&P, 0, sizeof(P));
  const int to = (rank_ + 1) % nranks_, from = (rank_ - 1 + nranks_) % nranks_;
  const uint64_t size[2] = {bytes, bytes / 2 + 1};
  uint8_t* sbuf[2];
  uint8_t* rbuf[2];
  for (int i = 0; i < 2; i++) {
    sbuf[i] = (uint8_t*)malloc(size[i] + 1);
    rbuf[i] = (uint8_t*)malloc(size[i] + 1);
    oracleBytes(seed_, ((uint64_t)(uint32_t)rank_ << 8) | (uint64_t)i, size[i], sbuf[i] + 1);
  }
  uint64_t chunks[2] = {0, 0};
  for (int i = 0; i < 4; i++) { /* send 0, recv 0, send 1, recv 1 */
    struct mscclppCollPortP2p* o = &P.ops[P.nops++];
    o->isSend = i % 2 == 0;
    o->peer = o->isSend ? to : from;
    o->buf = (o->isSend ? sbuf[i / 2] : rbuf[i / 2]) + 1;
    o->bytes = size[i / 2];
    o->lane = o->isSend ? 0 : 1;
    chunks[o->lane] += (o->bytes + SLOT - 1) / SLOT;
  }
  P.nlanes = 2;
  P.rounds = chunks[0] > chunks[1] ? chunks[0] : chunks[1];
  portP2pKernel(L, P);
  int bad = 0;
  for (int i = 0; i < 2 && !bad; i++) {
    uint8_t* want = (uint8_t*)malloc(size[i] + 1);
    oracleBytes(seed_, ((uint64_t)(uint32_t)from << 8) | (uint64_t)i, size[i], want);
    for (uint64_t b = 0; b < size[i] && !bad; b++)
      if (rbuf[i][b + 1] != want[b]) {
        fprintf(stderr, "rank %d: receive %d (%llu bytes) from %d: byte %llu is wrong\n", rank_, i,
                (unsigned long long)size[i], from, (unsigned long long)b);
        bad = 1;
      }
    free(want);
  }
  for (int i = 0; i < 2; i++) {
    free(sbuf[i]);
    free(rbuf[i]);
  }
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  return bad;
}

int main(void) {
  mscclppComm_t comm;
  CHECK_RES(mscclppCommInitFromEnv(&comm), mscclppSuccess);
  if (harnessFailures_) return 1;
  mscclppCommRank(comm, &rank_);
  mscclppCommSize(comm, &nranks_);
  Port* port = (Port*)calloc(1, sizeof(Port));
  PortLaunch L;
  setup(comm, port, &L);
  if (harnessFailures_) return 1;
  const uint64_t counts[] = {1, 3, 17, 1031, 4099, 65537};
  int wrong = 0, calls = 0;
  for (int kind = 0; kind < MSCCLPP_COLL_SENDRECV; kind++) {
    int reduces = kind == MSCCLPP_COLL_ALLREDUCE || kind == MSCCLPP_COLL_REDUCESCATTER || kind == MSCCLPP_COLL_REDUCE;
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
      for (int placement = 0; placement < 3; placement++) {
        if (placement == 1 && kind == MSCCLPP_COLL_ALLTOALL) continue;
        if (reduces) {
          for (int op = 0; op < mscclppNumOps; op++)
            wrong += runColl<int32_t>(comm, L, kind, op, counts[c], placement), calls++;
          wrong += runColl<float>(comm, L, kind, mscclppSum, counts[c], placement), calls++;
          wrong += runColl<int8_t>(comm, L, kind, mscclppMax, counts[c], placement), calls++;
        } else {
          wrong += runColl<int32_t>(comm, L, kind, mscclppSum, counts[c], placement), calls++;
          wrong += runColl<uint8_t>(comm, L, kind, mscclppSum, counts[c], placement), calls++;
        }
      }
  }
  const uint64_t sizes[] = {1, 4095, 4096, 4097, 3 * SLOT + 5, 100000};
  for (size_t c = 0; c < sizeof(sizes) / sizeof(sizes[0]); c++) wrong += runP2p(comm, L, sizes[c]), calls++;
  /* every stream's two ends counted the same chunks */
  uint64_t* all = (uint64_t*)calloc((size_t)nranks_ * 2 * MAXR, sizeof(uint64_t));
  memcpy(all + (size_t)rank_ * 2 * MAXR, &port->state, 2 * MAXR * sizeof(uint64_t));
  CHECK_RES(mscclppBootstrapAllGather(comm, all, 2 * MAXR * sizeof(uint64_t)), mscclppSuccess);
  for (int a = 0; a < nranks_; a++)
    for (int b = 0; b < nranks_; b++) CHECK(all[(size_t)a * 2 * MAXR + b] == all[(size_t)b * 2 * MAXR + MAXR + a]);
  free(all);
  printf("rank %d: %d checked calls, %d wrong (slots of %d bytes, %llu chunks sent to rank %d)\n", rank_, calls, wrong,
         SLOT, (unsigned long long)port->state.sent[(rank_ + 1) % nranks_], (rank_ + 1) % nranks_);
  CHECK(wrong == 0);
  teardown(comm, port);
  free(port);
  CHECK_RES(mscclppCommDestroy(comm), mscclppSuccess);
  harnessFinish(); /* (no RUN here: it counts CHECKs only inside RUN) */
  return harnessFailures_ ? 1 : 0;
}
