#!/usr/bin/env python3
"""layout.py - the layout rules of crashpack's tree, checked (tests/unit/test_layout.sh runs it).

  1. Library code (the folders in LIB_DIRS, but for the programs' main files) never calls exit(),
     printf(), puts(), perror(), never names stdout or stderr, and calls _exit() only in a forked
     child listed in EXIT_OK (file:function, with the reason). Comments and string literals are not
     looked at.
  2. Every top-level folder and every analyze/ subfolder has a README.md.
  3. Include direction: each product folder's README.md has a line
         May include: `common/`, `bundle/`, ...        (or: May include: every folder)
     and no .c or .h of the folder includes a header of a folder not named there. A header is
     known by its name (the tree has one header of each name).
  4. The SQL engine stays behind the knowledge base: no "sqlite3" in a .c or .h outside db/ and
     tests/.
  5. No function of the product code is longer than MAX_LINES lines (Universal Ctags measures
     them), unless it is on the allow-list tests/unit/long-functions.txt with at most its length
     there. The list may only shrink: a listed function that grew, or that is now short enough (or
     gone), is an error until its line is changed or removed.

Usage: layout.py [SOURCE_DIR]     check the tree (default: the one this script is in); exit 0 or 1
       layout.py --self-test      plant a bad include, a long function and an engine header in a
                                  copy of the tree and expect each to be caught
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

LIB_DIRS = ["bundle", "common", "capture", "node", "analyze", "render", "rules", "db"]
# the folders whose includes are checked (every folder of product C code)
CODE_DIRS = LIB_DIRS + ["cli", "server"]
NOT_PRODUCT = ("tests/", "fixtures/", "scripts/", "bench/")
MAIN_FILES = {"capture/main.c"}
MAX_LINES = 80
ALLOW_FILE = "tests/unit/long-functions.txt"

# _exit() is right only in a forked child (no atexit handlers, no stdio flush of the parent's
# buffers). file:function  reason
EXIT_OK = """
capture/enrich.c:child                   forked enricher child: drops to the crashed uid, execs
capture/enrich.c:kill_group              forked child that sends SIGKILL as the crashed uid
capture/publish.c:publish_post_command   forked child that execs the post command
capture/logs.c:child                     forked child that reads logs as the crashed uid
capture/checkpoint.c:collect_child       forked child that looks for checkpoints as the crashed uid
capture/checkpoint.c:verdict_child       forked child that execs the checkpoint verifier
capture/smi.c:supervise                  forked supervisor of nvidia-smi
analyze/native/sandbox.c:child           forked sandbox child running the analysis of untrusted input
node/snap.c:spawn_capture                forked child that execs crashpack-capture
node/snap.c:run_stopper                  forked child that stops the process and writes its core
node/capreq.c:capreq_event               forked child that execs crashpack-capture --event
node/run.c:job_child                     forked child of run that sets up and execs the job (CMD)
node/run.c:spawn_report                  forked reporter child of run: its exit status is the result
node/agent_kmsg.c:smi_now                forked child of the agent that execs nvidia-smi
node/agent.c:start_worker                forked worker of the agent: one request's capture or query
node/agent.c:start_oom_worker            forked worker of the agent: one OOM kill's capture
"""


def tracked(src):
    """The tree's files: git's list (tracked and new), else every file."""
    try:
        out = subprocess.run(["git", "-C", src, "ls-files", "--cached", "--others", "--exclude-standard"],
                             capture_output=True, text=True, check=True).stdout.split("\n")
        files = [f for f in out if f and os.path.exists(os.path.join(src, f))]
        if files:
            return files
    except (OSError, subprocess.CalledProcessError):
        pass
    files = []
    for root, dirs, names in os.walk(src):
        dirs[:] = [d for d in dirs if not d.startswith(".") and not d.startswith("build")]
        for n in names:
            files.append(os.path.relpath(os.path.join(root, n), src))
    return files


def folder_of(path):
    p = path.split("/")
    if len(p) > 2 and p[0] == "analyze":
        return p[0] + "/" + p[1]
    return p[0] if len(p) > 1 else "."


def strip_c(text):
    """The C text with comments and string/char literals blanked (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (min(j, n) - i - 1) + (c if j < n else ""))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def check_library(src, files, errs):
    allowed = {line.split()[0] for line in EXIT_OK.splitlines() if line.strip()}
    bad_call = re.compile(r"(?<![\w.>])(exit|printf|vprintf|puts|putchar|perror)\s*\(")
    bad_name = re.compile(r"(?<![\w.>])(stdout|stderr)\b")
    exit_call = re.compile(r"(?<![\w.>])_exit\s*\(")
    fn_head = re.compile(r"\b(\w+)\s*\(")
    n = 0
    for path in files:
        if folder_of(path).split("/")[0] not in LIB_DIRS or not path.endswith((".c", ".h")):
            continue
        if path in MAIN_FILES:
            continue
        n += 1
        fn = None
        text = open(os.path.join(src, path), errors="replace").read()
        for no, line in enumerate(strip_c(text).split("\n"), 1):
            if line[:1].isalpha() or line[:1] == "_":  # a top-level line: maybe a function's head
                names = [m for m in fn_head.findall(line) if m != "__attribute__"]
                if names:
                    fn = names[0]
            for rx, what in ((bad_call, "call"), (bad_name, "name")):
                m = rx.search(line)
                if m:
                    errs.append(f"{path}:{no}: {what} `{m.group(1)}' in library code (return an error, "
                                f"take a FILE *)")
            if exit_call.search(line) and f"{path}:{fn}" not in allowed:
                errs.append(f"{path}:{no}: _exit() in {fn}, not a listed forked child (EXIT_OK in "
                            f"tests/unit/layout.py)")
    return n


