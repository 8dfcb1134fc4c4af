#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check_json.sh LAUNCHER PERF
# -J writes valid JSON that agrees with the run; --plot draws a PNG when
# gnuplot is installed (said so, and not failed, when it is not).
set -u
run=$1 perf=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$run" -n 3 --timeout 50 -- "$perf" allreduce -b 1K -e 64K -f 4 -d float,bfloat16 -o sum,max -n 2 -w 1 \
  -J "$dir/out.json" --plot "$dir/out.png" 2>"$dir/err" || { cat "$dir/err"; echo "FAIL: mscclpp-perf failed"; exit 1; }
cat "$dir/err" >&2
# a plot that was drawn is not reported as failed
if grep -q "gnuplot failed" "$dir/err" && command -v gnuplot >/dev/null && [ -s "$dir/out.png" ]; then
  echo "FAIL: --plot drew $dir/out.png but said gnuplot failed"
  exit 1
fi
python3 - "$dir/out.json" <<'PY' || exit 1
import json, sys
d = json.load(open(sys.argv[1]))
assert d["tool"] == "mscclpp-perf" and d["collective"] == "allreduce", d
assert d["nranks"] == 3 and len(d["ranks"]) == 3, d["ranks"]
res = d["results"]
assert len(res) == 2 * 2 * 4, len(res)  # types x ops x sizes (1K 4K 16K 64K)
for r in res:
    assert r["type"] in ("float", "bfloat16") and r["redop"] in ("sum", "max"), r
    for p in ("outOfPlace", "inPlace"):
        m = r[p]
        assert m["wrong"] == 0 and m["time_us"] > 0 and m["busbw_GBps"] >= 0, r
        assert abs(m["busbw_GBps"] - m["algbw_GBps"] * 4 / 3) < 1e-3 * max(1, m["busbw_GBps"]), r
assert d["wrong"] == 0
print("json OK:", len(res), "results")
PY
if command -v gnuplot >/dev/null; then
  head -c 8 "$dir/out.png" | od -An -tx1 | grep -q "89 50 4e 47" || { echo "FAIL: no PNG at $dir/out.png"; exit 1; }
  echo "plot OK: $(stat -c %s "$dir/out.png") bytes"
else
  echo "plot: gnuplot not installed, skipped"
fi
