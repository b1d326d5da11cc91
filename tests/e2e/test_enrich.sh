#!/usr/bin/env bash
# Enrichment (issue 4, "Enrichment" and acceptance 3; docs/enrich.md): the capture finisher runs
# `crashpack enrich` as the crashed uid and stores stacks.json; `crashpack analyze` uses it where
# the binaries are missing.
#
#  A. A crash as user nobody through the real core_pattern: stacks.json is in the bundle, before
#     capture.json; capture.json's enrich step is ok and ran as uid 65534; stacks.json says so
#     (uid 65534, binaries through the process's root) and names the exe's frames.
#  B. A foreign machine (acceptance 3): fixtures crashed from private copies, analyzed locally,
#     then the copies deleted. analyze --json names every frame the local analysis named (same
#     function per position, every thread: tests/tools/compare_bt.py foreign), with
#     analysis.source "stacks.json"; --no-stacks shows what the local analysis alone lacks.
#  C. A chroot (a container's root): the exe's path exists only inside it, so the host cannot
#     find it, yet stacks.json (looked up through /proc/<pid>/root) names its frames.
#  D. enrich = off: no stacks.json, step "off". A command that hangs: step "timeout" and its
#     process group is gone (killed as the crashed uid). Garbage output or output over
#     enrich_max: step "failed", no stacks.json, the bundle still complete. A command that prints
#     a well-formed stacks.json without the handshake (docs/capture.md, "Descriptors and the
#     enrichment"): refused, step "failed".
#  E. Hostile stacks.json (bundles rebuilt with tests/tools/bundle_edit): a warning, the local
#     analysis, never a crash.
source "$(dirname "$0")/../lib.sh"
PY=${CP_PYTHON:-/usr/bin/python3}
TOOLS=$CP_SRC/tests/tools
EDIT=$CP_BIN/bundle_edit
[ -x "$EDIT" ] || die "$EDIT is missing: build with cmake --build build"
cp_setup
cp_install

FX=$T/fx
mkdir -p "$FX" "$T/work"
for f in cp-unwind-c-O2 cp-unwind-cxx-O2 cp-abort cp-cxx-throw cp-threads64 cp-nocfi; do
    [ -x "$CP_BIN/$f" ] || die "fixture $CP_BIN/$f is missing"
    cp -p "$CP_BIN/$f" "$FX/"
done
cp -p "$CP_BIN/libcp-nocfi.so" "$FX/"
chmod -R a+rX "$T"
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)

