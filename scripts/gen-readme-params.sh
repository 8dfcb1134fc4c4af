#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# README's table of environment variables is `mscclpp-info --params --markdown`,
# between two marker lines. This script rewrites it, or (--check) fails when
# README differs from what the table in src/core/params.h generates.
#
#   scripts/gen-readme-params.sh [--check] [path/to/mscclpp-info [README.md]]
#
# Without a path, the tool is looked for in build/ and build-*/ (the newest).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
check=0
if [ "${1:-}" = "--check" ]; then
  check=1
  shift
fi
info=${1:-}
readme=${2:-$root/README.md}
if [ -z "$info" ]; then
  info=$(ls -t "$root"/build/tools/mscclpp-info "$root"/build-*/tools/mscclpp-info 2>/dev/null | head -1 || true)
  if [ -z "$info" ]; then
    echo "gen-readme-params: no mscclpp-info found; build first (cmake -S . -B build && cmake --build build)" >&2
    exit 2
  fi
fi
begin='<!-- BEGIN mscclpp-info --params --markdown (scripts/gen-readme-params.sh) -->'
end='<!-- END mscclpp-info --params --markdown -->'
if ! grep -qxF "$begin" "$readme" || ! grep -qxF "$end" "$readme"; then
  echo "gen-readme-params: $readme lacks the marker lines:" >&2
  echo "  $begin" >&2
  echo "  $end" >&2
  exit 1
fi
table=$(mktemp)
new=$(mktemp)
trap 'rm -f "$table" "$new"' EXIT
# The defaults only: the environment of whoever runs this must not leak in.
env -i PATH="$PATH" "$info" --params --markdown >"$table"
awk -v begin="$begin" -v end="$end" -v table="$table" '
  $0 == begin { print; while ((getline line < table) > 0) print line; skip = 1; next }
  $0 == end { skip = 0 }
  !skip { print }
' "$readme" >"$new"
if [ $check -eq 1 ]; then
  if ! diff -u "$readme" "$new"; then
    echo "README.md's table of environment variables differs from src/core/params.h;" >&2
    echo "run: bash scripts/gen-readme-params.sh" >&2
    exit 1
  fi
  echo "README.md's parameter table matches mscclpp-info --params --markdown"
  echo "1 passed, 0 failed"
else
  if cmp -s "$readme" "$new"; then
    echo "README.md is up to date"
  else
    cp "$new" "$readme"
    echo "README.md: parameter table regenerated from $info"
  fi
fi
