#!/usr/bin/env bash
# tests/compare_reports.sh OLD NEW BUNDLE|DIR... - the same analysis before and after a refactor.
#
# Analyzes every bundle (a DIR stands for the *.zst files under it) with two crashpack binaries,
# OLD and NEW, and compares their `analyze --json` reports byte for byte; with --text their text
# reports, with --markdown their `report` Markdown, with --db what `db add` prints (each binary
# into its own knowledge base) and `db show` / `db show --json` of every crash (both binaries
# reading each knowledge base, so that each reads the other's).
# Fields a change alters on purpose are named with --ignore PATH (a dotted path into the report,
# `*` for every element of a list: --ignore 'threads.*.frames.*.trust'), and are removed from both
# reports before the comparison. Prints one line per bundle that differs (with a unified diff under
# -v), then "N same, N differ"; exits 1 when any differs, 2 on a usage error.
#
# To keep the bundles of a suite run:   CP_KEEP_BUNDLES=/tmp/keep tests/run.sh
# (tests/lib.sh copies each test's bundles there before it removes its directory), then e.g.
#   git worktree add /tmp/old OLD_COMMIT && cmake -S /tmp/old -B /tmp/old/build && cmake --build /tmp/old/build
#   tests/compare_reports.sh /tmp/old/build/bin/crashpack build/bin/crashpack /tmp/keep
set -uo pipefail
usage() { echo "usage: compare_reports.sh [-v] [--text] [--markdown] [--db] [--ignore PATH]... OLD NEW BUNDLE|DIR..." >&2; exit 2; }
verbose=0 text=0 markdown=0 db=0 ignores=()
while [ $# -gt 0 ]; do
    case $1 in
        -v) verbose=1; shift ;;
        --text) text=1; shift ;;
        --markdown) markdown=1; shift ;;
        --db) db=1; shift ;;
        --ignore) [ $# -ge 2 ] || usage; ignores+=("$2"); shift 2 ;;
        --ignore=*) ignores+=("${1#--ignore=}"); shift ;;
        -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "compare_reports.sh: unknown option $1" >&2; exit 2 ;;
        *) break ;;
    esac
done
[ $# -ge 3 ] || usage
old=$1 new=$2; shift 2
[ -x "$old" ] || { echo "compare_reports.sh: $old is not an executable" >&2; exit 2; }
[ -x "$new" ] || { echo "compare_reports.sh: $new is not an executable" >&2; exit 2; }
bundles=()
for a in "$@"; do
    if [ -d "$a" ]; then
        while IFS= read -r -d '' f; do bundles+=("$f"); done < <(find "$a" -name '*.zst' -type f -print0 | sort -z)
    else
        bundles+=("$a")
    fi
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
strip() { # strip FILE: the report with the ignored paths removed, canonical key order kept
    python3 - "$1" "${ignores[@]}" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print("<not JSON: %s>" % e); sys.exit(0)
def drop(o, parts):
    if not parts or o is None: return
    k, rest = parts[0], parts[1:]
    kids = (o if isinstance(o, list) else o.values()) if k == "*" else None
    if kids is not None:
        for c in list(kids): drop(c, rest)
    elif isinstance(o, dict) and k in o:
        if rest: drop(o[k], rest)
        else: del o[k]
for p in sys.argv[2:]:
    drop(d, p.split("."))
print(json.dumps(d, indent=1, ensure_ascii=False))
PY
}
same=0 differ=0
export CRASHPACK_CACHE_DIR=$tmp/cache
export CRASHPACK_DB=$tmp/none.sqlite # no knowledge base: the analyses do not depend on the machine's
# differ WHAT OLDFILE NEWFILE: one more difference (or sameness), named
differ_files() {
    if cmp -s "$2" "$3"; then
        same=$((same + 1))
    else
        differ=$((differ + 1)); echo "DIFFERS: $1"
        [ "$verbose" = 1 ] && diff -u "$2" "$3" | head -40
    fi
    return 0
}
for b in "${bundles[@]}"; do
    "$old" analyze --json "$b" > "$tmp/old.json" 2> /dev/null; orc=$?
    "$new" analyze --json "$b" > "$tmp/new.json" 2> /dev/null; nrc=$?
    if [ ${#ignores[@]} -gt 0 ]; then
        strip "$tmp/old.json" > "$tmp/old.cmp"; strip "$tmp/new.json" > "$tmp/new.cmp"
    else
        cp "$tmp/old.json" "$tmp/old.cmp"; cp "$tmp/new.json" "$tmp/new.cmp"
    fi
    why=""
    [ "$orc" = "$nrc" ] || why="exit $orc -> $nrc"
    cmp -s "$tmp/old.cmp" "$tmp/new.cmp" || why="${why:+$why, }JSON differs"
    if [ "$text" = 1 ]; then
        "$old" analyze "$b" > "$tmp/old.txt" 2>&1; "$new" analyze "$b" > "$tmp/new.txt" 2>&1
        cmp -s "$tmp/old.txt" "$tmp/new.txt" || why="${why:+$why, }text differs"
    fi
    if [ "$markdown" = 1 ]; then
        "$old" report "$b" > "$tmp/old.md" 2>&1; echo "exit $?" >> "$tmp/old.md"
        "$new" report "$b" > "$tmp/new.md" 2>&1; echo "exit $?" >> "$tmp/new.md"
        cmp -s "$tmp/old.md" "$tmp/new.md" || why="${why:+$why, }Markdown differs"
        [ "$verbose" = 1 ] && ! cmp -s "$tmp/old.md" "$tmp/new.md" && diff -u "$tmp/old.md" "$tmp/new.md" | head -40
    fi
    if [ -n "$why" ]; then
        differ=$((differ + 1)); echo "DIFFERS: $b ($why)"
        if [ "$verbose" = 1 ]; then
            diff -u "$tmp/old.cmp" "$tmp/new.cmp" | head -40
            [ "$text" = 1 ] && diff -u "$tmp/old.txt" "$tmp/new.txt" | head -40
        fi
    else
        same=$((same + 1))
    fi
done
if [ "$db" = 1 ]; then
    for w in old new; do
        bin=$old; [ "$w" = new ] && bin=$new
        for b in "${bundles[@]}"; do
            CRASHPACK_DB=$tmp/$w.sqlite "$bin" db add "$b" 2>&1 | sed "s|$tmp/$w.sqlite|KB|g"
            echo "exit ${PIPESTATUS[0]}"
        done > "$tmp/add.$w"
    done
    differ_files "db add" "$tmp/add.old" "$tmp/add.new"
    for kb in old new; do
        n=$(CRASHPACK_DB=$tmp/$kb.sqlite "$old" db list --limit 100000 --json | python3 -c 'import json,sys; print(max([c["id"] for c in json.load(sys.stdin)["crashes"]] or [0]))')
        for id in $(seq 1 "$n"); do
            for form in "" --json; do
                CRASHPACK_DB=$tmp/$kb.sqlite "$old" db show $form "$id" > "$tmp/show.old" 2>&1; echo "exit $?" >> "$tmp/show.old"
                CRASHPACK_DB=$tmp/$kb.sqlite "$new" db show $form "$id" > "$tmp/show.new" 2>&1; echo "exit $?" >> "$tmp/show.new"
                differ_files "db show $form $id (the $kb binary's knowledge base)" "$tmp/show.old" "$tmp/show.new"
            done
        done
    done
fi
echo "$same same, $differ differ"
[ "$differ" = 0 ]
