/* match.c - evaluating a rule's condition tree against a crashpack-report/1 object (see rule.h).
 *
 * Every leaf is evaluated (even under a failed "all"), so rule_leaf_outcomes() sees the whole tree;
 * evidence of a subtree is kept only when that subtree is true. Regexes are POSIX extended,
 * case-insensitive; globs are fnmatch(3). Missing report fields are simply "no evidence".
 */
#include "jpath.h"
#include "rule.h"
#include "errmsg.h"

#include <fnmatch.h>
#include <math.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define EVIDENCE_PER_LEAF 4
#define EVIDENCE_TEXT_MAX 300

struct ctx {
    const cJSON *r;
    char *leaves; /* outcomes, may be NULL */
    size_t nleaves, cap;
    int neg;               /* inside a "not" */
    struct rule_scope *sc; /* may be NULL */
};

/* A GPU event that matched: on this process's GPU or pid (own), or host-wide (not known to be
 * this process's); other leaves are the process's own evidence. Not counted under "not". */
static void scope_hit(struct ctx *c, int gpu_own, int gpu_host, int proc)
{
    if (!c->sc || c->neg)
        return;
    c->sc->gpu_own += gpu_own;
    c->sc->gpu_host += gpu_host;
    c->sc->process += proc;
}

/* An Xid's scope: the analyzer's "scope", or from own_gpu / own_pid for report fragments */
static const char *xid_scope(const cJSON *x)
{
    const char *s = cp_jstr_at(x, "scope");
    if (s)
        return s;
    if (cJSON_IsTrue(cp_jpath(x, "own_gpu")) || cJSON_IsTrue(cp_jpath(x, "own_pid")))
        return "own";
    if (cJSON_IsFalse(cp_jpath(x, "own_gpu")))
        return "other";
    return "unscoped";
}

/* ---- report access ---- */

/* ---- patterns ---- */

/* Compiled regexes, kept for the process: the same few hundred patterns are matched against every
 * log and kernel line. Single-threaded, like the rest of the analyzer. */
#define RX_CACHE 512
static struct {
    char *pat;
    regex_t rx;
    int ok;
} rx_cache[RX_CACHE];
static size_t rx_n;

static const regex_t *rx_get(const char *re)
{
    for (size_t i = 0; i < rx_n; i++)
        if (!strcmp(rx_cache[i].pat, re))
            return rx_cache[i].ok ? &rx_cache[i].rx : NULL;
    if (rx_n == RX_CACHE) /* full: forget everything (never happens with sane rule bases) */
        for (; rx_n > 0; rx_n--) {
            if (rx_cache[rx_n - 1].ok)
                regfree(&rx_cache[rx_n - 1].rx);
            free(rx_cache[rx_n - 1].pat);
        }
    char *copy = strdup(re);
    if (!copy)
        return NULL;
    rx_cache[rx_n].pat = copy;
    rx_cache[rx_n].ok = regcomp(&rx_cache[rx_n].rx, re, REG_EXTENDED | REG_ICASE | REG_NOSUB) == 0;
    rx_n++;
    return rx_cache[rx_n - 1].ok ? &rx_cache[rx_n - 1].rx : NULL;
}

/* Checks a rule's regex by compiling it into the cache rx_get keeps: validating the rule base
 * (when it is loaded, and again when its rules are listed) and matching then compile each
 * pattern once per process. */
int rule_regex_ok(const char *re, char *err, size_t errlen)
{
    if (rx_get(re))
        return 1;
    regex_t rx; /* not compilable (or no memory): compile it once more for the message */
    int rc = regcomp(&rx, re, REG_EXTENDED | REG_ICASE | REG_NOSUB);
    if (rc) {
        char m[128];
        regerror(rc, &rx, m, sizeof(m));
        if (err && errlen)
            snprintf(err, errlen, "bad regex `%s`: %s", re, m);
        return 0;
    }
    regfree(&rx);
    if (err && errlen)
        snprintf(err, errlen, "regex `%s`: out of memory", re);
    return 0;
}

static int rx_match(const char *re, const char *text)
{
    if (!re || !text)
        return 0;
    const regex_t *rx = rx_get(re);
    return rx && regexec(rx, text, 0, NULL, 0) == 0;
}

/* A pattern of a frame/env predicate: glob unless the predicate says "match": "regex". */
static int pat_match(const char *pat, const char *text, int regex)
{
    if (!pat)
        return 1;
    if (!text)
        return 0;
    if (regex)
        return rx_match(pat, text);
    if (fnmatch(pat, text, 0) == 0)
        return 1;
    /* a module glob also matches the basename of a path */
    const char *slash = strrchr(text, '/');
    return slash && fnmatch(pat, slash + 1, 0) == 0;
}

/* v is a string or an array of strings; does one of them equal s (case-insensitive)? */
static int in_list(const cJSON *v, const char *s)
{
    if (!s)
        return 0;
    if (cJSON_IsString(v))
        return !strcasecmp(v->valuestring, s);
    const cJSON *e;
    cJSON_ArrayForEach(e, v) if (cJSON_IsString(e) && !strcasecmp(e->valuestring, s)) return 1;
    return 0;
}

static int in_num_list(const cJSON *v, double n)
{
    if (cJSON_IsNumber(v))
        return v->valuedouble == n;
    const cJSON *e;
    cJSON_ArrayForEach(e, v) if (cJSON_IsNumber(e) && e->valuedouble == n) return 1;
    return 0;
}

/* ---- evidence ---- */

