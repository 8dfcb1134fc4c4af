/* SPDX-License-Identifier: MIT */
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>

#include "core/log.h"

static _Thread_local char lastError[1024];

const char* mscclppGetErrorString(mscclppResult_t result) {
  switch (result) {
    case mscclppSuccess: return "no error";
    case mscclppUnhandledCudaError: return "unhandled cuda error";
    case mscclppSystemError: return "unhandled system error";
    case mscclppInternalError: return "internal error";
    case mscclppInvalidArgument: return "invalid argument";
    case mscclppInvalidUsage: return "invalid usage";
    case mscclppRemoteError: return "remote process exited or there was a network error";
    case mscclppInProgress: return "operation in progress";
    case mscclppTimeout: return "timeout";
    case mscclppAborted: return "aborted";
    case mscclppNumResults: break;
  }
  return "unknown result";
}

const char* mscclppGetLastError(void) { return lastError; }

mscclppResult_t mscclppGetVersion(int* version) {
  if (version == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_INIT, "mscclppGetVersion: version is NULL");
  *version = MSCCLPP_VERSION;
  return mscclppSuccess;
}

static mscclppResult_t record(const char* file, int line, int level, mscclppResult_t res, unsigned subsys,
                              const char* fmt, va_list ap) {
  vsnprintf(lastError, sizeof(lastError), fmt, ap);
  if (mscclppLogEnabled(level, subsys))
    mscclppLogPrint(level, subsys, file, line, "%s (%s)", lastError, mscclppGetErrorString(res));
  return res;
}

mscclppResult_t mscclppErrAt(const char* file, int line, mscclppResult_t res, unsigned subsys, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  record(file, line, MSCCLPP_LOG_LEVEL_WARN, res, subsys, fmt, ap);
  va_end(ap);
  return res;
}

mscclppResult_t mscclppErrQuietAt(const char* file, int line, mscclppResult_t res, unsigned subsys, const char* fmt,
                                  ...) {
  va_list ap;
  va_start(ap, fmt);
  record(file, line, MSCCLPP_LOG_LEVEL_INFO, res, subsys, fmt, ap);
  va_end(ap);
  return res;
}
