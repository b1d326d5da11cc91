#!/usr/bin/env bash
# test_pyhook.sh - the Python exception hook (docs/python.md) activated with no change to the
# script: `crashpack python-hook install` into a venv of Debian's /usr/bin/python3 (with its
# python3-torch), CRASHPACK_HOOK=1, and a FAKE agent: a Unix socket server written here in Python
# that stands in for `crashpack agent` in this unit-level test only (it records each request and
# answers, or never answers). Checks: the request per docs/python.md; stderr and exit status
# byte-identical with and without the hook for a torch.cuda.OutOfMemoryError raised by hand with
# PyTorch's message, a ValueError, SystemExit(3) and KeyboardInterrupt; a hanging agent is
# abandoned after CRASHPACK_HOOK_TIMEOUT and recorded so; secrets masked; nothing happens without
# CRASHPACK_HOOK; the hook's import cost when off; uninstall removes exactly what install wrote.
# Also runs tests/unit/test_pyhook.py under /usr/bin/python3 and every pyenv CPython >= 3.8.
# No root, no core_pattern.
source "$(dirname "$0")/../lib.sh"
T=$(mktemp -d /tmp/cppyhook.XXXXXX)
trap 'for p in ${AGENTS:-}; do kill "$p" 2>/dev/null; done; rm -rf "$T"' EXIT
CP="$CP_BIN/crashpack"
export CRASHPACK_DATA_DIR="$CP_SRC" CRASHPACK_CONFIG=/nonexistent
unset CRASHPACK_HOOK CRASHPACK_HOOK_TIMEOUT
PY=/usr/bin/python3
[ -x $PY ] || { echo "SKIP: no /usr/bin/python3"; exit 77; }

# ---- the pure-Python unit tests, under every interpreter there is ----
pys=($PY)
PYENV_ROOT=${PYENV_ROOT:-$HOME/.pyenv}
for p in "$PYENV_ROOT"/versions/3.*/bin/python3; do
    [ -x "$p" ] && "$p" -c 'import sys; sys.exit(sys.version_info < (3, 8))' 2>/dev/null && pys+=("$p")
done
for p in "${pys[@]}"; do
    check "unit tests under $p ($("$p" -c 'import sys; print(sys.version.split()[0])'))" \
        "$p" "$CP_SRC/tests/unit/test_pyhook.py"
done

# ---- install into a venv ----
$PY -m venv --system-site-packages "$T/venv" >/dev/null 2>&1 || { echo "SKIP: python3 -m venv failed (python3-venv)"; finish; }
V=$T/venv/bin/python
SITE=$($V -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
(cd "$SITE" && find . | sort) > "$T/site.before"
"$CP" python-hook status --python "$V" > /dev/null
check "status before install: exit 3" [ $? = 3 ]
check "install: exit 0" "$CP" python-hook install --python "$V"
check "  the .pth is in the venv's site-packages" [ -f "$SITE/crashpack-hook.pth" ]
check "  and the package" [ -f "$SITE/crashpack/__init__.py" ]
"$CP" python-hook status --python "$V" --json > "$T/status.json"
check "status --json: exit 0, installed and intact" \
    [ "$(json "$T/status.json" 'd["format"], d["installed"], d["intact"], d["python"]["site_packages"]')" = "('crashpack-python-hook-status/1', True, True, '$SITE')" ]

# ---- the fake agent ----
cat > "$T/agent.py" <<'PY'
import json, os, socket, sys
path, out, mode = sys.argv[1], sys.argv[2], sys.argv[3]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(path)
s.listen(8)
open(path + ".ready", "w").close()
n = 0
while True:
    c, _ = s.accept()
    n += 1
    buf = b""
    while b"\n" not in buf:
        d = c.recv(65536)
        if not d:
            break
        buf += d
    if json.loads(buf or b"{}").get("op") == "ping":  # the hook's start-up check: answered, not counted
        n -= 1
        c.sendall(b'{"ok":true,"version":"fake","pid":1}\n')
        c.close()
        continue
    with open("%s/req.%d.json" % (out, n), "wb") as f:
        f.write(buf)
    if mode == "hang":  # never answer; note when the client gives up and closes
        c.recv(1)
        open("%s/closed.%d" % (out, n), "w").close()
    else:
        c.sendall(b'{"ok":true,"bundle":"/var/crash/fake.zst","mode":"slim","deduplicated":false}\n')
    c.close()
PY
AGENTS=
start_agent() { # DIR MODE
    mkdir -p "$1"
    $PY "$T/agent.py" "$1/sock" "$1" "$2" & AGENTS="$AGENTS $!"
    for _ in $(seq 100); do [ -e "$1/sock.ready" ] && return 0; sleep 0.1; done
    die "the fake agent did not start"
}
start_agent "$T/ok" ok
start_agent "$T/hang" hang
nreq() { find "$1" -name 'req.*.json' | wc -l | tr -d ' '; }

cat > "$T/oom.py" <<'PY'
import torch
def step():
    raise torch.cuda.OutOfMemoryError(
        "CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity; "
        "14.21 GiB already allocated; 3.19 MiB free; 14.74 GiB reserved in total by PyTorch) If "
        "reserved memory is >> allocated memory try setting max_split_size_mb to avoid "
        "fragmentation.  See documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF")
step()
PY
cat > "$T/value.py" <<'PY'
import os
class Dataset:
    def __getitem__(self, i):
        raise ValueError("sample %d: bad record (token %s)" % (i, os.environ["HF_TOKEN"]))
Dataset()[7]
PY
printf 'import sys\nprint("bye")\nsys.exit(3)\n' > "$T/exit3.py"
printf 'raise KeyboardInterrupt\n' > "$T/kbd.py"
export HF_TOKEN=hf_secretvalue123
# runit NAME SCRIPT [ENV...]: stderr in $T/NAME.err, exit status in $T/NAME.rc
runit() { local n=$1 s=$2; shift 2; env "$@" "$V" "$s" > "$T/$n.out" 2> "$T/$n.err"; echo $? > "$T/$n.rc"; }
for s in oom value exit3 kbd; do
    before=$(nreq "$T/ok")
    runit "$s.plain" "$T/$s.py" CRASHPACK_AGENT_SOCKET="$T/ok/sock"
    check "$s without CRASHPACK_HOOK: no request" [ "$(nreq "$T/ok")" = "$before" ]
    runit "$s.hook" "$T/$s.py" CRASHPACK_HOOK=1 CRASHPACK_AGENT_SOCKET="$T/ok/sock" CRASHPACK_STATE_DIR="$T/state"
    check "$s: stderr byte-identical with the hook" cmp "$T/$s.plain.err" "$T/$s.hook.err"
    check "$s: stdout identical" cmp "$T/$s.plain.out" "$T/$s.hook.out"
    check "$s: exit status identical ($(cat "$T/$s.plain.rc"))" cmp "$T/$s.plain.rc" "$T/$s.hook.rc"
    case $s in
    oom | value) check "$s: one request" [ "$(nreq "$T/ok")" = $((before + 1)) ] ;;
    *) check "$s: no request (not a crash)" [ "$(nreq "$T/ok")" = "$before" ] ;;
    esac
