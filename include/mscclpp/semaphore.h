/* SPDX-License-Identifier: MIT */
/*
 * Semaphores: 64-bit signal counters between the host and kernels
 * (mscclpp/semaphore_device.h describes the protocol). Three kinds:
 *   host-to-host      a host thread signals, a host thread waits
 *   host-to-device    the host (typically a proxy handler) signals, a kernel
 *                     waits; the counter is in host-mapped memory, so a
 *                     kernel's poll is one PCIe read
 *   device-to-device  a kernel signals, a kernel waits; counters in device
 *                     memory (later: the signaller's outbound points to a
 *                     peer's mapped inbound)
 * For now both sides live in one process and on one device. Every wait is
 * bounded by the timeout and returns early on abort.
 */
#ifndef MSCCLPP_SEMAPHORE_H_
#define MSCCLPP_SEMAPHORE_H_

#include <stddef.h>

#include "mscclpp/abort.h"
#include "mscclpp/core.h"
#include "mscclpp/semaphore_device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mscclppSemaphore* mscclppSemaphore_t;

typedef enum {
  mscclppSemaphoreHostToHost = 0,
  mscclppSemaphoreHostToDevice = 1,
  mscclppSemaphoreDeviceToDevice = 2
} mscclppSemaphoreKind;

/* Start from MSCCLPP_SEMAPHORE_CONFIG_INITIALIZER. */
typedef struct {
  size_t structSize;         /* sizeof(mscclppSemaphoreConfig) */
  mscclppSemaphoreKind kind;
  int device;                /* CUDA device of the kernel side; < 0: host backend */
  double timeoutSec;         /* bound of every wait; 0: MSCCLPP_TIMEOUT */
  mscclppAbort_t abort;      /* error domain (same device); NULL: a private one */
} mscclppSemaphoreConfig;

#define MSCCLPP_SEMAPHORE_CONFIG_INITIALIZER \
  {sizeof(mscclppSemaphoreConfig), mscclppSemaphoreHostToHost, -1, 0.0, NULL}

/* Create a semaphore with all counters 0. Errors: mscclppInvalidArgument (NULL
 * arguments, unknown kind, bad structSize, abort object of another device),
 * allocation failures. */
MSCCLPP_API mscclppResult_t mscclppSemaphoreCreate(const mscclppSemaphoreConfig* config, mscclppSemaphore_t* sem);

/* Free it (after the kernels that use it have returned). mscclppInvalidArgument
 * for NULL. */
MSCCLPP_API mscclppResult_t mscclppSemaphoreDestroy(mscclppSemaphore_t sem);

/* Host side: send one signal (host-to-host and host-to-device semaphores;
 * mscclppInvalidUsage for device-to-device). One thread at a time. */
MSCCLPP_API mscclppResult_t mscclppSemaphoreSignal(mscclppSemaphore_t sem);

/* Host side: wait for one signal and consume it (host-to-host only, else
 * mscclppInvalidUsage). mscclppTimeout after the timeout (recorded in the
 * abort object, which raises the abort flag), mscclppAborted when the flag
 * rises. One thread at a time. */
MSCCLPP_API mscclppResult_t mscclppSemaphoreWait(mscclppSemaphore_t sem);

/* Host side: consume one signal if it has arrived; *signaled = 1 if so,
 * else 0 (host-to-host only). */
MSCCLPP_API mscclppResult_t mscclppSemaphorePoll(mscclppSemaphore_t sem, int* signaled);

/* The handle kernels use: host-to-device (wait/poll side) and
 * device-to-device (both sides). mscclppInvalidUsage for host-to-host. */
MSCCLPP_API mscclppResult_t mscclppSemaphoreGetDeviceHandle(mscclppSemaphore_t sem,
                                                            mscclppSemaphoreDeviceHandle* handle);

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_SEMAPHORE_H_ */
