#!/bin/bash
# test_install.sh - `crashpack install|uninstall|status` against the real /proc/sys/kernel/core_pattern:
# every install -> uninstall round trip must leave core_pattern, core_pipe_limit, /etc/sysctl.d,
# the install state and the system user crashpack (made by install, removed by uninstall only
# when install made it) as they were.
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
cp_setup

CP=$CP_BIN/crashpack
HANDLER=$(readlink -f "$CP_BIN")/crashpack-capture # the crashpack binary resolves its own dir
STATE=/var/lib/crashpack/install-state
DROPIN=/etc/sysctl.d/99-crashpack.conf
PATTERN=/proc/sys/kernel/core_pattern
LIMIT=/proc/sys/kernel/core_pipe_limit
[ -x "$CP" ] && [ -x "$HANDLER" ] || die "build first: $CP or $HANDLER is missing"
# a real install's drop-in would be overwritten by this test, and lib.sh does not keep its content
[ -e "$DROPIN" ] && { echo "SKIP: $DROPIN exists (crashpack installed for real?)"; exit 77; }
rm -f "$STATE" # lib.sh saved a real install's state and puts it back

ORIG_PATTERN=$(cat "$PATTERN")

# snap FILE: everything install may touch, byte-exactly (od shows trailing spaces too).
snap() {
    {
        od -c "$PATTERN"
        cat "$LIMIT"
        ls -lA --time-style=full-iso /etc/sysctl.d
        for f in /etc/sysctl.d/*; do [ -f "$f" ] && sha256sum "$f"; done
        if [ -e "$STATE" ]; then ls -l --time-style=full-iso "$STATE"; sha256sum "$STATE"; else echo "no state"; fi
        ls -A /var/lib/crashpack 2>/dev/null # stray temp files; the directory itself may stay
        grep -c '^crashpack:' /etc/passwd /etc/group # the user and group, there or not
    } > "$1"
}
set_pattern() { printf '%s' "$1" > "$PATTERN"; }
quiet() { "$@" > "$T/out"; } # keeps the command's output for the next check, not the log
same() { cmp -s "$1" "$2" || { diff "$1" "$2" | head -20 >&2; return 1; }; }
pattern_is() { [ "$(cat "$PATTERN")" = "$1" ]; }
# status_is CODE: crashpack status exits with CODE
status_is() { "$CP" status > "$T/status.out" 2>&1; local rc=$?; [ "$rc" = "$1" ] || { echo "status exit $rc" >&2; cat "$T/status.out" >&2; return 1; }; }
# fails_with TEXT CMD...: CMD exits non-zero and says TEXT on stderr
fails_with() {
    local text=$1; shift
    "$@" > "$T/out" 2> "$T/err" && { echo "unexpected success: $*" >&2; return 1; }
    grep -qF -- "$text" "$T/err" || { echo "expected \`$text\` in:" >&2; cat "$T/err" >&2; return 1; }
}
# roundtrip NAME START [install options...]: from START, install then uninstall; all must be as before
roundtrip() {
    local name=$1 start=$2; shift 2
    set_pattern "$start"
    snap "$T/before"
    check "$name: install" quiet "$CP" install "$@"
    check "$name: core_pattern changed" test "$(cat "$PATTERN")" != "$start"
    check "$name: state written" test -f "$STATE"
    check "$name: uninstall" quiet "$CP" uninstall
    snap "$T/after"
    check "$name: everything restored byte-exactly" same "$T/before" "$T/after"
    check "$name: core_pattern is the start value" pattern_is "$start"
}

# install leaves %F out by itself on kernels older than 6.16
IFS=. read -r KMAJ KMIN _ <<< "$(uname -r)"
if [ "$KMAJ" -gt 6 ] || { [ "$KMAJ" = 6 ] && [ "${KMIN%%[!0-9]*}" -ge 16 ]; }; then F=" %F"; else F=""; fi
OURS="|$HANDLER -c $T/conf %P %i %I %s %t %u %g %d %c %h$F"

# ---- usage ----
check "install --help exits 0 on stdout" bash -c '"$1" install --help | grep -q "usage: crashpack install"' _ "$CP"
check "uninstall --help" bash -c '"$1" uninstall --help | grep -q "usage: crashpack uninstall"' _ "$CP"
check "status --help" bash -c '"$1" status --help | grep -q "usage: crashpack status"' _ "$CP"
"$CP" install --no-such-option > "$T/out" 2> "$T/err"
check "unknown option exits 2, nothing on stdout" test $? = 2 -a ! -s "$T/out"
check "  one line on stderr naming it" bash -c '[ "$(wc -l < "$1")" = 1 ] && grep -q -- "--no-such-option" "$1"' _ "$T/err"
check "uninstall without state fails clearly" fails_with "not installed" "$CP" uninstall
check "status without state exits 3 (not installed)" status_is 3

# ---- from the original pattern (systemd-coredump here: a foreign handler) ----
set_pattern "$ORIG_PATTERN"
snap "$T/before"
if [ "${ORIG_PATTERN:0:1}" = "|" ]; then
    check "foreign handler refused without --force" fails_with "another program" \
        "$CP" install --no-sysctl-d -c "$T/conf"
    snap "$T/after"
    check "refusal changed nothing" same "$T/before" "$T/after"
fi
"$CP" install --force --dry-run -c "$T/conf" > "$T/dry"
check "dry run succeeds" test $? = 0
check "dry run shows core_pattern old -> new" grep -qF "\`$ORIG_PATTERN\` -> \`$OURS\`" "$T/dry"
check "dry run shows core_pipe_limit" grep -q "core_pipe_limit" "$T/dry"
check "dry run shows the drop-in" grep -qF "$DROPIN" "$T/dry"
check "dry run shows the drop-in's pattern line" grep -qF "kernel.core_pattern = $OURS" "$T/dry"
check "dry run shows the state file" grep -qF "$STATE" "$T/dry"
snap "$T/after"
check "dry run changed nothing" same "$T/before" "$T/after"
roundtrip "original pattern" "$ORIG_PATTERN" --force --no-sysctl-d -c "$T/conf"

# ---- a foreign handler with spaces, `|` and `%`, and a trailing space ----
FOREIGN='|/opt/other vendor/handler  --x "a b" %p|%e  %%  end '
set_pattern "$FOREIGN"
snap "$T/before"
check "spaced foreign handler refused without --force" fails_with "another program" \
    "$CP" install --no-sysctl-d -c "$T/conf"
snap "$T/after"
check "refusal changed nothing" same "$T/before" "$T/after"
roundtrip "spaced foreign handler" "$FOREIGN" --force --no-sysctl-d -c "$T/conf"

# ---- a plain file pattern: no --force needed ----
roundtrip "plain core" core --no-sysctl-d -c "$T/conf"
roundtrip "core.%p" "core.%p" --no-sysctl-d

# ---- the installed pattern, exactly ----
set_pattern core
"$CP" install --no-sysctl-d -c "$T/conf" > /dev/null
check "pattern is |handler -c CONFIG %P %i %I %s %t %u %g %d %c %h${F}" pattern_is "$OURS"
check "state file is 0600 root" test "$(stat -c %a:%U "$STATE")" = 600:root
check "state dir is 0755 root" test "$(stat -c %a:%U /var/lib/crashpack)" = 755:root
check "status: installed, intact -> 0" status_is 0
check "status names the pattern" grep -qF "$OURS" "$T/status.out"
check "status --json says intact" bash -c '"$1" status --json | grep -q "\"state\":.*\"intact\""' _ "$CP"

# ---- idempotence: a second install keeps the saved previous values ----
cp "$STATE" "$T/state1"
check "second identical install succeeds" quiet "$CP" install --no-sysctl-d -c "$T/conf"
check "  and says there is nothing to change" grep -q "nothing to change" "$T/out"
check "  and leaves the state file alone" same "$T/state1" "$STATE"
check "install with other options over ours (--no-pidfd)" quiet "$CP" install --no-sysctl-d --no-pidfd -c "$T/conf"
check "--no-pidfd pattern has no %F" pattern_is "|$HANDLER -c $T/conf %P %i %I %s %t %u %g %d %c %h"
check "  and the state still remembers \`core\`" grep -qF '"core_pattern":	"core"' "$STATE"
check "one uninstall restores the original" quiet "$CP" uninstall
check "  core_pattern is core again" pattern_is core
check "  state removed" test ! -e "$STATE"
check "status after uninstall exits 3" status_is 3

# ---- status and uninstall when something else took core_pattern ----
set_pattern core
"$CP" install --no-sysctl-d -c "$T/conf" > /dev/null
TAKER='|/usr/lib/other/taker %p'
set_pattern "$TAKER"
check "status after takeover exits 1 (a problem found)" status_is 1
check "  says it changed behind our back" grep -qF "core_pattern was changed behind crashpack's back: now \`$TAKER\`" "$T/status.out"
snap "$T/before"
check "uninstall refuses to clobber the new pattern" fails_with "changed behind crashpack's back" "$CP" uninstall
snap "$T/after"
check "  and changed nothing" same "$T/before" "$T/after"
check "uninstall --force --dry-run" quiet "$CP" uninstall --force --dry-run
snap "$T/after"
check "  changed nothing" same "$T/before" "$T/after"
check "uninstall --force restores anyway" quiet "$CP" uninstall --force
check "  core_pattern is core" pattern_is core
check "  state removed" test ! -e "$STATE"
"$CP" install --no-sysctl-d -c "$T/conf" > /dev/null
set_pattern "$TAKER"
check "uninstall --keep-pattern" quiet "$CP" uninstall --keep-pattern
check "  keeps the new pattern" pattern_is "$TAKER"
check "  removes the state" test ! -e "$STATE"
set_pattern core
"$CP" install --no-sysctl-d -c "$T/conf" > /dev/null
set_pattern "$TAKER"
check "install over a takeover without --force is refused" fails_with "another program" "$CP" install --no-sysctl-d -c "$T/conf"
check "  pattern untouched" pattern_is "$TAKER"
"$CP" uninstall --force > /dev/null
check "  uninstall --force still restores the first original" pattern_is core

# ---- core_pipe_limit ----
echo 4 > "$LIMIT"
set_pattern core
"$CP" install --no-sysctl-d > /dev/null
check "core_pipe_limit raised to 16" test "$(cat "$LIMIT")" = 16
"$CP" install --no-sysctl-d --pipe-limit 40 > /dev/null
check "--pipe-limit 40 over ours" test "$(cat "$LIMIT")" = 40
"$CP" uninstall > /dev/null
check "core_pipe_limit restored to 4" test "$(cat "$LIMIT")" = 4
echo 100 > "$LIMIT"
"$CP" install --no-sysctl-d > /dev/null
check "a higher core_pipe_limit is kept" test "$(cat "$LIMIT")" = 100
"$CP" uninstall > /dev/null
echo "$CP_SAVED_PIPE_LIMIT" > "$LIMIT"

# ---- refused configurations ----
set_pattern core
snap "$T/before"
LONG=$T/$(printf 'd%.0s' {1..90})
mkdir -p "$LONG" && cp "$T/conf" "$LONG/crashpack.conf"
check "a -c path making the pattern > 127 chars is refused" fails_with "127" \
    "$CP" install --no-sysctl-d -c "$LONG/crashpack.conf"
printf 'no_such_key = 1\n' > "$T/bad.conf"
check "an invalid config is refused" fails_with "no_such_key" "$CP" install --no-sysctl-d -c "$T/bad.conf"
check "a missing config is refused" fails_with "missing.conf" "$CP" install --no-sysctl-d -c "$T/missing.conf"
snap "$T/after"
check "refusals changed nothing" same "$T/before" "$T/after"

# ---- the sysctl.d drop-in ----
set_pattern core
snap "$T/before"
check "install with drop-in" quiet "$CP" install -c "$T/conf"
check "  drop-in written" test -f "$DROPIN"
check "  with the pattern" grep -qxF "kernel.core_pattern = $OURS" "$DROPIN"
check "  with core_pipe_limit" grep -qx "kernel.core_pipe_limit = 16" "$DROPIN"
check "  saying crashpack wrote it" grep -q "^# Written by .crashpack install" "$DROPIN"
check "  and sysctl can parse it" sysctl -q -p "$DROPIN"
check "  core_pattern unchanged by sysctl -p" pattern_is "$OURS"
check "  status reports it" bash -c '"$1" status | grep -q "99-crashpack.conf: present, written by crashpack"' _ "$CP"
check "uninstall" quiet "$CP" uninstall
check "  drop-in removed" test ! -e "$DROPIN"
snap "$T/after"
check "  everything restored" same "$T/before" "$T/after"

# someone else's file under our name is put back byte-exactly
printf '# not crashpack\nkernel.core_pipe_limit = 8\n' > "$DROPIN"
cp -p "$DROPIN" "$T/foreign"
check "install over someone else's drop-in" quiet "$CP" install -c "$T/conf"
check "  replaces it with ours" grep -q "^# Written by .crashpack install" "$DROPIN"
check "uninstall" quiet "$CP" uninstall
check "  puts theirs back byte-exactly" same "$T/foreign" "$DROPIN"
rm -f "$DROPIN"

set_pattern core
snap "$T/before"
check "drop-in dry run" quiet "$CP" install --dry-run -c "$T/conf"
snap "$T/after"
check "  changed nothing" same "$T/before" "$T/after"

# ---- the system user crashpack (root's and setuid programs' crashes are enriched as it) ----
if [ "$CP_USER_EXISTED" = 1 ]; then
    echo "note: the user crashpack existed before this test: its creation is not tested"
else
    set_pattern core
    check "dry run says it would create the user" \
        bash -c '"$1" install --dry-run --no-sysctl-d -c "$2" | grep -q "would create the system user crashpack and its group"' _ "$CP" "$T/conf"
    check "  and does not" bash -c '! grep -q "^crashpack:" /etc/passwd'
    check "install creates the system user crashpack" quiet "$CP" install --no-sysctl-d -c "$T/conf"
    check "  a system user with no login shell and no home" bash -c '
        IFS=: read -r _ _ uid _ _ home shell < <(grep "^crashpack:" /etc/passwd) &&
        [ "$uid" -gt 0 ] && [ "$uid" -lt 1000 ] && [ "$home" = /nonexistent ] && [ ! -e /nonexistent ] &&
        case $shell in */nologin | */false) true ;; *) false ;; esac'
    check "  and its own group" test "$(id -gn crashpack)" = crashpack
    check "  the state says install created both" \
        [ "$(json "$STATE" '(d["user"]["name"], d["user"]["created"], d["user"]["group_created"])')" = "('crashpack', True, True)" ]
    check "status names the user" bash -c '"$1" status | grep -q "system user crashpack: present"' _ "$CP"
    check "status --json: enrich_user true" [ "$("$CP" status --json | json /dev/stdin 'd["enrich_user"]')" = True ]
    check "a second install: nothing to change" bash -c '"$1" install --no-sysctl-d -c "$2" | grep -q "nothing to change"' _ "$CP" "$T/conf"
    check "uninstall --dry-run says it would remove the user" \
        bash -c '"$1" uninstall --dry-run | grep -q "would remove the system user crashpack and its group"' _ "$CP"
    check "uninstall removes the user and the group" quiet "$CP" uninstall
    check "  the user is gone" bash -c '! grep -q "^crashpack:" /etc/passwd'
    check "  the group is gone" bash -c '! grep -q "^crashpack:" /etc/group'
    # a user that was there before install is not install's to remove
    useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin crashpack
    check "install over an existing user crashpack" quiet "$CP" install --no-sysctl-d -c "$T/conf"
    check "  does not make it again" bash -c '! grep -q "create the system user" "$1"' _ "$T/out"
    check "  the state says install did not create it" \
        [ "$(json "$STATE" '(d["user"]["created"], d["user"]["group_created"])')" = "(False, False)" ]
    check "uninstall" quiet "$CP" uninstall
    check "  leaves the user that was there" grep -q '^crashpack:' /etc/passwd
    cp_drop_user 0
    check "status without the user says root's crashes are not enriched" \
        bash -c '"$1" status | grep -q "system user crashpack: absent: root.s and setuid programs. crashes are not enriched"' _ "$CP"
fi

set_pattern "$ORIG_PATTERN"
check "core_pattern is back to the original" pattern_is "$ORIG_PATTERN"
finish
