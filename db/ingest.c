/* ingest.c - storing analyzed crashes and user rules in the knowledge base (see kb.h). */
#include "jobid.h"
#include "jpath.h"
#include "kb_internal.h"
#include "errmsg.h"
#include "xxh64.h"

#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

/* The build-id of the crashed executable (its module in the report), NULL when unknown. */
static const char *exe_build_id(const cJSON *r)
{
    const char *exe = cp_jstr_ne_at(r, "process.exe");
    const cJSON *m;
    cJSON_ArrayForEach(m, cp_jpath(r, "modules"))
    {
        const char *path = cp_jstr_ne_at(m, "path");
        if (exe && path && !strcmp(path, exe))
            return cp_jstr_ne_at(m, "build_id");
    }
    return NULL;
}

#define FACT_PIDS 32

/* Adds pid to the array a unless it is there (at most FACT_PIDS). */
static void add_pid(cJSON *a, double pid)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, a) if (cJSON_IsNumber(e) && e->valuedouble == pid) return;
    if (pid > 0 && cJSON_GetArraySize(a) < FACT_PIDS)
        cJSON_AddItemToArray(a, cJSON_CreateNumber(pid));
}

/* What orders and links a job's deaths (issue 23, db jobs): the process's pid; when it died, as
 * precisely as the bundle knows it (the kernel's OOM kill line, sub-second; the supervisor's
 * observed exit; else the capture's time); and the pids of other processes whose death this
 * report names as its own cause (the DataLoader workers its error names, the processes the
 * kernel's OOM killer killed around it). */
static void facts_death(cJSON *f, const cJSON *r)
{
    double pid = -1, t = -1, v;
    const char *src = NULL, *kind = cp_jstr_ne_at(r, "process.death.kind");
    if (cp_jnum_at(r, "process.pid", &pid))
        cJSON_AddNumberToObject(f, "pid", pid);
    const cJSON *k, *e;
    cJSON_ArrayForEach(k, cp_jpath(r, "kernel_log.oom_kills"))
    {
        if (kind && !strcmp(kind, "oom_kill") && cJSON_IsTrue(cp_jpath(k, "own_pid")) &&
            cp_jnum_at(k, "time", &v)) {
            t = v;
            src = "kernel";
        }
    }
    if (!src && cp_jnum_at(r, "process.supervisor.end_time", &t))
        src = "supervisor";
    if (!src && cp_jnum_at(r, "host.time", &t))
        src = "capture";
    if (src) {
        cJSON_AddNumberToObject(f, "death_time", t);
        cJSON_AddStringToObject(f, "death_time_source", src);
    }
    cJSON *np = cJSON_AddArrayToObject(f, "names_pids");
    cJSON_ArrayForEach(e, cp_jpath(r, "log.errors"))
    {
        if (cp_jnum_at(e, "fields.worker_pid", &v))
            add_pid(np, v);
        for (const char *q = cp_jstr_ne_at(e, "fields.worker_pids"); q && *q;) {
            char *end;
            v = strtod(q, &end);
            if (end == q)
                q++;
            else
                add_pid(np, v), q = end;
        }
    }
    cJSON_ArrayForEach(e, cp_jpath(r, "exception.chain"))
    {
        if (cp_jnum_at(e, "worker.pid", &v))
            add_pid(np, v);
    }
    cJSON_ArrayForEach(k, cp_jpath(r, "kernel_log.oom_kills"))
    {
        if (!cJSON_IsTrue(cp_jpath(k, "own_pid")) && !cJSON_IsFalse(cp_jpath(k, "active")) &&
            cp_jnum_at(k, "pid", &v) && v != pid)
            add_pid(np, v);
    }
}

#define HANG_THREADS 64
#define HANG_LOCKS 8

/* A hang's threads of interest: those of its first deadlock, else those waiting for an identified
 * lock, else every thread in a wait (not running, not unknown). Returns how many (tids). */
static int hang_threads(const cJSON *r, double *tids, cJSON *h)
{
    int n = 0;
    const cJSON *t, *dl = cJSON_GetArrayItem(cp_jpath(r, "hang.deadlocks"), 0);
    cJSON *locks = cJSON_CreateArray();
    cJSON_ArrayForEach(t, cp_jpath(dl, "threads"))
    {
        const char *sym = cp_jstr_ne_at(t, "waits_for_mutex_symbol");
        if (n < HANG_THREADS && cp_jnum_at(t, "tid", &tids[n]))
            n++;
        if (sym && cJSON_GetArraySize(locks) < HANG_LOCKS)
            cJSON_AddItemToArray(locks, cJSON_CreateString(sym));
    }
    if (n) {
        cJSON *d = cJSON_AddObjectToObject(h, "deadlock");
        cJSON_AddStringToObject(
            d, "lock", cp_jstr_ne_at(dl, "lock") ? cp_jstr_ne_at(dl, "lock") : "pthread_mutex");
        cJSON_AddItemToObject(d, "locks", locks);
        return n;
    }
    const char *type = NULL;
    cJSON_ArrayForEach(t, cp_jpath(r, "threads"))
    {
        const char *lt = cp_jstr_ne_at(t, "hang_state.lock_type"),
                   *sym = cp_jstr_ne_at(t, "hang_state.mutex_symbol");
        if (!lt || (type && strcmp(type, lt)) || n >= HANG_THREADS ||
            !cp_jnum_at(t, "tid", &tids[n]))
            continue;
        type = lt;
        n++;
        if (sym && cJSON_GetArraySize(locks) < HANG_LOCKS)
            cJSON_AddItemToArray(locks, cJSON_CreateString(sym));
    }
    if (n) {
        cJSON *lw = cJSON_AddObjectToObject(h, "lock_wait");
        cJSON_AddStringToObject(lw, "type", type);
        cJSON_AddItemToObject(lw, "locks", locks);
        cJSON_AddNumberToObject(lw, "threads", n);
        return n;
    }
    cJSON_Delete(locks);
    cJSON_ArrayForEach(t, cp_jpath(r, "threads"))
    {
        const char *st = cp_jstr_ne_at(t, "hang_state.state");
        if (st && strcmp(st, "running") && strcmp(st, "unknown") && n < HANG_THREADS &&
            cp_jnum_at(t, "tid", &tids[n]))
            n++;
    }
    return n;
}

