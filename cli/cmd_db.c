/* cmd_db.c - `crashpack db add|list|show|groups|jobs|search|stats`: the knowledge base of analyzed
 * crashes (db/kb.h). `db add` stores the report `crashpack analyze --json` prints for each bundle,
 * built in-process by the report library (report.h). */
#include "commands.h"
#include "kb.h"
#include "report.h"
#include "rule.h"
#include "utf8.h"

#include <cjson/cJSON.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

cJSON *rule_read_file(const char *path, char *err, size_t errlen);

static void usage(FILE *out)
{
    fprintf(out,
            "usage: crashpack db COMMAND [--db PATH] ...\n"
            "\n"
            "  add BUNDLE...             analyze each bundle and store the crash (again: updated, not doubled)\n"
            "  add --report-json FILE [--diagnose]\n"
            "                            store report JSON (one report, or an array of them) as it is, or\n"
            "                            with its diagnoses made again from the rule base\n"
            "  list [--limit N]          newest crashes first\n"
            "  show ID [--json]          one crash with its diagnoses\n"
            "  groups [--limit N]        crashes grouped by fingerprint: count, first/last seen, hosts,\n"
            "                            top diagnosis\n"
            "  jobs [JOB]                crashes grouped by job (SLURM_JOB_ID, TORCHELASTIC_RUN_ID,\n"
            "                            MASTER_ADDR:MASTER_PORT) in time order: the first failing rank,\n"
            "                            and the later failures that look like its consequences\n"
            "  search [TEXT] [--host H] [--rule R] [--category C] [--job J] [--fingerprint F]\n"
            "         [--since DATE] [--until DATE] [--limit N]\n"
            "                            TEXT matches signature, diagnosis titles and evidence, exe\n"
            "  stats                     crashes per week, per diagnosis category, per host\n"
            "\n"
            "--db PATH: default $CRASHPACK_DB, /var/lib/crashpack/kb.sqlite for root, else\n"
            "$XDG_DATA_HOME/crashpack/kb.sqlite. DATE is YYYY-MM-DD or epoch seconds.\n");
}

struct dopts {
    const char *db, *report_json, *host, *rule, *category, *job, *fingerprint;
    double since, until;
    int limit, json, diagnose;
    char dbbuf[PATH_MAX];
    int nargs;
    char **args;
};

static int parse_date(const char *s, double *out)
{
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    char *end = strptime(s, "%Y-%m-%d", &tm);
    if (end && !*end) {
        *out = (double)timegm(&tm);
        return 0;
    }
    char *e2;
    double v = strtod(s, &e2);
    if (*s && !*e2) {
        *out = v;
        return 0;
    }
    return -1;
}

static int parse(struct dopts *o, int argc, char **argv)
{
    o->args = calloc((size_t)argc + 1, sizeof(char *));
    o->limit = 50;
    o->until = 1e18;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define OPT(name, field)                                                                           \
    if (!strcmp(a, name) && v) {                                                                   \
        o->field = v;                                                                              \
        i++;                                                                                       \
        continue;                                                                                  \
    }
        OPT("--db", db)
        OPT("--report-json", report_json)
        OPT("--host", host)
        OPT("--rule", rule)
        OPT("--category", category)
        OPT("--job", job)
        OPT("--fingerprint", fingerprint)
#undef OPT
        if (!strcmp(a, "--limit") && v) {
            o->limit = atoi(v);
            i++;
            if (o->limit <= 0)
                return -1;
        } else if ((!strcmp(a, "--since") || !strcmp(a, "--until")) && v) {
            if (parse_date(v, a[2] == 's' ? &o->since : &o->until))
                return -1;
            i++;
        } else if (!strcmp(a, "--json")) {
            o->json = 1;
        } else if (!strcmp(a, "--diagnose")) {
            o->diagnose = 1;
        } else if (!strcmp(a, "--")) {
            for (i++; i < argc; i++)
                o->args[o->nargs++] = argv[i];
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "crashpack db: unknown or incomplete option `%s`\n", a);
            return -1;
        } else {
            o->args[o->nargs++] = argv[i];
        }
    }
    if (!o->db) {
        if (!kb_default_path(o->dbbuf, sizeof(o->dbbuf))) {
            fprintf(stderr, "crashpack db: no knowledge base location (set --db)\n");
            return -1;
        }
        o->db = o->dbbuf;
    }
    return 0;
}

