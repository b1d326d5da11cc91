#!/usr/bin/env python3
"""compare_bt.py - compare crashpack's unwinding of a core with gdb's (issue 4, acceptance 1 and 2).

Subcommands:
  frames   one core: gdb's `thread apply all bt` text (the reference) against a crashpack report
           (`crashpack analyze --json`) or, as a stand-in while the unwinder is missing, eu-stack's
           `-i -s` output. Prints per-thread mismatches and a one-line summary, appends the figures
           as one JSON line to --stats, exits 1 when the core fails its own checks.
  total    sums the --stats lines of a run: exits 1 when fewer than --min-percent of all frames match.
  inline   acceptance 2: for the crashed thread of a report, each physical frame in --binary: its
           inline chain (the inline:true frames before it) and every file:line against
           `addr2line -i -f -C` at the module-relative address (pc - modules[].bias, minus 1 for a
           return address), on the binary or its separate debug file.
  foreign  acceptance 3: every frame a local report named is named the same in a foreign one.
  same-threads  two gdb outputs (a core and its reordered copy) show the same stacks per tid.
  selftest / normalize  check the rules on hand-made input / print a name's canonical form.

Matching rule (issue 4, acceptance 1):
  * Threads are matched by tid (gdb's "LWP N").
  * Frames are compared by position, innermost first. The denominator is gdb's frames (up to the cap:
    when crashpack says it dropped frames of a thread, only as many gdb frames as crashpack kept).
  * Equal = same symbol after normalization: parameters, return types, symbol versions (@GLIBC_..),
    clone suffixes (.constprop.N, .isra.N, .part.N, .cold, [clone ...]) and spacing are removed from
    both names, then names in one group of bt_aliases.txt count as one (raise = gsignal = __GI_raise).
  * gdb's "??" (no symbol) is matched by any crashpack frame at that position, named or not: crashpack
    is not penalized for naming what gdb could not. When both have a pc, they must agree within 1
    (return address vs. return address - 1).
  * Frames gdb synthesizes from DWARF call-site data (its "tailcall" frames, e.g.
    __pthread_kill_internal between __pthread_kill_implementation and raise) are not on the stack, so
    no CFI unwinder can find them: they are left out of the comparison unless crashpack shows the
    same function at that position. Their kinds come from gdb itself (gdb_frames.py, --gdb-frames).
  * Extra crashpack frames after gdb's last frame (gdb stops at main; past-main is off) are ignored.
  * Per core: the crashed thread (truth: --crashed-tid, the first NT_PRSTATUS of the kernel's core)
    must be crashpack's process.crashed_tid and its only thread with crashed: true, and its first
    --top (10) frames must all match. Over the whole set: >= --min-percent (99) of all frames match.
"""
import argparse
import json
import os
import re
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# ---------------------------------------------------------------- name normalization

CLONE_RE = re.compile(r"(\.(constprop|isra|part|cold|lto_priv|localalias|clone)(\.\d+)*)+$")
CLONE_BRACKET_RE = re.compile(r"\s*\[clone [^\]]*\]")
VERSION_RE = re.compile(r"@@?[A-Za-z0-9_.]+$")
OPERATOR_RE = re.compile(r"operator\s*(\(\)|\[\]|<<=?|>>=?|->\*?|[-+*/%^&|~!=<>,]=?|&&|\|\||\+\+|--|"
                         r"new(\[\])?|delete(\[\])?|\"\"\s*\w+|[A-Za-z_][\w:<>* &]*)?")
QUALS = ("const", "volatile", "&", "&&", "noexcept")


def _split_top(s):
    """Yields (index, char, depth, opaque) over s; an `operator...` token is opaque, at its depth."""
    depth = 0
    i = 0
    while i < len(s):
        if s.startswith("operator", i) and (i == 0 or not (s[i - 1].isalnum() or s[i - 1] == "_")):
            m = OPERATOR_RE.match(s, i)
            j = m.end() if m else i + 8
            for k in range(i, j):
                yield k, s[k], depth, True
            i = j
            continue
        c = s[i]
        if c in "<({[":
            yield i, c, depth, False
            depth += 1
        elif c in ">)}]":
            depth = max(0, depth - 1)
            yield i, c, depth, False
        else:
            yield i, c, depth, False
        i += 1


