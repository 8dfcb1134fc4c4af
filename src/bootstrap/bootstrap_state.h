/* SPDX-License-Identifier: MIT */
/*
 * The state of a rank's bootstrap, shared by its files:
 *   bootstrap.c  create (rendezvous, monitor, first barrier), destroy, queries
 *   progress.c   connections: the epoll set, reading, peer states, the
 *                progress thread (accepting peers, reading idle connections)
 *   messages.c   sending, receiving, allgather, barrier
 *   shrink.c     a new bootstrap of some ranks, agreed over this one
 * bootstrap.h describes the design; this header says who owns what.
 *
 * Threads and ownership:
 *  - the progress thread waits on one epoll set (wake eventfd, peer listener,
 *    handshakes in progress, every connection). It owns the listener and the
 *    handshakes, and reads any connection that no application thread is
 *    reading.
 *  - an application thread waiting for a message from rank P takes over the
 *    connection from P (c->reader): it reads what has already arrived; if it
 *    must wait, it removes the fd from the epoll set, then polls and reads it
 *    itself, queueing whatever arrives, until its message is there; then it
 *    gives the fd back. A message therefore costs one thread wake-up, as on a
 *    raw socket, and nobody reads it twice. A
 *    connection has one reader at a time (c->reader or c->progressReading,
 *    under bs->lock); the reader is the only one that closes an incoming fd.
 *  - application threads create outgoing connections (under the peer's send
 *    lock) and write on them; only the progress thread reads them (GOODBYE,
 *    PEER_STATUS, EOF).
 *  - whoever notices a loss on rank 0 writes PEER_STATUS notices on the
 *    incoming connections (each rank's connection to rank 0), under
 *    bs->noticeLock. Destroy repeats a known loss to every peer before its
 *    GOODBYE; after a failed creation it reports itself lost, so that peers
 *    still creating fail at once instead of waiting for it.
 *  - bs->lock guards the connection list, in/out tables, queues, peer states
 *    and each connection's reader/goodbye/eof flags.
 *  - Destroy stops the progress thread first; nothing else may run then.
 */
#ifndef MSCCLPP_SRC_BOOTSTRAP_BOOTSTRAP_STATE_H_
#define MSCCLPP_SRC_BOOTSTRAP_BOOTSTRAP_STATE_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/handshake.h"

#define WAIT_SLICE_MS 100
#define MAX_PENDING 1024
#define READ_BUDGET_BYTES ((size_t)8 << 20)
#define GOODBYE_SECONDS 0.2
#define NOTICE_SECONDS 0.2
#define REASON_BYTES 512
#define MAX_HANDLERS 4

enum { PEER_ALIVE = 0, PEER_LEFT = 1, PEER_LOST = 2 };
/* What an epoll event's pointer points at: every such object starts with one
 * of these. */
enum { EV_WAKE = 1, EV_LISTEN = 2, EV_PENDING = 3, EV_CONN = 4 };

struct mscclppBsMsg {
  struct mscclppBsMsg* next;
  uint8_t flags; /* MSCCLPP_BS_FLAG_* */
  int32_t tag;
  size_t size;
  uint8_t* data; /* right after the struct, same allocation */
};

struct mscclppBsQueue {
  struct mscclppBsMsg* head;
  struct mscclppBsMsg* tail;
};

/* Append m to q (m->next is NULL). Call with the bootstrap's lock held. */
static inline void mscclppBsQueuePushLocked(struct mscclppBsQueue* q, struct mscclppBsMsg* m) {
  if (q->tail)
    q->tail->next = m;
  else
    q->head = m;
  q->tail = m;
}

struct mscclppBsConn {
  int kind; /* EV_CONN */
  int fd;   /* -1 once closed */
  int peer;
  int outgoing; /* 1: this rank connected (carries our messages to peer) */
  /* read state: only the current reader touches it */
  uint8_t hdr[MSCCLPP_BS_HEADER_BYTES];
  size_t hdrGot;
  struct mscclppBsHeader cur;
  int inBody;
  struct mscclppBsMsg* msg;                    /* DATA being read */
  uint8_t small[MSCCLPP_BS_PEER_STATUS_BYTES]; /* PEER_STATUS being read */
  size_t bodyGot;
  /* under bs->lock */
  int reader;          /* an application thread is reading it (fd not in the epoll set) */
  int progressReading; /* the progress thread is reading it */
  int goodbye;         /* the peer said goodbye on this connection */
  int eof;             /* the connection ended; no more reads */
  char peerText[MSCCLPP_SOCKET_ADDR_TEXT];
};

