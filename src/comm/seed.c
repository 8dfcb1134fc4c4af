/* SPDX-License-Identifier: MIT */
/* The seed's API (mscclpp/seed.h) on top of connections and port channels:
 * mscclppConnect records a declaration, mscclppConnectionSetup builds them
 * all (in an order every rank agrees on), mscclppCommDestroy frees them. */
#include <stdlib.h>
#include <string.h>

#include "channel/channel.h"
#include "comm/comm.h"
#include "core/error.h"
#include "core/log.h"
#include "mscclpp/seed.h"

struct seedConn {
  mscclppDevConn* out;
  int peer;
  void* buff;
  size_t size;
  uint64_t* flag;
  int tag;
  mscclppTransport_t transport;
  int index; /* declaration order: ties between equal (pair, tag) */
  mscclppConnection_t conn;
  mscclppPortChannel_t channel;
};

/* A buffer the seed API registered. */
struct seedMem {
  void* ptr;
  size_t size;
  mscclppRegisteredMemory_t mem;
};

struct mscclppSeedState {
  struct seedConn* conns;
  int n, cap;
  struct seedMem* mems;
  int nMems;
  int setupDone;
};

mscclppResult_t mscclppConnect(mscclppComm_t comm, mscclppDevConn* devConn, int remoteRank, void* localBuff,
                               size_t buffSize, uint64_t* localFlag, int tag, mscclppTransport_t transportType,
                               const char* ibDev) {
  static const char fn[] = "mscclppConnect";
  if (comm == NULL || devConn == NULL || localBuff == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_CHANNEL, "%s: NULL %s", fn,
                      comm == NULL ? "comm" : devConn == NULL ? "devConn" : "localBuff");
  if (buffSize == 0) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_CHANNEL, "%s: buffSize is 0", fn);
  if (remoteRank < 0 || remoteRank >= comm->nranks)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_CHANNEL, "%s: remoteRank %d is outside [0, %d)", fn,
                      remoteRank, comm->nranks);
  if (ibDev != NULL)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_CHANNEL,
                      "%s: ibDev '%s': pass NULL; the network transport picks its NIC from MSCCLPP_NET_PROVIDER and "
                      "MSCCLPP_NET_IFNAME",
                      fn, ibDev);
  pthread_mutex_lock(&comm->lazyLock);
  mscclppResult_t res = mscclppSuccess;
  struct mscclppSeedState* s = comm->seed;
  if (s == NULL) s = comm->seed = calloc(1, sizeof(*s));
  if (s == NULL) {
    res = mscclppErr(mscclppSystemError, MSCCLPP_LOG_CHANNEL, "%s: out of memory", fn);
  } else if (s->setupDone) {
    res = mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_CHANNEL,
                     "%s: mscclppConnectionSetup was called already; declare every connection before it", fn);
  } else if (s->n == s->cap) {
    int cap = s->cap ? 2 * s->cap : 16;
    struct seedConn* c = realloc(s->conns, (size_t)cap * sizeof(*c));
    if (c == NULL) res = mscclppErr(mscclppSystemError, MSCCLPP_LOG_CHANNEL, "%s: out of memory", fn);
    else s->conns = c, s->cap = cap;
  }
  if (res == mscclppSuccess) {
    struct seedConn* c = &s->conns[s->n];
    memset(c, 0, sizeof(*c));
    c->out = devConn;
    c->peer = remoteRank;
    c->buff = localBuff;
    c->size = buffSize;
    c->flag = localFlag;
    c->tag = tag;
    c->transport = transportType;
    c->index = s->n++;
  }
  pthread_mutex_unlock(&comm->lazyLock);
  return res;
}

/* qsort has no context argument: the rank the comparison is for. */
static __thread int seedCmpRank;

/* Pairs in an order every rank agrees on: (lower rank, higher rank, tag,
 * declaration index). Processing them in this order cannot deadlock: the
 * smallest unfinished pair has both its ranks waiting on it. */
static int cmpConn(const void* a, const void* b) {
  const struct seedConn *x = a, *y = b;
  int xl = x->peer < seedCmpRank ? x->peer : seedCmpRank, xh = x->peer < seedCmpRank ? seedCmpRank : x->peer;
  int yl = y->peer < seedCmpRank ? y->peer : seedCmpRank, yh = y->peer < seedCmpRank ? seedCmpRank : y->peer;
  if (xl != yl) return xl < yl ? -1 : 1;
  if (xh != yh) return xh < yh ? -1 : 1;
  if (x->tag != y->tag) return x->tag < y->tag ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}

