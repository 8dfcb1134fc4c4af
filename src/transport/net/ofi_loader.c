/* SPDX-License-Identifier: MIT */
/* libfabric's loader: dlopen, the exported functions, the version check. See
 * ofi_loader.h. */
#include "transport/net/ofi_loader.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "transport/net/net.h"

#if defined(__SANITIZE_THREAD__)
#define MSCCLPP_NET_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MSCCLPP_NET_TSAN 1
#endif
#endif
#ifdef MSCCLPP_NET_TSAN
/* ThreadSanitizer builds: libfabric is not instrumented, and a provider
 * places a peer's RMA writes into registered memory with plain copies
 * (what a NIC does with DMA), ordered only by the peer's actions, which TSan
 * cannot see across processes; it sees those copies through its memcpy
 * interceptor and calls them races (often with the stack of the writing
 * thread lost, so race: rules alone do not catch them). called_from_lib
 * makes TSan ignore what libfabric does through its interceptors: its
 * copies count as a device's, as they are. Every call into libfabric is
 * made with the endpoint's lock held, so no ordering of ours is lost. The
 * same rules are in scripts/tsan-suppressions.txt (test.sh); they are built
 * in here so that every TSan program using the network transport has them. */
const char* __tsan_default_suppressions(void);
const char* __tsan_default_suppressions(void) {
  return "called_from_lib:libfabric.so\nrace:libfabric.so\nsignal:libfabric.so\nmutex:libfabric.so\nmutex:_dl_call_fini\n";
}
#endif

static struct mscclppOfiLib lib;
static void* handle;
static char error[256];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void) {
  const char* names[] = {"libfabric.so.1", "libfabric.so"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && handle == NULL; i++)
    handle = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL) {
    snprintf(error, sizeof(error), "libfabric could not be loaded (dlopen libfabric.so.1: %s)", dlerror());
    return;
  }
  *(void**)&lib.getinfo = dlsym(handle, "fi_getinfo");
  *(void**)&lib.freeinfo = dlsym(handle, "fi_freeinfo");
  *(void**)&lib.dupinfo = dlsym(handle, "fi_dupinfo");
  *(void**)&lib.fabric = dlsym(handle, "fi_fabric");
  *(void**)&lib.strerror = dlsym(handle, "fi_strerror");
  *(void**)&lib.version = dlsym(handle, "fi_version");
  if (!lib.getinfo || !lib.freeinfo || !lib.dupinfo || !lib.fabric || !lib.strerror || !lib.version) {
    snprintf(error, sizeof(error), "libfabric.so.1 lacks fi_getinfo/fi_fabric/... (too old?)");
    dlclose(handle);
    handle = NULL;
    return;
  }
  if (lib.version() < OFI_VERSION(1, 9)) {
    snprintf(error, sizeof(error), "libfabric %u.%u is too old (1.9 or later needed)", OFI_MAJOR(lib.version()),
             OFI_MINOR(lib.version()));
    dlclose(handle);
    handle = NULL;
  }
}

const struct mscclppOfiLib* mscclppOfi(void) {
  pthread_once(&once, load);
  return handle != NULL ? &lib : NULL;
}

int mscclppNetLibAvailable(void) { return mscclppOfi() != NULL; }

const char* mscclppNetLibError(void) { return mscclppOfi() != NULL ? "" : error; }

uint32_t mscclppOfiApiVersion(void) {
  uint32_t run = lib.version();
  return run < OFI_ABI_VERSION ? run : OFI_ABI_VERSION;
}
