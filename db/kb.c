/* kb.c - opening the knowledge base, its schema and its forward migrations (see kb.h).
 *
 * The schema version lives in the kb_meta table (key 'schema_version'); databases written before
 * that table kept it in SQLite's PRAGMA user_version, which the SQLite driver still reads for
 * them and still writes, so that an older crashpack refuses a newer database by its version
 * instead of failing halfway through a migration. Migrations 1..4 are SQLite's history and stay
 * as they shipped; a PostgreSQL backend creates the schema of the current version in its own
 * types and shares the migrations after it, which are written in SQL both engines read. */
#include "kb_internal.h"
#include "errmsg.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    /* 4 -> 5: whose crash it is (the crashed process's uid, the report's process.uid), so that
     * the node's agent answers a user's `crashpack db` with that user's crashes only. Older rows
     * are not back-filled: NULL, which no user sees (root reads the file itself). */
    "ALTER TABLE crashes ADD COLUMN uid INTEGER;"
    "CREATE INDEX crashes_uid ON crashes(uid, time);",
    /* 5 -> 6: the Python exception a crash died of (its type, and its message's first line), which
     * `db search` finds; the placeholder names older records have for "no signal" (a snapshot's
     * or an exception's "signal 0", a reported death's "SIGUNKNOWN") become NULL. Older records'
     * exceptions are not back-filled. */
    "ALTER TABLE crashes ADD COLUMN exception_type TEXT;"
    "ALTER TABLE crashes ADD COLUMN exception_message TEXT;"
    "UPDATE crashes SET signal = NULL WHERE signal = 'signal 0' OR signal = 'SIGUNKNOWN';",
    /* 6 -> 7: what the team found a group of crashes (a fingerprint) to be: `db resolve`'s cause,
     * category and ticket, who resolved it and when (db/resolution.h). One row per fingerprint;
     * a crash of the group after `resolved` makes the group regressed. */
    "CREATE TABLE resolutions("
    "  fingerprint TEXT PRIMARY KEY,"
    "  cause TEXT NOT NULL, category TEXT, ticket TEXT,"
    "  resolved REAL NOT NULL, resolved_uid INTEGER, resolved_user TEXT,"
    "  origin TEXT);",
};

static int nmigrations(void)
{
    return (int)(sizeof(migrations) / sizeof(migrations[0]));
}

int kb_commit_or_rollback(struct kb *kb, int ok, char *err, size_t errlen)
{
    if (!ok || sql_commit(kb->c)) {
        cp_errmsg(err, errlen, "knowledge base: %s", sql_errmsg(kb->c));
        sql_rollback(kb->c);
        return -1;
    }
    return 0;
}

static int version_of(struct sqlconn *c)
{
    if (!c->drv->has_table(c, "kb_meta"))
        return c->drv->engine_version_get(c);
    struct sqlstmt *q = NULL;
    int v = -1;
    if (!sql_prepare(c, "SELECT value FROM kb_meta WHERE key = 'schema_version'", &q) &&
        sql_step(q) == SQL_ROW && sql_col_text(q, 0))
        v = atoi(sql_col_text(q, 0));
    sql_finalize(q);
    return v;
}

int kb_schema_version(struct kb *kb)
{
    return kb ? version_of(kb->c) : -1;
}

/* Records version v in kb_meta (created by the first migration that runs under it) and in the
 * engine's own slot. */
static int set_version(struct sqlconn *c, int v)
{
    char sql[256];
    snprintf(sql, sizeof(sql),
             "CREATE TABLE IF NOT EXISTS kb_meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
             "INSERT INTO kb_meta(key, value) VALUES ('schema_version', '%d')"
             " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
             v);
    return sql_exec(c, sql) || c->drv->engine_version_set(c, v) ? -1 : 0;
}

