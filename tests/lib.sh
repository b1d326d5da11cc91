# tests/lib.sh - shared helpers for crashpack's end-to-end tests (sourced, bash).
#
# Every test that touches core_pattern calls cp_setup first: it takes the machine-wide lock, records
# core_pattern, core_pipe_limit and printk_devkmsg, and installs an EXIT trap that restores them
# byte-exactly even when the test fails. Bundles go to a private directory $T/bundles.
set -u
CP_SRC=${CP_SRC:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
CP_BUILD=${CP_BUILD:-$CP_SRC/build}
CP_BIN=${CP_BIN:-$CP_BUILD/bin}
CP_FAILS=0

fail() { echo "FAIL: $*" >&2; CP_FAILS=$((CP_FAILS + 1)); }
ok() { echo "ok: $*"; }
die() { echo "FATAL: $*" >&2; exit 1; }
# check DESCRIPTION COMMAND...: runs the command, records ok/FAIL.
check() { local d=$1; shift; if "$@"; then ok "$d"; else fail "$d"; fi; }
finish() { if [ "$CP_FAILS" -ne 0 ]; then echo "$CP_FAILS check(s) failed" >&2; exit 1; fi; echo "all checks passed"; exit 0; }

cp_need_root() { [ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; exit 77; }; }

cp_restore() {
    local rc=$?
    # the handler runs without stderr: sanitizer builds log their reports to files instead
    if [ -n "${T:-}" ] && [ -e "$T/.san_mark" ]; then
        local f
        for f in $(find /tmp -maxdepth 1 -name 'crashpack-capture-*san*' -newer "$T/.san_mark" 2>/dev/null); do
            echo "FAIL: sanitizer report from the handler: $f" >&2
            cat "$f" >&2
            rc=1
        done
    fi
    if [ -n "${CP_SAVED_PATTERN_FILE:-}" ] && [ -f "$CP_SAVED_PATTERN_FILE" ]; then
        cat "$CP_SAVED_PATTERN_FILE" > /proc/sys/kernel/core_pattern 2>/dev/null || true
        echo "$CP_SAVED_PIPE_LIMIT" > /proc/sys/kernel/core_pipe_limit 2>/dev/null || true
        [ -n "${CP_SAVED_DEVKMSG:-}" ] && echo "$CP_SAVED_DEVKMSG" > /proc/sys/kernel/printk_devkmsg 2>/dev/null
        if [ "${CP_SYSCTL_EXISTED:-1}" = 0 ]; then rm -f /etc/sysctl.d/99-crashpack.conf; fi
        # crashpack install's state: put back what was there, remove what the test created
        if [ -f "$T/.saved_install_state" ]; then cp -p "$T/.saved_install_state" /var/lib/crashpack/install-state
        elif [ "${CP_STATE_EXISTED:-1}" = 0 ]; then rm -f /var/lib/crashpack/install-state; fi
        if [ "${CP_STATEDIR_EXISTED:-1}" = 0 ]; then rmdir /var/lib/crashpack 2>/dev/null || true; fi
        # cmp alone trusts st_size, which is 0 for /proc files: feed it through a pipe
        if ! cat /proc/sys/kernel/core_pattern | cmp -s "$CP_SAVED_PATTERN_FILE" -; then
            echo "WARNING: could not restore core_pattern" >&2
        fi
    fi
    # CP_KEEP_BUNDLES=DIR: every bundle the test left is copied there first (tests/compare_reports.sh
    # analyzes them with two builds and compares the reports)
    if [ -n "${CP_KEEP_BUNDLES:-}" ] && [ -n "${T:-}" ] && [ -d "$T" ]; then
        mkdir -p "$CP_KEEP_BUNDLES"
        local b n=0 tag
        tag=$(basename "$0" .sh)
        while IFS= read -r -d '' b; do
            n=$((n + 1))
            cp "$b" "$CP_KEEP_BUNDLES/$tag-$n-$(basename "$b")" 2>/dev/null || true
        done < <(find "$T" -name '*.zst' -type f -print0 2>/dev/null)
    fi
    if [ -n "${T:-}" ] && [ -d "$T" ] && [ -z "${CP_KEEP:-}" ]; then
        umount "$T"/* 2>/dev/null || true
        rm -rf "$T"
    fi
    # what the test left running in the background must not outlive it (nor hold the lock)
    local j
    for j in $(jobs -p); do kill -9 "$j" 2>/dev/null || true; done
    # the enrichment's user, when `crashpack install` (cp_install) created it during the test
    if [ "${CP_USER_EXISTED:-1}" = 0 ]; then cp_drop_user "${CP_GROUP_EXISTED:-1}"; fi
    exec 9>&- 2>/dev/null || true
    exit $rc
}

# cp_recover_stale: called with the test lock held, so no other test is running. A test killed by
# SIGKILL (ctest's timeout, a session that ended) runs no trap and leaves its handler in
# core_pattern, with `-c /tmp/cpt.XXXXXX/conf`; the next test would record that as the machine's
# pattern and put it back. Its temp dir still holds what it had saved: restore that, and say so.
cp_recover_stale() {
    local cur d
    cur=$(cat /proc/sys/kernel/core_pattern)
    case $cur in
    "|"*"/crashpack-capture -c /tmp/cpt."*/conf" "*) ;;
    *) return 0 ;;
    esac
    d=${cur#* -c }
    d=${d%%/conf *}
    if [ ! -f "$d/.saved_pattern" ]; then
        echo "cp_setup: WARNING: core_pattern holds the handler of a test that is not running ($d), and what it saved is gone; left as it is" >&2
        return 0
    fi
    echo "cp_setup: core_pattern holds the handler of a killed test ($d): restoring the pattern it saved" >&2
    cat "$d/.saved_pattern" > /proc/sys/kernel/core_pattern
    [ -f "$d/.user_absent" ] && cp_drop_user "$(cat "$d/.user_absent")"
    [ -f "$d/.saved_pipe_limit" ] && cat "$d/.saved_pipe_limit" > /proc/sys/kernel/core_pipe_limit
    if [ -f /var/lib/crashpack/install-state ] && grep -qF "$d/conf" /var/lib/crashpack/install-state; then
        if [ -f "$d/.saved_install_state" ]; then cp -p "$d/.saved_install_state" /var/lib/crashpack/install-state
        else rm -f /var/lib/crashpack/install-state; fi
    fi
}

