/* signature.c - see signature.h.
 *
 * Main data structure: struct siglists, three rule lists in the order a frame is tested against
 * them (stop, skip, prefix); a frame no rule matches is kept. Each rule is a glob (fnmatch), a
 * POSIX extended regex over the whole name ("re:"), or an unnamed-frame module glob ("unnamed:").
 *
 * The walk over the crashed thread's frames, innermost first: inline and tail-call frames are not
 * used; a stop frame ends the walk; a skip frame is left out; a prefix frame goes into the
 * signature and the walk continues; a kept frame goes in and counts, and the walk ends after
 * SIGNATURE_FRAMES of them. A frame equal to the previous one used (recursion) is left out, so
 * the recursion depth at the crash does not matter.
 */
#include "jpath.h"
#include "signature.h"
#include "datadir.h"
#include "deathsig.h"
#include "errmsg.h"
#include "kvfile.h"
#include "xxh64.h"

#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIST_LINE_MAX 1024
#define LIST_RULES_MAX 4096
#define NAME_MAX_LEN 512

enum action { ACT_STOP, ACT_SKIP, ACT_PREFIX, ACT_KEEP, ACT_PYTHON };
enum rule_kind { RULE_GLOB, RULE_RE, RULE_UNNAMED };

struct rule {
    enum rule_kind kind;
    int line;
    char *text; /* the line as written */
    char *pat;  /* glob, or module glob for RULE_UNNAMED */
    regex_t re;
    int py_drop, py_function; /* python.txt: drop (else skip); matches the function (else file) */
};

struct list {
    const char *file; /* "skip.txt" */
    enum action action;
    struct rule *r;
    size_t n;
};

#define NLISTS 4
#define PYLIST 3 /* l[PYLIST]: python.txt, the Python frames' list */

struct siglists {
    char version[64];
    struct list l[NLISTS]; /* stop, skip, prefix (the order a native frame is tested in), python */
};

static const struct {
    const char *file;
    enum action action;
} list_files[NLISTS] = {{"stop.txt", ACT_STOP},
                        {"skip.txt", ACT_SKIP},
                        {"prefix.txt", ACT_PREFIX},
                        {"python.txt", ACT_PYTHON}};

static const char *action_name(enum action a)
{
    switch (a) {
    case ACT_STOP:
        return "stop";
    case ACT_SKIP:
        return "skip";
    case ACT_PREFIX:
        return "prefix";
    default:
        return "keep";
    }
}

/* ---- lists ---- */

static void list_free(struct list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        if (l->r[i].kind == RULE_RE)
            regfree(&l->r[i].re);
        free(l->r[i].text);
        free(l->r[i].pat);
    }
    free(l->r);
    l->r = NULL;
    l->n = 0;
}

void siglists_free(struct siglists *l)
{
    if (!l)
        return;
    for (int i = 0; i < NLISTS; i++)
        list_free(&l->l[i]);
    free(l);
}

const char *siglists_version(const struct siglists *l)
{
    return l ? l->version : NULL;
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = 0;
    return s;
}

/* Adds the rule written as `s` (line `line`) to l. -1 with err on a bad rule. */
static int add_rule(struct list *l, const char *path, int line, const char *s, char *err,
                    size_t errlen)
{
    if (l->n == LIST_RULES_MAX) {
        cp_errmsg(err, errlen, "%s: more than %d rules", path, LIST_RULES_MAX);
        return -1;
    }
    struct rule *nr = realloc(l->r, (l->n + 1) * sizeof(*nr));
    if (!nr) {
        cp_errmsg(err, errlen, "out of memory");
        return -1;
    }
    l->r = nr;
    struct rule *r = &l->r[l->n];
    memset(r, 0, sizeof(*r));
    r->line = line;
    const char *pat = s;
    if (l->action == ACT_PYTHON) {
        /* "drop|skip file:GLOB|function:GLOB" */
        r->py_drop = !strncmp(s, "drop ", 5);
        if (!r->py_drop && strncmp(s, "skip ", 5)) {
            cp_errmsg(err, errlen, "%s:%d: not `drop' or `skip': %.64s", path, line, s);
            return -1;
        }
        pat = s + 5;
        while (*pat == ' ' || *pat == '\t')
            pat++;
        r->py_function = !strncmp(pat, "function:", 9);
        if (!r->py_function && strncmp(pat, "file:", 5)) {
            cp_errmsg(err, errlen, "%s:%d: not `file:' or `function:': %.64s", path, line, pat);
            return -1;
        }
        pat += r->py_function ? 9 : 5;
        r->kind = RULE_GLOB;
    } else if (!strncmp(s, "re:", 3)) {
        r->kind = RULE_RE;
        pat = s + 3;
    } else if (!strncmp(s, "unnamed:", 8)) {
        r->kind = RULE_UNNAMED;
        pat = s + 8;
    } else {
        r->kind = RULE_GLOB;
    }
    if (!*pat) {
        cp_errmsg(err, errlen, "%s:%d: empty pattern", path, line);
        return -1;
    }
    r->text = strdup(s);
    r->pat = strdup(pat);
    if (!r->text || !r->pat) {
        free(r->text);
        free(r->pat);
        cp_errmsg(err, errlen, "out of memory");
        return -1;
    }
    if (r->kind == RULE_RE) {
        size_t n = strlen(pat) + 5;
        char *anch = malloc(n);
        int rc = -1;
        if (anch) {
            snprintf(anch, n, "^(%s)$", pat);
            rc = regcomp(&r->re, anch, REG_EXTENDED | REG_NOSUB);
            free(anch);
        }
        if (rc) {
            char msg[128] = "out of memory";
            if (anch)
                regerror(rc, &r->re, msg, sizeof(msg));
            cp_errmsg(err, errlen, "%s:%d: bad regular expression `%s': %s", path, line, pat, msg);
            free(r->text);
            free(r->pat);
            return -1;
        }
    }
    l->n++;
    return 0;
}

