#!/bin/bash
# bench/pyframes/run.sh - Python frames from a core: `crashpack analyze --json BUNDLE` against gdb's
# `thread apply all py-bt` (CPython's own gdb extension, pyenv's bin/python3.X-gdb.py) on the same
# core, as root.
#
#   bench/pyframes/run.sh [-n 7] [-v "3.10 3.11 3.12 3.13"] [BUILD_DIR]
#
# BUILD_DIR: a Release tree (default /tmp/bench-rel: cmake -S . -B /tmp/bench-rel
# -DCMAKE_BUILD_TYPE=Release && cmake --build /tmp/bench-rel -j2). For each pyenv CPython installed,
# fixtures/programs/py_thread_crash.py (three Python threads, a non-main one crashes) crashes
# through the real core_pattern (tests/lib.sh's cp_setup/cp_install: the tests' lock, core_pattern
# restored on exit; `mode = full`); the bundle's core member is extracted as a plain ELF core
# (zstd -dc | tar -xO core). Then N rounds, each one run of every tool (after one untimed round:
# crashpack's debuginfo cache is warm, the core is in the page cache), each run under
# /usr/bin/time -v: wall milliseconds from bash's $EPOCHREALTIME around it, peak RSS from time's
# "Maximum resident set size" (crashpack: its sandboxed child included, time waits for the tree).
# Prints per case the median, min and max wall ms, the median peak RSS, the Python frames each
# tool printed, and gdb's median over crashpack's.
# Also a torch core: Debian's /usr/bin/python3 with python3-torch, `import torch`, then os.abort()
# three calls deep: crashpack only (gdb's py-bt needs python3-dbg's DWARF for Debian's python3;
# what gdb says instead is printed).
set -uo pipefail
n=7
vers="3.10 3.11 3.12 3.13"
while [ $# -gt 0 ]; do
    case $1 in
    -n) n=$2; shift 2 ;;
    -v) vers=$2; shift 2 ;;
    -h) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) break ;;
    esac
done
CP_BUILD=$(cd "${1:-/tmp/bench-rel}" && pwd) || exit 2
export CP_BUILD
[ "$(id -u)" = 0 ] || { echo "run as root (core_pattern)" >&2; exit 2; }
source "$(dirname "$0")/../../tests/lib.sh"
FIX=$CP_SRC/fixtures/programs
GDB=$(command -v gdb) || { echo "no gdb" >&2; exit 2; }
unset DEBUGINFOD_URLS
cp_setup
echo "mode = full" >> "$T/conf"
cp_install

# sample OUT CMD...: one timed run; appends "ms rss_kib" to OUT, the tool's stdout to OUT.last
sample() {
    local out=$1 t0 t1 rss
    shift
    t0=$EPOCHREALTIME
    /usr/bin/time -v -o "$out.tv" "$@" > "$out.last" 2> /dev/null
    t1=$EPOCHREALTIME
    rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$out.tv")
    echo "$(( (${t1/./} - ${t0/./}) / 1000 )) $rss" >> "$out"
}
med() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# row LABEL FILE FRAMES: median/min/max ms, median RSS MiB
row() {
    local m lo hi rss
    m=$(cut -d' ' -f1 "$2" | med)
    lo=$(cut -d' ' -f1 "$2" | sort -n | head -1)
    hi=$(cut -d' ' -f1 "$2" | sort -n | tail -1)
    rss=$(cut -d' ' -f2 "$2" | med)
    printf '  %-34s median %6d ms (min %d, max %d)  peak RSS %5.1f MiB  python frames %s\n' \
        "$1" "$m" "$lo" "$hi" "$(awk -v k="$rss" 'BEGIN {print k / 1024}')" "$3"
    echo "$m" > "$2.median"
}
cpframes() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(sum(len(t["python_frames"]) for t in r["threads"]))' "$1"; }
gdbframes() { grep -c '^  File "' "$1"; }

