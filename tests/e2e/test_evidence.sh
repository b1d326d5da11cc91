#!/usr/bin/env bash
# Acceptance (issue 5, evidence decoding) through the real kernel core_pattern: real Xid lines written
# to /dev/kmsg (an own-GPU Xid 79, a Xid for the crashing pid, a neighbour GPU's Xid, the three-line
# fallen-off-the-bus message without an Xid, an Xid 45 "caused by previous Xid 79"), a stub
# nvidia-smi printing the real T4 XML with the crashing pid as its compute process, a realistic
# stderr file (a PyTorch CUDA OOM traceback and an NCCL watchdog timeout) and a truncated newest
# checkpoint; `crashpack analyze --json` must decode them all: gpu.xid[] with code / pci / meaning /
# blame / action / own_gpu / own_pid / caused_by, gpu.nvidia_smi figures, log.errors with their
# fields, kernel_log.lines, the checkpoint verdict (re-checked here while the file is unchanged,
# from capture time once it changed) and process.env. The text mode shows the same evidence.
source "$(dirname "$0")/../lib.sh"
cp_setup

FX=$CP_SRC/fixtures/nvidia-smi/t4-driver515.xml # GPU 00000000:00:1E.0, process pid 5762
PY=/usr/bin/python3
echo on > /proc/sys/kernel/printk_devkmsg || die "cannot set printk_devkmsg"
# a short bus-lost window: the Xid 79 injected 2 s before the crash must not skip nvidia-smi
# kmsg_margin = 1: the window starts 1 s before the victim, so lines other tests left in the ring
# are not in it (the PCI ids below are used by no other test either)
printf '%s\n' "nvidia_smi = $T/smi" "nvidia_smi_bus_lost_window = 1" "kmsg_margin = 1" >> "$T/conf"
cp_install

# the stub: the real XML, with the crashing pid as the GPU's compute process
printf '#!/bin/sh\n/bin/sed "s|<pid>5762</pid>|<pid>$(/bin/cat %s/vpid)</pid>|" %s\n' "$T" "$FX" > "$T/smi"
chmod 755 "$T/smi"

# checkpoints: an intact older one and a truncated newest one
mkdir -p "$T/ck" "$T/samples"
$PY "$CP_SRC/fixtures/checkpoint/make_samples.py" "$T/samples" > /dev/null || die "make_samples.py failed"
cp "$T/samples/valid.pt" "$T/ck/step_1000.pt"
cp "$T/samples/truncated.pt" "$T/ck/step_2000.pt"
touch -d '-10 minutes' "$T/ck/step_1000.pt"

# a realistic stderr: a training log, an OOM traceback, an NCCL watchdog timeout
cat > "$T/stderr.src" <<'EOF'
[2024-06-01 03:11:02] epoch 3 step 41990 loss=2.1733 lr=3.0e-4
[2024-06-01 03:11:40] epoch 3 step 42000 loss=2.1690 lr=3.0e-4
Traceback (most recent call last):
  File "/job/train.py", line 212, in <module>
    loss.backward()
  File "/usr/lib/python3/dist-packages/torch/_tensor.py", line 522, in backward
    torch.autograd.backward(
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 22.00 MiB. GPU 0 has a total capacity of 23.65 GiB of which 11.06 MiB is free. Including non-PyTorch memory, this process has 23.60 GiB memory in use. Of the allocated memory 22.90 GiB is allocated by PyTorch, and 194.87 MiB is reserved by PyTorch but unallocated.
[rank0]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7753, OpType=ALLREDUCE, NumelIn=544997376, NumelOut=544997376, Timeout(ms)=600000) ran for 600061 milliseconds before timing out.
EOF

