/* SPDX-License-Identifier: MIT */
/* The proxy service: one thread serving FIFOs (mscclpp/proxy.h). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "core/log.h"
#include "core/params.h"
#include "core/trace.h"
#include "core/util.h"
#include "gpu/abort.h"
#include "gpu/gpu.h"
#include "gpu/gpu_ipc.h"
#include "mscclpp/proxy.h"
#include "proxy/fifo.h"
#include "proxy/proxy.h"

#define PROXY_MAX_FIFOS 64
/* Triggers taken from one FIFO before looking at the next. */
#define PROXY_BATCH 64
/* Idle polls before an idle thread starts to sleep (with a backoff). */
#define PROXY_IDLE_SPINS 1024
/* Host backend: an idle thread yields its core on every idle pass while
 * that lets another thread run there (mscclppYieldGated). The "kernels" are
 * threads that often outnumber the cores, and the one this proxy waits for
 * may be queued behind it on its core (bench_net's 8-byte ping-pong, 2
 * ranks on 2 cores, before the waits yielded too: the rarer the proxy's
 * yields, the slower). With nobody else runnable here a yield is still most
 * of an idle pass, which delays seeing a trigger or a completion: then it
 * yields once every PROXY_HOST_SPARSE_YIELD_NS. Figures: bench/HISTORY.md,
 * "Figures moved out of code comments". */
#define PROXY_HOST_SPARSE_YIELD_NS 20000u
/* Largest tuning.stalePauseNs (1 ms). */
#define PROXY_MAX_STALE_PAUSE_NS 1000000u

struct proxyFifo {
  struct mscclppFifo* fifo;
  mscclppProxyHandler handler;
  mscclppProxyProgress progress;
  void* arg;
};

struct mscclppProxy {
  int device;
  int numaNode;
  int numaBind;
  double timeoutSec;
  int64_t backoffUs;
  char name[16];
  struct mscclppAbort* abort;
  int ownsAbort;
  int nFifos;
  struct proxyFifo fifos[PROXY_MAX_FIFOS];
  pthread_mutex_t ctl; /* Start/Stop/Add/Destroy; never taken by the thread */
  pthread_t thread;
  int threadValid;
  int state; /* mscclppProxyRunState; __atomic */
  struct mscclppProxyTuning tuning; /* set while the thread is not running */
  uint64_t statTriggers;            /* written by the thread; __atomic */
  uint64_t statBusyNs;              /* written by the thread; __atomic */
};

static void nap(uint64_t ns) {
  struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
  nanosleep(&ts, NULL);
}

mscclppResult_t mscclppProxyCreate(const mscclppProxyConfig* config, mscclppProxy_t* proxy) {
  if (config == NULL || proxy == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_PROXY, "mscclppProxyCreate: NULL argument");
  if (config->structSize != sizeof(mscclppProxyConfig))
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_PROXY,
                      "mscclppProxyConfig.structSize is %zu, expected %zu: start from MSCCLPP_PROXY_CONFIG_INITIALIZER",
                      config->structSize, sizeof(mscclppProxyConfig));
  if (config->numaNode < MSCCLPP_PROXY_NUMA_FROM_DEVICE)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_PROXY,
                      "proxy numaNode %d: use a node >= 0, -1 (no binding) or MSCCLPP_PROXY_NUMA_FROM_DEVICE",
                      config->numaNode);
  if (config->timeoutSec < 0 || config->backoffUs < -1)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_PROXY, "proxy timeout %g s / backoff %d us out of range",
                      config->timeoutSec, config->backoffUs);
  struct mscclppParams params;
  MSCCLPP_RETURN_ON_ERROR(mscclppParamsLoad(&params));
  struct mscclppProxy* p = calloc(1, sizeof(*p));
  if (p == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_PROXY, "cannot allocate a proxy service");
  p->device = config->device < 0 ? MSCCLPP_HOST_BACKEND_DEVICE : config->device;
  p->numaNode = config->numaNode;
  p->numaBind = params.numaBind != 0;
  p->timeoutSec = config->timeoutSec > 0 ? config->timeoutSec : params.timeout;
  p->backoffUs = config->backoffUs >= 0 ? config->backoffUs : params.proxyBackoffUs;
  snprintf(p->name, sizeof(p->name), "%s", config->name != NULL ? config->name : "mscclpp-proxy");
  mscclppResult_t res = mscclppAbortAcquire(config->abort, p->device, &p->abort, &p->ownsAbort);
  if (res != mscclppSuccess) {
    free(p);
    return res;
  }
  pthread_mutex_init(&p->ctl, NULL);
  p->state = mscclppProxyStateIdle;
  struct mscclppProxyTuning tuning = MSCCLPP_PROXY_TUNING_DEFAULT;
  struct mscclppProxyTuning hostTuning = MSCCLPP_PROXY_TUNING_HOST_BACKEND;
  p->tuning = p->device < 0 ? hostTuning : tuning;
  *proxy = p;
  return mscclppSuccess;
}

