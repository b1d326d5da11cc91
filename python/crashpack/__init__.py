"""crashpack - the Python side of crashpack: uncaught exceptions into crash bundles.

    import crashpack
    crashpack.install()

or, with no change to the script, `crashpack python-hook install --python PYTHON` and
CRASHPACK_HOOK=1 in the job's environment (docs/python.md).

On an uncaught exception (before the traceback is printed and before the interpreter tears
down) the hook writes the exception as a crashpack-exception/1 document: type and MRO, message,
the __cause__/__context__ chain, each frame's function, qualname, file, line and source line, known
secret values masked; local variables' values (short, capped reprs) only with `python_locals = on`
in the configuration. It keeps that document in the state directory
(exception-<pid>.json, next to crashpack.checkpoint's files) and asks the node service
(`crashpack agent`) for a live snapshot of this process with the document as its
exception.json member, allowing the agent to ptrace it (PR_SET_PTRACER) for the time of the
request. Then the exception goes on to the hook that was there before: the same traceback, the
same exit status. A request that does not finish in CRASHPACK_HOOK_TIMEOUT seconds (default 30)
is abandoned and recorded as such in the state file. KeyboardInterrupt is not a crash; exceptions
that end a thread but not the process, and unraisable exceptions, are kept as non-fatal events
(in memory, the last 16, and in events-<pid>.json) and go into a later capture.

Standard library only; never imports torch. CPython 3.8 and later.
"""
import os
import sys
import threading

__all__ = ["install", "uninstall", "installed", "last_capture"]

FORMAT = "crashpack-exception/1"
EVENTS_FORMAT = "crashpack-python-events/1"
DEFAULT_SOCKET = "/run/crashpack/agent.sock"
DEFAULT_CONFIG = "/etc/crashpack/crashpack.conf"
DEFAULT_TIMEOUT = 30.0
MAX_EVENTS = 16
REPLY_MAX = 1 << 20
PR_SET_PTRACER = 0x59616D61

_lock = threading.RLock()
_installed = False
_audit_added = False
_busy = False          # the guard: a capture in progress never starts another
_warned = False
_events = []           # non-fatal events, newest last, at most MAX_EVENTS
_events_written = 0.0
_handled = []          # exceptions already captured or passed through (identity)
_prev = {}             # hook name -> the hook that was there before ours
_last = None           # what the last capture did (last_capture())


def _warn(msg):
    """At most one line on stderr per process, for crashpack itself missing or broken."""
    global _warned
    if _warned:
        return
    _warned = True
    try:
        line = "crashpack: %s\n" % msg
        err = sys.stderr or sys.__stderr__
        if err is not None:
            err.write(line)
            err.flush()
        else:
            os.write(2, line.encode("utf-8", "replace"))
    except Exception:
        pass


def config(path=None):
    """The `key = value` lines of the crashpack configuration (CRASHPACK_CONFIG, else
    /etc/crashpack/crashpack.conf) as a dict; {} when it cannot be read."""
    path = path or os.environ.get("CRASHPACK_CONFIG") or DEFAULT_CONFIG
    out = {}
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as f:
            text = f.read(1 << 20)
    except OSError:
        return out
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        k, sep, v = line.partition("=")
        if sep:
            out[k.strip()] = v.strip()
    return out


def _truthy(v):
    return isinstance(v, str) and v.strip().lower() in ("1", "yes", "true", "on")


def _timeout(cfg):
    v = os.environ.get("CRASHPACK_HOOK_TIMEOUT") or cfg.get("python_hook_timeout")
    try:
        t = float(v) if v not in (None, "") else DEFAULT_TIMEOUT
    except ValueError:
        t = DEFAULT_TIMEOUT
    if t != t or t <= 0:
        t = DEFAULT_TIMEOUT
    return min(max(t, 0.1), 3600.0)


def _socket_path(cfg):
    return os.environ.get("CRASHPACK_AGENT_SOCKET") or cfg.get("agent_socket") or DEFAULT_SOCKET


