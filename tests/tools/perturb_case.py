#!/usr/bin/env python3
"""perturb_case.py - the real cases' excerpts, perturbed the way another run of the same failure
differs (issue 24, acceptance 2), with a fixed seed: other paths (the file name kept), numbers,
hex addresses, ranks, timestamps, IP addresses and ports, and the lines of interleaved ranks in
another order. What makes the failure (the words of its messages) is never touched.

Usage: perturb_case.py [--seed N] [--all] CASES_DIR OUT_DIR
  writes OUT_DIR/<id>/{manifest.json,capture.json,output.txt,case.json} for each held-out case
  (--all: every case), the members tests/e2e/test_cases.sh builds a case's bundle from, with the
  perturbed excerpt as output.txt; prints how many cases were written and how many changed.
"""
import glob
import hashlib
import json
import os
import random
import re
import sys

PATH = re.compile(r"(?<![\w.])(?:~|\.{1,2})?/[\w.+@-]+(?:/[\w.+@-]+)+|(?<![\w./])[\w.-]+(?:/[\w.+@-]+){2,}")
HEX = re.compile(r"\b0x[0-9a-fA-F]+\b")
TIME = re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?)?|\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b")
IP = re.compile(r"\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}(?::\d+)?\b")
RANK = re.compile(r"(?i)(\brank\s*[:=#]?\s*|\[rank|\[default|local_rank[=:\s]*)(\d+)")
NUM = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.]*[A-Za-z_])")
RANK_LINE = re.compile(r"^\s*(?:\[(?:rank|default)\d+\]|rank\s*\d+\s*:)", re.I)


def other_path(rnd, m):
    p = m.group(0)
    base = p.rstrip("/").split("/")[-1]
    dirs = ["home/%s" % rnd.choice(["ann", "bo", "chen", "dev7"]), rnd.choice(["scratch", "data", "mnt/fs1"]),
            "%s%d" % (rnd.choice(["job", "exp", "run"]), rnd.randint(1, 999))]
    return "/" + "/".join(dirs[:rnd.randint(2, 3)]) + "/" + base


def other_number(rnd, s):
    if "." in s:
        a, b = s.split(".", 1)
        return "%d.%0*d" % (rnd.randint(0, 10 ** len(a) - 1), len(b), rnd.randint(0, 10 ** len(b) - 1))
    lo = 10 ** (len(s) - 1) if len(s) > 1 else 0
    return str(rnd.randint(lo, 10 ** len(s) - 1))


def perturb_line(rnd, line, rankmap):
    # placeholders first, so that later patterns do not see inside what was replaced
    out, keep = line, []

    def hold(text):
        keep.append(text)
        k, tag = len(keep) - 1, ""
        while True:  # letters only: the number pattern must not see the index
            tag += chr(ord("a") + k % 26)
            k //= 26
            if not k:
                return "\0" + tag + "\0"

    out = TIME.sub(lambda m: hold("2027-%02d-%02d %02d:%02d:%02d" % (rnd.randint(1, 12), rnd.randint(1, 28),
                                                                        rnd.randint(0, 23), rnd.randint(0, 59),
                                                                        rnd.randint(0, 59))
                                  if "-" in m.group(0) else
                                  "%02d:%02d:%02d" % (rnd.randint(0, 23), rnd.randint(0, 59), rnd.randint(0, 59))), out)
    out = IP.sub(lambda m: hold("10.%d.%d.%d" % (rnd.randint(0, 255), rnd.randint(0, 255), rnd.randint(1, 254)) +
                                (":%d" % rnd.randint(1024, 65535) if ":" in m.group(0) else "")), out)
    out = PATH.sub(lambda m: hold(other_path(rnd, m)), out)
    out = HEX.sub(lambda m: hold("0x" + "".join(rnd.choice("0123456789abcdef") for _ in m.group(0)[2:])), out)
    out = RANK.sub(lambda m: hold(m.group(1) + str(rankmap.setdefault(m.group(2), len(rankmap) + rnd.randint(1, 7)))), out)
    out = NUM.sub(lambda m: other_number(rnd, m.group(0)), out)
    return re.sub(r"\0([a-z]+)\0", lambda m: keep[sum((ord(ch) - 97) * 26 ** i for i, ch in enumerate(m.group(1)))], out)


def perturb(text, seed):
    rnd = random.Random(seed)
    rankmap = {}
    lines = [perturb_line(rnd, l, rankmap) for l in text.split("\n")]
    # interleaved ranks: each run of rank-prefixed lines in another order
    i = 0
    while i < len(lines):
        j = i
        while j < len(lines) and RANK_LINE.match(lines[j]):
            j += 1
        if j - i > 1:
            block = lines[i:j]
            rnd.shuffle(block)
            lines[i:j] = block
        i = max(j, i + 1)
    return "\n".join(lines)


def bundle_members(d, c, excerpt, n):
    os.makedirs(d)
    m = {"format": "crashpack-manifest/1", "crashpack_version": "0.1.0",
         "host": {"hostname": "node7", "kernel": "6.1.0", "machine": "x86_64"},
         "time": 1796156531 + n, "pid": 7000 + n, "uid": 1000, "gid": 1000, "exe": "/usr/bin/python3",
         "comm": "python3", "cmdline": ["/usr/bin/python3", "train.py"], "cwd": "/home/u", "cgroup": "/job1",
         "capture": {"mode": "meta", "trigger": "run"},
         "death": {"kind": "exit", "signal": None, "status": 1, "trigger": "run", "reason": None,
                   "identity": "reported", "reported_by_uid": 1000, "job": "job-1"}}
    json.dump(m, open(os.path.join(d, "manifest.json"), "w"))
    json.dump({"format": "crashpack-capture/1", "status": "ok", "mode": {"requested": "meta", "effective": "meta"},
               "steps": []}, open(os.path.join(d, "capture.json"), "w"))
    open(os.path.join(d, "output.txt"), "w").write(excerpt)
    json.dump(c, open(os.path.join(d, "case.json"), "w"))


def main(argv):
    seed, every = 24, False
    while argv and argv[0].startswith("--"):
        if argv[0] == "--seed":
            seed = int(argv[1])
            argv = argv[2:]
        elif argv[0] == "--all":
            every = True
            argv = argv[1:]
        else:
            sys.exit(__doc__)
    if len(argv) != 2:
        sys.exit(__doc__)
    src, out = argv
    n = changed = 0
    for path in sorted(glob.glob(os.path.join(src, "*", "*.json"))):
        c = json.load(open(path))
        if not every and not c.get("held_out"):
            continue
        s = int(hashlib.sha1(("%d:%s" % (seed, c["id"])).encode()).hexdigest()[:8], 16)
        p = perturb(c["excerpt"], s)
        changed += p != c["excerpt"]
        bundle_members(os.path.join(out, c["id"]), c, p, n)
        n += 1
    print("%d cases, %d perturbed" % (n, changed))


if __name__ == "__main__":
    main(sys.argv[1:])
