#!/usr/bin/env python3
"""Writes the small snapshot fixtures under tests/fixtures/snapshot/ (committed) with Python's
standard pickle and json only:

  train_p2/p3/p4/p5.pickle, train.json   one 2-device training run with an oom, a leak, a baseline,
                                          the same object in each encoding (results must be identical)
  train_p4_optimized.pickle               the same through pickletools.optimize: memo stores only for
                                          what is referenced again, so the entry dicts have none
  expandable_p4.pickle                    expandable segments (segment_map/unmap), a private pool,
                                          a wrapped ring buffer (trace_alloc_overflowed)
  list_1_13_p2.pickle                     1.13 layout: a bare list of segments, blocks with history,
                                          no requested_size
  history_2_0_p4.pickle                   2.0 layout: blocks with history, a 1-entry trace
  fragmented_p4.pickle                    an OOM with 48.5 MiB free in the cache and no free block
                                          as large as the 16 MiB request; survived, so the dump differs
  fragmented_no_time.json                 the same without time_us (event index as the time axis)
  values_p2/p4/p5.pickle                  plain values for the reader's own tests
  expected.json                           tools/snapshot_totals.py's figures for each snapshot
  expected_segments.json                  tools/snapshot_segments.py's per-segment view of each

Usage: tools/gen_snapshot_fixtures.py [OUT_DIR]   (default tests/fixtures/snapshot)
"""
import argparse
import copy
import json
import os
import pickle
import pickletools
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_snapshot  # noqa: E402
import snapshot_segments  # noqa: E402
import snapshot_totals  # noqa: E402


def build(**overrides):
    args = argparse.Namespace(steps=3, layers=2, devices=2, expandable=False, private_pool=False,
                              python_stacks=True, max_entries=0, no_oom=False, seed=7)
    for k, v in overrides.items():
        setattr(args, k, v)
    return gen_snapshot.build(args)


def legacy_blocks(snap, keep_requested):
    """Blocks as 1.13/2.0 wrote them: history instead of address/frames."""
    segments = []
    for s in snap["segments"]:
        seg = {k: s[k] for k in ("device", "address", "total_size", "allocated_size", "active_size",
                                 "stream", "segment_type")}
        if keep_requested:
            seg["requested_size"] = s["requested_size"]
        blocks = []
        for b in s["blocks"]:
            nb = {"size": b["size"], "state": b["state"]}
            if keep_requested:
                nb["requested_size"] = b["requested_size"]
            if b["state"] == "active_allocated":
                nb["history"] = [{"addr": b["address"], "real_size": b["requested_size"], "frames": b["frames"]}]
            blocks.append(nb)
        seg["blocks"] = blocks
        segments.append(seg)
    return segments


