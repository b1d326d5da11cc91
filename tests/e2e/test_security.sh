#!/usr/bin/env bash
# Acceptance (issue 2, #5): planted symlinks and hardlinks in the bundle directory are never
# written through; a setuid program's bundle is root-only 0600; another user cannot read a bundle
# of someone else's process while its owner can; the handler has no effective capabilities and
# no_new_privs while the core drains. Also: secrets in the environment and the command line
# never reach an evidence member.
source "$(dirname "$0")/../lib.sh"
cp_setup
as_user() { local u=$1; shift; setpriv --reuid="$u" --regid="$u" --clear-groups "$@"; }
real_bundle_for() { # PID: a regular, single-link file under a final name, waiting for it
    local i f
    for ((i = 0; i < 300; i++)); do
        f=$(find "$T/bundles" -maxdepth 1 -type f -links 1 -name "crash-*-$1-*.zst" | head -1)
        [ -n "$f" ] && { echo "$f"; return 0; }
        sleep 0.1
    done
    return 1
}
SAVED_SUID=$(cat /proc/sys/fs/suid_dumpable)
trap 'echo "$SAVED_SUID" > /proc/sys/fs/suid_dumpable; cp_restore' EXIT
cp_install
chmod 755 "$T/bundles"

# --- 1. planted symlinks and hardlinks at every name the bundle could take -----------------
echo "precious" > "$T/victim"; echo "precious2" > "$T/victim2"; chmod 644 "$T/victim" "$T/victim2"
sum_before=$(cat "$T/victim" "$T/victim2" | sha256sum)
mkfifo "$T/go"
"$CP_BIN/cp-bigheap" 8 wait < "$T/go" > /dev/null 2>&1 &
pid=$!
now=$(date +%s)
for ((t = now - 2; t <= now + 30; t++)); do
    ln -s "$T/victim" "$T/bundles/crash-$t-$pid-cp-bigheap.zst"
    ln "$T/victim2" "$T/bundles/crash-$t-$pid-cp-bigheap-1.zst"
done
echo go > "$T/go"
wait $pid 2>/dev/null
b=$(real_bundle_for $pid) || fail "planted: no bundle"
check "planted: the bundle went to a fresh name ($(basename "${b:-none}"))" [ -n "$b" ]
check "planted: symlink and hardlink targets are unchanged" [ "$(cat "$T/victim" "$T/victim2" | sha256sum)" = "$sum_before" ]
check "planted: the symlinks are still symlinks to the victim" [ "$(readlink "$T/bundles/crash-$now-$pid-cp-bigheap.zst")" = "$T/victim" ]
check "planted: the bundle is valid" bash -c "zstd -tq '$b' && tar --zstd -tf '$b' | tail -1 | grep -qx capture.json"
rm -f "$T"/bundles/crash-*

# a bundle directory that is a symlink is refused, and the refusal is logged
mkdir "$T/elsewhere"; ln -s "$T/elsewhere" "$T/linkdir"
sed "s|^bundle_dir = .*|bundle_dir = $T/linkdir|" "$T/conf" > "$T/conf.link"
cp_install -c "$T/conf.link"
pid=$(cp_crash "$CP_BIN/cp-abort")
sleep 1
check "symlinked bundle_dir: nothing written through it" [ -z "$(ls -A "$T/elsewhere")" ]
check "symlinked bundle_dir: the lost crash is logged to the kernel log" bash -c "dmesg | grep -q 'pid $pid .*NOT captured'"
cp_install

# --- 2. a setuid program: root-only ---------------------------------------------------------
echo 2 > /proc/sys/fs/suid_dumpable   # without it the kernel dumps no setuid program at all
cp "$CP_BIN/cp-setuid-crash" "$T/suid-crash"; chown root:root "$T/suid-crash"; chmod 4755 "$T/suid-crash"
setpriv --reuid=65534 --regid=65534 --clear-groups "$T/suid-crash" > /dev/null 2>&1 &
pid=$!; wait $pid 2>/dev/null
b=$(real_bundle_for $pid) || fail "setuid: no bundle"
check "setuid: bundle is 0600" [ "$(stat -c %a "$b")" = 600 ]
check "setuid: owned by root" [ "$(stat -c %U:%G "$b")" = root:root ]
check "setuid: the invoking user cannot read it" bash -c "! setpriv --reuid=65534 --regid=65534 --clear-groups cat '$b' > /dev/null 2>&1"
tar --zstd -xOf "$b" manifest.json > "$T/suid.json"
check "setuid: manifest marks the process secure" [ "$(json "$T/suid.json" 'd["secure"]')" = True ]
check "setuid: no environment member" bash -c "! tar --zstd -tf '$b' | grep -q environ"

