/* SPDX-License-Identifier: MIT */
/*
 * The fallback: MSCCLPP_NCCL_FALLBACK=/path/libnccl.so.2 loads a real NCCL
 * (dlopen, RTLD_LOCAL | RTLD_DEEPBIND, so that its own calls stay inside it
 * even though this library defines the same names). Each communicator then
 * also gets a real NCCL communicator of the same ranks (rank 0 makes the
 * real id and sends it over the mscclpp bootstrap), and operations named in
 * MSCCLPP_NCCL_FALLBACK_OPS, or that mscclpp refuses as unsupported, run
 * there. The library stays loaded for the process's life (one path per
 * process).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"
#include "core/log.h"
#include "core/params.h"
#include "nccl/nccl_internal.h"

#define TAG_FALLBACK_ID 0x6e460000

struct mscclppNcclFallback {
  void* handle;
  char path[MSCCLPP_PARAM_STR_MAX];
  int version;
  ncclResult_t (*getUniqueId)(ncclUniqueId*);
  ncclResult_t (*commInitRank)(void**, int, ncclUniqueId, int);
  ncclResult_t (*commDestroy)(void*);
  ncclResult_t (*commAbort)(void*);
  const char* (*getErrorString)(ncclResult_t);
  const char* (*getLastError)(void*);
  ncclResult_t (*groupStart)(void);
  ncclResult_t (*groupEnd)(void);
  ncclResult_t (*allReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, void*, cudaStream_t);
  ncclResult_t (*allGather)(const void*, void*, size_t, ncclDataType_t, void*, cudaStream_t);
  ncclResult_t (*reduceScatter)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, void*, cudaStream_t);
  ncclResult_t (*broadcast)(const void*, void*, size_t, ncclDataType_t, int, void*, cudaStream_t);
  ncclResult_t (*reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int, void*, cudaStream_t);
  ncclResult_t (*alltoAll)(const void*, void*, size_t, ncclDataType_t, void*, cudaStream_t);
  ncclResult_t (*gather)(const void*, void*, size_t, ncclDataType_t, int, void*, cudaStream_t);
  ncclResult_t (*scatter)(const void*, void*, size_t, ncclDataType_t, int, void*, cudaStream_t);
  ncclResult_t (*send)(const void*, size_t, ncclDataType_t, int, void*, cudaStream_t);
  ncclResult_t (*recv)(void*, size_t, ncclDataType_t, int, void*, cudaStream_t);
};

static pthread_mutex_t fbLock = PTHREAD_MUTEX_INITIALIZER;
static struct mscclppNcclFallback fb;
static int fbLoaded;

/* dlsym into a function pointer without casting between pointer kinds. */
#define FB_SYM(field, name) \
  do {                                                \
    void* s_ = dlsym(fb.handle, name);                \
    memcpy(&fb.field, &s_, sizeof(s_));               \
  } while (0)

