/* The network transport's libfabric side: loader, endpoint, registration,
 * the operation engine and the completion queue. See net_ofi.h. */
#include "transport/net/net_ofi.h"

#include <dlfcn.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "core/util.h"
#include "gpu/gpu_ipc.h"
#include "transport/net/ofi_abi.h"

static int forceStaging; /* tests only (__atomic) */

#if defined(__SANITIZE_THREAD__)
#define MSCCLPP_NET_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MSCCLPP_NET_TSAN 1
#endif
#endif
#ifdef MSCCLPP_NET_TSAN
/* ThreadSanitizer builds: libfabric is not instrumented, and a provider
 * places a peer's RMA writes into registered memory with plain copies
 * (what a NIC does with DMA), ordered only by the peer's actions, which TSan
 * cannot see across processes; it sees those copies through its memcpy
 * interceptor and calls them races (often with the stack of the writing
 * thread lost, so race: rules alone do not catch them). called_from_lib
 * makes TSan ignore what libfabric does through its interceptors: its
 * copies count as a device's, as they are. Every call into libfabric is
 * made with the endpoint's lock held, so no ordering of ours is lost. The same rules are in scripts/tsan-suppressions.txt (test.sh);
 * they are built in here so that every TSan program using the network
 * transport has them. */
const char* __tsan_default_suppressions(void);
const char* __tsan_default_suppressions(void) {
  return "called_from_lib:libfabric.so\nrace:libfabric.so\nsignal:libfabric.so\nmutex:libfabric.so\nmutex:_dl_call_fini\n";
}
#endif

void mscclppNetTestForceStaging(int on) { __atomic_store_n(&forceStaging, on, __ATOMIC_RELEASE); }
int mscclppNetTestStagingOn(void) { return __atomic_load_n(&forceStaging, __ATOMIC_ACQUIRE); }




_Static_assert(sizeof(struct ofi_context2) <= 64, "fi_context2 fits the op's context bytes");

/* ---- loader ------------------------------------------------------------------- */

static struct {
  void* handle;
  int (*getinfo)(uint32_t, const char*, const char*, uint64_t, const struct ofi_info*, struct ofi_info**);
  void (*freeinfo)(struct ofi_info*);
  struct ofi_info* (*dupinfo)(const struct ofi_info*);
  int (*fabric)(struct ofi_fabric_attr*, struct ofi_fid_fabric**, void*);
  const char* (*strerror)(int);
  uint32_t (*version)(void);
  char error[256];
} lib;
static pthread_once_t libOnce = PTHREAD_ONCE_INIT;

static void libLoad(void) {
  const char* names[] = {"libfabric.so.1", "libfabric.so"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && lib.handle == NULL; i++)
    lib.handle = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (lib.handle == NULL) {
    snprintf(lib.error, sizeof(lib.error), "libfabric could not be loaded (dlopen libfabric.so.1: %s)", dlerror());
    return;
  }
  *(void**)&lib.getinfo = dlsym(lib.handle, "fi_getinfo");
  *(void**)&lib.freeinfo = dlsym(lib.handle, "fi_freeinfo");
  *(void**)&lib.dupinfo = dlsym(lib.handle, "fi_dupinfo");
  *(void**)&lib.fabric = dlsym(lib.handle, "fi_fabric");
  *(void**)&lib.strerror = dlsym(lib.handle, "fi_strerror");
  *(void**)&lib.version = dlsym(lib.handle, "fi_version");
  if (!lib.getinfo || !lib.freeinfo || !lib.dupinfo || !lib.fabric || !lib.strerror || !lib.version) {
    snprintf(lib.error, sizeof(lib.error), "libfabric.so.1 lacks fi_getinfo/fi_fabric/... (too old?)");
    dlclose(lib.handle);
    lib.handle = NULL;
    return;
  }
  if (lib.version() < OFI_VERSION(1, 9)) {
    snprintf(lib.error, sizeof(lib.error), "libfabric %u.%u is too old (1.9 or later needed)", OFI_MAJOR(lib.version()),
             OFI_MINOR(lib.version()));
    dlclose(lib.handle);
    lib.handle = NULL;
  }
}

int mscclppNetLibAvailable(void) {
  pthread_once(&libOnce, libLoad);
  return lib.handle != NULL;
}

const char* mscclppNetLibError(void) {
  pthread_once(&libOnce, libLoad);
  return lib.handle != NULL ? "" : lib.error;
}

/* The API version asked for: what the headers know, at most what the
 * library runs. */
static uint32_t apiVersion(void) {
  uint32_t built = OFI_ABI_VERSION, run = lib.version();
  return run < built ? run : built;
}

/* ---- the endpoint ------------------------------------------------------------------ */

struct netRegNode {
  const struct mscclppRegisteredMemory* m;
  uint64_t lo, hi;
  struct netRegNode *prev, *next;
};

