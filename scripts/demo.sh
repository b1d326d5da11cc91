#!/usr/bin/env bash
# scripts/demo.sh - the main job, end to end, as root on Debian 12: install the packages, build,
# install the capture handler into core_pattern, crash a real multi-threaded program, put
# core_pattern back exactly as it was, and show what was captured. Then the death most training
# jobs die: an uncaught Python exception (torch.cuda.OutOfMemoryError), no core, caught by the
# Python hook (activated with no change to the script) and the node service (crashpack agent).
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

echo
echo "--- an uncaught torch.cuda.OutOfMemoryError: no core dump; the hook and the node service"
printf 'agent_socket = %s/run/agent.sock\n' "$demo" >> "$demo/crashpack.conf"
mkdir -m 755 "$demo/run"
build/bin/crashpack agent -c "$demo/crashpack.conf" --state-dir "$demo/state" 2> "$demo/agent.log" &
agent=$!
trap 'kill $agent 2>/dev/null || true' EXIT
for _ in $(seq 100); do [ -S "$demo/run/agent.sock" ] && break; sleep 0.1; done
/usr/bin/python3 -m venv --system-site-packages "$demo/venv"
build/bin/crashpack python-hook install --python "$demo/venv/bin/python"
cat > "$demo/train.py" <<'PY'
import torch

def forward(x):
    # what PyTorch raises when an allocation fails (raised by hand: this machine has no GPU)
    raise torch.cuda.OutOfMemoryError(
        "CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity; "
        "14.10 GiB already allocated; 3.19 MiB free; 14.50 GiB reserved in total by PyTorch)")

forward(torch.zeros(4))
PY
CRASHPACK_HOOK=1 CRASHPACK_AGENT_SOCKET="$demo/run/agent.sock" "$demo/venv/bin/python" "$demo/train.py" || \
    echo "(exit status $?, the traceback above unchanged by crashpack)"
kill $agent; wait $agent 2>/dev/null || true
trap - EXIT
bundle=$(ls -t "$demo"/bundles/crash-*.zst | head -1)
echo "--- bundle: $bundle"
echo "--- crashpack analyze"
build/bin/crashpack analyze "$bundle" || true

