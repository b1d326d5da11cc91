#!/usr/bin/env bash
# Acceptance (issue 6, #2 and #3): `crashpack snap PID` on a live process.
#  - cp-hang8 (8 threads blocked 8 ways, one in uninterruptible sleep under vfork): the core opens
#    in gdb with every stopped thread's backtrace, the never-stopped thread is reported from its
#    kernel-side state, every stopped thread has its stop time, the process carries on and exits
#    0 once released, and `crashpack analyze` classifies each thread's blocking state.
#  - cp-deadlock (lock-order inversion): hang.deadlocks names both threads, both mutexes by
#    their global symbol, the frame each blocks in, and what each holds; --full --kill keeps the
#    whole memory and ends the process.
source "$(dirname "$0")/../lib.sh"
cp_setup shared

wait_ready() { # FILE -> waits for the fixture's "ready" line
    local i
    for ((i = 0; i < 300; i++)); do grep -q '^ready' "$1" 2>/dev/null && return 0; sleep 0.1; done
    return 1
}

# ---- 1. eight blocked threads ----
"$CP_BIN/cp-hang8" > "$T/hang8.out" 2>&1 &
hpid=$!
wait_ready "$T/hang8.out" || die "cp-hang8 did not get ready"
"$CP_BIN/crashpack" snap -c "$T/conf" --json "$hpid" > "$T/snap.out" 2> "$T/snap.err"
src=$?
cat "$T/snap.err"
check "crashpack snap exits 0" [ "$src" = 0 ]
bundle=$(json "$T/snap.out" 'd["bundle"]["path"]')
check "the bundle is in the configured bundle directory" [ -f "$bundle" ] && [ "$(dirname "$bundle")" = "$T/bundles" ]
# the process is intact: release it, it finishes its work and exits 0
kill -USR1 "$hpid"
wait "$hpid"
hrc=$?
check "the snapped process exits 0 after being released" [ "$hrc" = 0 ]
check "the snapped process finished its work" grep -q '^done' "$T/hang8.out"

mkdir -p "$T/h8" && tar --zstd -xf "$bundle" -C "$T/h8"
check "bundle has the usual evidence and snap.json" bash -c "cd '$T/h8' && [ -f manifest.json ] && [ -f core ] && [ -f proc/threads.json ] && [ -f kmsg.json ] && [ -f capture.json ] && [ -f snap.json ]"
check "manifest: trigger snap, signal 0" [ "$(json "$T/h8/manifest.json" 'd["capture"]["trigger"], d["signal"]["number"]')" = "('snap', 0)" ]
check "capture.json: slim core" [ "$(json "$T/h8/capture.json" 'd["core"]["mode"]')" = slim ]

S=$T/h8/snap.json
check "snap.json: 9 threads, 8 stopped, 1 not" [ "$(json "$S" 'd["stop"]["threads"], d["stop"]["threads_stopped"], d["stop"]["threads_not_stopped"]')" = "(9, 8, 1)" ]
check "every stopped thread has its stop time" [ "$(json "$S" 'all(isinstance(t["stop_ms"], (int, float)) and t["stop_ms"] >= 0 for t in d["threads"] if t["stopped"])')" = True ]
check "the vfork thread never stopped, and is reported from the kernel (D, vfork, wchan, kernel stack)" \
    [ "$(json "$S" '[(t["stopped"], t["state"], t["syscall"]["name"], bool(t["wchan"]), len(t["kernel_stack"]) > 0) for t in d["threads"] if t["name"] == "hang-vfork"]')" = "[(False, 'D', 'vfork', True, True)]" ]
check "the stop report went to stdout too" [ "$(json "$T/snap.out" 'd["snap"]["stop"]["threads_stopped"]')" = 8 ]

# gdb: every stopped thread's backtrace reaches the fixture's own function
gdb -batch -ex 'thread apply all bt' "$CP_BIN/cp-hang8" "$T/h8/core" > "$T/gdb.txt" 2>&1
check "gdb sees 9 threads" [ "$(grep -c '^Thread [0-9]' "$T/gdb.txt")" = 9 ]
for fn in main t_mutex t_cond t_epoll t_read t_sleep t_futex t_busy; do
    check "gdb backtrace reaches $fn" grep -q " $fn (" "$T/gdb.txt"
