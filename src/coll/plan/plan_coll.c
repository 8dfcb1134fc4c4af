/* SPDX-License-Identifier: MIT */
/*
 * Execution plans on a communicator (plan_coll.h): registration
 * (mscclpp/plan.h), MSCCLPP_CACHE_DIR, the selection table's pick, and the
 * run of a plan on the call's backend.
 */
#include "coll/plan/plan_coll.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/plan/plan_gpu.h"
#include "coll/plan/plan_host.h"
#include "core/error.h"
#include "core/log.h"

mscclppCollKind mscclppCollPlanKind(const struct mscclppPlan* plan) {
  switch (plan->collective) {
    case MSCCLPP_PLAN_ALLGATHER:
      return MSCCLPP_COLL_ALLGATHER;
    case MSCCLPP_PLAN_REDUCESCATTER:
      return MSCCLPP_COLL_REDUCESCATTER;
    case MSCCLPP_PLAN_ALLTOALL:
      return MSCCLPP_COLL_ALLTOALL;
    default:
      return MSCCLPP_COLL_ALLREDUCE;
  }
}

const char* mscclppCollPlanName(const struct mscclppPlan* plan) { return plan->name; }

/* ---- the registry ------------------------------------------------------------ */

static mscclppResult_t registryOf(struct mscclppComm* comm, struct mscclppPlanRegistry** out) {
  struct mscclppCollState* st = NULL;
  MSCCLPP_RETURN_ON_ERROR(mscclppCollStateOf(comm, &st));
  if (st->plans == NULL) {
    st->plans = (struct mscclppPlanRegistry*)calloc(1, sizeof(*st->plans));
    if (st->plans == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_COLL, "out of memory");
  }
  *out = st->plans;
  return mscclppSuccess;
}

static struct mscclppPlanEntry* entryOf(struct mscclppPlanRegistry* reg, const struct mscclppPlan* plan) {
  for (int i = 0; reg != NULL && i < reg->n; i++)
    if (reg->e[i].plan == plan) return &reg->e[i];
  return NULL;
}

/* A new entry for plan (taking a reference). */
static mscclppResult_t entryAdd(struct mscclppPlanRegistry* reg, struct mscclppPlan* plan,
                                struct mscclppPlanEntry** out) {
  if (reg->n == reg->cap) {
    int cap = reg->cap == 0 ? 8 : reg->cap * 2;
    struct mscclppPlanEntry* e = (struct mscclppPlanEntry*)realloc(reg->e, (size_t)cap * sizeof(*e));
    if (e == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_COLL, "out of memory");
    reg->e = e;
    reg->cap = cap;
  }
  struct mscclppPlanEntry* e = &reg->e[reg->n++];
  memset(e, 0, sizeof(*e));
  mscclppPlanRetain(plan);
  e->plan = plan;
  *out = e;
  return mscclppSuccess;
}

static void entryFree(struct mscclppComm* comm, struct mscclppPlanEntry* e) {
  if (e->host != NULL) mscclppPlanHostFree(comm, e->host);
  if (e->gpu != NULL) mscclppPlanGpuFree(comm, e->gpu);
  mscclppPlanRelease(e->plan);
}

void mscclppCollPlanRelease(struct mscclppComm* comm, struct mscclppPlanRegistry* reg) {
  if (reg == NULL) return;
  for (int i = 0; i < reg->n; i++) entryFree(comm, &reg->e[i]);
  free(reg->e);
  free(reg);
}

MSCCLPP_API mscclppResult_t mscclppPlanRunCount(mscclppComm_t comm, mscclppPlan_t plan, uint64_t* runs) {
  if (comm == NULL || plan == NULL || runs == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_COLL, "mscclppPlanRunCount: NULL %s",
                      comm == NULL ? "comm" : plan == NULL ? "plan" : "runs");
  struct mscclppPlanEntry* e = comm->coll != NULL ? entryOf(comm->coll->plans, plan) : NULL;
  *runs = e != NULL ? e->runs : 0;
  return mscclppSuccess;
}

