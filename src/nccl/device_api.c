/* SPDX-License-Identifier: MIT */
/*
 * The host-side calls of NCCL 2.28's device API (nccl_device/ headers), exported
 * so that under LD_PRELOAD none of them reaches NVIDIA's library with one of
 * our communicators. Teams are plain arithmetic and are answered; device
 * communicators (symmetric-memory kernels written against NCCL's device
 * headers) are not supported: ncclInvalidUsage, or the fallback NCCL's
 * communicator when MSCCLPP_NCCL_FALLBACK made one.
 */
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "nccl/nccl_internal.h"

/* nccl_device/core.h's types, as far as these calls need them. */
typedef struct ncclTeam {
  int nRanks, rank, stride;
} ncclTeam_t;
struct ncclDevComm;
struct ncclDevCommRequirements;
struct ncclDevResourceRequirements;
struct ncclLsaBarrierHandle;
struct ncclGinBarrierHandle;
struct ncclLLA2AHandle;

MSCCLPP_NCCL_API ncclResult_t ncclDevCommCreate(ncclComm_t comm, const struct ncclDevCommRequirements* reqs,
                                                struct ncclDevComm* outDevComm);
MSCCLPP_NCCL_API ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const struct ncclDevComm* devComm);
MSCCLPP_NCCL_API ncclTeam_t ncclTeamWorld(ncclComm_t comm);
MSCCLPP_NCCL_API ncclTeam_t ncclTeamLsa(ncclComm_t comm);
MSCCLPP_NCCL_API ncclTeam_t ncclTeamRail(ncclComm_t comm);
MSCCLPP_NCCL_API int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank);
MSCCLPP_NCCL_API int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank);
MSCCLPP_NCCL_API ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers,
                                                              struct ncclLsaBarrierHandle* outHandle,
                                                              struct ncclDevResourceRequirements* outReq);
MSCCLPP_NCCL_API ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers,
                                                              struct ncclGinBarrierHandle* outHandle,
                                                              struct ncclDevResourceRequirements* outReq);
MSCCLPP_NCCL_API int ncclLLA2ACalcSlots(int maxElts, int maxEltSize);
MSCCLPP_NCCL_API ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots, struct ncclLLA2AHandle* outHandle,
                                                         struct ncclDevResourceRequirements* outReq);

static ncclResult_t unsupported(const char* fn) {
  return mscclppNcclErr(
      ncclInvalidUsage,
      "%s: NCCL's device API (device communicators, symmetric-memory kernels) is not supported by mscclpp; "
      "set MSCCLPP_NCCL_FALLBACK to NVIDIA's libnccl.so.2 to run it there",
      fn);
}

/* The fallback's function `name` when comm has a fallback communicator. */
static void* realFn(ncclComm_t comm, const char* name) {
  if (mscclppNcclCommReady(comm, name) != ncclSuccess || comm->real == NULL) return NULL;
  return mscclppNcclFallbackSymbol(name);
}

ncclResult_t ncclDevCommCreate(ncclComm_t comm, const struct ncclDevCommRequirements* reqs,
                               struct ncclDevComm* outDevComm) {
  void* s = realFn(comm, "ncclDevCommCreate");
  if (s == NULL) return unsupported("ncclDevCommCreate");
  ncclResult_t (*f)(void*, const struct ncclDevCommRequirements*, struct ncclDevComm*);
  memcpy(&f, &s, sizeof(s));
  return f(comm->real, reqs, outDevComm);
}
NCCL_PROFILING_ALIAS(ncclDevCommCreate);

ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const struct ncclDevComm* devComm) {
  void* s = realFn(comm, "ncclDevCommDestroy");
  if (s == NULL) return unsupported("ncclDevCommDestroy");
  ncclResult_t (*f)(void*, const struct ncclDevComm*);
  memcpy(&f, &s, sizeof(s));
  return f(comm->real, devComm);
}
NCCL_PROFILING_ALIAS(ncclDevCommDestroy);

ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers,
                                             struct ncclGinBarrierHandle* outHandle,
                                             struct ncclDevResourceRequirements* outReq) {
  void* s = realFn(comm, "ncclGinBarrierCreateRequirement");
  if (s == NULL) return unsupported("ncclGinBarrierCreateRequirement");
  ncclResult_t (*f)(void*, ncclTeam_t, int, struct ncclGinBarrierHandle*, struct ncclDevResourceRequirements*);
  memcpy(&f, &s, sizeof(s));
  return f(comm->real, team, nBarriers, outHandle, outReq);
}
NCCL_PROFILING_ALIAS(ncclGinBarrierCreateRequirement);

ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers, struct ncclLsaBarrierHandle* outHandle,
                                             struct ncclDevResourceRequirements* outReq) {
  void* s = mscclppNcclFallbackSymbol("ncclLsaBarrierCreateRequirement");
  if (s == NULL) return unsupported("ncclLsaBarrierCreateRequirement");
  ncclResult_t (*f)(ncclTeam_t, int, struct ncclLsaBarrierHandle*, struct ncclDevResourceRequirements*);
  memcpy(&f, &s, sizeof(s));
  return f(team, nBarriers, outHandle, outReq);
}
NCCL_PROFILING_ALIAS(ncclLsaBarrierCreateRequirement);

ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots, struct ncclLLA2AHandle* outHandle,
                                        struct ncclDevResourceRequirements* outReq) {
  void* s = mscclppNcclFallbackSymbol("ncclLLA2ACreateRequirement");
  if (s == NULL) return unsupported("ncclLLA2ACreateRequirement");
  ncclResult_t (*f)(int, int, struct ncclLLA2AHandle*, struct ncclDevResourceRequirements*);
  memcpy(&f, &s, sizeof(s));
  return f(nBlocks, nSlots, outHandle, outReq);
}
NCCL_PROFILING_ALIAS(ncclLLA2ACreateRequirement);

