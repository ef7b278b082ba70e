#!/usr/bin/env bash
# Times `oomdoc explain` on a generated training log against `grep -c 'out of memory'` on the same
# file, in one run, and prints MB/s, the ratio and peak memory. Usage: bench/explain_vs_grep.sh [MB]
# CONTAINER=docker or cri: the log as a container runtime stores it (decoded before the scan).
# STYLE=titan: torchtitan's metrics line every step, each a memory reading (the busiest case).
set -euo pipefail
cd "$(dirname "$0")/.."
mb=${1:-1024}
dir=${OOMDOC_BENCH_DIR:-/tmp/oomdoc-bench}
mkdir -p "$dir"
container=${CONTAINER:-plain}
style=${STYLE:-trainer}
log="$dir/train-${mb}m.log"
[ "$container" = plain ] || log="$dir/train-${mb}m-$container.log"
[ "$style" = trainer ] || log="${log%.log}-$style.log"
[ -f "$log" ] || python3 bench/gen_training_log.py --mb "$mb" --container "$container" --style "$style" --out "$log"
bin=${OOMDOC:-build/oomdoc}
bytes=$(stat -L -c %s "$log")  # -L: the log may be a link to a shared one
cat "$log" > /dev/null  # both read from the page cache

# Output goes to a file, not /dev/null: GNU grep stops at the first match when its output is
# /dev/null, which would time a fraction of the file.
out="$dir/out.tmp"
seconds() { local s e; s=$(date +%s.%N); "$@" > "$out" || true; e=$(date +%s.%N); echo "$e - $s" | bc -l; }
best() { local b=999999 t; for _ in 1 2 3; do t=$(seconds "$@"); b=$(echo "if ($t < $b) $t else $b" | bc -l); done; echo "$b"; }

t_oomdoc=$(best "$bin" explain --json "$log")
t_grep=$(best grep -c 'out of memory' "$log")
rss_kb=$( { /usr/bin/time -f '%M' "$bin" explain --json "$log" > "$out"; } 2>&1 | tail -1)
events=$("$bin" explain --json "$log" | python3 -c 'import json,sys; print(json.load(sys.stdin)["error_count"])')

printf 'log: %s (%d MiB), %s OOM events found\n' "$log" $((bytes >> 20)) "$events"
printf 'oomdoc explain: %.3f s  %.0f MB/s  peak RSS %d MiB\n' "$t_oomdoc" "$(echo "$bytes / $t_oomdoc / 1000000" | bc -l)" $((rss_kb / 1024))
printf 'grep -c:        %.3f s  %.0f MB/s  (%s matching lines)\n' "$t_grep" "$(echo "$bytes / $t_grep / 1000000" | bc -l)" "$(grep -c 'out of memory' "$log")"
printf 'ratio oomdoc/grep time: %.2f\n' "$(echo "$t_oomdoc / $t_grep" | bc -l)"
