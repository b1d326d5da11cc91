#!/usr/bin/env bash
# Issue 23, "the answer first" and acceptance 8: the text of `crashpack analyze` opens with the
# answer. The demo's two bundles (scripts/demo.sh), made here through the real paths:
#   segv    cp-segv-threads (5 threads, SIGSEGV in leaf() <- mid() <- main()) through the real
#           core_pattern handler;
#   oom     a Python job raising torch.cuda.OutOfMemoryError, captured by the Python hook
#           (`crashpack python-hook install`, CRASHPACK_HOOK=1) through the node service;
# and a deep recursion (cp-overflow, hundreds of frames) through core_pattern. Checked:
#   - the first 25 lines hold the top diagnosis's title and the crashing frame `leaf` (segv) or
#     the exception's type and message (oom);
#   - the members table and the capture details only with --verbose (-v);
#   - every frame the report has of the crashed thread is printed (text used to stop at 12/40);
#   - no "stacks.json disagrees" warning on a fresh bundle analyzed on the host that captured it;
#   - this host has no NVIDIA driver: the text says so once, in one line, not once per member;
#   - the other Python thread's GIL reads "GIL not held", never "GIL free".
source "$(dirname "$0")/../lib.sh"
cp_setup
CP="$CP_BIN/crashpack"
cp_install

# ---- the C case, through core_pattern ----
pid=$(cp_crash "$CP_BIN/cp-segv-threads")
SEGV=$(cp_bundle_for "$pid" 60) || die "cp-segv-threads: no bundle"
pid=$(cp_crash "$CP_BIN/cp-overflow")
DEEP=$(cp_bundle_for "$pid" 60) || die "cp-overflow: no bundle"

# ---- the Python case, through the hook and the agent ----
PY=/usr/bin/python3
OOM=
if $PY -c 'import torch' 2> /dev/null && $PY -m venv --system-site-packages "$T/venv" > /dev/null 2>&1; then
    mkdir -m 755 "$T/run" "$T/state"
    SOCK=$T/run/agent.sock
    echo "agent_socket = $SOCK" >> "$T/conf"
    "$CP" agent -c "$T/conf" --state-dir "$T/state" 2> "$T/agent.log" &
    AGENT=$!
    for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
    [ -S "$SOCK" ] || { cat "$T/agent.log" >&2; die "the agent did not start"; }
    "$CP" python-hook install --python "$T/venv/bin/python" > /dev/null || die "python-hook install failed"
    cat > "$T/train.py" <<'PYEOF'
import torch

def forward(x):
    # what PyTorch raises when an allocation fails (raised by hand: this machine has no GPU)
    raise torch.cuda.OutOfMemoryError(
        "CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity; "
        "14.10 GiB already allocated; 3.19 MiB free; 14.50 GiB reserved in total by PyTorch)")

forward(torch.zeros(4))
PYEOF
    before=$(ls "$T"/bundles/crash-*.zst | sort)
    CRASHPACK_HOOK=1 CRASHPACK_AGENT_SOCKET="$SOCK" "$T/venv/bin/python" "$T/train.py" > /dev/null 2>&1 || true
    kill -TERM $AGENT; wait $AGENT 2> /dev/null || true
    OOM=$(comm -13 <(echo "$before") <(ls "$T"/bundles/crash-*.zst | sort) | head -1)
    [ -n "$OOM" ] || fail "oom: no bundle from the hook"
else
    echo "note: no python3-torch or venv: the Python case is skipped"
fi

# analyze NAME BUNDLE: NAME.txt (text), NAME.v.txt (--verbose), NAME.vs.txt (-v), NAME.json
analyze() {
    "$CP" analyze "$2" > "$T/$1.txt" 2> "$T/$1.err" || true
    "$CP" analyze --verbose "$2" > "$T/$1.v.txt" 2>&1 || true
    "$CP" analyze -v "$2" > "$T/$1.vs.txt" 2>&1 || true
    "$CP" analyze --json "$2" > "$T/$1.json" 2> /dev/null || true
    head -25 "$T/$1.txt" > "$T/$1.head"
}
analyze segv "$SEGV"
analyze deep "$DEEP"
[ -n "$OOM" ] && analyze oom "$OOM"

# ---- the C case: the answer in the first 25 lines ----
top_title() { json "$T/$1.json" 'd["diagnoses"][0]["title"] if d["diagnoses"] else "no known failure pattern matched"'; }
check "segv: the top diagnosis's title in the first 25 lines" grep -qF "$(top_title segv)" "$T/segv.head"
check "segv: the crashing frame leaf (file:line) in the first 25 lines" \
    grep -Eq '^crash at  leaf cp-segv-threads\.c:[0-9]+ ' "$T/segv.head"