mscclppResult_t mscclppProxyAddFifo(mscclppProxy_t proxy, mscclppFifo_t fifo, mscclppProxyHandler handler,
                                    mscclppProxyProgress progress, void* arg) {
  if (proxy == NULL || fifo == NULL || handler == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_PROXY, "mscclppProxyAddFifo: NULL %s",
                      proxy == NULL ? "proxy" : fifo == NULL ? "fifo" : "handler");
  if (fifo->device != proxy->device || fifo->abort != proxy->abort)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_PROXY,
                      "FIFO (device %d) and proxy (device %d) must share the device and the abort object",
                      fifo->device, proxy->device);
  mscclppResult_t res = mscclppSuccess;
  pthread_mutex_lock(&proxy->ctl);
  if (proxy->threadValid) {
    res = mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_PROXY, "mscclppProxyAddFifo: stop the proxy first");
  } else if (proxy->nFifos == PROXY_MAX_FIFOS) {
    res = mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_PROXY, "a proxy serves at most %d FIFOs", PROXY_MAX_FIFOS);
  } else if (__atomic_exchange_n(&fifo->attached, 1, __ATOMIC_ACQ_REL) != 0) {
    res = mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_PROXY, "FIFO %p is already served by a proxy", (void*)fifo);
  } else {
    struct proxyFifo* e = &proxy->fifos[proxy->nFifos++];
    e->fifo = fifo;
    e->handler = handler;
    e->progress = progress;
    e->arg = arg;
  }
  pthread_mutex_unlock(&proxy->ctl);
  return res;
}

/* ---- the thread ---------------------------------------------------------------- */

static void threadSetup(struct mscclppProxy* p) {
  pthread_setname_np(pthread_self(), p->name);
  if (p->numaBind) {
    int node = p->numaNode;
    if (node == MSCCLPP_PROXY_NUMA_FROM_DEVICE) {
      node = -1;
      if (p->device >= 0 && mscclppGpuNumaNode(p->device, &node) != mscclppSuccess) node = -1;
    }
    if (mscclppCpuBindNumaNode(node) != mscclppSuccess) /* it logged why */
      MSCCLPP_INFO(MSCCLPP_LOG_PROXY, "proxy %s: NUMA binding to node %d failed (reason logged above); running unbound",
                   p->name, node);
  } else {
    MSCCLPP_INFO(MSCCLPP_LOG_PROXY, "proxy %s: MSCCLPP_NUMA_BIND=0, not bound", p->name);
  }
  if (mscclppGpuSetDevice(p->device) != mscclppSuccess) /* it logged why */
    mscclppAbortRaiseLogged(p->abort, mscclppErrWrap(mscclppUnhandledCudaError, MSCCLPP_LOG_PROXY,
                                                     "proxy %s cannot use device %d", p->name, p->device));
  /* This thread never captures a graph, and its stream queries and copies
   * (on streams of its own) must not be refused while an application
   * thread captures one in cudaStreamCaptureModeGlobal: relaxed capture
   * interaction for the thread's lifetime. (Refused queries failed the GPU
   * collectives across pretend hosts once port channels signalled faster:
   * bench/HISTORY.md, "Collectives across pretend hosts: proxy threads and
   * graph capture".) */
  if (p->device >= 0) (void)mscclppGpuIpcCaptureRelax();
}

/* Hand one fresh trigger to its handler and take it (unpublished). 0: go
 * on; 1: taken, and the thread must stop (handler asked); -1: not taken,
 * error recorded. */
