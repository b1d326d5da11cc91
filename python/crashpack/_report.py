"""crashpack._report - an exception as the crashpack-exception/1 document (docs/python.md).

Builds EXC objects (type with its MRO, message, frames with their source lines, the
__cause__/__context__ chain, a DataLoader/multiprocessing worker's original traceback parsed from
the re-raised text) from live exception objects, and masks secrets in every text field the way the
capture masks them (capture/proc.c, common/scrub.c, common/shapes.c): known values and what looks
like a secret by its shape; each character of a secret becomes '*', so lengths do not move. A
local variable's value is read only when the configuration says `python_locals = on` (Locals:
short reprs, guarded and capped). Standard library only.
"""
import fnmatch
import itertools
import os
import re
import sys
import time

MESSAGE_MAX = 64 * 1024  # bytes of UTF-8 per text field
MAX_FRAMES = 256         # per exception; the innermost are kept
MAX_DEPTH = 16           # of the __cause__/__context__ chain
MAX_NODES = 64           # EXC objects in one chain in all
SCRUB_MIN = 6            # CP_SCRUB_MIN: shorter values are not hunted
SCRUB_MAXLEN = 4096      # CP_SCRUB_MAXLEN
SOURCE_MAX = 200         # characters of a frame's source line
SOURCE_FILE_MAX = 16 << 20  # a larger file is not read for its lines
LOCAL_NAME_MAX = 64      # bytes of a local's name
LOCAL_VALUE_MAX = 120    # bytes of UTF-8 of one local's repr ("..." ends a cut one)
LOCALS_PER_FRAME = 32
LOCALS_TOTAL = 32 * 1024  # bytes of names and reprs in one document
LOCALS_SECONDS = 1.0     # time all reprs of one document may take
LOCALS_SCAN = 1000       # entries of one frame's f_locals looked at (a module's globals)

# capture/proc.c's secret_names / not_secret_names (case-insensitive globs)
SECRET_NAMES = ("*PASS*", "*PWD*", "*SECRET*", "*TOKEN*", "*KEY*", "*CREDENTIAL*", "*AUTH*",
                "*COOKIE*", "*SESSION*", "*PRIVATE*")
NOT_SECRET_NAMES = ("PWD", "OLDPWD", "*KEYBOARD*", "*KEYMAP*")

# ---- secrets recognized by their shape: common/shapes.c, line for line (docs/capture.md) ----
# The same forms, the same tables, the same masks (the corpus tests/unit/secrets-corpus.tsv masks
# to secrets-corpus.masked in both): a text field is scanned once; a byte that can start a form
# runs that form's matcher; the secret part becomes '*', one a character, never a double quote, a
# line end or a NUL, nor half of a backslash escape. Whole strings only (no streams).

IDENT_MAX = 64
LINE_BACK = 4096
QUOTED_MAX = 65536
PEM_MAX = 64 << 10
GLOB_WORD_MAX = 1024
AUTHORITY_MAX = 512
LEARN_MAX = 128

_ALPHA = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_DIGIT = frozenset("0123456789")
_ALNUM = _ALPHA | _DIGIT
_NOT_VALUE = frozenset("\"'`,;&<>()[]{}|\\")
_NOT_URL = frozenset("\"'`<>\\")
_NOT_GLOB = _NOT_VALUE | frozenset("=")
_NOT_AUTH = frozenset("/?#\"'<>\\`@")
_UPDIG = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ") | _DIGIT
_CLS = {
    "ALNUM": lambda c: c in _ALNUM,
    "WORD": lambda c: c in _ALNUM or c == "_",
    "TOKEN": lambda c: c in _ALNUM or c in "_-",
    "UPDIG": lambda c: c in _UPDIG,
    "BEARER": lambda c: c in _ALNUM or c in "._~+/=-",
    "IDENT": lambda c: c in _ALNUM or c in "_-.",
    "VALUE": lambda c: c > " " and c != "\x7f" and c not in _NOT_VALUE,
    "URL": lambda c: c > " " and c != "\x7f" and c not in _NOT_URL,
    "GLOB": lambda c: c > " " and c != "\x7f" and c not in _NOT_GLOB,
    "JWT": lambda c: c in _ALNUM or c in "_-.",
    "AUTH": lambda c: c > " " and c != "\x7f" and c not in _NOT_AUTH,
}

