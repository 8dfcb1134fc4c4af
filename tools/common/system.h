/* SPDX-License-Identifier: MIT */
/* What the tools that run jobs share (mscclpp-run, mscclpp-perf) and the
 * library does not offer, because it is the launcher's business: a
 * monotonic deadline, random bytes for the job's secret, hex text, and
 * whether a CUDA MPS control daemon runs. */
#ifndef MSCCLPP_TOOLS_COMMON_SYSTEM_H_
#define MSCCLPP_TOOLS_COMMON_SYSTEM_H_

#include <stddef.h>
#include <stdint.h>

/* CLOCK_MONOTONIC in ns. */
uint64_t toolNowNs(void);

/* A point in time (CLOCK_MONOTONIC ns); UINT64_MAX: never. */
typedef struct {
  uint64_t ns;
} toolDeadline;
toolDeadline toolDeadlineIn(double seconds);
int toolDeadlinePassed(toolDeadline d);
/* Milliseconds left (0 once passed; INT32_MAX for never or far away). */
int toolDeadlineRemainingMs(toolDeadline d);

/* n bytes from the kernel's random source (getrandom): 0, or -1 with errno. */
int toolRandomBytes(void* buf, size_t n);
/* n bytes as 2n lower-case hex digits and a NUL, into out (2n + 1 bytes). */
void toolHexEncode(const uint8_t* in, size_t n, char* out);

/* 1 when a CUDA MPS control daemon answers on <pipeDir>/control (a
 * SOCK_SEQPACKET socket; the daemon logs the short visit, nothing more);
 * pipeDir NULL or empty: CUDA_MPS_PIPE_DIRECTORY, else the system default
 * /tmp/nvidia-mps. */
int toolMpsRunning(const char* pipeDir);

#endif /* MSCCLPP_TOOLS_COMMON_SYSTEM_H_ */
