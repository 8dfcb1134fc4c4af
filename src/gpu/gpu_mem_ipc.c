/* SPDX-License-Identifier: MIT */
/* Shareable GPU memory (CUDA IPC handles, cuMem POSIX fds), host
 * registration and the CUDA IPC transport's stream. See gpu_ipc.h. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "core/log.h"
#include "core/params.h"
#include "core/util.h"
#include "gpu/gpu.h"
#include "gpu/gpu_ipc.h"
#include "gpu/gpu_stream.h"

#ifdef MSCCLPP_HAVE_CUDA
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#endif

int mscclppGpuIpcAvailable(void) { return mscclppGpuDeviceCount() > 0; }

#ifndef MSCCLPP_HAVE_CUDA

static mscclppResult_t noCuda(const char* what) {
  return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_GPU, "%s needs CUDA, but mscclpp was built without CUDA", what);
}

mscclppResult_t mscclppGpuIpcCurrentDevice(int* device) {
  (void)device;
  return noCuda("the current device");
}
mscclppResult_t mscclppGpuIpcQueryPointer(const void* ptr, struct mscclppGpuPtrInfo* info) {
  (void)ptr;
  memset(info, 0, sizeof(*info));
  info->type = MSCCLPP_GPU_PTR_HOST;
  info->device = -1;
  return mscclppSuccess;
}
mscclppResult_t mscclppGpuIpcMalloc(size_t size, void** ptr) {
  (void)size;
  (void)ptr;
  return noCuda("device memory (cudaMalloc)");
}
mscclppResult_t mscclppGpuIpcFree(void* ptr) {
  (void)ptr;
  return noCuda("cudaFree");
}
mscclppResult_t mscclppGpuIpcGetHandle(void* base, uint8_t handle[MSCCLPP_GPU_IPC_HANDLE_BYTES]) {
  (void)base;
  (void)handle;
  return noCuda("a CUDA IPC handle");
}
mscclppResult_t mscclppGpuIpcOpenHandle(const uint8_t handle[MSCCLPP_GPU_IPC_HANDLE_BYTES], void** base) {
  (void)handle;
  (void)base;
  return noCuda("opening a CUDA IPC handle");
}
mscclppResult_t mscclppGpuIpcCloseHandle(void* base) {
  (void)base;
  return noCuda("closing a CUDA IPC handle");
}
mscclppResult_t mscclppGpuCuMemAlloc(size_t size, void** ptr, size_t* allocSize) {
  (void)size;
  (void)ptr;
  (void)allocSize;
  return noCuda("cuMem memory");
}
mscclppResult_t mscclppGpuCuMemUnmap(void* ptr, size_t allocSize) {
  (void)ptr;
  (void)allocSize;
  return noCuda("cuMemUnmap");
}
mscclppResult_t mscclppGpuCuMemExportFd(void* base, int* fd) {
  (void)base;
  (void)fd;
  return noCuda("exporting cuMem memory");
}
mscclppResult_t mscclppGpuCuMemImportFd(int fd, size_t allocSize, void** ptr) {
  (void)fd;
  (void)allocSize;
  (void)ptr;
  return noCuda("importing cuMem memory");
}
mscclppResult_t mscclppGpuIpcHostRegister(void* ptr, size_t size, void** devPtr) {
  (void)ptr;
  (void)size;
  (void)devPtr;
  return noCuda("pinning host memory (cudaHostRegister)");
}
mscclppResult_t mscclppGpuIpcHostUnregister(void* ptr) {
  (void)ptr;
  return noCuda("cudaHostUnregister");
}
mscclppResult_t mscclppGpuIpcProcessStream(void** stream) {
  (void)stream;
  return noCuda("a CUDA stream");
}
mscclppResult_t mscclppGpuIpcStreamCreate(struct mscclppGpuIpcStream** stream) {
  (void)stream;
  return noCuda("a CUDA stream");
}
void mscclppGpuIpcStreamDestroy(struct mscclppGpuIpcStream* stream) { (void)stream; }
mscclppResult_t mscclppGpuIpcMemcpyAsync(struct mscclppGpuIpcStream* stream, void* dst, const void* src, size_t size) {
  (void)stream;
  (void)dst;
  (void)src;
  (void)size;
  return noCuda("cudaMemcpyAsync");
}
mscclppResult_t mscclppGpuIpcWriteValue64Async(struct mscclppGpuIpcStream* stream, void* dst, uint64_t value) {
  (void)stream;
  (void)dst;
  (void)value;
  return noCuda("a stream-ordered write");
}
int mscclppGpuIpcCaptureRelax(void) { return -1; }
void mscclppGpuIpcCaptureRestore(int mode) { (void)mode; }
mscclppResult_t mscclppGpuIpcZero(void* ptr, size_t size) {
  (void)ptr;
  (void)size;
  return noCuda("zeroing device memory");
}
mscclppResult_t mscclppGpuIpcWriteValuesAsync(struct mscclppGpuIpcStream* stream,
                                              const struct mscclppGpuStreamWrite* writes, int n) {
  (void)stream;
  (void)writes;
  (void)n;
  return noCuda("stream-ordered writes");
}
mscclppResult_t mscclppGpuIpcStreamQuery(struct mscclppGpuIpcStream* stream, int* done) {
  (void)stream;
  (void)done;
  return noCuda("cudaStreamQuery");
}

#else /* MSCCLPP_HAVE_CUDA */

