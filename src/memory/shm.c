/* SPDX-License-Identifier: MIT */
/* Shared host memory in anonymous memory files. See shm.h. */
#include "memory/shm.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log.h"

size_t mscclppShmRoundUp(size_t size) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  if (size > SIZE_MAX - page) return 0;
  return (size + page - 1) / page * page;
}

mscclppResult_t mscclppShmCreate(size_t size, int* fd, void** base, size_t* mapSize) {
  size_t rounded = mscclppShmRoundUp(size);
  if (size == 0 || rounded == 0)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_MEM, "shared host memory of %zu bytes: bad size", size);
  int f = memfd_create("mscclpp-shm", MFD_CLOEXEC);
  if (f < 0) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_MEM, "memfd_create: %s", strerror(errno));
  mscclppResult_t res;
  if (ftruncate(f, (off_t)rounded) != 0) {
    res = mscclppErr(mscclppSystemError, MSCCLPP_LOG_MEM, "ftruncate of a memory file to %zu bytes: %s", rounded,
                     strerror(errno));
    goto fail_close;
  }
  void* p = mmap(NULL, rounded, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
  if (p == MAP_FAILED) {
    res = mscclppErr(mscclppSystemError, MSCCLPP_LOG_MEM, "mmap of %zu bytes of shared memory: %s", rounded,
                     strerror(errno));
    goto fail_close;
  }
  *fd = f;
  *base = p;
  *mapSize = rounded;
  return mscclppSuccess;
fail_close:
  close(f);
  return res;
}

mscclppResult_t mscclppShmMap(int fd, size_t mapSize, void** base) {
  struct stat st;
  if (fstat(fd, &st) != 0)
    return mscclppErr(mscclppSystemError, MSCCLPP_LOG_MEM, "fstat of shared memory fd %d: %s", fd, strerror(errno));
  if (!S_ISREG(st.st_mode) || st.st_size < 0 || (size_t)st.st_size < mapSize)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_MEM,
                      "shared memory file holds %lld bytes, but %zu bytes were to be mapped", (long long)st.st_size,
                      mapSize);
  void* p = mmap(NULL, mapSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED)
    return mscclppErr(mscclppSystemError, MSCCLPP_LOG_MEM, "mmap of %zu bytes of shared memory: %s", mapSize,
                      strerror(errno));
  *base = p;
  return mscclppSuccess;
}

void mscclppShmUnmap(void* base, size_t mapSize) {
  if (base != NULL && munmap(base, mapSize) != 0)
    MSCCLPP_WARN(MSCCLPP_LOG_MEM, "munmap(%p, %zu): %s", base, mapSize, strerror(errno));
}
