#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# expect_wrong.sh LAUNCHER PERF
# The checker catches a wrong result: with --inject-error rank 0 corrupts one
# element after each checked call; every rank must exit non-zero, the table
# must show #wrong > 0 and the footer must say FAILED. Also, a run without the
# injection passes (the same sizes), so the failure is the injection's.
set -u
run=$1 perf=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail=0
for coll in allreduce allgather reducescatter broadcast reduce alltoall sendrecv alltoallv; do
  "$run" -n 2 --keep-going --timeout 50 -- "$perf" "$coll" -b 4K -e 4K -d float32,int8 -o avg,sum -n 1 -w 0 \
    --inject-error >"$out" 2>&1
  status=$?
  if [ "$status" -eq 0 ]; then
    echo "FAIL: $coll --inject-error exited 0"; cat "$out"; fail=1; continue
  fi
  if ! grep -q "Out of bounds values : [1-9][0-9]* FAILED" "$out"; then
    echo "FAIL: $coll --inject-error: no FAILED footer"; cat "$out"; fail=1; continue
  fi
  # every row's out-of-place #wrong column (the 9th field after "[0]") is > 0
  bad=$(awk '$1 == "[0]" && $2 ~ /^[0-9]+$/ && $10 == "0"' "$out" | wc -l)
  rows=$(awk '$1 == "[0]" && $2 ~ /^[0-9]+$/' "$out" | wc -l)
  if [ "$rows" -eq 0 ] || [ "$bad" -ne 0 ]; then
    echo "FAIL: $coll --inject-error: $rows rows, $bad with #wrong 0"; cat "$out"; fail=1; continue
  fi
  grep -q "element .* is 0x" "$out" || { echo "FAIL: $coll: no element reported"; cat "$out"; fail=1; continue; }
  "$run" -n 2 --timeout 50 -- "$perf" "$coll" -b 4K -e 4K -d float32,int8 -o avg,sum -n 1 -w 0 >"$out" 2>&1 ||
    { echo "FAIL: $coll without --inject-error failed"; cat "$out"; fail=1; continue; }
  echo "$coll: --inject-error reported $rows rows with #wrong > 0, exit $status"
done
exit $fail
