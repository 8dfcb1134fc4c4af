/* SPDX-License-Identifier: MIT */
/* Unit tests of the memory layer, in one process (plus a forked child for
 * the cross-process path): records (round trip, every refusal), allocation,
 * registration and its errors, lookup, opening (same process, a second
 * mapping through the fd server, refusals), the fd server, send/recv. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/util.h"
#include "gpu/gpu_ipc.h"
#include "harness.h"
#include "memory/fd_share.h"
#include "memory/loopback.h"
#include "memory/memory.h"
#include "memory/record.h"
#include "memory/shm.h"

static struct loopback lb;
static struct loopRank rank0 = {&lb, 0}, rank1 = {&lb, 1};

static int errHas(const char* s) {
  if (strstr(mscclppGetLastError(), s) != NULL) return 1;
  fprintf(stderr, "  last error \"%s\" lacks \"%s\"\n", mscclppGetLastError(), s);
  return 0;
}

static struct mscclppMemContext* newCtx(struct loopRank* r) {
  struct mscclppMemConfig cfg = loopConfig(r);
  struct mscclppMemContext* ctx = NULL;
  CHECK_RES(mscclppMemContextCreate(&cfg, &ctx), mscclppSuccess);
  return ctx;
}

static void fullRecord(struct mscclppMemRecord* rec) {
  memset(rec, 0, sizeof(*rec));
  rec->memId = 0x1122334455667788ull;
  rec->ownerRank = 7;
  rec->ownerPid = 4242;
  rec->processToken = 0xdeadbeefcafef00dull;
  rec->hostHash = 0xabcdef;
  strcpy(rec->hostName, "node-17:netns-4026531840");
  rec->kind = mscclppMemKindDeviceCuMem;
  rec->transports = mscclppTransportCudaIpc | mscclppTransportHostShm;
  rec->addr = 0x7f0000001000ull;
  rec->devAddr = 0x7f0000002000ull;
  rec->size = 12345;
  rec->device = 3;
  rec->hasCudaIpc = 1;
  for (int i = 0; i < MSCCLPP_GPU_IPC_HANDLE_BYTES; i++) rec->cudaIpc.handle[i] = (uint8_t)(i * 3 + 1);
  rec->cudaIpc.offset = 4096;
  rec->cudaIpc.allocSize = 1 << 21;
  rec->hasFd = 1;
  strcpy(rec->fd.server, "mscclpp-fd-1234-0011223344556677");
  rec->fd.exportId = 99;
  for (int i = 0; i < MSCCLPP_FD_TOKEN_BYTES; i++) rec->fd.token[i] = (uint8_t)(0xa0 + i);
  rec->fd.offset = 100;
  rec->fd.mapSize = 1 << 20;
}

/* ---- records ---------------------------------------------------------------------- */

static void testRecordRoundTrip(void) {
  struct mscclppMemRecord rec, out;
  fullRecord(&rec);
  uint8_t buf[MSCCLPP_MEM_RECORD_MAX];
  size_t n = mscclppMemRecordEncode(&rec, testSecret, buf, sizeof(buf));
  CHECK(n == mscclppMemRecordSize(&rec));
  CHECK(n > 100 && n <= MSCCLPP_MEMORY_RECORD_MAX_BYTES);
  char why[200] = "";
  CHECK_RES(mscclppMemRecordDecode(buf, n, testSecret, &out, why, sizeof(why)), mscclppSuccess);
  CHECK(memcmp(&rec, &out, sizeof(rec)) == 0);
  /* Too small a buffer: the size comes back, nothing is written. */
  uint8_t small[64];
  memset(small, 0x5a, sizeof(small));
  CHECK(mscclppMemRecordEncode(&rec, testSecret, small, sizeof(small)) == n);
  for (size_t i = 0; i < sizeof(small); i++) CHECK(small[i] == 0x5a);
  /* No sections, empty host name. */
  rec.hasCudaIpc = rec.hasFd = 0;
  memset(&rec.cudaIpc, 0, sizeof(rec.cudaIpc));
  memset(&rec.fd, 0, sizeof(rec.fd));
  memset(rec.hostName, 0, sizeof(rec.hostName));
  rec.kind = mscclppMemKindHost;
  n = mscclppMemRecordEncode(&rec, testSecret, buf, sizeof(buf));
  CHECK_RES(mscclppMemRecordDecode(buf, n, testSecret, &out, why, sizeof(why)), mscclppSuccess);
  CHECK(memcmp(&rec, &out, sizeof(rec)) == 0);
}

static mscclppResult_t decodeWhy(const uint8_t* buf, size_t n, const uint8_t* secret, char* why) {
  struct mscclppMemRecord out;
  why[0] = '\0';
  return mscclppMemRecordDecode(buf, n, secret, &out, why, 200);
}

