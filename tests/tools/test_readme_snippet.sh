#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# README's "Channels from a kernel" sketch must keep compiling against the
# public headers: extract it, wrap the host part in a function and compile it
# with nvcc. Skipped (exit 77) where there is no nvcc.
#   test_readme_snippet.sh README.md INCLUDE_DIR NVCC
set -u
readme=${1:?README.md}
inc=${2:?include dir}
nvcc=${3:-}
if [ -z "$nvcc" ] || [ ! -x "$nvcc" ]; then
  echo "SKIPPED: needs nvcc"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
awk '/^### Channels from a kernel/{on=1} on && /^```c/{grab=1; next} grab && /^```/{exit} grab{print}' "$readme" >"$tmp/snippet.c"
if ! grep -q "/\* host, on every rank" "$tmp/snippet.c" || ! grep -q "/\* device \*/" "$tmp/snippet.c"; then
  echo "FAIL: README's channel sketch not found (section or markers renamed?)"
  exit 1
fi
{
  sed -n '1,/\/\* host, on every rank/p' "$tmp/snippet.c" | sed '$d'
  sed -n '/\/\* device \*\//,$p' "$tmp/snippet.c"
  echo 'void hostSide(mscclppComm_t comm, void* buf, size_t bytes, int peer, size_t n) {'
  sed -n '/\/\* host, on every rank/,/\/\* device \*\//p' "$tmp/snippet.c" | sed '$d'
  echo '  exchange<<<1, 256>>>(mh, ph, n);'
  echo '}'
} >"$tmp/snippet.cu"
if "$nvcc" -arch=sm_90 -I"$inc" -Werror all-warnings -c "$tmp/snippet.cu" -o "$tmp/snippet.o" 2>"$tmp/err"; then
  echo "1 passed, 0 failed"
  exit 0
fi
cat "$tmp/err"
echo "FAIL: README's channel sketch does not compile"
echo "0 passed, 1 failed"
exit 1
