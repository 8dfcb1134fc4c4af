#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# expect_usage.sh PERF ARGS...: mscclpp-perf must reject ARGS with exit
# status 2 (not 0, not a crash) and a message on stderr.
set -u
perf=$1
shift
err=$("$perf" "$@" 2>&1 >/dev/null)
status=$?
echo "$err"
[ "$status" -eq 2 ] || { echo "FAIL: exit status $status, expected 2"; exit 1; }
[ -n "$err" ] || { echo "FAIL: no message"; exit 1; }
