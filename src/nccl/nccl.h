/* SPDX-License-Identifier: MIT */
/*
 * The NCCL 2.28 C API as libmscclpp_nccl.so implements it: names, types,
 * enum values and struct layouts are NCCL's (written from NCCL's documented
 * signatures; tests/nccl checks them against NVIDIA's nccl.h), so a program
 * built against NCCL runs on mscclpp unchanged, by LD_PRELOAD or by linking
 * this library in place of libnccl.so.2. What each call does on mscclpp,
 * and what it does not do, is said at the call; the library's overview is
 * in nccl_internal.h and README ("NCCL-compatible library").
 *
 * Compiles as C11 and C++ without the CUDA headers (cudaStream_t is declared
 * here as the same type CUDA uses). The include guard is NCCL's own, so this
 * header and NVIDIA's never both apply.
 */
#ifndef NCCL_H_
#define NCCL_H_

#include <limits.h>
#include <stddef.h>

#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 9
#define NCCL_SUFFIX ""

#define NCCL_VERSION_CODE 22809
#define NCCL_VERSION(X, Y, Z) (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))

#ifdef __cplusplus
extern "C" {
#endif

/* Ours, not NCCL's (hence the prefix): exports these calls from a library
 * built with hidden visibility. */
#if defined(__GNUC__) || defined(__clang__)
#define MSCCLPP_NCCL_API __attribute__((visibility("default")))
#else
#define MSCCLPP_NCCL_API
#endif

/* cudaStream_t (the CUDA runtime's own typedef: repeating it is allowed). */
struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;

/* Opaque handle to a communicator. */
typedef struct ncclComm* ncclComm_t;
/* Opaque handle to a registered memory window. */
typedef struct ncclWindow_vidmem* ncclWindow_t;
#define NCCL_COMM_NULL NULL

#define NCCL_UNIQUE_ID_BYTES 128
/* The rendezvous address and a random job secret (mscclppUniqueId). */
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

/* Status codes (mscclppTimeout and mscclppAborted are reported as
 * ncclRemoteError: NCCL has no codes for them). */
typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_UNDEF_FLOAT -1.0f

/* Window registration flags. */
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

/* Performance policy (accepted, not used). */
#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02

/* ncclCommShrink flags. */
#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01

/* ncclCommRevoke flags. */
#define NCCL_REVOKE_DEFAULT 0x00

/* Communicator configuration, laid out as NCCL 2.28's ncclConfig_v22800.
 * Only `blocking` changes what mscclpp does (0: init and split return
 * ncclInProgress and finish in the background); `commName` is kept for log
 * lines; the other fields are accepted and ignored. Initialize it with
 * NCCL_CONFIG_INITIALIZER. */
typedef struct ncclConfig_v22800 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;
  const char* commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
} ncclConfig_t;

/* ncclConfig_t.magic; NVIDIA's header writes the number in the
 * initializer and has no name for it. */
#define MSCCLPP_NCCL_CONFIG_MAGIC 0xcafebeef

#define NCCL_CONFIG_INITIALIZER                                                                        \
  {                                                                                                    \
    sizeof(ncclConfig_t), MSCCLPP_NCCL_CONFIG_MAGIC, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,    \
        NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR,    \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,    \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT                                                   \
  }

/* Filled by ncclGroupSimulateEnd (not supported). */
typedef struct ncclSimInfo_v22200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime;
} ncclSimInfo_t;

#define NCCL_SIM_INFO_INITIALIZER \
  { sizeof(ncclSimInfo_t), 0x74685283, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), NCCL_UNDEF_FLOAT }

/* Reduction operators: the built-in ones, then handles made by
 * ncclRedOpCreatePreMulSum (>= ncclNumOps). */
typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5,
  ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

/* Element types. */
typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

/* Where the scalar of ncclRedOpCreatePreMulSum lives. */
typedef enum {
  ncclScalarDevice = 0,       /* device memory, read while the collective runs */
  ncclScalarHostImmediate = 1 /* host memory, read before the create call returns */
} ncclScalarResidence_t;

/* ---- memory ------------------------------------------------------------------ */

/* cudaMalloc on the current device (host memory, zeroed, without a GPU);
 * free with ncclMemFree. ncclInvalidArgument (NULL ptr, size 0),
 * ncclUnhandledCudaError / ncclSystemError when allocation fails. */
