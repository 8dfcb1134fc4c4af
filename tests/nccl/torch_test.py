#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""PyTorch (torch.distributed, backend "nccl") on libmscclpp_nccl.so.

Run on a GPU machine (ranks share the GPUs round-robin; several ranks on
one GPU need CUDA MPS, which --mps starts when it is not running):

    python3 tests/nccl/torch_test.py --lib build/src/nccl/libmscclpp_nccl.so \
        --nprocs 2,4 --mps

The script re-executes itself with LD_PRELOAD=<lib> (so that libtorch's
libnccl.so.2 dependency is served by our library: its SONAME is
libnccl.so.2) and, for each rank count and each init mode, spawns the ranks
(torch.multiprocessing, start method "spawn"), which check in order:

  - the library in use is ours (/proc/self/maps) and reports NCCL 2.28.9;
  - all_reduce (sum, max, min, avg, premul_sum), all_gather_into_tensor,
    all_gather (list), reduce_scatter_tensor, reduce_scatter (list, sum
    and max), broadcast, reduce, all_to_all_single (no split sizes, 1-D
    and 2-D; equal and uneven split sizes), all_to_all (lists), send/recv
    (pairs), batch_isend_irecv (ring), gather, scatter, barrier (no rank
    leaves before all entered, seen through the store), new_group (split:
    halves and even ranks) with collectives on it, destroy_process_group
    of the groups and of the world, coalesced collectives -- in float32
    and bfloat16, sizes from 1 element to 4 Mi elements, every result
    compared exactly (values are small integers, exact in both types);
  - rank 0 calls all_reduce and all_gather before the others may (they
    wait for its word through the store): no call waits for the peers'
    host threads, as with NCCL;
  - a short DDP training loop of a small MLP whose per-step loss and final
    weights match a single-process run of the same steps on the full batch
    (float32, TF32 off; tolerance rtol 1e-4, atol 1e-5: only the order of
    the gradient sums differs -- shards of 8 vs the full batch -- which moves
    results by ~1e-6 relative; a wrong reduction moves them by >1e-2).

Mode "python-backend" runs the same checks through mscclpp's own
torch.distributed backend (python/mscclpp/torch.py, init_process_group
("mscclpp")) instead of the NCCL shim: pass --no-preload and --mscclpp-lib
(libmscclpp.so). premul_sum is left out there (that backend refuses it).

Init modes: "eager" (init_process_group(device_id=...): communicators made
at once, new_group by ncclCommSplit) and "lazy-nonblocking" (communicators
made at the first collective, TORCH_NCCL_USE_COMM_NONBLOCKING=1: nonblocking
init polled with ncclCommGetAsyncError, new_group by a new unique id).