/* Reads one list file into l and its version into ver. -1 with err. */
static int load_list(const char *dir, struct list *l, char *ver, size_t verlen, char *err,
                     size_t errlen)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof(path), "%s/%s", dir, l->file) >= (int)sizeof(path)) {
        cp_errmsg(err, errlen, "path too long: %s/%s", dir, l->file);
        return -1;
    }
    FILE *f = fopen(path, "re");
    if (!f) {
        cp_errmsg(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    char buf[LIST_LINE_MAX + 2];
    int line = 0, rc = 0;
    ver[0] = 0;
    while (fgets(buf, sizeof(buf), f)) {
        line++;
        size_t len = strlen(buf);
        if (len == sizeof(buf) - 1 && buf[len - 1] != '\n') {
            cp_errmsg(err, errlen, "%s:%d: line longer than %d bytes", path, line, LIST_LINE_MAX);
            rc = -1;
            break;
        }
        char *s = trim(buf);
        if (!*s || *s == '#')
            continue;
        if (!strncmp(s, "version", 7) && (s[7] == ' ' || s[7] == '\t')) {
            char *v = trim(s + 7);
            if (ver[0] || !*v || strlen(v) >= verlen) {
                cp_errmsg(err, errlen, "%s:%d: %s version line", path, line,
                          ver[0] ? "a second" : "a bad");
                rc = -1;
                break;
            }
            snprintf(ver, verlen, "%s", v);
            continue;
        }
        if ((rc = add_rule(l, path, line, s, err, errlen)))
            break;
    }
    if (!rc && ferror(f)) {
        cp_errmsg(err, errlen, "cannot read %s", path);
        rc = -1;
    }
    fclose(f);
    if (!rc && !ver[0]) {
        cp_errmsg(err, errlen, "%s: no `version' line", path);
        rc = -1;
    }
    return rc;
}

struct siglists *siglists_load(const char *dir, char *err, size_t errlen)
{
    char dbuf[PATH_MAX];
    if (!dir && !(dir = cp_datapath("rules/signature", dbuf, sizeof(dbuf), err, errlen)))
        return NULL;
    struct siglists *L = calloc(1, sizeof(*L));
    if (!L) {
        cp_errmsg(err, errlen, "out of memory");
        return NULL;
    }
    for (int i = 0; i < NLISTS; i++) {
        L->l[i].file = list_files[i].file;
        L->l[i].action = list_files[i].action;
    }
    for (int i = 0; i < NLISTS; i++) {
        char ver[sizeof(L->version)];
        if (load_list(dir, &L->l[i], ver, sizeof(ver), err, errlen)) {
            siglists_free(L);
            return NULL;
        }
        if (i == 0) {
            snprintf(L->version, sizeof(L->version), "%s", ver);
        } else if (strcmp(ver, L->version)) {
            cp_errmsg(err, errlen, "%s/%s has version %s but %s has %s: the lists change together",
                      dir, L->l[i].file, ver, L->l[0].file, L->version);
            siglists_free(L);
            return NULL;
        }
    }
    return L;
}

/* ---- normalization ---- */

static const char *const clone_words[] = {"cold",  "isra",       "constprop", "part", "lto_priv",
                                          "clone", "llvm",       "localalias", "specialized", NULL};

/* True when s (just after a '.') starts a compiler clone suffix: a known word followed by the
 * end, '.', or a digit. */
static int clone_suffix_at(const char *s)
{
    for (int i = 0; clone_words[i]; i++) {
        size_t n = strlen(clone_words[i]);
        if (!strncmp(s, clone_words[i], n) &&
            (s[n] == 0 || s[n] == '.' || (s[n] >= '0' && s[n] <= '9')))
            return 1;
    }
    return 0;
}

/* Cuts a trailing parameter list "(...)" (and cv/ref qualifiers after it), unless the name is
 * all parentheses or it is operator()'s own "()". */
static void cut_params(char *s)
{
    static const char *const quals[] = {" const", " volatile", " &&", " &", " noexcept", NULL};
    size_t n = strlen(s);
    for (int again = 1; again;) {
        again = 0;
        for (int i = 0; quals[i]; i++) {
            size_t q = strlen(quals[i]);
            if (n > q && !strcmp(s + n - q, quals[i]) && s[n - q - 1] == ')') {
                n -= q;
                s[n] = 0;
                again = 1;
            }
        }
    }
    if (n < 2 || s[n - 1] != ')')
        return;
    int depth = 0;
    for (size_t i = n; i-- > 0;) {
        if (s[i] == ')')
            depth++;
        else if (s[i] == '(' && --depth == 0) {
            if (i == 0)
                return;
            if (i >= 8 && !strncmp(s + i - 8, "operator", 8) && i + 2 == n)
                return; /* "X::operator()" */
            s[i] = 0;
            while (i > 0 && s[i - 1] == ' ')
                s[--i] = 0;
            return;
        }
    }
}

void signature_norm_function(const char *in, char *out, size_t outlen)
{
    if (!outlen)
        return;
    if (!in)
        in = "";
    while (*in == ' ')
        in++;
    if (!strncmp(in, "__GI_", 5) && in[5])
        in += 5;
    snprintf(out, outlen, "%s", in);
    char *p;
    if ((p = strstr(out, " [clone ")))
        *p = 0;
    if (out[0] != '@' && (p = strchr(out, '@')))
        *p = 0;
    cut_params(out);
    for (p = out; (p = strchr(p, '.'));) {
        if (p > out && clone_suffix_at(p + 1)) {
            *p = 0;
            break;
        }
        p++;
    }
    size_t n = strlen(out);
    while (n && out[n - 1] == ' ')
        out[--n] = 0;
}

void signature_norm_module(const char *in, char *out, size_t outlen)
{
    if (!outlen)
        return;
    if (!in)
        in = "";
    const char *slash = strrchr(in, '/');
    snprintf(out, outlen, "%s", slash ? slash + 1 : in);
    char *p;
    if ((p = strstr(out, " (deleted)")))
        *p = 0;
    /* "libfoo.so.1.2.3" -> "libfoo.so" */
    for (p = out; (p = strstr(p, ".so."));) {
        const char *v = p + 4;
        int ok = *v != 0;
        for (; *v; v++)
            if (!((*v >= '0' && *v <= '9') || *v == '.'))
                ok = 0;
        if (ok) {
            p[3] = 0;
            break;
        }
        p += 4;
    }
}

/* ---- crash kind ---- */

/* The SIGABRT kind lists are data: rules/signature/crash-kinds.txt (its header gives the
 * syntax), read once. */
#define KINDS_FILE "rules/signature/crash-kinds.txt"
#define KINDS_MAX (1u << 20)

static struct {
    pthread_once_t once;
    struct cp_kvfile file;                           /* the strings point into it */
    const char **throws, **asserts, **heaps, **msgs; /* NULL-terminated; NULL when not loaded */
    char err[512];                                   /* why they are not loaded */
} kinds = {.once = PTHREAD_ONCE_INIT};

static void kinds_load(void)
{
    static const char *const keys[] = {"exception-function", "assert-function", "heap-function",
                                       "heap-message", NULL};
    if (cp_kvfile_load(KINDS_FILE, "crash-kind table", KINDS_MAX, keys, &kinds.file, kinds.err,
                       sizeof(kinds.err)))
        return;
    const struct cp_kvfile *f = &kinds.file;
    kinds.throws = cp_kvfile_values(f, "exception-function", 0, f->n, NULL);
    kinds.asserts = cp_kvfile_values(f, "assert-function", 0, f->n, NULL);
    kinds.heaps = cp_kvfile_values(f, "heap-function", 0, f->n, NULL);
    kinds.msgs = cp_kvfile_values(f, "heap-message", 0, f->n, NULL);
    if (!kinds.throws || !kinds.asserts || !kinds.heaps || !kinds.msgs) {
        free(kinds.throws);
        free(kinds.asserts);
        free(kinds.heaps);
        free(kinds.msgs);
        kinds.throws = kinds.asserts = kinds.heaps = kinds.msgs = NULL;
        cp_kvfile_free(&kinds.file);
        cp_errmsg(kinds.err, sizeof(kinds.err), "out of memory");
    }
}

/* 1 when the kind lists are loaded; else 0 with *why the reason. */
static int kinds_get(const char **why)
{
    pthread_once(&kinds.once, kinds_load);
    *why = kinds.err;
    return kinds.throws != NULL;
}

/* glibc's malloc_printerr() messages (malloc/malloc.c), as they start (kinds.msgs). */
static int heap_message(const char *m)
{
    const char *const *pre = kinds.msgs;
    if (!m || !pre)
        return 0;
    /* "Fatal glibc error: " (newer glibc) and "*** " framing */
    if (!strncmp(m, "Fatal glibc error: ", 19))
        m += 19;
    for (int i = 0; pre[i]; i++)
        if (strstr(m, pre[i]) == m || (!strncmp(m, "*** ", 4) && strstr(m + 4, pre[i]) == m + 4))
            return 1;
    return 0;
}

static int assertion_message(const char *m)
{
    return m && strstr(m, "Assertion") && strstr(m, "failed");
}

/* True when a physical frame of t has one of the (normalized) names. */
static int has_frame(const cJSON *t, const char *const *names)
{
    const cJSON *f;
    if (!names)
        return 0;
    cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(t, "frames"))
    {
        const char *fn = cp_jstr_at(f, "function");
        if (!fn || cJSON_IsTrue(cp_jpath(f, "inline")))
            continue;
        char n[NAME_MAX_LEN];
        signature_norm_function(fn, n, sizeof(n));
        for (int i = 0; names[i]; i++)
            if (!strcmp(n, names[i]))
                return 1;
    }
    return 0;
}

