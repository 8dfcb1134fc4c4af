#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Puts "SPDX-License-Identifier: MIT" in a comment on the first line of every
# tracked source file that lacks one (after the #! line of a script). Safe to
# run again: files that already name a licence in their first three lines are
# left alone. Files from elsewhere (third_party/) and the CI's own files
# (.ci/) are skipped.
#   bash scripts/add-spdx-headers.sh [--check]
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
[ "${1:-}" = "--check" ] && check=1
tag="SPDX-License-Identifier: MIT"
missing=0
while IFS= read -r f; do
  case "$f" in
    third_party/* | */third_party/* | .ci/*) continue ;;
    *.c | *.h | *.cu | *.cuh | *.cpp | *.map) line="/* $tag */" ;;
    *.sh | *.py | *.cmake | *.in | *CMakeLists.txt | *tsan-suppressions.txt) line="# $tag" ;;
    *) continue ;;
  esac
  head -n 3 "$f" | grep -q "SPDX-License-Identifier" && continue
  missing=$((missing + 1))
  if [ $check -eq 1 ]; then
    echo "no SPDX header: $f"
    continue
  fi
  tmp=$(mktemp)
  if head -n 1 "$f" | grep -q '^#!'; then
    { head -n 1 "$f"; echo "$line"; tail -n +2 "$f"; } >"$tmp"
  else
    { echo "$line"; cat "$f"; } >"$tmp"
  fi
  cat "$tmp" >"$f" # keeps the file's mode
  rm -f "$tmp"
done < <(git ls-files)
if [ $check -eq 1 ]; then
  [ $missing -eq 0 ] && echo "every source file has an SPDX header"
  [ $missing -eq 0 ]
else
  echo "add-spdx-headers: $missing files given an SPDX header"
fi
