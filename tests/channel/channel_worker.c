/* SPDX-License-Identifier: MIT */
/*
 * One rank of the multi-process port-channel tests on the host backend (CPU
 * threads play the kernels), parameterised by transport: host shared memory
 * (the proxy copies with memcpy) or the network (libfabric: tcp;ofi_rxm on
 * 127.0.0.1 under mscclpp-run, or two network namespaces under
 * tests/net/netns_test.sh). The GPU counterpart is channel_worker_gpu.cu;
 * both drive the port channel through tests/channel/port_ops.h.
 *
 *   channel_worker ops shm|net|auto [maxBytes] [staged]
 *       every rank connects to every rank (itself included) with the
 *       transport (auto: ranks on different hosts must get Net, a rank with
 *       itself HostShm) and builds a port channel on each (and, over shared
 *       memory, a memory channel); then, in rounds that pair rank r with
 *       rank r ^ d (d = 0 .. nranks-1, nranks a power of two), both partners
 *       run every operation on sizes from 1 B up to maxBytes (odd sizes,
 *       unaligned source and destination offsets) and check the received
 *       bytes, and the guard bytes around them, byte for byte:
 *         port:   put+signal, putWithSignal, putWithSignalAndFlush,
 *                 put+flush+signal received by poll; puts of 1..8 bytes
 *                 twice, inside the trigger (the channel's INLINE flag, which
 *                 both transports set) and as copies (flag cleared)
 *       over shared memory:
 *         memory: put (3 threads), get (3 threads), LL16 and LL8 packets
 *                 (3 threads), single-element read/write (4, 8, 16 bytes)
 *         then 300 rounds of LL16 packets exchanged back to back through two
 *         alternating buffers with no other synchronization (buffer reuse);
 *       over the network: a script of inline and larger puts, overlapping,
 *         with and without signals, pushed back to back, must land exactly
 *         and in order (inline, copies, inline again).
 *       "staged" (net) registers the memory as GPU memory without FI_HMEM
 *       would be (mscclppNetTestForceStaging): the staging ring protocol
 *       (chunks, credits, signals applied by the receiver) runs on host
 *       memory.
 *   channel_worker errors shm
 *       bad arguments are refused naming the value; a trigger with an
 *       unregistered memory id fails on the proxy and reaches every later
 *       wait as mscclppAborted and mscclppCommGetAsyncError as the proxy's
 *       error; a communicator with live channels refuses to be destroyed.
 *   channel_worker errors net
 *       no such provider, no such interface and no such MSCCLPP_NET_SIGNAL
 *       are refused with a clear message.
 *   channel_worker kill V
 *       ranks exchange put+signal around a ring (shared memory); rank V
 *       SIGKILLs itself in the middle: every survivor's wait must return
 *       within 10 s, the async error must be mscclppRemoteError naming rank
 *       V, and teardown must work (prints SURVIVOR_OK; see
 *       tests/bootstrap/test_kill.sh).
 *   channel_worker linkdown
 *       2 ranks over the network: rank 0 streams 16 MiB putWithSignal to
 *       rank 1, which waits and acknowledges; the script takes the link
 *       down: both must report an error within MSCCLPP_TIMEOUT (+ slack) and
 *       exit; each prints "LINKDOWN_ERROR rank R status S after T s".
 *
 * Network modes exit 77 (skipped) where libfabric cannot be loaded. GPUs are
 * hidden (CUDA_VISIBLE_DEVICES="") so this runs the host backend on any
 * machine. Each rank prints "rank R: <mode> passed".
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/util.h"
#include "harness.h"
#include "mscclpp/comm.h"
#include "mscclpp/connection.h"
#include "mscclpp/memory.h"
#include "mscclpp/memory_channel.h"
#include "mscclpp/port_channel.h"
#include "port_ops.h"
#include "transport/net/net.h"

#define MAX_RANKS 64
#define TAG_CONN 11
#define TAG_PORT 12
#define TAG_MEM 13
#define GUARD 0xA5
#define THREADS 3
#define PKT_MAX_BYTES (1u << 20)

static int rank = -1, nranks = -1;
static mscclppComm_t comm;

/* Layout of each rank's buffer: SRC [0, S) | DST [S, 2S) | PKT halves
 * (memory channels only). */
static size_t S, pktHalf, total;
static uint8_t* buf;
static uint8_t** pat; /* pat[r]: the bytes rank r sends, S + 256 long */

struct peer {
  int rank;
  mscclppConnection_t conn;
  mscclppPortChannel_t port;
  mscclppMemoryChannel_t mem; /* NULL over the network */
  mscclppPortChannelDeviceHandle ph;
  mscclppMemoryChannelDeviceHandle mh;
};
static struct peer peers[MAX_RANKS];

struct sizeCase {
  uint64_t size, srcOff, dstOff;
};

/* What the port-channel protocol runs over one transport. */
struct variant {
  const char* name;
  mscclppTransport_t transport;   /* of the connections */
  mscclppTransport_t registerFor; /* of the registration */
  const struct sizeCase* cases;
  size_t ncases;
  uint64_t slack;     /* a case runs when size + offset <= maxBytes + slack */
  double pollSeconds; /* PORT_PUT_FLUSH_SIGNAL_POLL's bound */
  int memoryChannels; /* memory channels beside the port channels */
  int script;         /* the script of back-to-back puts */
};

