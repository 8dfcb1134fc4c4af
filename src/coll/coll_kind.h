/* SPDX-License-Identifier: MIT */
/* The collectives, numbered (shared by the C and CUDA sides of coll). */
#ifndef MSCCLPP_SRC_COLL_COLL_KIND_H_
#define MSCCLPP_SRC_COLL_COLL_KIND_H_

typedef enum {
  MSCCLPP_COLL_ALLREDUCE = 0,
  MSCCLPP_COLL_ALLGATHER,
  MSCCLPP_COLL_REDUCESCATTER,
  MSCCLPP_COLL_BROADCAST,
  MSCCLPP_COLL_REDUCE,
  MSCCLPP_COLL_ALLTOALL,
  MSCCLPP_COLL_SENDRECV,
  MSCCLPP_COLL_ALLTOALLV, /* mscclppAllToAllv: counts on the device */
  MSCCLPP_COLL_KINDS
} mscclppCollKind;

#endif /* MSCCLPP_SRC_COLL_COLL_KIND_H_ */
