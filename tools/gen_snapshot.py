#!/usr/bin/env python3
"""Writes realistic synthetic PyTorch memory snapshots (the 2.1+ `_dump_snapshot` layout), from a
few KB to several GB, for oomdoc's tests and benchmarks. Standard library only.

What it models (see ../shared/docs/snapshot-format.md):
  * a caching allocator per device: 512-byte rounding, a small pool (<= 1 MiB, 2 MiB segments) and a
    large pool (segments rounded to 2 MiB), blocks reused by exact size, so `segments` at the end
    agree with the trace (sum of blocks == total_size, states, requested sizes);
  * training steps (forward activations, backward frees, optimizer state), a leak (one tensor per
    step that is never freed), weights allocated before recording started (the baseline), frees of
    pre-recording tensors;
  * shared, memoized frames: a pool of frame dicts, each event with its own frame-list object, as
    PyTorch writes them; C++ frames (`torch::unwind::unwind()`, filename '??');
  * several devices, an `oom` entry preceded by cache-release `segment_free` events (device 0),
    expandable segments (segment_map / segment_unmap), a private pool, a wrapped ring buffer.

Usage:
  gen_snapshot.py OUT [--steps N | --size 1G] [--devices D] [--protocol P] [--json]
                      [--expandable] [--max-entries N] [--seed S] [--no-oom]
"""
import argparse
import json
import os
import pickle
import random
import sys

MiB = 1 << 20
SMALL_LIMIT = MiB
SMALL_SEGMENT = 2 * MiB
BASE_TIME_US = 1_717_000_000_000_000