static const struct sizeCase shmCases[] = {
    {1, 0, 0},         {1, 3, 5},         {3, 1, 2},           {8, 0, 0},           {4, 4, 8},
    {8, 1, 3},         {4, 0, 2},         {63, 7, 1},
    {4096, 0, 0},      {4097, 13, 5},     {65537, 1, 0},       {1 << 20, 0, 0},     {(1 << 20) + 7, 5, 3},
    {4 << 20, 8, 16},  {(16 << 20) + 1, 3, 1}, {64 << 20, 0, 0}, {(64 << 20) - 3, 1, 2},
};
static const struct sizeCase netCases[] = {
    {1, 0, 0},          {1, 3, 5},          {3, 1, 2},           {8, 0, 0},       {4, 4, 8},
    {8, 1, 3},          {4, 0, 2},          {7, 2, 6},           {63, 7, 1},
    {4096, 0, 0},       {4097, 13, 5},      {65537, 1, 0},       {1 << 20, 0, 0}, {(1 << 20) + 7, 5, 3},
    {4 << 20, 8, 16},   {(16 << 20) + 1, 3, 1}, {64 << 20, 0, 0}, {(256u << 20) - 64, 64, 0},
};
#define NCASES(t) (sizeof(t) / sizeof((t)[0]))

static const struct variant shmVariant = {"shm", mscclppTransportHostShm, mscclppTransportHostShm, shmCases,
                                          NCASES(shmCases), 0, 20, 1, 0};
/* registered before any connection: the provider registration happens when
 * the record is first sent (channel creation) */
static const struct variant netVariant = {"net", mscclppTransportNet, mscclppTransportNet | mscclppTransportHostShm,
                                          netCases, NCASES(netCases), 64, 30, 0, 1};
static const struct variant autoVariant = {"auto", mscclppTransportAuto, mscclppTransportNet | mscclppTransportHostShm,
                                           netCases, NCASES(netCases), 64, 30, 0, 1};

static double nowSec(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void initComm(void) {
  mscclppResult_t res = mscclppCommInitFromEnv(&comm);
  if (res != mscclppSuccess) {
    fprintf(stderr, "mscclppCommInitFromEnv: %s: %s\n", mscclppGetErrorString(res), mscclppGetLastError());
    exit(1);
  }
  mscclppCommRank(comm, &rank);
  mscclppCommSize(comm, &nranks);
}

static void makePatterns(void) {
  pat = calloc((size_t)nranks, sizeof(*pat));
  for (int r = 0; r < nranks; r++) {
    pat[r] = malloc(S + 256);
    uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(r + 1);
    for (size_t i = 0; i < S + 256; i += 8) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      size_t n = S + 256 - i < 8 ? S + 256 - i : 8;
      memcpy(pat[r] + i, &x, n);
    }
  }
}

/* ---- setup / teardown ---------------------------------------------------------------- */

static mscclppRegisteredMemory_t localMem;

static void setup(size_t maxBytes, const struct variant* v) {
  S = maxBytes + 64;
  pktHalf = v->memoryChannels ? mscclppPacketBytes16(PKT_MAX_BYTES + 16) : 0;
  total = 2 * S + 2 * pktHalf;
  void* p = NULL;
  CHECK_RES(mscclppMemAlloc(comm, mscclppMemKindHostShared, total, &p), mscclppSuccess);
  if (p == NULL) exit(1);
  buf = p;
  memset(buf + S, GUARD, S);
  CHECK_RES(mscclppMemoryRegister(comm, buf, total, v->registerFor, &localMem), mscclppSuccess);
  for (int d = 0; d < nranks; d++) {
    struct peer* q = &peers[d];
    q->rank = rank ^ d;
    CHECK_RES(mscclppConnectionCreate(comm, q->rank, TAG_CONN, v->transport, &q->conn), mscclppSuccess);
    if (harnessFailures_) exit(1);
    if (v->transport != mscclppTransportHostShm) {
      mscclppTransport_t got = mscclppTransportAuto;
      CHECK_RES(mscclppConnectionTransport(q->conn, &got), mscclppSuccess);
      if (v->transport == mscclppTransportAuto && q->rank == rank) {
        /* this rank itself: same host, HostShm */
        CHECK(got == mscclppTransportHostShm);
      } else {
        CHECK(got == mscclppTransportNet);
      }
      /* what callers ask instead of the transport's name */
      int crossHost = -1, needsProgress = -1;
      CHECK_RES(mscclppConnectionHasCapability(q->conn, mscclppConnectionCapCrossHost, &crossHost), mscclppSuccess);
      CHECK_RES(mscclppConnectionHasCapability(q->conn, mscclppConnectionCapNeedsProgress, &needsProgress),
                mscclppSuccess);
      CHECK(crossHost == (got == mscclppTransportNet) && needsProgress == (got == mscclppTransportNet));
    }
    mscclppPortChannelConfig pc = MSCCLPP_PORT_CHANNEL_CONFIG_INITIALIZER;
    pc.tag = TAG_PORT;
    pc.local = localMem;
    CHECK_RES(mscclppPortChannelCreate(comm, q->conn, &pc, &q->port), mscclppSuccess);
    q->mem = NULL;
    if (v->memoryChannels) {
      mscclppMemoryChannelConfig mc = MSCCLPP_MEMORY_CHANNEL_CONFIG_INITIALIZER;
      mc.tag = TAG_MEM;
      mc.local = localMem;
      CHECK_RES(mscclppMemoryChannelCreate(comm, q->conn, &mc, &q->mem), mscclppSuccess);
    }
    if (harnessFailures_) exit(1);
    CHECK_RES(mscclppPortChannelGetDeviceHandle(q->port, &q->ph), mscclppSuccess);
    if (q->mem) {
      CHECK_RES(mscclppMemoryChannelGetDeviceHandle(q->mem, &q->mh), mscclppSuccess);
      CHECK(q->mh.sem.scope == MSCCLPP_SEMAPHORE_SCOPE_SYS); /* host backend: no gpu scope */
    }
  }
}

