/* SPDX-License-Identifier: MIT */
/*
 * The transport layer: one `const` ops table per transport, and connections
 * (a transport + this rank's endpoint + the peer's).
 *
 * A transport fills every slot of its table; an operation it cannot do points
 * to one of the mscclppTransportUnsupported* functions below, which return
 * mscclppInvalidUsage "<op> is not supported by transport <name>". The
 * mscclppConn* calls check their arguments once and then dispatch in one line
 * (conn->ops->write(...)), so the ops themselves never re-check.
 *
 * Ordering guarantees of write / signal / flush: include/mscclpp/connection.h.
 */
#ifndef MSCCLPP_SRC_TRANSPORT_TRANSPORT_H_
#define MSCCLPP_SRC_TRANSPORT_TRANSPORT_H_

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "memory/memory.h"
#include "mscclpp/connection.h"
#include "mscclpp/core.h"
#include "mscclpp/memory.h"

struct mscclppConnection;

/* What each side of a connection says about itself (sent at connect). */
struct mscclppEndpoint {
  int rank;
  int peer;                /* the rank it connects to */
  int tag;
  uint32_t pid;
  uint64_t processToken;
  uint64_t hostHash;
  char hostName[MSCCLPP_HOST_NAME_MAX];
  uint32_t available;      /* transports this process can run */
  uint32_t requested;      /* mscclppTransportAuto or one transport */
  int device;              /* current CUDA device, -1 without a GPU */
};

#define MSCCLPP_ENDPOINT_BYTES 128

/* What a transport can do or needs, as data: the layers above ask these
 * instead of comparing transports. The bits are the public
 * mscclppConnectionCap_t values (include/mscclpp/connection.h says what
 * each means to a user). */
/* writeInline is carried out (not the unsupported slot) */
#define MSCCLPP_TRANSPORT_CAP_WRITE_INLINE ((uint32_t)mscclppConnectionCapWriteInline)
/* progress must be called while idle */
#define MSCCLPP_TRANSPORT_CAP_NEEDS_PROGRESS ((uint32_t)mscclppConnectionCapNeedsProgress)
/* A GPU rank's kernels may store into the peer's memory through its device
 * mapping (small puts without the proxy). */
#define MSCCLPP_TRANSPORT_CAP_PEER_STORE ((uint32_t)mscclppConnectionCapPeerStore)
/* Per connection (conn->caps, set by open): GPU memory travels through
 * pinned host buffers, a copy per chunk on each side (Net with a provider
 * without FI_HMEM). */
#define MSCCLPP_TRANSPORT_CAP_STAGES_DEVICE ((uint32_t)mscclppConnectionCapStagesDeviceMemory)
/* The transport reaches other hosts (through a NIC). */
#define MSCCLPP_TRANSPORT_CAP_CROSS_HOST ((uint32_t)mscclppConnectionCapCrossHost)
/* Every bit above (what mscclppConnectionHasCapability accepts). */
#define MSCCLPP_TRANSPORT_CAP_ALL                                                   \
  (MSCCLPP_TRANSPORT_CAP_WRITE_INLINE | MSCCLPP_TRANSPORT_CAP_NEEDS_PROGRESS |      \
   MSCCLPP_TRANSPORT_CAP_PEER_STORE | MSCCLPP_TRANSPORT_CAP_STAGES_DEVICE |        \
   MSCCLPP_TRANSPORT_CAP_CROSS_HOST)

/* Where a connection's inbound semaphores live. */
enum mscclppTransportSemHome {
  MSCCLPP_TRANSPORT_SEM_DEVICE = 0,        /* device memory on a GPU, host memory on the host backend */
  MSCCLPP_TRANSPORT_SEM_PINNED_ON_GPU = 1, /* pinned host memory on a GPU, host memory on the host backend */
  MSCCLPP_TRANSPORT_SEM_PINNED = 2         /* pinned host memory on both backends */
};

struct mscclppTransportAttrs {
  uint32_t caps; /* MSCCLPP_TRANSPORT_CAP_* */
  /* the semaphore when the user asks for device memory, and when the
   * choice is left to the library (port channels' semaphoreMem) */
  enum mscclppTransportSemHome semDevice, semAuto;
};

