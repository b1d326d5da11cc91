/* pyexc.c - process.death and the report's `exception` (see pyexc.h). */
#include "pyexc.h"
#include "jpath.h"
#include "pyframes.h"
#include "utf8.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#define NAME_MAX_BYTES 512     /* type names, MRO entries, hooks, thread names */
#define PATH_MAX_BYTES 4096    /* file names, executables */
#define FUNC_MAX_BYTES 1024    /* function and qualified names */
#define TRACEBACK_MAX (64u << 10)

/* ---- cleaning ---- */

/* A JSON string item of s cut to at most max bytes (never inside a UTF-8 sequence), valid UTF-8;
 * *cut set when it was cut. */
static cJSON *cut_str(const char *s, size_t max, int *cut)
{
    size_t l = strlen(s);
    char *tmp = NULL;
    if (l > max) {
        size_t c = max;
        while (c && ((unsigned char)s[c] & 0xc0) == 0x80)
            c--;
        tmp = malloc(c + 1);
        if (!tmp)
            return cJSON_CreateString("");
        memcpy(tmp, s, c);
        tmp[c] = 0;
        s = tmp;
        if (cut)
            *cut = 1;
    }
    char *c = cp_utf8_clean(s);
    cJSON *o = cJSON_CreateString(c ? c : "");
    free(c);
    free(tmp);
    return o;
}

/* from[key] as a string of at most max bytes, or null */
static void put_str(cJSON *to, const char *key, const cJSON *from, const char *fkey, size_t max)
{
    const char *s = cp_jstr(from, fkey);
    cJSON_AddItemToObject(to, key, s ? cut_str(s, max, NULL) : cJSON_CreateNull());
}

/* from[key] as an integer (a finite number in range), or null */
static void put_int(cJSON *to, const char *key, const cJSON *from, const char *fkey)
{
    const cJSON *v = cp_jkey(from, fkey);
    if (cJSON_IsNumber(v) && isfinite(v->valuedouble) && fabs(v->valuedouble) < 9e15)
        cJSON_AddNumberToObject(to, key, floor(v->valuedouble));
    else
        cJSON_AddNullToObject(to, key);
}

static void put_num(cJSON *to, const char *key, const cJSON *from, const char *fkey)
{
    const cJSON *v = cp_jkey(from, fkey);
    if (cJSON_IsNumber(v) && isfinite(v->valuedouble))
        cJSON_AddNumberToObject(to, key, v->valuedouble);
    else
        cJSON_AddNullToObject(to, key);
}

static cJSON *thread_obj(const cJSON *t)
{
    if (!cJSON_IsObject(t))
        return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject();
    put_int(o, "ident", t, "ident");
    put_int(o, "native_id", t, "native_id");
    put_str(o, "name", t, "name", NAME_MAX_BYTES);
    return o;
}

static cJSON *frames_obj(const cJSON *e, int *truncated)
{
    cJSON *a = cJSON_CreateArray();
    const cJSON *f;
    int n = 0;
    *truncated = cJSON_IsTrue(cp_jkey(e, "frames_truncated"));
    cJSON_ArrayForEach(f, cp_jkey(e, "frames"))
    {
        if (!cJSON_IsObject(f))
            continue;
        if (n == PYEXC_FRAMES_MAX) {
            *truncated = 1;
            break;
        }
        cJSON *o = cJSON_CreateObject();
        put_str(o, "function", f, "function", FUNC_MAX_BYTES);
        put_str(o, "qualname", f, "qualname", FUNC_MAX_BYTES);
        put_str(o, "file", f, "file", PATH_MAX_BYTES);
        put_int(o, "line", f, "line");
        pyframes_exc_extras(o, f); /* source line, locals */
        cJSON_AddItemToArray(a, o);
        n++;
    }
    return a;
}

static cJSON *worker_obj(const cJSON *w)
{
    if (!cJSON_IsObject(w))
        return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject();
    put_str(o, "kind", w, "kind", NAME_MAX_BYTES);
    put_int(o, "id", w, "id");
    put_int(o, "pid", w, "pid");
    put_str(o, "original_type", w, "original_type", NAME_MAX_BYTES);
    const char *tb = cp_jstr(w, "original_traceback");
    int cut = 0;
    cJSON_AddItemToObject(o, "original_traceback",
                          tb ? cut_str(tb, TRACEBACK_MAX, &cut) : cJSON_CreateNull());
    if (cut)
        cJSON_AddTrueToObject(o, "original_traceback_truncated");
    return o;
}

