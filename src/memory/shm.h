/* SPDX-License-Identifier: MIT */
/*
 * Host memory that several processes of one host map: an anonymous memory
 * file (memfd_create) mapped MAP_SHARED. The file lives as long as some
 * process holds its descriptor or a mapping; nothing is left in /dev/shm
 * when a process dies, and Docker's small /dev/shm does not limit it.
 * Another process gets the descriptor through fd_share.h.
 */
#ifndef MSCCLPP_SRC_MEMORY_SHM_H_
#define MSCCLPP_SRC_MEMORY_SHM_H_

#include <stddef.h>

#include "mscclpp/core.h"

/* Size rounded up to whole pages. */
size_t mscclppShmRoundUp(size_t size);

/* A new zeroed memory file of mscclppShmRoundUp(size) bytes, mapped
 * read-write. *fd and *base are the caller's (mscclppShmUnmap, close). */
mscclppResult_t mscclppShmCreate(size_t size, int* fd, void** base, size_t* mapSize);

/* Map the first `mapSize` bytes of memory file `fd` read-write, shared.
 * mscclppInvalidArgument (naming both sizes) when the file is smaller. The
 * descriptor stays the caller's and may be closed right after. */
mscclppResult_t mscclppShmMap(int fd, size_t mapSize, void** base);

/* Undo a mapping (logs and goes on when munmap fails). */
void mscclppShmUnmap(void* base, size_t mapSize);

#endif /* MSCCLPP_SRC_MEMORY_SHM_H_ */