struct mscclppTransportOps {
  const char* name;
  mscclppTransport_t transport;
  const struct mscclppTransportAttrs* attrs;
  /* Can this process run the transport (the endpoint's `available` bit)?
   * wanted: the connection asks for it or for Auto (a transport whose probe
   * costs, loading a library, probes only then). */
  int (*available)(const struct mscclppEndpoint* local, int wanted);
  /* Optional: a line on this process's copy of the transport for messages
   * when no transport joins two ranks ("libfabric: loaded"). */
  const char* (*status)(void);
  /* Can this transport join the two endpoints? Must be symmetric. On "no",
   * mscclppInvalidUsage and a sentence in why (nothing logged). */
  mscclppResult_t (*check)(const struct mscclppEndpoint* a, const struct mscclppEndpoint* b, char* why,
                           size_t whyLen);
  /* Per-connection resources (CudaIpc: a stream on the current device). */
  mscclppResult_t (*open)(struct mscclppConnection* conn);
  /* Complete what is pending (bounded) and free what open made. */
  mscclppResult_t (*close)(struct mscclppConnection* conn);
  mscclppResult_t (*write)(struct mscclppConnection* conn, struct mscclppRegisteredMemory* dst, uint64_t dstOffset,
                           struct mscclppRegisteredMemory* src, uint64_t srcOffset, uint64_t size);
  mscclppResult_t (*signal)(struct mscclppConnection* conn, struct mscclppRegisteredMemory* dst, uint64_t dstOffset,
                            uint64_t value);
  /* Write `size` (1..MSCCLPP_TRIGGER_INLINE_MAX) bytes given by value to
   * dst+dstOffset, ordered after the connection's earlier writes; then,
   * when sigDst is not NULL, signal sigValue to sigDst+sigOffset as signal
   * does. For small puts whose bytes the caller already holds (a port
   * channel's INLINE trigger): a transport can do both without a copy. */
  mscclppResult_t (*writeInline)(struct mscclppConnection* conn, struct mscclppRegisteredMemory* dst,
                                 uint64_t dstOffset, const void* bytes, uint32_t size,
                                 struct mscclppRegisteredMemory* sigDst, uint64_t sigOffset, uint64_t sigValue);
  mscclppResult_t (*flush)(struct mscclppConnection* conn);
  /* Never blocks: *idle = 1 when everything issued so far is complete. */
  mscclppResult_t (*query)(struct mscclppConnection* conn, int* idle);
  /* Optional (NULL: the transport needs none): advance the connection
   * without waiting - Net reads its completion queue, which is when
   * providers with manual progress place the peer's incoming writes. The
   * port channel proxy calls it on every idle loop. Returns completion
   * errors (mscclppRemoteError). */
  mscclppResult_t (*progress)(struct mscclppConnection* conn);
};

extern const struct mscclppTransportOps mscclppTransportCudaIpcOps;
extern const struct mscclppTransportOps mscclppTransportHostShmOps;
extern const struct mscclppTransportOps mscclppTransportNetOps;

/* The transports in the order Auto tries them (first that fits wins). */
extern const struct mscclppTransportOps* const mscclppTransports[];
extern const int mscclppTransportCount;

struct mscclppConnection {
  const struct mscclppTransportOps* ops;
  struct mscclppMemContext* mctx;
  int rank;
  int remoteRank;
  int tag;
  int sameProcess;          /* the peer is this very process */
  double timeoutSec;
  const uint32_t* abortFlag;
  struct mscclppEndpoint local, remote;
  uint32_t caps;            /* ops->attrs->caps and what open learned (MSCCLPP_TRANSPORT_CAP_STAGES_DEVICE) */
  void* priv;               /* the transport's own state (open makes it, close frees it) */
};

/* Public semantics in include/mscclpp/connection.h. */
/* Is everything issued on conn complete? Never blocks (for progress loops). */
mscclppResult_t mscclppConnQuery(struct mscclppConnection* conn, int* idle);
/* Does the transport need mscclppConnProgress calls while idle? */
int mscclppConnNeedsProgress(const struct mscclppConnection* conn);
/* Advance conn without waiting (a no-op for transports that need none). */
mscclppResult_t mscclppConnProgress(struct mscclppConnection* conn);
mscclppResult_t mscclppConnCreate(struct mscclppMemContext* mctx, int peer, int tag, mscclppTransport_t transport,
                                  struct mscclppConnection** conn);
