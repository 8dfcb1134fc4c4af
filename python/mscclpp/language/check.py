# SPDX-License-Identifier: MIT
"""check_plan: the structure of an execution plan (MSCCL++'s JSON format),
whoever wrote it.

What it checks, naming the JSON path and the value of each problem:

- every field the executor reads is there, of its type, in its range
  (protocol, chunk counts that fit the collective, channel types: switch
  channels are refused);
- every operation is one the executor knows, with operands of the right
  kind (local chunks, peers' chunks through the thread block's remote
  buffers), every chunk inside its buffer (``index + size`` at most the
  buffer's chunk count, on the peer's side for a peer's chunk), every
  channel, remote buffer, semaphore and barrier id in range, packet
  operations only in LL plans and on scratch;
- synchronisation: channels come in pairs (the k-th channel of a type from
  rank a to b and the k-th from b to a), every rank has as many channels
  to a peer as the peer has back (``symmetric_channels``), every signal on
  a channel is matched by a wait on its pair and the reverse, and every
  barrier is reached by as many thread blocks as it counts;
- ``limits``: the sizes MSCCL++'s executor holds (64 operations and 16
  channels of a type per thread block, 8 channels and 10 source or
  destination operands per operation, 16 barriers per rank, 16 semaphores
  per operation), so that a plan runs there too.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

_LOCAL_TYPES = {"i": "input", "o": "output", "s": "scratch"}
_PACKET_OPS = {"ppkt", "rppkt", "cpkt", "upkt", "repkt", "respkt", "recpkt", "recspkt"}
_SWITCH_OPS = {"glres", "glre", "gstore", "gstorepkt"}
_KNOWN_OPS = {"nop", "barrier", "copy", "cpkt", "upkt", "re", "repkt", "recpkt", "res", "respkt", "recspkt", "rre",
              "rres", "sem_acquire", "sem_release", "signal", "wait", "rlxsignal", "rlxwait", "flush", "get", "put",
              "ppkt", "rppkt", "pws", "pwsf", "pipeline"}
_SIGNALS = {"signal", "rlxsignal", "pws", "pwsf"}
_WAITS = {"wait", "rlxwait"}

# MSCCL++'s executor (src/core/include/execution_common.hpp).
MAX_OPERATIONS = 64
MAX_CHANNELS_PER_TB = 16
MAX_CHANNELS_PER_OP = 8
MAX_OPERANDS = 10
MAX_BARRIERS = 16
MAX_SEMAPHORES_PER_OP = 16


class PlanError(ValueError):
    """A plan is malformed. ``problems`` lists every problem found, each
    starting with the JSON path of the field at fault."""

    def __init__(self, name: str, problems: List[str]) -> None:
        self.problems = problems
        shown = "\n  ".join(problems[:20])
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        super().__init__(f"plan {name!r}: {len(problems)} problem(s):\n  {shown}{more}")


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


class _Checker:
    def __init__(self, plan: Mapping[str, Any], limits: bool, symmetric_channels: bool) -> None:
        self.plan = plan
        self.limits = limits
        self.symmetric = symmetric_channels
        self.problems: List[str] = []
        self.n = 0
        self.ll = False
        self.counts: List[Dict[str, int]] = []  # per rank: buffer type -> chunks
        # per rank: channel type -> peer of each channel
        self.peers: List[Dict[str, List[int]]] = []
        self.remote: List[List[Tuple[int, str, List[str]]]] = []  # per rank: (rank, type, access types)
        # (rank, channel type, channel id) -> {multiplier: [signals, waits]}
        self.sync: Dict[Tuple[int, str, int], Dict[str, List[int]]] = {}

    def bad(self, path: str, why: str) -> None:
        self.problems.append(f"{path}: {why}")

    def field(self, obj: Any, key: str, path: str, kind: str) -> Any:
        """obj[key] if it is of kind int / bool / str / list / dict, else None
        (and a problem)."""
        if not isinstance(obj, dict) or key not in obj:
            self.bad(f"{path}.{key}" if path else key, "missing")
            return None
        v = obj[key]
        ok = {"int": _is_int(v), "bool": isinstance(v, bool), "str": isinstance(v, str),
              "list": isinstance(v, list), "dict": isinstance(v, dict)}[kind]
        if not ok:
            self.bad(f"{path}.{key}" if path else key, f"{v!r} is not a{'n' if kind == 'int' else ''} {kind}")
            return None
        return v

    def ranged(self, obj: Any, key: str, path: str, low: int, high: int) -> Optional[int]:
        v = self.field(obj, key, path, "int")
        if v is not None and not low <= v <= high:
            self.bad(f"{path}.{key}" if path else key, f"{v} is out of range [{low}, {high}]")
            return None
        return v  # type: ignore[no-any-return]

    # --- top level and ranks ---

    def run(self) -> List[str]:
        p = self.plan
        if not isinstance(p, dict):
            return [f"the plan is a {type(p).__name__}, not a JSON object"]
        self.field(p, "name", "", "str")
        collective = self.field(p, "collective", "", "str")
        protocol = self.field(p, "protocol", "", "str")
        if protocol is not None and protocol not in ("Simple", "LL"):
            self.bad("protocol", f"{protocol!r} is neither 'Simple' nor 'LL'")
        self.ll = protocol == "LL"
        self.field(p, "inplace", "", "bool")
        for key in ("reuse_resources", "use_double_scratch_buffer"):
            if key in p:
                self.field(p, key, "", "bool")
        if "num_threads_per_block" in p:
            self.ranged(p, "num_threads_per_block", "", 1, 1024)
        if "buffer_alignment" in p:
            self.ranged(p, "buffer_alignment", "", 1, 1 << 30)
        lo = self.ranged(p, "min_message_size", "", 0, 2**64 - 1) if "min_message_size" in p else 0
        hi = self.ranged(p, "max_message_size", "", 0, 2**64 - 1) if "max_message_size" in p else 2**64 - 1
        if lo is not None and hi is not None and lo > hi:
            self.bad("min_message_size", f"{lo} is above max_message_size {hi}")
        gpus = self.field(p, "gpus", "", "list")
        if not gpus:
            if gpus is not None:
                self.bad("gpus", "is empty")
            return self.problems
        self.n = len(gpus)
        # First pass: what every rank has (a peer's operations refer to it).
        for r, gpu in enumerate(gpus):
            self.rank_resources(r, gpu, f"gpus[{r}]")
        if isinstance(collective, str):
            self.collective_chunks(collective)
        if self.symmetric:
            self.channel_symmetry()
        for r, gpu in enumerate(gpus):
            if isinstance(gpu, dict):
                self.threadblocks(r, gpu, f"gpus[{r}]")
        self.signal_pairs()
        return self.problems

    def rank_resources(self, r: int, gpu: Any, path: str) -> None:
        counts = {"i": 0, "o": 0, "s": 0}
        peers: Dict[str, List[int]] = {"memory": [], "port": []}
        remote: List[Tuple[int, str, List[str]]] = []
        self.counts.append(counts)
        self.peers.append(peers)
        self.remote.append(remote)
        if not isinstance(gpu, dict):
            self.bad(path, "is not a JSON object")
            return
        gid = self.field(gpu, "id", path, "int")
        if gid is not None and gid != r:
            self.bad(f"{path}.id", f"{gid} is not its position {r} (gpus must be listed by rank)")
        for t, key in (("i", "input_chunks"), ("o", "output_chunks"), ("s", "scratch_chunks")):
            v = self.ranged(gpu, key, path, 0, 1 << 24)
            counts[t] = v or 0
        if counts["i"] == 0 and counts["o"] == 0:
            self.bad(path, "input_chunks and output_chunks are both 0 (the executor sizes chunks from them)")
        for c, ch in enumerate(self.field(gpu, "channels", path, "list") or []):
            cp = f"{path}.channels[{c}]"
            t = self.field(ch, "channel_type", cp, "str")
            if t == "switch":
                self.bad(f"{cp}.channel_type", "switch channels (NVLink multicast) are refused: multicast is not "
                         "allowed on the machines this library targets")
                continue
            if t is not None and t not in peers:
                self.bad(f"{cp}.channel_type", f"{t!r} is not 'memory' or 'port'")
                continue
            for i, peer in enumerate(self.field(ch, "connected_to", cp, "list") or []):
                if not _is_int(peer) or not 0 <= peer < self.n or peer == r:
                    self.bad(f"{cp}.connected_to[{i}]", f"{peer!r} is not another rank (0 to {self.n - 1}, not {r})")
                    peer = -1
                if t is not None:
                    peers[t].append(peer)
        for b, rb in enumerate(self.field(gpu, "remote_buffers", path, "list") or []):
            bp = f"{path}.remote_buffers[{b}]"
            peer = self.field(rb, "rank", bp, "int")
            if peer is not None and (not 0 <= peer < self.n or peer == r):
                self.bad(f"{bp}.rank", f"{peer} is not another rank (0 to {self.n - 1}, not {r})")
                peer = None
            btype = self.field(rb, "type", bp, "str")
            if btype is not None and btype not in _LOCAL_TYPES:
                self.bad(f"{bp}.type", f"{btype!r} is not 'i', 'o' or 's'")
                btype = "?"
            access = self.field(rb, "access_channel_types", bp, "list") or []
            if isinstance(rb, dict) and "access_channel_types" in rb and not access:
                self.bad(f"{bp}.access_channel_types", "is empty")
            for a in access:
                if a not in ("memory", "port"):
                    self.bad(f"{bp}.access_channel_types", f"{a!r} is not 'memory' or 'port'")
            remote.append((-1 if peer is None else peer, btype or "?", [a for a in access if isinstance(a, str)]))
        for s, sem in enumerate(self.field(gpu, "semaphores", path, "list") or [] if "semaphores" in gpu else []):
            self.ranged(sem, "init_value", f"{path}.semaphores[{s}]", 0, 2**31 - 1)

    def collective_chunks(self, collective: str) -> None:
        n = self.n
        rules: Dict[str, Tuple[Callable[[int, int], bool], str]] = {
            "allreduce": (lambda i, o: i == o, "input_chunks == output_chunks"),
            "alltoall": (lambda i, o: i == o, "input_chunks == output_chunks"),
            "allgather": (lambda i, o: o == n * i, f"output_chunks == {n} * input_chunks"),
            "reducescatter": (lambda i, o: i == n * o, f"input_chunks == {n} * output_chunks")}
        rule = rules.get(collective)
        first = self.counts[0]
        for r, c in enumerate(self.counts):
            if rule is not None and not rule[0](c["i"], c["o"]):
                self.bad(f"gpus[{r}]", f"{collective} needs {rule[1]} (has {c['i']} and {c['o']})")
            if (c["i"], c["o"]) != (first["i"], first["o"]):
                self.bad(f"gpus[{r}]", f"input/output_chunks {c['i']}/{c['o']} differ from rank 0's "
                         f"{first['i']}/{first['o']}")

    def channel_symmetry(self) -> None:
        for r in range(self.n):
            for t, peers in self.peers[r].items():
                for p in sorted(set(x for x in peers if x >= 0)):
                    mine = peers.count(p)
                    theirs = self.peers[p][t].count(r)
                    if p > r and mine != theirs:
                        self.bad(f"gpus[{r}].channels", f"rank {r} has {mine} {t} channel(s) to rank {p} but rank {p} "
                                 f"has {theirs} back (channels pair up: one each way)")

    # --- thread blocks and operations ---

    def threadblocks(self, r: int, gpu: Mapping[str, Any], path: str) -> None:
        tbs = self.field(gpu, "threadblocks", path, "list") or []
        barriers: Dict[int, Dict[int, int]] = {}  # barrier id -> tb -> uses
        barrier_sizes: Dict[int, int] = {}
        nsem = len(gpu.get("semaphores", []) or [])
        for k, tb in enumerate(tbs):
            tp = f"{path}.threadblocks[{k}]"
            tid = self.field(tb, "id", tp, "int")
            if tid is not None and tid != k:
                self.bad(f"{tp}.id", f"{tid} is not its position {k}")
            if not isinstance(tb, dict):
                continue
            chans: Dict[str, List[int]] = {"memory": [], "port": []}
            for c, ch in enumerate(self.field(tb, "channels", tp, "list") or []):
                cp = f"{tp}.channels[{c}]"
                t = self.field(ch, "channel_type", cp, "str")
                if t not in chans:
                    if t is not None:
                        self.bad(f"{cp}.channel_type", f"{t!r} is not 'memory' or 'port'"
                                 + (" (switch channels are refused)" if t == "switch" else ""))
                    continue
                for i, cid in enumerate(self.field(ch, "channel_ids", cp, "list") or []):
                    if not _is_int(cid) or not 0 <= cid < len(self.peers[r][t]):
                        self.bad(f"{cp}.channel_ids[{i}]", f"{cid!r} is not one of rank {r}'s "
                                 f"{len(self.peers[r][t])} {t} channels")
                        cid = -1
                    chans[t].append(cid)
            refs: Dict[str, List[int]] = {"memory": [], "port": []}
            for c, ref in enumerate(self.field(tb, "remote_buffer_refs", tp, "list") or []
                                    if "remote_buffer_refs" in tb else []):
                cp = f"{tp}.remote_buffer_refs[{c}]"
                t = self.field(ref, "access_channel_type", cp, "str")
                if t not in refs:
                    if t is not None:
                        self.bad(f"{cp}.access_channel_type", f"{t!r} is not 'memory' or 'port'")
                    continue
                for i, bid in enumerate(self.field(ref, "remote_buffer_ids", cp, "list") or []):
                    if not _is_int(bid) or not 0 <= bid < len(self.remote[r]):
                        self.bad(f"{cp}.remote_buffer_ids[{i}]", f"{bid!r} is not one of rank {r}'s "
                                 f"{len(self.remote[r])} remote buffers")
                        bid = -1
                    elif t not in self.remote[r][bid][2]:
                        self.bad(f"{cp}.remote_buffer_ids[{i}]", f"remote buffer {bid} is not reached through "
                                 f"{t} channels (its access_channel_types: {self.remote[r][bid][2]})")
                    refs[t].append(bid)
            if self.limits:
                for t in ("memory", "port"):
                    if len(chans[t]) > MAX_CHANNELS_PER_TB:
                        self.bad(f"{tp}.channels", f"{len(chans[t])} {t} channels, above the executor's "
                                 f"{MAX_CHANNELS_PER_TB} per thread block")
                    if len(refs[t]) > MAX_CHANNELS_PER_TB:
                        self.bad(f"{tp}.remote_buffer_refs", f"{len(refs[t])} {t} remote buffers, above the "
                                 f"executor's {MAX_CHANNELS_PER_TB} per thread block")
            ops = self.field(tb, "ops", tp, "list") or []
            total = 0
            for o, op in enumerate(ops):
                total += 1 + self.op(r, k, op, f"{tp}.ops[{o}]", chans, refs, nsem, barriers, barrier_sizes, "")
            if self.limits and total > MAX_OPERATIONS:
                self.bad(f"{tp}.ops", f"{total} operations (pipelines' counted), above the executor's "
                         f"{MAX_OPERATIONS} per thread block")
        for bid, users in sorted(barriers.items()):
            want = barrier_sizes[bid]
            if len(users) != want:
                self.bad(f"{path}.threadblocks", f"barrier {bid} counts {want} thread blocks but thread blocks "
                         f"{sorted(users)} use it")
            elif len(set(users.values())) != 1:
                self.bad(f"{path}.threadblocks", f"barrier {bid}: its thread blocks reach it different numbers "
                         f"of times ({dict(sorted(users.items()))})")

    def operand(self, r: int, op: Mapping[str, Any], key: str, i: int, buff: Any, path: str,
                refs: Dict[str, List[int]]) -> Optional[Tuple[str, str, int, int]]:
        """(where, buffer type, index, size) of operand ``op[key][i]``:
        where is "local" or the peer's rank as a string."""
        p = f"{path}.{key}[{i}]"
        if not isinstance(buff, dict):
            self.bad(p, "is not a JSON object")
            return None
        if "switch_channel_id" in buff:
            self.bad(p, "switch channel operands are refused (multicast is not allowed)")
            return None
        index = self.ranged(buff, "index", p, 0, 1 << 30)
        size = self.ranged(buff, "size", p, 1, 1 << 30)
        if "buffer_id" in buff:
            t = op.get("channel_type")
            bid = self.field(buff, "buffer_id", p, "int")
            if t not in ("memory", "port"):
                self.bad(p, f"a peer's chunk needs the operation's channel_type to be 'memory' or 'port', not {t!r}")
                return None
            if bid is None:
                return None
            if not 0 <= bid < len(refs[t]) or refs[t][bid] < 0:
                self.bad(f"{p}.buffer_id", f"{bid} is not one of the thread block's {len(refs[t])} {t} remote "
                         "buffers")
                return None
            peer, btype, _ = self.remote[r][refs[t][bid]]
            if peer < 0 or btype not in _LOCAL_TYPES:
                return None
            if index is not None and size is not None and index + size > self.counts[peer][btype]:
                self.bad(p, f"chunks [{index}, {index + size}) are out of range: rank {peer}'s "
                         f"{_LOCAL_TYPES[btype]} buffer has {self.counts[peer][btype]} chunks")
            return (str(peer), btype, index or 0, size or 0)
        btype = self.field(buff, "type", p, "str")
        if btype is None:
            return None
        if btype not in _LOCAL_TYPES:
            self.bad(f"{p}.type", f"{btype!r} is not 'i', 'o' or 's'")
            return None
        if index is not None and size is not None and index + size > self.counts[r][btype]:
            self.bad(p, f"chunks [{index}, {index + size}) are out of range: rank {r}'s {_LOCAL_TYPES[btype]} buffer "
                     f"has {self.counts[r][btype]} chunks")
        return ("local", btype, index or 0, size or 0)

    def op(self, r: int, tb: int, op: Any, path: str, chans: Dict[str, List[int]], refs: Dict[str, List[int]],
           nsem: int, barriers: Dict[int, Dict[int, int]], barrier_sizes: Dict[int, int], mult: str) -> int:
        """Check one operation; returns how many operations it holds inside
        (a pipeline's)."""
        if not isinstance(op, dict):
            self.bad(path, "is not a JSON object")
            return 0
        name = self.field(op, "name", path, "str")
        if name is None:
            return 0
        if name in _SWITCH_OPS:
            self.bad(f"{path}.name", f"{name!r} is a switch channel (multicast) operation, refused")
            return 0
        if name not in _KNOWN_OPS:
            self.bad(f"{path}.name", f"{name!r} is not an operation the executor knows")
            return 0
        if name in _PACKET_OPS and not self.ll:
            self.bad(f"{path}.name", f"{name!r} uses LL packets but the plan's protocol is not 'LL'")
        ctype = op.get("channel_type")
        if "channel_type" in op and ctype not in ("memory", "port", "none"):
            self.bad(f"{path}.channel_type", f"{ctype!r} is not 'memory', 'port' or 'none'"
                     + (" (switch channels are refused)" if ctype == "switch" else ""))
            ctype = None
        # channel ids
        ids: List[int] = []
        if "channel_ids" in op:
            raw = self.field(op, "channel_ids", path, "list") or []
            if self.limits and len(raw) > MAX_CHANNELS_PER_OP:
                self.bad(f"{path}.channel_ids", f"{len(raw)} channels, above the executor's {MAX_CHANNELS_PER_OP} "
                         "per operation")
            for i, cid in enumerate(raw):
                if ctype not in ("memory", "port"):
                    self.bad(f"{path}.channel_ids", f"channel ids need channel_type 'memory' or 'port', not {ctype!r}")
                    break
                if not _is_int(cid) or not 0 <= cid < len(chans[ctype]):
                    self.bad(f"{path}.channel_ids[{i}]", f"{cid!r} is not one of the thread block's "
                             f"{len(chans[ctype])} {ctype} channels")
                    continue
                ids.append(chans[ctype][cid])
        if "tbg_info" in op:
            tbg = self.field(op, "tbg_info", path, "dict")
            if tbg is not None:
                size = self.ranged(tbg, "tbg_size", f"{path}.tbg_info", 1, 1 << 16)
                tid = self.ranged(tbg, "tb_id", f"{path}.tbg_info", 0, 1 << 16)
                if size is not None and tid is not None and tid >= size:
                    self.bad(f"{path}.tbg_info.tb_id", f"{tid} is not below tbg_size {size}")
        if name == "pipeline":
            return self.pipeline(r, tb, op, path, chans, refs, nsem, barriers, barrier_sizes, mult)
        if name == "nop":
            return 0
        if name == "barrier":
            bid = self.ranged(op, "barrier_id", path, 0, (MAX_BARRIERS if self.limits else 1 << 16) - 1)
            count = self.ranged(op, "num_threadblocks", path, 1, 1 << 16)
            if bid is not None and count is not None:
                if barrier_sizes.setdefault(bid, count) != count:
                    self.bad(f"{path}.num_threadblocks", f"{count}, but barrier {bid} elsewhere counts "
                             f"{barrier_sizes[bid]}")
                users = barriers.setdefault(bid, {})
                users[tb] = users.get(tb, 0) + 1
            return 0
        if name in ("sem_acquire", "sem_release"):
            sids = self.field(op, "semaphore_ids", path, "list") or []
            if not sids and "semaphore_ids" in op:
                self.bad(f"{path}.semaphore_ids", "is empty")
            if self.limits and len(sids) > MAX_SEMAPHORES_PER_OP:
                self.bad(f"{path}.semaphore_ids", f"{len(sids)} semaphores, above the executor's "
                         f"{MAX_SEMAPHORES_PER_OP} per operation")
            for i, s in enumerate(sids):
                if not _is_int(s) or not 0 <= s < nsem:
                    self.bad(f"{path}.semaphore_ids[{i}]", f"{s!r} is not one of rank {r}'s {nsem} semaphores")
            return 0
        if name in ("signal", "wait", "rlxsignal", "rlxwait", "flush"):
            if "channel_ids" not in op or not op["channel_ids"]:
                self.bad(f"{path}.channel_ids", "missing or empty")
            if name in ("rlxsignal", "rlxwait") and ctype != "memory":
                self.bad(f"{path}.channel_type", f"{name} needs memory channels, not {ctype!r}")
            if name == "flush" and ctype != "port":
                self.bad(f"{path}.channel_type", f"flush needs port channels, not {ctype!r}")
        if name in _SIGNALS | _WAITS and ctype in ("memory", "port"):
            which = 0 if name in _SIGNALS else 1
            for cid in ids:
                counts = self.sync.setdefault((r, ctype, cid), {})
                counts.setdefault(mult, [0, 0])[which] += 1
        if name in ("signal", "wait", "rlxsignal", "rlxwait", "flush"):
            return 0
        self.data_op(r, name, op, path, refs, ctype, ids)
        return 0

    def data_op(self, r: int, name: str, op: Mapping[str, Any], path: str, refs: Dict[str, List[int]],
                ctype: Optional[str], ids: List[int]) -> None:
        srcs: List[Optional[Tuple[str, str, int, int]]] = []
        dsts: List[Optional[Tuple[str, str, int, int]]] = []
        for key, out in (("src_buff", srcs), ("dst_buff", dsts)):
            lst = self.field(op, key, path, "list") or []
            if self.limits and len(lst) > MAX_OPERANDS:
                self.bad(f"{path}.{key}", f"{len(lst)} operands, above the executor's {MAX_OPERANDS}")
            for i, b in enumerate(lst):
                out.append(self.operand(r, op, key, i, b, path, refs))
        if not srcs or not dsts:
            if "src_buff" in op and "dst_buff" in op:
                self.bad(path, f"{name} needs source and destination chunks")
            return
        known = [x for x in srcs + dsts if x is not None]
        if len({x[3] for x in known}) > 1:
            self.bad(path, f"{name}: its chunks differ in size ({sorted({x[3] for x in known})})")

        def local(x: Optional[Tuple[str, str, int, int]]) -> bool:
            return x is None or x[0] == "local"

        def remote(x: Optional[Tuple[str, str, int, int]]) -> bool:
            return x is None or x[0] != "local"

        def scratch(x: Optional[Tuple[str, str, int, int]]) -> bool:
            return x is None or x[1] == "s"

        def shape(ok: bool, want: str) -> None:
            if not ok:
                self.bad(path, f"{name} wants {want}")

        if name in ("copy", "cpkt", "upkt"):
            shape(len(srcs) == 1 and len(dsts) == 1 and local(srcs[0]) and local(dsts[0]),
                  "one local source chunk and one local destination chunk")
            if name == "cpkt":
                shape(scratch(dsts[0]), "its destination (packets) in scratch")
            if name == "upkt":
                shape(scratch(srcs[0]), "its source (packets) in scratch")
        elif name in ("put", "pws", "pwsf", "ppkt", "rppkt"):
            shape(all(local(x) for x in srcs) and all(remote(x) for x in dsts),
                  "local source chunks and peers' destination chunks")
            if name == "rppkt":
                shape(len(srcs) == 1 and scratch(srcs[0]), "one source chunk (packets) in scratch")
            else:
                shape(len(srcs) == len(dsts), "as many source chunks as destination chunks")
            if name in ("ppkt", "rppkt"):
                shape(all(scratch(x) for x in dsts), "destinations (packets) in peers' scratch")
            if name in ("pws", "pwsf"):
                shape(ctype == "port", "port channels")
            if ctype == "port":
                shape(len(ids) == len(dsts), "one channel id per destination (port channels)")
        elif name == "get":
            shape(len(srcs) == len(dsts) and all(remote(x) for x in srcs) and all(local(x) for x in dsts),
                  "peers' source chunks and as many local destination chunks")
            shape(ctype == "memory", "memory channels")
        elif name in ("re", "repkt", "recpkt", "res", "respkt", "recspkt", "rre", "rres"):
            n_local_dst = 2 if name in ("recpkt", "recspkt") else 1
            reads_peers = name in ("rre", "rres")
            sends = name in ("res", "respkt", "recspkt", "rres")
            shape(local(srcs[0]) and local(dsts[0]), "a local first source and a local first destination")
            others = srcs[1:]
            if reads_peers:
                shape(len(others) >= 1 and all(remote(x) for x in others), "peers' chunks after its first source")
            else:
                shape(all(local(x) for x in others), "local chunks as sources")
            if name in ("re", "repkt", "recpkt"):
                shape(len(others) >= 1, "at least two sources")
            if name in ("repkt", "recpkt", "respkt", "recspkt"):
                shape(all(scratch(x) for x in others), "its other sources (packets) in scratch")
            shape(len(dsts) >= n_local_dst and all(local(x) for x in dsts[:n_local_dst]),
                  f"{n_local_dst} local destination chunk(s) first")
            if n_local_dst == 2:
                shape(scratch(dsts[1]), "its second destination (packets) in scratch")
            rest = dsts[n_local_dst:]
            if sends:
                shape(len(rest) >= 1 and all(remote(x) for x in rest), "peers' destination chunks after its own")
                if name in ("respkt", "recspkt"):
                    shape(all(scratch(x) for x in rest), "peers' destinations (packets) in scratch")
            else:
                shape(not rest, f"{n_local_dst} destination chunk(s)")
            if (reads_peers or sends) and ctype != "memory":
                self.bad(path, f"{name} reaches peers' chunks through memory channels: channel_type must be "
                         f"'memory', not {ctype!r}")
            op_name = op.get("reduce_op", "sum")
            if op_name not in ("sum", "min", "max"):
                self.bad(f"{path}.reduce_op", f"{op_name!r} is not 'sum', 'min' or 'max'")

    def pipeline(self, r: int, tb: int, op: Mapping[str, Any], path: str, chans: Dict[str, List[int]],
                 refs: Dict[str, List[int]], nsem: int, barriers: Dict[int, Dict[int, int]],
                 barrier_sizes: Dict[int, int], mult: str) -> int:
        if mult:
            self.bad(path, "pipelines do not nest")
            return 0
        ctx = self.field(op, "iter_context", path, "dict")
        unit = chunks = None
        if ctx is not None:
            unit = self.ranged(ctx, "unit_size", f"{path}.iter_context", 1, 2**32 - 1)
            chunks = self.ranged(ctx, "num_chunks", f"{path}.iter_context", 1, 1 << 24)
        inner = self.field(op, "ops", path, "list") or []
        if not inner and "ops" in op:
            self.bad(f"{path}.ops", "is empty")
        key = f"pipeline(unit {unit}, {chunks} chunks)"
        for i, o in enumerate(inner):
            if isinstance(o, dict) and o.get("name") in _PACKET_OPS:
                self.bad(f"{path}.ops[{i}].name", f"{o.get('name')!r}: packet operations cannot be pipelined")
            self.op(r, tb, o, f"{path}.ops[{i}]", chans, refs, nsem, barriers, barrier_sizes, key)
        return len(inner)

    def signal_pairs(self) -> None:
        """The k-th channel of a type from a to b pairs with the k-th from b
        to a; its signals must equal the pair's waits."""
        for r in range(self.n):
            for t, peers in self.peers[r].items():
                seen: Dict[int, int] = {}
                for cid, p in enumerate(peers):
                    if p < 0:
                        continue
                    k = seen.get(p, 0)
                    seen[p] = k + 1
                    back = [c for c, q in enumerate(self.peers[p][t]) if q == r]
                    mine = self.sync.get((r, t, cid), {})
                    pair = self.sync.get((p, t, back[k]), {}) if k < len(back) else {}
                    for mult in sorted(set(mine) | set(pair)):
                        signals = mine.get(mult, [0, 0])[0]
                        waits = pair.get(mult, [0, 0])[1]
                        if signals != waits:
                            where = f" inside {mult}" if mult else ""
                            other = (f"its pair (rank {p}'s {t} channel {back[k]}) waits {waits} time(s)"
                                     if k < len(back) else f"it has no pair on rank {p}, so nothing waits for them")
                            self.bad(f"gpus[{r}].channels", f"rank {r}'s {t} channel {cid} to rank {p} signals "
                                     f"{signals} time(s){where}, but {other}")
                    waits_here = sum(c[1] for c in mine.values())
                    if k >= len(back) and waits_here:
                        self.bad(f"gpus[{r}].channels", f"rank {r}'s {t} channel {cid} to rank {p} waits "
                                 f"{waits_here} time(s) but has no pair on rank {p} to signal it")


def plan_problems(plan: Mapping[str, Any], *, limits: bool = True, symmetric_channels: bool = True) -> List[str]:
    """Every problem check_plan would report (an empty list: none)."""
    return _Checker(plan, limits, symmetric_channels).run()


def check_plan(plan: Mapping[str, Any], *, nranks: Optional[int] = None, limits: bool = True,
               symmetric_channels: bool = True) -> None:
    """Raise PlanError listing every structural problem of ``plan`` (a
    parsed JSON object); ``nranks``: also require that many ranks."""
    problems = plan_problems(plan, limits=limits, symmetric_channels=symmetric_channels)
    if nranks is not None and isinstance(plan, dict) and isinstance(plan.get("gpus"), list) \
            and len(plan["gpus"]) != nranks:
        problems.insert(0, f"gpus: the plan is for {len(plan['gpus'])} ranks, not {nranks}")
    if problems:
        name = plan.get("name", "?") if isinstance(plan, dict) else "?"
        raise PlanError(str(name), problems)