/* A trigger's built-in operation bits, in words, for the trace. */
static const char* opText(uint32_t op) {
  static const char* const names[MSCCLPP_TRIGGER_BUILTIN_MASK + 1] = {
      "none",         "put",          "signal",          "put+signal",
      "flush",        "put+flush",    "signal+flush",    "put+signal+flush",
      "inline",       "put+inline",   "inline+signal",   "put+inline+signal",
      "inline+flush", "put+inline+flush", "inline+signal+flush", "put+inline+signal+flush"};
  return op <= MSCCLPP_TRIGGER_BUILTIN_MASK ? names[op] : "custom";
}

static int serve(struct mscclppProxy* p, int index, const mscclppTrigger* t) {
  struct proxyFifo* e = &p->fifos[index];
  struct mscclppFifo* f = e->fifo;
  uint64_t pos = f->hostTail;
  uint64_t t0 = mscclppTraceBegin();
  mscclppProxyHandlerResult r = e->handler(e->arg, t, pos);
  if (t0 != 0)
    MSCCLPP_TRACE_EMIT(MSCCLPP_TRACE_PROXY_TRIGGER, t0, mscclppTraceNow(), MSCCLPP_TRACE_I(index), pos,
                       MSCCLPP_TRACE_S(opText(mscclppTriggerOp(t))));
  if (r == mscclppProxyHandlerError) {
    /* A handler that raised the abort itself has recorded and logged why;
     * naming the handler too would log the failure twice. */
    if (!mscclppAbortIsRaised(p->abort))
      mscclppAbortRaisef(p->abort, mscclppInternalError,
                         "proxy %s: handler of FIFO %d failed on the trigger at position %" PRIu64 " (op %u)", p->name,
                         index, pos, mscclppTriggerOp(t));
    return -1;
  }
  mscclppFifoHostTake(f);
  if (r == mscclppProxyHandlerStop) return 1;
  if (r != mscclppProxyHandlerContinue) {
    mscclppAbortRaisef(p->abort, mscclppInternalError, "proxy %s: handler of FIFO %d returned unknown result %d",
                       p->name, index, (int)r);
    return -1;
  }
  return 0;
}

/* Tell the kernels what was taken: tail, and for a synchronous handler
 * (its work is done when it returns) completed too. */
static void publish(struct proxyFifo* e) {
  mscclppFifoHostPublish(e->fifo);
  if (e->progress == NULL) mscclppFifoHostComplete(e->fifo, e->fifo->hostTail);
}

/* Serve up to `max` fresh triggers of FIFO `index` in order, publishing
 * right after the first one (a lone trigger waits for nothing more), then
 * every tuning.tailBatch triggers, and when the loop ends (FIFO found empty,
 * `max` reached, a handler stopped or failed). Returns the number of
 * triggers taken; *result as serve() for the last one. */
static uint32_t serveFifo(struct mscclppProxy* p, int index, uint32_t max, int* result) {
  struct proxyFifo* e = &p->fifos[index];
  struct mscclppFifo* f = e->fifo;
  const uint32_t batch = p->tuning.tailBatch, prefetch = p->tuning.prefetchLines;
  uint32_t n = 0, unpublished = 0;
  int r = 0;
  mscclppTrigger t;
  while (n < max && mscclppFifoHostPoll(f, &t)) {
    if (prefetch != 0) mscclppFifoHostPrefetch(f, prefetch);
    r = serve(p, index, &t);
    if (r < 0) break;
    n++;
    if (++unpublished >= batch || n == 1) {
      publish(e);
      unpublished = 0;
    }
    if (r > 0) break;
  }
  if (unpublished > 0) publish(e);
  *result = r;
  return n;
}

/* Let asynchronous handlers publish completion. -1 on error. */
static int progressAll(struct mscclppProxy* p) {
  for (int i = 0; i < p->nFifos; i++) {
    struct proxyFifo* e = &p->fifos[i];
    struct mscclppFifo* f = e->fifo;
    /* Called on every idle pass, also with nothing outstanding: transports
     * with manual progress (the network) must read their completion queue
     * for the peers' writes to land. */
    if (e->progress == NULL) continue;
    uint64_t end = f->hostTail;
    int done = 0;
    mscclppResult_t res = e->progress(e->arg, &done);
    if (res != mscclppSuccess) {
      res = mscclppErrWrap(res, MSCCLPP_LOG_PROXY, "proxy %s: progress of FIFO %d failed", p->name, i);
      mscclppAbortRaiseLogged(p->abort, res);
      return -1;
    }
    if (done && f->hostCompleted != end) {
      mscclppFifoHostComplete(f, end);
      if (mscclppTraceOn()) MSCCLPP_TRACE_EMIT(MSCCLPP_TRACE_PROXY_COMPLETE, mscclppTraceNow(), 0, MSCCLPP_TRACE_I(i), end);
    }
  }
  return 0;
}