/* ---- driver entry points (looked up once; immutable afterwards) ------------ */

struct driverApi {
  mscclppResult_t status; /* of the lookup */
  char why[160];
  PFN_cuGetErrorString_v6000 getErrorString;
  PFN_cuDeviceGet_v2000 deviceGet;
  PFN_cuDeviceGetAttribute_v2000 deviceGetAttribute;
  PFN_cuMemGetAddressRange_v3020 memGetAddressRange;
  PFN_cuPointerGetAttribute_v4000 pointerGetAttribute;
  PFN_cuMemRetainAllocationHandle_v11000 memRetainAllocationHandle;
  PFN_cuMemRelease_v10020 memRelease;
  PFN_cuMemCreate_v10020 memCreate;
  PFN_cuMemAddressReserve_v10020 memAddressReserve;
  PFN_cuMemAddressFree_v10020 memAddressFree;
  PFN_cuMemMap_v10020 memMap;
  PFN_cuMemUnmap_v10020 memUnmap;
  PFN_cuMemSetAccess_v10020 memSetAccess;
  PFN_cuMemGetAllocationGranularity_v10020 memGetAllocationGranularity;
  PFN_cuMemExportToShareableHandle_v10020 memExportToShareableHandle;
  PFN_cuMemImportFromShareableHandle_v10020 memImportFromShareableHandle;
  PFN_cuStreamWriteValue64_v11070 streamWriteValue64;
  PFN_cuStreamBatchMemOp_v11070 streamBatchMemOp;
};

static struct driverApi driver;
static pthread_once_t driverOnce = PTHREAD_ONCE_INIT;

/* The one conversion from the runtime's void* to a function pointer type
 * (as dlsym); the driver's ABI for `version` is what the typedef says. */
static int lookup(const char* name, void** fn) {
  enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  cudaError_t err = cudaGetDriverEntryPointByVersion(name, fn, 12000, cudaEnableDefault, &q);
  if (err != cudaSuccess || q != cudaDriverEntryPointSuccess || *fn == NULL) {
    (void)cudaGetLastError();
    snprintf(driver.why, sizeof(driver.why), "CUDA driver entry point %s not found (%s, query result %d)", name,
             cudaGetErrorString(err), (int)q);
    return 0;
  }
  return 1;
}

#define LOOKUP(field, name)                                        \
  do {                                                             \
    void* fn_ = NULL;                                              \
    if (!lookup(name, &fn_)) return;                               \
    memcpy(&driver.field, &fn_, sizeof(fn_));                      \
  } while (0)

static void driverLoad(void) {
  driver.status = mscclppUnhandledCudaError;
  if (!mscclppGpuIpcAvailable()) {
    driver.status = mscclppInvalidUsage;
    snprintf(driver.why, sizeof(driver.why), "no CUDA device or driver on this machine");
    return;
  }
  LOOKUP(getErrorString, "cuGetErrorString");
  LOOKUP(deviceGet, "cuDeviceGet");
  LOOKUP(deviceGetAttribute, "cuDeviceGetAttribute");
  LOOKUP(memGetAddressRange, "cuMemGetAddressRange");
  LOOKUP(pointerGetAttribute, "cuPointerGetAttribute");
  LOOKUP(memRetainAllocationHandle, "cuMemRetainAllocationHandle");
  LOOKUP(memRelease, "cuMemRelease");
  LOOKUP(memCreate, "cuMemCreate");
  LOOKUP(memAddressReserve, "cuMemAddressReserve");
  LOOKUP(memAddressFree, "cuMemAddressFree");
  LOOKUP(memMap, "cuMemMap");
  LOOKUP(memUnmap, "cuMemUnmap");
  LOOKUP(memSetAccess, "cuMemSetAccess");
  LOOKUP(memGetAllocationGranularity, "cuMemGetAllocationGranularity");
  LOOKUP(memExportToShareableHandle, "cuMemExportToShareableHandle");
  LOOKUP(memImportFromShareableHandle, "cuMemImportFromShareableHandle");
  LOOKUP(streamWriteValue64, "cuStreamWriteValue64");
  LOOKUP(streamBatchMemOp, "cuStreamBatchMemOp");
  driver.status = mscclppSuccess;
}

