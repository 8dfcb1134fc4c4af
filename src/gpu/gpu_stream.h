/* SPDX-License-Identifier: MIT */
/*
 * The gpu layer's one stream object (private to src/gpu/): the library's
 * stream of one device (mscclppGpuIpcProcessStream) and what the device can
 * do on it, one object per device made at first use and kept for the
 * process's life, or the host backend's token. gpu.h's mscclppGpuStream_t
 * and the transport's struct mscclppGpuIpcStream (gpu_ipc.h) are both
 * pointers to it; the tag keeps the transport's spelling until its call
 * sites use gpu.h's name.
 */
#ifndef MSCCLPP_SRC_GPU_GPU_STREAM_H_
#define MSCCLPP_SRC_GPU_GPU_STREAM_H_

#ifdef MSCCLPP_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

struct mscclppGpuIpcStream {
  int device;          /* MSCCLPP_HOST_BACKEND_DEVICE: the host backend's token (operations complete at once) */
  int canWriteValue64; /* cuStreamWriteValue64 usable on this device */
#ifdef MSCCLPP_HAVE_CUDA
  cudaStream_t stream; /* NULL until made */
#endif
};

#endif /* MSCCLPP_SRC_GPU_GPU_STREAM_H_ */
