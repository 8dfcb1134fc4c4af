/* SPDX-License-Identifier: MIT */
/*
 * Internal knobs and counters of a proxy service (public API:
 * include/mscclpp/proxy.h), for benchmarks and tests that compare variants
 * in one run. Nothing here is exported from the shared library.
 */
#ifndef MSCCLPP_SRC_PROXY_PROXY_H_
#define MSCCLPP_SRC_PROXY_PROXY_H_

#include <stdint.h>

#include "mscclpp/proxy.h"

#ifdef __cplusplus
extern "C" {
#endif

struct mscclppProxyTuning {
  /* Publish a FIFO's tail (and, for synchronous handlers, its completed
   * counter) after at most this many taken triggers, and always after the
   * first trigger of a serving pass (up to 64 triggers), when the FIFO is
   * found empty, before a handler error, and before the thread stops. 1:
   * after every trigger. Each publication is a store to a line that waiting
   * kernels read over PCIe; batching it keeps the proxy from paying that
   * line's round trip per trigger when the FIFO is busy, while a lone
   * trigger is published right after its handler. */
  uint32_t tailBatch;
  /* Prefetch the slot line this many lines ahead of the trigger being
   * served (0: off). */
  uint32_t prefetchLines;
  /* 1: measure the time the thread spends serving (mscclppProxyGetStats);
   * costs one clock read per loop. */
  int stats;
  /* When a pass finds no fresh trigger anywhere, wait this many ns before
   * polling again (0: poll again at once, with a pause instruction). On a
   * GPU FIFO the line the proxy polls is the one the GPU is writing 16 bytes
   * at a time; each CPU read of it makes the next GPU write snoop the CPU's
   * copy. bench_fifo measures whether backing off helps. At most 1 ms. */
  uint32_t stalePauseNs;
};

/* Defaults of a proxy that serves a GPU: its pushers write slots over PCIe
 * and read the tail over PCIe (bench_fifo compares the variants). */
#define MSCCLPP_PROXY_TAIL_BATCH_DEFAULT 8u
#define MSCCLPP_PROXY_PREFETCH_LINES_DEFAULT 2u
#define MSCCLPP_PROXY_TUNING_DEFAULT \
  { MSCCLPP_PROXY_TAIL_BATCH_DEFAULT, MSCCLPP_PROXY_PREFETCH_LINES_DEFAULT, 0, 0u }
/* Defaults on the host backend, where the pushers are CPU cores in the same
 * coherence domain: publishing after every trigger and no prefetch measured
 * faster there (bench_fifo_host (3) vs (3t); a prefetched line is one a
 * producer core is about to write). */
#define MSCCLPP_PROXY_TUNING_HOST_BACKEND \
  { 1u, 0u, 0, 0u }

/* Replace the service's tuning (only while its thread is not running:
 * mscclppInvalidUsage otherwise; mscclppInvalidArgument for NULL,
 * tailBatch 0 or stalePauseNs over 1 ms). */
mscclppResult_t mscclppProxySetTuning(mscclppProxy_t proxy, const struct mscclppProxyTuning* tuning);

struct mscclppProxyStats {
  uint64_t triggers; /* handed to handlers since creation */
  uint64_t busyNs;   /* time in loop iterations that found work (tuning.stats only) */
};

/* A snapshot of the counters (they only grow; take differences). */
mscclppResult_t mscclppProxyGetStats(mscclppProxy_t proxy, struct mscclppProxyStats* stats);

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_SRC_PROXY_PROXY_H_ */
