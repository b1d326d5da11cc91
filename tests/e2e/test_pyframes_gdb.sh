#!/usr/bin/env bash
# An oracle crashpack does not share code with: CPython's own gdb extension (Tools/gdb/libpython.py,
# shipped by pyenv as bin/python3.X-gdb.py). For each pyenv CPython of PYENV_VERSIONS (3.10-3.13)
# that is installed, py_abort_deep.py and py_thread_crash.py crash through the real core_pattern
# path (cp_setup/cp_install, `mode = full`). The bundle's `core` member is a plain ELF core
# (docs/bundle-format.md: the frames are aligned with tar members, so `zstd -dc | tar -xO core`
# gives it back byte for byte; its XXH64 must equal capture.json's core.member_xxh64), and gdb reads
# that very core:
#     gdb -batch -nx -ex 'source .../python3.X-gdb.py' -ex 'thread apply all py-bt' EXE CORE
# while `crashpack analyze --json` reads the bundle. Per thread (gdb's LWP = crashpack's tid) the
# (function, file, line) list of py-bt's `File "F", line N, in FUNC` lines must equal crashpack's
# python_frames[]: for the crashed thread (which must also be gdb's current thread) and for every
# thread where gdb prints frames; and crashpack must claim no Python frames on a thread where gdb
# finds none. py-bt's other lines (`<built-in method ...>`, "Waiting for the GIL") are not Python
# frames and are not compared.
# A version whose gdb script does not load, or whose py-bt prints no frame at all, is skipped with
# one line saying so (gdb's view is then no oracle); a version not installed likewise.
source "$(dirname "$0")/../lib.sh"
FIX=$CP_SRC/fixtures/programs
PYENV_VERSIONS=${CP_PYENV_VERSIONS:-3.10 3.11 3.12 3.13}
GDB=$(command -v gdb || true)
[ -n "$GDB" ] || { echo "SKIP: no gdb"; exit 77; }
XXH=$(command -v xxhsum || true)
cp_setup
echo "mode = full" >> "$T/conf"
cp_install

cat > "$T/cmp.py" <<'PYEOF'
"""cmp.py REPORT GDB_OUTPUT: compares py-bt's frames per LWP with the report's python_frames.
Prints one line per compared thread; exit 0 when every comparison holds, 1 when one fails,
3 when gdb printed no Python frame at all (no oracle)."""
import json, re, sys

r = json.load(open(sys.argv[1]))
gdb, cur, lwp = {}, None, None
for ln in open(sys.argv[2], errors="replace"):
    ln = ln.rstrip("\n")
    m = re.match(r"^\[Current thread is \d+ \((?:Thread 0x[0-9a-f]+ )?\(?LWP (\d+)\)?\)\]", ln)
    if m:
        cur = int(m.group(1))
        continue
    m = re.match(r"^Thread \d+ \((?:Thread 0x[0-9a-f]+ \()?LWP (\d+)\)?\):", ln)
    if m:
        lwp = int(m.group(1))
        gdb[lwp] = {"frames": [], "unreadable": False}
        continue
    if lwp is None:
        continue
    m = re.match(r'^  File "(.*)", line (\d+), in (.*)$', ln)
    if m:
        gdb[lwp]["frames"].append((m.group(3), m.group(1), int(m.group(2))))
    elif "unable to read python frame" in ln or "frame information optimized out" in ln:
        gdb[lwp]["unreadable"] = True

# gdb names the current thread only when there are several; a single thread is the current one
if cur is None and len(gdb) == 1:
    cur = next(iter(gdb))
if not any(g["frames"] for g in gdb.values()):
    print("  gdb's py-bt printed no Python frame")
    sys.exit(3)

def seq(t):
    return [(f["function"], f["file"], f["line"]) for f in t["python_frames"]]

cp = {t["tid"]: t for t in r["threads"]}
crashed = [t["tid"] for t in r["threads"] if t["crashed"]]
ok = True
if crashed != [cur]:
    print(f"  crashed thread: crashpack {crashed}, gdb's current thread LWP {cur}")
    ok = False
