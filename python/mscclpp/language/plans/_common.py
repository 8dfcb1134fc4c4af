# SPDX-License-Identifier: MIT
"""What the default plans share: the programs of each protocol, who a
rank's peers are, where a peer's data lands in a rank's scratch and the LL
plans' packets to and from those places, the size classes, the channels
and the handshakes of the zero-copy ("direct") plans."""

from __future__ import annotations

from typing import Callable, Dict, List, Tuple

from ..channel import MemoryChannel
from ..collectives import Collective
from ..program import CollectiveProgram
from ..rank import BaseBuffer, Buffer, Rank
from ..types import Chunk, SyncType

MAX_SIZE = 2**64 - 1

# Thread blocks per rank. Blocks of different ranks wait for each other, so
# all of them must be resident at once, also where every rank shares one GPU
# (the test machine: 8 ranks on 132 SMs, one 1024-thread block per SM): at
# most 64 blocks in all. Simple plans move large messages and take as many
# as that allows, up to 16; LL plans move small messages.
LL_TBS = 8


def simple_tbs(nranks: int) -> int:
    return 16 if nranks <= 4 else 8


def ll_program(name: str, collective: Collective, n: int, min_size: int, max_size: int) -> CollectiveProgram:
    """An LL plan for messages of min_size..max_size bytes: packets, through
    a double scratch (consecutive calls use its two halves)."""
    return CollectiveProgram(name, collective, n, protocol="LL", use_double_scratch_buffer=True,
                             min_message_size=min_size, max_message_size=max_size)


def simple_program(name: str, collective: Collective, n: int, min_size: int, max_size: int) -> CollectiveProgram:
    """A Simple plan for messages of min_size..max_size bytes."""
    return CollectiveProgram(name, collective, n, protocol="Simple", min_message_size=min_size,
                             max_message_size=max_size)


def peers(rank: int, nranks: int) -> List[int]:
    """The other ranks, starting after ``rank`` (so that not every rank
    writes to rank 0 first)."""
    return [(rank + i) % nranks for i in range(1, nranks)]


def slot(sender: int, receiver: int) -> int:
    """The receiver's scratch slot for data from sender (0 .. nranks-2)."""
    return sender if sender < receiver else sender - 1


def peer_scratch(n: int, per_slot: int) -> List[Buffer]:
    """Every rank's scratch: one slot of per_slot chunks per peer (slot())."""
    return [Buffer(r, (n - 1) * per_slot) for r in range(n)]


def slot_chunk(scratch: List[Buffer], sender: int, receiver: int, tbs: int, t: int, base: int = 0) -> Chunk:
    """Chunk t of the slot that receiver's scratch keeps for sender (slots
    of tbs chunks, from chunk ``base`` on)."""
    at = base + slot(sender, receiver) * tbs + t
    return scratch[receiver][at:at + 1]


def put_packets_to_peers(ch: Dict[Tuple[int, int], MemoryChannel], scratch: List[Buffer], r: int, n: int, tbs: int,
                         t: int, src: Callable[[int], Chunk], base: int = 0) -> None:
    """Thread block t of rank r writes src(p) as LL packets into chunk t of
    its slot in every peer p's scratch."""
    for p in peers(r, n):
        ch[(p, r)].put_packets(slot_chunk(scratch, r, p, tbs, t, base), src(p), tb=t)


def packets_from_peers(scratch: List[Buffer], r: int, n: int, tbs: int, t: int, base: int = 0) -> List[Chunk]:
    """Chunk t of every peer's slot in rank r's scratch, in peers() order:
    the packets thread block t of each peer wrote there."""
    return [slot_chunk(scratch, q, r, tbs, t, base) for q in peers(r, n)]


def unpack_from_peers(rank: Rank, scratch: List[Buffer], n: int, tbs: int, t: int, out: BaseBuffer,
                      base: int = 0) -> None:
    """Thread block t of ``rank`` unpacks the packets of each peer q (chunk t
    of q's slot in its scratch) into chunk q*tbs + t of out."""
    r = rank.rank
    for q in peers(r, n):
        rank.unpack_packets(out[q * tbs + t:q * tbs + t + 1], slot_chunk(scratch, q, r, tbs, t, base), tb=t)


def ll_max_bytes(nranks: int) -> int:
    """Largest message an LL plan serves (a one-shot packet plan, or one
    that sends each byte once): where MSCCL++-style packet algorithms stop
    beating the zero-copy ones, after our built-in allreduce's rule
    (coll/select.c: 512 KiB for 2 ranks, 256 KiB up to 4, 64 KiB above;
    LL doubles the bytes and costs peers x more writes)."""
    return 512 << 10 if nranks <= 2 else 256 << 10 if nranks <= 4 else 64 << 10


def memory_channels(nranks: int, tbs: int) -> Dict[Tuple[int, int, int], MemoryChannel]:
    """One memory channel per (peer, rank, thread block): each thread block
    signals and waits on channels of its own. Created rank by rank, thread
    block by thread block, so rank a's t-th channel to b pairs with b's
    t-th channel to a (both used by thread block t)."""
    return {(p, r, t): MemoryChannel(p, r) for r in range(nranks) for t in range(tbs) for p in peers(r, nranks)}


def peer_channels(nranks: int) -> Dict[Tuple[int, int], MemoryChannel]:
    """One memory channel per (peer, rank), shared by the thread blocks
    (LL plans: packets need no signals)."""
    return {(p, r): MemoryChannel(p, r) for r in range(nranks) for p in peers(r, nranks)}


def handshake(ch: Dict[Tuple[int, int, int], MemoryChannel], rank: int, nranks: int, tb: int, start: bool) -> None:
    """Thread block tb of rank tells every peer it is here and waits for
    them all. At the start (relaxed: no data to order) it means "my buffers
    are ready for this call"; at the end, "I am done with your buffers",
    after which the caller may reuse them."""
    for p in peers(rank, nranks):
        if start:
            ch[(p, rank, tb)].signal(tb, data_sync=SyncType.none, relaxed=True)
        else:
            ch[(p, rank, tb)].signal(tb, data_sync=SyncType.before)
    for p in peers(rank, nranks):
        if start:
            ch[(p, rank, tb)].wait(tb, data_sync=SyncType.after, relaxed=True)
        else:
            ch[(p, rank, tb)].wait(tb, data_sync=SyncType.after)
