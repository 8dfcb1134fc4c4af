/* SPDX-License-Identifier: MIT */
/* Memory, copies and streams of the gpu layer, with the host backend's
 * plain-memory stand-ins (device < 0). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log.h"
#include "core/util.h"
#include "gpu/gpu.h"
#include "gpu/gpu_ipc.h"
#include "gpu/gpu_stream.h"

#ifdef MSCCLPP_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#define HOST_ALIGN 4096

#ifdef MSCCLPP_HAVE_CUDA
static size_t pageBytes(void) {
  long p = sysconf(_SC_PAGESIZE);
  return p > 0 ? (size_t)p : HOST_ALIGN;
}
#endif

static mscclppResult_t hostAlloc(size_t bytes, void** ptr) {
  size_t rounded = (bytes + HOST_ALIGN - 1) / HOST_ALIGN * HOST_ALIGN;
  void* p = aligned_alloc(HOST_ALIGN, rounded);
  if (p == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_GPU, "cannot allocate %zu bytes of host memory", bytes);
  memset(p, 0, rounded);
  *ptr = p;
  return mscclppSuccess;
}

#ifdef MSCCLPP_HAVE_CUDA
/* Run CUDA calls with `device` current, then give the caller's device back. */
static mscclppResult_t enterDevice(int device, int* previous) {
  cudaError_t err = cudaGetDevice(previous);
  if (err == cudaSuccess) err = cudaSetDevice(device);
  if (err != cudaSuccess)
    return mscclppErr(mscclppUnhandledCudaError, MSCCLPP_LOG_GPU, "cudaSetDevice(%d): %s", device,
                      cudaGetErrorString(err));
  return mscclppSuccess;
}

static void leaveDevice(int previous) { (void)cudaSetDevice(previous); }

static mscclppResult_t cudaFail(cudaError_t err, const char* what, int device, size_t bytes) {
  (void)cudaGetLastError();
  return mscclppErr(mscclppUnhandledCudaError, MSCCLPP_LOG_GPU, "%s(%zu bytes) on device %d: %s", what, bytes, device,
                    cudaGetErrorString(err));
}
#endif

mscclppResult_t mscclppGpuHostAllocMapped(int device, size_t bytes, void** hostPtr, void** devPtr) {
  if (bytes == 0 || hostPtr == NULL || devPtr == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_GPU, "mscclppGpuHostAllocMapped: %s",
                      bytes == 0 ? "zero bytes" : "NULL output");
  if (device < 0) {
    void* p = NULL;
    MSCCLPP_RETURN_ON_ERROR(hostAlloc(bytes, &p));
    *hostPtr = *devPtr = p;
    return mscclppSuccess;
  }
#ifdef MSCCLPP_HAVE_CUDA
  /* Our own mapping, registered with CUDA, rather than cudaHostAlloc's: the
   * library's threads (proxy, watcher) store into this memory and may still
   * run while the process tears CUDA down with a communicator alive
   * (cudaDeviceReset before exit, as nccl-tests does after its parallel
   * init, or the runtime's exit handler). CUDA then drops the registration
   * but cannot unmap memory it does not own, so those stores land in plain
   * memory instead of faulting. The page before the returned address holds
   * the mapping's size for the free. */
  const size_t page = pageBytes(), rounded = (bytes + page - 1) / page * page;
  uint8_t* base = (uint8_t*)mmap(NULL, rounded + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED)
    return mscclppErr(mscclppSystemError, MSCCLPP_LOG_GPU, "mmap of %zu bytes of host memory: %s", rounded + page,
                      strerror(errno));
  memcpy(base, &rounded, sizeof(rounded));
  void* h = base + page; /* zeroed: a fresh anonymous mapping */
  void* d = NULL;
  int prev;
  mscclppResult_t res = enterDevice(device, &prev);
  if (res != mscclppSuccess) {
    munmap(base, rounded + page);
    return res;
  }
  cudaError_t err = cudaHostRegister(h, rounded, cudaHostRegisterMapped | cudaHostRegisterPortable);
  if (err != cudaSuccess) {
    leaveDevice(prev);
    munmap(base, rounded + page);
    return cudaFail(err, "cudaHostRegister", device, bytes);
  }
  err = cudaHostGetDevicePointer(&d, h, 0);
  if (err != cudaSuccess) {
    (void)cudaHostUnregister(h);
    leaveDevice(prev);
    munmap(base, rounded + page);
    return cudaFail(err, "cudaHostGetDevicePointer", device, bytes);
  }
  leaveDevice(prev);
  *hostPtr = h;
  *devPtr = d;
  return mscclppSuccess;
#else
  return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_GPU, "device %d requested but mscclpp was built without CUDA",
                    device);
