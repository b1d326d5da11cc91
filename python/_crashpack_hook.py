"""_crashpack_hook - imported at every interpreter start by crashpack-hook.pth (site-packages).

Inert and cheap unless switched on: CRASHPACK_HOOK=1 (yes/true/on) in the environment, or, when
CRASHPACK_HOOK is not set at all, `python_hook = on` in the crashpack configuration
($CRASHPACK_CONFIG, else /etc/crashpack/crashpack.conf). CRASHPACK_HOOK=0 switches it off whatever
the configuration says. Switched on, it runs `crashpack.install()` (docs/python.md); if crashpack
cannot be imported or installed it prints one line and the program runs on unchanged.
"""
import os


def _on():
    v = os.environ.get("CRASHPACK_HOOK")
    if v is not None:
        return v.strip().lower() in ("1", "yes", "true", "on")
    try:
        with open(os.environ.get("CRASHPACK_CONFIG") or "/etc/crashpack/crashpack.conf", "rb") as f:
            text = f.read(1 << 20)
    except OSError:
        return False
    for line in text.split(b"\n"):
        k, sep, v = line.split(b"#", 1)[0].partition(b"=")
        if sep and k.strip() == b"python_hook":
            return v.strip().lower() in (b"1", b"yes", b"true", b"on")
    return False


if _on():
    try:
        import crashpack
        crashpack.install()
    except Exception as e:
        import sys
        try:
            sys.stderr.write("crashpack: python hook not installed (%s: %s)\n" % (type(e).__name__, e))
        except Exception:
            pass
