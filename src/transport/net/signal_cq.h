/* SPDX-License-Identifier: MIT */
/*
 * Signals as remote CQ data (providers with 4 bytes of it and 8-byte
 * injects, when an inline put cannot carry its signal as a second target):
 * the first time a connection signals a host semaphore word, the sender
 * writes the word's address (the receiver's own) into the next free entry
 * of the receiver's signal table (its control block), ordered before what
 * follows as a signal is; from then on EVERY signal to that word is a write
 * carrying remote CQ data (tag MSCCLPP_NET_TAG_SIGNAL; payload: table index
 * in bits 8..15, the value's low byte in bits 0..7): the inline put's
 * bytes, or 8 bytes into the control block's scratch word. The receiver's
 * proxy, reading the completion, checks the entry (8-byte aligned, inside a
 * host memory it registered for Net) and advances the word by one; the low
 * byte must match. Since every later signal to the word takes this path, in
 * order, the receiver's count is exact.
 */
#ifndef MSCCLPP_SRC_TRANSPORT_NET_SIGNAL_CQ_H_
#define MSCCLPP_SRC_TRANSPORT_NET_SIGNAL_CQ_H_

#include <stdint.h>

#include "mscclpp/core.h"

#define MSCCLPP_NET_TAG_SIGNAL 8u /* remote CQ data: payload = index << 8 | low byte */
#define MSCCLPP_NET_SIG_SLOTS 256u

struct mscclppNetConn;
struct mscclppNetLink;
struct mscclppNetOp;

/* The sending side's copy of the peer's table: the peer's semaphore
 * addresses (0: free); the submitting thread's, under net->lock. */
struct mscclppNetSigTable {
  uint64_t addrs[MSCCLPP_NET_SIG_SLOTS];
  uint32_t n, last;
};

/* The index of `addr` in the table, or -1. */
int mscclppNetSigFind(struct mscclppNetSigTable* t, uint64_t addr);
/* With net->lock held: put `addr` into the peer's table (a free entry; -1
 * in *index when full or the provider has no remote CQ data). The entry's
 * write is submitted before any signal that names it, and ordered before
 * them as signals are (fenced providers: those wait for its delivery). */
mscclppResult_t mscclppNetSigAddLocked(struct mscclppNetLink* l, uint64_t addr, int* index);
/* Make o (an injected write already set up) carry a signal of entry index
 * with value sigValue as remote CQ data. */
void mscclppNetSigMark(struct mscclppNetOp* o, struct mscclppNetLink* l, int index, uint64_t sigValue);
/* The engine's handler for MSCCLPP_NET_TAG_SIGNAL (net->lock held). */
void mscclppNetSignalReceivedLocked(struct mscclppNetConn* nc, uint32_t payload);

#endif /* MSCCLPP_SRC_TRANSPORT_NET_SIGNAL_CQ_H_ */