struct mscclppNet {
  struct mscclppMemContext* mctx;
  int rank;
  double timeoutSec;
  const uint32_t* abortFlag;
  pthread_mutex_t lock;
  struct ofi_info* info;
  struct ofi_fid_fabric* fabric;
  struct ofi_fid_domain* domain;
  struct ofi_fid_ep* ep;
  struct ofi_fid_cq* cq;
  struct ofi_fid_av* av;
  uint8_t addr[MSCCLPP_NET_ADDR_MAX];
  size_t addrLen;
  uint64_t mrMode;
  uint64_t nextKey;
  int hmem;
  enum mscclppNetSignalMode signalMode;
  size_t injectSize, maxMsg, txDepth, iovLimit, cqDataSize;
  int twoTargets; /* mscclppNetHasTwoTargetSignals */
  size_t inflight;
  uint64_t cqReads; /* progress rounds (completion-queue reads) of mscclppNetProgress */
  struct mscclppNetOp* freeOps;
  struct mscclppNetConn* conns[MSCCLPP_NET_MAX_CONNS];
  uint32_t connEnd; /* ids below are in use or free */
  int nConns;
  struct mscclppNetConn* zombies; /* removed with operations in flight */
  struct netRegNode* regs;
  char desc[320];
};

pthread_mutex_t* mscclppNetLock(struct mscclppNet* net) { return &net->lock; }
const char* mscclppNetDescribe(const struct mscclppNet* net) { return net->desc; }
enum mscclppNetSignalMode mscclppNetSignalModeOf(const struct mscclppNet* net) { return net->signalMode; }
int mscclppNetHasHmem(const struct mscclppNet* net) { return net->hmem; }
int mscclppNetHasCqSignals(const struct mscclppNet* net) { return net->cqDataSize >= 4 && net->injectSize >= 8; }
int mscclppNetHasTwoTargetSignals(const struct mscclppNet* net) { return net->twoTargets; }

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
  struct ofi_info* h = lib.dupinfo(NULL);
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
  struct ofi_info* h = lib.dupinfo(NULL);
  struct ofi_info* all = NULL;
  buf[0] = '\0';
  if (h == NULL) return;
  if (prov != NULL && prov[0]) h->fabric_attr->prov_name = strdup(prov);
  if (lib.getinfo(apiVersion(), NULL, NULL, 0, h, &all) == 0) {
    size_t used = 0;
    for (struct ofi_info* i = all; i != NULL && used < len; i = i->next) {
      char item[96];
      snprintf(item, sizeof(item), "%s on %s (%s%s)", provName(i), domName(i),
               i->ep_attr->type == OFI_EP_RDM ? "RDM" : i->ep_attr->type == OFI_EP_MSG ? "MSG" : "DGRAM",
               (i->caps & OFI_RMA) ? ", RMA" : ", no RMA");
      if (strstr(buf, item) != NULL) continue;
      used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? "; " : "", item);
    }
    lib.freeinfo(all);
  }
  lib.freeinfo(h);
  if (buf[0] == '\0') snprintf(buf, len, "none");
}

/* Pick provider and domain, then learn what that pair offers (write order,
 * FI_HMEM). */
