#!/usr/bin/env bash
# Acceptance (issue 14, #1, #2 and #4): evidence scoped to the crashed process, through the real
# kernel path (core_pattern, /dev/kmsg, the handler):
#   1. an Xid 79 naming another pid and another PCI id is in the kernel log first; then a CPU-only
#      C program crashes, a torch job with no GPU aborts, and a deadlocked program is snapshotted:
#      no GPU-hardware diagnosis reaches 0.3 on any, the Xid is host context (JSON, text,
#      Markdown), the deadlock ranks first for the snapshot;
#   2. Xid 79 on GPU A, then an Xid 48 crash of a process on GPU B (B is its GPU by
#      CUDA_VISIBLE_DEVICES=GPU-<uuid> and the stub nvidia-smi's process list; a stand-in
#      /proc/driver/nvidia lists A and B); the stub hangs for A: the bundle has nvidia-smi for B
#      with its ECC counts, A is recorded as skipped (lost), and the ECC diagnosis is first;
#   4. a snapshot has no crashed thread; `report` of a deadlock names both threads and both locks;
#      the deadlock is diagnosed as one (hang-deadlock, >= 0.9), not a "possible" one;
#   5. (issue 23) an Xid 79 whose pid= is the crashed process, which opened no /dev/nvidia*: the
#      line ties that GPU to the process, and the GPU loss ranks first (not capped at 0.25);
#   6. (issue 23) a CPU-only job under `crashpack run` (no agent: run captures as root) exits 1
#      after another process's Xid: run recorded its descriptors (no /dev/nvidia*), so the exit
#      bundle says it used no GPU and no GPU diagnosis reaches 0.3.
# Every check reads only this test's pids, PCI ids and markers (other tests inject Xids too).
source "$(dirname "$0")/../lib.sh"
cp_setup
cp_install
echo on > /proc/sys/kernel/printk_devkmsg

OPID=$((70000 + RANDOM % 20000)) # the other process the injected Xid names
GPUCAT='("gpu_hardware","nvlink","thermal","gpu_driver","gpu_memory_info","gpu_info")'
crash_bundle() { # crash_bundle NAME PID: the bundle of PID, analyzed into $T/NAME.{json,txt,md}
    local b
    b=$(cp_bundle_for "$2" 60) || { fail "$1: no bundle for pid $2"; return 1; }
    "$CP_BIN/crashpack" analyze --json "$b" > "$T/$1.json" 2> "$T/$1.err" || fail "$1: analyze --json"
    "$CP_BIN/crashpack" analyze "$b" > "$T/$1.txt" 2>&1 || fail "$1: analyze"
    "$CP_BIN/crashpack" report "$b" > "$T/$1.md" 2>&1 || fail "$1: report"
}
no_gpu_diag() { # no GPU-hardware diagnosis at 0.3 or more
    check "$1: no GPU-hardware diagnosis reaches 0.3" [ "$(json "$T/$1.json" \
        "[x['rule'] for x in d['diagnoses'] if x['category'] in $GPUCAT and x['confidence'] >= 0.3]")" = "[]" ]
}
host_ctx() { # the injected Xid is host context
    check "$1: the other GPU's Xid 79 (pid $OPID) is host context" [ "$(json "$T/$1.json" \
        "[c['pci'] for c in d['gpu']['host_context'] if c['pid'] == $OPID and c['code'] == 79]")" = "['0000:ca:00.0']" ]
    check "$1: the text output shows it as context" grep -q "other GPUs of this host.*Xid 79 on 0000:ca:00.0.*pid $OPID" "$T/$1.txt"
    check "$1: the Markdown report shows it as context" grep -q "Other GPUs of this host.*Xid 79 on 0000:ca:00.0.*pid $OPID" "$T/$1.md"
}

# ---- 1. another GPU's Xid 79 first ----
echo "NVRM: Xid (PCI:0000:ca:00): 79, pid=$OPID, name=python3, GPU has fallen off the bus." > /dev/kmsg
sleep 1