static void destroyChannels(void) {
  for (int d = 0; d < nranks; d++) {
    CHECK_RES(mscclppPortChannelDestroy(peers[d].port), mscclppSuccess);
    if (peers[d].mem) CHECK_RES(mscclppMemoryChannelDestroy(peers[d].mem), mscclppSuccess);
    CHECK_RES(mscclppConnectionDestroy(peers[d].conn), mscclppSuccess);
  }
}

static void teardown(void) {
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  destroyChannels();
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  CHECK_RES(mscclppMemoryDeregister(localMem), mscclppSuccess);
  CHECK_RES(mscclppMemFree(comm, buf), mscclppSuccess);
}

/* ---- "kernels": several CPU threads --------------------------------------------------- */

enum memOp { MEM_PUT, MEM_GET, MEM_LL16_PUT, MEM_LL16_UNPACK, MEM_LL8_PUT, MEM_LL8_UNPACK };

struct kernelArgs {
  const mscclppMemoryChannelDeviceHandle* h;
  enum memOp op;
  uint64_t dstOff, srcOff, bytes;
  uint32_t tid, flag;
  mscclppResult_t res;
};

static void* kernelThread(void* arg) {
  struct kernelArgs* a = arg;
  a->res = mscclppSuccess;
  switch (a->op) {
    case MEM_PUT: mscclppMemoryChannelDevicePut(a->h, a->dstOff, a->srcOff, a->bytes, a->tid, THREADS); break;
    case MEM_GET: mscclppMemoryChannelDeviceGet(a->h, a->dstOff, a->srcOff, a->bytes, a->tid, THREADS); break;
    case MEM_LL16_PUT:
      mscclppMemoryChannelDevicePutPackets(a->h, a->dstOff, a->srcOff, a->bytes, a->tid, THREADS, a->flag);
      break;
    case MEM_LL16_UNPACK:
      a->res = mscclppMemoryChannelDeviceUnpackPackets(a->h, a->dstOff, a->srcOff, a->bytes, a->tid, THREADS, a->flag);
      break;
    case MEM_LL8_PUT:
      mscclppMemoryChannelDevicePutPackets8(a->h, a->dstOff, a->srcOff, a->bytes, a->tid, THREADS, a->flag);
      break;
    case MEM_LL8_UNPACK:
      a->res = mscclppMemoryChannelDeviceUnpackPackets8(a->h, a->dstOff, a->srcOff, a->bytes, a->tid, THREADS, a->flag);
      break;
  }
  return NULL;
}

/* Run op on THREADS threads; join (which orders their writes before the
 * caller's signal). */
static mscclppResult_t launch(const mscclppMemoryChannelDeviceHandle* h, enum memOp op, uint64_t dstOff,
                              uint64_t srcOff, uint64_t bytes, uint32_t flag) {
  pthread_t th[THREADS];
  struct kernelArgs a[THREADS];
  for (uint32_t t = 0; t < THREADS; t++) {
    a[t] = (struct kernelArgs){h, op, dstOff, srcOff, bytes, t, flag, mscclppSuccess};
    pthread_create(&th[t], NULL, kernelThread, &a[t]);
  }
  mscclppResult_t res = mscclppSuccess;
  for (uint32_t t = 0; t < THREADS; t++) {
    pthread_join(th[t], NULL);
    if (a[t].res != mscclppSuccess) res = a[t].res;
  }
  return res;
}

/* ---- checks --------------------------------------------------------------------------- */

static int iter; /* advanced identically on every rank */

static const uint8_t* expected(int r) { return pat[r] + (iter % 251); }

/* My DST region at dstOff must hold `size` bytes of rank `from`, guards
 * intact; then reset it. */
static void checkDst(const char* what, int from, uint64_t dstOff, uint64_t size) {
  uint8_t* d = buf + S + dstOff;
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
  uint64_t lo = dstOff > 0 ? dstOff - 1 : 0, hi = dstOff + size + 1 < S ? dstOff + size + 1 : S;
  memset(buf + S + lo, GUARD, hi - lo);
}

static void fillSrc(uint64_t srcOff, uint64_t size) { memcpy(buf + srcOff, expected(rank), size); }

/* Both partners: "I am done with your data" -- and wait for theirs. The
 * flush first: my puts' sources may be overwritten only once it returns
 * (the partner's ack would imply it too, but through the other process,
 * which ThreadSanitizer cannot follow). */
static void ack(struct peer* q) {
  CHECK_RES(mscclppPortChannelDeviceFlush(&q->ph), mscclppSuccess);
  CHECK_RES(mscclppPortChannelDeviceSignal(&q->ph), mscclppSuccess);
  CHECK_RES(mscclppPortChannelDeviceWait(&q->ph), mscclppSuccess);
}

