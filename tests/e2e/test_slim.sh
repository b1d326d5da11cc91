#!/usr/bin/env bash
# Acceptance (issue 2, #3): a slim core opens in gdb with the same crashing-thread backtrace as
# the full core of the same program and is < 5% of its size for a process with 1 GiB of heap;
# max_core_size switches full to slim; a synthetic core stream > 8 GiB fed on stdin (as the
# kernel would) yields a bundle that tar lists with the right size (pax header).
source "$(dirname "$0")/../lib.sh"
cp_setup
crash_bt() { # CORE -> the crashing thread's frames, function names only
    gdb -batch -ex 'bt' "$CP_BIN/cp-bigheap" "$1" 2>/dev/null |
        sed -n 's/^#[0-9]* *\(0x[0-9a-f]* in \)\{0,1\}\([^ ]*\) .*/\2/p'
}

cp_install
pid=$(cp_crash "$CP_BIN/cp-bigheap" 1024)
full=$(cp_bundle_for "$pid") || die "no full bundle"
mkdir -p "$T/full" && tar --zstd -xf "$full" -C "$T/full"

sed -i 's/^mode = .*//' "$T/conf"; echo "mode = slim" >> "$T/conf"
pid=$(cp_crash "$CP_BIN/cp-bigheap" 1024)
slim=$(cp_bundle_for "$pid") || die "no slim bundle"
mkdir -p "$T/slim" && tar --zstd -xf "$slim" -C "$T/slim"

fs=$(stat -c %s "$T/full/core"); ss=$(stat -c %s "$T/slim/core")
echo "full core $fs bytes, slim core $ss bytes ($((ss * 1000 / fs)) per mille)"
check "full core holds the 1 GiB heap" [ "$fs" -gt $((1024 * 1024 * 1024)) ]
check "slim core is < 5% of the full one" [ $((ss * 100)) -lt $((fs * 5)) ]
check "capture.json says slim" [ "$(json "$T/slim/capture.json" 'd["core"]["mode"]')" = slim ]
check "slim member hash matches" [ "$(json "$T/slim/capture.json" 'd["core"]["member_xxh64"]')" = "$(xxhsum -H64 < "$T/slim/core" | cut -d' ' -f1)" ]
crash_bt "$T/full/core" > "$T/full.bt"; crash_bt "$T/slim/core" > "$T/slim.bt"
echo "full bt: $(tr '\n' ' ' < "$T/full.bt")"; echo "slim bt: $(tr '\n' ' ' < "$T/slim.bt")"
check "full backtrace starts in crash_here <- main" bash -c "head -1 '$T/full.bt' | grep -q crash_here && grep -q '^main$' '$T/full.bt'"
check "slim backtrace equals the full one" cmp -s "$T/full.bt" "$T/slim.bt"
nt_full=$(gdb -batch -ex 'info threads' "$CP_BIN/cp-bigheap" "$T/full/core" 2>/dev/null | grep -c 'LWP')
nt_slim=$(gdb -batch -ex 'info threads' "$CP_BIN/cp-bigheap" "$T/slim/core" 2>/dev/null | grep -c 'LWP')
check "slim core has every thread ($nt_slim = $nt_full)" [ "$nt_full" = "$nt_slim" ]

# max_core_size: a core over the limit is kept slim instead of being dropped
sed -i 's/^mode = .*//' "$T/conf"; echo "max_core_size = 256M" >> "$T/conf"
pid=$(cp_crash "$CP_BIN/cp-bigheap" 512)
b=$(cp_bundle_for "$pid") || die "no bundle for the over-limit core"
mkdir -p "$T/limit" && tar --zstd -xf "$b" -C "$T/limit"
check "over max_core_size: slim, with the reason" \
    bash -c "grep -q '\"effective\":\"slim\"' '$T/limit/capture.json' && grep -q 'max_core_size' '$T/limit/capture.json'"
check "over max_core_size: still a backtrace" bash -c "gdb -batch -ex bt '$CP_BIN/cp-bigheap' '$T/limit/core' 2>/dev/null | grep -q crash_here"

# > 8 GiB through stdin: the pax size header (full mode again)
sed -i 's/^max_core_size = .*//' "$T/conf"
size=$((9 * 1024 * 1024 * 1024 + 4096 * 3))
python3 "$CP_SRC/fixtures/programs/synth_core.py" --size $((size / 4096 * 4096)) |
    "$CP_BIN/crashpack-capture" -c "$T/conf" 999999 999999 999999 11 "$(date +%s)" 0 0 1 -1 synth
b=$(cp_bundle_for 999999) || die "no bundle for the synthetic core"
line=$(tar --zstd -tvf "$b" | awk '$6 == "core"')
echo "tar: $line"
check "tar lists the 9 GiB core with its exact size" [ "$(echo "$line" | awk '{print $3}')" = $((size / 4096 * 4096)) ]
check "the synthetic bundle is small" [ "$(stat -c %s "$b")" -lt $((64 * 1024 * 1024)) ]
finish