/* A Python frame of the standard library (threading.py, queue.py): where every hang waits. */
static int stdlib_frame(const cJSON *f)
{
    const char *file = cp_jstr_ne_at(f, "file");
    return file && (strstr(file, "/lib/python") || strstr(file, "/lib64/python")) &&
           !strstr(file, "-packages/");
}

/* Where a waiting thread's own code waits: its innermost Python frame outside the standard
 * library (else its innermost), else its first native frame outside the C library and the
 * threading runtime. */
static const cJSON *wait_frame(const cJSON *t, int *python)
{
    const cJSON *f, *py0 = cJSON_GetArrayItem(cp_jpath(t, "python_frames"), 0);
    *python = py0 != NULL;
    cJSON_ArrayForEach(f, cp_jpath(t, "python_frames"))
    {
        if (!stdlib_frame(f))
            return cp_jstr_ne_at(f, "function") ? f : NULL;
    }
    if (py0)
        return cp_jstr_ne_at(py0, "function") ? py0 : NULL;
    cJSON_ArrayForEach(f, cp_jpath(t, "frames"))
    {
        const char *mod = cp_jstr_ne_at(f, "module");
        if (mod && (!strncmp(mod, "libc.so", 7) || !strncmp(mod, "libpthread", 10) ||
                    !strncmp(mod, "ld-linux", 8) || !strncmp(mod, "libstdc++", 9)))
            continue;
        return cp_jstr_ne_at(f, "function") ? f : NULL;
    }
    return NULL;
}

/* A hang (no crashed thread) for a drafted rule: its deadlock's locks or the locks its threads
 * wait for, and the frame most of its waiting threads wait in, with how many do. */
static void facts_hang(cJSON *f, const cJSON *r)
{
    const char *kind = cp_jstr_ne_at(r, "crash_kind");
    if (!kind || strcmp(kind, "hang"))
        return;
    cJSON *h = cJSON_AddObjectToObject(f, "hang");
    double tids[HANG_THREADS];
    int n = hang_threads(r, tids, h), best = 0;
    const cJSON *pick = NULL, *t, *u;
    int pick_py = 0;
    cJSON_ArrayForEach(t, cp_jpath(r, "threads"))
    {
        double tid = -1;
        int py, in = 0, cnt = 0, py2;
        cp_jnum_at(t, "tid", &tid);
        for (int i = 0; i < n; i++)
            in |= tids[i] == tid;
        const cJSON *wf = in ? wait_frame(t, &py) : NULL;
        if (!wf)
            continue;
        cJSON_ArrayForEach(u, cp_jpath(r, "threads"))
        {
            const cJSON *o = wait_frame(u, &py2);
            cnt += o && py2 == py &&
                   !strcmp(cp_jstr_ne_at(o, "function") ? cp_jstr_ne_at(o, "function") : "",
                           cp_jstr_ne_at(wf, "function") ? cp_jstr_ne_at(wf, "function") : "-");
        }
        if (cnt > best) {
            best = cnt;
            pick = wf;
            pick_py = py;
        }
    }
    if (!pick)
        return;
    cJSON *fr = cJSON_AddObjectToObject(h, "frame");
    cJSON_AddStringToObject(fr, "function", cp_jstr_ne_at(pick, "function"));
    /* its file's or module's name (a glob of a name matches a path's basename) */
    const char *where = cp_jstr_ne_at(pick, pick_py ? "file" : "module");
    const char *base = where ? strrchr(where, '/') : NULL;
    cJSON_AddStringToObject(fr, pick_py ? "file" : "module", base ? base + 1 : where ? where : "");
    cJSON_AddBoolToObject(fr, "python", pick_py);
    cJSON_AddNumberToObject(fr, "threads", best);
}

/* The facts a drafted rule starts from (rules add --from-crash): crash kind, signal, the crashed
 * thread's top frames and Python frames, Xid codes, log error categories and texts, a hang's
 * locks and waiting frame (facts_hang); and what orders a job's deaths (facts_death). */
