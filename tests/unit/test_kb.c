/* test_kb.c - the knowledge base (db/kb.h): a database of an older schema version migrates
 * with its rows intact (each row gets its bundle path as its one source); two concurrent writer
 * processes adding 500 crashes each lose none; re-adding the same crash never doubles it, and the
 * more complete record stays: a cut-short report neither replaces a complete one nor survives
 * one, the same bundle again is stored again, a report without identity is a recorded failure
 * that changes nothing; each crash keeps its process's uid, and a query for one uid sees only
 * that uid's crashes; a group's resolution (db/resolution.h): found by fingerprint or crash id,
 * its status new, resolved, regressed, and an import that keeps the better one. */
#include "kb.h"
#include "query.h"
#include "resolution.h"

#include <sqlite3.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

/* The tests look at the file with SQL of their own, through a second connection (the
 * knowledge base's handle shows no engine). */
static long long scalar(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    long long v = -1;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, sql, -1, &q, NULL) == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW)
        v = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    sqlite3_close(db);
    return v;
}

static int raw_exec(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    sqlite3_close(db);
    return rc;
}

static cJSON *report(int writer, int i)
{
    char buf[1024];
    snprintf(buf, sizeof(buf),
             "{\"process\": {\"pid\": %d, \"crashed_tid\": %d, \"exe\": \"/usr/bin/python3\","
             " \"signal\": {\"name\": \"SIGABRT\"}, \"env\": {\"SLURM_JOB_ID\": \"%d\", \"RANK\": \"%d\"}},"
             " \"host\": {\"hostname\": \"node%02d\", \"time\": %d},"
             " \"signature\": \"SIGABRT | f%d | main\", \"fingerprint\": \"fp%d\","
             " \"diagnoses\": [{\"rule\": \"cuda-oom\", \"title\": \"CUDA out of memory\","
             " \"category\": \"cuda_oom\", \"consequence_of\": null}]}",
             100000 + writer * 10000 + i, 100000 + writer * 10000 + i, 1000 + i / 8, i % 8,
             i % 16, 1790000000 + i, i % 7, i % 7);
    return cJSON_Parse(buf);
}

/* A crash on host `host` at time t whose own GPU (pci, uuid: nvidia-smi's) logged Xid `code` of
 * blame `blame`, and optionally a machine-check line; its process's GPUs are gpu.scope's. */
static cJSON *gpu_report(int pid, const char *host, double t, const char *pci, const char *uuid,
                         int code, const char *blame, const char *scope_uuid, const char *scope_pci,
                         int mce)
{
    char buf[2048];
    snprintf(buf, sizeof(buf),
             "{\"process\": {\"pid\": %d, \"crashed_tid\": %d}, \"host\": {\"hostname\": \"%s\", \"time\": %.0f},"
             " \"gpu\": {\"xid\": [%s], \"nvidia_smi\": {\"gpus\": [{\"pci\": \"%s\", \"uuid\": \"%s\"}]},"
             " \"scope\": {\"process_gpus\": \"known\", \"uuids\": [\"%s\"], \"pci\": [\"%s\"]}},"
             " \"kernel_log\": {\"lines\": [%s]}, \"diagnoses\": []}",
             pid, pid, host, t, "%XID%", pci, uuid, scope_uuid, scope_pci,
             mce ? "{\"class\": \"mce\", \"time\": 1795999900, \"text\": \"mce: [Hardware Error]: Machine check events logged\"}" : "");
    char xid[512] = "";
    if (code)
        snprintf(xid, sizeof(xid),
                 "{\"code\": %d, \"pci\": \"%s\", \"scope\": \"own\", \"active\": true, \"blame\": \"%s\","
                 " \"time\": %.0f, \"name\": \"Xid %d\", \"line\": \"NVRM: Xid (PCI:%s): %d, pid=%d\"}",
                 code, pci, blame, t - 5, code, pci, code, pid);
    char out[4096];
    char *at = strstr(buf, "%XID%");
    snprintf(out, sizeof(out), "%.*s%s%s", (int)(at - buf), buf, xid, at + 5);
    return cJSON_Parse(out);
}

