#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# NCCL_DEBUG / NCCL_DEBUG_SUBSYS are read as aliases of MSCCLPP_DEBUG*, and
# NCCL's own vocabulary (ABORT, P2P, GRAPH, ...) is ignored without a warning;
# the same names in MSCCLPP_* still get one (which shows the check can fail).
#   test_nccl_env.sh mscclpp-run mscclpp-perf
set -u
RUN=$1 PERF=$2
job() { "$RUN" -n 1 --timeout 50 -- "$PERF" allreduce -b 8 -e 8 -n 1 -w 0 2>&1; }
out=$(unset MSCCLPP_DEBUG MSCCLPP_DEBUG_SUBSYS; NCCL_DEBUG=ABORT NCCL_DEBUG_SUBSYS=ENV,INIT,P2P,GRAPH job)
echo "$out" | grep -q "Avg bus bandwidth" || { echo "FAIL: the job did not run:"; echo "$out"; exit 1; }
if echo "$out" | grep -E "unknown subsystem|is not one of" >/dev/null; then
  echo "FAIL: NCCL_* values warned:"; echo "$out" | grep -E "unknown subsystem|is not one of"; exit 1
fi
out=$(unset NCCL_DEBUG NCCL_DEBUG_SUBSYS; MSCCLPP_DEBUG_SUBSYS=ENV,P2P job)
if ! echo "$out" | grep "unknown subsystem" >/dev/null; then
  echo "FAIL: MSCCLPP_DEBUG_SUBSYS=ENV,P2P did not warn"; echo "$out"; exit 1
fi
echo "PASS: NCCL_* names ignored quietly, MSCCLPP_* ones reported"
