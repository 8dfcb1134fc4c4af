/* SPDX-License-Identifier: MIT */
/* Semaphores (mscclpp/semaphore.h): allocation per kind and the host side,
 * which runs the same inline protocol as the device side. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "core/params.h"
#include "gpu/abort.h"
#include "gpu/gpu.h"
#include "mscclpp/semaphore.h"

struct mscclppSemaphore {
  mscclppSemaphoreKind kind;
  int device;
  double timeoutSec;
  struct mscclppAbort* abort;
  int ownsAbort;
  void* mappedHost; /* host-mapped (H2D) or plain host memory (H2H) block */
  void* mappedDev;
  void* devMem;                      /* device memory block (H2D, D2D) */
  mscclppSemaphoreDeviceHandle host; /* host view: H2H (all), H2D (signal side) */
  mscclppSemaphoreDeviceHandle dev;  /* kernel view: H2D (wait side), D2D (all) */
};

#define LINE(base, i) ((uint64_t*)((char*)(base) + (i) * MSCCLPP_CACHE_LINE))

static const char* kindName(mscclppSemaphoreKind kind) {
  switch (kind) {
    case mscclppSemaphoreHostToHost: return "host-to-host";
    case mscclppSemaphoreHostToDevice: return "host-to-device";
    case mscclppSemaphoreDeviceToDevice: return "device-to-device";
  }
  return "?";
}

mscclppResult_t mscclppSemaphoreCreate(const mscclppSemaphoreConfig* config, mscclppSemaphore_t* sem) {
  if (config == NULL || sem == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_CHANNEL, "mscclppSemaphoreCreate: NULL argument");
  if (config->structSize != sizeof(mscclppSemaphoreConfig))
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_CHANNEL,
                      "mscclppSemaphoreConfig.structSize is %zu, expected %zu: start from "
                      "MSCCLPP_SEMAPHORE_CONFIG_INITIALIZER",
                      config->structSize, sizeof(mscclppSemaphoreConfig));
  if (config->kind != mscclppSemaphoreHostToHost && config->kind != mscclppSemaphoreHostToDevice &&
      config->kind != mscclppSemaphoreDeviceToDevice)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_CHANNEL, "unknown semaphore kind %d", (int)config->kind);
  if (config->timeoutSec < 0)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_CHANNEL, "semaphore timeout %g s must be >= 0",
                      config->timeoutSec);
  struct mscclppParams params;
  MSCCLPP_RETURN_ON_ERROR(mscclppParamsLoad(&params));
  struct mscclppSemaphore* s = calloc(1, sizeof(*s));
  if (s == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_CHANNEL, "cannot allocate a semaphore");
  s->kind = config->kind;
  /* A host-to-host semaphore never touches a GPU. */
  s->device = (config->device < 0 || config->kind == mscclppSemaphoreHostToHost) ? MSCCLPP_HOST_BACKEND_DEVICE
                                                                                : config->device;
  s->timeoutSec = config->timeoutSec > 0 ? config->timeoutSec : params.timeout;
  int abortDevice = config->abort != NULL ? config->abort->device : s->device;
  mscclppResult_t res = mscclppAbortAcquire(config->abort, abortDevice, &s->abort, &s->ownsAbort);
  if (res != mscclppSuccess) goto fail_free_object;
  if (s->device >= 0 && s->abort->device != s->device) {
    res = mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_CHANNEL,
                     "abort object belongs to device %d but the semaphore is for device %d", s->abort->device,
                     s->device);
    goto fail_drop_abort;
  }

  switch (s->kind) {
    case mscclppSemaphoreHostToHost:
      res = mscclppGpuHostAllocMapped(MSCCLPP_HOST_BACKEND_DEVICE, 3 * MSCCLPP_CACHE_LINE, &s->mappedHost,
                                      &s->mappedDev);
      if (res != mscclppSuccess) goto fail_drop_abort;
      s->host.inbound = LINE(s->mappedHost, 0);
      s->host.expected = LINE(s->mappedHost, 1);
      s->host.outbound = s->host.inbound;
      s->host.outboundCount = LINE(s->mappedHost, 2);
      mscclppAbortWaitContext(s->abort, s->timeoutSec, 0, &s->host.wait);
      break;
    case mscclppSemaphoreHostToDevice:
      res = mscclppGpuHostAllocMapped(s->device, 2 * MSCCLPP_CACHE_LINE, &s->mappedHost, &s->mappedDev);
      if (res != mscclppSuccess) goto fail_drop_abort;
      res = mscclppGpuDeviceAlloc(s->device, MSCCLPP_CACHE_LINE, &s->devMem);
      if (res != mscclppSuccess) goto fail_free_mapped;
      s->host.outbound = LINE(s->mappedHost, 0);
      s->host.outboundCount = LINE(s->mappedHost, 1);
      mscclppAbortWaitContext(s->abort, s->timeoutSec, 0, &s->host.wait);
      s->dev.inbound = LINE(s->mappedDev, 0);
      s->dev.expected = LINE(s->devMem, 0);
      mscclppAbortWaitContext(s->abort, s->timeoutSec, 1, &s->dev.wait);
      break;
    case mscclppSemaphoreDeviceToDevice:
      res = mscclppGpuDeviceAlloc(s->device, 3 * MSCCLPP_CACHE_LINE, &s->devMem);
      if (res != mscclppSuccess) goto fail_drop_abort;
      s->dev.inbound = LINE(s->devMem, 0);
      s->dev.expected = LINE(s->devMem, 1);
      s->dev.outbound = s->dev.inbound;
      s->dev.outboundCount = LINE(s->devMem, 2);
      mscclppAbortWaitContext(s->abort, s->timeoutSec, 1, &s->dev.wait);
      break;
  }
  MSCCLPP_INFO(MSCCLPP_LOG_CHANNEL, "semaphore %p: %s, device %d", (void*)s, kindName(s->kind), s->device);
  *sem = s;
  return mscclppSuccess;

