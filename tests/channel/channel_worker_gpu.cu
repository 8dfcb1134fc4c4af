/* SPDX-License-Identifier: MIT */
/*
 * One rank of the GPU channel tests, started by mscclpp-run (ranks share the
 * GPUs round-robin by local rank; run them under MPS so that kernels of
 * different ranks run at the same time):
 *
 *   mscclpp-run -n N --mps -- channel_worker_gpu gpu [quick]
 *
 * Every rank builds a CudaIpc connection, a port channel and a memory
 * channel (and a port channel whose inbound semaphore is in pinned host
 * memory) to every rank, itself included, over one cudaMalloc buffer
 * (SRC | DST | two packet halves). In rounds pairing rank r with r ^ d
 * (N a power of two), both partners run, for sizes from 1 B to 64 MiB
 * (16 MiB with 4 ranks; 256 KiB in quick mode) with odd sizes and unaligned
 * offsets, one kernel per operation, and check the partner's bytes and the
 * guard bytes around them on the host, byte for byte:
 *   port:   put+signal, putWithSignal, putWithSignalAndFlush,
 *           put+flush+signal received by poll, putWithSignal through the
 *           host-pinned semaphore; the receiving kernel itself compares
 *           the bytes right after its wait returns (a signal that overtakes
 *           its data fails there, whatever happens later)
 *   memory: put and get (one block of 512 threads), LL16 and LL8 packets,
 *           element write/read of 4, 8 and 16 bytes
 * then 2000 rounds (200 quick) of LL16 packets exchanged back to back by
 * 4 blocks through two alternating buffers with no other synchronization,
 * data generated and checked in the kernel (packets under concurrent
 * reuse). Exits 77 without a GPU. Each rank prints "rank R: gpu passed".
 *
 * compute-sanitizer: mscclpp-run -n 2 --mps -- compute-sanitizer --tool memcheck channel_worker_gpu gpu quick
 *
 *   MSCCLPP_NET_PROVIDER='tcp;ofi_rxm' MSCCLPP_NET_IFNAME==lo \
 *     mscclpp-run -n 2 --mps -- channel_worker_gpu net [MAXBYTES]
 *
 * GPU memory over the network transport through the staging path (a
 * provider without FI_HMEM, e.g. tcp;ofi_rxm), 2 ranks: each registers
 * cudaMalloc memory (SRC | DST) for transport Net, connects to the other
 * rank with Net and builds a port channel; for sizes from 1 B to MAXBYTES
 * (odd sizes and offsets, several 1 MiB staging chunks at the top) both
 * ranks run, one kernel per operation, put+signal, putWithSignal,
 * putWithSignalAndFlush and put+flush+signal (received by a wait); the
 * receiving kernel compares its DST with the expected bytes right after its
 * wait returns (a semaphore raised before the last chunk is in GPU memory
 * fails there), and the host checks the guard bytes. Puts of 1..8 bytes
 * run twice: inside the trigger (the handle's INLINE flag, which Net sets;
 * the bytes and the signal travel as one staging message) and as copies.
 * Prints "rank R: gpu staged passed".
 *
 * The port operations are tests/channel/port_ops.h's, which the host
 * backend's channel_worker.c runs too.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "mscclpp/comm.h"
#include "mscclpp/connection.h"
#include "mscclpp/memory.h"
#include "mscclpp/memory_channel.h"
#include "mscclpp/port_channel.h"
#include "port_ops.h"

#define MAX_RANKS 16
#define TAG_CONN 21
#define TAG_PORT 22
#define TAG_MEM 23
#define TAG_PORT_HOST 24
#define GUARD 0xA5
#define PKT_MAX_BYTES (256u << 10)
#define THREADS 512

#define CUDA_CHECK(expr)                                                                                \
  do {                                                                                                  \
    cudaError_t e_ = (expr);                                                                            \
    if (e_ != cudaSuccess) {                                                                            \
      fprintf(stderr, "rank %d: %s:%d: %s: %s\n", rank, __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
      harnessFailures_++;                                                                               \
    }                                                                                                   \
  } while (0)

static int rank = -1, nranks = -1;
static mscclppComm_t comm;
static size_t S, pktHalf, total;
static uint8_t* dbuf; /* device */
static uint8_t* hbuf; /* host staging */
static uint8_t** pat;
static cudaStream_t stream;
static int* dStatus; /* device: per-op result / error count */
static unsigned long long* dFirstBad; /* device: the port kernel's first wrong byte (~0: none) */
static uint8_t* dExpect;              /* device: the bytes the partner sends in this op */
static mscclppRegisteredMemory_t localMem;

struct peer {
  int rank;
  mscclppConnection_t conn;
  mscclppPortChannel_t port, portDev;
  mscclppMemoryChannel_t mem;
  mscclppPortChannelDeviceHandle ph, phDev;
  mscclppMemoryChannelDeviceHandle mh;
};
static struct peer peers[MAX_RANKS];

