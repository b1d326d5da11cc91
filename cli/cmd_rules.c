/* cmd_rules.c - `crashpack rules list|show|test|add|import|export`: the rule base (rules/rule.h)
 * and the team's own rules kept in the knowledge base (db/kb.h). */
#include "cmdopt.h"
#include "commands.h"
#include "jpath.h"
#include "kbarg.h"
#include "listjson.h"
#include "kb.h"
#include "query.h"
#include "outfile.h"
#include "render.h"
#include "report.h"
#include "resolution.h"
#include "rule.h"
#include "utf8.h"

#include <cjson/cJSON.h>

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

cJSON *rule_read_file(const char *path, char *err, size_t errlen);

#define VERB "crashpack rules"
#define RULES_EXPORT_FORMAT "crashpack-rules-export/1"

static const char footer[] =
    "Built-in rules are the files under the data directory's rules/builtin/; user rules live in\n"
    "the knowledge base (--db, default $CRASHPACK_DB, /var/lib/crashpack/kb.sqlite for root,\n"
    "else $XDG_DATA_HOME/crashpack/kb.sqlite) and override built-ins with the same id.\n"
    "Exit status: 0 ok, 1 a problem (a rule test failed, a rule was rejected), 2 usage error,\n"
    "3 no such rule, crash, file or knowledge base.\n";

static int do_list(void *p);
static int do_show(void *p);
static int do_test(void *p);
static int do_add(void *p);
static int do_export(void *p);
static int do_match(void *p);

static const struct cp_subverb subverbs[] = {
    {"list", "db json", "[--json] [--db PATH]",
     "Every effective rule: id, source, category, confidence, title.\n"
     "  --json       one JSON object (format crashpack-rules-list/1)\n",
     0, 0, "", do_list},
    {"show", "db json", "ID [--json] [--db PATH]",
     "One rule, as JSON (the rule file format, docs/rules.md).\n", 1, 1, "ID", do_show},
    {"test", "db", "[ID...] [--db PATH]",
     "Runs each rule against its own positive and near-miss cases; fails when a rule lacks them,\n"
     "the positive case does not match, the near-miss matches, or they differ in more than one\n"
     "condition.\n",
     0, -1, "ID", do_test},
    {"add", "db from-crash output", "FILE | --from-crash ID [-o FILE] [--db PATH]",
     "Adds (or replaces, by id) a user rule from a JSON file. --from-crash drafts a rule from a\n"
     "crash stored in the knowledge base (printed or written to -o, not stored: edit it, then\n"
     "`rules add` it).\n",
     0, 1, "FILE", do_add},
    {"import", "db", "FILE [--db PATH]",
     "Adds the rules of a JSON file (one rule, an array, or `rules export`'s document) and the\n"
     "document's group resolutions (`db resolve`): for each fingerprint the better one stays, the\n"
     "newer (at the same time, the one with more of ticket and category); each line says what\n"
     "was done.\n",
     1, 1, "FILE", do_add},
    {"export", "db all output", "[FILE | -o FILE] [--all] [--db PATH]",
     "The user rules (--all: every effective rule) and the group resolutions (`db resolve`) as "
     "one\n"
     "JSON document (format crashpack-rules-export/1: rules[], resolutions[]).\n",
     0, 1, "FILE", do_export},
    {"match", "db json", "REPORT.json [--json] [--db PATH]",
     "Matches the rules against a saved report (crashpack analyze --json) and prints the ranked\n"
     "diagnoses (--json: the report's diagnoses[] array).\n",
     1, 1, "REPORT.json", do_match},
};
#define NSUB ((int)(sizeof(subverbs) / sizeof(subverbs[0])))

static void usage(FILE *out)
{
    fprintf(out, "usage: " VERB " COMMAND [options]\n\n");
    for (int i = 0; i < NSUB; i++)
        fprintf(out, "  %-8s %s\n", subverbs[i].name, subverbs[i].synopsis);
    fprintf(out, "\n`" VERB " COMMAND --help` describes each command.\n\n%s", footer);
}

struct ropts {
    const char *db, *out;
    struct kb *kb; /* the knowledge base as an input (user rules), opened on first use */
    int json, all;
    const char *from_crash;
    char dbbuf[PATH_MAX];
    int nargs;
    char **args;
};