/* ---- the operations ------------------------------------------------------------------------ */

static void portOp(struct peer* q, int op, uint64_t size, uint64_t srcOff, uint64_t dstOff, double pollSeconds) {
  fillSrc(srcOff, size);
  portOpRun(&q->ph, op, srcOff, S + dstOff, size, pollSeconds);
  checkDst(portOpName[op], q->rank, dstOff, size);
  ack(q);
  iter++;
}

static uint32_t packetFlag; /* advanced identically on every rank */

static void memOp(struct peer* q, int op, uint64_t size, uint64_t srcOff, uint64_t dstOff) {
  const mscclppMemoryChannelDeviceHandle* h = &q->mh;
  fillSrc(srcOff, size);
  const char* name = "";
  switch (op) {
    case 0:
      name = "memory put";
      CHECK_RES(launch(h, MEM_PUT, S + dstOff, srcOff, size, 0), mscclppSuccess);
      mscclppMemoryChannelDeviceSignal(h);
      CHECK_RES(mscclppMemoryChannelDeviceWait(h), mscclppSuccess);
      break;
    case 1:
      name = "memory get";
      mscclppMemoryChannelDeviceSignal(h); /* my SRC is ready */
      CHECK_RES(mscclppMemoryChannelDeviceWait(h), mscclppSuccess);
      CHECK_RES(launch(h, MEM_GET, S + dstOff, srcOff, size, 0), mscclppSuccess);
      break;
    case 2:
    case 3: {
      if (size > PKT_MAX_BYTES) return;
      name = op == 2 ? "LL16 packets" : "LL8 packets";
      uint32_t flag = ++packetFlag;
      uint64_t pkt = 2 * S + (flag & 1) * pktHalf;
      CHECK_RES(launch(h, op == 2 ? MEM_LL16_PUT : MEM_LL8_PUT, pkt, srcOff, size, flag), mscclppSuccess);
      CHECK_RES(launch(h, op == 2 ? MEM_LL16_UNPACK : MEM_LL8_UNPACK, S + dstOff, pkt, size, flag), mscclppSuccess);
      break;
    }
  }
  checkDst(name, q->rank, dstOff, size);
  ack(q);
  iter++;
}

/* Element reads and writes of the peer's DST at aligned offsets. */
static void elementOp(struct peer* q) {
  const mscclppMemoryChannelDeviceHandle* h = &q->mh;
  uint64_t v64 = 0x0123456789abcdefull ^ ((uint64_t)rank << 40) ^ (uint64_t)iter;
  uint32_t v32 = 0xfeed0000u ^ (uint32_t)(rank * 977 + iter);
  mscclppVec16 v128;
  v128.lo = v64 * 3;
  v128.hi = ~v64;
  mscclppMemoryChannelDeviceWrite64(h, S + 64, v64);
  mscclppMemoryChannelDeviceWrite32(h, S + 76, v32);
  mscclppMemoryChannelDeviceWrite128(h, S + 96, v128);
  mscclppMemoryChannelDeviceSignal(h);
  CHECK_RES(mscclppMemoryChannelDeviceWait(h), mscclppSuccess);
  /* what the partner wrote into my DST */
  uint64_t p64 = 0x0123456789abcdefull ^ ((uint64_t)q->rank << 40) ^ (uint64_t)iter;
  uint32_t p32 = 0xfeed0000u ^ (uint32_t)(q->rank * 977 + iter);
  uint64_t got64, got128[2];
  uint32_t got32;
  memcpy(&got64, buf + S + 64, 8);
  memcpy(&got32, buf + S + 76, 4);
  memcpy(got128, buf + S + 96, 16);
  CHECK(got64 == p64 && got32 == p32 && got128[0] == p64 * 3 && got128[1] == ~p64);
  /* and my writes read back through the channel */
  CHECK(mscclppMemoryChannelDeviceRead64(h, S + 64) == v64);
  CHECK(mscclppMemoryChannelDeviceRead32(h, S + 76) == v32);
  mscclppVec16 r = mscclppMemoryChannelDeviceRead128(h, S + 96);
  CHECK(r.lo == v128.lo && r.hi == v128.hi);
  ack(q); /* the partner has read my values back before I reset my DST */
  memset(buf + S + 64, GUARD, 64);
  ack(q);
  /* relaxed signals and waits count on the same semaphore as the ordered
   * ones, plain and with the counters in registers */
  for (int i = 0; i < 3; i++) {
    mscclppMemoryChannelDeviceRelaxedSignal(h);
    CHECK_RES(mscclppMemoryChannelDeviceRelaxedWait(h), mscclppSuccess);
  }
  mscclppSemaphoreDeviceCounts c = mscclppMemoryChannelDeviceCountsLoad(h);
  mscclppMemoryChannelDeviceRelaxedSignalCounted(h, &c);
  mscclppMemoryChannelDeviceSignalCounted(h, &c);
  CHECK_RES(mscclppMemoryChannelDeviceRelaxedWaitCounted(h, &c), mscclppSuccess);
  CHECK_RES(mscclppMemoryChannelDeviceWaitCounted(h, &c), mscclppSuccess);
  mscclppMemoryChannelDeviceCountsStore(h, &c);
  CHECK(mscclppMemoryChannelDevicePoll(h) == 0); /* nothing left over */
  ack(q);
  iter++;
}

