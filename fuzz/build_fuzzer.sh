#!/usr/bin/env bash
# Configures the clang build in build-fuzz/ (library and fuzzers instrumented with
# -fsanitize=fuzzer,address,undefined) and builds one fuzzer. Usage: fuzz/build_fuzzer.sh TARGET
# (snapshot_fuzz, explain_fuzz, gguf_fuzz); the run_*_fuzz.sh scripts call it.
set -euo pipefail
cd "$(dirname "$0")/.."
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DOOMDOC_BUILD_FUZZ=ON -DOOMDOC_BUILD_TESTS=OFF \
  -DOOMDOC_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz --target "$1" -j2
