#!/usr/bin/env bash
# The node service (crashpack agent, issue 13): jobs run as an ordinary user (nobody), the agent as
# root.
#  - ping, and the agent's pid through SO_PEERCRED;
#  - an exception capture of the caller itself: a live snapshot (core of every thread) with its
#    exception.json, death kind exception, readable by the caller; a request naming another pid
#    is refused;
#  - a reported exit of a process of the caller's uid, from a caller registered as its `crashpack
#    run` (op register): a metadata-only bundle, identity "reported" by that uid; the same report
#    from an unregistered caller, and a report about another uid's live process, are refused;
#  - acceptance 4: a real kernel OOM kill in a memory-limited cgroup (v1 memory.limit_in_bytes
#    here, v2 memory.max where memory is on v2), with no supervisor: a bundle for the killed
#    process with the kernel's kill lines and the cgroup's limit; the same death reported again
#    (as `crashpack run` would) is deduplicated, not written twice.
source "$(dirname "$0")/../lib.sh"
cp_setup
command -v setpriv > /dev/null || { echo "SKIP: no setpriv"; exit 77; }
NOBODY=65534
mkdir -m 755 "$T/run" "$T/state"
chmod 755 "$T/bundles"
SOCK=$T/run/agent.sock
"$CP_BIN/crashpack" agent -c "$T/conf" --socket "$SOCK" --state-dir "$T/state" 2> "$T/agent.log" &
AGENT=$!
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
[ -S "$SOCK" ] || { cat "$T/agent.log" >&2; die "the agent did not start"; }
check "the socket is 0666 (callers are told apart by SO_PEERCRED)" \
    [ "$(stat -c %a "$SOCK")" = 666 ]

