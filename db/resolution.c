/* resolution.c - the team's resolutions of crash groups (see resolution.h). */
#include "resolution.h"
#include "errmsg.h"
#include "jpath.h"
#include "kb_internal.h"
#include "query.h"

#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RES_COLS                                                                                   \
    "fingerprint, cause, category, ticket, resolved, resolved_uid, resolved_user, origin"

const char *kb_group_status_name(enum kb_group_status s)
{
    return s == KB_GROUP_RESOLVED ? "resolved" : s == KB_GROUP_REGRESSED ? "regressed" : "new";
}

enum kb_group_status kb_group_status(const cJSON *res, double last_time)
{
    if (!res)
        return KB_GROUP_NEW;
    return last_time > cp_jnum_or(res, "resolved", 0) ? KB_GROUP_REGRESSED : KB_GROUP_RESOLVED;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The first row's first column as text into buf: 1, 0 no row, -1 with err. */
static int first_text(struct kb *kb, const char *sql, const struct sql_arg *a, int na, char *buf,
                      size_t len, char *err, size_t errlen)
{
    cJSON *rows = sql_rows(kb->c, sql, a, na, err, errlen);
    if (!rows)
        return -1;
    const cJSON *c = cJSON_GetArrayItem(rows, 0);
    const char *s = c && c->child ? cJSON_GetStringValue(c->child) : NULL;
    if (s)
        snprintf(buf, len, "%s", s);
    cJSON_Delete(rows);
    return s != NULL;
}

int kb_group_of(struct kb *kb, const char *arg, char *fp, size_t fplen, char *err, size_t errlen)
{
    const struct sql_arg a[] = {SQL_TEXT_ARG(arg)};
    int rc = first_text(kb, "SELECT fingerprint FROM crashes WHERE fingerprint = ?1 LIMIT 1", a, 1,
                        fp, fplen, err, errlen);
    if (rc)
        return rc;
    if (kb->c->drv->has_table(kb->c, "resolutions")) { /* an imported group with no crash here */
        rc = first_text(kb, "SELECT fingerprint FROM resolutions WHERE fingerprint = ?1", a, 1, fp,
                        fplen, err, errlen);
        if (rc)
            return rc;
    }
    char *end;
    long long id = strtoll(arg, &end, 10);
    if (!*arg || *end || id <= 0)
        return 0;
    const struct sql_arg b[] = {SQL_INT_ARG(id)};
    return first_text(kb,
                      "SELECT fingerprint FROM crashes WHERE id = ?1 AND fingerprint IS NOT NULL",
                      b, 1, fp, fplen, err, errlen);
}

/* Inserts or replaces fp's resolution. Inside the caller's transaction or on its own. */
static int put(struct kb *kb, const char *fp, const char *cause, const char *category,
               const char *ticket, double when, long long uid, const char *user, const char *origin,
               char *err, size_t errlen)
{
    const struct sql_arg none = SQL_TEXT_ARG(NULL), u = SQL_INT_ARG(uid); /* uid < 0: NULL */
    const struct sql_arg a[] = {SQL_TEXT_ARG(fp),     SQL_TEXT_ARG(cause), SQL_TEXT_ARG(category),
                                SQL_TEXT_ARG(ticket), SQL_REAL_ARG(when),  uid < 0 ? none : u,
                                SQL_TEXT_ARG(user),   SQL_TEXT_ARG(origin)};
    return sql_run(kb->c,
                   "INSERT INTO resolutions(" RES_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
                   " ON CONFLICT(fingerprint) DO UPDATE SET cause = excluded.cause,"
                   " category = excluded.category, ticket = excluded.ticket,"
                   " resolved = excluded.resolved, resolved_uid = excluded.resolved_uid,"
                   " resolved_user = excluded.resolved_user, origin = excluded.origin",
                   a, 8, err, errlen);
}

int kb_resolve(struct kb *kb, const char *fp, const char *cause, const char *category,
               const char *ticket, char *err, size_t errlen)
{
    uid_t uid = getuid();
    struct passwd pw, *pp = NULL;
    char pwbuf[4096];
    const char *user = NULL;
    if (getpwuid_r(uid, &pw, pwbuf, sizeof(pwbuf), &pp) == 0 && pp && pp->pw_name)
        user = pp->pw_name;
    if (put(kb, fp, cause, category, ticket, now(), (long long)uid, user, NULL, err, errlen)) {
        cp_errmsg(err, errlen, "knowledge base: %s", sql_errmsg(kb->c));
        return -1;
    }
    return 0;
}

int kb_unresolve(struct kb *kb, const char *fp, char *err, size_t errlen)
{
    const struct sql_arg a[] = {SQL_TEXT_ARG(fp)};
    char had[8];
    int rc = first_text(kb, "SELECT 'yes' FROM resolutions WHERE fingerprint = ?1", a, 1, had,
                        sizeof(had), err, errlen);
    if (rc <= 0)
        return rc;
    return sql_run(kb->c, "DELETE FROM resolutions WHERE fingerprint = ?1", a, 1, err, errlen) ? -1
                                                                                               : 1;
}

cJSON *kb_resolution_of(struct kb *kb, const char *fp, long long uid)
{
    if (!fp || !kb->c->drv->has_table(kb->c, "resolutions"))
        return NULL;
    const struct sql_arg a[] = {SQL_TEXT_ARG(fp), SQL_INT_ARG(uid)};
    char q[512];
    snprintf(q, sizeof(q),
             "SELECT " RES_COLS ", (SELECT MAX(time) FROM crashes c WHERE c.fingerprint = ?1%s)"
             " AS last FROM resolutions WHERE fingerprint = ?1",
             uid != KB_ANY_UID ? " AND c.uid = ?2" : "");
    cJSON *rows = sql_rows(kb->c, q, a, uid != KB_ANY_UID ? 2 : 1, NULL, 0);
    cJSON *r = rows ? cJSON_DetachItemFromArray(rows, 0) : NULL;
    cJSON_Delete(rows);
    return r;
}

cJSON *kb_resolutions(struct kb *kb, char *err, size_t errlen)
{
    if (!kb->c->drv->has_table(kb->c, "resolutions"))
        return cJSON_CreateArray(); /* older than schema 7: none */
    return sql_rows(kb->c, "SELECT " RES_COLS " FROM resolutions ORDER BY fingerprint", NULL, 0,
                    err, errlen);
}

const char *kb_import_name(enum kb_import o)
{
    static const char *n[] = {"added", "replaced", "kept", "unchanged"};
    return n[o];
}

static void utc(double t, char *buf, size_t len)
{
    time_t tt = (time_t)t;
    struct tm tm;
    if (t <= 0 || !gmtime_r(&tt, &tm) || !strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm))
        snprintf(buf, len, "?");
}

