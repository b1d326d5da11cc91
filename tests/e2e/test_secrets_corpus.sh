#!/usr/bin/env bash
# Acceptance (issue 22, acceptance 4): the secret corpus tests/unit/secrets-corpus.tsv (at least 30
# forms, each a line with a unique secret value: URL passwords, Authorization headers, key=value
# pairs, -pSECRET after mysql, --password X, JWTs, webhooks, token formats, private-key blocks, a
# redact_values glob, ...) is printed by a job, passed as its arguments, put in its environment
# under names that say nothing (CORPUS_NN) and copied onto its stack, and raised in a Python
# exception. No value survives in any member of any bundle, nor in `crashpack report` and
# `crashpack report --slim` (the printed report and the whole slim bundle, core included):
#  1. `crashpack run` as root (no agent: crashpack-capture --event) of a job that prints it all
#     and exits 3: output.txt, process.json (cmdline, environ), manifest.json, ...;
#  2. the same job under `crashpack run` as nobody, the node service (crashpack agent) as root;
#  3. a Python job as nobody with the hook, raising an exception (with a cause, in a named
#     thread) whose messages hold the corpus: exception.json, the snapshot;
#  4. a real crash through the kernel's core_pattern (cp-secrets: it prints the corpus on stdout
#     and stderr, both files, so logs/*.tail hold it), in full mode (every member but the core:
#     the contract makes the slim bundle the shareable one) and in slim mode (all of it).
# Ordinary output is not broken: the lines of tests/unit/secrets-clean.txt, printed by the job,
# are in output.txt as they were.
# CP_CORPUS_NO_GLOB=1 leaves redact_values out of the configuration (to measure a build that
# does not know it); CP_PY_SRC names the Python package's folder (default: this tree's).
source "$(dirname "$0")/../lib.sh"
cp_setup
command -v setpriv > /dev/null || { echo "SKIP: no setpriv"; exit 77; }
cp_install
CP="$CP_BIN/crashpack"
NOBODY=65534
TSV=$CP_SRC/tests/unit/secrets-corpus.tsv
AGENT_PID=
trap 'rc=$?; [ -n "$AGENT_PID" ] && kill "$AGENT_PID" 2>/dev/null && wait "$AGENT_PID" 2>/dev/null; (exit $rc); cp_restore' EXIT

[ -n "${CP_CORPUS_NO_GLOB:-}" ] || echo "redact_values = acmelic-*" >> "$T/conf"
mkdir -m 755 "$T/run" "$T/x"
SOCK=$T/run/agent.sock
echo "agent_socket = $SOCK" >> "$T/conf"
chmod 755 "$T/bundles"

# ---- the corpus: NAMES, VALUES, LINES (\n decoded), ENVS (CORPUS_NN=LINE) ----
NAMES=() VALUES=() LINES=() ENVS=()
while IFS=$'\t' read -r n v l; do
    [ -z "$n" ] || [ "${n:0:1}" = "#" ] && continue
    NAMES+=("$n")
    VALUES+=("$v")
    LINES+=("${l//\\n/$'\n'}")
done < "$TSV"
for i in "${!LINES[@]}"; do ENVS+=("CORPUS_$(printf %02d "$i")=${LINES[$i]}"); done
COPY_NAMES=$(for i in "${!LINES[@]}"; do printf 'CORPUS_%02d ' "$i"; done)
printf '%s\n' "${VALUES[@]}" > "$T/values"
check "the corpus has at least 30 forms (${#VALUES[@]})" [ "${#VALUES[@]}" -ge 30 ]
check "the corpus values are unique" [ "$(sort -u "$T/values" | wc -l)" = "${#VALUES[@]}" ]
mapfile -t CLEAN < <(grep -v '^#' "$CP_SRC/tests/unit/secrets-clean.txt")

