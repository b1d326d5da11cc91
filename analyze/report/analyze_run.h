/* analyze_run.h - the report of a bundle, from `crashpack analyze --json` run as a child process.
 *
 * `db add` and `report` use exactly the analysis `analyze` prints (every producer, the rule base,
 * the sandbox of the core analysis), by running this same executable. Never prints or exits.
 */
#ifndef CRASHPACK_ANALYZE_RUN_H
#define CRASHPACK_ANALYZE_RUN_H
#include <cjson/cJSON.h>
#include <stddef.h>

/* The report object (caller deletes), or NULL with err set. db: passed as --db (may be NULL).
 * *partial is set when analyze said the bundle or the analysis is partial (exit status 1). */
cJSON *analyze_run_json(const char *bundle, const char *db, int *partial, char *err, size_t errlen);
#endif
