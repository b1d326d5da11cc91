#!/usr/bin/env bash
# Python frames' local variables, opt-in (issue 23; docs/python.md "Local variables"):
#  1. `crashpack snap --locals` of a live CPython (Debian's 3.11, pyenv's 3.12 and 3.13, and Debian
#     sid's 3.14 in its root when test_python_frames has built it):
#     the frame's locals with their reprs (int, negative int, float, str with escapes, bytes, bool,
#     None, a cell variable, an object by type and address), a secret masked by its name and a
#     token by its form, a huge str capped at 120 bytes; none without --locals; the configuration's
#     `python_locals = on` does what --locals does; the text shows them under the frame (a
#     snapshot's Markdown shows no thread's frames).
#  2. the exception hook with `python_locals = on` (the hook installed into a venv, the job run as
#     nobody, the agent as root): the raising thread's frames at the raise carry their locals
#     (the hook's reprs), the secret masked, the huge one capped, shown in text and Markdown; the
#     same job without it records none, and its output and status are the same either way.
source "$(dirname "$0")/../lib.sh"
cp_setup shared
command -v setpriv > /dev/null || { echo "SKIP: no setpriv"; exit 77; }
PY=/usr/bin/python3
NOBODY=65534

wait_ready() { # FILE
    local i
    for ((i = 0; i < 300; i++)); do grep -q '^ready' "$1" 2> /dev/null && return 0; sleep 0.1; done
    return 1
}

cat > "$T/locals.py" <<'EOF'
import sys, time

class Opaque:
    pass

def work(n, password, blob):
    count = 42
    neg = -7
    ratio = 0.1
    name = "shard-17\n'q'"
    data = b"\x00ab'c"
    flag = True
    nothing = None
    thing = Opaque()
    huge = "y" * 100000
    hub = "hf_" + "a" * 34
    def inner():  # count is a cell variable
        return count
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    time.sleep(600)

work(3, "hunter2-secret-pw", b"z" * 500)
EOF
# what the frame `work` of locals.py shows: Python's reprs, the secrets masked
cat > "$T/expect.json" <<'EOF'
{"n": "3", "count": "42", "neg": "-7", "ratio": "0.1", "flag": "True", "nothing": "None",
 "name": "\"shard-17\\n'q'\"", "data": "b\"\\x00ab'c\"",
 "password": "'*****************'", "hub": "'hf_**********************************'"}
EOF
# the checks on one report's frame `work`; $1 report, $2 label
check_work_locals() {
    local r=$1 l=$2 loc='[f for t in d["threads"] for f in t["python_frames"] if f["function"] == "work"][0]["locals"]'
    local E="json.load(open('$T/expect.json'))"
    check "$l: ints, a cell, a float, a str and bytes as Python's repr, True, None, secrets masked" \
        [ "$(json "$r" "{k: ($loc.get(k), v) for k, v in $E.items() if $loc.get(k) != v}")" = "{}" ]
    check "$l: an object by its type and address" \
        [ "$(json "$r" "__import__('re').fullmatch(r'<Opaque object at 0x[0-9a-f]+>', $loc['thing']) is not None")" = True ]
    check "$l: no secret anywhere in the report" \
        [ "$(json "$r" "'hunter2' in str(d) or 'hf_aaaa' in str(d)")" = False ]
    check "$l: the huge str capped at 120 bytes" \
        [ "$(json "$r" "(len($loc['huge'].encode()), $loc['huge'][:4], $loc['huge'][-3:])")" = "(120, \"'yyy\", '...')" ]
}

# ---- 1. crashpack snap --locals ----
# VERSION:PYTHON:SCRIPT:SYSROOT; 3.14 is Debian sid's, chrooted into the root scripts/mkroot.sh
# built for test_python_frames (not built here: skipped without it)
pythons="3.11:$PY:$T/locals.py:"
for v in 3.12 3.13; do
    p=$(ls -d /root/.pyenv/versions/$v.*/bin/python$v 2> /dev/null | sort -V | tail -1)
    if [ -n "$p" ]; then pythons="$pythons $v:$p:$T/locals.py:"; else echo "note: no pyenv CPython $v: its case is skipped"; fi
