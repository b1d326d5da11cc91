#!/usr/bin/env bash
# Acceptance (issue 5, report + knowledge base on real bundles):
#  1. `report` of the Xid 79 report (fixtures/reports) contains the diagnosis title, the Xid line, the
#     crashed thread's top frame and the checkpoint advice, and the knowledge-base count after
#     `db add`;
#  2. through the real kernel path: `analyze` prints a diagnosis section; `db add` of the same bundle
#     twice keeps one record; `report --slim` writes a bundle much smaller than the original that
#     analyzes to the same signature, crashed-thread frames and diagnoses (the libtorch crash too,
#     when python3-torch is installed: its slim bundle is < 5 MB).
source "$(dirname "$0")/../lib.sh"
CP="$CP_BIN/crashpack"
R="$CP_SRC/fixtures/reports"

cp_setup
export CRASHPACK_DB="$T/kb.sqlite"

# 1. Markdown content, from a saved report
"$CP" report --from-json "$R/xid79-nccl-timeout.json" > "$T/x.md"
check "report: the top diagnosis title" grep -q '^# Crash report: .* GPU fell off the bus (Xid 79)' "$T/x.md"
check "report: the diagnosis is listed with its evidence" grep -q "^- \`Xid 79 on 00000000:3b:00.0 (this process's GPU)" "$T/x.md"
check "report: the Xid line verbatim" grep -qx "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus." "$T/x.md"
check "report: the crashed thread's top frame" grep -Eq '^#0 +(0x[0-9a-f]+ +)?raise \(libc.so.6\)' "$T/x.md"
check "report: the checkpoint advice names the newest valid checkpoint" \
    grep -q 'do not resume from `/ckpt/step42000.pt`; resume from `/ckpt/step41000.pt`' "$T/x.md"
check "report: the NCCL timeout is marked a consequence" grep -q 'likely a consequence of `xid-79-fallen-off-bus`' "$T/x.md"
check "report: not in the knowledge base yet" grep -q 'has no record\|has not seen this fingerprint' "$T/x.md"
"$CP" db add --report-json "$R/xid79-nccl-timeout.json" > /dev/null
"$CP" report --from-json "$R/xid79-nccl-timeout.json" > "$T/x2.md"
check "report: the knowledge-base count" grep -q 'has seen this fingerprint \*\*1 time\*\* on 1 host' "$T/x2.md"

# 2. real bundles
cp_install
same() { # ORIG.json SLIM.json -> signature, crashed-thread functions, diagnoses equal
    python3 - "$1" "$2" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
def key(r):
    th = [t for t in r["threads"] if t.get("crashed")]
    return (r.get("signature"), r.get("fingerprint"),
            [f.get("function") for f in (th[0]["frames"] if th else [])],
            [(d["rule"], d.get("consequence_of")) for d in r["diagnoses"]])
ka, kb = key(a), key(b)
print("orig:", ka); print("slim:", kb)
sys.exit(0 if ka == kb and ka[2] else 1)
PY
}
slim_case() { # NAME BUNDLE MAXBYTES
    local name=$1 b=$2 max=$3
    "$CP" analyze "$b" > "$T/$name.txt"
    check "$name: analyze prints a diagnosis section" grep -Eq '^diagnosis ' "$T/$name.txt"
    "$CP" db add "$b" > "$T/$name.add1"; "$CP" db add "$b" > "$T/$name.add2"
    check "$name: db add twice keeps one record" bash -c "grep -q '^added crash' '$T/$name.add1' && grep -q '^updated crash' '$T/$name.add2'"
    "$CP" report "$b" --slim "$T/$name.slim.zst" > "$T/$name.md"
    check "$name: report --slim wrote a bundle" test -s "$T/$name.slim.zst"
    check "$name: the Markdown mentions the slim bundle" grep -q 'Attached: a slim bundle' "$T/$name.md"
    local os ss
    os=$(stat -c %s "$b"); ss=$(stat -c %s "$T/$name.slim.zst")
    echo "$name: original $os bytes, slim $ss bytes"
    check "$name: slim bundle is under $max bytes" [ "$ss" -lt "$max" ]
    check "$name: the slim bundle opens with plain tar" bash -c "tar --zstd -tf '$T/$name.slim.zst' | grep -qx core"
    "$CP" analyze --json "$b" > "$T/$name.orig.json"
    "$CP" analyze --json "$T/$name.slim.zst" > "$T/$name.slim.json"
    check "$name: slim analyzes to the same signature, frames and diagnoses" same "$T/$name.orig.json" "$T/$name.slim.json"
    check "$name: no secret value (CP_TEST_SECRET_TOKEN) in any member of the slim bundle" bash -c \
        "! tar --zstd -xOf '$T/$name.slim.zst' | grep -aq hunter2"
}
export CP_TEST_SECRET_TOKEN=hunter2
pid=$(cp_crash "$CP_BIN/cp-bigheap" 256)
b=$(cp_bundle_for "$pid") || die "no bundle for cp-bigheap"
slim_case bigheap "$b" $((4 * 1024 * 1024))
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    pid=$(cp_crash /usr/bin/python3 "$CP_SRC/fixtures/programs/torch_crash.py")
    b=$(cp_bundle_for "$pid" 120) || die "no bundle for the torch crash"
    slim_case torch "$b" $((5 * 1024 * 1024))
else
    echo "note: python3-torch not installed; the libtorch slim case is skipped"
fi

# issue 22 item 12: `report -o` and `rules export -o` as root never follow a link another user
# planted: the victim's 0600 file stays as it was, the output is a new regular file
victim=$(mktemp /tmp/cp-victim.XXXXXX); echo "victim's secret" > "$victim"; chmod 600 "$victim"
chown 65534:65534 "$victim"
drop=$(mktemp -d /tmp/cp-drop.XXXXXX); chmod 1777 "$drop"
setpriv --reuid 65534 --regid 65534 --clear-groups ln -s "$victim" "$drop/report.md"
setpriv --reuid 65534 --regid 65534 --clear-groups ln -s "$victim" "$drop/rules.json"
"$CP" report "$b" -o "$drop/report.md" > /dev/null 2>&1
"$CP" rules export --all -o "$drop/rules.json" > /dev/null 2>&1
check "report -o / rules export -o: the planted links' target is untouched" \
    bash -c "[ \"\$(cat '$victim')\" = \"victim's secret\" ]"
check "report -o into a sticky directory over another user's link: refused or a new file, never through the link" \
    bash -c "[ ! -L '$drop/report.md' ] || [ \"\$(readlink '$drop/report.md')\" = '$victim' ]"
out=$T/out-dir; mkdir -p "$out"; ln -s "$victim" "$out/r.md"
"$CP" report "$b" -o "$out/r.md" > /dev/null 2>&1
check "report -o over a link in its own directory replaces the link with the report" \
    bash -c "[ -f '$out/r.md' ] && [ ! -L '$out/r.md' ] && grep -q '^# Crash report' '$out/r.md' && [ \"\$(cat '$victim')\" = \"victim's secret\" ]"
check "no temporary is left beside the outputs" bash -c "! ls '$out' '$drop' | grep -q '\\.tmp\\.'"
rm -rf "$drop" "$victim"
finish