# (prefix, class, min length, exact, needs a digit): shapes.c's toks
TOKENS = (("hf_", "ALNUM", 30, 0, 0), ("ghp_", "ALNUM", 30, 0, 0), ("gho_", "ALNUM", 30, 0, 0),
          ("ghu_", "ALNUM", 30, 0, 0), ("ghs_", "ALNUM", 30, 0, 0), ("ghr_", "ALNUM", 30, 0, 0),
          ("github_pat_", "WORD", 40, 0, 0), ("glpat-", "TOKEN", 20, 0, 0),
          ("AKIA", "UPDIG", 16, 1, 0), ("ASIA", "UPDIG", 16, 1, 0), ("AIza", "TOKEN", 35, 1, 0),
          ("sk-", "TOKEN", 20, 0, 1), ("sk_live_", "ALNUM", 16, 0, 0),
          ("sk_test_", "ALNUM", 16, 0, 0), ("rk_live_", "ALNUM", 16, 0, 0),
          ("xoxa-", "TOKEN", 10, 0, 1), ("xoxb-", "TOKEN", 10, 0, 1), ("xoxp-", "TOKEN", 10, 0, 1),
          ("xoxr-", "TOKEN", 10, 0, 1), ("npm_", "ALNUM", 36, 1, 0), ("pypi-", "TOKEN", 50, 0, 0))
_TOK_FIRST = frozenset(t[0][0] for t in TOKENS)
HOOKS = (("hooks.slack.com", "/services/"), ("hooks.slack.com", "/workflows/"),
         ("hooks.slack.com", "/triggers/"), ("discord.com", "/api/webhooks/"),
         ("discordapp.com", "/api/webhooks/"), ("webhook.office.com", "/"),
         ("outlook.office.com", "/webhook/"), ("logic.azure.com", "/workflows/"))
KEY_EXACT = ("key", "pwd", "pass", "apikey", "accesskey", "secretkey", "privatekey", "credential",
             "credentials", "authorization")
KEY_SUFFIX = ("password", "passwd", "passphrase", "secret", "token")
KEY_NOT = ("eos_token", "bos_token", "pad_token", "unk_token", "sep_token", "cls_token",
           "mask_token", "public_key", "publickey", "cache_key")
CTX_WORDS = (("mysql", 1), ("mariadb", 1), ("sshpass", 3))
NOT_VALUES = ("<redacted>", "[redacted]", "lambda", "none", "null", "true", "false")
_TRIGGER = re.compile("[=:\\-eBbw" + re.escape("".join(sorted(_TOK_FIRST))) + "]")
V_NEED_QUOTE, V_DQ = 1, 2


def _key_kind(k):
    k = k.lstrip("-.")
    if not k or len(k) > IDENT_MAX or k in ("PWD", "OLDPWD"):
        return 0
    low = "".join(c.lower() if "A" <= c <= "Z" else c for c in k)
    if low in KEY_NOT:
        return 0
    last = low
    for i in range(len(low), 0, -1):
        if low[i - 1] in "_.-":
            last = low[i:]
            break
    if last == "authorization":
        return 2
    if last == "pass":
        return 3
    if last in KEY_EXACT or any(last.endswith(w) for w in KEY_SUFFIX):
        return 1
    return 0


def _icontains(s, w):
    return w in s.lower() if s.isascii() else w in "".join(
        c.lower() if "A" <= c <= "Z" else c for c in s)


def _ctx_in(s):
    bits = 0
    for w, b in CTX_WORDS:
        if _icontains(s, w):
            bits |= b
    return bits


