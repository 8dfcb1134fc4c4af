#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test_abi.sh OURLIB NVIDIA_NCCL_H ABI_OURS ABI_NVIDIA [ABI_NVIDIA_REAL NVIDIA_LIB]
#
# libmscclpp_nccl.so against NVIDIA's NCCL:
#  1. symbols: every function NVIDIA's nccl.h declares, and every nccl*/pnccl*
#     symbol NVIDIA's libnccl.so.2 exports, is exported by ours; ours exports
#     nothing else (no symbol outside nccl*/pnccl*, no nccl* name that
#     NVIDIA's headers do not declare: the layer's helpers stay hidden); its
#     SONAME is libnccl.so.2;
#  2. layout: abi_program.c compiled against our nccl.h and against NVIDIA's
#     prints the same facts (enum values, ncclConfig_t offsets, initializer
#     bytes, ...);
#  3. loading: the program built against NVIDIA's header and linked to ours
#     runs a 1-rank job on ours; the one linked to NVIDIA's library runs on
#     ours under LD_PRELOAD (NVIDIA's is then not even loaded) and under
#     LD_LIBRARY_PATH=<the directory of our libnccl.so.2 link>.
set -u
ours=$1 header=$2 abi_ours=$3 abi_nvidia=$4 abi_real=${5:-} real_lib=${6:-}
fail=0
err() { echo "FAIL: $*"; fail=1; }
ours_real=$(readlink -f "$ours")
ourdir=$(dirname "$ours")

echo "== symbols"
exported=$(nm -D --defined-only "$ours" | awk '$2 ~ /^[TWiDBR]$/ {print $3}' | sort -u)
[ -n "$exported" ] || err "nm -D $ours printed nothing"
declared=$(grep -oE '^[[:space:]]*(ncclResult_t|const char ?\*|void|int)[[:space:]]+\*?[[:space:]]*p?nccl[A-Za-z0-9_]+[[:space:]]*\(' "$header" |
  grep -oE 'p?nccl[A-Za-z0-9_]+[[:space:]]*\($' | tr -d '( \t' | sort -u)
ndecl=$(echo "$declared" | wc -l)
[ "$ndecl" -ge 60 ] || err "only $ndecl declarations parsed from $header"
missing=$(comm -23 <(echo "$declared") <(echo "$exported"))
[ -z "$missing" ] || err "declared in nccl.h but not exported: $(echo $missing)"
if [ -n "$real_lib" ] && [ -f "$real_lib" ]; then
  theirs=$(nm -D --defined-only "$real_lib" | awk '$3 ~ /^p?nccl/ {print $3}' | sort -u)
  missing=$(comm -23 <(echo "$theirs") <(echo "$exported"))
  if [ -n "$missing" ]; then
    err "exported by $real_lib but not by ours: $(echo $missing)"
  else
    echo "NVIDIA's library exports $(echo "$theirs" | wc -l) nccl symbols; all are ours too"
  fi
fi
extra=$(echo "$exported" | grep -vE '^p?nccl' || true)
[ -z "$extra" ] || err "ours exports symbols outside the NCCL API: $(echo $extra | head -c 300)"
# The exports map lets every nccl*/pnccl* name out, so an internal helper
# named like NCCL's API would leak: every such export must be (the profiling
# alias of) a function NVIDIA's headers declare, or one NVIDIA's library
# exports without declaring it (listed here). The layer's internals use the
# mscclppNccl prefix, which the map keeps hidden.
nvcode=$(sed -n 's/^#define NCCL_VERSION_CODE \([0-9]*\).*/\1/p' "$header")
if [ "${nvcode:-0}" -lt 22809 ]; then
  # an older NCCL's headers lack functions ours exports (the device API, ...)
  echo "SKIPPED: $header is NCCL ${nvcode:-?}, older than ours: exported names not checked against it"
