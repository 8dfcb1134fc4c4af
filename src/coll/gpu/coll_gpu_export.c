/* SPDX-License-Identifier: MIT */
/*
 * Zero-copy ("direct") algorithms need every rank's buffers mapped in every
 * other rank, and NCCL's contract forbids a call to wait for a peer's
 * application thread to learn them (docs/DESIGN.md, Contracts). So each
 * rank runs an export service: a thread that maps, in its own process, the
 * allocations its peers ask it to (cudaIpcOpenMemHandle) and answers with
 * the address it got. A rank that uses an allocation for the first time
 * with a peer asks that peer's service (one bootstrap round trip, served
 * whatever the peer's application is doing) and caches the answer; later
 * calls on the allocation ask nothing. The kernels then trade the mapped
 * addresses at their first barrier (coll_gpu_direct.cu), so no host
 * learns, or waits for, a peer's buffers of a call.
 *
 * The service's mappings are keyed by (peer, allocation id): the driver's
 * buffer id is unique for the process's life, so an address reused by a new
 * allocation is never mistaken for the old one. A mapping of an older
 * allocation at the same address is retired when the new one comes: its
 * owner freed it after its last call, whose kernels had passed their final
 * barrier with ours, so nothing here uses it any more. The service does not
 * close it: closing a CUDA IPC mapping waits for every kernel of the
 * process, and a kernel of this rank may be waiting for the very peer whose
 * request the service is serving (a deadlock, seen on the H100). The
 * application thread closes retired mappings when this rank's kernels are
 * done (coll_gpu.c); the new allocation maps beside the old mapping.
 *
 * The bootstrap hands the requests to a handler (on its reading thread),
 * which queues them for the service thread: opening a mapping and sending
 * the answer may take a while and must not hold up the bootstrap.
 *
 * The protocol (service, requests, caches) is built without CUDA too, with
 * the mapping done by operations the caller gives: tests play it with CPU
 * processes (tests/coll/export_worker.c). Only describing this rank's
 * buffers and the default operations (CUDA IPC) need CUDA.
 */

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "coll/gpu/coll_gpu_state.h"
#include "core/error.h"
#include "core/log.h"
#include "gpu/gpu.h"
#include "gpu/gpu_ipc.h"

#define EXPORT_MAGIC 0x4d585052u /* "MXPR" */

struct exportRequest {
  uint32_t magic;
  uint32_t async; /* 1: answer on MSCCLPP_COLL_GPU_TAG_EXPORT_ASYNC (nobody waits for it) */
  uint64_t reqId;
  uint64_t id;   /* the allocation's buffer id in the asking rank */
  uint64_t base; /* its address there */
  uint8_t handle[MSCCLPP_GPU_IPC_HANDLE_BYTES];
};

struct exportReply {
  uint32_t magic;
  int32_t status; /* mscclppResult_t */
  uint64_t reqId;
  uint64_t id;
  uint64_t mapped; /* where the service's process maps it */
  char why[160];
};

struct queued {
  int peer;
  struct exportRequest req;
};

struct exportAnswer {
  int peer;
  int32_t status;
  uint64_t id;
  uint64_t mapped;
};

struct mscclppCollGpuService {
  struct mscclppComm* comm;
  struct mscclppCollGpuMapOps ops;
  int device;
  int rank;
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int stop;
  struct queued* q; /* ring */
  int qHead, qCount, qCap;
  /* mappings replaced by newer ones, for the application thread to close
   * (under lock; nretiredHint is read without it) */
  void** retired;
  int nretired, capRetired;
  atomic_int nretiredHint;
  /* answers to this rank's requests nobody waits for (under lock;
   * nanswersHint is read without it) */
  struct exportAnswer* answers;
  int nanswers, capAnswers;
  atomic_int nanswersHint;
  /* the service thread's only */
  struct openEntry* open;
  int nopen;
};

/* ---- the service (this rank maps its peers' allocations) --------------------------- */

