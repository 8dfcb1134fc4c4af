#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What each layer costs per allreduce: the C API, PyTorch on the NCCL shim, PyTorch on mscclpp.torch.

    python3 bench/torch_layers.py --nprocs 2 [--bin .carry/gpu] [--out DIR]

One command per rank count. It runs, on this machine, one after the other
(each bounded by --timeout):

  C     mscclpp-perf allreduce (mscclppAllReduce in place, float32 sum)
        under mscclpp-run, eager and in a CUDA graph (-G);
  shim  bench/torch_allreduce.py: torch.distributed.all_reduce on the
        "nccl" backend served by libmscclpp_nccl.so (preloaded), eager and
        in a CUDA graph, in one launch;
  py    the same through mscclpp's own backend (mscclpp.torch over
        libmscclpp.so, no preload); its graph rows only if capture works
        (a failed capture is printed, not hidden);

for sizes --min-bytes to --max-bytes (x --factor), and prints one table: the
time per call in microseconds (the slowest rank; the stream's time for
back-to-back calls, as mscclpp-perf measures), the host's time to enqueue a
torch call, and the differences that are each layer's cost: shim-C is
PyTorch's NCCL process group plus the NCCL shim over the C API, py-C is
PyTorch plus the Python backend, py-shim what the Python backend costs
beyond the shim. Every component checks its results exactly (mscclpp-perf
-c 1; the torch rows check the last call); a wrong result or a failed
component makes the exit status non-zero. The components' JSON goes to
--out (default: a temporary directory, removed).

Ranks sharing a GPU need CUDA MPS: mscclpp-run --mps starts it for the C
rows unless one runs; the torch rows use the daemon of
CUDA_MPS_PIPE_DIRECTORY (scripts/gpu-run.sh starts one), or --mps starts one.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def size_arg(text):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper()
    if t and t[-1] in mult:
        return int(t[:-1]) * mult[t[-1]]
    return int(t)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nprocs", type=int, required=True, help="rank count")
    p.add_argument("--bin", default=os.path.join(REPO, ".carry", "gpu"),
                   help="where mscclpp-perf, mscclpp-run and lib/ are (default .carry/gpu; PATH as fallback)")
    p.add_argument("--nccl-lib", default=None, help="libmscclpp_nccl.so (default BIN/lib/)")
    p.add_argument("--mscclpp-lib", default=None, help="libmscclpp.so (default BIN/lib/)")
    p.add_argument("--min-bytes", type=size_arg, default=1 << 10)
    p.add_argument("--max-bytes", type=size_arg, default=256 << 20)
    p.add_argument("--factor", type=int, default=4)
    p.add_argument("--iters", type=int, default=50, help="timed calls per size (torch rows; mscclpp-perf takes 20)")
    p.add_argument("--timeout", type=float, default=150, help="seconds per component")
    p.add_argument("--budget", type=float, default=0,
                   help="seconds for all four components together (0: no limit beyond --timeout each); a "
                        "component gets what is left, and one left with under 15 s does not run")
    p.add_argument("--mps", action="store_true", help="torch rows: start the MPS daemon if none runs")
    p.add_argument("--out", default=None, help="keep the components' JSON and logs in this directory")
    return p.parse_args()


def tool(args, name):
    cand = os.path.join(args.bin, name)
    if os.access(cand, os.X_OK):
        return cand
    found = shutil.which(name)
    if found:
        return found
    sys.exit(f"torch_layers: {name} not found in {args.bin} or PATH")


DEADLINE = [float("inf")]


def time_left(limit):
    """Seconds a component may take: --timeout, or what is left of --budget."""
    return min(limit, DEADLINE[0] - time.time())


def run(name, cmd, timeout, log):
    """Run one component; its output goes to the log and, cut, to stdout.
    `cmd` has bounded itself a little under `timeout` (its ranks end with
    it); the kill at `timeout` is the last resort."""
    if timeout < 15:
        print(f"== {name}: not run: the --budget is spent", flush=True)
        return False
    print(f"== {name}: {' '.join(cmd)}", flush=True)
    t0 = time.time()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
        out, rc = p.stdout, p.returncode
    except subprocess.TimeoutExpired as e:
        raw = e.stdout or b""
        out, rc = (raw.decode(errors="replace") if isinstance(raw, bytes) else raw), "timeout"
    with open(log, "w") as f:
        f.write(out)
    lines = out.splitlines()
    for line in lines[-40:]:
        print(f"   {line}")
    print(f"== {name}: exit status {rc}, {time.time() - t0:.1f} s", flush=True)
    return rc == 0


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def perf_times(doc):
    """size -> in-place time (us) from mscclpp-perf's -J file; and its wrong count."""
    if not doc:
        return {}, None
    out = {}
    for r in doc.get("results", []):
        m = r.get("inPlace")
        if m:
            out[r["size"]] = m["time_us"]
    return out, doc.get("wrong")


def torch_times(doc, mode):
    """size -> (time_us, host_us, ok) of a torch_allreduce.py --json file; and its error."""
    if not doc or mode not in doc.get("modes", {}):
        return {}, "did not run"
    m = doc["modes"][mode]
    return {r["bytes"]: (r["time_us"], r["host_us"], r["ok"]) for r in m["rows"]}, m.get("error")


