# SPDX-License-Identifier: MIT
"""Allgather plans (message size: bytes of output).

- oneshot (LL): every rank writes its input as LL packets into every
  peer's scratch, and unpacks what it received into its output. Small
  messages. (MSCCL++'s allgather_pkt example.)
- direct (Simple): zero-copy: rank r writes its input into share r of
  every rank's output, between two handshakes with every peer. (Our
  built-in allgather "direct"; MSCCL++'s allgather example.)
"""

from __future__ import annotations

from ..collectives import AllGather
from ..program import CollectiveProgram
from ..rank import Rank
from ._common import (LL_TBS, handshake, ll_program, memory_channels, peer_channels, peer_scratch, peers,
                      put_packets_to_peers, simple_program, simple_tbs, unpack_from_peers)


def oneshot(name: str, n: int, inplace: bool, min_size: int, max_size: int) -> CollectiveProgram:
    tbs = LL_TBS
    with ll_program(name, AllGather(n, tbs, inplace), n, min_size, max_size) as prog:
        scratch = peer_scratch(n, tbs)
        ch = peer_channels(n)
        for r in range(n):
            rank = Rank(r)
            out = rank.get_output_buffer()
            for t in range(tbs):
                mine = r * tbs + t
                src = out[mine:mine + 1] if inplace else rank.get_input_buffer()[t:t + 1]
                put_packets_to_peers(ch, scratch, r, n, tbs, t, lambda p: src)
                if not inplace:
                    rank.copy(out[mine:mine + 1], src, tb=t)
                unpack_from_peers(rank, scratch, n, tbs, t, out)
    return prog


def direct(name: str, n: int, inplace: bool, min_size: int, max_size: int) -> CollectiveProgram:
    tbs = simple_tbs(n)
    with simple_program(name, AllGather(n, tbs, inplace), n, min_size, max_size) as prog:
        ch = memory_channels(n, tbs)
        for r in range(n):
            rank = Rank(r)
            out = rank.get_output_buffer()
            for t in range(tbs):
                handshake(ch, r, n, t, start=True)
                mine = r * tbs + t
                src = out[mine:mine + 1] if inplace else rank.get_input_buffer()[t:t + 1]
                for p in peers(r, n):
                    ch[(p, r, t)].put(Rank(p).get_output_buffer()[mine:mine + 1], src, tb=t)
                if not inplace:
                    rank.copy(out[mine:mine + 1], src, tb=t)
                handshake(ch, r, n, t, start=False)
    return prog
