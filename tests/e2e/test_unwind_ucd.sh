#!/usr/bin/env bash
# The second unwinder, libunwind-coredump (analyze/native/unwind_ucd.c; issue 4 "Unwinding").
#
# 1. `--unwinder=libunwind` on fixtures of the comparison set (fixtures/CMakeLists.txt; C and C++,
#    -O0/-O2, PIE and non-PIE, a NULL call, a library without CFI, abort, an uncaught exception, 64
#    threads), each crashed once through the real core_pattern path:
#      - the crashed thread and its first 10 frames match gdb's `thread apply all bt` on the same
#        core (tests/tools/compare_bt.py frames, the rules of test_unwind_vs_gdb.sh);
#      - the crashed thread shows the same function sequence as `--unwinder=dwfl`, and every
#        thread says threads[].unwinder = "libunwind".
# 2. The fallback in the default mode. No fixture makes libdwfl stop early on its own (every one of
#    them unwinds to _start or clone3), so the test forces it: CRASHPACK_TEST_DWFL_CUT=2 (read by
#    analyze/native/native.c, test-only, no bundle can set it) cuts every libdwfl stack after 2 frames as
#    if libdwfl had failed there. Then every thread of the 64-thread core must show
#    threads[].unwinder = "libunwind", unwinder_fallback {reason: libdwfl stopped early, used:
#    true}, the whole stack again (the functions of the uncut libdwfl run) and unwind_complete.
#    Without the variable every thread says "dwfl" and unwinder_fallback null.
# 3. The stand-in core leaves nothing behind: TMPDIR is a private directory, empty afterwards.
source "$(dirname "$0")/../lib.sh"
PY=${CP_PYTHON:-/usr/bin/python3}
TOOLS=$CP_SRC/tests/tools
cp_setup
cp_install

FIXTURES=(cp-unwind-c-O0 cp-unwind-c-O2 cp-unwind-c-O2-nopie cp-unwind-cxx-O0 cp-unwind-cxx-O2
          cp-nullfn cp-nocfi cp-abort cp-cxx-throw cp-threads64)
FX=$T/fx
mkdir -p "$FX" "$T/work" "$T/tmp"
for f in "${FIXTURES[@]}"; do
    [ -x "$CP_BIN/$f" ] || die "fixture $CP_BIN/$f is missing: build with cmake --build build"
    cp -p "$CP_BIN/$f" "$FX/"
done
cp -p "$CP_BIN/libcp-nocfi.so" "$FX/" || die "libcp-nocfi.so is missing"
chmod -R a+rX "$T"

# same_functions A B [TID]: the crashed thread (or thread TID) of two reports has the same functions
same_functions() {
    "$PY" - "$@" <<'EOF'
import json, sys
def stack(path, tid):
    d = json.load(open(path))
    for t in d["threads"]:
        if (tid is None and t["crashed"]) or t["tid"] == tid:
            return [f["function"] for f in t["frames"]]
    return None
tid = int(sys.argv[3]) if len(sys.argv) > 3 else None
a, b = stack(sys.argv[1], tid), stack(sys.argv[2], tid)
if not a or a != b:
    print("  %s: %s\n  %s: %s" % (sys.argv[1], a, sys.argv[2], b))
    sys.exit(1)
EOF
}

analyze() { # OUT ARGS...: crashpack analyze --json, TMPDIR private
    local out=$1 rc=0
    shift
    TMPDIR=$T/tmp timeout 120 "$CP_BIN/crashpack" analyze --json "$@" > "$out" 2> "$out.err" || rc=$?
    [ "$rc" = 0 ] || fail "crashpack analyze $* exited $rc: $(head -c 300 "$out.err")"
}

