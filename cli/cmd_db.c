/* cmd_db.c - `crashpack db add|list|show|groups|jobs|search|stats|resolve|unresolve`: the knowledge
 * base of analyzed
 * crashes (db/kb.h). `db add` stores the report `crashpack analyze --json` prints for each bundle,
 * built in-process by the report library (report.h), unless the stored record of the crash is as
 * complete (kb_add_report decides; this file prints what it did). */
#include "capreq.h"
#include "cmdopt.h"
#include "commands.h"
#include "config.h"
#include "dbagent.h"
#include "dbjobs.h"
#include "kbarg.h"
#include "jpath.h"
#include "kb.h"
#include "listjson.h"
#include "query.h"
#include "render.h"
#include "report.h"
#include "resolution.h"
#include "rule.h"
#include "timearg.h"
#include "utf8.h"

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
    "$XDG_DATA_HOME/crashpack/kb.sqlite. A user who names none (no --db, no $CRASHPACK_DB), or\n"
    "--agent: list, show and search ask the node's agent, which answers from the node's\n"
    "knowledge base with the user's own crashes (no agent listening: the default above).\n"
    "TIME: " CP_TIME_FORMS ".\n"
    "Exit status: 0 ok, 1 a problem (a bundle that could not be added), 2 usage error,\n"
    "3 no knowledge base yet, or no such crash or group.\n";

static int do_add(void *p);
static int do_list(void *p);
static int do_show(void *p);
static int do_groups(void *p);
static int do_jobs(void *p);
static int do_search(void *p);
static int do_stats(void *p);
static int do_resolve(void *p);
static int do_unresolve(void *p);

static const struct cp_subverb subverbs[] = {
    {"add", "db report-json diagnose", "BUNDLE... | --report-json FILE [--diagnose] [--db PATH]",
     "Analyzes each bundle and stores the crash. A crash added again is never doubled: the more\n"
     "complete record stays (core analysis, core, bundle not cut short, members, threads\n"
     "unwound; the same bundle again is stored again), and every add is kept as a source\n"
     "(`db show`). A bundle that cannot be analyzed changes nothing (exit 1). --report-json\n"
     "stores report JSON (one report, or an array of them) as it is, or with its diagnoses made\n"
     "again from the rule base (--diagnose).\n",
     0, -1, "BUNDLE", do_add},
    {"list", "db agent limit json", "[--limit N] [--json] [--db PATH | --agent]",
     "Newest crashes first (default 50).\n"
     "  --json       one JSON object (format crashpack-db-list/1)\n",
     0, 0, "", do_list},
    {"show", "db agent json", "ID [--json] [--db PATH | --agent]",
     "One crash with its diagnoses, how complete it is, and every add of it (path, hash, user).\n"
     "  --json       one JSON object (format crashpack-db-show/1)\n",
     1, 1, "ID", do_show},
    {"groups", "db limit json", "[--limit N] [--json] [--db PATH]",
     "Crashes grouped by fingerprint: count, first/last seen, hosts, top diagnosis.\n"
     "  --json       one JSON object (format crashpack-db-groups/1)\n",
     0, 0, "", do_groups},
    {"jobs", "db limit json", "[JOB...] [--limit N] [--json] [--db PATH]",
     "Crashes grouped by job (SLURM_JOB_ID, TORCHELASTIC_RUN_ID, MASTER_ADDR:MASTER_PORT) in time\n"
     "order: the first failing rank, and the later failures that look like its consequences.\n"
     "  --json       one JSON object (format crashpack-db-jobs/1)\n",
     0, -1, "JOB", do_jobs},
    {"search", "db agent host rule category job fingerprint since until limit json",
     "[TEXT] [--host H] [--rule R] [--category C] [--job J] [--fingerprint F]\n"
     "       [--since TIME] [--until TIME] [--limit N] [--json] [--db PATH | --agent]",
     "TEXT matches signature, diagnosis titles and evidence, exe.\n"
     "  --json       one JSON object (format crashpack-db-list/1)\n",
     0, 1, "TEXT", do_search},
    {"stats", "db json", "[--json] [--db PATH]",
     "Crashes per week, per diagnosis category, per host.\n"
     "  --json       one JSON object (format crashpack-db-stats/1)\n",
     0, 0, "", do_stats},
    {"resolve", "db category cause ticket clear json",
     "GROUP --cause TEXT [--category C] [--ticket URL] [--json] [--db PATH]",
     "Records what a group of crashes turned out to be, and marks it resolved. GROUP is a\n"
     "fingerprint (`db groups`) or a crash id (its group). Later crashes of the group show the\n"
     "resolution first (analyze, report, db show); a crash of the group after it makes the group\n"
     "regressed. Resolving again replaces it; --clear removes it (= `db unresolve GROUP`).\n"
     "Needs write access to the knowledge base: root for the node's, or --db naming one's own.\n"
     "  --json       one JSON object (format crashpack-db-resolve/1)\n",
     1, 1, "GROUP", do_resolve},
    {"unresolve", "db json", "GROUP [--json] [--db PATH]",
     "Removes a group's resolution (`db resolve GROUP --clear`): the group is new again.\n"
     "  --json       one JSON object (format crashpack-db-resolve/1)\n",
     1, 1, "GROUP", do_unresolve},
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
    const char *cause, *ticket; /* resolve's */
    double since, until;
    int limit, json, diagnose;
    int clear;   /* resolve --clear, unresolve */
    int agent;   /* --agent: ask the node's agent */
    int named;   /* a knowledge base was named: --db or $CRASHPACK_DB */
    int missing; /* open_db: there is no knowledge base at db */
    long long id; /* show's ID */
    char dbbuf[PATH_MAX];
    int nargs;
    char **args;
};