static void testRecordRefusals(void) {
  struct mscclppMemRecord rec;
  fullRecord(&rec);
  uint8_t buf[MSCCLPP_MEM_RECORD_MAX + 8], copy[MSCCLPP_MEM_RECORD_MAX + 8];
  size_t n = mscclppMemRecordEncode(&rec, testSecret, buf, sizeof(buf));
  char why[200];
  /* Truncated at every length. */
  int refused = 0;
  for (size_t len = 0; len < n; len++) refused += decodeWhy(buf, len, testSecret, why) == mscclppInvalidArgument;
  CHECK(refused == (int)n);
  CHECK_RES(decodeWhy(buf, n - 10, testSecret, why), mscclppInvalidArgument);
  CHECK(strstr(why, "truncated") != NULL);
  /* One byte too many. */
  buf[n] = 0;
  CHECK_RES(decodeWhy(buf, n + 1, testSecret, why), mscclppInvalidArgument);
  CHECK(strstr(why, "length mismatch") != NULL);
  /* Every single-bit change is refused. */
  refused = 0;
  for (size_t i = 0; i < n; i++) {
    for (int b = 0; b < 8; b++) {
      memcpy(copy, buf, n);
      copy[i] ^= (uint8_t)(1u << b);
      refused += decodeWhy(copy, n, testSecret, why) == mscclppInvalidArgument;
    }
  }
  CHECK(refused == (int)n * 8);
  memcpy(copy, buf, n);
  copy[60] ^= 1; /* inside the address: only the MAC can tell */
  CHECK_RES(decodeWhy(copy, n, testSecret, why), mscclppInvalidArgument);
  CHECK(strstr(why, "authentication") != NULL);
  /* Another job's secret. */
  uint8_t other[MSCCLPP_SECRET_BYTES];
  memcpy(other, testSecret, sizeof(other));
  other[15] ^= 0x80;
  CHECK_RES(decodeWhy(buf, n, other, why), mscclppInvalidArgument);
  CHECK(strstr(why, "another job") != NULL);
  /* A later version. */
  memcpy(copy, buf, n);
  copy[4] = 2;
  CHECK_RES(decodeWhy(copy, n, testSecret, why), mscclppInvalidArgument);
  CHECK(strstr(why, "version 2") != NULL);
  /* Not a record at all. */
  memcpy(copy, buf, n);
  copy[0] = 'X';
  CHECK_RES(decodeWhy(copy, n, testSecret, why), mscclppInvalidArgument);
  CHECK(strstr(why, "magic") != NULL);
  /* Garbage of every size. */
  refused = 0;
  for (int i = 0; i < 2000; i++) {
    size_t len = (size_t)(i % (MSCCLPP_MEM_RECORD_MAX + 8));
    CHECK_RES(mscclppRandomBytes(copy, sizeof(copy)), mscclppSuccess);
    if (i % 3 == 0 && len >= 12) { /* a plausible header, random rest */
      memcpy(copy, buf, 8);
      copy[8] = (uint8_t)len;
      copy[9] = (uint8_t)(len >> 8);
      copy[10] = copy[11] = 0;
    }
    refused += decodeWhy(copy, len, testSecret, why) == mscclppInvalidArgument;
  }
  CHECK(refused == 2000);
  CHECK_RES(decodeWhy(NULL, 10, testSecret, why), mscclppInvalidArgument);

  /* Authenticated (made with the secret) but invalid: each named. */
  struct mscclppMemRecord bad;
  bad = rec;
  bad.kind = 9;
  n = mscclppMemRecordEncode(&bad, testSecret, buf, sizeof(buf));
  CHECK_RES(decodeWhy(buf, n, testSecret, why), mscclppInvalidArgument);
  CHECK(strstr(why, "kind 9") != NULL);
  bad = rec;
  bad.transports = 0;
  n = mscclppMemRecordEncode(&bad, testSecret, buf, sizeof(buf));
  CHECK_RES(decodeWhy(buf, n, testSecret, why), mscclppInvalidArgument);
  CHECK(strstr(why, "transport mask 0x0") != NULL);
  bad = rec;
  bad.transports = 0x40;
  n = mscclppMemRecordEncode(&bad, testSecret, buf, sizeof(buf));
  CHECK_RES(decodeWhy(buf, n, testSecret, why), mscclppInvalidArgument);
  CHECK(strstr(why, "0x40") != NULL);
  bad = rec;
  bad.size = 0;
  n = mscclppMemRecordEncode(&bad, testSecret, buf, sizeof(buf));
  CHECK_RES(decodeWhy(buf, n, testSecret, why), mscclppInvalidArgument);
  CHECK(strstr(why, "size 0") != NULL);
  bad = rec;
  bad.cudaIpc.offset = bad.cudaIpc.allocSize - 100; /* offset + size past the allocation */
  n = mscclppMemRecordEncode(&bad, testSecret, buf, sizeof(buf));
  CHECK_RES(decodeWhy(buf, n, testSecret, why), mscclppInvalidArgument);
  CHECK(strstr(why, "beyond the allocation of 2097152 bytes") != NULL);
  bad = rec;
  bad.fd.offset = UINT64_MAX - 5; /* would wrap */
  n = mscclppMemRecordEncode(&bad, testSecret, buf, sizeof(buf));
  CHECK_RES(decodeWhy(buf, n, testSecret, why), mscclppInvalidArgument);
  CHECK(strstr(why, "beyond the mapping") != NULL);
  bad = rec;
  bad.hostName[3] = '\n';
  n = mscclppMemRecordEncode(&bad, testSecret, buf, sizeof(buf));
  CHECK_RES(decodeWhy(buf, n, testSecret, why), mscclppInvalidArgument);
  CHECK(strstr(why, "host name") != NULL);
  bad = rec;
  bad.ownerRank = -3;
  n = mscclppMemRecordEncode(&bad, testSecret, buf, sizeof(buf));
  CHECK_RES(decodeWhy(buf, n, testSecret, why), mscclppInvalidArgument);
  CHECK(strstr(why, "rank -3") != NULL);
}

/* ---- allocation and registration ----------------------------------------------------------- */