static const char *crash_kind(const cJSON *r, const cJSON *crashed)
{
    const char *const *assert_fns = kinds.asserts, *const *heap_fns = kinds.heaps;
    const char *const *throw_fns = kinds.throws; /* NULL when not loaded: never on the stack */
    /* the deaths without a core (process.death, pyexc.h); a "signal" death goes on below */
    const char *dk = cp_jstr_at(r, "process.death.kind");
    static const char *const death_kinds[][2] = {{"exception", "python_exception"},
                                                 {"exit", "exit"},
                                                 {"terminated", "terminated"},
                                                 {"oom_kill", "oom_kill"}};
    /* an exit that ended in an uncaught Python exception: its traceback, parsed from the output */
    if (dk && !strcmp(dk, "exit") && cJSON_IsObject(cp_jpath(r, "exception")))
        return "python_exception";
    for (size_t i = 0; dk && i < sizeof(death_kinds) / sizeof(death_kinds[0]); i++)
        if (!strcmp(dk, death_kinds[i][0]))
            return death_kinds[i][1];
    if (cJSON_IsTrue(cp_jpath(r, "hang.snap"))) /* a live process captured by snap/watch (hang.h) */
        return "hang";
    const cJSON *num = cp_jpath(r, "process.signal.number");
    if (!cJSON_IsNumber(num))
        return NULL;
    int sig = (int)num->valuedouble;
    const cJSON *code = cp_jpath(r, "process.signal.code");
    /* si_code <= 0: sent by a process (kill, tgkill, sigqueue), not raised by a fault */
    int sent = cJSON_IsNumber(code) && code->valuedouble <= 0;
    const char *cn = cp_jstr_at(r, "process.signal.code_name");
    if ((sig == 11 || sig == 7) && cJSON_IsTrue(cp_jpath(r, "cause.stack_overflow")))
        return "stack_overflow";
    switch (sig) {
    case 11: {
        if (sent)
            return "signal";
        const char *fa = cp_jstr_at(r, "process.signal.fault_address");
        if (fa && !(cn && !strcmp(cn, "SI_KERNEL"))) {
            char *end;
            errno = 0;
            unsigned long long a = strtoull(fa, &end, 16);
            if (!errno && end != fa && !*end && a < 4096)
                return "segv_null";
        }
        return "segv";
    }
    case 7:
        return sent ? "signal" : "sigbus";
    case 8:
        return sent ? "signal" : "sigfpe";
    case 4:
        return sent ? "signal" : "sigill";
    case 6: {
        if (cJSON_IsFalse(cp_jpath(r, "process.signal.self_sent")))
            return "signal"; /* kill -ABRT from elsewhere */
        const char *msg = cp_jstr_at(r, "cause.abort_message");
        if (cJSON_IsObject(cp_jpath(r, "cause.exception")) || has_frame(crashed, throw_fns))
            return "uncaught_exception";
        if (assertion_message(msg) || has_frame(crashed, assert_fns))
            return "assertion";
        if (heap_message(msg) || has_frame(crashed, heap_fns))
            return "heap_corruption";
        return "abort";
    }
    default:
        return "signal";
    }
}

