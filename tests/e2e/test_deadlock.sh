#!/usr/bin/env bash
# Acceptance (issue 23, item 5): a proved deadlock is diagnosed as one, in C and in Python.
# `crashpack snap` (slim) of
#   - cp-deadlock (two pthreads taking two mutexes in opposite order),
#   - py_lock_cycle.py rlock (two Python threads, two threading.RLock in opposite order),
#   - py_lock_cycle.py condition (the same with a threading.Condition over an RLock),
# each gives diagnosis #1 hang-deadlock at >= 0.9 whose evidence names both threads, the lock each
# holds and the lock each waits for, and the line it waits on; the RLocks' owners come from the
# interpreter's objects in the core (python.locks). py_lock_cycle.py lock (threading.Lock, whose
# owner CPython does not record) says which lock each thread waits on, and that no owner is
# recorded. Then `rules add --from-crash` of each hang drafts a rule that matches its own bundle
# and none of the other hangs (those above, cp-hang8 and py_queue_hang.py).
source "$(dirname "$0")/../lib.sh"
cp_setup shared
PY=/usr/bin/python3
FX=$CP_SRC/fixtures/programs/py_lock_cycle.py
CP=$CP_BIN/crashpack
printf 'repeat_full = 100\nburst_full = 100\n' >> "$T/conf"
pids=()
trap 'rc=$?; for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; (exit $rc); cp_restore' EXIT

wait_ready() { # FILE
    for _ in $(seq 300); do grep -q '^ready' "$1" 2>/dev/null && return 0; sleep 0.1; done
    return 1
}
# snapit NAME PID: snaps PID (then kills it), analyzes the bundle into $T/NAME.json
snapit() {
    "$CP" snap -c "$T/conf" --json "$2" > "$T/$1.snap" 2> "$T/$1.snap.err" || fail "$1: snap"
    kill -9 "$2" 2> /dev/null
    json "$T/$1.snap" 'd["bundle"]["path"]' > "$T/$1.bundle"
    "$CP" analyze --json "$(cat "$T/$1.bundle")" > "$T/$1.json" 2> /dev/null
}
# start NAME CMD...: runs CMD until it prints "ready PID A B": sets A and B
start() {
    local name=$1
    shift
    "$@" > "$T/$name.out" 2>&1 &
    pids+=($!)
    wait_ready "$T/$name.out" || { fail "$name: the fixture did not get ready"; return 1; }
    read -r _ RPID A B < "$T/$name.out"
}
# top NAME EXPR: EXPR over the report's first diagnosis (x), its evidence joined (ev)
top() { json "$T/$1.json" "(lambda x, ev: $2)(d['diagnoses'][0], '\\n'.join(d['diagnoses'][0]['evidence']))"; }

# ---- pthread mutexes ----
if start dl "$CP_BIN/cp-deadlock"; then
    snapit dl "$RPID"
    check "C: #1 is hang-deadlock at >= 0.9" [ "$(top dl "(x['rule'], x['confidence'] >= 0.9)")" = "('hang-deadlock', True)" ]
    check "C: the evidence names both threads, both mutexes and take_second's line" \
        [ "$(top dl "f'thread $A (worker-ab) holds lock_a, waits for mutex lock_b held by thread $B, in take_second (cp-deadlock.c:' in ev and f'thread $B (worker-ba) holds lock_b, waits for mutex lock_a held by thread $A, in take_second (cp-deadlock.c:' in ev")" = True ]
    check "C: no \"possible deadlock\" diagnosis beside it" \
        [ "$(json "$T/dl.json" "[x['rule'] for x in d['diagnoses'] if x['rule'] == 'hang-lock-wait']")" = "[]" ]
fi

