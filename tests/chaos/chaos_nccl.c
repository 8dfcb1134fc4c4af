/* SPDX-License-Identifier: MIT */
/*
 * The chaos trials' calls (chaos.h) through the NCCL API of
 * libmscclpp_nccl.so, the only library this program links (as a PyTorch
 * job would use it): ncclGetUniqueId / ncclCommInitRank, ncclAllReduce,
 * ncclBroadcast, ncclAlltoAll, ncclSend/ncclRecv in a group, the failure
 * through ncclCommGetAsyncError, ncclCommShrink with NCCL_SHRINK_ABORT,
 * ncclCommFinalize and ncclCommDestroy (in PyTorch's order).
 *
 * On the host backend (no --gpu) buffers are host memory and each call
 * returns when it is done. On a GPU: device buffers and pinned host views,
 * one non-blocking stream; a call copies its inputs in, poisons its output,
 * enqueues the collective and the copy back, and returns; waiting polls
 * cudaStreamQuery and ncclCommGetAsyncError (what a framework's watchdog
 * does), so a peer's death is seen while this rank's kernels are still in
 * flight and wait for it.
 */
#ifdef MSCCLPP_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chaos.h"
#include "nccl/nccl.h"

static int onGpu;         /* buffers in device memory, calls on `stream` */
static int32_t* hostBufs; /* per slot: A, C, B (pinned on a GPU) */
static int32_t* devBufs;  /* on a GPU: the same layout in device memory */
static size_t maxCount, bytes;
static cudaStream_t stream; /* NULL on the host backend */

static int ncclFail(ncclResult_t res, const char* what, ncclComm_t comm, char* why, size_t len) {
  snprintf(why, len, "%s: %s: %s", what, ncclGetErrorString(res), ncclGetLastError(comm));
  return -1;
}

static int32_t* host(int slot, enum chaosBuf which) { return hostBufs + chaosBufOffset(slot, which, maxCount); }

/* The buffer the library is given. */
static int32_t* dev(int slot, enum chaosBuf which) {
  return onGpu ? devBufs + chaosBufOffset(slot, which, maxCount) : host(slot, which);
}

