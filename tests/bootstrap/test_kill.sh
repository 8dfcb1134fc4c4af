#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test_kill.sh LAUNCHER WORKER NRANKS VICTIM
# Runs NRANKS workers in "kill VICTIM" mode with --keep-going. The victim
# SIGKILLs itself during an allgather; each survivor must print SURVIVOR_OK
# (it got mscclppRemoteError naming the victim within 10 s, later calls
# failed at once, and destroy worked). The launcher must report the victim's
# signal (137), and the whole run must end well before the 30 s timeout.
set -u
launcher=$1 worker=$2 n=$3 victim=$4
out=$(mktemp)
trap 'rm -f "$out"' EXIT
start=$(date +%s%N)
MSCCLPP_TIMEOUT=30 "$launcher" -n "$n" --keep-going --timeout 50 -- "$worker" kill "$victim" >"$out" 2>&1
status=$?
end=$(date +%s%N)
cat "$out"
elapsed_ms=$(((end - start) / 1000000))
survivors=$(grep -c "SURVIVOR_OK" "$out")
fail=0
if [ "$status" -ne 137 ]; then
  echo "FAIL: launcher exit status $status, expected 137 (the victim's SIGKILL)"
  fail=1
fi
if [ "$survivors" -ne $((n - 1)) ]; then
  echo "FAIL: $survivors of $((n - 1)) survivors reported SURVIVOR_OK"
  fail=1
fi
for r in $(seq 0 $((n - 1))); do
  [ "$r" -eq "$victim" ] && continue
  grep -q "^\[$r\] SURVIVOR_OK" "$out" || { echo "FAIL: rank $r did not report SURVIVOR_OK"; fail=1; }
done
if [ "$elapsed_ms" -gt 20000 ]; then
  echo "FAIL: the run took $elapsed_ms ms (a survivor waited for the timeout?)"
  fail=1
fi
echo "kill test: $n ranks, victim $victim, launcher status $status, $survivors survivors OK, $elapsed_ms ms"
exit $fail
