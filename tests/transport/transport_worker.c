/* SPDX-License-Identifier: MIT */
/*
 * One rank of the multi-process memory/transport tests, started by
 * mscclpp-run:
 *
 *   transport_worker host    every rank allocates host shared memory,
 *                            registers it, sends the record to every rank
 *                            (itself included), opens theirs, connects to
 *                            every rank with HostShm, writes its slot into
 *                            every peer's buffer, signals, flushes; then
 *                            checks its buffer byte for byte
 *   transport_worker errors  MSCCLPP_HOSTID puts even and odd ranks on two
 *                            "hosts": records and connections across them
 *                            are refused on both sides, naming the hosts;
 *                            plain host memory cannot be opened by another
 *                            process; a communicator with live memory
 *                            refuses to be destroyed
 *   transport_worker gpu     (exit 77 without a GPU) the same exchange as
 *                            host with cudaMalloc, cuMem and pinned host
 *                            memory over CudaIpc; signals into device memory
 *                            and into pinned host memory
 *
 * Each rank prints "rank R: <mode> passed" and exits 0 on success.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/util.h"
#include "gpu/gpu_ipc.h"
#include "harness.h"
#include "mscclpp/comm.h"
#include "mscclpp/connection.h"
#include "mscclpp/memory.h"
#include "transport/net/net.h"
#include "transport/transport.h"

#ifdef MSCCLPP_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

static int rank = -1, nranks = -1;
static mscclppComm_t theComm;

#define CHUNK ((size_t)65537 + 13) /* odd on purpose */
#define TAG_MEM 1
#define TAG_CONN 2
#define MAX_RANKS 64

static unsigned char pattern(int r, size_t i) { return (unsigned char)(r * 131 + (int)(i * 7) + (int)(i >> 11) + 1); }

static size_t flagOffset(void) { return ((size_t)nranks * CHUNK + 63) / 64 * 64; }

static mscclppComm_t initComm(void) {
  mscclppComm_t comm = NULL;
  mscclppResult_t res = mscclppCommInitFromEnv(&comm);
  if (res != mscclppSuccess) {
    fprintf(stderr, "rank ?: mscclppCommInitFromEnv failed: %s: %s\n", mscclppGetErrorString(res),
            mscclppGetLastError());
    exit(1);
  }
  mscclppCommRank(comm, &rank);
  mscclppCommSize(comm, &nranks);
  if (nranks > MAX_RANKS) {
    fprintf(stderr, "rank %d: at most %d ranks\n", rank, MAX_RANKS);
    exit(1);
  }
  return comm;
}

/* Wait until the 64-bit word at p (host memory) equals v; 30 s at most. */
static int waitWord(const uint64_t* p, uint64_t v) {
  mscclppDeadline d = mscclppDeadlineIn(30);
  while (__atomic_load_n(p, __ATOMIC_ACQUIRE) != v) {
    if (mscclppDeadlinePassed(d)) return 0;
    sched_yield();
  }
  return 1;
}

static size_t countBad(const unsigned char* buf, int r) {
  size_t bad = 0;
  for (size_t i = 0; i < CHUNK; i++) bad += buf[i] != pattern(r, i);
  return bad;
}

/* ---- host --------------------------------------------------------------------------- */

