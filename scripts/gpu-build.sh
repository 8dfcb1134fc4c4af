#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# On the build machine: builds the GPU tests, benchmarks and tools for sm_90
# and stages the executables in .carry/gpu (git-ignored), ready to be carried
# to the GPU machine, where scripts/gpu-run.sh runs them.
set -euo pipefail
cd "$(dirname "$0")/.."
# GPU_BUILD_CMAKE_ARGS: extra configure arguments (a compiler launcher such as ccache, say)
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 ${GPU_BUILD_CMAKE_ARGS:-} >/dev/null
cmake --build build-gpu -j"$(nproc)" -- -k >build-gpu/build.log 2>&1 || { grep -E "error" build-gpu/build.log | head; echo "gpu-build: some targets failed (staging what built)"; }
rm -rf .carry/gpu && mkdir -p .carry/gpu
for f in build-gpu/tests/*/* build-gpu/bench/* build-gpu/tools/*; do
  if [ -f "$f" ] && [ -x "$f" ]; then cp "$f" .carry/gpu/; fi
done
cp tests/*/*.sh .carry/gpu/ 2>/dev/null || true
# The NCCL-compatible library and its libnccl.so.2 name, for the PyTorch runs.
mkdir -p .carry/gpu/lib
cp -a build-gpu/src/nccl/libmscclpp_nccl.so* build-gpu/src/nccl/libnccl.so* .carry/gpu/lib/ 2>/dev/null || true
# The library itself, for the Python package (MSCCLPP_LIBRARY) and its PyTorch backend.
cp -a build-gpu/libmscclpp.so* .carry/gpu/lib/ 2>/dev/null || true
du -sh .carry/gpu
