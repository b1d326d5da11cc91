/* query.c - the knowledge base's read queries (see query.h). */
#include "query.h"
#include "kb_internal.h"
#include "errmsg.h"
#include "jpath.h"

#include <stdio.h>
#include <string.h>

#define ROW_COLS "id, time, host, job, rank, signal, top_title, signature"

cJSON *kb_list_crashes(struct kb *kb, int limit, long long uid, char *err, size_t errlen)
{
    const struct sql_arg b[] = {SQL_INT_ARG(limit), SQL_INT_ARG(uid)};
    if (uid != KB_ANY_UID)
        return sql_rows(kb->c,
                        "SELECT " ROW_COLS " FROM crashes WHERE uid = ?2"
                        " ORDER BY time DESC, id DESC LIMIT ?1",
                        b, 2, err, errlen);
    return sql_rows(kb->c, "SELECT " ROW_COLS " FROM crashes ORDER BY time DESC, id DESC LIMIT ?1",
                    b, 1, err, errlen);
}

cJSON *kb_search_crashes(struct kb *kb, const struct kb_filter *f, char *err, size_t errlen)
{
    char like[1024];
    snprintf(like, sizeof(like), "%%%s%%", f->text ? f->text : "");
    const char *sql = "SELECT " ROW_COLS " FROM crashes WHERE"
                      " (?1 = '%%%%' OR signature LIKE ?1 OR top_title LIKE ?1 OR diagnoses LIKE "
                      "?1 OR exe LIKE ?1"
                      "  OR fingerprint LIKE ?1 OR exception_type LIKE ?1"
                      "  OR exception_message LIKE ?1)"
                      " AND (?2 IS NULL OR host = ?2) AND (?3 IS NULL OR top_rule = ?3"
                      "  OR EXISTS (SELECT 1 FROM json_each(crashes.diagnoses)"
                      "   WHERE json_extract(value, '$.rule') = ?3))"
                      " AND (?4 IS NULL OR top_category = ?4) AND (?5 IS NULL OR job = ?5)"
                      " AND (?6 IS NULL OR fingerprint = ?6) AND coalesce(time, 0) >= ?7"
                      " AND coalesce(time, 0) <= ?8%s"
                      " ORDER BY time DESC, id DESC LIMIT ?9";
    char q[2048];
    snprintf(q, sizeof(q), sql, f->uid != KB_ANY_UID ? " AND uid = ?10" : "");
    const struct sql_arg b[] = {SQL_TEXT_ARG(like),     SQL_TEXT_ARG(f->host),
                                SQL_TEXT_ARG(f->rule),  SQL_TEXT_ARG(f->category),
                                SQL_TEXT_ARG(f->job),   SQL_TEXT_ARG(f->fingerprint),
                                SQL_REAL_ARG(f->since), SQL_REAL_ARG(f->until),
                                SQL_INT_ARG(f->limit),  SQL_INT_ARG(f->uid)};
    return sql_rows(kb->c, q, b, f->uid != KB_ANY_UID ? 10 : 9, err, errlen);
}

cJSON *kb_show_crash(struct kb *kb, long long id, long long uid, int *found, char *err,
                     size_t errlen)
{
    const struct sql_arg b[] = {SQL_INT_ARG(id), SQL_INT_ARG(uid)};
    *found = 1;
    const char *sql =
        "SELECT id, time, host, exe, signal, crash_kind, signature, fingerprint, job,"
        " rank, local_rank, bundle_path, bundle_xxh64, completeness_detail,"
        " (SELECT COUNT(*) FROM crashes c2 WHERE c2.fingerprint = crashes.fingerprint%s)"
        " AS seen, diagnoses"
        " FROM crashes WHERE id = ?1%s";
    char q[1024];
    int one = uid != KB_ANY_UID;
    snprintf(q, sizeof(q), sql, one ? " AND c2.uid = ?2" : "", one ? " AND uid = ?2" : "");
    cJSON *all = sql_rows(kb->c, q, b, one ? 2 : 1, err, errlen);
    if (!all)
        return NULL;
    cJSON *c = cJSON_DetachItemFromArray(all, 0);
    cJSON_Delete(all);
    if (!c) {
        *found = 0;
        return NULL;
    }
    const char *ds = cp_jstr(c, "diagnoses");
    cJSON *d = ds ? cJSON_Parse(ds) : NULL;
    cp_json_set(c, "diagnoses", d ? d : cJSON_CreateArray());
    const char *cd = cp_jstr(c, "completeness_detail");
    cJSON *cdj = cd ? cJSON_Parse(cd) : NULL;
    cp_json_set(c, "completeness_detail", cdj ? cdj : cJSON_CreateNull());
    cJSON *src =
        sql_rows(kb->c,
                 "SELECT id, kind, path, xxh64, size, added, added_uid, added_user, completeness,"
                 " completeness_detail, outcome, reason, error FROM crash_sources"
                 " WHERE crash_id = ?1 ORDER BY id",
                 b, 1, err, errlen);
    if (!src) {
        cJSON_Delete(c);
        return NULL;
    }
    cJSON *e;
    cJSON_ArrayForEach(e, src)
    {
        const char *sd = cp_jstr(e, "completeness_detail");
        cJSON *sdj = sd ? cJSON_Parse(sd) : NULL;
        cp_json_set(e, "completeness_detail", sdj ? sdj : cJSON_CreateNull());
    }
    cJSON_AddItemToObject(c, "sources", src);
    return c;
}

