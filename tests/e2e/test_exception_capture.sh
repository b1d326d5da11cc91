#!/usr/bin/env bash
# Uncaught Python exceptions through the real path (issue 13, acceptance 2, 6 and 7): the hook
# installed by `crashpack python-hook install` into a venv of Debian's /usr/bin/python3 (with
# python3-torch), activated by CRASHPACK_HOOK=1 with no change to the script, the job run as
# nobody, the node service (crashpack agent) as root.
#  2. a torch script raises torch.cuda.OutOfMemoryError with PyTorch's own message (raised by
#     hand: the class and the text are real, the allocation failure is not): stderr and the exit
#     status are byte-identical to a run without crashpack; one bundle, whose report has the
#     exception, the Python frames of every thread, and a GPU-OOM diagnosis on top;
#  6. an exception in a non-main thread that ends the process, and a dataset error re-raised from
#     a DataLoader worker: each captured, with the right thread and the worker's original
#     traceback;
#  7. a capture that hangs (the agent is stopped with SIGSTOP: the capturer sleeps) is abandoned:
#     the process exits as it would without crashpack while the capturer still exists, and the
#     abandonment is recorded.
# Issue 23, acceptance 3: the raising thread's Python frames are the user's, at the raise, with
# their source lines (text, Markdown, JSON); crashpack's own frames (the hook waiting for the
# agent) are marked `tool` in JSON and shown nowhere else; an exception's snapshot has no hang
# section.
source "$(dirname "$0")/../lib.sh"
cp_setup shared
command -v setpriv > /dev/null || { echo "SKIP: no setpriv"; exit 77; }
PY=/usr/bin/python3
$PY -c 'import torch' 2> /dev/null || { echo "SKIP: no python3-torch"; exit 77; }
NOBODY=65534
chmod 755 "$T/bundles"
mkdir -m 755 "$T/run" "$T/state"
SOCK=$T/run/agent.sock
echo "agent_socket = $SOCK" >> "$T/conf"
"$CP_BIN/crashpack" agent -c "$T/conf" --state-dir "$T/state" 2> "$T/agent.log" &
AGENT=$!
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
[ -S "$SOCK" ] || { cat "$T/agent.log" >&2; die "the agent did not start"; }

$PY -m venv --system-site-packages "$T/venv" > /dev/null 2>&1 || { echo "SKIP: python3 -m venv failed"; exit 77; }
V=$T/venv/bin/python
"$CP_BIN/crashpack" python-hook install --python "$V" > /dev/null || die "python-hook install failed"
chmod -R a+rX "$T/venv"
mkdir -m 1777 "$T/job"

# run_job NAME SCRIPT [ENV...]: runs the script as nobody, with the hook on (NAME.on.*) and off
# (NAME.off.*); stdout, stderr and the status of each
run_job() {
    local name=$1 script=$2
    shift 2
    for mode in off on; do
        local hook=0
        [ $mode = on ] && hook=1
        ( cd "$T/job" && env -i PATH=/usr/bin:/bin HOME=/nonexistent CRASHPACK_HOOK=$hook \
            CRASHPACK_AGENT_SOCKET="$SOCK" CRASHPACK_STATE_DIR="$T/job/state-$name-$mode" "$@" \
            setpriv --reuid $NOBODY --regid $NOBODY --clear-groups "$V" "$script" \
            > "$T/$name.$mode.out" 2> "$T/$name.$mode.err"; echo $? > "$T/$name.$mode.rc" )
    done
}
bundles_of() { ls "$T"/bundles/crash-*.zst 2> /dev/null | sort; }

# ---- 2. torch.cuda.OutOfMemoryError, no change to the script ----
cat > "$T/job/train.py" <<'EOF'
import threading, time, torch

def loader():
    ev.wait()

ev = threading.Event()
t = threading.Thread(target=loader, name="prefetch", daemon=True)
t.start()

