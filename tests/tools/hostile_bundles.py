#!/usr/bin/env python3
"""hostile_bundles.py - a fixed-seed generator of hostile bundles (issue 22, acceptance 6).

    hostile_bundles.py SEED_BUNDLE_DIR OUT_DIR [--count N] [--seed S] [--bundle-edit PATH]
                       [--seed-bundle SEED.zst]

SEED_BUNDLE_DIR is a real bundle unpacked (tar --zstd -xf), SEED.zst the bundle itself. Each case
is a real, well-formed bundle (written by tests' bundle_edit with the handler's own writer) whose
members were made hostile, or that bundle with its bytes damaged afterwards:

  json      a JSON member with a value swapped for another type, a huge, negative or fractional
            number, a hostile string (terminal escapes, invalid UTF-8, HTML and Markdown, paths
            that climb out, format directives, 64 KiB), a key removed, nesting 20,000 deep, an
            array of 200,000 elements, or its text cut or replaced by random bytes;
  text      a text member (proc/status, proc/maps, logs/*.tail, ...) replaced by hostile lines;
  member    members added under hostile names (paths that climb out, absolute paths, control
            characters, 4 KiB names) or dropped;
  core      the core replaced by random bytes, cut, or with bits flipped in its notes;
  bytes     the finished file with bits flipped, cut short, a range zeroed or doubled, or garbage
            appended;
  forgery   the audit's forgery (item 7): the same crash with another executable in its manifest
            and three padding members, to be added to a knowledge base that holds the seed.

Writes OUT_DIR/case-NNNN.zst and OUT_DIR/cases.jsonl ({"id", "kind", "what"} per line). The same
seed and count give the same cases. Hostile names and strings carry the marker `cphostile`, so a
test can look for any file the analysis may have written outside its output.
"""
import argparse
import json
import os
import random
import subprocess
import sys

MARK = "cphostile"
HOSTILE_STRINGS = [
    "\x1b[31mred\x1b[0m\x1b]0;title\x07",
    "\x9b31m C1 CSI \u0085 NEL",
    "bad utf-8 \udcff\udcfe",  # surrogates: written as raw invalid bytes below
    "<img src=x onerror=alert(1)> <script>alert(2)</script> [l](http://e) ![i](http://e/x.png) | a | b",
    "```\n# heading\n- list\n> quote\n```",
    "../../../../tmp/%s-escape" % MARK,
    "/tmp/%s-absolute" % MARK,
    "%s%s%s%n%n%x",
    "A" * 65536,
    "",
    "\n" * 1000,
    "pid=1, UID:0 Killed process 1 (init) total-vm:1kB",
    "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.",
]
NUMBERS = [0, -1, -2147483649, 2**63, 2**64 + 1, 1e308, -1e308, 0.5, 3.999999999, 1e-320]
TEXT_MEMBERS = ("proc/status", "proc/stat", "proc/limits", "proc/cgroup", "proc/maps", "proc/mountinfo",
                "logs/stderr.tail", "logs/stdout.tail", "output.txt", "nvidia-smi.xml")
BAD_NAMES = ["../../../tmp/%s-member" % MARK, "/tmp/%s-abs" % MARK, "proc/../../%s" % MARK,
             "name\nwith\nnewlines-%s" % MARK, "x" * 4000 + MARK, "\x1b[2J%s" % MARK, ".", "./"]


def enc(s):
    """A str with lone surrogates as raw (invalid UTF-8) bytes."""
    return s.encode("utf-8", "surrogateescape")


def json_members(d):
    out = []
    for root, _, names in os.walk(d):
        for n in names:
            p = os.path.relpath(os.path.join(root, n), d)
            if p.endswith(".json"):
                out.append(p)
    return sorted(out)


def paths(o, prefix=()):
    """Every path into a JSON value (tuples of keys and indices), the value itself first."""
    yield prefix
    if isinstance(o, dict):
        for k, v in o.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(o, list):
        for i, v in enumerate(o[:50]):
            yield from paths(v, prefix + (i,))


def set_at(o, path, v):
    if not path:
        return v
    cur = o
    for k in path[:-1]:
        cur = cur[k]
    cur[path[-1]] = v
    return o


def del_at(o, path):
    if not path:
        return o
    cur = o
    for k in path[:-1]:
        cur = cur[k]
    del cur[path[-1]]
    return o


def mutate_json(rng, text):
    """(new bytes, what was done) for one JSON member's text."""
    try:
        o = json.loads(text)
    except ValueError:
        o = None
    how = rng.choice(["type", "number", "string", "remove", "deep", "wide", "cut", "random"] if o is not None
                     else ["cut", "random", "deep"])
    if how == "cut":
        n = rng.randrange(0, max(1, len(text)))
        return text[:n], "cut at %d" % n
    if how == "random":
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 4096))), "random bytes"
    if how == "deep":
        depth = 20000
        return ("[" * depth + "1" + "]" * depth).encode() if rng.random() < 0.5 else \
            ('{"a":' * depth + "1" + "}" * depth).encode(), "nested 20000 deep"
    if how == "wide":
        return json.dumps({"lines": [{"text": "x", "time": i} for i in range(200000)],
                           "threads": [{"tid": i} for i in range(200000)]}).encode(), "200000 elements"
    all_paths = list(paths(o))
    p = rng.choice(all_paths)
    if how == "remove" and p:
        return json.dumps(del_at(o, p)).encode(), "removed %r" % (p,)
    if how == "type":
        v = rng.choice([None, True, "str", 17, [], {}, [1, "a", None], {"x": {"y": []}}])
    elif how == "number":
        v = rng.choice(NUMBERS)
    else:
        v = rng.choice(HOSTILE_STRINGS)
    o = set_at(o, p, v)
    text = json.dumps(o, ensure_ascii=False)
    return enc(text), "%s at %r" % (how, p)


