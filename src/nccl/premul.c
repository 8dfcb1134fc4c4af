/* SPDX-License-Identifier: MIT */
/*
 * PreMulSum operators (ncclRedOpCreatePreMulSum): a per-communicator table
 * of scalars, scaling on the host backend (a loop; 16-bit and 8-bit floats
 * through float with the host backend's conversions, coll_host_reduce.h),
 * scaling on a GPU (premul_kernels.cu), and the temporary
 * buffer the scaled input goes to.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coll/host/coll_host_reduce.h"
#include "core/error.h"
#include "core/log.h"
#include "nccl/nccl_internal.h"

#ifdef MSCCLPP_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

/* ---- the operator table ---------------------------------------------------------- */

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  static const char fn[] = "ncclRedOpCreatePreMulSum";
  ncclResult_t res = mscclppNcclCommCheck(comm, fn);
  if (res != ncclSuccess) return res;
  if (op == NULL || scalar == NULL)
    return mscclppNcclErr(ncclInvalidArgument, "%s: op %p or scalar %p is NULL", fn, (void*)op, scalar);
  size_t ts = mscclppDataTypeSize((mscclppDataType_t)datatype);
  if (ts == 0) return mscclppNcclErr(ncclInvalidArgument, "%s: unknown data type %d", fn, (int)datatype);
  if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate)
    return mscclppNcclErr(ncclInvalidArgument, "%s: unknown scalar residence %d", fn, (int)residence);
  pthread_mutex_lock(&comm->lock);
  int slot = -1;
  for (int i = 0; i < MSCCLPP_NCCL_MAX_USER_OPS && slot < 0; i++)
    if (!comm->ops[i].live) slot = i;
  if (slot >= 0) {
    struct mscclppNcclUserOp* u = &comm->ops[slot];
    memset(u, 0, sizeof(*u));
    u->live = 1;
    u->type = datatype;
    u->residence = residence;
    if (residence == ncclScalarHostImmediate)
      memcpy(u->value, scalar, ts);
    else
      u->devicePointer = scalar;
  }
  pthread_mutex_unlock(&comm->lock);
  if (slot < 0)
    return mscclppNcclErr(ncclInvalidUsage, "%s: %d operators are alive on this communicator; destroy some first", fn,
                          MSCCLPP_NCCL_MAX_USER_OPS);
  *op = (ncclRedOp_t)((int)ncclNumOps + slot);
  return ncclSuccess;
}
NCCL_PROFILING_ALIAS(ncclRedOpCreatePreMulSum);

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  static const char fn[] = "ncclRedOpDestroy";
  ncclResult_t res = mscclppNcclCommCheck(comm, fn);
  if (res != ncclSuccess) return res;
  int slot = (int)op - (int)ncclNumOps;
  if ((int)op < (int)ncclNumOps)
    return mscclppNcclErr(ncclInvalidArgument, "%s: operator %d is built in, not one of ncclRedOpCreatePreMulSum's", fn,
                          (int)op);
  pthread_mutex_lock(&comm->lock);
  int live = slot < MSCCLPP_NCCL_MAX_USER_OPS && comm->ops[slot].live;
  if (live) comm->ops[slot].live = 0;
  pthread_mutex_unlock(&comm->lock);
  if (!live)
    return mscclppNcclErr(ncclInvalidArgument, "%s: operator %d is not a live operator of this communicator", fn,
                          (int)op);
  return ncclSuccess;
}
NCCL_PROFILING_ALIAS(ncclRedOpDestroy);

ncclResult_t mscclppNcclUserOpGet(struct ncclComm* comm, ncclRedOp_t op, ncclDataType_t type, const char* fn,
                                  struct mscclppNcclUserOp* out, int* isUser) {
  *isUser = 0;
  if ((int)op < (int)ncclNumOps) return ncclSuccess; /* built in (mscclpp checks its range) */
  int slot = (int)op - (int)ncclNumOps;
  pthread_mutex_lock(&comm->lock);
  int live = slot < MSCCLPP_NCCL_MAX_USER_OPS && comm->ops[slot].live;
  if (live) *out = comm->ops[slot];
  pthread_mutex_unlock(&comm->lock);
  if (!live)
    return mscclppNcclErr(ncclInvalidArgument, "%s: reduction operator %d is not a live operator of this communicator",
                          fn, (int)op);
  if (out->type != type)
    return mscclppNcclErr(ncclInvalidArgument, "%s: operator %d was created for %s, used with %s", fn, (int)op,
                          mscclppDataTypeName((mscclppDataType_t)out->type),
                          mscclppDataTypeName((mscclppDataType_t)type));
  *isUser = 1;
  return ncclSuccess;
}

/* ---- host scaling ------------------------------------------------------------------ */

