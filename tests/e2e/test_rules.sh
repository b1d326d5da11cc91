#!/usr/bin/env bash
# Acceptance (issue 5, rule base): every built-in rule passes its own positive and near-miss case;
# `rules test` fails, naming the rule, when a rule's positive case is broken or a rule lacks its
# tests; ranking puts an own-GPU Xid 79 above the NCCL timeout it caused; a plain segfault gets no
# GPU diagnosis; nothing matched is said plainly; user rules override built-ins and round-trip
# through export/import. No core_pattern: reports are built by hand (fixtures/reports).
source "$(dirname "$0")/../lib.sh"
T=$(mktemp -d /tmp/cpr.XXXXXX)
trap 'rm -rf "$T"' EXIT
CP="$CP_BIN/crashpack"
R="$CP_SRC/fixtures/reports"
export CRASHPACK_DB="$T/kb.sqlite"

# 1. all built-ins pass; at least 40 of them
"$CP" rules test > "$T/test.out"; rc=$?
check "rules test passes for every built-in rule" [ "$rc" = 0 ]
n=$(grep -c '^ok ' "$T/test.out")
check "at least 40 built-in rules ($n)" [ "$n" -ge 40 ]
check "every built-in rule has references" bash -c "for f in '$CP_SRC'/rules/builtin/*.json; do json \"\$f\" 'len(d[\"references\"])' | grep -qv '^0$' || exit 1; done"

# 2. a broken positive case fails the run and names the rule (copy of the data dir)
mkdir -p "$T/data/rules" && cp -r "$CP_SRC/rules/builtin" "$T/data/rules/"
python3 - "$T/data/rules/builtin/xid-79-fallen-off-bus.json" <<'PY'
import json, sys
p = sys.argv[1]; r = json.load(open(p))
r["tests"]["positive"]["gpu"]["xid"][0]["code"] = 31   # no longer an Xid 79
json.dump(r, open(p, "w"))
PY
CRASHPACK_DATA_DIR="$T/data" "$CP" rules test > "$T/broken.out"; rc=$?
check "broken positive case: rules test exits non-zero" [ "$rc" != 0 ]
check "broken positive case: the rule is named" grep -q '^FAIL xid-79-fallen-off-bus: the positive case does not match' "$T/broken.out"
check "broken positive case: the others still pass" bash -c "[ \$(grep -c '^ok ' '$T/broken.out') = $((n - 1)) ]"
# a rule without tests fails too
cp -r "$CP_SRC/rules/builtin/." "$T/data/rules/builtin/"
python3 - "$T/data/rules/builtin/cuda-oom.json" <<'PY'
import json, sys
p = sys.argv[1]; r = json.load(open(p)); del r["tests"]; json.dump(r, open(p, "w"))
PY
CRASHPACK_DATA_DIR="$T/data" "$CP" rules test > "$T/notests.out"; rc=$?
check "rule without tests: rules test fails and names it" bash -c "[ $rc != 0 ] && grep -q '^FAIL cuda-oom: lacks tests' '$T/notests.out'"
# a near-miss that differs in two conditions is refused
cp -r "$CP_SRC/rules/builtin/." "$T/data/rules/builtin/"
python3 - "$T/data/rules/builtin/xid-48-dbe-with-remap.json" <<'PY'
import json, sys
p = sys.argv[1]; r = json.load(open(p)); r["tests"]["near_miss"] = {"gpu": {"xid": []}}; json.dump(r, open(p, "w"))
PY
CRASHPACK_DATA_DIR="$T/data" "$CP" rules test xid-48-dbe-with-remap > "$T/two.out"; rc=$?
check "near-miss differing in two conditions is refused" bash -c "[ $rc != 0 ] && grep -q 'exactly one condition' '$T/two.out'"

