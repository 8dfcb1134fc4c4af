#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# mscclpp-info: the report runs and says what it is; --params lists every
# parameter with its current value; --markdown is a table with one row each;
# --plans lists the execution plans of a directory (tests/plan's good and bad
# ones) with what each is or why it does not load.
#
#   test_mscclpp_info.sh path/to/mscclpp-info [tests/plan]
set -u
INFO=${1:?usage: $0 path/to/mscclpp-info [tests/plan]}
PLANS=${2:-}
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
  # The inline put's signal on tcp;ofi_rxm (ordered writes, four RMA targets
  # per message): the message's second write target by default, remote CQ
  # data with MSCCLPP_NET_SIGNAL=cq. Only the timing would show a silent
  # fall back to CQ data otherwise; both forms are checked for correctness
  # by net_loopback_2 and net_loopback_cq_2.
  net="MSCCLPP_NET_PROVIDER=tcp;ofi_rxm MSCCLPP_NET_IFNAME==lo"
  two=$(env $net "$INFO" 2>&1 | grep '^network transport')
  echo "$two" | grep -q "would use tcp;ofi_rxm .*ordered signals, a small put's in its message" ||
    fail "tcp;ofi_rxm does not carry a small put's signal in its message: $two"
  cq=$(env $net MSCCLPP_NET_SIGNAL=cq "$INFO" 2>&1 | grep '^network transport')
  echo "$cq" | grep -q "would use tcp;ofi_rxm .*ordered signals" || fail "MSCCLPP_NET_SIGNAL=cq: $cq"
  echo "$cq" | grep -q "a small put's in its message" && fail "MSCCLPP_NET_SIGNAL=cq still puts the signal in the message: $cq"
fi

# parameters that do not parse: said, not fatal
badp=$(MSCCLPP_TIMEOUT=abc "$INFO" 2>/dev/null) || fail "mscclpp-info with MSCCLPP_TIMEOUT=abc exited $?"
echo "$badp" | grep -q '^network transport: the parameters do not parse: MSCCLPP_TIMEOUT="abc"' ||
  fail "parameters that do not parse are not reported: $badp"

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

if [ -n "$PLANS" ]; then
  good=$(MSCCLPP_CACHE_DIR=$PLANS/data "$INFO" --plans 2>&1) || fail "--plans of good plans exited $?: $good"
  echo "$good" | grep -q "^execution plans in $PLANS/data (MSCCLPP_CACHE_DIR): 12" || fail "--plans: no header: $good"
  echo "$good" | grep -q "allreduce_ll_2.json *ok: test_allreduce_ll_2, allreduce for 2 ranks, LL, out-of-place" ||
    fail "--plans does not describe allreduce_ll_2: $good"
  bad=$("$INFO" --plans "$PLANS/bad" 2>&1)
  [ $? -eq 1 ] || fail "--plans of bad plans does not exit 1"
  echo "$bad" | grep -q 'switch_op.json *INVALID: gpus\[0\].threadblocks\[0\].ops\[3\].name "glres": switch channels' ||
    fail "--plans does not say why switch_op.json is invalid: $bad"
  echo "$bad" | grep -q "^27 of 27 plans do not load" || fail "--plans: no count of invalid plans: $bad"
  MSCCLPP_CACHE_DIR= "$INFO" --plans >/dev/null 2>&1
  [ $? -eq 2 ] || fail "--plans without a directory does not exit 2"
fi

[ $failed -eq 0 ] && echo "1 passed, 0 failed" || echo "0 passed, 1 failed"
[ $failed -eq 0 ]
