/* SPDX-License-Identifier: MIT */
/*
 * The nccl layer's inside: libmscclpp_nccl.so, NCCL's C API on mscclpp.
 *
 * An ncclComm_t is a struct ncclComm (below) that wraps an mscclpp
 * communicator. The wrapper exists before the mscclpp communicator does:
 * a nonblocking init, a split or an init inside a group hands the caller its
 * handle at once and joins in a thread (init.c); every operation on it first
 * waits for that join (mscclppNcclCommReady). Collectives and send/recv go to
 * mscclpp/coll.h (enqueue.c), through the group recorder (group.c);
 * custom PreMulSum operators scale the input first (premul.c, premul.cu).
 * A real NCCL can take over what mscclpp does not do (fallback.c).
 *
 * Files: init.c (ids, communicators from creation to destroy/abort/revoke,
 * the join), split.c (ncclCommSplit, ncclCommShrink), error.c (statuses,
 * error text), query.c (version, async error, count, device, rank), group.c
 * (ncclGroupStart/End and the record of grouped calls), enqueue.c
 * (collectives, send/recv, gather/scatter, operators), premul.c (scaling on
 * the host, operator table), premul_kernels.cu (scaling on the GPU),
 * memory.c (ncclMemAlloc, registrations, windows), device_api.c (the
 * host-side calls of NCCL's device API), fallback.c.
 *
 * Names: nccl* and NCCL_* are NCCL's API (and NCCL_PROFILING_ALIAS, which
 * makes its pncclX aliases); what this layer defines for itself is
 * mscclppNccl* / MSCCLPP_NCCL_* (docs/DESIGN.md), so that it reads as ours
 * and exports.map (nccl*, pnccl*) never exports it.
 */
#ifndef MSCCLPP_SRC_NCCL_NCCL_INTERNAL_H_
#define MSCCLPP_SRC_NCCL_NCCL_INTERNAL_H_

#include <pthread.h>
#include <stdint.h>

#include "mscclpp/coll.h"
#include "mscclpp/comm.h"
#include "nccl/nccl.h"

/* pncclX, NCCL's profiling alias of every ncclX: the same function. */
#define NCCL_PROFILING_ALIAS(name) \
  extern __typeof__(name) p##name __attribute__((alias(#name), visibility("default")))

#define MSCCLPP_NCCL_COMM_MAGIC 0x6d7363636c6e6363ull /* "msccllncc" */
#define MSCCLPP_NCCL_MAX_USER_OPS 1024

/* One PreMulSum operator: this rank's scalar. */
struct mscclppNcclUserOp {
  int live;
  ncclDataType_t type;
  ncclScalarResidence_t residence;
  unsigned char value[8];    /* HostImmediate: the scalar's bytes */
  const void* devicePointer; /* Device: read when the collective runs */
};

/* A registration (ncclCommRegister / ncclCommWindowRegister). */
struct mscclppNcclRegistration {
  uint64_t magic;
  struct ncclComm* comm;
  void* buff;
  size_t size;
  int isWindow;
  int winFlags;
  struct mscclppNcclRegistration* next;
};

/* What the background join of a communicator does. */
enum mscclppNcclJoinKind { MSCCLPP_NCCL_JOIN_ID = 0, MSCCLPP_NCCL_JOIN_SPLIT = 1, MSCCLPP_NCCL_JOIN_SHRINK = 2 };

struct ncclComm {
  uint64_t magic; /* MSCCLPP_NCCL_COMM_MAGIC while alive */
  pthread_mutex_t lock;
  pthread_cond_t cond;
  /* ncclInProgress until the join ends, then its result. */
  ncclResult_t initState;
  int joining;           /* a join thread runs (or is yet to start, in a group) */
  int joinThreadStarted; /* joinThread must be joined or is detached */
  pthread_t joinThread;
  int abandoned;         /* aborted/destroyed while joining: the join thread frees everything */
  char initError[1024];  /* the join's failure text */
  /* join arguments */
  enum mscclppNcclJoinKind joinKind;
  ncclUniqueId id;
  int device;      /* CUDA device current at the call (MSCCLPP_HOST_BACKEND_DEVICE without a GPU) */
  int blocking;
  char name[64];   /* config->commName, for logs */
  int deviceShare; /* ncclCommSplit: how many of the parent's ranks share this rank's GPU (0: not a split) */
  /* ncclCommShrink: the parent (kept alive by its pendingShrinks) and what
   * to pass to mscclppCommShrink; cancel (__atomic) ends its waits when
   * the new communicator is aborted while it joins */
  struct ncclComm* shrinkParent;
  int* shrinkExclude;
  int shrinkCount;
  int shrinkFlags;
  int cancel;
  int pendingShrinks; /* shrinks of this communicator still joining; under lock (destroy waits for them) */
  /* the communicator, once joined */
  mscclppComm_t mc;
  int rank;
  int nranks;
  int finalized;
  int revoked; /* MSCCLPP_NCCL_REVOKED_*: by ncclCommRevoke, or by a shrink with NCCL_SHRINK_ABORT; under lock */
  /* fallback: the real NCCL's communicator of the same ranks, or NULL */
  void* real;
  unsigned fallbackOps; /* MSCCLPP_NCCL_FB_* bits of MSCCLPP_NCCL_FALLBACK_OPS */
  /* operators and registrations, under lock */
  struct mscclppNcclUserOp ops[MSCCLPP_NCCL_MAX_USER_OPS];
  struct mscclppNcclRegistration* regs;
};

