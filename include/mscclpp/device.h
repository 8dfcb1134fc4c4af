/* SPDX-License-Identifier: MIT */
/*
 * Device-side building blocks shared by every device header (FIFO push,
 * semaphores, channels): the qualifier macros, THE set of named atomics and
 * fences, the clock, and the bounded, abortable wait.
 *
 * The same text compiles two ways:
 *  - under nvcc (a .cu file) the functions are `__device__` and use PTX;
 *  - under a C compiler they are `static inline` host functions built on the
 *    GCC/Clang `__atomic` builtins: the host backend, where CPU threads play
 *    the kernels (this is how CI runs the real protocols without a GPU).
 *
 * Ordering is never written as a bare fence in the code that uses it: each
 * ordering purpose has one function here, documented at its definition (the
 * model is rdma-core's util/udma_barrier.h). "sys" scope means "as seen by
 * every agent of the system": the CPU, this GPU, and peer GPUs through mapped
 * memory.
 */
#ifndef MSCCLPP_DEVICE_H_
#define MSCCLPP_DEVICE_H_

#include <stdint.h>

#include "mscclpp/core.h"

/* ---- qualifiers ---------------------------------------------------------- */

#if defined(__CUDACC__)
#define MSCCLPP_DEVICE_CUDA 1
/* A function a kernel calls. */
#define MSCCLPP_DEVICE_INLINE __device__ __forceinline__
/* A function both the host and a kernel call (layout helpers). */
#define MSCCLPP_HOST_DEVICE_INLINE __host__ __device__ __forceinline__
#else
#define MSCCLPP_DEVICE_HOST 1
#define MSCCLPP_DEVICE_INLINE static inline
#define MSCCLPP_HOST_DEVICE_INLINE static inline
#endif

#if defined(__cplusplus)
#define MSCCLPP_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define MSCCLPP_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

/* Two agents that write the same cache line slow each other down: every
 * structure written by different sides is padded to this. */
#define MSCCLPP_CACHE_LINE 64

/* ThreadSanitizer cannot see inside asm: under it the 16-byte slot accesses
 * use two 64-bit atomics (see mscclppTriggerStore), which it understands. */
#if defined(MSCCLPP_DEVICE_HOST) && defined(__SANITIZE_THREAD__)
#define MSCCLPP_HOST_SANITIZED 1
#elif defined(MSCCLPP_DEVICE_HOST) && defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MSCCLPP_HOST_SANITIZED 1
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif
/* Out-of-line helpers for the host backend's waits (the library exports
 * them; strict C11 has no monotonic clock in <time.h>). */
/* Monotonic clock, nanoseconds. */
MSCCLPP_API uint64_t mscclppHostClockNs(void);
/* Let other threads run while a host-backend "kernel" waits `waitedNs` so
 * far: sched_yield for short waits, then sleeps of up to 100 us. Threads
 * usually outnumber cores on the host backend, and a spinning waiter must not
 * starve the proxy (or the preempted producer) that it waits for. A thread
 * whose yields keep returning at once (nobody else wants its core) yields
 * at most once every 20 us. */
MSCCLPP_API void mscclppHostWaitBackoff(uint64_t waitedNs);
/* A small number for the calling thread, the same on every call (the wait
 * board's slot of a host-backend "kernel" thread: see mscclppWaitNote). */
MSCCLPP_API uint32_t mscclppHostThreadNumber(void);
#ifdef __cplusplus
}
#endif

/* ---- loads and stores that carry ordering -------------------------------- */

/* Read a word that another agent publishes with a release store (a flag, a
 * counter, the FIFO tail). Reads after it see everything the publisher wrote
 * before its release. */
