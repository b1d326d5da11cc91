#!/usr/bin/env bash
# test_bad_input.sh - issue 23, acceptance 10: each bad input gets one clear line on stderr that
# names the path (or the pid, the rule) and what is wrong, with the exit code of docs/cli.md, and
# nothing else: a text file, an empty file, a directory and a bundle cut to 100 bytes given to
# analyze, analyze --json, report, report --slim OUT and db add; checkpoint of a missing file;
# rules test of a missing rule; snap of pid 1 as an ordinary user. Nothing is written but db add's
# record of the failure (docs/db.md). No core_pattern, no agent; reads only its own files.
source "$(dirname "$0")/../lib.sh"
T=$(mktemp -d /tmp/cpbad.XXXXXX)
trap 'rm -rf "$T"' EXIT
CP="$CP_BIN/crashpack"
export CRASHPACK_DATA_DIR="$CP_SRC" CRASHPACK_CACHE_DIR=off
mkdir -p "$T/in" "$T/cwd"
chmod 755 "$T" "$T/in"

printf 'hello, this is not a bundle\n' > "$T/in/notes.txt"
: > "$T/in/empty.zst"
mkdir "$T/in/adir"
head -c 100 "$CP_SRC/tests/fuzz/corpus/complete.zst" > "$T/in/cut.zst"

# run NAME CMD...: in $T/cwd; stdout in $T/NAME.out, stderr in $T/NAME.err, exit code in $RC
run() { local n=$1; shift; (cd "$T/cwd" && "$@") > "$T/$n.out" 2> "$T/$n.err"; RC=$?; }
# one_line NAME RC LINE: exit RC, exactly LINE on stderr, nothing on stdout
one_line() {
    if [ "$RC" = "$2" ] && [ ! -s "$T/$1.out" ] && [ "$(cat "$T/$1.err")" = "$3" ]; then return 0; fi
    echo "  rc $RC (want $2); stdout: $(head -c 300 "$T/$1.out")" >&2
    echo "  stderr: $(cat "$T/$1.err")" >&2
    echo "  want:   $3" >&2
    return 1
}
# nothing_new: the working directory and the input directory hold only what they held
nothing_new() { [ -z "$(ls -A "$T/cwd")" ] && [ "$(ls -A "$T/in" | sort | tr '\n' ' ')" = "adir cut.zst empty.zst notes.txt " ]; }

declare -A WHY=(
    [notes.txt]="not a crashpack bundle: $T/in/notes.txt (no zstd frame)"
    [empty.zst]="not a crashpack bundle: $T/in/empty.zst (an empty file)"
    [adir]="not a crashpack bundle: $T/in/adir (a directory)"
    [cut.zst]="truncated bundle: $T/in/cut.zst (100 bytes, cut inside manifest.json: no crash identity to report)"
)
for f in notes.txt empty.zst adir cut.zst; do
    p=$T/in/$f
    run "$f-analyze" "$CP" analyze "$p"
    check "analyze $f: one line, exit 1" one_line "$f-analyze" 1 "crashpack analyze: ${WHY[$f]}"
    run "$f-json" "$CP" analyze --json "$p"
    check "analyze --json $f: one line, exit 1" one_line "$f-json" 1 "crashpack analyze: ${WHY[$f]}"
    run "$f-report" "$CP" report "$p"
    check "report $f: one line, exit 1" one_line "$f-report" 1 "crashpack report: ${WHY[$f]}"
    run "$f-slim" "$CP" report --slim "$T/cwd/slim.zst" "$p"
    check "report --slim $f: one line, exit 1" one_line "$f-slim" 1 "crashpack report: ${WHY[$f]}"
    check "report --slim $f: no slim bundle written" nothing_new
    run "$f-db" "$CP" db add --db "$T/kb.sqlite" "$p"
    check "db add $f: exit 1, one line on stderr, the failure on stdout" bash -c \
        "[ $RC = 1 ] && [ \"\$(cat '$T/$f-db.err')\" = 'crashpack db add: ${WHY[$f]}' ] &&
         [ \"\$(cat '$T/$f-db.out')\" = 'failed: nothing stored from $p; the failure is recorded' ]"
done
check "db add stored no crash" bash -c "'$CP' db list --db '$T/kb.sqlite' | grep -qx '0 crashes'"
check "nothing written beside the inputs" nothing_new

# a missing bundle: exit 3 (unchanged)
run nob "$CP" analyze "$T/in/none.zst"
check "analyze a missing bundle: exit 3, one line" one_line nob 3 "crashpack analyze: no such bundle: $T/in/none.zst"

# checkpoint: the error on stderr, not stdout
run ck "$CP" checkpoint /nonexistent-cp-test.pt
check "checkpoint /nonexistent: exit 3, one line on stderr" one_line ck 3 \
    "crashpack checkpoint: no such checkpoint: /nonexistent-cp-test.pt"
run ckj "$CP" checkpoint --json /nonexistent-cp-test.pt
check "checkpoint --json /nonexistent: exit 3, one line on stderr" one_line ckj 3 \
    "crashpack checkpoint: no such checkpoint: /nonexistent-cp-test.pt"

# rules test NAME: names the missing rule
run rt "$CP" rules test --db "$T/kb.sqlite" no-such-rule-xyz
check "rules test no-such-rule-xyz: exit 3, names it" one_line rt 3 \
    "crashpack rules test: no rule \`no-such-rule-xyz\` in the rule base (\`crashpack rules list\` shows them)"

# snap 1 as an ordinary user: the reason in words, not ptrace's
if command -v setpriv > /dev/null && [ "$(id -u)" = 0 ]; then
    run snap1 setpriv --reuid 65534 --regid 65534 --clear-groups "$CP" snap 1
    comm1=$(cat /proc/1/comm)
    check "snap 1 as nobody: exit 1, one line with the reason in words" one_line snap1 1 \
        "crashpack snap: cannot snapshot pid 1 ($comm1): it runs as uid 0 and crashpack as uid 65534 without CAP_SYS_PTRACE: only root may trace another user's process"
else
    echo "skipped: snap 1 as nobody (needs root and setpriv)"
fi
run snapx "$CP" snap 999999999
check "snap of no such process: exit 2 (not a pid) or 3" bash -c "[ $RC = 2 ] || [ $RC = 3 ]"
finish