static void ev_add(cJSON *ev, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void ev_add(cJSON *ev, const char *fmt, ...)
{
    if (!ev)
        return;
    char buf[EVIDENCE_TEXT_MAX + 8];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n > EVIDENCE_TEXT_MAX)
        strcpy(buf + EVIDENCE_TEXT_MAX - 3, "...");
    /* control characters never go into evidence */
    for (char *p = buf; *p; p++)
        if ((unsigned char)*p < 0x20)
            *p = ' ';
    const cJSON *e;
    cJSON_ArrayForEach(e, ev) if (cJSON_IsString(e) && !strcmp(e->valuestring, buf)) return;
    cJSON_AddItemToArray(ev, cJSON_CreateString(buf));
}

static const char *nz(const char *s)
{
    return s ? s : "?";
}

/* ---- leaves ---- */

static int leaf_signal(struct ctx *c, const cJSON *v, cJSON *ev)
{
    const char *name = cp_jstr_at(c->r, "process.signal.name");
    double num;
    int have = cp_jnum_at(c->r, "process.signal.number", &num);
    int m = in_list(v, name) || (name && !strncasecmp(name, "SIG", 3) && in_list(v, name + 3)) ||
            (have && in_num_list(v, num));
    if (m)
        ev_add(ev, "signal %s", name ? name : "?");
    return m;
}

static int leaf_si_code(struct ctx *c, const cJSON *v, cJSON *ev)
{
    const char *name = cp_jstr_at(c->r, "process.signal.code_name");
    double num;
    int have = cp_jnum_at(c->r, "process.signal.code", &num);
    int m = in_list(v, name) || (have && in_num_list(v, num));
    if (m)
        ev_add(ev, "si_code %s", name ? name : "(number)");
    return m;
}

static int leaf_crash_kind(struct ctx *c, const cJSON *v, cJSON *ev)
{
    const char *k = cp_jstr_at(c->r, "crash_kind");
    int m = in_list(v, k);
    const char *type = cp_jstr_at(c->r, "cause.exception.type");
    const char *what = cp_jstr_at(c->r, "cause.exception.what");
    if (m && !strcmp(k, "uncaught_exception") && (type || what))
        ev_add(ev, "crash kind: %s (%s: %s)", k, nz(type), nz(what));
    else if (m)
        ev_add(ev, "crash kind: %s", k);
    return m;
}

static int leaf_abort_message(struct ctx *c, const cJSON *v, cJSON *ev)
{
    const char *msg = cp_jstr_at(c->r, "cause.abort_message");
    int m = cJSON_IsString(v) && rx_match(v->valuestring, msg);
    if (m)
        ev_add(ev, "abort message: %s", msg);
    return m;
}

/* exception: {type: name or list, message_regex} over the Python exception's chain (report
 * `exception.chain[]`): an exception whose type, or a class of its MRO, is one of the names, and
 * whose message matches. */
static int leaf_py_exception(struct ctx *c, const cJSON *v, cJSON *ev)
{
    const cJSON *types = cp_jpath(v, "type");
    const char *re = cp_jstr_at(v, "message_regex");
    int hits = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, cp_jpath(c->r, "exception.chain"))
    {
        const char *type = cp_jstr_at(e, "type"), *msg = cp_jstr_at(e, "message");
        const char *via = NULL;
        if (types) {
            if (in_list(types, type)) {
                via = type;
            } else {
                const cJSON *m;
                cJSON_ArrayForEach(m, cp_jpath(e, "mro")) if (cJSON_IsString(m) &&
                                                              in_list(types, m->valuestring))
                {
                    via = m->valuestring;
                    break;
                }
            }
            if (!via)
                continue;
        }
        if (re && !rx_match(re, msg ? msg : ""))
            continue;
        if (hits++ < EVIDENCE_PER_LEAF) {
            const char *rel = cp_jstr_at(e, "relation");
            char first[256];
            snprintf(first, sizeof(first), "%s", msg ? msg : "");
            char *nl = strchr(first, '\n');
            if (nl)
                *nl = 0;
            /* one line per exception, whichever name of its MRO matched: two conditions that
             * match it (its type, RuntimeError and its message) give the same line, kept once */
            ev_add(ev, "Python exception%s%s%s %s: %s", rel && strcmp(rel, "raised") ? " (" : "",
                   rel && strcmp(rel, "raised") ? rel : "", rel && strcmp(rel, "raised") ? ")" : "",
                   nz(type), first);
        }
    }
    return hits > 0;
}

static int leaf_exception(struct ctx *c, const cJSON *v, cJSON *ev)
{
    if (cJSON_IsObject(v))
        return leaf_py_exception(c, v, ev);
    const char *type = cp_jstr_at(c->r, "cause.exception.type");
    const char *what = cp_jstr_at(c->r, "cause.exception.what");
    if (!type && !what)
        return 0;
    char buf[1024];
    snprintf(buf, sizeof(buf), "%s: %s", nz(type), nz(what));
    int m = cJSON_IsString(v) && rx_match(v->valuestring, buf);
    if (m)
        ev_add(ev, "uncaught exception %s", buf);
    return m;
}

/* frame / python_frame: {function, module|file, match, thread: crashed|any, top, thread_name,
 * min_threads} */
