#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# hosts.sh PER cmd [args]: run cmd as a rank of a pretend host of PER ranks:
# MSCCLPP_HOSTID=host<MSCCLPP_RANK / PER> (mscclpp-run sets MSCCLPP_RANK), so
# ranks 0..PER-1 are one host, the next PER another, ...; the transport
# between "hosts" is then the network (mscclppTransportAuto).
set -u
PER=$1
shift
export MSCCLPP_HOSTID=host$((MSCCLPP_RANK / PER))
exec "$@"