fail_free_mapped:
  mscclppGpuHostFreeMapped(s->device, s->mappedHost);
fail_drop_abort:
  mscclppAbortDrop(s->abort, s->ownsAbort);
fail_free_object:
  free(s);
  return res;
}

mscclppResult_t mscclppSemaphoreDestroy(mscclppSemaphore_t sem) {
  if (sem == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_CHANNEL, "mscclppSemaphoreDestroy: NULL");
  int mappedDevice = sem->kind == mscclppSemaphoreHostToHost ? MSCCLPP_HOST_BACKEND_DEVICE : sem->device;
  mscclppGpuHostFreeMapped(mappedDevice, sem->mappedHost);
  mscclppGpuDeviceFree(sem->device, sem->devMem);
  mscclppAbortDrop(sem->abort, sem->ownsAbort);
  free(sem);
  return mscclppSuccess;
}

mscclppResult_t mscclppSemaphoreSignal(mscclppSemaphore_t sem) {
  if (sem == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_CHANNEL, "mscclppSemaphoreSignal: NULL");
  if (sem->kind == mscclppSemaphoreDeviceToDevice)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_CHANNEL,
                      "a device-to-device semaphore is signalled by a kernel, not by the host");
  mscclppSemaphoreDeviceSignal(&sem->host);
  return mscclppSuccess;
}

static mscclppResult_t checkHostWaiter(mscclppSemaphore_t sem, const char* what) {
  if (sem == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_CHANNEL, "%s: NULL argument", what);
  if (sem->kind != mscclppSemaphoreHostToHost)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_CHANNEL, "%s: a %s semaphore is waited on by a kernel", what,
                      kindName(sem->kind));
  return mscclppSuccess;
}

mscclppResult_t mscclppSemaphoreWait(mscclppSemaphore_t sem) {
  MSCCLPP_RETURN_ON_ERROR(checkHostWaiter(sem, "mscclppSemaphoreWait"));
  mscclppResult_t res = mscclppSemaphoreDeviceWait(&sem->host);
  if (res == mscclppTimeout) {
    mscclppAbortPollDevice(sem->abort); /* record the reason the wait left in the error word */
    return mscclppErr(mscclppTimeout, MSCCLPP_LOG_CHANNEL, "semaphore %p: no signal within %g s", (void*)sem,
                      sem->timeoutSec);
  }
  if (res == mscclppAborted)
    return mscclppErrQuiet(mscclppAborted, MSCCLPP_LOG_CHANNEL, "semaphore %p: wait aborted", (void*)sem);
  return res;
}

mscclppResult_t mscclppSemaphorePoll(mscclppSemaphore_t sem, int* signaled) {
  MSCCLPP_RETURN_ON_ERROR(checkHostWaiter(sem, "mscclppSemaphorePoll"));
  if (signaled == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_CHANNEL, "mscclppSemaphorePoll: NULL");
  *signaled = mscclppSemaphoreDevicePoll(&sem->host);
  return mscclppSuccess;
}

mscclppResult_t mscclppSemaphoreGetDeviceHandle(mscclppSemaphore_t sem, mscclppSemaphoreDeviceHandle* handle) {
  if (sem == NULL || handle == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_CHANNEL, "mscclppSemaphoreGetDeviceHandle: NULL argument");
  if (sem->kind == mscclppSemaphoreHostToHost)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_CHANNEL, "a host-to-host semaphore has no device handle");
  *handle = sem->dev;
  return mscclppSuccess;
}