static int history_count(struct kb *db, cJSON *r, const char *scope)
{
    char err[256];
    cJSON *h = kb_gpu_history(db, r, 6 * 3600.0, err, sizeof(err));
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, h)
    {
        const cJSON *s = cJSON_GetObjectItem(e, "scope");
        n += !scope || (cJSON_IsString(s) && !strcmp(s->valuestring, scope));
    }
    if (!h)
        printf("  kb_gpu_history: %s\n", err);
    cJSON_Delete(h);
    cJSON_Delete(r);
    return h ? n : -1;
}

static int writer(const char *path, int w, int n)
{
    struct kb *db = NULL;
    char err[512];
    if (kb_open(path, KB_CREATE, &db, err, sizeof(err))) {
        fprintf(stderr, "writer %d: %s\n", w, err);
        return 1;
    }
    int bad = 0;
    for (int i = 0; i < n; i++) {
        cJSON *r = report(w, i);
        struct kb_source src = {"bundle", "/bundles/x.zst", NULL, -1};
        struct kb_result res;
        if (kb_add_report(db, r, &src, &res, err, sizeof(err)) || res.outcome != KB_ADDED) {
            fprintf(stderr, "writer %d, crash %d: %s\n", w, i,
                    res.outcome == KB_ADDED ? err : kb_outcome_name(res.outcome));
            bad++;
        }
        cJSON_Delete(r);
    }
    kb_close(db);
    return bad != 0;
}

/* 5. whose crash it is (schema 5): each record keeps the process's uid, and a query for one uid
 * (the agent's answer to a user) sees that uid's crashes only; a row without a uid is nobody's. */
static void test_uids(const char *dir)
{
    char path[256], err[512] = "";
    snprintf(path, sizeof(path), "%s/uids.sqlite", dir);
    struct kb *db = NULL;
    CHECK(kb_open(path, KB_CREATE, &db, err, sizeof(err)) == 0, "uids: a new knowledge base");
    if (!db)
        return;
    const int uids[] = {1000, 1000, 65534, -1};
    for (int i = 0; i < 4; i++) {
        char buf[512];
        snprintf(
            buf, sizeof(buf),
            "{\"process\": {\"pid\": %d, \"crashed_tid\": %d%s%d}, \"host\": {\"hostname\": \"u\","
            " \"time\": %d}, \"signature\": \"sig-%d\", \"fingerprint\": \"fpu\", \"diagnoses\": "
            "[]}",
            700 + i, 700 + i, uids[i] >= 0 ? ", \"uid\": " : ", \"nouid\": ", uids[i],
            1790000000 + i, uids[i]);
        cJSON *r = cJSON_Parse(buf);
        struct kb_source src = {"report-json", "/r.json", "00000000000000ff", 1};
        struct kb_result res;
        CHECK(r && kb_add_report(db, r, &src, &res, err, sizeof(err)) == 0 &&
                  res.outcome == KB_ADDED,
              "uids: crash %d of uid %d added", i, uids[i]);
        cJSON_Delete(r);
    }
    CHECK(scalar(path, "SELECT COUNT(*) FROM crashes WHERE uid = 1000") == 2 &&
              scalar(path, "SELECT COUNT(*) FROM crashes WHERE uid IS NULL") == 1,
          "uids: process.uid stored; none without one");
    cJSON *l = kb_list_crashes(db, 50, 1000, err, sizeof(err));
    CHECK(cJSON_GetArraySize(l) == 2, "uids: uid 1000 lists its 2 crashes");
    cJSON_Delete(l);
    l = kb_list_crashes(db, 50, KB_ANY_UID, err, sizeof(err));
    CHECK(cJSON_GetArraySize(l) == 4, "uids: KB_ANY_UID lists all 4");
    cJSON_Delete(l);
    struct kb_filter f = {"sig", NULL, NULL, NULL, NULL, NULL, 0, 1e18, 50, 65534};
    l = kb_search_crashes(db, &f, err, sizeof(err));
    CHECK(cJSON_GetArraySize(l) == 1, "uids: a search by uid 65534 finds its 1 crash only");
    cJSON_Delete(l);
    long long other = scalar(path, "SELECT id FROM crashes WHERE uid = 65534");
    int found = 1;
    cJSON *c = kb_show_crash(db, other, 1000, &found, err, sizeof(err));
    CHECK(!c && !found, "uids: uid 1000 cannot show uid 65534's crash");
    long long mine = scalar(path, "SELECT id FROM crashes WHERE uid = 1000 ORDER BY id LIMIT 1");
    c = kb_show_crash(db, mine, 1000, &found, err, sizeof(err));
    CHECK(c && cJSON_GetNumberValue(cJSON_GetObjectItem(c, "seen")) == 2,
          "uids: it shows its own, seen counting its own crashes of the fingerprint (2, not 4)");
    cJSON_Delete(c);
    kb_close(db);
}

