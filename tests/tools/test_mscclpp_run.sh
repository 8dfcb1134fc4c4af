#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Tests of the launcher: environment per rank, output prefixing, exit status
# propagation, stopping the other ranks fast, signals, --keep-going,
# --timeout, SIGTERM forwarding, the launcher's own death, bad input.
#
#   test_mscclpp_run.sh path/to/mscclpp-run
set -u
RUN=${1:?usage: $0 path/to/mscclpp-run}
if [ ! -x "$RUN" ]; then
  echo "FAIL: $RUN is not an executable (build mscclpp-run first)"
  exit 1
fi
# The ranks here are shell commands: hide GPUs so that the launcher's
# "ranks share a GPU without MPS" warning stays out of the checked output
# (test_mscclpp_run_mps.sh covers it).
export CUDA_VISIBLE_DEVICES=""
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
passed=0
failed=0
current=""

fail() {
  echo "  FAIL($current): $*" >&2
  failure=1
}
check() { # check DESCRIPTION COMMAND...
  local what=$1
  shift
  "$@" || fail "$what"
}
run_case() {
  current=$1
  failure=0
  "$1"
  if [ $failure -eq 0 ]; then
    passed=$((passed + 1))
    echo "PASS $1"
  else
    failed=$((failed + 1))
    echo "FAIL $1"
  fi
}
now_ms() { date +%s%3N; }

# A process is gone when it does not exist or is a zombie.
gone() {
  local pid=$1 state
  [ -r /proc/$pid/stat ] || return 0
  state=$(awk '{print $3}' /proc/$pid/stat 2>/dev/null) || return 0
  [ -z "$state" ] || [ "$state" = Z ]
}
wait_gone() { # wait_gone PID SECONDS
  local pid=$1 end=$(($(now_ms) + $2 * 1000))
  while ! gone "$pid"; do
    [ "$(now_ms)" -lt $end ] || return 1
    sleep 0.05
  done
}
wait_file() { # wait_file PATH SECONDS
  local end=$(($(now_ms) + $2 * 1000))
  while [ ! -s "$1" ]; do
    [ "$(now_ms)" -lt $end ] || return 1
    sleep 0.05
  done
}

wait_exists() { # wait_exists PATH SECONDS
  local end=$(($(now_ms) + $2 * 1000))
  while [ ! -e "$1" ]; do
    [ "$(now_ms)" -lt $end ] || return 1
    sleep 0.05
  done
}

# ---- environment --------------------------------------------------------------
test_env() {
  local out="$TMP/env.out"
  MSCCLPP_COMM_ID=10.9.9.9:1 MSCCLPP_COMM_SECRET=00 MSCCLPP_RANK=99 MSCCLPP_LOCAL_NRANKS=77 \
    "$RUN" -n 4 sh -c 'echo "$MSCCLPP_RANK $MSCCLPP_NRANKS $MSCCLPP_LOCAL_RANK $MSCCLPP_LOCAL_NRANKS $MSCCLPP_COMM_ID $MSCCLPP_COMM_SECRET"' >"$out" 2>"$TMP/env.err"
  check "exit 0" [ $? -eq 0 ]
  check "4 lines" [ "$(wc -l <"$out")" -eq 4 ]
  local r
  for r in 0 1 2 3; do
    grep -Eq "^\[$r\] $r 4 $r 4 127\.0\.0\.1:[0-9]+ [0-9a-f]{32}\$" "$out" || fail "rank $r line: $(grep "^\[$r\]" "$out")"
  done
  check "one comm id and secret for all ranks" [ "$(awk '{print $6, $7}' "$out" | sort -u | wc -l)" -eq 1 ]
  local port
  port=$(awk '{print $6}' "$out" | head -1 | cut -d: -f2)
  check "port in range" [ "$port" -gt 0 -a "$port" -lt 65536 ]
  # drawn below the kernel's ephemeral range, where parallel jobs' outgoing
  # connections cannot take it before rank 0 binds it
  local lo
  lo=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)
  if [ -n "$lo" ] && [ "$lo" -ge 11000 ]; then
    local p k
    for k in 1 2 3 4 5; do
      p=$("$RUN" -n 1 sh -c 'echo $MSCCLPP_COMM_ID' | awk '{print $2}' | cut -d: -f2)
      check "port $p in [10000, $lo)" [ "$p" -ge 10000 -a "$p" -lt "$lo" ]
    done
  fi
  local s1 s2
  s1=$(awk '{print $7}' "$out" | head -1)
  s2=$("$RUN" -n 1 sh -c 'echo $MSCCLPP_COMM_SECRET' | awk '{print $2}')
  check "a fresh secret per run" [ -n "$s2" ] && [ "$s1" != "$s2" ]
  local id
  id=$("$RUN" -n 2 --comm-id 10.1.2.3:4567 sh -c 'echo $MSCCLPP_COMM_ID' | awk '{print $2}' | sort -u)
  check "--comm-id passes through: $id" [ "$id" = 10.1.2.3:4567 ]
  local other
  other=$(FOO_KEEP=kept "$RUN" -n 1 sh -c 'echo $FOO_KEEP')
  check "other variables inherited" [ "$other" = "[0] kept" ]
}

