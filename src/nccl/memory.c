/* SPDX-License-Identifier: MIT */
/*
 * ncclMemAlloc / ncclMemFree (cudaMalloc on the current device; zeroed,
 * page-aligned host memory without a GPU), and buffer and window
 * registrations. mscclpp's collectives take any buffer (they map or stage
 * it themselves), so a registration is a record of the range that the
 * deregistration checks and frees.
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "coll/coll.h"
#include "gpu/gpu_ipc.h"
#include "nccl/nccl_internal.h"

#ifdef MSCCLPP_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#define REG_MAGIC 0x6e63636c72656700ull

/* What ncclMemAlloc handed out (to refuse foreign pointers in ncclMemFree). */
struct allocation {
  void* ptr;
  int onGpu;
  struct allocation* next;
};
static pthread_mutex_t allocLock = PTHREAD_MUTEX_INITIALIZER;
static struct allocation* allocations;

ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  static const char fn[] = "ncclMemAlloc";
  if (ptr == NULL) return mscclppNcclErr(ncclInvalidArgument, "%s: ptr is NULL", fn);
  if (size == 0) return mscclppNcclErr(ncclInvalidArgument, "%s: size is 0", fn);
  struct allocation* a = (struct allocation*)calloc(1, sizeof(*a));
  if (a == NULL) return mscclppNcclErr(ncclSystemError, "%s: out of memory", fn);
  void* p = NULL;
  if (mscclppGpuIpcAvailable()) {
#ifdef MSCCLPP_HAVE_CUDA
    cudaError_t e = cudaMalloc(&p, size);
    if (e != cudaSuccess) {
      free(a);
      return mscclppNcclErr(ncclUnhandledCudaError, "%s: cudaMalloc(%zu) failed: %s", fn, size, cudaGetErrorString(e));
    }
    a->onGpu = 1;
#endif
  } else {
    size_t rounded = (size + 4095) / 4096 * 4096;
    p = aligned_alloc(4096, rounded);
    if (p == NULL) {
      free(a);
      return mscclppNcclErr(ncclSystemError, "%s: out of host memory for %zu bytes", fn, size);
    }
    memset(p, 0, rounded);
  }
  a->ptr = p;
  pthread_mutex_lock(&allocLock);
  a->next = allocations;
  allocations = a;
  pthread_mutex_unlock(&allocLock);
  *ptr = p;
  return ncclSuccess;
}
NCCL_PROFILING_ALIAS(ncclMemAlloc);

ncclResult_t ncclMemFree(void* ptr) {
  if (ptr == NULL) return ncclSuccess;
  pthread_mutex_lock(&allocLock);
  struct allocation** pp = &allocations;
  while (*pp != NULL && (*pp)->ptr != ptr) pp = &(*pp)->next;
  struct allocation* a = *pp;
  if (a != NULL) *pp = a->next;
  pthread_mutex_unlock(&allocLock);
  if (a == NULL) return mscclppNcclErr(ncclInvalidArgument, "ncclMemFree: %p was not returned by ncclMemAlloc", ptr);
  if (a->onGpu) {
#ifdef MSCCLPP_HAVE_CUDA
    cudaError_t e = cudaFree(ptr);
    free(a);
    if (e != cudaSuccess)
      return mscclppNcclErr(ncclUnhandledCudaError, "ncclMemFree: cudaFree(%p) failed: %s", ptr, cudaGetErrorString(e));
    return ncclSuccess;
#endif
  }
  free(ptr);
  free(a);
  return ncclSuccess;
}
NCCL_PROFILING_ALIAS(ncclMemFree);

/* ---- registrations ------------------------------------------------------------------ */