/* Where the knowledge base is: --db, else the default location (kb_default_path); whether one
 * was named (--db, $CRASHPACK_DB). -1 to go on, else the exit status. */
static int db_location(struct dopts *o)
{
    const char *env = getenv("CRASHPACK_DB");
    o->named = o->db || (env && *env);
    if (!o->db) {
        if (!kb_default_path(o->dbbuf, sizeof(o->dbbuf))) {
            fprintf(stderr, VERB ": no knowledge base location (set --db)\n");
            return CP_EXIT_PROBLEM;
        }
        o->db = o->dbbuf;
    }
    return -1;
}

/* The options of every sub-verb (each takes those its cp_subverb.opts names). */
enum {
    O_DB = 256,
    O_REPORT,
    O_HOST,
    O_RULE,
    O_CATEGORY,
    O_JOB,
    O_FP,
    O_LIMIT,
    O_SINCE,
    O_UNTIL,
    O_JSON,
    O_DIAGNOSE,
    O_AGENT,
    O_CAUSE,
    O_TICKET,
    O_CLEAR
};
static const struct option all_opts[] = {{"db", required_argument, 0, O_DB},
                                         {"report-json", required_argument, 0, O_REPORT},
                                         {"host", required_argument, 0, O_HOST},
                                         {"rule", required_argument, 0, O_RULE},
                                         {"category", required_argument, 0, O_CATEGORY},
                                         {"job", required_argument, 0, O_JOB},
                                         {"fingerprint", required_argument, 0, O_FP},
                                         {"limit", required_argument, 0, O_LIMIT},
                                         {"since", required_argument, 0, O_SINCE},
                                         {"until", required_argument, 0, O_UNTIL},
                                         {"json", no_argument, 0, O_JSON},
                                         {"diagnose", no_argument, 0, O_DIAGNOSE},
                                         {"agent", no_argument, 0, O_AGENT},
                                         {"cause", required_argument, 0, O_CAUSE},
                                         {"ticket", required_argument, 0, O_TICKET},
                                         {"clear", no_argument, 0, O_CLEAR},
                                         CP_OPT_END};

/* argv[0] is the sub-verb. Returns -1 to go on, else the exit status. */
static int parse(struct dopts *o, const struct cp_subverb *sv, int argc, char **argv)
{
    struct option longs[20];
    cp_opt_subset(all_opts, sv->opts, longs, 20);
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
        case O_AGENT:
            o->agent = 1;
            break;
        case O_CAUSE:
            o->cause = optarg;
            break;
        case O_TICKET:
            o->ticket = optarg;
            break;
        case O_CLEAR:
            o->clear = 1;
            break;
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
    if (!strcmp(sv->name, "resolve") && o->clear == !!o->cause) {
        fputs(o->clear ? VERB " resolve: --clear removes the resolution and takes no --cause\n"
                       : VERB " resolve: --cause TEXT is needed (what the group turned out to be),"
                              " or --clear\n",
              stderr);
        return CP_EXIT_USAGE;
    }
    return db_location(o);
}

/* The exit status when open_db failed. */
static int db_failed(const struct dopts *o)
{
    return o->missing ? CP_EXIT_NOTFOUND : CP_EXIT_PROBLEM;
}

static struct kb *open_db(struct dopts *o, int create)
{
    return cp_kb_open("crashpack db", o->db, create ? KB_CREATE : KB_WRITE, &o->missing);
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

/* The stdout line of an add that stored nothing (res: kb_add_report's or kb_add_failure's). */
static void print_failed(const char *path, const struct kb_result *res)
{
    fputs("failed: nothing stored from ", stdout);
    put(stdout, path ? path : "report", 0);
    if (res->id)
        printf("; recorded as a failed source of crash %lld\n", (long long)res->id);
    else
        fputs("; the failure is recorded\n", stdout);
}

/* Prints what kb_add_report did with one report (src: where it came from); 0, or -1 when it was
 * not stored (an SQL error, a failed diagnosis, no crash identity). */
static int add_one(struct kb *db, cJSON *r, const struct kb_source *src, struct rulebase *rb)
{
    char err[1024];
    const char *path = src && !strcmp(src->kind, "bundle") ? src->path : NULL;
    if (rb && rules_diagnose(rb, r, err, sizeof(err)) < 0) {
        fprintf(stderr, "crashpack db: diagnosis: %s\n", err);
        return -1;
    }
    struct kb_result res;
    if (kb_add_report(db, r, src, &res, err, sizeof(err))) {
        fputs("crashpack db: ", stderr);
        put(stderr, path ? path : "report", 0);
        fprintf(stderr, ": %s\n", err);
        return -1;
    }
    if (res.outcome == KB_FAILED) {
        fputs("crashpack db: ", stderr);
        put(stderr, src && src->path ? src->path : "report", 0);
        fputs(": ", stderr);
        put(stderr, res.reason, 0);
        fputc('\n', stderr);
        print_failed(src ? src->path : NULL, &res);
        return -1;
    }
    const cJSON *top = cJSON_GetArrayItem(cJSON_GetObjectItem(r, "diagnoses"), 0);
    printf("%s crash %lld", kb_outcome_name(res.outcome), (long long)res.id);
    if (res.outcome == KB_REPLACED) {
        if (res.legacy)
            fputs(" (the stored record predates completeness scores; this is a complete bundle"
                  " with a complete analysis)", stdout);
        else
            printf(" (more complete: %s)", res.reason);
    } else if (res.outcome == KB_UPDATED) {
        fputs(" (the same bundle again: its analysis is stored again)", stdout);
    } else if (res.outcome == KB_KEPT) {
        if (res.refused)
            printf(" (refused to replace it: %s)", res.reason);
        else if (res.legacy)
            fputs(" (the stored record predates completeness scores: only a complete bundle with a"
                  " complete analysis replaces it)", stdout);
        else if (res.reason[0])
            printf(" (the stored record is more complete: %s)", res.reason);
        else
            fputs(" (equally complete: the stored record stays)", stdout);
    }
    if (path) {
        fputs(res.outcome == KB_KEPT ? "; source recorded: " : " from ", stdout);
        put(stdout, path, 0);
    }
    if (top && res.outcome != KB_KEPT) {
        fputs(": ", stdout);
        put(stdout, cJSON_GetStringValue(cJSON_GetObjectItem(top, "title")), 200);
    }
    fputc('\n', stdout);
    return 0;
}

/* Adds the reports of a --report-json file (one object or an array). 0, or the number of reports
 * not stored; -1 when the file is not readable JSON. */
static int add_report_json(struct kb *db, struct dopts *o)
{
    char err[1024];
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
        return -1;
    }
    struct rulebase *rb = NULL;
    if (o->diagnose && rulebase_open(NULL, db, &rb, err, sizeof(err))) {
        fprintf(stderr, "crashpack db: %s\n", err);
        cJSON_Delete(j);
        return -1;
    }
    char abs[PATH_MAX];
    const char *path = realpath(o->report_json, abs) ? abs : o->report_json;
    int bad = 0;
    cJSON *one = cJSON_IsArray(j) ? j->child : j;
    for (; one; one = cJSON_IsArray(j) ? one->next : NULL) {
        /* the report's identity as given, before --diagnose remakes its diagnoses */
        char hash[17];
        char *text = cJSON_PrintUnformatted(one);
        kb_text_xxh64(text, hash);
        free(text);
        struct kb_source src = {"report-json", path, hash, -1};
        bad += add_one(db, one, &src, rb) != 0;
    }
    rulebase_close(rb);
    cJSON_Delete(j);
    return bad;
}

