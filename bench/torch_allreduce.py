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
CUDA graph and replayed (the launch cost leaves the figure). --modes
eager,graph runs both in one launch (every size eager, then every size in a
graph); a capture that fails on any rank (the ranks agree through the
store, not the backend) ends the graph rows with the error printed, and the
eager rows stand. --json FILE writes every row (bench/torch_layers.py reads
it to set these figures beside mscclpp-perf's).

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
    p.add_argument("--graph", action="store_true", help="capture each size's iterations in a CUDA graph "
                   "(the same as --modes graph)")
    p.add_argument("--modes", default=None, help="eager, graph or eager,graph (default: eager, or graph with --graph)")
    p.add_argument("--factor", type=int, default=2, help="multiply the size by this from one row to the next")
    p.add_argument("--json", default=None, metavar="FILE", help="also write the rows as JSON")
    p.add_argument("--solo", action="store_true",
                   help="each rank all-reduces in a group of its own: N processes on the GPU with no coupling "
                        "between their calls (what PyTorch, the library's one-rank path and MPS cost with N)")
    p.add_argument("--mps", action="store_true", help="start the CUDA MPS daemon if ranks share a GPU")
    p.add_argument("--timeout", type=float, default=600)
    args = p.parse_args()
    modes = args.modes or ("graph" if args.graph else "eager")
    args.mode_list = [m for m in modes.split(",") if m]
    if not args.mode_list or any(m not in ("eager", "graph") for m in args.mode_list):
        p.error(f"--modes {modes!r}: eager, graph or both")
    if args.factor < 2:
        p.error("--factor must be 2 or more")
    return args


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
    group = None
    if args.solo:  # every rank makes every group (new_group is collective)
        group = [dist.new_group([r]) for r in range(world)][rank]
    dtype = getattr(torch, args.dtype)
    esize = torch.tensor([], dtype=dtype).element_size()
    store = dist.distributed_c10d._get_default_store()
    stream = torch.cuda.current_stream()
    result = {}
    for mode in args.mode_list:
        rows, error = [], None
        size = args.min_bytes
        while size <= args.max_bytes:
            n = max(1, size // esize)
            x = torch.full((n,), float(rank + 1), dtype=dtype, device=device)
            for _ in range(args.warmup):
                dist.all_reduce(x, group=group)
            iters = args.iters
            graph = None
            if mode == "graph":
                mine = ""
                try:
                    graph = torch.cuda.CUDAGraph()
                    s = torch.cuda.Stream()
                    s.wait_stream(stream)
                    with torch.cuda.stream(s):
                        dist.all_reduce(x, group=group)  # warm the capture path
                        with torch.cuda.graph(graph, stream=s):
                            for _ in range(iters):
                                dist.all_reduce(x, group=group)
                    stream.wait_stream(s)
                except Exception as e:  # noqa: BLE001  (reported, and every rank stops its graph rows)
                    mine = f"rank {rank}: {type(e).__name__}: {e}".replace("\n", " ")[:400]
                # agree through the store: a rank whose capture failed must not leave the others replaying
                store.set(f"capture/{size}/{rank}", mine or "ok")
                errs = [store.get(f"capture/{size}/{r}").decode() for r in range(world)]
                errs = [e for e in errs if e != "ok"]
                if errs:
                    error = f"CUDA graph capture failed at {size} bytes: " + "; ".join(errs)
                    break
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
                    dist.all_reduce(x, group=group)
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
            dist.all_reduce(x, group=group)
            ok = ok and bool((x == float(rank + 1 if args.solo else world * (world + 1) // 2)).all().item())
            okt = torch.tensor([1 if ok else 0], device=device)
            dist.all_reduce(okt, op=dist.ReduceOp.MIN)
            nbytes = n * esize
            algbw = nbytes / (us * 1e-6) / 1e9
            busbw = algbw * 2 * (world - 1) / world
            rows.append((nbytes, n, us, host_us, algbw, busbw, bool(okt.item())))
            del x, graph
            size *= args.factor
        result[mode] = (rows, error)
    dist.destroy_process_group()
    if rank == 0:
        queue.put(result)


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
    result = queue.get()
    what = f"libmscclpp_nccl ({lib})" if lib else "PyTorch's own NCCL"
    if args.python_backend:
        what = f"mscclpp's torch.distributed backend ({args.python_backend})"
    device = torch.cuda.get_device_name(0)
    bad = 0
    report = {"nprocs": args.nprocs, "ngpus": torch.cuda.device_count(), "device": device, "dtype": args.dtype,
              "iters": args.iters, "solo": args.solo, "through": what, "torch": torch.__version__, "modes": {}}
    for mode in args.mode_list:
        rows, error = result[mode]
        print(f"# torch.distributed.all_reduce, {args.nprocs} ranks on {torch.cuda.device_count()} GPU(s) "
              f"({device}), {args.dtype}, sum, {args.iters} iterations"
              f"{' in a CUDA graph' if mode == 'graph' else ''}{', each rank in a group of its own' if args.solo else ''}"
              f", through {what}; torch {torch.__version__}")
        print(f"{'bytes':>12} {'elements':>11} {'time(us)':>10} {'host(us)':>9} {'algbw(GB/s)':>12} "
              f"{'busbw(GB/s)':>12} {'check':>6}")
        for nbytes, n, us, host_us, algbw, busbw, ok in rows:
            bad += not ok
            print(f"{nbytes:>12} {n:>11} {us:>10.2f} {host_us:>9.2f} {algbw:>12.2f} {busbw:>12.2f} "
                  f"{'ok' if ok else 'WRONG':>6}")
        if error:
            print(f"# {mode}: {error}")
        report["modes"][mode] = {
            "error": error,
            "rows": [{"bytes": b, "count": n, "time_us": us, "host_us": h, "algbw_GBps": a, "busbw_GBps": bb,
                      "ok": ok} for b, n, us, h, a, bb, ok in rows],
        }
    if args.json:
        import json
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