# ---- 1. --unwinder=libunwind against gdb and against libdwfl ----
STATS=$T/stats.jsonl
: > "$STATS"
for f in "${FIXTURES[@]}"; do
    pid=$(LD_LIBRARY_PATH=$FX cp_crash "$FX/$f")
    b=$(cp_bundle_for "$pid" 60) || { fail "$f: no bundle for pid $pid"; continue; }
    w=$T/work/$f
    mkdir -p "$w"
    mv "$b" "$w/bundle.zst"
    tar --zstd -xOf "$w/bundle.zst" core > "$w/core" 2>/dev/null || { fail "$f: no core"; continue; }
    crashed=$("$PY" "$TOOLS/reorder_notes.py" "$w/core" --first-tid)
    CP_GDB_FRAMES_OUT=$w/gdb-frames.json LD_LIBRARY_PATH=$FX timeout 120 \
        gdb -batch -ex 'set pagination off' -ex 'thread apply all bt' -ex "source $TOOLS/gdb_frames.py" \
        "$FX/$f" "$w/core" > "$w/gdb.txt" 2>&1 || fail "$f: gdb failed ($w/gdb.txt)"
    analyze "$w/ucd.json" --unwinder=libunwind "$w/bundle.zst"
    analyze "$w/dwfl.json" --unwinder=dwfl "$w/bundle.zst"
    check "$f: --unwinder=libunwind: crashed thread and its first 10 frames match gdb" \
        "$PY" "$TOOLS/compare_bt.py" frames --name "$f" --gdb "$w/gdb.txt" --gdb-frames "$w/gdb-frames.json" \
        --report "$w/ucd.json" --crashed-tid "$crashed" --stats "$STATS"
    check "$f: --unwinder=libunwind: the crashed thread's functions are libdwfl's" \
        same_functions "$w/dwfl.json" "$w/ucd.json"
    check "$f: --unwinder=libunwind: report and every thread say unwinder libunwind" \
        [ "$(json "$w/ucd.json" 'd["unwinder"] + "/" + ",".join(sorted({t["unwinder"] for t in d["threads"]}))')" \
          = libunwind/libunwind ]
    check "$f: --unwinder=libunwind: the crashed thread unwound to its end" \
        [ "$(json "$w/ucd.json" '[t["unwind_complete"] for t in d["threads"] if t["crashed"]]')" = "[True]" ]
done
check "--unwinder=libunwind: >= 99% of all frames of these cores match gdb" \
    "$PY" "$TOOLS/compare_bt.py" total --stats "$STATS" --min-cores "${#FIXTURES[@]}"

# ---- 2. the fallback (forced: see the header) ----
w=$T/work/cp-threads64
if [ -f "$w/bundle.zst" ]; then
    check "default mode: every thread unwound by libdwfl, no fallback" \
        [ "$(json "$w/dwfl.json" 'sorted({(t["unwinder"], t["unwinder_fallback"] is None) for t in d["threads"]})')" \
          = "[('dwfl', True)]" ]
    CRASHPACK_TEST_DWFL_CUT=2 analyze "$w/cut.json" "$w/bundle.zst"
    check "fallback: 64 threads, each unwound by libunwind after libdwfl stopped early" \
        [ "$(json "$w/cut.json" 'sum(1 for t in d["threads"] if t["unwinder"] == "libunwind" and t["unwinder_fallback"]["used"] and t["unwinder_fallback"]["reason"].startswith("libdwfl stopped early") and t["unwind_complete"])')" = 64 ]
    check "fallback: the report's unwinder is still dwfl (the default mode)" \
        [ "$(json "$w/cut.json" 'd["unwinder"]')" = dwfl ]
    check "fallback: the crashed thread has libdwfl's uncut functions back" \
        same_functions "$w/dwfl.json" "$w/cut.json"
    for tid in $(json "$w/dwfl.json" '" ".join(str(t["tid"]) for t in d["threads"][1:4])'); do
        check "fallback: thread $tid has libdwfl's uncut functions back" \
            same_functions "$w/dwfl.json" "$w/cut.json" "$tid"
    done
else
    fail "no 64-thread bundle: the fallback was not tested"
fi

# ---- 3. nothing left behind ----
check "the stand-in core left nothing in TMPDIR" [ -z "$(ls -A "$T/tmp")" ]
finish
