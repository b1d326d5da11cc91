#!/usr/bin/env bash
# run-fuzz.sh - the ctest fuzz tests (tests/CMakeLists.txt): build the libFuzzer harnesses with clang,
# or run one of them for a bounded time over a copy of its checked-in seed corpus.
#
#   run-fuzz.sh --build        configure + build CP_FUZZ_BUILD (clang, -DCRASHPACK_FUZZ=ON): the
#                              targets fuzz_bundle and fuzz_core; exit 77 (skip) without clang/libFuzzer
#   run-fuzz.sh bundle|core    run fuzz_<name> from CP_FUZZ_BIN (or CP_FUZZ_BUILD/bin) for
#                              CP_FUZZ_SECONDS (default 60) over a copy of tests/fuzz/corpus (bundle)
#                              or tests/fuzz/corpus-core (core); the checked-in corpus is never
#                              written. A crash, leak, timeout (10 s per input) or out-of-memory
#                              (2 GiB) fails the test and prints the input that caused it (hexdump,
#                              and where it was kept: CP_FUZZ_KEEP=DIR copies the artifacts there).
set -u -o pipefail
SRC=${CP_SRC:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
SECONDS_BUDGET=${CP_FUZZ_SECONDS:-60}
# a fixed seed makes a CI run replayable (CP_FUZZ_SEED=0: a new random seed each run)
SEED=${CP_FUZZ_SEED:-1}

if [ "${1:-}" = --build ]; then
    B=${CP_FUZZ_BUILD:?CP_FUZZ_BUILD: where to build}
    CC=$(command -v clang) || { echo "SKIP: no clang (scripts/deps.sh installs it)"; exit 77; }
    CXX=$(command -v clang++) || { echo "SKIP: no clang++"; exit 77; }
    probe=$(mktemp -d)
    trap 'rm -rf "$probe"' EXIT
    echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }' > "$probe/p.c"
    if ! "$CC" -fsanitize=fuzzer -o "$probe/p" "$probe/p.c" 2> "$probe/err"; then
        echo "SKIP: clang cannot link libFuzzer (Debian: libclang-rt-14-dev):"; cat "$probe/err"
        exit 77
    fi
    cmake -S "$SRC" -B "$B" -DCRASHPACK_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" > "$probe/cmake.log" 2>&1 ||
        { cat "$probe/cmake.log"; exit 1; }
    cmake --build "$B" -j"$(nproc)" --target fuzz_bundle fuzz_core > "$probe/build.log" 2>&1 ||
        { tail -50 "$probe/build.log"; exit 1; }
    ls -l "$B/bin/fuzz_bundle" "$B/bin/fuzz_core"
    exit 0
fi

case ${1:-} in
bundle) corpus=$SRC/tests/fuzz/corpus ;;
core) corpus=$SRC/tests/fuzz/corpus-core ;;
*) echo "usage: $0 --build | bundle | core" >&2; exit 2 ;;
esac
bin=${CP_FUZZ_BIN:-${CP_FUZZ_BUILD:-}/bin}/fuzz_$1
[ -x "$bin" ] || { echo "SKIP: $bin not built (no clang/libFuzzer?)"; exit 77; }
[ -d "$corpus" ] && [ -n "$(ls -A "$corpus")" ] || { echo "FAIL: no seed corpus in $corpus"; exit 1; }

W=$(mktemp -d /tmp/cp-fuzz.XXXXXX)
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/corpus" "$W/artifacts"
cp "$corpus"/* "$W/corpus/"
n0=$(ls "$W/corpus" | wc -l)
# libFuzzer: new inputs go into the first directory (the copy); -timeout per input, -rss_limit_mb
# for the whole process, artifacts (crash-*, leak-*, timeout-*, oom-*) under $W/artifacts.
"$bin" -seed="$SEED" -max_total_time="$SECONDS_BUDGET" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$W/artifacts/" "$W/corpus" > "$W/log" 2>&1
rc=$?
n1=$(ls "$W/corpus" | wc -l)
grep -E '^(INFO: Seed|stat::number_of_executed_units|stat::peak_rss_mb|#[0-9]+ +DONE)' "$W/log"
echo "corpus: $n0 seeds, $n1 inputs after the run"
if [ $rc -ne 0 ] || [ -n "$(ls -A "$W/artifacts")" ]; then
    echo "FAIL: fuzz_$1 exited $rc"
    tail -60 "$W/log"
    for a in "$W"/artifacts/*; do
        [ -f "$a" ] || continue
        echo "--- artifact $(basename "$a") ($(stat -c %s "$a") bytes), first 512 bytes:"
        od -A x -t x1z -v -N 512 "$a"
    done
    if [ -n "${CP_FUZZ_KEEP:-}" ]; then
        mkdir -p "$CP_FUZZ_KEEP" && cp "$W"/artifacts/* "$CP_FUZZ_KEEP"/ 2>/dev/null
        echo "artifacts copied to $CP_FUZZ_KEEP (reproduce: $bin FILE)"
    fi
    exit 1
fi
echo "ok: fuzz_$1 ran ${SECONDS_BUDGET}s without a finding"