# cp_setup [shared]: lock, record, trap, temp dir $T with $T/conf pointing bundle_dir at $T/bundles.
# The machine-wide lock is exclusive for a test that changes core_pattern, writes to the kernel
# log or makes OOM kills (the other tests' bundles would take in its lines); `shared` is for a
# test that captures through the handler (which reads the kernel log) but changes none of that:
# it runs beside other shared tests, never beside an exclusive one. Tests that capture nothing
# take no lock and call no cp_setup; tests/CMakeLists.txt's CP_E2E_UNLOCKED names the tests that
# ctest may run in parallel (shared and lock-free).
cp_setup() {
    cp_need_root
    local mode=-x
    [ "${1:-}" = shared ] && mode=-s
    exec 9>/run/crashpack-test.lock
    # a test killed from outside (ctest's timeout sends SIGKILL, so no trap runs) can leave a
    # background child that inherited fd 9 and keeps the lock; such orphans (parent pid 1) are
    # killed, processes of live tests never are
    while ! flock $mode -w 20 9; do
        local p
        for p in $(fuser /run/crashpack-test.lock 2>/dev/null); do
            [ "$p" = $$ ] && continue
            [ "$(ps -o ppid= -p "$p" 2>/dev/null | tr -d " ")" = 1 ] || continue
            echo "cp_setup: killing pid $p, an orphan of an earlier test that holds the test lock" >&2
            kill -9 "$p" 2>/dev/null || true
        done
    done
    [ "$mode" = -x ] && cp_recover_stale
    T=$(mktemp -d /tmp/cpt.XXXXXX)
    chmod 755 "$T"
    cp_setup_dirs
    [ "$mode" = -s ] && return 0
    CP_SAVED_PATTERN_FILE=$T/.saved_pattern
    cat /proc/sys/kernel/core_pattern > "$CP_SAVED_PATTERN_FILE"
    CP_SAVED_PIPE_LIMIT=$(cat /proc/sys/kernel/core_pipe_limit)
    echo "$CP_SAVED_PIPE_LIMIT" > "$T/.saved_pipe_limit"
    CP_SAVED_DEVKMSG=$(cat /proc/sys/kernel/printk_devkmsg 2>/dev/null || true)
    if [ -e /etc/sysctl.d/99-crashpack.conf ]; then CP_SYSCTL_EXISTED=1; else CP_SYSCTL_EXISTED=0; fi
    if [ -e /var/lib/crashpack/install-state ]; then CP_STATE_EXISTED=1; cp -p /var/lib/crashpack/install-state "$T/.saved_install_state"; else CP_STATE_EXISTED=0; fi
    if [ -d /var/lib/crashpack ]; then CP_STATEDIR_EXISTED=1; else CP_STATEDIR_EXISTED=0; fi
    # `crashpack install` creates the system user crashpack (the enrichment of root's crashes runs
    # as it): a user the machine did not have is removed again (cp_restore, or cp_recover_stale
    # after a killed test, which finds .user_absent)
    if cp_has_user; then CP_USER_EXISTED=1; else CP_USER_EXISTED=0; fi
    if grep -q '^crashpack:' /etc/group; then CP_GROUP_EXISTED=1; else CP_GROUP_EXISTED=0; fi
    [ "$CP_USER_EXISTED" = 0 ] && echo "$CP_GROUP_EXISTED" > "$T/.user_absent"
    return 0
}

