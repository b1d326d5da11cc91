#!/usr/bin/env bash
# Acceptance (issue 16, item 4): a process carrying 12 differently named secrets - in its
# environment (HF_TOKEN, DB_PASS, MYSQL_PWD, API_PASSPHRASE, AWS_SECRET_ACCESS_KEY, GITHUB_TOKEN,
# OPENAI_API_KEY, PGPASSWORD, WANDB_API_KEY, the password of DATABASE_URL), on its command line
# (--password X, service.secret=Y), copied onto its stack, printed in its stderr tail and in an
# exception message (a torchelastic error file) - crashes through the real kernel core_pattern in
# slim mode, in full mode, and is snapped alive with `crashpack snap`: none of the values appears
# anywhere in the decompressed bundle (the raw tar stream and every extracted member), while the
# places they were (the stack copy, the tail, the exception text) are in the bundle, masked.
source "$(dirname "$0")/../lib.sh"
cp_setup
# (cp_restore, cp_setup's exit trap, kills the snapped process if the test stops early)
cp_install

rnd() { tr -dc 'A-Za-z0-9' < /dev/urandom | head -c 20; }
declare -A SECRET
for n in HF_TOKEN DB_PASS MYSQL_PWD API_PASSPHRASE AWS_SECRET_ACCESS_KEY GITHUB_TOKEN \
    OPENAI_API_KEY PGPASSWORD WANDB_API_KEY DBURL_PW ARG_PASSWORD ARG_KV; do
    SECRET[$n]=$(rnd)
done
[ "$(printf '%s\n' "${SECRET[@]}" | sort -u | wc -l)" = 12 ] || die "secrets not unique"
run_env() { # TAG CMD...: execs CMD with the secrets in its environment (run it with &)
    exec env HF_TOKEN="${SECRET[HF_TOKEN]}" DB_PASS="${SECRET[DB_PASS]}" MYSQL_PWD="${SECRET[MYSQL_PWD]}" \
        API_PASSPHRASE="${SECRET[API_PASSPHRASE]}" AWS_SECRET_ACCESS_KEY="${SECRET[AWS_SECRET_ACCESS_KEY]}" \
        GITHUB_TOKEN="${SECRET[GITHUB_TOKEN]}" OPENAI_API_KEY="${SECRET[OPENAI_API_KEY]}" \
        PGPASSWORD="${SECRET[PGPASSWORD]}" WANDB_API_KEY="${SECRET[WANDB_API_KEY]}" \
        DATABASE_URL="postgres://trainer:${SECRET[DBURL_PW]}@db.example:5432/runs" \
        CP_COPY_NAMES="HF_TOKEN DB_PASS MYSQL_PWD API_PASSPHRASE AWS_SECRET_ACCESS_KEY GITHUB_TOKEN OPENAI_API_KEY PGPASSWORD WANDB_API_KEY DATABASE_URL" \
        CP_TAIL_NAME=OPENAI_API_KEY CP_EXC_NAME=WANDB_API_KEY \
        TORCHELASTIC_ERROR_FILE="$T/error-$1.json" "${@:2}"
}
ARGS=(--password "${SECRET[ARG_PASSWORD]}" "service.secret=${SECRET[ARG_KV]}" --epochs 3)