/* ---- kernels ---------------------------------------------------------------------------- */

/* FIFO order against the kernel's own stores (MSCCLPP_PORT_CHANNEL_FLAG_STORE):
 * a copy of decoy bytes over the whole range, a copy of the right bytes
 * [8, size), then an 8-byte putWithSignal of the right first 8 bytes, which
 * the kernel stores itself while the decoy copy may still be in flight; the
 * proxy must write them again behind it. The decoy is my own source 8 bytes
 * further on or back (a shifted pattern: other bytes), `decoy` its offset.
 * Sizes > 8. */
#define PORT_OVERWRITE 100

__device__ mscclppResult_t portOp(mscclppPortChannelDeviceHandle* hp, int op, uint64_t dstOff, uint64_t srcOff,
                                  uint64_t size, uint64_t decoy) {
  mscclppPortChannelDeviceHandle h = *hp;
  mscclppResult_t r = mscclppSuccess;
  if (op == PORT_OVERWRITE) {
    r = mscclppPortChannelDevicePut(&h, h.dst, dstOff, h.src, decoy, size);
    if (r == mscclppSuccess) r = mscclppPortChannelDevicePut(&h, h.dst, dstOff + 8, h.src, srcOff + 8, size - 8);
    if (r == mscclppSuccess) r = mscclppPortChannelDevicePutWithSignal(&h, h.dst, dstOff, h.src, srcOff, 8);
  } else {
    r = portOpIssue(&h, op, srcOff, dstOff, size);
  }
  if (r == mscclppSuccess) {
    if (op == PORT_PUT_FLUSH_SIGNAL_POLL) {
      mscclppWaitState st = MSCCLPP_WAIT_STATE_INIT;
      while (!mscclppPortChannelDevicePoll(&h)) {
        r = mscclppWaitStep(&h.inbound.wait, &st, MSCCLPP_DEVICE_ERROR_TIMEOUT_SEMAPHORE, 0);
        if (r != mscclppSuccess) break;
      }
      if (r == mscclppSuccess) mscclppWaitEnd(&h.inbound.wait, &st);
    } else {
      r = mscclppPortChannelDeviceWait(&h);
    }
  }
  return r;
}

/* Thread 0 runs the operation; once its wait returned, the whole block
 * compares the received bytes (my DST at dstOff, a pointer into my buffer)
 * with `expect` and records the first wrong index in *firstBad: a signal
 * that overtakes its data fails here, before anything else can touch DST. */
__global__ void portKernel(mscclppPortChannelDeviceHandle h, int op, uint64_t dstOff, uint64_t srcOff,
                           uint64_t size, uint64_t decoy, const volatile uint8_t* dst, const uint8_t* expect,
                           unsigned long long* firstBad, int* status) {
  __shared__ int res;
  if (threadIdx.x == 0) {
    res = (int)portOp(&h, op, dstOff, srcOff, size, decoy);
    *status = res;
  }
  __syncthreads();
  if (res != 0) return;
  for (uint64_t i = threadIdx.x; i < size; i += blockDim.x)
    if (dst[i] != expect[i]) {
      atomicMin(firstBad, (unsigned long long)i);
      break;
    }
}

/* "I am done with your data" -- and wait for the partner's. */
__global__ void ackKernel(mscclppPortChannelDeviceHandle h, int* status) {
  mscclppResult_t r = mscclppPortChannelDeviceFlush(&h);
  if (r == mscclppSuccess) r = mscclppPortChannelDeviceSignal(&h);
  if (r == mscclppSuccess) r = mscclppPortChannelDeviceWait(&h);
  *status = (int)r;
}

enum { MEM_PUT, MEM_GET, MEM_LL16, MEM_LL8, MEM_OPS };

__global__ void memKernel(mscclppMemoryChannelDeviceHandle h, int op, uint64_t dstOff, uint64_t srcOff,
                          uint64_t size, uint64_t pktOff, uint32_t flag, int* status) {
  __shared__ int res;
  uint32_t tid = threadIdx.x, n = blockDim.x;
  if (tid == 0) res = 0;
  __syncthreads();
  switch (op) {
    case MEM_PUT:
      mscclppMemoryChannelDevicePut(&h, dstOff, srcOff, size, tid, n);
      __syncthreads();
      if (tid == 0) {
        mscclppMemoryChannelDeviceSignal(&h);
        res = (int)mscclppMemoryChannelDeviceWait(&h);
      }
      break;
    case MEM_GET:
      if (tid == 0) {
        mscclppMemoryChannelDeviceSignal(&h); /* my SRC is ready */
        res = (int)mscclppMemoryChannelDeviceWait(&h);
      }
      __syncthreads();
      if (res == 0) mscclppMemoryChannelDeviceGet(&h, dstOff, srcOff, size, tid, n);
      break;
    case MEM_LL16: {
      mscclppMemoryChannelDevicePutPackets(&h, pktOff, srcOff, size, tid, n, flag);
      mscclppResult_t r = mscclppMemoryChannelDeviceUnpackPackets(&h, dstOff, pktOff, size, tid, n, flag);
      if (r != mscclppSuccess) atomicExch(&res, (int)r);
      break;
    }
    default: {
      mscclppMemoryChannelDevicePutPackets8(&h, pktOff, srcOff, size, tid, n, flag);
      mscclppResult_t r = mscclppMemoryChannelDeviceUnpackPackets8(&h, dstOff, pktOff, size, tid, n, flag);
      if (r != mscclppSuccess) atomicExch(&res, (int)r);
      break;
    }
  }
  __syncthreads();
  if (tid == 0) *status = res;
}