done
check "gdb backtraces go through libc (shared libraries found)" grep -q 'epoll_wait (epfd=' "$T/gdb.txt"

# analysis: each thread's state
"$CP_BIN/crashpack" analyze --json "$bundle" > "$T/h8.json"
st() { json "$T/h8.json" "[ (t['hang_state']['state']) for t in d['threads'] if t['name'] == '$1' ][0]"; }
check "crash_kind is hang" [ "$(json "$T/h8.json" 'd["crash_kind"]')" = hang ]
check "the signature is a hang signature (kind hang, the main thread's frames)" [ "$(json "$T/h8.json" 'str(d["signature"]).startswith("hang | ")')" = True ]
check "mutex thread: mutex_wait" [ "$(st hang-mutex)" = mutex_wait ]
check "mutex thread: the global held_mutex, owned by the main thread" \
    [ "$(json "$T/h8.json" "[(t['hang_state']['mutex_symbol'], t['hang_state']['mutex_owner'] == d['process']['pid']) for t in d['threads'] if t['name'] == 'hang-mutex'][0]")" = "('held_mutex', True)" ]
check "condvar thread: condvar_wait" [ "$(st hang-cond)" = condvar_wait ]
check "epoll thread: io_wait in epoll_wait on an eventpoll fd" \
    [ "$(json "$T/h8.json" "[(t['hang_state']['state'], t['hang_state']['syscall'], 'eventpoll' in t['hang_state']['fd_target']) for t in d['threads'] if t['name'] == 'hang-epoll'][0]")" = "('io_wait', 'epoll_wait', True)" ]
check "read thread: io_wait on a pipe" \
    [ "$(json "$T/h8.json" "[(t['hang_state']['state'], t['hang_state']['fd_target'].startswith('pipe:')) for t in d['threads'] if t['name'] == 'hang-read'][0]")" = "('io_wait', True)" ]
check "sleep thread: sleep" [ "$(st hang-sleep)" = sleep ]
check "futex thread: futex_wait on futex_word" \
    [ "$(json "$T/h8.json" "[(t['hang_state']['state'], t['hang_state']['mutex_symbol']) for t in d['threads'] if t['name'] == 'hang-futex'][0]")" = "('futex_wait', 'futex_word')" ]
check "busy thread: running" [ "$(st hang-busy)" = running ]
check "vfork thread: uninterruptible, kernel function named" \
    [ "$(json "$T/h8.json" "[(t['hang_state']['state'], bool(t['hang_state']['kernel_function'])) for t in d['threads'] if t['name'] == 'hang-vfork'][0]")" = "('uninterruptible', True)" ]
check "main thread: signal_wait" [ "$(st cp-hang8)" = signal_wait ]
check "no deadlock reported for cp-hang8" [ "$(json "$T/h8.json" 'len(d["hang"]["deadlocks"])')" = 0 ]
"$CP_BIN/crashpack" analyze "$bundle" > "$T/h8.txt"
check "text output has the hang section" grep -q 'uninterruptible' "$T/h8.txt"

# ---- 2. lock-order inversion ----
"$CP_BIN/cp-deadlock" > "$T/dl.out" 2>&1 &
dpid=$!
wait_ready "$T/dl.out" || die "cp-deadlock did not get ready"
read -r _ _ tab tba < "$T/dl.out"
"$CP_BIN/crashpack" snap -c "$T/conf" --json "$dpid" > "$T/dsnap.out" || fail "snap of cp-deadlock"
dbundle=$(json "$T/dsnap.out" 'd["bundle"]["path"]')
"$CP_BIN/crashpack" analyze --json "$dbundle" > "$T/dl.json"
D='d["hang"]["deadlocks"]'
check "one deadlock" [ "$(json "$T/dl.json" "len($D)")" = 1 ]
check "it names both threads" [ "$(json "$T/dl.json" "sorted(t['tid'] for t in $D[0]['threads'])")" = "$(python3 -c "print(sorted([$tab, $tba]))")" ]
check "worker-ab waits for lock_b held by worker-ba, holds lock_a" \
    [ "$(json "$T/dl.json" "[(t['waits_for_mutex_symbol'], t['owner_tid'], [h['symbol'] for h in t['holds']]) for t in $D[0]['threads'] if t['tid'] == $tab][0]")" = "('lock_b', $tba, ['lock_a'])" ]
