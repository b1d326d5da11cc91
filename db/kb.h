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

#define KB_SCHEMA_VERSION 2

/* Opens (create: creating the file and its directory) and migrates. 0 or -1 with err. */
int kb_open(const char *path, int create, sqlite3 **out, char *err, size_t errlen);
/* Applies migrations 1..target to an open database (tests build an old schema with it). */
int kb_migrate(sqlite3 *db, int target, char *err, size_t errlen);
int kb_schema_version(sqlite3 *db);
/* sqlite3_exec retried (up to ~30 s) while the database is busy or locked. */
int kb_exec_retry(sqlite3 *db, const char *sql, char **errmsg);

/* Stores one crash from its report (crashpack-report/1 with diagnoses). The crash's identity is
 * host + boot id + pid + tid + time, so adding the same bundle again updates the row instead of
 * adding one. *id is its row id; *added is 1 when the row is new. */
int kb_add_report(sqlite3 *db, const cJSON *report, const char *bundle_path, int64_t *id, int *added,
                  char *err, size_t errlen);

/* User rules: insert or replace by id (validated by the caller). */
int kb_put_rule(sqlite3 *db, const cJSON *rule, char *err, size_t errlen);

/* The job of a report from its environment: "slurm:ID", "torchelastic:ID" or "master:ADDR:PORT",
 * and RANK / LOCAL_RANK (SLURM_PROCID / SLURM_LOCALID), -1 when unknown. */
void kb_job_of(const cJSON *report, char *job, size_t joblen, int *rank, int *local_rank);

#endif
