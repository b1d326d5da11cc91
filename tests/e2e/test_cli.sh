#!/usr/bin/env bash
# test_cli.sh - the one command-line convention (docs/cli.md) for every verb and sub-verb:
# -h/--help prints the usage on stdout and exits 0; an unknown option exits 2 with exactly one line
# on stderr naming it; bad numbers and times exit 2 naming the value; --opt=value and --opt value
# are the same; "no such thing" exits 3; every JSON document a listing verb prints validates
# against its schema under docs/schema/ (python3-jsonschema). No core_pattern: the knowledge base
# is filled from the fixture reports with `db add --report-json`.
source "$(dirname "$0")/../lib.sh"
T=$(mktemp -d /tmp/cpcli.XXXXXX)
trap 'kill "${SPID:-}" 2>/dev/null; rm -rf "$T"' EXIT
CP="$CP_BIN/crashpack"
export CRASHPACK_DB="$T/kb.sqlite" CRASHPACK_DATA_DIR="$CP_SRC"
python3 -c 'import jsonschema' 2>/dev/null || { echo "SKIP: python3-jsonschema is missing"; exit 77; }

VERBS=(install uninstall status analyze checkpoint report snap run watch enrich version
       "rules list" "rules show" "rules test" "rules add" "rules import" "rules export" "rules match"
       "db add" "db list" "db show" "db groups" "db jobs" "db search" "db stats" "db resolve" "db unresolve"
       "python-hook install" "python-hook uninstall" "python-hook status")

# run NAME CMD...: runs CMD with stdout in $T/NAME.out, stderr in $T/NAME.err; its exit code in $RC
run() { local n=$1; shift; "$@" > "$T/$n.out" 2> "$T/$n.err"; RC=$?; }
lines() { wc -l < "$1" | tr -d ' '; }
# usage_error NAME: exit 2, nothing on stdout, exactly one line on stderr
usage_error() { [ "$RC" = 2 ] && [ ! -s "$T/$1.out" ] && [ "$(lines "$T/$1.err")" = 1 ] ||
    { echo "rc $RC, stdout $(lines "$T/$1.out") lines, stderr:" >&2; cat "$T/$1.err" >&2; return 1; }; }
# valid FILE FORMAT: FILE is one JSON document of that format, valid against docs/schema/
valid() {
    python3 - "$CP_SRC/docs/schema" "$1" "$2" <<'PY'
import json, sys, jsonschema
d = json.load(open(sys.argv[2]))
want = sys.argv[3]
assert d.get("format") == want, "format %r, expected %r" % (d.get("format"), want)
schema = json.load(open("%s/%s.json" % (sys.argv[1], want.replace("/", "-"))))
jsonschema.Draft202012Validator.check_schema(schema)
jsonschema.Draft202012Validator(schema).validate(d)
PY
}

