# SPDX-License-Identifier: MIT
"""mscclpp.language, the plan DSL, in one process (no library, no NumPy).

- The same algorithm written with our DSL emits byte for byte the plan that
  MSCCL++'s DSL wrote (tests/plan/mscclpp_dsl/: allreduce Simple and LL,
  allgather Simple, LL and with a thread block group, all-to-all; 2, 4 and
  8 ranks): the programs below are those algorithms, written here.
- Fusion, synchronisation and replication give the expected operations.
- Every kind of mistake raises DSLError (or TypeError) naming it.
- check_plan refuses broken plans, naming the field; simulate catches a
  plan that lost a synchronisation or writes the wrong chunk.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
import tempfile
from typing import Any, Callable, Dict, List

from harness import Checks

from mscclpp.language import (AllGather, AllReduce, AllToAll, Buffer, CollectiveProgram, DSLError, LoopIterationContext,
                              MemoryChannel, PlanError, PortChannel, Rank, ReduceScatter, Semaphore, SwitchChannel,
                              SyncType, TestCollective, ThreadBlockGroup, check_plan, simulate)
from mscclpp.language.simulator import SimulationError
from mscclpp.language.types import BufferType, Chunk

checks = Checks("test_dsl")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "tests", "plan", "mscclpp_dsl")


def others(r: int, n: int) -> List[int]:
    return [p for p in range(n) if p != r]


# --- MSCCL++'s single-node examples, written with this DSL ---

def allreduce(name: str, n: int) -> str:
    """Read-reduce from every peer, write the sum to every peer; 8 thread
    blocks, a channel per (peer, rank, thread block)."""
    tbs = 8
    with CollectiveProgram(name, AllReduce(n, tbs, True), n, protocol="Simple") as prog:
        ch = {(p, r, t): MemoryChannel(p, r) for r in range(n) for t in range(tbs) for p in others(r, n)}
        for r in range(n):
            for t in range(tbs):
                for p in others(r, n):
                    ch[(p, r, t)].signal(t, relaxed=True)
        for r in range(n):
            for t in range(tbs):
                for p in others(r, n):
                    ch[(p, r, t)].wait(t, data_sync=SyncType.after, relaxed=True)
        for r in range(n):
            inp = Rank(r).get_input_buffer()
            for t in range(tbs):
                i = r * tbs + t
                for p in others(r, n):
                    ch[(p, r, t)].reduce(inp[i:i + 1], [Rank(p).get_input_buffer()[i:i + 1]], t)
                for p in others(r, n):
                    ch[(p, r, t)].put(Rank(p).get_input_buffer()[i:i + 1], inp[i:i + 1], t)
        for r in range(n):
            for t in range(tbs):
                for p in others(r, n):
                    ch[(p, r, t)].signal(t, data_sync=SyncType.before)
        for r in range(n):
            for t in range(tbs):
                for p in others(r, n):
                    ch[(p, r, t)].wait(t)
        return prog.to_json()


def allreduce_pkt(name: str, n: int) -> str:
    """Two-step LL: shares to their owners' scratch, reduce and send the
    result to every peer's scratch, unpack."""
    with CollectiveProgram(name, AllReduce(n, n, True), n, protocol="LL", auto_sync=False,
                           use_double_scratch_buffer=True) as prog:
        scratch = [Buffer(r, 2 * (n - 1) * n) for r in range(n)]
        ch = {(p, r): MemoryChannel(p, r) for r in range(n) for p in others(r, n)}

        def at(sender: int, receiver: int) -> int:
            return sender if sender < receiver else sender - 1

        for r in range(n):
            inp = Rank(r).get_input_buffer()
            for p in others(r, n):
                s = at(r, p) * n
                ch[(p, r)].put_packets(scratch[p][s:s + n], inp[p * n:p * n + n], at(p, r))
        for r in range(n):
            inp = Rank(r).get_input_buffer()
            for i in range(n):
                got = [scratch[r][at(q, r) * n + i:at(q, r) * n + i + 1] for q in others(r, n)]
                Rank(r).reduce(inp[r * n + i:r * n + i + 1], got, i, packet=True)
                for p in others(r, n):
                    s = n * (n - 1) + at(r, p) * n + i
                    ch[(p, r)].put_packets(scratch[p][s:s + 1], inp[r * n + i:r * n + i + 1], i)
        for r in range(n):
            inp = Rank(r).get_input_buffer()
            for q in others(r, n):
                s = n * (n - 1) + at(q, r) * n
                Rank(r).unpack_packets(inp[q * n:q * n + n], scratch[r][s:s + n], q)
        return prog.to_json()


