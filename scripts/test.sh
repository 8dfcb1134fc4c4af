#!/usr/bin/env bash
# Builds mscclpp and runs the whole test suite (installs missing packages first).
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh || exit 1
jobs=$(nproc)
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || exit 1
cmake --build build -j"$jobs" || exit 1
cd build && ctest --output-on-failure -j"$jobs"