def _job():
    for k in ("CRASHPACK_JOB_ID", "CRASHPACK_JOB", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID"):
        v = os.environ.get(k)
        if v:
            return v
    return None


def _starttime():
    try:
        with open("/proc/self/stat", "rb") as f:
            s = f.read()
        return int(s[s.rindex(b")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _interactive():
    return bool(getattr(sys.flags, "interactive", 0) or getattr(sys.flags, "inspect", 0) or
                hasattr(sys, "ps1"))


def _seen(value):
    return any(v is value for v in _handled)


def _mark(value):
    _handled.append(value)
    del _handled[:-4]


# ---- the state directory (crashpack.checkpoint's: same checks, same place) ----

def _state_write(name, obj):
    try:
        from crashpack import checkpoint
        with checkpoint._lock:
            if checkpoint._dirfd is not None and checkpoint._dirfd_pid != os.getpid():
                checkpoint._dirfd = None  # a forked child: reopen (the checkpoint module's rule)
            checkpoint._write_atomic(name, obj)
        return True
    except Exception:
        return False


def state_files():
    """The paths of this process's exception and events state files."""
    from crashpack import checkpoint
    d = checkpoint.state_dir()
    return (os.path.join(d, "exception-%d.json" % os.getpid()),
            os.path.join(d, "events-%d.json" % os.getpid()))


# ---- the document ----

def _scrubber(cfg):
    from crashpack import _report
    extra = [p for p in (cfg.get("redact_env") or cfg.get("redact_patterns") or "")
             .replace(",", " ").split() if p]
    globs = [p for p in (cfg.get("redact_values") or "").replace(",", " ").split() if p]
    return _report.Scrubber(extra_patterns=extra, value_globs=globs)


def _event(hook, value, tb, thread, scrub):
    from crashpack import _report
    import time
    return {"hook": hook, "time": time.time(), "thread": _report.thread_object(thread, scrub),
            "fatal": False,
            "exception": _report.exc_object(value, scrub, tb, source=False)
            if value is not None else None}


def _record_event(hook, value, tb, thread):
    global _events_written
    import time
    cfg = config()
    ev = _event(hook, value, tb, thread, _scrubber(cfg))
    with _lock:
        _events.append(ev)
        del _events[:-MAX_EVENTS]
        evs = list(_events)
        now = time.monotonic()
        # the file for a later death seen by someone else (a supervisor, the core handler):
        # every one of the first events, then at most once a second
        if len(evs) < MAX_EVENTS or now - _events_written >= 1.0:
            _events_written = now
        else:
            return
    _state_write("events-%d.json" % os.getpid(),
                 {"format": EVENTS_FORMAT, "pid": os.getpid(), "starttime": _starttime(),
                  "events": evs})


def locals_on(cfg):
    """`python_locals = on` in the configuration: the raised exception's frames carry their
    local variables' values (docs/python.md)."""
    return _truthy(cfg.get("python_locals"))


def exception_document(hook, value, tb=None, thread=None, cfg=None):
    """The crashpack-exception/1 document (a dict) for exception instance value."""
    from crashpack import _report
    import time
    cfg = config() if cfg is None else cfg
    scrub = _scrubber(cfg)
    with _lock:
        events = list(_events)
    values = _report.Locals(scrub) if locals_on(cfg) else None
    return {"format": FORMAT, "hook": hook, "fatal": True, "time": time.time(),
            "pid": os.getpid(), "thread": _report.thread_object(thread, scrub),
            "python": _report.python_object(),
            "exception": _report.exc_object(value, scrub, tb, local_values=values),
            "events": events, "abandoned": False}


# ---- the node service ----

def _prctl_ptracer(pid):
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PTRACER, ctypes.c_ulong(pid), ctypes.c_ulong(0),
                          ctypes.c_ulong(0), ctypes.c_ulong(0)) == 0
    except Exception:
        return False


def ask_agent(request, timeout, path=None, cfg=None):
    """Sends one request (a dict) to the node service and returns (result, reply): result is
    "ok" (reply: the answer), "refused" (the answer said ok: false), "no agent" (no socket, or
    nobody listening), "abandoned" (no answer in `timeout` seconds: the connection is closed and
    the request dropped) or "error: ..." (reply None). For an exception capture the agent (the
    peer of the socket, SO_PEERCRED) may ptrace this process until the answer arrives."""
    import json
    import socket
    import struct
    import time
    deadline = time.monotonic() + timeout
    path = path or _socket_path(config() if cfg is None else cfg)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ptracer = False
    try:
        try:
            s.settimeout(max(deadline - time.monotonic(), 0.001))
            s.connect(path)
        except socket.timeout:
            return "abandoned", None
        except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError):
            return "no agent", None
        except OSError as e:
            return "error: connect %s: %s" % (path, e), None
        try:
            cred = s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            agent_pid = struct.unpack("3i", cred)[0]
        except (OSError, AttributeError, struct.error):
            agent_pid = 0
        if request.get("kind") == "exception" and agent_pid > 0:
            ptracer = _prctl_ptracer(agent_pid)
        data = (json.dumps(request, separators=(",", ":")) + "\n").encode("utf-8")
        buf = b""
        try:
            s.settimeout(max(deadline - time.monotonic(), 0.001))
            s.sendall(data)
            while b"\n" not in buf and len(buf) < REPLY_MAX:
                left = deadline - time.monotonic()
                if left <= 0:
                    return "abandoned", None
                s.settimeout(left)
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
        except socket.timeout:
            return "abandoned", None
        except OSError as e:
            return "error: %s" % e, None
        try:
            reply = json.loads(buf.split(b"\n", 1)[0].decode("utf-8"))
        except ValueError:
            return "error: no valid answer from the agent", None
        if not isinstance(reply, dict):
            return "error: no valid answer from the agent", None
        return ("ok" if reply.get("ok") is True else "refused"), reply
    finally:
        try:
            s.close()
        except OSError:
            pass
        if ptracer:
            _prctl_ptracer(0)


def _capture(hook, value, tb, thread):
    """Writes the document, asks the agent, records an abandoned request. Never raises."""
    global _last
    import json
    import time
    cfg = config()
    doc = exception_document(hook, value, tb, thread, cfg)
    name = "exception-%d.json" % os.getpid()
    _state_write(name, doc)
    text = json.dumps(doc)
    t = doc["exception"]["type"] if doc["exception"] else "exception"
    request = {"op": "capture", "kind": "exception", "pid": os.getpid(),
               "start_time": _starttime(), "status": None, "signal": None,
               "time": doc["time"], "trigger": "hook",
               "reason": "uncaught %s (%s)" % (t, hook), "job": _job(),
               "members": {"exception.json": text}}
    t0 = time.monotonic()
    result, reply = ask_agent(request, _timeout(cfg), cfg=cfg)
    if result == "abandoned":
        doc["abandoned"] = True
        _state_write(name, doc)
    _last = {"result": result, "reply": reply, "seconds": time.monotonic() - t0,
             "hook": hook, "state_file": state_files()[0]}


def last_capture():
    """What the last capture of this process did: {"result", "reply", "seconds", "hook",
    "state_file"}, or None."""
    return _last


# ---- the hooks ----

def _fatal_main(tb):
    """An exception that reaches sys.excepthook ends the process when it came up to the bottom
    of the main thread's Python stack (a C extension's PyErr_Print in the middle of a program
    does not) and no interactive prompt follows."""
    if _interactive() or threading.current_thread() is not threading.main_thread():
        return False
    if tb is None:
        return True  # e.g. the script's SyntaxError
    try:
        return tb.tb_frame.f_back is None
    except Exception:
        return True


def _on_uncaught(etype, value, tb):
    """sys.excepthook's capture, from the audit event (whoever's hook is installed) or from our
    sys.excepthook (a direct call)."""
    global _busy
    if not _installed or _busy or value is None or _seen(value):
        return
    if isinstance(value, (KeyboardInterrupt, SystemExit)) or not isinstance(value, BaseException):
        return
    _busy = True
    try:
        _mark(value)
        if _fatal_main(tb):
            _capture("sys.excepthook", value, tb, None)
        else:
            _record_event("sys.excepthook", value, tb, None)
    except BaseException as e:  # never let crashpack change what the user sees
        _warn("python hook failed: %s: %s" % (type(e).__name__, e))
    finally:
        _busy = False


def _audit(event, args):
    if event != "sys.excepthook":
        return
    try:
        _on_uncaught(args[1], args[2], args[3])
    except BaseException:
        pass


class _Hook:
    """A hook in the chain: ours, then the one that was there before."""

    def __init__(self, name, fn, previous):
        self.name, self.fn, self.previous = name, fn, previous
        self.__crashpack__ = True

    def __call__(self, *args):
        try:
            self.fn(*args)
        except BaseException:
            pass
        prev = self.previous
        if prev is not None:
            return prev(*args)


def _sys_excepthook(etype, value, tb):
    _on_uncaught(etype, value, tb)


def _last_thread_standing(thread):
    """Does this thread's end end the process? The main thread has returned and no other
    non-daemon thread runs."""
    try:
        if threading.main_thread().is_alive():
            return False
        for t in threading.enumerate():
            if t is not thread and t is not threading.main_thread() and not t.daemon and \
                    t.is_alive():
                return False
        return True
    except Exception:
        return False


def _thread_excepthook(args):
    global _busy
    value = getattr(args, "exc_value", None)
    if not _installed or _busy or value is None or _seen(value) or \
            isinstance(value, (KeyboardInterrupt, SystemExit)):
        return
    _busy = True
    try:
        _mark(value)
        thread = getattr(args, "thread", None)
        if _last_thread_standing(thread if thread is not None else threading.current_thread()):
            _capture("threading.excepthook", value, getattr(args, "exc_traceback", None), thread)
        else:
            _record_event("threading.excepthook", value, getattr(args, "exc_traceback", None),
                          thread)
    except BaseException as e:
        _warn("python hook failed: %s: %s" % (type(e).__name__, e))
    finally:
        _busy = False


def _unraisable(u):
    global _busy
    if not _installed or _busy:
        return
    _busy = True
    try:
        _record_event("unraisablehook", getattr(u, "exc_value", None),
                      getattr(u, "exc_traceback", None), None)
    except BaseException as e:
        _warn("python hook failed: %s: %s" % (type(e).__name__, e))
    finally:
        _busy = False


def _ours(h):
    return getattr(h, "__crashpack__", False) is True


def _after_fork_child():
    global _busy
    del _events[:]
    del _handled[:]
    _busy = False


PING_TIMEOUT = 1.0
WARNED_ENV = "CRASHPACK_HOOK_WARNED"


def _check_agent():
    """At start-up, once: when no agent answers a ping, one line on stderr saying that an
    uncaught exception will not be captured and how to fix it; quiet when the agent answers (or
    is busy). The line is said once per job: the processes this one starts inherit
    CRASHPACK_HOOK_WARNED=1 and stay quiet. Never raises."""
    if os.environ.get(WARNED_ENV):
        return
    try:
        cfg = config()
        sock = _socket_path(cfg)
        result, _ = ask_agent({"op": "ping"}, PING_TIMEOUT, path=sock, cfg=cfg)
        if result != "no agent" and not result.startswith("error: connect"):
            return  # it answered (a refusal, "busy"), or is slow: it is there
        why = "nothing listens there" if result == "no agent" else result[len("error: "):]
        line = ("crashpack: warning: no crashpack agent answers at %s (%s): an uncaught exception "
                "in this process will not be captured; start `crashpack agent` as root "
                "(scripts/systemd/crashpack-agent.service), or set agent_socket in %s (or "
                "CRASHPACK_AGENT_SOCKET) to the socket it listens on\n"
                % (sock, why, os.environ.get("CRASHPACK_CONFIG") or DEFAULT_CONFIG))
        os.environ[WARNED_ENV] = "1"
        err = sys.stderr or sys.__stderr__
        if err is not None:
            err.write(line)
            err.flush()
        else:
            os.write(2, line.encode("utf-8", "replace"))
    except Exception:
        pass


def install():
    """Hooks sys.excepthook, threading.excepthook and sys.unraisablehook, each chained to the
    hook that was there; idempotent. A framework that replaces sys.excepthook later does not
    lose the capture: it runs from the interpreter's "sys.excepthook" audit event, which fires
    whichever hook is installed. Returns True."""
    global _installed, _audit_added
    # what a capture needs is loaded now, not while the process is failing
    from crashpack import _report, checkpoint  # noqa: F401
    import json  # noqa: F401
    import linecache  # noqa: F401
    with _lock:
        first = not _installed
        if not _ours(sys.excepthook):
            sys.excepthook = _Hook("sys.excepthook", _sys_excepthook, sys.excepthook)
        if not _ours(threading.excepthook):
            threading.excepthook = _Hook("threading.excepthook", _thread_excepthook,
                                         threading.excepthook)
        if hasattr(sys, "unraisablehook") and not _ours(sys.unraisablehook):
            sys.unraisablehook = _Hook("sys.unraisablehook", _unraisable, sys.unraisablehook)
        if not _audit_added:
            sys.addaudithook(_audit)  # cannot be removed: uninstall() makes it inert
            if hasattr(os, "register_at_fork"):
                os.register_at_fork(after_in_child=_after_fork_child)
            _audit_added = True
        _installed = True
    if first:
        _check_agent()
    return True


def uninstall():
    """Takes our hooks out where they are still the installed ones (a hook installed on top of
    ours keeps calling it, and it then only passes through); the audit hook stays, inert."""
    global _installed
    with _lock:
        _installed = False
        for mod, attr in ((sys, "excepthook"), (threading, "excepthook"),
                          (sys, "unraisablehook")):
            h = getattr(mod, attr, None)
            if _ours(h):
                setattr(mod, attr, h.previous)


def installed():
    return _installed


def __getattr__(name):  # `crashpack.checkpoint` without importing it up front
    if name == "checkpoint":
        import importlib
        return importlib.import_module("crashpack.checkpoint")
    raise AttributeError("module 'crashpack' has no attribute %r" % name)
