/* kbarg.h - the knowledge base a verb was given (--db, else the default location; db/kb.h),
 * opened for the verb with its one-line errors (command layer only). */
#ifndef CRASHPACK_KBARG_H
#define CRASHPACK_KBARG_H

#include "kb.h"

#include <stddef.h>

/* --db's value, or the default location (kb_default_path) into buf; NULL after the one-line error
 * "VERB: no knowledge base location (set --db)". */
const char *cp_kb_where(const char *verb, const char *db, char *buf, size_t len);

/* The knowledge base as an analysis input (kb_open_input of --db or the default): NULL when there
 * is none. The caller closes it. */
struct kb *cp_kb_input(const char *db);

/* Opens the knowledge base at where for a verb; NULL after its one-line error ("VERB: ..."), with
 * *missing set when there is none yet (exit CP_EXIT_NOTFOUND) rather than a failure. */
struct kb *cp_kb_open(const char *verb, const char *where, enum kb_access how, int *missing);

#endif