static mscclppResult_t pickInfo(const struct mscclppNetConfig* cfg, struct mscclppNet* net) {
  struct ofi_info* hints = baseHints(cfg->provider, NULL, 0, 0);
  if (hints == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_NET, "fi_allocinfo failed");
  struct ofi_info* all = NULL;
  int rc = lib.getinfo(apiVersion(), NULL, NULL, 0, hints, &all);
  lib.freeinfo(hints);
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
                       OFI_MAJOR(lib.version()), OFI_MINOR(lib.version()), cfg->provider[0] ? " '" : "",
                       cfg->provider, cfg->provider[0] ? "'" : "", rc ? lib.strerror(-rc) : "no match", found);
    if (all) lib.freeinfo(all);
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
    if (h != NULL && lib.getinfo(apiVersion(), NULL, NULL, 0, h, &r) == 0 && r != NULL) {
      chosen = lib.dupinfo(r);
      net->hmem = hmem;
      net->signalMode = ordered && r->ep_attr->max_order_waw_size >= MSCCLPP_NET_STAGE_SLOT_BYTES
                            ? MSCCLPP_NET_SIGNAL_ORDERED
                            : MSCCLPP_NET_SIGNAL_FENCED;
    }
    if (r) lib.freeinfo(r);
    if (h) lib.freeinfo(h);
  }
  lib.freeinfo(all);
  if (chosen == NULL)
    return mscclppErr(mscclppSystemError, MSCCLPP_LOG_NET, "network transport: provider %s on %s vanished", prov, dom);
  net->info = chosen;
  net->mrMode = chosen->domain_attr->mr_mode;
  if (chosen->domain_attr->mr_key_size > 8) {
    lib.freeinfo(chosen);
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

static void netClose(struct mscclppNet* net) {
  if (net->ep) ofi_close(&net->ep->fid);
  net->ep = NULL;
  while (net->zombies) { /* nothing can touch their buffers any more */
    struct mscclppNetConn* z = net->zombies;
    net->zombies = z->zombieNext;
    z->destroy(z);
  }
  if (net->av) ofi_close(&net->av->fid);
  if (net->cq) ofi_close(&net->cq->fid);
  if (net->domain) ofi_close(&net->domain->fid);
  if (net->fabric) ofi_close(&net->fabric->fid);
  if (net->info) lib.freeinfo(net->info);
  while (net->freeOps) {
    struct mscclppNetOp* o = net->freeOps;
    net->freeOps = o->next;
    free(o);
  }
  pthread_mutex_destroy(&net->lock);
  free(net);
}

#define NET_FI_CHECK(call, what)                                                                                      \
  do {                                                                                                             \
    int rc_ = (int)(call);                                                                                         \
    if (rc_ != 0) {                                                                                                \
      res = mscclppErr(mscclppSystemError, MSCCLPP_LOG_NET, "network transport (%s): %s failed: %s", net->desc, \
                       what, lib.strerror(rc_ < 0 ? -rc_ : rc_));                                                   \
      goto fail_close;                                                                                             \
    }                                                                                                              \
  } while (0)

static mscclppResult_t netOpen(const struct mscclppNetConfig* cfg, struct mscclppNet** out) {
  struct mscclppNet* net = calloc(1, sizeof(*net));
  if (net == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_NET, "cannot allocate the network state");
  pthread_mutex_init(&net->lock, NULL);
  net->rank = cfg->rank;
  net->timeoutSec = cfg->timeoutSec;
  net->abortFlag = cfg->abortFlag;
  net->nextKey = 1;
  mscclppResult_t res = pickInfo(cfg, net);
  if (res != mscclppSuccess) goto fail_close;
  NET_FI_CHECK(lib.fabric(net->info->fabric_attr, &net->fabric, NULL), "fi_fabric");
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
  netClose(net);
  return res;
}

/* ---- registration (the memory layer's hooks) --------------------------------------- */

static mscclppResult_t regLocked(struct mscclppNet* net, void* ptr, size_t size, int cudaDevice,
                                 struct mscclppMemNetReg* out) {
  struct iovec iov = {ptr, size};
  struct ofi_mr_attr attr;
  memset(&attr, 0, sizeof(attr));
  attr.mr_iov = &iov;
  attr.iov_count = 1;
  attr.access = OFI_REMOTE_WRITE | OFI_REMOTE_READ | OFI_WRITE | OFI_READ;
  attr.requested_key = net->nextKey++;
  attr.iface = cudaDevice >= 0 ? OFI_HMEM_CUDA : OFI_HMEM_SYSTEM;
  if (cudaDevice >= 0) attr.device.cuda = cudaDevice;
  struct ofi_fid_mr* mr = NULL;
  int rc = ofi_mr_regattr(net->domain, &attr, 0, &mr);
  if (rc != 0)
    return mscclppErr(mscclppSystemError, MSCCLPP_LOG_NET,
                      "network transport (%s) refused to register %zu bytes of %s memory at %p: %s", net->desc, size,
                      cudaDevice >= 0 ? "GPU" : "host", ptr, lib.strerror(-rc));
  if (net->mrMode & OFI_MR_ENDPOINT) {
    rc = ofi_mr_bind(mr, &net->ep->fid, 0);
    if (rc == 0) rc = ofi_mr_enable(mr);
    if (rc != 0) {
      ofi_close(&mr->fid);
      return mscclppErr(mscclppSystemError, MSCCLPP_LOG_NET,
                        "network transport (%s): binding the registration of %p to the endpoint failed: %s", net->desc,
                        ptr, lib.strerror(-rc));
    }
  }
  uint64_t key = ofi_mr_key(mr);
  if (key == OFI_KEY_NOTAVAIL) {
    ofi_close(&mr->fid);
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_NET,
                      "network transport (%s): the provider gives no memory key (raw keys are not handled)", net->desc);
  }
  out->key = key;
  out->addr = (net->mrMode & OFI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)ptr : 0;
  out->mr = mr;
  out->desc = ofi_mr_desc(mr);
  out->staged = 0;
  return mscclppSuccess;
}

mscclppResult_t mscclppNetRegisterHost(struct mscclppNet* net, void* ptr, size_t size, struct mscclppMemNetReg* reg) {
  pthread_mutex_lock(&net->lock);
  memset(reg, 0, sizeof(*reg));
  mscclppResult_t res = regLocked(net, ptr, size, -1, reg);
  pthread_mutex_unlock(&net->lock);
  return res;
}

void mscclppNetDeregister(struct mscclppNet* net, struct mscclppMemNetReg* reg) {
  pthread_mutex_lock(&net->lock);
  if (reg->mr != NULL) ofi_close(&((struct ofi_fid_mr*)reg->mr)->fid);
  struct netRegNode* n = reg->priv;
  if (n != NULL) {
    if (n->prev) n->prev->next = n->next;
    else net->regs = n->next;
    if (n->next) n->next->prev = n->prev;
    free(n);
  }
  memset(reg, 0, sizeof(*reg));
  pthread_mutex_unlock(&net->lock);
}

