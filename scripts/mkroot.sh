#!/usr/bin/env bash
# scripts/mkroot.sh NAME - build (once) a foreign Debian root for the container tests (root).
#
# NAME is one of:
#   trixie  Debian 13: python3.13 (the root's /usr/bin/python3), python3.13-dev, python3-torch
#   sid     Debian unstable: python3.14, python3.14-dev, python3-torch
#
# The root is cached in $CP_ROOTS_DIR/NAME (default /var/cache/crashpack/roots/NAME) and reused by
# every later run: when its stamp file (NAME/.crashpack-root) is there the script exits 0 at once.
# A build goes into a temp dir next to it (.NAME.tmp.PID) and is renamed into place only when
# complete, so a half-built root is never seen; an flock on .NAME.lock makes a second caller wait
# for the first one's build instead of starting its own. A leftover temp dir (a killed build) is
# removed by the next build.
#
# Method: debootstrap --variant=minbase (the essential set, apt), then apt-get install
# --no-install-recommends of the packages inside the root (apt resolves python3-torch's large
# dependency tree and says clearly when something is uninstallable). dpkg runs with force-unsafe-io
# and leaves out /usr/share/{doc,man,info,locale} to save time and space.
#
# Exit status: 0 the root is ready; 2 usage; 3 the root cannot be built today (the archive cannot be
# reached, a package is uninstallable - sid moves daily): one line on stdout,
#   mkroot: NAME: cannot build: REASON
# which the tests print as their SKIP line; 1 anything else (a bug). The full log of a failed build
# is kept in $CP_ROOTS_DIR/NAME.log.
#
# Environment: CP_ROOTS_DIR (cache dir), CP_DEBIAN_MIRROR (default http://deb.debian.org/debian).
# Clear the cache with: rm -rf /var/cache/crashpack/roots (or one NAME and its .NAME.* files).
set -euo pipefail

name=${1:-}
dir=${CP_ROOTS_DIR:-/var/cache/crashpack/roots}
mirror=${CP_DEBIAN_MIRROR:-http://deb.debian.org/debian}
case $name in
trixie) suite=trixie; pkgs="python3.13 python3.13-dev python3-dev python3-torch" ;;
sid) suite=sid; pkgs="python3.14 python3.14-dev python3-torch" ;;
*) echo "usage: mkroot.sh trixie|sid" >&2; exit 2 ;;
esac
root=$dir/$name
stamp=$root/.crashpack-root
[ -f "$stamp" ] && exit 0

# a build that could not be done is not retried for CP_MKROOT_RETRY_S seconds (default 3600):
# the reason is kept in .NAME.failed, so the test after a failed prebuild skips at once
failed=$dir/.$name.failed
cannot() {
    echo "mkroot: $name: cannot build: $*"
    if [ -n "${locked:-}" ]; then echo "mkroot: $name: cannot build: $*" > "$failed.new" && mv "$failed.new" "$failed"; fi
    exit 3
}
recent_failure() { # exits 3 when the last build failed less than CP_MKROOT_RETRY_S ago
    if [ -f "$failed" ] && [ $(($(date +%s) - $(stat -c %Y "$failed"))) -lt "${CP_MKROOT_RETRY_S:-3600}" ]; then
        echo "$(cat "$failed") (cached; retried after ${CP_MKROOT_RETRY_S:-3600} s, or rm $failed)"
        exit 3
    fi
}
[ "$(id -u)" = 0 ] || cannot "needs root"
command -v debootstrap > /dev/null || cannot "debootstrap is not installed (scripts/deps.sh)"
mkdir -p "$dir"
exec 8> "$dir/.$name.lock"
flock 8
locked=1
# someone else built it while we waited for the lock, or failed to
[ -f "$stamp" ] && exit 0
recent_failure

rm -rf "$dir/.$name.tmp."*
tmp=$dir/.$name.tmp.$$
log=$dir/$name.log
mkdir "$tmp"
: > "$log"
t0=$(date +%s)
cleanup() { [ -n "${tmp:-}" ] && rm -rf "$tmp"; }
trap cleanup EXIT

# one line saying why, from the log of a failed step
why() {
    local l
    l=$(grep -E 'E: |Unable to locate|unmet dependencies|has no installation candidate|Failed getting release|Couldn.t download|Temporary failure|Could not resolve|Connection failed|is not installable|Broken packages|Depends:' "$log" | head -1 || true)
    [ -n "$l" ] || l=$(tail -1 "$log")
    echo "$1: ${l#"${l%%[! ]*}"}"
}