MSCCLPP_DEVICE_INLINE uint64_t mscclppLoadAcquireSys64(const uint64_t* p) {
#if defined(MSCCLPP_DEVICE_CUDA)
  uint64_t v;
  __asm__ __volatile__("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
#else
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

/* Read a word another agent may change at any time, without ordering (the
 * abort flag, a cached copy of the tail). Never torn, never cached in a
 * register across calls. */
MSCCLPP_DEVICE_INLINE uint32_t mscclppLoadRelaxedSys32(const uint32_t* p) {
#if defined(MSCCLPP_DEVICE_CUDA)
  uint32_t v;
  __asm__ __volatile__("ld.relaxed.sys.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
#else
  return __atomic_load_n(p, __ATOMIC_RELAXED);
#endif
}

MSCCLPP_DEVICE_INLINE uint64_t mscclppLoadRelaxedSys64(const uint64_t* p) {
#if defined(MSCCLPP_DEVICE_CUDA)
  uint64_t v;
  __asm__ __volatile__("ld.relaxed.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
#else
  return __atomic_load_n(p, __ATOMIC_RELAXED);
#endif
}

/* "Data visible before flag": store v to p after every earlier write of this
 * thread (to any memory: device, host-mapped, a peer's) is visible to the
 * whole system. The reader pairs it with mscclppLoadAcquireSys64. Writes of
 * OTHER threads of the block are covered only if they were ordered before
 * this thread's store (e.g. __syncthreads() first). */
MSCCLPP_DEVICE_INLINE void mscclppStoreReleaseSys64(uint64_t* p, uint64_t v) {
#if defined(MSCCLPP_DEVICE_CUDA)
  __asm__ __volatile__("st.release.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#else
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}

MSCCLPP_DEVICE_INLINE void mscclppStoreReleaseSys32(uint32_t* p, uint32_t v) {
#if defined(MSCCLPP_DEVICE_CUDA)
  __asm__ __volatile__("st.release.sys.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
#else
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}

/* "Data visible before flag" within ONE GPU: the gpu-scope form of
 * mscclppStoreReleaseSys64, for a flag whose reader runs on the same CUDA
 * device as this thread (several processes sharing one GPU under MPS
 * included: the PTX memory model's .gpu scope is every thread of the
 * device). Every earlier write of this thread is visible to the device's
 * threads before v is. It does not order anything for the CPU, a copy
 * engine, a NIC or another GPU: use the Sys form whenever the reader may be
 * one of those. Pairs with mscclppLoadAcquireGpu64 (or the Sys acquire).
 * Cheaper than the Sys form: the fence waits for acknowledgment from this
 * GPU's L2 only, not from the whole system (bench_channel rows (2a)/(2b)).
 * Host backend: the same C11 release store as the Sys form. */
MSCCLPP_DEVICE_INLINE void mscclppStoreReleaseGpu64(uint64_t* p, uint64_t v) {
#if defined(MSCCLPP_DEVICE_CUDA)
  __asm__ __volatile__("st.release.gpu.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#else
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}

/* The acquire that pairs with mscclppStoreReleaseGpu64 (or with a Sys
 * release by a thread of the same device): reads after it see everything
 * the publisher wrote before its release. Only for a publisher on the same
 * CUDA device. Host backend: a C11 acquire load. */
MSCCLPP_DEVICE_INLINE uint64_t mscclppLoadAcquireGpu64(const uint64_t* p) {
#if defined(MSCCLPP_DEVICE_CUDA)
  uint64_t v;
  __asm__ __volatile__("ld.acquire.gpu.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
#else
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

/* A store without ordering, for device-private bookkeeping that several
 * threads may write (the FIFO's cached tail). */
MSCCLPP_DEVICE_INLINE void mscclppStoreRelaxed64(uint64_t* p, uint64_t v) {
#if defined(MSCCLPP_DEVICE_CUDA)
  __asm__ __volatile__("st.relaxed.gpu.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#else
  __atomic_store_n(p, v, __ATOMIC_RELAXED);
#endif
}

/* A system-scope store without ordering (a relaxed semaphore signal: the
 * peer, the CPU or a copy engine may read it; nothing before it is ordered). */
MSCCLPP_DEVICE_INLINE void mscclppStoreRelaxedSys64(uint64_t* p, uint64_t v) {
#if defined(MSCCLPP_DEVICE_CUDA)
  __asm__ __volatile__("st.relaxed.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#else
  __atomic_store_n(p, v, __ATOMIC_RELAXED);
#endif
}

MSCCLPP_DEVICE_INLINE void mscclppStoreRelaxedSys32(uint32_t* p, uint32_t v) {
#if defined(MSCCLPP_DEVICE_CUDA)
  __asm__ __volatile__("st.relaxed.sys.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
#else
  __atomic_store_n(p, v, __ATOMIC_RELAXED);
#endif
}

MSCCLPP_DEVICE_INLINE uint64_t mscclppLoadRelaxedGpu64(const uint64_t* p) {
#if defined(MSCCLPP_DEVICE_CUDA)
  uint64_t v;
  __asm__ __volatile__("ld.relaxed.gpu.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
#else
  return __atomic_load_n(p, __ATOMIC_RELAXED);
#endif
}

/* Claim the next n FIFO positions (returns the first): a fetch-and-add on
 * device memory with no ordering (the slot stores that follow carry whatever
 * ordering the caller asks for). Any number of threads and blocks of one GPU
 * may call it at once. */
MSCCLPP_DEVICE_INLINE uint64_t mscclppAtomicClaim64(uint64_t* p, uint64_t n) {
#if defined(MSCCLPP_DEVICE_CUDA)
  return (uint64_t)atomicAdd((unsigned long long*)p, (unsigned long long)n);
#else
  return __atomic_fetch_add(p, n, __ATOMIC_RELAXED);
#endif
}

/* Compare-and-swap of a device-memory word without ordering: stores v when
 * *p == expected; returns the old value (== expected: this thread won). For
 * electing one thread among many (the FIFO's tail refresher). */
MSCCLPP_DEVICE_INLINE uint64_t mscclppAtomicCas64(uint64_t* p, uint64_t expected, uint64_t v) {
#if defined(MSCCLPP_DEVICE_CUDA)
  return (uint64_t)atomicCAS((unsigned long long*)p, (unsigned long long)expected, (unsigned long long)v);
#else
  __atomic_compare_exchange_n(p, &expected, v, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  return expected;
#endif
}

/* *p = max(*p, v) on a device-memory word, without ordering: a lower bound
 * that several threads refresh (the FIFO's cached tail) never goes back. */
MSCCLPP_DEVICE_INLINE void mscclppAtomicMax64(uint64_t* p, uint64_t v) {
#if defined(MSCCLPP_DEVICE_CUDA)
  atomicMax((unsigned long long*)p, (unsigned long long)v);
#else
  uint64_t cur = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (cur < v && !__atomic_compare_exchange_n(p, &cur, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
#endif
}

/* First-wins claim of a word in device memory (the device-side error): 1 when
 * this thread changed it from 0 to v. */
MSCCLPP_DEVICE_INLINE int mscclppAtomicClaimFirst32(uint32_t* p, uint32_t v) {
#if defined(MSCCLPP_DEVICE_CUDA)
  return atomicCAS((unsigned int*)p, 0u, v) == 0u;
#else
  uint32_t expected = 0;
  return __atomic_compare_exchange_n(p, &expected, v, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
#endif
}

/* A full system-scope fence: every write of this thread before it is visible
 * system-wide before any write after it. For code that must publish with
 * plain stores; prefer mscclppStoreReleaseSys64. */
MSCCLPP_DEVICE_INLINE void mscclppFenceSystem(void) {
#if defined(MSCCLPP_DEVICE_CUDA)
  __asm__ __volatile__("fence.acq_rel.sys;" ::: "memory");
#else
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

/* "Data visible before trigger": publish a 16-byte FIFO slot with ONE store,
 * release-ordered after every earlier write of this thread (so data the
 * trigger describes -- in this GPU's memory, host memory or a peer's -- is
 * visible to the proxy and to any DMA it starts once it has read the
 * trigger). Writes of other threads are covered when they were ordered
 * before this thread's store (e.g. __syncthreads() first).
 *  - CUDA: st.release.sys.v2.u64 (one 16-byte store; over PCIe one write).
 *    The release is a system-scope fence before the store, which waits for
 *    this thread's earlier writes to be acknowledged (bench_fifo row (1b)
 *    shows its cost). A gpu-scope fence is not offered instead: for data in
 *    GPU memory that a NIC reads after the CPU saw a host-memory flag, NCCL
 *    (LL128 postSend) uses a system fence on sm_90 and later, on NVIDIA's
 *    architecture guidance (NVIDIA/nccl issue #2322).
 *  - x86-64 host backend: one aligned 16-byte SSE store (movdqa); x86 stores
 *    are release-ordered (TSO), the asm is also a compiler barrier.
 *  - elsewhere, and under ThreadSanitizer (which cannot see inside asm):
 *    two 64-bit release stores, low word first.
 * The protocol does not depend on the 16 bytes landing atomically: both words
 * carry the commit bit (trigger.h), so a reader that sees a torn slot sees
 * mismatched commit bits and reads again. */
MSCCLPP_DEVICE_INLINE void mscclppTriggerStore(uint64_t* slot, uint64_t w0, uint64_t w1) {
#if defined(MSCCLPP_DEVICE_CUDA)
  __asm__ __volatile__("st.release.sys.v2.u64 [%0], {%1,%2};" ::"l"(slot), "l"(w0), "l"(w1) : "memory");
#elif defined(__x86_64__) && !defined(MSCCLPP_HOST_SANITIZED)
  typedef long long mscclppV2i64 __attribute__((vector_size(16)));
  mscclppV2i64 v = {(long long)w0, (long long)w1};
  __asm__ __volatile__("movdqa %1, %0" : "=m"(*(mscclppV2i64*)slot) : "x"(v) : "memory");
#else
  __atomic_store_n(&slot[0], w0, __ATOMIC_RELEASE);
  __atomic_store_n(&slot[1], w1, __ATOMIC_RELEASE);
#endif
}

/* "Trigger visible to proxy, nothing to publish": the same 16-byte store
 * without ordering, for a trigger that describes no data this thread wrote
 * (a flush, a signal after the proxy's own copies), or when the caller
 * issued one mscclppFenceSystem() for several pushes. No fence: the store is
 * posted and the thread goes on. Consecutive relaxed triggers of one thread
 * may reach the host out of order; the proxy reads slots in position order
 * and waits for each one's commit bits, so that is harmless. */
MSCCLPP_DEVICE_INLINE void mscclppTriggerStoreRelaxed(uint64_t* slot, uint64_t w0, uint64_t w1) {
#if defined(MSCCLPP_DEVICE_CUDA)
  __asm__ __volatile__("st.relaxed.sys.v2.u64 [%0], {%1,%2};" ::"l"(slot), "l"(w0), "l"(w1) : "memory");
#elif defined(__x86_64__) && !defined(MSCCLPP_HOST_SANITIZED)
  typedef long long mscclppV2i64 __attribute__((vector_size(16)));
  mscclppV2i64 v = {(long long)w0, (long long)w1};
  __asm__ __volatile__("movdqa %1, %0" : "=m"(*(mscclppV2i64*)slot) : "x"(v) : "memory");
#else
  __atomic_store_n(&slot[0], w0, __ATOMIC_RELAXED);
  __atomic_store_n(&slot[1], w1, __ATOMIC_RELAXED);
#endif
}

#if defined(MSCCLPP_DEVICE_HOST)
/* The proxy's read of one FIFO slot: ONE aligned 16-byte load with acquire
 * ordering (host only).
 *  - x86-64: movdqa. On AVX-capable x86 an aligned 16-byte SSE load is
 *    single-copy atomic (Intel SDM vol. 3 §9.1.1, AMD APM §3.9.1.3); loads
 *    are acquire-ordered (TSO); the asm is also a compiler barrier.
 *  - elsewhere (and under ThreadSanitizer): two 64-bit acquire loads. Still
 *    correct, because a slot is fresh only when the commit bits of BOTH words
 *    match, and a slot is written once per lap.
 * So correctness needs only 8-byte single-copy atomicity; the 16-byte load
 * is what makes it one memory access per trigger. */
static inline void mscclppTriggerLoad(const uint64_t* slot, uint64_t* w0, uint64_t* w1) {
#if defined(__x86_64__) && !defined(MSCCLPP_HOST_SANITIZED)
  typedef long long mscclppV2i64 __attribute__((vector_size(16)));
  mscclppV2i64 v;
  __asm__ __volatile__("movdqa %1, %0" : "=x"(v) : "m"(*(const mscclppV2i64*)slot) : "memory");
  *w0 = (uint64_t)v[0];
  *w1 = (uint64_t)v[1];
#else
  *w0 = __atomic_load_n(&slot[0], __ATOMIC_ACQUIRE);
  *w1 = __atomic_load_n(&slot[1], __ATOMIC_ACQUIRE);
#endif
}
#endif

/* ---- clock ----------------------------------------------------------------- */

/* Nanoseconds from a clock that only moves forward: %globaltimer on the GPU,
 * CLOCK_MONOTONIC on the host backend. */
MSCCLPP_DEVICE_INLINE uint64_t mscclppClockNs(void) {
#if defined(MSCCLPP_DEVICE_CUDA)
  uint64_t t;
  __asm__ __volatile__("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#else
  return mscclppHostClockNs();
#endif
}

/* Sleep about ns nanoseconds on the GPU (__nanosleep, at most 1 ms); on the
 * host backend nothing (host waits back off in mscclppWaitStep). For waits
 * that know they will last: fewer polls over PCIe. */
MSCCLPP_DEVICE_INLINE void mscclppDeviceSleepNs(uint32_t ns) {
#if defined(MSCCLPP_DEVICE_CUDA)
  __nanosleep(ns);
#else
  (void)ns;
#endif
}

MSCCLPP_DEVICE_INLINE void mscclppSpinPause(void) {
#if defined(MSCCLPP_DEVICE_CUDA)
  /* nothing: a spinning warp yields the SM's issue slots by itself */
#elif defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield" ::: "memory");
#endif
}

/* ---- device-side errors ------------------------------------------------------
 * A kernel that gives up (a timeout, an out-of-range trigger) records why in
 * one 64-bit word of host-mapped memory, first error wins, and raises the
 * abort flag so that every other wait returns. The proxy thread (or
 * mscclppAbortGetError) turns the word into a status and a message. Kinds
 * that need a second value keep it in the 64-bit word after that one
 * (mscclppDeviceRaiseWide). */

/* Kinds (bits 0..7 of the word). */
#define MSCCLPP_DEVICE_ERROR_NONE 0
#define MSCCLPP_DEVICE_ERROR_TIMEOUT_PUSH 1      /* FIFO full for MSCCLPP_TIMEOUT; position in the word */
#define MSCCLPP_DEVICE_ERROR_TIMEOUT_SYNC 2      /* proxy did not take the position in time */
#define MSCCLPP_DEVICE_ERROR_TIMEOUT_FLUSH 3     /* position not completed in time */
#define MSCCLPP_DEVICE_ERROR_TIMEOUT_SEMAPHORE 4 /* semaphore wait; expected value in the word */
#define MSCCLPP_DEVICE_ERROR_INVALID_TRIGGER 5   /* out-of-range trigger field; detail = field */
/* mscclppAllToAllv's counts that do not fit (coll.h): more elements arrived
 * than recvcapacity (detail = rank, value = recvcapacity, second value = the
 * elements that arrived), or a block outside sendbuff (detail = rank << 4 |
 * the block's destination, value = sendcapacity, second value = where the
 * block ends). */
#define MSCCLPP_DEVICE_ERROR_RECV_OVERFLOW 6
#define MSCCLPP_DEVICE_ERROR_SEND_RANGE 7
/* Layout: kind (8 bits) | detail (8 bits) << 8 | value (48 bits) << 16. */
#define MSCCLPP_DEVICE_ERROR_WORD(kind, detail, value) \
  ((uint64_t)(kind) | ((uint64_t)(detail) & 0xffu) << 8 | ((uint64_t)(value) & 0xffffffffffffull) << 16)
#define MSCCLPP_DEVICE_ERROR_KIND(w) ((unsigned)((w) & 0xffu))
#define MSCCLPP_DEVICE_ERROR_DETAIL(w) ((unsigned)(((w) >> 8) & 0xffu))
#define MSCCLPP_DEVICE_ERROR_VALUE(w) ((uint64_t)(w) >> 16)

/* What every device-side wait needs; copied into each device handle.
 * Pointers are as the waiting side sees them (device pointers on a GPU). */
typedef struct {
  uint32_t* abortFlag;   /* host-mapped; nonzero = aborted */
  uint32_t* errorClaim;  /* device memory; first-wins claim of errorWord */
  uint64_t* errorWord;   /* host-mapped; the first device-side error */
  uint64_t timeoutNs;    /* MSCCLPP_TIMEOUT at creation */
} mscclppWaitContext;

/* Record a device-side error (first one wins) and raise the abort flag. */
MSCCLPP_DEVICE_INLINE void mscclppDeviceRaise(const mscclppWaitContext* ctx, unsigned kind, unsigned detail,
                                              uint64_t value) {
  if (mscclppAtomicClaimFirst32(ctx->errorClaim, 1u))
    mscclppStoreReleaseSys64(ctx->errorWord, MSCCLPP_DEVICE_ERROR_WORD(kind, detail, value));
  mscclppStoreReleaseSys32(ctx->abortFlag, 1u);
}

/* mscclppDeviceRaise with a second value, stored in the word after the
 * error word before the error word releases it. */
MSCCLPP_DEVICE_INLINE void mscclppDeviceRaiseWide(const mscclppWaitContext* ctx, unsigned kind, unsigned detail,
                                                  uint64_t value, uint64_t second) {
  if (mscclppAtomicClaimFirst32(ctx->errorClaim, 1u)) {
    mscclppStoreRelaxedSys64(ctx->errorWord + 1, second);
    mscclppStoreReleaseSys64(ctx->errorWord, MSCCLPP_DEVICE_ERROR_WORD(kind, detail, value));
  }
  mscclppStoreReleaseSys32(ctx->abortFlag, 1u);
}

/* ---- the wait board: what a long wait waits for ------------------------------
 * The hang report (the host's, written from a signal handler that cannot
 * call CUDA) must say what each stuck device-side wait waits for. A wait
 * that has lasted MSCCLPP_WAIT_NOTE_AFTER_NS writes a note of it into the
 * board of its abort object: MSCCLPP_WAIT_BOARD_NOTES notes of 64 bytes in
 * the same host-mapped page as the error word (MSCCLPP_WAIT_BOARD_FROM_ERROR_
 * WORD bytes after it), so the host reads them with plain loads. A wait that
 * then succeeds or is aborted takes its note back; one that times out makes
 * it final (state TIMEDOUT, the last value it saw) before it records the
 * error word. Nothing is written or read before the wait has lasted that
 * long, and the check rides on the clock read the timeout needs anyway: the
 * fast path is unchanged. A note's slot is a hash of the waiter (GPU: block
 * and thread; host backend: mscclppHostThreadNumber), so with more long
 * waits than notes a later one overwrites an earlier one: the board is a
 * snapshot, as the report is. */
#define MSCCLPP_WAIT_BOARD_NOTES 32u
#define MSCCLPP_WAIT_BOARD_FROM_ERROR_WORD 960u /* error word at line 1 of the page: the board fills lines 16..47 */
#define MSCCLPP_WAIT_NOTE_AFTER_NS 10000000ull  /* 10 ms */
#define MSCCLPP_WAIT_NOTE_FREE 0u
#define MSCCLPP_WAIT_NOTE_WAITING 1u
#define MSCCLPP_WAIT_NOTE_TIMEDOUT 2u
/* What a note's wait is: the MSCCLPP_DEVICE_ERROR_TIMEOUT_* kinds (1..4), or: */
#define MSCCLPP_WAIT_NOTE_FLAG 16u /* a collective kernel's flag, counter or packet that a peer writes */
#define MSCCLPP_WAIT_PEER_UNKNOWN 0xffffffffu
#define MSCCLPP_WAIT_OBSERVED_UNKNOWN 0xffffffffffffffffull /* a poll of packets reads no counter */

typedef struct {
  uint64_t state;    /* MSCCLPP_WAIT_NOTE_*: stored last, with release order */
  uint64_t expected; /* the value waited for: signal number, FIFO position, flag */
  uint64_t observed; /* the value seen when the note was written (a semaphore: signals arrived so far);
                        MSCCLPP_WAIT_OBSERVED_UNKNOWN */
  uint64_t call;     /* the communicator's call number the wait belongs to; 0: not known here */
  uint64_t sinceNs;  /* when the wait began, on the waiter's clock (%globaltimer, CLOCK_MONOTONIC) */
  uint32_t kind;     /* what is waited for: MSCCLPP_DEVICE_ERROR_TIMEOUT_*, MSCCLPP_WAIT_NOTE_FLAG, ... */
  uint32_t peer;     /* the rank it waits for; MSCCLPP_WAIT_PEER_UNKNOWN */
  uint32_t sem;      /* the semaphore's id (mscclppSemaphoreDeviceHandle.id); 0: not a semaphore */
  uint32_t where;    /* GPU: block << 16 | thread; host backend: the thread's number */
  uint64_t reserved;
} mscclppWaitNote;
MSCCLPP_STATIC_ASSERT(sizeof(mscclppWaitNote) == 64, "a wait note is one cache line");

/* Who a wait waits for, as far as the waiting code knows: what the note
 * says besides the value waited for. */
typedef struct {
  uint64_t observed;
  uint64_t call;
  uint32_t peer;
  uint32_t sem;
} mscclppWaitWho;
#define MSCCLPP_WAIT_WHO_NONE {MSCCLPP_WAIT_OBSERVED_UNKNOWN, 0, MSCCLPP_WAIT_PEER_UNKNOWN, 0}

/* State of one bounded wait; start with MSCCLPP_WAIT_STATE_INIT. */
typedef struct {
  uint64_t startNs;
  uint32_t spins;
  uint32_t note; /* 1 + the board slot of this wait's note; 0: none written */
} mscclppWaitState;
#define MSCCLPP_WAIT_STATE_INIT {0, 0, 0}

/* How many spins between two looks at the clock and the abort flag. On the
 * GPU a look at the abort flag is a PCIe read (~1 us), so it is rare. */
#if defined(MSCCLPP_DEVICE_CUDA)
#define MSCCLPP_WAIT_CHECK_INTERVAL 256u
#else
/* Host backend: each check may yield the core (mscclppHostWaitBackoff), and
 * the thread waited for may be queued behind this one on it: in bench_net's
 * ping-pong on 2 cores a trigger was taken sooner after its push with a
 * check every 8 polls than with one every 64 (bench/HISTORY.md, "Figures
 * moved out of code comments"). */
#define MSCCLPP_WAIT_CHECK_INTERVAL 8u
#endif

MSCCLPP_DEVICE_INLINE mscclppWaitNote* mscclppWaitBoard(const mscclppWaitContext* ctx) {
  return (mscclppWaitNote*)((char*)ctx->errorWord + MSCCLPP_WAIT_BOARD_FROM_ERROR_WORD);
}

/* The waiter's identity: its board slot is derived from it. */
MSCCLPP_DEVICE_INLINE uint32_t mscclppWaitWhere(void) {
#if defined(MSCCLPP_DEVICE_CUDA)
  return (uint32_t)blockIdx.x << 16 | ((uint32_t)threadIdx.x & 0xffffu);
#else
  return mscclppHostThreadNumber();
#endif
}

MSCCLPP_DEVICE_INLINE uint32_t mscclppWaitSlotOf(uint32_t where) {
  /* GPU: blocks 0-3 x threads 0-7 (a barrier's waiters) all apart */
  return ((where >> 16) * 8u + (where & 0xffffu)) % MSCCLPP_WAIT_BOARD_NOTES;
}

/* Write (or rewrite) this wait's note: the fields, then the state with
 * release order. Slow path only. */
MSCCLPP_DEVICE_INLINE void mscclppWaitNoteWrite(const mscclppWaitContext* ctx, mscclppWaitState* st, uint32_t state,
                                                unsigned kind, uint64_t value, const mscclppWaitWho* who) {
  const uint32_t where = mscclppWaitWhere();
  const uint32_t slot = st->note != 0 ? st->note - 1 : mscclppWaitSlotOf(where);
  mscclppWaitNote* n = mscclppWaitBoard(ctx) + slot;
  mscclppStoreRelaxedSys64(&n->expected, value);
  mscclppStoreRelaxedSys64(&n->observed, who->observed);
  mscclppStoreRelaxedSys64(&n->call, who->call);
  mscclppStoreRelaxedSys64(&n->sinceNs, st->startNs);
  mscclppStoreRelaxedSys32(&n->kind, kind);
  mscclppStoreRelaxedSys32(&n->peer, who->peer);
  mscclppStoreRelaxedSys32(&n->sem, who->sem);
  mscclppStoreRelaxedSys32(&n->where, where);
  mscclppStoreReleaseSys64(&n->state, state);
  st->note = slot + 1;
}

/* The wait is over (it succeeded or was aborted): take its note back, if it
 * wrote one and nobody has overwritten it since. */
MSCCLPP_DEVICE_INLINE void mscclppWaitNoteDrop(const mscclppWaitContext* ctx, mscclppWaitState* st) {
  if (st->note == 0) return;
  mscclppWaitNote* n = mscclppWaitBoard(ctx) + (st->note - 1);
  if (mscclppLoadRelaxedSys64(&n->sinceNs) == st->startNs && mscclppLoadRelaxedSys32(&n->where) == mscclppWaitWhere())
    mscclppStoreReleaseSys64(&n->state, MSCCLPP_WAIT_NOTE_FREE);
  st->note = 0;
}

/* Whether this waiter writes a note: always when it knows its semaphore or
 * peer; a wait that knows neither (a FIFO position, a packet flag: often
 * every thread of a block waits so) leaves it to lane 0 of each warp, so
 * that a long wait of many threads is not many notes over PCIe. */
MSCCLPP_DEVICE_INLINE int mscclppWaitNoteWanted(const mscclppWaitWho* who) {
#if defined(MSCCLPP_DEVICE_CUDA)
  return who->sem != 0 || who->peer != MSCCLPP_WAIT_PEER_UNKNOWN || (threadIdx.x & 31u) == 0;
#else
  (void)who;
  return 1;
#endif
}

/* Call after a wait's loop has seen what it waited for: one test of a
 * register unless the wait wrote a note. */
MSCCLPP_DEVICE_INLINE void mscclppWaitEnd(const mscclppWaitContext* ctx, mscclppWaitState* st) {
  if (st->note != 0) mscclppWaitNoteDrop(ctx, st);
}

/* One step of a bounded wait that says who it waits for: call it once per
 * failed poll, and mscclppWaitEnd once the poll succeeds. Returns
 * mscclppSuccess (poll again), mscclppAborted (the abort flag is up), or
 * mscclppTimeout (the wait ran past ctx->timeoutNs; recorded as device error
 * `kind` with `value`, which also raises the abort flag). A wait that lasts
 * MSCCLPP_WAIT_NOTE_AFTER_NS writes its note (who, value); a timeout makes
 * the note final. */
MSCCLPP_DEVICE_INLINE mscclppResult_t mscclppWaitStepWho(const mscclppWaitContext* ctx, mscclppWaitState* st,
                                                         unsigned kind, uint64_t value, const mscclppWaitWho* who) {
  if ((++st->spins & (MSCCLPP_WAIT_CHECK_INTERVAL - 1u)) != 0) {
    mscclppSpinPause();
    return mscclppSuccess;
  }
  if (mscclppLoadRelaxedSys32(ctx->abortFlag) != 0) {
    mscclppWaitNoteDrop(ctx, st);
    return mscclppAborted;
  }
  uint64_t now = mscclppClockNs();
  if (st->startNs == 0) {
    st->startNs = now;
  } else if (now - st->startNs > ctx->timeoutNs) {
    if (mscclppWaitNoteWanted(who)) /* before the error word */
      mscclppWaitNoteWrite(ctx, st, MSCCLPP_WAIT_NOTE_TIMEDOUT, kind, value, who);
    mscclppDeviceRaise(ctx, kind, 0, value);
    return mscclppTimeout;
  } else if (st->note == 0 && now - st->startNs > MSCCLPP_WAIT_NOTE_AFTER_NS && mscclppWaitNoteWanted(who)) {
    mscclppWaitNoteWrite(ctx, st, MSCCLPP_WAIT_NOTE_WAITING, kind, value, who);
  }
#if defined(MSCCLPP_DEVICE_HOST)
  mscclppHostWaitBackoff(now - st->startNs);
#endif
  return mscclppSuccess;
}

/* mscclppWaitStepWho for a wait that knows no more than its value (a FIFO
 * position, a packet flag). */
MSCCLPP_DEVICE_INLINE mscclppResult_t mscclppWaitStep(const mscclppWaitContext* ctx, mscclppWaitState* st,
                                                      unsigned kind, uint64_t value) {
  const mscclppWaitWho who = MSCCLPP_WAIT_WHO_NONE;
  return mscclppWaitStepWho(ctx, st, kind, value, &who);
}

#endif /* MSCCLPP_DEVICE_H_ */
