/* markdown.c - a crashpack-report/1 object as paste-ready Markdown for a bug ticket (`crashpack
 * report`): title and summary table, ranked diagnoses with their evidence, the hang analysis, the
 * Python exception, the crashed thread with its Python frames, GPU state, checkpoint advice, the
 * signature and how often the knowledge base has seen it.
 *
 * Every string comes from an untrusted bundle: it is printed through mdesc.h only: Markdown text
 * and table cells with HTML, link/image, emphasis, table and line-start syntax escaped, code spans
 * and blocks fenced longer than any backtick run inside them, control characters as spaces. */
#include "render_internal.h"
#include "jobid.h"
#include "jpath.h"

#include <stdlib.h>
#include <string.h>

/* A live snapshot (crashpack snap / watch, or the exception hook's): nothing crashed, no signal */
int render_is_snapshot(const cJSON *r)
{
    const char *k = cp_jstr_ne_at(r, "process.death.kind"),
               *t = cp_jstr_ne_at(r, "process.death.trigger");
    return (k && !strcmp(k, "snapshot")) ||
           (t && (!strcmp(t, "snap") || !strcmp(t, "watch") || !strcmp(t, "hook"))) ||
           cJSON_IsTrue(cp_jpath(r, "hang.snap"));
}

/* The summary table's "Snapshot" or "Signal" row. */
static void row_signal(FILE *o, const cJSON *r)
{
    if (render_is_snapshot(r)) {
        fputs(" |\n| Snapshot | live capture, no signal", o);
        if (cp_jstr_ne_at(r, "process.death.trigger")) {
            fputs(", trigger ", o);
            render_md(o, cp_jstr_ne_at(r, "process.death.trigger"));
        }
    } else {
        fputs(" |\n| Signal | ", o);
        /* an exception, an exit: the process ended without one */
        render_md(o, cp_jstr_ne_at(r, "process.signal.name")
                         ? cp_jstr_ne_at(r, "process.signal.name")
                         : "none");
        if (cp_jstr_ne_at(r, "process.signal.code_name")) {
            fputs(" (", o);
            render_md(o, cp_jstr_ne_at(r, "process.signal.code_name"));
            fputc(')', o);
        }
    }
    if (cp_jstr_ne_at(r, "crash_kind")) {
        fputs(", kind ", o);
        render_md(o, cp_jstr_ne_at(r, "crash_kind"));
    }
    fputs(" |\n", o);
}

/* The "Death" row, for a death the manifest named other than a core or a snapshot (a core from
 * the kernel, or an older bundle's derived death: the signal row says it all). */
static void row_death(FILE *o, const cJSON *r)
{
    double v;
    const char *dk = cp_jstr_ne_at(r, "process.death.kind"),
               *dsrc = cp_jstr_ne_at(r, "process.death.source");
    if (!dk || !strcmp(dk, "core") || !strcmp(dk, "snapshot") || !dsrc || strcmp(dsrc, "manifest"))
        return;
    fputs("| Death | ", o);
    render_md(o, dk);
    if (cp_jnum_at(r, "process.death.status", &v))
        fprintf(o, ", exit status %.0f", v);
    if (cp_jstr_ne_at(r, "process.death.signal.name")) {
        fputs(", ", o);
        render_md(o, cp_jstr_ne_at(r, "process.death.signal.name"));
    }
    if (cp_jstr_ne_at(r, "process.death.trigger")) {
        fputs(", trigger ", o);
        render_md(o, cp_jstr_ne_at(r, "process.death.trigger"));
    }
    if (cp_jstr_ne_at(r, "process.death.identity")) {
        fputs(", identity ", o);
        render_md(o, cp_jstr_ne_at(r, "process.death.identity"));
    }
    fputs(" |\n", o);
}

/* The rows after the death: exception, host and time, job and rank, cause, bundle. */
static void rows_context(FILE *o, const cJSON *r)
{
    double v;
    char t[64];
    if (cp_jstr_ne_at(r, "exception.type")) {
        fputs("| Exception | ", o);
        render_md_code_cell(o, cp_jstr_ne_at(r, "exception.type"));
        fputs(" |\n", o);
    }
    render_time(cp_jnum_at(r, "host.time", &v) ? v : -1, "%Y-%m-%d %H:%M:%S UTC", "unknown time", t,
                sizeof(t));
    fputs("| Host | ", o);
    render_md(o, cp_jstr_ne_at(r, "host.hostname"));
    fprintf(o, ", %s |\n", t);
    char job[256];
    int rank, lrank;
    cp_report_job(r, job, sizeof(job), &rank, &lrank);
    if (job[0] || rank >= 0) {
        fputs("| Job | ", o);
        render_md(o, job[0] ? job : "-");
        if (rank >= 0)
            fprintf(o, ", rank %d", rank);
        if (lrank >= 0)
            fprintf(o, " (local rank %d)", lrank);
        fputs(" |\n", o);
    }
    if (cp_jstr_ne_at(r, "cause.summary")) {
        fputs("| Cause | ", o);
        render_md(o, cp_jstr_ne_at(r, "cause.summary"));
        fputs(" |\n", o);
    }
    if (cp_jstr_ne_at(r, "bundle.path")) {
        fputs("| Bundle | ", o);
        render_md(o, cp_jstr_ne_at(r, "bundle.path"));
        fputs(" |\n", o);
    }
}