static void testAllocErrors(void) {
  struct mscclppMemContext* ctx = newCtx(&rank0);
  void* p = NULL;
  int x = 0;
  CHECK_RES(mscclppMemContextAlloc(ctx, mscclppMemKindHostShared, 0, &p), mscclppInvalidArgument);
  CHECK_RES(mscclppMemContextAlloc(ctx, mscclppMemKindHostShared, 10, NULL), mscclppInvalidArgument);
  CHECK_RES(mscclppMemContextAlloc(ctx, (mscclppMemKind_t)77, 10, &p), mscclppInvalidArgument);
  CHECK(errHas("kind 77"));
  CHECK_RES(mscclppMemContextAlloc(ctx, mscclppMemKindHost, 10, &p), mscclppInvalidUsage);
  CHECK(errHas("malloc"));
  if (!mscclppGpuIpcAvailable()) {
    CHECK_RES(mscclppMemContextAlloc(ctx, mscclppMemKindDevice, 10, &p), mscclppInvalidUsage);
    CHECK_RES(mscclppMemContextAlloc(ctx, mscclppMemKindDeviceCuMem, 10, &p), mscclppInvalidUsage);
  }
  CHECK(p == NULL); /* outputs only on success */
  CHECK_RES(mscclppMemContextFree(ctx, &x), mscclppInvalidArgument);
  CHECK(errHas("did not come from mscclppMemAlloc"));
  CHECK_RES(mscclppMemContextAlloc(ctx, mscclppMemKindHostShared, 100, &p), mscclppSuccess);
  CHECK(p != NULL && ((char*)p)[0] == 0 && ((char*)p)[99] == 0);
  CHECK_RES(mscclppMemContextFree(ctx, (char*)p + 8), mscclppInvalidArgument);
  CHECK(errHas("inside the allocation"));
  struct mscclppRegisteredMemory* m = NULL;
  CHECK_RES(mscclppMemRegister(ctx, p, 100, mscclppTransportAuto, &m), mscclppSuccess);
  CHECK_RES(mscclppMemContextFree(ctx, p), mscclppInvalidUsage);
  CHECK(errHas("1 registration(s) still cover it"));
  CHECK_RES(mscclppMemContextDestroy(ctx), mscclppInvalidUsage);
  CHECK(errHas("1 registered memories, 0 opened memories, 1 allocations"));
  CHECK_RES(mscclppMemDeregister(m), mscclppSuccess);
  CHECK_RES(mscclppMemContextFree(ctx, p), mscclppSuccess);
  /* HostPinned works everywhere (plain shared memory without a GPU). */
  CHECK_RES(mscclppMemContextAlloc(ctx, mscclppMemKindHostPinned, 5000, &p), mscclppSuccess);
  memset(p, 1, 5000);
  CHECK_RES(mscclppMemContextFree(ctx, p), mscclppSuccess);
  CHECK_RES(mscclppMemContextDestroy(ctx), mscclppSuccess);
}

static void testRegisterErrors(void) {
  struct mscclppMemContext* ctx = newCtx(&rank0);
  struct mscclppRegisteredMemory* m = NULL;
  char buf[256];
  CHECK_RES(mscclppMemRegister(ctx, NULL, 10, 0, &m), mscclppInvalidArgument);
  CHECK_RES(mscclppMemRegister(ctx, buf, 0, 0, &m), mscclppInvalidArgument);
  CHECK(errHas("size 0"));
  CHECK_RES(mscclppMemRegister(ctx, buf, sizeof(buf), 0x80, &m), mscclppInvalidArgument);
  CHECK(errHas("0x80"));
  /* Net before any network connection: allowed; the record carries no
   * network section until the transport attaches (then it is registered
   * with the provider when serialized or first used). */
  CHECK_RES(mscclppMemRegister(ctx, buf, sizeof(buf), mscclppTransportNet, &m), mscclppSuccess);
  if (m != NULL) {
    CHECK((m->transports & mscclppTransportNet) && !m->record.hasNet);
    CHECK_RES(mscclppMemDeregister(m), mscclppSuccess);
    m = NULL;
  }
  /* Net with a bad transport bit beside it still fails. */
  CHECK_RES(mscclppMemRegister(ctx, buf, sizeof(buf), mscclppTransportNet | 0x80, &m), mscclppInvalidArgument);
  CHECK(errHas("0x8"));
  CHECK_RES(mscclppMemRegister(ctx, (void*)(UINTPTR_MAX - 10), 100, 0, &m), mscclppInvalidArgument);
  CHECK(errHas("wraps"));
  if (!mscclppGpuIpcAvailable()) {
    CHECK_RES(mscclppMemRegister(ctx, buf, sizeof(buf), mscclppTransportCudaIpc, &m), mscclppInvalidUsage);
    CHECK(errHas("no CUDA device"));
  }
  CHECK(m == NULL);
  void* p = NULL;
  CHECK_RES(mscclppMemContextAlloc(ctx, mscclppMemKindHostShared, 100, &p), mscclppSuccess);
  size_t page = mscclppShmRoundUp(1);
  CHECK_RES(mscclppMemRegister(ctx, (char*)p + page - 100, 200, 0, &m), mscclppInvalidArgument);
  CHECK(errHas("runs past the end of its allocation"));
  /* The whole page is the allocation: registering all of it is fine. */
  CHECK_RES(mscclppMemRegister(ctx, p, page, 0, &m), mscclppSuccess);
  CHECK(m->kind == mscclppMemKindHostShared);
  CHECK(m->transports & mscclppTransportHostShm);
  CHECK(m->record.hasFd && !m->record.hasCudaIpc);
  CHECK(m->hostAccessible);
  CHECK_RES(mscclppMemDeregister(m), mscclppSuccess);
  /* Plain host memory: kind Host, no handles. */
  CHECK_RES(mscclppMemRegister(ctx, buf, sizeof(buf), mscclppTransportHostShm, &m), mscclppSuccess);
  CHECK(m->kind == mscclppMemKindHost && !m->record.hasFd && !m->record.hasCudaIpc);
  CHECK_RES(mscclppMemClose(m), mscclppInvalidUsage);
  CHECK(errHas("mscclppMemoryDeregister"));
  CHECK_RES(mscclppMemDeregister(m), mscclppSuccess);
  CHECK_RES(mscclppMemDeregister(NULL), mscclppInvalidArgument);
  CHECK_RES(mscclppMemContextFree(ctx, p), mscclppSuccess);
  CHECK_RES(mscclppMemContextDestroy(ctx), mscclppSuccess);
}

