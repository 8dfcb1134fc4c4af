#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The GPU multi-process transport test: N ranks (sharing the GPUs, under MPS
# when nvidia-cuda-mps-control exists) exchange cudaMalloc, cuMem and pinned
# host memory and write into each other's with the CudaIpc transport.
#
#   run_gpu.sh path/to/mscclpp-run path/to/mscclpp-info path/to/transport_worker N
set -u
RUN=${1:?mscclpp-run}
INFO=${2:?mscclpp-info}
WORKER=${3:?transport_worker}
N=${4:-2}
if ! "$INFO" | grep -E '^GPUs: [1-9]' >/dev/null; then
  echo "SKIPPED: needs a GPU"
  exit 77
fi
MPS=--mps
if ! command -v nvidia-cuda-mps-control >/dev/null; then
  echo "note: nvidia-cuda-mps-control not found; ranks sharing a GPU will time-slice"
  MPS=
fi
exec "$RUN" -n "$N" $MPS --timeout 110 -- "$WORKER" gpu
