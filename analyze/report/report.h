/* report.h - the crashpack-report/1 object of a bundle, built in-process: the analysis pipeline.
 *
 * report_build() runs every stage in order and returns the one report that `crashpack analyze`
 * prints (as JSON or text), `crashpack report` renders as Markdown and `crashpack db add` stores:
 *
 *   1. the native child is forked first (native_start_path), before this process has read the
 *      bundle, so the two share few pages (docs/analyze.md "Start-up and memory"); it unwinds
 *      and symbolizes the core in the sandbox while this process goes on;
 *   2. bundle: manifest.json, capture.json (and its salvage record), the member table;
 *   3. evidence: Xid lines, nvidia-smi, log errors, checkpoint verdicts (evidence.h);
 *   4. the rule base and the signature lists are loaded while the child still works;
 *   5. native: the child's result, stacks.json where binaries lacked, proc/threads.json;
 *   6. hang: threads[].hang_state and hang.deadlocks of a snap (hang.h);
 *   7. signature: crash kind, signature and fingerprint (signature.h);
 *   8. rules: the diagnoses, last, since the rules read every field the others filled in.
 *
 * report_print_text() is the text form (`crashpack analyze` without --json); report_print_notes()
 * the one-line warnings a command prints on its error stream. Both write to the FILE * they are
 * given. Library code: never prints on its own, never exits.
 */
#ifndef CRASHPACK_REPORT_H
#define CRASHPACK_REPORT_H

#include "native.h"

#include <cjson/cJSON.h>
#include <stdio.h>

#define REPORT_FORMAT "crashpack-report/1"

struct report_opts {
    struct native_opts native; /* unwinder, frame limit, sysroot, debug dirs, cache, time limits,
                                * in_process; zero: the defaults */
    const char *db;            /* knowledge base whose user rules join the built-in rules (NULL:
                                * the default, rule.h) */
    int members_only;          /* bundle, process, host, capture and members only: no evidence,
                                * core, hang, signature or diagnoses (`analyze --members`) */
    int explain;               /* signature_info.explain[]: which rule kept or skipped each frame */
    int no_stacks;             /* ignore the bundle's stacks.json (the crashed host's analysis) */
    int no_cache;              /* no cache of decompressed debug files; else native.unwind.cache_dir,
                                * or when that is NULL the default (dcache_default_dir) */
};

struct report_status {
    int partial;               /* the bundle is cut short, or the core analysis did not complete */
    int native_failed;         /* the core analysis did not complete (analysis.error says why) */
    char diagnose_error[512];  /* non-empty: the rule base could not run (diagnosis_info says so) */
    char error[1024];          /* why there is no report (report_build returned NULL) */
};

/* The report of the bundle at path (caller deletes it), with *st filled in; NULL when the bundle
 * cannot be opened or memory runs out, with st->error saying why. A partial bundle or analysis
 * still gives a report (st->partial). */
cJSON *report_build(const char *path, const struct report_opts *o, struct report_status *st);

/* The text report: what the bundle says, the native summary, the evidence, the capture, the
 * members, the hang analysis and the diagnoses (members_only: the member table alone). Every
 * string from the bundle or the knowledge base goes through cp_text_put (utf8.h). */
void report_print_text(FILE *out, const cJSON *r, int members_only);

/* The warnings a command prints after report_build, one line each, prefixed with `prog: `: a
 * failed diagnosis, an incomplete core analysis, and (json: the text report shows it already)
 * the stacks.json warning. */
void report_print_notes(FILE *err, const char *prog, const cJSON *r, const struct report_status *st,
                        int json);

#endif
