#!/usr/bin/env bash
# Builds and runs the snapshot fuzzer. Usage: fuzz/run_snapshot_fuzz.sh [seconds] (default 600).
# Seeds: the committed fixtures, plus the real snapshots when OOMDOC_CORPUS points at them
# (read in place, never copied). Crashes land in build-fuzz/crashes/; add each one under
# tests/fixtures/snapshot/fuzz/ (the regression test reads every file there).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-600}"
fuzz/build_fuzzer.sh snapshot_fuzz
mkdir -p build-fuzz/corpus build-fuzz/crashes
seeds=(tests/fixtures/snapshot)
if [ -n "${OOMDOC_CORPUS:-}" ]; then seeds+=("$OOMDOC_CORPUS/snapshots"); fi
build-fuzz/fuzz/snapshot_fuzz build-fuzz/corpus "${seeds[@]}" -max_total_time="$seconds" \
  -max_len=300000 -rss_limit_mb=2048 -timeout=20 -artifact_prefix=build-fuzz/crashes/ \
  -print_final_stats=1