static mscclppResult_t registerBuffer(mscclppComm_t comm, struct mscclppSeedState* s, void* ptr, size_t size,
                                      mscclppRegisteredMemory_t* mem) {
  for (int i = 0; i < s->nMems; i++)
    if (s->mems[i].ptr == ptr && s->mems[i].size == size) {
      *mem = s->mems[i].mem;
      return mscclppSuccess;
    }
  struct seedMem* m = realloc(s->mems, (size_t)(s->nMems + 1) * sizeof(*m));
  if (m == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_CHANNEL, "mscclppConnectionSetup: out of memory");
  s->mems = m;
  MSCCLPP_RETURN_ON_ERROR(mscclppMemoryRegister(comm, ptr, size, mscclppTransportAuto, &m[s->nMems].mem));
  m[s->nMems].ptr = ptr;
  m[s->nMems].size = size;
  *mem = m[s->nMems++].mem;
  return mscclppSuccess;
}

mscclppResult_t mscclppConnectionSetup(mscclppComm_t comm) {
  if (comm == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_CHANNEL, "mscclppConnectionSetup: NULL");
  pthread_mutex_lock(&comm->lazyLock);
  struct mscclppSeedState* s = comm->seed;
  int again = s != NULL && s->setupDone;
  if (s != NULL) s->setupDone = 1;
  pthread_mutex_unlock(&comm->lazyLock);
  if (again)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_CHANNEL, "mscclppConnectionSetup: called twice");
  if (s == NULL) return mscclppSuccess; /* nothing declared */
  seedCmpRank = comm->rank;
  struct seedConn* order = malloc((size_t)s->n * sizeof(*order) + 1);
  if (order == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_CHANNEL, "mscclppConnectionSetup: out of memory");
  memcpy(order, s->conns, (size_t)s->n * sizeof(*order));
  qsort(order, (size_t)s->n, sizeof(*order), cmpConn);
  mscclppResult_t res = mscclppSuccess;
  for (int i = 0; i < s->n && res == mscclppSuccess; i++) {
    struct seedConn* c = &s->conns[order[i].index];
    mscclppRegisteredMemory_t mem = NULL;
    res = registerBuffer(comm, s, c->buff, c->size, &mem);
    if (res == mscclppSuccess) res = mscclppConnectionCreate(comm, c->peer, c->tag, c->transport, &c->conn);
    if (res != mscclppSuccess) break;
    mscclppPortChannelConfig cfg = MSCCLPP_PORT_CHANNEL_CONFIG_INITIALIZER;
    cfg.tag = c->tag;
    cfg.local = mem;
    res = mscclppPortChannelCreate(comm, c->conn, &cfg, &c->channel);
    if (res != mscclppSuccess) break;
    mscclppDevConn d;
    memset(&d, 0, sizeof(d));
    mscclppPortChannelGetDeviceHandle(c->channel, &d.port);
    mscclppMemoryDevicePtr(mem, &d.localBuff);
    d.remoteBuff = mscclppPortChannelRemotePtr(c->channel);
    d.localFlag = c->flag;
    d.buffSize = c->size;
    d.tag = c->tag;
    d.remoteRank = c->peer;
    *c->out = d;
  }
  free(order);
  return res;
}

mscclppResult_t mscclppProxyLaunch(mscclppComm_t comm) { return mscclppCommProxyStart(comm); }

void mscclppSeedRelease(struct mscclppComm* comm) {
  struct mscclppSeedState* s = comm->seed;
  if (s == NULL) return;
  int built = 0;
  for (int i = 0; i < s->n; i++) {
    struct seedConn* c = &s->conns[i];
    if (c->channel != NULL && mscclppPortChannelDestroy(c->channel) == mscclppSuccess) c->channel = NULL;
    if (c->conn != NULL) {
      mscclppConnectionDestroy(c->conn);
      c->conn = NULL;
      built = 1;
    }
  }
  /* peers unmap our buffers before any rank frees them (best effort: a lost
   * peer makes the barrier fail at once) */
  if (built) (void)mscclppBootstrapBarrierWait(comm->bootstrap);
  for (int i = 0; i < s->nMems; i++) mscclppMemoryDeregister(s->mems[i].mem);
  free(s->mems);
  free(s->conns);
  free(s);
  comm->seed = NULL;
}
