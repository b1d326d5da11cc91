/* pyexc.h - how the process ended (process.death) and the Python exception of exception.json
 * (report `exception`), for the capture paths besides core_pattern (issue 13, docs/analyze.md
 * "Deaths without a core").
 *
 * process.death comes from manifest.json's `death` object when there is one; an older bundle's is
 * derived: a snap (snap.json) is kind "snapshot", anything else a core from the kernel ("core").
 * process.signal and process.crashed_tid get a meaning per kind: the killing signal or
 * {number: null, name: null}; the raising thread (exception.json thread.native_id) or null.
 *
 * exception.json (crashpack-exception/1) is untrusted: every string is cut (type names 512 bytes,
 * messages and tracebacks 64 KiB, paths 4096) and made valid UTF-8, the chain is flattened to at
 * most PYEXC_CHAIN_MAX exceptions, PYEXC_FRAMES_MAX frames each, PYEXC_EVENTS_MAX events. A member
 * that is not a JSON object gives no `exception` and a warning (exception_error).
 * Library code: never prints on its own, never exits.
 */
#ifndef CRASHPACK_PYEXC_H
#define CRASHPACK_PYEXC_H

#include "bundle.h"

#include <cjson/cJSON.h>
#include <stdio.h>

#define PYEXC_MEMBER_MAX (16u << 20)
#define PYEXC_CHAIN_MAX 16
#define PYEXC_FRAMES_MAX 256
#define PYEXC_EVENTS_MAX 32
#define PYEXC_MRO_MAX 64
#define PYEXC_MESSAGE_MAX (64u << 10)

/* The report's `exception` from the parsed exception.json j (caller deletes it); NULL with the
 * reason in why when j is not a crashpack exception object. */
cJSON *pyexc_from_json(const cJSON *j, char *why, size_t whylen);

/* Reads exception.json from the bundle: report `exception` (null when absent or unusable) and,
 * when it is unusable, `exception_error`. */
void pyexc_add(cJSON *r, struct bundle *b);

/* process.death from the manifest (man may be NULL) and the bundle's members; also sets
 * process.signal and process.crashed_tid for the kinds without a core. Call after `exception`. */
void pyexc_death(cJSON *r, const cJSON *man, struct bundle *b);

/* After the native analysis (which reads a live snapshot's core): for the kinds whose signal is
 * not the core's (exception, exit), process.signal is null again, and the crashed thread is the
 * raising one. */
void pyexc_death_finish(cJSON *r);

#endif
