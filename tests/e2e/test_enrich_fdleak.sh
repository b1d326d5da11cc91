#!/usr/bin/env bash
# The enrichment keeps no descriptor another process could take (issue 22, item 1; docs/capture.md,
# "Descriptors and the enrichment"). The attacker is a process of the enrichment's own uid
# (`crashpack`): tests/tools/fdgrab scans /proc for that uid's processes and takes their
# descriptors 3..64 with pidfd_open + pidfd_getfd, as fast as it can.
#
#  0. The attacker works: it takes the descriptor of a decoy (a dumpable process of that uid
#     holding a file open).
#  1. Passive: 20 root crashes (cp-segv-threads through the real core_pattern) while it runs. It
#     gets no descriptor of a bundle (nothing under the bundle directory, no crash-*.zst, no
#     .slots file) and no directory (the crashed process's root); the 20 bundles still carry
#     stacks.json, made as uid crashpack.
#  2. Active: 8 more root crashes while it also uses what it takes: it receives whatever a taken
#     socket holds and sends a socket of its own into it (a forged hello). Still no descriptor of
#     a bundle, and every bundle is published: enriched, or the step failed closed (handshake).
#  3. Without the user crashpack (when this test created it): a root crash is not enriched, and
#     capture.json says "no crashpack user: run crashpack install"; a crash as nobody still is,
#     as uid 65534.
source "$(dirname "$0")/../lib.sh"
GRAB=$CP_BIN/fdgrab
[ -x "$GRAB" ] || die "$GRAB is missing: build with cmake --build build"
cp_setup
cp_install
# an older crashpack install does not create the user: the attack needs it either way
if ! cp_has_user; then
    useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin crashpack ||
        die "cannot create the user crashpack"
fi
CPUID=$(id -u crashpack)
AS_CP=(setpriv --reuid=crashpack --regid=crashpack --clear-groups)
chmod 755 "$T/bundles"   # the attacker may look; the bundles themselves stay root-only
mkdir -m 777 "$T/grab"

