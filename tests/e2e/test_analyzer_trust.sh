#!/usr/bin/env bash
# Issue 16 item 7: the analyzer's trust in --sysroot and --debug-dir (analyze/native/modules.c,
# dcache.c). Crashes go through the real kernel core_pattern.
#
#   sysroot    a sysroot whose libc.so.6 is a symlink to /etc/shadow: the link resolves inside the
#              sysroot (openat2 RESOLVE_IN_ROOT; strace -y shows no fd on the host's /etc/shadow);
#              with SYSROOT/etc/shadow a copy of libc, that copy is what is used
#   fifo       a FIFO at a program's .gnu_debuglink name (next to it in the sysroot) and at the
#              build-id tree name in a --debug-dir: the analysis finishes promptly, exit 0
#   poison     a hostile --debug-dir holding, under libc's build-id, a compressed debug file of
#              another program built with libc's build-id: a later plain run's JSON is
#              byte-identical to a run before it, and the cache holds nothing from it
#   cache max  CRASHPACK_CACHE_MAX bounds the cache: the oldest entries are evicted to fit
source "$(dirname "$0")/../lib.sh"
PY=${CP_PYTHON:-/usr/bin/python3}
cp_setup
cp_install
command -v strace > /dev/null || die "strace is missing (scripts/deps.sh)"

LIBC=$(readlink -f /lib/x86_64-linux-gnu/libc.so.6)
BID=$(eu-readelf -n "$LIBC" | awk '/Build ID:/ { print $3; exit }')
[ -n "$BID" ] || die "no build-id for libc"
pid=$(cp_crash "$CP_BIN/cp-segv-threads")
B=$(cp_bundle_for "$pid" 60) || die "cp-segv-threads: no bundle"
an() { timeout 120 "$CP_BIN/crashpack" analyze --no-stacks --json "$@"; }
jcheck() { local desc=$1; shift; check "$desc" "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)" "$@"; }
LIBCMOD="[m for m in d['modules'] if m['path'].endswith('libc.so.6')][0]"

# ---- sysroot: a symlink to /etc/shadow ----
an --no-cache "$B" > "$T/before.json" 2>/dev/null
LP=$("$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print($LIBCMOD['path'])" "$T/before.json")
[ -n "$LP" ] || die "no libc module in the report"
S=$T/sys
mkdir -p "$S$(dirname "$LP")" "$S/etc"
ln -s /etc/shadow "$S$LP"
rc=0
CRASHPACK_CACHE_DIR=off strace -f -y -qq -e trace=open,openat,openat2 -o "$T/sys.strace" \
    "$CP_BIN/crashpack" analyze --no-stacks --json --sysroot "$S" "$B" > "$T/sys.json" 2>/dev/null || rc=$?
check "sysroot symlink: analyze exits 0 or 1" [ "$rc" -le 1 ]
check "sysroot symlink (strace -y): no fd ever refers to the host's /etc/shadow" \
    bash -c "! grep -q '</etc/shadow>' '$T/sys.strace'"
check "sysroot symlink (strace): libc's path was opened by openat2 inside the root" \
    grep -q "openat2(.*\"$LP\".*RESOLVE_IN_ROOT" "$T/sys.strace"
jcheck "sysroot symlink: libc is not found (the link's target is not in the sysroot)" "$T/sys.json" \
    "not $LIBCMOD.get('found_at') or '$S' in $LIBCMOD.get('found_at')"
cp "$LIBC" "$S/etc/shadow"
rc=0
CRASHPACK_CACHE_DIR=off an --sysroot "$S" "$B" > "$T/sys2.json" 2>/dev/null || rc=$?
jcheck "sysroot symlink: with SYSROOT/etc/shadow a copy of libc, the link resolves to that copy" \
    "$T/sys2.json" "$LIBCMOD.get('found_at') == '$S$LP' and not $LIBCMOD.get('problem')"

# ---- fifo: a .gnu_debuglink name and a build-id tree name that are FIFOs ----
mkdir -p "$T/dl"
cat > "$T/dl/prog.c" <<'C'
#include <stdlib.h>
__attribute__((noinline)) static void leaf(volatile int *p) { *p = 1; }
int main(int argc, char **argv) { (void)argv; leaf(argc > 5 ? (int *)malloc(4) : NULL); return 0; }
C
gcc -O1 -g -o "$T/dl/prog" "$T/dl/prog.c" || die "gcc"
objcopy --only-keep-debug "$T/dl/prog" "$T/dl/prog.debug"
objcopy --strip-debug --add-gnu-debuglink="$T/dl/prog.debug" "$T/dl/prog"
rm -f "$T/dl/prog.debug"
PBID=$(eu-readelf -n "$T/dl/prog" | awk '/Build ID:/ { print $3; exit }')
pid=$(cp_crash "$T/dl/prog")
B2=$(cp_bundle_for "$pid" 60) || die "prog: no bundle"
mkdir -p "$S$T/dl" "$T/dd/.build-id/${PBID:0:2}"
cp "$T/dl/prog" "$S$T/dl/prog"
mkfifo "$S$T/dl/prog.debug" "$T/dd/.build-id/${PBID:0:2}/${PBID:2}.debug"
start=$(date +%s)
rc=0
CRASHPACK_CACHE_DIR=off timeout 100 "$CP_BIN/crashpack" analyze --no-stacks --json --timeout 90 \
    --sysroot "$S" --debug-dir "$T/dd" "$B2" > "$T/fifo.json" 2> "$T/fifo.err" || rc=$?
