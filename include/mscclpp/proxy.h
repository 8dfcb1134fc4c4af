/* SPDX-License-Identifier: MIT */
/*
 * Proxy service: one CPU thread that serves one or more trigger FIFOs. Make
 * one per GPU (intra-host copies) and one per NIC (network), each bound to
 * the NUMA node of its device. The thread polls its FIFOs (busy by default;
 * MSCCLPP_PROXY_BACKOFF_US lets it sleep when idle), hands each fresh trigger
 * to the FIFO's handler in FIFO order, then publishes the new tail (a
 * kernel's mscclppFifoDeviceSync returns) and, once the trigger's work is
 * complete, the completed counter (mscclppFifoDeviceFlush returns). No lock
 * on that path. For a GPU, publication is batched: the thread publishes
 * right after the first trigger it finds (so a lone trigger is published
 * right after its handler), when it finds the FIFO empty, and otherwise
 * after every 8 triggers at the latest, because each publication is a store
 * to a cache line that waiting kernels read over PCIe. Hence a handler must
 * not wait for a kernel to get past a Sync or Flush of an EARLIER trigger:
 * that trigger may be published only after the handler returns. (The host
 * backend publishes after every trigger.)
 *
 * Run states, as in the seed: idle -> running (Start) -> exiting (Stop) ->
 * idle. Start and Stop are idempotent. Stop first drains what was already
 * pushed (at most one FIFO's worth per FIFO), then the thread exits.
 *
 * Errors raised on the proxy thread -- a handler that fails, a kernel that
 * recorded a device error (timeout, bad trigger), a failing progress call --
 * are recorded in the abort object (first error: code + text), raise the
 * abort flag so that every pending wait (device or host) returns, and are
 * read with mscclppProxyGetAsyncError. After an error the thread stops
 * consuming triggers (it keeps running until Stop).
 */
#ifndef MSCCLPP_PROXY_H_
#define MSCCLPP_PROXY_H_

#include <stddef.h>
#include <stdint.h>

#include "mscclpp/abort.h"
#include "mscclpp/core.h"
#include "mscclpp/fifo.h"
#include "mscclpp/trigger.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mscclppProxy* mscclppProxy_t;

/* What a handler tells the proxy thread. */
typedef enum {
  mscclppProxyHandlerContinue = 0, /* trigger taken; go on */
  mscclppProxyHandlerStop = 1,     /* trigger taken; the thread exits (state idle; Start again allowed) */
  mscclppProxyHandlerError = 2     /* trigger failed: recorded as the async error; it is NOT taken, so the
                               kernel's Sync on it returns mscclppAborted */
} mscclppProxyHandlerResult;

/* Called on the proxy thread for every trigger of its FIFO, in order, with
 * the trigger's position. Must not call Stop/Destroy of its own proxy (return
 * mscclppProxyHandlerStop instead). A handler returning mscclppProxyHandlerError may call
 * mscclppAbortRaise(abort, code, reason) first to record its own code and
 * reason; otherwise the proxy records mscclppInternalError naming the
 * handler, the position and the op. A synchronous handler's work is complete
 * when it returns. */
typedef mscclppProxyHandlerResult (*mscclppProxyHandler)(void* arg, const mscclppTrigger* trigger,
                                                         uint64_t position);

/* For asynchronous handlers (copies still in flight when the handler
 * returns): *allDone = 1 when all work of every trigger handed to the handler
 * so far is complete. Called on the proxy thread on every pass of its loop,
 * busy or idle, also with nothing outstanding (a transport with manual
 * progress - the network - must read its completion queue for its peers'
 * writes to land); it must not wait. A failure is recorded as the async
 * error. */
typedef mscclppResult_t (*mscclppProxyProgress)(void* arg, int* allDone);

typedef enum { mscclppProxyStateIdle = 0, mscclppProxyStateRunning = 1, mscclppProxyStateExiting = 2 } mscclppProxyRunState;