/* Element writes into the partner's DST, then read-back through the
 * channel; out[0..3] = the read-backs (64, 32, 128 lo, 128 hi). */
__global__ void elementKernel(mscclppMemoryChannelDeviceHandle h, uint64_t base, uint64_t v64, uint32_t v32,
                              uint64_t* out, int* status) {
  if (threadIdx.x != 0) return;
  mscclppVec16 v;
  v.x = (uint32_t)(v64 * 3);
  v.y = (uint32_t)((v64 * 3) >> 32);
  v.z = (uint32_t)~v64;
  v.w = (uint32_t)(~v64 >> 32);
  mscclppMemoryChannelDeviceWrite64(&h, base, v64);
  mscclppMemoryChannelDeviceWrite32(&h, base + 12, v32);
  mscclppMemoryChannelDeviceWrite128(&h, base + 32, v);
  mscclppMemoryChannelDeviceSignal(&h);
  int r = (int)mscclppMemoryChannelDeviceWait(&h);
  out[0] = mscclppMemoryChannelDeviceRead64(&h, base);
  out[1] = mscclppMemoryChannelDeviceRead32(&h, base + 12);
  mscclppVec16 got = mscclppMemoryChannelDeviceRead128(&h, base + 32);
  out[2] = (uint64_t)got.x | (uint64_t)got.y << 32;
  out[3] = (uint64_t)got.z | (uint64_t)got.w << 32;
  *status = r;
}

__device__ uint8_t reuseByte(int r, uint32_t round, uint64_t i) {
  return (uint8_t)((i * 131u) ^ (uint64_t)(r * 77) ^ (round * 29u) ^ (i >> 8));
}

/* `rounds` LL16 exchanges back to back through alternating halves; every
 * thread generates the source bytes of its own packets, puts them, unpacks
 * the partner's and checks them. *errors counts wrong bytes. */
__global__ void packetReuseKernel(mscclppMemoryChannelDeviceHandle h, int me, int partner, uint64_t srcOff,
                                  uint64_t dstOff, uint64_t pktBase, uint64_t pktHalfBytes, uint64_t size,
                                  uint32_t firstFlag, uint32_t rounds, int* errors, int* status) {
  uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x, n = gridDim.x * blockDim.x;
  uint64_t npk = mscclppPacketCount16(size);
  int bad = 0;
  for (uint32_t round = 0; round < rounds; round++) {
    uint32_t flag = firstFlag + round;
    uint64_t pkt = pktBase + (flag & 1) * pktHalfBytes;
    for (uint64_t p = tid; p < npk; p += n)
      for (uint64_t b = p * 8; b < p * 8 + 8 && b < size; b++) h.src[srcOff + b] = reuseByte(me, round, b);
    mscclppMemoryChannelDevicePutPackets(&h, pkt, srcOff, size, tid, n, flag);
    mscclppResult_t r = mscclppMemoryChannelDeviceUnpackPackets(&h, dstOff, pkt, size, tid, n, flag);
    if (r != mscclppSuccess) {
      atomicExch(status, (int)r);
      return;
    }
    for (uint64_t p = tid; p < npk; p += n)
      for (uint64_t b = p * 8; b < p * 8 + 8 && b < size; b++) bad += h.src[dstOff + b] != reuseByte(partner, round, b);
  }
  if (bad) atomicAdd(errors, bad);
}

/* ---- host side ------------------------------------------------------------------------------ */

static void initComm(void) {
  mscclppResult_t res = mscclppCommInitFromEnv(&comm);
  if (res != mscclppSuccess) {
    fprintf(stderr, "mscclppCommInitFromEnv: %s: %s\n", mscclppGetErrorString(res), mscclppGetLastError());
    exit(1);
  }
  mscclppCommRank(comm, &rank);
  mscclppCommSize(comm, &nranks);
}