class _Scan:
    """One scan of a string (struct sx of shapes.c, whole-string mode)."""

    def __init__(self, s, globs=(), learn=None):
        self.b = list(s)
        self.n = len(s)
        self.globs = [g for g in globs if g]
        self.learn = learn
        f = 0
        while f < self.n and self.b[f] in " \t\n\r":
            f += 1
        self.json = f < self.n and self.b[f] in "{["
        self.pem_begin = self.pem_floor = 0
        self.lc_start = self.lc_pos = self.lc_bits = 0
        self.lc_valid = False

    def text(self, a, e):
        return "".join(self.b[a:e])

    def has(self, i, lit):
        return 0 <= i and self.n - i >= len(lit) and "".join(self.b[i:i + len(lit)]) == lit

    def run_of(self, i, k):
        f = _CLS[k]
        b, n = self.b, self.n
        while i < n and f(b[i]):
            i += 1
        return i

    def mask(self, a, e):
        if e <= a:
            return
        if self.learn is not None and len(self.learn) < LEARN_MAX:
            self.learn.add(self.text(a, e))
        b, n = self.b, self.n
        i = a
        while i < e:
            c = b[i]
            if c in "\"\n\r\0":
                i += 1
                continue
            b[i] = "*"
            if c == "\\" and i + 1 < n and b[i + 1] not in "\n\0":
                i += 1
                b[i] = "*"
            i += 1

    def done(self, a, e):
        self.mask(a, e)
        return e if e > a else a + 1

    def quoted_end(self, i, q, esc):
        b, n = self.b, self.n
        lim = i + QUOTED_MAX if n - i > QUOTED_MAX else n
        while i < lim:
            c = b[i]
            if c in "\n\r\0\"" or (c == q and not esc):
                return i
            if c == "\\":
                if i + 1 >= n:
                    return n
                if esc and b[i + 1] in (q, "n", "r"):
                    return i
                i += 1
            i += 1
        return lim

    def pem_end(self, i):
        b, n = self.b, self.n
        lim = i + PEM_MAX if n - i > PEM_MAX else n
        while i < lim:
            c = b[i]
            if c == '"':
                return i
            if c == "\\":
                i += 2
                continue
            if c == "-":
                j = i
                while j < n and b[j] == "-" and j - i < 5:
                    j += 1
                left = min(n - j, 3)
                if self.text(j, j + left) == "END"[:left] and left == 3:
                    return i
            i += 1
        return lim

    # -- tokens, JWTs, key blocks --

    def m_token(self, i):
        b = self.b
        if i and b[i - 1] in _ALNUM:
            return i + 1
        for prefix, cls, mn, exact, dig in TOKENS:
            if b[i] != prefix[0] or not self.has(i, prefix):
                continue
            a = i + len(prefix)
            e = self.run_of(a, cls)
            ln = e - a
            if ln < mn or (exact and ln != mn) or (dig and not any(c in _DIGIT for c in b[a:e])):
                continue
            return self.done(a, e)
        return i + 1

    def m_jwt(self, i):
        b, n = self.b, self.n
        if not self.has(i, "eyJ") or (i and (_CLS["TOKEN"](b[i - 1]) or b[i - 1] == ".")):
            return i + 1
        p1 = self.run_of(i, "TOKEN")
        if p1 >= n or p1 - i < 10 or b[p1] != ".":
            return i + 1
        p2 = self.run_of(p1 + 1, "TOKEN")
        if p2 >= n or p2 - p1 < 9 or b[p2] != ".":
            return i + 1
        return self.done(i + 3, self.run_of(p2 + 1, "TOKEN"))

    def pem_line(self, i, what):
        if not self.has(i, what):
            return 0
        j = i + len(what)
        k = j
        b, n = self.b, self.n
        while k < n and k - j < 48 and ("A" <= b[k] <= "Z" or b[k] in _DIGIT or b[k] == " "):
            k += 1
        if not self.has(k, "-----") or "PRIVATE KEY" not in self.text(j, k):
            return 0
        return k + 5

    def break_before(self, a, lo):
        b = self.b
        if a > lo and b[a - 1] == "\n":
            return 2 if a - 1 > lo and b[a - 2] == "\r" else 1
        return 2 if a >= lo + 2 and b[a - 1] == "n" and b[a - 2] == "\\" else 0

    def pem_orphan(self, i, lo):
        b = self.b
        a = i
        while True:
            br = self.break_before(a, lo)
            if not br:
                return a
            e = s = a - br
            while s > lo and (b[s - 1] in _ALNUM or b[s - 1] in "+/="):
                s -= 1
            if s > lo and s < e and b[s - 1] == "\\" and b[s] == "n":
                s += 1
            if s == e or (s > lo and b[s - 1] != '"' and not self.break_before(s, lo)):
                return a
            a = s

    def m_pem(self, i):
        a = self.pem_line(i, "-----BEGIN ")
        if a:
            self.pem_begin = i + 1
            return self.done(a, self.pem_end(a))
        e = self.pem_line(i, "-----END ")
        if not e:
            return i + 1
        lo = max(i - PEM_MAX if i > PEM_MAX else 0, self.pem_floor)
        self.pem_floor = e
        if self.pem_begin and self.pem_begin - 1 >= lo:
            return e
        self.mask(self.pem_orphan(i, lo), i)
        return e

    # -- URLs --

    def webhook(self, host, he, ae):
        h = self.text(host, he).lower()
        for dom, path in HOOKS:
            if (h == dom or h.endswith("." + dom)) and self.has(ae, path):
                a = ae + len(path)
                self.done(a, self.run_of(a, "URL"))
                return

    def m_url(self, i):
        b, n = self.b, self.n
        s = i
        while s > 0 and (b[s - 1] in _ALNUM or b[s - 1] in "+.-"):
            s -= 1
        a = ae = i + 3
        if i - s < 2 or b[s] not in _ALPHA:
            return i + 1
        while ae < n and ae - a < AUTHORITY_MAX and b[ae] > " " and b[ae] not in "/?#\"'<>\\`":
            ae += 1
        if ae - a >= AUTHORITY_MAX:
            return i + 1
        at = ae
        while at > a and b[at - 1] != "@":
            at -= 1
        host = at if at > a else a
        he = host
        while he < ae and b[he] != ":":
            he += 1
        if at > a:
            at -= 1
            colon = self.text(a, at).find(":")
            if colon >= 0:
                self.mask(a + colon + 1, at)
            elif ("sentry" in self.text(host, he).lower() or
                  (at - a >= 24 and self.run_of(a, "TOKEN") == at)):
                self.mask(a, at)
        self.webhook(host, he, ae)
        return a

    # -- pairs --

    def skip_scheme(self, a):
        b, n = self.b, self.n
        e = a
        while e < n and b[e] in _ALPHA:
            e += 1
        if e - a < 3 or e - a > 16 or e >= n or b[e] != " ":
            return a
        while e < n and b[e] == " ":
            e += 1
        return e if e < n and b[e] > " " and b[e] != '"' else a

    @staticmethod
    def placeholder(v):
        return v == "*" * len(v) or v.lower() in NOT_VALUES

    def value_at(self, v, kind, flags):
        b, n = self.b, self.n
        s = v
        while v < n and v - s < 8 and b[v] in " \t":
            v += 1
        if v >= n:
            return v
        c = b[v]
        esc = c == "\\" and v + 1 < n and b[v + 1] in "\"'"
        if c == '"' and not flags & V_DQ:
            return v
        if c in "\"'" or esc:
            q = b[v + 1] if esc else c
            a = v + (2 if esc else 1)
            if kind == 2:
                a = self.skip_scheme(a)
            e = self.quoted_end(a, q, esc)
            return e + 1 if self.placeholder(self.text(a, e)) else self.done(a, e)
        if flags & V_NEED_QUOTE:
            return v
        if kind == 2:
            v = self.skip_scheme(v)
        e = self.run_of(v, "VALUE")
        return e + 1 if self.placeholder(self.text(v, e)) else self.done(v, e)

    def m_pair(self, i):
        b, n = self.b, self.n
        sep = b[i]
        if sep == ":" and self.has(i + 1, "//"):
            return self.m_url(i)
        if (i + 1 < n and b[i + 1] in "=:") or (i and b[i - 1] in "=!<>:"):
            return i + 1
        j = i
        while j > 0 and i - j < 4 and b[j - 1] in " \t":
            j -= 1
        kq = ""
        if j > 0 and b[j - 1] in "\"'":
            j -= 1
            kq = b[j]
            if j > 0 and b[j - 1] == "\\":
                j -= 1
        k = j
        while k > 0 and j - k <= IDENT_MAX and _CLS["IDENT"](b[k - 1]):
            k -= 1
        if k == j or j - k > IDENT_MAX:
            return i + 1
        kind = _key_kind(self.text(k, j))
        if not kind or (kind == 3 and sep != "="):
            return i + 1
        structural = sep == ":" and kq == '"'
        return self.value_at(i + 1, kind, V_NEED_QUOTE | V_DQ if structural else
                             0 if self.json else V_DQ)

    # -- options --

    def line_ctx_at(self, i):
        b = self.b
        frm = self.lc_pos - 8 if self.lc_pos > 8 else 0
        nl = -1
        if self.lc_valid and self.lc_pos <= i:
            nl = self.text(self.lc_pos, i).rfind("\n")
            if nl >= 0:
                nl += self.lc_pos
        if not self.lc_valid or self.lc_pos > i or nl >= 0:
            s = nl + 1 if nl >= 0 else i
            while s > 0 and i - s < LINE_BACK and b[s - 1] != "\n":
                s -= 1
            self.lc_start = s
            self.lc_bits = 0
            frm = s
        frm = max(frm, self.lc_start)
        self.lc_bits |= _ctx_in(self.text(frm, i))
        self.lc_pos = i
        self.lc_valid = True
        return self.lc_bits

    def after_sep(self, e):
        b, n = self.b, self.n
        v = e
        sep = qc = False
        if v + 1 < n and b[v] == "\\" and b[v + 1] in "\"'":
            v += 2
        elif v < n and b[v] in "\"'":
            v += 1
        if v > e and v < n and b[v] == ",":
            v += 1
            sep = qc = True
        s = v
        while v < n and v - s < 8 and b[v] in " \t\0":
            v += 1
            sep = True
        flags = V_DQ if qc or not self.json else 0
        return (v if sep and v < n and b[v] not in "\n\r-" else 0), flags

    def m_short_p(self, i):
        b, n = self.b, self.n
        bits = self.line_ctx_at(i)
        v = i + 2
        if not bits or v >= n:
            return i + 2
        if (_CLS["VALUE"](b[v]) and b[v] != "-") or b[v] == "'":
            return self.value_at(v, 1, 0)
        if bits & 2:
            v, flags = self.after_sep(v)
            if v:
                return self.value_at(v, 1, flags)
        return i + 2

    def m_dash(self, i):
        b, n = self.b, self.n
        if self.has(i, "-----"):
            return self.m_pem(i)
        if i and not (b[i - 1] <= " " and b[i - 1] != "\x7f" or b[i - 1] in "\"'[(,"):
            return i + 1
        d = i + 2 if i + 1 < n and b[i + 1] == "-" else i + 1
        e = self.run_of(d, "IDENT")
        if d == i + 1 and e > d and b[d] == "p" and self.line_ctx_at(i):
            return self.m_short_p(i)
        if e - d < 2 or (e < n and b[e] == "=") or not _key_kind(self.text(d, e)):
            return i + 1
        v, flags = self.after_sep(e)
        return self.value_at(v, 1, flags) if v else e

    # -- Bearer, wandb login, globs --

    def m_bearer(self, i):
        b, n = self.b, self.n
        if n - i < 7 or self.text(i, i + 6).lower() != "bearer" or (i and b[i - 1] in _ALNUM):
            return i + 1
        v = i + 6
        while v < n and v - i < 10 and b[v] in " \t":
            v += 1
        e = self.run_of(v, "BEARER")
        if v == i + 6 or e == v or e - v < 8:
            return i + 1
        return self.done(v, e)

    def m_wandb(self, i):
        b, n = self.b, self.n
        if not self.has(i, "wandb login") or (i and b[i - 1] in _ALNUM):
            return i + 1
        v = i + 11
        for _ in range(4):
            s = v
            while v < n and b[v] in " \t\0":
                v += 1
            e = self.run_of(v, "VALUE")
            if v == s or e == v:
                break
            if e - v >= 32 and self.run_of(v, "TOKEN") == e and b[v] != "-":
                return self.done(v, e)
            v = e
        return i + 1

    def m_glob(self, i):
        e = self.run_of(i, "GLOB")
        if e - i > GLOB_WORD_MAX:
            return i + 1
        w = self.text(i, e)
        for g in self.globs:
            if fnmatch.fnmatchcase(w, g):
                return self.done(i, e)
        return i + 1

    def dispatch(self, i):
        c = self.b[i]
        if c in "=:":
            return self.m_pair(i)
        if c == "-":
            return self.m_dash(i)
        if c == "e":
            return self.m_jwt(i)
        if c in "Bb":
            return self.m_bearer(i)
        if c == "w":
            return self.m_wandb(i)
        return self.m_token(i) if c in _TOK_FIRST else i + 1

    def scan(self, s):
        b, n = self.b, self.n
        if self.globs:  # a word may start anywhere: every position, as shapes.c's scan
            glob = _CLS["GLOB"]
            i = 0
            while i < n:
                nx = i + 1
                if glob(b[i]) and (not i or not glob(b[i - 1])):
                    nx = self.m_glob(i)
                if nx == i + 1:
                    nx = self.dispatch(i)
                i = nx if nx > i else i + 1
            return
        i = 0
        while i < n:  # only where a form can start (a masked byte is no trigger any more)
            m = _TRIGGER.search(s, i)
            if not m:
                return
            i = m.start()
            if b[i] != s[i]:
                i += 1
                continue
            nx = self.dispatch(i)
            i = nx if nx > i else i + 1