/* On the bootstrap's reading thread: queue the request, never block. */
static void onRequest(void* arg, int peer, const void* data, size_t size) {
  struct mscclppCollGpuService* s = (struct mscclppCollGpuService*)arg;
  struct exportRequest req;
  if (size != sizeof(req)) {
    MSCCLPP_WARN(MSCCLPP_LOG_COLL, "rank %d: a %zu-byte export request from rank %d (expected %zu): ignored", s->rank,
                 size, peer, sizeof(req));
    return;
  }
  memcpy(&req, data, sizeof(req));
  if (req.magic != EXPORT_MAGIC) {
    MSCCLPP_WARN(MSCCLPP_LOG_COLL, "rank %d: an export request from rank %d with a bad magic number: ignored", s->rank,
                 peer);
    return;
  }
  pthread_mutex_lock(&s->lock);
  if (s->qCount == s->qCap) { /* grow (requests are few: one per new allocation and peer) */
    int cap = s->qCap ? 2 * s->qCap : 16;
    struct queued* n = (struct queued*)malloc((size_t)cap * sizeof(*n));
    if (n == NULL) {
      pthread_mutex_unlock(&s->lock);
      MSCCLPP_WARN(MSCCLPP_LOG_COLL, "rank %d: out of memory queueing rank %d's export request", s->rank, peer);
      return;
    }
    for (int i = 0; i < s->qCount; i++) n[i] = s->q[(s->qHead + i) % s->qCap];
    free(s->q);
    s->q = n;
    s->qCap = cap;
    s->qHead = 0;
  }
  struct queued* e = &s->q[(s->qHead + s->qCount) % s->qCap];
  e->peer = peer;
  e->req = req;
  s->qCount++;
  pthread_cond_signal(&s->cond);
  pthread_mutex_unlock(&s->lock);
}

/* On the bootstrap's reading thread: an answer to a request of this rank
 * that nobody waits for, kept for mscclppCollGpuExportCollect. */
static void onAsyncAnswer(void* arg, int peer, const void* data, size_t size) {
  struct mscclppCollGpuService* s = (struct mscclppCollGpuService*)arg;
  struct exportReply rep;
  if (size != sizeof(rep)) {
    MSCCLPP_WARN(MSCCLPP_LOG_COLL, "rank %d: a %zu-byte export answer from rank %d (expected %zu): ignored", s->rank,
                 size, peer, sizeof(rep));
    return;
  }
  memcpy(&rep, data, sizeof(rep));
  if (rep.magic != EXPORT_MAGIC) {
    MSCCLPP_WARN(MSCCLPP_LOG_COLL, "rank %d: an export answer from rank %d with a bad magic number: ignored", s->rank,
                 peer);
    return;
  }
  if (rep.status != mscclppSuccess) {
    rep.why[sizeof(rep.why) - 1] = '\0';
    MSCCLPP_INFO(MSCCLPP_LOG_COLL, "rank %d cannot map rank %d's buffer (send/recv goes through the scratch): %s",
                 peer, s->rank, rep.why);
  }
  pthread_mutex_lock(&s->lock);
  if (s->nanswers == s->capAnswers) {
    int cap = s->capAnswers ? 2 * s->capAnswers : 16;
    struct exportAnswer* n = (struct exportAnswer*)realloc(s->answers, (size_t)cap * sizeof(*n));
    if (n == NULL) { /* the allocation stays "asked": send/recv keeps the scratch for it */
      pthread_mutex_unlock(&s->lock);
      MSCCLPP_WARN(MSCCLPP_LOG_COLL, "rank %d: out of memory keeping rank %d's export answer", s->rank, peer);
      return;
    }
    s->answers = n;
    s->capAnswers = cap;
  }
  struct exportAnswer* a = &s->answers[s->nanswers++];
  a->peer = peer;
  a->status = rep.status;
  a->id = rep.id;
  a->mapped = rep.mapped;
  atomic_store_explicit(&s->nanswersHint, s->nanswers, memory_order_release);
  pthread_mutex_unlock(&s->lock);
}

