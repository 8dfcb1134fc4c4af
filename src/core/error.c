/* SPDX-License-Identifier: MIT */
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/log.h"

static _Thread_local char lastError[1024];
static _Thread_local int lastErrorShown;

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

MSCCLPP_API int mscclppLastErrorShown(void) { return lastErrorShown; }

static int shownAt(int level, unsigned subsys) { return mscclppLogEnabled(level, subsys) && mscclppLogToStderr(); }

static mscclppResult_t record(const char* file, int line, int level, mscclppResult_t res, unsigned subsys,
                              const char* fmt, va_list ap) {
  vsnprintf(lastError, sizeof(lastError), fmt, ap);
  lastErrorShown = shownAt(level, subsys);
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

mscclppResult_t mscclppErrWrapAt(const char* file, int line, mscclppResult_t res, unsigned subsys, const char* fmt,
                                 ...) {
  char context[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(context, sizeof(context), fmt, ap);
  va_end(ap);
  if (lastError[0] == '\0') return mscclppErrAt(file, line, res, subsys, "%s", context);
  char reason[sizeof(lastError)];
  memcpy(reason, lastError, sizeof(reason));
  int n = snprintf(lastError, sizeof(lastError), "%s: %s", context, reason);
  if (n >= (int)sizeof(lastError)) memcpy(lastError + sizeof(lastError) - 4, "...", 4); /* cut: say so */
  return res;
}

mscclppResult_t mscclppErrAgain(mscclppResult_t res, unsigned subsys, const char* fmt, ...) {
  char text[sizeof(lastError)]; /* the arguments may be the last error itself */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  memcpy(lastError, text, sizeof(lastError));
  lastErrorShown = shownAt(MSCCLPP_LOG_LEVEL_WARN, subsys);
  return res;
}