static int leaf_frames(struct ctx *c, const cJSON *v, cJSON *ev, int python)
{
    const char *fpat = cp_jstr_at(v, "function");
    const char *mpat = cp_jstr_at(v, python ? "file" : "module");
    const char *tpat = cp_jstr_at(v, "thread_name");
    const char *scope = cp_jstr_at(v, "thread");
    int regex = cp_jstr_at(v, "match") && !strcmp(cp_jstr_at(v, "match"), "regex");
    double top = 0, minth = 1;
    cp_jnum_at(v, "top", &top);
    cp_jnum_at(v, "min_threads", &minth);
    int any_thread = scope && !strcmp(scope, "any");
    double ctid = -1;
    cp_jnum_at(c->r, "process.crashed_tid", &ctid);
    int hits = 0, shown = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(c->r, "threads"))
    {
        double tid = -1;
        cp_jnum_at(t, "tid", &tid);
        int crashed = cJSON_IsTrue(cp_jpath(t, "crashed")) || (ctid > 0 && tid == ctid);
        if (!any_thread && !crashed)
            continue;
        const char *tname = cp_jstr_at(t, "name");
        if (tpat && !pat_match(tpat, tname, regex))
            continue;
        const cJSON *f;
        int i = 0;
        cJSON_ArrayForEach(f, cp_jpath(t, python ? "python_frames" : "frames"))
        {
            if (top > 0 && i >= top)
                break;
            const char *fn = cp_jstr_at(f, "function"),
                       *mod = cp_jstr_at(f, python ? "file" : "module");
            if ((!fpat || pat_match(fpat, fn, regex)) && (!mpat || pat_match(mpat, mod, regex))) {
                hits++;
                if (shown++ < EVIDENCE_PER_LEAF)
                    ev_add(ev, "%sthread %.0f%s%s%s frame #%d: %s%s%s", crashed ? "crashed " : "",
                           tid, tname ? " (" : "", tname ? tname : "", tname ? ")" : "", i, nz(fn),
                           mod ? (python ? " at " : " in ") : "", mod ? mod : "");
                break;
            }
            i++;
        }
    }
    return hits >= (minth < 1 ? 1 : minth);
}

static double crash_time(const cJSON *r)
{
    double t = -1;
    cp_jnum_at(r, "host.time", &t);
    return t;
}

/* xid: {codes, own_gpu, blame, window_s, only} */
static int leaf_xid(struct ctx *c, const cJSON *v, cJSON *ev)
{
    const cJSON *codes = cp_jpath(v, "codes"), *blame = cp_jpath(v, "blame"),
                *own = cp_jpath(v, "own_gpu");
    double window = 0, ct = crash_time(c->r);
    cp_jnum_at(v, "window_s", &window);
    int only = cJSON_IsTrue(cp_jpath(v, "only"));
    int host = cJSON_IsTrue(cp_jpath(v, "host"));
    int hits = 0, others = 0, own_hits = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, cp_jpath(c->r, "gpu.xid"))
    {
        double code = -1, t = -1;
        cp_jnum_at(x, "code", &code);
        if (window > 0 && ct > 0 && cp_jnum_at(x, "time", &t) && (t < ct - window || t > ct + 60))
            continue;
        /* another GPU's and pid's event, or one past its kind's window (a GPU seen healthy
         * again after falling off the bus), is context, never a cause: "host": true rules take
         * every event of the host */
        const char *scope = xid_scope(x);
        if (!host && (!strcmp(scope, "other") || cJSON_IsFalse(cp_jpath(x, "active")))) {
            others++;
            continue;
        }
        int ok = (!codes || in_num_list(codes, code)) &&
                 (!blame || in_list(blame, cp_jstr_at(x, "blame")));
        if (ok && cJSON_IsBool(own) && cJSON_IsTrue(own) != cJSON_IsTrue(cp_jpath(x, "own_gpu")))
            ok = 0;
        if (!ok) {
            others++;
            continue;
        }
        if (!strcmp(scope, "own"))
            own_hits++;
        if (hits++ < EVIDENCE_PER_LEAF) {
            const char *text = cp_jstr_at(x, "text"), *when = cp_jstr_at(x, "time_utc");
            ev_add(ev, "Xid %.0f on %s%s%s%s: %s", code, nz(cp_jstr_at(x, "pci")),
                   cJSON_IsTrue(cp_jpath(x, "own_gpu")) ? " (this process's GPU)" : "",
                   when ? " at " : "", when ? when : "",
                   text ? text : nz(cp_jstr_at(x, "meaning")));
        }
    }
    int m = hits > 0 && !(only && others > 0);
    if (m)
        scope_hit(c, own_hits > 0, own_hits == 0, 0);
    return m;
}

static int leaf_kernel_log(struct ctx *c, const cJSON *v, cJSON *ev)
{
    if (!cJSON_IsString(v))
        return 0;
    int hits = 0;
    const cJSON *l;
    cJSON_ArrayForEach(l, cp_jpath(c->r, "kernel_log.lines"))
    {
        const char *text = cp_jstr_at(l, "text"), *scope = cp_jstr_at(l, "scope");
        if (scope && !strcmp(scope, "other")) /* an Xid line of another GPU and pid */
            continue;
        if (rx_match(v->valuestring, text) && hits++ < EVIDENCE_PER_LEAF)
            ev_add(ev, "kernel: %s", text);
    }
    if (hits)
        scope_hit(c, 0, 1, 0); /* a kernel line: the host's, not known to be this process's */
    return hits > 0;
}

/* log_error: {category, regex} */
static int leaf_log_error(struct ctx *c, const cJSON *v, cJSON *ev)
{
    const cJSON *cat = cp_jpath(v, "category");
    const char *re = cp_jstr_at(v, "regex");
    int hits = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, cp_jpath(c->r, "log.errors"))
    {
        const char *text = cp_jstr_at(e, "text");
        if (cat && !in_list(cat, cp_jstr_at(e, "category")))
            continue;
        if (re && !rx_match(re, text))
            continue;
        if (hits++ < EVIDENCE_PER_LEAF) {
            double line = 0;
            cp_jnum_at(e, "line", &line);
            ev_add(ev, "log %s:%.0f: %s", nz(cp_jstr_at(e, "source")), line, nz(text));
        }
    }
    return hits > 0;
}

