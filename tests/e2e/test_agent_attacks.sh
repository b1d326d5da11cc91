#!/usr/bin/env bash
# The node service under attack (issue 22): the agent as root, the attacker as uid 65534
# (nobody), the victim as uid 1000; each attack made through the real paths, and each must fail.
#  2. pid reuse: the attacker connects, queues an exception request (all but its newline) on a
#     socket its child keeps, and exits; the victim gets the attacker's pid (ns_last_pid), then
#     the newline arrives: no bundle of the victim's process, nothing with the attacker's
#     exception.json (the request is bound to the connector's pidfd, which has exited);
#  3. a thread of the attacker waits on a futex in a mapped file that it deleted, and puts a FIFO,
#     then a symlink to a root-only ELF, where its maps say the file is: the exception capture
#     neither blocks the agent (a ping answers during it) nor puts a byte of the root-only file
#     (its symbol's name) into any bundle (mapped files are read through map_files);
#  4. dedup poisoning: an exit report "time": 9999999999 for a pid not in use; the victim's later
#     OOM kill at that pid still gets its own bundle;
#  8. fairness: 20 idle connections of the attacker do not stall the victim's ping; 30 requests of
#     the attacker (agent_rate 10) do not make the agent drop the victim's OOM-kill capture; 8
#     requests (max_use 1100K: each capture wants 1 MiB of room) do not make the vacuum delete the
#     victim's bundle;
# 13. the victim reads its own crashes through the agent (`crashpack db list/show/search`, no
#     knowledge base of its own), none of the attacker's, and the other way round.
# Everything the test creates (processes, the memory cgroup, files) is removed on exit.
source "$(dirname "$0")/../lib.sh"
cp_setup
command -v setpriv > /dev/null || { echo "SKIP: no setpriv"; exit 77; }
ATT=65534
VIC=1000
PY=/usr/bin/python3
chmod 755 "$T/bundles"
mkdir -m 755 "$T/run" "$T/state"
mkdir -m 700 "$T/secret"
mkdir -m 777 "$T/att" "$T/vic"
SOCK=$T/run/agent.sock
export SOCK
as_att() { setpriv --reuid $ATT --regid $ATT --clear-groups "$@"; }
as_vic() { setpriv --reuid $VIC --regid $VIC --clear-groups "$@"; }
AGENT=
start_agent() { # CONF [DB]
    "$CP_BIN/crashpack" agent -c "$1" --socket "$SOCK" --state-dir "$T/state" ${2:+--db "$2"} \
        2>> "$T/agent.log" &
    AGENT=$!
    for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
    [ -S "$SOCK" ] || { tail -3 "$T/agent.log" >&2; AGENT=; return 1; }
}
stop_agent() {
    [ -n "$AGENT" ] || return 0
    kill -TERM "$AGENT" 2> /dev/null
    for _ in $(seq 50); do kill -0 "$AGENT" 2> /dev/null || break; sleep 0.1; done
    kill -KILL "$AGENT" 2> /dev/null
    wait "$AGENT" 2> /dev/null
    rm -f "$SOCK"
    AGENT=
}
# a fresh agent for each attack: one that an attack left hung or spent does not fail the next
restart_agent() { stop_agent; start_agent "$@" || die "the agent did not start"; }
CG=
cleanup() {
    stop_agent
    local p
    for p in $(jobs -p); do kill -9 "$p" 2> /dev/null; done
    # the attacker's child that keeps its socket (it left the job table), by its pid
    [ -s "$T/att/reuse.child" ] && kill -9 "$(cat "$T/att/reuse.child")" 2> /dev/null
    [ -n "$CG" ] && rmdir "$CG" 2> /dev/null
    cp_restore
}
trap cleanup EXIT

# one request, one answer (the victim's and the attacker's client); a third argument registers
# first as a `crashpack run` of that job, as run does
cat > "$T/client.py" <<'EOF'
import json, os, socket, sys
def ask(req, timeout=60):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(os.environ["SOCK"])
    s.sendall(json.dumps(req).encode() + b"\n")
    buf = b""
    while not buf.endswith(b"\n"):
        b = s.recv(1 << 20)
        if not b:
            break
        buf += b
    return json.loads(buf)
req = json.loads(sys.argv[1])
if req.get("pid") == "self":
    req["pid"] = os.getpid()
if len(sys.argv) > 2:
    assert ask({"op": "register", "job": sys.argv[2]})["ok"]
