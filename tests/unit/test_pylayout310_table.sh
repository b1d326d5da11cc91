#!/usr/bin/env bash
# test_pylayout310_table.sh SRC: analyze/native/pylayout310.c's CPython 3.10 row is exactly what
# scripts/pylayout310-gen.sh prints for pyenv's 3.10 headers (the row was generated and still matches
# the interpreter's structures), and the row reads a live 3.10 right (ctypes over its own objects):
# the runtime's interpreter list and GIL, the thread state, a frame, a code object, a str, a dict's
# keys (whose 3.10 struct is not in the installed headers: the generator mirrors it), a module's and
# an instance's dict, and glibc's pthread tid. Skips (77) without a pyenv 3.10.
set -u
src=${1:?source dir}
py=${CP_PYTHON310:-$(ls -d /root/.pyenv/versions/3.10.*/bin/python3.10 2>/dev/null | tail -1)}
[ -n "$py" ] && [ -x "$py" ] || { echo "SKIP: no pyenv CPython 3.10"; exit 77; }
want=$("$src/scripts/pylayout310-gen.sh" | grep -v '^ */\*') || { echo "FAIL: the generator failed"; exit 1; }
have=$(awk '/^const struct py310_layout pylayout310 = \{$/ {on = 1; next} /^\};$/ {on = 0} on' \
       "$src/analyze/native/pylayout310.c" | grep -v '^ */\*')
if [ "$want" != "$have" ]; then
    echo "FAIL: analyze/native/pylayout310.c differs from scripts/pylayout310-gen.sh's output:"
    diff <(echo "$have") <(echo "$want")
    exit 1
fi
echo "ok: the 3.10 layout row is the generator's ($(echo "$have" | wc -l) fields)"
echo "$have" | "$py" -c '
import ctypes, re, sys, threading
L = {m.group(1): int(m.group(2)) for m in re.finditer(r"\.([\w.]+) = (\d+),", sys.stdin.read())}
def ptr(a): return ctypes.c_uint64.from_address(a).value
def i64(a): return ctypes.c_int64.from_address(a).value
def i32(a): return ctypes.c_int32.from_address(a).value
bad = []
def eq(what, got, want):
    if got != want:
        bad.append(f"{what}: {got:#x} != {want:#x}" if isinstance(got, int) else what)
api = ctypes.pythonapi
api.PyThreadState_Get.restype = ctypes.c_void_p
api.PyInterpreterState_Get.restype = ctypes.c_void_p
ts, interp = api.PyThreadState_Get(), api.PyInterpreterState_Get()
rt = ctypes.addressof(ctypes.c_char.in_dll(api, "_PyRuntime"))
eq("runtime interpreters.head", ptr(rt + L["rt_interpreters_head"]), interp)
eq("gil locked (held here)", i32(rt + L["rt_gil_locked"]), 1)
eq("gil last_holder", ptr(rt + L["rt_gil_last_holder"]), ts)
eq("interp modules", ptr(interp + L["interp_modules"]), id(sys.modules))
eq("interp id", i64(interp + L["interp_id"]), 0)
eq("tstate interp", ptr(ts + L["ts_interp"]), interp)
eq("tstate thread_id", ptr(ts + L["ts_thread_id"]), threading.get_ident())
eq("pthread tid", i32(threading.get_ident() + L["pthread_tid"]), threading.get_native_id())
# the thread-state list holds this thread
t, seen = ptr(interp + L["interp_tstate_head"]), False
for _ in range(100):
    if not t: break
    seen |= t == ts
    t = ptr(t + L["ts_next"])
eq("tstate list has this thread", seen, True)
def gen():
    yield 1
g = gen(); next(g)
f = g.gi_frame
eq("frame ob_type", ptr(id(f) + L["base.ob_type"]), id(type(f)))
eq("type tp_name", ctypes.string_at(ptr(id(type(f)) + L["base.tp_name"])), b"frame")
eq("frame f_code", ptr(id(f) + L["f_code"]), id(f.f_code))
eq("frame f_lasti (code units)", i32(id(f) + L["f_lasti"]) * L["code_unit"], f.f_lasti)
h = sys._getframe()
eq("frame f_back", ptr(id(h) + L["f_back"]), id(h.f_back) if h.f_back else 0)
c = gen.__code__
for k in ("co_name", "co_filename", "co_linetable", "co_code"):
    eq(k, ptr(id(c) + L[k]), id(getattr(c, k)))
eq("co_firstlineno", i32(id(c) + L["co_firstlineno"]), c.co_firstlineno)
eq("bytes ob_size", i64(id(c.co_code) + L["base.ob_size"]), len(c.co_code))
eq("bytes ob_sval", ctypes.string_at(id(c.co_code) + L["bytes_sval"], len(c.co_code)), c.co_code)
s = "layout" + str(310)
eq("str length", i64(id(s) + L["base.str_length"]), len(s))
st = ctypes.c_uint32.from_address(id(s) + L["base.str_state"]).value
eq("str kind/compact/ascii", (st >> L["base.str_kind_shift"] & 7, st >> L["base.str_compact_shift"] & 1, st >> L["base.str_ascii_shift"] & 1), (1, 1, 1))
eq("str ascii data", ctypes.string_at(id(s) + L["base.str_ascii_data"], len(s)), s.encode())
u = "l\u00e4yout" + str(310)
eq("str compact data", ctypes.string_at(id(u) + L["base.str_compact_data"], len(u)), u.encode("latin-1"))
n = 2**40 + 5
eq("int digits", ctypes.c_uint32.from_address(id(n) + L["base.long_digit"]).value | ctypes.c_uint32.from_address(id(n) + L["base.long_digit"] + 4).value << L["base.long_shift"], n)
d = {"k%d" % i: object() for i in range(5)}
keys = ptr(id(d) + L["dict_keys"])
eq("dict combined", ptr(id(d) + L["dict_values"]), 0)
eq("dk_size", i64(keys + L["dk_size"]), 8)
eq("dk_nentries", i64(keys + L["dk_nentries"]), 5)
ent = keys + L["dk_indices"] + 8 * 1
for i, (k, v) in enumerate(d.items()):
    eq("entry key %d" % i, ptr(ent + i * L["entry_size"] + L["entry_key"]), id(k))
    eq("entry value %d" % i, ptr(ent + i * L["entry_size"] + L["entry_value"]), id(v))
big = {i: i for i in range(1000)}   # 2-byte indices
keys = ptr(id(big) + L["dict_keys"])
size = i64(keys + L["dk_size"])
eq("big dk_size (2048)", size, 2048)
ent = keys + L["dk_indices"] + size * 2
eq("big entry 999", ptr(ent + 999 * L["entry_size"] + L["entry_key"]), id(list(big)[999]))
eq("module md_dict", ptr(id(threading) + L["module_dict"]), id(threading.__dict__))
th = threading.current_thread()
off = i64(id(type(th)) + L["tp_dictoffset"])
eq("instance dict (tp_dictoffset)", ptr(id(th) + off), id(th.__dict__))
if bad:
    print("FAIL: the 3.10 row does not read a live 3.10:"); [print("  " + b) for b in bad]; sys.exit(1)
print("ok: the row reads a live CPython %d.%d.%d (runtime, thread state, frame, code, str, int, dict, module, instance, pthread tid)" % sys.version_info[:3])
'