# a CPU-only C program
PID=$(cp_crash "$CP_BIN/cp-abort")
crash_bundle cpu "$PID"
no_gpu_diag cpu
host_ctx cpu
check "cpu: the process used no GPU (gpu.scope)" [ "$(json "$T/cpu.json" "d['gpu']['scope']['process_gpus']")" = none ]
check "cpu: the Xid's scope is other" [ "$(json "$T/cpu.json" "[x['scope'] for x in d['gpu']['xid'] if x['pid'] == $OPID]")" = "['other']" ]

# a torch job with no GPU
if /usr/bin/python3 -c 'import torch' 2> /dev/null; then
    PID=$(cp_crash /usr/bin/python3 -c 'import torch, os; torch.zeros(4).sum(); os.abort()')
    crash_bundle torch "$PID"
    no_gpu_diag torch
    host_ctx torch
else
    echo "note: /usr/bin/python3 has no torch: the torch case is not run"
fi

# a snapshot of a deadlock
wait_ready() { for _ in $(seq 100); do [ -s "$1" ] && return 0; sleep 0.1; done; return 1; }
"$CP_BIN/cp-deadlock" > "$T/dl.out" 2>&1 &
dpid=$!
wait_ready "$T/dl.out" || die "cp-deadlock did not get ready"
sleep 0.5
read -r _ _ tab tba < "$T/dl.out"
"$CP_BIN/crashpack" snap -c "$T/conf" --json "$dpid" > "$T/dsnap.out" || fail "snap of cp-deadlock"
kill -9 "$dpid" 2>/dev/null
db=$(json "$T/dsnap.out" 'd["bundle"]["path"]')
"$CP_BIN/crashpack" analyze --json "$db" > "$T/snap.json" || fail "snap: analyze --json"
"$CP_BIN/crashpack" analyze "$db" > "$T/snap.txt" 2>&1
"$CP_BIN/crashpack" report "$db" > "$T/snap.md" 2>&1 || fail "snap: report"
no_gpu_diag snap
host_ctx snap
check "snap: the deadlock ranks first" [ "$(json "$T/snap.json" "d['diagnoses'][0]['category']")" = hang ]
# ---- 4. no crashed thread; report names both threads and both locks ----
check "snap: no thread is crashed" [ "$(json "$T/snap.json" "[t['tid'] for t in d['threads'] if t.get('crashed')]")" = "[]" ]
check "snap: the Markdown has no crashed thread" bash -c "! grep -q 'Crashed thread' '$T/snap.md'"
check "snap: the Markdown has no signal row" bash -c "! grep -q '^| Signal |' '$T/snap.md'"
check "snap: report has the hang analysis" grep -q '^## Hang analysis' "$T/snap.md"
check "snap: report's waits-for cycle: $tab waits for lock_b held by $tba, holds lock_a" \
    grep -Eq "^\| $tab .*\| \`lock_b\`.*\| thread $tba \| \`lock_a\` \|" "$T/snap.md"
check "snap: report's waits-for cycle: $tba waits for lock_a held by $tab, holds lock_b" \
    grep -Eq "^\| $tba .*\| \`lock_a\`.*\| thread $tab \| \`lock_b\` \|" "$T/snap.md"
check "snap: diagnosis #1 is the proved deadlock at >= 0.9 (hang-deadlock), no \"possible\" one" \
    [ "$(json "$T/snap.json" "(d['diagnoses'][0]['rule'], d['diagnoses'][0]['confidence'] >= 0.9, [x['rule'] for x in d['diagnoses'] if x['rule'] == 'hang-lock-wait'])")" = "('hang-deadlock', True, [])" ]
check "snap: the deadlock's evidence names both threads, both locks, the frame and line" \
    python3 - "$T/snap.json" "$tab" "$tba" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); a, b = sys.argv[2], sys.argv[3]
ev = "\n".join(d["diagnoses"][0]["evidence"])
assert f"thread {a} (worker-ab) holds lock_a, waits for mutex lock_b held by thread {b}, in take_second (cp-deadlock.c:" in ev, ev
assert f"thread {b} (worker-ba) holds lock_b, waits for mutex lock_a held by thread {a}, in take_second (cp-deadlock.c:" in ev, ev
PY
check "snap: the Markdown's title names the deadlock" grep -q '^# Crash report: .* — Deadlock: threads wait for each other' "$T/snap.md"