for tid in sorted(set(gdb) | set(cp)):
    g = gdb.get(tid, {"frames": [], "unreadable": False})
    c = seq(cp[tid]) if tid in cp else None
    tag = " (crashed)" if tid == cur else ""
    if c is None:
        print(f"  LWP {tid}{tag}: gdb has the thread, crashpack does not")
        ok = False
    elif not g["frames"]:
        if c:
            print(f"  LWP {tid}{tag}: gdb finds no Python frame, crashpack {c}")
            ok = False
        else:
            print(f"  LWP {tid}{tag}: no Python frames in either")
    elif g["frames"] == c and not g["unreadable"]:
        print(f"  LWP {tid}{tag}: {len(c)} frames equal: {[f[0] for f in c]}")
    else:
        print(f"  LWP {tid}{tag}: DIFFER{' (gdb could not read some frames)' if g['unreadable'] else ''}")
        print(f"    gdb       {g['frames']}")
        print(f"    crashpack {c}")
        ok = False
    if tid == cur and not g["frames"]:
        print(f"  LWP {tid}: the crashed thread has no frames in gdb's py-bt")
        ok = False
sys.exit(0 if ok else 1)
PYEOF

# jtrue FILE EXPR: EXPR over the JSON file d is true
jtrue() { [ "$(json "$@")" = True ]; }
# case_one VERSION TAG BIN GDBSCRIPT SCRIPT: crash, extract, gdb, analyze, compare (0 ok, 1 fail, 3 no oracle)
case_one() {
    local v=$1 tag=$2 bin=$3 gs=$4 script=$5 pid B rc=0 want got
    pid=$(cp_crash "$bin" "$script")
    B=$(cp_bundle_for "$pid" 120) || { fail "$tag: no bundle"; return 1; }
    cp_member "$B" capture.json > "$T/$tag.capture.json"
    check "$tag: full capture, core not truncated" jtrue "$T/$tag.capture.json" \
        'd["mode"]["effective"] == "full" and not d["core"]["truncated"]'
    cp_member "$B" core > "$T/$tag.core"
    check "$tag: the bundle's core member is an ELF core" \
        bash -c "[ \"\$(head -c 4 '$T/$tag.core' | od -An -c | tr -d ' ')\" = 177ELF ]"
    if [ -n "$XXH" ]; then
        want=$(json "$T/$tag.capture.json" 'd["core"]["member_xxh64"]')
        got=$("$XXH" -H64 "$T/$tag.core" 2> /dev/null | awk '{print $1}')
        got=${got#XXH64_}
        check "$tag: the extracted core's XXH64 is capture.json's member_xxh64 ($want)" [ "$got" = "$want" ]
    fi
    timeout 120 "$CP_BIN/crashpack" analyze --json "$B" > "$T/$tag.json" 2> "$T/$tag.json.err" || rc=$?
    check "$tag: crashpack analyze --json exits 0 (rc $rc)" [ "$rc" = 0 ]
    DEBUGINFOD_URLS= timeout 120 "$GDB" -batch -nx -iex 'set debuginfod enabled off' \
        -ex "source $gs" -ex 'thread apply all py-bt' "$bin" "$T/$tag.core" > "$T/$tag.gdb" 2>&1
    rm -f "$T/$tag.core"
    if grep -q 'Undefined command: "py-bt"' "$T/$tag.gdb"; then
        echo "  $tag: $gs did not load (py-bt is undefined)"
        return 3
    fi
    rc=0
    python3 "$T/cmp.py" "$T/$tag.json" "$T/$tag.gdb" || rc=$?
    case $rc in
    0) ok "$tag: every thread's Python frames equal gdb py-bt's (crashed thread included)" ;;
    3) return 3 ;;
    *) fail "$tag: crashpack's python_frames differ from gdb py-bt's (gdb output: $T/$tag.gdb)" ;;
    esac
    return 0
}

for v in $PYENV_VERSIONS; do
    bin=$(ls -d /root/.pyenv/versions/$v.*/bin/python$v 2> /dev/null | sort -V | tail -1)
    if [ -z "$bin" ] || [ ! -x "$bin" ]; then
        echo "note: no pyenv CPython $v here; skipped"
        continue
    fi
    gs=$(dirname "$bin")/python$v-gdb.py
    if [ ! -f "$gs" ]; then
        echo "note: $v: no $gs; skipped"
        continue
    fi
    # the script must load into gdb 13's Python before it can be an oracle
    if ! "$GDB" -batch -nx -ex "source $gs" -ex 'help py-bt' "$bin" > "$T/load$v.txt" 2>&1 ||
        ! grep -qi 'python' "$T/load$v.txt"; then
        echo "note: $v: gdb could not load $gs ($(grep -m1 -i error "$T/load$v.txt")); skipped"
        continue
    fi
    for s in py_abort_deep py_thread_crash; do
        case_one "$v" "$s-$v" "$bin" "$gs" "$FIX/$s.py"
        [ $? = 3 ] && { echo "note: $v: gdb's py-bt printed nothing usable; $v skipped"; break; }
    done
done

finish