static ncclResult_t regAdd(struct ncclComm* comm, void* buff, size_t size, int isWindow, int winFlags,
                           struct mscclppNcclRegistration** out, const char* fn) {
  ncclResult_t res = mscclppNcclCommReady(comm, fn);
  if (res != ncclSuccess) return res;
  if (buff == NULL) return mscclppNcclErr(ncclInvalidArgument, "%s: buff is NULL", fn);
  if (size == 0) return mscclppNcclErr(ncclInvalidArgument, "%s: size is 0", fn);
  struct mscclppNcclRegistration* r = (struct mscclppNcclRegistration*)calloc(1, sizeof(*r));
  if (r == NULL) return mscclppNcclErr(ncclSystemError, "%s: out of memory", fn);
  r->magic = REG_MAGIC;
  r->comm = comm;
  r->buff = buff;
  r->size = size;
  r->isWindow = isWindow;
  r->winFlags = winFlags;
  pthread_mutex_lock(&comm->lock);
  r->next = comm->regs;
  comm->regs = r;
  pthread_mutex_unlock(&comm->lock);
  /* Zero-copy needs no registration (peers map a buffer's allocation at
   * its first use, coll/gpu/coll_gpu_export.c); this maps it now, so the
   * first call on it asks nothing. Not collective: it needs only the
   * peers' library threads, as NCCL's local registration needs only its
   * proxy's. */
  /* A hint only: where it fails, the first call on the buffer decides
   * again (it stages what cannot be shared) and reports what fails there. */
  if (mscclppCollGpuExportHint(comm->mc, buff) != mscclppSuccess)
    MSCCLPP_INFO(MSCCLPP_LOG_NCCL, "%s: [%p, +%zu): the peers do not map it in advance: %s", fn, buff, size,
                 mscclppGetLastError());
  MSCCLPP_TRACE(MSCCLPP_LOG_NCCL, "%s: [%p, +%zu) recorded, its allocation mapped by the peers", fn, buff, size);
  *out = r;
  return ncclSuccess;
}

static ncclResult_t regRemove(struct ncclComm* comm, void* handle, int isWindow, const char* fn) {
  ncclResult_t res = mscclppNcclCommCheck(comm, fn);
  if (res != ncclSuccess) return res;
  if (handle == NULL) return mscclppNcclErr(ncclInvalidArgument, "%s: handle is NULL", fn);
  pthread_mutex_lock(&comm->lock);
  struct mscclppNcclRegistration** pp = &comm->regs;
  while (*pp != NULL && (void*)*pp != handle) pp = &(*pp)->next;
  struct mscclppNcclRegistration* r = *pp;
  if (r != NULL && r->isWindow == isWindow) *pp = r->next;
  pthread_mutex_unlock(&comm->lock);
  if (r == NULL || r->isWindow != isWindow)
    return mscclppNcclErr(ncclInvalidArgument, "%s: %p is not a %s of this communicator", fn, handle,
                          isWindow ? "window" : "registration");
  r->magic = 0;
  free(r);
  return ncclSuccess;
}

ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  if (handle == NULL) return mscclppNcclErr(ncclInvalidArgument, "ncclCommRegister: handle is NULL");
  struct mscclppNcclRegistration* r = NULL;
  ncclResult_t res = regAdd(comm, buff, size, 0, 0, &r, "ncclCommRegister");
  if (res == ncclSuccess) *handle = r;
  return res;
}
NCCL_PROFILING_ALIAS(ncclCommRegister);

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  return regRemove(comm, handle, 0, "ncclCommDeregister");
}
NCCL_PROFILING_ALIAS(ncclCommDeregister);

ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags) {
  if (win == NULL) return mscclppNcclErr(ncclInvalidArgument, "ncclCommWindowRegister: win is NULL");
  if (winFlags & ~(NCCL_WIN_COLL_SYMMETRIC))
    return mscclppNcclErr(ncclInvalidArgument, "ncclCommWindowRegister: unknown winFlags 0x%x", winFlags);
  struct mscclppNcclRegistration* r = NULL;
  ncclResult_t res = regAdd(comm, buff, size, 1, winFlags, &r, "ncclCommWindowRegister");
  if (res == ncclSuccess) *win = (ncclWindow_t)(void*)r;
  return res;
}
NCCL_PROFILING_ALIAS(ncclCommWindowRegister);

ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  return regRemove(comm, (void*)win, 1, "ncclCommWindowDeregister");
}
NCCL_PROFILING_ALIAS(ncclCommWindowDeregister);
