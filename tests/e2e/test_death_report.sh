#!/usr/bin/env bash
# Issue 13, "the analyzer treats these bundles as first-class": bundles of deaths without a core
# (manifest.json's `death`, exception.json, output.txt, kmsg.json with the OOM killer's lines),
# built with tests/tools/bundle_edit (`bundle_edit - OUT --put NAME FILE...`: a new bundle in the
# real format), analyzed, rendered as text and as `crashpack report` Markdown:
#   exit3       death {kind exit, status 3}: process.death, no signal, no crashed thread, crash
#               kind exit; the output tail scanned as a log (source output.txt)
#   oomcg       death {kind oom_kill} and the kernel's CONSTRAINT_MEMCG kill lines for its pid: the
#               cgroup limit ranks first and its evidence names the cgroup
#   oomhost     the same with global_oom: the host's memory ranks first
#   oomnoline   death oom_kill without a kill line: oom-kill-death
#   torchoom    exception.json, torch.OutOfMemoryError raised from a RuntimeError (cause chain) in
#               a non-main thread, a non-fatal threading.excepthook event: the exception in the
#               report, text and Markdown, the raising thread as the crashed one, crash kind
#               python_exception with a signature from the Python frames, GPU OOM on top
#   dlkill      RuntimeError "DataLoader worker (pid(s) N) exited unexpectedly" from the "is killed
#               by signal: Killed." error, and the kernel's OOM kill of pid N: explained by the kill
#   dlold       the same with kill lines two hours old: outside the kill's window, context only
#   dlvalue     a dataset error re-raised from a DataLoader worker: the worker's original traceback
#   legacy      an older bundle (no death object): kind core from the kernel; one with snap.json:
#               kind snapshot
#   hostile     exception.json 40 exceptions deep, 300 frames, a 100 KiB message, raw HTML: caps
#               hold, the Markdown escapes it; and an exception.json that is not JSON: a warning
#   tb*         (issue 23) exits under `crashpack run` whose output.txt ends in a traceback: with
#               "[rank0]: " prefixes, another rank's lines between, and a context chain; a
#               DataLoader worker's re-raise; terminal colors and "\r\n"; and one the job logged
#               and went on from (no exception: the exit's last lines are its signature)
# Every report validates against docs/report-schema.json (when python3-jsonschema is installed).
# No core_pattern, no root.
source "$(dirname "$0")/../lib.sh"
T=$(mktemp -d /tmp/cpd.XXXXXX)
trap '[ -n "${CP_KEEP:-}" ] || rm -rf "$T"' EXIT
CP="$CP_BIN/crashpack"
EDIT="$CP_BIN/bundle_edit"
export CRASHPACK_DB="$T/kb.sqlite"
[ -x "$EDIT" ] || die "no $EDIT"

# ---- the fixtures: one directory of members per bundle ----
python3 - "$T" <<'PY' || die "cannot write the fixtures"
import json, os, sys
T = sys.argv[1]
NOW = 1796156531

def manifest(pid, death, comm="python3", exe="/usr/bin/python3", cmdline=None, signal=None):
    m = {"format": "crashpack-manifest/1", "crashpack_version": "0.1.0",
         "host": {"hostname": "node7", "kernel": "6.18.44", "machine": "x86_64"},
         "time": NOW, "pid": pid, "uid": 1000, "gid": 1000, "exe": exe, "comm": comm,
         "cmdline": cmdline or [exe, "train.py"], "cwd": "/home/u", "cgroup": "/crashpack-test/job1",
         "capture": {"mode": "meta", "trigger": (death or {}).get("trigger", "kernel")}}
    if death is not None:
        m["death"] = death
    if signal is not None:
        m["signal"] = {"number": signal}
    return m

def death(kind, signal=None, status=None, trigger="hook", identity="verified", reason=None, uid=None):
    return {"kind": kind, "signal": signal, "status": status, "trigger": trigger, "reason": reason,
            "identity": identity, "reported_by_uid": uid, "job": "job-42"}

def kmsg(lines):
    return {"source": "/dev/kmsg", "lines": [
        {"time": NOW - 5 + i, "class": "oom", "text": t} for i, t in enumerate(lines)]}

