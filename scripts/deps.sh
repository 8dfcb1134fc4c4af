#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs what building and testing mscclpp needs on Debian 12, when missing.
# Safe to run again: it calls apt-get only for packages that are absent.
#   cmake make gcc g++ pkg-config  the build; g++ checks that public headers compile as C++
#   clang libclang-rt-14-dev        the fuzz tree (libFuzzer) and its sanitizer runtimes
#   libfabric-dev                   the network transport and mscclpp-info's provider list
#   iproute2                        multi-host tests in network namespaces (ip netns)
#   gnuplot-nox                     benchmark plots (mscclpp-perf --plot)
#   python3                         tests/perf/check_json.sh reads mscclpp-perf's JSON
#   python3-numpy python3-pip mypy  the Python package's tests (tests/python/; skipped without them)
#   binutils                        nm, for the NCCL library's exported-symbol test
#   libjansson-dev                  the JSON parser of execution plans (src/coll/plan/; optional:
#                                   without it the plan API says the build has no JSON parser)
# The CUDA toolkit is not a Debian package here: install it yourself; without
# nvcc the build is the host backend only.
set -euo pipefail
pkgs=(cmake make gcc g++ pkg-config clang libclang-rt-14-dev libfabric-dev iproute2 gnuplot-nox python3 python3-numpy python3-pip mypy binutils libjansson-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "deps: done"
else
  echo "deps: all present (${pkgs[*]})"
fi
