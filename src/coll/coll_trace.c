/* SPDX-License-Identifier: MIT */
/*
 * The host side of the GPU kernel events (coll_trace.h): the ring, the
 * slots each launch gets, the records read back into the trace, and the
 * GPU clock's offset to the host's.
 *
 * A communicator's ring is made at its first launch while tracing is on
 * (mscclppCollTraceLaunch), so nothing is allocated when
 * tracing is off. Launches are remembered in order; at every later launch
 * and at destroy the oldest ones whose blocks have all written their record
 * are read back, each block one span on a track of its own ("gpu<d> block
 * <b>"). A launch that would need slots still held by an unfinished one
 * first gives up on that one (its missing blocks count as dropped): a slow
 * kernel never makes the host wait.
 *
 * Clocks: %globaltimer is not CLOCK_MONOTONIC. The ring is made with a
 * one-thread kernel that answers the host's pings through mapped memory
 * with its %globaltimer: the host's send and receive times bracket the
 * GPU's reading, and the round with the shortest trip gives the offset (as
 * the bootstrap's clock sync does between ranks). Where that kernel does
 * not answer in time (the GPU is full of spinning kernels), the offset is
 * taken from CLOCK_REALTIME, which the driver keeps %globaltimer close to.
 */
#include "coll/coll_trace.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "core/log.h"
#include "core/trace.h"
#include "coll/coll.h"

#ifndef MSCCLPP_HAVE_CUDA

void mscclppCollTraceDestroy(struct mscclppCollTrace* t) { (void)t; }

#else

#include "gpu/gpu.h"
#include "gpu/gpu_ipc.h"

#define PENDING 1024            /* launches remembered */
#define CLOCK_ROUNDS 16         /* pings of the clock calibration */
#define CLOCK_WAIT_NS 50000000u /* how long the host waits for the calibration kernel */
#define TRACKS_PER_DEVICE 1024u /* track ids: 1 + device * this + block */

struct traceLaunch {
  uint32_t base, nblocks, tag;
  const char* kernel;
  uint64_t comm, seq;
};

struct mscclppCollTrace {
  int device;
  struct mscclppCollTraceRecord* host; /* the ring, as the host reads it */
  struct mscclppCollTraceRecord* dev;  /* ... as the GPU writes it */
  uint32_t next;                       /* the next launch's first slot */
  uint32_t used;                       /* slots held by remembered launches */
  uint32_t tag;
  uint32_t named;                      /* blocks whose track is named */
  struct traceLaunch pending[PENDING];
  uint32_t head, count;
  int64_t gpuToHost; /* add to a %globaltimer reading to get CLOCK_MONOTONIC */
  uint64_t dropped;
};

static int64_t realtimeOffset(void) {
  struct timespec rt, mono;
  clock_gettime(CLOCK_REALTIME, &rt);
  clock_gettime(CLOCK_MONOTONIC, &mono);
  return ((int64_t)mono.tv_sec - (int64_t)rt.tv_sec) * 1000000000 + ((int64_t)mono.tv_nsec - (int64_t)rt.tv_nsec);
}

/* The calibration through mapped memory (coll_trace.h's cells). */
static void calibrate(struct mscclppCollTrace* t, uint64_t* cellsHost, uint64_t* cellsDev) {
  int64_t best = INT64_MAX, offset = 0;
  const char* why = NULL;
  void* stream = NULL;
  int launched = mscclppGpuIpcProcessStream(&stream) == mscclppSuccess &&
                 mscclppCollTraceClockEnqueue(cellsDev, CLOCK_ROUNDS, stream, &why) == mscclppSuccess;
  for (uint32_t i = 1; launched && i <= CLOCK_ROUNDS; i++) {
    uint64_t t0 = mscclppTimeNs(), t2;
    __atomic_store_n(&cellsHost[MSCCLPP_COLL_TRACE_CELL_PING], (uint64_t)i, __ATOMIC_RELEASE);
    while (__atomic_load_n(&cellsHost[MSCCLPP_COLL_TRACE_CELL_PONG], __ATOMIC_ACQUIRE) < i) {
      if ((t2 = mscclppTimeNs()) - t0 > CLOCK_WAIT_NS) break;
    }
    t2 = mscclppTimeNs();
    if (__atomic_load_n(&cellsHost[MSCCLPP_COLL_TRACE_CELL_PONG], __ATOMIC_ACQUIRE) < i) {
      launched = 0; /* no answer: let the kernel finish whenever it runs */
      break;
    }
    int64_t rtt = (int64_t)(t2 - t0);
    if (rtt < best) {
      best = rtt;
      offset = (int64_t)(t0 + (uint64_t)rtt / 2) - (int64_t)cellsHost[MSCCLPP_COLL_TRACE_CELL_TIME];
    }
  }
  /* release the kernel, answered or not */
  __atomic_store_n(&cellsHost[MSCCLPP_COLL_TRACE_CELL_PING], UINT64_MAX, __ATOMIC_RELEASE);
  int synced = best != INT64_MAX;
  t->gpuToHost = synced ? offset : realtimeOffset();
  MSCCLPP_TRACE_EMIT(MSCCLPP_TRACE_GPU_CLOCK, mscclppTraceNow(), 0, MSCCLPP_TRACE_I(t->device),
                     MSCCLPP_TRACE_I(t->gpuToHost), MSCCLPP_TRACE_I(synced ? best : -1), (uint64_t)synced);
  if (!synced)
    MSCCLPP_INFO(MSCCLPP_LOG_COLL, "MSCCLPP_TRACE: device %d's clock not calibrated (%s); using CLOCK_REALTIME",
                 t->device, why != NULL ? why : "the calibration kernel did not answer");
}

