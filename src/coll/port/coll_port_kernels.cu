/* SPDX-License-Identifier: MIT */
/*
 * The kernels of the "port" algorithm family (coll_port.h describes the
 * streams, the scratch layout and the algorithms). One block: thread 0
 * waits and pushes triggers, every thread copies and reduces. One body for
 * the collectives, instantiated per element type; the copy-only
 * collectives and send/recv work on bytes.
 *
 * A round is: thread 0 reserves the outbox slots (credit waits); the block
 * fills them; thread 0 puts them and waits for the peers' chunks; the block
 * reduces or copies them out; thread 0 gives the slots back. A failed wait
 * (timeout, abort: already recorded by the semaphore layer) ends the kernel
 * in every thread.
 */
#include <stdint.h>
#ifdef __CUDACC__
#include <cuda_runtime.h>
#endif

#include "coll/coll_kind.h"
#include "coll/coll_ops.cuh"
#include "coll/port/coll_port.h"
#include "mscclpp/coll.h"

typedef struct mscclppCollPortLaunch PortLaunch;
typedef struct mscclppCollPortP2pList PortP2pList;

#define MAXR MSCCLPP_COLL_PORT_MAX_RANKS
#define NBUF MSCCLPP_COLL_PORT_NBUF
#define MAXP MSCCLPP_COLL_PORT_MAX_P2P

/* ---- streams --------------------------------------------------------------------- */

/* The block's copy of the stream counters (shared memory; thread 0 advances
 * them between barriers). */
struct Streams {
  uint64_t sent[MAXR];
  uint64_t recvd[MAXR];
};

static __device__ __forceinline__ uint64_t inboxOff(const PortLaunch& L, int from, uint64_t chunk) {
  return ((uint64_t)from * NBUF + chunk % NBUF) * L.slotBytes;
}
static __device__ __forceinline__ uint64_t outboxOff(const PortLaunch& L, int to, uint64_t chunk) {
  return ((uint64_t)(L.nranks + to) * NBUF + chunk % NBUF) * L.slotBytes;
}
/* Where the next chunk to q is written, and where the next from p is read. */
static __device__ __forceinline__ uint8_t* outSlot(const PortLaunch& L, const Streams& s, int q) {
  return L.peers[q].base + outboxOff(L, q, s.sent[q]);
}
static __device__ __forceinline__ const uint8_t* inSlot(const PortLaunch& L, const Streams& s, int p) {
  return L.peers[p].base + inboxOff(L, p, s.recvd[p]);
}

/* Thread 0: wait until the slot of the next chunk to q is free (the credit
 * of the chunk NBUF before it). */
static __device__ mscclppResult_t reserve(const PortLaunch& L, const Streams& s, int q) {
  if (s.sent[q] < NBUF) return mscclppSuccess;
  mscclppResult_t r = mscclppPortChannelDeviceWait(&L.peers[q].credit);
#if defined(MSCCLPP_DEVICE_HOST)
  /* The credit proves that this rank's proxy has read the slot, but through
   * the peer's process, which ThreadSanitizer cannot follow; when the
   * kernels run on CPU threads (the protocol test), also wait for this
   * proxy (a flush): the same fact, seen inside this process. */
  if (r == mscclppSuccess) r = mscclppPortChannelDeviceFlush(&L.peers[q].data);
#endif
  return r;
}
/* Thread 0: put the next chunk to q (n bytes, in its outbox slot) into q's
 * inbox, with a signal. */
static __device__ mscclppResult_t post(const PortLaunch& L, Streams& s, int q, uint64_t n) {
  const mscclppPortChannelDeviceHandle* h = &L.peers[q].data;
  uint64_t c = s.sent[q]++;
  return mscclppPortChannelDevicePutWithSignal(h, h->dst, inboxOff(L, L.rank, c), h->src, outboxOff(L, q, c), n);
}
/* Thread 0: wait for the next chunk from p. */
static __device__ mscclppResult_t arrive(const PortLaunch& L, int p) {
  return mscclppPortChannelDeviceWait(&L.peers[p].data);
}
/* Thread 0: give the slot of the chunk from p back (after the block's
 * barrier that follows its last read; the credit's trigger is pushed with
 * release order, which orders the block's reads before it - the credit lets
 * the peer overwrite the slot. A release rather than a fence: the host
 * backend's C11 model and ThreadSanitizer see it). */