done
check "the OOM run exits 1" [ "$(cat "$T/oom.plain.rc")" = 1 ]
check "the OOM run's stderr ends with PyTorch's message" grep -q '^torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB' "$T/oom.plain.err"

# the requests: req.1 is the OOM's, req.2 the ValueError's
cat > "$T/checkreq.py" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
want = sys.argv[2]
assert set(r) == {"op", "kind", "pid", "start_time", "status", "signal", "time", "trigger", "reason",
                  "job", "members"}, sorted(r)
assert (r["op"], r["kind"], r["trigger"], r["status"], r["signal"]) == ("capture", "exception", "hook", None, None), r
assert isinstance(r["start_time"], int) and r["start_time"] > 0
assert list(r["members"]) == ["exception.json"]
d = json.loads(r["members"]["exception.json"])
assert d["format"] == "crashpack-exception/1" and d["hook"] == "sys.excepthook" and d["fatal"] is True
assert d["pid"] == r["pid"] and d["thread"]["name"] == "MainThread" and d["thread"]["native_id"] == r["pid"]
assert d["python"]["implementation"] == "cpython" and d["abandoned"] is False and d["events"] == []
e = d["exception"]
assert e["type"] == want, e["type"]
if want == "torch.cuda.OutOfMemoryError":
    assert e["mro"] == [want, "RuntimeError", "Exception", "BaseException"], e["mro"]
    assert e["message"].startswith("CUDA out of memory. Tried to allocate 20.00 MiB"), e["message"]
    assert [f["function"] for f in e["frames"]] == ["<module>", "step"], e["frames"]
else:
    assert e["frames"][-1]["qualname"] == "Dataset.__getitem__", e["frames"]
    assert "hf_secretvalue123" not in r["members"]["exception.json"]
    assert "(token *****************)" in e["message"], e["message"]
assert e["frames"][-1]["file"].endswith(".py") and isinstance(e["frames"][-1]["line"], int)
PY
check "OOM request: per spec, type and MRO, PyTorch's message, frames" $PY "$T/checkreq.py" "$T/ok/req.1.json" torch.cuda.OutOfMemoryError
check "ValueError request: per spec, the secret masked" $PY "$T/checkreq.py" "$T/ok/req.2.json" ValueError

