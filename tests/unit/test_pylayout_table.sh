#!/usr/bin/env bash
# test_pylayout_table.sh SRC: every row of analyze/native/pylayout.c whose CPython headers are on this
# machine is exactly what scripts/pylayout-gen.sh prints for them: the table was generated, and still
# matches the interpreters' structures. Headers looked for, per version (every one present is checked:
# the row must hold for each build of that version here):
#   3.11  /usr/include/python3.11 (python3.11-dev), pyenv 3.11.*
#   3.12  pyenv 3.12.*            3.13  pyenv 3.13.*
#   3.14  the Debian sid root's python3.14-dev (/var/cache/crashpack/roots/sid), pyenv 3.14.*
# A version whose headers are absent is skipped with a line saying so; a committed row without
# headers anywhere is reported (not checked). Skips (77) when no version could be checked.
set -u
src=${1:?source dir}
PYENV=${CP_PYENV_ROOT:-/root/.pyenv/versions}
ROOTS=${CP_ROOTS_DIR:-${CP_ROOTS:-/var/cache/crashpack/roots}}
headers() { # VERSION: the include dirs with internal/pycore_frame.h
    local v=$1 d n=0
    for d in /usr/include/python$v $ROOTS/sid/usr/include/python$v $ROOTS/trixie/usr/include/python$v \
             $(ls -d "$PYENV"/$v.*/include/python$v 2>/dev/null | sort -V); do
        [ -f "$d/internal/pycore_frame.h" ] && { echo "$d"; n=$((n + 1)); }
    done
    [ "$n" -gt 0 ]
}
# the committed row of minor version M, without comments
row() {
    awk -v m="$1" '/^    \{$/ {on = 1; buf = ""; next}
         /^    \},$/ {if (buf ~ "\n *\\.minor = " m ",\n") printf "%s", buf; on = 0; next}
         on {sub(/^    /, ""); buf = buf $0 "\n"}' "$src/analyze/native/pylayout.c" | grep -v '^ */\*'
}
rows=$(sed -n 's/^        \.minor = \([0-9]*\),$/\1/p' "$src/analyze/native/pylayout.c")
checked=0 failed=0
for v in 3.11 3.12 3.13 3.14; do
    m=${v#3.}
    have=$(row "$m")
    inc=$(headers "$v") || {
        if [ -n "$have" ]; then echo "note: no CPython $v headers here: its committed row is not checked"
        else echo "note: no CPython $v headers here, and no row"; fi
        continue
    }
    if [ -z "$have" ]; then
        echo "FAIL: CPython $v headers at $inc but analyze/native/pylayout.c has no 3.$m row (run scripts/pylayout-gen.sh $inc)"
        failed=1
        continue
    fi
    for d in $inc; do
        want=$("$src/scripts/pylayout-gen.sh" "$d" | grep -v '^ */\*') || { echo "FAIL: the generator failed for $d"; failed=1; continue; }
        if [ "$want" != "$have" ]; then
            echo "FAIL: the 3.$m row of analyze/native/pylayout.c differs from scripts/pylayout-gen.sh $d:"
            diff <(echo "$have") <(echo "$want")
            failed=1
            continue
        fi
        echo "ok: the $v row is the generator's for $d ($(echo "$have" | wc -l) fields)"
        checked=$((checked + 1))
    done
done
for m in $rows; do
    case " 11 12 13 14 " in *" $m "*) ;; *) echo "FAIL: a 3.$m row this test does not know"; failed=1 ;; esac
done
[ "$failed" = 0 ] || exit 1
[ "$checked" -gt 0 ] || { echo "SKIP: no CPython headers here"; exit 77; }
