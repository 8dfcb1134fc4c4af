/* SPDX-License-Identifier: MIT */
/* Unit tests of the transport layer in one process: the ops tables, the
 * endpoint format, transport selection, connecting (to itself and between
 * two ranks of the process), write / signal / flush with exact bytes at odd
 * sizes and offsets, their errors, and a ping-pong across two connections.
 * Transports run for every one this machine can run (HostShm everywhere,
 * CudaIpc with a GPU). */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "gpu/gpu_ipc.h"
#include "harness.h"
#include "memory/loopback.h"
#include "memory/memory.h"
#include "mscclpp/connection.h"
#include "transport/net/net.h"
#include "transport/transport.h"

static struct loopback lb;
static struct loopRank rank0 = {&lb, 0}, rank1 = {&lb, 1};

static int errHas(const char* s) {
  if (strstr(mscclppGetLastError(), s) != NULL) return 1;
  fprintf(stderr, "  last error \"%s\" lacks \"%s\"\n", mscclppGetLastError(), s);
  return 0;
}

static struct mscclppMemContext* newCtx(struct loopRank* r, uint64_t hostHash) {
  struct mscclppMemConfig cfg = loopConfig(r);
  if (hostHash) {
    cfg.hostHash = hostHash;
    snprintf(cfg.hostName, sizeof(cfg.hostName), "host-%llx", (unsigned long long)hostHash);
  }
  struct mscclppMemContext* ctx = NULL;
  CHECK_RES(mscclppMemContextCreate(&cfg, &ctx), mscclppSuccess);
  return ctx;
}

/* Connect ranks a and b of this process from two threads. */
struct connectArgs {
  struct mscclppMemContext* ctx;
  int peer, tag;
  mscclppTransport_t transport;
  struct mscclppConnection* conn;
  mscclppResult_t res;
};

static void* connectThread(void* p) {
  struct connectArgs* a = p;
  a->res = mscclppConnCreate(a->ctx, a->peer, a->tag, a->transport, &a->conn);
  return NULL;
}

static void connectPair(struct mscclppMemContext* c0, struct mscclppMemContext* c1, int tag, mscclppTransport_t t0,
                        mscclppTransport_t t1, struct connectArgs* a0, struct connectArgs* a1) {
  *a0 = (struct connectArgs){.ctx = c0, .peer = 1, .tag = tag, .transport = t0};
  *a1 = (struct connectArgs){.ctx = c1, .peer = 0, .tag = tag, .transport = t1};
  pthread_t th;
  CHECK(pthread_create(&th, NULL, connectThread, a1) == 0);
  connectThread(a0);
  pthread_join(th, NULL);
}

/* ---- tables, endpoints, selection ----------------------------------------------------------- */

static void testOpsTables(void) {
  CHECK(mscclppTransportCount == 3);
  unsigned seen = 0;
  for (int i = 0; i < mscclppTransportCount; i++) {
    const struct mscclppTransportOps* o = mscclppTransports[i];
    CHECK(o->name != NULL && strcmp(o->name, mscclppTransportName(o->transport)) == 0);
    CHECK(o->check && o->open && o->close && o->write && o->signal && o->flush && o->query);
    /* capabilities are data, and agree with the slots they describe */
    CHECK(o->attrs != NULL && o->available != NULL);
    CHECK(((o->attrs->caps & MSCCLPP_TRANSPORT_CAP_NEEDS_PROGRESS) != 0) == (o->progress != NULL));
    CHECK(((o->attrs->caps & MSCCLPP_TRANSPORT_CAP_WRITE_INLINE) != 0) ==
          (o->writeInline != mscclppTransportUnsupportedWriteInline));
    CHECK((o->attrs->caps & MSCCLPP_TRANSPORT_CAP_STAGES_DEVICE) == 0); /* learned per connection, at open */
    CHECK((seen & (unsigned)o->transport) == 0);
    seen |= (unsigned)o->transport;
  }
  CHECK(seen == (mscclppTransportCudaIpc | mscclppTransportHostShm | mscclppTransportNet));
  CHECK(mscclppTransports[0]->transport == mscclppTransportCudaIpc); /* Auto prefers the copy engines */
  /* Auto takes the network last: same-host transports win where they fit. */
  CHECK(mscclppTransports[mscclppTransportCount - 1]->transport == mscclppTransportNet);
  CHECK(mscclppTransportNetOps.progress != NULL); /* manual-progress providers need the proxy's calls */
  /* only the transport that maps the peer's memory lets kernels store into it */
  CHECK(mscclppTransportCudaIpcOps.attrs->caps & MSCCLPP_TRANSPORT_CAP_PEER_STORE);
  CHECK(!(mscclppTransportNetOps.attrs->caps & MSCCLPP_TRANSPORT_CAP_PEER_STORE));
  CHECK(!(mscclppTransportHostShmOps.attrs->caps & MSCCLPP_TRANSPORT_CAP_PEER_STORE));
  CHECK(mscclppTransportNetOps.attrs->semAuto == MSCCLPP_TRANSPORT_SEM_PINNED);
  struct mscclppEndpoint noGpu = {.device = -1};
  CHECK(!mscclppTransportCudaIpcOps.available(&noGpu, 1) && mscclppTransportHostShmOps.available(&noGpu, 0));
  CHECK(!mscclppTransportNetOps.available(&noGpu, 0)); /* libfabric is loaded only when the network is wanted */
  struct mscclppConnection fake = {.ops = &mscclppTransportHostShmOps};
  CHECK_RES(mscclppTransportUnsupportedWrite(&fake, NULL, 0, NULL, 0, 1), mscclppInvalidUsage);
  CHECK(errHas("write is not supported by transport HostShm"));
  CHECK_RES(mscclppTransportUnsupportedSignal(&fake, NULL, 0, 1), mscclppInvalidUsage);
  CHECK(errHas("signal is not supported by transport HostShm"));
  CHECK_RES(mscclppTransportUnsupportedFlush(&fake), mscclppInvalidUsage);
  CHECK(errHas("flush is not supported"));
  CHECK(strcmp(mscclppTransportName((mscclppTransport_t)12), "unknown") == 0);
  CHECK(strcmp(mscclppMemKindName(mscclppMemKindDeviceCuMem), "DeviceCuMem") == 0);
}

