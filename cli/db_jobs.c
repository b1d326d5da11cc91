/* db_jobs.c - `crashpack db jobs`: one job's crashes in the order they died, the first failure,
 * and what explains each other one (docs/db.md "First failure of a job").
 *
 * Deaths are ordered by their precise time (the facts' death_time: the kernel's OOM kill line,
 * sub-second; the supervisor's observed exit; else the capture's time; db/ingest.c), then by id.
 * A crash is explained by another crash of the job when its report names that crash's process as
 * the cause of its own death (a DataLoader error naming the worker the kernel killed: the facts'
 * names_pids, the same host), or when it is a victim by nature (a collective timeout, a lost peer,
 * a scheduler's stop, advice, or nothing matched) or a consequence of another failure by its own
 * diagnosis: then it is explained by the first failure. The first failure is the earliest crash
 * that nothing explains and that is no victim; else the earliest that nothing explains; else the
 * earliest. */
#include "dbjobs.h"

#include "jpath.h"
#include "listjson.h"
#include "query.h"
#include "utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NAMES_MAX 32

struct job_row {
    long long id, pid;
    double time, dtime; /* the crash record's time; when the process died (precise) */
    char dsrc[16];      /* where dtime comes from */
    char host[64], title[160], cat[32], rule[64];
    int rank, victim;
    double names[NAMES_MAX]; /* pids of processes whose death this report names as its cause */
    int nnames;
    long by; /* the row that explains this one, -1: none */
};

static void put(FILE *out, const char *s, int max)
{
    if (!s) {
        fputc('-', out);
        return;
    }
    cp_text_putn(out, s, max > 0 ? (size_t)max : 0);
}

/* seconds with milliseconds when the time has them */
static void fmt_time(double t, char *buf, size_t len)
{
    time_t tt = (time_t)t;
    struct tm tm;
    size_t n;
    if (t <= 0 || !gmtime_r(&tt, &tm) || !(n = strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm))) {
        snprintf(buf, len, "?");
        return;
    }
    int ms = (int)((t - (double)tt) * 1000);
    if (ms > 0 && ms < 1000)
        snprintf(buf + n, len - n, ".%03dZ", ms);
    else
        snprintf(buf + n, len - n, "Z");
}

/* Does a crash look like a consequence of another failure? Its top diagnosis says so, or it is in
 * a class that is a victim by nature (a collective timeout or a lost peer), or nothing matched. */
static int victim(const char *category, const char *consequence_of)
{
    if (consequence_of || !category)
        return 1;
    return !strcmp(category, "nccl") || !strcmp(category, "advice") ||
           !strcmp(category, "scheduler");
}

static void row_facts(struct job_row *r, const char *fj)
{
    cJSON *f = fj ? cJSON_Parse(fj) : NULL;
    double v;
    r->dtime = cp_jnum(f, "death_time", &v) && v > 0 ? v : r->time;
    snprintf(r->dsrc, sizeof(r->dsrc), "%s", cp_jstr_or(f, "death_time_source", "record"));
    r->pid = cp_jnum(f, "pid", &v) ? (long long)v : -1;
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(f, "names_pids"))
    {
        if (cJSON_IsNumber(e) && r->nnames < NAMES_MAX)
            r->names[r->nnames++] = e->valuedouble;
    }
    cJSON_Delete(f);
}

static struct job_row *load_rows(struct kb *db, const char *job, size_t *n)
{
    char err[1024]; /* a failed query lists no crashes */
    cJSON *crashes = kb_job_crashes(db, job, err, sizeof(err));
    struct job_row *rows = calloc((size_t)cJSON_GetArraySize(crashes) + 1, sizeof(*rows));
    const cJSON *c;
    *n = 0;
    cJSON_ArrayForEach(c, crashes)
    {
        if (!rows)
            break;
        struct job_row *r = &rows[(*n)++];
        r->id = (long long)cp_jnum_or(c, "id", 0);
        r->time = cp_jnum_or(c, "time", 0);
        snprintf(r->host, sizeof(r->host), "%s", cp_jstr_or(c, "host", "?"));
        r->rank = cJSON_IsNull(cp_jkey(c, "rank")) ? -1 : (int)cp_jnum_or(c, "rank", 0);
        snprintf(r->title, sizeof(r->title), "%s", cp_jstr_or(c, "top_title", "(no diagnosis)"));
        snprintf(r->cat, sizeof(r->cat), "%s", cp_jstr_or(c, "top_category", ""));
        snprintf(r->rule, sizeof(r->rule), "%s", cp_jstr_or(c, "top_rule", ""));
        r->victim = victim(cp_jstr(c, "top_category"), cp_jstr(c, "top_consequence_of"));
        row_facts(r, cp_jstr(c, "facts"));
    }
    cJSON_Delete(crashes);
    return rows;
}

static int by_death(const void *pa, const void *pb)
{
    const struct job_row *a = pa, *b = pb;
    if (a->dtime != b->dtime)
        return a->dtime < b->dtime ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

static int names(const struct job_row *r, long long pid)
{
    for (int i = 0; pid > 0 && i < r->nnames; i++)
        if (r->names[i] == (double)pid)
            return 1;
    return 0;
}

/* Links each row to the row that explains it (rows in death order) and returns the first
 * failure's index. */
static size_t link_rows(struct job_row *rows, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        rows[i].by = -1;
        for (size_t j = 0; j < n && rows[i].by < 0; j++)
            if (j != i && names(&rows[i], rows[j].pid) && !strcmp(rows[i].host, rows[j].host))
                rows[i].by = (long)j;
    }
    size_t first = n;
    for (size_t i = 0; i < n && first == n; i++)
        if (rows[i].by < 0 && !rows[i].victim)
            first = i;
    for (size_t i = 0; i < n && first == n; i++)
        if (rows[i].by < 0)
            first = i;
    if (first == n)
        first = 0;
    for (size_t i = 0; i < n; i++)
        if (i != first && rows[i].by < 0 && rows[i].victim)
            rows[i].by = (long)first;
    return first;
}