MRO_OOM = ["torch.OutOfMemoryError", "RuntimeError", "Exception", "BaseException"]
MRO_RT = ["RuntimeError", "Exception", "BaseException"]
def fr(fn, qual, file, line):
    return {"function": fn, "qualname": qual, "file": file, "line": line}
TRAIN = [fr("<module>", "<module>", "/home/u/train.py", 40), fr("main", "main", "/home/u/train.py", 33),
         fr("step", "Trainer.step", "/home/u/train.py", 21)]
def exc(type_, mro, msg, frames, cause=None, context=None, worker=None):
    return {"type": type_, "mro": mro, "message": msg, "frames": frames, "cause": cause,
            "context": context, "worker": worker}
def excjson(e, tid=6163, tname="trainer", events=()):
    return {"format": "crashpack-exception/1", "hook": "threading.excepthook", "fatal": True,
            "time": NOW, "pid": 6161, "thread": {"ident": 140000, "native_id": tid, "name": tname},
            "python": {"version": "3.11.2", "implementation": "cpython", "executable": "/usr/bin/python3"},
            "exception": e, "events": list(events), "abandoned": False}
CAPTURE = {"format": "crashpack-capture/1", "status": "ok", "mode": {"requested": "meta", "effective": "meta"}, "steps": []}

B = {}
B["exit3"] = {"manifest.json": manifest(4242, death("exit", status=3, trigger="run", identity="reported", uid=1000,
                                                   reason="exited with status 3"),
                                        comm="bash", exe="/usr/bin/bash", cmdline=["bash", "-c", "exit 3"]),
              "output.txt": "starting\nRuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1, unhandled system error\n"}
CG = ["python3 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0",
      "memory: usage 4194304kB, limit 4194304kB, failcnt 120",
      "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/crashpack-test/job1,task_memcg=/crashpack-test/job1,task=python3,pid=%d,uid=1000",
      "Memory cgroup out of memory: Killed process %d (python3) total-vm:6291456kB, anon-rss:4100000kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:9000kB oom_score_adj:0"]
B["oomcg"] = {"manifest.json": manifest(5151, death("oom_kill", signal=9, trigger="agent")),
              "kmsg.json": kmsg([l % 5151 if "%d" in l else l for l in CG])}
B["oomhost"] = {"manifest.json": manifest(5152, death("oom_kill", signal=9, trigger="agent")),
                "kmsg.json": kmsg(["oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/user.slice/user-1000.slice,task=python3,pid=5152,uid=1000",
                                   "Out of memory: Killed process 5152 (python3) total-vm:60000000kB, anon-rss:50000000kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:90000kB oom_score_adj:0"])}
B["oomnoline"] = {"manifest.json": manifest(5153, death("oom_kill", signal=9, trigger="agent"))}

OOM_MSG = ("CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which "
           "1.20 GiB is free. Including non-PyTorch memory, this process has 77.90 GiB memory in use.")
inner = exc("RuntimeError", MRO_RT, "allocator retry failed", [fr("alloc", "Pool.alloc", "/home/u/pool.py", 7)])
torch_frames = TRAIN + [fr("_call_impl", "Module._call_impl", "/usr/lib/python3/dist-packages/torch/nn/modules/module.py", 1750)]
ev = {"hook": "threading.excepthook", "time": NOW - 30, "fatal": False,
      "thread": {"ident": 1, "native_id": 6170, "name": "prefetch"},
      "exception": exc("ValueError", ["ValueError", "Exception", "BaseException"], "bad shard 3", [])}
B["torchoom"] = {"manifest.json": manifest(6161, death("exception", trigger="hook")),
                 "exception.json": excjson(exc("torch.OutOfMemoryError", MRO_OOM, OOM_MSG, torch_frames, cause=inner),
                                           events=[ev])}
DL_FR = TRAIN + [fr("_next_data", "_MultiProcessingDataLoaderIter._next_data",
                    "/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py", 1465)]
killed = exc("RuntimeError", MRO_RT, "DataLoader worker (pid 7180) is killed by signal: Killed. ",
             [fr("handler", "_error_if_any_worker_fails.handler", "/usr/lib/python3/dist-packages/torch/utils/data/_utils/signal_handling.py", 67)])
