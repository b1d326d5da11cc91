#!/usr/bin/env bash
# Acceptance (issue 13, items 3, 5 and 8): `crashpack run -- CMD`, the supervisor.
#  5. `run -- bash -c 'exit 3'` exits 3 with one bundle whose death is exit status 3; a job that
#     exits 0 writes none; SIGTERM to run reaches the whole job, run exits with the job's status
#     and no process of the job is left (pgrep by a marker), also one that ignores SIGTERM
#  -  output forwarded unchanged with stdout and stderr apart (ptys and --no-pty), the tail in
#     output.txt, process.json with the identity recorded at first sight and secrets redacted;
#     grandchildren that their own parent reaps (pidfd + PIDFD_INFO_EXIT); the job id shared
#  8. a segfault under run with the handler in core_pattern: one bundle, not two
#  3. a torch DataLoader job with two workers, run as nobody in a memory-limited cgroup (v1
#     memory.limit_in_bytes, or v2 memory.max), the agent running as root: one worker grows
#     until the kernel's OOM killer kills it: one bundle for the worker (oom_kill, SIGKILL, the
#     kernel's kill line; run's own report of the SIGKILL deduplicated against it), one for the
#     main process's RuntimeError (exit 1)
source "$(dirname "$0")/../lib.sh"
cp_setup
CP="$CP_BIN/crashpack"
R() { "$CP" run -c "$T/conf" "$@"; }
nbundles() { ls "$T"/bundles/crash-*.zst 2>/dev/null | wc -l; }
# death BUNDLE: the manifest's death object as a Python tuple of kind, status, signal, trigger
death() { cp_member "$1" manifest.json | python3 -c 'import json,sys; d=json.load(sys.stdin)["death"]; print((d["kind"], d["status"], d["signal"], d["trigger"]))'; }
# pj BUNDLE EXPR: EXPR over process.json (d)
pj() { cp_member "$1" process.json > "$T/pj.json" && json "$T/pj.json" "$2"; }
AGENT_PID= CG=
run_cleanup() {
    [ -n "$AGENT_PID" ] && kill "$AGENT_PID" 2>/dev/null && wait "$AGENT_PID" 2>/dev/null
    if [ -n "$CG" ] && [ -d "$CG" ]; then
        local p
        for p in $(cat "$CG/cgroup.procs" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
        sleep 0.2
        rmdir "$CG" 2>/dev/null || echo "WARNING: could not remove $CG" >&2
    fi
}
trap 'rc=$?; run_cleanup; (exit $rc); cp_restore' EXIT

# ---- 1. acceptance 5: a job that exits 3; one that exits 0 ----
R -- bash -c 'echo on stdout; echo on stderr >&2; exit 3' > "$T/o1" 2> "$T/e1"
rc=$?
check "run exits with the job's status (3)" [ "$rc" = 3 ]
check "one bundle" [ "$(nbundles)" = 1 ]
B=$(ls "$T"/bundles/crash-*.zst | head -1)
check "its death: exit status 3, trigger run" [ "$(death "$B")" = "('exit', 3, None, 'run')" ]
check "stdout forwarded to stdout only" [ "$(cat "$T/o1")" = "on stdout" ]
check "stderr forwarded to stderr" grep -qx "on stderr" "$T/e1"
check "stderr has no stdout line" bash -c "! grep -q 'on stdout' '$T/e1'"
check "run said where the bundle is" grep -q "exited with status 3: bundle $T/bundles/" "$T/e1"
cp_member "$B" output.txt > "$T/out1"
check "output.txt has the job's output" bash -c "grep -qx 'on stdout' '$T/out1' && grep -qx 'on stderr' '$T/out1'"
check "process.json: the stderr bytes of the tail are marked" \
    [ "$(pj "$B" 'd["output"]["stderr_ranges"] == [[10, 10]]')" = True ]
check "process.json: identity recorded at first sight (exe, cmdline, main)" \
    [ "$(pj "$B" 'd["exe"].endswith("bash"), d["cmdline"][0], d["main"], d["end"]["status"]')" = "(True, 'bash', True, 3)" ]
rm -f "$T"/bundles/crash-*.zst
R -- bash -c 'echo fine; exit 0' > /dev/null 2>&1
rc=$?
check "a job that exits 0: run exits 0" [ "$rc" = 0 ]
check "... and writes no bundle" [ "$(nbundles)" = 0 ]
R --no-pty -- bash -c 'echo on stdout; echo on stderr >&2; exit 4' > "$T/o2" 2> "$T/e2"
rc=$?
check "--no-pty: exit status 4" [ "$rc" = 4 ]
check "--no-pty: stdout and stderr apart" bash -c "[ \"\$(cat '$T/o2')\" = 'on stdout' ] && grep -qx 'on stderr' '$T/e2'"
check "--no-pty: one bundle" [ "$(nbundles)" = 1 ]
rm -f "$T"/bundles/crash-*.zst

# ---- 2. the tree: a Python grandchild reaped by its own parent, a tool's exit, a signal ----
MY_API_TOKEN=hunter2-very-secret CRASHPACK_JOB_ID=job-run-test R -- bash -c '
echo "token is $MY_API_TOKEN, job $CRASHPACK_JOB_ID"
python3 -c "import sys; print(\"py failing\", flush=True); sys.exit(5)"
false
sleep 30 & p=$!; sleep 0.3; kill -USR1 $p; wait $p
exit 0' > "$T/o3" 2> "$T/e3"
rc=$?
check "tree: the main process exited 0" [ "$rc" = 0 ]
check "tree: the job id is exported to the job" grep -q "job job-run-test" "$T/o3"
check "tree: two bundles (the Python exit, the SIGUSR1), none for false" [ "$(nbundles)" = 2 ]
BP=$(ls "$T"/bundles/crash-*-python3*.zst 2>/dev/null | head -1)
BS=$(ls "$T"/bundles/crash-*-sleep*.zst 2>/dev/null | head -1)
check "tree: the Python grandchild's exit 5" [ -n "$BP" ] && [ "$(death "$BP")" = "('exit', 5, None, 'run')" ]
check "tree: its status came from the pidfd (its parent reaped it)" [ "$(pj "$BP" 'd["end"]["seen_by"], d["python"]')" = "('pidfd', True)" ]
check "tree: the sleep killed by SIGUSR1" [ -n "$BS" ] && [ "$(death "$BS")" = "('signal', None, 10, 'run')" ]
check "tree: the job id in the manifest and process.json" \
    [ "$(cp_member "$BP" manifest.json | python3 -c 'import json,sys; print(json.load(sys.stdin)["death"]["job"])')/$(pj "$BP" 'd["job"]["id"]')" = "job-run-test/job-run-test" ]
check "tree: the secret's value is redacted in process.json" \
    [ "$(pj "$BP" '(d.get("environ") or {}).get("MY_API_TOKEN", "<redacted>"), "MY_API_TOKEN" in d["environ_redacted"] or not d.get("environ")')" = "('<redacted>', True)" ]
# (a process seen between its fork and its exec may have no readable environment yet: then
# process.json has none, and the check below still says no member holds the value)
check "tree: ... and masked in output.txt" bash -c "cp_member() { zstd -dc -q \"\$1\" | tar -xOf - \"\$2\"; }; out=\$(cp_member '$BP' output.txt); ! grep -q hunter2 <<< \"\$out\" && grep -q 'py failing' <<< \"\$out\""
check "tree: nothing secret in any member" bash -c "! (zstd -dc -q '$BP' | grep -aq hunter2-very-secret)"
rm -f "$T"/bundles/crash-*.zst

# ---- 3. acceptance 5: SIGTERM to run reaches the whole job; nothing is left ----
# started directly (not through R's subshell), so $! is run itself; fd 9 (the test lock) closed
M=$T/mark
# nothing_left [NAME]: no process has the marker (the bracket keeps pgrep from matching itself)
nothing_left() { ! pgrep -af "$T/mar[k]-$1"; }
"$CP" run -c "$T/conf" -- bash -c "
python3 -c 'import time; time.sleep(300)' $M-py &
sh -c 'sleep 300; : $M-sh' &
(trap '' TERM; exec -a $M-noterm sleep 300) &
wait" > "$T/o4" 2> "$T/e4" 9>&- &
rpid=$!
for i in $(seq 100); do [ "$(pgrep -f "$M-" | wc -l)" -ge 3 ] && break; sleep 0.1; done
check "SIGTERM: the job's processes run" [ "$(pgrep -f "$M-" | wc -l)" -ge 3 ]
sleep 0.3
kill -TERM "$rpid"
wait "$rpid"
rc=$?
check "SIGTERM: run exits with the job's status (128+15)" [ "$rc" = 143 ]
check "SIGTERM: no process of the job is left" nothing_left ""
B=$(ls "$T"/bundles/crash-*-bash.zst 2>/dev/null | head -1)
check "SIGTERM: the main process recorded as terminated" [ -n "$B" ] && [ "$(death "$B")" = "('terminated', None, 15, 'run')" ]
check "SIGTERM: one bundle (the job's end, not one per process)" [ "$(nbundles)" = 1 ]
pkill -KILL -f "$M-" 2>/dev/null
rm -f "$T"/bundles/crash-*.zst
# the main process ends while a child ignoring TERM and HUP runs on: SIGKILL after --grace
R --no-pty --grace 1 -- bash -c "(trap '' TERM HUP; exec -a $M-stubborn sleep 300) & sleep 0.3; exit 0" > /dev/null 2>&1 9>&-
rc=$?
check "grace: run exits with the main process's 0" [ "$rc" = 0 ]
check "grace: the stubborn child is gone too" nothing_left stubborn
check "grace: no bundle (the supervisor ended it)" [ "$(nbundles)" = 0 ]
pkill -KILL -f "$M-" 2>/dev/null

# ---- 4. acceptance 8: a segfault under run, the handler in core_pattern: one bundle ----
cp_install
R -- "$CP_BIN/cp-segv-threads" > /dev/null 2> "$T/e5"
rc=$?
check "segfault: run exits 128+11" [ "$rc" = 139 ]
sleep 1
check "segfault: exactly one bundle" [ "$(nbundles)" = 1 ]
B=$(ls "$T"/bundles/crash-*.zst | head -1)
check "segfault: the kernel's (death kind core)" [ "$(death "$B")" = "('core', None, 11, 'kernel')" ]
check "segfault: run's report was deduplicated" grep -q "already captured: $B" "$T/e5"
rm -f "$T"/bundles/crash-*.zst

# ---- 5. acceptance 3: DataLoader worker OOM-killed in a memory cgroup, job as nobody ----
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    echo "SKIP (part 5): /usr/bin/python3 has no torch (python3-torch)"
    finish
fi
LIMIT=$((384 << 20))
if [ -f /sys/fs/cgroup/memory/memory.limit_in_bytes ]; then
    CG=/sys/fs/cgroup/memory/crashpack-test-run.$$
    mkdir "$CG" || die "cannot create $CG"
    echo 0 > "$CG/memory.swappiness" 2>/dev/null
    echo "$LIMIT" > "$CG/memory.limit_in_bytes" || die "cannot set the v1 limit"
    [ -f "$CG/memory.memsw.limit_in_bytes" ] && echo "$LIMIT" > "$CG/memory.memsw.limit_in_bytes"
    [ "$(cat "$CG/memory.limit_in_bytes")" = "$LIMIT" ] || die "v1 limit not in place"
    CGV=v1
elif grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
    grep -qw memory /sys/fs/cgroup/cgroup.subtree_control || echo +memory > /sys/fs/cgroup/cgroup.subtree_control
    CG=/sys/fs/cgroup/crashpack-test-run.$$
    mkdir "$CG" || die "cannot create $CG"
    echo "$LIMIT" > "$CG/memory.max" || die "cannot set memory.max"
    [ -f "$CG/memory.swap.max" ] && echo 0 > "$CG/memory.swap.max"
    [ "$(cat "$CG/memory.max")" = "$LIMIT" ] || die "v2 limit not in place"
    CGV=v2
else
    echo "SKIP (part 5): no memory cgroup controller"
    finish
fi
mkdir -p "$T/run"
"$CP" agent -c "$T/conf" --socket "$T/run/agent.sock" 2> "$T/agent.err" 9>&- &
AGENT_PID=$!
for i in $(seq 100); do [ -S "$T/run/agent.sock" ] && break; sleep 0.1; done
check "the agent listens" [ -S "$T/run/agent.sock" ]
cat > "$T/dl.py" <<'PY'
import os, time
import torch
from torch.utils.data import DataLoader, Dataset

class Grow(Dataset):
    def __len__(self):
        return 400
    def __getitem__(self, i):
        info = torch.utils.data.get_worker_info()
        if info is not None and info.id == 1:
            hog = []
            while True:  # until the cgroup's OOM killer ends this worker
                hog.append(b"\1" * (8 << 20))
        time.sleep(0.02)
        return torch.zeros(4)

if __name__ == "__main__":
    for i, b in enumerate(DataLoader(Grow(), batch_size=2, num_workers=2)):
        if i % 20 == 0:
            print("batch", i, flush=True)
PY
chmod 644 "$T/dl.py"
# into the limited cgroup as root first; only then drop to nobody and start anything that allocates
bash -c "echo \$\$ > '$CG/cgroup.procs' && exec setpriv --reuid=65534 --regid=65534 --clear-groups \
    env CRASHPACK_AGENT_SOCKET='$T/run/agent.sock' timeout -s KILL 300 \
    '$CP' run -c '$T/conf' -- /usr/bin/python3 '$T/dl.py'" > "$T/o6" 2> "$T/e6" 9>&-
rc=$?
check "OOM ($CGV): run exits with the main process's status 1" [ "$rc" = 1 ]
check "OOM: the main process raised the DataLoader RuntimeError" grep -q "RuntimeError: DataLoader worker (pid(s) [0-9]*) exited unexpectedly" "$T/e6"
wpid=$(grep -o 'DataLoader worker (pid(s) [0-9]*)' "$T/e6" | grep -o '[0-9]*' | head -1)
check "OOM: the kernel's OOM killer killed the worker" bash -c "dmesg | grep -q 'Killed process $wpid '"
nw=$(ls "$T"/bundles/crash-*-"$wpid"-*.zst 2>/dev/null | wc -l)
check "OOM: one bundle for the killed worker $wpid" [ "$nw" = 1 ]
BW=$(ls "$T"/bundles/crash-*-"$wpid"-*.zst 2>/dev/null | head -1)
check "OOM: the worker's death: oom_kill, SIGKILL, by the agent" [ -n "$BW" ] && [ "$(death "$BW")" = "('oom_kill', None, 9, 'agent')" ]
check "OOM: the worker's bundle has the kernel's kill line" bash -c "zstd -dc -q '$BW' | tar -xOf - oom.json | grep -q 'Killed process $wpid '"
check "OOM: run's report of the SIGKILL was deduplicated" grep -q "pid $wpid (.*) killed by SIGKILL: already captured: $BW" "$T/e6"
BM=$(ls "$T"/bundles/crash-*-python3.zst 2>/dev/null | grep -v -- "-$wpid-" | head -1)
check "OOM: one bundle for the main process: exit 1" [ -n "$BM" ] && [ "$(death "$BM")" = "('exit', 1, None, 'run')" ]
check "OOM: two bundles in all" [ "$(nbundles)" = 2 ]
check "OOM: the main's output.txt has the RuntimeError" bash -c "zstd -dc -q '$BM' | tar -xOf - output.txt | grep -q 'exited unexpectedly'"
check "OOM: the main's bundle is reported by nobody" [ "$(cp_member "$BM" manifest.json | python3 -c 'import json,sys; print(json.load(sys.stdin)["death"]["reported_by_uid"])')" = 65534 ]
mjob=$(cp_member "$BM" manifest.json | python3 -c 'import json,sys; print(json.load(sys.stdin)["death"]["job"])')
check "OOM: the main's bundle has run's job id" [ "$mjob" = "$(pj "$BM" 'd["job"]["id"]')" ]
# the worker's bundle is the agent's own (oom_kill): it knows the job because run registered it
# with the agent (op register) and the worker is a descendant of run
check "OOM: the worker's oom_kill bundle has the same job id ($mjob)" \
    [ "$(cp_member "$BW" manifest.json | python3 -c 'import json,sys; print(json.load(sys.stdin)["death"]["job"])')" = "$mjob" ]
# db jobs (issue 23): the worker's kill is the first failure, with the cgroup limit on top (not
# CUDA OOM), and the main process's DataLoader error is explained by it. The main's bundle is
# added first, so neither the ids nor the one-second crash times give the order: the kernel's kill
# time (sub-second, from the OOM line) and run's observed exit time do.
"$CP" db add --db "$T/kb.sqlite" "$BM" "$BW" > /dev/null 2>&1
"$CP" db jobs --db "$T/kb.sqlite" --json > "$T/jobs.json" 2>&1
"$CP" db jobs --db "$T/kb.sqlite" > "$T/jobs.txt" 2>&1
cat "$T/jobs.txt"
check "db jobs: one job, its first failure the worker's OOM kill under the memory cgroup limit" bash -c "python3 - '$T/jobs.json' '$wpid' <<'EOF'
import json, sys
d = json.load(open(sys.argv[1])); wpid = int(sys.argv[2])
jobs = d['jobs']
assert len(jobs) == 1, jobs
j = jobs[0]
first = [c for c in j['crashes'] if c['role'] == 'first']
assert len(first) == 1 and first[0]['id'] == j['first_failure'], j
assert first[0]['pid'] == wpid, first[0]
assert first[0]['category'] != 'cuda_oom', first[0]
assert 'oom' in (first[0]['category'] or '') and 'cgroup' in (first[0]['rule'] or ''), first[0]
assert first[0]['death_time_source'] == 'kernel', first[0]
EOF"
check "db jobs: the main process's error is explained by the worker's kill" bash -c "python3 - '$T/jobs.json' '$wpid' <<'EOF'
import json, sys
d = json.load(open(sys.argv[1])); wpid = int(sys.argv[2])
j = d['jobs'][0]
w = [c for c in j['crashes'] if c['pid'] == wpid][0]
m = [c for c in j['crashes'] if c['pid'] != wpid]
assert len(m) == 1, j
m = m[0]
assert m['role'] == 'consequence' and m['explained_by']['id'] == w['id'], m
assert m['death_time_source'] == 'supervisor' and w['death_time'] <= m['death_time'], (w, m)
assert [c['id'] for c in j['crashes']] == [w['id'], m['id']], j
EOF"
check "db jobs (text): the main's line says which crash explains it" \
    grep -Eq "^  cons\. .* \(explained by crash [0-9]+: .*\)$" "$T/jobs.txt"
check "db jobs (text): the worker's kill is FIRST" grep -Eq "^  FIRST .* pid $wpid " "$T/jobs.txt"
check "OOM: nothing of the job is left in the cgroup" [ -z "$(cat "$CG/cgroup.procs")" ]
finish
