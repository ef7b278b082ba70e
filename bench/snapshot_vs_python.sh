#!/usr/bin/env bash
# oomdoc snapshot vs Python on the same generated snapshot, in one run.
#
#   bench/snapshot_vs_python.sh [SIZE] [FILE]     (defaults: 1G, /tmp/oomdoc-bench/snapshot_<SIZE>.pickle)
#
# Generates the snapshot with tools/gen_snapshot.py (once; reused when FILE exists), warms the page
# cache, then times, alternating, three runs each of
#   oomdoc: build/oomdoc snapshot FILE --json   (read + every analysis + the JSON document)
#   python: tools/snapshot_totals.py FILE      (pickle.load + the same per-device totals)
# (REPEAT=n to change) with /usr/bin/time -v, and prints the best wall and CPU (user + system) time,
# MB/s, the ratios and peak RSS of each. On a shared machine the CPU ratio is the steadier one.
# It also checks that both report the same totals. Needs build/oomdoc (Release).
set -euo pipefail
cd "$(dirname "$0")/.."
size="${1:-1G}"
file="${2:-/tmp/oomdoc-bench/snapshot_${size}.pickle}"
oomdoc=build/oomdoc
[ -x "$oomdoc" ] || { echo "build oomdoc first (cmake --build build --target oomdoc)" >&2; exit 2; }
mkdir -p "$(dirname "$file")"
if [ ! -s "$file" ]; then
  echo "generating $file ($size)..." >&2
  python3 tools/gen_snapshot.py "$file" --size "$size" >&2
fi
bytes=$(stat -c %s "$file")
cat "$file" > /dev/null  # page cache: both sides read from memory

measure() {  # prints "seconds rss_kb cpu_seconds"
  local log
  log=$(mktemp)
  /usr/bin/time -v "$@" > /dev/null 2> "$log"
  local wall rss user sys
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$log")
  rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$log")
  user=$(awk -F': ' '/User time \(seconds\)/ {print $2}' "$log")
  sys=$(awk -F': ' '/System time \(seconds\)/ {print $2}' "$log")
  rm -f "$log"
  # h:mm:ss or m:ss.ss -> seconds
  python3 -c "import sys; p=[float(x) for x in sys.argv[1].split(':')]; s=sum(v*60**i for i,v in enumerate(reversed(p))); print(f'{s:.3f} {sys.argv[2]} {float(sys.argv[3]) + float(sys.argv[4]):.3f}')" "$wall" "$rss" "$user" "$sys"
}

best_o=999999; best_p=999999; cpu_o=999999; cpu_p=999999; rss_o=0; rss_p=0
for i in $(seq "${REPEAT:-3}"); do
  read -r t r c < <(measure "$oomdoc" snapshot "$file" --json --quiet)
  best_o=$(python3 -c "print(min($best_o, $t))"); rss_o=$(( r > rss_o ? r : rss_o ))
  cpu_o=$(python3 -c "print(min($cpu_o, $c))")
  read -r t r c < <(measure python3 tools/snapshot_totals.py "$file")
  best_p=$(python3 -c "print(min($best_p, $t))"); rss_p=$(( r > rss_p ? r : rss_p ))
  cpu_p=$(python3 -c "print(min($cpu_p, $c))")
done

# Same totals on both sides.
"$oomdoc" snapshot "$file" --json --quiet > /tmp/oomdoc-bench/snapshot-oomdoc.json
python3 tools/snapshot_totals.py "$file" --json > /tmp/oomdoc-bench/snapshot-python.json
python3 - <<'PY'
import json
o = json.load(open("/tmp/oomdoc-bench/snapshot-oomdoc.json"))["devices"]
p = json.load(open("/tmp/oomdoc-bench/snapshot-python.json"))
keys = ["device", "segments", "reserved_bytes", "allocated_bytes", "active_bytes", "requested_bytes",
        "inactive_bytes", "largest_free_block_bytes", "trace_events", "peak_live_bytes", "baseline_bytes"]
for a, b in zip(o, p):
    for k in keys:
        assert a[k] == b[k], (k, a[k], b[k])
    assert [x["event_index"] for x in a["ooms"]] == [x["event_index"] for x in b["ooms"]]
assert len(o) == len(p)
print("totals: identical (%d devices)" % len(o))
PY

python3 - "$bytes" "$best_o" "$best_p" "$rss_o" "$rss_p" "$cpu_o" "$cpu_p" <<'PY'
import sys
size, to, tp, ro, rp = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
co, cp = float(sys.argv[6]), float(sys.argv[7])
mb = size / 1e6
print(f"file: {size} bytes ({size / 2**30:.2f} GiB)")
print(f"oomdoc snapshot --json : {to:7.2f} s wall {co:7.2f} s CPU  {mb / to:8.1f} MB/s  peak RSS {ro / 1024:8.1f} MiB")
print(f"python pickle + totals : {tp:7.2f} s wall {cp:7.2f} s CPU  {mb / tp:8.1f} MB/s  peak RSS {rp / 1024:8.1f} MiB")
print(f"speed-up: {tp / to:.1f}x wall, {cp / co:.1f}x CPU (user + system)   memory: {ro / rp:.2f} of Python's peak RSS")
PY
