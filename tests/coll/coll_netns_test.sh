#!/bin/bash
# SPDX-License-Identifier: MIT
# Collectives between two real "hosts": two network namespaces joined by a
# veth pair (made as in tests/net/netns_test.sh, inside a private user +
# network namespace, no root needed), two ranks in each. Ranks of one
# namespace share memory; the two namespaces only reach each other over the
# veth, through the network transport (tcp;ofi_rxm). Runs the collective
# matrix (allreduce hierarchical where it applies: every rank must make its
# child communicators) and send/recv groups, data checked exactly.
# Exits 77 (skipped, visibly) where namespaces or veth cannot be made.
# usage: coll_netns_test.sh COLL_WORKER [MAXBYTES]
set -u
worker=$1
maxBytes=${2:-1048576}
. "$(dirname "$0")/../netns_pair.sh"
netnsEnter "$0" "$@"

# ---- inside namespace A; B is held by $holder ----------------------------------------
netnsPair 10.78.0

secret=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
tmp=$(mktemp -d)
fail=0
run4() { # worker args...: ranks 0, 1 here (vethA), 2, 3 in the other namespace (vethB)
  local port=$((20000 + RANDOM % 20000)) pids="" r
  local common="MSCCLPP_COMM_ID=10.78.0.1:$port MSCCLPP_NRANKS=4 MSCCLPP_COMM_SECRET=$secret COLL_NETNS=1
    MSCCLPP_NET_PROVIDER=tcp;ofi_rxm MSCCLPP_DEBUG=INFO MSCCLPP_DEBUG_SUBSYS=COLL"
  for r in 0 1 2 3; do
    if [ $r -lt 2 ]; then
      env $common MSCCLPP_RANK=$r MSCCLPP_SOCKET_IFNAME=vethA MSCCLPP_NET_IFNAME==vethA \
        timeout 100 "$worker" "$@" >"$tmp/r$r" 2>&1 &
    else
      nsenter -t "$holder" -n env $common MSCCLPP_RANK=$r MSCCLPP_SOCKET_IFNAME=vethB MSCCLPP_NET_IFNAME==vethB \
        timeout 100 "$worker" "$@" >"$tmp/r$r" 2>&1 &
    fi
    pids="$pids $!"
  done
  local st=0 p
  for p in $pids; do wait "$p" || st=1; done
  for r in 0 1 2 3; do grep -v " MSCCLPP INFO " "$tmp/r$r" | sed "s/^/[$r] /"; done
  return $st
}
check() { # name status: every rank passed; the network was used
  local name=$1 st=$2 r
  if grep -q "^SKIP:" "$tmp/r0"; then exit 77; fi
  [ "$st" -eq 0 ] || { echo "FAIL: $name: a rank failed"; fail=1; }
  for r in 0 1 2 3; do
    grep -q "rank $r: .* passed" "$tmp/r$r" || { echo "FAIL: $name: rank $r did not pass"; fail=1; }
    grep -q "over port channels (network)" "$tmp/r$r" || { echo "FAIL: $name: rank $r used no network"; fail=1; }
    grep -q "over memory channels (shared memory)" "$tmp/r$r" ||
      { echo "FAIL: $name: rank $r used no shared memory"; fail=1; }
  done
}

start=$(date +%s)
run4 matrix "$maxBytes"; check matrix $?
made=$(cat "$tmp"/r? | grep -c "cross-host communicator made")
[ "$made" -eq 4 ] || { echo "FAIL: $made of 4 ranks ran allreduce hierarchically"; fail=1; }
run4 p2p; check p2p $?
echo "collectives between two network namespaces, 2 ranks each: $(($(date +%s) - start)) s"
rm -rf "$tmp"
[ $fail -eq 0 ] && echo "coll netns test passed"
exit $fail
