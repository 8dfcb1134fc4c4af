/* SPDX-License-Identifier: MIT */
/*
 * The host side of the GPU kernel events (coll_trace.h): the ring, its
 * records copied out and kept, the kernels' names, and the GPU clock's
 * offset to the host's.
 *
 * A communicator's ring is made at its first launch while tracing is on
 * (mscclppCollTraceLaunch), so nothing is allocated when tracing is off.
 * A launch costs the host nothing but filling its arguments: the kernels
 * number their records themselves. When the launches since the last copy
 * may have filled half the ring, the launch copies the ring out on the
 * library's stream (never the application's: the collective's stream does
 * not wait) and takes the records that are whole, in their order, into a
 * list; destroy copies it out a last time and turns the list into trace
 * events, each block one span on a track of its own ("gpu<d> block <b>").
 * A record still missing while far newer ones are whole (a block that is
 * still running, or never ran) is counted as dropped once it is a quarter
 * of the ring behind; records the device wrote over before they were
 * copied (a graph replayed many times with no launch between: replays are
 * not seen from the host) are counted as dropped too.
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

#define CLOCK_ROUNDS 16         /* pings of the clock calibration */
#define CLOCK_WAIT_NS 50000000u /* how long the host waits for the calibration kernel */
#define TRACKS_PER_DEVICE 1024u /* track ids: 1 + device * this + block */
#define COPY_AT (MSCCLPP_COLL_TRACE_SLOTS / 2)   /* blocks launched since the last copy that start one */
#define GIVE_UP (MSCCLPP_COLL_TRACE_SLOTS / 4)   /* how far behind a missing record is counted as dropped */
#define COPY_WAIT_S 1.0                          /* a copy's wait at a launch */
#define FINAL_COPY_WAIT_S 10.0                   /* ... at destroy */