/* One exception of the chain: relation, parent, type, mro, message, frames, worker. */
static cJSON *exc_obj(const cJSON *e, const char *relation, int parent)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "relation", relation);
    if (parent >= 0)
        cJSON_AddNumberToObject(o, "parent", parent);
    else
        cJSON_AddNullToObject(o, "parent");
    const char *type = cp_jstr(e, "type");
    cJSON_AddItemToObject(o, "type", cut_str(type && *type ? type : "?", NAME_MAX_BYTES, NULL));
    cJSON *mro = cJSON_AddArrayToObject(o, "mro");
    const cJSON *m;
    int n = 0;
    cJSON_ArrayForEach(m, cp_jkey(e, "mro"))
    {
        if (!cJSON_IsString(m))
            continue;
        if (n++ == PYEXC_MRO_MAX)
            break;
        cJSON_AddItemToArray(mro, cut_str(m->valuestring, NAME_MAX_BYTES, NULL));
    }
    const char *msg = cp_jstr(e, "message");
    int cut = 0;
    cJSON_AddItemToObject(o, "message", msg ? cut_str(msg, PYEXC_MESSAGE_MAX, &cut)
                                            : cJSON_CreateNull());
    if (cut)
        cJSON_AddTrueToObject(o, "message_truncated");
    int ftrunc = 0;
    cJSON_AddItemToObject(o, "frames", frames_obj(e, &ftrunc));
    cJSON_AddBoolToObject(o, "frames_truncated", ftrunc);
    cJSON_AddItemToObject(o, "worker", worker_obj(cp_jkey(e, "worker")));
    return o;
}

/* The flattened chain of the exception e: e first ("raised"), then, depth first, each one's
 * __cause__ ("cause") and __context__ ("context"), at most PYEXC_CHAIN_MAX in all. */
static cJSON *chain_of(const cJSON *e, int *truncated)
{
    struct item {
        const cJSON *e;
        const char *rel;
        int parent, depth;
    } stack[2 * PYEXC_CHAIN_MAX + 2];
    int sp = 0, n = 0;
    cJSON *a = cJSON_CreateArray();
    *truncated = 0;
    stack[sp++] = (struct item){e, "raised", -1, 0};
    while (sp > 0) {
        struct item it = stack[--sp];
        if (!cJSON_IsObject(it.e))
            continue;
        if (n == PYEXC_CHAIN_MAX || it.depth >= PYEXC_CHAIN_MAX) {
            *truncated = 1;
            continue;
        }
        cJSON_AddItemToArray(a, exc_obj(it.e, it.rel, it.parent));
        int me = n++;
        /* context pushed first: the cause comes out first */
        const cJSON *ctx = cp_jkey(it.e, "context"), *cause = cp_jkey(it.e, "cause");
        if (cJSON_IsObject(ctx) && sp < (int)(sizeof(stack) / sizeof(stack[0])))
            stack[sp++] = (struct item){ctx, "context", me, it.depth + 1};
        if (cJSON_IsObject(cause) && sp < (int)(sizeof(stack) / sizeof(stack[0])))
            stack[sp++] = (struct item){cause, "cause", me, it.depth + 1};
    }
    return a;
}

