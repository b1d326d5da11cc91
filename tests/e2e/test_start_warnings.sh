#!/usr/bin/env bash
# test_start_warnings.sh - issue 23, acceptance 9: the warnings come at the start, and `run -o DIR`
# applies to every bundle run causes.
#  - an ordinary user's `crashpack run` with no agent: one warning line before the job's first
#    output line (its deaths will not be captured, and how to fix it); the job runs and exits 3;
#    no bundle is written, and the end says how many ends were not captured;
#  - the same with the agent (root) running: no warning; the exit bundle is written;
#  - `run -o DIR` as that user with the agent: the death bundle is in DIR (a copy the user made of
#    the agent's bundle, with the user's own credentials), and the status line names it;
#  - `run -o DIR` where the user cannot write DIR (root's): a warning at the start, and nothing is
#    written there;
#  - root's `run -o DIR` with no agent (crashpack-capture --event directly): the bundle in DIR;
#  - an ordinary user's `snap` of their own process: refused before it is stopped, with the
#    setting that blocks it named (the root-owned bundle directory, or
#    kernel.yama.ptrace_scope), the process left running.
# The agent reads the kernel log: the test takes the lock (cp_setup); it reads only its own
# processes and files.
source "$(dirname "$0")/../lib.sh"
cp_setup
command -v setpriv > /dev/null || { echo "SKIP: no setpriv"; exit 77; }
NOBODY=65534
CP="$CP_BIN/crashpack"
as_nobody() { setpriv --reuid $NOBODY --regid $NOBODY --clear-groups "$@"; }
mkdir -m 755 "$T/run" "$T/state" "$T/rootout" "$T/rootonly"
mkdir -m 700 "$T/out" "$T/cwd"
chown $NOBODY:$NOBODY "$T/out" "$T/cwd"
chmod 755 "$T/bundles"
chmod 644 "$T/conf"
SOCK=$T/run/agent.sock
nbundles() { find "$1" -maxdepth 1 -name 'crash-*.zst' | wc -l | tr -d ' '; }
JOB='echo "first line of the job"; exit 3'

# ---- no agent, an ordinary user: the warning first ----
(cd "$T/cwd" && CRASHPACK_AGENT_SOCKET=$T/none.sock as_nobody "$CP" run -c "$T/conf" --no-pty -- bash -c "$JOB") \
    > "$T/none.all" 2>&1
rc=$?
cat "$T/none.all"
warn="crashpack run: warning: no agent at $T/none.sock: No such file or directory, and crashpack run is not root: the deaths of this job's processes will not be captured; start \`crashpack agent\` as root (scripts/systemd/crashpack-agent.service), set agent_socket in the configuration (or CRASHPACK_AGENT_SOCKET) to the socket it listens on, or run crashpack run as root"
check "no agent: the job's exit status (3)" [ $rc = 3 ]
check "no agent: the warning is the first line, before the job's output" \
    [ "$(head -1 "$T/none.all")" = "$warn" ]
check "no agent: then the job's output" [ "$(sed -n 2p "$T/none.all")" = "first line of the job" ]
check "no agent: warned once" [ "$(grep -c 'warning' "$T/none.all")" = 1 ]
check "no agent: the end counts what was not captured" \
    grep -qx "crashpack run: 1 abnormal end(s) of the job's processes not captured" "$T/none.all"
check "no agent: no bundle" [ "$(nbundles "$T/bundles")" = 0 ]

# ---- the agent ----
"$CP" agent -c "$T/conf" --socket "$SOCK" --state-dir "$T/state" 2> "$T/agent.log" &
AGENT=$!
trap 'rc=$?; kill $AGENT 2>/dev/null; wait $AGENT 2>/dev/null; (exit $rc); cp_restore' EXIT
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
[ -S "$SOCK" ] || { cat "$T/agent.log" >&2; die "the agent did not start"; }

(cd "$T/cwd" && CRASHPACK_AGENT_SOCKET=$SOCK as_nobody "$CP" run -c "$T/conf" --no-pty -- bash -c "$JOB") \
    > "$T/agent.all" 2>&1
rc=$?
cat "$T/agent.all"
check "agent: exit 3" [ $rc = 3 ]
check "agent: no warning" bash -c "! grep -q warning '$T/agent.all'"
check "agent: the exit bundle is written" [ "$(nbundles "$T/bundles")" = 1 ]