static void testLookup(void) {
  struct mscclppMemContext* ctx = newCtx(&rank0);
  char* b = malloc(1000);
  int unrelated = 0;
  struct mscclppRegisteredMemory *m = NULL, *found = NULL;
  size_t off = 12345;
  CHECK_RES(mscclppMemRegister(ctx, b, 1000, 0, &m), mscclppSuccess);
  CHECK_RES(mscclppMemLookup(ctx, b + 10, 20, &found, &off), mscclppSuccess);
  CHECK(found == m && off == 10);
  CHECK_RES(mscclppMemLookup(ctx, b, 1000, &found, &off), mscclppSuccess);
  CHECK(found == m && off == 0);
  found = NULL;
  off = 12345;
  CHECK_RES(mscclppMemLookup(ctx, b + 990, 20, &found, &off), mscclppInvalidArgument);
  CHECK(found == NULL && off == 12345);
  char text[32];
  snprintf(text, sizeof(text), "%p", (void*)&unrelated);
  CHECK_RES(mscclppMemLookup(ctx, &unrelated, 4, &found, &off), mscclppInvalidArgument);
  CHECK(errHas(text) && errHas("not inside memory registered by rank 0"));
  CHECK_RES(mscclppMemDeregister(m), mscclppSuccess);
  CHECK_RES(mscclppMemLookup(ctx, b + 10, 20, &found, &off), mscclppInvalidArgument);
  free(b);
  CHECK_RES(mscclppMemContextDestroy(ctx), mscclppSuccess);
}

/* ---- opening ---------------------------------------------------------------------- */

/* Re-encode a record with edits (as a rank of the job could). */
static size_t forge(const struct mscclppRegisteredMemory* m, void (*edit)(struct mscclppMemRecord*), uint8_t* buf) {
  struct mscclppMemRecord rec = m->record;
  edit(&rec);
  return mscclppMemRecordEncode(&rec, testSecret, buf, MSCCLPP_MEM_RECORD_MAX);
}
static void editOtherProcess(struct mscclppMemRecord* r) { r->ownerPid ^= 0x40000000u; }
static void editOtherHost(struct mscclppMemRecord* r) {
  r->hostHash = 0x9999;
  strcpy(r->hostName, "otherhost");
}
static void editDeviceKind(struct mscclppMemRecord* r) {
  editOtherProcess(r);
  r->kind = mscclppMemKindDevice;
  r->transports = mscclppTransportCudaIpc;
  r->hasFd = 0;
  r->hasCudaIpc = 1;
  r->cudaIpc.offset = 0;
  r->cudaIpc.allocSize = r->size;
}
static void editBadToken(struct mscclppMemRecord* r) {
  editOtherProcess(r);
  r->fd.token[0] ^= 1;
}
static void editBadExport(struct mscclppMemRecord* r) {
  editOtherProcess(r);
  r->fd.exportId += 1000;
}

static void testOpenSameProcess(void) {
  struct mscclppMemContext* c0 = newCtx(&rank0);
  struct mscclppMemContext* c1 = newCtx(&rank1);
  void* p = NULL;
  CHECK_RES(mscclppMemContextAlloc(c0, mscclppMemKindHostShared, 3000, &p), mscclppSuccess);
  struct mscclppRegisteredMemory *m = NULL, *o = NULL, *o1 = NULL;
  CHECK_RES(mscclppMemRegister(c0, (char*)p + 8, 2000, 0, &m), mscclppSuccess);
  uint8_t buf[MSCCLPP_MEM_RECORD_MAX];
  size_t n = 0, need = 0;
  CHECK_RES(mscclppMemSerialize(m, NULL, 0, &need), mscclppSuccess);
  CHECK_RES(mscclppMemSerialize(m, buf, need - 1, &n), mscclppInvalidArgument);
  char text[80];
  snprintf(text, sizeof(text), "takes %zu bytes, the buffer has %zu", need, need - 1);
  CHECK(errHas(text));
  CHECK_RES(mscclppMemSerialize(m, buf, sizeof(buf), &n), mscclppSuccess);
  CHECK(n == need);
  CHECK_RES(mscclppMemOpen(c0, buf, n, mscclppInvalidArgument, &o), mscclppSuccess);
  CHECK(o->ptr == (char*)p + 8 && o->size == 2000 && o->sameProcess && o->ownerRank == 0);
  CHECK(o->kind == mscclppMemKindHostShared && o->origin == MSCCLPP_MEM_OPENED && o->mapping == MSCCLPP_MEM_MAP_NONE);
  CHECK_RES(mscclppMemOpen(c1, buf, n, mscclppInvalidArgument, &o1), mscclppSuccess); /* another rank, same process */
  CHECK(o1->ptr == (char*)p + 8 && o1->ownerRank == 0);
  CHECK_RES(mscclppMemDeregister(o), mscclppInvalidUsage);
  CHECK(errHas("mscclppMemoryClose"));
  /* An opened record serializes again to the same bytes (records can be passed on). */
  uint8_t again[MSCCLPP_MEM_RECORD_MAX];
  size_t n2 = 0;
  CHECK_RES(mscclppMemSerialize(o1, again, sizeof(again), &n2), mscclppSuccess);
  CHECK(n2 == n && memcmp(buf, again, n) == 0);
  CHECK_RES(mscclppMemClose(o), mscclppSuccess);
  CHECK_RES(mscclppMemClose(o1), mscclppSuccess);
  CHECK_RES(mscclppMemDeregister(m), mscclppSuccess);
  CHECK_RES(mscclppMemContextFree(c0, p), mscclppSuccess);
  CHECK_RES(mscclppMemContextDestroy(c0), mscclppSuccess);
  CHECK_RES(mscclppMemContextDestroy(c1), mscclppSuccess);
}

/* A record that claims another process makes the opener fetch the memory
 * file from the fd server and map it a second time. */
