#!/usr/bin/env bash
# Issue 6, acceptance 1: Python frames recovered from the core of a crashed CPython.
#
# Real crashes of Debian's /usr/bin/python3 (3.11) through the real core_pattern path, each run with
# PYTHONFAULTHANDLER=1 and its stderr kept: faulthandler's dump ("Thread 0x... (most recent call
# first):" then `File "F", line N in FUNC` per frame) is CPython's own account of every thread, and
# `crashpack analyze --json` must report exactly the same function/file/line sequence for every
# Python thread (matched by pthread id), with each Python frame placed under a native
# _PyEval_EvalFrameDefault frame (python_merge "ok").
#   py_abort_deep    os.abort() three functions deep, with map() (a C call) in between: level_three
#                    and level_two share one eval frame, level_one and <module> the next one out;
#                    the crashed thread holds the GIL
#   torch_crash      a torch forward/backward step, then ctypes.string_at(0); torch's native worker
#                    threads have no Python frames
#   py_thread_crash  a non-main thread crashes while the main thread joins and another waits; the
#                    threads' names from threading's registry
#   pyenv versions   for each of PYENV_VERSIONS (3.11, 3.12, 3.13) that pyenv has installed:
#                    py_abort_deep and py_thread_crash again under that interpreter (_PyRuntime in
#                    libpython3.X.so): faulthandler's frames exactly, merge ok, the entry frames
#                    (3.11 is_entry; 3.12+ the frame after each C-stack shim), the GIL holder
#                    (3.12+: the interpreter's own GIL), the thread names; 3.13 reads the core's
#                    _Py_DebugOffsets and they must equal the generated table. A version not
#                    installed is skipped with one line saying so.
#   damaged frames   py_corrupt_frames.py rewrites its own frames (a self-link, a two-frame cycle,
#                    a bad code pointer) before it crashes: the analysis completes, the frames before
#                    the damage are right, and the thread says what stopped the walk (unmerged);
#                    3.13+ also damage _Py_DebugOffsets (a size too small, no cookie) or set its
#                    free_threaded flag: that build is refused as free-threaded, by the flag
#   cut bundles      the torch bundle cut short at several offsets: never a crash
#   two runtimes     pyenv 3.12 with pyenv's libpython3.13 loaded by ctypes (py_two_runtimes.py): the
#                    running runtime is reported, the never-started one is counted, not chosen
#   sid 3.14         py_abort_deep and py_thread_crash under Debian sid's python3.14, chrooted into
#                    the root scripts/mkroot.sh builds (skipped without it): its eval loop has no
#                    symbol, so the merge places each group by its shim frame's stack address
#   older pyenvs     3.9 (and older, when installed): found, named, and reported as unsupported
#                    (no frames, a clear reason)
source "$(dirname "$0")/../lib.sh"
PY=${CP_PYTHON:-/usr/bin/python3}
FIX=$CP_SRC/fixtures/programs
PYBIN=/usr/bin/python3
# pyenv's CPythons (the interpreter in libpython3.X.so, with DWARF), each when this machine has one;
# PYENV311 (CP_PYENV311) overrides the 3.11 one. To add a version: add it to PYENV_VERSIONS and its
# own expectations to pyenv_version_checks below.
PYENV_VERSIONS=${CP_PYENV_VERSIONS:-3.11 3.12 3.13}
PYENV311=${CP_PYENV311:-$(ls -d /root/.pyenv/versions/3.11.*/bin/python3.11 2>/dev/null | tail -1)}
pyenv_bin() {
    [ "$1" = 3.11 ] && { echo "$PYENV311"; return; }
    ls -d /root/.pyenv/versions/$1.*/bin/python$1 2>/dev/null | sort -V | tail -1
}
PYVER=3.11
cp_setup
cp_install

cat > "$T/check.py" <<'PYEOF'
"""check.py REPORT FAULTHANDLER_STDERR EXPR: EXPR over r (the report), fh (faulthandler's threads:
{thread_id: [(function, file, line)]}), cur (faulthandler's current thread id) is true."""
import json, os, re, sys

