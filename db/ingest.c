/* ingest.c - storing analyzed crashes and user rules in the knowledge base (see kb.h). */
#include "jpath.h"
#include "kb.h"
#include "errmsg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

int kb_add_report(sqlite3 *db, const cJSON *r, const char *bundle_path, int64_t *id, int *added,
                  char *err, size_t errlen)
{
    char key[512], job[256];
    const cJSON *pid = cp_jpath(r, "process.pid"), *tid = cp_jpath(r, "process.crashed_tid"),
                *t = cp_jpath(r, "host.time");
    if (!cJSON_IsNumber(pid) && !cJSON_IsNumber(t)) {
        /* no identity in the report: the bundle file itself is the identity */
        snprintf(key, sizeof(key), "path:%s", bundle_path ? bundle_path : "?");
    } else {
        snprintf(key, sizeof(key), "%s|%s|%.0f|%.0f|%.6f",
                 cp_jstr_ne_at(r, "host.hostname") ? cp_jstr_ne_at(r, "host.hostname") : "",
                 cp_jstr_ne_at(r, "host.boot_id") ? cp_jstr_ne_at(r, "host.boot_id") : "",
                 cJSON_IsNumber(pid) ? pid->valuedouble : -1,
                 cJSON_IsNumber(tid) ? tid->valuedouble : -1,
                 cJSON_IsNumber(t) ? t->valuedouble : -1);
    }
    int rank, lrank;
    kb_job_of(r, job, sizeof(job), &rank, &lrank);
    const cJSON *ds = cp_jpath(r, "diagnoses");
    const cJSON *top = cJSON_IsArray(ds) ? cJSON_GetArrayItem(ds, 0) : NULL;
    char *djson = cJSON_IsArray(ds) ? cJSON_PrintUnformatted(ds) : NULL;
    char *facts = kb_facts(r);

    if (kb_exec_retry(db, "BEGIN IMMEDIATE", NULL) != SQLITE_OK) {
        cp_errmsg(err, errlen, "knowledge base: %s", sqlite3_errmsg(db));
        free(djson);
        return -1;
    }
    sqlite3_stmt *q = NULL;
    *added = 1;
    if (sqlite3_prepare_v2(db, "SELECT id FROM crashes WHERE crash_key = ?1", -1, &q, NULL) == SQLITE_OK) {
        sqlite3_bind_text(q, 1, key, -1, SQLITE_TRANSIENT);
        if (sqlite3_step(q) == SQLITE_ROW)
            *added = 0;
    }
    sqlite3_finalize(q);
    const char *sql =
        "INSERT INTO crashes(crash_key, time, host, exe, signal, signature, fingerprint, top_rule,"
        " top_title, diagnoses, bundle_path, added, job, rank, local_rank, crash_kind, top_category,"
        " top_consequence_of, facts)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)"
        " ON CONFLICT(crash_key) DO UPDATE SET time=excluded.time, host=excluded.host,"
        " exe=excluded.exe, signal=excluded.signal, signature=excluded.signature,"
        " fingerprint=excluded.fingerprint, top_rule=excluded.top_rule, top_title=excluded.top_title,"
        " diagnoses=excluded.diagnoses, bundle_path=excluded.bundle_path, job=excluded.job,"
        " rank=excluded.rank, local_rank=excluded.local_rank, crash_kind=excluded.crash_kind,"
        " top_category=excluded.top_category, top_consequence_of=excluded.top_consequence_of, facts=excluded.facts"
        " RETURNING id";
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK) {
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
        bind_str(st, 11, bundle_path);
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
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
            *id = sqlite3_column_int64(st, 0);
        rc = rc == SQLITE_ROW ? SQLITE_OK : rc;
    }
    sqlite3_finalize(st);
    free(djson);
    free(facts);
    if (rc != SQLITE_OK || sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        cp_errmsg(err, errlen, "knowledge base: %s", sqlite3_errmsg(db));
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        return -1;
    }
    return 0;
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