static void testSecondMapping(void) {
  struct mscclppMemContext* c0 = newCtx(&rank0);
  struct mscclppMemContext* c1 = newCtx(&rank1);
  const size_t size = 3 * 4096 + 5;
  void* p = NULL;
  CHECK_RES(mscclppMemContextAlloc(c1, mscclppMemKindHostShared, size, &p), mscclppSuccess);
  struct mscclppRegisteredMemory *m = NULL, *o = NULL;
  CHECK_RES(mscclppMemRegister(c1, (char*)p + 3, size - 3, mscclppTransportHostShm, &m), mscclppSuccess);
  uint8_t buf[MSCCLPP_MEM_RECORD_MAX];
  size_t n = forge(m, editOtherProcess, buf);
  CHECK_RES(mscclppMemOpen(c0, buf, n, mscclppInvalidArgument, &o), mscclppSuccess);
  CHECK(o != NULL && !o->sameProcess && o->mapping == MSCCLPP_MEM_MAP_SHM && o->ptr != (char*)p + 3);
  if (o != NULL) {
    unsigned char* a = (unsigned char*)p + 3;
    unsigned char* b = o->ptr;
    for (size_t i = 0; i < size - 3; i++) a[i] = (unsigned char)(i * 7 + 1);
    int same = 1;
    for (size_t i = 0; i < size - 3; i++) same &= b[i] == (unsigned char)(i * 7 + 1);
    CHECK(same);
    b[size - 4] = 0xee; /* and back */
    CHECK(a[size - 4] == 0xee);
    CHECK_RES(mscclppMemClose(o), mscclppSuccess);
  }
  /* Wrong token, unknown export: the owner's server refuses, naming why. */
  n = forge(m, editBadToken, buf);
  CHECK_RES(mscclppMemOpen(c0, buf, n, mscclppInvalidArgument, &o), mscclppRemoteError);
  CHECK(errHas("refused the proof") && errHas("rank 1"));
  n = forge(m, editBadExport, buf);
  CHECK_RES(mscclppMemOpen(c0, buf, n, mscclppInvalidArgument, &o), mscclppRemoteError);
  CHECK(errHas("no longer exported"));
  /* Freed memory is no longer exported. */
  n = forge(m, editOtherProcess, buf);
  CHECK_RES(mscclppMemDeregister(m), mscclppSuccess);
  CHECK_RES(mscclppMemContextFree(c1, p), mscclppSuccess);
  CHECK_RES(mscclppMemOpen(c0, buf, n, mscclppInvalidArgument, &o), mscclppRemoteError);
  CHECK(errHas("no longer exported"));
  /* The owner's communicator is gone: nobody listens. */
  CHECK_RES(mscclppMemContextDestroy(c1), mscclppSuccess);
  CHECK_RES(mscclppMemOpen(c0, buf, n, mscclppInvalidArgument, &o), mscclppRemoteError);
  CHECK(errHas("connect"));
  CHECK_RES(mscclppMemContextDestroy(c0), mscclppSuccess);
}

static void testOpenRefusals(void) {
  struct mscclppMemContext* c0 = newCtx(&rank0);
  void* p = NULL;
  char plain[512];
  CHECK_RES(mscclppMemContextAlloc(c0, mscclppMemKindHostShared, 4096, &p), mscclppSuccess);
  struct mscclppRegisteredMemory *m = NULL, *mp = NULL, *o = NULL;
  CHECK_RES(mscclppMemRegister(c0, p, 4096, 0, &m), mscclppSuccess);
  CHECK_RES(mscclppMemRegister(c0, plain, sizeof(plain), 0, &mp), mscclppSuccess);
  uint8_t buf[MSCCLPP_MEM_RECORD_MAX];
  size_t n;

  n = forge(m, editOtherHost, buf);
  CHECK_RES(mscclppMemOpen(c0, buf, n, mscclppInvalidArgument, &o), mscclppInvalidUsage);
  CHECK(errHas("'otherhost'") && errHas("'testhost'") && errHas("same host"));

  n = forge(mp, editOtherProcess, buf);
  CHECK_RES(mscclppMemOpen(c0, buf, n, mscclppInvalidArgument, &o), mscclppInvalidUsage);
  CHECK(errHas("not allocated by mscclppMemAlloc"));

  if (!mscclppGpuIpcAvailable()) {
    n = forge(m, editDeviceKind, buf);
    CHECK_RES(mscclppMemOpen(c0, buf, n, mscclppInvalidArgument, &o), mscclppInvalidUsage);
    CHECK(errHas("no CUDA device"));
  }

  /* Another job (secret), altered, truncated, garbage. */
  struct loopRank other = {&lb, 5};
  struct mscclppMemConfig cfg = loopConfig(&other);
  cfg.secret[0] ^= 1;
  struct mscclppMemContext* stranger = NULL;
  CHECK_RES(mscclppMemContextCreate(&cfg, &stranger), mscclppSuccess);
  CHECK_RES(mscclppMemSerialize(m, buf, sizeof(buf), &n), mscclppSuccess);
  CHECK_RES(mscclppMemOpen(stranger, buf, n, mscclppInvalidArgument, &o), mscclppInvalidArgument);
  CHECK(errHas("another job"));
  buf[70] ^= 4;
  CHECK_RES(mscclppMemOpen(c0, buf, n, mscclppInvalidArgument, &o), mscclppInvalidArgument);
  CHECK(errHas("authentication"));
  buf[70] ^= 4;
  CHECK_RES(mscclppMemOpen(c0, buf, n - 1, mscclppInvalidArgument, &o), mscclppInvalidArgument);
  CHECK(errHas("truncated"));
  CHECK_RES(mscclppMemOpen(c0, "hello", 5, mscclppInvalidArgument, &o), mscclppInvalidArgument);
  CHECK_RES(mscclppMemOpen(c0, NULL, 5, mscclppInvalidArgument, &o), mscclppInvalidArgument);
  CHECK(o == NULL);
  CHECK_RES(mscclppMemContextDestroy(stranger), mscclppSuccess);

  CHECK_RES(mscclppMemDeregister(m), mscclppSuccess);
  CHECK_RES(mscclppMemDeregister(mp), mscclppSuccess);
  CHECK_RES(mscclppMemContextFree(c0, p), mscclppSuccess);
  CHECK_RES(mscclppMemContextDestroy(c0), mscclppSuccess);
}

