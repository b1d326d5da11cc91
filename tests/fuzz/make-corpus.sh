#!/bin/sh
# make-corpus.sh - (re)writes the fuzzer's seed corpus, tests/fuzz/corpus/, with the small bundles
# that tests/unit/test_bundle.c's own writer makes (complete, cut, without index, one member).
# Usage: tests/fuzz/make-corpus.sh   (from anywhere; needs cc, libzstd-dev, libcjson-dev)
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
${CC:-cc} -std=gnu11 -D_GNU_SOURCE -O1 -I"$src/analyze" -o "$tmp/test_bundle" \
    "$src/tests/unit/test_bundle.c" "$src/analyze/bundle.c" -lzstd -lcjson
mkdir -p "$src/tests/fuzz/corpus"
"$tmp/test_bundle" --corpus "$src/tests/fuzz/corpus"
chmod 644 "$src"/tests/fuzz/corpus/*.zst
ls -l "$src/tests/fuzz/corpus"
