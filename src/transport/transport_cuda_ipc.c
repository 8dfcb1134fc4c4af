/* SPDX-License-Identifier: MIT */
/* Transport CudaIpc: the GPU's copy engines move the bytes, on the process's
 * transport stream of the device current at connect time (one stream shared
 * by all connections: see gpu_mem_ipc.c on MPS work queues; `pending` still
 * says whether THIS connection enqueued work, and draining waits for the
 * whole stream). Peers are on the same host: other GPUs, or other ranks on
 * the same GPU (MPS).
 *
 * write  - cudaMemcpyAsync on the connection's stream; returns once enqueued.
 * signal - destination the CPU reaches (host kinds) and nothing pending:
 *          one 64-bit store with release order - no CUDA call at all.
 *          Otherwise (device memory, or copies pending): a stream-ordered
 *          64-bit write behind the copies (cuStreamWriteValue64, which
 *          fences the earlier writes) to the destination's device address.
 *          A semaphore's values stay in order: the CPU stores only when the
 *          stream has been seen idle, i.e. after every earlier stream write.
 * flush  - wait until the stream has drained (bounded, abortable). */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <stdlib.h>

#include "core/error.h"
#include "core/log.h"
#include "core/util.h"
#include "gpu/gpu_ipc.h"
#include "transport/transport.h"

#define SPIN_NS 200000 /* busy-poll this long before sleeping: flush latency matters */

static mscclppResult_t ipcCheck(const struct mscclppEndpoint* a, const struct mscclppEndpoint* b, char* why,
                                size_t whyLen) {
  if (!(a->available & mscclppTransportCudaIpc) || !(b->available & mscclppTransportCudaIpc)) {
    snprintf(why, whyLen, "rank %d has no GPU", !(a->available & mscclppTransportCudaIpc) ? a->rank : b->rank);
    return mscclppInvalidUsage;
  }
  if (a->hostHash != b->hostHash) {
    snprintf(why, whyLen, "the ranks are on different hosts ('%s' and '%s')", a->hostName, b->hostName);
    return mscclppInvalidUsage;
  }
  return mscclppSuccess;
}

/* The connection's state (conn->priv). */
struct ipcConn {
  struct mscclppGpuIpcStream* stream;
  int pending; /* enqueued work not yet seen complete */
};

static struct ipcConn* ipcOf(const struct mscclppConnection* c) { return c->priv; }

/* Wait until the stream has nothing pending. */
static mscclppResult_t drain(struct mscclppConnection* c) {
  struct ipcConn* ic = ipcOf(c);
  if (!ic->pending) return mscclppSuccess;
  mscclppDeadline deadline = mscclppDeadlineIn(c->timeoutSec);
  uint64_t spinUntil = mscclppTimeNs() + SPIN_NS;
  for (;;) {
    int done = 0;
    MSCCLPP_RETURN_ON_ERROR(mscclppGpuIpcStreamQuery(ic->stream, &done));
    if (done) {
      ic->pending = 0;
      return mscclppSuccess;
    }
    if (c->abortFlag != NULL && __atomic_load_n(c->abortFlag, __ATOMIC_ACQUIRE))
      return mscclppErr(mscclppAborted, MSCCLPP_LOG_TRANSPORT, "flush of the connection from rank %d to rank %d: aborted",
                        c->rank, c->remoteRank);
    if (mscclppDeadlinePassed(deadline))
      return mscclppErr(mscclppTimeout, MSCCLPP_LOG_TRANSPORT,
                        "copies of the connection from rank %d to rank %d not complete after %.3g s", c->rank,
                        c->remoteRank, c->timeoutSec);
    if (mscclppTimeNs() > spinUntil) {
      struct timespec ts = {0, 20000};
      nanosleep(&ts, NULL);
    }
  }
}

static mscclppResult_t ipcOpen(struct mscclppConnection* c) {
  struct ipcConn* ic = calloc(1, sizeof(*ic));
  if (ic == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_TRANSPORT, "cannot allocate a CudaIpc connection");
  mscclppResult_t res = mscclppGpuIpcStreamCreate(&ic->stream);
  if (res != mscclppSuccess) {
    free(ic);
    return res;
  }
  c->priv = ic;
  return mscclppSuccess;
}

static mscclppResult_t ipcClose(struct mscclppConnection* c) {
  mscclppResult_t res = drain(c);
  mscclppGpuIpcStreamDestroy(ipcOf(c)->stream);
  free(c->priv);
  c->priv = NULL;
  return res;
}

static mscclppResult_t ipcWrite(struct mscclppConnection* c, struct mscclppRegisteredMemory* dst, uint64_t dstOffset,
                                struct mscclppRegisteredMemory* src, uint64_t srcOffset, uint64_t size) {
  MSCCLPP_RETURN_ON_ERROR(
      mscclppGpuIpcMemcpyAsync(ipcOf(c)->stream, (char*)dst->ptr + dstOffset, (const char*)src->ptr + srcOffset, size));
  ipcOf(c)->pending = 1;
  return mscclppSuccess;
}