/* argv[0] is the sub-verb. Returns -1 to go on, else the exit status. */
static int parse(struct ropts *o, const struct cp_subverb *sv, int argc, char **argv)
{
    enum { O_DB = 256, O_JSON, O_ALL, O_FROM };
    static const struct option all[] = {
        {"db", required_argument, 0, O_DB}, {"json", no_argument, 0, O_JSON}, {"all", no_argument, 0, O_ALL},
        {"from-crash", required_argument, 0, O_FROM}, {"output", required_argument, 0, 'o'}, CP_OPT_END};
    struct option longs[16];
    cp_opt_subset(all, sv->opts, longs, 16);
    char verb[64];
    snprintf(verb, sizeof(verb), VERB " %s", sv->name);
    struct cp_opts p = {.verb = verb, .shorts = "o:", .longs = longs, .argc = argc, .argv = argv};
    int c;
    while ((c = cp_getopt(&p)) != -1) {
        switch (c) {
        case 'h':
            cp_subverb_usage(stdout, VERB, sv, footer);
            return CP_EXIT_OK;
        case O_DB: o->db = optarg; break;
        case O_JSON: o->json = 1; break;
        case O_ALL: o->all = 1; break;
        case O_FROM: o->from_crash = optarg; break;
        case 'o': o->out = optarg; break;
        default:
            return CP_EXIT_USAGE;
        }
    }
    long long id;
    if (o->from_crash && cp_opt_num(&p, "--from-crash", o->from_crash, 1, INT64_MAX, &id))
        return CP_EXIT_USAGE;
    if (o->from_crash && optind < argc)
        return cp_usage_error(&p, "either FILE or --from-crash ID, not both");
    if (cp_opt_args(&p, !strcmp(sv->name, "add") && !o->from_crash ? 1 : sv->min_args, sv->max_args,
                    sv->args_name))
        return CP_EXIT_USAGE;
    o->args = argv + optind;
    o->nargs = argc - optind;
    if (!strcmp(sv->name, "export") && o->nargs) { /* export FILE = export -o FILE */
        if (o->out)
            return cp_usage_error(&p, "either FILE or -o FILE, not both");
        o->out = o->args[0];
    }
    if (!o->db) {
        if (!kb_default_path(o->dbbuf, sizeof(o->dbbuf))) {
            fprintf(stderr, VERB ": no knowledge base location (set --db)\n");
            return CP_EXIT_PROBLEM;
        }
        o->db = o->dbbuf;
    }
    return -1;
}

static struct rulebase *open_rb(struct ropts *o)
{
    struct rulebase *rb = NULL;
    char err[1024];
    if (!o->kb)
        o->kb = kb_open_input(o->db);
    if (rulebase_open(NULL, o->kb, &rb, err, sizeof(err))) {
        fprintf(stderr, "crashpack rules: %s\n", err);
        return NULL;
    }
    return rb;
}

static int write_json(const char *path, const cJSON *j)
{
    char *s = cJSON_Print(j);
    if (!s)
        return -1;
    struct cp_outfile of; /* -o: a temporary beside it, renamed when complete (outfile.h) */
    if (path && cp_outfile_open(&of, path, 0666)) {
        fprintf(stderr, "crashpack rules: cannot write %s: %s\n", path, strerror(errno));
        free(s);
        return -1;
    }
    FILE *f = path ? of.f : stdout;
    fputs(s, f);
    fputc('\n', f);
    free(s);
    int bad = ferror(f);
    if (path && bad)
        cp_outfile_abort(&of);
    else if (path)
        bad |= cp_outfile_commit(&of) != 0;
    else
        bad |= fflush(f) != 0;
    return bad ? -1 : 0;
}

/* A column of a listing: s through the terminal policy (a user rule's strings are untrusted),
 * padded to width, then one space. */
static void put_col(FILE *out, const char *s, int width)
{
    s = s ? s : "?";
    cp_text_put(out, s);
    fprintf(out, "%*s ", (int)(strlen(s) < (size_t)width ? width - strlen(s) : 0), "");
}

