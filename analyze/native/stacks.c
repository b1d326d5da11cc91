/* stacks.c - stacks.json: building it (crashpack enrich), reading it back without trusting it,
 * and choosing between it and the local analysis (crashpack analyze). See stacks.h.
 *
 * Main data structures: struct shape / struct key, a small schema of the native object
 * (native.h) that the sanitizer walks: a value is kept only when its key is known and its type is
 * one the key allows (unknown keys: only scalars, and only inside threads, frames, modules, cause
 * and signal), so the report code downstream sees the same shapes as from native_run(). struct
 * cmp holds the frame-by-frame comparison of the two analyses.
 */
#include "stacks.h"
#include "utf8.h"
#include "jpath.h"

#include "bundle.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

/* ---- building ---- */

cJSON *stacks_build(cJSON *native, const struct stacks_meta *m)
{
    cJSON *j = cJSON_CreateObject();
    if (!j) {
        cJSON_Delete(native);
        return NULL;
    }
    cJSON_AddStringToObject(j, "format", STACKS_FORMAT);
    time_t now = time(NULL);
    cJSON_AddNumberToObject(j, "created", (double)now);
    struct tm tm;
    char buf[64];
    if (gmtime_r(&now, &tm) && strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm))
        cJSON_AddStringToObject(j, "created_utc", buf);
    cJSON *h = cJSON_AddObjectToObject(j, "host");
    struct utsname u;
    if (h && uname(&u) == 0) {
        cJSON_AddStringToObject(h, "hostname", u.nodename);
        cJSON_AddStringToObject(h, "kernel", u.release);
        cJSON_AddStringToObject(h, "machine", u.machine);
    }
    cJSON_AddNumberToObject(j, "uid", (double)getuid());
    cJSON_AddNumberToObject(j, "gid", (double)getgid());
    cJSON_AddStringToObject(j, "binaries", m && m->binaries ? m->binaries : "host");
    cJSON_AddBoolToObject(j, "sealed", m && m->sealed);
    cJSON *bj = cJSON_AddObjectToObject(j, "bundle");
    if (bj)
        cJSON_AddBoolToObject(bj, "complete", m ? m->bundle_complete : 0);
    cJSON_AddNumberToObject(j, "ms", m ? (double)(long)(m->ms * 10) / 10 : 0);
    if (native)
        cJSON_AddItemToObject(j, "native", native);
    else
        cJSON_AddNullToObject(j, "native");
    cJSON_AddNullToObject(j, "python");
    cJSON_AddNullToObject(j, "checkpoint");
    return j;
}

/* ---- the schema and the sanitizer ---- */

enum { T_STR = 1, T_NUM = 2, T_BOOL = 4, T_NULL = 8, T_OBJ = 16, T_ARR = 32 };

struct shape;
struct key {
    const char *name;
    unsigned types;
    const struct shape *sub; /* T_OBJ: its shape; T_ARR: the elements' shape (NULL: strings) */
    int required;            /* the enclosing object is dropped without it */
};
struct shape {
    const struct key *keys;
    size_t nkeys;
    int keep_unknown_scalars;
    int is_frame; /* counts against STACKS_MAX_FRAMES */
};

#define SHAPE(k, unknown, frame) {k, sizeof(k) / sizeof(k[0]), unknown, frame}
#define SN (T_STR | T_NULL)
#define NN (T_NUM | T_NULL)

static const struct key frame_keys[] = {
    {"index", T_NUM, NULL, 0},         {"pc", T_STR, NULL, 1},
    {"function", SN, NULL, 0},         {"function_full", SN, NULL, 0},
    {"symbol", SN, NULL, 0},           {"symbol_offset", SN, NULL, 0},
    {"module", SN, NULL, 0},           {"module_offset", SN, NULL, 0},
    {"build_id", SN, NULL, 0},         {"elf_address", SN, NULL, 0},
    {"file", SN, NULL, 0},             {"line", NN, NULL, 0},
    {"column", NN, NULL, 0},           {"inline", T_BOOL, NULL, 0},
    {"trust", SN, NULL, 0},            {"tail_call", T_BOOL, NULL, 0},
};
static const struct shape frame_shape = SHAPE(frame_keys, 1, 1);

/* Python frames (python.h) and which unwinder ran (unwind_ucd.h) */
static const struct key pyframe_keys[] = {
    {"function", SN, NULL, 0}, {"qualname", SN, NULL, 0}, {"file", SN, NULL, 0},
    {"line", NN, NULL, 0},     {"entry", T_BOOL, NULL, 0}, {"native_frame_index", NN, NULL, 0},
};
static const struct shape pyframe_shape = SHAPE(pyframe_keys, 0, 1);

