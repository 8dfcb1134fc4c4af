/* SPDX-License-Identifier: MIT */
/*
 * The part of libfabric's ABI the network transport uses, written here so
 * that building needs no libfabric headers (the library itself is opened with
 * dlopen at run time: ofi_loader.c). NCCL does the same with the verbs ABI.
 *
 * Every struct, enum and constant below has the layout and value of
 * libfabric 1.17's (rdma/fabric.h, fi_domain.h, fi_endpoint.h, fi_eq.h,
 * fi_cm.h, fi_rma.h, fi_errno.h), under an ofi_/OFI_ prefix so that a test
 * can include both and compare them: tests/net/test_ofi_abi.c asserts every
 * offset, size and value wherever the real headers exist. Structs that
 * libfabric allocates (fi_info and its attributes) are given whole; ops
 * tables only up to the last slot used, with unused slots as plain pointers.
 * The API version asked for (OFI_ABI_VERSION) is this layout's, so a newer
 * libfabric reads and writes these structs as 1.17 laid them out.
 *
 * The fi_* inline wrappers become the ofi_* functions at the end, each the
 * same one call through the object's ops table.
 */
#ifndef MSCCLPP_SRC_TRANSPORT_NET_OFI_ABI_H_
#define MSCCLPP_SRC_TRANSPORT_NET_OFI_ABI_H_

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#define OFI_VERSION(major, minor) (((uint32_t)(major) << 16) | (uint32_t)(minor))
#define OFI_MAJOR(version) ((version) >> 16)
#define OFI_MINOR(version) ((version)&0xFFFF)
/* The layout below. */
#define OFI_ABI_VERSION OFI_VERSION(1, 17)

typedef uint64_t ofi_addr_t;
#define OFI_ADDR_NOTAVAIL ((uint64_t)-1)
#define OFI_KEY_NOTAVAIL ((uint64_t)-1)

/* capabilities and operation flags (fabric.h) */
#define OFI_RMA (1ULL << 2)
#define OFI_READ (1ULL << 8)
#define OFI_WRITE (1ULL << 9)
#define OFI_RECV (1ULL << 10)
#define OFI_SEND (1ULL << 11)
#define OFI_TRANSMIT OFI_SEND
#define OFI_REMOTE_READ (1ULL << 12)
#define OFI_REMOTE_WRITE (1ULL << 13)
#define OFI_REMOTE_CQ_DATA (1ULL << 17)
#define OFI_COMPLETION (1ULL << 24)
#define OFI_INJECT (1ULL << 25)
#define OFI_DELIVERY_COMPLETE (1ULL << 28)
#define OFI_HMEM (1ULL << 47)
/* mode bits */
#define OFI_CONTEXT2 (1ULL << 52)
#define OFI_CONTEXT (1ULL << 59)
/* memory registration modes */
#define OFI_MR_LOCAL (1 << 2)
#define OFI_MR_VIRT_ADDR (1 << 4)
#define OFI_MR_ALLOCATED (1 << 5)
#define OFI_MR_PROV_KEY (1 << 6)
#define OFI_MR_ENDPOINT (1 << 9)
#define OFI_MR_HMEM (1 << 10)
/* message order */
#define OFI_ORDER_WAW (1ULL << 4)
#define OFI_ORDER_RMA_WAW (1ULL << 35)

/* errors (fi_errno.h): the system's errno values, and libfabric's own */
#define OFI_EIO EIO
#define OFI_EAGAIN EAGAIN
#define OFI_EAVAIL 259

