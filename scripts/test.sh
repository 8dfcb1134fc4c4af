#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# README's test command (and CI's, through .ci/run): installs missing packages,
# then builds and tests four trees, and ends with the main tree's CTest
# summary.
#
#   asan  -DMSCCLPP_SANITIZE=address,undefined, host backend   ctest -L cpu
#   tsan  -DMSCCLPP_SANITIZE=thread, host backend              ctest -L cpu
#   fuzz  clang + libFuzzer                                    every fuzz_* target for FUZZ_SECONDS
#   main  CUDA when nvcc is found (every .cu compiles)         the whole ctest suite, last
#
# A one-line summary of the stages comes just before the main tree's ctest;
# the exit status is non-zero when any stage or test failed.
#
# Environment: MSCCLPP_BUILD_PREFIX (default "build": trees build-asan,
# build-tsan, build-fuzz and build), JOBS (build jobs, default nproc),
# CTEST_JOBS (default 2), FUZZ_SECONDS (default 30).
set -uo pipefail
cd "$(dirname "$0")/.."
B=${MSCCLPP_BUILD_PREFIX:-build}
JOBS=${JOBS:-$(nproc)}
CTEST_JOBS=${CTEST_JOBS:-2}
FUZZ_SECONDS=${FUZZ_SECONDS:-30}
T0=$(date +%s)
summary=()
failed=0

banner() { printf '\n==== %s ====\n' "$*"; }
note() { # note STAGE RESULT STARTED
  local secs=$(($(date +%s) - $3))
  summary+=("$1 $2 (${secs}s)")
  [ "$2" = ok ] || [ "${2#skipped}" != "$2" ] || failed=1
  echo "---- $1: $2 (${secs}s)"
}
# configure DIR CMAKE_ARGS... / build DIR [TARGET]: quiet unless they fail.
configure() {
  local dir=$1
  shift
  mkdir -p "$dir"
  if ! cmake -S . -B "$dir" "$@" >"$dir/configure.log" 2>&1; then
    tail -n 60 "$dir/configure.log"
    echo "configure of $dir failed (log: $dir/configure.log)"
    return 1
  fi
}
build() {
  local dir=$1 target=${2:-}
  if ! cmake --build "$dir" -j"$JOBS" ${target:+--target "$target"} >"$dir/build.log" 2>&1; then
    grep -E -B2 -A8 'error|Error' "$dir/build.log" | head -n 150
    echo "build of $dir failed (log: $dir/build.log)"
    return 1
  fi
}

# ---- deps
banner "deps"
t=$(date +%s)
if bash scripts/deps.sh; then note deps ok "$t"; else note deps FAILED "$t"; fi

# The sanitizers report and fail instead of logging and going on.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
# (libfabric's copies of incoming RMA data: scripts/tsan-suppressions.txt says why)
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/scripts/tsan-suppressions.txt}

# ---- ASan + UBSan
banner "asan: AddressSanitizer + UndefinedBehaviorSanitizer, host backend"
t=$(date +%s)
if configure "$B-asan" -DMSCCLPP_SANITIZE=address,undefined -DMSCCLPP_ENABLE_CUDA=OFF && build "$B-asan"; then
  if (cd "$B-asan" && ctest -L cpu --output-on-failure -j"$CTEST_JOBS"); then note asan ok "$t"; else note asan FAILED "$t"; fi
else
  note asan "FAILED to build" "$t"
fi

# ---- TSan
banner "tsan: ThreadSanitizer, host backend"
t=$(date +%s)
# TSan's fixed memory layout clashes with the wider mmap randomisation of
# recent kernels ("unexpected memory mapping"); run without ASLR when we can.
norandom=()
if setarch "$(uname -m)" -R true 2>/dev/null; then norandom=(setarch "$(uname -m)" -R); fi
if configure "$B-tsan" -DMSCCLPP_SANITIZE=thread -DMSCCLPP_ENABLE_CUDA=OFF && build "$B-tsan"; then
  [ ${#norandom[@]} -gt 0 ] && echo "(ctest runs under '${norandom[*]}': ASLR off for TSan)"
  if (cd "$B-tsan" && "${norandom[@]}" ctest -L cpu --output-on-failure -j"$CTEST_JOBS"); then
    note tsan ok "$t"
  else
    note tsan FAILED "$t"
  fi
else
  note tsan "FAILED to build" "$t"
fi

# ---- fuzz
banner "fuzz: libFuzzer (clang)"
t=$(date +%s)
if ! command -v clang >/dev/null; then
  note fuzz "FAILED: clang not found" "$t"
elif ! configure "$B-fuzz" -DMSCCLPP_BUILD_FUZZ=ON -DMSCCLPP_ENABLE_CUDA=OFF -DCMAKE_C_COMPILER=clang; then
  note fuzz "FAILED to configure" "$t"
else
  # Every libFuzzer target (the bootstrap's and the memory layer's parsers),
  # each for FUZZ_SECONDS, through its CTest entry (label fuzz).
  targets=$(cmake --build "$B-fuzz" --target help 2>/dev/null | grep -oE 'fuzz_[a-z_]+' | sort -u | tr '\n' ' ')
  if [ -z "$targets" ]; then
    note fuzz "FAILED: no fuzz targets" "$t"
  elif ! (for tg in $targets; do build "$B-fuzz" "$tg" || exit 1; done); then
    note fuzz "FAILED to build" "$t"
  elif (cd "$B-fuzz" && cmake -DMSCCLPP_FUZZ_SECONDS="$FUZZ_SECONDS" . >/dev/null &&
        ctest -L fuzz --output-on-failure -j"$CTEST_JOBS" >fuzz.log 2>&1); then
    grep -E "Test #|tests passed" "$B-fuzz/fuzz.log"
    echo "fuzzed: $targets"
    note fuzz ok "$t"
  else
    tail -n 80 "$B-fuzz/fuzz.log"
    note fuzz FAILED "$t"
  fi
fi

# ---- main tree: last, so that its CTest summary closes the output
banner "main: the whole suite (CUDA when nvcc is found)"
t=$(date +%s)
main_built=0
if configure "$B" && build "$B"; then
  main_built=1
  cuda=$(grep -o 'mscclpp: CUDA [A-Z]*' "$B/configure.log" | head -1)
  note "main-build" "ok" "$t"
  summary+=("[${cuda:-mscclpp: CUDA ?}]")
else
  note "main-build" "FAILED" "$t"
fi

echo
echo "test.sh stages: ${summary[*]}; $(($(date +%s) - T0))s before the main ctest"
[ $failed -eq 0 ] || echo "test.sh: at least one stage FAILED (see above); the main tree's tests follow"
if [ $main_built -eq 1 ]; then
  (cd "$B" && ctest --output-on-failure -j"$CTEST_JOBS")
  rc=$?
else
  echo "the main tree did not build: no tests run"
  rc=1
fi
[ $failed -eq 0 ] && [ $rc -eq 0 ]