/* The kind as the signature's first part. */
static void kind_label(const cJSON *r, const char *kind, char *buf, size_t len)
{
    static const struct {
        const char *kind, *label;
    } labels[] = {{"segv_null", "SIGSEGV (null)"}, {"segv", "SIGSEGV"},
                  {"sigbus", "SIGBUS"},           {"sigfpe", "SIGFPE"},
                  {"sigill", "SIGILL"},           {"abort", "abort"},
                  {"assertion", "assertion"},     {"heap_corruption", "heap corruption"},
                  {"uncaught_exception", "uncaught exception"},
                  {"stack_overflow", "stack overflow"}, {"hang", "hang"},
                  {"python_exception", "python exception"}, {"exit", "exit"},
                  {"terminated", "terminated"}, {"oom_kill", "OOM kill"}};
    for (size_t i = 0; i < sizeof(labels) / sizeof(labels[0]); i++)
        if (!strcmp(kind, labels[i].kind)) {
            snprintf(buf, len, "%s", labels[i].label);
            return;
        }
    const char *name = cp_jstr_at(r, "process.signal.name");
    snprintf(buf, len, "%s", name ? name : kind);
}

/* ---- the walk ---- */

static const cJSON *crashed_thread(const cJSON *r)
{
    const cJSON *t, *threads = cJSON_GetObjectItemCaseSensitive(r, "threads");
    cJSON_ArrayForEach(t, threads)
    {
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(t, "crashed")))
            return t;
    }
    const cJSON *tid = cp_jpath(r, "process.crashed_tid");
    cJSON_ArrayForEach(t, threads)
    {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(t, "tid");
        if (cJSON_IsNumber(tid) && cJSON_IsNumber(id) && id->valuedouble == tid->valuedouble)
            return t;
    }
    /* a snapshot has no crashed thread: its signature is the main thread's, as it was before
     * snapshots stopped naming one (the manifest's tid, else the pid), so that fingerprints of
     * hangs stay the same; in a container the core's tids are its namespace's (ns_tid) */
    const cJSON *keys[] = {cp_jpath(r, "process.manifest_tid"), cp_jpath(r, "process.ns_tid"),
                           cp_jpath(r, "process.pid")};
    for (size_t k = 0; k < 3; k++)
        cJSON_ArrayForEach(t, threads)
        {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(t, "tid");
            if (cJSON_IsNumber(keys[k]) && cJSON_IsNumber(id) && id->valuedouble == keys[k]->valuedouble)
                return t;
        }
    return NULL;
}