static __device__ mscclppResult_t giveBack(const PortLaunch& L, Streams& s, int p) {
  s.recvd[p]++;
  uint64_t pos;
  return mscclppPortChannelDevicePush(&L.peers[p].credit, MSCCLPP_TRIGGER_FLAG, 0, 0, 0, 0, 0, mscclppFifoOrderRelease,
                                      &pos);
}

/* ---- block-wide copies and reductions ----------------------------------------------- */

/* dst[d][0, bytes) = src[0, bytes) for d < ndst. */
static __device__ void blockCopy(uint8_t* const* dst, int ndst, const uint8_t* src, uint64_t bytes) {
  uintptr_t bits = (uintptr_t)src;
  for (int d = 0; d < ndst; d++) bits |= (uintptr_t)dst[d];
  uint64_t done = 0;
  if ((bits & 15) == 0) {
    const uint64_t nv = bytes / 16;
    for (uint64_t i = threadIdx.x; i < nv; i += blockDim.x) {
      uint4 v = ((const uint4*)src)[i];
      for (int d = 0; d < ndst; d++) ((uint4*)dst[d])[i] = v;
    }
    done = nv * 16;
  } else if ((bits & 7) == 0) {
    const uint64_t nv = bytes / 8;
    for (uint64_t i = threadIdx.x; i < nv; i += blockDim.x) {
      uint64_t v = ((const uint64_t*)src)[i];
      for (int d = 0; d < ndst; d++) ((uint64_t*)dst[d])[i] = v;
    }
    done = nv * 8;
  }
  for (uint64_t i = done + threadIdx.x; i < bytes; i += blockDim.x) {
    uint8_t v = src[i];
    for (int d = 0; d < ndst; d++) dst[d][i] = v;
  }
}

/* dst[d][i] = op over r < nsrc of src[r][i], in src order, then / nranks
 * for avg, for i < n elements, by this block's threads. */
template <typename T>
static __device__ void blockReduce(uint8_t* const* dst, int ndst, const uint8_t* const* src, int nsrc, uint64_t n,
                                   int op, int nranks) {
  uintptr_t bits = 0;
  for (int d = 0; d < ndst; d++) bits |= (uintptr_t)dst[d];
  for (int r = 0; r < nsrc; r++) bits |= (uintptr_t)src[r];
  reduceToAll<T>(dst, ndst, src, nsrc, n, op, nranks, (bits & 15) == 0, threadIdx.x, blockDim.x);
}

/* ---- the collectives ------------------------------------------------------------------ */


/* Elements of chunk j of [b, e) (chunks of ce), and where it starts. */
static __device__ __forceinline__ uint64_t chunkOf(uint64_t b, uint64_t e, uint64_t j, uint64_t ce, uint64_t* lo) {
  *lo = b + j * ce;
  if (*lo >= e) return 0;
  return e - *lo < ce ? e - *lo : ce;
}

