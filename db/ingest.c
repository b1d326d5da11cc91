/* ingest.c - storing analyzed crashes and user rules in the knowledge base (see kb.h). */
#include "jpath.h"
#include "kb.h"
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

static int env_int(const cJSON *env, const char *a, const char *b)
{
    const char *s = cp_jstr_ne_at(env, a);
    if (!s && b)
        s = cp_jstr_ne_at(env, b);
    if (!s)
        return -1;
    char *end;
    long v = strtol(s, &end, 10);
    return *end || v < 0 || v > 1000000000 ? -1 : (int)v;
}

void kb_job_of(const cJSON *report, char *job, size_t joblen, int *rank, int *local_rank)
{
    const cJSON *env = cp_jpath(report, "process.env");
    const char *s;
    job[0] = 0;
    if ((s = cp_jstr_ne_at(env, "SLURM_JOB_ID")))
        snprintf(job, joblen, "slurm:%s", s);
    else if ((s = cp_jstr_ne_at(env, "TORCHELASTIC_RUN_ID")))
        snprintf(job, joblen, "torchelastic:%s", s);
    else if ((s = cp_jstr_ne_at(report, "process.death.job")) ||
             (s = cp_jstr_ne_at(env, "CRASHPACK_JOB_ID"))) {
        /* crashpack run's id (the death's, or the environment's): "slurm-ID[.STEP]" and
         * "torchelastic-ID" when it came from the scheduler, so that a bundle without the
         * environment (a reported exit, an OOM kill) joins the same job as one with it */
        if (!strncmp(s, "slurm-", 6))
            snprintf(job, joblen, "slurm:%.*s", (int)strcspn(s + 6, "."), s + 6);
        else if (!strncmp(s, "torchelastic-", 13))
            snprintf(job, joblen, "torchelastic:%s", s + 13);
        else
            snprintf(job, joblen, "run:%s", s);
    }
    else if ((s = cp_jstr_ne_at(env, "MASTER_ADDR")) && cp_jstr_ne_at(env, "MASTER_PORT"))
        snprintf(job, joblen, "master:%s:%s", s, cp_jstr_ne_at(env, "MASTER_PORT"));
    *rank = env_int(env, "RANK", "SLURM_PROCID");
    *local_rank = env_int(env, "LOCAL_RANK", "SLURM_LOCALID");
}

static void bind_str(sqlite3_stmt *st, int i, const char *s)
{
    if (s)
        sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, i);
}

static void bind_num(sqlite3_stmt *st, int i, const cJSON *v)
{
    if (cJSON_IsNumber(v))
        sqlite3_bind_double(st, i, v->valuedouble);
    else
        sqlite3_bind_null(st, i);
}

/* The facts a drafted rule starts from (rules add --from-crash): crash kind, signal, the crashed
 * thread's top frames and Python frames, Xid codes, log error categories and texts. */
static char *kb_facts(const cJSON *r)
{
    cJSON *f = cJSON_CreateObject(), *e;
    const char *s;
    if ((s = cp_jstr_ne_at(r, "crash_kind")))
        cJSON_AddStringToObject(f, "crash_kind", s);
    if ((s = cp_jstr_ne_at(r, "process.signal.name")))
        cJSON_AddStringToObject(f, "signal", s);
    cJSON *fr = cJSON_AddArrayToObject(f, "frames"), *py = cJSON_AddArrayToObject(f, "python_frames");
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
    return (long long)(c->analysis != 0) * 100000000000000LL + (long long)(c->core != 0) * 10000000000000LL +
           (long long)(c->bundle != 0) * 1000000000000LL + (long long)KB_CAP(c->members, 999999) * 1000000LL +
           KB_CAP(c->threads, 999999);
}