static int migrate(struct sqlconn *c, int target, char *err, size_t errlen)
{
    int n = nmigrations();
    if (target > n)
        target = n;
    for (;;) {
        if (sql_begin_write(c)) {
            cp_errmsg(err, errlen, "knowledge base: %s", sql_errmsg(c));
            return -1;
        }
        int v = version_of(c); /* re-read under the write lock: another migrator may have run */
        if (v < 0 || v > n) {
            sql_rollback(c);
            cp_errmsg(err, errlen,
                      "knowledge base has schema version %d; this crashpack knows up to %d", v, n);
            return -1;
        }
        if (v >= target) {
            sql_commit(c);
            return 0;
        }
        if (sql_exec(c, migrations[v]) || set_version(c, v + 1) || sql_commit(c)) {
            cp_errmsg(err, errlen, "knowledge base migration %d -> %d: %s", v, v + 1,
                      sql_errmsg(c));
            sql_rollback(c);
            return -1;
        }
    }
}

/* The backend of a location: every location is a SQLite file today. */
static const struct sql_driver *driver_of(const char *where)
{
    (void)where;
    return &sql_sqlite_driver;
}

static struct kb *kb_new(struct sqlconn *c, const char *where, int writable)
{
    struct kb *kb = calloc(1, sizeof(*kb));
    if (!kb)
        return NULL;
    kb->c = c;
    kb->writable = writable;
    snprintf(kb->where, sizeof(kb->where), "%s", where);
    return kb;
}

int kb_open(const char *where, enum kb_access how, struct kb **out, char *err, size_t errlen)
{
    *out = NULL;
    struct sqlconn *c = NULL;
    const struct sql_driver *d = driver_of(where);
    int rc = d->open(where, how != KB_READ, how == KB_CREATE, &c, err, errlen);
    if (rc == SQL_ENOENT) {
        cp_errmsg(err, errlen, "no knowledge base at %s", where);
        return KB_ENOENT;
    }
    if (rc)
        return -1;
    if (how == KB_READ) {
        int v = version_of(c);
        if (v > nmigrations()) {
            cp_errmsg(err, errlen,
                      "knowledge base has schema version %d; this crashpack knows up to %d", v,
                      nmigrations());
            d->close(c);
            return -1;
        }
    } else if (migrate(c, KB_SCHEMA_VERSION, err, errlen)) {
        d->close(c);
        return -1;
    }
    if (!(*out = kb_new(c, where, how != KB_READ))) {
        d->close(c);
        cp_errmsg(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

struct kb *kb_open_input(const char *where)
{
    struct sqlconn *c = NULL;
    char err[512];
    if (!where || driver_of(where)->open(where, 0, 0, &c, err, sizeof(err)))
        return NULL; /* none, or unreadable: the analysis runs without it */
    struct kb *kb = NULL;
    if (!c->drv->has_table(c, "user_rules") || !(kb = kb_new(c, where, 0)))
        c->drv->close(c);
    return kb;
}

void kb_close(struct kb *kb)
{
    if (!kb)
        return;
    kb->c->drv->close(kb->c);
    free(kb);
}

const char *kb_where(const struct kb *kb)
{
    return kb ? kb->where : NULL;
}

const char *kb_engine(void)
{
    return sql_sqlite_driver.name;
}

const char *kb_engine_version(void)
{
    return sql_sqlite_driver.version();
}

char *kb_default_path(char *buf, size_t len)
{
    const char *env = getenv("CRASHPACK_DB");
    if (env && *env) {
        snprintf(buf, len, "%s", env);
        return buf;
    }
    if (geteuid() == 0) {
        snprintf(buf, len, "/var/lib/crashpack/kb.sqlite");
        return buf;
    }
    const char *xdg = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
    if (xdg && *xdg == '/')
        snprintf(buf, len, "%s/crashpack/kb.sqlite", xdg);
    else if (home && *home)
        snprintf(buf, len, "%s/.local/share/crashpack/kb.sqlite", home);
    else
        return NULL;
    return buf;
}

int kb_create_at_version(const char *path, int version, char *err, size_t errlen)
{
    struct sqlconn *c = NULL;
    if (driver_of(path)->open(path, 1, 1, &c, err, errlen))
        return -1;
    int rc = migrate(c, version, err, errlen);
    c->drv->close(c);
    return rc;
}
