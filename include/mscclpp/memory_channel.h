/* SPDX-License-Identifier: MIT */
/*
 * Memory channels, the host side. Device side (put/get, read/write,
 * signal/wait/poll, LL packets): mscclpp/memory_channel_device.h.
 *
 * A memory channel maps the peer's memory into this rank's kernels: on a GPU
 * the peer's device memory through CUDA IPC (connection transport CudaIpc),
 * on the host backend the peer's host shared memory (HostShm, memory from
 * mscclppMemAlloc(..., mscclppMemKindHostShared, ...)). Kernels then load
 * and store it directly; no proxy is involved.
 *
 *   mscclppMemoryChannelConfig cfg = MSCCLPP_MEMORY_CHANNEL_CONFIG_INITIALIZER;
 *   cfg.tag = 9; cfg.local = myMem;                    (both ranks)
 *   mscclppMemoryChannelCreate(comm, conn, &cfg, &ch);  (both ranks)
 *   mscclppMemoryChannelGetDeviceHandle(ch, &h);        -> kernel
 */
#ifndef MSCCLPP_MEMORY_CHANNEL_H_
#define MSCCLPP_MEMORY_CHANNEL_H_

#include <stddef.h>

#include "mscclpp/comm.h"
#include "mscclpp/connection.h"
#include "mscclpp/core.h"
#include "mscclpp/memory.h"
#include "mscclpp/memory_channel_device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mscclppMemoryChannel* mscclppMemoryChannel_t;

/* Start from MSCCLPP_MEMORY_CHANNEL_CONFIG_INITIALIZER. */
typedef struct {
  size_t structSize;               /* sizeof(mscclppMemoryChannelConfig) */
  int tag;                         /* both ranks pass the same */
  mscclppRegisteredMemory_t local; /* this rank's memory: the handle's src, and the peer's dst */
} mscclppMemoryChannelConfig;

#define MSCCLPP_MEMORY_CHANNEL_CONFIG_INITIALIZER {sizeof(mscclppMemoryChannelConfig), 0, NULL}

/* Build a memory channel to the peer of `conn` (possibly this rank). Both
 * ranks call it with the same tag: it sends this rank's memory record and
 * semaphore to the peer and opens the peer's (blocking, bounded by
 * MSCCLPP_TIMEOUT). The peer's memory must be one this rank's kernels can
 * load and store: device memory over CudaIpc, host shared (or pinned) memory
 * over HostShm. The ranks also tell each other where their kernels run:
 * when both run on the same CUDA device (ranks sharing a GPU under MPS) and
 * both memories and semaphores are device memory of it, the handle's
 * signal/wait use gpu-scope release/acquire (sem.scope), otherwise system
 * scope; so launch the kernels that use the handle on the communicator's
 * device (the one current when it first made channels), as for every
 * channel. Errors: mscclppInvalidArgument (NULL, bad structSize, memory
 * of another communicator or not registered for the connection's
 * transport), mscclppInvalidUsage (the peer's memory cannot be mapped for
 * direct access, e.g. plain malloc memory of another process),
 * mscclppRemoteError, and errors of allocation, mscclppMemoryOpen and the
 * bootstrap. *channel is written only on success. */
MSCCLPP_API mscclppResult_t mscclppMemoryChannelCreate(mscclppComm_t comm, mscclppConnection_t conn,
                                                       const mscclppMemoryChannelConfig* config,
                                                       mscclppMemoryChannel_t* channel);

/* Free the channel and close the peer's memory (after the kernels that use
 * it have returned). mscclppInvalidArgument for NULL. */
MSCCLPP_API mscclppResult_t mscclppMemoryChannelDestroy(mscclppMemoryChannel_t channel);

/* The handle kernels use (copy it by value). */
MSCCLPP_API mscclppResult_t mscclppMemoryChannelGetDeviceHandle(mscclppMemoryChannel_t channel,
                                                                mscclppMemoryChannelDeviceHandle* handle);

/* sizeof(mscclppMemoryChannelDeviceHandle) as this library was built: for bindings that hold the
 * handle as bytes (the Python package) and must not guess its layout. */
MSCCLPP_API size_t mscclppMemoryChannelDeviceHandleSize(void);

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_MEMORY_CHANNEL_H_ */
