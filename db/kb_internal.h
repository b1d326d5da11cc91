/* kb_internal.h - what struct kb holds (db/ only). */
#ifndef CRASHPACK_KB_INTERNAL_H
#define CRASHPACK_KB_INTERNAL_H

#include "kb.h"
#include "sql.h"

#include <limits.h>

struct kb {
    struct sqlconn *c; /* the backend's connection (sql.h) */
    int writable;
    char where[PATH_MAX];
};

/* A write transaction's end: COMMIT when ok, else (or when COMMIT fails) ROLLBACK and err set to
 * "knowledge base: <the engine's message>". 0 or -1. */
int kb_commit_or_rollback(struct kb *kb, int ok, char *err, size_t errlen);

#endif
