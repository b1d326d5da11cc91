#!/usr/bin/env bash
# Acceptance (issue 14, #3): causes above mechanisms, through the real kernel core_pattern.
# A recorded real NCCL watchdog timeout (fixtures/logs/nccl/watchdog-timeout-megatron-935.log,
# NVIDIA/Megatron-LM#935, credited in its .source file) around a real abort: cp-nccl-watchdog
# throws a c10::DistBackendError look-alike from a thread named pt_nccl_watchdg, libstdc++'s
# terminate handler writes the recorded terminate / what() lines again to the job's stderr (a
# regular file, whose tail the handler keeps) and abort()s. The core has the exception's type but
# not its what() (c10::Error keeps its text in its own members, as PyTorch's does). The report must
# rank the collective timeout first (nccl-watchdog-timeout, which "explains" the watchdog's abort),
# with its op, sequence number, timeout and rank as evidence fields; list the abort
# (nccl-watchdog-abort, which alone has the higher raw confidence) and the c10 exception as its
# consequences; and carry the exception's message, taken from the log (what_source "log").
# Also: `rules test` refuses an "explains" that names no rule and no category.
source "$(dirname "$0")/../lib.sh"
cp_setup
# the kmsg window starts 1 s before the job: OOM kills and Xids other tests left in the kernel ring
# are not this crash's evidence
echo "kmsg_margin = 1" >> "$T/conf"
cp_install

LOG=$CP_SRC/fixtures/logs/nccl/watchdog-timeout-megatron-935.log
[ -f "$LOG.source" ] || fail "the fixture has no .source credit"
env -i PATH=/usr/bin:/bin "$CP_BIN/cp-nccl-watchdog" "$LOG" > "$T/job.out" 2> "$T/job.err" &
vpid=$!
wait "$vpid"
rc=$?
check "the job died of SIGABRT (status $rc)" [ "$rc" = 134 ]
check "its stderr is the recorded log, byte for byte" cmp -s "$T/job.err" "$LOG"
B=$(cp_bundle_for "$vpid" 60) || die "no bundle for pid $vpid"
"$CP_BIN/crashpack" analyze --json "$B" > "$T/r.json"
rc=$?
[ $rc -le 1 ] || fail "analyze --json exited $rc"
"$CP_BIN/crashpack" analyze "$B" > "$T/r.txt" 2>&1

q() { python3 - "$T/r.json" "$1" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
D = d.get("diagnoses") or []
top = D[0] if D else {}
ids = [g["rule"] for g in D]
dg = lambda r: next((g for g in D if g["rule"] == r), {})
ex = (d.get("cause") or {}).get("exception") or {}
ok = eval(sys.argv[2])
if not ok:
    print("   false: " + sys.argv[2], file=sys.stderr)
    print("   diagnoses: " + ", ".join("%s (%s, consequence_of %s)" % (g["rule"], g["confidence"],
          g["consequence_of"]) for g in D), file=sys.stderr)
    print("   exception: " + json.dumps(ex), file=sys.stderr)
sys.exit(0 if ok else 1)
PYEOF
}

WHAT='[PG 1 Rank 6] Process group watchdog thread terminated with exception: [Rank 6] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=199, OpType=_REDUCE_SCATTER_BASE, NumelIn=7098994688, NumelOut=443687168, Timeout(ms)=600000) ran for 882722 milliseconds before timing out.'
check "the crashed thread is the watchdog (pt_nccl_watchdg)" \
    q 'any(t.get("crashed") and t.get("name") == "pt_nccl_watchdg" for t in d["threads"])'
check "the core gave the exception's type" q 'ex.get("type") == "c10::DistBackendError"'
check "the exception's message is in the report, taken from the log" \
    q 'ex.get("what") == '"'$WHAT'"' and ex.get("what_source") == "log" and ex["what_log"]["source"] == "logs/stderr.tail" and ex["what_log"]["line"] == 2'
check "the timeout is first: nccl-watchdog-timeout, a cause" \
    q 'top.get("rule") == "nccl-watchdog-timeout" and top["consequence_of"] is None'
check "its evidence fields: op, seq, timeout, rank" \
    q 'top.get("evidence_fields", {}).get("op") == "_REDUCE_SCATTER_BASE" and top["evidence_fields"]["seq"] == 199 and top["evidence_fields"]["timeout_ms"] == 600000 and top["evidence_fields"]["rank"] == 6'
check "the watchdog's abort (raw confidence above the timeout's) is listed as its consequence" \
    q '"nccl-watchdog-abort" in ids[1:] and dg("nccl-watchdog-abort")["consequence_of"] == "nccl-watchdog-timeout" and dg("nccl-watchdog-abort")["confidence"] > top["confidence"]'
check "the c10 exception is a consequence of the timeout too" \
    q 'dg("c10-error-abort").get("consequence_of") == "nccl-watchdog-timeout"'
check "every consequence ranks below every cause" \
    q 'all(D[i]["consequence_of"] is None or D[i+1]["consequence_of"] is not None for i in range(len(D)-1))'
check "the text output: the timeout first, the abort a consequence of it, the fields" bash -c "
    grep -m1 '^diagnosis ' '$T/r.txt' | grep -q 'NCCL collective timed out' &&
    grep -A1 'NCCL watchdog thread took the process down' '$T/r.txt' | grep -q 'likely a consequence of nccl-watchdog-timeout' &&
    grep -q 'fields:.*op=_REDUCE_SCATTER_BASE.*seq=199' '$T/r.txt'"
check "the report's text names the exception's message" bash -c "
    '$CP_BIN/crashpack' report '$B' 2>/dev/null | grep -q 'Watchdog caught collective operation timeout'"

# rules test: an "explains" must name a rule or a category
python3 - "$CP_SRC/rules/builtin/nccl-watchdog-timeout.json" "$T/bad.json" <<'PYEOF'
import json, sys
r = json.load(open(sys.argv[1]))
r["id"] = "team-timeout"
r["explains"] = ["nccl-watchdog-abort", "no-such-rule-or-category"]
json.dump(r, open(sys.argv[2], "w"))
PYEOF
"$CP_BIN/crashpack" rules add --db "$T/kb.sqlite" "$T/bad.json" > /dev/null 2>&1
"$CP_BIN/crashpack" rules test --db "$T/kb.sqlite" > "$T/rt.out" 2>&1
rc=$?
check "rules test fails on an unknown explains reference (exit $rc)" [ "$rc" = 1 ]
check "... naming it" grep -q 'FAIL team-timeout: "explains" names `no-such-rule-or-category`' "$T/rt.out"
check "... and every built-in passes" bash -c "! grep -v team-timeout '$T/rt.out' | grep -q '^FAIL'"
finish