def forward(x):
    # PyTorch's message for a real allocation failure (c10/cuda/CUDACachingAllocator.cpp)
    raise torch.cuda.OutOfMemoryError(
        "CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity; "
        "14.10 GiB already allocated; 3.19 MiB free; 14.50 GiB reserved in total by PyTorch) "
        "If reserved memory is >> allocated memory try setting max_split_size_mb to avoid "
        "fragmentation.  See documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF")

def train_step():
    forward(torch.zeros(4))

train_step()
EOF
before=$(bundles_of)
run_job oom "$T/job/train.py"
check "OOM: exit status 1 with and without the hook" \
    [ "$(cat "$T/oom.off.rc") $(cat "$T/oom.on.rc")" = "1 1" ]
check "OOM: stderr byte-identical with the hook" cmp -s "$T/oom.off.err" "$T/oom.on.err"
check "OOM: stdout byte-identical with the hook" cmp -s "$T/oom.off.out" "$T/oom.on.out"
check "OOM: stderr is PyTorch's error" grep -q 'OutOfMemoryError: CUDA out of memory' "$T/oom.on.err"
new=$(comm -13 <(echo "$before") <(bundles_of))
check "OOM: exactly one bundle ($(echo "$new" | grep -c .))" [ "$(echo "$new" | grep -c .)" = 1 ]
b=$(echo "$new" | head -1)
if [ -n "$b" ]; then
    cp_member "$b" exception.json > "$T/oom.exc.json"
    check "OOM: exception.json names torch.cuda.OutOfMemoryError, a RuntimeError" \
        [ "$(json "$T/oom.exc.json" 'd["exception"]["type"].endswith("OutOfMemoryError") and "RuntimeError" in d["exception"]["mro"]')" = True ]
    "$CP_BIN/crashpack" analyze --json "$b" > "$T/oom.report.json" 2> "$T/oom.analyze.err" || true
    check "OOM report: process.death is an exception" \
        [ "$(json "$T/oom.report.json" 'd["process"]["death"]["kind"]')" = exception ]
    check "OOM report: the exception's type and message" \
        [ "$(json "$T/oom.report.json" 'd["exception"]["type"].endswith("OutOfMemoryError") and "Tried to allocate 20.00 MiB" in d["exception"]["message"]')" = True ]
    # the raising frames are the exception's traceback (the stack has unwound by the time a hook
    # runs); the live snapshot has every other thread where it was
    check "OOM report: the exception's frames (forward <- train_step)" \
        [ "$(json "$T/oom.report.json" '[f["function"] for f in d["exception"]["frames"]][-2:]')" = "['train_step', 'forward']" ]
    check "OOM report: Python frames of the other thread, where it waited (prefetch: loader)" \
        [ "$(json "$T/oom.report.json" '[t["python"]["name"] for t in d["threads"] if "loader" in [f["function"] for f in (t.get("python_frames") or [])]]')" = "['prefetch']" ]
    check "OOM report: the top diagnosis is a GPU out-of-memory" \
        [ "$(json "$T/oom.report.json" 'd["diagnoses"][0]["category"]')" = cuda_oom ]
    # issue 23: python-cuda-oom and cuda-oom reach one cause: one diagnosis, each line once
    check "OOM report: one OOM diagnosis (python-cuda-oom and cuda-oom merged)" \
        [ "$(json "$T/oom.report.json" '[(x["rule"], sorted(x["rules"])) for x in d["diagnoses"] if x["category"] == "cuda_oom"]')" = "[('python-cuda-oom', ['cuda-oom', 'python-cuda-oom'])]" ]
    check "OOM report: its evidence has no line twice and no action twice" \
        [ "$(json "$T/oom.report.json" '[len(set(x[k])) == len(x[k]) for x in d["diagnoses"][:1] for k in ("evidence", "actions")]')" = "[True, True]" ]
    # issue 23: the raising thread shows the frames at the raise, with their source lines
    raising='[t for t in d["threads"] if t["tid"] == d["process"]["crashed_tid"]][0]'
    check "OOM report: the raising thread's own frames are the raise's (forward <- train_step <- <module>)" \
        [ "$(json "$T/oom.report.json" "[f['function'] for f in $raising['python_frames'] if not f.get('tool')]")" = "['forward', 'train_step', '<module>']" ]
    check "OOM report: each with its source line" \
        [ "$(json "$T/oom.report.json" "[f.get('source') for f in $raising['python_frames'] if not f.get('tool')]")" = "['raise torch.cuda.OutOfMemoryError(', 'forward(torch.zeros(4))', 'train_step()']" ]
    check "OOM report: the hook's frames (ask_agent...) are there, marked tool, and only they" \
        [ "$(json "$T/oom.report.json" "sorted(set(('/crashpack/' in f['file'], bool(f.get('tool'))) for t in d['threads'] for f in t['python_frames'])) == [(False, False), (True, True)] and 'ask_agent' in [f['function'] for f in $raising['python_frames'] if f.get('tool')]")" = True ]
    check "OOM report: the exception's own frames carry their source lines too" \
        [ "$(json "$T/oom.report.json" 'd["exception"]["frames"][-1]["source"]')" = "raise torch.cuda.OutOfMemoryError(" ]
    check "OOM report: no hang section in JSON (an exception's snapshot is no hang)" \
        [ "$(json "$T/oom.report.json" 'bool((d.get("hang") or {}).get("snap")) or d["crash_kind"] == "hang"')" = False ]
    "$CP_BIN/crashpack" analyze "$b" > "$T/oom.report.txt" 2>&1 || true
    "$CP_BIN/crashpack" report "$b" > "$T/oom.report.md" 2>&1 || true
    check "OOM text: the raising thread's traceback ends in forward, with its source line" \
        grep -qF "train.py\", line 12, in forward" "$T/oom.report.txt"
    check "OOM text: ... the source line under it" \
        bash -c "grep -A1 -F 'train.py\", line 12, in forward' '$T/oom.report.txt' | grep -qx '      raise torch.cuda.OutOfMemoryError('"
    check "OOM text: no crashpack frame" bash -c "! grep -q 'crashpack/__init__.py\|ask_agent\|_on_uncaught' '$T/oom.report.txt'"
    check "OOM text: no hang section" bash -c "! grep -q '^hang\|io_wait' '$T/oom.report.txt'"
    check "OOM Markdown: the frames at the raise with their source lines" \
        bash -c "grep -A1 -F 'train.py\", line 12, in forward' '$T/oom.report.md' | grep -q 'raise torch.cuda.OutOfMemoryError('"
    check "OOM Markdown: no crashpack frame" bash -c "! grep -q 'crashpack/__init__.py\|ask_agent' '$T/oom.report.md'"
    check "OOM Markdown: no hang section" bash -c "! grep -q 'Hang analysis\|io_wait' '$T/oom.report.md'"
