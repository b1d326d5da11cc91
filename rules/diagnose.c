/* diagnose.c - ranked diagnoses from the rule base (see rule.h); their text is render/'s.
 *
 * Ranking reasons about causes: a rule lists in "consequence_of" the categories of failures that
 * would explain it (an NCCL timeout: gpu_hardware, nvlink, host_hardware, ...), and a cause lists in
 * "explains" the rule ids or categories of what it explains (the NCCL timeout explains the
 * watchdog's abort). When a rule that explains this one matched (either way), the diagnosis names
 * the best-ranked such rule in consequence_of and ranks after every cause, whatever its confidence.
 * Then higher confidence first, then rule id (deterministic).
 *
 * evidence_fields: the fields of the log lines (log.errors[].fields) that are in a diagnosis's
 * evidence, merged (the first line's value of a field wins): an NCCL timeout's op, seq,
 * timeout_ms and rank as data.
 */
#include "rule.h"
#include "errmsg.h"
#include "jpath.h"
#include "utf8.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Caps on GPU diagnoses whose evidence is not this process's (issue 14): a process known to use
 * no GPU, and a host-wide GPU fault where the process's GPUs are unknown. */
#define CAP_NO_GPU 0.25
#define CAP_HOST_WIDE 0.45

static int gpu_category(const char *c)
{
    static const char *const cats[] = {"gpu_hardware", "nvlink",    "thermal",
                                       "gpu_driver",   "gpu_memory_info", "gpu_info"};
    for (size_t i = 0; c && i < sizeof(cats) / sizeof(cats[0]); i++)
        if (!strcmp(c, cats[i]))
            return 1;
    return 0;
}

static int by_rank(const void *pa, const void *pb)
{
    const cJSON *a = *(const cJSON *const *)pa, *b = *(const cJSON *const *)pb;
    int ca = cJSON_IsString(cJSON_GetObjectItem(a, "consequence_of"));
    int cb = cJSON_IsString(cJSON_GetObjectItem(b, "consequence_of"));
    if (ca != cb)
        return ca - cb;
    double x = cp_jnum_or(a, "confidence", 0), y = cp_jnum_or(b, "confidence", 0);
    if (x != y)
        return x > y ? -1 : 1;
    return strcmp(cp_jstr(a, "rule"), cp_jstr(b, "rule"));
}

static cJSON *dup_strings(const cJSON *a)
{
    cJSON *o = cJSON_CreateArray(), *e;
    cJSON_ArrayForEach(e, a) if (cJSON_IsString(e))
        cJSON_AddItemToArray(o, cJSON_CreateString(e->valuestring));
    return o;
}

/* Is name in the string array a? */
static int listed(const cJSON *a, const char *name)
{
    const cJSON *c;
    cJSON_ArrayForEach(c, a) if (cJSON_IsString(c) && name && !strcmp(c->valuestring, name))
        return 1;
    return 0;
}

/* Does matched rule `cause` explain matched rule `r`: r names cause's category in consequence_of,
 * or cause names r's id or category in explains? */
static int explains(const cJSON *cause, const cJSON *r)
{
    const cJSON *ex = cJSON_GetObjectItem(cause, "explains");
    return listed(cJSON_GetObjectItem(r, "consequence_of"), cp_jstr(cause, "category")) ||
           listed(ex, cp_jstr(r, "id")) || listed(ex, cp_jstr(r, "category"));
}

/* The fields of the log errors whose line is in the evidence (the evidence line starts
 * "log SOURCE:LINE: "), merged; NULL when there are none. */
static cJSON *evidence_fields(const cJSON *report, const cJSON *ev)
{
    cJSON *out = NULL;
    const cJSON *le, *e, *f;
    cJSON_ArrayForEach(le, cp_jpath(report, "log.errors"))
    {
        const cJSON *fields = cp_jpath(le, "fields");
        if (!cJSON_IsObject(fields) || !fields->child)
            continue;
        double line = 0;
        cp_jnum_at(le, "line", &line);
        const char *src = cp_jstr_at(le, "source");
        char pfx[512];
        snprintf(pfx, sizeof(pfx), "log %s:%.0f: ", src ? src : "?", line);
        int hit = 0;
        cJSON_ArrayForEach(e, ev) if (cJSON_IsString(e) &&
                                      !strncmp(e->valuestring, pfx, strlen(pfx)))
            hit = 1;
        if (!hit)
            continue;
        if (!out)
            out = cJSON_CreateObject();
        cJSON_ArrayForEach(f, fields) if (f->string && !cJSON_GetObjectItemCaseSensitive(out, f->string))
            cJSON_AddItemToObject(out, f->string, cJSON_Duplicate(f, 1));
    }
    return out;
}