def strip_params(name):
    """'ns::f<int>(int, char) const' -> 'ns::f<int>'; '(anonymous namespace)::g(int)' -> '...::g'."""
    s = name.strip()
    for _ in range(3):  # trailing qualifiers, then the parameter list
        changed = False
        for q in QUALS:
            if s.endswith(" " + q) or (q in ("&", "&&") and s.endswith(")" + q)):
                s = s[: len(s) - len(q)].rstrip()
                changed = True
        if not changed:
            break
    if not s.endswith(")"):
        return s
    # the '(' that opens the last top-level group, unless it is part of `operator()`
    start = None
    for i, c, d, op in _split_top(s):
        if c == "(" and d == 0 and not op:
            start = i
    if start is None or start == 0:
        return s
    head = s[:start].rstrip()
    if head.endswith("operator") or head.endswith("::") or head == "":
        return s
    return head


def strip_return_type(name):
    """'int ns::f<int>' -> 'ns::f<int>' (demangled template functions carry their return type)."""
    cuts = [i for i, c, d, op in _split_top(name)
            if c == " " and d == 0 and not op and not name.startswith("<", i + 1)]
    if not cuts:
        return name
    return name[cuts[-1] + 1:]


def squeeze(s):
    s = re.sub(r"\s+", " ", s)
    s = re.sub(r"\s*([<>,*&()\[\]{}])\s*", r"\1", s)
    return s.replace("operator<<<", "operator<< <")


def normalize(name):
    """A frame's function name for comparison; None when there is none ('??', empty)."""
    if name is None:
        return None
    s = str(name).strip()
    if s in ("", "??", "<unknown>", "(null)"):
        return None
    if s == "<signal handler called>":
        return "<signal_handler_called>"
    s = CLONE_BRACKET_RE.sub("", s)
    s = VERSION_RE.sub("", s)
    s = strip_params(s)
    s = CLONE_RE.sub("", s)
    s = strip_return_type(s)
    s = CLONE_RE.sub("", s)
    return squeeze(s)


def load_aliases(path):
    canon = {}
    with open(path) as fh:
        for line in fh:
            line = line.split("#", 1)[0].split()
            if not line:
                continue
            for n in line:
                canon[n] = line[0]
    return canon


ALIASES = {}


def canonical(name):
    n = normalize(name)
    if n is None:
        return None
    return ALIASES.get(n, n)


# ---------------------------------------------------------------- gdb's bt text

THREAD_RE = re.compile(r"^Thread (\d+) \(.*?LWP (\d+)\)")
FRAME_RE = re.compile(r"^#(\d+)\s+(?:(0x[0-9a-fA-F]+) in )?(.*)$")
AT_RE = re.compile(r" at (\S+):(\d+)$")
FROM_RE = re.compile(r" from (\S+)$")


def gdb_name(rest):
    """The function name at the start of a gdb frame line's text (before ' (args)')."""
    if rest.startswith("<signal handler called>"):
        return "<signal handler called>"
    for i, c, d, op in _split_top(rest):
        if c == "(" and d == 0 and not op and i > 0 and rest[i - 1] == " ":
            return rest[: i - 1]
    return rest.split(" ", 1)[0]


def parse_gdb(text):
    """{tid: {"num": N, "frames": [{"level", "pc", "function", "file", "line", "from"}]}} in order."""
    threads = {}
    cur = None
    for line in text.splitlines():
        m = THREAD_RE.match(line)
        if m:
            cur = {"num": int(m.group(1)), "tid": int(m.group(2)), "frames": []}
            threads[cur["tid"]] = cur
            continue
        if cur is None:
            continue  # the frame gdb prints on loading the core, before `thread apply all bt`
        m = FRAME_RE.match(line)
        if not m:
            continue
        rest = m.group(3)
        fr = {"level": int(m.group(1)), "pc": int(m.group(2), 16) if m.group(2) else None,
              "function": gdb_name(rest), "file": None, "line": None, "from": None}
        a = AT_RE.search(rest)
        if a:
            fr["file"], fr["line"] = a.group(1), int(a.group(2))
        f = FROM_RE.search(rest)
        if f:
            fr["from"] = f.group(1)
        cur["frames"].append(fr)
    return threads


