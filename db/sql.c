/* sql.c - the driver-independent half of sql.h: the wrappers, rows as JSON, one-shot statements. */
#include "sql.h"
#include "errmsg.h"

#include <stdio.h>

int sql_exec(struct sqlconn *c, const char *sql)
{
    return c->drv->exec(c, sql);
}

int sql_prepare(struct sqlconn *c, const char *sql, struct sqlstmt **out)
{
    *out = NULL;
    return c->drv->prepare(c, sql, out);
}

void sql_bind_text(struct sqlstmt *s, int i, const char *v)
{
    s->drv->bind(s, i, v ? SQL_TEXT : SQL_NULL, v, 0, 0);
}

void sql_bind_int(struct sqlstmt *s, int i, long long v)
{
    s->drv->bind(s, i, SQL_INT, NULL, v, 0);
}

void sql_bind_real(struct sqlstmt *s, int i, double v)
{
    s->drv->bind(s, i, SQL_REAL, NULL, 0, v);
}

void sql_bind_json_num(struct sqlstmt *s, int i, const cJSON *v)
{
    if (cJSON_IsNumber(v))
        sql_bind_real(s, i, v->valuedouble);
    else
        s->drv->bind(s, i, SQL_NULL, NULL, 0, 0);
}

int sql_step(struct sqlstmt *s)
{
    return s->drv->step(s);
}

const char *sql_col_text(struct sqlstmt *s, int i)
{
    return s->drv->col_text(s, i);
}

long long sql_col_int(struct sqlstmt *s, int i)
{
    return s->drv->col_int(s, i);
}

int sql_col_is_null(struct sqlstmt *s, int i)
{
    return s->drv->col_type(s, i) == SQL_NULL;
}

void sql_finalize(struct sqlstmt *s)
{
    if (s)
        s->drv->finalize(s);
}

const char *sql_errmsg(struct sqlconn *c)
{
    return c->drv->errmsg(c);
}

int sql_begin_write(struct sqlconn *c)
{
    return c->drv->begin_write(c);
}

int sql_commit(struct sqlconn *c)
{
    return c->drv->exec(c, "COMMIT");
}

void sql_rollback(struct sqlconn *c)
{
    c->drv->exec(c, "ROLLBACK");
}

/* One result row as an object keyed by the column names. */
static cJSON *row_json(struct sqlstmt *q)
{
    const struct sql_driver *d = q->drv;
    cJSON *o = cJSON_CreateObject();
    int n = d->ncols(q);
    for (int i = 0; o && i < n; i++) {
        const char *name = d->col_name(q, i);
        switch (d->col_type(q, i)) {
        case SQL_NULL:
            cJSON_AddNullToObject(o, name);
            break;
        case SQL_INT:
        case SQL_REAL:
            cJSON_AddNumberToObject(o, name, d->col_real(q, i));
            break;
        default:
            cJSON_AddStringToObject(o, name, d->col_text(q, i));
        }
    }
    return o;
}

static struct sqlstmt *prepared(struct sqlconn *c, const char *sql, const struct sql_arg *a, int na,
                                char *err, size_t errlen)
{
    struct sqlstmt *q = NULL;
    if (sql_prepare(c, sql, &q)) {
        cp_errmsg(err, errlen, "%s", sql_errmsg(c));
        return NULL;
    }
    for (int i = 0; i < na; i++) {
        if (a[i].type == 't' && a[i].s)
            sql_bind_text(q, i + 1, a[i].s);
        else if (a[i].type == 'i')
            sql_bind_int(q, i + 1, a[i].i);
        else if (a[i].type == 'd')
            sql_bind_real(q, i + 1, a[i].d);
    }
    return q;
}

cJSON *sql_rows(struct sqlconn *c, const char *sql, const struct sql_arg *a, int na, char *err,
                size_t errlen)
{
    struct sqlstmt *q = prepared(c, sql, a, na, err, errlen);
    if (!q)
        return NULL;
    cJSON *arr = cJSON_CreateArray();
    int rc = SQL_ERROR;
    while (arr && (rc = sql_step(q)) == SQL_ROW)
        cJSON_AddItemToArray(arr, row_json(q));
    if (!arr || rc != SQL_DONE) {
        cp_errmsg(err, errlen, "%s", arr ? sql_errmsg(c) : "out of memory");
        cJSON_Delete(arr);
        arr = NULL;
    }
    sql_finalize(q);
    return arr;
}

int sql_run(struct sqlconn *c, const char *sql, const struct sql_arg *a, int na, char *err,
            size_t errlen)
{
    struct sqlstmt *q = prepared(c, sql, a, na, err, errlen);
    if (!q)
        return -1;
    int rc = sql_step(q);
    if (rc == SQL_ERROR)
        cp_errmsg(err, errlen, "%s", sql_errmsg(c));
    sql_finalize(q);
    return rc == SQL_ERROR ? -1 : 0;
}
