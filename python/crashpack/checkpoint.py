"""crashpack.checkpoint - tell crashpack where the last completed checkpoint is.

A training script adds two lines:

    import crashpack.checkpoint as crashpack_checkpoint   # or the old name: import crashpack_checkpoint
    crashpack_checkpoint.install()

From then on every torch.save (and safetensors.torch.save_file, when safetensors is importable)
to a file path is recorded in a small state file that the crashpack capture handler reads when the
process crashes: the checkpoint's absolute path, the training step, the time, its size and the
pid. The record is written only after the save has returned, atomically (temporary file +
rename), so it never names a half-written file as complete; a separate in-progress marker is
written before a save starts and removed when it ends, so a crash in the middle of a save is
visible as such.

Where: $CRASHPACK_STATE_DIR if it is set in the process's initial environment (the capture
handler reads the same value from /proc/<pid>/environ, so a later os.environ change is ignored on
both sides), else /tmp/crashpack-<uid>/; the files are checkpoint-<pid>.json and
checkpoint-<pid>.saving. The directory is created 0700 and used only when it is a real directory
(not a symlink) owned by this user and writable by nobody else: the handler refuses anything else,
so that no user can plant a checkpoint path into another user's crash bundle.

The step comes from a `crashpack_step=N` keyword on the save call, or from set_step(N). Saves to
file objects are not recorded automatically (their size and completion are unknown to a wrapper);
call record(path) after such a save. Nothing here ever makes a save fail: a problem with the
state file is reported once on stderr and recording stops.

Pure Python, standard library only; tested with Debian's python3-torch.
"""
import functools
import json
import os
import stat
import sys
import threading
import time

__all__ = ["install", "set_step", "record", "state_dir", "state_file"]

FORMAT = "crashpack-checkpoint-state/1"
HISTORY = 16  # completed saves kept in the state file, newest last

_lock = threading.RLock()
_step = None
_history = []
_disabled = None  # reason recording stopped, or None
_dirfd = None
_dirfd_pid = None
_installed = {}


def _initial_env(name):
    # The value at process start, as the capture handler sees it in /proc/<pid>/environ.
    try:
        with open("/proc/self/environ", "rb") as f:
            for kv in f.read().split(b"\0"):
                k, sep, v = kv.partition(b"=")
                if sep and k == name.encode():
                    return os.fsdecode(v)
        return None
    except OSError:
        return os.environ.get(name)


_STATE_DIR = _initial_env("CRASHPACK_STATE_DIR")


def state_dir():
    """The directory the state file lives in."""
    if _STATE_DIR and os.path.isabs(_STATE_DIR):
        return _STATE_DIR
    return "/tmp/crashpack-%d" % os.getuid()


def state_file():
    """The path of this process's state file."""
    return os.path.join(state_dir(), "checkpoint-%d.json" % os.getpid())


def _warn(msg):
    global _disabled
    if _disabled is None:
        _disabled = msg
        try:
            sys.stderr.write("crashpack_checkpoint: %s; checkpoints are not recorded\n" % msg)
        except Exception:
            pass


def _open_dir():
    # One descriptor for the directory, checked once: every later file operation is relative to
    # it, so the directory cannot be swapped for a symlink between checks and writes. Reopened
    # after a fork (the child has its own pid and state file, the same directory).
    global _dirfd, _dirfd_pid
    if _dirfd is not None:
        return _dirfd
    d = state_dir()
    if os.path.realpath(d) != os.path.normpath(d):
        # the handler opens the directory without following a symlink at any level
        raise PermissionError("%s has a symlink in its path (the capture handler would refuse it;"
                              " set CRASHPACK_STATE_DIR to %s)" % (d, os.path.realpath(d)))
    os.makedirs(d, 0o700, exist_ok=True)
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    st = os.fstat(fd)
    bad = None
    if not stat.S_ISDIR(st.st_mode):
        bad = "not a directory"
    elif st.st_uid != os.geteuid():
        bad = "owned by uid %d, not by this user (%d)" % (st.st_uid, os.geteuid())
    elif st.st_mode & 0o022:
        bad = "writable by group or others (mode %o)" % stat.S_IMODE(st.st_mode)
    if bad:
        os.close(fd)
        raise PermissionError("%s is %s" % (d, bad))
    _dirfd, _dirfd_pid = fd, os.getpid()
    return fd


