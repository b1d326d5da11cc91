#!/bin/bash
# test_layout.sh - the layout rules that grep can check (issue 12):
#   1. library code (bundle/ common/ capture/ analyze/ node/ rules/ db/, except the programs'
#      main files) never calls exit(), printf(), puts(), perror(), never names stdout or stderr,
#      and calls _exit() only in a forked child listed in EXIT_OK below (file:function, with the
#      reason);
#      comments and string literals are not looked at;
#   2. every top-level folder and every analyze/ subfolder has a README.md.
# Usage: test_layout.sh [SOURCE_DIR] (default: the tree this script is in). Exit 0 or 1.
set -u
src=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$src" || exit 1

LIB_DIRS="bundle common capture analyze node rules db"
# The programs' main files: they own the process, its stdout/stderr and its exit status.
MAIN_FILES="capture/main.c"
# _exit() is right only in a forked child (no atexit handlers, no stdio flush of the parent's
# buffers). file:function  reason
EXIT_OK='
capture/enrich.c:child                   forked enricher child: drops to the crashed uid, execs
capture/enrich.c:kill_group              forked child that sends SIGKILL as the crashed uid
capture/publish.c:publish_post_command   forked child that execs the post command
capture/logs.c:child                     forked child that reads logs as the crashed uid
capture/checkpoint.c:collect_child       forked child that looks for checkpoints as the crashed uid
capture/checkpoint.c:verdict_child       forked child that execs the checkpoint verifier
capture/smi.c:supervise                  forked supervisor of nvidia-smi
analyze/native/sandbox.c:child           forked sandbox child running the analysis of untrusted input
node/snap.c:spawn_capture                forked child that execs crashpack-capture
node/snap.c:snap_pid                     forked child that stops the process and writes its core
node/capreq.c:capreq_event               forked child that execs crashpack-capture --event
node/run.c:job_child                     forked child of run that sets up and execs the job (CMD)
node/run.c:spawn_report                  forked reporter child of run: its exit status is the result
node/agent.c:smi_now                     forked child of the agent that execs nvidia-smi
'

fail=0
# shellcheck disable=SC2086
files=$(git ls-files -- $(for d in $LIB_DIRS; do echo "$d/*.c" "$d/*.h"; done) 2>/dev/null)
[ -n "$files" ] || files=$(find $LIB_DIRS -name '*.[ch]' | sort)
lib=()
for f in $files; do
    case " $MAIN_FILES " in *" $f "*) continue ;; esac
    lib+=("$f")
done

out=$(EXIT_OK="$EXIT_OK" python3 - "${lib[@]}" <<'PY'
import os, re, sys

allowed = set()
for line in os.environ["EXIT_OK"].splitlines():
    if line.strip():
        allowed.add(line.split()[0])

def strip(text):
    """The C text with comments and string/char literals blanked (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j])); i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i)); i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (min(j, n) - i - 1) + (c if j < n else "")); i = j + 1
        else:
            out.append(c); i += 1
    return "".join(out)

bad_call = re.compile(r"(?<![\w.>])(exit|printf|vprintf|puts|putchar|perror)\s*\(")
bad_name = re.compile(r"(?<![\w.>])(stdout|stderr)\b")
exit_call = re.compile(r"(?<![\w.>])_exit\s*\(")
fn_head = re.compile(r"\b(\w+)\s*\(")
for path in sys.argv[1:]:
    fn = None
    for no, line in enumerate(strip(open(path, errors="replace").read()).split("\n"), 1):
        if line[:1].isalpha() or line[:1] == "_":  # a top-level line: maybe a function's head
            names = [m for m in fn_head.findall(line) if m != "__attribute__"]
            if names:
                fn = names[0]
        for rx, what in ((bad_call, "call"), (bad_name, "name")):
            m = rx.search(line)
            if m:
                print(f"{path}:{no}: {what} `{m.group(1)}' in library code (return an error, "
                      f"take a FILE *)")
        if exit_call.search(line) and f"{path}:{fn}" not in allowed:
            print(f"{path}:{no}: _exit() in {fn}, not a listed forked child (EXIT_OK in "
                  f"tests/unit/test_layout.sh)")
PY
)
if [ -n "$out" ]; then
    echo "$out"
    fail=1
fi

for d in $(git ls-files 2>/dev/null | grep / | cut -d/ -f1 | sort -u) \
    $(git ls-files analyze 2>/dev/null | awk -F/ 'NF > 2 {print $1 "/" $2}' | sort -u); do
    [ -d "$d" ] || continue
    case $d in .*) continue ;; esac # hidden folders (.ci) are tooling
    if [ ! -f "$d/README.md" ]; then
        echo "$d/: no README.md (what it is, what it may include, what it must never include)"
        fail=1
    fi
done

[ "$fail" = 0 ] && echo "layout: ok (${#lib[@]} library files)"
exit $fail
