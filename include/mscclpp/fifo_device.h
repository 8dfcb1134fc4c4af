/* SPDX-License-Identifier: MIT */
/*
 * The device side of the trigger FIFO: what a kernel (or, on the host
 * backend, a CPU thread) calls. Host side: mscclpp/fifo.h.
 *
 * Memory:
 *   slots      size x 16 bytes, host-mapped: written by pushers (one 16-byte
 *              store each), read by the proxy (one 16-byte load each), never
 *              cleared (commit bits alternate per lap, see trigger.h)
 *   head       device memory: next position to claim (fetch-and-add)
 *   tailCache  device memory, 2 words on one line: [0] the largest tail a
 *              pusher has read (a lower bound of tail; only grows), [1] the
 *              clock (ns) at which a pusher last started reading the tail
 *   tail       host-mapped, written by the proxy: positions < tail are taken
 *   completed  host-mapped, written by the proxy: positions < completed are
 *              complete at their destination (flush)
 * A push reads nothing over PCIe unless the FIFO looks full from tailCache.
 * Positions are 64-bit and never wrap. The proxy publishes tail and
 * completed in batches: whenever it finds the FIFO empty, and at least every
 * few triggers while it is not (see mscclpp/proxy.h).
 *
 * Claim policy (the handle's claimPolicy; bench_fifo compares them). The
 * proxy consumes positions strictly in order, so a position that is claimed
 * but not yet written stalls it. The default, MSCCLPP_FIFO_CLAIM_FIRST_SHARED,
 * claims first (fetch-and-add) and, when the FIFO looks full, waits on the
 * cached tail in device memory, which ONE waiter at a time refreshes from the
 * host-mapped tail (one PCIe read, at most one per tailRefreshNs, elected by
 * a compare-and-swap on a clock word) while the others sleep briefly and
 * re-read device memory. MSCCLPP_FIFO_CLAIM_CHECK_FIRST waits for space
 * BEFORE claiming (reads head and the cached tail, then claims; an overshoot
 * waits after the claim on the same cache; a pre-claim wait that lasts
 * MSCCLPP_FIFO_PRECLAIM_MAX_NS claims anyway, so no pusher starves).
 * MSCCLPP_FIFO_CLAIM_FIRST_POLL is the first policy: claim first, then every
 * waiter polls the tail over PCIe itself, sleeping in between.
 * Measured on an H200 with 132 pushing blocks: FIRST_SHARED pushes an order
 * of magnitude more triggers per second than FIRST_POLL, CHECK_FIRST a
 * little fewer than FIRST_SHARED, and CHECK_FIRST's extra load lengthens a
 * one-trigger round trip, hence the default (bench/HISTORY.md, "FIFO and
 * proxy (issue: FIFO, proxy, semaphores)").
 * Safety never depends on the policy: a slot is written only after a tail
 * read (cached or not) showed it free.
 *
 * Every wait here is bounded by the handle's timeout and returns early when
 * the abort flag rises; a timeout is recorded as the first device error.
 * After any failure the FIFO is poisoned (a claimed position may never be
 * written): destroy it with its proxy.
 */
#ifndef MSCCLPP_FIFO_DEVICE_H_
#define MSCCLPP_FIFO_DEVICE_H_

#include <stdint.h>

#include "mscclpp/device.h"
#include "mscclpp/trigger.h"

/* What a push orders before its trigger. */
typedef enum {
  /* Every earlier write of this thread (to this GPU's memory, host memory or
   * a peer's) is visible system-wide before the proxy can see the trigger:
   * a release store (mscclppTriggerStore), which costs a system-scope fence
   * per push. For a trigger whose data this thread has just written (a put).
   * mscclppFifoDevicePush uses it. */
  mscclppFifoOrderRelease = 0,
  /* No ordering (mscclppTriggerStoreRelaxed): for a trigger that describes
   * no data this thread wrote (a flush; a signal that follows the proxy's
   * own copies), or after ONE mscclppFenceSystem() that covers several
   * pushes. */
  mscclppFifoOrderRelaxed = 1
} mscclppFifoOrder;

