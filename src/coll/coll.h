/* SPDX-License-Identifier: MIT */
/*
 * The collective layer's inside: what the API (coll.c) hands to a backend.
 *
 * coll.c checks the arguments, resolves groups of send/recv and hands each
 * call to mscclppCollDispatch, which asks the selection table (select.h)
 * where it runs: the hierarchy across hosts (coll/hier/, allreduce only),
 * the GPU backend (coll/gpu/) or its port channel family (coll/port/), or
 * the host backend (coll/host/). A backend gets one mscclppCollArgs (a
 * collective) or a list of mscclppCollP2pOp (a group of sends and
 * receives).
 *
 * Per-communicator state: the communicator holds one opaque pointer
 * (comm->coll) to a mscclppCollState: the selection state and one slot per
 * backend. Every backend follows one first-use policy (mscclppCollBackendState):
 * its state is built privately at the first call that needs it (which every
 * rank reaches) and published in its slot only when complete; a failed
 * build is remembered, and every later call fails at once naming it (no
 * call ever sees half-built state), while what the build made is kept for
 * the release at destroy, where every rank releases together (a peer may
 * have mapped it). comm destruction calls the layer's release hook.
 */
#ifndef MSCCLPP_SRC_COLL_COLL_H_
#define MSCCLPP_SRC_COLL_COLL_H_

#include <stddef.h>

#include "comm/comm.h"
#include "mscclpp/coll.h"

#include "coll/coll_kind.h"
#include "coll/coll_trace.h"
#include "coll/select.h"

/* The counts of an all-to-all-v (coll.h, mscclppAllToAllv), in the memory
 * of the backend (device memory on a GPU, host memory on the host backend):
 * nranks elements each. */
struct mscclppCollCounts {
  const size_t* sendcounts;
  const size_t* sdispls;
  size_t* recvcounts;
  size_t* rdispls;
  size_t sendCapacity; /* elements */
  size_t recvCapacity;
};

/* One collective call, checked. `count` is the API's count argument (per
 * rank for allgather/alltoall, the output's for reduce-scatter; the receive
 * capacity for alltoallv, whose counts are in `v`). */
struct mscclppCollArgs {
  mscclppCollKind kind;
  const void* send;
  void* recv;
  size_t count;
  mscclppDataType_t type;
  size_t typeSize;
  mscclppRedOp_t op; /* mscclppSum for the copy-only collectives */
  int root;          /* broadcast, reduce; 0 otherwise */
  mscclppStream_t stream;
  mscclppCollAlgo algo; /* MSCCLPP_ALGO's choice for this collective (MSCCLPP_COLL_ALGO_AUTO: none) */
  const struct mscclppCollCounts* v; /* alltoallv; NULL for the others */
  struct mscclppPlan* plan;          /* mscclppPlanExecute: run this plan; NULL: the selection table picks */
};

/* One send or receive of a group (or a lone mscclppSend/Recv). */
struct mscclppCollP2pOp {
  int isSend;
  int peer;
  void* buf; /* the send buffer (read only) or the receive buffer */
  size_t bytes;
};

/* ---- per-communicator state (coll/state.c) ---- */

/* One backend's state under the first-use policy (top of this file). */
struct mscclppCollSlot {
  void* ready;             /* the complete state, published; NULL until then */
  void* remains;           /* what a failed build made, for the release at destroy (NULL: nothing) */
  mscclppResult_t failure; /* the failed build's code; mscclppSuccess while none failed */
  char why[256];           /* ... and its reason, as mscclppGetLastError said it */
};

struct mscclppPlanRegistry;

struct mscclppCollState {
  struct mscclppCollSelect select;
  struct mscclppPlanRegistry* plans; /* execution plans registered or run on comm (coll/plan/plan_coll.h) */
  uint64_t traceSeq; /* calls traced on this communicator: the trace's sequence numbers */
  struct mscclppCollTrace* gpuTrace; /* the GPU kernel events' ring (coll_trace.h), made at the first traced launch */
  uint64_t checkSeq;                 /* calls checked (MSCCLPP_CHECK_CALLS): the check's call numbers */
  struct mscclppCollCheck* check;    /* the check's memory of every rank's last call (check.c) */
  struct mscclppCollSlot slot[MSCCLPP_COLL_BACKENDS]; /* by mscclppCollBackend */
};

