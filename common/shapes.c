/* shapes.c - secrets recognized by their shape in text (scrub.h; the forms are listed in
 * docs/capture.md, "Secrets"). libc only, no regex engine: the capture handler links it.
 *
 * One pass over the text. A byte that can start a form (a trigger: '=' or ':' after a key's
 * name, "://", '-' of an option or a key block, "eyJ", "Bearer", "wandb login", the first letter
 * of a token prefix) runs the matchers of that byte, each a few lines over a table (token
 * prefixes, key names, webhook hosts, the commands that take -pSECRET). A matcher masks the
 * secret part of what it recognizes, in place, one '*' a byte, and never a double quote, a line
 * end or a NUL, nor half of a backslash escape: JSON text stays JSON, lines stay lines, offsets
 * do not move.
 *
 * Streams (cp_scrub_stream): the last CP_SHAPE_CTX raw bytes of the previous chunk are scanned
 * again with the head of the new one (a form cut by the boundary), and a match that ran to the
 * end of a chunk goes on at the start of the next (struct cp_scrub_open). A form whose answer
 * depends on bytes past the end of a chunk is left to that seam while its secret part has not
 * begun (an incomplete trigger or key name), and masked on suspicion when it has (a token shorter
 * than its format so far, user:pass with no '@' yet): those bytes leave with this chunk. */
#include "scrub.h"

#include <fnmatch.h>
#include <string.h>
#include <strings.h>

#define IDENT_MAX 64       /* a key's name: a longer word is not looked at */
#define LINE_BACK 4096     /* how far back a command (mysql) is looked for on the line */
#define QUOTED_MAX 65536   /* a quoted value is masked up to this long */
#define PEM_MAX (64 << 10) /* a key block's body */
#define GLOB_WORD_MAX 1024 /* a word matched against the configured globs */
#define AUTHORITY_MAX 512  /* user:password@host:port */
#define SEAM_AHEAD 2048    /* a stream's seam window: this much of the new chunk */

/* ---- bytes ---- */

enum cls {
    C_ALNUM,
    C_WORD,
    C_TOKEN,
    C_UPDIG,
    C_BEARER,
    C_IDENT,
    C_VALUE,
    C_URL,
    C_GLOB,
    C_JWT,
    C_AUTH
};
enum open_kind { O_NONE, O_RUN, O_QUOTED, O_PEM };

static int alpha(uint8_t c)
{
    return (c | 32) >= 'a' && (c | 32) <= 'z';
}
static int digit(uint8_t c)
{
    return c >= '0' && c <= '9';
}
static int alnum(uint8_t c)
{
    return alpha(c) || digit(c);
}
static int blank(uint8_t c)
{
    return c == ' ' || c == '\t';
}

static int in_cls(int k, uint8_t c)
{
    switch (k) {
    case C_ALNUM:
        return alnum(c);
    case C_WORD:
        return alnum(c) || c == '_';
    case C_TOKEN:
        return alnum(c) || c == '_' || c == '-';
    case C_UPDIG:
        return (c >= 'A' && c <= 'Z') || digit(c);
    case C_BEARER:
        return alnum(c) || (c && strchr("._~+/=-", c));
    case C_IDENT:
        return alnum(c) || c == '_' || c == '-' || c == '.';
    case C_VALUE: /* an unquoted value: up to a space, a quote, a separator, a bracket */
        return c > ' ' && c != 0x7f && !strchr("\"'`,;&<>()[]{}|\\", c);
    case C_URL:
        return c > ' ' && c != 0x7f && !strchr("\"'`<>\\", c);
    case C_GLOB:
        return c > ' ' && c != 0x7f && !strchr("\"'`,;&<>()[]{}|\\=", c);
    case C_JWT:
        return alnum(c) || c == '_' || c == '-' || c == '.';
    case C_AUTH: /* user:password of an authority */
        return c > ' ' && c != 0x7f && !strchr("/?#\"'<>\\`@", c);
    }
    return 0;
}

/* ---- one scan ---- */

struct sx {
    uint8_t *b;
    size_t n, mlo;      /* masks land at mlo and after (a seam window: the new chunk's part) */
    int lo_cut, hi_cut; /* the text goes on before b[0] / after b[n-1] */
    int guess;          /* b[n-1] is where the chunk ends (not a seam window's cut): what may be
                         * a secret there is masked on suspicion */
    int json;           /* JSON text: a double quote right after '=' ends a string, opens none */
    int line_ctx;       /* bit 0: a command that takes -pSECRET is on the line that runs into
                         * b[0]; bit 1: one that takes -p SECRET */
    const char *globs;
    struct cp_scrub *learn; /* each masked value is added here, or NULL */
    size_t masked;
    struct cp_scrub_open open; /* a match that ran to b[n] with hi_cut */
    /* what the scan has seen, so that no byte is looked at again and again: */
    size_t pem_begin, pem_floor; /* the last key block's BEGIN (+1), the last END's end */
    size_t lc_start, lc_pos;     /* line_ctx_at: the line's start, how far it was read */
    int lc_bits, lc_valid;
};

