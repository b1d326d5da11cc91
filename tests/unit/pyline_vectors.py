"""pyline_vectors.py - test vectors for analyze/native/python.c's line-table decoder, from the running
interpreter itself (CPython 3.11 to 3.14: one line-table format): for every code object of a few standard-library modules (and
the code objects nested in them), its co_firstlineno, co_linetable, and co_lines() - the ranges
CPython's own decoder gives. Output, one per line:
    code FIRSTLINENO HEX_LINETABLE NBYTES
    range START END LINE        (LINE -1 when None)
"""
import sys
import types

assert (3, 11) <= sys.version_info[:2] <= (3, 14), "vectors for the 3.11-3.14 line table"

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
print("end", n)