#endif
}

void mscclppGpuHostFreeMapped(int device, void* hostPtr) {
  if (hostPtr == NULL) return;
  if (device < 0) {
    free(hostPtr);
    return;
  }
#ifdef MSCCLPP_HAVE_CUDA
  const size_t page = pageBytes();
  uint8_t* base = (uint8_t*)hostPtr - page;
  size_t rounded;
  memcpy(&rounded, base, sizeof(rounded));
  cudaError_t err = cudaHostUnregister(hostPtr);
  /* after CUDA's teardown the registration is gone already: nothing to say */
  if (err != cudaSuccess && err != cudaErrorCudartUnloading && err != cudaErrorHostMemoryNotRegistered &&
      err != cudaErrorDeviceUninitialized)
    MSCCLPP_WARN(MSCCLPP_LOG_GPU, "cudaHostUnregister: %s", cudaGetErrorString(err));
  (void)cudaGetLastError();
  munmap(base, rounded + page);
#endif
}

mscclppResult_t mscclppGpuDeviceAlloc(int device, size_t bytes, void** ptr) {
  if (bytes == 0 || ptr == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_GPU, "mscclppGpuDeviceAlloc: %s",
                      bytes == 0 ? "zero bytes" : "NULL output");
  if (device < 0) return hostAlloc(bytes, ptr);
#ifdef MSCCLPP_HAVE_CUDA
  int prev;
  MSCCLPP_RETURN_ON_ERROR(enterDevice(device, &prev));
  void* p = NULL;
  cudaError_t err = cudaMalloc(&p, bytes);
  if (err == cudaSuccess) {
    /* Zero it on the library's non-blocking stream and wait for that alone:
     * never behind kernels that may be running (and waiting for this thread). */
    mscclppResult_t zeroed = mscclppGpuIpcZero(p, bytes); /* logs its failure */
    if (zeroed != mscclppSuccess) {
      cudaFree(p);
      leaveDevice(prev);
      return zeroed;
    }
  }
  leaveDevice(prev);
  if (err != cudaSuccess) return cudaFail(err, "cudaMalloc", device, bytes);
  *ptr = p;
  return mscclppSuccess;
#else
  return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_GPU, "device %d requested but mscclpp was built without CUDA",
                    device);
#endif
}

void mscclppGpuDeviceFree(int device, void* ptr) {
  if (ptr == NULL) return;
  if (device < 0) {
    free(ptr);
    return;
  }
#ifdef MSCCLPP_HAVE_CUDA
  int prev;
  if (enterDevice(device, &prev) != mscclppSuccess) return;
  cudaError_t err = cudaFree(ptr);
  if (err != cudaSuccess) MSCCLPP_WARN(MSCCLPP_LOG_GPU, "cudaFree: %s", cudaGetErrorString(err));
  leaveDevice(prev);
#endif
}

mscclppResult_t mscclppGpuMemcpy(int device, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return mscclppSuccess;
  if (dst == NULL || src == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_GPU, "mscclppGpuMemcpy: NULL pointer");
  if (device < 0) {
    memmove(dst, src, bytes);
    return mscclppSuccess;
  }
#ifdef MSCCLPP_HAVE_CUDA
  int prev;
  MSCCLPP_RETURN_ON_ERROR(enterDevice(device, &prev));
  cudaError_t err = cudaMemcpy(dst, src, bytes, cudaMemcpyDefault);
  leaveDevice(prev);
  if (err != cudaSuccess) return cudaFail(err, "cudaMemcpy", device, bytes);
  return mscclppSuccess;
#else
  return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_GPU, "device %d requested but mscclpp was built without CUDA",
                    device);
#endif
}