done
SID=${CP_ROOTS_DIR:-/var/cache/crashpack/roots}/sid
W=/tmp/cp-locals.$$
if [ -x "$SID/usr/bin/python3.14" ] && command -v chroot > /dev/null; then
    mkdir -p "$SID$W" && cp "$T/locals.py" "$SID$W/"
    printf '#!/bin/sh\nexec chroot %s /usr/bin/python3.14 "$@"\n' "$SID" > "$T/py314"
    chmod +x "$T/py314"
    pythons="$pythons 3.14:$T/py314:$W/locals.py:$SID"
else
    echo "note: no Debian sid root with python3.14 at $SID: the 3.14 case is skipped"
fi
for vp in $pythons; do
    IFS=: read -r v p script sysroot <<< "$vp"
    "$p" "$script" > "$T/prog-$v.out" 2>&1 &
    pid=$!
    wait_ready "$T/prog-$v.out" || die "$v: the program did not get ready"
    "$CP_BIN/crashpack" snap -c "$T/conf" --json "$pid" > "$T/off-$v.snap" 2> "$T/off-$v.err"
    "$CP_BIN/crashpack" snap -c "$T/conf" --locals --json "$pid" > "$T/on-$v.snap" 2> "$T/on-$v.err"
    kill "$pid"
    wait "$pid" 2> /dev/null
    off=$(json "$T/off-$v.snap" 'd["bundle"]["path"]') on=$(json "$T/on-$v.snap" 'd["bundle"]["path"]')
    "$CP_BIN/crashpack" analyze --json ${sysroot:+--sysroot "$sysroot"} "$off" > "$T/off-$v.json" 2> /dev/null || true
    "$CP_BIN/crashpack" analyze --json ${sysroot:+--sysroot "$sysroot"} "$on" > "$T/on-$v.json" 2> /dev/null || true
    check "$v snap: without --locals no frame has locals" \
        [ "$(json "$T/off-$v.json" '[f["function"] for t in d["threads"] for f in t["python_frames"] if "locals" in f] == [] and "work" in str(d["threads"])')" = True ]
    check "$v snap --locals: snap.json says python_locals" \
        [ "$(cp_member "$on" snap.json | python3 -c 'import json,sys; print(json.load(sys.stdin).get("python_locals"))')" = True ]
    check_work_locals "$T/on-$v.json" "$v snap --locals"
    [ "$v" = 3.11 ] && on311=$on
done
rm -rf "${SID:?}$W"
"$CP_BIN/crashpack" analyze "$on311" > "$T/on.txt" 2>&1 || true
check "text: the locals under the frame" \
    bash -c "grep -A3 -F 'in work' '$T/on.txt' | grep -q '^      locals:' && grep -q '^        count = 42\$' '$T/on.txt'"
# the configuration's python_locals = on, without --locals
sed 's/^python_locals.*//' "$T/conf" > "$T/conf.locals"
echo "python_locals = on" >> "$T/conf.locals"
$PY "$T/locals.py" > "$T/prog-conf.out" 2>&1 &
pid=$!
wait_ready "$T/prog-conf.out" || die "the program did not get ready"
"$CP_BIN/crashpack" snap -c "$T/conf.locals" --json "$pid" > "$T/conf.snap" 2> "$T/conf.err"
kill "$pid"
wait "$pid" 2> /dev/null
"$CP_BIN/crashpack" analyze --json "$(json "$T/conf.snap" 'd["bundle"]["path"]')" > "$T/conf.json" 2> /dev/null || true
check_work_locals "$T/conf.json" "python_locals = on"