/* 300 back-to-back LL16 exchanges through two alternating buffers, no
 * signal in between: a round may be written only once the partner has read
 * the round before the previous one from the same buffer. */
static void packetReuse(struct peer* q) {
  const mscclppMemoryChannelDeviceHandle* h = &q->mh;
  const uint64_t size = 1000 + 7;
  for (int round = 0; round < 300; round++) {
    fillSrc(3, size);
    uint32_t flag = ++packetFlag;
    uint64_t pkt = 2 * S + (flag & 1) * pktHalf;
    CHECK_RES(launch(h, MEM_LL16_PUT, pkt, 3, size, flag), mscclppSuccess);
    CHECK_RES(launch(h, MEM_LL16_UNPACK, S + 5, pkt, size, flag), mscclppSuccess);
    if (memcmp(buf + S + 5, expected(q->rank), size) != 0) {
      fprintf(stderr, "rank %d: packet reuse round %d from rank %d: wrong data\n", rank, round, q->rank);
      CHECK(0);
      break;
    }
    iter++;
  }
  memset(buf + S, GUARD, 5 + size + 1);
  ack(q);
}

/* A script of puts pushed back to back on one channel (sizes 1..8 travel
 * inline when the handle's flag says so): overlapping, inline after and
 * before larger puts, signals with the last inline puts and alone. The
 * receiver waits for the three signals and compares its DST with the
 * script applied in order to a copy. */
struct scriptPut {
  uint32_t size, srcOff, dstOff;
  int signal; /* 1: putWithSignal; 2: put, then a signal alone */
};
static const struct scriptPut script[] = {
    {8192, 0, 0, 0},   {1, 8200, 100, 0},    {8, 8208, 4000, 0},   {4096, 9000, 2000, 0}, {5, 13200, 3000, 0},
    {3, 13300, 8190, 1}, {8, 13400, 8296, 1}, {2, 13500, 8400, 2}, {6, 13600, 8410, 0},
};
#define SCRIPT_SRC 13700u
#define SCRIPT_DST 8410u /* the last put (no signal) lands at [SCRIPT_DST, SCRIPT_DST + 6) */

static void scriptOp(struct peer* q) {
  const mscclppPortChannelDeviceHandle* h = &q->ph;
  const size_t n = sizeof(script) / sizeof(script[0]);
  memcpy(buf, expected(rank), SCRIPT_SRC);
  int signals = 0;
  for (size_t i = 0; i < n; i++) {
    const struct scriptPut* p = &script[i];
    if (p->signal == 1) {
      CHECK_RES(mscclppPortChannelDevicePutWithSignal(h, h->dst, S + p->dstOff, h->src, p->srcOff, p->size),
                mscclppSuccess);
    } else {
      CHECK_RES(mscclppPortChannelDevicePut(h, h->dst, S + p->dstOff, h->src, p->srcOff, p->size), mscclppSuccess);
      if (p->signal == 2) CHECK_RES(mscclppPortChannelDeviceSignal(h), mscclppSuccess);
    }
    signals += p->signal != 0;
  }
  for (int i = 0; i < signals; i++) CHECK_RES(mscclppPortChannelDeviceWait(h), mscclppSuccess);
  /* what the partner's script leaves, in order; the last put comes without a signal: flushed by the ack below */
  uint8_t want[SCRIPT_DST];
  memset(want, GUARD, sizeof(want));
  const uint8_t* from = expected(q->rank);
  for (size_t i = 0; i + 1 < n; i++) memcpy(want + script[i].dstOff, from + script[i].srcOff, script[i].size);
  uint8_t* d = buf + S;
  uint64_t first = 0;
  while (first < SCRIPT_DST && d[first] == want[first]) first++;
  if (first < SCRIPT_DST)
    fprintf(stderr, "rank %d: script from rank %d (inline %s): first wrong byte at DST+%llu\n", rank, q->rank,
            (h->flags & MSCCLPP_PORT_CHANNEL_FLAG_INLINE) ? "on" : "off", (unsigned long long)first);
  CHECK(first == SCRIPT_DST);
  ack(q); /* the last put (no signal) is in place once the partner has flushed and signalled */
  const struct scriptPut* last = &script[n - 1];
  CHECK(memcmp(d + last->dstOff, from + last->srcOff, last->size) == 0 && d[last->dstOff + last->size] == GUARD);
  memset(d, GUARD, last->dstOff + last->size + 1);
  ack(q); /* the partner writes my DST again only after this */
  iter++;
}

