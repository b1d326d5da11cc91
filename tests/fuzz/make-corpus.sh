#!/bin/bash
# make-corpus.sh - (re)writes the fuzzers' seed corpora.
#
#   tests/fuzz/make-corpus.sh [bundle]       tests/fuzz/corpus/: the small bundles that
#                                            tests/unit/test_bundle.c's own writer makes (complete,
#                                            cut, without index, one member); needs cc, libzstd-dev,
#                                            libcjson-dev
#   sudo tests/fuzz/make-corpus.sh core [BUILD]
#                                            tests/fuzz/corpus-core/: real kernel cores of the
#                                            fixture programs (BUILD/bin, default ./build), shrunk by
#                                            trim_core.py (notes and headers whole, a stack window
#                                            per thread, the ELF header pages), plus a tiny
#                                            synth_core.py core. The crashes go through the real
#                                            core_pattern, set to a file in a temp dir under the
#                                            end-to-end tests' lock (/run/crashpack-test.lock) and
#                                            restored on exit.
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ "${1:-bundle}" = bundle ]; then
    ${CC:-cc} -std=gnu11 -D_GNU_SOURCE -O1 -I"$src/bundle" -I"$src/common" -o "$tmp/test_bundle" \
        "$src/tests/unit/test_bundle.c" "$src/bundle/bundle.c" "$src/common/errmsg.c" "$src/common/util.c" -lzstd -lcjson
    mkdir -p "$src/tests/fuzz/corpus"
    "$tmp/test_bundle" --corpus "$src/tests/fuzz/corpus"
    chmod 644 "$src"/tests/fuzz/corpus/*.zst
    ls -l "$src/tests/fuzz/corpus"
    exit 0
fi
[ "$1" = core ] || { echo "usage: $0 [bundle | core [BUILD]]" >&2; exit 2; }
bin=${2:-$src/build}/bin
[ "$(id -u)" = 0 ] || { echo "make-corpus.sh core: needs root (core_pattern)" >&2; exit 1; }
for p in cp-unwind-c-O2 cp-unwind-cxx-O2 cp-abort cp-assert cp-cxx-throw cp-nullfn cp-overflow \
    cp-segv-threads cp-threads64; do
    [ -x "$bin/$p" ] || { echo "make-corpus.sh: $bin/$p missing (build first)" >&2; exit 1; }
done

exec 9>/run/crashpack-test.lock
flock 9
cat /proc/sys/kernel/core_pattern > "$tmp/saved_pattern"
restore() {
    cat "$tmp/saved_pattern" > /proc/sys/kernel/core_pattern
    rm -rf "$tmp"
}
trap restore EXIT
trap 'exit 130' INT TERM
mkdir -m 777 "$tmp/cores"
echo "$tmp/cores/core.%e.%p" > /proc/sys/kernel/core_pattern
ulimit -c unlimited

out=$src/tests/fuzz/corpus-core
mkdir -p "$out"
rm -f "$out"/*.core # the regress-* inputs (findings, kept as seeds) stay
crash() { # NAME [ARGS...]: runs it, trims its core into $out/NAME.core
    local name=$1 exe=$bin/$1 pid
    shift
    # a fixed, minimal environment: the stack windows reach argv and envp, and they are checked in
    (cd "$tmp" && exec env -i PATH=/usr/bin:/bin LANG=C CP_FUZZ_SEED=1 "$exe" "$@") > /dev/null 2>&1 < /dev/null &
    pid=$!
    wait $pid || true
    local core
    core=$(ls "$tmp"/cores/core.*."$pid" 2>/dev/null | head -1)
    [ -n "$core" ] || { echo "make-corpus.sh: no core from $name" >&2; exit 1; }
    python3 "$src/tests/fuzz/trim_core.py" "${TRIM_ARGS[@]}" "$core" "$out/$name.core"
    rm -f "$core"
}
TRIM_ARGS=()
for p in cp-unwind-c-O2 cp-unwind-cxx-O2 cp-abort cp-assert cp-cxx-throw cp-nullfn cp-overflow; do
    crash $p
done
TRIM_ARGS=(--stack 2048)
crash cp-segv-threads
TRIM_ARGS=(--stack 1024 --max-threads 6)
crash cp-threads64
# a tiny synthetic core (synth_core.py: the kernel's layout, one thread, NT_FILE)
python3 "$src/fixtures/programs/synth_core.py" --size 16K > "$out/synth-16k.core"
chmod 644 "$out"/*.core
ls -l "$out"
du -sh "$out"
