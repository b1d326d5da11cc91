/* schema.c - knowledge-base schema, forward migrations, opening (see kb.h). */
#include "kb.h"
#include "errmsg.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* migrations[i] brings schema version i to i+1. Never edit one that shipped: add the next. */
static const char *const migrations[] = {
    /* 0 -> 1: crashes and user rules */
    "CREATE TABLE crashes("
    "  id INTEGER PRIMARY KEY,"
    "  crash_key TEXT NOT NULL UNIQUE,"
    "  time REAL, host TEXT, exe TEXT, signal TEXT,"
    "  signature TEXT, fingerprint TEXT,"
    "  top_rule TEXT, top_title TEXT,"
    "  diagnoses TEXT NOT NULL DEFAULT '[]',"
    "  bundle_path TEXT, added REAL NOT NULL);"
    "CREATE TABLE user_rules(id TEXT PRIMARY KEY, json TEXT NOT NULL, added REAL NOT NULL);",
    /* 1 -> 2: jobs and ranks, crash kind, the top diagnosis' category; indexes for groups/jobs */
    "ALTER TABLE crashes ADD COLUMN job TEXT;"
    "ALTER TABLE crashes ADD COLUMN rank INTEGER;"
    "ALTER TABLE crashes ADD COLUMN local_rank INTEGER;"
    "ALTER TABLE crashes ADD COLUMN crash_kind TEXT;"
    "ALTER TABLE crashes ADD COLUMN top_category TEXT;"
    "ALTER TABLE crashes ADD COLUMN top_consequence_of TEXT;"
    "ALTER TABLE crashes ADD COLUMN facts TEXT;"
    "UPDATE crashes SET top_category = json_extract(diagnoses, '$[0].category'),"
    "  top_consequence_of = json_extract(diagnoses, '$[0].consequence_of')"
    "  WHERE json_valid(diagnoses);"
    "CREATE INDEX crashes_fingerprint ON crashes(fingerprint, time);"
    "CREATE INDEX crashes_job ON crashes(job, time);"
    "CREATE INDEX crashes_time ON crashes(time);",
    /* 2 -> 3: how complete each stored record is, and where every add of a crash came from
     * (crash_sources: path, file hash, who, when, outcome). A row of an older version has no
     * completeness (NULL: only a complete bundle with a complete analysis replaces it); its bundle
     * path becomes its one source, added by an unknown user. */
    "ALTER TABLE crashes ADD COLUMN completeness INTEGER;"
    "ALTER TABLE crashes ADD COLUMN completeness_detail TEXT;"
    "ALTER TABLE crashes ADD COLUMN bundle_xxh64 TEXT;"
    "CREATE TABLE crash_sources("
    "  id INTEGER PRIMARY KEY,"
    "  crash_id INTEGER REFERENCES crashes(id) ON DELETE CASCADE,"
    "  kind TEXT NOT NULL CHECK(kind IN ('bundle', 'report-json')),"
    "  path TEXT, xxh64 TEXT, size INTEGER,"
    "  added REAL NOT NULL, added_uid INTEGER, added_user TEXT,"
    "  completeness INTEGER, completeness_detail TEXT,"
    "  outcome TEXT NOT NULL"
    "   CHECK(outcome IN ('added', 'replaced', 'updated', 'kept', 'superseded', 'failed')),"
    "  reason TEXT, error TEXT);"
    "CREATE INDEX crash_sources_crash ON crash_sources(crash_id, added);"
    "CREATE INDEX crash_sources_path ON crash_sources(path);"
    "INSERT INTO crash_sources(crash_id, kind, path, added, outcome, reason)"
    "  SELECT id, CASE WHEN bundle_path IS NULL THEN 'report-json' ELSE 'bundle' END, bundle_path,"
    "  added, 'added', 'stored before schema version 3 (no file hash, no user, no completeness)'"
    "  FROM crashes;",
    /* 3 -> 4: the hardware faults each crash's analysis saw on its own GPUs (an Xid of a hardware,
     * thermal, bus or NVLink class, named by UUID when nvidia-smi gave one, else by host and PCI
     * id) and on its host as a whole (MCE, AER on a PCIe port): a later crash on the same GPU or
     * host carries them as history (kb_gpu_history). Rows of older records are not backfilled. */
    "CREATE TABLE gpu_faults("
    "  id INTEGER PRIMARY KEY,"
    "  crash_id INTEGER NOT NULL REFERENCES crashes(id) ON DELETE CASCADE,"
    "  scope TEXT NOT NULL CHECK(scope IN ('gpu', 'host')),"
    "  time REAL, host TEXT, pci TEXT, uuid TEXT, code INTEGER, kind TEXT, text TEXT);"
    "CREATE INDEX gpu_faults_uuid ON gpu_faults(uuid, time);"
    "CREATE INDEX gpu_faults_host ON gpu_faults(host, time);",
};

