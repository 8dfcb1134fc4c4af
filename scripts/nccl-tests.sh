#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# On a GPU machine: builds NVIDIA's nccl-tests against mscclpp's NCCL-compatible
# library and runs a matrix of its binaries with several ranks sharing GPU 0
# (MPS), every run checked (-c 1). One summary line per run (binary, ranks,
# flags, rows, #wrong, exit status, verdict) goes to stdout and to
# $OUT/nccl-tests-summary.txt; the logs of every run go to
# $OUT/nccl-tests-logs.tar.gz.
#
#   usage: scripts/nccl-tests.sh [base|flags|all|quick|one BIN NP FLAGS...]   (default all)
#     base   every *_perf binary, 2 and 4 ranks, -b 8 -e 256M -f 8 -c 1; all_reduce with 3 ranks too
#     flags  all_reduce, all_gather, reduce_scatter, alltoall at 2 and 4 ranks with each of
#            -d all -o all (to 1 MiB), -G 10, -R 1, -R 2, -u 1, -y 1, -z 1, -p 1, -a 0..3, -N 3, -C 1
#     quick  one small checked run per binary, 2 ranks (a smoke test)
#     compare all_reduce, all_gather, reduce_scatter, alltoall at 2 and 4 ranks through nccl-tests
#            and through mscclpp-perf with the same flags: time per call side by side
#     one    one run: `one all_reduce 4 -b 8 -e 1M -c 1`
#
# Environment:
#   NCCL_TESTS_SRC   nccl-tests source: a directory or a .tar.gz (default: the first of
#                    .carry/third_party/nccl-tests-*.tar.gz and ../shared/third_party/nccl-tests-*.tar.gz)
#   NCCL_HEADERS     directory holding nccl.h, nccl_device.h and nccl_device/ of NCCL 2.28
#                    (default .carry/nccl-include, else $CUDA_HOME/include); the GPU machine's
#                    /usr/include/nccl_device.h is older, so the toolkit's are put first
#   MSCCLPP_NCCL_LIB directory with libmscclpp_nccl.so (default .carry/gpu/lib, from scripts/gpu-build.sh)
#   NCCL_TESTS_BUILD where to build (default /tmp/nccl-tests-build; an existing build is reused)
#   RUN_TIMEOUT      seconds per run (default 120)
#   NCCL_TESTS_BUDGET seconds for the whole matrix: runs that would not end in it are SKIPPED
#   OUT              where the summary and logs go (default ./nccl-tests-logs)
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
what=${1:-all}
OUT=${OUT:-$ROOT/nccl-tests-logs}
BUILD=${NCCL_TESTS_BUILD:-/tmp/nccl-tests-build}
RUN_TIMEOUT=${RUN_TIMEOUT:-120}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
LOGS=$BUILD/logs
SUMMARY=$OUT/nccl-tests-summary.txt
mkdir -p "$OUT" "$BUILD" "$LOGS"

die() { echo "nccl-tests.sh: $*" >&2; exit 2; }

# ---- the library under test
LIB=${MSCCLPP_NCCL_LIB:-$ROOT/.carry/gpu/lib}
[ -e "$LIB/libmscclpp_nccl.so" ] || die "no libmscclpp_nccl.so in $LIB (run scripts/gpu-build.sh, or set MSCCLPP_NCCL_LIB)"
LIB=$(cd "$LIB" && pwd)

# ---- NCCL_HOME: the toolkit's NCCL 2.28 headers, and libnccl.so.2 -> our library
HDRS=${NCCL_HEADERS:-}
if [ -z "$HDRS" ]; then
  if [ -e "$ROOT/.carry/nccl-include/nccl.h" ]; then HDRS=$ROOT/.carry/nccl-include; else HDRS=$CUDA_HOME/include; fi
fi
[ -e "$HDRS/nccl.h" ] || die "no nccl.h in $HDRS (set NCCL_HEADERS)"
NH=$BUILD/nccl-home
rm -rf "$NH" && mkdir -p "$NH/include" "$NH/lib"
cp -r "$HDRS"/nccl.h "$NH/include/"
[ -e "$HDRS/nccl_device.h" ] && cp -r "$HDRS/nccl_device.h" "$NH/include/"
[ -d "$HDRS/nccl_device" ] && cp -r "$HDRS/nccl_device" "$NH/include/"
ln -sf "$LIB/libmscclpp_nccl.so" "$NH/lib/libnccl.so"
ln -sf "$LIB/libmscclpp_nccl.so" "$NH/lib/libnccl.so.2"

