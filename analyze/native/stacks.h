/* stacks.h - stacks.json: what `crashpack enrich` derives from a core on the crashed host, and how
 * `crashpack analyze` uses it elsewhere (docs/enrich.md).
 *
 * stacks.json (format "crashpack-stacks/1") is one JSON object:
 *   format, created (epoch seconds), created_utc, host {hostname, kernel, machine},
 *   uid, gid (who ran the enrichment: the crashed uid when the capture finisher ran it),
 *   binaries ("root-fd": through the crashed process's root, "sysroot", "host"),
 *   bundle {complete (0 for the finisher's temporary, which has no index yet)},
 *   native   the native_run() object (native.h): threads, frames, cause, signal, modules...
 *   python   null (Python frames come with a later issue), checkpoint null, ms.
 *
 * stacks_build() makes it. stacks_load() reads one from a bundle and keeps only what fits the
 * native object's schema (known keys with the right types, strings and arrays within limits):
 * the file is as trustworthy as the user who crashed, and comes with bundles from tickets.
 * stacks_choose() compares the local analysis with it and picks what the report shows:
 *   "local"             the local analysis names every frame stacks.json names;
 *   "stacks.json"       the local analysis lacks binaries for every thread: stacks.json's native
 *                       object replaces it whole (threads, cause, modules);
 *   "local+stacks.json" only some threads lack binaries here: those threads (and a cause detail
 *                       the local analysis could not find) come from stacks.json.
 * With binaries on both sides the two are compared frame by frame (function names while the pcs
 * agree) and the differences listed.
 *
 * Ownership: every returned cJSON is the caller's; stacks_choose consumes its inputs. The library
 * never prints or exits.
 */
#ifndef CRASHPACK_STACKS_H
#define CRASHPACK_STACKS_H

#include "report_native.h"

#include <cjson/cJSON.h>
#include <stddef.h>

struct bundle;

#define STACKS_FORMAT "crashpack-stacks/1"
#define STACKS_MEMBER "stacks.json"
#define STACKS_MAX (64u << 20)       /* stacks.json bytes analyze reads */
#define STACKS_MAX_THREADS 10000u    /* = NATIVE_MAX_THREADS: the rest are dropped (counted) */
#define STACKS_MAX_FRAMES 4000000u   /* over all threads */
#define STACKS_MAX_THREAD_FRAMES 4096u /* per thread (the native side keeps 256 by default) */
#define STACKS_MAX_UNKNOWN 64u       /* unknown scalar members kept per object */
#define STACKS_MAX_STRING (64u << 10)
#define STACKS_MAX_DIFFERENCES 8

struct stacks_meta {
    const char *binaries;   /* "root-fd", "sysroot" or "host" */
    int bundle_complete;
    double ms;              /* time the analysis took */
    int sealed;             /* the analysis child could open nothing by path (sandbox_seal) */
};

/* The stacks.json object around `native` (consumed). NULL when out of memory. */
cJSON *stacks_build(cJSON *native, const struct stacks_meta *m);

/* Reads and checks the bundle's stacks.json. Returns 1 with *native (sanitized native object) and
 * *doc (the rest: format, host, created, uid...; without "native") set; 0 when the bundle has none;
 * -1 when it is unusable, with the reason in `why`. *warnings (an array, may be NULL) gets what was
 * dropped while sanitizing. */
int stacks_load(struct bundle *b, cJSON **native, cJSON **doc, cJSON **warnings, char *why,
                size_t whylen);

/* Picks what the report shows. Consumes `local` and `stacks` (either may be NULL; `local` must
 * not be NULL when `stacks` is NULL). Returns the native object to merge into the report and sets
 * *info = {source, present, used, agrees (bool|null: not compared), differences[],
 * local_unnamed_frames, threads_from_stacks, ...}. `doc` (stacks_load's) adds where stacks.json
 * comes from; it is not consumed. */
cJSON *stacks_choose(cJSON *local, cJSON *stacks, const cJSON *doc, cJSON **info);

/* What `crashpack analyze` calls: loads the bundle's stacks.json (unless no_stacks) and picks
 * (stacks_choose). Consumes `local`; returns the native object to merge (NULL only when out of
 * memory). *failed (the local analysis's) is updated when stacks.json's object is used whole.
 * *info is for stacks_annotate; its "warning" (string, or absent) is a line for the user: why
 * stacks.json was ignored or what was dropped from it. */
cJSON *stacks_apply(struct bundle *b, cJSON *local, int no_stacks, int *failed, cJSON **info);

/* After report_native_merge(): sets analysis.source and analysis.stacks_json {present, used,
 * agrees, differences[], ...} from info (consumed; its strings made valid UTF-8),
 * and adds its warning and note to analysis.warnings. info NULL (no native analysis ran): source
 * and stacks_json null. */
void stacks_annotate(cJSON *report, cJSON *info);

#endif