/* What this rank sends to q in phase 1 of round j: n elements from *src. */
template <typename T>
static __device__ uint64_t sendPart(const PortLaunch& L, int q, uint64_t j, uint64_t ce, const uint8_t** src) {
  const uint64_t ts = sizeof(T);
  uint64_t lo = 0, n = 0, b, e;
  switch (L.kind) {
    case MSCCLPP_COLL_ALLREDUCE:
      shareOf(L.count, L.nranks, q, 16 / ts, &b, &e);
      n = chunkOf(b, e, j, ce, &lo);
      *src = L.send + lo * ts;
      return n;
    case MSCCLPP_COLL_REDUCESCATTER:
    case MSCCLPP_COLL_ALLTOALL:
      n = chunkOf(0, L.count, j, ce, &lo);
      *src = L.send + ((uint64_t)q * L.count + lo) * ts;
      return n;
    case MSCCLPP_COLL_REDUCE:
      if (q != L.root) return 0;
      break;
    case MSCCLPP_COLL_BROADCAST:
      if (L.rank != L.root) return 0;
      break;
    default: /* allgather */
      break;
  }
  n = chunkOf(0, L.count, j, ce, &lo); /* reduce, broadcast, allgather: the whole input */
  *src = L.send + lo * ts;
  return n;
}

/* What this rank receives from p in phase 1 of round j: n elements, which
 * go to *dst (copies) or, reduced, to *dst at element offset *lo of the
 * reduction's range (reductions: the same for every p). */
template <typename T>
static __device__ uint64_t recvPart(const PortLaunch& L, int p, uint64_t j, uint64_t ce, uint8_t** dst) {
  const uint64_t ts = sizeof(T);
  uint64_t lo = 0, n = 0, b, e;
  switch (L.kind) {
    case MSCCLPP_COLL_ALLREDUCE:
      shareOf(L.count, L.nranks, L.rank, 16 / ts, &b, &e);
      n = chunkOf(b, e, j, ce, &lo);
      *dst = L.recv + lo * ts;
      return n;
    case MSCCLPP_COLL_REDUCESCATTER:
      break;
    case MSCCLPP_COLL_REDUCE:
      if (L.rank != L.root) return 0;
      break;
    case MSCCLPP_COLL_BROADCAST:
      if (p != L.root) return 0;
      break;
    default: /* allgather, alltoall: block p of the output */
      n = chunkOf(0, L.count, j, ce, &lo);
      *dst = L.recv + ((uint64_t)p * L.count + lo) * ts;
      return n;
  }
  n = chunkOf(0, L.count, j, ce, &lo); /* reduce-scatter, reduce, broadcast: the whole output */
  *dst = L.recv + lo * ts;
  return n;
}

/* This rank's own input to the reduction of round j (reducing kinds). */
template <typename T>
static __device__ const uint8_t* ownPart(const PortLaunch& L, uint64_t j, uint64_t ce) {
  const uint64_t ts = sizeof(T);
  uint64_t lo = 0, b, e;
  switch (L.kind) {
    case MSCCLPP_COLL_ALLREDUCE:
      shareOf(L.count, L.nranks, L.rank, 16 / ts, &b, &e);
      (void)chunkOf(b, e, j, ce, &lo);
      return L.send + lo * ts;
    case MSCCLPP_COLL_REDUCESCATTER:
      (void)chunkOf(0, L.count, j, ce, &lo);
      return L.send + ((uint64_t)L.rank * L.count + lo) * ts;
    default: /* reduce */
      (void)chunkOf(0, L.count, j, ce, &lo);
      return L.send + lo * ts;
  }
}

/* Thread 0's result, seen by every thread: nonzero when it failed. */
static __device__ __forceinline__ int anyFailed(mscclppResult_t r) {
  return __syncthreads_or(threadIdx.x == 0 && r != mscclppSuccess);
}