long long kb_completeness(const cJSON *r, struct kb_completeness *c)
{
    memset(c, 0, sizeof(*c));
    const cJSON *a = cp_jpath(r, "analysis");
    const cJSON *aerr = cp_jpath(a, "error");
    c->analysis = cJSON_IsTrue(cp_jpath(a, "complete")) && (!aerr || cJSON_IsNull(aerr));
    c->bundle = cJSON_IsTrue(cp_jpath(r, "bundle.complete"));
    const cJSON *m;
    cJSON_ArrayForEach(m, cp_jpath(r, "members"))
    {
        if (cJSON_IsTrue(cp_jpath(m, "truncated")))
            continue;
        c->members++;
        const char *name = cp_jstr_at(m, "name");
        if (name && !strcmp(name, "core"))
            c->core = 1;
    }
    const cJSON *t;
    cJSON_ArrayForEach(t, cp_jpath(r, "threads")) c->threads += cJSON_GetArraySize(cp_jpath(t, "frames")) > 0;
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
    return j;
}

int kb_completeness_from_json(const cJSON *j, struct kb_completeness *c)
{
    memset(c, 0, sizeof(*c));
    const cJSON *a = cp_jpath(j, "analysis_complete"), *k = cp_jpath(j, "core"),
                *b = cp_jpath(j, "bundle_complete"), *m = cp_jpath(j, "members"),
                *t = cp_jpath(j, "threads_unwound");
    if (!cJSON_IsBool(a) || !cJSON_IsBool(k) || !cJSON_IsBool(b) || !cJSON_IsNumber(m) || !cJSON_IsNumber(t))
        return -1;
    c->analysis = cJSON_IsTrue(a);
    c->core = cJSON_IsTrue(k);
    c->bundle = cJSON_IsTrue(b);
    c->members = (int)m->valuedouble;
    c->threads = (int)t->valuedouble;
    return 0;
}

void kb_completeness_diff(const struct kb_completeness *x, const struct kb_completeness *y, char *buf,
                          size_t len)
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
    else if (KB_CAP(x->members, 999999) != KB_CAP(y->members, 999999))
        snprintf(buf, len, "%d vs %d intact members", x->members, y->members);
    else if (KB_CAP(x->threads, 999999) != KB_CAP(y->threads, 999999))
        snprintf(buf, len, "%d vs %d threads unwound", x->threads, y->threads);
}

const char *kb_outcome_name(enum kb_outcome o)
{
    switch (o) {
    case KB_ADDED: return "added";
    case KB_REPLACED: return "replaced";
    case KB_UPDATED: return "updated";
    case KB_KEPT: return "kept";
    default: return "failed";
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

/* The crash_sources row of one add. crash_id 0: none. */
static int insert_source(sqlite3 *db, int64_t crash_id, const struct kb_source *src, const char *detail,
                         long long score, const char *outcome, const char *reason, const char *error)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db,
                                "INSERT INTO crash_sources(crash_id, kind, path, xxh64, size, added,"
                                " added_uid, added_user, completeness, completeness_detail, outcome,"
                                " reason, error) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11,"
                                " ?12, ?13)",
                                -1, &st, NULL);
    if (rc != SQLITE_OK)
        return rc;
    if (crash_id > 0)
        sqlite3_bind_int64(st, 1, crash_id);
    bind_str(st, 2, src && src->kind ? src->kind : "bundle");
    bind_str(st, 3, src ? src->path : NULL);
    bind_str(st, 4, src && src->xxh64 && src->xxh64[0] ? src->xxh64 : NULL);
    if (src && src->size >= 0)
        sqlite3_bind_int64(st, 5, src->size);
    sqlite3_bind_double(st, 6, now());
    uid_t uid = getuid();
    sqlite3_bind_int64(st, 7, (sqlite3_int64)uid);
    struct passwd pw, *pp = NULL;
    char pwbuf[4096];
    if (getpwuid_r(uid, &pw, pwbuf, sizeof(pwbuf), &pp) == 0 && pp && pp->pw_name)
        bind_str(st, 8, pp->pw_name);
    if (score >= 0)
        sqlite3_bind_int64(st, 9, score);
    bind_str(st, 10, detail);
    bind_str(st, 11, outcome);
    bind_str(st, 12, reason && reason[0] ? reason : NULL);
    bind_str(st, 13, error && error[0] ? error : NULL);
    rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
    sqlite3_finalize(st);
    return rc;
}

