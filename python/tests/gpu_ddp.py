#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""DistributedDataParallel through mscclpp, against one process on the full batch.

    python3 python/tests/gpu_ddp.py --nprocs 2,4 --mscclpp-lib build/libmscclpp.so
    python3 python/tests/gpu_ddp.py --nprocs 2,4 --backend nccl --nccl-lib build/src/nccl/libmscclpp_nccl.so

Without a launcher's environment this script is the driver: for each rank
count it starts the ranks under ``mscclpp-run -n N --mps`` (or ``torchrun``
with ``--launcher torchrun``) and prints one line per rank count,
``gpu_ddp: N ranks, backend B: PASS`` or ``FAIL``; the exit status is 0 when
every rank count passed. Under a launcher (``MSCCLPP_RANK`` from
mscclpp-run, or ``RANK`` from torchrun) it is a rank.

Each rank trains the same small MLP (32-64-64-1, tanh; fixed seed; SGD with
momentum; float32 with TF32 off and deterministic algorithms) for --steps
steps, wrapped in DDP over ``init_process_group(B)``: backend "mscclpp" is
mscclpp's own torch.distributed backend (``import mscclpp.torch``), backend
"nccl" is PyTorch's NCCL backend served by ``libmscclpp_nccl.so`` (the
driver preloads it into the ranks; a rank checks that the NCCL functions
resolve to that file and fails otherwise). Rank r takes rows
[16r, 16r + 16) of every global batch of 16 N rows (fixed data from a seeded
generator). Rank 0 also trains a copy on the full batches without any
communication: the reference.

Checked on rank 0, with every rank's values gathered through the store (not
through the backend under test):
  - each step's loss (the mean of the ranks' shard losses, in float64)
    equals the reference's within |d| <= ATOL + RTOL |ref| (ATOL 1e-5,
    RTOL 1e-4): only the order of the gradient sums differs, which moves the
    losses by ~1e-6 relative; a missing or wrong gradient reduction moves
    them by >1e-2 (a control shows it: the same steps without any gradient
    exchange must miss the reference by more than 10x the tolerance, or the
    check could not tell);
  - the final weights equal the reference's within the same tolerance;
  - every rank holds bit-identical weights (SHA-256 of their bytes).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

RTOL = 1e-4
ATOL = 1e-5
PER_RANK = 16
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nprocs", default="2,4", help="driver: comma list of rank counts (default 2,4)")
    p.add_argument("--backend", default="mscclpp", choices=["mscclpp", "nccl"],
                   help="mscclpp: mscclpp's torch.distributed backend; nccl: PyTorch's NCCL backend on the shim")
    p.add_argument("--mscclpp-lib", default=None, help="libmscclpp.so for backend mscclpp (MSCCLPP_LIBRARY)")
    p.add_argument("--nccl-lib", default=None, help="libmscclpp_nccl.so for backend nccl (preloaded into the ranks)")
    p.add_argument("--launcher", default="mscclpp-run", choices=["mscclpp-run", "torchrun"])
    p.add_argument("--mscclpp-run", default=None, help="path of mscclpp-run (default: PATH, then build trees)")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--timeout", type=float, default=150, help="seconds per rank count before it counts as hung")
    return p.parse_args()


# ---------------------------------------------------------------------------------------------------------------
# a rank


def launcher_env():
    """(rank, size, local rank, init_method) from mscclpp-run or torchrun."""
    if "MSCCLPP_RANK" in os.environ:
        rank, size = int(os.environ["MSCCLPP_RANK"]), int(os.environ["MSCCLPP_NRANKS"])
        local = int(os.environ.get("MSCCLPP_LOCAL_RANK", rank))
        # a store in a file named by the run's secret: no port to agree on
        secret = os.environ.get("MSCCLPP_COMM_SECRET", "")[:16] or os.environ["MSCCLPP_COMM_ID"].replace(":", "_")
        return rank, size, local, f"file:///tmp/mscclpp-gpu-ddp-{secret}"
    if "RANK" in os.environ:
        return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ.get("LOCAL_RANK", 0)), "env://"
    return None


