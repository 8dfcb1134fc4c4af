/* SPDX-License-Identifier: MIT */
/*
 * The selection table (select.h): what each collective has, how
 * MSCCLPP_ALGO is read, and the rules that pick a backend and an algorithm.
 */
#include "coll/select.h"

#include <stdio.h>
#include <string.h>

#include "coll/coll.h"
#include "coll/gpu/coll_gpu.h"
#include "core/error.h"
#include "core/log.h"
#include "gpu/gpu_ipc.h"

static const char* const algoNames[MSCCLPP_COLL_ALGOS] = {
    [MSCCLPP_COLL_ALGO_AUTO] = "auto",   [MSCCLPP_COLL_ALGO_PACKET] = "packet", [MSCCLPP_COLL_ALGO_PACKET2] = "packet2",
    [MSCCLPP_COLL_ALGO_RSAG] = "rsag",   [MSCCLPP_COLL_ALGO_DIRECT] = "direct", [MSCCLPP_COLL_ALGO_HIER] = "hier",
    [MSCCLPP_COLL_ALGO_FLAT] = "flat",   [MSCCLPP_COLL_ALGO_PORT] = "port",     [MSCCLPP_COLL_ALGO_PLAN] = "plan"};

/* Each collective and the algorithms some backend implements for it, as
 * MSCCLPP_ALGO names them (mscclppCollAlgoNames returns `algos`). The host
 * backend has one algorithm per collective and takes every call whatever
 * is forced; the GPU backend implements the rest (coll/gpu/coll_gpu.h,
 * coll/port/coll_port.h); hier and flat are allreduce's two ways across
 * hosts, chosen in mscclppCollDispatch. All-to-all has its own row like
 * every collective; each backend runs it in place too (staging the input).
 * All-to-all-v has no port algorithm: the GPU backend runs it on one host
 * only (mscclppCollDispatch refuses the port family for it). "plan" is a
 * registered execution plan (coll/plan/), for the collectives plans
 * implement: with nothing forced a matching plan runs before the rules
 * pick; forcing plan only keeps the other algorithms out. */
static const struct {
  const char* name;
  const char* algos;
} kinds[MSCCLPP_COLL_KINDS] = {
    [MSCCLPP_COLL_ALLREDUCE] = {"allreduce", "packet,packet2,rsag,hier,flat,port,plan"},
    [MSCCLPP_COLL_ALLGATHER] = {"allgather", "packet,direct,port,plan"},
    [MSCCLPP_COLL_REDUCESCATTER] = {"reducescatter", "packet,direct,port,plan"},
    [MSCCLPP_COLL_BROADCAST] = {"broadcast", "direct,port"},
    [MSCCLPP_COLL_REDUCE] = {"reduce", "direct,port"},
    [MSCCLPP_COLL_ALLTOALL] = {"alltoall", "packet,direct,port,plan"},
    [MSCCLPP_COLL_SENDRECV] = {"sendrecv", "direct,port"},
    [MSCCLPP_COLL_ALLTOALLV] = {"alltoallv", "direct"},
};

static const char* const backendNames[MSCCLPP_COLL_BACKENDS] = {[MSCCLPP_COLL_BACKEND_HOST] = "host",
                                           [MSCCLPP_COLL_BACKEND_GPU] = "gpu",
                                           [MSCCLPP_COLL_BACKEND_PORT] = "gpu over port channels",
                                           [MSCCLPP_COLL_BACKEND_HIER] = "hierarchical (on child communicators)"};

const char* mscclppCollKindName(mscclppCollKind kind) {
  return (unsigned)kind < MSCCLPP_COLL_KINDS ? kinds[kind].name : "unknown";
}

const char* mscclppCollAlgoName(mscclppCollAlgo algo) {
  return (unsigned)algo < MSCCLPP_COLL_ALGOS ? algoNames[algo] : "unknown";
}

const char* mscclppCollBackendName(mscclppCollBackend backend) {
  return (unsigned)backend < MSCCLPP_COLL_BACKENDS ? backendNames[backend] : "unknown";
}

const char* mscclppCollAlgoNames(const char* coll) {
  if (coll == NULL) return NULL;
  for (int k = 0; k < MSCCLPP_COLL_KINDS; k++)
    if (strcmp(coll, kinds[k].name) == 0) return kinds[k].algos;
  return NULL;
}

/* The algorithm `name` (len bytes) when collective k has it, else AUTO. */
static mscclppCollAlgo algoOf(int k, const char* name, size_t len) {
  for (const char* n = kinds[k].algos; *n != '\0';) {
    const char* ne = strchr(n, ',');
    size_t nl = ne != NULL ? (size_t)(ne - n) : strlen(n);
    if (nl == len && memcmp(n, name, len) == 0)
      for (int a = 1; a < MSCCLPP_COLL_ALGOS; a++)
        if (strlen(algoNames[a]) == len && memcmp(algoNames[a], name, len) == 0) return (mscclppCollAlgo)a;
    n += nl + (ne != NULL);
  }
  return MSCCLPP_COLL_ALGO_AUTO;
}