/* How complete a resolution is beyond its cause: a ticket, a category. */
static int extras(const char *category, const char *ticket)
{
    return (ticket && *ticket) + (category && *category);
}

static int same_str(const char *a, const char *b)
{
    return (!a || !*a) ? (!b || !*b) : (b && !strcmp(a, b));
}

/* Which of the stored row and the entry (cause, category, ticket, when) stays: 1 the entry,
 * 0 the stored one (why says why), 2 they are the same. */
static int better(const cJSON *old, const char *cause, const char *category, const char *ticket,
                  double when, char *why, size_t whylen)
{
    double t0 = cp_jnum_or(old, "resolved", 0);
    const char *c0 = cp_jstr(old, "category"), *k0 = cp_jstr(old, "ticket");
    char a[32], b[32];
    utc(when, a, sizeof(a));
    utc(t0, b, sizeof(b));
    if (when > t0 + 0.001 || when < t0 - 0.001) {
        snprintf(why, whylen, "%s: resolved %s vs %s",
                 when > t0 ? "newer" : "the stored one is newer", when > t0 ? a : b,
                 when > t0 ? b : a);
        return when > t0;
    }
    int e1 = extras(category, ticket), e0 = extras(c0, k0);
    if (e1 != e0) {
        snprintf(why, whylen, "%s (ticket, category)",
                 e1 > e0 ? "as new and more complete"
                         : "the stored one is as new and more complete");
        return e1 > e0;
    }
    if (same_str(cause, cp_jstr(old, "cause")) && same_str(category, c0) && same_str(ticket, k0)) {
        snprintf(why, whylen, "the same resolution");
        return 2;
    }
    snprintf(why, whylen, "as new and as complete, with another text: the stored one stays");
    return 0;
}