static const struct key pythread_keys[] = {
    {"thread_id", SN, NULL, 0},      {"name", SN, NULL, 0},
    {"interpreter", NN, NULL, 0},    {"holds_gil", T_BOOL, NULL, 0},
    {"frames_truncated", T_BOOL, NULL, 0}, {"error", SN, NULL, 0},
};
static const struct shape pythread_shape = SHAPE(pythread_keys, 0, 0);

static const struct key fallback_keys[] = {
    {"reason", SN, NULL, 0}, {"used", T_BOOL, NULL, 0}, {"other", SN, NULL, 0},
};
static const struct shape fallback_shape = SHAPE(fallback_keys, 0, 0);

static const struct key thread_keys[] = {
    {"tid", T_NUM, NULL, 1},           {"crashed", T_BOOL, NULL, 0},
    {"frames", T_ARR, &frame_shape, 1}, {"frames_dropped", T_NUM, NULL, 0},
    {"unwind_complete", T_BOOL, NULL, 0}, {"unwind_stop", SN, NULL, 0},
    {"unwinder", SN, NULL, 0},
    {"unwinder_fallback", T_OBJ | T_NULL, &fallback_shape, 0},
    {"python", T_OBJ | T_NULL, &pythread_shape, 0},
    {"python_frames", T_ARR, &pyframe_shape, 0},
    {"python_merge", SN, NULL, 0},
};
static const struct shape thread_shape = SHAPE(thread_keys, 1, 0);

static const struct key module_keys[] = {
    {"path", SN, NULL, 0},       {"start", SN, NULL, 0},     {"end", SN, NULL, 0},
    {"bias", SN, NULL, 0},       {"build_id", SN, NULL, 0},  {"found_at", SN, NULL, 0},
    {"debug_only", T_BOOL, NULL, 0}, {"debug_file", SN, NULL, 0}, {"problem", SN, NULL, 0},
    {"looked_up", T_BOOL, NULL, 0},
};
static const struct shape module_shape = SHAPE(module_keys, 1, 0);

static const struct key signal_keys[] = {
    {"number", NN, NULL, 0},     {"name", SN, NULL, 0},      {"code", NN, NULL, 0},
    {"code_name", SN, NULL, 0},  {"code_text", SN, NULL, 0}, {"fault_address", SN, NULL, 0},
    {"sender_pid", NN, NULL, 0}, {"sender_uid", NN, NULL, 0}, {"self_sent", T_BOOL, NULL, 0},
};
static const struct shape signal_shape = SHAPE(signal_keys, 1, 0);

static const struct key exception_keys[] = {
    {"type", SN, NULL, 0}, {"what", SN, NULL, 0}, {"heuristic", T_BOOL, NULL, 0},
};
static const struct shape exception_shape = SHAPE(exception_keys, 1, 0);

static const struct key cause_keys[] = {
    {"summary", SN, NULL, 0},
    {"stack_overflow", T_BOOL, NULL, 0},
    {"stack_overflow_detail", SN, NULL, 0},
    {"abort_message", SN, NULL, 0},
    {"abort_message_source", SN, NULL, 0},
    {"abort_message_heuristic", T_BOOL, NULL, 0},
    {"exception", T_OBJ | T_NULL, &exception_shape, 0},
};
static const struct shape cause_shape = SHAPE(cause_keys, 1, 0);

static const struct key core_keys[] = {
    {"arch", SN, NULL, 0},     {"threads", NN, NULL, 0},      {"segments", NN, NULL, 0},
    {"mapped_files", NN, NULL, 0}, {"warnings", T_ARR, NULL, 0},
};
static const struct shape core_shape = SHAPE(core_keys, 0, 0);

static const struct key gil_keys[] = {
    {"locked", T_BOOL | T_NULL, NULL, 0}, {"holder_tid", NN, NULL, 0},
    {"holder_thread_id", SN, NULL, 0},
};
static const struct shape gil_shape = SHAPE(gil_keys, 0, 0);

