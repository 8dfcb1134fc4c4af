# SPDX-License-Identifier: MIT
"""Communicator.all_to_all_v on the GPU with CuPy arrays: the counts live in
device memory and the call's result counts are read back only after the
stream is synchronised. Run with mscclpp-run -n N (N >= 2) on a GPU machine
(scripts/gpu-run.sh); checked exactly, twice with different counts.
"""

from __future__ import annotations

import sys

import cupy as cp
import numpy as np

import mscclpp

comm = mscclpp.Communicator.from_env()
R, N = comm.rank, comm.size
stream = cp.cuda.Stream(non_blocking=True)
bad = 0
for round_ in range(2):
    def cnt(r, d):
        return 1000 * ((r + 2 * d + round_) % 3) + 17 * r + d + 1

    sc = np.array([cnt(R, d) for d in range(N)], dtype=np.uint64)
    sd = np.concatenate([[0], np.cumsum(sc + 5)[:-1]]).astype(np.uint64)  # gaps of 5 elements
    send = np.full(int(sd[-1] + sc[-1]), -1, dtype=np.float32)
    for d in range(N):
        send[int(sd[d]):int(sd[d] + sc[d])] = R * 100000 + d * 1000 + np.arange(sc[d]) % 997
    want = np.concatenate([s * 100000 + R * 1000 + np.arange(cnt(s, R)) % 997 for s in range(N)]).astype(np.float32)
    with stream:
        dsend = cp.asarray(send)
        dsc, dsd = cp.asarray(sc), cp.asarray(sd)
        drecv = cp.full(len(want) + 64, 7.0, dtype=cp.float32)
        drc = cp.full(N, 77, dtype=cp.uint64)
        drd = cp.full(N, 77, dtype=cp.uint64)
    comm.all_to_all_v(dsend, dsc, dsd, drecv, drc, drd, stream=stream.ptr)
    stream.synchronize()
    got = cp.asnumpy(drecv)
    ok = np.array_equal(got[: len(want)], want) and bool(np.all(got[len(want):] == 7.0))
    ok = ok and cp.asnumpy(drc).tolist() == [cnt(s, R) for s in range(N)]
    ok = ok and cp.asnumpy(drd).tolist() == [sum(cnt(j, R) for j in range(s)) for s in range(N)]
    if not ok:
        bad += 1
        print(f"rank {R}: all_to_all_v round {round_}: WRONG (recvcounts {cp.asnumpy(drc).tolist()})", flush=True)
err = comm.async_error()
comm.destroy()
print(f"rank {R}: all_to_all_v on the GPU, {N} ranks: {'ok' if bad == 0 and err == mscclpp.Status.SUCCESS else 'FAILED'}",
      flush=True)
sys.exit(0 if bad == 0 and err == mscclpp.Status.SUCCESS else 1)
