"""test_pyhook.py - the Python hook (python/crashpack/, docs/python.md) without the node service.

A fake agent (a Unix socket server in this process, standing in for `crashpack agent` in this
unit-level test only) answers, or never answers, the hook's request. Standard library only; runs
under every CPython from 3.8: `python3 tests/unit/test_pyhook.py [-v]`.
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.normpath(os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, PYDIR)

import crashpack  # noqa: E402
from crashpack import _report  # noqa: E402

GLOBS = ["acmelic-*"]  # the corpus's config_value_glob line


def corpus():
    """tests/unit/secrets-corpus.tsv (test_scrub.c reads it too): (name, value, line) rows."""
    rows = []
    with open(os.path.join(HERE, "secrets-corpus.tsv"), encoding="utf-8") as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            name, value, text = line.rstrip("\n").split("\t")
            rows.append((name, value, text.replace("\\n", "\n")))
    return rows


class FakeAgent:
    """Accepts connections, keeps each request line; answers ok, or (hang) never answers and
    records that the client closed the connection."""

    def __init__(self, path, hang=False):
        self.path, self.hang = path, hang
        self.requests, self.closed = [], []
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.bind(path)
        self.s.listen(8)
        self.t = threading.Thread(target=self.serve, daemon=True)
        self.t.start()

    def serve(self):
        while True:
            try:
                c, _ = self.s.accept()
            except OSError:
                return
            buf = b""
            while b"\n" not in buf:
                d = c.recv(65536)
                if not d:
                    break
                buf += d
            req = json.loads(buf.decode() or "{}")
            if req.get("op") == "ping":  # the hook's start-up check: answered, not kept
                c.sendall(b'{"ok":true,"version":"fake","pid":1}\n')
                c.close()
                continue
            self.requests.append(req)
            if self.hang:
                self.closed.append(c.recv(1) == b"")
            else:
                c.sendall(b'{"ok":true,"bundle":"/x.zst","mode":"slim","deduplicated":false}\n')
            c.close()

    def stop(self):
        self.s.close()


class Base(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="cppyh.")
        self.sock = os.path.join(self.tmp, "agent.sock")
        self.state = os.path.join(self.tmp, "state")

    def run_py(self, code, hook=True, env=None, agent=True, timeout=60):
        e = dict(os.environ)
        for k in ("CRASHPACK_HOOK", "CRASHPACK_HOOK_TIMEOUT", "CRASHPACK_CONFIG"):
            e.pop(k, None)
        e.update({"PYTHONPATH": PYDIR, "CRASHPACK_STATE_DIR": self.state,
                  "CRASHPACK_AGENT_SOCKET": self.sock, "CRASHPACK_CONFIG": "/nonexistent"})
        e.update(env or {})
        # the same number of lines either way, so that tracebacks name the same lines
        src = ("import crashpack; crashpack.install()\n" if hook else "pass\n") + code
        p = subprocess.run([sys.executable, "-c", src], env=e, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=timeout)
        return p.returncode, p.stdout, p.stderr

    def same(self, code, addresses=False, **kw):
        """Runs code with and without the hook: the same stdout, stderr and exit status (object
        addresses, which differ from run to run, masked when `addresses`)."""
        a = self.run_py(code, hook=False, **kw)
        b = self.run_py(code, hook=True, **kw)
        if addresses:
            import re
            a, b = [(x[0], x[1], re.sub(rb"0x[0-9a-f]+", b"0x?", x[2])) for x in (a, b)]
        self.assertEqual(a, b)
        return b


class Document(unittest.TestCase):
    def exc(self, fn):
        try:
            fn()
        except BaseException as e:
            return e

    def test_chain_mro_frames(self):
        class Err(RuntimeError):
            pass

        class Model:
            def forward(self):
                secret_local = "local-value-never-recorded"  # noqa: F841
                raise ValueError("inner")

        def outer():
            try:
                Model().forward()
            except ValueError as e:
                raise Err("outer") from e

        e = self.exc(outer)
        o = _report.exc_object(e, lambda s: s)
        self.assertEqual(o["type"], __name__ + "." + Err.__qualname__)
        self.assertEqual(o["mro"][1:], ["RuntimeError", "Exception", "BaseException"])
        self.assertEqual(o["message"], "outer")
        self.assertEqual(o["cause"]["type"], "ValueError")
        self.assertIsNone(o["context"])  # suppressed by `from`
        self.assertEqual(o["cause"]["frames"][-1]["function"], "forward")
        self.assertTrue(o["cause"]["frames"][-1]["qualname"].endswith("Model.forward"))
        self.assertEqual(o["cause"]["frames"][-1]["file"], os.path.abspath(__file__))
        self.assertIsInstance(o["cause"]["frames"][-1]["line"], int)
        self.assertNotIn("local-value-never-recorded", json.dumps(o))
        self.assertEqual(sorted(o), sorted(["type", "mro", "message", "frames", "cause", "context",
                                            "worker"]))

    def test_context_and_cycle(self):
        def f():
            try:
                raise KeyError("a")
            except KeyError:
                raise TypeError("b")
        e = self.exc(f)
        e.__context__.__context__ = e  # a cycle
        o = _report.exc_object(e, lambda s: s)
        self.assertEqual(o["context"]["type"], "KeyError")
        self.assertIsNone(o["context"]["context"])

    def test_depth_and_frames_limit(self):
        e = ValueError(0)
        for i in range(1, 40):
            n = ValueError(i)
            n.__cause__ = e
            e = n
        o, depth = _report.exc_object(e, lambda s: s), 0
        while o:
            depth, o = depth + 1, o["cause"]
        self.assertEqual(depth, _report.MAX_DEPTH)

        def rec(n):
            if n == 0:
                raise RuntimeError("deep")
            rec(n - 1)
        e = self.exc(lambda: rec(400))
        o = _report.exc_object(e, lambda s: s)
        self.assertEqual(len(o["frames"]), 256)
        self.assertTrue(o["frames_truncated"])
        self.assertEqual(o["frames"][-1]["function"], "rec")  # the innermost are kept

    def test_source_lines(self):
        def f():
            raise ValueError("src")  # the source line, as traceback prints it
        o = _report.exc_object(self.exc(f), lambda s: s)
        self.assertEqual(o["frames"][-1]["source"],
                         'raise ValueError("src")  # the source line, as traceback prints it')
        path = os.path.join(tempfile.mkdtemp(prefix="cppys."), "longline.py")
        with open(path, "w") as fh:
            fh.write("def g():\n    raise ValueError('%s')\n" % ("x" * 300))
        ns = {}
        with open(path) as fh:
            exec(compile(fh.read(), path, "exec"), ns)
        o = _report.exc_object(self.exc(ns["g"]), lambda s: s)
        src = o["frames"][-1]["source"]
        self.assertEqual(len(src), _report.SOURCE_MAX)
        self.assertTrue(src.startswith("raise ValueError('xxx") and src.endswith("..."))
        o = _report.exc_object(self.exc(lambda: exec("raise KeyError(1)")), lambda s: s)
        self.assertIsNone(o["frames"][-1]["source"])  # <string>: no file to read
        ev = _report.exc_object(self.exc(f), lambda s: s, source=False)
        self.assertNotIn("source", ev["frames"][-1])

    def test_locals(self):
        class Boom:
            def __repr__(self):
                raise RuntimeError("no repr")

        def f(n, password):
            huge = "x" * 100000  # noqa: F841
            token = "hf_" + "a" * 34  # noqa: F841
            boom = Boom()  # noqa: F841
            lst = list(range(1000))  # noqa: F841
            raise ValueError("with values")
        e = self.exc(lambda: f(7, "hunter2-pw"))
        sc = _report.Scrubber(environ={})
        off = _report.exc_object(e, sc)
        self.assertFalse(any("locals" in fr for fr in off["frames"]))  # off: never read
        on = _report.exc_object(e, sc, local_values=_report.Locals(sc))
        loc = on["frames"][-1]["locals"]
        self.assertEqual(loc["n"], "7")
        self.assertEqual(loc["password"], "'" + "*" * 10 + "'")  # by its name
        self.assertNotIn("hf_aaaa", json.dumps(on))  # by its shape
        self.assertNotIn("hunter2", json.dumps(loc))
        self.assertLessEqual(len(loc["huge"].encode()), _report.LOCAL_VALUE_MAX)
        self.assertTrue(loc["huge"].startswith("'xxx") and loc["huge"].endswith("..."))
        self.assertIn("repr failed: RuntimeError", loc["boom"])
        self.assertEqual(loc["lst"], "[0, 1, 2, 3, 4, 5, 6, 7, ...]")
        self.assertNotIn("locals_truncated", on["frames"][-1])

    def test_locals_caps(self):
        src = "def many():\n" + "".join("    v%d = %d\n" % (i, i) for i in range(40)) + \
            "    raise ValueError('many')\n"
        ns = {}
        exec(src, ns)
        e = self.exc(ns["many"])
        sc = _report.Scrubber(environ={})
        fr = _report.exc_object(e, sc, local_values=_report.Locals(sc))["frames"][-1]
        self.assertEqual(len(fr["locals"]), _report.LOCALS_PER_FRAME)
        self.assertTrue(fr["locals_truncated"])
        fr = _report.exc_object(e, sc, local_values=_report.Locals(sc, total=20))["frames"][-1]
        self.assertLess(len(fr["locals"]), 10)  # the document's total
        self.assertTrue(fr["locals_truncated"])

        class Slow:
            def __repr__(self):
                return "slow repr ran"

        def g(obj):
            raise ValueError("time")
        e = self.exc(lambda: g(Slow()))
        fr = _report.exc_object(e, sc, local_values=_report.Locals(sc))["frames"][-1]
        self.assertEqual(fr["locals"]["obj"], "slow repr ran")
        fr = _report.exc_object(e, sc, local_values=_report.Locals(sc, seconds=0))["frames"][-1]
        self.assertRegex(fr["locals"]["obj"], r"^<.*Slow object at 0x[0-9a-f]+>$")  # no time left

    def test_message_cap(self):
        o = _report.exc_object(ValueError("\u00e9" * 100000), lambda s: s)
        self.assertLessEqual(len(o["message"].encode()), 64 * 1024)

    def test_scrub(self):
        env = {"MY_API_KEY": "verysecret1", "DB": "postgres://bob:pw123456@db/x",
               "PWD": "/home/bob/job", "GITHUB_TOKEN": "short", "HOME": "/home/bob"}
        sc = _report.Scrubber(env)
        msg = "k=verysecret1 url=https://al:hunter22@h/p db pw123456 in /home/bob/job short"
        out = sc(msg)
        self.assertEqual(len(out), len(msg))
        self.assertNotIn("verysecret1", out)
        self.assertNotIn("hunter22", out)
        self.assertNotIn("pw123456", out)
        self.assertIn("/home/bob/job", out)  # PWD is not a secret
        self.assertIn("https://al:********@h/p", out)
        self.assertIn("short", out)  # under 6 bytes: not hunted

    def test_corpus_shapes(self):
        """Every form of the corpus: its value masked whole, character for character, in the
        line alone, among the others, in a secret-free environment's scrubber."""
        rows = corpus()
        self.assertGreaterEqual(len(rows), 30)
        sc = _report.Scrubber({}, value_globs=GLOBS)
        for name, value, line in rows:
            out = sc(line)
            self.assertEqual(len(out), len(line), name)
            i = line.index(value)
            self.assertEqual(out[i:i + len(value)], "*" * len(value), "%s: %r" % (name, out))
        text = "".join(r[2] + "\n" for r in rows)
        self.assertFalse([r[0] for r in rows if r[1] in sc(text)])

    def test_corpus_mirrors_c(self):
        """The whole corpus masks to secrets-corpus.masked, which test_scrub.c checks the C
        scrubber against: the hook and the capture mask the same bytes."""
        text = "".join(r[2] + "\n" for r in corpus())
        with open(os.path.join(HERE, "secrets-corpus.masked"), encoding="utf-8") as f:
            golden = f.read()
        self.assertEqual(_report.mask_shapes(text, GLOBS), golden)
        # the fast path (no globs: only where a form can start) is the same scan
        self.assertEqual(_report.mask_shapes(text), _report.mask_shapes(text, ["zz-none-*"]))

    def test_clean_lines(self):
        """Ordinary output stays as it is (tests/unit/secrets-clean.txt)."""
        sc = _report.Scrubber({}, value_globs=GLOBS)
        with open(os.path.join(HERE, "secrets-clean.txt"), encoding="utf-8") as f:
            for line in f:
                line = line.rstrip("\n")
                if line and not line.startswith("#"):
                    self.assertEqual(sc(line), line)

    def test_cut_key_block(self):
        """A text that starts inside a key block: its base64 lines are masked, not the prose
        before them (test_scrub.c's orphan_end)."""
        body = "Zm9vYmFyQ3E5OWJvZHkxMjM0NTY3ODkwYWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXo0"
        t = "ok, the key follows (prose)\n%s\n%s\n-----END PRIVATE KEY-----\nafter" % (body, body)
        out = _report.mask_shapes(t)
        self.assertNotIn(body, out)
        self.assertTrue(out.startswith("ok, the key follows (prose)\n"))
        self.assertTrue(out.endswith("\n-----END PRIVATE KEY-----\nafter"))

    def test_corpus_env_values_hunted(self):
        """What the shapes find in an environment value is hunted bare: a password that only a
        URL in DATABASE_URL shows is masked in a message that has it alone."""
        sc = _report.Scrubber({"DATABASE_URL": "postgres://u:Zp4ssw0rdQx@db/x", "PLAIN": "x"})
        self.assertEqual(sc("auth failed for Zp4ssw0rdQx"), "auth failed for ***********")

    def test_worker_dataloader(self):
        tb = ('Traceback (most recent call last):\n  File "/x/worker.py", line 302, in _worker_loop\n'
              '    data = fetcher.fetch(index)\n  File "/x/ds.py", line 9, in __getitem__\n'
              '    raise ValueError("bad sample 7")\nValueError: bad sample 7\n')
        msg = "Caught ValueError in DataLoader worker process 1.\nOriginal " + tb
        o = _report.exc_object(ValueError(msg), lambda s: s)
        self.assertEqual(o["worker"], {"kind": "DataLoader", "id": 1, "pid": None,
                                       "original_type": "ValueError", "original_traceback": tb})

    def test_worker_multiprocessing(self):
        import multiprocessing
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with multiprocessing.get_context("fork").Pool(1) as p:
                e = self.exc(lambda: p.apply(int, ("notanumber",)))
        o = _report.exc_object(e, lambda s: s)
        self.assertEqual(o["worker"]["kind"], "multiprocessing")
        self.assertEqual(o["worker"]["original_type"], "ValueError")
        self.assertIn("invalid literal", o["worker"]["original_traceback"])


