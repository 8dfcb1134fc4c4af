/* SPDX-License-Identifier: MIT */
/*
 * Port channels, the host side: building them, and the communicator's
 * proxy that serves them. Device side: mscclpp/port_channel_device.h.
 *
 * A communicator has one trigger FIFO and one proxy thread (on the device
 * that was current at its first memory or channel call) for all its port
 * channels. The proxy's executor maps each trigger's memory ids and
 * semaphore id to registered memories and to the channel's connection:
 *   DATA -> mscclppConnectionWrite   FLAG -> mscclppConnectionSignal
 *   SYNC -> every copy issued so far complete at its destination
 * and reports completion to the FIFO (a kernel's flush returns).
 *
 *   rank A                                       rank B
 *   mscclppConnectionCreate(comm, B, tag, ...)   mscclppConnectionCreate(comm, A, tag, ...)
 *   mscclppMemoryRegister(comm, bufA, ...)       mscclppMemoryRegister(comm, bufB, ...)
 *   cfg.local = memA; cfg.tag = 7                cfg.local = memB; cfg.tag = 7
 *   mscclppPortChannelCreate(comm, conn, &cfg, &ch)  (same, both sides)
 *   mscclppPortChannelGetDeviceHandle(ch, &h)    ... kernel: put(h.dst, ., h.src, ., n),
 *                                                    signal; peer kernel: wait
 *   mscclppPortChannelDestroy(ch)
 *
 * Creation starts the proxy (if it is not running); mscclppCommProxyStop
 * stops it (drains what was pushed), mscclppCommProxyStart starts it again.
 * The connection must stay alive while the channel does, and is used by the
 * proxy thread only (issue no operation on it from other threads meanwhile).
 */
#ifndef MSCCLPP_PORT_CHANNEL_H_
#define MSCCLPP_PORT_CHANNEL_H_

#include <stddef.h>
#include <stdint.h>

#include "mscclpp/comm.h"
#include "mscclpp/connection.h"
#include "mscclpp/core.h"
#include "mscclpp/memory.h"
#include "mscclpp/port_channel_device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mscclppPortChannel* mscclppPortChannel_t;

/* Where a channel's inbound semaphore (the counter the peer's proxy signals
 * and this rank's kernel polls) lives. */
typedef enum {
  /* The lowest-latency choice: pinned host memory for CUDA IPC between
   * GPUs and for the network; host shared memory on the host backend. */
  mscclppPortSemaphoreAuto = 0,
  /* Device memory on a GPU (CUDA IPC): every signal is a stream-ordered
   * write (cuStreamWriteValue64) through the driver; the kernel polls local
   * memory. */
  mscclppPortSemaphoreDevice = 1,
  /* Pinned host memory: the peer's proxy stores a signal with the CPU when
   * none of its copies is in flight, else with a stream-ordered write
   * behind them; the kernel polls over PCIe (MSCCLPP_HOST_POLL_DEPTH reads
   * in flight). */
  mscclppPortSemaphoreHostPinned = 2
} mscclppPortSemaphoreMem;

/* Start from MSCCLPP_PORT_CHANNEL_CONFIG_INITIALIZER. */
typedef struct {
  size_t structSize;                   /* sizeof(mscclppPortChannelConfig) */
  int tag;                             /* both ranks pass the same; channels of one pair need different tags or order */
  mscclppRegisteredMemory_t local;     /* this rank's memory: the channel's src, and the peer's dst */
  mscclppPortSemaphoreMem semaphoreMem;
} mscclppPortChannelConfig;

#define MSCCLPP_PORT_CHANNEL_CONFIG_INITIALIZER \
  {sizeof(mscclppPortChannelConfig), 0, NULL, mscclppPortSemaphoreAuto}

/* Build a port channel to the peer of `conn` (possibly this rank). Both
 * ranks call it with the same tag; it sends this rank's memory record and
 * semaphore to the peer and opens the peer's (blocking, bounded by
 * MSCCLPP_TIMEOUT), registers both memories with the proxy (dst = the
 * peer's, src = config->local) and a semaphore, and starts the proxy.
 * Errors: mscclppInvalidArgument (NULL, bad structSize, memory of another
 * communicator or not registered for the connection's transport, an
 * unknown semaphoreMem), mscclppInvalidUsage (more than 256 port channels or 512
 * memories at a time per communicator, HostPinned without a GPU), mscclppAborted,
 * mscclppRemoteError (the peer sent something invalid), errors of
 * allocation, mscclppMemoryOpen and the bootstrap. *channel is written only
 * on success. */
MSCCLPP_API mscclppResult_t mscclppPortChannelCreate(mscclppComm_t comm, mscclppConnection_t conn,
                                                     const mscclppPortChannelConfig* config,
                                                     mscclppPortChannel_t* channel);

/* Free the channel: its semaphore id, and memory ids no other channel uses,
 * become free for later channels. Call it after the kernels that use it
 * have returned and, for the peer's sake, after a barrier. Stops and
 * restarts the proxy (draining what was pushed). mscclppInvalidArgument for
 * NULL; mscclppTimeout (channel kept) when the proxy does not stop. */
MSCCLPP_API mscclppResult_t mscclppPortChannelDestroy(mscclppPortChannel_t channel);

/* The handle kernels use (copy it by value). mscclppInvalidArgument for
 * NULL. */
MSCCLPP_API mscclppResult_t mscclppPortChannelGetDeviceHandle(mscclppPortChannel_t channel,
                                                              mscclppPortChannelDeviceHandle* handle);

/* A memory id for puts of any port channel of `comm` beyond the two each
 * channel carries: local memory (a source) or a peer's opened memory (a
 * destination). Adding the same handle twice gives the same id. The handle
 * must outlive the communicator's proxy use of it.
 * mscclppInvalidArgument (NULL, memory of another communicator),
 * mscclppInvalidUsage (512 memories exceeded). */
MSCCLPP_API mscclppResult_t mscclppPortChannelAddMemory(mscclppComm_t comm, mscclppRegisteredMemory_t mem,
                                                        uint32_t* id);

/* Start the communicator's proxy thread (idempotent; port channel creation
 * does it). mscclppAborted after an abort; allocation errors. */
MSCCLPP_API mscclppResult_t mscclppCommProxyStart(mscclppComm_t comm);

/* Stop it after it has carried out every trigger already pushed
 * (idempotent). Kernels that push afterwards wait until it is started again
 * (or time out). mscclppTimeout when it does not stop in time. */
MSCCLPP_API mscclppResult_t mscclppCommProxyStop(mscclppComm_t comm);

/* Raise the communicator's abort flag with `reason` (may be NULL): every
 * wait of its kernels, proxy and host calls returns mscclppAborted, and
 * mscclppCommGetAsyncError reports mscclppAborted. The communicator can
 * still be destroyed. */
MSCCLPP_API mscclppResult_t mscclppCommAbort(mscclppComm_t comm, const char* reason);

/* sizeof(mscclppPortChannelDeviceHandle) as this library was built: for bindings that hold the
 * handle as bytes (the Python package) and must not guess its layout. */
MSCCLPP_API size_t mscclppPortChannelDeviceHandleSize(void);

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_PORT_CHANNEL_H_ */