/* One import of fpr's resolution: its outcome, or -1 when it was refused. */
static int import_one(struct kb *db, const char *json)
{
    char why[300], err[512];
    enum kb_import o;
    cJSON *e = cJSON_Parse(json);
    int rc = kb_import_resolution(db, e, "/team.json", &o, why, sizeof(why), err, sizeof(err));
    cJSON_Delete(e);
    return rc ? -1 : (int)o;
}

/* fpr's status now: "new", "resolved" or "regressed". */
static const char *status_of(struct kb *db)
{
    cJSON *row = kb_resolution_of(db, "fpr", KB_ANY_UID);
    const char *s = kb_group_status_name(
        kb_group_status(row, cJSON_GetNumberValue(cJSON_GetObjectItem(row, "last"))));
    cJSON_Delete(row);
    return s;
}

static void test_resolutions(const char *dir)
{
    char path[256], err[512] = "", fp[64];
    snprintf(path, sizeof(path), "%s/res.sqlite", dir);
    struct kb *db = NULL;
    CHECK(kb_open(path, KB_CREATE, &db, err, sizeof(err)) == 0,
          "resolutions: a new knowledge base");
    if (!db)
        return;
    for (int i = 0; i < 2; i++) { /* two crashes of group fpr, at ...000 and ...100 */
        char buf[512];
        snprintf(
            buf, sizeof(buf),
            "{\"process\": {\"pid\": %d, \"crashed_tid\": %d}, \"host\": {\"hostname\": \"r\","
            " \"time\": %d}, \"signature\": \"sig\", \"fingerprint\": \"fpr\", \"diagnoses\": []}",
            800 + i, 800 + i, 1790000000 + 100 * i);
        cJSON *r = cJSON_Parse(buf);
        struct kb_source src = {"report-json", "/r.json", "00000000000000ff", 1};
        struct kb_result res;
        CHECK(r && kb_add_report(db, r, &src, &res, err, sizeof(err)) == 0,
              "resolutions: crash %d added", i);
        cJSON_Delete(r);
    }
    CHECK(kb_group_of(db, "fpr", fp, sizeof(fp), err, sizeof(err)) == 1 && !strcmp(fp, "fpr") &&
              kb_group_of(db, "2", fp, sizeof(fp), err, sizeof(err)) == 1 && !strcmp(fp, "fpr"),
          "resolutions: a group by its fingerprint, and by a crash id");
    CHECK(kb_group_of(db, "nope", fp, sizeof(fp), err, sizeof(err)) == 0 &&
              kb_group_of(db, "99", fp, sizeof(fp), err, sizeof(err)) == 0,
          "resolutions: no such group or crash");
    CHECK(!strcmp(status_of(db), "new"), "resolutions: without one, the group is new");
    CHECK(kb_resolve(db, "fpr", "bad node", "hardware", "https://t/1", err, sizeof(err)) == 0 &&
              !strcmp(status_of(db), "resolved"),
          "resolutions: resolved now, after both crashes: resolved");
    const char *older =
        "{\"fingerprint\": \"fpr\", \"cause\": \"older\", \"resolved\": 1790000050}";
    CHECK(import_one(db, older) == KB_IMPORT_KEPT, "resolutions: an older import is kept out");
    cJSON *row = kb_resolution_of(db, "fpr", KB_ANY_UID);
    CHECK(row && !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(row, "cause")), "bad node"),
          "resolutions: the newer one stays");
    cJSON_Delete(row);
    CHECK(kb_unresolve(db, "fpr", err, sizeof(err)) == 1 &&
              kb_unresolve(db, "fpr", err, sizeof(err)) == 0 && !strcmp(status_of(db), "new"),
          "resolutions: unresolve removes it (once)");
    CHECK(import_one(db, older) == KB_IMPORT_ADDED && !strcmp(status_of(db), "regressed"),
          "resolutions: resolved between the two crashes: regressed");
    cJSON *rep = cJSON_Parse("{\"fingerprint\": \"fpr\", \"host\": {\"time\": 1790000010}}");
    cJSON *m = kb_resolution_match(db, rep);
    CHECK(m && !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(m, "match")), "fingerprint") &&
              !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(m, "status")), "regressed"),
          "resolutions: a report of the group matches by fingerprint; the group is regressed");
    cJSON_Delete(m);
    cJSON_Delete(rep);
    CHECK(import_one(db, older) == KB_IMPORT_SAME, "resolutions: the same again: unchanged");
    CHECK(import_one(db,
                     "{\"fingerprint\": \"fpr\", \"cause\": \"older\", \"ticket\": \"https://t/2\","
                     " \"resolved\": 1790000050}") == KB_IMPORT_REPLACED,
          "resolutions: as new, with a ticket: replaced");
    CHECK(import_one(
              db, "{\"fingerprint\": \"fpr\", \"cause\": \"other\", \"resolved\": 1790000050}") ==
              KB_IMPORT_KEPT,
          "resolutions: as new, without the ticket: kept out");
    CHECK(import_one(db, "{\"fingerprint\": \"fpr\", \"resolved\": 1790000050}") == -1,
          "resolutions: no cause: refused");
    kb_close(db);
}

