/* SPDX-License-Identifier: MIT */
/*
 * The compiled form of an execution plan for one rank: what an executor
 * runs. The host executor (plan_host.c, CPU threads play the thread blocks)
 * and the GPU kernel read the same records; this header is their contract.
 *
 * A program is ONE contiguous block of plain data (no pointers), made per
 * (plan, rank) by mscclppPlanProgramBuild (plan_program.c) and copied as it
 * is to wherever it runs (device memory for a kernel):
 *
 *   mscclppPlanProgram            header: the plan's constants for this rank
 *   mscclppPlanBlock[nBlocks]     one per thread block: its ops in ops[]
 *   mscclppPlanOp[nOps]           fixed-size op records, block after block
 *   mscclppPlanChannel[nChannels] this rank's channels (memory, then port)
 *   mscclppPlanRemote[nRemotes]   peers' buffers this rank's ops address
 *   uint32_t semInit[nSemaphores] the plan's semaphores' initial values
 *
 * Each table is found at its byte offset from the header
 * (mscclppPlanProgramBlocks() etc. below). Nothing in it depends on the
 * message size: an operand names chunks (an index and a count), and a call
 * turns chunks into bytes with its mscclppPlanCallShape (one chunk size for
 * every buffer, see below), so one program serves every message size.
 * Channels and peers' buffers are indices into two tables that each side
 * builds once per buffer set, in its own terms:
 *   channel i   -> a memory channel handle (mscclpp/memory_channel_device.h)
 *                  or a port channel handle (mscclpp/port_channel_device.h)
 *                  as channels[i].type says; channels[i].peer is the rank
 *   remote j    -> a pointer to the peer's buffer (memory access) and/or a
 *                  port channel memory id (port access), per remotes[j]
 * A side's local buffers are three pointers: input, output, scratch.
 *
 * ---- chunks and bytes ------------------------------------------------------
 * A call has one chunk size c (bytes, a multiple of the granule, the larger
 * of the plan's buffer_alignment and the element size) for input, output and
 * scratch. With the plan's k chunks per block (MSCCL++'s DSL divides each
 * rank's block of the collective -- allreduce: the whole buffer; allgather's
 * output and reduce-scatter's input: one block per rank -- into k chunks):
 *   c = B / k                    when the block size B divides into k
 *                                granule-aligned chunks (buffers used as they are)
 *   c = roundup(ceil(B / k), granule)   otherwise: the executor stages the
 *                                buffers, each block padded to k * c bytes
 * Operand (chunk i, count n), plain data:
 *   input, output   bytes [i * c, (i + n) * c)
 *   scratch         bytes [scratchOffset + i * sc, + n * c)
 *                   sc = c, except with reuse_resources when MSCCL++'s 64 MiB
 *                   scratch cannot hold the plan's scratch chunks of c bytes:
 *                   sc = S, that scratch divided by scratch_chunks (aligned)
 *   scratchOffset   0, or half the scratch on even executions (flag) when the
 *                   plan has use_double_scratch_buffer (MSCCL++'s rule): half
 *                   of the scratch as allocated for the buffer set, fixed
 *                   across calls of any size (a half that moved with the
 *                   size would let a rank in execution e + 1 write where a
 *                   slower peer still reads execution e's packets)
 * Every rank's scratch is sized by the largest scratch_chunks of any rank
 * (scratchChunksAll), so sc, S and scratchOffset are the same on every rank
 * and a peer's scratch chunk is where this rank computes it.
 * Operand with MSCCLPP_PLAN_OPERAND_PACKET: the same data bytes held as LL
 *   packets (mscclpp/packet.h; LL16: 8 data bytes per 16-byte packet): the
 *   packets start at twice the data offset (scratch: scratchOffset + 2 * i * sc).
 *   Scratch is twice as large for an LL plan.
 * Thread block groups (tbgSize > 1): every operand's range is cut into
 *   tbgSize granule-aligned slices (mscclppPlanSlice) and this block takes
 *   slice tbgId.
 * PIPELINE: its body (the next nInner records) runs for iterations
 *   it = 0 .. ceil(arg1 * c / arg0) - 1 over the window [it * arg0, +arg0)
 *   of each operand (clipped to the operand; empty past its end). With
 *   reuse_resources, windows of scratch operands wrap at S (MSCCL++).
 * mscclppPlanOperandRange() computes all of this; both executors call it.
 *
 * ---- operations ------------------------------------------------------------
 * src = operand[0 .. nSrc), dst = operand[nSrc .. nSrc + nDst). "local" is
 * this rank's input/output/scratch, "remote" an operand with
 * MSCCLPP_PLAN_OPERAND_REMOTE (its buffer is remotes[operand.remote]).
 * Sizes: every operand of an op has the same count, except PUT/GET and their
 * forms, whose src[i]/dst[i] pairs each have their own.
 * A reduction applies the CALL's operator (the plan's reduce_op is kept in
 * reduceOp for information only, as MSCCL++'s executor does), element by
 * element in the call's type, in operand order: dst = src0 op src1 op ...
 *
 *   NOP          a __syncthreads() of the block (nothing on the host)
 *   BARRIER      every block listed for barrier `barrier` (arg0 blocks in
 *                all) arrives before any leaves
 *   SIGNAL, WAIT, RELAXED_SIGNAL, RELAXED_WAIT
 *                on each channel ids[0..nIds): signal (release) / wait for
 *                one signal (acquire); relaxed: ordering nothing (memory
 *                channels; on port channels the same as the plain form)
 *   FLUSH        port channels ids[]: every put pushed before is complete
 *   PUT          memory: copy src[i] -> remote dst[i] (stores into the
 *                peer's memory); port: channel ids[i] puts src[i] -> dst[i]
 *   PUT_WITH_SIGNAL, PUT_WITH_SIGNAL_AND_FLUSH
 *                port only: put, then signal (and flush) on ids[i]
 *   GET          memory only: copy remote src[i] -> local dst[i]
 *   COPY         local src[0] -> local dst[0]
 *   COPY_PACKETS local plain src[0] -> local packets dst[0] (flag)
 *   UNPACK_PACKETS  local scratch packets src[0] -> local plain dst[0]
 *                (waits for each packet of this execution's flag)
 *   PUT_PACKETS  memory: local plain src[i] -> remote scratch packets dst[i];
 *                port: local packets src[i] put as they are to remote
 *                packets dst[i] over channel ids[i] (2 * bytes)
 *   READ_PUT_PACKETS  local scratch packets src[0] (waited for) -> remote
 *                packets dst[i] (memory: rewritten with the flag; port:
 *                put as they are over ids[i] once all arrived)
 *   REDUCE       dst[0] = src[0] op src[1] op ...     (all local, plain)
 *   REDUCE_SEND  REDUCE, and the result also to remote plain dst[1..]
 *   READ_REDUCE  dst[0] = local src[0] op remote src[1..]   (memory)
 *   READ_REDUCE_SEND  READ_REDUCE, and the result to remote dst[1..]
 *   REDUCE_PACKETS    dst[0] = local plain src[0] op local scratch packets
 *                src[1..] (waited for)
 *   REDUCE_SEND_PACKETS   REDUCE_PACKETS, and the result as packets to
 *                remote scratch dst[1..]
 *   REDUCE_COPY_PACKETS   REDUCE_PACKETS, and the result as packets to local
 *                dst[1]
 *   REDUCE_COPY_SEND_PACKETS  REDUCE_COPY_PACKETS, and as packets to remote
 *                dst[2..]
 *   PIPELINE     arg0 = unit bytes, arg1 = num_chunks, body = the next nInner
 *                records (never packets, never another pipeline)
 *   SEM_ACQUIRE, SEM_RELEASE   the plan's per-rank semaphores ids[]
 *                (initial values semInit[], set once per buffer set):
 *                acquire waits for a positive count and takes one, release
 *                adds one
 * Every wait is bounded by MSCCLPP_TIMEOUT and ends at the communicator's
 * abort flag. The LL flag of execution e (1, 2, ... per buffer set, never
 * 0) is mscclppPlanCallShape.flag; all ranks count executions alike.
 */
