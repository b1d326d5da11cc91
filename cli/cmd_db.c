/* cmd_db.c - `crashpack db add|list|show|groups|jobs|search|stats`: the knowledge base of analyzed
 * crashes (db/kb.h). `db add` stores what `crashpack analyze --json` reports for each bundle. */
#include "analyze_run.h"
#include "cmdopt.h"
#include "commands.h"
#include "listjson.h"
#include "timearg.h"
#include "kb.h"
#include "rule.h"

#include <cjson/cJSON.h>

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

cJSON *rule_read_file(const char *path, char *err, size_t errlen);

#define VERB "crashpack db"

static const char footer[] =
    "--db PATH: default $CRASHPACK_DB, /var/lib/crashpack/kb.sqlite for root, else\n"
    "$XDG_DATA_HOME/crashpack/kb.sqlite. TIME: " CP_TIME_FORMS ".\n"
    "Exit status: 0 ok, 1 a problem (a bundle that could not be added), 2 usage error,\n"
    "3 no knowledge base yet, or no such crash.\n";

static const struct cp_subverb subverbs[] = {
    {"add", "db report-json diagnose", "BUNDLE... | --report-json FILE [--diagnose] [--db PATH]",
     "Analyzes each bundle and stores the crash (again: updated, not doubled). --report-json\n"
     "stores report JSON (one report, or an array of them) as it is, or with its diagnoses made\n"
     "again from the rule base (--diagnose).\n", 0, -1, "BUNDLE"},
    {"list", "db limit json", "[--limit N] [--json] [--db PATH]",
     "Newest crashes first (default 50).\n"
     "  --json       one JSON object (format crashpack-db-list/1)\n", 0, 0, ""},
    {"show", "db json", "ID [--json] [--db PATH]",
     "One crash with its diagnoses.\n"
     "  --json       one JSON object (format crashpack-db-show/1)\n", 1, 1, "ID"},
    {"groups", "db limit json", "[--limit N] [--json] [--db PATH]",
     "Crashes grouped by fingerprint: count, first/last seen, hosts, top diagnosis.\n"
     "  --json       one JSON object (format crashpack-db-groups/1)\n", 0, 0, ""},
    {"jobs", "db limit json", "[JOB...] [--limit N] [--json] [--db PATH]",
     "Crashes grouped by job (SLURM_JOB_ID, TORCHELASTIC_RUN_ID, MASTER_ADDR:MASTER_PORT) in time\n"
     "order: the first failing rank, and the later failures that look like its consequences.\n"
     "  --json       one JSON object (format crashpack-db-jobs/1)\n", 0, -1, "JOB"},
    {"search", "db host rule category job fingerprint since until limit json",
     "[TEXT] [--host H] [--rule R] [--category C] [--job J] [--fingerprint F]\n"
     "       [--since TIME] [--until TIME] [--limit N] [--json] [--db PATH]",
     "TEXT matches signature, diagnosis titles and evidence, exe.\n"
     "  --json       one JSON object (format crashpack-db-list/1)\n", 0, 1, "TEXT"},
    {"stats", "db json", "[--json] [--db PATH]",
     "Crashes per week, per diagnosis category, per host.\n"
     "  --json       one JSON object (format crashpack-db-stats/1)\n", 0, 0, ""},
};
#define NSUB ((int)(sizeof(subverbs) / sizeof(subverbs[0])))

static void usage(FILE *out)
{
    fprintf(out, "usage: " VERB " COMMAND [options]\n\n");
    for (int i = 0; i < NSUB; i++)
        fprintf(out, "  %-8s %s\n", subverbs[i].name, subverbs[i].synopsis);
    fprintf(out, "\n`" VERB " COMMAND --help` describes each command.\n\n%s", footer);
}

struct dopts {
    const char *db, *report_json, *host, *rule, *category, *job, *fingerprint;
    double since, until;
    int limit, json, diagnose;
    int missing; /* open_db: there is no knowledge base at db */
    long long id; /* show's ID */
    char dbbuf[PATH_MAX];
    int nargs;
    char **args;
};

