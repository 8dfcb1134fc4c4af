#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Every public header compiles alone, as C11 and as C++, with all warnings as
# errors and -pedantic: users include them from both languages.
#
#   test_public_headers.sh INCLUDE_DIR C_COMPILER [CXX_COMPILER]
set -u
INC=${1:?include dir}
CC=${2:?C compiler}
CXX=${3:-}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failed=0
n=0
for h in "$INC"/mscclpp/*.h; do
  name=mscclpp/$(basename "$h")
  printf '#include <%s>\n#include <%s>\nint mscclppHeaderCheck_(void) { return 0; }\n' "$name" "$name" >"$TMP/t.c"
  n=$((n + 1))
  if ! "$CC" -std=c11 -Wall -Wextra -Werror -pedantic -fsyntax-only -I"$INC" "$TMP/t.c"; then
    echo "FAIL: $name does not compile alone as C11 ($CC -std=c11 -Wall -Wextra -Werror -pedantic)"
    failed=$((failed + 1))
  fi
  if [ -n "$CXX" ]; then
    cp "$TMP/t.c" "$TMP/t.cpp"
    if ! "$CXX" -std=c++17 -Wall -Wextra -Werror -pedantic -fsyntax-only -I"$INC" "$TMP/t.cpp"; then
      echo "FAIL: $name does not compile alone as C++17 ($CXX -std=c++17 -Wall -Wextra -Werror -pedantic)"
      failed=$((failed + 1))
    fi
  fi
done
if [ -z "$CXX" ]; then
  echo "FAIL: no C++ compiler found (scripts/deps.sh installs g++)"
  failed=$((failed + 1))
fi
echo "$n headers checked${CXX:+ as C11 and C++17}"
[ $failed -eq 0 ] && echo "1 passed, 0 failed" || echo "0 passed, 1 failed"
[ $failed -eq 0 ]
