#!/usr/bin/env bash
# Issue 15: jobs in containers whose root is a real foreign distribution, through the real kernel
# core_pattern path. The roots are Debian trixie (python3 = 3.13) and sid (python3.14), each with
# python3-torch, built once by scripts/mkroot.sh and cached in /var/cache/crashpack/roots
# (docs/containers.md). A root that cannot be built today (sid moves daily) is skipped with
# mkroot's one-line reason; with neither root the test exits 77 (skip).
#
# Each process runs in its own mount and pid namespaces with its own /proc, chroot'ed into the root
# (`unshare -m -p --fork --mount-proc` + `chroot --userspec`), as uid 0 and as uid 65534, and is
# not the namespace's init (signals to a pid-1 would be ignored). Cases:
#   abort, segv  the root's /usr/bin/python3 runs fixtures/programs/container_torch_crash.py:
#                imports torch, builds a model, and in its forward pass (nn.Module.__call__ ->
#                Net.forward -> a custom autograd Function, applied by libtorch_python.so's
#                THPFunction_apply) calls os.abort() / ctypes.string_at(0) three functions deep
#   backward     (uid 0 only) the same segfault in the backward pass: libtorch_cpu.so's autograd
#                engine calls the Function's backward
#   c            a C program (fixtures/programs/cp_abort.c-like, compiled in the root when it has a
#                compiler, else on the host: it runs on the root's newer libc either way) aborts
#                two functions deep
# Checks per crash: the bundle is published with the permissions of its uid (0640 root:root, a
# read ACL for 65534); the manifest names the container's pid namespace (not the host's), the pid
# the process saw (ns_pids), its mount namespace and its root directory; capture.json's enrich step
# is ok and stacks.json (made through the process's root) names native frames in the root's libc,
# python and libtorch_cpu.so with the root's build-ids (never the host's); `crashpack analyze
# --sysroot ROOT --no-stacks` symbolizes the same frames offline from the root's files, finds
# them there, and names the interpreter's version (3.13.x / 3.14.x); the host's own copies are
# rejected (build-id mismatch) without --sysroot.
# Python frames (function, file, line of the script, crashed thread) are checked too: they need
# CPython 3.13/3.14 support in analyze/native/python*.c, and fail where that is missing; set
# CP_CONTAINER_NO_PYFRAMES=1 to report them as skipped instead.
#
# Environment: CP_CONTAINER_ROOTS (default "trixie sid"), CP_ROOTS_DIR (the cache).
source "$(dirname "$0")/../lib.sh"
cp_need_root
PY=${CP_PYTHON:-/usr/bin/python3}
FIX=$CP_SRC/fixtures/programs
ROOTS_DIR=${CP_ROOTS_DIR:-/var/cache/crashpack/roots}
export CP_ROOTS_DIR=$ROOTS_DIR
command -v unshare > /dev/null || { echo "SKIP: no unshare"; exit 77; }
CHROOT=$(command -v chroot) || { echo "SKIP: no chroot"; exit 77; }

# ---- the roots: built (in parallel) before the test lock is taken, cached for later runs ----
names=()
declare -A mk_pid
for name in ${CP_CONTAINER_ROOTS:-trixie sid}; do
    bash "$CP_SRC/scripts/mkroot.sh" "$name" > "/tmp/crashpack-mkroot.$name.$$" 2>&1 &
    mk_pid[$name]=$!
done
for name in ${CP_CONTAINER_ROOTS:-trixie sid}; do
    rc=0
    wait "${mk_pid[$name]}" || rc=$?
    out=$(grep '^mkroot: ' "/tmp/crashpack-mkroot.$name.$$" | tail -1)
    if [ "$rc" = 0 ]; then
        names+=("$name")
    elif [ "$rc" = 3 ]; then
        echo "SKIP($name): ${out:-mkroot: $name: cannot build}"
    else
        cat "/tmp/crashpack-mkroot.$name.$$" >&2
        rm -f "/tmp/crashpack-mkroot.$name.$$"
        die "scripts/mkroot.sh $name failed (exit $rc)"
    fi
    rm -f "/tmp/crashpack-mkroot.$name.$$"