def round_block(n):
    return max(512, (n + 511) // 512 * 512)


def round_segment(n):
    return (n + SMALL_SEGMENT - 1) // SMALL_SEGMENT * SMALL_SEGMENT


class Frames:
    """A pool of shared frame dicts and call stacks built from them (innermost first)."""

    def __init__(self, rng, with_cpp):
        self.rng = rng
        torch_files = ["torch/nn/modules/module.py", "torch/nn/modules/linear.py",
                       "torch/nn/functional.py", "torch/autograd/__init__.py",
                       "torch/optim/adamw.py", "torch/_tensor.py", "torch/nn/modules/activation.py"]
        self.user = [{"filename": f"/home/user/project/{f}", "line": l, "name": n}
                     for f, l, n in [("train.py", 88, "train_step"), ("train.py", 131, "main"),
                                     ("model.py", 42, "forward"), ("model.py", 57, "attention"),
                                     ("model.py", 71, "mlp"), ("data.py", 19, "collate"),
                                     ("train.py", 97, "log_metrics"), ("model.py", 23, "__init__")]]
        self.lib = [{"filename": "/usr/lib/python3/dist-packages/" + f, "line": rng.randint(10, 2000),
                     "name": rng.choice(["_call_impl", "forward", "linear", "backward", "step",
                                         "_wrapped_call_impl", "gelu", "softmax"])}
                    for f in torch_files for _ in range(6)]
        self.cpp = [{"filename": "??", "line": 0, "name": n} for n in
                    ["torch::unwind::unwind()", "torch::CapturedTraceback::gather(bool, bool, bool)",
                     "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc",
                     "at::native::empty_cuda", "at::TensorBase::TensorBase", "_PyEval_EvalFrameDefault",
                     "PyObject_Call", "at::native::addmm_out_cuda", "at::_ops::linear::call"]]
        if not with_cpp:
            self.cpp = []
        self.sites = {}

    # The user frame each named call site comes from (index into self.user).
    SITE_USER = {"act0": 2, "act1": 3, "act2": 4, "act3": 2, "small0": 3, "small1": 4, "small2": 2,
                 "tmp": 4, "optimizer": 0, "leak": 6, "free": 0, "init": 7, "collate": 5}

    def site(self, key):
        """A call stack for a named call site, built once (frames are shared objects)."""
        user_index = self.SITE_USER.get(key, 7)
        if key not in self.sites:
            rng = self.rng
            stack = []
            if self.cpp:
                stack += rng.sample(self.cpp, rng.randint(3, len(self.cpp)))
            stack += rng.sample(self.lib, rng.randint(4, 14))
            stack.append(self.user[user_index])
            if user_index != 0:
                stack.append(self.user[0])  # train_step
            stack.append(self.user[1])  # main
            self.sites[key] = stack
        return self.sites[key]


class Device:
    def __init__(self, index, rng, frames, expandable, gen):
        self.index = index
        self.rng = rng
        self.frames = frames
        self.expandable = expandable
        self.gen = gen
        self.trace = []
        self.segments = {}      # address -> segment dict (blocks kept as a list of dicts)
        self.free_blocks = {}   # (pool, rounded size) -> [block]
        self.live = {}          # block address -> block
        self.next_addr = 0x7F0000000000 + index * 0x10000000000
        self.time = BASE_TIME_US + index * 1000
        self.annotations = []

    def tick(self):
        self.time += self.rng.randint(5, 400)
        return self.time

    def event(self, action, addr, size, frames, **extra):
        e = {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": self.tick()}
        e.update(extra)
        e["frames"] = frames
        self.trace.append(e)

    def new_segment(self, size, small, frames, record):
        addr = self.next_addr
        self.next_addr += round_segment(size) + SMALL_SEGMENT
        seg = {"device": self.index, "address": addr, "total_size": size, "allocated_size": 0,
               "active_size": 0, "requested_size": 0, "stream": 0,
               "segment_type": "small" if small else "large", "segment_pool_id": (0, 0),
               "is_expandable": self.expandable and not small, "frames": frames, "blocks": []}
        self.segments[addr] = seg
        if record:
            self.event("segment_map" if seg["is_expandable"] else "segment_alloc", addr, size,
                       list(frames))
        return seg

    def alloc(self, requested, site, record=True):
        size = round_block(requested)
        small = size <= SMALL_LIMIT
        stack = self.frames.site(site)
        frames = list(stack)  # a new frame-list object per event, as PyTorch writes it
        pool = self.free_blocks.get((small, size))
        if pool:
            block = pool.pop()
        else:
            seg_size = SMALL_SEGMENT if small else round_segment(size)
            seg = self.new_segment(seg_size, small, frames, record)
            block = {"address": seg["address"], "size": size, "requested_size": requested,
                     "state": "inactive", "frames": [], "segment": seg}
            seg["blocks"].append(block)
            rest = seg_size - size
            offset = seg["address"] + size
            # The remainder of a segment is cut into free blocks of the same size (reused later).
            while rest >= size and small:
                extra = {"address": offset, "size": size, "requested_size": 0, "state": "inactive",
                         "frames": [], "segment": seg}
                seg["blocks"].append(extra)
                self.free_blocks.setdefault((small, size), []).append(extra)
                offset += size
                rest -= size
            if rest > 0:
                seg["blocks"].append({"address": offset, "size": rest, "requested_size": 0,
                                      "state": "inactive", "frames": [], "segment": seg})
        block["state"] = "active_allocated"
        block["requested_size"] = requested
        block["frames"] = frames
        self.live[block["address"]] = block
        if record:
            self.event("alloc", block["address"], requested, frames)
        return block["address"]

    def free(self, addr, record=True):
        block = self.live.pop(addr)
        block["state"] = "inactive"
        small = block["size"] <= SMALL_LIMIT
        self.free_blocks.setdefault((small, block["size"]), []).append(block)
        if record:
            frames = list(self.frames.site("free"))
            self.event("free_requested", addr, block["requested_size"], frames)
            self.event("free_completed", addr, block["requested_size"], frames)

    def release_cache(self):
        """empty_cache(): segments whose blocks are all free are given back (segment_free)."""
        for addr in list(self.segments):
            seg = self.segments[addr]
            if all(b["state"] == "inactive" for b in seg["blocks"]):
                for b in seg["blocks"]:
                    key = (b["size"] <= SMALL_LIMIT, b["size"])
                    if b in self.free_blocks.get(key, []):
                        self.free_blocks[key].remove(b)
                action = "segment_unmap" if seg["is_expandable"] else "segment_free"
                self.event(action, addr, seg["total_size"], [])
                del self.segments[addr]

    def snapshot_segments(self):
        out = []
        for addr in sorted(self.segments):
            seg = dict(self.segments[addr])
            blocks = []
            for b in sorted(seg["blocks"], key=lambda b: b["address"]):
                blocks.append({"address": b["address"], "size": b["size"],
                               "requested_size": b["requested_size"], "state": b["state"],
                               "frames": b["frames"]})
            seg["blocks"] = blocks
            seg["allocated_size"] = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
            seg["active_size"] = seg["allocated_size"]
            seg["requested_size"] = sum(b["requested_size"] for b in blocks
                                        if b["state"] == "active_allocated")
            out.append(seg)
        return out


def run_device(dev, steps, layers, oom, rng):
    # Weights and a buffer allocated before recording started: the baseline.
    weights = [dev.alloc(rng.choice([4, 8, 16]) * MiB + rng.randint(0, 4096), f"weight{i}", record=False)
               for i in range(layers)]
    scratch = [dev.alloc(rng.randint(1, 64) * 4096, "init", record=False) for _ in range(4)]
    for a in scratch[:2]:
        dev.free(a)  # frees of pre-recording tensors: unmatched in the trace
    optimizer = []
    leaked = []
    for step in range(steps):
        if step < 50:  # the profiler's step annotations (kept short, as a profiler schedule would)
            dev.annotations.append({"name": f"ProfilerStep#{step}", "stage": "START", "device": dev.index,
                                    "time_us": dev.tick()})
        acts = []
        for layer in range(layers):
            acts.append(dev.alloc(rng.choice([2, 4, 8]) * MiB + rng.randint(0, 512), f"act{layer % 4}"))
            acts.append(dev.alloc(rng.randint(1, 256) * 512, f"small{layer % 3}"))
        tmp = [dev.alloc(rng.randint(1, 2000) * 512, "tmp") for _ in range(layers)]
        for a in tmp:
            dev.free(a)
        rng.shuffle(acts)
        for a in acts:
            dev.free(a)
        if step == 0:
            optimizer = [dev.alloc(rng.choice([8, 16]) * MiB, "optimizer") for _ in range(layers)]
        leaked.append(dev.alloc(3 * MiB + 1000, "leak"))  # kept across steps: the leak
    if oom:
        dev.release_cache()
        free_now = 256 * MiB + 12345
        dev.trace.append({"action": "oom", "device_free": free_now, "size": 20 * 1024 * MiB,
                          "stream": 0, "time_us": dev.tick(),
                          "frames": list(dev.frames.site("act0"))})
    del weights, optimizer, leaked


def build(args):
    rng = random.Random(args.seed)
    if not hasattr(args, "layers"):
        args.layers = 6
    frames = Frames(rng, with_cpp=not args.python_stacks)
    devices = [Device(d, rng, frames, args.expandable, None) for d in range(args.devices)]
    for dev in devices:
        run_device(dev, args.steps, args.layers, oom=(dev.index == 0 and not args.no_oom), rng=rng)
    segments = []
    for dev in devices:
        segments += dev.snapshot_segments()
    if args.private_pool and segments:
        segments[-1]["segment_pool_id"] = (1, 0)
    traces = [dev.trace for dev in devices]
    settings = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True" if args.expandable else "",
                "max_split_size": -1, "garbage_collection_threshold": 0.0,
                "expandable_segments": bool(args.expandable), "pinned_num_register_threads": 1,
                "release_lock_on_cudamalloc": False, "pinned_use_cuda_host_register": False,
                "roundup_power2_divisions": {str(1 << i): 0 for i in range(16)}}
    if args.max_entries:
        settings["trace_alloc_max_entries"] = args.max_entries
        overflowed = False
        for i, t in enumerate(traces):
            if len(t) > args.max_entries:
                traces[i] = t[-args.max_entries:]
                overflowed = True
        settings["trace_alloc_overflowed"] = overflowed
    annotations = [a for dev in devices for a in dev.annotations]
    return {"segments": segments, "device_traces": traces, "allocator_settings": settings,
            "external_annotations": annotations}


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if text[-1].upper() in units:
        return int(float(text[:-1]) * units[text[-1].upper()])
    return int(text)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--size", help="approximate file size (e.g. 1G); overrides --steps")
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--devices", type=int, default=2)
    p.add_argument("--protocol", type=int, default=4)
    p.add_argument("--json", action="store_true", help="write JSON instead of a pickle")
    p.add_argument("--expandable", action="store_true")
    p.add_argument("--private-pool", action="store_true")
    p.add_argument("--python-stacks", action="store_true", help="no C++ frames")
    p.add_argument("--max-entries", type=int, default=0, help="ring buffer size (keeps the last N)")
    p.add_argument("--no-oom", action="store_true")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    encode = (lambda s: json.dumps(s).encode()) if args.json else \
        (lambda s: pickle.dumps(s, protocol=args.protocol))
    if args.size:
        # Calibrate: the marginal bytes per step (the first steps also create the cache), then scale.
        target = parse_size(args.size)
        probe = argparse.Namespace(**vars(args))
        points = []
        for steps in (100, 300):
            probe.steps = steps
            points.append((steps, len(encode(build(probe)))))
        for _ in range(4):
            # Secant through the last two points: bytes per step still creep up with the step
            # count (wider integers, longer memo references), so a refinement or two on the real
            # size lands within a few percent.
            (s0, b0), (s1, b1) = points[-2], points[-1]
            args.steps = max(1, round(s1 + (target - b1) * (s1 - s0) / ((b1 - b0) or 1)))
            data = encode(build(args))
            points.append((args.steps, len(data)))
            if abs(len(data) - target) <= 0.02 * target:
                break
    else:
        data = encode(build(args))
    with open(args.out, "wb") as f:
        f.write(data)
    print(f"{args.out}: {os.path.getsize(args.out)} bytes, {args.steps} steps", file=sys.stderr)


if __name__ == "__main__":
    main()