# ---- MPI_HOME: Open MPI's directories as the nccl-tests Makefile wants them
command -v mpicc >/dev/null || die "mpicc not found (nccl-tests needs MPI to run several processes)"
MH=$BUILD/mpi-home
rm -rf "$MH" && mkdir -p "$MH"
inc=$(mpicc --showme:incdirs | tr ' ' '\n' | while read -r d; do [ -e "$d/mpi.h" ] && echo "$d" && break; done)
libd=$(mpicc --showme:libdirs | tr ' ' '\n' | while read -r d; do [ -e "$d/libmpi.so" ] && echo "$d" && break; done)
[ -n "$inc" ] && [ -n "$libd" ] || die "Open MPI's mpi.h / libmpi.so not found (mpicc --showme: '$inc' '$libd')"
ln -s "$inc" "$MH/include"
ln -s "$libd" "$MH/lib"

# ---- build (reused when the binaries exist)
if [ ! -x "$BUILD/bin/all_reduce_perf" ]; then
  SRC=${NCCL_TESTS_SRC:-}
  if [ -z "$SRC" ]; then
    for c in "$ROOT"/.carry/third_party/nccl-tests-*.tar.gz "$ROOT"/../shared/third_party/nccl-tests-*.tar.gz; do
      [ -e "$c" ] && SRC=$c && break
    done
  fi
  [ -n "$SRC" ] && [ -e "$SRC" ] || die "nccl-tests source not found (set NCCL_TESTS_SRC to its directory or tarball)"
  if [ -f "$SRC" ]; then
    rm -rf "$BUILD/src" && mkdir -p "$BUILD/src"
    tar xzf "$SRC" -C "$BUILD/src" --strip-components=1 || die "cannot unpack $SRC"
    SRC=$BUILD/src
  fi
  echo "nccl-tests.sh: building $SRC against $LIB"
  t0=$(date +%s)
  if ! make -C "$SRC" -j"$(nproc)" MPI=1 MPI_HOME="$MH" NCCL_HOME="$NH" CUDA_HOME="$CUDA_HOME" \
      NVCC_GENCODE="${NVCC_GENCODE:--gencode=arch=compute_90,code=sm_90}" BUILDDIR="$BUILD/bin" >"$LOGS/build.log" 2>&1; then
    tail -n 40 "$LOGS/build.log"
    die "the nccl-tests build failed (log: $LOGS/build.log)"
  fi
  echo "nccl-tests.sh: built in $(($(date +%s) - t0)) s"
fi

# ---- MPS: several ranks on one GPU need it; started here unless it runs already
export CUDA_MPS_PIPE_DIRECTORY=${CUDA_MPS_PIPE_DIRECTORY:-/tmp/mps} CUDA_MPS_LOG_DIRECTORY=${CUDA_MPS_LOG_DIRECTORY:-/tmp/mpslog}
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
started_mps=0
if ! echo get_server_list | nvidia-cuda-mps-control >/dev/null 2>&1; then
  nvidia-cuda-mps-control -d && started_mps=1
fi

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export LD_LIBRARY_PATH=$NH/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nrun=0
nfail=0
nskip=0
# `one` adds its line to the summary; the other modes start it anew
if [ "$what" != one ] || [ ! -s "$SUMMARY" ]; then
  : >"$SUMMARY"
  printf '%-22s %2s  %-34s %5s %7s %4s  %s\n' binary np flags rows wrong rc verdict | tee -a "$SUMMARY"
fi
# NCCL_TESTS_BUDGET (seconds, default none): runs that could not end within it
# are listed as SKIPPED instead of started, so that a caller's time limit
# never cuts the summary and the logs off.
T_END=$(($(date +%s) + ${NCCL_TESTS_BUDGET:-1000000000}))

# run BIN NP FLAGS...: one checked run; its verdict is PASS when it exits 0, printed at least
# one row, every row's #wrong is 0 and nccl-tests' own "Out of bounds values" line says OK.
run() {
  local bin=$1 np=$2
  shift 2
  local flags="$*"
  local tag
  tag=$(echo "${bin}_${np}_${flags}" | tr -c 'A-Za-z0-9_.-' '_')
  local log=$LOGS/$tag.log
  if [ $(($(date +%s) + RUN_TIMEOUT)) -gt "$T_END" ]; then
    nskip=$((nskip + 1))
    printf '%-22s %2s  %-34s %5s %7s %4s  %s\n' "$bin" "$np" "$flags" - - - "SKIPPED (NCCL_TESTS_BUDGET)" | tee -a "$SUMMARY"
    return
  fi
  timeout "$RUN_TIMEOUT" mpirun -np "$np" --oversubscribe --bind-to none -x NCCL_TESTS_DEVICE=0 -x LD_LIBRARY_PATH \
    -x CUDA_MPS_PIPE_DIRECTORY -x MSCCLPP_DEBUG -x MSCCLPP_TIMEOUT "$BUILD/bin/${bin}_perf" "$@" >"$log" 2>&1
  local rc=$?
  # Data rows start with a size and end with the two groups "time algbw busbw #wrong" (out of
  # place, in place; #wrong N/A where a test has no in-place form); the redop column is empty
  # for some tests (hypercube), so fields are counted from the end.
  local rows wrong
  rows=$(awk '$1 ~ /^[0-9]+$/ && NF >= 12 {n++} END {print n+0}' "$log")
  wrong=$(awk '$1 ~ /^[0-9]+$/ && NF >= 12 {if ($(NF-4) ~ /^[0-9]+$/) w += $(NF-4); if ($NF ~ /^[0-9]+$/) w += $NF} END {print w+0}' "$log")
  local verdict=PASS
  if [ $rc -ne 0 ] || [ "$rows" -eq 0 ] || [ "$wrong" -ne 0 ] || ! grep -q "Out of bounds values : 0 OK" "$log"; then
    verdict=FAIL
    nfail=$((nfail + 1))
  fi
  nrun=$((nrun + 1))
  printf '%-22s %2s  %-34s %5s %7s %4s  %s\n' "$bin" "$np" "$flags" "$rows" "$wrong" "$rc" "$verdict" | tee -a "$SUMMARY"
}