static char *kb_facts(const cJSON *r)
{
    cJSON *f = cJSON_CreateObject(), *e;
    const char *s;
    if ((s = cp_jstr_ne_at(r, "crash_kind")))
        cJSON_AddStringToObject(f, "crash_kind", s);
    if ((s = cp_jstr_ne_at(r, "process.signal.name")))
        cJSON_AddStringToObject(f, "signal", s);
    if ((s = exe_build_id(r)))
        cJSON_AddStringToObject(f, "exe_build_id", s);
    cJSON *fr = cJSON_AddArrayToObject(f, "frames"),
          *py = cJSON_AddArrayToObject(f, "python_frames");
    const cJSON *t;
    cJSON_ArrayForEach(t, cp_jpath(r, "threads"))
    {
        if (!cJSON_IsTrue(cp_jpath(t, "crashed")))
            continue;
        int n = 0;
        cJSON_ArrayForEach(e, cp_jpath(t, "frames"))
        {
            if (n++ >= 8)
                break;
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(
                o, "function", cp_jstr_ne_at(e, "function") ? cp_jstr_ne_at(e, "function") : "");
            cJSON_AddStringToObject(o, "module",
                                    cp_jstr_ne_at(e, "module") ? cp_jstr_ne_at(e, "module") : "");
            cJSON_AddItemToArray(fr, o);
        }
        n = 0;
        cJSON_ArrayForEach(e, cp_jpath(t, "python_frames"))
        {
            if (n++ >= 8)
                break;
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(
                o, "function", cp_jstr_ne_at(e, "function") ? cp_jstr_ne_at(e, "function") : "");
            cJSON_AddStringToObject(o, "file",
                                    cp_jstr_ne_at(e, "file") ? cp_jstr_ne_at(e, "file") : "");
            cJSON_AddItemToArray(py, o);
        }
        break;
    }
    cJSON *x = cJSON_AddArrayToObject(f, "xid");
    cJSON_ArrayForEach(e, cp_jpath(r, "gpu.xid"))
    {
        const cJSON *c = cp_jpath(e, "code");
        if (cJSON_IsNumber(c) && cJSON_GetArraySize(x) < 8)
            cJSON_AddItemToArray(x, cJSON_CreateNumber(c->valuedouble));
    }
    cJSON *le = cJSON_AddArrayToObject(f, "log_errors");
    cJSON_ArrayForEach(e, cp_jpath(r, "log.errors"))
    {
        if (cJSON_GetArraySize(le) >= 5)
            break;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "category",
                                cp_jstr_ne_at(e, "category") ? cp_jstr_ne_at(e, "category") : "");
        char text[400];
        snprintf(text, sizeof(text), "%s",
                 cp_jstr_ne_at(e, "text") ? cp_jstr_ne_at(e, "text") : "");
        cJSON_AddStringToObject(o, "text", text);
        cJSON_AddItemToArray(le, o);
    }
    if ((s = cp_jstr_ne_at(r, "cause.abort_message")))
        cJSON_AddStringToObject(f, "abort_message", s);
    facts_death(f, r);
    facts_hang(f, r);
    char *out = cJSON_PrintUnformatted(f);
    cJSON_Delete(f);
    return out;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- completeness ---- */

#define KB_CAP(v, m) ((v) < 0 ? 0 : (v) > (m) ? (m) : (v))

static long long score_of(const struct kb_completeness *c)
{
    return (long long)(c->analysis != 0) * 100000000000000LL +
           (long long)(c->core != 0) * 10000000000000LL +
           (long long)(c->bundle != 0) * 1000000000000LL +
           (long long)KB_CAP(c->members, 999999) * 1000000LL + KB_CAP(c->threads, 999999);
}

long long kb_completeness(const cJSON *r, struct kb_completeness *c)
{
    memset(c, 0, sizeof(*c));
    const cJSON *a = cp_jpath(r, "analysis");
    const cJSON *aerr = cp_jpath(a, "error");
    c->analysis = cJSON_IsTrue(cp_jpath(a, "complete")) && (!aerr || cJSON_IsNull(aerr));
    c->bundle = cJSON_IsTrue(cp_jpath(r, "bundle.complete"));
    const cJSON *m;
    cJSON_ArrayForEach(m, cp_jpath(r, "members")) if (cJSON_IsBool(cp_jpath(m, "used"))) c->used = 1;
    cJSON_ArrayForEach(m, cp_jpath(r, "members"))
    {
        if (cJSON_IsTrue(cp_jpath(m, "truncated")))
            continue;
        const char *name = cp_jstr_at(m, "name");
        if (name && !strcmp(name, "core"))
            c->core = 1;
        if (!c->used || cJSON_IsTrue(cp_jpath(m, "used")))
            c->members++;
    }
    const cJSON *t;
    cJSON_ArrayForEach(t, cp_jpath(r, "threads")) c->threads +=
        cJSON_GetArraySize(cp_jpath(t, "frames")) > 0;
    return score_of(c);
}

cJSON *kb_completeness_json(const struct kb_completeness *c)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "score", (double)score_of(c));
    cJSON_AddBoolToObject(j, "analysis_complete", c->analysis);
    cJSON_AddBoolToObject(j, "core", c->core);
    cJSON_AddBoolToObject(j, "bundle_complete", c->bundle);
    cJSON_AddNumberToObject(j, "members", c->members);
    cJSON_AddNumberToObject(j, "threads_unwound", c->threads);
    if (c->used)
        cJSON_AddTrueToObject(j, "members_used");
    return j;
}

int kb_completeness_from_json(const cJSON *j, struct kb_completeness *c)
{
    memset(c, 0, sizeof(*c));
    const cJSON *a = cp_jpath(j, "analysis_complete"), *k = cp_jpath(j, "core"),
                *b = cp_jpath(j, "bundle_complete"), *m = cp_jpath(j, "members"),
                *t = cp_jpath(j, "threads_unwound");
    if (!cJSON_IsBool(a) || !cJSON_IsBool(k) || !cJSON_IsBool(b) || !cJSON_IsNumber(m) ||
        !cJSON_IsNumber(t))
        return -1;
    c->analysis = cJSON_IsTrue(a);
    c->core = cJSON_IsTrue(k);
    c->bundle = cJSON_IsTrue(b);
    c->members = (int)m->valuedouble;
    c->threads = (int)t->valuedouble;
    c->used = cJSON_IsTrue(cp_jpath(j, "members_used"));
    return 0;
}