static int has(const struct sx *x, size_t i, const char *lit)
{
    size_t l = strlen(lit);
    return i <= x->n && x->n - i >= l && !memcmp(x->b + i, lit, l);
}

static size_t run_of(const struct sx *x, size_t i, int k)
{
    while (i < x->n && in_cls(k, x->b[i]))
        i++;
    return i;
}

static void put(struct sx *x, size_t i)
{
    if (i >= x->mlo && i < x->n && x->b[i] != '*') {
        x->b[i] = '*';
        x->masked++;
    }
}

/* Masks [a, e): every byte but a double quote, a line end or a NUL; a backslash with the byte
 * it escapes. */
static void mask(struct sx *x, size_t a, size_t e)
{
    if (e <= a)
        return;
    if (x->learn && !x->mlo && x->learn->n < CP_SCRUB_LEARN_MAX)
        cp_scrub_add(x->learn, x->b + a, e - a);
    for (size_t i = a; i < e; i++) {
        uint8_t c = x->b[i];
        if (c == '"' || c == '\n' || c == '\r' || c == 0)
            continue;
        put(x, i);
        if (c == '\\' && i + 1 < x->n && x->b[i + 1] != '\n' && x->b[i + 1] != 0)
            put(x, ++i);
    }
}

/* Masks [a, e) and returns where the scan goes on; a match that reaches the end of a chunk of a
 * stream goes on in the next. */
static size_t done(struct sx *x, size_t a, size_t e, int kind, int cls, uint8_t q, int esc)
{
    mask(x, a, e);
    if (e >= x->n && x->hi_cut && e > a)
        x->open = (struct cp_scrub_open){(uint8_t)kind, (uint8_t)cls, q, (uint8_t)esc};
    return e > a ? e : a + 1;
}

/* The end of a value that opened with quote q (written \q when esc: a quote inside a JSON
 * string) and whose text starts at i: its closing quote, or where it must stop - a line end,
 * the end of a JSON string (an unescaped double quote), QUOTED_MAX. */
static size_t quoted_end(const struct sx *x, size_t i, uint8_t q, int esc)
{
    size_t lim = x->n - i > QUOTED_MAX ? i + QUOTED_MAX : x->n;
    for (; i < lim; i++) {
        uint8_t c = x->b[i];
        if (c == '\n' || c == '\r' || c == 0 || c == '"' || (c == q && !esc))
            return i;
        if (c != '\\')
            continue;
        if (i + 1 >= x->n)
            return x->n;
        uint8_t d = x->b[i + 1];
        if (esc && (d == q || d == 'n' || d == 'r'))
            return i;
        i++; /* an escaped byte */
    }
    return lim;
}

/* The end of a private key's body from i: the dashes of its END line, an unescaped double quote
 * (the end of a JSON string), or PEM_MAX. Dashes at the very end of a chunk may be the END line:
 * not masked. */
static size_t pem_end(const struct sx *x, size_t i)
{
    size_t lim = x->n - i > PEM_MAX ? i + PEM_MAX : x->n;
    for (; i < lim; i++) {
        uint8_t c = x->b[i];
        if (c == '"')
            return i;
        if (c == '\\') {
            i++;
            continue;
        }
        if (c != '-')
            continue;
        size_t j = i;
        while (j < x->n && x->b[j] == '-' && j - i < 5)
            j++;
        size_t left = x->n - j < 3 ? x->n - j : 3;
        if (!memcmp(x->b + j, "END", left) && (left == 3 || x->hi_cut))
            return i;
    }
    return lim;
}

/* A value that goes on from a, as the last chunk left it. */
static size_t cont(struct sx *x, size_t a, const struct cp_scrub_open *o)
{
    size_t e = o->kind == O_RUN      ? run_of(x, a, o->cls)
               : o->kind == O_QUOTED ? quoted_end(x, a, o->q, o->esc)
                                     : pem_end(x, a);
    return done(x, a, e, o->kind, o->cls, o->q, o->esc);
}

/* ---- well-known token formats: the prefix stays, the rest is masked ---- */