static ncclResult_t scaleHost(ncclDataType_t type, void* dst, const void* src, size_t n, const void* scalar) {
#define SCALE_INT(T, UT)                                                        \
  do {                                                                          \
    T s;                                                                        \
    memcpy(&s, scalar, sizeof(T));                                              \
    const T* in = (const T*)src;                                                \
    T* out = (T*)dst;                                                           \
    for (size_t i = 0; i < n; i++) out[i] = (T)((UT)in[i] * (UT)s);             \
  } while (0)
  switch (type) {
    case ncclInt8: SCALE_INT(int8_t, uint8_t); break;
    case ncclUint8: SCALE_INT(uint8_t, uint8_t); break;
    case ncclInt32: SCALE_INT(int32_t, uint32_t); break;
    case ncclUint32: SCALE_INT(uint32_t, uint32_t); break;
    case ncclInt64: SCALE_INT(int64_t, uint64_t); break;
    case ncclUint64: SCALE_INT(uint64_t, uint64_t); break;
    case ncclFloat32: {
      float s;
      memcpy(&s, scalar, 4);
      for (size_t i = 0; i < n; i++) ((float*)dst)[i] = ((const float*)src)[i] * s;
      break;
    }
    case ncclFloat64: {
      double s;
      memcpy(&s, scalar, 8);
      for (size_t i = 0; i < n; i++) ((double*)dst)[i] = ((const double*)src)[i] * s;
      break;
    }
    case ncclFloat16:
    case ncclBfloat16: {
      uint16_t sb;
      memcpy(&sb, scalar, 2);
      int bf = type == ncclBfloat16;
      float s = bf ? mscclppBf16ToFloat(sb) : mscclppHalfToFloat(sb);
      const uint16_t* in = (const uint16_t*)src;
      uint16_t* out = (uint16_t*)dst;
      for (size_t i = 0; i < n; i++)
        out[i] = bf ? mscclppFloatToBf16(mscclppBf16ToFloat(in[i]) * s) : mscclppFloatToHalf(mscclppHalfToFloat(in[i]) * s);
      break;
    }
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: {
      int e5 = type == ncclFloat8e5m2;
      uint8_t sb = *(const uint8_t*)scalar;
      float s = e5 ? mscclppFp8e5m2ToFloat(sb) : mscclppFp8e4m3ToFloat(sb);
      const uint8_t* in = (const uint8_t*)src;
      uint8_t* out = (uint8_t*)dst;
      for (size_t i = 0; i < n; i++)
        out[i] = e5 ? mscclppFloatToFp8e5m2(mscclppFp8e5m2ToFloat(in[i]) * s)
                    : mscclppFloatToFp8e4m3(mscclppFp8e4m3ToFloat(in[i]) * s);
      break;
    }
    default: return mscclppNcclErr(ncclInvalidArgument, "PreMulSum: unknown data type %d", (int)type);
  }
#undef SCALE_INT
  return ncclSuccess;
}

ncclResult_t mscclppNcclScale(struct ncclComm* comm, const struct mscclppNcclUserOp* uop, void* dst, const void* src,
                              size_t count, cudaStream_t stream) {
  if (comm->device < 0) {
    (void)stream;
    const void* scalar = uop->residence == ncclScalarHostImmediate ? (const void*)uop->value : uop->devicePointer;
    return scaleHost(uop->type, dst, src, count, scalar);
  }
#ifdef MSCCLPP_HAVE_CUDA
  int e = mscclppNcclScaleGpu((int)uop->type, dst, src, count, uop->value,
                              uop->residence == ncclScalarDevice ? uop->devicePointer : NULL, stream);
  if (e != 0)
    return mscclppNcclErr(ncclUnhandledCudaError, "PreMulSum: launching the scaling kernel failed: %s",
                          cudaGetErrorString((cudaError_t)e));
  return ncclSuccess;
#else
  return mscclppNcclErr(ncclInternalError, "PreMulSum: a GPU communicator in a build without CUDA");
#endif
}

ncclResult_t mscclppNcclTempAlloc(struct ncclComm* comm, size_t bytes, cudaStream_t stream, void** ptr) {
  if (comm->device < 0) {
    *ptr = malloc(bytes);
    if (*ptr == NULL) return mscclppNcclErr(ncclSystemError, "PreMulSum: out of memory for %zu bytes", bytes);
    return ncclSuccess;
  }
#ifdef MSCCLPP_HAVE_CUDA
  cudaError_t e = cudaMallocAsync(ptr, bytes, (cudaStream_t)stream);
  if (e != cudaSuccess)
    return mscclppNcclErr(ncclUnhandledCudaError, "PreMulSum: cudaMallocAsync(%zu) failed: %s", bytes,
                          cudaGetErrorString(e));
  return ncclSuccess;
#else
  (void)stream;
  return mscclppNcclErr(ncclInternalError, "PreMulSum: a GPU communicator in a build without CUDA");
#endif
}

void mscclppNcclTempFree(struct ncclComm* comm, void* ptr, cudaStream_t stream) {
  if (ptr == NULL) return;
  if (comm->device < 0) {
    free(ptr);
    return;
  }
#ifdef MSCCLPP_HAVE_CUDA
  (void)cudaFreeAsync(ptr, (cudaStream_t)stream);
#else
  (void)stream;
#endif
}