static mscclppResult_t hookReg(void* arg, const struct mscclppRegisteredMemory* m, struct mscclppMemNetReg* out) {
  struct mscclppNet* net = arg;
  int device = m->kind == mscclppMemKindDevice || m->kind == mscclppMemKindDeviceCuMem;
  struct netRegNode* n = calloc(1, sizeof(*n));
  if (n == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_NET, "cannot allocate a registration node");
  n->m = m;
  n->lo = (uint64_t)(uintptr_t)m->ptr;
  n->hi = n->lo + m->size;
  mscclppResult_t res = mscclppSuccess;
  pthread_mutex_lock(&net->lock);
  if ((device && !net->hmem) || (!device && __atomic_load_n(&forceStaging, __ATOMIC_ACQUIRE))) {
    memset(out, 0, sizeof(*out));
    out->staged = 1; /* peers write through the connection's staging ring */
  } else {
    res = regLocked(net, m->ptr, m->size, device ? (m->record.device >= 0 ? m->record.device : 0) : -1, out);
  }
  if (res == mscclppSuccess) {
    n->next = net->regs;
    if (net->regs) net->regs->prev = n;
    net->regs = n;
    out->priv = n;
  } else {
    free(n);
  }
  pthread_mutex_unlock(&net->lock);
  return res;
}

static void hookDereg(void* arg, struct mscclppMemNetReg* reg) { mscclppNetDeregister(arg, reg); }

static void hookDestroy(void* arg) { netClose(arg); }

static const struct mscclppMemNetOps netMemOps = {.reg = hookReg, .dereg = hookDereg, .destroy = hookDestroy};

const struct mscclppRegisteredMemory* mscclppNetFindLocalLocked(struct mscclppNet* net, uint64_t addr, uint64_t len) {
  for (struct netRegNode* n = net->regs; n != NULL; n = n->next)
    if (addr >= n->lo && addr <= n->hi && len <= n->hi - addr) return n->m;
  return NULL;
}

mscclppResult_t mscclppNetOf(struct mscclppMemContext* mctx, const struct mscclppNetConfig* cfg,
                             struct mscclppNet** out) {
  void* cur = mscclppMemContextNet(mctx);
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
  mscclppMemContextNetAttach(mctx, &netMemOps, net, &attached);
  if (attached != net) netClose(net);
  *out = attached;
  return mscclppSuccess;
}

mscclppResult_t mscclppNetProbe(const struct mscclppNetConfig* cfg, char* text, size_t len) {
  if (!mscclppNetLibAvailable()) {
    snprintf(text, len, "%s", mscclppNetLibError());
    return mscclppInvalidUsage;
  }
  struct mscclppNet* net = calloc(1, sizeof(*net));
  if (net == NULL) {
    snprintf(text, len, "out of memory");
    return mscclppSystemError;
  }
  mscclppResult_t res = pickInfo(cfg, net);
  snprintf(text, len, "%s", res == mscclppSuccess ? net->desc : mscclppGetLastError());
  if (net->info) lib.freeinfo(net->info);
  free(net);
  return res;
}

/* ---- connections ---------------------------------------------------------------- */

mscclppResult_t mscclppNetConnAdd(struct mscclppNet* net, struct mscclppNetConn* nc) {
  pthread_mutex_lock(&net->lock);
  uint32_t id = 0;
  while (id < net->connEnd && net->conns[id] != NULL) id++;
  if (id == MSCCLPP_NET_MAX_CONNS) {
    pthread_mutex_unlock(&net->lock);
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_NET, "a rank has at most %d network connections",
                      MSCCLPP_NET_MAX_CONNS);
  }
  net->conns[id] = nc;
  if (id == net->connEnd) net->connEnd++;
  net->nConns++;
  nc->id = id;
  nc->net = net;
  pthread_mutex_unlock(&net->lock);
  return mscclppSuccess;
}

void mscclppNetConnPublish(struct mscclppNet* net, struct mscclppNetConn* nc) {
  pthread_mutex_lock(&net->lock);
  nc->ready = 1;
  pthread_mutex_unlock(&net->lock);
}

void mscclppNetConnRemove(struct mscclppNet* net, struct mscclppNetConn* nc) {
  pthread_mutex_lock(&net->lock);
  /* ops still queued are dropped (close waited, or gave up) */
  while (nc->qHead) {
    struct mscclppNetOp* o = nc->qHead;
    nc->qHead = o->next;
    o->next = net->freeOps;
    net->freeOps = o;
  }
  nc->qTail = NULL;
  int inFlight = nc->completed != nc->submitted || nc->creditsInFlight != 0;
  nc->conn = NULL; /* completions still to come ignore it */
  net->conns[nc->id] = NULL;
  while (net->connEnd > 0 && net->conns[net->connEnd - 1] == NULL) net->connEnd--;
  net->nConns--;
  if (inFlight) {
    nc->zombieNext = net->zombies;
    net->zombies = nc;
  }
  pthread_mutex_unlock(&net->lock);
  if (!inFlight) nc->destroy(nc);
}