print(json.dumps(ask(req)))
EOF
# a ping, as the victim: prints the seconds it took (99 when it got no answer in 20 s)
cat > "$T/ping.py" <<'EOF'
import json, os, socket, time
t = time.monotonic()
try:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(20)
    s.connect(os.environ["SOCK"])
    s.sendall(b'{"op":"ping"}\n')
    ok = json.loads(s.recv(4096))["ok"]
    print("%.2f" % (time.monotonic() - t) if ok else 99)
except Exception:
    print(99)
EOF
ping_s() { as_vic env SOCK="$SOCK" $PY "$T/ping.py"; }
ask_att() { as_att env SOCK="$SOCK" $PY "$T/client.py" "$@"; }
ask_vic() { as_vic env SOCK="$SOCK" $PY "$T/client.py" "$@"; }
# spawn_at PID CMD...: CMD in the background as pid PID (ns_last_pid; other processes of the
# machine may take it first: tried again). Sets SPAWNED; 1 when PID could not be had.
spawn_at() {
    local want=$1 i
    shift
    for i in $(seq 50); do
        [ -e /proc/$want ] && return 1
        echo $((want - 1)) > /proc/sys/kernel/ns_last_pid
        "$@" &
        SPAWNED=$!
        [ "$SPAWNED" = "$want" ] && return 0
        kill -9 "$SPAWNED" 2> /dev/null
        wait "$SPAWNED" 2> /dev/null
    done
    return 1
}
free_pid() { # a pid not in use, near the last one given
    local p=$(( $(cat /proc/sys/kernel/ns_last_pid) + 400 + RANDOM % 300 ))
    while [ -e /proc/$p ]; do p=$((p + 1)); done
    echo $p
}
bundles_with() { # STRING: the bundles that hold it anywhere (any member, compressed or not)
    local b
    for b in "$T"/bundles/crash-*.zst "$T"/bundles2/crash-*.zst; do
        [ -f "$b" ] || continue
        zstd -dc -q "$b" 2> /dev/null | grep -aqF "$1" && echo "$b"
    done
}
manifest() { zstd -dc -q "$1" | tar -xOf - manifest.json; }
mem_cgroup() { # a memory-limited cgroup (v1 here, v2 where memory is on v2)
    local limit=$((96 << 20))
    if grep -qw memory /sys/fs/cgroup/cgroup.controllers 2> /dev/null; then
        CG=/sys/fs/cgroup/cp-attacks-$$
        mkdir "$CG" && echo $limit > "$CG/memory.max" && { echo 0 > "$CG/memory.swap.max"; true; }
    elif [ -d /sys/fs/cgroup/memory ]; then
        CG=/sys/fs/cgroup/memory/cp-attacks-$$
        mkdir "$CG" && echo $limit > "$CG/memory.limit_in_bytes"
        echo 0 > "$CG/memory.swappiness" 2> /dev/null
        echo $limit > "$CG/memory.memsw.limit_in_bytes" 2> /dev/null
    fi
    [ -n "$CG" ] && [ -d "$CG" ]
}
# the victim's process that the OOM killer kills (into the cgroup as root, then uid 1000)
VICTIM_OOM='echo $$ > "$1/cgroup.procs" && exec setpriv --reuid 1000 --regid 1000 --clear-groups \
    /usr/bin/python3 -c "
x = []
while True:
    x.append(bytearray(1 << 20))"'
oom_bundle_of() { # PID: the oom_kill bundle of PID (waits for it)
    local b
    for _ in $(seq 150); do
        for b in "$T"/bundles/crash-*-"$1"-*.zst; do
            [ -f "$b" ] && manifest "$b" | grep -q '"oom_kill"' && { echo "$b"; return 0; }
        done
        sleep 0.2
    done
    return 1
}
mem_cgroup || CG=

cat > "$T/conf1" <<CONF
bundle_dir = $T/bundles
max_use = 100%
keep_free = 0
burst_full = 100
repeat_full = 100
agent_rate = 10
CONF
start_agent "$T/conf1" || die "the agent did not start"

# ---- 2. pid reuse: the request of a process that has gone, its pid now the victim's ----
MARK2="forged-exception-$$-$RANDOM"
cat > "$T/att/reuse.py" <<'EOF'
import json, os, socket, sys, time
out, go, mark = sys.argv[1], sys.argv[2], sys.argv[3]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(os.environ["SOCK"])
doc = json.dumps({"format": "crashpack-exception/1", "exception": {"type": "ValueError", "message": mark}})
req = {"op": "capture", "kind": "exception", "pid": os.getpid(), "reason": "uncaught ValueError",
       "members": {"exception.json": doc}}
