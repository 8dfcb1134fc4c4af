# SPDX-License-Identifier: MIT
"""Operations of one thread block, as the DSL records them: their operands,
how two neighbours fuse into one (``fuse``), the local memory they touch
(``accesses``, for the dependency pass), how replication shifts them
(``shift_buffers``/``shift_ids``) and their JSON form (``to_dict``).

The fusion rules and the JSON are MSCCL++'s (python/mscclpp/language/
internal/operations.py in microsoft/mscclpp), so that a program emits the
plan MSCCL++'s DSL would:

- neighbouring signals (waits) on disjoint channels of one type become one
  signal (wait) over the union; flushes always merge; semaphore acquires
  (releases) merge;
- puts (put, ppkt, pws, pwsf) of equal source size on one channel type and
  thread block group concatenate; read-put-packets of one source merge
  their destinations; gets likewise;
- reduces of one source and destination merge their other sources; a
  reduce followed by a put of its result becomes a reduce-send (re -> res,
  rre -> rres, repkt -> respkt, recpkt -> recspkt); a packet reduce
  followed by a copy of its result into packets becomes recpkt;
- a synchronisation (nop) or barrier right after an operation that syncs
  after itself, or before one that syncs before itself, is dropped.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, replace
from typing import Any, Dict, Iterable, List, Optional, Set, TypeVar

from .types import BufferType, ChannelType, Instruction, ReduceOperationType, SyncType

_uids = itertools.count(1)


_Ref = TypeVar("_Ref", "LocalRef", "RemoteRef")


def _shifted(ref: _Ref, instance: int, instances: int, interleave: bool) -> _Ref:
    """The chunks ``ref`` names in copy ``instance`` of ``instances`` of the
    program: interleaved, each chunk becomes ``instances`` chunks, this
    instance's ``size`` of them."""
    if not interleave:
        return ref
    return replace(ref, index=ref.index * instances + instance * ref.size)


@dataclass(frozen=True)
class LocalRef:
    """Chunks of this rank's own buffer."""

    buffer: BufferType
    index: int
    size: int

    def to_dict(self) -> Dict[str, Any]:
        return {"type": self.buffer.value, "index": self.index, "size": self.size}

    def shifted(self, instance: int, instances: int, interleave: bool) -> "LocalRef":
        return _shifted(self, instance, instances, interleave)


@dataclass(frozen=True)
class RemoteRef:
    """Chunks of a peer's buffer, reached through the thread block's
    ``buffer_id``-th remote buffer of the operation's channel type."""

    buffer: BufferType
    index: int
    size: int
    buffer_id: int

    def to_dict(self) -> Dict[str, Any]:
        return {"buffer_id": self.buffer_id, "index": self.index, "size": self.size}

    def shifted(self, instance: int, instances: int, interleave: bool) -> "RemoteRef":
        return _shifted(self, instance, instances, interleave)


@dataclass(frozen=True)
class TbgInfo:
    """This thread block's place in a thread block group that shares the
    operation: the executor gives it slice ``tb_id`` of ``tbg_size``."""

    tb_id: int
    tbg_size: int

    def to_dict(self) -> Dict[str, Any]:
        return {"tb_id": self.tb_id, "tbg_size": self.tbg_size}


@dataclass
class Access:
    """Chunks [start, end] (inclusive) of one local buffer that operation
    ``uid`` reads ("r") or writes ("w")."""

    uid: int
    start: int
    end: int
    buffer: BufferType
    kind: str

    def overlaps(self, other: "Access") -> bool:
        return self.start <= other.end and other.start <= self.end

    def conflicts(self, other: "Access") -> bool:
        return self.overlaps(other) and self.uid != other.uid and (self.kind != "r" or other.kind != "r")


def _reads(uid: int, refs: Iterable[LocalRef]) -> List[Access]:
    return [Access(uid, r.index, r.index + r.size - 1, r.buffer, "r") for r in refs]


def _writes(uid: int, refs: Iterable[LocalRef]) -> List[Access]:
    return [Access(uid, r.index, r.index + r.size - 1, r.buffer, "w") for r in refs]


class Op:
    """One operation of a thread block."""

    def __init__(self, name: Instruction) -> None:
        self.name = name
        self.uid = next(_uids)

    def fuse(self, other: "Op") -> Optional["Op"]:
        """The one operation that does self then other, or None (possibly
        dropping a synchronisation of self that other makes redundant)."""
        return None

    def accesses(self, for_sync: bool = True) -> List[Access]:
        """Local chunks read and written (for_sync: those whose order the
        dependency pass must keep; packet buffers order themselves)."""
        return []

    def shift_buffers(self, instance: int, instances: int, interleave: bool) -> None:
        pass

    def shift_ids(self, instance: int, instances: int) -> None:
        pass

    def to_dict(self) -> Dict[str, Any]:
        return {"name": self.name.value}


