/* test_kb.c - the knowledge base (db/kb.h): a database of the previous schema version migrates
 * with its rows intact; two concurrent writer processes adding 500 crashes each lose none;
 * re-adding the same crash updates instead of doubling. */
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
        int64_t id;
        int added;
        if (kb_add_report(db, r, "/bundles/x.zst", &id, &added, err, sizeof(err)) || !added) {
            fprintf(stderr, "writer %d, crash %d: %s\n", w, i, added ? err : "not new");
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

    /* 3. adding the same crash again updates it */
    cJSON *r = report(0, 3);
    int64_t id = 0;
    int added = 1;
    CHECK(kb_add_report(db, r, "/bundles/moved.zst", &id, &added, err, sizeof(err)) == 0 && !added,
          "re-adding is an update");
    cJSON_Delete(r);
    CHECK(scalar(db, "SELECT COUNT(*) FROM crashes") == 1000, "still 1000 crashes");
    CHECK(scalar(db, "SELECT COUNT(*) FROM crashes WHERE bundle_path = '/bundles/moved.zst'") == 1,
          "the row was updated");
    sqlite3_close(db);

    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cleanup failed\n");
    printf(fails ? "%d check(s) failed\n" : "all checks passed\n", fails);
    return fails != 0;
}
