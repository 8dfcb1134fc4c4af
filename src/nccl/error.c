/* SPDX-License-Identifier: MIT */
/*
 * NCCL's statuses on mscclpp's: the mapping of mscclpp's statuses to
 * NCCL's, failures recorded as the last error (mscclppNcclErr and its
 * kin), ncclGetErrorString, ncclGetLastError, and ncclResetDebugInit (the
 * log read again from the environment).
 */
#include <stdarg.h>
#include <stdio.h>

#include "core/error.h"
#include "core/log.h"
#include "core/params.h"
#include "nccl/nccl_internal.h"

/* ---- errors ------------------------------------------------------------------------ */

ncclResult_t mscclppNcclFromMscclpp(mscclppResult_t res) {
  switch (res) {
    case mscclppSuccess: return ncclSuccess;
    case mscclppUnhandledCudaError: return ncclUnhandledCudaError;
    case mscclppSystemError: return ncclSystemError;
    case mscclppInternalError: return ncclInternalError;
    case mscclppInvalidArgument: return ncclInvalidArgument;
    case mscclppInvalidUsage: return ncclInvalidUsage;
    case mscclppRemoteError: return ncclRemoteError;
    case mscclppInProgress: return ncclInProgress;
    case mscclppTimeout: return ncclRemoteError; /* a peer did not answer in MSCCLPP_TIMEOUT */
    case mscclppAborted: return ncclRemoteError; /* the communicator's work was abandoned */
    case mscclppNumResults: break;
  }
  return ncclInternalError;
}

ncclResult_t mscclppNcclErrAt(const char* file, int line, ncclResult_t res, const char* fmt, ...) {
  char text[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  (void)mscclppErrAt(file, line, (mscclppResult_t)res, MSCCLPP_LOG_NCCL, "%s", text);
  return res;
}

ncclResult_t mscclppNcclErrWrapAt(const char* file, int line, mscclppResult_t res, const char* fmt, ...) {
  char context[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(context, sizeof(context), fmt, ap);
  va_end(ap);
  return mscclppNcclFromMscclpp(mscclppErrWrapAt(file, line, res, MSCCLPP_LOG_NCCL, "%s", context));
}

ncclResult_t mscclppNcclErrAgain(ncclResult_t res, const char* fmt, ...) {
  char text[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  (void)mscclppErrAgain((mscclppResult_t)res, MSCCLPP_LOG_NCCL, "%s", text);
  return res;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the mscclpp developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    case ncclNumResults: break;
  }
  return "unknown result code";
}
NCCL_PROFILING_ALIAS(ncclGetErrorString);

const char* ncclGetLastError(ncclComm_t comm) {
  if (comm != NULL && comm->magic == MSCCLPP_NCCL_COMM_MAGIC) {
    pthread_mutex_lock(&comm->lock);
    int has = comm->initError[0] != '\0';
    pthread_mutex_unlock(&comm->lock);
    if (has) return comm->initError;
  }
  return mscclppGetLastError();
}
NCCL_PROFILING_ALIAS(ncclGetLastError);

void ncclResetDebugInit(void) {
  struct mscclppParams params;
  if (mscclppParamsLoad(&params) == mscclppSuccess) mscclppLogConfigure(&params);
}
NCCL_PROFILING_ALIAS(ncclResetDebugInit);
/* Exported by NVIDIA's library too; same thing. */
MSCCLPP_NCCL_API void ncclResetDebugInitInternal(void);
void ncclResetDebugInitInternal(void) { ncclResetDebugInit(); }
