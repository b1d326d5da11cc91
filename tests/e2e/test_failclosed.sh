#!/usr/bin/env bash
# Acceptance (issue 16, items 3, 5 and 6): the handler fails closed.
#  3. keep_free = 100%: no bundle of any mode (full, slim, meta, snap) is written, the refusal is
#     in the kernel log, and old bundles are not wiped for room that cannot be had; a crash loop
#     past the burst limit (every bundle metadata-only) stays under max_use by vacuuming.
#  5. an unprivileged crash while another process's segfault and an Oops are in the kernel log
#     (dmesg_restrict=1): those lines are not in the bundle; a GPU Xid line and the process's own
#     line are; with dmesg_restrict=0 the other line is kept.
#  6. a pidfd of a reaped process (or of another live one) on fd 3, with %P a live process: a
#     root-only metadata-only bundle that says the identity could not be verified, and nothing
#     of the live process in it.
# Writes /dev/kmsg lines with this test's marker and reads back only bundles of its own pids.
source "$(dirname "$0")/../lib.sh"
cp_setup
SAVED_DR=$(cat /proc/sys/kernel/dmesg_restrict)
trap 'echo "$SAVED_DR" > /proc/sys/kernel/dmesg_restrict; cp_restore' EXIT
echo on > /proc/sys/kernel/printk_devkmsg   # restored by cp_restore
AS_NOBODY="setpriv --reuid=65534 --regid=65534 --clear-groups"   # execs: $! is the process
M=cpfc$$x$RANDOM   # this run's marker (no digit run that could read as a pid)
M=$(echo "$M" | tr 0-9 a-j)
chmod 755 "$T/bundles"
kmsg() { printf '<4>%s\n' "$1" > /dev/kmsg; }
no_bundle_for() { # PID: none appears within 3 s
    sleep 3
    ! ls "$T"/bundles/crash-*-"$1"-*.zst > /dev/null 2>&1
}

# --- 5. kernel-log lines scoped to the process ------------------------------------------------
cp_install
echo 1 > /proc/sys/kernel/dmesg_restrict
scoped_crash() { # OUT: an unprivileged crash with the three kinds of lines in the log
    rm -f "$T/go5"; mkfifo "$T/go5"
    $AS_NOBODY "$CP_BIN/cp-bigheap" 8 wait < "$T/go5" > /dev/null 2>&1 &
    local pid=$! other=1
    sleep 0.3
    kmsg "$M-other[$other]: segfault at 0 ip 0000000000401000 sp 00007ffd00000000 error 4 in $M-other[401000+1000]"
    kmsg "Oops: 0000 [#1] PREEMPT SMP $M-oops"
    kmsg "NVRM: Xid (PCI:0000:99:00): 13, $M-gpu Graphics SM Warp Exception"
    kmsg "$M-own[$pid]: segfault at 0 ip 0000000000401000 sp 00007ffd00000000 error 4 in cp-bigheap"
    echo go > "$T/go5"
    wait $pid 2>/dev/null
    local b; b=$(cp_bundle_for $pid 30) || { fail "scope: no bundle for $pid"; return; }
    zstd -dc -q "$b" > "$T/$1.tar"
    tar -xOf "$T/$1.tar" kmsg.json > "$T/$1.kmsg.json"
}
scoped_crash s1
check "scope: another process's segfault line is nowhere in the bundle" bash -c "! grep -aq '$M-other' '$T/s1.tar'"
check "scope: another Oops is nowhere in the bundle" bash -c "! grep -aq '$M-oops' '$T/s1.tar'"
check "scope: the GPU Xid line is kept" grep -q "$M-gpu" "$T/s1.kmsg.json"
check "scope: the process's own segfault line is kept" grep -q "$M-own" "$T/s1.kmsg.json"
check "scope: kmsg.json says the scope applied" [ "$(json "$T/s1.kmsg.json" 'd["scope"]["limited"]')" = True ]
check "scope: kmsg.json counts what was left out (>= 2)" \
    [ "$(json "$T/s1.kmsg.json" 'd["scope"]["filtered"] >= 2')" = True ]