/* Hand a replaced mapping to the application thread. */
static mscclppResult_t retire(struct mscclppCollGpuService* s, void* base) {
  pthread_mutex_lock(&s->lock);
  if (s->nretired == s->capRetired) {
    int cap = s->capRetired ? 2 * s->capRetired : 16;
    void** n = (void**)realloc(s->retired, (size_t)cap * sizeof(*n));
    if (n == NULL) {
      pthread_mutex_unlock(&s->lock);
      return mscclppErr(mscclppSystemError, MSCCLPP_LOG_COLL, "rank %d: out of memory retiring a peer's mapping",
                        s->rank);
    }
    s->retired = n;
    s->capRetired = cap;
  }
  s->retired[s->nretired++] = base;
  atomic_store_explicit(&s->nretiredHint, s->nretired, memory_order_relaxed);
  pthread_mutex_unlock(&s->lock);
  return mscclppSuccess;
}

int mscclppCollGpuServiceRetired(struct mscclppCollGpuService* s) {
  return s != NULL ? atomic_load_explicit(&s->nretiredHint, memory_order_relaxed) : 0;
}

mscclppResult_t mscclppCollGpuServiceTakeRetired(struct mscclppCollGpuService* s, void*** list, int* n) {
  pthread_mutex_lock(&s->lock);
  *list = s->retired;
  *n = s->nretired;
  s->retired = NULL;
  s->nretired = s->capRetired = 0;
  atomic_store_explicit(&s->nretiredHint, 0, memory_order_relaxed);
  pthread_mutex_unlock(&s->lock);
  return mscclppSuccess;
}

mscclppResult_t mscclppCollGpuServiceClose(struct mscclppCollGpuService* s, void* base) {
  return s->ops.close(s->ops.ctx, base);
}

/* Map peer's allocation here (or find its mapping). */
static mscclppResult_t mapPeer(struct mscclppCollGpuService* s, int peer, const struct exportRequest* r,
                               void** base) {
  for (int i = 0; i < s->nopen; i++)
    if (s->open[i].peer == peer && s->open[i].id == r->id) {
      *base = s->open[i].base;
      return mscclppSuccess;
    }
  for (int i = 0; i < s->nopen; i++) /* an older allocation at that address: retired (see the top) */
    if (s->open[i].peer == peer && s->open[i].peerBase == r->base) {
      MSCCLPP_RETURN_ON_ERROR(retire(s, s->open[i].base));
      s->open[i] = s->open[--s->nopen];
      break;
    }
  if (s->nopen == OPEN_CACHE_MAX)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_COLL,
                      "rank %d maps %d allocations of its peers, its most: register or reuse fewer buffers", s->rank,
                      OPEN_CACHE_MAX);
  MSCCLPP_RETURN_ON_ERROR(s->ops.open(s->ops.ctx, r->handle, base));
  s->open[s->nopen].peer = peer;
  s->open[s->nopen].id = r->id;
  s->open[s->nopen].peerBase = r->base;
  s->open[s->nopen].base = *base;
  s->nopen++;
  return mscclppSuccess;
}

static void serve(struct mscclppCollGpuService* s, const struct queued* e) {
  struct exportReply rep;
  memset(&rep, 0, sizeof(rep));
  rep.magic = EXPORT_MAGIC;
  rep.reqId = e->req.reqId;
  rep.id = e->req.id;
  void* base = NULL;
  mscclppResult_t res = mapPeer(s, e->peer, &e->req, &base);
  rep.status = (int32_t)res;
  rep.mapped = (uint64_t)(uintptr_t)base;
  if (res != mscclppSuccess) snprintf(rep.why, sizeof(rep.why), "%s", mscclppGetLastError());
  const int tag = e->req.async ? MSCCLPP_COLL_GPU_TAG_EXPORT_ASYNC : MSCCLPP_COLL_GPU_TAG_EXPORT_REPLY;
  if (mscclppBootstrapSend(s->comm, e->peer, tag, &rep, sizeof(rep)) != mscclppSuccess)
    MSCCLPP_WARN(MSCCLPP_LOG_COLL, "rank %d: cannot answer rank %d's export request: %s", s->rank, e->peer,
                 mscclppGetLastError());
}

