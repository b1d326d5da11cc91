#!/usr/bin/env python3
"""reorder_notes.py - permute the per-thread notes of an x86_64 ELF core file (in place, same size).

Usage: reorder_notes.py CORE [--move-first-to-end | --order TID,TID,...] [-o OUT]
       reorder_notes.py CORE --list        (prints the notes; exit 0)
       reorder_notes.py CORE --first-tid   (prints the tid of the first NT_PRSTATUS)

The kernel writes the dumping (crashing) thread's notes first (fs/binfmt_elf.c write_note_info):
  NT_PRSTATUS(t1) NT_PRPSINFO NT_SIGINFO NT_AUXV NT_FILE NT_PRFPREG(t1) NT_X86_XSTATE(t1) ...
  NT_PRSTATUS(t2) NT_PRFPREG(t2) NT_X86_XSTATE(t2) ...
so "the first thread" is right for any core the kernel wrote. To test that an analyzer finds the
crashed thread from the notes' content instead (NT_SIGINFO, pr_cursig, the registers), this script
regroups the notes into thread groups (an NT_PRSTATUS and the per-thread notes after it) and the
process-wide notes (NT_PRPSINFO, NT_SIGINFO, NT_AUXV, NT_FILE), permutes the thread groups, and
writes them back in the kernel's layout: new first thread's NT_PRSTATUS, the process-wide notes,
the rest of its group, then the other groups. The process-wide notes (NT_SIGINFO included) keep
their content, and -- since every thread group has the same size -- their file offsets. The PT_NOTE
segment keeps its offset and size; nothing outside it changes, so the core stays valid for gdb.

--move-first-to-end (the default) puts the crashing thread's group last; --order lists the new
order of thread ids (every thread exactly once). Exit 0 on success, 1 on a core it cannot handle.
"""
import argparse
import struct
import sys

ET_CORE, EM_X86_64, PT_NOTE = 4, 62, 4
NT_PRSTATUS, NT_PRFPREG, NT_PRPSINFO, NT_AUXV = 1, 2, 3, 6
NT_SIGINFO, NT_FILE = 0x53494749, 0x46494C45
PROCESS_WIDE = {NT_PRPSINFO, NT_SIGINFO, NT_AUXV, NT_FILE}
NAMES = {NT_PRSTATUS: "NT_PRSTATUS", NT_PRFPREG: "NT_PRFPREG", NT_PRPSINFO: "NT_PRPSINFO",
         NT_AUXV: "NT_AUXV", NT_SIGINFO: "NT_SIGINFO", NT_FILE: "NT_FILE", 0x202: "NT_X86_XSTATE",
         0x200: "NT_386_TLS", 0x201: "NT_386_IOPERM"}


def align4(n):
    return (n + 3) & ~3


def die(msg):
    print(f"reorder_notes: {msg}", file=sys.stderr)
    sys.exit(1)


def note_segment(f):
    """(offset, size) of the core's PT_NOTE segment."""
    f.seek(0)
    eh = f.read(64)
    if len(eh) < 64 or eh[:4] != b"\x7fELF" or eh[4] != 2 or eh[5] != 1:
        die("not a little-endian ELF64 file")
    e_type, e_machine = struct.unpack_from("<HH", eh, 16)
    e_phoff, = struct.unpack_from("<Q", eh, 32)
    e_phentsize, e_phnum = struct.unpack_from("<HH", eh, 54)
    if e_type != ET_CORE or e_machine != EM_X86_64:
        die("not an x86_64 core file")
    f.seek(e_phoff)
    ph = f.read(e_phentsize * e_phnum)
    notes = []
    for i in range(e_phnum):
        p_type, _, p_offset, _, _, p_filesz = struct.unpack_from("<IIQQQQ", ph, i * e_phentsize)
        if p_type == PT_NOTE:
            notes.append((p_offset, p_filesz))
    if len(notes) != 1:
        die(f"expected one PT_NOTE segment, found {len(notes)}")
    return notes[0]


def parse_notes(data):
    """[(type, name, raw bytes of the whole note)] in file order."""
    out, off = [], 0
    while off + 12 <= len(data):
        namesz, descsz, ntype = struct.unpack_from("<III", data, off)
        end = off + 12 + align4(namesz) + align4(descsz)
        if end > len(data):
            die(f"note at +{off} runs past the segment")
        name = data[off + 12: off + 12 + namesz].rstrip(b"\0").decode("ascii", "replace")
        out.append((ntype, name, data[off:end]))
        off = end
    if any(data[off:]):
        die("trailing garbage after the notes")
    return out


def desc_of(raw):
    namesz, descsz, _ = struct.unpack_from("<III", raw, 0)
    start = 12 + align4(namesz)
    return raw[start:start + descsz]


