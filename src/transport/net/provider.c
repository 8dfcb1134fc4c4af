/* SPDX-License-Identifier: MIT */
/* Provider and NIC choice: which libfabric provider and domain the endpoint
 * opens (MSCCLPP_NET_PROVIDER, MSCCLPP_NET_IFNAME), what that pair offers
 * (write order, FI_HMEM, sizes), and the probe mscclpp-info prints. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "core/params.h"

#include "transport/net/net_internal.h"
#include "transport/net/ofi_loader.h"
#include "transport/net/staging.h"

static const char* provName(const struct ofi_info* i) {
  return i->fabric_attr && i->fabric_attr->prov_name ? i->fabric_attr->prov_name : "?";
}
static const char* domName(const struct ofi_info* i) {
  return i->domain_attr && i->domain_attr->name ? i->domain_attr->name : "?";
}

/* MSCCLPP_NET_IFNAME: comma list of prefixes; a leading ^ excludes the
 * list; = before a name matches it exactly. */
static int ifnameMatches(const char* list, const char* name) {
  if (list == NULL || list[0] == '\0') return 1;
  int exclude = list[0] == '^';
  const char* p = list + exclude;
  int hit = 0;
  while (*p) {
    const char* e = strchr(p, ',');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    int exact = n > 0 && p[0] == '=';
    const char* w = p + exact;
    size_t wn = n - (size_t)exact;
    if (wn > 0 && (exact ? (strlen(name) == wn && strncmp(name, w, wn) == 0) : strncmp(name, w, wn) == 0)) hit = 1;
    if (!e) break;
    p = e + 1;
  }
  return exclude ? !hit : hit;
}

/* Providers never picked without being named: they reach only this host. */
static int hostOnlyProvider(const char* prov) {
  return strcmp(prov, "shm") == 0 || strcmp(prov, "sm2") == 0 || strncmp(prov, "shm;", 4) == 0;
}

static struct ofi_info* baseHints(const char* prov, const char* domain, int ordered, int hmem) {
  const struct mscclppOfiLib* lib = mscclppOfi();
  struct ofi_info* h = lib->dupinfo(NULL);
  if (h == NULL) return NULL;
  h->caps = OFI_RMA | OFI_WRITE | OFI_REMOTE_WRITE | (hmem ? OFI_HMEM : 0);
  h->mode = OFI_CONTEXT | OFI_CONTEXT2;
  h->ep_attr->type = OFI_EP_RDM;
  h->domain_attr->mr_mode = OFI_MR_LOCAL | OFI_MR_VIRT_ADDR | OFI_MR_ALLOCATED | OFI_MR_PROV_KEY | OFI_MR_ENDPOINT |
                            (hmem ? OFI_MR_HMEM : 0);
  h->domain_attr->threading = OFI_THREAD_DOMAIN;
  if (ordered) h->tx_attr->msg_order = OFI_ORDER_WAW | OFI_ORDER_RMA_WAW;
  if (prov != NULL && prov[0]) h->fabric_attr->prov_name = strdup(prov);
  if (domain != NULL && domain[0]) h->domain_attr->name = strdup(domain);
  return h;
}

static void listProviders(const char* prov, char* buf, size_t len) {
  const struct mscclppOfiLib* lib = mscclppOfi();
  struct ofi_info* h = lib->dupinfo(NULL);
  struct ofi_info* all = NULL;
  buf[0] = '\0';
  if (h == NULL) return;
  if (prov != NULL && prov[0]) h->fabric_attr->prov_name = strdup(prov);
  if (lib->getinfo(mscclppOfiApiVersion(), NULL, NULL, 0, h, &all) == 0) {
    size_t used = 0;
    for (struct ofi_info* i = all; i != NULL && used < len; i = i->next) {
      char item[96];
      snprintf(item, sizeof(item), "%s on %s (%s%s)", provName(i), domName(i),
               i->ep_attr->type == OFI_EP_RDM ? "RDM" : i->ep_attr->type == OFI_EP_MSG ? "MSG" : "DGRAM",
               (i->caps & OFI_RMA) ? ", RMA" : ", no RMA");
      if (strstr(buf, item) != NULL) continue;
      used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? "; " : "", item);
    }
    lib->freeinfo(all);
  }
  lib->freeinfo(h);
  if (buf[0] == '\0') snprintf(buf, len, "none");
}