def _replica(value: int, instance: int, instances: int) -> int:
    """A thread block, channel, semaphore or barrier id of one instance."""
    return value * instances + instance


class SyncOp(Op):
    """``nop``: a ``__syncthreads`` of the thread block."""

    def __init__(self) -> None:
        super().__init__(Instruction.nop)

    def fuse(self, other: Op) -> Optional[Op]:
        if isinstance(other, SyncOp):
            return SyncOp()
        if isinstance(other, BarrierOp):
            return other
        if isinstance(other, PipelineOp) and other.data_sync().has(SyncType.before):
            return other
        if isinstance(other, DataSyncOp):
            other.drop(SyncType.before)
        return None


class BarrierOp(Op):
    """A barrier of ``num_threadblocks`` thread blocks of one rank."""

    def __init__(self, barrier_id: int, num_threadblocks: int) -> None:
        super().__init__(Instruction.barrier)
        self.barrier_id = barrier_id
        self.num_threadblocks = num_threadblocks

    def fuse(self, other: Op) -> Optional[Op]:
        if isinstance(other, DataSyncOp):
            other.drop(SyncType.before)
        elif isinstance(other, SyncOp):
            return self
        return None

    def shift_ids(self, instance: int, instances: int) -> None:
        self.barrier_id = _replica(self.barrier_id, instance, instances)

    def to_dict(self) -> Dict[str, Any]:
        return {"name": self.name.value, "barrier_id": self.barrier_id, "num_threadblocks": self.num_threadblocks}


class DataSyncOp(Op):
    """An operation with a ``data_sync`` (signal, wait, flush, semaphore
    acquire/release): nops are put around it where it asks for them."""

    def __init__(self, name: Instruction, data_sync: SyncType) -> None:
        super().__init__(name)
        self.data_sync = data_sync

    def drop(self, side: SyncType) -> None:
        self.data_sync = self.data_sync ^ (side & self.data_sync)

    def _drop_after_before(self, other: Op) -> None:
        """Other synchronises before itself: self need not after itself."""
        if (
            (isinstance(other, DataSyncOp) and other.data_sync.has(SyncType.before))
            or (isinstance(other, PipelineOp) and other.data_sync().has(SyncType.before))
            or isinstance(other, (SyncOp, BarrierOp))
        ):
            self.drop(SyncType.after)


class SemaphoreOp(DataSyncOp):
    """Acquire or release of device semaphores of this rank."""

    def __init__(self, name: Instruction, semaphore_ids: List[int], data_sync: SyncType) -> None:
        super().__init__(name, data_sync)
        self.semaphore_ids = semaphore_ids

    def fuse(self, other: Op) -> Optional[Op]:
        if isinstance(other, SemaphoreOp) and other.name == self.name:
            return SemaphoreOp(self.name, self.semaphore_ids + other.semaphore_ids, self.data_sync | other.data_sync)
        self._drop_after_before(other)
        return None

    def shift_ids(self, instance: int, instances: int) -> None:
        self.semaphore_ids = [_replica(i, instance, instances) for i in self.semaphore_ids]

    def to_dict(self) -> Dict[str, Any]:
        return {"name": self.name.value, "semaphore_ids": list(self.semaphore_ids)}


class ChannelSyncOp(DataSyncOp):
    """Signal, wait (and their relaxed forms) or flush on channels of the
    thread block. The channel ids are a set, as in MSCCL++ (the JSON lists
    them in the set's order)."""

    def __init__(self, name: Instruction, channel_ids: Iterable[int], channel_type: ChannelType,
                 data_sync: SyncType) -> None:
        super().__init__(name, data_sync)
        self.channel_ids: Set[int] = set(channel_ids)
        self.channel_type = channel_type

    def fuse(self, other: Op) -> Optional[Op]:
        if isinstance(other, ChannelSyncOp) and other.channel_type == self.channel_type and other.name == self.name:
            if self.name == Instruction.flush:
                return ChannelSyncOp(self.name, self.channel_ids | other.channel_ids, self.channel_type,
                                     self.data_sync | other.data_sync)
            if not self.channel_ids & other.channel_ids:
                return ChannelSyncOp(self.name, self.channel_ids | other.channel_ids, self.channel_type,
                                     self.data_sync | other.data_sync)
        self._drop_after_before(other)
        return None

    def to_dict(self) -> Dict[str, Any]:
        return {"name": self.name.value, "channel_ids": list(self.channel_ids), "channel_type": self.channel_type.value}