struct mscclppBsPendingEntry {
  int kind; /* EV_PENDING */
  struct mscclppBsPending p;
};

struct mscclppBootstrap {
  int rank;
  int nranks;
  int localRank;
  int localNranks;
  double timeout;
  double handshakeTimeout;
  uint8_t secret[MSCCLPP_BS_SECRET_BYTES];
  char where[32];                  /* "rank 3", for log lines */
  struct mscclppBsRankInfo* peers; /* the rank table, after the rendezvous */
  union mscclppSocketAddr listenAddr;
  int listenFd;
  int wakeFd;
  int epfd;
  int wakeKind;   /* EV_WAKE: the epoll tag of wakeFd */
  int listenKind; /* EV_LISTEN: the epoll tag of listenFd */
  pthread_t progress;
  int progressStarted;
  int creationFailed; /* destroyed by a failed creation: it says so as it leaves */
  atomic_int stop;
  size_t maxPiece;
  uint32_t collSeq; /* collectives issued; their tag */
  /* call checks issued (mscclppBootstrapGatherCheck): their tags are
   * negative (CHECK_TAG in messages.c), apart from the collectives', so
   * that a check some ranks began and a revoke interrupted leaves the
   * collectives' tags equal on every rank */
  uint32_t checkSeq;
  /* mscclppBootstrapInterrupt: operations that began before the count
   * changed fail (why: interruptWhy, under lock) */
  atomic_uint interrupts;
  char interruptWhy[REASON_BYTES];

  pthread_mutex_t lock;
  pthread_cond_t cond;
  uint64_t session;
  int sessionKnown;
  struct mscclppBsConn** in;  /* [nranks] incoming connection from each rank */
  struct mscclppBsConn** out; /* [nranks] outgoing connection to each rank */
  struct mscclppBsConn** conns;
  int nconns;
  int connsCap;
  struct mscclppBsQueue* queues; /* [nranks] messages received from each rank */
  int* peerState;                /* [nranks] */
  int lostRank;                  /* first rank lost, -1 */
  char lostReason[REASON_BYTES];

  /* under lock: handlers of user tags (mscclppBootstrapSetHandler), and
   * how many of their calls are running */
  struct {
    int tag;
    mscclppBootstrapHandler fn;
    void* arg;
  } handlers[MAX_HANDLERS];
  int nhandlers;
  int handlerCalls;

  pthread_mutex_t* sendLocks; /* [nranks] one sender at a time per peer */
  pthread_mutex_t noticeLock; /* rank 0's PEER_STATUS writes */

  /* progress thread only */
  struct mscclppBsPendingEntry** pending;
  int npending;
  int pendingCap;
};

/* How one operation waits (messages.c). It ends at `deadline`; it fails
 * when the bootstrap is interrupted after it began (`interrupts` is the
 * count then), when *cancel (if not NULL) becomes nonzero, and when a rank
 * is lost: any rank, or with `survivors` only the peer it needs, so that
 * the ranks that outlived a loss can still talk (a shrink among them). */
struct mscclppBsOp {
  const char* name; /* for errors: "allgather round 2 (...)" */
  mscclppDeadline deadline;
  int survivors;
  unsigned interrupts;
  const int* cancel; /* __atomic */
  int quietTimeout;  /* the deadline is the caller's to explain: mscclppTimeout without a log line */
};

/* An operation of `name` until `deadline`, failing on any loss. */
struct mscclppBsOp mscclppBsOpOf(struct mscclppBootstrap* bs, const char* name, mscclppDeadline deadline);

/* ---- bootstrap.c: the steps of a creation, shared with shrink.c ---- */

/* A bootstrap of `rank` of `nranks` with `secret`: state only, nothing
 * started (mscclppBootstrapDestroy frees it at any step). */
mscclppResult_t mscclppBsAlloc(int rank, int nranks, const struct mscclppParams* params,
                               const uint8_t secret[MSCCLPP_BS_SECRET_BYTES], struct mscclppBootstrap** out);
/* Listen on *addr (port 0: any free one; bs->listenAddr gets the bound
 * address) and start the progress thread. */