/* comm's collective state, made (empty) at the layer's first call, which
 * also sets comm's release hook. mscclppSystemError when out of memory. */
mscclppResult_t mscclppCollStateOf(struct mscclppComm* comm, struct mscclppCollState** state);

/* Builds a backend's state privately. On success *built is the complete
 * state; on failure *built is what the build made and could not free
 * alone (released at destroy with the backend's release), or NULL. */
typedef mscclppResult_t (*mscclppCollBuildFn)(struct mscclppComm* comm, void** built);

/* `backend`'s state on comm in *state: published already, or built now by
 * `build` and published when complete. After a failed build every call
 * returns mscclppInvalidUsage naming the backend and the first failure. */
mscclppResult_t mscclppCollBackendState(struct mscclppComm* comm, mscclppCollBackend backend,
                                        mscclppCollBuildFn build, void** state);

/* A setup value every rank must share (a layout, a limit each side applies
 * to its own count): the smallest of the ranks' `mine`, through one
 * bootstrap allgather (bounded by its deadline). Collective: every rank
 * calls it at the same point of its backend's setup. */
mscclppResult_t mscclppCollAgreeMin(struct mscclppComm* comm, uint64_t mine, uint64_t* agreed);

/* The MSCCLPP_TRACE part of a kernel launch's parameters (coll_trace.h):
 * the ring's slots for `nblocks` blocks of `kernel` (a string that lives as
 * long as the process), as the current call (its sequence number) of comm;
 * ring NULL when tracing is off or `stream` is being captured. */
void mscclppCollTraceKernel(struct mscclppComm* comm, int device, uint32_t nblocks, const char* kernel,
                            mscclppStream_t stream, struct mscclppCollTraceArgs* args);

/* MSCCLPP_CHECK_CALLS (check.c): compare this call with every rank's
 * (every rank must call). mscclppInvalidUsage naming the ranks and their
 * calls when they differ or a rank does not come within half of
 * MSCCLPP_TIMEOUT; the bootstrap's errors. */
mscclppResult_t mscclppCollCheckCall(struct mscclppComm* comm, const struct mscclppCollArgs* a);
void mscclppCollCheckRelease(struct mscclppCollCheck* check);

/* Run a checked call (count > 0, or any alltoallv) on comm, where the
 * selection table says.
 * The API calls it, and coll/hier/ for the steps on its child
 * communicators. */
mscclppResult_t mscclppCollDispatch(struct mscclppComm* comm, const struct mscclppCollArgs* a);

/* ---- the backends ----
 * Each Run/P2p builds the backend's state at its first call (the policy
 * above); each Release frees a state of that backend, complete or what a
 * failed build left (`state` as the slot holds it), at comm destruction. */

/* The host backend (coll/host/): runs the call to completion on this
 * thread. */
mscclppResult_t mscclppCollHostRun(struct mscclppComm* comm, const struct mscclppCollArgs* args);
mscclppResult_t mscclppCollHostP2p(struct mscclppComm* comm, const struct mscclppCollP2pOp* ops, int nops);
void mscclppCollHostRelease(struct mscclppComm* comm, void* state);

/* The GPU backend (coll/gpu/): enqueues on the stream. Built only with
 * CUDA; without it these return mscclppInvalidUsage. Release waits for the
 * device and holds a bootstrap barrier (every rank calls it). */
mscclppResult_t mscclppCollGpuRun(struct mscclppComm* comm, const struct mscclppCollArgs* args);
mscclppResult_t mscclppCollGpuP2p(struct mscclppComm* comm, const struct mscclppCollP2pOp* ops, int nops,
                                  mscclppStream_t stream);
