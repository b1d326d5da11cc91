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
 *   8. history: what the knowledge base (an optional input) knows of this process's GPUs and
 *      host from earlier crashes (gpu.history, history.c), and the team's resolution of its group
 *      (resolution: db/resolution.h);
 *   9. rules: the diagnoses, last, since the rules read every field the others filled in.
 *
 * The report's text and Markdown forms are render/'s (render.h). Library code: never prints,
 * never exits.
 */
#ifndef CRASHPACK_REPORT_H
#define CRASHPACK_REPORT_H

#include "kb.h"
#include "native.h"

#include <cjson/cJSON.h>
#include <stdio.h>

#define REPORT_FORMAT "crashpack-report/1"

struct report_opts {
    struct native_opts native; /* unwinder, frame limit, sysroot, debug dirs, cache, time limits,
                                * in_process; zero: the defaults */
    struct kb *kb;             /* the knowledge base, an optional read-only input (kb_open_input):
                                * its user rules join the built-in rules, its history of this
                                * process's GPUs and host is the history stage's; NULL: none */
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

/* The history stage alone (history.c): gpu.history from kb (NULL: none, history_error says so). */
void report_history(cJSON *report, struct kb *kb);
/* A report read from JSON, diagnosed again: the history and rules stages with kb (NULL: none).
 * Returns the number of diagnoses, or -1 with err (diagnosis_info.error says so too). */
int report_rediagnose(cJSON *report, struct kb *kb, char *err, size_t errlen);

#endif
