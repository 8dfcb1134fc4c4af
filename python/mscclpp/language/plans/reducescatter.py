# SPDX-License-Identifier: MIT
"""Reduce-scatter plans (message size: bytes of input).

- oneshot (LL): rank r writes share q of its input as LL packets into rank
  q's scratch, and reduces its own share with the packets it received.
  Small messages.
- direct (Simple): zero-copy: thread block t of rank r reads chunk t of
  share r from every peer's input and reduces it with its own, between
  two handshakes with every peer. (Our built-in reducescatter "direct".)
"""

from __future__ import annotations

from ..collectives import ReduceScatter
from ..program import CollectiveProgram
from ..rank import Rank
from ._common import (LL_TBS, handshake, ll_program, memory_channels, packets_from_peers, peer_channels,
                      peer_scratch, peers, put_packets_to_peers, simple_program, simple_tbs)


def oneshot(name: str, n: int, inplace: bool, min_size: int, max_size: int) -> CollectiveProgram:
    tbs = LL_TBS
    with ll_program(name, ReduceScatter(n, tbs, inplace), n, min_size, max_size) as prog:
        scratch = peer_scratch(n, tbs)
        ch = peer_channels(n)
        for r in range(n):
            rank = Rank(r)
            inp = rank.get_input_buffer()
            for t in range(tbs):
                put_packets_to_peers(ch, scratch, r, n, tbs, t, lambda p: inp[p * tbs + t:p * tbs + t + 1])
                mine = r * tbs + t
                dst = inp[mine:mine + 1] if inplace else rank.get_output_buffer()[t:t + 1]
                got = packets_from_peers(scratch, r, n, tbs, t)
                rank.reduce(inp[mine:mine + 1], got, tb=t, dst_chunk=dst, packet=True)
    return prog


def direct(name: str, n: int, inplace: bool, min_size: int, max_size: int) -> CollectiveProgram:
    tbs = simple_tbs(n)
    with simple_program(name, ReduceScatter(n, tbs, inplace), n, min_size, max_size) as prog:
        ch = memory_channels(n, tbs)
        for r in range(n):
            rank = Rank(r)
            inp = rank.get_input_buffer()
            for t in range(tbs):
                handshake(ch, r, n, t, start=True)
                mine = r * tbs + t
                dst = inp[mine:mine + 1] if inplace else rank.get_output_buffer()[t:t + 1]
                for p in peers(r, n):
                    ch[(p, r, t)].reduce(inp[mine:mine + 1], [Rank(p).get_input_buffer()[mine:mine + 1]], tb=t,
                                         local_dst_chunk=dst)
                handshake(ch, r, n, t, start=False)
    return prog