mscclppResult_t mscclppBsStart(struct mscclppBootstrap* bs, const union mscclppSocketAddr* addr);
/* Once bs->peers and the session are set: the local rank and size, the
 * monitor connection to rank 0, a first barrier of every rank.
 * envLocalRank: the launcher's idea of the local rank (-1: none). */
mscclppResult_t mscclppBsFinishJoin(struct mscclppBootstrap* bs, mscclppDeadline deadline, int envLocalRank);

/* ---- progress.c ----------------------------------------------------------------- */

/* Wake the progress thread (it re-reads its state). */
void mscclppBsWakeProgress(struct mscclppBootstrap* bs);
/* Add fd to (remove it from) the progress thread's epoll set; `tag` points at
 * an EV_* kind. Add returns epoll_ctl's result. */
int mscclppBsEpollAdd(struct mscclppBootstrap* bs, int fd, void* tag);
void mscclppBsEpollDel(struct mscclppBootstrap* bs, int fd);
/* The lost-rank error for operation `op` (becomes the caller's last error,
 * logged at INFO: the loss was logged at WARN when detected). Call without
 * bs->lock. */
mscclppResult_t mscclppBsLostError(struct mscclppBootstrap* bs, const char* op);
int mscclppBsIsLost(struct mscclppBootstrap* bs);
struct mscclppBsConn* mscclppBsConnNew(int fd, int peer, int outgoing, const char* peerText);
/* Under bs->lock: record c in conns and in/out, and watch its fd. -1 on failure. */
int mscclppBsConnAddLocked(struct mscclppBootstrap* bs, struct mscclppBsConn* c);
/* Read what is available on c; the caller is c's reader. oneMessage: stop
 * after one whole data message. */
void mscclppBsConnRead(struct mscclppBootstrap* bs, struct mscclppBsConn* c, int oneMessage);
void* mscclppBsProgressMain(void* arg);

/* Under bs->lock (released during the calls, held again on return): give
 * each message of `list` (linked by next; the sender's rank in its tag
 * field) to handler fn, in order, and free it. */
void mscclppBsHandOverLocked(struct mscclppBootstrap* bs, mscclppBootstrapHandler fn, void* arg,
                             struct mscclppBsMsg* list);

/* ---- messages.c ------------------------------------------------------------------ */

/* The connection to `peer`, made (connect + handshake) if needed; the caller
 * holds bs->sendLocks[peer]. */
mscclppResult_t mscclppBsConnectPeer(struct mscclppBootstrap* bs, int peer, const struct mscclppBsOp* o,
                                     struct mscclppBsConn** out);
/* One message in tag space `flags & MSCCLPP_BS_FLAG_COLL`, cut into pieces
 * of at most bs->maxPiece, waiting as `o` says. */
mscclppResult_t mscclppBsSendMsg(struct mscclppBootstrap* bs, int peer, uint8_t flags, int tag, const void* data,
                                 size_t size, const struct mscclppBsOp* o);
mscclppResult_t mscclppBsRecvMsg(struct mscclppBootstrap* bs, int peer, uint8_t coll, int tag, void* data, size_t size,
                                 const struct mscclppBsOp* o);

/* Take the next message from `peer` in tag space `coll` with `tag` if one
 * has arrived (read by the progress thread): 1 and its bytes in data when
 * it is one piece of `size` bytes (other messages of that tag are dropped),
 * 0 when none is queued. Never waits, never reads a socket. */
int mscclppBsTakeQueued(struct mscclppBootstrap* bs, int peer, uint8_t coll, int tag, void* data, size_t size);

/* The next message in tag space `coll` with `tag` from any rank (one
 * piece of `size` bytes, else mscclppRemoteError), its sender in *from.
 * It waits as `o` says and also fails when a rank p with mustLive[p]
 * ([nranks]) is lost or gone with nothing of that tag queued. It takes
 * what the progress thread has read (never reads a socket itself). */
mscclppResult_t mscclppBsRecvAny(struct mscclppBootstrap* bs, uint8_t coll, int tag, const uint8_t* mustLive,
                                 void* data, size_t size, const struct mscclppBsOp* o, int* from);

#endif /* MSCCLPP_SRC_BOOTSTRAP_BOOTSTRAP_STATE_H_ */