BINS="all_reduce all_gather broadcast reduce_scatter reduce alltoall alltoallv gather scatter sendrecv hypercube"
case "$what" in
  base | all)
    for np in 2 4; do
      for b in $BINS; do run "$b" "$np" -b 8 -e 256M -f 8 -c 1; done
    done
    run all_reduce 3 -b 8 -e 256M -f 8 -c 1
    ;;&
  flags | all)
    for np in 2 4; do
      for b in all_reduce all_gather reduce_scatter alltoall; do
        run "$b" "$np" -b 8 -e 1M -f 8 -c 1 -d all -o all
        for fl in "-G 10" "-R 1" "-R 2" "-u 1" "-y 1" "-z 1" "-p 1" "-a 0" "-a 1" "-a 2" "-a 3" "-N 3" "-C 1"; do
          # shellcheck disable=SC2086 # the flag and its value are two words
          run "$b" "$np" -b 8 -e 256M -f 8 -c 1 $fl
        done
      done
    done
    ;;
  quick)
    for b in $BINS; do run "$b" 2 -b 8 -e 1M -f 32 -c 1; done
    ;;
  compare)
    # What the NCCL layer costs: the same sweep through nccl-tests and through
    # mscclpp-perf (the mscclpp API), out-of-place time per size, side by side.
    PERF=${MSCCLPP_PERF:-$ROOT/.carry/gpu/mscclpp-perf}
    LAUNCH=${MSCCLPP_RUN:-$ROOT/.carry/gpu/mscclpp-run}
    [ -x "$PERF" ] && [ -x "$LAUNCH" ] || die "compare needs mscclpp-perf and mscclpp-run (MSCCLPP_PERF, MSCCLPP_RUN)"
    cmp=$OUT/nccl-tests-compare.txt
    : >"$cmp"
    for np in 2 4; do
      for b in all_reduce all_gather reduce_scatter alltoall; do
        sw=(-b 8 -e 256M -f 8 -w 5 -n 20 -c 1)
        run "$b" "$np" "${sw[@]}"
        nt=$LOGS/$(echo "${b}_${np}_${sw[*]}" | tr -c 'A-Za-z0-9_.-' '_').log
        pl=$LOGS/perf_${b}_${np}.log
        timeout "$RUN_TIMEOUT" "$LAUNCH" -n "$np" --no-prefix --timeout "$((RUN_TIMEOUT - 5))" -- "$PERF" "${b//_/}" "${sw[@]}" >"$pl" 2>&1
        {
          echo "## $b, $np ranks: out-of-place time per call (us), nccl-tests through libmscclpp_nccl.so vs mscclpp-perf"
          printf '%12s %14s %14s %8s\n' bytes nccl-tests mscclpp-perf ratio
          awk 'NR == FNR { if ($1 ~ /^[0-9]+$/ && NF >= 12) t[$1] = $(NF-7); next }
               $1 ~ /^[0-9]+$/ && NF >= 12 && ($1 in t) { v = $(NF-7); printf "%12s %14s %14s %8.2f\n", $1, t[$1], v, (v > 0 ? t[$1] / v : 0) }' "$nt" "$pl"
        } | tee -a "$cmp"
      done
    done
    ;;
  one)
    shift
    [ $# -ge 2 ] || die "usage: nccl-tests.sh one BIN NP FLAGS..."
    run "$@"
    ;;
  base) ;;
  *) die "unknown mode '$what' (base, flags, all, quick, compare, one)" ;;
esac

[ $started_mps -eq 1 ] && echo quit | nvidia-cuda-mps-control
tar czf "$OUT/nccl-tests-logs.tar.gz" -C "$LOGS" . 2>/dev/null
echo "nccl-tests.sh: $((nrun - nfail)) passed, $nfail failed, $nskip skipped (summary: $SUMMARY; logs: $OUT/nccl-tests-logs.tar.gz)"
[ $nfail -eq 0 ]
