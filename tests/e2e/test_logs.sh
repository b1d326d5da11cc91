#!/usr/bin/env bash
# Acceptance (issue 3, #4 and the ML debug files): stderr redirected to a file -> its tail is in
# the bundle; stderr on a pipe -> the bundle says so; files the environment names (torchelastic
# error file, NCCL flight-recorder dumps, CUDA core dumps) are copied capped, read with the
# crashed process's credentials, never through a symlink and never blocking on a FIFO.
source "$(dirname "$0")/../lib.sh"
cp_setup
cp_install
chmod 755 "$T/bundles"
step() { # BUNDLE NAME -> "status: reason"
    tar --zstd -xOf "$1" capture.json | python3 -c 'import json,sys
for s in json.load(sys.stdin)["steps"]:
    if s["name"] == sys.argv[1]: print(s["status"] + ": " + s.get("reason", ""))' "$2"
}
export -f step

# 1. stderr to a file (300 KiB written), stdout to a pipe
python3 -c 'import sys
for i in range(3000): sys.stderr.write("line %06d %s\n" % (i, "x" * 90))' > "$T/stderr.src" 2>&1
( cat "$T/stderr.src" >&2; exec "$CP_BIN/cp-segv-threads" ) 2> "$T/job.err" | cat > /dev/null &
wait
pid=$(awk '/^cp-segv-threads: pid/{print $3; exit}' "$T/job.err" | tr -d ,)
# stdout is the pipe, so the pid line may not be in job.err: take it from the bundle's name, once the
# finisher (which runs the enrichment first) has published it
for _ in $(seq 1 600); do
    [ -n "$pid" ] && break
    pid=$(ls "$T"/bundles/ | sed -n 's/crash-[0-9]*-\([0-9]*\)-cp-segv-threads.zst/\1/p' | head -1)
    [ -n "$pid" ] || sleep 0.1
done
b=$(cp_bundle_for "$pid") || die "no bundle for pid $pid"
tar --zstd -xOf "$b" logs/stderr.tail > "$T/got.tail" || fail "no logs/stderr.tail member"
tail -c 262144 "$T/job.err" > "$T/want.tail"
check "stderr file: the bundle holds exactly its last 256 KiB" cmp -s "$T/got.tail" "$T/want.tail"
check "stderr file: the step names the file" bash -c "[[ \"\$(step '$b' logs/stderr)\" == ok:*$T/job.err* ]]"
check "stdout pipe: recorded as a pipe, nothing kept" bash -c "[[ \"\$(step '$b' logs/stdout)\" == skipped:*pipe* ]] && ! tar --zstd -tf '$b' | grep -q stdout.tail"

# 2. stdout and stderr to the same file: one tail
( echo "both streams" ; exec "$CP_BIN/cp-abort" ) > "$T/both.log" 2>&1 &
wait
pid=$(sed -n 's/^cp-abort: pid \([0-9]*\).*/\1/p' "$T/both.log" | head -1)
b=$(cp_bundle_for "$pid") || die "no bundle for cp-abort"
check "2>&1: stdout tail kept once, stderr says same file" bash -c \
    "tar --zstd -xOf '$b' logs/stdout.tail | grep -q 'both streams' && [[ \"\$(step '$b' logs/stderr)\" == skipped:*same\\ file* ]]"

# 3. ML debug files named by the environment, as an unprivileged user
mkdir -m 755 "$T/ml"; chown nobody "$T/ml"
printf '{"message": {"message": "RuntimeError: NCCL timeout", "extraInfo": {}}}' > "$T/ml/error.json"
head -c 1000 /dev/urandom > "$T/ml/nccl_trace_rank_0"; head -c 2000 /dev/urandom > "$T/ml/nccl_trace_rank_1"
chown nobody "$T"/ml/*
echo "root only" > "$T/ml/rootonly.json"; chmod 600 "$T/ml/rootonly.json"
env TORCHELASTIC_ERROR_FILE="$T/ml/error.json" TORCH_NCCL_DEBUG_INFO_TEMP_FILE="$T/ml/nccl_trace_rank_" \
    setpriv --reuid=65534 --regid=65534 --clear-groups "$CP_BIN/cp-abort" > "$T/ml.out" 2>&1 &
wait
pid=$(sed -n 's/^cp-abort: pid \([0-9]*\).*/\1/p' "$T/ml.out" | head -1)
b=$(cp_bundle_for "$pid") || die "no bundle for the ML run"
check "torchelastic error file copied byte for byte" bash -c "tar --zstd -xOf '$b' ml/torchelastic_error.json | cmp -s - '$T/ml/error.json'"
check "both NCCL flight-recorder dumps copied" bash -c \
    "tar --zstd -xOf '$b' ml/nccl_trace_rank_0 | cmp -s - '$T/ml/nccl_trace_rank_0' && tar --zstd -xOf '$b' ml/nccl_trace_rank_1 | cmp -s - '$T/ml/nccl_trace_rank_1'"
# with the crashed user's credentials: a file only root can read is refused
env TORCHELASTIC_ERROR_FILE="$T/ml/rootonly.json" \
    setpriv --reuid=65534 --regid=65534 --clear-groups "$CP_BIN/cp-abort" > "$T/ml2.out" 2>&1 &
wait
pid=$(sed -n 's/^cp-abort: pid \([0-9]*\).*/\1/p' "$T/ml2.out" | head -1)
b=$(cp_bundle_for "$pid") || die "no bundle for the root-only run"
check "a file the crashed user cannot read is refused, not copied as root" bash -c \
    "[[ \"\$(step '$b' ml/torchelastic_error)\" == refused:*Permission\\ denied* ]] && ! tar --zstd -tf '$b' | grep -q torchelastic"
# a symlink and a FIFO
ln -s /etc/shadow "$T/ml/link.json"; mkfifo "$T/ml/fifo.json"
for f in link fifo; do
    env TORCHELASTIC_ERROR_FILE="$T/ml/$f.json" "$CP_BIN/cp-abort" > "$T/$f.out" 2>&1 &
    wait
    pid=$(sed -n 's/^cp-abort: pid \([0-9]*\).*/\1/p' "$T/$f.out" | head -1)
    b=$(cp_bundle_for "$pid" 20) || { fail "$f: no bundle (blocked?)"; continue; }
    check "$f: recorded as such and not read" bash -c "[[ \"\$(step '$b' ml/torchelastic_error)\" == refused:*$([ $f = link ] && echo symlink || echo pipe)* ]]"
done
check "the symlink target was never copied" bash -c "! zstd -dc '$T'/bundles/*.zst | grep -aq 'root:[^:]*:[0-9]*:0:'"
finish