/* Parse `text` into sel (forced[], or parseError and parseWhy). */
static void parse(struct mscclppCollSelect* sel, const char* text) {
  memset(sel, 0, sizeof(*sel));
  snprintf(sel->text, sizeof(sel->text), "%s", text);
  sel->parsed = 1;
  for (const char* s = sel->text; *s != '\0';) {
    const char* end = strchr(s, ',');
    size_t len = end != NULL ? (size_t)(end - s) : strlen(s);
    const char* eq = memchr(s, '=', len);
    if (eq == NULL) {
      snprintf(sel->parseWhy, sizeof(sel->parseWhy), "MSCCLPP_ALGO=\"%s\": entry \"%.*s\" is not collective=algorithm",
               sel->text, (int)len, s);
      sel->parseError = mscclppInvalidArgument;
      return;
    }
    size_t klen = (size_t)(eq - s), alen = len - klen - 1;
    int k = -1;
    for (int i = 0; i < MSCCLPP_COLL_KINDS; i++)
      if (strlen(kinds[i].name) == klen && memcmp(kinds[i].name, s, klen) == 0) k = i;
    if (k < 0) {
      snprintf(sel->parseWhy, sizeof(sel->parseWhy),
               "MSCCLPP_ALGO=\"%s\": unknown collective \"%.*s\" (allreduce, allgather, reducescatter, broadcast, "
               "reduce, alltoall, sendrecv, alltoallv)",
               sel->text, (int)klen, s);
      sel->parseError = mscclppInvalidArgument;
      return;
    }
    mscclppCollAlgo a = algoOf(k, eq + 1, alen);
    if (a == MSCCLPP_COLL_ALGO_AUTO) {
      snprintf(sel->parseWhy, sizeof(sel->parseWhy), "MSCCLPP_ALGO=\"%s\": %s has no algorithm \"%.*s\" (it has: %s)",
               sel->text, kinds[k].name, (int)alen, eq + 1, kinds[k].algos);
      sel->parseError = mscclppInvalidArgument;
      return;
    }
    sel->forced[k] = (uint8_t)a;
    s += len + (end != NULL);
  }
}

/* The communicator's selection with MSCCLPP_ALGO parsed (again when it
 * changed); NULL when the state cannot be made. */
static struct mscclppCollSelect* selectionOf(struct mscclppComm* comm) {
  struct mscclppCollState* st = NULL;
  if (mscclppCollStateOf(comm, &st) != mscclppSuccess) return NULL;
  struct mscclppCollSelect* sel = &st->select;
  if (!sel->parsed || strcmp(sel->text, comm->params.algo) != 0) parse(sel, comm->params.algo);
  return sel;
}

int mscclppCollSelectParses(struct mscclppComm* comm) {
  struct mscclppCollSelect* sel = selectionOf(comm);
  return sel != NULL && sel->parseError == mscclppSuccess;
}

mscclppResult_t mscclppCollSelectForced(struct mscclppComm* comm, mscclppCollKind kind, mscclppCollAlgo* algo) {
  struct mscclppCollSelect* sel = selectionOf(comm);
  if (sel == NULL) return mscclppErrAgain(mscclppSystemError, MSCCLPP_LOG_COLL, "%s", mscclppGetLastError());
  if (sel->parseError != mscclppSuccess) return mscclppErr(sel->parseError, MSCCLPP_LOG_COLL, "%s", sel->parseWhy);
  *algo = (unsigned)kind < MSCCLPP_COLL_KINDS ? (mscclppCollAlgo)sel->forced[kind] : MSCCLPP_COLL_ALGO_AUTO;
  return mscclppSuccess;
}

static int spansHosts(const struct mscclppComm* comm) { return comm->localNranks != comm->nranks; }

int mscclppCollSelectHier(const struct mscclppComm* comm, mscclppCollKind kind, mscclppCollAlgo forced) {
  /* On the H200 with 4 ranks as 2 pretend hosts the hierarchy took less
   * time than the flat path at every size measured (bench/RESULTS.md,
   * "mscclpp-perf", the pretend-host column; bench/HISTORY.md, "The
   * hierarchical allreduce on GPUs: found and fixed"): the default on both
   * backends. */
  return kind == MSCCLPP_COLL_ALLREDUCE && spansHosts(comm) &&
         (forced == MSCCLPP_COLL_ALGO_AUTO || forced == MSCCLPP_COLL_ALGO_HIER);
}

