#!/usr/bin/env bash
# Acceptance (issue 24 item 3 and acceptance 3: the team teaches it), as root on real bundles of
# cp-abort captured through the real handler: a crash is added and its group resolved (`db resolve`
# with a cause, a category and a ticket); `db groups` says resolved; a new crash of the same kind
# then shows the resolution FIRST, with the resolver's text and ticket, in `analyze` (text and
# --json, whose `resolution` validates against docs/report-schema.json), `report` (Markdown) and
# `db show`, and makes the group regressed. The resolutions travel with `rules export`/`import`
# into a fresh knowledge base (an older import never replaces a newer one; it says what it did).
# A bad GROUP exits 3 with one line; a user resolving the node's knowledge base is refused with
# one line, and may resolve in a knowledge base of their own (--db); `db unresolve` makes the
# group new again.
source "$(dirname "$0")/../lib.sh"
cp_setup   # a new $T, the test lock, core_pattern restored at exit
cp_install
CP="$CP_BIN/crashpack"
KB=$T/team.sqlite
CAUSE="Stale libfoo on the training image: rebuilt and redeployed"
TICKET="https://tracker.example/CRASH-1234"

# run NAME CMD...: stdout in $T/NAME.out, stderr in $T/NAME.err, the exit code in $RC
run() { local n=$1; shift; "$@" > "$T/$n.out" 2> "$T/$n.err"; RC=$?; }

# ---- a first crash, added; its group is new ----
pid=$(cp_crash "$CP_BIN/cp-abort")
b1=$(cp_bundle_for "$pid") || die "no bundle for cp-abort"
"$CP" db add --db "$KB" "$b1" > "$T/add1.out" 2>&1
check "the first crash is added" grep -q '^added crash 1 from ' "$T/add1.out"
"$CP" db groups --db "$KB" --json > "$T/g0.json"
fp=$(json "$T/g0.json" 'd["groups"][0]["fingerprint"]')
check "db groups: one group, new, no resolution" \
    [ "$(json "$T/g0.json" 'd["count"], d["groups"][0]["status"], d["groups"][0]["resolution"]')" = "(1, 'new', None)" ]

# ---- bad GROUP, missing --cause ----
run badgroup "$CP" db resolve --db "$KB" no-such-group --cause x
check "db resolve of an unknown group: exit 3, one line, nothing on stdout" \
    bash -c "[ $RC = 3 ] && [ ! -s '$T/badgroup.out' ] && [ \$(wc -l < '$T/badgroup.err') = 1 ] && grep -q 'no group or crash .no-such-group.' '$T/badgroup.err'"
run badid "$CP" db resolve --db "$KB" 99 --cause x
check "db resolve of an unknown crash id: exit 3, one line" bash -c "[ $RC = 3 ] && [ \$(wc -l < '$T/badid.err') = 1 ]"
run nocause "$CP" db resolve --db "$KB" 1
check "db resolve without --cause: exit 2, one line" bash -c "[ $RC = 2 ] && [ \$(wc -l < '$T/nocause.err') = 1 ]"

# ---- resolve the group by a crash id ----
run resolve "$CP" db resolve --db "$KB" 1 --cause "$CAUSE" --category build --ticket "$TICKET"
check "db resolve 1: exit 0, resolves crash 1's group" \
    bash -c "[ $RC = 0 ] && grep -qxF 'resolved group $fp: $CAUSE ($TICKET)' '$T/resolve.out'"
"$CP" db groups --db "$KB" > "$T/g1.txt"
cat "$T/g1.txt"
check "db groups: the group is resolved, its resolution shown" \
    bash -c "grep -Eq '^1 +resolved .*$fp' '$T/g1.txt' && grep -qF 'resolution: $CAUSE ($TICKET)' '$T/g1.txt'"
"$CP" db groups --db "$KB" --json > "$T/g1.json"
check "db groups --json: status resolved, the cause, category, ticket, resolver" \
    [ "$(json "$T/g1.json" '[(g["status"], r["cause"], r["category"], r["ticket"], r["resolved_by"]["uid"]) for g in d["groups"] for r in [g["resolution"]]][0]')" \
      = "('resolved', '$CAUSE', 'build', '$TICKET', 0)" ]
"$CP" analyze --db "$KB" "$b1" > "$T/an1.txt" 2>/dev/null
check "analyze of the resolved crash itself: RESOLVED first, with the cause" \
    bash -c "first_line() { grep -m1 -v '^\$' \"\$1\"; }; first_line '$T/an1.txt' | grep -qxE 'RESOLVED +$CAUSE'"

# ---- a new crash of the same kind, after the resolution ----
sleep 1.1 # crash times are kept to the second
pid=$(cp_crash "$CP_BIN/cp-abort")
b2=$(cp_bundle_for "$pid") || die "no bundle for the second cp-abort"