/* The public capability query (include/mscclpp/connection.h) answers from
 * the connection's capabilities, and refuses what is not one capability. */
static void testCapabilities(void) {
  static const mscclppConnectionCap_t caps[] = {mscclppConnectionCapWriteInline, mscclppConnectionCapNeedsProgress,
                                                mscclppConnectionCapPeerStore, mscclppConnectionCapStagesDeviceMemory,
                                                mscclppConnectionCapCrossHost};
  /* only the network reaches other hosts */
  for (int i = 0; i < mscclppTransportCount; i++) {
    const struct mscclppTransportOps* o = mscclppTransports[i];
    CHECK(((o->attrs->caps & MSCCLPP_TRANSPORT_CAP_CROSS_HOST) != 0) == (o->transport == mscclppTransportNet));
    CHECK((o->attrs->caps & ~MSCCLPP_TRANSPORT_CAP_ALL) == 0);
  }
  struct mscclppMemContext* ctx = newCtx(&rank0, 0);
  struct mscclppConnection* c = NULL;
  CHECK_RES(mscclppConnCreate(ctx, 0, 12, mscclppTransportHostShm, &c), mscclppSuccess);
  if (c == NULL) {
    CHECK_RES(mscclppMemContextDestroy(ctx), mscclppSuccess);
    return;
  }
  for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
    int has = -1;
    CHECK_RES(mscclppConnectionHasCapability(c, caps[i], &has), mscclppSuccess);
    CHECK(has == ((c->caps & (uint32_t)caps[i]) != 0));
    /* HostShm: the CPU copies, inline puts included; nothing else */
    CHECK(has == (caps[i] == mscclppConnectionCapWriteInline));
  }
  int has = -1;
  CHECK_RES(mscclppConnectionHasCapability(NULL, mscclppConnectionCapCrossHost, &has), mscclppInvalidArgument);
  CHECK_RES(mscclppConnectionHasCapability(c, mscclppConnectionCapCrossHost, NULL), mscclppInvalidArgument);
  CHECK(errHas("NULL argument"));
  CHECK_RES(mscclppConnectionHasCapability(c, (mscclppConnectionCap_t)0, &has), mscclppInvalidArgument);
  CHECK_RES(mscclppConnectionHasCapability(
                c, (mscclppConnectionCap_t)(mscclppConnectionCapWriteInline | mscclppConnectionCapCrossHost), &has),
            mscclppInvalidArgument);
  CHECK(errHas("0x11 is not one mscclppConnectionCap_t value"));
  CHECK_RES(mscclppConnectionHasCapability(c, (mscclppConnectionCap_t)(1u << 20), &has), mscclppInvalidArgument);
  CHECK(has == -1); /* written only on success */
  CHECK_RES(mscclppConnDestroy(c), mscclppSuccess);
  CHECK_RES(mscclppMemContextDestroy(ctx), mscclppSuccess);
}

static struct mscclppEndpoint endpoint(int rank, uint64_t host, int gpu, uint32_t requested) {
  struct mscclppEndpoint ep;
  memset(&ep, 0, sizeof(ep));
  ep.rank = rank;
  ep.peer = 1 - rank;
  ep.tag = 3;
  ep.pid = 100 + (uint32_t)rank;
  ep.processToken = 77;
  ep.hostHash = host;
  snprintf(ep.hostName, sizeof(ep.hostName), "h%llx", (unsigned long long)host);
  ep.available = mscclppTransportHostShm | (gpu ? mscclppTransportCudaIpc : 0);
  ep.device = gpu ? 0 : -1;
  ep.requested = requested;
  return ep;
}

static void testEndpointCodec(void) {
  struct mscclppEndpoint ep = endpoint(1, 0xfeed, 1, mscclppTransportHostShm), out;
  uint8_t buf[MSCCLPP_ENDPOINT_BYTES];
  char why[200];
  mscclppEndpointEncode(&ep, testSecret, buf);
  CHECK_RES(mscclppEndpointDecode(buf, testSecret, &out, why, sizeof(why)), mscclppSuccess);
  CHECK(memcmp(&ep, &out, sizeof(ep)) == 0);
  int refused = 0;
  for (int i = 0; i < MSCCLPP_ENDPOINT_BYTES; i++) {
    buf[i] ^= 0x10;
    refused += mscclppEndpointDecode(buf, testSecret, &out, why, sizeof(why)) != mscclppSuccess;
    buf[i] ^= 0x10;
  }
  CHECK(refused == MSCCLPP_ENDPOINT_BYTES);
  uint8_t other[MSCCLPP_SECRET_BYTES];
  memcpy(other, testSecret, sizeof(other));
  other[0] ^= 1;
  CHECK_RES(mscclppEndpointDecode(buf, other, &out, why, sizeof(why)), mscclppInvalidArgument);
  CHECK(strstr(why, "another job") != NULL);
}

static void expectSelect(struct mscclppEndpoint a, struct mscclppEndpoint b, mscclppTransport_t want) {
  const struct mscclppTransportOps *ab = NULL, *ba = NULL;
  CHECK_RES(mscclppTransportSelect(&a, &b, &ab), mscclppSuccess);
  CHECK_RES(mscclppTransportSelect(&b, &a, &ba), mscclppSuccess); /* both ranks agree */
  CHECK(ab != NULL && ab == ba && ab->transport == want);
}

