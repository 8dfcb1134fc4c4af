/* SPDX-License-Identifier: MIT */
/*
 * The memory layer: allocation of shareable memory, registrations, their
 * records, and opening a peer's record in this process.
 *
 * A memory context holds what one communicator's memory needs, and nothing
 * of the communicator itself (this layer sits below comm): the rank, the job
 * secret (records are authenticated with it), the host identity (records
 * carry it; intra-host memory opens only on the same host), the timeout and
 * abort flag that bound every wait, and the bootstrap's send/recv. It owns
 * the fd server that hands memory files and cuMem descriptors to peers,
 * started the first time something is exported.
 *
 * The public API (include/mscclpp/memory.h) is a thin layer over this one in
 * src/comm/memory_api.c.
 */
#ifndef MSCCLPP_SRC_MEMORY_MEMORY_H_
#define MSCCLPP_SRC_MEMORY_MEMORY_H_

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "memory/record.h"
#include "mscclpp/core.h"
#include "mscclpp/memory.h"

/* What this layer needs of the bootstrap: tagged messages of exact sizes, in
 * order per (peer, tag), bounded by the bootstrap's own timeout. A rank may
 * send to itself. */
struct mscclppMemBootstrap {
  void* ctx;
  mscclppResult_t (*send)(void* ctx, int peer, int tag, const void* data, size_t size);
  mscclppResult_t (*recv)(void* ctx, int peer, int tag, void* data, size_t size);
};

struct mscclppMemConfig {
  int rank;
  uint8_t secret[MSCCLPP_SECRET_BYTES];
  uint64_t hostHash;                    /* equal on ranks of one host (and network namespace) */
  char hostName[MSCCLPP_HOST_NAME_MAX]; /* for messages */
  double timeoutSec;                    /* MSCCLPP_TIMEOUT */
  const uint32_t* abortFlag;          /* nonzero: give up waiting; may be NULL */
  struct mscclppMemBootstrap bootstrap;
};

struct mscclppMemContext;
struct mscclppMemAllocation;

/* Where a handle came from. */
enum mscclppMemOrigin {
  MSCCLPP_MEM_REGISTERED = 1, /* mscclppMemRegister: this process's own memory */
  MSCCLPP_MEM_OPENED = 2      /* mscclppMemOpen: a record, possibly a peer's */
};

/* How an opened handle reaches the bytes (what closing undoes). */
enum mscclppMemMapping {
  MSCCLPP_MEM_MAP_NONE = 0,     /* registered here, or opened in the owner's process */
  MSCCLPP_MEM_MAP_CUDA_IPC = 1, /* cudaIpcOpenMemHandle */
  MSCCLPP_MEM_MAP_CUMEM = 2,    /* imported cuMem descriptor, mapped */
  MSCCLPP_MEM_MAP_SHM = 3       /* memory file mapped (and maybe cudaHostRegister'ed) */
};

/* One slot per transport bit of mscclppTransport_t (bit i: slot i), for the
 * registration hooks below. */
#define MSCCLPP_MEM_TRANSPORT_SLOTS 3

/* The slot of transport t (exactly one known bit), or -1. */
static inline int mscclppMemTransportSlot(mscclppTransport_t t) {
  for (int s = 0; s < MSCCLPP_MEM_TRANSPORT_SLOTS; s++)
    if ((uint32_t)t == 1u << s) return s;
  return -1;
}

/* What a transport's hook made of one registration of this process. */
struct mscclppMemHookReg {
  int ready;    /* __atomic: handle is made and the record carries the transport's section */
  void* handle; /* the transport's per-region state */
};

/* A registration or an opened record. The fields are read by the transport
 * layer; only this layer writes them, but for the record section a
 * transport's hook adds (mscclppMemPrepare). */
struct mscclppRegisteredMemory {
  struct mscclppMemContext* ctx;
  enum mscclppMemOrigin origin;
  void* ptr;             /* first byte, as this process's CPU code addresses it */
  void* devPtr;          /* first byte, as this process's kernels address it */
  uint64_t size;
  mscclppMemKind_t kind;
  uint32_t transports;   /* mscclppTransport_t bits */
  int ownerRank;
  int hostAccessible;    /* the CPU may load/store through ptr (host kinds) */
  int sameProcess;       /* the owner is this process */
  struct mscclppMemRecord record; /* what serializing writes */
  /* undo state */
  enum mscclppMemMapping mapping;
  void* mapBase;
  size_t mapSize;
  int hostRegistered;
  int cuMemExported; /* registered cuMem memory: record.fd.exportId is ours to unexport */
  struct mscclppMemAllocation* alloc; /* registered memory of mscclppMemContextAlloc */
  /* Registered here, per transport slot: what that transport's hook made,
   * on registration when the hook is attached, else on first need
   * (mscclppMemPrepare). */
  struct mscclppMemHookReg hooked[MSCCLPP_MEM_TRANSPORT_SLOTS];
  struct mscclppRegisteredMemory *prev, *next;
};