static int do_add(void *p)
{
    struct dopts *o = p;
    struct kb *db = open_db(o, 1);
    if (!db)
        return db_failed(o);
    int bad = 0;
    char err[1024];
    if (o->report_json) {
        int n = add_report_json(db, o);
        if (n < 0) {
            kb_close(db);
            return CP_EXIT_PROBLEM;
        }
        bad += n;
    }
    for (int i = 0; i < o->nargs; i++) {
        char abs[PATH_MAX], hash[17] = "";
        const char *path = realpath(o->args[i], abs) ? abs : o->args[i];
        long long size = -1;
        struct kb_source src = {"bundle", path, hash, -1};
        if (kb_file_xxh64(path, hash, &size, err, sizeof(err)) == 0)
            src.size = size;
        struct report_opts ro = {.kb = db};
        struct report_status st;
        cJSON *r = report_build(path, &ro, &st);
        if (!r) { /* the error names the bundle */
            fputs("crashpack db add: ", stderr);
            cp_text_put(stderr, st.error);
            fputc('\n', stderr);
            struct kb_result res;
            if (kb_add_failure(db, &src, st.error, &res, err, sizeof(err))) {
                fprintf(stderr, "crashpack db: %s\n", err);
            } else {
                print_failed(path, &res);
            }
            bad++;
            continue;
        }
        render_notes(stderr, "crashpack db", r, st.diagnose_error, st.native_failed, 1);
        bad += add_one(db, r, &src, NULL) != 0;
        cJSON_Delete(r);
    }
    kb_close(db);
    return bad ? 1 : 0;
}

/* ---- list / search ---- */

/* A listing document: {"format": format, "db": {"path": where}}. */
static cJSON *db_doc(const char *format, const char *where)
{
    cJSON *doc = cp_doc_new(format);
    cp_doc_str(cJSON_AddObjectToObject(doc, "db"), "path", where);
    return doc;
}

/* kb_list_crashes' / kb_search_crashes' rows as a crashpack-db-list/1 document. */
static cJSON *rows_doc(const cJSON *rows, const char *where)
{
    cJSON *doc = db_doc("crashpack-db-list/1", where);
    cJSON *arr = cJSON_AddArrayToObject(doc, "crashes");
    const cJSON *c;
    cJSON_ArrayForEach(c, rows)
    {
        cJSON *r = cJSON_CreateObject();
        cJSON_AddNumberToObject(r, "id", cp_jnum_or(c, "id", 0));
        cp_doc_time(r, "time", cp_jnum_or(c, "time", 0));
        cp_doc_str(r, "host", cp_jstr(c, "host"));
        cp_doc_str(r, "job", cp_jstr(c, "job"));
        if (cJSON_IsNumber(cp_jkey(c, "rank")))
            cJSON_AddNumberToObject(r, "rank", cp_jnum_or(c, "rank", 0));
        else
            cJSON_AddNullToObject(r, "rank");
        cp_doc_signal(r, cp_jstr(c, "signal"));
        cp_doc_str(r, "top_diagnosis", cp_jstr(c, "top_title"));
        cp_doc_str(r, "signature", cp_jstr(c, "signature"));
        cJSON_AddItemToArray(arr, r);
    }
    cJSON_AddNumberToObject(doc, "count", cJSON_GetArraySize(arr));
    return doc;
}