def apply_gdb_kinds(threads, path):
    """Adds "kind" (normal/inline/tailcall/...) to each frame from gdb_frames.py's JSON."""
    if not path or not os.path.exists(path):
        return False
    with open(path) as fh:
        d = json.load(fh)
    for t in d.get("threads", []):
        g = threads.get(t.get("tid"))
        if not g:
            continue
        for fr, k in zip(g["frames"], t.get("frames", [])):
            if k.get("level") == fr["level"]:
                fr["kind"] = k.get("kind")
                if fr["pc"] is None and k.get("pc"):
                    fr["pc_frame"] = int(k["pc"], 16)
    return True


# ---------------------------------------------------------------- the other side

def from_report(d):
    """A crashpack-report/1 object -> (crashed_tid, {tid: thread}); thread = {crashed, frames, ...}."""
    proc = d.get("process") or {}
    threads = {}
    for t in d.get("threads") or []:
        try:
            tid = int(t.get("tid"))
        except (TypeError, ValueError):
            continue
        frames = []
        for f in t.get("frames") or []:
            pc = f.get("pc")
            try:
                pc = int(pc, 16) if isinstance(pc, str) else (int(pc) if pc is not None else None)
            except ValueError:
                pc = None
            frames.append(dict(f, pc=pc))
        dropped = 0
        for k in ("frames_dropped", "dropped_frames", "frames_omitted", "frames_truncated"):
            if isinstance(t.get(k), int):
                dropped = t[k]
        threads[tid] = {"crashed": t.get("crashed"), "frames": frames, "dropped": dropped,
                        "name": t.get("name")}
    return proc.get("crashed_tid"), threads


ES_TID_RE = re.compile(r"^TID (\d+):")
ES_FRAME_RE = re.compile(r"^#(\d+)\s+(0x[0-9a-f]+)(?: - 1)?\s*(.*?)(?: - (\S+))?$")


def from_eu_stack(text):
    """eu-stack -i -s [-m] output -> the same shape; its first thread is taken as the crashed one."""
    threads = {}
    cur = None
    first = None
    for line in text.splitlines():
        m = ES_TID_RE.match(line)
        if m:
            tid = int(m.group(1))
            cur = threads[tid] = {"crashed": first is None, "frames": [], "dropped": 0, "name": None}
            first = first or tid
            continue
        m = ES_FRAME_RE.match(line)
        if m and cur is not None:
            name = m.group(3).strip() or None
            cur["frames"].append({"pc": int(m.group(2), 16), "function": name, "module": m.group(4)})
            continue
        if cur is not None and cur["frames"] and line.startswith("    "):
            loc = line.strip()
            mm = re.match(r"^(.*?):(\d+)(?::\d+)?$", loc)
            if mm:
                cur["frames"][-1]["file"], cur["frames"][-1]["line"] = mm.group(1), int(mm.group(2))
    return first, threads


# ---------------------------------------------------------------- comparison

def frames_equal(g, c):
    """(equal?, why) for one gdb frame and one crashpack frame."""
    gn = canonical(g["function"])
    cn = canonical(c.get("function"))
    if gn is None:
        gpc = g["pc"] if g["pc"] is not None else g.get("pc_frame")
        if gpc is not None and c.get("pc") is not None and abs(gpc - c["pc"]) > 1:
            return False, f"pc {c['pc']:#x} != gdb {gpc:#x}"
        return True, "gdb ??"
    if cn == gn:
        return True, "same"
    return False, "name"


def compare_thread(g, c, top, cap):
    """Per-thread figures: compared, matched, tailcalls skipped, first mismatches."""
    gf = g["frames"]
    cf = c["frames"] if c else []
    if c and c.get("dropped"):
        cap = len(cf) if cap is None else min(cap, len(cf))
    res = {"compared": 0, "matched": 0, "skipped_tailcall": 0, "mismatches": [], "top_ok": True,
           "top_compared": 0, "top_matched": 0}
    i = j = 0
    pos = 0  # position among compared frames (for --top)
    while i < len(gf):
        if cap is not None and pos >= cap:
            break
        g1 = gf[i]
        c1 = cf[j] if j < len(cf) else None
        if g1.get("kind") == "tailcall":
            if c1 is not None and canonical(c1.get("function")) == canonical(g1["function"]):
                pass  # crashpack found it too: compare it like any frame
            else:
                res["skipped_tailcall"] += 1
                i += 1
                continue
        res["compared"] += 1
        if c1 is None:
            ok, why = False, "missing"
        else:
            ok, why = frames_equal(g1, c1)
        if pos < top:
            res["top_compared"] += 1
            res["top_matched"] += ok
        if ok:
            res["matched"] += 1
        else:
            if pos < top:
                res["top_ok"] = False
            if len(res["mismatches"]) < 8:
                res["mismatches"].append({
                    "gdb_level": g1["level"], "pos": pos, "gdb": g1["function"],
                    "crashpack": None if c1 is None else c1.get("function"), "why": why})
        i += 1
        j += 1
        pos += 1
    return res