template <typename T>
__global__ void __launch_bounds__(MSCCLPP_COLL_PORT_THREADS) portCollKernel(const __grid_constant__ PortLaunch L) {
  mscclppCollTraceBlock traceBlock(L.trace);
  __shared__ Streams s;
  const int k = L.nranks, me = L.rank;
  const uint64_t ts = sizeof(T);
  const uint64_t ce = L.slotBytes / ts;
  const int kind = L.kind;
  const int reducing =
      kind == MSCCLPP_COLL_ALLREDUCE || kind == MSCCLPP_COLL_REDUCESCATTER || kind == MSCCLPP_COLL_REDUCE;
  for (int i = threadIdx.x; i < k; i += blockDim.x) {
    s.sent[i] = L.state->sent[i];
    s.recvd[i] = L.state->recvd[i];
  }
  __syncthreads();
  uint64_t rounds;
  {
    uint64_t b, e;
    if (kind == MSCCLPP_COLL_ALLREDUCE)
      shareOf(L.count, k, 0, 16 / ts, &b, &e); /* share 0 is the largest */
    else
      b = 0, e = L.count;
    rounds = (e - b + ce - 1) / ce;
  }
  uint8_t* dst[MAXR + 1];
  const uint8_t* src[MAXR];
  for (uint64_t j = 0; j < rounds; j++) {
    mscclppResult_t r = mscclppSuccess;
    /* phase 1, sends: reserve, fill, put */
    if (threadIdx.x == 0)
      for (int q = 0; q < k && r == mscclppSuccess; q++) {
        const uint8_t* p;
        if (q != me && sendPart<T>(L, q, j, ce, &p) > 0) r = reserve(L, s, q);
      }
    if (anyFailed(r)) return;
    if (kind == MSCCLPP_COLL_ALLGATHER || kind == MSCCLPP_COLL_BROADCAST) {
      /* the same bytes to every peer, and to my own output */
      const uint8_t* from = NULL;
      uint64_t n = 0;
      int nd = 0;
      for (int q = 0; q < k; q++)
        if (q != me && (n = sendPart<T>(L, q, j, ce, &from)) > 0) dst[nd++] = outSlot(L, s, q);
      if (kind == MSCCLPP_COLL_ALLGATHER || me == L.root) {
        uint8_t* own = NULL;
        n = sendPart<T>(L, me, j, ce, &from);
        (void)recvPart<T>(L, me, j, ce, &own);
        if (own != from) dst[nd++] = own;
      }
      if (nd > 0) blockCopy(dst, nd, from, n * ts);
    } else {
      for (int q = 0; q < k; q++) {
        if (q == me) continue;
        const uint8_t* from;
        uint64_t n = sendPart<T>(L, q, j, ce, &from);
        if (n == 0) continue;
        dst[0] = outSlot(L, s, q);
        blockCopy(dst, 1, from, n * ts);
      }
      if (kind == MSCCLPP_COLL_ALLTOALL) { /* my own block */
        const uint8_t* from;
        uint64_t n = sendPart<T>(L, me, j, ce, &from);
        (void)recvPart<T>(L, me, j, ce, &dst[0]);
        blockCopy(dst, 1, from, n * ts);
      }
    }
    __syncthreads();
    if (threadIdx.x == 0)
      for (int q = 0; q < k && r == mscclppSuccess; q++) {
        const uint8_t* p;
        uint64_t n = q != me ? sendPart<T>(L, q, j, ce, &p) : 0;
        if (n > 0) r = post(L, s, q, n * ts);
      }
    /* phase 1, receives (allreduce: the phase 2 slots reserved first) */
    uint8_t* out = NULL;
    uint64_t mine = recvPart<T>(L, me, j, ce, &out); /* my share's chunk (reductions) */
    if (threadIdx.x == 0) {
      if (kind == MSCCLPP_COLL_ALLREDUCE && mine > 0)
        for (int q = 0; q < k && r == mscclppSuccess; q++)
          if (q != me) r = reserve(L, s, q);
      for (int p = 0; p < k && r == mscclppSuccess; p++) {
        uint8_t* d;
        if (p != me && recvPart<T>(L, p, j, ce, &d) > 0) r = arrive(L, p);
      }
    }
    if (anyFailed(r)) return;
    if (reducing) {
      if (mine > 0) {
        for (int p = 0; p < k; p++) src[p] = p == me ? ownPart<T>(L, j, ce) : inSlot(L, s, p);
        int nd = 0;
        dst[nd++] = out;
        if (kind == MSCCLPP_COLL_ALLREDUCE)
          for (int q = 0; q < k; q++)
            if (q != me) dst[nd++] = outSlot(L, s, q);
        blockReduce<T>(dst, nd, src, k, mine, L.op, k);
      }
    } else {
      for (int p = 0; p < k; p++) {
        if (p == me) continue;
        uint64_t n = recvPart<T>(L, p, j, ce, &dst[0]);
        if (n > 0) blockCopy(dst, 1, inSlot(L, s, p), n * ts);
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int p = 0; p < k && r == mscclppSuccess; p++) {
        uint8_t* d;
        if (p != me && recvPart<T>(L, p, j, ce, &d) > 0) r = giveBack(L, s, p);
      }
      if (kind == MSCCLPP_COLL_ALLREDUCE && mine > 0)
        for (int q = 0; q < k && r == mscclppSuccess; q++)
          if (q != me) r = post(L, s, q, mine * ts);
    }
    if (kind != MSCCLPP_COLL_ALLREDUCE) {
      if (anyFailed(r)) return;
      continue;
    }
    /* allreduce phase 2: every other share's chunk j, reduced by its owner */
    if (threadIdx.x == 0)
      for (int p = 0; p < k && r == mscclppSuccess; p++) {
        const uint8_t* from;
        if (p != me && sendPart<T>(L, p, j, ce, &from) > 0) r = arrive(L, p);
      }
    if (anyFailed(r)) return;
    for (int p = 0; p < k; p++) {
      if (p == me) continue;
      const uint8_t* from;
      uint64_t n = sendPart<T>(L, p, j, ce, &from); /* share p's chunk j: where it goes in my output */
      if (n == 0) continue;
      dst[0] = L.recv + (from - L.send);
      blockCopy(dst, 1, inSlot(L, s, p), n * ts);
    }
    __syncthreads();
    if (threadIdx.x == 0)
      for (int p = 0; p < k && r == mscclppSuccess; p++) {
        const uint8_t* from;
        if (p != me && sendPart<T>(L, p, j, ce, &from) > 0) r = giveBack(L, s, p);
      }
    if (anyFailed(r)) return;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < k; i += blockDim.x) {
    L.state->sent[i] = s.sent[i];
    L.state->recvd[i] = s.recvd[i];
  }
}

