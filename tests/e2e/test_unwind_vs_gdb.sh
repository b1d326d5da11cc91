#!/usr/bin/env bash
# Acceptance (issue 4, #1-#3): crashpack's unwinding and symbolization against gdb and addr2line.
#
# 1. Every fixture of the unwinder set (fixtures/CMakeLists.txt, "unwinder comparison set"; the
#    expected backtraces are in each program's header comment) crashes once through the real kernel
#    core_pattern path. For each bundle: gdb -batch -ex 'thread apply all bt' on its core is the
#    reference, `crashpack analyze --json` is compared with it by tests/tools/compare_bt.py (rules in
#    its header: threads by tid, frames by position, aliases, gdb's ?? and tailcall frames). Per core:
#    the crashed thread is right and its first 10 frames match; over the set: >= 99% of all frames.
#    One more core: the 64-thread core with its notes reordered (tests/tools/reorder_notes.py) so the
#    crashed thread's NT_PRSTATUS group is last, fed to the handler on stdin as the kernel would.
# 2. On the -O2 fixtures, the crashed thread's inline frames and file:line against addr2line -i -f -C.
# 3. The capture finisher enriched every bundle (stacks.json, `crashpack enrich` as the crashed uid);
#    with the fixture binaries moved away, every frame the local analysis named is still named, and
#    the report says its frames come from stacks.json (tests/e2e/test_enrich.sh tests the rest).
#
# The fixtures run from private copies ($T/fx), so moving them away does not disturb a concurrent
# build. CP_UNWIND_STANDIN=eu-stack compares eu-stack's output instead of crashpack's (to check the
# harness itself; eu-stack shares crashpack's library, so it is no evidence for acceptance 2).
# Runtime: about 40 s on a 2-core machine (17 bundles, gdb on each core).
source "$(dirname "$0")/../lib.sh"
PY=${CP_PYTHON:-/usr/bin/python3}
TOOLS=$CP_SRC/tests/tools
STANDIN=${CP_UNWIND_STANDIN:-}
check "compare_bt.py: its matching rules pass their self-test" "$PY" "$TOOLS/compare_bt.py" selftest
cp_setup
cp_install

# ---- the fixture set: build/bin programs run without arguments, plus torch (O2_FIXTURES: addr2line) ----
FIXTURES=(
    cp-unwind-c-O0 cp-unwind-c-O0-nopie cp-unwind-c-O2 cp-unwind-c-O2-nopie cp-unwind-c-O2-stripped
    cp-unwind-cxx-O0 cp-unwind-cxx-O2 cp-unwind-cxx-O2-nopie
    cp-nullfn cp-nocfi cp-abort cp-assert cp-cxx-throw cp-overflow cp-threads64
)
O2_FIXTURES=(cp-unwind-c-O2 cp-unwind-c-O2-nopie cp-unwind-c-O2-stripped cp-unwind-cxx-O2
             cp-unwind-cxx-O2-nopie cp-assert)
FX=$T/fx
mkdir -p "$FX/.debug" "$T/work"
for f in "${FIXTURES[@]}"; do
    [ -x "$CP_BIN/$f" ] || die "fixture $CP_BIN/$f is missing: build with cmake --build build"
    cp -p "$CP_BIN/$f" "$FX/"
done
cp -p "$CP_BIN/libcp-nocfi.so" "$FX/" || die "libcp-nocfi.so is missing"
cp -p "$CP_BIN/.debug/cp-unwind-c-O2-stripped.debug" "$FX/.debug/" || die "no separate debug file"
[ -d "$CP_BUILD/debug/.build-id" ] && cp -a "$CP_BUILD/debug" "$T/fx-debug"
chmod -R a+rX "$T"

analyze_flags=()
if [ -d "$T/fx-debug" ] && "$CP_BIN/crashpack" analyze --help 2>&1 | grep -q -- '--debug-dir'; then
    analyze_flags+=(--debug-dir "$T/fx-debug")
fi