def cmd_frames(a):
    with open(a.gdb) as fh:
        gdb = parse_gdb(fh.read())
    if not gdb:
        print(f"{a.name}: FAIL no thread in gdb's output ({a.gdb})")
        return 1
    have_kinds = apply_gdb_kinds(gdb, a.gdb_frames)
    # gdb's Thread 1 is the kernel's first thread: the one that took the signal
    truth = a.crashed_tid or next((t for t, g in gdb.items() if g["num"] == 1), None)
    problems = []
    if a.report:
        try:
            with open(a.report) as fh:
                rep = json.load(fh)
        except (OSError, ValueError) as e:
            rep = {}
            problems.append(f"unreadable report: {e}")
        claimed, threads = from_report(rep)
    else:
        with open(a.eu_stack) as fh:
            claimed, threads = from_eu_stack(fh.read())
    crashed_flags = sorted(t for t, v in threads.items() if v.get("crashed") is True)
    if claimed != truth:
        problems.append(f"process.crashed_tid is {claimed}, the crashed thread is {truth}")
    if crashed_flags != [truth]:
        problems.append(f"threads with crashed:true are {crashed_flags}, want [{truth}]")
    if not threads:
        problems.append("the report has no threads (threads[] is empty)")

    total_c = total_m = skipped = 0
    missing_threads = []
    lines = []
    crashed_res = None
    for tid, g in gdb.items():
        c = threads.get(tid)
        if c is None:
            missing_threads.append(tid)
        r = compare_thread(g, c, a.top, a.cap)
        total_c += r["compared"]
        total_m += r["matched"]
        skipped += r["skipped_tailcall"]
        if tid == truth:
            crashed_res = r
        if r["mismatches"] and (a.verbose or tid == truth or len(lines) < 40):
            for mm in r["mismatches"][: (8 if tid == truth else 3)]:
                lines.append(f"  tid {tid}{' (crashed)' if tid == truth else ''} #{mm['gdb_level']}: "
                             f"gdb {mm['gdb']!r} vs crashpack {mm['crashpack']!r} ({mm['why']})")
    extra_threads = sorted(set(threads) - set(gdb))
    if crashed_res is None:
        problems.append(f"gdb shows no thread {truth}")
    elif not crashed_res["top_ok"]:
        problems.append(f"crashed thread's first {a.top} frames differ")
    if missing_threads:
        problems.append(f"{len(missing_threads)} thread(s) missing from crashpack: "
                        f"{missing_threads[:8]}{' ...' if len(missing_threads) > 8 else ''}")
    if extra_threads:
        problems.append(f"crashpack has threads gdb does not: {extra_threads[:8]}")
    if not have_kinds and a.gdb_frames:
        problems.append(f"no gdb frame kinds ({a.gdb_frames}); tailcall frames counted")
    pct = 100.0 * total_m / total_c if total_c else 0.0
    top_n = crashed_res["top_compared"] if crashed_res else 0
    top_m = crashed_res["top_matched"] if crashed_res else 0
    crashed_ok = claimed == truth and crashed_flags == [truth]
    status = "FAIL" if problems else "ok"
    print(f"{a.name}: {status} threads {len(gdb)} (crashpack {len(threads)}), crashed tid {truth} "
          f"(crashpack {claimed}), crashed top {top_m}/{top_n}, frames {total_m}/{total_c} "
          f"({pct:.1f}%), gdb tailcall frames skipped {skipped}")
    for p in problems:
        print(f"  problem: {p}")
    for ln in lines:
        print(ln)
    if a.stats:
        with open(a.stats, "a") as fh:
            fh.write(json.dumps({"name": a.name, "ok": not problems, "compared": total_c,
                                 "matched": total_m, "skipped_tailcall": skipped,
                                 "threads": len(gdb), "crashed_tid": truth, "crashed_ok": crashed_ok,
                                 "claimed_tid": claimed, "top_matched": top_m, "top": top_n,
                                 "problems": problems}) + "\n")
    return 1 if problems else 0


