#!/usr/bin/env bash
# Acceptance (issue 2, #4): a full disk truncates the core (not the bundle) and keeps keep_free;
# old bundles are vacuumed to stay under max_use; a stalled or short stream ends in a valid,
# truncated bundle; kill -9 of the handler or the finisher never leaves an invalid file under a
# final name and the next capture salvages the orphan; 16 crashes within a second give 16
# bundles, the first K with cores and the rest metadata-only with the reason.
source "$(dirname "$0")/../lib.sh"
cp_setup
valid_bundle() { # a complete bundle: zstd checksums, tar readable, capture.json last
    zstd -tq "$1" 2>/dev/null && [ "$(tar --zstd -tf "$1" 2>/dev/null | tail -1)" = capture.json ]
}
capture_json() { tar --zstd -xOf "$1" capture.json; }

# --- 1. a small tmpfs fills up -------------------------------------------------------------
mkdir -p "$T/small"
mount -t tmpfs -o size=96m,mode=755 tmpfs "$T/small" || die "cannot mount tmpfs"
cat > "$T/conf.small" <<CONF
bundle_dir = $T/small/b
keep_free = 24M
max_use = 100%
burst_full = 100
repeat_full = 100
CONF
# three old bundles that the disk guard may delete (oldest first) and an unrelated file it must not
mkdir -p "$T/small/b" && chmod 711 "$T/small/b"
for i in 1 2 3; do head -c 8M /dev/urandom > "$T/small/b/crash-100$i-1-old.zst"; touch -d "2020-01-0$i" "$T/small/b/crash-100$i-1-old.zst"; done
echo keep > "$T/small/b/notes.txt"
cp_install -c "$T/conf.small"
pid=$(cp_crash "$CP_BIN/cp-bigheap" 512)
b=$(T=$T/small && cp_bundle_for "$pid" 60)
if [ -z "$b" ]; then b=$(ls "$T"/small/b/crash-*-"$pid"-*.zst 2>/dev/null | head -1); fi
check "full disk: a bundle exists" [ -n "$b" ] && [ -f "$b" ]
check "full disk: the bundle is valid" valid_bundle "$b"
capture_json "$b" > "$T/small.json"
check "full disk: core marked truncated" [ "$(json "$T/small.json" 'd["core"]["truncated"]')" = True ]
check "full disk: the reason names keep_free" grep -q keep_free "$T/small.json"
check "full disk: the core member keeps its declared size" \
    [ "$(tar --zstd -tvf "$b" | awk '$6=="core"{print $3}')" = "$(json "$T/small.json" 'd["core"]["declared_size"]')" ]
avail=$(df -B1 --output=avail "$T/small" | tail -1)
check "full disk: free space ($avail) stayed at or above keep_free (24 MiB)" [ "$avail" -ge $((24 * 1024 * 1024)) ]
check "full disk: the oldest old bundle was vacuumed" [ ! -e "$T/small/b/crash-1001-1-old.zst" ]
check "full disk: files that are not bundles are never deleted" [ -e "$T/small/b/notes.txt" ]
umount "$T/small"

# --- 2. stalled and short streams, fed on stdin as the kernel would ------------------------
cp "$T/conf" "$T/conf.dl"; echo "deadline = 2" >> "$T/conf.dl"
{ python3 "$CP_SRC/fixtures/programs/synth_core.py" --size 64M --short 1048576; sleep 6; } |
    "$CP_BIN/crashpack-capture" -c "$T/conf.dl" 999991 999991 999991 11 "$(date +%s)" 0 0 1 -1 h
b=$(cp_bundle_for 999991 20) || fail "deadline: no bundle"
check "deadline: valid bundle" valid_bundle "$b"
check "deadline: truncated with the deadline as reason" bash -c "tar --zstd -xOf '$b' capture.json | grep -q 'deadline of 2 s reached'"
python3 "$CP_SRC/fixtures/programs/synth_core.py" --size 64M --short 3000000 |
    "$CP_BIN/crashpack-capture" -c "$T/conf" 999992 999992 999992 11 "$(date +%s)" 0 0 1 -1 h
b=$(cp_bundle_for 999992 20) || fail "short: no bundle"
check "short stream: valid bundle, padded to the declared size" bash -c \
    "tar --zstd -tvf '$b' | awk '\$6==\"core\"{print \$3}' | grep -qx 67108864"
check "short stream: truncation reason" bash -c "tar --zstd -xOf '$b' capture.json | grep -q 'stream ended at 3000000'"

# --- 3. kill -9 of the handler and of the finisher -----------------------------------------
cp_install
handler_pids() { pgrep -f "crashpack-capture -c $T/conf " || true; }
in_drain() { # handler has read > 64 MiB from the pipe
    local p r
    for p in $(handler_pids); do
        r=$(awk '/^rchar/{print $2}' /proc/$p/io 2>/dev/null)
        [ "${r:-0}" -gt 67108864 ] && { echo "$p"; return 0; }
    done
    return 1
}
killed=0
for round in 1 2 3 4; do
    "$CP_BIN/cp-bigheap" 384 wait > "$T/ready.$round" < <(sleep 1; echo go) &
    p=$!
    for ((i = 0; i < 300; i++)); do h=$(in_drain) && break; sleep 0.01; done
    if [ -n "${h:-}" ]; then
        [ $round -gt 2 ] && sleep "0.0$((RANDOM % 9))"   # rounds 3-4: a random moment later
        kill -9 $(handler_pids) 2>/dev/null && killed=$((killed + 1))
    fi
    wait $p 2>/dev/null
    h=
