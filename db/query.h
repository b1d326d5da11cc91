/* query.h - every read of the knowledge base (kb.h) the commands make: `db list/search/show/
 * groups/jobs/stats`, the rule base's user rules (rules/rule.c) and the report's fingerprint
 * history (`crashpack report`). Each function runs its SQL and returns the rows as cJSON (the
 * caller formats them, as text or as JSON); none prints or exits.
 *
 * A row is an object keyed by the column names below; SQL NULL is JSON null, INTEGER and REAL
 * columns are numbers, TEXT columns strings. Times are epoch seconds (REAL). Errors (err) are
 * the engine's message, for the caller to prefix.
 */
#ifndef CRASHPACK_QUERY_H
#define CRASHPACK_QUERY_H

#include <cjson/cJSON.h>
#include "kb.h"
#include <stddef.h>

/* Whose crashes a query sees: KB_ANY_UID (every crash: whoever reads the file itself), or one
 * uid's (crashes.uid, the crashed process's uid; a row stored before schema 5 has none and is
 * nobody's): the agent's answer to a user (docs/db.md). */
#define KB_ANY_UID (-1LL)

/* What `db search` filters on; NULL strings do not filter. text matches (LIKE %text%) signature,
 * top diagnosis title, diagnoses, exe, fingerprint, and the Python exception's type and the
 * first line of its message; rule matches the top rule or any diagnosis' rule. */
struct kb_filter {
    const char *text, *host, *rule, *category, *job, *fingerprint;
    double since, until; /* time range, inclusive (a crash without a time counts as 0) */
    int limit;
    long long uid; /* KB_ANY_UID, or one uid's crashes only */
};

/* Listings, newest first: [{id, time, host, job, rank, signal, top_title, signature}], of uid's
 * crashes (or KB_ANY_UID). NULL with err on an SQL error. */
cJSON *kb_list_crashes(struct kb *kb, int limit, long long uid, char *err, size_t errlen);
cJSON *kb_search_crashes(struct kb *kb, const struct kb_filter *f, char *err, size_t errlen);

/* One crash: {id, time, host, exe, signal, crash_kind, signature, fingerprint, job, rank,
 * local_rank, bundle_path, bundle_xxh64, completeness_detail (kb_completeness_json's object, null
 * for a record from before schema 3), seen (crashes with its fingerprint), diagnoses (the stored
 * array; [] when unreadable), sources (every add of it, oldest first: [{id, kind, path, xxh64,
 * size, added, added_uid, added_user, completeness, completeness_detail (object or null),
 * outcome, reason, error}])}. With a uid (not KB_ANY_UID), a crash of another uid is no such
 * crash, and `seen` counts that uid's crashes only. NULL with *found 0 when there is no such id,
 * or NULL with *found 1 and err on an SQL error. */
cJSON *kb_show_crash(struct kb *kb, long long id, long long uid, int *found, char *err,
                     size_t errlen);

/* Crashes grouped by fingerprint, the largest groups first: [{fingerprint, count, first, last,
 * hosts (distinct), host_list ("a,b,c,d": the first 4 by name), top_title (the most common),
 * signature, and the group's resolution (resolution.h; null when there is none): cause, category,
 * ticket, resolved, resolved_uid, resolved_user, origin}]. */
cJSON *kb_groups(struct kb *kb, int limit, char *err, size_t errlen);

/* The jobs with crashes, most recent first: [{job}]; and one job's crashes in time order:
 * [{id, time, host, rank, top_title, top_category, top_consequence_of, top_rule}]. */
cJSON *kb_jobs(struct kb *kb, int limit, char *err, size_t errlen);
cJSON *kb_job_crashes(struct kb *kb, const char *job, char *err, size_t errlen);

/* {crashes, fingerprints, hosts, per_week, per_category, per_host}; the per_* members are
 * [{key, count}] (per_week's key "YYYY-Www", the last 26 weeks; per_category's "undiagnosed" for
 * crashes without a diagnosis; per_host the 50 busiest). */
cJSON *kb_stats(struct kb *kb, char *err, size_t errlen);

/* The user rules sorted by id, rows without an id left out: [{id, json (the rule's text)}]. */
cJSON *kb_user_rules(struct kb *kb, char *err, size_t errlen);

/* How often the knowledge base has seen a fingerprint: {count, first, last, hosts}; an empty
 * object (count 0: unseen) when the table cannot be read. */
cJSON *kb_fingerprint_seen(struct kb *kb, const char *fingerprint);

/* The hardware faults the knowledge base saw before this crash (report r, host.time) within
 * window_s: on one of its GPUs (gpu.scope: by UUID anywhere, by PCI id on the same host when the
 * UUID was not known) or on its whole host (MCE, AER on a PCIe port), from other crashes' records
 * (gpu_faults, kb.h): [{crash_id, crash_time, host, scope "gpu"|"host", pci, uuid, code, kind,
 * time, age_s, text}], newest first, at most 32. A fault of another GPU is never in it. NULL with
 * err on an SQL error (a knowledge base older than schema 4 has no gpu_faults table) or when the
 * crash has no time. */
cJSON *kb_gpu_history(struct kb *kb, const cJSON *r, double window_s, char *err, size_t errlen);

/* `crashpack rules add --from-crash ID`: a rule drafted from crash id's stored facts (draft.c),
 * or NULL with err (no such crash, an SQL error). */
cJSON *kb_draft_rule(struct kb *kb, long long id, char *err, size_t errlen);

#endif