def cmd_total(a):
    rows = []
    with open(a.stats) as fh:
        for line in fh:
            if line.strip():
                rows.append(json.loads(line))
    c = sum(r["compared"] for r in rows)
    m = sum(r["matched"] for r in rows)
    bad = [r["name"] for r in rows if not r["ok"]]
    pct = 100.0 * m / c if c else 0.0
    print(f"{'core':<28} {'threads':>7} {'frames':>13} {'match%':>7} {'top':>7} crashed")
    for r in rows:
        p = 100.0 * r["matched"] / r["compared"] if r["compared"] else 0.0
        print(f"{r['name']:<28} {r['threads']:>7} {r['matched']:>6}/{r['compared']:<6} {p:>6.1f}% "
              f"{r['top_matched']:>3}/{r['top']:<3} {'ok' if r.get('crashed_ok') else 'WRONG'}")
    print(f"TOTAL: {len(rows)} cores, {m}/{c} frames match ({pct:.2f}%, need >= {a.min_percent}%), "
          f"{len(rows) - len(bad)}/{len(rows)} cores pass their own checks")
    if len(rows) < a.min_cores:
        print(f"total: only {len(rows)} cores compared, need {a.min_cores}")
        return 1
    return 0 if c and pct >= a.min_percent else 1


# ---------------------------------------------------------------- acceptance 2: addr2line

def elf_first_load_vaddr(path):
    """The page-aligned p_vaddr of the first PT_LOAD (0 for PIE/DSOs, 0x400000 for -no-pie)."""
    with open(path, "rb") as fh:
        eh = fh.read(64)
        if eh[:4] != b"\x7fELF" or eh[4] != 2:
            raise ValueError(f"{path}: not ELF64")
        phoff, = struct.unpack_from("<Q", eh, 32)
        phentsize, phnum = struct.unpack_from("<HH", eh, 54)
        fh.seek(phoff)
        ph = fh.read(phentsize * phnum)
    for i in range(phnum):
        p_type, _, p_offset, p_vaddr, _, _, _, p_align = struct.unpack_from("<IIQQQQQQ", ph, i * phentsize)
        if p_type == 1:
            return (p_vaddr - p_offset) & ~0xFFF if p_align else p_vaddr
    raise ValueError(f"{path}: no PT_LOAD")


def module_bias(mod, path):
    """ELF address = runtime pc - bias. From the report's module entry."""
    for k in ("bias", "load_bias", "l_addr"):
        v = mod.get(k)
        if v is not None:
            return int(v, 16) if isinstance(v, str) else int(v)
    for k in ("start", "load_address", "base", "low"):
        v = mod.get(k)
        if v is not None:
            start = int(v, 16) if isinstance(v, str) else int(v)
            return start - elf_first_load_vaddr(path)
    return None


def find_module(report, frame):
    mods = report.get("modules") or []
    name = frame.get("module")
    pc = frame.get("pc")
    for m in mods:
        for k in ("name", "path", "file", "filename"):
            v = m.get(k)
            if v and name and (v == name or os.path.basename(str(v)) == os.path.basename(str(name))):
                return m
    for m in mods:  # by address range
        lo, hi = m.get("start"), m.get("end")
        if lo is not None and hi is not None and pc is not None:
            lo = int(lo, 16) if isinstance(lo, str) else lo
            hi = int(hi, 16) if isinstance(hi, str) else hi
            if lo <= pc < hi:
                return m
    return None


def addr2line(binary, addr):
    out = subprocess.run(["addr2line", "-i", "-f", "-C", "-e", binary, f"{addr:#x}"],
                         capture_output=True, text=True, check=False).stdout.splitlines()
    chain = []
    for k in range(0, len(out) - 1, 2):
        loc = re.sub(r" \(discriminator \d+\)$", "", out[k + 1].strip())
        file, _, line = loc.rpartition(":")
        chain.append({"function": out[k].strip(), "file": None if file in ("", "??") else file,
                      "line": int(line) if line.isdigit() and int(line) > 0 else None})
    return chain


