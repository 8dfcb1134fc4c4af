/* SPDX-License-Identifier: MIT */
/*
 * The network transport (libfabric RMA: verbs, efa, tcp;ofi_rxm) as the
 * rest of the library and the tests see it: whether libfabric loads, what a
 * configuration would open (mscclpp-info), and the tests' switch that sends
 * host memory through the staging protocol. The transport itself is reached
 * through its ops table (transport.h); the files of this folder:
 *
 *   ofi_abi.h, ofi_loader.c   libfabric's ABI subset and the dlopen'ed table
 *   provider.c                provider and NIC choice (MSCCLPP_NET_PROVIDER, _IFNAME)
 *   endpoint.c                one endpoint per memory context: open, close, addresses
 *   registration.c            memory registration (the memory layer's hook)
 *   engine.c                  operations: post, queue, completion queue, waits;
 *                             remote CQ data goes to handlers registered per tag
 *   staging.c                 GPU memory through pinned host rings (no FI_HMEM)
 *   signal_cq.c               signals as remote CQ data (the signal table)
 *   transport_net.c           the ops table: connect, write, signal, flush
 */
#ifndef MSCCLPP_SRC_TRANSPORT_NET_NET_H_
#define MSCCLPP_SRC_TRANSPORT_NET_NET_H_

#include <stddef.h>
#include <stdint.h>

#include "mscclpp/core.h"

/* 1 when libfabric could be loaded (tried once per process). */
int mscclppNetLibAvailable(void);
/* Why not (for messages); "" when it loaded. */
const char* mscclppNetLibError(void);

/* What picks the provider and NIC (MSCCLPP_NET_PROVIDER, MSCCLPP_NET_IFNAME). */
struct mscclppNetConfig {
  const char* provider; /* "" : the first with RMA (shm-only providers excluded) */
  const char* ifname;   /* "" : any; comma list of domain-name prefixes, ^ excludes, = exact */
  double timeoutSec;
  const uint32_t* abortFlag;
  int rank;
  const char* signal; /* MSCCLPP_NET_SIGNAL: "auto" or "cq" (NULL: auto) */
};

/* What the transport would open with cfg (mscclpp-info): mscclppSuccess and
 * the description ("tcp;ofi_rxm on lo (...)") in text, or the status opening
 * would return and its reason in text. Opens no endpoint. */
mscclppResult_t mscclppNetProbe(const struct mscclppNetConfig* cfg, char* text, size_t len);

/* Tests only: register host memory of later registrations as "staged", so
 * the GPU staging protocol runs on the host backend in CI. The hook is
 * built only into the tests' copy of the library (MSCCLPP_TEST_HOOKS);
 * the shipped one always answers 0. */
#ifdef MSCCLPP_TEST_HOOKS
void mscclppNetTestForceStaging(int on);
int mscclppNetTestStagingOn(void);
#else
static inline int mscclppNetTestStagingOn(void) { return 0; }
#endif

#endif /* MSCCLPP_SRC_TRANSPORT_NET_NET_H_ */