mscclppCollBackend mscclppCollSelectBackend(const struct mscclppComm* comm, mscclppCollKind kind,
                                            mscclppCollAlgo forced) {
  (void)kind;
#ifdef MSCCLPP_HAVE_CUDA
  if (!mscclppGpuIpcAvailable()) return MSCCLPP_COLL_BACKEND_HOST;
  if (spansHosts(comm) || forced == MSCCLPP_COLL_ALGO_PORT) return MSCCLPP_COLL_BACKEND_PORT;
  return MSCCLPP_COLL_BACKEND_GPU;
#else
  (void)comm;
  (void)forced;
  return MSCCLPP_COLL_BACKEND_HOST;
#endif
}

/* Bytes of input up to which allreduce uses LL packets rather than the
 * direct kernel (two barriers): where the two cross on the H200 (bench_coll's
 * "by algorithm" table with a packet grid of SMs / ranks sharing the GPU:
 * bench/HISTORY.md, "Collectives: packet grids"). Packets cost k-1 remote
 * writes of twice the data per rank, so the crossing comes earlier with more
 * ranks. */
static uint64_t packetMaxBytes(int nranks) {
  return nranks <= 2 ? (512u << 10) : nranks <= 4 ? (256u << 10) : (64u << 10);
}

/* Two-phase packets for 3-4 ranks, from the one-shot's reach to here: on
 * the H200 with 4 ranks packet2 beat both the one-shot packets and rsag at
 * 512 KiB; at 256 KiB it did not win in every run, so the one-shot keeps
 * it, and at 1 MiB rsag is faster (bench_coll's algorithm table:
 * bench/HISTORY.md, "Collectives: a two-phase packet allreduce for 3-4
 * ranks"). Two ranks: packet2 never wins; more than 4: not measured. */
#define PACKET2_MAX_BYTES ((uint64_t)512 << 10)
_Static_assert(PACKET2_MAX_BYTES <= MSCCLPP_COLL_GPU_LL2_MAX_BYTES, "the two-phase slots hold the message");

mscclppCollAlgo mscclppCollSelectGpuAllreduce(struct mscclppComm* comm, mscclppCollAlgo forced, int k,
                                              uint64_t bytes) {
  if (forced == MSCCLPP_COLL_ALGO_PACKET || forced == MSCCLPP_COLL_ALGO_RSAG) return forced;
  if (forced == MSCCLPP_COLL_ALGO_PACKET2) {
    if (bytes <= MSCCLPP_COLL_GPU_LL2_MAX_BYTES) return forced;
    struct mscclppCollState* st = comm->coll; /* made by mscclppCollSelectForced before any backend runs */
    if (st != NULL && !st->select.packet2FallbackTold) {
      st->select.packet2FallbackTold = 1;
      MSCCLPP_INFO(MSCCLPP_LOG_COLL,
                   "rank %d: MSCCLPP_ALGO=allreduce=packet2 serves up to %llu bytes per rank; a call of %llu bytes "
                   "takes the size rule's algorithm (said once)",
                   comm->rank, (unsigned long long)MSCCLPP_COLL_GPU_LL2_MAX_BYTES, (unsigned long long)bytes);
    }
  }
  if (bytes <= packetMaxBytes(k)) return MSCCLPP_COLL_ALGO_PACKET;
  if (k > 2 && k <= 4 && bytes <= PACKET2_MAX_BYTES) return MSCCLPP_COLL_ALGO_PACKET2;
  return MSCCLPP_COLL_ALGO_RSAG;
}

/* Allgather, reduce-scatter and all-to-all as one step of LL packets
 * (coll_gpu_packet.cu), up to the block size (what one rank sends one
 * peer: `bytes`, count x type size) at which allreduce stops using them:
 * then every slot of a rank receives per call what it receives from an
 * allreduce at its limit, in as many rounds, on the same grid, and every
 * peer sends it as much. The direct kernel these replace costs two barrier
 * round trips whatever the size: all-to-all 5.7-6.1 us with 2 ranks from
 * 1 KiB to 512 KiB in all, 7.4-8.5 with 4 (bench/RESULTS.md), above the
 * packet allreduce's 2.8-5.4 and 4.2-9.2 us at the same bytes per peer
 * (bench/HISTORY.md, "Collectives: packet grids"). The copies move half
 * the bytes of the packets, so their crossing may come earlier than the
 * allreduce's; not yet measured (bench_coll / mscclpp-perf with
 * MSCCLPP_ALGO=<collective>=packet and =direct). The goal, issue 23: no
 * slower than the one-shot allreduce from 8 B to 256 KiB (nccl-tests'
 * size: the larger buffer, nranks blocks), which this covers for up to 8
 * ranks. Forced, packets serve any size (chunked through the slots). */