static void* serviceMain(void* arg) {
  struct mscclppCollGpuService* s = (struct mscclppCollGpuService*)arg;
  pthread_setname_np(pthread_self(), "mscclpp-export");
  if (s->ops.threadStart != NULL) s->ops.threadStart(s->ops.ctx, s->device);
  pthread_mutex_lock(&s->lock);
  for (;;) {
    while (s->qCount == 0 && !s->stop) pthread_cond_wait(&s->cond, &s->lock);
    if (s->stop) break;
    struct queued e = s->q[s->qHead];
    s->qHead = (s->qHead + 1) % s->qCap;
    s->qCount--;
    pthread_mutex_unlock(&s->lock);
    serve(s, &e);
    pthread_mutex_lock(&s->lock);
  }
  pthread_mutex_unlock(&s->lock);
  for (int i = 0; i < s->nopen; i++) (void)s->ops.close(s->ops.ctx, s->open[i].base);
  s->nopen = 0;
  for (int i = 0; i < s->nretired; i++) (void)s->ops.close(s->ops.ctx, s->retired[i]);
  s->nretired = 0;
  return NULL;
}

#ifdef MSCCLPP_HAVE_CUDA
static void ipcThreadStart(void* ctx, int device) {
  (void)ctx;
  /* This thread's CUDA calls (opening and closing mappings) must not be
   * refused, nor break a capture, while the application captures a CUDA
   * graph in the global mode: a relaxed thread is exempt. */
  (void)mscclppGpuIpcCaptureRelax();
  if (mscclppGpuSetDevice(device) != mscclppSuccess)
    MSCCLPP_WARN(MSCCLPP_LOG_COLL, "the export service cannot use device %d: %s", device, mscclppGetLastError());
}
static mscclppResult_t ipcOpen(void* ctx, const uint8_t handle[MSCCLPP_GPU_IPC_HANDLE_BYTES], void** base) {
  (void)ctx;
  return mscclppGpuIpcOpenHandle(handle, base);
}
static mscclppResult_t ipcClose(void* ctx, void* base) {
  (void)ctx;
  return mscclppGpuIpcCloseHandle(base);
}
static const struct mscclppCollGpuMapOps ipcOps = {ipcThreadStart, ipcOpen, ipcClose, NULL};
#endif

mscclppResult_t mscclppCollGpuServiceStart(struct mscclppComm* comm, int device, const struct mscclppCollGpuMapOps* ops,
                                           struct mscclppCollGpuService** out) {
#ifdef MSCCLPP_HAVE_CUDA
  if (ops == NULL) ops = &ipcOps;
#endif
  if (ops == NULL || ops->open == NULL || ops->close == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_COLL, "the export service needs mapping operations");
  struct mscclppCollGpuService* s = (struct mscclppCollGpuService*)calloc(1, sizeof(*s));
  if (s == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_COLL, "out of memory");
  s->comm = comm;
  s->ops = *ops;
  s->device = device;
  s->rank = comm->rank;
  s->open = (struct openEntry*)calloc(OPEN_CACHE_MAX, sizeof(*s->open));
  if (s->open == NULL) {
    free(s);
    return mscclppErr(mscclppSystemError, MSCCLPP_LOG_COLL, "out of memory");
  }
  pthread_mutex_init(&s->lock, NULL);
  pthread_cond_init(&s->cond, NULL);
  int err = pthread_create(&s->thread, NULL, serviceMain, s);
  if (err != 0) {
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->lock);
    free(s->open);
    free(s);
    return mscclppErr(mscclppSystemError, MSCCLPP_LOG_COLL, "cannot start the export service thread: %s",
                      strerror(err));
  }
  *out = s;
  MSCCLPP_RETURN_ON_ERROR(mscclppBootstrapSetHandler(comm->bootstrap, MSCCLPP_COLL_GPU_TAG_EXPORT_ASYNC, onAsyncAnswer, s));
  return mscclppBootstrapSetHandler(comm->bootstrap, MSCCLPP_COLL_GPU_TAG_EXPORT, onRequest, s);
}