static mscclppResult_t registerPlan(struct mscclppComm* comm, struct mscclppPlan* plan, const char* fn) {
  if (plan->nranks != comm->nranks)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_COLL,
                      "%s: execution plan %s is for %d ranks; the communicator has %d", fn, plan->name, plan->nranks,
                      comm->nranks);
  struct mscclppPlanRegistry* reg = NULL;
  MSCCLPP_RETURN_ON_ERROR(registryOf(comm, &reg));
  struct mscclppPlanEntry* e = entryOf(reg, plan);
  if (e != NULL && e->registered)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_COLL, "%s: execution plan %s is registered on rank %d already",
                      fn, plan->name, comm->rank);
  if (e == NULL) MSCCLPP_RETURN_ON_ERROR(entryAdd(reg, plan, &e));
  e->registered = 1;
  MSCCLPP_INFO(MSCCLPP_LOG_COLL, "rank %d: execution plan %s (%s, %s, %s, %llu to %llu bytes) registered", comm->rank,
               plan->name, mscclppPlanCollectiveName(plan->collective),
               plan->protocol == MSCCLPP_PLAN_LL ? "LL" : "Simple", plan->inplace ? "in-place" : "out-of-place",
               (unsigned long long)plan->minMessageBytes, (unsigned long long)plan->maxMessageBytes);
  return mscclppSuccess;
}

MSCCLPP_API mscclppResult_t mscclppPlanRegister(mscclppComm_t comm, mscclppPlan_t plan) {
  if (comm == NULL || plan == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_COLL, "mscclppPlanRegister: NULL %s",
                      comm == NULL ? "comm" : "plan");
  return registerPlan(comm, plan, "mscclppPlanRegister");
}

MSCCLPP_API mscclppResult_t mscclppPlanUnregister(mscclppComm_t comm, mscclppPlan_t plan) {
  if (comm == NULL || plan == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_COLL, "mscclppPlanUnregister: NULL %s",
                      comm == NULL ? "comm" : "plan");
  struct mscclppPlanRegistry* reg = comm->coll != NULL ? comm->coll->plans : NULL;
  struct mscclppPlanEntry* e = entryOf(reg, plan);
  if (e == NULL || !e->registered)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_COLL,
                      "mscclppPlanUnregister: execution plan %s is not registered on rank %d", plan->name, comm->rank);
  /* Its executor state goes now: this rank's calls are complete (the host
   * backend's calls return when done), and peers keep their mappings of
   * its memory until they free theirs. */
  entryFree(comm, e);
  int i = (int)(e - reg->e);
  memmove(&reg->e[i], &reg->e[i + 1], (size_t)(reg->n - i - 1) * sizeof(*e));
  reg->n--;
  return mscclppSuccess;
}

MSCCLPP_API mscclppResult_t mscclppPlanRegisteredCount(mscclppComm_t comm, int* count) {
  if (comm == NULL || count == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_COLL, "mscclppPlanRegisteredCount: NULL %s",
                      comm == NULL ? "comm" : "count");
  struct mscclppPlanRegistry* reg = comm->coll != NULL ? comm->coll->plans : NULL;
  int n = 0;
  for (int i = 0; reg != NULL && i < reg->n; i++) n += reg->e[i].registered;
  *count = n;
  return mscclppSuccess;
}

MSCCLPP_API mscclppResult_t mscclppPlanRegisteredAt(mscclppComm_t comm, int i, mscclppPlan_t* plan) {
  if (comm == NULL || plan == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_COLL, "mscclppPlanRegisteredAt: NULL %s",
                      comm == NULL ? "comm" : "plan");
  struct mscclppPlanRegistry* reg = comm->coll != NULL ? comm->coll->plans : NULL;
  for (int k = 0, seen = 0; reg != NULL && k < reg->n; k++) {
    if (!reg->e[k].registered) continue;
    if (seen++ == i) {
      *plan = reg->e[k].plan;
      return mscclppSuccess;
    }
  }
  int n = 0;
  (void)mscclppPlanRegisteredCount(comm, &n);
  return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_COLL,
                    "mscclppPlanRegisteredAt: index %d is out of range: rank %d has %d registered plans", i, comm->rank,
                    n);
}

/* ---- directories (mscclppPlanRegisterDir, MSCCLPP_CACHE_DIR) ----------------------- */

static int byName(const void* a, const void* b) { return strcmp(*(char* const*)a, *(char* const*)b); }