/* The crash an earlier add of path belongs to, 0 when none. */
static int64_t crash_of_path(sqlite3 *db, const char *path)
{
    int64_t id = 0;
    sqlite3_stmt *q = NULL;
    if (path && sqlite3_prepare_v2(db,
                                   "SELECT crash_id FROM crash_sources WHERE path = ?1 AND crash_id IS NOT NULL"
                                   " ORDER BY id DESC LIMIT 1",
                                   -1, &q, NULL) == SQLITE_OK) {
        sqlite3_bind_text(q, 1, path, -1, SQLITE_TRANSIENT);
        if (sqlite3_step(q) == SQLITE_ROW)
            id = sqlite3_column_int64(q, 0);
    }
    sqlite3_finalize(q);
    return id;
}

static int commit_or_rollback(sqlite3 *db, int rc, char *err, size_t errlen)
{
    if (rc != SQLITE_OK || sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        cp_errmsg(err, errlen, "knowledge base: %s", sqlite3_errmsg(db));
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        return -1;
    }
    return 0;
}

static int record_failure(sqlite3 *db, const struct kb_source *src, const char *error, struct kb_result *res)
{
    res->outcome = KB_FAILED;
    res->id = crash_of_path(db, src ? src->path : NULL);
    snprintf(res->reason, sizeof(res->reason), "%s", error ? error : "?");
    return insert_source(db, res->id, src, NULL, -1, "failed", NULL, res->reason);
}

int kb_add_failure(sqlite3 *db, const struct kb_source *src, const char *error, struct kb_result *res,
                   char *err, size_t errlen)
{
    memset(res, 0, sizeof(*res));
    if (kb_exec_retry(db, "BEGIN IMMEDIATE", NULL) != SQLITE_OK) {
        cp_errmsg(err, errlen, "knowledge base: %s", sqlite3_errmsg(db));
        return -1;
    }
    return commit_or_rollback(db, record_failure(db, src, error, res), err, errlen);
}

/* The columns a report fills, ?1..?19 of both statements below (?12 is the time added). */
#define CRASH_COLS                                                                                 \
    "crash_key, time, host, exe, signal, signature, fingerprint, top_rule, top_title, diagnoses,"   \
    " bundle_path, added, job, rank, local_rank, crash_kind, top_category, top_consequence_of,"     \
    " facts, completeness, completeness_detail, bundle_xxh64"

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

static int insert_fault(sqlite3 *db, int64_t crash_id, const char *scope, const cJSON *time,
                        const char *host, const char *pci, const char *uuid, const cJSON *code,
                        const char *kind, const char *text)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db,
                                "INSERT INTO gpu_faults(crash_id, scope, time, host, pci, uuid, code,"
                                " kind, text) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                                -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, crash_id);
        bind_str(st, 2, scope);
        bind_num(st, 3, time);
        bind_str(st, 4, host);
        bind_str(st, 5, pci);
        bind_str(st, 6, uuid);
        bind_num(st, 7, code);
        bind_str(st, 8, kind);
        bind_str(st, 9, text);
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
    }
    sqlite3_finalize(st);
    return rc;
}

/* The record's faults, replaced with the stored report's: its own GPUs' active hardware Xids
 * (scope own: evidence.c decided they name this process or one of its GPUs), and the host's MCE lines
 * and AER lines of a PCIe port (pcieport), which belong to the whole host. */