# 3. ranking: own-GPU Xid 79 first, the NCCL timeout its consequence
"$CP" rules match --json "$R/xid79-nccl-timeout.json" > "$T/m1.json"
check "Xid 79 + NCCL timeout: top diagnosis is the Xid 79 rule" [ "$(json "$T/m1.json" 'd[0]["rule"]')" = xid-79-fallen-off-bus ]
check "Xid 79 + NCCL timeout: the timeout is a consequence of it" \
    [ "$(json "$T/m1.json" '[x["consequence_of"] for x in d if x["rule"]=="nccl-watchdog-timeout"][0]')" = xid-79-fallen-off-bus ]
check "Xid 79: evidence carries the Xid line" bash -c "json '$T/m1.json' 'd[0][\"evidence\"]' | grep -q 'fallen off the bus'"
check "Xid 79: actions say drain" bash -c "json '$T/m1.json' 'd[0][\"actions\"]' | grep -qi 'drain'"
# the same timeout alone is the top diagnosis, with no consequence_of
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); r["gpu"]["xid"]=[]; json.dump(r,open(sys.argv[2],"w"))' \
    "$R/xid79-nccl-timeout.json" "$T/nccl-alone.json"
"$CP" rules match --json "$T/nccl-alone.json" > "$T/m2.json"
check "NCCL timeout alone: top is an NCCL rule, not a consequence" \
    bash -c "[ \"\$(json '$T/m2.json' 'd[0][\"category\"], d[0][\"consequence_of\"]')\" = \"('nccl', None)\" ]"

# 4. plain segfault: a native diagnosis, nothing about GPUs
"$CP" rules match --json "$R/plain-segv.json" > "$T/m3.json"
check "plain segfault: top is the null-pointer rule" [ "$(json "$T/m3.json" 'd[0]["rule"]')" = null-pointer-dereference ]
check "plain segfault: no GPU/NCCL diagnosis" [ "$(json "$T/m3.json" 'sum(1 for x in d if x["category"] in ("gpu_hardware","nvlink","gpu_driver","cuda_app","cuda_oom","nccl"))')" = 0 ]

# 4b. one cause, one diagnosis (issue 23): the raised torch.OutOfMemoryError and its message in a
# log are one OOM, with each evidence line once and no action twice
python3 - "$T/oom2.json" <<'PY'
import json, sys
msg = "CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity)"
json.dump({"exception": {"chain": [{"relation": "raised", "type": "torch.OutOfMemoryError",
                                    "mro": ["torch.OutOfMemoryError", "RuntimeError", "Exception"],
                                    "message": msg}]},
           "log": {"errors": [{"text": "torch.OutOfMemoryError: " + msg, "category": "cuda_oom",
                               "line": 1, "source": "exception", "fields": {}}]}},
          open(sys.argv[1], "w"))
PY
"$CP" rules match --json "$T/oom2.json" > "$T/m4.json"
check "one cause: python-cuda-oom and cuda-oom are one diagnosis listing both rules" \
    [ "$(json "$T/m4.json" '[(x["rule"], x["rules"], x["cause"]) for x in d]')" = "[('python-cuda-oom', ['python-cuda-oom', 'cuda-oom'], 'cuda_oom')]" ]
check "one cause: every evidence line and action once, the log line kept" \
    [ "$(json "$T/m4.json" '(len(set(d[0]["evidence"])) == len(d[0]["evidence"]) == 2, len(set(d[0]["actions"])) == len(d[0]["actions"]), any(e.startswith("log exception:1:") for e in d[0]["evidence"]))')" = "(True, True, True)" ]
"$CP" rules match "$T/oom2.json" > "$T/m4.out"
check "one cause: the text names the merged rule" grep -q 'also rule cuda-oom (the same cause: cuda_oom)' "$T/m4.out"
python3 - "$T/data/rules/builtin/cuda-oom.json" <<'PY'
import json, sys
p = sys.argv[1]; r = json.load(open(p)); r["cause"] = "Not A Name!"; json.dump(r, open(p, "w"))
PY
CRASHPACK_DATA_DIR="$T/data" "$CP" rules list > "$T/badcause.out" 2>&1
check "a cause that is not a name is refused" bash -c "[ $? != 0 ] || grep -q 'cause' '$T/badcause.out'"

