/* rule.c - the rule base (built-in rule files, and a knowledge base's user rules read through
 * db/query.h), rule validation and self-tests (see rule.h).
 *
 * Main data structure: struct rulebase - the validated built-in rules sorted by id (parsed once,
 * at open), the knowledge base its caller passed (its user rules; not owned), and the effective
 * rules once asked for (rulebase_effective).
 */
#include "rule.h"
#include "datadir.h"
#include "errmsg.h"
#include "jpath.h"
#include "query.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RULE_FILE_MAX (1u << 20)

struct rulebase {
    cJSON *builtins;  /* validated built-in rules, by id */
    struct kb *kb;    /* the knowledge base of the user rules (not owned), NULL: none */
    cJSON *effective; /* rulebase_effective's parsed rules, kept until rulebase_close */
};

/* ---- validation ---- */

static int validate_cond(const cJSON *c, int depth, char *err, size_t errlen)
{
    if (depth > 32) {
        cp_errmsg(err, errlen, "condition nested too deeply");
        return -1;
    }
    if (!cJSON_IsObject(c) || !c->child || c->child->next) {
        cp_errmsg(err, errlen, "a condition is an object with exactly one key");
        return -1;
    }
    const cJSON *k = c->child;
    const char *key = k->string;
    if (!strcmp(key, "all") || !strcmp(key, "any")) {
        if (!cJSON_IsArray(k) || cJSON_GetArraySize(k) == 0) {
            cp_errmsg(err, errlen, "`%s` takes a non-empty array", key);
            return -1;
        }
        const cJSON *ch;
        cJSON_ArrayForEach(ch, k) if (validate_cond(ch, depth + 1, err, errlen)) return -1;
        return 0;
    }
    if (!strcmp(key, "not"))
        return validate_cond(k, depth + 1, err, errlen);
    if (!rule_leaf_known(key)) {
        cp_errmsg(err, errlen, "unknown condition `%s`", key);
        return -1;
    }
    return rule_leaf_check(key, k, err, errlen); /* the leaf's own shape (match.c's table) */
}

int rule_validate(const cJSON *rule, char *err, size_t errlen)
{
    if (!cJSON_IsObject(rule)) {
        cp_errmsg(err, errlen, "a rule is a JSON object");
        return -1;
    }
    static const char *strs[] = {"id", "title", "category", "diagnosis"};
    for (size_t i = 0; i < 4; i++) {
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(rule, strs[i]);
        if (!cJSON_IsString(s) || !s->valuestring[0]) {
            cp_errmsg(err, errlen, "missing or empty \"%s\"", strs[i]);
            return -1;
        }
    }
    const char *id = cJSON_GetObjectItemCaseSensitive(rule, "id")->valuestring;
    for (const char *p = id; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '-' || *p == '_' || *p == '.') ||
            p - id > 80) {
            cp_errmsg(err, errlen, "rule id `%.80s` must be [A-Za-z0-9._-], at most 80 characters",
                      id);
            return -1;
        }
    const cJSON *conf = cJSON_GetObjectItemCaseSensitive(rule, "confidence");
    if (!cJSON_IsNumber(conf) || conf->valuedouble < 0 || conf->valuedouble > 1) {
        cp_errmsg(err, errlen, "%s: \"confidence\" must be a number in 0..1", id);
        return -1;
    }
    static const char *arrs[] = {"actions", "references"};
    for (size_t i = 0; i < 2; i++) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(rule, arrs[i]), *e;
        if (!cJSON_IsArray(a)) {
            cp_errmsg(err, errlen, "%s: \"%s\" must be an array of strings", id, arrs[i]);
            return -1;
        }
        cJSON_ArrayForEach(e, a) if (!cJSON_IsString(e))
        {
            cp_errmsg(err, errlen, "%s: \"%s\" must be an array of strings", id, arrs[i]);
            return -1;
        }
    }
    const cJSON *co = cJSON_GetObjectItemCaseSensitive(rule, "consequence_of");
    if (co && !cJSON_IsArray(co)) {
        cp_errmsg(err, errlen, "%s: \"consequence_of\" must be an array of categories", id);
        return -1;
    }
    const cJSON *ex = cJSON_GetObjectItemCaseSensitive(rule, "explains"), *x;
    if (ex && !cJSON_IsArray(ex)) {
        cp_errmsg(err, errlen, "%s: \"explains\" must be an array of rule ids or categories", id);
        return -1;
    }
    cJSON_ArrayForEach(x, ex) if (!cJSON_IsString(x) || !x->valuestring[0])
    {
        cp_errmsg(err, errlen, "%s: \"explains\" must be an array of rule ids or categories", id);
        return -1;
    }
    const cJSON *cause = cJSON_GetObjectItemCaseSensitive(rule, "cause");
    if (cause &&
        (!cJSON_IsString(cause) || !cause->valuestring[0] || strlen(cause->valuestring) > 64 ||
         strspn(cause->valuestring, "abcdefghijklmnopqrstuvwxyz0123456789_.-") !=
             strlen(cause->valuestring))) {
        cp_errmsg(err, errlen, "%s: \"cause\" must be a name of [a-z0-9_.-], at most 64 characters",
                  id);
        return -1;
    }
    const cJSON *when = cJSON_GetObjectItemCaseSensitive(rule, "when");
    if (!when) {
        cp_errmsg(err, errlen, "%s: missing \"when\" (the condition)", id);
        return -1;
    }
    char sub[256] = "";
    if (validate_cond(when, 0, sub, sizeof(sub))) {
        cp_errmsg(err, errlen, "%s: %s", id, sub);
        return -1;
    }
    return 0;
}