void mscclppCollGpuServiceStop(struct mscclppCollGpuService* s) {
  if (s == NULL) return;
  (void)mscclppBootstrapSetHandler(s->comm->bootstrap, MSCCLPP_COLL_GPU_TAG_EXPORT, NULL, NULL);
  (void)mscclppBootstrapSetHandler(s->comm->bootstrap, MSCCLPP_COLL_GPU_TAG_EXPORT_ASYNC, NULL, NULL);
  pthread_mutex_lock(&s->lock);
  s->stop = 1;
  pthread_cond_signal(&s->cond);
  pthread_mutex_unlock(&s->lock);
  pthread_join(s->thread, NULL); /* it closes its mappings */
  pthread_cond_destroy(&s->cond);
  pthread_mutex_destroy(&s->lock);
  free(s->q);
  free(s->open);
  free(s->retired);
  free(s->answers);
  free(s);
}

/* ---- this rank's allocations, as its peers map them ---------------------------------- */

#ifdef MSCCLPP_HAVE_CUDA
/* Describe a buffer of this rank for export, or say it must be staged. */
mscclppResult_t mscclppCollGpuDescribeOwn(struct mscclppCollGpu* g, const void* p, struct ownBuf* b, int* shareable) {
  struct mscclppGpuPtrInfo info;
  MSCCLPP_RETURN_ON_ERROR(mscclppGpuIpcQueryPointer(p, &info));
  /* cudaMalloc allocations under 2 MiB may share their 2 MiB block with
   * others, and CUDA IPC maps whole blocks: a second handle into an already
   * mapped block fails ("already mapped"). Such buffers are staged. */
  *shareable = info.type == MSCCLPP_GPU_PTR_DEVICE && info.device == g->device && info.bufferId != 0 &&
               info.allocSize >= STAGE_MIN_BYTES;
  if (!*shareable) return mscclppSuccess;
  b->id = info.bufferId;
  b->base = info.allocBase;
  b->offset = (uint64_t)((uintptr_t)p - info.allocBase);
  for (int i = 0; i < g->nown; i++)
    if (g->own[i].id == info.bufferId) {
      memcpy(b->handle, g->own[i].handle, sizeof(b->handle));
      return mscclppSuccess;
    }
  struct ownEntry* e = &g->own[g->ownNext];
  g->ownNext = (g->ownNext + 1) % OWN_CACHE;
  if (g->nown < OWN_CACHE) g->nown++;
  MSCCLPP_RETURN_ON_ERROR(mscclppGpuIpcGetHandle((void*)info.allocBase, e->handle));
  e->id = info.bufferId;
  memcpy(b->handle, e->handle, sizeof(b->handle));
  return mscclppSuccess;
}

#endif /* MSCCLPP_HAVE_CUDA */

static int exportedFind(const struct mscclppCollGpu* g, int peer, uint64_t id, uint64_t* mapped) {
  for (int i = 0; i < g->nexported[peer]; i++)
    if (g->exported[peer][i].id == id) {
      *mapped = g->exported[peer][i].mapped;
      return 1;
    }
  return 0;
}

/* Remember the answer (the oldest entry goes: asking again costs a round
 * trip, and the service finds its mapping). */
