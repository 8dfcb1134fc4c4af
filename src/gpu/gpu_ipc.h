/* SPDX-License-Identifier: MIT */
/*
 * GPU memory that other processes of the same host can open, and the few
 * stream operations the CUDA IPC transport needs.
 *
 *   - cudaMalloc memory travels as a 64-byte CUDA IPC handle
 *     (cudaIpcGetMemHandle / cudaIpcOpenMemHandle);
 *   - cuMem memory (cuMemCreate + cuMemMap) travels as a POSIX file
 *     descriptor (cuMemExportToShareableHandle), which the memory layer hands
 *     over a Unix socket;
 *   - host memory is pinned and mapped for the GPU with cudaHostRegister.
 *
 * The driver API is reached through cudaGetDriverEntryPointByVersion, never
 * linked, so the library loads on machines without a driver. Every function
 * works in a build without CUDA and on a machine without a GPU: it returns
 * mscclppInvalidUsage saying that CUDA is missing (mscclppGpuIpcAvailable()
 * says so beforehand).
 *
 * Device memory functions act on the calling thread's current device.
 */
#ifndef MSCCLPP_SRC_GPU_GPU_IPC_H_
#define MSCCLPP_SRC_GPU_GPU_IPC_H_

#include <stddef.h>
#include <stdint.h>

#include "mscclpp/core.h"

#define MSCCLPP_GPU_IPC_HANDLE_BYTES 64

/* 1 when CUDA is compiled in, a driver is loaded and a device exists. */
int mscclppGpuIpcAvailable(void);

/* The calling thread's current device (0 when none was set). */
mscclppResult_t mscclppGpuIpcCurrentDevice(int* device);

/* What kind of memory a pointer is, as the CUDA driver sees it. */
enum mscclppGpuPtrType {
  MSCCLPP_GPU_PTR_HOST = 0,        /* host memory CUDA does not know */
  MSCCLPP_GPU_PTR_HOST_PINNED = 1, /* cudaHostAlloc / cudaHostRegister memory */
  MSCCLPP_GPU_PTR_DEVICE = 2,      /* cudaMalloc memory */
  MSCCLPP_GPU_PTR_DEVICE_CUMEM = 3,/* cuMemCreate + cuMemMap memory */
  MSCCLPP_GPU_PTR_MANAGED = 4      /* cudaMallocManaged memory */
};

struct mscclppGpuPtrInfo {
  enum mscclppGpuPtrType type;
  int device;          /* owning device of device memory, else -1 */
  uintptr_t allocBase; /* device kinds: the allocation (or mapping) holding ptr */
  size_t allocSize;
  uint64_t bufferId;   /* device kinds: the driver's id of the allocation, unique in the process's life
                          (an address reused by a later allocation gets another id); 0 otherwise */
};

/* Classify `ptr`. Without CUDA (or a device) every pointer is
 * MSCCLPP_GPU_PTR_HOST. */
mscclppResult_t mscclppGpuIpcQueryPointer(const void* ptr, struct mscclppGpuPtrInfo* info);

/* ---- cudaMalloc memory ------------------------------------------------------ */

/* Zeroed cudaMalloc memory on the current device. */
mscclppResult_t mscclppGpuIpcMalloc(size_t size, void** ptr);
/* Zero device memory that no stream uses yet, waiting for it, without
 * touching the legacy stream (allowed while another stream of the thread is
 * captured in relaxed mode). */
mscclppResult_t mscclppGpuIpcZero(void* ptr, size_t size);
/* Switch this thread's stream-capture mode to relaxed (allocations and
 * other set-up calls are then allowed while one of its streams is being
 * captured); returns the previous mode for mscclppGpuIpcCaptureRestore, or
 * -1 (nothing to restore: no CUDA). */
int mscclppGpuIpcCaptureRelax(void);
void mscclppGpuIpcCaptureRestore(int mode);
mscclppResult_t mscclppGpuIpcFree(void* ptr);
/* The IPC handle of the allocation that starts at `base`. */
mscclppResult_t mscclppGpuIpcGetHandle(void* base, uint8_t handle[MSCCLPP_GPU_IPC_HANDLE_BYTES]);
/* Map another process's allocation; *base is its first byte here. Fails
 * (driver's reason in the message) for a handle of this process. */
mscclppResult_t mscclppGpuIpcOpenHandle(const uint8_t handle[MSCCLPP_GPU_IPC_HANDLE_BYTES], void** base);
mscclppResult_t mscclppGpuIpcCloseHandle(void* base);