static void testSelect(void) {
  expectSelect(endpoint(0, 1, 1, 0), endpoint(1, 1, 1, 0), mscclppTransportCudaIpc);
  expectSelect(endpoint(0, 1, 1, 0), endpoint(1, 1, 0, 0), mscclppTransportHostShm);
  expectSelect(endpoint(0, 1, 0, 0), endpoint(1, 1, 0, 0), mscclppTransportHostShm);
  expectSelect(endpoint(0, 1, 1, mscclppTransportHostShm), endpoint(1, 1, 1, 0), mscclppTransportHostShm);
  expectSelect(endpoint(0, 1, 1, 0), endpoint(1, 1, 1, mscclppTransportHostShm), mscclppTransportHostShm);
  const struct mscclppTransportOps* o = NULL;
  struct mscclppEndpoint a = endpoint(0, 1, 1, 0), b = endpoint(1, 2, 1, 0);
  CHECK_RES(mscclppTransportSelect(&a, &b, &o), mscclppInvalidUsage);
  CHECK(errHas("no transport joins") && errHas("'h1'") && errHas("'h2'") && errHas("different hosts"));
  a = endpoint(0, 1, 1, mscclppTransportCudaIpc);
  b = endpoint(1, 1, 0, 0);
  CHECK_RES(mscclppTransportSelect(&a, &b, &o), mscclppInvalidUsage);
  CHECK(errHas("CudaIpc cannot join") && errHas("rank 1 has no GPU"));
  a = endpoint(0, 1, 1, mscclppTransportCudaIpc);
  b = endpoint(1, 1, 1, mscclppTransportHostShm);
  CHECK_RES(mscclppTransportSelect(&a, &b, &o), mscclppInvalidUsage);
  CHECK(errHas("rank 0 asked for transport CudaIpc and rank 1 for HostShm"));
  a = endpoint(0, 1, 1, mscclppTransportNet);
  b = endpoint(1, 1, 1, 0);
  CHECK_RES(mscclppTransportSelect(&a, &b, &o), mscclppInvalidUsage);
  CHECK(errHas("transport Net cannot join") && errHas("rank 0 cannot load libfabric"));
  a = endpoint(0, 1, 1, mscclppTransportNet);
  a.available |= mscclppTransportNet;
  CHECK_RES(mscclppTransportSelect(&a, &b, &o), mscclppInvalidUsage);
  CHECK(errHas("rank 1 cannot load libfabric"));
  CHECK(o == NULL);
  /* Net, where both can load libfabric: Auto takes it only between hosts;
   * asked for, it joins ranks of one host too. */
  a = endpoint(0, 1, 1, 0);
  b = endpoint(1, 2, 0, 0);
  a.available |= mscclppTransportNet;
  b.available |= mscclppTransportNet;
  expectSelect(a, b, mscclppTransportNet);
  b.hostHash = 1;
  expectSelect(a, b, mscclppTransportHostShm);
  a.requested = mscclppTransportNet;
  expectSelect(a, b, mscclppTransportNet);
  /* Between hosts, one side without libfabric: nothing joins them, and the
   * message says why for every transport. */
  a = endpoint(0, 1, 1, 0);
  b = endpoint(1, 2, 1, 0);
  a.available |= mscclppTransportNet;
  CHECK_RES(mscclppTransportSelect(&a, &b, &o), mscclppInvalidUsage);
  CHECK(errHas("no transport joins") && errHas("Net: rank 1 cannot load libfabric"));
  CHECK(o == NULL);
}

/* ---- data movement ---------------------------------------------------------------------- */

static void fill(unsigned char* p, size_t n, unsigned seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i < n; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    memcpy(p + i, &x, n - i < 8 ? n - i : 8);
  }
}

/* Write src[srcOff, +size) into dst[dstOff, +size) and check dst: the range
 * has the source bytes, a guard band of 64 bytes around it is untouched. */
#define GUARD 64
static void checkWrite(struct mscclppConnection* c, struct mscclppRegisteredMemory* dst, unsigned char* dstView,
                       size_t dstOff, struct mscclppRegisteredMemory* src, unsigned char* srcView, size_t srcOff,
                       size_t size, unsigned seed) {
  size_t lo = dstOff > GUARD ? dstOff - GUARD : 0;
  size_t hi = dstOff + size + GUARD < dst->size ? dstOff + size + GUARD : (size_t)dst->size;
  memset(dstView + lo, 0xa5, hi - lo);
  fill(srcView + srcOff, size, seed);
  CHECK_RES(mscclppConnWrite(c, dst, dstOff, src, srcOff, size), mscclppSuccess);
  CHECK_RES(mscclppConnFlush(c), mscclppSuccess);
  int ok = memcmp(dstView + dstOff, srcView + srcOff, size) == 0;
  for (size_t i = lo; i < dstOff && ok; i++) ok = dstView[i] == 0xa5;
  for (size_t i = dstOff + size; i < hi && ok; i++) ok = dstView[i] == 0xa5;
  CHECK(ok);
  if (!ok) fprintf(stderr, "  write of %zu bytes from offset %zu to offset %zu is wrong\n", size, srcOff, dstOff);
}

#define BIG ((size_t)64 << 20)