r = json.load(open(sys.argv[1]))
fh, cur, tid = {}, None, None
for ln in (open(sys.argv[2], errors="replace") if os.path.exists(sys.argv[2]) else []):
    # 3.14 adds the thread's name: "Current thread 0x... [python3.14] (most recent call first):"
    m = re.match(r"^(Current thread|Thread) (0x[0-9a-f]+)(?: \[.*\])? \(most recent call first\):", ln)
    if m:
        tid = int(m.group(2), 16)
        fh[tid] = []
        if m.group(1).startswith("Current"):
            cur = tid
        continue
    m = re.match(r'^  File "(.*)", line (\d+|\?\?\?) in (.*)$', ln.rstrip("\n"))
    if m and tid is not None:
        fh[tid].append((m.group(3), m.group(1), None if m.group(2) == "???" else int(m.group(2))))
    elif not ln.strip():
        tid = None

def pythreads(r):
    return {int(t["python"]["thread_id"], 16): t for t in r["threads"] if t.get("python")}

def seq(t):
    return [(f["function"], f["file"], f["line"]) for f in t["python_frames"]]

def same_as_faulthandler(r):
    py = pythreads(r)
    ok = set(py) == set(fh) and all(seq(py[k]) == fh[k] for k in fh)
    if not ok:
        for k in sorted(set(py) | set(fh)):
            print(f"  thread {k:#x}: report {seq(py[k]) if k in py else None}", file=sys.stderr)
            print(f"  thread {k:#x}: faulthandler {fh.get(k)}", file=sys.stderr)
    return ok and len(fh) > 0

EVAL_MODULE = os.environ.get("CHECK_EVAL_MODULE")

def is_eval(f):
    """the native frame that runs Python frames: _PyEval_EvalFrameDefault; where the interpreter has
    no name for it (CHECK_EVAL_MODULE: Debian's 3.14 runs the loop in an unnamed local clone) a
    frame of that module"""
    if EVAL_MODULE:
        return f.get("module") == EVAL_MODULE and f["function"] in (None, "_PyEval_EvalFrameDefault")
    return f["function"] == "_PyEval_EvalFrameDefault"

def merged_under_eval(r):
    """every Python frame's native_frame_index names a _PyEval_EvalFrameDefault frame, and the
    indices never go inwards as the Python frames go outwards"""
    for t in r["threads"]:
        pf = t["python_frames"]
        if not pf:
            continue
        if t["python_merge"] != "ok":
            print(f"  tid {t['tid']}: {t['python_merge']}", file=sys.stderr)
            return False
        idx = [f["native_frame_index"] for f in pf]
        if any(not isinstance(i, int) or not is_eval(t["frames"][i]) for i in idx) or idx != sorted(idx):
            print(f"  tid {t['tid']}: indices {idx}", file=sys.stderr)
            return False
    return True

def nfi(t, fn):
    return [f["native_frame_index"] for f in t["python_frames"] if f["function"] == fn][0]

def crashed(r):
    return [t for t in r["threads"] if t["crashed"]][0]

v = eval(sys.argv[3])
if not v:
    print("  false: " + sys.argv[3], file=sys.stderr)
sys.exit(0 if v else 1)
PYEOF

# pycrash NAME SCRIPT: runs the script with faulthandler on, stderr to $T/NAME.err; prints its pid
pycrash() {
    local name=$1
    shift
    PYTHONFAULTHANDLER=1 "$PYBIN" "$@" > /dev/null 2> "$T/$name.err" &
    local pid=$!
    wait $pid 2>/dev/null
    echo $pid
}
# pycrash_plain SCRIPT ARGS...: the same without faulthandler (it would walk damaged frames)
pycrash_plain() {
    "$PYBIN" "$@" > /dev/null 2>&1 &
    local pid=$!
    wait $pid 2>/dev/null
    echo $pid
}
# one NAME SCRIPT [ARGS...]: crash, analyze, and the checks every case shares
one() {
    local name=$1 script=$2 pid B rc=0
    shift 2
    pid=$(pycrash "$name" "$script" "$@")
    B=$(cp_bundle_for "$pid" 120) || { fail "$name: no bundle"; return 1; }
    timeout 300 "$CP_BIN/crashpack" analyze --json "$B" > "$T/$name.json" 2> "$T/$name.json.err" || rc=$?
    check "$name: analyze --json exits 0" [ "$rc" = 0 ]
    timeout 300 "$CP_BIN/crashpack" analyze "$B" > "$T/$name.txt" 2>&1
    check "$name: faulthandler wrote its dump" grep -q "most recent call first" "$T/$name.err"
    jc "$name" "the interpreter is CPython $PYVER, read through _PyRuntime" \
        'r["python"]["version"].startswith("'$PYVER'.") and r["python"]["supported"] and r["python"]["error"] is None and r["python"]["runtime_source"] == "symbol"'
    jc "$name" "every Python thread's function/file/line sequence is faulthandler's, exactly" \
        'same_as_faulthandler(r)'
    jc "$name" "every Python frame runs under a _PyEval_EvalFrameDefault frame (merge ok)" \
        'merged_under_eval(r)'
    jc "$name" "the crashed thread is faulthandler's current thread" \
        'int(crashed(r)["python"]["thread_id"], 16) == cur'
    jc "$name" "every thread has python_frames[] (the contract field)" \
        'all(isinstance(t.get("python_frames"), list) for t in r["threads"])'
    echo "$pid" > "$T/$name.pid"
}
jc() { local name=$1 desc=$2; shift 2; check "$name: $desc" "$PY" "$T/check.py" "$T/$name.json" "$T/$name.err" "$@"; }

