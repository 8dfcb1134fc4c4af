/*
 * The communicator object. Each layer keeps its own state in its own struct
 * and the communicator holds a handle to each; this header is the list.
 */
#ifndef MSCCLPP_SRC_COMM_COMM_H_
#define MSCCLPP_SRC_COMM_COMM_H_

#include "bootstrap/bootstrap.h"
#include "core/params.h"
#include "mscclpp/comm.h"

struct mscclppMemContext;

struct mscclppComm {
  int rank;
  int nranks;
  int localRank; /* among the ranks of this host (hostname + network namespace, or MSCCLPP_HOSTID) */
  int localNranks;
  /* MSCCLPP_* parameters as they were when the communicator was created;
   * every layer reads its settings (timeout, ...) from here. */
  struct mscclppParams params;
  struct mscclppBootstrap* bootstrap; /* control plane: owns its sockets and its progress thread */
  struct mscclppMemContext* mem;      /* memory layer: made on first use (comm/memory_api.c); __atomic */
  /* The lead adds here: the proxy service handle, the abort flag shared with
   * proxy threads and device waits, the count of live child objects
   * (registered memory, connections, channels) that mscclppCommDestroy
   * checks, and the first asynchronous error. */
};

#endif /* MSCCLPP_SRC_COMM_COMM_H_ */
