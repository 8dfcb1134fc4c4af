# SPDX-License-Identifier: MIT
"""Revoke, shrink and grow through the Python package, on the host backend.

Two ways to run it:

``mscclpp-run -n N -- python3 test_recover.py`` (N >= 3): the healthy cases.
    Bad arguments first (this rank excluded, a rank out of range, not ranks
    at all, a bad timeout or size, every call on a destroyed communicator):
    clear exceptions on the caller, before anything is exchanged, the ranks
    still in step after them. Then planned shrinks (``abort=False``) without
    the last rank (named twice), without rank 0 and that child shrunk again,
    and with nobody excluded: each new communicator's rank, size and
    collectives checked, the parent still working after each. Then revoke:
    every rank's second thread waits in a bootstrap receive nobody answers
    when its main thread revokes; the receive raises AbortedError, revoke
    says the communicator is quiescent within seconds, collectives fail with
    AbortedError, a barrier still works, and the members shrink the revoked
    communicator without the last rank and check the child.

``python3 test_recover.py kill N VICTIM [grow]`` (no launcher): this process
    is the driver. It makes a unique id, starts N ranks of this script
    (``rank`` mode) and waits for them, bounded. Rank VICTIM SIGKILLs itself
    in its fourth all_reduce; every survivor's call raises RemoteError, a
    shrink with ``abort=False`` is refused (InvalidUsageError naming
    MSCCLPP_SHRINK_ABORT), ``shrink([VICTIM], abort=True)`` gives a
    communicator whose collectives are checked, and the old one refuses
    collectives and is destroyed. With ``grow``, the survivors grow back to N
    ranks: the new rank 0 starts a new process (``join`` mode) with the id of
    ``grow_id``, and everyone, the new process included, checks collectives
    on the grown communicator. The driver passes when the victim died of
    SIGKILL and every survivor printed SURVIVOR_OK and exited 0, within
    KILL_BUDGET seconds.

Every value checked depends on the rank and the call, so a communicator with
the wrong membership or numbering shows as a wrong result.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

from harness import Checks, require_numpy

np = require_numpy()

import mscclpp  # noqa: E402

KILL_BUDGET = 60.0  # seconds for a whole kill run (the ranks' MSCCLPP_TIMEOUT is 20)


def check_comm(checks, c, n, r, salt, what):
    """c has size n and rank r, and its collectives give the right answers
    (values depend on the rank and `salt`)."""
    checks.equal((c.rank, c.size), (r, n), f"{what}: (rank, size)")
    if (c.rank, c.size) != (r, n):
        return
    i = np.arange(64, dtype=np.int64)
    x = (r + 1) * 1000 + salt + i
    c.all_reduce(x)
    checks.equal(x.tolist(), (n * (n + 1) // 2 * 1000 + n * salt + n * i).tolist(), f"{what}: all_reduce")
    b = (i + salt) if r == n - 1 else np.full(64, -1, dtype=np.int64)
    c.broadcast(b, root=n - 1)
    checks.equal(b.tolist(), (i + salt).tolist(), f"{what}: broadcast from rank {n - 1}")
    g = np.empty(2 * n, dtype=np.int32)
    c.all_gather(np.array([r, salt], dtype=np.int32), g)
    checks.equal(g.tolist(), [v for q in range(n) for v in (q, salt)], f"{what}: all_gather")
    a = np.array([r * 100 + p + salt for p in range(n)], dtype=np.int32)
    out = np.empty(n, dtype=np.int32)
    c.all_to_all(a, out)
    checks.equal(out.tolist(), [q * 100 + r + salt for q in range(n)], f"{what}: all_to_all")
    mine = np.full(5, r + salt, dtype=np.float32)
    got = np.zeros(5, dtype=np.float32)
    with mscclpp.group():
        c.send(mine, (r + 1) % n)
        c.recv(got, (r - 1) % n)
    checks.equal(got.tolist(), [float((r - 1) % n + salt)] * 5, f"{what}: send/recv ring")


# ---- healthy cases, under mscclpp-run ---------------------------------------------------


def healthy():
    checks = Checks("test_recover")
    comm = mscclpp.Communicator.from_env()
    R, N = comm.rank, comm.size
    if N < 3:
        print("test_recover needs 3 ranks or more", file=sys.stderr)
        sys.exit(2)

    def in_step(what):
        x = np.ones(3, dtype=np.int32)
        comm.all_reduce(x)
        checks.equal(x.tolist(), [N] * 3, f"ranks in step after {what}")

    def new_comm():
        """A communicator of every rank, apart from `comm`."""
        raw = bytes(mscclpp.UniqueId.create()) if R == 0 else b"\0" * mscclpp.UniqueId.SIZE
        return mscclpp.Communicator(N, R, comm.bootstrap_all_gather(raw)[0])

    # -- bad input: clear exceptions on this rank, nothing exchanged
    checks.raises(ValueError, comm.shrink, [R], contains=("this rank", str(R)), what="shrink excluding this rank")
    checks.raises(ValueError, comm.shrink, [(R + 1) % N, N], contains=(f"rank {N}", f"0..{N - 1}"),
                  what="shrink excluding an unknown rank")
    checks.raises(ValueError, comm.shrink, [-1], contains="rank -1", what="shrink excluding rank -1")
    checks.raises(TypeError, comm.shrink, "12", contains="exclude", what="shrink with a string")
    checks.raises(TypeError, comm.shrink, (R + 1) % N, contains="exclude", what="shrink with a bare int")
    checks.raises(TypeError, comm.shrink, [1.0], contains=("float", "exclude"), what="shrink with a float rank")
    checks.raises(TypeError, comm.shrink, [], abort="yes", contains="abort", what="shrink with abort='yes'")
    checks.raises(ValueError, comm.revoke, -1, contains="timeout", what="revoke with a negative timeout")
    checks.raises(ValueError, comm.revoke, float("nan"), contains="timeout", what="revoke with a NaN timeout")
    checks.raises(ValueError, comm.grow, N, b"\0" * mscclpp.UniqueId.SIZE, contains=("nranks", f"({N})"),
                  what="grow to the same size")
    checks.raises(ValueError, comm.grow, N + 1, b"short", contains="128 bytes", what="grow with a short id")
    checks.raises(TypeError, comm.grow, N + 1, "id", contains="uid", what="grow with a str id")
    checks.raises(ValueError, mscclpp.Communicator.join, 4, 4, b"\0" * 128, contains="rank",
                  what="join with rank == nranks")
    checks.raises(ValueError, mscclpp.Communicator.join, 1, 0, b"\0" * 128, contains="nranks",
                  what="join a communicator of one rank")
    in_step("bad shrink and grow arguments")
    # a destroyed communicator refuses everything, naming why
    c = new_comm()
    c.destroy()
    for fn, args in ((c.shrink, ([],)), (c.revoke, ()), (c.grow_id, ()), (c.grow, (N + 1, b"\0" * 128))):
        checks.raises(mscclpp.InvalidUsageError, fn, *args, contains="destroyed",
                      what=f"{fn.__name__} on a destroyed communicator")
    in_step("calls on a destroyed communicator")

    # -- planned shrinks of a healthy communicator
    last = N - 1
    if R != last:
        child = comm.shrink([last, last])  # repeats allowed
        check_comm(checks, child, N - 1, R, 7, "shrink without the last rank")
        child.destroy()
    in_step("the shrink without the last rank (the parent still works)")
    if R != 0:
        child = comm.shrink([0])
        check_comm(checks, child, N - 1, R - 1, 11, "shrink without rank 0")
        if child.rank != 0:  # the child shrunk again, without its own rank 0 (rank 1 here)
            grandchild = child.shrink([0])
            check_comm(checks, grandchild, N - 2, R - 2, 13, "the child shrunk without its rank 0")
            grandchild.destroy()
        check_comm(checks, child, N - 1, R - 1, 17, "the child after its own shrink")
        child.destroy()
    in_step("the shrinks without rank 0")
    with comm.shrink([]) as same:
        check_comm(checks, same, N, R, 19, "shrink without excluding anyone")
    in_step("the shrink without exclusions")

    # -- revoke with a call in flight on another thread, then shrink
    c = new_comm()
    c.barrier()
    caught = []

    def waiter():
        try:
            c.bootstrap_recv(4, (R + 1) % N, tag=99)  # nobody sends it
            caught.append(None)
        except BaseException as e:  # noqa: BLE001 - checked below
            caught.append(e)

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.2)  # let it reach the wait (revoke interrupts it either way)
    t0 = time.monotonic()
    quiet = c.revoke(timeout=10)
    took = time.monotonic() - t0
    t.join(timeout=10)
    checks.true(quiet, f"revoke: quiescent within 10 s (asked for {took:.2f} s)")
    checks.true(took < 5, f"revoke took {took:.2f} s")
    checks.true(not t.is_alive(), "the waiting thread returned after revoke")
    checks.true(len(caught) == 1 and isinstance(caught[0], mscclpp.AbortedError),
                f"the interrupted bootstrap_recv raised AbortedError: {caught!r}")
    checks.true(c.revoke(), "revoke again: still quiescent")
    checks.equal(c.async_error(), mscclpp.Status.ABORTED, "async_error after revoke")
    checks.raises(mscclpp.AbortedError, c.all_reduce, np.zeros(4, dtype=np.float32),
                  what="all_reduce on a revoked communicator")
    c.barrier()  # new bootstrap operations still work
    checks.true(True, "a barrier on a revoked communicator")
    if R != last:
        with c.shrink([last]) as child:  # abort=False on a revoked communicator
            check_comm(checks, child, N - 1, R, 23, "shrink of a revoked communicator")
    c.destroy()
    in_step("revoke and shrink")

    comm.destroy()
    checks.done()


# ---- a rank killed: the driver and its ranks ----------------------------------------------


def run_until_failure(checks, c, r, victim):
    """all_reduce until one fails; the victim SIGKILLs itself before its
    fourth. Returns the exception (None if all 1000 passed)."""
    n = c.size
    for it in range(1000):
        if r == victim and it == 3:
            print(f"rank {r}: KILLED", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        x = np.full(256, r + it, dtype=np.int32)
        try:
            c.all_reduce(x)
        except mscclpp.MscclppError as e:
            print(f"rank {r}: all_reduce {it}: {type(e).__name__}: {e}", flush=True)
            return e
        checks.equal(int(x[0]), n * (n - 1) // 2 + n * it, f"all_reduce {it} before the kill")
    return None


def rank_main(uid_hex, n, r, victim, grow):
    checks = Checks(f"test_recover kill rank {r}")
    c = mscclpp.Communicator(n, r, bytes.fromhex(uid_hex))
    c.barrier()
    t0 = time.monotonic()
    e = run_until_failure(checks, c, r, victim)
    checks.true(isinstance(e, mscclpp.RemoteError) and f"rank {victim} was lost" in str(e),
                f"the survivor's call raised RemoteError naming rank {victim}: {e!r}")
    # refused without abort: the communicator failed and was not revoked
    checks.raises(mscclpp.InvalidUsageError, c.shrink, [victim], contains=("MSCCLPP_SHRINK_ABORT", f"rank {victim}"),
                  what="shrink(abort=False) after the kill")
    child = c.shrink([victim], abort=True)
    me = r if r < victim else r - 1
    check_comm(checks, child, n - 1, me, 29, "after the kill")
    print(f"rank {r}: recovered {time.monotonic() - t0:.3f} s after the kill", flush=True)
    checks.raises(mscclpp.MscclppError, c.all_reduce, np.zeros(4, dtype=np.int32),
                  what="the old communicator refuses collectives")
    c.destroy()
    if grow:
        t1 = time.monotonic()
        uid = child.grow_id()
        joiner = None
        if child.rank == 0:
            joiner = subprocess.Popen([sys.executable, os.path.abspath(__file__), "join", bytes(uid).hex(), str(n),
                                       str(n - 1)])
        with child.grow(n, uid) as g:
            print(f"rank {r}: grown back to {n} ranks in {time.monotonic() - t1:.3f} s", flush=True)
            check_comm(checks, g, n, me, 31, "grown back")
        if joiner is not None:
            try:
                rc = joiner.wait(timeout=30)
            except subprocess.TimeoutExpired:
                joiner.kill()
                rc = "hung"
            checks.equal(rc, 0, "the new process's exit status")
    child.destroy()
    if not checks.failed:
        print(f"SURVIVOR_OK rank {r}", flush=True)
    checks.done()


def join_main(uid_hex, n, r):
    checks = Checks(f"test_recover joiner rank {r}")
    with mscclpp.Communicator.join(n, r, bytes.fromhex(uid_hex)) as g:
        check_comm(checks, g, n, r, 31, "grown back (the new process)")
    checks.done()


def driver(n, victim, grow):
    if not 0 <= victim < n or n < 3:
        sys.exit(f"kill N VICTIM: N >= 3 and 0 <= VICTIM < N (got {n}, {victim})")
    uid = mscclpp.UniqueId.create()  # this process serves the rendezvous
    env = dict(os.environ, MSCCLPP_TIMEOUT="20", CUDA_VISIBLE_DEVICES="")
    for k in ("MSCCLPP_RANK", "MSCCLPP_NRANKS", "MSCCLPP_COMM_ID"):
        env.pop(k, None)
    me = os.path.abspath(__file__)
    t0 = time.monotonic()
    procs = [
        subprocess.Popen([sys.executable, me, "rank", bytes(uid).hex(), str(n), str(r), str(victim), str(int(grow))],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for r in range(n)
    ]
    outs = []
    for r, p in enumerate(procs):
        left = max(1.0, KILL_BUDGET - (time.monotonic() - t0))
        try:
            out, _ = p.communicate(timeout=left)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out, _ = p.communicate()
            out += f"\n(rank {r} still running after {KILL_BUDGET:.0f} s: killed)\n"
        outs.append(out)
    took = time.monotonic() - t0
    failed = 0
    for r, (p, out) in enumerate(zip(procs, outs)):
        for line in out.splitlines():
            print(f"[{r}] {line}")
        if r == victim:
            ok = p.returncode == -signal.SIGKILL
            what = f"died of SIGKILL (status {p.returncode})"
        else:
            ok = p.returncode == 0 and f"SURVIVOR_OK rank {r}" in out
            what = f"exit status {p.returncode}, SURVIVOR_OK {'printed' if 'SURVIVOR_OK' in out else 'missing'}"
        if not ok:
            failed += 1
            print(f"FAIL: rank {r}: {what}", file=sys.stderr)
    verdict = "FAILED" if failed else "passed"
    print(f"test_recover kill: {n} ranks, victim {victim}{', grown back' if grow else ''}: {verdict} "
          f"in {took:.1f} s", flush=True)
    sys.exit(1 if failed else 0)


def main():
    a = sys.argv[1:]
    if not a:
        healthy()
    elif a[0] == "kill" and len(a) in (3, 4) and (len(a) == 3 or a[3] == "grow"):
        driver(int(a[1]), int(a[2]), len(a) == 4)
    elif a[0] == "rank" and len(a) == 6:
        rank_main(a[1], int(a[2]), int(a[3]), int(a[4]), a[5] == "1")
    elif a[0] == "join" and len(a) == 4:
        join_main(a[1], int(a[2]), int(a[3]))
    else:
        sys.exit("usage: test_recover.py  |  test_recover.py kill N VICTIM [grow]")


main()
