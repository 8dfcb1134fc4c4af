/* SPDX-License-Identifier: MIT */
/*
 * The gpu layer: everything that touches the CUDA runtime, plus what stands
 * in for it on the host backend. Functions here work (and report "no GPU")
 * in a build without CUDA and on a machine without a driver.
 */
#ifndef MSCCLPP_SRC_GPU_GPU_H_
#define MSCCLPP_SRC_GPU_GPU_H_

#include <stddef.h>
#include <stdint.h>

#include "mscclpp/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The device number that means "no GPU: the host backend". Every function
 * below that takes a device treats device < 0 this way: plain, aligned,
 * zeroed host memory stands in for device and host-mapped memory, copies are
 * memcpy, streams are synchronous. With CUDA compiled in but no GPU present
 * (CI), these are the only paths taken. */
#define MSCCLPP_HOST_BACKEND_DEVICE (-1)

/* Number of usable CUDA devices: 0 without CUDA support, driver or device.
 * The driver is asked once per process (a missing one logged once, at INFO);
 * later calls return that count. Never fails. */
int mscclppGpuDeviceCount(void);

/* One line describing device `dev`: name, compute capability, SM count,
 * memory, PCI bus id, NUMA node. mscclppInvalidArgument for a bad index. */
mscclppResult_t mscclppGpuDescribe(int dev, char* buf, size_t len);

/* PCI bus id of `dev` in sysfs form ("0000:3b:00.0"). */
mscclppResult_t mscclppGpuPciBusId(int dev, char* buf, size_t len);

/* The device's UUID: one physical GPU (or MIG instance) has the same one
 * in every process, whatever the host name, the process's visible devices
 * or MSCCLPP_HOSTID say. */
mscclppResult_t mscclppGpuUuid(int dev, uint8_t uuid[16]);

/* NUMA node of a PCI device from /sys/bus/pci/devices/<busId>/numa_node.
 * *node = -1 when the platform does not say (VMs report -1): that is "no
 * binding", not an error. */
mscclppResult_t mscclppPciNumaNode(const char* busId, int* node);

/* NUMA node of CUDA device `dev` (-1 when unknown). */
mscclppResult_t mscclppGpuNumaNode(int dev, int* node);

/* Bind the calling thread to the CPUs of NUMA node `node` (from
 * /sys/devices/system/node/node<N>/cpulist). node -1 does nothing and logs at
 * INFO. No libnuma needed. */
mscclppResult_t mscclppCpuBindNumaNode(int node);

/* ---- memory ---------------------------------------------------------------- */

/* Zeroed, page-aligned host memory that the host and kernels of `device` both
 * read and write: an anonymous mapping of ours, pinned and mapped for every
 * device (cudaHostRegister Mapped|Portable), so that it outlives CUDA's
 * teardown (see gpu_mem.c). The
 * host's address goes to *hostPtr, the kernels' to *devPtr (the same address
 * on the host backend). mscclppInvalidArgument for bytes == 0 or NULL
 * outputs, mscclppSystemError / mscclppUnhandledCudaError when allocation
 * fails. Outputs are written only on success. */
mscclppResult_t mscclppGpuHostAllocMapped(int device, size_t bytes, void** hostPtr, void** devPtr);
/* Free what mscclppGpuHostAllocMapped returned (by its host address). NULL
 * is ignored. */
void mscclppGpuHostFreeMapped(int device, void* hostPtr);

/* Zeroed device memory of `device` (256-byte aligned; plain host memory on
 * the host backend). Errors as mscclppGpuHostAllocMapped. */
mscclppResult_t mscclppGpuDeviceAlloc(int device, size_t bytes, void** ptr);
void mscclppGpuDeviceFree(int device, void* ptr);

/* Blocking copy in any direction (unified addressing). Under CUDA it is
 * cudaMemcpy: it waits for earlier work of blocking streams, so never call
 * it while a kernel on such a stream waits for the caller. */