/* Pick provider and domain, then learn what that pair offers (write order,
 * FI_HMEM). */
mscclppResult_t mscclppNetPickProvider(const struct mscclppNetConfig* cfg, struct mscclppNet* net) {
  const struct mscclppOfiLib* lib = mscclppOfi();
  struct ofi_info* hints = baseHints(cfg->provider, NULL, 0, 0);
  if (hints == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_NET, "fi_allocinfo failed");
  struct ofi_info* all = NULL;
  int rc = lib->getinfo(mscclppOfiApiVersion(), NULL, NULL, 0, hints, &all);
  lib->freeinfo(hints);
  const struct ofi_info* pick = NULL;
  for (const struct ofi_info* i = rc == 0 ? all : NULL; i != NULL && pick == NULL; i = i->next) {
    if ((cfg->provider == NULL || cfg->provider[0] == '\0') && hostOnlyProvider(provName(i))) continue;
    if (ifnameMatches(cfg->ifname, domName(i))) pick = i;
  }
  if (pick == NULL) {
    char found[1024];
    listProviders(cfg->provider, found, sizeof(found));
    mscclppResult_t res;
    if (rc == 0 && all != NULL)
      res = mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_NET,
                       "network transport: no domain matches MSCCLPP_NET_IFNAME='%s' (provider '%s'); libfabric "
                       "offers: %s",
                       cfg->ifname, cfg->provider[0] ? cfg->provider : "(any)", found);
    else if (cfg->provider[0] && strcmp(found, "none") != 0)
      res = mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_NET,
                       "network transport: provider '%s' (MSCCLPP_NET_PROVIDER) offers no RMA on reliable datagram "
                       "endpoints (FI_EP_RDM with FI_RMA and the memory registration modes mscclpp handles); it "
                       "offers: %s",
                       cfg->provider, found);
    else
      res = mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_NET,
                       "network transport: libfabric %u.%u finds no provider%s%s%s with RMA on FI_EP_RDM (fi_getinfo: "
                       "%s); providers found: %s",
                       OFI_MAJOR(lib->version()), OFI_MINOR(lib->version()), cfg->provider[0] ? " '" : "",
                       cfg->provider, cfg->provider[0] ? "'" : "", rc ? lib->strerror(-rc) : "no match", found);
    if (all) lib->freeinfo(all);
    return res;
  }
  char prov[48], dom[48];
  snprintf(prov, sizeof(prov), "%s", provName(pick));
  snprintf(dom, sizeof(dom), "%s", domName(pick));
  char fabricName[48];
  snprintf(fabricName, sizeof(fabricName), "%s", pick->fabric_attr->name ? pick->fabric_attr->name : "?");
  struct ofi_info* chosen = NULL;
  for (int pass = 0; pass < 4 && chosen == NULL; pass++) {
    int ordered = pass < 2, hmem = (pass % 2) == 0;
    struct ofi_info* h = baseHints(prov, dom, ordered, hmem);
    struct ofi_info* r = NULL;
    if (h != NULL && lib->getinfo(mscclppOfiApiVersion(), NULL, NULL, 0, h, &r) == 0 && r != NULL) {
      chosen = lib->dupinfo(r);
      net->hmem = hmem;
      net->signalMode = ordered && r->ep_attr->max_order_waw_size >= MSCCLPP_NET_STAGE_SLOT_BYTES
                            ? MSCCLPP_NET_SIGNAL_ORDERED
                            : MSCCLPP_NET_SIGNAL_FENCED;
    }
    if (r) lib->freeinfo(r);
    if (h) lib->freeinfo(h);
  }
  lib->freeinfo(all);
  if (chosen == NULL)
    return mscclppErr(mscclppSystemError, MSCCLPP_LOG_NET, "network transport: provider %s on %s vanished", prov, dom);
  net->info = chosen;
  net->mrMode = chosen->domain_attr->mr_mode;
  if (chosen->domain_attr->mr_key_size > 8) {
    lib->freeinfo(chosen);
    net->info = NULL;
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_NET,
                      "network transport: provider %s uses %zu-byte memory keys (FI_MR_RAW); mscclpp handles up to 8",
                      prov, chosen->domain_attr->mr_key_size);
  }
  net->injectSize = chosen->tx_attr->inject_size;
  net->maxMsg = chosen->ep_attr->max_msg_size ? chosen->ep_attr->max_msg_size : (size_t)1 << 30;
  net->txDepth = chosen->tx_attr->size ? chosen->tx_attr->size : 64;
  net->iovLimit = chosen->tx_attr->iov_limit;
  net->cqDataSize = chosen->domain_attr->cq_data_size;
  net->twoTargets = net->signalMode == MSCCLPP_NET_SIGNAL_ORDERED && chosen->tx_attr->rma_iov_limit >= 2 &&
                    net->iovLimit >= 2 && net->injectSize >= 16 &&
                    !(cfg->signal != NULL && strcmp(cfg->signal, "cq") == 0);
  snprintf(net->desc, sizeof(net->desc), "%s on %s (%s; mr_mode%s%s%s%s%s; %s signals%s%s)", prov, dom, fabricName,
           (net->mrMode & OFI_MR_VIRT_ADDR) ? " virt_addr" : " offsets", (net->mrMode & OFI_MR_PROV_KEY) ? " prov_key" : "",
           (net->mrMode & OFI_MR_LOCAL) ? " local" : "", (net->mrMode & OFI_MR_ENDPOINT) ? " endpoint" : "",
           (net->mrMode & OFI_MR_HMEM) ? " hmem" : "",
           net->signalMode == MSCCLPP_NET_SIGNAL_ORDERED ? "ordered" : "fenced",
           net->twoTargets ? ", a small put's in its message" : "",
           net->hmem ? ", FI_HMEM" : ", GPU memory staged");
  return mscclppSuccess;
}