/* Pass by value to kernels; get it from mscclppFifoGetDeviceHandle. */
typedef struct {
  uint64_t* slots;     /* 2 * size words, host-mapped */
  uint64_t* head;      /* device memory */
  uint64_t* tailCache; /* device memory */
  uint64_t* tail;      /* host-mapped */
  uint64_t* completed; /* host-mapped */
  uint32_t size;       /* slots, a power of two */
  uint32_t sizeLog2;
  /* Tuning of a push that finds the FIFO full: it sleeps about this many ns
   * per trigger the proxy must still take before its slot is free (at most
   * MSCCLPP_FIFO_FULL_SLEEP_MAX_NS) between two reads of the tail, instead of
   * reading it back to back over PCIe. 0: back to back. Set by
   * mscclppFifoGetDeviceHandle; a kernel may change its copy. */
  uint32_t fullSleepNsPerSlot;
  /* MSCCLPP_FIFO_CLAIM_*; set by mscclppFifoGetDeviceHandle
   * (MSCCLPP_FIFO_CLAIM_DEFAULT); a kernel may change its copy. */
  uint32_t claimPolicy;
  /* Shared-cache policies: a waiter re-reads the host-mapped tail only when
   * no pusher has started to within this many ns (one PCIe read in flight
   * per interval instead of one per waiter). */
  uint32_t tailRefreshNs;
  uint32_t reserved;
  mscclppWaitContext wait;
} mscclppFifoDeviceHandle;

#define MSCCLPP_FIFO_FULL_SLEEP_NS_PER_SLOT 16u
#define MSCCLPP_FIFO_FULL_SLEEP_MAX_NS 1000u
/* Shared-cache waiters that lose the refresh election sleep at most this
 * long between two reads of the cached tail (device memory). */
#define MSCCLPP_FIFO_SHARED_SLEEP_MAX_NS 200u
#define MSCCLPP_FIFO_TAIL_REFRESH_NS 400u
/* A pre-claim wait longer than this claims anyway (no starvation). */
#define MSCCLPP_FIFO_PRECLAIM_MAX_NS 50000u

#define MSCCLPP_FIFO_CLAIM_CHECK_FIRST 0u  /* wait for space, then claim */
#define MSCCLPP_FIFO_CLAIM_FIRST_SHARED 1u /* claim, then wait on the shared tail cache (default) */
#define MSCCLPP_FIFO_CLAIM_FIRST_POLL 2u   /* claim, then each waiter polls the tail over PCIe */
#define MSCCLPP_FIFO_CLAIM_DEFAULT MSCCLPP_FIFO_CLAIM_FIRST_SHARED

/* Counting hook for benchmarks: define MSCCLPP_FIFO_DEVICE_STAT(counter)
 * before including this header to count the events below. */
#define MSCCLPP_FIFO_STAT_PRE_WAIT 0  /* a claim that waited before claiming */
#define MSCCLPP_FIFO_STAT_POST_WAIT 1 /* a claim that waited after claiming */
#define MSCCLPP_FIFO_STAT_TAIL_READ 2 /* a read of the host-mapped tail (PCIe) */
#define MSCCLPP_FIFO_STAT_CLAIM 3     /* a claim (one atomic) */
#define MSCCLPP_FIFO_STAT_COUNT 4
#ifndef MSCCLPP_FIFO_DEVICE_STAT
#define MSCCLPP_FIFO_DEVICE_STAT(counter) ((void)0)
#endif

/* One step of a shared-cache wait for space: returns a fresh lower bound of
 * the tail. `missing` is how many more triggers the proxy must take (as far
 * as the caller knows) before the caller fits. If no pusher has started a
 * read of the host-mapped tail within tailRefreshNs, this one becomes the
 * reader (compare-and-swap on the clock word: one winner), reads it (one
 * PCIe round trip) and raises the cached tail; otherwise it sleeps briefly
 * and re-reads the cached tail (device memory). The tail is read with
 * acquire: the slot a pusher overwrites next was read by the proxy before it
 * published this tail. */