/* ---- send/recv ------------------------------------------------------------------------ */

/* Round j moves the j-th chunk of every lane: the lane's ops in order, each
 * cut into slots. */
__global__ void __launch_bounds__(MSCCLPP_COLL_PORT_THREADS)
    portP2pKernel(const __grid_constant__ PortLaunch L, const __grid_constant__ PortP2pList P) {
  mscclppCollTraceBlock traceBlock(L.trace);
  __shared__ Streams s;
  __shared__ uint32_t opOf[MAXP];  /* the lane's current op (P.nops: done) */
  __shared__ uint64_t offOf[MAXP]; /* bytes of it already moved */
  __shared__ uint64_t nOf[MAXP];   /* bytes of this round's chunk (0: none) */
  const int k = L.nranks;
  for (int i = threadIdx.x; i < k; i += blockDim.x) {
    s.sent[i] = L.state->sent[i];
    s.recvd[i] = L.state->recvd[i];
  }
  if (threadIdx.x == 0)
    for (uint32_t l = 0; l < P.nlanes; l++) {
      uint32_t o = 0;
      while (o < P.nops && P.ops[o].lane != (int)l) o++;
      opOf[l] = o;
      offOf[l] = 0;
    }
  __syncthreads();
  uint8_t* dst[1];
  for (uint64_t j = 0; j < P.rounds; j++) {
    mscclppResult_t r = mscclppSuccess;
    if (threadIdx.x == 0)
      for (uint32_t l = 0; l < P.nlanes; l++) {
        uint32_t o = opOf[l];
        if (o < P.nops && offOf[l] == P.ops[o].bytes) { /* next op of the lane */
          do o++;
          while (o < P.nops && P.ops[o].lane != (int)l);
          opOf[l] = o;
          offOf[l] = 0;
        }
        uint64_t left = o < P.nops ? P.ops[o].bytes - offOf[l] : 0;
        nOf[l] = left < L.slotBytes ? left : L.slotBytes;
        if (nOf[l] > 0 && P.ops[o].isSend && r == mscclppSuccess) r = reserve(L, s, P.ops[o].peer);
      }
    if (anyFailed(r)) return;
    for (uint32_t l = 0; l < P.nlanes; l++) {
      const struct mscclppCollPortP2p* op = &P.ops[opOf[l] < P.nops ? opOf[l] : 0];
      if (nOf[l] == 0 || !op->isSend) continue;
      dst[0] = outSlot(L, s, op->peer);
      blockCopy(dst, 1, op->buf + offOf[l], nOf[l]);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      for (uint32_t l = 0; l < P.nlanes && r == mscclppSuccess; l++)
        if (nOf[l] > 0 && P.ops[opOf[l]].isSend) r = post(L, s, P.ops[opOf[l]].peer, nOf[l]);
      for (uint32_t l = 0; l < P.nlanes && r == mscclppSuccess; l++)
        if (nOf[l] > 0 && !P.ops[opOf[l]].isSend) r = arrive(L, P.ops[opOf[l]].peer);
    }
    if (anyFailed(r)) return;
    for (uint32_t l = 0; l < P.nlanes; l++) {
      const struct mscclppCollPortP2p* op = &P.ops[opOf[l] < P.nops ? opOf[l] : 0];
      if (nOf[l] == 0 || op->isSend) continue;
      dst[0] = op->buf + offOf[l];
      blockCopy(dst, 1, inSlot(L, s, op->peer), nOf[l]);
    }
    __syncthreads();
    if (threadIdx.x == 0)
      for (uint32_t l = 0; l < P.nlanes; l++) {
        if (nOf[l] == 0) continue;
        if (!P.ops[opOf[l]].isSend && r == mscclppSuccess) r = giveBack(L, s, P.ops[opOf[l]].peer);
        offOf[l] += nOf[l];
      }
    if (anyFailed(r)) return;
  }
  for (int i = threadIdx.x; i < k; i += blockDim.x) {
    L.state->sent[i] = s.sent[i];
    L.state->recvd[i] = s.recvd[i];
  }
}