/* ---- init.c (and error.c: the statuses and failures) ---- */
/* Map an mscclpp status to NCCL's. */
ncclResult_t mscclppNcclFromMscclpp(mscclppResult_t res);
/* Check a handle: NULL or not a live communicator is ncclInvalidArgument
 * naming `fn`. */
ncclResult_t mscclppNcclCommCheck(const struct ncclComm* comm, const char* fn);
/* Check, then wait (bounded) for a background join; its failure is
 * returned. */
ncclResult_t mscclppNcclCommReady(struct ncclComm* comm, const char* fn);
/* Who revoked a communicator (ncclComm.revoked; 0: nobody). After the
 * application's ncclCommRevoke, ncclCommFinalize is invalid (NCCL's
 * header); after a shrink with NCCL_SHRINK_ABORT it is accepted, as NCCL
 * accepts it: that parent is left with nothing in flight, and PyTorch's
 * shrink_group(..., SHRINK_ABORT) releases it with ncclCommFinalize, then
 * ncclCommDestroy. */
#define MSCCLPP_NCCL_REVOKED_BY_APP 1
#define MSCCLPP_NCCL_REVOKED_BY_SHRINK 2

/* ncclInvalidUsage naming `fn` when comm was revoked (its collectives and
 * send/recv are refused, as NCCL's are), else ncclSuccess. */
ncclResult_t mscclppNcclCommNotRevoked(struct ncclComm* comm, const char* fn);
/* Start the join of a communicator recorded in a group (group.c). */
ncclResult_t mscclppNcclCommJoinStart(struct ncclComm* comm);
/* A new wrapper, not yet joined (initState ncclInProgress). ncclSystemError
 * when out of memory. */
ncclResult_t mscclppNcclCommNew(int nranks, int rank, int device, int blocking, const char* name,
                                struct ncclComm** out);
/* Free a wrapper and its registrations (not its mscclpp communicator). */
void mscclppNcclCommFree(struct ncclComm* c);
/* Read what matters of a config: magic checked, fields only within its size
 * (an older NCCL's smaller struct is accepted). *blocking is
 * defaultBlocking and *name NULL where the config does not say;
 * ncclInvalidArgument naming `fn` for a bad config. */
ncclResult_t mscclppNcclReadConfig(const ncclConfig_t* config, const char* fn, int defaultBlocking, int* blocking,
                                   const char** name);
/* Join c now (blocking), in the background (nonblocking), or at
 * ncclGroupEnd, and hand it out in *out. On a blocking failure the wrapper
 * is freed and *out untouched. */
ncclResult_t mscclppNcclJoinDispatch(struct ncclComm* c, ncclComm_t* out);
/* Fail with `res`, recording the text as the thread's last error. The WARN
 * line names the caller's file and line, where the failure was decided (as
 * mscclppErr does), not this helper's. */