/* Register dir's *.json plans on comm; `what` names the source in messages. */
static mscclppResult_t registerDir(struct mscclppComm* comm, const char* dir, const char* what, int* registered) {
  *registered = 0;
  DIR* d = opendir(dir);
  if (d == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_COLL, "%s: cannot read directory %s: %s", what, dir,
                      strerror(errno));
  char** names = NULL;
  int n = 0, cap = 0;
  mscclppResult_t res = mscclppSuccess;
  for (struct dirent* ent; (ent = readdir(d)) != NULL;) {
    size_t len = strlen(ent->d_name);
    if (len < 6 || strcmp(ent->d_name + len - 5, ".json") != 0 || ent->d_name[0] == '.') continue;
    if (n == cap) {
      cap = cap == 0 ? 16 : cap * 2;
      char** grown = (char**)realloc(names, (size_t)cap * sizeof(char*));
      if (grown == NULL) {
        res = mscclppErr(mscclppSystemError, MSCCLPP_LOG_COLL, "out of memory");
        break;
      }
      names = grown;
    }
    if ((names[n] = strdup(ent->d_name)) == NULL) {
      res = mscclppErr(mscclppSystemError, MSCCLPP_LOG_COLL, "out of memory");
      break;
    }
    n++;
  }
  closedir(d);
  if (res == mscclppSuccess && n > 1) qsort(names, (size_t)n, sizeof(char*), byName);
  for (int i = 0; i < n && res == mscclppSuccess; i++) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
    struct mscclppPlan* plan = NULL;
    if (mscclppPlanParseFileQuiet(path, &plan) != mscclppSuccess) {
      MSCCLPP_WARN(MSCCLPP_LOG_COLL, "rank %d: %s: skipped %s: %s", comm->rank, what, path, mscclppGetLastError());
      continue;
    }
    if (plan->nranks != comm->nranks) {
      MSCCLPP_INFO(MSCCLPP_LOG_COLL, "rank %d: %s: skipped %s: plan %s is for %d ranks, the communicator has %d",
                   comm->rank, what, path, plan->name, plan->nranks, comm->nranks);
    } else if (registerPlan(comm, plan, what) == mscclppSuccess) {
      (*registered)++;
    } else {
      MSCCLPP_WARN(MSCCLPP_LOG_COLL, "rank %d: %s: skipped %s: %s", comm->rank, what, path, mscclppGetLastError());
    }
    mscclppPlanRelease(plan);
  }
  for (int i = 0; i < n; i++) free(names[i]);
  free(names);
  return res;
}

MSCCLPP_API mscclppResult_t mscclppPlanRegisterDir(mscclppComm_t comm, const char* dir, int* registered) {
  if (comm == NULL || dir == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_COLL, "mscclppPlanRegisterDir: NULL %s",
                      comm == NULL ? "comm" : "dir");
  int n = 0;
  mscclppResult_t res = registerDir(comm, dir, "mscclppPlanRegisterDir", &n);
  if (registered != NULL) *registered = n;
  return res;
}

void mscclppCollPlanLoadCache(struct mscclppComm* comm) {
  if (comm->params.cacheDir[0] == '\0') return;
  struct mscclppPlanRegistry* reg = NULL;
  if (registryOf(comm, &reg) != mscclppSuccess || reg->cacheLoaded) return;
  reg->cacheLoaded = 1;
  int n = 0;
  if (registerDir(comm, comm->params.cacheDir, "MSCCLPP_CACHE_DIR", &n) != mscclppSuccess) return; /* logged */
  MSCCLPP_INFO(MSCCLPP_LOG_COLL, "rank %d: MSCCLPP_CACHE_DIR=%s: %d execution plans registered", comm->rank,
               comm->params.cacheDir, n);
}

/* ---- selection and runs ------------------------------------------------------------ */

/* Is call `a` in place, in the NCCL positions of its collective (mscclpp/coll.h)? */
static int callInPlace(const struct mscclppComm* comm, const struct mscclppCollArgs* a) {
  const uint8_t* s = (const uint8_t*)a->send;
  const uint8_t* r = (const uint8_t*)a->recv;
  size_t block = a->count * a->typeSize;
  switch (a->kind) {
    case MSCCLPP_COLL_ALLGATHER:
      return s == r + (size_t)comm->rank * block;
    case MSCCLPP_COLL_REDUCESCATTER:
      return r == s + (size_t)comm->rank * block;
    default:
      return s == r;
  }
}

/* The backends with an executor of plans: the host backend's (CPU threads
 * play the thread blocks) and the GPU backend's (one kernel). */
static int backendRunsPlans(mscclppCollBackend backend) {
  return backend == MSCCLPP_COLL_BACKEND_HOST || backend == MSCCLPP_COLL_BACKEND_GPU;
}

/* Why `plan` cannot run `a` on comm's `backend` ("" when it can), for
 * mscclppCollPlanCheck's messages and the pick. */