/* argv[0] is the sub-verb. Returns -1 to go on, else the exit status. */
static int parse(struct dopts *o, const struct cp_subverb *sv, int argc, char **argv)
{
    enum { O_DB = 256, O_REPORT, O_HOST, O_RULE, O_CATEGORY, O_JOB, O_FP, O_LIMIT, O_SINCE, O_UNTIL,
           O_JSON, O_DIAGNOSE };
    static const struct option all[] = {
        {"db", required_argument, 0, O_DB}, {"report-json", required_argument, 0, O_REPORT},
        {"host", required_argument, 0, O_HOST}, {"rule", required_argument, 0, O_RULE},
        {"category", required_argument, 0, O_CATEGORY}, {"job", required_argument, 0, O_JOB},
        {"fingerprint", required_argument, 0, O_FP}, {"limit", required_argument, 0, O_LIMIT},
        {"since", required_argument, 0, O_SINCE}, {"until", required_argument, 0, O_UNTIL},
        {"json", no_argument, 0, O_JSON}, {"diagnose", no_argument, 0, O_DIAGNOSE}, CP_OPT_END};
    struct option longs[20];
    cp_opt_subset(all, sv->opts, longs, 20);
    char verb[64];
    snprintf(verb, sizeof(verb), VERB " %s", sv->name);
    struct cp_opts p = {.verb = verb, .longs = longs, .argc = argc, .argv = argv};
    o->limit = 50;
    o->until = 1e18;
    long long n;
    int c;
    while ((c = cp_getopt(&p)) != -1) {
        switch (c) {
        case 'h':
            cp_subverb_usage(stdout, VERB, sv, footer);
            return CP_EXIT_OK;
        case O_DB: o->db = optarg; break;
        case O_REPORT: o->report_json = optarg; break;
        case O_HOST: o->host = optarg; break;
        case O_RULE: o->rule = optarg; break;
        case O_CATEGORY: o->category = optarg; break;
        case O_JOB: o->job = optarg; break;
        case O_FP: o->fingerprint = optarg; break;
        case O_JSON: o->json = 1; break;
        case O_DIAGNOSE: o->diagnose = 1; break;
        case O_LIMIT:
            if (cp_opt_num(&p, "--limit", optarg, 1, INT_MAX, &n))
                return CP_EXIT_USAGE;
            o->limit = (int)n;
            break;
        case O_SINCE:
        case O_UNTIL:
            if (cp_opt_time(&p, c == O_SINCE ? "--since" : "--until", optarg, c == O_SINCE ? &o->since : &o->until))
                return CP_EXIT_USAGE;
            break;
        default:
            return CP_EXIT_USAGE;
        }
    }
    if (cp_opt_args(&p, !strcmp(sv->name, "add") && !o->report_json ? 1 : sv->min_args, sv->max_args,
                    sv->args_name))
        return CP_EXIT_USAGE;
    o->args = argv + optind;
    o->nargs = argc - optind;
    if (!strcmp(sv->name, "show") && cp_opt_num(&p, "ID", o->args[0], 1, INT64_MAX, &o->id))
        return CP_EXIT_USAGE;
    if (!o->db) {
        if (!kb_default_path(o->dbbuf, sizeof(o->dbbuf))) {
            fprintf(stderr, VERB ": no knowledge base location (set --db)\n");
            return CP_EXIT_PROBLEM;
        }
        o->db = o->dbbuf;
    }
    return -1;
}

/* The exit status when open_db failed. */
static int db_failed(const struct dopts *o)
{
    return o->missing ? CP_EXIT_NOTFOUND : CP_EXIT_PROBLEM;
}