static void* proxyMain(void* arg) {
  struct mscclppProxy* p = arg;
  threadSetup(p);
  const int stats = p->tuning.stats;
  uint64_t idleSpins = 0, sleepNs = 0, lastNs = 0;
  struct mscclppYieldGate hostYield = {0, 0};
  uint64_t served = __atomic_load_n(&p->statTriggers, __ATOMIC_RELAXED); /* the thread may have run before */
  uint64_t busyNs = __atomic_load_n(&p->statBusyNs, __ATOMIC_RELAXED);
  int failed = 0, handlerStop = 0, worked = 0;
  while (!handlerStop && __atomic_load_n(&p->state, __ATOMIC_ACQUIRE) == mscclppProxyStateRunning) {
    if (stats) {
      uint64_t now = mscclppTimeNs();
      if (worked) {
        busyNs += now - lastNs;
        __atomic_store_n(&p->statBusyNs, busyNs, __ATOMIC_RELAXED);
      }
      lastNs = now;
    }
    if (mscclppAbortIsRaised(p->abort) || mscclppAbortPollDevice(p->abort) != mscclppSuccess) failed = 1;
    worked = 0;
    for (int i = 0; i < p->nFifos && !failed && !handlerStop; i++) {
      int r = 0;
      uint32_t n = serveFifo(p, i, PROXY_BATCH, &r);
      if (n > 0) {
        worked = 1;
        served += n;
        __atomic_store_n(&p->statTriggers, served, __ATOMIC_RELAXED);
      }
      if (r < 0) failed = 1;
      if (r > 0) handlerStop = 1;
    }
    /* Progress on every pass, busy or idle: asynchronous handlers publish
     * completions as soon as they happen, and the network transport reads
     * its completion queue (manual-progress providers place a peer's
     * incoming writes only then) while this FIFO streams triggers too. */
    if (!failed && progressAll(p) < 0) failed = 1;
    if (worked && !failed) {
      idleSpins = 0;
      sleepNs = 0;
      continue;
    }
    if (failed) {
      nap(100000); /* nothing more to do but wait for Stop */
      continue;
    }
    if (p->backoffUs > 0 && ++idleSpins > PROXY_IDLE_SPINS) {
      sleepNs = sleepNs == 0 ? 1000 : sleepNs * 2;
      if (sleepNs > (uint64_t)p->backoffUs * 1000) sleepNs = (uint64_t)p->backoffUs * 1000;
      nap(sleepNs);
    } else if (p->device < 0) {
      /* host backend: producers are threads that may need this core */
      if (!mscclppYieldGated(&hostYield, PROXY_HOST_SPARSE_YIELD_NS)) mscclppSpinPause();
    } else if (p->tuning.stalePauseNs > 0) {
      /* leave the slot line to the GPU's write for a moment (tuning) */
      uint64_t until = mscclppTimeNs() + p->tuning.stalePauseNs;
      do mscclppSpinPause();
      while (mscclppTimeNs() < until);
    } else {
      mscclppSpinPause();
    }
  }
  /* Drain: everything published before Stop is at most one FIFO's worth. */
  if (!failed && !handlerStop && !mscclppAbortIsRaised(p->abort)) {
    for (int i = 0; i < p->nFifos && !failed; i++) {
      int r = 0;
      served += serveFifo(p, i, p->fifos[i].fifo->size, &r);
      if (r < 0) failed = 1;
    }
    __atomic_store_n(&p->statTriggers, served, __ATOMIC_RELAXED);
    if (!failed) {
      mscclppDeadline d = mscclppDeadlineIn(p->timeoutSec);
      for (;;) {
        int pending = 0;
        for (int i = 0; i < p->nFifos; i++)
          pending |= p->fifos[i].progress != NULL && p->fifos[i].fifo->hostCompleted != p->fifos[i].fifo->hostTail;
        if (!pending || progressAll(p) < 0) break;
        if (mscclppDeadlinePassed(d)) {
          mscclppAbortRaisef(p->abort, mscclppTimeout, "proxy %s: copies did not complete within %g s at stop",
                             p->name, p->timeoutSec);
          break;
        }
        nap(10000);
      }
    }
  }
  __atomic_store_n(&p->state, mscclppProxyStateIdle, __ATOMIC_RELEASE);
  return NULL;
}

