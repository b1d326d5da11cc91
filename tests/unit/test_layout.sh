#!/bin/bash
# test_layout.sh - the layout rules (tests/unit/layout.py says which): library code, READMEs,
# include direction against each folder's README, the SQL engine behind db/, long functions
# against an allow-list that only shrinks; then layout.py's self-test, which plants a violation
# of each kind in a copy of the tree and expects it caught.
# Usage: test_layout.sh [SOURCE_DIR] (default: the tree this script is in). Exit 0 or 1.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=${1:-$(cd "$here/../.." && pwd)}
rc=0
python3 "$here/layout.py" "$src" || rc=1
python3 "$here/layout.py" --self-test || rc=1
exit $rc
