# SPDX-License-Identifier: MIT
"""simulate: run an execution plan on symbolic data, in Python, and check
what every rank ends with.

Every rank runs ``calls`` calls of the plan one after the other (a rank's
next call starts when all its thread blocks finished the previous one, as
kernels on a stream; its input gets new values then, as a program would
write it). The thread blocks of all ranks advance one operation at a time,
in an order drawn from ``seed``: a wait waits for its pair's signal, a
barrier for its thread blocks, a packet read for packets of the current
call, a semaphore acquire for a release. What the model shows:

- deadlocks (nothing can advance) and reads of data never written;
- missing synchronisation, as wrong results under some order: a peer
  reading a buffer before it was written or after the next call overwrote
  it, a scratch slot reused too early (double scratch buffers alternate
  by call, as the executor's do);
- the result: allreduce, allgather, reducescatter and alltoall outputs are
  compared with the collective's definition, element by element.

What it does not: operations are atomic (no race inside one), a
pipeline's operations run once over their whole chunks, and the
reduction is exact integer arithmetic (sum, min or max, as the plan says).
"""

from __future__ import annotations

import random
from math import gcd
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from .check import plan_problems


class SimulationError(Exception):
    """The plan deadlocked, read data never written, or computed a wrong
    result; the message says where."""


Cell = Optional[int]
Packet = Optional[Tuple[int, int]]  # (value, call it was written in)


class _Rank:
    def __init__(self, plan: Mapping[str, Any], r: int, g: int) -> None:
        gpu = plan["gpus"][r]
        self.r = r
        self.nin = gpu["input_chunks"] * g
        self.nout = gpu["output_chunks"] * g
        self.nscratch = gpu["scratch_chunks"] * g
        self.halves = 2 if plan.get("use_double_scratch_buffer", False) else 1
        self.scratch: List[List[Any]] = [[None] * self.nscratch for _ in range(self.halves)]
        n = len(plan["gpus"])
        coll = plan["collective"]
        inplace = plan["inplace"]
        # Where input and output live in the rank's user memory (aliased when
        # the plan is in place, as the call's buffers are).
        if not inplace:
            self.mem: List[Cell] = [None] * (self.nin + self.nout)
            self.in_base, self.out_base = 0, self.nin
        elif coll == "allgather":
            self.mem = [None] * self.nout
            self.in_base, self.out_base = r * self.nin, 0
        elif coll == "reducescatter":
            self.mem = [None] * self.nin
            self.in_base, self.out_base = 0, r * self.nout
        else:
            self.mem = [None] * max(self.nin, self.nout)
            self.in_base, self.out_base = 0, 0
        del n
        self.remote = [(rb["rank"], rb["type"]) for rb in gpu["remote_buffers"]]
        self.chan_peer: Dict[str, List[int]] = {"memory": [], "port": []}
        for ch in gpu["channels"]:
            self.chan_peer[ch["channel_type"]].extend(ch["connected_to"])
        self.sems = [s["init_value"] for s in gpu.get("semaphores", [])]
        self.call = -1
        self.done_calls = 0


class _Tb:
    def __init__(self, rank: _Rank, tb: Mapping[str, Any]) -> None:
        self.rank = rank
        self.id = tb["id"]
        self.ops: List[Mapping[str, Any]] = []
        for op in tb["ops"]:
            if op["name"] == "pipeline":
                self.ops.extend(op["ops"])
            else:
                self.ops.append(op)
        self.chans: Dict[str, List[int]] = {"memory": [], "port": []}
        for ch in tb.get("channels", []):
            self.chans[ch["channel_type"]].extend(ch["channel_ids"])
        self.refs: Dict[str, List[int]] = {"memory": [], "port": []}
        for ref in tb.get("remote_buffer_refs", []):
            self.refs[ref["access_channel_type"]].extend(ref["remote_buffer_ids"])
        self.pc = 0
        self.barrier_target: Optional[int] = None

    def where(self) -> str:
        op = self.ops[self.pc] if self.pc < len(self.ops) else {"name": "end"}
        return f"rank {self.rank.r} thread block {self.id} op {self.pc} ({op['name']}) of call {self.rank.call}"