static void setup(size_t maxBytes) {
  int ndev = 0, localRank = 0;
  CUDA_CHECK(cudaGetDeviceCount(&ndev));
  CHECK_RES(mscclppCommLocalRank(comm, &localRank), mscclppSuccess);
  CUDA_CHECK(cudaSetDevice(localRank % ndev));
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CUDA_CHECK(cudaMalloc(&dStatus, 64 * sizeof(int) + 4 * sizeof(uint64_t)));
  S = maxBytes + 64;
  pktHalf = mscclppPacketBytes16(PKT_MAX_BYTES + 16);
  total = 2 * S + 2 * pktHalf;
  void* p = NULL;
  CHECK_RES(mscclppMemAlloc(comm, mscclppMemKindDevice, total, &p), mscclppSuccess);
  if (p == NULL) exit(1);
  dbuf = (uint8_t*)p;
  CUDA_CHECK(cudaMemset(dbuf + S, GUARD, S));
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaMalloc(&dFirstBad, sizeof(*dFirstBad)));
  CUDA_CHECK(cudaMalloc(&dExpect, S));
  CUDA_CHECK(cudaMallocHost(&hbuf, S));
  CHECK_RES(mscclppMemoryRegister(comm, dbuf, total, mscclppTransportCudaIpc, &localMem), mscclppSuccess);
  for (int d = 0; d < nranks; d++) {
    struct peer* q = &peers[d];
    q->rank = rank ^ d;
    CHECK_RES(mscclppConnectionCreate(comm, q->rank, TAG_CONN, mscclppTransportCudaIpc, &q->conn), mscclppSuccess);
    mscclppPortChannelConfig pc = MSCCLPP_PORT_CHANNEL_CONFIG_INITIALIZER;
    pc.tag = TAG_PORT;
    pc.local = localMem;
    CHECK_RES(mscclppPortChannelCreate(comm, q->conn, &pc, &q->port), mscclppSuccess);
    pc.tag = TAG_PORT_HOST;
    pc.semaphoreMem = mscclppPortSemaphoreDevice;
    CHECK_RES(mscclppPortChannelCreate(comm, q->conn, &pc, &q->portDev), mscclppSuccess);
    mscclppMemoryChannelConfig mc = MSCCLPP_MEMORY_CHANNEL_CONFIG_INITIALIZER;
    mc.tag = TAG_MEM;
    mc.local = localMem;
    CHECK_RES(mscclppMemoryChannelCreate(comm, q->conn, &mc, &q->mem), mscclppSuccess);
    if (harnessFailures_) exit(1);
    mscclppPortChannelGetDeviceHandle(q->port, &q->ph);
    mscclppPortChannelGetDeviceHandle(q->portDev, &q->phDev);
    mscclppMemoryChannelGetDeviceHandle(q->mem, &q->mh);
    /* Both ends on one device (every rank when they share one GPU; a rank
     * with itself always), all memory device memory: gpu-scope semaphores. */
    if (ndev == 1 || q->rank == rank) CHECK(q->mh.sem.scope == MSCCLPP_SEMAPHORE_SCOPE_GPU);
  }
  pat = (uint8_t**)calloc(MAX_RANKS, sizeof(*pat));
  for (int r = 0; r < nranks; r++) {
    pat[r] = (uint8_t*)malloc(S + 256);
    uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(r + 1);
    for (size_t i = 0; i < S + 256; i += 8) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      memcpy(pat[r] + i, &x, S + 256 - i < 8 ? S + 256 - i : 8);
    }
  }
}

static void teardown(void) {
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  for (int d = 0; d < nranks; d++) {
    CHECK_RES(mscclppPortChannelDestroy(peers[d].port), mscclppSuccess);
    CHECK_RES(mscclppPortChannelDestroy(peers[d].portDev), mscclppSuccess);
    CHECK_RES(mscclppMemoryChannelDestroy(peers[d].mem), mscclppSuccess);
    CHECK_RES(mscclppConnectionDestroy(peers[d].conn), mscclppSuccess);
  }
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  CHECK_RES(mscclppMemoryDeregister(localMem), mscclppSuccess);
  CHECK_RES(mscclppMemFree(comm, dbuf), mscclppSuccess);
  CUDA_CHECK(cudaFreeHost(hbuf));
  CUDA_CHECK(cudaFree(dStatus));
  CUDA_CHECK(cudaFree(dFirstBad));
  CUDA_CHECK(cudaFree(dExpect));
  CUDA_CHECK(cudaStreamDestroy(stream));
  for (int r = 0; r < nranks; r++) free(pat[r]);
  free(pat);
}

static int iter;
static const uint8_t* expected(int r) { return pat[r] + (iter % 251); }

/* Before an op: my SRC holds my pattern at srcOff, my DST is all guard,
 * dExpect holds what the partner `from` will send; both partners are ready.
 * cudaMemcpy from pageable memory returns once the bytes are staged, before
 * the DMA into device memory has finished, and cudaMemset is asynchronous:
 * the device synchronize makes them complete before the barrier (kernels
 * and the proxy's copies run on other, non-blocking streams, which do not
 * wait for the legacy stream). */
