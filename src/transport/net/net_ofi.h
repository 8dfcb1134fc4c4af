/*
 * The network transport's libfabric side: loading libfabric at run time,
 * one endpoint per memory context (rank) and NIC, memory registration, and
 * the operation engine that posts RMA writes, queues what the provider
 * cannot take yet, and reads the completion queue.
 *
 * libfabric is opened with dlopen("libfabric.so.1") the first time the
 * network transport is wanted, so the library loads (and runs every other
 * transport) where libfabric is missing. Its headers are not needed at
 * build time: ofi_abi.h holds the part of its ABI used here.
 *
 * Threads: one mutex per endpoint (struct mscclppNet) guards every call into
 * libfabric and every field below it. The proxy thread and the application
 * thread (connection setup, flush, registration) both take it.
 *
 * Progress: providers with manual progress (tcp;ofi_rxm) place incoming
 * writes only while this process reads its completion queue, so the port
 * channel proxy calls mscclppNetProgress on every idle loop, and every wait
 * here reads the queue.
 */
#ifndef MSCCLPP_SRC_TRANSPORT_NET_OFI_H_
#define MSCCLPP_SRC_TRANSPORT_NET_OFI_H_

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "memory/memory.h"
#include "mscclpp/core.h"

#define MSCCLPP_NET_ADDR_MAX 128
#define MSCCLPP_NET_MAX_CONNS 4096 /* connection ids travel in 16 bits of remote CQ data */

/* Staging ring (GPU memory a provider without FI_HMEM cannot reach): slots
 * of a header and a chunk, in pinned host memory of the receiver. */
#define MSCCLPP_NET_STAGE_SLOTS 8u
#define MSCCLPP_NET_STAGE_CHUNK (1u << 20)
#define MSCCLPP_NET_STAGE_HEADER 64u
#define MSCCLPP_NET_STAGE_SLOT_BYTES (MSCCLPP_NET_STAGE_HEADER + MSCCLPP_NET_STAGE_CHUNK)
/* Slot header: 0 magic u32 | 4 type u32 | 8 sequence u64 | 16 destination
 * address u64 (the receiver's own address of a memory it registered for
 * Net) | 24 length u64 | 32 value u64 (signals). */
#define MSCCLPP_NET_STAGE_MAGIC 0x4753534du /* "MSSG" */
#define MSCCLPP_NET_STAGE_DATA 1u
#define MSCCLPP_NET_STAGE_SIGNAL 2u
/* 1..8 bytes in the header (48..55) for the address at 16, length at 24;
 * then, when the address at 40 is not 0, the value at 32 signalled there. */
#define MSCCLPP_NET_STAGE_INLINE 3u
#define MSCCLPP_NET_STAGE_INLINE_SIG 40u
#define MSCCLPP_NET_STAGE_INLINE_BYTES 48u

/* Remote CQ data: 32 bits (what every provider with remote CQ data carries).
 *   staging slot:  bits 16..27 the receiver's connection id | bits 0..15 slot
 *   signal:        bit 31 | bits 16..27 the receiver's connection id |
 *                  bits 8..15 index into the receiver's signal table |
 *                  bits 0..7 the value's low byte
 * A signal advances the semaphore word the table entry names (an address
 * the sender wrote into the receiver's control block, checked there to lie
 * in a memory this process registered for Net) by one, once the receiver
 * has read the completion; the low byte must be that of the new value. */
#define MSCCLPP_NET_CQ_SIGNAL 0x80000000u
#define MSCCLPP_NET_SIG_SLOTS 256u

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

struct mscclppNet;
struct mscclppNetConn;
struct mscclppConnection;

/* 1 when libfabric could be loaded (tried once per process). */
int mscclppNetLibAvailable(void);
/* Why not (for messages). */
const char* mscclppNetLibError(void);

