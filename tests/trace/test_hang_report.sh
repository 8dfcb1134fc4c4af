#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The hang report: runs hang_worker MODE on N ranks under mscclpp-run
# --report with a short MSCCLPP_TIMEOUT and checks that the launcher's
# diagnosis names the rank and the calls, within a few timeouts.
#   test_hang_report.sh RUN WORKER MODE N
set -uo pipefail
run=$1 worker=$2 mode=$3 n=$4
export MSCCLPP_TIMEOUT=${MSCCLPP_TIMEOUT:-2}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
start=$(date +%s)
"$run" -n "$n" --report --timeout 40 -- "$worker" "$mode" >"$out" 2>&1
rc=$?
secs=$(($(date +%s) - start))
fail() {
  echo "---- output"; cat "$out"; echo "----"
  echo "FAIL: $*"
  exit 1
}
last=$((n - 1))
if [ "$mode" = mismatch ]; then
  others="rank 0"
  [ "$n" -gt 2 ] && others="ranks 0, 2"
  [ "$n" -gt 3 ] && others="ranks 0, 2-$last"
  [ "$n" -gt 2 ] && verb="are" || verb="is"
  want="$others $verb in allreduce #2, rank 1 in allgather #2: the ranks called different collectives"
else
  want="rank $last never entered allreduce #2 (its last call was allreduce #1, completed)"
fi
grep -qF "mscclpp-run: hang report of communicator" "$out" || fail "no diagnosis"
grep -qF "$want" "$out" || fail "the diagnosis does not say: $want"
grep -q "^\[[0-9]*\] mscclpp-report: pid=[0-9]* comm=0x[0-9a-f]* rank=[0-9]* nranks=$n issued=" "$out" ||
  fail "no report line in the documented format"
if [ "$mode" = silent ]; then
  grep -q "mscclpp-report: pid=[0-9]* why=timeout" "$out" || fail "no report from a wait that timed out"
  grep -qE "wait(s|ed) to receive from rank $last" "$out" || fail "the diagnosis names no wait for rank $last"
fi
[ "$rc" -eq 0 ] || fail "mscclpp-run exited $rc"
# a few timeouts at most: the report, not the launcher's --timeout, ended it
[ "$secs" -le $((MSCCLPP_TIMEOUT * 6 + 10)) ] || fail "took $secs s"
echo "ok: $mode, $n ranks, $secs s: $want"
