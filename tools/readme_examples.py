#!/usr/bin/env python3
"""Re-runs the example commands shown in README.md (and docs/*.md given as arguments) and puts
their real output back, so that the examples stay true.

  tools/readme_examples.py [FILE...]        (default: README.md; needs build/oomdoc)
  tools/readme_examples.py --check [FILE...] (exit 1 when an example's output changed)

In a fenced block, a line `$ oomdoc ...` (or `$ build/oomdoc ...`, continued with a trailing
backslash) is a command; the lines after it, up to the next `$ ` line or the end of the block, are
its output. An output that ends with a line holding only `…` was abridged: it keeps as many lines.
A `# comment` after the command is kept and not run. stdout and stderr are shown together, as a
terminal shows them, without colour.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, NO_COLOR="1", COLUMNS="100", HF_HUB_CACHE="/nonexistent-oomdoc-cache",
           HOME="/nonexistent-oomdoc-home")
ABRIDGED = "…"


def run(command):
    shell = re.sub(r"^(build/)?oomdoc\b", os.path.join(ROOT, "build", "oomdoc"), command)
    shell = re.sub(r"(\|\||&&|;|\|)\s*(build/)?oomdoc\b",
                   lambda m: m.group(1) + " " + os.path.join(ROOT, "build", "oomdoc"), shell)
    out = subprocess.run(["bash", "-c", "{ " + shell + "\n} 2>&1"], cwd=ROOT, env=ENV, capture_output=True,
                         text=True, timeout=120).stdout
    return out.rstrip("\n").split("\n") if out.strip() else []


def strip_comment(command):
    # A trailing "   # ..." that is not inside quotes.
    quote = None
    for i, c in enumerate(command):
        if quote:
            quote = None if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == "#" and i > 0 and command[i - 1] == " ":
            return command[:i].rstrip()
    return command


def refresh(lines):
    out, i, changed = [], 0, False
    in_block = False
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            in_block = not in_block
            out.append(line)
            i += 1
            continue
        if not (in_block and re.match(r"\$ (build/)?oomdoc\b", line)):
            out.append(line)
            i += 1
            continue
        # The command, with its continuation lines.
        shown = [line]
        while shown[-1].endswith("\\") and i + 1 < len(lines):
            i += 1
            shown.append(lines[i])
        i += 1
        command = " ".join(s[:-1].strip() if s.endswith("\\") else s.strip() for s in shown)[2:]
        old = []
        while i < len(lines) and not lines[i].startswith("```") and not lines[i].startswith("$ "):
            old.append(lines[i])
            i += 1
        new = run(strip_comment(command))
        if old and old[-1] == ABRIDGED:
            new = new[: len(old) - 1] + [ABRIDGED] if len(new) > len(old) - 1 else new
        changed |= new != old
        out.extend(shown)
        out.extend(new)
    return out, changed


def main():
    args = [a for a in sys.argv[1:] if a != "--check"]
    check = "--check" in sys.argv[1:]
    files = args or [os.path.join(ROOT, "README.md")]
    stale = []
    for path in files:
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        new, changed = refresh(lines)
        if changed:
            stale.append(path)
            if not check:
                with open(path, "w", encoding="utf-8") as f:
                    f.write("\n".join(new))
    for path in stale:
        print(("stale examples: " if check else "refreshed: ") + path)
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