static int pc_is_zero(const cJSON *f)
{
    const char *pc = cp_jstr_at(f, "pc");
    if (!pc)
        return 0;
    char *end;
    unsigned long long v = strtoull(pc, &end, 16);
    return end != pc && !*end && v == 0;
}

/* Which rule decides frame (name: normalized, "" when unnamed; mod, modnorm: base names). */
static enum action classify(const struct siglists *L, const char *name, const char *mod,
                            const char *modnorm, const struct list **lst, const struct rule **rule)
{
    for (int i = 0; i < 3; i++) {
        const struct list *l = &L->l[i];
        for (size_t j = 0; j < l->n; j++) {
            const struct rule *r = &l->r[j];
            int m = 0;
            if (r->kind == RULE_UNNAMED)
                m = !*name && (!fnmatch(r->pat, mod, 0) || !fnmatch(r->pat, modnorm, 0));
            else if (!*name)
                m = 0;
            else if (r->kind == RULE_GLOB)
                m = !fnmatch(r->pat, name, 0);
            else
                m = !regexec(&r->re, name, 0, NULL, 0);
            if (m) {
                *lst = l;
                *rule = r;
                return l->action;
            }
        }
    }
    *lst = NULL;
    *rule = NULL;
    return ACT_KEEP;
}

static void add_explain(cJSON *ex, int idx, const char *fn, const char *name, const char *mod,
                        const char *action, const char *rule)
{
    if (!ex)
        return;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "frame", idx);
    if (fn)
        cJSON_AddStringToObject(o, "function", fn);
    else
        cJSON_AddNullToObject(o, "function");
    cJSON_AddStringToObject(o, "name", name);
    cJSON_AddStringToObject(o, "module", mod);
    cJSON_AddStringToObject(o, "action", action);
    cJSON_AddStringToObject(o, "rule", rule);
    cJSON_AddItemToArray(ex, o);
}

static cJSON *str_or_null(const char *s)
{
    return s ? cJSON_CreateString(s) : cJSON_CreateNull();
}

/* No signature: report.signature and fingerprint null, signature_info with the error why. -1. */
static int no_signature(cJSON *report, cJSON *info, const char *why, char *err, size_t errlen)
{
    cJSON_AddStringToObject(info, "error", why);
    cp_json_set(report, "signature", NULL);
    cp_json_set(report, "fingerprint", NULL);
    cp_json_set(report, "signature_info", info);
    cp_errmsg(err, errlen, "%s", why);
    return -1;
}

/* ---- a Python exception's signature (crash kind python_exception) ---- */

enum py_class { PY_KEEP, PY_SKIP, PY_DROP };

/* Which python.txt rule decides a Python frame: its file, or its function (qualname or name). */
static enum py_class py_classify(const struct list *l, const cJSON *f, const struct rule **rule)
{
    const char *file = cp_jstr_at(f, "file"), *qn = cp_jstr_at(f, "qualname"),
               *fn = cp_jstr_at(f, "function");
    for (size_t j = 0; j < l->n; j++) {
        const struct rule *r = &l->r[j];
        int m = r->py_function ? (qn && !fnmatch(r->pat, qn, 0)) || (fn && !fnmatch(r->pat, fn, 0))
                               : file && !fnmatch(r->pat, file, 0);
        if (m) {
            *rule = r;
            return r->py_drop ? PY_DROP : PY_SKIP;
        }
    }
    *rule = NULL;
    return PY_KEEP;
}