static sqlite3 *open_db(struct dopts *o, int create)
{
    sqlite3 *db = NULL;
    char err[1024];
    if (!create && access(o->db, F_OK)) {
        fprintf(stderr, "crashpack db: no knowledge base at %s yet (`crashpack db add BUNDLE` creates it)\n",
                o->db);
        return NULL;
    }
    if (kb_open(o->db, create, &db, err, sizeof(err))) {
        fprintf(stderr, "crashpack db: %s\n", err);
        return NULL;
    }
    return db;
}

/* Prints at most max bytes of s (0: all) through the terminal policy (utf8.h): stored strings
 * come from untrusted bundles. NULL prints "-". */
static void put(FILE *out, const char *s, int max)
{
    if (!s) {
        fputc('-', out);
        return;
    }
    cp_text_putn(out, s, max > 0 ? (size_t)max : 0);
}

/* A column of a listing: put() of at most max bytes (0: all), padded to width, then one space. */
static void put_col(FILE *out, const char *s, int width, int max)
{
    size_t l = strlen(s);
    if (max > 0 && l > (size_t)max)
        l = (size_t)max;
    put(out, s, max);
    fprintf(out, "%*s ", (int)(l < (size_t)width ? width - l : 0), "");
}

static const char *col(sqlite3_stmt *q, int i)
{
    return (const char *)sqlite3_column_text(q, i);
}

static void fmt_time(double t, char *buf, size_t len)
{
    time_t tt = (time_t)t;
    struct tm tm;
    if (t <= 0 || !gmtime_r(&tt, &tm) || !strftime(buf, len, "%Y-%m-%d %H:%M:%SZ", &tm))
        snprintf(buf, len, "?");
}

/* ---- add ---- */

static int add_one(sqlite3 *db, cJSON *r, const char *path, struct rulebase *rb)
{
    char err[1024];
    if (rb && rules_diagnose(rb, r, err, sizeof(err)) < 0) {
        fprintf(stderr, "crashpack db: diagnosis: %s\n", err);
        return -1;
    }
    int64_t id = 0;
    int added = 0;
    if (kb_add_report(db, r, path, &id, &added, err, sizeof(err))) {
        fprintf(stderr, "crashpack db: %s: %s\n", path ? path : "report", err);
        return -1;
    }
    const cJSON *top = cJSON_GetArrayItem(cJSON_GetObjectItem(r, "diagnoses"), 0);
    printf("%s crash %lld", added ? "added" : "updated", (long long)id);
    if (path) {
        fputs(" from ", stdout);
        put(stdout, path, 0);
    }
    if (top) {
        fputs(": ", stdout);
        put(stdout, cJSON_GetStringValue(cJSON_GetObjectItem(top, "title")), 200);
    }
    fputc('\n', stdout);
    return 0;
}