/* The matched rules, in rule-base order: each one's diagnosis, its rule, and whether its
 * confidence was capped (a capped GPU fault explains nothing). */
struct matches {
    cJSON **d;
    const cJSON **src;
    char *capped;
    int n;
};

static void matches_free(struct matches *m, int keep_diagnoses)
{
    for (int i = 0; !keep_diagnoses && i < m->n; i++)
        cJSON_Delete(m->d[i]);
    free(m->d);
    free(m->src);
    free(m->capped);
}

/* The cap on a GPU rule's confidence when its evidence is not this process's (note says why), 1
 * for every other rule. */
static double confidence_cap(const cJSON *rule, const cJSON *report, const struct rule_scope *sc,
                             const char **note)
{
    *note = NULL;
    if (!gpu_category(cp_jstr(rule, "category")))
        return 1;
    const char *pg = cp_jstr_at(report, "gpu.scope.process_gpus");
    if (pg && !strcmp(pg, "none") && sc->gpu_own + sc->gpu_host > 0) {
        *note = "this process used no GPU (it opened no /dev/nvidia* and none was visible "
                "to it): a GPU event of this host is context, not its cause";
        return CAP_NO_GPU;
    }
    if (sc->gpu_host > 0 && !sc->gpu_own && !sc->process) {
        *note = pg && !strcmp(pg, "unknown") ? "which GPUs this process used is not known, so a GPU fault of the "
                                               "host is not known to be its cause"
                                             : "the GPU event names neither this process nor one of its GPUs";
        return CAP_HOST_WIDE;
    }
    return 1;
}

/* One matched rule's diagnosis (ev: its evidence, taken). */
static cJSON *diagnosis_of(const cJSON *rule, const cJSON *report, cJSON *ev, double cap, const char *note)
{
    double conf = cp_jnum_or(rule, "confidence", 0);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "rule", cp_jstr(rule, "id"));
    cJSON_AddStringToObject(o, "title", cp_jstr(rule, "title"));
    cJSON_AddStringToObject(o, "category", cp_jstr(rule, "category"));
    cJSON_AddNumberToObject(o, "confidence", conf > cap ? cap : conf);
    if (conf > cap) {
        cJSON_AddNumberToObject(o, "rule_confidence", conf);
        cJSON_AddStringToObject(o, "confidence_note", note);
    }
    cJSON_AddStringToObject(o, "diagnosis", cp_jstr(rule, "diagnosis"));
    cJSON_AddItemToObject(o, "evidence", ev);
    cJSON *ef = evidence_fields(report, ev);
    if (ef)
        cJSON_AddItemToObject(o, "evidence_fields", ef);
    cJSON_AddItemToObject(o, "actions", dup_strings(cJSON_GetObjectItem(rule, "actions")));
    cJSON_AddItemToObject(o, "references", dup_strings(cJSON_GetObjectItem(rule, "references")));
    cJSON_AddNullToObject(o, "consequence_of");
    cJSON_AddStringToObject(o, "source", cp_jstr(rule, "source") ? cp_jstr(rule, "source") : "builtin");
    return o;
}

/* Every rule of the rule base matched against the report, into m. */
static int match_all(const cJSON *rules, const cJSON *report, struct matches *m)
{
    int nrules = cJSON_GetArraySize(rules);
    m->d = calloc((size_t)nrules + 1, sizeof(*m->d));
    m->src = calloc((size_t)nrules + 1, sizeof(*m->src));
    m->capped = calloc((size_t)nrules + 1, 1);
    if (!m->d || !m->src || !m->capped)
        return -1;
    const cJSON *rule;
    cJSON_ArrayForEach(rule, rules)
    {
        cJSON *ev = cJSON_CreateArray();
        struct rule_scope sc;
        if (!rule_match_scoped(rule, report, ev, &sc)) {
            cJSON_Delete(ev);
            continue;
        }
        const char *note;
        double cap = confidence_cap(rule, report, &sc, &note);
        m->d[m->n] = diagnosis_of(rule, report, ev, cap, note);
        m->src[m->n] = rule;
        m->capped[m->n] = cp_jnum_or(rule, "confidence", 0) > cap;
        m->n++;
    }
    return 0;
}

/* The cause of each diagnosis: the best-ranked matched rule that explains it (explains() above),
 * a root cause (one that nothing matched explains) before one that is itself explained, so that
 * the watchdog's abort and its c10 exception both name the timeout, and an own-GPU Xid before
 * it. A capped GPU fault explains nothing. */