static int cmp_op(const char *op, double a, double b)
{
    if (!op || !strcmp(op, "=="))
        return a == b;
    if (!strcmp(op, "!="))
        return a != b;
    if (!strcmp(op, ">="))
        return a >= b;
    if (!strcmp(op, ">"))
        return a > b;
    if (!strcmp(op, "<="))
        return a <= b;
    if (!strcmp(op, "<"))
        return a < b;
    return 0;
}

/* smi: {field (path in gpus[]), op, value (number|bool|string), own} */
static int leaf_smi(struct ctx *c, const cJSON *v, cJSON *ev)
{
    const char *field = cp_jstr_at(v, "field"), *op = cp_jstr_at(v, "op");
    const cJSON *want = cp_jpath(v, "value");
    int own = cJSON_IsTrue(cp_jpath(v, "own"));
    if (!field || !want)
        return 0;
    int hits = 0, own_gpus = 0;
    const cJSON *g;
    cJSON_ArrayForEach(g, cp_jpath(c->r, "gpu.nvidia_smi.gpus"))
    {
        if (own && !cJSON_IsTrue(cp_jpath(g, "own")))
            continue;
        const cJSON *have = cp_jpath(g, field);
        char shown[128] = "";
        int m = 0;
        if (cJSON_IsNumber(want) && cJSON_IsNumber(have)) {
            m = cmp_op(op, have->valuedouble, want->valuedouble);
            snprintf(shown, sizeof(shown), "%g", have->valuedouble);
        } else if (cJSON_IsBool(want) && cJSON_IsBool(have)) {
            m = (cJSON_IsTrue(want) == cJSON_IsTrue(have)) == !(op && !strcmp(op, "!="));
            snprintf(shown, sizeof(shown), "%s", cJSON_IsTrue(have) ? "true" : "false");
        } else if (cJSON_IsString(want) && cJSON_IsArray(have)) { /* e.g. throttle_reasons */
            const cJSON *e;
            cJSON_ArrayForEach(e, have) if (cJSON_IsString(e) &&
                                            rx_match(want->valuestring, e->valuestring))
            {
                m = 1;
                snprintf(shown, sizeof(shown), "includes %s", e->valuestring);
                break;
            }
        } else if (cJSON_IsString(want) && cJSON_IsString(have)) {
            m = rx_match(want->valuestring, have->valuestring);
            snprintf(shown, sizeof(shown), "%s", have->valuestring);
        }
        if (m)
            own_gpus += cJSON_IsTrue(cp_jpath(g, "own"));
        if (m && hits++ < EVIDENCE_PER_LEAF) {
            double idx = -1;
            cp_jnum_at(g, "index", &idx);
            ev_add(ev, "nvidia-smi GPU %.0f (%s): %s = %s", idx, nz(cp_jstr_at(g, "pci")), field,
                   shown);
        }
    }
    if (hits)
        scope_hit(c, own_gpus > 0, own_gpus == 0, 0);
    return hits > 0;
}

/* checkpoint: {valid: true|false|null, newest_valid: true (a valid older one exists)} */
static int leaf_checkpoint(struct ctx *c, const cJSON *v, cJSON *ev)
{
    const cJSON *ck = cp_jpath(c->r, "checkpoint");
    const char *path = cp_jstr_at(ck, "path");
    if (!path)
        return 0;
    const cJSON *want = cp_jpath(v, "valid"), *have = cp_jpath(ck, "valid");
    if (want) {
        if (cJSON_IsNull(want) ? !cJSON_IsNull(have) && have
                               : !cJSON_IsBool(have) || cJSON_IsTrue(want) != cJSON_IsTrue(have))
            return 0;
    }
    const cJSON *nv = cp_jpath(v, "newest_valid");
    if (cJSON_IsBool(nv) && cJSON_IsTrue(nv) != (cp_jstr_at(ck, "newest_valid") != NULL))
        return 0;
    const char *reason = cp_jstr_at(ck, "reason"), *newest = cp_jstr_at(ck, "newest_valid");
    ev_add(ev, "checkpoint %s: %s%s%s%s%s", path,
           cJSON_IsTrue(have)    ? "valid"
           : cJSON_IsFalse(have) ? "INVALID"
                                 : "unchecked",
           reason ? " (" : "", reason ? reason : "", reason ? ")" : "", newest ? "" : "");
    if (newest)
        ev_add(ev, "newest valid checkpoint: %s", newest);
    return 1;
}

/* env: {name: glob, value: regex} */
static int leaf_env(struct ctx *c, const cJSON *v, cJSON *ev)
{
    const char *npat = cp_jstr_at(v, "name"), *vre = cp_jstr_at(v, "value");
    int hits = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, cp_jpath(c->r, "process.env"))
    {
        if (!e->string || !cJSON_IsString(e))
            continue;
        if (npat && fnmatch(npat, e->string, 0))
            continue;
        if (vre && !rx_match(vre, e->valuestring))
            continue;
        if (hits++ < EVIDENCE_PER_LEAF)
            ev_add(ev, "environment %s=%s", e->string, e->valuestring);
    }
    return hits > 0;
}

/* death: kind or list, process.death.kind (pyexc.h) */
static int leaf_death(struct ctx *c, const cJSON *v, cJSON *ev)
{
    const char *k = cp_jstr_at(c->r, "process.death.kind");
    if (!in_list(v, k))
        return 0;
    double st = 0;
    const char *sig = cp_jstr_at(c->r, "process.death.signal.name");
    const char *tr = cp_jstr_at(c->r, "process.death.trigger");
    if (cp_jnum_at(c->r, "process.death.status", &st))
        ev_add(ev, "death: %s, exit status %.0f%s%s", k, st, tr ? ", trigger " : "", tr ? tr : "");
    else
        ev_add(ev, "death: %s%s%s%s%s", k, sig ? ", " : "", sig ? sig : "", tr ? ", trigger " : "",
               tr ? tr : "");
    return 1;
}