static mscclppCollAlgo selectGpuPacketColl(mscclppCollAlgo forced, int k, uint64_t bytes) {
  if (forced == MSCCLPP_COLL_ALGO_PACKET || forced == MSCCLPP_COLL_ALGO_DIRECT) return forced;
  return bytes <= packetMaxBytes(k) ? MSCCLPP_COLL_ALGO_PACKET : MSCCLPP_COLL_ALGO_DIRECT;
}

mscclppCollAlgo mscclppCollSelectGpu(struct mscclppComm* comm, mscclppCollKind kind, mscclppCollAlgo forced, int k,
                                     uint64_t bytes) {
  switch (kind) {
    case MSCCLPP_COLL_ALLREDUCE:
      return mscclppCollSelectGpuAllreduce(comm, forced, k, bytes);
    case MSCCLPP_COLL_ALLGATHER:
    case MSCCLPP_COLL_REDUCESCATTER:
    case MSCCLPP_COLL_ALLTOALL:
      return selectGpuPacketColl(forced, k, bytes);
    default:
      return MSCCLPP_COLL_ALGO_DIRECT;
  }
}

/* c such that bytes is in (2^(c-1), 2^c]; 0 for 0 and 1 byte. */
static int sizeClass(uint64_t bytes) { return bytes <= 1 ? 0 : 64 - __builtin_clzll(bytes - 1); }

static void printBytes(char* buf, size_t len, uint64_t b) {
  if (b >= (1u << 30) && b % (1u << 30) == 0)
    snprintf(buf, len, "%llu GiB", (unsigned long long)(b >> 30));
  else if (b >= (1u << 20) && b % (1u << 20) == 0)
    snprintf(buf, len, "%llu MiB", (unsigned long long)(b >> 20));
  else if (b >= (1u << 10) && b % (1u << 10) == 0)
    snprintf(buf, len, "%llu KiB", (unsigned long long)(b >> 10));
  else
    snprintf(buf, len, "%llu bytes", (unsigned long long)b);
}

int mscclppCollSelectPlans(mscclppCollKind kind, mscclppCollAlgo forced) {
  return (kind == MSCCLPP_COLL_ALLREDUCE || kind == MSCCLPP_COLL_ALLGATHER || kind == MSCCLPP_COLL_REDUCESCATTER ||
          kind == MSCCLPP_COLL_ALLTOALL) &&
         (forced == MSCCLPP_COLL_ALGO_AUTO || forced == MSCCLPP_COLL_ALGO_PLAN);
}

void mscclppCollSelectPlanFallback(struct mscclppComm* comm, mscclppCollKind kind, uint64_t bytes) {
  struct mscclppCollState* st = comm->coll; /* made by mscclppCollSelectForced before any backend runs */
  if (st == NULL || (unsigned)kind >= MSCCLPP_COLL_KINDS || st->select.planFallbackTold[kind]) return;
  st->select.planFallbackTold[kind] = 1;
  MSCCLPP_INFO(MSCCLPP_LOG_COLL,
               "rank %d: MSCCLPP_ALGO=%s=plan, but no registered execution plan matches a call of %llu bytes per "
               "rank on %d ranks: the rules pick (said once)",
               comm->rank, kinds[kind].name, (unsigned long long)bytes, comm->nranks);
}

void mscclppCollSelectTell(struct mscclppComm* comm, mscclppCollKind kind, uint64_t bytes,
                           mscclppCollBackend backend, mscclppCollAlgo algo, const char* planName) {
  struct mscclppCollState* st = comm->coll;
  if (st == NULL || (unsigned)kind >= MSCCLPP_COLL_KINDS || !mscclppLogEnabled(MSCCLPP_LOG_LEVEL_INFO, MSCCLPP_LOG_COLL))
    return;
  int c = sizeClass(bytes);
  uint64_t bit = (uint64_t)1 << (c < 63 ? c : 63);
  if (st->select.told[kind] & bit) return;
  st->select.told[kind] |= bit;
  char lo[32], hi[32];
  printBytes(lo, sizeof(lo), c == 0 ? 0 : (uint64_t)1 << (c - 1));
  printBytes(hi, sizeof(hi), (uint64_t)1 << c);
  char what[MSCCLPP_PARAM_STR_MAX];
  if (algo == MSCCLPP_COLL_ALGO_PLAN) snprintf(what, sizeof(what), "execution plan \"%s\"", planName ? planName : "?");
  else if (algo == MSCCLPP_COLL_ALGO_AUTO) snprintf(what, sizeof(what), "its one algorithm");
  else snprintf(what, sizeof(what), "algorithm %s", mscclppCollAlgoName(algo));
  MSCCLPP_INFO(MSCCLPP_LOG_COLL, "rank %d: %s of %llu bytes per rank: %s backend, %s (said once for (%s, %s])",
               comm->rank, kinds[kind].name, (unsigned long long)bytes, mscclppCollBackendName(backend), what, lo, hi);
}