def fragmented():
    """One device that runs out of memory with 48.5 MiB free in its cache: a 16 MiB request, and no
    segment holds a free block that large (64 MiB cut by live 8 MiB tensors into 8 MiB holes, a
    14 MiB hole on another stream, small pieces). The program survives the OOM (frees, releases a
    segment, frees one more tensor, allocates a new segment), so the layout at the OOM must be
    replayed from the trace: the dump alone shows a merged 24 MiB hole and no 4 MiB segment.
    Every entry carries time_us, 0.25 s apart."""
    MiB = 1 << 20
    s1, s2, s3, s4, s5 = (0x7F0000000000 + i * 0x10000000 for i in range(5))
    user = [{"filename": "/home/user/project/model.py", "line": 42, "name": "forward"},
            {"filename": "/home/user/project/train.py", "line": 88, "name": "train_step"}]
    trace = []

    def event(action, addr, size, stream=0, **extra):
        e = {"action": action, "addr": addr, "size": size, "stream": stream,
             "time_us": 1_717_000_000_000_000 + 250_000 * len(trace), "frames": list(user)}
        e.update(extra)
        trace.append(e)

    event("segment_alloc", s1, 64 * MiB)
    for k in range(8):
        event("alloc", s1 + k * 8 * MiB, 8 * MiB)
    event("segment_alloc", s2, 2 * MiB)
    event("alloc", s2, 512 * 1024)
    event("segment_alloc", s3, 20 * MiB, stream=7)
    event("alloc", s3, 6 * MiB, stream=7)
    event("segment_alloc", s5, 4 * MiB, stream=3)
    event("alloc", s5, 3 * MiB, stream=3)
    for k in (1, 3, 5, 7):
        event("free_requested", s1 + k * 8 * MiB, 8 * MiB)
        event("free_completed", s1 + k * 8 * MiB, 8 * MiB)
    oom = {"action": "oom", "device_free": 2 * MiB, "size": 16 * MiB, "stream": 0,
           "time_us": 1_717_000_000_000_000 + 250_000 * len(trace), "frames": list(user)}
    trace.append(oom)
    # Survives: frees the 3 MiB tensor, empty_cache() releases its segment, frees one more 8 MiB
    # tensor (its hole merges with its neighbours), then retries with a 12 MiB tensor.
    event("free_requested", s5, 3 * MiB, stream=3)
    event("free_completed", s5, 3 * MiB, stream=3)
    event("segment_free", s5, 4 * MiB, stream=3)
    event("free_requested", s1 + 16 * MiB, 8 * MiB)
    event("free_completed", s1 + 16 * MiB, 8 * MiB)
    event("segment_alloc", s4, 12 * MiB)
    event("alloc", s4, 12 * MiB - 100)

    def segment(address, stream, kind, blocks):
        out, addr = [], address
        for size, state, requested in blocks:
            out.append({"address": addr, "size": size, "requested_size": requested, "state": state,
                        "frames": list(user) if state == "active_allocated" else []})
            addr += size
        live = [b for b in out if b["state"] == "active_allocated"]
        return {"device": 0, "address": address, "total_size": sum(b["size"] for b in out),
                "allocated_size": sum(b["size"] for b in live), "active_size": sum(b["size"] for b in live),
                "requested_size": sum(b["requested_size"] for b in live), "stream": stream,
                "segment_type": kind, "segment_pool_id": (0, 0), "is_expandable": False,
                "frames": list(user), "blocks": out}

    A, I = "active_allocated", "inactive"
    segments = [
        segment(s1, 0, "large", [(8 * MiB, A, 8 * MiB), (24 * MiB, I, 8 * MiB), (8 * MiB, A, 8 * MiB),
                                 (8 * MiB, I, 8 * MiB), (8 * MiB, A, 8 * MiB), (8 * MiB, I, 8 * MiB)]),
        segment(s2, 0, "small", [(512 * 1024, A, 512 * 1024), (1536 * 1024, I, 0)]),
        segment(s3, 7, "large", [(6 * MiB, A, 6 * MiB), (14 * MiB, I, 0)]),
        segment(s4, 0, "large", [(12 * MiB, A, 12 * MiB - 100)]),
    ]
    settings = {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1, "garbage_collection_threshold": 0.0,
                "expandable_segments": False}
    return {"segments": segments, "device_traces": [trace], "allocator_settings": settings,
            "external_annotations": []}


def two_devices_oom():
    """Two devices that each run out of memory (device 0 twice): the headline must name both, and
    device 0's segment table is at the first of its two OOMs. No time_us."""
    MiB = 1 << 20
    user = [{"filename": "/home/user/project/model.py", "line": 7, "name": "forward"}]

    def event(action, addr, size, **extra):
        e = {"action": action, "addr": addr, "size": size, "stream": 0, "frames": list(user)}
        e.update(extra)
        return e

    a0, a1 = 0x7E0000000000, 0x7D0000000000
    trace0 = [event("segment_alloc", a0, 20 * MiB), event("alloc", a0, 8 * MiB), event("alloc", a0 + 8 * MiB, 8 * MiB),
              event("oom", 0, 16 * MiB, device_free=1 * MiB), event("oom", 0, 8 * MiB, device_free=1 * MiB)]
    trace1 = [event("segment_alloc", a1, 2 * MiB), event("alloc", a1, 2 * MiB),
              event("oom", 0, 80 * MiB, device_free=3 * MiB)]

    def segment(device, address, total, live):
        blocks = [{"address": address, "size": live, "requested_size": live, "state": "active_allocated",
                   "frames": list(user)}]
        if total > live:
            blocks.append({"address": address + live, "size": total - live, "requested_size": 0,
                           "state": "inactive", "frames": []})
        return {"device": device, "address": address, "total_size": total, "allocated_size": live,
                "active_size": live, "requested_size": live, "stream": 0, "segment_type": "large",
                "segment_pool_id": (0, 0), "is_expandable": False, "frames": list(user), "blocks": blocks}

    return {"segments": [segment(0, a0, 20 * MiB, 16 * MiB), segment(1, a1, 2 * MiB, 2 * MiB)],
            "device_traces": [trace0, trace1]}


def negative_device():
    """A segment of device -1: no CUDA ordinal, a damaged file (the reader refuses it)."""
    return {"segments": [{"device": -1, "address": 0x7F0000000000, "total_size": 2 << 20, "allocated_size": 0,
                          "active_size": 0, "requested_size": 0, "stream": 0, "segment_type": "large",
                          "blocks": [{"address": 0x7F0000000000, "size": 2 << 20, "requested_size": 0,
                                      "state": "inactive", "frames": []}]}],
            "device_traces": []}