def main():
    args = parse_args()
    if args.budget > 0:
        DEADLINE[0] = time.time() + args.budget
    n = args.nprocs
    lib_dir = os.path.join(args.bin, "lib")
    nlib = os.path.abspath(args.nccl_lib or os.path.join(lib_dir, "libmscclpp_nccl.so"))
    mlib = os.path.abspath(args.mscclpp_lib or os.path.join(lib_dir, "libmscclpp.so"))
    out_dir = args.out or tempfile.mkdtemp(prefix="torch-layers-")
    os.makedirs(out_dir, exist_ok=True)
    j = lambda name: os.path.join(out_dir, f"{name}_{n}.json")  # noqa: E731
    lg = lambda name: os.path.join(out_dir, f"{name}_{n}.log")  # noqa: E731
    launcher, perf = tool(args, "mscclpp-run"), tool(args, "mscclpp-perf")
    sizes = ["-b", str(args.min_bytes), "-e", str(args.max_bytes), "-f", str(args.factor)]
    ok = {}
    for name, graph in (("c_eager", []), ("c_graph", ["-G", "5"])):
        t = time_left(args.timeout)
        ok[name] = run(name, [launcher, "-n", str(n), "--mps", "--timeout", str(max(1, int(t - 5))), "--", perf,
                              "allreduce"] + sizes + ["-d", "float", "-o", "sum", "-c", "1", "-w", "5", "-n", "20"]
                       + graph + ["-J", j(name)], t, lg(name))
    bench = [sys.executable, os.path.join(REPO, "bench", "torch_allreduce.py"), "--nprocs", str(n), "--modes",
             "eager,graph", "--min-bytes", str(args.min_bytes), "--max-bytes", str(args.max_bytes), "--factor",
             str(args.factor), "--iters", str(args.iters)] + (["--mps"] if args.mps else [])
    for name, lib, flag in (("shim", nlib, "--lib"), ("py", mlib, "--python-backend")):
        t = time_left(args.timeout)
        ok[name] = os.path.exists(lib) and run(name, bench + [flag, lib, "--json", j(name), "--timeout",
                                                              str(max(1, int(t - 10)))], t, lg(name))
    for name, lib in (("shim", nlib), ("py", mlib)):
        if not os.path.exists(lib):
            print(f"== {name}: {lib} not found (scripts/gpu-build.sh puts it in .carry/gpu/lib)")

    ce, ce_wrong = perf_times(load(j("c_eager")))
    cg, cg_wrong = perf_times(load(j("c_graph")))
    shim_doc, py_doc = load(j("shim")), load(j("py"))
    se, se_err = torch_times(shim_doc, "eager")
    sg, sg_err = torch_times(shim_doc, "graph")
    pe, pe_err = torch_times(py_doc, "eager")
    pg, pg_err = torch_times(py_doc, "graph")
    doc = shim_doc or py_doc or {}

    def f(v):
        return f"{v:10.2f}" if isinstance(v, (int, float)) else f"{'-':>10}"

    def d(a, b):
        return a - b if isinstance(a, (int, float)) and isinstance(b, (int, float)) else None

    print()
    print(f"# allreduce, float32 sum, in place, {n} ranks on {doc.get('ngpus', '?')} GPU(s) "
          f"({doc.get('device', '?')}), torch {doc.get('torch', '?')}; microseconds per call, the slowest rank")
    print("#   C: mscclpp-perf (mscclppAllReduce); shim: torch 'nccl' on libmscclpp_nccl.so; "
          "py: torch 'mscclpp' (mscclpp.torch)")
    print("#   e: eager (back-to-back calls, the stream's time); g: the calls captured in a CUDA graph; "
          "host: the host's enqueue time per torch call (eager)")
    print("#   layer costs, eager: shim-C = PyTorch's NCCL group + the shim; py-C = PyTorch + the Python backend; "
          "py-shim = the Python backend beyond the shim")
    hdr = ["bytes", "C e", "shim e", "py e", "C g", "shim g", "py g", "shim host", "py host", "shim-C", "py-C",
           "py-shim"]
    print(f"{hdr[0]:>11}" + "".join(f"{h:>10}" for h in hdr[1:]))
    wrong = 0
    size = args.min_bytes
    while size <= args.max_bytes:
        s_e, p_e = se.get(size), pe.get(size)
        s_g, p_g = sg.get(size), pg.get(size)
        for row in (s_e, p_e, s_g, p_g):
            if row is not None and not row[2]:
                wrong += 1
        te = lambda r: r[0] if r else None  # noqa: E731
        th = lambda r: r[1] if r else None  # noqa: E731
        vals = [ce.get(size), te(s_e), te(p_e), cg.get(size), te(s_g), te(p_g), th(s_e), th(p_e),
                d(te(s_e), ce.get(size)), d(te(p_e), ce.get(size)), d(te(p_e), te(s_e))]
        mark = "" if all(r is None or r[2] for r in (s_e, p_e, s_g, p_g)) else "  WRONG"
        print(f"{size:>11}" + "".join(f(v) for v in vals) + mark)
        size *= args.factor
    notes = []
    for what, err in (("shim eager", se_err), ("shim graph", sg_err), ("py eager", pe_err), ("py graph", pg_err)):
        if err:
            notes.append(f"{what}: {err}")
    for what, w in (("C eager", ce_wrong), ("C graph", cg_wrong)):
        if w:
            notes.append(f"{what}: mscclpp-perf counted {w} wrong elements")
            wrong += 1
    for note in notes:
        print(f"# {note}")
    failed = [k for k, v in ok.items() if not v]
    # a graph capture the Python backend cannot do is reported, not failed
    if failed or wrong:
        print(f"torch_layers: FAIL: {n} ranks: failed components {failed or 'none'}, {wrong} wrong rows")
    else:
        print(f"torch_layers: PASS: {n} ranks")
    if args.out is None:
        shutil.rmtree(out_dir, ignore_errors=True)
    else:
        print(f"torch_layers: JSON and logs in {out_dir}")
    sys.exit(1 if failed or wrong else 0)


if __name__ == "__main__":
    main()
