/* cmd_report.c - `crashpack report BUNDLE`: paste-ready Markdown for a bug ticket, from the same
 * report `crashpack analyze --json` prints, built in-process by the report library (report.h):
 * summary, ranked diagnoses with their evidence, the crashed thread with its Python frames, GPU
 * state, checkpoint advice, the signature and how often the knowledge base has seen it. `--slim OUT` also writes a small bundle to attach (slim.c).
 *
 * Every string comes from an untrusted bundle: it is printed through mdesc.h only: Markdown text
 * and table cells with HTML, link/image, emphasis, table and line-start syntax escaped, code spans
 * and blocks fenced longer than any backtick run inside them, control characters as spaces. */
#include "jpath.h"
#include "query.h"
#include "cmdopt.h"
#include "commands.h"
#include "kb.h"
#include "report.h"
#include "rule.h"
#include "mdesc.h"
#include "utf8.h"

#include <cjson/cJSON.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int slim_write(const char *bundle, const char *out, char *err, size_t errlen, char *summary,
               size_t sumlen);

static void usage(FILE *out)
{
    fprintf(out,
            "usage: crashpack report BUNDLE [--db PATH] [-o FILE] [--slim OUT]\n"
            "       crashpack report --from-json REPORT.json [--db PATH] [-o FILE]\n"
            "\n"
            "Prints ticket-ready Markdown: summary, diagnoses with evidence and actions, the crashed\n"
            "thread (and its Python frames), GPU state, checkpoint advice, the crash signature and\n"
            "how many times the knowledge base (--db, default as in `crashpack db`) has seen it.\n"
            "\n"
            "  -o, --output F   write the Markdown to FILE instead of stdout\n"
            "  --slim OUT       also write a small bundle to attach: manifest, evidence members,\n"
            "                   stacks.json, and a slim core (ELF headers, notes, each thread's stack,\n"
            "                   the first page of each mapped file); the environment stays redacted\n"
            "  --from-json F    render a saved report (crashpack analyze --json) instead of a bundle\n"
            "  -h, --help       this text\n"
            "\n"
            "Exit status: 0 done, 1 partial, 2 usage error, 3 no such file.\n");
}

/* Untrusted text in Markdown prose or a table cell, and in a code span (mdesc.h: one escape for
 * every Markdown writer). */
static void md(FILE *o, const char *s)
{
    cp_md_text(o, s, "-");
}

static void code(FILE *o, const char *s)
{
    cp_md_code(o, s);
}

/* A fenced code block's lines, kept until the block is written: the fence must be longer than any
 * backtick run in them (cp_md_fence_len), so a line of the bundle's cannot close it. */
#define BLOCK_MAX 32
struct block {
    char *v[BLOCK_MAX];
    int n;
};

static void block_add(struct block *b, const char *s)
{
    if (b->n < BLOCK_MAX && (b->v[b->n] = strdup(s ? s : "")))
        b->n++;
}

static void block_write(FILE *o, struct block *b)
{
    int fence = cp_md_fence_len((const char *const *)b->v, b->n);
    for (int i = 0; i < fence; i++)
        fputc('`', o);
    fputc('\n', o);
    for (int i = 0; i < b->n; i++) {
        cp_md_block_line(o, b->v[i]);
        fputc('\n', o);
        free(b->v[i]);
    }
    b->n = 0;
    for (int i = 0; i < fence; i++)
        fputc('`', o);
    fputc('\n', o);
}

static void fmt_time(double t, char *buf, size_t len)
{
    time_t tt = (time_t)t;
    struct tm tm;
    if (t <= 0 || !gmtime_r(&tt, &tm) || !strftime(buf, len, "%Y-%m-%d %H:%M:%S UTC", &tm))
        snprintf(buf, len, "unknown time");
}

/* A live snapshot (crashpack snap / watch): nothing crashed, no signal */
static int is_snapshot(const cJSON *r)
{
    const char *k = cp_jstr_ne_at(r, "process.death.kind"), *t = cp_jstr_ne_at(r, "process.death.trigger");
    return (k && !strcmp(k, "snapshot")) || (t && (!strcmp(t, "snap") || !strcmp(t, "watch"))) ||
           cJSON_IsTrue(cp_jpath(r, "hang.snap"));
}

static const cJSON *crashed_thread(const cJSON *r)
{
    double ctid = -1;
    cp_jnum_at(r, "process.crashed_tid", &ctid);
    const cJSON *t;
    cJSON_ArrayForEach(t, cp_jpath(r, "threads")) if (cJSON_IsTrue(cp_jpath(t, "crashed"))) return t;
    /* a snapshot's only named thread is an exception's raising one (crashed_tid_source) */
    const char *src = cp_jstr_ne_at(r, "process.crashed_tid_source");
    if (is_snapshot(r) && !(src && !strcmp(src, "exception")))
        return NULL;
    cJSON_ArrayForEach(t, cp_jpath(r, "threads"))
    {
        double tid;
        if (cp_jnum_at(t, "tid", &tid) && tid == ctid)
            return t;
    }
    return NULL;
}

