#!/usr/bin/env bash
# Issue 4 (acceptance 6, speed): the analyzer's cache of decompressed debug files (analyze/native/dcache.c).
#
# A crash through the real core_pattern (cp-segv-threads: its threads stop in libc, whose libc6-dbg
# DWARF is zlib-compressed, so it must be inflated to give file:line and inline frames):
#   cold       an empty cache: analyze decompresses libc's build-id-tree debug file (libdeflate) and
#              writes DIR/<libc build-id>.debug, 0600 in a 0700 dir, with no
#              SHF_COMPRESSED section and libc's build-id; no temporary file is left
#   warm       the next analysis uses it (the same inode; the lookup touches its mtime; strace: libc's
#              compressed debug file is not even opened) and prints byte-identical
#              JSON; --no-cache and CRASHPACK_CACHE_DIR=off give the same JSON and write nothing;
#              modules[].debug_file still names /usr/lib/debug, never the cache
#   hostile    a cached file whose build-id is another file's is dropped and rebuilt; a symlink in
#              the file's place is not followed (its target unchanged) and is replaced; a cache dir
#              writable by group or others, or owned by someone else, is not used
#   debuglink  a compressed debug file found by .gnu_debuglink (not a build-id tree): libdw
#              inflates it, the copy is stored from libdw's sections, and read on the next analysis
#   debuginfod a module without any debug file (libstdc++) does not make libdw load libdebuginfod
#   bounded    with more than 512 MiB in the cache (a sparse file), storing a file removes the
#              least recently used ones, and temporary files over an hour old
source "$(dirname "$0")/../lib.sh"
PY=${CP_PYTHON:-/usr/bin/python3}
cp_setup
cp_install

LIBC=$(readlink -f /lib/x86_64-linux-gnu/libc.so.6)
BID=$(eu-readelf -n "$LIBC" | awk '/Build ID:/ { print $3; exit }')
DBG=/usr/lib/debug/.build-id/${BID:0:2}/${BID:2}.debug
[ -n "$BID" ] && [ -f "$DBG" ] || die "libc's debug file ($DBG) is missing: scripts/deps.sh installs libc6-dbg"
eu-readelf -S "$DBG" | grep -q '\.debug_info.* C ' || die "libc's DWARF is not compressed here: nothing to test"

pid=$(cp_crash "$CP_BIN/cp-segv-threads")
B=$(cp_bundle_for "$pid" 60) || die "cp-segv-threads: no bundle"

D=$T/dc # CRASHPACK_CACHE_DIR; the files are in $D/debuginfo
F=$D/debuginfo/$BID.debug
run() { # run OUT [env...]: analyze --json with CRASHPACK_CACHE_DIR=$D unless overridden
    local out=$1 rc=0
    shift
    env CRASHPACK_CACHE_DIR="$D" "$@" timeout 300 "$CP_BIN/crashpack" analyze --no-stacks --json "$B" > "$out" 2> "$out.err" || rc=$?
    echo "$rc"
}
mode() { stat -c %a "$1"; }

# ---- cold ----
check "cold: analyze exits 0" [ "$(run "$T/cold.json")" = 0 ]
check "cold: the cache file for libc's build-id exists" [ -f "$F" ]
check "cold: it is 0600, its dir 0700 (and the base dir 0700)" \
    [ "$(mode "$F")/$(mode "$D/debuginfo")/$(mode "$D")" = 600/700/700 ]
check "cold: it has no compressed section" bash -c "! eu-readelf -S '$F' | grep -q ' C '"
check "cold: its DWARF is libc's (same .debug_info size as the inflated original)" \
    bash -c "[ \"\$(eu-readelf -S '$F' | awk '\$2 == \".debug_info\" { print \$6 }')\" = \"\$(objcopy --decompress-debug-sections '$DBG' '$T/dec.debug' && eu-readelf -S '$T/dec.debug' | awk '\$2 == \".debug_info\" { print \$6 }')\" ]"
check "cold: its build-id is libc's" bash -c "eu-readelf -n '$F' | grep -q 'Build ID: $BID'"
check "cold: it records the file it was made from (.crashpack.origin)" \
    bash -c "eu-readelf --string-dump=.crashpack.origin '$F' | grep -qF '$DBG'"
check "cold: no temporary file is left" bash -c "[ -z \"\$(ls -A '$D/debuginfo' | grep -v '\.debug$')\" ]"
jcheck() { local desc=$1; shift; check "$desc" "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)" "$@"; }
jcheck "cold: libc frames have file:line from its DWARF" "$T/cold.json" \
    "any(f['module'].endswith('libc.so.6') and f['file'] and f['line'] for t in d['threads'] for f in t['frames'])"