/* A crashpack-db-list/1 document as text. */
static void print_rows(const cJSON *doc)
{
    int n = 0;
    const cJSON *r;
    printf("%-6s %-20s %-16s %-22s %-8s %s\n", "id", "time (UTC)", "host", "job/rank", "signal",
           "top diagnosis | signature");
    cJSON_ArrayForEach(r, cp_jkey(doc, "crashes"))
    {
        char t[32], jr[64];
        fmt_time(cp_jnum_or(r, "time", 0), t, sizeof(t));
        const char *job = cp_jstr(r, "job"), *host = cp_jstr(r, "host");
        if (job && cJSON_IsNumber(cp_jkey(r, "rank")))
            snprintf(jr, sizeof(jr), "%.14s/%d", job, (int)cp_jnum_or(r, "rank", 0));
        else
            snprintf(jr, sizeof(jr), "%.22s", job ? job : "-");
        printf("%-6lld %-20s ", (long long)cp_jnum_or(r, "id", 0), t);
        put_col(stdout, host ? host : "-", 16, 16);
        put_col(stdout, jr, 22, 0);
        put_col(stdout, cp_jstr_or(cp_jkey(r, "signal"), "name", "-"), 8, 0);
        put(stdout, cp_jstr_or(r, "top_diagnosis", "(no diagnosis)"), 60);
        fputs(" | ", stdout);
        put(stdout, cp_jstr(r, "signature"), 80);
        fputc('\n', stdout);
        n++;
    }
    printf("%d crash%s\n", n, n == 1 ? "" : "es");
}

/* Prints a listing document (as JSON with --json), or the query's error (exit code 1). */
static int list_out(cJSON *doc, const char *err, const struct dopts *o)
{
    if (!doc) {
        fprintf(stderr, "crashpack db: %s\n", err);
        return CP_EXIT_PROBLEM;
    }
    if (o->json)
        return cp_doc_print(stdout, doc) ? CP_EXIT_PROBLEM : CP_EXIT_OK;
    print_rows(doc);
    cJSON_Delete(doc);
    return CP_EXIT_OK;
}

/* The rows of a query as a listing document; NULL (err set) when the query failed. */
static cJSON *listing(cJSON *rows, const char *where)
{
    cJSON *doc = rows ? rows_doc(rows, where) : NULL;
    cJSON_Delete(rows);
    return doc;
}

/* Which crashes a listing of o's sees (search's filter): every one of the knowledge base the
 * caller opened itself, or uid's (the agent's answer). */
static struct kb_filter search_filter(const struct dopts *o, long long uid)
{
    struct kb_filter f = {o->nargs ? o->args[0] : "",
                          o->host,
                          o->rule,
                          o->category,
                          o->job,
                          o->fingerprint,
                          o->since,
                          o->until,
                          o->limit,
                          uid};
    return f;
}

static int via_agent_or_local(struct dopts *o, const char *query);

static int do_list(void *p)
{
    struct dopts *o = p;
    int rc = via_agent_or_local(o, "list");
    if (rc >= 0)
        return rc;
    struct kb *db = open_db(o, 0);
    if (!db)
        return db_failed(o);
    char err[1024];
    rc = list_out(listing(kb_list_crashes(db, o->limit, KB_ANY_UID, err, sizeof(err)), o->db), err,
                  o);
    kb_close(db);
    return rc;
}

static int do_search(void *p)
{
    struct dopts *o = p;
    int rc = via_agent_or_local(o, "search");
    if (rc >= 0)
        return rc;
    struct kb *db = open_db(o, 0);
    if (!db)
        return db_failed(o);
    char err[1024];
    struct kb_filter f = search_filter(o, KB_ANY_UID);
    rc = list_out(listing(kb_search_crashes(db, &f, err, sizeof(err)), o->db), err, o);
    kb_close(db);
    return rc;
}

/* ---- show ---- */

/* Is a crash_sources outcome the one whose analysis the record holds? */
static int source_is_stored(const char *outcome)
{
    return !strcmp(outcome, "added") || !strcmp(outcome, "replaced") || !strcmp(outcome, "updated");
}

/* A stored completeness object (kb_completeness_json) for a document: a copy, or null. */
static cJSON *completeness_doc(const cJSON *d)
{
    struct kb_completeness k;
    if (!d || kb_completeness_from_json(d, &k))
        return cJSON_CreateNull();
    return kb_completeness_json(&k);
}

/* Every add of the crash (kb_show_crash's sources) as the document's sources[]. */
static void sources_doc(cJSON *j, const cJSON *c)
{
    cJSON *srcs = cJSON_AddArrayToObject(j, "sources");
    const cJSON *e;
    cJSON_ArrayForEach(e, cp_jkey(c, "sources"))
    {
        cJSON *so = cJSON_CreateObject();
        const char *oc = cp_jstr(e, "outcome");
        cp_doc_str(so, "kind", cp_jstr(e, "kind"));
        cp_doc_str(so, "path", cp_jstr(e, "path"));
        cp_doc_str(so, "xxh64", cp_jstr(e, "xxh64"));
        if (cJSON_IsNumber(cp_jkey(e, "size")))
            cJSON_AddNumberToObject(so, "size", cp_jnum_or(e, "size", 0));
        else
            cJSON_AddNullToObject(so, "size");
        cp_doc_time(so, "added", cp_jnum_or(e, "added", 0));
        cJSON *by = cJSON_AddObjectToObject(so, "added_by");
        if (cJSON_IsNumber(cp_jkey(e, "added_uid")))
            cJSON_AddNumberToObject(by, "uid", cp_jnum_or(e, "added_uid", 0));
        else
            cJSON_AddNullToObject(by, "uid");
        cp_doc_str(by, "user", cp_jstr(e, "added_user"));
        cp_doc_str(so, "outcome", oc);
        cJSON_AddBoolToObject(so, "stored", oc && source_is_stored(oc));
        cJSON_AddItemToObject(so, "completeness", completeness_doc(cp_jkey(e, "completeness_detail")));
        cp_doc_str(so, "reason", cp_jstr(e, "reason"));
        cp_doc_str(so, "error", cp_jstr(e, "error"));
        cJSON_AddItemToArray(srcs, so);
    }
}

