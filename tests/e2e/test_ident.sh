#!/usr/bin/env bash
# Issue 23: every death kind has an identity and a signature; no placeholder values. Jobs run as an
# ordinary user (nobody), the node service (crashpack agent) as root.
#  1. (acceptance 1) under `crashpack run`: two Python scripts raising different exceptions and one
#     `bash -c '... exit 3'` give three bundles whose reports name exe and cmdline and have three
#     different signatures and fingerprints; the scripts' exceptions are the tracebacks of their
#     output.txt (exception.source "output"). After `db add`, a second run of the first script
#     joins its group in `db groups`, and a second `exit 3` whose last error line differs only in
#     numbers and times joins the exit's group; `db search` finds both exception messages.
#  2. (acceptance 2) an exception (the Python hook in a venv, CRASHPACK_HOOK=1), an exit (1.), an
#     OOM kill (the kernel's, in a memory cgroup, under `crashpack run`) and a snapshot (`crashpack
#     snap`) bundle: every output - analyze (text, --json), report, db list/show/jobs/groups/search
#     with and without --json - has no placeholder (`signal 0`, `tid -1`, `rank -1`, `pid 0`,
#     `line 0`, `(null)`), and the JSON no signal numbered 0, crashed tid -1, rank -1 or pid 0; each report
#     names its process and has a signature and a fingerprint.
source "$(dirname "$0")/../lib.sh"
cp_setup
command -v setpriv > /dev/null || { echo "SKIP: no setpriv"; exit 77; }
NOBODY=65534
CP=$CP_BIN/crashpack
chmod 755 "$T/bundles"
mkdir -m 755 "$T/run" "$T/state"
mkdir -m 1777 "$T/job"
SOCK=$T/run/agent.sock
echo "agent_socket = $SOCK" >> "$T/conf"
CG=
ident_cleanup() {
    if [ -n "$CG" ] && [ -d "$CG" ]; then
        local p
        for p in $(cat "$CG/cgroup.procs" 2> /dev/null); do kill -9 "$p" 2> /dev/null; done
        sleep 0.2
        rmdir "$CG" 2> /dev/null || echo "WARNING: could not remove $CG" >&2
    fi
}
trap 'rc=$?; ident_cleanup; (exit $rc); cp_restore' EXIT
"$CP" agent -c "$T/conf" --state-dir "$T/state" 2> "$T/agent.log" 9>&- &
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
[ -S "$SOCK" ] || { cat "$T/agent.log" >&2; die "the agent did not start"; }

as_nobody() {
    (cd "$T/job" && env -i PATH=/usr/bin:/bin HOME=/nonexistent CRASHPACK_AGENT_SOCKET="$SOCK" "$@" \
        setpriv --reuid $NOBODY --regid $NOBODY --clear-groups "${CMD[@]}") 9>&-
}
# job NAME CMD...: runs CMD as nobody under `crashpack run`; the bundle it made in $T/NAME.zst
job() {
    local name=$1 before after b i
    shift
    before=$(ls "$T"/bundles/crash-*.zst 2> /dev/null | sort)
    CMD=("$CP" run -c "$T/conf" -q -- "$@")
    as_nobody > "$T/$name.out" 2> "$T/$name.err"
    for i in $(seq 100); do
        after=$(ls "$T"/bundles/crash-*.zst 2> /dev/null | sort)
        b=$(comm -13 <(echo "$before") <(echo "$after") | head -1)
        [ -n "$b" ] && break
        sleep 0.2
    done
    [ -n "$b" ] && cp "$b" "$T/$name.zst"
    check "$name: one bundle" [ -n "$b" ]
    [ -n "$b" ] && "$CP" analyze --json "$T/$name.zst" > "$T/$name.json" 2> "$T/$name.aerr"
}
J() { json "$T/$1.json" "$2"; }

cat > "$T/job/shards.py" <<'EOF'
def load_shard(i):
    raise ValueError("bad shard %d at step %d" % (i, 1234 + i))

def main():
    print("loading", flush=True)
    load_shard(17)

main()
EOF
cat > "$T/job/config.py" <<'EOF'
class ConfigError(Exception):
    pass

def parse(name):
    try:
        {}["lr"]
    except KeyError as e:
        raise ConfigError("missing key 'lr' in " + name) from e