/* The device address a stream-ordered signal writes to. */
static mscclppResult_t signalTarget(const struct mscclppConnection* c, const struct mscclppRegisteredMemory* dst,
                                    uint64_t dstOffset, void** target) {
  if (dst->devPtr == NULL)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_TRANSPORT,
                      "signal from rank %d to rank %d: the semaphore's memory has no device address here", c->rank,
                      c->remoteRank);
  *target = (char*)dst->devPtr + dstOffset;
  return mscclppSuccess;
}

static mscclppResult_t ipcSignal(struct mscclppConnection* c, struct mscclppRegisteredMemory* dst, uint64_t dstOffset,
                                 uint64_t value) {
  if (dst->hostAccessible && !ipcOf(c)->pending) {
    __atomic_store_n((uint64_t*)((char*)dst->ptr + dstOffset), value, __ATOMIC_RELEASE);
    return mscclppSuccess;
  }
  void* target = NULL;
  MSCCLPP_RETURN_ON_ERROR(signalTarget(c, dst, dstOffset, &target));
  MSCCLPP_RETURN_ON_ERROR(mscclppGpuIpcWriteValue64Async(ipcOf(c)->stream, target, value));
  ipcOf(c)->pending = 1;
  return mscclppSuccess;
}

/* The payload as stream writes: one 4- or 8-byte store where it is that
 * size and aligned (the path small puts are for: no copy engine, one driver
 * call together with the signal); any other size or alignment is staged
 * through cudaMemcpyAsync from pageable memory, which copies the bytes
 * before it returns. The signal rides in the same batch (the payload makes
 * the stream busy, so a CPU store would have to wait for it). */
static mscclppResult_t ipcWriteInline(struct mscclppConnection* c, struct mscclppRegisteredMemory* dst,
                                      uint64_t dstOffset, const void* bytes, uint32_t size,
                                      struct mscclppRegisteredMemory* sigDst, uint64_t sigOffset, uint64_t sigValue) {
  struct mscclppGpuStreamWrite w[2];
  int n = 0;
  char* d = (char*)dst->devPtr + dstOffset;
  uint64_t v = 0;
  memcpy(&v, bytes, size);
  if ((size == 8 || size == 4) && (uintptr_t)d % size == 0) {
    w[n].dst = d;
    w[n].value = v;
    w[n].bytes = size;
    n++;
  } else {
    MSCCLPP_RETURN_ON_ERROR(mscclppGpuIpcMemcpyAsync(ipcOf(c)->stream, (char*)dst->ptr + dstOffset, &v, size));
  }
  ipcOf(c)->pending = 1;
  if (sigDst != NULL) {
    MSCCLPP_RETURN_ON_ERROR(signalTarget(c, sigDst, sigOffset, &w[n].dst));
    w[n].value = sigValue;
    w[n].bytes = 8;
    n++;
  }
  return n > 0 ? mscclppGpuIpcWriteValuesAsync(ipcOf(c)->stream, w, n) : mscclppSuccess;
}

static mscclppResult_t ipcFlush(struct mscclppConnection* c) { return drain(c); }

static mscclppResult_t ipcQuery(struct mscclppConnection* c, int* idle) {
  struct ipcConn* ic = ipcOf(c);
  *idle = 1;
  if (!ic->pending) return mscclppSuccess;
  MSCCLPP_RETURN_ON_ERROR(mscclppGpuIpcStreamQuery(ic->stream, idle));
  if (*idle) ic->pending = 0;
  return mscclppSuccess;
}

static int ipcAvailable(const struct mscclppEndpoint* local, int wanted) {
  (void)wanted;
  return local->device >= 0;
}

/* Semaphores left to the library live in pinned host memory: a signal with
 * nothing in flight is then one CPU store (no driver call; the kernel polls
 * it over PCIe), one behind copies a stream-ordered write. The 8-byte
 * ping-pong is faster this way than with the semaphore in device memory
 * (bench/RESULTS.md, "bench_channel", rows (1a) and (1b)). */
static const struct mscclppTransportAttrs ipcAttrs = {
    .caps = MSCCLPP_TRANSPORT_CAP_WRITE_INLINE | MSCCLPP_TRANSPORT_CAP_PEER_STORE,
    .semDevice = MSCCLPP_TRANSPORT_SEM_DEVICE,
    .semAuto = MSCCLPP_TRANSPORT_SEM_PINNED_ON_GPU};

const struct mscclppTransportOps mscclppTransportCudaIpcOps = {
    .name = "CudaIpc",
    .transport = mscclppTransportCudaIpc,
    .attrs = &ipcAttrs,
    .available = ipcAvailable,
    .check = ipcCheck,
    .open = ipcOpen,
    .close = ipcClose,
    .write = ipcWrite,
    .signal = ipcSignal,
    .writeInline = ipcWriteInline,
    .flush = ipcFlush,
    .query = ipcQuery,
};
