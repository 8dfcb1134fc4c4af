/* SPDX-License-Identifier: MIT */
/*
 * PreMulSum on the GPU: dst[i] = src[i] * scalar, one generic body
 * instantiated per element type (16- and 8-bit floats computed in float,
 * integers with wrap-around, fp8 converted back with saturation to the
 * largest finite value, as the host backend does in premul.c). The scalar
 * is the launch argument, or read by every thread from device memory
 * (ncclScalarDevice).
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Element type T computed in C (and held as bits B in the launch). */
struct ScaleI8 { typedef int8_t T; typedef uint8_t C; };
struct ScaleU8 { typedef uint8_t T; typedef uint8_t C; };
struct ScaleI32 { typedef int32_t T; typedef uint32_t C; };
struct ScaleU32 { typedef uint32_t T; typedef uint32_t C; };
struct ScaleI64 { typedef int64_t T; typedef uint64_t C; };
struct ScaleU64 { typedef uint64_t T; typedef uint64_t C; };
struct ScaleF16 { typedef __half T; typedef float C; };
struct ScaleF32 { typedef float T; typedef float C; };
struct ScaleF64 { typedef double T; typedef double C; };
struct ScaleBF16 { typedef __nv_bfloat16 T; typedef float C; };
struct ScaleE4M3 { typedef __nv_fp8_e4m3 T; typedef float C; };
struct ScaleE5M2 { typedef __nv_fp8_e5m2 T; typedef float C; };

template <typename S>
__global__ void scaleKernel(typename S::T* dst, const typename S::T* src, size_t n, typename S::T hostScalar,
                            const typename S::T* devScalar) {
  typedef typename S::T T;
  typedef typename S::C C;
  const C s = (C)(devScalar != NULL ? *devScalar : hostScalar);
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    dst[i] = (T)((C)src[i] * s);
}

template <typename S>
static int launch(void* dst, const void* src, size_t n, const void* value, const void* devicePointer,
                  cudaStream_t stream) {
  typedef typename S::T T;
  T hostScalar;
  memcpy((void*)&hostScalar, value, sizeof(T));
  const unsigned threads = 512;
  size_t blocks = (n + threads - 1) / threads;
  if (blocks > 1024) blocks = 1024;
  if (blocks == 0) return 0;
  scaleKernel<S><<<(unsigned)blocks, threads, 0, stream>>>((T*)dst, (const T*)src, n, hostScalar,
                                                            (const T*)devicePointer);
  return (int)cudaGetLastError();
}

extern "C" int mscclppNcclScaleGpu(int type, void* dst, const void* src, size_t count, const void* value,
                                   const void* devicePointer, void* stream) {
  cudaStream_t s = (cudaStream_t)stream;
  switch (type) {
    case 0: return launch<ScaleI8>(dst, src, count, value, devicePointer, s);
    case 1: return launch<ScaleU8>(dst, src, count, value, devicePointer, s);
    case 2: return launch<ScaleI32>(dst, src, count, value, devicePointer, s);
    case 3: return launch<ScaleU32>(dst, src, count, value, devicePointer, s);
    case 4: return launch<ScaleI64>(dst, src, count, value, devicePointer, s);
    case 5: return launch<ScaleU64>(dst, src, count, value, devicePointer, s);
    case 6: return launch<ScaleF16>(dst, src, count, value, devicePointer, s);
    case 7: return launch<ScaleF32>(dst, src, count, value, devicePointer, s);
    case 8: return launch<ScaleF64>(dst, src, count, value, devicePointer, s);
    case 9: return launch<ScaleBF16>(dst, src, count, value, devicePointer, s);
    case 10: return launch<ScaleE4M3>(dst, src, count, value, devicePointer, s);
    case 11: return launch<ScaleE5M2>(dst, src, count, value, devicePointer, s);
    default: return (int)cudaErrorInvalidValue;
  }
}