static const struct key python_keys[] = {
    {"module", SN, NULL, 0},         {"version", SN, NULL, 0},
    {"runtime", SN, NULL, 0},        {"runtime_source", SN, NULL, 0},
    {"supported", T_BOOL, NULL, 0},  {"threads", NN, NULL, 0},
    {"gil", T_OBJ | T_NULL, &gil_shape, 0}, {"error", SN, NULL, 0},
    {"layout_source", SN, NULL, 0}, {"layout_check", SN, NULL, 0},
    {"runtimes", NN, NULL, 0},
};
static const struct shape python_shape = SHAPE(python_keys, 0, 0);

static const struct key native_keys[] = {
    {"python", T_OBJ | T_NULL, &python_shape, 0},
    {"complete", T_BOOL, NULL, 0},
    {"error", SN, NULL, 0},
    {"unwinder", SN, NULL, 0},
    {"core", T_OBJ | T_NULL, &core_shape, 0},
    {"crashed_tid", NN, NULL, 0},
    {"crashed_tid_source", SN, NULL, 0},
    {"signal", T_OBJ | T_NULL, &signal_shape, 0},
    {"cause", T_OBJ | T_NULL, &cause_shape, 0},
    {"threads", T_ARR, &thread_shape, 1},
    {"frames_dropped", T_NUM, NULL, 0},
    {"modules", T_ARR, &module_shape, 0},
    {"errors", T_ARR, NULL, 0},
    {"warnings", T_ARR, NULL, 0},
};
static const struct shape native_shape = SHAPE(native_keys, 0, 0);

/* the rest of stacks.json, kept in the report as where the file came from */
static const struct key host_keys[] = {
    {"hostname", SN, NULL, 0}, {"kernel", SN, NULL, 0}, {"machine", SN, NULL, 0},
};
static const struct shape host_shape = SHAPE(host_keys, 0, 0);
static const struct key doc_keys[] = {
    {"format", T_STR, NULL, 1},  {"created", NN, NULL, 0},  {"created_utc", SN, NULL, 0},
    {"host", T_OBJ | T_NULL, &host_shape, 0}, {"uid", NN, NULL, 0}, {"gid", NN, NULL, 0},
    {"binaries", SN, NULL, 0},   {"ms", NN, NULL, 0}, {"sealed", T_BOOL, NULL, 0},
};
static const struct shape doc_shape = SHAPE(doc_keys, 0, 0);

struct san {
    size_t frames;  /* frames kept so far */
    size_t dropped; /* values dropped: wrong type, too long, over a limit */
};

static unsigned type_of(const cJSON *v)
{
    if (cJSON_IsString(v) && v->valuestring)
        return T_STR;
    if (cJSON_IsNumber(v))
        return T_NUM;
    if (cJSON_IsBool(v))
        return T_BOOL;
    if (cJSON_IsNull(v))
        return T_NULL;
    if (cJSON_IsObject(v))
        return T_OBJ;
    if (cJSON_IsArray(v))
        return T_ARR;
    return 0;
}

/* A copy of a scalar within the limits, or NULL. */
static cJSON *san_scalar(const cJSON *v)
{
    switch (type_of(v)) {
    case T_STR:
        return strlen(v->valuestring) <= STACKS_MAX_STRING ? cJSON_CreateString(v->valuestring)
                                                             : NULL;
    case T_NUM:
        return isfinite(v->valuedouble) && fabs(v->valuedouble) < 1e19
                   ? cJSON_CreateNumber(v->valuedouble)
                   : NULL;
    case T_BOOL:
        return cJSON_CreateBool(cJSON_IsTrue(v));
    case T_NULL:
        return cJSON_CreateNull();
    default:
        return NULL;
    }
}

static cJSON *san_object(const cJSON *o, const struct shape *sh, struct san *s);

/* Elements of an array: objects of `elem`'s shape, or strings when elem is NULL. */
static cJSON *san_array(const cJSON *a, const struct shape *elem, struct san *s)
{
    cJSON *out = cJSON_CreateArray();
    const cJSON *e;
    size_t n = 0;
    cJSON_ArrayForEach(e, a)
    {
        if (!out)
            return NULL;
        if (n >= STACKS_MAX_THREADS ||
            (elem && elem->is_frame &&
             (s->frames >= STACKS_MAX_FRAMES || n >= STACKS_MAX_THREAD_FRAMES))) {
            s->dropped++;
            break;
        }
        cJSON *c = elem ? (cJSON_IsObject(e) ? san_object(e, elem, s) : NULL)
                        : (cJSON_IsString(e) ? san_scalar(e) : NULL);
        if (!c) {
            s->dropped++;
            continue;
        }
        cJSON_AddItemToArray(out, c);
        n++;
        if (elem && elem->is_frame)
            s->frames++;
    }
    return out;
}

