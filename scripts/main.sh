#!/usr/bin/env bash
# README's main-job command: install missing packages, build, and run the
# benchmark across 4 local ranks. For now that is the bootstrap benchmark
# (bench/bench_bootstrap.c); mscclpp-perf replaces it once collectives land.
#
# Environment: MSCCLPP_BUILD_PREFIX (build directory, default "build"), JOBS
# (default nproc), NRANKS (default 4), MAIN_TIMEOUT (seconds, default 600).
set -euo pipefail
cd "$(dirname "$0")/.."
B=${MSCCLPP_BUILD_PREFIX:-build}
JOBS=${JOBS:-$(nproc)}
NRANKS=${NRANKS:-4}
bash scripts/deps.sh
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$B" -j"$JOBS" >"$B/build.log" 2>&1 || {
  tail -n 80 "$B/build.log"
  echo "main.sh: the build failed (log: $B/build.log)" >&2
  exit 1
}
"$B/tools/mscclpp-info"
bench=$B/bench/bench_bootstrap
if [ ! -x "$bench" ]; then
  echo "main.sh: $bench does not exist yet: the bootstrap benchmark (bench/bench_bootstrap.c) has not" >&2
  echo "main.sh: landed, so there is nothing to benchmark. The build and mscclpp-info above did run." >&2
  exit 1
fi
# Ranks sharing a GPU need MPS to run kernels side by side (the bootstrap
# benchmark itself does not touch the GPU; mscclpp-perf will).
mps=()
if "$B/tools/mscclpp-info" | grep -E '^GPUs: [1-9]' >/dev/null && command -v nvidia-cuda-mps-control >/dev/null; then
  mps=(--mps)
fi
echo "main.sh: $B/tools/mscclpp-run -n $NRANKS ${mps[*]} --timeout ${MAIN_TIMEOUT:-600} $bench"
exec "$B/tools/mscclpp-run" -n "$NRANKS" "${mps[@]}" --timeout "${MAIN_TIMEOUT:-600}" "$bench"
