/* SPDX-License-Identifier: MIT */
/*
 * The communicator object. Each layer keeps its own state in its own struct
 * and the communicator holds a handle to each; this header is the list.
 */
#ifndef MSCCLPP_SRC_COMM_COMM_H_
#define MSCCLPP_SRC_COMM_COMM_H_

#include <pthread.h>
#include <stdint.h>

#include "bootstrap/bootstrap.h"
#include "core/params.h"
#include "mscclpp/comm.h"

struct mscclppMemContext;
struct mscclppAbort;
struct mscclppChannelContext;
struct mscclppSeedState;
struct mscclppCollState;
struct mscclppReportRecord;

struct mscclppComm {
  int rank;
  int nranks;
  int localRank; /* among the ranks of this host (hostname + network namespace, or MSCCLPP_HOSTID) */
  int localNranks;
  /* MSCCLPP_* parameters as they were when the communicator was created;
   * every layer reads its settings (timeout, ...) from here. */
  struct mscclppParams params;
  struct mscclppBootstrap* bootstrap; /* control plane: owns its sockets and its progress thread */
  uint64_t id;                        /* the bootstrap's job hash: the same on every rank; names it in traces */
  int traced;                         /* holds the trace session (MSCCLPP_TRACE was set at creation) */
  struct mscclppMemContext* mem;      /* memory layer: made on first use (comm/memory_api.c); __atomic */
  /* Made on first use by comm/comm_abort.c (channels: comm/channel_api.c), under lazyLock: */
  pthread_mutex_t lazyLock;
  int device;                             /* CUDA device current then, or MSCCLPP_HOST_BACKEND_DEVICE */
  struct mscclppAbort* abort;             /* error domain of memory waits, the proxy, channels and kernels */
  int abortBorrowed;                      /* abort is another communicator's (mscclppCommBorrowAbort) */
  struct mscclppChannelContext* channels; /* semaphores, opened peer memories, the port channel proxy */
  pthread_t watcher;                      /* raises the abort when the bootstrap loses a peer */
  int watcherRunning;
  int watcherStop; /* __atomic */
  struct mscclppSeedState* seed;          /* the seed API's connections (comm/seed.c); NULL until used */
  /* The collective layer (above this one) keeps its state here, opaque to
   * this layer, made at the first collective call, and sets collRelease so
   * that destruction frees it first (a hook, so that comm never includes
   * coll). */
  struct mscclppCollState* coll;
  /* > 0: how many ranks of the whole job run on this rank's GPU, set on a
   * communicator made from another's ranks (a hierarchical allreduce's
   * children, ncclCommSplit) through mscclppCommSetDeviceShare: it sees
   * only some of them, and the GPU collectives size their grids so that
   * every rank's blocks stay resident together (mscclppCommGpuShare). */
  int deviceShare;
  void (*collRelease)(struct mscclppComm* comm);
  /* mscclppCommRevoke (comm_abort.c): threads inside a call of the
   * collective or bootstrap API on this communicator, and whether it was
   * revoked; __atomic both */
  int activeCalls;
  int revoked;
  struct mscclppReportRecord* report; /* the hang report's record (core/report.h); NULL when the pool was empty */
};

/* A call of the collective or bootstrap API on comm begins / ends (the API
 * brackets it): a revoked communicator is quiescent once none is left. */
static inline void mscclppCommCallBegin(struct mscclppComm* comm) {
  __atomic_add_fetch(&comm->activeCalls, 1, __ATOMIC_ACQ_REL);
}
static inline void mscclppCommCallEnd(struct mscclppComm* comm) {
  __atomic_sub_fetch(&comm->activeCalls, 1, __ATOMIC_ACQ_REL);
}

/* A rank's GPU, as gpu_share.c gathers it. */
struct mscclppGpuIdent {
  uint8_t uuid[16];
  uint8_t known; /* 0: no GPU, or its UUID could not be read */
};

/* How many of all[0..n) name the GPU that all[me] names; 1 when all[me]'s
 * UUID is unknown (its ranks are then sized as if alone). */
int mscclppGpuShareCount(const struct mscclppGpuIdent* all, int n, int me);

/* How many of comm's ranks run on this rank's GPU, by the devices' UUIDs
 * gathered over comm's bootstrap (every rank must call), or comm's own
 * deviceShare hint where that is more: what a communicator made from comm's
 * ranks (a hierarchy's child, an ncclCommSplit) is given as its
 * deviceShare. 1 without a GPU. */
mscclppResult_t mscclppCommGpuShare(struct mscclppComm* comm, int* share);