#ifndef MSCCLPP_SRC_COLL_PLAN_PLAN_PROGRAM_H_
#define MSCCLPP_SRC_COLL_PLAN_PLAN_PROGRAM_H_

#include <stdint.h>

#include "mscclpp/device.h"

#define MSCCLPP_PLAN_PROGRAM_MAGIC 0x474f5250u /* "PROG" */
#define MSCCLPP_PLAN_PROGRAM_VERSION 1u

/* Limits of one op record (the loader refuses plans beyond them, naming the op). */
#define MSCCLPP_PLAN_MAX_OPERANDS 20 /* src + dst */
#define MSCCLPP_PLAN_MAX_IDS 16      /* channels or semaphores of one op */
#define MSCCLPP_PLAN_MAX_BARRIERS 16 /* barrier ids per rank (MSCCL++: 16 device syncers) */

/* Operations, in MSCCL++'s order (its OperationType), without the switch
 * channel ones (refused: NVLS multicast is not allowed on our machines). */
typedef enum {
  MSCCLPP_PLAN_OP_NOP = 0,
  MSCCLPP_PLAN_OP_BARRIER,
  MSCCLPP_PLAN_OP_PUT,
  MSCCLPP_PLAN_OP_PUT_PACKETS,
  MSCCLPP_PLAN_OP_READ_PUT_PACKETS,
  MSCCLPP_PLAN_OP_PUT_WITH_SIGNAL,
  MSCCLPP_PLAN_OP_PUT_WITH_SIGNAL_AND_FLUSH,
  MSCCLPP_PLAN_OP_GET,
  MSCCLPP_PLAN_OP_COPY,
  MSCCLPP_PLAN_OP_COPY_PACKETS,
  MSCCLPP_PLAN_OP_UNPACK_PACKETS,
  MSCCLPP_PLAN_OP_SIGNAL,
  MSCCLPP_PLAN_OP_WAIT,
  MSCCLPP_PLAN_OP_FLUSH,
  MSCCLPP_PLAN_OP_REDUCE,
  MSCCLPP_PLAN_OP_REDUCE_PACKETS,
  MSCCLPP_PLAN_OP_REDUCE_COPY_PACKETS,
  MSCCLPP_PLAN_OP_REDUCE_SEND,
  MSCCLPP_PLAN_OP_REDUCE_SEND_PACKETS,
  MSCCLPP_PLAN_OP_REDUCE_COPY_SEND_PACKETS,
  MSCCLPP_PLAN_OP_READ_REDUCE,
  MSCCLPP_PLAN_OP_READ_REDUCE_SEND,
  MSCCLPP_PLAN_OP_RELAXED_SIGNAL,
  MSCCLPP_PLAN_OP_RELAXED_WAIT,
  MSCCLPP_PLAN_OP_PIPELINE,
  MSCCLPP_PLAN_OP_SEM_ACQUIRE,
  MSCCLPP_PLAN_OP_SEM_RELEASE,
  MSCCLPP_PLAN_OPS
} mscclppPlanOpCode;

