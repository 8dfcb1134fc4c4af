#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# On the GPU machine, in one call: every GPU test (plain, then under
# compute-sanitizer memcheck and racecheck), the multi-rank tests under MPS,
# and the GPU benchmarks. Executables come from .carry/gpu (scripts/gpu-build.sh).
# The full log goes to $OUT/gpu.log; a summary table is printed last.
#   usage: [GPU_RUN_BUDGET=s] [GPU_RUN_SKIP=regex] [GPU_RUN_ONLY=regex] scripts/gpu-run.sh [tests|bench|all|chan|coll|perf|torch|net|nccl|tune|collport|moe|py|chaos|trace|plan]   (default all; nccl: NVIDIA's nccl-tests through our library (scripts/nccl-tests.sh); collport: only the collectives over port channels and across pretend hosts, also part of tests; tune: ping-pongs and collectives under the tuning parameters; moe: issue 23's MoE step (bench_moe) and the all-to-all(v) and send/recv sweeps, about 4 minutes; py: the Python package with PyTorch, ~3-4 min, not part of all; chaos: ranks killed, survivors shrink and go on, through the NCCL API and PyTorch, under 3 minutes; plan: execution plans on the GPU executor (issue 27): checked runs (hand-made, default and MSCCL++-DSL plans), graph replay, memcheck runs (hand-made plans at 2 ranks, default ones at 4), mscclpp-perf --plan eager and in graphs, and the executor's fixed cost (nop plans), about 8 minutes, not part of all; trace: MSCCLPP_TRACE's cost on and off, and its kernel events checked)
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

# GPU_RUN_BUDGET (seconds, default none) bounds the whole run: each step's
# time bound is cut to what is left of it (a step cut short ends with rc=124),
# and once under 20 s are left the remaining steps are NOT RUN; GPU_RUN_SKIP (an extended
# regular expression): steps whose names match are NOT RUN, e.g. those an
# earlier call of the same stage already ran; GPU_RUN_ONLY (the same): only
# the steps whose names match run. They exist because one device
# call is bounded (10 minutes) and a stage like `tests` is longer.
T_END=$(($(date +%s) + ${GPU_RUN_BUDGET:-1000000000}))
step() { # step NAME TIMEOUT cmd...
  local name=$1 t=$2
  shift 2
  local left=$((T_END - $(date +%s)))
  if { [ -n "${GPU_RUN_SKIP:-}" ] && [[ $name =~ $GPU_RUN_SKIP ]]; } ||
    { [ -n "${GPU_RUN_ONLY:-}" ] && ! [[ $name =~ $GPU_RUN_ONLY ]]; } || [ "$left" -lt 20 ]; then
    echo "=== $name NOT RUN" >>"$LOG"
    summary+=("$(printf '%-40s NOT RUN' "$name")")
    return
  fi
  [ "$t" -gt "$left" ] && t=$left
  echo "=== $name: $*" >>"$LOG"
  local t0=$(date +%s.%N)
  timeout "$t" "$@" >>"$LOG" 2>&1
  local rc=$?
  local dt=$(awk "BEGIN{print $(date +%s.%N) - $t0}")
  echo "=== $name rc=$rc (${dt}s)" >>"$LOG"
  summary+=("$(printf '%-40s rc=%-4s %6.1fs' "$name" "$rc" "$dt")")
}

have() { [ -x "$BIN/$1" ]; }