/* sqlite3_exec, retried while the database is busy or locked: the busy handler does not cover every
 * case (a connection switching a fresh file to WAL, recovery of a WAL another process left). */
int kb_exec_retry(sqlite3 *db, const char *sql, char **errmsg)
{
    int rc = SQLITE_BUSY;
    for (int i = 0; i < 3000; i++) {
        if (errmsg && *errmsg) {
            sqlite3_free(*errmsg);
            *errmsg = NULL;
        }
        rc = sqlite3_exec(db, sql, NULL, NULL, errmsg);
        if ((rc & 0xff) != SQLITE_BUSY && (rc & 0xff) != SQLITE_LOCKED)
            break;
        usleep(10000);
    }
    return rc;
}

int kb_schema_version(sqlite3 *db)
{
    sqlite3_stmt *q = NULL;
    int v = -1;
    if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &q, NULL) == SQLITE_OK &&
        sqlite3_step(q) == SQLITE_ROW)
        v = sqlite3_column_int(q, 0);
    sqlite3_finalize(q);
    return v;
}

int kb_migrate(sqlite3 *db, int target, char *err, size_t errlen)
{
    int n = (int)(sizeof(migrations) / sizeof(migrations[0]));
    if (target > n)
        target = n;
    for (;;) {
        if (kb_exec_retry(db, "BEGIN IMMEDIATE", NULL) != SQLITE_OK) {
            cp_errmsg(err, errlen, "knowledge base: %s", sqlite3_errmsg(db));
            return -1;
        }
        int v = kb_schema_version(db); /* re-read under the write lock: another migrator may have run */
        if (v < 0 || v > n) {
            sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
            cp_errmsg(err, errlen, "knowledge base has schema version %d; this crashpack knows up to %d",
                      v, n);
            return -1;
        }
        if (v >= target) {
            sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
            return 0;
        }
        char *e = NULL;
        char sql[64];
        snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", v + 1);
        if (sqlite3_exec(db, migrations[v], NULL, NULL, &e) != SQLITE_OK ||
            sqlite3_exec(db, sql, NULL, NULL, &e) != SQLITE_OK ||
            sqlite3_exec(db, "COMMIT", NULL, NULL, &e) != SQLITE_OK) {
            cp_errmsg(err, errlen, "knowledge base migration %d -> %d: %s", v, v + 1, e ? e : "?");
            sqlite3_free(e);
            sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
            return -1;
        }
    }
}

static int mkdirs(const char *path)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir)
        return 0;
    *slash = 0;
    for (char *p = dir + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(dir, 0755) && errno != EEXIST)
                return -1;
            *p = '/';
        }
    return mkdir(dir, 0755) && errno != EEXIST ? -1 : 0;
}

int kb_open(const char *path, int create, sqlite3 **out, char *err, size_t errlen)
{
    *out = NULL;
    if (create && mkdirs(path)) {
        cp_errmsg(err, errlen, "cannot create the directory of %s: %s", path, strerror(errno));
        return -1;
    }
    sqlite3 *db = NULL;
    int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_NOFOLLOW;
    if (sqlite3_open_v2(path, &db, flags, NULL) != SQLITE_OK) {
        cp_errmsg(err, errlen, "cannot open the knowledge base %s: %s", path,
                  db ? sqlite3_errmsg(db) : "out of memory");
        sqlite3_close(db);
        return -1;
    }
    sqlite3_busy_timeout(db, 30000);
    char *e = NULL;
    if (kb_exec_retry(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON",
                      &e) != SQLITE_OK) {
        cp_errmsg(err, errlen, "knowledge base %s: %s", path, e ? e : sqlite3_errmsg(db));
        sqlite3_free(e);
        sqlite3_close(db);
        return -1;
    }
    if (kb_migrate(db, KB_SCHEMA_VERSION, err, errlen)) {
        sqlite3_close(db);
        return -1;
    }
    *out = db;
    return 0;
}