/* ---- shared memory and the fd server directly ---------------------------------------------- */

static void testShmAndFdServer(void) {
  int fd = -1;
  void* base = NULL;
  size_t mapSize = 0;
  CHECK_RES(mscclppShmCreate(10000, &fd, &base, &mapSize), mscclppSuccess);
  CHECK(mapSize == mscclppShmRoundUp(10000) && mapSize >= 10000);
  void *b1 = NULL, *b2 = NULL;
  CHECK_RES(mscclppShmMap(fd, mapSize, &b1), mscclppSuccess);
  CHECK_RES(mscclppShmMap(fd, mapSize, &b2), mscclppSuccess);
  CHECK(b1 != base && b2 != base && b1 != b2);
  memset(base, 0x3c, mapSize);
  CHECK(((unsigned char*)b1)[mapSize - 1] == 0x3c && ((unsigned char*)b2)[0] == 0x3c);
  ((unsigned char*)b2)[17] = 0x99;
  CHECK(((unsigned char*)base)[17] == 0x99 && ((unsigned char*)b1)[17] == 0x99);
  void* b3 = NULL;
  CHECK_RES(mscclppShmMap(fd, mapSize + 4096, &b3), mscclppInvalidArgument);
  CHECK(errHas("but") && b3 == NULL);

  struct mscclppFdServer* srv = NULL;
  CHECK_RES(mscclppFdServerCreate(5, &srv), mscclppSuccess);
  uint64_t id = 0;
  uint8_t token[MSCCLPP_FD_TOKEN_BYTES];
  CHECK_RES(mscclppFdServerExport(srv, dup(fd), &id, token), mscclppSuccess);
  int got = -1;
  CHECK_RES(mscclppFdFetch(mscclppFdServerName(srv), id, token, 3, mscclppDeadlineIn(5), NULL, &got),
            mscclppSuccess);
  CHECK(got >= 0 && got != fd);
  void* b4 = NULL;
  CHECK_RES(mscclppShmMap(got, mapSize, &b4), mscclppSuccess);
  CHECK(b4 != NULL && ((unsigned char*)b4)[17] == 0x99);
  close(got);
  uint8_t wrong[MSCCLPP_FD_TOKEN_BYTES];
  memcpy(wrong, token, sizeof(wrong));
  wrong[5] ^= 1;
  got = -1;
  CHECK_RES(mscclppFdFetch(mscclppFdServerName(srv), id, wrong, 3, mscclppDeadlineIn(5), NULL, &got),
            mscclppRemoteError);
  CHECK(errHas("refused the proof") && errHas("rank 3") && got == -1);
  CHECK_RES(mscclppFdServerUnexport(srv, id), mscclppSuccess);
  CHECK_RES(mscclppFdServerUnexport(srv, id), mscclppInvalidArgument);
  CHECK_RES(mscclppFdFetch(mscclppFdServerName(srv), id, token, 3, mscclppDeadlineIn(5), NULL, &got),
            mscclppRemoteError);
  CHECK(errHas("no longer exported"));
  /* An abort flag already up stops the wait. */
  CHECK_RES(mscclppFdServerExport(srv, dup(fd), &id, token), mscclppSuccess);
  uint32_t abortFlag = 1;
  CHECK_RES(mscclppFdFetch(mscclppFdServerName(srv), id, token, 3, mscclppDeadlineIn(5), &abortFlag, &got),
            mscclppAborted);
  char name[MSCCLPP_FD_SERVER_NAME_MAX];
  snprintf(name, sizeof(name), "%s", mscclppFdServerName(srv));
  mscclppFdServerDestroy(srv);
  CHECK_RES(mscclppFdFetch(name, id, token, 3, mscclppDeadlineIn(5), NULL, &got), mscclppRemoteError);
  CHECK(errHas("connect"));
  mscclppShmUnmap(b1, mapSize);
  mscclppShmUnmap(b2, mapSize);
  mscclppShmUnmap(b4, mapSize);
  mscclppShmUnmap(base, mapSize);
  close(fd);
}

/* ---- send / recv through the bootstrap -------------------------------------------------- */

static void testSendRecv(void) {
  struct mscclppMemContext* c0 = newCtx(&rank0);
  struct mscclppMemContext* c1 = newCtx(&rank1);
  void* p = NULL;
  CHECK_RES(mscclppMemContextAlloc(c0, mscclppMemKindHostShared, 64, &p), mscclppSuccess);
  struct mscclppRegisteredMemory *m = NULL, *o = NULL;
  CHECK_RES(mscclppMemRegister(c0, p, 64, 0, &m), mscclppSuccess);
  CHECK_RES(mscclppMemSend(c0, m, 1, 5), mscclppSuccess);
  CHECK_RES(mscclppMemSend(c0, m, 0, 6), mscclppSuccess); /* to itself */
  CHECK_RES(mscclppMemRecv(c1, 0, 5, &o), mscclppSuccess);
  CHECK(o != NULL && o->ptr == p && o->ownerRank == 0 && o->size == 64);
  if (o) CHECK_RES(mscclppMemClose(o), mscclppSuccess);
  CHECK_RES(mscclppMemRecv(c0, 0, 6, &o), mscclppSuccess);
  if (o) CHECK_RES(mscclppMemClose(o), mscclppSuccess);
  /* A peer announcing a huge record, or sending garbage: mscclppRemoteError. */
  uint8_t len[8] = {0x88, 0x13, 0, 0, 0, 0, 0, 0}; /* 5000 */
  CHECK_RES(loopSend(&rank1, 0, 7, len, sizeof(len)), mscclppSuccess);
  o = NULL;
  CHECK_RES(mscclppMemRecv(c0, 1, 7, &o), mscclppRemoteError);
  CHECK(errHas("5000 bytes") && o == NULL);
  uint8_t junk[100];
  memset(junk, 0x42, sizeof(junk));
  len[0] = 100;
  len[1] = 0;
  CHECK_RES(loopSend(&rank1, 0, 8, len, sizeof(len)), mscclppSuccess);
  CHECK_RES(loopSend(&rank1, 0, 8, junk, sizeof(junk)), mscclppSuccess);
  CHECK_RES(mscclppMemRecv(c0, 1, 8, &o), mscclppRemoteError);
  CHECK(errHas("refused a memory record") && errHas("magic"));
  CHECK_RES(mscclppMemDeregister(m), mscclppSuccess);
  CHECK_RES(mscclppMemContextFree(c0, p), mscclppSuccess);
  CHECK_RES(mscclppMemContextDestroy(c0), mscclppSuccess);
  CHECK_RES(mscclppMemContextDestroy(c1), mscclppSuccess);
}