# ---- 1. os.abort() three functions deep, a C call in between ----
one abort "$FIX/py_abort_deep.py"
jc abort "the frames are level_three, level_two, level_one, <module>" \
    '[f["function"] for f in crashed(r)["python_frames"]] == ["level_three", "level_two", "level_one", "<module>"]'
jc abort "Python-to-Python calls share one eval frame; map() (C) starts a new one" \
    'nfi(crashed(r), "level_three") == nfi(crashed(r), "level_two") < nfi(crashed(r), "level_one") == nfi(crashed(r), "<module>")'
jc abort "entry frames are level_two and <module>" \
    '[f["function"] for f in crashed(r)["python_frames"] if f["entry"]] == ["level_two", "<module>"]'
jc abort "native C frames (map's) lie between the two eval frames" \
    'nfi(crashed(r), "level_one") - nfi(crashed(r), "level_two") > 1'
jc abort "the GIL is held by the crashed thread" \
    'r["python"]["gil"]["locked"] and r["python"]["gil"]["holder_tid"] == crashed(r)["tid"] and crashed(r)["python"]["holds_gil"]'
check "abort: the text shows the traceback" grep -q "File \"$FIX/py_abort_deep.py\", line 17, in level_three  \[native #" "$T/abort.txt"
check "abort: the text names the interpreter" grep -q "^python    CPython 3.11" "$T/abort.txt"

# ---- 2. torch forward/backward, then ctypes.string_at(0) ----
one torch "$FIX/torch_crash.py"
jc torch "the crashed thread's frames end crash_now, train_step, main, <module>" \
    '[f["function"] for f in crashed(r)["python_frames"]][-4:] == ["crash_now", "train_step", "main", "<module>"]'
jc torch "a thread without a Python state has no Python frames and no merge" \
    'all(t["python"] is not None or (t["python_frames"] == [] and t["python_merge"] is None) for t in r["threads"])'

# ---- 3. a non-main thread crashes ----
one threads "$FIX/py_thread_crash.py"
pid=$(cat "$T/threads.pid" 2>/dev/null)
jc threads "three Python threads" 'len(pythreads(r)) == 3'
jc threads "the crashed thread is not the main thread, and runs crasher_inner" \
    'crashed(r)["tid"] != '"${pid:-0}"' and "crasher_inner" in [f["function"] for f in crashed(r)["python_frames"]]'
jc threads "the waiter and the main thread are where faulthandler saw them" \
    'any("waiter_inner" in [f["function"] for f in t["python_frames"]] for t in r["threads"]) and any(t["tid"] == '"${pid:-0}"' and t["python_frames"][-1]["function"] == "<module>" for t in r["threads"])'
jc threads "the Python thread names are threading's: MainThread, waiter, crasher" \
    'sorted(t["python"]["name"] for t in pythreads(r).values()) == ["MainThread", "crasher", "waiter"] and crashed(r)["python"]["name"] == "crasher"'
check "threads: the text names the crashed Python thread" grep -q 'Python thread 0x[0-9a-f]* "crasher", holds the GIL' "$T/threads.txt"

