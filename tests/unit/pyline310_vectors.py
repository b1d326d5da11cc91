"""pyline310_vectors.py - test vectors for analyze/native/python310.c's line-table decoder
(py310_addr2line), from the running interpreter itself (CPython 3.10): for every code object of a
few standard-library modules (and the code objects nested in them), its co_firstlineno,
co_linetable (the PEP 626 pairs), and co_lines() - the ranges CPython's own decoder
(PyLineTable_NextAddressRange, as PyCode_Addr2Line walks it) gives. Output, one per line:
    code FIRSTLINENO HEX_LINETABLE NBYTES
    range START END LINE        (LINE -1 when None)
"""
import sys
import types

assert sys.version_info[:2] == (3, 10), "vectors for the 3.10 line table"

import ast, difflib, email.parser, json.decoder, threading, typing  # noqa: E401,F401


def codes(c):
    yield c
    for k in c.co_consts:
        if isinstance(k, types.CodeType):
            yield from codes(k)


n = 0
for mod in (ast, difflib, email.parser, json.decoder, threading, typing):
    src = open(mod.__file__).read()
    for c in codes(compile(src, mod.__file__, "exec")):
        print("code", c.co_firstlineno, c.co_linetable.hex() or "-", len(c.co_code))
        for start, end, line in c.co_lines():
            print("range", start, end, -1 if line is None else line)
        n += 1
# a line jump over 127 and a code offset jump over 255 (several pairs for one step), and a
# function whose first instructions have no line
big = "def far():\n    x = 1\n" + "\n" * 300 + "    return x\n"
big += "def wide(a):\n    return [" + ", ".join(f"a + {i}" for i in range(200)) + "]\n"
for c in codes(compile(big, "<big>", "exec")):
    print("code", c.co_firstlineno, c.co_linetable.hex() or "-", len(c.co_code))
    for start, end, line in c.co_lines():
        print("range", start, end, -1 if line is None else line)
    n += 1
print("end", n)
