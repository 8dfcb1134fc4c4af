# SPDX-License-Identifier: MIT
"""All-to-all plans (message size: bytes of input).

- oneshot (LL): rank r writes share q of its input as LL packets into rank
  q's scratch and unpacks what it received into its output. Small
  messages.
- direct (Simple): out of place, zero-copy: thread block t of rank r
  writes chunk t of its share q into rank q's output, between two
  handshakes with every peer (our built-in alltoall "direct" pulls
  instead; a get whose local and remote chunks differ is mishandled by
  MSCCL++'s executor, which swaps the two offsets, and these plans are
  meant to run there too). In place, where a peer's input is overwritten
  by its own output, through scratch: rank r writes share q into rank q's
  scratch, signals it, and copies what it received into place (MSCCL++'s
  alltoall example).
"""

from __future__ import annotations

from ..collectives import AllToAll
from ..program import CollectiveProgram
from ..rank import Rank
from ..types import SyncType
from ._common import (LL_TBS, handshake, ll_program, memory_channels, peer_channels, peer_scratch, peers,
                      put_packets_to_peers, simple_program, simple_tbs, slot_chunk, unpack_from_peers)


def oneshot(name: str, n: int, inplace: bool, min_size: int, max_size: int) -> CollectiveProgram:
    tbs = LL_TBS
    with ll_program(name, AllToAll(n, tbs, inplace), n, min_size, max_size) as prog:
        scratch = peer_scratch(n, tbs)
        ch = peer_channels(n)
        for r in range(n):
            rank = Rank(r)
            inp = rank.get_input_buffer()
            out = inp if inplace else rank.get_output_buffer()
            for t in range(tbs):
                put_packets_to_peers(ch, scratch, r, n, tbs, t, lambda p: inp[p * tbs + t:p * tbs + t + 1])
                mine = r * tbs + t
                if not inplace:
                    rank.copy(out[mine:mine + 1], inp[mine:mine + 1], tb=t)
                unpack_from_peers(rank, scratch, n, tbs, t, out)
    return prog


def direct(name: str, n: int, inplace: bool, min_size: int, max_size: int) -> CollectiveProgram:
    tbs = simple_tbs(n)
    with simple_program(name, AllToAll(n, tbs, inplace), n, min_size, max_size) as prog:
        scratch = peer_scratch(n, tbs) if inplace else []
        ch = memory_channels(n, tbs)
        for r in range(n):
            rank = Rank(r)
            inp = rank.get_input_buffer()
            for t in range(tbs):
                handshake(ch, r, n, t, start=True)
                mine = r * tbs + t
                if inplace:
                    for p in peers(r, n):
                        ch[(p, r, t)].put(slot_chunk(scratch, r, p, tbs, t), inp[p * tbs + t:p * tbs + t + 1], tb=t)
                    for p in peers(r, n):
                        ch[(p, r, t)].signal(tb=t, data_sync=SyncType.before)
                    for q in peers(r, n):
                        ch[(q, r, t)].wait(tb=t, data_sync=SyncType.after)
                    for q in peers(r, n):
                        rank.copy(inp[q * tbs + t:q * tbs + t + 1], slot_chunk(scratch, q, r, tbs, t), tb=t)
                else:
                    for p in peers(r, n):
                        ch[(p, r, t)].put(Rank(p).get_output_buffer()[mine:mine + 1],
                                          inp[p * tbs + t:p * tbs + t + 1], tb=t)
                    rank.copy(rank.get_output_buffer()[mine:mine + 1], inp[mine:mine + 1], tb=t)
                    handshake(ch, r, n, t, start=False)
    return prog
