#!/bin/sh
# pylayout-gen.sh [INCLUDE_DIR] - prints the analyze/native/pylayout.c row for a CPython's headers
# (offsetof() over its internal headers; see scripts/pylayout-gen.c). Default: Debian's
# python3.11-dev, /usr/include/python3.11. Example for a pyenv build:
#   scripts/pylayout-gen.sh ~/.pyenv/versions/3.11.7/include/python3.11
set -eu
inc=${1:-/usr/include/python3.11}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
${CC:-cc} -std=gnu11 -w -I"$inc" -o "$tmp/gen" "$here/pylayout-gen.c"
"$tmp/gen"