void mscclppNetAddress(const struct mscclppNet* net, uint8_t* addr, size_t* len) {
  memcpy(addr, net->addr, net->addrLen);
  *len = net->addrLen;
}

mscclppResult_t mscclppNetInsertPeer(struct mscclppNet* net, const uint8_t* addr, size_t len, uint64_t* fiAddr) {
  ofi_addr_t a = OFI_ADDR_NOTAVAIL;
  pthread_mutex_lock(&net->lock);
  int rc = ofi_av_insert(net->av, addr, 1, &a, 0, NULL);
  pthread_mutex_unlock(&net->lock);
  if (rc != 1)
    return mscclppErr(mscclppRemoteError, MSCCLPP_LOG_NET,
                      "network transport (%s): the peer's address (%zu bytes) is not usable here (fi_av_insert: %s)",
                      net->desc, len, rc < 0 ? lib.strerror(-rc) : "not inserted");
  *fiAddr = (uint64_t)a;
  return mscclppSuccess;
}

/* ---- the engine ------------------------------------------------------------------ */

struct mscclppNetOp* mscclppNetOpGet(struct mscclppNet* net) {
  pthread_mutex_lock(&net->lock);
  struct mscclppNetOp* o = mscclppNetOpGetLocked(net);
  pthread_mutex_unlock(&net->lock);
  return o;
}

struct mscclppNetOp* mscclppNetOpGetLocked(struct mscclppNet* net) {
  struct mscclppNetOp* o = net->freeOps;
  if (o) net->freeOps = o->next;
  if (o == NULL) o = malloc(sizeof(*o));
  if (o == NULL) {
    mscclppErr(mscclppSystemError, MSCCLPP_LOG_NET, "cannot allocate a network operation");
    return NULL;
  }
  memset(o, 0, offsetof(struct mscclppNetOp, hdr));
  return o;
}

static void opFreeLocked(struct mscclppNet* net, struct mscclppNetOp* o) {
  o->next = net->freeOps;
  net->freeOps = o;
}

static const char* opName(enum mscclppNetOpKind k) {
  switch (k) {
    case MSCCLPP_NET_OP_WRITE: return "write";
    case MSCCLPP_NET_OP_SIGNAL: return "signal";
    case MSCCLPP_NET_OP_STAGE: return "staged write";
    case MSCCLPP_NET_OP_CREDIT: return "staging credit";
    case MSCCLPP_NET_OP_INLINE: return "inline write";
  }
  return "operation";
}

void mscclppNetConnFailLocked(struct mscclppNetConn* nc, const char* fmt, ...) {
  if (nc->error != mscclppSuccess) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(nc->errText, sizeof(nc->errText), fmt, ap);
  va_end(ap);
  nc->error = mscclppRemoteError;
}

