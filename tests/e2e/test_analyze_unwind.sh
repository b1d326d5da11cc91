#!/usr/bin/env bash
# Issue 4, the analyzer's core: unwinding and symbolization of a bundle's core by `crashpack analyze`.
#
# Crashes go through the real kernel core_pattern path (cp_setup; cp_install), and each bundle is
# checked through `crashpack analyze --json` (the crashpack-report/1 contract fields) with python3:
#   cp-segv-threads  the crashed thread (the manifest's tid, never just "the first") is leaf <- mid <-
#                    main; 5 threads, the 4 workers grouped; every frame has module and trust; leaf's
#                    file:line is addr2line's and the source line of the NULL write; --unwinder=fp;
#                    --max-frames; deterministic output; the text summary
#   cp-abort         abort <- do_abort_leaf <- do_abort_mid; SIGABRT/SI_TKILL sent by itself
#   cp-cxx-throw     __cxa_throw <- throw_uncaught <- run_job; the exception type and what()
#   cp-assert, cp-nullfn, cp-overflow (when built): the assert message, NULL-call recovery, stack
#                    overflow and the frame cap
#   no binaries      a private copy of the fixture crashes and is deleted; with --sysroot /nonexistent
#                    every frame still has module + build_id + module_offset; the copy under a sysroot
#                    is found again; a different binary there is rejected (build-id mismatch)
#   hostile          the bundle cut at several offsets: non-zero exit, a clear message, no crash;
#                    the analysis child killed mid-way (test hook): a partial report, exit 1
source "$(dirname "$0")/../lib.sh"
PY=${CP_PYTHON:-/usr/bin/python3}
cp_setup
cp_install

# ---- helpers: python expressions over a report (d) ----
cat > "$T/jq.py" <<'EOF'
import json, sys
args = sys.argv[1:]
show = args[0] == "--print"
if show:
    args = args[1:]
d = json.load(open(args[0]))

def crashed(d):
    return [t for t in d["threads"] if t["crashed"]][0]

def phys(t):
    return [f for f in t["frames"] if not f["inline"]]

def funcs(t, physical=True):
    return [f["function"] for f in (phys(t) if physical else t["frames"])]

def in_order(names, want):
    """want appears in names as a subsequence (aliases: any of a tuple)."""
    i = 0
    for n in names:
        w = want[i] if isinstance(want[i], tuple) else (want[i],)
        if n in w:
            i += 1
            if i == len(want):
                return True
    return False

v = eval(args[1])
if show:
    print(v)
    sys.exit(0)
if not v:
    print("  false: " + args[1], file=sys.stderr)
sys.exit(0 if v else 1)
EOF
jcheck() { local desc=$1; shift; check "$desc" "$PY" "$T/jq.py" "$@"; }
jval() { "$PY" "$T/jq.py" --print "$@"; }
# analyze OUT [args...]: crashpack analyze --json ... > OUT; prints the exit status
analyze() {
    local out=$1 rc=0
    shift
    timeout 300 "$CP_BIN/crashpack" analyze --no-stacks --json "$@" > "$out" 2> "$out.err" || rc=$?
    echo "$rc"
}
manifest_tid() { cp_member "$1" manifest.json | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["tid"])'; }
CONTRACT='all(k in d for k in ("format","process","threads","signature","fingerprint","frames_dropped","unwinder","modules")) and d["format"] == "crashpack-report/1" and all(k in t for t in d["threads"] for k in ("tid","name","crashed","state","frames")) and all(k in f and f["module"] and f["trust"] in ("context","cfi","frame_pointer","recovered","scan") and f["pc"].startswith("0x") and isinstance(f["inline"], bool) for t in d["threads"] for f in t["frames"] for k in ("pc","function","module","file","line","inline","trust")) and all(k in m for m in d["modules"] for k in ("path","build_id","found_at","problem"))'

# ---- 1. multi-threaded SIGSEGV: leaf <- mid <- main ----
pid=$(cp_crash "$CP_BIN/cp-segv-threads")
B=$(cp_bundle_for "$pid" 60) || die "cp-segv-threads: no bundle"
S=$T/segv.json
check "segv: analyze exits 0" [ "$(analyze "$S" "$B")" = 0 ]
mtid=$(manifest_tid "$B")
jcheck "segv: every contract field; every frame has module and trust" "$S" "$CONTRACT"
jcheck "segv: the crashed tid is the manifest's ($mtid) and the only crashed thread" "$S" \
    "d['process']['crashed_tid'] == $mtid and [t['tid'] for t in d['threads'] if t['crashed']] == [$mtid]"