static void exportedAdd(struct mscclppCollGpu* g, int peer, uint64_t id, uint64_t mapped) {
  int i = g->nexported[peer] < EXPORT_CACHE ? g->nexported[peer]++ : g->exportNext[peer];
  if (g->nexported[peer] == EXPORT_CACHE) g->exportNext[peer] = (i + 1) % EXPORT_CACHE;
  g->exported[peer][i].id = id;
  g->exported[peer][i].mapped = mapped;
}

mscclppResult_t mscclppCollGpuExportMany(struct mscclppComm* comm, struct mscclppCollGpu* g, const struct ownBuf* b,
                                         int nb, uint64_t (*mapped)[MSCCLPP_COLL_GPU_MAX_RANKS]) {
  if (nb <= 0) return mscclppSuccess;
  if (nb > MSCCLPP_COLL_GPU_EXPORT_MAX)
    return mscclppErr(mscclppInternalError, MSCCLPP_LOG_COLL, "%d allocations exported at once (at most %d)", nb,
                      MSCCLPP_COLL_GPU_EXPORT_MAX);
  /* asked[k][p]: the request id rank p is to answer for b[k] (0: none) */
  uint64_t asked[MSCCLPP_COLL_GPU_EXPORT_MAX][MSCCLPP_COLL_GPU_MAX_RANKS];
  int same[MSCCLPP_COLL_GPU_EXPORT_MAX]; /* b[k] is the allocation of b[same[k]] (same[k] < k), or -1 */
  memset(asked, 0, sizeof(asked));
  const uint64_t first = g->exportSeq + 1;
  /* every question first, to every peer, then the answers: the peers map in
   * parallel, and one rank's requests in one round trip */
  for (int k = 0; k < nb; k++) {
    same[k] = -1;
    for (int j = 0; j < k && same[k] < 0; j++)
      if (b[j].id == b[k].id) same[k] = j;
    if (same[k] >= 0 || b[k].id == 0) continue;
    struct exportRequest req;
    memset(&req, 0, sizeof(req));
    req.magic = EXPORT_MAGIC;
    req.reqId = ++g->exportSeq;
    req.id = b[k].id;
    req.base = b[k].base;
    memcpy(req.handle, b[k].handle, sizeof(req.handle));
    for (int p = 0; p < g->nranks; p++) {
      if (p == g->rank || exportedFind(g, p, b[k].id, &mapped[k][p])) continue;
      MSCCLPP_RETURN_ON_ERROR(mscclppBootstrapSend(comm, p, MSCCLPP_COLL_GPU_TAG_EXPORT, &req, sizeof(req)));
      asked[k][p] = req.reqId;
    }
  }
  mscclppResult_t res = mscclppSuccess;
  for (int p = 0; p < g->nranks; p++) {
    for (int k = 0; k < nb; k++) { /* a peer's service answers in the order it was asked */
      if (asked[k][p] == 0) continue;
      struct exportReply rep;
      mscclppResult_t r;
      do /* an answer to an earlier request that failed here (a timeout) is stale */
        r = mscclppBootstrapRecv(comm, p, MSCCLPP_COLL_GPU_TAG_EXPORT_REPLY, &rep, sizeof(rep));
      while (r == mscclppSuccess && rep.magic == EXPORT_MAGIC && rep.reqId < first);
      if (r == mscclppSuccess && (rep.magic != EXPORT_MAGIC || rep.reqId != asked[k][p] || rep.id != b[k].id))
        r = mscclppErr(mscclppInternalError, MSCCLPP_LOG_COLL,
                       "rank %d: rank %d answered export request %llu with one for request %llu", g->rank, p,
                       (unsigned long long)asked[k][p], (unsigned long long)rep.reqId);
      else if (r == mscclppSuccess && rep.status != mscclppSuccess) {
        rep.why[sizeof(rep.why) - 1] = '\0';
        r = mscclppErr((mscclppResult_t)rep.status, MSCCLPP_LOG_COLL, "rank %d cannot map rank %d's buffer: %s", p,
                       g->rank, rep.why);
      }
      if (r == mscclppSuccess) {
        mapped[k][p] = rep.mapped;
        exportedAdd(g, p, b[k].id, rep.mapped);
      } else if (res == mscclppSuccess) {
        res = r; /* still read the other answers, so none is left behind */
      }
    }
  }
  for (int k = 0; k < nb; k++)
    if (same[k] >= 0) memcpy(mapped[k], mapped[same[k]], sizeof(mapped[k]));
  return res;
}

