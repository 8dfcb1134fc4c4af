# SPDX-License-Identifier: MIT
"""Execution plans from Python (mscclpp.Plan and the Communicator's plan
methods), under ``mscclpp-run -n N`` on the host backend.

- Every default plan for N ranks (plans/default) loads, says what it is
  (name, collective, form, rank count as its file name says), and
  ``execute_plan`` runs it at the bottom of its size range and at an odd
  size inside it, in its in-place form as the collective's method takes it:
  int32 inputs that every rank can compute for every other, poisoned
  outputs, results checked element by element against NumPy (an oracle
  that shares nothing with the library).
- A plan from JSON text, bytes, a dict and straight from a program of
  mscclpp.language (no file) runs and gives the same result.
- Registered, a plan runs the plain collective calls it matches
  (``plan_runs`` counts them) and not the others; unregistered, it runs
  nothing; ``register_plan_dir`` takes every plan of the directory for N
  ranks, in file name order.
- Bad input raises the documented exception with a message that names
  what was wrong: a missing file, malformed JSON, a plan for another rank
  count, the wrong in-place form, a size out of range, a closed plan, an
  unknown name, arguments of the wrong kind.
"""

from __future__ import annotations

import json
import os

from harness import Checks, require_numpy

np = require_numpy()

import mscclpp  # noqa: E402

checks = Checks("test_plan")
comm = mscclpp.Communicator.from_env()
R, N = comm.rank, comm.size
TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLANS = os.path.join(TOP, "plans", "default")
POISON = -7
LARGEST = 1 << 20  # bytes: the sizes tried stay below this (CI time)


def my_plans():
    """(file name, path) of the default plans for N ranks, in name order."""
    out = []
    for f in sorted(os.listdir(PLANS)):
        if f.endswith(".json") and f"-{N}ranks-" in f:
            out.append((f, os.path.join(PLANS, f)))
    return out


def data(rank, total, salt):
    """Rank ``rank``'s input of ``total`` int32 elements (any rank can make it)."""
    i = np.arange(total, dtype=np.int64)
    return ((i * 7 + rank * 1000003 + salt * 31) % 100000 - 50000).astype(np.int32)


# message bytes -> elements of the C call's count, per collective: the
# plan's range is of the input's bytes (the output's for allgather)
PER_COUNT = {"allreduce": 1, "allgather": N, "reducescatter": N, "alltoall": N}