# ---- output ---------------------------------------------------------------------
test_prefix() {
  "$RUN" -n 2 sh -c 'echo "out a $MSCCLPP_RANK"; echo "err $MSCCLPP_RANK" >&2; printf "out b"' \
    >"$TMP/p.out" 2>"$TMP/p.err"
  check "exit 0" [ $? -eq 0 ]
  local r
  for r in 0 1; do
    grep -qx "\[$r\] out a $r" "$TMP/p.out" || fail "stdout line of rank $r"
    grep -qx "\[$r\] out b" "$TMP/p.out" || fail "partial last line of rank $r"
    grep -qx "\[$r\] err $r" "$TMP/p.err" || fail "stderr line of rank $r"
  done
  check "stdout holds only stdout" [ "$(wc -l <"$TMP/p.out")" -eq 4 ]
  check "stderr holds only stderr" [ "$(wc -l <"$TMP/p.err")" -eq 2 ]
  # Many lines from many ranks: every line whole and prefixed.
  "$RUN" -n 4 sh -c 'i=0; while [ $i -lt 500 ]; do echo "line $MSCCLPP_RANK $i"; i=$((i+1)); done' >"$TMP/many.out"
  check "2000 lines" [ "$(wc -l <"$TMP/many.out")" -eq 2000 ]
  check "every line intact" [ "$(grep -Ec '^\[([0-3])\] line \1 [0-9]+$' "$TMP/many.out")" -eq 2000 ]
  # A line longer than the 64 KiB buffer is cut, not lost.
  "$RUN" -n 1 sh -c 'head -c 100000 /dev/zero | tr "\0" x; echo' >"$TMP/long.out"
  check "long line: all bytes arrive" [ "$(tr -cd x <"$TMP/long.out" | wc -c)" -eq 100000 ]
  check "long line: each piece prefixed" [ "$(grep -c '^\[0\] ' "$TMP/long.out")" -eq "$(wc -l <"$TMP/long.out")" ]
  # --no-prefix: the ranks write to our streams directly.
  "$RUN" -n 2 --no-prefix sh -c 'echo plain' >"$TMP/np.out" 2>&1
  check "--no-prefix" [ "$(grep -cx plain "$TMP/np.out")" -eq 2 ]
  # stdin goes to rank 0 only (it is not a terminal here).
  echo hello | "$RUN" -n 2 sh -c 'cat' >"$TMP/in.out"
  check "stdin to rank 0 only: $(tr '\n' ' ' <"$TMP/in.out")" [ "$(cat "$TMP/in.out")" = "[0] hello" ]
}

# ---- failures -----------------------------------------------------------------------
test_exit_status() {
  local t0 t1 rc
  t0=$(now_ms)
  "$RUN" -n 4 sh -c 'if [ $MSCCLPP_RANK = 2 ]; then sleep 0.2; exit 3; fi; sleep 30 & echo $! > '"$TMP"'/sleep.$MSCCLPP_RANK; wait' \
    >/dev/null 2>"$TMP/exit.err"
  rc=$?
  t1=$(now_ms)
  check "exit status 3 (got $rc)" [ $rc -eq 3 ]
  check "fast: $((t1 - t0)) ms" [ $((t1 - t0)) -lt 10000 ]
  grep -q "rank 2 exited with status 3" "$TMP/exit.err" || fail "names rank 2: $(cat "$TMP/exit.err")"
  local r
  for r in 0 1 3; do
    if [ -s "$TMP/sleep.$r" ]; then
      wait_gone "$(cat "$TMP/sleep.$r")" 5 || fail "the sleep of rank $r is still alive"
    else
      fail "rank $r did not start its sleep"
    fi
  done
  "$RUN" -n 1 true
  check "all succeed: 0" [ $? -eq 0 ]
  "$RUN" -n 3 sh -c 'exit $((MSCCLPP_RANK == 1 ? 42 : 0))' 2>/dev/null
  check "a late failure still counts" [ $? -eq 42 ]
}

