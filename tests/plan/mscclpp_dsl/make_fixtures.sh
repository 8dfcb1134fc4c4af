#!/bin/sh
# SPDX-License-Identifier: MIT
# Regenerates the fixtures of this directory with MSCCL++'s own DSL (see
# README.md): sh tests/plan/mscclpp_dsl/make_fixtures.sh /path/to/mscclpp-checkout
# Needs python3 with sortedcontainers (MSCCL++'s DSL imports it). MSCCL++'s
# code is only run, from its checkout; nothing of it is copied here.
set -eu
src=${1:?usage: make_fixtures.sh MSCCLPP_CHECKOUT}
out=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The stub: an empty mscclpp/__init__.py in place of MSCCL++'s, which loads
# its C extension (_mscclpp); mscclpp.language itself is pure Python.
mkdir -p "$tmp/mscclpp"
: > "$tmp/mscclpp/__init__.py"
ln -s "$src/python/mscclpp/language" "$tmp/mscclpp/language"
ex="$src/python/mscclpp/language/tests/single_node"
run() { # output-name script args...
  name=$1; shift
  PYTHONHASHSEED=0 PYTHONPATH="$tmp" python3 "$@" > "$out/$name.json"
  echo "$name.json"
}
for n in 2 4 8; do
  run allreduce_$n "$ex/allreduce.py" --name allreduce_$n --num_gpus $n
  run allreduce_pkt_$n "$ex/allreduce_pkt.py" --name allreduce_pkt_$n --num_gpus $n
  run allgather_pkt_$n "$ex/allgather_pkt.py" --name allgather_pkt_$n --num_gpus $n
  run alltoall_$n "$ex/alltoall/alltoall.py" --name alltoall_$n --num_gpus $n
done
# These two examples are written for 2 ranks only.
run allgather_2 "$ex/allgather.py" --name allgather_2
run allgather_tbg_2 "$ex/allgather_tbg.py" --name allgather_tbg_2
