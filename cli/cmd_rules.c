/* cmd_rules.c - `crashpack rules list|show|test|add|import|export`: the rule base (rules/rule.h)
 * and the team's own rules kept in the knowledge base (db/kb.h). */
#include "commands.h"
#include "kb.h"
#include "query.h"
#include "rule.h"
#include "utf8.h"

#include <cjson/cJSON.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

cJSON *rule_read_file(const char *path, char *err, size_t errlen);

static void usage(FILE *out)
{
    fprintf(out,
            "usage: crashpack rules COMMAND [--db PATH] ...\n"
            "\n"
            "  list [--json]              every effective rule: id, source, category, confidence, title\n"
            "  show ID                    one rule as JSON\n"
            "  test [ID...]               run each rule against its own positive and near-miss cases;\n"
            "                             fails when a rule lacks them, the positive case does not match,\n"
            "                             the near-miss matches, or they differ in more than one condition\n"
            "  add FILE                   add (or replace, by id) a user rule from a JSON file\n"
            "  add --from-crash ID [-o F] draft a rule from a crash stored in the knowledge base (printed,\n"
            "                             not stored: edit it, then `rules add` it)\n"
            "  import FILE                add the rules of a JSON file (one rule or an array)\n"
            "  export [--all] [-o FILE]   the user rules (--all: every effective rule) as a JSON array\n"
            "  match REPORT.json [--json] match the rules against a saved report (crashpack analyze --json)\n"
            "                             and print the ranked diagnoses\n"
            "\n"
            "Built-in rules are the files under the data directory's rules/builtin/; user rules live in\n"
            "the knowledge base (--db, default $CRASHPACK_DB, /var/lib/crashpack/kb.sqlite for root,\n"
            "else $XDG_DATA_HOME/crashpack/kb.sqlite) and override built-ins with the same id.\n");
}

struct ropts {
    const char *db, *out;
    int json, all;
    const char *from_crash;
    char dbbuf[PATH_MAX];
    int nargs;
    char **args;
};

static int parse(struct ropts *o, int argc, char **argv)
{
    o->args = calloc((size_t)argc + 1, sizeof(char *));
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--db") && i + 1 < argc)
            o->db = argv[++i];
        else if (!strncmp(a, "--db=", 5))
            o->db = a + 5;
        else if ((!strcmp(a, "-o") || !strcmp(a, "--output")) && i + 1 < argc)
            o->out = argv[++i];
        else if (!strcmp(a, "--from-crash") && i + 1 < argc)
            o->from_crash = argv[++i];
        else if (!strcmp(a, "--json"))
            o->json = 1;
        else if (!strcmp(a, "--all"))
            o->all = 1;
        else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "crashpack rules: unknown option `%s`\n", a);
            return -1;
        } else
            o->args[o->nargs++] = argv[i];
    }
    if (!o->db) {
        if (!kb_default_path(o->dbbuf, sizeof(o->dbbuf))) {
            fprintf(stderr, "crashpack rules: no knowledge base location (set --db)\n");
            return -1;
        }
        o->db = o->dbbuf;
    }
    return 0;
}

