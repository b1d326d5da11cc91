/* sql_sqlite.c - the SQLite driver of sql.h: one file per node, the embedded default.
 *
 * A writable connection runs in WAL mode with a 30 s busy timeout, so that concurrent writers
 * (`crashpack db add` on many bundles at once, the node's own ingest) queue instead of failing;
 * a write transaction is BEGIN IMMEDIATE, which takes the write lock at its start. Paths are
 * opened without following a final symlink (SQLITE_OPEN_NOFOLLOW). */
#include "sql.h"
#include "errmsg.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct lite_conn {
    struct sqlconn base;
    sqlite3 *db;
};

struct lite_stmt {
    struct sqlstmt base;
    sqlite3_stmt *q;
};

#define CONN(c) (((struct lite_conn *)(c))->db)
#define STMT(s) (((struct lite_stmt *)(s))->q)

/* sqlite3_exec, retried while the database is busy or locked: the busy handler does not cover
 * every case (a connection switching a fresh file to WAL, recovery of a WAL another process left).
 */
static int exec_retry(sqlite3 *db, const char *sql)
{
    int rc = SQLITE_BUSY;
    for (int i = 0; i < 3000; i++) {
        rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
        if ((rc & 0xff) != SQLITE_BUSY && (rc & 0xff) != SQLITE_LOCKED)
            break;
        usleep(10000);
    }
    return rc;
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
            if (mkdir(dir, 0711) && errno != EEXIST)
                return -1;
            *p = '/';
        }
    return mkdir(dir, 0711) && errno != EEXIST ? -1 : 0;
}

/* The knowledge base holds every crash's executable, frames and diagnoses: readable by its owner
 * only. A new file is made 0600 before SQLite opens it (its -wal and -shm files take the
 * database's mode); an older one, and its -wal/-shm, lose their group and other bits. Each is
 * opened without following a symlink, and only a file of this user's is changed. */
static int private_file(const char *path, int create)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (create ? O_CREAT : 0), 0600);
    if (fd < 0)
        return errno == ENOENT && !create ? 0 : -1;
    struct stat st;
    if (!fstat(fd, &st) && S_ISREG(st.st_mode) && st.st_uid == geteuid() && (st.st_mode & 077))
        fchmod(fd, st.st_mode & 0700);
    close(fd);
    return 0;
}

static void private_files(const char *path)
{
    char side[PATH_MAX + 8];
    private_file(path, 0);
    snprintf(side, sizeof(side), "%s-wal", path);
    private_file(side, 0);
    snprintf(side, sizeof(side), "%s-shm", path);
    private_file(side, 0);
}

static const struct sql_driver *self(void);

static int lite_open(const char *path, int writable, int create, struct sqlconn **out, char *err,
                     size_t errlen)
{
    *out = NULL;
    struct stat st;
    if (!create && stat(path, &st) && errno == ENOENT)
        return SQL_ENOENT;
    if (create && mkdirs(path)) {
        cp_errmsg(err, errlen, "cannot create the directory of %s: %s", path, strerror(errno));
        return -1;
    }
    if (create && private_file(path, 1)) {
        cp_errmsg(err, errlen, "cannot create the knowledge base %s: %s", path, strerror(errno));
        return -1;
    }
    if (writable)
        private_files(path);
    sqlite3 *db = NULL;
    int flags = !writable ? SQLITE_OPEN_READONLY
                          : SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0) |
                                SQLITE_OPEN_NOFOLLOW;
    if (sqlite3_open_v2(path, &db, flags, NULL) != SQLITE_OK) {
        cp_errmsg(err, errlen, "cannot open the knowledge base %s: %s", path,
                  db ? sqlite3_errmsg(db) : "out of memory");
        sqlite3_close(db);
        return -1;
    }
    sqlite3_busy_timeout(db, writable ? 30000 : 5000);
    if (writable &&
        exec_retry(db,
                   "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON") !=
            SQLITE_OK) {
        cp_errmsg(err, errlen, "knowledge base %s: %s", path, sqlite3_errmsg(db));
        sqlite3_close(db);
        return -1;
    }
    struct lite_conn *c = calloc(1, sizeof(*c));
    if (!c) {
        sqlite3_close(db);
        cp_errmsg(err, errlen, "out of memory");
        return -1;
    }
    c->base.drv = self();
    c->db = db;
    *out = &c->base;
    return 0;
}

static void lite_close(struct sqlconn *c)
{
    if (!c)
        return;
    sqlite3_close(CONN(c));
    free(c);
}

static int lite_exec(struct sqlconn *c, const char *sql)
{
    return exec_retry(CONN(c), sql) == SQLITE_OK ? 0 : -1;
}

