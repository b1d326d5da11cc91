/* corpus.c - the shipped cases as a corpus, and the report's `similar` part (corpus.h). */
#include "corpus.h"
#include "similar.h"

#include <ctype.h>
#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datadir.h"
#include "errmsg.h"
#include "jpath.h"
#include "utf8.h"

#define CASE_MAX (1u << 20)

struct sim_corpus {
    struct sim_index *ix;
    cJSON *meta; /* array, one object per document, in the index's order */
    int finished;
};

size_t sim_corpus_size(const struct sim_corpus *c)
{
    return c ? sim_index_size(c->ix) : 0;
}

void sim_corpus_free(struct sim_corpus *c)
{
    if (!c)
        return;
    sim_index_free(c->ix);
    cJSON_Delete(c->meta);
    free(c);
}

static int isident(int ch)
{
    return isalnum(ch) || ch == '_' || ch == '.';
}

const char *sim_exception_type(const char *text, char *buf, size_t len)
{
    const char *found = NULL;
    size_t flen = 0;
    for (const char *p = text; p && *p;) {
        const char *e = strchr(p, '\n');
        const char *q = p;
        if (*q == '[') { /* a rank prefix: "[rank0]: " */
            const char *rb = memchr(q, ']', e ? (size_t)(e - q) : strlen(q));
            q = rb ? rb + 1 : q;
        }
        while (*q == ' ' || *q == '\t' || *q == ':')
            q++;
        size_t n = 0;
        while (isident((unsigned char)q[n]))
            n++;
        static const char *const ends[] = {"Error", "Exception", "Interrupt", "Exit"};
        const char *last = q; /* the last dotted part starts with a capital */
        for (size_t k = 0; k < n; k++)
            last = q[k] == '.' ? q + k + 1 : last;
        for (size_t k = 0; n && k < 4 && (q[n] == ':' || q[n] == '\n' || !q[n]); k++) {
            size_t el = strlen(ends[k]);
            if (n > el && !strncmp(q + n - el, ends[k], el) && isupper((unsigned char)*last)) {
                found = q;
                flen = n;
            }
        }
        p = e ? e + 1 : NULL;
    }
    if (!found || flen + 1 > len)
        return NULL;
    memcpy(buf, found, flen);
    buf[flen] = 0;
    return buf;
}

int sim_corpus_add(struct sim_corpus *c, cJSON *meta, const char *text, const char *exc_type,
                   const char *signature)
{
    struct sim_feat *f = NULL;
    size_t n = 0;
    char xb[128];
    if (!exc_type && text)
        exc_type = sim_exception_type(text, xb, sizeof(xb));
    if (c->finished || sim_features(text, exc_type, signature, &f, &n) ||
        sim_index_add(c->ix, f, n)) {
        cJSON_Delete(meta);
        return -1;
    }
    cJSON_AddItemToArray(c->meta, meta);
    return 0;
}

