/* SPDX-License-Identifier: MIT */
/*
 * The operation engine: RMA writes posted to the endpoint, queued in order
 * per connection while the provider cannot take them, completions read from
 * the completion queue, and bounded waits. It knows no protocol: what an
 * operation carries is a message (up to two source pieces, up to two
 * targets, flags), remote CQ data that arrives is handed to the handler
 * registered for its tag, and what a protocol must do around the queue it
 * does in hooks of its own (per connection and per operation), called with
 * the endpoint's lock held.
 *
 * Remote CQ data (32 bits, what every provider with remote CQ data carries):
 *   bits 28..31 tag | bits 16..27 the receiver's connection id | bits 0..15
 *   payload (the tag's handler reads it).
 */
#ifndef MSCCLPP_SRC_TRANSPORT_NET_ENGINE_H_
#define MSCCLPP_SRC_TRANSPORT_NET_ENGINE_H_

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "mscclpp/core.h"
#include "transport/net/net_internal.h"

#define MSCCLPP_NET_CQ_TAG_SHIFT 28
#define MSCCLPP_NET_CQ_ID_MASK 0xfffu
#define MSCCLPP_NET_CQ_PAYLOAD_MASK 0xffffu

static inline uint32_t mscclppNetCqData(uint32_t tag, uint32_t connId, uint32_t payload) {
  return tag << MSCCLPP_NET_CQ_TAG_SHIFT | (connId & MSCCLPP_NET_CQ_ID_MASK) << 16 |
         (payload & MSCCLPP_NET_CQ_PAYLOAD_MASK);
}

struct mscclppNetConn;
struct mscclppNetOp;

/* What the protocol above does for a connection (each with net->lock held). */
struct mscclppNetConnHooks {
  /* On every progress pass over the endpoint's connections, after the
   * completion queue was read (NULL: nothing). */
  void (*progress)(struct mscclppNetConn* nc);
  /* Before the connection's queue is posted: what must not wait behind it
   * (NULL: nothing). Posts with mscclppNetPostSideLocked. */
  void (*ahead)(struct mscclppNetConn* nc);
  /* Frees the connection, once nothing of it is in flight (without the lock). */
  void (*destroy)(struct mscclppNetConn* nc);
};

/* What the protocol does for one operation (with net->lock held). */
struct mscclppNetOpHooks {
  /* Before the operation is posted, when it is first in its connection's
   * queue and the engine would post it: 1 = post it now (its message
   * complete), 0 = not yet (it stays first; asked again on the next pass),
   * negative = an errno-style error (the connection fails). Asked again
   * when the provider answered "busy". */
  int (*prepare)(struct mscclppNetOp* o);
  /* The provider took it. */
  void (*posted)(struct mscclppNetOp* o);
};

/* A connection's state inside the engine. Fields are guarded by net->lock. */
struct mscclppNetConn {
  struct mscclppNet* net;
  const struct mscclppNetConnHooks* hooks;
  void* user;      /* the protocol's connection */
  uint32_t id;     /* index in net->conns (remote CQ data names it) */
  uint32_t peerId; /* the peer's id for this connection */
  uint64_t fiAddr; /* fi_addr_t of the peer */
  /* 0 while the opening thread still fills its fields without the lock:
   * the engine's passes over net->conns skip the connection. Set (under
   * the lock) by mscclppNetConnPublish before anything is posted. */
  int ready;
  int removed; /* mscclppNetConnRemove ran: completions still to come ignore it */
  int rank, peerRank;
  /* operations: submitted = posted + queued; completed counts completions */
  uint64_t submitted, completed;
  int sideInFlight; /* mscclppNetPostSideLocked's, not counted in submitted */
  struct mscclppNetOp *qHead, *qTail; /* waiting: provider queue full, busy, fence, prepare */
  int queued;
  mscclppResult_t error; /* first completion error (sticky) */
  uint64_t progressSeen; /* the endpoint's progress round at this connection's last mscclppNetProgress */
  char errText[320];
  int errReported;
  struct mscclppNetConn* zombieNext;
};

/* Flags of an operation's message. */
#define MSCCLPP_NET_OP_INJECT 1u   /* the provider copies the source before posting returns */
#define MSCCLPP_NET_OP_CQ_DATA 2u  /* cqData travels as remote CQ data */
#define MSCCLPP_NET_OP_DELIVERY 4u /* complete once delivered (FI_DELIVERY_COMPLETE) */

