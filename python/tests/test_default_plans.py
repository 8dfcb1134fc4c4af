# SPDX-License-Identifier: MIT
"""The default plans (plans/default/) are what their sources
(mscclpp.language.plans) make, and each is sound.

- ``python3 -m mscclpp.language.generate`` into a temporary directory
  writes exactly the committed files (same names, same bytes); ``--check``
  sees a changed file.
- Every plan passes check_plan (ranges, operands, channel pairs,
  signal/wait counts, MSCCL++'s executor limits); the plans for 5, 6 and 7
  ranks pass simulate too (two calls on every rank, results checked
  element by element). The host executor runs the plans for 2, 3, 4 and 8
  ranks (tests/plan: plan_default_N).
- A plan's name, collective, protocol and in-place form match its file
  name; for each collective, rank count and in-place form, the plans' size
  ranges do not overlap and cover every size.

One process, no library.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Dict, List, Tuple

from harness import Checks

from mscclpp.language import check_plan, simulate

checks = Checks("test_default_plans")
PYTHON = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMMITTED = os.path.join(os.path.dirname(PYTHON), "plans", "default")
ENV = dict(os.environ, PYTHONPATH=PYTHON)
SIMULATED = (5, 6, 7)  # rank counts the executor's CI tests leave out


def generate(*args: str) -> "subprocess.CompletedProcess[str]":
    return subprocess.run([sys.executable, "-m", "mscclpp.language.generate", *args], env=ENV, capture_output=True,
                          text=True, timeout=120)


def files(d: str) -> Dict[str, bytes]:
    out = {}
    for name in sorted(os.listdir(d)):
        if name.endswith(".json"):
            with open(os.path.join(d, name), "rb") as f:
                out[name] = f.read()
    return out


committed = files(COMMITTED)
with tempfile.TemporaryDirectory(prefix="mscclpp-plans-") as tmp:
    p = generate(os.path.join(tmp, "default"))
    checks.equal(p.returncode, 0, f"generate: {p.stdout}{p.stderr}")
    made = files(os.path.join(tmp, "default")) if p.returncode == 0 else {}
    checks.equal(sorted(made), sorted(committed), "the sources make exactly the committed plan files")
    stale = [n for n in made if n in committed and made[n] != committed[n]]
    checks.equal(stale, [], "committed plans equal what their sources make (python3 -m mscclpp.language.generate "
                 "plans/default)")
    # --check fails on a changed file (only the 2-rank plans: quicker).
    sub = os.path.join(tmp, "two")
    shutil.copytree(os.path.join(tmp, "default"), sub)
    checks.equal(generate(sub, "--check", "--only=-2ranks-").returncode, 0, "--check passes on fresh files")
    victim = os.path.join(sub, "allreduce-rsag-2ranks-Simple.json")
    with open(victim, "a", encoding="utf-8") as f:
        f.write(" ")
    bad = generate(sub, "--check", "--only=-2ranks-")
    checks.true(bad.returncode != 0 and "allreduce-rsag-2ranks-Simple.json: differs" in bad.stderr,
                f"--check sees a changed plan: rc {bad.returncode}, {bad.stderr!r}")

ranges: Dict[Tuple[str, int, bool], List[Tuple[int, int, str]]] = {}
for name, text in committed.items():
    plan = json.loads(text)
    coll, algo, ranks, protocol = name[:-len(".json")].split("-")
    n = int(ranks[:-len("ranks")])
    checks.equal((plan["name"], plan["collective"], plan["protocol"], plan["inplace"], len(plan["gpus"])),
                 (name[:-5], coll, protocol, algo.endswith("_inplace"), n), f"{name}: what its name says")
    try:
        check_plan(plan, nranks=n)
        if n in SIMULATED:
            simulate(plan, calls=2, seed=n)
        checks.true(True, name)
    except Exception as e:  # noqa: BLE001 - every failure is reported with the plan's name
        checks.fail(f"{name}: {type(e).__name__}: {e}")
    ranges.setdefault((coll, n, plan["inplace"]), []).append(
        (plan["min_message_size"], plan["max_message_size"], name))

for key, rs in sorted(ranges.items()):
    rs.sort()
    edge = 0
    for lo, hi, name in rs:
        checks.equal(lo, edge, f"{name}: its sizes start where the previous plan's end ({key})")
        edge = hi + 1
    checks.equal(edge, 2**64, f"{key}: the plans cover every size")
print(f"{len(committed)} default plans, {len(ranges)} (collective, ranks, in-place) groups")
checks.done()