cJSON *pyexc_from_json(const cJSON *j, char *why, size_t whylen)
{
    if (!cJSON_IsObject(j)) {
        snprintf(why, whylen, "not a JSON object");
        return NULL;
    }
    const char *fmt = cp_jstr(j, "format");
    if (fmt && strncmp(fmt, "crashpack-exception/", 20)) {
        snprintf(why, whylen, "unknown format \"%.64s\"", fmt);
        return NULL;
    }
    const cJSON *exc = cp_jkey(j, "exception");
    if (!cJSON_IsObject(exc)) {
        snprintf(why, whylen, "no \"exception\" object");
        return NULL;
    }
    cJSON *o = cJSON_CreateObject();
    put_str(o, "format", j, "format", NAME_MAX_BYTES);
    put_str(o, "hook", j, "hook", NAME_MAX_BYTES);
    const cJSON *fatal = cp_jkey(j, "fatal");
    cJSON_AddBoolToObject(o, "fatal", !cJSON_IsBool(fatal) || cJSON_IsTrue(fatal));
    put_num(o, "time", j, "time");
    put_int(o, "pid", j, "pid");
    cJSON_AddItemToObject(o, "thread", thread_obj(cp_jkey(j, "thread")));
    const cJSON *py = cp_jkey(j, "python");
    if (cJSON_IsObject(py)) {
        cJSON *p = cJSON_AddObjectToObject(o, "python");
        put_str(p, "version", py, "version", NAME_MAX_BYTES);
        put_str(p, "implementation", py, "implementation", NAME_MAX_BYTES);
        put_str(p, "executable", py, "executable", PATH_MAX_BYTES);
    } else {
        cJSON_AddNullToObject(o, "python");
    }
    cJSON_AddBoolToObject(o, "abandoned", cJSON_IsTrue(cp_jkey(j, "abandoned")));
    int ct = 0;
    cJSON *chain = chain_of(exc, &ct);
    /* the raised exception's fields at the top, for the common case */
    const cJSON *top = cJSON_GetArrayItem(chain, 0);
    static const char *keys[] = {"type", "mro", "message", "message_truncated", "frames",
                                 "frames_truncated", "worker"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        const cJSON *v = cp_jkey(top, keys[i]);
        if (v)
            cJSON_AddItemToObject(o, keys[i], cJSON_Duplicate(v, 1));
    }
    cJSON_AddItemToObject(o, "chain", chain);
    cJSON_AddBoolToObject(o, "chain_truncated", ct);
    cJSON *events = cJSON_AddArrayToObject(o, "events");
    const cJSON *ev;
    int n = 0, etrunc = 0;
    cJSON_ArrayForEach(ev, cp_jkey(j, "events"))
    {
        if (!cJSON_IsObject(ev) || !cJSON_IsObject(cp_jkey(ev, "exception")))
            continue;
        if (n++ == PYEXC_EVENTS_MAX) {
            etrunc = 1;
            break;
        }
        cJSON *eo = cJSON_CreateObject();
        put_str(eo, "hook", ev, "hook", NAME_MAX_BYTES);
        put_num(eo, "time", ev, "time");
        cJSON_AddItemToObject(eo, "thread", thread_obj(cp_jkey(ev, "thread")));
        cJSON_AddBoolToObject(eo, "fatal", cJSON_IsTrue(cp_jkey(ev, "fatal")));
        int t2 = 0;
        cJSON *ec = chain_of(cp_jkey(ev, "exception"), &t2);
        const cJSON *et = cJSON_GetArrayItem(ec, 0);
        cJSON_AddItemToObject(eo, "type", cJSON_Duplicate(cp_jkey(et, "type"), 1));
        cJSON_AddItemToObject(eo, "message", cJSON_Duplicate(cp_jkey(et, "message"), 1));
        cJSON_AddItemToObject(eo, "chain", ec);
        cJSON_AddBoolToObject(eo, "chain_truncated", t2);
        cJSON_AddItemToArray(events, eo);
    }
    cJSON_AddBoolToObject(o, "events_truncated", etrunc);
    return o;
}

void pyexc_add(cJSON *r, struct bundle *b)
{
    if (!bundle_find(b, "exception.json")) {
        cp_json_set(r, "exception", NULL);
        return;
    }
    char *buf = NULL, why[256] = "";
    size_t len = 0;
    int rc = bundle_read_all(b, "exception.json", PYEXC_MEMBER_MAX, &buf, &len);
    cJSON *e = NULL;
    if (rc == BUNDLE_OK) {
        cJSON *j = cJSON_ParseWithLength(buf, len);
        if (!j)
            snprintf(why, sizeof(why), "not valid JSON");
        else
            e = pyexc_from_json(j, why, sizeof(why));
        cJSON_Delete(j);
    } else if (rc == BUNDLE_ETOOBIG) {
        snprintf(why, sizeof(why), "over %u MiB: not read", PYEXC_MEMBER_MAX >> 20);
    } else {
        snprintf(why, sizeof(why), "unreadable: %s",
                 rc == BUNDLE_ETRUNC ? "cut short in this bundle" : bundle_strerror(rc));
    }
    free(buf);
    cp_json_set(r, "exception", e);
    if (!e) {
        char msg[320];
        snprintf(msg, sizeof(msg), "exception.json: %s", why);
        cp_json_set(r, "exception_error", cJSON_CreateString(msg));
    }
}

