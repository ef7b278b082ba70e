#!/usr/bin/env bash
# Builds and runs the GGUF header fuzzer. Usage: fuzz/run_gguf_fuzz.sh [seconds] (default 300).
# Seeds: tests/fixtures/gguf/ (tools/gen_gguf.py: a tiny Llama-shaped file and broken variants).
# Crashes land in build-fuzz/crashes-gguf/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-300}"
fuzz/build_fuzzer.sh gguf_fuzz
mkdir -p build-fuzz/corpus-gguf build-fuzz/crashes-gguf
build-fuzz/fuzz/gguf_fuzz build-fuzz/corpus-gguf tests/fixtures/gguf \
  -max_total_time="$seconds" -max_len=200000 -rss_limit_mb=2048 -timeout=20 \
  -artifact_prefix=build-fuzz/crashes-gguf/ -print_final_stats=1