/* A rank connected to itself: exact bytes from 1 B to 64 MiB, unaligned. */
static void selfConnection(mscclppTransport_t t) {
  struct mscclppMemContext* ctx = newCtx(&rank0, 0);
  struct mscclppConnection* c = NULL;
  CHECK_RES(mscclppConnCreate(ctx, 0, 11, t, &c), mscclppSuccess);
  if (c == NULL) {
    CHECK_RES(mscclppMemContextDestroy(ctx), mscclppSuccess);
    return;
  }
  CHECK(c->sameProcess && c->remoteRank == 0 && (t == mscclppTransportAuto || c->ops->transport == t));
  void *srcp = NULL, *dstp = NULL;
  CHECK_RES(mscclppMemContextAlloc(ctx, mscclppMemKindHostShared, BIG + 64, &srcp), mscclppSuccess);
  CHECK_RES(mscclppMemContextAlloc(ctx, mscclppMemKindHostShared, BIG + 64, &dstp), mscclppSuccess);
  struct mscclppRegisteredMemory *src = NULL, *dst = NULL;
  CHECK_RES(mscclppMemRegister(ctx, srcp, BIG + 64, 0, &src), mscclppSuccess);
  CHECK_RES(mscclppMemRegister(ctx, dstp, BIG + 64, 0, &dst), mscclppSuccess);
  static const size_t sizes[] = {1, 2, 3, 7, 8, 13, 63, 64, 65, 255, 4095, 4097, 65537, (1 << 20) + 3, BIG};
  static const size_t offsets[][2] = {{0, 0}, {1, 0}, {0, 3}, {5, 7}, {63, 1}};
  unsigned seed = 1;
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    for (size_t j = 0; j < sizeof(offsets) / sizeof(offsets[0]); j++) {
      if (sizes[i] == BIG && j > 1) break; /* two 64 MiB rounds are enough */
      checkWrite(c, dst, dstp, offsets[j][0], src, srcp, offsets[j][1], sizes[i], seed++);
    }
  }
  /* Within one registration: disjoint ranges are fine, overlapping ones refused. */
  fill(srcp, 1000, 99);
  CHECK_RES(mscclppConnWrite(c, src, 500, src, 0, 500), mscclppSuccess);
  CHECK_RES(mscclppConnFlush(c), mscclppSuccess);
  CHECK(memcmp((unsigned char*)srcp + 500, srcp, 500) == 0);
  CHECK_RES(mscclppConnWrite(c, src, 1, src, 0, 999), mscclppInvalidArgument);
  CHECK(errHas("overlap"));
  /* Signals: one 8-byte store each. */
  CHECK_RES(mscclppConnSignal(c, dst, 16, 0x0123456789abcdefull), mscclppSuccess);
  CHECK_RES(mscclppConnFlush(c), mscclppSuccess);
  CHECK(__atomic_load_n((uint64_t*)((char*)dstp + 16), __ATOMIC_ACQUIRE) == 0x0123456789abcdefull);
  CHECK_RES(mscclppConnWrite(c, dst, 0, src, 0, 0), mscclppSuccess); /* size 0: nothing */
  CHECK_RES(mscclppConnDestroy(c), mscclppSuccess);
  CHECK_RES(mscclppMemDeregister(src), mscclppSuccess);
  CHECK_RES(mscclppMemDeregister(dst), mscclppSuccess);
  CHECK_RES(mscclppMemContextFree(ctx, srcp), mscclppSuccess);
  CHECK_RES(mscclppMemContextFree(ctx, dstp), mscclppSuccess);
  CHECK_RES(mscclppMemContextDestroy(ctx), mscclppSuccess);
}

static void testSelfHostShm(void) { selfConnection(mscclppTransportHostShm); }
static void testSelfAuto(void) { selfConnection(mscclppTransportAuto); }
static void testSelfCudaIpc(void) {
  if (!mscclppGpuIpcAvailable()) SKIP_CASE("CudaIpc needs a GPU");
  selfConnection(mscclppTransportCudaIpc);
}

static void editOtherProcess(struct mscclppMemRecord* r) { r->ownerPid ^= 0x40000000u; }
static void editCudaIpcOnly(struct mscclppMemRecord* r) { r->transports = mscclppTransportCudaIpc; }

static struct mscclppRegisteredMemory* openForged(struct mscclppMemContext* ctx, struct mscclppRegisteredMemory* m,
                                                  void (*edit)(struct mscclppMemRecord*)) {
  struct mscclppMemRecord rec = m->record;
  edit(&rec);
  uint8_t buf[MSCCLPP_MEM_RECORD_MAX];
  size_t n = mscclppMemRecordEncode(&rec, testSecret, buf, sizeof(buf));
  struct mscclppRegisteredMemory* o = NULL;
  CHECK_RES(mscclppMemOpen(ctx, buf, n, mscclppInvalidArgument, &o), mscclppSuccess);
  return o;
}

/* Two ranks of this process: rank 0 writes into rank 1's memory, which it
 * reaches through a second mapping (as another process would); then every
 * error of write and signal. */
