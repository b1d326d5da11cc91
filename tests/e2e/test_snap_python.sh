#!/usr/bin/env bash
# Acceptance (issue 6, #3, second sentence): a Python program with a thread blocked in queue.get()
# for ever and the main thread joining it, snapped live (slim core, the default), is reported as a
# hang with the waiting Python lines: crash_kind hang, the consumer's python_frames go
# queue.py get -> the fixture's take_item line, the main thread's threading.py join -> the
# fixture's join line, hang_state says a Python queue wait / a lock wait in join, and a rule names
# it. The Python frames must survive the slim core: snap keeps the pages the Python walker reads
# (node/snap_python.c). The process carries on after the snap.
# The same again under each pyenv CPython of PYENV_VERSIONS (3.10, 3.11, 3.12, 3.13) that is installed
# (3.10: analyze/native/python310.c; snap runs that walker on the live process too), and
# under Debian sid's 3.14 chrooted into the sid root (scripts/mkroot.sh) when it is there:
# the slim snapshot keeps the pages that version's walk reads, and the frames are the same (on
# 3.13 join() waits in C, directly in threading.py's join). A version not installed is skipped
# with one line saying so. Each version also snaps py_four_threads.py (four threads, one spinning
# with the GIL) and compares every thread's frames with faulthandler's dump of the same moment. To add a version: add it to PYENV_VERSIONS (and, where its hang states
# differ, to the case in snap_case).
source "$(dirname "$0")/../lib.sh"
cp_setup
cp_install

PY=/usr/bin/python3
[ -x "$PY" ] || { echo "SKIP: no $PY"; exit 77; }
FX=$CP_SRC/fixtures/programs/py_queue_hang.py
FIX=$CP_SRC/fixtures/programs
get_line=$(grep -n 'WAIT-GET' "$FX" | head -1 | cut -d: -f1)
join_line=$(grep -n 'WAIT-JOIN' "$FX" | head -1 | cut -d: -f1)
[ -n "$get_line" ] && [ -n "$join_line" ] || die "fixture markers not found"
fixture=$(basename "$FX")
PYENV_VERSIONS=${CP_PYENV_VERSIONS:-3.10 3.11 3.12 3.13}
pid=
trap 'rc=$?; [ -n "$pid" ] && kill -9 $pid 2>/dev/null; (exit $rc); cp_restore' EXIT

