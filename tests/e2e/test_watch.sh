#!/usr/bin/env bash
# Acceptance (issue 6, #4): `crashpack watch [--stall S] [--heartbeat FILE] [--kill] -- CMD`.
#  - a job that prints progress then hangs: bundles (the job and each Python process under it,
#    torchrun-style), the stall reason recorded, the job left running; with --kill it is ended
#  - a job that finishes: its exit code passed through, its output forwarded; no bundle when it
#    exits 0, one (death kind exit, trigger run) when it exits 3: watch is `crashpack run` with
#    its stall detection on
#  - a Python job whose output would be block-buffered on a pipe, but flows: no false alarm (pty)
#  - a silent job that touches its heartbeat file: no false alarm
source "$(dirname "$0")/../lib.sh"
cp_setup shared
W() { "$CP_BIN/crashpack" watch -c "$T/conf" "$@"; }
nbundles() { ls "$T"/bundles/crash-*.zst 2>/dev/null | wc -l; }
wait_bundles() { # N: waits until N bundles are published
    local i
    for ((i = 0; i < 600; i++)); do [ "$(nbundles)" -ge "$1" ] && return 0; sleep 0.1; done
    return 1
}

# ---- 1. a job that finishes: exit code and output passed through ----
W --stall 3 -- sh -c 'echo hello from the job; exit 0' > "$T/normal.out"
rc=$?
check "exit code 0 of the job is passed through" [ "$rc" = 0 ]
check "its output is forwarded unchanged" [ "$(cat "$T/normal.out")" = "hello from the job" ]
check "no bundle for a job that exits 0" [ "$(nbundles)" = 0 ]
W -q --stall 3 -- sh -c 'echo hello from the job; exit 3' > "$T/normal.out"
rc=$?
check "exit code 3 of the job is passed through" [ "$rc" = 3 ]
check "one bundle for its exit 3 (as crashpack run)" [ "$(nbundles)" = 1 ]
b=$(ls "$T"/bundles/crash-*.zst 2>/dev/null | head -1)
check "  death kind exit, status 3" [ "$(cp_member "$b" manifest.json | python3 -c 'import json,sys; d=json.load(sys.stdin)["death"]; print(d["kind"], d["status"])')" = "exit 3" ]
rm -f "$T"/bundles/crash-*.zst

# ---- 2. block-buffered output that flows: the pty makes Python line-buffer it ----
W --stall 2 -- python3 -c '
import sys, time
for i in range(10):
    print("step", i)   # no flush: on a pipe this would sit in the buffer until exit
    time.sleep(0.5)
' > "$T/flow.out"
rc=$?
check "flowing Python job exits 0" [ "$rc" = 0 ]
check "all its output arrived" [ "$(grep -c '^step' "$T/flow.out")" = 10 ]
check "no false alarm for a block-buffered but flowing job" [ "$(nbundles)" = 0 ]

# ---- 3. silent job that touches its heartbeat ----
W --stall 2 --heartbeat "$T/hb" -- sh -c "for i in 1 2 3 4 5 6 7 8 9 10; do touch '$T/hb'; sleep 0.5; done" > /dev/null
rc=$?
check "heartbeat job exits 0" [ "$rc" = 0 ]
check "no false alarm for a silent job that touches its heartbeat" [ "$(nbundles)" = 0 ]

# ---- 4. prints then hangs: a shell with two Python workers (torchrun-style tree) ----
# the launcher prints only once both workers run Python, then nothing: exactly one stall
# started directly (not through the W function's subshell), so $! is watch itself and the SIGTERM
# below reaches it; fd 9 (the test lock) closed, so nothing it starts can hold the lock
"$CP_BIN/crashpack" watch -c "$T/conf" --stall 2 -- bash -c "
python3 -c 'import time; open(\"$T/w1\", \"w\").close(); time.sleep(600)' &
python3 -c 'import time; open(\"$T/w2\", \"w\").close(); time.sleep(600)' &
while [ ! -e '$T/w1' ] || [ ! -e '$T/w2' ]; do sleep 0.1; done
echo 'epoch 1'
wait" > "$T/hang.out" 2> "$T/hang.err" 9>&- &
wpid=$!
wait_bundles 3 || fail "no 3 bundles from the stalled job"
sleep 0.5
check "three bundles: the launcher and both Python workers" [ "$(nbundles)" = 3 ]
check "the job's output was forwarded" grep -q 'epoch 1' "$T/hang.out"
for b in "$T"/bundles/crash-*.zst; do
    cp_member "$b" manifest.json > "$T/m.json"
    check "$(basename "$b"): trigger watch, stall reason recorded" \
        [ "$(json "$T/m.json" 'd["capture"]["trigger"], d["capture"]["reason"].startswith("stall: no output")')" = "('watch', True)" ]
done
comms=$(for b in "$T"/bundles/crash-*.zst; do cp_member "$b" manifest.json | python3 -c 'import json,sys; print(json.load(sys.stdin)["comm"])'; done | sort | tr '\n' ' ')
check "snapped: bash and two python3 ($comms)" [ "$comms" = "bash python3 python3 " ]
check "the job is left running after the snap" kill -0 "$wpid"
check "watch said what it did on stderr" grep -q 'snapped pid' "$T/hang.err"
b=$(ls "$T"/bundles/crash-*-python3*.zst | head -1)
"$CP_BIN/crashpack" analyze --json "$b" > "$T/a.json"
check "analyze: a watch bundle is a hang with its reason" [ "$(json "$T/a.json" 'd["crash_kind"], d["hang"]["trigger"]')" = "('hang', 'watch')" ]
kill -TERM "$wpid"
wait "$wpid"
rc=$?
check "SIGTERM to watch reaches the job; watch exits 128+15" [ "$rc" = 143 ]
sleep 0.5
check "... and the whole job with it: no worker is left" bash -c "! pgrep -f '$T/w[12]' > /dev/null"
pkill -KILL -f "$T/w[12]" 2>/dev/null
rm -f "$T"/bundles/crash-*.zst

# ---- 5. --kill ----
W --stall 2 --kill -- python3 -c 'import time; print("working", flush=True); time.sleep(600)' > /dev/null 2>&1
rc=$?
check "--kill: the stalled job is ended (exit 128+9)" [ "$rc" = 137 ]
check "--kill: the job was captured first" [ "$(nbundles)" = 1 ]
finish
