#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The launcher on a GPU machine: the warning for ranks sharing a GPU without
# MPS, and --mps: it starts the MPS daemon (in a private pipe directory),
# kernels of several ranks run under it, and it is stopped at the end; a
# daemon that was already running is used and left running.
#
#   test_mscclpp_run_mps.sh path/to/mscclpp-run path/to/mscclpp-info [path/to/mps_probe]
set -u
RUN=${1:?mscclpp-run}
INFO=${2:?mscclpp-info}
PROBE=${3:-}
if ! "$INFO" | grep -E '^GPUs: [1-9]' >/dev/null; then
  echo "SKIPPED: needs a GPU"
  exit 77
fi
if ! command -v nvidia-cuda-mps-control >/dev/null; then
  echo "SKIPPED: needs nvidia-cuda-mps-control (NVIDIA driver utilities)"
  exit 77
fi
if pgrep -x nvidia-cuda-mps >/dev/null; then # the kernel keeps 15 characters of a name
  echo "SKIPPED: an MPS daemon is already running on this machine; not starting a second one"
  exit 77
fi
TMP=$(mktemp -d /tmp/mscclpp-mps.XXXXXX)
export CUDA_MPS_PIPE_DIRECTORY=$TMP/pipe CUDA_MPS_LOG_DIRECTORY=$TMP/log
cleanup() {
  echo quit | timeout 10 nvidia-cuda-mps-control >/dev/null 2>&1
  rm -rf "$TMP"
}
trap cleanup EXIT
failed=0
fail() {
  echo "FAIL: $*" >&2
  failed=$((failed + 1))
}
daemon_up() { echo get_server_list | timeout 10 nvidia-cuda-mps-control >/dev/null 2>&1; }
gpus=$("$INFO" | sed -n 's/^GPUs: \([0-9]*\).*/\1/p')

# 1. More ranks than GPUs, no MPS: a warning.
"$RUN" -n $((gpus + 1)) true 2>"$TMP/warn.err"
grep -q "without CUDA MPS" "$TMP/warn.err" || fail "no warning for $((gpus + 1)) ranks on $gpus GPU(s)"
"$RUN" -n 1 true 2>"$TMP/nowarn.err"
[ ! -s "$TMP/nowarn.err" ] || fail "a warning for one rank: $(cat "$TMP/nowarn.err")"

# 2. --mps starts the daemon, the ranks see it, it is gone afterwards.
n=$((gpus * 2 + 2))
"$RUN" -n $n --mps sh -c 'echo "pipe $CUDA_MPS_PIPE_DIRECTORY"; echo get_server_list | nvidia-cuda-mps-control >/dev/null && echo "daemon up"' \
  >"$TMP/mps.out" 2>"$TMP/mps.err"
rc=$?
cat "$TMP/mps.out" "$TMP/mps.err"
[ $rc -eq 0 ] || fail "--mps run exited $rc"
grep -q "started the MPS daemon" "$TMP/mps.err" || fail "does not say it started MPS"
[ "$(grep -c "pipe $TMP/pipe" "$TMP/mps.out")" -eq $n ] || fail "ranks do not see CUDA_MPS_PIPE_DIRECTORY"
[ "$(grep -c "daemon up" "$TMP/mps.out")" -eq $n ] || fail "ranks do not reach the daemon"
! daemon_up || fail "the daemon we started is still running"

# 3. Kernels of several ranks per GPU under MPS.
if [ -n "$PROBE" ]; then
  "$RUN" -n $n --mps --timeout 120 "$PROBE" >"$TMP/probe.out" 2>&1
  rc=$?
  cat "$TMP/probe.out"
  [ $rc -eq 0 ] || fail "probe under MPS exited $rc"
  [ "$(grep -c 'sum 32 (no error)' "$TMP/probe.out")" -eq $n ] || fail "not every rank's kernel ran"
  ! daemon_up || fail "the daemon is still running after the probe"
fi

# 4. A daemon already running is used and left running.
mkdir -p "$TMP/pipe" "$TMP/log"
nvidia-cuda-mps-control -d || fail "cannot start a daemon by hand"
"$RUN" -n 2 --mps true 2>"$TMP/pre.err"
grep -q "already running" "$TMP/pre.err" || fail "does not use the running daemon: $(cat "$TMP/pre.err")"
daemon_up || fail "stopped a daemon it did not start"

[ $failed -eq 0 ] && echo "1 passed, 0 failed" || echo "0 passed, 1 failed"
[ $failed -eq 0 ]
