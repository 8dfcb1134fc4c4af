#!/usr/bin/env bash
# mscclpp-info: the report runs and says what it is; --params lists every
# parameter with its current value; --markdown is a table with one row each.
#
#   test_mscclpp_info.sh path/to/mscclpp-info
set -u
INFO=${1:?usage: $0 path/to/mscclpp-info}
failed=0
fail() {
  echo "FAIL: $*" >&2
  failed=$((failed + 1))
}

out=$("$INFO" 2>&1) || fail "mscclpp-info exited $?: $out"
echo "$out"
echo "$out" | grep -Eq '^mscclpp [0-9]+\.[0-9]+\.[0-9]+ ' || fail "no version line"
echo "$out" | grep -Eq '^build: ' || fail "no build line"
echo "$out" | grep -Eq '^CUDA: (on|off)' || fail "no CUDA line"
echo "$out" | grep -Eq '^GPUs: ' || fail "no GPU line"
echo "$out" | grep -Eq '^network' || fail "no network section"

# A failing fi_getinfo is reported, not fatal.
if echo "$out" | grep -q '^libfabric: on'; then
  bad=$(FI_PROVIDER=mscclpp-no-such-provider "$INFO" 2>&1) || fail "mscclpp-info with no provider exited $?"
  echo "$bad" | grep -q 'fi_getinfo failed: ' || fail "a failing fi_getinfo is not reported: $bad"
fi

params=$(MSCCLPP_TIMEOUT=7.5 "$INFO" --params) || fail "--params exited $?"
echo "$params" | grep -q '^MSCCLPP_TIMEOUT=7.5 ' || fail "--params does not show MSCCLPP_TIMEOUT=7.5"
echo "$params" | grep -q '^MSCCLPP_DEBUG=WARN  \[default\]' || fail "--params does not mark defaults"
md=$("$INFO" --params --markdown) || fail "--params --markdown exited $?"
[ "$(echo "$md" | head -1)" = "| Variable | Type | Default | Meaning |" ] || fail "markdown header"
echo "$md" | grep -q '^| `MSCCLPP_TIMEOUT` | float | `30` |' || fail "markdown row of MSCCLPP_TIMEOUT"
rows=$(echo "$md" | grep -c '^| `MSCCLPP_')
names=$(echo "$params" | grep -c '^MSCCLPP_')
[ "$rows" -eq "$names" ] && [ "$rows" -gt 10 ] || fail "markdown has $rows rows, --params $names names"
md2=$(MSCCLPP_TIMEOUT=99 "$INFO" --params --markdown)
[ "$md" = "$md2" ] || fail "the markdown table depends on the environment"

"$INFO" --bogus >/dev/null 2>&1
[ $? -eq 2 ] || fail "an unknown option does not exit 2"
"$INFO" --markdown >/dev/null 2>&1
[ $? -eq 2 ] || fail "--markdown alone does not exit 2"

[ $failed -eq 0 ] && echo "1 passed, 0 failed" || echo "0 passed, 1 failed"
[ $failed -eq 0 ]