cJSON *kb_groups(struct kb *kb, int limit, char *err, size_t errlen)
{
    /* the groups first, then each one's resolution (a join per group, not per crash) */
    const char *sql =
        "SELECT g.*, r.cause AS cause, r.category AS category, r.ticket AS ticket,"
        " r.resolved AS resolved, r.resolved_uid AS resolved_uid,"
        " r.resolved_user AS resolved_user, r.origin AS origin FROM ("
        "SELECT fingerprint, COUNT(*) AS count, MIN(time) AS first, MAX(time) AS last,"
        " COUNT(DISTINCT host) AS hosts,"
        " (SELECT group_concat(h, ',') FROM (SELECT DISTINCT host AS h FROM crashes c3"
        "   WHERE c3.fingerprint IS c.fingerprint ORDER BY h LIMIT 4)) AS host_list,"
        " (SELECT top_title FROM crashes c2 WHERE c2.fingerprint IS c.fingerprint"
        "   AND top_title IS NOT NULL"
        "   GROUP BY top_title ORDER BY COUNT(*) DESC, top_title LIMIT 1) AS top_title,"
        " MAX(signature) AS signature"
        " FROM crashes c GROUP BY fingerprint ORDER BY count DESC, MAX(time) DESC LIMIT ?1"
        ") g LEFT JOIN resolutions r ON r.fingerprint = g.fingerprint"
        " ORDER BY g.count DESC, g.last DESC";
    const struct sql_arg b[] = {SQL_INT_ARG(limit)};
    return sql_rows(kb->c, sql, b, 1, err, errlen);
}

cJSON *kb_jobs(struct kb *kb, int limit, char *err, size_t errlen)
{
    const struct sql_arg b[] = {SQL_INT_ARG(limit)};
    return sql_rows(kb->c,
                    "SELECT job FROM crashes WHERE job IS NOT NULL GROUP BY job"
                    " ORDER BY MAX(time) DESC LIMIT ?1",
                    b, 1, err, errlen);
}

cJSON *kb_job_crashes(struct kb *kb, const char *job, char *err, size_t errlen)
{
    const struct sql_arg b[] = {SQL_TEXT_ARG(job)};
    return sql_rows(
        kb->c,
        "SELECT id, time, host, rank, top_title, top_category, top_consequence_of, top_rule, facts"
        " FROM crashes WHERE job = ?1 ORDER BY time, id",
        b, 1, err, errlen);
}

cJSON *kb_stats(struct kb *kb, char *err, size_t errlen)
{
    static const struct {
        const char *name, *sql;
    } blocks[] = {
        {"per_week", "SELECT strftime('%Y-W%W', time, 'unixepoch') AS key, COUNT(*) AS count"
                     " FROM crashes GROUP BY 1 ORDER BY 1 DESC LIMIT 26"},
        {"per_category", "SELECT coalesce(top_category, 'undiagnosed') AS key, COUNT(*) AS count"
                         " FROM crashes GROUP BY 1 ORDER BY 2 DESC, 1"},
        {"per_host", "SELECT host AS key, COUNT(*) AS count FROM crashes GROUP BY 1"
                     " ORDER BY 2 DESC, 1 LIMIT 50"},
    };
    cJSON *tot = sql_rows(kb->c,
                          "SELECT COUNT(*) AS crashes, COUNT(DISTINCT fingerprint) AS fingerprints,"
                          " COUNT(DISTINCT host) AS hosts FROM crashes",
                          NULL, 0, err, errlen);
    cJSON *s = tot ? cJSON_DetachItemFromArray(tot, 0) : NULL;
    cJSON_Delete(tot);
    if (!s)
        return NULL;
    for (size_t i = 0; i < sizeof(blocks) / sizeof(blocks[0]); i++) {
        cJSON *b = sql_rows(kb->c, blocks[i].sql, NULL, 0, err, errlen);
        if (!b) {
            cJSON_Delete(s);
            return NULL;
        }
        cJSON_AddItemToObject(s, blocks[i].name, b);
    }
    return s;
}