static double nowSec(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

#ifdef MSCCLPP_HAVE_CUDA
static int cudaFail(cudaError_t e, const char* what, char* why, size_t len) {
  snprintf(why, len, "%s: %s", what, cudaGetErrorString(e));
  return -1;
}
#define CUDA_OR_FAIL(x)                                       \
  do {                                                        \
    cudaError_t e_ = (x);                                     \
    if (e_ != cudaSuccess) return cudaFail(e_, #x, why, len); \
  } while (0)
#endif

static int setup(int gpu, int slots, size_t count, char* why, size_t len) {
  maxCount = count;
  bytes = (size_t)slots * 4 * count * sizeof(int32_t);
  if (gpu < 0) {
    hostBufs = (int32_t*)calloc(1, bytes);
    if (hostBufs == NULL) snprintf(why, len, "out of memory");
    return hostBufs == NULL ? -1 : 0;
  }
#ifdef MSCCLPP_HAVE_CUDA
  int n = 0;
  CUDA_OR_FAIL(cudaGetDeviceCount(&n));
  if (n == 0) {
    snprintf(why, len, "no GPU");
    return -1;
  }
  CUDA_OR_FAIL(cudaSetDevice(gpu % n));
  CUDA_OR_FAIL(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CUDA_OR_FAIL(cudaMallocHost((void**)&hostBufs, bytes));
  CUDA_OR_FAIL(cudaMalloc((void**)&devBufs, bytes));
  CUDA_OR_FAIL(cudaMemset(devBufs, 0, bytes));
  CUDA_OR_FAIL(cudaDeviceSynchronize());
  memset(hostBufs, 0, bytes);
  onGpu = 1;
  return 0;
#else
  snprintf(why, len, "built without CUDA: no GPU buffers");
  return -1;
#endif
}

static void teardown(void) {
#ifdef MSCCLPP_HAVE_CUDA
  if (onGpu) {
    cudaStreamSynchronize(stream);
    cudaFree(devBufs);
    cudaFreeHost(hostBufs);
    cudaStreamDestroy(stream);
    devBufs = hostBufs = NULL;
    onGpu = 0;
    return;
  }
#endif
  free(hostBufs);
  hostBufs = NULL;
}

static int uniqueId(char hex[CHAOS_ID_CHARS], char* why, size_t len) {
  ncclUniqueId id;
  ncclResult_t res = ncclGetUniqueId(&id);
  if (res != ncclSuccess) return ncclFail(res, "ncclGetUniqueId", NULL, why, len);
  chaosIdToHex(id.internal, sizeof(id.internal), hex);
  return 0;
}

static int init(const char* hex, int nranks, int rank, void** comm, char* why, size_t len) {
  ncclUniqueId id;
  if (chaosIdFromHex(hex, id.internal, sizeof(id.internal), why, len) != 0) return -1;
  ncclComm_t c = NULL;
  ncclResult_t res = ncclCommInitRank(&c, nranks, id, rank);
  if (res != ncclSuccess) return ncclFail(res, "ncclCommInitRank", NULL, why, len);
  *comm = c;
  return 0;
}

static int shrink(void* comm, const int* exclude, int count, void** child, char* why, size_t len) {
  ncclComm_t c = NULL;
  int ex[64];
  for (int i = 0; i < count && i < 64; i++) ex[i] = exclude[i]; /* ncclCommShrink takes int*, not const */
  ncclResult_t res = ncclCommShrink((ncclComm_t)comm, ex, count, &c, NULL, NCCL_SHRINK_ABORT);
  if (res != ncclSuccess) return ncclFail(res, "ncclCommShrink", (ncclComm_t)comm, why, len);
  *child = c;
  return 0;
}

/* PyTorch's order (ProcessGroupNCCL::shutdown, also when shrink_group drops
 * the parent): ncclCommFinalize, ncclCommGetAsyncError polled until it is no
 * longer ncclInProgress (a revoked parent is in progress until its calls
 * have ended), then ncclCommDestroy. */
static int destroy(void* comm, char* why, size_t len) {
  ncclComm_t c = (ncclComm_t)comm;
  ncclResult_t res = ncclCommFinalize(c);
  if (res != ncclSuccess) return ncclFail(res, "ncclCommFinalize", c, why, len);
  double deadline = nowSec() + 30.0;
  for (;;) {
    ncclResult_t st = ncclSuccess;
    res = ncclCommGetAsyncError(c, &st);
    if (res != ncclSuccess) return ncclFail(res, "ncclCommGetAsyncError after ncclCommFinalize", c, why, len);
    if (st != ncclInProgress) break; /* an error is what a failed parent reports: destroy it anyway */
    if (nowSec() > deadline) {
      snprintf(why, len, "ncclCommGetAsyncError still ncclInProgress 30 s after ncclCommFinalize");
      return -1;
    }
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  res = ncclCommDestroy(c);
  return res == ncclSuccess ? 0 : ncclFail(res, "ncclCommDestroy", NULL, why, len);
}

#ifdef MSCCLPP_HAVE_CUDA
/* elems elements of buffer `which` of a slot, one way or the other, on the stream. */
static int copy(int slot, enum chaosBuf which, size_t at, size_t elems, int toDevice, char* why, size_t len) {
  if (elems == 0) return 0;
  int32_t* d = dev(slot, which) + at;
  int32_t* h = host(slot, which) + at;
  CUDA_OR_FAIL(cudaMemcpyAsync(toDevice ? (void*)d : (void*)h, toDevice ? (const void*)h : (const void*)d,
                               elems * sizeof(int32_t), toDevice ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost,
                               stream));
  return 0;
}

static int poison(int slot, size_t at, size_t elems, char* why, size_t len) {
  CUDA_OR_FAIL(cudaMemsetAsync(dev(slot, CHAOS_B) + at, 0xa5, elems * sizeof(int32_t), stream));
  return 0;
}
#endif

/* What a call reads (A, C) and writes (B at 0 and at maxCount, or A). */
struct extent {
  size_t a, c, b0, b1, aOut;
};

static struct extent extentOf(const struct chaosCall* c) {
  struct extent e = {0, 0, 0, 0, 0};
  switch (c->op) {
    case CHAOS_ALLREDUCE: e.a = e.b0 = c->count; break;
    case CHAOS_BROADCAST: e.a = e.aOut = c->count; break;
    case CHAOS_ALLTOALL: e.a = e.b0 = (size_t)c->m * c->count; break;
    case CHAOS_SENDRECV: e.a = e.c = e.b0 = e.b1 = c->count; break;
  }
  return e;
}

static int call(void* comm, const struct chaosCall* c, void (*inGroup)(void), char* why, size_t len) {
  ncclComm_t m = (ncclComm_t)comm;
  const struct extent e = extentOf(c);
#ifdef MSCCLPP_HAVE_CUDA
  if (onGpu && (copy(c->slot, CHAOS_A, 0, e.a, 1, why, len) != 0 || copy(c->slot, CHAOS_C, 0, e.c, 1, why, len) != 0 ||
                poison(c->slot, 0, e.b0, why, len) != 0 || poison(c->slot, maxCount, e.b1, why, len) != 0))
    return -1;
#endif
  int32_t *a = dev(c->slot, CHAOS_A), *cc = dev(c->slot, CHAOS_C), *b = dev(c->slot, CHAOS_B);
  ncclResult_t res = ncclSuccess;
  const char* what = "";
  switch (c->op) {
    case CHAOS_ALLREDUCE:
      what = "ncclAllReduce";
      res = ncclAllReduce(a, b, c->count, ncclInt32, ncclSum, m, stream);
      break;
    case CHAOS_BROADCAST:
      what = "ncclBroadcast";
      res = ncclBroadcast(a, a, c->count, ncclInt32, c->root, m, stream);
      break;
    case CHAOS_ALLTOALL:
      what = "ncclAlltoAll";
      res = ncclAlltoAll(a, b, c->count, ncclInt32, m, stream);
      break;
    case CHAOS_SENDRECV: {
      what = "the send/recv group";
      ncclResult_t r[5];
      r[0] = ncclGroupStart();
      r[1] = ncclSend(a, c->count, ncclInt32, c->next, m, stream);
      if (inGroup != NULL) inGroup();
      r[2] = ncclSend(cc, c->count, ncclInt32, c->prev, m, stream);
      r[3] = ncclRecv(b, c->count, ncclInt32, c->prev, m, stream);
      r[4] = ncclRecv(b + maxCount, c->count, ncclInt32, c->next, m, stream);
      res = ncclGroupEnd();
      for (int i = 0; i < 5 && res == ncclSuccess; i++) res = r[i];
      break;
    }
  }
  if (res != ncclSuccess) return ncclFail(res, what, m, why, len);
#ifdef MSCCLPP_HAVE_CUDA
  if (onGpu && (copy(c->slot, CHAOS_B, 0, e.b0, 0, why, len) != 0 ||
                copy(c->slot, CHAOS_B, maxCount, e.b1, 0, why, len) != 0 ||
                copy(c->slot, CHAOS_A, 0, e.aOut, 0, why, len) != 0))
    return -1;
#else
  (void)e;
#endif
  return 0;
}

/* The communicator's asynchronous error: 0 while there is none. */
static int asyncError(ncclComm_t comm, char* why, size_t len) {
  ncclResult_t st = ncclSuccess;
  ncclResult_t res = ncclCommGetAsyncError(comm, &st);
  if (res != ncclSuccess) return ncclFail(res, "ncclCommGetAsyncError", comm, why, len);
  if (st == ncclSuccess || st == ncclInProgress) return 0;
  return ncclFail(st, "asynchronous error", comm, why, len);
}

static int waitCalls(void* comm, double seconds, int* inFlight, char* why, size_t len) {
  ncclComm_t c = (ncclComm_t)comm;
  *inFlight = 0;
  if (!onGpu) return asyncError(c, why, len);
#ifdef MSCCLPP_HAVE_CUDA
  double deadline = nowSec() + seconds;
  for (;;) {
    cudaError_t q = cudaStreamQuery(stream);
    if (asyncError(c, why, len) != 0) {
      *inFlight = q == cudaErrorNotReady;
      return -1;
    }
    if (q == cudaSuccess) return asyncError(c, why, len); /* kernels that ended by the abort count as failed */
    if (q != cudaErrorNotReady) return cudaFail(q, "cudaStreamQuery", why, len);
    if (nowSec() > deadline) {
      *inFlight = 1;
      snprintf(why, len, "the calls did not complete within %g s and no error was reported", seconds);
      return -1;
    }
    struct timespec ts = {0, 50000};
    nanosleep(&ts, NULL);
  }
#else
  (void)seconds;
  return 0;
#endif
}

static int busy(void) {
#ifdef MSCCLPP_HAVE_CUDA
  if (onGpu) return cudaStreamQuery(stream) == cudaErrorNotReady;
#endif
  return -1;
}

/* Ours, not NVIDIA's libnccl.so.2 found first on the library path. */
static const char* library(void) {
  static char path[PATH_MAX];
  Dl_info info;
  void* sym = dlsym(RTLD_DEFAULT, "ncclCommShrink");
  if (sym == NULL || dladdr(sym, &info) == 0 || info.dli_fname == NULL) return NULL;
  if (realpath(info.dli_fname, path) == NULL) snprintf(path, sizeof(path), "%s", info.dli_fname);
  return path;
}

static int deviceMemory(size_t* freeBytes, size_t* totalBytes, char* why, size_t len) {
#ifdef MSCCLPP_HAVE_CUDA
  CUDA_OR_FAIL(cudaMemGetInfo(freeBytes, totalBytes));
  return 0;
#else
  (void)freeBytes;
  (void)totalBytes;
  snprintf(why, len, "built without CUDA");
  return -1;
#endif
}

const struct chaosApi chaosApi = {
    .name = "NCCL",
    .setup = setup,
    .teardown = teardown,
    .host = host,
    .uniqueId = uniqueId,
    .init = init,
    .shrink = shrink,
    .destroy = destroy,
    .call = call,
    .wait = waitCalls,
    .busy = busy,
    .library = library,
    .deviceMemory = deviceMemory,
};