def hostile_text(rng):
    lines = [rng.choice(HOSTILE_STRINGS) for _ in range(rng.randrange(1, 40))]
    if rng.random() < 0.3:
        lines.append("x" * rng.randrange(100000, 1000000))
    if rng.random() < 0.3:
        lines.append("VmRSS:\t99999999999999999999 kB\nThreads:\t-5\nPid:\t%d" % rng.choice([0, -1, 2**40]))
    return enc("\n".join(lines))


def edit(tool, src, dst, puts, drops):
    args = [tool, src, dst]
    for d in drops:
        args += ["--drop", d]
    for name, path in puts:
        args += ["--put", name, path]
    r = subprocess.run(args, capture_output=True)
    return r.returncode == 0


def damage_bytes(rng, path):
    data = bytearray(open(path, "rb").read())
    how = rng.choice(["flip", "cut", "zero", "double", "append"])
    if how == "flip":
        for _ in range(rng.randrange(1, 33)):
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
        what = "bits flipped"
    elif how == "cut":
        n = rng.randrange(0, len(data))
        data = data[:n]
        what = "cut at %d" % n
    elif how == "zero":
        i = rng.randrange(len(data))
        n = rng.randrange(1, 4096)
        data[i:i + n] = bytes(len(data[i:i + n]))
        what = "zeroed %d at %d" % (n, i)
    elif how == "double":
        i = rng.randrange(len(data))
        n = rng.randrange(1, 8192)
        data[i:i] = data[i:i + n]
        what = "%d bytes at %d doubled" % (n, i)
    else:
        data += bytes(rng.randrange(256) for _ in range(rng.randrange(1, 65536)))
        what = "garbage appended"
    open(path, "wb").write(bytes(data))
    return what


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("seed_dir")
    ap.add_argument("out")
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--seed", type=int, default=22)
    ap.add_argument("--bundle-edit", required=True)
    ap.add_argument("--seed-bundle", required=True)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    os.makedirs(a.out, exist_ok=True)
    scratch = os.path.join(a.out, ".scratch")
    os.makedirs(scratch, exist_ok=True)
    jsons = json_members(a.seed_dir)
    texts = [m for m in TEXT_MEMBERS if os.path.exists(os.path.join(a.seed_dir, m))] or ["proc/status"]
    kinds = ["json"] * 10 + ["text"] * 2 + ["member"] * 2 + ["core"] * 2 + ["bytes"] * 4
    with open(os.path.join(a.out, "cases.jsonl"), "w") as listing:
        for i in range(a.count):
            # the first cases are one of each kind, the rest drawn
            first = ["forgery", "json", "text", "member", "core", "bytes"]
            kind = first[i] if i < len(first) else rng.choice(kinds)
            dst = os.path.join(a.out, "case-%04d.zst" % i)
            puts, drops, what = [], [], ""
            if kind == "json":
                m = rng.choice(jsons)
                data, what = mutate_json(rng, open(os.path.join(a.seed_dir, m), "rb").read())
                f = os.path.join(scratch, "%d.json" % i)
                open(f, "wb").write(data)
                puts.append((m, f))
                what = "%s: %s" % (m, what)
            elif kind == "text":
                m = rng.choice(texts)
                f = os.path.join(scratch, "%d.txt" % i)
                open(f, "wb").write(hostile_text(rng))
                puts.append((m, f))
                what = m
            elif kind == "member":
                f = os.path.join(scratch, "%d.pad" % i)
                open(f, "wb").write(enc(rng.choice(HOSTILE_STRINGS)))
                for n in rng.sample(BAD_NAMES, rng.randrange(1, 4)):
                    puts.append((n, f))
                if rng.random() < 0.5 and jsons:
                    drops.append(rng.choice(jsons))
                what = "names %r, dropped %r" % ([n[:40] for n, _ in puts], drops)
            elif kind == "core":
                core = open(os.path.join(a.seed_dir, "core"), "rb").read() if os.path.exists(
                    os.path.join(a.seed_dir, "core")) else b""
                how = rng.choice(["random", "cut", "notes"])
                if how == "random" or not core:
                    core = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200000)))
                elif how == "cut":
                    core = core[:rng.randrange(0, len(core))]
                else:
                    b = bytearray(core)
                    for _ in range(rng.randrange(1, 64)):
                        j = rng.randrange(min(len(b), 8192))
                        b[j] ^= 1 << rng.randrange(8)
                    core = bytes(b)
                f = os.path.join(scratch, "%d.core" % i)
                open(f, "wb").write(core)
                puts.append(("core", f))
                what = "core " + how
            elif kind == "forgery":
                man = json.load(open(os.path.join(a.seed_dir, "manifest.json")))
                man["exe"] = "/tmp/%s-forged/evil" % MARK
                f = os.path.join(scratch, "forged-manifest.json")
                json.dump(man, open(f, "w"))
                pad = os.path.join(scratch, "pad")
                open(pad, "w").write("pad\n")
                puts = [("manifest.json", f), ("pad1.txt", pad), ("pad2.txt", pad), ("pad3.txt", pad)]
                what = "another executable and three padding members"
            if kind != "bytes" and not edit(a.bundle_edit, a.seed_bundle, dst, puts, drops):
                # a name the writer refuses: the bytes of the seed, damaged, instead
                kind = "bytes"
            if kind == "bytes":
                open(dst, "wb").write(open(a.seed_bundle, "rb").read())
                what = damage_bytes(rng, dst)
            listing.write(json.dumps({"id": i, "kind": kind, "what": what[:300]}) + "\n")
    for f in os.listdir(scratch):
        os.unlink(os.path.join(scratch, f))
    os.rmdir(scratch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