# a client, as the job would be: one JSON line out, one back; with a third argument it first
# registers as a `crashpack run` of that job (op register), as run does before it reports
cat > "$T/client.py" <<'EOF'
import json, os, socket, struct, sys
def ask(req):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sys.argv[1])
    pid, uid, gid = struct.unpack("3i", s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    s.sendall(json.dumps(req).encode() + b"\n")
    buf = b""
    while not buf.endswith(b"\n"):
        b = s.recv(65536)
        if not b:
            break
        buf += b
    ans = json.loads(buf)
    ans["peer_pid"] = pid
    return ans
req = json.loads(sys.argv[2])
if req.get("pid") == "self":
    req["pid"] = os.getpid()
if len(sys.argv) > 3:
    assert ask({"op": "register", "job": sys.argv[3]})["ok"]
print(json.dumps(ask(req)))
EOF
export -f cp_member
as_nobody() { setpriv --reuid $NOBODY --regid $NOBODY --clear-groups "$@"; }
ask() { as_nobody /usr/bin/python3 "$T/client.py" "$SOCK" "$@"; }

a=$(ask '{"op":"ping"}')
check "ping answers with the agent's pid" [ "$(echo "$a" | json /dev/stdin 'd["pid"] == d["peer_pid"] == '$AGENT)" = True ]

# --- an exception capture of the caller itself ---
MARK="agent-exc-$$-$RANDOM"
exc='{"format":"crashpack-exception/1","hook":"sys.excepthook","fatal":true,"exception":{"type":"ValueError","mro":["ValueError","Exception","BaseException"],"message":"'$MARK'","frames":[]}}'
req=$(python3 -c 'import json,sys; print(json.dumps({"op":"capture","kind":"exception","pid":"self","reason":"uncaught ValueError","members":{"exception.json":sys.argv[1]}}))' "$exc")
a=$(ask "$req")
b=$(echo "$a" | json /dev/stdin 'd.get("bundle","")')
check "exception capture: ok ($a)" [ -n "$b" ] && [ -f "$b" ]
if [ -f "$b" ]; then
    cp_member "$b" manifest.json > "$T/m1.json"
    check "exception bundle: death kind exception, trigger hook" \
        [ "$(json "$T/m1.json" 'd["death"]["kind"] + " " + d["death"]["trigger"]')" = "exception hook" ]
    check "exception bundle: the caller's own exception.json" bash -c "cp_member '$b' exception.json | grep -q '$MARK'"
    check "exception bundle: a live core of the caller" bash -c "zstd -dc -q '$b' | tar -tf - | grep -qx core"
    check "exception bundle: the caller (nobody) can read it" as_nobody test -r "$b"
fi
a=$(ask '{"op":"capture","kind":"exception","pid":1,"members":{}}')
check "an exception capture of another pid is refused" \
    [ "$(echo "$a" | json /dev/stdin 'd["ok"] is False and "not the caller" in d["error"]')" = True ]

# --- a reported exit ---
as_nobody bash -c 'exit 3' & gone=$!
wait $gone || true
a=$(ask '{"op":"capture","kind":"exit","pid":'$gone',"status":3,"comm":"train","members":{"output.txt":"last words\n"}}')
check "a report from a caller that is neither the process nor its registered run is refused" \
    [ "$(echo "$a" | json /dev/stdin 'd["ok"] is False and "supervises" in d["error"]')" = True ]
a=$(ask '{"op":"capture","kind":"exit","pid":'$gone',"status":3,"comm":"train","members":{"output.txt":"last words\n"}}' job-$$)
b=$(echo "$a" | json /dev/stdin 'd.get("bundle","")')
check "reported exit: ok ($a)" [ -f "$b" ]
if [ -f "$b" ]; then
    cp_member "$b" manifest.json > "$T/m2.json"
    check "reported exit: death exit, status 3, identity reported by uid 65534" \
        [ "$(json "$T/m2.json" '[d["death"][k] for k in ("kind","status","identity","reported_by_uid")]')" = "['exit', 3, 'reported', 65534]" ]
    check "reported exit: the bundle is the reporter's (uid 65534)" [ "$(json "$T/m2.json" 'd["uid"]')" = $NOBODY ]
    check "reported exit: no core" bash -c "! zstd -dc -q '$b' | tar -tf - | grep -qx core"
    check "reported exit: the output tail handed over" bash -c "cp_member '$b' output.txt | grep -q 'last words'"
fi
a=$(ask '{"op":"capture","kind":"exit","pid":1,"status":1}' job-$$)
check "a report about another uid's live process is refused" \
    [ "$(echo "$a" | json /dev/stdin 'd["ok"]')" = False ]
a=$(ask '{"op":"capture","kind":"oom_kill","pid":1}')
check "a caller cannot make an oom_kill bundle" [ "$(echo "$a" | json /dev/stdin 'd["ok"]')" = False ]

# --- acceptance 4: a real OOM kill in a memory-limited cgroup, no supervisor ---
LIMIT=$((96 << 20))
if grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
    CG=/sys/fs/cgroup/cp-agent-$$; mkdir "$CG"; echo $LIMIT > "$CG/memory.max"
    echo 0 > "$CG/memory.swap.max" 2>/dev/null || true
elif [ -d /sys/fs/cgroup/memory ]; then
    CG=/sys/fs/cgroup/memory/cp-agent-$$; mkdir "$CG"; echo $LIMIT > "$CG/memory.limit_in_bytes"
    echo 0 > "$CG/memory.swappiness" 2>/dev/null || true
    echo $LIMIT > "$CG/memory.memsw.limit_in_bytes" 2>/dev/null || true
else
    CG=
fi
if [ -z "$CG" ]; then
    echo "SKIP (part): no memory cgroup controller"
else
    trap 'rmdir "$CG" 2>/dev/null; cp_restore' EXIT
    # into the cgroup as root first, then the allocation as nobody: it can never grow outside
    bash -c 'echo $$ > "$1/cgroup.procs" && exec setpriv --reuid 65534 --regid 65534 --clear-groups \
        /usr/bin/python3 -c "
x = []
while True:
    x.append(bytearray(1 << 20))"' _ "$CG" & victim=$!
    wait $victim; st=$?
    check "the job died of SIGKILL (status $st)" [ $st = 137 ]
    b=
    for _ in $(seq 150); do
        b=$(ls "$T"/bundles/crash-*-$victim-*.zst 2>/dev/null | head -1)
        [ -n "$b" ] && break; sleep 0.2
    done
    check "OOM kill: a bundle for the killed pid $victim" [ -n "$b" ]
    if [ -n "$b" ]; then
        cp_member "$b" manifest.json > "$T/m3.json"
        check "OOM kill: death oom_kill, SIGKILL, by the agent" \
            [ "$(json "$T/m3.json" '[d["death"][k] for k in ("kind","signal","trigger")]')" = "['oom_kill', 9, 'agent']" ]
        cp_member "$b" kmsg.json > "$T/k3.json"
        check "OOM kill: the kernel's own kill line for pid $victim" \
            bash -c "grep -q 'Killed process $victim ' '$T/k3.json'"
        cp_member "$b" oom.json > "$T/o3.json"
        check "OOM kill: a memory cgroup's limit (CONSTRAINT_MEMCG)" \
            [ "$(json "$T/o3.json" 'd["constraint"] + " " + d["limit"]')" = "CONSTRAINT_MEMCG cgroup" ]
        check "OOM kill: the cgroup's limit value ($LIMIT)" bash -c \
            "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); v=list((d.get(\"cgroup_v2\") or {}).values())+list((d.get(\"cgroup_v1\") or {}).values()); sys.exit(0 if str($LIMIT) in v else 1)' '$T/o3.json'"
        check "OOM kill: the bundle belongs to the killed uid" [ "$(json "$T/m3.json" 'd["uid"]')" = $NOBODY ]
        # the same death reported by a supervisor: one death, one bundle
        a=$(ask '{"op":"capture","kind":"signal","pid":'$victim',"signal":9}' job-$$)
        check "the supervisor's report of the same kill is deduplicated ($a)" \
            [ "$(echo "$a" | json /dev/stdin 'd.get("deduplicated")')" = True ]
        check "still one bundle for pid $victim" [ "$(ls "$T"/bundles/crash-*-$victim-*.zst | wc -l)" = 1 ]
    fi
fi

kill -TERM $AGENT; wait $AGENT
check "the agent stops on SIGTERM and removes its socket" [ ! -e "$SOCK" ]
check "no sanitizer report from the agent" cp_no_sanitizer_report "$T/agent.log"
finish