# analyze (text): the resolution at the top, before the diagnosis
"$CP" analyze --db "$KB" "$b2" > "$T/an2.txt" 2> "$T/an2.err"
sed -n 1,8p "$T/an2.txt"
check "analyze: the first line is the resolution (regressed: the crash came after it), with the cause" \
    bash -c "first_line() { grep -m1 -v '^\$' \"\$1\"; }; first_line '$T/an2.txt' | grep -qxE 'REGRESSED +$CAUSE'"
check "analyze: then its ticket and who resolved it" \
    bash -c "sed -n 2p '$T/an2.txt' | grep -qxE 'ticket +$TICKET' && sed -n 4p '$T/an2.txt' | grep -qE '^resolved +.* by root \(uid 0\); matched by fingerprint'"
check "analyze: the resolution comes before the diagnosis" python3 - "$T/an2.txt" "$CAUSE" <<'PY'
import sys
t = open(sys.argv[1]).read()
i = t.find(sys.argv[2]); j = t.find("\ndiagnosis")
sys.exit(0 if 0 <= i and (j < 0 or i < j) else 1)
PY

# analyze --json: the report's resolution object, valid against the report schema
"$CP" analyze --db "$KB" --json "$b2" > "$T/an2.json" 2>/dev/null
check "analyze --json: resolution {status regressed, match fingerprint, the cause, ticket, category}" \
    [ "$(json "$T/an2.json" '[(r["status"], r["match"], r["fingerprint"] == d["fingerprint"] == "'"$fp"'", r["cause"], r["ticket"], r["category"]) for r in [d["resolution"]]][0]')" \
      = "('regressed', 'fingerprint', True, '$CAUSE', '$TICKET', 'build')" ]
if python3 -c 'import jsonschema' 2>/dev/null; then
    check "analyze --json: the report with its resolution validates against docs/report-schema.json" \
        python3 - "$CP_SRC/docs/report-schema.json" "$T/an2.json" <<'PY'
import json, sys, jsonschema
jsonschema.Draft202012Validator(json.load(open(sys.argv[1]))).validate(json.load(open(sys.argv[2])))
PY
else
    echo "note: python3-jsonschema is missing; the schema check is skipped"
fi
"$CP" analyze --json "$b2" > "$T/an2-nokb.json" 2>/dev/null # $CRASHPACK_DB: the test's own, empty
check "analyze --json without that knowledge base: resolution null" [ "$(json "$T/an2-nokb.json" 'd.get("resolution", "absent")')" = None ]

# report (Markdown): the resolution at the top, under the title
"$CP" report --db "$KB" "$b2" > "$T/an2.md" 2>/dev/null
sed -n 1,6p "$T/an2.md"
check "report: right under the title, the resolution with its cause and ticket" \
    bash -c "sed -n 1p '$T/an2.md' | grep -q '^# Crash report' && sed -n 3p '$T/an2.md' | grep -qF '> **Regressed** (resolved before): ' && sed -n 3,4p '$T/an2.md' | grep -qF 'CRASH-1234' && sed -n 3p '$T/an2.md' | grep -qF 'rebuilt and redeployed'"
check "report: before the summary table and the diagnoses" python3 - "$T/an2.md" <<'PY'
import sys
t = open(sys.argv[1]).read()
i = t.find("**Regressed**")
sys.exit(0 if 0 <= i < t.find("| | |") and i < t.find("\n## ") else 1)
PY

# db add and db show: the group regressed, the resolution first
"$CP" db add --db "$KB" "$b2" > "$T/add2.out" 2>&1
check "the second crash is added" grep -q '^added crash 2 from ' "$T/add2.out"
"$CP" db groups --db "$KB" > "$T/g2.txt"
check "db groups: the group is regressed now (2 crashes)" grep -Eq "^2 +regressed .*$fp" "$T/g2.txt"
"$CP" db show --db "$KB" 2 > "$T/show2.txt"
sed -n 1,5p "$T/show2.txt"
check "db show 2: the resolution first, regressed, with its cause and ticket" \
    bash -c "sed -n 1p '$T/show2.txt' | grep -qxE 'REGRESSED +$CAUSE' && sed -n 2p '$T/show2.txt' | grep -qxE 'ticket +$TICKET'"
"$CP" db show --db "$KB" 2 --json > "$T/show2.json"
check "db show --json: resolution (regressed), the key right after format" \
    [ "$(json "$T/show2.json" 'list(d)[:2], d["resolution"]["status"], d["resolution"]["cause"], d["resolution"]["ticket"]')" \
      = "(['format', 'resolution'], 'regressed', '$CAUSE', '$TICKET')" ]
check "db show 1 (the crash before the resolution) says regressed too: the group's status" \
    bash -c "'$CP' db show --db '$KB' 1 | sed -n 1p | grep -qxE 'REGRESSED +$CAUSE'"

