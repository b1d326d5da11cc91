#!/bin/bash
# bench/run_tree.sh - the CPU time `crashpack run` itself spends on a big process tree, for each
# way it can follow the job (issue 22, item 10; docs/run.md, "Every process of the job").
#
#   bench/run_tree.sh [-b BUILD_DIR] [-n PROCS] [-s SECONDS] [-t "TRACKER ..."] [-o OLD_CRASHPACK]
#
# The job: a shell that starts PROCS (1500) `sleep SECONDS` (30) in the background, waits for
# them, and exits 3 (so that run writes a bundle whose process.json says what it saw). It runs
# under `crashpack run --no-pty --tracker=T` for each T (default: scan walk connector cgroup2
# cgroup1 auto; scan is the old fixed-interval walk of /proc every --scan-ms), as root, then the
# same job as nobody (auto and walk: no cgroup there). -o: also the `crashpack` binary of an
# older build (the old code, which has no --tracker). run's own user and system CPU seconds
# come from /proc/PID/stat of its zombie (its children's times are not in them), read before it
# is reaped. Not a test: one run of each, on whatever else the machine is doing. Needs root.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$here/build
n=1500 secs=30 old= trackers="scan walk connector cgroup2 cgroup1 auto"
while [ $# -gt 0 ]; do
    case $1 in
        -b) build=$2; shift 2 ;;
        -n) n=$2; shift 2 ;;
        -s) secs=$2; shift 2 ;;
        -t) trackers=$2; shift 2 ;;
        -o) old=$2; shift 2 ;;
        *) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
    esac
done
[ "$(id -u)" = 0 ] || { echo "bench/run_tree.sh: needs root" >&2; exit 2; }
CP=$build/bin/crashpack
W=$(mktemp -d /tmp/cp-runtree.XXXXXX)
chmod 755 "$W"
trap 'rm -rf "$W"' EXIT
mkdir -m 711 "$W/bundles"
printf 'bundle_dir = %s/bundles\nmax_use = 100%%\nkeep_free = 0\n' "$W" > "$W/conf"
printf 'for i in $(seq %d); do sleep %s & done\nwait\nexit 3\n' "$n" "$secs" > "$W/job.sh"
chmod 644 "$W/conf" "$W/job.sh"
ulimit -n 65536 2>/dev/null
# cpu CMD...: runs CMD, prints "user sys wall rc" of it (its own times, from its zombie)
cat > "$W/cpu.py" <<'EOF'
import os, subprocess, sys, time
t0 = time.monotonic()
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)
wall = time.monotonic() - t0
st = open(f"/proc/{p.pid}/stat").read()
f = st[st.rindex(")") + 2:].split()
hz = os.sysconf("SC_CLK_TCK")
p.wait()
print(f"{int(f[11]) / hz:.2f} {int(f[12]) / hz:.2f} {wall:.1f} {p.returncode}")
EOF
# seen: processes_seen/missed and the mechanism, from the newest bundle's process.json
seen() {
    local b
    b=$(ls -t "$W"/bundles/crash-*.zst 2>/dev/null | head -1)
    [ -n "$b" ] || { echo "- - -"; return; }
    zstd -dc -q "$b" | tar -xOf - process.json | python3 -c '
import json, sys
s = json.load(sys.stdin).get("supervisor", {})
print(s.get("processes_seen", "-"), s.get("processes_missed", "-"),
      (s.get("tracker", "old") + "/" + s.get("discovery", "scan")))'
    rm -f "$W"/bundles/crash-*.zst
}
echo "job: $n x sleep $secs; $(nproc) CPUs; $(uname -r); $(date -u '+%F %H:%M') UTC"
printf '%-16s %-7s %6s %6s %7s %7s %3s %6s %6s %s\n' tracker user cpu_us cpu_sy cpu_sum wall_s rc seen missed mechanism
row() { # LABEL USER CMD...
    local label=$1 who=$2 pre=()
    shift 2
    [ "$who" = nobody ] && pre=(setpriv --reuid=65534 --regid=65534 --clear-groups)
    read -r us sy wall rc < <(python3 "$W/cpu.py" "${pre[@]}" "$@")
    read -r s m mech < <(seen)
    printf '%-16s %-7s %6s %6s %7s %7s %3s %6s %6s %s\n' "$label" "$who" "$us" "$sy" \
        "$(awk -v a="$us" -v b="$sy" 'BEGIN { printf "%.2f", a + b }')" "$wall" "$rc" "$s" "$m" "$mech"
}
[ -n "$old" ] && row old root "$old" run --no-pty -c "$W/conf" -- bash "$W/job.sh"
for t in $trackers; do
    row "$t" root "$CP" run --no-pty --tracker="$t" -c "$W/conf" -- bash "$W/job.sh"
done
for t in auto walk; do
    row "$t" nobody "$CP" run --no-pty --tracker="$t" -c "$W/conf" -- bash "$W/job.sh"
done