static void testTwoRanks(void) {
  struct mscclppMemContext* c0 = newCtx(&rank0, 0);
  struct mscclppMemContext* c1 = newCtx(&rank1, 0);
  struct connectArgs a0, a1;
  connectPair(c0, c1, 21, mscclppTransportHostShm, mscclppTransportAuto, &a0, &a1);
  CHECK_RES(a0.res, mscclppSuccess);
  CHECK_RES(a1.res, mscclppSuccess);
  if (a0.conn == NULL || a1.conn == NULL) return;
  struct mscclppConnection* c = a0.conn;
  CHECK(c->ops->transport == mscclppTransportHostShm && a1.conn->ops->transport == mscclppTransportHostShm);
  const size_t n = 3 * 4096 + 17;
  void *srcp = NULL, *dstp = NULL;
  CHECK_RES(mscclppMemContextAlloc(c0, mscclppMemKindHostShared, n, &srcp), mscclppSuccess);
  CHECK_RES(mscclppMemContextAlloc(c1, mscclppMemKindHostShared, n, &dstp), mscclppSuccess);
  struct mscclppRegisteredMemory *src = NULL, *dstOwn = NULL;
  CHECK_RES(mscclppMemRegister(c0, srcp, n, 0, &src), mscclppSuccess);
  CHECK_RES(mscclppMemRegister(c1, dstp, n, mscclppTransportHostShm, &dstOwn), mscclppSuccess);
  struct mscclppRegisteredMemory* dst = openForged(c0, dstOwn, editOtherProcess);
  if (dst == NULL) return;
  CHECK(dst->ptr != dstp && dst->ownerRank == 1);
  for (size_t size = 1; size < n; size = size * 3 + 1)
    checkWrite(c, dst, dstp, 11, src, srcp, 5, size, (unsigned)size); /* checked through the owner's mapping */
  int idle = 0;
  CHECK_RES(mscclppConnQuery(c, &idle), mscclppSuccess);
  CHECK(idle == 1); /* host shared memory writes complete before they return */
  CHECK_RES(mscclppConnQuery(c, NULL), mscclppInvalidArgument);
  CHECK_RES(mscclppConnQuery(NULL, &idle), mscclppInvalidArgument);
  CHECK_RES(mscclppConnSignal(c, dst, 4096, 42), mscclppSuccess);
  CHECK(__atomic_load_n((uint64_t*)((char*)dstp + 4096), __ATOMIC_ACQUIRE) == 42);

  /* Errors, each naming the values. */
  CHECK_RES(mscclppConnWrite(c, dst, n - 10, src, 0, 11), mscclppInvalidArgument);
  char text[160];
  snprintf(text, sizeof(text), "destination range [offset %zu, +11 bytes) runs past the end of memory", n - 10);
  CHECK(errHas(text) && errHas("rank 1"));
  snprintf(text, sizeof(text), "(%zu bytes)", n);
  CHECK(errHas(text));
  CHECK_RES(mscclppConnWrite(c, dst, 0, src, UINT64_MAX, 2), mscclppInvalidArgument);
  CHECK(errHas("source range [offset 18446744073709551615"));
  CHECK_RES(mscclppConnWrite(c, dst, 1, src, 0, UINT64_MAX), mscclppInvalidArgument);
  CHECK_RES(mscclppConnWrite(c, src, 0, src, 0, 8), mscclppInvalidArgument); /* dst of rank 0 on a conn to rank 1 */
  CHECK(errHas("destination memory") && errHas("belongs to rank 0") && errHas("memory of rank 1 there"));
  CHECK_RES(mscclppConnWrite(c, dst, 0, dst, 0, 8), mscclppInvalidArgument); /* src of rank 1 */
  CHECK(errHas("source memory") && errHas("belongs to rank 1"));
  CHECK_RES(mscclppConnWrite(c, dstOwn, 0, src, 0, 8), mscclppInvalidArgument); /* rank 1's own handle */
  CHECK(errHas("another communicator"));
  struct mscclppRegisteredMemory* ipcOnly = openForged(c0, dstOwn, editCudaIpcOnly);
  if (ipcOnly != NULL) {
    CHECK_RES(mscclppConnWrite(c, ipcOnly, 0, src, 0, 8), mscclppInvalidArgument);
    CHECK(errHas("not registered for transport HostShm"));
    CHECK_RES(mscclppMemClose(ipcOnly), mscclppSuccess);
  }
  CHECK_RES(mscclppConnWrite(c, NULL, 0, src, 0, 8), mscclppInvalidArgument);
  CHECK_RES(mscclppConnWrite(NULL, dst, 0, src, 0, 8), mscclppInvalidArgument);
  CHECK_RES(mscclppConnSignal(c, dst, 4, 1), mscclppInvalidArgument);
  CHECK(errHas("offset 4") && errHas("not 8-byte aligned"));
  CHECK_RES(mscclppConnSignal(c, dst, n - 4, 1), mscclppInvalidArgument);
  CHECK(errHas("runs past the end"));
  CHECK_RES(mscclppConnSignal(c, src, 0, 1), mscclppInvalidArgument);
  CHECK_RES(mscclppConnFlush(NULL), mscclppInvalidArgument);

  CHECK_RES(mscclppConnDestroy(a0.conn), mscclppSuccess);
  CHECK_RES(mscclppMemContextDestroy(c1), mscclppInvalidUsage); /* its connection is alive */
  CHECK(errHas("1 connections"));
  CHECK_RES(mscclppConnDestroy(a1.conn), mscclppSuccess);
  CHECK_RES(mscclppMemClose(dst), mscclppSuccess);
  CHECK_RES(mscclppMemDeregister(src), mscclppSuccess);
  CHECK_RES(mscclppMemDeregister(dstOwn), mscclppSuccess);
  CHECK_RES(mscclppMemContextFree(c0, srcp), mscclppSuccess);
  CHECK_RES(mscclppMemContextFree(c1, dstp), mscclppSuccess);
  CHECK_RES(mscclppMemContextDestroy(c0), mscclppSuccess);
  CHECK_RES(mscclppMemContextDestroy(c1), mscclppSuccess);
}

