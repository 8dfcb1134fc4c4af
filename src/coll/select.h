/* SPDX-License-Identifier: MIT */
/*
 * The selection table (select.c): every rule that decides how a collective
 * call runs, in one place -- which backend (host, GPU, the GPU's port
 * family, the hierarchy across hosts), and which algorithm inside it.
 *
 * MSCCLPP_ALGO ("allreduce=rsag,allgather=port") is parsed once per
 * communicator (again only when its text in comm->params changes, as the
 * benchmarks' algorithm comparison does) against the table of algorithms
 * each collective has; a collective or an algorithm that no backend
 * implements is refused, with a message, at every call until the variable
 * is fixed. With MSCCLPP_DEBUG=INFO each collective says what it chose once
 * per size class (message sizes in (2^(c-1), 2^c] bytes per rank), not per
 * call.
 */
#ifndef MSCCLPP_SRC_COLL_SELECT_H_
#define MSCCLPP_SRC_COLL_SELECT_H_

#include <stddef.h>
#include <stdint.h>

#include "core/params.h"
#include "mscclpp/core.h"

#include "coll/coll_kind.h"

struct mscclppComm;

/* The algorithms MSCCLPP_ALGO can name (select.c's table says which
 * collective has which). */
typedef enum {
  MSCCLPP_COLL_ALGO_AUTO = 0, /* nothing forced: the rules pick */
  MSCCLPP_COLL_ALGO_PACKET,   /* GPU allreduce, allgather, reduce-scatter, all-to-all: one step of LL packets */
  MSCCLPP_COLL_ALGO_PACKET2,  /* GPU allreduce: two-phase LL packets */
  MSCCLPP_COLL_ALGO_RSAG,     /* GPU allreduce: fused reduce-scatter + allgather (the direct kernel) */
  MSCCLPP_COLL_ALGO_DIRECT,   /* GPU: the zero-copy kernel of the other collectives */
  MSCCLPP_COLL_ALGO_HIER,     /* allreduce across hosts: hierarchical (coll/hier/) */
  MSCCLPP_COLL_ALGO_FLAT,     /* allreduce across hosts: the backend's own over all ranks */
  MSCCLPP_COLL_ALGO_PORT,     /* GPU: the port channel family (coll/port/) */
  MSCCLPP_COLL_ALGO_PLAN,     /* a registered execution plan (coll/plan/): the first that matches the call */
  MSCCLPP_COLL_ALGOS
} mscclppCollAlgo;

/* Where a call runs. */
typedef enum {
  MSCCLPP_COLL_BACKEND_HOST = 0, /* coll/host/: CPU threads play the kernels */
  MSCCLPP_COLL_BACKEND_GPU,      /* coll/gpu/: memory channels and the board, one host */
  MSCCLPP_COLL_BACKEND_PORT,     /* coll/port/: the GPU over port channels, any hosts */
  MSCCLPP_COLL_BACKEND_HIER,     /* coll/hier/: allreduce composed on child communicators */
  MSCCLPP_COLL_BACKENDS
} mscclppCollBackend;

/* The selection state of one communicator (inside its collective state). */
struct mscclppCollSelect {
  int parsed;                                /* `text` was parsed */
  char text[MSCCLPP_PARAM_STR_MAX];          /* MSCCLPP_ALGO as parsed */
  mscclppResult_t parseError;                /* mscclppSuccess, or why `text` is refused */
  char parseWhy[2 * MSCCLPP_PARAM_STR_MAX];  /* ... in words */
  uint8_t forced[MSCCLPP_COLL_KINDS];        /* mscclppCollAlgo per collective */
  uint64_t told[MSCCLPP_COLL_KINDS];         /* size classes whose choice INFO has said */
  int packet2FallbackTold;                   /* allreduce=packet2 beyond its slots: said once */
  uint8_t planFallbackTold[MSCCLPP_COLL_KINDS]; /* X=plan with no plan matching: said once per collective */
};

/* "allreduce", ... as MSCCLPP_ALGO and mscclppCollAlgoNames spell them. */
const char* mscclppCollKindName(mscclppCollKind kind);
/* "packet", ... ("auto" for MSCCLPP_COLL_ALGO_AUTO). */
const char* mscclppCollAlgoName(mscclppCollAlgo algo);
/* "host", "gpu", "port", "hier". */
const char* mscclppCollBackendName(mscclppCollBackend backend);

/* MSCCLPP_ALGO's choice for `kind` on comm (MSCCLPP_COLL_ALGO_AUTO when it
 * names none). An unknown collective or an algorithm the collective does
 * not have is mscclppInvalidArgument, naming it, for every collective. */
mscclppResult_t mscclppCollSelectForced(struct mscclppComm* comm, mscclppCollKind kind, mscclppCollAlgo* algo);
/* 1 when MSCCLPP_ALGO parses (nothing is logged either way). */
int mscclppCollSelectParses(struct mscclppComm* comm);

/* 1 when an allreduce with `forced` should first try the hierarchy: the
 * communicator spans hosts and MSCCLPP_ALGO names hier or nothing. (The
 * hierarchy then says whether it applies to the call: coll/hier/.) */
int mscclppCollSelectHier(const struct mscclppComm* comm, mscclppCollKind kind, mscclppCollAlgo forced);

/* The backend of a flat call: the GPU when the process has one (its port
 * family when the communicator spans hosts -- nothing else reaches every
 * rank -- or MSCCLPP_ALGO names port for the collective), else the host. */
mscclppCollBackend mscclppCollSelectBackend(const struct mscclppComm* comm, mscclppCollKind kind,
                                            mscclppCollAlgo forced);

/* The GPU backend's allreduce for `bytes` per rank on k ranks: PACKET,
 * PACKET2 or RSAG (MSCCLPP_ALGO's choice where it applies: packet2 holds at
 * most MSCCLPP_COLL_GPU_LL2_MAX_BYTES, beyond which the size rule picks,
 * said once). */
mscclppCollAlgo mscclppCollSelectGpuAllreduce(struct mscclppComm* comm, mscclppCollAlgo forced, int k,
                                              uint64_t bytes);

/* The GPU backend's algorithm for a call of `kind` of `bytes` per rank
 * (count x type size) on k ranks: allreduce's rule above; allgather,
 * reduce-scatter and all-to-all PACKET or DIRECT (MSCCLPP_ALGO's choice,
 * or by size); the others DIRECT. */
mscclppCollAlgo mscclppCollSelectGpu(struct mscclppComm* comm, mscclppCollKind kind, mscclppCollAlgo forced, int k,
                                     uint64_t bytes);

/* Say at INFO, once per (collective, size class), what a call of `bytes`
 * per rank ran on: backend and algorithm (`planName`: the plan's name when
 * algo is MSCCLPP_COLL_ALGO_PLAN, else NULL). */
void mscclppCollSelectTell(struct mscclppComm* comm, mscclppCollKind kind, uint64_t bytes,
                           mscclppCollBackend backend, mscclppCollAlgo algo, const char* planName);

/* Whether registered execution plans may run a call of `kind` with
 * MSCCLPP_ALGO's choice `forced`: nothing forced, or X=plan. */
int mscclppCollSelectPlans(mscclppCollKind kind, mscclppCollAlgo forced);
/* MSCCLPP_ALGO named plan for `kind` but no registered plan matched a call:
 * say once (INFO) that the rules pick. */
void mscclppCollSelectPlanFallback(struct mscclppComm* comm, mscclppCollKind kind, uint64_t bytes);

#endif /* MSCCLPP_SRC_COLL_SELECT_H_ */