static const char *role(const struct job_row *rows, size_t i, size_t first)
{
    return i == first ? "first" : rows[i].by >= 0 ? "consequence" : "other";
}

/* One job's rows as an element of crashpack-db-jobs/1's jobs[]. */
static void job_json(cJSON *jobs, const char *job, const struct job_row *rows, size_t n,
                     size_t first)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "job", job);
    cJSON_AddNumberToObject(j, "count", (double)n);
    cJSON_AddNumberToObject(j, "first_failure", (double)rows[first].id);
    cJSON *arr = cJSON_AddArrayToObject(j, "crashes");
    for (size_t i = 0; i < n; i++) {
        cJSON *r = cJSON_CreateObject();
        cJSON_AddNumberToObject(r, "id", (double)rows[i].id);
        cp_doc_time(r, "time", rows[i].time);
        cJSON_AddNumberToObject(r, "death_time", rows[i].dtime);
        cJSON_AddStringToObject(r, "death_time_source", rows[i].dsrc);
        cJSON_AddStringToObject(r, "host", rows[i].host);
        cJSON_AddItemToObject(r, "pid",
                              rows[i].pid > 0 ? cJSON_CreateNumber((double)rows[i].pid)
                                              : cJSON_CreateNull());
        cJSON_AddItemToObject(
            r, "rank", rows[i].rank >= 0 ? cJSON_CreateNumber(rows[i].rank) : cJSON_CreateNull());
        cJSON_AddStringToObject(r, "role", role(rows, i, first));
        cp_doc_str(r, "top_diagnosis", rows[i].title[0] ? rows[i].title : NULL);
        cp_doc_str(r, "category", rows[i].cat[0] ? rows[i].cat : NULL);
        cp_doc_str(r, "rule", rows[i].rule[0] ? rows[i].rule : NULL);
        if (rows[i].by >= 0) {
            cJSON *b = cJSON_AddObjectToObject(r, "explained_by");
            cJSON_AddNumberToObject(b, "id", (double)rows[rows[i].by].id);
            cp_doc_str(b, "top_diagnosis", rows[rows[i].by].title);
        } else {
            cJSON_AddNullToObject(r, "explained_by");
        }
        cJSON_AddItemToArray(arr, r);
    }
    cJSON_AddItemToArray(jobs, j);
}

/* "rank N" or, without a rank, "pid N" */
static void who(const struct job_row *r, char *buf, size_t len)
{
    if (r->rank >= 0)
        snprintf(buf, len, "rank %d", r->rank);
    else if (r->pid > 0)
        snprintf(buf, len, "pid %lld", r->pid);
    else
        snprintf(buf, len, "rank ?");
}

static void print_job(const char *job, const struct job_row *rows, size_t n, size_t first)
{
    char a[40], b[40], w[40];
    fmt_time(rows[0].dtime, a, sizeof(a));
    fmt_time(rows[n - 1].dtime, b, sizeof(b));
    fputs("job ", stdout);
    put(stdout, job, 0);
    printf(": %zu crash%s, %s .. %s\n", n, n == 1 ? "" : "es", a, b);
    const struct job_row *f = &rows[first];
    fmt_time(f->dtime, a, sizeof(a));
    who(f, w, sizeof(w));
    printf("  first failure: %s on ", w);
    put(stdout, f->host, 0);
    printf(" at %s (crash %lld): ", a, f->id);
    put(stdout, f->title[0] ? f->title : "(no diagnosis)", 0);
    fputc('\n', stdout);
    size_t cons = 0;
    for (size_t i = 0; i < n; i++)
        cons += i != first && rows[i].by >= 0;
    if (cons)
        printf("  %zu other failure%s look%s like consequences of it\n", cons, cons == 1 ? "" : "s",
               cons == 1 ? "s" : "");
    for (size_t i = 0; i < n; i++) {
        fmt_time(rows[i].dtime, a, sizeof(a));
        who(&rows[i], w, sizeof(w));
        printf("  %-5s %-24s %-10s crash %-6lld ",
               i == first        ? "FIRST"
               : rows[i].by >= 0 ? "cons."
                                 : "",
               a, w, rows[i].id);
        put(stdout, rows[i].host, 20);
        fputs("  ", stdout);
        put(stdout, rows[i].title[0] ? rows[i].title : "(no diagnosis)", 0);
        if (rows[i].by >= 0) {
            printf(" (explained by crash %lld: ", rows[rows[i].by].id);
            put(stdout, rows[rows[i].by].title, 0);
            fputc(')', stdout);
        }
        fputc('\n', stdout);
    }
}

int db_show_job(struct kb *db, const char *job, cJSON *jobs)
{
    size_t n = 0;
    struct job_row *rows = load_rows(db, job, &n);
    if (!n) {
        free(rows);
        return 0;
    }
    qsort(rows, n, sizeof(*rows), by_death);
    size_t first = link_rows(rows, n);
    if (jobs)
        job_json(jobs, job, rows, n, first);
    else
        print_job(job, rows, n, first);
    free(rows);
    return 1;
}
