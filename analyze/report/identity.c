/* identity.c - see identity.h: the process's identity for every death kind, and the output a
 * supervisor forwarded (its last lines; a Python traceback in it as the report's exception). */
#include "identity.h"
#include "jpath.h"
#include "pyexc.h"
#include "pytb.h"
#include "utf8.h"

#include <stdlib.h>
#include <string.h>

#define MEMBER_JSON_MAX (16u << 20) /* process.json (it holds the environment), oom.json */
#define OUTPUT_MAX (16u << 20)      /* output.txt, a log tail: the evidence stage's cap too */
#define ARGS_MAX 4096
#define LAST_LINE_MAX 1024

/* A JSON object member of the bundle, or NULL (absent, unreadable, not an object). */
static cJSON *member_json(struct bundle *b, const char *name)
{
    if (!bundle_find(b, name))
        return NULL;
    char *buf = NULL;
    size_t len = 0;
    cJSON *j = NULL;
    if (bundle_read_all(b, name, MEMBER_JSON_MAX, &buf, &len) == BUNDLE_OK)
        j = cJSON_ParseWithLength(buf, len);
    free(buf);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

/* ---- identity ---- */

static int unknown(const cJSON *v)
{
    return !cJSON_IsString(v) || !v->valuestring[0];
}

/* p[key] = s (cleaned), from[key] = member, when p lacks key and s is a name. */
static void fill_str(cJSON *p, cJSON *from, const char *key, const char *s, const char *member)
{
    if (!unknown(cp_jkey(p, key)) || !s || !*s)
        return;
    char *c = cp_utf8_clean(s);
    cp_json_set(p, key, cJSON_CreateString(c ? c : ""));
    free(c);
    cp_json_set(from, key, cJSON_CreateString(member));
}

/* p.cmdline = argv (its strings, cleaned), from.cmdline = member, when p has none. */
static void fill_argv(cJSON *p, cJSON *from, const cJSON *argv, const char *member)
{
    if (cJSON_GetArraySize(cp_jkey(p, "cmdline")) > 0 || !cJSON_IsArray(argv))
        return;
    cJSON *a = cJSON_CreateArray();
    const cJSON *s;
    cJSON_ArrayForEach(s, argv)
    {
        if (!cJSON_IsString(s) || cJSON_GetArraySize(a) == ARGS_MAX)
            continue;
        char *c = cp_utf8_clean(s->valuestring);
        cJSON_AddItemToArray(a, cJSON_CreateString(c ? c : ""));
        free(c);
    }
    if (cJSON_GetArraySize(a) == 0) {
        cJSON_Delete(a);
        return;
    }
    cp_json_set(p, "cmdline", a);
    cp_json_set(from, "cmdline", cJSON_CreateString(member));
}

/* A member that names the process by pid: j's pid is the report's (or the report has none). */
static int same_pid(const cJSON *p, const cJSON *j)
{
    double a, b;
    return j && (!cp_jnum(p, "pid", &a) || (cp_jnum(j, "pid", &b) && a == b));
}

void report_identity(cJSON *r, const cJSON *man, struct bundle *b)
{
    cJSON *p = (cJSON *)cp_jkey(r, "process");
    if (!cJSON_IsObject(p))
        return;
    cJSON *from = cJSON_CreateObject();
    static const char *const keys[] = {"exe", "cmdline", "comm"};
    for (int i = 0; i < 3; i++) {
        const cJSON *v = cp_jkey(p, keys[i]);
        int have = i == 1 ? cJSON_GetArraySize(v) > 0 : !unknown(v);
        if (i == 1 && !cJSON_IsArray(v))
            cp_json_set(p, keys[i], cJSON_CreateArray());
        else if (i != 1 && !have)
            cp_json_set(p, keys[i], NULL); /* "" or absent: unknown */
        cp_json_set(from, keys[i], have ? cJSON_CreateString("manifest.json") : NULL);
    }
    if (unknown(cp_jkey(p, "exe")) || unknown(cp_jkey(p, "comm")) ||
        cJSON_GetArraySize(cp_jkey(p, "cmdline")) == 0) {
        cJSON *pj = member_json(b, "process.json"); /* crashpack run's record of the process */
        if (same_pid(p, pj)) {
            fill_str(p, from, "exe", cp_jstr(pj, "exe"), "process.json");
            fill_argv(p, from, cp_jkey(pj, "cmdline"), "process.json");
            fill_str(p, from, "comm", cp_jstr(pj, "comm"), "process.json");
        }
        cJSON_Delete(pj);
    }
    fill_str(p, from, "exe", cp_jstr_at(r, "exception.python.executable"), "exception.json");
    /* the name a death's reporter gave (crashpack-capture --event --comm) */
    fill_str(p, from, "comm", cp_jstr_at(man, "death.comm"), "manifest.json");
    if (unknown(cp_jkey(p, "comm"))) {
        cJSON *oj = member_json(b, "oom.json"); /* the kernel's kill line's comm */
        if (same_pid(p, oj))
            fill_str(p, from, "comm", cp_jstr(oj, "comm"), "oom.json");
        cJSON_Delete(oj);
    }
    cp_json_set(p, "identity_from", from);
}

/* ---- no placeholders ---- */

void report_no_placeholders(cJSON *r)
{
    cJSON *p = (cJSON *)cp_jkey(r, "process");
    double n;
    if (cp_jnum_at(p, "signal.number", &n) && n <= 0) { /* a live snapshot's core: no signal */
        cJSON *s = cJSON_CreateObject();
        cJSON_AddNullToObject(s, "number");
        cJSON_AddNullToObject(s, "name");
        cp_json_set(p, "signal", s);
    }
    if (cp_jnum(p, "crashed_tid", &n) && n < 0)
        cp_json_set(p, "crashed_tid", NULL);
    cJSON *c = (cJSON *)cp_jkey(r, "cause");
    if (!cJSON_IsObject(c) || cp_jnum_at(p, "signal.number", &n))
        return;
    const char *kind = cp_jstr_at(p, "death.kind");
    cp_json_set(c, "summary",
                cJSON_CreateString(kind && !strcmp(kind, "snapshot")
                                       ? "no signal: a live snapshot of the running process"
                                   : kind && !strcmp(kind, "exception")
                                       ? "no signal: a live snapshot taken as the Python "
                                         "exception was raised"
                                       : "no signal"));
}

/* ---- the output ---- */

/* Which member holds the output of a death of this kind, or NULL. */
static const char *output_member(struct bundle *b, const char *kind)
{
    if (bundle_find(b, "output.txt"))
        return "output.txt";
    /* a death without a core whose stdout or stderr were files: their tails */
    if (!kind || !strcmp(kind, "core") || !strcmp(kind, "snapshot") || !strcmp(kind, "exception"))
        return NULL;
    if (bundle_find(b, "logs/stderr.tail"))
        return "logs/stderr.tail";
    if (bundle_find(b, "logs/stdout.tail"))
        return "logs/stdout.tail";
    return NULL;
}

/* The bytes of out (len) that were stderr's, by process.json's output.stderr_ranges; NULL when
 * they are unknown. */
static char *stderr_of(struct bundle *b, const char *out, size_t len, size_t *slen)
{
    cJSON *pj = member_json(b, "process.json");
    const cJSON *ranges = cp_jpath(pj, "output.stderr_ranges"), *rg;
    char *s = cJSON_IsArray(ranges) ? malloc(len + 1) : NULL;
    size_t n = 0;
    if (!s)
        ranges = NULL;
    cJSON_ArrayForEach(rg, ranges)
    {
        const cJSON *o = cJSON_GetArrayItem(rg, 0), *l = cJSON_GetArrayItem(rg, 1);
        if (!cJSON_IsNumber(o) || !cJSON_IsNumber(l) || o->valuedouble < 0 || l->valuedouble < 0 ||
            o->valuedouble >= (double)len)
            continue;
        size_t off = (size_t)o->valuedouble, cnt = (size_t)l->valuedouble;
        if (cnt > len - off)
            cnt = len - off;
        if (cnt > len - n)
            cnt = len - n;
        memcpy(s + n, out + off, cnt);
        n += cnt;
    }
    cJSON_Delete(pj);
    *slen = n;
    return s;
}

/* The last OUTPUT_LAST_LINES lines of text (len) that are not blank, in their order, each
 * cleaned and at most LAST_LINE_MAX bytes, appended to a; the number appended. */
static int last_lines(const char *text, size_t len, cJSON *a)
{
    size_t cl = 0;
    char *c = pytb_clean(text, len, &cl);
    const char *found[OUTPUT_LAST_LINES];
    size_t flen[OUTPUT_LAST_LINES];
    int n = 0;
    for (size_t end = cl; c && end > 0 && n < OUTPUT_LAST_LINES;) {
        size_t start = end;
        while (start > 0 && c[start - 1] != '\n')
            start--;
        size_t l = end - start;
        if (l && strspn(c + start, " \t") < l) {
            found[n] = c + start;
            flen[n++] = l;
        }
        end = start ? start - 1 : 0;
    }
    for (int i = n - 1; i >= 0; i--) {
        char line[LAST_LINE_MAX + 1];
        size_t l = flen[i] < LAST_LINE_MAX ? flen[i] : LAST_LINE_MAX;
        while (l < flen[i] && l > 0 && ((unsigned char)found[i][l] & 0xc0) == 0x80)
            l--; /* never inside a UTF-8 sequence */
        memcpy(line, found[i], l);
        line[l] = 0;
        char *u = cp_utf8_clean(line);
        cJSON_AddItemToArray(a, cJSON_CreateString(u ? u : ""));
        free(u);
    }
    free(c);
    return n;
}

/* The last traceback of the output (len) as the report's exception (source "output"), for a
 * death that has none of its own. */
static void exception_from_output(cJSON *r, const char *member, const char *out, size_t len)
{
    const char *kind = cp_jstr_at(r, "process.death.kind");
    if (!kind || (strcmp(kind, "exit") && strcmp(kind, "signal") && strcmp(kind, "terminated")) ||
        cJSON_IsObject(cp_jkey(r, "exception")) || cp_jkey(r, "exception_error"))
        return;
    size_t cl = 0;
    char *c = pytb_clean(out, len, &cl);
    int line = 0;
    cJSON *j = c ? pytb_parse(c, cl, &line) : NULL;
    free(c);
    char why[256];
    cJSON *e = j ? pyexc_from_json(j, why, sizeof(why)) : NULL;
    cJSON_Delete(j);
    if (!e)
        return;
    cp_json_set(e, "source", cJSON_CreateString("output"));
    cJSON *o = cJSON_AddObjectToObject(e, "output");
    cJSON_AddStringToObject(o, "member", member);
    cJSON_AddNumberToObject(o, "line", line);
    cp_json_set(r, "exception", e);
}

void report_output(cJSON *r, struct bundle *b)
{
    const char *member = output_member(b, cp_jstr_at(r, "process.death.kind"));
    char *out = NULL;
    size_t len = 0;
    int rc = member ? bundle_read_all(b, member, OUTPUT_MAX, &out, &len) : BUNDLE_ENOENT;
    if ((rc != BUNDLE_OK && rc != BUNDLE_ETRUNC) || !out) {
        free(out);
        cp_json_set(r, "output", NULL);
        return;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "member", member);
    cJSON_AddNumberToObject(o, "size", (double)len);
    size_t slen = 0;
    char *err = !strcmp(member, "output.txt") ? stderr_of(b, out, len, &slen) : NULL;
    int known = err != NULL || !strcmp(member, "logs/stderr.tail");
    cJSON_AddBoolToObject(o, "stderr_known", known);
    cJSON *a = cJSON_AddArrayToObject(o, "last_lines");
    if (!err || !last_lines(err, slen, a))
        last_lines(out, len, a);
    free(err);
    cp_json_set(r, "output", o);
    exception_from_output(r, member, out, len);
    free(out);
}