static void prepare(int from, uint64_t srcOff, uint64_t size) {
  CUDA_CHECK(cudaMemcpy(dbuf + srcOff, expected(rank), size, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dExpect, expected(from), size, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(dFirstBad, 0xff, sizeof(*dFirstBad)));
  CUDA_CHECK(cudaDeviceSynchronize());
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
}

static int finishKernel(const char* what, int from) {
  CUDA_CHECK(cudaStreamSynchronize(stream));
  int st = -1;
  CUDA_CHECK(cudaMemcpy(&st, dStatus, sizeof(int), cudaMemcpyDeviceToHost));
  if (st != 0) fprintf(stderr, "rank %d: %s with rank %d: kernel status %d (%s)\n", rank, what, from, st,
                       mscclppGetErrorString((mscclppResult_t)st));
  CHECK(st == 0);
  return st == 0;
}

/* After an op: my DST at dstOff holds the partner's bytes, guards intact;
 * reset it; both partners are done. */
static void checkDst(const char* what, int from, uint64_t dstOff, uint64_t size) {
  uint64_t lo = dstOff > 0 ? dstOff - 1 : 0, hi = dstOff + size + 1 < S ? dstOff + size + 1 : S;
  CUDA_CHECK(cudaMemcpy(hbuf, dbuf + S + lo, hi - lo, cudaMemcpyDeviceToHost));
  const uint8_t* d = hbuf + (dstOff - lo);
  int ok = memcmp(d, expected(from), size) == 0;
  int guards = (dstOff == 0 || d[-1] == GUARD) && (dstOff + size >= S || d[size] == GUARD);
  if (!ok || !guards) {
    uint64_t first = 0;
    while (first < size && d[first] == expected(from)[first]) first++;
    fprintf(stderr, "rank %d: %s from rank %d, %llu bytes at DST+%llu: %s (first bad byte %llu)\n", rank, what, from,
            (unsigned long long)size, (unsigned long long)dstOff, ok ? "guard bytes overwritten" : "wrong data",
            (unsigned long long)first);
  }
  CHECK(ok && guards);
  CUDA_CHECK(cudaMemset(dbuf + S + lo, GUARD, hi - lo));
  CUDA_CHECK(cudaDeviceSynchronize()); /* the reset lands before the partner's next put */
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  iter++;
}

static const char* memName[MEM_OPS] = {"memory put", "memory get", "LL16 packets", "LL8 packets"};
static uint32_t packetFlag;

static void runCase(struct peer* q, uint64_t size, uint64_t srcOff, uint64_t dstOff) {
  /* CUDA IPC carries puts of up to 8 bytes inside the trigger, and the
   * kernel stores them itself; the default semaphore is in pinned host
   * memory, which the kernel polls over PCIe */
  CHECK(q->ph.flags & MSCCLPP_PORT_CHANNEL_FLAG_INLINE);
  CHECK(q->ph.flags & MSCCLPP_PORT_CHANNEL_FLAG_STORE);
  for (int op = 0; op <= PORT_OPS + 3 && harnessFailures_ == 0; op++) {
    /* op == PORT_OPS: putWithSignal through the device-memory semaphore;
     * op == PORT_OPS + 1: a small putWithSignal as a copy (inline off);
     * op == PORT_OPS + 2: a small putWithSignal written by the proxy (store off);
     * op == PORT_OPS + 3: PORT_OVERWRITE (sizes > 8) */
    if ((op == PORT_OPS + 1 || op == PORT_OPS + 2) && size > MSCCLPP_TRIGGER_INLINE_MAX) continue;
    uint64_t decoy = srcOff + 8 + size <= S ? srcOff + 8 : srcOff >= 8 ? srcOff - 8 : ~0ull;
    if (op == PORT_OPS + 3 && (size <= 8 || decoy == ~0ull)) continue;
    mscclppPortChannelDeviceHandle h = op == PORT_OPS ? q->phDev : q->ph;
    if (op == PORT_OPS + 1) h.flags &= ~(MSCCLPP_PORT_CHANNEL_FLAG_INLINE | MSCCLPP_PORT_CHANNEL_FLAG_STORE);
    if (op == PORT_OPS + 2) h.flags &= ~MSCCLPP_PORT_CHANNEL_FLAG_STORE;
    prepare(q->rank, srcOff, size);
    portKernel<<<1, THREADS, 0, stream>>>(h, op == PORT_OPS + 3 ? PORT_OVERWRITE : op >= PORT_OPS ? PORT_PUT_WITH_SIGNAL : op,
                                          S + dstOff, srcOff, size, decoy, dbuf + S + dstOff, dExpect, dFirstBad,
                                          dStatus);
    const char* name = op == PORT_OPS       ? "port putWithSignal (device-memory semaphore)"
                       : op == PORT_OPS + 1 ? "port putWithSignal (copy, inline off)"
                       : op == PORT_OPS + 2 ? "port putWithSignal (inline, written by the proxy)"
                       : op == PORT_OPS + 3 ? "port put decoy + put + 8-byte putWithSignal (FIFO order)"
                                            : portOpName[op];
    if (finishKernel(name, q->rank)) {
      unsigned long long firstBad = 0;
      CUDA_CHECK(cudaMemcpy(&firstBad, dFirstBad, sizeof(firstBad), cudaMemcpyDeviceToHost));
      if (firstBad != ~0ull)
        fprintf(stderr,
                "rank %d: %s from rank %d, %llu bytes at DST+%llu: wrong data right after the wait returned "
                "(first bad byte %llu): the signal overtook its data\n",
                rank, name, q->rank, (unsigned long long)size, (unsigned long long)dstOff, firstBad);
      CHECK(firstBad == ~0ull);
    }
    checkDst(name, q->rank, dstOff, size);
  }
  for (int op = 0; op < MEM_OPS && harnessFailures_ == 0; op++) {
    if ((op == MEM_LL16 || op == MEM_LL8) && size > PKT_MAX_BYTES) continue;
    prepare(q->rank, srcOff, size);
    uint32_t flag = ++packetFlag;
    memKernel<<<1, THREADS, 0, stream>>>(q->mh, op, S + dstOff, srcOff, size, 2 * S + (flag & 1) * pktHalf, flag,
                                         dStatus);
    finishKernel(memName[op], q->rank);
    checkDst(memName[op], q->rank, dstOff, size);
  }
}

static void elements(struct peer* q) {
  uint64_t* dOut = (uint64_t*)(dStatus + 64);
  uint64_t v64 = 0x0123456789abcdefull ^ ((uint64_t)rank << 40) ^ (uint64_t)iter;
  uint32_t v32 = 0xfeed0000u ^ (uint32_t)(rank * 977 + iter);
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  elementKernel<<<1, 32, 0, stream>>>(q->mh, S + 64, v64, v32, dOut, dStatus);
  finishKernel("elements", q->rank);
  uint64_t out[4];
  CUDA_CHECK(cudaMemcpy(out, dOut, sizeof(out), cudaMemcpyDeviceToHost));
  CHECK(out[0] == v64 && out[1] == v32 && out[2] == v64 * 3 && out[3] == ~v64);
  uint64_t p64 = 0x0123456789abcdefull ^ ((uint64_t)q->rank << 40) ^ (uint64_t)iter, got[6];
  CUDA_CHECK(cudaMemcpy(got, dbuf + S + 64, sizeof(got), cudaMemcpyDeviceToHost));
  uint32_t p32 = 0xfeed0000u ^ (uint32_t)(q->rank * 977 + iter), g32;
  memcpy(&g32, (uint8_t*)got + 12, 4);
  CHECK(got[0] == p64 && g32 == p32 && got[4] == p64 * 3 && got[5] == ~p64);
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess); /* both read back before the reset */
  CUDA_CHECK(cudaMemset(dbuf + S, GUARD, 256));
  CUDA_CHECK(cudaDeviceSynchronize());
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  iter++;
}