static int do_list(void *p)
{
    struct ropts *o = p;
    struct rulebase *rb = open_rb(o);
    if (!rb)
        return CP_EXIT_PROBLEM;
    char err[512];
    cJSON *all = rulebase_rules(rb, err, sizeof(err)), *r;
    rulebase_close(rb);
    if (!all) {
        fprintf(stderr, "crashpack rules: %s\n", err);
        return CP_EXIT_PROBLEM;
    }
    if (o->json) {
        cJSON *doc = cp_doc_new("crashpack-rules-list/1");
        cJSON_AddItemToObject(doc, "rules", all);
        return cp_doc_print(stdout, doc) ? CP_EXIT_PROBLEM : CP_EXIT_OK;
    }
    cJSON_ArrayForEach(r, all)
    {
        const char *src = cJSON_GetStringValue(cJSON_GetObjectItem(r, "source"));
        put_col(stdout, cJSON_GetStringValue(cJSON_GetObjectItem(r, "id")), 34);
        put_col(stdout, src, 8);
        put_col(stdout, cJSON_GetStringValue(cJSON_GetObjectItem(r, "category")), 16);
        printf("%.2f  ", cJSON_GetNumberValue(cJSON_GetObjectItem(r, "confidence")));
        cp_text_put(stdout, cJSON_GetStringValue(cJSON_GetObjectItem(r, "title")));
        puts(cJSON_IsTrue(cJSON_GetObjectItem(r, "overrides")) ? " (overrides the built-in)" : "");
    }
    printf("%d rules\n", cJSON_GetArraySize(all));
    cJSON_Delete(all);
    return 0;
}

static int do_show(void *p)
{
    struct ropts *o = p;
    struct rulebase *rb = open_rb(o);
    if (!rb)
        return CP_EXIT_PROBLEM;
    cJSON *r = rulebase_get(rb, o->args[0]);
    rulebase_close(rb);
    if (!r) {
        fprintf(stderr, "crashpack rules: no rule `%s` (`crashpack rules list` shows them)\n", o->args[0]);
        return CP_EXIT_NOTFOUND;
    }
    int rc = write_json(NULL, r);
    cJSON_Delete(r);
    return rc ? CP_EXIT_PROBLEM : CP_EXIT_OK;
}

/* One line on stderr naming the rules of `rules test NAME...` that the rule base lacks. */
static void missing_rules(const cJSON *all, const struct ropts *o)
{
    const cJSON *r;
    int n = 0;
    fputs("crashpack rules test: no rule", stderr);
    for (int i = 0; i < o->nargs; i++) {
        int found = 0;
        cJSON_ArrayForEach(r, all) found |=
            !strcmp(o->args[i], cJSON_GetStringValue(cJSON_GetObjectItem(r, "id")) ?: "");
        if (found)
            continue;
        fputs(n++ ? ", `" : " `", stderr);
        cp_text_put(stderr, o->args[i]);
        fputc('`', stderr);
    }
    fputs(" in the rule base (`crashpack rules list` shows them)\n", stderr);
}

static int do_test(void *p)
{
    struct ropts *o = p;
    struct rulebase *rb = open_rb(o);
    if (!rb)
        return CP_EXIT_PROBLEM;
    char err[1024];
    cJSON *all = rulebase_rules(rb, err, sizeof(err)), *r;
    rulebase_close(rb);
    if (!all) {
        fprintf(stderr, "crashpack rules: %s\n", err);
        return CP_EXIT_PROBLEM;
    }
    int pass = 0, failed = 0, seen = 0;
    cJSON_ArrayForEach(r, all)
    {
        const char *id = cJSON_GetStringValue(cJSON_GetObjectItem(r, "id"));
        if (o->nargs) {
            int want = 0;
            for (int i = 0; i < o->nargs; i++)
                want |= !strcmp(o->args[i], id);
            if (!want)
                continue;
        }
        seen++;
        if (rule_validate(r, err, sizeof(err)) || rule_check_refs(r, all, err, sizeof(err)) ||
            rule_selftest(r, err, sizeof(err))) {
            fputs("FAIL ", stdout);
            cp_text_put(stdout, err);
            fputc('\n', stdout);
            failed++;
        } else {
            fputs("ok   ", stdout);
            cp_text_put(stdout, id);
            fputc('\n', stdout);
            pass++;
        }
    }
    if (o->nargs && seen < o->nargs) {
        missing_rules(all, o);
        cJSON_Delete(all);
        return CP_EXIT_NOTFOUND;
    }
    cJSON_Delete(all);
    printf("%d passed, %d failed\n", pass, failed);
    return failed ? 1 : 0;
}

static int store_rules(struct ropts *o, cJSON *rules)
{
    char err[1024];
    struct kb *db = cp_kb_open("crashpack rules", o->db, KB_CREATE, NULL);
    if (!db)
        return CP_EXIT_PROBLEM;
    int bad = 0, n = 0;
    cJSON *r;
    cJSON_ArrayForEach(r, rules)
    {
        if (rule_validate(r, err, sizeof(err))) {
            fprintf(stderr, "crashpack rules: rejected: %s\n", err);
            bad++;
            continue;
        }
        const char *id = cJSON_GetStringValue(cJSON_GetObjectItem(r, "id"));
        if (rule_selftest(r, err, sizeof(err)))
            fprintf(stderr, "crashpack rules: warning: %s (`rules test` will fail until it has them)\n",
                    err);
        if (kb_put_rule(db, r, err, sizeof(err))) {
            fprintf(stderr, "crashpack rules: %s\n", err);
            bad++;
            continue;
        }
        printf("added %s\n", id);
        n++;
    }
    kb_close(db);
    return bad ? 1 : 0;
}