/* Tell comm, made from some of another communicator's ranks, that `share`
 * ranks of the job run on its GPU (what mscclppCommGpuShare of the parent
 * said); the largest hint given is kept. Call it before comm's first
 * collective. */
void mscclppCommSetDeviceShare(struct mscclppComm* comm, int share);

/* The collective layer's (above this one) hook that builds a new
 * communicator's collective state while every rank is still in the
 * creation (MSCCLPP_COLL_PREPARE): set once, when the library loads. */
typedef mscclppResult_t (*mscclppCommPrepareFn)(struct mscclppComm* comm);
void mscclppCommSetPrepareHook(mscclppCommPrepareFn fn);

/* mscclppCommInitRankFromId without the hook, for a communicator made from
 * some of another's ranks (a hierarchy's child, the NCCL layer's), whose
 * maker sets it up (deviceShare, a borrowed abort object) and then calls
 * mscclppCommPrepare. *cancel (may be NULL) nonzero ends the rendezvous
 * while it waits for the other ranks (mscclppAborted). */
mscclppResult_t mscclppCommInitRankFromIdUnprepared(mscclppComm_t* comm, int nranks, mscclppUniqueId id, int rank,
                                                   const int* cancel);
/* A communicator on bootstrap `bs` (made by the caller; owned by the
 * communicator from now on, destroyed on failure too), with parameters
 * `params`; `source` names how it was made in the INFO line; prepare: run
 * the hook. *out only on success. */
mscclppResult_t mscclppCommFromBootstrap(const struct mscclppParams* params, struct mscclppBootstrap* bs,
                                         const char* source, int prepare, mscclppComm_t* out);
/* comm/comm_shrink.c. mscclppCommShrink without the hook (the NCCL layer
 * sets the new communicator up first, as for its other children), whose
 * waits also end when *cancel (may be NULL) becomes nonzero. */
mscclppResult_t mscclppCommShrinkUnprepared(mscclppComm_t comm, const int* excludeRanks, int excludeCount, int flags,
                                            const int* cancel, mscclppComm_t* newcomm);
/* Run the hook on comm (every rank must call; a no-op when no hook is set;
 * the hook does only what waits for no peer when MSCCLPP_COLL_PREPARE is 0). */
mscclppResult_t mscclppCommPrepare(struct mscclppComm* comm);

/* comm/seed.c: destroy what mscclppConnectionSetup built (channels,
 * connections, registrations) and forget the declarations. */
void mscclppSeedRelease(struct mscclppComm* comm);

/* comm/comm_abort.c. The abort object (made for the current device, with
 * the peer-loss watcher, on first call). */
mscclppResult_t mscclppCommAbortOf(struct mscclppComm* comm, struct mscclppAbort** abort);
/* comm/channel_api.c. The channel context (made on first call, on the
 * memory context mctx, with the abort object). */
mscclppResult_t mscclppCommChannelsOf(struct mscclppComm* comm, struct mscclppMemContext* mctx,
                                      struct mscclppChannelContext** ctx);
/* Destroy the channel context: mscclppInvalidUsage while channels live. */
mscclppResult_t mscclppCommChannelsRelease(struct mscclppComm* comm);
/* comm/comm_abort.c. Make `child` use `parent`'s abort object and device instead of making its
 * own (one error domain: an error or a lost peer on either aborts both; the
 * parent's watcher, which sees every process of the child, names lost ranks
 * in the parent's numbering). Call it before the child's first channel,
 * memory or collective call; the parent must outlive the child. Errors of
 * mscclppCommAbortOf(parent); mscclppInvalidUsage when the child already has
 * its own. */
mscclppResult_t mscclppCommBorrowAbort(struct mscclppComm* child, struct mscclppComm* parent);
/* Stop the watcher and free the abort object (after everything using it; a
 * borrowed one is only forgotten). */
void mscclppCommAbortRelease(struct mscclppComm* comm);
/* The first error of the abort object, else the bootstrap's lost peer. */
mscclppResult_t mscclppCommAsyncError(struct mscclppComm* comm, mscclppResult_t* error);

/* comm/comm_report.c. The hang report's details of comm (its device-side
 * waits, its proxy's queue): attached to its record at creation, detached
 * (waiting for reports being written) before destruction frees anything.
 * They read comm->abort and comm->channels, which are therefore stored
 * with release order once made. */
void mscclppCommReportAttach(struct mscclppComm* comm);
void mscclppCommReportDetach(struct mscclppComm* comm);

#endif /* MSCCLPP_SRC_COMM_COMM_H_ */