enum ofi_av_type { OFI_AV_UNSPEC, OFI_AV_MAP, OFI_AV_TABLE };
enum ofi_progress { OFI_PROGRESS_UNSPEC, OFI_PROGRESS_AUTO, OFI_PROGRESS_MANUAL };
enum ofi_threading {
  OFI_THREAD_UNSPEC,
  OFI_THREAD_SAFE,
  OFI_THREAD_FID,
  OFI_THREAD_DOMAIN,
  OFI_THREAD_COMPLETION,
  OFI_THREAD_ENDPOINT
};
enum ofi_resource_mgmt { OFI_RM_UNSPEC, OFI_RM_DISABLED, OFI_RM_ENABLED };
enum ofi_ep_type { OFI_EP_UNSPEC, OFI_EP_MSG, OFI_EP_DGRAM, OFI_EP_RDM, OFI_EP_SOCK_STREAM, OFI_EP_SOCK_DGRAM };
enum ofi_hmem_iface { OFI_HMEM_SYSTEM = 0, OFI_HMEM_CUDA };
enum ofi_wait_obj { OFI_WAIT_NONE };
enum ofi_cq_format { OFI_CQ_FORMAT_UNSPEC, OFI_CQ_FORMAT_CONTEXT, OFI_CQ_FORMAT_MSG, OFI_CQ_FORMAT_DATA };
enum ofi_cq_wait_cond { OFI_CQ_COND_NONE };
/* fi_control commands: FI_ENABLE is the seventh */
enum { OFI_CONTROL_ENABLE = 6 };

struct ofi_fid_fabric;
struct ofi_fid_domain;
struct ofi_fid_ep;
struct ofi_fid_cq;
struct ofi_fid_av;
struct ofi_fid_mr;

/* ---- objects ---- */

struct ofi_fid;
struct ofi_ops {
  size_t size;
  int (*close)(struct ofi_fid* fid);
  int (*bind)(struct ofi_fid* fid, struct ofi_fid* bfid, uint64_t flags);
  int (*control)(struct ofi_fid* fid, int command, void* arg);
};

struct ofi_fid {
  size_t fclass;
  void* context;
  struct ofi_ops* ops;
};

struct ofi_context2 {
  void* internal[8];
};

/* ---- fi_info (allocated by libfabric: whole) ---- */

struct ofi_tx_attr {
  uint64_t caps;
  uint64_t mode;
  uint64_t op_flags;
  uint64_t msg_order;
  uint64_t comp_order;
  size_t inject_size;
  size_t size;
  size_t iov_limit;
  size_t rma_iov_limit;
  uint32_t tclass;
};

struct ofi_rx_attr {
  uint64_t caps;
  uint64_t mode;
  uint64_t op_flags;
  uint64_t msg_order;
  uint64_t comp_order;
  size_t total_buffered_recv;
  size_t size;
  size_t iov_limit;
};

struct ofi_ep_attr {
  enum ofi_ep_type type;
  uint32_t protocol;
  uint32_t protocol_version;
  size_t max_msg_size;
  size_t msg_prefix_size;
  size_t max_order_raw_size;
  size_t max_order_war_size;
  size_t max_order_waw_size;
  uint64_t mem_tag_format;
  size_t tx_ctx_cnt;
  size_t rx_ctx_cnt;
  size_t auth_key_size;
  uint8_t* auth_key;
};

struct ofi_domain_attr {
  struct ofi_fid_domain* domain;
  char* name;
  enum ofi_threading threading;
  enum ofi_progress control_progress;
  enum ofi_progress data_progress;
  enum ofi_resource_mgmt resource_mgmt;
  enum ofi_av_type av_type;
  int mr_mode;
  size_t mr_key_size;
  size_t cq_data_size;
  size_t cq_cnt;
  size_t ep_cnt;
  size_t tx_ctx_cnt;
  size_t rx_ctx_cnt;
  size_t max_ep_tx_ctx;
  size_t max_ep_rx_ctx;
  size_t max_ep_stx_ctx;
  size_t max_ep_srx_ctx;
  size_t cntr_cnt;
  size_t mr_iov_limit;
  uint64_t caps;
  uint64_t mode;
  uint8_t* auth_key;
  size_t auth_key_size;
  size_t max_err_data;
  size_t mr_cnt;
  uint32_t tclass;
};

struct ofi_fabric_attr {
  struct ofi_fid_fabric* fabric;
  char* name;
  char* prov_name;
  uint32_t prov_version;
  uint32_t api_version;
};

struct ofi_info {
  struct ofi_info* next;
  uint64_t caps;
  uint64_t mode;
  uint32_t addr_format;
  size_t src_addrlen;
  size_t dest_addrlen;
  void* src_addr;
  void* dest_addr;
  struct ofi_fid* handle;
  struct ofi_tx_attr* tx_attr;
  struct ofi_rx_attr* rx_attr;
  struct ofi_ep_attr* ep_attr;
  struct ofi_domain_attr* domain_attr;
  struct ofi_fabric_attr* fabric_attr;
  void* nic;
};

