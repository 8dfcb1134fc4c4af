/* SPDX-License-Identifier: MIT */
/*
 * mscclpp collectives: allreduce, allgather, reduce-scatter, broadcast,
 * reduce, all-to-all, all-to-all-v with counts on the GPU, and send/recv,
 * called from the host like NCCL's.
 *
 * On a GPU communicator (one made where a CUDA device is current) the
 * buffers are device memory and each call is enqueued on `stream`: it
 * returns once the work is enqueued, with no host synchronization, and may
 * be captured in a CUDA graph (replay it as often as you like). On the host
 * backend (no GPU) buffers are host memory, `stream` is ignored and each
 * call returns when this rank's part is complete.
 *
 * Every rank of the communicator calls the same collectives in the same
 * order (send/recv: matching pairs, in the same order per pair). Buffers may
 * start at any address aligned to their element size; counts need not be
 * multiples of anything (0 is allowed and does nothing). In-place is
 * sendbuff == recvbuff for allreduce, broadcast, reduce, and the usual NCCL
 * positions for allgather (sendbuff == recvbuff + rank * sendcount elements)
 * and reduce-scatter (sendbuff + rank * recvcount elements == recvbuff).
 *
 * Algorithms: several per collective; a rule picks one by size, rank count
 * and topology. MSCCLPP_ALGO ("allreduce=rsag,allgather=direct") forces one
 * for experiments; mscclppCollAlgoNames lists them. Across hosts, allreduce
 * is hierarchical (inside each host, then across hosts, then inside each
 * host again) where every host has the same number L of ranks and count is
 * a multiple of L, else flat (allreduce=hier / allreduce=flat choose).
 *
 * Errors: mscclppInvalidArgument (NULL comm, bad type/op/root/peer, NULL
 * buffer with count > 0, misaligned buffer; the message names the value),
 * mscclppInvalidUsage (a collective this build cannot run on this
 * communicator, e.g. ranks on several hosts before the network transport),
 * mscclppRemoteError / mscclppTimeout / mscclppAborted (a peer was lost or
 * a wait timed out; on a GPU these are reported by mscclppCommGetAsyncError,
 * as the kernel fails after the call returned), mscclppUnhandledCudaError.
 */
#ifndef MSCCLPP_COLL_H_
#define MSCCLPP_COLL_H_

#include <stddef.h>

#include "mscclpp/comm.h"
#include "mscclpp/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* cudaStream_t without including the CUDA headers (same type). NULL is the
 * legacy default stream, as in CUDA. */
struct CUstream_st;
typedef struct CUstream_st* mscclppStream_t;

/* Element types, with NCCL's values. */
typedef enum {
  mscclppInt8 = 0,
  mscclppUint8 = 1,
  mscclppInt32 = 2,
  mscclppUint32 = 3,
  mscclppInt64 = 4,
  mscclppUint64 = 5,
  mscclppFloat16 = 6,
  mscclppFloat32 = 7,
  mscclppFloat64 = 8,
  mscclppBfloat16 = 9,
  mscclppFloat8e4m3 = 10,
  mscclppFloat8e5m2 = 11,
  mscclppNumTypes = 12
} mscclppDataType_t;

/* Reduction operators, with NCCL's values. Avg is the sum divided by the
 * number of ranks (integers: truncating division of the sum). */
typedef enum {
  mscclppSum = 0,
  mscclppProd = 1,
  mscclppMax = 2,
  mscclppMin = 3,
  mscclppAvg = 4,
  mscclppNumOps = 5
} mscclppRedOp_t;

/* Size in bytes of one element (0 for a value out of range), and short
 * fixed names ("float32", "sum"; "unknown" out of range). */
MSCCLPP_API size_t mscclppDataTypeSize(mscclppDataType_t datatype);
MSCCLPP_API const char* mscclppDataTypeName(mscclppDataType_t datatype);
MSCCLPP_API const char* mscclppRedOpName(mscclppRedOp_t op);

/* recvbuff[i] = op over ranks of sendbuff[i], for i < count, on every rank. */
MSCCLPP_API mscclppResult_t mscclppAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                             mscclppDataType_t datatype, mscclppRedOp_t op, mscclppComm_t comm,
                                             mscclppStream_t stream);

/* recvbuff[r * sendcount + i] = sendbuff of rank r [i]. */
MSCCLPP_API mscclppResult_t mscclppAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                             mscclppDataType_t datatype, mscclppComm_t comm, mscclppStream_t stream);

/* recvbuff[i] = op over ranks of sendbuff[rank * recvcount + i]. */
MSCCLPP_API mscclppResult_t mscclppReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                                 mscclppDataType_t datatype, mscclppRedOp_t op, mscclppComm_t comm,
                                                 mscclppStream_t stream);

/* recvbuff = root's sendbuff on every rank (sendbuff is read on the root
 * only and may be NULL elsewhere). */
MSCCLPP_API mscclppResult_t mscclppBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                             mscclppDataType_t datatype, int root, mscclppComm_t comm,
                                             mscclppStream_t stream);

/* The root's recvbuff[i] = op over ranks of sendbuff[i] (recvbuff is
 * written on the root only and may be NULL elsewhere). */
MSCCLPP_API mscclppResult_t mscclppReduce(const void* sendbuff, void* recvbuff, size_t count,
                                          mscclppDataType_t datatype, mscclppRedOp_t op, int root, mscclppComm_t comm,
                                          mscclppStream_t stream);