/* Posting: 0, -FI_EAGAIN, or another negative error. */
static int postLocked(struct mscclppNet* net, struct mscclppNetOp* o) {
  struct mscclppNetConn* nc = o->nc;
  struct iovec iov[2];
  void* desc[2] = {NULL, NULL};
  struct ofi_rma_iov rma[2]; /* [1]: an inline put's signal (sigTarget) */
  size_t nRma = 1;
  struct ofi_msg_rma msg;
  memset(&msg, 0, sizeof(msg));
  uint64_t flags = OFI_COMPLETION;
  size_t n = 1;
  switch (o->kind) {
    case MSCCLPP_NET_OP_WRITE:
      iov[0].iov_base = (void*)o->buf;
      iov[0].iov_len = o->len;
      desc[0] = o->desc;
      rma[0].addr = o->raddr;
      rma[0].len = o->len;
      if (net->signalMode == MSCCLPP_NET_SIGNAL_FENCED) flags |= OFI_DELIVERY_COMPLETE;
      break;
    case MSCCLPP_NET_OP_SIGNAL:
    case MSCCLPP_NET_OP_CREDIT:
      iov[0].iov_base = &o->value;
      iov[0].iov_len = sizeof(uint64_t);
      rma[0].addr = o->raddr;
      rma[0].len = sizeof(uint64_t);
      flags |= OFI_INJECT;
      break;
    case MSCCLPP_NET_OP_INLINE:
      /* the bytes live in the op; a signal rides along as remote CQ data */
      iov[0].iov_base = &o->value;
      iov[0].iov_len = o->len;
      rma[0].addr = o->raddr;
      rma[0].len = o->len;
      flags |= OFI_INJECT;
      if (o->cqData != 0) {
        msg.data = o->cqData;
        flags |= OFI_REMOTE_CQ_DATA;
      }
      if (o->sigTarget) { /* then the semaphore's new value, placed after the bytes */
        iov[1].iov_base = &o->sigValue;
        iov[1].iov_len = sizeof(uint64_t);
        n = 2;
        rma[1].addr = o->sigRaddr;
        rma[1].len = sizeof(uint64_t);
        rma[1].key = o->sigRkey;
        nRma = 2;
      }
      if (net->signalMode == MSCCLPP_NET_SIGNAL_FENCED) flags |= OFI_DELIVERY_COMPLETE;
      break;
    case MSCCLPP_NET_OP_STAGE: {
      uint32_t slot = (uint32_t)(nc->sentSlots % MSCCLPP_NET_STAGE_SLOTS);
      uint8_t* h = nc->hdrs + (size_t)slot * MSCCLPP_NET_STAGE_HEADER;
      memcpy(h, o->hdr, MSCCLPP_NET_STAGE_HEADER);
      memcpy(h + 8, &nc->sentSlots, sizeof(uint64_t)); /* seq */
      iov[0].iov_base = h;
      iov[0].iov_len = MSCCLPP_NET_STAGE_HEADER;
      desc[0] = nc->hdrReg.desc;
      if (o->len > 0) {
        const void* src = o->buf;
        void* srcDesc = o->desc;
        if (o->bounceFromDevice) {
          uint8_t* b = nc->bounce + (size_t)slot * MSCCLPP_NET_STAGE_CHUNK;
          /* device source, provider without FI_HMEM: through pinned host memory */
          /* a failure here is reported as EIO by the caller: say which */
          if (mscclppGpuIpcMemcpyAsync(nc->sendStream, b, src, o->len) != mscclppSuccess) {
            MSCCLPP_WARN(MSCCLPP_LOG_NET, "staging %zu bytes from device memory to the bounce slot failed: %s", o->len,
                         mscclppGetLastError());
            return -OFI_EIO;
          }
          mscclppDeadline d = mscclppDeadlineIn(net->timeoutSec);
          for (int done = 0; !done;) {
            if (mscclppGpuIpcStreamQuery(nc->sendStream, &done) != mscclppSuccess) {
              MSCCLPP_WARN(MSCCLPP_LOG_NET, "waiting for the copy to the bounce slot failed: %s", mscclppGetLastError());
              return -OFI_EIO;
            }
            if (mscclppDeadlinePassed(d)) {
              MSCCLPP_WARN(MSCCLPP_LOG_NET, "the copy of %zu bytes to the bounce slot did not complete in %.3g s",
                           o->len, net->timeoutSec);
              return -OFI_EIO;
            }
          }
          src = b;
          srcDesc = nc->bounceReg.desc;
        }
        iov[1].iov_base = (void*)src;
        iov[1].iov_len = o->len;
        desc[1] = srcDesc;
        n = 2;
      }
      rma[0].addr = nc->peerRingAddr + (uint64_t)slot * MSCCLPP_NET_STAGE_SLOT_BYTES;
      rma[0].len = MSCCLPP_NET_STAGE_HEADER + o->len;
      o->rkey = nc->peerRingKey;
      msg.data = ((uint64_t)nc->peerId << 16) | slot;
      flags |= OFI_REMOTE_CQ_DATA;
      if (net->signalMode == MSCCLPP_NET_SIGNAL_FENCED) flags |= OFI_DELIVERY_COMPLETE;
      break;
    }
  }
  rma[0].key = o->rkey;
  msg.msg_iov = iov;
  msg.desc = desc;
  msg.iov_count = n;
  msg.addr = (ofi_addr_t)nc->fiAddr;
  msg.rma_iov = rma;
  msg.rma_iov_count = nRma;
  msg.context = o->fiContext;
  ssize_t rc = ofi_writemsg(net->ep, &msg, flags);
  if (rc == 0 && o->kind == MSCCLPP_NET_OP_STAGE) nc->sentSlots++;
  return (int)rc;
}

static int readyLocked(struct mscclppNet* net, struct mscclppNetOp* o) {
  struct mscclppNetConn* nc = o->nc;
  if (net->inflight >= net->txDepth) return 0;
  if (o->fence && nc->completed < o->seq) return 0;
  if (o->needsCredit && nc->sentSlots - nc->ctrl->credits >= MSCCLPP_NET_STAGE_SLOTS) return 0;
  return 1;
}

static void readCqLocked(struct mscclppNet* net);

/* Staging credits bypass the queue: the queue may hold operations that wait
 * for the peer's credits, which wait for ours. Values only grow, and
 * posting keeps their order. */
static void postCreditLocked(struct mscclppNet* net, struct mscclppNetConn* nc) {
  if (nc->consumed <= nc->creditSent || nc->error != mscclppSuccess || net->inflight >= net->txDepth) return;
  struct mscclppNetOp* o = mscclppNetOpGetLocked(net);
  if (o == NULL) return; /* retried on the next pass */
  o->nc = nc;
  o->kind = MSCCLPP_NET_OP_CREDIT;
  o->raddr = nc->peerCtrlAddr + offsetof(struct mscclppNetCtrl, credits);
  o->rkey = nc->peerCtrlKey;
  o->value = nc->consumed;
  int rc = postLocked(net, o);
  if (rc != 0) {
    opFreeLocked(net, o);
    if (rc != -OFI_EAGAIN)
      mscclppNetConnFailLocked(nc, "staging credit from rank %d to rank %d over %s could not be posted: %s", nc->rank,
                               nc->peerRank, net->desc, lib.strerror(-rc));
    return;
  }
  nc->creditsInFlight++; /* not counted in submitted: fences count data operations */
  nc->creditSent = o->value;
  net->inflight++;
}

