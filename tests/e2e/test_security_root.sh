#!/usr/bin/env bash
# Acceptance (issue 16, items 1 and 2), through the real kernel core_pattern: a crashed process in a
# container (a chroot under `unshare -m`) cannot make the handler or its helpers read a host file.
#  1. TORCHELASTIC_ERROR_FILE naming a host-only file - absolute, relative (../../..), through a
#     symlink to it and through a symlink that climbs (-> ../../..) - for uid 0 and uid 65534: the
#     host file's bytes are nowhere in the bundle; the container's own file still is copied.
#  2. A container whose libc.so.6 is (by the time enrichment runs) a symlink to a host-only file:
#     enrichment does not open it (strace of `crashpack enrich` shows no open of the host path),
#     and stacks.json was made by a non-root uid.
source "$(dirname "$0")/../lib.sh"
cp_setup
command -v unshare > /dev/null || { echo "SKIP: no unshare"; exit 77; }
CHROOT=$(command -v chroot) || { echo "SKIP: no chroot"; exit 77; }

# the container: the crashing program and its libraries, nothing else
R=$T/root
mkdir -p "$R/app" "$R/tmp"
chmod 1777 "$R/tmp"
cp_copy_in() { # BINARY: copies it and its libraries to the same paths under $R
    local f
    for f in "$1" $(ldd "$1" | grep -o '/[^ ]*'); do
        mkdir -p "$R$(dirname "$f")"
        cp -L "$f" "$R$f"
    done
}
cp "$CP_BIN/cp-abort" "$R/app/prog"
cp_copy_in "$CP_BIN/cp-abort"
echo '{"container": "own file"}' > "$R/own.json"
chmod 644 "$R/own.json"

# the host-only file: readable by everyone on the host, so only the root boundary stops it
H=$T/hostonly
mkdir -m 755 "$H"
MARK="hostonly-secret-$$-$RANDOM"
echo "{\"secret\": \"$MARK\"}" > "$H/error.json"
chmod 644 "$H/error.json"
[ ! -e "$R$H/error.json" ] || die "the host file exists inside the root"
ln -s "$H/error.json" "$R/link.json"      # a symlink to the host path
ln -s ../../../../../../.. "$R/up"         # a symlink that climbs
cp_install
export -f cp_member

