#!/usr/bin/env bash
# On the GPU machine, in one call: every GPU test (plain, then under
# compute-sanitizer memcheck and racecheck), the multi-rank tests under MPS,
# and the GPU benchmarks. Executables come from .carry/gpu (scripts/gpu-build.sh).
# The full log goes to $OUT/gpu.log; a summary table is printed last.
#   usage: scripts/gpu-run.sh [tests|bench|all|chan|coll]   (default all)
set -u
cd "$(dirname "$0")/.."
what=${1:-all}
BIN=$PWD/.carry/gpu
OUT=${OUT:-$PWD/gpu-logs}
mkdir -p "$OUT"
LOG=$OUT/gpu.log
: >"$LOG"
export PATH=$BIN:$PATH
summary=()

step() { # step NAME TIMEOUT cmd...
  local name=$1 t=$2
  shift 2
  echo "=== $name: $*" >>"$LOG"
  local t0=$(date +%s.%N)
  timeout "$t" "$@" >>"$LOG" 2>&1
  local rc=$?
  local dt=$(awk "BEGIN{print $(date +%s.%N) - $t0}")
  echo "=== $name rc=$rc (${dt}s)" >>"$LOG"
  summary+=("$(printf '%-40s rc=%-4s %6.1fs' "$name" "$rc" "$dt")")
}

have() { [ -x "$BIN/$1" ]; }

export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mpslog
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >>"$LOG" 2>&1
# What our binaries need from this machine's libraries.
for b in "$BIN"/*; do
  [ -x "$b" ] && [ "${b%.sh}" = "$b" ] && ldd "$b" 2>&1 | grep -q "not found" && { echo "MISSING LIBS: $b"; ldd "$b" | grep "not found"; } | tee -a "$LOG"
done

if [ "$what" = tests ] || [ "$what" = all ]; then
  # Single-process GPU tests, then under the sanitizers (quick mode).
  for t in test_fifo_gpu test_memory test_transport; do
    have $t || continue
    step "$t" 300 "$BIN/$t"
    step "$t memcheck" 300 compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/$t" quick
    step "$t racecheck" 300 compute-sanitizer --tool racecheck --error-exitcode 9 "$BIN/$t" quick
  done
fi

if [ "$what" = bench ] || [ "$what" = all ]; then
  have bench_fifo && step bench_fifo 300 "$BIN/bench_fifo"
  have bench_fifo_host && step bench_fifo_host 120 "$BIN/bench_fifo_host"
fi

# Multi-process work needs MPS: start it for the rest of the run.
nvidia-cuda-mps-control -d >>"$LOG" 2>&1 && echo "MPS started" >>"$LOG"
if [ "$what" = tests ] || [ "$what" = all ]; then
  # Several ranks sharing the GPU through CUDA IPC (MPS already running).
  for n in 2 4; do
    have transport_worker && step "transport_mp_gpu_$n" 200 mscclpp-run -n $n --timeout 150 -- "$BIN/transport_worker" gpu
  done
  have transport_worker && step "transport_mp_gpu_2 memcheck" 300 mscclpp-run -n 2 --timeout 250 -- \
    compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/transport_worker" gpu
fi
if [ "$what" = tests ] || [ "$what" = all ] || [ "$what" = chan ]; then
  for n in 2 4; do
    have channel_worker_gpu && step "channel_mp_gpu_$n" 300 mscclpp-run -n $n --timeout 280 -- "$BIN/channel_worker_gpu" gpu
    have seed_test_gpu && step "seed_test_gpu_$n" 120 mscclpp-run -n $n --timeout 100 -- "$BIN/seed_test_gpu"
  done
  have channel_worker_gpu && step "channel_mp_gpu_2 memcheck" 300 mscclpp-run -n 2 --timeout 280 -- \
    compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/channel_worker_gpu" gpu quick
  have seed_test_gpu && step "seed_test_gpu_2 memcheck" 200 mscclpp-run -n 2 --timeout 180 -- \
    compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/seed_test_gpu" quick
fi
if [ "$what" = bench ] || [ "$what" = all ] || [ "$what" = chan ]; then
  have bench_channel && step bench_channel 200 mscclpp-run -n 2 --timeout 180 -- "$BIN/bench_channel"
  have bench_channel_host && step bench_channel_host 120 mscclpp-run -n 2 --timeout 100 -- "$BIN/bench_channel_host"
fi
if [ "$what" = tests ] || [ "$what" = all ] || [ "$what" = coll ]; then
  for n in 2 4; do
    have coll_gpu_worker && step "coll_gpu_$n" 400 mscclpp-run -n $n --timeout 390 -- "$BIN/coll_gpu_worker" $((64 << 20)) graph
  done
  have coll_gpu_worker && step "coll_gpu_2 memcheck" 400 mscclpp-run -n 2 --timeout 390 -- \
    compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/coll_gpu_worker" 300000
fi
if [ "$what" = bench ] || [ "$what" = all ] || [ "$what" = coll ]; then
  for n in 2 4; do
    have bench_coll && step "bench_coll_$n" 300 mscclpp-run -n $n --timeout 290 -- "$BIN/bench_coll"
  done
fi
echo quit | nvidia-cuda-mps-control >>"$LOG" 2>&1

grep -E "^(PASS|FAIL|SKIPPED|[0-9]+ passed)|ratio|goal|us |µs|GB/s|M/s|ERROR|error|wrong|roofline" "$LOG" | tail -n 80
echo "---- summary ----"
printf '%s\n' "${summary[@]}"