def mask_shapes(s, globs=(), learn=None):
    """s with every secret recognized by its shape masked (same length), and the words the
    globs (redact_values) match; each masked value added to the set learn, if given."""
    if not isinstance(s, str) or not s:
        return s
    x = _Scan(s, globs, learn)
    x.scan(s)
    return "".join(x.b)


def _match(name, pats):
    up = name.upper()
    return any(fnmatch.fnmatchcase(up, p) for p in pats)


def _is_secret_name(name, extra=()):
    if _match(name, SECRET_NAMES) and not _match(name, NOT_SECRET_NAMES):
        return True
    return any(fnmatch.fnmatchcase(name.upper(), p.upper()) for p in extra)


class Scrubber:
    """Masks secrets the way the capture does (common/scrub.c, common/shapes.c): what looks
    like a secret by its shape (mask_shapes: URL passwords, tokens, key=value pairs, ... and
    the words the configured redact_values globs match), then the values of secret-looking
    environment variables (and the configured redact_env patterns) and what the shapes find
    in any environment value, wherever they appear."""

    def __init__(self, environ=None, extra_patterns=(), value_globs=()):
        env = os.environ if environ is None else environ
        self.globs = tuple(g for g in value_globs if g)
        vals = set()
        for k, v in list(env.items()):
            if not isinstance(v, str) or not v:
                continue
            if _is_secret_name(k, extra_patterns):
                vals.add(v[:SCRUB_MAXLEN])
            learned = set()
            mask_shapes(v, self.globs, learned)
            vals |= {x[:SCRUB_MAXLEN] for x in learned}
        # absolute paths without a space are names of files, not secrets (cp_scrub_add)
        self.values = sorted((v for v in vals if len(v) >= SCRUB_MIN and
                              not (v.startswith("/") and " " not in v)), key=len, reverse=True)

    def __call__(self, s):
        if not isinstance(s, str) or not s:
            return s
        s = mask_shapes(s, self.globs)
        for v in self.values:
            if v in s:
                s = s.replace(v, "*" * len(v))
        return s


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