# ---- 3b. frames the process damaged itself ----
for mode in loop cycle code; do
    pid=$(PYBIN=/usr/bin/python3 pycrash_plain "$FIX/py_corrupt_frames.py" "$mode")
    B=$(cp_bundle_for "$pid" 120) || { fail "damaged $mode: no bundle"; continue; }
    rc=0
    timeout 300 "$CP_BIN/crashpack" analyze --json "$B" > "$T/d$mode.json" 2> "$T/d$mode.json.err" || rc=$?
    timeout 300 "$CP_BIN/crashpack" analyze "$B" > "$T/d$mode.txt" 2>&1
    check "damaged $mode: analyze --json exits 0 (rc $rc)" [ "$rc" = 0 ]
    jc "d$mode" "$mode: the frames up to the damage are right, the walk says why it stopped" \
        '[f["function"] for f in crashed(r)["python_frames"]][:2] == ["string_at", "corrupt_and_crash"] and crashed(r)["python_merge"].startswith("unmerged") and all(f["native_frame_index"] is None for f in crashed(r)["python_frames"])'
done
jc dloop "loop: a frame linking to itself is named, after middle" \
    '"links to itself" in crashed(r)["python"]["error"] and [f["function"] for f in crashed(r)["python_frames"]] == ["string_at", "corrupt_and_crash", "middle"]'
jc dcycle "cycle: the endless chain is cut at the per-thread cap" \
    'crashed(r)["python"]["frames_truncated"] and len(crashed(r)["python_frames"]) == 4096'
check "cycle: the text shows the crashed thread's innermost 200 Python frames and counts the rest" \
    bash -c "grep -q '^    \.\.\. 3896 outer frames shown by --json' '$T/dcycle.txt' && [ \$(grep -c '^    File ' '$T/dcycle.txt') = 200 ]"
jc dcode "code: the bad code object is named, middle is the last frame" \
    '"is not a readable code object" in crashed(r)["python"]["error"] and len(crashed(r)["python_frames"]) == 2'

# ---- 3c. cut bundles: never a crash ----
B=$(cp_bundle_for "$(cat "$T/torch.pid")" 1)
size=$(stat -c %s "$B")
for cut in 2 3 5 9; do
    head -c $((size * (cut - 1) / cut)) "$B" > "$T/cut.zst"
    rc=0
    timeout 300 "$CP_BIN/crashpack" analyze --json "$T/cut.zst" > "$T/cut.json" 2> "$T/cut.err" || rc=$?
    check "torch bundle cut at $((cut - 1))/$cut: exit 0, 1 or 2, not a crash (rc $rc)" [ "$rc" -le 2 ]
done