/* Imports an export document's resolutions (kb_import_resolution keeps the better of the stored
 * and the imported one); one line each says what it did. 0, or 1 when one was rejected. */
static int store_resolutions(struct ropts *o, const cJSON *list, const char *file)
{
    char err[1024], why[300], abs[PATH_MAX];
    const char *origin = realpath(file, abs) ? abs : file;
    struct kb *db = cp_kb_open("crashpack rules", o->db, KB_CREATE, NULL);
    if (!db)
        return CP_EXIT_PROBLEM;
    int bad = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, list)
    {
        enum kb_import what;
        if (kb_import_resolution(db, e, origin, &what, why, sizeof(why), err, sizeof(err))) {
            fputs("crashpack rules: resolution ", stderr);
            cp_text_put(stderr, cp_jstr_or(e, "fingerprint", "?"));
            fprintf(stderr, " rejected: %s\n", err);
            bad++;
            continue;
        }
        printf("%s resolution ", kb_import_name(what));
        cp_text_put(stdout, cp_jstr(e, "fingerprint"));
        if (why[0])
            printf(" (%s)", why);
        fputc('\n', stdout);
    }
    kb_close(db);
    return bad ? 1 : 0;
}

static int do_add(void *p)
{
    struct ropts *o = p;
    char err[1024];
    if (o->from_crash) {
        long long id = strtoll(o->from_crash, NULL, 10); /* checked by parse() */
        struct kb *db = NULL;
        int orc = kb_open(o->db, KB_WRITE, &db, err, sizeof(err));
        if (orc == KB_ENOENT) {
            fprintf(stderr, "crashpack rules: no knowledge base at %s\n", o->db);
            return CP_EXIT_NOTFOUND;
        }
        if (orc) {
            fprintf(stderr, "crashpack rules: %s\n", err);
            return CP_EXIT_PROBLEM;
        }
        cJSON *draft = kb_draft_rule(db, id, err, sizeof(err));
        kb_close(db);
        if (!draft) {
            fprintf(stderr, "crashpack rules: %s\n", err);
            return CP_EXIT_NOTFOUND;
        }
        int rc = write_json(o->out, draft);
        cJSON_Delete(draft);
        if (!rc && o->out)
            fprintf(stderr, "draft written to %s: edit it, then `crashpack rules add %s`\n", o->out,
                    o->out);
        return rc ? CP_EXIT_PROBLEM : CP_EXIT_OK;
    }
    if (access(o->args[0], F_OK) && errno == ENOENT) {
        fprintf(stderr, "crashpack rules: no such file: %s\n", o->args[0]);
        return CP_EXIT_NOTFOUND;
    }
    cJSON *j = rule_read_file(o->args[0], err, sizeof(err));
    if (!j) {
        fprintf(stderr, "crashpack rules: %s\n", err);
        return CP_EXIT_PROBLEM;
    }
    cJSON *res = NULL; /* an export document's resolutions */
    if (cJSON_IsObject(j) && !strcmp(cp_jstr_or(j, "format", ""), RULES_EXPORT_FORMAT)) {
        cJSON *doc = j;
        res = cJSON_DetachItemFromObjectCaseSensitive(doc, "resolutions");
        j = cJSON_DetachItemFromObjectCaseSensitive(doc, "rules");
        cJSON_Delete(doc);
        if (!j)
            j = cJSON_CreateArray();
    }
    cJSON *arr = cJSON_IsArray(j) ? j : NULL;
    if (!arr) {
        arr = cJSON_CreateArray();
        cJSON_AddItemToArray(arr, j);
    }
    int rc = store_rules(o, arr);
    cJSON_Delete(arr);
    if (rc != CP_EXIT_PROBLEM && cJSON_IsArray(res))
        rc |= store_resolutions(o, res, o->args[0]);
    cJSON_Delete(res);
    return rc;
}

/* The knowledge base's resolutions as export entries ({fingerprint, cause, category, ticket,
 * resolved, resolved_utc, resolved_by {uid, user}}; none without a knowledge base), or NULL with
 * err. */