def allgather(name: str, n: int, tbg: bool = False) -> str:
    """In place over memory channels, one thread block (or a group of 4
    between barriers)."""
    with CollectiveProgram(name, AllGather(n, 1, True), n, protocol="Simple") as prog:
        for src in range(n):
            out = Rank(src).get_output_buffer()
            for dst in range(n):
                if dst == src:
                    continue
                ch = MemoryChannel(dst, src)
                ch.signal(tb=0, relaxed=True)
                ch.wait(tb=0, data_sync=SyncType.after, relaxed=True)
                target = Rank(dst).get_output_buffer()[src:src + 1]
                if tbg:
                    group = ThreadBlockGroup(tb_list=[0, 1, 2, 3])
                    Rank(src).barrier(tb_list=group.tb_list)
                    ch.put(target, out[src:src + 1], tb_group=group)
                    Rank(src).barrier(tb_list=group.tb_list)
                else:
                    ch.put(target, out[src:src + 1], tb=0)
                ch.signal(tb=0, data_sync=SyncType.before)
                ch.wait(tb=0, data_sync=SyncType.after)
        return prog.to_json()


def allgather_pkt(name: str, n: int) -> str:
    with CollectiveProgram(name, AllGather(n, 1, True), n, protocol="LL", use_double_scratch_buffer=True) as prog:
        scratch = [Buffer(r, n) for r in range(n)]
        for r in range(n):
            out = Rank(r).get_output_buffer()
            for k in range(1, n):
                d = (r + k) % n
                MemoryChannel(d, r).put_packets(scratch[d][r:r + 1], out[r:r + 1], k - 1)
        for r in range(n):
            out = Rank(r).get_output_buffer()
            for k in range(1, n):
                d = (r + k) % n
                Rank(r).unpack_packets(out[d:d + 1], scratch[r][d:d + 1], tb=n + k - 2)
        return prog.to_json()


def alltoall(name: str, n: int) -> str:
    """Through scratch, two instances."""
    with CollectiveProgram(name, AllToAll(n, 1, True), n, instances=2, protocol="Simple") as prog:
        ch = {}
        scratch = {}
        for r in range(n):
            scratch[r] = Buffer(r, n - 1)
            for p in others(r, n):
                ch[(p, r)] = MemoryChannel(p, r)

        def idx(a: int, b: int) -> int:
            return a if a < b else a - 1

        for r in range(n):
            for p in others(r, n):
                ch[(p, r)].signal(tb=idx(p, r), relaxed=True)
            for p in others(r, n):
                ch[(p, r)].wait(tb=idx(p, r), relaxed=True, data_sync=SyncType.after)
        for r in range(n):
            inp = Rank(r).get_input_buffer()
            for p in others(r, n):
                ch[(p, r)].put(scratch[p][idx(r, p):idx(r, p) + 1], inp[p:p + 1], tb=idx(p, r))
                ch[(p, r)].signal(tb=idx(p, r), data_sync=SyncType.before)
        for r in range(n):
            inp = Rank(r).get_input_buffer()
            for p in others(r, n):
                ch[(p, r)].wait(tb=idx(p, r), data_sync=SyncType.after)
                Rank(r).copy(inp[p:p + 1], scratch[r][idx(p, r):idx(p, r) + 1], tb=idx(p, r))
        return prog.to_json()


