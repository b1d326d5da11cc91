/* resolution.h - what the team found a group of crashes to be (`crashpack db resolve`): a cause,
 * a category and a ticket, who resolved it and when, one per group (a fingerprint; table
 * resolutions, schema 7). Later crashes that match the group are shown the resolution first.
 *
 * A group's status comes from one model (kb_group_status): new (no resolution), resolved (a
 * resolution, and no crash of the group after it), regressed (a crash of the group occurred after
 * the resolution's time).
 *
 * Matching a crash to a resolution goes through kb_resolution_match(): today by fingerprint
 * (the same group); a similarity matcher (issue 24 item 2) is a second entry in its table, tried
 * after the exact match, with the same result shape and its own `match` name.
 *
 * A resolution row is {fingerprint, cause, category, ticket, resolved (epoch seconds),
 * resolved_uid, resolved_user, origin (NULL: resolved here; else "import: FILE")}.
 * Library code: never prints or exits.
 */
#ifndef CRASHPACK_RESOLUTION_H
#define CRASHPACK_RESOLUTION_H

#include "kb.h"

#include <cjson/cJSON.h>
#include <stddef.h>

enum kb_group_status { KB_GROUP_NEW, KB_GROUP_RESOLVED, KB_GROUP_REGRESSED };
const char *kb_group_status_name(enum kb_group_status s); /* "new", "resolved", "regressed" */
/* The one model: res NULL (no resolution): new; a crash of the group at last_time after the
 * resolution's time: regressed; else resolved. */
enum kb_group_status kb_group_status(const cJSON *res, double last_time);

/* The group that `arg` names: a fingerprint some crash has, else a crash id (its fingerprint).
 * 1 found (fp filled), 0 no such group or crash, -1 with err on an SQL error. */
int kb_group_of(struct kb *kb, const char *arg, char *fp, size_t fplen, char *err, size_t errlen);

/* Records the resolution of fingerprint fp (cause required; category, ticket may be NULL) by the
 * caller's real uid and user name, now; it replaces the group's earlier one. 0 or -1 with err. */
int kb_resolve(struct kb *kb, const char *fp, const char *cause, const char *category,
               const char *ticket, char *err, size_t errlen);
/* Removes fp's resolution: 1 removed, 0 there was none, -1 with err. */
int kb_unresolve(struct kb *kb, const char *fp, char *err, size_t errlen);

/* fp's resolution row (above) with `last` (the latest time of a crash of the group: of uid's
 * crashes only unless KB_ANY_UID, query.h), or NULL: none (or no resolutions table: a knowledge
 * base older than schema 7, read as it is). The caller deletes it. */
cJSON *kb_resolution_of(struct kb *kb, const char *fp, long long uid);

/* Every resolution row, by fingerprint (rules export); NULL with err on an SQL error. */
cJSON *kb_resolutions(struct kb *kb, char *err, size_t errlen);

/* What an import did with one resolution. */
enum kb_import { KB_IMPORT_ADDED, KB_IMPORT_REPLACED, KB_IMPORT_KEPT, KB_IMPORT_SAME };
const char *kb_import_name(enum kb_import o); /* "added", "replaced", "kept", "unchanged" */
/* Imports one exported resolution (rules export's resolutions[] entry: {fingerprint, cause,
 * category, ticket, resolved, resolved_by {uid, user}}) from file `origin`: the better one of it
 * and the stored one stays (the newer resolution; at the same time, the one with more of
 * ticket and category); why says why one was kept or replaced. 0, or -1 with err (not a valid
 * entry: no fingerprint, no cause, no time; an SQL error). */
int kb_import_resolution(struct kb *kb, const cJSON *entry, const char *origin, enum kb_import *out,
                         char *why, size_t whylen, char *err, size_t errlen);

/* The resolution that matches a report (its fingerprint, host.time), as the report's
 * `resolution` object {match, fingerprint, cause, category, ticket, resolved, resolved_utc,
 * resolved_by {uid, user}, status "resolved"|"regressed"}; NULL when none matches. Each matcher
 * is tried in order (fingerprint; later similarity), the first match wins. */
cJSON *kb_resolution_match(struct kb *kb, const cJSON *report);

/* A resolution row (kb_resolution_of) as the documents' `resolution` object (above; status from
 * kb_group_status with last_time, which is the row's `last` when larger); the caller deletes it. */
cJSON *kb_resolution_doc(const cJSON *row, const char *match, double last_time);

#endif