static int cmpstr(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static cJSON *read_case(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        cp_errmsg(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    char *buf = malloc(CASE_MAX + 1);
    size_t n = buf ? fread(buf, 1, CASE_MAX, f) : 0;
    fclose(f);
    if (!buf)
        return NULL;
    buf[n] = 0;
    cJSON *j = cJSON_Parse(buf);
    free(buf);
    if (!j || !cp_jstr(j, "id") || !cp_jstr(j, "excerpt"))
        cp_errmsg(err, errlen, "%s: not a crashpack-case/1 file (id, excerpt)", path);
    if (j && (!cp_jstr(j, "id") || !cp_jstr(j, "excerpt"))) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

/* 1 when id is one of the comma-separated list. */
static int excluded(const char *list, const char *id)
{
    size_t n = strlen(id);
    for (const char *p = list; p && *p;) {
        size_t l = strcspn(p, ",");
        if (l == n && !strncmp(p, id, n))
            return 1;
        p += l + (p[l] == ',');
    }
    return 0;
}

/* One case file into the corpus (its metadata kept for the hits). */
static int add_case(struct sim_corpus *c, cJSON *j)
{
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "case", cp_jstr(j, "id"));
    cJSON_AddStringToObject(m, "source", "case");
    cJSON_AddStringToObject(m, "class", cp_jstr(j, "class") ? cp_jstr(j, "class") : "");
    const char *cat = cp_jstr_at(j, "expected_top.category");
    cJSON_AddStringToObject(m, "category", cat ? cat : "");
    const char *cause = cp_jstr(j, "established_cause");
    cJSON_AddStringToObject(m, "established_cause", cause ? cause : "");
    const char *url = cp_jstr(j, "source_url");
    cJSON_AddStringToObject(m, "source_url", url ? url : "");
    return sim_corpus_add(c, m, cp_jstr(j, "excerpt"), NULL, NULL);
}

struct sim_corpus *sim_corpus_load(const char *exclude, char *err, size_t errlen)
{
    char dir[4096], pat[4200];
    if (!cp_datapath("fixtures/cases", dir, sizeof(dir), err, errlen))
        return NULL;
    snprintf(pat, sizeof(pat), "%s/*/*.json", dir);
    glob_t g;
    int grc = glob(pat, GLOB_NOSORT, NULL, &g);
    if (grc == GLOB_NOMATCH || grc) {
        cp_errmsg(err, errlen, "no cases in %s", dir);
        if (!grc || grc == GLOB_NOMATCH)
            globfree(&g);
        return NULL;
    }
    qsort(g.gl_pathv, g.gl_pathc, sizeof(char *), cmpstr);
    struct sim_corpus *c = calloc(1, sizeof(*c));
    int rc = c && (c->ix = sim_index_new()) && (c->meta = cJSON_CreateArray()) ? 0 : -1;
    for (size_t i = 0; i < g.gl_pathc && !rc; i++) {
        cJSON *j = read_case(g.gl_pathv[i], err, errlen);
        if (!j)
            rc = -1;
        else if (!excluded(exclude, cp_jstr(j, "id")))
            rc = add_case(c, j);
        cJSON_Delete(j);
    }
    globfree(&g);
    if (rc && !*err)
        cp_errmsg(err, errlen, "out of memory");
    if (rc) {
        sim_corpus_free(c);
        return NULL;
    }
    return c;
}

/* The text searched: the output given (else output.last_lines), and the log errors. */
static char *query_text(const cJSON *r, const char *text)
{
    size_t cap = (text ? strlen(text) : 0) + 2, n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, cp_jpath(r, "output.last_lines")) if (cJSON_IsString(e)) cap +=
        strlen(e->valuestring) + 1;
    cJSON_ArrayForEach(e, cp_jpath(r, "log.errors")) if (cp_jstr(e, "text")) cap +=
        strlen(cp_jstr(e, "text")) + 1;
    char *s = malloc(cap);
    if (!s)
        return NULL;
    if (text) {
        n = strlen(text);
        memcpy(s, text, n);
        s[n++] = '\n';
    } else {
        cJSON_ArrayForEach(e, cp_jpath(r, "output.last_lines")) if (cJSON_IsString(e)) n +=
            (size_t)sprintf(s + n, "%s\n", e->valuestring);
    }
    cJSON_ArrayForEach(e, cp_jpath(r, "log.errors")) if (cp_jstr(e, "text")) n +=
        (size_t)sprintf(s + n, "%s\n", cp_jstr(e, "text"));
    s[n] = 0;
    return s;
}

/* similar_info.error_lines: the error lines the search read (the last 8, each cut at 200
 * bytes). */
static void info_lines(cJSON *info, const char *text)
{
    const char *lines[8];
    size_t lens[8];
    size_t k = sim_error_lines(text, lines, lens, 8);
    cJSON *a = cJSON_AddArrayToObject(info, "error_lines");
    for (size_t i = 0; i < k; i++) {
        char line[201];
        size_t l = lens[i] < 200 ? lens[i] : 200;
        while (l < lens[i] && l > 0 && ((unsigned char)lines[i][l] & 0xc0) == 0x80)
            l--;
        memcpy(line, lines[i], l);
        line[l] = 0;
        char *u = cp_utf8_clean(line);
        cJSON_AddItemToArray(a, cJSON_CreateString(u ? u : ""));
        free(u);
    }
}

static cJSON *hit_json(const struct sim_corpus *c, const struct sim_hit *h)
{
    cJSON *m = cJSON_Duplicate(cJSON_GetArrayItem(c->meta, (int)h->doc), 1);
    if (m)
        cJSON_AddNumberToObject(m, "score", (double)(long)(h->score * 1000 + 0.5) / 1000);
    return m;
}

static int search(cJSON *r, cJSON *info, struct sim_corpus *c, const char *q)
{
    char xb[128];
    const char *xt = sim_exception_type(q, xb, sizeof(xb));
    if (!xt)
        xt = cp_jstr_at(r, "exception.type");
    struct sim_feat *f = NULL;
    size_t n = 0;
    if ((!c->finished && sim_index_finish(c->ix)) || sim_features(q, xt, NULL, &f, &n))
        return -1;
    c->finished = 1;
    struct sim_hit hits[SIM_TIES];
    size_t k = sim_query(c->ix, f, n, 0, hits, SIM_TIES);
    free(f);
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < k && i < SIM_SHOW; i++)
        if (hits[i].score >= SIM_MIN_SCORE)
            cJSON_AddItemToArray(a, hit_json(c, &hits[i]));
    cp_json_set(r, "similar", a);
    if (!k)
        return 0;
    cJSON_AddItemToObject(info, "nearest", hit_json(c, &hits[0]));
    /* the cases as near as the nearest (the same text once normalized) */
    cJSON *t = cJSON_AddArrayToObject(info, "nearest_ties");
    for (size_t i = 0; i < k && hits[i].score >= hits[0].score - 1e-9; i++)
        cJSON_AddItemToArray(
            t, cJSON_CreateString(cp_jstr(cJSON_GetArrayItem(c->meta, (int)hits[i].doc), "case")));
    return 0;
}

int similar_report(cJSON *r, const char *text, struct sim_corpus *c)
{
    char err[512] = "";
    cJSON *info = cJSON_CreateObject();
    cp_json_set(r, "similar_info", info);
    cp_json_set(r, "similar", cJSON_CreateArray());
    struct sim_corpus *own =
        c ? NULL : sim_corpus_load(getenv("CRASHPACK_SIMILAR_EXCLUDE"), err, sizeof(err));
    if (!c)
        c = own;
    char *q = c ? query_text(r, text) : NULL;
    int rc = c && q ? 0 : -1;
    if (c) {
        cJSON_AddStringToObject(info, "corpus", "fixtures/cases");
        cJSON_AddNumberToObject(info, "cases", (double)sim_corpus_size(c));
        cJSON_AddNumberToObject(info, "min_score", SIM_MIN_SCORE);
    }
    if (q)
        info_lines(info, q);
    if (!rc && search(r, info, c, q))
        rc = -1;
    if (rc) {
        char *u = cp_utf8_clean(*err ? err : "out of memory");
        cJSON_AddStringToObject(info, "error", u ? u : "?");
        free(u);
    }
    free(q);
    sim_corpus_free(own);
    return rc;
}