def source_line(code, line, f_globals=None):
    """The frame's source line as Python's traceback prints it (stripped), at most SOURCE_MAX
    characters, read now (as the process's user) through linecache; None when unreadable."""
    try:
        filename = code.co_filename
        if not isinstance(line, int) or line <= 0 or not filename:
            return None
        try:
            if os.stat(filename).st_size > SOURCE_FILE_MAX:
                return None
        except (OSError, ValueError, TypeError):
            pass  # no such file: a loader (zip import) may still have the source
        import linecache
        s = linecache.getline(filename, line, f_globals if isinstance(f_globals, dict) else None)
    except Exception:
        return None
    s = s.strip() if isinstance(s, str) else ""
    if not s:
        return None
    return clean(s if len(s) <= SOURCE_MAX else s[:SOURCE_MAX - 3] + "...")


def _cut_value(s):
    b = s.encode("utf-8", "replace")
    if len(b) <= LOCAL_VALUE_MAX:
        return s
    return b[:LOCAL_VALUE_MAX - 3].decode("utf-8", "ignore") + "..."


_ARRAY_MODULES = ("torch", "numpy", "jax", "jaxlib", "tensorflow", "cupy")


def _addr_repr(v, note=""):
    return "<%s object at %#x%s>" % (type_name(type(v)), id(v), note)


