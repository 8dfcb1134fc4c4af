# SPDX-License-Identifier: MIT
"""Kernels of your own over mscclpp memory channels, from CuPy.

    MSCCLPP_LIBRARY=$PWD/build/libmscclpp.so PYTHONPATH=$PWD/python \\
        mscclpp-run -n 2 --mps -- python3 python/examples/cupy_channels.py

Each rank registers one CuPy array (data, then a scratch slot per rank),
builds a memory channel to every peer and copies the channels' device
handles (bytes) to the GPU. Two kernels, compiled at run time against the
library's device headers (``mscclpp.include_dir()``):

- ``pingpong``: a signal/wait round trip with one peer, timed;
- ``allreduce``: every rank puts its data into its slot of each peer's
  scratch, signals, waits for every peer's data, adds it up, then signals
  and waits once more so that no rank overwrites a scratch still being read.

The allreduce result is checked exactly (small integers in float32); the
script exits 1 on a wrong value. Ranks share GPUs round-robin (several on
one GPU need CUDA MPS).
"""

from __future__ import annotations

import os
import sys

import cupy as cp
import numpy as np

import mscclpp

SOURCE = r"""
#include <mscclpp/memory_channel_device.h>

extern "C" __global__ void pingpong(const mscclppMemoryChannelDeviceHandle* ch, int iters, int first) {
  if (threadIdx.x != 0) return;
  for (int i = 0; i < iters; i++) {
    if (first) {
      mscclppMemoryChannelDeviceSignal(ch);
      mscclppMemoryChannelDeviceWait(ch);
    } else {
      mscclppMemoryChannelDeviceWait(ch);
      mscclppMemoryChannelDeviceSignal(ch);
    }
  }
}

/* buf: n floats of data, then a slot of n floats per rank (scratch).
 * chans[k] is the channel to the k-th peer (ranks in order, this one left out). */
extern "C" __global__ void allreduce(const mscclppMemoryChannelDeviceHandle* chans, int npeers, int rank, int n) {
  const uint64_t bytes = (uint64_t)n * sizeof(float);
  for (int k = 0; k < npeers; k++)  /* this rank's data into its slot of every peer's scratch */
    mscclppMemoryChannelDevicePut(&chans[k], bytes * (1 + rank), 0, bytes, threadIdx.x, blockDim.x);
  __syncthreads();
  if (threadIdx.x < npeers) {
    mscclppMemoryChannelDeviceSignal(&chans[threadIdx.x]);
    mscclppMemoryChannelDeviceWait(&chans[threadIdx.x]);
  }
  __syncthreads();
  float* data = (float*)chans[0].src;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    float s = data[i];
    for (int k = 0; k <= npeers; k++)
      if (k != rank) s += data[(size_t)n * (1 + k) + i];
    data[i] = s;
  }
  __syncthreads();
  if (threadIdx.x < npeers) {  /* every peer has read what this rank put: its scratch may be reused */
    mscclppMemoryChannelDeviceSignal(&chans[threadIdx.x]);
    mscclppMemoryChannelDeviceWait(&chans[threadIdx.x]);
  }
}
"""


def main() -> int:
    # the device first: the communicator's channels belong to the current one
    ndev = cp.cuda.runtime.getDeviceCount()
    local = int(os.environ.get("MSCCLPP_LOCAL_RANK", "0"))
    cp.cuda.Device(local % ndev).use()
    comm = mscclpp.Communicator.from_env()
    R, N = comm.rank, comm.size
    n = 1 << 16
    buf = cp.zeros(n * (1 + N), dtype=cp.float32)
    mem = comm.register_memory(buf)
    peers = [p for p in range(N) if p != R]
    conns = [comm.connect(p, tag=0) for p in peers]
    chans = [mscclpp.MemoryChannel(comm, c, mem, tag=1) for c in conns]
    handles = cp.asarray(np.frombuffer(b"".join(ch.device_handle() for ch in chans), dtype=np.uint8))
    size = len(chans[0].device_handle()) if chans else 0

    mod = cp.RawModule(code=SOURCE, options=("-I" + mscclpp.include_dir(), "-std=c++17"), backend="nvcc")
    pingpong = mod.get_function("pingpong")
    allreduce = mod.get_function("allreduce")

    bad = 0
    # ping-pong between ranks 0 and 1 (the others wait at the barrier)
    if R < 2 and N >= 2:
        ch = handles[peers.index(1 - R) * size:]  # the channel to the other of ranks 0 and 1
        iters = 1000
        start, end = cp.cuda.Event(), cp.cuda.Event()
        pingpong((1,), (32,), (ch, np.int32(10), np.int32(R == 0)))  # warm up
        start.record()
        pingpong((1,), (32,), (ch, np.int32(iters), np.int32(R == 0)))
        end.record()
        end.synchronize()
        us = cp.cuda.get_elapsed_time(start, end) * 1000 / iters
        if R == 0:
            print(f"pingpong: {us:.2f} us per round trip (signal + wait, {iters} round trips)", flush=True)
    comm.barrier()

    for it in range(5):
        buf[:n] = (cp.arange(n, dtype=cp.float32) % 7) + R + it
        allreduce((1,), (512,), (handles, np.int32(len(peers)), np.int32(R), np.int32(n)))
        got = cp.asnumpy(buf[:n])
        want = (np.arange(n, dtype=np.float32) % 7) * N + sum(range(N)) + N * it
        if not np.array_equal(got, want):
            i = int(np.nonzero(got != want)[0][0])
            print(f"rank {R}: allreduce #{it} WRONG at {i}: got {got[i]}, want {want[i]}", flush=True)
            bad += 1
    print(f"rank {R}: allreduce over {len(chans)} memory channels: {'ok' if not bad else 'WRONG'} "
          f"(5 calls of {n} floats)", flush=True)
    comm.barrier()
    for ch in chans:
        ch.destroy()
    for c in conns:
        c.destroy()
    mem.close()
    comm.destroy()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