fi

# ---- 6a. an exception that ends a non-main thread, the last one ----
cat > "$T/job/thread.py" <<'EOF'
import threading, time

def work():
    time.sleep(1)  # the main thread has returned: this thread's end is the process's
    raise KeyError("shard-17")

t = threading.Thread(target=work, name="worker-0")
t.start()
EOF
before=$(bundles_of)
run_job thread "$T/job/thread.py"
check "thread: stderr byte-identical with the hook" cmp -s "$T/thread.off.err" "$T/thread.on.err"
check "thread: same exit status" [ "$(cat "$T/thread.off.rc")" = "$(cat "$T/thread.on.rc")" ]
new=$(comm -13 <(echo "$before") <(bundles_of))
b=$(echo "$new" | head -1)
check "thread: one bundle" [ "$(echo "$new" | grep -c .)" = 1 ]
if [ -n "$b" ]; then
    cp_member "$b" exception.json > "$T/thread.exc.json"
    check "thread: the raising thread (worker-0) and KeyError" \
        [ "$(json "$T/thread.exc.json" 'd["thread"]["name"] + " " + d["exception"]["type"]')" = "worker-0 KeyError" ]
    "$CP_BIN/crashpack" analyze --json "$b" > "$T/thread.report.json" 2> /dev/null || true
    # the raise's frames, then the thread's bootstrap outside them, not threading's excepthook call
    check "thread report: worker-0's frames are the raise's, then its bootstrap" \
        [ "$(json "$T/thread.report.json" '[(f["function"], f.get("source")) for t in d["threads"] if t["tid"] == d["process"]["crashed_tid"] for f in t["python_frames"] if not f.get("tool")][:2]')" = "[('work', 'raise KeyError(\"shard-17\")'), ('run', 'self._target(*self._args, **self._kwargs)')]" ]
    check "thread report: ... down to threading's _bootstrap, without invoke_excepthook" \
        [ "$(json "$T/thread.report.json" '[f["function"] for t in d["threads"] if t["tid"] == d["process"]["crashed_tid"] for f in t["python_frames"] if not f.get("tool")][2:]')" = "['_bootstrap_inner', '_bootstrap']" ]
