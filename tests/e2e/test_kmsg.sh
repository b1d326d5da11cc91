#!/usr/bin/env bash
# Acceptance (issue 3, #1 and the kmsg outcomes of #6): through the real kernel core_pattern, real
# kernel-log lines written to /dev/kmsg (fixtures/kmsg: Xid lines of every driver era, an Xid for the
# crashing pid, a pid-less Xid 79 with the fallen-off-the-bus lines, a neighbour GPU's Xid, OOM,
# MCE, hung task...) end up in the bundle's kmsg.json with wall-clock times and source "kmsg", and
# noise does not; the window starts at process start minus kmsg_margin (a line just before it is
# left out, one just after is kept); a recent bus-loss Xid sets bus_lost_recent; when the ring does
# not reach back to the window start the older lines come from /var/log/kern.log{,.1} (both syslog
# timestamp forms); without /dev/kmsg the step is "absent" and kern.log still answers; kmsg_max
# keeps the newest lines.
#
# It writes to /dev/kmsg (printk_devkmsg=on, restored by cp_setup's trap), places test files at
# /var/log/kern.log{,.1} (bind-mounted over real ones, else created and removed) and renames
# /dev/kmsg for a moment; the EXIT trap undoes all three.
source "$(dirname "$0")/../lib.sh"
cp_setup

FIX=$CP_SRC/fixtures/kmsg
KL_MADE=()
KL_MOUNTED=()
KMSG_OFF=/dev/kmsg.crashpack-test-off
kl_cleanup() {
    if [ -e "$KMSG_OFF" ] && [ ! -e /dev/kmsg ]; then mv "$KMSG_OFF" /dev/kmsg; fi
    local f
    for f in "${KL_MOUNTED[@]}"; do umount "$f" 2>/dev/null; done
    for f in "${KL_MADE[@]}"; do rm -f "$f"; done
}
trap 'rc=$?; kl_cleanup; (exit $rc); cp_restore' EXIT

echo on > /proc/sys/kernel/printk_devkmsg || die "cannot set printk_devkmsg"
cp "$T/conf" "$T/conf.base"
conf() { cp "$T/conf.base" "$T/conf"; printf '%s\n' "$@" >> "$T/conf"; }
cp_install

cat > "$T/kt.py" <<'PY'
import json, os, re, sys, time

def records(fixdir):
    """Real lines, prefixes stripped; a blank-led line continues the record above it."""
    pre = re.compile(r'^(?:[A-Z][a-z]{2} +\d+ \d\d:\d\d:\d\d (?:\S+ )?kernel: |kernel: )?(?:\[[^\]]*\] )?')
    gpu, noise = [], []
    for l in open(os.path.join(fixdir, "kmsg-xid.jsonl")):
        recs = []
        for raw in json.loads(l)["lines"]:
            if raw[:1].isspace() and recs:
                recs[-1] += "\n" + raw.strip()
            else:
                recs.append(pre.sub("", raw))
        for r in recs:
            (noise if r.startswith("sched: ") else gpu).append({"text": r})
    for l in open(os.path.join(fixdir, "kernel-lines.jsonl")):
        d = json.loads(l)
        gpu.append({"text": d["line"], "class": d["class"]})
    noise += [{"text": l.rstrip("\n")} for l in open(os.path.join(fixdir, "noise.txt")) if l.strip()]
    return gpu, noise

XID = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f:.]+)(?: GPU-I:(\d+))?[^)]*\): (\d+)")
BUSLOST = {74, 79, 95, 119, 120, 154}  # not 48: after a DBE nvidia-smi still answers

def buslost(t):
    m = XID.search(t)
    return "fallen off the bus" in t or "RmInitAdapter failed" in t or (m and int(m.group(3)) in BUSLOST)

def inject(texts):
    fd = os.open("/dev/kmsg", os.O_WRONLY)
    for t in texts:
        os.write(fd, t.encode())  # one write, one record
    os.close(fd)

def load(p):
    return json.load(open(p))

def fail(msg):
    print("   " + msg, file=sys.stderr)
    return 1