/* What picks the provider and NIC (MSCCLPP_NET_PROVIDER, MSCCLPP_NET_IFNAME). */
struct mscclppNetConfig {
  const char* provider; /* "" : the first with RMA (shm-only providers excluded) */
  const char* ifname;   /* "" : any; comma list of domain-name prefixes, ^ excludes, = exact */
  double timeoutSec;
  const uint32_t* abortFlag;
  int rank;
  const char* signal; /* MSCCLPP_NET_SIGNAL: "auto" or "cq" (NULL: auto) */
};

/* The memory context's network state: attach one on first use (opens
 * fabric, domain, endpoint, completion queue, address vector). Errors:
 * mscclppInvalidUsage for no libfabric / no provider / a provider without
 * RMA (the message lists what was found), mscclppSystemError when libfabric
 * refuses an object. */
mscclppResult_t mscclppNetOf(struct mscclppMemContext* mctx, const struct mscclppNetConfig* cfg,
                             struct mscclppNet** net);

/* What the transport would open with cfg (mscclpp-info): mscclppSuccess and
 * the description ("tcp;ofi_rxm on lo (...)") in text, or the status
 * mscclppNetOf would return and its reason in text. Opens no endpoint. */
mscclppResult_t mscclppNetProbe(const struct mscclppNetConfig* cfg, char* text, size_t len);

/* Descriptions for messages and mscclpp-info. */
const char* mscclppNetDescribe(const struct mscclppNet* net);
enum mscclppNetSignalMode mscclppNetSignalModeOf(const struct mscclppNet* net);
int mscclppNetHasHmem(const struct mscclppNet* net);
/* 1 when the provider carries 4 bytes of remote CQ data (signals with the
 * data, MSCCLPP_NET_CQ_SIGNAL). */
int mscclppNetHasCqSignals(const struct mscclppNet* net);
/* 1 when an injected put may carry its signal as a second write target of
 * the same message (ordered signals, two RMA targets and two source pieces
 * per message, 16 bytes injectable, MSCCLPP_NET_SIGNAL not "cq"): the
 * provider places the bytes, then the semaphore's new value. */
int mscclppNetHasTwoTargetSignals(const struct mscclppNet* net);

/* Tests only: register host memory of later registrations as "staged", so
 * the GPU staging protocol runs on the host backend in CI. */
void mscclppNetTestForceStaging(int on);
int mscclppNetTestStagingOn(void);

/* ---- connections (transport_net.c uses these) ------------------------------ */

/* Operation kinds the engine posts. */
enum mscclppNetOpKind {
  MSCCLPP_NET_OP_WRITE = 1,  /* data */
  MSCCLPP_NET_OP_SIGNAL = 2, /* 8-byte value (inject) */
  MSCCLPP_NET_OP_STAGE = 3,  /* header + data into a staging slot, with remote CQ data */
  MSCCLPP_NET_OP_CREDIT = 4, /* 8-byte consumed count back to a staging sender */
  MSCCLPP_NET_OP_INLINE = 5  /* 1..8 bytes held in the op (inject), with remote CQ data when cqData != 0 */
};