static int do_add(struct dopts *o)
{
    if (!o->report_json && o->nargs == 0) {
        usage(stderr);
        return 2;
    }
    sqlite3 *db = open_db(o, 1);
    if (!db)
        return 2;
    int bad = 0;
    char err[1024];
    if (o->report_json) {
        cJSON *j = rule_read_file(o->report_json, err, sizeof(err));
        if (!j) {
            /* reports can exceed the rule-file limit: read without it */
            FILE *f = fopen(o->report_json, "r");
            if (f) {
                size_t cap = 1 << 20, len = 0;
                char *buf = malloc(cap);
                size_t n;
                while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
                    len += n;
                    if (len + 1 >= cap) {
                        char *nb = realloc(buf, cap *= 2);
                        if (!nb)
                            break;
                        buf = nb;
                    }
                }
                fclose(f);
                if (buf)
                    j = cJSON_ParseWithLength(buf, len);
                free(buf);
            }
        }
        if (!j) {
            fprintf(stderr, "crashpack db: %s: not readable JSON\n", o->report_json);
            sqlite3_close(db);
            return 2;
        }
        struct rulebase *rb = NULL;
        if (o->diagnose && rulebase_open(NULL, o->db, &rb, err, sizeof(err))) {
            fprintf(stderr, "crashpack db: %s\n", err);
            cJSON_Delete(j);
            sqlite3_close(db);
            return 2;
        }
        if (cJSON_IsArray(j)) {
            cJSON *r;
            cJSON_ArrayForEach(r, j) bad += add_one(db, r, NULL, rb) != 0;
        } else {
            bad += add_one(db, j, NULL, rb) != 0;
        }
        rulebase_close(rb);
        cJSON_Delete(j);
    }
    for (int i = 0; i < o->nargs; i++) {
        char abs[PATH_MAX];
        const char *path = realpath(o->args[i], abs) ? abs : o->args[i];
        struct report_opts ro = {.db = o->db};
        struct report_status st;
        cJSON *r = report_build(path, &ro, &st);
        if (!r) {
            fputs("crashpack db: ", stderr);
            cp_text_put(stderr, o->args[i]);
            fputs(": ", stderr);
            cp_text_put(stderr, st.error);
            fputc('\n', stderr);
            bad++;
            continue;
        }
        report_print_notes(stderr, "crashpack db", r, &st, 1);
        bad += add_one(db, r, path, NULL) != 0;
        cJSON_Delete(r);
    }
    sqlite3_close(db);
    return bad ? 1 : 0;
}

/* ---- list / search ---- */

static void print_rows(sqlite3_stmt *q)
{
    int n = 0;
    printf("%-6s %-20s %-16s %-22s %-8s %s\n", "id", "time (UTC)", "host", "job/rank", "signal",
           "top diagnosis | signature");
    while (sqlite3_step(q) == SQLITE_ROW) {
        char t[32], jr[64];
        fmt_time(sqlite3_column_double(q, 1), t, sizeof(t));
        const char *job = col(q, 3);
        if (job && sqlite3_column_type(q, 4) != SQLITE_NULL)
            snprintf(jr, sizeof(jr), "%.14s/%d", job, sqlite3_column_int(q, 4));
        else
            snprintf(jr, sizeof(jr), "%.22s", job ? job : "-");
        printf("%-6lld %-20s ", (long long)sqlite3_column_int64(q, 0), t);
        put_col(stdout, col(q, 2) ? col(q, 2) : "-", 16, 16);
        put_col(stdout, jr, 22, 0);
        put_col(stdout, col(q, 5) ? col(q, 5) : "-", 8, 0);
        put(stdout, col(q, 6) ? col(q, 6) : "(no diagnosis)", 60);
        fputs(" | ", stdout);
        put(stdout, col(q, 7), 80);
        fputc('\n', stdout);
        n++;
    }
    printf("%d crash%s\n", n, n == 1 ? "" : "es");
}

#define ROW_COLS "id, time, host, job, rank, signal, top_title, signature"

static int do_list(struct dopts *o)
{
    sqlite3 *db = open_db(o, 0);
    if (!db)
        return 2;
    sqlite3_stmt *q = NULL;
    sqlite3_prepare_v2(db, "SELECT " ROW_COLS " FROM crashes ORDER BY time DESC, id DESC LIMIT ?1", -1,
                       &q, NULL);
    sqlite3_bind_int(q, 1, o->limit);
    print_rows(q);
    sqlite3_finalize(q);
    sqlite3_close(db);
    return 0;
}

