# SPDX-License-Identifier: MIT
"""Write the default plans: ``python3 -m mscclpp.language.generate OUTDIR``.

Every plan (mscclpp.language.plans) is built, checked (check_plan) and
written as OUTDIR/<name>.json, in MSCCL++'s JSON layout. ``--check``
writes nothing and fails if OUTDIR's files differ from what the sources
make (missing, changed or extra plans), so sources and files never drift.
``--only SUBSTRING`` limits both to the plans whose name contains it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Dict, List, Optional, Tuple

from .check import check_plan
from .plans import default_plans


def format_plan(plan: Any) -> str:
    """JSON text of a plan, one operation per line: the layout of MSCCL++'s
    DSL (two-space indent) down to the operations, each of which (and any
    list or object of up to 100 characters) is written on one line.
    Readable, diffable, and a third of the size of the fully indented
    form."""
    return _format(plan, 0)[0]


def _format(obj: Any, depth: int) -> Tuple[str, str]:
    """(text laid out at depth, text on one line)."""
    if depth >= 6 or not isinstance(obj, (dict, list)):
        text = json.dumps(obj, separators=(", ", ": "))
        return text, text
    if isinstance(obj, dict):
        kids = [(json.dumps(k), _format(v, depth + 1)) for k, v in obj.items()]
        flat = "{" + ", ".join(f"{k}: {f}" for k, (_, f) in kids) + "}"
        if len(flat) <= 100:
            return flat, flat
        pad = "  " * depth
        return "{\n" + ",\n".join(f"{pad}  {k}: {p}" for k, (p, _) in kids) + "\n" + pad + "}", flat
    if isinstance(obj, list):
        items = [_format(v, depth + 1) for v in obj]
        flat = "[" + ", ".join(f for _, f in items) + "]"
        if len(flat) <= 100:
            return flat, flat
        pad = "  " * depth
        return "[\n" + ",\n".join(f"{pad}  {p}" for p, _ in items) + "\n" + pad + "]", flat
    raise AssertionError("unreachable")


def render(only: str = "") -> Dict[str, str]:
    """File name -> JSON text of every default plan (whose file name
    contains ``only``)."""
    out: Dict[str, str] = {}
    for plan in default_plans():
        if only not in plan.file_name:
            continue
        prog = plan.program()
        check_plan(prog.to_dict(), nranks=plan.nranks)
        out[plan.file_name] = format_plan(prog.to_dict()) + "\n"
    return out


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m mscclpp.language.generate", description="Write (or --check) the default plans.")
    parser.add_argument("outdir", help="directory for the plans (made if missing)")
    parser.add_argument("--check", action="store_true", help="compare with OUTDIR instead of writing")
    parser.add_argument("--only", default="", help="only plans whose name contains this")
    args = parser.parse_args(argv)
    files = render(args.only)
    if args.check:
        problems = []
        have = set(f for f in os.listdir(args.outdir) if f.endswith(".json") and args.only in f) \
            if os.path.isdir(args.outdir) else set()
        for name, text in sorted(files.items()):
            path = os.path.join(args.outdir, name)
            if name not in have:
                problems.append(f"{path}: missing")
                continue
            with open(path, encoding="utf-8") as f:
                if f.read() != text:
                    problems.append(f"{path}: differs from what its source makes")
        for name in sorted(have - set(files)):
            problems.append(f"{os.path.join(args.outdir, name)}: no source makes it")
        for p in problems:
            print(p, file=sys.stderr)
        if problems:
            print(f"{len(problems)} plan file(s) out of date: run python3 -m mscclpp.language.generate "
                  f"{args.outdir}", file=sys.stderr)
            return 1
        print(f"{len(files)} plans match {args.outdir}")
        return 0
    os.makedirs(args.outdir, exist_ok=True)
    for name, text in sorted(files.items()):
        with open(os.path.join(args.outdir, name), "w", encoding="utf-8") as f:
            f.write(text)
    print(f"wrote {len(files)} plans to {args.outdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