# 5. nothing matched: said plainly, with the signature
python3 -c 'import json; json.dump({"signature": "SIGUSR1 | spin | main", "process": {"signal": {"name": "SIGUSR1"}}, "crash_kind": "signal"}, open("'"$T"'/none.json", "w"))'
"$CP" rules match "$T/none.json" > "$T/none.out"
check "nothing matched: says so with the signature" grep -q 'no known failure pattern matched.*SIGUSR1 | spin | main' "$T/none.out"

# 5b. the acceptance scenarios as the evidence producers report them: the right top diagnosis each
python3 - "$T/scen" <<'PY'
import json, os, sys
d = sys.argv[1]; os.makedirs(d)
X = lambda c, blame="hardware", own=True: {"code": c, "pci": "00000000:3b:00.0", "own_gpu": own, "blame": blame,
    "time": None, "text": "NVRM: Xid (PCI:0000:3b:00): %d, pid=77, name=python" % c}
E = lambda t, c: {"text": t, "category": c, "line": 3, "source": "logs/stderr.tail"}
K = lambda t: {"text": t, "class": "oom", "time": None, "xid": None}
segv = {"signal": {"number": 11, "name": "SIGSEGV"}}
abrt = {"signal": {"number": 6, "name": "SIGABRT"}}
sc = {
 "xid79": ({"process": abrt, "crash_kind": "abort", "gpu": {"xid": [X(79, "bus")]}}, "xid-79-fallen-off-bus"),
 "xid48-dbe": ({"process": abrt, "crash_kind": "abort", "gpu": {"xid": [X(48)], "nvidia_smi": {"gpus": [
     {"index": 0, "own": True, "ecc": {"volatile_dbe": 1}}]}}}, "xid-48-double-bit-ecc"),
 "xid31-ima": ({"process": abrt, "crash_kind": "uncaught_exception", "gpu": {"xid": [X(31, "application")]},
     "log": {"errors": [E("RuntimeError: CUDA error: an illegal memory access was encountered", "illegal_memory_access")]}},
     "xid-31-mmu-fault-app"),
 "cuda-oom": ({"process": abrt, "crash_kind": "abort", "log": {"errors": [E("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB", "cuda_oom")]}}, "cuda-oom"),
 "nccl-alone": ({"process": abrt, "crash_kind": "uncaught_exception", "cause": {"exception": {"type": "c10::DistBackendError", "what": "[Rank 1] Watchdog caught collective operation timeout"}},
     "log": {"errors": [E("[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600412 milliseconds before timing out.", "nccl_timeout")]}},
     "nccl-watchdog-timeout"),
 "dataloader-oom": ({"process": abrt, "crash_kind": "abort", "log": {"errors": [E("RuntimeError: DataLoader worker (pid 19597) is killed by signal: Killed.", "dataloader_killed")]},
     "kernel_log": {"lines": [K("Out of memory: Killed process 19597 (python) total-vm:49978204kB, anon-rss:12918388kB")]}}, "dataloader-worker-oom-killed"),
 "checkpoint": ({"process": segv, "crash_kind": "segv_null", "checkpoint": {"path": "/c/step42000.pt", "valid": False, "reason": "truncated", "newest_valid": "/c/step41000.pt"}}, "checkpoint-invalid-older-valid"),
 "cxx-throw": ({"process": abrt, "crash_kind": "uncaught_exception", "cause": {"exception": {"type": "std::runtime_error", "what": "boom"}}}, "uncaught-cpp-exception"),
 "plain-segv": ({"process": segv, "crash_kind": "segv_null"}, "null-pointer-dereference"),
}
for name, (rep, top) in sc.items():
    json.dump(rep, open(os.path.join(d, name + ".json"), "w"))
    open(os.path.join(d, name + ".top"), "w").write(top)