static void testOps(size_t maxBytes, const struct variant* v) {
  setup(maxBytes, v);
  makePatterns();
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  double t0 = nowSec();
  for (int d = 0; d < nranks && harnessFailures_ == 0; d++) {
    struct peer* q = &peers[d];
    int ncases = 0;
    /* my buffer is written by one partner per round: the previous one is done */
    CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
    for (size_t c = 0; c < v->ncases && harnessFailures_ == 0; c++) {
      const struct sizeCase* k = &v->cases[c];
      if (k->size + k->srcOff > maxBytes + v->slack || k->size + k->dstOff > maxBytes + v->slack) continue;
      ncases++;
      for (int op = 0; op < PORT_OPS; op++) {
        double t = nowSec();
        portOp(q, op, k->size, k->srcOff, k->dstOff, v->pollSeconds);
        if (getenv("CHANNEL_WORKER_SLOW") && nowSec() - t > 0.05) /* diagnosis of slow operations */
          printf("rank %d: slow %s %llu bytes with %d: %.3f s\n", rank, portOpName[op], (unsigned long long)k->size,
                 q->rank, nowSec() - t);
      }
      if (k->size <= MSCCLPP_TRIGGER_INLINE_MAX) {
        /* the same small puts as copies: both transports carry them inline
         * unless the handle says otherwise */
        CHECK(q->ph.flags & MSCCLPP_PORT_CHANNEL_FLAG_INLINE);
        q->ph.flags &= ~MSCCLPP_PORT_CHANNEL_FLAG_INLINE;
        for (int op = 0; op < PORT_OPS; op++) portOp(q, op, k->size, k->srcOff, k->dstOff, v->pollSeconds);
        q->ph.flags |= MSCCLPP_PORT_CHANNEL_FLAG_INLINE;
      }
      if (v->memoryChannels)
        for (int op = 0; op < 4; op++) memOp(q, op, k->size, k->srcOff, k->dstOff);
    }
    if (v->memoryChannels) {
      elementOp(q);
      packetReuse(q);
    }
    if (v->script && maxBytes + 64 >= SCRIPT_SRC) {
      scriptOp(q);
      q->ph.flags &= ~MSCCLPP_PORT_CHANNEL_FLAG_INLINE;
      scriptOp(q);
      q->ph.flags |= MSCCLPP_PORT_CHANNEL_FLAG_INLINE;
      scriptOp(q);
    }
    printf("rank %d: partner %d over %s: %d sizes x %d port operations%s: %s\n", rank, q->rank, v->name, ncases,
           PORT_OPS, v->memoryChannels ? ", 4 memory operations, elements, packet reuse" : v->script ? ", script" : "",
           harnessFailures_ ? "FAILED" : "ok");
    fflush(stdout);
  }
  printf("rank %d: %d partners in %.2f s\n", rank, nranks, nowSec() - t0);
  mscclppResult_t async = mscclppInternalError;
  CHECK_RES(mscclppCommGetAsyncError(comm, &async), mscclppSuccess);
  CHECK(async == mscclppSuccess);
  teardown();
  for (int r = 0; r < nranks; r++) free(pat[r]);
  free(pat);
}

/* ---- errors over shared memory ---------------------------------------------------------------------------- */

static void testErrors(void) {
  setup(4096, &shmVariant);
  struct peer* q = &peers[nranks > 1 ? 1 : 0];
  mscclppPortChannel_t ch = NULL;
  mscclppPortChannelConfig pc = MSCCLPP_PORT_CHANNEL_CONFIG_INITIALIZER;
  CHECK_RES(mscclppPortChannelCreate(comm, q->conn, &pc, &ch), mscclppInvalidArgument); /* local NULL */
  CHECK(strstr(mscclppGetLastError(), "local is NULL") != NULL);
  pc.structSize = 8;
  pc.local = localMem;
  CHECK_RES(mscclppPortChannelCreate(comm, q->conn, &pc, &ch), mscclppInvalidArgument);
  CHECK(strstr(mscclppGetLastError(), "structSize is 8") != NULL);
  pc.structSize = sizeof(pc);
  pc.semaphoreMem = (mscclppPortSemaphoreMem)42;
  CHECK_RES(mscclppPortChannelCreate(comm, q->conn, &pc, &ch), mscclppInvalidArgument);
  CHECK(strstr(mscclppGetLastError(), "semaphoreMem 42") != NULL);
  pc.semaphoreMem = mscclppPortSemaphoreHostPinned; /* needs a GPU */
  CHECK_RES(mscclppPortChannelCreate(comm, q->conn, &pc, &ch), mscclppInvalidUsage);
  CHECK_RES(mscclppPortChannelCreate(NULL, q->conn, &pc, &ch), mscclppInvalidArgument);
  CHECK(ch == NULL);
  /* Live channels keep the communicator. */
  CHECK_RES(mscclppCommDestroy(comm), mscclppInvalidUsage);
  CHECK(strstr(mscclppGetLastError(), "still alive") != NULL);
  /* A put of a memory id nobody registered: the proxy fails, raises the
   * abort, and every later wait returns mscclppAborted. */
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  if (rank == 0) {
    CHECK_RES(mscclppPortChannelDevicePut(&q->ph, 500, 0, q->ph.src, 0, 8), mscclppSuccess);
    CHECK_RES(mscclppPortChannelDeviceFlush(&q->ph), mscclppAborted);
    mscclppResult_t async = mscclppSuccess;
    CHECK_RES(mscclppCommGetAsyncError(comm, &async), mscclppSuccess);
    CHECK(async == mscclppInvalidArgument);
    CHECK(strstr(mscclppGetLastError(), "memory id 500") != NULL);
    CHECK_RES(mscclppPortChannelDeviceWait(&q->ph), mscclppAborted);
  } else {
    /* an offset the trigger cannot carry is refused on the device side */
    CHECK_RES(mscclppPortChannelDevicePut(&q->ph, q->ph.dst, 1ull << 33, q->ph.src, 0, 8), mscclppInvalidArgument);
    mscclppResult_t async = mscclppSuccess;
    CHECK_RES(mscclppCommGetAsyncError(comm, &async), mscclppSuccess);
    CHECK(async == mscclppInvalidArgument);
    CHECK(strstr(mscclppGetLastError(), "dstOffset") != NULL);
  }
  mscclppResult_t async = mscclppSuccess;
  CHECK_RES(mscclppCommGetAsyncError(comm, &async), mscclppSuccess);
  CHECK(async != mscclppSuccess);
  teardown();
}