else
  undeclared="ncclResetDebugInitInternal"
  nvdir=$(dirname "$header")
  nvfuncs=$(cat "$header" $(find "$nvdir/nccl_device.h" "$nvdir/nccl_device" -type f 2>/dev/null) |
    grep -oE '\bp?nccl[A-Za-z0-9_]+[[:space:]]*\(' | tr -d '( \t' | sed 's/^p//' | sort -u)
  nnv=$(echo "$nvfuncs" | wc -l)
  [ "$nnv" -ge 60 ] || err "only $nnv function names parsed from NVIDIA's headers"
  allowed=$(printf '%s\n' $nvfuncs $(printf 'p%s ' $nvfuncs) $undeclared | sort -u)
  unknown=$(echo "$exported" | grep -E '^p?nccl' | comm -23 - <(echo "$allowed"))
  if [ -n "$unknown" ]; then
    err "ours exports nccl* names that NVIDIA's headers do not declare (internal helpers?): $(echo $unknown)"
  else
    echo "every nccl*/pnccl* export is a function of NVIDIA's headers or one its library exports ($undeclared)"
  fi
  if [ -n "$real_lib" ] && [ -f "$real_lib" ]; then
    for s in $undeclared; do
      echo "$theirs" | grep -qx "$s" || err "$s is listed as exported by NVIDIA's library, but $real_lib does not"
    done
  fi
fi
soname=$(readelf -d "$ours" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "libnccl.so.2" ] || err "SONAME is '$soname', expected libnccl.so.2"
echo "$ndecl functions declared in nccl.h, $(echo "$exported" | wc -l) exported, SONAME $soname"

echo "== layout"
if ! grep -qE '#define NCCL_VERSION_CODE 22809' "$header"; then
  echo "SKIPPED: $header is not NCCL 2.28.9 ($(grep -m1 NCCL_VERSION_CODE "$header")): layout not compared"
else
  if diff <("$abi_ours" facts) <("$abi_nvidia" facts); then
    echo "$("$abi_ours" facts | wc -l) facts identical"
  else
    err "our nccl.h differs from NVIDIA's (above: < ours, > NVIDIA's)"
  fi
fi

# run_job LABEL EXPECTED_LIB [env...] PROGRAM
run_job() {
  local label=$1
  shift
  local out
  out=$(env "$@" run 2>&1)
  local status=$?
  echo "$out" | sed "s/^/  [$label] /"
  local lib
  lib=$(echo "$out" | sed -n 's/^library: //p')
  [ -n "$lib" ] || { err "$label: no library line"; return; }
  [ "$(readlink -f "$lib")" = "$ours_real" ] || err "$label: ran on $lib, not on ours"
  [ $status -eq 0 ] || err "$label: exit status $status"
  echo "$out" | grep -q "^job: .*: ok" || err "$label: the job's result is wrong"
  if [ -n "$real_lib" ] && echo "$out" | grep "^mapped:" | grep -q "$(readlink -f "$real_lib")"; then
    err "$label: NVIDIA's library was loaded too"
  fi
}

echo "== loading"
run_job linked "$abi_nvidia"
if [ -n "$abi_real" ]; then
  if [ -n "${MSCCLPP_TEST_SANITIZED:-}" ]; then
    # A sanitized library preloaded into a program that is not: the
    # sanitizer runtime must come first and refuses to start.
    echo "  [preload] skipped in a sanitizer build (the other trees run it)"
  else
    run_job preload LD_PRELOAD="$ours" "$abi_real"
  fi
  run_job in-place LD_LIBRARY_PATH="$ourdir" "$abi_real"
  # sanity: without either it is NVIDIA's library that runs
  lib=$("$abi_real" run 2>/dev/null | sed -n 's/^library: //p')
  [ "$(readlink -f "$lib")" = "$(readlink -f "$real_lib")" ] ||
    err "without LD_PRELOAD the NVIDIA-linked program ran on '$lib', not on NVIDIA's library: the checks above prove nothing"
  echo "  [plain] NVIDIA-linked program without LD_PRELOAD runs on $lib"
else
  echo "SKIPPED: NVIDIA's libnccl.so.2 not found: LD_PRELOAD and in-place loading not checked"
fi

[ $fail -eq 0 ] && echo "ABI test passed"
exit $fail
