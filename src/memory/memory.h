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

/* What a registration for the network transport holds: filled by the
 * network transport's `reg` hook (see mscclppMemNetOps). */
struct mscclppMemNetReg {
  uint64_t key;  /* what peers name in RMA operations */
  uint64_t addr; /* RMA address of the first byte (virtual address, or 0: offsets) */
  void* mr;      /* the provider's registration (NULL: staged, nothing registered) */
  void* desc;    /* local descriptor for operations sourced here (FI_MR_LOCAL) */
  int staged;    /* the provider cannot reach this memory: peers write through staging buffers */
  void* priv;    /* the network transport's bookkeeping */
};

/* A registration or an opened record. The fields are read by the transport
 * layer; only this layer writes them. */
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
  /* Net (registered here): made by the network transport's hook, on
   * registration when the hook is attached, else on first need
   * (mscclppMemNetPrepare). netReady is __atomic. */
  int netReady;
  struct mscclppMemNetReg net;
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

/* ---- the network transport's part ----------------------------------------------
 * Registrations for mscclppTransportNet need the provider's key, which only
 * the network transport (a layer above) can make. It attaches its state to
 * the context once (on its first connection), with these hooks; from then
 * on mscclppTransportAuto registrations include Net, and Net registrations
 * made earlier are registered with the provider when first serialized or
 * used. */
struct mscclppMemNetOps {
  /* Register [m->ptr, +m->size) of m->kind (record.device for GPU kinds). */
  mscclppResult_t (*reg)(void* net, const struct mscclppRegisteredMemory* m, struct mscclppMemNetReg* out);
  void (*dereg)(void* net, struct mscclppMemNetReg* reg);
  /* Called by mscclppMemContextDestroy, after every registration is gone. */
  void (*destroy)(void* net);
};

/* Attach `net` (first caller wins): *attached is the state attached after
 * the call - `net` or an earlier one (then the caller frees its own). */
void mscclppMemContextNetAttach(struct mscclppMemContext* ctx, const struct mscclppMemNetOps* ops, void* net,
                                void** attached);
/* The attached state, or NULL. */
void* mscclppMemContextNet(struct mscclppMemContext* ctx);
/* Make sure a registration of this process for Net has its provider
 * registration (m->net). mscclppInvalidUsage when no network transport is
 * attached yet (no Net connection was made), or the hook's error. */
mscclppResult_t mscclppMemNetPrepare(struct mscclppRegisteredMemory* m);

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