/* recvbuff[r * count + i] = sendbuff of rank r [rank * count + i]: `count`
 * elements to and from each rank. In place too (sendbuff == recvbuff). */
MSCCLPP_API mscclppResult_t mscclppAllToAll(const void* sendbuff, void* recvbuff, size_t count,
                                            mscclppDataType_t datatype, mscclppComm_t comm, mscclppStream_t stream);

/* All-to-all-v whose counts stay on the GPU (a mixture-of-experts layer's
 * dispatch and combine): the counts are written by a kernel earlier on the
 * stream and read by this call's kernel, and the counts each rank receives
 * are written for the next kernel, so the host never waits for the GPU and
 * the whole step can be captured in a CUDA graph. NCCL has no such call.
 *
 * This rank sends sendcounts[d] elements from sendbuff + sdispls[d] elements
 * to every rank d (itself included). What it receives is packed in source-
 * rank order: rank s's block at recvbuff + rdispls[s], where rdispls[0] = 0
 * and rdispls[s + 1] = rdispls[s] + recvcounts[s]; the call writes
 * recvcounts[s] (what rank s sent to this rank) and rdispls[s] for every s.
 * Counts and displacements are in elements, nranks size_t each. Any type
 * (a copy: only the element size matters; every rank passes the same).
 *
 * Where they live: on a GPU communicator sendcounts, sdispls, recvcounts
 * and rdispls are device memory, read and written by the call's kernel in
 * stream order (the host never reads them; the peers learn the counts on
 * the GPU). On the host backend, which has no stream, they are host memory:
 * read when the call is made, written before it returns.
 *
 * sendcapacity is the number of elements sendbuff holds: every block must
 * lie inside it (sdispls[d] + sendcounts[d] <= sendcapacity; a zero count's
 * displacement is not read). recvcapacity is the number recvbuff holds. A
 * count may be 0, and a rank may send nothing (every sendcounts[d] == 0;
 * sendbuff may then be NULL with sendcapacity 0) or receive nothing
 * (recvbuff NULL with recvcapacity 0). Not in place: the buffers' ranges
 * must not overlap, nor may recvcounts and rdispls overlap each other, a
 * buffer or an input array (mscclppInvalidArgument).
 *
 * Counts that do not fit are found where the counts are (on a GPU in the
 * kernel, after this returned); nothing is ever read or written out of
 * bounds, the call completes on every rank, and the rank that found it gets
 * the error as its communicator's asynchronous error (mscclppCommGetAsyncError
 * returns it, naming the rank and the sizes; the communicator is aborted,
 * so its later calls fail: destroy it). On the host backend this call
 * returns the error too. The two cases:
 *   - more elements arrive than recvcapacity (mscclppInvalidUsage): the
 *     elements whose place rdispls[s] + i is at or past recvcapacity are
 *     dropped, the others written; recvcounts and rdispls still say what
 *     each rank sent (their total is more than recvcapacity);
 *   - a block outside sendbuff (sdispls[d] + sendcounts[d] > sendcapacity;
 *     mscclppInvalidArgument): the block is sent as empty, so rank d
 *     receives 0 elements from this rank.
 * Other errors, returned before anything is enqueued: mscclppInvalidArgument
 * (NULL comm or count array, bad type, a NULL or misaligned buffer with a
 * capacity above 0, too large a capacity, in place or overlapping arrays);
 * mscclppInvalidUsage on a GPU communicator whose ranks are on several
 * hosts (the port-channel family has no all-to-all-v yet) or with more
 * ranks than the GPU backend holds; those of the other collectives. */
MSCCLPP_API mscclppResult_t mscclppAllToAllv(const void* sendbuff, size_t sendcapacity, const size_t* sendcounts,
                                             const size_t* sdispls, void* recvbuff, size_t recvcapacity,
                                             size_t* recvcounts, size_t* rdispls, mscclppDataType_t datatype,
                                             mscclppComm_t comm, mscclppStream_t stream);

/* Point to point: `count` elements from this rank's sendbuff to `peer`'s
 * recvbuff (peer may be this rank). Outside a group each call is a
 * blocking pair as in NCCL: the matching call must come on the peer. Inside
 * mscclppGroupStart/End, every send and recv of the group is enqueued as
 * one launch at GroupEnd, in any pattern (rings, all-to-all) without
 * deadlock. */
MSCCLPP_API mscclppResult_t mscclppSend(const void* sendbuff, size_t count, mscclppDataType_t datatype, int peer,
                                        mscclppComm_t comm, mscclppStream_t stream);
MSCCLPP_API mscclppResult_t mscclppRecv(void* recvbuff, size_t count, mscclppDataType_t datatype, int peer,
                                        mscclppComm_t comm, mscclppStream_t stream);

/* Group send/recv calls of this thread (they nest; the outermost End
 * launches). All operations of one group use one communicator and one
 * stream (mscclppInvalidUsage otherwise, reported at End). Collectives
 * inside a group run when called. End returns the first error of the
 * group's operations. */
MSCCLPP_API mscclppResult_t mscclppGroupStart(void);
MSCCLPP_API mscclppResult_t mscclppGroupEnd(void);

/* The algorithms of collective `coll` ("allreduce", "allgather",
 * "reducescatter", "broadcast", "reduce", "alltoall", "sendrecv",
 * "alltoallv") as a
 * comma-separated list, for MSCCLPP_ALGO; NULL for an unknown name. */
MSCCLPP_API const char* mscclppCollAlgoNames(const char* coll);

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_COLL_H_ */