static void testConnectErrors(void) {
  struct mscclppMemContext* c0 = newCtx(&rank0, 0);
  struct mscclppConnection* c = NULL;
  CHECK_RES(mscclppConnCreate(c0, 0, 1, (mscclppTransport_t)3, &c), mscclppInvalidArgument);
  CHECK(errHas("0x3"));
  CHECK_RES(mscclppConnCreate(c0, -1, 1, mscclppTransportAuto, &c), mscclppInvalidArgument);
  CHECK_RES(mscclppConnCreate(NULL, 0, 1, mscclppTransportAuto, &c), mscclppInvalidArgument);
  if (!mscclppNetLibAvailable()) {
    CHECK_RES(mscclppConnCreate(c0, 0, 1, mscclppTransportNet, &c), mscclppInvalidUsage);
    CHECK(errHas("cannot load libfabric"));
  }
  if (!mscclppGpuIpcAvailable()) {
    CHECK_RES(mscclppConnCreate(c0, 0, 2, mscclppTransportCudaIpc, &c), mscclppInvalidUsage);
    CHECK(errHas("has no GPU"));
  }
  CHECK(c == NULL);

  /* Ranks asking for different transports: both fail, naming both. */
  struct mscclppMemContext* c1 = newCtx(&rank1, 0);
  struct connectArgs a0, a1;
  connectPair(c0, c1, 3, mscclppTransportHostShm, mscclppTransportCudaIpc, &a0, &a1);
  CHECK_RES(a0.res, mscclppInvalidUsage);
  CHECK_RES(a1.res, mscclppInvalidUsage);
  CHECK(a0.conn == NULL && a1.conn == NULL);
  connectPair(c0, c1, 13, mscclppTransportNet, mscclppTransportHostShm, &a0, &a1);
  CHECK_RES(a0.res, mscclppInvalidUsage);
  CHECK_RES(a1.res, mscclppInvalidUsage);
  CHECK(errHas("asked for transport") && errHas("Net") && errHas("HostShm"));
  CHECK(a0.conn == NULL && a1.conn == NULL);
  CHECK_RES(mscclppMemContextDestroy(c1), mscclppSuccess);

  /* A rank on another host: no intra-host transport joins them; Auto takes
   * the network where libfabric loads (and says why not where it does not).
   * The loopback interface keeps the test off the machine's other NICs. */
  c1 = newCtx(&rank1, 0x5678);
  const char* oldIf = getenv("MSCCLPP_NET_IFNAME");
  char keepIf[128];
  snprintf(keepIf, sizeof(keepIf), "%s", oldIf ? oldIf : "");
  setenv("MSCCLPP_NET_IFNAME", "=lo", 1);
  connectPair(c0, c1, 4, mscclppTransportAuto, mscclppTransportAuto, &a0, &a1);
  if (oldIf) setenv("MSCCLPP_NET_IFNAME", keepIf, 1);
  else unsetenv("MSCCLPP_NET_IFNAME");
  if (mscclppNetLibAvailable()) {
    CHECK_RES(a0.res, mscclppSuccess);
    CHECK_RES(a1.res, mscclppSuccess);
    CHECK(a0.conn != NULL && a1.conn != NULL);
    if (a0.conn != NULL && a1.conn != NULL) {
      CHECK(a0.conn->ops->transport == mscclppTransportNet && a1.conn->ops->transport == mscclppTransportNet);
      CHECK(mscclppConnNeedsProgress(a0.conn));
    }
    if (a0.conn != NULL) CHECK_RES(mscclppConnDestroy(a0.conn), mscclppSuccess);
    if (a1.conn != NULL) CHECK_RES(mscclppConnDestroy(a1.conn), mscclppSuccess);
  } else {
    CHECK_RES(a0.res, mscclppInvalidUsage);
    CHECK_RES(a1.res, mscclppInvalidUsage);
    CHECK(errHas("different hosts") && errHas("'host-5678'") && errHas("'testhost'") && errHas("libfabric"));
  }
  CHECK_RES(mscclppMemContextDestroy(c1), mscclppSuccess);

  /* A forged or foreign endpoint is refused. */
  uint8_t junk[MSCCLPP_ENDPOINT_BYTES];
  memset(junk, 0x11, sizeof(junk));
  CHECK_RES(loopSend(&rank1, 0, 5, junk, sizeof(junk)), mscclppSuccess);
  CHECK_RES(mscclppConnCreate(c0, 1, 5, mscclppTransportAuto, &c), mscclppRemoteError);
  CHECK(errHas("refused the endpoint of rank 1"));
  CHECK_RES(loopRecv(&rank1, 0, 5, junk, sizeof(junk)), mscclppSuccess); /* what rank 0 sent */
  struct mscclppEndpoint ep = endpoint(1, 0x1234, 0, 0);
  ep.peer = 3; /* meant for someone else */
  ep.tag = 6;
  mscclppEndpointEncode(&ep, testSecret, junk);
  CHECK_RES(loopSend(&rank1, 0, 6, junk, sizeof(junk)), mscclppSuccess);
  CHECK_RES(mscclppConnCreate(c0, 1, 6, mscclppTransportAuto, &c), mscclppRemoteError);
  CHECK(errHas("for rank 3"));
  CHECK_RES(loopRecv(&rank1, 0, 6, junk, sizeof(junk)), mscclppSuccess);
  /* Nobody answers: the bootstrap's timeout. */
  lb.timeoutSec = 1;
  CHECK_RES(mscclppConnCreate(c0, 1, 7, mscclppTransportAuto, &c), mscclppTimeout);
  lb.timeoutSec = 10;
  CHECK_RES(loopRecv(&rank1, 0, 7, junk, sizeof(junk)), mscclppSuccess);
  CHECK_RES(mscclppMemContextDestroy(c0), mscclppSuccess);
}

/* ---- ordering: ping-pong over two connections, the reader on another thread ------------------ */

#define ROUNDS 500
#define SLOT 1000

struct pongArgs {
  struct mscclppConnection* conn; /* rank 1 -> rank 0 */
  struct mscclppRegisteredMemory *mine, *src, *peer;
  unsigned char* view; /* rank 1's memory */
  int bad;
  mscclppResult_t res;
};

/* Rank 1: wait for flag k (acquire), check the slot the writer filled
 * before it, then answer with flag k in rank 0's memory. */
static void* pongThread(void* p) {
  struct pongArgs* a = p;
  volatile uint64_t* flag = (uint64_t*)(a->view + 2 * SLOT);
  for (uint64_t k = 1; k <= ROUNDS; k++) {
    mscclppDeadline d = mscclppDeadlineIn(10);
    while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) != k) {
      if (mscclppDeadlinePassed(d)) {
        a->res = mscclppTimeout;
        return NULL;
      }
      sched_yield(); /* CI machines have few cores */
    }
    const unsigned char* slot = a->view + (k % 2) * SLOT;
    for (int i = 0; i < SLOT; i++) a->bad += slot[i] != (unsigned char)(k + (uint64_t)i);
    a->res = mscclppConnSignal(a->conn, a->peer, 0, k);
    if (a->res != mscclppSuccess) return NULL;
  }
  return NULL;
}