def same_file(a, b):
    if not a and not b:
        return True
    return bool(a and b) and os.path.basename(a) == os.path.basename(b)


def cmd_inline(a):
    """Acceptance 2 on one report: the crashed thread's frames in --binary against addr2line."""
    with open(a.report) as fh:
        rep = json.load(fh)
    claimed = (rep.get("process") or {}).get("crashed_tid")
    thr = next((t for t in rep.get("threads") or [] if t.get("tid") == claimed), None)
    if thr is None:
        print(f"{a.name}: FAIL inline: no crashed thread in the report")
        return 1
    frames = thr.get("frames") or []
    want_base = os.path.basename(a.module or a.binary)
    problems = []
    checked = 0
    needed = set()
    # physical frames: a run of inline:true frames, then the frame they were inlined into
    groups, cur = [], []
    for f in frames:
        cur.append(f)
        if not f.get("inline"):
            groups.append(cur)
            cur = []
    if cur:
        groups.append(cur)
    for gi, grp in enumerate(groups):
        phys = grp[-1]
        mod_name = phys.get("module") or ""
        if os.path.basename(str(mod_name)) != want_base:
            continue
        pc = phys.get("pc")
        pc = int(pc, 16) if isinstance(pc, str) else pc
        # the ELF address of the pc: elf_address (pc - load bias) when the report has it, else from
        # the module's start (the mapping of file offset 0) and the file's program headers.
        # (module_offset is pc - start: not an ELF address for a -no-pie executable.)
        rel = None
        v = phys.get("elf_address")
        if v is not None:
            rel = int(v, 16) if isinstance(v, str) else int(v)
        else:
            mod = find_module(rep, phys)
            if mod is None:
                needed.add("frames[].elf_address, or a modules[] entry (path matching "
                           "frames[].module) with its start address")
                continue
            bias = module_bias(mod, a.binary)
            if bias is None:
                needed.add("frames[].elf_address, or modules[].bias / modules[].start")
                continue
            rel = pc - bias
        # a return address points after the call: look up the call itself (pc - 1), except for an
        # activation (the innermost frame, or one interrupted by a signal: frames[].activation)
        activation = phys.get("activation")
        if activation is None:
            activation = gi == 0
        if not activation:
            rel -= 1
        chain = addr2line(a.debug or a.binary, rel)
        checked += 1
        if len(chain) != len(grp):
            problems.append(f"frame {frames.index(phys)} ({rel:#x}): crashpack has {len(grp)} "
                            f"frame(s) {[f.get('function') for f in grp]}, addr2line "
                            f"{[c['function'] for c in chain]}")
            continue
        for f, c in zip(grp, chain):
            if canonical(f.get("function")) != canonical(c["function"]):
                problems.append(f"{rel:#x}: function {f.get('function')!r} vs addr2line {c['function']!r}")
            if not same_file(f.get("file"), c["file"]) or f.get("line") != c["line"]:
                problems.append(f"{rel:#x} {c['function']}: {f.get('file')}:{f.get('line')} vs "
                                f"addr2line {c['file']}:{c['line']}")
    if checked == 0 and not needed:
        problems.append(f"no frame of the crashed thread is in {want_base}")
    for n in sorted(needed):
        problems.append(f"the report lacks {n}")
    print(f"{a.name}: {'FAIL' if problems else 'ok'} inline/file:line vs addr2line, "
          f"{checked} physical frame(s) in {want_base} checked")
    for p in problems:
        print(f"  problem: {p}")
    return 1 if problems else 0


# ---------------------------------------------------------------- helpers for the e2e test

def cmd_same_threads(a):
    """Two gdb outputs of one process (a core and its reordered copy): same tids, same stacks."""
    with open(a.a) as fh:
        ga = parse_gdb(fh.read())
    with open(a.b) as fh:
        gb = parse_gdb(fh.read())
    sa = {t: [(f["function"], f["pc"]) for f in g["frames"]] for t, g in ga.items()}
    sb = {t: [(f["function"], f["pc"]) for f in g["frames"]] for t, g in gb.items()}
    if sa == sb and sa:
        return 0
    diff = sorted(t for t in set(sa) | set(sb) if sa.get(t) != sb.get(t))
    print(f"same-threads: {len(sa)} vs {len(sb)} threads, differing tids {diff[:8]}")
    return 1


