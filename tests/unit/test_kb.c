/* test_kb.c - the knowledge base (db/kb.h): a database of an older schema version migrates
 * with its rows intact (each row gets its bundle path as its one source); two concurrent writer
 * processes adding 500 crashes each lose none; re-adding the same crash never doubles it, and the
 * more complete record stays: a cut-short report neither replaces a complete one nor survives
 * one, the same bundle again is stored again, a report without identity is a recorded failure
 * that changes nothing. */
#include "kb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int fails;
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (cond) {                                                                                \
            printf("ok: " __VA_ARGS__);                                                            \
        } else {                                                                                   \
            printf("FAIL: " __VA_ARGS__);                                                          \
            fails++;                                                                               \
        }                                                                                          \
        putchar('\n');                                                                             \
    } while (0)

static long long scalar(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *q = NULL;
    long long v = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW)
        v = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    return v;
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

static int writer(const char *path, int w, int n)
{
    sqlite3 *db = NULL;
    char err[512];
    if (kb_open(path, 1, &db, err, sizeof(err))) {
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
    sqlite3_close(db);
    return bad != 0;
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
    sqlite3 *db = NULL;
    sqlite3_open(old, &db);
    CHECK(kb_migrate(db, 1, err, sizeof(err)) == 0 && kb_schema_version(db) == 1, "built a version-1 database");
    CHECK(sqlite3_exec(db,
                       "INSERT INTO crashes(crash_key, time, host, signature, fingerprint, top_rule,"
                       " top_title, diagnoses, added) VALUES ('k1', 1700000000, 'oldhost', 'sig',"
                       " 'fpold', 'xid-79-fallen-off-bus', 'GPU fell off the bus (Xid 79)',"
                       " '[{\"rule\":\"xid-79-fallen-off-bus\",\"category\":\"gpu_hardware\",\"consequence_of\":null}]',"
                       " 1700000001);"
                       "INSERT INTO user_rules(id, json, added) VALUES ('mine', '{}', 1);",
                       NULL, NULL, NULL) == SQLITE_OK,
          "a version-1 row");
    sqlite3_close(db);
    db = NULL;
    CHECK(kb_open(old, 0, &db, err, sizeof(err)) == 0, "kb_open on the version-1 file %s", err);
    CHECK(kb_schema_version(db) == KB_SCHEMA_VERSION, "migrated to version %d", KB_SCHEMA_VERSION);
    CHECK(scalar(db, "SELECT COUNT(*) FROM crashes WHERE host = 'oldhost' AND fingerprint = 'fpold'") == 1,
          "the old row survived");
    CHECK(scalar(db, "SELECT COUNT(*) FROM crashes WHERE top_category = 'gpu_hardware'") == 1,
          "the new column is filled from the stored diagnoses");
    CHECK(scalar(db, "SELECT COUNT(*) FROM user_rules") == 1, "user rules survived");
    CHECK(scalar(db, "SELECT COUNT(*) FROM crash_sources WHERE outcome = 'added' AND kind = 'report-json'"
                     " AND crash_id = (SELECT id FROM crashes WHERE crash_key = 'k1')") == 1,
          "the old row has one source (3: crash_sources)");
    CHECK(scalar(db, "SELECT COUNT(*) FROM crashes WHERE completeness IS NULL") == 1,
          "the old row has no completeness score");
    CHECK(scalar(db, "PRAGMA journal_mode") != -1, "journal mode readable");
    sqlite3_close(db);
    /* a newer schema than this build knows is refused, not damaged */
    sqlite3_open(old, &db);
    sqlite3_exec(db, "PRAGMA user_version = 99", NULL, NULL, NULL);
    sqlite3_close(db);
    db = NULL;
    CHECK(kb_open(old, 0, &db, err, sizeof(err)) == -1 && strstr(err, "99"), "a newer schema is refused: %s", err);

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
    CHECK(kb_open(path, 0, &db, err, sizeof(err)) == 0, "open the written database");
    CHECK(scalar(db, "SELECT COUNT(*) FROM crashes") == 1000, "1000 crashes stored (got %lld)",
          scalar(db, "SELECT COUNT(*) FROM crashes"));
    CHECK(scalar(db, "SELECT COUNT(DISTINCT job) FROM crashes") == 63, "jobs from SLURM_JOB_ID");
    CHECK(scalar(db, "PRAGMA journal_mode") != -1, "readable");

    /* 3. the same crash again, from another file that is not more complete: kept, not doubled */
    cJSON *r = report(0, 3);
    struct kb_source moved = {"bundle", "/bundles/moved.zst", "00000000000000aa", 10};
    struct kb_result res;
    CHECK(kb_add_report(db, r, &moved, &res, err, sizeof(err)) == 0 && res.outcome == KB_KEPT &&
              !res.reason[0],
          "re-adding an equally complete report keeps the stored record (%s)", kb_outcome_name(res.outcome));
    cJSON_Delete(r);
    CHECK(scalar(db, "SELECT COUNT(*) FROM crashes") == 1000, "still 1000 crashes");
    CHECK(scalar(db, "SELECT COUNT(*) FROM crashes WHERE bundle_path = '/bundles/moved.zst'") == 0,
          "the stored record keeps its bundle path");
    CHECK(scalar(db, "SELECT COUNT(*) FROM crash_sources WHERE path = '/bundles/moved.zst' AND outcome = 'kept'"
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
        sqlite3_exec(db, "DELETE FROM crashes WHERE host = 'h'", NULL, NULL, NULL);
        struct kb_result a, b;
        int ok1 = kb_add_report(db, order ? cut : full, order ? &sc : &sf, &a, err, sizeof(err)) == 0;
        int ok2 = kb_add_report(db, order ? full : cut, order ? &sf : &sc, &b, err, sizeof(err)) == 0;
        CHECK(ok1 && ok2 && a.outcome == KB_ADDED && b.outcome == (order ? KB_REPLACED : KB_KEPT) &&
                  a.id == b.id && strstr(b.reason, "core analysis complete vs incomplete"),
              "%s: %s (%s)", order ? "cut, then full" : "full, then cut", kb_outcome_name(b.outcome), b.reason);
        CHECK(scalar(db, "SELECT COUNT(*) FROM crashes WHERE host = 'h' AND signature = 'full-sig' AND"
                         " fingerprint = 'full-fp' AND bundle_path = '/b/full.zst' AND"
                         " bundle_xxh64 = '1111111111111111'") == 1,
              "%s: the full record is stored", order ? "cut, then full" : "full, then cut");
        char sql[300];
        snprintf(sql, sizeof(sql),
                 "SELECT COUNT(*) FROM crash_sources WHERE crash_id = %lld AND"
                 " ((path = '/b/full.zst' AND outcome = '%s') OR (path = '/b/cut.zst' AND outcome = '%s'))",
                 (long long)a.id, order ? "replaced" : "added", order ? "superseded" : "kept");
        CHECK(scalar(db, sql) == 2, "%s: both paths are sources, with their outcomes",
              order ? "cut, then full" : "full, then cut");
    }
    /* the same bundle again: stored again (its path too) */
    struct kb_source again = {"bundle", "/b/full-copy.zst", "1111111111111111", 100};
    CHECK(kb_add_report(db, full, &again, &res, err, sizeof(err)) == 0 && res.outcome == KB_UPDATED,
          "the same bundle again is an update (%s)", kb_outcome_name(res.outcome));
    CHECK(scalar(db, "SELECT COUNT(*) FROM crash_sources WHERE outcome IN ('added', 'replaced', 'updated')"
                     " AND crash_id = (SELECT id FROM crashes WHERE host = 'h')") == 1,
          "one source holds the stored analysis");
    /* no identity: a failure, recorded, nothing changed */
    cJSON *noid = cJSON_Parse("{\"bundle\": {\"complete\": true}, \"signature\": \"forged\"}");
    struct kb_source sn = {"bundle", "/b/cut.zst", "3333333333333333", 5};
    long long before = scalar(db, "SELECT COUNT(*) FROM crashes");
    CHECK(kb_add_report(db, noid, &sn, &res, err, sizeof(err)) == 0 && res.outcome == KB_FAILED && res.id > 0,
          "a report without identity is a failure of the crash its path belongs to (%lld)", (long long)res.id);
    CHECK(scalar(db, "SELECT COUNT(*) FROM crashes") == before &&
              scalar(db, "SELECT COUNT(*) FROM crashes WHERE signature = 'forged'") == 0,
          "the failure stored no crash");
    CHECK(kb_add_failure(db, &(struct kb_source){"bundle", "/b/never.zst", NULL, -1}, "not a bundle", &res, err,
                         sizeof(err)) == 0 && res.id == 0 &&
              scalar(db, "SELECT COUNT(*) FROM crash_sources WHERE path = '/b/never.zst' AND outcome = 'failed'"
                         " AND crash_id IS NULL AND error = 'not a bundle'") == 1,
          "an unreadable bundle of no known crash: a failure of none");
    cJSON_Delete(noid);
    cJSON_Delete(full);
    cJSON_Delete(cut);
    /* a record from before the scores: a cut copy does not replace it, a complete bundle does */
    sqlite3_exec(db, "UPDATE crashes SET completeness = NULL, completeness_detail = NULL WHERE host = 'h'",
                 NULL, NULL, NULL);
    cut = cJSON_Parse(cut_js);
    CHECK(kb_add_report(db, cut, &sc, &res, err, sizeof(err)) == 0 && res.outcome == KB_KEPT && res.legacy,
          "a legacy record is kept against a cut copy (%s)", kb_outcome_name(res.outcome));
    cJSON_Delete(cut);
    full = cJSON_Parse(full_js);
    CHECK(kb_add_report(db, full, &sf, &res, err, sizeof(err)) == 0 && res.outcome == KB_REPLACED && res.legacy,
          "a legacy record is replaced by a complete bundle (%s)", kb_outcome_name(res.outcome));
    cJSON_Delete(full);
    sqlite3_close(db);

    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cleanup failed\n");
    printf(fails ? "%d check(s) failed\n" : "all checks passed\n", fails);
    return fails != 0;
}