def _write_atomic(name, obj):
    fd_dir = _open_dir()
    data = (json.dumps(obj, sort_keys=True) + "\n").encode()
    tmp = ".%s.%d.tmp" % (name, threading.get_ident())
    try:
        os.unlink(tmp, dir_fd=fd_dir)
    except FileNotFoundError:
        pass
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                 dir_fd=fd_dir)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
    os.replace(tmp, name, src_dir_fd=fd_dir, dst_dir_fd=fd_dir)


def _starttime():
    # Field 22 of /proc/self/stat: lets the handler tell this process's state file from one a
    # dead process with the same pid left behind.
    try:
        with open("/proc/self/stat", "rb") as f:
            s = f.read()
        return int(s[s.rindex(b")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _guard(fn):
    @functools.wraps(fn)
    def run(*a, **k):
        global _dirfd, _history
        if _disabled is not None:
            return None
        with _lock:
            if _dirfd is not None and _dirfd_pid != os.getpid():
                _dirfd, _history = None, []  # a forked child: its own state file
            try:
                return fn(*a, **k)
            except Exception as e:  # a state-file problem must never fail the save
                _warn("%s: %s" % (state_dir(), e))
                return None
    return run


@_guard
def _begin(path, step, kind):
    _write_atomic("checkpoint-%d.saving" % os.getpid(),
                  {"format": FORMAT, "pid": os.getpid(), "path": path, "step": step,
                   "kind": kind, "started": time.time(), "starttime": _starttime()})


@_guard
def _end():
    try:
        os.unlink("checkpoint-%d.saving" % os.getpid(), dir_fd=_open_dir())
    except FileNotFoundError:
        pass


@_guard
def _record(path, step, kind):
    try:
        size = os.stat(path).st_size
    except OSError:
        size = None
    entry = {"path": path, "step": step, "time": time.time(), "size": size, "pid": os.getpid(),
             "kind": kind}
    _history.append(entry)
    del _history[:-HISTORY]
    _write_atomic("checkpoint-%d.json" % os.getpid(),
                  {"format": FORMAT, "pid": os.getpid(), "starttime": _starttime(),
                   "last": entry, "history": list(_history)})


def set_step(step):
    """The training step recorded with the following saves (unless a save names its own)."""
    global _step
    _step = step


def record(path, step=None):
    """Record a completed save by hand (a save to a file object, or a custom writer)."""
    _record(os.path.abspath(os.fspath(path)), _step if step is None else step, "manual")


def _target(args, kwargs, key):
    f = args[1] if len(args) > 1 else kwargs.get(key)
    if isinstance(f, (str, bytes, os.PathLike)):
        p = os.fspath(f)
        return os.path.abspath(os.fsdecode(p))
    return None  # a file object or a buffer: not a file the handler can find


def _wrap(fn, kind, key):
    if getattr(fn, "__crashpack_wrapped__", False):
        return fn

    @functools.wraps(fn)
    def save(*args, crashpack_step=None, **kwargs):
        path = _target(args, kwargs, key)
        if path is None or _disabled is not None:
            return fn(*args, **kwargs)
        step = _step if crashpack_step is None else crashpack_step
        _begin(path, step, kind)
        try:
            result = fn(*args, **kwargs)
        finally:
            _end()  # also when the save raised: then nothing is recorded
        _record(path, step, kind)
        return result

    save.__crashpack_wrapped__ = True
    save.__wrapped__ = fn
    return save


def install():
    """Wrap torch.save (and safetensors.torch.save_file when importable). Idempotent; returns the
    names of the functions wrapped."""
    done = []
    if _STATE_DIR and not os.path.isabs(_STATE_DIR) and not _installed:
        # the handler ignores a relative directory too: both fall back to the default
        sys.stderr.write("crashpack_checkpoint: CRASHPACK_STATE_DIR=%r is not absolute; using %s\n"
                         % (_STATE_DIR, state_dir()))
    try:
        import torch
        import torch.serialization
    except ImportError:
        torch = None
    if torch is not None:
        w = _wrap(torch.save, "torch.save", "f")
        torch.save = w
        if getattr(torch.serialization, "save", None) is not None:
            torch.serialization.save = _wrap(torch.serialization.save, "torch.save", "f")
        done.append("torch.save")
    try:
        import safetensors.torch as st
    except ImportError:
        st = None
    if st is not None and hasattr(st, "save_file"):
        st.save_file = _wrap(st.save_file, "safetensors.torch.save_file", "filename")
        done.append("safetensors.torch.save_file")
    _installed.update(dict.fromkeys(done or ["none"], True))
    return done
