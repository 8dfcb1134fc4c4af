#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# mscclpp-trace on files it must refuse: each case exits 1 (never a crash,
# never 0) with a message naming the file and, where a line is at fault,
# that line. Then a few hundred random corruptions of a real trace: every
# run exits 0 or 1, and a refusal names the file. Bad usage exits 2.
#
#   test_trace_tool.sh TRACETOOL RUN WORKER
set -u
tool=$1 run=$2 worker=$3
command -v python3 >/dev/null || { echo "SKIP: needs python3"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failed=0
fail() {
  echo "FAIL: $*"
  failed=$((failed + 1))
}

# a real 2-rank trace to cut up
MSCCLPP_TRACE="$dir/good%r.json" "$run" -n 2 --timeout 50 -- "$worker" all >"$dir/out" 2>&1 ||
  { cat "$dir/out"; echo "FAIL: the traced run failed"; exit 1; }
good="$dir/good0.json"
"$tool" summary "$good" >/dev/null || fail "summary of a good file exited $?"

# expect CMD... : exit 1 and stderr matching $pattern
expect() {
  local what=$1 pattern=$2
  shift 2
  "$@" >"$dir/o" 2>"$dir/e"
  local st=$?
  grep -Eq "Sanitizer|runtime error" "$dir/e" && st=134
  if [ "$st" -ne 1 ]; then
    fail "$what: exit $st, expected 1 ($(head -c 300 "$dir/e"))"
  elif ! grep -Eq -- "$pattern" "$dir/e"; then
    fail "$what: message '$(head -c 300 "$dir/e")' does not match '$pattern'"
  else
    echo "ok: $what: $(head -1 "$dir/e")"
  fi
}

bad="$dir/bad.json"
: >"$bad"
expect "empty file" "bad.json: the file is empty" "$tool" summary "$bad"
echo '{"traceEvents":[]}' >"$bad"
expect "not our layout" "bad.json:1: not an mscclpp trace" "$tool" summary "$bad"
head -n 5 "$good" >"$bad"
expect "cut short" "bad.json:5: the file ends here, before its closing" "$tool" summary "$bad"
{ head -n 4 "$good"; echo '{"ph":"X","name":"x",,},'; tail -n +6 "$good"; } >"$bad"
expect "garbage in line 5" "bad.json:5: expected a member name" "$tool" summary "$bad"
{ head -n 4 "$good"; printf '{"ph":"i","name":"\xff\xfe","pid":0,"tid":1,"ts":1.000},\n'; tail -n +6 "$good"; } >"$bad"
expect "invalid UTF-8" "bad.json:5: a string is not valid UTF-8" "$tool" summary "$bad"
{ head -n 4 "$good"; python3 -c 'print("{\"ph\":\"i\",\"name\":\"x\",\"pid\":0,\"tid\":1,\"ts\":1.000,\"args\":" + "[" * 40 + "]" * 40 + "},")'; tail -n +6 "$good"; } >"$bad"
expect "nested 40 deep" "bad.json:5: values nested more than" "$tool" summary "$bad"
{ head -n 4 "$good"; echo '{"ph":"i","name":"x","pid":0,"tid":1,"ts":1e3},'; tail -n +6 "$good"; } >"$bad"
expect "ts with an exponent" "bad.json:5: \"ts\" must be microseconds" "$tool" summary "$bad"
{ head -n 4 "$good"; echo '{"ph":"X","name":"x","pid":0,"tid":1,"ts":1.000},'; tail -n +6 "$good"; } >"$bad"
expect "span without dur" "bad.json:5: a span" "$tool" summary "$bad"
{ head -n 4 "$good"; python3 -c 'print("{\"ph\":\"i\",\"name\":\"" + "a" * 2000000 + "\",\"pid\":0,\"tid\":1,\"ts\":1.000}")'; tail -n +6 "$good"; } >"$bad"
expect "a 2 MB line without its comma" "bad.json:6: an event after the last one" "$tool" summary "$bad"
n=$(wc -l <"$good")
{ head -n $((n - 1)) "$good" | sed '$ s/$/,/'; echo ']}'; } >"$bad"
expect "a comma after the last event" "bad.json:$n: a ',' after the last event" "$tool" summary "$bad"
{ cat "$good"; echo '{"more":1}'; } >"$bad"
expect "text after ]}" "bad.json:$((n + 1)): text after the closing" "$tool" summary "$bad"
sed 's/"version":1/"version":7/' "$good" >"$bad"
expect "another format version" "bad.json:1: trace format version 7" "$tool" summary "$bad"
head -c 4096 /dev/urandom >"$bad"
expect "random bytes" "bad.json" "$tool" summary "$bad"
expect "a missing file" "nothere.json: cannot open" "$tool" summary "$dir/nothere.json"
sed 's/"comm":"0x[0-9a-f]*"/"comm":"0x0000000000000001"/' "$dir/good1.json" >"$bad"
expect "merge across jobs" "bad.json:1: communicator 0x0000000000000001" "$tool" merge "$good" "$bad" -o "$dir/job.json"
expect "merge of one rank twice" "good0.json:1: a second file of rank 0" "$tool" merge "$good" "$good" -o "$dir/job.json"
[ -e "$dir/job.json" ] && fail "a refused merge left $dir/job.json"
"$tool" merge "$dir"/good*.json -o "$dir/job.json" >/dev/null || fail "merge of the good files exited $?"
expect "merge of a merged trace" "job.json:1: already a merged trace" "$tool" merge "$dir/job.json" -o "$dir/job2.json"
python3 - "$dir/job.json" "$dir/bad.json" <<'PY'
import sys
src, dst = sys.argv[1], sys.argv[2]
lines = open(src).read().split("\n")
for i, l in enumerate(lines):
    if '"cat":"coll"' in l:
        lines[i] = l.replace('"seq":', '"sequence":')
        break
open(dst, "w").write("\n".join(lines))
PY
expect "a collective without its sequence number" "bad.json:[0-9]+: a collective's span without its arguments" \
  "$tool" summary "$bad"

# bad usage: 2
for args in "" "frobnicate" "merge $good" "merge -o $dir/x.json" "summary" "summary --bogus $good" \
  "merge $good -o $good"; do
  # shellcheck disable=SC2086
  "$tool" $args >/dev/null 2>&1
  st=$?
  [ "$st" -eq 2 ] || fail "usage '$args': exit $st, expected 2"
done

# random corruption: exit 0 or 1, never a crash; a refusal names the file
python3 - "$good" "$dir" <<'PY'
import random, sys
src, d = sys.argv[1], sys.argv[2]
data = bytearray(open(src, "rb").read())
rnd = random.Random(25)
for k in range(300):
    b = bytearray(data)
    for _ in range(rnd.randint(1, 8)):
        op = rnd.randrange(4)
        i = rnd.randrange(len(b))
        if op == 0:
            b[i] = rnd.randrange(256)
        elif op == 1:
            del b[i:i + rnd.randint(1, 40)]
        elif op == 2:
            b[i:i] = bytes(rnd.choice(b'{}[]",:\\0123456789.-e \n') for _ in range(rnd.randint(1, 8)))
        else:
            b = b[:i]
    open("%s/fuzz%03d.json" % (d, k), "wb").write(b)
PY
crashes=0 refused=0 accepted=0
for f in "$dir"/fuzz*.json; do
  for cmd in summary merge; do
    if [ "$cmd" = merge ]; then
      "$tool" merge "$f" -o "$dir/fuzzout.json" >/dev/null 2>"$dir/e"
    else
      "$tool" summary "$f" >/dev/null 2>"$dir/e"
    fi
    st=$?
    # a sanitizer's report exits 1 too
    grep -Eq "Sanitizer|runtime error" "$dir/e" && st=134
    case $st in
      0) accepted=$((accepted + 1)) ;;
      1)
        refused=$((refused + 1))
        grep -q "$(basename "$f")" "$dir/e" || fail "$cmd $(basename "$f"): the refusal does not name the file: $(head -c 200 "$dir/e")"
        ;;
      *)
        crashes=$((crashes + 1))
        fail "$cmd $(basename "$f"): exit $st"
        ;;
    esac
  done
done
echo "corrupted traces: $refused refused, $accepted read, $crashes crashed"
[ "$failed" -eq 0 ] || { echo "$failed failures"; exit 1; }
echo "mscclpp-trace refuses malformed input"