/* x's score against y's: their members compared only when both were counted the same way. */
static long long comparable(const struct kb_completeness *x, const struct kb_completeness *y)
{
    struct kb_completeness c = *x;
    if (x->used != y->used)
        c.members = 0;
    return score_of(&c);
}

void kb_completeness_diff(const struct kb_completeness *x, const struct kb_completeness *y,
                          char *buf, size_t len)
{
    buf[0] = 0;
    if (!x->analysis != !y->analysis)
        snprintf(buf, len, "core analysis %s vs %s", x->analysis ? "complete" : "incomplete",
                 y->analysis ? "complete" : "incomplete");
    else if (!x->core != !y->core)
        snprintf(buf, len, "core %s vs %s", x->core ? "intact" : "missing or cut short",
                 y->core ? "intact" : "missing or cut short");
    else if (!x->bundle != !y->bundle)
        snprintf(buf, len, "bundle %s vs %s", x->bundle ? "complete" : "cut short",
                 y->bundle ? "complete" : "cut short");
    else if (x->used == y->used && KB_CAP(x->members, 999999) != KB_CAP(y->members, 999999))
        snprintf(buf, len, x->used ? "%d vs %d members the analysis used" : "%d vs %d intact members",
                 x->members, y->members);
    else if (KB_CAP(x->threads, 999999) != KB_CAP(y->threads, 999999))
        snprintf(buf, len, "%d vs %d threads unwound", x->threads, y->threads);
}

const char *kb_outcome_name(enum kb_outcome o)
{
    switch (o) {
    case KB_ADDED:
        return "added";
    case KB_REPLACED:
        return "replaced";
    case KB_UPDATED:
        return "updated";
    case KB_KEPT:
        return "kept";
    default:
        return "failed";
    }
}

/* ---- hashes ---- */

static void hex64(uint64_t h, char out[17])
{
    snprintf(out, 17, "%016llx", (unsigned long long)h);
}