static cJSON *san_object(const cJSON *o, const struct shape *sh, struct san *s)
{
    cJSON *out = cJSON_CreateObject();
    if (!out)
        return NULL;
    for (size_t i = 0; i < sh->nkeys; i++) {
        const struct key *k = &sh->keys[i];
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k->name);
        unsigned t = v ? type_of(v) : 0;
        cJSON *c = NULL;
        if (t & k->types) {
            if (t == T_OBJ)
                c = san_object(v, k->sub, s);
            else if (t == T_ARR)
                c = san_array(v, k->sub, s);
            else
                c = san_scalar(v);
        }
        if (!c && v) {
            s->dropped++;
            if (k->types & T_NULL)
                c = cJSON_CreateNull();
        }
        if (!c) {
            if (k->required) {
                cJSON_Delete(out);
                return NULL;
            }
            continue;
        }
        cJSON_AddItemToObject(out, k->name, c);
    }
    if (!sh->keep_unknown_scalars)
        return out;
    /* at most STACKS_MAX_UNKNOWN of them (the rest dropped): the lookup in `out` stays short, so
     * an object with a million keys costs one pass, not a million lookups in a growing object */
    const cJSON *v;
    size_t unknown = 0;
    cJSON_ArrayForEach(v, o)
    {
        if (!v->string || cJSON_GetObjectItemCaseSensitive(out, v->string))
            continue; /* known (or a duplicate key: the first one counts) */
        int known = 0;
        for (size_t i = 0; i < sh->nkeys && !known; i++)
            known = !strcmp(sh->keys[i].name, v->string);
        if (known || strlen(v->string) > 64)
            continue;
        cJSON *c = unknown < STACKS_MAX_UNKNOWN ? san_scalar(v) : NULL;
        if (c) {
            cJSON_AddItemToObject(out, v->string, c);
            unknown++;
        } else
            s->dropped++;
    }
    return out;
}

int stacks_load(struct bundle *b, cJSON **native, cJSON **doc, cJSON **warnings, char *why,
                size_t whylen)
{
    *native = *doc = NULL;
    if (warnings)
        *warnings = NULL;
    if (!bundle_find(b, STACKS_MEMBER))
        return 0;
    char *buf = NULL;
    size_t len = 0;
    int rc = bundle_read_all(b, STACKS_MEMBER, STACKS_MAX, &buf, &len);
    if (rc) {
        if (rc == BUNDLE_ETRUNC)
            snprintf(why, whylen, "it is cut short");
        else if (rc == BUNDLE_ETOOBIG)
            snprintf(why, whylen, "it is larger than %u MiB", STACKS_MAX >> 20);
        else
            snprintf(why, whylen, "cannot read it: %s", bundle_error(b));
        free(buf);
        return -1;
    }
    cJSON *j = cJSON_ParseWithLength(buf, len);
    free(buf);
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(j, "format");
    const cJSON *nat = cJSON_GetObjectItemCaseSensitive(j, "native");
    if (!cJSON_IsObject(j))
        snprintf(why, whylen, "it is not a JSON object");
    else if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, STACKS_FORMAT))
        snprintf(why, whylen, "its format is not %s", STACKS_FORMAT);
    else if (!cJSON_IsObject(nat))
        snprintf(why, whylen, "it has no native analysis (\"native\" is not an object)");
    else {
        struct san s = {0, 0};
        *native = san_object(nat, &native_shape, &s);
        *doc = san_object(j, &doc_shape, &s);
        if (!*native || !*doc) {
            cJSON_Delete(*native);
            cJSON_Delete(*doc);
            *native = *doc = NULL;
            snprintf(why, whylen, "its native analysis does not have the expected shape "
                                  "(threads[] of {tid, frames[]})");
        } else if (s.dropped && warnings) {
            char w[160];
            snprintf(w, sizeof(w), "stacks.json: %zu malformed or oversized values dropped",
                     s.dropped);
            *warnings = cJSON_CreateArray();
            cJSON_AddItemToArray(*warnings, cJSON_CreateString(w));
        }
    }
    cJSON_Delete(j);
    return *native ? 1 : -1;
}

/* ---- comparing and choosing ---- */

