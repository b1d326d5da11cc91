#!/usr/bin/env bash
# Acceptance (issue 5, knowledge base): `db jobs` on 8 crashes of one job (one rank with an own-GPU
# Xid 79, seven NCCL timeouts) names the Xid rank as the first failure and the others as its
# consequences, even when a victim's crash was captured first; list/show/groups/search/stats answer
# from the stored crashes; re-adding is idempotent; `rules add --from-crash` drafts a rule that
# passes `rules test` once added. (Migration and concurrent writers: unit/test_kb.)
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
finish