# ---- 2. the exception hook with python_locals = on ----
chmod 755 "$T/bundles"
mkdir -m 755 "$T/run" "$T/state"
SOCK=$T/run/agent.sock
echo "agent_socket = $SOCK" >> "$T/conf"
"$CP_BIN/crashpack" agent -c "$T/conf" --state-dir "$T/state" 2> "$T/agent.log" &
AGENT=$!
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
[ -S "$SOCK" ] || { cat "$T/agent.log" >&2; die "the agent did not start"; }
$PY -m venv "$T/venv" > /dev/null 2>&1 || { echo "SKIP: python3 -m venv failed"; exit 77; }
V=$T/venv/bin/python
"$CP_BIN/crashpack" python-hook install --python "$V" > /dev/null || die "python-hook install failed"
chmod -R a+rX "$T/venv"
mkdir -m 1777 "$T/job"
printf 'python_locals = on\nagent_socket = %s\n' "$SOCK" > "$T/job/hook.conf"
chmod 644 "$T/job/hook.conf"
cat > "$T/job/raise.py" <<'EOF'
def step(batch, db_password):
    loss = 0.25
    huge = "q" * 10000
    raise ValueError("bad batch %d" % batch)

step(17, "dr0w55ap-t3rc3s"[::-1])
EOF
bundles_of() { ls "$T"/bundles/crash-*.zst 2> /dev/null | sort; }
run_hook() { # NAME CONFIG
    ( cd "$T/job" && env -i PATH=/usr/bin:/bin HOME=/nonexistent CRASHPACK_HOOK=1 CRASHPACK_CONFIG="$2" \
        CRASHPACK_AGENT_SOCKET="$SOCK" CRASHPACK_STATE_DIR="$T/job/state-$1" \
        setpriv --reuid $NOBODY --regid $NOBODY --clear-groups "$V" raise.py \
        > "$T/$1.out" 2> "$T/$1.err"; echo $? > "$T/$1.rc" )
}
for mode in on off; do
    before=$(bundles_of)
    conf=/nonexistent
    [ $mode = on ] && conf=$T/job/hook.conf
    run_hook "hook-$mode" "$conf"
    b=$(comm -13 <(echo "$before") <(bundles_of) | head -1)
    check "hook $mode: one bundle" [ -n "$b" ]
    [ -n "$b" ] && "$CP_BIN/crashpack" analyze --json "$b" > "$T/hook-$mode.json" 2> /dev/null
    [ -n "$b" ] && "$CP_BIN/crashpack" analyze "$b" > "$T/hook-$mode.txt" 2>&1
    [ -n "$b" ] && "$CP_BIN/crashpack" report "$b" > "$T/hook-$mode.md" 2>&1
done
check "hook: the same stderr and status with python_locals on and off" \
    bash -c "cmp -s '$T/hook-on.err' '$T/hook-off.err' && [ \"\$(cat '$T/hook-on.rc')\" = \"\$(cat '$T/hook-off.rc')\" ]"
step='[f for t in d["threads"] if t["tid"] == d["process"]["crashed_tid"] for f in t["python_frames"] if f["function"] == "step"][0]'
# (the capture's scrubber of the exception.json member masks the password's quotes as well)
check "hook on: the raising frame's locals (batch, loss), the password masked" \
    [ "$(json "$T/hook-on.json" "[$step['locals'][k] for k in ('batch', 'loss')] + [set($step['locals']['db_password']) <= set('*\\'')]")" = "['17', '0.25', True]" ]
check "hook on: the huge local capped" \
    [ "$(json "$T/hook-on.json" "(len($step['locals']['huge'].encode()) <= 120, $step['locals']['huge'][-3:])")" = "(True, '...')" ]
check "hook on: no secret anywhere in the report" bash -c "! grep -q 's3cr3t-pa55w0rd' '$T/hook-on.json' '$T/hook-on.txt' '$T/hook-on.md'"
check "hook on: text shows the locals under the frame" grep -q '^        batch = 17$' "$T/hook-on.txt"
check "hook on: Markdown shows them in the raising thread's section" grep -q '^      batch = 17$' "$T/hook-on.md"
check "hook off: no locals" [ "$(json "$T/hook-off.json" "'locals' in $step")" = False ]
kill -TERM $AGENT; wait $AGENT || true
check "no sanitizer report from the agent" cp_no_sanitizer_report "$T/agent.log"
finish