struct cmp {
    cJSON *differences; /* strings, at most STACKS_MAX_DIFFERENCES */
    size_t ndiff;       /* all of them */
    size_t compared;    /* frames at the same pc named on both sides */
    size_t lacking;     /* frames stacks.json names (or locates) better than the local analysis */
    /* the differences that matter (docs/enrich.md): another crashed thread or signal, a thread on
     * one side only, the crashed thread's innermost frame named on both sides named differently or
     * its crash pc; a walk that parts deeper, or another thread's frame, does not */
    size_t nmatter;
    char matter[512]; /* the first of them */
    int crashed;      /* compare_thread: the thread compared is the crashed one */
};

static void differ(struct cmp *c, int matters, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void differ(struct cmp *c, int matters, const char *fmt, ...)
{
    c->ndiff++;
    int keep = cJSON_GetArraySize(c->differences) < STACKS_MAX_DIFFERENCES;
    int first_matter = matters && c->nmatter == 0;
    c->nmatter += matters != 0;
    if (!keep && !first_matter)
        return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (first_matter)
        snprintf(c->matter, sizeof(c->matter), "%s", buf);
    if (keep)
        cJSON_AddItemToArray(c->differences, cJSON_CreateString(buf));
}

static cJSON *threads_of(const cJSON *nat)
{
    cJSON *t = cJSON_GetObjectItemCaseSensitive(nat, "threads");
    return cJSON_IsArray(t) ? t : NULL;
}

/* 0: no function name, 1: a name, 2: a name and a source file */
static int richness(const cJSON *f)
{
    return !cp_jstr_ne(f, "function") ? 0 : cp_jstr_ne(f, "file") ? 2 : 1;
}

static const char *shown(const cJSON *f)
{
    const char *s = cp_jstr_ne(f, "function");
    return s ? s : "??";
}

/* Compares one thread's frames. Returns the frames stacks.json names better. */
static size_t compare_thread(struct cmp *c, double tid, const cJSON *lt, const cJSON *st)
{
    const cJSON *lf = cJSON_GetObjectItemCaseSensitive(lt, "frames");
    const cJSON *sf = cJSON_GetObjectItemCaseSensitive(st, "frames");
    int nl = cJSON_GetArraySize(lf), ns = cJSON_GetArraySize(sf);
    size_t lacking = 0;
    const cJSON *l = lf ? lf->child : NULL, *s = sf ? sf->child : NULL;
    int i = 0, named_both = 0; /* frames so far named on both sides */
    for (; l && s; l = l->next, s = s->next, i++) {
        const char *lpc = cp_jstr_ne(l, "pc"), *spc = cp_jstr_ne(s, "pc");
        if (!lpc || !spc || strcmp(lpc, spc))
            break;
        int lr = richness(l), sr = richness(s);
        if (lr < sr) {
            lacking++;
        } else if (lr == sr && lr > 0) {
            c->compared++;
            if (strcmp(cp_jstr_ne(l, "function"), cp_jstr_ne(s, "function")))
                differ(c, c->crashed && !named_both,
                       "thread %.0f frame %d (pc %s): local `%s`, stacks.json `%s`", tid, i, lpc,
                       shown(l), shown(s));
        }
        named_both += lr > 0 && sr > 0;
    }
    if (!l && !s)
        return lacking;
    /* the walks part here: the local one is explained when it lacks binaries */
    int local_degraded = lacking > 0 || !l || richness(l) == 0;
    for (const cJSON *r = s; r; r = r->next)
        if (richness(r) > 0)
            lacking += local_degraded;
    if (!local_degraded)
        differ(c, c->crashed && i == 0,
               "thread %.0f: the stacks part at frame %d (local %s `%s`, stacks.json %s `%s`; "
               "%d and %d frames)",
               tid, i, l && cp_jstr_ne(l, "pc") ? cp_jstr_ne(l, "pc") : "-", l ? shown(l) : "-",
               s && cp_jstr_ne(s, "pc") ? cp_jstr_ne(s, "pc") : "-", s ? shown(s) : "-", nl, ns);
    return lacking;
}

static cJSON *detach(cJSON *o, const char *key)
{
    return cJSON_DetachItemFromObjectCaseSensitive(o, key);
}

/* Cause details only stacks.json found (an abort message, an exception): copied into local. */
static int fill_cause(cJSON *local, const cJSON *stacks)
{
    cJSON *lc = cJSON_GetObjectItemCaseSensitive(local, "cause");
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(stacks, "cause");
    if (!cJSON_IsObject(lc) || !cJSON_IsObject(sc))
        return 0;
    int n = 0;
    if (!cp_jstr_ne(lc, "abort_message") && cp_jstr_ne(sc, "abort_message")) {
        static const char *k[] = {"abort_message", "abort_message_source", "abort_message_heuristic"};
        for (size_t i = 0; i < 3; i++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(sc, k[i]);
            if (v)
                cp_json_set(lc, k[i], cJSON_Duplicate(v, 1));
        }
        n++;
    }
    const cJSON *le = cJSON_GetObjectItemCaseSensitive(lc, "exception");
    const cJSON *se = cJSON_GetObjectItemCaseSensitive(sc, "exception");
    if (!cJSON_IsObject(le) && cJSON_IsObject(se)) {
        cp_json_set(lc, "exception", cJSON_Duplicate(se, 1));
        n++;
    }
    return n;
}

static void add_doc(cJSON *info, const cJSON *doc)
{
    static const char *k[] = {"created", "created_utc", "uid", "gid", "binaries"};
    for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(doc, k[i]);
        cp_json_set(info, k[i], v ? cJSON_Duplicate(v, 1) : NULL);
    }
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(doc, "host");
    const char *hn = cp_jstr_ne(h, "hostname");
    cp_json_set(info, "host", hn ? cJSON_CreateString(hn) : NULL);
}

