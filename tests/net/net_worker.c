/*
 * One rank of the network transport tests (host backend: CPU threads play
 * the kernels), started by mscclpp-run on 127.0.0.1 or by netns_test.sh in
 * two network namespaces:
 *
 *   net_worker ops MAXBYTES [staged]
 *       every rank connects to every rank (itself included) with transport
 *       Net (MSCCLPP_NET_PROVIDER / MSCCLPP_NET_IFNAME pick the provider),
 *       builds a port channel on each, and in rounds pairing rank r with
 *       r ^ d runs put+signal, putWithSignal, putWithSignalAndFlush and
 *       put+flush+signal/poll on sizes from 1 B to MAXBYTES (odd sizes and
 *       offsets), checking every received byte and the guard bytes around;
 *       puts of 1..8 bytes run twice, inside the trigger (the channel's
 *       INLINE flag, which Net must set) and as copies (flag cleared); then
 *       a script of inline and larger puts, overlapping, with and without
 *       signals, pushed back to back, must land exactly and in order (also
 *       both ways: inline and copies).
 *       "staged" registers the memory as GPU memory without FI_HMEM would
 *       be (mscclppNetTestForceStaging): the staging ring protocol (chunks,
 *       credits, signals applied by the receiver) runs on host memory.
 *   net_worker auto MAXBYTES
 *       as ops with transport Auto: ranks on different hosts (network
 *       namespaces) must get Net.
 *   net_worker errors
 *       no such provider, no such interface and no such MSCCLPP_NET_SIGNAL
 *       are refused with a clear message.
 *   net_worker linkdown
 *       2 ranks: rank 0 streams 16 MiB putWithSignal to rank 1, which waits
 *       and acknowledges; the script takes the link down: both must report
 *       an error within MSCCLPP_TIMEOUT (+ slack) and exit; each prints
 *       "LINKDOWN_ERROR rank R status S after T s".
 *
 * Each rank prints "rank R: <mode> passed".
 */
#include <sched.h>
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
#include "mscclpp/port_channel.h"
#include "port_ops.h"
#include "transport/net/net.h"

#define MAX_RANKS 16
#define TAG_CONN 31
#define TAG_PORT 32
#define GUARD 0xA5

static int rank = -1, nranks = -1;
static mscclppComm_t comm;
static size_t S; /* SRC [0, S) | DST [S, 2S) */
static uint8_t* buf;
static uint8_t** pat;
static mscclppRegisteredMemory_t localMem;

struct peer {
  int rank;
  mscclppConnection_t conn;
  mscclppPortChannel_t port;
  mscclppPortChannelDeviceHandle ph;
};
static struct peer peers[MAX_RANKS];

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
  if (nranks > MAX_RANKS || (nranks & (nranks - 1))) {
    fprintf(stderr, "net_worker needs a power of two ranks up to %d\n", MAX_RANKS);
    exit(1);
  }
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

static void setup(size_t maxBytes, mscclppTransport_t transport) {
  S = maxBytes + 64;
  void* p = NULL;
  CHECK_RES(mscclppMemAlloc(comm, mscclppMemKindHostShared, 2 * S, &p), mscclppSuccess);
  if (p == NULL) exit(1);
  buf = p;
  memset(buf + S, GUARD, S);
  /* registered before any connection: the provider registration happens
   * when the record is first sent (channel creation) */
  CHECK_RES(mscclppRegisterMemory(comm, buf, 2 * S, mscclppTransportNet | mscclppTransportHostShm, &localMem),
            mscclppSuccess);
  for (int d = 0; d < nranks; d++) {
    struct peer* q = &peers[d];
    q->rank = rank ^ d;
    CHECK_RES(mscclppConnectionCreate(comm, q->rank, TAG_CONN, transport, &q->conn), mscclppSuccess);
    if (harnessFailures_) exit(1);
    mscclppTransport_t got = mscclppTransportAuto;
    CHECK_RES(mscclppConnectionTransport(q->conn, &got), mscclppSuccess);
    if (transport == mscclppTransportAuto && q->rank == rank) {
      /* this rank itself: same host, HostShm */
      CHECK(got == mscclppTransportHostShm);
    } else {
      CHECK(got == mscclppTransportNet);
    }
    mscclppPortChannelConfig pc = MSCCLPP_PORT_CHANNEL_CONFIG_INITIALIZER;
    pc.tag = TAG_PORT;
    pc.local = localMem;
    CHECK_RES(mscclppPortChannelCreate(comm, q->conn, &pc, &q->port), mscclppSuccess);
    if (harnessFailures_) exit(1);
    CHECK_RES(mscclppPortChannelGetDeviceHandle(q->port, &q->ph), mscclppSuccess);
  }
}

static void teardown(void) {
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  for (int d = 0; d < nranks; d++) {
    CHECK_RES(mscclppPortChannelDestroy(peers[d].port), mscclppSuccess);
    CHECK_RES(mscclppConnectionDestroy(peers[d].conn), mscclppSuccess);
  }
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  CHECK_RES(mscclppDeregisterMemory(localMem), mscclppSuccess);
  CHECK_RES(mscclppMemFree(comm, buf), mscclppSuccess);
}

static int iter;
static const uint8_t* expected(int r) { return pat[r] + (iter % 251); }

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

static void ack(struct peer* q) {
  CHECK_RES(mscclppPortChannelDeviceFlush(&q->ph), mscclppSuccess);
  CHECK_RES(mscclppPortChannelDeviceSignal(&q->ph), mscclppSuccess);
  CHECK_RES(mscclppPortChannelDeviceWait(&q->ph), mscclppSuccess);
}