static ncclResult_t loadLocked(const char* path) {
  if (fbLoaded) {
    if (strcmp(fb.path, path) != 0)
      return mscclppNcclErr(ncclInvalidUsage, "MSCCLPP_NCCL_FALLBACK=%s, but %s is already loaded (one per process)",
                            path, fb.path);
    return ncclSuccess;
  }
  (void)dlerror();
  /* AddressSanitizer refuses RTLD_DEEPBIND (it would bypass its
   * interceptors), so sanitized builds load without it. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
#else
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
#endif
  if (h == NULL) {
    const char* why = dlerror();
    return mscclppNcclErr(ncclInvalidArgument, "MSCCLPP_NCCL_FALLBACK=%s: cannot load it: %s", path, why ? why : "?");
  }
  void* theirs = dlsym(h, "ncclGetVersion");
  ncclResult_t (*ourGetVersion)(int*) = ncclGetVersion;
  void* ours;
  memcpy(&ours, &ourGetVersion, sizeof(ours));
  if (theirs == NULL || theirs == ours) {
    dlclose(h);
    return mscclppNcclErr(ncclInvalidArgument,
                          "MSCCLPP_NCCL_FALLBACK=%s is %s: give the full path of NVIDIA's libnccl.so.2", path,
                          theirs == NULL ? "not an NCCL library (no ncclGetVersion)" : "this library itself");
  }
  memset(&fb, 0, sizeof(fb));
  fb.handle = h;
  snprintf(fb.path, sizeof(fb.path), "%s", path);
  ncclResult_t (*getVersion)(int*);
  memcpy(&getVersion, &theirs, sizeof(theirs));
  if (getVersion(&fb.version) != ncclSuccess) fb.version = 0;
  FB_SYM(getUniqueId, "ncclGetUniqueId");
  FB_SYM(commInitRank, "ncclCommInitRank");
  FB_SYM(commDestroy, "ncclCommDestroy");
  FB_SYM(commAbort, "ncclCommAbort");
  FB_SYM(getErrorString, "ncclGetErrorString");
  FB_SYM(getLastError, "ncclGetLastError");
  FB_SYM(groupStart, "ncclGroupStart");
  FB_SYM(groupEnd, "ncclGroupEnd");
  FB_SYM(allReduce, "ncclAllReduce");
  FB_SYM(allGather, "ncclAllGather");
  FB_SYM(reduceScatter, "ncclReduceScatter");
  FB_SYM(broadcast, "ncclBroadcast");
  FB_SYM(reduce, "ncclReduce");
  FB_SYM(alltoAll, "ncclAlltoAll");
  FB_SYM(gather, "ncclGather");
  FB_SYM(scatter, "ncclScatter");
  FB_SYM(send, "ncclSend");
  FB_SYM(recv, "ncclRecv");
  if (fb.getUniqueId == NULL || fb.commInitRank == NULL || fb.commDestroy == NULL || fb.groupStart == NULL ||
      fb.groupEnd == NULL) {
    dlclose(h);
    memset(&fb, 0, sizeof(fb));
    return mscclppNcclErr(ncclInvalidArgument, "MSCCLPP_NCCL_FALLBACK=%s lacks ncclGetUniqueId/ncclCommInitRank/...",
                          path);
  }
  fbLoaded = 1;
  MSCCLPP_INFO(MSCCLPP_LOG_NCCL, "fallback NCCL %d loaded from %s", fb.version, path);
  return ncclSuccess;
}

ncclResult_t mscclppNcclFallbackGet(const struct mscclppNcclFallback** out) {
  *out = NULL;
  const char* path = mscclppParamValueText("MSCCLPP_NCCL_FALLBACK");
  if (path == NULL || path[0] == '\0') return ncclSuccess;
  pthread_mutex_lock(&fbLock);
  ncclResult_t res = loadLocked(path);
  pthread_mutex_unlock(&fbLock);
  if (res == ncclSuccess) *out = &fb;
  return res;
}

void* mscclppNcclFallbackSymbol(const char* name) {
  pthread_mutex_lock(&fbLock);
  void* s = fbLoaded ? dlsym(fb.handle, name) : NULL;
  pthread_mutex_unlock(&fbLock);
  return s;
}

ncclResult_t mscclppNcclFallbackParseOps(const char* list, unsigned* bits) {
  static const struct {
    const char* name;
    unsigned bits;
  } names[] = {{"allreduce", MSCCLPP_NCCL_FB_ALLREDUCE},
               {"allgather", MSCCLPP_NCCL_FB_ALLGATHER},
               {"reducescatter", MSCCLPP_NCCL_FB_REDUCESCATTER},
               {"broadcast", MSCCLPP_NCCL_FB_BROADCAST},
               {"bcast", MSCCLPP_NCCL_FB_BROADCAST},
               {"reduce", MSCCLPP_NCCL_FB_REDUCE},
               {"alltoall", MSCCLPP_NCCL_FB_ALLTOALL},
               {"gather", MSCCLPP_NCCL_FB_GATHER},
               {"scatter", MSCCLPP_NCCL_FB_SCATTER},
               {"sendrecv", MSCCLPP_NCCL_FB_SENDRECV},
               {"send", MSCCLPP_NCCL_FB_SENDRECV},
               {"recv", MSCCLPP_NCCL_FB_SENDRECV},
               {"all", ~0u}};
  *bits = 0;
  const char* s = list;
  while (s != NULL && *s != '\0') {
    const char* end = strchr(s, ',');
    size_t len = end != NULL ? (size_t)(end - s) : strlen(s);
    while (len > 0 && (*s == ' ')) {
      s++;
      len--;
    }
    while (len > 0 && s[len - 1] == ' ') len--;
    if (len > 0) {
      int found = 0;
      for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && !found; i++)
        if (strlen(names[i].name) == len && strncasecmp(names[i].name, s, len) == 0) {
          *bits |= names[i].bits;
          found = 1;
        }
      if (!found)
        return mscclppNcclErr(ncclInvalidArgument,
                              "MSCCLPP_NCCL_FALLBACK_OPS=\"%s\": unknown operation \"%.*s\" (allreduce, allgather, "
                              "reducescatter, broadcast, reduce, alltoall, gather, scatter, sendrecv, all)",
                              list, (int)len, s);
    }
    s = end != NULL ? end + 1 : NULL;
  }
  if (*bits == ~0u) *bits = (1u << MSCCLPP_NCCL_OP_KINDS) - 1;
  return ncclSuccess;
}

ncclResult_t mscclppNcclFallbackCommCreate(struct ncclComm* comm) {
  const struct mscclppNcclFallback* f = NULL;
  ncclResult_t res = mscclppNcclFallbackGet(&f);
  if (res != ncclSuccess || f == NULL) return res;
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  ncclResult_t made = ncclSuccess;
  if (comm->rank == 0) made = f->getUniqueId(&id);
  /* everyone learns whether rank 0 made an id, and which */
  struct {
    int status;
    ncclUniqueId id;
  } msg;
  memset(&msg, 0, sizeof(msg));
  msg.status = made;
  msg.id = id;
  for (int r = 1; r < comm->nranks; r++) {
    mscclppResult_t m = comm->rank == 0 ? mscclppBootstrapSend(comm->mc, r, TAG_FALLBACK_ID, &msg, sizeof(msg))
                                        : (r == comm->rank
                                               ? mscclppBootstrapRecv(comm->mc, 0, TAG_FALLBACK_ID, &msg, sizeof(msg))
                                               : mscclppSuccess);
    if (m != mscclppSuccess) return mscclppNcclFromMscclpp(m);
  }
  if (msg.status != ncclSuccess)
    return mscclppNcclErr((ncclResult_t)msg.status, "fallback NCCL %s: ncclGetUniqueId failed on rank 0: %s", f->path,
                          f->getErrorString ? f->getErrorString((ncclResult_t)msg.status) : "?");
  void* real = NULL;
  res = f->commInitRank(&real, comm->nranks, msg.id, comm->rank);
  if (res != ncclSuccess)
    return mscclppNcclErr(res, "fallback NCCL %s: ncclCommInitRank (rank %d of %d) failed: %s: %s", f->path, comm->rank,
                          comm->nranks, f->getErrorString ? f->getErrorString(res) : "?",
                          f->getLastError ? f->getLastError(NULL) : "");
  comm->real = real;
  return ncclSuccess;
}