MSCCLPP_DEVICE_INLINE uint64_t mscclppFifoDeviceWaitTail(const mscclppFifoDeviceHandle* fifo, uint64_t missing) {
  uint64_t* stamp = fifo->tailCache + 1;
  uint64_t now = mscclppClockNs();
  uint64_t last = mscclppLoadRelaxedGpu64(stamp);
  if (now - last >= fifo->tailRefreshNs && mscclppAtomicCas64(stamp, last, now) == last) {
    MSCCLPP_FIFO_DEVICE_STAT(MSCCLPP_FIFO_STAT_TAIL_READ);
    uint64_t tail = mscclppLoadAcquireSys64(fifo->tail);
    mscclppAtomicMax64(fifo->tailCache, tail);
    return tail;
  }
  uint64_t sleepNs = missing * fifo->fullSleepNsPerSlot;
  if (sleepNs > MSCCLPP_FIFO_SHARED_SLEEP_MAX_NS) sleepNs = MSCCLPP_FIFO_SHARED_SLEEP_MAX_NS;
  if (sleepNs > 0) mscclppDeviceSleepNs((uint32_t)sleepNs);
  return mscclppLoadRelaxedGpu64(fifo->tailCache);
}

/* After a claim of positions ..last: wait until `last` has a free slot,
 * polling the host-mapped tail directly (MSCCLPP_FIFO_CLAIM_FIRST_POLL). */
MSCCLPP_DEVICE_INLINE mscclppResult_t mscclppFifoDeviceWaitPolling(const mscclppFifoDeviceHandle* fifo,
                                                                   uint64_t last) {
  mscclppWaitState st = MSCCLPP_WAIT_STATE_INIT;
  for (;;) {
    MSCCLPP_FIFO_DEVICE_STAT(MSCCLPP_FIFO_STAT_TAIL_READ);
    uint64_t tail = mscclppLoadAcquireSys64(fifo->tail);
    if (last - tail < fifo->size) {
      mscclppStoreRelaxed64(fifo->tailCache, tail);
      mscclppWaitEnd(&fifo->wait, &st);
      return mscclppSuccess;
    }
    /* the proxy must take `missing` more triggers before this one fits */
    uint64_t missing = last - tail - fifo->size + 1;
    uint64_t sleepNs = missing * fifo->fullSleepNsPerSlot;
    if (sleepNs > MSCCLPP_FIFO_FULL_SLEEP_MAX_NS) sleepNs = MSCCLPP_FIFO_FULL_SLEEP_MAX_NS;
    if (sleepNs > 0) mscclppDeviceSleepNs((uint32_t)sleepNs);
    const mscclppWaitWho who = {tail, 0, MSCCLPP_WAIT_PEER_UNKNOWN, 0};
    mscclppResult_t r = mscclppWaitStepWho(&fifo->wait, &st, MSCCLPP_DEVICE_ERROR_TIMEOUT_PUSH, last, &who);
    if (r != mscclppSuccess) return r;
  }
}

/* After a claim of positions ..last, with `tailCache` a lower bound of the
 * tail read before the claim: wait on the shared cache until `last` has a
 * free slot. */
MSCCLPP_DEVICE_INLINE mscclppResult_t mscclppFifoDeviceWaitShared(const mscclppFifoDeviceHandle* fifo, uint64_t last,
                                                                  uint64_t tailCache) {
  mscclppWaitState st = MSCCLPP_WAIT_STATE_INIT;
  for (;;) {
    /* tailCache <= tail <= last + 1: no underflow */
    uint64_t missing = last - tailCache - fifo->size + 1;
    tailCache = mscclppFifoDeviceWaitTail(fifo, missing);
    if (last - tailCache < fifo->size) {
      mscclppWaitEnd(&fifo->wait, &st);
      return mscclppSuccess;
    }
    const mscclppWaitWho who = {tailCache, 0, MSCCLPP_WAIT_PEER_UNKNOWN, 0};
    mscclppResult_t r = mscclppWaitStepWho(&fifo->wait, &st, MSCCLPP_DEVICE_ERROR_TIMEOUT_PUSH, last, &who);
    if (r != mscclppSuccess) return r;
  }
}