/* ---- dispatch ------------------------------------------------------------------------ */

#ifdef __CUDACC__ /* (tests include this file with a host compiler and call the bodies) */

typedef void (*PortKernelFn)(const PortLaunch);

static const PortKernelFn portKernels[mscclppNumTypes] = {
    portCollKernel<int8_t>,        portCollKernel<uint8_t>,       portCollKernel<int32_t>,
    portCollKernel<uint32_t>,      portCollKernel<int64_t>,       portCollKernel<uint64_t>,
    portCollKernel<__half>,        portCollKernel<float>,         portCollKernel<double>,
    portCollKernel<__nv_bfloat16>, portCollKernel<__nv_fp8_e4m3>, portCollKernel<__nv_fp8_e5m2>};

extern "C" mscclppResult_t mscclppCollPortEnqueue(const struct mscclppCollPortLaunch* launch,
                                                  const struct mscclppCollPortP2pList* p2p, void* stream,
                                                  const char** why) {
  if (p2p != NULL)
    portP2pKernel<<<1, MSCCLPP_COLL_PORT_THREADS, 0, (cudaStream_t)stream>>>(*launch, *p2p);
  else
    portKernels[launch->type]<<<1, MSCCLPP_COLL_PORT_THREADS, 0, (cudaStream_t)stream>>>(*launch);
  cudaError_t err = cudaGetLastError();
  *why = cudaGetErrorString(err);
  return err == cudaSuccess ? mscclppSuccess : mscclppUnhandledCudaError;
}

#endif /* __CUDACC__ */
