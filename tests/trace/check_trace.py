#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Check the per-rank trace files that MSCCLPP_TRACE wrote.

  check_trace.py [--expect a,b,...] [--require name,...] [--merged JOB] [--gpu-blocks N] FILE...

Each file must be valid JSON (json.load) and in the layout the library
writes: the otherData line, the traceEvents line, one event object per line,
"]}" last. Its events must be in time order; its api and coll events on the
communicator the file names must be the --expect list in that order, with
sequence numbers 1, 2, ... on the collectives; every --require name must
occur. Across the files: one file per rank 0..n-1, one communicator, and the
same calls (collective, size, type, root) in every rank. With --merged, JOB
must be what mscclpp-trace merge made of the files: in the same layout, in
time order, every rank's events with their times moved by the rank's clock
offset, and nothing else. With --gpu-blocks N (a GPU run), every file must
hold at least N kernel block spans of its communicator, each naming a
collective of its file (its seq) and on a block track of its own.
"""
import argparse
import json
import sys


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def read(path):
    with open(path) as f:
        text = f.read()
    try:
        doc = json.loads(text)
    except ValueError as e:
        fail("%s is not valid JSON: %s" % (path, e))
    lines = text.rstrip("\n").split("\n")
    if len(lines) < 4:
        fail("%s: %d lines, expected the otherData line, the traceEvents line, events and ]}" % (path, len(lines)))
    if not lines[0].startswith('{"otherData":{') or not lines[0].endswith("},"):
        fail("%s line 1 is not the otherData line: %s" % (path, lines[0][:80]))
    if lines[1] != '"traceEvents":[' or lines[-1] != "]}":
        fail("%s: the traceEvents line or the closing ]} is missing" % path)
    for i, line in enumerate(lines[2:-1], start=3):
        last = i == len(lines) - 1
        if not last and not line.endswith(","):
            fail("%s line %d does not end with a comma" % (path, i))
        try:
            ev = json.loads(line if last else line[:-1])
        except ValueError as e:
            fail("%s line %d is not one JSON object: %s" % (path, i, e))
        if not isinstance(ev, dict) or "ph" not in ev or "name" not in ev:
            fail("%s line %d is not an event" % (path, i))
    return doc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--expect", default="")
    ap.add_argument("--require", default="")
    ap.add_argument("--merged", default="")
    ap.add_argument("--gpu-blocks", type=int, default=0)
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    expect = [x for x in a.expect.split(",") if x]
    require = [x for x in a.require.split(",") if x]
    ranks = {}
    calls = {}
    comms = set()
    for path in a.files:
        doc = read(path)
        meta = doc["otherData"]
        if meta.get("format") != "mscclpp-trace" or meta.get("version") != 1:
            fail("%s: otherData does not say mscclpp-trace version 1: %s" % (path, meta))
        for key in ("rank", "nranks", "comm", "pid", "host", "clock_offset_ns", "clock_rtt_ns", "dropped"):
            if key not in meta:
                fail("%s: otherData lacks %s" % (path, key))
        if meta["dropped"] != 0:
            fail("%s: %d events dropped" % (path, meta["dropped"]))
        if not meta.get("clock_synced"):
            fail("%s: the clock offset was not measured" % path)
        rank = meta["rank"]
        if rank in ranks:
            fail("%s and %s both say rank %d" % (ranks[rank], path, rank))
        ranks[rank] = path
        events = [e for e in doc["traceEvents"] if e["ph"] in ("X", "i")]
        if len(events) != meta.get("events"):
            fail("%s: otherData says %s events, the file has %d" % (path, meta.get("events"), len(events)))
        last = 0.0
        for e in events:
            if e["ts"] < last:
                fail("%s: %s at %.3f comes after an event at %.3f" % (path, e["name"], e["ts"], last))
            last = e["ts"]
            if e["pid"] != rank + 1:
                fail("%s: event %s has pid %s, not rank %d + 1" % (path, e["name"], e["pid"], rank))
            if e.get("args", {}).get("status", 0) != 0:
                fail("%s: %s failed: %s" % (path, e["name"], e["args"]))
        names = set(e["name"] for e in events)
        for r in require:
            if r not in names:
                fail("%s: no %s event (has: %s)" % (path, r, ", ".join(sorted(names))))
        mine = [e for e in events if e["cat"] in ("api", "coll") and e["args"].get("comm") == meta["comm"]]
        got = [e["name"] for e in mine]
        if expect and got != expect:
            fail("%s: calls %s, expected %s" % (path, ",".join(got), ",".join(expect)))
        colls = [e for e in mine if e["cat"] == "coll"]
        seqs = [e["args"]["seq"] for e in colls]
        if seqs != list(range(1, len(colls) + 1)):
            fail("%s: sequence numbers %s, expected 1..%d" % (path, seqs, len(colls)))
        if a.gpu_blocks:
            check_gpu(path, events, meta["comm"], set(seqs), a.gpu_blocks)
        calls[rank] = [(e["name"], e["args"]["size"], e["args"].get("type"), e["args"].get("root")) for e in colls]
        comms.add(meta["comm"])
        print("%s: rank %d of %d, %d events, %d calls, clock offset %d ns (round trip %d ns)" %
              (path, rank, meta["nranks"], len(events), len(colls), meta["clock_offset_ns"], meta["clock_rtt_ns"]))
    n = len(ranks)
    if sorted(ranks) != list(range(n)):
        fail("ranks %s, expected 0..%d" % (sorted(ranks), n - 1))
    if len(comms) != 1:
        fail("the files name %d communicators: %s" % (len(comms), ", ".join(sorted(comms))))
    for r in ranks:
        if calls[r] != calls[0]:
            fail("rank %d made calls %s, rank 0 %s" % (r, calls[r], calls[0]))
    if a.merged:
        check_merged(a.merged, a.files)
    print("trace check passed: %d files" % n)


def check_gpu(path, events, comm, seqs, least):
    # the file's communicator's kernels (a hierarchy's child communicators have calls of their own)
    blocks = [e for e in events if e["cat"] == "gpu" and e["ph"] == "X" and e["args"].get("comm") == comm]
    if len(blocks) < least:
        fail("%s: %d kernel block spans, expected at least %d" % (path, len(blocks), least))
    for e in blocks:
        args = e["args"]
        if args.get("seq") not in seqs:
            fail("%s: kernel %s block %s names call %s, which this file does not have" %
                 (path, e["name"], args.get("block"), args.get("seq")))
        if e["tid"] < (1 << 30):
            fail("%s: kernel %s block %s is on a thread's track (tid %d)" % (path, e["name"], args.get("block"), e["tid"]))
    print("%s: %d kernel block spans, of %d calls" % (path, len(blocks), len(set(e["args"]["seq"] for e in blocks))))


def ns(us):
    return int(round(us * 1000))


def check_merged(path, files):
    job = read(path)
    meta = job["otherData"]
    if not meta.get("merged"):
        fail("%s does not say it is merged" % path)
    want = []
    total = 0
    for f in files:
        doc = read(f)
        off = doc["otherData"]["clock_offset_ns"]
        rank = doc["otherData"]["rank"]
        evs = [e for e in doc["traceEvents"] if e["ph"] in ("X", "i")]
        total += len(evs)
        want += [(rank + 1, e["name"], e["tid"], ns(e["ts"]) + off, ns(e.get("dur", 0))) for e in evs]
    got_events = [e for e in job["traceEvents"] if e["ph"] in ("X", "i")]
    if meta.get("events") != total or len(got_events) != total:
        fail("%s: %s events (otherData %s), the ranks' files have %d" % (path, len(got_events), meta.get("events"), total))
    last = None
    for e in got_events:
        if last is not None and e["ts"] < last:
            fail("%s: %s at %.3f after an event at %.3f" % (path, e["name"], e["ts"], last))
        last = e["ts"]
    got = sorted((e["pid"], e["name"], e["tid"], ns(e["ts"]), ns(e.get("dur", 0))) for e in got_events)
    if got != sorted(want):
        diff = [x for x in sorted(want) if x not in set(got)][:3]
        fail("%s: the merged events are not the ranks' events moved by their clock offsets (e.g. %s)" % (path, diff))
    print("%s: %d events of %d ranks on one clock" % (path, total, len(files)))


if __name__ == "__main__":
    main()