/* Claim `count` (<= size) consecutive positions (one fetch-and-add) such
 * that each of them has a free slot when this returns; *first is the first
 * position. How it waits for space is the handle's claimPolicy (top of this
 * file). mscclppSuccess, mscclppAborted or mscclppTimeout. */
MSCCLPP_DEVICE_INLINE mscclppResult_t mscclppFifoDeviceClaim(const mscclppFifoDeviceHandle* fifo, uint32_t count,
                                                             uint64_t* first) {
  /* An older cached tail is still a lower bound of the tail, which is all
   * the checks need (and tail <= head always holds). */
  uint64_t tailCache = mscclppLoadRelaxedGpu64(fifo->tailCache);
  if (fifo->claimPolicy == MSCCLPP_FIFO_CLAIM_CHECK_FIRST) {
    /* Wait for space before claiming: a claimed position is then written at
     * once, and the proxy never waits on a sleeping pusher's position. The
     * head load overlaps with the tailCache load. */
    uint64_t head = mscclppLoadRelaxedGpu64(fifo->head);
    /* head was read first: it may be older than tailCache (then the FIFO
     * drained meanwhile: there is space) */
    int64_t used = (int64_t)(head - tailCache);
    if (used > 0 && (uint64_t)used + count > fifo->size) {
      MSCCLPP_FIFO_DEVICE_STAT(MSCCLPP_FIFO_STAT_PRE_WAIT);
      mscclppWaitState st = MSCCLPP_WAIT_STATE_INIT;
      uint64_t start = mscclppClockNs();
      for (;;) {
        tailCache = mscclppFifoDeviceWaitTail(fifo, (uint64_t)used + count - fifo->size);
        head = mscclppLoadRelaxedGpu64(fifo->head);
        used = (int64_t)(head - tailCache);
        if (used <= 0 || (uint64_t)used + count <= fifo->size) break;
        const mscclppWaitWho who = {tailCache, 0, MSCCLPP_WAIT_PEER_UNKNOWN, 0};
        mscclppResult_t r =
            mscclppWaitStepWho(&fifo->wait, &st, MSCCLPP_DEVICE_ERROR_TIMEOUT_PUSH, head + count - 1, &who);
        if (r != mscclppSuccess) return r;
        /* bounded: claim anyway and wait in position order */
        if (mscclppClockNs() - start > MSCCLPP_FIFO_PRECLAIM_MAX_NS) break;
      }
      mscclppWaitEnd(&fifo->wait, &st);
    }
  }
  MSCCLPP_FIFO_DEVICE_STAT(MSCCLPP_FIFO_STAT_CLAIM);
  uint64_t pos = mscclppAtomicClaim64(fifo->head, count);
  uint64_t last = pos + count - 1;
  if (last - tailCache >= fifo->size) {
    MSCCLPP_FIFO_DEVICE_STAT(MSCCLPP_FIFO_STAT_POST_WAIT);
    mscclppResult_t r = fifo->claimPolicy == MSCCLPP_FIFO_CLAIM_FIRST_POLL
                            ? mscclppFifoDeviceWaitPolling(fifo, last)
                            : mscclppFifoDeviceWaitShared(fifo, last, tailCache);
    if (r != mscclppSuccess) return r;
  }
  *first = pos;
  return mscclppSuccess;
}

/* Write a trigger into the (free) slot of a claimed position, with its
 * commit bits. */
