/* cmd_db.c - `crashpack db add|list|show|groups|jobs|search|stats`: the knowledge base of analyzed
 * crashes (db/kb.h). `db add` stores the report `crashpack analyze --json` prints for each bundle,
 * built in-process by the report library (report.h). */
#include "commands.h"
#include "jpath.h"
#include "kb.h"
#include "query.h"
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
            kb_close(db);
            return 2;
        }
        struct rulebase *rb = NULL;
        if (o->diagnose && rulebase_open(NULL, o->db, &rb, err, sizeof(err))) {
            fprintf(stderr, "crashpack db: %s\n", err);
            cJSON_Delete(j);
            kb_close(db);
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
    kb_close(db);
    return bad ? 1 : 0;
}

/* ---- list / search ---- */

static void print_rows(const cJSON *rows)
{
    int n = 0;
    const cJSON *r;
    printf("%-6s %-20s %-16s %-22s %-8s %s\n", "id", "time (UTC)", "host", "job/rank", "signal",
           "top diagnosis | signature");
    cJSON_ArrayForEach(r, rows)
    {
        char t[32], jr[64];
        fmt_time(cp_jnum_or(r, "time", 0), t, sizeof(t));
        const char *job = cp_jstr(r, "job"), *host = cp_jstr(r, "host");
        if (job && !cJSON_IsNull(cp_jkey(r, "rank")))
            snprintf(jr, sizeof(jr), "%.14s/%d", job, (int)cp_jnum_or(r, "rank", 0));
        else
            snprintf(jr, sizeof(jr), "%.22s", job ? job : "-");
        printf("%-6lld %-20s ", (long long)cp_jnum_or(r, "id", 0), t);
        put_col(stdout, host ? host : "-", 16, 16);
        put_col(stdout, jr, 22, 0);
        put_col(stdout, cp_jstr_or(r, "signal", "-"), 8, 0);
        put(stdout, cp_jstr_or(r, "top_title", "(no diagnosis)"), 60);
        fputs(" | ", stdout);
        put(stdout, cp_jstr(r, "signature"), 80);
        fputc('\n', stdout);
        n++;
    }
    printf("%d crash%s\n", n, n == 1 ? "" : "es");
}

/* Prints a listing's rows, or the query's error (exit code 2). */
static int list_out(cJSON *rows, const char *err)
{
    if (!rows) {
        fprintf(stderr, "crashpack db: %s\n", err);
        return 2;
    }
    print_rows(rows);
    cJSON_Delete(rows);
    return 0;
}

static int do_list(struct dopts *o)
{
    sqlite3 *db = open_db(o, 0);
    if (!db)
        return 2;
    char err[1024];
    int rc = list_out(kb_list_crashes(db, o->limit, err, sizeof(err)), err);
    kb_close(db);
    return rc;
}

static int do_search(struct dopts *o)
{
    sqlite3 *db = open_db(o, 0);
    if (!db)
        return 2;
    char err[1024];
    struct kb_filter f = {o->nargs ? o->args[0] : "",
                          o->host,
                          o->rule,
                          o->category,
                          o->job,
                          o->fingerprint,
                          o->since,
                          o->until,
                          o->limit};
    int rc = list_out(kb_search_crashes(db, &f, err, sizeof(err)), err);
    kb_close(db);
    return rc;
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
    char err[1024];
    int found;
    cJSON *c = kb_show_crash(db, atoll(o->args[0]), &found, err, sizeof(err));
    kb_close(db);
    if (!c) {
        if (found)
            fprintf(stderr, "crashpack db: %s\n", err);
        else
            fprintf(stderr, "crashpack db: no crash %s\n", o->args[0]);
        return found ? 2 : 1;
    }
    const cJSON *ds = cp_jkey(c, "diagnoses");
    if (o->json) {
        char *s = cJSON_Print(c);
        puts(s ? s : "{}");
        free(s);
    } else {
        char t[32];
        fmt_time(cp_jnum_or(c, "time", 0), t, sizeof(t));
        static const char *names[] = {"id",     "time",       "host",       "exe",
                                      "signal", "crash_kind", "signature",  "fingerprint",
                                      "job",    "rank",       "local_rank", "bundle_path"};
        static const char *labels[] = {"id", "time", "host", "exe", "signal", "kind", "signature",
                                       "fingerprint", "job", "rank", "local rank", "bundle"};
        for (int i = 0; i < 12; i++) {
            printf("%-12s", labels[i]);
            const cJSON *v = cp_jkey(c, names[i]);
            if (i == 1)
                fputs(t, stdout);
            else if (cJSON_IsNumber(v)) /* an INTEGER column (id, rank, local_rank) */
                printf("%.15g", v->valuedouble);
            else
                put(stdout, cJSON_GetStringValue(v), 0);
            fputc('\n', stdout);
        }
        printf("%-12s%d time(s) with this fingerprint\n", "seen", (int)cp_jnum_or(c, "seen", 0));
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
    }
    cJSON_Delete(c);
    return 0;
}

/* ---- groups ---- */