static mscclppResult_t traceCreate(int device, struct mscclppCollTrace** out) {
  struct mscclppCollTrace* t = (struct mscclppCollTrace*)calloc(1, sizeof(*t));
  if (t == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_COLL, "MSCCLPP_TRACE: out of memory");
  t->device = device;
  const size_t ringBytes = MSCCLPP_COLL_TRACE_SLOTS * sizeof(struct mscclppCollTraceRecord);
  void *host = NULL, *dev = NULL;
  mscclppResult_t res =
      mscclppGpuHostAllocMapped(device, ringBytes + MSCCLPP_COLL_TRACE_CELLS * sizeof(uint64_t), &host, &dev);
  if (res != mscclppSuccess) {
    free(t);
    return res;
  }
  t->host = (struct mscclppCollTraceRecord*)host;
  t->dev = (struct mscclppCollTraceRecord*)dev;
  calibrate(t, (uint64_t*)((char*)host + ringBytes), (uint64_t*)((char*)dev + ringBytes));
  *out = t;
  return mscclppSuccess;
}

/* Read the oldest launch back: its finished blocks become spans; `force`:
 * also when some have not finished (they are dropped). 1 when it was read. */
static int readOldest(struct mscclppCollTrace* t, int force) {
  const struct traceLaunch* l = &t->pending[t->head];
  uint32_t done = 0;
  for (uint32_t b = 0; b < l->nblocks; b++)
    done += __atomic_load_n(&t->host[(l->base + b) & (MSCCLPP_COLL_TRACE_SLOTS - 1)].tag, __ATOMIC_ACQUIRE) == l->tag;
  if (done < l->nblocks && !force) return 0;
  for (uint32_t b = 0; b < l->nblocks; b++) {
    const struct mscclppCollTraceRecord* r = &t->host[(l->base + b) & (MSCCLPP_COLL_TRACE_SLOTS - 1)];
    if (__atomic_load_n(&r->tag, __ATOMIC_ACQUIRE) != l->tag) continue;
    uint64_t t0 = r->start + (uint64_t)t->gpuToHost, t1 = r->end + (uint64_t)t->gpuToHost;
    if (t1 <= t0) t1 = t0 + 1; /* a span, never an instant */
    MSCCLPP_TRACE_EMIT_ON(MSCCLPP_TRACE_GPU_BLOCK, 1u + (uint32_t)t->device * TRACKS_PER_DEVICE + b, t0, t1,
                          MSCCLPP_TRACE_S(l->kernel), (uint64_t)b, (uint64_t)r->sm, l->seq, l->comm);
  }
  t->dropped += l->nblocks - done;
  t->used -= l->nblocks;
  t->head = (t->head + 1) % PENDING;
  t->count--;
  return 1;
}

void mscclppCollTraceLaunch(struct mscclppCollTrace** tp, int device, uint32_t nblocks, const char* kernel,
                            uint64_t comm, uint64_t seq, struct mscclppCollTraceArgs* args) {
  memset(args, 0, sizeof(*args));
  if (*tp == NULL && traceCreate(device, tp) != mscclppSuccess) return; /* logged; the launch runs untraced */
  struct mscclppCollTrace* t = *tp;
  if (nblocks == 0 || nblocks > MSCCLPP_COLL_TRACE_SLOTS || nblocks >= TRACKS_PER_DEVICE) return;
  while (t->count > 0 && readOldest(t, 0)) {
  }
  while (t->count > 0 && (t->count == PENDING || t->used + nblocks > MSCCLPP_COLL_TRACE_SLOTS)) readOldest(t, 1);
  for (; t->named < nblocks; t->named++) {
    char name[48];
    snprintf(name, sizeof(name), "gpu%d block %u", device, t->named);
    mscclppTraceTrackName(1u + (uint32_t)device * TRACKS_PER_DEVICE + t->named, name);
  }
  if (++t->tag == 0) t->tag = 1;
  struct traceLaunch* l = &t->pending[(t->head + t->count) % PENDING];
  l->base = t->next;
  l->nblocks = nblocks;
  l->tag = t->tag;
  l->kernel = kernel;
  l->comm = comm;
  l->seq = seq;
  t->count++;
  t->used += nblocks;
  t->next = (t->next + nblocks) & (MSCCLPP_COLL_TRACE_SLOTS - 1);
  args->ring = t->dev;
  args->base = l->base;
  args->tag = l->tag;
}

void mscclppCollTraceKernel(struct mscclppComm* comm, int device, uint32_t nblocks, const char* kernel,
                            mscclppStream_t stream, struct mscclppCollTraceArgs* args) {
  memset(args, 0, sizeof(*args));
  struct mscclppCollState* st = NULL;
  if (!mscclppTraceOn() || mscclppGpuStreamCapturing((struct CUstream_st*)stream) ||
      mscclppCollStateOf(comm, &st) != mscclppSuccess)
    return;
  mscclppCollTraceLaunch(&st->gpuTrace, device, nblocks, kernel, comm->id, st->traceSeq, args);
}

void mscclppCollTraceDestroy(struct mscclppCollTrace* t) {
  if (t == NULL) return;
  /* the kernels are done (the backends' releases waited for the device) */
  while (t->count > 0) readOldest(t, 1);
  if (t->dropped > 0) {
    mscclppTraceDrop(t->dropped);
    MSCCLPP_INFO(MSCCLPP_LOG_COLL, "MSCCLPP_TRACE: %llu GPU block records lost (ring of %u slots overrun)",
                 (unsigned long long)t->dropped, MSCCLPP_COLL_TRACE_SLOTS);
  }
  mscclppGpuHostFreeMapped(t->device, t->host);
  free(t);
}

#endif /* MSCCLPP_HAVE_CUDA */