int kb_file_xxh64(const char *path, char out[17], long long *size, char *err, size_t errlen)
{
    out[0] = 0;
    *size = -1;
    FILE *f = fopen(path, "rb");
    if (!f) {
        cp_errmsg(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    struct xxh64 s;
    xxh64_init(&s);
    static const size_t CHUNK = 1 << 20;
    char *buf = malloc(CHUNK);
    long long total = 0;
    size_t n;
    while (buf && (n = fread(buf, 1, CHUNK, f)) > 0) {
        xxh64_update(&s, buf, n);
        total += (long long)n;
    }
    const char *bad = !buf ? "out of memory" : ferror(f) ? "read error" : NULL;
    free(buf);
    fclose(f);
    if (bad) {
        cp_errmsg(err, errlen, "%s: %s", path, bad);
        return -1;
    }
    hex64(xxh64_digest(&s), out);
    *size = total;
    return 0;
}

void kb_text_xxh64(const char *str, char out[17])
{
    struct xxh64 s;
    xxh64_init(&s);
    if (str)
        xxh64_update(&s, str, strlen(str));
    hex64(xxh64_digest(&s), out);
}

/* ---- storing ---- */

/* The crash_sources row of one add. crash_id 0: none. 0 or -1. */
static int insert_source(struct kb *kb, int64_t crash_id, const struct kb_source *src,
                         const char *detail, long long score, const char *outcome,
                         const char *reason, const char *error)
{
    struct sqlstmt *st = NULL;
    if (sql_prepare(kb->c,
                    "INSERT INTO crash_sources(crash_id, kind, path, xxh64, size, added,"
                    " added_uid, added_user, completeness, completeness_detail, outcome,"
                    " reason, error) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11,"
                    " ?12, ?13)",
                    &st))
        return -1;
    if (crash_id > 0)
        sql_bind_int(st, 1, crash_id);
    sql_bind_text(st, 2, src && src->kind ? src->kind : "bundle");
    sql_bind_text(st, 3, src ? src->path : NULL);
    sql_bind_text(st, 4, src && src->xxh64 && src->xxh64[0] ? src->xxh64 : NULL);
    if (src && src->size >= 0)
        sql_bind_int(st, 5, src->size);
    sql_bind_real(st, 6, now());
    uid_t uid = getuid();
    sql_bind_int(st, 7, (long long)uid);
    struct passwd pw, *pp = NULL;
    char pwbuf[4096];
    if (getpwuid_r(uid, &pw, pwbuf, sizeof(pwbuf), &pp) == 0 && pp && pp->pw_name)
        sql_bind_text(st, 8, pp->pw_name);
    if (score >= 0)
        sql_bind_int(st, 9, score);
    sql_bind_text(st, 10, detail);
    sql_bind_text(st, 11, outcome);
    sql_bind_text(st, 12, reason && reason[0] ? reason : NULL);
    sql_bind_text(st, 13, error && error[0] ? error : NULL);
    int rc = sql_step(st) == SQL_DONE ? 0 : -1;
    sql_finalize(st);
    return rc;
}

/* The crash an earlier add of path belongs to, 0 when none. */
static int64_t crash_of_path(struct kb *kb, const char *path)
{
    int64_t id = 0;
    struct sqlstmt *q = NULL;
    if (path &&
        !sql_prepare(kb->c,
                     "SELECT crash_id FROM crash_sources WHERE path = ?1 AND crash_id IS NOT NULL"
                     " ORDER BY id DESC LIMIT 1",
                     &q)) {
        sql_bind_text(q, 1, path);
        if (sql_step(q) == SQL_ROW)
            id = sql_col_int(q, 0);
    }
    sql_finalize(q);
    return id;
}

static int record_failure(struct kb *kb, const struct kb_source *src, const char *error,
                          struct kb_result *res)
{
    res->outcome = KB_FAILED;
    res->id = crash_of_path(kb, src ? src->path : NULL);
    snprintf(res->reason, sizeof(res->reason), "%s", error ? error : "?");
    return insert_source(kb, res->id, src, NULL, -1, "failed", NULL, res->reason);
}

static int begin(struct kb *kb, char *err, size_t errlen)
{
    if (sql_begin_write(kb->c)) {
        cp_errmsg(err, errlen, "knowledge base: %s", sql_errmsg(kb->c));
        return -1;
    }
    return 0;
}

int kb_add_failure(struct kb *kb, const struct kb_source *src, const char *error,
                   struct kb_result *res, char *err, size_t errlen)
{
    memset(res, 0, sizeof(*res));
    if (begin(kb, err, errlen))
        return -1;
    return kb_commit_or_rollback(kb, record_failure(kb, src, error, res) == 0, err, errlen);
}

/* The columns a report fills, ?1..?23 and ?25..?26 of both statements of store_crash (?12 is the
 * time added, ?24 the stored record's id). */
#define CRASH_COLS                                                                                 \
    "crash_key, time, host, exe, signal, signature, fingerprint, top_rule, top_title, diagnoses,"  \
    " bundle_path, added, job, rank, local_rank, crash_kind, top_category, top_consequence_of,"    \
    " facts, completeness, completeness_detail, bundle_xxh64, uid, exception_type,"                \
    " exception_message"

/* ---- gpu_faults: what a later crash on the same GPU or host carries as history ---- */

#define KB_FAULTS_PER_CRASH 32

/* An Xid class that says the GPU or its links are at fault, not the program or the driver */
static int hardware_blame(const char *b)
{
    return b && (!strcmp(b, "hardware") || !strcmp(b, "thermal") || !strcmp(b, "bus") ||
                 !strcmp(b, "nvlink"));
}

/* nvidia-smi's UUID for the GPU at pci, NULL when it did not answer for it */
static const char *uuid_of(const cJSON *r, const char *pci)
{
    const cJSON *g;
    cJSON_ArrayForEach(g, cp_jpath(r, "gpu.nvidia_smi.gpus"))
    {
        const char *p = cp_jstr_ne_at(g, "pci");
        if (p && pci && !strcasecmp(p, pci))
            return cp_jstr_ne_at(g, "uuid");
    }
    return NULL;
}

struct fault {
    const char *scope;
    const cJSON *time;
    const char *host, *pci, *uuid;
    const cJSON *code;
    const char *kind, *text;
};

static int insert_fault(struct kb *kb, int64_t crash_id, const struct fault *f)
{
    struct sqlstmt *st = NULL;
    int rc = -1;
    if (!sql_prepare(kb->c,
                     "INSERT INTO gpu_faults(crash_id, scope, time, host, pci, uuid, code,"
                     " kind, text) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                     &st)) {
        sql_bind_int(st, 1, crash_id);
        sql_bind_text(st, 2, f->scope);
        sql_bind_json_num(st, 3, f->time);
        sql_bind_text(st, 4, f->host);
        sql_bind_text(st, 5, f->pci);
        sql_bind_text(st, 6, f->uuid);
        sql_bind_json_num(st, 7, f->code);
        sql_bind_text(st, 8, f->kind);
        sql_bind_text(st, 9, f->text);
        rc = sql_step(st) == SQL_DONE ? 0 : -1;
    }
    sql_finalize(st);
    return rc;
}

/* The record's faults, replaced with the stored report's: its own GPUs' active hardware Xids
 * (scope own: evidence.c decided they name this process or one of its GPUs), and the host's MCE
 * lines and AER lines of a PCIe port (pcieport), which belong to the whole host. */
static int store_faults(struct kb *kb, int64_t crash_id, const cJSON *r)
{
    const struct sql_arg a[] = {SQL_INT_ARG(crash_id)};
    int rc = sql_run(kb->c, "DELETE FROM gpu_faults WHERE crash_id = ?1", a, 1, NULL, 0);
    const char *host = cp_jstr_ne_at(r, "host.hostname");
    int n = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, cp_jpath(r, "gpu.xid"))
    {
        if (rc || n >= KB_FAULTS_PER_CRASH)
            break;
        const char *scope = cp_jstr_ne_at(x, "scope"), *pci = cp_jstr_ne_at(x, "pci");
        if (!scope || strcmp(scope, "own") || cJSON_IsFalse(cp_jpath(x, "active")) ||
            !hardware_blame(cp_jstr_ne_at(x, "blame")))
            continue;
        const cJSON *t = cp_jpath(x, "time");
        struct fault f = {
            "gpu",
            cJSON_IsNumber(t) ? t : cp_jpath(r, "host.time"),
            host,
            pci,
            uuid_of(r, pci),
            cp_jpath(x, "code"),
            cp_jstr_ne_at(x, "name") ? cp_jstr_ne_at(x, "name") : cp_jstr_ne_at(x, "mnemonic"),
            cp_jstr_ne_at(x, "line") ? cp_jstr_ne_at(x, "line") : cp_jstr_ne_at(x, "text")};
        rc = insert_fault(kb, crash_id, &f);
        n++;
    }
    cJSON_ArrayForEach(x, cp_jpath(r, "kernel_log.lines"))
    {
        if (rc || n >= KB_FAULTS_PER_CRASH)
            break;
        const char *cls = cp_jstr_ne_at(x, "class"), *text = cp_jstr_ne_at(x, "text");
        const char *kind = NULL;
        if (cls && !strcmp(cls, "mce"))
            kind = "mce";
        else if (cls && !strcmp(cls, "pcie") && text && strstr(text, "pcieport") &&
                 strstr(text, "AER"))
            kind = "aer";
        if (!kind || !host)
            continue;
        struct fault f = {"host", cp_jpath(x, "time"), host, NULL, NULL, NULL, kind, text};
        rc = insert_fault(kb, crash_id, &f);
        n++;
    }
    return rc;
}

/* ---- kb_add_report ---- */

/* One add in progress: the report, where it came from, and what is decided on the way. */
struct add {
    const cJSON *r;
    const struct kb_source *src;
    char key[512]; /* the crash's identity: host|boot|pid|tid|time */
    struct kb_completeness comp, old;
    long long score;
    char *detail;     /* comp as JSON text */
    const char *hash; /* the source's xxh64, or NULL */
    int64_t id;       /* the stored record, 0: none yet */
    int old_known, same_bundle;
    char old_exe[1024], old_signature[1024], old_build_id[128]; /* the stored identity ("": none) */
};

/* The crash's identity, or 0 when the report has none (no pid and no time). */
static int crash_key(struct add *A)
{
    const cJSON *pid = cp_jpath(A->r, "process.pid"), *tid = cp_jpath(A->r, "process.crashed_tid"),
                *t = cp_jpath(A->r, "host.time");
    if (!cJSON_IsNumber(pid) && !cJSON_IsNumber(t))
        return 0;
    snprintf(A->key, sizeof(A->key), "%s|%s|%.0f|%.0f|%.6f",
             cp_jstr_ne_at(A->r, "host.hostname") ? cp_jstr_ne_at(A->r, "host.hostname") : "",
             cp_jstr_ne_at(A->r, "host.boot_id") ? cp_jstr_ne_at(A->r, "host.boot_id") : "",
             cJSON_IsNumber(pid) ? pid->valuedouble : -1,
             cJSON_IsNumber(tid) ? tid->valuedouble : -1, cJSON_IsNumber(t) ? t->valuedouble : -1);
    return 1;
}

/* The stored record of this crash, if any (under the write lock): its id, completeness and
 * bundle hash. 0 or -1. */
static int find_stored(struct kb *kb, struct add *A)
{
    struct sqlstmt *q = NULL;
    if (sql_prepare(kb->c,
                    "SELECT id, completeness, completeness_detail, bundle_xxh64, exe, signature, facts FROM crashes"
                    " WHERE crash_key = ?1",
                    &q))
        return -1;
    sql_bind_text(q, 1, A->key);
    int rc = sql_step(q);
    if (rc == SQL_ROW) {
        A->id = sql_col_int(q, 0);
        const char *dj = sql_col_text(q, 2);
        cJSON *d = dj ? cJSON_Parse(dj) : NULL;
        if (!sql_col_is_null(q, 1) && !kb_completeness_from_json(d, &A->old)) {
            A->old_known = 1;
        }
        cJSON_Delete(d);
        const char *oh = sql_col_text(q, 3);
        A->same_bundle = A->hash && oh && !strcmp(oh, A->hash);
        snprintf(A->old_exe, sizeof(A->old_exe), "%s", sql_col_text(q, 4) ? sql_col_text(q, 4) : "");
        snprintf(A->old_signature, sizeof(A->old_signature), "%s", sql_col_text(q, 5) ? sql_col_text(q, 5) : "");
        cJSON *facts = sql_col_text(q, 6) ? cJSON_Parse(sql_col_text(q, 6)) : NULL;
        snprintf(A->old_build_id, sizeof(A->old_build_id), "%s",
                 cp_jstr_ne_at(facts, "exe_build_id") ? cp_jstr_ne_at(facts, "exe_build_id") : "");
        cJSON_Delete(facts);
    }
    sql_finalize(q);
    return rc == SQL_ERROR ? -1 : 0;
}

/* Whether another bundle of the same crash (host, boot, pid, tid, time) says the crash was another
 * program: its executable, that executable's build-id, or (against a stored analysis that was
 * complete) its signature differ from the stored record's. A bundle from a ticket can be forged,
 * and a forged copy may well look more complete: it never replaces the record whose identity it
 * changes. The difference goes into why; 0 when the identity holds. */
static int identity_changed(const struct add *A, char *why, size_t len)
{
    const char *exe = cp_jstr_ne_at(A->r, "process.exe"), *sig = cp_jstr_ne_at(A->r, "signature");
    const char *bid = exe_build_id(A->r);
    if (A->old_exe[0] && exe && strcmp(A->old_exe, exe))
        snprintf(why, len, "executable %.200s vs %.200s", exe, A->old_exe);
    else if (A->old_build_id[0] && bid && strcmp(A->old_build_id, bid))
        snprintf(why, len, "executable build-id %.64s vs %.64s", bid, A->old_build_id);
    else if (A->old_known && A->old.analysis && A->old_signature[0] && sig && strcmp(A->old_signature, sig))
        snprintf(why, len, "signature %.200s vs %.200s", sig, A->old_signature);
    else
        return 0;
    return 1;
}

/* A replacement that would change the crash's identity: kept, refused, and why (res). */
static int refused(const struct add *A, struct kb_result *res)
{
    char why[280];
    if (!identity_changed(A, why, sizeof(why)))
        return 0;
    res->outcome = KB_KEPT;
    res->refused = 1;
    snprintf(res->reason, sizeof(res->reason), "it is another program's crash: %s", why);
    return 1;
}

/* Whether the report replaces the stored record (the "keep the more complete record" rule): 1
 * store it, 0 keep what is stored; res->outcome and res->reason say which and why. */
static int decide(struct add *A, struct kb_result *res)
{
    if (!A->id) {
        res->outcome = KB_ADDED;
        return 1;
    }
    if (!A->old_known) {
        res->legacy = 1;
        /* a record from before completeness scores: only a complete analysis of a complete
         * bundle replaces it */
        res->outcome = A->comp.analysis && A->comp.bundle ? KB_REPLACED : KB_KEPT;
        if (res->outcome == KB_REPLACED && refused(A, res)) {
            res->legacy = 0;
            return 0;
        }
        return res->outcome == KB_REPLACED;
    }
    long long mine = comparable(&A->comp, &A->old), theirs = comparable(&A->old, &A->comp);
    if (A->same_bundle && mine >= theirs) {
        res->outcome = KB_UPDATED;
        snprintf(res->reason, sizeof(res->reason), "the same bundle again");
        return 1;
    }
    if (mine > theirs) {
        if (refused(A, res))
            return 0;
        res->outcome = KB_REPLACED;
        kb_completeness_diff(&A->comp, &A->old, res->reason, sizeof(res->reason));
        return 1;
    }
    res->outcome = KB_KEPT;
    kb_completeness_diff(&A->old, &A->comp, res->reason, sizeof(res->reason));
    return 0;
}

/* Binds the report's columns (CRASH_COLS: ?1..?23, ?25, ?26) to st. */
static void bind_crash(struct sqlstmt *st, const struct add *A, const char *djson,
                       const char *facts)
{
    const cJSON *r = A->r, *ds = cp_jpath(r, "diagnoses");
    const cJSON *top = cJSON_IsArray(ds) ? cJSON_GetArrayItem(ds, 0) : NULL;
    int is_bundle = !A->src || !A->src->kind || !strcmp(A->src->kind, "bundle");
    char job[256];
    int rank, lrank;
    cp_report_job(r, job, sizeof(job), &rank, &lrank);
    sql_bind_text(st, 1, A->key);
    sql_bind_json_num(st, 2, cp_jpath(r, "host.time"));
    sql_bind_text(st, 3, cp_jstr_ne_at(r, "host.hostname"));
    sql_bind_text(st, 4, cp_jstr_ne_at(r, "process.exe"));
    sql_bind_text(st, 5, cp_jstr_ne_at(r, "process.signal.name"));
    sql_bind_text(st, 6, cp_jstr_ne_at(r, "signature"));
    sql_bind_text(st, 7, cp_jstr_ne_at(r, "fingerprint"));
    sql_bind_text(st, 8, cp_jstr_ne_at(top, "rule"));
    sql_bind_text(st, 9, cp_jstr_ne_at(top, "title"));
    sql_bind_text(st, 10, djson ? djson : "[]");
    sql_bind_text(st, 11, is_bundle && A->src ? A->src->path : NULL);
    if (!A->id)
        sql_bind_real(st, 12, now());
    sql_bind_text(st, 13, job[0] ? job : NULL);
    if (rank >= 0)
        sql_bind_int(st, 14, rank);
    if (lrank >= 0)
        sql_bind_int(st, 15, lrank);
    sql_bind_text(st, 16, cp_jstr_ne_at(r, "crash_kind"));
    sql_bind_text(st, 17, cp_jstr_ne_at(top, "category"));
    sql_bind_text(st, 18, cp_jstr_ne_at(top, "consequence_of"));
    sql_bind_text(st, 19, facts);
    sql_bind_int(st, 20, A->score);
    sql_bind_text(st, 21, A->detail);
    sql_bind_text(st, 22, A->hash);
    double uid = -1; /* whose crash: the process's uid, as the manifest recorded it */
    if (cp_jnum_at(r, "process.uid", &uid) && uid >= 0 && uid <= 4294967294.0)
        sql_bind_int(st, 23, (long long)uid);
    if (A->id)
        sql_bind_int(st, 24, A->id);
    /* the Python exception: its type, and its message's first line (at most 1000 bytes) */
    sql_bind_text(st, 25, cp_jstr_ne_at(r, "exception.type"));
    const char *msg = cp_jstr_ne_at(r, "exception.message");
    char first[1001];
    if (msg) {
        size_t l = strcspn(msg, "\n");
        if (l > sizeof(first) - 1)
            l = sizeof(first) - 1;
        while (l > 0 && l < strlen(msg) && ((unsigned char)msg[l] & 0xc0) == 0x80)
            l--; /* never inside a UTF-8 sequence */
        memcpy(first, msg, l);
        first[l] = 0;
    }
    sql_bind_text(st, 26, msg && first[0] ? first : NULL);
}

/* Writes the report into the record (a new one, or the stored one it replaces), its GPU faults,
 * and marks the analysis stored until now as superseded. 0 or -1. */
static int store_crash(struct kb *kb, struct add *A, enum kb_outcome outcome)
{
    const cJSON *ds = cp_jpath(A->r, "diagnoses");
    char *djson = cJSON_IsArray(ds) ? cJSON_PrintUnformatted(ds) : NULL;
    char *facts = kb_facts(A->r);
    const char *sql =
        A->id
            ? "UPDATE crashes SET crash_key=?1, time=?2, host=?3, exe=?4, signal=?5, signature=?6,"
              " fingerprint=?7, top_rule=?8, top_title=?9, diagnoses=?10, bundle_path=?11, job=?13,"
              " rank=?14, local_rank=?15, crash_kind=?16, top_category=?17, top_consequence_of=?18,"
              " facts=?19, completeness=?20, completeness_detail=?21, bundle_xxh64=?22, uid=?23,"
              " exception_type=?25, exception_message=?26 WHERE id=?24 RETURNING id"
            : "INSERT INTO crashes(" CRASH_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9,"
              " ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?25, ?26)"
              " RETURNING id";
    struct sqlstmt *st = NULL;
    int rc = sql_prepare(kb->c, sql, &st);
    if (!rc) {
        bind_crash(st, A, djson, facts);
        rc = sql_step(st) == SQL_ROW ? 0 : -1;
        if (!rc)
            A->id = sql_col_int(st, 0);
    }
    sql_finalize(st);
    free(djson);
    free(facts);
    if (!rc)
        rc = store_faults(kb, A->id, A->r);
    if (!rc && outcome != KB_ADDED) { /* the analysis that was stored until now is no longer */
        const struct sql_arg a[] = {SQL_INT_ARG(A->id)};
        rc = sql_run(kb->c,
                     "UPDATE crash_sources SET outcome = 'superseded' WHERE crash_id = ?1"
                     " AND outcome IN ('added', 'replaced', 'updated')",
                     a, 1, NULL, 0);
    }
    return rc;
}

/* The source row's reason, whole: it outlives the outcome (a replacing add is superseded later). */
static void source_reason(const struct kb_result *res, char *why, size_t len)
{
    if (res->legacy)
        snprintf(why, len, "%s",
                 res->outcome == KB_REPLACED
                     ? "the stored record predated completeness scores;"
                       " this was a complete bundle with a complete analysis"
                     : "the stored record predates completeness scores");
    else if (res->outcome == KB_REPLACED)
        snprintf(why, len, "more complete than the stored record: %s", res->reason);
    else if (res->outcome == KB_UPDATED)
        snprintf(why, len, "the same bundle again");
    else if (res->outcome == KB_KEPT && res->refused)
        snprintf(why, len, "refused: more complete, but %s", res->reason);
    else if (res->outcome == KB_KEPT)
        snprintf(why, len,
                 res->reason[0] ? "the stored record is more complete: %s"
                                : "equally complete: the stored record stays%s",
                 res->reason);
    else
        why[0] = 0;
}

int kb_add_report(struct kb *kb, const cJSON *r, const struct kb_source *src, struct kb_result *res,
                  char *err, size_t errlen)
{
    memset(res, 0, sizeof(*res));
    struct add A = {.r = r, .src = src};
    int has_identity = crash_key(&A);
    A.score = kb_completeness(r, &A.comp);
    cJSON *cj = kb_completeness_json(&A.comp);
    A.detail = cJSON_PrintUnformatted(cj);
    cJSON_Delete(cj);
    A.hash = src && src->xxh64 && src->xxh64[0] ? src->xxh64 : NULL;
    if (begin(kb, err, errlen)) {
        free(A.detail);
        return -1;
    }
    int rc;
    if (!has_identity) {
        rc = record_failure(kb, src,
                            "no crash identity in the report (no pid and no time: the manifest"
                            " is unreadable)",
                            res);
    } else {
        rc = find_stored(kb, &A);
        if (!rc && decide(&A, res))
            rc = store_crash(kb, &A, res->outcome);
        res->id = A.id;
        if (!rc) {
            char why[400];
            source_reason(res, why, sizeof(why));
            rc = insert_source(kb, A.id, src, A.detail, A.score, kb_outcome_name(res->outcome), why,
                               cp_jstr_ne_at(r, "analysis.error"));
        }
    }
    free(A.detail);
    return kb_commit_or_rollback(kb, rc == 0, err, errlen);
}

int kb_put_rule(struct kb *kb, const cJSON *rule, char *err, size_t errlen)
{
    const char *rid = cp_jstr_ne_at(rule, "id");
    if (!rid) {
        cp_errmsg(err, errlen, "rule without an id");
        return -1;
    }
    cJSON *copy = cJSON_Duplicate(rule, 1);
    cJSON_DeleteItemFromObjectCaseSensitive(copy, "source");
    cJSON_DeleteItemFromObjectCaseSensitive(copy, "overrides");
    char *js = cJSON_PrintUnformatted(copy);
    cJSON_Delete(copy);
    if (begin(kb, err, errlen)) {
        free(js);
        return -1;
    }
    const struct sql_arg a[] = {SQL_TEXT_ARG(rid), SQL_TEXT_ARG(js), SQL_REAL_ARG(now())};
    int rc = sql_run(kb->c,
                     "INSERT INTO user_rules(id, json, added) VALUES (?1, ?2, ?3)"
                     " ON CONFLICT(id) DO UPDATE SET json = excluded.json, added = excluded.added",
                     a, 3, NULL, 0);
    free(js);
    return kb_commit_or_rollback(kb, rc == 0, err, errlen);
}