class Locals:
    """Local variables' values for one document (python_locals = on): each frame's locals as
    {name: short repr}, innermost frames first. repr() is guarded: exceptions in it are caught, a
    str/bytes is cut before its repr, a container is shown shallowly, an array (torch, numpy, ...)
    by its shape and dtype (its repr may synchronize a GPU), and once LOCALS_SECONDS are spent no
    other object's own __repr__ runs. Each value is at most LOCAL_VALUE_MAX bytes, a frame has at
    most LOCALS_PER_FRAME, the document LOCALS_TOTAL bytes; a value whose name or text looks like
    a secret is masked by the scrubber (as `name=value`)."""

    def __init__(self, scrub, seconds=LOCALS_SECONDS, total=LOCALS_TOTAL):
        self.scrub = scrub
        self.left = total
        self.deadline = time.monotonic() + seconds

    def repr(self, v, depth=0):
        t = type(v)
        try:
            if v is None or t is bool or t is float or t is complex:
                return repr(v)
            if t is int:
                return repr(v) if v.bit_length() <= 256 else "<int of %d bits>" % v.bit_length()
            if t is str or t is bytes or t is bytearray:
                return _cut_value(repr(v[:LOCAL_VALUE_MAX + 1]))
            if t in (list, tuple, set, frozenset, dict):
                return self._container(v, t, depth)
            mod = getattr(t, "__module__", "") or ""
            if mod.split(".")[0] in _ARRAY_MODULES and hasattr(v, "shape") and hasattr(v, "dtype"):
                dev = getattr(v, "device", None)
                return _cut_value("<%s shape=%s dtype=%s%s>" % (
                    type_name(t), tuple(v.shape), v.dtype, " device=%s" % dev if dev else ""))
            if t.__repr__ is object.__repr__ or time.monotonic() >= self.deadline:
                return _addr_repr(v)
            return _cut_value(repr(v))
        except BaseException as e:  # a __repr__ that raises (KeyboardInterrupt included)
            try:
                return _addr_repr(v, " (repr failed: %s)" % type(e).__name__)
            except BaseException:
                return "<object (repr failed)>"

    def _container(self, v, t, depth):
        n = len(v)
        if depth >= 1:
            return "<%s of %d>" % (t.__name__, n)
        if t is dict:
            items = list(itertools.islice(v.items(), 8))
            parts = ["%s: %s" % (self.repr(k, 1), self.repr(x, 1)) for k, x in items]
            open_, close = "{", "}"
        else:
            parts = [self.repr(x, 1) for x in itertools.islice(v, 8)]
            open_, close = {list: ("[", "]"), tuple: ("(", ")"), set: ("{", "}"),
                            frozenset: ("frozenset({", "})")}[t]
            if t is tuple and n == 1:
                close = ",)"
        if n > len(parts):
            parts.append("...")
        if not n:
            return {list: "[]", tuple: "()", set: "set()", frozenset: "frozenset()",
                    dict: "{}"}[t]
        return _cut_value(open_ + ", ".join(parts) + close)

    def of(self, frame):
        """(locals, truncated) of one frame: {name: masked repr}, in f_locals' order."""
        out = {}
        truncated = False
        try:
            loc = frame.f_locals
            module_level = loc is frame.f_globals
            items = list(itertools.islice(loc.items(), LOCALS_SCAN))
        except BaseException:
            return out, False
        for name, v in items:
            if not isinstance(name, str):
                continue
            if module_level and (name.startswith("_") or isinstance(v, type) or
                                 type(v).__name__ in ("module", "function", "builtin_function_or_method")):
                continue  # a module's globals: its variables, not its imports and definitions
            if len(out) == LOCALS_PER_FRAME or self.left <= 0:
                truncated = True
                break
            nm = cap(clean(name), LOCAL_NAME_MAX)
            r = clean(self.repr(v))
            try:
                r = self.scrub(nm + "=" + r)[len(nm) + 1:]  # `password='...'` masks the value
            except Exception:
                r = "<masked>"
            out[nm] = r
            self.left -= len(nm) + len(r.encode("utf-8", "replace"))
        return out, truncated


