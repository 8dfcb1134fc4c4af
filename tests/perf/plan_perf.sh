#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# mscclpp-perf --plan: a 4-rank allreduce plan and an in-place allgather plan
# run checked (-c 1) beside the built-in algorithm with odd sizes, the
# table has the ratio column and the JSON names the plan; a plan for another
# rank count and a collective that is not the plan's are refused.
#
#   plan_perf.sh path/to/mscclpp-run path/to/mscclpp-perf tests/plan/data
set -u
RUN=${1:?mscclpp-run}
PERF=${2:?mscclpp-perf}
DATA=${3:?tests/plan/data}
failed=0
fail() {
  echo "FAIL: $*" >&2
  failed=$((failed + 1))
}
json=$(mktemp /tmp/mscclpp_plan_perf.XXXXXX.json)
trap 'rm -f "$json"' EXIT

out=$("$RUN" -n 4 --timeout 100 -- "$PERF" --plan "$DATA/allreduce_rres_4.json" -b 20 -e 200K -f 9 -d float,int32 \
  -o sum,max -n 3 -J "$json" 2>&1) || fail "allreduce plan: exit $?: $out"
echo "$out" | grep '^\[0\]'
echo "$out" | grep -q '# plan test_allreduce_rres_4 ' || fail "no plan line"
echo "$out" | grep -q 'Out of bounds values : 0 OK' || fail "results not checked OK"
rows=$(echo "$out" | grep -cE '^\[0\] +[0-9]+ .* [0-9]+\.[0-9]+$')
[ "$rows" -ge 8 ] || fail "expected at least 8 rows with a ratio, got $rows"
grep -q '"plan": {"name": "test_allreduce_rres_4"' "$json" || fail "the JSON does not name the plan"
grep -q '"builtin": {' "$json" || fail "the JSON has no builtin results"

out=$("$RUN" -n 4 --timeout 100 -- "$PERF" allgather --plan "$DATA/allgather_port_4.json" -b 4 -e 64K -f 16 -n 3 \
  2>&1) || fail "allgather plan: exit $?: $out"
echo "$out" | grep -q 'both in place' || fail "the in-place allgather plan is not timed in place: $out"
echo "$out" | grep -q 'Out of bounds values : 0 OK' || fail "allgather results not checked OK"

out=$("$RUN" -n 2 --timeout 50 -- "$PERF" --plan "$DATA/allreduce_rres_4.json" -b 1K -e 1K 2>&1)
[ $? -ne 0 ] || fail "a 4-rank plan on 2 ranks was not refused"
echo "$out" | grep -q 'is for 4 ranks; this run has 2' || fail "no message for the rank count: $out"
out=$("$PERF" allgather --plan "$DATA/allreduce_rres_4.json" 2>&1)
[ $? -eq 2 ] || fail "a collective other than the plan's does not exit 2"
echo "$out" | grep -q 'is a plan for allreduce, not allgather' || fail "no message for the collective: $out"

[ $failed -eq 0 ] && echo "1 passed, 0 failed" || echo "0 passed, 1 failed"
[ $failed -eq 0 ]