# ---- 5. an Xid 79 that names the crashed process, which opened no /dev/nvidia* ----
/bin/sh -c 'echo $$ > '"$T"'/xpid; echo "NVRM: Xid (PCI:0000:c5:00): 79, pid=$$, name=cp-abort, GPU has fallen off the bus." > /dev/kmsg; exec '"$CP_BIN"'/cp-abort' > /dev/null 2>&1
XPID=$(cat "$T/xpid")
crash_bundle ownxid "$XPID"
check "ownxid: the Xid is the process's (own_pid, scope own, its GPU)" \
    [ "$(json "$T/ownxid.json" "[(x['own_pid'], x['scope'], x['own_gpu']) for x in d['gpu']['xid'] if x['pid'] == $XPID]")" = "[(True, 'own', True)]" ]
check "ownxid: gpu.scope knows the GPU from the kernel line" \
    [ "$(json "$T/ownxid.json" "(d['gpu']['scope']['process_gpus'], d['gpu']['scope']['pci'], 'names this process' in d['gpu']['scope']['reason'])")" = "('known', ['0000:c5:00.0'], True)" ]
check "ownxid: the GPU loss ranks first, uncapped" \
    [ "$(json "$T/ownxid.json" "(d['diagnoses'][0]['rule'], d['diagnoses'][0]['confidence'] >= 0.9, 'confidence_note' in d['diagnoses'][0])")" = "('xid-79-fallen-off-bus', True, False)" ]

# ---- 6. a CPU-only job under crashpack run, another process's Xid on the host ----
echo "NVRM: Xid (PCI:0000:ca:00): 79, pid=$OPID, name=python3, GPU has fallen off the bus." > /dev/kmsg
printf 'agent_socket = %s/no-agent.sock\n' "$T" >> "$T/conf"
"$CP_BIN/crashpack" run -c "$T/conf" --job scope-cpu-$$ -- /usr/bin/python3 -c 'import time; time.sleep(2.5); raise SystemExit(1)' > "$T/run6.out" 2>&1
RB=$(grep -o "bundle $T/bundles/[^ ]*" "$T/run6.out" | head -1 | cut -d' ' -f2)
check "run: one exit bundle ($RB)" [ -f "$RB" ]
if [ -f "$RB" ]; then
    "$CP_BIN/crashpack" analyze --json "$RB" > "$T/run.json" 2> /dev/null
    check "run: process.json records run's looks at its descriptors, no /dev/nvidia*" \
        [ "$(cp_member "$RB" process.json | python3 -c 'import json,sys; g=json.load(sys.stdin)["gpu"]; print(g["looks"] >= 1, g["devices"])')" = "True []" ]
    check "run: the exit bundle says the process used no GPU" \
        [ "$(json "$T/run.json" "d['gpu']['scope']['process_gpus']")" = none ]
    no_gpu_diag run
fi

# ---- 2. Xid 79 on GPU A, an Xid 48 crash on GPU B ----
if [ ! -e /proc/driver/nvidia ] && mount -t tmpfs -o size=1m,mode=755 crashpack-scope /proc/driver 2>/dev/null; then
    trap 'rc=$?; umount /proc/driver 2>/dev/null || umount -l /proc/driver 2>/dev/null; (exit $rc); cp_restore' EXIT
    UA=GPU-aaaaaaaa-1111-2222-3333-444444444444 UB=GPU-bbbbbbbb-5555-6666-7777-888888888888
    mkdir -p /proc/driver/nvidia/gpus/0000:3b:00.0 /proc/driver/nvidia/gpus/0000:86:00.0
    printf 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.54.03  Tue Jun  6 22:20:39 UTC 2023\n' \
        > /proc/driver/nvidia/version
    info() { printf 'Model: \t\t NVIDIA A100-SXM4-80GB\nIRQ:   \t\t 0\nGPU UUID: \t %s\nDevice Minor: \t %s\nBus Location: \t %s\n' "$3" "$2" "$1" > "/proc/driver/nvidia/gpus/$1/information"; }
    info 0000:3b:00.0 0 "$UA"
    info 0000:86:00.0 1 "$UB"
    # B's nvidia-smi: the recorded A100 XML as GPU B, 3 volatile DBEs, this process running on it
    /usr/bin/python3 - "$CP_SRC/fixtures/nvidia-smi/a100-sxm4-80gb-driver535.xml" "$T/B.xml" "$UB" <<'PY'