Exit status 0 when every check of every run passed. Each run is bounded
(--timeout, default 300 s): a hang is a failure, not a stuck job.
"""
import argparse
import datetime
import os
import shutil
import socket
import subprocess
import sys
import time
import traceback

REEXEC_FLAG = "MSCCLPP_TORCH_TEST_CHILD"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lib", default=None, help="path of libmscclpp_nccl.so (default: build/src/nccl/ next to the repo)")
    p.add_argument("--nprocs", default="2,4", help="comma list of rank counts (default 2,4)")
    p.add_argument("--modes", default="eager,lazy-nonblocking", help="init modes to run")
    p.add_argument("--timeout", type=float, default=300, help="seconds per run before it counts as hung")
    p.add_argument("--mps", action="store_true", help="start the CUDA MPS daemon if ranks share a GPU and none runs")
    p.add_argument("--skip-ddp", action="store_true", help="skip the DDP training check")
    p.add_argument("--mscclpp-lib", default=None,
                   help="libmscclpp.so, for mode python-backend (mscclpp's own torch.distributed backend)")
    p.add_argument("--no-preload", action="store_true",
                   help="do not LD_PRELOAD the library (to run the same checks on NVIDIA's NCCL, for comparison)")
    return p.parse_args()


# ---------------------------------------------------------------------------------------------------------------
# helpers used by the ranks


class Checker:
    def __init__(self, rank):
        self.rank = rank
        self.failures = []
        self.passed = 0

    def equal(self, name, got, want):
        import torch
        ok = got.dtype == want.dtype and got.shape == want.shape and torch.equal(got.cpu(), want.cpu())
        if ok:
            self.passed += 1
            return True
        diff = ""
        try:
            g = got.float().cpu().flatten()
            w = want.float().cpu().flatten()
            if g.shape == w.shape:
                bad = (g != w).nonzero().flatten()
                i = int(bad[0]) if len(bad) else -1
                diff = f"{len(bad)} of {g.numel()} differ; first at {i}: got {g[i].item()} want {w[i].item()}"
            else:
                diff = f"shapes {tuple(got.shape)} vs {tuple(want.shape)}"
        except Exception as e:  # noqa: BLE001
            diff = f"(could not compare: {e})"
        self.fail(name, f"{got.dtype} {diff}")
        return False

    def true(self, name, cond, detail=""):
        if cond:
            self.passed += 1
        else:
            self.fail(name, detail)
        return cond

    def fail(self, name, detail):
        msg = f"rank {self.rank}: FAIL {name}: {detail}"
        print(msg, flush=True)
        self.failures.append(msg)


def mapped_libraries():
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and "nccl" in parts[-1]:
                libs.add(os.path.realpath(parts[-1]))
    return libs


def values(n, rank, dtype, device, scale=1):
    """Small integers (exact in bfloat16 and float32): (i % 8 + rank) * scale."""
    import torch
    base = (torch.arange(n, device=device) % 8 + rank) * scale
    return base.to(dtype)


def check_collectives(ck, rank, world, device, dtype):
    import torch
    import torch.distributed as dist
    W = world
    sizes = [1, 7, 1000, 65536 + 3, 1 << 22]  # the last: 4 Mi elements (16 MiB fp32)
    tag = str(dtype).replace("torch.", "")
    for n in sizes:
        # all_reduce: sum, max, min, avg; in place
        x = values(n, rank, dtype, device)
        idx = torch.arange(n, device=device) % 8
        t = x.clone()
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        ck.equal(f"all_reduce sum {tag} n={n}", t, (idx * W + W * (W - 1) // 2).to(dtype))
        t = x.clone()
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        ck.equal(f"all_reduce max {tag} n={n}", t, (idx + W - 1).to(dtype))
        t = x.clone()
        dist.all_reduce(t, op=dist.ReduceOp.MIN)
        ck.equal(f"all_reduce min {tag} n={n}", t, idx.to(dtype))
        # avg of W*(i%8) + W*rank: W*(i%8) + W*(W-1)/2, an integer
        t = (idx * W + W * rank).to(dtype)
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        ck.equal(f"all_reduce avg {tag} n={n}", t, (idx * W + W * (W - 1) // 2).to(dtype))
        # premul_sum in bfloat16 is left out: PyTorch 2.11 hands NCCL a *float*
        # scalar for bfloat16 (unpackPreMulSum<float, ncclBfloat16>), and NCCL
        # (like this library) reads ncclTypeSize(bfloat16) = 2 bytes of it,
        # the low half of the float: 0 for 0.5. Same result on NVIDIA's NCCL.
        premul = dist.get_backend() == "nccl" and hasattr(dist, "_make_nccl_premul_sum")
        if n <= 65536 + 3 and premul and dtype != torch.bfloat16:
            t = (idx * 2).to(dtype)
            dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5))  # sum of 0.5 * 2 * (i % 8)
            ck.equal(f"all_reduce premul_sum {tag} n={n}", t, (idx * W).to(dtype))

        # all_gather_into_tensor and all_gather (list)
        out = torch.empty(n * W, dtype=dtype, device=device)
        dist.all_gather_into_tensor(out, x)
        want = torch.cat([values(n, r, dtype, device) for r in range(W)])
        ck.equal(f"all_gather_into_tensor {tag} n={n}", out, want)
        if n <= 1000:
            outs = [torch.empty(n, dtype=dtype, device=device) for _ in range(W)]
            dist.all_gather(outs, x)
            ck.equal(f"all_gather list {tag} n={n}", torch.cat(outs), want)

        # reduce_scatter_tensor (sum): input W*n, block r to rank r
        inp = torch.cat([values(n, rank + r, dtype, device) for r in range(W)])
        out = torch.empty(n, dtype=dtype, device=device)
        dist.reduce_scatter_tensor(out, inp, op=dist.ReduceOp.SUM)
        ck.equal(f"reduce_scatter_tensor {tag} n={n}", out, (idx * W + W * rank + W * (W - 1) // 2).to(dtype))
        if n <= 1000:
            # reduce_scatter (list): the same blocks as W separate tensors, and with MAX
            out = torch.full((n,), -1, dtype=dtype, device=device)
            dist.reduce_scatter(out, list(inp.chunk(W)), op=dist.ReduceOp.SUM)
            ck.equal(f"reduce_scatter list {tag} n={n}", out, (idx * W + W * rank + W * (W - 1) // 2).to(dtype))
            out = torch.full((n,), -1, dtype=dtype, device=device)
            dist.reduce_scatter(out, list(inp.chunk(W)), op=dist.ReduceOp.MAX)
            ck.equal(f"reduce_scatter list max {tag} n={n}", out, (idx + W - 1 + rank).to(dtype))

        # broadcast from the last rank
        src = W - 1
        t = values(n, rank, dtype, device) if rank == src else torch.full((n,), -1, dtype=dtype, device=device)
        dist.broadcast(t, src=src)
        ck.equal(f"broadcast {tag} n={n}", t, values(n, src, dtype, device))

        # reduce (sum) to rank 1 % W
        dst = 1 % W
        t = x.clone()
        dist.reduce(t, dst=dst, op=dist.ReduceOp.SUM)
        if rank == dst:
            ck.equal(f"reduce {tag} n={n}", t, (idx * W + W * (W - 1) // 2).to(dtype))

        # all_to_all_single, equal splits: block p of rank r holds r*16 + p (+ i % 4)
        if n <= 65536 + 3:
            blk = torch.arange(n, device=device) % 4
            inp = torch.cat([(blk + rank * 16 + p).to(dtype) for p in range(W)])
            out = torch.empty_like(inp)
            dist.all_to_all_single(out, inp)
            want = torch.cat([(blk + r * 16 + rank).to(dtype) for r in range(W)])
            ck.equal(f"all_to_all_single {tag} n={n}", out, want)
            # all_to_all (lists of W tensors): the same blocks, each its own tensor
            outs = [torch.full((n,), -1, dtype=dtype, device=device) for _ in range(W)]
            dist.all_to_all(outs, list(inp.chunk(W)))
            ck.equal(f"all_to_all list {tag} n={n}", torch.cat(outs), want)

    # all_to_all_single without split sizes on a 2-D tensor (rows split evenly)
    rows = 3 * W
    inp = (torch.arange(rows * 5, device=device).reshape(rows, 5) % 64 + 64 * rank).to(dtype)
    out = torch.full_like(inp, -1)
    dist.all_to_all_single(out, inp)
    want = torch.cat([((torch.arange(rows * 5, device=device).reshape(rows, 5) % 64 + 64 * r).to(dtype))[
        3 * rank:3 * rank + 3] for r in range(W)])
    ck.equal(f"all_to_all_single 2-D {tag}", out, want)

    # all_to_all_single with uneven splits: rank r sends (p + 1) * (r + 1) elements to p
    in_splits = [(p + 1) * (rank + 1) for p in range(W)]
    out_splits = [(rank + 1) * (r + 1) for r in range(W)]
    inp = torch.cat([torch.full((in_splits[p],), rank * 10 + p, dtype=dtype, device=device) for p in range(W)])
    out = torch.empty(sum(out_splits), dtype=dtype, device=device)
    dist.all_to_all_single(out, inp, output_split_sizes=out_splits, input_split_sizes=in_splits)
    want = torch.cat([torch.full((out_splits[r],), r * 10 + rank, dtype=dtype, device=device) for r in range(W)])
    ck.equal(f"all_to_all_single uneven {tag}", out, want)

    # send/recv between pairs (2k, 2k+1); an odd last rank sits out
    partner = rank ^ 1
    if partner < W:
        mine = values(4099, rank, dtype, device)
        got = torch.empty_like(mine)
        if rank < partner:
            dist.send(mine, dst=partner)
            dist.recv(got, src=partner)
        else:
            dist.recv(got, src=partner)
            dist.send(mine, dst=partner)
        ck.equal(f"send/recv pair {tag}", got, values(4099, partner, dtype, device))

    # a ring with batch_isend_irecv (one group: deadlock-free)
    right, left = (rank + 1) % W, (rank - 1) % W
    mine = values(100000, rank, dtype, device)
    got = torch.empty_like(mine)
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, mine, right), dist.P2POp(dist.irecv, got, left)])
    for r in reqs:
        r.wait()
    ck.equal(f"batch_isend_irecv ring {tag}", got, values(100000, left, dtype, device))

    # gather to rank 0, scatter from the last
    x = values(333, rank, dtype, device)
    glist = [torch.empty_like(x) for _ in range(W)] if rank == 0 else None
    dist.gather(x, gather_list=glist, dst=0)
    if rank == 0:
        ck.equal(f"gather {tag}", torch.cat(glist), torch.cat([values(333, r, dtype, device) for r in range(W)]))
    src = W - 1
    slist = [values(333, 100 + r, dtype, device) for r in range(W)] if rank == src else None
    got = torch.empty(333, dtype=dtype, device=device)
    dist.scatter(got, scatter_list=slist, src=src)
    ck.equal(f"scatter {tag}", got, values(333, 100 + rank, dtype, device))

    # coalesced all_reduces (one NCCL group); async ones waited together
    ts = [values(1000 + k, rank, dtype, device) for k in range(3)]
    if hasattr(dist, "_coalescing_manager"):  # torch >= 2.1: one ncclGroupStart/End around the three
        with dist._coalescing_manager(device=device, async_ops=True) as cm:
            for t in ts:
                dist.all_reduce(t)
        cm.wait()
    elif hasattr(dist, "all_reduce_coalesced"):
        dist.all_reduce_coalesced(ts, op=dist.ReduceOp.SUM)
    else:
        for w in [dist.all_reduce(t, async_op=True) for t in ts]:
            w.wait()
    for k, t in enumerate(ts):
        ck.equal(f"coalesced all_reduce {tag} #{k}", t,
                 ((torch.arange(1000 + k, device=device) % 8) * W + W * (W - 1) // 2).to(dtype))

    # barrier: nobody leaves before everyone came (each rank says so in the
    # store before it enters, the last one late)
    store = dist.distributed_c10d._get_default_store()
    key = f"barrier-{tag}-{W}"
    if rank == W - 1:
        time.sleep(0.3)
    store.set(f"{key}-{rank}", "in")
    dist.barrier()
    ck.true(f"barrier {tag}: every rank entered before any left",
            store.check([f"{key}-{r}" for r in range(W)]), "a rank left the barrier before all had entered")


def check_groups(ck, rank, world, device):
    import torch
    import torch.distributed as dist
    W = world
    half = max(1, W // 2)
    first = list(range(half))
    second = list(range(half, W)) or first
    g1 = dist.new_group(first)
    g2 = dist.new_group(second)
    evens = dist.new_group(list(range(0, W, 2)))
    mine = g1 if rank in first else g2
    members = first if rank in first else second
    t = torch.full((1000,), float(rank + 1), device=device)
    dist.all_reduce(t, group=mine)
    ck.equal("new_group all_reduce", t, torch.full((1000,), float(sum(r + 1 for r in members)), device=device))
    out = torch.empty(1000 * len(members), device=device)
    dist.all_gather_into_tensor(out, torch.full((1000,), float(rank), device=device), group=mine)
    ck.equal("new_group all_gather", out,
             torch.cat([torch.full((1000,), float(r), device=device) for r in members]))
    src = members[-1]
    t = torch.full((77,), float(rank), device=device)
    dist.broadcast(t, src=src, group=mine)
    ck.equal("new_group broadcast", t, torch.full((77,), float(src), device=device))
    if rank % 2 == 0:
        t = torch.full((10,), float(rank), dtype=torch.bfloat16, device=device)
        dist.all_reduce(t, group=evens)
        ck.equal("new_group (evens) bf16 all_reduce", t,
                 torch.full((10,), float(sum(range(0, W, 2))), dtype=torch.bfloat16, device=device))
    dist.barrier()
    for g in (g1, g2, evens):
        dist.destroy_process_group(g)
        check_destroyed(ck, g, "new_group")


def check_destroyed(ck, g, what):
    """mscclpp's backend: destroy_process_group destroyed the group's
    communicator (torch calls the group's shutdown(); versions with
    _shutdown_backend only do that for NCCL, and the communicator then
    lives until the process exits)."""
    import torch.distributed as dist
    if g is None or g == dist.GroupMember.NON_GROUP_MEMBER or type(g).__name__ != "ProcessGroupMscclpp":
        return
    if hasattr(dist.distributed_c10d, "_shutdown_backend"):
        print(f"note: this torch has _shutdown_backend: a destroyed {what} keeps its mscclpp communicator",
              flush=True)
        return
    ck.true(f"destroy_process_group({what}) destroyed its mscclpp communicator", g._comm is None,
            "the group's shutdown() was not called")


def check_side_order(ck, rank, world, device):
    """NCCL's contract: a collective call returns without waiting for the
    other ranks' host threads. Rank 0 calls first and only then tells the
    others, through the store (a side channel), that they may call; a call
    that waited for the peers would deadlock here until the timeout. Sizes
    cover the packet path and the zero-copy path (new and reused buffers)."""
    import torch
    import torch.distributed as dist
    store = dist.distributed_c10d._get_default_store()
    for i, n in enumerate((256, 4 << 20, 16 << 20, 16 << 20)):
        x = torch.full((n,), float(rank + 1), dtype=torch.float32, device=device)
        out = torch.empty(n * world, dtype=torch.float32, device=device)
        key = f"side-order-{world}-{i}"
        if rank != 0:
            store.wait([key], datetime.timedelta(seconds=60))
        dist.all_reduce(x)
        dist.all_gather_into_tensor(out, x)
        if rank == 0:
            store.set(key, "go")
        torch.cuda.synchronize()
        want = float(world * (world + 1) // 2)
        ck.true(f"side-order all_reduce {n}", bool((x == want).all()), f"got {x[:4].tolist()}")
        ck.true(f"side-order all_gather {n}", bool((out == want).all()), f"got {out[:4].tolist()}")


def ddp_check(ck, rank, world, device, steps=10):
    """DDP on W ranks (each a shard of every global batch) against one process on the full batches."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    per_rank, global_batch = 8, 8 * world

    def make_model():
        torch.manual_seed(1234)
        return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64),
                                   torch.nn.Tanh(), torch.nn.Linear(64, 1)).to(device)

    gen = torch.Generator().manual_seed(99)
    data = torch.randn(steps, global_batch, 32, generator=gen).to(device)
    target = torch.randn(steps, global_batch, 1, generator=gen).to(device)

    # the reference, on rank 0 alone: full batches, no communication
    ref_losses, ref_params = [], None
    if rank == 0:
        model = make_model()
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        for s in range(steps):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(data[s]), target[s])
            loss.backward()
            opt.step()
            ref_losses.append(loss.item())
        ref_params = torch.cat([p.detach().flatten() for p in model.parameters()])

    model = DDP(make_model(), device_ids=[device.index] if device.type == "cuda" else None, bucket_cap_mb=1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for s in range(steps):
        opt.zero_grad()
        shard = slice(rank * per_rank, (rank + 1) * per_rank)
        loss = torch.nn.functional.mse_loss(model(data[s][shard]), target[s][shard])
        loss.backward()
        opt.step()
        l = loss.detach().clone()
        dist.all_reduce(l, op=dist.ReduceOp.AVG)  # mean of equal shards = the full batch's mean
        losses.append(l.item())
    params = torch.cat([p.detach().flatten() for p in model.module.parameters()])
    # every rank holds the same weights
    p0 = params.clone()
    dist.broadcast(p0, src=0)
    ck.equal("ddp weights identical on every rank", params, p0)
    if rank == 0:
        rtol, atol = 1e-4, 1e-5
        worst = max(abs(a - b) / (abs(b) + 1e-12) for a, b in zip(losses, ref_losses))
        ok = all(abs(a - b) <= atol + rtol * abs(b) for a, b in zip(losses, ref_losses))
        print(f"rank 0: DDP losses {['%.6f' % v for v in losses]}", flush=True)
        print(f"rank 0: ref  losses {['%.6f' % v for v in ref_losses]}  (worst relative difference {worst:.2e})",
              flush=True)
        ck.true("ddp loss matches the single-process run (rtol 1e-4, atol 1e-5)", ok,
                f"losses {losses} vs reference {ref_losses}")
        ck.true("ddp final weights match the single-process run (rtol 1e-4, atol 1e-5)",
                torch.allclose(params, ref_params, rtol=rtol, atol=atol),
                f"max abs difference {(params - ref_params).abs().max().item():.3e}")


def rank_main(rank, world, port, mode, lib, skip_ddp, result_dir):
    import torch
    import torch.distributed as dist
    ck = Checker(rank)
    try:
        ndev = torch.cuda.device_count()
        device = torch.device("cuda", rank % ndev)
        torch.cuda.set_device(device)
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(port)
        if mode == "lazy-nonblocking":
            os.environ["TORCH_NCCL_USE_COMM_NONBLOCKING"] = "1"
        kwargs = dict(backend="nccl", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=120))
        if mode == "eager":
            kwargs["device_id"] = device
        if mode == "python-backend":
            repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
            sys.path.insert(0, os.path.join(repo, "python"))
            import mscclpp.torch  # noqa: F401  (registers the backend)
            kwargs["backend"] = "mscclpp"
        dist.init_process_group(**kwargs)
        # the library in use
        if lib is not None:
            libs = mapped_libraries()
            ours = os.path.realpath(lib)
            ck.true("our library is loaded", ours in libs, f"mapped: {sorted(libs)}")
            # The pip wheel's NVIDIA libnccl.so.2 may be mapped too (torch
            # loads it by path), but the NCCL symbols the process resolves
            # must be ours: LD_PRELOAD puts our library first in the lookup.
            import ctypes
            glob = ctypes.CDLL(None)
            mine = ctypes.CDLL(ours)
            for sym in ("ncclAllReduce", "ncclCommInitRankConfig", "ncclGroupEnd"):
                a = ctypes.cast(getattr(glob, sym), ctypes.c_void_p).value
                b = ctypes.cast(getattr(mine, sym), ctypes.c_void_p).value
                ck.true(f"{sym} resolves to our library", a == b, f"global {a:#x}, ours {b:#x}")
        ver = torch.cuda.nccl.version()
        if mode == "python-backend":
            ck.true("the group's backend is mscclpp", dist.get_backend() == "mscclpp", dist.get_backend())
        else:
            ck.true("NCCL version 2.28.9", tuple(ver) >= (2, 28, 9) if lib is None else tuple(ver) == (2, 28, 9),
                    f"torch.cuda.nccl.version() = {ver}")
        if rank == 0:
            print(f"[{mode}, {world} ranks] torch {torch.__version__}, NCCL version {ver}, {ndev} GPU(s), "
                  f"rank 0 on {torch.cuda.get_device_name(device)}", flush=True)
        t0 = time.time()
        for dtype in (torch.float32, torch.bfloat16):
            check_collectives(ck, rank, world, device, dtype)
        check_groups(ck, rank, world, device)
        check_side_order(ck, rank, world, device)
        if not skip_ddp:
            ddp_check(ck, rank, world, device)
        torch.cuda.synchronize()
        dist.barrier()
        if rank == 0:
            print(f"[{mode}, {world} ranks] checks took {time.time() - t0:.1f} s", flush=True)
        world_pg = dist.group.WORLD
        dist.destroy_process_group()
        ck.true("destroy_process_group() leaves torch.distributed uninitialized", not dist.is_initialized())
        check_destroyed(ck, world_pg, "the default group")
    except Exception:  # noqa: BLE001
        ck.fail("exception", traceback.format_exc())
    with open(os.path.join(result_dir, f"rank{rank}"), "w") as f:
        f.write(f"{ck.passed} {len(ck.failures)}\n")
        for m in ck.failures:
            f.write(m.replace("\n", " | ") + "\n")
    # exit 0 either way: a failing exit makes torch.multiprocessing kill the
    # other ranks before they write their results; the driver reads the files


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


