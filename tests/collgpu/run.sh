#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run.sh mscclpp-run mscclpp-info coll_gpu_worker N [worker args]: N ranks
# sharing the GPU(s) (under MPS when available); exit 77 without a GPU.
set -u
RUN=$1 INFO=$2 WORKER=$3 N=$4
shift 4
if ! "$INFO" | grep -E '^GPUs: [1-9]' >/dev/null; then
  echo "SKIPPED: needs a GPU"
  exit 77
fi
MPS=--mps
command -v nvidia-cuda-mps-control >/dev/null || MPS=
exec "$RUN" -n "$N" $MPS --timeout 590 -- "$WORKER" "$@"
