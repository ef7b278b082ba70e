#!/usr/bin/env python3
"""Writes the small snapshot fixtures under tests/fixtures/snapshot/ (committed) with Python's
standard pickle and json only:

  train_p2/p3/p4/p5.pickle, train.json   one 2-device training run with an oom, a leak, a baseline,
                                          the same object in each encoding (results must be identical)
  expandable_p4.pickle                    expandable segments (segment_map/unmap), a private pool,
                                          a wrapped ring buffer (trace_alloc_overflowed)
  list_1_13_p2.pickle                     1.13 layout: a bare list of segments, blocks with history,
                                          no requested_size
  history_2_0_p4.pickle                   2.0 layout: blocks with history, a 1-entry trace
  values_p2/p4/p5.pickle                  plain values for the reader's own tests
  expected.json                           tools/snapshot_totals.py's figures for each snapshot

Usage: tools/gen_snapshot_fixtures.py [OUT_DIR]   (default tests/fixtures/snapshot)
"""
import argparse
import copy
import json
import os
import pickle
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_snapshot  # noqa: E402
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

    for p in (2, 4, 5):
        write(f"values_p{p}.pickle", values(p), p)

    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")
    for name in sorted(os.listdir(out)):
        print(f"{name}: {os.path.getsize(os.path.join(out, name))} bytes")


if __name__ == "__main__":
    main()