# ---- run -o DIR as the user, through the agent ----
(cd "$T/cwd" && CRASHPACK_AGENT_SOCKET=$SOCK as_nobody "$CP" run -c "$T/conf" --no-pty -o "$T/out" -- bash -c "$JOB") \
    > "$T/out.all" 2>&1
rc=$?
cat "$T/out.all"
check "-o DIR: exit 3, no warning" bash -c "[ $rc = 3 ] && ! grep -q warning '$T/out.all'"
check "-o DIR: one bundle in DIR" [ "$(nbundles "$T/out")" = 1 ]
b=$(find "$T/out" -name 'crash-*.zst' | head -1)
check "-o DIR: the status line names it" grep -q "exited with status 3: bundle $b (a copy of $T/bundles/" "$T/out.all"
check "-o DIR: the copy is the user's, 0600" [ "$(stat -c '%u %a' "$b")" = "$NOBODY 600" ]
check "-o DIR: it is the job's exit bundle" \
    [ "$(cp_member "$b" manifest.json | json /dev/stdin 'd["death"]["kind"], d["death"]["status"]')" = "('exit', 3)" ]
check "-o DIR: the same bytes as the agent's bundle" cmp -s "$b" "$T/bundles/$(basename "$b")"

# ---- run -o DIR that the user cannot write: warned at the start, nothing written there ----
(cd "$T/cwd" && CRASHPACK_AGENT_SOCKET=$SOCK as_nobody "$CP" run -c "$T/conf" --no-pty -o "$T/rootonly" -- bash -c "$JOB") \
    > "$T/ro.all" 2>&1
rc=$?
cat "$T/ro.all"
check "-o a root-owned DIR: the warning first" \
    [ "$(head -1 "$T/ro.all")" = "crashpack run: warning: -o $T/rootonly: Permission denied: its bundles stay in the bundle directory" ]
check "-o a root-owned DIR: nothing written there" [ -z "$(ls -A "$T/rootonly")" ]
check "-o a root-owned DIR: the status line says it was not copied" grep -q "; not copied to $T/rootonly: $T/rootonly/crash-.*: Permission denied" "$T/ro.all"

kill $AGENT; wait $AGENT 2>/dev/null
trap cp_restore EXIT
check "no sanitizer report from the agent" cp_no_sanitizer_report "$T/agent.log"

# ---- root's run -o DIR, no agent: crashpack-capture --event directly, the bundle in DIR ----
CRASHPACK_AGENT_SOCKET=$T/none.sock "$CP" run -c "$T/conf" --no-pty -o "$T/rootout" -- bash -c "$JOB" > "$T/root.all" 2>&1
rc=$?
cat "$T/root.all"
check "root, no agent: exit 3, no warning" bash -c "[ $rc = 3 ] && ! grep -q warning '$T/root.all'"
check "root, no agent, -o DIR: the bundle in DIR" [ "$(nbundles "$T/rootout")" = 1 ]

# ---- an ordinary user's snap of their own process ----
setpriv --reuid $NOBODY --regid $NOBODY --clear-groups sleep 300 &
SP=$!
trap 'rc=$?; kill $SP 2>/dev/null; (exit $rc); cp_restore' EXIT
for _ in $(seq 50); do [ "$(cat /proc/$SP/comm 2>/dev/null)" = sleep ] && break; sleep 0.1; done
(cd "$T/cwd" && as_nobody "$CP" snap -c "$T/conf" $SP) > "$T/snap.out" 2> "$T/snap.err"
rc=$?
cat "$T/snap.out" "$T/snap.err"
check "user snap: exit 1, nothing on stdout" bash -c "[ $rc = 1 ] && [ ! -s '$T/snap.out' ]"
check "user snap: one line naming the pid and the setting that blocks it" bash -c \
    "[ \$(wc -l < '$T/snap.err') = 1 ] && grep -Eq '^crashpack snap: cannot snapshot pid $SP \\(sleep\\): (kernel.yama.ptrace_scope is [123]|a snapshot.s bundle is written by crashpack-capture into the root-owned bundle directory, which uid $NOBODY cannot write: run crashpack snap as root)' '$T/snap.err'"
check "user snap: the process was not stopped and still runs" bash -c \
    "[ \"\$(awk '/^TracerPid/ {print \$2}' /proc/$SP/status)\" = 0 ] && kill -0 $SP"
kill $SP
finish