struct mscclppCollTrace {
  int device;
  uint64_t comm;
  struct mscclppCollTraceRecord* ring;  /* device memory, the counter after the slots */
  struct mscclppCollTraceRecord* stage; /* pinned host memory: the ring's copy */
  uint64_t* cells;                      /* the clock calibration's (pinned, mapped) */
  mscclppGpuStream_t stream;            /* the library's stream of the device: the copies */
  int copyPending;                      /* a copy that timed out is still enqueued (stage busy) */
  uint64_t next;                        /* the next record to take */
  uint64_t launched;                    /* blocks launched since the last copy */
  uint64_t seq;                         /* the newest call's seq: the records' 32 bits made whole */
  const char* kernels[MSCCLPP_COLL_TRACE_MAX_KERNELS];
  uint32_t nkernels;
  struct mscclppCollTraceRecord* kept; /* records taken, in order */
  uint64_t nkept, capKept, maxKept;
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

static void traceFree(struct mscclppCollTrace* t) {
  if (t->ring != NULL) mscclppGpuDeviceFree(t->device, t->ring);
  /* a copy still enqueued writes into stage: leave it (it is small) rather than free it under the copy */
  if (t->stage != NULL && !t->copyPending) mscclppGpuHostFreeMapped(t->device, t->stage);
  mscclppGpuHostFreeMapped(t->device, t->cells); /* the calibration kernel is done: the device was synchronized */
  mscclppGpuStreamDestroy(t->stream);
  free(t->kept);
  free(t);
}

static mscclppResult_t traceCreate(int device, uint64_t comm, int64_t maxRecords, struct mscclppCollTrace** out) {
  struct mscclppCollTrace* t = (struct mscclppCollTrace*)calloc(1, sizeof(*t));
  if (t == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_COLL, "MSCCLPP_TRACE: out of memory");
  t->device = device;
  t->comm = comm;
  t->maxKept = maxRecords > 0 ? (uint64_t)maxRecords : 1;
  void *ring = NULL, *stage = NULL, *stageDev = NULL, *cells = NULL, *cellsDev = NULL;
  mscclppResult_t res = mscclppGpuDeviceAlloc(device, MSCCLPP_COLL_TRACE_RING_BYTES, &ring);
  if (res == mscclppSuccess) {
    t->ring = (struct mscclppCollTraceRecord*)ring;
    res = mscclppGpuHostAllocMapped(device, MSCCLPP_COLL_TRACE_RING_BYTES, &stage, &stageDev);
  }
  if (res == mscclppSuccess) {
    t->stage = (struct mscclppCollTraceRecord*)stage;
    res = mscclppGpuStreamCreate(device, &t->stream);
  }
  if (res == mscclppSuccess) res = mscclppGpuHostAllocMapped(device, MSCCLPP_COLL_TRACE_CELLS * sizeof(uint64_t),
                                                              &cells, &cellsDev);
  if (res != mscclppSuccess) {
    traceFree(t);
    return res;
  }
  t->cells = (uint64_t*)cells;
  calibrate(t, t->cells, (uint64_t*)cellsDev);
  *out = t;
  return mscclppSuccess;
}

/* Keep one whole record (the list grows by doubling, up to maxKept). */
static void keep(struct mscclppCollTrace* t, const struct mscclppCollTraceRecord* r) {
  if (t->nkept >= t->maxKept) {
    t->dropped++;
    return;
  }
  if (t->nkept == t->capKept) {
    uint64_t cap = t->capKept == 0 ? 4096 : 2 * t->capKept;
    if (cap > t->maxKept) cap = t->maxKept;
    struct mscclppCollTraceRecord* grown =
        (struct mscclppCollTraceRecord*)realloc(t->kept, (size_t)cap * sizeof(*grown));
    if (grown == NULL) {
      t->dropped++;
      return;
    }
    t->kept = grown;
    t->capKept = cap;
  }
  t->kept[t->nkept++] = *r;
}

/* Copy the ring out and take what is whole; `final`: the device is done, a
 * record still missing never comes. A copy that does not finish in time
 * stays enqueued and is waited for at the next try. */
static void copyOut(struct mscclppCollTrace* t, int final) {
  if (t->copyPending) {
    int done = 0;
    if (mscclppGpuStreamQuery(t->stream, &done) != mscclppSuccess || !done) {
      if (!final || mscclppGpuStreamSynchronize(t->stream, FINAL_COPY_WAIT_S) != mscclppSuccess) return;
    }
    t->copyPending = 0;
  }
  if (mscclppGpuMemcpyAsync(t->stream, t->stage, t->ring, MSCCLPP_COLL_TRACE_RING_BYTES) != mscclppSuccess) return;
  if (mscclppGpuStreamSynchronize(t->stream, final ? FINAL_COPY_WAIT_S : COPY_WAIT_S) != mscclppSuccess) {
    t->copyPending = 1; /* logged; stage is the copy's until it is done */
    return;
  }
  t->launched = 0;
  const uint64_t counted = *MSCCLPP_COLL_TRACE_COUNTER(t->stage);
  if (counted > t->next + MSCCLPP_COLL_TRACE_SLOTS) { /* overwritten before they were copied */
    t->dropped += counted - MSCCLPP_COLL_TRACE_SLOTS - t->next;
    t->next = counted - MSCCLPP_COLL_TRACE_SLOTS;
  }
  while (t->next < counted) {
    const struct mscclppCollTraceRecord* r = &t->stage[t->next & (MSCCLPP_COLL_TRACE_SLOTS - 1)];
    const uint64_t stamp = t->next + 1;
    if (r->stamp == stamp && (uint32_t)(r->check >> 32) == (uint32_t)stamp) {
      keep(t, r);
    } else if (final || counted - t->next > GIVE_UP) {
      t->dropped++;
    } else {
      break; /* a block still running: taken at the next copy */
    }
    t->next++;
  }
}

/* The index of `kernel` in the ring's table (names are compared by address:
 * they are static strings). */
static uint32_t kernelIndex(struct mscclppCollTrace* t, const char* kernel) {
  for (uint32_t k = t->nkernels; k-- > 0;)
    if (t->kernels[k] == kernel) return k;
  if (t->nkernels == MSCCLPP_COLL_TRACE_MAX_KERNELS) return MSCCLPP_COLL_TRACE_MAX_KERNELS - 1; /* named by the last */
  t->kernels[t->nkernels] = kernel;
  return t->nkernels++;
}

void mscclppCollTraceLaunch(struct mscclppCollTrace** tp, int device, uint32_t nblocks, const char* kernel,
                            uint64_t comm, uint64_t seq, int64_t maxRecords, struct mscclppCollTraceArgs* args) {
  memset(args, 0, sizeof(*args));
  if (*tp == NULL && traceCreate(device, comm, maxRecords, tp) != mscclppSuccess) return; /* logged; untraced */
  struct mscclppCollTrace* t = *tp;
  if (nblocks == 0 || nblocks > TRACKS_PER_DEVICE || nblocks > MSCCLPP_COLL_TRACE_MAX_BLOCKS) return;
  t->launched += nblocks;
  if (t->launched >= COPY_AT) copyOut(t, 0);
  t->seq = seq;
  args->ring = t->ring;
  args->seq = (uint32_t)seq;
  args->kernel = kernelIndex(t, kernel);
}

void mscclppCollTraceKernel(struct mscclppComm* comm, int device, uint32_t nblocks, const char* kernel,
                            mscclppStream_t stream, struct mscclppCollTraceArgs* args) {
  (void)stream; /* captured launches record too: their records are numbered on the device */
  memset(args, 0, sizeof(*args));
  struct mscclppCollState* st = NULL;
  if (!mscclppTraceOn() || mscclppCollStateOf(comm, &st) != mscclppSuccess) return;
  mscclppCollTraceLaunch(&st->gpuTrace, device, nblocks, kernel, comm->id, st->traceSeq, comm->params.traceEvents,
                         args);
}

void mscclppCollTraceDestroy(struct mscclppCollTrace* t) {
  if (t == NULL) return;
  /* the kernels are done (the backends' releases waited for the device) */
  copyOut(t, 1);
  uint32_t named = 0;
  for (uint64_t i = 0; i < t->nkept; i++) {
    const struct mscclppCollTraceRecord* r = &t->kept[i];
    const uint32_t block = (uint32_t)(r->info & 0xffffu), sm = (uint32_t)(r->info >> 16 & 0xffu),
                   k = (uint32_t)(r->info >> 24 & 0xffu), seq32 = (uint32_t)(r->info >> 32);
    /* the call's number, whole: the newest call's, less how far back its low 32 bits are */
    const uint64_t seq = t->seq - (uint32_t)((uint32_t)t->seq - seq32);
    const uint64_t t0 = r->start + (uint64_t)t->gpuToHost;
    uint64_t t1 = t0 + (r->check & 0xffffffffull);
    if (t1 <= t0) t1 = t0 + 1; /* a span, never an instant */
    for (; named <= block && named < TRACKS_PER_DEVICE; named++) {
      char name[48];
      snprintf(name, sizeof(name), "gpu%d block %u", t->device, named);
      mscclppTraceTrackName(1u + (uint32_t)t->device * TRACKS_PER_DEVICE + named, name);
    }
    /* times in ns already (the GPU's clock moved onto CLOCK_MONOTONIC), not the trace's ticks */
    MSCCLPP_TRACE_EMIT_ON(MSCCLPP_TRACE_GPU_BLOCK | MSCCLPP_TRACE_TIME_NS,
                          1u + (uint32_t)t->device * TRACKS_PER_DEVICE + block, t0, t1,
                          MSCCLPP_TRACE_S(k < t->nkernels ? t->kernels[k] : "kernel"), (uint64_t)block, (uint64_t)sm,
                          seq, t->comm);
  }
  if (t->dropped > 0) {
    mscclppTraceDrop(t->dropped);
    MSCCLPP_INFO(MSCCLPP_LOG_COLL,
                 "MSCCLPP_TRACE: %llu GPU block records lost (ring of %u slots overrun, or more than %llu kept)",
                 (unsigned long long)t->dropped, MSCCLPP_COLL_TRACE_SLOTS, (unsigned long long)t->maxKept);
  }
  traceFree(t);
}

#endif /* MSCCLPP_HAVE_CUDA */