def cmd_foreign(a):
    """Acceptance 3: every frame the local report named is named (the same) in the foreign one."""
    with open(a.local) as fh:
        _, loc = from_report(json.load(fh))
    try:
        with open(a.foreign) as fh:
            _, far = from_report(json.load(fh))
    except (OSError, ValueError) as e:
        print(f"{a.name}: FAIL foreign report unreadable: {e}")
        return 1
    named = lost = 0
    examples = []
    for tid, t in loc.items():
        ft = far.get(tid, {"frames": []})["frames"]
        for k, f in enumerate(t["frames"]):
            if canonical(f.get("function")) is None:
                continue
            named += 1
            g = ft[k] if k < len(ft) else None
            if g is None or canonical(g.get("function")) != canonical(f.get("function")):
                lost += 1
                if len(examples) < 5:
                    examples.append(f"tid {tid} #{k}: {f.get('function')!r} -> "
                                    f"{None if g is None else g.get('function')!r}")
    print(f"{a.name}: {'ok' if named and not lost else 'FAIL'} foreign: {named - lost}/{named} "
          f"named frames kept")
    for e in examples:
        print(f"  {e}")
    return 0 if named and not lost else 1


# ---------------------------------------------------------------- self-test

SELFTEST_GDB = """\
#0  0x0000000000401136 in leaf (x=1) at a.c:3
3\t  *p = 1;

Thread 2 (Thread 0x7f00 (LWP 101)):
#0  __pthread_kill_implementation (threadid=<optimized out>, signo=6) at ./nptl/pthread_kill.c:44
#1  0x00007f0000000f4f in __pthread_kill_internal (signo=6) at ./nptl/pthread_kill.c:78
#2  0x00007f0000000fb2 in __GI_raise (sig=sig@entry=6) at ../sysdeps/posix/raise.c:26
#3  0x00007f0000001000 in ?? () from /lib/x86_64-linux-gnu/libstdc++.so.6
#4  0x00007f0000002000 in std::terminate() () from /lib/x86_64-linux-gnu/libstdc++.so.6
#5  0x0000000000401200 in cpfx::Pipeline::stage<int> (this=0x1, v=9) at b.cpp:42

Thread 1 (LWP 100):
#0  0x0000000000401136 in leaf (x=1) at a.c:3
#1  mid (y=<optimized out>) at a.c:8
#2  0x0000000000401180 in main () at a.c:12
"""


