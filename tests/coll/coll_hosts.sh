#!/bin/bash
# SPDX-License-Identifier: MIT
# Collectives across "hosts" on one machine: MSCCLPP_HOSTID puts ranks
# r*L .. r*L+L-1 on one host (coll_worker's COLL_RANKS_PER_HOST), so peers
# on other hosts go over the network transport (tcp;ofi_rxm or the first
# provider with RMA, on loopback) and peers of one host over shared memory.
#   coll_hosts.sh RUN WORKER NRANKS L hier|flat [worker args...]
# Runs the worker under mscclpp-run and checks, besides every rank passing,
# that the network was used and that allreduce took the path expected: hier
# (every rank made its child communicators) or flat (none did).
# Exits 77 (skipped, visibly) where libfabric is not available.
set -u
run=$1 worker=$2 n=$3 perHost=$4 expect=$5
shift 5
out=$(mktemp)
trap 'rm -f "$out"' EXIT
start=$(date +%s%N)
env COLL_RANKS_PER_HOST="$perHost" MSCCLPP_NET_IFNAME="${MSCCLPP_NET_IFNAME:-=lo}" MSCCLPP_DEBUG=INFO \
  MSCCLPP_DEBUG_SUBSYS=COLL "$run" -n "$n" --timeout 110 -- "$worker" "$@" >"$out" 2>&1
status=$?
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
grep -v " MSCCLPP INFO " "$out"
if grep -q "SKIP:" "$out"; then exit 77; fi
fail=0
[ "$status" -eq 0 ] || { echo "FAIL: mscclpp-run exited with status $status"; fail=1; }
passed=$(grep -c "^\[[0-9]*\] rank [0-9]*: [a-z0-9]* passed" "$out")
[ "$passed" -eq "$n" ] || { echo "FAIL: $passed of $n ranks passed"; fail=1; }
net=$(grep -c "over port channels (network)" "$out")
[ "$net" -gt 0 ] || { echo "FAIL: no rank connected to a peer over the network"; fail=1; }
made=$(grep -c "cross-host communicator made" "$out")
case "$expect" in
  hier) [ "$made" -eq "$n" ] || { echo "FAIL: $made of $n ranks ran allreduce hierarchically"; fail=1; } ;;
  flat) [ "$made" -eq 0 ] || { echo "FAIL: $made ranks ran allreduce hierarchically, expected none"; fail=1; } ;;
  *) echo "FAIL: expectation must be hier or flat, not $expect"; fail=1 ;;
esac
echo "coll across hosts: $n ranks, $perHost per host, allreduce $expect ($made ranks made child communicators)," \
  "$net network connections, $elapsed_ms ms"
exit $fail