mscclppResult_t mscclppGpuSetDevice(int device) {
  if (device < 0) return mscclppSuccess;
#ifdef MSCCLPP_HAVE_CUDA
  cudaError_t err = cudaSetDevice(device);
  if (err != cudaSuccess)
    return mscclppErr(mscclppUnhandledCudaError, MSCCLPP_LOG_GPU, "cudaSetDevice(%d): %s", device,
                      cudaGetErrorString(err));
  return mscclppSuccess;
#else
  return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_GPU, "device %d requested but mscclpp was built without CUDA",
                    device);
#endif
}

/* ---- the current device, for the collectives ------------------------------ */

mscclppResult_t mscclppGpuCurrentDeviceInfo(struct mscclppGpuDeviceInfo* info) {
#ifdef MSCCLPP_HAVE_CUDA
  int dev = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&info->smCount, cudaDevAttrMultiProcessorCount, dev);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&info->ccMajor, cudaDevAttrComputeCapabilityMajor, dev);
  if (err != cudaSuccess) return cudaFail(err, "cudaGetDevice / cudaDeviceGetAttribute", dev, 0);
  info->device = dev;
  return mscclppSuccess;
#else
  (void)info;
  return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_GPU, "the current device: mscclpp was built without CUDA");
#endif
}

void mscclppGpuDeviceSynchronize(void) {
#ifdef MSCCLPP_HAVE_CUDA
  cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    MSCCLPP_WARN(MSCCLPP_LOG_GPU, "cudaDeviceSynchronize: %s", cudaGetErrorString(err));
  }
#endif
}

mscclppResult_t mscclppGpuMemcpyOnAppStream(struct CUstream_st* stream, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return mscclppSuccess;
#ifdef MSCCLPP_HAVE_CUDA
  cudaError_t err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t)stream);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return mscclppErr(mscclppUnhandledCudaError, MSCCLPP_LOG_GPU, "cudaMemcpyAsync(%p <- %p, %zu bytes): %s", dst, src,
                      bytes, cudaGetErrorString(err));
  }
  return mscclppSuccess;
#else
  (void)stream;
  (void)dst;
  (void)src;
  return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_GPU, "a copy on a CUDA stream: mscclpp was built without CUDA");
#endif
}

int mscclppGpuStreamCapturing(struct CUstream_st* stream) {
#ifdef MSCCLPP_HAVE_CUDA
  enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing((cudaStream_t)stream, &status) != cudaSuccess) {
    (void)cudaGetLastError();
    return 1;
  }
  return status != cudaStreamCaptureStatusNone;
#else
  (void)stream;
  return 0;
#endif
}

/* ---- marks on application streams --------------------------------------------- */

#ifdef MSCCLPP_HAVE_CUDA
/* The mark is the event itself: no object of ours around it. */
mscclppResult_t mscclppGpuMarkCreate(mscclppGpuMark_t* mark) {
  cudaEvent_t ev = NULL;
  cudaError_t err = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return mscclppErr(mscclppUnhandledCudaError, MSCCLPP_LOG_GPU, "cudaEventCreateWithFlags: %s",
                      cudaGetErrorString(err));
  }
  *mark = (mscclppGpuMark_t)ev;
  return mscclppSuccess;
}

void mscclppGpuMarkDestroy(mscclppGpuMark_t mark) {
  if (mark != NULL) (void)cudaEventDestroy((cudaEvent_t)mark);
}

mscclppResult_t mscclppGpuMarkRecord(mscclppGpuMark_t mark, struct CUstream_st* stream, int* recorded) {
  *recorded = 0;
  if (mscclppGpuStreamCapturing(stream)) return mscclppSuccess;
  cudaError_t err = cudaEventRecord((cudaEvent_t)mark, (cudaStream_t)stream);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return mscclppErr(mscclppUnhandledCudaError, MSCCLPP_LOG_GPU, "cudaEventRecord: %s", cudaGetErrorString(err));
  }
  *recorded = 1;
  return mscclppSuccess;
}