kinject() { $PY -c 'import os,sys
fd = os.open("/dev/kmsg", os.O_WRONLY)
for t in sys.argv[1:]:
    os.write(fd, t.encode())
os.close(fd)' "$@"; }

mkfifo "$T/go"
# the victim: its stderr is a regular file with the log above; it waits for "go", then crashes
env -i PATH=/usr/bin:/bin CUDA_VISIBLE_DEVICES=0 NCCL_DEBUG=INFO CRASHPACK_CHECKPOINT="$T/ck/step_2000.pt" \
    bash -c 'cat "$1" >&2; exec "$2" 8 wait' _ "$T/stderr.src" "$CP_BIN/cp-bigheap" \
    < "$T/go" > "$T/victim.out" 2> "$T/job.err" &
vpid=$!
echo "$vpid" > "$T/vpid"
exec 7>"$T/go"
for _ in $(seq 100); do grep -q ready "$T/victim.out" 2>/dev/null && break; sleep 0.1; done
grep -q ready "$T/victim.out" || die "the victim did not start"

kinject "NVRM: Xid (PCI:0000:00:1e): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus." \
    "NVRM: Xid (PCI:0000:00:1e): 45, pid=$vpid, name=cp-bigheap, Ch 00000008 caused by previous Xid 79" \
    "NVRM: Xid (PCI:0000:00:1e): 13, pid=$vpid, name=cp-bigheap, Graphics SM Warp Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction Parameter" \
    "NVRM: Xid (PCI:0000:af:00): 31, pid=$$, name=python, Ch 00000030, intr 00000000. MMU Fault: ENGINE HOST0 HUBCLIENT_ESC faulted @ 0x10_00200000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ" \
    $'NVRM: The NVIDIA GPU 0000:c4:00.0\nNVRM: (PCI ID: 10de:26b5) installed in this system has\nNVRM: fallen off the bus and is not responding to commands.'
sleep 2 # past the 1 s bus-lost window
echo go >&7
exec 7>&-
wait "$vpid" 2>/dev/null
B=$(cp_bundle_for "$vpid" 60) || die "no bundle for pid $vpid"
R=$T/report.json
"$CP_BIN/crashpack" analyze --json "$B" > "$R"
rc=$?
check "analyze --json exits 0 or 1 (rc $rc) with a JSON report" bash -c "[ $rc -le 1 ] && json '$R' 'd[\"format\"]' > /dev/null"
check "the bundle has nvidia-smi.xml, kmsg.json, logs/stderr.tail, checkpoint-verdict.json" bash -c \
    "tar --zstd -tf '$B' | grep -cxE 'nvidia-smi.xml|kmsg.json|logs/stderr.tail|checkpoint-verdict.json' | grep -qx 4"

# q PYEXPR: true over d (the report), with x = gpu.xid as a list, X(code) = the Xids of a code
q() { python3 - "$R" "$vpid" "$$" "$1" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1])); vpid = int(sys.argv[2]); me = int(sys.argv[3])
x = d["gpu"]["xid"]
x = [e for e in x if e["pci"] in ("0000:00:1e.0", "0000:af:00.0", "0000:c4:00.0")]  # ours only
X = lambda c: [e for e in x if e["code"] == c]
ok = eval(sys.argv[4])
if not ok:
    print("   false: " + sys.argv[4], file=sys.stderr)
sys.exit(0 if ok else 1)
PYEOF
}
check "no evidence_error (the Xid catalogue and the log patterns loaded)" q '"evidence_error" not in d'
check "xid: the four injected Xids and the implied one (79 without an Xid) are there" \
    q '{13, 31, 45, 79} <= {e["code"] for e in x} and len(X(79)) == 2'
check "xid: own-GPU Xid 79 decoded (pci, meaning, blame bus, action drain, own_gpu, no pid)" \
    q 'any(e["pci"] == "0000:00:1e.0" and e["own_gpu"] is True and e["blame"] == "bus" and e["action"] == "drain" and "fallen off the bus" in e["meaning"] and e["pid"] is None and e["own_pid"] is False and not e["implied"] and e["source"] == "kmsg" for e in X(79))'
check "xid: the Xid 13 of the crashing pid: own_pid, own_gpu, name, application blame" \
    q 'X(13)[0]["own_pid"] is True and X(13)[0]["pid"] == vpid and X(13)[0]["own_gpu"] is True and X(13)[0]["name"] == "cp-bigheap" and X(13)[0]["blame"] == "application"'
check "xid: the neighbour GPU's Xid 31 is not ours (own_gpu false, own_pid false)" \
    q 'X(31)[0]["pci"] == "0000:af:00.0" and X(31)[0]["own_gpu"] is False and X(31)[0]["own_pid"] is False and X(31)[0]["pid"] == me'
