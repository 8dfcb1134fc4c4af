# SPDX-License-Identifier: MIT
"""What the default plans share: who a rank's peers are, where a peer's
data lands in a rank's scratch, the size classes, the channels and the
handshakes of the zero-copy ("direct") plans."""

from __future__ import annotations

from typing import Dict, List, Tuple

from ..channel import MemoryChannel
from ..types import SyncType

MAX_SIZE = 2**64 - 1

# Thread blocks per rank. Blocks of different ranks wait for each other, so
# all of them must be resident at once, also where every rank shares one GPU
# (the test machine: 8 ranks on 132 SMs, one 1024-thread block per SM): at
# most 64 blocks in all. Simple plans move large messages and take as many
# as that allows, up to 16; LL plans move small messages.
LL_TBS = 8


def simple_tbs(nranks: int) -> int:
    return 16 if nranks <= 4 else 8


def peers(rank: int, nranks: int) -> List[int]:
    """The other ranks, starting after ``rank`` (so that not every rank
    writes to rank 0 first)."""
    return [(rank + i) % nranks for i in range(1, nranks)]


def slot(sender: int, receiver: int) -> int:
    """The receiver's scratch slot for data from sender (0 .. nranks-2)."""
    return sender if sender < receiver else sender - 1


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
