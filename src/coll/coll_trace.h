/* SPDX-License-Identifier: MIT */
/*
 * GPU kernel events for MSCCLPP_TRACE: what the collective kernels and
 * their host side (coll_trace.c) share.
 *
 * Each block's thread 0 reads %globaltimer when the block starts (after it
 * waits for the previous kernel on the stream) and when it leaves the
 * kernel, and writes one record into a ring in pinned host memory mapped
 * into the GPU: the kernel's own stores, so nothing is copied and the
 * stream never waits. The record's tag is written last, with release
 * order, so the host reads a record only once it is whole. The host hands
 * each launch `nblocks` consecutive slots (block b writes slot
 * (base + b) mod MSCCLPP_COLL_TRACE_SLOTS) and a tag of its own, and reads
 * the finished records back at later launches and at destroy.
 *
 * Off, the launch carries ring == NULL and each block tests one kernel
 * parameter, once at its start and once at its end.
 */
#ifndef MSCCLPP_SRC_COLL_COLL_TRACE_H_
#define MSCCLPP_SRC_COLL_COLL_TRACE_H_

#include <stdint.h>

#include "mscclpp/device.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MSCCLPP_COLL_TRACE_SLOTS 16384u /* a power of two */

/* One block of one launch. */
struct mscclppCollTraceRecord {
  uint64_t start; /* %globaltimer, ns */
  uint64_t end;
  uint32_t sm;  /* %smid */
  uint32_t tag; /* the launch's tag; written last */
};
MSCCLPP_STATIC_ASSERT(sizeof(struct mscclppCollTraceRecord) == 24, "a trace record is 24 bytes");
MSCCLPP_STATIC_ASSERT((MSCCLPP_COLL_TRACE_SLOTS & (MSCCLPP_COLL_TRACE_SLOTS - 1)) == 0,
                      "the ring's slots are a power of two");

/* A launch's part of the kernel parameters. */
struct mscclppCollTraceArgs {
  struct mscclppCollTraceRecord* ring; /* the ring as the GPU maps it; NULL: not traced */
  uint32_t base;                       /* the launch's first slot */
  uint32_t tag;                        /* never 0 */
};

/* The clock calibration's words, after the ring in the same mapping: the
 * host writes PING = i, the kernel answers with its %globaltimer in TIME and
 * PONG = i (coll_trace.c). */
#define MSCCLPP_COLL_TRACE_CELL_PING 0
#define MSCCLPP_COLL_TRACE_CELL_TIME 1
#define MSCCLPP_COLL_TRACE_CELL_PONG 2
#define MSCCLPP_COLL_TRACE_CELLS 3

/* ---- host side (coll_trace.c) ---- */

struct mscclppCollTrace;

/* args for a launch of `nblocks` blocks of `kernel` (a string that lives as
 * long as the process) that is call `seq` of communicator `comm`: the
 * slots, the tag and the ring, which *t (made here at the first call, on
 * `device`, with its clock calibration) holds. Call it only while tracing
 * is on and the launch's stream is not being captured (a graph would
 * replay the same slots); args->ring stays NULL when the ring cannot be
 * made or the grid does not fit. */
void mscclppCollTraceLaunch(struct mscclppCollTrace** t, int device, uint32_t nblocks, const char* kernel,
                            uint64_t comm, uint64_t seq, struct mscclppCollTraceArgs* args);
/* Read back every record (after the device is done with the ring) and free
 * it. NULL is a no-op. */
void mscclppCollTraceDestroy(struct mscclppCollTrace* t);

/* coll_trace_kernels.cu: enqueue the clock calibration's one-thread kernel
 * on `stream` (a cudaStream_t), answering `rounds` pings through `cells`
 * (the GPU's address). mscclppUnhandledCudaError with the launch error's
 * text in *why. */
mscclppResult_t mscclppCollTraceClockEnqueue(uint64_t* cells, uint32_t rounds, void* stream, const char** why);

#ifdef __cplusplus
}
#endif

#if defined(__CUDACC__)
/* Declared first in a kernel (after its stream-order wait): records the
 * block's start and, when the kernel returns by any path, its end. */
struct mscclppCollTraceBlock {
  const struct mscclppCollTraceArgs* args;
  uint64_t start;
  __device__ __forceinline__ explicit mscclppCollTraceBlock(const struct mscclppCollTraceArgs& a)
      : args(&a), start(0) {
    if (a.ring != nullptr && threadIdx.x == 0) start = mscclppClockNs();
  }
  __device__ __forceinline__ ~mscclppCollTraceBlock() {
    if (args->ring == nullptr || threadIdx.x != 0) return;
    struct mscclppCollTraceRecord* r = &args->ring[(args->base + blockIdx.x) & (MSCCLPP_COLL_TRACE_SLOTS - 1)];
    uint32_t sm;
    __asm__ __volatile__("mov.u32 %0, %%smid;" : "=r"(sm));
    r->start = start;
    r->end = mscclppClockNs();
    r->sm = sm;
    mscclppStoreReleaseSys32(&r->tag, args->tag); /* the record is whole before its tag */
  }
};
#elif defined(__cplusplus)
/* Kernel bodies compiled for the host (tests/collgpu/port_protocol_host.cpp)
 * record nothing. */
struct mscclppCollTraceBlock {
  explicit mscclppCollTraceBlock(const struct mscclppCollTraceArgs&) {}
};
#endif

#endif /* MSCCLPP_SRC_COLL_COLL_TRACE_H_ */