static const char* mismatch(struct mscclppComm* comm, const struct mscclppPlan* plan, const struct mscclppCollArgs* a,
                            mscclppCollBackend backend, char* why, size_t len) {
  why[0] = '\0';
  if (!backendRunsPlans(backend))
    snprintf(why, len,
             "rank %d runs collectives on the %s backend, which has no executor of execution plans yet (the "
             "host and GPU backends have one)",
             comm->rank, mscclppCollBackendName(backend));
  else if (comm->localNranks != comm->nranks)
    snprintf(why, len,
             "execution plans run on communicators within one host; this one spans hosts (%d of %d ranks "
             "here)",
             comm->localNranks, comm->nranks);
  else if (plan->nranks != comm->nranks)
    snprintf(why, len, "execution plan %s is for %d ranks; the communicator has %d", plan->name, plan->nranks,
             comm->nranks);
  else if (mscclppCollPlanKind(plan) != a->kind)
    snprintf(why, len, "execution plan %s is a %s plan", plan->name, mscclppPlanCollectiveName(plan->collective));
  else if (callInPlace(comm, a) != plan->inplace)
    snprintf(why, len, "execution plan %s runs %s calls; this call is %s", plan->name,
             plan->inplace ? "in-place" : "out-of-place", plan->inplace ? "out-of-place" : "in-place");
  else if (!mscclppPlanAcceptsBytes(plan, comm->nranks, (uint64_t)a->count * a->typeSize))
    snprintf(why, len, "execution plan %s takes messages of %llu to %llu bytes (%s); this call's is %llu", plan->name,
             (unsigned long long)plan->minMessageBytes, (unsigned long long)plan->maxMessageBytes,
             plan->collective == MSCCLPP_PLAN_ALLGATHER ? "the output's bytes" : "the input's bytes",
             (unsigned long long)mscclppPlanMessageBytes(plan, comm->nranks, (uint64_t)a->count * a->typeSize));
  else if (backend == MSCCLPP_COLL_BACKEND_GPU && mscclppPlanGpuRefusal(comm, plan, why, len)[0] != '\0')
    return why;
  else if (plan->pipelineUnitGcd != 0 && plan->pipelineUnitGcd % a->typeSize != 0)
    snprintf(why, len, "execution plan %s pipelines in units of %u bytes, which do not hold whole %zu-byte elements",
             plan->name, plan->pipelineUnitGcd, a->typeSize);
  return why;
}

struct mscclppPlan* mscclppCollPlanPick(struct mscclppComm* comm, const struct mscclppCollArgs* a,
                                        mscclppCollBackend backend) {
  struct mscclppPlanRegistry* reg = comm->coll != NULL ? comm->coll->plans : NULL;
  if (reg == NULL || !backendRunsPlans(backend)) return NULL;
  char why[512];
  for (int i = 0; i < reg->n; i++)
    if (reg->e[i].registered && mismatch(comm, reg->e[i].plan, a, backend, why, sizeof(why))[0] == '\0')
      return reg->e[i].plan;
  return NULL;
}

mscclppResult_t mscclppCollPlanCheck(const char* fn, struct mscclppComm* comm, const struct mscclppCollArgs* a) {
  mscclppCollBackend backend = mscclppCollSelectBackend(comm, a->kind, MSCCLPP_COLL_ALGO_AUTO);
  char why[512];
  if (mismatch(comm, a->plan, a, backend, why, sizeof(why))[0] == '\0') return mscclppSuccess;
  return mscclppErr(backendRunsPlans(backend) ? mscclppInvalidArgument : mscclppInvalidUsage, MSCCLPP_LOG_COLL,
                    "%s on rank %d: %s", fn, comm->rank, why);
}

mscclppResult_t mscclppCollPlanRun(struct mscclppComm* comm, struct mscclppPlan* plan, const struct mscclppCollArgs* a,
                                   mscclppCollBackend backend) {
  if (!backendRunsPlans(backend))
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_COLL,
                      "execution plan %s on rank %d: the %s backend has no executor of execution plans yet", plan->name,
                      comm->rank, mscclppCollBackendName(backend));
  struct mscclppPlanRegistry* reg = NULL;
  MSCCLPP_RETURN_ON_ERROR(registryOf(comm, &reg));
  struct mscclppPlanEntry* e = entryOf(reg, plan);
  if (e == NULL) MSCCLPP_RETURN_ON_ERROR(entryAdd(reg, plan, &e));
  mscclppResult_t res;
  if (backend == MSCCLPP_COLL_BACKEND_GPU) {
    int ctxId = e->gpu == NULL ? reg->nextCtxId : -1;
    res = mscclppPlanGpuRun(comm, &e->gpu, ctxId, plan, a);
    if (ctxId >= 0 && e->gpu != NULL) reg->nextCtxId++;
  } else {
    int ctxId = e->host == NULL ? reg->nextCtxId : -1;
    res = mscclppPlanHostRun(comm, &e->host, ctxId, plan, a);
    if (ctxId >= 0 && e->host != NULL) reg->nextCtxId++;
  }
  if (res == mscclppSuccess) e->runs++;
  return res;
}