/* ---- process.death ---- */

static const char *const KINDS[] = {"core", "exception", "exit", "signal", "terminated",
                                    "oom_kill", "snapshot", NULL};

static const char *known_kind(const char *k)
{
    for (int i = 0; k && KINDS[i]; i++)
        if (!strcmp(k, KINDS[i]))
            return KINDS[i];
    return NULL;
}

static cJSON *signal_obj(int n)
{
    cJSON *s = cJSON_CreateObject();
    if (n <= 0 || n >= 1024) {
        cJSON_AddNullToObject(s, "number");
        cJSON_AddNullToObject(s, "name");
        return s;
    }
    char name[32];
    const char *abbr = sigabbrev_np(n);
    if (abbr)
        snprintf(name, sizeof(name), "SIG%s", abbr);
    else
        snprintf(name, sizeof(name), "signal %d", n);
    cJSON_AddNumberToObject(s, "number", n);
    cJSON_AddStringToObject(s, "name", name);
    return s;
}

/* a death kind whose signal and thread are not a core's */
static int eventful(const char *kind)
{
    return kind && strcmp(kind, "core") && strcmp(kind, "snapshot");
}

void pyexc_death(cJSON *r, const cJSON *man, struct bundle *b)
{
    cJSON *p = (cJSON *)cp_jkey(r, "process");
    if (!cJSON_IsObject(p))
        return;
    const cJSON *dj = cp_jkey(man, "death");
    const char *kind = cJSON_IsObject(dj) ? known_kind(cp_jstr(dj, "kind")) : NULL;
    cJSON *d = cJSON_CreateObject();
    int sig = -1;
    if (kind) {
        cJSON_AddStringToObject(d, "kind", kind);
        const cJSON *s = cp_jkey(dj, "signal");
        if (cJSON_IsNumber(s) && s->valuedouble > 0 && s->valuedouble < 1024)
            sig = (int)s->valuedouble;
        else if (!strcmp(kind, "oom_kill"))
            sig = SIGKILL; /* what the OOM killer always sends */
        else if (!strcmp(kind, "terminated"))
            sig = SIGTERM;
        if (sig > 0)
            cJSON_AddItemToObject(d, "signal", signal_obj(sig));
        else
            cJSON_AddNullToObject(d, "signal");
        const cJSON *st = cp_jkey(dj, "status");
        if (cJSON_IsNumber(st) && st->valuedouble >= -1e9 && st->valuedouble <= 1e9)
            cJSON_AddNumberToObject(d, "status", floor(st->valuedouble));
        else
            cJSON_AddNullToObject(d, "status");
        put_str(d, "trigger", dj, "trigger", NAME_MAX_BYTES);
        const char *id = cp_jstr(dj, "identity");
        if (id && (!strcmp(id, "verified") || !strcmp(id, "reported")))
            cJSON_AddStringToObject(d, "identity", id);
        else /* unstated: only what a uid told the service is "reported" */
            cJSON_AddStringToObject(d, "identity",
                                    !strcmp(kind, "exit") || !strcmp(kind, "signal") ||
                                            !strcmp(kind, "terminated")
                                        ? "reported"
                                        : "verified");
        put_str(d, "reason", dj, "reason", PYEXC_MESSAGE_MAX);
        put_int(d, "reported_by_uid", dj, "reported_by_uid");
        put_str(d, "job", dj, "job", PATH_MAX_BYTES);
        cJSON_AddStringToObject(d, "source", "manifest");
    } else {
        /* an older bundle: a snap, else a core the kernel handed to core_pattern */
        int snap = bundle_find(b, "snap.json") != NULL;
        kind = snap ? "snapshot" : "core";
        cJSON_AddStringToObject(d, "kind", kind);
        const cJSON *ps = cp_jkey(p, "signal");
        if (!snap && cJSON_IsNumber(cp_jkey(ps, "number")))
            cJSON_AddItemToObject(d, "signal", cJSON_Duplicate(ps, 1));
        else
            cJSON_AddNullToObject(d, "signal");
        cJSON_AddNullToObject(d, "status");
        cJSON_AddStringToObject(d, "trigger", snap ? "snap" : "kernel");
        cJSON_AddStringToObject(d, "identity", "verified");
        cJSON_AddNullToObject(d, "reason");
        cJSON_AddStringToObject(d, "source", cJSON_IsObject(dj) ? "derived_unknown_kind" : "derived");
    }
    cp_json_set(p, "death", d);
    if (!eventful(kind))
        return;
    /* the kinds without a core: the killing signal or none; the raising thread or none */
    cp_json_set(p, "signal", signal_obj(!strcmp(kind, "exception") || !strcmp(kind, "exit") ? -1 : sig));
    const cJSON *tid = cp_jpath(r, "exception.thread.native_id");
    if (!strcmp(kind, "exception") && cJSON_IsNumber(tid)) {
        cp_json_set(p, "crashed_tid", cJSON_CreateNumber(tid->valuedouble));
        cp_json_set(p, "crashed_tid_source", cJSON_CreateString("exception"));
    } else {
        cp_json_set(p, "crashed_tid", NULL);
        cJSON_DeleteItemFromObjectCaseSensitive(p, "crashed_tid_source");
    }
}

