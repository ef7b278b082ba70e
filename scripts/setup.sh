#!/usr/bin/env bash
# Installs oomdoc's build and test dependencies from Debian's packages (only those missing),
# then builds. Usage: scripts/setup.sh [--deps-only]
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake pkg-config          # toolchain
  libcli11-dev libfmt-dev nlohmann-json3-dev libre2-dev libyaml-cpp-dev   # library dependencies
  libgtest-dev libgmock-dev libbenchmark-dev                               # tests and benchmarks
  python3 python3-torch                     # calibration tools and the `run --snapshot-on-oom` hook tests
  chromium                                  # renders the HTML report in its test
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
[ "${1:-}" = "--deps-only" ] && exit 0

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