/* ---- control ------------------------------------------------------------------- */

mscclppResult_t mscclppProxyStart(mscclppProxy_t proxy) {
  if (proxy == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_PROXY, "mscclppProxyStart: proxy is NULL");
  mscclppResult_t res = mscclppSuccess;
  pthread_mutex_lock(&proxy->ctl);
  if (proxy->threadValid && __atomic_load_n(&proxy->state, __ATOMIC_ACQUIRE) == mscclppProxyStateRunning) {
    goto unlock; /* already running */
  }
  if (proxy->threadValid) {
    /* the thread left by itself (a handler said stop) or Stop timed out */
    if (__atomic_load_n(&proxy->state, __ATOMIC_ACQUIRE) != mscclppProxyStateIdle) {
      res = mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_PROXY, "proxy %s is still exiting", proxy->name);
      goto unlock;
    }
    pthread_join(proxy->thread, NULL);
    proxy->threadValid = 0;
  }
  if (mscclppAbortIsRaised(proxy->abort)) {
    res = mscclppErr(mscclppAborted, MSCCLPP_LOG_PROXY, "proxy %s cannot start: the abort flag is up", proxy->name);
    goto unlock;
  }
  __atomic_store_n(&proxy->state, mscclppProxyStateRunning, __ATOMIC_RELEASE);
  int err = pthread_create(&proxy->thread, NULL, proxyMain, proxy);
  if (err != 0) {
    __atomic_store_n(&proxy->state, mscclppProxyStateIdle, __ATOMIC_RELEASE);
    res = mscclppErr(mscclppSystemError, MSCCLPP_LOG_PROXY, "proxy %s: pthread_create: %s", proxy->name,
                     strerror(err));
    goto unlock;
  }
  proxy->threadValid = 1;
  MSCCLPP_INFO(MSCCLPP_LOG_PROXY, "proxy %s started: device %d, %d FIFO(s)", proxy->name, proxy->device,
               proxy->nFifos);
unlock:
  pthread_mutex_unlock(&proxy->ctl);
  return res;
}

static mscclppResult_t stopLocked(struct mscclppProxy* proxy) {
  if (!proxy->threadValid) return mscclppSuccess;
  int running = mscclppProxyStateRunning;
  __atomic_compare_exchange_n(&proxy->state, &running, mscclppProxyStateExiting, 0, __ATOMIC_ACQ_REL,
                              __ATOMIC_ACQUIRE);
  mscclppDeadline d = mscclppDeadlineIn(proxy->timeoutSec);
  uint64_t napNs = 1000;
  while (__atomic_load_n(&proxy->state, __ATOMIC_ACQUIRE) != mscclppProxyStateIdle) {
    if (mscclppDeadlinePassed(d))
      return mscclppErr(mscclppTimeout, MSCCLPP_LOG_PROXY, "proxy %s did not stop within %g s (a handler hangs?)",
                        proxy->name, proxy->timeoutSec);
    nap(napNs);
    if (napNs < 1000000) napNs *= 2;
  }
  pthread_join(proxy->thread, NULL);
  proxy->threadValid = 0;
  return mscclppSuccess;
}

mscclppResult_t mscclppProxyStop(mscclppProxy_t proxy) {
  if (proxy == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_PROXY, "mscclppProxyStop: proxy is NULL");
  pthread_mutex_lock(&proxy->ctl);
  mscclppResult_t res = stopLocked(proxy);
  pthread_mutex_unlock(&proxy->ctl);
  return res;
}

/* Triggers pushed but not consumed, over all FIFOs, sampled twice 1 ms apart
 * so that a producer between two pushes is seen too. */
static mscclppResult_t pendingTriggers(struct mscclppProxy* proxy, uint64_t* pending, int* fifoIndex) {
  for (int round = 0; round < 2; round++) {
    if (round == 1) nap(1000000);
    for (int i = 0; i < proxy->nFifos; i++) {
      uint64_t n = 0;
      MSCCLPP_RETURN_ON_ERROR(mscclppFifoPending(proxy->fifos[i].fifo, &n));
      if (n > 0) {
        *pending = n;
        *fifoIndex = i;
        return mscclppSuccess;
      }
    }
  }
  *pending = 0;
  return mscclppSuccess;
}