# cp_has_user: the system user crashpack exists (read as the handler reads it: /etc/passwd)
cp_has_user() { grep -q '^crashpack:' /etc/passwd; }

# cp_drop_user GROUP_EXISTED: removes the user crashpack (once its processes, enrichments still
# running, are gone: 10 s at most), and its group unless GROUP_EXISTED is 1.
cp_drop_user() {
    local i
    if cp_has_user; then
        for ((i = 0; i < 100; i++)); do pgrep -u crashpack > /dev/null || break; sleep 0.1; done
        userdel crashpack 2>/dev/null || userdel -f crashpack 2>/dev/null ||
            echo "WARNING: could not remove the user crashpack" >&2
    fi
    if [ "${1:-1}" = 0 ] && grep -q '^crashpack:' /etc/group; then groupdel crashpack 2>/dev/null || true; fi
    return 0
}

# The test's own state under $T (cp_setup's part that every mode has).
cp_setup_dirs() {
    touch "$T/.san_mark"
    # the analyzer's cache of decompressed debug files: per test, not root's ~/.cache (a test's
    # first analysis fills it, the later ones read it, so both paths run in every test)
    export CRASHPACK_CACHE_DIR=$T/cache
    # the knowledge base analyses read (user rules, GPU history): the test's own, never root's
    export CRASHPACK_DB=$T/kb.sqlite
    trap cp_restore EXIT
    trap 'exit 130' INT TERM
    mkdir -p "$T/bundles"
    cat > "$T/conf" <<CONF
bundle_dir = $T/bundles
max_use = 100%
keep_free = 0
burst_full = 100
repeat_full = 100
CONF
    ulimit -c unlimited
}

# cp_install [install options...]: installs the handler with $T/conf for this test.
cp_install() {
    "$CP_BIN/crashpack" install --force --no-sysctl-d -c "$T/conf" "$@" >/dev/null ||
        die "crashpack install failed"
}

# cp_bundle_for PID [TIMEOUT_S]: prints the published bundle path of PID, waiting for it.
cp_bundle_for() {
    local pid=$1 t=${2:-60} i f
    for ((i = 0; i < t * 10; i++)); do
        for f in "$T"/bundles/crash-*-"$pid"-*.zst; do
            [ -f "$f" ] && { echo "$f"; return 0; }
        done
        sleep 0.1
    done
    return 1
}

# cp_crash CMD...: runs CMD (which must crash) in the background, prints its pid, waits for it.
cp_crash() {
    "$@" >/dev/null 2>&1 &
    local pid=$!
    wait $pid 2>/dev/null
    echo $pid
}

# cp_member BUNDLE NAME: prints a member's content.
cp_member() { zstd -dc -q "$1" | tar -xOf - "$2"; }

# json FILE EXPR: prints EXPR evaluated in python with d = the parsed JSON file.
json() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }
export -f json

# ---- the handler fed a core directly (no core_pattern, no lock): tests/e2e/test_hostile_*.sh ----
# cp_direct_setup PREFIX: temp dir $T (removed on exit) with $T/conf pointing bundle_dir at
# $T/bundles, the rate limits out of the way.
cp_direct_setup() {
    T=$(mktemp -d "/tmp/$1.XXXXXX")
    trap 'rm -rf "$T"' EXIT
    mkdir -p "$T/bundles"
    cat > "$T/conf" <<CONF
bundle_dir = $T/bundles
max_use = 100%
keep_free = 0
burst_full = 1000
repeat_full = 1000
CONF
}

# cp_core_bundle CORE PID: feeds CORE to crashpack-capture on stdin as the kernel would for pid PID
# (signal 11; core_pattern is not touched), with $T/conf; prints the published bundle's path.
cp_core_bundle() {
    "$CP_BIN/crashpack-capture" -c "$T/conf" "$2" "$2" "$2" 11 "$(date +%s)" 0 0 1 -1 hostile < "$1"
    cp_bundle_for "$2" 60
}

# cp_no_sanitizer_report FILE...: none of the files holds an ASan, UBSan or LSan report.
cp_no_sanitizer_report() { ! grep -Eq 'AddressSanitizer|runtime error|LeakSanitizer' "$@"; }