static int cond_reads_gpu(const cJSON *c, int depth)
{
    if (depth > 32 || !c)
        return 0;
    if (c->string && (!strcmp(c->string, "xid") || !strcmp(c->string, "smi")))
        return 1;
    /* a GPU's history names the GPU; the host's (MCE, AER) names none */
    if (c->string && !strcmp(c->string, "gpu_history")) {
        const char *sc = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "scope"));
        return !sc || strcmp(sc, "host");
    }
    if (!cJSON_IsObject(c) && !cJSON_IsArray(c))
        return 0;
    if (c->string && strcmp(c->string, "all") && strcmp(c->string, "any") &&
        strcmp(c->string, "not") && strcmp(c->string, "when"))
        return 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, c) if (cond_reads_gpu(e, depth + 1)) return 1;
    return 0;
}

int rule_reads_gpu(const cJSON *rule)
{
    return cond_reads_gpu(cJSON_GetObjectItemCaseSensitive(rule, "when"), 0);
}

/* The positive case with every GPU event moved to another GPU and another pid: Xids on
 * 0000:ff:1f.0, pid 999999, own_gpu / own_pid false; nvidia-smi GPUs not the process's. */
cJSON *rule_other_gpu_case(const cJSON *pos);
cJSON *rule_other_gpu_case(const cJSON *pos)
{
    cJSON *o = cJSON_Duplicate(pos, 1);
    cJSON *gpu = cJSON_GetObjectItemCaseSensitive(o, "gpu"), *x;
    cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(gpu, "xid"))
    {
        if (!cJSON_IsObject(x))
            continue;
        cJSON_DeleteItemFromObjectCaseSensitive(x, "pci");
        cJSON_AddStringToObject(x, "pci", "0000:ff:1f.0");
        cJSON_DeleteItemFromObjectCaseSensitive(x, "pid");
        cJSON_AddNumberToObject(x, "pid", 999999);
        cJSON_DeleteItemFromObjectCaseSensitive(x, "own_gpu");
        cJSON_AddFalseToObject(x, "own_gpu");
        cJSON_DeleteItemFromObjectCaseSensitive(x, "own_pid");
        cJSON_AddFalseToObject(x, "own_pid");
        cJSON_DeleteItemFromObjectCaseSensitive(x, "scope");
        cJSON_AddStringToObject(x, "scope", "other");
    }
    cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(
                              cJSON_GetObjectItemCaseSensitive(o, "kernel_log"), "lines"))
    {
        const char *t = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(x, "text"));
        if (!cJSON_IsObject(x) || !t || !strstr(t, "NVRM: Xid"))
            continue;
        cJSON_DeleteItemFromObjectCaseSensitive(x, "scope");
        cJSON_AddStringToObject(x, "scope", "other");
    }
    cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(gpu, "history"))
    {
        const char *sc = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(x, "scope"));
        if (!cJSON_IsObject(x) || (sc && !strcmp(sc, "host")))
            continue;
        cJSON_DeleteItemFromObjectCaseSensitive(x, "pci");
        cJSON_AddStringToObject(x, "pci", "0000:ff:1f.0");
        cJSON_DeleteItemFromObjectCaseSensitive(x, "uuid");
        cJSON_AddStringToObject(x, "uuid", "GPU-ffffffff-ffff-ffff-ffff-ffffffffffff");
    }
    cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(
                              cJSON_GetObjectItemCaseSensitive(gpu, "nvidia_smi"), "gpus"))
    {
        if (!cJSON_IsObject(x))
            continue;
        cJSON_DeleteItemFromObjectCaseSensitive(x, "own");
        cJSON_AddFalseToObject(x, "own");
        cJSON_DeleteItemFromObjectCaseSensitive(x, "pci");
        cJSON_AddStringToObject(x, "pci", "0000:ff:1f.0");
    }
    return o;
}