def fixture(name: str) -> str:
    with open(os.path.join(FIXTURES, name + ".json"), encoding="utf-8") as f:
        return f.read()


cases: List[Any] = []
for n in (2, 4, 8):
    cases += [(f"allreduce_{n}", allreduce, n), (f"allreduce_pkt_{n}", allreduce_pkt, n),
              (f"allgather_pkt_{n}", allgather_pkt, n), (f"alltoall_{n}", alltoall, n)]
cases += [("allgather_2", allgather, 2), ("allgather_tbg_2", lambda name, n: allgather(name, n, tbg=True), 2)]
for name, fn, n in cases:
    want = fixture(name)
    got = fn(name, n) + "\n"
    checks.equal(got == want, True, f"{name}: our plan equals MSCCL++'s ({len(got)} vs {len(want)} bytes)")
    plan = json.loads(want)
    checks.equal(check_plan(plan), None, f"{name}: MSCCL++'s plan passes check_plan")
    checks.true(simulate(plan, calls=2, seed=1) > 0, f"{name}: MSCCL++'s plan simulates")


# --- passes: fusion, synchronisation, replication ---

def names(plan: Dict[str, Any], rank: int = 0, tb: int = 0) -> List[str]:
    return [op["name"] for op in plan["gpus"][rank]["threadblocks"][tb]["ops"]]


with CollectiveProgram("fuse", AllReduce(2, 1, False), 2, protocol="LL") as prog:
    sc = [Buffer(r, 2) for r in range(2)]
    for r in range(2):
        p = 1 - r
        inp, out = Rank(r).get_input_buffer(), Rank(r).get_output_buffer()
        ch = MemoryChannel(p, r)
        ch.put_packets(sc[p][r:r + 1], inp[0:1], tb=0)
        ch.put_packets(sc[p][r:r + 1], inp[1:2], tb=1)
        Rank(r).reduce(inp[r:r + 1], [sc[r][p:p + 1]], tb=2, dst_chunk=out[r:r + 1], packet=True)
        ch.put_packets(sc[p][r:r + 1], out[r:r + 1], tb=2)
        Rank(r).copy_packets(sc[r][r:r + 1], out[r:r + 1], tb=3)
    plan = prog.to_dict()
checks.equal(names(plan, 0, 2), ["respkt"], "repkt + ppkt of its result fuse into respkt")
checks.equal(plan["gpus"][0]["threadblocks"][2]["ops"][0]["dst_buff"][1], {"buffer_id": 0, "index": 0, "size": 1},
             "respkt's second destination is the peer's scratch chunk")
checks.raises(DSLError, lambda: Rank(0), contains="no program", what="Rank outside a program")

with CollectiveProgram("sync", AllReduce(2, 2, True), 2) as prog:
    ch = [MemoryChannel(1, 0), MemoryChannel(1, 0), MemoryChannel(0, 1), MemoryChannel(0, 1)]
    inp = Rank(0).get_input_buffer()
    ch[0].signal(tb=0)
    ch[1].signal(tb=0)  # fuses with the first: disjoint channels
    ch[0].wait(tb=0, data_sync=SyncType.after)
    ch[1].wait(tb=0, data_sync=SyncType.after)
    Rank(0).copy(inp[1:2], inp[0:1], tb=0)
    Rank(0).copy(inp[2:3], inp[1:2], tb=0)  # reads what the copy before wrote: a nop between
    ch[2].wait(tb=0)
    ch[3].wait(tb=0)
    ch[2].signal(tb=0)
    ch[3].signal(tb=0)
    plan = prog.to_dict()
ops = plan["gpus"][0]["threadblocks"][0]["ops"]
checks.equal(names(plan), ["nop", "signal", "nop", "wait", "nop", "copy", "nop", "copy"],
             "signals and waits fuse; nops around the signal, after the wait and between dependent copies")