/* The comparison of the local analysis with stacks.json, thread by thread. */
struct choice {
    struct cmp c;
    struct cp_jindex lix, six; /* the threads by tid, local and stacks.json's */
    cJSON *lacking;            /* tids whose stacks.json thread is better */
    size_t lacking_threads;    /* how many */
    size_t nthreads;           /* local threads with a tid */
};

/* Compares local with stacks: the crashed thread, the signal, each thread's frames (the threads
 * stacks.json has better into ch->lacking), the threads only one side has. */
static void compare_sides(struct choice *ch, const cJSON *local, const cJSON *stacks)
{
    double a, b, crashed = 0;
    int have_crashed = cp_jnum(local, "crashed_tid", &crashed);
    if (cp_jnum(local, "crashed_tid", &a) && cp_jnum(stacks, "crashed_tid", &b) && a != b)
        differ(&ch->c, 1, "crashed thread: local %.0f, stacks.json %.0f", a, b);
    const cJSON *ls = cJSON_GetObjectItemCaseSensitive(local, "signal");
    const cJSON *ss = cJSON_GetObjectItemCaseSensitive(stacks, "signal");
    if (cp_jnum(ls, "number", &a) && cp_jnum(ss, "number", &b) && a != b)
        differ(&ch->c, 1, "signal: local %.0f, stacks.json %.0f", a, b);
    const cJSON *t;
    cJSON_ArrayForEach(t, threads_of(local))
    {
        double tid;
        if (!cp_jnum(t, "tid", &tid))
            continue;
        ch->nthreads++;
        const cJSON *st = cp_jindex_find(&ch->six, tid);
        if (!st) {
            differ(&ch->c, 1, "thread %.0f is not in stacks.json", tid);
            continue;
        }
        ch->c.crashed = have_crashed ? tid == crashed
                                     : cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(t, "crashed"));
        size_t n = compare_thread(&ch->c, tid, t, st);
        /* Python frames that only stacks.json has (the interpreter's file is not here: a
         * container's, a snapshot's) make its thread the better one too */
        if (!cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(t, "python_frames")))
            n += (size_t)cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(st, "python_frames"));
        ch->c.lacking += n;
        if (n) {
            ch->lacking_threads++;
            cJSON_AddItemToArray(ch->lacking, cJSON_CreateNumber(tid));
        }
    }
    cJSON_ArrayForEach(t, threads_of(stacks))
    {
        double tid;
        if (cp_jnum(t, "tid", &tid) && !cp_jindex_find(&ch->lix, tid))
            differ(&ch->c, 1, "thread %.0f is only in stacks.json", tid);
    }
}

/* The interpreter: stacks.json's when the local walk found none it could read. Returns whether
 * it was taken. */
static int take_python(cJSON *local, const cJSON *stacks)
{
    const cJSON *lp = cJSON_GetObjectItemCaseSensitive(local, "python");
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(stacks, "python");
    if (cJSON_IsObject(sp) && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(sp, "supported")) &&
        !(cJSON_IsObject(lp) && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(lp, "supported")))) {
        cJSON *nu = cJSON_Duplicate(sp, 1);
        if (nu) {
            cJSON_DeleteItemFromObjectCaseSensitive(local, "python");
            cJSON_AddItemToObject(local, "python", nu);
            return 1;
        }
    }
    return 0;
}