static const struct tok {
    const char *prefix;
    uint8_t cls, min, exact, digit; /* body: class, length (exact: no more), needs a digit */
} toks[] = {
    /* Hugging Face; GitHub: personal, OAuth, user, server, refresh, fine-grained; GitLab */
    {"hf_", C_ALNUM, 30, 0, 0},
    {"ghp_", C_ALNUM, 30, 0, 0},
    {"gho_", C_ALNUM, 30, 0, 0},
    {"ghu_", C_ALNUM, 30, 0, 0},
    {"ghs_", C_ALNUM, 30, 0, 0},
    {"ghr_", C_ALNUM, 30, 0, 0},
    {"github_pat_", C_WORD, 40, 0, 0},
    {"glpat-", C_TOKEN, 20, 0, 0},
    /* AWS access key ids (long-term, temporary); Google API keys */
    {"AKIA", C_UPDIG, 16, 1, 0},
    {"ASIA", C_UPDIG, 16, 1, 0},
    {"AIza", C_TOKEN, 35, 1, 0},
    /* OpenAI (sk-..., sk-proj-...); Stripe */
    {"sk-", C_TOKEN, 20, 0, 1},
    {"sk_live_", C_ALNUM, 16, 0, 0},
    {"sk_test_", C_ALNUM, 16, 0, 0},
    {"rk_live_", C_ALNUM, 16, 0, 0},
    /* Slack; npm; PyPI */
    {"xoxa-", C_TOKEN, 10, 0, 1},
    {"xoxb-", C_TOKEN, 10, 0, 1},
    {"xoxp-", C_TOKEN, 10, 0, 1},
    {"xoxr-", C_TOKEN, 10, 0, 1},
    {"npm_", C_ALNUM, 36, 1, 0},
    {"pypi-", C_TOKEN, 50, 0, 0},
};

static int has_digit(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (digit(p[i]))
            return 1;
    return 0;
}

static size_t m_token(struct sx *x, size_t i)
{
    if (i ? alnum(x->b[i - 1]) : x->lo_cut)
        return i + 1;
    for (size_t t = 0; t < sizeof(toks) / sizeof(toks[0]); t++) {
        const struct tok *k = &toks[t];
        if (x->b[i] != (uint8_t)k->prefix[0] || !has(x, i, k->prefix))
            continue;
        size_t a = i + strlen(k->prefix), e = run_of(x, a, k->cls), len = e - a;
        if (e == x->n && x->hi_cut && (len < k->min || k->exact))
            return x->guess ? done(x, a, e, O_RUN, k->cls, 0, 0) : i + 1; /* on suspicion */
        if (len < k->min || (k->exact && len != k->min) || (k->digit && !has_digit(x->b + a, len)))
            continue;
        return done(x, a, e, O_RUN, k->cls, 0, 0);
    }
    return i + 1;
}

static int tok_first(uint8_t c)
{
    for (size_t t = 0; t < sizeof(toks) / sizeof(toks[0]); t++)
        if (c == (uint8_t)toks[t].prefix[0])
            return 1;
    return 0;
}

/* JWT: eyJ<header>.<payload>.<signature>, base64url; all but "eyJ" masked */
static size_t m_jwt(struct sx *x, size_t i)
{
    if (!has(x, i, "eyJ") || (i ? in_cls(C_TOKEN, x->b[i - 1]) || x->b[i - 1] == '.' : x->lo_cut))
        return i + 1;
    size_t p1 = run_of(x, i, C_TOKEN);
    if (p1 >= x->n || p1 - i < 10 || x->b[p1] != '.')
        return i + 1;
    size_t p2 = run_of(x, p1 + 1, C_TOKEN);
    if (p2 >= x->n && x->hi_cut) /* cut in the payload: masked on suspicion */
        return done(x, i + 3, p2, O_RUN, C_JWT, 0, 0);
    if (p2 >= x->n || p2 - p1 < 9 || x->b[p2] != '.')
        return i + 1;
    return done(x, i + 3, run_of(x, p2 + 1, C_TOKEN), O_RUN, C_TOKEN, 0, 0);
}

/* ---- private-key blocks ---- */

/* "-----BEGIN <label>-----" or "-----END <label>-----" at i whose label says PRIVATE KEY: the
 * index after it, or 0. */
static size_t pem_line(const struct sx *x, size_t i, const char *what)
{
    if (!has(x, i, what))
        return 0;
    size_t j = i + strlen(what), k = j;
    while (k < x->n && k - j < 48 &&
           ((x->b[k] >= 'A' && x->b[k] <= 'Z') || digit(x->b[k]) || x->b[k] == ' '))
        k++;
    if (!has(x, k, "-----") || !memmem(x->b + j, k - j, "PRIVATE KEY", 11))
        return 0;
    return k + 5;
}

/* The line break just before a (a raw one, or a JSON string's \n), as far back as lo: its
 * length, or 0. */
static size_t break_before(const struct sx *x, size_t a, size_t lo)
{
    if (a > lo && x->b[a - 1] == '\n')
        return a - 1 > lo && x->b[a - 2] == '\r' ? 2 : 1;
    return a >= lo + 2 && x->b[a - 1] == 'n' && x->b[a - 2] == '\\' ? 2 : 0;
}

static int b64(uint8_t c)
{
    return alnum(c) || c == '+' || c == '/' || c == '=';
}

/* Where the body of a key block whose END line starts at i begins, when its BEGIN was cut off:
 * the whole lines of base64 just before (the first may be cut by lo, the text's start, or start
 * a JSON string). */