static int do_search(struct dopts *o)
{
    sqlite3 *db = open_db(o, 0);
    if (!db)
        return 2;
    char like[1024];
    snprintf(like, sizeof(like), "%%%s%%", o->nargs ? o->args[0] : "");
    sqlite3_stmt *q = NULL;
    const char *sql =
        "SELECT " ROW_COLS " FROM crashes WHERE"
        " (?1 = '%%' OR signature LIKE ?1 OR top_title LIKE ?1 OR diagnoses LIKE ?1 OR exe LIKE ?1"
        "  OR fingerprint LIKE ?1)"
        " AND (?2 IS NULL OR host = ?2) AND (?3 IS NULL OR top_rule = ?3"
        "  OR EXISTS (SELECT 1 FROM json_each(crashes.diagnoses) WHERE json_extract(value, '$.rule') = ?3))"
        " AND (?4 IS NULL OR top_category = ?4) AND (?5 IS NULL OR job = ?5)"
        " AND (?6 IS NULL OR fingerprint = ?6) AND coalesce(time, 0) >= ?7 AND coalesce(time, 0) <= ?8"
        " ORDER BY time DESC, id DESC LIMIT ?9";
    if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK) {
        fprintf(stderr, "crashpack db: %s\n", sqlite3_errmsg(db));
        sqlite3_close(db);
        return 2;
    }
    sqlite3_bind_text(q, 1, like, -1, SQLITE_TRANSIENT);
    const char *f[] = {o->host, o->rule, o->category, o->job, o->fingerprint};
    for (int i = 0; i < 5; i++)
        if (f[i])
            sqlite3_bind_text(q, i + 2, f[i], -1, SQLITE_TRANSIENT);
    sqlite3_bind_double(q, 7, o->since);
    sqlite3_bind_double(q, 8, o->until);
    sqlite3_bind_int(q, 9, o->limit);
    print_rows(q);
    sqlite3_finalize(q);
    sqlite3_close(db);
    return 0;
}

/* ---- show ---- */

static int do_show(struct dopts *o)
{
    if (o->nargs != 1) {
        usage(stderr);
        return 2;
    }
    sqlite3 *db = open_db(o, 0);
    if (!db)
        return 2;
    sqlite3_stmt *q = NULL;
    sqlite3_prepare_v2(db,
                       "SELECT id, time, host, exe, signal, crash_kind, signature, fingerprint, job, rank,"
                       " local_rank, bundle_path, diagnoses,"
                       " (SELECT COUNT(*) FROM crashes c2 WHERE c2.fingerprint = crashes.fingerprint)"
                       " FROM crashes WHERE id = ?1",
                       -1, &q, NULL);
    sqlite3_bind_int64(q, 1, atoll(o->args[0]));
    if (sqlite3_step(q) != SQLITE_ROW) {
        fprintf(stderr, "crashpack db: no crash %s\n", o->args[0]);
        sqlite3_finalize(q);
        sqlite3_close(db);
        return 1;
    }
    cJSON *ds = col(q, 12) ? cJSON_Parse(col(q, 12)) : NULL;
    if (o->json) {
        cJSON *j = cJSON_CreateObject();
        static const char *names[] = {"id", "time", "host", "exe", "signal", "crash_kind", "signature",
                                      "fingerprint", "job", "rank", "local_rank", "bundle_path"};
        for (int i = 0; i < 12; i++) {
            int t = sqlite3_column_type(q, i);
            if (t == SQLITE_NULL)
                cJSON_AddNullToObject(j, names[i]);
            else if (t == SQLITE_INTEGER || t == SQLITE_FLOAT)
                cJSON_AddNumberToObject(j, names[i], sqlite3_column_double(q, i));
            else
                cJSON_AddStringToObject(j, names[i], col(q, i));
        }
        cJSON_AddNumberToObject(j, "seen", sqlite3_column_int(q, 13));
        cJSON_AddItemToObject(j, "diagnoses", ds ? ds : cJSON_CreateArray());
        char *s = cJSON_Print(j);
        puts(s ? s : "{}");
        free(s);
        cJSON_Delete(j);
    } else {
        char t[32];
        fmt_time(sqlite3_column_double(q, 1), t, sizeof(t));
        static const char *labels[] = {"id", "time", "host", "exe", "signal", "kind", "signature",
                                       "fingerprint", "job", "rank", "local rank", "bundle"};
        for (int i = 0; i < 12; i++) {
            printf("%-12s", labels[i]);
            if (i == 1)
                fputs(t, stdout);
            else
                put(stdout, col(q, i), 0);
            fputc('\n', stdout);
        }
        printf("%-12s%d time(s) with this fingerprint\n", "seen", sqlite3_column_int(q, 13));
        const cJSON *d, *e;
        int i = 0;
        cJSON_ArrayForEach(d, ds)
        {
            printf("%d. ", ++i);
            put(stdout, cJSON_GetStringValue(cJSON_GetObjectItem(d, "title")), 0);
            printf(" [");
            put(stdout, cJSON_GetStringValue(cJSON_GetObjectItem(d, "rule")), 0);
            printf("]\n");
            const char *co = cJSON_GetStringValue(cJSON_GetObjectItem(d, "consequence_of"));
            if (co) {
                fputs("   likely a consequence of ", stdout);
                put(stdout, co, 0);
                fputc('\n', stdout);
            }
            cJSON_ArrayForEach(e, cJSON_GetObjectItem(d, "evidence"))
            {
                fputs("   evidence: ", stdout);
                put(stdout, cJSON_GetStringValue(e), 0);
                fputc('\n', stdout);
            }
        }
        if (i == 0)
            puts("no diagnosis: no known failure pattern matched");
        cJSON_Delete(ds);
    }
    sqlite3_finalize(q);
    sqlite3_close(db);
    return 0;
}