/* Buffers, as MSCCL++ numbers them ("i", "o", "s"). */
typedef enum {
  MSCCLPP_PLAN_INPUT = 0,
  MSCCLPP_PLAN_OUTPUT = 1,
  MSCCLPP_PLAN_SCRATCH = 2,
  MSCCLPP_PLAN_SPACES = 3
} mscclppPlanSpace;

typedef enum {
  MSCCLPP_PLAN_CHANNEL_NONE = 0,
  MSCCLPP_PLAN_CHANNEL_MEMORY = 1,
  MSCCLPP_PLAN_CHANNEL_PORT = 2
} mscclppPlanChannelType;

typedef enum {
  MSCCLPP_PLAN_ALLREDUCE = 0,
  MSCCLPP_PLAN_ALLGATHER,
  MSCCLPP_PLAN_REDUCESCATTER,
  MSCCLPP_PLAN_ALLTOALL,
  MSCCLPP_PLAN_COLLECTIVES
} mscclppPlanCollective;

typedef enum { MSCCLPP_PLAN_SIMPLE = 0, MSCCLPP_PLAN_LL = 1 } mscclppPlanProtocol;

/* As written in the plan's reduce_op (informational). */
typedef enum {
  MSCCLPP_PLAN_REDUCE_SUM = 0,
  MSCCLPP_PLAN_REDUCE_MIN = 1,
  MSCCLPP_PLAN_REDUCE_MAX = 2
} mscclppPlanReduceOp;

/* mscclppPlanOperand.flags */
#define MSCCLPP_PLAN_OPERAND_PACKET 0x1u /* LL packets (offset doubled; scratch is doubled for LL plans) */
#define MSCCLPP_PLAN_OPERAND_REMOTE 0x2u /* a peer's buffer: remotes[remote] */

/* One buffer reference of an op. */
typedef struct {
  uint8_t space;   /* mscclppPlanSpace of the buffer (a remote's too) */
  uint8_t flags;   /* MSCCLPP_PLAN_OPERAND_* */
  uint16_t remote; /* REMOTE: index into the program's remotes[] */
  uint32_t chunk;  /* first chunk */
  uint32_t count;  /* chunks */
} mscclppPlanOperand;
MSCCLPP_STATIC_ASSERT(sizeof(mscclppPlanOperand) == 12, "an operand is 12 bytes");

