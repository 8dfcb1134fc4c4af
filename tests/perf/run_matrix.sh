#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run_matrix.sh LAUNCHER PERF NRANKS COLLECTIVE
# The exact-check matrix of one collective at NRANKS ranks on the host
# backend: every type and every operation, out of place and in place, at
#   - odd sizes 0, 1, 3, 9, ... 59049 bytes (counts that are multiples of
#     nothing), and
#   - NRANKS, 2*NRANKS, ... 8*NRANKS bytes (one element per rank, and a few,
#     of every type).
# mscclpp-perf exits non-zero on any #wrong or failed call.
set -u
run=$1 perf=$2 n=$3 coll=$4
common=(-d all -o all -n 1 -w 0 -c 1)
"$run" -n "$n" --timeout 100 -- "$perf" "$coll" -b 0 -e 64K -f 3 "${common[@]}" || exit 1
"$run" -n "$n" --timeout 100 -- "$perf" "$coll" -b "$n" -e $((8 * n)) -i "$n" "${common[@]}" || exit 1
