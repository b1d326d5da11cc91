#!/usr/bin/env bash
# scripts/demo.sh - the main job, end to end, as root on Debian 12: install the packages, build,
# install the capture handler into core_pattern, crash a real multi-threaded program, put
# core_pattern back exactly as it was, and show what was captured.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "run as root: it sets /proc/sys/kernel/core_pattern" >&2; exit 1; }
scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
cmake --build build -j"$(nproc)" > /dev/null

demo=$(mktemp -d /tmp/crashpack-demo.XXXXXX)
chmod 755 "$demo"
printf 'bundle_dir = %s/bundles\n' "$demo" > "$demo/crashpack.conf"
build/bin/crashpack install --no-sysctl-d --force -c "$demo/crashpack.conf"
trap 'build/bin/crashpack uninstall --force >/dev/null || true' EXIT

echo "--- crashing a 5-thread program (segfault in leaf() <- mid() <- main())"
ulimit -c unlimited
build/bin/cp-segv-threads &
pid=$!
wait $pid || true
for _ in $(seq 100); do ls "$demo"/bundles/crash-*-"$pid"-*.zst > /dev/null 2>&1 && break; sleep 0.1; done
build/bin/crashpack uninstall
trap - EXIT
bundle=$(ls "$demo"/bundles/crash-*-"$pid"-*.zst)
echo "--- bundle: $bundle"
tar --zstd -tvf "$bundle"
echo "--- crashpack analyze"
build/bin/crashpack analyze "$bundle"