/* ---- across processes: a forked child owns the memory ----------------------------------- */

static int readFull(int fd, void* buf, size_t n) {
  size_t done = 0;
  while (done < n) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 10000) != 1) return 0;
    ssize_t r = read(fd, (char*)buf + done, n - done);
    if (r <= 0) return 0;
    done += (size_t)r;
  }
  return 1;
}

static int writeFull(int fd, const void* buf, size_t n) { return write(fd, buf, n) == (ssize_t)n; }

#define CHILD_BYTES ((size_t)(1 << 20) + 3)

static int childMain(int rd, int wr) {
  struct mscclppMemConfig cfg = loopConfig(&rank1);
  struct mscclppMemContext* ctx = NULL;
  if (mscclppMemContextCreate(&cfg, &ctx) != mscclppSuccess) return 10;
  void* p = NULL;
  if (mscclppMemContextAlloc(ctx, mscclppMemKindHostShared, CHILD_BYTES, &p) != mscclppSuccess) return 11;
  unsigned char* b = p;
  for (size_t i = 0; i < CHILD_BYTES; i++) b[i] = (unsigned char)(i * 7 + 3);
  struct mscclppRegisteredMemory* m = NULL;
  if (mscclppMemRegister(ctx, p, CHILD_BYTES, 0, &m) != mscclppSuccess) return 12;
  uint8_t rec[MSCCLPP_MEM_RECORD_MAX];
  size_t n = 0;
  if (mscclppMemSerialize(m, rec, sizeof(rec), &n) != mscclppSuccess) return 13;
  uint32_t n32 = (uint32_t)n;
  if (!writeFull(wr, &n32, sizeof(n32)) || !writeFull(wr, rec, n)) return 14;
  char go;
  if (!readFull(rd, &go, 1)) return 15; /* the parent wrote its pattern */
  char ok = 1;
  for (size_t i = 100; i < 100 + 5001; i++) ok &= b[i] == (unsigned char)(i * 13);
  if (!writeFull(wr, &ok, 1)) return 16;
  if (!readFull(rd, &go, 1)) return 17; /* the parent closed its mapping */
  if (mscclppMemDeregister(m) != mscclppSuccess || mscclppMemContextFree(ctx, p) != mscclppSuccess ||
      mscclppMemContextDestroy(ctx) != mscclppSuccess)
    return 18;
  return 0;
}

static void testCrossProcess(void) {
  int toChild[2], toParent[2];
  CHECK(pipe(toChild) == 0 && pipe(toParent) == 0);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    close(toChild[1]);
    close(toParent[0]);
    _exit(childMain(toChild[0], toParent[1]));
  }
  close(toChild[0]);
  close(toParent[1]);
  CHECK(pid > 0);
  struct mscclppMemContext* ctx = newCtx(&rank0);
  uint32_t n = 0;
  uint8_t rec[MSCCLPP_MEM_RECORD_MAX];
  CHECK(readFull(toParent[0], &n, sizeof(n)) && n <= sizeof(rec) && readFull(toParent[0], rec, n));
  struct mscclppRegisteredMemory* o = NULL;
  CHECK_RES(mscclppMemOpen(ctx, rec, n, mscclppInvalidArgument, &o), mscclppSuccess);
  char ok = 0, one = 1;
  if (o != NULL) {
    CHECK(!o->sameProcess && o->mapping == MSCCLPP_MEM_MAP_SHM && o->ownerRank == 1 && o->size == CHILD_BYTES);
    unsigned char* b = o->ptr;
    int same = 1;
    for (size_t i = 0; i < CHILD_BYTES; i++) same &= b[i] == (unsigned char)(i * 7 + 3);
    CHECK(same);
    for (size_t i = 100; i < 100 + 5001; i++) b[i] = (unsigned char)(i * 13);
  }
  CHECK(writeFull(toChild[1], &one, 1));
  CHECK(readFull(toParent[0], &ok, 1) && ok == 1);
  if (o != NULL) CHECK_RES(mscclppMemClose(o), mscclppSuccess);
  CHECK(writeFull(toChild[1], &one, 1));
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fprintf(stderr, "  child status 0x%x\n", status);
  /* The owner is gone: opening again fails, naming it. */
  o = NULL;
  CHECK_RES(mscclppMemOpen(ctx, rec, n, mscclppInvalidArgument, &o), mscclppRemoteError);
  CHECK(errHas("rank 1") && o == NULL);
  close(toChild[1]);
  close(toParent[0]);
  CHECK_RES(mscclppMemContextDestroy(ctx), mscclppSuccess);
}


/* ---- GPU memory (skipped without a GPU) ------------------------------------------------- */

#ifdef MSCCLPP_HAVE_CUDA
#include <cuda_runtime_api.h>