check "segv: what died: exe and death kind in the first 25 lines" \
    bash -c "grep -q '^exe .*cp-segv-threads' '$T/segv.head' && grep -q '^death     core, signal 11 (SIGSEGV)' '$T/segv.head'"
check "segv: the top diagnosis comes before the threads" \
    bash -c "[ \$(grep -n '^diagnosis ' '$T/segv.txt' | head -1 | cut -d: -f1) -lt \$(grep -n '^crashed thread ' '$T/segv.txt' | cut -d: -f1) ]"

# ---- the members table and the capture details: --verbose only ----
for n in segv deep ${OOM:+oom}; do
    check "$n: no members table without --verbose" bash -c "! grep -q '^members\$\|^  name  *size  *compressed' '$T/$n.txt'"
    check "$n: no capture details without --verbose" bash -c "! grep -q '^capture \|^core  \|^user  ' '$T/$n.txt'"
    check "$n: the members table with --verbose" \
        bash -c "grep -q '^members\$' '$T/$n.v.txt' && grep -q '^  manifest.json ' '$T/$n.v.txt' && grep -q '^capture ' '$T/$n.v.txt'"
    check "$n: -v is --verbose" cmp -s "$T/$n.v.txt" "$T/$n.vs.txt"
    # a fresh bundle analyzed on the host that captured it
    check "$n: no 'stacks.json disagrees' warning (fresh bundle, capturing host)" \
        bash -c "! grep -q 'stacks.json disagrees' '$T/$n.txt' '$T/$n.err'"
    check "$n: JSON: no disagreement that matters" \
        [ "$(json "$T/$n.json" '(d["analysis"].get("stacks_json") or {}).get("differences_that_matter", 0)')" = 0 ]
    # this host has no NVIDIA driver: said once, in one line (the test machines have no GPU)
    if [ ! -e /proc/driver/nvidia ]; then
        check "$n: the absent GPU said once ($(grep -c 'NVIDIA driver' "$T/$n.txt") lines)" \
            [ "$(grep -c 'NVIDIA driver' "$T/$n.txt")" = 1 ]
        check "$n: no per-member 'not ok' list of absences" bash -c "! grep -q '^not ok .*absent' '$T/$n.txt'"
        check "$n: --verbose still lists each step" grep -q '^not ok    gpu.json: absent' "$T/$n.v.txt"
    fi
done

# ---- every frame of the crashed thread (a deep recursion) ----
nframes=$(json "$T/deep.json" 'len([t for t in d["threads"] if t.get("crashed")][0]["frames"])')
printed=$(awk '/^crashed thread /{on=1; next} on && /^$/{exit} on && /^  #[0-9]/{n++} END{print n+0}' "$T/deep.txt")
check "deep: the report has more than 12 frames of the crashed thread ($nframes)" [ "$nframes" -gt 12 ]
check "deep: every one of them printed ($printed of $nframes)" [ "$printed" = "$nframes" ]
check "deep: the frames beyond the analysis's cap are counted" grep -q 'more frames beyond the analysis' "$T/deep.txt"
check "deep: the crashing frame is descend" grep -q '^crash at  descend ' "$T/deep.head"

# ---- the Python case: the exception's type and message in the first 25 lines ----
if [ -n "$OOM" ]; then
    check "oom: the top diagnosis's title in the first 25 lines" grep -qF "$(top_title oom)" "$T/oom.head"
    check "oom: the exception's type and message in the first 25 lines" \
        grep -q '^exception torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB' "$T/oom.head"
    check "oom: the user's innermost frame and its source line in the first 25 lines" \
        bash -c "grep -A1 -F 'at File \"$T/train.py\", line 5, in forward' '$T/oom.head' | grep -q 'raise torch.cuda.OutOfMemoryError('"
    check "oom: what died: an exception" grep -q '^death     exception' "$T/oom.head"
    check "oom: no 'GIL free' (reads like free-threaded Python)" bash -c "! grep -q 'GIL free' '$T/oom.txt'"
    check "oom: a long log line is cut with '...' at a word's end, never silently" python3 - "$T/oom.txt" "$T/oom.json" <<'PYEOF'
import json, sys
full = [e["text"] for e in json.load(open(sys.argv[2]))["log"]["errors"]]
cut = [l.split(": ", 1)[1] for l in open(sys.argv[1]).read().splitlines() if l.startswith("log ")]
ok = bool(cut) and len(cut) <= len(full)
for c, f in zip(cut, full):
    if c == f:
        continue
    head = c[:-3]
    # cut: "..." after a prefix of the line that ends where a word ends
    ok = ok and c.endswith("...") and f.startswith(head) and f[len(head)] == " "
sys.exit(0 if ok and any(c.endswith("...") for c in cut) else 1)
PYEOF
fi
finish
