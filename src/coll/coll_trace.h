/* SPDX-License-Identifier: MIT */
/*
 * GPU kernel events for MSCCLPP_TRACE: what the collective kernels and
 * their host side (coll_trace.c) share.
 *
 * Each block's thread 0 takes the record's number from a counter in device
 * memory (an atomic add whose answer is needed only at the end) and reads
 * %globaltimer when the block starts; a kernel launched with programmatic
 * dependent launch takes the number before it waits for the previous kernel
 * on the stream and the time after (restart()), so the atomic's trip falls
 * in that wait instead of the kernel's end. When it leaves the kernel it writes one
 * 32-byte record into a ring in device memory: two 16-byte stores, each of
 * which carries the record's number, so the host takes a record only when
 * both halves are of the same one. No fence, nothing written to host
 * memory, no extra operation on the stream: the host copies the ring out
 * on the library's own stream when it is half full and at destroy
 * (coll_trace.c). The record's number comes from the device, not from the
 * launch, so the launches of a captured CUDA graph record at every replay.
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

/* One block of one launch, record number n (counted from 0 per ring). */
struct mscclppCollTraceRecord {
  /* first store */
  uint64_t start; /* %globaltimer, ns */
  uint64_t check; /* (n + 1) mod 2^32 << 32 | the block's ns (saturated at 2^32 - 1) */
  /* second store */
  uint64_t info;  /* the call's seq mod 2^32 << 32 | kernel << 24 | sm mod 256 << 16 | block */
  uint64_t stamp; /* n + 1 (0: never written) */
};
MSCCLPP_STATIC_ASSERT(sizeof(struct mscclppCollTraceRecord) == 32, "a trace record is two 16-byte stores");
MSCCLPP_STATIC_ASSERT((MSCCLPP_COLL_TRACE_SLOTS & (MSCCLPP_COLL_TRACE_SLOTS - 1)) == 0,
                      "the ring's slots are a power of two");
#define MSCCLPP_COLL_TRACE_MAX_BLOCKS 65536u /* the record's block field */
#define MSCCLPP_COLL_TRACE_MAX_KERNELS 256u  /* the record's kernel field: names per ring */

/* The ring's device allocation: the slots, then the record counter. */
#define MSCCLPP_COLL_TRACE_RING_BYTES \
  ((uint64_t)MSCCLPP_COLL_TRACE_SLOTS * sizeof(struct mscclppCollTraceRecord) + sizeof(uint64_t))
/* The ring's record counter (after the slots). */
#define MSCCLPP_COLL_TRACE_COUNTER(ring) ((unsigned long long*)((ring) + MSCCLPP_COLL_TRACE_SLOTS))

/* A launch's part of the kernel parameters. */
struct mscclppCollTraceArgs {
  struct mscclppCollTraceRecord* ring; /* device memory, the counter after the slots; NULL: not traced */
  uint32_t seq;                        /* the call's trace sequence number, mod 2^32 */
  uint32_t kernel;                     /* the kernel's name: an index into the host's table */
};

/* The clock calibration's words, in pinned host memory mapped into the GPU:
 * the host writes PING = i, the kernel answers with its %globaltimer in
 * TIME and PONG = i (coll_trace.c). */
#define MSCCLPP_COLL_TRACE_CELL_PING 0
#define MSCCLPP_COLL_TRACE_CELL_TIME 1
#define MSCCLPP_COLL_TRACE_CELL_PONG 2
#define MSCCLPP_COLL_TRACE_CELLS 3

/* ---- host side (coll_trace.c) ---- */

struct mscclppCollTrace;

/* args for a launch of `nblocks` blocks of `kernel` (a string that lives as
 * long as the process) that is call `seq` of communicator `comm`: the ring,
 * which *t holds (made here at the first call, on `device`, with its clock
 * calibration; `maxRecords` bounds the records it keeps, later ones are
 * counted as dropped), and the call's fields. A captured launch records at
 * every replay. Call it with the thread's capture mode relaxed (the first
 * call allocates). args->ring stays NULL when the ring cannot be made or
 * the grid is too large to record. */