static mscclppResult_t driverGet(const struct driverApi** api) {
  pthread_once(&driverOnce, driverLoad);
  if (driver.status != mscclppSuccess) return mscclppErr(driver.status, MSCCLPP_LOG_GPU, "%s", driver.why);
  *api = &driver;
  return mscclppSuccess;
}

static const char* cuErrText(CUresult r) {
  const char* s = NULL;
  if (driver.getErrorString == NULL || driver.getErrorString(r, &s) != CUDA_SUCCESS || s == NULL) return "unknown";
  return s;
}

static mscclppResult_t cuFail(CUresult r, const char* what) {
  return mscclppErr(mscclppUnhandledCudaError, MSCCLPP_LOG_GPU, "%s: CUDA driver error %d (%s)", what, (int)r,
                    cuErrText(r));
}

static mscclppResult_t rtFail(cudaError_t err, const char* what) {
  (void)cudaGetLastError();
  return mscclppErr(mscclppUnhandledCudaError, MSCCLPP_LOG_GPU, "%s: %s", what, cudaGetErrorString(err));
}

static mscclppResult_t needGpu(const char* what) {
  if (mscclppGpuIpcAvailable()) return mscclppSuccess;
  return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_GPU, "%s needs a CUDA device, and this machine has none", what);
}

mscclppResult_t mscclppGpuIpcCurrentDevice(int* device) {
  MSCCLPP_RETURN_ON_ERROR(needGpu("the current device"));
  cudaError_t err = cudaGetDevice(device);
  if (err != cudaSuccess) return rtFail(err, "cudaGetDevice");
  return mscclppSuccess;
}

/* Make sure the current device has its primary context (the driver calls
 * below need one). */
static mscclppResult_t ensureContext(void) {
  cudaError_t err = cudaFree(NULL);
  if (err != cudaSuccess) return rtFail(err, "cudaFree(NULL) to create the device context");
  return mscclppSuccess;
}

mscclppResult_t mscclppGpuIpcQueryPointer(const void* ptr, struct mscclppGpuPtrInfo* info) {
  memset(info, 0, sizeof(*info));
  info->type = MSCCLPP_GPU_PTR_HOST;
  info->device = -1;
  if (!mscclppGpuIpcAvailable()) return mscclppSuccess;
  struct cudaPointerAttributes attr;
  memset(&attr, 0, sizeof(attr));
  cudaError_t err = cudaPointerGetAttributes(&attr, ptr);
  if (err != cudaSuccess) {
    /* Older drivers fail for memory they do not know: that is plain host memory. */
    (void)cudaGetLastError();
    return mscclppSuccess;
  }
  switch (attr.type) {
    case cudaMemoryTypeUnregistered:
      return mscclppSuccess;
    case cudaMemoryTypeHost:
      info->type = MSCCLPP_GPU_PTR_HOST_PINNED;
      return mscclppSuccess;
    case cudaMemoryTypeManaged:
      info->type = MSCCLPP_GPU_PTR_MANAGED;
      info->device = attr.device;
      return mscclppSuccess;
    case cudaMemoryTypeDevice:
      break;
    default:
      return mscclppErr(mscclppInternalError, MSCCLPP_LOG_GPU, "pointer %p has unknown CUDA memory type %d", ptr,
                        (int)attr.type);
  }
  const struct driverApi* d;
  MSCCLPP_RETURN_ON_ERROR(driverGet(&d));
  info->type = MSCCLPP_GPU_PTR_DEVICE;
  info->device = attr.device;
  CUdeviceptr base = 0;
  size_t size = 0;
  CUresult r = d->memGetAddressRange(&base, &size, (CUdeviceptr)(uintptr_t)ptr);
  if (r != CUDA_SUCCESS) return cuFail(r, "cuMemGetAddressRange");
  info->allocBase = (uintptr_t)base;
  info->allocSize = size;
  unsigned long long id = 0;
  r = d->pointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, (CUdeviceptr)(uintptr_t)ptr);
  if (r != CUDA_SUCCESS) return cuFail(r, "cuPointerGetAttribute(BUFFER_ID)");
  info->bufferId = (uint64_t)id;
  /* cudaMalloc memory is legacy-IPC capable; only ask cuMem about the rest, so
   * that no failing driver call is made (compute-sanitizer reports those). */
  int legacyIpc = 0;
  r = d->pointerGetAttribute(&legacyIpc, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, (CUdeviceptr)(uintptr_t)ptr);
  if (r == CUDA_SUCCESS && legacyIpc) return mscclppSuccess;
  CUmemGenericAllocationHandle h;
  r = d->memRetainAllocationHandle(&h, (void*)ptr);
  if (r == CUDA_SUCCESS) {
    info->type = MSCCLPP_GPU_PTR_DEVICE_CUMEM;
    (void)d->memRelease(h);
  }
  return mscclppSuccess;
}