B["dlkill"] = {"manifest.json": manifest(7171, death("exception", trigger="hook")),
               "exception.json": excjson(exc("RuntimeError", MRO_RT, "DataLoader worker (pid(s) 7180) exited unexpectedly",
                                             DL_FR, cause=killed), tid=7171, tname="MainThread"),
               "kmsg.json": kmsg([l % 7180 if "%d" in l else l for l in CG])}
# the same, but the kill lines are two hours old (another job's worker had that pid): context only
B["dlold"] = {"manifest.json": manifest(7171, death("exception", trigger="hook")),
              "exception.json": B["dlkill"]["exception.json"],
              "kmsg.json": {"source": "/dev/kmsg", "lines": [
                  {"time": NOW - 7200 + i, "class": "oom", "text": l % 7180 if "%d" in l else l} for i, l in enumerate(CG)]}}
TB = ("Traceback (most recent call last):\n"
      "  File \"/usr/lib/python3/dist-packages/torch/utils/data/_utils/worker.py\", line 351, in _worker_loop\n"
      "    data = fetcher.fetch(index)\n"
      "  File \"/home/u/dataset.py\", line 9, in __getitem__\n"
      "    raise ValueError(f\"bad sample {i}\")\n"
      "ValueError: bad sample 17\n")
B["dlvalue"] = {"manifest.json": manifest(7272, death("exception", trigger="hook")),
                "exception.json": excjson(exc("ValueError", ["ValueError", "Exception", "BaseException"],
                                              "Caught ValueError in DataLoader worker process 0.\nOriginal " + TB,
                                              DL_FR + [fr("reraise", "ExceptionWrapper.reraise", "/usr/lib/python3/dist-packages/torch/_utils.py", 733)],
                                              worker={"kind": "DataLoader", "id": 0, "pid": 7281, "original_type": "ValueError",
                                                      "original_traceback": TB}), tid=7272, tname="MainThread")}
# issue 23: tracebacks in a `crashpack run` job's output, read back into `exception`
RUN = lambda pid, st=1, **kw: manifest(pid, death("exit", status=st, trigger="run", identity="reported", uid=1000), **kw)
TB_CTX = ("[rank0]: Traceback (most recent call last):\n"
          "[rank0]:   File \"/home/u/train.py\", line 5, in load\n"
          "[rank0]:     return cache[key]\n"
          "[rank0]:            ~~~~~^^^^^\n"
          "[rank1]: step 7 ok\n"
          "[rank0]: KeyError: 'w1'\n"
          "[rank0]: \n"
          "[rank0]: During handling of the above exception, another exception occurred:\n"
          "[rank0]: \n"
          "[rank0]: Traceback (most recent call last):\n"
          "[rank0]:   File \"/home/u/train.py\", line 40, in <module>\n"
          "[rank0]:     main()\n"
          "[rank0]:   File \"/home/u/train.py\", line 33, in main\n"
          "[rank0]:     load('w1')\n"
          "[rank0]:   File \"/home/u/train.py\", line 7, in load\n"
          "[rank0]:     raise RuntimeError(f\"no weights {key} after 3 tries\")\n"
          "[rank0]: RuntimeError: no weights w1 after 3 tries\n"
          "[rank1]: step 8 ok\n")
B["tbctx"] = {"manifest.json": RUN(4301, cmdline=["/usr/bin/python3", "train.py"]), "output.txt": "epoch 1\n" + TB_CTX}
# the same bug in another run: other numbers in the message, other output around it
B["tbctx2"] = {"manifest.json": RUN(4302, cmdline=["/usr/bin/python3", "train.py"]),
               "output.txt": "epoch 1\nepoch 2\n" + TB_CTX.replace("3 tries", "5 tries").replace("step 7", "step 9")}
B["tbworker"] = {"manifest.json": RUN(4303, cmdline=["/usr/bin/python3", "train.py"]),
                 "output.txt": "Traceback (most recent call last):\n"
                 "  File \"/home/u/train.py\", line 12, in <module>\n"
                 "  File \"/usr/lib/python3/dist-packages/torch/_utils.py\", line 733, in reraise\n"
                 "    raise exception\n"
                 "ValueError: Caught ValueError in DataLoader worker process 2.\n" + "Original " + TB}