def prstatus_info(raw):
    """Fields of struct elf_prstatus (x86_64): signo, code, cursig, sigpend, pid, and rip/rsp."""
    d = desc_of(raw)
    signo, code, _errno, cursig = struct.unpack_from("<iiih", d, 0)
    sigpend, sighold = struct.unpack_from("<QQ", d, 16)
    pid, ppid, pgrp, sid = struct.unpack_from("<iiii", d, 32)
    regs = struct.unpack_from("<27Q", d, 112)
    return dict(signo=signo, code=code, cursig=cursig, sigpend=sigpend, sighold=sighold, pid=pid,
                rip=regs[16], rsp=regs[19], orig_rax=regs[15])


def group_threads(notes):
    """(process-wide notes, [thread groups]); a group is a list of notes starting with NT_PRSTATUS."""
    wide, groups = [], []
    for n in notes:
        if n[0] == NT_PRSTATUS and n[1] == "CORE":
            groups.append([n])
        elif n[0] in PROCESS_WIDE and n[1] == "CORE":
            wide.append(n)
        elif groups:
            groups[-1].append(n)
        else:
            die(f"per-thread note {n[0]:#x} before the first NT_PRSTATUS")
    if not groups:
        die("no NT_PRSTATUS note")
    return wide, groups


def tid_of(group):
    return prstatus_info(group[0][2])["pid"]


def layout(wide, groups):
    first = groups[0]
    out = [first[0]] + wide + first[1:]
    for g in groups[1:]:
        out += g
    return b"".join(n[2] for n in out)


def main():
    ap = argparse.ArgumentParser(description="Permute the thread notes of an x86_64 ELF core file.")
    ap.add_argument("core")
    ap.add_argument("-o", "--output", help="write here instead of rewriting CORE in place")
    ap.add_argument("--order", help="new thread order: comma-separated tids, each thread once")
    ap.add_argument("--move-first-to-end", action="store_true", help="the default")
    ap.add_argument("--list", action="store_true", help="print the notes and exit")
    ap.add_argument("--first-tid", action="store_true", help="print the first thread's tid and exit")
    a = ap.parse_args()

    with open(a.core, "rb") as f:
        off, size = note_segment(f)
        f.seek(off)
        data = f.read(size)
    if len(data) != size:
        die("core cut short inside its notes")
    notes = parse_notes(data)
    wide, groups = group_threads(notes)

    if a.first_tid:
        print(tid_of(groups[0]))
        return 0
    if a.list:
        pos = 0
        for ntype, name, raw in notes:
            extra = ""
            if ntype == NT_PRSTATUS and name == "CORE":
                i = prstatus_info(raw)
                extra = (f" pid={i['pid']} cursig={i['cursig']} signo={i['signo']} "
                         f"sigpend={i['sigpend']:#x} rip={i['rip']:#x} orig_rax={i['orig_rax']:#x}")
            elif ntype == NT_SIGINFO:
                d = desc_of(raw)
                signo, _errno, code = struct.unpack_from("<iii", d, 0)
                if code > 0:  # sent by the kernel (a fault): the union holds si_addr
                    extra = f" si_signo={signo} si_code={code} si_addr={struct.unpack_from('<Q', d, 16)[0]:#x}"
                else:  # SI_USER, SI_TKILL, ...: the sender
                    pid, uid = struct.unpack_from("<iI", d, 16)
                    extra = f" si_signo={signo} si_code={code} si_pid={pid} si_uid={uid}"
            print(f"+{pos:<7} {NAMES.get(ntype, hex(ntype)):<14} {name:<8} {len(raw):>6}{extra}")
            pos += len(raw)
        return 0

    tids = [tid_of(g) for g in groups]
    if len(set(tids)) != len(tids):
        die("two NT_PRSTATUS notes with the same pid")
    if a.order:
        want = [int(t) for t in a.order.split(",") if t.strip()]
        if sorted(want) != sorted(tids):
            die(f"--order must list each of the {len(tids)} threads exactly once")
        by_tid = dict(zip(tids, groups))
        new_groups = [by_tid[t] for t in want]
    else:
        if len(groups) < 2:
            die("a single thread: nothing to reorder")
        new_groups = groups[1:] + groups[:1]
    new = layout(wide, new_groups)
    if len(new) != len(data):
        die(f"internal error: notes changed size ({len(data)} -> {len(new)})")
    # the process-wide notes keep their offsets when every thread group has the same size
    moved = [NAMES.get(t, hex(t)) for t, _, raw in wide if new.find(raw) != data.find(raw)]
    if moved:
        print(f"reorder_notes: note(s) {', '.join(moved)} moved (thread groups differ in size)",
              file=sys.stderr)

    out = a.output or a.core
    if out != a.core:
        with open(a.core, "rb") as src, open(out, "wb") as dst:
            while True:
                buf = src.read(1 << 20)
                if not buf:
                    break
                dst.write(buf)
    with open(out, "r+b") as f:
        f.seek(off)
        f.write(new)
    print(" ".join(str(tid_of(g)) for g in new_groups))
    return 0


if __name__ == "__main__":
    sys.exit(main())