/* The DataLoader worker pids the report names: log errors' worker_pid / worker_pids fields and
 * the Python exception chain's worker.pid. */
static int is_worker_pid(const cJSON *r, double pid)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, cp_jpath(r, "log.errors"))
    {
        double p;
        if (cp_jnum_at(e, "fields.worker_pid", &p) && p == pid)
            return 1;
        const char *list = cp_jstr_at(e, "fields.worker_pids");
        for (const char *q = list; q && *q;) {
            char *end;
            double v = strtod(q, &end);
            if (end == q)
                q++;
            else {
                if (v == pid)
                    return 1;
                q = end;
            }
        }
    }
    cJSON_ArrayForEach(e, cp_jpath(r, "exception.chain"))
    {
        double p;
        if (cp_jnum_at(e, "worker.pid", &p) && p == pid)
            return 1;
    }
    return 0;
}

/* Is the memory cgroup `memcg` the process's own cgroup (`cg`) or one above it (its limit
 * covers the process)? The root cgroup "/" is nobody's own: it is the host. */
static int cgroup_covers(const char *memcg, const char *cg)
{
    if (!memcg || !cg || !strcmp(memcg, "/") || !memcg[0])
        return 0;
    size_t l = strlen(memcg);
    return !strncmp(cg, memcg, l) && (cg[l] == 0 || cg[l] == '/');
}

/* oom_kill: {scope: "cgroup"|"global"|... or a list, victim: "process"|"worker"|"related"|"any"}
 * over kernel_log.oom_kills[] (evidence.h): the kernel's OOM killer killed this process, a
 * DataLoader worker the report names, one of those or a process in the same memory cgroup
 * (related: a host event counts only for its process, its cgroup or its job), or any process.
 * Only kills inside their window around the crash (active, evidence.c's OOM_WINDOW_S) count.
 * The evidence names the limit. */
static int leaf_oom_kill(struct ctx *c, const cJSON *v, cJSON *ev)
{
    const cJSON *scope = cp_jpath(v, "scope");
    const char *victim = cp_jstr_at(v, "victim");
    int hits = 0;
    const cJSON *k;
    cJSON_ArrayForEach(k, cp_jpath(c->r, "kernel_log.oom_kills"))
    {
        const char *sc = cp_jstr_at(k, "scope");
        if (scope && !in_list(scope, sc))
            continue;
        /* outside its window around the crash (evidence.c): context, not a cause */
        if (cJSON_IsFalse(cp_jpath(k, "active")))
            continue;
        double pid = -1;
        cp_jnum_at(k, "pid", &pid);
        int own = cJSON_IsTrue(cp_jpath(k, "own_pid"));
        if (victim && !strcmp(victim, "process") && !own)
            continue;
        int worker = !own && is_worker_pid(c->r, pid);
        if (victim && !strcmp(victim, "worker") && !worker)
            continue;
        const char *pcg = cp_jstr_at(cp_jpath(c->r, "process"), "cgroup");
        if (victim && !strcmp(victim, "related") && !own && !worker &&
            !cgroup_covers(cp_jstr_at(k, "task_memcg"), pcg) &&
            !cgroup_covers(cp_jstr_at(k, "oom_memcg"), pcg))
            continue;
        if (hits++ >= EVIDENCE_PER_LEAF)
            continue;
        const char *memcg = cp_jstr_at(k, "oom_memcg"), *con = cp_jstr_at(k, "constraint");
        char limit[400];
        if (sc && !strcmp(sc, "cgroup"))
            snprintf(limit, sizeof(limit), "the memory cgroup limit of %s",
                     memcg ? memcg : "an unnamed cgroup");
        else if (sc && !strcmp(sc, "global"))
            snprintf(limit, sizeof(limit), "the host's memory (global_oom)");
        else
            snprintf(limit, sizeof(limit), "%s", sc ? sc : "an unstated limit");
        ev_add(ev, "kernel OOM killer killed %spid %.0f (%s): %s%s%s%s",
               own      ? "this process, "
               : worker ? "DataLoader worker "
                        : "",
               pid, nz(cp_jstr_at(k, "comm")), limit, con ? " [" : "", con ? con : "",
               con ? "]" : "");
        const char *text = cp_jstr_at(k, "text");
        if (text)
            ev_add(ev, "kernel: %s", text);
    }
    return hits > 0;
}

/* 1 when the array arr (of strings) holds s, case-insensitively */
static int str_in(const cJSON *arr, const char *s)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, arr)
    {
        if (s && cJSON_IsString(e) && !strcasecmp(e->valuestring, s))
            return 1;
    }
    return 0;
}

/* gpu_history: {scope: "gpu"|"host", codes: [...]} over gpu.history[] (the knowledge base's
 * hardware faults before this crash, diagnose.c): another crash's fault on one of this process's
 * GPUs (checked again here against gpu.scope's UUIDs and PCI ids: another GPU's fault never
 * counts), or on this whole host (MCE, AER on a PCIe port). */