# ---- 4. the same under each pyenv CPython (shared-library builds) ----
# pyenv_version_checks TAG V: what only version V shows (TAG: the case's name)
pyenv_version_checks() {
    local n=$1 v=$2
    case $v in
    3.11)
        jc "$n" "3.11: the layout is the generated table (no debug offsets in 3.11)" \
            'r["python"]["layout_source"] == "table" and r["python"]["layout_check"] is None' ;;
    3.12)
        jc "$n" "3.12: the layout is the generated table (no debug offsets in 3.12)" \
            'r["python"]["layout_source"] == "table" and r["python"]["layout_check"] is None' ;;
    3.13)
        jc "$n" "3.13: the offsets are the core's _Py_DebugOffsets, equal to the generated table" \
            'r["python"]["layout_source"] == "debug_offsets" and r["python"]["layout_check"] is None' ;;
    esac
}
for v in $PYENV_VERSIONS; do
    bin=$(pyenv_bin "$v")
    if [ -z "$bin" ] || [ ! -x "$bin" ]; then
        echo "note: no pyenv CPython $v here; its cases are skipped"
        continue
    fi
    PYBIN=$bin PYVER=$v one "py$v" "$FIX/py_abort_deep.py"
    n=py$v
    jc "$n" "the runtime is libpython$v's" 'r["python"]["module"].split("/")[-1].startswith("libpython'$v'.so")'
    jc "$n" "the frames are level_three, level_two, level_one, <module>" \
        '[f["function"] for f in crashed(r)["python_frames"]] == ["level_three", "level_two", "level_one", "<module>"]'
    jc "$n" "Python-to-Python calls share one eval frame; map() (C) starts a new one" \
        'nfi(crashed(r), "level_three") == nfi(crashed(r), "level_two") < nfi(crashed(r), "level_one") == nfi(crashed(r), "<module>")'
    jc "$n" "entry frames are level_two and <module>" \
        '[f["function"] for f in crashed(r)["python_frames"] if f["entry"]] == ["level_two", "<module>"]'
    jc "$n" "the GIL is held by the crashed thread" \
        'r["python"]["gil"]["locked"] and r["python"]["gil"]["holder_tid"] == crashed(r)["tid"] and crashed(r)["python"]["holds_gil"]'
    jc "$n" "one CPython runtime" 'r["python"]["runtimes"] == 1'
    check "$n: the text shows the traceback" grep -q "File \"$FIX/py_abort_deep.py\", line 17, in level_three  \[native #" "$T/$n.txt"
    check "$n: the text names the interpreter" grep -q "^python    CPython $v" "$T/$n.txt"
    pyenv_version_checks "$n" "$v"

    PYBIN=$bin PYVER=$v one "th$v" "$FIX/py_thread_crash.py"
    n=th$v
    pid=$(cat "$T/$n.pid" 2>/dev/null)
    jc "$n" "three Python threads, the crashed one runs crasher_inner" \
        'len(pythreads(r)) == 3 and crashed(r)["tid"] != '"${pid:-0}"' and "crasher_inner" in [f["function"] for f in crashed(r)["python_frames"]]'
    jc "$n" "the Python thread names are threading's: MainThread, waiter, crasher" \
        'sorted(str(t["python"]["name"]) for t in pythreads(r).values()) == ["MainThread", "crasher", "waiter"] and crashed(r)["python"]["name"] == "crasher"'
    jc "$n" "the crashed thread holds the GIL, no other does" \
        'crashed(r)["python"]["holds_gil"] and sum(t["python"]["holds_gil"] for t in pythreads(r).values()) == 1 and r["python"]["gil"]["holder_tid"] == crashed(r)["tid"]'
    pyenv_version_checks "$n" "$v"

    # damaged frames (and, 3.13+, a damaged _Py_DebugOffsets table) under this version
    modes="loop code"
    case $v in 3.1[3-9]) modes="$modes dbgsize dbgcookie dbgft" ;; esac
    for mode in $modes; do
        n=d$mode$v
        pid=$(PYBIN=$bin pycrash_plain "$FIX/py_corrupt_frames.py" "$mode")
        B=$(cp_bundle_for "$pid" 120) || { fail "$n: no bundle"; continue; }
        rc=0
        timeout 300 "$CP_BIN/crashpack" analyze --json "$B" > "$T/$n.json" 2> "$T/$n.json.err" || rc=$?
        check "$n: analyze --json exits 0 (rc $rc)" [ "$rc" = 0 ]
        case $mode in
        loop) jc "$n" "a frame linking to itself is named, after middle" \
                  '"links to itself" in crashed(r)["python"]["error"] and [f["function"] for f in crashed(r)["python_frames"]] == ["string_at", "corrupt_and_crash", "middle"] and crashed(r)["python_merge"].startswith("unmerged")' ;;
        code) jc "$n" "the bad code object is named, middle is the last frame" \
                  '"is not a readable code object" in crashed(r)["python"]["error"] and len(crashed(r)["python_frames"]) == 2' ;;
        dbgsize) jc "$n" "debug offsets outside their structure's size: refused, named, no frames" \
                  'not r["python"]["supported"] and "_Py_DebugOffsets are inconsistent" in r["python"]["error"] and all(t["python_frames"] == [] for t in r["threads"])' ;;
        dbgcookie) jc "$n" "no debug-offsets cookie: the generated table is used, and says so; the frames are right" \
                  'r["python"]["supported"] and r["python"]["layout_source"] == "table" and "xdebugpy" in r["python"]["layout_check"] and [f["function"] for f in crashed(r)["python_frames"]] == ["string_at", "corrupt_and_crash", "middle", "outer", "<module>"] and crashed(r)["python_merge"] == "ok"' ;;
        dbgft) jc "$n" "debug offsets that say free-threaded: refused as a free-threaded build, named, no frames" \
                  'not r["python"]["supported"] and "free-threaded (Py_GIL_DISABLED" in r["python"]["error"] and r["python"]["version"].startswith("'$v'.") and all(t["python_frames"] == [] for t in r["threads"])' ;;
        esac
    done
done

# ---- 4a. two runtimes in one process: pyenv 3.12 with pyenv's libpython3.13 loaded by ctypes ----
b12=$(pyenv_bin 3.12) lib13=$(ls /root/.pyenv/versions/3.13.*/lib/libpython3.13.so.1.0 2>/dev/null | sort -V | tail -1)
if [ -n "$b12" ] && [ -x "$b12" ] && [ -n "$lib13" ]; then
    PYBIN=$b12 PYVER=3.12 one two "$FIX/py_two_runtimes.py" "$lib13"
    jc two "two CPython runtimes found; the running one (libpython3.12) is reported, the empty one is not an error" \
        'r["python"]["runtimes"] == 2 and r["python"]["module"].split("/")[-1].startswith("libpython3.12.so") and r["python"]["error"] is None'
    jc two "the frames are second_level, first_level, <module>" \
        '[f["function"] for f in crashed(r)["python_frames"]] == ["second_level", "first_level", "<module>"]'