static void testPingPong(void) {
  struct mscclppMemContext* c0 = newCtx(&rank0, 0);
  struct mscclppMemContext* c1 = newCtx(&rank1, 0);
  struct connectArgs a0, a1;
  connectPair(c0, c1, 31, mscclppTransportAuto, mscclppTransportAuto, &a0, &a1);
  CHECK_RES(a0.res, mscclppSuccess);
  CHECK_RES(a1.res, mscclppSuccess);
  if (a0.conn == NULL || a1.conn == NULL) return;
  void *p0 = NULL, *p1 = NULL, *s0 = NULL;
  CHECK_RES(mscclppMemContextAlloc(c0, mscclppMemKindHostPinned, 64, &p0), mscclppSuccess); /* rank 0's flag */
  CHECK_RES(mscclppMemContextAlloc(c0, mscclppMemKindHostPinned, SLOT, &s0), mscclppSuccess);
  CHECK_RES(mscclppMemContextAlloc(c1, mscclppMemKindHostPinned, 2 * SLOT + 64, &p1), mscclppSuccess);
  struct mscclppRegisteredMemory *m0 = NULL, *ms0 = NULL, *m1 = NULL, *o0 = NULL, *o1 = NULL;
  CHECK_RES(mscclppMemRegister(c0, p0, 64, 0, &m0), mscclppSuccess);
  CHECK_RES(mscclppMemRegister(c0, s0, SLOT, 0, &ms0), mscclppSuccess);
  CHECK_RES(mscclppMemRegister(c1, p1, 2 * SLOT + 64, 0, &m1), mscclppSuccess);
  CHECK_RES(mscclppMemSend(c0, m0, 1, 32), mscclppSuccess);
  CHECK_RES(mscclppMemRecv(c1, 0, 32, &o0), mscclppSuccess);
  o1 = openForged(c0, m1, editOtherProcess); /* rank 0 writes through its own mapping */
  if (o0 == NULL || o1 == NULL) return;
  struct pongArgs pa = {.conn = a1.conn, .peer = o0, .view = p1};
  pthread_t th;
  CHECK(pthread_create(&th, NULL, pongThread, &pa) == 0);
  volatile uint64_t* back = p0;
  unsigned char* s = s0;
  uint64_t t0 = mscclppTimeNs();
  for (uint64_t k = 1; k <= ROUNDS; k++) {
    for (int i = 0; i < SLOT; i++) s[i] = (unsigned char)(k + (uint64_t)i);
    if (mscclppConnWrite(a0.conn, o1, (k % 2) * SLOT, ms0, 0, SLOT) != mscclppSuccess ||
        mscclppConnSignal(a0.conn, o1, 2 * SLOT, k) != mscclppSuccess) {
      CHECK(0);
      break;
    }
    mscclppDeadline d = mscclppDeadlineIn(10);
    while (__atomic_load_n(back, __ATOMIC_ACQUIRE) != k && !mscclppDeadlinePassed(d)) sched_yield();
    if (__atomic_load_n(back, __ATOMIC_ACQUIRE) != k) {
      CHECK(0);
      break;
    }
  }
  double us = (double)(mscclppTimeNs() - t0) / 1e3 / ROUNDS;
  pthread_join(th, NULL);
  CHECK_RES(pa.res, mscclppSuccess);
  CHECK(pa.bad == 0);
  printf("  %d round trips over %s, %.2f us each\n", ROUNDS, a0.conn->ops->name, us);
  CHECK_RES(mscclppConnDestroy(a0.conn), mscclppSuccess);
  CHECK_RES(mscclppConnDestroy(a1.conn), mscclppSuccess);
  CHECK_RES(mscclppMemClose(o0), mscclppSuccess);
  CHECK_RES(mscclppMemClose(o1), mscclppSuccess);
  CHECK_RES(mscclppMemDeregister(m0), mscclppSuccess);
  CHECK_RES(mscclppMemDeregister(ms0), mscclppSuccess);
  CHECK_RES(mscclppMemDeregister(m1), mscclppSuccess);
  CHECK_RES(mscclppMemContextFree(c0, p0), mscclppSuccess);
  CHECK_RES(mscclppMemContextFree(c0, s0), mscclppSuccess);
  CHECK_RES(mscclppMemContextFree(c1, p1), mscclppSuccess);
  CHECK_RES(mscclppMemContextDestroy(c0), mscclppSuccess);
  CHECK_RES(mscclppMemContextDestroy(c1), mscclppSuccess);
}


/* ---- CudaIpc with device memory (skipped without a GPU) ------------------------------------- */

#ifdef MSCCLPP_HAVE_CUDA
#include <cuda_runtime_api.h>

