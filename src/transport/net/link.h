/* SPDX-License-Identifier: MIT */
/*
 * A network connection as the transport sees it: the engine's part, the
 * control block both sides write into, and the parts of the two protocols
 * above the engine (staging.h, signal_cq.h). The engine reaches it through
 * its connection's `user` pointer; each part is guarded by net->lock unless
 * its header says otherwise.
 */
#ifndef MSCCLPP_SRC_TRANSPORT_NET_LINK_H_
#define MSCCLPP_SRC_TRANSPORT_NET_LINK_H_

#include <stdint.h>

#include "memory/memory.h"
#include "transport/net/engine.h"
#include "transport/net/signal_cq.h"
#include "transport/net/staging.h"

struct mscclppConnection;

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

struct mscclppNetLink {
  struct mscclppNetConn eng;
  struct mscclppConnection* conn;
  /* this side's control block (registered) and the peer's */
  struct mscclppNetCtrl* ctrl;
  struct mscclppNetReg ctrlReg;
  uint64_t peerCtrlAddr, peerCtrlKey;
  struct mscclppNetStageRecv recv;
  struct mscclppNetStageSend send;
  struct mscclppNetSigTable sig;
};

static inline struct mscclppNetLink* mscclppNetLinkOf(struct mscclppNetConn* nc) { return nc->user; }

#endif /* MSCCLPP_SRC_TRANSPORT_NET_LINK_H_ */