static sqlite3 *open_db(struct dopts *o, int create)
{
    sqlite3 *db = NULL;
    char err[1024];
    if (!create && access(o->db, F_OK)) {
        o->missing = 1;
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

/* Prints s with control characters replaced (stored strings come from untrusted bundles). */
static void put(FILE *out, const char *s, int max)
{
    if (!s) {
        fputc('-', out);
        return;
    }
    for (int i = 0; s[i] && (max <= 0 || i < max); i++)
        fputc((unsigned char)s[i] < 0x20 || s[i] == 0x7f ? ' ' : s[i], out);
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
    sqlite3 *db = open_db(o, 1);
    if (!db)
        return db_failed(o);
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
            return CP_EXIT_PROBLEM;
        }
        struct rulebase *rb = NULL;
        if (o->diagnose && rulebase_open(NULL, o->db, &rb, err, sizeof(err))) {
            fprintf(stderr, "crashpack db: %s\n", err);
            cJSON_Delete(j);
            sqlite3_close(db);
            return CP_EXIT_PROBLEM;
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
        int partial = 0;
        char abs[PATH_MAX];
        const char *path = realpath(o->args[i], abs) ? abs : o->args[i];
        cJSON *r = analyze_run_json(path, o->db, &partial, err, sizeof(err));
        if (!r) {
            fprintf(stderr, "crashpack db: %s: %s\n", o->args[i], err);
            bad++;
            continue;
        }
        bad += add_one(db, r, path, NULL) != 0;
        cJSON_Delete(r);
    }
    sqlite3_close(db);
    return bad ? 1 : 0;
}

/* ---- list / search ---- */

/* A listing document: {"format": format, "db": {"path": ...}}. */
static cJSON *db_doc(const char *format, const struct dopts *o)
{
    cJSON *doc = cp_doc_new(format);
    cp_doc_str(cJSON_AddObjectToObject(doc, "db"), "path", o->db);
    return doc;
}

/* The ROW_COLS rows as a crashpack-db-list/1 document. */
static int json_rows(sqlite3_stmt *q, const struct dopts *o)
{
    cJSON *doc = db_doc("crashpack-db-list/1", o);
    cJSON *arr = cJSON_AddArrayToObject(doc, "crashes");
    while (sqlite3_step(q) == SQLITE_ROW) {
        cJSON *r = cJSON_CreateObject();
        cJSON_AddNumberToObject(r, "id", (double)sqlite3_column_int64(q, 0));
        cp_doc_time(r, "time", sqlite3_column_double(q, 1));
        cp_doc_str(r, "host", col(q, 2));
        cp_doc_str(r, "job", col(q, 3));
        if (sqlite3_column_type(q, 4) == SQLITE_NULL)
            cJSON_AddNullToObject(r, "rank");
        else
            cJSON_AddNumberToObject(r, "rank", sqlite3_column_int(q, 4));
        cp_doc_signal(r, col(q, 5));
        cp_doc_str(r, "top_diagnosis", col(q, 6));
        cp_doc_str(r, "signature", col(q, 7));
        cJSON_AddItemToArray(arr, r);
    }
    cJSON_AddNumberToObject(doc, "count", cJSON_GetArraySize(arr));
    return cp_doc_print(stdout, doc) ? CP_EXIT_PROBLEM : CP_EXIT_OK;
}

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
        put(stdout, col(q, 2) ? col(q, 2) : "-", 16);
        printf("%*s %-22s %-8s ", (int)(16 - (col(q, 2) ? (strlen(col(q, 2)) > 16 ? 16 : strlen(col(q, 2))) : 1)), "", jr,
               col(q, 5) ? col(q, 5) : "-");
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
        return db_failed(o);
    sqlite3_stmt *q = NULL;
    sqlite3_prepare_v2(db, "SELECT " ROW_COLS " FROM crashes ORDER BY time DESC, id DESC LIMIT ?1", -1,
                       &q, NULL);
    sqlite3_bind_int(q, 1, o->limit);
    int rc = CP_EXIT_OK;
    if (o->json)
        rc = json_rows(q, o);
    else
        print_rows(q);
    sqlite3_finalize(q);
    sqlite3_close(db);
    return rc;
}

static int do_search(struct dopts *o)
{
    sqlite3 *db = open_db(o, 0);
    if (!db)
        return db_failed(o);
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
        return CP_EXIT_PROBLEM;
    }
    sqlite3_bind_text(q, 1, like, -1, SQLITE_TRANSIENT);
    const char *f[] = {o->host, o->rule, o->category, o->job, o->fingerprint};
    for (int i = 0; i < 5; i++)
        if (f[i])
            sqlite3_bind_text(q, i + 2, f[i], -1, SQLITE_TRANSIENT);
    sqlite3_bind_double(q, 7, o->since);
    sqlite3_bind_double(q, 8, o->until);
    sqlite3_bind_int(q, 9, o->limit);
    int rc = CP_EXIT_OK;
    if (o->json)
        rc = json_rows(q, o);
    else
        print_rows(q);
    sqlite3_finalize(q);
    sqlite3_close(db);
    return rc;
}

