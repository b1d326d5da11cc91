/* sql.h - the SQL connection under the knowledge base (db/ only: nothing outside db/ includes it).
 *
 * Every statement of the knowledge base (schema.c, ingest.c, query.c, draft.c) goes through this
 * interface, and each backend is one driver behind it (struct sql_driver): sql_sqlite.c today, a
 * PostgreSQL driver for the fleet database next to it. The statements are written once, in the
 * SQL both engines read: parameters as ?1..?N (a driver rewrites them to its own form), types
 * through the schema's own names, no engine-specific statement outside the driver (journal
 * modes, write locks, the schema's first versions). What a backend must do differently is a
 * driver hook, not an `if` in the queries.
 *
 * Errors: every call that can fail returns -1 (or NULL) and leaves the engine's message for
 * sql_errmsg(); the callers prefix it. Library code: never prints, never exits.
 */
#ifndef CRASHPACK_SQL_H
#define CRASHPACK_SQL_H

#include <cjson/cJSON.h>
#include <stddef.h>

struct sqlconn;
struct sqlstmt;

enum sql_type { SQL_NULL, SQL_INT, SQL_REAL, SQL_TEXT };
enum sql_step { SQL_ERROR = -1, SQL_DONE = 0, SQL_ROW = 1 };

/* One backend. open: where (a file path for SQLite), writable (0: read-only), create (make it when
 * it is not there); 0, -1 with err, or SQL_ENOENT when it is not there and create is 0. */
#define SQL_ENOENT (-2)
struct sql_driver {
    const char *name; /* "sqlite" */
    int (*open)(const char *where, int writable, int create, struct sqlconn **out, char *err,
                size_t errlen);
    void (*close)(struct sqlconn *c);
    int (*exec)(struct sqlconn *c, const char *sql); /* one or more statements, no rows */
    int (*prepare)(struct sqlconn *c, const char *sql, struct sqlstmt **out);
    int (*bind)(struct sqlstmt *s, int i, enum sql_type t, const char *text, long long n, double d);
    int (*step)(struct sqlstmt *s); /* enum sql_step */
    int (*ncols)(struct sqlstmt *s);
    const char *(*col_name)(struct sqlstmt *s, int i);
    enum sql_type (*col_type)(struct sqlstmt *s, int i);
    const char *(*col_text)(struct sqlstmt *s, int i); /* NULL for SQL NULL */
    long long (*col_int)(struct sqlstmt *s, int i);
    double (*col_real)(struct sqlstmt *s, int i);
    void (*finalize)(struct sqlstmt *s);
    const char *(*errmsg)(struct sqlconn *c);
    /* A transaction that writes: it holds the database's write lock from its start, so that a
     * read-then-write (keep the more complete record) sees no other writer between the two. */
    int (*begin_write)(struct sqlconn *c);
    /* Whether a table exists. */
    int (*has_table)(struct sqlconn *c, const char *table);
    /* The schema version where the engine keeps one of its own (SQLite: PRAGMA user_version,
     * which crashpack used before the kb_meta table), or 0; and writing it, so that an older
     * crashpack reading a newer database refuses it by its version. Run inside the migration's
     * transaction. */
    int (*engine_version_get)(struct sqlconn *c);
    int (*engine_version_set)(struct sqlconn *c, int v);
    /* The engine's library version, for `crashpack version`. */
    const char *(*version)(void);
};

extern const struct sql_driver sql_sqlite_driver;

/* A connection and a statement begin with their driver (the driver's own structs extend them). */
struct sqlconn {
    const struct sql_driver *drv;
};
struct sqlstmt {
    const struct sql_driver *drv;
};

/* The calls the knowledge base makes (thin wrappers over the driver). */
int sql_exec(struct sqlconn *c, const char *sql);
int sql_prepare(struct sqlconn *c, const char *sql, struct sqlstmt **out);
void sql_bind_text(struct sqlstmt *s, int i, const char *v); /* NULL: SQL NULL */
void sql_bind_int(struct sqlstmt *s, int i, long long v);
void sql_bind_real(struct sqlstmt *s, int i, double v);
void sql_bind_json_num(struct sqlstmt *s, int i, const cJSON *v); /* not a number: SQL NULL */
int sql_step(struct sqlstmt *s);                                  /* enum sql_step */
const char *sql_col_text(struct sqlstmt *s, int i);               /* NULL for SQL NULL */
long long sql_col_int(struct sqlstmt *s, int i);
int sql_col_is_null(struct sqlstmt *s, int i);
void sql_finalize(struct sqlstmt *s); /* NULL is fine */
const char *sql_errmsg(struct sqlconn *c);
int sql_begin_write(struct sqlconn *c);
int sql_commit(struct sqlconn *c);
void sql_rollback(struct sqlconn *c);

/* A value to bind to ?N (N = its index + 1): text (NULL binds nothing: the parameter stays
 * NULL), an integer or a real. */
struct sql_arg {
    char type; /* 't', 'i', 'd' */
    const char *s;
    long long i;
    double d;
};
#define SQL_TEXT_ARG(v)                                                                            \
    {                                                                                              \
        't', (v), 0, 0                                                                             \
    }
#define SQL_INT_ARG(v)                                                                             \
    {                                                                                              \
        'i', NULL, (v), 0                                                                          \
    }
#define SQL_REAL_ARG(v)                                                                            \
    {                                                                                              \
        'd', NULL, 0, (v)                                                                          \
    }

/* Runs sql with args; its rows as an array of objects keyed by column name (SQL NULL is JSON null,
 * numbers are numbers, text is text), or NULL with err (the engine's message). */
cJSON *sql_rows(struct sqlconn *c, const char *sql, const struct sql_arg *a, int na, char *err,
                size_t errlen);
/* The same for a statement that changes rows and returns none: 0 or -1 with err. */
int sql_run(struct sqlconn *c, const char *sql, const struct sql_arg *a, int na, char *err,
            size_t errlen);

#endif
