#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""PyTorch all_reduce latency and bandwidth through libmscclpp_nccl.so.

    python3 bench/torch_allreduce.py --lib build/src/nccl/libmscclpp_nccl.so --nprocs 2 [--mps]
    python3 bench/torch_allreduce.py --no-preload --nprocs 2         # the same on NVIDIA's NCCL

Re-executes itself with LD_PRELOAD=<lib>, spawns the ranks (one per GPU,
round-robin: ranks sharing a GPU need CUDA MPS, which --mps starts), and
times torch.distributed.all_reduce (SUM, float32 unless --dtype) on the
current stream for sizes 1 KiB .. 256 MiB: per size, --warmup calls, then
--iters calls between two CUDA events (no host synchronization in between),
the slowest rank's time counts. Prints, per size: time per call (us),
algorithm bandwidth (bytes / time) and bus bandwidth (algbw * 2(n-1)/n, as
nccl-tests), and checks the result of the last call exactly (ranks add
small integers). With --graph, each size's iterations are captured in one
CUDA graph and replayed (the launch cost leaves the figure).

The figure to put beside it is the same allreduce straight on mscclpp's
collective API, same machine and rank count (the difference is what
PyTorch and the NCCL shim cost):
    build/tools/mscclpp-run -n 2 --mps -- build/bench/bench_coll
