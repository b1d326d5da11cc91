/* logerr.c - error lines of a log tail through data-driven POSIX regexes (see logerr.h). */
#include "utf8.h"
#include "logerr.h"

#include "datadir.h"
#include "errmsg.h"
#include "jpath.h"

#include <errno.h>
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PATTERNS_MAX_BYTES (4u << 20)
#define MAX_PATTERNS 1024
#define MAX_FIELD_RX 8

enum ftype { F_STR, F_INT, F_MIB };

struct field {
    char *name;
    enum ftype type;
    size_t nrx;
    regex_t rx[MAX_FIELD_RX];
};

struct pattern {
    char *id, *category, *kind;
    regex_t rx;
    size_t nfields;
    struct field *fields;
};

struct logerr_set {
    size_t n;
    struct pattern *p;
};

static void free_pattern(struct pattern *p, int rx_ok)
{
    if (rx_ok)
        regfree(&p->rx);
    for (size_t i = 0; i < p->nfields; i++) {
        for (size_t j = 0; j < p->fields[i].nrx; j++)
            regfree(&p->fields[i].rx[j]);
        free(p->fields[i].name);
    }
    free(p->fields);
    free(p->id);
    free(p->category);
    free(p->kind);
}

void logerr_free(struct logerr_set *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        free_pattern(&s->p[i], 1);
    free(s->p);
    free(s);
}

static int compile(regex_t *rx, const char *src, int icase, const char *id, char *err,
                   size_t errlen)
{
    int rc = regcomp(rx, src, REG_EXTENDED | (icase ? REG_ICASE : 0));
    if (rc) {
        char m[200];
        regerror(rc, rx, m, sizeof(m));
        cp_errmsg(err, errlen, "pattern %s: bad regex `%s`: %s", id, src, m);
        return -1;
    }
    return 0;
}

static int load_fields(struct pattern *p, const cJSON *fo, int icase, char *err, size_t errlen)
{
    int n = cJSON_GetArraySize(fo);
    if (!n)
        return 0;
    p->fields = calloc((size_t)n, sizeof(*p->fields));
    if (!p->fields) {
        cp_errmsg(err, errlen, "out of memory");
        return -1;
    }
    const cJSON *f;
    cJSON_ArrayForEach(f, fo)
    {
        struct field *fd = &p->fields[p->nfields];
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(f, "type");
        const cJSON *rxs = cJSON_GetObjectItemCaseSensitive(f, "regex");
        if (!f->string || !cJSON_IsArray(rxs)) {
            cp_errmsg(err, errlen, "pattern %s: field without a name or a regex list", p->id);
            return -1;
        }
        fd->name = strdup(f->string);
        p->nfields++;
        fd->type = !cJSON_IsString(t)                  ? F_STR
                   : !strcmp(t->valuestring, "int")    ? F_INT
                   : !strcmp(t->valuestring, "mib")    ? F_MIB
                                                       : F_STR;
        const cJSON *r;
        cJSON_ArrayForEach(r, rxs)
        {
            if (!cJSON_IsString(r) || fd->nrx == MAX_FIELD_RX) {
                cp_errmsg(err, errlen, "pattern %s field %s: bad regex list", p->id, fd->name);
                return -1;
            }
            if (compile(&fd->rx[fd->nrx], r->valuestring, icase, p->id, err, errlen))
                return -1;
            fd->nrx++;
        }
    }
    return 0;
}

