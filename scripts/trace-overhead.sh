#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# MSCCLPP_TRACE's cost at 1 KiB allreduce (issue 25: at most 5% on, nothing
# off): `mscclpp-perf allreduce -b 1K -e 1K -c 0` under mscclpp-run, tracing
# off and on (--trace) in turn, ROUNDS rounds; with several build folders,
# each round runs every build off then on, so that a loaded machine's drift
# falls on all of them alike. Prints each round's out-of-place µs, then per
# build the medians and on/off. The last traced run's files stay in KEEP
# (-k) for checks; otherwise they go to a temporary folder, removed.
#
#   scripts/trace-overhead.sh [-n RANKS] [-r ROUNDS] [-i ITERS] [-w WARMUP] [-k KEEP] BIN...
#     BIN: a folder holding mscclpp-run and mscclpp-perf (build/tools, .carry/gpu)
#   defaults: 2 ranks, 7 rounds, 20000 iterations, 1000 warm-up
# Exits 1 when a run fails.
set -u
ranks=2 rounds=7 iters=20000 warm=1000 keep=
while getopts "n:r:i:w:k:" o; do
  case $o in
    n) ranks=$OPTARG ;;
    r) rounds=$OPTARG ;;
    i) iters=$OPTARG ;;
    w) warm=$OPTARG ;;
    k) keep=$OPTARG ;;
    *) sed -n '2,15p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { sed -n '2,15p' "$0"; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
dir=${keep:-$tmp/trace}
mkdir -p "$dir"

# one run; prints rank 0's out-of-place µs
run() { # run BIN on|off
  local bin=$1 mode=$2 args=() out
  [ "$mode" = on ] && { rm -f "$dir"/rank*.json; args=(--trace "$dir/rank%r.json"); }
  out=$("$bin/mscclpp-run" -n "$ranks" --timeout 300 -- "$bin/mscclpp-perf" allreduce -b 1K -e 1K -n "$iters" \
    -w "$warm" -c 0 "${args[@]}" 2>&1) || { echo "$out" >&2; echo "FAIL: $bin, tracing $mode" >&2; return 1; }
  awk '$1 == "[0]" && $2 == 1024 { print $7; exit }' <<<"$out"
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "# 1 KiB allreduce, $ranks ranks, -n $iters -w $warm, out-of-place us; $rounds rounds, each: every build off, then on"
for r in $(seq 1 "$rounds"); do
  line="round $r:"
  for b in "$@"; do
    off=$(run "$b" off) || exit 1
    on=$(run "$b" on) || exit 1
    echo "$off" >>"$tmp/off.$(echo "$b" | md5sum | cut -c1-8)"
    echo "$on" >>"$tmp/on.$(echo "$b" | md5sum | cut -c1-8)"
    line="$line  [$b] off $off on $on"
  done
  echo "$line"
done
for b in "$@"; do
  k=$(echo "$b" | md5sum | cut -c1-8)
  off=$(median <"$tmp/off.$k") on=$(median <"$tmp/on.$k")
  awk -v b="$b" -v off="$off" -v on="$on" -v n="$rounds" 'BEGIN {
    printf "%s: median of %d: off %.2f us, on %.2f us, on/off %.3f (%+.1f%%)\n", b, n, off, on, on / off, 100 * (on / off - 1) }'
done