static void testHost(void) {
  mscclppComm_t comm = theComm;
  const size_t total = flagOffset() + (size_t)nranks * 8;
  void *buf = NULL, *src = NULL;
  CHECK_RES(mscclppMemAlloc(comm, mscclppMemKindHostShared, total, &buf), mscclppSuccess);
  CHECK_RES(mscclppMemAlloc(comm, mscclppMemKindHostShared, CHUNK + 1, &src), mscclppSuccess);
  if (buf == NULL || src == NULL) return;
  for (size_t i = 0; i < CHUNK; i++) ((unsigned char*)src)[i + 1] = pattern(rank, i);
  mscclppRegisteredMemory_t bufMem = NULL, srcMem = NULL, remote[MAX_RANKS] = {0};
  mscclppConnection_t conn[MAX_RANKS] = {0};
  CHECK_RES(mscclppMemoryRegister(comm, buf, total, mscclppTransportHostShm, &bufMem), mscclppSuccess);
  /* the earlier spelling (an alias, memory.h) still works */
  CHECK_RES(mscclppRegisterMemory(comm, src, CHUNK + 1, mscclppTransportHostShm, &srcMem), mscclppSuccess);
  for (int p = 0; p < nranks; p++) CHECK_RES(mscclppMemorySend(comm, bufMem, p, TAG_MEM), mscclppSuccess);
  for (int p = 0; p < nranks; p++) {
    CHECK_RES(mscclppMemoryRecv(comm, p, TAG_MEM, &remote[p]), mscclppSuccess);
    int owner = -1;
    size_t size = 0;
    if (remote[p] == NULL) return;
    CHECK_RES(mscclppMemoryRank(remote[p], &owner), mscclppSuccess);
    CHECK_RES(mscclppMemorySize(remote[p], &size), mscclppSuccess);
    CHECK(owner == p && size == total);
  }
  for (int p = 0; p < nranks; p++) {
    CHECK_RES(mscclppConnectionCreate(comm, p, TAG_CONN, mscclppTransportHostShm, &conn[p]), mscclppSuccess);
    mscclppTransport_t t = mscclppTransportAuto;
    int remoteRank = -1;
    if (conn[p] == NULL) return;
    CHECK_RES(mscclppConnectionTransport(conn[p], &t), mscclppSuccess);
    CHECK_RES(mscclppConnectionRemoteRank(conn[p], &remoteRank), mscclppSuccess);
    CHECK(t == mscclppTransportHostShm && remoteRank == p);
  }
  /* My slot into every buffer (unaligned source), then the flag. */
  for (int p = 0; p < nranks; p++) {
    CHECK_RES(mscclppConnectionWrite(conn[p], remote[p], (uint64_t)rank * CHUNK, srcMem, 1, CHUNK), mscclppSuccess);
    CHECK_RES(mscclppConnectionSignal(conn[p], remote[p], flagOffset() + (uint64_t)rank * 8, 1000 + (uint64_t)rank),
              mscclppSuccess);
    CHECK_RES(mscclppConnectionFlush(conn[p]), mscclppSuccess);
  }
  /* Errors through the public API, naming the values. */
  CHECK_RES(mscclppConnectionWrite(conn[0], remote[0], total - 4, srcMem, 0, 8), mscclppInvalidArgument);
  CHECK(strstr(mscclppGetLastError(), "runs past the end") != NULL);
  CHECK_RES(mscclppConnectionSignal(conn[0], remote[0], 3, 1), mscclppInvalidArgument);
  /* Every peer's slot, byte for byte, once its flag is up. */
  const unsigned char* b = buf;
  for (int p = 0; p < nranks; p++) {
    int up = waitWord((const uint64_t*)(b + flagOffset() + (size_t)p * 8), 1000 + (uint64_t)p);
    CHECK(up);
    if (!up) fprintf(stderr, "rank %d: no flag from rank %d\n", rank, p);
    size_t bad = countBad(b + (size_t)p * CHUNK, p);
    if (bad) fprintf(stderr, "rank %d: slot of rank %d has %zu wrong bytes\n", rank, p, bad);
    CHECK(bad == 0);
  }
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess); /* nobody writes into my buffer any more */
  for (int p = 0; p < nranks; p++) {
    CHECK_RES(mscclppConnectionDestroy(conn[p]), mscclppSuccess);
    CHECK_RES(mscclppMemoryClose(remote[p]), mscclppSuccess);
  }
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess); /* nobody maps my buffer any more */
  CHECK_RES(mscclppMemoryDeregister(bufMem), mscclppSuccess);
  CHECK_RES(mscclppDeregisterMemory(srcMem), mscclppSuccess);
  CHECK_RES(mscclppMemFree(comm, buf), mscclppSuccess);
  CHECK_RES(mscclppMemFree(comm, src), mscclppSuccess);
}

/* ---- errors across processes ---------------------------------------------------------------- */