else
    echo "note: no pyenv 3.12 with a pyenv libpython3.13 here; the two-runtimes case is skipped"
fi

# ---- 4b. CPython 3.14: Debian sid's python3.14 (static in /usr/bin/python3.14, no symbol for its
# eval loop) in the sid root that scripts/mkroot.sh builds, run chrooted into it ----
# the root is built on first use (scripts/mkroot.sh: cached, waits for a build in progress, exit 3
# with one line when it cannot be built: then the cases are skipped with that line)
SID=${CP_ROOTS_DIR:-/var/cache/crashpack/roots}/sid
SID_WHY=$("$CP_SRC/scripts/mkroot.sh" sid 2>&1 > /dev/null) || true
CHROOT=$(command -v chroot || true)
if [ -x "$SID/usr/bin/python3.14" ] && [ -n "$CHROOT" ]; then
    W=/tmp/cp-pyframes.$$
    mkdir -p "$SID$W"
    cp "$FIX/py_abort_deep.py" "$FIX/py_thread_crash.py" "$SID$W/"
    printf '#!/bin/sh\nexec %s %s /usr/bin/python3.14 "$@"\n' "$CHROOT" "$SID" > "$T/py314"
    chmod +x "$T/py314"
    export CHECK_EVAL_MODULE=python3.14
    PYBIN=$T/py314 PYVER=3.14 one sid3.14 "$W/py_abort_deep.py"
    n=sid3.14
    jc "$n" "the frames are level_three, level_two, level_one, <module>" \
        '[f["function"] for f in crashed(r)["python_frames"]] == ["level_three", "level_two", "level_one", "<module>"]'
    jc "$n" "Python-to-Python calls share one eval frame; map() (C) starts a new one (placed by the shims' stack addresses)" \
        'nfi(crashed(r), "level_three") == nfi(crashed(r), "level_two") < nfi(crashed(r), "level_one") == nfi(crashed(r), "<module>")'
    jc "$n" "entry frames are level_two and <module>" \
        '[f["function"] for f in crashed(r)["python_frames"] if f["entry"]] == ["level_two", "<module>"]'
    jc "$n" "the GIL is held by the crashed thread" \
        'r["python"]["gil"]["locked"] and r["python"]["gil"]["holder_tid"] == crashed(r)["tid"] and crashed(r)["python"]["holds_gil"]'
    jc "$n" "3.14: the offsets are the core's _Py_DebugOffsets, equal to the generated table" \
        'r["python"]["layout_source"] == "debug_offsets" and r["python"]["layout_check"] is None'
    check "$n: the text shows the traceback" grep -q "File \"$W/py_abort_deep.py\", line 17, in level_three  \[native #" "$T/$n.txt"
    PYBIN=$T/py314 PYVER=3.14 one sidth3.14 "$W/py_thread_crash.py"
    n=sidth3.14
    jc "$n" "three Python threads, the crashed one runs crasher_inner" \
        'len(pythreads(r)) == 3 and "crasher_inner" in [f["function"] for f in crashed(r)["python_frames"]]'
    jc "$n" "the Python thread names are threading's: MainThread, waiter, crasher" \
        'sorted(str(t["python"]["name"]) for t in pythreads(r).values()) == ["MainThread", "crasher", "waiter"] and crashed(r)["python"]["name"] == "crasher"'
    jc "$n" "the crashed thread holds the GIL, no other does" \
        'crashed(r)["python"]["holds_gil"] and sum(t["python"]["holds_gil"] for t in pythreads(r).values()) == 1'
    unset CHECK_EVAL_MODULE
    rm -rf "${SID:?}$W"
else
    echo "note: no Debian sid root with python3.14 at $SID (${SID_WHY:-scripts/mkroot.sh}); the 3.14 cases are skipped"
fi