static int lite_prepare(struct sqlconn *c, const char *sql, struct sqlstmt **out)
{
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(CONN(c), sql, -1, &q, NULL) != SQLITE_OK)
        return -1;
    struct lite_stmt *s = calloc(1, sizeof(*s));
    if (!s) {
        sqlite3_finalize(q);
        return -1;
    }
    s->base.drv = self();
    s->q = q;
    *out = &s->base;
    return 0;
}

static int lite_bind(struct sqlstmt *s, int i, enum sql_type t, const char *text, long long n,
                     double d)
{
    switch (t) {
    case SQL_TEXT:
        return sqlite3_bind_text(STMT(s), i, text, -1, SQLITE_TRANSIENT) == SQLITE_OK ? 0 : -1;
    case SQL_INT:
        return sqlite3_bind_int64(STMT(s), i, n) == SQLITE_OK ? 0 : -1;
    case SQL_REAL:
        return sqlite3_bind_double(STMT(s), i, d) == SQLITE_OK ? 0 : -1;
    default:
        return sqlite3_bind_null(STMT(s), i) == SQLITE_OK ? 0 : -1;
    }
}

static int lite_step(struct sqlstmt *s)
{
    int rc = sqlite3_step(STMT(s));
    return rc == SQLITE_ROW ? SQL_ROW : rc == SQLITE_DONE ? SQL_DONE : SQL_ERROR;
}

static int lite_ncols(struct sqlstmt *s)
{
    return sqlite3_column_count(STMT(s));
}

static const char *lite_col_name(struct sqlstmt *s, int i)
{
    return sqlite3_column_name(STMT(s), i);
}

static enum sql_type lite_col_type(struct sqlstmt *s, int i)
{
    switch (sqlite3_column_type(STMT(s), i)) {
    case SQLITE_NULL:
        return SQL_NULL;
    case SQLITE_INTEGER:
        return SQL_INT;
    case SQLITE_FLOAT:
        return SQL_REAL;
    default:
        return SQL_TEXT;
    }
}

static const char *lite_col_text(struct sqlstmt *s, int i)
{
    return (const char *)sqlite3_column_text(STMT(s), i);
}

static long long lite_col_int(struct sqlstmt *s, int i)
{
    return sqlite3_column_int64(STMT(s), i);
}

static double lite_col_real(struct sqlstmt *s, int i)
{
    return sqlite3_column_double(STMT(s), i);
}

static void lite_finalize(struct sqlstmt *s)
{
    sqlite3_finalize(STMT(s));
    free(s);
}

static const char *lite_errmsg(struct sqlconn *c)
{
    return sqlite3_errmsg(CONN(c));
}

static int lite_begin_write(struct sqlconn *c)
{
    return lite_exec(c, "BEGIN IMMEDIATE");
}

static int lite_has_table(struct sqlconn *c, const char *table)
{
    sqlite3_stmt *q = NULL;
    int have =
        sqlite3_prepare_v2(CONN(c), "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?1",
                           -1, &q, NULL) == SQLITE_OK &&
        sqlite3_bind_text(q, 1, table, -1, SQLITE_TRANSIENT) == SQLITE_OK &&
        sqlite3_step(q) == SQLITE_ROW;
    sqlite3_finalize(q);
    return have;
}

static int lite_version_get(struct sqlconn *c)
{
    sqlite3_stmt *q = NULL;
    int v = -1;
    if (sqlite3_prepare_v2(CONN(c), "PRAGMA user_version", -1, &q, NULL) == SQLITE_OK &&
        sqlite3_step(q) == SQLITE_ROW)
        v = sqlite3_column_int(q, 0);
    sqlite3_finalize(q);
    return v;
}

static int lite_version_set(struct sqlconn *c, int v)
{
    char sql[64];
    snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", v);
    return sqlite3_exec(CONN(c), sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : -1;
}

static const char *lite_version(void)
{
    return sqlite3_libversion();
}

const struct sql_driver sql_sqlite_driver = {
    .name = "sqlite",
    .open = lite_open,
    .close = lite_close,
    .exec = lite_exec,
    .prepare = lite_prepare,
    .bind = lite_bind,
    .step = lite_step,
    .ncols = lite_ncols,
    .col_name = lite_col_name,
    .col_type = lite_col_type,
    .col_text = lite_col_text,
    .col_int = lite_col_int,
    .col_real = lite_col_real,
    .finalize = lite_finalize,
    .errmsg = lite_errmsg,
    .begin_write = lite_begin_write,
    .has_table = lite_has_table,
    .engine_version_get = lite_version_get,
    .engine_version_set = lite_version_set,
    .version = lite_version,
};

static const struct sql_driver *self(void)
{
    return &sql_sqlite_driver;
}
