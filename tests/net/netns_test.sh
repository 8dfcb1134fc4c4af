#!/bin/bash
# SPDX-License-Identifier: MIT
# Two "hosts": two network namespaces joined by a veth pair, made by this
# script inside a private user + network namespace (unshare -rn), so nothing
# of the machine changes and no root is needed where unprivileged user
# namespaces are allowed. One rank in each; the network transport over
# tcp;ofi_rxm on the veth:
#   1. transport Auto must pick Net between the namespaces; every port
#      channel operation, 1 B .. 16 MiB, data checked (channel_worker ops auto);
#   2. the link goes down during a stream of 16 MiB transfers: both ranks
#      must report an error within MSCCLPP_TIMEOUT (+ slack) and exit.
# Exits 77 (skipped, visibly) where namespaces or veth cannot be made.
# usage: netns_test.sh CHANNEL_WORKER
set -u
worker=$1
. "$(dirname "$0")/../netns_pair.sh"
netnsEnter "$0" "$@"

# ---- inside namespace A; B is held by $holder ----------------------------------------
netnsPair 10.77.0

secret=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
run_pair() { # mode args... ; rank 0 here, rank 1 in the other namespace
  local port=$((20000 + RANDOM % 20000))
  local common="MSCCLPP_COMM_ID=10.77.0.1:$port MSCCLPP_NRANKS=2 MSCCLPP_COMM_SECRET=$secret MSCCLPP_NET_PROVIDER=tcp;ofi_rxm"
  env $common MSCCLPP_RANK=0 MSCCLPP_SOCKET_IFNAME=vethA MSCCLPP_NET_IFNAME==vethA "$@" > "$tmp/r0" 2>&1 &
  p0=$!
  nsenter -t "$holder" -n env $common MSCCLPP_RANK=1 MSCCLPP_SOCKET_IFNAME=vethB MSCCLPP_NET_IFNAME==vethB "$@" \
    > "$tmp/r1" 2>&1 &
  p1=$!
}
tmp=$(mktemp -d)
fail=0

# 1. transfers, Auto transport
run_pair timeout 100 "$worker" ops auto 16777216
wait $p0; s0=$?; wait $p1; s1=$?
sed 's/^/[0] /' "$tmp/r0"; sed 's/^/[1] /' "$tmp/r1"
if [ $s0 -ne 0 ] || [ $s1 -ne 0 ]; then echo "FAIL: transfers between namespaces (status $s0, $s1)"; fail=1; fi

# 2. the link goes down mid-transfer
timeout_s=4
run_pair env MSCCLPP_TIMEOUT=$timeout_s timeout 60 "$worker" linkdown
for i in $(seq 100); do
  grep -q LINKDOWN_READY "$tmp/r0" && grep -q LINKDOWN_READY "$tmp/r1" && break; sleep 0.1
done
sleep 0.5
ip link set vethA down
down=$(date +%s.%N)
wait $p0; s0=$?; wait $p1; s1=$?
end=$(date +%s.%N)
sed 's/^/[0] /' "$tmp/r0"; sed 's/^/[1] /' "$tmp/r1"
took=$(echo "$end - $down" | bc)
echo "both ranks exited $took s after the link went down (MSCCLPP_TIMEOUT=$timeout_s)"
for r in 0 1; do
  if ! grep -q "LINKDOWN_ERROR rank $r status" "$tmp/r$r" || ! grep -q "LINKDOWN_TEARDOWN rank $r" "$tmp/r$r"; then
    echo "FAIL: rank $r did not report the lost link and tear down"; fail=1
  fi
done
if [ "$(echo "$took > 5 * $timeout_s + 10" | bc)" = 1 ]; then echo "FAIL: took too long"; fail=1; fi
rm -rf "$tmp"
[ $fail -eq 0 ] && echo "netns test passed"
exit $fail