s.sendall(json.dumps(req).encode())  # all but the newline
if os.fork() == 0:  # the child keeps the socket; the connector exits
    open(out + ".child", "w").write(str(os.getpid()))
    while not os.path.exists(go):
        time.sleep(0.01)
    s.sendall(b"\n")
    s.settimeout(60)
    buf = b""
    while not buf.endswith(b"\n"):
        b = s.recv(65536)
        if not b:
            break
        buf += b
    open(out, "wb").write(buf or b"{}")
    os._exit(0)
print(os.getpid(), flush=True)
os._exit(0)
EOF
as_att env SOCK="$SOCK" $PY "$T/att/reuse.py" "$T/att/reuse" "$T/att/go" "$MARK2" > "$T/reuse.pid"
P=$(cat "$T/reuse.pid")
if spawn_at "$P" setpriv --reuid $VIC --regid $VIC --clear-groups $PY -c 'import time; time.sleep(120)'; then
    VPID=$SPAWNED
    touch "$T/att/go"
    for _ in $(seq 300); do [ -s "$T/att/reuse" ] && break; sleep 0.1; done
    a=$(cat "$T/att/reuse" 2> /dev/null)
    check "pid reuse: the queued request of the exited connector is refused ($a)" \
        [ "$(echo "$a" | json /dev/stdin 'd.get("ok") is False and "exited" in d.get("error", "")')" = True ]
    check "pid reuse: no bundle of the victim's process $P" \
        [ -z "$(ls "$T"/bundles/crash-*-"$P"-*.zst 2> /dev/null)" ]
    check "pid reuse: no bundle carries the attacker's exception.json" [ -z "$(bundles_with "$MARK2")" ]
    check "pid reuse: the victim's process runs on" kill -0 "$VPID"
    kill -9 "$VPID"
    wait "$VPID" 2> /dev/null
else
    fail "pid reuse: could not give the victim pid $P"
fi