/* ---- cudaMalloc memory ------------------------------------------------------ */

/* ---- the process's stream ----------------------------------------------------
 * Every stream the library needs on a device is this one, made at first use
 * and kept for the process's life. A GPU has a few hardware work queues per
 * process (CUDA_DEVICE_MAX_CONNECTIONS, fewer under MPS); streams are dealt
 * onto them round-robin as they are created, and work on a stream that
 * shares a queue with a kernel spinning on a semaphore waits for that
 * kernel to end (seen with a stream per connection: see the transport's
 * stream below). Each stream the library created (one per allocation to
 * zero, per FIFO, per transport) moved the round-robin on, so a later
 * transport copy could land on the queue of an application's kernel that
 * waits for it. One stream, made once, keeps the library's work on one
 * queue whatever it does later. */
/* The current device, as an index of the per-device tables below. */
static mscclppResult_t currentDeviceIndex(int* device) {
  MSCCLPP_RETURN_ON_ERROR(mscclppGpuIpcCurrentDevice(device));
  if (*device < 0 || *device >= MSCCLPP_GPU_MAX_DEVICES)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_GPU, "device %d: at most %d devices per process", *device,
                      MSCCLPP_GPU_MAX_DEVICES);
  return mscclppSuccess;
}

static pthread_mutex_t procLock = PTHREAD_MUTEX_INITIALIZER;
static cudaStream_t procStream[MSCCLPP_GPU_MAX_DEVICES];

mscclppResult_t mscclppGpuIpcProcessStream(void** stream) {
  int device = -1;
  MSCCLPP_RETURN_ON_ERROR(currentDeviceIndex(&device));
  pthread_mutex_lock(&procLock);
  if (procStream[device] == NULL) {
    /* the highest priority: the proxy's copies and stream writes are on
     * kernels' critical paths (a peer waits for them) */
    int prioLow = 0, prioHigh = 0;
    if (cudaDeviceGetStreamPriorityRange(&prioLow, &prioHigh) != cudaSuccess) {
      (void)cudaGetLastError();
      prioHigh = 0;
    }
    cudaError_t err = cudaStreamCreateWithPriority(&procStream[device], cudaStreamNonBlocking, prioHigh);
    if (err != cudaSuccess) {
      procStream[device] = NULL;
      pthread_mutex_unlock(&procLock);
      return rtFail(err, "cudaStreamCreateWithPriority");
    }
    MSCCLPP_INFO(MSCCLPP_LOG_GPU, "the library's stream on device %d (kept for the process's life)", device);
  }
  *stream = (void*)procStream[device];
  pthread_mutex_unlock(&procLock);
  return mscclppSuccess;
}

/* Zero memory no one else sees yet, on the process's non-blocking stream:
 * legal while a stream of this thread is being captured into a CUDA graph
 * (in relaxed mode; a collective's first call, which allocates its state,
 * may be captured), unlike cudaMemset on the legacy stream or
 * cudaDeviceSynchronize. That stream also carries the transports' copies,
 * so the wait is for an event behind the memset only, and bounded by
 * MSCCLPP_TIMEOUT. cudaEventQuery's "not ready" is cleared from the
 * runtime's last error each time (it would otherwise be reported by the
 * caller's next cudaGetLastError). Logs its failure. */
static mscclppResult_t zeroNew(void* p, size_t n, const char* what) {
  void* sp = NULL;
  MSCCLPP_RETURN_ON_ERROR(mscclppGpuIpcProcessStream(&sp));
  struct mscclppParams params;
  MSCCLPP_RETURN_ON_ERROR(mscclppParamsLoad(&params));
  cudaEvent_t ev;
  cudaError_t err = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
  if (err != cudaSuccess) return rtFail(err, what);
  err = cudaMemsetAsync(p, 0, n, (cudaStream_t)sp);
  if (err == cudaSuccess) err = cudaEventRecord(ev, (cudaStream_t)sp);
  mscclppDeadline deadline = mscclppDeadlineIn(params.timeout);
  while (err == cudaSuccess) {
    err = cudaEventQuery(ev);
    if (err != cudaErrorNotReady) break;
    (void)cudaGetLastError();
    err = cudaSuccess;
    if (mscclppDeadlinePassed(deadline)) {
      (void)cudaEventDestroy(ev);
      return mscclppErr(mscclppTimeout, MSCCLPP_LOG_GPU,
                        "%s: %zu bytes not zeroed within MSCCLPP_TIMEOUT=%g s (the library's stream is stuck)", what,
                        n, params.timeout);
    }
    struct timespec ts = {0, 2000};
    nanosleep(&ts, NULL);
  }
  (void)cudaEventDestroy(ev);
  return err == cudaSuccess ? mscclppSuccess : rtFail(err, what);
}