static void testErrors(void) {
  mscclppComm_t comm = theComm;
  if (nranks < 2 || nranks % 2 != 0) {
    fprintf(stderr, "rank %d: errors needs an even number of ranks\n", rank);
    CHECK(0);
    return;
  }
  int peer = rank ^ 1; /* on the other "host" */
  void* buf = NULL;
  char plain[256];
  mscclppRegisteredMemory_t mem = NULL, plainMem = NULL, got = NULL;
  CHECK_RES(mscclppMemAlloc(comm, mscclppMemKindHostShared, 4096, &buf), mscclppSuccess);
  CHECK_RES(mscclppMemoryRegister(comm, buf, 4096, 0, &mem), mscclppSuccess);
  CHECK_RES(mscclppMemoryRegister(comm, plain, sizeof(plain), 0, &plainMem), mscclppSuccess);
  {
    CHECK_RES(mscclppMemorySend(comm, mem, peer, TAG_MEM), mscclppSuccess);
    CHECK_RES(mscclppMemoryRecv(comm, peer, TAG_MEM, &got), mscclppInvalidUsage);
    CHECK(strstr(mscclppGetLastError(), "same host") != NULL && strstr(mscclppGetLastError(), "host-") != NULL);
    CHECK(got == NULL);
    /* Between hosts, Auto takes the network where libfabric loads, and
     * names the missing piece where it does not. A host-only transport asked
     * for by name still fails, on both sides. */
    mscclppConnection_t c = NULL;
    if (mscclppNetLibAvailable()) {
      CHECK_RES(mscclppConnectionCreate(comm, peer, TAG_CONN, mscclppTransportAuto, &c), mscclppSuccess);
      CHECK(c != NULL && c->ops->transport == mscclppTransportNet);
      if (c != NULL) CHECK_RES(mscclppConnectionDestroy(c), mscclppSuccess);
      c = NULL;
    } else {
      CHECK_RES(mscclppConnectionCreate(comm, peer, TAG_CONN, mscclppTransportAuto, &c), mscclppInvalidUsage);
      CHECK(strstr(mscclppGetLastError(), "different hosts") != NULL &&
            strstr(mscclppGetLastError(), "libfabric") != NULL);
    }
    CHECK_RES(mscclppConnectionCreate(comm, peer, TAG_CONN + 100, mscclppTransportHostShm, &c), mscclppInvalidUsage);
    CHECK(strstr(mscclppGetLastError(), "different hosts") != NULL);
    CHECK(c == NULL);
  }
  /* Plain host memory reaches no other process; the same process opens it. */
  int same = (rank + 2) % nranks; /* same "host" as this rank when nranks > 2 */
  if (nranks > 2) {
    CHECK_RES(mscclppMemorySend(comm, plainMem, same, TAG_MEM + 10), mscclppSuccess);
    int from = (rank - 2 + nranks) % nranks;
    CHECK_RES(mscclppMemoryRecv(comm, from, TAG_MEM + 10, &got), mscclppInvalidUsage);
    CHECK(strstr(mscclppGetLastError(), "not allocated by mscclppMemAlloc") != NULL);
  }
  CHECK_RES(mscclppMemorySend(comm, plainMem, rank, TAG_MEM + 20), mscclppSuccess);
  CHECK_RES(mscclppMemoryRecv(comm, rank, TAG_MEM + 20, &got), mscclppSuccess);
  if (got != NULL) CHECK_RES(mscclppMemoryClose(got), mscclppSuccess);
  /* Live memory keeps the communicator. */
  CHECK_RES(mscclppCommDestroy(comm), mscclppInvalidUsage);
  CHECK(strstr(mscclppGetLastError(), "registered memories") != NULL);
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess); /* still usable */
  CHECK_RES(mscclppMemoryDeregister(mem), mscclppSuccess);
  CHECK_RES(mscclppMemoryDeregister(plainMem), mscclppSuccess);
  CHECK_RES(mscclppMemFree(comm, buf), mscclppSuccess);
}

/* ---- GPU ---------------------------------------------------------------------------------- */

