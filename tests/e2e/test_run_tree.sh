#!/usr/bin/env bash
# Acceptance (issue 22, item 10): `crashpack run` leaves nothing of the job running, whatever its
# parentage, and follows the job by its cgroup, the proc connector or a walk of /proc when
# something changed (docs/run.md, "Every process of the job"):
#  a. a job that starts 50 `setsid -f` children and exits: none is alive after run returns, as
#     root (the job's own cgroup: v2 and v1, each way of learning of new processes) and as nobody
#     (no cgroup: the proc connector where the kernel lets nobody listen, and the walk of /proc)
#  b. a double-forked daemon, and a job that keeps starting setsid'ed children while it is ended
#  c. a Python process of the tree that exits 5 still gets its bundle (test_run.sh has the rest)
#  d. which mechanism run used is in process.json's "supervisor"; the job's cgroup is a child of
#     run's own (its limits still apply) and is removed at the end
# Only processes with this test's marker as their argv[0] are looked at (the marker comes to the
# job in $MK, so that no other process has it in its command line); the trap kills what is left
# of them and removes the cgroups of this test's runs.
source "$(dirname "$0")/../lib.sh"
cp_setup shared
CP="$CP_BIN/crashpack"
M=cptest-tree-$$
RUNS=() # the pids of the runs started in the background (their cgroups are crashpack-run-PID)
nbundles() { ls "$T"/bundles/crash-*.zst 2>/dev/null | wc -l; }
# alive NAME: how many processes of this test with the marker NAME run (the bracket keeps pgrep
# from matching itself)
alive() { pgrep -f "cptest-tree-$$-${1%?}[${1: -1}]( |\$)" | wc -l; }
# pj BUNDLE EXPR: EXPR over process.json (d)
pj() { cp_member "$1" process.json > "$T/pj.json" && json "$T/pj.json" "$2"; }
tree_cleanup() {
    pkill -KILL -f "cptest-tree-$$-" 2>/dev/null
    local r d
    for r in "${RUNS[@]}"; do
        for d in /sys/fs/cgroup/unified/crashpack-run-$r /sys/fs/cgroup/crashpack-run-$r \
            /sys/fs/cgroup/*/crashpack-run-$r; do
            [ -d "$d" ] && { sleep 0.2; rmdir "$d" 2>/dev/null || echo "WARNING: could not remove $d" >&2; }
        done
    done
}
trap 'rc=$?; tree_cleanup; (exit $rc); cp_restore' EXIT
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)

# the job's children run `sleep 600` with argv[0] $MK
SLEEPER='exec -a "$MK" sleep 600'
# JOB: a job that starts 50 `setsid -f` children and exits 0 at once
JOB="for i in \$(seq 50); do setsid -f bash -c '$SLEEPER'; done; exit 0"
# cgroups_of RUNPID: the job cgroups of that run still there
cgroups_of() { ls -d /sys/fs/cgroup/*/crashpack-run-"$1" /sys/fs/cgroup/crashpack-run-"$1" 2>/dev/null; }

# ---- a. 50 setsid'ed children, each way of following the job ----
# tracker: --tracker value; who: root or nobody; want: the tracker process.json must name
# (auto: what this machine gives)
setsid_case() {
    local tracker=$1 who=$2 name=$1-$2 pre=() rc rpid
    [ "$who" = nobody ] && pre=("${NOBODY[@]}")
    MK=$M-$name-setsid "${pre[@]}" "$CP" run -q --no-pty --tracker="$tracker" -c "$T/conf" -- \
        bash -c "$JOB" > "$T/$name.out" 2>&1 9>&- &
    rpid=$!
    RUNS+=("$rpid")
    wait "$rpid"
    rc=$?
    check "$name: run exits with the job's 0" [ "$rc" = 0 ]
    check "$name: none of the 50 setsid'ed children is alive" [ "$(alive "$name-setsid")" = 0 ]
    check "$name: no cgroup of the run is left" [ -z "$(cgroups_of "$rpid")" ]
}
for tr in auto cgroup2 cgroup1 cgroup2,connector cgroup1,connector connector walk scan; do
    setsid_case "$tr" root
done
for tr in auto connector walk; do
    setsid_case "$tr" nobody
done

# ---- b. a double-forked daemon; a job that keeps starting children while it is ended ----
daemon_case() {
    local tracker=$1 who=$2 name=$1-$2-d pre=() rc
    [ "$who" = nobody ] && pre=("${NOBODY[@]}")
    MK=$M-$name-daemon "${pre[@]}" "$CP" run -q --no-pty --tracker="$tracker" -c "$T/conf" -- \
        bash -c "(cd / && setsid bash -c '($SLEEPER < /dev/null > /dev/null 2>&1 &)' &)
sleep 0.2; exit 0" > /dev/null 2>&1 9>&- &
    RUNS+=("$!")
    wait "$!"
    rc=$?
    check "$name: run exits 0" [ "$rc" = 0 ]
    check "$name: the double-forked daemon is gone" [ "$(alive "$name-daemon")" = 0 ]
}
# the main process exits after 0.5 s; a loop that ignores SIGTERM keeps starting setsid'ed
# sleeps until run's SIGKILL ends it (the sleeps ignore SIGTERM too)
cat > "$T/storm.sh" <<'EOF'
setsid bash -c 'trap "" TERM
for i in $(seq 3000); do setsid -f bash -c "exec -a \"\$MK\" sleep 600"; done' &
sleep 0.5
exit 0
EOF
chmod 644 "$T/storm.sh"
storm_case() {
    local tracker=$1 who=$2 name=$1-$2-s pre=() rc
    [ "$who" = nobody ] && pre=("${NOBODY[@]}")
    MK=$M-$name-storm "${pre[@]}" "$CP" run -q --no-pty --grace 1 --tracker="$tracker" \
        -c "$T/conf" -- bash "$T/storm.sh" > /dev/null 2>&1 9>&- &
    RUNS+=("$!")
    wait "$!"
    rc=$?
    check "$name: run exits 0" [ "$rc" = 0 ]
    sleep 0.3 # a child forked in the last instant would show up now
    check "$name: nothing of the storm is alive" [ "$(alive "$name-storm")" = 0 ]
}
for tr in auto cgroup1 walk; do
    daemon_case "$tr" root
    storm_case "$tr" root