echo 0 > /proc/sys/kernel/dmesg_restrict
scoped_crash s0
check "dmesg_restrict=0: the other line is kept (any user may read it anyway)" grep -q "$M-other" "$T/s0.kmsg.json"
check "dmesg_restrict=0: kmsg.json says the scope did not apply" [ "$(json "$T/s0.kmsg.json" 'd["scope"]["limited"]')" = False ]
echo "$SAVED_DR" > /proc/sys/kernel/dmesg_restrict

# --- 6. identity fails closed: a pidfd of another process on fd 3 ------------------------------
cat > "$T/pidfd.py" <<'EOF'
import os, subprocess, sys, time
handler, conf, synth, live, uid, kind = sys.argv[1:7]
if kind == "reaped":
    d = subprocess.Popen(["true"]); fd = os.pidfd_open(d.pid); d.wait()  # fdinfo: "Pid: -1"
else:
    d = subprocess.Popen(["sleep", "30"]); fd = os.pidfd_open(d.pid)     # a live, other process
if fd != 3:
    os.dup2(fd, 3); os.close(fd)
core = subprocess.Popen([sys.executable, synth, "--size", "4M", "--pid", live], stdout=subprocess.PIPE,
                        stderr=subprocess.DEVNULL)  # a meta bundle does not read the core