def main():
    cmd, a = sys.argv[1], sys.argv[2:]
    if cmd == "prepare":  # FIXDIR OUTDIR: expected and noise records as JSON
        gpu, noise = records(a[0])
        json.dump(gpu, open(a[1] + "/gpu.json", "w"))
        json.dump(noise, open(a[1] + "/noise.json", "w"))
        return 0
    if cmd == "inject":  # FILE.json [extra texts...]: prints the wall-clock time before writing
        texts = [r["text"] for r in load(a[0])] if a[0] != "-" else []
        texts += a[1:]
        print("%.6f" % time.time())
        inject(texts)
        return 0
    if cmd == "start":  # PID: process start, wall-clock, as the kernel counts it
        f = open("/proc/%s/stat" % a[0]).read()
        ticks = int(f[f.rindex(")") + 2:].split()[19])
        print("%.6f" % (time.time() - (time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK"))))
        return 0
    if cmd == "ringoldest":  # wall-clock time of the oldest record in the ring
        fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
        while True:
            try:
                r = os.read(fd, 16384)
                break
            except BrokenPipeError:
                continue
        ts = int(r.split(b",")[2]) / 1e6
        print("%.6f" % (time.time() - (time.clock_gettime(time.CLOCK_MONOTONIC) - ts)))
        return 0
    if cmd == "kept":  # KMSG.json RECORDS.json T_INJ: each record kept, near T_INJ, source kmsg
        d, recs, t = load(a[0]), load(a[1]), float(a[2])
        bad = 0
        for r in recs:
            hits = [l for l in d["lines"] if l["text"] == r["text"] and abs(l["time"] - t) < 5]
            if not hits:
                bad += fail("not kept (or time off): %r" % r["text"][:100])
                continue
            l = hits[-1]
            if l["source"] != "kmsg" or l["facility"] != "user":
                bad += fail("source/facility %s/%s: %r" % (l["source"], l["facility"], r["text"][:80]))
            m = XID.search(r["text"])
            want = r.get("class") or ("xid" if m else None)
            if want and l["class"] != want:
                bad += fail("class %s, want %s: %r" % (l["class"], want, r["text"][:80]))
            if m and l.get("xid") != int(m.group(3)):
                bad += fail("xid %s, want %s: %r" % (l.get("xid"), m.group(3), r["text"][:80]))
            if not re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$", l["time_utc"]):
                bad += fail("time_utc %r" % l["time_utc"])
        return 1 if bad else 0
    if cmd == "absent":  # KMSG.json TEXT...: none of the texts is kept (substring)
        d, bad = load(a[0]), 0
        for t in a[1:]:
            for l in d["lines"]:
                if t in l["text"]:
                    bad += fail("kept but should not be: %r" % l["text"][:100])
        return 1 if bad else 0
    if cmd == "absentfile":  # KMSG.json RECORDS.json
        return main_absent(a[0], [r["text"] for r in load(a[1])])
    if cmd == "has":  # KMSG.json SOURCE TEXT: a line with this text and source
        d = load(a[0])
        return 0 if any(l["text"] == a[2] and l["source"] == a[1] for l in d["lines"]) else fail("missing %r" % a[2])
    if cmd == "lastbus":  # RECORDS.json: the text of the last bus-loss record
        print([r["text"] for r in load(a[0]) if buslost(r["text"])][-1].replace("\n", "\\n"))
        return 0
    if cmd == "expr":  # FILE PYEXPR: exit 0 iff the expression (over d) is true
        d = load(a[0])
        v = eval(a[1])
        return 0 if v else fail("false: %s (file %s)" % (a[1], a[0]))
    if cmd == "get":
        d = load(a[0])
        print(eval(a[1]))
        return 0
    return 2

def main_absent(path, texts):
    d, bad = load(path), 0
    for t in texts:
        for l in d["lines"]:
            if l["text"] == t:
                bad += fail("kept but should not be: %r" % t[:100])
    return 1 if bad else 0

sys.exit(main())
PY
kt() { python3 "$T/kt.py" "$@"; }
kt prepare "$FIX" "$T" || die "cannot read fixtures/kmsg"

# extract NAME BUNDLE: members into $T/NAME
extract() { mkdir -p "$T/$1"; tar --zstd -xf "$2" -C "$T/$1" || fail "$1: tar --zstd -xf failed"; }
step() { kt get "$T/$1/capture.json" "[s for s in d['steps'] if s['name']=='kmsg.json'][0]['$2']"; }

# --- A: real lines around a crash, the window edges, bus loss --------------------------------------
conf "kmsg_margin = 2"
early="NVRM: Xid (PCI:0000:3d:00): 43, pid=$((900000 + RANDOM)), Ch 00000008"
inside="NVRM: Xid (PCI:0000:3d:00): 43, pid=$((800000 + RANDOM)), Ch 00000008"
kt inject - "$early" >/dev/null
sleep 3.5
kt inject - "$inside" >/dev/null
sleep 0.5
mkfifo "$T/go"
"$CP_BIN/cp-bigheap" 8 wait < "$T/go" > "$T/victim.out" 2>&1 &
vpid=$!
exec 7>"$T/go"
for _ in $(seq 100); do grep -q ready "$T/victim.out" 2>/dev/null && break; sleep 0.1; done
vstart=$(kt start "$vpid")
own="NVRM: Xid (PCI:0000:3b:00): 13, pid=$vpid, name=cp-bigheap, Graphics Exception: ESR 0x57c730=0xc04000b 0x57c734=0x24 0x57c728=0x1f81fb60 0x57c72c=0x1174"
neighbour="NVRM: Xid (PCI:0000:5e:00): 31, pid=$$, name=python, Ch 00000030, intr 00000000. MMU Fault: ENGINE HOST0 HUBCLIENT_ESC faulted @ 0x10_00200000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ"
python3 -c 'import json,sys; json.dump([{"text":t} for t in sys.argv[2:]], open(sys.argv[1],"w"))' \
    "$T/mine.json" "$own" "$neighbour"
t_inj=$(kt inject "$T/mine.json")
kt inject "$T/gpu.json" >/dev/null
kt inject "$T/noise.json" >/dev/null
echo go >&7
exec 7>&-
wait "$vpid" 2>/dev/null
B=$(cp_bundle_for "$vpid" 30) || die "A: no bundle for pid $vpid"
extract A "$B"
K=$T/A/kmsg.json
check "A: kmsg.json is valid JSON from /dev/kmsg" kt expr "$K" 'd["source"] == "/dev/kmsg"'
check "A: kmsg.json comes before core" \
    bash -c "tar --zstd -tf '$B' | grep -n -e '^kmsg.json$' -e '^core$' | cut -d: -f2 | tr '\n' ' ' | grep -q '^kmsg.json core'"
check "A: step ok" [ "$(step A status)" = ok ]
check "A: step reason 'N lines kept of M read'" bash -c "grep -Eq '^[0-9]+ lines kept of [0-9]+ read' <<< '$(step A reason)'"
check "A: the Xid for the crashing pid and a neighbour GPU's Xid are kept, near injection time" \
    kt kept "$K" "$T/mine.json" "$t_inj"
check "A: every real GPU/kernel line kept, with wall-clock time, source kmsg, class, Xid code" \
    kt kept "$K" "$T/gpu.json" "$t_inj"
check "A: the crashing pid's Xid text names pid=$vpid" kt expr "$K" "any('pid=$vpid,' in l['text'] and l.get('xid') == 13 for l in d['lines'])"
check "A: the multi-line fallen-off-the-bus record is kept whole, class bus" \
    kt expr "$K" 'any(l["text"].startswith("NVRM: The NVIDIA GPU 0000:b3:00.0\nNVRM: (PCI ID") and l["text"].endswith("not responding to commands.") and l["class"] == "bus" for l in d["lines"])'
check "A: no noise line is kept" kt absentfile "$K" "$T/noise.json"
check "A: a line from before the window (process start - margin) is left out" kt absent "$K" "$early"
check "A: a line inside the margin is kept" kt expr "$K" "any(l['text'] == '''$inside''' for l in d['lines'])"
check "A: window.from = process start ($vstart) - kmsg_margin (2 s)" \
    kt expr "$K" "abs(d['window']['from'] - ($vstart - 2)) < 0.5 and abs(d['window']['process_start'] - $vstart) < 0.5 and d['window']['margin_s'] == 2"
check "A: window.to is the capture time" kt expr "$K" "abs(d['window']['to'] - $t_inj) < 30 and d['window']['to'] >= $t_inj"
check "A: the ring reaches back to the window: not wrapped, kern.log not used" \
    kt expr "$K" 'd["wrapped"] is False and d["kern_log"]["used"] is False and d["ring_oldest_time"] < d["window"]["from"]'
check "A: lines are in time order" kt expr "$K" 'all(a["time"] <= b["time"] + 1e-6 for a, b in zip(d["lines"], d["lines"][1:]))'
check "A: not truncated" kt expr "$K" 'd["truncated"] is False and d["dropped"] == 0'
check "A: every kept line has seq, ts_usec, time, time_utc, facility, level, class, text, source" \
    kt expr "$K" 'all(all(k in l for k in ("seq","ts_usec","time","time_utc","facility","facility_num","level","level_num","class","text","source")) for l in d["lines"])'
lastbus=$(kt lastbus "$T/gpu.json")
check "A: bus_lost_recent is true, naming the newest bus-loss line" \
    kt expr "$K" "d['bus_lost_recent'] is True and d['bus_lost_line'] == '''$lastbus'''.replace('\\\\n', '\\n')[:255]"
check "A: capture.json's kmsg step mentions the bus loss" grep -q 'GPU bus loss' <<< "$(step A reason)"
if dmesg | grep -q "cp-bigheap\[$vpid\]: segfault at"; then
    check "A: the kernel's own segfault line for pid $vpid is kept (facility kern)" \
        kt expr "$K" "any(l['text'].startswith('cp-bigheap[$vpid]: segfault at') and l['class'] == 'segfault' and l['facility'] == 'kern' for l in d['lines'])"
fi

# --- B: a later crash: A's lines are before its window, and no bus loss is recent -------------------
conf "kmsg_margin = 2" "nvidia_smi_bus_lost_window = 3"
sleep 4
pid=$(cp_crash "$CP_BIN/cp-segv-threads")
B=$(cp_bundle_for "$pid" 30) || die "B: no bundle"
extract B "$B"
K=$T/B/kmsg.json
check "B: bus_lost_recent is false when the bus loss is older than the window" \
    kt expr "$K" 'd["bus_lost_recent"] is False and "bus_lost_line" not in d'
check "B: the lines injected for A are older than B's window and left out" kt absentfile "$K" "$T/gpu.json"
check "B: step ok" [ "$(step B status)" = ok ]
if dmesg | grep -q "cp-segv-threads\[$pid\]: segfault at"; then
    check "B: its own segfault line is kept" kt expr "$K" "any(l['text'].startswith('cp-segv-threads[$pid]: segfault at') for l in d['lines'])"
fi

# --- C: the window reaches before the ring: older lines come from kern.log ---------------------------
oldest=$(kt ringoldest)
now=$(date +%s)
python3 - "$T" "$oldest" "$now" <<'PY'
import sys, time, datetime
T, oldest, now = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
rfc = lambda t: time.strftime("%b %e %H:%M:%S", time.localtime(t))
iso = lambda t: datetime.datetime.fromtimestamp(t).astimezone().isoformat(timespec="microseconds")
t1, t2, t3 = int(oldest) - 4000, oldest - 3000.25, int(oldest) - 2000
lines1 = [
    f"{rfc(t1)} gpu-node-7 kernel: [  218.250408] NVRM: GPU 0000:0a:00.0: RmInitAdapter failed! (0x24:0x72:1568)",
    f"{rfc(t1 + 1)} gpu-node-7 python3[4242]: NVRM: Xid (PCI:0000:0a:00): 79, GPU has fallen off the bus.",
]
lines = [
    f"{iso(t2)} gpu-node-7 kernel: [  219.470994] NVRM: Xid (PCI:0000:07:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at physAddr 0x7fffa8860 partition 7, subpartition 1.",
    f"{rfc(t3)} kernel: NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.",
    f"{rfc(t3 + 1)} gpu-node-7 kernel: sched: RT throttling activated",
    "1990-01-02T03:04:05.000000+00:00 gpu-node-7 kernel: NVRM: Xid (PCI:0000:01:00): 31, Ch 00000013, engmask 00000101, intr 10000000",
    f"{iso(t3 + 2)} gpu-node-7 kernel: NVRM: GPU at PCI:0000:01:00: GPU-af4f89ae-d08b-1b53-9938-c9ed209a3513 caf\u00e9 \udcff",
    f"{iso(now - 1)} gpu-node-7 kernel: NVRM: Xid (PCI:0000:3d:00): 43, pid=35521, Ch 00000008",
]
open(T + "/kern.log.1", "w", encoding="utf-8", errors="surrogateescape").write("\n".join(lines1) + "\n")
open(T + "/kern.log", "w", encoding="utf-8", errors="surrogateescape").write("\n".join(lines) + "\n")
open(T + "/kl.times", "w").write("%d %.6f %d\n" % (t1, t2, t3))
PY
read -r t1 t2 t3 < "$T/kl.times"
for f in kern.log kern.log.1; do
    chmod 640 "$T/$f"
    if [ -e "/var/log/$f" ] || [ -L "/var/log/$f" ]; then
        mount --bind "$T/$f" "/var/log/$f" && KL_MOUNTED+=("/var/log/$f")
    else
        cp -p "$T/$f" "/var/log/$f" && KL_MADE+=("/var/log/$f")
    fi
done
conf "kmsg_margin = 1000000000"
pid=$(cp_crash "$CP_BIN/cp-segv-threads")
B=$(cp_bundle_for "$pid" 30) || die "C: no bundle"
extract C "$B"
K=$T/C/kmsg.json
check "C: kern.log used because the window starts before the ring's oldest record" \
    kt expr "$K" 'd["kern_log"]["used"] is True and d["ring_oldest_time"] > d["window"]["from"] and d["wrapped"] == (d["ring_oldest_seq"] > 0)'
check "C: RFC 3164 line from kern.log.1 kept (time, ts_usec, source, file)" \
    kt expr "$K" "any(l['source'] == 'kern.log' and l['file'] == '/var/log/kern.log.1' and l['text'].startswith('NVRM: GPU 0000:0a:00.0: RmInitAdapter failed!') and abs(l['time'] - $t1) < 0.001 and l['ts_usec'] == 218250408 and l['class'] == 'gpu' for l in d['lines'])"
check "C: ISO 8601 line from kern.log kept with its fractional time" \
    kt expr "$K" "any(l['source'] == 'kern.log' and l['file'] == '/var/log/kern.log' and l.get('xid') == 48 and abs(l['time'] - $t2) < 0.001 for l in d['lines'])"
check "C: host-less RFC 3164 line kept" \
    kt expr "$K" "any(l['source'] == 'kern.log' and l['text'] == 'NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.' and abs(l['time'] - $t3) < 0.001 for l in d['lines'])"
check "C: non-UTF-8 bytes are escaped, UTF-8 kept" \
    kt expr "$K" "any(l['text'].endswith('caf\u00e9 \\\\xff') for l in d['lines'])"
check "C: kern.log lines come first, oldest first (kern.log.1 before kern.log)" \
    kt expr "$K" '[l["file"] for l in d["lines"] if l["source"] == "kern.log"] == ["/var/log/kern.log.1"] + ["/var/log/kern.log"] * 3 and all(l["source"] == "kern.log" for l in d["lines"][:4])'
check "C: a user-space syslog line, noise, a line before the window and one the ring covers are left out" \
    kt expr "$K" 'not any(l["source"] == "kern.log" and ("79, GPU has fallen" in l["text"] and l["file"].endswith(".1") or "RT throttling" in l["text"] or "engmask" in l["text"] or "pid=35521" in l["text"]) for l in d["lines"])'
check "C: step ok, saying lines came from kern.log" grep -q '^ok .*; 4 from kern.log' <<< "$(step C status) $(step C reason)"

# --- D: no /dev/kmsg: step "absent", kmsg.json still written from kern.log ---------------------------
mv /dev/kmsg "$KMSG_OFF"
pid=$(cp_crash "$CP_BIN/cp-segv-threads")
mv "$KMSG_OFF" /dev/kmsg
B=$(cp_bundle_for "$pid" 30) || die "D: no bundle"
extract D "$B"
K=$T/D/kmsg.json
check "D: step absent" [ "$(step D status)" = absent ]
check "D: kmsg.json says why and has no ring" kt expr "$K" 'd["error"] and d["ring_oldest_time"] is None and d["records_read"] == 0'
check "D: every kernel line of kern.log in the window is kept (the ring covers nothing)" \
    kt expr "$K" '[l["source"] for l in d["lines"]] == ["kern.log"] * 5 and any("pid=35521" in l["text"] for l in d["lines"])'

# --- E: kmsg_max keeps the newest lines --------------------------------------------------------------
conf "kmsg_margin = 1000000000" "kmsg_max = 16K"
marker="NVRM: Xid (PCI:0000:3b:00): 13, pid=$((700000 + RANDOM)), name=cp-segv-threads, Graphics Exception: ESR 0x57c730=0xc04000b 0x57c734=0x24 0x57c728=0x1f81fb60 0x57c72c=0x1174"
kt inject - "$marker" >/dev/null
pid=$(cp_crash "$CP_BIN/cp-segv-threads")
B=$(cp_bundle_for "$pid" 30) || die "E: no bundle"
extract E "$B"
K=$T/E/kmsg.json
size=$(stat -c %s "$K")
check "E: kmsg.json within kmsg_max ($size <= 16384)" [ "$size" -le 16384 ]
check "E: truncated, oldest dropped, newest kept" \
    kt expr "$K" "d['truncated'] is True and d['dropped'] > 0 and any(l['text'] == '''$marker''' for l in d['lines'][-3:])"
# The ring is filled first (newest wins); kern.log, being older, only gets what budget is left, so any
# kern.log line kept sits before every ring line, and the ring's oldest records are the ones dropped.
check "E: the ring's oldest records were dropped, not its newest; kern.log only fills what is left" \
    kt expr "$K" "[l['source'] for l in d['lines']] == sorted((l['source'] for l in d['lines']), key=lambda s: s != 'kern.log') and min(l['seq'] for l in d['lines'] if l['source'] == 'kmsg') > d['ring_oldest_seq'] + 10"
finish
