#!/usr/bin/env bash
# README's main-job command: install missing packages, build, and run
# mscclpp-perf allreduce (checked) across 4 local ranks.
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
perf=$B/tools/mscclpp-perf
# The main job: allreduce, checked, across NRANKS local ranks: on the GPU(s)
# when there is one (ranks sharing a GPU under MPS), else on the host backend.
mps=()
sizes=(-b 1K -e 256M -f 4)
if "$B/tools/mscclpp-info" | grep -E '^GPUs: [1-9]' >/dev/null; then
  command -v nvidia-cuda-mps-control >/dev/null && mps=(--mps)
else
  sizes=(-b 1K -e 16M -f 4)
fi
cmd=("$B/tools/mscclpp-run" -n "$NRANKS" "${mps[@]}" --timeout "${MAIN_TIMEOUT:-600}" -- "$perf" allreduce
     "${sizes[@]}" -c 1 -w 5 -n 20)
echo "main.sh: ${cmd[*]}"
exec "${cmd[@]}"
