/* SPDX-License-Identifier: MIT */
/*
 * mscclpp registered memory.
 *
 * A registration is a record of (pointer, size, kind, transports) that a rank
 * makes of its own memory. It serializes to a few hundred bytes (versioned,
 * with explicit lengths, bound to the job secret), travels to another rank
 * (mscclppMemorySend / mscclppMemoryRecv, or any channel of your own with
 * mscclppMemorySerialize / mscclppMemoryOpen), and opens there: the peer then
 * holds a handle whose pointer addresses the same bytes in its own process.
 *
 *   rank A                                    rank B
 *   mscclppMemAlloc(comm, kind, n, &p)
 *   mscclppMemoryRegister(comm, p, n, 0, &m)
 *   mscclppMemorySend(comm, m, B, tag)  --->  mscclppMemoryRecv(comm, A, tag, &r)
 *                                             ... mscclppConnectionWrite(conn, r, ...)
 *                                             mscclppMemoryClose(r)
 *   mscclppMemoryDeregister(m)
 *   mscclppMemFree(comm, p)
 *
 * How memory opens in another process of the same host:
 *   - device memory from cudaMalloc: CUDA IPC handle (cudaIpcOpenMemHandle);
 *   - device memory from cuMemCreate/cuMemMap: POSIX file descriptor
 *     (the allocation must be created with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
 *     among its requestedHandleTypes; mscclppMemAlloc does that);
 *   - host shared or host pinned memory from mscclppMemAlloc: a memory file
 *     (memfd) mapped by both processes (pinned memory is also registered with
 *     CUDA in the opening process when it has a GPU);
 *   - plain host memory (malloc) and host memory pinned by cudaHostAlloc: only
 *     within the process that owns it (opening elsewhere fails, saying so).
 * Within the owning process, opening gives back the owner's pointer.
 *
 * Lifetime: free memory only after every peer has closed what it opened
 * (e.g. after a barrier): CUDA leaves the result of freeing exported device
 * memory first undefined.
 *
 * Thread safety: registration, opening and closing may be called from several
 * threads; one handle must not be used after it is deregistered or closed.
 */
#ifndef MSCCLPP_MEMORY_H_
#define MSCCLPP_MEMORY_H_

#include <stddef.h>
#include <stdint.h>

#include "mscclpp/comm.h"
#include "mscclpp/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Transports, one bit each: a registration names the transports that may
 * reach it, a connection uses one. Values travel between processes: never
 * renumber. */
typedef enum {
  /* Registration: every transport the memory's kind allows on this machine
   * (Net once the communicator has a network connection).
   * Connection: let mscclpp choose (CUDA IPC between ranks of one host that
   * both have a GPU, else host shared memory; the network between hosts). */
  mscclppTransportAuto = 0,
  mscclppTransportCudaIpc = 1u << 0, /* same host: copies by the GPU's copy engines (cudaMemcpyAsync) */
  mscclppTransportHostShm = 1u << 1, /* same host: copies by the CPU through shared mappings (host backend) */
  /* any hosts: RMA over libfabric (verbs, efa, tcp;ofi_rxm, ...; see
   * mscclpp/connection.h). Memory registered for Net is registered with the
   * provider when the communicator has a network connection (at registration,
   * or else when its record is first sent); GPU memory the provider cannot
   * reach (no FI_HMEM) is staged through pinned host buffers. */
  mscclppTransportNet = 1u << 2
} mscclppTransport_t;

/* A short fixed name of one transport ("CudaIpc"); "unknown" otherwise. */
MSCCLPP_API const char* mscclppTransportName(mscclppTransport_t transport);

/* Kinds of memory. Values travel between processes: never renumber. */
typedef enum {
  mscclppMemKindHost = 1,        /* ordinary host memory (malloc): this process only */
  mscclppMemKindHostShared = 2,  /* host memory shared by processes of the host (mscclppMemAlloc) */
  mscclppMemKindHostPinned = 3,  /* page-locked host memory the GPU maps; shareable when from mscclppMemAlloc */
  mscclppMemKindDevice = 4,      /* GPU memory from cudaMalloc */
  mscclppMemKindDeviceCuMem = 5  /* GPU memory from cuMemCreate + cuMemMap */
} mscclppMemKind_t;

