#!/usr/bin/env bash
# Device check for `oomdoc gpus` and `oomdoc run` (issue 7). Needs an NVIDIA GPU, its driver
# (nvidia-smi) and a CUDA build of PyTorch. Not runnable in CI; run by hand where a GPU exists:
#   cmake --build build --target oomdoc && scripts/gpu_checks/gpus_vs_nvidia_smi.sh
# 1. While a process holds 2 GiB, `oomdoc gpus --json` must list its pid with the memory
#    `nvidia-smi --query-compute-apps` reports (nvidia-smi rounds to MiB).
# 2. `oomdoc run --snapshot-on-oom` on a real OOM: exit status 1 kept, the diagnosis printed,
#    a snapshot pickle written that Python's pickle can load.
set -uo pipefail
cd "$(dirname "$0")/../.."
OOMDOC=${OOMDOC:-build/oomdoc}
PY=${PYTHON:-python3}
OUT=${OUT:-/tmp/oomdoc-gpu-check}
rm -rf "$OUT" && mkdir -p "$OUT"
failures=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; failures=$((failures + 1)); fi; }

# ---- 1. gpus against nvidia-smi ----
$PY -c 'import torch, time
x = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
print("ready", flush=True)
time.sleep(120)' > "$OUT/holder.log" 2>&1 &
holder=$!
for _ in $(seq 300); do grep -q ready "$OUT/holder.log" && break; sleep 0.2; done
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits > "$OUT/smi.csv"
$OOMDOC gpus --json > "$OUT/gpus.json"; echo "gpus --json exit $?"
$OOMDOC gpus | tee "$OUT/gpus.txt"
check "gpus lists the holder ($holder) with nvidia-smi's memory" \
  "$PY - '$OUT/smi.csv' '$OUT/gpus.json' $holder <<'EOF'
import json, sys
smi = {}
for line in open(sys.argv[1]):
    pid, mib = [x.strip() for x in line.split(',')]
    smi[int(pid)] = None if not mib.isdigit() else int(mib) << 20
doc = json.load(open(sys.argv[2]))
ours = {p['pid']: p['used_bytes'] for d in doc['devices'] for p in d['processes']}
holder = int(sys.argv[3])
ok = holder in ours and holder in smi
for pid, used in smi.items():
    if pid not in ours: print('missing from oomdoc:', pid); ok = False
    elif used is not None and ours[pid] is not None and abs(ours[pid] - used) >= (1 << 20):
        print('memory differs for', pid, ours[pid], used); ok = False
print('nvidia-smi:', smi, 'oomdoc:', ours)
sys.exit(0 if ok else 1)
EOF"
kill $holder 2>/dev/null; wait $holder 2>/dev/null

# ---- 2. run on a real OOM ----
$OOMDOC run --snapshot-on-oom "$OUT/snaps" --json-report "$OUT/run.json" -- $PY -c '
import torch
xs = []
while True:
    xs.append(torch.empty(1 << 30, dtype=torch.uint8, device="cuda"))' > "$OUT/run.out" 2> "$OUT/run.err"
rc=$?
cat "$OUT/run.err" | tail -40
check "run keeps the exit status 1" "[ $rc -eq 1 ]"
check "run prints the diagnosis" "grep -q 'oomdoc: the command ran out of memory' '$OUT/run.err'"
check "a snapshot was written" "ls '$OUT'/snaps/oom-snapshot-*.pickle >/dev/null 2>&1"
check "the snapshot loads with pickle and has segments" \
  "$PY -c 'import glob, pickle; s = pickle.load(open(glob.glob(\"$OUT/snaps/*.pickle\")[0], \"rb\")); assert s[\"segments\"]'"
check "the JSON report names the snapshot" "grep -q oom-snapshot '$OUT/run.json'"
echo "$failures failure(s); outputs in $OUT"
exit $((failures > 0))