int rule_selftest(const cJSON *rule, char *err, size_t errlen)
{
    const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rule, "id"));
    if (!id)
        id = "?";
    const cJSON *tests = cJSON_GetObjectItemCaseSensitive(rule, "tests");
    const cJSON *pos = cJSON_GetObjectItemCaseSensitive(tests, "positive");
    const cJSON *neg = cJSON_GetObjectItemCaseSensitive(tests, "near_miss");
    if (!cJSON_IsObject(pos) || !cJSON_IsObject(neg)) {
        cp_errmsg(err, errlen, "%s: lacks tests.positive and tests.near_miss", id);
        return -1;
    }
    if (!rule_match(rule, pos, NULL)) {
        cp_errmsg(err, errlen, "%s: the positive case does not match", id);
        return -1;
    }
    if (rule_match(rule, neg, NULL)) {
        cp_errmsg(err, errlen, "%s: the near-miss case matches", id);
        return -1;
    }
    if (rule_reads_gpu(rule)) {
        const cJSON *given = cJSON_GetObjectItemCaseSensitive(tests, "near_miss_other_gpu");
        cJSON *other = cJSON_IsObject(given) ? cJSON_Duplicate(given, 1) : rule_other_gpu_case(pos);
        int m = other && rule_match(rule, other, NULL);
        cJSON_Delete(other);
        if (m) {
            cp_errmsg(err, errlen,
                      "%s: the near-miss on another GPU and another pid (%s) matches: another "
                      "GPU's event must not be this process's cause",
                      id, cJSON_IsObject(given) ? "tests.near_miss_other_gpu" : "derived");
            return -1;
        }
    }
    char a[256], b[256];
    size_t n = rule_leaf_outcomes(rule, pos, a, sizeof(a));
    rule_leaf_outcomes(rule, neg, b, sizeof(b));
    int diff = 0;
    for (size_t i = 0; a[i] && b[i]; i++)
        diff += a[i] != b[i];
    if (diff != 1) {
        cp_errmsg(err, errlen,
                  "%s: the near-miss must differ from the positive case in exactly one condition "
                  "(%d of %zu leaf conditions differ: %s vs %s)",
                  id, diff, n, a, b);
        return -1;
    }
    return 0;
}

/* ---- the rule base ---- */

