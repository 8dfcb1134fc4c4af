/* SPDX-License-Identifier: MIT */
/*
 * The abort object: one error domain shared by a communicator's FIFOs, proxy
 * services and semaphores.
 *
 * It holds an abort flag in host-mapped memory (kernels read it in every
 * bounded wait), a word in which a kernel records the first device-side error
 * (a timeout, an out-of-range trigger), and the first error of the domain as a
 * status code plus text. The first error wins; raising an error also raises
 * the flag, so every pending wait (host or device) returns mscclppAborted.
 * A communicator owns one; standalone FIFOs, proxies and semaphores take one
 * in their config (or create a private one when given NULL).
 */
#ifndef MSCCLPP_ABORT_H_
#define MSCCLPP_ABORT_H_

#include "mscclpp/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mscclppAbort* mscclppAbort_t;

/* Create an abort object for kernels of CUDA device `device`, or for the host
 * backend when device < 0. Errors: mscclppInvalidArgument (NULL abort),
 * mscclppUnhandledCudaError / mscclppSystemError (allocation). */
MSCCLPP_API mscclppResult_t mscclppAbortCreate(int device, mscclppAbort_t* abort);

/* Free it. mscclppInvalidUsage (and nothing freed) while a FIFO, proxy or
 * semaphore still uses it; mscclppInvalidArgument for NULL. */
MSCCLPP_API mscclppResult_t mscclppAbortDestroy(mscclppAbort_t abort);

/* Raise the flag and record (code, reason) unless an error was recorded
 * before (the first one wins). code must be a failure (not mscclppSuccess);
 * mscclppAborted with a reason like "aborted by the application" is the
 * plain "stop everything". reason may be NULL. Returns mscclppSuccess, or
 * mscclppInvalidArgument for a NULL abort or code mscclppSuccess. */
MSCCLPP_API mscclppResult_t mscclppAbortRaise(mscclppAbort_t abort, mscclppResult_t code, const char* reason);

/* The first error of the domain into *error (mscclppSuccess when none),
 * including one a kernel recorded that no proxy has picked up yet. When
 * *error is a failure, its text becomes the caller's mscclppGetLastError().
 * Returns mscclppInvalidArgument for NULL arguments. */
MSCCLPP_API mscclppResult_t mscclppAbortGetError(mscclppAbort_t abort, mscclppResult_t* error);

/* *isSet = 1 when the abort flag is up. */
MSCCLPP_API mscclppResult_t mscclppAbortIsSet(mscclppAbort_t abort, int* isSet);

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_ABORT_H_ */