cJSON *kb_user_rules(struct kb *kb, char *err, size_t errlen)
{
    return sql_rows(kb->c, "SELECT id, json FROM user_rules WHERE id IS NOT NULL ORDER BY id", NULL,
                    0, err, errlen);
}

cJSON *kb_fingerprint_seen(struct kb *kb, const char *fingerprint)
{
    const struct sql_arg b[] = {SQL_TEXT_ARG(fingerprint)};
    cJSON *all = sql_rows(kb->c,
                          "SELECT COUNT(*) AS count, MIN(time) AS first, MAX(time) AS last,"
                          " COUNT(DISTINCT host) AS hosts FROM crashes WHERE fingerprint = ?1",
                          b, 1, NULL, 0);
    cJSON *r = all ? cJSON_DetachItemFromArray(all, 0) : NULL;
    cJSON_Delete(all);
    return r ? r : cJSON_CreateObject(); /* an unreadable table: as unseen */
}

cJSON *kb_gpu_history(struct kb *kb, const cJSON *r, double window_s, char *err, size_t errlen)
{
    double ct = -1;
    cp_jnum_at(r, "host.time", &ct);
    if (ct <= 0) {
        cp_errmsg(err, errlen, "the crash has no time: its history cannot be placed");
        return NULL;
    }
    /* this process's GPUs as JSON arrays, for json_each */
    const cJSON *sc = cp_jpath(r, "gpu.scope");
    const cJSON *uu = cp_jpath(sc, "uuids"), *pp = cp_jpath(sc, "pci");
    char *uuids = cJSON_IsArray(uu) ? cJSON_PrintUnformatted(uu) : NULL;
    char *pcis = cJSON_IsArray(pp) ? cJSON_PrintUnformatted(pp) : NULL;
    const struct sql_arg b[] = {SQL_REAL_ARG(ct - window_s), SQL_REAL_ARG(ct),
                                SQL_TEXT_ARG(cp_jstr_ne_at(r, "host.hostname")),
                                SQL_TEXT_ARG(uuids ? uuids : "[]"),
                                SQL_TEXT_ARG(pcis ? pcis : "[]")};
    /* another crash's fault (not this crash's record, analyzed again), before this one and inside
     * the window: one of this process's GPUs by UUID (wherever it was), or by PCI id on this host
     * when the UUID was unknown; or a fault of this whole host */
    cJSON *a =
        sql_rows(kb->c,
                 "SELECT f.crash_id AS crash_id, c.time AS crash_time, f.host AS host,"
                 " f.scope AS scope, f.pci AS pci, f.uuid AS uuid, f.code AS code, f.kind AS kind,"
                 " f.time AS time, ?2 - f.time AS age_s, f.text AS text"
                 " FROM gpu_faults f JOIN crashes c ON c.id = f.crash_id"
                 " WHERE f.time >= ?1 AND f.time < ?2"
                 " AND NOT (c.host IS ?3 AND abs(c.time - ?2) < 0.001)"
                 " AND ((f.scope = 'gpu' AND (f.uuid IN (SELECT value FROM json_each(?4))"
                 "      OR (f.uuid IS NULL AND f.host IS ?3 AND f.pci IN (SELECT value FROM "
                 "json_each(?5)))))"
                 "   OR (f.scope = 'host' AND ?3 IS NOT NULL AND f.host IS ?3))"
                 " GROUP BY f.scope, coalesce(f.uuid, f.pci), f.code, f.kind, f.time"
                 " ORDER BY f.time DESC LIMIT 32",
                 b, 5, err, errlen);
    cJSON_free(uuids);
    cJSON_free(pcis);
    return a;
}