checks.equal(ops[1]["channel_ids"], [0, 1], "the fused signal covers both channels")
checks.equal(prog.to_json(), prog.to_json(), "to_json is the same every time")
checks.raises(DSLError, lambda: Semaphore(0, 0), contains="no program", what="after the program's block")

with CollectiveProgram("inst", AllGather(2, 1, False), 2, instances=2) as prog:
    for r in range(2):
        p = 1 - r
        ch = MemoryChannel(p, r)
        ch.put(Rank(p).get_output_buffer()[r:r + 1], Rank(r).get_input_buffer()[0:1], tb=0)
        ch.signal(tb=0, data_sync=SyncType.before)
        ch.wait(tb=0, data_sync=SyncType.after)
    plan = prog.to_dict()
g0 = plan["gpus"][0]
checks.equal((g0["input_chunks"], g0["output_chunks"]), (2, 4), "instances multiply the chunks")
checks.equal([tb["id"] for tb in g0["threadblocks"]], [0, 1], "a thread block per instance")
checks.equal(g0["channels"], [{"channel_type": "memory", "connected_to": [1, 1]}], "a channel per instance")
checks.equal([tb["channels"][0]["channel_ids"] for tb in g0["threadblocks"]], [[0], [1]],
             "each instance on its own channel")
put = [tb["ops"][0] for tb in g0["threadblocks"]]
checks.equal([(o["src_buff"][0]["index"], o["dst_buff"][0]["index"]) for o in put], [(0, 0), (1, 1)],
             "instance k on interleaved chunks (i * instances + k)")

with CollectiveProgram("pipe", AllReduce(2, 1, True), 2) as prog:
    sems = [Semaphore(r, 0) for r in range(2)]
    for r in range(2):
        inp = Rank(r).get_input_buffer()
        with LoopIterationContext(unit=1 << 20, num_chunks=1):
            Rank(r).copy(inp[0:1], inp[1:2], tb=0)
            sems[r].release(tb=0)
            sems[r].acquire(tb=1)
            Rank(r).copy(inp[1:2], inp[0:1], tb=1)
        Rank(r).barrier([0, 1])
    plan = prog.to_dict()
checks.equal(names(plan, 1, 0), ["pipeline", "barrier"], "a pipeline per thread block, then the barrier")
checks.equal(plan["gpus"][1]["threadblocks"][0]["ops"][0]["iter_context"], {"unit_size": 1 << 20, "num_chunks": 1},
             "the pipeline's iteration context")
checks.equal([o["name"] for o in plan["gpus"][1]["threadblocks"][1]["ops"][0]["ops"]],
             ["nop", "sem_acquire", "nop", "copy"], "a pipeline's own operations synchronise")
checks.equal(plan["gpus"][0]["semaphores"], [{"init_value": 0}], "the rank's semaphore")


# --- mistakes ---

def program(n: int = 2, **kw: Any) -> CollectiveProgram:
    return CollectiveProgram("bad", AllReduce(n, 1, False), n, **kw)


def raises(fn: Callable[[], Any], contains: Any, what: str, exc: Any = DSLError) -> None:
    checks.raises(exc, fn, contains=contains, what=what)


