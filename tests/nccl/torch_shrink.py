#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Keep training after a rank dies: PyTorch on libmscclpp_nccl.so.

Run on a GPU machine (ranks share the GPUs round-robin; several ranks on one
GPU need CUDA MPS, which --mps starts when it is not running):

    python3 tests/nccl/torch_shrink.py --lib build/src/nccl/libmscclpp_nccl.so --mps \\
        [--nprocs 4] [--steps 60] [--kill 2@20,0@40] [--how auto|shrink|reinit]

The script re-executes itself with LD_PRELOAD=<lib> (PyTorch's "nccl"
backend is then served by our library), hosts the job's TCPStore in this
driver process (as torchrun's agent does: the store must outlive any rank,
rank 0 included) and starts --nprocs ranks. They train a small MLP with
data parallelism written out (the gradients flattened and all_reduce'd each
step) and check two exact collectives per step: an all_gather_into_tensor
into a poisoned output and an int32 all_reduce. The driver SIGKILLs each
victim (--kill RANK@STEP, original ranks) a seeded random moment after the
victim has enqueued that step's collectives, so its kernels and the
survivors' are in flight, then publishes who died in the store.

The survivors (PyTorch 2.11's way, through our library):
  - TORCH_NCCL_ASYNC_ERROR_HANDLING=0: PyTorch's watchdog must not tear the
    process down when a communicator fails (its default does);
  - TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC short: otherwise PyTorch's watchdog
    sleeps a minute for each unretired work of the failed group, and
    shrink_group (or an abort) waits for it; TORCH_NCCL_DUMP_ON_TIMEOUT=0:
    otherwise another rank's "dump" signal makes a survivor's heartbeat
    monitor sleep 8 minutes and end the process (see main());
  - a failed step is seen as an exception from a collective or wait, or,
    after torch.cuda.synchronize() (our kernels return once the peer is
    known dead), as ncclCommGetAsyncError on the group's communicator
    (ProcessGroupNCCL._comm_ptr(), the library called through ctypes);
  - they read the dead ranks from the store and call
    torch.distributed.shrink_group(dead, shrink_flags=SHRINK_ABORT) on the
    default group: ncclCommShrink with NCCL_SHRINK_ABORT, no new unique id,
    nothing from the dead rank, rank 0 dead or not; PyTorch then destroys
    the parent group (ncclCommFinalize, ncclCommDestroy) and the returned
    group is the new default group;
  - --how reinit (or auto, when shrink_group is missing or fails): abort the
    old group and init_process_group anew from the survivors, on a
    PrefixStore of the same store (any PyTorch version);
  - they agree on the last step every survivor completed (an all_reduce
    MIN on the new group), restore that step's parameters from memory and
    go on with the same global batch split over fewer ranks.
Every gradient is the mean over the same global batch whatever the number of
ranks, so the final weights must match a full-batch run of the same steps in
one process (rtol 1e-4, atol 1e-5); the time from each kill to the first
step that succeeded on every survivor is printed, with how it recovered.

--cpu checks the script itself on a machine without a GPU: the gloo backend
on CPU tensors, no library, recovery by a new process group (shrink_group
is NCCL's only), the failure seen as gloo's exception.

Exit status 0 when every survivor passed every check; 77 without a GPU.
"""
import argparse
import ctypes
import datetime
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import traceback

REEXEC_FLAG = "MSCCLPP_TORCH_SHRINK_CHILD"
BATCH = 96           # the global batch: divisible by 4, 3 and 2 ranks
DIM, HIDDEN = 64, 1024
CANARY = 1 << 14     # int32 elements of each rank's part of the exact checks
LR = 0.005           # stable for the 60 steps of full-batch descent (the loss falls about 4x)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lib", default=None, help="libmscclpp_nccl.so (default: build/src/nccl/ of this tree)")
    p.add_argument("--nprocs", type=int, default=4)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--kill", default="2@20,0@40", help="RANK@STEP,...: original ranks and the steps they die in")
    p.add_argument("--how", default="auto", choices=["auto", "shrink", "reinit"],
                   help="shrink: torch.distributed.shrink_group only; reinit: a new process group only; "
                        "auto: shrink_group, else a new process group")
    p.add_argument("--seed", type=int, default=1, help="picks each kill's moment (printed)")
    p.add_argument("--timeout", type=float, default=170, help="seconds for the whole run")
    p.add_argument("--mps", action="store_true", help="start the CUDA MPS daemon if ranks share a GPU and none runs")
    p.add_argument("--cpu", action="store_true", help="gloo on CPU tensors, no library (checks this script)")
    p.add_argument("--worker", nargs=3, metavar=("RANK", "PORT", "LIB"), help=argparse.SUPPRESS)
    return p.parse_args()


def parse_kills(text):
    kills = []
    for item in filter(None, text.split(",")):
        r, s = item.split("@")
        kills.append((int(r), int(s)))
    return kills


def publish(store, key, value):
    """Set key, then raise its flag (Store.check is not in every PyTorch: a counter is)."""
    store.set(key, value)
    store.add(key + "#", 1)


def published(store, key):
    return store.add(key + "#", 0) > 0


def count_threads():
    """This process's threads other than CUDA's own (named cuda...)."""
    n = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
        except OSError:
            continue
        n += not name.startswith("cuda")
    return n


# ---------------------------------------------------------------------------------------------------------------
# a rank


class Rank:
    def __init__(self, orig, nprocs, port, lib, args):
        import torch
        import torch.distributed as dist
        self.torch, self.dist = torch, dist
        self.orig, self.args = orig, args
        self.kills = parse_kills(args.kill)
        self.store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=datetime.timedelta(seconds=60))
        self.backend = "gloo" if args.cpu else "nccl"
        if args.cpu:
            self.device = torch.device("cpu")
        else:
            self.device = torch.device("cuda", orig % torch.cuda.device_count())
            torch.cuda.set_device(self.device)
            torch.backends.cuda.matmul.allow_tf32 = False
        self.members = list(range(nprocs))   # original ranks of the current group, in its rank order
        self.lib = ctypes.CDLL(lib) if lib else None
        if self.lib is not None:
            self.lib.ncclCommGetAsyncError.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
        self.checks = 0
        self.failures = []
        self.deaths_seen = 0
        self.hows = []
        self.threads_before = count_threads()
        self.init_group(self.store, orig, nprocs)
        self.pg = dist.group.WORLD
        self.gen = 0

    def init_group(self, store, rank, size):
        kwargs = dict(backend=self.backend, store=store, rank=rank, world_size=size,
                      timeout=datetime.timedelta(seconds=60))
        if not self.args.cpu:
            kwargs["device_id"] = self.device  # communicators made now (eager), bound to the device
        self.dist.init_process_group(**kwargs)

    def log(self, msg):
        print(f"[rank {self.orig}] {msg}", flush=True)

    def fail(self, name, detail):
        self.failures.append(f"rank {self.orig}: {name}: {detail}")
        self.log(f"FAIL {name}: {detail}")

    # ---- the model and the data: the same on every rank ----
    def make_model(self):
        torch = self.torch
        g = torch.Generator().manual_seed(1234)
        w1 = (torch.randn(HIDDEN, DIM, generator=g) / DIM ** 0.5)
        b1 = torch.zeros(HIDDEN)
        w2 = (torch.randn(1, HIDDEN, generator=g) / HIDDEN ** 0.5)
        b2 = torch.zeros(1)
        return [t.to(self.device).requires_grad_() for t in (w1, b1, w2, b2)]

    def batch(self, step):
        torch = self.torch
        g = torch.Generator().manual_seed(10_000 + step)
        x = torch.randn(BATCH, DIM, generator=g)
        w_true = torch.linspace(-1, 1, DIM)
        y = (x @ w_true).unsqueeze(1).tanh() + 0.01 * torch.randn(BATCH, 1, generator=g)
        return x.to(self.device), y.to(self.device)

    @staticmethod
    def loss_of(params, x, y):
        w1, b1, w2, b2 = params
        h = (x @ w1.t() + b1).relu()
        return ((h @ w2.t() + b2 - y) ** 2).mean()

    # ---- failures ----
    def async_error(self):
        """ncclCommGetAsyncError of the group's communicator (0: none), or None if it cannot be read."""
        if self.lib is None:
            return None
        try:
            backend = self.pg._get_backend(self.device)
            ptr = backend._comm_ptr()
        except Exception:  # noqa: BLE001  (no _comm_ptr in this PyTorch)
            return None
        st = ctypes.c_int(0)
        if self.lib.ncclCommGetAsyncError(ctypes.c_void_p(ptr), ctypes.byref(st)) != 0:
            return -1
        return st.value if st.value != 7 else 0  # 7: ncclInProgress

    def death_published(self):
        return published(self.store, f"dead/{self.deaths_seen + 1}")

    # ---- one step: the gradients all_reduce'd, two exact checks ----
    def step(self, params, step):
        """The step's loss, or a string saying why it failed (no exception is kept: one would keep the failed
        collectives, and with gloo their connections, alive)."""
        torch, dist = self.torch, self.dist
        m, r = len(self.members), self.members.index(self.orig)
        x, y = self.batch(step)
        share = BATCH // m
        for p in params:
            p.grad = None
        loss = self.loss_of(params, x[r * share:(r + 1) * share], y[r * share:(r + 1) * share])
        loss.backward()
        flat = torch.cat([p.grad.flatten() for p in params])
        mine = (torch.arange(CANARY, device=self.device, dtype=torch.int32) % 97) + 1000 * self.orig + step
        gathered = torch.full((m * CANARY,), -7, device=self.device, dtype=torch.int32)  # poisoned
        total = torch.full((CANARY,), (self.orig + 1) * (step + 1), device=self.device, dtype=torch.int32)
        try:
            works = [dist.all_reduce(flat, group=self.pg, async_op=True)]
            if self.args.cpu:  # (gloo of older PyTorch has no all_gather_into_tensor)
                works.append(dist.all_gather(list(gathered.chunk(m)), mine, group=self.pg, async_op=True))
            else:
                works.append(dist.all_gather_into_tensor(gathered, mine, group=self.pg, async_op=True))
            works.append(dist.all_reduce(total, group=self.pg, async_op=True))
            if (self.orig, step) in self.kills:
                publish(self.store, f"at/{self.orig}/{step}", "1")  # the driver kills this rank now
            for w in works:
                w.wait()
            if not self.args.cpu:
                torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001  (DistBackendError, RuntimeError)
            return f"step {step}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        err = self.async_error()
        if err is None and self.death_published():
            err = -2
        if err:
            return f"step {step}: ncclCommGetAsyncError {err}" if err != -2 else f"step {step}: a death was published"
        # exact checks
        want = torch.cat([(torch.arange(CANARY, device=self.device, dtype=torch.int32) % 97) + 1000 * q + step
                          for q in self.members])
        self.checks += 1
        if not torch.equal(gathered, want):
            bad = (gathered != want).nonzero().flatten()
            self.fail("all_gather_into_tensor", f"step {step}, {len(bad)} elements wrong, first at {int(bad[0])}")
        want_total = (step + 1) * sum(q + 1 for q in self.members)
        self.checks += 1
        if not bool((total == want_total).all()):
            self.fail("all_reduce int32", f"step {step}: {total[0].item()}, expected {want_total}")
        # the update: the mean gradient over the global batch
        flat /= m
        at = 0
        with torch.no_grad():
            for p in params:
                n = p.numel()
                p -= LR * flat[at:at + n].view_as(p)
                at += n
        return loss.item()

    # ---- recovery ----
    def recover(self, why):
        torch, dist = self.torch, self.dist
        self.deaths_seen += 1
        k = self.deaths_seen
        # said before the wait: a failure without a death (nothing published)
        # shows here, not only as the wait's timeout a minute later
        self.log(f"{why}; waiting for the driver to publish death {k}")
        self.store.wait([f"dead/{k}"], datetime.timedelta(seconds=60))
        dead = json.loads(self.store.get(f"dead/{k}").decode())
        exclude = [i for i, q in enumerate(self.members) if q in dead]
        survivors = [q for q in self.members if q not in dead]
        self.log(f"{why}; ranks {dead} are dead: excluding group ranks {exclude}")
        how = None
        want_shrink = self.args.how in ("auto", "shrink") and not self.args.cpu
        if want_shrink and hasattr(dist, "shrink_group"):
            c10d = dist.distributed_c10d
            abort_flag = getattr(dist, "SHRINK_ABORT", getattr(c10d, "SHRINK_ABORT", 1))
            try:
                self.pg = dist.shrink_group(exclude, shrink_flags=abort_flag)
                how = "shrink_group"
            except Exception as e:  # noqa: BLE001
                self.log(f"shrink_group failed: {type(e).__name__}: {e}")
                if self.args.how == "shrink":
                    raise
        elif self.args.how == "shrink":
            raise RuntimeError("this PyTorch has no torch.distributed.shrink_group")
        if how is None:
            # abort the old group (its communicator cannot finish anything)
            # and make a new one from the survivors on the same store
            self.pg = None
            abort = getattr(dist.distributed_c10d, "_abort_process_group", None)
            try:
                if abort is not None:
                    abort()
                else:
                    dist.destroy_process_group()
            except Exception as e:  # noqa: BLE001
                self.log(f"releasing the old group: {type(e).__name__}: {e}")
            self.gen += 1
            self.init_group(dist.PrefixStore(f"reinit{self.gen}", self.store), survivors.index(self.orig),
                            len(survivors))
            self.pg = dist.group.WORLD
            how = "a new process group"
        self.members = survivors
        self.hows.append(how)
        publish(self.store, f"how/{k}/{self.orig}", how)
        if self.pg.size() != len(survivors) or self.pg.rank() != survivors.index(self.orig):
            self.fail("new group", f"size {self.pg.size()} rank {self.pg.rank()}, expected {len(survivors)} and "
                                   f"{survivors.index(self.orig)}")
        return k

    def run(self):
        torch, dist = self.torch, self.dist
        params = self.make_model()
        saved = {-1: [p.detach().clone() for p in params]}   # parameters after each completed step
        step, first_loss, last_loss, pending = 0, None, None, None
        while step < self.args.steps:
            loss = self.step(params, step)
            if isinstance(loss, str):
                pending = self.recover(loss)
                # the last step every survivor completed: MIN over the new group
                done = torch.tensor([step - 1], device=self.device, dtype=torch.int64)
                dist.all_reduce(done, op=dist.ReduceOp.MIN, group=self.pg)
                back = int(done.item())
                if back not in saved:
                    raise RuntimeError(f"no parameters kept for step {back}")
                with torch.no_grad():
                    for p, s in zip(params, saved[back]):
                        p.copy_(s)
                self.log(f"recovered by {self.hows[-1]}: {len(self.members)} ranks go on from step {back + 1}")
                step = back + 1
                continue
            if pending is not None:  # the first step that succeeded after a recovery
                publish(self.store, f"recovered/{pending}/{self.orig}", repr(time.monotonic()))
                pending = None
            saved[step] = [p.detach().clone() for p in params]
            saved.pop(step - 4, None)
            first_loss = loss if first_loss is None else first_loss
            last_loss = loss
            step += 1
        # the same steps in one process, on the full batch
        ref = self.make_model()
        for s in range(self.args.steps):
            x, y = self.batch(s)
            for p in ref:
                p.grad = None
            self.loss_of(ref, x, y).backward()
            with torch.no_grad():
                for p in ref:
                    p -= LR * p.grad
        worst = 0.0
        ok = True
        for p, q in zip(params, ref):
            ok = ok and torch.allclose(p, q, rtol=1e-4, atol=1e-5)
            worst = max(worst, ((p - q).abs() / (q.abs() + 1e-5)).max().item())
        self.checks += 1
        if not ok:
            self.fail("final weights", f"differ from the full-batch run (worst relative difference {worst:.2e})")
        threads_live = count_threads()
        dist.destroy_process_group()
        self.log(f"done: {len(self.members)} ranks, loss {first_loss:.4f} -> {last_loss:.4f}, weights vs full batch "
                 f"{worst:.1e}, threads {self.threads_before} before init, {threads_live} with the last group")
        return worst


def worker_main(args):
    import faulthandler
    faulthandler.register(signal.SIGUSR2, all_threads=True)  # the driver asks for stacks when this rank hangs
    orig, port, lib = int(args.worker[0]), int(args.worker[1]), args.worker[2]
    rank = None
    result = {"checks": 0, "failures": []}
    try:
        rank = Rank(orig, args.nprocs, port, lib, args)
        result["worst"] = rank.run()
    except Exception:  # noqa: BLE001
        msg = f"rank {orig}: exception: {traceback.format_exc()}"
        print(msg, flush=True)
        result["failures"].append(msg.replace("\n", " | "))
    if rank is not None:
        result["checks"] = rank.checks
        result["failures"] += rank.failures
        result["hows"] = rank.hows
        try:
            publish(rank.store, f"result/{orig}", json.dumps(result))
        except Exception:  # noqa: BLE001
            pass
    sys.stdout.flush()
    os._exit(0)  # the driver reads the result from the store


# ---------------------------------------------------------------------------------------------------------------
# the driver


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def mps_running(pipe_dir):
    return os.path.exists(os.path.join(pipe_dir, "control"))


def maybe_start_mps(args, ngpus):
    if args.nprocs <= ngpus:
        return None
    pipe = os.environ.get("CUDA_MPS_PIPE_DIRECTORY") or (
        "/tmp/nvidia-mps" if mps_running("/tmp/nvidia-mps") else "/tmp/mps")
    if mps_running(pipe):
        os.environ["CUDA_MPS_PIPE_DIRECTORY"] = pipe
        return None
    if not args.mps:
        print(f"WARNING: {args.nprocs} ranks on {ngpus} GPU(s) without CUDA MPS: pass --mps", flush=True)
        return None
    ctl = shutil.which("nvidia-cuda-mps-control")
    if ctl is None:
        print("WARNING: --mps: nvidia-cuda-mps-control not found", flush=True)
        return None
    log = os.environ.get("CUDA_MPS_LOG_DIRECTORY", "/tmp/mpslog")
    os.makedirs(pipe, exist_ok=True)
    os.makedirs(log, exist_ok=True)
    os.environ["CUDA_MPS_PIPE_DIRECTORY"] = pipe
    os.environ["CUDA_MPS_LOG_DIRECTORY"] = log
    subprocess.run([ctl, "-d"], check=True)
    for _ in range(200):
        if mps_running(pipe):
            break
        time.sleep(0.1)
    return ctl


def drive(args, lib):
    import torch
    import torch.distributed as dist
    kills = parse_kills(args.kill)
    if len({r for r, _ in kills}) != len(kills) or len(kills) >= args.nprocs or any(
            not 0 <= r < args.nprocs or not 0 < s < args.steps for r, s in kills):
        sys.exit(f"--kill {args.kill}: distinct ranks of 0..{args.nprocs - 1}, fewer than --nprocs, at steps "
                 f"1..{args.steps - 1}")
    port = free_port()
    store = dist.TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False,
                          timeout=datetime.timedelta(seconds=60))
    rng = random.Random(args.seed)
    t0 = time.monotonic()
    deadline = t0 + args.timeout
    procs = {r: subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", str(r), str(port), lib or "",
                                  "--nprocs", str(args.nprocs), "--steps", str(args.steps), "--kill", args.kill,
                                  "--how", args.how] + (["--cpu"] if args.cpu else []),
                                 env=dict(os.environ, MSCCLPP_REPORT=os.environ.get("MSCCLPP_REPORT", "1")))
             for r in range(args.nprocs)}
    ok = True
    dead, killed_at = [], []
    for victim, kstep in kills:
        key = f"at/{victim}/{kstep}"
        while not published(store, key):
            if procs[victim].poll() is not None or time.monotonic() > deadline:
                print(f"FAIL: rank {victim} never reached step {kstep}", flush=True)
                ok = False
                break
            time.sleep(0.001)
        if not ok:
            break
        delay = rng.uniform(0, 0.003)
        time.sleep(delay)
        t_kill = time.monotonic()
        os.kill(procs[victim].pid, signal.SIGKILL)
        procs[victim].wait()
        dead.append(victim)
        killed_at.append(t_kill)
        publish(store, f"dead/{len(dead)}", json.dumps(dead))
        print(f"driver: SIGKILL to rank {victim} {delay * 1e3:.2f} ms after it enqueued step {kstep} "
              f"(seed {args.seed})", flush=True)
    hung = []
    for r, p in procs.items():
        left = max(1.0, deadline - time.monotonic())
        try:
            p.wait(timeout=left)
        except subprocess.TimeoutExpired:
            hung.append(r)
    if hung:
        # what each hung rank waits for before it goes: our library's hang
        # report (SIGUSR1, MSCCLPP_REPORT=1) and every Python thread's stack
        # (SIGUSR2, faulthandler)
        for r in hung:
            print(f"FAIL: rank {r} still running after {args.timeout:.0f} s (a hang): its reports, then kill",
                  flush=True)
            for sig in (signal.SIGUSR1, signal.SIGUSR2):
                try:
                    procs[r].send_signal(sig)
                except OSError:
                    pass
        time.sleep(2)
        # the native threads' stacks (where the host waits: a CUDA call, a
        # lock, PyTorch's watchdog), where gdb is installed
        for r in hung:  # without gdb: each thread's name, state and kernel wait channel
            rows = []
            for tid in sorted(os.listdir(f"/proc/{procs[r].pid}/task")) if os.path.isdir(f"/proc/{procs[r].pid}") else ():
                def rd(what, tid=tid):
                    try:
                        with open(f"/proc/{procs[r].pid}/task/{tid}/{what}") as f:
                            return f.read().strip()
                    except OSError:
                        return "?"
                state = next((l.split(":", 1)[1].strip() for l in rd("status").splitlines() if l.startswith("State:")), "?")
                rows.append(f"  {tid} {rd('comm'):<16} {state:<14} wchan={rd('wchan')}")
            print(f"---- rank {r}: threads\n" + "\n".join(rows), flush=True)
        gdb = shutil.which("gdb")
        for r in hung if gdb else ():
            try:
                out = subprocess.run([gdb, "-batch", "-nx", "-p", str(procs[r].pid), "-ex", "thread apply all bt 25"],
                                     capture_output=True, text=True, timeout=30).stdout
            except (OSError, subprocess.SubprocessError) as e:
                out = f"gdb: {e}"
            print(f"---- rank {r}: native stacks (gdb)", flush=True)
            print("\n".join(l for l in out.splitlines() if l.startswith(("#", "Thread"))), flush=True)
        # a client of the MPS server that faults takes the others down with it:
        # the server's log says whether it did
        mps_logs = os.environ.get("CUDA_MPS_LOG_DIRECTORY", "/tmp/mpslog")
        for name in ("server.log", "control.log"):
            try:
                with open(os.path.join(mps_logs, name)) as f:
                    tail = f.readlines()[-40:]
            except OSError:
                continue
            print(f"---- {name} (last {len(tail)} lines)", flush=True)
            print("".join(tail), end="", flush=True)
        for r in hung:
            procs[r].kill()
            procs[r].wait()
        ok = False
    checks, fails, hows, worst = 0, [], [], 0.0
    for r in range(args.nprocs):
        if r in dead:
            continue
        if not published(store, f"result/{r}"):
            fails.append(f"rank {r}: no result (crashed or hung)")
            continue
        res = json.loads(store.get(f"result/{r}").decode())
        checks += res["checks"]
        fails += res["failures"]
        hows.append(tuple(res.get("hows", [])))
        worst = max(worst, res.get("worst", 0.0))
    times = []
    for k, t_kill in enumerate(killed_at, start=1):
        survivors = [r for r in range(args.nprocs) if r not in dead[:k]]
        keys = [f"recovered/{k}/{r}" for r in survivors]
        if all(published(store, key) for key in keys):
            times.append(max(float(store.get(key).decode()) for key in keys) - t_kill)
        else:
            times.append(None)
    ok = ok and not fails and len(set(hows)) == 1 and all(t is not None for t in times)
    how = hows[0] if hows else ()
    print(f"torch_shrink: torch {torch.__version__}, {args.nprocs} ranks, {args.steps} steps, "
          + ", ".join(f"rank {r} killed at step {s}" for r, s in kills) + ": "
          + ("PASS" if ok else "FAIL") + f", {checks} checks passed" + (f", {len(fails)} failed" if fails else ""),
          flush=True)
    for k, (t, (r, s)) in enumerate(zip(times, kills)):
        by = how[k] if k < len(how) else "?"
        print(f"torch_shrink: kill of rank {r} at step {s} -> first step on every survivor "
              + (f"{t:.3f} s" if t is not None else "never") + f" (by {by})", flush=True)
    print(f"torch_shrink: final weights vs a full-batch run in one process: worst relative difference {worst:.1e}",
          flush=True)
    for f in fails[:10]:
        print("   " + f, flush=True)
    return ok