int ncclLLA2ACalcSlots(int maxElts, int maxEltSize) {
  void* s = mscclppNcclFallbackSymbol("ncclLLA2ACalcSlots");
  if (s == NULL) {
    (void)unsupported("ncclLLA2ACalcSlots");
    return 0;
  }
  int (*f)(int, int);
  memcpy(&f, &s, sizeof(s));
  return f(maxElts, maxEltSize);
}
NCCL_PROFILING_ALIAS(ncclLLA2ACalcSlots);

/* ---- teams: world, the ranks of this host (lsa), and rails across hosts ---- */

/* This host's ranks, assumed consecutive in the world (as mscclpp-run,
 * torchrun and MPI place them); else a team of this rank alone. */
static ncclTeam_t lsaOf(ncclComm_t comm) {
  ncclTeam_t t = {1, 0, 1};
  int lr = 0, ln = 1;
  if (mscclppNcclCommReady(comm, "ncclTeamLsa") != ncclSuccess) return t;
  if (mscclppCommLocalRank(comm->mc, &lr) != mscclppSuccess || mscclppCommLocalSize(comm->mc, &ln) != mscclppSuccess)
    return t;
  if (ln <= 0 || comm->nranks % ln != 0 || lr != comm->rank % ln) return t;
  t.nRanks = ln;
  t.rank = lr;
  return t;
}

ncclTeam_t ncclTeamWorld(ncclComm_t comm) {
  ncclTeam_t t = {1, 0, 1};
  if (mscclppNcclCommCheck(comm, "ncclTeamWorld") != ncclSuccess) return t;
  t.nRanks = comm->nranks;
  t.rank = comm->rank;
  return t;
}
NCCL_PROFILING_ALIAS(ncclTeamWorld);

ncclTeam_t ncclTeamLsa(ncclComm_t comm) { return lsaOf(comm); }
NCCL_PROFILING_ALIAS(ncclTeamLsa);

ncclTeam_t ncclTeamRail(ncclComm_t comm) {
  ncclTeam_t lsa = lsaOf(comm);
  ncclTeam_t t = {1, 0, 1};
  if (mscclppNcclCommCheck(comm, "ncclTeamRail") != ncclSuccess) return t;
  t.nRanks = comm->nranks / lsa.nRanks;
  t.rank = comm->rank / lsa.nRanks;
  t.stride = lsa.nRanks;
  return t;
}
NCCL_PROFILING_ALIAS(ncclTeamRail);

int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank) {
  if (mscclppNcclCommCheck(comm, "ncclTeamRankToWorld") != ncclSuccess) return -1;
  return comm->rank + (rank - team.rank) * team.stride;
}
NCCL_PROFILING_ALIAS(ncclTeamRankToWorld);

int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank) {
  if (mscclppNcclCommCheck(comm, "ncclTeamRankToLsa") != ncclSuccess) return -1;
  ncclTeam_t lsa = lsaOf(comm);
  int world = comm->rank + (rank - team.rank) * team.stride;
  int lsaBase = comm->rank - lsa.rank;
  return world - lsaBase;
}
NCCL_PROFILING_ALIAS(ncclTeamRankToLsa);