/* The walk over a Python exception's frames, innermost first. */
struct py_walk {
    const struct list *l;
    cJSON *ex, *frames, *normalized;
    char sig[4096];
    struct xxh64 h;
    char prev[2 * NAME_MAX_LEN + 2];
    int own, kept; /* frames of the job's own code; frames used */
};

/* Frame f (index idx in exception.frames): dropped, skipped, used once (recursion), or used. */
static void py_frame(struct py_walk *w, const cJSON *f, int idx)
{
    const char *file = cp_jstr_at(f, "file"), *fn = cp_jstr_at(f, "qualname");
    if (!fn || !*fn)
        fn = cp_jstr_at(f, "function");
    const char *base = file && strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
    char full[sizeof(w->prev)], disp[sizeof(w->prev)], rbuf[LIST_LINE_MAX + 64];
    snprintf(full, sizeof(full), "%.*s!%.*s", NAME_MAX_LEN - 1, base ? base : "?", NAME_MAX_LEN - 1,
             fn ? fn : "?");
    if (w->kept == SIGNATURE_FRAMES) {
        add_explain(w->ex, idx, fn, full, base ? base : "", "unused",
                    "the signature has its frames");
        return;
    }
    const struct rule *rule;
    enum py_class c = py_classify(w->l, f, &rule);
    if (rule)
        snprintf(rbuf, sizeof(rbuf), "%s:%d %s", w->l->file, rule->line, rule->text);
    else
        snprintf(rbuf, sizeof(rbuf), "no rule: the job's own code");
    if (c == PY_DROP || (c == PY_SKIP && w->own)) {
        add_explain(w->ex, idx, fn, full, base ? base : "", c == PY_DROP ? "drop" : "skip", rbuf);
        return;
    }
    if (!strcmp(full, w->prev)) { /* recursion: once */
        add_explain(w->ex, idx, fn, full, base ? base : "", "repeat",
                    "the same as the frame before it (recursion): used once");
        return;
    }
    add_explain(w->ex, idx, fn, full, base ? base : "", "keep", rbuf);
    snprintf(w->prev, sizeof(w->prev), "%s", full);
    snprintf(disp, sizeof(disp), "%.*s:%.*s", NAME_MAX_LEN - 1, base ? base : "?", NAME_MAX_LEN - 1,
             fn ? fn : "?");
    size_t cur = strlen(w->sig);
    if (cur + strlen(disp) + 4 < sizeof(w->sig))
        snprintf(w->sig + cur, sizeof(w->sig) - cur, " | %s", disp);
    cJSON_AddItemToArray(w->frames, cJSON_CreateString(disp));
    cJSON_AddItemToArray(w->normalized, cJSON_CreateString(full));
    xxh64_update(&w->h, full, strlen(full));
    xxh64_update(&w->h, "\n", 1);
    w->kept++;
}

/* "python exception TYPE | file:qualname | ..." from the raised exception's frames, innermost
 * first, through python.txt: never crashpack's own frames, the job's own frames only (the library
 * frames when it has none), SIGNATURE_FRAMES of them. The fingerprint hashes the kind, the type
 * and each frame as "file-basename!qualname". An exception without frames: its type alone. */
static int python_signature(cJSON *report, const struct siglists *L, cJSON *info, cJSON *frames,
                            cJSON *normalized, cJSON *ex)
{
    const cJSON *x = cp_jpath(report, "exception");
    const char *type = cp_jstr_at(x, "type");
    const cJSON *fr = cp_jpath(x, "frames");
    int n = cJSON_GetArraySize(fr);
    struct py_walk *w = calloc(1, sizeof(*w));
    if (!w)
        return -1;
    *w = (struct py_walk){.l = &L->l[PYLIST], .ex = ex, .frames = frames, .normalized = normalized};
    const struct rule *rule;
    for (int i = 0; i < n; i++)
        w->own += py_classify(w->l, cJSON_GetArrayItem(fr, i), &rule) == PY_KEEP;
    snprintf(w->sig, sizeof(w->sig), "python exception %.400s", type);
    xxh64_init(&w->h);
    xxh64_update(&w->h, FP_SCHEME "\n", strlen(FP_SCHEME) + 1);
    xxh64_update(&w->h, "python_exception\n", 17);
    xxh64_update(&w->h, type, strlen(type));
    xxh64_update(&w->h, "\n", 1);
    for (int i = n - 1; i >= 0; i--)
        py_frame(w, cJSON_GetArrayItem(fr, i), i);
    char fp[17];
    snprintf(fp, sizeof(fp), "%016" PRIx64, xxh64_digest(&w->h));
    cp_json_set(report, "signature", cJSON_CreateString(w->sig));
    cp_json_set(report, "fingerprint", cJSON_CreateString(fp));
    free(w);
    const char *src = cp_jstr_at(x, "source");
    cJSON_AddStringToObject(info, "source", src && !strcmp(src, "output") ? "output" : "exception");
    cJSON_AddNullToObject(info, "error");
    if (ex)
        cJSON_AddItemToObject(info, "explain", ex);
    cp_json_set(report, "signature_info", info);
    return 0;
}