/* Takes into local what stacks.json has better: the threads it names better (copies of its own),
 * its interpreter, cause details only it found. Returns whether anything was taken. */
static int merge_into_local(struct choice *ch, cJSON *local, const cJSON *stacks)
{
    const cJSON *tid;
    cJSON *lt = threads_of(local);
    cJSON_ArrayForEach(tid, ch->lacking)
    {
        size_t k = cp_jindex_first(&ch->lix, tid->valuedouble);
        cJSON *old = k < ch->lix.n ? (cJSON *)ch->lix.e[k].item : NULL;
        cJSON *nu = cJSON_Duplicate(cp_jindex_find(&ch->six, tid->valuedouble), 1);
        if (old && nu) {
            cJSON_ReplaceItemViaPointer(lt, old, nu);
            ch->lix.e[k].item = nu; /* old is freed; a repeated tid finds its replacement */
        } else {
            cJSON_Delete(nu);
        }
    }
    int took_py = take_python(local, stacks);
    return fill_cause(local, stacks) || ch->lacking_threads || took_py;
}

/* The info's note (what came from stacks.json, and from where) and disagreement (the first
 * difference), when there is one. */
static void choice_notes(cJSON *in, const struct cmp *c, const char *source)
{
    if (strcmp(source, "local")) {
        char w[400];
        const char *host = cp_jstr_ne(in, "host"), *when = cp_jstr_ne(in, "created_utc");
        snprintf(w, sizeof(w),
                 "%s: %s from stacks.json (made on %s%s%s), where the binaries were; here %zu "
                 "frame(s) could not be named or located",
                 !strcmp(source, "stacks.json") ? "every thread" : "some threads",
                 !strcmp(source, "stacks.json") ? "frames and cause" : "frames",
                 host ? host : "the crashed host", when ? " at " : "", when ? when : "",
                 c->lacking);
        cJSON_AddStringToObject(in, "note", w);
    }
    /* only a difference that matters is worth a warning: a walk that parts deep in a stack, where
     * one side had other binaries or debug files, is listed in differences[] alone */
    if (c->nmatter) {
        char w[800];
        snprintf(w, sizeof(w),
                 "stacks.json disagrees with the local analysis: %s (%zu difference(s) that "
                 "matter, %zu in all: analysis.stacks_json.differences)",
                 c->matter, c->nmatter, c->ndiff);
        cJSON_AddStringToObject(in, "disagreement", w);
    }
}

/* The info of a choice between two analyses: where the result came from (source), how they
 * compare, the stacks.json document's origin, the notes. threads_from_stacks: how many threads
 * are stacks.json's. Takes c->differences. */
static void choice_info(cJSON *in, struct cmp *c, const char *source, double threads_from_stacks,
                        const cJSON *doc)
{
    cJSON_AddStringToObject(in, "source", source);
    cJSON_AddBoolToObject(in, "present", 1);
    cJSON_AddBoolToObject(in, "used", strcmp(source, "local") != 0);
    cJSON_AddBoolToObject(in, "agrees", c->ndiff == 0);
    cJSON_AddNumberToObject(in, "compared_frames", (double)c->compared);
    cJSON_AddNumberToObject(in, "local_unnamed_frames", (double)c->lacking);
    cJSON_AddNumberToObject(in, "threads_from_stacks", threads_from_stacks);
    cJSON_AddNumberToObject(in, "difference_count", (double)c->ndiff);
    cJSON_AddNumberToObject(in, "differences_that_matter", (double)c->nmatter);
    cJSON_AddItemToObject(in, "differences", c->differences);
    if (doc)
        add_doc(in, doc);
    choice_notes(in, c, source);
}