struct logerr_set *logerr_load_json(const char *json, size_t len, char *err, size_t errlen)
{
    cJSON *j = cJSON_ParseWithLength(json, len);
    const cJSON *pats = cJSON_GetObjectItemCaseSensitive(j, "patterns");
    if (!cJSON_IsArray(pats) || cJSON_GetArraySize(pats) > MAX_PATTERNS) {
        cp_errmsg(err, errlen, "not a pattern file: no \"patterns\" array (of at most %d)",
                  MAX_PATTERNS);
        cJSON_Delete(j);
        return NULL;
    }
    struct logerr_set *s = calloc(1, sizeof(*s));
    int n = cJSON_GetArraySize(pats);
    if (s)
        s->p = calloc((size_t)(n ? n : 1), sizeof(*s->p));
    if (!s || !s->p) {
        free(s);
        cJSON_Delete(j);
        cp_errmsg(err, errlen, "out of memory");
        return NULL;
    }
    const cJSON *po;
    cJSON_ArrayForEach(po, pats)
    {
        struct pattern *p = &s->p[s->n];
        p->id = cp_jstrdup(po, "id");
        p->category = cp_jstrdup(po, "category");
        p->kind = cp_jstrdup(po, "kind");
        const cJSON *rx = cJSON_GetObjectItemCaseSensitive(po, "regex");
        int icase = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(po, "icase"));
        if (!p->id || !p->category || !cJSON_IsString(rx)) {
            cp_errmsg(err, errlen, "pattern #%zu: needs id, category and regex", s->n + 1);
            free_pattern(p, 0);
            goto fail;
        }
        if (compile(&p->rx, rx->valuestring, icase, p->id, err, errlen)) {
            free_pattern(p, 0);
            goto fail;
        }
        if (load_fields(p, cJSON_GetObjectItemCaseSensitive(po, "fields"), icase, err, errlen)) {
            free_pattern(p, 1);
            goto fail;
        }
        s->n++;
    }
    cJSON_Delete(j);
    return s;
fail:
    cJSON_Delete(j);
    logerr_free(s);
    return NULL;
}

struct logerr_set *logerr_load(char *err, size_t errlen)
{
    size_t n;
    char path[4096], e2[400];
    char *buf = cp_data_read("rules/logs/patterns.json", "log patterns", PATTERNS_MAX_BYTES, &n,
                             path, sizeof(path), err, errlen);
    if (!buf)
        return NULL;
    struct logerr_set *s = logerr_load_json(buf, n, e2, sizeof(e2));
    free(buf);
    if (!s)
        cp_errmsg(err, errlen, "%s: %s", path, e2);
    return s;
}

/* ---- matching ---- */

void logerr_clean_utf8(char *dst, size_t dsz, const char *s, size_t len, int keep_nl)
{
    size_t j = 0;
    if (!dsz)
        return;
    for (size_t i = 0; i < len;) {
        size_t n = cp_utf8_seq((const unsigned char *)s + i, len - i);
        if (j + (n ? n : 3) + 1 > dsz) /* no room for this character and the NUL */
            break;
        if (n == 0) {
            memcpy(dst + j, "\xEF\xBF\xBD", 3);
            j += 3;
            i++;
        } else if (n == 1 && ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) && s[i] != '\t' &&
                   !(keep_nl && s[i] == '\n')) {
            dst[j++] = ' ';
            i++;
        } else {
            memcpy(dst + j, s + i, n);
            j += n;
            i += n;
        }
    }
    dst[j] = 0;
}

static double to_mib(double v, const char *unit)
{
    switch (unit[0]) {
    case 'K':
        return v / 1024;
    case 'M':
        return v;
    case 'G':
        return v * 1024;
    case 'T':
        return v * 1024 * 1024;
    case 'P':
        return v * 1024 * 1024 * 1024;
    default: /* B, bytes */
        return v / (1024.0 * 1024.0);
    }
}

static void extract(const struct field *f, const char *line, cJSON *fields)
{
    regmatch_t m[8];
    for (size_t i = 0; i < f->nrx; i++) {
        if (regexec(&f->rx[i], line, 8, m, 0) || m[1].rm_so < 0)
            continue;
        char v[256];
        size_t l = (size_t)(m[1].rm_eo - m[1].rm_so);
        if (l >= sizeof(v))
            l = sizeof(v) - 1;
        memcpy(v, line + m[1].rm_so, l);
        v[l] = 0;
        if (f->type == F_STR) {
            cJSON_AddStringToObject(fields, f->name, v);
        } else if (f->type == F_INT) {
            cJSON_AddNumberToObject(fields, f->name, strtod(v, NULL));
        } else {
            char unit[16] = "MiB";
            if (m[3].rm_so >= 0) {
                size_t ul = (size_t)(m[3].rm_eo - m[3].rm_so);
                if (ul >= sizeof(unit))
                    ul = sizeof(unit) - 1;
                memcpy(unit, line + m[3].rm_so, ul);
                unit[ul] = 0;
            }
            double x = to_mib(strtod(v, NULL), unit);
            cJSON_AddNumberToObject(fields, f->name, round(x * 100) / 100);
        }
        return;
    }
}