el=$(($(date +%s) - start))
check "fifo: analyze exits 0 (rc $rc)" [ "$rc" = 0 ]
check "fifo: it finished promptly (${el}s, not the 90 s --timeout)" [ "$el" -lt 30 ]
jcheck "fifo: the program itself was found in the sysroot, without debug info" "$T/fifo.json" \
    "any(m['path'].endswith('/dl/prog') and '$S' in (m.get('found_at') or '') for m in d['modules'])"

# ---- poison: a hostile --debug-dir cannot change a later run ----
D=$T/cache
H=$T/hostile/.build-id/${BID:0:2}
mkdir -p "$H"
gcc -O1 -g -Wl,--build-id=0x"$BID" -o "$T/fake" "$T/dl/prog.c" || die "gcc (fake build-id)"
objcopy --only-keep-debug --compress-debug-sections=zlib "$T/fake" "$H/${BID:2}.debug"
check "poison: the hostile file claims libc's build-id" bash -c "eu-readelf -n '$H/${BID:2}.debug' | grep -q 'Build ID: $BID'"
rc=0
CRASHPACK_CACHE_DIR="$D" an --debug-dir "$T/hostile" "$B" > "$T/hostile.json" 2>/dev/null || rc=$?
check "poison: the run with the hostile --debug-dir exits 0 or 1" [ "$rc" -le 1 ]
check "poison: nothing found through --debug-dir went into the cache" \
    bash -c "[ ! -e '$D/debuginfo/$BID.debug' ]"
CRASHPACK_CACHE_DIR="$D" an "$B" > "$T/after.json" 2>/dev/null
check "poison: a later plain run prints byte-identical JSON to the run before" cmp -s "$T/before.json" "$T/after.json"
check "poison: that plain run cached libc's real debug file" \
    bash -c "eu-readelf --string-dump=.crashpack.origin '$D/debuginfo/$BID.debug' | grep -q /usr/lib/debug"
CRASHPACK_CACHE_DIR="$D" an "$B" > "$T/after2.json" 2>/dev/null
check "poison: and the warm run after it too" cmp -s "$T/before.json" "$T/after2.json"

# ---- cache max ----
rm -rf "$D"
mkdir -p "$D/debuginfo"
chmod 700 "$D" "$D/debuginfo"
truncate -s 3M "$D/debuginfo/00.debug"
touch -d '2001-01-01' "$D/debuginfo/00.debug"
truncate -s 1M "$D/debuginfo/01.debug"
touch -d '2002-01-01' "$D/debuginfo/01.debug"
LSZ=$(an --no-cache "$B" > /dev/null 2>&1; CRASHPACK_CACHE_DIR="$T/c0" an "$B" > /dev/null 2>&1; stat -c %s "$T/c0/debuginfo/$BID.debug")
MAX=$((LSZ + 2 * 1024 * 1024))
CRASHPACK_CACHE_DIR="$D" CRASHPACK_CACHE_MAX=$MAX an "$B" > /dev/null 2>&1
check "cache max: the oldest entry was evicted, the newer one kept with libc's copy" \
    bash -c "[ ! -e '$D/debuginfo/00.debug' ] && [ -e '$D/debuginfo/01.debug' ] && [ -f '$D/debuginfo/$BID.debug' ]"
check "cache max: the cache holds at most CRASHPACK_CACHE_MAX bytes" \
    bash -c "[ \$(du -b --apparent-size -s '$D/debuginfo' | cut -f1) -le $((MAX + 8192)) ]"
CRASHPACK_CACHE_DIR="$D" CRASHPACK_CACHE_MAX=1K an "$B" > /dev/null 2>&1
rm -f "$D/debuginfo/$BID.debug" # the next store trims
CRASHPACK_CACHE_DIR="$D" CRASHPACK_CACHE_MAX=1K an "$B" > "$T/tiny.json" 2>/dev/null
check "cache max 1K: nothing larger is kept" bash -c "[ -z \"\$(ls -A '$D/debuginfo')\" ]"
check "cache max 1K: the output is unchanged" cmp -s "$T/before.json" "$T/tiny.json"
finish