class Hook(Base):
    def tearDown(self):
        if getattr(self, "agent", None):
            self.agent.stop()

    def start(self, hang=False):
        self.agent = FakeAgent(self.sock, hang)
        return self.agent

    def members(self, req):
        return json.loads(req["members"]["exception.json"])

    def test_request_and_identical_output(self):
        a = self.start()
        rc, out, err = self.same("def f():\n    raise ValueError('plain')\nf()\n")
        self.assertEqual(rc, 1)
        self.assertEqual(len(a.requests), 1)
        r = a.requests[0]
        self.assertEqual(sorted(r), sorted(["op", "kind", "pid", "start_time", "status", "signal",
                                            "time", "trigger", "reason", "job", "members"]))
        self.assertEqual((r["op"], r["kind"], r["trigger"]), ("capture", "exception", "hook"))
        self.assertEqual(list(r["members"]), ["exception.json"])
        d = self.members(r)
        self.assertEqual(sorted(d), sorted(["format", "hook", "fatal", "time", "pid", "thread",
                                            "python", "exception", "events", "abandoned"]))
        self.assertEqual(d["format"], "crashpack-exception/1")
        self.assertEqual(d["hook"], "sys.excepthook")
        self.assertEqual(d["pid"], r["pid"])
        self.assertEqual(d["thread"]["name"], "MainThread")
        self.assertEqual(d["thread"]["native_id"], r["pid"])
        self.assertEqual(d["exception"]["type"], "ValueError")
        self.assertEqual([f["function"] for f in d["exception"]["frames"]], ["<module>", "f"])
        self.assertFalse(d["abandoned"])
        with open(os.path.join(self.state, "exception-%d.json" % r["pid"])) as f:
            self.assertEqual(json.load(f), d)

    def test_keyboardinterrupt_systemexit(self):
        a = self.start()
        rc, _, _ = self.same("raise KeyboardInterrupt\n")
        self.assertNotEqual(rc, 0)
        rc, _, _ = self.same("raise SystemExit(3)\n")
        self.assertEqual(rc, 3)
        self.assertEqual(a.requests, [])

    def test_framework_replaces_hook(self):
        a = self.start()
        code = ("import sys\n"
                "def mine(t, v, tb):\n    sys.stderr.write('framework: %s\\n' % v)\n"
                "sys.excepthook = mine\nraise RuntimeError('after replace')\n")
        rc, _, err = self.same(code)
        self.assertEqual((rc, err), (1, b"framework: after replace\n"))
        self.assertEqual(len(a.requests), 1)
        self.assertEqual(self.members(a.requests[0])["exception"]["message"], "after replace")
        # one that chains to the previous hook (ours): still one capture
        code = ("import sys\nprev = sys.excepthook\n"
                "def mine(t, v, tb):\n    sys.stderr.write('framework\\n'); prev(t, v, tb)\n"
                "sys.excepthook = mine\nraise RuntimeError('chained')\n")
        self.same(code)
        self.assertEqual(len(a.requests), 2)

    def test_hanging_agent(self):
        a = self.start(hang=True)
        rc, out, err = self.same("raise ValueError('hang')\n", env={"CRASHPACK_HOOK_TIMEOUT": "2"})
        self.assertEqual(rc, 1)
        self.assertEqual(a.closed, [True])  # the hook closed the connection: abandoned
        pid = a.requests[0]["pid"]
        with open(os.path.join(self.state, "exception-%d.json" % pid)) as f:
            self.assertTrue(json.load(f)["abandoned"])

    def test_no_agent(self):
        """No agent: one warning line at start-up (issue 23), then the same output."""
        code = "print('started')\nraise ValueError('nobody listens')\n"
        a = self.run_py(code, hook=False)
        b = self.run_py(code, hook=True)
        lines = b[2].split(b"\n", 1)
        self.assertTrue(lines[0].startswith(b"crashpack: warning: no crashpack agent answers at "
                                            + self.sock.encode()), b[2])
        self.assertIn(b"will not be captured; start `crashpack agent` as root", lines[0])
        self.assertEqual((a[0], a[1], a[2]), (b[0], b[1], lines[1]))
        self.assertEqual(b[0], 1)
        c = self.run_py(code, hook=True, env={"CRASHPACK_HOOK_WARNED": "1"})
        self.assertEqual(c, a)

    def test_secrets(self):
        a = self.start()
        self.run_py("import os\nraise ValueError('token ' + os.environ['HF_TOKEN'] + "
                    "' url https://me:pa55word@hub/x')\n", env={"HF_TOKEN": "hf_abcdefgh123"})
        text = a.requests[0]["members"]["exception.json"]
        self.assertNotIn("hf_abcdefgh123", text)
        self.assertNotIn("pa55word", text)
        self.assertIn("*************", text)

    def test_corpus_through_the_hook(self):
        """Acceptance (issue 22): an exception whose message (and cause, and thread name) holds
        every line of the corpus, raised with the corpus in the environment under names that say
        nothing: no value in what the hook sends, nor in its state file."""
        a = self.start()
        rows = corpus()
        env = {"CORPUS_%02d" % i: r[2] for i, r in enumerate(rows)}
        conf = os.path.join(self.tmp, "conf")
        with open(conf, "w") as f:
            f.write("redact_values = acmelic-*\n")
        env["CRASHPACK_CONFIG"] = conf
        code = ("import os, threading\n"
                "lines = [os.environ[k] for k in sorted(os.environ) if k.startswith('CORPUS_')]\n"
                "def work():\n"
                "    try:\n"
                "        raise KeyError('\\n'.join(lines))\n"
                "    except KeyError as e:\n"
                "        raise RuntimeError('failed: ' + ' | '.join(lines)) from e\n"
                "t = threading.Thread(target=work, name=lines[2][:40])\n"
                "t.start(); t.join()\n"
                "work()\n")
        self.run_py(code, env=env)
        self.assertEqual(len(a.requests), 1)
        text = json.dumps(a.requests)
        with open(os.path.join(self.state, "exception-%d.json" % a.requests[0]["pid"])) as f:
            text += f.read()
        left = [r[0] for r in rows if r[1] in text]
        self.assertEqual(left, [])
        d = self.members(a.requests[0])
        self.assertIn("failed: ", d["exception"]["message"])
        self.assertIn("***", d["exception"]["cause"]["message"])

    def test_thread_events(self):
        a = self.start()
        code = ("import threading, sys, warnings\n"
                "t = threading.Thread(target=lambda: 1 / 0, name='loader'); t.start(); t.join()\n"
                "class D:\n    def __del__(self): raise OSError('in del')\n"
                "d = D(); del d\n"
                "raise RuntimeError('main dies')\n")
        self.same(code, addresses=True)
        d = self.members(a.requests[0])
        self.assertEqual([e["hook"] for e in d["events"]], ["threading.excepthook", "unraisablehook"])
        self.assertEqual(d["events"][0]["thread"]["name"], "loader")
        self.assertEqual(d["events"][0]["exception"]["type"], "ZeroDivisionError")
        self.assertFalse(d["events"][0]["fatal"])
        self.assertEqual(d["events"][1]["exception"]["message"], "in del")
        with open(os.path.join(self.state, "events-%d.json" % d["pid"])) as f:
            ev = json.load(f)
        self.assertEqual(ev["format"], "crashpack-python-events/1")
        self.assertEqual(len(ev["events"]), 2)

    def test_last_thread_ends_process(self):
        a = self.start()
        code = ("import threading, time\n"
                "def work():\n    time.sleep(0.5)\n    raise ValueError('worker thread died')\n"
                "threading.Thread(target=work, name='trainer').start()\n")
        self.same(code)
        self.assertEqual(len(a.requests), 1)
        d = self.members(a.requests[0])
        self.assertEqual((d["hook"], d["thread"]["name"]), ("threading.excepthook", "trainer"))
        self.assertEqual(d["exception"]["frames"][-1]["function"], "work")

    def test_not_installed_without_env(self):
        """_crashpack_hook (what the .pth imports) does nothing unless switched on."""
        a = self.start()
        code = "import _crashpack_hook, sys\nraise ValueError(repr(sys.excepthook))\n"
        self.run_py(code, hook=False)
        self.assertEqual(a.requests, [])
        self.run_py(code, hook=False, env={"CRASHPACK_HOOK": "0"})
        self.assertEqual(a.requests, [])
        self.run_py(code, hook=False, env={"CRASHPACK_HOOK": "1"})
        self.assertEqual(len(a.requests), 1)
        conf = os.path.join(self.tmp, "conf")
        with open(conf, "w") as f:
            f.write("# crashpack\nbundle_dir = /x\npython_hook = on\n")
        self.run_py(code, hook=False, env={"CRASHPACK_CONFIG": conf})
        self.assertEqual(len(a.requests), 2)

    def test_locals_through_the_hook(self):
        a = self.start()
        conf = os.path.join(self.tmp, "conf")
        with open(conf, "w") as f:
            f.write("python_locals = on\n")
        code = ("def f(batch, api_key):\n    big = 'z' * 5000\n    raise ValueError('x')\n"
                "f(3, 'abcdefgh12345678')\n")
        self.same(code, env={"CRASHPACK_CONFIG": conf})  # the same output and status
        fr = self.members(a.requests[-1])["exception"]["frames"][-1]
        self.assertEqual(fr["function"], "f")
        self.assertEqual(fr["locals"]["batch"], "3")
        self.assertEqual(fr["locals"]["api_key"], "'" + "*" * 16 + "'")
        self.assertTrue(fr["locals"]["big"].endswith("..."))
        self.assertLessEqual(len(fr["locals"]["big"]), _report.LOCAL_VALUE_MAX)
        self.run_py(code)  # python_locals not on: no local value read
        fr = self.members(a.requests[-1])["exception"]["frames"][-1]
        self.assertNotIn("locals", fr)

    def test_checkpoint_shim(self):
        import crashpack_checkpoint
        import crashpack.checkpoint
        self.assertIs(crashpack_checkpoint, crashpack.checkpoint)
        self.assertTrue(callable(crashpack_checkpoint.install))


if __name__ == "__main__":
    unittest.main()