/* Why a native signature cannot be made (the lists or the crash-kind table not loaded, no crash
 * kind, no crashed thread or no frames of it), written in whybuf when it needs to be, or NULL. */
static const char *signature_missing(const struct siglists *L, const char *lists_error,
                                     int have_kinds, const char *kinds_err, const char *kind,
                                     const cJSON *t, char *whybuf, size_t whylen)
{
    if (!L) {
        snprintf(whybuf, whylen, "the signature lists could not be loaded: %s",
                 lists_error && *lists_error ? lists_error : "unknown error");
        return whybuf;
    }
    if (!have_kinds) {
        snprintf(whybuf, whylen, "the crash-kind table could not be loaded: %s", kinds_err);
        return whybuf;
    }
    if (!kind)
        return "the report has no signal";
    if (!t)
        return "the crashed thread is unknown";
    if (cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(t, "frames")) == 0)
        return "the crashed thread has no frames";
    return NULL;
}

/* A frame's names as the lists match them. */
struct frame_names {
    const char *fn;          /* the function as the report has it, or NULL */
    char name[NAME_MAX_LEN]; /* normalized; "@0x0" for a call through a NULL pointer; "" unnamed */
    char mod[NAME_MAX_LEN];  /* the module's base name, or "" */
    char modnorm[NAME_MAX_LEN];      /* the module's normalized name */
    char full[2 * NAME_MAX_LEN + 2]; /* "module!name", '?' for either unknown */
};

/* The names of frame f, into n. */
static void frame_names(const cJSON *f, struct frame_names *n)
{
    n->fn = cp_jstr_at(f, "function");
    const char *rawmod = cp_jstr_at(f, "module");
    signature_norm_function(n->fn, n->name, sizeof(n->name));
    if (!*n->name && !rawmod && pc_is_zero(f))
        snprintf(n->name, sizeof(n->name), "@0x0"); /* a call through a NULL function pointer */
    signature_norm_module(rawmod, n->modnorm, sizeof(n->modnorm));
    const char *slash = rawmod ? strrchr(rawmod, '/') : NULL;
    snprintf(n->mod, sizeof(n->mod), "%s", slash ? slash + 1 : rawmod ? rawmod : "");
    snprintf(n->full, sizeof(n->full), "%s!%s", *n->modnorm ? n->modnorm : "?",
             *n->name ? n->name : "?");
}

/* The walk over the crashed thread's frames: the signature, its frames and fingerprint so far. */
struct sig_walk {
    const struct siglists *L;
    cJSON *ex;                  /* --explain: each frame's action and rule, or NULL */
    cJSON *frames, *normalized; /* signature_info.frames and .normalized */
    char *sig;                  /* the signature text, siglen bytes */
    size_t siglen;
    struct xxh64 h;                  /* the fingerprint */
    char prev[2 * NAME_MAX_LEN + 2]; /* the last frame used: recursion is used once */
    int kept, ended;
    const char *end_rule; /* why the frames after the end are not used */
};

/* Appends frame n to the signature (" | name", or " | module!?" unnamed), its frames, and the
 * fingerprint. */
static void sig_append(struct sig_walk *s, const struct frame_names *n)
{
    char disp[sizeof(s->prev)];
    if (*n->name)
        snprintf(disp, sizeof(disp), "%s", n->name);
    else
        snprintf(disp, sizeof(disp), "%s!?", *n->modnorm ? n->modnorm : "?");
    size_t cur = strlen(s->sig);
    if (cur + strlen(disp) + 4 < s->siglen)
        snprintf(s->sig + cur, s->siglen - cur, " | %s", disp);
    cJSON_AddItemToArray(s->frames, cJSON_CreateString(disp));
    cJSON_AddItemToArray(s->normalized, cJSON_CreateString(n->full));
    xxh64_update(&s->h, n->full, strlen(n->full));
    xxh64_update(&s->h, "\n", 1);
}

/* Frame f (number idx, innermost 0) of the walk: not used (after the end, inline, tail call),
 * ended (a stop frame), skipped, used once (recursion), or used, by the rule that decides it. */