# --- 3. the owner can read their bundle, another user cannot --------------------------------
setpriv --reuid=65534 --regid=65534 --clear-groups "$CP_BIN/cp-segv-threads" > /dev/null 2>&1 &
pid=$!; wait $pid 2>/dev/null
b=$(real_bundle_for $pid) || fail "user: no bundle"
check "user: bundle is 0640 root:root" [ "$(stat -c %a:%U:%G "$b")" = 640:root:root ]
check "user: ACL grants the crashed uid read" bash -c "getfacl -n '$b' 2>/dev/null | grep -qx 'user:65534:r--'"
check "user: the owner (nobody) can read it" as_user 65534 cat "$b" > /dev/null
check "user: another user (daemon) cannot" bash -c "! setpriv --reuid=1 --regid=1 --clear-groups cat '$b' > /dev/null 2>&1"

# --- 4. capabilities while the core drains ---------------------------------------------------
"$CP_BIN/cp-bigheap" 1536 > /dev/null 2>&1 &
pid=$!
seen=
for ((i = 0; i < 2000; i++)); do
    for h in $(pgrep -f "crashpack-capture -c $T/conf "); do
        r=$(awk '/^rchar/{print $2}' /proc/$h/io 2>/dev/null)
        if [ "${r:-0}" -gt 100000000 ]; then
            seen=$(grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs):' /proc/$h/status | tr -s '\t ' ' ' | tr '\n' ' ')
            break 2
        fi
    done
    sleep 0.005
done
wait $pid 2>/dev/null
echo "handler during the drain: $seen"
check "drain: observed the handler mid-drain" [ -n "$seen" ]
check "drain: no effective capabilities" bash -c "echo '$seen' | grep -q 'CapEff: 0000000000000000'"
check "drain: no_new_privs set" bash -c "echo '$seen' | grep -q 'NoNewPrivs: 1'"
check "drain: bounding set holds at most setuid/setgid" bash -c "echo '$seen' | grep -q 'CapBnd: 00000000000000c0'"

# --- 5. secrets never reach an evidence member ------------------------------------------------
env HF_TOKEN=hf_SECRETVALUE1 AWS_SECRET_ACCESS_KEY=SECRETVALUE2 \
    DATA_URL=https://alice:SECRETVALUE3@example.invalid/x NCCL_DEBUG=INFO \
    "$CP_SRC/fixtures/programs/py_crash.py" --token=SECRETVALUE4 --api-key SECRETVALUE5 > /dev/null 2>&1 &
pid=$!; wait $pid 2>/dev/null
b=$(real_bundle_for $pid) || fail "secrets: no bundle"
mkdir -p "$T/sec" && tar --zstd -xf "$b" -C "$T/sec" && rm -f "$T/sec/core"
check "secrets: no secret value in any member but core" bash -c "! grep -rq SECRETVALUE '$T/sec'"
check "secrets: the variable names are kept" bash -c "grep -q HF_TOKEN '$T/sec/proc/environ.json' && grep -q AWS_SECRET_ACCESS_KEY '$T/sec/proc/environ.json'"
check "secrets: useful values are kept (NCCL_DEBUG=INFO)" [ "$(json "$T/sec/proc/environ.json" 'd["values"]["NCCL_DEBUG"]')" = INFO ]
check "secrets: masked cmdline arguments are still listed" bash -c "grep -q -- '--token=\\*\\*\\*' '$T/sec/manifest.json'"
# slim and meta bundles are the shareable ones: no secret anywhere, the core included
for mode in slim meta; do
    sed -i 's/^mode = .*//' "$T/conf"; echo "mode = $mode" >> "$T/conf"
    env HF_TOKEN=hf_SECRETVALUE1 AWS_SECRET_ACCESS_KEY=SECRETVALUE2 \
        DATA_URL=https://alice:SECRETVALUE3@example.invalid/x \
        "$CP_SRC/fixtures/programs/py_crash.py" --token=SECRETVALUE4 --api-key SECRETVALUE5 > /dev/null 2>&1 &
    pid=$!; wait $pid 2>/dev/null
    b=$(real_bundle_for $pid) || { fail "secrets/$mode: no bundle"; continue; }
    n=$(zstd -dc "$b" | grep -a -c SECRETVALUE)
    check "secrets/$mode: no secret value anywhere in the decompressed bundle ($n found)" [ "$n" = 0 ]
    if [ $mode = slim ]; then
        check "secrets/slim: the core's argv/envp copies were overwritten" \
            bash -c "tar --zstd -xOf '$b' capture.json | python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(0 if d[\"core\"][\"redacted_bytes\"] > 0 else 1)'"
    fi
done
finish