run_in() { # USERSPEC TORCHELASTIC_ERROR_FILE -> bundle path
    local pid
    pid=$(cp_crash env -i TORCHELASTIC_ERROR_FILE="$2" unshare -m "$CHROOT" --userspec="$1" "$R" /app/prog)
    cp_bundle_for "$pid"
}
rel=$(printf '../%.0s' $(seq 1 12))${H#/}/error.json
for who in 0:0 65534:65534; do
    for path in "$H/error.json" "$rel" /link.json "/up$H/error.json" "up/../up$H/error.json"; do
        b=$(run_in "$who" "$path") || { fail "uid ${who%%:*} $path: no bundle"; continue; }
        check "uid ${who%%:*}, TORCHELASTIC_ERROR_FILE=$path: the host file is not in the bundle" \
            bash -c "! zstd -dc -q '$b' | grep -aq '$MARK'"
    done
    b=$(run_in "$who" /own.json) || { fail "uid ${who%%:*} /own.json: no bundle"; continue; }
    check "uid ${who%%:*}: the container's own file is copied" \
        bash -c "cp_member '$b' ml/torchelastic_error.json 2>/dev/null | grep -q 'own file'"
done

# 2. libc.so.6 swapped for a symlink to a host-only file before the crash
LIBC=$(ldd "$CP_BIN/cp-abort" | grep -o '/[^ ]*libc\.so\.6')
[ -n "$LIBC" ] || die "cp-abort links no libc.so.6"
cp "$CP_BIN/crashpack-capture" "$H/libc.so.6" # an ELF file with another build-id
cat > "$T/swap.c" <<'EOF'
#include <signal.h>
#include <unistd.h>
int main(int argc, char **argv)
{
    if (argc != 3 || unlink(argv[1]) || symlink(argv[2], argv[1]))
        return 1;
    raise(SIGSEGV);
    return 0;
}
EOF
cc -O0 -o "$R/app/swap" "$T/swap.c" || die "cannot build the swap program"
# `crashpack enrich` under strace: the enrich command is a wrapper (config key enrich). -D: the
# tracer is a grandchild, so crashpack runs as the pid the finisher forked, the only one whose
# hello it takes (docs/capture.md, "Descriptors and the enrichment")
mkdir -m 1777 "$T/trace"
cat > "$T/enrich-wrap" <<EOF
#!/bin/sh
exec strace -D -f -o "$T/trace/enrich.\$\$" -e trace=open,openat,openat2,seccomp "$CP_BIN/crashpack" "\$@"
EOF
chmod 755 "$T/enrich-wrap"
echo "enrich = $T/enrich-wrap" >> "$T/conf"
cp_install
pid=$(cp_crash env -i unshare -m "$CHROOT" "$R" /app/swap "$LIBC" "$H/libc.so.6")
b=$(cp_bundle_for "$pid") || die "no bundle for the libc swap"
[ -L "$R$LIBC" ] || die "the container's libc.so.6 was not swapped"
cp_member "$b" stacks.json > "$T/stacks.json" 2>/dev/null || fail "no stacks.json in the bundle"
check "enrich ran under strace" bash -c "ls '$T'/trace/enrich.* > /dev/null 2>&1"
check "enrich: no open of the host-only file (strace)" \
    bash -c "! grep -h 'open' '$T'/trace/enrich.* | grep -q '$H'"
check "enrich: no open by a host path into the root's magic link (strace)" \
    bash -c "! grep -h 'open' '$T'/trace/enrich.* | grep -q '/proc/self/fd/4/'"
host_id=$(readelf -n "$H/libc.so.6" | awk '/Build ID/{print $3}')
check "stacks.json does not name the host file's build-id" bash -c "! grep -q '$host_id' '$T/stacks.json'"
check "stacks.json was not made by uid 0" [ "$(json "$T/stacks.json" 'd["uid"]')" != 0 ]
check "stacks.json: the analysis ran sealed" [ "$(json "$T/stacks.json" 'd["sealed"]')" = True ]
check "enrich: the analysis child installed its seccomp filter (strace)" \
    bash -c "grep -h 'seccomp(SECCOMP_SET_MODE_FILTER, 0, ' '$T'/trace/enrich.* | grep -q '= 0'"
# after the filter, nothing in that process even tries an open by path: only openat2
check "enrich: after the seal, every open is an openat2 (strace)" \
    bash -c "awk '/SECCOMP_SET_MODE_FILTER, 0, .*= 0/{s[\$1]=1; next} s[\$1] && /open/' '$T'/trace/enrich.* \
        | grep -Ev '^[0-9]+ +(openat2\\(|<\\.\\.\\. openat2 resumed>)' > '$T/after-seal.bad'; \
        [ ! -s '$T/after-seal.bad' ] || { echo 'opens after the seal:' >&2; head -20 '$T/after-seal.bad' >&2; exit 1; }"
# The sealed child is not dumpable, so strace running as the enrich user cannot show its
# arguments. The same command as root, on the same bundle and the same (swapped) root: every
# openat2 is confined to the root descriptor, and nothing names the host file.
exec 5< "$R"
strace -f -o "$T/trace/root-run" -e trace=open,openat,openat2 -s 256 \
    "$CP_BIN/crashpack" enrich --root-fd 5 --out "$T/stacks2.json" "$b" > /dev/null 2>&1
exec 5<&-
check "enrich as root: every openat2 of the analysis resolves in the root" \
    bash -c "grep -h 'openat2(' '$T/trace/root-run' | grep -v 'RESOLVE_IN_ROOT' | grep -q . && exit 1; \
             grep -q 'openat2(.*RESOLVE_IN_ROOT' '$T/trace/root-run'"
check "enrich as root: no open of the host-only file" \
    bash -c "! grep -q '$H' '$T/trace/root-run'"
check "enrich as root: the symlinked libc.so.6 is not followed out of the root" \
    bash -c "! grep -q '$host_id' '$T/stacks2.json'"
finish
