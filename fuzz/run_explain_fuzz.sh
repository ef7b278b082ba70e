#!/usr/bin/env bash
# Builds and runs the explain (log scanner) fuzzer. Usage: fuzz/run_explain_fuzz.sh [seconds]
# (default 300). Seeds: fuzz/explain_seeds/ (one message per format, taken from the message-format
# tests), tests/fixtures/explain/fuzz/ (inputs that once aborted) and examples/; fuzz/explain.dict
# gives the literal words the formats trigger on and read. Crashes land in
# build-fuzz/crashes-explain/; add each one under tests/fixtures/explain/fuzz/ as FORMAT__what.log
# (tests/readers/formats/explain_fuzz_regression_test.cpp replays every file there).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-300}"
fuzz/build_fuzzer.sh explain_fuzz
mkdir -p build-fuzz/corpus-explain build-fuzz/crashes-explain
build-fuzz/fuzz/explain_fuzz build-fuzz/corpus-explain fuzz/explain_seeds tests/fixtures/explain/fuzz examples \
  -dict=fuzz/explain.dict -max_total_time="$seconds" -max_len=16384 -rss_limit_mb=2048 -timeout=20 \
  -artifact_prefix=build-fuzz/crashes-explain/ -print_final_stats=1