void mscclppNetKickLocked(struct mscclppNet* net, struct mscclppNetConn* nc) {
  int retried = 0;
  postCreditLocked(net, nc);
  while (nc->qHead != NULL) {
    struct mscclppNetOp* o = nc->qHead;
    if (nc->error != mscclppSuccess) {
      /* the connection failed: what is queued will never be posted */
      nc->qHead = o->next;
      if (nc->qHead == NULL) nc->qTail = NULL;
      nc->queued--;
      nc->completed++;
      opFreeLocked(net, o);
      continue;
    }
    if (!readyLocked(net, o)) break;
    int rc = postLocked(net, o);
    if (rc == -OFI_EAGAIN) {
      if (retried++) break;
      readCqLocked(net); /* completions free provider resources */
      continue;
    }
    nc->qHead = o->next;
    if (nc->qHead == NULL) nc->qTail = NULL;
    nc->queued--;
    if (rc != 0) {
      mscclppNetConnFailLocked(nc, "%s of %zu bytes from rank %d to rank %d over %s could not be posted: %s",
                               opName(o->kind), o->len, nc->rank, nc->peerRank, net->desc, lib.strerror(-rc));
      nc->completed++;
      opFreeLocked(net, o);
      continue;
    }
    net->inflight++;
  }
}

static mscclppResult_t reportLocked(struct mscclppNetConn* nc);

mscclppResult_t mscclppNetSubmitLocked(struct mscclppNet* net, struct mscclppNetOp* o) {
  struct mscclppNetConn* nc = o->nc;
  o->seq = nc->submitted++;
  o->next = NULL;
  if (nc->qTail) nc->qTail->next = o;
  else nc->qHead = o;
  nc->qTail = o;
  nc->queued++;
  mscclppNetKickLocked(net, nc);
  return reportLocked(nc);
}

mscclppResult_t mscclppNetSubmit(struct mscclppNet* net, struct mscclppNetOp* o) {
  pthread_mutex_lock(&net->lock);
  mscclppResult_t err = mscclppNetSubmitLocked(net, o);
  pthread_mutex_unlock(&net->lock);
  return err;
}

static void opDoneLocked(struct mscclppNet* net, struct mscclppNetOp* o) {
  struct mscclppNetConn* nc = o->nc;
  net->inflight--;
  if (nc != NULL && nc->conn != NULL) {
    if (o->kind == MSCCLPP_NET_OP_CREDIT) nc->creditsInFlight--;
    else nc->completed++;
  }
  opFreeLocked(net, o);
}

static void readCqLocked(struct mscclppNet* net) {
  for (int round = 0; round < 64; round++) {
    struct ofi_cq_data_entry e[16];
    ssize_t n = ofi_cq_read(net->cq, e, 16);
    if (n == -OFI_EAGAIN) return;
    if (n == -OFI_EAVAIL) {
      struct ofi_cq_err_entry err;
      memset(&err, 0, sizeof(err));
      if (ofi_cq_readerr(net->cq, &err, 0) != 1) return;
      char prov[160] = "";
      ofi_cq_strerror(net->cq, err.prov_errno, err.err_data, prov, sizeof(prov));
      struct mscclppNetOp* o = err.op_context;
      if (o != NULL && !(err.flags & OFI_REMOTE_CQ_DATA)) {
        struct mscclppNetConn* nc = o->nc;
        if (nc != NULL && nc->conn != NULL)
          mscclppNetConnFailLocked(nc,
                                   "%s of %zu bytes from rank %d to rank %d over %s failed: %s (provider: %s); the "
                                   "peer is unreachable or gone",
                                   opName(o->kind), o->len, nc->rank, nc->peerRank, net->desc,
                                   lib.strerror(err.err), prov);
        opDoneLocked(net, o);
      } else {
        MSCCLPP_WARN(MSCCLPP_LOG_NET, "rank %d: network completion error without an operation: %s (provider: %s)",
                     net->rank, lib.strerror(err.err), prov);
      }
      continue;
    }
    if (n < 0) {
      MSCCLPP_WARN(MSCCLPP_LOG_NET, "rank %d: fi_cq_read failed: %s", net->rank, lib.strerror((int)-n));
      return;
    }
    for (ssize_t i = 0; i < n; i++) {
      if (e[i].flags & OFI_REMOTE_CQ_DATA) {
        /* layout in net_ofi.h (MSCCLPP_NET_CQ_SIGNAL); the peer's bytes: checked */
        uint32_t d = (uint32_t)e[i].data, id = (d >> 16) & 0x7fffu;
        struct mscclppNetConn* nc = id < net->connEnd ? net->conns[id] : NULL;
        if (nc == NULL || !nc->ready) { /* a peer stages or signals only after both greetings (ready before) */
          MSCCLPP_WARN(MSCCLPP_LOG_NET, "rank %d: %s for unknown connection %u dropped", net->rank,
                       (d & MSCCLPP_NET_CQ_SIGNAL) ? "a signal" : "staged data", id);
          continue;
        }
        if (d & MSCCLPP_NET_CQ_SIGNAL)
          mscclppNetSignalReceivedLocked(nc, (d >> 8) & 0xffu, d & 0xffu);
        else
          mscclppNetStageReceivedLocked(nc, d & 0xffffu);
      } else if (e[i].op_context != NULL) {
        opDoneLocked(net, e[i].op_context);
      }
    }
    if (n < 16) return;
  }
}