/* ---- show ---- */

static int do_show(struct dopts *o)
{
    sqlite3 *db = open_db(o, 0);
    if (!db)
        return db_failed(o);
    sqlite3_stmt *q = NULL;
    sqlite3_prepare_v2(db,
                       "SELECT id, time, host, exe, signal, crash_kind, signature, fingerprint, job, rank,"
                       " local_rank, bundle_path, diagnoses,"
                       " (SELECT COUNT(*) FROM crashes c2 WHERE c2.fingerprint = crashes.fingerprint)"
                       " FROM crashes WHERE id = ?1",
                       -1, &q, NULL);
    sqlite3_bind_int64(q, 1, o->id);
    if (sqlite3_step(q) != SQLITE_ROW) {
        fprintf(stderr, "crashpack db: no crash %lld (`crashpack db list` shows them)\n", o->id);
        sqlite3_finalize(q);
        sqlite3_close(db);
        return CP_EXIT_NOTFOUND;
    }
    cJSON *ds = col(q, 12) ? cJSON_Parse(col(q, 12)) : NULL;
    if (o->json) {
        cJSON *j = cp_doc_new("crashpack-db-show/1");
        static const char *names[] = {"id", "time", "host", "exe", "signal", "crash_kind", "signature",
                                      "fingerprint", "job", "rank", "local_rank", "bundle_path"};
        for (int i = 0; i < 12; i++) {
            int t = sqlite3_column_type(q, i);
            if (i == 1) /* time and time_utc */
                cp_doc_time(j, "time", sqlite3_column_double(q, i));
            else if (i == 4) /* signal: an object, as in the report */
                cp_doc_signal(j, col(q, i));
            else if (i == 11) /* bundle.path, as in the report */
                cp_doc_str(cJSON_AddObjectToObject(j, "bundle"), "path", col(q, i));
            else if (t == SQLITE_NULL)
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

/* do_groups' rows as a crashpack-db-groups/1 document. */
static int json_groups(sqlite3_stmt *q, const struct dopts *o)
{
    cJSON *doc = db_doc("crashpack-db-groups/1", o);
    cJSON *arr = cJSON_AddArrayToObject(doc, "groups");
    while (sqlite3_step(q) == SQLITE_ROW) {
        cJSON *g = cJSON_CreateObject();
        cp_doc_str(g, "fingerprint", col(q, 0));
        cJSON_AddNumberToObject(g, "count", sqlite3_column_int(q, 1));
        cp_doc_time(g, "first_seen", sqlite3_column_double(q, 2));
        cp_doc_time(g, "last_seen", sqlite3_column_double(q, 3));
        cJSON *h = cJSON_AddObjectToObject(g, "hosts");
        cJSON_AddNumberToObject(h, "count", sqlite3_column_int(q, 4));
        cJSON *names = cJSON_AddArrayToObject(h, "names"); /* the first 4, sorted */
        for (const char *n = col(q, 5); n && *n; n += strcspn(n, ","), n += *n == ',') {
            char name[256];
            snprintf(name, sizeof(name), "%.*s", (int)strcspn(n, ","), n);
            cJSON_AddItemToArray(names, cJSON_CreateString(name));
        }
        cp_doc_str(g, "top_diagnosis", col(q, 6));
        cp_doc_str(g, "signature", col(q, 7));
        cJSON_AddItemToArray(arr, g);
    }
    cJSON_AddNumberToObject(doc, "count", cJSON_GetArraySize(arr));
    return cp_doc_print(stdout, doc) ? CP_EXIT_PROBLEM : CP_EXIT_OK;
}

static int do_groups(struct dopts *o)
{
    sqlite3 *db = open_db(o, 0);
    if (!db)
        return db_failed(o);
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
        return CP_EXIT_PROBLEM;
    }
    sqlite3_bind_int(q, 1, o->limit);
    if (o->json) {
        int rc = json_groups(q, o);
        sqlite3_finalize(q);
        sqlite3_close(db);
        return rc;
    }
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

struct job_row {
    long long id;
    double time;
    char host[64], title[160], cat[32], rule[64];
    int rank, victim;
};

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

/* One job's rows as an element of crashpack-db-jobs/1's jobs[]. */
static void job_json(cJSON *jobs, const char *job, const struct job_row *rows, size_t n, size_t first)
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
        cJSON_AddStringToObject(r, "host", rows[i].host);
        if (rows[i].rank < 0)
            cJSON_AddNullToObject(r, "rank");
        else
            cJSON_AddNumberToObject(r, "rank", rows[i].rank);
        cJSON_AddStringToObject(r, "role", i == first ? "first" : rows[i].victim ? "consequence" : "other");
        cp_doc_str(r, "top_diagnosis", rows[i].title[0] ? rows[i].title : NULL);
        cp_doc_str(r, "category", rows[i].cat[0] ? rows[i].cat : NULL);
        cp_doc_str(r, "rule", rows[i].rule[0] ? rows[i].rule : NULL);
        cJSON_AddItemToArray(arr, r);
    }
    cJSON_AddItemToArray(jobs, j);
}

/* Prints one job (or, with `jobs` set, appends it there as JSON). Returns 1 when it has crashes. */
static int show_job(sqlite3 *db, const char *job, cJSON *jobs)
{
    sqlite3_stmt *q = NULL;
    sqlite3_prepare_v2(db,
                       "SELECT id, time, host, rank, top_title, top_category, top_consequence_of, top_rule"
                       " FROM crashes WHERE job = ?1 ORDER BY time, id",
                       -1, &q, NULL);
    sqlite3_bind_text(q, 1, job, -1, SQLITE_TRANSIENT);
    struct job_row *rows = NULL;
    size_t n = 0;
    while (sqlite3_step(q) == SQLITE_ROW) {
        struct job_row *nr = realloc(rows, (n + 1) * sizeof(*rows));
        if (!nr)
            break;
        rows = nr;
        struct job_row *r = &rows[n++];
        r->id = sqlite3_column_int64(q, 0);
        r->time = sqlite3_column_double(q, 1);
        snprintf(r->host, sizeof(r->host), "%s", col(q, 2) ? col(q, 2) : "?");
        r->rank = sqlite3_column_type(q, 3) == SQLITE_NULL ? -1 : sqlite3_column_int(q, 3);
        snprintf(r->title, sizeof(r->title), "%s", col(q, 4) ? col(q, 4) : "");
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
    if (jobs) {
        job_json(jobs, job, rows, n, first);
        free(rows);
        return 1;
    }
    char a[32], b[32];
    fmt_time(rows[0].time, a, sizeof(a));
    fmt_time(rows[n - 1].time, b, sizeof(b));
    fputs("job ", stdout);
    put(stdout, job, 0);
    printf(": %zu crash%s, %s .. %s\n", n, n == 1 ? "" : "es", a, b);
    struct job_row *f = &rows[first];
    fmt_time(f->time, a, sizeof(a));
    printf("  first failure: rank %d on ", f->rank);
    put(stdout, f->host, 0);
    printf(" at %s (crash %lld): ", a, f->id);
    put(stdout, f->title[0] ? f->title : "(no diagnosis)", 0);
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
        put(stdout, rows[i].title[0] ? rows[i].title : "(no diagnosis)", 0);
        fputc('\n', stdout);
    }
    free(rows);
    return 1;
}

static int do_jobs(struct dopts *o)
{
    sqlite3 *db = open_db(o, 0);
    if (!db)
        return db_failed(o);
    int shown = 0;
    cJSON *doc = o->json ? db_doc("crashpack-db-jobs/1", o) : NULL;
    cJSON *jobs = doc ? cJSON_AddArrayToObject(doc, "jobs") : NULL;
    if (o->nargs) {
        for (int i = 0; i < o->nargs; i++)
            shown += show_job(db, o->args[i], jobs);
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
            if (shown && !jobs)
                fputc('\n', stdout);
            shown += show_job(db, job, jobs);
        }
        sqlite3_finalize(q);
    }
    if (doc) {
        sqlite3_close(db);
        return cp_doc_print(stdout, doc) ? CP_EXIT_PROBLEM : CP_EXIT_OK;
    }
    if (!shown)
        puts("no crashes with a job id (SLURM_JOB_ID, TORCHELASTIC_RUN_ID, MASTER_ADDR:MASTER_PORT)");
    sqlite3_close(db);
    return 0;
}

