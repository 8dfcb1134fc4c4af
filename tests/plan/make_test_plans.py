#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the hand-made execution plans of tests/plan/data/ (MSCCL++'s JSON
format, written out op by op, not through a DSL), small enough to read, that
together use every operation the executor has:

  allgather_mem_2        memory channels: copy, put, rlxsignal/rlxwait, signal/wait
  allgather_port_4       port channels, in place: signal/wait, pws, put + signal, pwsf, flush
  allgather_ll_2         LL: cpkt, rppkt, upkt, copy
  allreduce_ll_2         LL: ppkt, respkt, upkt (double scratch)
  allreduce_ll_3         LL, in place: ppkt, recpkt, rppkt, upkt
  allreduce_ll_4         LL: fused ppkt, recspkt, upkt
  allreduce_res_2        put into the peer's scratch, res
  allreduce_rres_4       rres, nop
  reducescatter_ll_2     LL: ppkt, repkt
  reducescatter_re_2     put, re
  reducescatter_rre_4    rre over a thread block group of 2, barrier, sem_release/sem_acquire
  alltoall_get_2         get inside a pipeline, copy

and, in tests/plan/bad/, plans with one thing wrong each and, in
bad/expected.txt, a line "file<TAB>text" per plan: the loader must refuse the
plan with a message containing that text (test_plan_load).

Run it from the repository root after changing it: python3 tests/plan/make_test_plans.py
"""
import json
import os

import copy

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
BAD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bad")


def plan(name, coll, n, gpus, protocol="Simple", inplace=False, double=False):
    return {
        "name": name,
        "collective": coll,
        "protocol": protocol,
        "inplace": inplace,
        "reuse_resources": False,
        "gpus": gpus,
        "num_threads_per_block": 1024,
        "use_double_scratch_buffer": double,
        "buffer_alignment": 16,
        "min_message_size": 0,
        "max_message_size": 2**64 - 1,
    }


def gpu(r, inc, outc, scr, channels, remotes, tbs, sems=None):
    g = {
        "id": r,
        "input_chunks": inc,
        "output_chunks": outc,
        "scratch_chunks": scr,
        "threadblocks": tbs,
        "channels": channels,
        "remote_buffers": [{"rank": q, "type": t, "access_channel_types": [a]} for (q, t, a) in remotes],
    }
    if sems is not None:
        g["semaphores"] = [{"init_value": v} for v in sems]
    return g


def tb(i, ops, mem=(), port=(), mem_refs=(), port_refs=()):
    chans, refs = [], []
    if mem:
        chans.append({"channel_type": "memory", "channel_ids": list(mem)})
    if port:
        chans.append({"channel_type": "port", "channel_ids": list(port)})
    if mem_refs:
        refs.append({"access_channel_type": "memory", "remote_buffer_ids": list(mem_refs)})
    if port_refs:
        refs.append({"access_channel_type": "port", "remote_buffer_ids": list(port_refs)})
    return {"id": i, "ops": ops, "channels": chans, "remote_buffer_refs": refs}


def L(t, i, s=1):
    return {"type": t, "index": i, "size": s}


def R(b, i, s=1):
    return {"buffer_id": b, "index": i, "size": s}


def op(name, src=None, dst=None, ch=None, ct=None, **kw):
    o = {"name": name}
    if src is not None:
        o["src_buff"] = src
    if dst is not None:
        o["dst_buff"] = dst
    if ch is not None:
        o["channel_ids"] = ch
    if ct is not None:
        o["channel_type"] = ct
    o.update(kw)
    return o


def peers(r, n):
    return [q for q in range(n) if q != r]


def slot(at, sender):
    """The slot of `sender` among rank `at`'s n-1 peers."""
    return sender if sender < at else sender - 1


def mem_channels(r, n):
    return [{"channel_type": "memory", "connected_to": peers(r, n)}]


def handshake(m, ct="memory", relaxed=True):
    ids = list(range(m))
    s, w = ("rlxsignal", "rlxwait") if relaxed else ("signal", "wait")
    return [op(s, ch=ids, ct=ct), op(w, ch=ids, ct=ct)]


def done_sync(m, ct="memory"):
    ids = list(range(m))
    return [op("signal", ch=ids, ct=ct), op("wait", ch=ids, ct=ct)]