int mscclppGpuIpcCaptureRelax(void) {
  enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  if (cudaThreadExchangeStreamCaptureMode(&mode) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return (int)mode;
}

void mscclppGpuIpcCaptureRestore(int mode) {
  if (mode < 0) return;
  enum cudaStreamCaptureMode m = (enum cudaStreamCaptureMode)mode;
  (void)cudaThreadExchangeStreamCaptureMode(&m);
}

mscclppResult_t mscclppGpuIpcZero(void* ptr, size_t size) {
  return zeroNew(ptr, size, "zeroing new device memory");
}

mscclppResult_t mscclppGpuIpcMalloc(size_t size, void** ptr) {
  MSCCLPP_RETURN_ON_ERROR(needGpu("device memory (cudaMalloc)"));
  void* p = NULL;
  cudaError_t err = cudaMalloc(&p, size);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return mscclppErr(mscclppUnhandledCudaError, MSCCLPP_LOG_GPU, "cudaMalloc(%zu bytes): %s", size,
                      cudaGetErrorString(err));
  }
  mscclppResult_t res = zeroNew(p, size, "cudaMemset of new device memory");
  if (res != mscclppSuccess) {
    cudaFree(p);
    return res;
  }
  *ptr = p;
  return mscclppSuccess;
}

mscclppResult_t mscclppGpuIpcFree(void* ptr) {
  cudaError_t err = cudaFree(ptr);
  if (err != cudaSuccess) return rtFail(err, "cudaFree");
  return mscclppSuccess;
}

mscclppResult_t mscclppGpuIpcGetHandle(void* base, uint8_t handle[MSCCLPP_GPU_IPC_HANDLE_BYTES]) {
  _Static_assert(sizeof(cudaIpcMemHandle_t) == MSCCLPP_GPU_IPC_HANDLE_BYTES, "CUDA IPC handle size");
  cudaIpcMemHandle_t h;
  cudaError_t err = cudaIpcGetMemHandle(&h, base);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return mscclppErr(mscclppUnhandledCudaError, MSCCLPP_LOG_GPU,
                      "cudaIpcGetMemHandle(%p): %s (memory from cudaMallocAsync pools or other special allocators "
                      "cannot be shared this way)",
                      base, cudaGetErrorString(err));
  }
  memcpy(handle, &h, sizeof(h));
  return mscclppSuccess;
}

mscclppResult_t mscclppGpuIpcOpenHandle(const uint8_t handle[MSCCLPP_GPU_IPC_HANDLE_BYTES], void** base) {
  MSCCLPP_RETURN_ON_ERROR(needGpu("opening a CUDA IPC handle"));
  cudaIpcMemHandle_t h;
  memcpy(&h, handle, sizeof(h));
  void* p = NULL;
  cudaError_t err = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess);
  if (err != cudaSuccess) return rtFail(err, "cudaIpcOpenMemHandle");
  *base = p;
  return mscclppSuccess;
}

mscclppResult_t mscclppGpuIpcCloseHandle(void* base) {
  cudaError_t err = cudaIpcCloseMemHandle(base);
  if (err != cudaSuccess) return rtFail(err, "cudaIpcCloseMemHandle");
  return mscclppSuccess;
}

/* ---- cuMem memory ------------------------------------------------------------ */

static void cuMemProps(int device, CUmemAllocationProp* prop) {
  memset(prop, 0, sizeof(*prop));
  prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop->location.id = device;
  prop->requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
}

