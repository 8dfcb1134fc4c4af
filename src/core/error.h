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

/* Pass up a failure that a lower layer logged when it decided it, adding
 * what this caller was doing: the thread's last error becomes
 * "<context>: <last error>" and nothing is logged again, so the reason is
 * logged once and the context still reaches mscclppGetLastError (and
 * ncclGetLastError). Returns res. When no reason was recorded (a lower layer
 * that failed without mscclppErr), the context is logged at WARN instead, so
 * that the failure is never silent. */
mscclppResult_t mscclppErrWrapAt(const char* file, int line, mscclppResult_t res, unsigned subsys, const char* fmt,
                                 ...) __attribute__((format(printf, 5, 6)));
#define mscclppErrWrap(res, subsys, ...) mscclppErrWrapAt(__FILE__, __LINE__, (res), (subsys), __VA_ARGS__)

/* Return again a failure that was logged earlier, where it was decided (on
 * another thread, or at an earlier call that remembered it): the text becomes
 * the calling thread's last error without a second log line. Returns res. */
mscclppResult_t mscclppErrAgain(mscclppResult_t res, unsigned subsys, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* mscclppLastErrorShown (mscclpp/core.h) is public: tools print a failure
 * the log has not shown already. */

#define MSCCLPP_RETURN_ON_ERROR(expr)        \
  do {                                       \
    mscclppResult_t ret_on_err_ = (expr);    \
    if (ret_on_err_ != mscclppSuccess) return ret_on_err_; \
  } while (0)

#endif /* MSCCLPP_SRC_CORE_ERROR_H_ */
