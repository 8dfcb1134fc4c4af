/* SPDX-License-Identifier: MIT */
/*
 * What the files of the memory layer share (memory.c: contexts and
 * allocation; register.c: registration; open.c: opening records). Not for
 * other layers: they use memory.h.
 */
#ifndef MSCCLPP_SRC_MEMORY_MEMORY_INTERNAL_H_
#define MSCCLPP_SRC_MEMORY_MEMORY_INTERNAL_H_

#include <pthread.h>

#include "memory/fd_share.h"
#include "memory/memory.h"

/* Memory from mscclppMemContextAlloc. */
struct mscclppMemAllocation {
  void* ptr;
  size_t size;       /* asked for */
  size_t mapSize;    /* what was mapped/allocated (whole pages, granules) */
  mscclppMemKind_t kind;
  int fd;            /* memory file (host kinds), -1 otherwise; the fd server holds a copy once exported */
  int exported;
  uint64_t exportId;
  uint8_t token[MSCCLPP_FD_TOKEN_BYTES];
  void* devPtr;
  int device;        /* GPU kinds: the device it was allocated on, else -1 */
  int hostRegistered;
  int liveRegs;      /* registrations inside it */
  struct mscclppMemAllocation* next;
};

struct mscclppMemContext {
  struct mscclppMemConfig cfg;
  int hasGpu;
  pthread_mutex_t lock; /* guards everything below */
  struct mscclppRegisteredMemory* mems;
  struct mscclppMemAllocation* allocs;
  struct mscclppFdServer* fdServer;
  uint64_t nextMemId;
  int users;
  struct mscclppMemHookSlot {
    const struct mscclppMemTransportHook* hook; /* NULL until the transport attaches */
    void* state;
  } hooks[MSCCLPP_MEM_TRANSPORT_SLOTS];
};

static inline int mscclppMemKindIsHost(mscclppMemKind_t k) {
  return k == mscclppMemKindHost || k == mscclppMemKindHostShared || k == mscclppMemKindHostPinned;
}

/* With ctx->lock held: the context's fd server, started on first use. */
mscclppResult_t mscclppMemFdServerLocked(struct mscclppMemContext* ctx, struct mscclppFdServer** server);
/* With ctx->lock held: undo what transports' hooks made of registration m. */
void mscclppMemUnhookLocked(struct mscclppMemContext* ctx, struct mscclppRegisteredMemory* m);
/* With ctx->lock held: add a handle to / remove it from the context's list. */
void mscclppMemLink(struct mscclppMemContext* ctx, struct mscclppRegisteredMemory* m);
void mscclppMemUnlink(struct mscclppMemContext* ctx, struct mscclppRegisteredMemory* m);

#endif /* MSCCLPP_SRC_MEMORY_MEMORY_INTERNAL_H_ */