cJSON *stacks_choose(cJSON *local, cJSON *stacks, const cJSON *doc, cJSON **info)
{
    cJSON *in = cJSON_CreateObject();
    *info = in;
    if (!in) {
        cJSON_Delete(stacks);
        return local;
    }
    if (!stacks || !local) {
        cJSON_AddStringToObject(in, "source", local ? "local" : "stacks.json");
        cJSON_AddBoolToObject(in, "present", stacks != NULL);
        cJSON_AddBoolToObject(in, "used", local == NULL);
        cJSON_AddNullToObject(in, "agrees");
        cJSON_AddItemToObject(in, "differences", cJSON_CreateArray());
        if (doc)
            add_doc(in, doc);
        return local ? local : stacks;
    }
    struct choice ch = {.c = {.differences = cJSON_CreateArray()}, .lacking = cJSON_CreateArray()};
    /* threads by tid on both sides: one lookup each, not a pass over the other side per thread */
    cp_jindex_build(&ch.lix, threads_of(local), "tid");
    cp_jindex_build(&ch.six, threads_of(stacks), "tid");
    compare_sides(&ch, local, stacks);
    const char *source = "local";
    int local_complete = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(local, "complete"));
    int stacks_complete = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(stacks, "complete"));
    cJSON *out = local;
    /* a local analysis cut at the thread cap is partial for a known reason that stacks.json (capped
     * alike, and from a bundle) cannot undo: it stays, with its cap and error */
    int capped = cJSON_GetObjectItemCaseSensitive(local, "threads_cap") != NULL;
    if ((ch.nthreads && ch.lacking_threads == ch.nthreads) ||
        (!local_complete && stacks_complete && !capped)) {
        source = "stacks.json";
        out = stacks;
        stacks = NULL;
    } else if (merge_into_local(&ch, local, stacks)) {
        source = "local+stacks.json";
    }
    choice_info(in, &ch.c, source,
                !strcmp(source, "stacks.json") ? (double)cJSON_GetArraySize(threads_of(out))
                                               : (double)ch.lacking_threads,
                doc);
    cp_jindex_free(&ch.lix);
    cp_jindex_free(&ch.six);
    cJSON_Delete(ch.lacking);
    cJSON_Delete(stacks);
    if (out != local)
        cJSON_Delete(local);
    return out;
}

cJSON *stacks_apply(struct bundle *b, cJSON *local, int no_stacks, int *failed, cJSON **info)
{
    *info = NULL;
    int present = bundle_find(b, STACKS_MEMBER) != NULL;
    if (no_stacks || !present) {
        cJSON *r = stacks_choose(local, NULL, NULL, info);
        if (*info) {
            cp_json_set(*info, "present", cJSON_CreateBool(present));
            if (no_stacks && present)
                cp_json_set(*info, "ignored", cJSON_CreateString("--no-stacks"));
        }
        return r;
    }
    cJSON *nat = NULL, *doc = NULL, *warn = NULL;
    char why[300] = "";
    int rc = stacks_load(b, &nat, &doc, &warn, why, sizeof(why));
    if (rc <= 0) {
        cJSON *r = stacks_choose(local, NULL, NULL, info);
        if (*info) {
            char w[400];
            snprintf(w, sizeof(w), "stacks.json ignored: %s; the local analysis is shown", why);
            cp_json_set(*info, "present", cJSON_CreateBool(1));
            cp_json_set(*info, "error", cJSON_CreateString(why));
            cp_json_set(*info, "warning", cJSON_CreateString(w));
        }
        return r;
    }
    cJSON *r = stacks_choose(local, nat, doc, info);
    cJSON_Delete(doc);
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(*info, "source");
    if (cJSON_IsString(src) && !strcmp(src->valuestring, "stacks.json") && failed)
        *failed = !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "complete"));
    if (*info && cJSON_GetArraySize(warn) > 0)
        cp_json_set(*info, "warning", cJSON_Duplicate(cJSON_GetArrayItem(warn, 0), 1));
    cJSON_Delete(warn);
    return r;
}

void stacks_annotate(cJSON *report, cJSON *info)
{
    cJSON *a = cJSON_GetObjectItemCaseSensitive(report, "analysis");
    if (!cJSON_IsObject(a)) {
        cJSON_Delete(info);
        return;
    }
    if (!info) {
        cp_json_set(a, "source", NULL);
        cp_json_set(a, "stacks_json", NULL);
        return;
    }
    cp_utf8_clean_tree(info); /* function names from the core and from stacks.json: any bytes */
    cp_json_set(a, "source", detach(info, "source"));
    cJSON *w = cJSON_GetObjectItemCaseSensitive(a, "warnings");
    if (!cJSON_IsArray(w)) {
        w = cJSON_CreateArray();
        cp_json_set(a, "warnings", w);
    }
    static const char *lines[] = {"warning", "note", "disagreement"};
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(info, lines[i]);
        if (cJSON_IsString(s))
            cJSON_AddItemToArray(w, cJSON_CreateString(s->valuestring));
    }
    if (!cJSON_GetObjectItemCaseSensitive(info, "warning"))
        cJSON_AddNullToObject(info, "warning");
    cp_json_set(a, "stacks_json", info);
}