done
[ ${#names[@]} -gt 0 ] || { echo "SKIP: no container root could be built"; exit 77; }

cp_setup
# enrichment and the analysis of a torch core take a while in a sanitizer build
cat >> "$T/conf" << 'CONF'
enrich_timeout = 240
finisher_deadline = 400
CONF
cp_install

# the per-test directory inside each root (the root's own /tmp), removed on exit
W=/tmp/crashpack-test.$$
AGENT=
made_run=()
cleanup_roots() {
    local n
    [ -n "$AGENT" ] && kill "$AGENT" 2> /dev/null && wait "$AGENT" 2> /dev/null
    for n in "${names[@]}"; do rm -rf "${ROOTS_DIR:?}/$n$W"; done
    for n in "${made_run[@]}"; do rmdir "$n" 2> /dev/null; done
}
trap 'rc=$?; cleanup_roots; (exit $rc); cp_restore' EXIT

# the node service on the host, its socket in $T/run: each container gets that directory
# bind-mounted at its own /run/crashpack (the default agent_socket), as `docker run -v
# /run/crashpack:/run/crashpack` would
mkdir -m 755 "$T/run" "$T/state"
"$CP_BIN/crashpack" agent -c "$T/conf" --socket "$T/run/agent.sock" --state-dir "$T/state" 2> "$T/agent.log" &
AGENT=$!
for _ in $(seq 100); do [ -S "$T/run/agent.sock" ] && break; sleep 0.1; done
[ -S "$T/run/agent.sock" ] || { cat "$T/agent.log" >&2; die "the agent did not start"; }

cat > "$T/check.py" << 'PYEOF'
"""check.py ANALYSIS STACKS EXPR: EXPR over r (analyze --json), s (stacks.json), R (the root),
ids (the root's build-ids by path inside the root), host_ids (the host's) is true; on false, says
what it looked at."""
import json, os, sys

r = json.load(open(sys.argv[1])) if sys.argv[1] != "-" else None
s = json.load(open(sys.argv[2])) if sys.argv[2] != "-" else None
R = os.environ["CT_ROOT"]
ids = json.load(open(os.environ["CT_IDS"]))
host_ids = json.load(open(os.environ["CT_HOST_IDS"]))

def crashed(x):
    return [t for t in x["threads"] if t["crashed"]][0]

def base(p):
    return os.path.basename(p or "")

def frames_in(x, mod, thread=None):
    """symbolized frames in a module (by file name prefix) of one thread or all"""
    ts = [thread] if thread else x["threads"]
    return [f for t in ts for f in t["frames"]
            if base(f.get("module")).startswith(mod) and f.get("function")]

def module(x, mod):
    m = [m for m in x["modules"] if base(m["path"]).startswith(mod)]
    return m[0] if m else None

def root_build_id(x, mod):
    """the module's build-id in the core is the root's file's, not the host's"""
    m = module(x, mod)
    if not m:
        print(f"  no module {mod}", file=sys.stderr)
        return False
    want, host = ids.get(m["path"]), host_ids.get(m["path"])
    if m["build_id"] != want or m["build_id"] == host:
        print(f"  {mod}: core {m['build_id']} root {want} host {host}", file=sys.stderr)
        return False
    return True

def found_in_root(x, mod, prefix):
    m = module(x, mod)
    ok = m is not None and (m.get("found_at") or "").startswith(prefix)
    if not ok:
        print(f"  {mod}: {m}", file=sys.stderr)
    return ok

def frames_build_ids(x, mod):
    """every frame in the module carries the root's build-id"""
    fs = [f for t in x["threads"] for f in t["frames"] if base(f.get("module")).startswith(mod)]
    m = module(x, mod)
    return bool(fs) and all(f.get("build_id") == ids.get(m["path"]) for f in fs)

def script_frames(x, script):
    t = crashed(x)
    return [(f["function"], f["line"]) for f in t.get("python_frames", []) if f.get("file") == script]

def unnamed(x):
    """frames of any thread that are not named: neither a function nor module + offset of a module
    without a debug file (a stripped module's frame is named by its offset)"""
    bad = []
    for t in x["threads"]:
        for f in t["frames"]:
            if f.get("function"):
                continue
            m = module(x, f["module"]) if f.get("module") else None
            if not (m and f.get("module_offset") and not m.get("debug_file")):
                bad.append((t["tid"], f.get("index"), f.get("pc"), f.get("module")))
    return bad

def show(v):
    print(f"  value: {v}", file=sys.stderr)
    return v

v = eval(sys.argv[3])
if not v:
    print("  false: " + sys.argv[3], file=sys.stderr)
sys.exit(0 if v else 1)
PYEOF

# build-ids of the ELF files a crash maps: the root's (paths as the process saw them) and the host's
build_ids() { # PREFIX OUT: {path: build-id} for the libraries of interest under PREFIX
    "$PY" - "$1" "$2" << 'PYEOF'
import glob, json, os, subprocess, sys
pre, out = sys.argv[1], sys.argv[2]
pats = ["/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6*",
        "/usr/lib/x86_64-linux-gnu/libgomp.so.1*", "/usr/lib/x86_64-linux-gnu/libffi.so.8*",
        "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", "/usr/bin/python3*",
        "/usr/lib/x86_64-linux-gnu/libtorch_cpu.so*", "/usr/lib/x86_64-linux-gnu/libtorch_python.so*",
        "/usr/lib/python3/dist-packages/torch/lib/libtorch*.so*", "/tmp/crashpack-test.*/prog"]
d = {}
for p in pats:
    for f in glob.glob(pre + p):
        try:
            n = subprocess.run(["readelf", "-n", f], capture_output=True, text=True).stdout
        except OSError:
            continue
        for ln in n.splitlines():
            if "Build ID:" in ln:
                d[f[len(pre):]] = ln.split()[-1]
                # the core names files by their real path: add the symlink's target too
                real = os.path.realpath(f)
                if real.startswith(pre or "/"):
                    d[real[len(pre):] if pre else real] = d[f[len(pre):]]
json.dump(d, open(out, "w"), indent=1)
PYEOF
}

# next_bundle: the next bundle not seen yet whose command line names this test's directory in the
# root (the process's host pid is not known here: it is a child of the namespace's init; another
# process that crashes meanwhile lands in $T/bundles too); waits up to 240 s
touch "$T/seen"
next_bundle() {
    local i f
    for ((i = 0; i < 2400; i++)); do
        for f in "$T"/bundles/crash-*.zst; do
            [ -f "$f" ] || continue
            grep -qxF "$f" "$T/seen" && continue
            echo "$f" >> "$T/seen"
            if ! cp_member "$f" manifest.json 2> /dev/null | grep -qF "$W/"; then
                echo "note: $(basename "$f") is another process's crash: ignored" >&2
                continue
            fi
            echo "$f"
            return 0
        done
        sleep 0.1
    done
    return 1
}

# in_root NAME UID OUT CMD...: runs CMD in the root, in new mount + pid namespaces with their own
# /proc, as UID, not as the namespace's init (sh is pid 1, CMD its child)
in_root() {
    local name=$1 uid=$2 out=$3
    shift 3
    env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp LANG=C.UTF-8 OMP_NUM_THREADS=2 PYTHONDONTWRITEBYTECODE=1 \
        unshare -m -p --fork --mount-proc="$ROOTS_DIR/$name/proc" \
        "$CHROOT" --userspec="$uid:$uid" "$ROOTS_DIR/$name" /bin/sh -c '"$@"; exit $?' sh "$@" \
        > "$out" 2>&1
    return 0
}

# in_root_hook NAME UID HOOK OUT CMD...: in_root with the agent's socket directory mounted at
# /run/crashpack inside the container's mount namespace, and the Python hook (CRASHPACK_HOOK=HOOK)
# in the user's site-packages under $W/home (installed there by the caller)
in_root_hook() {
    local name=$1 uid=$2 hook=$3 out=$4
    shift 4
    env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=$W/home LANG=C.UTF-8 OMP_NUM_THREADS=2 PYTHONDONTWRITEBYTECODE=1 \
        CRASHPACK_HOOK="$hook" CRASHPACK_STATE_DIR="$W/hookstate/$uid" \
        unshare -m -p --fork --mount-proc="$ROOTS_DIR/$name/proc" \
        /bin/sh -c 'mount --bind "$1" "$2/run/crashpack" || exit 125; r=$2 u=$3; shift 3; exec "$0" --userspec="$u:$u" "$r" /bin/sh -c '"'"'"$@"; exit $?'"'"' sh "$@"' \
        "$CHROOT" "$T/run" "$ROOTS_DIR/$name" "$uid" "$@" > "$out" 2> "$out.err"
    echo $? > "$out.rc"
    return 0
}

HOST_PIDNS=$(readlink /proc/self/ns/pid)
HOST_MNTNS=$(readlink /proc/self/ns/mnt)
build_ids "" "$T/host-ids.json"

line_of() { grep -n "# @$1\$" "$FIX/container_torch_crash.py" | cut -d: -f1; }
L_ABORT=$(line_of abort) L_SEGV=$(line_of segv) L_TWO=$(line_of two) L_ONE=$(line_of one)
L_BACK=$(line_of backward) L_RUNB=$(line_of run_backward) L_MOD=$(line_of module)
L_FNF=$(line_of fn_forward) L_NETF=$(line_of net_forward) L_RUNF=$(line_of run_forward)
L_MODF=$(line_of module_forward) L_RAISE=$(line_of raise)

for name in "${names[@]}"; do
    R=$ROOTS_DIR/$name
    stamp=$R/.crashpack-root
    case $name in trixie) want=3.13 ;; sid) want=3.14 ;; esac
    pyline=$(grep '^python3=' "$stamp" | cut -d= -f2)
    echo "== root $name: $(grep '^date=' "$stamp"), /usr/bin/python3 -> $pyline, $(grep '^torch=' "$stamp")"
    check "$name: the root's /usr/bin/python3 is CPython $want" bash -c "[[ '${pyline#* }' == $want.* ]]"
    mkdir -p "$R$W"
    chmod 755 "$R$W"
    cp "$FIX/container_torch_crash.py" "$R$W/crash.py"
    chmod 644 "$R$W/crash.py"
    # the C program: compiled in the root when it has a compiler
    cat > "$R$W/prog.c" << 'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
