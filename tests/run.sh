#!/usr/bin/env bash
# tests/run.sh - the whole test suite, as root on Debian 12: install the packages, build with
# AddressSanitizer + UndefinedBehaviorSanitizer, and run every unit and end-to-end test (ctest).
# End-to-end tests change core_pattern through the real kernel path and restore it on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "run as root: the end-to-end tests set /proc/sys/kernel/core_pattern" >&2; exit 1; }
scripts/deps.sh
# test_container's foreign roots (scripts/mkroot.sh, cached in /var/cache/crashpack/roots): built
# in the background while the code compiles (network and dpkg, little CPU); the test waits for
# them through mkroot's lock. CP_NO_ROOT_PREBUILD=1 leaves them to the test.
if [ -z "${CP_NO_ROOT_PREBUILD:-}" ]; then
    for r in trixie sid; do
        [ -f "/var/cache/crashpack/roots/$r/.crashpack-root" ] || scripts/mkroot.sh "$r" > /dev/null 2>&1 &
    done
fi
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCRASHPACK_SANITIZE=ON > /dev/null
cmake --build build-asan -j"$(nproc)" > /dev/null
cd build-asan
ctest -j2 --output-on-failure "$@"