/* ---- errors over the network ---------------------------------------------------------------------- */

static void testNetErrors(void) {
  int peer = rank ^ 1;
  mscclppConnection_t c = NULL;
  /* A Net registration whose record is sent before any network connection:
   * the record serves the same-host transports (no NET section yet). */
  void* p = NULL;
  CHECK_RES(mscclppMemAlloc(comm, mscclppMemKindHostShared, 4096, &p), mscclppSuccess);
  mscclppRegisteredMemory_t m = NULL;
  CHECK_RES(mscclppMemoryRegister(comm, p, 4096, mscclppTransportNet, &m), mscclppSuccess);
  uint8_t rec[MSCCLPP_MEMORY_RECORD_MAX_BYTES];
  size_t n = 0;
  CHECK_RES(mscclppMemorySerialize(m, rec, sizeof(rec), &n), mscclppSuccess);
  /* No such provider (both ranks fail before exchanging anything Net). */
  setenv("MSCCLPP_NET_PROVIDER", "no-such-provider", 1);
  CHECK_RES(mscclppConnectionCreate(comm, peer, 41, mscclppTransportNet, &c), mscclppInvalidUsage);
  CHECK(strstr(mscclppGetLastError(), "no-such-provider") != NULL);
  printf("rank %d: no provider: %s\n", rank, mscclppGetLastError());
  /* An interface that does not exist. */
  setenv("MSCCLPP_NET_PROVIDER", "tcp;ofi_rxm", 1);
  setenv("MSCCLPP_NET_IFNAME", "=no-such-if0", 1);
  CHECK_RES(mscclppConnectionCreate(comm, peer, 43, mscclppTransportNet, &c), mscclppInvalidUsage);
  CHECK(strstr(mscclppGetLastError(), "no-such-if0") != NULL);
  printf("rank %d: no interface: %s\n", rank, mscclppGetLastError());
  unsetenv("MSCCLPP_NET_IFNAME");
  /* A signal mode that does not exist. */
  setenv("MSCCLPP_NET_SIGNAL", "sometimes", 1);
  CHECK_RES(mscclppConnectionCreate(comm, peer, 45, mscclppTransportNet, &c), mscclppInvalidArgument);
  CHECK(strstr(mscclppGetLastError(), "MSCCLPP_NET_SIGNAL='sometimes'") != NULL);
  printf("rank %d: bad signal mode: %s\n", rank, mscclppGetLastError());
  unsetenv("MSCCLPP_NET_SIGNAL");
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  CHECK_RES(mscclppMemoryDeregister(m), mscclppSuccess);
  CHECK_RES(mscclppMemFree(comm, p), mscclppSuccess);
}

/* ---- kill ------------------------------------------------------------------------------ */

static int testKill(int victim) {
  setup(1 << 16, &shmVariant);
  struct peer* next = NULL;
  struct peer* prev = NULL;
  for (int d = 0; d < nranks; d++) {
    if (peers[d].rank == (rank + 1) % nranks) next = &peers[d];
    if (peers[d].rank == (rank + nranks - 1) % nranks) prev = &peers[d];
  }
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  for (int it = 0; it < 100000; it++) {
    if (rank == victim && it == 50) {
      printf("rank %d: killing myself in the middle of transfer %d\n", rank, it);
      fflush(stdout);
      struct timespec ts = {0, 300000000L}; /* the others are waiting by now */
      nanosleep(&ts, NULL);
      raise(SIGKILL);
    }
    /* put into next's DST (next's prev slot), then wait for prev's put */
    mscclppResult_t res = mscclppPortChannelDevicePutWithSignal(&next->ph, next->ph.dst, S, next->ph.src, 0, 4096);
    double t0 = nowSec();
    if (res == mscclppSuccess) res = mscclppPortChannelDeviceWait(&prev->ph);
    if (res == mscclppSuccess) res = mscclppPortChannelDeviceSignal(&prev->ph); /* credit: prev may send again */
    if (res == mscclppSuccess) res = mscclppPortChannelDeviceWait(&next->ph);
    if (res == mscclppSuccess) continue;
    double waited = nowSec() - t0;
    mscclppResult_t async = mscclppSuccess;
    CHECK_RES(mscclppCommGetAsyncError(comm, &async), mscclppSuccess);
    char want[32];
    snprintf(want, sizeof(want), "rank %d", victim);
    const char* why = mscclppGetLastError();
    printf("rank %d: transfer %d: %s after %.2f s; async error %s: %s\n", rank, it, mscclppGetErrorString(res), waited,
           mscclppGetErrorString(async), why);
    CHECK(res == mscclppAborted);
    CHECK(async == mscclppRemoteError);
    CHECK(strstr(why, want) != NULL);
    CHECK(waited < 10.0);
    /* teardown works after the loss */
    destroyChannels();
    CHECK_RES(mscclppMemoryDeregister(localMem), mscclppSuccess);
    CHECK_RES(mscclppMemFree(comm, buf), mscclppSuccess);
    CHECK_RES(mscclppCommDestroy(comm), mscclppSuccess);
    if (harnessFailures_ == 0) printf("SURVIVOR_OK rank %d after %.2f s\n", rank, waited);
    return harnessFailures_ == 0 ? 0 : 1;
  }
  printf("rank %d: FAIL: every transfer succeeded although rank %d should have died\n", rank, victim);
  return 1;
}

