"""crashpack._report - an exception as the crashpack-exception/1 document (docs/python.md).

Builds EXC objects (type with its MRO, message, frames, the __cause__/__context__ chain, a
DataLoader/multiprocessing worker's original traceback parsed from the re-raised text) from live
exception objects, never reading a local variable's value, and masks known secret values in every
text field the way the capture masks them (capture/proc.c, common/scrub.c): each byte of a secret
becomes '*', so lengths do not move. Standard library only.
"""
import fnmatch
import os
import re
import sys

MESSAGE_MAX = 64 * 1024  # bytes of UTF-8 per text field
MAX_FRAMES = 256         # per exception; the innermost are kept
MAX_DEPTH = 16           # of the __cause__/__context__ chain
MAX_NODES = 64           # EXC objects in one chain in all
SCRUB_MIN = 6            # CP_SCRUB_MIN: shorter values are not hunted
SCRUB_MAXLEN = 4096      # CP_SCRUB_MAXLEN

# capture/proc.c's secret_names / not_secret_names (case-insensitive globs)
SECRET_NAMES = ("*PASS*", "*PWD*", "*SECRET*", "*TOKEN*", "*KEY*", "*CREDENTIAL*", "*AUTH*",
                "*COOKIE*", "*SESSION*", "*PRIVATE*")
NOT_SECRET_NAMES = ("PWD", "OLDPWD", "*KEYBOARD*", "*KEYMAP*")

_URL = re.compile(r"://([^/ \t\"'@]*)@")


def _match(name, pats):
    up = name.upper()
    return any(fnmatch.fnmatchcase(up, p) for p in pats)


def _is_secret_name(name, extra=()):
    if _match(name, SECRET_NAMES) and not _match(name, NOT_SECRET_NAMES):
        return True
    return any(fnmatch.fnmatchcase(name.upper(), p.upper()) for p in extra)


def url_passwords(text):
    """The passwords of scheme://user:password@host in text."""
    out = []
    for m in _URL.finditer(text):
        user, sep, pw = m.group(1).partition(":")
        if sep and pw:
            out.append(pw)
    return out


class Scrubber:
    """Masks secret values: the values of secret-looking environment variables (and the
    configured redact_env patterns), the passwords of URLs found in any environment value, and
    URL passwords in the text itself."""

    def __init__(self, environ=None, extra_patterns=()):
        env = os.environ if environ is None else environ
        vals = set()
        for k, v in list(env.items()):
            if not isinstance(v, str) or not v:
                continue
            if _is_secret_name(k, extra_patterns):
                vals.add(v[:SCRUB_MAXLEN])
            for pw in url_passwords(v):
                vals.add(pw)
        # absolute paths without a space are names of files, not secrets (cp_scrub_add)
        self.values = sorted((v for v in vals if len(v) >= SCRUB_MIN and
                              not (v.startswith("/") and " " not in v)), key=len, reverse=True)

    def __call__(self, s):
        if not isinstance(s, str) or not s:
            return s
        for v in self.values:
            if v in s:
                s = s.replace(v, "*" * len(v))
        if "://" in s:
            s = _URL.sub(lambda m: "://" + _mask_userinfo(m.group(1)) + "@", s)
        return s


def _mask_userinfo(ui):
    user, sep, pw = ui.partition(":")
    return user + sep + "*" * len(pw) if sep else ui


def cap(s, limit=MESSAGE_MAX):
    """s cut to at most `limit` bytes of UTF-8 (on a character boundary)."""
    if s is None:
        return None
    if len(s) * 4 <= limit:
        return s
    b = s.encode("utf-8", "surrogatepass")
    if len(b) <= limit:
        return s
    return b[:limit].decode("utf-8", "ignore")


def clean(s):
    """Text that json can write as valid UTF-8 (lone surrogates from undecodable bytes replaced)."""
    if s is None:
        return None
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "replace").decode("utf-8")


def type_name(t):
    """module + qualname, "builtins." dropped: torch.cuda.OutOfMemoryError, ValueError."""
    try:
        mod = getattr(t, "__module__", None)
        qn = getattr(t, "__qualname__", None) or getattr(t, "__name__", None) or repr(t)
        if not isinstance(mod, str) or mod in ("builtins", "__builtin__", "exceptions"):
            return str(qn)
        return "%s.%s" % (mod, qn)
    except Exception:
        return "<unknown>"


def _safe_str(exc):
    try:
        return str(exc)
    except BaseException:  # a __str__ that raises: what traceback prints
        return "<exception str() failed>"


def _qualname(frame, code):
    q = getattr(code, "co_qualname", None)  # 3.11+
    if isinstance(q, str):
        return q
    # best effort before 3.11: a method whose first argument is self/cls, found by its code
    # object on that class's MRO (the argument's type is read, never its value)
    name = code.co_name
    try:
        if code.co_argcount and code.co_varnames[0] in ("self", "cls"):
            obj = frame.f_locals.get(code.co_varnames[0])
            cls = obj if isinstance(obj, type) else type(obj)
            for c in cls.__mro__:
                f = c.__dict__.get(name)
                f = getattr(f, "__func__", f)
                if getattr(f, "__code__", None) is code:
                    return "%s.%s" % (c.__qualname__, name)
    except Exception:
        pass
    return name