/* The crash's group's resolution row (kb_resolution_of; uid: whose crashes count for its status)
 * into c as c.resolution, for show_doc. */
static void attach_resolution(struct kb *db, cJSON *c, long long uid)
{
    cJSON *row = c ? kb_resolution_of(db, cp_jstr(c, "fingerprint"), uid) : NULL;
    if (row)
        cJSON_AddItemToObject(c, "resolution", row);
}

/* kb_show_crash's record as a crashpack-db-show/1 document, which `db show` prints as JSON or
 * renders as text (render_db_show). */
static cJSON *show_doc(const cJSON *c)
{
    cJSON *j = cp_doc_new("crashpack-db-show/1");
    /* first: what the team found the crash's group to be (resolution.h), or null */
    const cJSON *res = cp_jkey(c, "resolution");
    cJSON_AddItemToObject(j, "resolution",
                          cJSON_IsObject(res)
                              ? kb_resolution_doc(res, "fingerprint", cp_jnum_or(c, "time", 0))
                              : cJSON_CreateNull());
    static const char *names[] = {"id", "time", "host", "exe", "signal", "crash_kind", "signature",
                                  "fingerprint", "job", "rank", "local_rank", "bundle_path"};
    for (int i = 0; i < 12; i++) {
        const cJSON *v = cp_jkey(c, names[i]);
        if (i == 1) { /* time and time_utc */
            cp_doc_time(j, "time", cp_jnum_or(c, "time", 0));
        } else if (i == 4) { /* signal: an object, as in the report */
            cp_doc_signal(j, cp_jstr(c, "signal"));
        } else if (i == 11) { /* bundle.path, as in the report; and the file's hash */
            cJSON *b = cJSON_AddObjectToObject(j, "bundle");
            cp_doc_str(b, "path", cp_jstr(c, "bundle_path"));
            cp_doc_str(b, "xxh64", cp_jstr(c, "bundle_xxh64"));
        } else if (cJSON_IsNumber(v)) {
            cJSON_AddNumberToObject(j, names[i], v->valuedouble);
        } else {
            cp_doc_str(j, names[i], cJSON_GetStringValue(v));
        }
    }
    const cJSON *ds = cp_jkey(c, "diagnoses");
    cJSON_AddNumberToObject(j, "seen", cp_jnum_or(c, "seen", 0));
    cJSON_AddItemToObject(j, "diagnoses", ds ? cJSON_Duplicate(ds, 1) : cJSON_CreateArray());
    cJSON_AddItemToObject(j, "completeness", completeness_doc(cp_jkey(c, "completeness_detail")));
    sources_doc(j, c);
    return j;
}

/* A crashpack-db-show/1 document, as JSON with --json or as text. */
static int show_out(cJSON *doc, const struct dopts *o)
{
    if (o->json)
        return cp_doc_print(stdout, doc) ? CP_EXIT_PROBLEM : CP_EXIT_OK;
    render_db_show(stdout, doc);
    cJSON_Delete(doc);
    return CP_EXIT_OK;
}

static int do_show(void *p)
{
    struct dopts *o = p;
    int rc = via_agent_or_local(o, "show");
    if (rc >= 0)
        return rc;
    struct kb *db = open_db(o, 0);
    if (!db)
        return db_failed(o);
    char err[1024];
    int found;
    cJSON *c = kb_show_crash(db, o->id, KB_ANY_UID, &found, err, sizeof(err));
    attach_resolution(db, c, KB_ANY_UID);
    kb_close(db);
    if (!c) {
        if (found)
            fprintf(stderr, "crashpack db: %s\n", err);
        else
            fprintf(stderr, "crashpack db: no crash %lld (`crashpack db list` shows them)\n", o->id);
        return found ? CP_EXIT_PROBLEM : CP_EXIT_NOTFOUND;
    }
    cJSON *doc = show_doc(c);
    cJSON_Delete(c);
    return show_out(doc, o);
}

/* ---- groups ---- */

/* A kb_groups row's status (resolution.h: new, resolved, regressed) and resolution (null: none)
 * into the group's object g. */
static void group_resolution(cJSON *g, const cJSON *q)
{
    const cJSON *res = cJSON_IsNumber(cp_jkey(q, "resolved")) ? q : NULL;
    enum kb_group_status st = kb_group_status(res, cp_jnum_or(q, "last", 0));
    cJSON_AddStringToObject(g, "status", kb_group_status_name(st));
    cJSON_AddItemToObject(g, "resolution",
                          res ? kb_resolution_doc(res, NULL, 0) : cJSON_CreateNull());
}