# ---- every verb and sub-verb: --help, an unknown option ----
run top "$CP" --help
check "crashpack --help: exit 0, usage on stdout" bash -c "[ $RC = 0 ] && grep -q '^usage: crashpack' '$T/top.out'"
run topbad "$CP" --no-such-thing
check "crashpack --no-such-thing: exit 2, one line" usage_error topbad
run nocmd "$CP" frobnicate
check "crashpack frobnicate: exit 2, one line naming it" bash -c "usage_error() { :; }; [ $RC = 2 ] && [ \$(wc -l < '$T/nocmd.err') = 1 ] && grep -q frobnicate '$T/nocmd.err'"
for v in "${VERBS[@]}"; do
    n=${v// /_}
    # shellcheck disable=SC2086
    run "$n.help" "$CP" $v --help
    check "$v --help: exit 0, usage on stdout, nothing on stderr" \
        bash -c "[ $RC = 0 ] && grep -q '^usage: crashpack $v' '$T/$n.help.out' && [ ! -s '$T/$n.help.err' ]"
    # shellcheck disable=SC2086
    run "$n.h" "$CP" $v -h
    check "$v -h: the same usage" cmp -s "$T/$n.help.out" "$T/$n.h.out"
    # shellcheck disable=SC2086
    run "$n.bad" "$CP" $v --no-such-option
    check "$v --no-such-option: exit 2, one line on stderr" usage_error "$n.bad"
    check "  it names the option" grep -q -- "--no-such-option" "$T/$n.bad.err"
done
run dbnone "$CP" db frob
check "db frob: exit 2, one line" usage_error dbnone
run rulesnone "$CP" rules frob
check "rules frob: exit 2, one line" usage_error rulesnone

# ---- bad numbers and values: exit 2, one line naming the value ----
# VALUE|COMMAND: the command must name VALUE
BAD=("2abc|db list --limit 2abc" "2abc|db groups --limit=2abc" "-1|db jobs --limit -1" "0|db search --limit 0"
     "2abc|db show 2abc" "2abc|analyze --max-frames 2abc x" "1x|analyze --timeout=1x x"
     "gdb|analyze --unwinder=gdb x" "2abc|enrich --timeout 2abc x" "1|enrich --bundle-fd 1"
     "2abc|snap --timeout 2abc 1" "2abc|snap 2abc" "2abc|checkpoint --scan-budget-ms 2abc x"
     "2abc|install --dry-run --pipe-limit 2abc" "2abc|rules add --from-crash 2abc"
     "abc|watch --stall abc -- true" "abc|run --stall abc -- true" "sometimes|run --exits sometimes -- true" "0|run --scan-ms 0 -- true" "1x|run --tail 1x -- true" "2abc|db search --since 2abc" "tomorrowish|db search --until tomorrowish")
i=0
for b in "${BAD[@]}"; do
    i=$((i + 1)); val=${b%%|*}; b=${b#*|}
    # shellcheck disable=SC2086
    run "bad$i" "$CP" $b
    check "$b: exit 2, one line" usage_error "bad$i"
    check "  it names \`$val\`" grep -qF -- "\`$val\`" "$T/bad$i.err"
done
run needval "$CP" db list --limit
check "db list --limit (no value): exit 2, one line" usage_error needval
run noval "$CP" db list --json=yes
check "db list --json=yes: exit 2, one line" usage_error noval
run extra "$CP" db list extra
check "db list extra: exit 2, one line" usage_error extra

# ---- no such thing: exit 3 ----
run nokb "$CP" db list --db "$T/none.sqlite"
check "db list without a knowledge base: exit 3" [ "$RC" = 3 ]
run noan "$CP" analyze "$T/none.zst"
check "analyze a missing bundle: exit 3" [ "$RC" = 3 ]
run norep "$CP" report "$T/none.zst"
check "report a missing bundle: exit 3" [ "$RC" = 3 ]
run nockpt "$CP" checkpoint "$T/none.pt"
check "checkpoint a missing file: exit 3" [ "$RC" = 3 ]
run norule "$CP" rules show no-such-rule
check "rules show an unknown rule: exit 3" [ "$RC" = 3 ]

# ---- a knowledge base: two crashes, one an hour ago, one on 2026-11-18 ----
python3 - "$CP_SRC/fixtures/reports" "$T/reports.json" <<'PY'
import json, sys, time
a = json.load(open(sys.argv[1] + "/xid79-nccl-timeout.json"))
b = json.load(open(sys.argv[1] + "/plain-segv.json"))
b["host"]["time"] = time.time() - 3600
for k in ("crash_key", "fingerprint"):
    b.pop(k, None)
json.dump([a, b], open(sys.argv[2], "w"))
PY
run add "$CP" db add --report-json "$T/reports.json" --diagnose
check "db add --report-json: exit 0" [ "$RC" = 0 ]
run nocrash "$CP" db show 999
check "db show an unknown id: exit 3" [ "$RC" = 3 ]

# ---- --json on every listing verb, valid against its schema ----
jsonv() { # NAME FORMAT CMD...: exit 0 (or what $OKRC allows) and a valid document
    local n=$1 f=$2; shift 2
    run "$n" "$@"
    check "$*: exit ${OKRC:-0} (rc $RC)" bash -c "[[ ' ${OKRC:-0} ' == *' $RC '* ]]"
    check "  valid $f" valid "$T/$n.out" "$f"
}
jsonv list crashpack-db-list/1 "$CP" db list --json
check "  db list: 2 crashes, signal an object" [ "$(json "$T/list.out" 'd["count"], d["crashes"][0]["signal"]["name"]')" = "(2, 'SIGSEGV')" ]
jsonv search crashpack-db-list/1 "$CP" db search --json --host node07
jsonv show crashpack-db-show/1 "$CP" db show 1 --json
check "  db show: bundle.path and signal.number" [ "$(json "$T/show.out" '"path" in d["bundle"], d["signal"]["number"]')" = "(True, 6)" ]
jsonv groups crashpack-db-groups/1 "$CP" db groups --json
jsonv resolve crashpack-db-resolve/1 "$CP" db resolve 1 --cause "a known bad node" --ticket https://t.example/1 --json
jsonv groupsr crashpack-db-groups/1 "$CP" db groups --json
jsonv showr crashpack-db-show/1 "$CP" db show 1 --json
check "  db show: the resolution" [ "$(json "$T/showr.out" 'd["resolution"]["cause"]')" = "a known bad node" ]
jsonv rexport crashpack-rules-export/1 "$CP" rules export
jsonv unresolve crashpack-db-resolve/1 "$CP" db unresolve 1 --json
run nogroup "$CP" db resolve no-such-group --cause x
check "db resolve of no such group: exit 3, one line" bash -c "[ $RC = 3 ] && [ \$(wc -l < '$T/nogroup.err') = 1 ]"
jsonv jobs crashpack-db-jobs/1 "$CP" db jobs --json
jsonv stats crashpack-db-stats/1 "$CP" db stats --json
jsonv rlist crashpack-rules-list/1 "$CP" rules list --json
jsonv version crashpack-version/1 "$CP" version --json
jsonv version2 crashpack-version/1 "$CP" --version --json
OKRC="0 1 3" jsonv status crashpack-status/1 "$CP" status --json
OKRC="0 1 3" jsonv pyhook crashpack-python-hook-status/1 "$CP" python-hook status --python python3 --json
run pyhooknone "$CP" python-hook status --python "$T/no-such-python"
check "python-hook status with no such interpreter: exit 3" [ "$RC" = 3 ]
run pyhooknosub "$CP" python-hook
check "python-hook without a command: exit 2, one line" usage_error pyhooknosub
run pyhookfrob "$CP" python-hook frob
check "python-hook frob: exit 2, one line" usage_error pyhookfrob
printf 'not a checkpoint' > "$T/model.pt"
OKRC="0 1" jsonv ckpt crashpack-checkpoint/1 "$CP" checkpoint --json --no-scan "$T/model.pt"
run rshow "$CP" rules show segfault --json
check "rules show --json: exit 0, the rule as JSON" bash -c "[ $RC = 0 ] && [ \"\$(json '$T/rshow.out' 'd[\"id\"]')\" = segfault ]"
run ver "$CP" --version
check "crashpack --version: version, commit and libraries" \
    bash -c "[ $RC = 0 ] && grep -q '^crashpack [0-9].* (commit ' '$T/ver.out' && grep -q 'sqlite' '$T/ver.out'"
if [ "$(id -u)" = 0 ]; then
    printf 'bundle_dir = %s\n' "$T/bundles" > "$T/conf"
    mkdir -p "$T/bundles"
    sleep 60 & SPID=$!
    jsonv snap crashpack-snap-result/1 "$CP" snap -c "$T/conf" --json "$SPID"
    kill "$SPID" 2>/dev/null
fi

# ---- --opt=value and --opt value are the same ----
"$CP" db list --limit=1 --json > "$T/l1.json"; "$CP" db list --json --limit 1 > "$T/l2.json"
check "--limit=1 and --limit 1: the same output" cmp -s "$T/l1.json" "$T/l2.json"
check "  one crash" [ "$(json "$T/l1.json" 'd["count"]')" = 1 ]
"$CP" db show --json 1 > "$T/s1.json"; "$CP" db show 1 --db="$CRASHPACK_DB" --json > "$T/s2.json"
check "options before or after the argument: the same output" cmp -s "$T/s1.json" "$T/s2.json"

# ---- times: RFC 3339, dates, relative forms ----
count() { "$CP" db search --json "$@" | python3 -c 'import json,sys; print(json.load(sys.stdin)["count"])'; }
check "--since 2h: the crash of an hour ago" [ "$(count --since 2h)" = 1 ]
check "--since 30m: none" [ "$(count --since 30m)" = 0 ]
check "--since 7d: one" [ "$(count --since 7d)" = 1 ]
check "--since 2026-11-18: both" [ "$(count --since 2026-11-18)" = 2 ]
check "--since 2026-11-18T12:00:00Z --until 2026-11-19: none" [ "$(count --since 2026-11-18T12:00:00Z --until 2026-11-19)" = 0 ]
check "--since 2026-11-18T12:00:00+02:00 --until 2026-11-19: the 11:06Z one" [ "$(count --since 2026-11-18T12:00:00+02:00 --until 2026-11-19)" = 1 ]
check "--until 1795000005 (epoch seconds): one" [ "$(count --until 1795000005)" = 1 ]
check "--since yesterday: one or more" [ "$(count --since yesterday)" -ge 1 ]
check "--since today: at most --since yesterday's" [ "$(count --since today)" -le "$(count --since yesterday)" ]
check "--until now: both" [ "$(count --until now)" = 2 ]

finish
