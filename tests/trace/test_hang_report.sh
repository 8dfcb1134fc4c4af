#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The hang report: runs hang_worker MODE on N ranks under mscclpp-run
# --report with a short MSCCLPP_TIMEOUT and checks that the ranks' reports
# and the launcher's diagnosis name the rank, the calls and what each wait
# waits for (peer, semaphore, signals expected and arrived, the peer's own
# last call), and the proxy's queue, within a few timeouts.
#   test_hang_report.sh RUN WORKER MODE N [RANKS_PER_HOST]
# RANKS_PER_HOST: pretend hosts of that many ranks (MSCCLPP_HOSTID): peers
# on other hosts talk through port channels and the proxy (network
# transport on loopback; exits 77, skipped, without libfabric).
set -uo pipefail
run=$1 worker=$2 mode=$3 n=$4 perHost=${5:-}
export MSCCLPP_TIMEOUT=${MSCCLPP_TIMEOUT:-2}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
start=$(date +%s)
if [ -n "$perHost" ]; then
  export HANG_RANKS_PER_HOST=$perHost MSCCLPP_NET_IFNAME="${MSCCLPP_NET_IFNAME:-=lo}" MSCCLPP_ALGO=allreduce=flat
fi
"$run" -n "$n" --report --timeout 40 -- "$worker" "$mode" >"$out" 2>&1
rc=$?
secs=$(($(date +%s) - start))
if grep -q "SKIP:" "$out"; then
  grep "SKIP:" "$out" | head -1
  exit 77
