/* SPDX-License-Identifier: MIT */
/* The endpoint: one per memory context and NIC (fabric, domain, endpoint,
 * completion queue, address vector), opened on the first network connection
 * and closed with the memory context. See net_internal.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "transport/net/engine.h"
#include "transport/net/net_internal.h"
#include "transport/net/ofi_loader.h"

const char* mscclppNetDescribe(const struct mscclppNet* net) { return net->desc; }
enum mscclppNetSignalMode mscclppNetSignalModeOf(const struct mscclppNet* net) { return net->signalMode; }
int mscclppNetHasHmem(const struct mscclppNet* net) { return net->hmem; }
int mscclppNetHasCqSignals(const struct mscclppNet* net) { return net->cqDataSize >= 4 && net->injectSize >= 8; }
int mscclppNetHasTwoTargetSignals(const struct mscclppNet* net) { return net->twoTargets; }

void mscclppNetClose(struct mscclppNet* net) {
  const struct mscclppOfiLib* lib = mscclppOfi();
  if (net->ep) ofi_close(&net->ep->fid);
  net->ep = NULL;
  mscclppNetEngineRelease(net); /* no operation can be in flight any more */
  if (net->av) ofi_close(&net->av->fid);
  if (net->cq) ofi_close(&net->cq->fid);
  if (net->domain) ofi_close(&net->domain->fid);
  if (net->fabric) ofi_close(&net->fabric->fid);
  if (net->info) lib->freeinfo(net->info);
  pthread_mutex_destroy(&net->lock);
  free(net);
}

#define NET_FI_CHECK(call, what)                                                                                      \
  do {                                                                                                             \
    int rc_ = (int)(call);                                                                                         \
    if (rc_ != 0) {                                                                                                \
      res = mscclppErr(mscclppSystemError, MSCCLPP_LOG_NET, "network transport (%s): %s failed: %s", net->desc, \
                       what, lib->strerror(rc_ < 0 ? -rc_ : rc_));                                                   \
      goto fail_close;                                                                                             \
    }                                                                                                              \
  } while (0)

static mscclppResult_t netOpen(const struct mscclppNetConfig* cfg, struct mscclppNet** out) {
  const struct mscclppOfiLib* lib = mscclppOfi();
  struct mscclppNet* net = calloc(1, sizeof(*net));
  if (net == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_NET, "cannot allocate the network state");
  pthread_mutex_init(&net->lock, NULL);
  net->rank = cfg->rank;
  net->timeoutSec = cfg->timeoutSec;
  net->abortFlag = cfg->abortFlag;
  net->nextKey = 1;
  mscclppResult_t res = mscclppNetPickProvider(cfg, net);
  if (res != mscclppSuccess) goto fail_close;
  NET_FI_CHECK(lib->fabric(net->info->fabric_attr, &net->fabric, NULL), "fi_fabric");
  NET_FI_CHECK(ofi_domain(net->fabric, net->info, &net->domain, NULL), "fi_domain");
  struct ofi_cq_attr cqAttr;
  memset(&cqAttr, 0, sizeof(cqAttr));
  cqAttr.format = OFI_CQ_FORMAT_DATA;
  cqAttr.size = net->info->tx_attr->size + net->info->rx_attr->size;
  cqAttr.wait_obj = OFI_WAIT_NONE;
  NET_FI_CHECK(ofi_cq_open(net->domain, &cqAttr, &net->cq, NULL), "fi_cq_open");
  struct ofi_av_attr avAttr;
  memset(&avAttr, 0, sizeof(avAttr));
  avAttr.type = net->info->domain_attr->av_type != OFI_AV_UNSPEC ? net->info->domain_attr->av_type : OFI_AV_TABLE;
  avAttr.count = 256;
  NET_FI_CHECK(ofi_av_open(net->domain, &avAttr, &net->av, NULL), "fi_av_open");
  NET_FI_CHECK(ofi_endpoint(net->domain, net->info, &net->ep, NULL), "fi_endpoint");
  NET_FI_CHECK(ofi_ep_bind(net->ep, &net->cq->fid, OFI_TRANSMIT | OFI_RECV), "fi_ep_bind(cq)");
  NET_FI_CHECK(ofi_ep_bind(net->ep, &net->av->fid, 0), "fi_ep_bind(av)");
  NET_FI_CHECK(ofi_enable(net->ep), "fi_enable");
  net->addrLen = sizeof(net->addr);
  NET_FI_CHECK(ofi_getname(net->ep, net->addr, &net->addrLen), "fi_getname");
  MSCCLPP_INFO(MSCCLPP_LOG_NET, "rank %d: network transport %s (inject %zu, tx queue %zu)", cfg->rank, net->desc,
               net->injectSize, net->txDepth);
  *out = net;
  return mscclppSuccess;
fail_close:
  mscclppNetClose(net);
  return res;
}


mscclppResult_t mscclppNetOf(struct mscclppMemContext* mctx, const struct mscclppNetConfig* cfg,
                             struct mscclppNet** out) {
  void* cur = mscclppMemContextHookState(mctx, mscclppTransportNet);
  if (cur != NULL) {
    *out = cur;
    return mscclppSuccess;
  }
  if (!mscclppNetLibAvailable())
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_NET, "network transport: %s", mscclppNetLibError());
  struct mscclppNet* net = NULL;
  MSCCLPP_RETURN_ON_ERROR(netOpen(cfg, &net));
  net->mctx = mctx;
  void* attached = NULL;
  mscclppMemContextAttach(mctx, mscclppTransportNet, &mscclppNetMemHook, net, &attached);
  if (attached != net) mscclppNetClose(net);
  *out = attached;
  return mscclppSuccess;
}

void mscclppNetAddress(const struct mscclppNet* net, uint8_t* addr, size_t* len) {
  memcpy(addr, net->addr, net->addrLen);
  *len = net->addrLen;
}

mscclppResult_t mscclppNetInsertPeer(struct mscclppNet* net, const uint8_t* addr, size_t len, uint64_t* fiAddr) {
  const struct mscclppOfiLib* lib = mscclppOfi();
  ofi_addr_t a = OFI_ADDR_NOTAVAIL;
  pthread_mutex_lock(&net->lock);
  int rc = ofi_av_insert(net->av, addr, 1, &a, 0, NULL);
  pthread_mutex_unlock(&net->lock);
  if (rc != 1)
    return mscclppErr(mscclppRemoteError, MSCCLPP_LOG_NET,
                      "network transport (%s): the peer's address (%zu bytes) is not usable here (fi_av_insert: %s)",
                      net->desc, len, rc < 0 ? lib->strerror(-rc) : "not inserted");
  *fiAddr = (uint64_t)a;
  return mscclppSuccess;
}

