"""pylocals_vectors.py - the reprs the hook gives local values (python/crashpack/_report.py), for
tests/unit/test_pylocals.c to compare with analyze/native/pylocals.c's, which reads the same values
out of a core: one line per value, `KIND HEX EXPECTED` (KIND f: a double's 8 bytes, little-endian;
s: a str's UTF-8; b: bytes), then `end N`. Standard library only."""
import os
import random
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from crashpack import _report  # noqa: E402

L = _report.Locals(lambda s: s)
rnd = random.Random(23)
n = 0


def out(kind, raw, value):
    global n
    print("%s %s %s" % (kind, raw.hex() or "-", L.repr(value).encode("utf-8").hex()))
    n += 1


floats = [0.0, -0.0, 1.0, -1.0, 0.1, 0.5, 2.5, 100.0, 1500.0, 1e15, 1e16, 1e17, 1e22, 1e-4, 1e-5,
          0.00012345, 123456789.123, 3.141592653589793, 1.5e300, -2.5e-300, 5e-324,
          1.7976931348623157e308, 2.0 ** 53, 9007199254740993.0, 1 / 3, 2 / 3, 1e-7, 12345.6789,
          float("inf"), float("-inf"), float("nan")]
for _ in range(3000):
    floats.append(struct.unpack("<d", struct.pack("<Q", rnd.getrandbits(64)))[0])
    floats.append(rnd.uniform(-1e6, 1e6))
    floats.append(round(rnd.uniform(-1000, 1000), rnd.randrange(0, 8)))
    floats.append(rnd.random() * 10 ** rnd.randrange(-20, 25))
for d in floats:
    if d != d and struct.pack("<d", d) != struct.pack("<d", float("nan")):
        continue  # another NaN's payload: Python says nan too, but one is enough
    out("f", struct.pack("<d", d), d)

# (no NUL: the walker reads a str's U+0000 as U+FFFD, its strings are C strings)
strings = ["", "abc", "a'b", 'a"b', "a'b\"c", "\n\t\r\x01\x1f\x7f\x80\x9f", "\\", "x" * 300,
           "\u00e9\u4e2d\U0001f600", "'" * 200, "tab\there", "quote ' and \\ back"]
printable = [chr(c) for c in range(0x20, 0x7f)] + ["\n", "\t", "\x01", "\x7f", "\u00e9", "\u00fc",
                                                    "\u4e2d", "\U0001f600", "\x85", "'", '"']
for _ in range(2000):
    strings.append("".join(rnd.choice(printable) for _ in range(rnd.randrange(0, 200))))
for s in strings:
    out("s", s.encode("utf-8"), s)

blobs = [b"", b"\x00ab'c", b"a\"b", b"'\"", bytes(range(256)), b"z" * 500, b"\\"]
for _ in range(2000):
    blobs.append(bytes(rnd.getrandbits(8) for _ in range(rnd.randrange(0, 200))))
for b in blobs:
    out("b", b, b)
print("end %d" % n)