MSCCLPP_NCCL_API ncclResult_t ncclMemAlloc(void** ptr, size_t size);
/* Free what ncclMemAlloc returned; NULL is accepted. ncclInvalidArgument for
 * a pointer ncclMemAlloc did not return. */
MSCCLPP_NCCL_API ncclResult_t ncclMemFree(void* ptr);

/* ---- library and communicators ------------------------------------------------ */

/* NCCL_VERSION_CODE of the NCCL API implemented: 22809 (2.28.9). */
MSCCLPP_NCCL_API ncclResult_t ncclGetVersion(int* version);

/* A new id (mscclppGetUniqueId: this process serves the rendezvous; keep it
 * alive until every rank has joined). */
MSCCLPP_NCCL_API ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);

/* Join communicator `commId` as `rank` of `nranks`. With config->blocking
 * == 0 it returns ncclInProgress at once and the join goes on in the
 * background: poll ncclCommGetAsyncError until it is not ncclInProgress
 * (other calls on the communicator wait for the join). Inside
 * ncclGroupStart/End the join happens at ncclGroupEnd, so one thread may
 * create several ranks (one per device). Several ranks may use one GPU.
 * Errors: ncclInvalidArgument (NULL comm, rank or nranks out of range, a
 * config without NCCL_CONFIG_INITIALIZER's magic), ncclRemoteError (another
 * rank failed or the rendezvous timed out after MSCCLPP_TIMEOUT),
 * ncclSystemError. */
MSCCLPP_NCCL_API ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                                     ncclConfig_t* config);
MSCCLPP_NCCL_API ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);

/* nranks > 1 ids (NCCL's scalable init): mscclpp uses commIds[0] (every
 * rank must pass the same list); the others are ignored. */
MSCCLPP_NCCL_API ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                                       ncclUniqueId* commIds, ncclConfig_t* config);

/* ndev communicators of one process, rank i on devlist[i] (or device i when
 * devlist is NULL; without a GPU all on the host backend), made by ndev
 * threads. comm holds ndev handles. */
MSCCLPP_NCCL_API ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);

/* Mark the communicator finished (nothing to flush: every call has been
 * enqueued or run); ncclCommDestroy frees it. ncclInvalidArgument after
 * ncclCommRevoke; accepted on the parent of a shrink with
 * NCCL_SHRINK_ABORT (PyTorch releases that parent with finalize, then
 * destroy). */
MSCCLPP_NCCL_API ncclResult_t ncclCommFinalize(ncclComm_t comm);

/* Free the communicator (waits for a background init or split first, at
 * most MSCCLPP_TIMEOUT). Safe after a peer failure. */
MSCCLPP_NCCL_API ncclResult_t ncclCommDestroy(ncclComm_t comm);

/* Abort the communicator's waits (every rank's pending operations fail) and
 * free it. Returns at once even while a background init is running (that
 * init frees its result when it ends). */
MSCCLPP_NCCL_API ncclResult_t ncclCommAbort(ncclComm_t comm);

/* Stop every operation in flight on comm, on this rank (mscclppCommRevoke):
 * a blocking communicator returns once nothing runs on it, a nonblocking
 * one may return ncclInProgress and ncclCommGetAsyncError then says
 * ncclInProgress until it is quiescent, then ncclSuccess. Afterwards its
 * collectives and send/recv return ncclInvalidUsage; shrink, split and
 * destroy work; finalize is ncclInvalidArgument. NULL is ncclSuccess;
 * revokeFlags other than NCCL_REVOKE_DEFAULT, or a second revoke, are
 * ncclInvalidArgument. */
MSCCLPP_NCCL_API ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags);

/* Split by color (NCCL_SPLIT_NOCOLOR: *newcomm = NULL), ordered by key then
 * parent rank. Every rank of `comm` calls it. config NULL inherits the
 * parent's blocking mode. The new communicator is a full mscclpp
 * communicator with its own rendezvous (its lowest parent rank serves it).
 * Errors as ncclCommInitRankConfig, plus the parent's bootstrap errors. */
MSCCLPP_NCCL_API ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                                            ncclConfig_t* config);

/* A communicator of the ranks not in excludeRanksList (in parent order),
 * made by those ranks alone (mscclppCommShrink: no new id, nothing from the
 * excluded ranks, rank 0 among them or not). Only those ranks call it, with
 * the same list. NCCL_SHRINK_ABORT: after a failure; the parent is revoked
 * first (then destroy it, with or without ncclCommFinalize). NCCL_SHRINK_DEFAULT: a healthy or revoked parent (a failed one is
 * ncclInvalidUsage, pointing to NCCL_SHRINK_ABORT). config NULL inherits
 * the parent's blocking mode; nonblocking returns ncclInProgress. Errors:
 * ncclInvalidArgument (a bad list or flags), ncclInvalidUsage (lists that
 * differ between ranks, named), ncclRemoteError (a member lost during the
 * shrink: shrink the parent again without it). */