static void sig_frame(struct sig_walk *s, const cJSON *f, int idx)
{
    struct frame_names n;
    frame_names(f, &n);
    if (s->ended) {
        add_explain(s->ex, idx, n.fn, n.full, n.mod, "unused", s->end_rule);
        return;
    }
    if (cJSON_IsTrue(cp_jpath(f, "inline"))) {
        add_explain(s->ex, idx, n.fn, n.full, n.mod, "inline",
                    "inline frames are not used: they exist only with debug info");
        return;
    }
    if (cJSON_IsTrue(cp_jpath(f, "tail_call"))) {
        add_explain(s->ex, idx, n.fn, n.full, n.mod, "tail_call",
                    "frames put back from DWARF call sites are not used: they exist only "
                    "with debug info");
        return;
    }
    const struct list *lst;
    const struct rule *rule;
    enum action a = classify(s->L, n.name, n.mod, n.modnorm, &lst, &rule);
    char rbuf[LIST_LINE_MAX + 64];
    if (rule)
        snprintf(rbuf, sizeof(rbuf), "%s:%d %s", lst->file, rule->line, rule->text);
    else
        snprintf(rbuf, sizeof(rbuf), "no rule: a meaningful frame");
    if (a == ACT_STOP) {
        add_explain(s->ex, idx, n.fn, n.full, n.mod, "stop", rbuf);
        s->ended = 1;
        s->end_rule = "after a stop frame";
        return;
    }
    if (a == ACT_SKIP) {
        add_explain(s->ex, idx, n.fn, n.full, n.mod, "skip", rbuf);
        return;
    }
    if (!strcmp(n.full, s->prev)) {
        add_explain(s->ex, idx, n.fn, n.full, n.mod, "repeat",
                    "the same as the frame before it (recursion): used once");
        return;
    }
    snprintf(s->prev, sizeof(s->prev), "%s", n.full);
    add_explain(s->ex, idx, n.fn, n.full, n.mod, action_name(a), rbuf);
    sig_append(s, &n);
    if (a == ACT_KEEP && ++s->kept == SIGNATURE_FRAMES) {
        s->ended = 1;
        s->end_rule = "the signature has its frames";
    }
}

int signature_compute(cJSON *report, const struct siglists *L, const char *lists_error,
                      int explain, char *err, size_t errlen)
{
    if (!cJSON_IsObject(report)) {
        cp_errmsg(err, errlen, "not a report object");
        return -1;
    }
    const cJSON *t = crashed_thread(report);
    const char *kinds_err;
    int have_kinds = kinds_get(&kinds_err);
    const char *kind = crash_kind(report, t);
    cJSON *info = cJSON_CreateObject();
    cJSON_AddItemToObject(info, "version", str_or_null(L ? L->version : NULL));
    cJSON_AddItemToObject(info, "kind", str_or_null(kind));
    cJSON_AddNumberToObject(info, "frame_limit", SIGNATURE_FRAMES);
    cJSON *frames = cJSON_AddArrayToObject(info, "frames");
    cJSON *normalized = cJSON_AddArrayToObject(info, "normalized");
    char whybuf[512];
    cp_json_set(report, "crash_kind", str_or_null(kind));
    if (kind && death_signature_kind(report, kind, t)) {
        if (!L) /* the same lists as every other signature, or none */
            return no_signature(
                report, info,
                signature_missing(L, lists_error, 1, NULL, kind, t, whybuf, sizeof(whybuf)), err,
                errlen);
        if (!strcmp(kind, "python_exception") && cp_jstr_at(report, "exception.type")) {
            cJSON *ex = explain ? cJSON_CreateArray() : NULL;
            if (!python_signature(report, L, info, frames, normalized, ex))
                return 0;
            cJSON_Delete(ex);
            cJSON_Delete(info);
            cp_errmsg(err, errlen, "out of memory");
            return -1;
        }
        death_signature(report, kind, info, frames, normalized);
        return 0;
    }
    const char *why =
        signature_missing(L, lists_error, have_kinds, kinds_err, kind, t, whybuf, sizeof(whybuf));
    if (why)
        return no_signature(report, info, why, err, errlen);

    struct sig_walk s = {.L = L, .frames = frames, .normalized = normalized, .siglen = 4096};
    s.ex = explain ? cJSON_CreateArray() : NULL;
    char label[128];
    kind_label(report, kind, label, sizeof(label));
    s.sig = malloc(s.siglen);
    if (!s.sig) {
        cJSON_Delete(info);
        cJSON_Delete(s.ex);
        cp_errmsg(err, errlen, "out of memory");
        return -1;
    }
    snprintf(s.sig, s.siglen, "%s", label);
    xxh64_init(&s.h);
    xxh64_update(&s.h, FP_SCHEME "\n", strlen(FP_SCHEME) + 1);
    xxh64_update(&s.h, kind, strlen(kind));
    xxh64_update(&s.h, "\n", 1);
    int idx = 0;
    const cJSON *f;
    cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(t, "frames")) sig_frame(&s, f, idx++);
    char fp[17];
    snprintf(fp, sizeof(fp), "%016" PRIx64, xxh64_digest(&s.h));
    cp_json_set(report, "signature", cJSON_CreateString(s.sig));
    cp_json_set(report, "fingerprint", cJSON_CreateString(fp));
    cJSON_AddNullToObject(info, "error");
    if (s.ex)
        cJSON_AddItemToObject(info, "explain", s.ex);
    cp_json_set(report, "signature_info", info);
    free(s.sig);
    return 0;
}

int signature_apply(cJSON *report, int explain, char *err, size_t errlen)
{
    char lerr[512] = "";
    struct siglists *L = siglists_load(NULL, lerr, sizeof(lerr));
    int rc = signature_compute(report, L, lerr, explain, err, errlen);
    siglists_free(L);
    return rc;
}