static cJSON *read_json_file(const char *path, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        cp_errmsg(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size > RULE_FILE_MAX) {
        close(fd);
        cp_errmsg(err, errlen, "%s: not a regular file of at most 1 MiB", path);
        return NULL;
    }
    char *buf = malloc((size_t)st.st_size + 1);
    size_t got = 0;
    while (buf && got < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    if (!buf) {
        cp_errmsg(err, errlen, "out of memory");
        return NULL;
    }
    cJSON *j = cJSON_ParseWithLength(buf, got);
    free(buf);
    if (!j)
        cp_errmsg(err, errlen, "%s: not valid JSON", path);
    return j;
}

cJSON *rule_read_file(const char *path, char *err, size_t errlen);
cJSON *rule_read_file(const char *path, char *err, size_t errlen)
{
    return read_json_file(path, err, errlen);
}

static int cmpstr(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

struct loaded {
    cJSON *rule;
    const char *id;
    size_t file; /* its place in file-name order */
};

static int by_id(const void *a, const void *b)
{
    const struct loaded *x = a, *y = b;
    int r = strcmp(x->id, y->id);
    return r ? r : x->file < y->file ? -1 : x->file > y->file;
}

/* The built-in rule files of dir, each parsed and validated, into rb->builtins sorted by id. */
static int load_builtins(struct rulebase *rb, const char *dir, char *err, size_t errlen)
{
    DIR *d = opendir(dir);
    if (!d) {
        cp_errmsg(err, errlen, "built-in rules %s: %s", dir, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l < 6 || de->d_name[0] == '.' || strcmp(de->d_name + l - 5, ".json"))
            continue;
        char **nn = realloc(names, (n + 1) * sizeof(*names));
        if (!nn)
            break;
        names = nn;
        names[n++] = strdup(de->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof(*names), cmpstr);
    struct loaded *v = calloc(n + 1, sizeof(*v));
    int rc = v ? 0 : -1;
    size_t nv = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        char path[PATH_MAX], sub[512];
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        cJSON *j = read_json_file(path, sub, sizeof(sub));
        if (!j || rule_validate(j, sub, sizeof(sub))) {
            cp_errmsg(err, errlen, "built-in rule file %s: %s", path, sub);
            cJSON_Delete(j);
            rc = -1;
            break;
        }
        v[nv++] = (struct loaded){j, cJSON_GetObjectItem(j, "id")->valuestring, i};
    }
    if (!v)
        cp_errmsg(err, errlen, "out of memory");
    if (!rc)
        qsort(v, nv, sizeof(*v), by_id);
    for (size_t i = 1; i < nv && !rc; i++)
        if (!strcmp(v[i].id, v[i - 1].id)) {
            cp_errmsg(err, errlen, "built-in rule file %s/%s: duplicate id %s", dir,
                      names[v[i].file], v[i].id);
            rc = -1;
        }
    rb->builtins = cJSON_CreateArray();
    for (size_t i = 0; i < nv; i++)
        if (rc || !rb->builtins)
            cJSON_Delete(v[i].rule);
        else
            cJSON_AddItemToArray(rb->builtins, v[i].rule);
    if (!rc && !rb->builtins) {
        cp_errmsg(err, errlen, "out of memory");
        rc = -1;
    }
    free(v);
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return rc;
}

int rulebase_open(const char *builtin_dir, struct kb *kb, struct rulebase **out, char *err,
                  size_t errlen)
{
    *out = NULL;
    if (err && errlen)
        *err = 0;
    char dirbuf[PATH_MAX];
    if (!builtin_dir) {
        builtin_dir = cp_datapath("rules/builtin", dirbuf, sizeof(dirbuf), err, errlen);
        if (!builtin_dir)
            return -1;
    }
    struct rulebase *rb = calloc(1, sizeof(*rb));
    if (!rb) {
        cp_errmsg(err, errlen, "out of memory");
        return -1;
    }
    if (load_builtins(rb, builtin_dir, err, errlen)) {
        rulebase_close(rb);
        return -1;
    }
    rb->kb = kb;
    *out = rb;
    return 0;
}

void rulebase_close(struct rulebase *rb)
{
    if (!rb)
        return;
    cJSON_Delete(rb->effective);
    cJSON_Delete(rb->builtins);
    free(rb);
}

static void add_rule(cJSON *arr, cJSON *rule, const char *source, int overrides)
{
    cJSON_DeleteItemFromObjectCaseSensitive(rule, "source");
    cJSON_AddStringToObject(rule, "source", source);
    if (overrides)
        cJSON_AddTrueToObject(rule, "overrides");
    cJSON_AddItemToArray(arr, rule);
}

cJSON *rulebase_rules(struct rulebase *rb, char *err, size_t errlen)
{
    char e2[512];
    cJSON *user = NULL;
    if (rb->kb && !(user = kb_user_rules(rb->kb, e2, sizeof(e2)))) {
        cp_errmsg(err, errlen, "rule base: %s", e2);
        return NULL;
    }
    /* a merge of two lists sorted by id; a user rule replaces the built-in of its id (even when
     * it is broken: then neither is used, as the user asked for that id to change) */
    cJSON *arr = cJSON_CreateArray();
    const cJSON *b = rb->builtins ? rb->builtins->child : NULL;
    const cJSON *u = user ? user->child : NULL;
    while (u || b) {
        const char *uid = u ? cp_jstr(u, "id") : NULL;
        if (u && !uid) { /* no id: not a rule */
            u = u->next;
            continue;
        }
        const char *bid = b ? cJSON_GetObjectItem(b, "id")->valuestring : NULL;
        int c = !uid ? 1 : !bid ? -1 : strcmp(uid, bid);
        if (c > 0) {
            add_rule(arr, cJSON_Duplicate(b, 1), "builtin", 0);
            b = b->next;
            continue;
        }
        const char *js = cp_jstr(u, "json");
        cJSON *j = js ? cJSON_Parse(js) : NULL;
        char sub[256];
        if (!j || rule_validate(j, sub, sizeof(sub)))
            cJSON_Delete(j); /* a broken user rule is skipped, never fatal */
        else
            add_rule(arr, j, "user", c == 0);
        if (c == 0)
            b = b->next;
        u = u->next;
    }
    cJSON_Delete(user);
    return arr;
}

const cJSON *rulebase_effective(struct rulebase *rb, char *err, size_t errlen)
{
    if (!rb->effective)
        rb->effective = rulebase_rules(rb, err, errlen);
    return rb->effective;
}

cJSON *rulebase_get(struct rulebase *rb, const char *id)
{
    cJSON *all = rulebase_rules(rb, NULL, 0), *r, *found = NULL;
    cJSON_ArrayForEach(r, all)
    {
        const char *rid = cJSON_GetStringValue(cJSON_GetObjectItem(r, "id"));
        if (rid && !strcmp(rid, id)) {
            found = cJSON_Duplicate(r, 1);
            break;
        }
    }
    cJSON_Delete(all);
    return found;
}

int rule_check_refs(const cJSON *rule, const cJSON *all, char *err, size_t errlen)
{
    const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rule, "id"));
    const cJSON *x, *r;
    cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(rule, "explains"))
    {
        const char *ref = cJSON_GetStringValue(x);
        int known = 0;
        cJSON_ArrayForEach(r, all)
        {
            const char *rid = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "id"));
            const char *cat = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "category"));
            if (ref && ((rid && !strcmp(rid, ref)) || (cat && !strcmp(cat, ref))))
                known = 1;
        }
        if (!known) {
            cp_errmsg(err, errlen,
                      "%s: \"explains\" names `%.80s`, which is neither a rule id nor a category "
                      "of the rule base",
                      id ? id : "?", ref ? ref : "?");
            return -1;
        }
        if (id && ref && !strcmp(id, ref)) {
            cp_errmsg(err, errlen, "%s: \"explains\" names the rule itself", id);
            return -1;
        }
    }
    return 0;
}
