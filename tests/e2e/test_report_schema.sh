#!/usr/bin/env bash
# The report's JSON contract (docs/report-schema.json, crashpack-report/1), and the terminal policy.
#
#   schema    every report this test can produce validates: the fixture reports
#             (fixtures/reports/*.json), and `crashpack analyze --json` of bundles captured through
#             the real handler - a C crash (cp-segv-threads), a C++ throw, an abort, a Python crash,
#             a snap of a live process - which also have every part $defs/analyzed lists
#   terminal  a bundle whose manifest carries ESC and a C1 control (U+009B, CSI) in exe, comm and
#             cmdline: `analyze` (text), `db add`, `db list`, `db show` print them escaped, never raw
#             (common/utf8.c cp_text_put); the JSON keeps them as valid JSON strings
source "$(dirname "$0")/../lib.sh"
cp_setup
cp_install
CP=$CP_BIN/crashpack
SCHEMA=$CP_SRC/docs/report-schema.json
python3 -c 'import jsonschema' 2>/dev/null || { echo "SKIP: python3-jsonschema is not installed"; exit 77; }

# validate KIND FILE...: KIND fixture (the schema) or analyzed (the schema and $defs/analyzed)
cat > "$T/validate.py" <<'EOF'
import json, sys
import jsonschema
schema = json.load(open(sys.argv[1]))
jsonschema.Draft202012Validator.check_schema(schema)
v = jsonschema.Draft202012Validator(schema)
a = jsonschema.Draft202012Validator(schema["$defs"]["analyzed"])
bad = 0
for f in sys.argv[3:]:
    r = json.load(open(f))
    errs = list(v.iter_errors(r)) + (list(a.iter_errors(r)) if sys.argv[2] == "analyzed" else [])
    for e in errs[:5]:
        print("%s: /%s: %s" % (f, "/".join(map(str, e.absolute_path)), e.message[:200]))
    bad += bool(errs)
sys.exit(1 if bad else 0)
EOF
validate() { python3 "$T/validate.py" "$SCHEMA" "$@"; }

