/* SPDX-License-Identifier: MIT */
#include "gpu/gpu.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"

#ifdef MSCCLPP_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#ifdef MSCCLPP_HAVE_CUDA
/* The devices a process sees do not change while it runs (CUDA reads
 * CUDA_VISIBLE_DEVICES once), and this is asked on every collective call: the
 * driver is probed once per process, and a missing one logged once, not on
 * every call. */
static pthread_once_t probeOnce = PTHREAD_ONCE_INIT;
static int probedCount;

static void probeDevices(void) {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    (void)cudaGetLastError(); /* clear the sticky-free error */
    if (err == cudaErrorNoDevice)
      MSCCLPP_INFO(MSCCLPP_LOG_GPU, "no GPU found: using the host backend");
    else
      MSCCLPP_INFO(MSCCLPP_LOG_GPU, "no GPU driver: using the host backend (CUDA says: %s)", cudaGetErrorString(err));
    n = 0;
  }
  probedCount = n;
}
#endif

int mscclppGpuDeviceCount(void) {
#ifdef MSCCLPP_HAVE_CUDA
  pthread_once(&probeOnce, probeDevices);
  return probedCount;
#else
  return 0;
#endif
}

static mscclppResult_t checkDev(int dev) {
  int n = mscclppGpuDeviceCount();
  if (dev < 0 || dev >= n)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_GPU, "CUDA device %d does not exist (%d found)", dev, n);
  return mscclppSuccess;
}

mscclppResult_t mscclppGpuPciBusId(int dev, char* buf, size_t len) {
  MSCCLPP_RETURN_ON_ERROR(checkDev(dev));
#ifdef MSCCLPP_HAVE_CUDA
  char id[32];
  cudaError_t err = cudaDeviceGetPCIBusId(id, (int)sizeof(id), dev);
  if (err != cudaSuccess)
    return mscclppErr(mscclppUnhandledCudaError, MSCCLPP_LOG_GPU, "cudaDeviceGetPCIBusId(%d): %s", dev,
                      cudaGetErrorString(err));
  /* CUDA prints "0000:3B:00.0"; sysfs uses lower case. */
  for (char* p = id; *p; p++)
    if (*p >= 'A' && *p <= 'F') *p = (char)(*p - 'A' + 'a');
  snprintf(buf, len, "%s", id);
  return mscclppSuccess;
#else
  (void)buf;
  (void)len;
  return mscclppInternalError;
#endif
}

#ifdef MSCCLPP_HAVE_CUDA
/* cudaGetDeviceProperties of an index checkDev passed, its failure logged. */
static mscclppResult_t deviceProps(int dev, struct cudaDeviceProp* prop) {
  cudaError_t err = cudaGetDeviceProperties(prop, dev);
  if (err != cudaSuccess)
    return mscclppErr(mscclppUnhandledCudaError, MSCCLPP_LOG_GPU, "cudaGetDeviceProperties(%d): %s", dev,
                      cudaGetErrorString(err));
  return mscclppSuccess;
}
#endif

mscclppResult_t mscclppGpuUuid(int dev, uint8_t uuid[16]) {
  MSCCLPP_RETURN_ON_ERROR(checkDev(dev));
#ifdef MSCCLPP_HAVE_CUDA
  struct cudaDeviceProp prop;
  MSCCLPP_RETURN_ON_ERROR(deviceProps(dev, &prop));
  memcpy(uuid, prop.uuid.bytes, 16);
  return mscclppSuccess;
#else
  (void)uuid;
  return mscclppInternalError;
#endif
}

mscclppResult_t mscclppPciNumaNode(const char* busId, int* node) {
  if (busId == NULL || node == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_GPU, "mscclppPciNumaNode: NULL argument");
  char path[256];
  snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/numa_node", busId);
  FILE* f = fopen(path, "r");
  int v = -1;
  if (f == NULL) {
    MSCCLPP_INFO(MSCCLPP_LOG_GPU, "cannot read %s (%s): NUMA node unknown", path, strerror(errno));
  } else {
    if (fscanf(f, "%d", &v) != 1) v = -1;
    fclose(f);
  }
  *node = v < 0 ? -1 : v;
  return mscclppSuccess;
}