test_signal() {
  local rc
  "$RUN" -n 2 sh -c 'if [ $MSCCLPP_RANK = 1 ]; then kill -KILL $$; fi; sleep 30' >/dev/null 2>"$TMP/sig.err"
  rc=$?
  check "128+9 (got $rc)" [ $rc -eq 137 ]
  grep -q "rank 1 was killed by signal 9" "$TMP/sig.err" || fail "names the signal: $(cat "$TMP/sig.err")"
  "$RUN" -n 1 sh -c 'kill -SEGV $$' 2>/dev/null
  rc=$?
  check "128+11 (got $rc)" [ $rc -eq 139 ]
}

test_keep_going() {
  local t0 t1 rc
  t0=$(now_ms)
  "$RUN" -n 3 --keep-going sh -c 'case $MSCCLPP_RANK in 0) exit 5;; 1) sleep 1; echo done;; 2) sleep 0.5; exit 6;; esac' \
    >"$TMP/kg.out" 2>"$TMP/kg.err"
  rc=$?
  t1=$(now_ms)
  check "first failure's status 5 (got $rc)" [ $rc -eq 5 ]
  check "rank 1 ran to the end" grep -qx "\[1\] done" "$TMP/kg.out"
  check "waited for all ($((t1 - t0)) ms)" [ $((t1 - t0)) -ge 900 ]
  grep -q "rank 0 exited with status 5" "$TMP/kg.err" || fail "rank 0 reported"
  grep -q "rank 2 exited with status 6" "$TMP/kg.err" || fail "rank 2 reported"
}

test_timeout() {
  local t0 t1 rc
  t0=$(now_ms)
  "$RUN" -n 2 --timeout 1 sleep 30 2>"$TMP/to.err"
  rc=$?
  t1=$(now_ms)
  check "124 (got $rc)" [ $rc -eq 124 ]
  check "after about 1 s ($((t1 - t0)) ms)" [ $((t1 - t0)) -ge 900 ] && [ $((t1 - t0)) -lt 8000 ]
  grep -q "timeout" "$TMP/to.err" || fail "says timeout"
  "$RUN" -n 2 --timeout 30 true
  check "a run shorter than the timeout: 0" [ $? -eq 0 ]
}

test_sigkill_escalation() {
  local t0 t1 rc
  rm -f "$TMP/deaf"
  # Rank 1 ignores SIGTERM (sleep 0.1 of the loop, started after the trap,
  # inherits that); rank 0 fails once rank 1 is deaf.
  "$RUN" -n 2 --grace 1 sh -c 'if [ $MSCCLPP_RANK = 0 ]; then while [ ! -e '"$TMP"'/deaf ]; do sleep 0.02; done; exit 1; fi
    trap "" TERM; touch '"$TMP"'/deaf; while :; do sleep 0.1; done' >/dev/null 2>"$TMP/kill.err" &
  local pid=$!
  wait_exists "$TMP/deaf" 10 || fail "rank 1 did not start"
  t0=$(now_ms)
  wait $pid
  rc=$?
  t1=$(now_ms)
  check "status of the failed rank (got $rc)" [ $rc -eq 1 ]
  check "SIGKILL after the grace period ($((t1 - t0)) ms)" [ $((t1 - t0)) -ge 800 ] && [ $((t1 - t0)) -lt 8000 ]
  grep -q "sent SIGKILL" "$TMP/kill.err" || fail "says SIGKILL: $(cat "$TMP/kill.err")"
}