static cJSON *kb_resolutions_export(struct kb *kb, char *err, size_t errlen)
{
    cJSON *rows = kb ? kb_resolutions(kb, err, errlen) : cJSON_CreateArray();
    if (!rows)
        return NULL;
    cJSON *out = cJSON_CreateArray();
    const cJSON *row;
    cJSON_ArrayForEach(row, rows)
    {
        cJSON *e = kb_resolution_doc(row, NULL, 0);
        cJSON_DeleteItemFromObjectCaseSensitive(e, "status"); /* this knowledge base's own */
        cJSON_DeleteItemFromObjectCaseSensitive(e, "origin");
        cJSON_AddItemToArray(out, e);
    }
    cJSON_Delete(rows);
    return out;
}

static int do_export(void *p)
{
    struct ropts *o = p;
    struct rulebase *rb = open_rb(o);
    if (!rb)
        return CP_EXIT_PROBLEM;
    char err[512];
    cJSON *all = rulebase_rules(rb, err, sizeof(err));
    rulebase_close(rb);
    if (!all) {
        fprintf(stderr, "crashpack rules: %s\n", err);
        return CP_EXIT_PROBLEM;
    }
    cJSON *res = kb_resolutions_export(o->kb, err, sizeof(err));
    if (!res) {
        fprintf(stderr, "crashpack rules: %s\n", err);
        cJSON_Delete(all);
        return CP_EXIT_PROBLEM;
    }
    cJSON *doc = cJSON_CreateObject();
    cJSON_AddStringToObject(doc, "format", RULES_EXPORT_FORMAT);
    cJSON *out = cJSON_AddArrayToObject(doc, "rules"), *r;
    cJSON_AddItemToObject(doc, "resolutions", res);
    cJSON_ArrayForEach(r, all)
    {
        const char *src = cJSON_GetStringValue(cJSON_GetObjectItem(r, "source"));
        if (!o->all && (!src || strcmp(src, "user")))
            continue;
        cJSON *c = cJSON_Duplicate(r, 1);
        cJSON_DeleteItemFromObjectCaseSensitive(c, "source");
        cJSON_DeleteItemFromObjectCaseSensitive(c, "overrides");
        cJSON_AddItemToArray(out, c);
    }
    cJSON_Delete(all);
    int rc = write_json(o->out, doc);
    cJSON_Delete(doc);
    return rc ? CP_EXIT_PROBLEM : CP_EXIT_OK;
}

static int do_match(void *p)
{
    struct ropts *o = p;
    char err[1024];
    FILE *f = fopen(o->args[0], "r");
    if (!f) {
        int e = errno;
        fprintf(stderr, "crashpack rules: %s: %s\n", o->args[0], strerror(e));
        return e == ENOENT ? CP_EXIT_NOTFOUND : CP_EXIT_PROBLEM;
    }
    size_t cap = 1 << 20, len = 0, n;
    char *buf = malloc(cap);
    while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (len + 1 >= cap) {
            char *nb = cap < (512u << 20) ? realloc(buf, cap * 2) : NULL;
            if (!nb)
                break;
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    cJSON *r = buf ? cJSON_ParseWithLength(buf, len) : NULL;
    free(buf);
    if (!cJSON_IsObject(r)) {
        fprintf(stderr, "crashpack rules: %s: not a JSON report object\n", o->args[0]);
        cJSON_Delete(r);
        return CP_EXIT_PROBLEM;
    }
    if (!o->kb)
        o->kb = kb_open_input(o->db);
    if (report_rediagnose(r, o->kb, err, sizeof(err)) < 0) {
        fprintf(stderr, "crashpack rules: %s\n", err);
        cJSON_Delete(r);
        return CP_EXIT_PROBLEM;
    }
    int rc = 0;
    if (o->json)
        rc = write_json(NULL, cJSON_GetObjectItem(r, "diagnoses"));
    else
        render_text_diagnoses(stdout, r);
    cJSON_Delete(r);
    return rc ? CP_EXIT_PROBLEM : CP_EXIT_OK;
}

int cmd_rules(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? CP_EXIT_USAGE : CP_EXIT_OK;
    }
    const struct cp_subverb *sv = cp_subverb_find(VERB, subverbs, NSUB, argv[1]);
    if (!sv)
        return CP_EXIT_USAGE;
    struct ropts o;
    memset(&o, 0, sizeof(o));
    int rc = parse(&o, sv, argc - 1, argv + 1);
    if (rc >= 0)
        return rc;
    rc = sv->run(&o);
    kb_close(o.kb);
    return rc;
}