def _lcm_tbg(plan: Mapping[str, Any]) -> int:
    g = 1

    def visit(op: Mapping[str, Any]) -> None:
        nonlocal g
        if "tbg_info" in op:
            s = op["tbg_info"]["tbg_size"]
            g = g * s // gcd(g, s)
        for inner in op.get("ops", []):
            visit(inner)

    for gpu in plan["gpus"]:
        for tb in gpu["threadblocks"]:
            for op in tb["ops"]:
                visit(op)
    return g


class _Sim:
    def __init__(self, plan: Mapping[str, Any], calls: int, seed: int) -> None:
        self.plan = plan
        self.n = len(plan["gpus"])
        self.calls = calls
        self.rng = random.Random(seed)
        self.g = _lcm_tbg(plan)
        self.ranks = [_Rank(plan, r, self.g) for r in range(self.n)]
        self.tbs = [[_Tb(self.ranks[r], tb) for tb in plan["gpus"][r]["threadblocks"]] for r in range(self.n)]
        # pairing of channels: (rank, type, id) -> (peer, peer's channel id)
        self.pair: Dict[Tuple[int, str, int], Tuple[int, int]] = {}
        for r, rk in enumerate(self.ranks):
            for t, peers in rk.chan_peer.items():
                seen: Dict[int, int] = {}
                for cid, p in enumerate(peers):
                    k = seen.get(p, 0)
                    seen[p] = k + 1
                    back = [c for c, q in enumerate(self.ranks[p].chan_peer[t]) if q == r]
                    if k < len(back):
                        self.pair[(r, t, cid)] = (p, back[k])
        self.inbound: Dict[Tuple[int, str, int], int] = {}
        self.consumed: Dict[Tuple[int, str, int], int] = {}
        self.syncers: Dict[Tuple[int, int], List[int]] = {}  # (rank, barrier id) -> [arrived, generation]
        self.reduce_name = "sum"
        self.values: Dict[Tuple[int, int, int], int] = {}
        self.vrng = random.Random(seed * 7919 + 17)

    # --- data ---

    def value(self, call: int, r: int, cell: int) -> int:
        key = (call, r, cell)
        if key not in self.values:
            self.values[key] = self.vrng.randrange(1, 1 << 40)
        return self.values[key]

    def view(self, rk: _Rank, btype: str, call: int) -> Tuple[List[Any], int, int]:
        """(storage, base, length) of one of a rank's buffers."""
        if btype == "i":
            return rk.mem, rk.in_base, rk.nin
        if btype == "o":
            return rk.mem, rk.out_base, rk.nout
        return rk.scratch[call % rk.halves], 0, rk.nscratch

    def cells(self, tb: _Tb, op: Mapping[str, Any], buff: Mapping[str, Any]) -> Tuple[List[Any], List[int], _Rank]:
        """Storage and positions of an operand (this thread block's slice
        of it when the operation is shared by a thread block group)."""
        rk = tb.rank
        if "buffer_id" in buff:
            peer, btype = rk.remote[tb.refs[op["channel_type"]][buff["buffer_id"]]]
            owner = self.ranks[peer]
        else:
            btype, owner = buff["type"], rk
        store, base, _ = self.view(owner, btype, rk.call)
        lo, hi = buff["index"] * self.g, (buff["index"] + buff["size"]) * self.g
        if "tbg_info" in op:
            part = (hi - lo) // op["tbg_info"]["tbg_size"]
            lo += op["tbg_info"]["tb_id"] * part
            hi = lo + part
        return store, [base + c for c in range(lo, hi)], owner

    def read(self, tb: _Tb, op: Mapping[str, Any], buff: Mapping[str, Any]) -> List[int]:
        store, pos, owner = self.cells(tb, op, buff)
        out = []
        for p in pos:
            v = store[p]
            if isinstance(v, tuple):  # packets read as data: their value
                v = v[0]
            if v is None:
                raise SimulationError(f"{tb.where()} reads rank {owner.r}'s {buff} before anything was written "
                                      "there")
            out.append(v)
        return out

    def packets_ready(self, tb: _Tb, op: Mapping[str, Any], buff: Mapping[str, Any]) -> bool:
        store, pos, _ = self.cells(tb, op, buff)
        return all(isinstance(store[p], tuple) and store[p][1] == tb.rank.call for p in pos)

    def read_packets(self, tb: _Tb, op: Mapping[str, Any], buff: Mapping[str, Any]) -> List[int]:
        store, pos, _ = self.cells(tb, op, buff)
        return [store[p][0] for p in pos]

    def write(self, tb: _Tb, op: Mapping[str, Any], buff: Mapping[str, Any], vals: List[int], packet: bool) -> None:
        store, pos, _ = self.cells(tb, op, buff)
        for p, v in zip(pos, vals):
            store[p] = (v, tb.rank.call) if packet else v

    def reduce(self, a: List[int], b: List[int]) -> List[int]:
        ops: Dict[str, Callable[[int, int], int]] = {"sum": lambda x, y: x + y, "max": lambda x, y: max(x, y),
                                                     "min": lambda x, y: min(x, y)}
        f = ops[self.reduce_name]
        return [f(x, y) for x, y in zip(a, b)]

    # --- one operation ---

    def step(self, tb: _Tb) -> bool:
        """Run tb's next operation if it can run now; False if it waits."""
        op = tb.ops[tb.pc]
        name = op["name"]
        rk = tb.rank
        r = rk.r
        if name == "barrier":
            key = (r, op["barrier_id"])
            syncer = self.syncers.setdefault(key, [0, 0])
            if tb.barrier_target is None:
                tb.barrier_target = syncer[1]
                syncer[0] += 1
                if syncer[0] == op["num_threadblocks"]:
                    syncer[0] = 0
                    syncer[1] += 1
            if syncer[1] <= tb.barrier_target:
                return False
            tb.barrier_target = None
        elif name in ("wait", "rlxwait"):
            keys = [(r, op["channel_type"], tb.chans[op["channel_type"]][c]) for c in op["channel_ids"]]
            if any(self.inbound.get(k, 0) <= self.consumed.get(k, 0) for k in keys):
                return False
            for k in keys:
                self.consumed[k] = self.consumed.get(k, 0) + 1
        elif name in ("signal", "rlxsignal"):
            self.signal(tb, op, op["channel_ids"])
        elif name == "sem_acquire":
            if any(rk.sems[s] <= 0 for s in op["semaphore_ids"]):
                return False
            for s in op["semaphore_ids"]:
                rk.sems[s] -= 1
        elif name == "sem_release":
            for s in op["semaphore_ids"]:
                rk.sems[s] += 1
        elif name in ("nop", "flush"):
            pass
        else:
            return self.data(tb, op, name)
        tb.pc += 1
        return True

    def signal(self, tb: _Tb, op: Mapping[str, Any], ids: List[int]) -> None:
        t = op["channel_type"]
        for c in ids:
            cid = tb.chans[t][c]
            pair = self.pair.get((tb.rank.r, t, cid))
            if pair is None:
                raise SimulationError(f"{tb.where()} signals its {t} channel {cid}, which has no pair on the peer")
            k = (pair[0], t, pair[1])
            self.inbound[k] = self.inbound.get(k, 0) + 1

    def data(self, tb: _Tb, op: Mapping[str, Any], name: str) -> bool:
        src, dst = op["src_buff"], op["dst_buff"]
        if name in ("upkt", "rppkt"):
            if not self.packets_ready(tb, op, src[0]):
                return False
        if name in ("repkt", "recpkt", "respkt", "recspkt"):
            if not all(self.packets_ready(tb, op, b) for b in src[1:]):
                return False
        if name == "copy":
            self.write(tb, op, dst[0], self.read(tb, op, src[0]), False)
        elif name == "cpkt":
            self.write(tb, op, dst[0], self.read(tb, op, src[0]), True)
        elif name == "upkt":
            self.write(tb, op, dst[0], self.read_packets(tb, op, src[0]), False)
        elif name in ("put", "pws", "pwsf", "ppkt"):
            for s, d in zip(src, dst):
                self.write(tb, op, d, self.read(tb, op, s), name == "ppkt")
            if name in ("pws", "pwsf"):
                self.signal(tb, op, op["channel_ids"])
        elif name == "rppkt":
            vals = self.read_packets(tb, op, src[0])
            for d in dst:
                self.write(tb, op, d, vals, True)
        elif name == "get":
            for s, d in zip(src, dst):
                self.write(tb, op, d, self.read(tb, op, s), False)
        else:  # reductions
            self.reduce_name = op.get("reduce_op", "sum")
            packet = name in ("repkt", "recpkt", "respkt", "recspkt")
            acc = self.read(tb, op, src[0])
            for b in src[1:]:
                acc = self.reduce(acc, self.read_packets(tb, op, b) if packet else self.read(tb, op, b))
            self.write(tb, op, dst[0], acc, False)
            rest = dst[1:]
            if name in ("recpkt", "recspkt"):
                self.write(tb, op, rest[0], acc, True)
                rest = rest[1:]
            for d in rest:
                self.write(tb, op, d, acc, packet)
        tb.pc += 1
        return True

    # --- calls and results ---

    def start_call(self, rk: _Rank) -> None:
        rk.call += 1
        base = rk.in_base
        for c in range(rk.nin):
            rk.mem[base + c] = self.value(rk.call, rk.r, c)
        for tb in self.tbs[rk.r]:
            tb.pc = 0

    def expected(self, rk: _Rank, call: int) -> Optional[List[int]]:
        coll = self.plan["collective"]
        n, r = self.n, rk.r
        first = self.plan["gpus"][0]
        nin = first["input_chunks"] * self.g

        def red(vals: List[int]) -> int:
            acc = vals[0]
            for v in vals[1:]:
                acc = self.reduce([acc], [v])[0]
            return acc

        if coll == "allreduce":
            return [red([self.value(call, q, c) for q in range(n)]) for c in range(rk.nout)]
        if coll == "allgather":
            return [self.value(call, c // nin, c % nin) for c in range(rk.nout)]
        if coll == "reducescatter":
            return [red([self.value(call, q, r * rk.nout + c) for q in range(n)]) for c in range(rk.nout)]
        if coll == "alltoall":
            share = nin // n
            return [self.value(call, c // share, r * share + c % share) for c in range(rk.nout)]
        return None

    def finish_call(self, rk: _Rank) -> None:
        want = self.expected(rk, rk.call)
        if want is not None:
            got = rk.mem[rk.out_base:rk.out_base + rk.nout]
            for c, (x, y) in enumerate(zip(got, want)):
                if x != y:
                    chunk = c // self.g
                    raise SimulationError(f"rank {rk.r} call {rk.call}: output chunk {chunk} is wrong "
                                          f"({'never written' if x is None else 'another value'}) when its "
                                          "kernel ends")
        rk.done_calls += 1

    def run(self) -> int:
        steps = 0
        active: List[_Tb] = []
        pending = [0] * self.n  # thread blocks of each rank not done with its call

        def begin(rk: _Rank) -> None:
            while True:
                self.start_call(rk)
                tbs = [tb for tb in self.tbs[rk.r] if tb.ops]
                if tbs or rk.done_calls + 1 >= self.calls:
                    break
                self.finish_call(rk)  # a rank with nothing to do
            pending[rk.r] = len(tbs)
            active.extend(tbs)
            if not tbs:
                self.finish_call(rk)

        for rk in self.ranks:
            begin(rk)
        while active:
            start = self.rng.randrange(len(active))
            for i in range(len(active)):
                tb = active[(start + i) % len(active)]
                if self.step(tb):
                    steps += 1
                    break
            else:
                blocked = "; ".join(tb.where() for tb in active[:8])
                more = f" (and {len(active) - 8} more)" if len(active) > 8 else ""
                raise SimulationError(f"deadlock: every thread block waits: {blocked}{more}")
            if tb.pc >= len(tb.ops):
                active.remove(tb)
                rk = tb.rank
                pending[rk.r] -= 1
                if pending[rk.r] == 0:
                    self.finish_call(rk)
                    if rk.done_calls < self.calls:
                        begin(rk)
        return steps


def simulate(plan: Mapping[str, Any], *, calls: int = 2, seed: int = 0) -> int:
    """Run ``calls`` calls of ``plan`` on every rank in the order drawn from
    ``seed``; raise SimulationError on a deadlock, a read of unwritten
    data or a wrong result. Returns the number of operations run. The plan
    must pass check_plan's structural checks (limits aside)."""
    problems = plan_problems(plan, limits=False, symmetric_channels=False)
    if problems:
        raise SimulationError("the plan is malformed (check_plan):\n  " + "\n  ".join(problems[:10]))
    if calls < 1:
        raise ValueError(f"calls must be at least 1, not {calls}")
    return _Sim(plan, calls, seed).run()