/* ---- groups ---- */

static int do_groups(struct dopts *o)
{
    sqlite3 *db = open_db(o, 0);
    if (!db)
        return 2;
    sqlite3_stmt *q = NULL;
    const char *sql =
        "SELECT fingerprint, COUNT(*) AS n, MIN(time), MAX(time), COUNT(DISTINCT host),"
        " (SELECT group_concat(h, ',') FROM (SELECT DISTINCT host AS h FROM crashes c3"
        "   WHERE c3.fingerprint IS c.fingerprint ORDER BY h LIMIT 4)),"
        " (SELECT top_title FROM crashes c2 WHERE c2.fingerprint IS c.fingerprint AND top_title IS NOT NULL"
        "   GROUP BY top_title ORDER BY COUNT(*) DESC, top_title LIMIT 1),"
        " MAX(signature)"
        " FROM crashes c GROUP BY fingerprint ORDER BY n DESC, MAX(time) DESC LIMIT ?1";
    if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK) {
        fprintf(stderr, "crashpack db: %s\n", sqlite3_errmsg(db));
        sqlite3_close(db);
        return 2;
    }
    sqlite3_bind_int(q, 1, o->limit);
    printf("%-6s %-20s %-20s %-6s %-18s %s\n", "count", "first seen", "last seen", "hosts",
           "fingerprint", "top diagnosis | signature");
    int groups = 0;
    while (sqlite3_step(q) == SQLITE_ROW) {
        char a[32], b[32];
        fmt_time(sqlite3_column_double(q, 2), a, sizeof(a));
        fmt_time(sqlite3_column_double(q, 3), b, sizeof(b));
        printf("%-6d %-20s %-20s %-6d ", sqlite3_column_int(q, 1), a, b, sqlite3_column_int(q, 4));
        const char *fpv = col(q, 0) ? col(q, 0) : "-";
        put(stdout, fpv, 18);
        printf("%*s ", (int)(strlen(fpv) < 18 ? 18 - strlen(fpv) : 0), "");
        put(stdout, col(q, 6) ? col(q, 6) : "(no diagnosis)", 60);
        fputs(" | ", stdout);
        put(stdout, col(q, 7), 80);
        fputs("\n       hosts: ", stdout);
        put(stdout, col(q, 5), 120);
        if (sqlite3_column_int(q, 4) > 4)
            printf(", ... (%d)", sqlite3_column_int(q, 4));
        fputc('\n', stdout);
        groups++;
    }
    printf("%d group%s\n", groups, groups == 1 ? "" : "s");
    sqlite3_finalize(q);
    sqlite3_close(db);
    return 0;
}