/* One operation: one RMA write message. */
struct mscclppNetOp {
  uint8_t fiContext[64]; /* struct fi_context2 lives here while posted (first member) */
  struct mscclppNetOp* next;
  struct mscclppNetConn* nc;
  const char* what; /* names it in messages ("write", "signal", ...) */
  const struct mscclppNetOpHooks* hooks; /* NULL: none */
  uint64_t seq;  /* nc->submitted before it */
  int fence;     /* post only once every earlier op of the connection completed */
  int side;      /* posted by mscclppNetPostSideLocked */
  uint32_t flags;
  uint32_t cqData;
  int nIov;
  struct {
    const void* buf;
    void* desc;
    size_t len;
  } iov[2];
  int nRma;
  struct {
    uint64_t addr, key;
    size_t len;
  } rma[2];
  uint32_t proto; /* the protocol's own state */
  uint64_t traceNs; /* when it was posted, while tracing (0: not traced) */
  /* bytes the operation carries itself (injected payloads, a staging
   * header); not cleared by mscclppNetOpGet */
  uint64_t data[8];
};

/* Make o one injected write of len (at most sizeof(o->data)) bytes, copied
 * into o->data, to raddr/rkey; its other flags and hooks are the caller's. */
void mscclppNetOpInject(struct mscclppNetOp* o, const void* bytes, size_t len, uint64_t raddr, uint64_t rkey);

/* Remote CQ data with `tag` arrived for nc (nc ready, not removed); net->lock held. */
typedef void (*mscclppNetRemoteFn)(struct mscclppNetConn* nc, uint32_t payload);
/* Hand remote CQ data with tag (0..MSCCLPP_NET_CQ_TAGS-1) to fn. */
void mscclppNetSetRemoteHandler(struct mscclppNet* net, uint32_t tag, mscclppNetRemoteFn fn);

/* Register a connection (id assignment; hooks and user set). Remove hands
 * it back: the engine calls hooks->destroy(nc) - now when nothing of it is
 * in flight, else when the endpoint closes (the provider may still touch
 * its buffers). */
mscclppResult_t mscclppNetConnAdd(struct mscclppNet* net, struct mscclppNetConn* nc);
void mscclppNetConnRemove(struct mscclppNet* net, struct mscclppNetConn* nc);
/* The opening thread is done writing nc's setup fields: from now on they
 * are read and written only with net->lock held. */
void mscclppNetConnPublish(struct mscclppNet* net, struct mscclppNetConn* nc);
/* At endpoint close, once nothing can be in flight: destroy the removed
 * connections and free the operation pool. */
void mscclppNetEngineRelease(struct mscclppNet* net);

/* An operation from the endpoint's pool, cleared but for data (NULL:
 * mscclppSystemError logged). */
struct mscclppNetOp* mscclppNetOpGet(struct mscclppNet* net);
struct mscclppNetOp* mscclppNetOpGetLocked(struct mscclppNet* net);
/* Submit an operation (nc and its message set): posted now if the provider
 * takes it, otherwise queued in order behind the connection's earlier ones.
 * Returns the connection's sticky error, if any. */
mscclppResult_t mscclppNetSubmit(struct mscclppNet* net, struct mscclppNetOp* o);
mscclppResult_t mscclppNetSubmitLocked(struct mscclppNet* net, struct mscclppNetOp* o);
/* With net->lock held: post o now, around the connection's queue (from an
 * `ahead` hook): 0 posted, 1 not now (o freed: try again later), negative:
 * an error (o freed, the connection failed). Idle waits for it too. */
int mscclppNetPostSideLocked(struct mscclppNet* net, struct mscclppNetOp* o);
/* With net->lock held: post what is queued on nc. */
void mscclppNetKickLocked(struct mscclppNet* net, struct mscclppNetConn* nc);

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

/* With net->lock held: record a failure on nc (sticky, reported once). */
void mscclppNetConnFailLocked(struct mscclppNetConn* nc, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

pthread_mutex_t* mscclppNetLock(struct mscclppNet* net);

#endif /* MSCCLPP_SRC_TRANSPORT_NET_ENGINE_H_ */