class CopyOp(Op):
    """Local copy: plain (copy), into packets (cpkt) or out of packets (upkt)."""

    def __init__(self, name: Instruction, src: List[LocalRef], dst: List[LocalRef], tbg: Optional[TbgInfo]) -> None:
        super().__init__(name)
        self.src = src
        self.dst = dst
        self.tbg = tbg

    def accesses(self, for_sync: bool = True) -> List[Access]:
        out: List[Access] = []
        if self.name != Instruction.unpack_packet or not for_sync:
            out += _reads(self.uid, self.src)
        if self.name != Instruction.copy_packet or not for_sync:
            out += _writes(self.uid, self.dst)
        return out

    def shift_buffers(self, instance: int, instances: int, interleave: bool) -> None:
        self.src = [c.shifted(instance, instances, interleave) for c in self.src]
        self.dst = [c.shifted(instance, instances, interleave) for c in self.dst]

    def to_dict(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {"name": self.name.value, "src_buff": [c.to_dict() for c in self.src],
                             "dst_buff": [c.to_dict() for c in self.dst]}
        if self.tbg is not None:
            d["tbg_info"] = self.tbg.to_dict()
        return d


class GetOp(Op):
    """Reads of peers' chunks into local chunks over memory channels."""

    def __init__(self, src: List[RemoteRef], dst: List[LocalRef], channel_ids: List[int], channel_type: ChannelType,
                 tbg: Optional[TbgInfo]) -> None:
        super().__init__(Instruction.get)
        self.src = src
        self.dst = dst
        self.channel_ids = channel_ids
        self.channel_type = channel_type
        self.tbg = tbg

    def fuse(self, other: Op) -> Optional[Op]:
        if (isinstance(other, GetOp) and self.src[0].size == other.src[0].size
                and self.channel_type == other.channel_type and self.tbg == other.tbg):
            return GetOp(self.src + other.src, self.dst + other.dst, self.channel_ids + other.channel_ids,
                         self.channel_type, self.tbg)
        return None

    def accesses(self, for_sync: bool = True) -> List[Access]:
        return _writes(self.uid, self.dst)

    def shift_buffers(self, instance: int, instances: int, interleave: bool) -> None:
        self.src = [c.shifted(instance, instances, interleave) for c in self.src]
        self.dst = [c.shifted(instance, instances, interleave) for c in self.dst]

    def to_dict(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {"name": self.name.value, "src_buff": [c.to_dict() for c in self.src],
                             "dst_buff": [c.to_dict() for c in self.dst], "channel_ids": list(self.channel_ids),
                             "channel_type": self.channel_type.value}
        if self.tbg is not None:
            d["tbg_info"] = self.tbg.to_dict()
        return d


_PLAIN_PUTS = (Instruction.put, Instruction.put_packet, Instruction.put_with_signal,
               Instruction.put_with_signal_and_flush)


class PutOp(Op):
    """Writes of local chunks into peers' chunks: put, ppkt (into packets),
    rppkt (packets to packets), pws / pwsf (port channels: with signal, and
    flush)."""

    def __init__(self, name: Instruction, src: List[LocalRef], dst: List[RemoteRef], channel_ids: List[int],
                 channel_type: ChannelType, tbg: Optional[TbgInfo]) -> None:
        super().__init__(name)
        self.src = src
        self.dst = dst
        self.channel_ids = channel_ids
        self.channel_type = channel_type
        self.tbg = tbg

    def fuse(self, other: Op) -> Optional[Op]:
        if not isinstance(other, PutOp) or other.name != self.name or other.channel_type != self.channel_type \
                or other.tbg != self.tbg:
            return None
        if self.name in _PLAIN_PUTS and self.src[0].size == other.src[0].size:
            return PutOp(self.name, self.src + other.src, self.dst + other.dst, self.channel_ids + other.channel_ids,
                         self.channel_type, self.tbg)
        if self.name == Instruction.read_put_packet and self.src == other.src:
            return PutOp(self.name, self.src, self.dst + other.dst, self.channel_ids + other.channel_ids,
                         self.channel_type, self.tbg)
        return None

    def accesses(self, for_sync: bool = True) -> List[Access]:
        if self.name == Instruction.read_put_packet and for_sync:
            return []
        return _reads(self.uid, self.src)

    def shift_buffers(self, instance: int, instances: int, interleave: bool) -> None:
        self.src = [c.shifted(instance, instances, interleave) for c in self.src]
        self.dst = [c.shifted(instance, instances, interleave) for c in self.dst]

    def to_dict(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {"name": self.name.value, "src_buff": [c.to_dict() for c in self.src],
                             "dst_buff": [c.to_dict() for c in self.dst]}
        if self.channel_type == ChannelType.port:
            d["channel_ids"] = list(self.channel_ids)
        d["channel_type"] = self.channel_type.value
        if self.tbg is not None:
            d["tbg_info"] = self.tbg.to_dict()
        return d


def _reduce_name(packet: bool, pkt_dst: bool, remote_src: bool, remote_dst: bool) -> Instruction:
    if not remote_src and not remote_dst:
        if packet:
            return Instruction.reduce_copy_packet if pkt_dst else Instruction.reduce_packet
        return Instruction.reduce
    if not remote_src:
        if packet:
            return Instruction.reduce_copy_send_packet if pkt_dst else Instruction.reduce_send_packet
        return Instruction.reduce_send
    if packet:
        raise AssertionError("a packet reduce reads no peer's buffer")
    return Instruction.read_reduce_send if remote_dst else Instruction.read_reduce


class ReduceOp(Op):
    """A reduction: ``local_src[0]`` combined with the other local sources
    (packets in scratch for a packet reduce) and peers' chunks
    (``remote_src``), into ``local_dst``; optionally also copied into local
    packets (``local_pkt_dst``) and written to peers (``remote_dst``)."""

    def __init__(self, local_src: List[LocalRef], local_dst: List[LocalRef], *,
                 local_pkt_dst: Optional[List[LocalRef]] = None, remote_src: Optional[List[RemoteRef]] = None,
                 remote_dst: Optional[List[RemoteRef]] = None, channel_ids: Optional[List[int]] = None,
                 put_channel_ids: Optional[List[int]] = None, channel_type: ChannelType = ChannelType.none,
                 reduce_op: ReduceOperationType = ReduceOperationType.sum, tbg: Optional[TbgInfo] = None,
                 packet: bool = False) -> None:
        self.local_src = local_src
        self.local_dst = local_dst
        self.local_pkt_dst = local_pkt_dst or []
        self.remote_src = remote_src or []
        self.remote_dst = remote_dst or []
        self.channel_ids = channel_ids or []
        self.put_channel_ids = put_channel_ids or []
        self.channel_type = channel_type
        self.reduce_op = reduce_op
        self.tbg = tbg
        self.packet = packet
        super().__init__(_reduce_name(packet, bool(self.local_pkt_dst), bool(self.remote_src), bool(self.remote_dst)))

    def _with(self, **kw: Any) -> "ReduceOp":
        args: Dict[str, Any] = dict(local_pkt_dst=self.local_pkt_dst, remote_src=self.remote_src,
                                    remote_dst=self.remote_dst, channel_ids=self.channel_ids,
                                    put_channel_ids=self.put_channel_ids, channel_type=self.channel_type,
                                    reduce_op=self.reduce_op, tbg=self.tbg, packet=self.packet)
        local_src = kw.pop("local_src", self.local_src)
        args.update(kw)
        return ReduceOp(local_src, self.local_dst, **args)

    def fuse(self, other: Op) -> Optional[Op]:
        name = self.name
        if (isinstance(other, ReduceOp) and name in (Instruction.reduce, Instruction.reduce_packet,
                                                     Instruction.read_reduce)
                and other.name == name and self.local_src[0] == other.local_src[0]
                and self.local_dst == other.local_dst and self.channel_type == other.channel_type
                and self.reduce_op == other.reduce_op and self.tbg == other.tbg):
            return self._with(local_src=self.local_src + other.local_src[1:],
                              remote_src=self.remote_src + other.remote_src,
                              channel_ids=self.channel_ids + other.channel_ids)
        if isinstance(other, PutOp) and other.channel_type == ChannelType.memory and other.tbg == self.tbg:
            sends = (
                (name in (Instruction.reduce, Instruction.reduce_send, Instruction.read_reduce,
                          Instruction.read_reduce_send) and other.name == Instruction.put
                 and self.local_dst[0] == other.src[0])
                or (name in (Instruction.reduce_packet, Instruction.reduce_send_packet)
                    and other.name == Instruction.put_packet and self.local_dst[0] == other.src[0])
                or (name in (Instruction.reduce_copy_packet, Instruction.reduce_copy_send_packet)
                    and ((other.name == Instruction.put_packet and self.local_dst[0] == other.src[0])
                         or (other.name == Instruction.read_put_packet
                             and self.local_pkt_dst[0] == other.src[0])))
            )
            if sends:
                return self._with(remote_dst=self.remote_dst + other.dst,
                                  put_channel_ids=self.put_channel_ids + other.channel_ids,
                                  channel_type=other.channel_type)
        if (isinstance(other, CopyOp) and name == Instruction.reduce_packet and other.name == Instruction.copy_packet
                and self.local_dst[0] == other.src[0] and self.tbg == other.tbg):
            return self._with(local_pkt_dst=other.dst)
        return None

    def accesses(self, for_sync: bool = True) -> List[Access]:
        out: List[Access] = []
        for i, c in enumerate(self.local_src):
            if not self.packet or i != 0 or not for_sync:
                out += _reads(self.uid, [c])
        return out + _writes(self.uid, self.local_dst)

    def shift_buffers(self, instance: int, instances: int, interleave: bool) -> None:
        self.local_src = [c.shifted(instance, instances, interleave) for c in self.local_src]
        self.local_dst = [c.shifted(instance, instances, interleave) for c in self.local_dst]
        self.remote_src = [c.shifted(instance, instances, interleave) for c in self.remote_src]
        self.remote_dst = [c.shifted(instance, instances, interleave) for c in self.remote_dst]

    def to_dict(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {
            "name": self.name.value,
            "src_buff": [c.to_dict() for c in self.local_src] + [c.to_dict() for c in self.remote_src],
            "dst_buff": [c.to_dict() for c in self.local_dst] + [c.to_dict() for c in self.local_pkt_dst]
            + [c.to_dict() for c in self.remote_dst],
        }
        if self.channel_type != ChannelType.none:
            d["channel_type"] = self.channel_type.value
        d["reduce_op"] = self.reduce_op.value
        if self.tbg is not None:
            d["tbg_info"] = self.tbg.to_dict()
        return d


class PipelineOp(Op):
    """A loop: its operations run ``num_chunks`` chunks' worth of data in
    pieces of ``unit_size`` bytes, piece after piece."""

    def __init__(self, unit_size: int, num_chunks: int, ops: Optional[List[Op]] = None) -> None:
        super().__init__(Instruction.pipeline)
        self.unit_size = unit_size
        self.num_chunks = num_chunks
        self.ops: List[Op] = ops if ops is not None else []

    @staticmethod
    def _edge_sync(op: Op, side: SyncType) -> SyncType:
        # MSCCL++ counts a nop or barrier at either end as syncing *before*.
        result = SyncType.none
        if isinstance(op, (SyncOp, BarrierOp)):
            result = result | SyncType.before
        if isinstance(op, DataSyncOp):
            result = result | (side & op.data_sync)
        return result

    def data_sync(self) -> SyncType:
        if not self.ops:
            return SyncType.none
        return self._edge_sync(self.ops[0], SyncType.before) | self._edge_sync(self.ops[-1], SyncType.after)

    def fuse(self, other: Op) -> Optional[Op]:
        syncs_after = self.data_sync().has(SyncType.after)
        if syncs_after and isinstance(other, DataSyncOp):
            other.drop(SyncType.before)
        elif syncs_after and isinstance(other, SyncOp):
            return self
        return None

    def accesses(self, for_sync: bool = True) -> List[Access]:
        out: List[Access] = []
        for op in self.ops:
            for a in op.accesses(for_sync):
                a.uid = self.uid
                out.append(a)
        return out

    def shift_buffers(self, instance: int, instances: int, interleave: bool) -> None:
        for op in self.ops:
            op.shift_buffers(instance, instances, interleave)

    def shift_ids(self, instance: int, instances: int) -> None:
        for op in self.ops:
            op.shift_ids(instance, instances)

    def to_dict(self) -> Dict[str, Any]:
        return {"name": self.name.value, "iter_context": {"unit_size": self.unit_size, "num_chunks": self.num_chunks},
                "ops": [op.to_dict() for op in self.ops]}


def clone_ops(ops: List[Op]) -> List[Op]:
    """An independent copy of a thread block's operations (one instance)."""
    return copy.deepcopy(ops)