jcheck "segv: the crashed thread is listed first" "$S" "d['threads'][0]['crashed']"
jcheck "segv: 5 threads" "$S" "len(d['threads']) == 5"
jcheck "segv: crashed frames 0..2 are leaf, mid, main" "$S" "funcs(crashed(d))[:3] == ['leaf', 'mid', 'main']"
jcheck "segv: frame 0 trust context, frames 1-2 cfi" "$S" \
    "[f['trust'] for f in phys(crashed(d))[:3]] == ['context', 'cfi', 'cfi']"
jcheck "segv: signal SIGSEGV / SEGV_MAPERR at 0x0" "$S" \
    "d['process']['signal']['name'] == 'SIGSEGV' and d['process']['signal']['code_name'] == 'SEGV_MAPERR' and d['process']['signal']['fault_address'] == '0x0'"
jcheck "segv: workers are named cp-worker-N and blocked in worker_main" "$S" \
    "sorted(t['name'] for t in d['threads'] if not t['crashed']) == ['cp-worker-%d' % i for i in range(4)] and all('worker_main' in funcs(t) for t in d['threads'] if not t['crashed'])"
jcheck "segv: every frame has a build-id and a module offset" "$S" \
    "all(f['build_id'] and f['module_offset'] for t in d['threads'] for f in t['frames'])"
jcheck "segv: modules list the executable with its build-id and where it was found" "$S" \
    "any(m['path'].endswith('/cp-segv-threads') and m['found_at'] and m['build_id'] and not m['problem'] for m in d['modules'])"
jcheck "segv: unwinder dwfl, nothing dropped" "$S" "d['unwinder'] == 'dwfl' and d['frames_dropped'] == 0"
leaf_line=$(jval "$S" "phys(crashed(d))[0]['line']")
leaf_addr=$(jval "$S" "phys(crashed(d))[0]['elf_address']")
src_line=$(grep -n 'target is NULL: SIGSEGV here' "$CP_SRC/fixtures/programs/cp-segv-threads.c" | cut -d: -f1)
a2l=$(addr2line -f -i -C -e "$CP_BIN/cp-segv-threads" "$leaf_addr" | sed -n 2p | sed 's/.*://; s/ .*//')
check "segv: leaf's line ($leaf_line) is the NULL write ($src_line)" [ "$leaf_line" = "$src_line" ]
check "segv: leaf's line is addr2line's at $leaf_addr ($a2l)" [ "$leaf_line" = "$a2l" ]
jcheck "segv: leaf's file is cp-segv-threads.c" "$S" "phys(crashed(d))[0]['file'].endswith('cp-segv-threads.c')"
S2=$T/segv2.json
analyze "$S2" "$B" > /dev/null
check "segv: the same input gives the same output" cmp -s "$S" "$S2"
"$CP_BIN/crashpack" analyze "$B" > "$T/segv.txt" 2>&1
check "segv text: the crashed thread's frames" bash -c "grep -q '^crashed thread $mtid' '$T/segv.txt' && grep -q ' leaf (cp-segv-threads+0x' '$T/segv.txt'"
check "segv text: the 4 workers grouped as one stack" grep -q '^4 threads: ' "$T/segv.txt"
check "segv text: the signal and its cause" grep -q '^signal *SIGSEGV (SEGV_MAPERR)' "$T/segv.txt"
F=$T/segv-fp.json
check "segv --unwinder=fp: exits 0" [ "$(analyze "$F" --unwinder=fp "$B")" = 0 ]
jcheck "segv --unwinder=fp: leaf, mid, main by frame pointers" "$F" \
    "d['unwinder'] == 'fp' and funcs(crashed(d))[:3] == ['leaf', 'mid', 'main'] and [f['trust'] for f in phys(crashed(d))[1:3]] == ['frame_pointer'] * 2"
M=$T/segv-max.json
analyze "$M" --max-frames 2 "$B" > /dev/null
jcheck "segv --max-frames 2: the innermost 2 kept, the rest counted" "$M" \
    "funcs(crashed(d)) == ['leaf', 'mid'] and crashed(d)['frames_dropped'] >= 3 and d['frames_dropped'] >= crashed(d)['frames_dropped']"