/* A connection's state inside the engine. Fields are guarded by net->lock. */
struct mscclppNetConn {
  struct mscclppNet* net;
  struct mscclppConnection* conn;
  uint32_t id;     /* index in net->conns (remote CQ data names it) */
  uint32_t peerId; /* the peer's id for this connection */
  uint64_t fiAddr; /* fi_addr_t of the peer */
  /* 0 while the opening thread still fills the fields below without the
   * lock: the engine's passes over net->conns skip the connection. Set
   * (under the lock) by mscclppNetConnPublish before anything is posted. */
  int ready;
  int rank, peerRank;
  /* operations: submitted = posted + queued; completed counts completions */
  uint64_t submitted, completed;
  struct mscclppNetOp *qHead, *qTail; /* waiting: provider queue full, -FI_EAGAIN, fence, credit */
  int queued;
  mscclppResult_t error; /* first completion error (sticky) */
  uint64_t progressSeen; /* the endpoint's progress round at this connection's last mscclppNetProgress */
  char errText[320];
  int errReported;
  /* control block of this side (registered): the peer writes into it */
  struct mscclppNetCtrl* ctrl;
  struct mscclppMemNetReg ctrlReg;
  uint64_t peerCtrlAddr, peerCtrlKey;
  /* staging: receiving (ring of this side) */
  uint8_t* ring;
  size_t ringBytes;
  struct mscclppMemNetReg ringReg;
  int ringPinned;
  uint64_t recvSeq;       /* slots received */
  uint64_t consumed;      /* slots whose bytes reached their destination */
  uint64_t creditSent;    /* consumed count last sent back */
  int creditsInFlight;
  uint64_t copyEnqueued;  /* slots whose device copy is enqueued on the stream (== recvSeq when caught up) */
  struct mscclppGpuIpcStream* stream;
  struct { uint64_t* addr; uint64_t value; uint64_t afterSeq; } heldSignals[MSCCLPP_NET_STAGE_SLOTS];
  int nHeld;
  /* staging: sending (the peer's ring) */
  uint64_t peerRingAddr, peerRingKey;
  int peerHasRing;
  uint64_t sentSlots;
  uint8_t* hdrs; /* one header per slot index (registered) */
  struct mscclppMemNetReg hdrReg;
  uint8_t* bounce; /* device sources are copied here first (registered, pinned) */
  struct mscclppMemNetReg bounceReg;
  int bouncePinned;
  struct mscclppGpuIpcStream* sendStream;
  int stagedSinceSignal;
  uint64_t stageSubmitted; /* STAGE operations submitted (the submitting thread's) */
  /* signals with remote CQ data, sending: the peer's semaphore addresses
   * written into its control block's table (0: free); the submitting
   * thread's */
  uint64_t sigAddrs[MSCCLPP_NET_SIG_SLOTS];
  uint32_t nSigs, lastSig;
  /* teardown */
  void (*destroy)(struct mscclppNetConn* nc);
  struct mscclppNetConn* zombieNext;
};

/* The control block each side registers per connection. */
struct mscclppNetCtrl {
  volatile uint64_t hello;   /* the peer writes its greeting here at open */
  uint64_t pad0[7];
  volatile uint64_t credits; /* staging: slots the peer has consumed */
  uint64_t pad1[7];
  uint64_t helloSrc;         /* what this side writes (registered source) */
  uint64_t pad2[7];
  uint64_t sigScratch; /* signals with remote CQ data and no payload write here */
  uint64_t pad3[7];
  /* signals with remote CQ data: the peer names the semaphore by an index
   * into this table, whose entries it writes (untrusted addresses) */
  volatile uint64_t sigAddr[MSCCLPP_NET_SIG_SLOTS];
};

/* One operation. */
struct mscclppNetOp {
  uint8_t fiContext[64]; /* struct fi_context2 lives here while posted (first member) */
  struct mscclppNetOp* next;
  struct mscclppNetConn* nc;
  enum mscclppNetOpKind kind;
  uint64_t seq;      /* conn->submitted before it */
  int fence;         /* post only once every earlier op of the connection completed */
  int needsCredit;   /* STAGE: a free slot of the peer's ring */
  const void* buf;
  void* desc;
  size_t len;
  uint64_t raddr, rkey;
  uint64_t value;  /* SIGNAL / CREDIT; INLINE: its bytes */
  uint32_t cqData; /* INLINE: remote CQ data (0: none) */
  int sigTarget;   /* INLINE: the same message then writes sigValue to sigRaddr (mscclppNetHasTwoTargetSignals) */
  uint64_t sigRaddr, sigRkey, sigValue;
  /* STAGE */
  uint8_t hdr[MSCCLPP_NET_STAGE_HEADER];
  int bounceFromDevice;
};

/* Register a connection (id assignment). Remove hands it back: the engine
 * calls nc->destroy(nc) - now when nothing of it is in flight, else when
 * the endpoint closes (the provider may still touch its buffers). */
