#!/usr/bin/env bash
# test_pylayout_table.sh SRC: analyze/native/pylayout.c's 3.11 row is exactly what scripts/pylayout-gen.sh
# prints for the installed CPython 3.11 headers (python3.11-dev): the table was generated, and
# still matches the interpreter's structures. Skips (77) without the headers.
set -u
src=${1:?source dir}
[ -f /usr/include/python3.11/internal/pycore_frame.h ] || { echo "SKIP: no python3.11-dev headers"; exit 77; }
want=$("$src/scripts/pylayout-gen.sh" | grep -v '^ */\*') || { echo "FAIL: the generator failed"; exit 1; }
have=$(awk '/^    \{$/ {on = 1; next} /^    \},$/ {on = 0} on' "$src/analyze/native/pylayout.c" | sed 's/^    //' |
       grep -v '^ */\*')
if [ "$want" != "$have" ]; then
    echo "FAIL: analyze/native/pylayout.c differs from scripts/pylayout-gen.sh's output:"
    diff <(echo "$have") <(echo "$want")
    exit 1
fi
echo "ok: the 3.11 layout row is the generator's ($(echo "$have" | wc -l) fields)"