static mscclppResult_t cuMemGranularity(const struct driverApi* d, int device, size_t* gran) {
  CUmemAllocationProp prop;
  cuMemProps(device, &prop);
  CUresult r = d->memGetAllocationGranularity(gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
  if (r != CUDA_SUCCESS) return cuFail(r, "cuMemGetAllocationGranularity");
  if (*gran == 0) *gran = 2u << 20;
  return mscclppSuccess;
}

/* Reserve, map and open for read-write on `device`: the common tail of
 * allocation and import. Takes ownership of `h` (released on return). */
static mscclppResult_t cuMemMapHandle(const struct driverApi* d, CUmemGenericAllocationHandle h, int device,
                                      size_t size, size_t gran, void** ptr) {
  CUdeviceptr va = 0;
  CUresult r = d->memAddressReserve(&va, size, gran, 0, 0);
  if (r != CUDA_SUCCESS) {
    (void)d->memRelease(h);
    return cuFail(r, "cuMemAddressReserve");
  }
  r = d->memMap(va, size, 0, h, 0);
  if (r != CUDA_SUCCESS) {
    (void)d->memRelease(h);
    (void)d->memAddressFree(va, size);
    return cuFail(r, "cuMemMap");
  }
  (void)d->memRelease(h); /* the mapping keeps the memory */
  CUmemAccessDesc access;
  memset(&access, 0, sizeof(access));
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  r = d->memSetAccess(va, size, &access, 1);
  if (r != CUDA_SUCCESS) {
    (void)d->memUnmap(va, size);
    (void)d->memAddressFree(va, size);
    return cuFail(r, "cuMemSetAccess");
  }
  *ptr = (void*)(uintptr_t)va;
  return mscclppSuccess;
}

mscclppResult_t mscclppGpuCuMemAlloc(size_t size, void** ptr, size_t* allocSize) {
  const struct driverApi* d;
  MSCCLPP_RETURN_ON_ERROR(driverGet(&d));
  MSCCLPP_RETURN_ON_ERROR(ensureContext());
  int device = 0;
  MSCCLPP_RETURN_ON_ERROR(mscclppGpuIpcCurrentDevice(&device));
  CUdevice cuDev;
  CUresult r = d->deviceGet(&cuDev, device);
  if (r != CUDA_SUCCESS) return cuFail(r, "cuDeviceGet");
  int vmm = 0, fdOk = 0;
  (void)d->deviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, cuDev);
  (void)d->deviceGetAttribute(&fdOk, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, cuDev);
  if (!vmm || !fdOk)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_GPU,
                      "device %d does not support cuMem allocations exportable as file descriptors "
                      "(virtual memory management %d, POSIX fd handles %d)",
                      device, vmm, fdOk);
  size_t gran = 0;
  MSCCLPP_RETURN_ON_ERROR(cuMemGranularity(d, device, &gran));
  size_t rounded = (size + gran - 1) / gran * gran;
  CUmemAllocationProp prop;
  cuMemProps(device, &prop);
  CUmemGenericAllocationHandle h;
  r = d->memCreate(&h, rounded, &prop, 0);
  if (r != CUDA_SUCCESS) {
    char what[96];
    snprintf(what, sizeof(what), "cuMemCreate(%zu bytes on device %d)", rounded, device);
    return cuFail(r, what);
  }
  void* p = NULL;
  MSCCLPP_RETURN_ON_ERROR(cuMemMapHandle(d, h, device, rounded, gran, &p));
  mscclppResult_t res = zeroNew(p, rounded, "cudaMemset of new cuMem memory");
  if (res != mscclppSuccess) {
    (void)mscclppGpuCuMemUnmap(p, rounded);
    return res;
  }
  *ptr = p;
  *allocSize = rounded;
  return mscclppSuccess;
}

mscclppResult_t mscclppGpuCuMemUnmap(void* ptr, size_t allocSize) {
  const struct driverApi* d;
  MSCCLPP_RETURN_ON_ERROR(driverGet(&d));
  CUresult r = d->memUnmap((CUdeviceptr)(uintptr_t)ptr, allocSize);
  if (r != CUDA_SUCCESS) return cuFail(r, "cuMemUnmap");
  r = d->memAddressFree((CUdeviceptr)(uintptr_t)ptr, allocSize);
  if (r != CUDA_SUCCESS) return cuFail(r, "cuMemAddressFree");
  return mscclppSuccess;
}

mscclppResult_t mscclppGpuCuMemExportFd(void* base, int* fd) {
  const struct driverApi* d;
  MSCCLPP_RETURN_ON_ERROR(driverGet(&d));
  CUmemGenericAllocationHandle h;
  CUresult r = d->memRetainAllocationHandle(&h, base);
  if (r != CUDA_SUCCESS) return cuFail(r, "cuMemRetainAllocationHandle");
  int out = -1;
  r = d->memExportToShareableHandle(&out, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
  (void)d->memRelease(h);
  if (r != CUDA_SUCCESS)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_GPU,
                      "cuMem memory at %p cannot be exported as a file descriptor: CUDA driver error %d (%s); "
                      "create it with requestedHandleTypes including CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, "
                      "or allocate it with mscclppMemAlloc",
                      base, (int)r, cuErrText(r));
  *fd = out;
  return mscclppSuccess;
}