def main():
    args = parse_args()
    if args.worker:
        os.environ.setdefault("MSCCLPP_TIMEOUT", "30")
        worker_main(args)
        return
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    lib = None if args.cpu else os.path.abspath(args.lib or os.path.join(repo, "build", "src", "nccl",
                                                                          "libmscclpp_nccl.so"))
    if lib is not None and not os.path.exists(lib):
        sys.exit(f"{lib} not found: build it, or pass --lib")
    if lib is not None and os.environ.get(REEXEC_FLAG) != "1":
        env = dict(os.environ)
        env["LD_PRELOAD"] = (lib + " " + env.get("LD_PRELOAD", "")).strip()
        env[REEXEC_FLAG] = "1"
        # PyTorch's watchdog must report a failed communicator, not end the process
        env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "0"
        # For every work it finds failed, PyTorch's watchdog sleeps 4 x this
        # (default 15 s, a wait for flight-recorder dumps), and destroying or
        # aborting the failed group waits for the watchdog. It lags the GPU by
        # tens of works (it queries their events between the main thread's
        # synchronizations), and each unretired work of the failed
        # communicator counts as failed: a minute each, an hour in all, by
        # default. A job that means to go on after a death sets it short.
        env.setdefault("TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC", "1")
        # A rank whose watchdog finds a failed work posts a "dump" signal in the
        # store; every other rank's heartbeat monitor that sees it dumps, then
        # sleeps TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC (8 minutes) and ends the
        # process, and destroying the old group joins that monitor: a survivor
        # that saw it hangs in shrink_group (seen on the H100). Off for a job
        # that goes on.
        env.setdefault("TORCH_NCCL_DUMP_ON_TIMEOUT", "0")
        os.execve(sys.executable, [sys.executable] + sys.argv, env)
    import torch
    if not args.cpu and not torch.cuda.is_available():
        print("SKIPPED: no GPU")
        sys.exit(77)
    ngpus = 0 if args.cpu else torch.cuda.device_count()
    print(f"torch {torch.__version__}, {ngpus} GPU(s), library {lib or '(none: gloo on the CPU)'}, shrink_group "
          f"{'present' if hasattr(torch.distributed, 'shrink_group') else 'absent'}", flush=True)
    ctl = None if args.cpu else maybe_start_mps(args, ngpus)
    try:
        ok = drive(args, lib)
    finally:
        if ctl is not None:
            subprocess.run([ctl], input=b"quit\n")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
