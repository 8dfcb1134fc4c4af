/* SPDX-License-Identifier: MIT */
/* The tools' clock, randomness, hex text and MPS probe (system.h). */
#include "system.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

uint64_t toolNowNs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

toolDeadline toolDeadlineIn(double seconds) {
  toolDeadline d = {UINT64_MAX}; /* more than 1e9 s (32 years): never */
  if (seconds <= 1e9) d.ns = toolNowNs() + (uint64_t)(seconds > 0 ? seconds * 1e9 : 0);
  return d;
}

int toolDeadlinePassed(toolDeadline d) { return d.ns != UINT64_MAX && toolNowNs() >= d.ns; }

int toolDeadlineRemainingMs(toolDeadline d) {
  if (d.ns == UINT64_MAX) return INT32_MAX;
  uint64_t now = toolNowNs();
  if (now >= d.ns) return 0;
  uint64_t ms = (d.ns - now + 999999) / 1000000;
  return ms > (uint64_t)INT32_MAX ? INT32_MAX : (int)ms;
}

int toolRandomBytes(void* buf, size_t n) {
  uint8_t* p = (uint8_t*)buf;
  while (n > 0) {
    ssize_t got = getrandom(p, n, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    p += got;
    n -= (size_t)got;
  }
  return 0;
}

void toolHexEncode(const uint8_t* in, size_t n, char* out) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = digits[in[i] >> 4];
    out[2 * i + 1] = digits[in[i] & 15];
  }
  out[2 * n] = '\0';
}

int toolMpsRunning(const char* pipeDir) {
  if (pipeDir == NULL || pipeDir[0] == '\0') pipeDir = getenv("CUDA_MPS_PIPE_DIRECTORY");
  if (pipeDir == NULL || pipeDir[0] == '\0') pipeDir = "/tmp/nvidia-mps";
  struct sockaddr_un a;
  memset(&a, 0, sizeof(a));
  a.sun_family = AF_UNIX;
  int n = snprintf(a.sun_path, sizeof(a.sun_path), "%s/control", pipeDir);
  if (n < 0 || (size_t)n >= sizeof(a.sun_path)) return 0;
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  int ok = connect(fd, (struct sockaddr*)&a, sizeof(a)) == 0;
  close(fd);
  return ok;
}