mscclppResult_t mscclppGpuCuMemImportFd(int fd, size_t allocSize, void** ptr) {
  const struct driverApi* d;
  MSCCLPP_RETURN_ON_ERROR(driverGet(&d));
  MSCCLPP_RETURN_ON_ERROR(ensureContext());
  int device = 0;
  MSCCLPP_RETURN_ON_ERROR(mscclppGpuIpcCurrentDevice(&device));
  size_t gran = 0;
  MSCCLPP_RETURN_ON_ERROR(cuMemGranularity(d, device, &gran));
  if (allocSize == 0 || allocSize % gran != 0)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_GPU,
                      "cuMem allocation size %zu is not a multiple of the granularity %zu", allocSize, gran);
  CUmemGenericAllocationHandle h;
  CUresult r = d->memImportFromShareableHandle(&h, (void*)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  if (r != CUDA_SUCCESS) return cuFail(r, "cuMemImportFromShareableHandle");
  return cuMemMapHandle(d, h, device, allocSize, gran, ptr);
}

/* ---- host memory ------------------------------------------------------------- */

mscclppResult_t mscclppGpuIpcHostRegister(void* ptr, size_t size, void** devPtr) {
  MSCCLPP_RETURN_ON_ERROR(needGpu("pinning host memory (cudaHostRegister)"));
  cudaError_t err = cudaHostRegister(ptr, size, cudaHostRegisterMapped | cudaHostRegisterPortable);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return mscclppErr(mscclppUnhandledCudaError, MSCCLPP_LOG_GPU, "cudaHostRegister(%p, %zu bytes): %s", ptr, size,
                      cudaGetErrorString(err));
  }
  void* d = NULL;
  err = cudaHostGetDevicePointer(&d, ptr, 0);
  if (err != cudaSuccess) {
    (void)cudaHostUnregister(ptr);
    return rtFail(err, "cudaHostGetDevicePointer");
  }
  *devPtr = d;
  return mscclppSuccess;
}

mscclppResult_t mscclppGpuIpcHostUnregister(void* ptr) {
  cudaError_t err = cudaHostUnregister(ptr);
  if (err != cudaSuccess) return rtFail(err, "cudaHostUnregister");
  return mscclppSuccess;
}

/* ---- the transport's stream --------------------------------------------------- */

/* The stream object (gpu_stream.h) of each device, made at first use and
 * kept for the process's life like the stream itself (the copies of
 * different connections are serialized on it, as the copy engine would
 * mostly do). A stream per connection (3 with 4 ranks, plus the
 * application's) once put a copy behind a spinning kernel on a shared
 * hardware queue (see mscclppGpuIpcProcessStream). */

static pthread_mutex_t transportLock = PTHREAD_MUTEX_INITIALIZER;
static struct mscclppGpuIpcStream transportStream[MSCCLPP_GPU_MAX_DEVICES];

mscclppResult_t mscclppGpuIpcStreamCreate(struct mscclppGpuIpcStream** stream) {
  const struct driverApi* d;
  MSCCLPP_RETURN_ON_ERROR(driverGet(&d));
  MSCCLPP_RETURN_ON_ERROR(ensureContext());
  int device = -1;
  MSCCLPP_RETURN_ON_ERROR(currentDeviceIndex(&device));
  pthread_mutex_lock(&transportLock);
  struct mscclppGpuIpcStream* s = &transportStream[device];
  if (s->stream == NULL) {
    void* sp = NULL;
    mscclppResult_t res = mscclppGpuIpcProcessStream(&sp);
    if (res != mscclppSuccess) {
      pthread_mutex_unlock(&transportLock);
      return res;
    }
    s->device = device;
    CUdevice cuDev;
    if (d->deviceGet(&cuDev, device) != CUDA_SUCCESS ||
        d->deviceGetAttribute(&s->canWriteValue64, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, cuDev) !=
            CUDA_SUCCESS)
      s->canWriteValue64 = 0;
    s->stream = (cudaStream_t)sp;
    MSCCLPP_INFO(MSCCLPP_LOG_GPU,
                 "transport stream on device %d (shared by its connections), stream writes of 64-bit values %s",
                 device, s->canWriteValue64 ? "supported" : "not supported (staged copies instead)");
  }
  pthread_mutex_unlock(&transportLock);
  *stream = s;
  return mscclppSuccess;
}