check "worker-ba waits for lock_a held by worker-ab, holds lock_b" \
    [ "$(json "$T/dl.json" "[(t['waits_for_mutex_symbol'], t['owner_tid'], [h['symbol'] for h in t['holds']]) for t in $D[0]['threads'] if t['tid'] == $tba][0]")" = "('lock_a', $tab, ['lock_b'])" ]
check "both block in take_second, with their full stacks" \
    [ "$(json "$T/dl.json" "[(t['blocked_in'].split()[0], any(s.startswith('take_first') for s in t['stack'])) for t in $D[0]['threads']]")" = "[('take_second', True), ('take_second', True)]" ]
check "mutex addresses are hex" [ "$(json "$T/dl.json" "all(t['waits_for_mutex'].startswith('0x') for t in $D[0]['threads'])")" = True ]

# --full --kill: the whole memory, and the process is gone afterwards
"$CP_BIN/crashpack" snap -c "$T/conf" --full --kill --json "$dpid" > "$T/fsnap.out" || fail "snap --full --kill"
wait "$dpid" 2>/dev/null
drc=$?
check "--kill ended the process (SIGKILL)" [ "$drc" = 137 ]
fbundle=$(json "$T/fsnap.out" 'd["bundle"]["path"]')
mkdir -p "$T/full" && tar --zstd -xf "$fbundle" -C "$T/full"
check "full snap: capture.json mode full" [ "$(json "$T/full/capture.json" 'd["core"]["mode"]')" = full ]
gdb -batch -ex 'thread apply all bt' "$CP_BIN/cp-deadlock" "$T/full/core" > "$T/gdbf.txt" 2>&1
check "full core: gdb shows both workers in take_second" [ "$(grep -c ' take_second (' "$T/gdbf.txt")" = 2 ]
"$CP_BIN/crashpack" analyze --json "$fbundle" > "$T/full.json"
check "full core: the same deadlock" [ "$(json "$T/full.json" 'len(d["hang"]["deadlocks"])')" = 1 ]

# ---- 3. a process in another pid (and mount) namespace, like a container's ----
if command -v unshare > /dev/null && unshare -p -f -m --mount-proc true 2> /dev/null; then
    unshare -p -f -m --mount-proc "$CP_BIN/cp-deadlock" > "$T/ns.out" 2>&1 &
    upid=$!
    wait_ready "$T/ns.out" || die "cp-deadlock in a pid namespace did not get ready"
    npid=$(pgrep -P "$upid" -n)
    check "inside its namespace the process sees other tids ($(head -1 "$T/ns.out"))" [ "$(awk '{print $2}' "$T/ns.out")" = 1 ]
    "$CP_BIN/crashpack" snap -c "$T/conf" --kill --json "$npid" > "$T/nssnap.out" || fail "snap in a pid namespace"
    wait "$upid" 2>/dev/null
    "$CP_BIN/crashpack" analyze --json "$(json "$T/nssnap.out" 'd["bundle"]["path"]')" > "$T/ns.json"
    # the core and the report hold the tids the process sees (its namespace's, as in a kernel
    # core), glibc's owner words too; each thread carries its host_tid
    check "namespace: the deadlock's owners are the two workers, by their tids in the namespace" \
        [ "$(json "$T/ns.json" "sorted(t['owner_tid'] for t in d['hang']['deadlocks'][0]['threads']) == sorted(t['tid'] for t in d['threads'] if t['name'].startswith('worker'))")" = True ]
    check "namespace: the workers' tids are the namespace's (small), host_tid the host's" \
        [ "$(json "$T/ns.json" "all(t['tid'] < 10 and t['host_tid'] > t['tid'] for t in d['threads'] if t['name'].startswith('worker'))")" = True ]
    check "namespace: mutexes symbolized through the process's root" \
        [ "$(json "$T/ns.json" "sorted(t['waits_for_mutex_symbol'] for t in d['hang']['deadlocks'][0]['threads'])")" = "['lock_a', 'lock_b']" ]
else
    echo "SKIP (namespace part): unshare -p not available"
fi

# ---- 4. errors ----
"$CP_BIN/crashpack" snap -c "$T/conf" 999999999 > /dev/null 2>&1
check "a missing pid is a no-such-thing error (exit 3)" [ $? = 3 ]
finish