/* kb_groups' rows as a crashpack-db-groups/1 document. */
static int json_groups(const cJSON *rows, const struct dopts *o)
{
    cJSON *doc = db_doc("crashpack-db-groups/1", o->db);
    cJSON *arr = cJSON_AddArrayToObject(doc, "groups");
    const cJSON *q;
    cJSON_ArrayForEach(q, rows)
    {
        cJSON *g = cJSON_CreateObject();
        cp_doc_str(g, "fingerprint", cp_jstr(q, "fingerprint"));
        cJSON_AddNumberToObject(g, "count", cp_jnum_or(q, "count", 0));
        cp_doc_time(g, "first_seen", cp_jnum_or(q, "first", 0));
        cp_doc_time(g, "last_seen", cp_jnum_or(q, "last", 0));
        cJSON *h = cJSON_AddObjectToObject(g, "hosts");
        cJSON_AddNumberToObject(h, "count", cp_jnum_or(q, "hosts", 0));
        cJSON *names = cJSON_AddArrayToObject(h, "names"); /* the first 4, sorted */
        for (const char *n = cp_jstr(q, "host_list"); n && *n; n += strcspn(n, ","), n += *n == ',') {
            char name[256];
            snprintf(name, sizeof(name), "%.*s", (int)strcspn(n, ","), n);
            cJSON_AddItemToArray(names, cJSON_CreateString(name));
        }
        cp_doc_str(g, "top_diagnosis", cp_jstr(q, "top_title"));
        cp_doc_str(g, "signature", cp_jstr(q, "signature"));
        group_resolution(g, q);
        cJSON_AddItemToArray(arr, g);
    }
    cJSON_AddNumberToObject(doc, "count", cJSON_GetArraySize(arr));
    return cp_doc_print(stdout, doc) ? CP_EXIT_PROBLEM : CP_EXIT_OK;
}

/* A resolution's cause and, in parentheses, its ticket (each cut at its max; 0: whole). */
static void put_cause(const cJSON *res, int max_cause, int max_ticket)
{
    put(stdout, cp_jstr(res, "cause"), max_cause);
    if (cp_jstr(res, "ticket")) {
        fputs(" (", stdout);
        put(stdout, cp_jstr(res, "ticket"), max_ticket);
        fputc(')', stdout);
    }
}

/* The resolution line of a group in `db groups`' text (res: kb_resolution_doc's, or null). */
static void print_group_resolution(const cJSON *res)
{
    if (!cJSON_IsObject(res))
        return;
    char t[32];
    fmt_time(cp_jnum_or(res, "resolved", 0), t, sizeof(t));
    fputs("       resolution: ", stdout);
    put_cause(res, 120, 200);
    printf(", %s by ", t);
    put(stdout, cp_jstr_or(cp_jkey(res, "resolved_by"), "user", "?"), 64);
    fputc('\n', stdout);
}

static int do_groups(void *p)
{
    struct dopts *o = p;
    struct kb *db = open_db(o, 0);
    if (!db)
        return db_failed(o);
    char err[1024];
    cJSON *rows = kb_groups(db, o->limit, err, sizeof(err));
    kb_close(db);
    if (!rows) {
        fprintf(stderr, "crashpack db: %s\n", err);
        return CP_EXIT_PROBLEM;
    }
    if (o->json) {
        int rc = json_groups(rows, o);
        cJSON_Delete(rows);
        return rc;
    }
    printf("%-6s %-9s %-20s %-20s %-6s %-18s %s\n", "count", "status", "first seen", "last seen",
           "hosts", "fingerprint", "top diagnosis | signature");
    int groups = 0;
    const cJSON *g;
    cJSON_ArrayForEach(g, rows)
    {
        char a[32], b[32];
        fmt_time(cp_jnum_or(g, "first", 0), a, sizeof(a));
        fmt_time(cp_jnum_or(g, "last", 0), b, sizeof(b));
        int hosts = (int)cp_jnum_or(g, "hosts", 0);
        cJSON *st = cJSON_CreateObject();
        group_resolution(st, g);
        printf("%-6d %-9s %-20s %-20s %-6d ", (int)cp_jnum_or(g, "count", 0), cp_jstr(st, "status"),
               a, b, hosts);
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
        print_group_resolution(cp_jkey(st, "resolution"));
        cJSON_Delete(st);
        groups++;
    }
    printf("%d group%s\n", groups, groups == 1 ? "" : "s");
    cJSON_Delete(rows);
    return 0;
}

/* ---- jobs (db_jobs.c) ---- */

static int do_jobs(void *p)
{
    struct dopts *o = p;
    struct kb *db = open_db(o, 0);
    if (!db)
        return db_failed(o);
    int shown = 0;
    cJSON *doc = o->json ? db_doc("crashpack-db-jobs/1", o->db) : NULL;
    cJSON *jobs = doc ? cJSON_AddArrayToObject(doc, "jobs") : NULL;
    if (o->nargs) {
        for (int i = 0; i < o->nargs; i++)
            shown += db_show_job(db, o->args[i], jobs);
    } else {
        char err[1024];
        cJSON *list = kb_jobs(db, o->limit, err, sizeof(err));
        const cJSON *j;
        cJSON_ArrayForEach(j, list)
        {
            char job[512];
            snprintf(job, sizeof(job), "%s", cp_jstr_or(j, "job", ""));
            if (shown && !jobs)
                fputc('\n', stdout);
            shown += db_show_job(db, job, jobs);
        }
        cJSON_Delete(list);
    }
    if (doc) {
        kb_close(db);
        return cp_doc_print(stdout, doc) ? CP_EXIT_PROBLEM : CP_EXIT_OK;
    }
    if (!shown)
        puts("no crashes with a job id (SLURM_JOB_ID, TORCHELASTIC_RUN_ID, MASTER_ADDR:MASTER_PORT)");
    kb_close(db);
    return 0;
}

/* ---- stats ---- */