def ours_resolved(lib):
    """Empty if the process's NCCL symbols are those of `lib`, else why not."""
    import ctypes
    path = os.path.realpath(lib)
    with open("/proc/self/maps") as f:
        mapped = {os.path.realpath(line.split()[-1]) for line in f if len(line.split()) >= 6}
    if path not in mapped:
        return f"{path} is not mapped (LD_PRELOAD={os.environ.get('LD_PRELOAD', '')!r})"
    glob, mine = ctypes.CDLL(None), ctypes.CDLL(path)
    for sym in ("ncclAllReduce", "ncclCommInitRankConfig"):
        a = ctypes.cast(getattr(glob, sym), ctypes.c_void_p).value
        b = ctypes.cast(getattr(mine, sym), ctypes.c_void_p).value
        if a != b:
            return f"{sym} resolves to {a:#x}, not to {path}'s {b:#x}"
    return ""


def rank_main(args, rank, size, local, init_method):
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # before CUDA starts: deterministic cuBLAS
    import datetime

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    tag = f"gpu_ddp: {size} ranks, backend {args.backend}"
    device = torch.device("cuda", local % torch.cuda.device_count())
    torch.cuda.set_device(device)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.use_deterministic_algorithms(True, warn_only=True)
    problems = []
    if args.backend == "mscclpp":
        sys.path.insert(0, os.path.join(REPO, "python"))
        import mscclpp.torch  # noqa: F401  (registers the backend)
    elif args.nccl_lib:
        why = ours_resolved(args.nccl_lib)
        if why:
            problems.append(f"rank {rank}: the NCCL shim is not in use: {why}")
    dist.init_process_group(args.backend, init_method=init_method, rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=60))
    store = dist.distributed_c10d._get_default_store()
    if dist.get_backend() != args.backend:
        problems.append(f"rank {rank}: the default group's backend is {dist.get_backend()}, not {args.backend}")

    def make_model():
        torch.manual_seed(1234)
        return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64),
                                   torch.nn.Tanh(), torch.nn.Linear(64, 1)).to(device)

    steps, global_batch = args.steps, PER_RANK * size
    gen = torch.Generator().manual_seed(99)
    data = torch.randn(steps, global_batch, 32, generator=gen).to(device)
    target = torch.randn(steps, global_batch, 1, generator=gen).to(device)
    shard = slice(rank * PER_RANK, (rank + 1) * PER_RANK)

    def train(model, rows):
        """Per-step losses and the final weights (flat) of `steps` SGD steps."""
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        losses = []
        for s in range(steps):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(data[s][rows]), target[s][rows])
            loss.backward()
            opt.step()
            losses.append(loss.item())
        module = model.module if isinstance(model, DDP) else model
        return losses, torch.cat([p.detach().flatten() for p in module.parameters()])

    t0 = time.time()
    ddp = DDP(make_model(), device_ids=[device.index], bucket_cap_mb=1)
    losses, weights = train(ddp, shard)
    torch.cuda.synchronize()
    took = time.time() - t0
    control, _ = train(make_model(), shard)  # the same steps with no gradient exchange
    digest = hashlib.sha256(bytes(weights.detach().cpu().contiguous().view(torch.uint8).tolist())).hexdigest()
    store.set(f"gpu_ddp/{rank}", json.dumps({"losses": losses, "control": control, "digest": digest,
                                             "problems": problems}))
    verdict = None
    if rank == 0:
        ref_losses, ref_weights = train(make_model(), slice(0, global_batch))
        got = [json.loads(store.get(f"gpu_ddp/{r}")) for r in range(size)]
        for g in got:
            problems += g["problems"]
        mean = [sum(g["losses"][s] for g in got) / size for s in range(steps)]
        ctl = [sum(g["control"][s] for g in got) / size for s in range(steps)]
        tol = [ATOL + RTOL * abs(v) for v in ref_losses]
        diff = [abs(a - b) for a, b in zip(mean, ref_losses)]
        ctl_diff = [abs(a - b) for a, b in zip(ctl, ref_losses)]
        print(f"{tag}: step  DDP loss      reference     |diff|     no-exchange control", flush=True)
        for s in range(steps):
            print(f"{tag}: {s:4d}  {mean[s]:.9f}  {ref_losses[s]:.9f}  {diff[s]:.2e}  {ctl[s]:.9f}", flush=True)
        if any(d > t for d, t in zip(diff, tol)):
            bad = [s for s in range(steps) if diff[s] > tol[s]]
            problems.append(f"losses differ from the reference beyond |d| <= {ATOL:g} + {RTOL:g}|ref| at steps {bad}")
        if max(ctl_diff) <= 10 * max(tol):
            problems.append(f"the control (no gradient exchange) stays within {max(ctl_diff):.2e} of the reference: "
                            "this check could not tell a missing reduction")
        wdiff = (weights - ref_weights).abs().max().item()
        if not torch.allclose(weights, ref_weights, rtol=RTOL, atol=ATOL):
            problems.append(f"final weights differ from the reference by up to {wdiff:.3e}")
        digests = {g["digest"] for g in got}
        if len(digests) != 1:
            problems.append(f"the ranks' weights differ ({len(digests)} different SHA-256 over {size} ranks)")
        verdict = "PASS" if not problems else "FAIL"
        print(f"{tag}: worst loss difference {max(diff):.2e} (tolerance {ATOL:g} + {RTOL:g}|ref|), control "
              f"{max(ctl_diff):.2e}, weights {wdiff:.2e}, {steps} steps in {took:.2f} s", flush=True)
        for p in problems:
            print(f"{tag}: FAIL: {p}", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        print(f"gpu_ddp RESULT {verdict}: {size} ranks, backend {args.backend}", flush=True)
        sys.exit(0 if verdict == "PASS" else 1)


# ---------------------------------------------------------------------------------------------------------------
# the driver


def find_mscclpp_run(args):
    if args.mscclpp_run:
        return args.mscclpp_run
    found = shutil.which("mscclpp-run")
    if found:
        return found
    for d in (".carry/gpu", "build/tools", "build-gpu/tools"):
        cand = os.path.join(REPO, d, "mscclpp-run")
        if os.access(cand, os.X_OK):
            return cand
    sys.exit("gpu_ddp: mscclpp-run not found (PATH, .carry/gpu, build/tools): pass --mscclpp-run or --launcher torchrun")


def driver(args):
    env = dict(os.environ)
    for k in ("MSCCLPP_RANK", "RANK", "WORLD_SIZE", "LOCAL_RANK"):
        env.pop(k, None)
    me = os.path.abspath(__file__)
    rank_args = ["--backend", args.backend, "--steps", str(args.steps)]
    pre = []
    if args.backend == "mscclpp":
        if args.mscclpp_lib:
            env["MSCCLPP_LIBRARY"] = os.path.abspath(args.mscclpp_lib)
        env["PYTHONPATH"] = os.path.join(REPO, "python") + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    else:
        lib = os.path.abspath(args.nccl_lib or os.path.join(REPO, "build", "src", "nccl", "libmscclpp_nccl.so"))
        if not os.path.exists(lib):
            sys.exit(f"gpu_ddp: {lib} not found: pass --nccl-lib")
        rank_args += ["--nccl-lib", lib]
        # preloaded into the ranks only, not into the launcher
        pre = ["env", f"LD_PRELOAD={lib} {env.get('LD_PRELOAD', '')}".strip()]
    results = []
    for n in [int(v) for v in args.nprocs.split(",") if v]:
        if args.launcher == "torchrun":
            cmd = pre + [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={n}", me]
        else:
            cmd = [find_mscclpp_run(args), "-n", str(n), "--mps", "--timeout", str(int(args.timeout))] + pre + [
                sys.executable, me]
        cmd += rank_args
        print(f"gpu_ddp: {' '.join(cmd)}", flush=True)
        t0 = time.time()
        try:
            p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=args.timeout + 30)
            out, rc = p.stdout, p.returncode
        except subprocess.TimeoutExpired as e:
            out, rc = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""), "hung"
        sys.stdout.write(out)
        ok = rc == 0 and f"gpu_ddp RESULT PASS: {n} ranks" in out
        results.append((n, ok))
        print(f"gpu_ddp: {n} ranks, backend {args.backend}: {'PASS' if ok else 'FAIL'} "
              f"(exit status {rc}, {time.time() - t0:.1f} s)", flush=True)
    sys.exit(0 if results and all(ok for _, ok in results) else 1)


def main():
    args = parse_args()
    env = launcher_env()
    if env is None:
        driver(args)
    else:
        rank_main(args, *env)


if __name__ == "__main__":
    main()