# step NAME BUNDLE: prints capture.json's step NAME as JSON
step() { cp_member "$2" capture.json | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
s = [x for x in d.get("steps", []) if x.get("name") == sys.argv[1]]
print(json.dumps(s[0] if s else None))' "$1"; }
# jq-like: jget FILE EXPR (d = the JSON)
jget() { json "$@"; }
members() { tar --zstd -tf "$1" 2>/dev/null; }

# ---- A. as nobody ----
pid=$(LD_LIBRARY_PATH=$FX cp_crash "${NOBODY[@]}" "$FX/cp-unwind-c-O2")
b=$(cp_bundle_for "$pid" 90) || die "no bundle for the crash as nobody"
mv "$b" "$T/work/nobody.zst"
b=$T/work/nobody.zst
step enrich "$b" > "$T/work/nobody.step"
cat "$T/work/nobody.step"
check "A: the enrich step is ok" [ "$(jget "$T/work/nobody.step" 'd["status"]')" = ok ]
check "A: the enrich step ran as uid 65534" [ "$(jget "$T/work/nobody.step" 'd["uid"]')" = 65534 ]
check "A: stacks.json is the member just before capture.json" \
    [ "$(members "$b" | tail -2 | tr '\n' ' ')" = "stacks.json capture.json " ]
cp_member "$b" stacks.json > "$T/work/nobody.stacks.json"
check "A: stacks.json is format crashpack-stacks/1" \
    [ "$(jget "$T/work/nobody.stacks.json" 'd["format"]')" = crashpack-stacks/1 ]
check "A: stacks.json was made by uid 65534" [ "$(jget "$T/work/nobody.stacks.json" 'd["uid"]')" = 65534 ]
check "A: binaries resolved through the crashed process's root" \
    [ "$(jget "$T/work/nobody.stacks.json" 'd["binaries"]')" = root-fd ]
check "A: stacks.json names the exe's frames (store_value .. main)" \
    [ "$(jget "$T/work/nobody.stacks.json" '" ".join(f["function"] or "??" for f in d["native"]["threads"][0]["frames"][:5])')" \
      = "store_value checked_store process_record run_stage main" ]
check "A: the exe was found through the root (<root>/...)" \
    grep -q "\"found_at\":\"<root>$FX/cp-unwind-c-O2\"" "$T/work/nobody.stacks.json"
# the crashed host's signature and fingerprint travel with the bundle and equal analyze's
"$CP_BIN/crashpack" analyze --json "$b" > "$T/work/nobody.report.json" 2>/dev/null
check "A: stacks.json carries the signature and fingerprint that analyze computes" \
    [ "$(jget "$T/work/nobody.stacks.json" 'd["signature"]["fingerprint"] + " " + d["signature"]["signature"]')" \
      = "$(jget "$T/work/nobody.report.json" 'd["fingerprint"] + " " + d["signature"]')" ]
check "A: ... a SIGSEGV signature from physical frames (store_value and checked_store are inlined into process_record at -O2)" \
    jget "$T/work/nobody.stacks.json" 'd["signature"]["crash_kind"].startswith("segv") and d["signature"]["signature"].split(" | ")[1:] == ["process_record", "run_stage", "main"] or sys.exit(1)'

# ---- B. a foreign machine (acceptance 3) ----
NAMES=()
for f in cp-unwind-c-O2 cp-unwind-cxx-O2 cp-abort cp-cxx-throw cp-threads64 cp-nocfi; do
    pid=$(LD_LIBRARY_PATH=$FX cp_crash "$FX/$f")
    if b=$(cp_bundle_for "$pid" 90); then
        mv "$b" "$T/work/$f.zst"
        NAMES+=("$f")
    else
        fail "B: no bundle for $f"
    fi
done
for f in "${NAMES[@]}"; do
    w=$T/work/$f
    check "B: $f: stacks.json in the bundle, enrich step ok" \
        [ "$(step enrich "$w.zst" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["status"])')" = ok ]
    rc=0
    LD_LIBRARY_PATH=$FX "$CP_BIN/crashpack" analyze --json "$w.zst" > "$w.local.json" 2> "$w.local.err" || rc=$?
    check "B: $f: local analysis exits 0" [ "$rc" = 0 ]
    check "B: $f: with the binaries: analysis.source local, stacks.json present and agreeing" \
        [ "$(jget "$w.local.json" 'd["analysis"]["source"], d["analysis"]["stacks_json"]["present"], d["analysis"]["stacks_json"]["agrees"], d["analysis"]["stacks_json"]["used"]')" \
          = "('local', True, True, False)" ]
done
rm -rf "$FX" # the binaries are gone: a foreign machine
for f in "${NAMES[@]}"; do
    w=$T/work/$f
    rc=0
    "$CP_BIN/crashpack" analyze --json "$w.zst" > "$w.foreign.json" 2> "$w.foreign.err" || rc=$?
    check "B: $f: foreign analysis exits 0" [ "$rc" = 0 ]
    check "B: $f: every frame the local analysis named is named the same, every thread" \
        "$PY" "$TOOLS/compare_bt.py" foreign --name "$f" --local "$w.local.json" --foreign "$w.foreign.json"
    check "B: $f: analysis.source is stacks.json" [ "$(jget "$w.foreign.json" 'd["analysis"]["source"]')" = stacks.json ]
    "$CP_BIN/crashpack" analyze --json --no-stacks "$w.zst" > "$w.nostacks.json" 2>/dev/null
    check "B: $f: --no-stacks: the local analysis alone lacks names (the test means something)" \
        bash -c "! '$PY' '$TOOLS/compare_bt.py' foreign --name '$f' --local '$w.local.json' --foreign '$w.nostacks.json' > /dev/null"
    check "B: $f: --no-stacks: analysis.source local" [ "$(jget "$w.nostacks.json" 'd["analysis"]["source"]')" = local ]
done
w=$T/work/cp-abort
if [ -f "$w.zst" ]; then
    "$CP_BIN/crashpack" analyze "$w.zst" > "$w.foreign.txt" 2>&1
    check "B: the text output says the frames come from stacks.json" grep -q "from stacks.json" "$w.foreign.txt"
    check "B: the text output names do_abort_leaf" grep -q "do_abort_leaf" "$w.foreign.txt"
fi

# ---- C. a chroot: the exe exists only inside the crashed process's root ----
R=$T/root
mkdir -p "$R/app" "$R/lib64" "$R/usr/lib/x86_64-linux-gnu"
cp -p "$CP_BIN/cp-unwind-cxx-O2" "$R/app/prog"
cp -L /lib64/ld-linux-x86-64.so.2 "$R/lib64/"
for l in $(ldd "$R/app/prog" | awk '/=> \//{print $3}'); do cp -L "$l" "$R/usr/lib/x86_64-linux-gnu/"; done
chmod -R a+rX "$R"
pid=$(cp_crash chroot --userspec=65534:65534 "$R" /app/prog)
if b=$(cp_bundle_for "$pid" 90); then
    mv "$b" "$T/work/chroot.zst"
    b=$T/work/chroot.zst
    rm -rf "$R" # the container is gone
    cp_member "$b" stacks.json > "$T/work/chroot.stacks.json" 2>/dev/null
    check "C: stacks.json found /app/prog through the process's root" \
        grep -q '"found_at":"<root>/app/prog"' "$T/work/chroot.stacks.json"
    "$CP_BIN/crashpack" analyze --json "$b" > "$T/work/chroot.json" 2>/dev/null
    check "C: the host cannot find /app/prog, stacks.json names its frames" \
        [ "$(jget "$T/work/chroot.json" 'd["analysis"]["source"], [f["function"] for f in d["threads"][0]["frames"] if f["module"] == "prog"][:1]')" \
          = "('stacks.json', ['cpfx::Buffer<int>::poke'])" ]
else
    fail "C: no bundle for the chrooted crash"
fi

# ---- D. configuration: off, a command that hangs, garbage, too much output ----
cp "$T/conf" "$T/conf.orig"
crash_with() { # crash_with NAME CONFIG-LINES...: crashes cp-abort as nobody with extra config
    local name=$1 pid b; shift
    cp "$T/conf.orig" "$T/conf"
    printf '%s\n' "$@" >> "$T/conf"
    pid=$(cp_crash "${NOBODY[@]}" "$CP_BIN/cp-abort")
    b=$(cp_bundle_for "$pid" 90) || { fail "D: $name: no bundle"; return 1; }
    mv "$b" "$T/work/$name.zst"
    step enrich "$T/work/$name.zst" > "$T/work/$name.step"
}
if crash_with off "enrich = off"; then
    check "D: enrich = off: no stacks.json" bash -c "! tar --zstd -tf '$T/work/off.zst' | grep -qx stacks.json"
    check "D: enrich = off: step off" [ "$(jget "$T/work/off.step" 'd["status"]')" = off ]
fi
mkdir -m 755 "$T/cmds"
printf '#!/bin/sh\nexec sleep 3141.5\n' > "$T/cmds/hang"
# garbage: the handshake done (crashpack enrich, exec'd: the pid the finisher forked), its output
# cut into by a prefix that leaves no complete object
printf '#!/bin/sh\nprintf "{\\"format\\":\\"crashpack-stacks/1\\",\\"native\\":"\nexec %s "$@"\n' "$CP_BIN/crashpack" > "$T/cmds/garbage"
printf '#!/bin/sh\necho "{\\"format\\":\\"crashpack-stacks/1\\",\\"native\\":{\\"threads\\":[]}}"\n' > "$T/cmds/nohello"
printf '#!/bin/sh\nexec yes crashpack\n' > "$T/cmds/flood"
chmod 755 "$T"/cmds/*
if crash_with hang "enrich = $T/cmds/hang" "enrich_timeout = 1"; then
    check "D: a command that hangs: step timeout" [ "$(jget "$T/work/hang.step" 'd["status"]')" = timeout ]
    check "D: ... and it is killed (it ran as uid 65534, the finisher has no CAP_KILL)" \
        bash -c "! pgrep -f 'sleep 314[1].5' > /dev/null"
    check "D: ... the bundle is complete without stacks.json" \
        bash -c "'$CP_BIN/crashpack' analyze --members '$T/work/hang.zst' > /dev/null && ! tar --zstd -tf '$T/work/hang.zst' | grep -qx stacks.json"
fi
if crash_with garbage "enrich = $T/cmds/garbage"; then
    check "D: garbage output: step failed (not a complete object)" \
        [ "$(jget "$T/work/garbage.step" 'd["status"], "not a complete" in d["reason"]')" = "('failed', True)" ]
    check "D: garbage output: no stacks.json" bash -c "! tar --zstd -tf '$T/work/garbage.zst' | grep -qx stacks.json"
fi
if crash_with nohello "enrich = $T/cmds/nohello"; then
    check "D: a well-formed stacks.json without the handshake: step failed (no handshake)" \
        [ "$(jget "$T/work/nohello.step" 'd["status"], "handshake" in d["reason"]')" = "('failed', True)" ]
    check "D: ... no stacks.json" bash -c "! tar --zstd -tf '$T/work/nohello.zst' | grep -qx stacks.json"
fi
if crash_with flood "enrich = $T/cmds/flood" "enrich_max = 64K"; then
    check "D: output over enrich_max: step failed" \
        [ "$(jget "$T/work/flood.step" 'd["status"], "enrich_max" in d["reason"]')" = "('failed', True)" ]
fi
cp "$T/conf.orig" "$T/conf"

# ---- E. hostile stacks.json ----
src=$T/work/cp-abort.zst
[ -f "$src" ] || src=$T/work/nobody.zst
hostile() { # hostile NAME FILE: rebuilds $src with FILE as stacks.json, analyzes it
    local name=$1 file=$2 rc=0
    "$EDIT" "$src" "$T/work/h-$name.zst" --put stacks.json "$file" || { fail "E: $name: bundle_edit"; return 1; }
    "$CP_BIN/crashpack" analyze --json "$T/work/h-$name.zst" > "$T/work/h-$name.json" 2> "$T/work/h-$name.err" || rc=$?
    check "E: $name: analyze exits 0 (a warning, not a failure)" [ "$rc" = 0 ]
}
printf 'not json {' > "$T/work/garbage.json"
if hostile garbage "$T/work/garbage.json"; then
    check "E: garbage: a warning on stderr" grep -q "warning: stacks.json ignored: it is not a JSON object" "$T/work/h-garbage.err"
    check "E: garbage: the local analysis is used, the error recorded" \
        [ "$(jget "$T/work/h-garbage.json" 'd["analysis"]["source"], d["analysis"]["stacks_json"]["present"], d["analysis"]["stacks_json"]["error"]')" \
          = "('local', True, 'it is not a JSON object')" ]
fi
"$PY" -c 'import json; print(json.dumps({"format": "crashpack-stacks/1", "native": {"threads": {"x": 1}}}))' > "$T/work/shape.json"
if hostile shape "$T/work/shape.json"; then
    check "E: wrong shape: warning, local analysis" \
        [ "$(jget "$T/work/h-shape.json" 'd["analysis"]["source"], "expected shape" in d["analysis"]["stacks_json"]["warning"]')" = "('local', True)" ]
fi
# well-formed but full of wrong types, huge strings and fake threads: sanitized, never a crash
cp_member "$src" stacks.json > "$T/work/good.json"
"$PY" - "$T/work/good.json" "$T/work/types.json" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
t = d["native"]["threads"][0]
t["frames"][0]["function"] = {"nested": [1, 2]}
t["frames"][1]["line"] = "many"
t["frames"][2]["function"] = "A" * 100000
t["frames"].append("not a frame")
d["native"]["threads"] += [{"tid": "x"}, {"tid": 5, "frames": 7}, [], None]
d["native"]["cause"] = [1, 2]
d["native"]["modules"] = [1, "x", {"path": 5}]
d["native"]["signal"] = {"number": "SIGSEGV"}
json.dump(d, open(sys.argv[2], "w"))
PYEOF
if hostile types "$T/work/types.json"; then
    check "E: wrong types: a warning that values were dropped" grep -q "malformed or oversized values dropped" "$T/work/h-types.err"
    check "E: wrong types: the report is a well-formed crashpack-report/1" \
        [ "$(jget "$T/work/h-types.json" 'd["format"], all(isinstance(t["frames"], list) for t in d["threads"])')" = "('crashpack-report/1', True)" ]
fi
# a stacks.json whose frames disagree with the core (binaries present for libc): flagged
"$PY" - "$T/work/good.json" "$T/work/lie.json" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
f = d["native"]["threads"][0]["frames"][0]
f["function"] = "not_what_the_core_says"
# and bytes that are not UTF-8, with a terminal escape: the report must stay valid UTF-8
open(sys.argv[2], "wb").write(json.dumps(d).encode().replace(
    b"not_what_the_core_says", b"not_what_the_core_says\xff\xfe\x1b[31m"))
PYEOF
if hostile lie "$T/work/lie.json"; then
    check "E: a disagreeing stacks.json: agrees false, the difference listed" \
        [ "$(jget "$T/work/h-lie.json" 'd["analysis"]["stacks_json"]["agrees"], any("not_what_the_core_says" in x for x in d["analysis"]["stacks_json"]["differences"])')" = "(False, True)" ]
    check "E: a disagreeing stacks.json: the JSON report is valid UTF-8" \
        "$PY" -c 'import sys; open(sys.argv[1], encoding="utf-8", errors="strict").read()' "$T/work/h-lie.json"
    "$CP_BIN/crashpack" analyze "$T/work/h-lie.zst" > "$T/work/h-lie.txt" 2>&1
    check "E: a disagreeing stacks.json: the text says so, with the escape neutralized" \
        bash -c "grep -q 'stacks.json disagrees with the local analysis' '$T/work/h-lie.txt' && ! grep -q \$'\\x1b' '$T/work/h-lie.txt'"
fi
finish
