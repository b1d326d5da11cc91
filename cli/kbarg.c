/* kbarg.c - see kbarg.h. */
#include "kbarg.h"

#include <limits.h>
#include <stdio.h>

const char *cp_kb_where(const char *verb, const char *db, char *buf, size_t len)
{
    if (db)
        return db;
    if (!kb_default_path(buf, len)) {
        fprintf(stderr, "%s: no knowledge base location (set --db)\n", verb);
        return NULL;
    }
    return buf;
}

struct kb *cp_kb_input(const char *db)
{
    char buf[PATH_MAX];
    return kb_open_input(db ? db : kb_default_path(buf, sizeof(buf)));
}

struct kb *cp_kb_open(const char *verb, const char *where, enum kb_access how, int *missing)
{
    struct kb *kb = NULL;
    char err[1024];
    int rc = kb_open(where, how, &kb, err, sizeof(err));
    if (missing)
        *missing = rc == KB_ENOENT;
    if (rc == KB_ENOENT)
        fprintf(stderr, "%s: no knowledge base at %s yet (`crashpack db add BUNDLE` creates it)\n",
                verb, where);
    else if (rc)
        fprintf(stderr, "%s: %s\n", verb, err);
    return rc ? NULL : kb;
}
