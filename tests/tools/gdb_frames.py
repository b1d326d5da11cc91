# gdb_frames.py - sourced by gdb (`-ex 'source gdb_frames.py'`) after `thread apply all bt`: writes
# every thread's frames, as gdb itself sees them, to the JSON file named by $CP_GDB_FRAMES_OUT:
#   {"threads": [{"tid": LWP, "num": N, "frames": [{"level", "pc", "function", "kind", "file",
#                                                    "line"}]}]}
# kind is gdb's frame type: normal, inline, tailcall (a frame gdb synthesized from DWARF call-site
# information; it is not on the stack, so no CFI unwinder can find it), sigtramp, ...
# compare_bt.py reads the `bt` text as the reference and uses this only to learn each frame's kind.
import json
import os

import gdb

KINDS = {gdb.NORMAL_FRAME: "normal", gdb.DUMMY_FRAME: "dummy", gdb.INLINE_FRAME: "inline",
         gdb.TAILCALL_FRAME: "tailcall", gdb.SIGTRAMP_FRAME: "sigtramp", gdb.ARCH_FRAME: "arch",
         gdb.SENTINEL_FRAME: "sentinel"}


def _frames():
    out = []
    f = gdb.newest_frame()
    level = 0
    while f is not None:
        sal = f.find_sal()
        out.append({
            "level": level,
            "pc": "0x%x" % f.pc(),
            "function": f.name(),
            "kind": KINDS.get(f.type(), str(f.type())),
            "file": sal.symtab.filename if sal.symtab else None,
            "line": sal.line or None,
        })
        level += 1
        try:
            f = f.older()
        except gdb.error:
            break
    return out


def _dump(path):
    threads = []
    for thr in sorted(gdb.selected_inferior().threads(), key=lambda t: t.num):
        thr.switch()
        try:
            frames = _frames()
        except gdb.error as e:
            frames = [{"error": str(e)}]
        threads.append({"tid": thr.ptid[1], "num": thr.num, "frames": frames})
    with open(path, "w") as fh:
        json.dump({"threads": threads}, fh, indent=0)


_dump(os.environ.get("CP_GDB_FRAMES_OUT", "gdb_frames.json"))