def maybe_start_mps(args, max_ranks, ngpus):
    """Ranks sharing a GPU spin-wait on each other: without MPS their kernels do not run at the same time."""
    if max_ranks <= ngpus:
        return None
    pipe = os.environ.get("CUDA_MPS_PIPE_DIRECTORY") or (
        "/tmp/nvidia-mps" if mps_running("/tmp/nvidia-mps") else "/tmp/mps")
    if mps_running(pipe):
        os.environ["CUDA_MPS_PIPE_DIRECTORY"] = pipe
        print(f"MPS daemon running at {pipe}")
        return None
    if not args.mps:
        print(f"WARNING: {max_ranks} ranks on {ngpus} GPU(s) without CUDA MPS: kernels of ranks sharing a GPU will not "
              f"run concurrently and collectives will time out. Pass --mps.", flush=True)
        return None
    ctl = shutil.which("nvidia-cuda-mps-control")
    if ctl is None:
        print("WARNING: --mps: nvidia-cuda-mps-control not found")
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
    print(f"started the MPS daemon (pipes {pipe})", flush=True)
    return ctl


def run_one(args, world, mode, lib):
    import tempfile
    import torch.multiprocessing as mp
    port = free_port()
    with tempfile.TemporaryDirectory() as result_dir:
        t0 = time.time()
        ctx = mp.start_processes(rank_main, args=(world, port, mode, lib, args.skip_ddp, result_dir), nprocs=world,
                                 join=False, start_method="spawn")
        hung = False
        try:
            while not ctx.join(timeout=1):
                if time.time() - t0 > args.timeout:
                    hung = True
                    break
        except Exception as e:  # noqa: BLE001  (a rank failed: ProcessRaisedException / ProcessExitedException)
            print(f"[{mode}, {world} ranks] a rank failed: {str(e).splitlines()[0] if str(e) else e}", flush=True)
        if hung:
            print(f"[{mode}, {world} ranks] FAIL: still running after {args.timeout:.0f} s: killing the ranks",
                  flush=True)
            for p in ctx.processes:
                if p.is_alive():
                    p.kill()
        passed = failed = 0
        msgs = []
        for r in range(world):
            path = os.path.join(result_dir, f"rank{r}")
            if not os.path.exists(path):
                failed += 1
                msgs.append(f"rank {r}: no result (crashed or hung)")
                continue
            with open(path) as f:
                lines = f.read().splitlines()
            p, fl = map(int, lines[0].split())
            passed += p
            failed += fl
            msgs += lines[1:]
        ok = failed == 0 and not hung
        print(f"[{mode}, {world} ranks] {'PASS' if ok else 'FAIL'}: {passed} checks passed, {failed} failed, "
              f"{time.time() - t0:.1f} s", flush=True)
        for m in msgs[:20]:
            print("   " + m)
        return ok


