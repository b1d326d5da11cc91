#!/bin/sh
# pylayout310-gen.sh [INCLUDE_DIR] - prints the analyze/native/pylayout310.c row for a CPython 3.10's
# headers (offsetof() over its internal headers; see scripts/pylayout310-gen.c). Default: pyenv's
# 3.10 (the newest /root/.pyenv/versions/3.10.*/include/python3.10).
set -eu
inc=${1:-$(ls -d /root/.pyenv/versions/3.10.*/include/python3.10 2>/dev/null | tail -1)}
[ -n "$inc" ] && [ -f "$inc/internal/pycore_interp.h" ] || { echo "pylayout310-gen: no CPython 3.10 headers" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
${CC:-cc} -std=gnu11 -w -I"$inc" -o "$tmp/gen" "$here/pylayout310-gen.c" -ldl
"$tmp/gen"