# A stage cut by its time bound may leave its ranks running; under one MPS
# server a fault of theirs reaches every later client (it did, 2026-12-06):
# nothing of ours may run when a stage starts.
pkill -9 -f "$BIN/" 2>/dev/null && sleep 1
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mpslog
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >>"$LOG" 2>&1
# What our binaries need from this machine's libraries.
for b in "$BIN"/*; do
  # (libnccl.so.2 of the programs linked to our NCCL library: ours, in $BIN/lib)
  [ -x "$b" ] && [ "${b%.sh}" = "$b" ] && LD_LIBRARY_PATH="$BIN/lib:${LD_LIBRARY_PATH:-}" ldd "$b" 2>&1 | grep -q "not found" &&
    { echo "MISSING LIBS: $b"; LD_LIBRARY_PATH="$BIN/lib:${LD_LIBRARY_PATH:-}" ldd "$b" | grep "not found"; } | tee -a "$LOG"
done

if [ "$what" = tests ] || [ "$what" = all ]; then
  # Single-process GPU tests, then under the sanitizers (quick mode).
  # test_teardown_gpu calls CUDA after cudaDeviceReset on purpose (the
  # library must then free without a fault); the errors CUDA returns it are
  # the test, so the sanitizer reports memory errors there, not API errors.
  for t in test_fifo_gpu test_memory test_transport test_teardown_gpu; do
    have $t || continue
    api=()
    [ $t = test_teardown_gpu ] && api=(--report-api-errors no)
    step "$t" 300 "$BIN/$t"
    step "$t memcheck" 300 compute-sanitizer --tool memcheck "${api[@]}" --error-exitcode 9 "$BIN/$t" quick
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
    # the largest calls, buffers of 1 GiB (every collective; graph replay of two)
    have coll_gpu_worker && step "coll_gpu_${n}_1GiB" 400 mscclpp-run -n $n --timeout 390 -- "$BIN/coll_gpu_worker" $((1 << 30)) big
  done
  # rank 0 calls first, the others only once its call returned (a file as
  # side channel): no call waits for a peer's host thread
  for n in 2 4; do
    have coll_gpu_worker && step "coll_gpu_order_$n" 400 mscclpp-run -n $n --timeout 390 -- "$BIN/coll_gpu_worker" $((16 << 20)) order
  done
  # the two-phase packet allreduce forced at every size it takes (by default
  # it serves 3-4 ranks above 256 KiB, to 512 KiB)
  for n in 2 3; do
    have coll_gpu_worker && step "coll_gpu_${n}_packet2" 300 env MSCCLPP_ALGO=allreduce=packet2 mscclpp-run -n $n --timeout 290 -- \
      "$BIN/coll_gpu_worker" $((2 << 20)) graph=100
  done
  # allgather, reduce-scatter and all-to-all as one step of LL packets
  # forced at every size (by default they take packets for blocks up to
  # allreduce's packet limit): coll_gpu_worker's "edges" matrix (count 0,
  # blocks around the packet grids' and the size rule's edges, several
  # rounds per call) and graph replays; then with packet slots of 1024
  # packets (MSCCLPP_COLL_SCRATCH_BYTES=65536), fewer than the big grid's
  # threads, so that calls end on a short, padded chunk; then memcheck
  packetColls=allgather=packet,reducescatter=packet,alltoall=packet
  for n in 2 3 4; do
    have coll_gpu_worker && step "coll_gpu_${n}_packet_colls" 300 env MSCCLPP_ALGO=$packetColls \
      mscclpp-run -n $n --timeout 290 -- "$BIN/coll_gpu_worker" $((8 << 20)) edges=100
  done
  have coll_gpu_worker && step "coll_gpu_3_packet_colls_small_slots" 300 env MSCCLPP_ALGO=$packetColls \
    MSCCLPP_COLL_SCRATCH_BYTES=65536 mscclpp-run -n 3 --timeout 290 -- "$BIN/coll_gpu_worker" $((4 << 20)) edges=20
  have coll_gpu_worker && step "coll_gpu_2_packet_colls memcheck" 400 env MSCCLPP_ALGO=$packetColls \
    MSCCLPP_COLL_SCRATCH_BYTES=65536 mscclpp-run -n 2 --timeout 390 -- \
    compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/coll_gpu_worker" 600000 edges=2
  # all-to-all-v whose counts do not fit: the error on the rank that found
  # them, nothing out of bounds, the others unharmed (its other checks run
  # in coll_gpu_N)
  for n in 2 3; do
    have coll_gpu_worker && step "coll_gpu_alltoallv_errors_$n" 120 mscclpp-run -n $n --timeout 110 -- \
      "$BIN/coll_gpu_worker" $((16 << 20)) alltoallv_errors
  done
  # send/recv patterns in groups (ring, pairs, gather, scatter, all-to-all):
  # first calls through the scratch, later ones zero-copy, graph replays
  # with new sends (also after the matrix of coll_gpu_N); 3 ranks: a rank
  # sends to itself; small sizes (0, 1 byte, primes, around 4 KiB, 32 KiB
  # and 64 KiB) several per pair in one group, as LL packets up to
  # MSCCLPP_COLL_P2P_LL_MAX (64 KiB) mixed with larger ones, and receives
  # posted larger than their sends; then every send through the scratch
  # (MSCCLPP_COLL_P2P_ZERO_COPY=0, the packet path off:
  # MSCCLPP_COLL_P2P_LL_MAX=0), and the small sizes with the packet limit
  # at 4 KiB (in the middle of them). Zero-copy from the first size of
  # more than one chunk (by default only sends of 64 MiB and more take it),
  # so that every pattern and size takes it.
  for n in 2 3 8; do
    have coll_gpu_worker && step "coll_gpu_p2p_$n" 200 env MSCCLPP_COLL_P2P_ZERO_COPY_MIN=0 mscclpp-run -n $n --timeout 190 -- \
      "$BIN/coll_gpu_worker" $((64 << 20)) p2p
  done
  have coll_gpu_worker && step "coll_gpu_p2p_4_scratch" 200 env MSCCLPP_COLL_P2P_ZERO_COPY=0 MSCCLPP_COLL_P2P_LL_MAX=0 \
    mscclpp-run -n 4 --timeout 190 -- "$BIN/coll_gpu_worker" $((64 << 20)) p2p
  have coll_gpu_worker && step "coll_gpu_p2p_4_ll4k" 200 env MSCCLPP_COLL_P2P_LL_MAX=4096 mscclpp-run -n 4 --timeout 190 -- \
    "$BIN/coll_gpu_worker" $((64 << 20)) p2psmall
  # plain stream order: programmatic dependent launch off (on by default on Hopper)
  have coll_gpu_worker && step "coll_gpu_2_nopdl" 200 env MSCCLPP_COLL_PDL=0 mscclpp-run -n 2 --timeout 190 -- \
    "$BIN/coll_gpu_worker" $((4 << 20)) graph=100
  have coll_gpu_worker && step "coll_gpu_2 memcheck" 400 mscclpp-run -n 2 --timeout 390 -- \
    compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/coll_gpu_worker" 300000
  # the hang report on the GPU backend: the last rank never calls allreduce
  # #2; rank 0's kernel waits for its packets, writes its note on the wait
  # board (peer, call), times out, and the reports and the launcher's
  # diagnosis say so (tests/trace/test_hang_report.sh, HANG_DEVICE=1)
  have hang_worker && step hang_report_gpu_2 120 env HANG_DEVICE=1 MSCCLPP_TIMEOUT=4 \
    bash "$BIN/test_hang_report.sh" "$BIN/mscclpp-run" "$BIN/hang_worker" silent 2
fi
if [ "$what" = collport ] || [ "$what" = tests ] || [ "$what" = all ]; then
  # The GPU collectives over port channels (coll/coll_gpu_port.c), checked
  # exactly by coll_gpu_worker: forced by MSCCLPP_ALGO on one host (port
  # channels over CUDA IPC), and 4 ranks as 2 pretend hosts of 2
  # (MSCCLPP_HOSTID, tests/collgpu/hosts.sh): CUDA IPC inside a "host", the
  # network transport (tcp;ofi_rxm over loopback; the slots for network peers
  # are pinned host memory) between.
  if have coll_gpu_worker; then
    port=allreduce=port,allgather=port,reducescatter=port,broadcast=port,reduce=port,alltoall=port,sendrecv=port
    step coll_port_ipc_2 150 env MSCCLPP_ALGO=$port mscclpp-run -n 2 --timeout 140 -- "$BIN/coll_gpu_worker" $((4 << 20)) graph=100
    # allreduce is hierarchical there by default; the flat path forced
    step coll_port_hosts_2x2 280 env MSCCLPP_NET_PROVIDER='tcp;ofi_rxm' MSCCLPP_NET_IFNAME==lo mscclpp-run -n 4 --timeout 270 -- \
      bash "$BIN/hosts.sh" 2 "$BIN/coll_gpu_worker" $((2 << 20)) graph=20
    step coll_port_hosts_2x2_flat 200 env MSCCLPP_ALGO=allreduce=flat MSCCLPP_NET_PROVIDER='tcp;ofi_rxm' MSCCLPP_NET_IFNAME==lo \
      mscclpp-run -n 4 --timeout 190 -- bash "$BIN/hosts.sh" 2 "$BIN/coll_gpu_worker" $((2 << 20)) graph=20
    step coll_port_ipc_4 150 env MSCCLPP_ALGO=$port mscclpp-run -n 4 --timeout 140 -- "$BIN/coll_gpu_worker" $((4 << 20)) graph=100
  fi
  # the hierarchy with calls queued back to back (no wait between them), checked
  have mscclpp-perf && step perf_hosts_2x2_hier 200 env MSCCLPP_NET_PROVIDER='tcp;ofi_rxm' MSCCLPP_NET_IFNAME==lo \
    mscclpp-run -n 4 --timeout 190 -- bash "$BIN/hosts.sh" 2 "$BIN/mscclpp-perf" allreduce -b 1K -e 16M -f 8 -c 1 -n 20 -w 5
fi
if [ "$what" = bench ] || [ "$what" = all ] || [ "$what" = coll ]; then
  for n in 2 4; do
    have bench_coll && step "bench_coll_$n" 300 mscclpp-run -n $n --timeout 290 -- "$BIN/bench_coll"
  done
fi
if [ "$what" = all ] || [ "$what" = coll ]; then
  have coll_gpu_worker && step "coll_gpu_2 racecheck" 300 mscclpp-run -n 2 --timeout 290 -- \
    compute-sanitizer --tool racecheck --error-exitcode 9 "$BIN/coll_gpu_worker" 70000
fi
if [ "$what" = all ] || [ "$what" = perf ]; then
  if have mscclpp-perf; then
    for c in allreduce allgather reducescatter broadcast reduce alltoall sendrecv alltoallv; do
      step "perf_check_${c}_2" 200 mscclpp-run -n 2 --timeout 190 -- "$BIN/mscclpp-perf" $c -b 1 -e 4M -f 8 -d all -o all -c 1 -n 2 -w 1
    done
    step "perf_check_allreduce_4_graph" 200 mscclpp-run -n 4 --timeout 190 -- "$BIN/mscclpp-perf" allreduce -b 1K -e 64M -f 4 -d float,bfloat16 -o sum -c 1 -G 2
    # issue 23: small send/recv as LL packets against the packet path off
    # and the one-shot allreduce of the same sizes, eager and in a graph
    for g in 0 5; do
      step "perf_sendrecv_small_2_G$g" 100 mscclpp-run -n 2 --timeout 90 -- "$BIN/mscclpp-perf" sendrecv -b 8 -e 128K -f 2 \
        -c 1 -w 20 -n 200 -G $g -J "$OUT/perf_sendrecv_small_2_G$g.json"
      step "perf_sendrecv_small_noll_2_G$g" 100 env MSCCLPP_COLL_P2P_LL_MAX=0 mscclpp-run -n 2 --timeout 90 -- \
        "$BIN/mscclpp-perf" sendrecv -b 8 -e 128K -f 2 -c 1 -w 20 -n 200 -G $g -J "$OUT/perf_sendrecv_small_noll_2_G$g.json"
      step "perf_allreduce_small_2_G$g" 100 mscclpp-run -n 2 --timeout 90 -- "$BIN/mscclpp-perf" allreduce -b 8 -e 128K -f 2 \
        -c 1 -w 20 -n 200 -G $g -J "$OUT/perf_allreduce_small_2_G$g.json"
    done
    for n in 2 4; do
      for c in allreduce allgather alltoallv; do
        step "perf_${c}_${n}" 200 mscclpp-run -n $n --timeout 190 -- "$BIN/mscclpp-perf" $c -b 1K -e 256M -f 8 -c 0 -w 5 -n 20 -G 5 -J "$OUT/perf_${c}_${n}.json"
      done
    done
  fi
fi
if [ "$what" = moe ]; then
  # Issue 23: an MoE layer's dispatch + combine step three ways in one run
  # (bench/bench_moe.c: ours with the counts on the GPU, graph and eager;
  # the counts through the host and grouped ncclSend/ncclRecv of our NCCL
  # library; the HBM roofline), then the all-to-all-v, all-to-all and
  # send/recv sweeps it is made of, checked. About 4 minutes in all.
  for n in 2 4; do
    have bench_moe && step "bench_moe_$n" 120 mscclpp-run -n $n --timeout 110 -- \
      "$BIN/bench_moe" --nccl "$BIN/lib/libmscclpp_nccl.so"
  done
  if have mscclpp-perf; then
    for n in 2 4; do
      for c in alltoallv alltoall sendrecv; do
        step "perf_moe_${c}_${n}" 60 mscclpp-run -n $n --timeout 55 -- "$BIN/mscclpp-perf" $c -b 1K -e 256M -f 8 \
          -c 1 -w 5 -n 20 -J "$OUT/perf_moe_${c}_${n}.json"
      done
      # send/recv with every send through the receiver's scratch, for comparison
      step "perf_moe_sendrecv_scratch_${n}" 60 env MSCCLPP_COLL_P2P_ZERO_COPY=0 mscclpp-run -n $n --timeout 55 -- \
        "$BIN/mscclpp-perf" sendrecv -b 1K -e 256M -f 8 -c 1 -w 5 -n 20 -J "$OUT/perf_moe_sendrecv_scratch_${n}.json"
    done
  fi
fi
if [ "$what" = all ] || [ "$what" = trace ]; then
  # MSCCLPP_TRACE on the GPU (issue 25: at most 5% at 1 KiB allreduce, on
  # against off). What a block's record costs the kernel, by where it goes:
  have bench_trace_gpu && step bench_trace_gpu 120 "$BIN/bench_trace_gpu"
  if have mscclpp-perf; then
    tdir=$(mktemp -d)
    mkdir -p "$tdir/graph"
    # 4 ranks under MPS, tracing off and on alternated 5 times: both medians and the ratio; the last
    # traced run's files checked: every rank's calls with kernel block spans (one block per 1 KiB call)
    step trace_overhead_4 400 bash scripts/trace-overhead.sh -n 4 -r 5 -i 5000 -w 200 -k "$tdir/eager" "$BIN"
    have mscclpp-trace && step trace_check_eager_4 120 bash -c "python3 tests/trace/check_trace.py --require allreduce \
      --gpu-blocks 10000 $tdir/eager/rank*.json && $BIN/mscclpp-trace merge $tdir/eager/rank*.json -o $tdir/eager.json \
      && $BIN/mscclpp-trace summary $tdir/eager.json"
    # a CUDA graph of 100 calls replayed 20 times: the replays record too (2000 block spans per rank at least)
    step trace_graph_4 200 mscclpp-run -n 4 --timeout 190 -- "$BIN/mscclpp-perf" allreduce -b 1K -e 1K -n 100 -w 5 \
      -c 0 -G 20 --trace "$tdir/graph/rank%r.json"
    step trace_check_graph_4 120 python3 tests/trace/check_trace.py --require allreduce --gpu-blocks 2000 \
      "$tdir"/graph/rank*.json
    rm -rf "$tdir"
  fi
fi
if [ "$what" = all ] || [ "$what" = net ]; then
  have channel_worker_gpu && step net_gpu_staged_2 200 env MSCCLPP_NET_IFNAME==lo mscclpp-run -n 2 --timeout 190 -- "$BIN/channel_worker_gpu" net 67108864
  have channel_worker_gpu && step "channel_mp_gpu_2 (after net)" 300 mscclpp-run -n 2 --timeout 280 -- "$BIN/channel_worker_gpu" gpu quick
fi
if [ "$what" = all ] || [ "$what" = torch ]; then
  NLIB=$BIN/lib/libmscclpp_nccl.so
  if [ -e "$NLIB" ]; then
    step torch_test 540 python3 tests/nccl/torch_test.py --lib "$NLIB" --nprocs 2,4 --timeout 250
    # PyTorch registering every caching-allocator segment (ncclCommRegister)
    step torch_test_reghook 300 env TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK=1 \
      python3 tests/nccl/torch_test.py --lib "$NLIB" --nprocs 2 --modes eager --skip-ddp --timeout 250
    step torch_allreduce_2 200 python3 bench/torch_allreduce.py --lib "$NLIB" --nprocs 2 --graph --timeout 190
    step torch_allreduce_2_eager 200 python3 bench/torch_allreduce.py --lib "$NLIB" --nprocs 2 --timeout 190
  fi
  MLIB=$BIN/lib/libmscclpp.so
  if [ -e "$MLIB" ]; then
    # the Python package's own torch.distributed backend (no preload): the same checks, DDP included
    step torch_python_backend 400 python3 tests/nccl/torch_test.py --no-preload --mscclpp-lib "$MLIB" \
      --modes python-backend --nprocs 2,4 --timeout 190
    step torch_allreduce_2_python_backend 200 python3 bench/torch_allreduce.py --python-backend "$MLIB" --nprocs 2 --timeout 190
    # kernels of one's own over memory channels, from CuPy
    step cupy_channels_2 120 env MSCCLPP_LIBRARY="$MLIB" PYTHONPATH="$PWD/python" mscclpp-run -n 2 --timeout 110 -- \
      python3 python/examples/cupy_channels.py
    step cupy_channels_4 120 env MSCCLPP_LIBRARY="$MLIB" PYTHONPATH="$PWD/python" mscclpp-run -n 4 --timeout 110 -- \
      python3 python/examples/cupy_channels.py
    # all-to-all-v from Python with CuPy arrays, its counts on the GPU
    for n in 2 4; do
      step "python_all_to_all_v_$n" 120 env MSCCLPP_LIBRARY="$MLIB" PYTHONPATH="$PWD/python" mscclpp-run -n $n --timeout 110 -- \
        python3 python/tests/gpu_all_to_all_v.py
    done
  fi
fi
if [ "$what" = py ]; then
  # The Python package on the GPU (issue 26), 2 and 4 ranks sharing the GPU
  # under MPS; ~4-5 min, every step bounded (17 min at most in all):
  # every Python call on CuPy arrays and PyTorch tensors (test_coll.py), the
  # CuPy kernel example;
  # mscclpp.torch through torch_test.py's checks (every collective, the list
  # forms, groups, destroy_process_group; its DDP check is gpu_ddp's here),
  # DDP against one process on the full batch through mscclpp.torch and
  # through the NCCL shim, and what each layer costs per allreduce (the C
  # API, PyTorch on the shim, PyTorch on mscclpp.torch; eager and graph):
  # one table per rank count, the JSON in $OUT/torch_layers.
  MLIB=$BIN/lib/libmscclpp.so NLIB=$BIN/lib/libmscclpp_nccl.so
  step py_torch_backend 180 python3 tests/nccl/torch_test.py --no-preload --mscclpp-lib "$MLIB" \
    --modes python-backend --nprocs 2,4 --skip-ddp --timeout 80
  # every collective, type and operator (and send/recv, all-to-all-v with
  # its counts on the GPU) on CuPy arrays and PyTorch tensors, checked
  # exactly, each call on the framework's own stream (python/tests/test_coll.py)
  for a in cupy torch; do
    for n in 2 4; do
      step "py_coll_${a}_$n" 120 env MSCCLPP_LIBRARY="$MLIB" PYTHONPATH="$PWD/python" mscclpp-run -n $n --timeout 110 -- \
        python3 python/tests/test_coll.py $a
    done
  done
  # kernels of one's own over memory channels, from CuPy (the example)
  for n in 2 4; do
    step "py_cupy_channels_$n" 120 env MSCCLPP_LIBRARY="$MLIB" PYTHONPATH="$PWD/python" mscclpp-run -n $n --timeout 110 -- \
      python3 python/examples/cupy_channels.py
  done
  step py_ddp_mscclpp 90 python3 python/tests/gpu_ddp.py --nprocs 2,4 --mscclpp-lib "$MLIB" --timeout 40
  step py_ddp_shim 90 python3 python/tests/gpu_ddp.py --nprocs 2,4 --backend nccl --nccl-lib "$NLIB" --timeout 40
  for n in 2 4; do
    step "py_layers_$n" 100 python3 bench/torch_layers.py --nprocs $n --bin "$BIN" --timeout 60 --budget 90 \
      --out "$OUT/torch_layers"
  done
fi
if [ "$what" = all ] || [ "$what" = chaos ]; then
  # Chaos on the GPU (issue 24), under 3 minutes: 20 trials through the NCCL
  # API, 4 ranks sharing the GPU, kernels in flight when a rank is SIGKILLed,
  # survivors shrink (NCCL_SHRINK_ABORT) and check 100 more calls; their
  # threads and the device memory must come back (tests/chaos/chaos.c). Then
  # PyTorch training on 4 ranks that loses rank 2, then rank 0, and goes on
  # (tests/nccl/torch_shrink.py). Summary lines: chaos:, kill to first...,
  # kernels in flight:, resources:, torch_shrink:
  have chaos_nccl && step chaos_nccl_gpu_4 100 env LD_LIBRARY_PATH="$BIN/lib:${LD_LIBRARY_PATH:-}" \
    "$BIN/chaos_nccl" --gpu --trials 20 --seed 1
  [ -e "$BIN/lib/libmscclpp_nccl.so" ] && step torch_shrink_4 95 python3 tests/nccl/torch_shrink.py \
    --lib "$BIN/lib/libmscclpp_nccl.so" --nprocs 4 --kill 2@20,0@40 --timeout 85
  # the other way a PyTorch user recovers: abort the group, init_process_group anew (any PyTorch)
  [ -e "$BIN/lib/libmscclpp_nccl.so" ] && step torch_reinit_4 95 python3 tests/nccl/torch_shrink.py \
    --lib "$BIN/lib/libmscclpp_nccl.so" --nprocs 4 --kill 2@20,0@40 --timeout 85 --how reinit
fi
if [ "$what" = plan ]; then
  export MSCCLPP_PLAN_GPU=1 # the default; said here so that a stray MSCCLPP_PLAN_GPU=0 does not skip the stage
  # Execution plans on the GPU executor (src/coll/plan/plan_gpu*.{c,cu},
  # issue 27): the hand-made plans (tests/plan/data) and the default ones
  # (plans/default, when present), every plan for the rank count checked
  # exactly on device buffers (fresh inputs, poisoned outputs, sizes from 1
  # element, odd ones staged and padded), then captured in a CUDA graph and
  # replayed 100 times (checked every 10th), then against the built-in
  # algorithm; memcheck runs; mscclpp-perf --plan for each default plan
  # beside its built-in algorithm (checked; the ratio is the plan's time
  # over the built-in's). About 8 minutes.
  if have plan_worker; then
    for n in 2 4; do
      for d in tests/plan/data plans/default tests/plan/mscclpp_dsl; do
        [ -d "$d" ] || continue
        tag=$(basename "$d")
        step "plan_gpu_run_${n}_$tag" 90 env MSCCLPP_PLAN_WORKER_GPU=1 mscclpp-run -n $n --timeout 80 -- \
          "$BIN/plan_worker" run "$d" $((1 << 20))
        step "plan_gpu_graph_${n}_$tag" 60 mscclpp-run -n $n --timeout 50 -- "$BIN/plan_worker" graph "$d" $((4 << 20)) 100
        step "plan_gpu_compare_${n}_$tag" 40 env MSCCLPP_PLAN_WORKER_GPU=1 mscclpp-run -n $n --timeout 30 -- \
          "$BIN/plan_worker" compare "$d"
      done
    done
    step "plan_gpu_run_2 memcheck" 120 env MSCCLPP_PLAN_WORKER_GPU=1 mscclpp-run -n 2 --timeout 110 -- \
      compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/plan_worker" run tests/plan/data 4096
    # the default plans too, zero-copy and mailboxes included, at 4 ranks
    step "plan_gpu_run_4_default memcheck" 150 env MSCCLPP_PLAN_WORKER_GPU=1 mscclpp-run -n 4 --timeout 140 -- \
      compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/plan_worker" run plans/default 16384
  fi
  if have mscclpp-perf; then
    pdir=plans/default
    [ -d "$pdir" ] || pdir=tests/plan/data
    for f in "$pdir"/*.json; do
      for n in 2 4; do
        nr=$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["gpus"]))' "$f" 2>/dev/null)
        [ "$nr" = "$n" ] || continue
        step "perf_plan_${n}_$(basename "$f" .json)" 40 mscclpp-run -n $n --timeout 35 -- \
          "$BIN/mscclpp-perf" --plan "$f" -b 1K -e 256M -f 8 -c 1 -n 5 -w 2
      done
    done
    # the same in CUDA graphs (-G): the kernel's own time without the
    # host's per-call cost, for the two plans the built-in algorithms mirror
    for f in "$pdir"/allreduce-oneshot-4ranks-LL.json "$pdir"/allreduce-rsag-4ranks-Simple.json; do
      [ -f "$f" ] || continue
      step "perf_plan_4_graph_$(basename "$f" .json)" 40 mscclpp-run -n 4 --timeout 35 -- \
        "$BIN/mscclpp-perf" --plan "$f" -b 1K -e 64M -f 8 -c 1 -n 20 -w 2 -G 10
    done
    # the executor's own fixed cost per call: the oneshot LL plans with
    # every op a nop (same blocks, channels and barriers; results not
    # checked), eager and in graphs, beside the built-in allreduce
    mkdir -p "$OUT/nop"
    for n in 2 4; do
      f="$pdir/allreduce-oneshot-${n}ranks-LL.json"
      [ -f "$f" ] || continue
      python3 -c 'import json, sys
d = json.load(open(sys.argv[1])); d["name"] = "allreduce-nop-%dranks" % len(d["gpus"])
for g in d["gpus"]:
    for tb in g["threadblocks"]: tb["ops"] = [{"name": "nop"}]
json.dump(d, open(sys.argv[2], "w"))' "$f" "$OUT/nop/allreduce-nop-${n}ranks.json" || continue
      for G in 0 10; do
        step "perf_plan_${n}_nop_G$G" 40 mscclpp-run -n $n --timeout 35 -- \
          "$BIN/mscclpp-perf" --plan "$OUT/nop/allreduce-nop-${n}ranks.json" -b 1K -e 64K -f 8 -c 0 -n 20 -w 2 -G $G
      done
    done
  fi
fi
if [ "$what" = all ] || [ "$what" = nccl ]; then
  # NVIDIA's nccl-tests through libmscclpp_nccl.so: the whole matrix
  # (scripts/nccl-tests.sh says what it needs carried); its summary and logs
  # go to $OUT
  step nccl_tests 590 env OUT="$OUT" NCCL_TESTS_BUDGET=560 bash scripts/nccl-tests.sh all
fi
if [ "$what" = tune ]; then
  # Tuning experiments: the channel ping-pongs, small correctness runs of
  # what changed, and the collectives under the tuning parameters.
  have bench_channel && step bench_channel 200 mscclpp-run -n 2 --timeout 180 -- "$BIN/bench_channel"
  have bench_channel_host && step bench_channel_host 120 mscclpp-run -n 2 --timeout 100 -- "$BIN/bench_channel_host"
  have channel_worker_gpu && step channel_mp_gpu_2_quick 300 mscclpp-run -n 2 --timeout 280 -- "$BIN/channel_worker_gpu" gpu quick
  for n in 2 4; do
    have coll_gpu_worker && step "coll_gpu_${n}_4M" 300 mscclpp-run -n $n --timeout 290 -- "$BIN/coll_gpu_worker" $((4 << 20)) graph
    for pb in 0 32 64; do
      have bench_coll && step "bench_coll_${n}_packetblocks_$pb" 200 env MSCCLPP_COLL_PACKET_BLOCKS=$pb \
        mscclpp-run -n $n --timeout 190 -- "$BIN/bench_coll" $((4 << 20))
    done
    for db in 0 33 66 99; do
      have mscclpp-perf && step "perf_allgather_${n}_directblocks_$db" 120 env MSCCLPP_COLL_DIRECT_BLOCKS=$db \
        mscclpp-run -n $n --timeout 110 -- "$BIN/mscclpp-perf" allgather -b 256M -e 256M -c 0 -w 5 -n 20 -G 5
    done
  done
  have bench_net && step bench_net 200 env MSCCLPP_NET_PROVIDER='tcp;ofi_rxm' MSCCLPP_NET_IFNAME==lo \
    mscclpp-run -n 2 --timeout 190 -- "$BIN/bench_net"
fi
echo quit | nvidia-cuda-mps-control >>"$LOG" 2>&1

if [ "$what" = py ]; then
  # the verdicts and the layer tables in full
  grep -E "\] (PASS|FAIL):|^gpu_ddp: [0-9]+ ranks.*: (PASS|FAIL)|^torch_layers: (PASS|FAIL)" "$LOG"
  sed -n '/^# allreduce, float32 sum, in place/,/^torch_layers: /p' "$LOG"
fi
grep -E "^(PASS|FAIL|SKIPPED|[0-9]+ passed)|ratio|goal|us |µs|GB/s|M/s|ERROR|error|wrong|roofline|on/off|vs none|block spans|records numbered|^(chaos|torch_shrink|kernels in flight|resources):|^kill to first|^  of which" "$LOG" | tail -n 80
echo "---- summary ----"
printf '%s\n' "${summary[@]}"
