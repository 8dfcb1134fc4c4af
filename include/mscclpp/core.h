/* SPDX-License-Identifier: MIT */
/*
 * mscclpp core: status codes, error text, version, parameters.
 *
 * This header compiles as C11 and as C++. Every public function of the
 * library returns an mscclppResult_t; on failure the reason is logged once
 * (where it was decided) and can be read back with mscclppGetLastError().
 */
#ifndef MSCCLPP_CORE_H_
#define MSCCLPP_CORE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the functions the shared library exports (the rest is hidden). */
#if defined(__GNUC__) || defined(__clang__)
#define MSCCLPP_API __attribute__((visibility("default")))
#else
#define MSCCLPP_API
#endif

#define MSCCLPP_MAJOR 0
#define MSCCLPP_MINOR 1
#define MSCCLPP_PATCH 0
/* MAJOR*10000 + MINOR*100 + PATCH */
#define MSCCLPP_VERSION (MSCCLPP_MAJOR * 10000 + MSCCLPP_MINOR * 100 + MSCCLPP_PATCH)

/* Status codes. Values 0..7 are the seed's (and NCCL's); Timeout and Aborted
 * are ours. Never renumber: they cross process and ABI boundaries. */
typedef enum {
  mscclppSuccess = 0,
  mscclppUnhandledCudaError = 1, /* a CUDA call failed */
  mscclppSystemError = 2,        /* a system call failed (socket, memory, thread) */
  mscclppInternalError = 3,      /* a bug in mscclpp */
  mscclppInvalidArgument = 4,    /* a bad argument (NULL, out of range, malformed) */
  mscclppInvalidUsage = 5,       /* a call in the wrong state, or not supported */
  mscclppRemoteError = 6,        /* a peer failed, left, or sent something invalid */
  mscclppInProgress = 7,         /* a non-blocking operation has not completed yet */
  mscclppTimeout = 8,            /* a bounded wait ran past MSCCLPP_TIMEOUT */
  mscclppAborted = 9,            /* the operation was abandoned because of an abort */
  mscclppNumResults = 10
} mscclppResult_t;

/* A fixed, human-readable name for a status ("invalid argument"). Never NULL;
 * an unknown value gives "unknown result". */
MSCCLPP_API const char* mscclppGetErrorString(mscclppResult_t result);

/* The reason of the last failure decided on the calling thread, e.g.
 * "connect to 10.0.0.2:29500 failed: Connection refused". Empty string when
 * no failure happened on this thread. The text stays valid until the next
 * failing call on the same thread. */
MSCCLPP_API const char* mscclppGetLastError(void);

/* Library version as MSCCLPP_VERSION computes it. version must not be NULL. */
MSCCLPP_API mscclppResult_t mscclppGetVersion(int* version);

/* 1 when the calling thread's last error was also printed on stderr by the
 * library's log when it happened (MSCCLPP_DEBUG lets it through, and the log
 * goes to stderr), so that a program printing errors for a person need not
 * print it twice; 0 when it must print it itself. */
MSCCLPP_API int mscclppLastErrorShown(void);

/* ---- The machine ---------------------------------------------------------- */

/* The GPUs this process can use: 0 without CUDA support in this build, a
 * driver or a device (the host backend then runs everything). The driver is
 * asked once per process. mscclppInvalidArgument for NULL. */
MSCCLPP_API mscclppResult_t mscclppGetDeviceCount(int* count);

/* One line about device `dev` (0 <= dev < the count): its name, compute
 * capability, SMs, memory, PCI bus id and NUMA node, into buf (len bytes,
 * cut to fit). mscclppInvalidArgument for a device that does not exist or
 * an empty buffer. */
MSCCLPP_API mscclppResult_t mscclppGetDeviceDescription(int dev, char* buf, size_t len);

/* ---- Tracing --------------------------------------------------------------
 * With MSCCLPP_TRACE set (README, "Tracing"), an application's own spans go
 * into this process's trace beside the library's events, on the calling
 * thread's track, for example a benchmark's measured phases:
 *
 *   uint64_t t0 = mscclppTraceStart();          // 0 when nothing is traced
 *   ... the work ...
 *   if (t0 != 0) mscclppTraceEnd(t0, "step", "forward", 1);
 *
 * Free when tracing is off (one load). */

/* The trace's clock now, or 0 when no trace is being recorded. */
MSCCLPP_API uint64_t mscclppTraceStart(void);

/* Record the span from t0 (mscclppTraceStart's) to now, named `name`
 * (category "user"), with the arguments `detail` (text; NULL: "") and
 * `value`. The strings are copied; each distinct one is kept until the
 * process ends, so give a few names and details, not a new one per call.
 * Does nothing for t0 0 or a NULL name. */
MSCCLPP_API void mscclppTraceEnd(uint64_t t0, const char* name, const char* detail, uint64_t value);

/* ---- Parameters ----------------------------------------------------------
 * Every MSCCLPP_* environment variable the library reads is a row of one
 * table. Values are read when a communicator is created (and by the tools),
 * never cached behind the caller's back. */
typedef struct {
  const char* name;         /* "MSCCLPP_TIMEOUT" */
  const char* type;         /* "int", "float" or "string" */
  const char* defaultValue; /* as text */
  const char* help;         /* one line */
} mscclppParamInfo;

/* Number of rows in the parameter table. */
MSCCLPP_API int mscclppParamCount(void);

/* Row index (0 <= index < mscclppParamCount()) of the table into *info.
 * Returns mscclppInvalidArgument for an index out of range or NULL info. */
MSCCLPP_API mscclppResult_t mscclppParamGetInfo(int index, mscclppParamInfo* info);

/* Whether every parameter set in the environment parses as its type, as a
 * communicator made now would read them: mscclppSuccess, or
 * mscclppInvalidArgument with a message naming the first variable that does
 * not and its value (mscclppGetLastError). */
MSCCLPP_API mscclppResult_t mscclppParamsCheck(void);

/* ---- The network ---------------------------------------------------------
 * What the network transport would open in this process with its
 * environment (MSCCLPP_NET_PROVIDER, MSCCLPP_NET_IFNAME, MSCCLPP_NET_SIGNAL),
 * opening no endpoint: mscclppSuccess and one line about the provider,
 * domain and signal path ("tcp;ofi_rxm on lo (...)") in buf (len bytes, cut
 * to fit), or the status a connection would fail with and the reason in
 * buf. mscclppInvalidArgument for a NULL or empty buffer, or for parameters
 * that do not parse (the reason in buf too). */
MSCCLPP_API mscclppResult_t mscclppGetNetDescription(char* buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_CORE_H_ */