def check_readmes(src, files, errs):
    folders = {f.split("/")[0] for f in files if "/" in f}
    folders |= {"/".join(f.split("/")[:2]) for f in files if f.startswith("analyze/") and f.count("/") >= 2}
    for d in sorted(folders):
        if d.startswith(".") or not os.path.isdir(os.path.join(src, d)):
            continue
        if not os.path.isfile(os.path.join(src, d, "README.md")):
            errs.append(f"{d}/: no README.md (what it is, what it may include, what it must never include)")


def may_include(src, folder, known):
    """The folders a folder's README allows it to include (its `May include:` line, with the lines
    that continue it, up to a blank line or the next sentence of its own); None when it has none."""
    path = os.path.join(src, folder, "README.md")
    if not os.path.isfile(path):
        return None
    lines = open(path, errors="replace").read().split("\n")
    for i, line in enumerate(lines):
        m = re.match(r"\s*(?:-\s*)?\**May include:\**\s*(.*)", line)
        if not m:
            continue
        text = m.group(1)
        for more in lines[i + 1:]:
            if not more.strip() or more.lstrip().startswith(("- ", "Must", "Library")):
                break
            text += " " + more
        text = re.split(r"\bMust\b", text)[0]
        if re.match(r"every folder", text):
            return set(known)
        return set(re.findall(r"`([a-z]+(?:/[a-z]+)?)/", text))
    return None


def check_includes(src, files, errs):
    headers = {}
    for f in files:
        if f.endswith(".h") and not f.startswith(NOT_PRODUCT):
            headers.setdefault(os.path.basename(f), folder_of(f))
    code = [f for f in files if f.endswith((".c", ".h")) and folder_of(f).split("/")[0] in CODE_DIRS]
    known = {folder_of(f) for f in code}
    rules = {}
    for d in sorted(known):
        rules[d] = may_include(src, d, known)
        if rules[d] is None:
            errs.append(f"{d}/README.md: no `May include:` line (the folders its code may include)")
    inc = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
    for f in code:
        d = folder_of(f)
        ok = rules.get(d) or set()
        for m in inc.finditer(open(os.path.join(src, f), errors="replace").read()):
            owner = headers.get(os.path.basename(m.group(1)))
            if owner and owner != d and owner not in ok:
                errs.append(f"{f}: includes \"{m.group(1)}\" of {owner}/, which {d}/README.md does not "
                            f"allow (May include: {', '.join(sorted(ok)) or 'nothing'})")


def check_engine(src, files, errs):
    for f in files:
        if not f.endswith((".c", ".h")) or f.startswith(("db/", "tests/")):
            continue
        for no, line in enumerate(open(os.path.join(src, f), errors="replace"), 1):
            if "sqlite3" in line:
                errs.append(f"{f}:{no}: `sqlite3` outside db/: the engine stays behind struct kb (db/kb.h)")