# ---- 3. the futex's file replaced by a symlink to a root-only ELF, then by a FIFO ----
restart_agent "$T/conf1"
MARK3="cp_secret_$$_$RANDOM"
echo "int ${MARK3}[4096] = {1};" > "$T/secret/s.c"
cc -shared -fPIC -o "$T/secret/secret.so" "$T/secret/s.c" || die "cc failed"
chmod 600 "$T/secret/secret.so"
rm -f "$T/secret/s.c"
OFF=$(nm "$T/secret/secret.so" | awk -v m="$MARK3" '$3 == m {print $1}')
[ -n "$OFF" ] || die "no symbol $MARK3 in the secret ELF"
OFF=$((16#$OFF))
cat > "$T/att/futex.py" <<'EOF'
import ctypes, json, mmap, os, socket, sys, threading, time
mode, d, off, target = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
path = os.path.join(d, "lib-%s.bin" % mode)
size = (off // 4096 + 2) * 4096
with open(path, "wb") as f:
    f.truncate(size)
fd = os.open(path, os.O_RDWR)
m = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
addr = ctypes.addressof(ctypes.c_char.from_buffer(m)) + off
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def wait():  # FUTEX_WAIT on a word that is 0: blocks
    libc.syscall(ctypes.c_long(202), ctypes.c_void_p(addr), ctypes.c_int(0), ctypes.c_int(0),
                 ctypes.c_void_p(0))
threading.Thread(target=wait, daemon=True).start()
time.sleep(0.3)
os.close(fd)
os.unlink(path)
if mode == "fifo":
    os.mkfifo(path + " (deleted)")
else:
    os.symlink(target, path + " (deleted)")
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(90)
s.connect(os.environ["SOCK"])
req = {"op": "capture", "kind": "exception", "pid": os.getpid(), "reason": "uncaught ValueError",
       "members": {"exception.json": json.dumps({"format": "crashpack-exception/1"})}}
s.sendall(json.dumps(req).encode() + b"\n")
buf = b""
try:
    while not buf.endswith(b"\n"):
        b = s.recv(65536)
        if not b:
            break
        buf += b
except socket.timeout:
    buf = b'{"timeout": true}'
print(buf.decode().strip(), flush=True)
EOF
for mode in symlink fifo; do
    as_att env SOCK="$SOCK" $PY "$T/att/futex.py" $mode "$T/att" "$OFF" "$T/secret/secret.so" \
        > "$T/futex-$mode.out" 2>&1 &
    FP=$!
    sleep 1.5 # the capture is under way
    s=$(ping_s)
    check "futex $mode: a ping answers during the attack (${s}s)" python3 -c "import sys; sys.exit(0 if float('$s') < 5 else 1)"
    for _ in $(seq 300); do kill -0 $FP 2> /dev/null || break; sleep 0.1; done
    kill -9 $FP 2> /dev/null
    wait $FP 2> /dev/null
    check "futex $mode: the attacker's capture ended ($(head -c 300 "$T/futex-$mode.out"))" \
        grep -q '"ok"' "$T/futex-$mode.out"
    check "futex $mode: no bundle holds the root-only file's symbol" [ -z "$(bundles_with "$MARK3")" ]
done

# ---- 4. a report "from the future" for a pid not in use; later the victim dies there ----
restart_agent "$T/conf1"
P4=$(free_pid)
a=$(ask_att '{"op":"capture","kind":"exit","pid":'$P4',"status":1,"time":9999999999,"comm":"poison"}' poison-$$)
check "dedup poisoning: the attacker's report itself is taken ($a)" \
    [ "$(echo "$a" | json /dev/stdin 'd.get("ok")')" = True ]
b=$(echo "$a" | json /dev/stdin 'd.get("bundle","")')
check "dedup poisoning: the report is named by the agent's clock, not 9999999999" \
    bash -c "[ -f '$b' ] && ! echo '$b' | grep -q 9999999999"
if [ -z "$CG" ]; then
    echo "SKIP (part): no memory cgroup controller"
elif spawn_at "$P4" bash -c "$VICTIM_OOM" _ "$CG"; then
    wait "$SPAWNED"
    b=$(oom_bundle_of "$P4")
    check "dedup poisoning: the victim's OOM kill at pid $P4 has its own bundle ($b)" [ -n "$b" ]
    [ -n "$b" ] && check "dedup poisoning: that bundle is uid $VIC's" \
        [ "$(manifest "$b" | json /dev/stdin 'd["uid"]')" = $VIC ]
    VIC_OOM=$b
else
    fail "dedup poisoning: could not give the victim pid $P4"
fi

# ---- 8a. idle connections do not stall the agent ----
restart_agent "$T/conf1"
cat > "$T/att/idle.py" <<'EOF'
import os, socket, sys, time
keep = []
for _ in range(int(sys.argv[1])):
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(os.environ["SOCK"])
        keep.append(s)
    except OSError:
        pass
print(len(keep), flush=True)
time.sleep(float(sys.argv[2]))
EOF
setpriv --reuid $ATT --regid $ATT --clear-groups env SOCK="$SOCK" $PY "$T/att/idle.py" 20 30 \
    > "$T/idle.out" &
IDLE=$!
sleep 0.5
s=$(ping_s)
check "20 idle connections of the attacker: the victim's ping answers at once (${s}s)" \
    python3 -c "import sys; sys.exit(0 if float('$s') < 2 else 1)"
sleep 3.5
check "the idle connections were dropped after their timeout: the attacker can connect again" \
    bash -c "ask_att() { setpriv --reuid $ATT --regid $ATT --clear-groups env SOCK='$SOCK' $PY '$T/client.py' \"\$@\"; }; ask_att '{\"op\":\"ping\"}' | grep -q '\"ok\": true'"
kill $IDLE 2> /dev/null
wait $IDLE 2> /dev/null

# ---- 8b. the attacker's requests do not cost the victim its OOM-kill capture ----
restart_agent "$T/conf1"
cat > "$T/att/flood.py" <<'EOF'
import json, os, socket, sys
def ask(req):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(60)
    s.connect(os.environ["SOCK"])
    s.sendall(json.dumps(req).encode() + b"\n")
    buf = b""
    while not buf.endswith(b"\n"):
        b = s.recv(65536)
        if not b:
            break
        buf += b
    return json.loads(buf)
assert ask({"op": "register", "job": "flood"})["ok"]
n = int(sys.argv[1])
size = int(sys.argv[2]) if len(sys.argv) > 2 else 16
ok = 0
for i in range(n):
    a = ask({"op": "capture", "kind": "exit", "pid": 4000000 + i, "status": 1, "comm": "flood",
             "members": {"output.txt": os.urandom(size // 2).hex()}})
    ok += a.get("ok") is True
print(ok)
EOF
n=$(as_att env SOCK="$SOCK" $PY "$T/att/flood.py" 30)
check "30 requests of the attacker: at most agent_rate (10) were taken ($n)" [ "$n" -le 10 ]
if [ -n "$CG" ]; then
    bash -c "$VICTIM_OOM" _ "$CG" &
    V8=$!
    wait $V8
    check "after the attacker's 30 requests, the victim's OOM kill (pid $V8) is captured" \
        bash -c "$(declare -f oom_bundle_of manifest); T='$T'; oom_bundle_of $V8 > /dev/null"
    grep -q "OOM kill of pid $V8 .*rate limited" "$T/agent.log" && fail "the victim's OOM kill was rate limited"
fi

# ---- 13. users read their own crashes through the agent ----
stop_agent
ATT_B=$(ls -t "$T"/bundles/crash-*-flood.zst 2> /dev/null | head -1)
KB=$T/kb.sqlite
"$CP_BIN/crashpack" db add --db "$KB" ${VIC_OOM:+"$VIC_OOM"} "$ATT_B" > "$T/dbadd.out" 2>&1
chmod 600 "$KB"
start_agent "$T/conf1" "$KB" || fail "the agent did not start with --db $KB"
db_as() { # USER-FN ARGS...: crashpack db as that user, no knowledge base of its own
    local who=$1
    shift
    $who env -i PATH=/usr/bin:/bin HOME=/nonexistent CRASHPACK_AGENT_SOCKET="$SOCK" \
        "$CP_BIN/crashpack" db "$@"
}
ids_of() { json /dev/stdin '" ".join(str(c["id"]) for c in d["crashes"])'; }
check "the knowledge base is root's alone" as_vic bash -c "! cat '$KB' > /dev/null 2>&1"
if [ -n "${VIC_OOM:-}" ]; then
    vl=$(db_as as_vic list --json | ids_of)
    al=$(db_as as_att list --json | ids_of)
    check "db list through the agent: the victim sees its crash ($vl)" [ -n "$vl" ]
    check "db list through the agent: the attacker sees its own ($al), none of the victim's" \
        bash -c "[ -n '$al' ] && [ '$al' != '$vl' ] && ! echo ' $al ' | grep -q ' $vl '"
    db_as as_vic list > "$T/vic-list.txt" 2>&1
    check "db list (text) through the agent: one crash for the victim" grep -qx '1 crash' "$T/vic-list.txt"
    db_as as_vic show --json "$vl" > "$T/vic-show.json" 2>&1
    check "db show of its own crash through the agent" \
        [ "$(json "$T/vic-show.json" 'd["format"] + " " + str(d["id"])')" = "crashpack-db-show/1 $vl" ]
    db_as as_vic show "$al" > /dev/null 2> "$T/show-other.err"
    check "db show of the attacker's crash: no such crash for the victim (exit 3)" [ $? = 3 ]
    sl=$(db_as as_vic search flood --json | ids_of)
    check "db search through the agent: none of the attacker's crashes ($sl)" [ -z "$sl" ]
fi
stop_agent

# ---- 8c. the attacker's requests make no room by deleting the victim's bundle ----
mkdir -m 755 "$T/bundles2"
sed -e "s|^bundle_dir = .*|bundle_dir = $T/bundles2|" -e 's/^max_use = .*/max_use = 1100K/' \
    -e 's/^agent_rate = .*/agent_rate = 100/' "$T/conf1" > "$T/conf2"
start_agent "$T/conf2" || die "the agent did not start"
as_vic sh -c 'exit 3' &
gone=$!
wait $gone
a=$(ask_vic '{"op":"capture","kind":"exit","pid":'$gone',"status":3,"comm":"victim"}' vic-$$)
VB=$(echo "$a" | json /dev/stdin 'd.get("bundle","")')
check "the victim's own bundle ($a)" [ -f "$VB" ]
sleep 1.2 # the oldest bundle by its time: the one a vacuum of oldest-first would delete first
n=$(as_att env SOCK="$SOCK" $PY "$T/att/flood.py" 8 20000)
check "8 requests of the attacker with 20 KB members were answered ($n taken)" [ -n "$n" ]
check "the vacuum left the victim's bundle in place" [ -f "$VB" ]
check "the bundle directory stays within max_use (1100K)" \
    [ "$(du -sk --exclude=.slots "$T/bundles2" | cut -f1)" -le 1104 ]
stop_agent
check "no sanitizer report from the agent" cp_no_sanitizer_report "$T/agent.log"
finish