/* The object is the device's, kept (see above): nothing to release. */
void mscclppGpuIpcStreamDestroy(struct mscclppGpuIpcStream* stream) { (void)stream; }

mscclppResult_t mscclppGpuIpcMemcpyAsync(struct mscclppGpuIpcStream* stream, void* dst, const void* src, size_t size) {
  if (size == 0) return mscclppSuccess;
  cudaError_t err = cudaMemcpyAsync(dst, src, size, cudaMemcpyDefault, stream->stream);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return mscclppErr(mscclppUnhandledCudaError, MSCCLPP_LOG_GPU, "cudaMemcpyAsync(%p <- %p, %zu bytes): %s", dst, src,
                      size, cudaGetErrorString(err));
  }
  return mscclppSuccess;
}

mscclppResult_t mscclppGpuIpcWriteValue64Async(struct mscclppGpuIpcStream* stream, void* dst, uint64_t value) {
  if (stream->canWriteValue64) {
    CUresult r = driver.streamWriteValue64((CUstream)stream->stream, (CUdeviceptr)(uintptr_t)dst, value,
                                           CU_STREAM_WRITE_VALUE_DEFAULT);
    if (r != CUDA_SUCCESS) return cuFail(r, "cuStreamWriteValue64");
    return mscclppSuccess;
  }
  /* From pageable memory, cudaMemcpyAsync stages the source before it
   * returns, so the stack variable may go away; the copy itself is in stream
   * order, after the earlier copies have completed. */
  uint64_t staged = value;
  cudaError_t err = cudaMemcpyAsync(dst, &staged, sizeof(staged), cudaMemcpyHostToDevice, stream->stream);
  if (err != cudaSuccess) return rtFail(err, "cudaMemcpyAsync of a 64-bit signal");
  return mscclppSuccess;
}

mscclppResult_t mscclppGpuIpcWriteValuesAsync(struct mscclppGpuIpcStream* stream,
                                              const struct mscclppGpuStreamWrite* writes, int n) {
  if (n < 1 || n > MSCCLPP_GPU_STREAM_WRITES_MAX)
    return mscclppErr(mscclppInternalError, MSCCLPP_LOG_GPU, "%d stream writes in one batch (1..%d)", n,
                      MSCCLPP_GPU_STREAM_WRITES_MAX);
  for (int i = 0; i < n; i++)
    if ((writes[i].bytes != 4 && writes[i].bytes != 8) || (uintptr_t)writes[i].dst % writes[i].bytes != 0)
      return mscclppErr(mscclppInternalError, MSCCLPP_LOG_GPU, "stream write %d: %u bytes at %p (4 or 8, aligned)", i,
                        writes[i].bytes, writes[i].dst);
  if (!stream->canWriteValue64) {
    for (int i = 0; i < n; i++) {
      uint64_t staged = writes[i].value; /* little endian: the low bytes first */
      cudaError_t err = cudaMemcpyAsync(writes[i].dst, &staged, writes[i].bytes, cudaMemcpyHostToDevice, stream->stream);
      if (err != cudaSuccess) return rtFail(err, "cudaMemcpyAsync of a staged stream write");
    }
    return mscclppSuccess;
  }
  CUstreamBatchMemOpParams ops[MSCCLPP_GPU_STREAM_WRITES_MAX];
  memset(ops, 0, sizeof(ops));
  for (int i = 0; i < n; i++) {
    ops[i].writeValue.operation = writes[i].bytes == 8 ? CU_STREAM_MEM_OP_WRITE_VALUE_64 : CU_STREAM_MEM_OP_WRITE_VALUE_32;
    ops[i].writeValue.address = (CUdeviceptr)(uintptr_t)writes[i].dst;
    if (writes[i].bytes == 8)
      ops[i].writeValue.value64 = writes[i].value;
    else
      ops[i].writeValue.value = (cuuint32_t)writes[i].value;
    ops[i].writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
  }
  CUresult r = driver.streamBatchMemOp((CUstream)stream->stream, (unsigned)n, ops, 0);
  if (r != CUDA_SUCCESS) return cuFail(r, "cuStreamBatchMemOp");
  return mscclppSuccess;
}

mscclppResult_t mscclppGpuIpcStreamQuery(struct mscclppGpuIpcStream* stream, int* done) {
  cudaError_t err = cudaStreamQuery(stream->stream);
  if (err == cudaErrorNotReady) {
    (void)cudaGetLastError();
    *done = 0;
    return mscclppSuccess;
  }
  if (err != cudaSuccess) return rtFail(err, "cudaStreamQuery");
  *done = 1;
  return mscclppSuccess;
}

#endif /* MSCCLPP_HAVE_CUDA */