def allgather_mem_2():
    n, gs = 2, []
    for r in range(n):
        p = 1 - r
        ops = handshake(1) + [
            op("copy", [L("i", 0)], [L("o", r)]),
            op("put", [L("i", 0)], [R(0, r)], ct="memory"),
        ] + done_sync(1)
        gs.append(gpu(r, 1, n, 0, mem_channels(r, n), [(p, "o", "memory")], [tb(0, ops, mem=[0], mem_refs=[0])]))
    return plan("test_allgather_mem_2", "allgather", n, gs)


def allgather_port_4():
    n, gs = 4, []
    for r in range(n):
        ps = peers(r, n)
        ops = handshake(3, "port", relaxed=False) + [
            op("pws", [L("o", r)], [R(0, r)], ch=[0], ct="port"),
            op("put", [L("o", r)], [R(1, r)], ch=[1], ct="port"),
            op("signal", ch=[1], ct="port"),
            op("pwsf", [L("o", r)], [R(2, r)], ch=[2], ct="port"),
            op("wait", ch=[0, 1, 2], ct="port"),
            op("flush", ch=[0, 1, 2], ct="port"),
        ]
        gs.append(gpu(r, 1, n, 0, [{"channel_type": "port", "connected_to": ps}], [(q, "o", "port") for q in ps],
                      [tb(0, ops, port=[0, 1, 2], port_refs=[0, 1, 2])]))
    return plan("test_allgather_port_4", "allgather", n, gs, inplace=True)


def allgather_ll_2():
    n, gs = 2, []
    for r in range(n):
        p = 1 - r
        ops = [
            op("cpkt", [L("i", 0)], [L("s", 0)]),
            op("rppkt", [L("s", 0)], [R(0, 1)], ct="memory"),
            op("copy", [L("i", 0)], [L("o", r)]),
            op("upkt", [L("s", 1)], [L("o", p)]),
        ]
        gs.append(gpu(r, 1, n, 2, mem_channels(r, n), [(p, "s", "memory")], [tb(0, ops, mem=[0], mem_refs=[0])]))
    return plan("test_allgather_ll_2", "allgather", n, gs, protocol="LL", double=True)


def allreduce_ll_2():
    n, gs = 2, []
    for r in range(n):
        p = 1 - r
        ops = [
            op("ppkt", [L("i", p)], [R(0, 0)], ct="memory"),
            op("respkt", [L("i", r), L("s", 0)], [L("o", r), R(0, 1)], ct="memory", reduce_op="sum"),
            op("upkt", [L("s", 1)], [L("o", p)]),
        ]
        gs.append(gpu(r, n, n, 2, mem_channels(r, n), [(p, "s", "memory")], [tb(0, ops, mem=[0], mem_refs=[0])]))
    return plan("test_allreduce_ll_2", "allreduce", n, gs, protocol="LL", double=True)


def allreduce_ll_3():
    """In place: the result of the rank's chunk is reduced into the input."""
    n, gs = 3, []
    for r in range(n):
        ps = peers(r, n)
        ops = [
            op("ppkt", [L("i", q) for q in ps], [R(k, slot(q, r)) for k, q in enumerate(ps)], ct="memory"),
            op("recpkt", [L("i", r)] + [L("s", slot(r, q)) for q in ps], [L("i", r), L("s", 4)], reduce_op="sum"),
            op("rppkt", [L("s", 4)], [R(k, 2 + slot(q, r)) for k, q in enumerate(ps)], ct="memory"),
        ] + [op("upkt", [L("s", 2 + slot(r, q))], [L("i", q)]) for q in ps]
        gs.append(gpu(r, n, n, 5, mem_channels(r, n), [(q, "s", "memory") for q in ps],
                      [tb(0, ops, mem=[0, 1], mem_refs=[0, 1])]))
    return plan("test_allreduce_ll_3", "allreduce", n, gs, protocol="LL", inplace=True, double=True)