/* The title, the summary table, and the top diagnosis with its first action. */
static void section_summary(FILE *o, const cJSON *r)
{
    const cJSON *top = cJSON_GetArrayItem(cp_jpath(r, "diagnoses"), 0);
    const char *exe = cp_jstr_ne_at(r, "process.exe"), *comm = cp_jstr_ne_at(r, "process.comm");
    const char *base = exe && strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe;
    double v;
    fputs("# Crash report: ", o);
    if (base || comm)
        render_md(o, base ? base : comm);
    else if (cp_jnum_at(r, "process.pid", &v))
        fprintf(o, "process %.0f", v);
    else
        fputs("unknown process", o);
    fputs(" — ", o);
    render_md(o, top ? cp_jstr_ne_at(top, "title") : "no known failure pattern matched");
    fputs("\n\n", o);
    render_md_resolution(o, cp_jkey(r, "resolution")); /* what the team found it to be, first */
    fputs("| | |\n|---|---|\n", o);
    fputs("| Process | ", o);
    if (exe || !comm) {
        render_md(o, exe);
    } else { /* an OOM kill's, a report's: the name only */
        render_md(o, comm);
        fputs(", executable unknown", o);
    }
    if (cp_jnum_at(r, "process.pid", &v))
        fprintf(o, " (pid %.0f)", v);
    row_signal(o, r);
    row_death(o, r);
    rows_context(o, r);
    fputs("\n## Summary\n\n", o);
    if (top) {
        fputs("**", o);
        render_md(o, cp_jstr_ne_at(top, "title"));
        fputs(".** ", o);
        render_md(o, cp_jstr_ne_at(top, "diagnosis"));
        fputs("\n", o);
        const cJSON *a = cJSON_GetArrayItem(cp_jpath(top, "actions"), 0);
        if (cJSON_IsString(a)) {
            fputs("\n**First action:** ", o);
            render_md(o, a->valuestring);
            fputs(".\n", o);
        }
    } else {
        fputs("No known failure pattern matched this crash; its signature is ", o);
        render_md_code(o, cp_jstr_ne_at(r, "signature") ? cp_jstr_ne_at(r, "signature") : "none");
        fputs(". The crashed thread below is the place to start.\n", o);
    }
}

static void section_diagnoses(FILE *o, const cJSON *r)
{
    const cJSON *ds = cp_jpath(r, "diagnoses"), *d, *e;
    fputs("\n## Diagnoses\n\n", o);
    if (cJSON_GetArraySize(ds) == 0) {
        fputs("None: no rule of the rule base matched (", o);
        double n;
        if (cp_jnum_at(r, "diagnosis_info.builtin_rules", &n))
            fprintf(o, "%.0f built-in rules", n);
        else
            fputs("rule base not consulted", o);
        fputs(").\n", o);
        return;
    }
    int i = 0;
    cJSON_ArrayForEach(d, ds)
    {
        double c = 0;
        cp_jnum_at(d, "confidence", &c);
        fprintf(o, "### %d. ", ++i);
        render_md(o, cp_jstr_ne_at(d, "title"));
        fprintf(o, "\n\n*confidence %.2f, rule ", c);
        render_md_code(o, cp_jstr_ne_at(d, "rule"));
        fputs(", category ", o);
        render_md_code(o, cp_jstr_ne_at(d, "category"));
        fputs("*", o);
        if (cp_jstr_ne_at(d, "consequence_of")) {
            fputs(" — likely a consequence of ", o);
            render_md_code(o, cp_jstr_ne_at(d, "consequence_of"));
        }
        fputs("\n\n", o);
        if (cp_jstr_ne_at(d, "confidence_note")) {
            double rc = 0;
            cp_jnum_at(d, "rule_confidence", &rc);
            fprintf(o, "Confidence capped (the rule says %.2f): ", rc);
            render_md(o, cp_jstr_ne_at(d, "confidence_note"));
            fputs(".\n\n", o);
        }
        if (cp_jstr_ne_at(d, "diagnosis")) {
            render_md(o, cp_jstr_ne_at(d, "diagnosis"));
            fputs("\n\n", o);
        }
        if (cJSON_GetArraySize(cp_jpath(d, "evidence"))) {
            fputs("Evidence:\n\n", o);
            cJSON_ArrayForEach(e, cp_jpath(d, "evidence"))
            {
                fputs("- ", o);
                render_md_code(o, cJSON_GetStringValue(e));
                fputc('\n', o);
            }
            fputc('\n', o);
        }
        if (cJSON_GetArraySize(cp_jpath(d, "actions"))) {
            fputs("Actions:\n\n", o);
            cJSON_ArrayForEach(e, cp_jpath(d, "actions"))
            {
                fputs("- ", o);
                render_md(o, cJSON_GetStringValue(e));
                fputc('\n', o);
            }
            fputc('\n', o);
        }
        if (i >= 6 && cJSON_GetArraySize(ds) > i) {
            fprintf(o, "(%d more in `crashpack analyze --json`.)\n", cJSON_GetArraySize(ds) - i);
            break;
        }
    }
}