/* ---- jobs ---- */

/* Does a crash look like a consequence of another rank's failure? Its top diagnosis says so, or it
 * is in a class that is a victim by nature (a collective timeout or a lost peer), or nothing matched. */
static int victim(const char *category, const char *consequence_of)
{
    if (consequence_of)
        return 1;
    if (!category)
        return 1;
    return !strcmp(category, "nccl") || !strcmp(category, "advice") || !strcmp(category, "scheduler");
}

static int show_job(sqlite3 *db, const char *job)
{
    sqlite3_stmt *q = NULL;
    sqlite3_prepare_v2(db,
                       "SELECT id, time, host, rank, top_title, top_category, top_consequence_of, top_rule"
                       " FROM crashes WHERE job = ?1 ORDER BY time, id",
                       -1, &q, NULL);
    sqlite3_bind_text(q, 1, job, -1, SQLITE_TRANSIENT);
    struct row {
        long long id;
        double time;
        char host[64], title[160], cat[32], rule[64];
        int rank, victim;
    } *rows = NULL;
    size_t n = 0;
    while (sqlite3_step(q) == SQLITE_ROW) {
        struct row *nr = realloc(rows, (n + 1) * sizeof(*rows));
        if (!nr)
            break;
        rows = nr;
        struct row *r = &rows[n++];
        r->id = sqlite3_column_int64(q, 0);
        r->time = sqlite3_column_double(q, 1);
        snprintf(r->host, sizeof(r->host), "%s", col(q, 2) ? col(q, 2) : "?");
        r->rank = sqlite3_column_type(q, 3) == SQLITE_NULL ? -1 : sqlite3_column_int(q, 3);
        snprintf(r->title, sizeof(r->title), "%s", col(q, 4) ? col(q, 4) : "(no diagnosis)");
        snprintf(r->cat, sizeof(r->cat), "%s", col(q, 5) ? col(q, 5) : "");
        snprintf(r->rule, sizeof(r->rule), "%s", col(q, 7) ? col(q, 7) : "");
        r->victim = victim(col(q, 5), col(q, 6));
    }
    sqlite3_finalize(q);
    if (!n) {
        free(rows);
        return 0;
    }
    /* the first failure: the earliest crash that is not a victim; else the earliest crash */
    size_t first = 0;
    for (size_t i = 0; i < n; i++)
        if (!rows[i].victim) {
            first = i;
            break;
        }
    char a[32], b[32];
    fmt_time(rows[0].time, a, sizeof(a));
    fmt_time(rows[n - 1].time, b, sizeof(b));
    fputs("job ", stdout);
    put(stdout, job, 0);
    printf(": %zu crash%s, %s .. %s\n", n, n == 1 ? "" : "es", a, b);
    struct row *f = &rows[first];
    fmt_time(f->time, a, sizeof(a));
    printf("  first failure: rank %d on ", f->rank);
    put(stdout, f->host, 0);
    printf(" at %s (crash %lld): ", a, f->id);
    put(stdout, f->title, 0);
    fputc('\n', stdout);
    size_t cons = 0;
    for (size_t i = 0; i < n; i++)
        cons += i != first && rows[i].victim;
    if (cons)
        printf("  %zu other failure%s look%s like consequences of it\n", cons, cons == 1 ? "" : "s",
               cons == 1 ? "s" : "");
    for (size_t i = 0; i < n; i++) {
        fmt_time(rows[i].time, a, sizeof(a));
        printf("  %-5s %-20s rank %-4d crash %-6lld ", i == first ? "FIRST" : rows[i].victim ? "cons." : "",
               a, rows[i].rank, rows[i].id);
        put(stdout, rows[i].host, 20);
        fputs("  ", stdout);
        put(stdout, rows[i].title, 0);
        fputc('\n', stdout);
    }
    free(rows);
    return 1;
}