done
check "kill -9: the handler was killed mid-capture ($killed times)" [ "$killed" -ge 2 ]
# the finisher: detached, stdin on /dev/null; kill it while it completes a large bundle
fin_killed=0
for round in 1 2 3; do
    cp_crash "$CP_BIN/cp-bigheap" 256 >/dev/null &
    for ((i = 0; i < 500; i++)); do
        for p in $(handler_pids); do
            if [ "$(readlink /proc/$p/fd/0 2>/dev/null)" = /dev/null ] && [ "$(awk '{print $4}' /proc/$p/stat 2>/dev/null)" = 1 ]; then
                kill -9 "$p" && fin_killed=$((fin_killed + 1)); break 2
            fi
        done
        sleep 0.002
    done
    wait
done
echo "finisher killed $fin_killed of 3 times (it may finish before it is seen)"
sleep 1
bad=0
for f in "$T"/bundles/crash-*.zst; do [ -e "$f" ] || continue; valid_bundle "$f" || { bad=$((bad + 1)); echo "invalid: $f"; }; done
check "kill -9: every file under a final name is a valid bundle" [ "$bad" = 0 ]
# each capture's finisher salvages the orphans of earlier kills; the capture below takes the rest
pid=$(cp_crash "$CP_BIN/cp-segv-threads")
cp_bundle_for "$pid" 30 >/dev/null || fail "no bundle for the capture after the kills"
for ((i = 0; i < 100; i++)); do [ "$(ls -a "$T/bundles" | grep -c '^\.tmp-')" = 0 ] && break; sleep 0.1; done
check "salvage: no temporary is left after the next capture" [ "$(ls -a "$T/bundles" | grep -c '^\.tmp-')" = 0 ]
salvaged=0; bad=0
for f in "$T"/bundles/crash-*.zst; do
    valid_bundle "$f" || { bad=$((bad + 1)); echo "invalid: $f"; continue; }
    tar --zstd -xOf "$f" capture.json 2>/dev/null | grep -q '"status":"salvaged"' && salvaged=$((salvaged + 1))
done
check "salvage: every bundle is valid ($bad bad)" [ "$bad" = 0 ]
check "salvage: every handler killed mid-drain left a bundle published as salvaged ($salvaged >= $killed)" [ "$salvaged" -ge "$killed" ]
one=$(grep -l . /dev/null; for f in "$T"/bundles/crash-*.zst; do tar --zstd -xOf "$f" capture.json 2>/dev/null | grep -q '"cut_member":"core"' && { echo "$f"; break; }; done)
if [ -n "$one" ]; then
    check "salvage: a core cut by the kill is padded to its declared size and marked truncated" bash -c \
        "tar --zstd -xOf '$one' capture.json | grep -q '\"truncated\":true'"
    tar --zstd -xOf "$one" core > "$T/salvaged.core"
    check "salvage: the salvaged core still opens in gdb" bash -c "gdb -batch -ex 'info threads' '$CP_BIN/cp-bigheap' '$T/salvaged.core' 2>&1 | grep -q LWP"
else
    fail "salvage: no salvaged bundle had its core cut"
fi
rm -f "$T"/bundles/crash-*

# --- 4. a burst: 16 crashes within one second, burst_full = 4 ------------------------------
cat >> "$T/conf" <<CONF
burst_full = 4
burst_window = 3600
CONF
while (( $(date +%s) % 3600 > 3590 )); do sleep 1; done  # do not straddle a window
pids=()
for i in $(seq 16); do "$CP_BIN/cp-abort" >/dev/null 2>&1 & pids+=($!); done
for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
full=0; meta=0; reasons=0
for p in "${pids[@]}"; do
    b=$(cp_bundle_for "$p" 60) || { fail "burst: no bundle for $p"; continue; }
    if tar --zstd -tf "$b" | grep -qx core; then full=$((full + 1)); else
        meta=$((meta + 1))
        tar --zstd -xOf "$b" capture.json | grep -q 'burst limit' && reasons=$((reasons + 1))
    fi
done
echo "burst: $full full, $meta metadata-only"
check "burst: 16 bundles" [ $((full + meta)) = 16 ]
check "burst: exactly 4 full cores" [ "$full" = 4 ]
check "burst: every metadata-only bundle says why" [ "$reasons" = "$meta" ]
rm -f "$T"/bundles/crash-*

# --- 5. one program crashing again and again: repeat_full = 2 ------------------------------
cat >> "$T/conf" <<CONF
burst_full = 100
repeat_full = 2
repeat_window = 3600
post_command = $T/post.sh
CONF
printf '#!/bin/sh\necho "$1" >> %s/post.out\n' "$T" > "$T/post.sh"; chmod 755 "$T/post.sh"
full=0; meta=0; last=
for i in 1 2 3 4; do
    p=$(cp_crash "$CP_BIN/cp-segv-threads")
    b=$(cp_bundle_for "$p" 30) || { fail "repeat: no bundle for $p"; continue; }
    last=$b
    if tar --zstd -tf "$b" | grep -qx core; then full=$((full + 1)); else
        tar --zstd -xOf "$b" capture.json | grep -q 'repeat limit' && meta=$((meta + 1))
    fi
done
check "repeat: the first 2 crashes of one program keep cores, the next 2 say 'repeat limit'" [ "$full:$meta" = 2:2 ]
for ((i = 0; i < 50; i++)); do grep -qxF "$last" "$T/post.out" 2>/dev/null && break; sleep 0.1; done
check "post_command: ran with each published bundle's path" bash -c "[ \$(wc -l < '$T/post.out') = 4 ] && grep -qxF '$last' '$T/post.out'"
finish