raises(lambda: CollectiveProgram("x", AllReduce(4, 1, False), 2), ("for 2 ranks", "for 4"), "rank count mismatch")
raises(lambda: program(protocol="LL128"), "protocol", "unknown protocol")
raises(lambda: program(min_message_size=10, max_message_size=5), "min_message_size", "min above max")
raises(lambda: AllGather(0, 1, False), "num_ranks", "no ranks")
with program() as prog:
    inp = Rank(0).get_input_buffer()
    raises(lambda: inp[0:3], "out of range", "slice past the buffer")
    raises(lambda: inp[1:1], "empty", "empty slice")
    raises(lambda: inp[0:2:2], "step", "slice with a step")
    raises(lambda: inp[0], "slice", "integer index", TypeError)
    raises(lambda: Rank(2), ("Rank 2", "0 to 1"), "rank out of range")
    raises(lambda: MemoryChannel(0, 0), "both 0", "channel to itself")
    raises(lambda: MemoryChannel(5, 0), "dst_rank 5", "channel to a rank that does not exist")
    raises(lambda: SwitchChannel([0, 1], BufferType.input), "multicast", "switch channel")
    ch = MemoryChannel(1, 0)
    raises(lambda: ch.put(Chunk(1, BufferType.input, 1, 2), inp[0:2], tb=0), ("out of range", "2 chunks"),
           "chunk made by hand past the buffer")
    raises(lambda: ch.put(inp[0:1], inp[1:2], tb=0), "rank 1", "put into this rank's own chunk")
    raises(lambda: ch.put(Rank(1).get_input_buffer()[0:1], inp[0:1], tb=-1), "negative", "negative thread block")
    raises(lambda: ch.put(Rank(1).get_input_buffer()[0:1], inp[0:1]), "tb=", "no thread block")
    raises(lambda: ch.put(Rank(1).get_input_buffer()[0:1], inp[0:2], tb=0), "size", "sizes differ")
    raises(lambda: ch.put_packets(Rank(1).get_input_buffer()[0:1], inp[0:1], tb=0), "protocol='LL'",
           "packets in a Simple program")
    raises(lambda: Rank(0).reduce(inp[0:1], [], tb=0), "non-empty", "reduce with nothing")
    raises(lambda: Rank(0).barrier([1, 1]), "duplicates", "barrier with a thread block twice")
    raises(lambda: ThreadBlockGroup([0, 0]), "twice", "group with a thread block twice")
    raises(lambda: program().__enter__(), "do not nest", "a program inside a program")
    other = ch
with program() as prog:
    raises(lambda: other.signal(tb=0), "another program", "channel of another program")
    raises(lambda: Rank(0).copy(Rank(0).get_output_buffer()[0:1], inp[0:1], tb=0), "another program",
           "chunk of another program")
with program() as prog:
    MemoryChannel(1, 0).signal(tb=0)
    MemoryChannel(0, 1)
    raises(prog.to_json, ("signals 1 time(s)", "waits 0 time(s)"), "a signal nobody waits for")
with program() as prog:
    MemoryChannel(1, 0).wait(tb=0)
    raises(prog.to_json, ("no pair", "waits"), "a wait on a channel without pair")
with CollectiveProgram("t", TestCollective(2, 1, 1), 2) as prog:
    prog.to_json()
    raises(lambda: Buffer(0, 1), "already written", "changing a program after to_json")
with program(protocol="LL") as prog:
    sc = Buffer(1, 1)
    ch = MemoryChannel(1, 0)
    with LoopIterationContext(1024, 1):
        raises(lambda: ch.put_packets(sc[0:1], Rank(0).get_input_buffer()[0:1], tb=0), "pipeline",
               "packets in a pipeline")
        raises(lambda: LoopIterationContext(1024, 1).__enter__(), "nest", "pipeline in a pipeline")
with program() as prog:
    port = PortChannel(1, 0)
    raises(lambda: port.put_with_signal(Rank(1).get_output_buffer()[0:1], Rank(0).get_input_buffer()[0:2], 0),
           "size", "port put of different sizes")


# --- check_plan and simulate can fail ---

good = json.loads(fixture("allreduce_4"))


def broken(edit: Callable[[Dict[str, Any]], None]) -> Dict[str, Any]:
    plan = copy.deepcopy(good)
    edit(plan)
    return plan


def rres(plan: Dict[str, Any], rank: int = 1, tb: int = 3) -> Dict[str, Any]:
    return next(o for o in plan["gpus"][rank]["threadblocks"][tb]["ops"] if o["name"] == "rres")


def set_(obj: Dict[str, Any], key: str, value: Any) -> None:
    obj[key] = value