int main(void)
{
    char dir[] = "/tmp/cpkb.XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char path[256], old[256];
    snprintf(path, sizeof(path), "%s/kb.sqlite", dir);
    snprintf(old, sizeof(old), "%s/old.sqlite", dir);
    char err[512] = "";

    /* 1. previous schema version (1) with a row; kb_open migrates it */
    struct kb *db = NULL;
    CHECK(kb_create_at_version(old, 1, err, sizeof(err)) == 0 && kb_open(old, KB_READ, &db, err, sizeof(err)) == 0 &&
              kb_schema_version(db) == 1,
          "built a version-1 database");
    kb_close(db);
    CHECK(raw_exec(old,
                       "INSERT INTO crashes(crash_key, time, host, signature, fingerprint, top_rule,"
                       " top_title, diagnoses, added) VALUES ('k1', 1700000000, 'oldhost', 'sig',"
                       " 'fpold', 'xid-79-fallen-off-bus', 'GPU fell off the bus (Xid 79)',"
                       " '[{\"rule\":\"xid-79-fallen-off-bus\",\"category\":\"gpu_hardware\",\"consequence_of\":null}]',"
                       " 1700000001);"
                       "INSERT INTO user_rules(id, json, added) VALUES ('mine', '{}', 1);") == SQLITE_OK,
          "a version-1 row");
    db = NULL;
    CHECK(kb_open(old, KB_WRITE, &db, err, sizeof(err)) == 0, "kb_open on the version-1 file %s", err);
    CHECK(kb_schema_version(db) == KB_SCHEMA_VERSION, "migrated to version %d", KB_SCHEMA_VERSION);
    CHECK(scalar(old, "SELECT COUNT(*) FROM crashes WHERE host = 'oldhost' AND fingerprint = 'fpold'") == 1,
          "the old row survived");
    CHECK(scalar(old, "SELECT COUNT(*) FROM crashes WHERE top_category = 'gpu_hardware'") == 1,
          "the new column is filled from the stored diagnoses");
    CHECK(scalar(old, "SELECT COUNT(*) FROM user_rules") == 1, "user rules survived");
    CHECK(scalar(old, "SELECT COUNT(*) FROM crash_sources WHERE outcome = 'added' AND kind = 'report-json'"
                     " AND crash_id = (SELECT id FROM crashes WHERE crash_key = 'k1')") == 1,
          "the old row has one source (3: crash_sources)");
    CHECK(scalar(old, "SELECT COUNT(*) FROM crashes WHERE completeness IS NULL") == 1,
          "the old row has no completeness score");
    CHECK(scalar(old, "PRAGMA journal_mode") != -1, "journal mode readable");
    CHECK(scalar(old, "SELECT value FROM kb_meta WHERE key = 'schema_version'") == KB_SCHEMA_VERSION &&
              scalar(old, "PRAGMA user_version") == KB_SCHEMA_VERSION,
          "the version is kept in kb_meta, and in SQLite's user_version for older crashpacks");
    kb_close(db);
    /* a database from before kb_meta: its version is SQLite's user_version */
    CHECK(raw_exec(old, "DROP TABLE kb_meta") == SQLITE_OK, "kb_meta dropped");
    db = NULL;
    CHECK(kb_open(old, KB_READ, &db, err, sizeof(err)) == 0 && kb_schema_version(db) == KB_SCHEMA_VERSION,
          "a database without kb_meta has its user_version's schema (%d)", kb_schema_version(db));
    kb_close(db);
    /* a newer schema than this build knows is refused, not damaged: in kb_meta, and in an older
     * database's user_version */
    raw_exec(old, "PRAGMA user_version = 99");
    db = NULL;
    CHECK(kb_open(old, KB_WRITE, &db, err, sizeof(err)) == -1 && strstr(err, "99"),
          "a newer schema (user_version) is refused: %s", err);
    CHECK(kb_open(old, KB_READ, &db, err, sizeof(err)) == -1 && strstr(err, "99"),
          "and refused for reading too: %s", err);
    raw_exec(old, "PRAGMA user_version = 4; CREATE TABLE kb_meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
                  " INSERT INTO kb_meta VALUES ('schema_version', '77')");
    CHECK(kb_open(old, KB_WRITE, &db, err, sizeof(err)) == -1 && strstr(err, "77"),
          "a newer schema (kb_meta) is refused: %s", err);
    CHECK(kb_open(old, KB_READ, &db, err, sizeof(err)) == -1 && strstr(err, "77"),
          "and refused for reading too: %s", err);
    CHECK(kb_open(path, KB_WRITE, &db, err, sizeof(err)) == KB_ENOENT && !db,
          "no knowledge base yet: KB_ENOENT (%s)", err);
    CHECK(kb_open_input(path) == NULL, "no knowledge base yet: no analysis input");

    /* 2. two concurrent writers, 500 crashes each, on a fresh file */
    pid_t kids[2];
    for (int w = 0; w < 2; w++) {
        kids[w] = fork();
        if (kids[w] == 0)
            _exit(writer(path, w, 500));
    }
    int ok = 1;
    for (int w = 0; w < 2; w++) {
        int st;
        waitpid(kids[w], &st, 0);
        ok &= WIFEXITED(st) && WEXITSTATUS(st) == 0;
    }
    CHECK(ok, "both writers finished without an error");
    db = NULL;
    CHECK(kb_open(path, KB_WRITE, &db, err, sizeof(err)) == 0, "open the written database");
    CHECK(scalar(path, "SELECT COUNT(*) FROM crashes") == 1000, "1000 crashes stored (got %lld)",
          scalar(path, "SELECT COUNT(*) FROM crashes"));
    CHECK(scalar(path, "SELECT COUNT(DISTINCT job) FROM crashes") == 63, "jobs from SLURM_JOB_ID");
    CHECK(scalar(path, "PRAGMA journal_mode") != -1, "readable");
    struct kb *in = kb_open_input(path);
    CHECK(in && kb_schema_version(in) == KB_SCHEMA_VERSION, "opened as an analysis input (read-only)");
    kb_close(in);

    /* 3. the same crash again, from another file that is not more complete: kept, not doubled */
    cJSON *r = report(0, 3);
    struct kb_source moved = {"bundle", "/bundles/moved.zst", "00000000000000aa", 10};
    struct kb_result res;
    CHECK(kb_add_report(db, r, &moved, &res, err, sizeof(err)) == 0 && res.outcome == KB_KEPT &&
              !res.reason[0],
          "re-adding an equally complete report keeps the stored record (%s)", kb_outcome_name(res.outcome));
    cJSON_Delete(r);
    CHECK(scalar(path, "SELECT COUNT(*) FROM crashes") == 1000, "still 1000 crashes");
    CHECK(scalar(path, "SELECT COUNT(*) FROM crashes WHERE bundle_path = '/bundles/moved.zst'") == 0,
          "the stored record keeps its bundle path");
    CHECK(scalar(path, "SELECT COUNT(*) FROM crash_sources WHERE path = '/bundles/moved.zst' AND outcome = 'kept'"
                     " AND xxh64 = '00000000000000aa' AND size = 10 AND added_uid IS NOT NULL") == 1,
          "the kept add is recorded as a source with its hash, size and uid");

    /* 4. completeness: a complete report and a cut-short copy of it, in both orders */
    const char *full_js =
        "{\"process\": {\"pid\": 7, \"crashed_tid\": 7}, \"host\": {\"hostname\": \"h\", \"time\": 5},"
        " \"bundle\": {\"complete\": true}, \"analysis\": {\"complete\": true, \"error\": null},"
        " \"members\": [{\"name\": \"manifest.json\", \"truncated\": false},"
        "  {\"name\": \"core\", \"truncated\": false}, {\"name\": \"capture.json\", \"truncated\": false}],"
        " \"threads\": [{\"frames\": [{}]}], \"signature\": \"full-sig\", \"fingerprint\": \"full-fp\"}";
    const char *cut_js =
        "{\"process\": {\"pid\": 7, \"crashed_tid\": 7}, \"host\": {\"hostname\": \"h\", \"time\": 5},"
        " \"bundle\": {\"complete\": false}, \"analysis\": {\"complete\": false, \"error\": \"cut\"},"
        " \"members\": [{\"name\": \"manifest.json\", \"truncated\": false},"
        "  {\"name\": \"core\", \"truncated\": true}], \"threads\": [],"
        " \"signature\": null, \"fingerprint\": null}";
    cJSON *full = cJSON_Parse(full_js), *cut = cJSON_Parse(cut_js);
    struct kb_completeness cf, cc;
    CHECK(kb_completeness(full, &cf) > kb_completeness(cut, &cc) && cf.analysis && cf.core && cf.bundle &&
              cf.members == 3 && cf.threads == 1 && !cc.analysis && !cc.core && !cc.bundle && cc.members == 1,
          "the complete report scores higher");
    struct kb_source sf = {"bundle", "/b/full.zst", "1111111111111111", 100},
                     sc = {"bundle", "/b/cut.zst", "2222222222222222", 40};
    for (int order = 0; order < 2; order++) {
        raw_exec(path, "DELETE FROM crashes WHERE host = 'h'");
        struct kb_result a, b;
        int ok1 = kb_add_report(db, order ? cut : full, order ? &sc : &sf, &a, err, sizeof(err)) == 0;
        int ok2 = kb_add_report(db, order ? full : cut, order ? &sf : &sc, &b, err, sizeof(err)) == 0;
        CHECK(ok1 && ok2 && a.outcome == KB_ADDED && b.outcome == (order ? KB_REPLACED : KB_KEPT) &&
                  a.id == b.id && strstr(b.reason, "core analysis complete vs incomplete"),
              "%s: %s (%s)", order ? "cut, then full" : "full, then cut", kb_outcome_name(b.outcome), b.reason);
        CHECK(scalar(path, "SELECT COUNT(*) FROM crashes WHERE host = 'h' AND signature = 'full-sig' AND"
                         " fingerprint = 'full-fp' AND bundle_path = '/b/full.zst' AND"
                         " bundle_xxh64 = '1111111111111111'") == 1,
              "%s: the full record is stored", order ? "cut, then full" : "full, then cut");
        char sql[300];
        snprintf(sql, sizeof(sql),
                 "SELECT COUNT(*) FROM crash_sources WHERE crash_id = %lld AND"
                 " ((path = '/b/full.zst' AND outcome = '%s') OR (path = '/b/cut.zst' AND outcome = '%s'))",
                 (long long)a.id, order ? "replaced" : "added", order ? "superseded" : "kept");
        CHECK(scalar(path, sql) == 2, "%s: both paths are sources, with their outcomes",
              order ? "cut, then full" : "full, then cut");
    }
    /* the same bundle again: stored again (its path too) */
    struct kb_source again = {"bundle", "/b/full-copy.zst", "1111111111111111", 100};
    CHECK(kb_add_report(db, full, &again, &res, err, sizeof(err)) == 0 && res.outcome == KB_UPDATED,
          "the same bundle again is an update (%s)", kb_outcome_name(res.outcome));
    CHECK(scalar(path, "SELECT COUNT(*) FROM crash_sources WHERE outcome IN ('added', 'replaced', 'updated')"
                     " AND crash_id = (SELECT id FROM crashes WHERE host = 'h')") == 1,
          "one source holds the stored analysis");
    /* a more complete copy that names another executable (a forged bundle): refused */
    {
        cJSON *forged = cJSON_Parse(full_js);
        cJSON_AddItemToObject(cJSON_GetObjectItem(forged, "process"), "exe", cJSON_CreateString("/tmp/evil"));
        cJSON *members = cJSON_GetObjectItem(forged, "members");
        for (int i = 0; i < 3; i++)
            cJSON_AddItemToArray(members, cJSON_Parse("{\"name\": \"pad\", \"truncated\": false}"));
        raw_exec(path, "UPDATE crashes SET exe = '/usr/bin/real' WHERE host = 'h'");
        struct kb_source sx = {"bundle", "/b/forged.zst", "4444444444444444", 100};
        CHECK(kb_add_report(db, forged, &sx, &res, err, sizeof(err)) == 0 && res.outcome == KB_KEPT && res.refused &&
                  strstr(res.reason, "/tmp/evil"),
              "a more complete report of another executable is refused (%s: %s)", kb_outcome_name(res.outcome),
              res.reason);
        CHECK(scalar(path, "SELECT COUNT(*) FROM crashes WHERE host = 'h' AND exe = '/usr/bin/real'") == 1,
              "the record keeps its executable");
        CHECK(scalar(path, "SELECT COUNT(*) FROM crash_sources WHERE path = '/b/forged.zst' AND outcome = 'kept'"
                           " AND reason LIKE 'refused:%'") == 1,
              "the refusal is recorded as a source");
        cJSON_Delete(forged);
    }
    /* no identity: a failure, recorded, nothing changed */
    cJSON *noid = cJSON_Parse("{\"bundle\": {\"complete\": true}, \"signature\": \"forged\"}");
    struct kb_source sn = {"bundle", "/b/cut.zst", "3333333333333333", 5};
    long long before = scalar(path, "SELECT COUNT(*) FROM crashes");
    CHECK(kb_add_report(db, noid, &sn, &res, err, sizeof(err)) == 0 && res.outcome == KB_FAILED && res.id > 0,
          "a report without identity is a failure of the crash its path belongs to (%lld)", (long long)res.id);
    CHECK(scalar(path, "SELECT COUNT(*) FROM crashes") == before &&
              scalar(path, "SELECT COUNT(*) FROM crashes WHERE signature = 'forged'") == 0,
          "the failure stored no crash");
    CHECK(kb_add_failure(db, &(struct kb_source){"bundle", "/b/never.zst", NULL, -1}, "not a bundle", &res, err,
                         sizeof(err)) == 0 && res.id == 0 &&
              scalar(path, "SELECT COUNT(*) FROM crash_sources WHERE path = '/b/never.zst' AND outcome = 'failed'"
                         " AND crash_id IS NULL AND error = 'not a bundle'") == 1,
          "an unreadable bundle of no known crash: a failure of none");
    cJSON_Delete(noid);
    cJSON_Delete(full);
    cJSON_Delete(cut);
    /* a record from before the scores: a cut copy does not replace it, a complete bundle does */
    raw_exec(path, "UPDATE crashes SET completeness = NULL, completeness_detail = NULL WHERE host = 'h'");
    cut = cJSON_Parse(cut_js);
    CHECK(kb_add_report(db, cut, &sc, &res, err, sizeof(err)) == 0 && res.outcome == KB_KEPT && res.legacy,
          "a legacy record is kept against a cut copy (%s)", kb_outcome_name(res.outcome));
    cJSON_Delete(cut);
    full = cJSON_Parse(full_js);
    CHECK(kb_add_report(db, full, &sf, &res, err, sizeof(err)) == 0 && res.outcome == KB_REPLACED && res.legacy,
          "a legacy record is replaced by a complete bundle (%s)", kb_outcome_name(res.outcome));
    cJSON_Delete(full);
    kb_close(db);

    char cmd[300];
    /* 6. GPU history (schema 4's gpu_faults): a hardware Xid on a crash's own GPU is history for
     * the next crash on that GPU (by UUID on any host; by PCI id on the same host when nvidia-smi
     * named no UUID) within 6 h, never for another GPU, never for the crash itself; an
     * application Xid is no history; a machine check is history for the same host only */
    {
        const char *A = "GPU-aaaaaaaa-0000-0000-0000-000000000001", *B = "GPU-bbbbbbbb-0000-0000-0000-000000000002";
        double t0 = 1796000000;
        struct kb *h = NULL;
        char hp[300];
        snprintf(hp, sizeof(hp), "%s/hist.sqlite", dir);
        CHECK(kb_open(hp, KB_CREATE, &h, err, sizeof(err)) == 0, "history: open %s", err);
        struct kb_source src = {"report-json", "/r.json", NULL, -1};
        struct kb_result res;
        cJSON *r1 = gpu_report(500, "n1", t0, "0000:3b:00.0", A, 48, "hardware", A, "0000:3b:00.0", 1);
        CHECK(kb_add_report(h, r1, &src, &res, err, sizeof(err)) == 0, "history: add the Xid 48 crash");
        cJSON_Delete(r1);
        cJSON *r2 = gpu_report(501, "n1", t0, "0000:86:00.0", B, 13, "application", B, "0000:86:00.0", 0);
        CHECK(kb_add_report(h, r2, &src, &res, err, sizeof(err)) == 0, "history: add the Xid 13 crash");
        cJSON_Delete(r2);
        CHECK(scalar(hp, "SELECT COUNT(*) FROM gpu_faults WHERE scope = 'gpu'") == 1,
              "history: one GPU fault stored (the Xid 13 is the program's)");
        CHECK(scalar(hp, "SELECT COUNT(*) FROM gpu_faults WHERE scope = 'host'") == 1, "history: one host fault stored");
        CHECK(history_count(h, gpu_report(600, "n1", t0 + 3600, "0000:3b:00.0", A, 0, "", A, "0000:3b:00.0", 0), "gpu") == 1,
              "history: the next crash on GPU A, 1 h later, carries its Xid 48");
        CHECK(history_count(h, gpu_report(601, "n2", t0 + 3600, "0000:17:00.0", A, 0, "", A, "0000:17:00.0", 0), "gpu") == 1,
              "history: GPU A moved to another host: found by UUID");
        CHECK(history_count(h, gpu_report(602, "n1", t0 + 3600, "0000:86:00.0", B, 0, "", B, "0000:86:00.0", 0), "gpu") == 0,
              "history: a crash on GPU B carries none of A's");
        CHECK(history_count(h, gpu_report(603, "n1", t0 + 7 * 3600, "0000:3b:00.0", A, 0, "", A, "0000:3b:00.0", 0), "gpu") == 0,
              "history: 7 h later it is outside the window");
        CHECK(history_count(h, gpu_report(500, "n1", t0, "0000:3b:00.0", A, 48, "hardware", A, "0000:3b:00.0", 0), "gpu") == 0,
              "history: the crash itself, analyzed again, is not its own history");
        CHECK(history_count(h, gpu_report(604, "n1", t0 + 3600, "0000:86:00.0", B, 0, "", B, "0000:86:00.0", 0), "host") == 1,
              "history: the machine check is history for the same host");
        CHECK(history_count(h, gpu_report(605, "n2", t0 + 3600, "0000:86:00.0", B, 0, "", B, "0000:86:00.0", 0), "host") == 0,
              "history: and not for another host");
        /* a crash whose nvidia-smi named no UUID: its fault is keyed by host and PCI id */
        cJSON *r3 = gpu_report(502, "n3", t0, "0000:ca:00.0", "", 79, "bus", "", "0000:ca:00.0", 0);
        cJSON_DeleteItemFromObject(cJSON_GetObjectItem(r3, "gpu"), "nvidia_smi");
        CHECK(kb_add_report(h, r3, &src, &res, err, sizeof(err)) == 0, "history: add an Xid 79 crash without nvidia-smi");
        cJSON_Delete(r3);
        CHECK(history_count(h, gpu_report(606, "n3", t0 + 600, "0000:ca:00.0", "", 0, "", "GPU-x", "0000:ca:00.0", 0), "gpu") == 1,
              "history: no UUID: the same host and PCI id match");
        CHECK(history_count(h, gpu_report(607, "n4", t0 + 600, "0000:ca:00.0", "", 0, "", "GPU-x", "0000:ca:00.0", 0), "gpu") == 0,
              "history: no UUID: the same PCI id on another host does not");
        kb_close(h);
    }

    test_uids(dir);
    test_resolutions(dir);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cleanup failed\n");
    printf(fails ? "%d check(s) failed\n" : "all checks passed\n", fails);
    return fails != 0;
}