mscclppResult_t mscclppNetConnAdd(struct mscclppNet* net, struct mscclppNetConn* nc);
void mscclppNetConnRemove(struct mscclppNet* net, struct mscclppNetConn* nc);
/* The opening thread is done writing nc's setup fields: from now on they
 * are read and written only with net->lock held. */
void mscclppNetConnPublish(struct mscclppNet* net, struct mscclppNetConn* nc);
/* This endpoint's address; insert a peer's. */
void mscclppNetAddress(const struct mscclppNet* net, uint8_t* addr, size_t* len);
mscclppResult_t mscclppNetInsertPeer(struct mscclppNet* net, const uint8_t* addr, size_t len, uint64_t* fiAddr);
/* Register / deregister internal host buffers (control blocks, rings). */
mscclppResult_t mscclppNetRegisterHost(struct mscclppNet* net, void* ptr, size_t size, struct mscclppMemNetReg* reg);
void mscclppNetDeregister(struct mscclppNet* net, struct mscclppMemNetReg* reg);

/* Submit an operation (its fields filled, nc and kind set): posted now if
 * the provider takes it, otherwise queued in order behind the connection's
 * earlier ones. Returns the connection's sticky error, if any. */
mscclppResult_t mscclppNetSubmit(struct mscclppNet* net, struct mscclppNetOp* op);
/* The same with net->lock held. */
mscclppResult_t mscclppNetSubmitLocked(struct mscclppNet* net, struct mscclppNetOp* op);
/* An operation from the endpoint's pool (NULL: mscclppSystemError logged). */
struct mscclppNetOp* mscclppNetOpGet(struct mscclppNet* net);
struct mscclppNetOp* mscclppNetOpGetLocked(struct mscclppNet* net);

/* Read the completion queue and post queued operations; never waits.
 * With nc: *idle = nothing of nc is queued or in flight, and nc's sticky
 * error is returned (once logged); the queue is read only if it has not
 * been read since the previous call for nc (by a call for another
 * connection of the endpoint), so one pass over an endpoint's connections
 * reads it once. */
mscclppResult_t mscclppNetProgress(struct mscclppNet* net, struct mscclppNetConn* nc, int* idle);
/* Wait (bounded by the timeout, abortable) until nc is idle. `what` names
 * the wait in messages. */
mscclppResult_t mscclppNetWaitIdle(struct mscclppNet* net, struct mscclppNetConn* nc, const char* what);
/* Wait until *word == value, reading the completion queue (connection open). */
mscclppResult_t mscclppNetWaitWord(struct mscclppNet* net, struct mscclppNetConn* nc, volatile uint64_t* word,
                                   uint64_t value, const char* what);

/* With net->lock held (transport_net.c's staging): remote CQ data arrived
 * for connection id `connId`, slot message `slot`. */
void mscclppNetStageReceivedLocked(struct mscclppNetConn* nc, uint32_t slot);
/* With net->lock held: advance the receive side (device copies done,
 * credits, held signals). */
void mscclppNetStageProgressLocked(struct mscclppNetConn* nc);
/* With net->lock held: remote CQ data of a signal (MSCCLPP_NET_CQ_SIGNAL)
 * arrived for nc: table index `index`, value low byte `low`. */
void mscclppNetSignalReceivedLocked(struct mscclppNetConn* nc, uint32_t index, uint32_t low);
/* With net->lock held: the registration of this process (made through the
 * hook) that holds [addr, addr+len), or NULL. */
const struct mscclppRegisteredMemory* mscclppNetFindLocalLocked(struct mscclppNet* net, uint64_t addr, uint64_t len);
/* With net->lock held: record a completion error on nc. */
void mscclppNetConnFailLocked(struct mscclppNetConn* nc, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
/* Post (with net->lock held) what is queued on nc. */
void mscclppNetKickLocked(struct mscclppNet* net, struct mscclppNetConn* nc);

pthread_mutex_t* mscclppNetLock(struct mscclppNet* net);

#endif /* MSCCLPP_SRC_TRANSPORT_NET_OFI_H_ */