jcheck "cold: modules[].debug_file of libc names /usr/lib/debug, not the cache" "$T/cold.json" \
    "[m.get('debug_file') for m in d['modules'] if m['path'].endswith('libc.so.6')] == ['$DBG']"

# ---- warm ----
touch -d '2001-01-01' "$F"
ino=$(stat -c %i "$F")
check "warm: analyze exits 0" [ "$(run "$T/warm.json")" = 0 ]
check "warm: the cached file was used: the same file (inode), its mtime touched by the lookup" \
    bash -c "[ \"\$(stat -c %i '$F')\" = '$ino' ] && [ \"\$(date -r '$F' +%Y)\" != 2001 ]"
check "warm: JSON byte-identical to the cold run" cmp -s "$T/cold.json" "$T/warm.json"
# the copy is what libdw reads: the warm analysis never opens libc's compressed debug file
CRASHPACK_CACHE_DIR="$D" strace -f -qq -e trace=open,openat -o "$T/warm.strace" \
    "$CP_BIN/crashpack" analyze --no-stacks --json "$B" > "$T/warm2.json" 2>/dev/null
check "warm (strace): the cached copy is opened" grep -q "\"$BID.debug\"" "$T/warm.strace"
check "warm (strace): /usr/lib/debug's compressed file is not opened" bash -c "! grep -q '$DBG' '$T/warm.strace'"
check "warm (strace): same JSON" cmp -s "$T/cold.json" "$T/warm2.json"
rc=0
CRASHPACK_CACHE_DIR="$T/off" timeout 300 "$CP_BIN/crashpack" analyze --no-stacks --no-cache --json "$B" > "$T/nocache.json" 2>/dev/null || rc=$?
check "--no-cache: exit 0, byte-identical JSON" bash -c "[ $rc = 0 ] && cmp -s '$T/cold.json' '$T/nocache.json'"
check "--no-cache: nothing written" [ ! -e "$T/off" ]
rc=0
cd "$T"
CRASHPACK_CACHE_DIR=off timeout 300 "$CP_BIN/crashpack" analyze --no-stacks --json "$B" > "$T/off.json" 2>/dev/null || rc=$?
check "CRASHPACK_CACHE_DIR=off: exit 0, byte-identical JSON" bash -c "[ $rc = 0 ] && cmp -s '$T/cold.json' '$T/off.json'"
check "CRASHPACK_CACHE_DIR=off: no directory named off" [ ! -e "$T/off" ]

# ---- hostile ----
cp "$CP_BIN/cp-segv-threads" "$F"
chmod 600 "$F"
check "wrong build-id: analyze exits 0" [ "$(run "$T/wrong.json")" = 0 ]
check "wrong build-id: output unchanged" cmp -s "$T/cold.json" "$T/wrong.json"
check "wrong build-id: the file was replaced by libc's" bash -c "eu-readelf -n '$F' | grep -q 'Build ID: $BID'"

echo "precious" > "$T/target"
rm -f "$F"
ln -s "$T/target" "$F"
check "symlink: analyze exits 0" [ "$(run "$T/link.json")" = 0 ]
check "symlink: output unchanged" cmp -s "$T/cold.json" "$T/link.json"
check "symlink: its target was not written" bash -c "[ \"\$(cat '$T/target')\" = precious ]"
check "symlink: replaced by a regular file with libc's build-id" \
    bash -c "[ -f '$F' ] && [ ! -L '$F' ] && eu-readelf -n '$F' | grep -q 'Build ID: $BID'"

D2=$T/gw
mkdir -p "$D2/debuginfo"
chmod 777 "$D2/debuginfo"
check "group/world-writable dir: analyze exits 0" [ "$(run "$T/gw.json" CRASHPACK_CACHE_DIR="$D2")" = 0 ]
check "group/world-writable dir: not used (nothing written)" [ -z "$(ls -A "$D2/debuginfo")" ]
check "group/world-writable dir: output unchanged" cmp -s "$T/cold.json" "$T/gw.json"
D3=$T/other
mkdir -p "$D3/debuginfo"
chown nobody "$D3/debuginfo"
chmod 700 "$D3/debuginfo"
check "dir owned by another user: analyze exits 0" [ "$(run "$T/other.json" CRASHPACK_CACHE_DIR="$D3")" = 0 ]
check "dir owned by another user: not used" [ -z "$(ls -A "$D3/debuginfo")" ]