# ---- export / import into a fresh knowledge base ----
"$CP" rules export --db "$KB" "$T/team.json"
check "rules export: the resolution in resolutions[]" \
    [ "$(json "$T/team.json" 'd["format"], [(r["fingerprint"], r["cause"], r["ticket"], r["category"]) for r in d["resolutions"]]')" \
      = "('crashpack-rules-export/1', [('$fp', '$CAUSE', '$TICKET', 'build')])" ]
FRESH=$T/fresh.sqlite
run imp1 "$CP" rules import --db "$FRESH" "$T/team.json"
check "rules import into a fresh knowledge base: added" bash -c "[ $RC = 0 ] && grep -qx 'added resolution $fp' '$T/imp1.out'"
run imp2 "$CP" rules import --db "$FRESH" "$T/team.json"
check "the same file again: unchanged" bash -c "[ $RC = 0 ] && grep -qx 'unchanged resolution $fp (the same resolution)' '$T/imp2.out'"
"$CP" analyze --db "$FRESH" --json "$b2" > "$T/fresh.json" 2>/dev/null
check "analyze with the fresh knowledge base: the imported resolution, its text and ticket" \
    [ "$(json "$T/fresh.json" '[(r["cause"], r["ticket"], r["origin"] == "import: '"$T"'/team.json") for r in [d["resolution"]]][0]')" = "('$CAUSE', '$TICKET', True)" ]
python3 - "$T/team.json" "$T/older.json" "$T/newer.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
r = d["resolutions"][0]
old = dict(r, cause="an older guess", resolved=r["resolved"] - 86400, ticket=None)
new = dict(r, cause="the real cause, found later", resolved=r["resolved"] + 60)
json.dump(dict(d, resolutions=[old]), open(sys.argv[2], "w"))
json.dump(dict(d, resolutions=[new]), open(sys.argv[3], "w"))
PY
run older "$CP" rules import --db "$FRESH" "$T/older.json"
check "an older resolution is not imported over a newer one, and it says so" \
    bash -c "[ $RC = 0 ] && grep -q '^kept resolution $fp (the stored one is newer: resolved ' '$T/older.out'"
"$CP" rules export --db "$FRESH" "$T/fresh-export.json"
check "... the stored one stays" [ "$(json "$T/fresh-export.json" 'd["resolutions"][0]["cause"]')" = "$CAUSE" ]
run newer "$CP" rules import --db "$FRESH" "$T/newer.json"
check "a newer one replaces it, and it says so" \
    bash -c "[ $RC = 0 ] && grep -q '^replaced resolution $fp (newer: resolved ' '$T/newer.out'"

# ---- a user: the node's knowledge base is root's ----
NOBODY=65534
as_nobody() { setpriv --reuid $NOBODY --regid $NOBODY --clear-groups env -u CRASHPACK_DB HOME=/nonexistent "$@"; }
run user as_nobody "$CP" db resolve 1 --cause x
check "a user's db resolve without --db: refused, exit 1, one line naming write access and root" \
    bash -c "[ $RC = 1 ] && [ ! -s '$T/user.out' ] && [ \$(wc -l < '$T/user.err') = 1 ] && grep -q \"needs write access to the node's knowledge base (root)\" '$T/user.err'"
mkdir "$T/u" && cp "$KB" "$T/u/own.sqlite" && chown -R $NOBODY:$NOBODY "$T/u"
run userown as_nobody "$CP" db resolve --db "$T/u/own.sqlite" "$fp" --cause "mine" --json
check "a user's db resolve --db of their own knowledge base: done, by that user" \
    bash -c "[ $RC = 0 ] && [ \"\$(json '$T/userown.out' 'd[\"action\"], d[\"resolution\"][\"cause\"], d[\"resolution\"][\"resolved_by\"][\"uid\"]')\" = \"('resolved', 'mine', $NOBODY)\" ]"

# ---- unresolve ----
run unres "$CP" db unresolve --db "$KB" "$fp"
check "db unresolve: the group is new again" \
    bash -c "[ $RC = 0 ] && grep -qx 'unresolved group $fp: it is new again' '$T/unres.out' && '$CP' db groups --db '$KB' | grep -Eq '^2 +new .*$fp'"
run unres2 "$CP" db resolve --db "$KB" "$fp" --clear
check "db resolve --clear with none: nothing changed" \
    bash -c "[ $RC = 0 ] && grep -qx 'group $fp had no resolution: nothing changed' '$T/unres2.out'"
"$CP" analyze --db "$KB" --json "$b2" > "$T/an3.json" 2>/dev/null
check "analyze after unresolve: no resolution" [ "$(json "$T/an3.json" 'd["resolution"]')" = None ]
finish