void mscclppCollGpuRelease(struct mscclppComm* comm, void* state);
/* Build the state now (every rank calls; mscclppCollPrepare). */
mscclppResult_t mscclppCollGpuPrepare(struct mscclppComm* comm);
/* Have every peer map the allocation that holds `buf` now (a registration's
 * hint: its first zero-copy call then asks nothing). Not collective; a
 * no-op before the state is built, or for a buffer that calls stage. */
mscclppResult_t mscclppCollGpuExportHint(struct mscclppComm* comm, const void* buf);
/* Zero-copy for another executor (execution plans, coll/plan/plan_gpu.c):
 * mapped[i][p] = where peer p maps bufs[i] (i < n <= 2; NULL entries
 * skipped), through the peers' export services (coll_gpu_export.c: a first
 * use of an allocation asks each peer once, a bootstrap round trip served
 * whatever the peer's application does; later calls ask nothing), 0 for
 * a buffer that calls stage (not a whole cudaMalloc allocation of this
 * device large enough to share) and for this rank. All 0 before the
 * state is built (mscclppCollGpuPrepare, collective) or when the ask
 * fails; the failure is logged at INFO and the caller stages. */
#define MSCCLPP_COLL_SHARE_RANKS 8 /* the GPU backend's most ranks */
void mscclppCollGpuShare(struct mscclppComm* comm, const void* const* bufs, int n,
                         uint64_t (*mapped)[MSCCLPP_COLL_SHARE_RANKS]);
/* Around such an executor's launch on `stream` (Before, then After when
 * it was enqueued): the peers' mappings that newer allocations replaced
 * are closed once this rank's kernels before are done, as around the
 * backend's own launches (coll_gpu.c, reapBefore). No-ops before the
 * state is built. */
void mscclppCollGpuLaunchBefore(struct mscclppComm* comm, mscclppStream_t stream);
void mscclppCollGpuLaunchAfter(struct mscclppComm* comm, mscclppStream_t stream);

/* The GPU backend's "port" family (coll/port/; streams, scratch layout and
 * algorithms: coll/port/coll_port.h), which the selection table picks when
 * the communicator spans hosts or MSCCLPP_ALGO names port. Enqueue the
 * collective / the group of sends and receives on its stream. The first
 * call of a communicator (which every rank reaches) connects to every peer
 * (transport Auto: CUDA IPC on the host, Net between hosts), allocates and
 * registers the scratch and builds two port channels per peer. Errors:
 * mscclppInvalidUsage (more than MSCCLPP_COLL_PORT_MAX_RANKS ranks, a group
 * of more than MSCCLPP_COLL_PORT_MAX_P2P operations, sends to self that do
 * not match the receives from self), and those of the connection, memory,
 * channel and CUDA calls, logged where they are decided. Without CUDA they
 * return mscclppInvalidUsage. */
mscclppResult_t mscclppCollPortRun(struct mscclppComm* comm, const struct mscclppCollArgs* args);
mscclppResult_t mscclppCollPortP2p(struct mscclppComm* comm, const struct mscclppCollP2pOp* ops, int nops,
                                   mscclppStream_t stream);
/* After its kernels; every rank calls it: it holds two bootstrap barriers. */
void mscclppCollPortRelease(struct mscclppComm* comm, void* state);
/* Build the state now (every rank calls; mscclppCollPrepare). */
mscclppResult_t mscclppCollPortPrepare(struct mscclppComm* comm);

/* The state of every backend that comm's calls will use on a GPU, built
 * while every rank is in the communicator's creation (comm.h's prepare
 * hook, MSCCLPP_COLL_PREPARE), so that no collective call waits for a
 * peer's host (docs/DESIGN.md, Contracts). The host backend's calls are
 * synchronous and build theirs at the first call; so do a hierarchy's child
 * communicators. A communicator larger than a backend supports is left to
 * the first call, which says so. */
mscclppResult_t mscclppCollPrepare(struct mscclppComm* comm);

#endif /* MSCCLPP_SRC_COLL_COLL_H_ */