static void section_summary(FILE *o, const cJSON *r)
{
    const cJSON *top = cJSON_GetArrayItem(cp_jpath(r, "diagnoses"), 0);
    const char *exe = cp_jstr_ne_at(r, "process.exe");
    const char *base = exe && strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe;
    fputs("# Crash report: ", o);
    md(o, base ? base : cp_jstr_ne_at(r, "process.comm"));
    fputs(" — ", o);
    md(o, top ? cp_jstr_ne_at(top, "title") : "no known failure pattern matched");
    fputs("\n\n", o);
    double v;
    char t[64];
    fmt_time(cp_jnum_at(r, "host.time", &v) ? v : -1, t, sizeof(t));
    fputs("| | |\n|---|---|\n", o);
    fputs("| Process | ", o);
    md(o, exe);
    if (cp_jnum_at(r, "process.pid", &v))
        fprintf(o, " (pid %.0f)", v);
    if (is_snapshot(r)) {
        fputs(" |\n| Snapshot | live capture, no signal", o);
        if (cp_jstr_ne_at(r, "process.death.trigger")) {
            fputs(", trigger ", o);
            md(o, cp_jstr_ne_at(r, "process.death.trigger"));
        }
        if (cp_jstr_ne_at(r, "crash_kind")) {
            fputs(", kind ", o);
            md(o, cp_jstr_ne_at(r, "crash_kind"));
        }
        fputs(" |\n", o);
    } else {
    fputs(" |\n| Signal | ", o);
    md(o, cp_jstr_ne_at(r, "process.signal.name"));
    if (cp_jstr_ne_at(r, "process.signal.code_name")) {
        fputs(" (", o);
        md(o, cp_jstr_ne_at(r, "process.signal.code_name"));
        fputc(')', o);
    }
    if (cp_jstr_ne_at(r, "crash_kind")) {
        fputs(", kind ", o);
        md(o, cp_jstr_ne_at(r, "crash_kind"));
    }
    fputs(" |\n", o);
    }
    const char *dk = cp_jstr_ne_at(r, "process.death.kind"), *dsrc = cp_jstr_ne_at(r, "process.death.source");
    /* a core from the kernel, or an older bundle's derived death: the signal row says it all */
    if (dk && strcmp(dk, "core") && strcmp(dk, "snapshot") && dsrc && !strcmp(dsrc, "manifest")) {
        fputs("| Death | ", o);
        md(o, dk);
        if (cp_jnum_at(r, "process.death.status", &v))
            fprintf(o, ", exit status %.0f", v);
        if (cp_jstr_ne_at(r, "process.death.signal.name")) {
            fputs(", ", o);
            md(o, cp_jstr_ne_at(r, "process.death.signal.name"));
        }
        if (cp_jstr_ne_at(r, "process.death.trigger")) {
            fputs(", trigger ", o);
            md(o, cp_jstr_ne_at(r, "process.death.trigger"));
        }
        if (cp_jstr_ne_at(r, "process.death.identity")) {
            fputs(", identity ", o);
            md(o, cp_jstr_ne_at(r, "process.death.identity"));
        }
        fputs(" |\n", o);
    }
    if (cp_jstr_ne_at(r, "exception.type")) {
        fputs("| Exception | ", o);
        code(o, cp_jstr_ne_at(r, "exception.type"));
        fputs(" |\n", o);
    }
    fputs("| Host | ", o);
    md(o, cp_jstr_ne_at(r, "host.hostname"));
    fprintf(o, ", %s |\n", t);
    char job[256];
    int rank, lrank;
    kb_job_of(r, job, sizeof(job), &rank, &lrank);
    if (job[0] || rank >= 0) {
        fputs("| Job | ", o);
        md(o, job[0] ? job : "-");
        if (rank >= 0)
            fprintf(o, ", rank %d", rank);
        if (lrank >= 0)
            fprintf(o, " (local rank %d)", lrank);
        fputs(" |\n", o);
    }
    if (cp_jstr_ne_at(r, "cause.summary")) {
        fputs("| Cause | ", o);
        md(o, cp_jstr_ne_at(r, "cause.summary"));
        fputs(" |\n", o);
    }
    if (cp_jstr_ne_at(r, "bundle.path")) {
        fputs("| Bundle | ", o);
        md(o, cp_jstr_ne_at(r, "bundle.path"));
        fputs(" |\n", o);
    }
    fputs("\n## Summary\n\n", o);
    if (top) {
        fputs("**", o);
        md(o, cp_jstr_ne_at(top, "title"));
        fputs(".** ", o);
        md(o, cp_jstr_ne_at(top, "diagnosis"));
        fputs("\n", o);
        const cJSON *a = cJSON_GetArrayItem(cp_jpath(top, "actions"), 0);
        if (cJSON_IsString(a)) {
            fputs("\n**First action:** ", o);
            md(o, a->valuestring);
            fputs(".\n", o);
        }
    } else {
        fputs("No known failure pattern matched this crash; its signature is ", o);
        code(o, cp_jstr_ne_at(r, "signature") ? cp_jstr_ne_at(r, "signature") : "none");
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
        md(o, cp_jstr_ne_at(d, "title"));
        fprintf(o, "\n\n*confidence %.2f, rule ", c);
        code(o, cp_jstr_ne_at(d, "rule"));
        fputs(", category ", o);
        code(o, cp_jstr_ne_at(d, "category"));
        fputs("*", o);
        if (cp_jstr_ne_at(d, "consequence_of")) {
            fputs(" — likely a consequence of ", o);
            code(o, cp_jstr_ne_at(d, "consequence_of"));
        }
        fputs("\n\n", o);
        if (cp_jstr_ne_at(d, "confidence_note")) {
            double rc = 0;
            cp_jnum_at(d, "rule_confidence", &rc);
            fprintf(o, "Confidence capped (the rule says %.2f): ", rc);
            md(o, cp_jstr_ne_at(d, "confidence_note"));
            fputs(".\n\n", o);
        }
        if (cp_jstr_ne_at(d, "diagnosis")) {
            md(o, cp_jstr_ne_at(d, "diagnosis"));
            fputs("\n\n", o);
        }
        if (cJSON_GetArraySize(cp_jpath(d, "evidence"))) {
            fputs("Evidence:\n\n", o);
            cJSON_ArrayForEach(e, cp_jpath(d, "evidence"))
            {
                fputs("- ", o);
                code(o, cJSON_GetStringValue(e));
                fputc('\n', o);
            }
            fputc('\n', o);
        }
        if (cJSON_GetArraySize(cp_jpath(d, "actions"))) {
            fputs("Actions:\n\n", o);
            cJSON_ArrayForEach(e, cp_jpath(d, "actions"))
            {
                fputs("- ", o);
                md(o, cJSON_GetStringValue(e));
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

/* One exception of the chain as Python prints it: the traceback, then "Type: message". */
static void exc_block(FILE *o, const cJSON *e)
{
    struct block b = {.n = 0};
    const cJSON *fr = cp_jpath(e, "frames"), *f;
    int n = cJSON_GetArraySize(fr), i = 0;
    if (n > 0)
        block_add(&b, "Traceback (most recent call last):");
    cJSON_ArrayForEach(f, fr)
    {
        /* the innermost frames, with room for the message's lines */
        if (n > BLOCK_MAX - 8 && i++ < n - (BLOCK_MAX - 8)) {
            if (i == 1) {
                char more[64];
                snprintf(more, sizeof(more), "  ... %d outer frames", n - (BLOCK_MAX - 8));
                block_add(&b, more);
            }
            continue;
        }
        char line[1200];
        double ln = 0;
        int have_ln = cp_jnum_at(f, "line", &ln);
        const char *fn = cp_jstr_ne_at(f, "qualname") ? cp_jstr_ne_at(f, "qualname") : cp_jstr_ne_at(f, "function");
        snprintf(line, sizeof(line), "  File \"%.512s\", line %.0f, in %.512s",
                 cp_jstr_ne_at(f, "file") ? cp_jstr_ne_at(f, "file") : "?", have_ln ? ln : 0,
                 fn ? fn : "?");
        block_add(&b, line);
    }
    const char *type = cp_jstr_ne_at(e, "type"), *msg = cp_jstr_ne_at(e, "message");
    char head[1200];
    const char *nl = msg ? strchr(msg, '\n') : NULL;
    snprintf(head, sizeof(head), "%.512s%s%.*s", type ? type : "?", msg ? ": " : "",
             msg ? (int)(nl ? nl - msg : (long)strlen(msg)) : 0, msg ? msg : "");
    block_add(&b, head);
    for (int k = 0; nl && k < 6 && b.n < BLOCK_MAX; k++) { /* a few more lines of the message */
        const char *s = nl + 1;
        nl = strchr(s, '\n');
        char line[1200];
        snprintf(line, sizeof(line), "%.*s", (int)(nl ? nl - s : (long)strlen(s)), s);
        block_add(&b, line);
    }
    block_write(o, &b);
}

/* The Python exception of exception.json (issue 13): type, message, the chain in Python's order
 * (the first cause first), the worker's original traceback, the non-fatal events. */
static void section_exception(FILE *o, const cJSON *r)
{
    const cJSON *x = cp_jpath(r, "exception");
    if (cp_jstr_ne_at(r, "exception_error")) {
        fputs("\n## Python exception\n\nThe bundle's exception record is unusable: ", o);
        md(o, cp_jstr_ne_at(r, "exception_error"));
        fputs(".\n", o);
    }
    if (!cJSON_IsObject(x))
        return;
    if (!cp_jstr_ne_at(r, "exception_error"))
        fputs("\n## Python exception\n\n", o);
    fputs("Uncaught ", o);
    code(o, cp_jstr_ne_at(x, "type"));
    double v;
    if (cp_jnum_at(x, "thread.native_id", &v))
        fprintf(o, " in thread %.0f", v);
    if (cp_jstr_ne_at(x, "thread.name")) {
        fputs(" ", o);
        code(o, cp_jstr_ne_at(x, "thread.name"));
    }
    if (cp_jstr_ne_at(x, "hook")) {
        fputs(", seen by ", o);
        code(o, cp_jstr_ne_at(x, "hook"));
    }
    fputs(".", o);
    if (cJSON_GetArraySize(cp_jpath(x, "mro")) > 1) {
        fputs(" Classes: ", o);
        const cJSON *m;
        int first = 1;
        cJSON_ArrayForEach(m, cp_jpath(x, "mro"))
        {
            if (!first)
                fputs(", ", o);
            first = 0;
            code(o, cJSON_GetStringValue(m));
        }
        fputs(".", o);
    }
    if (cJSON_IsTrue(cp_jpath(x, "abandoned")))
        fputs(" The live snapshot of the process was abandoned (past its time limit).", o);
    fputs("\n\n", o);
    /* Python's order: the innermost cause first, then "The above exception was ..." */
    const cJSON *chain = cp_jpath(x, "chain");
    int n = cJSON_GetArraySize(chain);
    for (int i = n - 1; i >= 0; i--) {
        const cJSON *e = cJSON_GetArrayItem(chain, i);
        exc_block(o, e);
        const char *rel = cp_jstr_ne_at(e, "relation");
        if (i > 0)
            fputs(rel && !strcmp(rel, "cause")
                      ? "\nThe above exception was the direct cause of the following exception:\n\n"
                      : "\nDuring handling of the above exception, another exception occurred:\n\n",
                  o);
    }
    if (cJSON_IsTrue(cp_jpath(x, "chain_truncated")))
        fputs("\n*(The chain was cut: only its first exceptions are kept.)*\n", o);
    const cJSON *e;
    cJSON_ArrayForEach(e, chain)
    {
        const cJSON *w = cp_jpath(e, "worker");
        if (!cJSON_IsObject(w))
            continue;
        fputs("\nRaised in a ", o);
        md(o, cp_jstr_ne_at(w, "kind"));
        fputs(" worker", o);
        if (cp_jnum_at(w, "id", &v))
            fprintf(o, " %.0f", v);
        if (cp_jnum_at(w, "pid", &v))
            fprintf(o, " (pid %.0f)", v);
        if (cp_jstr_ne_at(w, "original_type")) {
            fputs(" as ", o);
            code(o, cp_jstr_ne_at(w, "original_type"));
        }
        fputs(". Its original traceback:\n\n", o);
        struct block b = {.n = 0};
        const char *tb = cp_jstr_ne_at(w, "original_traceback");
        while (tb && *tb && b.n < BLOCK_MAX) {
            const char *nl = strchr(tb, '\n');
            char line[1200];
            snprintf(line, sizeof(line), "%.*s", (int)(nl ? nl - tb : (long)strlen(tb)), tb);
            block_add(&b, line);
            tb = nl ? nl + 1 : NULL;
        }
        if (b.n == 0)
            block_add(&b, "(not recorded)");
        block_write(o, &b);
        break;
    }
    int i = 0;
    cJSON_ArrayForEach(e, cp_jpath(x, "events"))
    {
        if (i++ == 0)
            fputs("\nNon-fatal events before the death:\n\n", o);
        if (i > 10) {
            fprintf(o, "- (%d more)\n", cJSON_GetArraySize(cp_jpath(x, "events")) - 10);
            break;
        }
        fputs("- ", o);
        code(o, cp_jstr_ne_at(e, "hook"));
        if (cp_jnum_at(e, "thread.native_id", &v))
            fprintf(o, " in thread %.0f", v);
        fputs(": ", o);
        code(o, cp_jstr_ne_at(e, "type"));
        if (cp_jstr_ne_at(e, "message")) {
            fputs(" ", o);
            md(o, cp_jstr_ne_at(e, "message"));
        }
        fputc('\n', o);
    }
}

static void section_thread(FILE *o, const cJSON *r)
{
    const cJSON *t = crashed_thread(r), *f;
    if (is_snapshot(r) && !t) {
        fputs("\n## Threads\n\nA live snapshot: no thread crashed (", o);
        fprintf(o, "%d threads; the hang analysis above says what each waits for).\n",
                cJSON_GetArraySize(cp_jpath(r, "threads")));
        return;
    }
    fputs(is_snapshot(r) ? "\n## Raising thread\n\n" : "\n## Crashed thread\n\n", o);
    if (!t) {
        fputs("No thread information (", o);
        md(o,
           cp_jstr_ne_at(r, "analysis.error") ? cp_jstr_ne_at(r, "analysis.error")
                                              : "no core analysis in this report");
        fputs(").\n", o);
        return;
    }
    double tid = 0;
    cp_jnum_at(t, "tid", &tid);
    fprintf(o, "Thread %.0f", tid);
    if (cp_jstr_ne_at(t, "name")) {
        fputs(" ", o);
        code(o, cp_jstr_ne_at(t, "name"));
    }
    if (cp_jstr_ne_at(r, "cause.abort_message")) {
        fputs(", abort message ", o);
        code(o, cp_jstr_ne_at(r, "cause.abort_message"));
    }
    if (cp_jpath(r, "cause.exception") && cp_jstr_ne_at(r, "cause.exception.type")) {
        fputs(", uncaught ", o);
        code(o, cp_jstr_ne_at(r, "cause.exception.type"));
        if (cp_jstr_ne_at(r, "cause.exception.what")) {
            fputs(": ", o);
            code(o, cp_jstr_ne_at(r, "cause.exception.what"));
        }
    }
    fputs(":\n\n", o);
    struct block b = {.n = 0};
    int i = 0;
    cJSON_ArrayForEach(f, cp_jpath(t, "frames"))
    {
        if (i >= 24) {
            char more[64];
            snprintf(more, sizeof(more), "... %d more frames", cJSON_GetArraySize(cp_jpath(t, "frames")) - i);
            block_add(&b, more);
            break;
        }
        char line[1024];
        double ln = 0;
        const char *file = cp_jstr_ne_at(f, "file"), *mod = cp_jstr_ne_at(f, "module");
        const char *mb = mod && strrchr(mod, '/') ? strrchr(mod, '/') + 1 : mod;
        int n = snprintf(line, sizeof(line), "#%-2d %s %s", i,
                         cp_jstr_ne_at(f, "pc") ? cp_jstr_ne_at(f, "pc") : "",
                         cp_jstr_ne_at(f, "function") ? cp_jstr_ne_at(f, "function") : "??");
        if (file && cp_jnum_at(f, "line", &ln) && n > 0 && (size_t)n < sizeof(line))
            n += snprintf(line + n, sizeof(line) - (size_t)n, " at %s:%.0f", file, ln);
        if (mb && n > 0 && (size_t)n < sizeof(line))
            snprintf(line + n, sizeof(line) - (size_t)n, " (%s)", mb);
        block_add(&b, line);
        i++;
    }
    if (i == 0)
        block_add(&b, "(no frames)");
    block_write(o, &b);
    const cJSON *py = cp_jpath(t, "python_frames");
    if (cJSON_GetArraySize(py) > 0) {
        fputs("\nPython frames (innermost first):\n\n", o);
        i = 0;
        cJSON_ArrayForEach(f, py)
        {
            if (i++ >= 24)
                break;
            char line[1024];
            double ln = 0;
            cp_jnum_at(f, "line", &ln);
            snprintf(line, sizeof(line), "  File \"%s\", line %.0f, in %s",
                     cp_jstr_ne_at(f, "file") ? cp_jstr_ne_at(f, "file") : "?", ln,
                     cp_jstr_ne_at(f, "function") ? cp_jstr_ne_at(f, "function") : "?");
            block_add(&b, line);
        }
        block_write(o, &b);
    }
}

/* The hang analysis as `analyze` prints it: each deadlock's waits-for cycle (thread, the mutex it
 * waits for, its owner, what it holds), then every thread's blocking state. */
static void section_hang(FILE *o, const cJSON *r)
{
    const cJSON *h = cp_jpath(r, "hang"), *d, *t, *m;
    const cJSON *dl = cp_jpath(h, "deadlocks");
    int snap = cJSON_IsTrue(cp_jpath(h, "snap"));
    if (!cJSON_IsObject(h) || (!snap && cJSON_GetArraySize(dl) == 0))
        return;
    fputs("\n## Hang analysis\n\n", o);
    fputs(snap ? "From a live capture" : "From the core", o);
    if (cp_jstr_ne_at(h, "reason")) {
        fputs(" (reason: ", o);
        md(o, cp_jstr_ne_at(h, "reason"));
        fputc(')', o);
    }
    fputs(".\n", o);
    int i = 0;
    cJSON_ArrayForEach(d, dl)
    {
        fprintf(o, "\n**Deadlock %d:** ", ++i);
        md(o, cp_jstr_ne_at(d, "summary"));
        fputs("\n\n| thread | waits for | held by | holds | blocked in |\n|---|---|---|---|---|\n", o);
        cJSON_ArrayForEach(t, cp_jpath(d, "threads"))
        {
            double tid = 0, ow = 0;
            cp_jnum_at(t, "tid", &tid);
            fprintf(o, "| %.0f", tid);
            if (cp_jstr_ne_at(t, "name")) {
                fputc(' ', o);
                code(o, cp_jstr_ne_at(t, "name"));
            }
            fputs(" | ", o);
            code(o, cp_jstr_ne_at(t, "waits_for_mutex_symbol") ? cp_jstr_ne_at(t, "waits_for_mutex_symbol")
                                                               : cp_jstr_ne_at(t, "waits_for_mutex"));
            if (cp_jstr_ne_at(t, "waits_for_mutex_symbol") && cp_jstr_ne_at(t, "waits_for_mutex")) {
                fputs(" (", o);
                md(o, cp_jstr_ne_at(t, "waits_for_mutex"));
                fputc(')', o);
            }
            fputs(" | ", o);
            if (cp_jnum_at(t, "owner_tid", &ow))
                fprintf(o, "thread %.0f", ow);
            fputs(" | ", o);
            int first = 1;
            cJSON_ArrayForEach(m, cp_jpath(t, "holds"))
            {
                if (!first)
                    fputs(", ", o);
                first = 0;
                code(o, cp_jstr_ne_at(m, "symbol") ? cp_jstr_ne_at(m, "symbol") : cp_jstr_ne_at(m, "mutex"));
            }
            fputs(" | ", o);
            code(o, cp_jstr_ne_at(t, "blocked_in"));
            fputs(" |\n", o);
        }
    }
    int n = 0;
    cJSON_ArrayForEach(t, cp_jpath(r, "threads")) if (cJSON_IsObject(cp_jpath(t, "hang_state"))) n++;
    if (!n)
        return;
    fputs("\nThread states:\n\n| thread | name | state | detail |\n|---|---|---|---|\n", o);
    i = 0;
    cJSON_ArrayForEach(t, cp_jpath(r, "threads"))
    {
        const cJSON *hs = cp_jpath(t, "hang_state");
        if (!cJSON_IsObject(hs))
            continue;
        if (i++ >= 64) {
            fprintf(o, "\n(%d more in `crashpack analyze --json`.)\n", n - 64);
            break;
        }
        double tid = 0;
        cp_jnum_at(t, "tid", &tid);
        fprintf(o, "| %.0f | ", tid);
        md(o, cp_jstr_ne_at(t, "name"));
        fputs(" | ", o);
        md(o, cp_jstr_ne_at(hs, "state"));
        fputs(" | ", o);
        md(o, cp_jstr_ne_at(hs, "detail"));
        if (cp_jstr_ne_at(hs, "mutex")) {
            fputs(" [", o);
            md(o, cp_jstr_ne_at(hs, "mutex_symbol") ? cp_jstr_ne_at(hs, "mutex_symbol") : cp_jstr_ne_at(hs, "mutex"));
            double ow;
            if (cp_jnum_at(hs, "mutex_owner", &ow))
                fprintf(o, ", owner %.0f", ow);
            fputc(']', o);
        }
        fputs(" |\n", o);
    }
}

static void section_gpu(FILE *o, const cJSON *r)
{
    fputs("\n## GPU state\n\n", o);
    const cJSON *x = cp_jpath(r, "gpu.xid"), *e;
    if (cJSON_GetArraySize(x) > 0) {
        fputs("| time | Xid | PCI | this process's GPU | meaning | blame | action |\n"
              "|---|---|---|---|---|---|---|\n", o);
        int i = 0;
        cJSON_ArrayForEach(e, x)
        {
            if (i++ >= 20)
                break;
            double c = 0;
            cp_jnum_at(e, "code", &c);
            fputs("| ", o);
            md(o, cp_jstr_ne_at(e, "time_utc"));
            fprintf(o, " | %.0f | ", c);
            md(o, cp_jstr_ne_at(e, "pci"));
            fprintf(o, " | %s | ", cJSON_IsTrue(cp_jpath(e, "own_gpu")) ? "yes" : cJSON_IsFalse(cp_jpath(e, "own_gpu")) ? "no" : "?");
            md(o, cp_jstr_ne_at(e, "meaning"));
            fputs(" | ", o);
            md(o, cp_jstr_ne_at(e, "blame"));
            fputs(" | ", o);
            md(o, cp_jstr_ne_at(e, "action"));
            fputs(" |\n", o);
        }
        fputs("\nXid lines:\n\n", o);
        struct block b = {.n = 0};
        i = 0;
        cJSON_ArrayForEach(e, x)
        {
            if (i++ >= 20)
                break;
            block_add(&b, cp_jstr_ne_at(e, "text"));
        }
        block_write(o, &b);
        fputc('\n', o);
    } else {
        fputs("No Xid in the kernel log captured with the crash.\n\n", o);
    }
    const cJSON *hc = cp_jpath(r, "gpu.host_context");
    if (cJSON_GetArraySize(hc) > 0) {
        fputs("Other GPUs of this host (context, not this process's cause): ", o);
        int k = 0;
        cJSON_ArrayForEach(e, hc)
        {
            if (k++ >= 10)
                break;
            if (k > 1)
                fputs("; ", o);
            md(o, cp_jstr_ne_at(e, "summary"));
        }
        fputs(".\n\n", o);
    }
    const char *pg = cp_jstr_ne_at(r, "gpu.scope.process_gpus");
    if (pg && strcmp(pg, "known")) {
        fputs(!strcmp(pg, "none") ? "This process used no GPU: " : "This process's GPUs are unknown: ", o);
        md(o, cp_jstr_ne_at(r, "gpu.scope.reason"));
        fputs(".\n\n", o);
    }
    cJSON_ArrayForEach(e, cp_jpath(r, "gpu.nvidia_smi_queries"))
    {
        fputs("- nvidia-smi -i ", o);
        code(o, cp_jstr_ne_at(e, "pci"));
        fputs(": ", o);
        md(o, cp_jstr_ne_at(e, "status"));
        if (cp_jstr_ne_at(e, "reason")) {
            fputs(" (", o);
            md(o, cp_jstr_ne_at(e, "reason"));
            fputc(')', o);
        }
        fputc('\n', o);
    }
    if (cJSON_GetArraySize(cp_jpath(r, "gpu.nvidia_smi_queries")) > 0)
        fputc('\n', o);
    const cJSON *smi = cp_jpath(r, "gpu.nvidia_smi");
    if (cJSON_IsObject(smi)) {
        fputs("nvidia-smi at capture (driver ", o);
        md(o, cp_jstr_ne_at(smi, "driver_version"));
        fputs(", CUDA ", o);
        md(o, cp_jstr_ne_at(smi, "cuda_version"));
        fputs("):\n\n| GPU | PCI | own | memory used | ECC DBE (volatile/aggregate) | remap pending/failure | temp | power | throttle |\n"
              "|---|---|---|---|---|---|---|---|---|\n", o);
        cJSON_ArrayForEach(e, cp_jpath(smi, "gpus"))
        {
            double idx = -1, mu = -1, mt = -1, pct = -1, vd = -1, ad = -1, tc = -1, pw = -1;
            cp_jnum_at(e, "index", &idx);
            cp_jnum_at(e, "memory_used_mib", &mu);
            cp_jnum_at(e, "memory_total_mib", &mt);
            cp_jnum_at(e, "memory_used_pct", &pct);
            cp_jnum_at(e, "ecc.volatile_dbe", &vd);
            cp_jnum_at(e, "ecc.aggregate_dbe", &ad);
            cp_jnum_at(e, "temperature_c", &tc);
            cp_jnum_at(e, "power_w", &pw);
            fprintf(o, "| %.0f | ", idx);
            md(o, cp_jstr_ne_at(e, "pci"));
            fprintf(o, " | %s | ", cJSON_IsTrue(cp_jpath(e, "own")) ? "yes" : "");
            if (mu >= 0 && mt > 0)
                fprintf(o, "%.0f / %.0f MiB (%.0f%%)", mu, mt, pct >= 0 ? pct : mu * 100 / mt);
            else
                fputs("?", o);
            fputs(" | ", o);
            if (vd >= 0)
                fprintf(o, "%.0f", vd);
            else
                fputc('?', o);
            fputc('/', o);
            if (ad >= 0)
                fprintf(o, "%.0f", ad);
            else
                fputc('?', o);
            fputs(" | ", o);
            fprintf(o, "%s%s | ", cJSON_IsTrue(cp_jpath(e, "remapped_rows.pending")) ? "PENDING" : "no",
                    cJSON_IsTrue(cp_jpath(e, "remapped_rows.failure")) ? ", FAILURE" : "");
            if (tc >= 0)
                fprintf(o, "%.0f C", tc);
            fputs(" | ", o);
            if (pw >= 0)
                fprintf(o, "%.0f W", pw);
            fputs(" | ", o);
            const cJSON *th;
            int first = 1;
            cJSON_ArrayForEach(th, cp_jpath(e, "throttle_reasons"))
            {
                if (!first)
                    fputs(", ", o);
                first = 0;
                md(o, cJSON_GetStringValue(th));
            }
            fputs(" |\n", o);
        }
    } else {
        fputs("nvidia-smi: ", o);
        md(o,
           cp_jstr_ne_at(r, "gpu.nvidia_smi_error") ? cp_jstr_ne_at(r, "gpu.nvidia_smi_error")
                                                    : "not captured");
        fputs(".\n", o);
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
            md(o, reason);
            fputc(')', o);
        }
        fputs(".\n", o);
        return;
    }
    fputs("Newest checkpoint: ", o);
    code(o, path);
    fputs(cJSON_IsTrue(valid) ? " — **valid**" : cJSON_IsFalse(valid) ? " — **INVALID**" : " — not checked", o);
    if (reason) {
        fputs(" (", o);
        md(o, reason);
        fputc(')', o);
    }
    if (cp_jstr_ne_at(ck, "verdict_from")) {
        fputs("; verdict from ", o);
        md(o, cp_jstr_ne_at(ck, "verdict_from"));
    }
    fputs(".\n\n**Advice:** ", o);
    if (cJSON_IsTrue(valid)) {
        fputs("resume from ", o);
        code(o, path);
        fputs(".\n", o);
    } else if (cJSON_IsFalse(valid) && newest && strcmp(newest, path)) {
        fputs("do not resume from ", o);
        code(o, path);
        fputs("; resume from ", o);
        code(o, newest);
        fputs(", the newest valid checkpoint.\n", o);
    } else if (cJSON_IsFalse(valid)) {
        fputs("do not resume from ", o);
        code(o, path);
        fputs("; no valid checkpoint was found beside it — look for older copies before restarting.\n", o);
    } else {
        fputs("check the checkpoint before resuming (", o);
        char *cmd = NULL;
        code(o, asprintf(&cmd, "crashpack checkpoint %s", path) >= 0 ? cmd : "crashpack checkpoint");
        free(cmd);
        fputs(").\n", o);
    }
}

static void section_signature(FILE *o, const cJSON *r, const char *dbpath)
{
    fputs("\n## Signature\n\n", o);
    const char *sig = cp_jstr_ne_at(r, "signature"), *fp = cp_jstr_ne_at(r, "fingerprint");
    fputs("Signature ", o);
    code(o, sig ? sig : "none");
    fputs(", fingerprint ", o);
    code(o, fp ? fp : "none");
    fputs(".\n\n", o);
    cJSON *seen = fp ? kb_fingerprint_seen(dbpath, fp) : NULL;
    if (!seen) {
        fputs("The knowledge base has no record of this fingerprint", o);
        fputs(fp ? " (no knowledge base on this machine).\n" : ".\n", o);
        return;
    }
    int n = (int)cp_jnum_or(seen, "count", 0), hosts = (int)cp_jnum_or(seen, "hosts", 0);
    double first = cp_jnum_or(seen, "first", 0), last = cp_jnum_or(seen, "last", 0);
    cJSON_Delete(seen);
    if (n == 0) {
        fputs("The knowledge base has not seen this fingerprint before (first occurrence).\n", o);
    } else {
        char a[64], b[64];
        fmt_time(first, a, sizeof(a));
        fmt_time(last, b, sizeof(b));
        fprintf(o, "The knowledge base has seen this fingerprint **%d time%s** on %d host%s, first %s, last %s.\n",
                n, n == 1 ? "" : "s", hosts, hosts == 1 ? "" : "s", a, b);
    }
}

static cJSON *read_report_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t cap = 1 << 20, len = 0, n;
    char *buf = malloc(cap);
    while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (len + 1 >= cap) {
            char *nb = cap < (512u << 20) ? realloc(buf, cap * 2) : NULL;
            if (!nb)
                break;
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    cJSON *j = buf ? cJSON_ParseWithLength(buf, len) : NULL;
    free(buf);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

int cmd_report(int argc, char **argv)
{
    const char *bundle = NULL, *db = NULL, *out = NULL, *slim = NULL, *from = NULL;
    enum { O_DB = 256, O_SLIM, O_FROM };
    static const struct option longs[] = {
        {"db", required_argument, 0, O_DB}, {"output", required_argument, 0, 'o'},
        {"slim", required_argument, 0, O_SLIM}, {"from-json", required_argument, 0, O_FROM},
        CP_OPT_HELP, CP_OPT_END};
    struct cp_opts p = {.verb = "crashpack report", .shorts = "o:", .longs = longs, .argc = argc, .argv = argv};
    int c;
    while ((c = cp_getopt(&p)) != -1) {
        switch (c) {
        case 'h':
            usage(stdout);
            return CP_EXIT_OK;
        case O_DB: db = optarg; break;
        case 'o': out = optarg; break;
        case O_SLIM: slim = optarg; break;
        case O_FROM: from = optarg; break;
        default:
            return CP_EXIT_USAGE;
        }
    }
    if (cp_opt_args(&p, from ? 0 : 1, from ? 0 : 1, "BUNDLE (or --from-json REPORT.json)"))
        return CP_EXIT_USAGE;
    bundle = optind < argc ? argv[optind] : NULL;
    if (slim && !bundle)
        return cp_usage_error(&p, "--slim needs a BUNDLE, not --from-json");
    if (access(bundle ? bundle : from, F_OK) && errno == ENOENT) {
        fprintf(stderr, "crashpack report: no such file: %s\n", bundle ? bundle : from);
        return CP_EXIT_NOTFOUND;
    }
    char dbbuf[PATH_MAX], err[1024];
    if (!db)
        db = kb_default_path(dbbuf, sizeof(dbbuf));
    int partial = 0;
    cJSON *r;
    if (from) {
        r = read_report_file(from);
        if (!r) {
            fprintf(stderr, "crashpack report: %s: not a JSON report\n", from);
            return CP_EXIT_PROBLEM;
        }
        if (!cp_jpath(r, "diagnosis_info") && diagnose(r, db, err, sizeof(err)) < 0)
            fprintf(stderr, "crashpack report: diagnosis: %s\n", err);
    } else {
        struct report_opts ro = {.db = db};
        struct report_status st;
        r = report_build(bundle, &ro, &st);
        if (!r) {
            fputs("crashpack report: ", stderr);
            cp_text_put(stderr, st.error);
            fputc('\n', stderr);
            return CP_EXIT_PROBLEM;
        }
        report_print_notes(stderr, "crashpack report", r, &st, 1);
        partial = st.partial;
    }
    FILE *o = out ? fopen(out, "w") : stdout;
    if (!o) {
        perror(out);
        cJSON_Delete(r);
        return CP_EXIT_PROBLEM;
    }
    section_summary(o, r);
    section_diagnoses(o, r);
    section_hang(o, r);
    section_exception(o, r);
    section_thread(o, r);
    section_gpu(o, r);
    section_checkpoint(o, r);
    section_signature(o, r, db);
    if (partial)
        fputs("\n*The bundle or its analysis is partial; what could be read is shown.*\n", o);
    int rc = 0;
    if (slim) {
        char summary[512] = "";
        if (slim_write(bundle, slim, err, sizeof(err), summary, sizeof(summary))) {
            fprintf(stderr, "crashpack report: --slim: %s\n", err);
            rc = 1;
        } else {
            fputs("\n*Attached: a slim bundle (", o);
            md(o, summary);
            fputs(").*\n", o);
        }
    }
    int bad = ferror(o);
    if (out)
        bad |= fclose(o) != 0;
    else
        bad |= fflush(o) != 0;
    cJSON_Delete(r);
    if (bad) {
        fprintf(stderr, "crashpack report: cannot write the output\n");
        return CP_EXIT_PROBLEM;
    }
    return rc ? rc : partial;
}
