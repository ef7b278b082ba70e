#!/usr/bin/env python3
"""Per-device totals of a PyTorch memory snapshot, computed the plain Python way (pickle.load,
then loops): the reference oomdoc's tests compare with and the baseline bench/ times it against.

Figures (as oomdoc's --json names them): segments, reserved_bytes, allocated_bytes, active_bytes,
requested_bytes, inactive_bytes, largest_free_block_bytes, trace_events, peak_live_bytes (max
running sum of alloc - free_completed sizes from 0), baseline_bytes (frees with no alloc in the
trace + active blocks the trace never allocated), ooms (event index, size, device_free).

Usage: snapshot_totals.py FILE [--json]  (FILE may be a pickle or JSON). Only for trusted files or
files made by oomdoc's generators: it uses a restricted unpickler that refuses any class.
"""
import json
import pickle
import sys


class PlainDataUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refusing {module}.{name}")


def load(path):
    with open(path, "rb") as f:
        head = f.read(1)
        f.seek(0)
        if head in (b"{", b"["):
            return json.load(f)
        return PlainDataUnpickler(f).load()


def totals(snap):
    if isinstance(snap, list):
        snap = {"segments": snap, "device_traces": []}
    segments = snap.get("segments", [])
    traces = snap.get("device_traces", [])
    devices = sorted({s["device"] for s in segments} | {d for d, t in enumerate(traces) if t})
    out = []
    for d in devices:
        segs = [s for s in segments if s["device"] == d]
        def block_requested(b):
            if "requested_size" in b:
                return b["requested_size"]
            history = b.get("history") or [{}]
            return history[0].get("real_size", b["size"])

        requested = 0
        inactive = 0
        largest = 0
        for s in segs:
            if "requested_size" in s:
                requested += s["requested_size"]
            else:
                for b in s["blocks"]:
                    if b["state"] == "active_allocated":
                        requested += block_requested(b)
            for b in s["blocks"]:
                if b["state"] == "inactive":
                    inactive += b["size"]
                    largest = max(largest, b["size"])
        trace = traces[d] if d < len(traces) else []
        live = {}
        cur = peak = 0
        unmatched = 0
        ooms = []
        for i, e in enumerate(trace):
            a = e["action"]
            if a == "alloc":
                cur += e["size"]
                live[e["addr"]] = e["size"]
                peak = max(peak, cur)
            elif a == "free_completed":
                cur -= e["size"]
                if live.pop(e["addr"], None) is None:
                    unmatched += e["size"]
            elif a == "oom":
                ooms.append({"event_index": i, "requested_bytes": e["size"],
                             "device_free_bytes": e["device_free"]})
        ghosts = 0
        for s in segs:
            addr = s["address"]
            for b in s["blocks"]:
                baddr = b.get("address", addr)
                if b["state"] == "active_allocated" and baddr not in live:
                    ghosts += block_requested(b)
                addr = baddr + b["size"]
        out.append({
            "device": d,
            "segments": len(segs),
            "reserved_bytes": sum(s["total_size"] for s in segs),
            "allocated_bytes": sum(s["allocated_size"] for s in segs),
            "active_bytes": sum(s["active_size"] for s in segs),
            "requested_bytes": requested,
            "inactive_bytes": inactive,
            "largest_free_block_bytes": largest,
            "trace_events": len(trace),
            "peak_live_bytes": peak,
            "baseline_bytes": unmatched + ghosts,
            "ooms": ooms,
        })
    return out


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    result = totals(load(sys.argv[1]))
    if "--json" in sys.argv:
        print(json.dumps(result, indent=1))
    else:
        for d in result:
            print(d)


if __name__ == "__main__":
    main()