static void testGpuRegister(void) {
  if (!mscclppGpuIpcAvailable()) SKIP_CASE("needs a GPU");
  struct mscclppMemContext* ctx = newCtx(&rank0);
  void *dev = NULL, *cu = NULL, *ext = NULL, *managed = NULL;
  CHECK_RES(mscclppMemContextAlloc(ctx, mscclppMemKindDevice, 1000, &dev), mscclppSuccess);
  CHECK_RES(mscclppMemContextAlloc(ctx, mscclppMemKindDeviceCuMem, 1000, &cu), mscclppSuccess);
  CHECK(cudaMalloc(&ext, 1 << 20) == cudaSuccess);
  struct mscclppRegisteredMemory *mDev = NULL, *mCu = NULL, *mExt = NULL, *mExtCu = NULL, *bad = NULL, *o = NULL;
  CHECK_RES(mscclppMemRegister(ctx, dev, 1000, 0, &mDev), mscclppSuccess);
  CHECK(mDev && mDev->kind == mscclppMemKindDevice && mDev->record.hasCudaIpc && !mDev->hostAccessible);
  CHECK(mDev && mDev->transports == mscclppTransportCudaIpc);
  CHECK_RES(mscclppMemRegister(ctx, cu, 1000, 0, &mCu), mscclppSuccess);
  CHECK(mCu && mCu->kind == mscclppMemKindDeviceCuMem && mCu->record.hasFd && mCu->record.fd.mapSize >= 1000);
  /* Memory the library did not allocate, at an offset inside its allocation. */
  CHECK_RES(mscclppMemRegister(ctx, (char*)ext + 4096, 8192, 0, &mExt), mscclppSuccess);
  CHECK(mExt && mExt->kind == mscclppMemKindDevice && mExt->record.cudaIpc.offset == 4096 &&
        mExt->record.cudaIpc.allocSize >= (1 << 20));
  CHECK_RES(mscclppMemRegister(ctx, (char*)ext + 4096, 1 << 20, 0, &bad), mscclppInvalidArgument);
  CHECK(errHas("runs past the end of its allocation"));
  CHECK_RES(mscclppMemRegister(ctx, dev, 1000, mscclppTransportHostShm, &bad), mscclppInvalidArgument);
  CHECK(errHas("cannot use transport HostShm"));
  /* cuMem memory mapped elsewhere (through the gpu layer, not the context). */
  void* extCu = NULL;
  size_t extCuSize = 0;
  CHECK_RES(mscclppGpuCuMemAlloc(3 << 20, &extCu, &extCuSize), mscclppSuccess);
  CHECK_RES(mscclppMemRegister(ctx, (char*)extCu + 100, 5000, 0, &mExtCu), mscclppSuccess);
  CHECK(mExtCu && mExtCu->kind == mscclppMemKindDeviceCuMem && mExtCu->cuMemExported &&
        mExtCu->record.fd.offset == 100);
  if (cudaMallocManaged(&managed, 4096, cudaMemAttachGlobal) == cudaSuccess) {
    CHECK_RES(mscclppMemRegister(ctx, managed, 4096, 0, &bad), mscclppInvalidArgument);
    CHECK(errHas("managed memory"));
    cudaFree(managed);
  }
  CHECK(bad == NULL);
  /* Same process: opening gives the owner's pointer back (CUDA cannot open its own handles). */
  uint8_t buf[MSCCLPP_MEM_RECORD_MAX];
  size_t n = 0;
  CHECK_RES(mscclppMemSerialize(mExt, buf, sizeof(buf), &n), mscclppSuccess);
  CHECK_RES(mscclppMemOpen(ctx, buf, n, mscclppInvalidArgument, &o), mscclppSuccess);
  CHECK(o && o->ptr == (char*)ext + 4096 && o->sameProcess);
  if (o) CHECK_RES(mscclppMemClose(o), mscclppSuccess);
  /* A cuMem record opened through the fd server (a second mapping of the same memory). */
  n = forge(mCu, editOtherProcess, buf);
  o = NULL;
  CHECK_RES(mscclppMemOpen(ctx, buf, n, mscclppInvalidArgument, &o), mscclppSuccess);
  if (o) {
    CHECK(o->mapping == MSCCLPP_MEM_MAP_CUMEM && o->ptr != cu);
    unsigned char pat[1000], back[1000];
    for (int i = 0; i < 1000; i++) pat[i] = (unsigned char)(i * 5 + 2);
    CHECK(cudaMemcpy(cu, pat, 1000, cudaMemcpyHostToDevice) == cudaSuccess);
    CHECK(cudaMemcpy(back, o->ptr, 1000, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(memcmp(pat, back, 1000) == 0);
    CHECK_RES(mscclppMemClose(o), mscclppSuccess);
  }
  CHECK_RES(mscclppMemDeregister(mDev), mscclppSuccess);
  CHECK_RES(mscclppMemDeregister(mCu), mscclppSuccess);
  CHECK_RES(mscclppMemDeregister(mExt), mscclppSuccess);
  CHECK_RES(mscclppMemDeregister(mExtCu), mscclppSuccess);
  CHECK_RES(mscclppGpuCuMemUnmap(extCu, extCuSize), mscclppSuccess);
  CHECK_RES(mscclppMemContextFree(ctx, dev), mscclppSuccess);
  CHECK_RES(mscclppMemContextFree(ctx, cu), mscclppSuccess);
  cudaFree(ext);
  CHECK_RES(mscclppMemContextDestroy(ctx), mscclppSuccess);
}
#else
static void testGpuRegister(void) { SKIP_CASE("built without CUDA"); }
#endif

static void testNoMessageLeft(void) { CHECK(loopFini(&lb) == 0); }

int main(int argc, char** argv) {
  harnessInit(argc, argv);
  setenv("MSCCLPP_DEBUG", "NONE", 1);
  loopInit(&lb, 10);
  RUN(testRecordRoundTrip);
  RUN(testRecordRefusals);
  RUN(testAllocErrors);
  RUN(testRegisterErrors);
  RUN(testLookup);
  RUN(testOpenSameProcess);
  RUN(testSecondMapping);
  RUN(testOpenRefusals);
  RUN(testShmAndFdServer);
  RUN(testSendRecv);
  RUN(testCrossProcess);
  RUN(testGpuRegister);
  RUN(testNoMessageLeft);
  return harnessFinish();
}