def counts_for(info):
    """Two counts whose message the plan takes: its smallest, and an odd one
    inside its range (below LARGEST)."""
    unit = 4 * PER_COUNT[info.collective]
    lo = max(1, -(-info.min_message_bytes // unit))
    hi = min(info.max_message_bytes, LARGEST) // unit
    if hi < lo:
        return [lo] if lo * unit <= info.max_message_bytes else []
    odd = lo + 2 * ((hi - lo) // 3) + 1
    return sorted({lo, min(odd, hi)})


def run(plan, n, salt):
    """execute_plan(plan) for count n in the plan's form; (got, want)."""
    c = plan.collective
    if c == "allreduce":
        mine = data(R, n, salt)
        want = sum(data(q, n, salt).astype(np.int64) for q in range(N)).astype(np.int32)
        if plan.inplace:
            buf = mine.copy()
            comm.execute_plan(plan, buf, None)
            return buf, want
        out = np.full(n, POISON, dtype=np.int32)
        comm.execute_plan(plan, mine, out)
        return out, want
    if c == "allgather":
        want = np.concatenate([data(q, n, salt) for q in range(N)])
        if plan.inplace:
            buf = np.full(N * n, POISON, dtype=np.int32)
            buf[R * n : (R + 1) * n] = data(R, n, salt)
            comm.execute_plan(plan, None, buf)
            return buf, want
        out = np.full(N * n, POISON, dtype=np.int32)
        comm.execute_plan(plan, data(R, n, salt), out)
        return out, want
    if c == "reducescatter":
        full = [data(q, N * n, salt).astype(np.int64) for q in range(N)]
        want = sum(f[R * n : (R + 1) * n] for f in full).astype(np.int32)
        if plan.inplace:
            buf = data(R, N * n, salt)
            comm.execute_plan(plan, buf, None)
            return buf[R * n : (R + 1) * n], want
        out = np.full(n, POISON, dtype=np.int32)
        comm.execute_plan(plan, data(R, N * n, salt), out)
        return out, want
    if c == "alltoall":
        want = np.concatenate([data(q, N * n, salt)[R * n : (R + 1) * n] for q in range(N)])
        if plan.inplace:
            buf = data(R, N * n, salt)
            comm.execute_plan(plan, buf, None)
            return buf, want
        out = np.full(N * n, POISON, dtype=np.int32)
        comm.execute_plan(plan, data(R, N * n, salt), out)
        return out, want
    raise AssertionError(c)


def check_result(got, want, what):
    checks.count += 1
    if got.shape != want.shape or not np.array_equal(got, want):
        bad = np.nonzero(got != want)[0] if got.shape == want.shape else [-1]
        k = int(bad[0]) if len(bad) else -1
        checks.fail(f"{what}: {len(bad)} elements wrong, first at {k}: got {got[k] if k >= 0 else got.shape}, "
                    f"want {want[k] if k >= 0 else want.shape}")


# ---- every default plan for N ranks, run explicitly --------------------------------


def test_default_plans():
    files = my_plans()
    checks.true(len(files) >= 8, f"{len(files)} default plans for {N} ranks (want every collective, both forms)")
    ran = 0
    for f, path in files:
        with mscclpp.Plan.load(path) as plan:
            i = plan.info
            checks.equal(i.name, f[:-5], f"{f}: name")
            checks.equal(i.nranks, N, f"{f}: nranks")
            checks.equal(i.collective, f.split("-")[0], f"{f}: collective")
            checks.equal(i.inplace, "_inplace-" in f, f"{f}: in place")
            checks.equal(i.protocol, f[:-5].rsplit("-", 1)[1], f"{f}: protocol")
            checks.true(i.min_message_bytes <= i.max_message_bytes, f"{f}: size range {i.min_message_bytes}..")
            for k, n in enumerate(counts_for(i)):
                got, want = run(plan, n, salt=k + 1)
                check_result(got, want, f"{f}, count {n}")
                ran += 1
            checks.equal(comm.plan_runs(plan), len(counts_for(i)), f"{f}: plan_runs after its explicit runs")
    checks.true(ran >= len(files), f"{ran} checked calls of {len(files)} plans")


# ---- plans without a file -------------------------------------------------------------


def test_from_json():
    path = os.path.join(PLANS, f"allgather-oneshot-{N}ranks-LL.json")
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    sources = [("str", text), ("bytes", text.encode()), ("dict", json.loads(text))]
    try:
        from mscclpp.language.plans import default_plans

        prog = next(p for p in default_plans() if p.name == f"allgather-oneshot-{N}ranks-LL").program()
        sources.append(("mscclpp.language program", prog))
    except ImportError as e:
        checks.fail(f"mscclpp.language cannot be imported: {e}")
    for what, src in sources:
        plan = mscclpp.Plan.from_json(src)
        checks.equal(plan.name, f"allgather-oneshot-{N}ranks-LL", f"from_json({what}): name")
        got, want = run(plan, 3, salt=9)
        check_result(got, want, f"from_json({what})")
        plan.close()
        plan.close()  # a second close does nothing
        checks.true(plan.closed, f"from_json({what}): closed")


# ---- registered plans run the matching calls ------------------------------------------


def test_registered():
    plan = mscclpp.Plan.load(os.path.join(PLANS, f"allreduce-oneshot-{N}ranks-LL.json"))
    checks.equal(comm.plans, [], "no plan registered at first")
    comm.register_plan(plan)
    checks.equal([p.name for p in comm.plans], [plan.name], "plans after register_plan")
    checks.equal(comm.plan_runs(plan), 0, "plan_runs before any call")
    # a plain all_reduce it matches (out of place, in its range) runs it
    x = data(R, 333, 5)
    out = np.full(333, POISON, dtype=np.int32)
    comm.all_reduce(x, out)
    check_result(out, sum(data(q, 333, 5).astype(np.int64) for q in range(N)).astype(np.int32), "registered all_reduce")
    checks.equal(comm.plan_runs(plan), 1, "plan_runs after a matching all_reduce")
    # the other form, and another collective, do not
    buf = x.copy()
    comm.all_reduce(buf)
    check_result(buf, out, "in-place all_reduce (the built-in algorithm)")
    g = np.full(N * 4, POISON, dtype=np.int32)
    comm.all_gather(data(R, 4, 6), g)
    checks.equal(comm.plan_runs(plan), 1, "plan_runs after calls it does not match")
    # the communicator keeps its own reference: closed here, still registered, found by name
    plan.close()
    comm.all_reduce(x, out)
    checks.equal(comm.plan_runs(plan), 2, "a closed Plan's runs, by name")
    checks.equal(comm.plan_runs(plan.name), 2, "plan_runs by name")
    comm.unregister_plan(plan)
    checks.equal(comm.plans, [], "plans after unregister_plan")
    checks.raises(ValueError, comm.plan_runs, plan, contains="no execution plan named")
    comm.all_reduce(x, out)
    check_result(out, sum(data(q, 333, 5).astype(np.int64) for q in range(N)).astype(np.int32), "after unregister")


def test_register_dir():
    n = comm.register_plan_dir(PLANS)
    names = [f[:-5] for f, _ in my_plans()]
    checks.equal(n, len(names), "register_plan_dir: plans for this rank count")
    checks.equal([p.name for p in comm.plans], names, "registered in file name order")
    # a call in some plan's range runs exactly one plan
    before = {p.name: comm.plan_runs(p.name) for p in comm.plans}
    x = data(R, 100, 7)
    out = np.full(100, POISON, dtype=np.int32)
    comm.all_reduce(x, out)
    check_result(out, sum(data(q, 100, 7).astype(np.int64) for q in range(N)).astype(np.int32), "all_reduce, dir")
    moved = [name for name in before if comm.plan_runs(name) != before[name]]
    checks.equal(len(moved), 1, f"plans that ran the all_reduce ({moved})")
    checks.true(all(m.startswith("allreduce-") and "_inplace" not in m for m in moved), f"the one that ran: {moved}")
    for name in names:
        comm.unregister_plan(name)
    checks.equal(comm.plans, [], "every plan unregistered by name")


# ---- bad input --------------------------------------------------------------------------


def test_errors():
    checks.raises(mscclpp.InvalidArgumentError, mscclpp.Plan.load, "/nonexistent/plan.json",
                  contains=("/nonexistent/plan.json", "No such file"))
    checks.raises(mscclpp.InvalidArgumentError, mscclpp.Plan.from_json, '{"name": "x", "collective": ',
                  what="from_json of truncated JSON")
    checks.raises(TypeError, mscclpp.Plan.from_json, 42, contains="JSON text")
    checks.raises(TypeError, comm.register_plan, "allreduce.json", contains="mscclpp.Plan")
    other = 2 if N != 2 else 3
    with mscclpp.Plan.load(os.path.join(PLANS, f"allreduce-oneshot-{other}ranks-LL.json")) as p:
        checks.raises(mscclpp.InvalidArgumentError, comm.register_plan, p, contains=(f"{other} ranks", f"{N}"))
        x = np.zeros(other * 4, dtype=np.int32)
        checks.raises(mscclpp.InvalidArgumentError, comm.execute_plan, p, x, np.zeros_like(x),
                      contains=f"{other} ranks", what="execute_plan of a plan for another rank count")
    with mscclpp.Plan.load(os.path.join(PLANS, f"allreduce-oneshot-{N}ranks-LL.json")) as p:
        comm.register_plan(p)
        checks.raises(mscclpp.InvalidUsageError, comm.register_plan, p, contains="registered")
        comm.unregister_plan(p)
        x = data(R, 8, 1)
        checks.raises(mscclpp.InvalidArgumentError, comm.execute_plan, p, x, None,
                      contains=("out-of-place", "in-place"), what="execute_plan in the wrong form")
        big = p.info.max_message_bytes // 4 + 1
        checks.raises(mscclpp.InvalidArgumentError, comm.execute_plan, p, np.zeros(big, dtype=np.int32),
                      np.zeros(big, dtype=np.int32), contains=str(big * 4), what="execute_plan above the range")
        checks.raises(ValueError, comm.execute_plan, p, x, np.zeros(9, dtype=np.int32), contains="recvbuf")
        checks.raises(ValueError, comm.unregister_plan, "no-such-plan", contains="no-such-plan")
        checks.raises(mscclpp.InvalidArgumentError, comm.unregister_plan, p, contains="is not registered",
                      what="unregister_plan of a plan that is not registered")
    checks.raises(mscclpp.InvalidUsageError, comm.execute_plan, p, x, np.zeros_like(x), contains="closed")
    checks.true("closed" in repr(p), f"repr of a closed plan: {p!r}")


try:
    test_default_plans()
    test_from_json()
    test_registered()
    test_register_dir()
    test_errors()
finally:
    comm.destroy()
checks.done()