static size_t pem_orphan(const struct sx *x, size_t i, size_t lo)
{
    size_t a = i;
    for (size_t br; (br = break_before(x, a, lo));) {
        size_t e = a - br, s = e;
        while (s > lo && b64(x->b[s - 1]))
            s--;
        if (s > lo && s < e && x->b[s - 1] == '\\' && x->b[s] == 'n')
            s++; /* the n of a JSON string's \n is no base64 */
        if (s == e || (s > lo && x->b[s - 1] != '"' && !break_before(x, s, lo)))
            break;
        a = s;
    }
    return a;
}

static size_t m_pem(struct sx *x, size_t i)
{
    size_t a = pem_line(x, i, "-----BEGIN ");
    if (a) {
        x->pem_begin = i + 1;
        return done(x, a, pem_end(x, a), O_PEM, 0, 0, 0);
    }
    /* the END of a block whose BEGIN was cut off (a tail that starts inside a key) */
    size_t e = x->lo_cut ? 0 : pem_line(x, i, "-----END ");
    if (!e)
        return i + 1;
    size_t lo = i > PEM_MAX ? i - PEM_MAX : 0;
    lo = lo > x->pem_floor ? lo : x->pem_floor;
    x->pem_floor = e;
    if (x->pem_begin && x->pem_begin - 1 >= lo)
        return e; /* masked when its BEGIN was seen */
    mask(x, pem_orphan(x, i, lo), i);
    return e;
}

/* ---- URLs: scheme://user:PASSWORD@host, Sentry DSNs, webhooks ---- */

static const struct hook {
    const char *host, *path; /* host or a parent domain; what follows the path is masked */
} hooks[] = {
    {"hooks.slack.com", "/services/"},    {"hooks.slack.com", "/workflows/"},
    {"hooks.slack.com", "/triggers/"},    {"discord.com", "/api/webhooks/"},
    {"discordapp.com", "/api/webhooks/"}, {"webhook.office.com", "/"},
    {"outlook.office.com", "/webhook/"},  {"logic.azure.com", "/workflows/"},
};

static int host_is(const uint8_t *h, size_t hl, const char *dom)
{
    size_t dl = strlen(dom);
    return hl >= dl && !strncasecmp((const char *)h + hl - dl, dom, dl) &&
           (hl == dl || h[hl - dl - 1] == '.');
}

static int icontains(const uint8_t *p, size_t n, const char *w)
{
    size_t l = strlen(w);
    for (size_t i = 0; i + l <= n; i++)
        if (!strncasecmp((const char *)p + i, w, l))
            return 1;
    return 0;
}

/* The user of user@host with no password: a key when the host is Sentry's (its DSN) or when it
 * is long and token-like. */
static int user_is_key(const struct sx *x, size_t a, size_t at, size_t host, size_t he)
{
    return icontains(x->b + host, he - host, "sentry") ||
           (at - a >= 24 && run_of(x, a, C_TOKEN) == at);
}

static void webhook(struct sx *x, size_t host, size_t he, size_t ae)
{
    for (size_t k = 0; k < sizeof(hooks) / sizeof(hooks[0]); k++)
        if (host_is(x->b + host, he - host, hooks[k].host) && has(x, ae, hooks[k].path)) {
            size_t a = ae + strlen(hooks[k].path);
            done(x, a, run_of(x, a, C_URL), O_RUN, C_URL, 0, 0);
            return;
        }
}

static size_t m_url(struct sx *x, size_t i) /* b[i..] = "://" */
{
    size_t s = i;
    while (s > 0 &&
           (alnum(x->b[s - 1]) || x->b[s - 1] == '+' || x->b[s - 1] == '.' || x->b[s - 1] == '-'))
        s--;
    size_t a = i + 3, ae = a;
    if (i - s < 2 || !alpha(x->b[s]))
        return i + 1;
    while (ae < x->n && ae - a < AUTHORITY_MAX && x->b[ae] > ' ' &&
           !strchr("/?#\"'<>\\`", x->b[ae]))
        ae++;
    if (ae - a >= AUTHORITY_MAX)
        return i + 1; /* not an authority */
    int cut = ae == x->n && x->hi_cut, guess = cut && x->guess;
    size_t at = ae;
    while (at > a && x->b[at - 1] != '@')
        at--;
    size_t host = at > a ? at : a, he = host;
    while (he < ae && x->b[he] != ':')
        he++;
    if (at > a) {
        at--;
        const uint8_t *colon = memchr(x->b + a, ':', at - a);
        if (colon)
            mask(x, (size_t)(colon - x->b) + 1, at);
        else if (user_is_key(x, a, at, host, he) || (guess && at - a >= 16))
            mask(x, a, at);
    } else if (guess) { /* no '@' yet: a password after a colon, or a DSN's key, on suspicion */
        const uint8_t *colon = memchr(x->b + a, ':', ae - a);
        size_t from = colon ? (size_t)(colon - x->b) + 1 : a;
        if (colon || (ae - a >= CP_SCRUB_EDGE_MIN && !memchr(x->b + a, '.', ae - a)))
            done(x, from, ae, O_RUN, C_AUTH, 0, 0);
        return a;
    }
    if (!cut)
        webhook(x, host, he, ae);
    return a; /* a query's token=... is a pair: scanned on */
}