def function_lengths(src, files):
    code = [f for f in files if f.endswith((".c", ".h")) and not f.startswith(NOT_PRODUCT) and "/" in f]
    if not code:
        return {}
    try:
        out = subprocess.run(["ctags", "-x", "--c-kinds=f", "--fields=+ne", "--_xformat=%{line} %{end} %N %F"]
                             + code, cwd=src, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise SystemExit(f"layout: Universal Ctags is needed to measure functions (scripts/deps.sh installs "
                         f"universal-ctags): {e}")
    lengths = {}
    for line in out.splitlines():
        p = line.split(" ", 3)
        if len(p) == 4 and p[0].isdigit() and p[1].isdigit():
            key = (p[3], p[2])
            lengths[key] = max(lengths.get(key, 0), int(p[1]) - int(p[0]) + 1)
    return lengths


def check_lengths(src, files, errs):
    allow = {}
    path = os.path.join(src, ALLOW_FILE)
    if os.path.isfile(path):
        for no, line in enumerate(open(path), 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            p = line.split()
            if len(p) != 3 or not p[2].isdigit():
                errs.append(f"{ALLOW_FILE}:{no}: expected FILE FUNCTION LINES")
                continue
            allow[(p[0], p[1])] = int(p[2])
    lengths = function_lengths(src, files)
    for (f, fn), n in sorted(lengths.items()):
        if n <= MAX_LINES:
            continue
        if (f, fn) not in allow:
            errs.append(f"{f}: {fn}() is {n} lines, over {MAX_LINES}: split it (the allow-list "
                        f"{ALLOW_FILE} only shrinks)")
        elif n > allow[(f, fn)]:
            errs.append(f"{f}: {fn}() grew to {n} lines ({ALLOW_FILE} allows {allow[(f, fn)]})")
    for (f, fn), n in sorted(allow.items()):
        now = lengths.get((f, fn))
        if now is None or now <= MAX_LINES:
            errs.append(f"{ALLOW_FILE}: {f} {fn} is {'gone' if now is None else f'{now} lines now'}: "
                        f"remove its line")
        elif now < n:
            errs.append(f"{ALLOW_FILE}: {f} {fn} is {now} lines now: lower its line to {now}")
    return len(allow)


def check(src):
    files = tracked(src)
    errs = []
    nlib = check_library(src, files, errs)
    check_readmes(src, files, errs)
    check_includes(src, files, errs)
    check_engine(src, files, errs)
    nallow = check_lengths(src, files, errs)
    return errs, nlib, nallow


def self_test():
    """Each planted violation in a copy of this tree must be reported."""
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    files = [f for f in tracked(here) if f.split("/")[0] in CODE_DIRS + ["tests"] or "/" not in f]
    fails = 0
    plants = [
        ("a capture header in analyze/", "analyze/hang/hang.c", '#include "config.h"\n',
         r"analyze/hang/hang\.c: includes \"config\.h\" of capture/"),
        ("a long function", "render/util.c", "int layout_planted(void)\n{\n" + "    (void)0;\n" * 90 + "    return 0;\n}\n",
         r"render/util\.c: layout_planted\(\) is \d+ lines"),
        ("a listed long function that grew", None, None, r": \w+\(\) grew to \d+ lines"),
        ("the engine outside db/", "cli/cmd_db.c", "#include <sqlite3.h>\n", r"cli/cmd_db\.c:\d+: `sqlite3` outside db/"),
        ("a printf in library code", "rules/diagnose.c", "static void planted(void) { printf(\"x\"); }\n",
         r"rules/diagnose\.c:\d+: call `printf'"),
    ]
    for what, target, text, expect in plants:
        with tempfile.TemporaryDirectory() as tmp:
            for f in files:
                os.makedirs(os.path.join(tmp, os.path.dirname(f)), exist_ok=True)
                shutil.copy2(os.path.join(here, f), os.path.join(tmp, f))
            if text is None:  # grow the first listed function by a line, inside its body
                listed = [l.split() for l in open(os.path.join(here, ALLOW_FILE)) if l.strip() and l[0] != "#"]
                if not listed:
                    print(f"ok: self-test: {what}: the allow-list is empty")
                    continue
                target, fn = listed[0][0], listed[0][1]
                t = open(os.path.join(tmp, target)).read()
                m = re.search(r"\b" + fn + r"\([^;{]*\)\s*\{\n", t)
                open(os.path.join(tmp, target), "w").write(t[:m.end()] + "    (void)0;\n" + t[m.end():])
            else:
                with open(os.path.join(tmp, target), "a") as out:
                    out.write(text)
            errs, _, _ = check(tmp)
            if any(re.search(expect, e) for e in errs):
                print(f"ok: self-test: {what} is caught")
            else:
                print(f"FAIL: self-test: {what} was not caught; got: {errs[:5]}")
                fails += 1
    return fails


def main():
    if sys.argv[1:] == ["--self-test"]:
        return 1 if self_test() else 0
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    errs, nlib, nallow = check(src)
    for e in errs:
        print(e)
    if errs:
        return 1
    print(f"layout: ok ({nlib} library files; {nallow} functions over {MAX_LINES} lines on the allow-list)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