echo "== debootstrap $suite" >> "$log"
# CP_MKROOT_METHOD=include (for measuring only): the packages go in through debootstrap --include
method=${CP_MKROOT_METHOD:-apt}
inc=()
[ "$method" = include ] && inc=(--include="${pkgs// /,}")
if ! debootstrap --variant=minbase --keep-debootstrap-dir "${inc[@]}" "$suite" "$tmp" "$mirror" >> "$log" 2>&1; then
    cannot "$(why "debootstrap $suite failed")"
fi
base_dl=$(find "$tmp/var/cache/apt/archives" -name '*.deb' -printf '%s\n' 2>/dev/null | awk '{s+=$1} END {print s+0}')
rm -rf "$tmp/debootstrap"
rm -f "$tmp"/var/cache/apt/archives/*.deb

cat > "$tmp/etc/dpkg/dpkg.cfg.d/crashpack" << 'EOF'
force-unsafe-io
path-exclude=/usr/share/doc/*
path-exclude=/usr/share/man/*
path-exclude=/usr/share/info/*
path-exclude=/usr/share/locale/*
EOF
printf '#!/bin/sh\nexit 101\n' > "$tmp/usr/sbin/policy-rc.d"
chmod 755 "$tmp/usr/sbin/policy-rc.d"
echo "deb $mirror $suite main" > "$tmp/etc/apt/sources.list"
# sid's Release file is valid for a week only: an archive mirror that lags (or a clock that runs
# ahead) would make apt refuse it. Its signature is still checked.
cat > "$tmp/etc/apt/apt.conf.d/99crashpack" << 'EOF'
Acquire::Check-Valid-Until "false";
Acquire::Languages "none";
APT::Install-Recommends "false";
APT::Install-Suggests "false";
EOF
cp /etc/resolv.conf "$tmp/etc/resolv.conf" 2>/dev/null || true

# apt-get inside the root, with /proc mounted in a private mount namespace (gone when it exits)
inroot() {
    unshare -m --propagation private sh -c 'mount -t proc proc "$1/proc" && shift && exec chroot "$@"' \
        sh "$tmp" "$tmp" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive LANG=C "$@"
}
echo "== apt-get install $pkgs" >> "$log"
inroot apt-get update >> "$log" 2>&1 || cannot "$(why "apt-get update failed")"
# shellcheck disable=SC2086
if [ "$method" = apt ] && ! inroot apt-get install -y --no-install-recommends -o APT::Keep-Downloaded-Packages=true $pkgs >> "$log" 2>&1; then
    cannot "$(why "apt-get install failed")"
fi
pkg_dl=$(find "$tmp/var/cache/apt/archives" -name '*.deb' -printf '%s\n' | awk '{s+=$1} END {print s+0}')
inroot apt-get clean >> "$log" 2>&1
rm -rf "$tmp"/var/lib/apt/lists/*_Packages "$tmp"/var/lib/apt/lists/*_Translation-*
: > "$tmp/etc/resolv.conf"

# what the tests rely on
py=$(readlink -f "$tmp/usr/bin/python3" || true)
[ -x "$tmp/usr/bin/python3" ] || cannot "no /usr/bin/python3 in the root"
pyver=$(inroot /usr/bin/python3 -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>> "$log") ||
    cannot "the root's python3 does not run"
torchver=$(inroot /usr/bin/python3 -c 'import torch; print(torch.__version__)' 2>> "$log") ||
    cannot "$(why "import torch fails in the root")"
t1=$(date +%s)
installed=$(du -sxk "$tmp" | awk '{print $1 * 1024}')
{
    echo "name=$name"
    echo "suite=$suite"
    echo "mirror=$mirror"
    echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "packages=$pkgs"
    if [ "$method" = apt ]; then echo "method=debootstrap --variant=minbase + apt-get install --no-install-recommends"
    else echo "method=debootstrap --variant=minbase --include"; fi
    echo "build_seconds=$((t1 - t0))"
    echo "download_bytes=$((base_dl + pkg_dl))"
    echo "installed_bytes=$installed"
    echo "python3=${py#"$tmp"} $pyver"
    echo "torch=$torchver"
    echo "dpkg_packages=$(grep -c '^Package: ' "$tmp/var/lib/dpkg/status")"
} > "$tmp/.crashpack-root.new"
mv "$tmp/.crashpack-root.new" "$tmp/.crashpack-root"
rm -rf "$root"
mv "$tmp" "$root"
tmp=
rm -f "$failed"
cat "$stamp"
