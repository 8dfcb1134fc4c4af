# SPDX-License-Identifier: MIT
# Sourced by the multi-host tests (tests/net/netns_test.sh,
# tests/coll/coll_netns_test.sh): two "hosts" as two network namespaces
# joined by a veth pair, made inside a private user + network namespace
# (unshare -rn), so nothing of the machine changes and no root is needed
# where unprivileged user namespaces are allowed.
#   netnsEnter "$0" "$@"   first: re-runs the calling script inside a new
#                          user + network namespace (namespace A); exits 77
#                          (skipped, visibly) where that is not allowed
#   netnsPair SUBNET       then, inside: lo up, a second namespace (B, held
#                          by the process $holder: nsenter -t "$holder" -n),
#                          vethA = SUBNET.1 here, vethB = SUBNET.2 there,
#                          and waits until B answers; exits 77 where veth or
#                          nsenter fail. Kills B's holder and the script's
#                          jobs on exit.
netnsEnter() {
  [ -n "${NETNS_INNER:-}" ] && return 0
  if ! unshare -rn true 2>/dev/null; then
    echo "SKIP: cannot create user + network namespaces here (unshare -rn failed)"
    exit 77
  fi
  local script=$1
  shift
  exec env NETNS_INNER=1 unshare -rn bash "$script" "$@"
}

netnsPair() {
  local net=$1
  ip link set lo up
  unshare -n sleep 300 &
  holder=$!
  trap 'kill "$holder" 2>/dev/null; kill $(jobs -p) 2>/dev/null' EXIT
  sleep 0.2
  if ! ip link add vethA type veth peer name vethB 2>/dev/null || ! ip link set vethB netns "$holder"; then
    echo "SKIP: cannot create a veth pair between namespaces"
    exit 77
  fi
  ip addr add "$net.1/24" dev vethA && ip link set vethA up
  nsenter -t "$holder" -n sh -c "ip link set lo up && ip addr add $net.2/24 dev vethB && ip link set vethB up" || {
    echo "SKIP: cannot enter the second namespace"
    exit 77
  }
  for _ in $(seq 50); do ping -c1 -W1 "$net.2" >/dev/null 2>&1 && break; sleep 0.1; done
}