/* One operation of a thread block: a fixed-size record. */
typedef struct {
  uint8_t code;        /* mscclppPlanOpCode */
  uint8_t channelType; /* mscclppPlanChannelType of ids[] and of remote operands */
  uint8_t nSrc;
  uint8_t nDst;
  uint8_t nIds;     /* channels (indices into channels[]) or semaphores */
  uint8_t reduceOp; /* mscclppPlanReduceOp as written (informational) */
  uint16_t tbgId;   /* thread block group: this block's slice ... */
  uint16_t tbgSize; /* ... of this many (1: the whole range) */
  uint16_t nInner;  /* PIPELINE: records of its body, right after it */
  uint16_t barrier; /* BARRIER: its id (< MSCCLPP_PLAN_MAX_BARRIERS) */
  uint16_t reserved;
  uint32_t arg0; /* BARRIER: blocks that meet; PIPELINE: unit bytes */
  uint32_t arg1; /* PIPELINE: num_chunks */
  uint16_t ids[MSCCLPP_PLAN_MAX_IDS];
  mscclppPlanOperand operand[MSCCLPP_PLAN_MAX_OPERANDS];
} mscclppPlanOp;
MSCCLPP_STATIC_ASSERT(sizeof(mscclppPlanOp) == 296, "an op record is 296 bytes");
MSCCLPP_STATIC_ASSERT(sizeof(mscclppPlanOp) % 8 == 0, "op records stay 8-byte aligned");

/* A thread block: ops[firstOp .. firstOp + nOps). */
typedef struct {
  uint32_t firstOp;
  uint32_t nOps;
} mscclppPlanBlock;

/* A channel of this rank: the plan's channel number typeIndex among this
 * rank's channels of its type, to `peer`. Channel typeIndex of rank a to b
 * pairs with channel number (the same count of a's channels to b before
 * it) of rank b to a: the semaphores of the pair are each other's. */
typedef struct {
  uint8_t type; /* MSCCLPP_PLAN_CHANNEL_MEMORY or _PORT */
  uint8_t reserved;
  uint16_t typeIndex;
  int32_t peer;
  uint32_t pairIndex; /* this channel's number among this rank's channels of its type to `peer` */
} mscclppPlanChannel;

/* A peer's buffer (the plan's gpus[rank].remote_buffers[j]). */
typedef struct {
  int32_t rank;
  uint8_t space;  /* mscclppPlanSpace */
  uint8_t access; /* bit (1 << MSCCLPP_PLAN_CHANNEL_MEMORY) and/or (1 << ..._PORT) */
  uint16_t reserved;
} mscclppPlanRemote;

/* mscclppPlanProgram.flags */
#define MSCCLPP_PLAN_FLAG_INPLACE 0x1u
#define MSCCLPP_PLAN_FLAG_REUSE_SCRATCH 0x2u  /* reuse_resources */
#define MSCCLPP_PLAN_FLAG_DOUBLE_SCRATCH 0x4u /* use_double_scratch_buffer */

typedef struct {
  uint32_t magic;   /* MSCCLPP_PLAN_PROGRAM_MAGIC */
  uint32_t version; /* MSCCLPP_PLAN_PROGRAM_VERSION */
  uint32_t bytes;   /* the whole program, header and tables */
  int32_t rank;
  int32_t nranks;
  uint8_t collective; /* mscclppPlanCollective */
  uint8_t protocol;   /* mscclppPlanProtocol */
  uint8_t flags;      /* MSCCLPP_PLAN_FLAG_* */
  uint8_t reserved;
  uint32_t threadsPerBlock;
  uint32_t alignment;   /* buffer_alignment */
  uint32_t inputChunks; /* this rank's */
  uint32_t outputChunks;
  uint32_t scratchChunks;
  uint32_t chunksPerBlock; /* k (see the top) */
  uint32_t nBlocks, nOps, nChannels, nRemotes, nSemaphores, nBarriers;
  uint32_t blocksOffset, opsOffset, channelsOffset, remotesOffset, semaphoresOffset; /* bytes from the header */
  uint32_t scratchChunksAll; /* the largest scratch_chunks of any rank: what sizes every rank's scratch */
  uint64_t minMessageBytes, maxMessageBytes;
} mscclppPlanProgram;
MSCCLPP_STATIC_ASSERT(sizeof(mscclppPlanProgram) % 8 == 0, "the header keeps the tables 8-byte aligned");