PY
for f in "$T"/scen/*.json; do
    name=$(basename "$f" .json); want=$(cat "$T/scen/$name.top")
    "$CP" rules match --json "$f" > "$T/scen/$name.out"
    got=$(json "$T/scen/$name.out" 'd[0]["rule"] if d else None')
    check "scenario $name: top diagnosis $want (got $got)" [ "$got" = "$want" ]
done
# the nccl-alone scenario: the C++ exception is listed as its consequence, not above it
check "scenario nccl-alone: the uncaught exception is a consequence" \
    [ "$(json "$T/scen/nccl-alone.out" '[x["consequence_of"] for x in d if x["rule"]=="c10-error-abort"][0]')" = nccl-watchdog-timeout ]

# 5c. hostile reports: every field the rules read with the wrong type, or absent; never a crash
python3 - "$T/hostile" <<'PY'
import json, os, sys
d = sys.argv[1]; os.makedirs(d)
weird = [None, 1, "x", [], {}, [1, "a", None, {}], {"a": [None]}, True, -1e308, "\u0000\u001b[31m"]
keys = ["process", "crash_kind", "cause", "threads", "gpu", "kernel_log", "log", "checkpoint", "host", "signature"]
n = 0
for w in weird:
    r = {k: w for k in keys}
    json.dump(r, open(os.path.join(d, "h%02d.json" % n), "w")); n += 1
    r = {"process": {"signal": w, "env": w, "crashed_tid": w}, "threads": [{"frames": w, "python_frames": w, "name": w, "crashed": w}],
         "gpu": {"xid": [w, {"code": w, "own_gpu": w, "time": w, "blame": w}], "nvidia_smi": {"gpus": [w, {"ecc": w, "own": w, "throttle_reasons": w}]}},
         "kernel_log": {"lines": [w, {"text": w}]}, "log": {"errors": [w, {"text": w, "category": w}]}, "checkpoint": {"path": w, "valid": w, "newest_valid": w},
         "cause": {"exception": w, "abort_message": w}, "crash_kind": w, "host": {"time": w}}
    json.dump(r, open(os.path.join(d, "h%02d.json" % n), "w")); n += 1
PY
bad=0
for f in "$T"/hostile/*.json; do
    "$CP" rules match --json "$f" > /dev/null 2>&1; rc=$?
    [ "$rc" = 0 ] || { echo "rules match $f: exit $rc"; bad=1; }
    "$CP" report --from-json "$f" > /dev/null 2>&1; rc=$?
    [ "$rc" = 0 ] || { echo "report $f: exit $rc"; bad=1; }
done
check "hostile reports: rules match and report never fail or crash" [ "$bad" = 0 ]
printf '[' > "$T/deep.json"; for i in $(seq 1 5000); do printf '{"all":[' >> "$T/deep.json"; done
"$CP" rules add --db "$T/deep.sqlite" "$T/deep.json" > /dev/null 2>&1; rc=$?
check "a deeply nested rule file is refused, not a crash (exit $rc)" bash -c "[ $rc = 1 ] || [ $rc = 2 ]"

# 6. user rules: add, override a built-in by id, export, import into another knowledge base
python3 - "$CP_SRC/rules/builtin/segfault.json" "$T/mine.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); r["title"] = "Our segfault triage"; r["confidence"] = 0.99
json.dump(r, open(sys.argv[2], "w"))
PY
"$CP" rules add "$T/mine.json" > /dev/null
check "user rule overrides the built-in of the same id" bash -c "'$CP' rules list | grep -E '^segfault +user .*Our segfault triage \\(overrides the built-in\\)'"
check "rules show prints the user version" bash -c "'$CP' rules show segfault | grep -q 'Our segfault triage'"
"$CP" rules export -o "$T/export.json"
check "export holds the user rule only" [ "$(json "$T/export.json" 'd["format"], [r["id"] for r in d["rules"]]')" = "('crashpack-rules-export/1', ['segfault'])" ]
"$CP" rules import --db "$T/other.sqlite" "$T/export.json" > /dev/null
check "import into another knowledge base" bash -c "'$CP' rules show --db '$T/other.sqlite' segfault | grep -q 'Our segfault triage'"
check "rules test still passes with the user rule" "$CP" rules test segfault
echo '{"id": "bad rule!", "title": "x"}' > "$T/bad.json"
check "an invalid rule is refused" bash -c "! '$CP' rules add '$T/bad.json' 2>/dev/null"
finish