static int store_faults(sqlite3 *db, int64_t crash_id, const cJSON *r)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, "DELETE FROM gpu_faults WHERE crash_id = ?1", -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, crash_id);
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
    }
    sqlite3_finalize(st);
    const char *host = cp_jstr_ne_at(r, "host.hostname");
    int n = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, cp_jpath(r, "gpu.xid"))
    {
        if (rc != SQLITE_OK || n >= KB_FAULTS_PER_CRASH)
            break;
        const char *scope = cp_jstr_ne_at(x, "scope"), *pci = cp_jstr_ne_at(x, "pci");
        if (!scope || strcmp(scope, "own") ||
            cJSON_IsFalse(cp_jpath(x, "active")) || !hardware_blame(cp_jstr_ne_at(x, "blame")))
            continue;
        const cJSON *t = cp_jpath(x, "time");
        const char *kind = cp_jstr_ne_at(x, "name") ? cp_jstr_ne_at(x, "name") : cp_jstr_ne_at(x, "mnemonic");
        const char *text = cp_jstr_ne_at(x, "line") ? cp_jstr_ne_at(x, "line") : cp_jstr_ne_at(x, "text");
        rc = insert_fault(db, crash_id, "gpu", cJSON_IsNumber(t) ? t : cp_jpath(r, "host.time"), host,
                          pci, uuid_of(r, pci), cp_jpath(x, "code"), kind, text);
        n++;
    }
    cJSON_ArrayForEach(x, cp_jpath(r, "kernel_log.lines"))
    {
        if (rc != SQLITE_OK || n >= KB_FAULTS_PER_CRASH)
            break;
        const char *cls = cp_jstr_ne_at(x, "class"), *text = cp_jstr_ne_at(x, "text");
        const char *kind = NULL;
        if (cls && !strcmp(cls, "mce"))
            kind = "mce";
        else if (cls && !strcmp(cls, "pcie") && text && strstr(text, "pcieport") && strstr(text, "AER"))
            kind = "aer";
        if (!kind || !host)
            continue;
        rc = insert_fault(db, crash_id, "host", cp_jpath(x, "time"), host, NULL, NULL, NULL, kind, text);
        n++;
    }
    return rc;
}