void pyexc_death_finish(cJSON *r)
{
    cJSON *p = (cJSON *)cp_jkey(r, "process");
    const char *kind = cp_jstr_at(r, "process.death.kind");
    if (p && kind && !strcmp(kind, "snapshot")) {
        /* a live snapshot (snap / watch): no thread crashed, whatever the manifest's tid */
        cp_json_set(p, "crashed_tid", NULL);
        cJSON_DeleteItemFromObjectCaseSensitive(p, "crashed_tid_source");
        cJSON *t;
        cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(r, "threads"))
        {
            if (!cJSON_IsTrue(cp_jkey(t, "crashed")))
                continue;
            cp_json_set(t, "crashed", cJSON_CreateFalse());
            const char *state = cp_jstr(t, "state");
            if (state && !strcmp(state, "crashed"))
                cp_json_set(t, "state", NULL);
        }
        return;
    }
    if (!p || !eventful(kind))
        return;
    if (!strcmp(kind, "exception") || !strcmp(kind, "exit"))
        cp_json_set(p, "signal", signal_obj(-1));
    else {
        const cJSON *ds = cp_jpath(r, "process.death.signal");
        double n = 0;
        cp_json_set(p, "signal", signal_obj(cp_jnum(ds, "number", &n) ? (int)n : -1));
    }
    const cJSON *tid = cp_jpath(r, "exception.thread.native_id");
    int raising = !strcmp(kind, "exception") && cJSON_IsNumber(tid);
    if (raising) {
        cp_json_set(p, "crashed_tid", cJSON_CreateNumber(tid->valuedouble));
        cp_json_set(p, "crashed_tid_source", cJSON_CreateString("exception"));
    } else {
        cp_json_set(p, "crashed_tid", NULL);
        cJSON_DeleteItemFromObjectCaseSensitive(p, "crashed_tid_source");
    }
    /* a live snapshot's threads: none crashed of a signal; the raising one is the crashed one */
    cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(r, "threads"))
    {
        double id = -1;
        int was = cJSON_IsTrue(cp_jkey(t, "crashed"));
        int now = raising && cp_jnum(t, "tid", &id) && id == tid->valuedouble;
        if (was == now)
            continue;
        cp_json_set(t, "crashed", cJSON_CreateBool(now));
        const char *state = cp_jstr(t, "state");
        if (now)
            cp_json_set(t, "state", cJSON_CreateString("crashed"));
        else if (state && !strcmp(state, "crashed"))
            cp_json_set(t, "state", NULL);
    }
}