# ---- a hanging agent: abandoned after the limit, the exit goes on ----
runit value.hang "$T/value.py" CRASHPACK_HOOK=1 CRASHPACK_HOOK_TIMEOUT=2 CRASHPACK_AGENT_SOCKET="$T/hang/sock" CRASHPACK_STATE_DIR="$T/state"
check "hanging agent: the process exited with the same status" cmp "$T/value.plain.rc" "$T/value.hang.rc"
check "  the same stderr" cmp "$T/value.plain.err" "$T/value.hang.err"
check "  the agent got the request" [ "$(nreq "$T/hang")" = 1 ]
for _ in $(seq 50); do [ -e "$T/hang/closed.1" ] && break; sleep 0.1; done
check "  and saw the hook close the connection" [ -e "$T/hang/closed.1" ]
hpid=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$T/hang/req.1.json")
check "  the state file records it as abandoned" \
    [ "$(json "$T/state/exception-$hpid.json" 'd["abandoned"], d["exception"]["type"]')" = "(True, 'ValueError')" ]

# ---- no agent at all: one warning at start-up (issue 23), then the same stderr ----
runit value.none "$T/value.py" CRASHPACK_HOOK=1 CRASHPACK_AGENT_SOCKET="$T/none.sock" CRASHPACK_STATE_DIR="$T/state"
warn="crashpack: warning: no crashpack agent answers at $T/none.sock (nothing listens there): an uncaught exception in this process will not be captured; start \`crashpack agent\` as root (scripts/systemd/crashpack-agent.service), or set agent_socket in /nonexistent (or CRASHPACK_AGENT_SOCKET) to the socket it listens on"
check "no agent: the warning is the first line of stderr, once" bash -c \
    "[ \"\$(head -1 '$T/value.none.err')\" = \"\$1\" ] && [ \$(grep -c '^crashpack: warning' '$T/value.none.err') = 1 ]" _ "$warn"
check "no agent: then the same stderr, same status" bash -c "cmp -s '$T/value.plain.err' <(tail -n +2 '$T/value.none.err') && cmp -s '$T/value.plain.rc' '$T/value.none.rc'"
runit warn.child "$T/exit3.py" CRASHPACK_HOOK=1 CRASHPACK_AGENT_SOCKET="$T/none.sock" CRASHPACK_HOOK_WARNED=1
check "no agent, CRASHPACK_HOOK_WARNED set (a process of a job that warned): quiet" bash -c "! grep -q warning '$T/warn.child.err'"
printf 'import os, subprocess, sys\nsubprocess.run([sys.executable, "-c", "pass"])\n' > "$T/parent.py"
runit warn.tree "$T/parent.py" CRASHPACK_HOOK=1 CRASHPACK_AGENT_SOCKET="$T/none.sock"
check "no agent: a process and the Python it starts warn once in all" [ "$(grep -c '^crashpack: warning' "$T/warn.tree.err")" = 1 ]

# ---- off: cheap, and crashpack itself is not even imported ----
"$V" -X importtime -c pass 2> "$T/importtime.off"
us=$(awk -F'|' '$3 ~ /_crashpack_hook$/ {gsub(/ /, "", $2); print $2}' "$T/importtime.off")
echo "import time of _crashpack_hook with the hook off: ${us:-?} us (cumulative)"
check "off: _crashpack_hook imported, crashpack not" bash -c "grep -q '_crashpack_hook\$' '$T/importtime.off' && ! grep -Eq '\\| +crashpack\$' '$T/importtime.off'"
CRASHPACK_HOOK=1 "$V" -X importtime -c pass 2> "$T/importtime.on"
check "on: crashpack imported" grep -Eq '\| +crashpack$' "$T/importtime.on"

# ---- a missing package with the hook on: at most one line ----
mv "$SITE/crashpack" "$T/moved"
CRASHPACK_HOOK=1 "$V" -c pass 2> "$T/broken.err"
check "package missing, hook on: one line, prefixed crashpack:" bash -c "[ \$(wc -l < '$T/broken.err') = 1 ] && grep -q '^crashpack: ' '$T/broken.err'"
mv "$T/moved" "$SITE/crashpack"

# ---- uninstall: exactly what install wrote ----
check "uninstall: exit 0" "$CP" python-hook uninstall --python "$V"
(cd "$SITE" && find . | sort) > "$T/site.after"
check "  site-packages as before the install" diff "$T/site.before" "$T/site.after"
"$CP" python-hook status --python "$V" > /dev/null
check "status after uninstall: exit 3" [ $? = 3 ]
echo "# not ours" > "$SITE/_crashpack_hook.py"
"$CP" python-hook install --python "$V" 2> "$T/foreign.err"
check "install over a file it did not write: exit 1, the file kept" bash -c "[ $? = 1 ] && grep -q 'not ours' '$SITE/_crashpack_hook.py'"
check "install --force: exit 0" "$CP" python-hook install --force --python "$V"
echo "# changed" >> "$SITE/crashpack/_report.py"
"$CP" python-hook uninstall --python "$V" 2> /dev/null
check "uninstall with a changed file: exit 1, that file kept" bash -c "[ $? = 1 ] && [ -f '$SITE/crashpack/_report.py' ] && [ ! -e '$SITE/crashpack-hook.pth' ]"
finish