# ==== CPython 3.10 (analyze/native/python310.c) ====
# py_abort_deep and py_thread_crash again under pyenv's 3.10 (_PyRuntime in libpython3.10.so), real
# crashes through core_pattern, against faulthandler's dump as above. 3.10 keeps its frames as heap
# PyFrameObjects and runs every Python frame in its own _PyEval_EvalFrameDefault call, so every
# frame is an entry frame and sits under its own eval frame (strictly outwards, innermost first).
# 3.10's PyThreadState has no native tid: it comes from glibc's struct pthread, so the Python
# threads landing on the right native threads (faulthandler's ids, the crashed thread, the GIL
# holder) checks that too. Skipped (one line) without a pyenv 3.10.
PYENV310=${CP_PYENV310:-$(ls -d /root/.pyenv/versions/3.10.*/bin/python3.10 2>/dev/null | tail -1)}
py310_one() {
    local name=$1 script=$2 pid B rc=0
    pid=$(pycrash "$name" "$script")
    B=$(cp_bundle_for "$pid" 120) || { fail "$name: no bundle"; return 1; }
    timeout 300 "$CP_BIN/crashpack" analyze --json "$B" > "$T/$name.json" 2> "$T/$name.json.err" || rc=$?
    check "$name: analyze --json exits 0" [ "$rc" = 0 ]
    timeout 300 "$CP_BIN/crashpack" analyze "$B" > "$T/$name.txt" 2>&1
    check "$name: faulthandler wrote its dump" grep -q "most recent call first" "$T/$name.err"
    jc "$name" "the interpreter is CPython 3.10 in libpython3.10, read through _PyRuntime" \
        'r["python"]["version"].startswith("3.10") and r["python"]["supported"] and r["python"]["error"] is None and r["python"]["runtime_source"] == "symbol" and r["python"]["module"].split("/")[-1].startswith("libpython3.10.so")'
    jc "$name" "every Python thread's function/file/line sequence is faulthandler's, exactly" \
        'same_as_faulthandler(r)'
    jc "$name" "every Python frame runs under a _PyEval_EvalFrameDefault frame (merge ok)" \
        'merged_under_eval(r)'
    jc "$name" "every 3.10 frame is an entry frame, under its own eval frame" \
        'all(f["entry"] for t in r["threads"] for f in t["python_frames"]) and all(len(set(i)) == len(i) for i in ([f["native_frame_index"] for f in t["python_frames"]] for t in r["threads"]))'
    jc "$name" "no qualname (3.10 code objects have none): null, the function names the frame" \
        'all(f["qualname"] is None and f["function"] for t in r["threads"] for f in t["python_frames"])'
    jc "$name" "the crashed thread is faulthandler's current thread, and holds the GIL" \
        'int(crashed(r)["python"]["thread_id"], 16) == cur and crashed(r)["python"]["holds_gil"] and r["python"]["gil"]["locked"] and r["python"]["gil"]["holder_tid"] == crashed(r)["tid"]'
    echo "$pid" > "$T/$name.pid"
}
py310_cases() {
    if [ -z "$PYENV310" ] || [ ! -x "$PYENV310" ]; then
        echo "note: no pyenv CPython 3.10 here; its cases are skipped"
        return 0
    fi
    local PYBIN=$PYENV310 pid
    py310_one abort310 "$FIX/py_abort_deep.py"
    jc abort310 "the frames are level_three, level_two, level_one, <module>" \
        '[f["function"] for f in crashed(r)["python_frames"]] == ["level_three", "level_two", "level_one", "<module>"]'
    jc abort310 "map() (C: map_next) lies between level_two's and level_one's eval frames" \
        '"map_next" in [f.get("function") for f in crashed(r)["frames"][nfi(crashed(r), "level_two"):nfi(crashed(r), "level_one")]]'
    check "abort310: the text shows the traceback" grep -q "File \"$FIX/py_abort_deep.py\", line 17, in level_three  \[native #" "$T/abort310.txt"
    check "abort310: the text names the interpreter" grep -q "^python    CPython 3.10" "$T/abort310.txt"
    py310_one threads310 "$FIX/py_thread_crash.py"
    pid=$(cat "$T/threads310.pid" 2>/dev/null)
    jc threads310 "three Python threads" 'len(pythreads(r)) == 3'
    jc threads310 "the crashed thread is not the main thread, and runs crasher_inner" \
        'crashed(r)["tid"] != '"${pid:-0}"' and "crasher_inner" in [f["function"] for f in crashed(r)["python_frames"]]'
    jc threads310 "the main thread (tid = pid) ends in <module>" \
        'any(t["tid"] == '"${pid:-0}"' and t["python_frames"][-1]["function"] == "<module>" for t in r["threads"])'
    jc threads310 "the Python thread names are threading's: MainThread, waiter, crasher" \
        'sorted(t["python"]["name"] for t in pythreads(r).values()) == ["MainThread", "crasher", "waiter"] and crashed(r)["python"]["name"] == "crasher"'
    check "threads310: the text names the crashed Python thread" grep -q 'Python thread 0x[0-9a-f]* "crasher", holds the GIL' "$T/threads310.txt"
    # the threads310 bundle cut short at several offsets: never a crash
    local f_back f_code mode B rc size cut
    B=$(cp_bundle_for "$pid" 1)
    size=$(stat -c %s "$B")
    for cut in 2 3 5 9; do
        head -c $((size * (cut - 1) / cut)) "$B" > "$T/cut310.zst"
        rc=0
        timeout 300 "$CP_BIN/crashpack" analyze --json "$T/cut310.zst" > "$T/cut310.json" 2> "$T/cut310.err" || rc=$?
        check "3.10 threads bundle cut at $((cut - 1))/$cut: exit 0, 1 or 2, not a crash (rc $rc)" [ "$rc" -le 2 ]
    done
    # frames the process damaged itself (offsets from the generated 3.10 layout)
    f_back=$(sed -n 's/^    \.f_back = \([0-9]*\),$/\1/p' "$CP_SRC/analyze/native/pylayout310.c")
    f_code=$(sed -n 's/^    \.f_code = \([0-9]*\),$/\1/p' "$CP_SRC/analyze/native/pylayout310.c")
    for mode in loop cycle code; do
        pid=$(pycrash_plain "$FIX/py310_corrupt_frames.py" "$mode" "$f_back" "$f_code")
        B=$(cp_bundle_for "$pid" 120) || { fail "3.10 damaged $mode: no bundle"; continue; }
        rc=0
        timeout 300 "$CP_BIN/crashpack" analyze --json "$B" > "$T/d310$mode.json" 2> "$T/d310$mode.json.err" || rc=$?
        check "3.10 damaged $mode: analyze --json exits 0 (rc $rc)" [ "$rc" = 0 ]
        jc "d310$mode" "3.10 $mode: the frames up to the damage are right, the walk says why it stopped" \
            '[f["function"] for f in crashed(r)["python_frames"]][:2] == ["string_at", "corrupt_and_crash"] and crashed(r)["python_merge"].startswith("unmerged") and all(f["native_frame_index"] is None for f in crashed(r)["python_frames"])'
    done
    jc d310loop "3.10 loop: a frame linking to itself is named, after middle" \
        '"links to itself" in crashed(r)["python"]["error"] and [f["function"] for f in crashed(r)["python_frames"]] == ["string_at", "corrupt_and_crash", "middle"]'
    jc d310cycle "3.10 cycle: the endless chain is cut at the per-thread cap" \
        'crashed(r)["python"]["frames_truncated"] and len(crashed(r)["python_frames"]) == 4096'
    jc d310code "3.10 code: the bad code object is named, corrupt_and_crash is the last frame" \
        '"is not a readable code object" in crashed(r)["python"]["error"] and len(crashed(r)["python_frames"]) == 2'
}
py310_cases

# ---- 5. versions without a layout: named and reported unsupported ----
for v in 3.9; do
    bin=$(pyenv_bin "$v")
    [ -n "$bin" ] && [ -x "$bin" ] || { echo "note: no pyenv CPython $v here; skipped"; continue; }
    pid=$(PYBIN=$bin pycrash "u$v" "$FIX/py_abort_deep.py")
    B=$(cp_bundle_for "$pid" 120) || { fail "$v: no bundle"; continue; }
    rc=0
    timeout 300 "$CP_BIN/crashpack" analyze --json "$B" > "$T/u$v.json" 2> /dev/null || rc=$?
    check "$v: analyze --json exits 0" [ "$rc" = 0 ]
    jc "u$v" "the version is named and said to be unsupported, with why" \
        'r["python"]["version"].startswith("'$v'") and not r["python"]["supported"] and "unsupported CPython '$v'" in r["python"]["error"] and "before 3.10" in r["python"]["error"]'
    jc "u$v" "no thread claims Python frames" 'all(t["python_frames"] == [] for t in r["threads"])'
done

finish