bad_plans = [
    (lambda p: set_(rres(p)["src_buff"][1], "index", 32), "gpus[1].threadblocks[3].ops[5].src_buff[1]",
     "out of range", "a peer's chunk past its buffer"),
    (lambda p: set_(rres(p)["dst_buff"][0], "type", "x"), "dst_buff[0].type", "'x'", "unknown buffer type"),
    (lambda p: set_(rres(p), "name", "frobnicate"), "ops[5].name", "not an operation", "unknown operation"),
    (lambda p: set_(p["gpus"][2]["channels"][0], "channel_type", "switch"), "gpus[2].channels[0]", "multicast",
     "switch channel"),
    (lambda p: p["gpus"][0]["threadblocks"][0]["ops"].pop(3), "signals 2 time(s)", "waits 1 time(s)",
     "a wait removed"),
    (lambda p: p["gpus"][0]["channels"][0]["connected_to"].pop(), "has 7 memory channel(s) to rank 3",
     "8 back", "channel counts differ"),
    (lambda p: set_(p["gpus"][0], "id", 3), "gpus[0].id", "position 0", "ranks out of order"),
    (lambda p: set_(p, "protocol", "LL128"), "protocol", "'LL128'", "unknown protocol"),
    (lambda p: set_(rres(p), "channel_ids", [0] * 9), "9 channels", "8 per operation", "an executor limit"),
]
for edit, where, why, what in bad_plans:
    e = checks.raises(PlanError, check_plan, broken(edit), contains=(where, why), what=f"check_plan: {what}")
    if e is not None:
        print(f"  {what}: {str(e).splitlines()[1].strip()}")
checks.raises(PlanError, check_plan, good, nranks=2, contains="for 4 ranks, not 2", what="check_plan: rank count")


def strip_ops(plan: Dict[str, Any], drop: Callable[[int, Dict[str, Any]], bool]) -> None:
    for g in plan["gpus"]:
        for tb in g["threadblocks"]:
            tb["ops"] = [o for i, o in enumerate(tb["ops"]) if not drop(i, o)]


def caught(plan: Dict[str, Any], contains: str, what: str) -> None:
    for seed in range(10):
        try:
            simulate(plan, calls=3, seed=seed)
        except SimulationError as e:
            checks.true(contains in str(e), f"simulate: {what}: {e} does not say {contains!r}")
            return
    checks.fail(f"simulate: {what}: not caught in 10 orders")


caught(broken(lambda p: strip_ops(p, lambda i, o: o["name"] in ("rlxsignal", "rlxwait"))), "is wrong",
       "no handshake before reading peers' inputs")
caught(broken(lambda p: strip_ops(p, lambda i, o: i >= 6)), "is wrong", "no handshake at the end")
caught(broken(lambda p: set_(rres(p)["dst_buff"][1], "index", 0)), "is wrong", "the result sent to the wrong chunk")
with open(os.path.join(ROOT, "plans", "default", "allreduce-oneshot-4ranks-LL.json"), encoding="utf-8") as f:
    ll = json.load(f)
caught(dict(ll, use_double_scratch_buffer=False), "deadlock", "LL packets reusing one scratch half")


# --- README.md's example runs as written ---

with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
    readme = f.read()
at = readme.find("### Writing plans in Python\n")
m = re.compile(r"```python\n(.*?)```", re.S).search(readme, at) if at >= 0 else None
checks.true(m is not None, "README.md has a python block in 'Writing plans in Python'")
if m is not None:
    with tempfile.TemporaryDirectory(prefix="mscclpp-dsl-readme-") as d:
        p = subprocess.run([sys.executable, "-c", m.group(1)], cwd=d, capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
        checks.equal(p.returncode, 0, f"README.md's example: {p.stdout}{p.stderr}")
        out = os.path.join(d, "myplans", "my-allgather-4.json")
        if os.path.exists(out):
            with open(out, encoding="utf-8") as f:
                check_plan(json.load(f), nranks=4)
        checks.true(os.path.exists(out), "README.md's example writes myplans/my-allgather-4.json")
checks.done()
