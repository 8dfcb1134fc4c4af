/* SPDX-License-Identifier: MIT */
/* The vendored libfabric ABI (src/transport/net/ofi_abi.h) against the real
 * headers: every offset, size and constant the network transport relies on.
 * Built only where libfabric's headers exist (tests/net/CMakeLists.txt); the
 * checks are _Static_asserts, so a mismatch fails the build, and the program
 * only reports what it compared. */
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <stddef.h>
#include <stdio.h>

#include "transport/net/ofi_abi.h"

#define SIZE(ours, theirs) _Static_assert(sizeof(struct ours) == sizeof(struct theirs), #ours " size")
#define FIELD(ours, theirs, f)                                                                               \
  _Static_assert(offsetof(struct ours, f) == offsetof(struct theirs, f), #ours "." #f " offset");         \
  _Static_assert(sizeof(((struct ours*)0)->f) == sizeof(((struct theirs*)0)->f), #ours "." #f " size"); \
  n++
#define SAME(ours, theirs) \
  _Static_assert((unsigned long long)(ours) == (unsigned long long)(theirs), #ours " value"); \
  n++

/* The layout is 1.17's: headers of another minor version may differ in what
 * they append, so a mismatch there says to check, not that ours is wrong. */
_Static_assert(OFI_ABI_VERSION <= FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION),
               "libfabric headers older than the vendored layout");

int main(void) {
  int n = 0;
  /* ofi_ops: the leading slots of fi_ops */
  FIELD(ofi_ops, fi_ops, size);
  FIELD(ofi_ops, fi_ops, close);
  FIELD(ofi_ops, fi_ops, bind);
  FIELD(ofi_ops, fi_ops, control);
  SIZE(ofi_fid, fid);
  FIELD(ofi_fid, fid, fclass);
  FIELD(ofi_fid, fid, context);
  FIELD(ofi_fid, fid, ops);
  SIZE(ofi_context2, fi_context2);
  FIELD(ofi_context2, fi_context2, internal);
  SIZE(ofi_tx_attr, fi_tx_attr);
  FIELD(ofi_tx_attr, fi_tx_attr, caps);
  FIELD(ofi_tx_attr, fi_tx_attr, mode);
  FIELD(ofi_tx_attr, fi_tx_attr, op_flags);
  FIELD(ofi_tx_attr, fi_tx_attr, msg_order);
  FIELD(ofi_tx_attr, fi_tx_attr, comp_order);
  FIELD(ofi_tx_attr, fi_tx_attr, inject_size);
  FIELD(ofi_tx_attr, fi_tx_attr, size);
  FIELD(ofi_tx_attr, fi_tx_attr, iov_limit);
  FIELD(ofi_tx_attr, fi_tx_attr, rma_iov_limit);
  FIELD(ofi_tx_attr, fi_tx_attr, tclass);
  SIZE(ofi_rx_attr, fi_rx_attr);
  FIELD(ofi_rx_attr, fi_rx_attr, caps);
  FIELD(ofi_rx_attr, fi_rx_attr, mode);
  FIELD(ofi_rx_attr, fi_rx_attr, op_flags);
  FIELD(ofi_rx_attr, fi_rx_attr, msg_order);
  FIELD(ofi_rx_attr, fi_rx_attr, comp_order);
  FIELD(ofi_rx_attr, fi_rx_attr, total_buffered_recv);
  FIELD(ofi_rx_attr, fi_rx_attr, size);
  FIELD(ofi_rx_attr, fi_rx_attr, iov_limit);
  SIZE(ofi_ep_attr, fi_ep_attr);
  FIELD(ofi_ep_attr, fi_ep_attr, type);
  FIELD(ofi_ep_attr, fi_ep_attr, protocol);
  FIELD(ofi_ep_attr, fi_ep_attr, protocol_version);
  FIELD(ofi_ep_attr, fi_ep_attr, max_msg_size);
  FIELD(ofi_ep_attr, fi_ep_attr, msg_prefix_size);
  FIELD(ofi_ep_attr, fi_ep_attr, max_order_raw_size);
  FIELD(ofi_ep_attr, fi_ep_attr, max_order_war_size);
  FIELD(ofi_ep_attr, fi_ep_attr, max_order_waw_size);
  FIELD(ofi_ep_attr, fi_ep_attr, mem_tag_format);
  FIELD(ofi_ep_attr, fi_ep_attr, tx_ctx_cnt);
  FIELD(ofi_ep_attr, fi_ep_attr, rx_ctx_cnt);
  FIELD(ofi_ep_attr, fi_ep_attr, auth_key_size);
  FIELD(ofi_ep_attr, fi_ep_attr, auth_key);
  SIZE(ofi_domain_attr, fi_domain_attr);
  FIELD(ofi_domain_attr, fi_domain_attr, domain);
  FIELD(ofi_domain_attr, fi_domain_attr, name);
  FIELD(ofi_domain_attr, fi_domain_attr, threading);
  FIELD(ofi_domain_attr, fi_domain_attr, control_progress);
  FIELD(ofi_domain_attr, fi_domain_attr, data_progress);
  FIELD(ofi_domain_attr, fi_domain_attr, resource_mgmt);
  FIELD(ofi_domain_attr, fi_domain_attr, av_type);
  FIELD(ofi_domain_attr, fi_domain_attr, mr_mode);
  FIELD(ofi_domain_attr, fi_domain_attr, mr_key_size);
  FIELD(ofi_domain_attr, fi_domain_attr, cq_data_size);
  FIELD(ofi_domain_attr, fi_domain_attr, cq_cnt);
  FIELD(ofi_domain_attr, fi_domain_attr, ep_cnt);
  FIELD(ofi_domain_attr, fi_domain_attr, tx_ctx_cnt);
  FIELD(ofi_domain_attr, fi_domain_attr, rx_ctx_cnt);
  FIELD(ofi_domain_attr, fi_domain_attr, max_ep_tx_ctx);
  FIELD(ofi_domain_attr, fi_domain_attr, max_ep_rx_ctx);
  FIELD(ofi_domain_attr, fi_domain_attr, max_ep_stx_ctx);
  FIELD(ofi_domain_attr, fi_domain_attr, max_ep_srx_ctx);
  FIELD(ofi_domain_attr, fi_domain_attr, cntr_cnt);
  FIELD(ofi_domain_attr, fi_domain_attr, mr_iov_limit);
  FIELD(ofi_domain_attr, fi_domain_attr, caps);
  FIELD(ofi_domain_attr, fi_domain_attr, mode);
  FIELD(ofi_domain_attr, fi_domain_attr, auth_key);
  FIELD(ofi_domain_attr, fi_domain_attr, auth_key_size);
  FIELD(ofi_domain_attr, fi_domain_attr, max_err_data);
  FIELD(ofi_domain_attr, fi_domain_attr, mr_cnt);
  FIELD(ofi_domain_attr, fi_domain_attr, tclass);
  SIZE(ofi_fabric_attr, fi_fabric_attr);
  FIELD(ofi_fabric_attr, fi_fabric_attr, fabric);
  FIELD(ofi_fabric_attr, fi_fabric_attr, name);
  FIELD(ofi_fabric_attr, fi_fabric_attr, prov_name);
  FIELD(ofi_fabric_attr, fi_fabric_attr, prov_version);
  FIELD(ofi_fabric_attr, fi_fabric_attr, api_version);
  SIZE(ofi_info, fi_info);
  FIELD(ofi_info, fi_info, next);
  FIELD(ofi_info, fi_info, caps);
  FIELD(ofi_info, fi_info, mode);
  FIELD(ofi_info, fi_info, addr_format);
  FIELD(ofi_info, fi_info, src_addrlen);
  FIELD(ofi_info, fi_info, dest_addrlen);
  FIELD(ofi_info, fi_info, src_addr);
  FIELD(ofi_info, fi_info, dest_addr);
  FIELD(ofi_info, fi_info, handle);
  FIELD(ofi_info, fi_info, tx_attr);
  FIELD(ofi_info, fi_info, rx_attr);
  FIELD(ofi_info, fi_info, ep_attr);
  FIELD(ofi_info, fi_info, domain_attr);
  FIELD(ofi_info, fi_info, fabric_attr);
  FIELD(ofi_info, fi_info, nic);
  /* ofi_ops_fabric: the leading slots of fi_ops_fabric */
  FIELD(ofi_ops_fabric, fi_ops_fabric, size);
  FIELD(ofi_ops_fabric, fi_ops_fabric, domain);
  SIZE(ofi_fid_fabric, fid_fabric);
  FIELD(ofi_fid_fabric, fid_fabric, fid);
  FIELD(ofi_fid_fabric, fid_fabric, ops);
  FIELD(ofi_fid_fabric, fid_fabric, api_version);
  SIZE(ofi_cq_attr, fi_cq_attr);
  FIELD(ofi_cq_attr, fi_cq_attr, size);
  FIELD(ofi_cq_attr, fi_cq_attr, flags);
  FIELD(ofi_cq_attr, fi_cq_attr, format);
  FIELD(ofi_cq_attr, fi_cq_attr, wait_obj);
  FIELD(ofi_cq_attr, fi_cq_attr, signaling_vector);
  FIELD(ofi_cq_attr, fi_cq_attr, wait_cond);
  FIELD(ofi_cq_attr, fi_cq_attr, wait_set);
  SIZE(ofi_av_attr, fi_av_attr);
  FIELD(ofi_av_attr, fi_av_attr, type);
  FIELD(ofi_av_attr, fi_av_attr, rx_ctx_bits);
  FIELD(ofi_av_attr, fi_av_attr, count);
  FIELD(ofi_av_attr, fi_av_attr, ep_per_node);
  FIELD(ofi_av_attr, fi_av_attr, name);
  FIELD(ofi_av_attr, fi_av_attr, map_addr);
  FIELD(ofi_av_attr, fi_av_attr, flags);
  /* ofi_ops_domain: the leading slots of fi_ops_domain */
  FIELD(ofi_ops_domain, fi_ops_domain, size);
  FIELD(ofi_ops_domain, fi_ops_domain, av_open);
  FIELD(ofi_ops_domain, fi_ops_domain, cq_open);
  FIELD(ofi_ops_domain, fi_ops_domain, endpoint);
  SIZE(ofi_mr_attr, fi_mr_attr);
  FIELD(ofi_mr_attr, fi_mr_attr, mr_iov);
  FIELD(ofi_mr_attr, fi_mr_attr, iov_count);
  FIELD(ofi_mr_attr, fi_mr_attr, access);
  FIELD(ofi_mr_attr, fi_mr_attr, offset);
  FIELD(ofi_mr_attr, fi_mr_attr, requested_key);
  FIELD(ofi_mr_attr, fi_mr_attr, context);
  FIELD(ofi_mr_attr, fi_mr_attr, auth_key_size);
  FIELD(ofi_mr_attr, fi_mr_attr, auth_key);
  FIELD(ofi_mr_attr, fi_mr_attr, iface);
  FIELD(ofi_mr_attr, fi_mr_attr, device);
  /* ofi_ops_mr: the leading slots of fi_ops_mr */
  FIELD(ofi_ops_mr, fi_ops_mr, size);
  FIELD(ofi_ops_mr, fi_ops_mr, reg);
  FIELD(ofi_ops_mr, fi_ops_mr, regv);
  FIELD(ofi_ops_mr, fi_ops_mr, regattr);
  SIZE(ofi_fid_domain, fid_domain);
  FIELD(ofi_fid_domain, fid_domain, fid);
  FIELD(ofi_fid_domain, fid_domain, ops);
  FIELD(ofi_fid_domain, fid_domain, mr);
  SIZE(ofi_fid_mr, fid_mr);
  FIELD(ofi_fid_mr, fid_mr, fid);
  FIELD(ofi_fid_mr, fid_mr, mem_desc);
  FIELD(ofi_fid_mr, fid_mr, key);
  /* ofi_ops_av: the leading slots of fi_ops_av */
  FIELD(ofi_ops_av, fi_ops_av, size);
  FIELD(ofi_ops_av, fi_ops_av, insert);
  SIZE(ofi_fid_av, fid_av);
  FIELD(ofi_fid_av, fid_av, fid);
  FIELD(ofi_fid_av, fid_av, ops);
  SIZE(ofi_cq_data_entry, fi_cq_data_entry);
  FIELD(ofi_cq_data_entry, fi_cq_data_entry, op_context);
  FIELD(ofi_cq_data_entry, fi_cq_data_entry, flags);
  FIELD(ofi_cq_data_entry, fi_cq_data_entry, len);
  FIELD(ofi_cq_data_entry, fi_cq_data_entry, buf);
  FIELD(ofi_cq_data_entry, fi_cq_data_entry, data);
  SIZE(ofi_cq_err_entry, fi_cq_err_entry);
  FIELD(ofi_cq_err_entry, fi_cq_err_entry, op_context);
  FIELD(ofi_cq_err_entry, fi_cq_err_entry, flags);
  FIELD(ofi_cq_err_entry, fi_cq_err_entry, len);
  FIELD(ofi_cq_err_entry, fi_cq_err_entry, buf);
  FIELD(ofi_cq_err_entry, fi_cq_err_entry, data);
  FIELD(ofi_cq_err_entry, fi_cq_err_entry, tag);
  FIELD(ofi_cq_err_entry, fi_cq_err_entry, olen);
  FIELD(ofi_cq_err_entry, fi_cq_err_entry, err);
  FIELD(ofi_cq_err_entry, fi_cq_err_entry, prov_errno);
  FIELD(ofi_cq_err_entry, fi_cq_err_entry, err_data);
  FIELD(ofi_cq_err_entry, fi_cq_err_entry, err_data_size);
  /* ofi_ops_cq: the leading slots of fi_ops_cq */
  FIELD(ofi_ops_cq, fi_ops_cq, size);
  FIELD(ofi_ops_cq, fi_ops_cq, read);
  FIELD(ofi_ops_cq, fi_ops_cq, readfrom);
  FIELD(ofi_ops_cq, fi_ops_cq, readerr);
  FIELD(ofi_ops_cq, fi_ops_cq, sread);
  FIELD(ofi_ops_cq, fi_ops_cq, sreadfrom);
  FIELD(ofi_ops_cq, fi_ops_cq, signal);
  FIELD(ofi_ops_cq, fi_ops_cq, strerror);
  SIZE(ofi_fid_cq, fid_cq);
  FIELD(ofi_fid_cq, fid_cq, fid);
  FIELD(ofi_fid_cq, fid_cq, ops);
  /* ofi_ops_cm: the leading slots of fi_ops_cm */
  FIELD(ofi_ops_cm, fi_ops_cm, size);
  FIELD(ofi_ops_cm, fi_ops_cm, setname);
  FIELD(ofi_ops_cm, fi_ops_cm, getname);
  SIZE(ofi_rma_iov, fi_rma_iov);
  FIELD(ofi_rma_iov, fi_rma_iov, addr);
  FIELD(ofi_rma_iov, fi_rma_iov, len);
  FIELD(ofi_rma_iov, fi_rma_iov, key);
  SIZE(ofi_msg_rma, fi_msg_rma);
  FIELD(ofi_msg_rma, fi_msg_rma, msg_iov);
  FIELD(ofi_msg_rma, fi_msg_rma, desc);
  FIELD(ofi_msg_rma, fi_msg_rma, iov_count);
  FIELD(ofi_msg_rma, fi_msg_rma, addr);
  FIELD(ofi_msg_rma, fi_msg_rma, rma_iov);
  FIELD(ofi_msg_rma, fi_msg_rma, rma_iov_count);
  FIELD(ofi_msg_rma, fi_msg_rma, context);
  FIELD(ofi_msg_rma, fi_msg_rma, data);
  /* ofi_ops_rma: the leading slots of fi_ops_rma */
  FIELD(ofi_ops_rma, fi_ops_rma, size);
  FIELD(ofi_ops_rma, fi_ops_rma, read);
  FIELD(ofi_ops_rma, fi_ops_rma, readv);
  FIELD(ofi_ops_rma, fi_ops_rma, readmsg);
  FIELD(ofi_ops_rma, fi_ops_rma, write);
  FIELD(ofi_ops_rma, fi_ops_rma, writev);
  FIELD(ofi_ops_rma, fi_ops_rma, writemsg);
  /* ofi_fid_ep: the leading slots of fid_ep */
  FIELD(ofi_fid_ep, fid_ep, fid);
  FIELD(ofi_fid_ep, fid_ep, ops);
  FIELD(ofi_fid_ep, fid_ep, cm);
  FIELD(ofi_fid_ep, fid_ep, msg);
  FIELD(ofi_fid_ep, fid_ep, rma);
  SAME(OFI_VERSION(1, 9), FI_VERSION(1, 9));
  SAME(OFI_MAJOR(OFI_VERSION(3, 4)), FI_MAJOR(FI_VERSION(3, 4)));
  SAME(OFI_MINOR(OFI_VERSION(3, 4)), FI_MINOR(FI_VERSION(3, 4)));
  SAME(OFI_ADDR_NOTAVAIL, FI_ADDR_NOTAVAIL);
  SAME(OFI_KEY_NOTAVAIL, FI_KEY_NOTAVAIL);
  SAME(OFI_RMA, FI_RMA);
  SAME(OFI_READ, FI_READ);
  SAME(OFI_WRITE, FI_WRITE);
  SAME(OFI_RECV, FI_RECV);
  SAME(OFI_SEND, FI_SEND);
  SAME(OFI_TRANSMIT, FI_TRANSMIT);
  SAME(OFI_REMOTE_READ, FI_REMOTE_READ);
  SAME(OFI_REMOTE_WRITE, FI_REMOTE_WRITE);
  SAME(OFI_REMOTE_CQ_DATA, FI_REMOTE_CQ_DATA);
  SAME(OFI_COMPLETION, FI_COMPLETION);
  SAME(OFI_INJECT, FI_INJECT);
  SAME(OFI_DELIVERY_COMPLETE, FI_DELIVERY_COMPLETE);
  SAME(OFI_HMEM, FI_HMEM);
  SAME(OFI_CONTEXT2, FI_CONTEXT2);
  SAME(OFI_CONTEXT, FI_CONTEXT);
  SAME(OFI_MR_LOCAL, FI_MR_LOCAL);
  SAME(OFI_MR_VIRT_ADDR, FI_MR_VIRT_ADDR);
  SAME(OFI_MR_ALLOCATED, FI_MR_ALLOCATED);
  SAME(OFI_MR_PROV_KEY, FI_MR_PROV_KEY);
  SAME(OFI_MR_ENDPOINT, FI_MR_ENDPOINT);
  SAME(OFI_MR_HMEM, FI_MR_HMEM);
  SAME(OFI_ORDER_WAW, FI_ORDER_WAW);
  SAME(OFI_ORDER_RMA_WAW, FI_ORDER_RMA_WAW);
  SAME(OFI_EIO, FI_EIO);
  SAME(OFI_EAGAIN, FI_EAGAIN);
  SAME(OFI_EAVAIL, FI_EAVAIL);
  SAME(OFI_AV_UNSPEC, FI_AV_UNSPEC);
  SAME(OFI_AV_MAP, FI_AV_MAP);
  SAME(OFI_AV_TABLE, FI_AV_TABLE);
  SAME(OFI_PROGRESS_MANUAL, FI_PROGRESS_MANUAL);
  SAME(OFI_THREAD_DOMAIN, FI_THREAD_DOMAIN);
  SAME(OFI_THREAD_ENDPOINT, FI_THREAD_ENDPOINT);
  SAME(OFI_RM_ENABLED, FI_RM_ENABLED);
  SAME(OFI_EP_MSG, FI_EP_MSG);
  SAME(OFI_EP_DGRAM, FI_EP_DGRAM);
  SAME(OFI_EP_RDM, FI_EP_RDM);
  SAME(OFI_EP_SOCK_DGRAM, FI_EP_SOCK_DGRAM);
  SAME(OFI_HMEM_SYSTEM, FI_HMEM_SYSTEM);
  SAME(OFI_HMEM_CUDA, FI_HMEM_CUDA);
  SAME(OFI_WAIT_NONE, FI_WAIT_NONE);
  SAME(OFI_CQ_FORMAT_DATA, FI_CQ_FORMAT_DATA);
  SAME(OFI_CQ_COND_NONE, FI_CQ_COND_NONE);
  SAME(OFI_CONTROL_ENABLE, FI_ENABLE);
  _Static_assert(sizeof(enum ofi_ep_type) == sizeof(enum fi_ep_type), "enum size");
  _Static_assert(sizeof(enum ofi_av_type) == sizeof(enum fi_av_type), "enum size");
  _Static_assert(sizeof(enum ofi_hmem_iface) == sizeof(enum fi_hmem_iface), "enum size");
  printf("vendored libfabric ABI (%u.%u) matches the headers (%d.%d): %d fields and constants compared\n",
         OFI_MAJOR(OFI_ABI_VERSION), OFI_MINOR(OFI_ABI_VERSION), FI_MAJOR_VERSION, FI_MINOR_VERSION, n);
  return 0;
}
