#!/usr/bin/env bash
# Installs what building and testing mscclpp needs on Debian 12, when missing.
# Safe to run again: it only calls apt-get for packages that are absent.
set -euo pipefail
pkgs=(cmake make gcc pkg-config clang libclang-rt-14-dev libfabric-dev libnuma-dev iproute2 gnuplot-nox)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