# terminal colors and a pty's line ends (Python 3.13 colors tracebacks on a terminal)
B["tbcolor"] = {"manifest.json": RUN(4304, cmdline=["python3.13", "-m", "pkg.train"]),
                "output.txt": "\x1b[35mTraceback (most recent call last):\x1b[0m\r\n"
                "  File \x1b[35m\"/home/u/pkg/train.py\"\x1b[0m, line \x1b[35m3\x1b[0m, in \x1b[35m<module>\x1b[0m\r\n"
                "\x1b[1;35mZeroDivisionError\x1b[0m: \x1b[35mdivision by zero\x1b[0m\r\n"}
# a traceback the job logged and went on from: not its death; the last error lines are
B["tblogged"] = {"manifest.json": RUN(4305, st=2, cmdline=["/usr/bin/python3", "serve.py"]),
                 "output.txt": "Traceback (most recent call last):\n  File \"/home/u/serve.py\", line 3, in h\n"
                 "OSError: port 8080 busy\n" + "".join("request %d done\n" % i for i in range(20)) +
                 "fatal: giving up after 20 requests\n"}
B["legacy"] = {"manifest.json": manifest(8181, None, signal=11)}
B["legacysnap"] = {"manifest.json": manifest(8182, None), "snap.json": {"format": "crashpack-snap/1", "trigger": "snap", "threads": []}}
evil = "<img src=x onerror=alert(1)> [link](http://evil) | a | # h"
deep = None
for i in range(40):
    deep = exc("pkg.E%d" % i, ["pkg.E%d" % i, "Exception"], evil, [], cause=deep)
big = exc("pkg.Big", ["pkg.Big", "Exception"], evil + "x" * 100000,
          [fr("f%d" % i, "f%d" % i, "/home/u/deep.py", i + 1) for i in range(300)], cause=deep)
B["hostile"] = {"manifest.json": manifest(9191, death("exception", trigger="hook")), "exception.json": excjson(big)}
B["badjson"] = {"manifest.json": manifest(9292, death("exception", trigger="hook")), "exception.json": "{\"format\": \"crashpack-exception/1\", \"exception\": {"}
for name, members in B.items():
    d = os.path.join(T, name)
    os.makedirs(d)
    members["capture.json"] = CAPTURE
    with open(os.path.join(d, "ORDER"), "w") as o:
        for m, v in members.items():
            fn = m.replace("/", "_")
            with open(os.path.join(d, fn), "w") as f:
                f.write(v if isinstance(v, str) else json.dumps(v))
            o.write("%s %s\n" % (m, fn))