done
daemon_case walk nobody
storm_case walk nobody
daemon_case auto nobody

# ---- c, d. a Python exit under each mechanism: its bundle, and the mechanism recorded ----
# py_case TRACKER WANT_TRACKER WANT_DISCOVERY
py_case() {
    rm -f "$T"/bundles/crash-*.zst
    MK=$M-py-$1-setsid "$CP" run --no-pty --tracker="$1" -c "$T/conf" -- bash -c "
setsid -f bash -c '$SLEEPER'
python3 -c 'import sys, time; time.sleep(1); print(\"py failing\", flush=True); sys.exit(5)'
exit 0" > "$T/py.out" 2> "$T/py.err" 9>&-
    rc=$?
    check "python ($1): run exits 0" [ "$rc" = 0 ]
    check "python ($1): one bundle, for the Python process" [ "$(nbundles)" = 1 ]
    local b
    b=$(ls "$T"/bundles/crash-*-python3*.zst 2>/dev/null | head -1)
    check "python ($1): its death, exit status 5" [ -n "$b" ] && \
        [ "$(cp_member "$b" manifest.json | python3 -c 'import json,sys; d=json.load(sys.stdin)["death"]; print(d["kind"], d["status"])')" = "exit 5" ]
    check "python ($1): its identity (exe python, cmdline, environment)" \
        [ "$(pj "$b" '"python" in d["exe"], d["cmdline"][0].split("/")[-1], d["python"], "PATH" in (d["environ"] or {})')" = "(True, 'python3', True, True)" ]
    check "python ($1): process.json names the mechanism ($2, $3)" \
        [ "$(pj "$b" 'd["supervisor"]["tracker"], d["supervisor"]["discovery"]')" = "('$2', '$3')" ]
    check "python ($1): the setsid'ed child is gone" [ "$(alive "py-$1-setsid")" = 0 ]
}
# what this machine has: cgroup v2 when run can make one in the unified hierarchy, else v1
if grep -q ' - cgroup2 ' /proc/self/mountinfo; then CG=cgroup2; else CG=cgroup1; fi
py_case auto "$CG" connector
py_case cgroup1 cgroup1 cgroup.procs
py_case cgroup2 cgroup2 cgroup.procs
py_case connector connector connector
py_case walk walk walk
b=$(ls "$T"/bundles/crash-*-python3*.zst 2>/dev/null | head -1)
check "walk: process.json says why there is no cgroup nor connector" \
    [ "$(pj "$b" 'sorted(d["supervisor"]["not_used"])')" = "['cgroup', 'connector']" ]
rm -f "$T"/bundles/crash-*.zst

# ---- d. the job's cgroup: a child of run's own, holding every process of the job ----
for tr in cgroup2 cgroup1; do
    MK=$M-cg-$tr-setsid "$CP" run -q --no-pty --tracker="$tr" -c "$T/conf" -- bash -c "
setsid -f bash -c '$SLEEPER'
cat /proc/self/cgroup > '$T/cg.job'
sleep 1.5" > /dev/null 2>&1 9>&- &
    rpid=$!
    RUNS+=("$rpid")
    for i in $(seq 50); do [ "$(alive "cg-$tr-setsid")" = 1 ] && [ -s "$T/cg.job" ] && break; sleep 0.1; done
    spid=$(pgrep -f "$M-cg-$tr-setsi[d]( |\$)" | head -1)
    if [ "$tr" = cgroup2 ]; then
        own=$(sed -n 's/^0:://p' /proc/$rpid/cgroup)
        want="0::${own%/}/crashpack-run-$rpid"
        check "$tr: the job's cgroup is a child of run's own" grep -qx "$want" "$T/cg.job"
        check "$tr: the setsid'ed child is in it" grep -qx "$want" "/proc/$spid/cgroup"
    else
        own=$(awk -F: '$2 == "freezer" {print $3}' /proc/$rpid/cgroup)
        want="freezer:${own%/}/crashpack-run-$rpid"
        check "$tr: the job's freezer cgroup is a child of run's own" grep -q ":$want\$" "$T/cg.job"
        check "$tr: the setsid'ed child is in it" grep -q ":$want\$" "/proc/$spid/cgroup"
        # the other v1 hierarchies (the memory cgroup and its limit) are the job's as they were
        check "$tr: the job's memory cgroup is run's" \
            [ "$(grep ':memory:' "$T/cg.job")" = "$(grep ':memory:' /proc/$rpid/cgroup)" ]
    fi
    wait "$rpid"
    check "$tr: the setsid'ed child is gone" [ "$(alive "cg-$tr-setsid")" = 0 ]
    check "$tr: the cgroup is removed" [ -z "$(cgroups_of "$rpid")" ]
    rm -f "$T/cg.job"
done
finish