static const struct pattern *match(const struct logerr_set *s, const char *line)
{
    for (size_t i = 0; i < s->n; i++)
        if (!regexec(&s->p[i].rx, line, 0, NULL, 0))
            return &s->p[i];
    return NULL;
}

const char *logerr_match_line(const struct logerr_set *s, const char *line, const char **kind)
{
    const struct pattern *p = match(s, line);
    if (kind)
        *kind = p ? p->kind : NULL;
    return p ? p->category : NULL;
}

size_t logerr_scan(const struct logerr_set *s, const char *text, size_t len, const char *source,
                   cJSON *out, size_t max)
{
    size_t cap = LOGERR_LINE_MAX * 3 + 8;
    char *line = malloc(cap);
    if (!line)
        return 0;
    size_t found = 0, added = 0, lineno = 0;
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *e = nl ? nl : end;
        lineno++;
        size_t l = (size_t)(e - p);
        if (l && p[l - 1] == '\r')
            l--;
        logerr_clean_utf8(line, cap, p, l < LOGERR_LINE_MAX ? l : LOGERR_LINE_MAX, 0);
        p = nl ? nl + 1 : end;
        const struct pattern *pt = line[0] ? match(s, line) : NULL;
        if (!pt)
            continue;
        found++;
        if (added >= max)
            continue;
        cJSON *o = cJSON_CreateObject();
        if (!o)
            break;
        if (strlen(line) > LOGERR_TEXT_MAX) {
            size_t c = LOGERR_TEXT_MAX;
            while (c && ((unsigned char)line[c] & 0xc0) == 0x80)
                c--;
            line[c] = 0;
        }
        cJSON_AddStringToObject(o, "text", line);
        cJSON_AddStringToObject(o, "category", pt->category);
        if (pt->kind)
            cJSON_AddStringToObject(o, "kind", pt->kind);
        else
            cJSON_AddNullToObject(o, "kind");
        cJSON_AddStringToObject(o, "pattern", pt->id);
        cJSON_AddNumberToObject(o, "line", (double)lineno);
        cJSON_AddStringToObject(o, "source", source ? source : "");
        cJSON *fields = cJSON_AddObjectToObject(o, "fields");
        for (size_t i = 0; i < pt->nfields; i++)
            extract(&pt->fields[i], line, fields);
        cJSON_AddItemToArray(out, o);
        added++;
    }
    free(line);
    return found;
}

/* ---- what() and abort messages from a log (logerr_fill_cause) ---- */

/* The next line of [*p, end): its start and length (without "\r\n"); *p moves past it. */
static const char *next_line(const char **p, const char *end, size_t *l)
{
    const char *s = *p, *nl = memchr(s, '\n', (size_t)(end - s));
    const char *e = nl ? nl : end;
    *p = nl ? nl + 1 : end;
    *l = (size_t)(e - s);
    if (*l && s[*l - 1] == '\r')
        (*l)--;
    return s;
}

/* A clean copy of a line for the report (at most LOGERR_TEXT_MAX bytes, whole UTF-8 sequences). */
static char *clean_copy(const char *s, size_t l)
{
    size_t cap = LOGERR_TEXT_MAX * 3 + 8;
    char *o = malloc(cap);
    if (!o)
        return NULL;
    logerr_clean_utf8(o, cap, s, l < LOGERR_TEXT_MAX ? l : LOGERR_TEXT_MAX, 0);
    if (strlen(o) > LOGERR_TEXT_MAX) {
        size_t c = LOGERR_TEXT_MAX;
        while (c && ((unsigned char)o[c] & 0xc0) == 0x80)
            c--;
        o[c] = 0;
    }
    return o;
}

/* glibc's abort messages, as abort() leaves them on stderr: a failed assert(), a fortify or
 * stack-protector check, and malloc's consistency checks (malloc_printerr). */
