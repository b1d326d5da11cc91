#!/usr/bin/env bash
# Issue 22, acceptance 6: hostile bundles from a fixed-seed generator (tests/tools/hostile_bundles.py)
# through every verb that reads a bundle from a ticket: `analyze --json`, `analyze` (text),
# `report`, `report --slim OUT` and `db add` (into a knowledge base that already holds the seed
# crash). Each must end with exit 0 or 1 - never a signal, a sanitizer report or the hang guard -
# write nothing but its output, and the forgery case (the seed crash with another executable and
# three padding members) must not replace the seed's record.
#
# CP_HOSTILE_CASES (default 300) and CP_HOSTILE_SEED (default 22) choose the cases; bench/ runs
# more. The seed is the checked-in core tests/fuzz/corpus-core/cp-segv-threads.core fed to
# crashpack-capture on stdin (core_pattern is not touched; no lock); analyses use --sysroot
# /nonexistent where the verb has it.
source "$(dirname "$0")/../lib.sh"
PY=${CP_PYTHON:-/usr/bin/python3}
N=${CP_HOSTILE_CASES:-300}
SEEDN=${CP_HOSTILE_SEED:-22}
SEED=$CP_SRC/tests/fuzz/corpus-core/cp-segv-threads.core
[ -f "$SEED" ] || die "no seed core $SEED"
cp_direct_setup cp-hostile-bundles
mkdir -p "$T/seed" "$T/cases" "$T/out" "$T/cwd" "$T/home"
b0=$(cp_core_bundle "$SEED" 972000) || die "no bundle from the handler"
# the handler saw no such process: the seed's manifest gets the executable its core names, as a
# live crash's would, so that the forgery below changes an identity the knowledge base knows
zstd -dc "$b0" | tar -C "$T/seed" -xf - || die "cannot unpack $b0"
"$PY" - "$T/seed/manifest.json" <<'PYX' || die "cannot give the seed an executable"
import json, sys
d = json.load(open(sys.argv[1])); d["exe"] = "/usr/local/bin/cp-segv-threads"
json.dump(d, open(sys.argv[1], "w"))
PYX
b=$T/seed.zst
"$CP_BIN/bundle_edit" "$b0" "$b" --put manifest.json "$T/seed/manifest.json" || die "bundle_edit of the seed"
"$PY" "$CP_SRC/tests/tools/hostile_bundles.py" "$T/seed" "$T/cases" --count "$N" --seed "$SEEDN" \
    --bundle-edit "$CP_BIN/bundle_edit" --seed-bundle "$b" || die "the generator failed"
[ "$(wc -l < "$T/cases/cases.jsonl")" = "$N" ] || die "the generator wrote $(wc -l < "$T/cases/cases.jsonl") of $N cases"

KB=$T/kb.sqlite
"$CP_BIN/crashpack" db add --db "$KB" "$b" > /dev/null 2>&1 || die "cannot add the seed bundle"
seed_exe=$(json "$T/seed/manifest.json" 'd["exe"]')

bad=0 runs=0
declare -A kinds
# one verb on one case: exit 0 or 1, no sanitizer report, within the guard
verb() { # verb CASE NAME ARGS...
    local c=$1 name=$2; shift 2
    (cd "$T/cwd" && HOME=$T/home timeout 120 "$CP_BIN/crashpack" "$@") > "$T/out/$name.out" 2> "$T/out/$name.err"
    local rc=$?
    runs=$((runs + 1))
    if [ "$rc" != 0 ] && [ "$rc" != 1 ]; then
        fail "case $c ($(sed -n "$((10#$c + 1))p" "$T/cases/cases.jsonl")): $name exited $rc"
        bad=$((bad + 1))
    elif ! cp_no_sanitizer_report "$T/out/$name.err"; then
        fail "case $c: $name: a sanitizer report"; head -c 2000 "$T/out/$name.err" >&2
        bad=$((bad + 1))
    fi
}
for f in "$T"/cases/case-*.zst; do
    c=$(basename "$f" .zst); c=${c#case-}
    kinds[$(sed -n "$((10#$c + 1))p" "$T/cases/cases.jsonl" | json /dev/stdin 'd["kind"]')]=1
    verb "$c" "$c-json" analyze --json --sysroot /nonexistent --no-cache "$f"
    verb "$c" "$c-text" analyze --sysroot /nonexistent --no-cache "$f"
    verb "$c" "$c-report" report --db "$T/none.sqlite" "$f"
    verb "$c" "$c-slim" report --db "$T/none.sqlite" --slim "$T/out/$c.slim.zst" "$f"
    verb "$c" "$c-add" db add --db "$KB" "$f"
    rm -f "$T/out/$c-"*.out "$T/out/$c-"*.err
done
check "$runs runs of $N hostile bundles: every one exit 0 or 1, no sanitizer report ($bad bad)" [ "$bad" = 0 ]
check "every kind of case was made (${!kinds[*]})" bash -c \
    "for k in json text member core bytes forgery; do case ' ${!kinds[*]} ' in *\" \$k \"*) ;; *) exit 1 ;; esac; done"
check "nothing was written outside the outputs (no file named cphostile outside $T)" bash -c \
    "! find /tmp /var/tmp / /etc /root -maxdepth 3 -name '*cphostile*' -not -path '$T/*' 2>/dev/null | grep -q ."
check "the working directory and HOME of the runs stay empty" bash -c \
    "[ -z \"\$(ls -A '$T/cwd')\" ] && [ -z \"\$(find '$T/home' -type f ! -path '*/.cache/*' | head -1)\" ]"
check "the forgery (case 0) did not replace the seed crash's record (kept, the executable unchanged)" bash -c \
    "'$CP_BIN/crashpack' db show --json --db '$KB' 1 | python3 -c 'import json,sys; d=json.load(sys.stdin); f=[s for s in d[\"sources\"] if (s[\"path\"] or \"\").endswith(\"case-0000.zst\")]; sys.exit(0 if d[\"exe\"] == sys.argv[1] and f and f[0][\"outcome\"] == \"kept\" else 1)' '$seed_exe'"
finish