static struct rulebase *open_rb(struct ropts *o)
{
    struct rulebase *rb = NULL;
    char err[1024];
    if (rulebase_open(NULL, o->db, &rb, err, sizeof(err))) {
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
    FILE *f = path ? fopen(path, "w") : stdout;
    if (!f) {
        perror(path);
        free(s);
        return -1;
    }
    fputs(s, f);
    fputc('\n', f);
    free(s);
    int bad = ferror(f);
    if (path)
        bad |= fclose(f) != 0;
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

static int do_list(struct ropts *o)
{
    struct rulebase *rb = open_rb(o);
    if (!rb)
        return 2;
    char err[512];
    cJSON *all = rulebase_rules(rb, err, sizeof(err)), *r;
    rulebase_close(rb);
    if (!all) {
        fprintf(stderr, "crashpack rules: %s\n", err);
        return 2;
    }
    if (o->json) {
        int rc = write_json(NULL, all);
        cJSON_Delete(all);
        return rc ? 2 : 0;
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

static int do_show(struct ropts *o)
{
    if (o->nargs != 1) {
        usage(stderr);
        return 2;
    }
    struct rulebase *rb = open_rb(o);
    if (!rb)
        return 2;
    cJSON *r = rulebase_get(rb, o->args[0]);
    rulebase_close(rb);
    if (!r) {
        fprintf(stderr, "crashpack rules: no rule `%s`\n", o->args[0]);
        return 1;
    }
    int rc = write_json(NULL, r);
    cJSON_Delete(r);
    return rc ? 2 : 0;
}

static int do_test(struct ropts *o)
{
    struct rulebase *rb = open_rb(o);
    if (!rb)
        return 2;
    char err[1024];
    cJSON *all = rulebase_rules(rb, err, sizeof(err)), *r;
    rulebase_close(rb);
    if (!all) {
        fprintf(stderr, "crashpack rules: %s\n", err);
        return 2;
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
        if (rule_validate(r, err, sizeof(err)) || rule_selftest(r, err, sizeof(err))) {
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
    cJSON_Delete(all);
    if (o->nargs && seen < o->nargs) {
        fprintf(stderr, "crashpack rules: %d of the named rules do not exist\n", o->nargs - seen);
        return 1;
    }
    printf("%d passed, %d failed\n", pass, failed);
    return failed ? 1 : 0;
}

static int store_rules(struct ropts *o, cJSON *rules)
{
    sqlite3 *db = NULL;
    char err[1024];
    if (kb_open(o->db, 1, &db, err, sizeof(err))) {
        fprintf(stderr, "crashpack rules: %s\n", err);
        return 2;
    }
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

static int do_add(struct ropts *o)
{
    char err[1024];
    if (o->from_crash) {
        char *end;
        long long id = strtoll(o->from_crash, &end, 10);
        if (*end || id <= 0) {
            fprintf(stderr, "crashpack rules: --from-crash takes a crash id (see `crashpack db list`)\n");
            return 2;
        }
        sqlite3 *db = NULL;
        if (kb_open(o->db, 0, &db, err, sizeof(err))) {
            fprintf(stderr, "crashpack rules: %s\n", err);
            return 2;
        }
        cJSON *draft = kb_draft_rule(db, id, err, sizeof(err));
        kb_close(db);
        if (!draft) {
            fprintf(stderr, "crashpack rules: %s\n", err);
            return 1;
        }
        int rc = write_json(o->out, draft);
        cJSON_Delete(draft);
        if (!rc && o->out)
            fprintf(stderr, "draft written to %s: edit it, then `crashpack rules add %s`\n", o->out,
                    o->out);
        return rc ? 2 : 0;
    }
    if (o->nargs != 1) {
        usage(stderr);
        return 2;
    }
    cJSON *j = rule_read_file(o->args[0], err, sizeof(err));
    if (!j) {
        fprintf(stderr, "crashpack rules: %s\n", err);
        return 2;
    }
    cJSON *arr = cJSON_IsArray(j) ? j : NULL;
    if (!arr) {
        arr = cJSON_CreateArray();
        cJSON_AddItemToArray(arr, j);
    }
    int rc = store_rules(o, arr);
    cJSON_Delete(arr);
    return rc;
}

static int do_export(struct ropts *o)
{
    struct rulebase *rb = open_rb(o);
    if (!rb)
        return 2;
    char err[512];
    cJSON *all = rulebase_rules(rb, err, sizeof(err));
    rulebase_close(rb);
    if (!all) {
        fprintf(stderr, "crashpack rules: %s\n", err);
        return 2;
    }
    cJSON *out = cJSON_CreateArray(), *r;
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
    int rc = write_json(o->out, out);
    cJSON_Delete(out);
    return rc ? 2 : 0;
}

static int do_match(struct ropts *o)
{
    if (o->nargs != 1) {
        usage(stderr);
        return 2;
    }
    char err[1024];
    FILE *f = fopen(o->args[0], "r");
    if (!f) {
        perror(o->args[0]);
        return 2;
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
        return 2;
    }
    if (diagnose(r, o->db, err, sizeof(err)) < 0) {
        fprintf(stderr, "crashpack rules: %s\n", err);
        cJSON_Delete(r);
        return 2;
    }
    int rc = 0;
    if (o->json)
        rc = write_json(NULL, cJSON_GetObjectItem(r, "diagnoses"));
    else
        diagnose_print(stdout, r);
    cJSON_Delete(r);
    return rc ? 2 : 0;
}

int cmd_rules(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    struct ropts o;
    memset(&o, 0, sizeof(o));
    if (parse(&o, argc - 2, argv + 2)) {
        free(o.args);
        usage(stderr);
        return 2;
    }
    const char *c = argv[1];
    int rc;
    if (!strcmp(c, "list"))
        rc = do_list(&o);
    else if (!strcmp(c, "show"))
        rc = do_show(&o);
    else if (!strcmp(c, "test"))
        rc = do_test(&o);
    else if (!strcmp(c, "add") || !strcmp(c, "import"))
        rc = do_add(&o);
    else if (!strcmp(c, "export"))
        rc = do_export(&o);
    else if (!strcmp(c, "match"))
        rc = do_match(&o);
    else {
        fprintf(stderr, "crashpack rules: unknown command `%s`\n", c);
        usage(stderr);
        rc = 2;
    }
    free(o.args);
    return rc;
}