import re, sys
x = open(sys.argv[1]).read()
x = x.replace('<attached_gpus>4</attached_gpus>', '<attached_gpus>1</attached_gpus>')
x = re.sub(r'<gpu id="[^"]*">', '<gpu id="00000000:86:00.0">', x, count=1)
x = re.sub(r'<uuid>[^<]*</uuid>', '<uuid>%s</uuid>' % sys.argv[3], x, count=1)
x = re.sub(r'<pci_bus_id>[^<]*</pci_bus_id>', '<pci_bus_id>00000000:86:00.0</pci_bus_id>', x)
v = x.index('<volatile>')
x = x[:v] + x[v:].replace('<dram_uncorrectable>0</dram_uncorrectable>', '<dram_uncorrectable>3</dram_uncorrectable>', 1)
proc = ('<processes><process_info><gpu_instance_id>N/A</gpu_instance_id><compute_instance_id>N/A</compute_instance_id>'
        '<pid>@PID@</pid><type>C</type><process_name>cp-abort</process_name><used_memory>1024 MiB</used_memory></process_info></processes>')
x = re.sub(r'<processes>.*?</processes>|<processes\s*/>', proc, x, count=1, flags=re.S)
open(sys.argv[2], 'w').write(x)
PY
    grep -q '@PID@' "$T/B.xml" || fail "B.xml: no process list to fill"
    printf '#!/bin/sh\ncase "$*" in\n*0000:3b:00.0*) /bin/touch %s/smi-A-ran; exec /bin/sleep 1000;;\n*0000:86:00.0*) /bin/sed "s/@PID@/$(/bin/cat %s/bpid)/" %s/B.xml; exit 0;;\nesac\n/bin/touch %s/smi-all-ran; exec /bin/sleep 1000\n' \
        "$T" "$T" "$T" "$T" > "$T/smi-stub"
    chmod 755 "$T/smi-stub"
    printf 'nvidia_smi = %s\nnvidia_smi_timeout = 5\n' "$T/smi-stub" >> "$T/conf"
    echo "NVRM: Xid (PCI:0000:3b:00): 79, pid=$OPID, name=python3, GPU has fallen off the bus." > /dev/kmsg
    sleep 1
    "$CP_BIN/crashpack" install --force --no-sysctl-d -c "$T/conf" > /dev/null || die "reinstall"
    /bin/sh -c 'echo $$ > '"$T"'/bpid; echo "NVRM: Xid (PCI:0000:86:00): 48, pid=$$, name=cp-abort, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 1, subpartition 0." > /dev/kmsg; exec /usr/bin/env CUDA_VISIBLE_DEVICES='"$UB"' '"$CP_BIN"'/cp-abort' > /dev/null 2>&1
    BPID=$(cat "$T/bpid")
    b=$(cp_bundle_for "$BPID" 60) || fail "gpuB: no bundle for pid $BPID"
    mkdir -p "$T/gb" && tar --zstd -xf "$b" -C "$T/gb"
    check "gpuB: nvidia-smi for B in the bundle" [ -f "$T/gb/nvidia-smi/0000:86:00.0.xml" ]
    check "gpuB: no nvidia-smi for A (lost)" [ ! -e "$T/gb/nvidia-smi/0000:3b:00.0.xml" ]
    check "gpuB: the stub was never run for A" [ ! -e "$T/smi-A-ran" ]
    check "gpuB: nvidia-smi.json: B answered, A skipped as lost" [ "$(json "$T/gb/nvidia-smi.json" \
        "sorted((g['pci'], g['status']) for g in d['gpus'])")" = "[('0000:3b:00.0', 'skipped'), ('0000:86:00.0', 'ok')]" ]
    crash_bundle gpuB "$BPID"
    check "gpuB: B's ECC counts in the report" [ "$(json "$T/gpuB.json" \
        "[(g['pci'], g['ecc']['volatile_dbe'], g['own']) for g in d['gpu']['nvidia_smi']['gpus']]")" = "[('0000:86:00.0', 3, True)]" ]
    check "gpuB: the ECC diagnosis is first" [ "$(json "$T/gpuB.json" "d['diagnoses'][0]['rule']")" = xid-48-double-bit-ecc ]
    check "gpuB: ecc-dbe-counted matched too" [ "$(json "$T/gpuB.json" "'ecc-dbe-counted' in [x['rule'] for x in d['diagnoses']]")" = True ]
    check "gpuB: A's Xid 79 is no diagnosis" [ "$(json "$T/gpuB.json" "'xid-79-fallen-off-bus' in [x['rule'] for x in d['diagnoses']]")" = False ]
    check "gpuB: A's Xid 79 is host context" [ "$(json "$T/gpuB.json" \
        "[c['code'] for c in d['gpu']['host_context'] if c['pci'] == '0000:3b:00.0' and c['pid'] == $OPID]")" = "[79]" ]
    check "gpuB: report lists A as skipped" grep -q "nvidia-smi -i \`0000:3b:00.0\`: skipped" "$T/gpuB.md"
    # history: the knowledge base keeps B's Xid 48 (by B's UUID) and not A's Xid 79 (another
    # process's GPU); the next crash on B carries it as evidence, citing the earlier crash
    KB=$T/kb.sqlite
    "$CP_BIN/crashpack" db add --db "$KB" "$b" > "$T/dbadd.out" 2>&1 || fail "gpuB: db add: $(cat "$T/dbadd.out")"
    check "history: B's Xid 48 stored as a fault of GPU B (its UUID), nothing of A" \
        [ "$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute(\"SELECT scope, uuid, code FROM gpu_faults WHERE scope = 'gpu'\").fetchall())" "$KB")" = "[('gpu', '$UB', 48)]" ]
    /bin/sh -c 'echo $$ > '"$T"'/bpid; exec /usr/bin/env CUDA_VISIBLE_DEVICES='"$UB"' '"$CP_BIN"'/cp-abort' > /dev/null 2>&1
    B2=$(cat "$T/bpid")
    b2=$(cp_bundle_for "$B2" 60) || fail "history: no bundle for pid $B2"
    "$CP_BIN/crashpack" analyze --db "$KB" --json "$b2" > "$T/hist.json" 2> "$T/hist.err" || fail "history: analyze"
    check "history: the next crash on B carries B's earlier Xid 48 (crash #1), and nothing of A" \
        [ "$(json "$T/hist.json" "[(h['scope'], h['uuid'], h['code'], h['crash_id']) for h in d['gpu']['history']]")" = "[('gpu', '$UB', 48, 1)]" ]
    check "history: gpu-fault-history is among the diagnoses, citing crash #1" \
        python3 -c "import json,sys; d=json.load(open(sys.argv[1])); x=[x for x in d['diagnoses'] if x['rule'] == 'gpu-fault-history']; sys.exit(0 if x and any('in crash #1 of the knowledge base' in e for e in x[0]['evidence']) else 1)" "$T/hist.json"
    CRASHPACK_DB=$T/no-kb.sqlite "$CP_BIN/crashpack" analyze --json "$b2" > "$T/nohist.json" 2> /dev/null
    check "history: without a knowledge base there is none, and the report says why" \
        [ "$(json "$T/nohist.json" "(d['gpu']['history'], 'gpu-fault-history' in [x['rule'] for x in d['diagnoses']], d['gpu']['history_error'] is not None)")" = "([], False, True)" ]
    umount /proc/driver 2>/dev/null
else
    echo "note: /proc/driver/nvidia exists or /proc/driver cannot be overmounted: the two-GPU case is not run"
fi
finish
