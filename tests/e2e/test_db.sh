#!/usr/bin/env bash
# Acceptance (issue 5, knowledge base): `db jobs` on 8 crashes of one job (one rank with an own-GPU
# Xid 79, seven NCCL timeouts) names the Xid rank as the first failure and the others as its
# consequences, even when a victim's crash was captured first; list/show/groups/search/stats answer
# from the stored crashes; re-adding is idempotent; `rules add --from-crash` drafts a rule that
# passes `rules test` once added. (Migration and concurrent writers: unit/test_kb.)
# Knowledge base never loses a better record (as root, on a real bundle of cp-abort): `db add` of a
# cut-short copy (head -c) after the full bundle keeps the full record and lists both paths; the
# reverse order ends with the full one; a forged bundle (the same crash, another core) replaces
# nothing; a corrupt file and a bundle cut inside its manifest fail (exit 1), change nothing, and
# are recorded; every add's path, hash, user and outcome is listed by `db show`.
source "$(dirname "$0")/../lib.sh"
T=$(mktemp -d /tmp/cpd.XXXXXX)
trap 'rm -rf "$T"' EXIT
CP="$CP_BIN/crashpack"
export CRASHPACK_DB="$T/kb.sqlite"

python3 - "$CP_SRC/fixtures/reports/xid79-nccl-timeout.json" "$T/job.json" <<'PY'
import json, sys, copy
base = json.load(open(sys.argv[1]))
out = []
for rank in range(8):
    r = copy.deepcopy(base)
    r["process"]["pid"] = 2000 + rank
    r["process"]["crashed_tid"] = 2100 + rank
    r["process"]["env"] = {"SLURM_JOB_ID": "4242", "RANK": str(rank), "LOCAL_RANK": str(rank % 4)}
    r["host"]["hostname"] = "node%02d" % (7 + rank // 4)
    r["fingerprint"] = "fp-nccl-timeout"
    r["signature"] = "SIGABRT | c10d::ProcessGroupNCCL::watchdogHandler | start_thread"
    if rank == 3:
        r["host"]["time"] = 1795000010                   # the Xid rank's crash
        r["fingerprint"] = "fp-xid79"
    else:
        r["gpu"]["xid"] = []                              # its GPU is healthy
        r["checkpoint"] = {"path": None, "valid": None, "reason": "none"}
        # rank 0's crash was captured before rank 3's: the ranking must not be by time alone
        r["host"]["time"] = 1795000000 if rank == 0 else 1795001800 + rank
    out.append(r)
json.dump(out, open(sys.argv[2], "w"))
PY
"$CP" db add --report-json "$T/job.json" --diagnose > "$T/add.out"
check "8 crashes added" [ "$(grep -c '^added crash' "$T/add.out")" = 8 ]
"$CP" db jobs > "$T/jobs.out"; cat "$T/jobs.out"
check "db jobs: one job with 8 crashes" grep -q '^job slurm:4242: 8 crashes' "$T/jobs.out"
check "db jobs: the first failure is rank 3, the Xid 79" grep -q 'first failure: rank 3 on node07 .*GPU fell off the bus (Xid 79)' "$T/jobs.out"
check "db jobs: 7 other failures are its consequences" grep -q '7 other failures look like consequences' "$T/jobs.out"
check "db jobs: rank 0 (captured earlier) is marked a consequence" grep -Eq '^  cons\. .* rank 0 ' "$T/jobs.out"

# idempotent: the same reports again
"$CP" db add --report-json "$T/job.json" --diagnose > "$T/add2.out"
check "re-adding updates, adds nothing" bash -c "[ \$(grep -c '^updated crash' '$T/add2.out') = 8 ] && '$CP' db stats | grep -q '^8 crashes'"
"$CP" db show --json 1 > "$T/show1.json"
check "db show: the report file is each add's source, the latest holds the stored analysis" \
    [ "$(json "$T/show1.json" '[(s["kind"], s["path"] == "'"$T"'/job.json", s["outcome"], s["stored"], s["added_by"]["uid"]) for s in d["sources"]]')" \
      = "[('report-json', True, 'superseded', False, $(id -u)), ('report-json', True, 'updated', True, $(id -u))]" ]

"$CP" db list > "$T/list.out"
check "db list shows 8 crashes, newest first" bash -c "grep -q '^8 crashes' '$T/list.out' && sed -n 2p '$T/list.out' | grep -q 'slurm:4242/7'"
"$CP" db groups > "$T/groups.out"; cat "$T/groups.out"
check "db groups: the NCCL-timeout group has 7 crashes on 2 hosts" grep -Eq '^7 .* 2 +fp-nccl-timeout +NCCL' "$T/groups.out"
check "db groups: the Xid group has 1 crash" grep -Eq '^1 .* fp-xid79 +GPU fell off the bus' "$T/groups.out"
check "db search by rule" bash -c "'$CP' db search --rule xid-79-fallen-off-bus | grep -q '^1 crash$'"
check "db search by text" bash -c "'$CP' db search 'fallen off' | grep -q '^1 crash$'"
check "db search by host" bash -c "'$CP' db search --host node08 | grep -q '^4 crashes$'"
check "db search by date range" bash -c "'$CP' db search --since 2026-11-18 --until 1795000005 | grep -q '^1 crash$'"
"$CP" db stats > "$T/stats.out"
check "db stats per category" grep -Eq '^ +7  nccl$' "$T/stats.out"
check "db stats per host" grep -Eq '^ +4  node07$' "$T/stats.out"
id=$("$CP" db search --rule xid-79-fallen-off-bus | awk 'NR==2{print $1}')
"$CP" db show --json "$id" > "$T/show.json"
check "db show: diagnoses and rank" [ "$(json "$T/show.json" 'd["diagnoses"][0]["rule"], d["rank"], d["seen"]')" = "('xid-79-fallen-off-bus', 3, 1)" ]

# a team rule drafted from a stored crash
"$CP" rules add --from-crash "$id" -o "$T/draft.json" 2>/dev/null
check "draft is a rule with TODOs" bash -c "json '$T/draft.json' 'd[\"title\"]' | grep -q TODO"
check "draft conditions include the Xid" bash -c "json '$T/draft.json' 'd[\"when\"]' | grep -q \"'codes': \\[79\\]\""
"$CP" rules add "$T/draft.json" > /dev/null 2>&1
rid=$(json "$T/draft.json" 'd["id"]')
check "the added draft passes rules test" "$CP" rules test "$rid"

# ---- the more complete record stays (real bundles; capture needs root) ----
if [ "$(id -u)" != 0 ]; then
    echo "note: not root; the real-bundle cases (completeness, sources) are skipped"
    finish
fi
rm -rf "$T"; trap - EXIT
cp_setup   # a new $T, the test lock, core_pattern restored at exit
cp_install
pid=$(cp_crash "$CP_BIN/cp-abort")
b=$(cp_bundle_for "$pid") || die "no bundle for cp-abort"
mkdir -p "$T/b"
full=$T/b/full.zst cut=$T/b/cut.zst
cp "$b" "$full"
size=$(stat -c %s "$full")
head -c $((size / 2)) "$full" > "$cut"
"$CP" analyze --json "$full" > "$T/full.json" 2>/dev/null
"$CP" analyze --json "$cut" > "$T/cut.json" 2>/dev/null
sig=$(json "$T/full.json" 'd["signature"]') fp=$(json "$T/full.json" 'd["fingerprint"]')
check "the full bundle analyzes completely, with a signature" \
    [ "$(json "$T/full.json" 'd["bundle"]["complete"], d["analysis"]["complete"], bool(d["signature"])')" = "(True, True, True)" ]
check "the head -c copy is cut short and its analysis incomplete" \
    [ "$(json "$T/cut.json" 'd["bundle"]["complete"], d["analysis"]["complete"], d["signature"] == "'"$sig"'"')" = "(False, False, False)" ]
# STORED DB: the record holds the full bundle's analysis
stored_is_full() {
    "$CP" db show --json 1 --db "$1" > "$T/stored.json" &&
    [ "$(json "$T/stored.json" 'd["signature"], d["fingerprint"], d["bundle"]["path"], d["completeness"]["bundle_complete"]')" \
      = "('$sig', '$fp', '$full', True)" ]
}
# SOURCES DB: "path outcome stored" of each source, oldest first
sources() { "$CP" db show --json 1 --db "$1" | python3 -c 'import json,sys
for s in json.load(sys.stdin)["sources"]: print(s["path"], s["outcome"], s["stored"])'; }

# A. full, then the cut copy: kept
A=$T/a.sqlite
"$CP" db add --db "$A" "$full" > "$T/a1.out"
"$CP" db add --db "$A" "$cut" > "$T/a2.out"; rc=$?
cat "$T/a2.out"
check "A: full first: added" grep -q '^added crash 1 from ' "$T/a1.out"
check "A: the cut copy after it: kept, exit 0" bash -c "[ $rc = 0 ] && grep -q '^kept crash 1 (the stored record is more complete: core analysis complete vs incomplete); source recorded: $cut\$' '$T/a2.out'"
check "A: the stored record is still the full bundle's (signature, fingerprint, path)" stored_is_full "$A"
check "A: both paths are listed: the full one stored, the cut one kept" \
    [ "$(sources "$A")" = "$full added True"$'\n'"$cut kept False" ]
"$CP" db show --db "$A" 1 > "$T/a-show.txt"
check "A: db show (text) lists both paths, the stored one marked" bash -c \
    "grep -Eq '^  \* added +.* by .*\(uid $(id -u)\)  bundle $full\$' '$T/a-show.txt' && grep -Eq '^    kept +.* bundle $cut\$' '$T/a-show.txt' && grep -q 'the stored record is more complete: core analysis complete vs incomplete' '$T/a-show.txt'"
check "A: the sources carry each file's xxh64 and size" \
    [ "$("$CP" db show --json 1 --db "$A" | python3 -c 'import json,sys; d=json.load(sys.stdin); print([(len(s["xxh64"]), s["size"]) for s in d["sources"]], d["bundle"]["xxh64"] == d["sources"][0]["xxh64"])')" \
      = "[(16, $size), (16, $((size / 2)))] True" ]

# B. the cut copy, then the full bundle: replaced, ends with the full one
B=$T/b.sqlite
"$CP" db add --db "$B" "$cut" > "$T/b1.out" 2>/dev/null
"$CP" db add --db "$B" "$full" > "$T/b2.out"; rc=$?
cat "$T/b2.out"
check "B: the cut copy first: added" grep -q '^added crash 1 from ' "$T/b1.out"
check "B: the full bundle after it: replaced, exit 0" bash -c "[ $rc = 0 ] && grep -q '^replaced crash 1 (more complete: core analysis complete vs incomplete) from $full' '$T/b2.out'"
check "B: the stored record is the full bundle's" stored_is_full "$B"
check "B: both paths are listed: the cut one superseded, the full one stored" \
    [ "$(sources "$B")" = "$cut superseded False"$'\n'"$full replaced True" ]
check "B: still one crash" bash -c "'$CP' db list --db '$B' | grep -qx '1 crash'"

# C. a forged bundle of the same crash (its core replaced, every member intact): nothing replaced
head -c 300000 /dev/urandom > "$T/garbage"
"$CP_BIN/bundle_edit" "$full" "$T/b/forged.zst" --put core "$T/garbage" || fail "C: bundle_edit"
"$CP" db add --db "$A" "$T/b/forged.zst" > "$T/c.out" 2>&1; rc=$?
cat "$T/c.out"
check "C: the forged bundle: kept, equally complete" bash -c "[ $rc = 0 ] && grep -q '^kept crash 1 (equally complete: the stored record stays); source recorded: $T/b/forged.zst' '$T/c.out'"
forged_kept() { # the record keeps the full bundle's path and hash; the forged one is a kept source
    "$CP" db show --json 1 --db "$A" | python3 -c 'import json, sys
d = json.load(sys.stdin); s = d["sources"]
ok = (d["bundle"]["path"] == sys.argv[1] and d["bundle"]["xxh64"] == s[0]["xxh64"] != s[2]["xxh64"]
      and (s[2]["path"], s[2]["outcome"]) == (sys.argv[2], "kept"))
sys.exit(0 if ok else 1)' "$full" "$T/b/forged.zst"
}
check "C: the stored record is still the full bundle's, with its hash" forged_kept
check "C: ... and its signature" stored_is_full "$A"

# C2. the audit's forgery (issue 22 item 7): the same crash with another executable in its
# manifest and three padding members. Padding is not a member the analysis uses, so it counts for
# nothing: kept, equally complete. And where the stored record really is less complete (the cut
# copy), the forged complete bundle still does not replace it: it names another executable.
cp_member "$full" manifest.json > "$T/forged-manifest.json"
real_exe=$(json "$T/forged-manifest.json" 'd["exe"]')
python3 - "$T/forged-manifest.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); d["exe"] = "/tmp/forged/evil"
json.dump(d, open(sys.argv[1], "w"))
PY
echo pad > "$T/pad"
"$CP_BIN/bundle_edit" "$full" "$T/b/forged2.zst" --put manifest.json "$T/forged-manifest.json" \
    --put pad1.txt "$T/pad" --put pad2.txt "$T/pad" --put pad3.txt "$T/pad" || fail "C2: bundle_edit"
"$CP" db add --db "$A" "$T/b/forged2.zst" > "$T/c2.out" 2>&1; rc=$?
cat "$T/c2.out"
check "C2: three padding members make it no more complete: kept" bash -c \
    "[ $rc = 0 ] && grep -q '^kept crash 1 (equally complete: the stored record stays); source recorded: $T/b/forged2.zst' '$T/c2.out'"
check "C2: db show still gives the real executable" bash -c \
    "'$CP' db show --db '$A' 1 | grep -q '^exe  *$real_exe\$'"
check "C2: ... and its signature" stored_is_full "$A"
C2=$T/c2.sqlite
cp_member "$cut" manifest.json > /dev/null 2>&1 || true
"$CP" db add --db "$C2" "$cut" > /dev/null 2>&1
"$CP" db add --db "$C2" "$T/b/forged2.zst" > "$T/c2b.out" 2>&1; rc=$?
cat "$T/c2b.out"
check "C2: over the cut copy, the complete forgery is refused: another executable" bash -c \
    "[ $rc = 0 ] && grep -q '^kept crash 1 (refused to replace it: it is another program.s crash: executable /tmp/forged/evil vs ' '$T/c2b.out'"
check "C2: the refusal is recorded as a source" bash -c \
    "'$CP' db show --db '$C2' 1 | grep -q 'refused: more complete, but it is another program.s crash'"

# D. a corrupt file in place of the cut copy: fails, replaces nothing, recorded with crash 1
head -c $((size / 2)) /dev/urandom > "$cut"
"$CP" db add --db "$A" "$cut" > "$T/d.out" 2> "$T/d.err"; rc=$?
cat "$T/d.out" "$T/d.err"
check "D: the corrupt file: exit 1, nothing stored, recorded as crash 1's failed source" bash -c \
    "[ $rc = 1 ] && grep -q '^failed: nothing stored from $cut; recorded as a failed source of crash 1\$' '$T/d.out' && grep -q 'not a crashpack bundle' '$T/d.err'"
check "D: the stored record is still the full bundle's" stored_is_full "$A"
check "D: the failure is listed with its error" \
    [ "$("$CP" db show --json 1 --db "$A" | python3 -c 'import json,sys; s=json.load(sys.stdin)["sources"][-1]; print(s["path"], s["outcome"], s["stored"], s["completeness"], "not a crashpack bundle" in s["error"])')" \
      = "$cut failed False None True" ]

# E. a bundle cut inside its manifest (no crash identity): fails, adds nothing
head -c 100 "$full" > "$T/b/stub.zst"
"$CP" db add --db "$A" "$T/b/stub.zst" > "$T/e.out" 2> "$T/e.err"; rc=$?
check "E: no identity: exit 1, no crash added" bash -c \
    "[ $rc = 1 ] && grep -q '^failed: nothing stored from $T/b/stub.zst; the failure is recorded' '$T/e.out' && grep -q 'no crash identity' '$T/e.err' && '$CP' db list --db '$A' | grep -qx '1 crash'"
check "E: the stored record is still the full bundle's" stored_is_full "$A"

# F. the full bundle again: its analysis stored again, still one record
"$CP" db add --db "$A" "$full" > "$T/f.out"
check "F: the same bundle again: updated" grep -q "^updated crash 1 (the same bundle again: its analysis is stored again) from $full" "$T/f.out"
check "F: one source holds the stored analysis" [ "$("$CP" db show --json 1 --db "$A" | python3 -c 'import json,sys; print(sum(s["stored"] for s in json.load(sys.stdin)["sources"]))')" = 1 ]
finish