def selftest():
    """Checks the normalization and matching rules on hand-made input; exit 1 on the first error."""
    cases = [
        ("int cpfx::Pipeline::stage<int>(int)", "cpfx::Pipeline::stage<int>"),
        ("std::terminate()", "std::terminate"),
        ("pthread_cond_wait@@GLIBC_2.3.2", "pthread_cond_wait"),
        ("__GI_raise", "raise"), ("gsignal", "raise"), ("__pthread_kill_implementation", "pthread_kill"),
        ("outer.constprop.0", "outer"), ("foo(int) [clone .isra.0]", "foo"),
        ("validate_batch.cold", "validate_batch"),
        ("(anonymous namespace)::g(int)", "(anonymous namespace)::g"),
        ("Foo::operator bool() const", "Foo::operator bool"), ("Foo::operator()(int)", "Foo::operator()"),
        ("operator new(unsigned long)", "operator new"),
        ("std::vector<int, std::allocator<int> >::at(unsigned long)", "std::vector<int,std::allocator<int>>::at"),
        ("std::vector<int,std::allocator<int>>::at", "std::vector<int,std::allocator<int>>::at"),
        ("??", None), ("", None), ("<signal handler called>", "<signal_handler_called>"),
        ("__restore_rt", "<signal_handler_called>"),
    ]
    for raw, want in cases:
        got = canonical(raw)
        if got != want:
            print(f"selftest: canonical({raw!r}) = {got!r}, want {want!r}")
            return 1
    g = parse_gdb(SELFTEST_GDB)
    if sorted(g) != [100, 101] or [f["function"] for f in g[101]["frames"]] != [
            "__pthread_kill_implementation", "__pthread_kill_internal", "__GI_raise", "??",
            "std::terminate()", "cpfx::Pipeline::stage<int>"] or g[100]["num"] != 1:
        print(f"selftest: parse_gdb: {g}")
        return 1
    g[101]["frames"][1]["kind"] = "tailcall"
    cp = {"frames": [{"function": "__pthread_kill_implementation", "pc": 0x7f0000000eec},
                     {"function": "raise", "pc": 0x7f0000000fb2},
                     {"function": None, "pc": 0x7f0000000fff},       # gdb ??: pc within 1
                     {"function": "std::terminate()", "pc": 0x7f0000002000},
                     {"function": "void cpfx::Pipeline::stage<int>(int)", "pc": 0x401200}]}
    r = compare_thread(g[101], cp, 10, None)
    if (r["compared"], r["matched"], r["skipped_tailcall"], r["top_ok"]) != (5, 5, 1, True):
        print(f"selftest: compare_thread (aliases, ??, tailcall): {r}")
        return 1
    cp["frames"][2]["pc"] = 0x7f0000005000  # a ?? frame at another pc is not the same frame
    r = compare_thread(g[101], cp, 10, None)
    if (r["matched"], r["top_ok"]) != (4, False):
        print(f"selftest: compare_thread (?? pc): {r}")
        return 1
    short = {"frames": [{"function": "leaf"}, {"function": "mid"}], "dropped": 0}
    r = compare_thread(g[100], short, 10, None)
    if (r["compared"], r["matched"], r["top_ok"]) != (3, 2, False):
        print(f"selftest: compare_thread (missing frame): {r}")
        return 1
    short["dropped"] = 7  # crashpack said it capped the thread at 2 frames: the denominator is 2
    r = compare_thread(g[100], short, 10, None)
    if (r["compared"], r["matched"], r["top_ok"]) != (2, 2, True):
        print(f"selftest: compare_thread (cap): {r}")
        return 1
    print("selftest: ok")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--aliases", default=os.path.join(HERE, "bt_aliases.txt"))
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("frames", help="one core")
    f.add_argument("--name", required=True)
    f.add_argument("--gdb", required=True, help="gdb -batch ... 'thread apply all bt' output")
    f.add_argument("--gdb-frames", help="gdb_frames.py's JSON (frame kinds)")
    src = f.add_mutually_exclusive_group(required=True)
    src.add_argument("--report", help="crashpack analyze --json output")
    src.add_argument("--eu-stack", help="eu-stack -i -s output (stand-in)")
    f.add_argument("--crashed-tid", type=int, help="the crashed thread (default: gdb's Thread 1)")
    f.add_argument("--top", type=int, default=10)
    f.add_argument("--cap", type=int, help="compare at most this many frames per thread")
    f.add_argument("--stats", help="append this core's figures (one JSON line) here")
    f.add_argument("-v", "--verbose", action="store_true")
    t = sub.add_parser("total", help="the whole set")
    t.add_argument("--stats", required=True)
    t.add_argument("--min-percent", type=float, default=99.0)
    t.add_argument("--min-cores", type=int, default=12)
    i = sub.add_parser("inline", help="acceptance 2: inline frames and file:line vs addr2line")
    i.add_argument("--name", required=True)
    i.add_argument("--report", required=True)
    i.add_argument("--binary", required=True, help="the module as loaded (for its program headers)")
    i.add_argument("--debug", help="the file addr2line reads (default --binary)")
    i.add_argument("--module", help="frames[].module's basename (default: --binary's)")
    st = sub.add_parser("same-threads", help="two gdb outputs show the same thread stacks")
    st.add_argument("a")
    st.add_argument("b")
    fo = sub.add_parser("foreign", help="acceptance 3: named frames survive without the binaries")
    fo.add_argument("--name", required=True)
    fo.add_argument("--local", required=True)
    fo.add_argument("--foreign", required=True)
    sub.add_parser("selftest", help="check the rules on hand-made input")
    n = sub.add_parser("normalize", help="print the normalized, canonical form of names (debugging)")
    n.add_argument("names", nargs="+")
    a = ap.parse_args()
    ALIASES.update(load_aliases(a.aliases))
    if a.cmd == "frames":
        return cmd_frames(a)
    if a.cmd == "total":
        return cmd_total(a)
    if a.cmd == "inline":
        return cmd_inline(a)
    if a.cmd == "same-threads":
        return cmd_same_threads(a)
    if a.cmd == "foreign":
        return cmd_foreign(a)
    if a.cmd == "selftest":
        return selftest()
    for x in a.names:
        print(f"{x!r} -> {canonical(x)!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
