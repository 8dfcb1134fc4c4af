#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test_tool_messages.sh RUN PERF: the tools' usage errors say what was wrong
# (issue #20), and mscclpp-perf's run says what it did (-J written, N/A
# columns explained, progress on stderr, nccl-tests' type names).
set -u
run=$1 perf=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

# expect NAME STATUS PATTERN CMD...: CMD exits with STATUS and its stderr
# matches the grep -E PATTERN.
expect() {
  local name=$1 want=$2 pattern=$3
  shift 3
  local err status
  err=$("$@" 2>&1 >/dev/null)
  status=$?
  if [ "$status" -ne "$want" ] || ! grep -qE -- "$pattern" <<<"$err"; then
    echo "FAIL $name: exit $status (expected $want), stderr:"
    echo "$err" | sed 's/^/    /'
    echo "    (expected a line matching: $pattern)"
    fails=$((fails + 1))
  else
    echo "ok   $name: $(head -1 <<<"$err")"
  fi
}

# mscclpp-perf: bad -f, unwritable -J (before any rank starts), --plot into a directory
# (test_errors_once.sh: the same through mscclpp-run, printed once in all)
expect perf_f0 2 '-f "0" is not a step factor.*whole number >= 2' "$perf" allreduce -f 0
expect perf_f_frac 2 '-f "2\.5" is not a step factor' "$perf" allreduce -f 2.5
expect perf_json_nodir 2 "-J $tmp/no/such/dir/r\.json: cannot create the file in $tmp/no/such/dir" \
  "$perf" allreduce -J "$tmp/no/such/dir/r.json"
expect perf_json_dir 2 "-J $tmp: is a directory" "$perf" allreduce -J "$tmp"
touch "$tmp/file" # a folder that is a file: access() says writable to root
expect perf_json_notdir 2 "-J $tmp/file/r\.json: cannot create the file in $tmp/file: Not a directory" \
  "$perf" allreduce -J "$tmp/file/r.json"
expect perf_plot_nodir 2 "--plot $tmp/no/p\.png: cannot create" "$perf" allreduce --plot "$tmp/no/p.png"

# mscclpp-run: a flag without its value, a port out of range
expect run_n_missing 2 '-n needs a value: the number of ranks' "$run" -n
expect run_timeout_missing 2 '--timeout needs a value' "$run" -n 2 --timeout
expect run_port 2 '--comm-id "127\.0\.0\.1:99999": the port "99999" is not in 1\.\.65535' \
  "$run" -n 2 --comm-id 127.0.0.1:99999 -- true

# Plain variables without the launcher: the error names the variables, not mscclpp-run.
err=$(env -u MSCCLPP_COMM_ID -u MASTER_ADDR MSCCLPP_RANK=0 MSCCLPP_NRANKS=1 "$perf" allreduce -b 1K -e 1K 2>&1)
if grep -q "mscclpp-run)" <<<"$err" || ! grep -q "ranks from MSCCLPP_RANK/MSCCLPP_NRANKS" <<<"$err"; then
  echo "FAIL env_source: the error should name MSCCLPP_RANK/MSCCLPP_NRANKS, not mscclpp-run:"
  echo "$err" | sed 's/^/    /'
  fails=$((fails + 1))
else
  echo "ok   env_source"
fi

# A run: -J says it wrote the file, N/A columns are explained, --progress 0
# reports every size, and the type column prints nccl-tests' "float".
out=$tmp/out err=$tmp/err
if ! "$run" -n 2 --no-prefix --timeout 50 -- "$perf" sendrecv -b 1K -e 4K -f 2 -c 0 -n 1 -w 0 --progress 0 \
  -d float32 -J "$tmp/r.json" >"$out" 2>"$err"; then
  echo "FAIL perf_run: exit non-zero"
  cat "$out" "$err"
  fails=$((fails + 1))
else
  for want in "# results written to $tmp/r.json (JSON)" "# in-place columns N/A: sendrecv has no in-place form" \
    "# #wrong N/A: -c 0, results not checked"; do
    grep -qF -- "$want" "$out" || { echo "FAIL perf_run: no line \"$want\" in:"; cat "$out"; fails=$((fails + 1)); }
  done
  grep -qE '^# Avg bus bandwidth +: [0-9.e+-]+ GB/s$' "$out" ||
    { echo "FAIL perf_run: the average bus bandwidth line has no unit:"; cat "$out"; fails=$((fails + 1)); }
  rows=$(awk '$1 ~ /^[0-9]+$/ && $3 == "float"' "$out" | wc -l)
  [ "$rows" -eq 3 ] || { echo "FAIL perf_run: $rows rows with type \"float\", expected 3:"; cat "$out"; fails=$((fails + 1)); }
  grep -q "progress: 3/3 sizes measured.*done" "$err" ||
    { echo "FAIL perf_run: no final progress line on stderr:"; cat "$err"; fails=$((fails + 1)); }
  [ -s "$tmp/r.json" ] || { echo "FAIL perf_run: $tmp/r.json not written"; fails=$((fails + 1)); }
  [ "$fails" -eq 0 ] && echo "ok   perf_run"
fi

[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all messages as expected"
