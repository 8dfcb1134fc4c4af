#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs the build tree into a temporary prefix, then builds two small C
# programs (one on mscclpp, one on the NCCL-compatible library) against the
# installed tree twice, with pkg-config and with CMake's find_package(mscclpp),
# and runs them (the pkg-config ones without LD_LIBRARY_PATH). Also checks what the install holds and
# that the shared library exports only mscclpp* symbols.
#
#   test_install.sh BUILD_DIR SOURCE_DIR C_COMPILER LIBDIR "SANITIZE"
set -u
BUILD=${1:?build dir}
SRC=${2:?source dir}
CC=${3:?C compiler}
LIBDIR=${4:?install libdir}
SANITIZE=${5:-}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
PREFIX=$TMP/prefix
failed=0
fail() {
  echo "FAIL: $*" >&2
  failed=$((failed + 1))
}
# A library built with sanitizers needs their runtime in the program too.
SANFLAGS=""
[ -n "$SANITIZE" ] && SANFLAGS="-fsanitize=$SANITIZE"

if ! cmake --install "$BUILD" --prefix "$PREFIX" >"$TMP/install.log" 2>&1; then
  cat "$TMP/install.log"
  echo "FAIL: cmake --install failed"
  exit 1
fi
for f in "$LIBDIR/libmscclpp.so" "$LIBDIR/libmscclpp_nccl.so" "$LIBDIR/mscclpp_nccl/libnccl.so.2" \
  include/mscclpp_nccl/nccl.h "$LIBDIR/pkgconfig/mscclpp_nccl.pc" include/mscclpp/core.h include/mscclpp/comm.h include/mscclpp/mscclpp.h \
  bin/mscclpp-run bin/mscclpp-info "$LIBDIR/pkgconfig/mscclpp.pc" "$LIBDIR/cmake/mscclpp/mscclppConfig.cmake" \
  "$LIBDIR/cmake/mscclpp/mscclppConfigVersion.cmake"; do
  [ -e "$PREFIX/$f" ] || fail "the install lacks $f"
done
if [ -z "$SANITIZE" ]; then
  others=$(nm -D --defined-only "$PREFIX/$LIBDIR/libmscclpp.so" | awk '$2 ~ /^[TDBRVW]$/ && $3 !~ /^mscclpp/ {print $3}')
  [ -z "$others" ] || fail "libmscclpp.so exports symbols outside the API: $(echo $others | head -c 400)"
fi

# 1. pkg-config, exactly as the README says, and the programs run without
# LD_LIBRARY_PATH: the .pc files carry the rpath.
# pc_consumer NAME PACKAGE SOURCE EXPECTED_OUTPUT LIBRARY_THE_PROGRAM_MUST_LOAD
pc_consumer() {
  local name=$1 pkg=$2 src=$3 expect=$4 lib=$5 flags out loaded
  flags=$(PKG_CONFIG_PATH=$PREFIX/$LIBDIR/pkgconfig pkg-config --cflags --libs "$pkg") || {
    fail "pkg-config $pkg"
    return
  }
  echo "pkg-config --cflags --libs $pkg: $flags"
  # shellcheck disable=SC2086
  if ! "$CC" -std=c11 -Wall -Wextra -Werror $SANFLAGS "$src" $flags -o "$TMP/$name"; then
    fail "building $name against the install with pkg-config $pkg"
    return
  fi
  out=$(env -u LD_LIBRARY_PATH "$TMP/$name") || fail "$name (pkg-config $pkg) exited $? without LD_LIBRARY_PATH"
  echo "$out"
  echo "$out" | grep -q "$expect" || fail "$name (pkg-config $pkg) output"
  # The .pc files name the prefix relative to themselves (lib/pkgconfig/../..).
  loaded=$(env -u LD_LIBRARY_PATH ldd "$TMP/$name" | awk -v n="$(basename "$lib")" '$1 == n {print $3}')
  [ -n "$loaded" ] && [ "$(realpath "$loaded")" = "$(realpath "$lib")" ] ||
    fail "$name does not load $lib: $(env -u LD_LIBRARY_PATH ldd "$TMP/$name")"
}
if command -v pkg-config >/dev/null; then
  pc_consumer consumer_pc mscclpp "$SRC/tests/install/consumer/consumer.c" 'mscclppTimeout is "timeout"' \
    "$PREFIX/$LIBDIR/libmscclpp.so.0"
  pc_consumer consumer_nccl_pc mscclpp_nccl "$SRC/tests/install/consumer/consumer_nccl.c" 'NCCL API version' \
    "$PREFIX/$LIBDIR/mscclpp_nccl/libnccl.so.2"
else
  fail "pkg-config is not installed (scripts/deps.sh installs it)"
fi

# 2. find_package(mscclpp)
if cmake -S "$SRC/tests/install/consumer" -B "$TMP/consumer_build" -DCMAKE_PREFIX_PATH="$PREFIX" \
  -DCMAKE_C_COMPILER="$CC" -DCMAKE_C_FLAGS="$SANFLAGS" -DCMAKE_EXE_LINKER_FLAGS="$SANFLAGS" \
  -DCMAKE_BUILD_TYPE=Release >"$TMP/consumer_cmake.log" 2>&1 &&
  cmake --build "$TMP/consumer_build" >>"$TMP/consumer_cmake.log" 2>&1; then
  out=$("$TMP/consumer_build/consumer") || fail "consumer (find_package) exited $?"
  echo "$out"
  echo "$out" | grep -q 'mscclppTimeout is "timeout"' || fail "consumer (find_package) output"
  out=$(env -u LD_LIBRARY_PATH "$TMP/consumer_build/consumer_nccl") || fail "consumer_nccl (mscclpp::nccl) exited $?"
  echo "$out"
  echo "$out" | grep -q 'NCCL API version' || fail "consumer_nccl (mscclpp::nccl) output"
else
  cat "$TMP/consumer_cmake.log"
  fail "building against the install with find_package(mscclpp)"
fi

# 3. The installed tools run.
"$PREFIX/bin/mscclpp-info" --params | grep -q '^MSCCLPP_TIMEOUT=' || fail "installed mscclpp-info --params"
out=$("$PREFIX/bin/mscclpp-run" -n 2 sh -c 'echo $MSCCLPP_RANK') || fail "installed mscclpp-run"
[ "$(echo "$out" | sort | tr '\n' ' ')" = "[0] 0 [1] 1 " ] || fail "installed mscclpp-run output: $out"

[ $failed -eq 0 ] && echo "1 passed, 0 failed" || echo "0 passed, 1 failed"
[ $failed -eq 0 ]
