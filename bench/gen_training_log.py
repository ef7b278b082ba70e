#!/usr/bin/env python3
"""Writes a realistic training log of a given size for benchmarks: torchrun rank prefixes, tqdm
progress bars redrawn with carriage returns, Trainer loss dicts, periodic GPU memory readings,
warnings, and a few CUDA out-of-memory tracebacks spread through the file. With --container, each
line is stored as a container runtime stores it (Docker's json-file records, Kubernetes' CRI lines),
split at 16 KiB as the runtime splits it."""
import argparse
import json
import random

SPLIT = 16 << 10   # Docker (moby's copier) and CRI runtimes cut longer lines into parts


def wrap(text, container, step):
    """The lines of `text` as the runtime `container` writes them."""
    if container == "plain":
        return text
    stamp = "2024-05-01T10:%02d:%02d.%09dZ" % (step // 60 % 60, step % 60, step * 7919 % 10**9)
    out = []
    for line in text.split("\n")[:-1]:
        parts = [line[i:i + SPLIT] for i in range(0, len(line), SPLIT)] or [""]
        for k, part in enumerate(parts):
            last = k == len(parts) - 1
            if container == "docker":
                out.append(json.dumps({"log": part + ("\n" if last else ""), "stream": "stderr", "time": stamp},
                                      separators=(",", ":")))
            else:
                out.append("%s stderr %s %s" % (stamp, "F" if last else "P", part))
    return "\n".join(out) + "\n"


def block(rng, step):
    lines = []
    bar = "".join("\r %3d%%|%-10s| %d/100000 [%02d:%02d<12:00:00, 2.31it/s]" % (
        (step + i) % 100, "#" * ((step + i) % 10), step + i, (step // 60) % 60, step % 60) for i in range(8))
    lines.append(bar)
    for r in range(4):
        lines.append("[rank%d]: {'loss': %.4f, 'grad_norm': %.3f, 'learning_rate': %.3e, 'epoch': %.2f}" % (
            r, 2.5 - step * 1e-6, rng.random() * 2, 2e-5, step / 50000))
    if step % 50 == 0:
        lines.append("[rank0]: step %d | gpu mem: %.2f GiB | tokens/s %d" % (step, 17 + rng.random(), rng.randint(9000, 11000)))
    if step % 400 == 0:
        lines.append("W1130 09:12:%02d.442000 2210 torch/utils/checkpoint.py:92] None of the inputs have requires_grad=True. Gradients will be None" % (step % 60))
    return lines


def titan_block(rng, step):
    # torchtitan's metrics line, printed every step with the step's peak memory: every line is a
    # memory reading the scanner reads (the worst case for explain's per-line work).
    return ["[rank0]:[titan] 2024-11-12 10:%02d:%02d,123 - root - INFO - step: %6d  loss: %7.4f  memory: %5.2fGiB(%.2f%%)"
            "  tps: %s  mfu: %.2f%%" % ((step // 60) % 60, step % 60, step, 8 - step * 1e-6, 30 + rng.random() * 10,
                                      40 + rng.random() * 10, format(rng.randint(1000, 9000), ","), rng.random() * 60)]


OOM = [
    "[rank{r}]: Traceback (most recent call last):",
    "[rank{r}]:   File \"/home/ana/finetune/train.py\", line 142, in <module>",
    "[rank{r}]:     trainer.train()",
    "[rank{r}]:   File \"/usr/lib/python3/dist-packages/torch/_tensor.py\", line 581, in backward",
    "[rank{r}]:     torch.autograd.backward(",
    "[rank{r}]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB. GPU {r} has a total capacity of "
    "23.65 GiB of which 1.08 GiB is free. Including non-PyTorch memory, this process has 22.56 GiB memory in use. Of the "
    "allocated memory 20.14 GiB is allocated by PyTorch, and 1.97 GiB is reserved by PyTorch but unallocated.",
]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=1024)
    parser.add_argument("--ooms", type=int, default=5)
    parser.add_argument("--out", required=True)
    parser.add_argument("--container", choices=["plain", "docker", "cri"], default="plain")
    parser.add_argument("--style", choices=["trainer", "titan"], default="trainer",
                        help="trainer: HF Trainer bars and loss dicts; titan: torchtitan's memory line every step")
    args = parser.parse_args()
    rng = random.Random(7)
    target = args.mb << 20
    oom_at = {target * (i + 1) // (args.ooms + 1) for i in range(args.ooms)}
    written, step = 0, 0
    pending = sorted(oom_at)
    with open(args.out, "w") as out:
        while written < target:
            chunk = []
            for _ in range(200):
                chunk.extend(titan_block(rng, step) if args.style == "titan" else block(rng, step))
                step += 1
            text = "\n".join(chunk) + "\n"
            if pending and written + len(text) >= pending[0]:
                text += "\n".join(l.format(r=len(pending) % 4) for l in OOM) + "\n"
                pending.pop(0)
            text = wrap(text, args.container, step)
            out.write(text)
            written += len(text)


if __name__ == "__main__":
    main()