"""
import argparse
import os
import socket
import sys
import time

REEXEC_FLAG = "MSCCLPP_TORCH_BENCH_CHILD"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lib", default=None, help="libmscclpp_nccl.so (default: build/src/nccl/ of this repo)")
    p.add_argument("--no-preload", action="store_true", help="run on the NCCL PyTorch ships (for comparison)")
    p.add_argument("--python-backend", default=None, metavar="LIBMSCCLPP",
                   help="run through mscclpp's own torch.distributed backend (python/mscclpp/torch.py) over this "
                        "libmscclpp.so, with no preload")
    p.add_argument("--nprocs", type=int, default=2)
    p.add_argument("--min-bytes", type=int, default=1 << 10)
    p.add_argument("--max-bytes", type=int, default=256 << 20)
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--graph", action="store_true", help="capture each size's iterations in a CUDA graph")
    p.add_argument("--mps", action="store_true", help="start the CUDA MPS daemon if ranks share a GPU")
    p.add_argument("--timeout", type=float, default=600)
    return p.parse_args()


def rank_main(rank, world, port, args, queue):
    import datetime
    import torch
    import torch.distributed as dist
    ndev = torch.cuda.device_count()
    device = torch.device("cuda", rank % ndev)
    torch.cuda.set_device(device)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    if args.python_backend:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
        import mscclpp.torch  # noqa: F401  (registers "mscclpp")
        dist.init_process_group("mscclpp", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=120))
    else:
        dist.init_process_group("nccl", rank=rank, world_size=world, device_id=device,
                                timeout=datetime.timedelta(seconds=120))
    dtype = getattr(torch, args.dtype)
    esize = torch.tensor([], dtype=dtype).element_size()
    rows = []
    size = args.min_bytes
    stream = torch.cuda.current_stream()
    while size <= args.max_bytes:
        n = max(1, size // esize)
        x = torch.full((n,), float(rank + 1), dtype=dtype, device=device)
        for _ in range(args.warmup):
            dist.all_reduce(x)
        iters = args.iters
        graph = None
        if args.graph:
            graph = torch.cuda.CUDAGraph()
            s = torch.cuda.Stream()
            s.wait_stream(stream)
            with torch.cuda.stream(s):
                dist.all_reduce(x)  # warm the capture path
                with torch.cuda.graph(graph, stream=s):
                    for _ in range(iters):
                        dist.all_reduce(x)
            stream.wait_stream(s)
        # reset the value so the last call's result is known: all iterations add
        x.fill_(0.0)
        torch.cuda.synchronize()
        dist.barrier()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(stream)
        h0 = time.perf_counter()
        if graph is not None:
            graph.replay()
        else:
            for _ in range(iters):
                dist.all_reduce(x)
        # the host's time to enqueue the calls: near time(us), the loop is
        # bound by the host (PyTorch's and the library's per-call cost)
        host_us = (time.perf_counter() - h0) * 1e6 / iters
        end.record(stream)
        end.synchronize()
        us = start.elapsed_time(end) * 1000.0 / iters
        t = torch.tensor([us, host_us], device=device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        us, host_us = t[0].item(), t[1].item()
        # exact check: all zeros stay zero; then one more call with rank+1
        ok = bool((x == 0).all().item())
        x.fill_(float(rank + 1))
        dist.all_reduce(x)
        ok = ok and bool((x == float(world * (world + 1) // 2)).all().item())
        okt = torch.tensor([1 if ok else 0], device=device)
        dist.all_reduce(okt, op=dist.ReduceOp.MIN)
        nbytes = n * esize
        algbw = nbytes / (us * 1e-6) / 1e9
        busbw = algbw * 2 * (world - 1) / world
        rows.append((nbytes, n, us, host_us, algbw, busbw, bool(okt.item())))
        del x
        size *= 2
    dist.destroy_process_group()
    if rank == 0:
        queue.put(rows)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def main():
    args = parse_args()
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    lib = None
    if args.python_backend:
        args.no_preload = True
        os.environ["MSCCLPP_LIBRARY"] = os.path.abspath(args.python_backend)
    if not args.no_preload:
        lib = os.path.abspath(args.lib or os.path.join(repo, "build", "src", "nccl", "libmscclpp_nccl.so"))
        if not os.path.exists(lib):
            sys.exit(f"{lib} not found: build it, or pass --lib")
        if os.environ.get(REEXEC_FLAG) != "1":
            env = dict(os.environ)
            env["LD_PRELOAD"] = (lib + " " + env.get("LD_PRELOAD", "")).strip()
            env[REEXEC_FLAG] = "1"
            os.execve(sys.executable, [sys.executable] + sys.argv, env)
    import torch
    import torch.multiprocessing as mp
    if not torch.cuda.is_available():
        print("SKIPPED: no GPU")
        sys.exit(77)
    sys.path.insert(0, os.path.join(repo, "tests", "nccl"))
    mps_ctl = None
    if args.nprocs > torch.cuda.device_count():
        from torch_test import maybe_start_mps  # same MPS handling as the test
        mps_ctl = maybe_start_mps(args, args.nprocs, torch.cuda.device_count())
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    port = free_port()
    t0 = time.time()
    pc = mp.start_processes(rank_main, args=(args.nprocs, port, args, queue), nprocs=args.nprocs, join=False,
                            start_method="spawn")
    try:
        while not pc.join(timeout=1):
            if time.time() - t0 > args.timeout:
                for p in pc.processes:
                    if p.is_alive():
                        p.kill()
                sys.exit(f"FAIL: the benchmark ran past {args.timeout:.0f} s")
    finally:
        if mps_ctl is not None:
            import subprocess
            subprocess.run([mps_ctl], input=b"quit\n")
    rows = queue.get()
    what = f"libmscclpp_nccl ({lib})" if lib else "PyTorch's own NCCL"
    if args.python_backend:
        what = f"mscclpp's torch.distributed backend ({args.python_backend})"
    print(f"# torch.distributed.all_reduce, {args.nprocs} ranks on {torch.cuda.device_count()} GPU(s) "
          f"({torch.cuda.get_device_name(0)}), {args.dtype}, sum, {args.iters} iterations"
          f"{' in a CUDA graph' if args.graph else ''}, through {what}; torch {torch.__version__}")
    print(f"{'bytes':>12} {'elements':>11} {'time(us)':>10} {'host(us)':>9} {'algbw(GB/s)':>12} {'busbw(GB/s)':>12} "
          f"{'check':>6}")
    bad = 0
    for nbytes, n, us, host_us, algbw, busbw, ok in rows:
        bad += not ok
        print(f"{nbytes:>12} {n:>11} {us:>10.2f} {host_us:>9.2f} {algbw:>12.2f} {busbw:>12.2f} "
              f"{'ok' if ok else 'WRONG':>6}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