MSCCLPP_DEVICE_INLINE void mscclppFifoDeviceWriteSlot(const mscclppFifoDeviceHandle* fifo, uint64_t pos,
                                                      mscclppTrigger trigger, mscclppFifoOrder order) {
  uint64_t commit = (((pos >> fifo->sizeLog2) & 1u) ^ 1u) << 63;
  uint64_t* slot = fifo->slots + 2 * (pos & (fifo->size - 1));
  uint64_t w0 = (trigger.value[0] & ~MSCCLPP_TRIGGER_COMMIT_BIT) | commit;
  uint64_t w1 = (trigger.value[1] & ~MSCCLPP_TRIGGER_COMMIT_BIT) | commit;
  if (order == mscclppFifoOrderRelaxed)
    mscclppTriggerStoreRelaxed(slot, w0, w1);
  else
    mscclppTriggerStore(slot, w0, w1);
}

/* Push a packed trigger (see mscclppTriggerPack / mscclppTriggerEncode; its
 * commit bits are ignored), ordered after this thread's earlier writes as
 * `order` says. Waits only while the FIFO is full. On success *position is
 * the trigger's position, for mscclppFifoDeviceSync/Flush. Returns
 * mscclppSuccess, mscclppAborted, or mscclppTimeout.
 *
 * On a GPU, the lanes of a warp that push to the same FIFO at the same time
 * claim their positions together, in lane order, with one atomic per FIFO
 * size's worth of lanes, and each chunk writes its slots as soon as all of
 * them are free. So no lane holds a claimed, unwritten position while a lane
 * of its own warp waits for space (a diverged warp would otherwise stall the
 * proxy at that position for as long as the waiting lane's poll). Under
 * the default claim policy the chunk's leader waits for room for the whole
 * chunk before claiming it. Lanes pushing to different FIFOs are grouped per
 * FIFO. */
MSCCLPP_DEVICE_INLINE mscclppResult_t mscclppFifoDevicePushTrigger(const mscclppFifoDeviceHandle* fifo,
                                                                   mscclppTrigger trigger, mscclppFifoOrder order,
                                                                   uint64_t* position) {
#if defined(MSCCLPP_DEVICE_CUDA)
  uint32_t active = __activemask();
  uint32_t group = (active & (active - 1)) == 0 ? active /* alone: no match needed */
                                                 : __match_any_sync(active, (unsigned long long)(uintptr_t)fifo->head);
  if ((group & (group - 1)) != 0) {
    uint32_t lane;
    __asm__("mov.u32 %0, %%laneid;" : "=r"(lane));
    uint32_t n = (uint32_t)__popc(group);
    uint32_t rank = (uint32_t)__popc(group & ((1u << lane) - 1u));
    int leader = __ffs(group) - 1;
    uint32_t chunk = n < fifo->size ? n : fifo->size;
    int mine = 0;
    for (uint32_t first = 0; first < n; first += chunk) {
      uint32_t count = n - first < chunk ? n - first : chunk;
      unsigned long long base = 0;
      int res = (int)mscclppSuccess;
      if ((int)lane == leader) {
        uint64_t b = 0;
        res = (int)mscclppFifoDeviceClaim(fifo, count, &b);
        base = b;
      }
      base = __shfl_sync(group, base, leader);
      res = __shfl_sync(group, res, leader);
      if (res != (int)mscclppSuccess) return mine ? mscclppSuccess : (mscclppResult_t)res;
      if (rank >= first && rank < first + count) {
        uint64_t pos = (uint64_t)base + (rank - first);
        mscclppFifoDeviceWriteSlot(fifo, pos, trigger, order);
        *position = pos;
        mine = 1;
      }
    }
    return mscclppSuccess;
  }
#endif
  uint64_t pos = 0;
  mscclppResult_t r = mscclppFifoDeviceClaim(fifo, 1, &pos);
  if (r != mscclppSuccess) return r;
  mscclppFifoDeviceWriteSlot(fifo, pos, trigger, order);
  *position = pos;
  return mscclppSuccess;
}