/* ---- key = value, key: value ---- */

/* Names whose value is a secret: the name's last part (after _ . -) is one of key_exact, or
 * ends with one of key_suffix (PGPASSWORD, accessToken, clientSecret); key_not are not. */
static const char *const key_exact[] = {"key",         "pwd",           "pass",       "apikey",
                                        "accesskey",   "secretkey",     "privatekey", "credential",
                                        "credentials", "authorization", NULL};
static const char *const key_suffix[] = {"password", "passwd", "passphrase",
                                         "secret",   "token",  NULL};
static const char *const key_not[] = {"eos_token", "bos_token", "pad_token",  "unk_token",
                                      "sep_token", "cls_token", "mask_token", "public_key",
                                      "publickey", "cache_key", NULL};

/* 0: not a secret's name; 1: a secret's; 2: Authorization (a scheme word comes first); 3: pass,
 * a secret's only before '=' ("the forward pass: Net.forward" is prose). */
static int key_kind(const uint8_t *k, size_t len)
{
    while (len && (*k == '-' || *k == '.'))
        k++, len--;
    if (!len || len > IDENT_MAX || (len == 3 && !memcmp(k, "PWD", 3)) ||
        (len == 6 && !memcmp(k, "OLDPWD", 6)))
        return 0;
    char low[IDENT_MAX + 1];
    for (size_t i = 0; i < len; i++)
        low[i] = (char)(k[i] >= 'A' && k[i] <= 'Z' ? k[i] | 32 : k[i]);
    low[len] = 0;
    for (size_t i = 0; key_not[i]; i++)
        if (!strcmp(low, key_not[i]))
            return 0;
    const char *last = low + len;
    while (last > low && !strchr("_.-", last[-1]))
        last--;
    size_t ll = strlen(last);
    if (!strcmp(last, "authorization"))
        return 2;
    if (!strcmp(last, "pass"))
        return 3;
    for (size_t i = 0; key_exact[i]; i++)
        if (!strcmp(last, key_exact[i]))
            return 1;
    for (size_t i = 0; key_suffix[i]; i++) {
        size_t wl = strlen(key_suffix[i]);
        if (ll >= wl && !strcmp(last + ll - wl, key_suffix[i]))
            return 1;
    }
    return 0;
}

/* "Bearer ", "Basic ": the scheme word of an Authorization value, skipped. */
static size_t skip_scheme(const struct sx *x, size_t a)
{
    size_t e = a;
    while (e < x->n && alpha(x->b[e]))
        e++;
    if (e - a < 3 || e - a > 16 || e >= x->n || x->b[e] != ' ')
        return a;
    while (e < x->n && x->b[e] == ' ')
        e++;
    return e < x->n && x->b[e] > ' ' && x->b[e] != '"' ? e : a;
}

/* Values that are no secret: already masked, a placeholder, a literal of code in a traceback's
 * source line (key=lambda x: ..., password=None). */
static const char *const not_values[] = {"<redacted>", "[redacted]", "lambda", "none",
                                         "null",       "true",       "false",  NULL};

static int placeholder(const uint8_t *p, size_t n)
{
    size_t stars = 0;
    while (stars < n && p[stars] == '*')
        stars++;
    for (size_t k = 0; stars < n && not_values[k]; k++)
        if (strlen(not_values[k]) == n && !strncasecmp((const char *)p, not_values[k], n))
            return 1;
    return stars == n;
}

/* The value from v (after the separator, blanks skipped): the text inside its quotes, or a run of
 * value bytes. Flags: V_NEED_QUOTE ("key": 123 in JSON is a number, not a secret), V_DQ (a
 * double quote here may open a value: not right after a separator inside a JSON string, where
 * it ends the string). */
#define V_NEED_QUOTE 1
#define V_DQ 2
static size_t value_at(struct sx *x, size_t v, int kind, int flags)
{
    for (size_t s = v; v < x->n && v - s < 8 && blank(x->b[v]);)
        v++;
    if (v >= x->n)
        return v;
    uint8_t c = x->b[v];
    int esc = c == '\\' && v + 1 < x->n && (x->b[v + 1] == '"' || x->b[v + 1] == '\'');
    if (c == '"' && !(flags & V_DQ))
        return v;
    if (c == '"' || c == '\'' || esc) {
        uint8_t q = esc ? x->b[v + 1] : c;
        size_t a = v + (esc ? 2 : 1);
        if (kind == 2)
            a = skip_scheme(x, a);
        size_t e = quoted_end(x, a, q, esc);
        return placeholder(x->b + a, e - a) ? e + 1 : done(x, a, e, O_QUOTED, 0, q, esc);
    }
    if (flags & V_NEED_QUOTE)
        return v;
    if (kind == 2)
        v = skip_scheme(x, v);
    size_t e = run_of(x, v, C_VALUE);
    return placeholder(x->b + v, e - v) ? e + 1 : done(x, v, e, O_RUN, C_VALUE, 0, 0);
}

