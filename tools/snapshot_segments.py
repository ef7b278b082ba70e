#!/usr/bin/env python3
"""The per-segment fragmentation view of a PyTorch memory snapshot, computed the plain Python way
(pickle.load, then loops): the reference oomdoc's tests compare `oomdoc snapshot --json`'s
devices[].fragmentation with.

For each device, at its first `oom` trace entry (else at dump time), every segment with: address,
size_bytes, segment_type ("large"/"small", None when unknown), stream, allocated_bytes, free_bytes,
largest_free_block_bytes, blocks, free_blocks, unusable_free_bytes, most unusable first (then most
free, then by address); plus free_bytes, unusable_free_bytes, largest_free_block_bytes and
segments_fitting_request over the device.

  * At dump: a segment's own blocks; free = inactive blocks; allocated = active_allocated blocks;
    unusable = the free bytes of a segment whose active_size is not 0 (stranded beside live blocks).
  * At an OOM: the layout just after the oom entry, rebuilt by undoing every later trace event from
    the dump (alloc -> block gone, free_completed -> block back at the request rounded up to 512,
    segment_alloc -> segment gone, segment_free -> segment back with the event's stream and an
    unknown type, segment_map/unmap -> the range unmapped/mapped again); free blocks are the gaps
    between live blocks; unusable = the free blocks smaller than the failed request.

Usage: snapshot_segments.py FILE [--json]. Trusted files only (see snapshot_totals.py).
"""
import json
import sys

from snapshot_totals import load


def round_block(n):
    return max(512, (n + 511) // 512 * 512)


def at_dump(segs):
    out = []
    for s in segs:
        free = [b["size"] for b in s["blocks"] if b["state"] == "inactive"]
        out.append({
            "address": s["address"], "size_bytes": s["total_size"], "segment_type": s["segment_type"],
            "stream": s["stream"],
            "allocated_bytes": sum(b["size"] for b in s["blocks"] if b["state"] == "active_allocated"),
            "free_bytes": sum(free), "largest_free_block_bytes": max(free, default=0),
            "blocks": len(s["blocks"]), "free_blocks": len(free),
            "unusable_free_bytes": sum(free) if s["active_size"] else 0,
        })
    return out


def at_oom(segs, trace, index):
    request = trace[index]["size"]
    segments = {s["address"]: {"size": s["total_size"], "type": s["segment_type"], "stream": s["stream"]}
                for s in segs}
    blocks = {}
    for s in segs:
        addr = s["address"]
        for b in s["blocks"]:
            addr = b.get("address", addr)
            if b["state"] != "inactive":
                blocks[addr] = b["size"]
            addr += b["size"]
    for e in reversed(trace[index + 1:]):
        a = e["action"]
        if a == "alloc":
            blocks.pop(e["addr"], None)
        elif a == "free_completed":
            blocks[e["addr"]] = round_block(e["size"])
        elif a == "segment_alloc":
            segments.pop(e["addr"], None)
        elif a == "segment_free":
            segments[e["addr"]] = {"size": e["size"], "type": None, "stream": e.get("stream", 0)}
        elif a == "segment_map":
            base = max((b for b in segments if b <= e["addr"]), default=None)
            if base is not None:
                seg = segments[base]
                if base == e["addr"] and seg["size"] <= e["size"]:
                    del segments[base]
                elif base + seg["size"] >= e["addr"] + e["size"] and seg["size"] > e["size"]:
                    seg["size"] -= e["size"]
        elif a == "segment_unmap":
            base = max((b for b in segments if b <= e["addr"]), default=None)
            if base is not None and base + segments[base]["size"] == e["addr"]:
                segments[base]["size"] += e["size"]
            else:
                segments[e["addr"]] = {"size": e["size"], "type": None, "stream": e.get("stream", 0)}
    out = []
    for base in sorted(segments):
        seg = segments[base]
        end = base + seg["size"]
        live = sorted((a, n) for a, n in blocks.items() if base <= a < end)
        gaps = []
        cursor = base
        for a, n in live:
            if a > cursor:
                gaps.append(a - cursor)
            cursor = max(cursor, a + n)
        if end > cursor:
            gaps.append(end - cursor)
        out.append({
            "address": base, "size_bytes": seg["size"], "segment_type": seg["type"], "stream": seg["stream"],
            "allocated_bytes": sum(n for _, n in live), "free_bytes": sum(gaps),
            "largest_free_block_bytes": max(gaps, default=0), "blocks": len(live) + len(gaps),
            "free_blocks": len(gaps), "unusable_free_bytes": sum(g for g in gaps if g < request),
        })
    return out, request


def fragmentation(snap):
    if isinstance(snap, list):
        snap = {"segments": snap, "device_traces": []}
    segments = snap.get("segments", [])
    traces = snap.get("device_traces", [])
    devices = sorted({s["device"] for s in segments} | {d for d, t in enumerate(traces) if t})
    result = []
    for d in devices:
        segs = sorted((s for s in segments if s["device"] == d), key=lambda s: s["address"])
        trace = traces[d] if d < len(traces) else []
        oom = next((i for i, e in enumerate(trace) if e["action"] == "oom"), None)
        request = None
        if oom is None:
            rows = at_dump(segs)
        else:
            rows, request = at_oom(segs, trace, oom)
        rows.sort(key=lambda r: (-r["unusable_free_bytes"], -r["free_bytes"], r["address"]))
        result.append({
            "device": d, "at": "dump" if oom is None else "oom", "oom_event_index": oom,
            "requested_bytes": request,
            "free_bytes": sum(r["free_bytes"] for r in rows),
            "unusable_free_bytes": sum(r["unusable_free_bytes"] for r in rows),
            "largest_free_block_bytes": max((r["largest_free_block_bytes"] for r in rows), default=0),
            "segments_fitting_request": None if request is None else
            sum(1 for r in rows if r["largest_free_block_bytes"] >= request),
            "segments": rows,
        })
    return result


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    result = fragmentation(load(sys.argv[1]))
    if "--json" in sys.argv:
        print(json.dumps(result, indent=1))
        return
    for d in result:
        print({k: v for k, v in d.items() if k != "segments"})
        for r in d["segments"][:10]:
            print("  ", r)


if __name__ == "__main__":
    main()