static void packetReuse(struct peer* q, uint32_t rounds) {
  int* dErr = dStatus + 1;
  CUDA_CHECK(cudaMemset(dStatus, 0, 2 * sizeof(int)));
  CUDA_CHECK(cudaDeviceSynchronize());
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  const uint64_t size = 4000 + 3;
  packetReuseKernel<<<4, 128, 0, stream>>>(q->mh, rank, q->rank, 1, S + 7, 2 * S, pktHalf, size, packetFlag + 1,
                                           rounds, dErr, dStatus);
  packetFlag += rounds;
  finishKernel("packet reuse", q->rank);
  int errors = -1;
  CUDA_CHECK(cudaMemcpy(&errors, dErr, sizeof(int), cudaMemcpyDeviceToHost));
  if (errors) fprintf(stderr, "rank %d: packet reuse with rank %d: %d wrong bytes\n", rank, q->rank, errors);
  CHECK(errors == 0);
  CUDA_CHECK(cudaMemset(dbuf + S, GUARD, 4096 + 64));
  CUDA_CHECK(cudaDeviceSynchronize());
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
}

struct sizeCase {
  uint64_t size, srcOff, dstOff;
};
static const struct sizeCase cases[] = {
    {1, 0, 0},          {1, 3, 5},          {3, 1, 2},        {8, 0, 0},        {4, 4, 8},
    {8, 1, 3},          {4, 0, 2},          {63, 7, 1},
    {4096, 0, 0},       {4097, 13, 5},      {65537, 1, 0},    {65536 * 4, 4, 8}, {(1 << 20) + 7, 5, 3},
    {(16 << 20) - 1, 3, 1}, {64 << 20, 0, 0}, {(64 << 20) - 3, 1, 2},
};

