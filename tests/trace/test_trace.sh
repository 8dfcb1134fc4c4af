#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# MSCCLPP_TRACE on the host backend: trace_worker runs every collective and a
# send/recv group (twice: 1 KiB and 64 KiB per rank) under mscclpp-run, and
# check_trace.py checks each rank's file (valid JSON in the line-per-event
# layout, the calls in order with sequence numbers, the same calls on every
# rank). Extra arguments name events the files must have besides the calls
# (the proxy's and the network's, across pretend hosts).
#
# Then mscclpp-trace merges the files (checked against them) and summarises
# the merged trace (every collective at both sizes, one call each).
#
#   test_trace.sh RUN WORKER CHECK NRANKS TRACETOOL [required,events]
# Exits 77 (skipped) without python3, or where ranks on pretend hosts need
# the network transport and it is not available.
set -u
run=$1 worker=$2 check=$3 n=$4 tool=$5 require=${6:-}
command -v python3 >/dev/null || { echo "SKIP: needs python3"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
once="allreduce,allgather,reducescatter,broadcast,reduce,alltoall,sendrecv"
MSCCLPP_TRACE="$dir/rank%r.json" "$run" -n "$n" --timeout 50 -- "$worker" all >"$dir/out" 2>&1
status=$?
cat "$dir/out"
if grep -q "SKIP:" "$dir/out"; then exit 77; fi
[ "$status" -eq 0 ] || { echo "FAIL: the ranks exited with status $status"; exit 1; }
files=$(ls "$dir"/rank*.json 2>/dev/null | wc -l)
[ "$files" -eq "$n" ] || { echo "FAIL: $files trace files for $n ranks: $(ls "$dir")"; exit 1; }
"$tool" merge "$dir"/rank*.json -o "$dir/job.json" || { echo "FAIL: mscclpp-trace merge exited $?"; exit 1; }
python3 "$check" --expect "comm_init,$once,$once,comm_destroy" --require "worker.step${require:+,$require}" \
  --merged "$dir/job.json" "$dir"/rank*.json || exit 1
# the worker's own span (mscclppTraceStart/End): the strings as they were, copied; none for t0 0
for f in "$dir"/rank*.json; do
  grep -q '"name":"worker.step","cat":"user",.*"args":{"name":"worker.step","detail":"1 KiB and 64 KiB","value":14}' "$f" ||
    { echo "FAIL: $f has no worker.step span with its detail and value"; exit 1; }
  ! grep -q 'worker.never' "$f" || { echo "FAIL: $f has a span recorded with t0 = 0"; exit 1; }
done
"$tool" summary "$dir/job.json" >"$dir/summary" || { echo "FAIL: mscclpp-trace summary exited $?"; exit 1; }
cat "$dir/summary"
for coll in ${once//,/ }; do
  rows=$(awk -v c="$coll" '/^# [a-z]+, [0-9]+ ranks$/ { cur = $2 } /^ +[0-9]/ && cur == c "," { n++ } END { print n + 0 }' \
    "$dir/summary")
  [ "$rows" -eq 2 ] || { echo "FAIL: summary has $rows rows of $coll, expected 2 (1 KiB and 64 KiB)"; exit 1; }
done
grep -q "14 calls" "$dir/summary" || { echo "FAIL: summary does not count 14 calls"; exit 1; }
echo "merge and summary passed"
