/* SPDX-License-Identifier: MIT */
/*
 * Hierarchical allreduce for communicators that span hosts (coll_hier.c),
 * on top of whatever backend runs the communicator: inside each host over
 * the host's own ranks, between hosts over one rank per host.
 */
#ifndef MSCCLPP_SRC_COLL_COLL_HIER_H_
#define MSCCLPP_SRC_COLL_COLL_HIER_H_

#include "coll/coll.h"

/* Allreduce `a` (checked, count > 0) on a communicator that spans hosts,
 * where the selection table wants the hierarchy tried: runs it
 * hierarchically and sets *ran = 1 when that applies (every host has the
 * same number L > 1 of ranks, count % L == 0), else leaves *ran = 0 for the
 * flat path. Every rank makes the same choice. The first call learns
 * the hosts' layout (a bootstrap allgather: every rank must reach it, as
 * every rank reaches an allreduce), the first that runs hierarchically
 * makes the two child communicators. A child's failure is returned with
 * the child's reason (a lost rank named in this communicator's numbering). */
mscclppResult_t mscclppCollHierAllReduce(struct mscclppComm* comm, const struct mscclppCollArgs* a, int* ran);

/* Destroy the child communicators and the state (`state` as the parent's
 * collective state holds it, at the parent's destruction). */
void mscclppCollHierRelease(struct mscclppComm* comm, void* state);

#endif /* MSCCLPP_SRC_COLL_COLL_HIER_H_ */