/* '=' or ':' at i: the key before it (blanks, a closing quote, the name), the value after. */
static size_t m_pair(struct sx *x, size_t i)
{
    uint8_t sep = x->b[i];
    if (sep == ':' && has(x, i + 1, "//"))
        return m_url(x, i);
    if ((i + 1 < x->n && (x->b[i + 1] == '=' || x->b[i + 1] == ':')) ||
        (i && strchr("=!<>:", x->b[i - 1])))
        return i + 1; /* ==, !=, C++ :: */
    size_t j = i;
    while (j > 0 && i - j < 4 && blank(x->b[j - 1]))
        j--;
    int kq = 0; /* the name was quoted */
    if (j > 0 && (x->b[j - 1] == '"' || x->b[j - 1] == '\'')) {
        kq = x->b[--j];
        if (j > 0 && x->b[j - 1] == '\\')
            j--;
    }
    size_t k = j;
    while (k > 0 && j - k <= IDENT_MAX && in_cls(C_IDENT, x->b[k - 1]))
        k--;
    if (k == j || j - k > IDENT_MAX || (k == 0 && x->lo_cut))
        return i + 1;
    int kind = key_kind(x->b + k, j - k);
    if (!kind || (kind == 3 && sep != '='))
        return i + 1;
    if (sep == ':' && kq == '"') /* "key": value in JSON: a string, not a number */
        return value_at(x, i + 1, kind, V_NEED_QUOTE | V_DQ);
    return value_at(x, i + 1, kind, x->json ? 0 : V_DQ);
}

/* ---- options: --password X, -pSECRET ---- */

static const struct ctxw {
    const char *word;
    int bits; /* 1: takes -pSECRET; 2: also -p SECRET */
} ctx_words[] = {{"mysql", 1}, {"mariadb", 1}, {"sshpass", 3}};

static int ctx_in(const uint8_t *p, size_t n)
{
    int bits = 0;
    for (size_t k = 0; k < sizeof(ctx_words) / sizeof(ctx_words[0]); k++)
        if (icontains(p, n, ctx_words[k].word))
            bits |= ctx_words[k].bits;
    return bits;
}

/* The commands named on the line up to i (and on the line that ran into the chunk, at its
 * start). What was read of the line is remembered: the next -p on it reads on from there. */
static int line_ctx_at(struct sx *x, size_t i)
{
    size_t from = x->lc_pos > 8 ? x->lc_pos - 8 : 0; /* a command's name across the last read */
    const uint8_t *nl =
        x->lc_valid && x->lc_pos <= i ? memrchr(x->b + x->lc_pos, '\n', i - x->lc_pos) : NULL;
    if (!x->lc_valid || x->lc_pos > i || nl) {
        size_t s = nl ? (size_t)(nl - x->b) + 1 : i;
        while (s > 0 && i - s < LINE_BACK && x->b[s - 1] != '\n')
            s--;
        x->lc_start = s;
        x->lc_bits = 0;
        from = s;
    }
    from = from > x->lc_start ? from : x->lc_start;
    x->lc_bits |= ctx_in(x->b + from, i - from);
    x->lc_pos = i;
    x->lc_valid = 1;
    return x->lc_bits | (x->lc_start == 0 ? x->line_ctx : 0);
}

static int opt_boundary(uint8_t c)
{
    return c == 0 || (c <= ' ' && c != 0x7f) || strchr("\"'[(,", c);
}

/* Where the value of an option ending at e starts: after blanks or NULs, or after the end of a
 * quoted word and a comma (["--token", "x"], ['--token', 'x']); 0 when nothing follows. *flags:
 * for value_at. */
static size_t after_sep(const struct sx *x, size_t e, int *flags)
{
    size_t v = e;
    int sep = 0, qc = 0;
    if (v + 1 < x->n && x->b[v] == '\\' && (x->b[v + 1] == '"' || x->b[v + 1] == '\''))
        v += 2;
    else if (v < x->n && (x->b[v] == '"' || x->b[v] == '\''))
        v++;
    if (v > e && v < x->n && x->b[v] == ',')
        v++, sep = qc = 1;
    for (size_t s = v; v < x->n && v - s < 8 && (blank(x->b[v]) || !x->b[v]); v++)
        sep = 1;
    *flags = qc || !x->json ? V_DQ : 0;
    return sep && v < x->n && x->b[v] != '\n' && x->b[v] != '\r' && x->b[v] != '-' ? v : 0;
}

