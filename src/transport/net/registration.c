/* SPDX-License-Identifier: MIT */
/* Memory registration with the provider: the memory layer's hook for
 * registrations with transport Net, internal host buffers (control blocks,
 * rings), and the list that tells which addresses this process registered
 * (staged data and signals from a peer must land inside one). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "gpu/gpu_ipc.h"
#include "transport/net/net_internal.h"
#include "transport/net/ofi_loader.h"

struct mscclppNetRegNode {
  const struct mscclppRegisteredMemory* m;
  uint64_t lo, hi;
  struct mscclppNetRegNode *prev, *next;
};


#ifdef MSCCLPP_TEST_HOOKS
static int forceStaging; /* tests only (__atomic) */
void mscclppNetTestForceStaging(int on) { __atomic_store_n(&forceStaging, on, __ATOMIC_RELEASE); }
int mscclppNetTestStagingOn(void) { return __atomic_load_n(&forceStaging, __ATOMIC_ACQUIRE); }
#endif

static mscclppResult_t regLocked(struct mscclppNet* net, void* ptr, size_t size, int cudaDevice,
                                 struct mscclppNetReg* out) {
  const struct mscclppOfiLib* lib = mscclppOfi();
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
                      cudaDevice >= 0 ? "GPU" : "host", ptr, lib->strerror(-rc));
  if (net->mrMode & OFI_MR_ENDPOINT) {
    rc = ofi_mr_bind(mr, &net->ep->fid, 0);
    if (rc == 0) rc = ofi_mr_enable(mr);
    if (rc != 0) {
      ofi_close(&mr->fid);
      return mscclppErr(mscclppSystemError, MSCCLPP_LOG_NET,
                        "network transport (%s): binding the registration of %p to the endpoint failed: %s", net->desc,
                        ptr, lib->strerror(-rc));
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

mscclppResult_t mscclppNetRegisterHost(struct mscclppNet* net, void* ptr, size_t size, struct mscclppNetReg* reg) {
  pthread_mutex_lock(&net->lock);
  memset(reg, 0, sizeof(*reg));
  mscclppResult_t res = regLocked(net, ptr, size, -1, reg);
  pthread_mutex_unlock(&net->lock);
  return res;
}

void mscclppNetDeregister(struct mscclppNet* net, struct mscclppNetReg* reg) {
  pthread_mutex_lock(&net->lock);
  if (reg->mr != NULL) ofi_close(&((struct ofi_fid_mr*)reg->mr)->fid);
  struct mscclppNetRegNode* n = reg->priv;
  if (n != NULL) {
    if (n->prev) n->prev->next = n->next;
    else net->regs = n->next;
    if (n->next) n->next->prev = n->prev;
    free(n);
  }
  memset(reg, 0, sizeof(*reg));
  pthread_mutex_unlock(&net->lock);
}

/* The memory layer's hook: *handle is a struct mscclppNetReg of the region,
 * and the record gets its NET section (key, address, staged). */
static mscclppResult_t hookReg(void* arg, const struct mscclppRegisteredMemory* m, struct mscclppMemRecord* rec,
                               void** handle) {
  struct mscclppNet* net = arg;
  int device = m->kind == mscclppMemKindDevice || m->kind == mscclppMemKindDeviceCuMem;
  struct mscclppNetRegNode* n = calloc(1, sizeof(*n));
  struct mscclppNetReg* out = calloc(1, sizeof(*out));
  if (n == NULL || out == NULL) {
    free(n);
    free(out);
    return mscclppErr(mscclppSystemError, MSCCLPP_LOG_NET, "cannot allocate a registration node");
  }
  n->m = m;
  n->lo = (uint64_t)(uintptr_t)m->ptr;
  n->hi = n->lo + m->size;
  mscclppResult_t res = mscclppSuccess;
  pthread_mutex_lock(&net->lock);
  if ((device && !net->hmem) || (!device && mscclppNetTestStagingOn())) {
    out->staged = 1; /* peers write through the connection's staging ring */
  } else {
    res = regLocked(net, m->ptr, m->size, device ? (m->record.device >= 0 ? m->record.device : 0) : -1, out);
  }
  if (res == mscclppSuccess) {
    n->next = net->regs;
    if (net->regs) net->regs->prev = n;
    net->regs = n;
    out->priv = n;
  }
  pthread_mutex_unlock(&net->lock);
  if (res != mscclppSuccess) {
    free(n);
    free(out);
    return res;
  }
  rec->hasNet = 1;
  rec->net.key = out->key;
  rec->net.addr = out->addr;
  rec->net.flags = out->staged ? MSCCLPP_MEM_NET_STAGED : 0;
  *handle = out;
  return mscclppSuccess;
}

static void hookDereg(void* arg, void* handle) {
  mscclppNetDeregister(arg, handle);
  free(handle);
}

static void hookDestroy(void* arg) { mscclppNetClose(arg); }

const struct mscclppMemTransportHook mscclppNetMemHook = {.reg = hookReg, .dereg = hookDereg, .destroy = hookDestroy};

const struct mscclppRegisteredMemory* mscclppNetFindLocalLocked(struct mscclppNet* net, uint64_t addr, uint64_t len) {
  for (struct mscclppNetRegNode* n = net->regs; n != NULL; n = n->next)
    if (addr >= n->lo && addr <= n->hi && len <= n->hi - addr) return n->m;
  return NULL;
}


void* mscclppNetPageAlloc(size_t bytes) {
  void* p = NULL;
  size_t n = (bytes + 4095) & ~(size_t)4095;
  if (posix_memalign(&p, 4096, n) != 0) return NULL;
  memset(p, 0, n);
  return p;
}

mscclppResult_t mscclppNetHostBuffer(struct mscclppNet* net, int gpu, size_t bytes, uint8_t** ptr,
                                     struct mscclppNetReg* reg, int* pinned) {
  uint8_t* p = mscclppNetPageAlloc(bytes);
  if (p == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_NET, "cannot allocate %zu bytes for staging", bytes);
  *ptr = p;
  if (gpu) {
    void* dev = NULL;
    MSCCLPP_RETURN_ON_ERROR(mscclppGpuIpcHostRegister(p, (bytes + 4095) & ~(size_t)4095, &dev));
    *pinned = 1;
  }
  return mscclppNetRegisterHost(net, p, bytes, reg);
}
