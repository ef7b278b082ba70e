#!/usr/bin/env python3
"""PyTorch's own `_memory_viz.py stats` figures for a snapshot, as exact integers (JSON), to set
beside oomdoc's. Uses the _memory_viz.py that Debian's python3-torch ships (1.13; it only reads
the list of segments, so a dict snapshot's `segments` list is passed to it). The module is loaded
from its file: it needs only the standard library, not torch itself. Its `segments`/`memory`
flamegraph commands need flamegraph.pl from the network and are not compared.

Usage: memory_viz_stats.py FILE [MEMORY_VIZ_PY]
Prints {"segments": N, "total_size": B, "active_allocated": B, "inactive": B, ...} over all devices.
"""
import importlib.util
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from snapshot_totals import load  # noqa: E402

DEFAULT = "/usr/lib/python3/dist-packages/torch/cuda/_memory_viz.py"


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    path = sys.argv[2] if len(sys.argv) > 2 else DEFAULT
    spec = importlib.util.spec_from_file_location("memory_viz_113", path)
    mv = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mv)
    snap = load(sys.argv[1])
    segments = snap if isinstance(snap, list) else snap["segments"]
    result = mv.stats(segments)
    print(json.dumps({k: (v.value if isinstance(v, mv.Bytes) else v) for k, v in result.items()}, sort_keys=True))


if __name__ == "__main__":
    main()