int kb_add_report(sqlite3 *db, const cJSON *r, const struct kb_source *src, struct kb_result *res,
                  char *err, size_t errlen)
{
    memset(res, 0, sizeof(*res));
    char key[512], job[256];
    const cJSON *pid = cp_jpath(r, "process.pid"), *tid = cp_jpath(r, "process.crashed_tid"),
                *t = cp_jpath(r, "host.time");
    int has_identity = cJSON_IsNumber(pid) || cJSON_IsNumber(t);
    if (has_identity)
        snprintf(key, sizeof(key), "%s|%s|%.0f|%.0f|%.6f",
                 cp_jstr_ne_at(r, "host.hostname") ? cp_jstr_ne_at(r, "host.hostname") : "",
                 cp_jstr_ne_at(r, "host.boot_id") ? cp_jstr_ne_at(r, "host.boot_id") : "",
                 cJSON_IsNumber(pid) ? pid->valuedouble : -1,
                 cJSON_IsNumber(tid) ? tid->valuedouble : -1,
                 cJSON_IsNumber(t) ? t->valuedouble : -1);
    struct kb_completeness comp, old;
    long long score = kb_completeness(r, &comp);
    cJSON *cj = kb_completeness_json(&comp);
    char *detail = cJSON_PrintUnformatted(cj);
    cJSON_Delete(cj);
    const char *aerr = cp_jstr_ne_at(r, "analysis.error");
    const char *hash = src && src->xxh64 && src->xxh64[0] ? src->xxh64 : NULL;

    if (kb_exec_retry(db, "BEGIN IMMEDIATE", NULL) != SQLITE_OK) {
        cp_errmsg(err, errlen, "knowledge base: %s", sqlite3_errmsg(db));
        free(detail);
        return -1;
    }
    int rc;
    if (!has_identity) {
        rc = record_failure(db, src, "no crash identity in the report (no pid and no time: the manifest"
                            " is unreadable)", res);
        free(detail);
        return commit_or_rollback(db, rc, err, errlen);
    }

    /* the stored record of this crash, if any, under the write lock */
    sqlite3_stmt *q = NULL;
    int64_t id = 0;
    int old_known = 0, same_bundle = 0;
    long long old_score = -1;
    rc = sqlite3_prepare_v2(db,
                            "SELECT id, completeness, completeness_detail, bundle_xxh64 FROM crashes"
                            " WHERE crash_key = ?1",
                            -1, &q, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(q, 1, key, -1, SQLITE_TRANSIENT);
        rc = sqlite3_step(q);
        if (rc == SQLITE_ROW) {
            id = sqlite3_column_int64(q, 0);
            const char *dj = (const char *)sqlite3_column_text(q, 2);
            cJSON *d = dj ? cJSON_Parse(dj) : NULL;
            if (sqlite3_column_type(q, 1) != SQLITE_NULL && !kb_completeness_from_json(d, &old)) {
                old_known = 1;
                old_score = score_of(&old);
            }
            cJSON_Delete(d);
            const char *oh = (const char *)sqlite3_column_text(q, 3);
            same_bundle = hash && oh && !strcmp(oh, hash);
        }
        rc = rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
    }
    sqlite3_finalize(q);

    int store = 1; /* write the report's fields into the record */
    if (rc != SQLITE_OK) {
        store = 0;
    } else if (!id) {
        res->outcome = KB_ADDED;
    } else if (!old_known) {
        res->legacy = 1;
        /* a record from before completeness scores: only a complete analysis of a complete
         * bundle replaces it */
        if (comp.analysis && comp.bundle) {
            res->outcome = KB_REPLACED;
        } else {
            res->outcome = KB_KEPT;
            store = 0;
        }
    } else if (same_bundle && score >= old_score) {
        res->outcome = KB_UPDATED;
        snprintf(res->reason, sizeof(res->reason), "the same bundle again");
    } else if (score > old_score) {
        res->outcome = KB_REPLACED;
        kb_completeness_diff(&comp, &old, res->reason, sizeof(res->reason));
    } else {
        res->outcome = KB_KEPT;
        store = 0;
        kb_completeness_diff(&old, &comp, res->reason, sizeof(res->reason));
    }

    if (rc == SQLITE_OK && store) {
        int rank, lrank;
        kb_job_of(r, job, sizeof(job), &rank, &lrank);
        const cJSON *ds = cp_jpath(r, "diagnoses");
        const cJSON *top = cJSON_IsArray(ds) ? cJSON_GetArrayItem(ds, 0) : NULL;
        char *djson = cJSON_IsArray(ds) ? cJSON_PrintUnformatted(ds) : NULL;
        char *facts = kb_facts(r);
        const char *sql =
            id ? "UPDATE crashes SET crash_key=?1, time=?2, host=?3, exe=?4, signal=?5, signature=?6,"
                 " fingerprint=?7, top_rule=?8, top_title=?9, diagnoses=?10, bundle_path=?11, job=?13,"
                 " rank=?14, local_rank=?15, crash_kind=?16, top_category=?17, top_consequence_of=?18,"
                 " facts=?19, completeness=?20, completeness_detail=?21, bundle_xxh64=?22"
                 " WHERE id=?23 RETURNING id"
               : "INSERT INTO crashes(" CRASH_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9,"
                 " ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22) RETURNING id";
        sqlite3_stmt *st = NULL;
        rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
        if (rc == SQLITE_OK) {
            int is_bundle = !src || !src->kind || !strcmp(src->kind, "bundle");
            bind_str(st, 1, key);
            bind_num(st, 2, t);
            bind_str(st, 3, cp_jstr_ne_at(r, "host.hostname"));
            bind_str(st, 4, cp_jstr_ne_at(r, "process.exe"));
            bind_str(st, 5, cp_jstr_ne_at(r, "process.signal.name"));
            bind_str(st, 6, cp_jstr_ne_at(r, "signature"));
            bind_str(st, 7, cp_jstr_ne_at(r, "fingerprint"));
            bind_str(st, 8, cp_jstr_ne_at(top, "rule"));
            bind_str(st, 9, cp_jstr_ne_at(top, "title"));
            bind_str(st, 10, djson ? djson : "[]");
            bind_str(st, 11, is_bundle && src ? src->path : NULL);
            if (!id)
                sqlite3_bind_double(st, 12, now());
            bind_str(st, 13, job[0] ? job : NULL);
            if (rank >= 0)
                sqlite3_bind_int(st, 14, rank);
            if (lrank >= 0)
                sqlite3_bind_int(st, 15, lrank);
            bind_str(st, 16, cp_jstr_ne_at(r, "crash_kind"));
            bind_str(st, 17, cp_jstr_ne_at(top, "category"));
            bind_str(st, 18, cp_jstr_ne_at(top, "consequence_of"));
            bind_str(st, 19, facts);
            sqlite3_bind_int64(st, 20, score);
            bind_str(st, 21, detail);
            bind_str(st, 22, hash);
            if (id)
                sqlite3_bind_int64(st, 23, id);
            rc = sqlite3_step(st);
            if (rc == SQLITE_ROW)
                id = sqlite3_column_int64(st, 0);
            rc = rc == SQLITE_ROW ? SQLITE_OK : rc;
        }
        sqlite3_finalize(st);
        free(djson);
        free(facts);
        if (rc == SQLITE_OK)
            rc = store_faults(db, id, r);
        /* the analysis that was stored until now is no longer */
        if (rc == SQLITE_OK && res->outcome != KB_ADDED) {
            rc = sqlite3_prepare_v2(db,
                                    "UPDATE crash_sources SET outcome = 'superseded' WHERE crash_id = ?1"
                                    " AND outcome IN ('added', 'replaced', 'updated')",
                                    -1, &st, NULL);
            if (rc == SQLITE_OK) {
                sqlite3_bind_int64(st, 1, id);
                rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
            }
            sqlite3_finalize(st);
        }
    }
    res->id = id;
    if (rc == SQLITE_OK) {
        /* the source row's reason, whole: it outlives the outcome (a replacing add is superseded
         * later) */
        char why[400];
        if (res->legacy)
            snprintf(why, sizeof(why), "%s", res->outcome == KB_REPLACED
                                                 ? "the stored record predated completeness scores;"
                                                   " this was a complete bundle with a complete analysis"
                                                 : "the stored record predates completeness scores");
        else if (res->outcome == KB_REPLACED)
            snprintf(why, sizeof(why), "more complete than the stored record: %s", res->reason);
        else if (res->outcome == KB_UPDATED)
            snprintf(why, sizeof(why), "the same bundle again");
        else if (res->outcome == KB_KEPT)
            snprintf(why, sizeof(why), res->reason[0] ? "the stored record is more complete: %s"
                                                      : "equally complete: the stored record stays%s",
                     res->reason);
        else
            why[0] = 0;
        rc = insert_source(db, id, src, detail, score, kb_outcome_name(res->outcome), why, aerr);
    }
    free(detail);
    return commit_or_rollback(db, rc, err, errlen);
}

int kb_put_rule(sqlite3 *db, const cJSON *rule, char *err, size_t errlen)
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
    sqlite3_stmt *st = NULL;
    int rc = kb_exec_retry(db, "BEGIN IMMEDIATE", NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO user_rules(id, json, added) VALUES (?1, ?2, ?3)",
                                -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(st, 1, rid, -1, SQLITE_TRANSIENT);
        bind_str(st, 2, js);
        sqlite3_bind_double(st, 3, now());
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
    }
    sqlite3_finalize(st);
    free(js);
    if (rc != SQLITE_OK || sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        cp_errmsg(err, errlen, "knowledge base: %s", sqlite3_errmsg(db));
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        return -1;
    }
    return 0;
}