static void testGpu(int quick) {
  size_t maxBytes = quick ? (256u << 10) + 64 : nranks <= 2 ? (64u << 20) : (16u << 20);
  setup(maxBytes);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int d = 0; d < nranks && harnessFailures_ == 0; d++) {
    struct peer* q = &peers[d];
    int n = 0;
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]) && harnessFailures_ == 0; c++) {
      const struct sizeCase* k = &cases[c];
      if (k->size + k->srcOff > maxBytes || k->size + k->dstOff > maxBytes) continue;
      runCase(q, k->size, k->srcOff, k->dstOff);
      n++;
    }
    if (harnessFailures_ == 0) elements(q);
    if (harnessFailures_ == 0) packetReuse(q, quick ? 200 : 2000);
    printf("rank %d: partner %d: %d sizes x 9 operations, elements, packet reuse: %s\n", rank, q->rank, n,
           harnessFailures_ ? "FAILED" : "ok");
    fflush(stdout);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  printf("rank %d: %d partners in %.2f s\n", rank, nranks,
         (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9);
  mscclppResult_t async = mscclppInternalError;
  CHECK_RES(mscclppCommGetAsyncError(comm, &async), mscclppSuccess);
  if (async != mscclppSuccess) fprintf(stderr, "rank %d: async error: %s\n", rank, mscclppGetLastError());
  CHECK(async == mscclppSuccess);
  if (harnessFailures_) {
    /* a partner may still be waiting on us: do not tear down politely */
    exit(1);
  }
  teardown();
}

static void pattern(uint8_t* p, size_t n, int r, int iter) {
  uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(r + 1) + (uint64_t)iter * 0x632be59bd9b4e019ull;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    p[i] = (uint8_t)x;
  }
}

/* ---- the network transport: GPU memory through the staging path ------------------------------- */

/* 2 ranks; a Net connection to the other rank and one port channel over
 * SRC | DST in cudaMalloc memory (see the top of this file). Returns the
 * exit status. */