/* Prints one block of counts, or with doc set adds it there as doc.key = [{name, count}]. */
static void stat_block(const char *title, const cJSON *rows, cJSON *doc, const char *key)
{
    const cJSON *r;
    if (doc) {
        cJSON *arr = cJSON_AddArrayToObject(doc, key);
        cJSON_ArrayForEach(r, rows)
        {
            cJSON *e = cJSON_CreateObject();
            cp_doc_str(e, "name", cp_jstr(r, "key"));
            cJSON_AddNumberToObject(e, "count", cp_jnum_or(r, "count", 0));
            cJSON_AddItemToArray(arr, e);
        }
        return;
    }
    printf("%s\n", title);
    cJSON_ArrayForEach(r, rows)
    {
        printf("  %6d  ", (int)cp_jnum_or(r, "count", 0));
        put(stdout, cp_jstr_or(r, "key", "(none)"), 60);
        fputc('\n', stdout);
    }
}

static int do_stats(void *p)
{
    struct dopts *o = p;
    struct kb *db = open_db(o, 0);
    if (!db)
        return db_failed(o);
    char err[1024];
    cJSON *st = kb_stats(db, err, sizeof(err));
    kb_close(db);
    if (!st) {
        fprintf(stderr, "crashpack db: %s\n", err);
        return CP_EXIT_PROBLEM;
    }
    cJSON *doc = o->json ? db_doc("crashpack-db-stats/1", o->db) : NULL;
    if (doc) {
        cJSON_AddNumberToObject(doc, "crashes", cp_jnum_or(st, "crashes", 0));
        cJSON_AddNumberToObject(doc, "fingerprints", cp_jnum_or(st, "fingerprints", 0));
        cJSON_AddNumberToObject(doc, "hosts", cp_jnum_or(st, "hosts", 0));
    } else {
        printf("%d crashes, %d distinct fingerprints, %d hosts\n\n", (int)cp_jnum_or(st, "crashes", 0),
               (int)cp_jnum_or(st, "fingerprints", 0), (int)cp_jnum_or(st, "hosts", 0));
    }
    stat_block("per week", cp_jkey(st, "per_week"), doc, "per_week");
    stat_block("per diagnosis category", cp_jkey(st, "per_category"), doc, "per_category");
    stat_block("per host", cp_jkey(st, "per_host"), doc, "per_host");
    cJSON_Delete(st);
    return doc && cp_doc_print(stdout, doc) ? CP_EXIT_PROBLEM : CP_EXIT_OK;
}

/* ---- resolve / unresolve ---- */

/* What resolve or unresolve did (action: resolved, unresolved, none; res: the group's resolution
 * now, kb_resolution_doc's, consumed; NULL: none) as one line, or with --json a
 * crashpack-db-resolve/1 document. */
static int resolve_out(const struct dopts *o, const char *fp, const char *action, cJSON *res)
{
    const char *status = res ? cp_jstr(res, "status") : "new";
    if (o->json) {
        cJSON *doc = db_doc("crashpack-db-resolve/1", o->db);
        cp_doc_str(doc, "fingerprint", fp);
        cJSON_AddStringToObject(doc, "action", action);
        cJSON_AddStringToObject(doc, "status", status ? status : "new");
        cJSON_AddItemToObject(doc, "resolution", res ? res : cJSON_CreateNull());
        return cp_doc_print(stdout, doc) ? CP_EXIT_PROBLEM : CP_EXIT_OK;
    }
    if (!strcmp(action, "resolved")) {
        fputs("resolved group ", stdout);
        put(stdout, fp, 0);
        fputs(": ", stdout);
        put_cause(res, 0, 0);
        fputc('\n', stdout);
    } else {
        fputs(!strcmp(action, "unresolved") ? "unresolved group " : "group ", stdout);
        put(stdout, fp, 0);
        fputs(!strcmp(action, "unresolved") ? ": it is new again\n"
                                            : " had no resolution: nothing changed\n",
              stdout);
    }
    cJSON_Delete(res);
    return CP_EXIT_OK;
}

/* The group GROUP names (kb_group_of) into fp: -1 to go on, else the exit status after its
 * one-line error. */
static int group_arg(struct kb *db, const char *arg, char *fp, size_t fplen)
{
    char err[1024];
    int rc = kb_group_of(db, arg, fp, fplen, err, sizeof(err));
    if (rc > 0)
        return -1;
    if (rc < 0) {
        fprintf(stderr, "crashpack db: %s\n", err);
        return CP_EXIT_PROBLEM;
    }
    fputs("crashpack db: no group or crash `", stderr);
    put(stderr, arg, 200);
    fputs("` in the knowledge base (`crashpack db groups` shows the groups)\n", stderr);
    return CP_EXIT_NOTFOUND;
}

static int do_resolve(void *p)
{
    struct dopts *o = p;
    if (geteuid() != 0 && !o->named) {
        fprintf(stderr, "crashpack db: resolving needs write access to the node's knowledge base"
                        " (root); as a user, name a knowledge base of your own with --db PATH\n");
        return CP_EXIT_PROBLEM;
    }
    struct kb *db = open_db(o, 0);
    if (!db)
        return db_failed(o);
    char err[1024], fp[1024];
    int rc = group_arg(db, o->args[0], fp, sizeof(fp));
    if (rc >= 0) {
        kb_close(db);
        return rc;
    }
    if (o->clear)
        rc = kb_unresolve(db, fp, err, sizeof(err));
    else
        rc = kb_resolve(db, fp, o->cause, o->category, o->ticket, err, sizeof(err));
    cJSON *row = rc >= 0 ? kb_resolution_of(db, fp, KB_ANY_UID) : NULL;
    kb_close(db);
    if (rc < 0) {
        fprintf(stderr, "crashpack db: %s\n", err);
        return CP_EXIT_PROBLEM;
    }
    cJSON *res = row ? kb_resolution_doc(row, NULL, 0) : NULL;
    cJSON_Delete(row);
    return resolve_out(o, fp, !o->clear ? "resolved" : rc ? "unresolved" : "none", res);
}