# no_secret NAME BUNDLE: none of the 12 values in the raw stream or in any extracted member
no_secret() {
    local name=$1 b=$2 d=$T/x-$1 k hits=""
    zstd -dc -q "$b" > "$T/$name.tar" || fail "$name: bundle does not decompress"
    mkdir -p "$d" && tar -xf "$T/$name.tar" -C "$d" || fail "$name: bundle does not extract"
    for k in "${!SECRET[@]}"; do
        grep -q -a -F -- "${SECRET[$k]}" "$T/$name.tar" && hits+=" $k(stream)"
        grep -r -q -a -F -- "${SECRET[$k]}" "$d" && hits+=" $k($(grep -r -l -a -F -- "${SECRET[$k]}" "$d" | sed "s|$d/||" | tr '\n' ' '))"
    done
    check "$name: none of the 12 secret values is in the bundle${hits:+ (found:$hits)}" [ -z "$hits" ]
    check "$name: the core's stack copy is kept, masked" grep -q -a 'STACKCOPY<\*\*\*\*\*\*' "$d/core"
    check "$name: the values were scrubbed in the core (scrubbed_bytes > 0)" \
        [ "$(json "$d/capture.json" 'd["core"]["scrubbed_bytes"] > 0')" = True ]
    check "$name: no stream hash is published (it would cover the secrets)" \
        [ "$(json "$d/capture.json" '"stream_xxh64" in d["core"]')" = False ]
    check "$name: member_xxh64 is the hash of the core as stored" \
        [ "$(json "$d/capture.json" 'd["core"]["member_xxh64"]')" = "$(xxhsum -H64 < "$d/core" | cut -d' ' -f1)" ]
    check "$name: manifest cmdline keeps the flags, masks the values" \
        [ "$(json "$d/manifest.json" '" ".join(d["cmdline"][1:])' | sed 's/^wait //')" = "--password ******************** service.secret=******************** --epochs 3" ]
}
tail_and_exception() { # NAME: the output tail and the exception text are there, masked
    local d=$T/x-$1
    check "$1: logs/stderr.tail holds the error line, masked" grep -q 'connecting with \*\{20\} failed' "$d/logs/stderr.tail"
    check "$1: the exception text in the tail is masked" grep -q 'login refused for key \*\{20\}$' "$d/logs/stderr.tail"
    check "$1: ml/torchelastic_error.json holds the exception text, masked" grep -q 'login refused for key \*\{20\}' "$d/ml/torchelastic_error.json"
}

# ---- 1. slim bundle of a crash, through the kernel ----
echo "mode = slim" >> "$T/conf"
run_env slim "$CP_BIN/cp-secrets" "${ARGS[@]}" > /dev/null 2> "$T/slim.err" &
pid=$!
wait $pid 2>/dev/null
b=$(cp_bundle_for $pid) || die "no slim bundle"
check "slim: the process did print its secrets (the test is meaningful)" grep -q -F "${SECRET[OPENAI_API_KEY]}" "$T/slim.err"
no_secret slim "$b"
check "slim: capture.json says slim" [ "$(json "$T/x-slim/capture.json" 'd["core"]["mode"]')" = slim ]
tail_and_exception slim

# ---- 2. full core (the same streaming scrub) ----
sed -i 's/^mode = .*//' "$T/conf"
run_env full "$CP_BIN/cp-secrets" "${ARGS[@]}" > /dev/null 2> "$T/full.err" &
pid=$!
wait $pid 2>/dev/null
b=$(cp_bundle_for $pid) || die "no full bundle"
no_secret full "$b"
check "full: capture.json says full" [ "$(json "$T/x-full/capture.json" 'd["core"]["mode"]')" = full ]
tail_and_exception full
check "full: the core still opens in gdb at crash_here" \
    bash -c "gdb -batch -ex bt '$CP_BIN/cp-secrets' '$T/x-full/core' 2>/dev/null | grep -q crash_here"

# ---- 3. snapshot of the live process (crashpack snap builds its slim core in memory) ----
echo "mode = slim" >> "$T/conf"
mkfifo "$T/go"
run_env snap "$CP_BIN/cp-secrets" wait "${ARGS[@]}" < "$T/go" > "$T/snap.out" 2> "$T/snap.stderr" &
spid=$!
exec 7> "$T/go"
for ((i = 0; i < 300; i++)); do grep -q '^ready' "$T/snap.out" 2>/dev/null && break; sleep 0.1; done
"$CP_BIN/crashpack" snap -c "$T/conf" --json "$spid" > "$T/snap.json" 2> "$T/snap.err" || fail "crashpack snap failed: $(cat "$T/snap.err")"
sb=$(json "$T/snap.json" 'd["bundle"]["path"]')
[ -f "$sb" ] || die "no snap bundle"
no_secret snap "$sb"
check "snap: manifest says trigger snap" [ "$(json "$T/x-snap/manifest.json" 'd["capture"]["trigger"]')" = snap ]
tail_and_exception snap
exec 7>&- # release it: it crashes now; that bundle is not needed
wait $spid 2>/dev/null
finish