/* ---- cuMem memory ------------------------------------------------------------ */

/* Zeroed cuMem memory on the current device, exportable as a POSIX file
 * descriptor; size is rounded up to the allocation granularity, which goes to
 * *allocSize. */
mscclppResult_t mscclppGpuCuMemAlloc(size_t size, void** ptr, size_t* allocSize);
/* Unmap and free what mscclppGpuCuMemAlloc or mscclppGpuCuMemImport mapped. */
mscclppResult_t mscclppGpuCuMemUnmap(void* ptr, size_t allocSize);
/* A new POSIX file descriptor for the cuMem allocation at `base` (the caller
 * closes it). Fails, saying so, for allocations created without
 * CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR. */
mscclppResult_t mscclppGpuCuMemExportFd(void* base, int* fd);
/* Import an exported allocation of allocSize bytes and map it read-write for
 * the current device. `fd` stays the caller's. */
mscclppResult_t mscclppGpuCuMemImportFd(int fd, size_t allocSize, void** ptr);

/* ---- host memory ------------------------------------------------------------- */

/* Pin and map [ptr, ptr+size) for every device (cudaHostRegister Mapped |
 * Portable); *devPtr is the address kernels use. */
mscclppResult_t mscclppGpuIpcHostRegister(void* ptr, size_t size, void** devPtr);
mscclppResult_t mscclppGpuIpcHostUnregister(void* ptr);

/* Devices per process the library's streams cover. */
#define MSCCLPP_GPU_MAX_DEVICES 64

/* The library's one stream on the current device (a cudaStream_t in
 * *stream): non-blocking, highest priority, made at first use and kept for
 * the process's life; every stream the library uses is this one, so that
 * whatever it does it takes one of the device's hardware queues
 * (gpu_mem_ipc.c says why). */
mscclppResult_t mscclppGpuIpcProcessStream(void** stream);

/* ---- the transport's operations on the library stream -------------------------
 * struct mscclppGpuIpcStream is gpu.h's stream object (mscclppGpuStream_t),
 * of the current device here. Operations are enqueued in order; nothing
 * here waits except mscclppGpuIpcStreamQuery's check. */
struct mscclppGpuIpcStream;

/* The current device's stream object (one per device, kept for the
 * process's life: Destroy releases nothing, it pairs with Create). */
mscclppResult_t mscclppGpuIpcStreamCreate(struct mscclppGpuIpcStream** stream);
void mscclppGpuIpcStreamDestroy(struct mscclppGpuIpcStream* stream);
/* Enqueue a copy (any direction, unified addressing). */
mscclppResult_t mscclppGpuIpcMemcpyAsync(struct mscclppGpuIpcStream* stream, void* dst, const void* src, size_t size);
/* Enqueue a 64-bit store of `value` to `dst` (device memory, possibly
 * another process's, or registered host memory) that happens after every
 * earlier operation of the stream has completed and its writes are visible
 * (cuStreamWriteValue64 with its memory barrier; where the device cannot,
 * a copy of the value from a staging buffer, still in stream order). */
mscclppResult_t mscclppGpuIpcWriteValue64Async(struct mscclppGpuIpcStream* stream, void* dst, uint64_t value);
/* One stream-ordered store of a 4- or 8-byte value (dst aligned to it). */
struct mscclppGpuStreamWrite {
  void* dst;
  uint64_t value;
  unsigned bytes; /* 4 or 8 */
};
#define MSCCLPP_GPU_STREAM_WRITES_MAX 4
/* Enqueue up to MSCCLPP_GPU_STREAM_WRITES_MAX stores with ONE driver call
 * (cuStreamBatchMemOp), in order, each after every earlier operation of the
 * stream has completed and its writes are visible (each with its memory
 * barrier; NO_MEMORY_BARRIER is refused in a batch on this driver) -- e.g.
 * a small payload and then the semaphore that announces it, with no copy
 * engine involved. Where the device has no 64-bit stream
 * writes, staged copies in stream order instead. */
mscclppResult_t mscclppGpuIpcWriteValuesAsync(struct mscclppGpuIpcStream* stream,
                                              const struct mscclppGpuStreamWrite* writes, int n);
/* *done = 1 when everything enqueued has completed. */
mscclppResult_t mscclppGpuIpcStreamQuery(struct mscclppGpuIpcStream* stream, int* done);

#endif /* MSCCLPP_SRC_GPU_GPU_IPC_H_ */