# ---- schema: the fixture reports ----
check "schema: docs/report-schema.json is a valid JSON Schema; the fixture reports validate" \
    validate fixture "$CP_SRC"/fixtures/reports/*.json

# ---- schema: reports of real captures ----
analyze_one() { # NAME BUNDLE: the report validates
    local name=$1 b=$2 rc
    "$CP" analyze --json "$b" > "$T/$name.json" 2> "$T/$name.err"
    rc=$?
    check "$name: analyze exits 0 or 1 (got $rc)" [ "$rc" -le 1 ]
    check "$name: the report validates against docs/report-schema.json" validate analyzed "$T/$name.json"
}
for prog in cp-segv-threads cp-cxx-throw cp-abort; do
    pid=$(cp_crash "$CP_BIN/$prog")
    B=$(cp_bundle_for "$pid" 60) || { fail "$prog: no bundle"; continue; }
    analyze_one "$prog" "$B"
done
PY=${CP_PYTHON:-/usr/bin/python3}
pid=$(cp_crash "$PY" -c 'import ctypes
def inner(): ctypes.string_at(0)
inner()')
if B=$(cp_bundle_for "$pid" 120); then analyze_one python "$B"; else fail "python: no bundle"; fi
"$CP_BIN/cp-hang8" > "$T/hang8.out" 2>&1 &
hpid=$!
for ((i = 0; i < 300; i++)); do grep -q '^ready' "$T/hang8.out" 2>/dev/null && break; sleep 0.1; done
if "$CP" snap -c "$T/conf" --json "$hpid" > "$T/snap.out" 2> "$T/snap.err"; then
    analyze_one snap "$(json "$T/snap.out" 'd["bundle"]["path"]')"
    check "snap: crash_kind is hang" [ "$(json "$T/snap.json" 'd["crash_kind"]')" = hang ]
else
    fail "snap of cp-hang8 failed: $(cat "$T/snap.err")"
fi
kill "$hpid" 2>/dev/null; wait "$hpid" 2>/dev/null
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["process"]["signal"]["numbr"]=d["process"]["signal"].pop("number"); json.dump(d,open(sys.argv[2],"w"))' \
    "$T/cp-abort.json" "$T/renamed.json"
invalid() { [ -s "$2" ] && ! validate "$@" > /dev/null 2>&1; }
check "schema: a renamed field fails (the test itself)" invalid analyzed "$T/renamed.json"

# ---- terminal: ESC and C1 controls from a bundle never reach the terminal raw ----
pid=$(cp_crash "$CP_BIN/cp-abort")
B=$(cp_bundle_for "$pid" 60) || die "cp-abort: no bundle"
cp_member "$B" manifest.json > "$T/manifest.json"
python3 - "$T/manifest.json" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
evil = "evil\x1b]0;pwned\x07\x1b[31m\u009b31m"
m["exe"] = "/tmp/" + evil
m["comm"] = evil[:15]
m["cmdline"] = [m["exe"], "--arg=" + evil]
m.setdefault("host", {})["hostname"] = "host\x1b[2J" + "\u009b2J"
json.dump(m, open(sys.argv[1], "w"))
EOF
"$CP_BIN/bundle_edit" "$B" "$T/evil.zst" --put manifest.json "$T/manifest.json" || die "bundle_edit"
# noraw.py FILE: exit 0 when FILE has no raw ESC and no C1 control (UTF-8 C2 80..C2 9F) in it
cat > "$T/noraw.py" <<'EOF'
import re, sys
sys.exit(1 if re.search(rb"\x1b|\xc2[\x80-\x9f]", open(sys.argv[1], "rb").read()) else 0)
EOF
"$CP" analyze "$T/evil.zst" > "$T/evil.txt" 2>&1
check "terminal: analyze text shows the exe" grep -q 'evil' "$T/evil.txt"
check "terminal: analyze text has no raw ESC or C1 control" python3 "$T/noraw.py" "$T/evil.txt"
check "terminal: the ESC and the C1 control are shown escaped" grep -qF 'evil\x1b]0;pwned\x07\x1b[31m\u009b31m' "$T/evil.txt"
"$CP" analyze --json "$T/evil.zst" > "$T/evil.json" 2>/dev/null
check "terminal: the JSON report keeps the string (valid JSON, \\u escapes)" \
    [ "$(json "$T/evil.json" 'd["process"]["exe"] == "/tmp/evil\x1b]0;pwned\x07\x1b[31m\u009b31m"')" = True ]
export CRASHPACK_DB=$T/kb.sqlite
"$CP" db add "$T/evil.zst" > "$T/evil-add.txt" 2>&1
check "terminal: db add stores the bundle" grep -q '^added crash 1' "$T/evil-add.txt"
"$CP" db list > "$T/evil-list.txt" 2>&1
"$CP" db show 1 > "$T/evil-show.txt" 2>&1
"$CP" db search evil > "$T/evil-search.txt" 2>&1
for f in evil-add evil-list evil-show evil-search; do
    check "terminal: db ${f#evil-} output has no raw ESC or C1 control" python3 "$T/noraw.py" "$T/$f.txt"
done
check "terminal: db show prints the exe escaped" grep -qF 'evil\x1b]0;pwned\x07\x1b[31m\u009b31m' "$T/evil-show.txt"
check "terminal: db list prints the host escaped" grep -qF 'host\x1b[2J' "$T/evil-list.txt"

# ---- schema: a report with a resolution (`db resolve`; the history stage reads it) ----
"$CP" db resolve 1 --cause "a known cause" --ticket https://t.example/1 > /dev/null
"$CP" analyze --json "$T/evil.zst" > "$T/resolved.json" 2>/dev/null
check "schema: a report with a resolution validates" validate analyzed "$T/resolved.json"
check "  its resolution: the cause, matched by fingerprint" \
    [ "$(json "$T/resolved.json" 'd["resolution"]["cause"], d["resolution"]["match"]')" = "('a known cause', 'fingerprint')" ]
finish
