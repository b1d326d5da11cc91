#!/usr/bin/env python3
"""hostile_stacks.py - writes a hostile copy of a bundle's stacks.json (the enrich output,
crashpack-stacks/1): the large inputs of issue 16, item 10, for `crashpack analyze` and `report`.

Usage: hostile_stacks.py KIND IN OUT       (KIND: one of the names below; `list` prints them)

  frames-N     the crashed thread's frames repeated until it has N frames (indexes counting up,
               pcs distinct): frames-100000 is issue 16's 100k-frame stacks.json
  threads-N    the crashed thread repeated until there are N threads (tids counting up), each
               with its own pcs, so no two stacks are equal
"""
import copy
import json
import sys


def crashed(d):
    ts = d["native"]["threads"]
    return next((t for t in ts if t.get("crashed")), ts[0])


def frames(d, n):
    t = crashed(d)
    tmpl = t["frames"] or [{"index": 0, "pc": "0x1000", "function": "f"}]
    out = []
    for k in range(n):
        f = copy.copy(tmpl[k % len(tmpl)])
        f["index"] = k
        f["pc"] = "0x%x" % (0x10000000 + 16 * k)
        out.append(f)
    t["frames"] = out
    return d


def threads(d, n):
    t = crashed(d)
    out = [t]
    for k in range(1, n):
        u = copy.deepcopy(t)
        u["tid"] = t["tid"] + 100000 + k
        u["crashed"] = False
        for i, f in enumerate(u["frames"]):
            f["pc"] = "0x%x" % (0x20000000 + 4096 * k + 16 * i)
        out.append(u)
    d["native"]["threads"] = out
    d["native"]["core"]["threads"] = n
    return d


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "list":
        print("frames-100000 threads-20000")
        return
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    kind, src, dst = sys.argv[1:]
    d = json.load(open(src))
    if kind.startswith("frames-") and kind[7:].isdigit():
        d = frames(d, int(kind[7:]))
    elif kind.startswith("threads-") and kind[8:].isdigit():
        d = threads(d, int(kind[8:]))
    else:
        sys.exit("hostile_stacks.py: unknown kind " + kind)
    with open(dst, "w") as f:
        json.dump(d, f)


main()