static size_t m_short_p(struct sx *x, size_t i) /* "-p" at i */
{
    int bits = line_ctx_at(x, i), flags;
    size_t v = i + 2;
    if (!bits || v >= x->n)
        return i + 2;
    if ((in_cls(C_VALUE, x->b[v]) && x->b[v] != '-') || x->b[v] == '\'')
        return value_at(x, v, 1, 0); /* -pSECRET, -p'SECRET' */
    if ((bits & 2) && (v = after_sep(x, v, &flags)))
        return value_at(x, v, 1, flags); /* sshpass -p SECRET */
    return i + 2;
}

static size_t m_dash(struct sx *x, size_t i)
{
    int flags;
    if (has(x, i, "-----"))
        return m_pem(x, i);
    if (i ? !opt_boundary(x->b[i - 1]) : x->lo_cut)
        return i + 1;
    size_t d = i + 1 < x->n && x->b[i + 1] == '-' ? i + 2 : i + 1, e = run_of(x, d, C_IDENT);
    if (d == i + 1 && e > d && x->b[d] == 'p' && line_ctx_at(x, i))
        return m_short_p(x, i);
    if (e == x->n && x->hi_cut)
        return i + 1; /* the name is cut: the seam */
    if (e - d < 2 || (e < x->n && x->b[e] == '=') || !key_kind(x->b + d, e - d))
        return i + 1; /* --password=X is a pair */
    size_t v = after_sep(x, e, &flags);
    return v ? value_at(x, v, 1, flags) : e;
}

/* ---- Bearer TOKEN, wandb login KEY ---- */

static size_t m_bearer(struct sx *x, size_t i)
{
    if (x->n - i < 7 || strncasecmp((const char *)x->b + i, "bearer", 6) ||
        (i ? alnum(x->b[i - 1]) : x->lo_cut))
        return i + 1;
    size_t v = i + 6;
    while (v < x->n && v - i < 10 && blank(x->b[v]))
        v++;
    size_t e = run_of(x, v, C_BEARER);
    if (v == i + 6 || e == v || (e - v < 8 && !(e == x->n && x->guess)))
        return i + 1; /* (a token cut short at the end of a chunk: masked on suspicion) */
    return done(x, v, e, O_RUN, C_BEARER, 0, 0);
}

static size_t m_wandb(struct sx *x, size_t i)
{
    if (!has(x, i, "wandb login") || (i ? alnum(x->b[i - 1]) : x->lo_cut))
        return i + 1;
    size_t v = i + 11;
    for (int w = 0; w < 4; w++) { /* options (--relogin, --host URL) before the key */
        size_t s = v;
        while (v < x->n && (blank(x->b[v]) || !x->b[v]))
            v++;
        size_t e = run_of(x, v, C_VALUE);
        if (v == s || e == v)
            break;
        if ((e - v >= 32 || (e == x->n && x->guess)) && run_of(x, v, C_TOKEN) == e &&
            x->b[v] != '-')
            return done(x, v, e, O_RUN, C_TOKEN, 0, 0);
        v = e;
    }
    return i + 1;
}

/* ---- the configured globs (redact_values) over whole words ---- */

/* A word cut at the end of a chunk that already has a glob's literal start (acme-* and
 * "acme-12"): masked on suspicion. */
static int glob_suspect(const struct sx *x, size_t i, size_t e)
{
    for (const char *p = x->globs; *p;) {
        p += strspn(p, " ,\t");
        size_t l = strcspn(p, " ,\t"), lit = strcspn(p, "*?[\\ ,\t");
        if (lit && lit < l && e - i >= lit && !memcmp(x->b + i, p, lit))
            return 1;
        p += l;
    }
    return 0;
}

static size_t m_glob(struct sx *x, size_t i)
{
    size_t e = run_of(x, i, C_GLOB);
    if (e == x->n && x->hi_cut)
        return x->guess && glob_suspect(x, i, e) ? done(x, i, e, O_RUN, C_GLOB, 0, 0) : i + 1;
    if (e - i > GLOB_WORD_MAX)
        return i + 1;
    char w[GLOB_WORD_MAX + 1], pat[256];
    memcpy(w, x->b + i, e - i);
    w[e - i] = 0;
    for (const char *p = x->globs; *p;) {
        p += strspn(p, " ,\t");
        size_t l = strcspn(p, " ,\t");
        if (l && l < sizeof(pat)) {
            memcpy(pat, p, l);
            pat[l] = 0;
            if (!fnmatch(pat, w, 0))
                return done(x, i, e, O_RUN, C_GLOB, 0, 0);
        }
        p += l;
    }
    return i + 1;
}

/* ---- the scan ---- */

static size_t dispatch(struct sx *x, size_t i)
{
    uint8_t c = x->b[i];
    switch (c) {
    case '=':
    case ':':
        return m_pair(x, i);
    case '-':
        return m_dash(x, i);
    case 'e':
        return m_jwt(x, i);
    case 'B':
    case 'b':
        return m_bearer(x, i);
    case 'w':
        return m_wandb(x, i);
    }
    return tok_first(c) ? m_token(x, i) : i + 1;
}

