#!/usr/bin/env python3
"""Re-encodes snapshot files with Python's standard pickle (protocols 2, 3, 5) and json, for the
corpus test's "every encoding gives identical results" check. The variants are written under
OUT_DIR (a build directory), never beside the corpus. Files are loaded with a restricted
unpickler that refuses any class.

Usage: gen_corpus_variants.py OUT_DIR FILE...
Writes OUT_DIR/<name>.p2.pickle, .p3.pickle, .p5.pickle and .json for each FILE.
"""
import json
import os
import pickle
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from snapshot_totals import load  # noqa: E402


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for path in sys.argv[2:]:
        name = os.path.basename(path)
        snap = load(path)
        for protocol in (2, 3, 5):
            with open(os.path.join(out, f"{name}.p{protocol}.pickle"), "wb") as f:
                pickle.dump(snap, f, protocol=protocol)
        with open(os.path.join(out, f"{name}.json"), "w") as f:
            json.dump(snap, f)


if __name__ == "__main__":
    main()