r = subprocess.run([handler, "-c", conf, live, live, live, "11", str(int(time.time())), uid, uid,
                    "1", "-1", "h", "3"], stdin=core.stdout, pass_fds=(3,),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
core.stdout.close(); core.wait()
if kind != "reaped":
    d.kill(); d.wait()
sys.exit(r.returncode)
EOF
for kind in reaped other; do
    $AS_NOBODY env "LIVEENV_$M=live$M" python3 -c 'import time; time.sleep(60)' "LIVEARG_$M" \
        < /dev/null > /dev/null 2>&1 &
    live=$!
    sleep 0.3
    timeout 60 python3 "$T/pidfd.py" "$CP_BIN/crashpack-capture" "$T/conf" \
        "$CP_SRC/fixtures/programs/synth_core.py" "$live" 65534 "$kind"
    b=$(cp_bundle_for $live 30) || fail "pidfd/$kind: no bundle"
    kill $live 2>/dev/null; wait $live 2>/dev/null
    [ -n "${b:-}" ] || continue
    zstd -dc -q "$b" > "$T/id.tar"
    tar -xOf "$T/id.tar" capture.json > "$T/id.json"
    tar -xOf "$T/id.tar" manifest.json > "$T/idm.json"
    check "pidfd/$kind: capture.json says the identity is unverified" [ "$(json "$T/id.json" 'd["identity"]["verified"]')" = False ]
    check "pidfd/$kind: manifest.json says so too" [ "$(json "$T/idm.json" 'd["capture"]["identity"]["verified"]')" = False ]
    check "pidfd/$kind: metadata-only" [ "$(json "$T/id.json" 'd["mode"]["effective"]')" = meta ]
    check "pidfd/$kind: the reason names identity" bash -c "json '$T/id.json' 'd[\"mode\"][\"reason\"]' | grep -q 'identity could not be verified'"
    check "pidfd/$kind: root-only (0600)" [ "$(stat -c %a "$b")" = 600 ]
    check "pidfd/$kind: no /proc member, no core" bash -c "! tar -tf '$T/id.tar' | grep -qE '^(proc/|core$|logs/|ml/)'"
    check "pidfd/$kind: no data of the live process (environ, cmdline)" bash -c "! grep -aqE 'LIVEENV_|LIVEARG_|live$M' '$T/id.tar'"
    check "pidfd/$kind: no cmdline/exe in the manifest" [ "$(json "$T/idm.json" '"cmdline" in d or "exe" in d')" = False ]
    rm -f "$b"
done

# --- 3. keep_free = 100%: nothing is written, of any mode --------------------------------------
head -c 1M /dev/urandom > "$T/bundles/crash-1001-1-old.zst"
for mode in full slim meta; do
    sed -e "s/^keep_free = .*/keep_free = 100%/" "$T/conf" > "$T/conf.kf"
    echo "mode = $mode" >> "$T/conf.kf"
    cp_install -c "$T/conf.kf"
    pid=$(cp_crash "$CP_BIN/cp-abort")
    check "keep_free 100%/$mode: no bundle is written" no_bundle_for $pid
    check "keep_free 100%/$mode: no temporary is left" bash -c "! ls -A '$T/bundles' | grep -q '^.tmp-'"
    check "keep_free 100%/$mode: the refusal is in the kernel log" \
        bash -c "dmesg | grep -q 'pid $pid .*NOT captured: free space is below keep_free'"
done
check "keep_free 100%: the old bundle was not vacuumed for room it cannot give" [ -e "$T/bundles/crash-1001-1-old.zst" ]
"$CP_BIN/cp-bigheap" 8 wait < <(sleep 20) > /dev/null 2>&1 &
hpid=$!
sleep 0.3
"$CP_BIN/crashpack" snap -c "$T/conf.kf" "$hpid" > /dev/null 2> "$T/snap.err"
src=$?
kill $hpid 2>/dev/null; wait $hpid 2>/dev/null
check "keep_free 100%/snap: no bundle is written" no_bundle_for $hpid
check "keep_free 100%/snap: crashpack snap fails ($src) and says why" \
    bash -c "[ $src -ne 0 ] && grep -q 'keep_free' '$T/snap.err'"

# --- 3. a crash loop past the burst limit stays under max_use ----------------------------------
rm -f "$T"/bundles/crash-*
for i in 1 2 3; do head -c 1536K /dev/urandom > "$T/bundles/crash-100$i-1-old.zst"; touch -d "2020-01-0$i" "$T/bundles/crash-100$i-1-old.zst"; done
sed -e "s/^max_use = .*/max_use = 4M/" -e "s/^burst_full = .*/burst_full = 0/" "$T/conf" > "$T/conf.loop"
cp_install -c "$T/conf.loop"
pids=
for i in 1 2 3 4 5 6; do pids="$pids $(cp_crash $AS_NOBODY "$CP_BIN/cp-abort")"; done
for p in $pids; do cp_bundle_for $p 30 > /dev/null || fail "loop: no bundle for $p"; done
used=$(du -cB1 --apparent-size "$T"/bundles/crash-*.zst | tail -1 | cut -f1)
check "loop: every bundle is metadata-only (burst limit)" bash -c \
    "for p in $pids; do tar --zstd -tf \$(ls $T/bundles/crash-*-\$p-*.zst) | grep -qx core && exit 1; done; exit 0"
check "loop: bundles stay under max_use (4 MiB; $used bytes)" [ "$used" -le $((4 * 1024 * 1024)) ]
check "loop: the oldest bundle was vacuumed" [ ! -e "$T/bundles/crash-1001-1-old.zst" ]

# --- 3b. one user's crash loop evicts its own bundles, not another user's older one -------------
# (the kernel's cores vacuum fairly: the oldest bundles of the uid holding the most bytes first)
rm -f "$T"/bundles/crash-*
sed -e "s/^burst_full = .*/burst_full = 0/" "$T/conf" > "$T/conf.fair"
cp_install -c "$T/conf.fair"
other=$(cp_crash setpriv --reuid=64211 --regid=64211 --clear-groups "$CP_BIN/cp-abort")
ob=$(cp_bundle_for "$other" 30) || fail "fair: no bundle of the other user"
if [ -n "$ob" ]; then
    touch -d "2020-01-01" "$ob" # the oldest bundle of the directory by far
    sz=$(stat -c %s "$ob")
    sed -e "s/^max_use = .*/max_use = $((sz * 4))/" "$T/conf.fair" > "$T/conf.fair2"
    cp_install -c "$T/conf.fair2"
    pids=
    for i in 1 2 3 4 5 6; do pids="$pids $(cp_crash $AS_NOBODY "$CP_BIN/cp-abort")"; done
    for p in $pids; do cp_bundle_for $p 30 > /dev/null || fail "fair: no bundle for $p"; done
    left=$(ls "$T"/bundles/crash-*.zst | wc -l)
    check "fair: the loop's own bundles were vacuumed ($left left of 7)" [ "$left" -lt 7 ]
    check "fair: the other user's older bundle is still there" [ -e "$ob" ]
fi
finish
