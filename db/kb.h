/* kb.h - the knowledge base: every analyzed crash of a node (or, later, of a fleet) and the team's
 * own rules (user_rules, overlaid on the built-ins by rules/rule.h), behind one opaque handle.
 *
 * struct kb is the only way in: nothing outside db/ sees an engine type, a connection or SQL.
 * The backend is chosen by where the knowledge base is (kb_open's `where`): a file path is the
 * embedded SQLite backend (the default, one file per node); the statements themselves go through
 * db/sql.h, so that a PostgreSQL backend is a second driver under the same schema and queries.
 *
 * kb_open() brings the schema forward (the version is kept in the kb_meta table; each migration
 * runs in its own write transaction). Writers take the write lock when their transaction starts,
 * so concurrent adds queue instead of failing, and a read-then-write (keep the more complete
 * record) sees no other writer in between.
 *
 * Analysis reads the knowledge base as an optional, read-only input (kb_open_input): the command
 * layer opens it and passes it to the report (user rules, GPU history); without one the report is
 * the same minus those parts.
 *
 * Library code: never prints or exits.
 */
#ifndef CRASHPACK_KB_H
#define CRASHPACK_KB_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#define KB_SCHEMA_VERSION 7

struct kb;

/* How kb_open opens: read only, read and write, or read and write creating it (and its
 * directory) when it is not there. */
enum kb_access { KB_READ, KB_WRITE, KB_CREATE };
/* kb_open's result when there is no knowledge base at `where` (KB_READ, KB_WRITE). */
#define KB_ENOENT (-2)

/* Opens the knowledge base at `where` and, when writable, migrates it. 0, KB_ENOENT (err says
 * where), or -1 with err. A read-only open does not migrate: a knowledge base of an older schema
 * is read as it is, one of a newer schema is refused. */
int kb_open(const char *where, enum kb_access how, struct kb **out, char *err, size_t errlen);
/* The knowledge base at `where` as an analysis input, read-only: NULL when there is none, it
 * cannot be opened, or it holds no knowledge base (no user_rules table): the analysis then runs
 * without it. where NULL: none. */
struct kb *kb_open_input(const char *where);
void kb_close(struct kb *kb); /* NULL is fine */
/* Where it is (kb_open's `where`), and its schema version (-1 when unreadable). */
const char *kb_where(const struct kb *kb);
int kb_schema_version(struct kb *kb);
/* The default knowledge base: $CRASHPACK_DB, else /var/lib/crashpack/kb.sqlite for root, else
 * $XDG_DATA_HOME/crashpack/kb.sqlite (~/.local/share/...). Returns buf or NULL. */
char *kb_default_path(char *buf, size_t len);
/* The embedded engine's name and library version, for `crashpack version`. */
const char *kb_engine(void);
const char *kb_engine_version(void);
/* For tests of migrations: a new knowledge base at path with the schema of `version` (1..
 * KB_SCHEMA_VERSION). 0 or -1 with err. */
int kb_create_at_version(const char *path, int version, char *err, size_t errlen);

/* How complete a report is, component by component, compared in this order (the first difference
 * decides): the core analysis completed without an error; the core member is there and not cut
 * short; the bundle is complete (not cut short: bundle.complete); members not cut short; threads
 * with at least one frame. kb_completeness() fills c and returns the packed score (a larger score
 * is a more complete record; the order above is the packing's). */
struct kb_completeness {
    int analysis, core, bundle, members, threads;
    int used; /* members counts only those the analysis used (members[].used of a report that has
               * it: a member nobody reads, padding in a forged copy, does not count); 0: every
               * intact member (a report or a stored record from before). Two records counted
               * differently are compared without their members. */
};
long long kb_completeness(const cJSON *report, struct kb_completeness *c);
/* c as a JSON object {score, analysis_complete, core, bundle_complete, members, threads_unwound}
 * (the caller deletes it), and back (0, or -1 when j is not such an object). */
cJSON *kb_completeness_json(const struct kb_completeness *c);
int kb_completeness_from_json(const cJSON *j, struct kb_completeness *c);
/* The first component where better and worse differ, as "X vs Y" ("bundle complete vs bundle cut
 * short"); "" when they are equal. */
void kb_completeness_diff(const struct kb_completeness *better, const struct kb_completeness *worse,
                          char *buf, size_t len);

/* Where a report came from, for crash_sources: kind "bundle" (path: the bundle, xxh64: the file's
 * hash) or "report-json" (path: the JSON file, xxh64: the report's own text's hash). */
struct kb_source {
    const char *kind, *path, *xxh64;
    long long size; /* bytes of the file; -1 unknown */
};

/* What an add did. ADDED: a new record. REPLACED: the new report is strictly more complete than
 * the stored record, which it replaced. UPDATED: the same bundle (file hash) again, at least as
 * complete: its analysis is stored again (new rules, a new analyzer). KEPT: the stored record is
 * as complete or more; nothing changed but the source list. FAILED: nothing could be stored
 * (no crash identity; an unreadable bundle: kb_add_failure); only the failure was recorded. */
enum kb_outcome { KB_ADDED, KB_REPLACED, KB_UPDATED, KB_KEPT, KB_FAILED };
struct kb_result {
    int64_t id;          /* the crash's row id; 0 when the failure belongs to no known crash */
    enum kb_outcome outcome;
    char reason[320];    /* REPLACED/KEPT: the completeness difference ("" when equal, or when
                          * legacy); FAILED: why */
    int legacy;          /* REPLACED/KEPT: the stored record predates completeness scores */
    int refused;         /* KEPT: the report was more complete but changes the crash's identity
                          * (executable, its build-id, or a complete analysis's signature): a
                          * forged or mixed-up bundle; reason says how */
};
const char *kb_outcome_name(enum kb_outcome o);

/* Stores one crash from its report (crashpack-report/1 with diagnoses), or keeps the stored one
 * (kb_outcome). The crash's identity is host + boot id + pid + tid + time; a report without pid
 * and time has none and is recorded as a failure. Every call leaves a crash_sources row: src's
 * path, hash and size, the time, the real uid and its user name, the completeness and the
 * outcome; the rows of an earlier stored analysis that is replaced become "superseded". The
 * record's bundle path is src->path for a bundle, NULL for report JSON. -1 with err on an SQL
 * error (nothing changed). */
int kb_add_report(struct kb *kb, const cJSON *report, const struct kb_source *src, struct kb_result *res,
                  char *err, size_t errlen);
/* Records that src could not be analyzed (error: why) and changes no crash. The failure belongs to
 * the crash an earlier add of the same path belongs to, if there is one (res->id), else to none. */
int kb_add_failure(struct kb *kb, const struct kb_source *src, const char *error, struct kb_result *res,
                   char *err, size_t errlen);

/* XXH64 (bundle/xxh64.h) of a file as 16 hex digits, and its size: 0, or -1 with err. */
int kb_file_xxh64(const char *path, char out[17], long long *size, char *err, size_t errlen);
/* ... of a string. */
void kb_text_xxh64(const char *s, char out[17]);

/* User rules: insert or replace by id (validated by the caller). */
int kb_put_rule(struct kb *kb, const cJSON *rule, char *err, size_t errlen);

#endif