MSCCLPP_NCCL_API ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                                             ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags);

/* A fixed name for each status. */
MSCCLPP_NCCL_API const char* ncclGetErrorString(ncclResult_t result);

/* The text of the last failure: the communicator's (its background init or
 * asynchronous error) when comm is not NULL and it has one, else the
 * calling thread's. Empty when none. */
MSCCLPP_NCCL_API const char* ncclGetLastError(ncclComm_t comm);

/* Reload NCCL_DEBUG / MSCCLPP_DEBUG and friends. */
MSCCLPP_NCCL_API void ncclResetDebugInit(void);

/* ncclInProgress while a background init/split runs; then its result, or
 * the communicator's first asynchronous error (a lost peer, a timeout, an
 * abort), or ncclSuccess. */
MSCCLPP_NCCL_API ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);

/* Number of ranks, CUDA device (-1 on the host backend), rank. */
MSCCLPP_NCCL_API ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
MSCCLPP_NCCL_API ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device);
MSCCLPP_NCCL_API ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);

/* Buffer registration. mscclpp's collectives take any buffer without it, so
 * a registration only records the range (the handle is checked and freed
 * by ncclCommDeregister). ncclInvalidArgument for NULL arguments. */
MSCCLPP_NCCL_API ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
MSCCLPP_NCCL_API ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle);

/* Window registration: records the range as above (collectives on a window
 * behave as on any buffer; NCCL_WIN_COLL_SYMMETRIC kernels are not used). */
MSCCLPP_NCCL_API ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                                     int winFlags);
MSCCLPP_NCCL_API ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);

/* ---- reduction operators --------------------------------------------------------- */

/* An operator that multiplies this rank's input by *scalar (of `datatype`),
 * then sums. For collectives of `comm` on `datatype` only. Up to 1024 live
 * operators per communicator. */
MSCCLPP_NCCL_API ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                                       ncclScalarResidence_t residence, ncclComm_t comm);
MSCCLPP_NCCL_API ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);

/* ---- collectives -----------------------------------------------------------------
 * As NCCL (and mscclpp/coll.h): buffers in device memory (host memory on the
 * host backend), enqueued on `stream`. Inside ncclGroupStart/End they run
 * at ncclGroupEnd. */
MSCCLPP_NCCL_API ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                         ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);
MSCCLPP_NCCL_API ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                                        cudaStream_t stream);
MSCCLPP_NCCL_API ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                            int root, ncclComm_t comm, cudaStream_t stream);
MSCCLPP_NCCL_API ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                            ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
MSCCLPP_NCCL_API ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                                ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                                cudaStream_t stream);
MSCCLPP_NCCL_API ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                            ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
MSCCLPP_NCCL_API ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                           ncclComm_t comm, cudaStream_t stream);
/* Gather and scatter run as grouped sends and receives. */
MSCCLPP_NCCL_API ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                         int root, ncclComm_t comm, cudaStream_t stream);
MSCCLPP_NCCL_API ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                          int root, ncclComm_t comm, cudaStream_t stream);
MSCCLPP_NCCL_API ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                                       ncclComm_t comm, cudaStream_t stream);
MSCCLPP_NCCL_API ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                                       cudaStream_t stream);

/* ---- groups -------------------------------------------------------------------------
 * Calls between ncclGroupStart and the outermost ncclGroupEnd (they nest)
 * are recorded and run at ncclGroupEnd: inits first (concurrently), then
 * each communicator's operations in call order, the communicators
 * concurrently (one thread each when there are several), the sends and
 * receives of a communicator as one mscclpp group (any pattern, no
 * deadlock). ncclGroupEnd returns the first error. */
MSCCLPP_NCCL_API ncclResult_t ncclGroupStart(void);
MSCCLPP_NCCL_API ncclResult_t ncclGroupEnd(void);
/* Not supported (there is no cost model to simulate): ends the group
 * without running it and returns ncclInvalidUsage. */
MSCCLPP_NCCL_API ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo);

#ifdef __cplusplus
}
#endif

#endif /* NCCL_H_ */
