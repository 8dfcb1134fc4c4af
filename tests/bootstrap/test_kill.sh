#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test_kill.sh LAUNCHER WORKER NRANKS VICTIM[,VICTIM...]
# Runs NRANKS workers in "kill VICTIMS" mode with --keep-going. Each victim
# SIGKILLs itself (the worker says when: during an allgather, an allreduce,
# ...); each survivor must print SURVIVOR_OK (it got mscclppRemoteError
# naming the victim within 10 s, later calls failed at once, and destroy
# worked; or, for recover_worker, it went on on a shrunk communicator). The
# launcher must report the first victim's signal (137), and the whole run
# must end well before the 30 s timeout. KILL_MODE names the worker's mode
# (default: kill).
set -u
launcher=$1 worker=$2 n=$3 victim=$4
victims=" ${victim//,/ } "
nvictims=$(echo $victim | tr ',' ' ' | wc -w)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
start=$(date +%s%N)
MSCCLPP_TIMEOUT=30 "$launcher" -n "$n" --keep-going --timeout 50 -- "$worker" "${KILL_MODE:-kill}" "$victim" >"$out" 2>&1
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
if [ "$survivors" -ne $((n - nvictims)) ]; then
  echo "FAIL: $survivors of $((n - nvictims)) survivors reported SURVIVOR_OK"
  fail=1
fi
for r in $(seq 0 $((n - 1))); do
  case "$victims" in *" $r "*) continue ;; esac
  grep -q "^\[$r\] SURVIVOR_OK" "$out" || { echo "FAIL: rank $r did not report SURVIVOR_OK"; fail=1; }
done
if [ "$elapsed_ms" -gt 20000 ]; then
  echo "FAIL: the run took $elapsed_ms ms (a survivor waited for the timeout?)"
  fail=1
fi
echo "kill test: $n ranks, victim $victim, launcher status $status, $survivors survivors OK, $elapsed_ms ms"
exit $fail
