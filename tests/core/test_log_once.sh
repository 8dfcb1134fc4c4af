#!/usr/bin/env bash
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

out=$(unset NCCL_DEBUG MSCCLPP_DEBUG_SUBSYS; MSCCLPP_DEBUG=bogus job)
n=$(echo "$out" | grep -c 'MSCCLPP_DEBUG="bogus" is not one of')
[ "$n" -eq 2 ] || fail "2 ranks, 4 sizes: MSCCLPP_DEBUG=bogus warned $n times, not once per rank"

out=$(unset NCCL_DEBUG MSCCLPP_DEBUG_SUBSYS; MSCCLPP_DEBUG=INFO job)
echo "$out" | grep -q "Avg bus bandwidth" || fail "the job with MSCCLPP_DEBUG=INFO did not run: $out"
echo "$out" | grep -q "no CUDA device" && fail "CUDA's words for a missing GPU are logged: $(echo "$out" | grep -m1 'no CUDA device')"
n=$(echo "$out" | grep -cE "no GPU (driver|found): using the host backend")
if "$INFO" | grep -q '^CUDA: off' || "$INFO" | grep -qE '^GPUs: [1-9]'; then
  [ "$n" -eq 0 ] || fail "the missing GPU was logged $n times on a build or machine where none is missing"
else
  [ "$n" -eq 2 ] || fail "2 ranks, 4 sizes: the missing GPU was logged $n times, not once per rank"
fi
if [ $failed -eq 0 ]; then echo "1 passed, 0 failed"; else echo "0 passed, 1 failed"; fi
[ $failed -eq 0 ]
