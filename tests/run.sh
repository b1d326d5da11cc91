#!/usr/bin/env bash
# tests/run.sh - the whole test suite, as root on Debian 12: install the packages, build with
# AddressSanitizer + UndefinedBehaviorSanitizer, and run every unit and end-to-end test (ctest).
# End-to-end tests change core_pattern through the real kernel path and restore it on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "run as root: the end-to-end tests set /proc/sys/kernel/core_pattern" >&2; exit 1; }
scripts/deps.sh
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCRASHPACK_SANITIZE=ON > /dev/null
cmake --build build-asan -j"$(nproc)" > /dev/null
cd build-asan
ctest --output-on-failure "$@"