fi

# ---- 6b. a dataset error re-raised from a DataLoader worker ----
cat > "$T/job/loader.py" <<'EOF'
import torch
from torch.utils.data import DataLoader, Dataset

class Shards(Dataset):
    def __len__(self):
        return 8
    def __getitem__(self, i):
        if i == 5:
            raise ValueError("corrupt shard 5: bad magic")
        return torch.zeros(2)

if __name__ == "__main__":
    for batch in DataLoader(Shards(), batch_size=1, num_workers=2):
        pass
EOF
before=$(bundles_of)
run_job loader "$T/job/loader.py"
check "loader: exit 1 both ways" [ "$(cat "$T/loader.off.rc") $(cat "$T/loader.on.rc")" = "1 1" ]
check "loader: stderr byte-identical with the hook" cmp -s "$T/loader.off.err" "$T/loader.on.err"
new=$(comm -13 <(echo "$before") <(bundles_of))
b=$(echo "$new" | head -1)
check "loader: one bundle (the main process; workers never reach a hook)" [ "$(echo "$new" | grep -c .)" = 1 ]
if [ -n "$b" ]; then
    cp_member "$b" exception.json > "$T/loader.exc.json"
    check "loader: the worker's original ValueError and its traceback" \
        [ "$(json "$T/loader.exc.json" 'd["exception"]["worker"]["original_type"] == "ValueError" and "corrupt shard 5" in d["exception"]["worker"]["original_traceback"] and "__getitem__" in d["exception"]["worker"]["original_traceback"]')" = True ]
fi

# ---- 7. a capture that hangs is abandoned ----
cat > "$T/job/hang.py" <<'EOF'
raise RuntimeError("the capturer sleeps")
EOF
kill -STOP $AGENT
run_job hang "$T/job/hang.py" CRASHPACK_HOOK_TIMEOUT=3
kill -0 $AGENT && agent_alive=1 || agent_alive=0
check "hang: the process exited (status $(cat "$T/hang.on.rc")) while the capturer is still alive" \
    [ "$(cat "$T/hang.on.rc")" = 1 ] && [ $agent_alive = 1 ]
check "hang: stderr byte-identical with the hook" cmp -s "$T/hang.off.err" "$T/hang.on.err"
st=$(ls "$T"/job/state-hang-on/exception-*.json 2> /dev/null | head -1)
check "hang: the abandonment is recorded (exception-PID.json: abandoned true)" \
    [ -n "$st" ] && [ "$(json "$st" 'd["abandoned"]')" = True ]
kill -CONT $AGENT

kill -TERM $AGENT; wait $AGENT || true
check "no sanitizer report from the agent" cp_no_sanitizer_report "$T/agent.log"
finish
