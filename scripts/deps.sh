#!/usr/bin/env bash
# scripts/deps.sh - install the Debian 12 packages crashpack builds, tests and demos with (root).
set -euo pipefail
pkgs=(
    build-essential cmake pkg-config                       # build
    libzstd-dev libcjson-dev                               # capture handler + reader
    libzip-dev                                             # checkpoint verdict (crashpack checkpoint)
    libdw-dev libelf-dev libunwind-dev libsqlite3-dev libxml2-dev  # analyzer (later issues)
    libdeflate-dev                                         # analyzer: fast inflate of compressed DWARF (debuginfo cache)
    libseccomp-dev                                         # analyzer: the sealed enrich child (sandbox_seal)
    zstd xxhash tar gdb elfutils binutils acl util-linux procps psmisc time  # tests: open bundles, check cores; fuser
    debootstrap debian-archive-keyring                     # tests: the foreign Debian roots of test_container (scripts/mkroot.sh)
    libc6-dbg strace                                       # tests: libc's compressed DWARF, the debuginfo cache
    python3 python3-torch                                  # real python/libtorch crashes (/usr/bin/python3)
    python3-venv                                           # tests: crashpack python-hook install into a venv (test_pyhook, test_exception_capture)
    python3-jsonschema                                     # tests: docs/report-schema.json and docs/schema/ (test_report_schema, test_cli)
    python3-markdown cmark-gfm                             # tests: render report Markdown to HTML (test_md_escape)
    python3.11-dev                                         # scripts/pylayout-gen.sh: CPython 3.11 internal headers
    clang libclang-rt-14-dev                               # tests: the libFuzzer harnesses (fuzz/bundle, fuzz/core)
    universal-ctags                                        # tests: function lengths (tests/unit/layout.py)
)
missing=()
for p in "${pkgs[@]}"; do
    [ "${p#\#}" = "$p" ] || continue
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null
fi
