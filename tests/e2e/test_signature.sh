#!/usr/bin/env bash
# Issue 4, acceptance 4: the crash signature and fingerprint (analyze/report/signature.c, rules/signature/).
#
#   same bug        cp-sigbug (-O2, no -g) crashed 10 times through the same caller, plus two rebuilds
#                   compiled here with gcc: one with an unrelated function added and changed (every
#                   address moves), one with -g added (DWARF names, inline/tail-call frames appear):
#                   all 12 bundles give ONE signature and ONE fingerprint
#   different bugs  the same executable, signal and top frame, reached from another caller
#                   (cp-sigbug b): a different signature AND fingerprint
#   --explain       for an abort() crash (cp-abort): raise and abort skipped, by their skip.txt rules;
#                   text and JSON
#   version         signature_info.version is the `version` line of rules/signature/*.txt
#   no lists        a data root without rules/signature: signature null, signature_info.error says why
source "$(dirname "$0")/../lib.sh"
PY=${CP_PYTHON:-/usr/bin/python3}
CC=${CC:-gcc}
[ -x "$CP_BIN/cp-sigbug" ] || { echo "SKIP: cp-sigbug not built"; exit 77; }
command -v "$CC" >/dev/null || { echo "SKIP: no $CC"; exit 77; }
export CRASHPACK_DATA_DIR=$CP_SRC
cp_setup
cp_install

SRC=$CP_SRC/fixtures/programs/cp-sigbug.c
FLAGS="-O2 -Wall -Wextra -Werror -D_GNU_SOURCE"
mkdir -p "$T/variant" "$T/debug"
# the module basename stays cp-sigbug: it is part of the fingerprint, as it is of a real rebuild
$CC $FLAGS -g0 -DCP_SIGBUG_VARIANT -o "$T/variant/cp-sigbug" "$SRC" || die "variant build failed"
$CC $FLAGS -g -o "$T/debug/cp-sigbug" "$SRC" || die "-g build failed"