def frames_of(tb, scrub, source=True, local_values=None):
    """The traceback's frames, outermost first: the innermost MAX_FRAMES, and whether more were
    cut. Names, files and lines, and each frame's source line (source); its locals only when
    local_values (a Locals) is given."""
    out = []
    tbs = []
    n = 0
    while tb is not None and n < 1000000:
        n += 1
        try:
            f = tb.tb_frame
            code = f.f_code
            line = tb.tb_lineno
            o = {"function": scrub(clean(code.co_name)),
                 "qualname": scrub(clean(_qualname(f, code))),
                 "file": scrub(clean(code.co_filename)),
                 "line": line if isinstance(line, int) and line >= 0 else None}
            out.append(o)
            tbs.append(tb)
        except Exception:
            out.append({"function": "?", "qualname": "?", "file": "?", "line": None})
            tbs.append(None)
        if len(out) > 2 * MAX_FRAMES:
            del out[:-MAX_FRAMES]
            del tbs[:-MAX_FRAMES]
        tb = tb.tb_next
    truncated = len(out) > MAX_FRAMES or n > len(out)
    out, tbs = out[-MAX_FRAMES:], tbs[-MAX_FRAMES:]
    for o, t in zip(out, tbs):
        if source and t is not None and "file" in o:
            try:
                o["source"] = scrub(source_line(t.tb_frame.f_code, o["line"],
                                                t.tb_frame.f_globals))
            except Exception:
                o["source"] = None
    if local_values is not None:  # innermost first: they matter most when the budget runs out
        for o, t in zip(reversed(out), reversed(tbs)):
            if t is None:
                continue
            o["locals"], cut = local_values.of(t.tb_frame)
            if cut:
                o["locals_truncated"] = True
    return out, truncated


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