test_sigterm_forwarded() {
  rm -f "$TMP"/term.* "$TMP"/ready.*
  "$RUN" -n 2 sh -c 'trap "touch '"$TMP"'/term.$MSCCLPP_RANK; exit 0" TERM; touch '"$TMP"'/ready.$MSCCLPP_RANK; while :; do sleep 0.1; done' \
    >/dev/null 2>"$TMP/fwd.err" &
  local pid=$! rc
  wait_exists "$TMP/ready.0" 10 && wait_exists "$TMP/ready.1" 10 || fail "ranks did not start"
  kill -TERM $pid
  wait $pid
  rc=$?
  check "128+15 (got $rc)" [ $rc -eq 143 ]
  check "rank 0 got SIGTERM" [ -e "$TMP/term.0" ]
  check "rank 1 got SIGTERM" [ -e "$TMP/term.1" ]
  grep -q "received SIGTERM" "$TMP/fwd.err" || fail "says so: $(cat "$TMP/fwd.err")"
  # SIGINT too.
  rm -f "$TMP"/ready.*
  "$RUN" -n 2 sh -c 'touch '"$TMP"'/ready.$MSCCLPP_RANK; exec sleep 30' >/dev/null 2>&1 &
  pid=$!
  wait_exists "$TMP/ready.0" 10 && wait_exists "$TMP/ready.1" 10 || fail "ranks did not start (SIGINT)"
  kill -INT $pid
  wait $pid
  rc=$?
  check "SIGINT: 130 (got $rc)" [ $rc -eq 130 ]
}

test_launcher_killed() {
  rm -f "$TMP"/pid.*
  "$RUN" -n 2 sh -c 'echo $$ > '"$TMP"'/pid.$MSCCLPP_RANK; exec sleep 30' >/dev/null 2>&1 &
  local pid=$!
  wait_file "$TMP/pid.0" 10 && wait_file "$TMP/pid.1" 10 || fail "ranks did not start"
  kill -KILL $pid
  wait $pid 2>/dev/null
  local r
  for r in 0 1; do
    [ -s "$TMP/pid.$r" ] && { wait_gone "$(cat "$TMP/pid.$r")" 5 || fail "rank $r outlived the launcher"; }
  done
}

test_bad_input() {
  local rc
  expect_rc() { # expect_rc CODE PATTERN ARGS...
    local want=$1 pattern=$2
    shift 2
    "$RUN" "$@" >"$TMP/bad.out" 2>"$TMP/bad.err"
    rc=$?
    [ $rc -eq "$want" ] || fail "'$*': exit $rc, expected $want"
    grep -q -- "$pattern" "$TMP/bad.err" "$TMP/bad.out" || fail "'$*': no \"$pattern\" in: $(cat "$TMP/bad.err")"
  }
  expect_rc 2 "integer in 1.." -n 0 true
  expect_rc 2 "integer in 1.." -n -3 true
  expect_rc 2 "integer in 1.." -n abc true
  expect_rc 2 "integer in 1.." -n 100000 true
  expect_rc 2 "integer in 1.." -n
  expect_rc 2 "-n N is required" true
  expect_rc 2 "no command" -n 2
  expect_rc 2 "no command" -n 2 --
  expect_rc 2 "unknown option" -n 2 --frobnicate true
  expect_rc 2 "seconds" -n 2 --timeout abc true
  expect_rc 2 "seconds" -n 2 --timeout 0 true
  expect_rc 2 "seconds" -n 2 --grace -1 true
  expect_rc 2 "ip:port" -n 2 --comm-id nocolon true
  expect_rc 127 "command not found" -n 2 /nonexistent/program
  expect_rc 127 "command not found" -n 2 mscclpp-no-such-command
  printf 'not a program\n' >"$TMP/plain.txt"
  chmod 644 "$TMP/plain.txt"
  expect_rc 126 "not an executable" -n 2 "$TMP/plain.txt"
  expect_rc 126 "not an executable" -n 2 "$TMP"
  expect_rc 0 "usage" --help
  # Options after the command belong to the command.
  local out
  out=$("$RUN" -n 1 echo x -n --timeout)
  check "arguments after the command are the command's ($out)" [ "$out" = "[0] x -n --timeout" ]
  out=$("$RUN" --nranks=2 -- echo y | sort | tr '\n' ' ')
  check "--nranks=2 -- ($out)" [ "$out" = "[0] y [1] y " ]
  out=$("$RUN" -n3 echo z | wc -l)
  check "-n3 ($out)" [ "$out" -eq 3 ]
}

run_case test_env
run_case test_prefix
run_case test_exit_status
run_case test_signal
run_case test_keep_going
run_case test_timeout
run_case test_sigkill_escalation
run_case test_sigterm_forwarded
run_case test_launcher_killed
run_case test_bad_input
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
