#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test_errors_once.sh RUN PERF: every failure is printed once per rank, and a
# usage error once in total (issue #20: "every error is printed twice per
# rank"), with a message that says what was wrong. The library logs a reason
# where it decides it; mscclpp-perf prints it only when that line did not
# reach stderr.
set -u
run=$1 perf=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() {
  echo "FAIL $1:"
  echo "$2" | sed 's/^/    /'
  fails=$((fails + 1))
}
# Logging as a user gets it by default (WARN, every subsystem, on stderr).
unset MSCCLPP_DEBUG MSCCLPP_DEBUG_SUBSYS MSCCLPP_DEBUG_FILE NCCL_DEBUG NCCL_DEBUG_SUBSYS NCCL_DEBUG_FILE

# once_per_rank NAME N PATTERN OUT: each of ranks 0..N-1 wrote exactly one line
# matching the grep -E PATTERN (after mscclpp-run's "[r] "). With
# lost=PATTERN2 set, a rank may instead have failed because a
# peer that failed first left it (exiting at once, so that nobody waits for
# a timeout): then it wrote PATTERN2 once and PATTERN never; at least one
# rank wrote PATTERN, and no rank wrote either twice.
once_per_rank() {
  local name=$1 n=$2 pattern=$3 out=$4 r c l counts="" seen=0
  for ((r = 0; r < n; r++)); do
    c=$(grep -E "^\[$r\] " <<<"$out" | grep -cE -- "$pattern")
    l=0
    [ -n "${lost:-}" ] && l=$(grep -E "^\[$r\] " <<<"$out" | grep -cE -- "$lost")
    counts="$counts rank $r: $c"
    [ "$l" -gt 0 ] && counts="$counts (peer lost: $l)"
    counts="$counts;"
    seen=$((seen + c))
    if ! { [ "$c" -eq 1 ] && [ "$l" -le 1 ]; } && ! { [ -n "${lost:-}" ] && [ "$c" -eq 0 ] && [ "$l" -eq 1 ]; }; then
      fail "$name" "$counts not once per rank; output:
$out"
      return
    fi
  done
  local total
  total=$(grep -cE -- "$pattern" <<<"$out")
  if [ "$seen" -lt 1 ] || [ "$total" -ne "$seen" ]; then
    fail "$name" "$total lines in all, $seen from the ranks; output:
$out"
    return
  fi
  echo "ok   $name:$counts $(grep -m1 -E -- "$pattern" <<<"$out")"
}

# once_in_all NAME STATUS PATTERN CMD...: CMD exits with STATUS and exactly
# one line of its output matches PATTERN.
once_in_all() {
  local name=$1 want=$2 pattern=$3
  shift 3
  local out status n
  out=$("$@" 2>&1)
  status=$?
  n=$(grep -cE -- "$pattern" <<<"$out")
  if [ "$status" -ne "$want" ] || [ "$n" -ne 1 ]; then
    fail "$name" "exit $status (expected $want), $n matching lines (expected 1); output:
$out"
  else
    echo "ok   $name: $(grep -m1 -E -- "$pattern" <<<"$out")"
  fi
}

# Usage errors: only rank 0 reports them, and the other ranks wait for it, so
# the launcher does not stop rank 0 before it has said why (a race: repeated).
for i in 1 2 3 4 5; do
  once_in_all "usage_f_frac_2ranks#$i" 2 '-f "2\.5" is not a step factor' \
    "$run" -n 2 -- "$perf" allreduce -f 2.5
done
touch "$tmp/file"
once_in_all usage_json_notdir_2ranks 2 "-J $tmp/file/r\.json: cannot create the file in $tmp/file: Not a directory" \
  "$run" -n 2 -- "$perf" allreduce -J "$tmp/file/r.json"

# A run-time failure on every rank: the library's WARN line, and nothing more
# from mscclpp-perf. --keep-going lets each rank fail by itself. A bad
# variable fails each rank before it meets the others; MSCCLPP_ALGO fails a
# collective call, which a rank may not reach when its peer failed there
# first and left.
job() { "$run" -n 3 --keep-going --timeout 50 -- "$perf" allreduce -b 1K -e 1K -n 1 -w 0 2>&1; }
once_per_rank timeout_env 3 'MSCCLPP_TIMEOUT="abc" is not a number' "$(MSCCLPP_TIMEOUT=abc job)"
once_per_rank timeout_env_debug_none 3 'mscclppCommInitFromEnv failed: invalid argument: MSCCLPP_TIMEOUT="abc"' \
  "$(MSCCLPP_DEBUG=NONE MSCCLPP_TIMEOUT=abc job)"
algo='MSCCLPP_ALGO="allreduce=bogus": allreduce has no algorithm "bogus"'
lost='rank [0-9]+ was lost'
once_per_rank algo_warn 3 "$algo" "$(MSCCLPP_ALGO=allreduce=bogus job)"
# Logging off, or to a file: mscclpp-perf prints the reason itself, once.
once_per_rank algo_debug_none 3 "mscclppAllReduce failed: invalid argument: $algo" \
  "$(MSCCLPP_DEBUG=NONE MSCCLPP_ALGO=allreduce=bogus job)"
once_per_rank algo_debug_file 3 "mscclppAllReduce failed: invalid argument: $algo" \
  "$(MSCCLPP_DEBUG_FILE="$tmp/log.%p" MSCCLPP_ALGO=allreduce=bogus job)"
lost=""

# A bad MSCCLPP_COMM_ID (without the launcher, which sets its own): the line
# names the variable.
bad_id() { env MSCCLPP_COMM_ID=127.0.0.1:99999 MSCCLPP_RANK=0 MSCCLPP_NRANKS=1 "$@" "$perf" allreduce -b 1K -e 1K; }
id_pattern='MSCCLPP_COMM_ID: "127\.0\.0\.1:99999": port is not in \[1, 65535\]'
once_in_all comm_id_warn 1 "malformed address in $id_pattern" bad_id
once_in_all comm_id_debug_none 1 "mscclppCommInitFromEnv failed: invalid argument: malformed address in $id_pattern" \
  bad_id MSCCLPP_DEBUG=NONE

# A root nobody listens on: the socket's reason and the root's address in one
# line, not one line from the socket and another from the rendezvous.
out=$(env MSCCLPP_TIMEOUT=2 MSCCLPP_COMM_ID=127.0.0.1:1 MSCCLPP_RANK=1 MSCCLPP_NRANKS=2 \
  "$perf" allreduce -b 1K -e 1K 2>&1)
n=$(grep -c '127\.0\.0\.1:1 ' <<<"$out")
root='rank 1 cannot reach the root 127\.0\.0\.1:1 \(from MSCCLPP_RANK/MSCCLPP_NRANKS\): .*Connection refused'
if [ "$n" -ne 1 ] || ! grep -qE "$root" <<<"$out"; then
  fail root_unreachable "$n lines name the root (expected 1, saying it cannot be reached and why); output:
$out"
else
  echo "ok   root_unreachable: $out"
fi

[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "every failure printed once"