/* A short fixed name of one kind ("HostShared"); "unknown" otherwise. */
MSCCLPP_API const char* mscclppMemKindName(mscclppMemKind_t kind);

typedef struct mscclppRegisteredMemory* mscclppRegisteredMemory_t;

/* ---- allocation ----------------------------------------------------------- */

/* Allocate `size` zeroed bytes of `kind` that other processes of the host
 * can open once registered:
 *   HostShared  - a memory file mapped shared (whole pages);
 *   HostPinned  - the same, also pinned and mapped for the GPUs (needs CUDA);
 *   Device      - cudaMalloc on the current device;
 *   DeviceCuMem - cuMemCreate + cuMemMap on the current device, exportable as
 *                 a file descriptor (size rounded up to the granularity).
 * mscclppMemKindHost is refused: use malloc.
 * Errors: mscclppInvalidArgument (NULL comm or ptr, size 0, unknown kind),
 * mscclppInvalidUsage (a GPU kind without CUDA, or kind Host),
 * mscclppSystemError / mscclppUnhandledCudaError (the allocation failed).
 * *ptr is written only on success; free it with mscclppMemFree. */
MSCCLPP_API mscclppResult_t mscclppMemAlloc(mscclppComm_t comm, mscclppMemKind_t kind, size_t size, void** ptr);

/* Free what mscclppMemAlloc returned. mscclppInvalidArgument for a pointer
 * that did not come from mscclppMemAlloc of this communicator (named in the
 * message); mscclppInvalidUsage, freeing nothing, while a registration still
 * covers the memory. */
MSCCLPP_API mscclppResult_t mscclppMemFree(mscclppComm_t comm, void* ptr);

/* ---- registration ----------------------------------------------------------- */

/* Register [ptr, ptr+size) for `transports` (a mask of mscclppTransport_t
 * bits, or mscclppTransportAuto). The kind is found from the pointer:
 * memory of mscclppMemAlloc of this communicator, cudaMalloc, cuMem,
 * cudaHostAlloc, or plain host memory (host memory of another communicator's
 * mscclppMemAlloc counts as plain here). Handles other processes need (IPC
 * handle, file descriptor export) are made here.
 * Errors: mscclppInvalidArgument - NULL ptr or mem, size 0, unknown transport
 *   bits, a range that runs past the end of its allocation, device memory
 *   with the HostShm transport, managed memory;
 *   mscclppInvalidUsage - CudaIpc without a GPU;
 *   mscclppUnhandledCudaError / mscclppSystemError - making the handle failed,
 *   or the network provider refused to register the memory (the message
 *   names the provider and the range).
 * *mem is written only on success. */
MSCCLPP_API mscclppResult_t mscclppMemoryRegister(mscclppComm_t comm, void* ptr, size_t size, unsigned transports,
                                                  mscclppRegisteredMemory_t* mem);

/* Forget a registration made by mscclppMemoryRegister (peers that opened it
 * keep their mapping; new opens of cuMem memory fail). The memory itself is
 * not freed. mscclppInvalidUsage for a handle from mscclppMemoryOpen/Recv
 * (close those with mscclppMemoryClose); mscclppInvalidArgument for NULL. */
MSCCLPP_API mscclppResult_t mscclppMemoryDeregister(mscclppRegisteredMemory_t mem);

/* The spellings MSCCL++'s users know (communicator->registerMemory), kept
 * as aliases: the same calls as mscclppMemoryRegister and
 * mscclppMemoryDeregister. New code uses the mscclppMemory* names (object,
 * then verb), as every other call on a registration does.
 * mscclppMemAlloc/mscclppMemFree keep NCCL's spelling (ncclMemAlloc). */
MSCCLPP_API mscclppResult_t mscclppRegisterMemory(mscclppComm_t comm, void* ptr, size_t size, unsigned transports,
                                                  mscclppRegisteredMemory_t* mem);
MSCCLPP_API mscclppResult_t mscclppDeregisterMemory(mscclppRegisteredMemory_t mem);

/* Find the registration of this communicator that covers [ptr, ptr+size)
 * and the offset of ptr inside it. mscclppInvalidArgument, naming the
 * pointer, when no registration covers the whole range. */