# snap_case TAG PYTHON VERSION [SCRIPT [MODULE]]: run the fixture (SCRIPT: its path as PYTHON sees it)
# under PYTHON, snap it, check the analysis (VERSION: "system" for /usr/bin/python3, else the minor
# version; MODULE: the interpreter module's name prefix, default libpythonVERSION.so)
snap_case() {
    local tag=$1 py=$2 ver=$3 script=${4:-$FX} modname=${5:-libpython$3.so} i
    "$py" "$script" > "$T/$tag.out" 2>&1 &
    pid=$!
    for ((i = 0; i < 300; i++)); do grep -q '^ready' "$T/$tag.out" 2>/dev/null && break; sleep 0.1; done
    grep -q '^ready' "$T/$tag.out" || { fail "$tag: py_queue_hang did not get ready"; kill -9 $pid; wait $pid 2>/dev/null; pid=; return; }
    # the announcer thread exits after printing: wait until only main and the consumer are left
    for ((i = 0; i < 300; i++)); do [ "$(ls /proc/$pid/task | wc -l)" = 2 ] && break; sleep 0.1; done
    check "$tag: two threads left (main, consumer)" [ "$(ls /proc/$pid/task | wc -l)" = 2 ]

    "$CP_BIN/crashpack" snap -c "$T/conf" --json "$pid" > "$T/$tag.snap.out" 2> "$T/$tag.snap.err"
    local src=$?
    cat "$T/$tag.snap.err"
    check "$tag: crashpack snap exits 0" [ "$src" = 0 ]
    local bundle
    bundle=$(json "$T/$tag.snap.out" 'd["bundle"]["path"]')
    check "$tag: the bundle exists" [ -f "$bundle" ]
    check "$tag: the process is still alive after the snap" kill -0 "$pid"
    check "$tag: capture.json: slim core" [ "$(cp_member "$bundle" capture.json | python3 -c 'import json,sys; print(json.load(sys.stdin)["core"]["mode"])')" = slim ]

    "$CP_BIN/crashpack" analyze --json "$bundle" > "$T/$tag.json"
    check "$tag: analyze --json exits 0" [ $? = 0 ]
    A=$T/$tag.json
    local main_tid=$pid
    check "$tag: crash_kind is hang" [ "$(json "$A" 'd["crash_kind"]')" = hang ]
    check "$tag: python: supported, no error" [ "$(json "$A" 'd["python"]["supported"], d["python"]["error"] in (None, "")')" = "(True, True)" ]
    if [ "$ver" != system ]; then
        check "$tag: python: CPython $ver from $modname" \
            [ "$(json "$A" '".".join(d["python"]["version"].split(".")[:2]) == "'$ver'" and d["python"]["module"].split("/")[-1].startswith("'$modname'")')" = True ]
    fi
    case $ver in 3.1[3-9]) ;; *) false ;; esac && check "$tag: the slim core kept the _Py_DebugOffsets: read, equal to the table" \
        [ "$(json "$A" 'd["python"]["layout_source"], d["python"]["layout_check"]')" = "('debug_offsets', None)" ]

    # python_frames innermost first, as (function, file basename, line); the fixture's own lines
    pyf() { json "$A" "[[(f['function'], (f['file'] or '').rsplit('/', 1)[-1], f['line']) for f in t['python_frames']] for t in d['threads'] if $1][0]"; }
    local cons mainf
    cons=$(pyf "t['name'] == 'consumer' or (t.get('python') or {}).get('name') == 'consumer'")
    mainf=$(pyf "t['tid'] == $main_tid")
    echo "$tag consumer: $cons"
    echo "$tag main:     $mainf"
    check "$tag: consumer: queue.py get, directly under take_item at the WAIT-GET line, then consumer_loop" \
        python3 -c "
import ast, sys
f = ast.literal_eval(sys.argv[1])
names = [x[0] for x in f]
i = names.index('get')
assert f[i][1] == 'queue.py', f[i]
assert f[i + 1] == ('take_item', '$fixture', $get_line), f[i + 1]
assert f[i + 2][0] == 'consumer_loop' and f[i + 2][1] == '$fixture', f[i + 2]
assert all(x[1] == 'threading.py' for x in f[:i]), f[:i]   # Condition.wait above get
" "$cons"
    check "$tag: main: threading.py join, directly under main at the WAIT-JOIN line" \
        python3 -c "
