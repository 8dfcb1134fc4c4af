/* SPDX-License-Identifier: MIT */
/*
 * What NCCL lets a program ask: the library's version, and of a
 * communicator its asynchronous error, size, device and rank.
 */
#include <stdio.h>

#include "comm/comm.h"
#include "nccl/nccl_internal.h"

ncclResult_t ncclGetVersion(int* version) {
  if (version == NULL) return mscclppNcclErr(ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}
NCCL_PROFILING_ALIAS(ncclGetVersion);

/* ---- queries -------------------------------------------------------------------------- */

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  static const char fn[] = "ncclCommGetAsyncError";
  ncclResult_t res = mscclppNcclCommCheck(comm, fn);
  if (res != ncclSuccess) return res;
  if (asyncError == NULL) return mscclppNcclErr(ncclInvalidArgument, "%s: asyncError is NULL", fn);
  pthread_mutex_lock(&comm->lock);
  ncclResult_t state = comm->initState;
  mscclppComm_t mc = comm->mc;
  pthread_mutex_unlock(&comm->lock);
  if (state != ncclSuccess) {
    *asyncError = state;
    return ncclSuccess;
  }
  pthread_mutex_lock(&comm->lock);
  int revoked = comm->revoked;
  pthread_mutex_unlock(&comm->lock);
  if (revoked) { /* NCCL: in progress until quiescent, then success */
    *asyncError = mscclppCommRevoke(mc, MSCCLPP_REVOKE_DEFAULT) == mscclppInProgress ? ncclInProgress : ncclSuccess;
    return ncclSuccess;
  }
  mscclppResult_t e = mscclppSuccess;
  mscclppResult_t r = mscclppCommGetAsyncError(mc, &e);
  if (r != mscclppSuccess) return mscclppNcclFromMscclpp(r);
  if (e != mscclppSuccess) {
    pthread_mutex_lock(&comm->lock);
    if (comm->initError[0] == '\0') snprintf(comm->initError, sizeof(comm->initError), "%s", mscclppGetLastError());
    pthread_mutex_unlock(&comm->lock);
  } else if (comm->real != NULL) {
    ncclResult_t (*realAsync)(void*, ncclResult_t*) =
        (ncclResult_t(*)(void*, ncclResult_t*))mscclppNcclFallbackSymbol("ncclCommGetAsyncError");
    ncclResult_t re = ncclSuccess;
    if (realAsync != NULL && realAsync(comm->real, &re) == ncclSuccess && re != ncclSuccess &&
        re != ncclInProgress) {
      *asyncError = re;
      return ncclSuccess;
    }
  }
  *asyncError = mscclppNcclFromMscclpp(e);
  return ncclSuccess;
}
NCCL_PROFILING_ALIAS(ncclCommGetAsyncError);

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  ncclResult_t res = mscclppNcclCommCheck(comm, "ncclCommCount");
  if (res != ncclSuccess) return res;
  if (count == NULL) return mscclppNcclErr(ncclInvalidArgument, "ncclCommCount: count is NULL");
  *count = comm->nranks;
  return ncclSuccess;
}
NCCL_PROFILING_ALIAS(ncclCommCount);

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  ncclResult_t res = mscclppNcclCommCheck(comm, "ncclCommCuDevice");
  if (res != ncclSuccess) return res;
  if (device == NULL) return mscclppNcclErr(ncclInvalidArgument, "ncclCommCuDevice: device is NULL");
  *device = comm->device;
  return ncclSuccess;
}
NCCL_PROFILING_ALIAS(ncclCommCuDevice);

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  ncclResult_t res = mscclppNcclCommCheck(comm, "ncclCommUserRank");
  if (res != ncclSuccess) return res;
  if (rank == NULL) return mscclppNcclErr(ncclInvalidArgument, "ncclCommUserRank: rank is NULL");
  *rank = comm->rank;
  return ncclSuccess;
}
NCCL_PROFILING_ALIAS(ncclCommUserRank);