mscclppResult_t mscclppGpuMemcpy(int device, void* dst, const void* src, size_t bytes);

/* Make `device` current on the calling thread (nothing on the host backend). */
mscclppResult_t mscclppGpuSetDevice(int device);

/* ---- what kernels' hosts (the collectives) need of the current device ---- */

/* The calling thread's current device, as launches size their grids. */
struct mscclppGpuDeviceInfo {
  int device;   /* its index */
  int smCount;  /* streaming multiprocessors */
  int ccMajor;  /* compute capability, major */
};
/* mscclppUnhandledCudaError when the runtime cannot say; mscclppInvalidUsage
 * without CUDA. */
mscclppResult_t mscclppGpuCurrentDeviceInfo(struct mscclppGpuDeviceInfo* info);

/* Wait for all work of the current device (the collectives' release: their
 * kernels must be done before their channels go). Never fails: there is
 * nothing a caller could do about an error at that point; it is logged.
 * Nothing on the host backend. */
void mscclppGpuDeviceSynchronize(void);

/* Enqueue a copy (any direction, unified addressing) on a stream of the
 * application (a cudaStream_t: the mscclppStream_t a collective was called
 * with). */
struct CUstream_st;
mscclppResult_t mscclppGpuMemcpyOnAppStream(struct CUstream_st* stream, void* dst, const void* src, size_t bytes);
/* 1 when work enqueued on `stream` (an application's cudaStream_t) now is
 * being captured into a graph, or the runtime cannot say; 0 otherwise, and
 * always without CUDA. */
int mscclppGpuStreamCapturing(struct CUstream_st* stream);

/* A mark on an application's stream: whether everything enqueued on that
 * stream before the mark was recorded has completed (a CUDA event without
 * timing). Record does nothing, and says so (*recorded = 0), while the
 * stream is being captured into a graph: a captured record marks nothing
 * now. Done: *done = 1 once the work before the last record completed (or
 * nothing was ever recorded). CUDA builds only: the host backend has no
 * application streams. */
typedef struct mscclppGpuMark* mscclppGpuMark_t;
mscclppResult_t mscclppGpuMarkCreate(mscclppGpuMark_t* mark);
void mscclppGpuMarkDestroy(mscclppGpuMark_t mark);
mscclppResult_t mscclppGpuMarkRecord(mscclppGpuMark_t mark, struct CUstream_st* stream, int* recorded);
mscclppResult_t mscclppGpuMarkDone(mscclppGpuMark_t mark, int* done);

/* ---- streams ------------------------------------------------------------------
 * The library's one non-blocking stream of a device (it never waits for the
 * legacy default stream; gpu_ipc.h's mscclppGpuIpcProcessStream), so work
 * on it is in order with all the library's other stream work. One object
 * per device, kept for the process's life: the transport's stream
 * (gpu_ipc.h) is the same object. On the host backend a stream is a token
 * and every operation on it completes before it returns. */
typedef struct mscclppGpuIpcStream* mscclppGpuStream_t;

/* The stream object of `device` (made at first use). */
mscclppResult_t mscclppGpuStreamCreate(int device, mscclppGpuStream_t* stream);
/* Pairs with Create; releases nothing (the object is the device's). NULL
 * is ignored. */
void mscclppGpuStreamDestroy(mscclppGpuStream_t stream);
/* Enqueue a copy (any direction). */
mscclppResult_t mscclppGpuMemcpyAsync(mscclppGpuStream_t stream, void* dst, const void* src, size_t bytes);
/* *done = 1 when everything enqueued has completed. */
mscclppResult_t mscclppGpuStreamQuery(mscclppGpuStream_t stream, int* done);
/* Wait, at most timeoutSec, for everything enqueued (mscclppTimeout after
 * that; the work stays enqueued). */
mscclppResult_t mscclppGpuStreamSynchronize(mscclppGpuStream_t stream, double timeoutSec);

#ifdef __cplusplus
}
#endif


#endif /* MSCCLPP_SRC_GPU_GPU_H_ */
