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
from ..rank import Buffer, Rank
from ._common import LL_TBS, simple_tbs, handshake, memory_channels, peer_channels, peers, slot


def oneshot(name: str, n: int, inplace: bool, min_size: int, max_size: int) -> CollectiveProgram:
    tbs = LL_TBS
    with CollectiveProgram(name, AllGather(n, tbs, inplace), n, protocol="LL", use_double_scratch_buffer=True,
                           min_message_size=min_size, max_message_size=max_size) as prog:
        scratch = [Buffer(r, (n - 1) * tbs) for r in range(n)]
        ch = peer_channels(n)
        for r in range(n):
            rank = Rank(r)
            out = rank.get_output_buffer()
            for t in range(tbs):
                mine = r * tbs + t
                src = out[mine:mine + 1] if inplace else rank.get_input_buffer()[t:t + 1]
                for p in peers(r, n):
                    at = slot(r, p) * tbs + t
                    ch[(p, r)].put_packets(scratch[p][at:at + 1], src, tb=t)
                if not inplace:
                    rank.copy(out[mine:mine + 1], src, tb=t)
                for q in peers(r, n):
                    at = slot(q, r) * tbs + t
                    rank.unpack_packets(out[q * tbs + t:q * tbs + t + 1], scratch[r][at:at + 1], tb=t)
    return prog


def direct(name: str, n: int, inplace: bool, min_size: int, max_size: int) -> CollectiveProgram:
    tbs = simple_tbs(n)
    with CollectiveProgram(name, AllGather(n, tbs, inplace), n, protocol="Simple",
                           min_message_size=min_size, max_message_size=max_size) as prog:
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