ncclResult_t mscclppNcclErrAt(const char* file, int line, ncclResult_t res, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define mscclppNcclErr(res, ...) mscclppNcclErrAt(__FILE__, __LINE__, (res), __VA_ARGS__)
/* An mscclpp failure (logged where it was decided) passed up as NCCL's
 * status, with what the NCCL call was doing added to the last error and
 * nothing logged again (mscclppErrWrap). */
ncclResult_t mscclppNcclErrWrapAt(const char* file, int line, mscclppResult_t res, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define mscclppNcclErrWrap(mres, ...) mscclppNcclErrWrapAt(__FILE__, __LINE__, (mres), __VA_ARGS__)
/* A failure logged earlier (the background init, a group's worker thread)
 * returned again: the text becomes the last error, nothing is logged
 * (mscclppErrAgain). */
ncclResult_t mscclppNcclErrAgain(ncclResult_t res, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- group.c ---- */
enum mscclppNcclOpKind {
  MSCCLPP_NCCL_OP_ALLREDUCE = 0,
  MSCCLPP_NCCL_OP_ALLGATHER,
  MSCCLPP_NCCL_OP_REDUCESCATTER,
  MSCCLPP_NCCL_OP_BROADCAST,
  MSCCLPP_NCCL_OP_REDUCE,
  MSCCLPP_NCCL_OP_ALLTOALL,
  MSCCLPP_NCCL_OP_GATHER,
  MSCCLPP_NCCL_OP_SCATTER,
  MSCCLPP_NCCL_OP_SEND,
  MSCCLPP_NCCL_OP_RECV,
  MSCCLPP_NCCL_OP_KINDS
};

/* One operation as the application called it. */
struct mscclppNcclOp {
  enum mscclppNcclOpKind kind;
  const void* send;
  void* recv;
  size_t count;
  ncclDataType_t type;
  ncclRedOp_t op;
  int root; /* or peer */
  struct ncclComm* comm;
  cudaStream_t stream;
};

/* Nonzero inside ncclGroupStart/End on this thread. */
int mscclppNcclGroupActive(void);
/* Record an operation (inside a group) or run it (outside). */
ncclResult_t mscclppNcclOpSubmit(const struct mscclppNcclOp* op, const char* fn);
/* Record a communicator to join at ncclGroupEnd. */
ncclResult_t mscclppNcclGroupAddJoin(struct ncclComm* comm);

/* ---- enqueue.c ---- */
/* Run one communicator's operations, in order; sends and receives as one
 * mscclpp group (made current: the comm's device). */
ncclResult_t mscclppNcclOpsRun(const struct mscclppNcclOp* ops, int nops);
extern const char* const mscclppNcclOpNames[MSCCLPP_NCCL_OP_KINDS];

/* ---- premul.c ---- */
/* Scale count elements of `type`: dst = src * scalar (scalar: `value` bytes,
 * or read from devicePointer). On the host backend a loop; on a GPU a
 * kernel enqueued on stream. */
ncclResult_t mscclppNcclScale(struct ncclComm* comm, const struct mscclppNcclUserOp* uop, void* dst, const void* src,
                              size_t count, cudaStream_t stream);
/* Temporary buffer for a scaled input: on the GPU stream-ordered. */
ncclResult_t mscclppNcclTempAlloc(struct ncclComm* comm, size_t bytes, cudaStream_t stream, void** ptr);
void mscclppNcclTempFree(struct ncclComm* comm, void* ptr, cudaStream_t stream);
/* The operator of handle `op` of comm (NULL for a built-in one). */
ncclResult_t mscclppNcclUserOpGet(struct ncclComm* comm, ncclRedOp_t op, ncclDataType_t type, const char* fn,
                                  struct mscclppNcclUserOp* out, int* isUser);

/* ---- premul_kernels.cu (CUDA builds) ---- */
#ifdef MSCCLPP_HAVE_CUDA
/* Enqueue dst = src * scalar; scalar is `value` or *devicePointer. Returns
 * the CUDA error (0: none). */
int mscclppNcclScaleGpu(int type, void* dst, const void* src, size_t count, const void* value,
                        const void* devicePointer, void* stream);
#endif

/* ---- fallback.c ---- */
enum {
  MSCCLPP_NCCL_FB_ALLREDUCE = 1u << MSCCLPP_NCCL_OP_ALLREDUCE,
  MSCCLPP_NCCL_FB_ALLGATHER = 1u << MSCCLPP_NCCL_OP_ALLGATHER,
  MSCCLPP_NCCL_FB_REDUCESCATTER = 1u << MSCCLPP_NCCL_OP_REDUCESCATTER,
  MSCCLPP_NCCL_FB_BROADCAST = 1u << MSCCLPP_NCCL_OP_BROADCAST,
  MSCCLPP_NCCL_FB_REDUCE = 1u << MSCCLPP_NCCL_OP_REDUCE,
  MSCCLPP_NCCL_FB_ALLTOALL = 1u << MSCCLPP_NCCL_OP_ALLTOALL,
  MSCCLPP_NCCL_FB_GATHER = 1u << MSCCLPP_NCCL_OP_GATHER,
  MSCCLPP_NCCL_FB_SCATTER = 1u << MSCCLPP_NCCL_OP_SCATTER,
  MSCCLPP_NCCL_FB_SENDRECV = (1u << MSCCLPP_NCCL_OP_SEND) | (1u << MSCCLPP_NCCL_OP_RECV)
};
/* The real NCCL named by MSCCLPP_NCCL_FALLBACK, loaded on first use (NULL
 * without it). Failure to load is an error naming the path. */
struct mscclppNcclFallback;
ncclResult_t mscclppNcclFallbackGet(const struct mscclppNcclFallback** fb);
/* Parse MSCCLPP_NCCL_FALLBACK_OPS into MSCCLPP_NCCL_FB_* bits (unknown
 * names are an error naming them). */
ncclResult_t mscclppNcclFallbackParseOps(const char* list, unsigned* bits);
/* Make comm->real: a real NCCL communicator of the same ranks (rank 0 of
 * the mscclpp communicator makes the real id and sends it). */
ncclResult_t mscclppNcclFallbackCommCreate(struct ncclComm* comm);
void mscclppNcclFallbackCommDestroy(struct ncclComm* comm, int abort);
/* Run `op` on comm->real. */
ncclResult_t mscclppNcclFallbackRun(const struct mscclppNcclOp* op);
/* The real NCCL's group calls around forwarded operations. */
ncclResult_t mscclppNcclFallbackGroup(int start);
/* Look a real NCCL function up by name: NULL without a fallback (or when it
 * lacks the function). */
void* mscclppNcclFallbackSymbol(const char* name);

#endif /* MSCCLPP_SRC_NCCL_NCCL_INTERNAL_H_ */
