/* SPDX-License-Identifier: MIT */
/*
 * Staging: GPU memory a provider without FI_HMEM cannot reach travels
 * through pinned host memory. Memory the provider cannot reach is
 * registered "staged" (record flag). A side that may receive staged data
 * keeps a ring of MSCCLPP_NET_STAGE_SLOTS slots (header + 1 MiB chunk) in
 * pinned host memory per connection. The sender writes header + chunk into
 * the next slot with remote CQ data (tag MSCCLPP_NET_TAG_STAGE, payload the
 * slot) - a device source is first copied to a pinned bounce slot, on the
 * sender's stream, while the operation waits first in its queue (the
 * endpoint stays free meanwhile); the receiver, when it reads that
 * completion, checks the header (sequence, length, destination inside one
 * of its Net registrations) and copies the chunk to its destination
 * (cudaMemcpyAsync on its stream; memcpy for host memory). Signals after
 * staged data travel the same ring and are applied only once every earlier
 * copy has completed (stream-ordered for a device semaphore). The receiver
 * returns credits (slots consumed) with an 8-byte write into the sender's
 * control block, posted ahead of the connection's queue (which may hold
 * operations that wait for the peer's credits, which wait for ours); the
 * sender never has more than MSCCLPP_NET_STAGE_SLOTS slots outstanding.
 * Chunks pipeline: the network carries chunk k+1 while the GPU copies
 * chunk k.
 */
#ifndef MSCCLPP_SRC_TRANSPORT_NET_STAGING_H_
#define MSCCLPP_SRC_TRANSPORT_NET_STAGING_H_

#include <stdint.h>

#include "memory/memory.h"
#include "mscclpp/core.h"
#include "transport/net/net_internal.h"

#define MSCCLPP_NET_TAG_STAGE 0u /* remote CQ data: payload = slot */

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

struct mscclppGpuIpcStream;
struct mscclppNetConn;
struct mscclppNetLink;

/* Receiving (this side's ring); the engine's thread under net->lock. */
struct mscclppNetStageRecv {
  uint8_t* ring; /* NULL: this side keeps none */
  struct mscclppNetReg ringReg;
  int ringPinned;
  uint64_t recvSeq;      /* slots received */
  uint64_t consumed;     /* slots whose bytes reached their destination */
  uint64_t creditSent;   /* consumed count last sent back */
  uint64_t copyEnqueued; /* slots whose device copy is enqueued on the stream (== recvSeq when caught up) */
  struct mscclppGpuIpcStream* stream;
  struct {
    uint64_t* addr;
    uint64_t value;
    uint64_t afterSeq;
  } held[MSCCLPP_NET_STAGE_SLOTS];
  int nHeld;
};

/* Sending (the peer's ring). */
struct mscclppNetStageSend {
  uint64_t peerRingAddr, peerRingKey;
  int peerHasRing;
  uint64_t sentSlots; /* STAGE operations posted */
  uint8_t* hdrs;      /* one header per slot index (registered) */
  struct mscclppNetReg hdrReg;
  uint8_t* bounce; /* device sources are copied here first (registered, pinned) */
  struct mscclppNetReg bounceReg;
  int bouncePinned;
  struct mscclppGpuIpcStream* sendStream;
  /* the submitting thread's (under net->lock) */
  int stagedSinceSignal;
  uint64_t stageSubmitted; /* STAGE operations submitted */
};

/* Open this side's ring (gpu: pinned, and a stream for the copies out). */
mscclppResult_t mscclppNetStageOpenRecv(struct mscclppNetLink* l, int gpu);
/* The peer keeps a ring at addr/key: open the sending side (headers; with
 * gpu, the bounce slots and their stream). */
mscclppResult_t mscclppNetStageOpenSend(struct mscclppNetLink* l, int gpu, uint64_t addr, uint64_t key);
/* Free what the two opens made (the connection is out of the engine). */
void mscclppNetStageClose(struct mscclppNetLink* l);

/* Staged messages the receiver has not consumed yet: a signal now must
 * travel the ring too, behind any signal it holds back (net->lock held). */
int mscclppNetStageRingBusy(struct mscclppNetLink* l);
/* Write `size` bytes from src (desc: its local descriptor; fromDevice: GPU
 * memory the provider cannot read) to the peer's staged address dstAddr, in
 * chunks through the ring. Takes net->lock per chunk. */
mscclppResult_t mscclppNetStageWrite(struct mscclppNetLink* l, uint64_t dstAddr, const uint8_t* src, void* desc,
                                     uint64_t size, int fromDevice);
/* With net->lock held: value to the peer's semaphore at sigAddr (its own
 * address), through the ring. */
mscclppResult_t mscclppNetStageSignalLocked(struct mscclppNetLink* l, uint64_t sigAddr, uint64_t value);
/* With net->lock held: 1..8 bytes to dstAddr and, when sigAddr is not 0,
 * then sigValue to sigAddr, in one slot. */
mscclppResult_t mscclppNetStageInlineLocked(struct mscclppNetLink* l, uint64_t dstAddr, const void* bytes,
                                            uint32_t size, uint64_t sigAddr, uint64_t sigValue);

/* The engine's hooks (net->lock held): a staging message arrived in
 * `slot`; a progress pass (device copies done, held signals); credits to
 * post ahead of the queue. */
void mscclppNetStageReceivedLocked(struct mscclppNetConn* nc, uint32_t slot);
void mscclppNetStageProgressLocked(struct mscclppNetConn* nc);
void mscclppNetStageCreditLocked(struct mscclppNetConn* nc);

#endif /* MSCCLPP_SRC_TRANSPORT_NET_STAGING_H_ */