import ast, sys
f = ast.literal_eval(sys.argv[1])
names = [x[0] for x in f]
i = names.index('join')
assert f[i][1] == 'threading.py', f[i]
assert f[i + 1] == ('main', '$fixture', $join_line), f[i + 1]
assert all(x[1] == 'threading.py' for x in f[:i + 1]), f[:i]
" "$mainf"
    st() { json "$A" "[t['hang_state']['state'] for t in d['threads'] if $1][0]"; }
    echo "$tag hang states: consumer $(st "t['tid'] != $main_tid"), main $(st "t['tid'] == $main_tid")"
    # 3.10 (analyze/native/python310.c): every Python call is its own eval call
    [ "$ver" = 3.10 ] && check "$tag: both threads' Python frames are merged, each under its own eval frame" \
        [ "$(json "$A" '[t["python_merge"] == "ok" and all(f["entry"] for f in t["python_frames"]) and len({f["native_frame_index"] for f in t["python_frames"]}) == len(t["python_frames"]) for t in d["threads"] if t["python_frames"]]')" = "[True, True]" ]
    case $ver in
    *)
        check "$tag: consumer hang_state: python_queue_wait" [ "$(st "t['tid'] != $main_tid")" = python_queue_wait ]
        check "$tag: main hang_state: join_wait (a Python lock in Thread.join)" [ "$(st "t['tid'] == $main_tid")" = join_wait ]
        check "$tag: a diagnosis names it: hang-python-queue-join, category hang" \
            [ "$(json "$A" '[(x["rule"], x["category"]) for x in d["diagnoses"] if x["rule"] == "hang-python-queue-join"]')" = "[('hang-python-queue-join', 'hang')]" ]
        # (the host's kernel log can add GPU/host diagnoses of its own: compare among the hang ones)
        check "$tag: it is the first hang diagnosis (before the generic hang-lock-wait)" \
            [ "$(json "$A" '[x["rule"] for x in d["diagnoses"] if x["category"] == "hang"][0]')" = hang-python-queue-join ]
        check "$tag: its evidence names the queue.get and the join frames" \
            [ "$(json "$A" '[any("get at " in e and "queue.py" in e for e in x["evidence"]) and any("join at " in e and "threading.py" in e for e in x["evidence"]) for x in d["diagnoses"] if x["rule"] == "hang-python-queue-join"]')" = "[True]" ]
        ;;
    esac
    "$CP_BIN/crashpack" analyze "$bundle" > "$T/$tag.txt"
    check "$tag: text output shows the waiting lines" grep -q "line $get_line" "$T/$tag.txt"

    check "$tag: the process is still alive after the analysis" kill -0 "$pid"
    kill -9 "$pid"
    wait "$pid" 2>/dev/null
    pid=
}

# four_check.py REPORT FAULTHANDLER_DUMP: every Python thread's frames equal the dump's, the names
# are threading's, and only the spinner holds the GIL
cat > "$T/four_check.py" <<'PY'
import json, re, sys
d = json.load(open(sys.argv[1]))
fh, cur = {}, None
for line in open(sys.argv[2]):
    m = re.match(r"(?:Current thread|Thread) (0x[0-9a-f]+)", line)
    if m:
        cur = int(m.group(1), 16); fh[cur] = []; continue
    m = re.match(r'\s+File "(.*)", line (\d+) in (\S+)', line)
    if m and cur is not None:
        fh[cur].append((m.group(3), m.group(1), int(m.group(2))))
py = {int(t["python"]["thread_id"], 16): t for t in d["threads"] if t.get("python")}
bad = []
if len(py) != 4:
    bad.append(f"{len(py)} Python threads")
for ident, t in py.items():
    got = [(f["function"], f["file"], f["line"]) for f in t["python_frames"]]
    want = fh.get(ident)
    # faulthandler prints co_name (3.10-3.12) or the qualified name (3.13+): either matches
    if want is None or len(got) != len(want) or any(
            (g[1], g[2]) != (w[1], w[2]) or w[0] not in (g[0], f["qualname"])
            for g, w, f in zip(got, want, t["python_frames"])):
        bad.append(f"thread {t['python']['name']}: {got} != faulthandler {want}")
names = sorted(str(t["python"]["name"]) for t in py.values())
if names != ["MainThread", "consumer", "sleeper", "spinner"]:
    bad.append(f"names {names}")
holders = [t["python"]["name"] for t in py.values() if t["python"]["holds_gil"]]
if holders != ["spinner"] or not d["python"]["gil"]["locked"]:
    bad.append(f"GIL holders {holders}")