echo "bench/pyframes: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$CP_SRC" rev-parse --short HEAD), $CP_BUILD, n=$n"
echo "machine: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(uname -r); $($GDB --version | head -1)"
for v in $vers; do
    bin=$(ls -d /root/.pyenv/versions/$v.*/bin/python$v 2> /dev/null | sort -V | tail -1)
    [ -n "$bin" ] && [ -x "$bin" ] || { echo "$v: no pyenv CPython; skipped"; continue; }
    gs=$(dirname "$bin")/python$v-gdb.py
    [ -f "$gs" ] || { echo "$v: no $gs; skipped"; continue; }
    pid=$(cp_crash "$bin" "$FIX/py_thread_crash.py")
    B=$(cp_bundle_for "$pid" 120) || { echo "$v: no bundle" >&2; continue; }
    cp_member "$B" core > "$T/core$v"
    sync
    cpcmd=("$CP_BIN/crashpack" analyze --json "$B")
    gdbcmd=("$GDB" -batch -nx -iex 'set debuginfod enabled off' -ex "source $gs" -ex 'thread apply all py-bt' "$bin" "$T/core$v")
    : > "$T/cp$v"; : > "$T/gdb$v"
    for ((i = 0; i <= n; i++)); do
        [ $i = 0 ] && { "${cpcmd[@]}" > /dev/null 2>&1; "${gdbcmd[@]}" > /dev/null 2>&1; continue; }
        sample "$T/cp$v" "${cpcmd[@]}"
        sample "$T/gdb$v" "${gdbcmd[@]}"
    done
    echo "CPython $(basename "$(dirname "$(dirname "$bin")")") py_thread_crash: core $(( $(stat -c %s "$T/core$v") / 1048576 )) MiB, bundle $(( $(stat -c %s "$B") / 1024 )) KiB"
    row "crashpack analyze --json" "$T/cp$v" "$(cpframes "$T/cp$v.last")"
    row "gdb thread apply all py-bt" "$T/gdb$v" "$(gdbframes "$T/gdb$v.last")"
    awk -v a="$(cat "$T/cp$v.median")" -v b="$(cat "$T/gdb$v.median")" \
        'BEGIN {printf "  gdb / crashpack: x%.1f\n", (a ? b / a : 0)}'
    rm -f "$T/core$v"
done

# ---- torch: Debian's python3, crashpack only ----
if /usr/bin/python3 -c 'import torch' 2> /dev/null; then
    cat > "$T/torch_abort.py" <<'EOF'
import os
import torch


def three():
    os.abort()


def two():
    three()


def one():
    torch.ones(4).sum()
    two()


one()
EOF
    pid=$(cp_crash /usr/bin/python3 "$T/torch_abort.py")
    if B=$(cp_bundle_for "$pid" 300); then
        cpcmd=("$CP_BIN/crashpack" analyze --json "$B")
        : > "$T/cptorch"
        "${cpcmd[@]}" > /dev/null 2>&1
        for ((i = 0; i < n; i++)); do sample "$T/cptorch" "${cpcmd[@]}"; done
        size=$(json <(cp_member "$B" capture.json) 'd["core"]["declared_size"] // 1048576')
        echo "Debian python3 $(/usr/bin/python3 -c 'import platform; print(platform.python_version())') + torch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)' 2> /dev/null), import torch then os.abort() three calls deep: core $size MiB, bundle $(( $(stat -c %s "$B") / 1048576 )) MiB"
        row "crashpack analyze --json" "$T/cptorch" "$(cpframes "$T/cptorch.last")"
        echo "  crashed thread: $(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); t=[t for t in r["threads"] if t["crashed"]][0]; print([f["function"] for f in t["python_frames"]])' "$T/cptorch.last")"
        # gdb py-bt on the same core, once, with pyenv 3.11's script (Debian ships none without python3-dbg)
        gs=$(ls /root/.pyenv/versions/3.11.*/bin/python3.11-gdb.py 2> /dev/null | tail -1)
        if [ -n "$gs" ]; then
            cp_member "$B" core > "$T/coretorch"
            "$GDB" -batch -nx -iex 'set debuginfod enabled off' -ex "source $gs" -ex 'thread apply all py-bt' /usr/bin/python3 "$T/coretorch" > "$T/gdbtorch" 2>&1
            echo "  gdb py-bt (pyenv 3.11's python3.11-gdb.py) on Debian's python3: $(gdbframes "$T/gdbtorch") Python frames; it says: $(grep -v '^\[\|^warning\|^Thread\|^$\|^#\|^Core\|^Program\|^Using\|^[0-9]' "$T/gdbtorch" | sort | uniq -c | sort -rn | head -2 | sed 's/^ *//' | tr '\n' ';')"
            rm -f "$T/coretorch"
        fi
    else
        echo "torch: no bundle" >&2
    fi
else
    echo "torch: /usr/bin/python3 cannot import torch; skipped"
fi
