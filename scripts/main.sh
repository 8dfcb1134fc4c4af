#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# README's first command: install missing packages, build, and run
# mscclpp-perf allreduce (every result checked) across 4 local ranks, on the
# GPU(s) when there is one, else on the host backend. It shows the build's
# progress and ends with one line: what ran and whether every check passed.
#
# Environment: MSCCLPP_BUILD_PREFIX (build directory, default "build"), JOBS
# (default nproc), NRANKS (default 4), MAIN_TIMEOUT (seconds, default 600).
set -uo pipefail
cd "$(dirname "$0")/.."
B=${MSCCLPP_BUILD_PREFIX:-build}
JOBS=${JOBS:-$(nproc)}
NRANKS=${NRANKS:-4}
T0=$(date +%s)
elapsed() { echo "$(($(date +%s) - T0))s"; }
verdict() { # verdict PASSED|FAILED WHAT
  echo "main.sh: $1: $2 ($(elapsed))"
}

bash scripts/deps.sh || { verdict FAILED "installing the packages (scripts/deps.sh)"; exit 1; }
mkdir -p "$B"
if ! cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$B/configure.log" 2>&1; then
  tail -n 40 "$B/configure.log"
  verdict FAILED "configuring $B (log: $B/configure.log)"
  exit 1
fi
cuda=$(grep -o 'mscclpp: CUDA [A-Z]*' "$B/configure.log" | head -1)
echo "main.sh: building $B with $JOBS jobs (${cuda#mscclpp: }; the full log is $B/build.log)"
# CMake's progress lines only; the compiler's output goes to the log.
cmake --build "$B" -j"$JOBS" 2>&1 | tee "$B/build.log" | grep --line-buffered -E '^\[ *[0-9]+%\]'
if [ "${PIPESTATUS[0]}" -ne 0 ]; then
  grep -E -B2 -A8 'error|Error' "$B/build.log" | head -n 80
  verdict FAILED "the build of $B (log: $B/build.log)"
  exit 1
fi
echo "main.sh: built in $(elapsed); the tools are in $B/tools (export PATH=\$PWD/$B/tools:\$PATH)"
"$B/tools/mscclpp-info"

# The main job: allreduce, checked, across NRANKS local ranks: on the GPU(s)
# when there is one (ranks sharing a GPU under MPS), else on the host backend.
mps=()
if "$B/tools/mscclpp-info" | grep -E '^GPUs: [1-9]' >/dev/null; then
  where="the GPU backend"
  sizes=(-b 1K -e 256M -f 4)
  command -v nvidia-cuda-mps-control >/dev/null && mps=(--mps)
else
  where="the host backend (no GPU)"
  sizes=(-b 1K -e 16M -f 4)
fi
cmd=("$B/tools/mscclpp-run" -n "$NRANKS" "${mps[@]}" --timeout "${MAIN_TIMEOUT:-600}" -- "$B/tools/mscclpp-perf"
     allreduce "${sizes[@]}" -c 1 -w 5 -n 20)
echo "main.sh: ${cmd[*]}"
"${cmd[@]}"
rc=$?
what="mscclpp-perf allreduce ${sizes[*]} on $NRANKS ranks, $where"
if [ $rc -eq 0 ]; then
  verdict PASSED "built $B (${cuda#mscclpp: }), ran $what: every result checked, none wrong"
else
  verdict FAILED "built $B (${cuda#mscclpp: }), ran $what: exit status $rc (a wrong result or a failed call: see above)"
fi
exit $rc