/* ---- fabric, domain, registration, address vector ---- */

struct ofi_ops_fabric {
  size_t size;
  int (*domain)(struct ofi_fid_fabric* fabric, struct ofi_info* info, struct ofi_fid_domain** dom, void* context);
};

struct ofi_fid_fabric {
  struct ofi_fid fid;
  struct ofi_ops_fabric* ops;
  uint32_t api_version;
};

struct ofi_cq_attr {
  size_t size;
  uint64_t flags;
  enum ofi_cq_format format;
  enum ofi_wait_obj wait_obj;
  int signaling_vector;
  enum ofi_cq_wait_cond wait_cond;
  void* wait_set;
};

struct ofi_av_attr {
  enum ofi_av_type type;
  int rx_ctx_bits;
  size_t count;
  size_t ep_per_node;
  const char* name;
  void* map_addr;
  uint64_t flags;
};

struct ofi_ops_domain {
  size_t size;
  int (*av_open)(struct ofi_fid_domain* domain, struct ofi_av_attr* attr, struct ofi_fid_av** av, void* context);
  int (*cq_open)(struct ofi_fid_domain* domain, struct ofi_cq_attr* attr, struct ofi_fid_cq** cq, void* context);
  int (*endpoint)(struct ofi_fid_domain* domain, struct ofi_info* info, struct ofi_fid_ep** ep, void* context);
};

struct ofi_mr_attr {
  const struct iovec* mr_iov;
  size_t iov_count;
  uint64_t access;
  uint64_t offset;
  uint64_t requested_key;
  void* context;
  size_t auth_key_size;
  uint8_t* auth_key;
  enum ofi_hmem_iface iface;
  union {
    uint64_t reserved;
    int cuda;
  } device;
};

struct ofi_ops_mr {
  size_t size;
  void* reg;
  void* regv;
  int (*regattr)(struct ofi_fid* fid, const struct ofi_mr_attr* attr, uint64_t flags, struct ofi_fid_mr** mr);
};

struct ofi_fid_domain {
  struct ofi_fid fid;
  struct ofi_ops_domain* ops;
  struct ofi_ops_mr* mr;
};

struct ofi_fid_mr {
  struct ofi_fid fid;
  void* mem_desc;
  uint64_t key;
};

struct ofi_ops_av {
  size_t size;
  int (*insert)(struct ofi_fid_av* av, const void* addr, size_t count, ofi_addr_t* fi_addr, uint64_t flags,
                void* context);
};

struct ofi_fid_av {
  struct ofi_fid fid;
  struct ofi_ops_av* ops;
};

/* ---- completion queue ---- */

struct ofi_cq_data_entry {
  void* op_context;
  uint64_t flags;
  size_t len;
  void* buf;
  uint64_t data;
};

struct ofi_cq_err_entry {
  void* op_context;
  uint64_t flags;
  size_t len;
  void* buf;
  uint64_t data;
  uint64_t tag;
  size_t olen;
  int err;
  int prov_errno;
  void* err_data;
  size_t err_data_size;
};

struct ofi_ops_cq {
  size_t size;
  ssize_t (*read)(struct ofi_fid_cq* cq, void* buf, size_t count);
  void* readfrom;
  ssize_t (*readerr)(struct ofi_fid_cq* cq, struct ofi_cq_err_entry* buf, uint64_t flags);
  void* sread;
  void* sreadfrom;
  void* signal;
  const char* (*strerror)(struct ofi_fid_cq* cq, int prov_errno, const void* err_data, char* buf, size_t len);
};

struct ofi_fid_cq {
  struct ofi_fid fid;
  struct ofi_ops_cq* ops;
};

/* ---- endpoint: names and RMA ---- */

struct ofi_ops_cm {
  size_t size;
  void* setname;
  int (*getname)(struct ofi_fid* fid, void* addr, size_t* addrlen);
};

struct ofi_rma_iov {
  uint64_t addr;
  size_t len;
  uint64_t key;
};

struct ofi_msg_rma {
  const struct iovec* msg_iov;
  void** desc;
  size_t iov_count;
  ofi_addr_t addr;
  const struct ofi_rma_iov* rma_iov;
  size_t rma_iov_count;
  void* context;
  uint64_t data;
};