mscclppResult_t mscclppGpuMarkDone(mscclppGpuMark_t mark, int* done) {
  cudaError_t err = cudaEventQuery((cudaEvent_t)mark);
  *done = err == cudaSuccess;
  if (err == cudaSuccess) return mscclppSuccess;
  (void)cudaGetLastError();
  if (err == cudaErrorNotReady) return mscclppSuccess;
  return mscclppErr(mscclppUnhandledCudaError, MSCCLPP_LOG_GPU, "cudaEventQuery: %s", cudaGetErrorString(err));
}
#endif /* MSCCLPP_HAVE_CUDA */

/* ---- streams ---------------------------------------------------------------- */

/* The host backend's stream token: operations on it complete at once. */
static struct mscclppGpuIpcStream hostStream = {.device = MSCCLPP_HOST_BACKEND_DEVICE};

mscclppResult_t mscclppGpuStreamCreate(int device, mscclppGpuStream_t* stream) {
  if (stream == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_GPU, "mscclppGpuStreamCreate: NULL output");
  if (device < 0) {
    *stream = &hostStream;
    return mscclppSuccess;
  }
#ifdef MSCCLPP_HAVE_CUDA
  int prev;
  MSCCLPP_RETURN_ON_ERROR(enterDevice(device, &prev));
  struct mscclppGpuIpcStream* s = NULL;
  mscclppResult_t res = mscclppGpuIpcStreamCreate(&s); /* the device's object (gpu_mem_ipc.c) */
  leaveDevice(prev);
  MSCCLPP_RETURN_ON_ERROR(res);
  *stream = s;
  return mscclppSuccess;
#else
  return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_GPU, "device %d requested but mscclpp was built without CUDA",
                    device);
#endif
}

/* The object is the device's, kept for the process's life. */
void mscclppGpuStreamDestroy(mscclppGpuStream_t stream) { (void)stream; }

mscclppResult_t mscclppGpuMemcpyAsync(mscclppGpuStream_t stream, void* dst, const void* src, size_t bytes) {
  if (stream == NULL || ((dst == NULL || src == NULL) && bytes > 0))
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_GPU, "mscclppGpuMemcpyAsync: NULL argument");
  if (bytes == 0) return mscclppSuccess;
  if (stream->device < 0) {
    memmove(dst, src, bytes);
    return mscclppSuccess;
  }
#ifdef MSCCLPP_HAVE_CUDA
  int prev;
  MSCCLPP_RETURN_ON_ERROR(enterDevice(stream->device, &prev)); /* the stream's device must be current */
  cudaError_t err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream->stream);
  leaveDevice(prev);
  if (err != cudaSuccess) return cudaFail(err, "cudaMemcpyAsync", stream->device, bytes);
#endif
  return mscclppSuccess;
}

mscclppResult_t mscclppGpuStreamQuery(mscclppGpuStream_t stream, int* done) {
  if (stream == NULL || done == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_GPU, "mscclppGpuStreamQuery: NULL argument");
  if (stream->device < 0) {
    *done = 1;
    return mscclppSuccess;
  }
#ifdef MSCCLPP_HAVE_CUDA
  cudaError_t err = cudaStreamQuery(stream->stream);
  if (err == cudaErrorNotReady) {
    (void)cudaGetLastError();
    *done = 0;
    return mscclppSuccess;
  }
  if (err != cudaSuccess) return cudaFail(err, "cudaStreamQuery", stream->device, 0);
#endif
  *done = 1;
  return mscclppSuccess;
}

mscclppResult_t mscclppGpuStreamSynchronize(mscclppGpuStream_t stream, double timeoutSec) {
  mscclppDeadline deadline = mscclppDeadlineIn(timeoutSec);
  uint64_t spinUntil = mscclppTimeNs() + 1000000; /* busy-poll the first ms: flush latency matters */
  for (;;) {
    int done = 0;
    MSCCLPP_RETURN_ON_ERROR(mscclppGpuStreamQuery(stream, &done));
    if (done) return mscclppSuccess;
    if (mscclppDeadlinePassed(deadline))
      return mscclppErr(mscclppTimeout, MSCCLPP_LOG_GPU, "stream of device %d not done after %.3g s", stream->device,
                        timeoutSec);
    if (mscclppTimeNs() > spinUntil) {
      struct timespec ts = {0, 20000};
      nanosleep(&ts, NULL);
    }
  }
}