mscclppResult_t mscclppCollGpuExport(struct mscclppComm* comm, struct mscclppCollGpu* g, const struct ownBuf* b,
                                     uint64_t mapped[MSCCLPP_COLL_GPU_MAX_RANKS]) {
  uint64_t (*m)[MSCCLPP_COLL_GPU_MAX_RANKS] = (uint64_t (*)[MSCCLPP_COLL_GPU_MAX_RANKS])mapped;
  return mscclppCollGpuExportMany(comm, g, b, 1, m);
}

/* ---- mappings learned without waiting (send/recv) ------------------------------------ */

int mscclppCollGpuExportKnown(const struct mscclppCollGpu* g, int peer, uint64_t id, uint64_t* mapped) {
  return exportedFind(g, peer, id, mapped);
}

mscclppResult_t mscclppCollGpuExportAsk(struct mscclppComm* comm, struct mscclppCollGpu* g, const struct ownBuf* b,
                                        int peer) {
  uint64_t mapped = 0;
  if (b->id == 0 || peer == g->rank || exportedFind(g, peer, b->id, &mapped)) return mscclppSuccess;
  for (int i = 0; i < g->nasked; i++)
    if (g->asked[i].peer == peer && g->asked[i].id == b->id) return mscclppSuccess;
  if (g->nasked == ASK_MAX) { /* a refused one makes room; else asked later, once answers came */
    int i = 0;
    while (i < g->nasked && g->asked[i].state != 2) i++;
    if (i == g->nasked) return mscclppSuccess;
    g->asked[i] = g->asked[--g->nasked];
  }
  struct exportRequest req;
  memset(&req, 0, sizeof(req));
  req.magic = EXPORT_MAGIC;
  req.async = 1;
  req.reqId = ++g->exportSeq;
  req.id = b->id;
  req.base = b->base;
  memcpy(req.handle, b->handle, sizeof(req.handle));
  MSCCLPP_RETURN_ON_ERROR(mscclppBootstrapSend(comm, peer, MSCCLPP_COLL_GPU_TAG_EXPORT, &req, sizeof(req)));
  g->asked[g->nasked].peer = peer;
  g->asked[g->nasked].id = b->id;
  g->asked[g->nasked].state = 1;
  g->nasked++;
  return mscclppSuccess;
}

void mscclppCollGpuExportCollect(struct mscclppCollGpu* g) {
  struct mscclppCollGpuService* s = g->service;
  if (s == NULL || atomic_load_explicit(&s->nanswersHint, memory_order_acquire) == 0) return;
  pthread_mutex_lock(&s->lock);
  struct exportAnswer* list = s->answers;
  int n = s->nanswers;
  s->answers = NULL;
  s->nanswers = s->capAnswers = 0;
  atomic_store_explicit(&s->nanswersHint, 0, memory_order_relaxed);
  pthread_mutex_unlock(&s->lock);
  for (int k = 0; k < n; k++) {
    const struct exportAnswer* a = &list[k];
    int i = 0;
    while (i < g->nasked && !(g->asked[i].peer == a->peer && g->asked[i].id == a->id)) i++;
    if (a->status == mscclppSuccess) {
      exportedAdd(g, a->peer, a->id, a->mapped);
      if (i < g->nasked) g->asked[i] = g->asked[--g->nasked];
    } else if (i < g->nasked) {
      g->asked[i].state = 2; /* refused: through the scratch from now on */
    }
  }
  free(list);
}