# ---- 2. abort() ----
pid=$(cp_crash "$CP_BIN/cp-abort")
B=$(cp_bundle_for "$pid" 60) || die "cp-abort: no bundle"
A=$T/abort.json
check "abort: analyze exits 0" [ "$(analyze "$A" "$B")" = 0 ]
jcheck "abort: contract fields, module and trust everywhere" "$A" "$CONTRACT"
jcheck "abort: abort <- do_abort_leaf <- do_abort_mid <- main" "$A" \
    "in_order(funcs(crashed(d)), [('abort', '__GI_abort'), 'do_abort_leaf', 'do_abort_mid', 'main'])"
jcheck "abort: SIGABRT, SI_TKILL, sent by the process itself" "$A" \
    "d['process']['signal']['name'] == 'SIGABRT' and d['process']['signal']['code_name'] == 'SI_TKILL' and d['process']['signal']['self_sent']"
jcheck "abort: the crashed tid is the manifest's" "$A" "d['process']['crashed_tid'] == $(manifest_tid "$B")"

# ---- 3. uncaught C++ exception ----
pid=$(cp_crash "$CP_BIN/cp-cxx-throw")
B=$(cp_bundle_for "$pid" 60) || die "cp-cxx-throw: no bundle"
X=$T/cxx.json
check "cxx: analyze exits 0" [ "$(analyze "$X" "$B")" = 0 ]
jcheck "cxx: contract fields, module and trust everywhere" "$X" "$CONTRACT"
jcheck "cxx: __cxa_throw <- throw_uncaught <- run_job <- main" "$X" \
    "in_order(funcs(crashed(d)), ['__cxa_throw', 'throw_uncaught', 'run_job', 'main'])"
jcheck "cxx: demangled full names keep the parameters" "$X" \
    "any(f['function_full'] == 'throw_uncaught(int)' for f in crashed(d)['frames'])"
jcheck "cxx: the exception type std::runtime_error and its what(), marked heuristic" "$X" \
    "d['cause']['exception']['type'] == 'std::runtime_error' and d['cause']['exception']['what'] == 'fixture: uncaught' and d['cause']['exception']['heuristic']"

# ---- 4. more fixtures, when this build has them ----
if [ -x "$CP_BIN/cp-assert" ]; then
    pid=$(cp_crash "$CP_BIN/cp-assert")
    B=$(cp_bundle_for "$pid" 60) || die "cp-assert: no bundle"
    analyze "$T/assert.json" "$B" > /dev/null
    jcheck "assert: glibc's message from __abort_msg" "$T/assert.json" \
        "'Assertion \`count < limit\' failed' in d['cause']['abort_message'] and d['cause']['abort_message_source'] == '__abort_msg'"
    jcheck "assert: check_invariant is an inline frame inside validate_batch" "$T/assert.json" \
        "any(f['function'] == 'check_invariant' and f['inline'] for f in crashed(d)['frames']) and 'validate_batch' in funcs(crashed(d))"
fi
if [ -x "$CP_BIN/cp-nullfn" ]; then
    pid=$(cp_crash "$CP_BIN/cp-nullfn")
    B=$(cp_bundle_for "$pid" 60) || die "cp-nullfn: no bundle"
    analyze "$T/nullfn.json" "$B" > /dev/null
    jcheck "nullfn: pc 0, then the caller recovered from the stack" "$T/nullfn.json" \
        "phys(crashed(d))[0]['pc'] == '0x0' and phys(crashed(d))[1]['function'] == 'dispatch_event' and phys(crashed(d))[1]['trust'] == 'recovered' and funcs(crashed(d))[2:4] == ['handle_input', 'main']"
fi
if [ -x "$CP_BIN/cp-overflow" ]; then
    pid=$(cp_crash "$CP_BIN/cp-overflow")
    B=$(cp_bundle_for "$pid" 60) || die "cp-overflow: no bundle"
    analyze "$T/overflow.json" "$B" > /dev/null
    jcheck "overflow: recognized as a stack overflow" "$T/overflow.json" "d['cause']['stack_overflow']"
    jcheck "overflow: 256 frames kept (innermost: descend), the rest counted as dropped" "$T/overflow.json" \
        "len(phys(crashed(d))) == 256 and funcs(crashed(d))[0] == 'descend' and crashed(d)['frames_dropped'] > 0"
fi