static void testGpuCopies(void) {
  if (!mscclppGpuIpcAvailable()) SKIP_CASE("needs a GPU");
  struct mscclppMemContext* c0 = newCtx(&rank0, 0);
  struct mscclppMemContext* c1 = newCtx(&rank1, 0);
  struct connectArgs a0, a1;
  connectPair(c0, c1, 41, mscclppTransportAuto, mscclppTransportAuto, &a0, &a1);
  CHECK_RES(a0.res, mscclppSuccess);
  CHECK_RES(a1.res, mscclppSuccess);
  if (a0.conn == NULL || a1.conn == NULL) return;
  struct mscclppConnection* c = a0.conn;
  CHECK(c->ops->transport == mscclppTransportCudaIpc);
  const size_t n = ((size_t)16 << 20) + 64;
  void *srcp = NULL, *dstp = NULL, *cup = NULL, *pin = NULL;
  CHECK_RES(mscclppMemContextAlloc(c0, mscclppMemKindDevice, n, &srcp), mscclppSuccess);
  CHECK_RES(mscclppMemContextAlloc(c1, mscclppMemKindDevice, n, &dstp), mscclppSuccess);
  CHECK_RES(mscclppMemContextAlloc(c1, mscclppMemKindDeviceCuMem, n, &cup), mscclppSuccess);
  CHECK_RES(mscclppMemContextAlloc(c1, mscclppMemKindHostPinned, 64, &pin), mscclppSuccess);
  struct mscclppRegisteredMemory *src = NULL, *dOwn = NULL, *cuOwn = NULL, *pinOwn = NULL;
  CHECK_RES(mscclppMemRegister(c0, srcp, n, 0, &src), mscclppSuccess);
  CHECK_RES(mscclppMemRegister(c1, dstp, n, 0, &dOwn), mscclppSuccess);
  CHECK_RES(mscclppMemRegister(c1, cup, n, 0, &cuOwn), mscclppSuccess);
  CHECK_RES(mscclppMemRegister(c1, pin, 64, 0, &pinOwn), mscclppSuccess);
  /* Rank 0 reaches rank 1's cuMem and pinned memory through its own mappings. */
  struct mscclppRegisteredMemory* dst = NULL;
  CHECK_RES(mscclppMemSend(c1, dOwn, 0, 42), mscclppSuccess);
  CHECK_RES(mscclppMemRecv(c0, 1, 42, &dst), mscclppSuccess);
  struct mscclppRegisteredMemory* cuDst = openForged(c0, cuOwn, editOtherProcess);
  struct mscclppRegisteredMemory* pinDst = openForged(c0, pinOwn, editOtherProcess);
  if (!dst || !cuDst || !pinDst) return;
  unsigned char* host = malloc(n);
  unsigned char* back = malloc(n);
  fill(host, n, 5);
  CHECK(cudaMemcpy(srcp, host, n, cudaMemcpyHostToDevice) == cudaSuccess);
  static const size_t sizes[] = {1, 3, 8, 63, 4097, 65537, (1 << 20) + 3, (size_t)16 << 20};
  struct mscclppRegisteredMemory* dsts[2] = {dst, cuDst};
  void* views[2] = {dstp, cup};
  for (int k = 0; k < 2; k++) {
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
      size_t so = i % 3, dof = (i * 7) % 61;
      CHECK(cudaMemset(views[k], 0xa5, n) == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess);
      CHECK_RES(mscclppConnWrite(c, dsts[k], dof, src, so, sizes[i]), mscclppSuccess);
      CHECK_RES(mscclppConnFlush(c), mscclppSuccess);
      CHECK(cudaMemcpy(back, views[k], n, cudaMemcpyDeviceToHost) == cudaSuccess);
      int ok = memcmp(back + dof, host + so, sizes[i]) == 0;
      for (size_t j = 0; j < dof && ok; j++) ok = back[j] == 0xa5;
      for (size_t j = dof + sizes[i]; j < n && ok; j++) ok = back[j] == 0xa5;
      CHECK(ok);
      if (!ok) fprintf(stderr, "  %s: write of %zu bytes is wrong\n", k ? "cuMem" : "cudaMalloc", sizes[i]);
    }
  }
  /* Signals: into device memory (stream-ordered) and pinned host memory (a CPU store). */
  CHECK_RES(mscclppConnWrite(c, dst, 0, src, 0, n - 64), mscclppSuccess);
  CHECK_RES(mscclppConnSignal(c, dst, n - 64, 0x1122334455667788ull), mscclppSuccess);
  /* behind the pending copy the pinned signal is a stream write too (after
   * the copy); with nothing pending it is a CPU store, visible at once */
  CHECK_RES(mscclppConnSignal(c, pinDst, 8, 77), mscclppSuccess);
  CHECK_RES(mscclppConnFlush(c), mscclppSuccess);
  CHECK(__atomic_load_n((uint64_t*)pin + 1, __ATOMIC_ACQUIRE) == 77);
  CHECK_RES(mscclppConnSignal(c, pinDst, 8, 78), mscclppSuccess);
  CHECK(__atomic_load_n((uint64_t*)pin + 1, __ATOMIC_ACQUIRE) == 78);
  CHECK_RES(mscclppConnFlush(c), mscclppSuccess);
  int idle = 0;
  CHECK_RES(mscclppConnQuery(c, &idle), mscclppSuccess);
  CHECK(idle == 1); /* nothing pending after a flush */
  CHECK_RES(mscclppConnWrite(c, dst, 0, src, 0, n - 64), mscclppSuccess);
  idle = 0;
  for (int spins = 0; spins < 100000000 && !idle; spins++) CHECK_RES(mscclppConnQuery(c, &idle), mscclppSuccess);
  CHECK(idle == 1); /* the 16 MiB copy completes and query says so without blocking */
  uint64_t word = 0;
  CHECK(cudaMemcpy(&word, (char*)dstp + n - 64, 8, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(word == 0x1122334455667788ull);
  CHECK(cudaMemcpy(back, dstp, n - 64, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(memcmp(back, host, n - 64) == 0);
  /* Timing of a signal with nothing pending into pinned memory: no CUDA call. */
  uint64_t t0 = mscclppTimeNs();
  for (int i = 0; i < 10000; i++) CHECK_RES(mscclppConnSignal(c, pinDst, 16, (uint64_t)i), mscclppSuccess);
  double storeNs = (double)(mscclppTimeNs() - t0) / 10000;
  t0 = mscclppTimeNs();
  for (int i = 0; i < 1000; i++) CHECK_RES(mscclppConnSignal(c, dst, 0, (uint64_t)i), mscclppSuccess);
  CHECK_RES(mscclppConnFlush(c), mscclppSuccess);
  double streamNs = (double)(mscclppTimeNs() - t0) / 1000;
  printf("  signal into pinned host memory %.0f ns, into device memory %.0f ns (enqueue, flushed once)\n", storeNs,
         streamNs);
  free(host);
  free(back);
  CHECK_RES(mscclppConnDestroy(a0.conn), mscclppSuccess);
  CHECK_RES(mscclppConnDestroy(a1.conn), mscclppSuccess);
  CHECK_RES(mscclppMemClose(dst), mscclppSuccess);
  CHECK_RES(mscclppMemClose(cuDst), mscclppSuccess);
  CHECK_RES(mscclppMemClose(pinDst), mscclppSuccess);
  CHECK_RES(mscclppMemDeregister(src), mscclppSuccess);
  CHECK_RES(mscclppMemDeregister(dOwn), mscclppSuccess);
  CHECK_RES(mscclppMemDeregister(cuOwn), mscclppSuccess);
  CHECK_RES(mscclppMemDeregister(pinOwn), mscclppSuccess);
  CHECK_RES(mscclppMemContextFree(c0, srcp), mscclppSuccess);
  CHECK_RES(mscclppMemContextFree(c1, dstp), mscclppSuccess);
  CHECK_RES(mscclppMemContextFree(c1, cup), mscclppSuccess);
  CHECK_RES(mscclppMemContextFree(c1, pin), mscclppSuccess);
  CHECK_RES(mscclppMemContextDestroy(c0), mscclppSuccess);
  CHECK_RES(mscclppMemContextDestroy(c1), mscclppSuccess);
}
#else
static void testGpuCopies(void) { SKIP_CASE("built without CUDA"); }
#endif

static void testNoMessageLeft(void) { CHECK(loopFini(&lb) == 0); }

int main(int argc, char** argv) {
  harnessInit(argc, argv);
  setenv("MSCCLPP_DEBUG", "NONE", 1);
  loopInit(&lb, 10);
  RUN(testOpsTables);
  RUN(testEndpointCodec);
  RUN(testSelect);
  RUN(testSelfHostShm);
  RUN(testSelfAuto);
  RUN(testSelfCudaIpc);
  RUN(testCapabilities);
  RUN(testTwoRanks);
  RUN(testConnectErrors);
  RUN(testPingPong);
  RUN(testGpuCopies);
  RUN(testNoMessageLeft);
  return harnessFinish();
}