struct ofi_ops_rma {
  size_t size;
  void* read;
  void* readv;
  void* readmsg;
  void* write;
  void* writev;
  ssize_t (*writemsg)(struct ofi_fid_ep* ep, const struct ofi_msg_rma* msg, uint64_t flags);
};

struct ofi_fid_ep {
  struct ofi_fid fid;
  void* ops;
  struct ofi_ops_cm* cm;
  void* msg;
  struct ofi_ops_rma* rma;
};

/* ---- the inline wrappers (fi_close, fi_domain, ...) ---- */

static inline int ofi_close(struct ofi_fid* fid) { return fid->ops->close(fid); }
static inline int ofi_domain(struct ofi_fid_fabric* fabric, struct ofi_info* info, struct ofi_fid_domain** domain,
                             void* context) {
  return fabric->ops->domain(fabric, info, domain, context);
}
static inline int ofi_cq_open(struct ofi_fid_domain* domain, struct ofi_cq_attr* attr, struct ofi_fid_cq** cq,
                              void* context) {
  return domain->ops->cq_open(domain, attr, cq, context);
}
static inline int ofi_av_open(struct ofi_fid_domain* domain, struct ofi_av_attr* attr, struct ofi_fid_av** av,
                              void* context) {
  return domain->ops->av_open(domain, attr, av, context);
}
static inline int ofi_endpoint(struct ofi_fid_domain* domain, struct ofi_info* info, struct ofi_fid_ep** ep,
                               void* context) {
  return domain->ops->endpoint(domain, info, ep, context);
}
static inline int ofi_ep_bind(struct ofi_fid_ep* ep, struct ofi_fid* bfid, uint64_t flags) {
  return ep->fid.ops->bind(&ep->fid, bfid, flags);
}
static inline int ofi_enable(struct ofi_fid_ep* ep) { return ep->fid.ops->control(&ep->fid, OFI_CONTROL_ENABLE, NULL); }
static inline int ofi_getname(struct ofi_fid_ep* ep, void* addr, size_t* addrlen) {
  return ep->cm->getname(&ep->fid, addr, addrlen);
}
static inline int ofi_mr_regattr(struct ofi_fid_domain* domain, const struct ofi_mr_attr* attr, uint64_t flags,
                                 struct ofi_fid_mr** mr) {
  return domain->mr->regattr(&domain->fid, attr, flags, mr);
}
static inline int ofi_mr_bind(struct ofi_fid_mr* mr, struct ofi_fid* bfid, uint64_t flags) {
  return mr->fid.ops->bind(&mr->fid, bfid, flags);
}
static inline int ofi_mr_enable(struct ofi_fid_mr* mr) {
  return mr->fid.ops->control(&mr->fid, OFI_CONTROL_ENABLE, NULL);
}
static inline void* ofi_mr_desc(struct ofi_fid_mr* mr) { return mr->mem_desc; }
static inline uint64_t ofi_mr_key(struct ofi_fid_mr* mr) { return mr->key; }
static inline int ofi_av_insert(struct ofi_fid_av* av, const void* addr, size_t count, ofi_addr_t* fi_addr,
                                uint64_t flags, void* context) {
  return av->ops->insert(av, addr, count, fi_addr, flags, context);
}
static inline ssize_t ofi_cq_read(struct ofi_fid_cq* cq, void* buf, size_t count) {
  return cq->ops->read(cq, buf, count);
}
static inline ssize_t ofi_cq_readerr(struct ofi_fid_cq* cq, struct ofi_cq_err_entry* buf, uint64_t flags) {
  return cq->ops->readerr(cq, buf, flags);
}
static inline const char* ofi_cq_strerror(struct ofi_fid_cq* cq, int prov_errno, const void* err_data, char* buf,
                                          size_t len) {
  return cq->ops->strerror(cq, prov_errno, err_data, buf, len);
}
static inline ssize_t ofi_writemsg(struct ofi_fid_ep* ep, const struct ofi_msg_rma* msg, uint64_t flags) {
  return ep->rma->writemsg(ep, msg, flags);
}

#endif /* MSCCLPP_SRC_TRANSPORT_NET_OFI_ABI_H_ */
