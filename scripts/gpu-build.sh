#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# On the build machine: builds the GPU tests, benchmarks and tools for sm_90
# and stages the executables in .carry/gpu (git-ignored), ready to be carried
# to the GPU machine, where scripts/gpu-run.sh runs them.
set -euo pipefail
cd "$(dirname "$0")/.."
# GPU_BUILD_CMAKE_ARGS: extra configure arguments (a compiler launcher such as ccache, say)
# The GPU machine has no libjansson (execution plans' JSON parser): the
# executables and libraries look for it beside themselves ($ORIGIN, and
# $ORIGIN/lib for the executables in .carry/gpu), where it is staged below.
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  '-DCMAKE_BUILD_RPATH=$ORIGIN;$ORIGIN/lib' ${GPU_BUILD_CMAKE_ARGS:-} >/dev/null
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
# libjansson.so.4, which both need (Debian's libjansson.a is not
# position-independent, so it cannot be linked into the shared libraries).
jansson=$(awk -F= '/^MSCCLPP_JANSSON_LIBRARY:/ {print $2}' build-gpu/CMakeCache.txt)
if [ -n "$jansson" ] && [ -e "$jansson" ]; then
  cp -L "$(dirname "$jansson")/libjansson.so.4" .carry/gpu/lib/libjansson.so.4
fi
du -sh .carry/gpu