def frames_of(tb, scrub):
    """The traceback's frames, outermost first: the innermost MAX_FRAMES, and whether more were
    cut. Only names, files and lines: no local values."""
    out = []
    n = 0
    while tb is not None and n < 1000000:
        n += 1
        try:
            f = tb.tb_frame
            code = f.f_code
            line = tb.tb_lineno
            out.append({"function": scrub(clean(code.co_name)),
                        "qualname": scrub(clean(_qualname(f, code))),
                        "file": scrub(clean(code.co_filename)),
                        "line": line if isinstance(line, int) and line >= 0 else None})
        except Exception:
            out.append({"function": "?", "qualname": "?", "file": "?", "line": None})
        if len(out) > 2 * MAX_FRAMES:
            del out[:-MAX_FRAMES]
        tb = tb.tb_next
    truncated = len(out) > MAX_FRAMES or n > len(out)
    return out[-MAX_FRAMES:], truncated


_DATALOADER = re.compile(r"\ACaught (\S+) in (DataLoader worker process (\d+)|pin memory thread[^\n]*?)"
                         r"\.\nOriginal (Traceback \(most recent call last\):\n.*)\Z", re.S)
_REMOTE = re.compile(r'\A\s*"""\n(.*?)"""\s*\Z', re.S)
_LAST_TYPE = re.compile(r"^([A-Za-z_][\w.]*)(?::|$)")
_REMOTE_TYPES = ("multiprocessing.pool.RemoteTraceback",
                 "concurrent.futures.process._RemoteTraceback")


def _last_type(tb_text):
    for line in reversed(tb_text.rstrip("\n").split("\n")):
        if line and not line.startswith(" "):
            m = _LAST_TYPE.match(line)
            return m.group(1) if m else None
    return None


def parse_worker(message, exc=None):
    """The worker object for a re-raised worker error, or None:
    "Caught ValueError in DataLoader worker process 0.\\nOriginal Traceback ..." (torch's
    ExceptionWrapper.reraise), or the RemoteTraceback text multiprocessing.pool and
    concurrent.futures chain as __cause__."""
    if not message:
        return None
    m = _DATALOADER.match(message)
    if m:
        short, where, wid, text = m.group(1), m.group(2), m.group(3), m.group(4)
        full = _last_type(text)
        orig = full if full and (full == short or full.endswith("." + short)) else short
        return {"kind": "DataLoader", "id": int(wid) if wid else None, "pid": None,
                "original_type": orig, "original_traceback": text}
    if exc is not None:
        cause = getattr(exc, "__cause__", None)
        if cause is not None and type_name(type(cause)) in _REMOTE_TYPES:
            w = parse_worker(_safe_str(cause), cause)
            if w:
                return w
        if type_name(type(exc)) in _REMOTE_TYPES:
            r = _REMOTE.match(message)
            if r:
                text = r.group(1)
                return {"kind": "multiprocessing", "id": None, "pid": None,
                        "original_type": _last_type(text), "original_traceback": text}
    return None


def exc_object(exc, scrub, tb=None, _depth=0, _seen=None):
    """EXC for exception instance exc (docs/python.md), its chain at most MAX_DEPTH deep,
    cycles cut."""
    if _seen is None:
        _seen = set()
    if exc is None or id(exc) in _seen or _depth >= MAX_DEPTH or len(_seen) >= MAX_NODES:
        return None
    _seen.add(id(exc))
    t = type(exc)
    try:
        mro = [type_name(c) for c in t.__mro__ if c is not object]
    except Exception:
        mro = [type_name(t)]
    raw = _safe_str(exc)
    message = scrub(cap(clean(raw)))
    frames, truncated = frames_of(tb if tb is not None else getattr(exc, "__traceback__", None),
                                  scrub)
    o = {"type": scrub(clean(type_name(t))), "mro": [scrub(clean(x)) for x in mro],
         "message": message, "frames": frames}
    if truncated:
        o["frames_truncated"] = True
    cause = getattr(exc, "__cause__", None)
    context = None if getattr(exc, "__suppress_context__", False) else getattr(exc, "__context__",
                                                                                None)
    o["cause"] = exc_object(cause, scrub, None, _depth + 1, _seen) \
        if isinstance(cause, BaseException) else None
    o["context"] = exc_object(context, scrub, None, _depth + 1, _seen) \
        if isinstance(context, BaseException) else None
    try:
        w = parse_worker(clean(raw), exc)
    except Exception:
        w = None
    if w:
        w["original_traceback"] = scrub(cap(clean(w["original_traceback"])))
        w["original_type"] = scrub(clean(w["original_type"])) if w["original_type"] else None
    o["worker"] = w
    return o


def thread_object(thread=None):
    import threading
    t = thread if thread is not None else threading.current_thread()
    ident = getattr(t, "ident", None)
    native = getattr(t, "native_id", None)
    if thread is None or t is threading.current_thread():
        ident = threading.get_ident()
        gn = getattr(threading, "get_native_id", None)
        native = gn() if gn else native
    return {"ident": ident, "native_id": native, "name": clean(getattr(t, "name", None))}


def python_object():
    return {"version": sys.version.split()[0],
            "implementation": getattr(getattr(sys, "implementation", None), "name", "cpython"),
            "executable": clean(sys.executable)}
