#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run_port.sh mscclpp-run mscclpp-info coll_gpu_worker N HOSTS [worker args]:
# the GPU collectives over port channels (coll/port/coll_port.c), checked by
# coll_gpu_worker with N ranks sharing the GPU(s) (under MPS when available).
#   HOSTS=1  one host; MSCCLPP_ALGO forces "port" for every collective and
#            send/recv (port channels over CUDA IPC)
#   HOSTS=H  MSCCLPP_HOSTID splits the ranks into H pretend hosts of N/H
#            ranks (hosts.sh): the communicator spans hosts, so every call
#            takes the port family - CUDA IPC inside a host, the network
#            transport (tcp;ofi_rxm over loopback) between hosts
# Exit 77 without a GPU, or (HOSTS>1) without libfabric's tcp;ofi_rxm.
set -u
RUN=$1 INFO=$2 WORKER=$3 N=$4 HOSTS=$5
shift 5
info=$("$INFO")
if ! grep -E '^GPUs: [1-9]' >/dev/null <<<"$info"; then
  echo "SKIPPED: needs a GPU"
  exit 77
fi
MPS=--mps
command -v nvidia-cuda-mps-control >/dev/null || MPS=
if [ "$HOSTS" -le 1 ]; then
  export MSCCLPP_ALGO=allreduce=port,allgather=port,reducescatter=port,broadcast=port,reduce=port,alltoall=port,sendrecv=port
  exec "$RUN" -n "$N" $MPS --timeout 590 -- "$WORKER" "$@"
fi
if ! grep -F 'tcp;ofi_rxm' >/dev/null <<<"$info"; then
  echo "SKIPPED: needs libfabric with tcp;ofi_rxm"
  exit 77
fi
export MSCCLPP_NET_PROVIDER='tcp;ofi_rxm' MSCCLPP_NET_IFNAME==lo
exec "$RUN" -n "$N" $MPS --timeout 590 -- bash "$(dirname "$0")/hosts.sh" $((N / HOSTS)) "$WORKER" "$@"
