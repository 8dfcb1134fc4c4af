#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The GPU executor's kernel must keep its stack frame within CUDA's default
# stack limit (1 KiB a thread): above it every launch grows the context's
# local memory and shrinks it again after, which cost ~19 us a call on the
# H100 (bench/HISTORY.md, 2026-12-08). ptxas says the frame; no GPU needed.
#   stack_frame.sh NVCC ARCH SOURCE_DIR
set -euo pipefail
nvcc=$1
arch=$2
src=$3
limit=1024
out=$("$nvcc" -arch="sm_$arch" -O3 -std=c++17 -DMSCCLPP_HAVE_CUDA=1 -I"$src/src" -I"$src/include" \
  -Xptxas -v -c "$src/src/coll/plan/plan_gpu_kernels.cu" -o /dev/null 2>&1) || {
  echo "$out" | tail -n 20
  echo "FAIL: nvcc could not compile plan_gpu_kernels.cu"
  exit 1
}
frame=$(echo "$out" | awk '/Function properties for .*planKernel/ {getline; print $1; exit}')
if [ -z "$frame" ]; then
  echo "$out" | grep -A2 'Function properties' | head -n 20
  echo "FAIL: ptxas said nothing of planKernel's stack frame"
  exit 1
fi
echo "planKernel (sm_$arch): $frame bytes stack frame (limit $limit)"
if [ "$frame" -gt "$limit" ]; then
  echo "FAIL: planKernel's stack frame ($frame bytes) is over CUDA's default stack limit ($limit)"
  exit 1
fi
echo PASS