parse("train.yaml")
EOF
chmod 644 "$T"/job/*.py

# ---- 1. three deaths under crashpack run: named, three signatures, three fingerprints ----
job s1 /usr/bin/python3 "$T/job/shards.py"
job s2 /usr/bin/python3 "$T/job/config.py"
job x1 bash -c 'echo "error: shard 17 failed at 2026-01-01T10:00:00Z after 3.5s" >&2; exit 3'
for n in s1 s2 x1; do
    check "$n: the report names the executable and the command line" \
        [ "$(J $n 'bool(d["process"]["exe"]) and len(d["process"]["cmdline"]) > 0')" = True ]
    check "$n: a signature and a 16-digit fingerprint" \
        [ "$(J $n 'bool(d["signature"]) and len(d["fingerprint"] or "") == 16')" = True ]
done
check "s1: the exe is the interpreter, the cmdline the script" \
    [ "$(J s1 'd["process"]["exe"].split("/")[-1].startswith("python"), d["process"]["cmdline"][-1].endswith("shards.py")')" = "(True, True)" ]
check "s1: the ValueError parsed from output.txt" \
    [ "$(J s1 '(d["crash_kind"], d["exception"]["type"], d["exception"]["message"], d["exception"]["source"], d["exception"]["output"]["member"])')" = \
      "('python_exception', 'ValueError', 'bad shard 17 at step 1251', 'output', 'output.txt')" ]
check "s1: its frames, the innermost the raise in load_shard" \
    [ "$(J s1 '[(f["function"], f["line"]) for f in d["exception"]["frames"]]')" = "[('<module>', 8), ('main', 6), ('load_shard', 2)]" ]
check "s1: the signature from the type and the script's frames" \
    [ "$(J s1 'd["signature"]')" = "python exception ValueError | shards.py:load_shard | shards.py:main | shards.py:<module>" ]
check "s2: the chain, 'The above exception was the direct cause'" \
    [ "$(J s2 '[(e["relation"], e["type"]) for e in d["exception"]["chain"]]')" = "[('raised', 'ConfigError'), ('cause', 'KeyError')]" ]
check "x1: exit status 3 and the last error line, normalized" \
    [ "$(J x1 '(d["crash_kind"], d["signature"])')" = "('exit', 'exit status 3 | bash -c | error: shard N failed at <time> after Ns')" ]
check "x1: no exception in an output without a traceback" [ "$(J x1 'd["exception"]')" = None ]
check "three different signatures" \
    [ "$(for n in s1 s2 x1; do J $n 'd["signature"]'; done | sort -u | wc -l)" = 3 ]
check "three different fingerprints" \
    [ "$(for n in s1 s2 x1; do J $n 'd["fingerprint"]'; done | sort -u | wc -l)" = 3 ]
"$CP" report "$T/s1.zst" > "$T/s1.md" 2> /dev/null
check "s1: the Markdown title names the program" grep -q '^# Crash report: python' "$T/s1.md"
check "s1: the Markdown says where the exception came from" grep -q 'parsed from the traceback in `output.txt`' "$T/s1.md"

KB=$T/ident.sqlite
"$CP" db add --db "$KB" "$T/s1.zst" "$T/s2.zst" "$T/x1.zst" > "$T/add1.out" 2>&1
check "db add: three crashes" [ "$(grep -c '^added crash' "$T/add1.out")" = 3 ]
job s1b /usr/bin/python3 "$T/job/shards.py"
job x1b bash -c 'echo "error: shard 4242 failed at 2026-11-30T23:59:59Z after 12.25s" >&2; exit 3'
"$CP" db add --db "$KB" "$T/s1b.zst" "$T/x1b.zst" > "$T/add2.out" 2>&1
"$CP" db groups --db "$KB" --json > "$T/groups.json"
count() { json "$T/groups.json" "[g['count'] for g in d['groups'] if g['fingerprint'] == '$1']"; }
check "a second run of the first script joins its group" [ "$(count "$(J s1 'd["fingerprint"]')")" = "[2]" ]
check "a second exit 3 (other numbers and times) joins the exit's group" [ "$(count "$(J x1 'd["fingerprint"]')")" = "[2]" ]
check "the second script's group is its own" [ "$(count "$(J s2 'd["fingerprint"]')")" = "[1]" ]
check "db groups: three groups" [ "$(json "$T/groups.json" 'd["count"]')" = 3 ]
"$CP" db search --db "$KB" --json "bad shard 17" > "$T/search1.json"
"$CP" db search --db "$KB" --json "missing key 'lr'" > "$T/search2.json"
check "db search finds the first exception's message (both runs)" [ "$(json "$T/search1.json" 'd["count"]')" = 2 ]
check "db search finds the second exception's message" \
    [ "$(json "$T/search2.json" '[c["signature"].split(" |")[0] for c in d["crashes"]]')" = "['python exception ConfigError']" ]
check "db search finds an exception type" bash -c "'$CP' db search --db '$KB' ConfigError | grep -q '^1 crash'"

# ---- 2. an exception, an exit, an OOM kill, a snapshot: no placeholder anywhere ----
# the exception: the Python hook in a venv of /usr/bin/python3, switched on by CRASHPACK_HOOK=1
if /usr/bin/python3 -m venv --system-site-packages "$T/venv" > /dev/null 2>&1 &&
    "$CP" python-hook install --python "$T/venv/bin/python" > /dev/null; then
    chmod -R a+rX "$T/venv"
    before=$(ls "$T"/bundles/crash-*.zst 2> /dev/null | sort)
    CMD=("$T/venv/bin/python" "$T/job/shards.py")
    as_nobody CRASHPACK_HOOK=1 > /dev/null 2>&1
    b=
    for _ in $(seq 150); do
        b=$(comm -13 <(echo "$before") <(ls "$T"/bundles/crash-*.zst 2> /dev/null | sort) | head -1)
        [ -n "$b" ] && break
        sleep 0.2
    done
    check "exception: a bundle from the hook" [ -n "$b" ]
    [ -n "$b" ] && cp "$b" "$T/exc.zst"
else
    fail "exception: no venv with the hook"
fi
# the OOM kill: a job under crashpack run in a memory-limited cgroup
LIMIT=$((96 << 20))
if grep -qw memory /sys/fs/cgroup/cgroup.controllers 2> /dev/null; then
    grep -qw memory /sys/fs/cgroup/cgroup.subtree_control || echo +memory > /sys/fs/cgroup/cgroup.subtree_control
    CG=/sys/fs/cgroup/cp-ident-$$
    mkdir "$CG" && echo $LIMIT > "$CG/memory.max"
    echo 0 > "$CG/memory.swap.max" 2> /dev/null || true
elif [ -d /sys/fs/cgroup/memory ]; then
    CG=/sys/fs/cgroup/memory/cp-ident-$$
    mkdir "$CG" && echo $LIMIT > "$CG/memory.limit_in_bytes"
    echo 0 > "$CG/memory.swappiness" 2> /dev/null || true
    echo $LIMIT > "$CG/memory.memsw.limit_in_bytes" 2> /dev/null || true
fi
if [ -n "$CG" ] && [ -d "$CG" ]; then
    cat > "$T/job/grow.py" <<'EOF'
x = []
while True:
    x.append(bytearray(1 << 20))
EOF
    chmod 644 "$T/job/grow.py"
    before=$(ls "$T"/bundles/crash-*.zst 2> /dev/null | sort)
    bash -c 'echo $$ > "$1/cgroup.procs" && cd "$2/job" && exec env -i PATH=/usr/bin:/bin HOME=/nonexistent \
        CRASHPACK_AGENT_SOCKET="$2/run/agent.sock" setpriv --reuid 65534 --regid 65534 --clear-groups \
        "$3" run -c "$2/conf" -q --job ident-oom -- /usr/bin/python3 "$2/job/grow.py"' _ "$CG" "$T" "$CP" \
        > /dev/null 2> "$T/oom.err" 9>&-
    b=
    for _ in $(seq 150); do
        b=$(comm -13 <(echo "$before") <(ls "$T"/bundles/crash-*.zst 2> /dev/null | sort) | head -1)
        [ -n "$b" ] && break
        sleep 0.2
    done
    check "OOM kill: a bundle" [ -n "$b" ] && [ "$(cp_member "$b" manifest.json | json /dev/stdin 'd["death"]["kind"]')" = oom_kill ]
    [ -n "$b" ] && cp "$b" "$T/oom.zst"
else
    echo "SKIP (part): no memory cgroup controller: no OOM kill bundle"
fi
# the snapshot: crashpack snap of a live process
sleep 300 9>&- &
spid=$!
sleep 0.3
"$CP" snap -c "$T/conf" "$spid" > /dev/null 2>&1
kill -9 $spid 2> /dev/null
wait $spid 2> /dev/null
b=$(cp_bundle_for $spid 60)
check "snapshot: a bundle" [ -n "$b" ]
[ -n "$b" ] && cp "$b" "$T/snap.zst"
cp "$T/x1.zst" "$T/exit.zst"

KB2=$T/placeholders.sqlite
outs=()
for n in exc exit oom snap; do
    [ -f "$T/$n.zst" ] || continue
    "$CP" analyze "$T/$n.zst" > "$T/$n.txt" 2>&1
    "$CP" analyze --json "$T/$n.zst" > "$T/$n.rep.json" 2> /dev/null
    "$CP" report "$T/$n.zst" > "$T/$n.md" 2>&1
    "$CP" db add --db "$KB2" "$T/$n.zst" > "$T/$n.add" 2>&1
    outs+=("$T/$n.txt" "$T/$n.rep.json" "$T/$n.md" "$T/$n.add")
    check "$n: named, with a signature and a fingerprint" python3 - "$T/$n.rep.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
p = d["process"]
assert p.get("exe") or p.get("comm"), p
assert d["signature"] and d["fingerprint"], (d["signature"], d.get("signature_info"))
EOF
    check "$n: the Markdown title names the process" bash -c "! grep -q '^# Crash report: - ' '$T/$n.md'"
done
for v in list jobs groups stats; do
    "$CP" db $v --db "$KB2" > "$T/db-$v.txt" 2>&1
    "$CP" db $v --db "$KB2" --json > "$T/db-$v.json" 2>&1
    outs+=("$T/db-$v.txt" "$T/db-$v.json")
done
"$CP" db search --db "$KB2" python > "$T/db-search.txt" 2>&1
"$CP" db search --db "$KB2" --json python > "$T/db-search.json" 2>&1
outs+=("$T/db-search.txt" "$T/db-search.json")
for id in $(json "$T/db-list.json" '" ".join(str(c["id"]) for c in d["crashes"])'); do
    "$CP" db show --db "$KB2" "$id" > "$T/db-show-$id.txt" 2>&1
    "$CP" db show --db "$KB2" --json "$id" > "$T/db-show-$id.json" 2>&1
    outs+=("$T/db-show-$id.txt" "$T/db-show-$id.json")
done
check "db list has every bundle of part 2" [ "$(json "$T/db-list.json" 'd["count"]')" = "$(ls "$T"/{exc,exit,oom,snap}.zst 2> /dev/null | wc -l)" ]
# (the kernel's own OOM lines say "nodemask=(null)": its text, quoted, is no placeholder of ours)
bad=$(grep -nE 'signal 0\b|tid -1\b|rank -1\b|pid 0\b|line 0\b|\(null\)' "${outs[@]}" | grep -v 'nodemask=(null),')
check "no placeholder in any output (${#outs[@]} files)${bad:+: $bad}" [ -z "$bad" ]
check "no placeholder in the JSON (signal number 0, crashed tid -1, rank -1, pid 0)" python3 - "$T"/*.rep.json "$T"/db-*.json <<'EOF'
import json, sys
bad = []
def walk(o, path, f):
    if isinstance(o, dict):
        for k, v in o.items():
            p = path + "." + k
            if k in ("crashed_tid", "rank", "local_rank") and v == -1 or k == "pid" and v == 0:
                bad.append("%s: %s = %r" % (f, p, v))
            if k == "signal" and isinstance(v, dict) and (v.get("number") == 0 or v.get("name") in ("signal 0", "SIGUNKNOWN")):
                bad.append("%s: %s = %r" % (f, p, v))
            walk(v, p, f)
    elif isinstance(o, list):
        for i, v in enumerate(o):
            walk(v, "%s[%d]" % (path, i), f)
for f in sys.argv[1:]:
    walk(json.load(open(f)), "", f)
print("\n".join(bad[:20]))
sys.exit(1 if bad else 0)
EOF
if [ -f "$T/snap.rep.json" ]; then
    check "snapshot: no signal and no crashed thread (null)" \
        [ "$(json "$T/snap.rep.json" '(d["process"]["signal"]["number"], d["process"]["signal"]["name"], d["process"]["crashed_tid"])')" = "(None, None, None)" ]
fi
if [ -f "$T/exc.rep.json" ]; then
    check "exception: no signal, the raising thread as the crashed one" \
        [ "$(json "$T/exc.rep.json" '(d["process"]["signal"]["number"], d["process"]["crashed_tid"] == d["process"]["pid"], d["exception"]["source"])')" = "(None, True, 'exception.json')" ]
    check "exception: the hook's signature is the script's (the hook's own frames are not in it)" \
        [ "$(json "$T/exc.rep.json" 'd["signature"]')" = "python exception ValueError | shards.py:load_shard | shards.py:main | shards.py:<module>" ]
fi
if [ -f "$T/oom.rep.json" ]; then
    # the process is gone when the agent reads it: its name is the kill line's (python3)
    check "OOM kill: the signature names the kind, the limit and the program" \
        [ "$(json "$T/oom.rep.json" 'd["signature"].startswith("OOM kill | cgroup limit | python")')" = True ]
    check "OOM kill: the report names the process" [ "$(json "$T/oom.rep.json" 'd["process"]["comm"]')" = python3 ]
fi
finish