static mscclppResult_t reportLocked(struct mscclppNetConn* nc) {
  if (nc->error == mscclppSuccess) return mscclppSuccess;
  if (!nc->errReported) {
    nc->errReported = 1;
    return mscclppErr(nc->error, MSCCLPP_LOG_NET, "%s", nc->errText);
  }
  return nc->error;
}

static void progressLocked(struct mscclppNet* net) {
  readCqLocked(net);
  for (uint32_t i = 0; i < net->connEnd; i++) {
    struct mscclppNetConn* c = net->conns[i];
    if (c == NULL || !c->ready) continue;
    if (c->ring != NULL) mscclppNetStageProgressLocked(c);
    if (c->qHead != NULL) mscclppNetKickLocked(net, c);
  }
}

mscclppResult_t mscclppNetProgress(struct mscclppNet* net, struct mscclppNetConn* nc, int* idle) {
  pthread_mutex_lock(&net->lock);
  /* One completion-queue read per round over the endpoint's connections
   * (the proxy progresses each of its connections on every pass): read
   * unless the queue was read since nc's last call, by a call for another
   * connection. So between two calls for one connection the queue is
   * always read at least once, and a pass over K connections reads it once,
   * not K times. */
  if (nc == NULL || nc->progressSeen == net->cqReads) {
    progressLocked(net);
    net->cqReads++;
  }
  mscclppResult_t res = mscclppSuccess;
  if (nc != NULL) {
    nc->progressSeen = net->cqReads;
    if (idle) *idle = nc->completed == nc->submitted && nc->creditsInFlight == 0;
    res = reportLocked(nc);
  }
  pthread_mutex_unlock(&net->lock);
  return res;
}

static mscclppResult_t waitCheck(struct mscclppNet* net, struct mscclppNetConn* nc, mscclppDeadline d,
                                 const char* what, uint64_t* spins) {
  if (net->abortFlag != NULL && __atomic_load_n(net->abortFlag, __ATOMIC_ACQUIRE))
    return mscclppErr(mscclppAborted, MSCCLPP_LOG_NET, "%s (rank %d to rank %d): aborted", what, nc->rank,
                      nc->peerRank);
  if (mscclppDeadlinePassed(d))
    return mscclppErr(mscclppTimeout, MSCCLPP_LOG_NET,
                      "%s (rank %d to rank %d over %s): not done after %.3g s (%llu of %llu operations complete): the "
                      "peer is unreachable, gone, or not making progress",
                      what, nc->rank, nc->peerRank, net->desc, net->timeoutSec, (unsigned long long)nc->completed,
                      (unsigned long long)nc->submitted);
  if ((++*spins & 63) == 0) sched_yield(); /* the peer may need this core (2-core CI) */
  return mscclppSuccess;
}

mscclppResult_t mscclppNetWaitIdle(struct mscclppNet* net, struct mscclppNetConn* nc, const char* what) {
  mscclppDeadline d = mscclppDeadlineIn(net->timeoutSec);
  uint64_t spins = 0;
  for (;;) {
    int idle = 0;
    MSCCLPP_RETURN_ON_ERROR(mscclppNetProgress(net, nc, &idle));
    if (idle) return mscclppSuccess;
    MSCCLPP_RETURN_ON_ERROR(waitCheck(net, nc, d, what, &spins));
  }
}

mscclppResult_t mscclppNetWaitWord(struct mscclppNet* net, struct mscclppNetConn* nc, volatile uint64_t* word,
                                   uint64_t value, const char* what) {
  mscclppDeadline d = mscclppDeadlineIn(net->timeoutSec);
  uint64_t spins = 0;
  for (;;) {
    MSCCLPP_RETURN_ON_ERROR(mscclppNetProgress(net, nc, NULL));
    if (__atomic_load_n(word, __ATOMIC_ACQUIRE) == value) return mscclppSuccess;
    MSCCLPP_RETURN_ON_ERROR(waitCheck(net, nc, d, what, &spins));
  }
}

