/* render.h - the one renderer: a crashpack-report/1 object (docs/report-schema.json) as text
 * (`crashpack analyze`), as ticket Markdown (`crashpack report`), and the knowledge base's
 * documents (crashpack-db-show/1) as text.
 *
 * It reads only the documents it is given, never a bundle, the analysis, the rules or the
 * knowledge base: what it shows besides the report (how often the knowledge base saw this
 * fingerprint, a slim bundle's summary) comes in as an argument from the command layer. So
 * `analyze`, `report`, `db show` and the server show one crash the same way, and text and JSON
 * never disagree.
 *
 * Every string in a report is untrusted (it came from a bundle): text goes through the terminal
 * policy (cp_text_put, common/utf8.h), Markdown through the Markdown escapes (common/mdesc.h).
 * Library code: writes only to the FILE * it is given, never exits.
 */
#ifndef CRASHPACK_RENDER_H
#define CRASHPACK_RENDER_H

#include <cjson/cJSON.h>
#include <stdio.h>

/* The text report, the answer first (docs/analyze.md, "The text output"): what died and how, the
 * top diagnosis with its evidence and first action, the exception or the crashing frame, the
 * deadlocks, the signature; then the threads (every frame of the crashed thread), the rest of the
 * evidence (what is absent for one reason said once), the hang analysis, the other diagnoses.
 * RENDER_TEXT_VERBOSE adds the bundle, user, host, capture and core details, every capture step
 * that did not succeed and the members table (`analyze --verbose`); RENDER_TEXT_MEMBERS_ONLY
 * prints the member table and the hang analysis alone (`analyze --members`). */
#define RENDER_TEXT_MEMBERS_ONLY 1u
#define RENDER_TEXT_VERBOSE 2u
void render_text(FILE *out, const cJSON *report, unsigned flags);

/* The diagnoses section of the text report alone (`rules match`). */
void render_text_diagnoses(FILE *out, const cJSON *report);

/* The warnings a command prints on its error stream after building a report, one line each,
 * prefixed with `prog: `: the stacks.json and exception.json warnings (json: the text report
 * shows them already, so only then), a diagnosis that could not run (diagnose_error, "" or NULL:
 * none), an incomplete core analysis (native_failed: analysis.error says why). */
void render_notes(FILE *err, const char *prog, const cJSON *report, const char *diagnose_error,
                  int native_failed, int json);

/* What `crashpack report` shows besides the report. */
struct render_md_extra {
    const cJSON *seen; /* how often the knowledge base saw the fingerprint ({count, first, last,
                        * hosts}: db/query.h kb_fingerprint_seen), NULL: no knowledge base */
    int partial;       /* the bundle or its analysis is partial */
};

/* The ticket Markdown: title and summary table, diagnoses, hang, Python exception, the crashed
 * thread, GPU state, checkpoint advice, signature (and the knowledge base's count). */
void render_markdown(FILE *out, const cJSON *report, const struct render_md_extra *x);
/* The line that says a slim bundle was attached (summary: slim_write's). */
void render_markdown_attachment(FILE *out, const char *summary);

/* A crashpack-db-show/1 document (`crashpack db show`) as text. */
void render_db_show(FILE *out, const cJSON *doc);

#endif