# analyze NAME BUNDLE [args]: crashpack analyze --json > $T/NAME.json; fails the test on exit != 0
analyze() {
    local name=$1 b=$2 rc=0
    shift 2
    timeout 300 "$CP_BIN/crashpack" analyze --json "$@" "$b" > "$T/$name.json" 2> "$T/$name.err" || rc=$?
    [ "$rc" = 0 ] || { fail "$name: analyze exited $rc: $(head -c 500 "$T/$name.err")"; return 1; }
}
# crash NAME CMD...: crashes CMD, analyzes its bundle into $T/NAME.json
crash() {
    local name=$1 pid b
    shift
    pid=$(cp_crash "$@")
    b=$(cp_bundle_for "$pid" 60) || { fail "$name: no bundle"; return 1; }
    echo "$b" > "$T/$name.bundle"
    analyze "$name" "$b"
}
jget() { "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }

SAME=()
for i in $(seq 1 10); do
    crash "same$i" "$CP_BIN/cp-sigbug" a && SAME+=("same$i")
done
crash variant "$T/variant/cp-sigbug" a && SAME+=(variant)
crash debug "$T/debug/cp-sigbug" a && SAME+=(debug)
crash other "$CP_BIN/cp-sigbug" b

check "12 bundles of the same bug analyzed" [ "${#SAME[@]}" = 12 ]
sigs=$(for n in "${SAME[@]}"; do jget "$T/$n.json" 'd["signature"]'; done | sort -u)
fps=$(for n in "${SAME[@]}"; do jget "$T/$n.json" 'd["fingerprint"]'; done | sort -u)
echo "same bug: signature(s): $sigs"
echo "same bug: fingerprint(s): $fps"
check "same bug: one signature over 10 crashes and 2 rebuilds" [ "$(echo "$sigs" | wc -l)" = 1 ]
check "same bug: one fingerprint over 10 crashes and 2 rebuilds" [ "$(echo "$fps" | wc -l)" = 1 ]
check "same bug: the signature is the crash kind and the frames" \
    [ "$sigs" = "SIGSEGV (null) | store_slot | ingest_batch | main" ]
check "same bug: the fingerprint is 16 hex digits" \
    bash -c '[[ $1 =~ ^[0-9a-f]{16}$ ]]' _ "$fps"
check "same bug: crash_kind segv_null" [ "$(jget "$T/same1.json" 'd["crash_kind"]')" = segv_null ]

# the rebuilds really differ where it would matter: addresses, names, debug info
top_off() { jget "$1" '[f["module_offset"] for t in d["threads"] if t["crashed"] for f in t["frames"] if not f["inline"]][:2]'; }
check "the variant rebuild moved the crashing code" [ "$(top_off "$T/same1.json")" != "$(top_off "$T/variant.json")" ]
check "the pcs differ between crashes (ASLR)" \
    [ "$(jget "$T/same1.json" '[t for t in d["threads"] if t["crashed"]][0]["frames"][1]["pc"]')" != \
      "$(jget "$T/same2.json" '[t for t in d["threads"] if t["crashed"]][0]["frames"][1]["pc"]')" ]
check "the -O2 build has no line info, the -g rebuild has" \
    "$PY" -c '
import json, sys
def top(p):
    d = json.load(open(p))
    return [f for t in d["threads"] if t["crashed"] for f in t["frames"] if not f["inline"]][0]
a, b = top(sys.argv[1]), top(sys.argv[2])
sys.exit(0 if a["line"] is None and b["line"] and b["file"].endswith("cp-sigbug.c") else 1)' \
    "$T/same1.json" "$T/debug.json"
check "the symbol table names the clone (store_slot.constprop...), the signature does not" \
    "$PY" -c '
import json, sys
d = json.load(open(sys.argv[1]))
f = [f for t in d["threads"] if t["crashed"] for f in t["frames"]][0]
sys.exit(0 if (f.get("symbol") or "").startswith("store_slot.") and "store_slot." not in d["signature"] else 1)' \
    "$T/same1.json"

# two bugs: same exe, signal and top frame, different callers
if [ -f "$T/other.json" ]; then
    osig=$(jget "$T/other.json" 'd["signature"]')
    ofp=$(jget "$T/other.json" 'd["fingerprint"]')
    echo "other caller: $osig $ofp"
    check "different callers: the same top frame" \
        [ "$(jget "$T/other.json" 'd["signature_info"]["frames"][0]')" = store_slot ]
    check "different callers: a different signature" [ "$osig" != "$sigs" ]
    check "different callers: a different fingerprint" [ "$ofp" != "$fps" ]
    check "different callers: the caller is in the signature" \
        [ "$osig" = "SIGSEGV (null) | store_slot | replay_log | main" ]
fi

# version: the one the data files declare
ver=$(awk '$1 == "version" { print $2; exit }' "$CP_SRC/rules/signature/skip.txt")
check "skip.txt declares a version" [ -n "$ver" ]
check "signature_info.version is the data files' version ($ver)" \
    [ "$(jget "$T/same1.json" 'd["signature_info"]["version"]')" = "$ver" ]
check "no explain[] without --explain" [ "$(jget "$T/same1.json" '"explain" in d["signature_info"]')" = False ]

# --explain on an abort() crash
if crash abort "$CP_BIN/cp-abort"; then
    B=$(cat "$T/abort.bundle")
    analyze abortx "$B" --explain
    check "abort: crash_kind abort, signature without the abort machinery" \
        [ "$(jget "$T/abortx.json" 'd["crash_kind"] + " / " + d["signature"]')" = \
          "abort / abort | do_abort_leaf | do_abort_mid | main" ]
    check "abort --json --explain: raise and abort skipped by skip.txt rules" "$PY" -c '
import json, sys
d = json.load(open(sys.argv[1]))
ex = d["signature_info"]["explain"]
by = {e["name"].split("!")[1]: e for e in ex}
ok = all(by[n]["action"] == "skip" and by[n]["rule"].startswith("skip.txt:") and by[n]["rule"].endswith(" " + n)
         for n in ("raise", "abort"))
ok = ok and by["do_abort_leaf"]["action"] == "keep" and by["main"]["action"] == "keep"
ok = ok and by["__libc_start_call_main"]["action"] in ("stop", "unused")
ok = ok and len(ex) == len([t for t in d["threads"] if t["crashed"]][0]["frames"])
sys.exit(0 if ok else 1)' "$T/abortx.json"
    "$CP_BIN/crashpack" analyze --explain "$B" > "$T/abort.txt" 2>&1
    check "abort --explain text: the signature line" grep -q '^signature abort | do_abort_leaf | do_abort_mid | main$' "$T/abort.txt"
    check "abort --explain text: raise skipped, with its rule" \
        grep -Eq '^ +#[0-9]+ +skip +libc\.so!raise +\(skip\.txt:[0-9]+ raise\)$' "$T/abort.txt"
    check "abort --explain text: abort skipped, with its rule" \
        grep -Eq '^ +#[0-9]+ +skip +libc\.so!abort +\(skip\.txt:[0-9]+ abort\)$' "$T/abort.txt"
    "$CP_BIN/crashpack" analyze "$B" > "$T/abort-plain.txt" 2>&1
    check "text without --explain: signature and fingerprint lines, no rules" bash -c \
        'grep -q "^signature abort |" "$1" && grep -Eq "^ +fingerprint [0-9a-f]{16} \(abort; signature lists version " "$1" && ! grep -q "skip.txt" "$1"' _ "$T/abort-plain.txt"
fi

# lists missing: no signature, and why
mkdir -p "$T/emptydata/rules"
CRASHPACK_DATA_DIR=$T/emptydata "$CP_BIN/crashpack" analyze --json "$(cat "$T/same1.bundle")" > "$T/nolists.json" 2>/dev/null
check "no lists: signature and fingerprint null, crash_kind still set, the error names the file" "$PY" -c '
import json, sys
d = json.load(open(sys.argv[1]))
i = d["signature_info"]
sys.exit(0 if d["signature"] is None and d["fingerprint"] is None and d["crash_kind"] == "segv_null"
         and "stop.txt" in i["error"] and i["version"] is None else 1)' "$T/nolists.json"
finish