# ---- 5. no binaries: a private copy crashes and is deleted ----
mkdir -p "$T/hide"
cp "$CP_BIN/cp-segv-threads" "$T/hide/cpx-segv"
pid=$(cp_crash "$T/hide/cpx-segv")
B=$(cp_bundle_for "$pid" 60) || die "hidden copy: no bundle"
rm -f "$T/hide/cpx-segv"
N=$T/nobin.json
check "no binaries: analyze exits 0" [ "$(analyze "$N" --sysroot /nonexistent "$B")" = 0 ]
jcheck "no binaries: every frame still has module + build_id + module_offset" "$N" \
    "all(f['module'] and f['build_id'] and f['module_offset'] for t in d['threads'] for f in t['frames'])"
want_id=$(readelf -n "$CP_BIN/cp-segv-threads" | sed -n 's/^ *Build ID: *//p' | head -1)
jcheck "no binaries: frame 0 is in cpx-segv with the executable's build-id" "$N" \
    "crashed(d)['frames'][0]['module'] == 'cpx-segv' and crashed(d)['frames'][0]['build_id'] == '$want_id'"
jcheck "no binaries: the executable is listed as not found" "$N" \
    "any(m['path'].endswith('/cpx-segv') and not m['found_at'] and 'not found' in m['problem'] for m in d['modules'])"
mkdir -p "$T/sysroot$T/hide"
cp "$CP_BIN/cp-segv-threads" "$T/sysroot$T/hide/cpx-segv"
analyze "$T/sysroot.json" --sysroot "$T/sysroot" "$B" > /dev/null
jcheck "sysroot: the copy under --sysroot is found and names leaf, mid, main" "$T/sysroot.json" \
    "funcs(crashed(d))[:3] == ['leaf', 'mid', 'main'] and any(m['found_at'] == '$T/sysroot$T/hide/cpx-segv' for m in d['modules'])"
cp "$CP_BIN/cp-abort" "$T/sysroot$T/hide/cpx-segv"
analyze "$T/mismatch.json" --sysroot "$T/sysroot" "$B" > /dev/null
jcheck "sysroot: a binary with another build-id is rejected, with the reason" "$T/mismatch.json" \
    "any(m['path'].endswith('/cpx-segv') and not m['found_at'] and 'build-id mismatch' in m['problem'] for m in d['modules']) and crashed(d)['frames'][0]['function'] in (None, '')"

# ---- 6. hostile: bundles cut short, a child that dies ----
B=$(ls "$T"/bundles/crash-*-*-cp-segv-thread*.zst | head -1)
size=$(stat -c %s "$B")
for cut in 2 3 4 8 20; do
    head -c $((size * (cut - 1) / cut)) "$B" > "$T/cut.zst"
    rc=$(analyze "$T/cut.json" "$T/cut.zst")
    check "cut at $((cut - 1))/$cut: exit 1 or 2, not a crash (rc $rc)" bash -c "[ '$rc' = 1 ] || [ '$rc' = 2 ]"
    if [ "$rc" = 1 ]; then
        jcheck "cut at $((cut - 1))/$cut: valid JSON that says the bundle is partial" "$T/cut.json" \
            "d['bundle']['complete'] is False and d['bundle']['partial_reason']"
    else
        check "cut at $((cut - 1))/$cut: a clear message" grep -q 'crashpack analyze: ' "$T/cut.json.err"
    fi
done
head -c $((size / 2)) "$B" > "$T/half.zst"
"$CP_BIN/crashpack" analyze "$T/half.zst" > "$T/half.txt" 2>&1
rc=$?
check "cut in half, text: exit 1 with PARTIAL (rc $rc)" bash -c "[ '$rc' = 1 ] && grep -q '^PARTIAL' '$T/half.txt'"
rc=0
CRASHPACK_TEST_CHILD_CRASH=2 timeout 120 "$CP_BIN/crashpack" analyze --no-stacks --json "$B" > "$T/child.json" 2> "$T/child.err" || rc=$?
check "child killed mid-way: exit 1 (rc $rc)" [ "$rc" = 1 ]
# (a sanitizer build's handler turns the signal into exit status 1: either is a clear message)
check "child killed mid-way: a clear message on stderr" \
    grep -Eq 'the core analysis is incomplete: the native analysis (was killed by SIGSEGV|exited with status 1)' "$T/child.err"
jcheck "child killed mid-way: a partial report with the threads it finished" "$T/child.json" \
    "d['analysis']['complete'] is False and 'partial result: 2 of 5 threads' in d['analysis']['error'] and len(d['threads']) == 2 and d['threads'][0]['crashed']"
finish
