#!/bin/sh
# pylayout-gen.sh [INCLUDE_DIR] - prints the analyze/native/pylayout.c row for a CPython's headers
# (offsetof() over its internal headers; see scripts/pylayout-gen.c). Default: Debian's
# python3.11-dev, /usr/include/python3.11. Examples:
#   scripts/pylayout-gen.sh ~/.pyenv/versions/3.12.1/include/python3.12
#   scripts/pylayout-gen.sh /var/cache/crashpack/roots/sid/usr/include/python3.14
# INCLUDE_DIR/.. is searched too (after the system headers): a Debian python3.X-dev's pyconfig.h includes
# <x86_64-linux-gnu/python3.X/pyconfig.h>, which for a root's headers must come from that root.
set -eu
inc=${1:-/usr/include/python3.11}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
${CC:-cc} -std=gnu11 -w -I"$inc" -idirafter "$inc/.." -o "$tmp/gen" "$here/pylayout-gen.c"
"$tmp/gen"
