#!/usr/bin/env python3
"""hostile_core.py - writes a damaged copy of a real x86_64 ELF core: the hand-made hostile cases of
issue 4 (acceptance 5) for `crashpack analyze`.

Usage: hostile_core.py KIND IN OUT       (KIND: one of the names below; `list` prints them)

  notes-garbage      the PT_NOTE segment's bytes overwritten with pseudo-random garbage (fixed seed)
  note-huge-descsz   the first note's n_descsz set to 0xfffffff0 (runs past its segment)
  note-huge-namesz   the first note's n_namesz set to 0xfffffff0
  prstatus-short     every NT_PRSTATUS's n_type kept but its descsz cut to 8 (rest becomes junk notes)
  file-count-huge    NT_FILE's count set to 2^60 (more mappings than the note can hold)
  file-names-junk    NT_FILE's names overwritten with bytes without a NUL
  siginfo-bogus      NT_SIGINFO's signo set to 123456 and si_code to -77777
  notes-oversized    the PT_NOTE program header's p_filesz set to 64 MiB + 8 KiB (past the file and
                     past the analyzer's 64 MiB cap on notes)
  phnum-xnum         e_phnum set to PN_XNUM (0xffff) with no section header to hold the real count
  load-overlap       every PT_LOAD moved to the same address (overlapping segments)
  threads-N          the crashed thread's notes (NT_PRSTATUS up to the next one) repeated until the
                     core has N threads (pids counting up), in a new PT_NOTE at the end of the file:
                     threads-60000 is issue 16's 60,000-thread core
"""
import random
import struct
import sys

EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
PHDR = struct.Struct("<IIQQQQQQ")
PT_LOAD, PT_NOTE = 1, 4
NT_PRSTATUS, NT_SIGINFO, NT_FILE = 1, 0x53494749, 0x46494C45


def align4(n):
    return (n + 3) & ~3


def phdrs(b):
    eh = EHDR.unpack_from(b, 0)
    phoff, phnum = eh[5], eh[10]
    return [(phoff + i * PHDR.size, list(PHDR.unpack_from(b, phoff + i * PHDR.size)))
            for i in range(phnum)]


def note_seg(b):
    for at, p in phdrs(b):
        if p[0] == PT_NOTE:
            return at, p
    sys.exit("hostile_core.py: no PT_NOTE")


def notes(b):
    """(offset of the note header, namesz, descsz, type, desc offset) for each note."""
    _, p = note_seg(b)
    pos, end = p[2], p[2] + p[5]
    while pos + 12 <= end:
        namesz, descsz, ntype = struct.unpack_from("<III", b, pos)
        desc = pos + 12 + align4(namesz)
        yield pos, namesz, descsz, ntype, desc
        pos = desc + align4(descsz)


def many_threads(b, n):
    """The notes with the first thread's group (its NT_PRSTATUS and the notes after it up to the
    next NT_PRSTATUS or a process-wide note) repeated n-1 more times with pids counting up."""
    at, p = note_seg(b)
    ns = list(notes(b))
    raw = lambda x: bytes(b[x[0]: x[4] + align4(x[2])])
    first = next(i for i, x in enumerate(ns) if x[3] == NT_PRSTATUS)
    group = [ns[first]]
    for x in ns[first + 1:]:
        if x[3] in (NT_PRSTATUS, NT_FILE, NT_SIGINFO, 3, 6):  # prpsinfo=3, auxv=6
            break
        group.append(x)
    out = bytearray(b"".join(raw(x) for x in ns))
    pid0 = struct.unpack_from("<i", b, ns[first][4] + 32)[0]  # pr_pid in elf_prstatus (x86_64)
    tmpl = [bytearray(raw(x)) for x in group]
    for k in range(1, n):
        for x, t in zip(group, tmpl):
            if x[3] == NT_PRSTATUS:
                struct.pack_into("<i", t, 12 + align4(x[1]) + 32, pid0 + 100000 + k)
            out += t
    end = (len(b) + 7) & ~7
    b = bytearray(b) + bytes(end - len(b)) + out
    p[2], p[5], p[6] = end, len(out), len(out)
    PHDR.pack_into(b, at, *p)
    return b


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "list":
        for line in __doc__.splitlines():
            if line.startswith("  ") and not line.startswith("   ") and not line.split()[0].endswith("-N"):
                print(line.split()[0])  # threads-N takes a number: not one of the fixed kinds
        return
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    kind, src, dst = sys.argv[1:]
    b = bytearray(open(src, "rb").read())
    if kind == "notes-garbage":
        _, p = note_seg(b)
        rnd = random.Random(4)
        b[p[2]: p[2] + p[5]] = bytes(rnd.getrandbits(8) for _ in range(p[5]))
    elif kind == "note-huge-descsz":
        pos = next(notes(b))[0]
        struct.pack_into("<I", b, pos + 4, 0xFFFFFFF0)
    elif kind == "note-huge-namesz":
        pos = next(notes(b))[0]
        struct.pack_into("<I", b, pos, 0xFFFFFFF0)
    elif kind == "prstatus-short":
        for pos, namesz, descsz, ntype, desc in list(notes(b)):
            if ntype == NT_PRSTATUS:
                struct.pack_into("<I", b, pos + 4, 8)
    elif kind == "file-count-huge":
        for pos, namesz, descsz, ntype, desc in notes(b):
            if ntype == NT_FILE:
                struct.pack_into("<Q", b, desc, 1 << 60)
    elif kind == "file-names-junk":
        for pos, namesz, descsz, ntype, desc in notes(b):
            if ntype == NT_FILE:
                count = struct.unpack_from("<Q", b, desc)[0]
                names = desc + 16 + 24 * count
                b[names: desc + descsz] = b"\xff" * (desc + descsz - names)
    elif kind == "siginfo-bogus":
        for pos, namesz, descsz, ntype, desc in notes(b):
            if ntype == NT_SIGINFO:
                struct.pack_into("<iii", b, desc, 123456, 0, -77777)
    elif kind == "notes-oversized":
        at, p = note_seg(b)
        p[5] = (64 << 20) + 8192
        PHDR.pack_into(b, at, *p)
    elif kind == "phnum-xnum":
        eh = list(EHDR.unpack_from(b, 0))
        eh[10], eh[6], eh[12] = 0xFFFF, 0, 0
        EHDR.pack_into(b, 0, *eh)
    elif kind == "load-overlap":
        for at, p in phdrs(b):
            if p[0] == PT_LOAD:
                p[3] = 0x400000
                PHDR.pack_into(b, at, *p)
    elif kind.startswith("threads-") and kind[8:].isdigit():
        b = many_threads(b, int(kind[8:]))
    else:
        sys.exit("hostile_core.py: unknown kind " + kind)
    open(dst, "wb").write(b)


if __name__ == "__main__":
    main()