MSCCLPP_API mscclppResult_t mscclppMemoryLookup(mscclppComm_t comm, const void* ptr, size_t size,
                                                mscclppRegisteredMemory_t* mem, size_t* offset);

/* ---- travel ----------------------------------------------------------------- */

/* Largest serialized registration, in bytes. */
#define MSCCLPP_MEMORY_RECORD_MAX_BYTES 1024

/* Write the record of a registration (local or opened: records can be passed
 * on) into buf. With buf NULL, only *written (the size needed) is set.
 * Errors: mscclppInvalidArgument (NULL mem or written, bufSize smaller than
 * the record - the message names both sizes). */
MSCCLPP_API mscclppResult_t mscclppMemorySerialize(mscclppRegisteredMemory_t mem, void* buf, size_t bufSize,
                                                   size_t* written);

/* Open a record made by any rank of this job: map the memory into this
 * process (or, in the owning process, find the owner's pointer). Blocks at
 * most MSCCLPP_TIMEOUT while the owner hands over a file descriptor.
 * Errors: mscclppInvalidArgument - garbage, truncated, a version this library
 *   does not read, or a record that fails authentication (made by another
 *   job - another secret - or altered);
 *   mscclppInvalidUsage - the owner is on another host, the memory cannot be
 *   opened by another process (plain or cudaHostAlloc host memory), or it is
 *   device memory and this process has no GPU - unless the record carries a
 *   network registration: then it opens without a mapping (its pointer is
 *   NULL) for transport Net;
 *   mscclppRemoteError - the owner no longer exports it, or is gone;
 *   mscclppTimeout, mscclppAborted, mscclppUnhandledCudaError,
 *   mscclppSystemError. *mem is written only on success. */
MSCCLPP_API mscclppResult_t mscclppMemoryOpen(mscclppComm_t comm, const void* buf, size_t size,
                                              mscclppRegisteredMemory_t* mem);

/* Unmap what mscclppMemoryOpen/Recv opened. mscclppInvalidUsage for a handle
 * of mscclppMemoryRegister. */
MSCCLPP_API mscclppResult_t mscclppMemoryClose(mscclppRegisteredMemory_t mem);

/* Send the record of `mem` to `peer` through the bootstrap under `tag` (two
 * bootstrap messages: length, then record). Errors of
 * mscclppMemorySerialize and mscclppBootstrapSend. */
MSCCLPP_API mscclppResult_t mscclppMemorySend(mscclppComm_t comm, mscclppRegisteredMemory_t mem, int peer, int tag);

/* Receive a record from `peer` under `tag` and open it (mscclppMemoryOpen).
 * A malformed or unauthenticated record from the peer is
 * mscclppRemoteError; other errors as mscclppMemoryOpen and
 * mscclppBootstrapRecv. */
MSCCLPP_API mscclppResult_t mscclppMemoryRecv(mscclppComm_t comm, int peer, int tag, mscclppRegisteredMemory_t* mem);

/* ---- what a handle holds ------------------------------------------------------ */

/* The first byte as this process addresses it (host address for host kinds;
 * the address kernels use is mscclppMemoryDevicePtr's). */
MSCCLPP_API mscclppResult_t mscclppMemoryPtr(mscclppRegisteredMemory_t mem, void** ptr);
/* The address kernels of this process use (equal to the pointer except for
 * pinned host memory on platforms without unified addressing). */
MSCCLPP_API mscclppResult_t mscclppMemoryDevicePtr(mscclppRegisteredMemory_t mem, void** devPtr);
MSCCLPP_API mscclppResult_t mscclppMemorySize(mscclppRegisteredMemory_t mem, size_t* size);
MSCCLPP_API mscclppResult_t mscclppMemoryKind(mscclppRegisteredMemory_t mem, mscclppMemKind_t* kind);
MSCCLPP_API mscclppResult_t mscclppMemoryTransports(mscclppRegisteredMemory_t mem, unsigned* transports);
/* The rank that registered the memory. */
MSCCLPP_API mscclppResult_t mscclppMemoryRank(mscclppRegisteredMemory_t mem, int* rank);
/* Each getter returns mscclppInvalidArgument for a NULL argument. */

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_MEMORY_H_ */