mscclppResult_t mscclppProxyDestroy(mscclppProxy_t proxy) {
  if (proxy == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_PROXY, "mscclppProxyDestroy: proxy is NULL");
  pthread_mutex_lock(&proxy->ctl);
  int wasRunning =
      proxy->threadValid && __atomic_load_n(&proxy->state, __ATOMIC_ACQUIRE) == mscclppProxyStateRunning;
  mscclppResult_t res = stopLocked(proxy);
  if (res != mscclppSuccess) goto unlock;
  if (!mscclppAbortIsRaised(proxy->abort)) {
    uint64_t pending = 0;
    int index = -1;
    res = pendingTriggers(proxy, &pending, &index);
    if (res == mscclppSuccess && pending > 0)
      res = mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_PROXY,
                       "proxy %s not destroyed: FIFO %d has %" PRIu64
                       " pushed trigger(s) not consumed, a kernel is still pushing; wait for it (or abort) first",
                       proxy->name, index, pending);
    if (res != mscclppSuccess) {
      if (wasRunning) {
        pthread_mutex_unlock(&proxy->ctl);
        mscclppProxyStart(proxy); /* leave it as it was, so that the kernel can finish */
        return res;
      }
      goto unlock;
    }
  }
  for (int i = 0; i < proxy->nFifos; i++) __atomic_store_n(&proxy->fifos[i].fifo->attached, 0, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&proxy->ctl);
  pthread_mutex_destroy(&proxy->ctl);
  mscclppAbortDrop(proxy->abort, proxy->ownsAbort);
  free(proxy);
  return mscclppSuccess;
unlock:
  pthread_mutex_unlock(&proxy->ctl);
  return res;
}

mscclppResult_t mscclppProxyGetRunState(mscclppProxy_t proxy, mscclppProxyRunState* state) {
  if (proxy == NULL || state == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_PROXY, "mscclppProxyGetRunState: NULL argument");
  *state = (mscclppProxyRunState)__atomic_load_n(&proxy->state, __ATOMIC_ACQUIRE);
  return mscclppSuccess;
}

mscclppResult_t mscclppProxyGetAsyncError(mscclppProxy_t proxy, mscclppResult_t* error) {
  if (proxy == NULL || error == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_PROXY, "mscclppProxyGetAsyncError: NULL argument");
  return mscclppAbortGetError(proxy->abort, error);
}

mscclppResult_t mscclppProxyGetAbort(mscclppProxy_t proxy, mscclppAbort_t* abort) {
  if (proxy == NULL || abort == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_PROXY, "mscclppProxyGetAbort: NULL argument");
  *abort = proxy->abort;
  return mscclppSuccess;
}

mscclppResult_t mscclppProxySetTuning(mscclppProxy_t proxy, const struct mscclppProxyTuning* tuning) {
  if (proxy == NULL || tuning == NULL || tuning->tailBatch == 0)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_PROXY, "mscclppProxySetTuning: %s",
                      tuning != NULL && proxy != NULL ? "tailBatch must be >= 1" : "NULL argument");
  if (tuning->stalePauseNs > PROXY_MAX_STALE_PAUSE_NS)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_PROXY,
                      "mscclppProxySetTuning: stalePauseNs %u exceeds %u", tuning->stalePauseNs,
                      PROXY_MAX_STALE_PAUSE_NS);
  mscclppResult_t res = mscclppSuccess;
  pthread_mutex_lock(&proxy->ctl);
  if (proxy->threadValid && __atomic_load_n(&proxy->state, __ATOMIC_ACQUIRE) != mscclppProxyStateIdle)
    res = mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_PROXY, "mscclppProxySetTuning: stop proxy %s first",
                     proxy->name);
  else
    proxy->tuning = *tuning;
  pthread_mutex_unlock(&proxy->ctl);
  return res;
}

mscclppResult_t mscclppProxyGetStats(mscclppProxy_t proxy, struct mscclppProxyStats* stats) {
  if (proxy == NULL || stats == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_PROXY, "mscclppProxyGetStats: NULL argument");
  stats->triggers = __atomic_load_n(&proxy->statTriggers, __ATOMIC_RELAXED);
  stats->busyNs = __atomic_load_n(&proxy->statBusyNs, __ATOMIC_RELAXED);
  return mscclppSuccess;
}
