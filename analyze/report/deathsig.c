/* deathsig.c - see deathsig.h: the signature of a death without a crashed thread, and the two
 * normalizations it rests on (signature.h): a line of output, the program.
 *
 * The parts of such a signature are "frames" in signature_info (frames[] as shown, normalized[]
 * as hashed: "status 3", "limit cgroup", "program bash -c", "line error: ..."), so the fingerprint
 * is made as the native one: XXH64 of the scheme, the kind and the normalized parts.
 */
#include "deathsig.h"
#include "jpath.h"
#include "signature.h"
#include "xxh64.h"

#include <ctype.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* ---- a line of output ---- */

static int is_alnum(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int is_hex(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static size_t ndigits(const char *s)
{
    size_t n = 0;
    while (is_digit(s[n]))
        n++;
    return n;
}

/* The length of a UUID at s (8-4-4-4-12 hex digits), or 0. */
static size_t uuid_at(const char *s)
{
    static const int groups[] = {8, 4, 4, 4, 12};
    size_t i = 0;
    for (int g = 0; g < 5; g++) {
        for (int k = 0; k < groups[g]; k++, i++)
            if (!is_hex(s[i]))
                return 0;
        if (g < 4 && s[i++] != '-')
            return 0;
    }
    return is_alnum(s[i]) ? 0 : i;
}

/* The length of a clock time at s (9:05, 13:16:39, 13:16:39.123), or 0. */
static size_t clock_at(const char *s)
{
    size_t h = ndigits(s);
    if (h < 1 || h > 2 || s[h] != ':' || ndigits(s + h + 1) != 2)
        return 0;
    size_t i = h + 3;
    if (s[i] == ':' && ndigits(s + i + 1) == 2)
        i += 3;
    if ((s[i] == '.' || s[i] == ',') && ndigits(s + i + 1))
        i += 1 + ndigits(s + i + 1);
    return i;
}

/* The length of a date, date-time or clock time at s, with its zone (2026-12-03,
 * 2026-12-03T13:16:39.5Z, 2026-12-03 13:16:39+01:00, 13:16:39), or 0. */
static size_t time_at(const char *s)
{
    size_t i;
    if (ndigits(s) == 4 && s[4] == '-' && ndigits(s + 5) == 2 && s[7] == '-' &&
        ndigits(s + 8) == 2) {
        i = 10;
        size_t c = (s[i] == 'T' || s[i] == ' ') ? clock_at(s + i + 1) : 0;
        if (!c)
            return i;
        i += 1 + c;
    } else if (!(i = clock_at(s))) {
        return 0;
    }
    if (s[i] == 'Z' && !is_alnum(s[i + 1]))
        i++;
    else if ((s[i] == '+' || s[i] == '-') && ndigits(s + i + 1) == 2 &&
             (s[i + 3] == ':' ? ndigits(s + i + 4) == 2 : ndigits(s + i + 3) == 2))
        i += s[i + 3] == ':' ? 6 : 5;
    return i;
}

/* Where a path starting at s[i] ('/') ends, when it is one: a '/' at a word's start, followed by
 * a name; else 0. */
static size_t path_end(const char *s, size_t i)
{
    static const char before[] = " \t'\"([{<=,:";
    if (s[i] != '/' || (i > 0 && !strchr(before, s[i - 1])) ||
        !(is_alnum(s[i + 1]) || s[i + 1] == '.' || s[i + 1] == '_'))
        return 0;
    size_t e = i;
    while (s[e] && !strchr(" \t'\"()[]{}<>,;:", s[e]))
        e++;
    return e;
}

/* Output under construction: bytes of at most max, white space collapsed. */
struct lbuf {
    char *o;
    size_t n, max;
};

static void put(struct lbuf *b, const char *s, size_t l)
{
    for (size_t k = 0; k < l && b->n < b->max; k++) {
        char c = s[k];
        if (c == ' ' && (b->n == 0 || b->o[b->n - 1] == ' '))
            continue;
        b->o[b->n++] = c;
    }
}

/* A word at s (a run of letters and digits, at a word's start): its length, written normalized. */
static size_t word(struct lbuf *b, const char *s)
{
    size_t l = 0, digits = 0, hex = 1;
    while (is_alnum(s[l])) {
        digits += is_digit(s[l]);
        hex &= is_hex(s[l]);
        l++;
    }
    if (!digits) {
        put(b, s, l);
    } else if (digits == l) { /* a number, with its fractions: 3.5, 2.6.0 */
        while (s[l] == '.' && is_digit(s[l + 1]))
            l += 1 + ndigits(s + l + 1);
        put(b, "N", 1);
    } else if ((s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && l > 2) || (hex && l >= 7)) {
        put(b, "<hex>", 5);
    } else {
        for (size_t k = 0; k < l;) { /* rank3 -> rankN */
            if (is_digit(s[k])) {
                put(b, "N", 1);
                k += ndigits(s + k);
            } else {
                put(b, s + k, 1);
                k++;
            }
        }
    }
    return l;
}

/* A terminal escape at s (ESC [ ... final byte, or ESC and one byte): its length. */
static size_t escape_len(const char *s)
{
    size_t i = 1;
    if (s[i] == '[') {
        i++;
        while (s[i] && !(s[i] >= 0x40 && s[i] <= 0x7e))
            i++;
        return s[i] ? i + 1 : i;
    }
    return s[i] ? 2 : 1;
}

void signature_norm_line(const char *in, char *out, size_t outlen)
{
    if (!outlen)
        return;
    struct lbuf b = {out, 0, outlen - 1 < SIGNATURE_LINE_MAX ? outlen - 1 : SIGNATURE_LINE_MAX};
    const char *s = in ? in : "";
    size_t esc_end = 0; /* just after the last terminal escape: a word may start there */
    for (size_t i = 0; s[i] && b.n < b.max;) {
        unsigned char c = (unsigned char)s[i];
        int start = i == 0 || !is_alnum(s[i - 1]) || i == esc_end;
        size_t l, e;
        if (c == 0x1b) {
            i += escape_len(s + i);
            esc_end = i;
        } else if (c < 0x20 || c == 0x7f) {
            put(&b, " ", 1);
            i++;
        } else if ((e = path_end(s, i))) {
            size_t last = i; /* the last component (a trailing '/' left out) */
            for (size_t k = i; k + 1 < e; k++)
                if (s[k] == '/')
                    last = k;
            put(&b, ".../", 4);
            i = last + 1;
        } else if (start && (l = uuid_at(s + i))) {
            put(&b, "<uuid>", 6);
            i += l;
        } else if (start && is_digit(s[i]) && (l = time_at(s + i))) {
            put(&b, "<time>", 6);
            i += l;
        } else if (is_alnum(s[i])) {
            i += word(&b, s + i);
        } else {
            put(&b, s + i, 1);
            i++;
        }
    }
    if (b.n == b.max) { /* the cap may have cut a UTF-8 sequence: its bytes go */
        size_t k = b.n;
        while (k && ((unsigned char)b.o[k - 1] & 0xc0) == 0x80)
            k--;
        if (k && ((unsigned char)b.o[k - 1] & 0x80))
            b.n = k - 1;
    }
    while (b.n && b.o[b.n - 1] == ' ')
        b.n--;
    b.o[b.n] = 0;
}

/* ---- the program ---- */

enum family { FAM_PYTHON, FAM_SHELL, FAM_OTHER };

static const struct {
    const char *glob, *name;
    enum family fam;
} interpreters[] = {
    {"python*", "python", FAM_PYTHON}, {"pypy*", "pypy", FAM_PYTHON},
    {"bash", "bash", FAM_SHELL},       {"sh", "sh", FAM_SHELL},
    {"dash", "dash", FAM_SHELL},       {"zsh", "zsh", FAM_SHELL},
    {"ksh*", "ksh", FAM_SHELL},        {"perl*", "perl", FAM_OTHER},
    {"ruby*", "ruby", FAM_OTHER},      {"node", "node", FAM_OTHER},
    {"nodejs", "node", FAM_OTHER},     {"Rscript", "Rscript", FAM_OTHER},
    {"julia*", "julia", FAM_OTHER},    {"lua*", "lua", FAM_OTHER},
};

static const char *base_of(const char *p)
{
    const char *s = strrchr(p, '/');
    return s && s[1] ? s + 1 : p;
}

/* What an interpreter runs, from its arguments: " SCRIPT", " -m MODULE", " -c", or "". */
static void script_of(const cJSON *argv, enum family fam, char *out, size_t outlen)
{
    out[0] = 0;
    int n = cJSON_GetArraySize(argv);
    for (int i = 1; i < n; i++) {
        const char *a = cJSON_GetStringValue(cJSON_GetArrayItem(argv, i));
        if (!a || !*a)
            continue;
        if (!strcmp(a, "--")) {
            const char *next = cJSON_GetStringValue(cJSON_GetArrayItem(argv, i + 1));
            if (next && *next)
                snprintf(out, outlen, " %.200s", base_of(next));
            return;
        }
        if (!strcmp(a, "-c")) {
            snprintf(out, outlen, " -c");
            return;
        }
        if (fam == FAM_PYTHON && !strncmp(a, "-m", 2)) {
            const char *mod = a[2] ? a + 2 : cJSON_GetStringValue(cJSON_GetArrayItem(argv, i + 1));
            snprintf(out, outlen, " -m %.200s", mod ? mod : "");
            return;
        }
        if (a[0] == '-' || a[0] == '+') { /* an option, and its value when it takes one */
            if ((fam == FAM_PYTHON && (!strcmp(a, "-W") || !strcmp(a, "-X"))) ||
                (fam == FAM_SHELL && (!strcmp(a, "-o") || !strcmp(a, "+o") || !strcmp(a, "-O"))))
                i++;
            continue;
        }
        snprintf(out, outlen, " %.200s", base_of(a));
        return;
    }
}

void signature_program(const cJSON *process, char *out, size_t outlen)
{
    const char *exe = cp_jstr_ne_at(process, "exe"), *comm = cp_jstr_ne_at(process, "comm");
    const cJSON *argv = cp_jpath(process, "cmdline");
    const char *a0 = cJSON_GetStringValue(cJSON_GetArrayItem(argv, 0));
    const char *name = exe ? exe : comm ? comm : a0 && *a0 ? a0 : NULL;
    if (!name) {
        snprintf(out, outlen, "unknown program");
        return;
    }
    char base[256];
    snprintf(base, sizeof(base), "%s", base_of(name));
    char *del = strstr(base, " (deleted)");
    if (del)
        *del = 0;
    for (size_t i = 0; i < sizeof(interpreters) / sizeof(interpreters[0]); i++) {
        if (fnmatch(interpreters[i].glob, base, 0))
            continue;
        char script[256];
        script_of(argv, interpreters[i].fam, script, sizeof(script));
        snprintf(out, outlen, "%s%s", interpreters[i].name, script);
        return;
    }
    snprintf(out, outlen, "%s", base);
}

/* ---- the signature ---- */

int death_signature_kind(const cJSON *report, const char *kind, const cJSON *crashed)
{
    static const char *const kinds[] = {"python_exception", "exit", "terminated", "oom_kill"};
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
        if (!strcmp(kind, kinds[i]))
            return 1;
    const char *dk = cp_jstr_at(report, "process.death.kind");
    return !strcmp(kind, "signal") && dk && !strcmp(dk, "signal") && !crashed;
}

/* The signature being made. */
struct dsig {
    char sig[2048];
    struct xxh64 h;
    cJSON *frames, *normalized;
};

/* One part: " | shown" in the signature, hashed as its normalized form. */
static void part(struct dsig *d, const char *shown, const char *hashed)
{
    size_t cur = strlen(d->sig);
    if (cur + strlen(shown) + 4 < sizeof(d->sig))
        snprintf(d->sig + cur, sizeof(d->sig) - cur, " | %s", shown);
    cJSON_AddItemToArray(d->frames, cJSON_CreateString(shown));
    cJSON_AddItemToArray(d->normalized, cJSON_CreateString(hashed));
    xxh64_update(&d->h, hashed, strlen(hashed));
    xxh64_update(&d->h, "\n", 1);
}

/* The limit an OOM kill hit: the kernel's kill line of this pid (kernel_log.oom_kills[]). */
static const char *oom_limit(const cJSON *r)
{
    const cJSON *k;
    cJSON_ArrayForEach(k, cp_jpath(r, "kernel_log.oom_kills"))
    {
        if (!cJSON_IsTrue(cp_jpath(k, "own_pid")))
            continue;
        const char *scope = cp_jstr_at(k, "scope");
        if (scope && !strcmp(scope, "cgroup"))
            return "cgroup";
        if (scope && !strcmp(scope, "global"))
            return "host";
    }
    return NULL;
}

/* The kind's label: "exit status 3", "terminated", "OOM kill", "SIGUSR1", "python exception". */
static void label_of(const cJSON *r, const char *kind, char *buf, size_t len)
{
    double st;
    const char *sig = cp_jstr_ne_at(r, "process.death.signal.name");
    if (!strcmp(kind, "exit") && cp_jnum_at(r, "process.death.status", &st))
        snprintf(buf, len, "exit status %.0f", st);
    else if (!strcmp(kind, "exit"))
        snprintf(buf, len, "exit, status unknown");
    else if (!strcmp(kind, "oom_kill"))
        snprintf(buf, len, "OOM kill");
    else if (!strcmp(kind, "python_exception"))
        snprintf(buf, len, "python exception");
    else if (!strcmp(kind, "terminated"))
        snprintf(buf, len, "terminated");
    else
        snprintf(buf, len, "%s", sig ? sig : "killed by a signal");
}

void death_signature(cJSON *report, const char *kind, cJSON *info, cJSON *frames, cJSON *normalized)
{
    struct dsig d = {.frames = frames, .normalized = normalized};
    label_of(report, kind, d.sig, sizeof(d.sig));
    xxh64_init(&d.h);
    xxh64_update(&d.h, FP_SCHEME "\n", strlen(FP_SCHEME) + 1);
    xxh64_update(&d.h, kind, strlen(kind));
    xxh64_update(&d.h, "\n", 1);
    /* what the label says beyond the kind, hashed as such */
    char buf[SIGNATURE_LINE_MAX + 64];
    double st;
    if (!strcmp(kind, "exit") && cp_jnum_at(report, "process.death.status", &st)) {
        snprintf(buf, sizeof(buf), "status %.0f\n", st);
        xxh64_update(&d.h, buf, strlen(buf));
    } else if (!strcmp(kind, "signal") || !strcmp(kind, "terminated")) {
        snprintf(buf, sizeof(buf), "signal %s\n",
                 cp_jstr_ne_at(report, "process.death.signal.name")
                     ? cp_jstr_ne_at(report, "process.death.signal.name")
                     : "unknown");
        xxh64_update(&d.h, buf, strlen(buf));
    }
    if (!strcmp(kind, "oom_kill")) {
        const char *lim = oom_limit(report);
        char shown[64];
        snprintf(shown, sizeof(shown), "%s",
                 !lim                     ? "limit unknown"
                 : !strcmp(lim, "cgroup") ? "cgroup limit"
                                          : "host memory");
        snprintf(buf, sizeof(buf), "limit %s", lim ? lim : "unknown");
        part(&d, shown, buf);
    }
    char prog[512];
    signature_program(cp_jpath(report, "process"), prog, sizeof(prog));
    snprintf(buf, sizeof(buf), "program %.*s", SIGNATURE_LINE_MAX, prog);
    part(&d, prog, buf);
    const cJSON *line;
    const cJSON *lines = !strcmp(kind, "exit") ? cp_jpath(report, "output.last_lines") : NULL;
    cJSON_ArrayForEach(line, lines)
    {
        char norm[SIGNATURE_LINE_MAX + 1];
        signature_norm_line(cJSON_GetStringValue(line), norm, sizeof(norm));
        if (!*norm)
            continue;
        snprintf(buf, sizeof(buf), "line %s", norm);
        part(&d, norm, buf);
    }
    char fp[17];
    snprintf(fp, sizeof(fp), "%016" PRIx64, xxh64_digest(&d.h));
    cp_json_set(report, "signature", cJSON_CreateString(d.sig));
    cp_json_set(report, "fingerprint", cJSON_CreateString(fp));
    cJSON_AddStringToObject(info, "source", "death");
    cJSON_AddNullToObject(info, "error");
    cp_json_set(report, "signature_info", info);
}
