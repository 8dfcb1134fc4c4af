#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, then builds a small C
# program against the installed tree twice, with pkg-config and with CMake's
# find_package(mscclpp), and runs both. Also checks what the install holds and
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
for f in "$LIBDIR/libmscclpp.so" include/mscclpp/core.h include/mscclpp/comm.h include/mscclpp/mscclpp.h \
  bin/mscclpp-run bin/mscclpp-info "$LIBDIR/pkgconfig/mscclpp.pc" "$LIBDIR/cmake/mscclpp/mscclppConfig.cmake" \
  "$LIBDIR/cmake/mscclpp/mscclppConfigVersion.cmake"; do
  [ -e "$PREFIX/$f" ] || fail "the install lacks $f"
done
if [ -z "$SANITIZE" ]; then
  others=$(nm -D --defined-only "$PREFIX/$LIBDIR/libmscclpp.so" | awk '$2 ~ /^[TDBRVW]$/ && $3 !~ /^mscclpp/ {print $3}')
  [ -z "$others" ] || fail "libmscclpp.so exports symbols outside the API: $(echo $others | head -c 400)"
fi

# 1. pkg-config
if command -v pkg-config >/dev/null; then
  flags=$(PKG_CONFIG_PATH=$PREFIX/$LIBDIR/pkgconfig pkg-config --cflags --libs mscclpp) || fail "pkg-config mscclpp"
  echo "pkg-config --cflags --libs mscclpp: $flags"
  # shellcheck disable=SC2086
  if "$CC" -std=c11 -Wall -Wextra -Werror $SANFLAGS "$SRC/tests/install/consumer/consumer.c" $flags \
    -Wl,-rpath,"$PREFIX/$LIBDIR" -o "$TMP/consumer_pc"; then
    out=$("$TMP/consumer_pc") || fail "consumer (pkg-config) exited $?"
    echo "$out"
    echo "$out" | grep -q 'mscclppTimeout is "timeout"' || fail "consumer (pkg-config) output"
    ldd "$TMP/consumer_pc" | grep -q "$PREFIX/$LIBDIR/libmscclpp.so" || fail "consumer (pkg-config) does not use the installed library"
  else
    fail "building against the install with pkg-config"
  fi
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
