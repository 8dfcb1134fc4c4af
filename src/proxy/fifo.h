/* SPDX-License-Identifier: MIT */
/*
 * The FIFO's insides and the proxy's inline consumer path (public API:
 * include/mscclpp/fifo.h). The consumer owns hostTail; nothing here locks.
 */
#ifndef MSCCLPP_SRC_PROXY_FIFO_H_
#define MSCCLPP_SRC_PROXY_FIFO_H_

#include <stdint.h>

#include "gpu/abort.h"
#include "gpu/gpu.h"
#include "mscclpp/fifo.h"

#ifdef __cplusplus
extern "C" {
#endif

struct mscclppFifo {
  int device;
  uint32_t size;
  uint32_t sizeLog2;
  double timeoutSec;
  struct mscclppAbort* abort;
  int ownsAbort;
  int attached; /* served by a proxy service; __atomic */
  /* host-mapped block: slots, then tail, completed, head read-back (one
   * cache line each) */
  void* mappedHost;
  void* mappedDev;
  uint64_t* slotsHost;
  uint64_t* slotsDev;
  uint64_t* tailHost;
  uint64_t* tailDev;
  uint64_t* completedHost;
  uint64_t* completedDev;
  uint64_t* headReadback;
  /* device memory, zeroed: head, then tailCache and the tail refresh clock
   * (one cache line each; see mscclpp/fifo_device.h) */
  void* devMem;
  uint64_t* headDev;
  uint64_t* tailCacheDev;
  mscclppGpuStream_t stream; /* reads head back without waiting for kernels */
  /* consumer state, on its own line */
  uint64_t hostTail __attribute__((aligned(64))); /* next position to take */
  uint64_t publishedTail;                         /* last value stored to *tailHost */
  uint64_t hostCompleted;
};

/* 1 and *trigger (commit bits cleared) when the slot at hostTail is fresh. */
static inline int mscclppFifoHostPoll(struct mscclppFifo* f, mscclppTrigger* trigger) {
  uint64_t w0, w1;
  mscclppTriggerLoad(f->slotsHost + 2 * (f->hostTail & (f->size - 1)), &w0, &w1);
  uint64_t want = (((f->hostTail >> f->sizeLog2) & 1u) ^ 1u) << 63;
  if (((w0 ^ want) | (w1 ^ want)) & MSCCLPP_TRIGGER_COMMIT_BIT) return 0;
  trigger->value[0] = w0 & ~MSCCLPP_TRIGGER_COMMIT_BIT;
  trigger->value[1] = w1 & ~MSCCLPP_TRIGGER_COMMIT_BIT;
  return 1;
}

/* Start loading the slots `lines` cache lines after the one at hostTail, so
 * that the next polls hit the cache when the GPU wrote them already (they
 * usually did when the proxy is the bottleneck); a line prefetched before the
 * GPU writes it is merely invalidated again. */
static inline void mscclppFifoHostPrefetch(const struct mscclppFifo* f, uint32_t lines) {
  uint64_t pos = f->hostTail + (uint64_t)lines * (MSCCLPP_CACHE_LINE / sizeof(mscclppTrigger));
  __builtin_prefetch(f->slotsHost + 2 * (pos & (f->size - 1)), 0, 3);
}

/* The slot at hostTail is consumed; pushers see it (tail = hostTail) only
 * after mscclppFifoHostPublish. */
static inline void mscclppFifoHostTake(struct mscclppFifo* f) { f->hostTail++; }

/* Publish the tail: every position taken so far. One store to host-mapped
 * memory (a line kernels poll over PCIe), skipped when nothing changed. */
static inline void mscclppFifoHostPublish(struct mscclppFifo* f) {
  if (f->publishedTail != f->hostTail) {
    f->publishedTail = f->hostTail;
    mscclppStoreReleaseSys64(f->tailHost, f->hostTail);
  }
}

/* Take the slot at hostTail and publish the new tail at once. */
static inline void mscclppFifoHostPop(struct mscclppFifo* f) {
  mscclppFifoHostTake(f);
  mscclppFifoHostPublish(f);
}

/* Positions < end are complete at their destination. */
static inline void mscclppFifoHostComplete(struct mscclppFifo* f, uint64_t end) {
  if (end != f->hostCompleted) {
    f->hostCompleted = end;
    mscclppStoreReleaseSys64(f->completedHost, end);
  }
}

/* Number of positions claimed by pushers and not yet consumed (head - tail),
 * read without waiting for running kernels. */
mscclppResult_t mscclppFifoPending(struct mscclppFifo* f, uint64_t* pending);

/* ---- for the hang report: loads only, no lock, no CUDA call (a signal
 * handler calls them) ---- */

/* The published counters: tail (taken by the consumer), completed, and the
 * head (claimed by pushers) where the host can read it (host backend;
 * *headKnown = 0 on a GPU, whose head is in device memory). */
void mscclppFifoSnapshot(const struct mscclppFifo* f, uint64_t* tail, uint64_t* completed, uint64_t* head,
                         int* headKnown);
/* 1 and *trigger (commit bits cleared) when position `pos` (>= the tail)
 * holds a pushed trigger not yet taken; 0 otherwise. */
int mscclppFifoPeek(const struct mscclppFifo* f, uint64_t pos, mscclppTrigger* trigger);

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_SRC_PROXY_FIFO_H_ */