def exc_object(exc, scrub, tb=None, _depth=0, _seen=None, source=True, local_values=None):
    """EXC for exception instance exc (docs/python.md), its chain at most MAX_DEPTH deep,
    cycles cut. Frames carry their source lines (source) and, given local_values (a Locals),
    the raised exception's frames their locals."""
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
                                  scrub, source, local_values)
    o = {"type": scrub(clean(type_name(t))), "mro": [scrub(clean(x)) for x in mro],
         "message": message, "frames": frames}
    if truncated:
        o["frames_truncated"] = True
    cause = getattr(exc, "__cause__", None)
    context = None if getattr(exc, "__suppress_context__", False) else getattr(exc, "__context__",
                                                                                None)
    o["cause"] = exc_object(cause, scrub, None, _depth + 1, _seen, source) \
        if isinstance(cause, BaseException) else None
    o["context"] = exc_object(context, scrub, None, _depth + 1, _seen, source) \
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


def thread_object(thread=None, scrub=None):
    import threading
    t = thread if thread is not None else threading.current_thread()
    ident = getattr(t, "ident", None)
    native = getattr(t, "native_id", None)
    if thread is None or t is threading.current_thread():
        ident = threading.get_ident()
        gn = getattr(threading, "get_native_id", None)
        native = gn() if gn else native
    name = clean(getattr(t, "name", None))
    return {"ident": ident, "native_id": native, "name": scrub(name) if scrub else name}


def python_object():
    return {"version": sys.version.split()[0],
            "implementation": getattr(getattr(sys, "implementation", None), "name", "cpython"),
            "executable": clean(sys.executable)}