static int leaf_gpu_history(struct ctx *c, const cJSON *v, cJSON *ev)
{
    const char *want = cp_jstr_at(v, "scope");
    const cJSON *codes = cp_jpath(v, "codes");
    const cJSON *sc = cp_jpath(c->r, "gpu.scope");
    int hits = 0;
    const cJSON *h;
    cJSON_ArrayForEach(h, cp_jpath(c->r, "gpu.history"))
    {
        const char *scope = cp_jstr_at(h, "scope");
        if (!scope || (want && strcmp(want, scope)))
            continue;
        const char *uuid = cp_jstr_at(h, "uuid"), *pci = cp_jstr_at(h, "pci");
        if (!strcmp(scope, "gpu") &&
            !(uuid ? str_in(cp_jpath(sc, "uuids"), uuid) : str_in(cp_jpath(sc, "pci"), pci)))
            continue;
        double code = -1, age = -1, id = 0;
        cp_jnum_at(h, "code", &code);
        if (codes && !in_num_list(codes, code))
            continue;
        if (hits++ >= EVIDENCE_PER_LEAF)
            continue;
        cp_jnum_at(h, "age_s", &age);
        cp_jnum_at(h, "crash_id", &id);
        char when[48];
        if (age < 0)
            snprintf(when, sizeof(when), "earlier");
        else if (age < 7200)
            snprintf(when, sizeof(when), "%.0f min earlier", age / 60);
        else
            snprintf(when, sizeof(when), "%.1f h earlier", age / 3600);
        const char *kind = cp_jstr_at(h, "kind"), *host = cp_jstr_at(h, "host");
        if (!strcmp(scope, "gpu"))
            ev_add(ev,
                   "history: this GPU (%s%s%s) had Xid %.0f%s%s%s %s, in crash #%.0f of the "
                   "knowledge base%s%s",
                   uuid ? uuid : "", uuid && pci ? ", " : "", pci ? pci : "", code,
                   kind ? " (" : "", kind ? kind : "", kind ? ")" : "", when, id,
                   host ? " on " : "", host ? host : "");
        else
            ev_add(ev, "history: this host (%s) logged %s %s, in crash #%.0f of the knowledge base",
                   host ? host : "?",
                   kind && !strcmp(kind, "mce") ? "a machine check" : "a PCIe port AER error", when,
                   id);
        const char *text = cp_jstr_at(h, "text");
        if (text)
            ev_add(ev, "kernel: %s", text);
    }
    return hits > 0;
}

/* The name a hang record gives a lock: its symbol (a global mutex, a Python variable), else its
 * address. */
static const char *lock_name(const cJSON *o, const char *sym, const char *addr)
{
    return cp_jstr_at(o, sym) ? cp_jstr_at(o, sym) : nz(cp_jstr_at(o, addr));
}

#define DEADLOCK_EVIDENCE 8

/* Does one of the deadlock's threads wait for the lock named name? */
static int deadlock_waits_for(const cJSON *d, const char *name)
{
    const cJSON *t;
    cJSON_ArrayForEach(t, cp_jpath(d, "threads"))
    {
        const char *sym = cp_jstr_at(t, "waits_for_mutex_symbol");
        if (name && sym && !strcmp(sym, name))
            return 1;
    }
    return 0;
}

/* Does the deadlock wait for every lock of want (a name or a list of names)? */
static int deadlock_locks(const cJSON *d, const cJSON *want)
{
    if (cJSON_IsString(want))
        return deadlock_waits_for(d, want->valuestring);
    const cJSON *w;
    cJSON_ArrayForEach(w, want) if (!deadlock_waits_for(d, cJSON_GetStringValue(w))) return 0;
    return 1;
}

/* deadlock: {lock: "pthread_mutex"|"threading.RLock"|"mixed" or a list, locks: names} over
 * hang.deadlocks[] (analyze/hang/hang.c): a cycle in the waits-for graph, proved from the locks'
 * owners (locks: the cycle waits for each of these, by symbol or Python name). The evidence names
 * each thread, the lock it holds, the lock it waits for and its holder, and where it waits (frame
 * and source line). */
static int leaf_deadlock(struct ctx *c, const cJSON *v, cJSON *ev)
{
    const cJSON *kinds = cp_jpath(v, "lock"), *names = cp_jpath(v, "locks");
    int hits = 0, shown = 0;
    const cJSON *d, *t;
    cJSON_ArrayForEach(d, cp_jpath(c->r, "hang.deadlocks"))
    {
        const char *kind = cp_jstr_at(d, "lock");
        if ((kinds && !in_list(kinds, kind ? kind : "pthread_mutex")) ||
            (names && !deadlock_locks(d, names)))
            continue;
        hits++;
        cJSON_ArrayForEach(t, cp_jpath(d, "threads"))
        {
            if (shown++ >= DEADLOCK_EVIDENCE)
                break;
            double tid = 0, owner = 0;
            cp_jnum_at(t, "tid", &tid);
            cp_jnum_at(t, "owner_tid", &owner);
            char holds[200] = "";
            const cJSON *h;
            cJSON_ArrayForEach(h, cp_jpath(t, "holds"))
            {
                size_t l = strlen(holds);
                snprintf(holds + l, sizeof(holds) - l, "%s%s", l ? ", " : "",
                         lock_name(h, "symbol", "mutex"));
            }
            const char *lt = cp_jstr_at(t, "lock_type");
            ev_add(
                ev,
                "deadlock: thread %.0f (%s) holds %s, waits for %s%s%s held by thread %.0f, in %s",
                tid, nz(cp_jstr_at(t, "name")), holds[0] ? holds : "?",
                lt && strcmp(lt, "pthread_mutex") ? lt : "mutex", " ",
                lock_name(t, "waits_for_mutex_symbol", "waits_for_mutex"), owner,
                nz(cp_jstr_at(t, "blocked_in")));
        }
    }
    return hits > 0;
}

