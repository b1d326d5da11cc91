/* kb.h - the knowledge base: one SQLite file per node holding every analyzed crash and the team's
 * own rules (user_rules, overlaid on the built-ins by rules/rule.h).
 *
 * kb_open() sets WAL mode and a busy timeout and brings the schema forward (PRAGMA user_version is
 * the schema version; each migration runs in its own transaction). Writers use BEGIN IMMEDIATE, so
 * concurrent `crashpack db add` runs queue on the busy timeout instead of failing.
 *
 * Library code: never prints or exits.
 */
#ifndef CRASHPACK_KB_H
#define CRASHPACK_KB_H

#include <cjson/cJSON.h>
#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#define KB_SCHEMA_VERSION 4

/* Opens (create: creating the file and its directory) and migrates. 0 or -1 with err. */
int kb_open(const char *path, int create, sqlite3 **out, char *err, size_t errlen);
/* Applies migrations 1..target to an open database (tests build an old schema with it). */
int kb_migrate(sqlite3 *db, int target, char *err, size_t errlen);
int kb_schema_version(sqlite3 *db);
/* sqlite3_exec retried (up to ~30 s) while the database is busy or locked. */
int kb_exec_retry(sqlite3 *db, const char *sql, char **errmsg);

/* How complete a report is, component by component, compared in this order (the first difference
 * decides): the core analysis completed without an error; the core member is there and not cut
 * short; the bundle is complete (not cut short: bundle.complete); members not cut short; threads
 * with at least one frame. kb_completeness() fills c and returns the packed score (a larger score
 * is a more complete record; the order above is the packing's). */
struct kb_completeness {
    int analysis, core, bundle, members, threads;
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
};
const char *kb_outcome_name(enum kb_outcome o);

/* Stores one crash from its report (crashpack-report/1 with diagnoses), or keeps the stored one
 * (kb_outcome). The crash's identity is host + boot id + pid + tid + time; a report without pid
 * and time has none and is recorded as a failure. Every call leaves a crash_sources row: src's
 * path, hash and size, the time, the real uid and its user name, the completeness and the
 * outcome; the rows of an earlier stored analysis that is replaced become "superseded". The
 * record's bundle path is src->path for a bundle, NULL for report JSON. -1 with err on an SQL
 * error (nothing changed). */
int kb_add_report(sqlite3 *db, const cJSON *report, const struct kb_source *src, struct kb_result *res,
                  char *err, size_t errlen);
/* Records that src could not be analyzed (error: why) and changes no crash. The failure belongs to
 * the crash an earlier add of the same path belongs to, if there is one (res->id), else to none. */
int kb_add_failure(sqlite3 *db, const struct kb_source *src, const char *error, struct kb_result *res,
                   char *err, size_t errlen);

/* XXH64 (bundle/xxh64.h) of a file as 16 hex digits, and its size: 0, or -1 with err. */
int kb_file_xxh64(const char *path, char out[17], long long *size, char *err, size_t errlen);
/* ... of a string. */
void kb_text_xxh64(const char *s, char out[17]);

/* User rules: insert or replace by id (validated by the caller). */
int kb_put_rule(sqlite3 *db, const cJSON *rule, char *err, size_t errlen);

/* The job of a report from its environment: "slurm:ID", "torchelastic:ID" or "master:ADDR:PORT",
 * and RANK / LOCAL_RANK (SLURM_PROCID / SLURM_LOCALID), -1 when unknown. */
void kb_job_of(const cJSON *report, char *job, size_t joblen, int *rank, int *local_rank);

#endif