#ifdef MSCCLPP_HAVE_CUDA
#define CUDA_OK(call)                                                                           \
  do {                                                                                          \
    cudaError_t e_ = (call);                                                                    \
    if (e_ != cudaSuccess) {                                                                    \
      fprintf(stderr, "rank %d: %s: %s\n", rank, #call, cudaGetErrorString(e_));                \
      CHECK(0);                                                                                 \
    }                                                                                           \
  } while (0)

/* Exchange a registration with every rank; remote[p] is rank p's. */
static void exchange(mscclppComm_t comm, mscclppRegisteredMemory_t mine, int tag, mscclppRegisteredMemory_t* remote) {
  for (int p = 0; p < nranks; p++) CHECK_RES(mscclppMemorySend(comm, mine, p, tag), mscclppSuccess);
  for (int p = 0; p < nranks; p++) CHECK_RES(mscclppMemoryRecv(comm, p, tag, &remote[p]), mscclppSuccess);
}

static void testGpu(void) {
  mscclppComm_t comm = theComm;
  int ndev = 0, localRank = 0;
  CUDA_OK(cudaGetDeviceCount(&ndev));
  CHECK_RES(mscclppCommLocalRank(comm, &localRank), mscclppSuccess);
  CUDA_OK(cudaSetDevice(localRank % ndev));
  const size_t total = flagOffset() + (size_t)nranks * 8;
  void *dev = NULL, *cumem = NULL, *pinned = NULL, *src = NULL, *ext = NULL;
  CHECK_RES(mscclppMemAlloc(comm, mscclppMemKindDevice, total, &dev), mscclppSuccess);
  CHECK_RES(mscclppMemAlloc(comm, mscclppMemKindDeviceCuMem, total, &cumem), mscclppSuccess);
  CHECK_RES(mscclppMemAlloc(comm, mscclppMemKindHostPinned, (size_t)nranks * 8, &pinned), mscclppSuccess);
  CUDA_OK(cudaMalloc(&ext, total + 512)); /* memory the library did not allocate, registered at an offset */
  CUDA_OK(cudaMalloc(&src, CHUNK));
  if (!dev || !cumem || !pinned || !src || !ext) return;
  unsigned char* host = malloc(total);
  for (size_t i = 0; i < CHUNK; i++) host[i] = pattern(rank, i);
  CUDA_OK(cudaMemcpy(src, host, CHUNK, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(ext, 0, total + 512));
  mscclppRegisteredMemory_t mDev, mCu, mPin, mExt, mSrc;
  mscclppRegisteredMemory_t rDev[MAX_RANKS], rCu[MAX_RANKS], rPin[MAX_RANKS], rExt[MAX_RANKS];
  CHECK_RES(mscclppMemoryRegister(comm, dev, total, mscclppTransportCudaIpc, &mDev), mscclppSuccess);
  CHECK_RES(mscclppMemoryRegister(comm, cumem, total, mscclppTransportCudaIpc, &mCu), mscclppSuccess);
  CHECK_RES(mscclppMemoryRegister(comm, pinned, (size_t)nranks * 8, mscclppTransportCudaIpc, &mPin), mscclppSuccess);
  CHECK_RES(mscclppMemoryRegister(comm, (char*)ext + 512, total, mscclppTransportCudaIpc, &mExt), mscclppSuccess);
  CHECK_RES(mscclppMemoryRegister(comm, src, CHUNK, mscclppTransportCudaIpc, &mSrc), mscclppSuccess);
  mscclppMemKind_t kind;
  CHECK_RES(mscclppMemoryKind(mCu, &kind), mscclppSuccess);
  CHECK(kind == mscclppMemKindDeviceCuMem);
  CHECK_RES(mscclppMemoryKind(mExt, &kind), mscclppSuccess);
  CHECK(kind == mscclppMemKindDevice);
  exchange(comm, mDev, 10, rDev);
  exchange(comm, mCu, 11, rCu);
  exchange(comm, mPin, 12, rPin);
  exchange(comm, mExt, 13, rExt);
  mscclppConnection_t conn[MAX_RANKS];
  for (int p = 0; p < nranks; p++)
    CHECK_RES(mscclppConnectionCreate(comm, p, TAG_CONN, mscclppTransportCudaIpc, &conn[p]), mscclppSuccess);
  if (harnessFailures_) return;
  for (int p = 0; p < nranks; p++) {
    uint64_t slot = (uint64_t)rank * CHUNK;
    CHECK_RES(mscclppConnectionWrite(conn[p], rDev[p], slot, mSrc, 0, CHUNK), mscclppSuccess);
    CHECK_RES(mscclppConnectionWrite(conn[p], rCu[p], slot, mSrc, 0, CHUNK), mscclppSuccess);
    CHECK_RES(mscclppConnectionWrite(conn[p], rExt[p], slot + 1, mSrc, 1, CHUNK - 1), mscclppSuccess);
    /* Device memory: a stream-ordered write; pinned host memory: a CPU store. */
    CHECK_RES(mscclppConnectionSignal(conn[p], rDev[p], flagOffset() + (uint64_t)rank * 8, 7000 + (uint64_t)rank),
              mscclppSuccess);
    CHECK_RES(mscclppConnectionSignal(conn[p], rPin[p], (uint64_t)rank * 8, 9000 + (uint64_t)rank), mscclppSuccess);
    CHECK_RES(mscclppConnectionFlush(conn[p]), mscclppSuccess);
  }
  /* The pinned flags (written after the copies completed) and the device
   * flags (written behind them) tell every slot is complete. */
  for (int p = 0; p < nranks; p++) CHECK(waitWord((const uint64_t*)pinned + p, 9000 + (uint64_t)p));
  mscclppDeadline d = mscclppDeadlineIn(30);
  int allUp = 0;
  while (!allUp && !mscclppDeadlinePassed(d)) {
    uint64_t flags[MAX_RANKS];
    CUDA_OK(cudaMemcpy(flags, (char*)dev + flagOffset(), (size_t)nranks * 8, cudaMemcpyDeviceToHost));
    allUp = 1;
    for (int p = 0; p < nranks; p++) allUp &= flags[p] == 7000 + (uint64_t)p;
  }
  CHECK(allUp);
  void* bufs[3] = {dev, cumem, (char*)ext + 512};
  const char* names[3] = {"cudaMalloc", "cuMem", "external cudaMalloc"};
  for (int k = 0; k < 3; k++) {
    CUDA_OK(cudaMemcpy(host, bufs[k], total, cudaMemcpyDeviceToHost));
    for (int p = 0; p < nranks; p++) {
      size_t bad = countBad(host + (size_t)p * CHUNK, p);
      if (k == 2) bad -= host[(size_t)p * CHUNK] != pattern(p, 0); /* byte 0 was not written */
      if (bad) fprintf(stderr, "rank %d: %s slot of rank %d has %zu wrong bytes\n", rank, names[k], p, bad);
      CHECK(bad == 0);
    }
  }
  free(host);
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  for (int p = 0; p < nranks; p++) {
    CHECK_RES(mscclppConnectionDestroy(conn[p]), mscclppSuccess);
    CHECK_RES(mscclppMemoryClose(rDev[p]), mscclppSuccess);
    CHECK_RES(mscclppMemoryClose(rCu[p]), mscclppSuccess);
    CHECK_RES(mscclppMemoryClose(rPin[p]), mscclppSuccess);
    CHECK_RES(mscclppMemoryClose(rExt[p]), mscclppSuccess);
  }
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  CHECK_RES(mscclppMemoryDeregister(mDev), mscclppSuccess);
  CHECK_RES(mscclppMemoryDeregister(mCu), mscclppSuccess);
  CHECK_RES(mscclppMemoryDeregister(mPin), mscclppSuccess);
  CHECK_RES(mscclppMemoryDeregister(mExt), mscclppSuccess);
  CHECK_RES(mscclppMemoryDeregister(mSrc), mscclppSuccess);
  CHECK_RES(mscclppMemFree(comm, dev), mscclppSuccess);
  CHECK_RES(mscclppMemFree(comm, cumem), mscclppSuccess);
  CHECK_RES(mscclppMemFree(comm, pinned), mscclppSuccess);
  CUDA_OK(cudaFree(ext));
  CUDA_OK(cudaFree(src));
}
#endif

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "host";
  if (strcmp(mode, "gpu") == 0 && !mscclppGpuIpcAvailable()) harnessSkip("needs a GPU");
  if (strcmp(mode, "errors") == 0) {
    /* Two "hosts": even and odd ranks (read when the communicator is made). */
    const char* r = getenv("MSCCLPP_RANK");
    char id[32];
    snprintf(id, sizeof(id), "host-%d", r != NULL ? atoi(r) % 2 : 0);
    setenv("MSCCLPP_HOSTID", id, 1);
    setenv("MSCCLPP_NET_IFNAME", "=lo", 0); /* the network between the "hosts": loopback */
  }
  theComm = initComm();
  if (strcmp(mode, "host") == 0) {
    RUN(testHost);
  } else if (strcmp(mode, "errors") == 0) {
    RUN(testErrors);
#ifdef MSCCLPP_HAVE_CUDA
  } else if (strcmp(mode, "gpu") == 0) {
    RUN(testGpu);
#endif
  } else {
    fprintf(stderr, "usage: transport_worker host|errors|gpu\n");
    return 2;
  }
  mscclppResult_t res = mscclppCommDestroy(theComm);
  if (res != mscclppSuccess) fprintf(stderr, "rank %d: mscclppCommDestroy: %s\n", rank, mscclppGetLastError());
  if (harnessFailed_ == 0 && res == mscclppSuccess) printf("rank %d: %s passed\n", rank, mode);
  fflush(stdout);
  return harnessFailed_ == 0 && res == mscclppSuccess ? 0 : 1;
}