static int do_unresolve(void *p)
{
    ((struct dopts *)p)->clear = 1;
    return do_resolve(p);
}

/* ---- through the node's agent (docs/db.md) ---- */

/* A list/show/search as the agent's request {"op":"db","query":...}. */
static char *agent_query_of(const struct dopts *o, const char *query)
{
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "op", "db");
    cJSON_AddStringToObject(r, "query", query);
    cJSON_AddNumberToObject(r, "limit", o->limit);
    if (!strcmp(query, "show"))
        cJSON_AddNumberToObject(r, "id", (double)o->id);
    if (!strcmp(query, "search")) {
        const char *keys[] = {"text", "host", "rule", "category", "job", "fingerprint"};
        const char *vals[] = {
            o->nargs ? o->args[0] : NULL, o->host, o->rule, o->category, o->job, o->fingerprint};
        for (int i = 0; i < 6; i++)
            if (vals[i])
                cJSON_AddStringToObject(r, keys[i], vals[i]);
        cJSON_AddNumberToObject(r, "since", o->since);
        cJSON_AddNumberToObject(r, "until", o->until);
    }
    char *s = cJSON_PrintUnformatted(r);
    cJSON_Delete(r);
    return s;
}

/* list/show/search through the agent, for a user who named no knowledge base of its own (or with
 * --agent): the exit status, or -1 to read the knowledge base locally (not through the agent;
 * no agent listens and --agent was not given). */
static int via_agent_or_local(struct dopts *o, const char *query)
{
    if (!o->agent && (o->named || geteuid() == 0))
        return -1;
    struct cp_config cfg;
    char cerr[300];
    cp_config_defaults(&cfg);
    if (cp_config_load(&cfg, CP_DEFAULT_CONFIG, 0, cerr, sizeof(cerr)))
        cp_config_defaults(&cfg);
    const char *sock = capreq_socket(&cfg);
    char *req = agent_query_of(o, query), *reply = NULL, err[700];
    int rc = req ? capreq_agent_alloc(sock, req, strlen(req), 60000, 256u << 20, &reply, err,
                                      sizeof(err))
                 : -2;
    free(req);
    if (rc == -1 && !o->agent)
        return -1; /* no agent here: the user's own knowledge base */
    if (rc) {
        fprintf(stderr, "crashpack db: %s\n", rc == -2 && !req ? "out of memory" : err);
        return CP_EXIT_PROBLEM;
    }
    cJSON *a = cJSON_Parse(reply);
    free(reply);
    cJSON *doc = cJSON_IsTrue(cp_jkey(a, "ok")) ? cJSON_DetachItemFromObject(a, "document") : NULL;
    if (!cJSON_IsObject(doc)) {
        fputs("crashpack db: the agent: ", stderr);
        cp_text_put(stderr, cp_jstr_or(a, "error", "no valid answer"));
        fputc('\n', stderr);
        rc = cJSON_IsTrue(cp_jkey(a, "not_found")) ? CP_EXIT_NOTFOUND : CP_EXIT_PROBLEM;
        cJSON_Delete(a);
        cJSON_Delete(doc);
        return rc;
    }
    cJSON_Delete(a);
    cJSON *dbo = cJSON_GetObjectItemCaseSensitive(doc, "db");
    if (cJSON_IsObject(dbo))
        cJSON_AddStringToObject(dbo, "agent", sock);
    return !strcmp(query, "show") ? show_out(doc, o) : list_out(doc, NULL, o);
}

cJSON *db_agent_answer(const char *where, const cJSON *req, unsigned uid, int *notfound, char *err,
                       size_t errlen)
{
    *notfound = 0;
    struct kb *db = NULL;
    int rc = kb_open(where, KB_WRITE, &db, err, errlen); /* brought to the schema with uids */
    if (rc) {
        *notfound = rc == KB_ENOENT;
        return NULL;
    }
    const char *q = cp_jstr(req, "query");
    double lim = cp_jnum_or(req, "limit", 50);
    int limit = lim < 1 ? 1 : lim > 100000 ? 100000 : (int)lim;
    cJSON *doc = NULL;
    if (q && !strcmp(q, "show")) {
        int found = 0;
        long long id = (long long)cp_jnum_or(req, "id", 0);
        cJSON *c = kb_show_crash(db, id, uid, &found, err, errlen);
        attach_resolution(db, c, uid);
        if (!c && !found) {
            *notfound = 1;
            snprintf(err, errlen, "no crash %lld of yours in the node's knowledge base", id);
        }
        doc = c ? show_doc(c) : NULL;
        cJSON_Delete(c);
    } else if (q && !strcmp(q, "search")) {
        struct kb_filter f = {cp_jstr_or(req, "text", ""),
                              cp_jstr(req, "host"),
                              cp_jstr(req, "rule"),
                              cp_jstr(req, "category"),
                              cp_jstr(req, "job"),
                              cp_jstr(req, "fingerprint"),
                              cp_jnum_or(req, "since", 0),
                              cp_jnum_or(req, "until", 1e18),
                              limit,
                              (long long)uid};
        doc = listing(kb_search_crashes(db, &f, err, errlen), where);
    } else {
        doc = listing(kb_list_crashes(db, limit, (long long)uid, err, errlen), where);
    }
    kb_close(db);
    return doc;
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
    return sv->run(&o);
}