def main():
    args = parse_args()
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    lib = None
    if not args.no_preload:
        lib = os.path.abspath(args.lib or os.path.join(repo, "build", "src", "nccl", "libmscclpp_nccl.so"))
        if not os.path.exists(lib):
            sys.exit(f"{lib} not found: build it, or pass --lib")
        if os.environ.get(REEXEC_FLAG) != "1":
            env = dict(os.environ)
            env["LD_PRELOAD"] = (lib + " " + env.get("LD_PRELOAD", "")).strip()
            env[REEXEC_FLAG] = "1"
            os.execve(sys.executable, [sys.executable] + sys.argv, env)
    if args.mscclpp_lib:
        os.environ["MSCCLPP_LIBRARY"] = os.path.abspath(args.mscclpp_lib)
    if "python-backend" in args.modes and (not args.no_preload or not args.mscclpp_lib):
        sys.exit("mode python-backend needs --no-preload and --mscclpp-lib")
    import torch
    if not torch.cuda.is_available():
        print("SKIPPED: no GPU")
        sys.exit(77)
    ngpus = torch.cuda.device_count()
    worlds = [int(n) for n in args.nprocs.split(",") if n]
    modes = [m for m in args.modes.split(",") if m]
    print(f"torch {torch.__version__}, {ngpus} GPU(s), library {lib or '(NVIDIA NCCL)'}, "
          f"LD_PRELOAD={os.environ.get('LD_PRELOAD', '')}", flush=True)
    ctl = maybe_start_mps(args, max(worlds), ngpus)
    results = []
    try:
        for world in worlds:
            for mode in modes:
                results.append(((world, mode), run_one(args, world, mode, lib)))
    finally:
        if ctl is not None:
            subprocess.run([ctl], input=b"quit\n")
    print("summary: " + ", ".join(f"{w} ranks {m}: {'PASS' if ok else 'FAIL'}" for (w, m), ok in results))
    sys.exit(0 if all(ok for _, ok in results) else 1)


if __name__ == "__main__":
    main()