/* Check `fields` and push them with mscclppFifoOrderRelease (earlier writes
 * of this thread visible before the trigger; use mscclppFifoDevicePushTrigger
 * with mscclppFifoOrderRelaxed for a trigger that publishes nothing). An
 * out-of-range field returns mscclppInvalidArgument and records
 * MSCCLPP_DEVICE_ERROR_INVALID_TRIGGER (field number and value), which
 * raises the abort flag; nothing is pushed. Otherwise as
 * mscclppFifoDevicePushTrigger. */
MSCCLPP_DEVICE_INLINE mscclppResult_t mscclppFifoDevicePush(const mscclppFifoDeviceHandle* fifo,
                                                      const mscclppTriggerFields* fields, uint64_t* position) {
  int bad = mscclppTriggerCheck(fields);
  if (bad != MSCCLPP_TRIGGER_FIELD_OK) {
    mscclppDeviceRaise(&fifo->wait, MSCCLPP_DEVICE_ERROR_INVALID_TRIGGER, (unsigned)bad,
                       mscclppTriggerFieldValue(fields, bad));
    return mscclppInvalidArgument;
  }
  return mscclppFifoDevicePushTrigger(fifo, mscclppTriggerPack(fields), mscclppFifoOrderRelease, position);
}

/* 1 when the proxy has taken `position` (its handler has run) and published
 * it. One read of host-mapped memory; no wait. */
MSCCLPP_DEVICE_INLINE int mscclppFifoDevicePoll(const mscclppFifoDeviceHandle* fifo, uint64_t position) {
  return mscclppLoadAcquireSys64(fifo->tail) > position;
}

/* Wait until the proxy has taken `position`. mscclppSuccess, mscclppAborted
 * or mscclppTimeout. */
MSCCLPP_DEVICE_INLINE mscclppResult_t mscclppFifoDeviceSync(const mscclppFifoDeviceHandle* fifo, uint64_t position) {
  mscclppWaitState st = MSCCLPP_WAIT_STATE_INIT;
  /* "Taken" orders nothing the caller reads, so the spin is relaxed (an
   * acquire load per poll lengthened the round trip on the H200:
   * bench/HISTORY.md, the H200 FIFO run "after the first optimisation
   * round"). */
  uint64_t tail;
  while ((tail = mscclppLoadRelaxedSys64(fifo->tail)) <= position) {
    const mscclppWaitWho who = {tail, 0, MSCCLPP_WAIT_PEER_UNKNOWN, 0};
    mscclppResult_t r = mscclppWaitStepWho(&fifo->wait, &st, MSCCLPP_DEVICE_ERROR_TIMEOUT_SYNC, position, &who);
    if (r != mscclppSuccess) return r;
  }
  mscclppWaitEnd(&fifo->wait, &st);
  return mscclppSuccess;
}

/* Wait until everything up to and including `position` is complete at its
 * destination (the proxy advances `completed` when its copies for those
 * positions have finished, not merely started). mscclppSuccess,
 * mscclppAborted or mscclppTimeout. */
MSCCLPP_DEVICE_INLINE mscclppResult_t mscclppFifoDeviceFlush(const mscclppFifoDeviceHandle* fifo, uint64_t position) {
  mscclppWaitState st = MSCCLPP_WAIT_STATE_INIT;
  /* Spin relaxed; once the value is seen, one acquire load of the same word
   * synchronizes with the proxy's release store of it (or a later one), so
   * what the proxy completed before publishing is visible after we return. */
  uint64_t done;
  while ((done = mscclppLoadRelaxedSys64(fifo->completed)) <= position) {
    const mscclppWaitWho who = {done, 0, MSCCLPP_WAIT_PEER_UNKNOWN, 0};
    mscclppResult_t r = mscclppWaitStepWho(&fifo->wait, &st, MSCCLPP_DEVICE_ERROR_TIMEOUT_FLUSH, position, &who);
    if (r != mscclppSuccess) return r;
  }
  mscclppWaitEnd(&fifo->wait, &st);
  (void)mscclppLoadAcquireSys64(fifo->completed);
  return mscclppSuccess;
}

#endif /* MSCCLPP_FIFO_DEVICE_H_ */