static void portOp(struct peer* q, int op, uint64_t size, uint64_t srcOff, uint64_t dstOff) {
  memcpy(buf + srcOff, expected(rank), size);
  portOpRun(&q->ph, op, srcOff, S + dstOff, size, 30);
  checkDst(portOpName[op], q->rank, dstOff, size);
  ack(q);
  iter++;
}

struct sizeCase {
  uint64_t size, srcOff, dstOff;
};
static const struct sizeCase cases[] = {
    {1, 0, 0},          {1, 3, 5},          {3, 1, 2},           {8, 0, 0},       {4, 4, 8},
    {8, 1, 3},          {4, 0, 2},          {7, 2, 6},           {63, 7, 1},
    {4096, 0, 0},       {4097, 13, 5},      {65537, 1, 0},       {1 << 20, 0, 0}, {(1 << 20) + 7, 5, 3},
    {4 << 20, 8, 16},   {(16 << 20) + 1, 3, 1}, {64 << 20, 0, 0}, {(256u << 20) - 64, 64, 0},
};

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

static void testOps(size_t maxBytes, mscclppTransport_t transport) {
  setup(maxBytes, transport);
  makePatterns();
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  double t0 = nowSec();
  for (int d = 0; d < nranks && harnessFailures_ == 0; d++) {
    struct peer* q = &peers[d];
    int ncases = 0;
    CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]) && harnessFailures_ == 0; c++) {
      const struct sizeCase* k = &cases[c];
      if (k->size + k->srcOff > maxBytes + 64 || k->size + k->dstOff > maxBytes + 64) continue;
      ncases++;
      for (int op = 0; op < PORT_OPS; op++) {
        double t = nowSec();
        portOp(q, op, k->size, k->srcOff, k->dstOff);
        if (getenv("NET_WORKER_SLOW") && nowSec() - t > 0.05) /* diagnosis of slow operations */
          printf("rank %d: slow %s %llu bytes with %d: %.3f s\n", rank, portOpName[op], (unsigned long long)k->size,
                 q->rank, nowSec() - t);
      }
      if (k->size <= MSCCLPP_TRIGGER_INLINE_MAX) {
        /* the same small puts as copies (the handle's flag cleared) */
        CHECK(q->ph.flags & MSCCLPP_PORT_CHANNEL_FLAG_INLINE);
        q->ph.flags &= ~MSCCLPP_PORT_CHANNEL_FLAG_INLINE;
        for (int op = 0; op < PORT_OPS; op++) portOp(q, op, k->size, k->srcOff, k->dstOff);
        q->ph.flags |= MSCCLPP_PORT_CHANNEL_FLAG_INLINE;
      }
    }
    if (maxBytes + 64 >= SCRIPT_SRC) {
      scriptOp(q);
      q->ph.flags &= ~MSCCLPP_PORT_CHANNEL_FLAG_INLINE;
      scriptOp(q);
      q->ph.flags |= MSCCLPP_PORT_CHANNEL_FLAG_INLINE;
      scriptOp(q);
    }
    printf("rank %d: partner %d: %d sizes x %d operations: %s\n", rank, q->rank, ncases, PORT_OPS,
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

/* ---- errors ---------------------------------------------------------------------- */

static void testErrors(void) {
  int peer = rank ^ 1;
  mscclppConnection_t c = NULL;
  /* A Net registration whose record is sent before any network connection:
   * the record serves the same-host transports (no NET section yet). */
  void* p = NULL;
  CHECK_RES(mscclppMemAlloc(comm, mscclppMemKindHostShared, 4096, &p), mscclppSuccess);
  mscclppRegisteredMemory_t m = NULL;
  CHECK_RES(mscclppRegisterMemory(comm, p, 4096, mscclppTransportNet, &m), mscclppSuccess);
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
  CHECK_RES(mscclppDeregisterMemory(m), mscclppSuccess);
  CHECK_RES(mscclppMemFree(comm, p), mscclppSuccess);
}

/* ---- the link goes down during a transfer ------------------------------------------ */

static void testLinkDown(void) {
  const size_t size = 16u << 20;
  setup(size, mscclppTransportNet);
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

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: net_worker ops|auto MAXBYTES [staged] | errors | linkdown\n");
    return 2;
  }
  setenv("CUDA_VISIBLE_DEVICES", "", 1); /* host backend */
  if (!mscclppNetLibAvailable()) {
    printf("SKIP: %s\n", mscclppNetLibError());
    return 77;
  }
  initComm();
  const char* mode = argv[1];
  if (strcmp(mode, "ops") == 0 || strcmp(mode, "auto") == 0) {
    size_t maxBytes = argc > 2 ? strtoull(argv[2], NULL, 0) : (1u << 20);
    if (argc > 3 && strcmp(argv[3], "staged") == 0) mscclppNetTestForceStaging(1);
    testOps(maxBytes, strcmp(mode, "auto") == 0 ? mscclppTransportAuto : mscclppTransportNet);
  } else if (strcmp(mode, "errors") == 0) {
    testErrors();
  } else if (strcmp(mode, "linkdown") == 0) {
    testLinkDown();
  } else {
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
  }
  CHECK_RES(mscclppCommDestroy(comm), mscclppSuccess);
  printf("rank %d: %s %s\n", rank, mode, harnessFailures_ ? "FAILED" : "passed");
  return harnessFailures_ ? 1 : 0;
}