static void scan(struct sx *x)
{
    for (size_t i = 0; i < x->n;) {
        size_t nx = i + 1;
        if (x->globs && in_cls(C_GLOB, x->b[i]) && (i ? !in_cls(C_GLOB, x->b[i - 1]) : !x->lo_cut))
            nx = m_glob(x, i);
        if (nx == i + 1)
            nx = dispatch(x, i);
        i = nx > i ? nx : i + 1;
    }
}

/* json: 1, 0, or -1 (a text that starts with '{' or '[' is JSON). */
static size_t scrub_text(struct cp_scrub *sc, uint8_t *buf, size_t n, int json)
{
    struct sx x = {.b = buf, .n = n, .json = json};
    size_t f = 0;
    while (json < 0 && f < n && (blank(buf[f]) || buf[f] == '\n' || buf[f] == '\r'))
        f++;
    if (json < 0)
        x.json = f < n && (buf[f] == '{' || buf[f] == '[');
    if (sc) {
        x.globs = sc->globs && sc->globs[0] ? sc->globs : NULL;
        x.learn = sc->learn ? sc : NULL;
    }
    scan(&x);
    return x.masked + (sc ? cp_scrub_buf(sc, buf, n) : 0);
}

size_t cp_scrub_text(struct cp_scrub *sc, uint8_t *buf, size_t n)
{
    return scrub_text(sc, buf, n, -1);
}

size_t cp_scrub_member(struct cp_scrub *sc, const char *name, uint8_t *buf, size_t n)
{
    size_t l = strlen(name);
    return scrub_text(sc, buf, n, l >= 5 && !strcmp(name + l - 5, ".json"));
}

void cp_mask_secrets(char *s)
{
    cp_scrub_text(NULL, (uint8_t *)s, strlen(s));
}

/* The commands on the stream's last line, after this chunk (st->line_ctx). */
static int stream_line_ctx(const struct cp_scrub_stream *st, const uint8_t *buf, size_t n,
                           const uint8_t *w, size_t wl)
{
    size_t s = n;
    while (s > 0 && n - s < LINE_BACK && buf[s - 1] != '\n')
        s--;
    int bits = ctx_in(buf + s, n - s);
    if (s == 0 &&
        n < LINE_BACK) /* no line end: the line goes on from before (and across the cut) */
        bits |= st->line_ctx | (memchr(w, '\n', wl) ? 0 : ctx_in(w, wl));
    return bits;
}

size_t cp_scrub_stream(struct cp_scrub_stream *st, uint8_t *buf, size_t n)
{
    if (!n)
        return 0;
    const char *globs = st->sc && st->sc->globs && st->sc->globs[0] ? st->sc->globs : NULL;
    /* the seam window, raw: the last chunk's end and this one's head, long enough to decide a
     * form that starts in the first (an authority, a token, a glob's word) */
    uint8_t w[CP_SHAPE_CTX + SEAM_AHEAD];
    size_t hl = st->hlen, wl = n < SEAM_AHEAD ? n : SEAM_AHEAD;
    memcpy(w, st->hold, hl);
    memcpy(w + hl, buf, wl);
    /* the next hold: the stream's last CP_SHAPE_CTX raw bytes */
    size_t take = n < CP_SHAPE_CTX ? n : CP_SHAPE_CTX;
    size_t keep = take == CP_SHAPE_CTX ? 0 : (hl < CP_SHAPE_CTX - take ? hl : CP_SHAPE_CTX - take);
    memmove(st->hold, st->hold + hl - keep, keep);
    memcpy(st->hold + keep, buf + n - take, take);
    st->hlen = keep + take;

    struct sx x = {.b = buf,
                   .n = n,
                   .lo_cut = st->started,
                   .hi_cut = 1,
                   .guess = 1,
                   .line_ctx = st->line_ctx,
                   .globs = globs};
    /* 1. a value that ran to the end of the last chunk goes on */
    if (st->open.kind)
        cont(&x, 0, &st->open);
    /* 2. forms cut by the boundary: found in the window, masked in buf */
    if (hl) {
        struct sx y = {.b = w,
                       .n = hl + wl,
                       .mlo = hl,
                       .lo_cut = 1,
                       .hi_cut = 1,
                       .guess = wl == n,
                       .line_ctx = st->line_ctx,
                       .globs = globs};
        scan(&y);
        for (size_t j = 0; j < wl; j++)
            if (w[hl + j] == '*' && buf[j] != '*')
                buf[j] = '*', x.masked++;
        if (y.open.kind && wl < n)
            cont(&x, wl, &y.open);
        else if (y.open.kind)
            x.open = y.open;
    }
    /* 3. the chunk itself */
    scan(&x);
    st->open = x.open;
    st->line_ctx = stream_line_ctx(st, buf, n, w, hl + wl);
    st->started = 1;
    return x.masked;
}