static int link_causes(struct matches *m)
{
    int n = m->n;
    char *expl = calloc((size_t)n + 1, 1);
    if (!expl)
        return -1;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            if (j != i && !m->capped[j] && explains(m->src[j], m->src[i]))
                expl[i] = 1;
    for (int i = 0; i < n; i++) {
        int best = -1;
        for (int j = 0; j < n; j++) {
            if (j == i || m->capped[j] || !explains(m->src[j], m->src[i]))
                continue;
            if (best >= 0 && expl[j] != expl[best]) {
                if (!expl[j])
                    best = j;
                continue;
            }
            double cj = cp_jnum_or(m->src[j], "confidence", 0), cb = best >= 0 ? cp_jnum_or(m->src[best], "confidence", 0) : 0;
            if (best < 0 || cj > cb || (cj == cb && strcmp(cp_jstr(m->src[j], "id"), cp_jstr(m->src[best], "id")) < 0))
                best = j;
        }
        if (best >= 0)
            cJSON_ReplaceItemInObject(m->d[i], "consequence_of", cJSON_CreateString(cp_jstr(m->src[best], "id")));
    }
    free(expl);
    return 0;
}

/* Appends to the string array `to` each string of `from` it does not hold yet. */
static void union_strings(cJSON *to, const cJSON *from)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, from) if (cJSON_IsString(e) && !listed(to, e->valuestring))
        cJSON_AddItemToArray(to, cJSON_CreateString(e->valuestring));
}

/* Whether match j ranks before match i as the entry of their common cause: higher confidence
 * (after its cap), then a root cause before a consequence, then rule id. */
static int better_entry(const struct matches *m, int j, int i)
{
    double cj = cp_jnum_or(m->d[j], "confidence", 0), ci = cp_jnum_or(m->d[i], "confidence", 0);
    if (cj != ci)
        return cj > ci;
    int kj = cJSON_IsString(cJSON_GetObjectItem(m->d[j], "consequence_of"));
    int ki = cJSON_IsString(cJSON_GetObjectItem(m->d[i], "consequence_of"));
    if (kj != ki)
        return ki;
    return strcmp(cp_jstr(m->src[j], "id"), cp_jstr(m->src[i], "id")) < 0;
}

/* Folds match i into the entry e of its cause: its evidence, actions and references that e does
 * not have yet, its rule id, and its root-cause standing (e is a consequence only when every
 * rule of the cause is one). */
static void fold_into(struct matches *m, int e, int i)
{
    cJSON *de = m->d[e], *di = m->d[i];
    union_strings(cJSON_GetObjectItem(de, "evidence"), cJSON_GetObjectItem(di, "evidence"));
    union_strings(cJSON_GetObjectItem(de, "actions"), cJSON_GetObjectItem(di, "actions"));
    union_strings(cJSON_GetObjectItem(de, "references"), cJSON_GetObjectItem(di, "references"));
    cJSON_AddItemToArray(cJSON_GetObjectItem(de, "rules"),
                         cJSON_CreateString(cp_jstr(m->src[i], "id")));
    if (!cJSON_IsString(cJSON_GetObjectItem(di, "consequence_of")))
        cJSON_ReplaceItemInObject(de, "consequence_of", cJSON_CreateNull());
}

/* One diagnosis per cause (issue 23): the matched rules that name the same "cause" (python-cuda-oom
 * and cuda-oom both reach "cuda_oom") become one entry, the best-ranked one's (better_entry), that
 * keeps every piece of their evidence once, the union of their actions and references, and lists
 * every rule in "rules". A diagnosis that named a folded rule as its cause names the entry. */