static const char *const abort_rx =
    "^.*: Assertion `.*' failed\\.$"
    "|^\\*\\*\\* .* \\*\\*\\*: terminated$"
    "|^(free|malloc|realloc|calloc|munmap_chunk|malloc_consolidate|_int_free|_int_malloc|"
    "_int_realloc|tcache_thread_shutdown)\\(\\): [a-z].*$"
    "|^double free or corruption( \\((out|top|fasttop|!prev)\\))?$"
    "|^corrupted (size vs\\. prev_size|double-linked list).*$";

void logerr_fill_cause(cJSON *report, const char *text, size_t len, const char *source)
{
    cJSON *cause = cJSON_GetObjectItemCaseSensitive(report, "cause");
    if (!cJSON_IsObject(cause) || !text)
        return;
    const char *end = text + len;
    /* what(): libstdc++'s verbose terminate handler prints
     *   terminate called after throwing an instance of 'TYPE'
     *     what():  TEXT
     * (TEXT's first line; the last such pair of the log wins) */
    cJSON *ex = cJSON_GetObjectItemCaseSensitive(cause, "exception");
    const char *type = cp_jstr(ex, "type");
    if (type && !cp_jstr(ex, "what")) {
        char head[600];
        snprintf(head, sizeof(head), "terminate called after throwing an instance of '%s'", type);
        char *what = NULL;
        size_t what_line = 0, lineno = 0, l;
        const char *p = text;
        int armed = 0;
        while (p < end) {
            const char *s = next_line(&p, end, &l);
            lineno++;
            if (armed) {
                const char *w = memmem(s, l, "what():", 7);
                if (w) {
                    w += 7;
                    while (w < s + l && (*w == ' ' || *w == '\t'))
                        w++;
                    if (w < s + l) {
                        free(what);
                        what = clean_copy(w, (size_t)(s + l - w));
                        what_line = lineno;
                    }
                }
                armed = 0;
            }
            if (memmem(s, l, head, strlen(head)))
                armed = 1;
        }
        if (what) {
            cJSON_DeleteItemFromObjectCaseSensitive(ex, "what");
            cJSON_AddStringToObject(ex, "what", what);
            cJSON_DeleteItemFromObjectCaseSensitive(ex, "what_source");
            cJSON_AddStringToObject(ex, "what_source", "log");
            cJSON_DeleteItemFromObjectCaseSensitive(ex, "what_log");
            cJSON *wl = cJSON_AddObjectToObject(ex, "what_log");
            cJSON_AddStringToObject(wl, "source", source ? source : "");
            cJSON_AddNumberToObject(wl, "line", (double)what_line);
            free(what);
        }
    }
    /* an abort message glibc printed, when the core had none (a SIGABRT only) */
    if (!cp_jstr(cause, "abort_message") &&
        cp_jstr_at(report, "process.signal.name") &&
        !strcmp(cp_jstr_at(report, "process.signal.name"), "SIGABRT")) {
        regex_t rx;
        if (regcomp(&rx, abort_rx, REG_EXTENDED | REG_NOSUB))
            return;
        char *msg = NULL, *line = malloc(LOGERR_LINE_MAX * 3 + 8);
        size_t l;
        const char *p = text;
        while (line && p < end) {
            const char *s = next_line(&p, end, &l);
            logerr_clean_utf8(line, LOGERR_LINE_MAX * 3 + 8, s, l < LOGERR_LINE_MAX ? l : LOGERR_LINE_MAX, 0);
            if (line[0] && !regexec(&rx, line, 0, NULL, 0)) {
                free(msg);
                msg = clean_copy(line, strlen(line));
            }
        }
        free(line);
        regfree(&rx);
        if (msg) {
            cJSON_DeleteItemFromObjectCaseSensitive(cause, "abort_message");
            cJSON_AddStringToObject(cause, "abort_message", msg);
            cJSON_DeleteItemFromObjectCaseSensitive(cause, "abort_message_source");
            cJSON_AddStringToObject(cause, "abort_message_source", "log");
            free(msg);
        }
    }
}