# bundle_of NAME PID: waits for PID's bundle, moves it to $T/work/NAME/bundle.zst, extracts the core
bundle_of() {
    local name=$1 pid=$2 b
    b=$(cp_bundle_for "$pid" 60) || { fail "$name: no bundle for pid $pid"; return 1; }
    mkdir -p "$T/work/$name"
    mv "$b" "$T/work/$name/bundle.zst"
    tar --zstd -xOf "$T/work/$name/bundle.zst" core > "$T/work/$name/core" 2>/dev/null ||
        { fail "$name: bundle has no readable core"; return 1; }
    echo "$pid" > "$T/work/$name/pid"
}

# ---- 1. crash every fixture through the kernel ----
t0=$(date +%s)
NAMES=()
for f in "${FIXTURES[@]}"; do
    pid=$(LD_LIBRARY_PATH=$FX cp_crash "$FX/$f")
    bundle_of "$f" "$pid" && { NAMES+=("$f"); echo "$f" > "$T/work/$f/bin"; echo "$FX/$f" > "$T/work/$f/exe"; }
done
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    pid=$(cp_crash /usr/bin/python3 "$CP_SRC/fixtures/programs/torch_crash.py")
    bundle_of torch "$pid" && { NAMES+=(torch); echo /usr/bin/python3 > "$T/work/torch/exe"; }
else
    fail "python3-torch is not installed (/usr/bin/python3 -c 'import torch')"
fi
echo "crashed ${#NAMES[@]} fixtures in $(($(date +%s) - t0)) s"

# ---- 1b. the reordered core: the crashed thread's notes last, through the handler's stdin ----
if [ -f "$T/work/cp-threads64/core" ]; then
    src=$T/work/cp-threads64
    crashed=$("$PY" "$TOOLS/reorder_notes.py" "$src/core" --first-tid)
    mkdir -p "$T/reord"
    if "$PY" "$TOOLS/reorder_notes.py" "$src/core" -o "$T/reord/core" > "$T/reord/order"; then
        first=$("$PY" "$TOOLS/reorder_notes.py" "$T/reord/core" --first-tid)
        check "reordered core: crashed thread $crashed is no longer first (first: $first)" \
            [ "$first" != "$crashed" ]
        check "reordered core: same size as the kernel's" \
            [ "$(stat -c %s "$src/core")" = "$(stat -c %s "$T/reord/core")" ]
        opid=$(cat "$src/pid")
        # the kernel's arguments (%P %i %I %s %t %u %g %d %c %h): the crashed thread as %i, as always
        "$CP_BIN/crashpack-capture" -c "$T/conf" "$opid" "$crashed" "$crashed" 11 "$(date +%s)" 0 0 1 -1 \
            "$(hostname)" < "$T/reord/core"
        if bundle_of cp-threads64-reordered "$opid"; then
            NAMES+=(cp-threads64-reordered)
            echo "$FX/cp-threads64" > "$T/work/cp-threads64-reordered/exe"
            echo "$crashed" > "$T/work/cp-threads64-reordered/crashed_tid"
            check "reordered core: the bundle's core is the reordered one" \
                cmp -s "$T/reord/core" "$T/work/cp-threads64-reordered/core"
        fi
    else
        fail "reorder_notes.py failed on the 64-thread core"
    fi
fi

# ---- gdb and crashpack on every core ----
t1=$(date +%s)
STATS=$T/stats.jsonl
: > "$STATS"
for n in "${NAMES[@]}"; do
    w=$T/work/$n
    exe=$(cat "$w/exe")
    [ -f "$w/crashed_tid" ] || "$PY" "$TOOLS/reorder_notes.py" "$w/core" --first-tid > "$w/crashed_tid"
    CP_GDB_FRAMES_OUT=$w/gdb-frames.json LD_LIBRARY_PATH=$FX timeout 120 \
        gdb -batch -ex 'set pagination off' -ex 'thread apply all bt' -ex "source $TOOLS/gdb_frames.py" \
        "$exe" "$w/core" > "$w/gdb.txt" 2>&1 || fail "$n: gdb failed ($w/gdb.txt)"
    if [ "$STANDIN" = eu-stack ]; then
        eu-stack --core "$w/core" -e "$exe" -i -s -m -n 0 > "$w/other.txt" 2> "$w/other.err"
        src=(--eu-stack "$w/other.txt")
    else
        rc=0
        timeout 120 "$CP_BIN/crashpack" analyze --json "${analyze_flags[@]}" "$w/bundle.zst" \
            > "$w/report.json" 2> "$w/analyze.err" || rc=$?
        [ "$rc" = 0 ] || fail "$n: crashpack analyze --json exited $rc: $(head -c 300 "$w/analyze.err")"
        src=(--report "$w/report.json")
    fi
    if "$PY" "$TOOLS/compare_bt.py" frames --name "$n" --gdb "$w/gdb.txt" --gdb-frames "$w/gdb-frames.json" \
        "${src[@]}" --crashed-tid "$(cat "$w/crashed_tid")" --stats "$STATS"; then
        ok "$n: crashed thread and its first 10 frames match gdb"
    else
        fail "$n: differs from gdb (see above)"
    fi