# ---- a compressed debug file found by its debug link (not in a build-id tree) ----
# libdw inflates it; the copy is written at the end of the analysis from what libdw decompressed
mkdir -p "$T/dl"
cat > "$T/dl/prog.c" <<'C'
#include <stdlib.h>
__attribute__((noinline)) static void leaf(volatile int *p) { *p = 1; }
int main(int argc, char **argv) { (void)argv; leaf(argc > 5 ? (int *)malloc(4) : NULL); return 0; }
C
gcc -O1 -g -o "$T/dl/prog" "$T/dl/prog.c" || die "gcc"
objcopy --only-keep-debug --compress-debug-sections=zlib "$T/dl/prog" "$T/dl/prog.debug"
objcopy --strip-debug --add-gnu-debuglink="$T/dl/prog.debug" "$T/dl/prog"
PBID=$(eu-readelf -n "$T/dl/prog" | awk '/Build ID:/ { print $3; exit }')
PF=$D/debuginfo/$PBID.debug
check "debuglink: the debug file is compressed and not in a build-id tree" \
    bash -c "eu-readelf -S '$T/dl/prog.debug' | grep -q '\.debug_info.* C ' && [ ! -e /usr/lib/debug/.build-id/${PBID:0:2}/${PBID:2}.debug ]"
pid=$(cp_crash "$T/dl/prog")
B3=$(cp_bundle_for "$pid" 60) || die "prog: no bundle"
rc=0
CRASHPACK_CACHE_DIR="$D" "$CP_BIN/crashpack" analyze --no-stacks --json "$B3" > "$T/dl1.json" 2>/dev/null || rc=$?
check "debuglink: analyze exits 0" [ "$rc" = 0 ]
jcheck "debuglink: leaf has its file:line (from the compressed debug file)" "$T/dl1.json" \
    "d['threads'][0]['frames'][0]['function'] == 'leaf' and (d['threads'][0]['frames'][0]['file'] or '').endswith('/prog.c') and d['threads'][0]['frames'][0]['line'] == 2"
check "debuglink: the copy was stored, uncompressed, with the debug file as its origin" \
    bash -c "[ -f '$PF' ] && ! eu-readelf -S '$PF' | grep -q ' C ' && eu-readelf --string-dump=.crashpack.origin '$PF' | grep -qF '$T/dl/prog.debug'"
pino=$(stat -c %i "$PF")
CRASHPACK_CACHE_DIR="$D" strace -f -qq -e trace=open,openat -o "$T/dl.strace" \
    "$CP_BIN/crashpack" analyze --no-stacks --json "$B3" > "$T/dl2.json" 2>/dev/null
check "debuglink: the next analysis reads the copy (same inode, the compressed file not opened)" \
    bash -c "[ \"\$(stat -c %i '$PF')\" = '$pino' ] && ! grep -q 'dl/prog.debug' '$T/dl.strace'"
check "debuglink: same JSON" cmp -s "$T/dl1.json" "$T/dl2.json"

# ---- no debuginfod client ----
# a module with no debug file anywhere (libstdc++ here) must not make libdw dlopen libdebuginfod
# (and libcurl, gnutls...) for a network query the analysis never makes (DEBUGINFOD_URLS unset)
pid=$(cp_crash "$CP_BIN/cp-cxx-throw")
B2=$(cp_bundle_for "$pid" 60) || die "cp-cxx-throw: no bundle"
CRASHPACK_CACHE_DIR="$D" strace -f -qq -e trace=open,openat -o "$T/cxx.strace" \
    "$CP_BIN/crashpack" analyze --no-stacks --json "$B2" > "$T/cxx.json" 2>/dev/null
jcheck "cxx: analyzed, libstdc++ frames named from its symbols" "$T/cxx.json" \
    "any(f['module'].startswith('libstdc++') and f['function'] for t in d['threads'] for f in t['frames'])"
# (modules.c opens it relative to an fd of /usr/lib/debug: openat(N</usr/lib/debug>, ".build-id/...")
check "cxx: libstdc++'s debug file was looked for (strace)" grep -q '"\.build-id/' "$T/cxx.strace"
check "cxx: libdebuginfod was never loaded (strace)" bash -c "! grep -q 'libdebuginfod' '$T/cxx.strace'"

# ---- bounded ----
rm -f "$F"
truncate -s 600M "$D/debuginfo/00.debug"
touch -d '2001-01-01' "$D/debuginfo/00.debug"
echo partial > "$D/debuginfo/.tmp.1.00.debug"
touch -d '2001-01-01' "$D/debuginfo/.tmp.1.00.debug"
echo partial > "$D/debuginfo/.tmp.2.00.debug" # fresh: maybe another analysis writing it
check "bounded: analyze exits 0" [ "$(run "$T/bound.json")" = 0 ]
check "bounded: the least recently used file (600 MiB, 2001) was removed" [ ! -e "$D/debuginfo/00.debug" ]
check "bounded: libc's file was stored" [ -f "$F" ]
check "bounded: a temporary file an hour old was removed, a fresh one kept" \
    bash -c "[ ! -e '$D/debuginfo/.tmp.1.00.debug' ] && [ -e '$D/debuginfo/.tmp.2.00.debug' ]"
finish