/* lock_wait: {type: name or list (pthread_mutex, threading.Lock, threading.RLock), lock: name or
 * list, owner: "known"|"unknown"|"any", min_threads: N} over threads[].hang_state: at least N
 * threads wait for a lock the hang analysis identified (by its symbol or Python name: lock; a
 * Python Lock's holder is never recorded: owner unknown). The evidence names each thread, the
 * lock it waits for and where. */
static int leaf_lock_wait(struct ctx *c, const cJSON *v, cJSON *ev)
{
    const cJSON *types = cp_jpath(v, "type"), *names = cp_jpath(v, "lock");
    const char *owner = cp_jstr_at(v, "owner");
    double minth = 1;
    cp_jnum_at(v, "min_threads", &minth);
    int hits = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, cp_jpath(c->r, "threads"))
    {
        const cJSON *hs = cp_jpath(t, "hang_state");
        const char *lt = cp_jstr_at(hs, "lock_type");
        if (!lt || !cp_jstr_at(hs, "mutex") || (types && !in_list(types, lt)) ||
            (names && !in_list(names, cp_jstr_at(hs, "mutex_symbol"))))
            continue;
        int known = cJSON_IsNumber(cp_jpath(hs, "mutex_owner"));
        if (owner && ((!strcmp(owner, "known") && !known) || (!strcmp(owner, "unknown") && known)))
            continue;
        if (hits++ >= EVIDENCE_PER_LEAF)
            continue;
        double tid = 0;
        cp_jnum_at(t, "tid", &tid);
        const char *pn = cp_jstr_at(t, "python.name");
        const cJSON *pf = cJSON_GetArrayItem(cp_jpath(t, "python_frames"), 0);
        double line = -1;
        cp_jnum_at(pf, "line", &line);
        const char *file = cp_jstr_at(pf, "file"), *base = file ? strrchr(file, '/') : NULL;
        char where[300] = "";
        if (pf)
            snprintf(where, sizeof(where), ", in %s (%s:%.0f)", nz(cp_jstr_at(pf, "function")),
                     base ? base + 1 : nz(file), line);
        const char *note = cp_jstr_at(hs, "lock_owner_note");
        ev_add(ev, "thread %.0f (%s) waits for %s %s (%s)%s%s%s", tid,
               nz(pn ? pn : cp_jstr_at(t, "name")), lt, lock_name(hs, "mutex_symbol", "mutex"),
               nz(cp_jstr_at(hs, "mutex")), where, note ? "; " : "", note ? note : "");
    }
    return hits >= (minth < 1 ? 1 : minth);
}

/* ---- the table of leaves ---- */

/* The shapes a leaf's value takes (rule_leaf_check): error messages name the leaf. */
static int check_regex(const char *key, const cJSON *v, char *err, size_t errlen)
{
    if (!cJSON_IsString(v)) {
        cp_errmsg(err, errlen, "`%s` takes a regex string", key);
        return -1;
    }
    return rule_regex_ok(v->valuestring, err, errlen) ? 0 : -1;
}

static int check_names(const char *key, const cJSON *v, char *err, size_t errlen)
{
    if (!cJSON_IsString(v) && !cJSON_IsArray(v) && !cJSON_IsNumber(v)) {
        cp_errmsg(err, errlen, "`%s` takes a name or a list", key);
        return -1;
    }
    return 0;
}

/* exception: a regex over a C++ exception's "TYPE: WHAT", or {type, message_regex} over the
 * Python exception chain */
static int check_exception(const char *key, const cJSON *v, char *err, size_t errlen)
{
    if (!cJSON_IsObject(v))
        return check_regex(key, v, err, errlen);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(v, "type");
    const cJSON *mr = cJSON_GetObjectItemCaseSensitive(v, "message_regex");
    if ((!t && !mr) || (t && !cJSON_IsString(t) && !cJSON_IsArray(t)) ||
        (mr && !cJSON_IsString(mr))) {
        cp_errmsg(err, errlen,
                  "`exception` takes {\"type\": name or list, \"message_regex\": regex}");
        return -1;
    }
    return mr ? (rule_regex_ok(mr->valuestring, err, errlen) ? 0 : -1) : 0;
}

static int check_death(const char *key, const cJSON *v, char *err, size_t errlen)
{
    (void)key;
    if (!cJSON_IsString(v) && !cJSON_IsArray(v)) {
        cp_errmsg(err, errlen, "`death` takes a kind or a list");
        return -1;
    }
    return 0;
}

/* An object whose "regex" (and, with "match": "regex", its frame keys) compile. */
static int check_object(const char *key, const cJSON *v, char *err, size_t errlen)
{
    if (!cJSON_IsObject(v)) {
        cp_errmsg(err, errlen, "`%s` takes an object", key);
        return -1;
    }
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(v, "regex");
    if (cJSON_IsString(r) && !rule_regex_ok(r->valuestring, err, errlen))
        return -1;
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(v, "match");
    if (cJSON_IsString(m) && !strcmp(m->valuestring, "regex")) {
        static const char *pk[] = {"function", "module", "file", "thread_name"};
        for (size_t i = 0; i < 4; i++) {
            const cJSON *p = cJSON_GetObjectItemCaseSensitive(v, pk[i]);
            if (cJSON_IsString(p) && !rule_regex_ok(p->valuestring, err, errlen))
                return -1;
        }
    }
    return 0;
}

static int check_env(const char *key, const cJSON *v, char *err, size_t errlen)
{
    if (check_object(key, v, err, errlen))
        return -1;
    const cJSON *val = cJSON_GetObjectItemCaseSensitive(v, "value");
    return cJSON_IsString(val) && !rule_regex_ok(val->valuestring, err, errlen) ? -1 : 0;
}