done
# the reordered core is the same process: gdb must see the same threads and stacks in it
if [ -f "$T/work/cp-threads64-reordered/gdb.txt" ]; then
    check "reordered core: gdb shows the same thread stacks as in the kernel's core" \
        "$PY" "$TOOLS/compare_bt.py" same-threads "$T/work/cp-threads64/gdb.txt" \
        "$T/work/cp-threads64-reordered/gdb.txt"
fi
echo "gdb + analyze + compare: $(($(date +%s) - t1)) s"
echo "---- per-core figures (issue 4, acceptance 1) ----"
check ">= 99% of all frames match gdb over the whole set" "$PY" "$TOOLS/compare_bt.py" total --stats "$STATS"

# ---- 2. inline frames and file:line on the -O2 fixtures vs addr2line ----
if [ "$STANDIN" != eu-stack ]; then
    echo "---- inline frames and file:line vs addr2line (issue 4, acceptance 2) ----"
    for n in "${O2_FIXTURES[@]}"; do
        w=$T/work/$n
        [ -f "$w/report.json" ] || { fail "$n: no report"; continue; }
        dbg=()
        [ -f "$FX/.debug/$n.debug" ] && dbg=(--debug "$FX/.debug/$n.debug")
        check "$n: inline frames and file:line match addr2line" \
            "$PY" "$TOOLS/compare_bt.py" inline --name "$n" --report "$w/report.json" --binary "$FX/$n" "${dbg[@]}"
    done
fi

# ---- 3. a foreign machine: the finisher enriched every bundle; move the binaries away ----
echo "---- analysis without the binaries (issue 4, acceptance 3) ----"
if [ "$STANDIN" = eu-stack ]; then
    echo "SKIP: acceptance 3 (stand-in mode)"
else
    for n in "${NAMES[@]}"; do
        [ "$n" = torch ] && continue # /usr/bin/python3 cannot be moved away
        w=$T/work/$n
        check "$n: the capture finisher added stacks.json (enrich step ok)" \
            [ "$(tar --zstd -xOf "$w/bundle.zst" capture.json 2>/dev/null | "$PY" -c '
import json, sys
print([s.get("status") for s in json.load(sys.stdin)["steps"] if s.get("name") == "enrich"])')" = "['ok']" ]
    done
    mv "$FX" "$FX.away"
    [ -d "$T/fx-debug" ] && mv "$T/fx-debug" "$T/fx-debug.away"
    for n in "${NAMES[@]}"; do
        [ "$n" = torch ] && continue
        w=$T/work/$n
        rc=0
        timeout 120 "$CP_BIN/crashpack" analyze --json "$w/bundle.zst" > "$w/foreign.json" 2> "$w/foreign.err" || rc=$?
        [ "$rc" -le 1 ] || fail "$n: foreign analyze exited $rc: $(head -c 300 "$w/foreign.err")"
        check "$n: without the binaries, every frame the local analysis named is still named" \
            "$PY" "$TOOLS/compare_bt.py" foreign --name "$n" --local "$w/report.json" --foreign "$w/foreign.json"
        check "$n: without the binaries, analysis.source is stacks.json" \
            [ "$(json "$w/foreign.json" 'd["analysis"]["source"]')" = stacks.json ]
    done
    mv "$FX.away" "$FX"
    [ -d "$T/fx-debug.away" ] && mv "$T/fx-debug.away" "$T/fx-debug"
fi
finish