check "xid: caused by previous Xid 79" q 'X(45)[0]["caused_by"] == 79 and X(13)[0]["caused_by"] is None'
check "xid: the three-line bus message is an implied Xid 79 on 0000:c4:00.0, not ours" \
    q 'any(e["implied"] and e["pci"] == "0000:c4:00.0" and e["own_gpu"] is False for e in X(79))'
check "xid: time-ordered, wall-clock times with time_utc" \
    q '[e["time"] for e in x] == sorted(e["time"] for e in x) and all(e["time_utc"].endswith("Z") and abs(e["time"] - d["host"]["time"]) < 120 for e in x)'
check "kernel_log.lines: every kmsg.json line, the Xids with their code and class" \
    q 'sum(1 for l in d["kernel_log"]["lines"] if l["xid"] == 13 and l["class"] == "xid" and "PCI:0000:00:1e" in l["text"]) == 1 and all(set(l) >= {"time","time_utc","class","text","xid"} for l in d["kernel_log"]["lines"])'

check "nvidia_smi: parsed, no error, driver and CUDA versions" \
    q 'd["gpu"]["nvidia_smi_error"] is None and d["gpu"]["nvidia_smi"]["driver_version"] == "515.105.01" and d["gpu"]["nvidia_smi"]["cuda_version"] == "11.7"'
check "nvidia_smi: the T4's memory, ECC, temperature, power and the crashing pid's process" \
    q '(lambda g: g["pci"] == "0000:00:1e.0" and g["memory_used_mib"] == 1032 and g["memory_total_mib"] == 15360 and g["ecc"]["volatile_dbe"] == 0 and g["temperature_c"] == 40 and g["power_w"] == 26.78 and any(p["pid"] == vpid and p["used_mib"] == 1005 for p in g["processes"]) and g["own"] is True)(d["gpu"]["nvidia_smi"]["gpus"][0])'

check "log.errors: the CUDA OOM with its figures, line and source" \
    q 'any(e["category"] == "cuda_oom" and e["fields"]["tried_mib"] == 22 and e["fields"]["free_mib"] == 11.06 and e["line"] == 8 and e["source"] == "logs/stderr.tail" for e in d["log"]["errors"])'
check "log.errors: the NCCL watchdog timeout with op / seq / timeout" \
    q 'any(e["category"] == "nccl_timeout" and e["fields"]["op"] == "ALLREDUCE" and e["fields"]["seq"] == 7753 and e["fields"]["timeout_ms"] == 600000 for e in d["log"]["errors"])'
check "log.errors: the training-progress lines are not errors" \
    q 'not any("loss=" in e["text"] for e in d["log"]["errors"])'

check "checkpoint: truncated newest, re-checked here, the intact one named" \
    q 'd["checkpoint"]["path"].endswith("/ck/step_2000.pt") and d["checkpoint"]["valid"] is False and d["checkpoint"]["verdict"] == "truncated" and d["checkpoint"]["verdict_from"] == "recheck" and d["checkpoint"]["newest_valid"].endswith("/ck/step_1000.pt")'
check "process.env: the captured environment" \
    q 'd["process"]["env"].get("CUDA_VISIBLE_DEVICES") == "0" and d["process"]["env"].get("NCCL_DEBUG") == "INFO"'

# the file changed since the capture: the verdict is the capture's
touch "$T/ck/step_2000.pt"
"$CP_BIN/crashpack" analyze --json "$B" > "$R"
check "checkpoint: after the file changed, verdict_from capture (still truncated)" \
    q 'd["checkpoint"]["verdict_from"] == "capture" and d["checkpoint"]["verdict"] == "truncated" and d["checkpoint"]["valid"] is False'

"$CP_BIN/crashpack" analyze "$B" > "$T/report.txt"
check "text: the own-GPU Xid 79 line" grep -q "Xid 79 on 0000:00:1e.0 (this process's GPU)" "$T/report.txt"
check "text: the GPU figures" grep -q "0000:00:1e.0 Tesla T4: memory 1032/15360 MiB" "$T/report.txt"
check "text: the log error with its place" grep -q "logs/stderr.tail:8 cuda_oom" "$T/report.txt"
check "text: the checkpoint verdict and the newest valid one" bash -c \
    "grep -q 'step_2000.pt: truncated' '$T/report.txt' && grep -q 'newest valid: .*step_1000.pt' '$T/report.txt'"
finish