# step BUNDLE: capture.json's enrich step as "status uid reason"
step() { cp_member "$1" capture.json | python3 -c '
import json, sys
s = [x for x in json.load(sys.stdin).get("steps", []) if x.get("name") == "enrich"]
s = s[0] if s else {}
print(s.get("status"), s.get("uid"), s.get("reason"))'; }
# crashes N TAG: N root crashes of cp-segv-threads, 4 at a time; their bundles moved to $T/TAG/
crashes() {
    local n=$1 tag=$2 i j pids b
    mkdir -p "$T/$tag"
    for ((i = 0; i < n; i += 4)); do
        pids=()
        for ((j = i; j < i + 4 && j < n; j++)); do
            "$CP_BIN/cp-segv-threads" > /dev/null 2>&1 &
            pids+=($!)
        done
        for p in "${pids[@]}"; do wait "$p" 2> /dev/null; done
        for p in "${pids[@]}"; do
            if b=$(cp_bundle_for "$p" 120); then mv "$b" "$T/$tag/"; else fail "$tag: no bundle for pid $p"; fi
        done
    done
}
# attack TAG [--active]: starts the attacker as uid crashpack (its pid in GRABBER)
attack() {
    rm -f "$T/grab/stop"
    "${AS_CP[@]}" "$GRAB" "$CPUID" "$T/grab/stop" "$T/grab/$1.log" ${2:-} &
    GRABBER=$!
}
stop_attack() { touch "$T/grab/stop"; wait "$GRABBER"; GRABBER=; }
# leaks LOG: the descriptors taken that give a bundle or the crashed process's root (any directory
# but one under /proc: a sanitizer build's leak check, at exit, lists the threads of the enricher,
# which it made dumpable for that, through /proc/PID/task)
leaks() {
    grep '^got ' "$1" | grep -E "path=$T/bundles|crash-[^ ]*\.zst|\.slots|\.tmp-crash|type=dir" |
        grep -Ev "type=dir path=/proc/[0-9]+/task$" || true
}
summary() { grep '^summary ' "$1" | sed 's/^summary //'; }

# ---- 0. the attacker takes what it can take ----
echo "decoy" > "$T/grab/decoy"
"${AS_CP[@]}" sleep 600 3< "$T/grab/decoy" &
decoy=$!
attack control
sleep 1
stop_attack
kill "$decoy"; wait "$decoy" 2> /dev/null
check "0: the attacker takes a descriptor of a dumpable process of uid crashpack (the decoy)" \
    grep -q "^got pid=$decoy fd=3 via=getfd type=reg path=$T/grab/decoy\$" "$T/grab/control.log"

# ---- 1. passive: 20 root crashes ----
attack passive
crashes 20 passive
stop_attack
echo "1: attacker: $(summary "$T/grab/passive.log")"
grep '^got ' "$T/grab/passive.log" | sed 's/^got pid=[0-9]* /  took /' | sort | uniq -c | head -20
leaks "$T/grab/passive.log" > "$T/grab/passive.leaks"
check "1: no descriptor of a bundle or a root taken ($(wc -l < "$T/grab/passive.leaks") taken)" \
    [ ! -s "$T/grab/passive.leaks" ]
head -5 "$T/grab/passive.leaks"
n=0
for b in "$T"/passive/*.zst; do
    [ -f "$b" ] || continue
    s=$(step "$b")
    if [ "${s%% *}" = ok ] && [ "$(echo "$s" | cut -d' ' -f2)" = "$CPUID" ] &&
        tar --zstd -tf "$b" | grep -qx stacks.json; then
        n=$((n + 1))
    else
        echo "  $(basename "$b"): $s"
    fi
done
check "1: the 20 bundles carry stacks.json, made as uid crashpack ($CPUID): $n" [ "$n" = 20 ]

# ---- 2. active: forged hellos into every socket taken ----
attack active --active
crashes 8 active
stop_attack
echo "2: attacker: $(summary "$T/grab/active.log")"
leaks "$T/grab/active.log" > "$T/grab/active.leaks"
check "2: no descriptor of a bundle or a root taken or received ($(wc -l < "$T/grab/active.leaks"))" \
    [ ! -s "$T/grab/active.leaks" ]
head -5 "$T/grab/active.leaks"
n=0 bad=0
for b in "$T"/active/*.zst; do
    [ -f "$b" ] || continue
    n=$((n + 1))
    s=$(step "$b")
    case $s in
    "ok $CPUID "*) ;;
    "failed "*handshake*) echo "  $(basename "$b"): failed closed: $s" ;;
    *) bad=$((bad + 1)); echo "  $(basename "$b"): $s" ;;
    esac
    "$CP_BIN/crashpack" analyze --members "$b" > /dev/null 2>&1 || { bad=$((bad + 1)); echo "  $(basename "$b"): not complete"; }
done
check "2: 8 bundles published, each enriched or failed closed at the handshake" [ "$n" = 8 -a "$bad" = 0 ]

# ---- 3. no user crashpack: root's crashes are not enriched ----
if [ "$CP_USER_EXISTED" = 0 ]; then
    cp_drop_user "$CP_GROUP_EXISTED"
    pid=$(cp_crash "$CP_BIN/cp-segv-threads")
    if b=$(cp_bundle_for "$pid" 120); then
        s=$(step "$b")
        check "3: no user crashpack: a root crash is not enriched ($s)" \
            [ "$s" = "skipped None no crashpack user: run crashpack install" ]
        check "3: ... and has no stacks.json" bash -c "! tar --zstd -tf '$b' | grep -qx stacks.json"
    else
        fail "3: no bundle for the root crash without the user"
    fi
    pid=$(cp_crash setpriv --reuid=65534 --regid=65534 --clear-groups "$CP_BIN/cp-segv-threads")
    if b=$(cp_bundle_for "$pid" 120); then
        check "3: a crash as nobody is still enriched, as uid 65534" [ "$(step "$b" | cut -d' ' -f1-2)" = "ok 65534" ]
    else
        fail "3: no bundle for the crash as nobody"
    fi
else
    echo "3: skipped: the user crashpack existed before this test"
fi
finish