mscclppResult_t mscclppNetProbe(const struct mscclppNetConfig* cfg, char* text, size_t len) {
  const struct mscclppOfiLib* lib = mscclppOfi();
  if (!mscclppNetLibAvailable()) {
    snprintf(text, len, "%s", mscclppNetLibError());
    return mscclppInvalidUsage;
  }
  struct mscclppNet* net = calloc(1, sizeof(*net));
  if (net == NULL) {
    snprintf(text, len, "out of memory");
    return mscclppSystemError;
  }
  mscclppResult_t res = mscclppNetPickProvider(cfg, net);
  snprintf(text, len, "%s", res == mscclppSuccess ? net->desc : mscclppGetLastError());
  if (net->info) lib->freeinfo(net->info);
  free(net);
  return res;
}

mscclppResult_t mscclppGetNetDescription(char* buf, size_t len) {
  if (buf == NULL || len == 0)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_NET, "mscclppGetNetDescription: %s",
                      buf == NULL ? "buf is NULL" : "len is 0");
  struct mscclppParams params;
  mscclppResult_t res = mscclppParamsLoad(&params);
  if (res != mscclppSuccess) {
    snprintf(buf, len, "%s", mscclppGetLastError());
    return res;
  }
  struct mscclppNetConfig cfg = {params.netProvider, params.netIfname, params.timeout, NULL, 0, params.netSignal};
  return mscclppNetProbe(&cfg, buf, len);
}