# ---- Python ----
line=$(grep -n 'WAIT-SECOND' "$FX" | cut -d: -f1)
for mode in rlock condition lock; do
    start py-$mode "$PY" "$FX" $mode || continue
    snapit py-$mode "$RPID"
    R=$T/py-$mode.json
    if [ $mode = lock ]; then
        check "Lock: #1 says the threads wait on threading.Lock objects (hang-python-lock-wait)" \
            [ "$(top py-$mode "x['rule']")" = hang-python-lock-wait ]
        check "Lock: no deadlock is claimed (no owner recorded)" [ "$(json "$R" 'len(d["hang"]["deadlocks"])')" = 0 ]
        check "Lock: the evidence says which lock each thread waits on, where, and that no owner is recorded" \
            [ "$(top py-$mode "f'thread $A (worker-ab) waits for threading.Lock lock_b' in ev and f'thread $B (worker-ba) waits for threading.Lock lock_a' in ev and 'take_second (py_lock_cycle.py:$line)' in ev and 'CPython records no owner of a threading.Lock' in ev")" = True ]
        continue
    fi
    a_lock=lock_a
    [ $mode = condition ] && a_lock="lock_a (a Condition's lock)"
    check "$mode: python.locks has both RLocks with their owners (from the core)" \
        [ "$(json "$R" "sorted((l['name'], l['owner_tid']) for l in d['python']['locks'] if l['name'] in ('$a_lock', 'lock_b'))")" = "$(python3 -c "print(sorted([('$a_lock', $A), ('lock_b', $B)]))")" ]
    check "$mode: one deadlock of threading.RLock" [ "$(json "$R" '[x["lock"] for x in d["hang"]["deadlocks"]]')" = "['threading.RLock']" ]
    check "$mode: #1 is hang-deadlock at >= 0.9" [ "$(top py-$mode "(x['rule'], x['confidence'] >= 0.9)")" = "('hang-deadlock', True)" ]
    check "$mode: the evidence names both threads, the lock each holds and waits for, and the line" \
        python3 - "$R" "$A" "$B" "$a_lock" "$line" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1])); a, b, la, line = sys.argv[2:6]
ev = "\n".join(d["diagnoses"][0]["evidence"])
assert f"thread {a} (worker-ab) holds {la}, waits for threading.RLock lock_b held by thread {b}, in take_second (py_lock_cycle.py:{line})" in ev, ev
assert f"thread {b} (worker-ba) holds lock_b, waits for threading.RLock {la} held by thread {a}, in " in ev, ev
PYEOF
done

# ---- drafts from hangs match their own bundle only ----
"$CP_BIN/cp-hang8" > "$T/h8.out" 2>&1 &
pids+=($!)
wait_ready "$T/h8.out" && snapit h8 "${pids[-1]}"
"$PY" "$CP_SRC/fixtures/programs/py_queue_hang.py" > "$T/q.out" 2>&1 &
pids+=($!)
wait_ready "$T/q.out" && sleep 0.5 && snapit q "${pids[-1]}"
names=(dl py-rlock py-condition py-lock h8 q)
for n in "${names[@]}"; do
    "$CP" db add --db "$T/kb.sqlite" "$(cat "$T/$n.bundle")" > /dev/null 2>&1 || fail "db add $n"
done
for i in 1 2 3 4; do
    n=${names[$((i - 1))]}
    "$CP" rules add --db "$T/kb.sqlite" --from-crash $i -o "$T/draft$i.json" > /dev/null 2>&1 || { fail "draft from $n"; continue; }
    rid=$(json "$T/draft$i.json" 'd["id"]')
    check "draft from $n: conditions beyond crash_kind: hang ($(json "$T/draft$i.json" 'list(list(c)[0] for c in d["when"]["all"])'))" \
        [ "$(json "$T/draft$i.json" 'len(d["when"]["all"]) >= 3')" = True ]
    "$CP" rules add --db "$T/k$i.sqlite" "$T/draft$i.json" > /dev/null || fail "rules add draft$i"
    "$CP" rules test --db "$T/k$i.sqlite" "$rid" > /dev/null
    check "draft from $n: passes rules test as drafted" [ $? = 0 ]
    hits=
    for m in "${names[@]}"; do
        "$CP" rules match --json --db "$T/k$i.sqlite" "$T/$m.json" > "$T/m.json"
        [ "$(json "$T/m.json" "any('$rid' in x.get('rules', [x['rule']]) for x in d)")" = True ] && hits="$hits $m"
    done
    check "draft from $n: matches its own bundle and no other hang (matched:$hits)" [ "$hits" = " $n" ]
done
finish