static int check_smi(const char *key, const cJSON *v, char *err, size_t errlen)
{
    if (check_object(key, v, err, errlen))
        return -1;
    if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(v, "field")) ||
        !cJSON_GetObjectItemCaseSensitive(v, "value")) {
        cp_errmsg(err, errlen, "`smi` needs a field and a value");
        return -1;
    }
    return 0;
}

static int leaf_frame(struct ctx *c, const cJSON *v, cJSON *ev)
{
    return leaf_frames(c, v, ev, 0);
}
static int leaf_pyframe(struct ctx *c, const cJSON *v, cJSON *ev)
{
    return leaf_frames(c, v, ev, 1);
}

/* Every condition leaf: its name, how it is evaluated, and the shape of its value. A new leaf is
 * one row here (and its section in docs/rules.md). */
struct leaf {
    const char *key;
    int (*fn)(struct ctx *, const cJSON *, cJSON *);
    int (*check)(const char *key, const cJSON *v, char *err, size_t errlen);
};

static const struct leaf leaves[] = {
    {"signal", leaf_signal, check_names},
    {"si_code", leaf_si_code, check_names},
    {"crash_kind", leaf_crash_kind, check_names},
    {"abort_message", leaf_abort_message, check_regex},
    {"exception", leaf_exception, check_exception},
    {"frame", leaf_frame, check_object},
    {"python_frame", leaf_pyframe, check_object},
    {"xid", leaf_xid, check_object},
    {"kernel_log", leaf_kernel_log, check_regex},
    {"log_error", leaf_log_error, check_object},
    {"smi", leaf_smi, check_smi},
    {"checkpoint", leaf_checkpoint, check_object},
    {"env", leaf_env, check_env},
    {"death", leaf_death, check_death},
    {"oom_kill", leaf_oom_kill, check_object},
    {"gpu_history", leaf_gpu_history, check_object},
    {"deadlock", leaf_deadlock, check_object},
    {"lock_wait", leaf_lock_wait, check_object},
};

static const struct leaf *leaf_of(const char *key)
{
    for (size_t i = 0; key && i < sizeof(leaves) / sizeof(leaves[0]); i++)
        if (!strcmp(leaves[i].key, key))
            return &leaves[i];
    return NULL;
}

int rule_leaf_known(const char *key)
{
    return leaf_of(key) != NULL;
}

int rule_leaf_check(const char *key, const cJSON *v, char *err, size_t errlen)
{
    const struct leaf *l = leaf_of(key);
    if (!l) {
        cp_errmsg(err, errlen, "unknown condition `%s`", key ? key : "?");
        return -1;
    }
    return l->check(key, v, err, errlen);
}

static void record(struct ctx *c, int m)
{
    if (c->leaves && c->nleaves + 1 < c->cap)
        c->leaves[c->nleaves] = m ? '1' : '0';
    c->nleaves++;
}

static void merge(cJSON *to, cJSON *from)
{
    if (!to)
        return;
    cJSON *e;
    cJSON_ArrayForEach(e, from) if (cJSON_IsString(e)) ev_add(to, "%s", e->valuestring);
}

static int eval(struct ctx *c, const cJSON *cond, cJSON *ev, int depth)
{
    if (!cJSON_IsObject(cond) || depth > 32)
        return 0;
    const cJSON *k = cond->child;
    if (!k || k->next)
        return 0; /* exactly one key: rule_validate() says so */
    if (!strcmp(k->string, "all") || !strcmp(k->string, "any")) {
        int all = k->string[1] == 'l';
        int res = all;
        cJSON *sub = cJSON_CreateArray();
        const cJSON *ch;
        cJSON_ArrayForEach(ch, k)
        {
            cJSON *one = cJSON_CreateArray();
            int m = eval(c, ch, one, depth + 1);
            if (m)
                merge(sub, one);
            cJSON_Delete(one);
            res = all ? res && m : res || m;
        }
        if (res)
            merge(ev, sub);
        cJSON_Delete(sub);
        return res;
    }
    if (!strcmp(k->string, "not")) {
        c->neg++;
        int m = !eval(c, k, NULL, depth + 1);
        c->neg--;
        return m;
    }
    const struct leaf *l = leaf_of(k->string);
    if (l) {
        cJSON *one = cJSON_CreateArray();
        int before = c->sc ? c->sc->gpu_own + c->sc->gpu_host : 0;
        int m = l->fn(c, k, one);
        if (m && c->sc && c->sc->gpu_own + c->sc->gpu_host == before)
            scope_hit(c, 0, 0, 1); /* the process's own evidence (log, frame, signal, ...) */
        record(c, m);
        if (m)
            merge(ev, one);
        cJSON_Delete(one);
        return m;
    }
    record(c, 0);
    return 0;
}

int rule_match(const cJSON *rule, const cJSON *report, cJSON *evidence)
{
    struct ctx c = {.r = report};
    return eval(&c, cJSON_GetObjectItemCaseSensitive(rule, "when"), evidence, 0);
}

int rule_match_scoped(const cJSON *rule, const cJSON *report, cJSON *evidence,
                      struct rule_scope *sc)
{
    memset(sc, 0, sizeof(*sc));
    struct ctx c = {.r = report, .sc = sc};
    return eval(&c, cJSON_GetObjectItemCaseSensitive(rule, "when"), evidence, 0);
}

size_t rule_leaf_outcomes(const cJSON *rule, const cJSON *report, char *buf, size_t len)
{
    struct ctx c = {.r = report, .leaves = buf, .cap = len};
    eval(&c, cJSON_GetObjectItemCaseSensitive(rule, "when"), NULL, 0);
    if (buf && len)
        buf[c.nleaves < len ? c.nleaves : len - 1] = 0;
    return c.nleaves;
}
