/* SPDX-License-Identifier: MIT */
/*
 * What the chaos trials (chaos.c) need from the API under test: one ops
 * table per API, linked into its own executable -- chaos_mscclpp.c (the
 * mscclpp API, host backend: `chaos`) and chaos_nccl.c (the NCCL API of
 * libmscclpp_nccl.so, on GPUs or on the host backend: `chaos_nccl`). The
 * driver, the plans, the values and their checks are chaos.c's alone.
 *
 * Buffers are int32 and come in `slots` (a window of calls in flight
 * together): per slot, A (input, maxCount elements; broadcast works on it
 * in place), C (a second input, maxCount) and B (output, 2 * maxCount).
 * chaos.c writes inputs into the host views and reads outputs from them;
 * where the buffers live elsewhere (device memory) `call` copies the inputs
 * in, poisons the output and copies the output back, all on the stream.
 * Functions returning int: 0 on success, else nonzero and `why` filled.
 */
#ifndef MSCCLPP_TESTS_CHAOS_H
#define MSCCLPP_TESTS_CHAOS_H

#include <stddef.h>
#include <stdint.h>

enum chaosOp { CHAOS_ALLREDUCE, CHAOS_BROADCAST, CHAOS_ALLTOALL, CHAOS_SENDRECV };
enum chaosBuf { CHAOS_A, CHAOS_C, CHAOS_B };

/* One checked call. allreduce: A -> B (sum, count); broadcast: A in place
 * from root; all-to-all: A -> B, count per member (m members); send/recv, in
 * one group: A to next, C to prev, B from prev, B + maxCount from next. */
struct chaosCall {
  enum chaosOp op;
  int slot;
  size_t count;
  int m, root, next, prev;
};

#define CHAOS_ID_CHARS 300 /* a unique id as hex text, with its terminator */

/* Where buffer `which` of a slot starts, in elements from slot 0's A (the
 * layout above: per slot A, C, then B of 2 * maxCount). */
static inline size_t chaosBufOffset(int slot, enum chaosBuf which, size_t maxCount) {
  return (size_t)slot * 4 * maxCount + (which == CHAOS_A ? 0 : which == CHAOS_C ? maxCount : 2 * maxCount);
}

/* A unique id's n bytes as hex text, and back (chaos_id.c): ids travel
 * between the trial's processes so. chaosIdFromHex: 0, or -1 with `why`
 * filled when the text is not 2 * n hex digits. */
void chaosIdToHex(const void* id, size_t n, char hex[CHAOS_ID_CHARS]);
int chaosIdFromHex(const char* hex, void* id, size_t n, char* why, size_t len);

struct chaosApi {
  const char* name;
  /* Per process, before any communicator: `slots` slots of buffers.
   * gpu: on the current CUDA device (a stream, pinned host views). */
  int (*setup)(int gpu, int slots, size_t maxCount, char* why, size_t len);
  void (*teardown)(void);
  int32_t* (*host)(int slot, enum chaosBuf which);
  /* A new unique id, as hex text; its rendezvous is served by this process. */
  int (*uniqueId)(char hex[CHAOS_ID_CHARS], char* why, size_t len);
  int (*init)(const char* hex, int nranks, int rank, void** comm, char* why, size_t len);
  /* After a failure: a communicator without the excluded ranks (ABORT). */
  int (*shrink)(void* comm, const int* exclude, int count, void** child, char* why, size_t len);
  int (*destroy)(void* comm, char* why, size_t len);
  /* Start one call: returns when done (host backend) or once enqueued
   * (GPU). inGroup, when not NULL, runs inside the send/recv group after
   * its first send. */
  int (*call)(void* comm, const struct chaosCall* c, void (*inGroup)(void), char* why, size_t len);
  /* Wait (bounded) until the calls started since the last wait are done
   * and none failed; *inFlight: whether kernels were still running when a
   * failure was seen. */
  int (*wait)(void* comm, double seconds, int* inFlight, char* why, size_t len);
  /* Whether this process has kernels in flight: 1, 0, or -1 (no GPU). Safe
   * from any thread. */
  int (*busy)(void);
  /* The file of the library that serves the calls (NULL: not known). */
  const char* (*library)(void);
  /* Free and total device memory, for the observer process (NULL: none). */
  int (*deviceMemory)(size_t* freeBytes, size_t* totalBytes, char* why, size_t len);
};

extern const struct chaosApi chaosApi;

#endif
