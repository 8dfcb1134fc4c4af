/* SPDX-License-Identifier: MIT */
/*
 * What the files of src/transport/net/ share: the endpoint (one per memory
 * context and NIC), what provider choice learned about it, and the calls of
 * endpoint.c, provider.c and registration.c. Not for other layers (net.h).
 *
 * Threads: one mutex per endpoint (struct mscclppNet) guards every call into
 * libfabric and every field below it that changes after opening. The proxy
 * thread and the application thread (connection setup, flush, registration)
 * both take it.
 *
 * Progress: providers with manual progress (tcp;ofi_rxm) place incoming
 * writes only while this process reads its completion queue, so the port
 * channel proxy calls the transport's progress on every idle loop, and every
 * wait of the engine reads the queue.
 */
#ifndef MSCCLPP_SRC_TRANSPORT_NET_NET_INTERNAL_H_
#define MSCCLPP_SRC_TRANSPORT_NET_NET_INTERNAL_H_

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "memory/memory.h"
#include "mscclpp/core.h"
#include "transport/net/net.h"
#include "transport/net/ofi_abi.h"

#define MSCCLPP_NET_ADDR_MAX 128
#define MSCCLPP_NET_MAX_CONNS 4096 /* connection ids travel in 12 bits of remote CQ data */
#define MSCCLPP_NET_CQ_TAGS 16u    /* remote CQ data tags (engine.h) */

/* How a signal is made visible after the data (chosen per provider). */
enum mscclppNetSignalMode {
  /* The provider orders RMA writes (FI_ORDER_WAW, any size): the signal is
   * an 8-byte write right behind the data (tcp;ofi_rxm, verbs;ofi_rxm). */
  MSCCLPP_NET_SIGNAL_ORDERED = 1,
  /* No such order (efa): data writes are posted with FI_DELIVERY_COMPLETE
   * and the signal waits until every earlier write of the connection has
   * completed. */
  MSCCLPP_NET_SIGNAL_FENCED = 2
};

struct mscclppNetConn;
struct mscclppNetOp;
struct mscclppNetRegNode;

struct mscclppNet {
  struct mscclppMemContext* mctx;
  int rank;
  double timeoutSec;
  const uint32_t* abortFlag;
  pthread_mutex_t lock;
  /* the endpoint (fixed once open) */
  struct ofi_info* info;
  struct ofi_fid_fabric* fabric;
  struct ofi_fid_domain* domain;
  struct ofi_fid_ep* ep;
  struct ofi_fid_cq* cq;
  struct ofi_fid_av* av;
  uint8_t addr[MSCCLPP_NET_ADDR_MAX];
  size_t addrLen;
  /* what provider choice learned (fixed once open) */
  uint64_t mrMode;
  int hmem;
  enum mscclppNetSignalMode signalMode;
  size_t injectSize, maxMsg, txDepth, iovLimit, cqDataSize;
  int twoTargets; /* mscclppNetHasTwoTargetSignals */
  char desc[320];
  /* registrations */
  uint64_t nextKey;
  struct mscclppNetRegNode* regs;
  /* the engine (engine.c) */
  size_t inflight;
  uint64_t cqReads; /* progress rounds (completion-queue reads) */
  struct mscclppNetOp* freeOps;
  struct mscclppNetConn* conns[MSCCLPP_NET_MAX_CONNS];
  uint32_t connEnd; /* ids below are in use or free */
  int nConns;
  struct mscclppNetConn* zombies; /* removed with operations in flight */
  void (*remote[MSCCLPP_NET_CQ_TAGS])(struct mscclppNetConn* nc, uint32_t payload);
};

/* ---- endpoint.c ---- */

/* The memory context's endpoint: attached on first use (opens fabric,
 * domain, endpoint, completion queue, address vector). Errors:
 * mscclppInvalidUsage for no libfabric / no provider / a provider without
 * RMA (the message lists what was found), mscclppSystemError when libfabric
 * refuses an object. */
mscclppResult_t mscclppNetOf(struct mscclppMemContext* mctx, const struct mscclppNetConfig* cfg,
                             struct mscclppNet** net);
/* Close what mscclppNetOf opened (the memory context's destroy hook). */
void mscclppNetClose(struct mscclppNet* net);
/* This endpoint's address; insert a peer's. */
void mscclppNetAddress(const struct mscclppNet* net, uint8_t* addr, size_t* len);
mscclppResult_t mscclppNetInsertPeer(struct mscclppNet* net, const uint8_t* addr, size_t len, uint64_t* fiAddr);
/* Descriptions for messages and mscclpp-info. */
const char* mscclppNetDescribe(const struct mscclppNet* net);
enum mscclppNetSignalMode mscclppNetSignalModeOf(const struct mscclppNet* net);
int mscclppNetHasHmem(const struct mscclppNet* net);
/* 1 when the provider carries 4 bytes of remote CQ data (signals with the
 * data: signal_cq.c). */
int mscclppNetHasCqSignals(const struct mscclppNet* net);
/* 1 when an injected put may carry its signal as a second write target of
 * the same message (ordered signals, two RMA targets and two source pieces
 * per message, 16 bytes injectable, MSCCLPP_NET_SIGNAL not "cq"): the
 * provider places the bytes, then the semaphore's new value. */
int mscclppNetHasTwoTargetSignals(const struct mscclppNet* net);

/* ---- provider.c ---- */

/* Pick provider and domain for cfg, then learn what that pair offers (write
 * order, FI_HMEM, sizes) into net's provider fields and net->info. */
mscclppResult_t mscclppNetPickProvider(const struct mscclppNetConfig* cfg, struct mscclppNet* net);

/* ---- registration.c ---- */

/* A registration with the provider: of a user's memory (the handle the
 * memory layer keeps in the region's Net slot, mscclppMemHookHandle), or of
 * an internal host buffer (control blocks, rings). */
struct mscclppNetReg {
  uint64_t key;  /* what peers name in RMA operations */
  uint64_t addr; /* RMA address of the first byte (virtual address, or 0: offsets) */
  void* mr;      /* the provider's registration (NULL: staged, nothing registered) */
  void* desc;    /* local descriptor for operations sourced here (FI_MR_LOCAL) */
  int staged;    /* the provider cannot reach this memory: peers write through staging buffers */
  void* priv;    /* registration.c's bookkeeping */
};

/* The hook the memory layer calls for registrations with transport Net
 * (attached in the context's Net slot by mscclppNetOf). */
extern const struct mscclppMemTransportHook mscclppNetMemHook;
/* Register / deregister internal host buffers (control blocks, rings). */
mscclppResult_t mscclppNetRegisterHost(struct mscclppNet* net, void* ptr, size_t size, struct mscclppNetReg* reg);
void mscclppNetDeregister(struct mscclppNet* net, struct mscclppNetReg* reg);
/* Page-aligned zeroed memory, whole pages (free with free()). */
void* mscclppNetPageAlloc(size_t bytes);
/* A page-aligned zeroed host buffer, pinned for the GPU when gpu is set
 * (*pinned then 1), registered with the provider. */
mscclppResult_t mscclppNetHostBuffer(struct mscclppNet* net, int gpu, size_t bytes, uint8_t** ptr,
                                     struct mscclppNetReg* reg, int* pinned);
/* With net->lock held: the registration of this process (made through the
 * hook) that holds [addr, addr+len), or NULL. */
const struct mscclppRegisteredMemory* mscclppNetFindLocalLocked(struct mscclppNet* net, uint64_t addr, uint64_t len);

#endif /* MSCCLPP_SRC_TRANSPORT_NET_NET_INTERNAL_H_ */