static int do_groups(struct dopts *o)
{
    sqlite3 *db = open_db(o, 0);
    if (!db)
        return 2;
    char err[1024];
    cJSON *rows = kb_groups(db, o->limit, err, sizeof(err));
    kb_close(db);
    if (!rows) {
        fprintf(stderr, "crashpack db: %s\n", err);
        return 2;
    }
    printf("%-6s %-20s %-20s %-6s %-18s %s\n", "count", "first seen", "last seen", "hosts",
           "fingerprint", "top diagnosis | signature");
    int groups = 0;
    const cJSON *g;
    cJSON_ArrayForEach(g, rows)
    {
        char a[32], b[32];
        fmt_time(cp_jnum_or(g, "first", 0), a, sizeof(a));
        fmt_time(cp_jnum_or(g, "last", 0), b, sizeof(b));
        int hosts = (int)cp_jnum_or(g, "hosts", 0);
        printf("%-6d %-20s %-20s %-6d ", (int)cp_jnum_or(g, "count", 0), a, b, hosts);
        const char *fpv = cp_jstr_or(g, "fingerprint", "-");
        put(stdout, fpv, 18);
        printf("%*s ", (int)(strlen(fpv) < 18 ? 18 - strlen(fpv) : 0), "");
        put(stdout, cp_jstr_or(g, "top_title", "(no diagnosis)"), 60);
        fputs(" | ", stdout);
        put(stdout, cp_jstr(g, "signature"), 80);
        fputs("\n       hosts: ", stdout);
        put(stdout, cp_jstr(g, "host_list"), 120);
        if (hosts > 4)
            printf(", ... (%d)", hosts);
        fputc('\n', stdout);
        groups++;
    }
    printf("%d group%s\n", groups, groups == 1 ? "" : "s");
    cJSON_Delete(rows);
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
    char err[1024]; /* a failed query lists no crashes */
    cJSON *crashes = kb_job_crashes(db, job, err, sizeof(err));
    struct row {
        long long id;
        double time;
        char host[64], title[160], cat[32], rule[64];
        int rank, victim;
    } *rows = NULL;
    size_t n = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, crashes)
    {
        struct row *nr = realloc(rows, (n + 1) * sizeof(*rows));
        if (!nr)
            break;
        rows = nr;
        struct row *r = &rows[n++];
        r->id = (long long)cp_jnum_or(c, "id", 0);
        r->time = cp_jnum_or(c, "time", 0);
        snprintf(r->host, sizeof(r->host), "%s", cp_jstr_or(c, "host", "?"));
        r->rank = cJSON_IsNull(cp_jkey(c, "rank")) ? -1 : (int)cp_jnum_or(c, "rank", 0);
        snprintf(r->title, sizeof(r->title), "%s", cp_jstr_or(c, "top_title", "(no diagnosis)"));
        snprintf(r->cat, sizeof(r->cat), "%s", cp_jstr_or(c, "top_category", ""));
        snprintf(r->rule, sizeof(r->rule), "%s", cp_jstr_or(c, "top_rule", ""));
        r->victim = victim(cp_jstr(c, "top_category"), cp_jstr(c, "top_consequence_of"));
    }
    cJSON_Delete(crashes);
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
        char err[1024];
        cJSON *jobs = kb_jobs(db, o->limit, err, sizeof(err));
        const cJSON *j;
        cJSON_ArrayForEach(j, jobs)
        {
            char job[512];
            snprintf(job, sizeof(job), "%s", cp_jstr_or(j, "job", ""));
            if (shown)
                fputc('\n', stdout);
            shown += show_job(db, job);
        }
        cJSON_Delete(jobs);
    }
    if (!shown)
        puts("no crashes with a job id (SLURM_JOB_ID, TORCHELASTIC_RUN_ID, MASTER_ADDR:MASTER_PORT)");
    kb_close(db);
    return 0;
}

/* ---- stats ---- */

static void stat_block(const char *title, const cJSON *rows)
{
    const cJSON *r;
    printf("%s\n", title);
    cJSON_ArrayForEach(r, rows)
    {
        printf("  %6d  ", (int)cp_jnum_or(r, "count", 0));
        put(stdout, cp_jstr_or(r, "key", "(none)"), 60);
        fputc('\n', stdout);
    }
}

static int do_stats(struct dopts *o)
{
    sqlite3 *db = open_db(o, 0);
    if (!db)
        return 2;
    char err[1024];
    cJSON *st = kb_stats(db, err, sizeof(err));
    kb_close(db);
    if (!st) {
        fprintf(stderr, "crashpack db: %s\n", err);
        return 2;
    }
    printf("%d crashes, %d distinct fingerprints, %d hosts\n\n", (int)cp_jnum_or(st, "crashes", 0),
           (int)cp_jnum_or(st, "fingerprints", 0), (int)cp_jnum_or(st, "hosts", 0));
    stat_block("per week", cp_jkey(st, "per_week"));
    stat_block("per diagnosis category", cp_jkey(st, "per_category"));
    stat_block("per host", cp_jkey(st, "per_host"));
    cJSON_Delete(st);
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