int kb_import_resolution(struct kb *kb, const cJSON *e, const char *origin, enum kb_import *out,
                         char *why, size_t whylen, char *err, size_t errlen)
{
    const char *fp = cp_jstr_ne(e, "fingerprint"), *cause = cp_jstr_ne(e, "cause");
    double when = cp_jnum_or(e, "resolved", 0);
    why[0] = 0;
    if (!fp || !cause || when <= 0) {
        cp_errmsg(err, errlen, "a resolution needs a fingerprint, a cause and a time (resolved)");
        return -1;
    }
    const char *category = cp_jstr(e, "category"), *ticket = cp_jstr(e, "ticket");
    const cJSON *by = cp_jkey(e, "resolved_by");
    long long uid = cJSON_IsNumber(cp_jkey(by, "uid")) ? (long long)cp_jnum_or(by, "uid", 0) : -1;
    if (sql_begin_write(kb->c)) {
        cp_errmsg(err, errlen, "knowledge base: %s", sql_errmsg(kb->c));
        return -1;
    }
    cJSON *old = kb_resolution_of(kb, fp, KB_ANY_UID);
    int b = old ? better(old, cause, category, ticket, when, why, whylen) : 1;
    *out = !old     ? KB_IMPORT_ADDED
           : b == 2 ? KB_IMPORT_SAME
           : b      ? KB_IMPORT_REPLACED
                    : KB_IMPORT_KEPT;
    cJSON_Delete(old);
    char o[1100];
    snprintf(o, sizeof(o), "import: %s", origin ? origin : "?");
    int ok = b != 1 ||
             !put(kb, fp, cause, category, ticket, when, uid, cp_jstr(by, "user"), o, err, errlen);
    return kb_commit_or_rollback(kb, ok, err, errlen);
}

cJSON *kb_resolution_doc(const cJSON *row, const char *match, double last_time)
{
    cJSON *d = cJSON_CreateObject();
    double last = cp_jnum_or(row, "last", 0);
    cJSON_AddStringToObject(
        d, "status",
        kb_group_status_name(kb_group_status(row, last > last_time ? last : last_time)));
    if (match)
        cJSON_AddStringToObject(d, "match", match);
    static const char *keys[] = {"fingerprint", "cause", "category", "ticket"};
    for (int i = 0; i < 4; i++) {
        const char *s = cp_jstr(row, keys[i]);
        cJSON_AddItemToObject(d, keys[i], s ? cJSON_CreateString(s) : cJSON_CreateNull());
    }
    char t[32];
    double when = cp_jnum_or(row, "resolved", 0);
    utc(when, t, sizeof(t));
    cJSON_AddNumberToObject(d, "resolved", when);
    cJSON_AddStringToObject(d, "resolved_utc", t);
    cJSON *by = cJSON_AddObjectToObject(d, "resolved_by");
    const cJSON *u = cp_jkey(row, "resolved_uid");
    cJSON_AddItemToObject(
        by, "uid", cJSON_IsNumber(u) ? cJSON_CreateNumber(u->valuedouble) : cJSON_CreateNull());
    const char *user = cp_jstr(row, "resolved_user"), *origin = cp_jstr(row, "origin");
    cJSON_AddItemToObject(by, "user", user ? cJSON_CreateString(user) : cJSON_CreateNull());
    cJSON_AddItemToObject(d, "origin", origin ? cJSON_CreateString(origin) : cJSON_CreateNull());
    return d;
}

/* ---- matching a report to a resolution ---- */

/* A matcher: the resolution row (kb_resolution_of's) that matches report r, or NULL. */
struct matcher {
    const char *name; /* the report's resolution.match */
    cJSON *(*find)(struct kb *kb, const cJSON *r);
};

/* The same group: the crash's fingerprint was resolved. */
static cJSON *by_fingerprint(struct kb *kb, const cJSON *r)
{
    return kb_resolution_of(kb, cp_jstr_ne(r, "fingerprint"), KB_ANY_UID);
}

/* In order, the first match wins. The seam for issue 24 item 2: a matcher "similarity" that
 * finds the nearest resolved group by the stored features of the crash's error lines, exception
 * chain and signature goes after the exact one. */
static const struct matcher matchers[] = {
    {"fingerprint", by_fingerprint},
};

cJSON *kb_resolution_match(struct kb *kb, const cJSON *report)
{
    if (!kb)
        return NULL;
    double t = 0;
    cp_jnum_at(report, "host.time", &t);
    for (size_t i = 0; i < sizeof(matchers) / sizeof(matchers[0]); i++) {
        cJSON *row = matchers[i].find(kb, report);
        if (!row)
            continue;
        cJSON *d = kb_resolution_doc(row, matchers[i].name, t);
        cJSON_Delete(row);
        return d;
    }
    return NULL;
}
