#!/usr/bin/env bash
# Builds and runs the whole test suite. With OOMDOC_CORPUS set (.ci/run sets ../shared/data),
# the corpus tests over real-world data are registered too.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --deps-only
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
ctest --test-dir build --output-on-failure --no-tests=error -j"$(nproc)"