static int do_jobs(struct dopts *o)
{
    sqlite3 *db = open_db(o, 0);
    if (!db)
        return 2;
    int shown = 0;
    if (o->nargs) {
        for (int i = 0; i < o->nargs; i++)
            shown += show_job(db, o->args[i]);
    } else {
        sqlite3_stmt *q = NULL;
        sqlite3_prepare_v2(db,
                           "SELECT job FROM crashes WHERE job IS NOT NULL GROUP BY job"
                           " ORDER BY MAX(time) DESC LIMIT ?1",
                           -1, &q, NULL);
        sqlite3_bind_int(q, 1, o->limit);
        while (sqlite3_step(q) == SQLITE_ROW) {
            char job[512];
            snprintf(job, sizeof(job), "%s", col(q, 0));
            if (shown)
                fputc('\n', stdout);
            shown += show_job(db, job);
        }
        sqlite3_finalize(q);
    }
    if (!shown)
        puts("no crashes with a job id (SLURM_JOB_ID, TORCHELASTIC_RUN_ID, MASTER_ADDR:MASTER_PORT)");
    sqlite3_close(db);
    return 0;
}

/* ---- stats ---- */

static void stat_block(sqlite3 *db, const char *title, const char *sql)
{
    sqlite3_stmt *q = NULL;
    printf("%s\n", title);
    if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK)
        return;
    while (sqlite3_step(q) == SQLITE_ROW) {
        printf("  %6d  ", sqlite3_column_int(q, 1));
        put(stdout, col(q, 0) ? col(q, 0) : "(none)", 60);
        fputc('\n', stdout);
    }
    sqlite3_finalize(q);
}

static int do_stats(struct dopts *o)
{
    sqlite3 *db = open_db(o, 0);
    if (!db)
        return 2;
    sqlite3_stmt *q = NULL;
    sqlite3_prepare_v2(db, "SELECT COUNT(*), COUNT(DISTINCT fingerprint), COUNT(DISTINCT host) FROM crashes",
                       -1, &q, NULL);
    if (sqlite3_step(q) == SQLITE_ROW)
        printf("%d crashes, %d distinct fingerprints, %d hosts\n\n", sqlite3_column_int(q, 0),
               sqlite3_column_int(q, 1), sqlite3_column_int(q, 2));
    sqlite3_finalize(q);
    stat_block(db, "per week",
               "SELECT strftime('%Y-W%W', time, 'unixepoch'), COUNT(*) FROM crashes GROUP BY 1 ORDER BY 1 DESC LIMIT 26");
    stat_block(db, "per diagnosis category",
               "SELECT coalesce(top_category, 'undiagnosed'), COUNT(*) FROM crashes GROUP BY 1 ORDER BY 2 DESC, 1");
    stat_block(db, "per host", "SELECT host, COUNT(*) FROM crashes GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 50");
    sqlite3_close(db);
    return 0;
}

int cmd_db(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    struct dopts o;
    memset(&o, 0, sizeof(o));
    if (parse(&o, argc - 2, argv + 2)) {
        free(o.args);
        usage(stderr);
        return 2;
    }
    const char *c = argv[1];
    int rc;
    if (!strcmp(c, "add"))
        rc = do_add(&o);
    else if (!strcmp(c, "list"))
        rc = do_list(&o);
    else if (!strcmp(c, "show"))
        rc = do_show(&o);
    else if (!strcmp(c, "groups"))
        rc = do_groups(&o);
    else if (!strcmp(c, "jobs"))
        rc = do_jobs(&o);
    else if (!strcmp(c, "search"))
        rc = do_search(&o);
    else if (!strcmp(c, "stats"))
        rc = do_stats(&o);
    else {
        fprintf(stderr, "crashpack db: unknown command `%s`\n", c);
        usage(stderr);
        rc = 2;
    }
    free(o.args);
    return rc;
}