__attribute__((noinline)) static void inner_abort(int n)
{
    printf("pid %d depth %d\n", (int)getpid(), n);
    fflush(stdout);
    abort();
}
__attribute__((noinline)) void outer_call(int n) { inner_abort(n + 1); __asm__ volatile(""); }
int main(void) { outer_call(1); return 0; }
EOF
    if [ -x "$R/usr/bin/cc" ] || [ -x "$R/usr/bin/gcc" ]; then
        cc_where="in the root"
        in_root "$name" 0 "$T/$name.cc.out" cc -g -O1 -o "$W/prog" "$W/prog.c"
    else
        cc_where="on the host (the root has no compiler)"
        cc -g -O1 -o "$R$W/prog" "$R$W/prog.c" 2> "$T/$name.cc.out"
    fi
    [ -x "$R$W/prog" ] || { cat "$T/$name.cc.out" >&2; fail "$name: cannot build the C program $cc_where"; }
    build_ids "$R" "$T/$name-ids.json"
    export CT_ROOT=$R CT_IDS=$T/$name-ids.json CT_HOST_IDS=$T/host-ids.json

    for case in abort segv c backward; do
        for uid in 0 65534; do
            [ "$case" = backward ] && [ "$uid" != 0 ] && continue
            tag=$name.$case.$uid
            if [ "$case" = c ]; then
                [ -x "$R$W/prog" ] || continue
                in_root "$name" "$uid" "$T/$tag.out" "$W/prog"
            elif [ "$case" = backward ]; then
                in_root "$name" "$uid" "$T/$tag.out" /usr/bin/python3 "$W/crash.py" segv backward
            else
                in_root "$name" "$uid" "$T/$tag.out" /usr/bin/python3 "$W/crash.py" "$case" forward
            fi
            B=$(next_bundle) || { fail "$tag: no bundle"; sed 's/^/  | /' "$T/$tag.out" >&2; continue; }
            echo "-- $tag: $(head -c 300 "$T/$tag.out" | head -3 | tr '\n' ' ')"
            nspid=$(sed -n 's/^pid \([0-9]*\) .*/\1/p' "$T/$tag.out" | head -1)
            # --- the bundle and its manifest
            if [ "$uid" = 0 ]; then
                check "$tag: bundle is 0640 root:root" [ "$(stat -c %a:%U:%G "$B")" = 640:root:root ]
            else
                check "$tag: bundle is 0640 root:root with a read ACL for uid $uid" \
                    bash -c "[ \$(stat -c %a:%U:%G '$B') = 640:root:root ] && getfacl -n '$B' 2>/dev/null | grep -qx 'user:$uid:r--'"
                check "$tag: uid $uid can read its bundle" setpriv --reuid="$uid" --regid="$uid" --clear-groups cat "$B" > /dev/null
            fi
            cp_member "$B" manifest.json > "$T/$tag.manifest.json" || fail "$tag: no manifest"
            M=$T/$tag.manifest.json
            check "$tag: manifest: uid $uid" [ "$(json "$M" 'd["uid"]')" = "$uid" ]
            check "$tag: manifest: a pid namespace that is not the host's" \
                json "$M" "d['namespaces']['pid'].startswith('pid:[') and d['namespaces']['pid'] != '$HOST_PIDNS' or sys.exit(1)"
            check "$tag: manifest: a mount namespace that is not the host's" \
                json "$M" "d['namespaces']['mnt'] != '$HOST_MNTNS' or sys.exit(1)"
            check "$tag: manifest: ns_pids ends with the pid the process saw (${nspid:-?}), not 1" \
                json "$M" "len(d['ns_pids']) == 2 and d['ns_pids'][0] == d['pid'] and str(d['ns_pids'][-1]) == '${nspid:-x}' and d['ns_pids'][-1] != 1 or sys.exit(1)"
            check "$tag: manifest: root is the container's root directory" [ "$(json "$M" 'd.get("root")')" = "$R" ]
            exe_want=$([ "$case" = c ] && echo "$R$W/prog" || echo "$R$(grep '^python3=' "$stamp" | cut -d= -f2 | cut -d' ' -f1)")
            check "$tag: manifest: exe is the root's file ($exe_want)" [ "$(json "$M" 'd["exe"]')" = "$exe_want" ]
            # --- enrichment: stacks.json, made through the process's root
            cp_member "$B" capture.json > "$T/$tag.capture.json"
            check "$tag: the enrich step is ok" \
                json "$T/$tag.capture.json" "[x for x in d['steps'] if x['name'] == 'enrich'][0]['status'] == 'ok' or sys.exit(repr([x for x in d['steps'] if x['name'] == 'enrich']))"
            S=$T/$tag.stacks.json
            cp_member "$B" stacks.json > "$S" 2> /dev/null || { fail "$tag: no stacks.json"; echo '{}' > "$S"; }
            check "$tag: stacks.json: binaries through the process's root, sealed" \
                json "$S" "d['binaries'] == 'root-fd' and d['sealed'] or sys.exit(1)"
            sn() { check "$tag: stacks.json: $1" "$PY" "$T/check.py" - "$S" "$2"; }
            sn "libc.so.6 has the root's build-id, and every libc frame carries it" \
                'root_build_id(s["native"], "libc.so.6") and frames_build_ids(s["native"], "libc.so.6")'
            if [ "$case" = segv ] || [ "$case" = backward ]; then
                sn "the crashed thread faulted in the root's libc (strlen), and has symbolized libc frames" \
                    'base(crashed(s["native"])["frames"][0]["module"]) == "libc.so.6" and frames_in(s["native"], "libc.so.6", crashed(s["native"]))'
            else
                sn "the crashed thread's libc frames name abort (the root's libc symbolized)" \
                    'show("abort" in [f["function"] for f in frames_in(s["native"], "libc.so.6", crashed(s["native"]))])'
            fi
            sn "libc.so.6 found in the root" 'found_in_root(s["native"], "libc.so.6", "<root>/")'
            if [ "$case" = c ]; then
                sn "the program's frames inner_abort, outer_call, main" \
                    'show([f["function"] for f in crashed(s["native"])["frames"] if base(f.get("module")) == "prog"][:3]) == ["inner_abort", "outer_call", "main"]'
                sn "the program has the root's file's build-id" 'root_build_id(s["native"], "prog")'
            else
                sn "the interpreter (python3.x) has the root's build-id" 'root_build_id(s["native"], "python3")'
                sn "the crashed thread has symbolized frames in the root's python (Py_RunMain)" \
                    '"Py_RunMain" in [f["function"] for f in frames_in(s["native"], "python3", crashed(s["native"]))]'
                # Debian's 3.14 (gcc) runs the interpreter loop in a local clone that .dynsym does
                # not name: _PyEval_EvalFrameDefault itself is not on the stack there
                if [ "$want" = 3.13 ]; then
                    sn "the crashed thread runs _PyEval_EvalFrameDefault in the root's python" \
                        '"_PyEval_EvalFrameDefault" in [f["function"] for f in frames_in(s["native"], "python3", crashed(s["native"]))]'
                fi
                if [ "$case" = backward ]; then
                    sn "libtorch_cpu.so has the root's build-id, found in the root" \
                        'root_build_id(s["native"], "libtorch_cpu.so") and found_in_root(s["native"], "libtorch_cpu.so", "<root>/")'
                    sn "the crashed thread has symbolized libtorch_cpu.so frames (the autograd engine)" \
                        'any("autograd" in f["function"] for f in frames_in(s["native"], "libtorch_cpu.so", crashed(s["native"])))'
                else
                    # forward: libtorch_python.so applies the Function (Debian's 2.14 exports no
                    # THPFunction_apply: there the frames are named by module + offset)
                    sn "libtorch_python.so has the root's build-id, found in the root, and frames on the crashed thread" \
                        'root_build_id(s["native"], "libtorch_python.so") and found_in_root(s["native"], "libtorch_python.so", "<root>/") and [f for f in crashed(s["native"])["frames"] if base(f.get("module")).startswith("libtorch_python.so")]'
                    if [ "$want" = 3.13 ]; then
                        sn "the crashed thread has libtorch_python.so's THPFunction_apply (the Function applied in forward)" \
                            'any("THPFunction_apply" in f["function"] for f in frames_in(s["native"], "libtorch_python.so", crashed(s["native"])))'
                    fi
                fi
            fi
            # --- offline: the bundle analyzed with the root as --sysroot, stacks.json ignored
            A=$T/$tag.analysis.json
            rc=0
            timeout 400 "$CP_BIN/crashpack" analyze --json --no-stacks --sysroot "$R" "$B" > "$A" 2> "$A.err" || rc=$?
            check "$tag: analyze --sysroot ROOT --no-stacks exits 0 (rc $rc)" [ "$rc" = 0 ]
            [ -s "$A" ] || echo '{"threads": [], "modules": []}' > "$A"
            an() { check "$tag: analyze --sysroot: $1" "$PY" "$T/check.py" "$A" - "$2"; }
            an "libc.so.6 found under the root, the root's build-id" \
                "root_build_id(r, 'libc.so.6') and found_in_root(r, 'libc.so.6', '$R/')"
            an "the crashed thread has a symbolized libc frame" 'frames_in(r, "libc.so.6", crashed(r))'
            an "every native frame of every thread is named (a function, or module + offset of a stripped module)" \
                'show(unnamed(r)) == []'
            check "$tag: analyze --sysroot: the same crashed-thread functions as stacks.json" \
                "$PY" "$T/check.py" "$A" "$S" 'show([f["function"] for f in crashed(r)["frames"]]) == [f["function"] for f in crashed(s["native"])["frames"]]'
            if [ "$case" = c ]; then
                an "the program's frames inner_abort, outer_call, main, with file and line" \
                    'show([(f["function"], base(f["file"])) for f in crashed(r)["frames"] if base(f.get("module")) == "prog"][:3]) == [("inner_abort", "prog.c"), ("outer_call", "prog.c"), ("main", "prog.c")]'
            else
                tmod=$([ "$case" = backward ] && echo libtorch_cpu.so || echo libtorch_python.so)
                an "the interpreter and $tmod found under the root, with the root's build-ids" \
                    "root_build_id(r, 'python3') and found_in_root(r, 'python3', '$R/') and root_build_id(r, '$tmod') and found_in_root(r, '$tmod', '$R/')"
                if [ "$case" = backward ]; then
                    an "the crashed thread has symbolized python and libtorch_cpu.so frames" \
                        'frames_in(r, "python3", crashed(r)) and any("autograd" in f["function"] for f in frames_in(r, "libtorch_cpu.so", crashed(r)))'
                elif [ "$want" = 3.13 ]; then
                    an "the crashed thread has symbolized python and libtorch_python.so frames (THPFunction_apply)" \
                        'frames_in(r, "python3", crashed(r)) and any("THPFunction_apply" in f["function"] for f in frames_in(r, "libtorch_python.so", crashed(r)))'
                fi
                an "the interpreter is named: CPython $want.x in the root's python3" \
                    "show(r['python'] and r['python']['version']).startswith('$want.') and base(r['python']['module']).startswith('python$want')"
                # Python frames: need 3.13/3.14 support (analyze/native/python*.c)
                inner=$([ "$case" = abort ] && echo "$L_ABORT" || echo "$L_SEGV")
                if [ "$case" = backward ]; then
                    exp="[('stage_three', $inner), ('stage_two', $L_TWO), ('stage_one', $L_ONE), ('backward', $L_BACK), ('run_backward', $L_RUNB), ('<module>', $L_MOD)]"
                else
                    exp="[('stage_three', $inner), ('stage_two', $L_TWO), ('stage_one', $L_ONE), ('forward', $L_FNF), ('forward', $L_NETF), ('run_forward', $L_RUNF), ('<module>', $L_MODF)]"
                fi
                if [ -n "${CP_CONTAINER_NO_PYFRAMES:-}" ]; then
                    echo "skip: $tag: Python frames (CP_CONTAINER_NO_PYFRAMES)"
                else
                    an "Python frames: the script's functions and lines, innermost first (needs $want support)" \
                        "show(script_frames(r, '$W/crash.py')) == $exp"
                    an "Python frames: the crashed thread's Python frames merge with its native stack (needs $want support)" \
                        'crashed(r)["python_merge"] == "ok"'
                fi
            fi
            # --- without --sysroot the host's own files are rejected: their build-ids differ
            if [ "$uid" = 0 ] && [ "$case" != c ]; then
                H=$T/$tag.host.json
                timeout 400 "$CP_BIN/crashpack" analyze --json --no-stacks "$B" > "$H" 2> /dev/null || true
                [ -s "$H" ] || echo '{"threads": [], "modules": []}' > "$H"
                check "$tag: analyze without --sysroot: the host's libc.so.6 is rejected (build-id mismatch)" \
                    "$PY" "$T/check.py" "$H" - 'show(module(r, "libc.so.6").get("problem") or "").startswith("build-id mismatch") and not module(r, "libc.so.6").get("found_at")'
            fi
        done
    done

    # --- no core: an uncaught torch RuntimeError in the forward pass, reported by the Python hook
    # through the socket mounted into the container; the agent on the host snapshots the live
    # process (its host pid from SO_PEERCRED, the request's pid being the container's own)
    if [ ! -d "$R/run/crashpack" ]; then
        mkdir -p "$R/run/crashpack" && made_run+=("$R/run/crashpack")
    fi
    pyver=$(grep '^python3=' "$stamp" | cut -d' ' -f2 | cut -d. -f1,2)
    site=$R$W/home/.local/lib/python$pyver/site-packages
    mkdir -p "$site" "$R$W/hookstate"
    cp -r "$CP_SRC/python/crashpack" "$CP_SRC/python/_crashpack_hook.py" "$CP_SRC/python/crashpack-hook.pth" "$site/"
    chmod -R a+rX "$R$W/home"
    chmod 1777 "$R$W/hookstate"
    for uid in 0 65534; do
        tag=$name.hook.$uid
        in_root_hook "$name" "$uid" 0 "$T/$tag.off" /usr/bin/python3 "$W/crash.py" raise forward
        in_root_hook "$name" "$uid" 1 "$T/$tag.on" /usr/bin/python3 "$W/crash.py" raise forward
        echo "-- $tag: $(head -1 "$T/$tag.on") / $(tail -1 "$T/$tag.on.err")"
        check "$tag: exit status 1 with and without the hook" [ "$(cat "$T/$tag.off.rc") $(cat "$T/$tag.on.rc")" = "1 1" ]
        # (the lines before it are torch's own start-up warnings: UCX's carry a time stamp and a pid)
        check "$tag: stderr ends in torch's RuntimeError; the traceback is byte-identical with the hook" \
            bash -c "tail -1 '$T/$tag.on.err' | grep -q '^RuntimeError: mat1 and mat2 shapes cannot be multiplied' && diff <(sed -n '/^Traceback/,\$p' '$T/$tag.off.err') <(sed -n '/^Traceback/,\$p' '$T/$tag.on.err')"
        B=$(next_bundle) || { fail "$tag: no bundle from the agent"; sed 's/^/  | /' "$T/$tag.on.err" "$T/agent.log" >&2; continue; }
        nspid=$(sed -n 's/^pid \([0-9]*\) .*/\1/p' "$T/$tag.on" | head -1)
        cp_member "$B" manifest.json > "$T/$tag.manifest.json" || fail "$tag: no manifest"
        M=$T/$tag.manifest.json
        check "$tag: a snapshot by the hook, of uid $uid" \
            json "$M" "d['uid'] == $uid and d['death']['kind'] == 'exception' and d['death']['trigger'] == 'hook' or sys.exit(repr(d.get('death')))"
        check "$tag: manifest: the container's pid namespace, ns_pids ending with the pid it saw (${nspid:-?}), its root" \
            json "$M" "d['namespaces']['pid'] != '$HOST_PIDNS' and str(d['ns_pids'][-1]) == '${nspid:-x}' and d['ns_pids'][0] == d['pid'] and d.get('root') == '$R' or sys.exit(repr((d.get('namespaces'), d.get('ns_pids'), d.get('root'))))"
        if [ "$uid" != 0 ]; then
            check "$tag: uid $uid can read its bundle, nobody else but root" \
                bash -c "[ \$(stat -c %a:%U:%G '$B') = 640:root:root ] && setpriv --reuid=$uid --regid=$uid --clear-groups cat '$B' > /dev/null"
        fi
        A=$T/$tag.analysis.json
        timeout 400 "$CP_BIN/crashpack" analyze --json --sysroot "$R" "$B" > "$A" 2> "$A.err" || true
        [ -s "$A" ] || echo '{}' > "$A"
        check "$tag: report: torch's RuntimeError and its message" \
            json "$A" "d['exception']['type'] == 'RuntimeError' and 'mat1 and mat2 shapes cannot be multiplied (4x8 and 16x16)' in d['exception']['message'] or sys.exit(repr(d.get('exception', {}).get('type')))"
        exp="[('<module>', $L_MODF), ('run_forward', $L_RUNF), ('forward', $L_NETF), ('forward', $L_FNF), ('stage_one', $L_ONE), ('stage_two', $L_TWO), ('stage_three', $L_RAISE)]"
        check "$tag: report: the exception's frames in the script, outermost first (the forward pass)" \
            json "$A" "[(f['function'], f['line']) for f in d['exception']['frames'] if f['file'] == '$W/crash.py'] == $exp or sys.exit(repr([(f['function'], f['file'], f['line']) for f in d['exception']['frames']]))"
        check "$tag: report: the raising thread is the core's MainThread, by its tid in the container" \
            json "$A" "d['process']['crashed_tid_source'] == 'exception' and [t['python']['name'] for t in d['threads'] if t['tid'] == d['process']['crashed_tid'] and t.get('python')] == ['MainThread'] or sys.exit(repr((d['process'].get('crashed_tid'), [(t['tid'], (t.get('python') or {}).get('name')) for t in d['threads']])))"
        check "$tag: report: every native frame of every thread is named" "$PY" "$T/check.py" "$A" - 'show(unnamed(r)) == []'
        check "$tag: report: the interpreter is CPython $want, found in the root" \
            json "$A" "d['python']['version'].startswith('$want.') and [m for m in d['modules'] if m['path'].split('/')[-1].startswith('python3') and (m.get('found_at') or '').startswith('$R/')] or sys.exit(repr(d.get('python')))"
    done
done
finish