mscclppResult_t mscclppConnDestroy(struct mscclppConnection* conn);
mscclppResult_t mscclppConnWrite(struct mscclppConnection* conn, struct mscclppRegisteredMemory* dst,
                                 uint64_t dstOffset, struct mscclppRegisteredMemory* src, uint64_t srcOffset,
                                 uint64_t size);
mscclppResult_t mscclppConnSignal(struct mscclppConnection* conn, struct mscclppRegisteredMemory* dst,
                                  uint64_t dstOffset, uint64_t value);
mscclppResult_t mscclppConnFlush(struct mscclppConnection* conn);
/* The ops' writeInline with its arguments checked; sigDst may be NULL. */
mscclppResult_t mscclppConnWriteInline(struct mscclppConnection* conn, struct mscclppRegisteredMemory* dst,
                                       uint64_t dstOffset, const void* bytes, uint32_t size,
                                       struct mscclppRegisteredMemory* sigDst, uint64_t sigOffset, uint64_t sigValue);
/* Does the transport carry out writeInline itself (not the unsupported slot)? */
int mscclppConnCanWriteInline(const struct mscclppConnection* conn);
/* Does conn carry GPU memory through pinned host buffers (Net with a
 * provider without FI_HMEM: a copy per chunk on each side)? */
int mscclppConnStagesDeviceMemory(const struct mscclppConnection* conn);
/* The transport's attributes, and whether conn has capability cap. */
const struct mscclppTransportAttrs* mscclppConnAttrs(const struct mscclppConnection* conn);
int mscclppConnHasCap(const struct mscclppConnection* conn, uint32_t cap);
/* Is m registered for conn's transport? */
int mscclppConnCarries(const struct mscclppConnection* conn, const struct mscclppRegisteredMemory* m);

/* Pick the transport for two endpoints (symmetric: both ranks get the same
 * answer). mscclppInvalidUsage with the reason logged otherwise. */
mscclppResult_t mscclppTransportSelect(const struct mscclppEndpoint* local, const struct mscclppEndpoint* remote,
                                       const struct mscclppTransportOps** ops);

/* Endpoint wire format (fixed MSCCLPP_ENDPOINT_BYTES, authenticated with the
 * job secret; pure functions, like the memory record's). */
void mscclppEndpointEncode(const struct mscclppEndpoint* ep, const uint8_t secret[MSCCLPP_SECRET_BYTES],
                           uint8_t buf[MSCCLPP_ENDPOINT_BYTES]);
mscclppResult_t mscclppEndpointDecode(const uint8_t buf[MSCCLPP_ENDPOINT_BYTES],
                                      const uint8_t secret[MSCCLPP_SECRET_BYTES], struct mscclppEndpoint* ep,
                                      char* why, size_t whyLen);

/* For slots a transport cannot fill. */
mscclppResult_t mscclppTransportUnsupportedWrite(struct mscclppConnection* conn, struct mscclppRegisteredMemory* dst,
                                                 uint64_t dstOffset, struct mscclppRegisteredMemory* src,
                                                 uint64_t srcOffset, uint64_t size);
mscclppResult_t mscclppTransportUnsupportedSignal(struct mscclppConnection* conn, struct mscclppRegisteredMemory* dst,
                                                  uint64_t dstOffset, uint64_t value);
mscclppResult_t mscclppTransportUnsupportedWriteInline(struct mscclppConnection* conn,
                                                       struct mscclppRegisteredMemory* dst, uint64_t dstOffset,
                                                       const void* bytes, uint32_t size,
                                                       struct mscclppRegisteredMemory* sigDst, uint64_t sigOffset,
                                                       uint64_t sigValue);
mscclppResult_t mscclppTransportUnsupportedFlush(struct mscclppConnection* conn);

#endif /* MSCCLPP_SRC_TRANSPORT_TRANSPORT_H_ */
