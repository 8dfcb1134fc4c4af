# SPDX-License-Identifier: MIT
"""Memory, connections and channels through the Python package, on the host
backend (run under ``mscclpp-run -n N``, N >= 2).

Every rank allocates host shared memory, registers it, connects to every
peer and builds a memory channel and a port channel to each. The memory
channel's device handle (bytes) must carry the peer's memory as mapped here
(its first field) and this rank's (its second): a store through the first
must land in the peer's buffer. Records sent with RegisteredMemory.send open
on the peer with the owner's rank and size; a connection's write copies into
the peer's memory. Bad input raises, naming what was wrong.
"""

from __future__ import annotations

import ctypes
import struct

from harness import Checks, require_numpy

np = require_numpy()

import mscclpp  # noqa: E402

checks = Checks("test_channels")
comm = mscclpp.Communicator.from_env()
R, N = comm.rank, comm.size
NB = 4096
SLOT = NB // 8  # each writer's slot in a buffer (up to 8 ranks)


def test_alloc_and_register():
    a = comm.alloc(mscclpp.MemKind.HOST_SHARED, NB)
    checks.true(a.ptr != 0 and a.nbytes == NB and not a.is_device, f"alloc: {a!r}")
    v = np.frombuffer(a.view(), dtype=np.uint8)
    v[:] = R
    checks.raises(AttributeError, lambda: a.__cuda_array_interface__, what="host memory has no CUDA interface")
    mem = comm.register_memory(a)
    checks.equal((mem.size, mem.rank, mem.ptr), (NB, R, a.ptr), "registered memory: size, rank, pointer")
    checks.true(not mem.opened, "a registration is not opened")
    return a, mem


def test_channels(a, mem):
    buf = np.frombuffer(a.view(), dtype=np.uint8)
    hsize = mscclpp._lib.lib().mscclppMemoryChannelDeviceHandleSize()
    psize = mscclpp._lib.lib().mscclppPortChannelDeviceHandleSize()
    conns, mchans, pchans = {}, {}, {}
    for p in range(N):
        if p == R:
            continue
        conns[p] = comm.connect(p, tag=0)
        checks.equal(conns[p].remote_rank, p, f"connection to {p}: remote rank")
        checks.true(conns[p].transport == mscclpp.Transport.HOST_SHM, f"connection to {p}: {conns[p].transport!r}")
    for p in sorted(conns):
        mchans[p] = mscclpp.MemoryChannel(comm, conns[p], mem, tag=1)
        pchans[p] = mscclpp.PortChannel(comm, conns[p], mem, tag=2)
    comm.barrier()
    for p, ch in mchans.items():
        h = ch.device_handle()
        checks.equal(len(h), hsize, "memory channel handle: the C struct's size")
        dst, src, dst_size, src_size = struct.unpack_from("<QQQQ", h)
        checks.equal((src, src_size, dst_size), (a.ptr, NB, NB), f"memory channel to {p}: src, sizes")
        checks.true(dst != 0 and dst != a.ptr, f"memory channel to {p}: dst is the peer's memory, mapped here")
        # this rank's slot in the peer's buffer, through the mapping
        ctypes.memset(dst + R * SLOT, 100 + R, SLOT)
    for p, ch in pchans.items():
        checks.equal(len(ch.device_handle()), psize, "port channel handle: the C struct's size")
    comm.barrier()
    for p in mchans:
        got = buf[p * SLOT:(p + 1) * SLOT]
        checks.true(bool((got == 100 + p).all()), f"rank {p}'s stores through its memory channel: {got[:4]}")
    for ch in list(mchans.values()) + list(pchans.values()):
        ch.destroy()
    ch = next(iter(mchans.values()))
    checks.raises(mscclpp.InvalidUsageError, ch.device_handle, what="a destroyed channel's handle")
    comm.barrier()
    return conns


def test_records_and_writes(a, mem, conns):
    buf = np.frombuffer(a.view(), dtype=np.uint8)
    nxt, prv = (R + 1) % N, (R - 1) % N
    mem.send(comm, nxt, tag=5)
    peer = comm.recv_memory(prv, tag=5)
    checks.true(peer.opened, "a received record is opened")
    checks.equal((peer.rank, peer.size), (prv, NB), "opened memory: owner's rank and size")
    # write our slot of the previous rank's buffer through the connection
    src_off = 8 * SLOT - SLOT  # the last slot of our own buffer, filled first
    buf[src_off:src_off + SLOT] = 200 + R
    conns[prv].write(peer, R * SLOT, mem, src_off, SLOT)
    conns[prv].flush()
    comm.barrier()
    got = buf[nxt * SLOT:(nxt + 1) * SLOT]
    checks.true(bool((got == 200 + nxt).all()), f"rank {nxt}'s connection write: {got[:4]}")
    peer.close()
    peer.close()  # idempotent
    checks.raises(mscclpp.InvalidUsageError, lambda: peer.size, what="a closed memory's size")
    comm.barrier()


def test_bad_input(a):
    checks.raises(ValueError, comm.alloc, mscclpp.MemKind.HOST_SHARED, 0, what="alloc of 0 bytes")
    checks.raises(ValueError, comm.register_memory, bytearray(), what="register of an empty buffer")
    checks.raises(ValueError, comm.connect, N, what="connect to rank N")
    checks.raises(mscclpp.InvalidArgumentError, comm.register_memory, np.zeros(4), 0x80,
                  what="register for an unknown transport bit")


a, mem = test_alloc_and_register()
conns = test_channels(a, mem)
test_records_and_writes(a, mem, conns)
test_bad_input(a)
comm.barrier()
for c in conns.values():
    c.destroy()
mem.close()
a.free()
a.free()  # idempotent
checks.raises(mscclpp.InvalidUsageError, lambda: a.ptr, what="a freed allocation's pointer")
comm.destroy()
checks.done()
