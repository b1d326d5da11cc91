#!/usr/bin/env bash
# Issue 14, "the long tail, from real cases": every case of fixtures/cases/<class>/<id>.json (a quoted
# excerpt of real error output from a public thread, its source URL, the cause established there, the
# expected top diagnosis and the naive wrong answer) becomes a bundle: manifest.json with a death of
# kind exit (status 1) and the excerpt as output.txt, built with bundle_edit. `crashpack analyze
# --json` must rank the established cause first (expected_top: category, and rule where named) and
# must not rank the wrong answer first. The score is printed for the trained part and, separately,
# for the cases held out (held_out, chosen by sha1(id) mod 3 before the rules were written).
# CP_CASES_SCORE_ONLY=1: print the scores and exit 0 (measuring, not testing).
# No core_pattern, no root.
source "$(dirname "$0")/../lib.sh"
T=$(mktemp -d /tmp/cpcases.XXXXXX)
trap '[ -n "${CP_KEEP:-}" ] || rm -rf "$T"' EXIT
CP="$CP_BIN/crashpack"
EDIT="$CP_BIN/bundle_edit"
[ -x "$EDIT" ] || die "no $EDIT"
export CRASHPACK_DB="$T/kb.sqlite"   # no user rules: the built-ins only
CASES="$CP_SRC/fixtures/cases"

python3 - "$CASES" "$T" <<'PY' || die "cannot write the case members"
import json, os, sys, glob
src, T = sys.argv[1], sys.argv[2]
NOW = 1796156531
n = 0
for path in sorted(glob.glob(os.path.join(src, "*", "*.json"))):
    c = json.load(open(path))
    d = os.path.join(T, c["id"]); os.makedirs(d)
    death = c.get("death") or {"kind": "exit", "status": 1}
    m = {"format": "crashpack-manifest/1", "crashpack_version": "0.1.0",
         "host": {"hostname": "node1", "kernel": "6.1.0", "machine": "x86_64"},
         "time": NOW, "pid": 4000 + n, "uid": 1000, "gid": 1000, "exe": "/usr/bin/python3", "comm": "python3",
         "cmdline": ["/usr/bin/python3", "train.py"], "cwd": "/home/u", "cgroup": "/job1",
         "capture": {"mode": "meta", "trigger": "run"},
         "death": {"kind": death["kind"], "signal": death.get("signal"), "status": death.get("status"),
                   "trigger": "run", "reason": None, "identity": "reported", "reported_by_uid": 1000, "job": "job-1"}}
    json.dump(m, open(os.path.join(d, "manifest.json"), "w"))
    json.dump({"format": "crashpack-capture/1", "status": "ok", "mode": {"requested": "meta", "effective": "meta"},
               "steps": []}, open(os.path.join(d, "capture.json"), "w"))
    open(os.path.join(d, "output.txt"), "w").write(c["excerpt"])
    json.dump(c, open(os.path.join(d, "case.json"), "w"))
    n += 1
print(n)
PY

for d in "$T"/*/; do
    id=$(basename "$d")
    "$EDIT" - "$T/$id.zst" --put manifest.json "$d/manifest.json" --put capture.json "$d/capture.json" \
        --put output.txt "$d/output.txt" || die "bundle_edit $id"
    rc=0
    "$CP" analyze --json "$T/$id.zst" > "$d/report.json" 2> "$d/analyze.err" || rc=$?
    [ "$rc" -le 1 ] || fail "$id: analyze --json exits $rc: $(head -c 300 "$d/analyze.err")"
done

python3 - "$T" "${CP_CASES_SCORE_ONLY:-0}" <<'PY'
import json, os, sys, glob
T, score_only = sys.argv[1], sys.argv[2] == "1"
res = {False: [0, 0], True: [0, 0]}
fails = []
bycls = {}
for cj in sorted(glob.glob(os.path.join(T, "*", "case.json"))):
    c = json.load(open(cj))
    d = os.path.dirname(cj)
    try:
        r = json.load(open(os.path.join(d, "report.json")))
        diags = r.get("diagnoses") or []
    except Exception as e:
        diags, r = [], None
    top = diags[0] if diags else None
    exp, wrong = c["expected_top"], c["wrong_answer"]
    why = []
    if top is None:
        why.append("no diagnosis")
    else:
        if top.get("category") != exp["category"]:
            why.append("top category %s, want %s" % (top.get("category"), exp["category"]))
        if exp.get("rule") and top.get("rule") != exp["rule"]:
            why.append("top rule %s, want %s" % (top.get("rule"), exp["rule"]))
        if wrong.get("rule") and top.get("rule") == wrong["rule"]:
            why.append("the wrong answer %s is on top" % wrong["rule"])
        if wrong.get("category") and top.get("category") == wrong["category"]:
            why.append("the wrong answer's category %s is on top" % wrong["category"])
    ok = not why
    h = bool(c.get("held_out"))
    res[h][0] += ok; res[h][1] += 1
    b = bycls.setdefault(c["class"], [0, 0]); b[0] += ok; b[1] += 1
    tag = "held-out" if h else "trained"
    line = "%s %s [%s, %s]: top %s" % ("ok:" if ok else "MISS:", c["id"], c["class"], tag,
                                       (top or {}).get("rule"))
    print(line if ok else line + " -- " + "; ".join(why))
    if not ok: fails.append(c["id"])
for k, (a, n) in sorted(bycls.items()):
    print("class %-32s %d/%d" % (k, a, n))
print("SCORE trained: %d/%d" % tuple(res[False]))
print("SCORE held-out: %d/%d" % tuple(res[True]))
print("SCORE all: %d/%d" % (res[False][0] + res[True][0], res[False][1] + res[True][1]))
if fails and not score_only:
    print("FAIL: %d case(s) miss: %s" % (len(fails), " ".join(fails)), file=sys.stderr)
    sys.exit(1)
PY
[ $? -eq 0 ] || fail "real cases: see the MISS lines above"
finish
