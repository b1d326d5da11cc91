#!/usr/bin/env python3
"""trim_core.py - shrink a real x86_64 Linux ELF core into a small fuzzing seed that keeps its structure.

Usage: trim_core.py [--stack BYTES] [--max-threads N] IN OUT

Kept as they are: the ELF header, every PT_NOTE segment (NT_PRSTATUS, NT_PRPSINFO, NT_SIGINFO,
NT_AUXV, NT_FILE, NT_FPREGSET, NT_X86_XSTATE, ...), and the address, size and flags of every
PT_LOAD. Kept of the PT_LOAD data: the segments of at most 8 KiB that start with an ELF header (the
first page of each mapped ELF file, where the build-ids are, and the vdso) and, for each thread, a
window of the stack from 256 bytes below its sp up to --stack bytes above (default 8192), so that
unwinding, the abort-message scan and the C++ exception search have real words to read. Every other
PT_LOAD keeps p_memsz with p_filesz 0 (mapped, not dumped); a segment with a stack window is split
into three program headers (before, window, after). --max-threads N drops the NT_PRSTATUS groups
after the Nth thread (a 64-thread core's notes alone are ~200 KiB). The output is a valid core that
eu-stack and gdb still open (most of the memory missing).
"""
import argparse
import struct
import sys

EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
PHDR = struct.Struct("<IIQQQQQQ")
PT_LOAD, PT_NOTE = 1, 4
NT_PRSTATUS = 1
PAGE = 4096


def align(n, a):
    return (n + a - 1) // a * a


def notes(buf):
    """(type, name, desc, raw bytes) of each note in buf."""
    pos = 0
    while pos + 12 <= len(buf):
        namesz, descsz, ntype = struct.unpack_from("<III", buf, pos)
        end = pos + 12 + align(namesz, 4) + align(descsz, 4)
        if end > len(buf):
            break
        name = buf[pos + 12: pos + 12 + namesz]
        desc = buf[pos + 12 + align(namesz, 4): pos + 12 + align(namesz, 4) + descsz]
        yield ntype, name, desc, buf[pos:end]
        pos = end


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stack", type=int, default=8192)
    ap.add_argument("--max-threads", type=int, default=0)
    ap.add_argument("inp")
    ap.add_argument("out")
    a = ap.parse_args()
    data = open(a.inp, "rb").read()
    eh = list(EHDR.unpack_from(data, 0))
    if data[:4] != b"\x7fELF" or eh[1] != 4 or eh[2] != 62:
        sys.exit("trim_core.py: not an x86_64 ELF core: " + a.inp)
    phoff, phnum = eh[5], eh[10]
    phdrs = [list(PHDR.unpack_from(data, phoff + i * PHDR.size)) for i in range(phnum)]

    note_blobs, sps = [], []
    for p in phdrs:
        if p[0] != PT_NOTE:
            continue
        out, threads = b"", 0
        for ntype, name, desc, raw in notes(data[p[2]: p[2] + p[5]]):
            if ntype == NT_PRSTATUS and name.rstrip(b"\0") == b"CORE":
                threads += 1
                sps.append(struct.unpack_from("<Q", desc, 112 + 19 * 8)[0])
            if a.max_threads and threads > a.max_threads:
                continue
            out += raw
        note_blobs.append(out)
    if a.max_threads:
        sps = sps[: a.max_threads]

    # the new program headers: notes first, then the loads (split around stack windows)
    loads = []  # (vaddr, memsz, flags, bytes or None)
    for p in phdrs:
        if p[0] != PT_LOAD:
            continue
        _, flags, off, vaddr, _, filesz, memsz, _ = p
        seg = data[off: off + filesz]
        wins = []
        for sp in sps:
            lo = max(vaddr, (sp - 256) & ~(PAGE - 1))
            hi = min(vaddr + memsz, align(sp + a.stack, PAGE))
            if lo < hi and vaddr <= sp < vaddr + memsz:
                wins.append((lo, hi))
        wins.sort()
        merged = []
        for lo, hi in wins:
            if merged and lo <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
            else:
                merged.append((lo, hi))
        if merged:
            at = vaddr
            for lo, hi in merged:
                if lo > at:
                    loads.append((at, lo - at, flags, None))
                loads.append((lo, hi - lo, flags, seg[lo - vaddr: hi - vaddr]))
                at = hi
            if at < vaddr + memsz:
                loads.append((at, vaddr + memsz - at, flags, None))
        elif filesz and filesz <= 8192 and seg[:4] == b"\x7fELF":
            loads.append((vaddr, memsz, flags, seg))
        else:
            loads.append((vaddr, memsz, flags, None))

    nph = len(note_blobs) + len(loads)
    pos = EHDR.size + nph * PHDR.size
    out_ph, body = [], b""
    for blob in note_blobs:
        out_ph.append(PHDR.pack(PT_NOTE, 0, pos + len(body), 0, 0, len(blob), 0, 1))
        body += blob
    pos_data = pos + len(body)
    for vaddr, memsz, flags, seg in loads:
        n = len(seg) if seg else 0
        out_ph.append(PHDR.pack(PT_LOAD, flags, pos_data, vaddr, 0, n, memsz, PAGE))
        if seg:
            body += seg
            pos_data += n
    eh[5], eh[10], eh[6], eh[12], eh[13] = EHDR.size, nph, 0, 0, 0  # no sections
    with open(a.out, "wb") as f:
        f.write(EHDR.pack(*eh))
        f.write(b"".join(out_ph))
        f.write(body)


if __name__ == "__main__":
    main()