# scan WHAT PATH [OUT]: each corpus value found in PATH (a file, or a folder read whole) is
# recorded in OUT ($T/survived) as "WHAT: FILE: NAME"
: > "$T/survived"
scan() {
    local what=$1 p=$2 out=${3:-$T/survived} f v i
    while IFS= read -r hit; do
        f=${hit%%:*} v=${hit#*:}
        for i in "${!VALUES[@]}"; do
            [ "${VALUES[$i]}" = "$v" ] && echo "$what: ${f#$T/x/}: ${NAMES[$i]}" >> "$out"
        done
    done < <(grep -r -a -o -H -F -f "$T/values" "$p" 2> /dev/null | sort -u)
}
nvalues() { awk -F': ' '{print $NF}' "$1" | sort -u | grep -c .; }
bundles_of() { ls "$T"/bundles/crash-*.zst 2> /dev/null | sort; }
# check_bundle NAME BUNDLE: every member (but a full core), then what report and report --slim
# make of it
check_bundle() {
    local name=$1 b=$2 d=$T/x/$1
    [ -f "$b" ] || { fail "$name: no bundle"; return; }
    mkdir -p "$d" "$d-slim"
    tar --zstd -xf "$b" -C "$d" || fail "$name: the bundle does not extract"
    local mode
    mode=$(json "$d/capture.json" '(d.get("core") or {}).get("mode", "none")' 2> /dev/null)
    if [ "$mode" = full ]; then rm -f "$d/core"; fi
    check "$name: its members are there (manifest.json, capture.json)" [ -f "$d/manifest.json" ] && [ -f "$d/capture.json" ]
    echo "$name: mode $mode, members: $(cd "$d" && find . -type f | sed 's|^\./||' | sort | tr '\n' ' ')"
    scan "$name (mode $mode)" "$d"
    "$CP" report "$b" > "$T/x/$name.report.md" 2> "$T/x/$name.report.err"
    check "$name: crashpack report wrote a report" grep -q . "$T/x/$name.report.md"
    scan "$name: crashpack report" "$T/x/$name.report.md"
    "$CP" report "$b" --slim "$T/x/$name.slim.zst" > "$T/x/$name.report-slim.md" 2> "$T/x/$name.report-slim.err"
    check "$name: crashpack report --slim wrote a slim bundle" [ -f "$T/x/$name.slim.zst" ]
    scan "$name: crashpack report --slim's report" "$T/x/$name.report-slim.md"
    tar --zstd -xf "$T/x/$name.slim.zst" -C "$d-slim" 2> /dev/null
    scan "$name: crashpack report --slim's bundle" "$d-slim"
}

cat > "$T/job.sh" << 'EOF'
# prints each argument on stdout and, after "error: ", on stderr; then the ordinary lines of
# $CLEAN_FILE; then fails
for l in "$@"; do printf '%s\n' "$l"; printf 'error: %s\n' "$l" >&2; done
cat "$CLEAN_FILE"
exit 3
EOF
grep -v '^#' "$CP_SRC/tests/unit/secrets-clean.txt" > "$T/clean.txt"
chmod 644 "$T/job.sh" "$T/clean.txt"

# ---- 1. crashpack run as root, no agent ----
before=$(bundles_of)
env "${ENVS[@]}" CLEAN_FILE="$T/clean.txt" "$CP" run -c "$T/conf" -- bash "$T/job.sh" "${LINES[@]}" \
    > "$T/run-root.out" 2> "$T/run-root.err"
rc=$?
check "run as root: the job's status (3)" [ "$rc" = 3 ]
scan "the job's own output" "$T/run-root.out" "$T/selftest"
check "run as root: the job did print every secret, found by the scan (the test is meaningful)" \
    [ "$(nvalues "$T/selftest")" = "${#VALUES[@]}" ]
b=$(comm -13 <(echo "$before") <(bundles_of) | head -1)
check_bundle run-root "$b"
# the job's stdout: output.txt without the stderr ranges process.json gives (the two streams
# interleave wherever the reads cut them)
python3 - "$T/x/run-root" > "$T/run-root.stdout" << 'PY'
import json, sys
d = sys.argv[1]
out = open(d + "/output.txt", "rb").read()
keep, at = [], 0
for o, n in json.load(open(d + "/process.json"))["output"]["stderr_ranges"]:
    keep.append(out[at:o])
    at = o + n
keep.append(out[at:])
sys.stdout.buffer.write(b"".join(keep))
PY
check "run as root: output.txt has the ordinary lines as they were" \
    bash -c "cmp -s <(tail -n ${#CLEAN[@]} '$T/run-root.stdout') '$T/clean.txt'"
check "run as root: process.json's cmdline keeps the job's arguments, masked" \
    [ "$(json "$T/x/run-root/process.json" 'len(d["cmdline"]) == 2 + '"${#LINES[@]}"' and "*" in d["cmdline"][2]')" = True ]

# ---- 2. crashpack run as nobody, the agent as root ----
"$CP" agent -c "$T/conf" --socket "$SOCK" --state-dir "$T/run" 2> "$T/agent.err" 9>&- &
AGENT_PID=$!
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
check "the agent listens" [ -S "$SOCK" ]
before=$(bundles_of)
setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups env CRASHPACK_AGENT_SOCKET="$SOCK" \
    "${ENVS[@]}" CLEAN_FILE="$T/clean.txt" "$CP" run -c "$T/conf" -- bash "$T/job.sh" "${LINES[@]}" \
    > "$T/run-nobody.out" 2> "$T/run-nobody.err" 9>&-
rc=$?
check "run as nobody: the job's status (3)" [ "$rc" = 3 ]
b=$(comm -13 <(echo "$before") <(bundles_of) | head -1)
check_bundle run-nobody "$b"
check "run as nobody: the bundle was reported by nobody" \
    [ "$(json "$T/x/run-nobody/manifest.json" 'd["death"]["reported_by_uid"]')" = $NOBODY ]

# ---- 3. the Python hook, as nobody: an exception whose messages hold the corpus ----
PY_SRC=${CP_PY_SRC:-$CP_SRC/python}
mkdir -m 755 "$T/py"
mkdir -m 1777 "$T/pystate"
cp -r "$PY_SRC/crashpack" "$T/py/"
chmod -R a+rX "$T/py"
cat > "$T/hook.py" << 'EOF'
import sys, threading
import crashpack
crashpack.install()
lines = sys.argv[1:]

def step():
    try:
        raise KeyError("\n".join(lines))
    except KeyError as e:
        raise RuntimeError("login failed: " + " | ".join(lines)) from e

t = threading.Thread(target=lambda: step(), name=lines[5][:30])
t.start()
t.join()
step()
EOF
chmod 644 "$T/hook.py"
before=$(bundles_of)
(cd "$T" && setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups env -i PATH=/usr/bin:/bin \
    PYTHONPATH="$T/py" CRASHPACK_CONFIG="$T/conf" CRASHPACK_AGENT_SOCKET="$SOCK" \
    CRASHPACK_STATE_DIR="$T/pystate" "${ENVS[@]}" python3 "$T/hook.py" "${LINES[@]}" \
    > "$T/hook.out" 2> "$T/hook.err" 9>&-)
check "hook: the job raised its secrets (the test is meaningful)" grep -q -F -- "${VALUES[1]}" "$T/hook.err"
b=$(comm -13 <(echo "$before") <(bundles_of) | head -1)
check_bundle hook "$b"
check "hook: exception.json is in the bundle, its message masked" \
    [ "$(json "$T/x/hook/exception.json" '"login failed: " in d["exception"]["message"] and "***" in d["exception"]["message"]' 2> /dev/null)" = True ]
scan "hook: the hook's state files" "$T/pystate"

# ---- 4. a real crash through core_pattern: full, then slim ----
crash() { # MODE
    sed -i '/^mode = /d' "$T/conf"
    echo "mode = $1" >> "$T/conf"
    env "${ENVS[@]}" CP_PRINT_ARGS=1 CP_COPY_NAMES="$COPY_NAMES" "$CP_BIN/cp-secrets" "${LINES[@]}" \
        > "$T/crash-$1.out" 2> "$T/crash-$1.err" &
    local pid=$!
    wait $pid 2> /dev/null
    b=$(cp_bundle_for $pid) || { fail "crash ($1): no bundle"; return; }
    check "crash ($1): the process did print its secrets" grep -q -F -- "${VALUES[2]}" "$T/crash-$1.err"
    check_bundle "crash-$1" "$b"
    check "crash ($1): logs/stderr.tail holds the printed lines, masked" \
        grep -q '^error: login ok password=\*\+ user=trainer$' "$T/x/crash-$1/logs/stderr.tail"
    check "crash ($1): capture.json: the core was scrubbed" \
        [ "$(json "$T/x/crash-$1/capture.json" 'd["core"]["scrubbed_bytes"] > 0')" = True ]
}
crash full
crash slim
check "crash (slim): its core was kept, and checked (the stack copies, masked)" \
    grep -q -a 'STACKCOPY<login ok password=\*\*\*' "$T/x/crash-slim/core"

n=$(nvalues "$T/survived")
echo "corpus values that survived somewhere: $n of ${#VALUES[@]}"
[ "$n" = 0 ] || sort -u "$T/survived" | sed 's/^/  survived: /' >&2
check "no corpus value survives in any bundle, report or slim bundle" [ "$n" = 0 ]
finish