/* ---- the link goes down during a transfer ------------------------------------------ */

static void testLinkDown(void) {
  const size_t size = 16u << 20;
  setup(size, &netVariant);
  struct peer* q = &peers[1];
  memset(buf, 0x5a, size);
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  printf("LINKDOWN_READY rank %d\n", rank);
  fflush(stdout);
  double t0 = nowSec(), failAt = 0;
  mscclppResult_t res = mscclppSuccess;
  long rounds = 0;
  for (;;) {
    if (rank == 0) {
      res = mscclppPortChannelDevicePutWithSignalAndFlush(&q->ph, q->ph.dst, S, q->ph.src, 0, size);
      if (res == mscclppSuccess) res = mscclppPortChannelDeviceWait(&q->ph);
    } else {
      res = mscclppPortChannelDeviceWait(&q->ph);
      if (res == mscclppSuccess) res = mscclppPortChannelDeviceSignal(&q->ph);
    }
    if (res != mscclppSuccess) break;
    rounds++;
    t0 = nowSec(); /* time from the last good round */
  }
  failAt = nowSec();
  printf("LINKDOWN_ERROR rank %d status %s after %.1f s (%ld good rounds): %s\n", rank, mscclppGetErrorString(res),
         failAt - t0, rounds, mscclppGetLastError());
  fflush(stdout);
  mscclppResult_t async = mscclppSuccess;
  (void)mscclppCommGetAsyncError(comm, &async);
  printf("rank %d: async error %s\n", rank, mscclppGetErrorString(async));
  /* Teardown must not hang (each wait is bounded). */
  for (int d = 0; d < nranks; d++) {
    (void)mscclppPortChannelDestroy(peers[d].port);
    (void)mscclppConnectionDestroy(peers[d].conn);
  }
  printf("LINKDOWN_TEARDOWN rank %d after %.1f s\n", rank, nowSec() - failAt);
  fflush(stdout);
  _exit(0); /* the bootstrap's peer may be unreachable: do not wait for it */
}

static const struct variant* variantNamed(const char* name) {
  if (name && strcmp(name, "shm") == 0) return &shmVariant;
  if (name && strcmp(name, "net") == 0) return &netVariant;
  if (name && strcmp(name, "auto") == 0) return &autoVariant;
  return NULL;
}

static int usage(void) {
  fprintf(stderr, "usage: channel_worker ops shm|net|auto [maxBytes] [staged] | errors shm|net | kill V | linkdown\n");
  return 2;
}

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  const char* mode = argv[1];
  const struct variant* v = NULL;
  if (strcmp(mode, "ops") == 0 || strcmp(mode, "errors") == 0) {
    v = variantNamed(argc > 2 ? argv[2] : NULL);
    if (v == NULL || (strcmp(mode, "errors") == 0 && v == &autoVariant)) return usage();
  } else if (strcmp(mode, "kill") == 0) {
    v = &shmVariant;
  } else if (strcmp(mode, "linkdown") == 0) {
    v = &netVariant;
  } else {
    return usage();
  }
  setenv("CUDA_VISIBLE_DEVICES", "", 1); /* the host backend, also on a GPU machine */
  if (v->registerFor & mscclppTransportNet && !mscclppNetLibAvailable()) {
    printf("SKIP: %s\n", mscclppNetLibError());
    return 77;
  }
  initComm();
  if (nranks > MAX_RANKS || (nranks & (nranks - 1)) != 0) {
    fprintf(stderr, "rank %d: needs a power of two of at most %d ranks\n", rank, MAX_RANKS);
    return 2;
  }
  if (strcmp(mode, "kill") == 0) return testKill(argc > 2 ? atoi(argv[2]) : 1);
  if (strcmp(mode, "linkdown") == 0) testLinkDown(); /* does not return */
  if (strcmp(mode, "ops") == 0) {
    size_t maxBytes = argc > 3 ? (size_t)strtoull(argv[3], NULL, 0) : v == &shmVariant ? (size_t)64 << 20 : (size_t)1 << 20;
    if (argc > 4 && strcmp(argv[4], "staged") == 0) mscclppNetTestForceStaging(1);
#if defined(__SANITIZE_THREAD__)
    /* ThreadSanitizer checks every byte memcpy/memcmp touch: sizes up to
     * 1 MiB show the races as well as 64 MiB would, in a fraction of the time */
    if (v == &shmVariant && maxBytes > ((size_t)1 << 20)) {
      printf("rank %d: ThreadSanitizer build: sizes capped at 1 MiB\n", rank);
      maxBytes = (size_t)1 << 20;
    }
#endif
    testOps(maxBytes, v);
  } else if (v == &shmVariant) {
    testErrors();
  } else {
    testNetErrors();
  }
  mscclppResult_t res = mscclppCommDestroy(comm);
  if (res != mscclppSuccess) fprintf(stderr, "rank %d: mscclppCommDestroy: %s\n", rank, mscclppGetLastError());
  int ok = harnessFailures_ == 0 && res == mscclppSuccess;
  printf("rank %d: %s %s %s\n", rank, mode, v->name, ok ? "passed" : "FAILED");
  fflush(stdout);
  return ok ? 0 : 1;
}