static void section_checkpoint(FILE *o, const cJSON *r)
{
    fputs("\n## Checkpoint\n\n", o);
    const cJSON *ck = cp_jpath(r, "checkpoint");
    const char *path = cp_jstr_ne_at(ck, "path"), *newest = cp_jstr_ne_at(ck, "newest_valid"),
               *reason = cp_jstr_ne_at(ck, "reason");
    const cJSON *valid = cp_jpath(ck, "valid");
    if (!path) {
        fputs("No checkpoint was recorded for this process", o);
        if (reason) {
            fputs(" (", o);
            render_md(o, reason);
            fputc(')', o);
        }
        fputs(".\n", o);
        return;
    }
    fputs("Newest checkpoint: ", o);
    render_md_code(o, path);
    fputs(cJSON_IsTrue(valid)    ? " — **valid**"
          : cJSON_IsFalse(valid) ? " — **INVALID**"
                                 : " — not checked",
          o);
    if (reason) {
        fputs(" (", o);
        render_md(o, reason);
        fputc(')', o);
    }
    if (cp_jstr_ne_at(ck, "verdict_from")) {
        fputs("; verdict from ", o);
        render_md(o, cp_jstr_ne_at(ck, "verdict_from"));
    }
    fputs(".\n\n**Advice:** ", o);
    if (cJSON_IsTrue(valid)) {
        fputs("resume from ", o);
        render_md_code(o, path);
        fputs(".\n", o);
    } else if (cJSON_IsFalse(valid) && newest && strcmp(newest, path)) {
        fputs("do not resume from ", o);
        render_md_code(o, path);
        fputs("; resume from ", o);
        render_md_code(o, newest);
        fputs(", the newest valid checkpoint.\n", o);
    } else if (cJSON_IsFalse(valid)) {
        fputs("do not resume from ", o);
        render_md_code(o, path);
        fputs("; no valid checkpoint was found beside it — look for older copies before "
              "restarting.\n",
              o);
    } else {
        fputs("check the checkpoint before resuming (", o);
        char *cmd = NULL;
        render_md_code(
            o, asprintf(&cmd, "crashpack checkpoint %s", path) >= 0 ? cmd : "crashpack checkpoint");
        free(cmd);
        fputs(").\n", o);
    }
}

static void section_signature(FILE *o, const cJSON *r, const cJSON *seen)
{
    fputs("\n## Signature\n\n", o);
    const char *sig = cp_jstr_ne_at(r, "signature"), *fp = cp_jstr_ne_at(r, "fingerprint");
    fputs("Signature ", o);
    render_md_code(o, sig ? sig : "none");
    fputs(", fingerprint ", o);
    render_md_code(o, fp ? fp : "none");
    fputs(".\n\n", o);
    if (!fp || !seen) {
        fputs("The knowledge base has no record of this fingerprint", o);
        fputs(fp ? " (no knowledge base on this machine).\n" : ".\n", o);
        return;
    }
    int n = (int)cp_jnum_or(seen, "count", 0), hosts = (int)cp_jnum_or(seen, "hosts", 0);
    double first = cp_jnum_or(seen, "first", 0), last = cp_jnum_or(seen, "last", 0);
    if (n == 0) {
        fputs("The knowledge base has not seen this fingerprint before (first occurrence).\n", o);
    } else {
        char a[64], b[64];
        render_time(first, "%Y-%m-%d %H:%M:%S UTC", "unknown time", a, sizeof(a));
        render_time(last, "%Y-%m-%d %H:%M:%S UTC", "unknown time", b, sizeof(b));
        fprintf(o,
                "The knowledge base has seen this fingerprint **%d time%s** on %d host%s, first "
                "%s, last %s.\n",
                n, n == 1 ? "" : "s", hosts, hosts == 1 ? "" : "s", a, b);
    }
}

void render_markdown(FILE *o, const cJSON *r, const struct render_md_extra *x)
{
    section_summary(o, r);
    section_diagnoses(o, r);
    render_md_similar(o, r);
    render_md_hang(o, r);
    render_md_exception(o, r);
    render_md_thread(o, r);
    render_md_gpu(o, r);
    section_checkpoint(o, r);
    section_signature(o, r, x ? x->seen : NULL);
    if (x && x->partial)
        fputs("\n*The bundle or its analysis is partial; what could be read is shown.*\n", o);
}

void render_markdown_attachment(FILE *o, const char *summary)
{
    fputs("\n*Attached: a slim bundle (", o);
    render_md(o, summary);
    fputs(").*\n", o);
}
