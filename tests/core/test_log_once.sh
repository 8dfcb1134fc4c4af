#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What a job logs once per process, not once per call: a bad MSCCLPP_DEBUG
# value is reported once by each rank, and (with CUDA compiled in on a
# machine without a GPU) the missing GPU once, at INFO, in our words.
#   test_log_once.sh mscclpp-run mscclpp-perf mscclpp-info
set -u
RUN=$1 PERF=$2 INFO=$3
failed=0
fail() {
  echo "FAIL: $*"
  failed=1
}
job() { "$RUN" -n 2 --timeout 50 -- "$PERF" allreduce -b 8 -e 1K -f 4 -n 2 -w 1 2>&1; }
# count PATTERN: "LINES PROCESSES", the lines of $out that match and the
# distinct processes (host:pid:tid, after mscclpp-run's "[r] ") that wrote
# them; the launcher may log too, so "once per process" is LINES == PROCESSES
# with at least the 2 ranks.
count() {
  local pids
  pids=$(echo "$out" | grep -E "$1" | sed -E 's/^\[[0-9]+\] //' | cut -d: -f2)
  echo "$(echo "$pids" | grep -c .) $(echo "$pids" | grep . | sort -u | wc -l)"
}

out=$(unset NCCL_DEBUG MSCCLPP_DEBUG_SUBSYS; MSCCLPP_DEBUG=bogus job)
read -r n distinct <<<"$(count 'MSCCLPP_DEBUG="bogus" is not one of')"
[ "$n" -eq "$distinct" ] && [ "$distinct" -ge 2 ] ||
  fail "2 ranks, 4 sizes: MSCCLPP_DEBUG=bogus warned $n times from $distinct processes, not once per process"

out=$(unset NCCL_DEBUG MSCCLPP_DEBUG_SUBSYS; MSCCLPP_DEBUG=INFO job)
echo "$out" | grep -q "Avg bus bandwidth" || fail "the job with MSCCLPP_DEBUG=INFO did not run: $out"
echo "$out" | grep -q "no CUDA device" && fail "CUDA's words for a missing GPU are logged: $(echo "$out" | grep -m1 'no CUDA device')"
read -r n distinct <<<"$(count "no GPU (driver|found): using the host backend")"
if "$INFO" | grep -q '^CUDA: off' || "$INFO" | grep -qE '^GPUs: [1-9]'; then
  [ "$n" -eq 0 ] || fail "the missing GPU was logged $n times on a build or machine where none is missing"
else
  [ "$n" -eq "$distinct" ] && [ "$distinct" -ge 2 ] ||
    fail "2 ranks, 4 sizes: the missing GPU was logged $n times by $distinct processes, not once per process"
fi
if [ $failed -eq 0 ]; then echo "1 passed, 0 failed"; else echo "0 passed, 1 failed"; fi
[ $failed -eq 0 ]