def allreduce_ll_4():
    n, gs = 4, []
    for r in range(n):
        ps = peers(r, n)
        ops = [
            op("ppkt", [L("i", q) for q in ps], [R(k, slot(q, r)) for k, q in enumerate(ps)], ct="memory"),
            op("recspkt", [L("i", r)] + [L("s", slot(r, q)) for q in ps],
               [L("o", r), L("s", 6)] + [R(k, 3 + slot(q, r)) for k, q in enumerate(ps)], ct="memory",
               reduce_op="sum"),
        ] + [op("upkt", [L("s", 3 + slot(r, q))], [L("o", q)]) for q in ps]
        gs.append(gpu(r, n, n, 7, mem_channels(r, n), [(q, "s", "memory") for q in ps],
                      [tb(0, ops, mem=[0, 1, 2], mem_refs=[0, 1, 2])]))
    return plan("test_allreduce_ll_4", "allreduce", n, gs, protocol="LL", double=True)


def allreduce_res_2():
    n, gs = 2, []
    for r in range(n):
        p = 1 - r
        ops = handshake(1) + [
            op("put", [L("i", p)], [R(0, 0)], ct="memory"),
        ] + done_sync(1) + [
            op("res", [L("i", r), L("s", 0)], [L("o", r), R(1, r)], ct="memory", reduce_op="sum"),
        ] + done_sync(1)
        gs.append(gpu(r, n, n, 1, mem_channels(r, n), [(p, "s", "memory"), (p, "o", "memory")],
                      [tb(0, ops, mem=[0], mem_refs=[0, 1])]))
    return plan("test_allreduce_res_2", "allreduce", n, gs)


def allreduce_rres_4():
    n, gs = 4, []
    for r in range(n):
        ps = peers(r, n)
        # remote buffers: the peers' inputs (0..2), then their outputs (3..5)
        remotes = [(q, "i", "memory") for q in ps] + [(q, "o", "memory") for q in ps]
        ops = [op("nop")] + handshake(3) + [
            op("rres", [L("i", r)] + [R(k, r) for k in range(3)], [L("o", r)] + [R(3 + k, r) for k in range(3)],
               ct="memory", reduce_op="sum"),
            op("nop"),
        ] + done_sync(3)
        gs.append(gpu(r, n, n, 0, mem_channels(r, n), remotes,
                      [tb(0, ops, mem=[0, 1, 2], mem_refs=list(range(6)))]))
    return plan("test_allreduce_rres_4", "allreduce", n, gs)


def reducescatter_ll_2():
    n, gs = 2, []
    for r in range(n):
        p = 1 - r
        ops = [
            op("ppkt", [L("i", p)], [R(0, 0)], ct="memory"),
            op("repkt", [L("i", r), L("s", 0)], [L("o", 0)], reduce_op="sum"),
        ]
        gs.append(gpu(r, n, 1, 1, mem_channels(r, n), [(p, "s", "memory")], [tb(0, ops, mem=[0], mem_refs=[0])]))
    return plan("test_reducescatter_ll_2", "reducescatter", n, gs, protocol="LL", double=True)


def reducescatter_re_2():
    n, gs = 2, []
    for r in range(n):
        p = 1 - r
        ops = handshake(1) + [
            op("put", [L("i", p)], [R(0, 0)], ct="memory"),
        ] + done_sync(1) + [
            op("re", [L("i", r), L("s", 0)], [L("o", 0)], reduce_op="sum"),
        ]
        gs.append(gpu(r, n, 1, 1, mem_channels(r, n), [(p, "s", "memory")], [tb(0, ops, mem=[0], mem_refs=[0])]))
    return plan("test_reducescatter_re_2", "reducescatter", n, gs)


def reducescatter_rre_4():
    """Two thread blocks read-reduce one half each; the first waits for the
    second (a semaphore to start, a barrier to end) around the exchange."""
    n, gs = 4, []
    for r in range(n):
        ps = peers(r, n)
        src = [L("i", r)] + [R(k, r) for k in range(3)]
        tb0 = handshake(3) + [
            op("sem_release", semaphore_ids=[0]),
            op("rre", src, [L("o", 0)], ct="memory", reduce_op="sum", tbg_info={"tb_id": 0, "tbg_size": 2}),
            op("barrier", barrier_id=0, num_threadblocks=2),
        ] + done_sync(3)
        tb1 = [
            op("sem_acquire", semaphore_ids=[0]),
            op("rre", src, [L("o", 0)], ct="memory", reduce_op="sum", tbg_info={"tb_id": 1, "tbg_size": 2}),
            op("barrier", barrier_id=0, num_threadblocks=2),
        ]
        gs.append(gpu(r, n, 1, 0, mem_channels(r, n), [(q, "i", "memory") for q in ps],
                      [tb(0, tb0, mem=[0, 1, 2], mem_refs=[0, 1, 2]), tb(1, tb1, mem_refs=[0, 1, 2])], sems=[0]))
    return plan("test_reducescatter_rre_4", "reducescatter", n, gs)