void mscclppCollTraceLaunch(struct mscclppCollTrace** t, int device, uint32_t nblocks, const char* kernel,
                            uint64_t comm, uint64_t seq, int64_t maxRecords, struct mscclppCollTraceArgs* args);
/* Read back every record (after the device is done with the ring), put
 * them in the trace and free the ring. NULL is a no-op. */
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
/* Block blockIdx.x's record number n of launch `a`, started at `start`
 * (%globaltimer), written now (by the block's thread 0). */
static __device__ __forceinline__ void mscclppCollTraceWrite(const struct mscclppCollTraceArgs& a,
                                                             unsigned long long n, uint64_t start) {
  const uint64_t ns = mscclppClockNs() - start;
  uint32_t sm;
  __asm__ __volatile__("mov.u32 %0, %%smid;" : "=r"(sm));
  const uint64_t stamp = (uint64_t)n + 1;
  const uint64_t check = stamp << 32 | (ns < 0xffffffffull ? ns : 0xffffffffull);
  const uint64_t info = (uint64_t)a.seq << 32 | (uint64_t)(a.kernel & 0xffu) << 24 | (uint64_t)(sm & 0xffu) << 16 |
                        (uint64_t)(blockIdx.x & 0xffffu);
  struct mscclppCollTraceRecord* r = &a.ring[n & (MSCCLPP_COLL_TRACE_SLOTS - 1)];
  /* plain stores, cached in L2 only: the host's copy reads them there */
  __asm__ __volatile__("st.global.cg.v2.u64 [%0], {%1, %2};" ::"l"(&r->start), "l"(start), "l"(check) : "memory");
  __asm__ __volatile__("st.global.cg.v2.u64 [%0], {%1, %2};" ::"l"(&r->info), "l"(info), "l"(stamp) : "memory");
}

/* The next record number of `ring`, the answer awaited only where it is
 * used. Inline PTX, not atomicAdd: nvcc turns atomicAdd into a
 * warp-aggregated add whose answer is shuffled to the warp's lanes at once,
 * so the thread would wait for the atomic's trip where it is issued (0.2-0.3
 * us a kernel; bench_trace_gpu, bench/RESULTS.md) instead of at the block's
 * end. */
static __device__ __forceinline__ unsigned long long mscclppCollTraceNumber(struct mscclppCollTraceRecord* ring) {
  unsigned long long n;
  __asm__ __volatile__("atom.relaxed.gpu.global.add.u64 %0, [%1], 1;"
                       : "=l"(n)
                       : "l"(MSCCLPP_COLL_TRACE_COUNTER(ring))
                       : "memory");
  return n;
}

/* Declared first in a kernel: takes the block's record number and start
 * and, when the kernel returns by any path, writes its record. A kernel
 * that waits for the previous one on its stream declares it before the
 * wait and calls restart() after it (the number may be taken early: the
 * host treats a numbered record not yet written as a block still running). */
struct mscclppCollTraceBlock {
  const struct mscclppCollTraceArgs* args;
  uint64_t start;
  unsigned long long n;
  __device__ __forceinline__ explicit mscclppCollTraceBlock(const struct mscclppCollTraceArgs& a)
      : args(&a), start(0), n(0) {
    if (a.ring == nullptr || threadIdx.x != 0) return;
    n = mscclppCollTraceNumber(a.ring);
    start = mscclppClockNs();
  }
  /* The block's start is now (after the stream-order wait). */
  __device__ __forceinline__ void restart() {
    if (args->ring != nullptr && threadIdx.x == 0) start = mscclppClockNs();
  }
  __device__ __forceinline__ ~mscclppCollTraceBlock() {
    if (args->ring == nullptr || threadIdx.x != 0) return;
    mscclppCollTraceWrite(*args, n, start);
  }
};
#elif defined(__cplusplus)
/* Kernel bodies compiled for the host (tests/collgpu/port_protocol_host.cpp)
 * record nothing. */
struct mscclppCollTraceBlock {
  explicit mscclppCollTraceBlock(const struct mscclppCollTraceArgs&) {}
  void restart() {}
};
#endif

#endif /* MSCCLPP_SRC_COLL_COLL_TRACE_H_ */