def values(protocol):
    shared = {"filename": "x.py", "line": 1, "name": "f"}
    ints = [0, 1, 255, 256, 65535, 65536, -1, -256, 2**31 - 1, -2**31, 2**31, 2**48 + 5,
            2**63 - 1, -2**63, 2**63, 2**64 - 1, 2**64, -2**63 - 1, 10**30]
    v = {
        "ints": ints,
        "floats": [0.5, -0.0, 1e300, float("inf")],
        "strings": ["", "ascii", "ünïcödé ✓", "x" * 300],
        "nested": [[[]], {}, (), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4)],
        "shared": [shared, shared, [shared]],
        "big_list": list(range(2500)),
        "big_dict": {f"k{i}": i for i in range(1200)},
        "flags": [True, False, None],
    }
    if protocol >= 4:  # protocol 2 writes bytes and sets with GLOBAL/REDUCE, which oomdoc refuses
        v.update({"bytes": b"\x00\x01\xff", "set": {1, 2, 3}, "frozenset": frozenset({4})})
    return v


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "snapshot")
    os.makedirs(out, exist_ok=True)
    expected = {}

    def write(name, obj, protocol=None):
        path = os.path.join(out, name)
        if protocol is None:
            with open(path, "w") as f:
                json.dump(obj, f)
        else:
            with open(path, "wb") as f:
                pickle.dump(obj, f, protocol=protocol)
        return path

    train = build()
    for p in (2, 3, 4, 5):
        write(f"train_p{p}.pickle", train, p)
    with open(os.path.join(out, "train_p4_optimized.pickle"), "wb") as f:
        f.write(pickletools.optimize(pickle.dumps(train, protocol=4)))
    write("train.json", json.loads(json.dumps(train)))  # tuples become lists, as JSON has them
    expected["train"] = snapshot_totals.totals(train)

    expandable = build(expandable=True, private_pool=True, max_entries=100, devices=1, steps=4)
    write("expandable_p4.pickle", expandable, 4)
    expected["expandable_p4.pickle"] = snapshot_totals.totals(expandable)

    listed = legacy_blocks(build(devices=1, no_oom=True), keep_requested=False)
    write("list_1_13_p2.pickle", listed, 2)
    expected["list_1_13_p2.pickle"] = snapshot_totals.totals(listed)

    hist_src = build(devices=1, no_oom=True)
    history = {"segments": legacy_blocks(hist_src, keep_requested=True),
               "device_traces": [[{"action": "snapshot", "addr": 0,
                                   "size": sum(s["active_size"] for s in hist_src["segments"]),
                                   "stream": 0}]]}
    write("history_2_0_p4.pickle", history, 4)
    expected["history_2_0_p4.pickle"] = snapshot_totals.totals(history)

    frag = fragmented()
    write("fragmented_p4.pickle", frag, 4)
    expected["fragmented_p4.pickle"] = snapshot_totals.totals(frag)
    untimed = copy.deepcopy(frag)  # as before ~2.2: no time_us, so the event index is the time axis
    for e in untimed["device_traces"][0]:
        del e["time_us"]
    write("fragmented_no_time.json", json.loads(json.dumps(untimed)))

    for p in (2, 4, 5):
        write(f"values_p{p}.pickle", values(p), p)

    write("two_devices_oom_p4.pickle", two_devices_oom(), 4)
    write("negative_device_p4.pickle", negative_device(), 4)
    write("negative_device.json", negative_device())

    # The per-segment fragmentation view (tools/snapshot_segments.py) of each snapshot.
    segments = {"train": snapshot_segments.fragmentation(train),
                "expandable_p4.pickle": snapshot_segments.fragmentation(expandable),
                "list_1_13_p2.pickle": snapshot_segments.fragmentation(listed),
                "history_2_0_p4.pickle": snapshot_segments.fragmentation(history),
                "fragmented_p4.pickle": snapshot_segments.fragmentation(frag),
                "fragmented_no_time.json": snapshot_segments.fragmentation(untimed)}
    with open(os.path.join(out, "expected_segments.json"), "w") as f:
        json.dump(segments, f, indent=1, sort_keys=True)
        f.write("\n")

    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")
    for name in sorted(os.listdir(out)):
        print(f"{name}: {os.path.getsize(os.path.join(out, name))} bytes")


if __name__ == "__main__":
    main()