fi
fail() {
  echo "---- output"; cat "$out"; echo "----"
  echo "FAIL: $*"
  exit 1
}
# a line of the diagnosis / of a rank's report (fixed text, or an extended regex)
has() { grep -qF -- "$1" "$out" || fail "the output does not say: $1"; }
hasRe() { grep -qE -- "$1" "$out" || fail "the output has no line matching: $1"; }
last=$((n - 1))
others="rank 0"
[ "$n" -gt 2 ] && others="ranks 0, 2"
[ "$n" -gt 3 ] && others="ranks 0, 2-$last"
[ "$n" -gt 2 ] && verb="are" || verb="is"
sig='[0-9]+' # a semaphore id
case "$mode" in
  mismatch)
    has "$others $verb in allreduce #2, rank 1 in allgather #2: the ranks called different collectives" ;;
  bcast)
    has "$others $verb in allreduce #2, rank 1 in broadcast #2: the ranks called different collectives"
    # each rank of the allreduce waits for rank 1's block, on the data semaphore of rank 1's channel
    hasRe "^\[0\] mscclpp-report: pid=[0-9]+ comm=0x[0-9a-f]+ rank=0 wait=receive peer=1 sem=$sig chan=data expect=3 has=2 call=allreduce#2 waited_ms=[0-9]+ timeout_ms=${MSCCLPP_TIMEOUT}000"
    hasRe "rank 0 waits in allreduce #2 for a data signal from rank 1 on semaphore $sig \(expected 3, has 2\) for [0-9]+ ms; rank 1's last call was broadcast #2 \(failed\)" ;;
  silent)
    has "rank $last never entered allreduce #2 (its last call was allreduce #1, completed)"
    grep -q "mscclpp-report: pid=[0-9]* why=timeout" "$out" || fail "no report from a wait that timed out"
    if [ "${HANG_DEVICE:-0}" != 0 ]; then
      # the GPU kernel's wait, from the wait board: rank 0's allreduce #2 polls rank $last's packets or flag
      hasRe "^\[0\] mscclpp-report: pid=[0-9]+ comm=0x[0-9a-f]+ rank=0 devwait=flag state=(waiting|timedout) peer=$last expect=[0-9]+ (has=[0-9]+ )?call=allreduce#2 block=[0-9]+ thread=[0-9]+$"
      hasRe "rank 0's kernel (waits|timed out waiting) in allreduce #2 for a flag from rank $last \(expected [0-9]+(, has [0-9]+)?\); rank $last's last call was allreduce #1 \(completed\)"
      echo "ok: $mode on the GPU, $n ranks, $secs s"
      [ "$rc" -eq 0 ] || fail "mscclpp-run exited $rc"
      exit 0
    fi
    hasRe "^\[0\] mscclpp-report: pid=[0-9]+ comm=0x[0-9a-f]+ rank=0 wait=receive peer=$last sem=$sig chan=data expect=3 has=2 call=allreduce#2"
    hasRe "rank 0 wait(s|ed) in allreduce #2 for a data signal from rank $last on semaphore $sig \(expected 3, has 2\) for [0-9]+ ms(, then failed)?; rank $last's last call was allreduce #1 \(completed\)"
    if [ -n "$perHost" ]; then
      # the proxy of every rank, in its report: the FIFO's counters, nothing pending
      for r in 0 "$last"; do
        hasRe "^\[$r\] mscclpp-report: pid=[0-9]+ comm=0x[0-9a-f]+ rank=$r proxy=port state=running tail=[1-9][0-9]* head=[1-9][0-9]* completed=[1-9][0-9]* pending=0$"
      done
    fi ;;
  proxy)
    # rank 0's proxy is stopped with its 3 triggers in the FIFO, decoded
    hasRe "^\[0\] mscclpp-report: pid=[0-9]+ comm=0x[0-9a-f]+ rank=0 proxy=port state=stopped tail=0 head=3 completed=0 pending=3$"
    for i in 0 1 2; do
      hasRe "^\[0\] mscclpp-report: pid=[0-9]+ comm=0x[0-9a-f]+ rank=0 trigger=$i op=put\+signal chan=0 peer=1 bytes=1024 dst=[0-9]+ src=[0-9]+$"
    done
    # both kernels' (host threads') waits, from the wait board: rank 0 got 3 signals of 4, rank 1 none
    hasRe "^\[0\] mscclpp-report: pid=[0-9]+ comm=0x[0-9a-f]+ rank=0 devwait=semaphore state=timedout peer=1 sem=$sig chan=port expect=4 has=3 waited_ms=[0-9]+ thread=[0-9]+$"
    hasRe "^\[1\] mscclpp-report: pid=[0-9]+ comm=0x[0-9a-f]+ rank=1 devwait=semaphore state=timedout peer=0 sem=$sig chan=port expect=1 has=0 waited_ms=[0-9]+ thread=[0-9]+$"
    has "no rank has made a collective call on this communicator"
    hasRe "rank 0's kernel timed out waiting for a signal from rank 1 on semaphore $sig of a port channel \(expected 4, has 3\) for [0-9]+ ms$"
    hasRe "rank 1's kernel timed out waiting for a signal from rank 0 on semaphore $sig of a port channel \(expected 1, has 0\) for [0-9]+ ms$"
    has "rank 0's proxy (stopped) has 3 triggers pending at FIFO position 0: put+signal of 1024 bytes to rank 1 (channel 0), put+signal of 1024 bytes to rank 1 (channel 0), put+signal of 1024 bytes to rank 1 (channel 0)" ;;
  *) fail "unknown mode $mode" ;;
esac
has "mscclpp-run: hang report of communicator"
grep -q "^\[[0-9]*\] mscclpp-report: pid=[0-9]* comm=0x[0-9a-f]* rank=[0-9]* nranks=$n issued=" "$out" ||
  fail "no report line in the documented format"
[ "$rc" -eq 0 ] || fail "mscclpp-run exited $rc"
# a few timeouts at most: the report, not the launcher's --timeout, ended it
[ "$secs" -le $((MSCCLPP_TIMEOUT * 6 + 10)) ] || fail "took $secs s"
echo "ok: $mode, $n ranks${perHost:+ ($perHost per host)}, $secs s"
