/* SPDX-License-Identifier: MIT */
/*
 * The trigger FIFO, host side: creation, the device handle kernels push
 * through (mscclpp/fifo_device.h), and the consumer calls a proxy uses.
 * Usually a proxy service (mscclpp/proxy.h) consumes the FIFO; the consumer
 * calls below are for users who run their own loop. A FIFO has one consumer
 * at a time.
 */
#ifndef MSCCLPP_FIFO_H_
#define MSCCLPP_FIFO_H_

#include <stddef.h>
#include <stdint.h>

#include "mscclpp/abort.h"
#include "mscclpp/core.h"
#include "mscclpp/fifo_device.h"
#include "mscclpp/trigger.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mscclppFifo* mscclppFifo_t;

/* How to create a FIFO. Start from MSCCLPP_FIFO_CONFIG_INITIALIZER. */
typedef struct {
  size_t structSize;    /* sizeof(mscclppFifoConfig): lets the struct grow */
  int device;           /* CUDA device whose kernels push; < 0: host backend */
  int size;             /* slots, a power of two in [2, 2^24]; 0: MSCCLPP_FIFO_SIZE */
  double timeoutSec;    /* bound of every wait; 0: MSCCLPP_TIMEOUT */
  mscclppAbort_t abort; /* error domain (same device); NULL: a private one */
} mscclppFifoConfig;

#define MSCCLPP_FIFO_CONFIG_INITIALIZER {sizeof(mscclppFifoConfig), -1, 0, 0.0, NULL}

/* Create a FIFO: slots, tail and completed counters in host-mapped memory,
 * head in device memory, all zero. Errors: mscclppInvalidArgument (NULL
 * arguments, a size that is not a power of two in range, a bad structSize,
 * an abort object of another device, bad MSCCLPP_* variables),
 * mscclppUnhandledCudaError / mscclppSystemError (allocation). */
MSCCLPP_API mscclppResult_t mscclppFifoCreate(const mscclppFifoConfig* config, mscclppFifo_t* fifo);

/* Free the FIFO. Refuses with mscclppInvalidUsage, freeing nothing, while a
 * proxy service serves it, or while pushed triggers were not consumed (a
 * kernel is still pushing) unless the abort flag is up. Call it after the
 * kernels that push have returned. mscclppInvalidArgument for NULL. */
MSCCLPP_API mscclppResult_t mscclppFifoDestroy(mscclppFifo_t fifo);

/* The handle kernels pass to mscclppFifoDevicePush/Sync/Flush. */
MSCCLPP_API mscclppResult_t mscclppFifoGetDeviceHandle(mscclppFifo_t fifo, mscclppFifoDeviceHandle* handle);

/* The FIFO's abort object (the one given in its config, or its own). */
MSCCLPP_API mscclppResult_t mscclppFifoGetAbort(mscclppFifo_t fifo, mscclppAbort_t* abort);

/* Number of slots. */
MSCCLPP_API mscclppResult_t mscclppFifoGetSize(mscclppFifo_t fifo, int* size);

/* Consumer: look at the next position. *ready = 1 and *trigger / *position
 * filled (commit bits cleared) when it holds a fresh trigger; *ready = 0
 * otherwise. One 16-byte load; no wait. */
MSCCLPP_API mscclppResult_t mscclppFifoPoll(mscclppFifo_t fifo, mscclppTrigger* trigger, uint64_t* position,
                                            int* ready);

/* Consumer: the trigger Poll returned is taken; publish the new tail at once
 * (a kernel's mscclppFifoDeviceSync on its position returns).
 * mscclppInvalidUsage when no fresh trigger is there. */
MSCCLPP_API mscclppResult_t mscclppFifoPop(mscclppFifo_t fifo);

/* Consumer: every position < `end` is complete at its destination (a
 * kernel's mscclppFifoDeviceFlush returns). end must not exceed the tail and must
 * not go back: mscclppInvalidArgument otherwise. */
MSCCLPP_API mscclppResult_t mscclppFifoComplete(mscclppFifo_t fifo, uint64_t end);

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_FIFO_H_ */