/* ---- stats ---- */

/* Prints one block of counts, or with doc set adds it there as doc.key = [{name, count}]. */
static void stat_block(sqlite3 *db, const char *title, const char *sql, cJSON *doc, const char *key)
{
    sqlite3_stmt *q = NULL;
    cJSON *arr = doc ? cJSON_AddArrayToObject(doc, key) : NULL;
    if (!doc)
        printf("%s\n", title);
    if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK)
        return;
    while (arr && sqlite3_step(q) == SQLITE_ROW) {
        cJSON *e = cJSON_CreateObject();
        cp_doc_str(e, "name", col(q, 0));
        cJSON_AddNumberToObject(e, "count", sqlite3_column_int(q, 1));
        cJSON_AddItemToArray(arr, e);
    }
    while (!arr && sqlite3_step(q) == SQLITE_ROW) {
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
        return db_failed(o);
    sqlite3_stmt *q = NULL;
    sqlite3_prepare_v2(db, "SELECT COUNT(*), COUNT(DISTINCT fingerprint), COUNT(DISTINCT host) FROM crashes",
                       -1, &q, NULL);
    cJSON *doc = o->json ? db_doc("crashpack-db-stats/1", o) : NULL;
    int ok = sqlite3_step(q) == SQLITE_ROW;
    if (ok && doc) {
        cJSON_AddNumberToObject(doc, "crashes", sqlite3_column_int(q, 0));
        cJSON_AddNumberToObject(doc, "fingerprints", sqlite3_column_int(q, 1));
        cJSON_AddNumberToObject(doc, "hosts", sqlite3_column_int(q, 2));
    } else if (ok)
        printf("%d crashes, %d distinct fingerprints, %d hosts\n\n", sqlite3_column_int(q, 0),
               sqlite3_column_int(q, 1), sqlite3_column_int(q, 2));
    sqlite3_finalize(q);
    stat_block(db, "per week",
               "SELECT strftime('%Y-W%W', time, 'unixepoch'), COUNT(*) FROM crashes GROUP BY 1 ORDER BY 1 DESC LIMIT 26",
               doc, "per_week");
    stat_block(db, "per diagnosis category",
               "SELECT coalesce(top_category, 'undiagnosed'), COUNT(*) FROM crashes GROUP BY 1 ORDER BY 2 DESC, 1",
               doc, "per_category");
    stat_block(db, "per host", "SELECT host, COUNT(*) FROM crashes GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 50", doc,
               "per_host");
    sqlite3_close(db);
    return doc && cp_doc_print(stdout, doc) ? CP_EXIT_PROBLEM : CP_EXIT_OK;
}

int cmd_db(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? CP_EXIT_USAGE : CP_EXIT_OK;
    }
    const struct cp_subverb *sv = cp_subverb_find(VERB, subverbs, NSUB, argv[1]);
    if (!sv)
        return CP_EXIT_USAGE;
    struct dopts o;
    memset(&o, 0, sizeof(o));
    int rc = parse(&o, sv, argc - 1, argv + 1);
    if (rc >= 0)
        return rc;
    const char *c = sv->name;
    if (!strcmp(c, "add"))
        return do_add(&o);
    if (!strcmp(c, "list"))
        return do_list(&o);
    if (!strcmp(c, "show"))
        return do_show(&o);
    if (!strcmp(c, "groups"))
        return do_groups(&o);
    if (!strcmp(c, "jobs"))
        return do_jobs(&o);
    if (!strcmp(c, "search"))
        return do_search(&o);
    return do_stats(&o);
}