/* numaNode: this value means "the NUMA node of `device` from sysfs". */
#define MSCCLPP_PROXY_NUMA_FROM_DEVICE (-2)

/* Start from MSCCLPP_PROXY_CONFIG_INITIALIZER. */
typedef struct {
  size_t structSize;    /* sizeof(mscclppProxyConfig) */
  int device;           /* CUDA device of the FIFOs it serves; < 0: host backend */
  int numaNode;         /* MSCCLPP_PROXY_NUMA_FROM_DEVICE, -1 (no binding), or a node (e.g. a NIC's) */
  double timeoutSec;    /* bound of Stop's wait; 0: MSCCLPP_TIMEOUT */
  int backoffUs;        /* idle sleep bound; -1: MSCCLPP_PROXY_BACKOFF_US; 0: busy-poll */
  mscclppAbort_t abort; /* error domain shared with its FIFOs; NULL: a private one */
  const char* name;     /* thread name (first 15 characters); NULL: "mscclpp-proxy" */
} mscclppProxyConfig;

#define MSCCLPP_PROXY_CONFIG_INITIALIZER \
  {sizeof(mscclppProxyConfig), -1, MSCCLPP_PROXY_NUMA_FROM_DEVICE, 0.0, -1, NULL, NULL}

/* Create a proxy service (idle, no FIFO). MSCCLPP_NUMA_BIND=0 disables
 * binding. Errors: mscclppInvalidArgument (NULL, bad structSize, abort object
 * of another device, bad MSCCLPP_* variables), mscclppSystemError. */
MSCCLPP_API mscclppResult_t mscclppProxyCreate(const mscclppProxyConfig* config, mscclppProxy_t* proxy);

/* Stop (draining) and free the service; its FIFOs are detached, not
 * destroyed. Refuses with mscclppInvalidUsage, freeing nothing and leaving
 * the service as it was, when a served FIFO still has pushed-but-unconsumed
 * triggers (a kernel is still pushing), unless the abort flag is up; with
 * mscclppTimeout when the thread does not exit in time (a handler hangs).
 * mscclppInvalidArgument for NULL. */
MSCCLPP_API mscclppResult_t mscclppProxyDestroy(mscclppProxy_t proxy);

/* Serve `fifo` with `handler` (required) and `progress` (NULL for
 * synchronous handlers); arg is passed to both. Only while idle
 * (mscclppInvalidUsage otherwise, or when the FIFO is served elsewhere or
 * 64 FIFOs are served already); the FIFO must have the service's device and
 * abort object (mscclppInvalidArgument). */
MSCCLPP_API mscclppResult_t mscclppProxyAddFifo(mscclppProxy_t proxy, mscclppFifo_t fifo, mscclppProxyHandler handler,
                                                mscclppProxyProgress progress, void* arg);

/* Start the thread (idempotent). mscclppAborted when the abort flag is up,
 * mscclppSystemError when the thread cannot be created. */
MSCCLPP_API mscclppResult_t mscclppProxyStart(mscclppProxy_t proxy);

/* Drain and stop the thread (idempotent); returns when it has exited, or
 * mscclppTimeout when it has not within the timeout (a handler hangs; the
 * state stays exiting). */
MSCCLPP_API mscclppResult_t mscclppProxyStop(mscclppProxy_t proxy);

MSCCLPP_API mscclppResult_t mscclppProxyGetRunState(mscclppProxy_t proxy, mscclppProxyRunState* state);

/* The first asynchronous error of the service's error domain (mscclppSuccess
 * when none); when it is a failure its text becomes the caller's
 * mscclppGetLastError(). The communicator's mscclppCommGetAsyncError
 * forwards here. */
MSCCLPP_API mscclppResult_t mscclppProxyGetAsyncError(mscclppProxy_t proxy, mscclppResult_t* error);

/* The service's abort object. */
MSCCLPP_API mscclppResult_t mscclppProxyGetAbort(mscclppProxy_t proxy, mscclppAbort_t* abort);

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_PROXY_H_ */