mscclppResult_t mscclppGpuNumaNode(int dev, int* node) {
  if (node == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_GPU, "mscclppGpuNumaNode: node is NULL");
  char busId[32];
  MSCCLPP_RETURN_ON_ERROR(mscclppGpuPciBusId(dev, busId, sizeof(busId)));
  return mscclppPciNumaNode(busId, node);
}

mscclppResult_t mscclppGpuDescribe(int dev, char* buf, size_t len) {
  if (buf == NULL || len == 0)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_GPU, "mscclppGetDeviceDescription: empty buffer");
  MSCCLPP_RETURN_ON_ERROR(checkDev(dev));
#ifdef MSCCLPP_HAVE_CUDA
  struct cudaDeviceProp prop;
  MSCCLPP_RETURN_ON_ERROR(deviceProps(dev, &prop));
  char busId[32] = "?";
  int numa = -1;
  if (mscclppGpuPciBusId(dev, busId, sizeof(busId)) == mscclppSuccess) mscclppPciNumaNode(busId, &numa);
  snprintf(buf, len, "%s, sm_%d%d, %d SMs, %.1f GiB, pci %s, numa node %d", prop.name, prop.major, prop.minor,
           prop.multiProcessorCount, (double)prop.totalGlobalMem / (1024.0 * 1024 * 1024), busId, numa);
  return mscclppSuccess;
#else
  return mscclppInternalError;
#endif
}

/* ---- the public face (mscclpp/core.h) ---- */

MSCCLPP_API mscclppResult_t mscclppGetDeviceCount(int* count) {
  if (count == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_GPU, "mscclppGetDeviceCount: count is NULL");
  *count = mscclppGpuDeviceCount();
  return mscclppSuccess;
}

MSCCLPP_API mscclppResult_t mscclppGetDeviceDescription(int dev, char* buf, size_t len) {
  return mscclppGpuDescribe(dev, buf, len);
}

/* Parse a sysfs cpulist ("0-3,8,10-11") into a CPU set. */
static int parseCpuList(const char* s, cpu_set_t* set) {
  CPU_ZERO(set);
  int count = 0;
  while (*s && *s != '\n') {
    char* end;
    long a = strtol(s, &end, 10);
    if (end == s) return -1;
    long b = a;
    s = end;
    if (*s == '-') {
      b = strtol(s + 1, &end, 10);
      if (end == s + 1) return -1;
      s = end;
    }
    for (long c = a; c <= b && c < CPU_SETSIZE; c++) {
      CPU_SET((int)c, set);
      count++;
    }
    if (*s == ',') s++;
  }
  return count;
}

mscclppResult_t mscclppCpuBindNumaNode(int node) {
  if (node < 0) {
    MSCCLPP_INFO(MSCCLPP_LOG_GPU, "NUMA node unknown (-1): thread not bound");
    return mscclppSuccess;
  }
  char path[128], line[4096];
  snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/cpulist", node);
  FILE* f = fopen(path, "r");
  if (f == NULL)
    return mscclppErr(mscclppSystemError, MSCCLPP_LOG_GPU, "cannot read %s: %s", path, strerror(errno));
  char* got = fgets(line, sizeof(line), f);
  fclose(f);
  cpu_set_t set;
  if (got == NULL || parseCpuList(line, &set) <= 0)
    return mscclppErr(mscclppSystemError, MSCCLPP_LOG_GPU, "%s holds no CPU list", path);
  if (sched_setaffinity(0, sizeof(set), &set) != 0)
    return mscclppErr(mscclppSystemError, MSCCLPP_LOG_GPU, "sched_setaffinity to NUMA node %d: %s", node,
                      strerror(errno));
  MSCCLPP_INFO(MSCCLPP_LOG_GPU, "thread bound to NUMA node %d (cpus %s)", node, line);
  return mscclppSuccess;
}