void mscclppNcclFallbackCommDestroy(struct ncclComm* comm, int abort) {
  if (comm->real == NULL) return;
  if (abort && fb.commAbort != NULL)
    (void)fb.commAbort(comm->real);
  else
    (void)fb.commDestroy(comm->real);
  comm->real = NULL;
}

ncclResult_t mscclppNcclFallbackGroup(int start) {
  if (!fbLoaded) return ncclSuccess;
  return start ? fb.groupStart() : fb.groupEnd();
}

ncclResult_t mscclppNcclFallbackRun(const struct mscclppNcclOp* o) {
  void* rc = o->comm->real;
  if (rc == NULL || !fbLoaded)
    return mscclppNcclErr(ncclInvalidUsage, "%s: no fallback NCCL communicator (MSCCLPP_NCCL_FALLBACK)",
                          mscclppNcclOpNames[o->kind]);
  int have = 0;
  ncclResult_t res = ncclInternalError;
  switch (o->kind) {
    case MSCCLPP_NCCL_OP_ALLREDUCE:
      if ((have = fb.allReduce != NULL))
        res = fb.allReduce(o->send, o->recv, o->count, o->type, o->op, rc, o->stream);
      break;
    case MSCCLPP_NCCL_OP_ALLGATHER:
      if ((have = fb.allGather != NULL)) res = fb.allGather(o->send, o->recv, o->count, o->type, rc, o->stream);
      break;
    case MSCCLPP_NCCL_OP_REDUCESCATTER:
      if ((have = fb.reduceScatter != NULL))
        res = fb.reduceScatter(o->send, o->recv, o->count, o->type, o->op, rc, o->stream);
      break;
    case MSCCLPP_NCCL_OP_BROADCAST:
      if ((have = fb.broadcast != NULL))
        res = fb.broadcast(o->send, o->recv, o->count, o->type, o->root, rc, o->stream);
      break;
    case MSCCLPP_NCCL_OP_REDUCE:
      if ((have = fb.reduce != NULL))
        res = fb.reduce(o->send, o->recv, o->count, o->type, o->op, o->root, rc, o->stream);
      break;
    case MSCCLPP_NCCL_OP_ALLTOALL:
      if ((have = fb.alltoAll != NULL)) res = fb.alltoAll(o->send, o->recv, o->count, o->type, rc, o->stream);
      break;
    case MSCCLPP_NCCL_OP_GATHER:
      if ((have = fb.gather != NULL))
        res = fb.gather(o->send, o->recv, o->count, o->type, o->root, rc, o->stream);
      break;
    case MSCCLPP_NCCL_OP_SCATTER:
      if ((have = fb.scatter != NULL))
        res = fb.scatter(o->send, o->recv, o->count, o->type, o->root, rc, o->stream);
      break;
    case MSCCLPP_NCCL_OP_SEND:
      if ((have = fb.send != NULL)) res = fb.send(o->send, o->count, o->type, o->root, rc, o->stream);
      break;
    case MSCCLPP_NCCL_OP_RECV:
      if ((have = fb.recv != NULL)) res = fb.recv(o->recv, o->count, o->type, o->root, rc, o->stream);
      break;
    default: break;
  }
  if (!have)
    return mscclppNcclErr(ncclInvalidUsage, "%s: the fallback NCCL (%s, version %d) does not have it",
                          mscclppNcclOpNames[o->kind], fb.path, fb.version);
  if (res != ncclSuccess && res != ncclInProgress)
    return mscclppNcclErr(res, "%s on the fallback NCCL failed: %s", mscclppNcclOpNames[o->kind],
                          fb.getLastError ? fb.getLastError(rc) : "");
  return res;
}