def alltoall_get_2():
    """Each rank gets its block from the peer's input, 64 bytes per pipeline step."""
    n, k, gs = 2, 2, []
    for r in range(n):
        p = 1 - r
        ops = handshake(1, relaxed=False) + [
            op("pipeline", iter_context={"unit_size": 64, "num_chunks": k},
               ops=[op("get", [R(0, k * r, k)], [L("o", k * p, k)], ch=[0], ct="memory")]),
            op("copy", [L("i", k * r, k)], [L("o", k * r, k)]),
        ] + done_sync(1)
        gs.append(gpu(r, n * k, n * k, 0, mem_channels(r, n), [(p, "i", "memory")],
                      [tb(0, ops, mem=[0], mem_refs=[0])]))
    return plan("test_alltoall_get_2", "alltoall", n, gs)


PLANS = [allgather_mem_2, allgather_port_4, allgather_ll_2, allreduce_ll_2, allreduce_ll_3, allreduce_ll_4,
         allreduce_res_2, allreduce_rres_4, reducescatter_ll_2, reducescatter_re_2, reducescatter_rre_4,
         alltoall_get_2]

def bad_plans():
    """(name, plan text, expected message part): one thing wrong in each."""
    out = []

    def mutate(name, make, change, expect):
        p = copy.deepcopy(make())
        change(p)
        out.append((name, json.dumps(p, indent=1) + "\n", expect))

    def ops(p, r=0, t=0):
        return p["gpus"][r]["threadblocks"][t]["ops"]

    out.append(("not_json", '{"name": "x",, "gpus": []}\n', "not valid JSON: line 1, column 14"))
    out.append(("duplicate_key", '{"name": "x", "name": "y"}\n', "duplicate object key"))
    out.append(("not_object", '[1, 2]\n', "the plan must be a JSON object, got an array"))
    mutate("missing_field", allgather_mem_2, lambda p: p["gpus"][0].pop("input_chunks"),
           "gpus[0].input_chunks is missing")
    mutate("wrong_type", allgather_mem_2, lambda p: p.update(inplace="yes"),
           'inplace must be true or false, got "yes"')
    mutate("not_whole", allgather_mem_2, lambda p: ops(p)[3]["src_buff"][0].update(index=1.5),
           "gpus[0].threadblocks[0].ops[3].src_buff[0].index must be a whole number from 0 to 4294967295, got 1.5")
    mutate("unknown_collective", allgather_mem_2, lambda p: p.update(collective="broadcast"),
           'collective "broadcast" is not one the executor runs')
    mutate("unknown_op", allgather_mem_2, lambda p: ops(p, 1)[2].update(name="frobnicate"),
           'gpus[1].threadblocks[0].ops[2].name "frobnicate" is not an operation')
    mutate("chunk_index", allreduce_rres_4, lambda p: ops(p, 1)[3]["src_buff"][0].update(index=40),
           "gpus[1].threadblocks[0].ops[3].src_buff[0].index 40 is out of range: input has 4 chunks")
    mutate("chunk_range", allreduce_rres_4, lambda p: ops(p, 1)[3]["dst_buff"][1].update(size=4),
           "gpus[1].threadblocks[0].ops[3].dst_buff[1]: chunks 1 to 4 (index 1, size 4) are out of range: "
           "rank 0's output has 4 chunks")
    mutate("channel_id", allgather_mem_2, lambda p: ops(p)[0].update(channel_ids=[5]),
           "gpus[0].threadblocks[0].ops[0].channel_ids[0] 5 is out of range: the thread block has 1 memory channels")
    mutate("peer_rank", allgather_mem_2, lambda p: p["gpus"][1]["channels"][0].update(connected_to=[7]),
           "gpus[1].channels[0].connected_to[0] 7 is out of range: the plan has 2 ranks")
    mutate("remote_rank", allgather_mem_2, lambda p: p["gpus"][0]["remote_buffers"][0].update(rank=2),
           "gpus[0].remote_buffers[0].rank 2 is out of range: the plan has 2 ranks")
    mutate("remote_access", allgather_mem_2,
           lambda p: p["gpus"][0]["threadblocks"][0]["remote_buffer_refs"][0].update(access_channel_type="port"),
           "remote buffer 0 of rank 0 is not reached over port channels")
    mutate("threadblock_id", allgather_mem_2, lambda p: p["gpus"][0]["threadblocks"][0].update(id=3),
           "gpus[0].threadblocks[0].id is 3")
    mutate("gpu_id", allgather_mem_2, lambda p: p["gpus"][1].update(id=0), "gpus[1].id is 0")
    mutate("barrier_blocks", reducescatter_rre_4, lambda p: ops(p, 2)[4].update(num_threadblocks=3),
           "gpus[2].threadblocks[0].ops[4].num_threadblocks 3 is more than rank 2's 2 thread blocks")
    mutate("barrier_never", reducescatter_rre_4, lambda p: ops(p, 3, 1).pop(),
           "gpus[3]: barrier 0 waits for num_threadblocks 2 thread blocks but 1 of rank 3's thread blocks use it")
    mutate("semaphore_id", reducescatter_rre_4, lambda p: ops(p, 0, 1)[0].update(semaphore_ids=[4]),
           "gpus[0].threadblocks[1].ops[0].semaphore_ids[0] 4 is out of range: rank 0 has 1 semaphores")
    mutate("switch_channel", allgather_mem_2, lambda p: p["gpus"][0]["channels"].append(
        {"channel_type": "switch", "buffer_type": "o", "rank_groups": [{"size": 2, "ranks": [0, 1]}]}),
           "gpus[0].channels[1].channel_type \"switch\": switch channels (NVLS multicast) are not supported: "
           "multicast is not allowed")
    mutate("switch_op", allgather_mem_2, lambda p: ops(p)[3].update(name="glres"),
           "gpus[0].threadblocks[0].ops[3].name \"glres\": switch channels (NVLS multicast) are not supported")
    mutate("packets_simple", allgather_ll_2, lambda p: p.update(protocol="Simple"),
           'gpus[0].threadblocks[0].ops[0]: cpkt is an LL packet operation, but the plan\'s protocol is "Simple"')
    mutate("signal_wait", allgather_mem_2, lambda p: ops(p, 1).pop(),
           "rank 0 signals rank 1 2 times on its memory channel 0 (channel number 0 to rank 1), but rank 1 waits 1 "
           "times on its counterpart")
    mutate("port_peer", allgather_port_4, lambda p: ops(p, 1)[2].update(channel_ids=[1]),
           "gpus[1].threadblocks[0].ops[2]: dst_buff[0] is rank 0's buffer but channel_ids[0] is a port channel to "
           "rank 2")
    mutate("pipelined_packets", allreduce_ll_2, lambda p: ops(p).insert(0, op(
        "pipeline", iter_context={"unit_size": 64, "num_chunks": 1}, ops=[op("upkt", [L("s", 1)], [L("o", 0)])])),
           "gpus[0].threadblocks[0].ops[0].ops[0]: upkt cannot be inside a pipeline")
    mutate("sizes", allgather_mem_2, lambda p: p.update(min_message_size=100, max_message_size=10),
           "min_message_size 100 is more than max_message_size 10")
    mutate("blocks", allgather_mem_2, lambda p: p["gpus"][1].update(output_chunks=3),
           "gpus[1]: input_chunks 1 and output_chunks 3 do not cut allgather's blocks")
    return out


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    for make in PLANS:
        with open(os.path.join(OUT, make.__name__ + ".json"), "w") as f:
            json.dump(make(), f, indent=1)
            f.write("\n")
    os.makedirs(BAD, exist_ok=True)
    bad = bad_plans()
    with open(os.path.join(BAD, "expected.txt"), "w") as exp:
        exp.write("# file<TAB>text the loader's message contains (make_test_plans.py writes it)\n")
        for name, text, expect in bad:
            with open(os.path.join(BAD, name + ".json"), "w") as f:
                f.write(text)
            exp.write("%s.json\t%s\n" % (name, expect))
    print("wrote %d plans to %s and %d bad ones to %s" % (len(PLANS), OUT, len(bad), BAD))