PY
for d in "$T"/*/; do
    name=$(basename "$d")
    args=()
    while read -r m f; do args+=(--put "$m" "$d/$f"); done < "$d/ORDER"
    "$EDIT" - "$T/$name.zst" "${args[@]}" || die "bundle_edit $name"
    rc=0
    "$CP" analyze --json "$T/$name.zst" > "$T/$name.json" 2> "$T/$name.err" || rc=$?
    check "$name: analyze --json exits 0 or 1 (got $rc)" [ "$rc" -le 1 ]
    rc=0
    "$CP" analyze "$T/$name.zst" > "$T/$name.txt" 2>&1 || rc=$?
    check "$name: analyze (text) exits 0 or 1 (got $rc)" [ "$rc" -le 1 ]
    rc=0
    "$CP" report "$T/$name.zst" > "$T/$name.md" 2> "$T/$name.md.err" || rc=$?
    check "$name: report exits 0 or 1 (got $rc)" [ "$rc" -le 1 ]
done

# jq-like: J NAME EXPR -> python eval with d = the report
J() { json "$T/$1.json" "$2"; }
is() { # is NAME EXPR EXPECTED
    local got
    got=$(J "$1" "$2" 2>&1)
    if [ "$got" = "$3" ]; then ok "$1: $2 == $3"; else fail "$1: $2 is '$got', want '$3'"; fi
}
top() { J "$1" "d['diagnoses'][0]['rule'] if d['diagnoses'] else None"; }

# ---- exit 3 ----
is exit3 "d['process']['death']['kind']" exit
is exit3 "d['process']['death']['status']" 3
is exit3 "d['process']['death']['identity']" reported
is exit3 "d['process']['death']['source']" manifest
is exit3 "d['process']['signal']['number']" None
is exit3 "d['process']['crashed_tid']" None
is exit3 "d['crash_kind']" exit
is exit3 "d['exception']" None
is exit3 "[e['source'] for e in d['log']['errors']][:1]" "['output.txt']"
check "exit3: text has the death line" grep -qx 'death     exit, exit status 3, trigger run, identity reported by uid 1000' "$T/exit3.txt"
check "exit3: Markdown has the Death row" grep -q '^| Death | exit, exit status 3, trigger run, identity reported |' "$T/exit3.md"

# ---- OOM kills ----
is oomcg "d['process']['death']['kind']" oom_kill
is oomcg "d['process']['signal']['name']" SIGKILL
is oomcg "d['crash_kind']" oom_kill
is oomcg "[(k['pid'], k['scope'], k['oom_memcg'], k['own_pid']) for k in d['kernel_log']['oom_kills']]" \
    "[(5151, 'cgroup', '/crashpack-test/job1', True)]"
got=$(top oomcg); check "oomcg: top diagnosis is oom-kill-cgroup-limit (got $got)" [ "$got" = oom-kill-cgroup-limit ]
check "oomcg: the evidence names the cgroup limit" \
    grep -q 'kernel OOM killer killed this process, pid 5151 (python3): the memory cgroup limit of /crashpack-test/job1 \[CONSTRAINT_MEMCG\]' "$T/oomcg.json"
check "oomcg: Markdown title names the limit" grep -q "^# Crash report: python3 — Killed by the kernel's OOM killer: the memory cgroup's limit" "$T/oomcg.md"
is oomhost "[(k['pid'], k['scope'], k.get('oom_memcg')) for k in d['kernel_log']['oom_kills']]" "[(5152, 'global', None)]"
got=$(top oomhost); check "oomhost: top diagnosis is oom-kill-host-memory (got $got)" [ "$got" = oom-kill-host-memory ]
check "oomhost: the evidence names the host's memory" grep -q "the host's memory (global_oom)" "$T/oomhost.json"
got=$(top oomnoline); check "oomnoline: top diagnosis is oom-kill-death (got $got)" [ "$got" = oom-kill-death ]

# ---- torch.OutOfMemoryError with a cause ----
is torchoom "d['process']['death']['kind']" exception
is torchoom "d['process']['crashed_tid']" 6163
is torchoom "d['process']['crashed_tid_source']" exception
is torchoom "d['process']['signal']['number']" None
is torchoom "d['exception']['type']" torch.OutOfMemoryError
is torchoom "[(e['relation'], e['type']) for e in d['exception']['chain']]" \
    "[('raised', 'torch.OutOfMemoryError'), ('cause', 'RuntimeError')]"
is torchoom "[(e['type'], e['fatal']) for e in d['exception']['events']]" "[('ValueError', False)]"
is torchoom "d['crash_kind']" python_exception
is torchoom "d['signature']" "python exception torch.OutOfMemoryError | train.py:Trainer.step | train.py:main | train.py:<module>"
is torchoom "len(d['fingerprint'])" 16
is torchoom "'cuda_oom' in [e['category'] for e in d['log']['errors'] if e['source'] == 'exception']" True
got=$(top torchoom); check "torchoom: top diagnosis is python-cuda-oom (got $got)" [ "$got" = python-cuda-oom ]
is torchoom "'cuda-oom' in [r for x in d['diagnoses'] for r in x.get('rules') or [x['rule']]]" True  # merged into the one OOM entry (issue 23)
check "torchoom: text: the exception line" grep -q '^exception torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB' "$T/torchoom.txt"
check "torchoom: text: the raising thread" grep -q 'raised in thread 6163 (trainer), seen by threading.excepthook' "$T/torchoom.txt"
check "torchoom: text: the cause" grep -q 'caused by RuntimeError: allocator retry failed' "$T/torchoom.txt"
check "torchoom: text: a frame" grep -q 'File "/home/u/train.py", line 21, in Trainer.step' "$T/torchoom.txt"
check "torchoom: text: the non-fatal event" grep -q '^events    threading.excepthook in thread 6170 (prefetch): ValueError: bad shard 3 (non-fatal)' "$T/torchoom.txt"
check "torchoom: Markdown: the exception section" grep -q '^## Python exception' "$T/torchoom.md"
check "torchoom: Markdown: the exception row" grep -q '^| Exception | `torch.OutOfMemoryError` |' "$T/torchoom.md"
check "torchoom: Markdown: the chain in Python's order" \
    python3 - "$T/torchoom.md" <<'PY'
import sys
t = open(sys.argv[1]).read()
t = t[t.find("## Python exception"):]
a = t.find("RuntimeError: allocator retry failed")
b = t.find("The above exception was the direct cause of the following exception:")
c = t.find("torch.OutOfMemoryError: CUDA out of memory")
sys.exit(0 if 0 <= a < b < c else 1)
PY
check "torchoom: Markdown: the top diagnosis" grep -q '^# Crash report: python3 — CUDA out of memory (torch.OutOfMemoryError raised)' "$T/torchoom.md"

# ---- DataLoader worker killed by the OOM killer ----
got=$(top dlkill); check "dlkill: top diagnosis is dataloader-worker-exited-oom-killed (got $got)" [ "$got" = dataloader-worker-exited-oom-killed ]
check "dlkill: the evidence names the worker's kill and the cgroup" \
    grep -q 'kernel OOM killer killed DataLoader worker pid 7180 (python3): the memory cgroup limit of /crashpack-test/job1' "$T/dlkill.json"
is dlkill "'cuda-oom' in [r for x in d['diagnoses'] for r in x.get('rules') or [x['rule']]]" False
is dlkill "d['kernel_log']['oom_kills'][0]['own_pid']" False
is dlkill "(d['kernel_log']['oom_kills'][0]['active'], d['kernel_log']['oom_kills'][0]['window_s'])" "(True, 600)"
# two hours before the death: outside the kill's window, so no diagnosis cites it
is dlold "(d['kernel_log']['oom_kills'][0]['active'], d['kernel_log']['oom_kills'][0]['age_s'] >= 7190)" "(False, True)"
got=$(top dlold); check "dlold: an OOM kill 2 h earlier explains nothing (top: $got)" \
    bash -c "[ '$got' != dataloader-worker-exited-oom-killed ] && ! grep -q 'kernel OOM killer killed' '$T/dlold.json'"

# ---- a dataset error re-raised from a DataLoader worker ----
is dlvalue "(d['exception']['worker']['kind'], d['exception']['worker']['pid'], d['exception']['worker']['original_type'])" \
    "('DataLoader', 7281, 'ValueError')"
check "dlvalue: text: the worker line" grep -q '^worker    DataLoader worker 0 (pid 7281): ValueError' "$T/dlvalue.txt"
check "dlvalue: text: the original traceback" grep -q 'File "/home/u/dataset.py", line 9, in __getitem__' "$T/dlvalue.txt"
check "dlvalue: Markdown: the worker's traceback" grep -q '^Raised in a DataLoader worker 0 (pid 7281) as `ValueError`. Its original traceback:' "$T/dlvalue.md"

# ---- tracebacks in the output of a run death (issue 23) ----
is tbctx "(d['crash_kind'], d['exception']['source'], d['exception']['output'])" \
    "('python_exception', 'output', {'member': 'output.txt', 'line': 11})"
is tbctx "[(e['relation'], e['type'], e['message']) for e in d['exception']['chain']]" \
    "[('raised', 'RuntimeError', 'no weights w1 after 3 tries'), ('context', 'KeyError', \"'w1'\")]"
is tbctx "[(f['file'], f['line'], f['function']) for f in d['exception']['frames']]" \
    "[('/home/u/train.py', 40, '<module>'), ('/home/u/train.py', 33, 'main'), ('/home/u/train.py', 7, 'load')]"
is tbctx "d['signature']" "python exception RuntimeError | train.py:load | train.py:main | train.py:<module>"
is tbctx "(d['process']['exe'], d['process']['cmdline'])" "('/usr/bin/python3', ['/usr/bin/python3', 'train.py'])"
is tbctx "d['signature_info']['source']" output
is tbctx "[e['source'] for e in d['log']['errors']].count('exception')" 0
check "tbctx: the same bug in another run has the same fingerprint" \
    [ "$(J tbctx "d['fingerprint']")" = "$(J tbctx2 "d['fingerprint']")" ]
check "tbctx: text: where the exception was read" grep -q '^          parsed from the traceback in output.txt, line 11$' "$T/tbctx.txt"
check "tbctx: Markdown: the chain in Python's words" grep -q '^During handling of the above exception, another exception occurred:' "$T/tbctx.md"
is tbworker "(d['exception']['type'], d['exception']['worker']['kind'], d['exception']['worker']['id'], d['exception']['worker']['original_type'])" \
    "('ValueError', 'DataLoader', 2, 'ValueError')"
is tbworker "d['signature']" "python exception ValueError | train.py:<module>"
is tbcolor "(d['exception']['type'], d['exception']['message'], d['exception']['frames'][0]['line'])" \
    "('ZeroDivisionError', 'division by zero', 3)"
is tbcolor "d['signature']" "python exception ZeroDivisionError | train.py:<module>"
is tblogged "(d['crash_kind'], d['exception'])" "('exit', None)"
is tblogged "d['output']['last_lines']" "['request 19 done', 'fatal: giving up after 20 requests']"
is tblogged "d['signature']" "exit status 2 | python serve.py | request N done | fatal: giving up after N requests"
is exit3 "d['signature']" "exit status 3 | bash -c | starting | RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:N, unhandled system error"
is exit3 "(len(d['fingerprint']), d['signature_info']['source'])" "(16, 'death')"
is oomcg "d['signature']" "OOM kill | cgroup limit | python train.py"
is oomhost "d['signature']" "OOM kill | host memory | python train.py"
is oomnoline "d['signature']" "OOM kill | limit unknown | python train.py"

# ---- older bundles ----
is legacy "(d['process']['death']['kind'], d['process']['death']['trigger'], d['process']['death']['source'])" "('core', 'kernel', 'derived')"
is legacy "d['process']['death']['signal']['name']" SIGSEGV
check "legacy: no death line in the text (a kernel core)" bash -c "! grep -q '^death ' '$T/legacy.txt'"
is legacysnap "d['process']['death']['kind']" snapshot

# ---- hostile and broken exception.json ----
is hostile "len(d['exception']['chain'])" 16
is hostile "d['exception']['chain_truncated']" True
is hostile "(len(d['exception']['frames']), d['exception']['frames_truncated'])" "(256, True)"
is hostile "(len(d['exception']['message'].encode()) <= 65536, d['exception']['message_truncated'])" "(True, True)"
check "hostile: no raw '<' in the Markdown outside code" python3 - "$T/hostile.md" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
t = re.sub(r"^(`{3,})\n.*?^\1\n", "", t, flags=re.S | re.M)
t = re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", t)
sys.exit(1 if "<" in t else 0)
PY
is badjson "d['exception']" None
is badjson "d['exception_error']" "exception.json: not valid JSON"
check "badjson: a warning on stderr (--json)" grep -q 'warning: exception.json: not valid JSON' "$T/badjson.err"
check "badjson: the text says so" grep -q '^exception unusable: exception.json: not valid JSON' "$T/badjson.txt"

# ---- the contract ----
if python3 -c 'import jsonschema' 2>/dev/null; then
    check "every report validates against docs/report-schema.json" python3 - "$CP_SRC/docs/report-schema.json" "$T"/*.json <<'PY'
import json, sys
import jsonschema
schema = json.load(open(sys.argv[1]))
v = jsonschema.Draft202012Validator(schema)
bad = 0
for f in sys.argv[2:]:
    for e in list(v.iter_errors(json.load(open(f))))[:5]:
        print("%s: /%s: %s" % (f, "/".join(map(str, e.absolute_path)), e.message[:200]))
        bad = 1
sys.exit(bad)
PY
else
    echo "note: python3-jsonschema missing: the schema check is skipped"
fi
finish
