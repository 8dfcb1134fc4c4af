#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Tracing is off by default: the same program with MSCCLPP_TRACE unset, and
# set but empty, writes no file anywhere under its working directory (nor
# next to the directory a template would name).
#
#   test_trace_off.sh RUN WORKER
set -u
run=$1 worker=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/cwd"
for how in unset empty; do
  if [ "$how" = unset ]; then
    (cd "$dir/cwd" && env -u MSCCLPP_TRACE "$run" -n 2 --timeout 50 -- "$worker" all) >"$dir/out" 2>&1
  else
    (cd "$dir/cwd" && MSCCLPP_TRACE= "$run" -n 2 --timeout 50 -- "$worker" all) >"$dir/out" 2>&1
  fi
  status=$?
  cat "$dir/out"
  [ "$status" -eq 0 ] || { echo "FAIL ($how): the ranks exited with status $status"; exit 1; }
  left=$(find "$dir/cwd" -mindepth 1 | head -5)
  [ -z "$left" ] || { echo "FAIL ($how): files were written: $left"; exit 1; }
done
echo "trace off: no file written with MSCCLPP_TRACE unset or empty"