mscclppResult_t mscclppMemContextCreate(const struct mscclppMemConfig* cfg, struct mscclppMemContext** ctx);
/* mscclppInvalidUsage, destroying nothing, while registrations, opened
 * records, allocations or users (mscclppMemContextRetain) remain; the
 * message counts them. NULL is ignored. */
mscclppResult_t mscclppMemContextDestroy(struct mscclppMemContext* ctx);
const struct mscclppMemConfig* mscclppMemContextConfig(const struct mscclppMemContext* ctx);
/* Users of the context that it must outlive (connections). */
void mscclppMemContextRetain(struct mscclppMemContext* ctx);
void mscclppMemContextRelease(struct mscclppMemContext* ctx);

/* 1 when this process has a usable GPU (checked once per context). */
int mscclppMemContextHasGpu(const struct mscclppMemContext* ctx);

/* Random, fixed for the life of the process: with the pid, it tells a record
 * made by this very process. */
uint64_t mscclppMemProcessToken(void);

/* ---- transports' registration hooks ----------------------------------------------
 * Some transports need, for a registration, state only they can make (the
 * network transport: the provider's key), and they sit in a layer above
 * this one. Such a transport attaches a hook to the context once, in its
 * own slot (on its first connection); from then on mscclppTransportAuto
 * registrations include that transport, and registrations for it made
 * earlier get the hook's registration when first serialized or used. The
 * memory layer knows no transport's hook by name. */
struct mscclppMemTransportHook {
  /* Register [m->ptr, +m->size) of m->kind (record.device for GPU kinds)
   * with the transport: *handle is its per-region state, and rec (m's
   * record, written under the context's lock) gets the section peers need
   * to reach the region (Net: the NET section). Writes nothing on failure. */
  mscclppResult_t (*reg)(void* state, const struct mscclppRegisteredMemory* m, struct mscclppMemRecord* rec,
                         void** handle);
  void (*dereg)(void* state, void* handle);
  /* Called by mscclppMemContextDestroy, after every registration is gone. */
  void (*destroy)(void* state);
};

/* Attach `state` with `hook` in transport t's slot (first caller wins):
 * *attached is the state in the slot after the call - `state` or an
 * earlier one (then the caller frees its own). */
void mscclppMemContextAttach(struct mscclppMemContext* ctx, mscclppTransport_t t,
                             const struct mscclppMemTransportHook* hook, void* state, void** attached);
/* The state attached in transport t's slot, or NULL. */
void* mscclppMemContextHookState(struct mscclppMemContext* ctx, mscclppTransport_t t);
/* Make sure a registration of this process for transport t has its hook's
 * registration. mscclppInvalidArgument when m is not such a registration,
 * mscclppInvalidUsage when t has no hook attached yet (no connection of it
 * was made), or the hook's error. */
mscclppResult_t mscclppMemPrepare(struct mscclppRegisteredMemory* m, mscclppTransport_t t);
/* The handle transport t's hook made for m, or NULL before mscclppMemPrepare. */
void* mscclppMemHookHandle(const struct mscclppRegisteredMemory* m, mscclppTransport_t t);

/* Public semantics in include/mscclpp/memory.h. */
mscclppResult_t mscclppMemContextAlloc(struct mscclppMemContext* ctx, mscclppMemKind_t kind, size_t size, void** ptr);
mscclppResult_t mscclppMemContextFree(struct mscclppMemContext* ctx, void* ptr);
mscclppResult_t mscclppMemRegister(struct mscclppMemContext* ctx, void* ptr, size_t size, unsigned transports,
                                   struct mscclppRegisteredMemory** mem);
mscclppResult_t mscclppMemDeregister(struct mscclppRegisteredMemory* mem);
mscclppResult_t mscclppMemLookup(struct mscclppMemContext* ctx, const void* ptr, size_t size,
                                 struct mscclppRegisteredMemory** mem, size_t* offset);
mscclppResult_t mscclppMemSerialize(const struct mscclppRegisteredMemory* mem, void* buf, size_t bufSize,
                                    size_t* written);
/* badRecord: the status for bytes that do not parse or authenticate
 * (mscclppInvalidArgument from a caller, mscclppRemoteError from a peer). */
mscclppResult_t mscclppMemOpen(struct mscclppMemContext* ctx, const void* buf, size_t size, mscclppResult_t badRecord,
                               struct mscclppRegisteredMemory** mem);
mscclppResult_t mscclppMemClose(struct mscclppRegisteredMemory* mem);
mscclppResult_t mscclppMemSend(struct mscclppMemContext* ctx, const struct mscclppRegisteredMemory* mem, int peer,
                               int tag);
mscclppResult_t mscclppMemRecv(struct mscclppMemContext* ctx, int peer, int tag, struct mscclppRegisteredMemory** mem);

#endif /* MSCCLPP_SRC_MEMORY_MEMORY_H_ */