MSCCLPP_HOST_DEVICE_INLINE const mscclppPlanBlock* mscclppPlanProgramBlocks(const mscclppPlanProgram* p) {
  return (const mscclppPlanBlock*)((const uint8_t*)p + p->blocksOffset);
}
MSCCLPP_HOST_DEVICE_INLINE const mscclppPlanOp* mscclppPlanProgramOps(const mscclppPlanProgram* p) {
  return (const mscclppPlanOp*)((const uint8_t*)p + p->opsOffset);
}
MSCCLPP_HOST_DEVICE_INLINE const mscclppPlanChannel* mscclppPlanProgramChannels(const mscclppPlanProgram* p) {
  return (const mscclppPlanChannel*)((const uint8_t*)p + p->channelsOffset);
}
MSCCLPP_HOST_DEVICE_INLINE const mscclppPlanRemote* mscclppPlanProgramRemotes(const mscclppPlanProgram* p) {
  return (const mscclppPlanRemote*)((const uint8_t*)p + p->remotesOffset);
}
MSCCLPP_HOST_DEVICE_INLINE const uint32_t* mscclppPlanProgramSemInit(const mscclppPlanProgram* p) {
  return (const uint32_t*)((const uint8_t*)p + p->semaphoresOffset);
}

/* ---- one call's sizes ------------------------------------------------------- */

/* What an execution computes once from the message size (plan_program.c,
 * mscclppPlanCallShapeOf) and hands to every block. */
typedef struct {
  uint64_t chunkBytes;        /* c */
  uint64_t scratchChunkBytes; /* sc */
  uint64_t scratchWrap;       /* reuse_resources: S, where pipelined scratch windows wrap (0: no wrap) */
  uint64_t scratchOffset;     /* 0, or half the allocated scratch (double scratch, even executions) */
  uint64_t granule;           /* slices of thread block groups are multiples of it */
  uint32_t flag;              /* LL flag of this execution, never 0 */
  uint32_t reserved;
} mscclppPlanCallShape;

/* Byte offset of slice `part` of `parts` of a range of `bytes`, cut in
 * granule-aligned pieces as evenly as they go (MSCCL++'s calcOffset). */
MSCCLPP_HOST_DEVICE_INLINE uint64_t mscclppPlanSlice(uint64_t bytes, uint32_t part, uint32_t parts, uint64_t granule) {
  uint64_t units = bytes / granule, base = units / parts, extra = units % parts;
  return ((uint64_t)part * base + (part < extra ? part : extra)) * granule;
}

/* Where an operand's bytes are in its buffer. */
typedef struct {
  uint64_t offset; /* bytes from the buffer's start (packets: where the packets start) */
  uint64_t bytes;  /* data bytes (packets: twice as many packet bytes) */
} mscclppPlanRange;

/* The range of `o`, an operand of `op`, for this call; inside a pipeline,
 * the window [window, window + unit) of it (pass window 0 and unit
 * UINT64_MAX outside one). */
MSCCLPP_HOST_DEVICE_INLINE mscclppPlanRange mscclppPlanOperandRange(const mscclppPlanOperand* o,
                                                                    const mscclppPlanOp* op,
                                                                    const mscclppPlanCallShape* s, uint64_t window,
                                                                    uint64_t unit) {
  const int scratch = o->space == MSCCLPP_PLAN_SCRATCH;
  uint64_t base = (uint64_t)o->chunk * (scratch ? s->scratchChunkBytes : s->chunkBytes);
  uint64_t bytes = (uint64_t)o->count * s->chunkBytes;
  if (op->tbgSize > 1) {
    uint64_t lo = mscclppPlanSlice(bytes, op->tbgId, op->tbgSize, s->granule);
    uint64_t hi = mscclppPlanSlice(bytes, op->tbgId + 1u, op->tbgSize, s->granule);
    base += lo;
    bytes = hi - lo;
  }
  if (window >= bytes) {
    bytes = 0;
  } else {
    bytes -= window;
    if (bytes > unit) bytes = unit;
    base += (scratch && s->scratchWrap != 0) ? window % s->scratchWrap : window;
  }
  mscclppPlanRange r;
  r.offset = (o->flags & MSCCLPP_PLAN_OPERAND_PACKET) ? 2 * base : base;
  if (scratch) r.offset += s->scratchOffset;
  r.bytes = bytes;
  return r;
}

/* Iterations of a PIPELINE op. */
MSCCLPP_HOST_DEVICE_INLINE uint64_t mscclppPlanPipelineIterations(const mscclppPlanOp* op,
                                                                  const mscclppPlanCallShape* s) {
  uint64_t total = (uint64_t)op->arg1 * s->chunkBytes;
  return op->arg0 == 0 ? 0 : (total + op->arg0 - 1) / op->arg0;
}

#endif /* MSCCLPP_SRC_COLL_PLAN_PLAN_PROGRAM_H_ */