for b in bad:
    print(b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY

# four_case TAG PYTHON [DUMP_AS_PYTHON_SEES_IT DUMP_ON_THE_HOST [FIXTURE]]: a hung process with four
# Python threads (py_four_threads.py), one spinning with the GIL: the slim snapshot's Python frames
# equal faulthandler's dump of the same moment (function, file, line, innermost first) thread by
# thread, the names are threading's, and the spinner holds the GIL
# With FOUR_CONTAINER=ROOT, PYTHON runs in its own pid (and mount) namespace inside ROOT (an
# `unshare -p` container): the process is found on the host by the pid it printed (its NSpid), the
# snapshot is taken from the host by its host pid, and the manifest must name the container: a pid
# namespace that is not the host's, ns_pids ending with the pid the process saw, ROOT as its root.
four_case() {
    local tag=$1 py=$2 dump=${3:-$T/$1.fh} hostdump=${4:-$T/$1.fh} fx=${5:-$FIX/py_four_threads.py} i
    local starter= nspid= q
    "$py" "$fx" "$dump" > "$T/$tag.out" 2>&1 &
    pid=$!
    for ((i = 0; i < 300; i++)); do grep -q '^ready' "$T/$tag.out" 2>/dev/null && break; sleep 0.1; done
    grep -q '^ready' "$T/$tag.out" || { fail "$tag: py_four_threads did not get ready"; kill -9 $pid; wait $pid 2>/dev/null; pid=; return; }
    if [ -n "${FOUR_CONTAINER:-}" ]; then
        # $! is unshare; the Python process is a descendant whose innermost NSpid is the pid it printed
        starter=$pid pid=
        nspid=$(sed -n 's/^ready \([0-9]*\)$/\1/p' "$T/$tag.out" | head -1)
        local kids=$starter k
        for ((i = 0; i < 4; i++)); do # unshare -> the namespace's init (sh) -> python
            k=
            for q in $kids; do k="$k $(cat /proc/$q/task/*/children 2> /dev/null)"; done
            kids=$k
            for q in $kids; do
                [ "$(awk '/^NSpid:/ {print $NF}' /proc/$q/status 2>/dev/null)" = "$nspid" ] && pid=$q
            done
        done
        [ -n "$pid" ] || { fail "$tag: no process of the container has pid $nspid in its namespace"; kill -9 -- $starter; wait $starter 2>/dev/null; return; }
        check "$tag: the process runs in its own pid namespace (host pid $pid, pid $nspid inside)" \
            bash -c "[ '$pid' != '$nspid' ] && [ \"\$(readlink /proc/$pid/ns/pid)\" != \"\$(readlink /proc/self/ns/pid)\" ]"
    fi
    for ((i = 0; i < 300; i++)); do [ "$(ls /proc/$pid/task | wc -l)" = 4 ] && break; sleep 0.1; done
    check "$tag: four threads left" [ "$(ls /proc/$pid/task | wc -l)" = 4 ]
    local pidns
    pidns=$(readlink /proc/$pid/ns/pid)
    "$CP_BIN/crashpack" snap -c "$T/conf" --json "$pid" > "$T/$tag.snap.out" 2> "$T/$tag.snap.err"
    local bundle
    bundle=$(json "$T/$tag.snap.out" 'd["bundle"]["path"]')
    "$CP_BIN/crashpack" analyze --json "$bundle" > "$T/$tag.json" 2> "$T/$tag.err"
    local reports=$T/$tag.json
    if [ -n "$starter" ]; then
        # offline too: the slim core alone (no stacks.json), the files from the root
        "$CP_BIN/crashpack" analyze --json --no-stacks --sysroot "$FOUR_CONTAINER" "$bundle" > "$T/$tag.offline.json" 2> "$T/$tag.offline.err"
        reports="$reports $T/$tag.offline.json"
    fi
    local hostpid=$pid
    kill -9 "$pid"; wait "$pid" 2>/dev/null; pid=
    if [ -n "$starter" ]; then
        wait "$starter" 2>/dev/null
        cp_member "$bundle" manifest.json > "$T/$tag.manifest.json" 2> /dev/null
        check "$tag: manifest: the container's pid namespace ($pidns), ns_pids [host pid, $nspid], root $FOUR_CONTAINER" \
            json "$T/$tag.manifest.json" "d['namespaces']['pid'] == '$pidns' and d['ns_pids'][-1] == $nspid and d['ns_pids'][0] == d['pid'] and d.get('root') == '$FOUR_CONTAINER' or sys.exit(repr((d.get('namespaces'), d.get('ns_pids'), d.get('root'))))"
        check "$tag: analysis: thread ids are the container's, as in a kernel core (MainThread $nspid), host_tid the host's ($hostpid)" \
            json "$T/$tag.json" "[(t['tid'], t.get('host_tid')) for t in d['threads'] if (t.get('python') or {}).get('name') == 'MainThread'] == [($nspid, $hostpid)] or sys.exit(repr([(t['tid'], t.get('host_tid')) for t in d['threads']]))"
    fi
    local rep
    for rep in $reports; do
        check "$tag: four Python threads ($(basename "$rep")): frames equal faulthandler's, names, the spinner holds the GIL" \
            python3 "$T/four_check.py" "$rep" "$hostdump"
    done
}

snap_case system "$PY" system
four_case four-system "$PY"
for v in $PYENV_VERSIONS; do
    bin=$(ls -d /root/.pyenv/versions/$v.*/bin/python$v 2>/dev/null | sort -V | tail -1)
    [ "$v" = 3.10 ] && bin=${CP_PYENV310:-$bin}
    if [ -z "$bin" ] || [ ! -x "$bin" ]; then
        echo "note: no pyenv CPython $v here; its snapshot case is skipped"
        continue
    fi
    snap_case "py$v" "$bin" "$v"
    four_case "four$v" "$bin"
done
# CPython 3.14: Debian sid's python3.14, chrooted into the sid root of scripts/mkroot.sh
# the root is built on first use (scripts/mkroot.sh: cached, waits for a build in progress, exit 3
# with one line when it cannot be built: then the cases are skipped with that line)
SID=${CP_ROOTS_DIR:-/var/cache/crashpack/roots}/sid
SID_WHY=$("$CP_SRC/scripts/mkroot.sh" sid 2>&1 > /dev/null) || true
CHROOT=$(command -v chroot || true)
if [ -x "$SID/usr/bin/python3.14" ] && [ -n "$CHROOT" ]; then
    W=/tmp/cp-snappy.$$
    mkdir -p "$SID$W"
    cp "$FX" "$SID$W/"
    printf '#!/bin/sh\nexec %s %s /usr/bin/python3.14 "$@"\n' "$CHROOT" "$SID" > "$T/py314"
    chmod +x "$T/py314"
    snap_case sid3.14 "$T/py314" 3.14 "$W/$fixture" python3.14
    cp "$FIX/py_four_threads.py" "$SID$W/"
    four_case four-sid3.14 "$T/py314" "$W/four.fh" "$SID$W/four.fh" "$W/py_four_threads.py"
    # the same as a container: its own mount and pid namespaces (not their init), snapped from the host
    if command -v unshare > /dev/null; then
        printf '#!/bin/sh\nexec unshare -m -p --fork --mount-proc=%s/proc %s %s /bin/sh -c %s sh /usr/bin/python3.14 "$@"\n' \
            "$SID" "$CHROOT" "$SID" "'\"\$@\"; exit \$?'" > "$T/py314ns"
        chmod +x "$T/py314ns"
        FOUR_CONTAINER=$SID four_case four-sid3.14-pidns "$T/py314ns" "$W/four-ns.fh" "$SID$W/four-ns.fh" "$W/py_four_threads.py"
    else
        echo "note: no unshare: the pid-namespace snapshot case is skipped"
    fi
    rm -rf "${SID:?}$W"
else
    echo "note: no Debian sid root with python3.14 at $SID (${SID_WHY:-scripts/mkroot.sh}); its snapshot case is skipped"
fi
finish