static void merge_causes(struct matches *m, const cJSON *report)
{
    for (int i = 0; i < m->n; i++) {
        cJSON *rules = cJSON_AddArrayToObject(m->d[i], "rules");
        cJSON_AddItemToArray(rules, cJSON_CreateString(cp_jstr(m->src[i], "id")));
        const char *c = cp_jstr(m->src[i], "cause");
        if (c)
            cJSON_AddStringToObject(m->d[i], "cause", c);
    }
    for (int i = 0; i < m->n; i++) {
        const char *c = cp_jstr(m->src[i], "cause");
        if (!c || !m->d[i])
            continue;
        int e = i; /* the entry of this cause: the best of its matches */
        for (int j = 0; j < m->n; j++)
            if (j != i && m->d[j] && cp_jstr(m->src[j], "cause") &&
                !strcmp(cp_jstr(m->src[j], "cause"), c) && better_entry(m, j, e))
                e = j;
        for (int j = 0; j < m->n; j++) {
            if (j == e || !m->d[j] || !cp_jstr(m->src[j], "cause") ||
                strcmp(cp_jstr(m->src[j], "cause"), c))
                continue;
            fold_into(m, e, j);
            const char *gone = cp_jstr(m->src[j], "id");
            for (int k = 0; k < m->n; k++) { /* "a consequence of" the folded rule: of the entry */
                const char *co = m->d[k] ? cp_jstr(m->d[k], "consequence_of") : NULL;
                if (k != j && k != e && co && !strcmp(co, gone))
                    cJSON_ReplaceItemInObject(m->d[k], "consequence_of",
                                              cJSON_CreateString(cp_jstr(m->src[e], "id")));
            }
            cJSON_Delete(m->d[j]);
            m->d[j] = NULL;
        }
        const char *own = cp_jstr(m->d[e], "consequence_of"); /* never a consequence of itself */
        if (own && listed(cJSON_GetObjectItem(m->d[e], "rules"), own))
            cJSON_ReplaceItemInObject(m->d[e], "consequence_of", cJSON_CreateNull());
        cJSON_DeleteItemFromObjectCaseSensitive(m->d[e], "evidence_fields");
        cJSON *ef = evidence_fields(report, cJSON_GetObjectItem(m->d[e], "evidence"));
        if (ef)
            cJSON_AddItemToObject(m->d[e], "evidence_fields", ef);
    }
    int n = 0; /* the folded ones out */
    for (int i = 0; i < m->n; i++)
        if (m->d[i]) {
            m->src[n] = m->src[i];
            m->capped[n] = m->capped[i];
            m->d[n++] = m->d[i];
        }
    m->n = n;
}

int rules_diagnose(struct rulebase *rb, cJSON *report, char *err, size_t errlen)
{
    cJSON_DeleteItemFromObjectCaseSensitive(report, "diagnoses");
    cJSON *out = cJSON_AddArrayToObject(report, "diagnoses");
    const cJSON *rules = rulebase_effective(rb, err, errlen);
    if (!rules)
        return -1;
    struct matches m = {0};
    if (match_all(rules, report, &m) || link_causes(&m)) {
        matches_free(&m, 0);
        cp_errmsg(err, errlen, "out of memory");
        return -1;
    }
    merge_causes(&m, report);
    qsort(m.d, (size_t)m.n, sizeof(*m.d), by_rank);
    for (int i = 0; i < m.n; i++)
        cJSON_AddItemToArray(out, m.d[i]);
    int n = m.n;
    matches_free(&m, 1);
    return n;
}

struct rulebase *diagnose_open(struct kb *kb, char *err, size_t errlen)
{
    struct rulebase *rb = NULL;
    if (rulebase_open(NULL, kb, &rb, err, errlen))
        return NULL;
    (void)rulebase_effective(rb, NULL, 0); /* parsed now: analyze opens the base while it waits */
    return rb;
}

int diagnose(cJSON *report, struct kb *kb, char *err, size_t errlen)
{
    struct rulebase *rb = diagnose_open(kb, err, errlen);
    return diagnose_with(report, rb, err, errlen);
}

int diagnose_with(cJSON *report, struct rulebase *rb, char *err, size_t errlen)
{
    cJSON_DeleteItemFromObjectCaseSensitive(report, "diagnosis_info");
    cJSON *info = cJSON_AddObjectToObject(report, "diagnosis_info");
    if (!rb) {
        cJSON_DeleteItemFromObjectCaseSensitive(report, "diagnoses");
        cJSON_AddArrayToObject(report, "diagnoses");
        cJSON_AddStringToObject(info, "error", err && err[0] ? err : "cannot open the rule base");
        return -1;
    }
    const cJSON *all = rulebase_effective(rb, NULL, 0), *r;
    int nb = 0, nu = 0;
    cJSON_ArrayForEach(r, all)
    {
        const char *s = cp_jstr(r, "source");
        if (s && !strcmp(s, "user"))
            nu++;
        else
            nb++;
    }
    cJSON_AddNumberToObject(info, "builtin_rules", nb);
    cJSON_AddNumberToObject(info, "user_rules", nu);
    int n = rules_diagnose(rb, report, err, errlen);
    if (n < 0)
        cJSON_AddStringToObject(info, "error", err ? err : "matching failed");
    else
        cJSON_AddNullToObject(info, "error");
    rulebase_close(rb);
    return n;
}