static int testNet(size_t maxBytes) {
  int ndev = 0, localRank = 0;
  CUDA_CHECK(cudaGetDeviceCount(&ndev));
  mscclppCommLocalRank(comm, &localRank);
  if (nranks != 2) {
    fprintf(stderr, "channel_worker_gpu net runs with 2 ranks\n");
    return 2;
  }
  CUDA_CHECK(cudaSetDevice(localRank % ndev));
  const int peer = 1 - rank;
  S = maxBytes + 64;
  void* p = NULL;
  CHECK_RES(mscclppMemAlloc(comm, mscclppMemKindDevice, 2 * S, &p), mscclppSuccess);
  dbuf = (uint8_t*)p;
  uint8_t* hexp = NULL;
  CUDA_CHECK(cudaMalloc(&dExpect, S));
  CUDA_CHECK(cudaMalloc(&dFirstBad, sizeof(*dFirstBad)));
  CUDA_CHECK(cudaMalloc(&dStatus, sizeof(int)));
  CUDA_CHECK(cudaMallocHost(&hbuf, S));
  hexp = (uint8_t*)malloc(S);
  CUDA_CHECK(cudaMemset(dbuf + S, GUARD, S));
  mscclppConnection_t conn = NULL;
  CHECK_RES(mscclppConnectionCreate(comm, peer, 51, mscclppTransportNet, &conn), mscclppSuccess);
  mscclppRegisteredMemory_t mem = NULL;
  CHECK_RES(mscclppMemoryRegister(comm, dbuf, 2 * S, mscclppTransportNet, &mem), mscclppSuccess);
  mscclppPortChannelConfig pc = MSCCLPP_PORT_CHANNEL_CONFIG_INITIALIZER;
  pc.tag = 52;
  pc.local = mem;
  mscclppPortChannel_t ch = NULL;
  CHECK_RES(mscclppPortChannelCreate(comm, conn, &pc, &ch), mscclppSuccess);
  mscclppPortChannelDeviceHandle h;
  CHECK_RES(mscclppPortChannelGetDeviceHandle(ch, &h), mscclppSuccess);
  if (harnessFailures_) return 1;

  CHECK(h.flags & MSCCLPP_PORT_CHANNEL_FLAG_INLINE);
  const uint64_t sizes[][3] = {{1, 0, 0},         {8, 0, 0},           {3, 1, 2},             {4, 4, 8},
                               {63, 7, 1},          {4097, 13, 5},         {1 << 20, 0, 0},
                               {(1 << 20) + 7, 5, 3}, {(3 << 20) + 1, 1, 2}, {16 << 20, 0, 0}, {64 << 20, 0, 0}};
  /* put+flush+signal is received by a wait here, not by polling */
  const int ops[] = {PORT_PUT_SIGNAL, PORT_PUT_WITH_SIGNAL, PORT_PUT_WITH_SIGNAL_FLUSH, PORT_PUT_FLUSH_SIGNAL};
  const int nops = (int)(sizeof(ops) / sizeof(ops[0]));
  int iter = 0;
  for (size_t c = 0; c < sizeof(sizes) / sizeof(sizes[0]) && !harnessFailures_; c++) {
    uint64_t size = sizes[c][0], srcOff = sizes[c][1], dstOff = sizes[c][2];
    if (size + srcOff > S || size + dstOff > S - 64 + 64) continue;
    /* small puts: nops inline, then nops as copies */
    const int runs = size <= MSCCLPP_TRIGGER_INLINE_MAX ? 2 * nops : nops;
    for (int run = 0; run < runs && !harnessFailures_; run++, iter++) {
      const int op = ops[run % nops];
      mscclppPortChannelDeviceHandle hOp = h;
      if (run >= nops) hOp.flags &= ~MSCCLPP_PORT_CHANNEL_FLAG_INLINE;
      pattern(hbuf, size, rank, iter); /* what I send */
      CUDA_CHECK(cudaMemcpy(dbuf + srcOff, hbuf, size, cudaMemcpyHostToDevice));
      pattern(hexp, size, peer, iter); /* what I must receive */
      CUDA_CHECK(cudaMemcpy(dExpect, hexp, size, cudaMemcpyHostToDevice));
      CUDA_CHECK(cudaMemset(dFirstBad, 0xff, sizeof(*dFirstBad)));
      portKernel<<<1, 256>>>(hOp, op, S + dstOff, srcOff, size, 0, dbuf + S + dstOff, dExpect, dFirstBad, dStatus);
      CUDA_CHECK(cudaDeviceSynchronize());
      int st = -1;
      unsigned long long bad = 0;
      CUDA_CHECK(cudaMemcpy(&st, dStatus, sizeof(st), cudaMemcpyDeviceToHost));
      CUDA_CHECK(cudaMemcpy(&bad, dFirstBad, sizeof(bad), cudaMemcpyDeviceToHost));
      if (st != 0 || bad != ~0ull)
        fprintf(stderr,
                "rank %d: %s (%s), %llu bytes: status %d, first bad byte %lld (the semaphore overtook its "
                "data?)\n",
                rank, portOpName[op], (hOp.flags & MSCCLPP_PORT_CHANNEL_FLAG_INLINE) ? "inline" : "copy",
                (unsigned long long)size, st, bad == ~0ull ? -1LL : (long long)bad);
      CHECK(st == 0 && bad == ~0ull);
      uint8_t g[2] = {GUARD, GUARD};
      if (dstOff > 0) CUDA_CHECK(cudaMemcpy(&g[0], dbuf + S + dstOff - 1, 1, cudaMemcpyDeviceToHost));
      CUDA_CHECK(cudaMemcpy(&g[1], dbuf + S + dstOff + size, 1, cudaMemcpyDeviceToHost));
      CHECK(g[0] == GUARD && g[1] == GUARD);
      CUDA_CHECK(cudaMemset(dbuf + S, GUARD, S));
      CUDA_CHECK(cudaDeviceSynchronize());
      ackKernel<<<1, 1>>>(h, dStatus);
      CUDA_CHECK(cudaDeviceSynchronize());
      CUDA_CHECK(cudaMemcpy(&st, dStatus, sizeof(st), cudaMemcpyDeviceToHost));
      CHECK(st == 0);
    }
    printf("rank %d: %llu bytes x %d operations: %s\n", rank, (unsigned long long)size, nops,
           harnessFailures_ ? "FAILED" : "ok");
  }
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  CHECK_RES(mscclppPortChannelDestroy(ch), mscclppSuccess);
  CHECK_RES(mscclppConnectionDestroy(conn), mscclppSuccess);
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  CHECK_RES(mscclppMemoryDeregister(mem), mscclppSuccess);
  CHECK_RES(mscclppMemFree(comm, dbuf), mscclppSuccess);
  CHECK_RES(mscclppCommDestroy(comm), mscclppSuccess);
  printf("rank %d: gpu staged %s\n", rank, harnessFailures_ ? "FAILED" : "passed");
  return harnessFailures_ ? 1 : 0;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "gpu";
  int quick = argc > 2 && strcmp(argv[2], "quick") == 0;
  int ndevices = 0;
  if (cudaGetDeviceCount(&ndevices) != cudaSuccess || ndevices == 0) harnessSkip("needs a GPU");
  initComm();
  if (strcmp(mode, "net") == 0) return testNet(argc > 2 ? strtoull(argv[2], NULL, 0) : (64u << 20));
  if (nranks > MAX_RANKS || (nranks & (nranks - 1)) != 0) {
    fprintf(stderr, "rank %d: needs a power of two of at most %d ranks\n", rank, MAX_RANKS);
    return 2;
  }
  if (strcmp(mode, "gpu") != 0) {
    fprintf(stderr, "usage: channel_worker_gpu gpu [quick] | net [MAXBYTES]\n");
    return 2;
  }
  testGpu(quick);
  mscclppResult_t res = mscclppCommDestroy(comm);
  if (res != mscclppSuccess) fprintf(stderr, "rank %d: mscclppCommDestroy: %s\n", rank, mscclppGetLastError());
  int ok = harnessFailures_ == 0 && res == mscclppSuccess;
  if (ok) printf("rank %d: %s passed\n", rank, mode);
  fflush(stdout);
  return ok ? 0 : 1;
}
