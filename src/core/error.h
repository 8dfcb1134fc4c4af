/* SPDX-License-Identifier: MIT */
/*
 * Failing: one function that logs the reason once (at WARN, in a subsystem),
 * records it as the calling thread's last error, and returns the status, so
 * a failure reads `return mscclppErr(mscclppInvalidArgument, SUBSYS, "...")`.
 * Callers pass the status up with MSCCLPP_RETURN_ON_ERROR (which returns;
 * its name says so) or by hand when they must undo something first.
 */
#ifndef MSCCLPP_SRC_CORE_ERROR_H_
#define MSCCLPP_SRC_CORE_ERROR_H_

#include "mscclpp/core.h"

/* Log `fmt` at WARN in `subsys`, make it the thread's last error, return res. */
mscclppResult_t mscclppErrAt(const char* file, int line, mscclppResult_t res, unsigned subsys, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* The log line names the caller's file and line, where the failure was
 * decided. */
#define mscclppErr(res, subsys, ...) mscclppErrAt(__FILE__, __LINE__, (res), (subsys), __VA_ARGS__)

/* Same text handling, but logged at INFO: for failures that callers expect
 * and may recover from (a probe, a retry). */
mscclppResult_t mscclppErrQuietAt(const char* file, int line, mscclppResult_t res, unsigned subsys,
                                  const char* fmt, ...) __attribute__((format(printf, 5, 6)));
#define mscclppErrQuiet(res, subsys, ...) mscclppErrQuietAt(__FILE__, __LINE__, (res), (subsys), __VA_ARGS__)

#define MSCCLPP_RETURN_ON_ERROR(expr)        \
  do {                                       \
    mscclppResult_t ret_on_err_ = (expr);    \
    if (ret_on_err_ != mscclppSuccess) return ret_on_err_; \
  } while (0)

#endif /* MSCCLPP_SRC_CORE_ERROR_H_ */
