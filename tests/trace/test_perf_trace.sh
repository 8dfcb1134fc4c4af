#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# mscclpp-perf --trace: the benchmark's own run traced per rank (checked as
# the library's traces are, with a perf.measure span per size and
# placement), and mscclpp-trace summary of it has a row for every size the
# benchmark printed, with at least its timed calls.
#
#   test_perf_trace.sh RUN PERF CHECK TRACETOOL
set -u
run=$1 perf=$2 check=$3 tool=$4
command -v python3 >/dev/null || { echo "SKIP: needs python3"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
iters=5
"$run" -n 2 --timeout 60 -- "$perf" allreduce -b 1K -e 64K -f 4 -n $iters --trace "$dir/rank%r.json" >"$dir/out" 2>&1
status=$?
cat "$dir/out"
[ "$status" -eq 0 ] || { echo "FAIL: mscclpp-perf exited $status"; exit 1; }
grep -q "^\[0\] # MSCCLPP_TRACE=$dir/rank%r.json" "$dir/out" || { echo "FAIL: the header does not name the trace"; exit 1; }
python3 "$check" --require perf.measure,allreduce "$dir"/rank*.json || exit 1
"$tool" summary "$dir"/rank*.json >"$dir/summary" || { echo "FAIL: mscclpp-trace summary exited $?"; exit 1; }
cat "$dir/summary"
for size in $(awk '/^\[0\] +[0-9]+ +[0-9]+ / { print $2 }' "$dir/out"); do
  calls=$(awk -v s="$size" '$1 == s { print $6 }' "$dir/summary")
  [ -n "$calls" ] && [ "$calls" -ge "$iters" ] ||
    { echo "FAIL: summary has ${calls:-no} calls of $size bytes, expected at least $iters"; exit 1; }
done
# a template whose folder cannot be written is refused before the run
"$perf" allreduce --trace /nonexistent/dir/r%r.json >/dev/null 2>&1
[ $? -eq 2 ] || { echo "FAIL: --trace into a missing folder was not refused as bad usage"; exit 1; }
echo "mscclpp-perf --trace passed"
