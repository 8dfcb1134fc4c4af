# SPDX-License-Identifier: MIT
"""Allreduce plans.

- oneshot (LL): every rank writes its whole input as LL packets into every
  peer's scratch and reduces the copies it received: one step, (n-1)
  times the data written per rank. Small messages. (Our built-in
  allreduce "packet".)
- twoshot (LL): reduce-scatter then allgather, both in packets: rank r
  sends share q of its input to rank q, reduces its own share with what it
  got and sends the result to every peer. Each rank writes 2(n-1)/n of the
  data, twice (packets). Medium messages, 3 ranks and more. (Built-in
  "packet2"; MSCCL++'s allreduce_pkt example.)
- rsag (Simple): zero-copy reduce-scatter and allgather fused: thread
  block t of rank r reads chunk t of share r from every peer's input,
  reduces it with its own and writes the sum into every rank's output
  (read once, written once), between two handshakes with every peer.
  Large messages. (Built-in "rsag"; MSCCL++'s allreduce example.)
"""

from __future__ import annotations

from ..collectives import AllReduce
from ..program import CollectiveProgram
from ..rank import Buffer, Rank
from ._common import (LL_TBS, handshake, ll_program, memory_channels, packets_from_peers, peer_channels,
                      peer_scratch, peers, put_packets_to_peers, simple_program, simple_tbs, slot,
                      unpack_from_peers)


def oneshot(name: str, n: int, inplace: bool, min_size: int, max_size: int) -> CollectiveProgram:
    tbs = LL_TBS
    with ll_program(name, AllReduce(n, tbs, inplace), n, min_size, max_size) as prog:
        total = n * tbs  # chunks of the input; thread block t owns [t*n, (t+1)*n)
        scratch = peer_scratch(n, total)
        ch = peer_channels(n)
        for r in range(n):
            rank = Rank(r)
            inp = rank.get_input_buffer()
            out = inp if inplace else rank.get_output_buffer()
            for t in range(tbs):
                lo, hi = t * n, (t + 1) * n
                for p in peers(r, n):
                    at = slot(r, p) * total
                    ch[(p, r)].put_packets(scratch[p][at + lo:at + hi], inp[lo:hi], tb=t)
                got = [scratch[r][slot(q, r) * total + lo:slot(q, r) * total + hi] for q in peers(r, n)]
                rank.reduce(inp[lo:hi], got, tb=t, dst_chunk=out[lo:hi], packet=True)
    return prog


def twoshot(name: str, n: int, inplace: bool, min_size: int, max_size: int) -> CollectiveProgram:
    tbs = LL_TBS
    with ll_program(name, AllReduce(n, tbs, inplace), n, min_size, max_size) as prog:
        # Share q of the input is chunks [q*tbs, (q+1)*tbs); thread block j
        # moves chunk j of every share. Scratch: (n-1) slots of tbs chunks
        # for the shares peers send (first half), as many for the results.
        half = (n - 1) * tbs
        scratch = [Buffer(r, 2 * half) for r in range(n)]
        ch = peer_channels(n)
        for r in range(n):
            rank = Rank(r)
            inp = rank.get_input_buffer()
            out = inp if inplace else rank.get_output_buffer()
            for j in range(tbs):
                put_packets_to_peers(ch, scratch, r, n, tbs, j, lambda p: inp[p * tbs + j:p * tbs + j + 1])
                mine = r * tbs + j
                got = packets_from_peers(scratch, r, n, tbs, j)
                rank.reduce(inp[mine:mine + 1], got, tb=j, dst_chunk=out[mine:mine + 1], packet=True)
                put_packets_to_peers(ch, scratch, r, n, tbs, j, lambda p: out[mine:mine + 1], base=half)
                unpack_from_peers(rank, scratch, n, tbs, j, out, base=half)
    return prog


def rsag(name: str, n: int, inplace: bool, min_size: int, max_size: int) -> CollectiveProgram:
    tbs = simple_tbs(n)
    with simple_program(name, AllReduce(n, tbs, inplace), n, min_size, max_size) as prog:
        ch = memory_channels(n, tbs)
        for r in range(n):
            rank = Rank(r)
            inp = rank.get_input_buffer()
            out = inp if inplace else rank.get_output_buffer()
            for t in range(tbs):
                handshake(ch, r, n, t, start=True)
                i = r * tbs + t  # chunk t of share r
                for p in peers(r, n):
                    ch[(p, r, t)].reduce(inp[i:i + 1], [Rank(p).get_input_buffer()[i:i + 1]], tb=t,
                                         local_dst_chunk=out[i:i + 1])
                for p in peers(r, n):
                    peer_out = Rank(p).get_input_buffer() if inplace else Rank(p).get_output_buffer()
                    ch[(p, r, t)].put(peer_out[i:i + 1], out[i:i + 1], tb=t)
                handshake(ch, r, n, t, start=False)
    return prog
