/* md_exception.c - the Python exception in the ticket Markdown: as Python prints it (the chain in
 * its order, the first cause first), the worker's original traceback, the non-fatal events. */
#include "render_internal.h"
#include "jpath.h"

#include <string.h>

/* One exception of the chain as Python prints it: the traceback, then "Type: message". */
static void exc_block(FILE *o, const cJSON *e)
{
    struct render_block b = {.n = 0};
    const cJSON *fr = cp_jpath(e, "frames"), *f;
    int n = cJSON_GetArraySize(fr), i = 0;
    if (n > 0)
        render_block_add(&b, "Traceback (most recent call last):");
    cJSON_ArrayForEach(f, fr)
    {
        /* the innermost frames, with room for the message's lines */
        if (n > RENDER_BLOCK_MAX - 8 && i++ < n - (RENDER_BLOCK_MAX - 8)) {
            if (i == 1) {
                char more[64];
                snprintf(more, sizeof(more), "  ... %d outer frames", n - (RENDER_BLOCK_MAX - 8));
                render_block_add(&b, more);
            }
            continue;
        }
        char line[1200];
        double ln = 0;
        int have_ln = cp_jnum_at(f, "line", &ln);
        const char *fn = cp_jstr_ne_at(f, "qualname") ? cp_jstr_ne_at(f, "qualname")
                                                      : cp_jstr_ne_at(f, "function");
        char lnbuf[32] = "?"; /* no line: "line ?", never a line 0 */
        if (have_ln)
            snprintf(lnbuf, sizeof(lnbuf), "%.0f", ln);
        snprintf(line, sizeof(line), "  File \"%.512s\", line %s, in %.512s",
                 cp_jstr_ne_at(f, "file") ? cp_jstr_ne_at(f, "file") : "?", lnbuf, fn ? fn : "?");
        render_block_add(&b, line);
    }
    const char *type = cp_jstr_ne_at(e, "type"), *msg = cp_jstr_ne_at(e, "message");
    char head[1200];
    const char *nl = msg ? strchr(msg, '\n') : NULL;
    snprintf(head, sizeof(head), "%.512s%s%.*s", type ? type : "?", msg ? ": " : "",
             msg ? (int)(nl ? nl - msg : (long)strlen(msg)) : 0, msg ? msg : "");
    render_block_add(&b, head);
    for (int k = 0; nl && k < 6 && b.n < RENDER_BLOCK_MAX;
         k++) { /* a few more lines of the message */
        const char *s = nl + 1;
        nl = strchr(s, '\n');
        char line[1200];
        snprintf(line, sizeof(line), "%.*s", (int)(nl ? nl - s : (long)strlen(s)), s);
        render_block_add(&b, line);
    }
    render_block_write(o, &b);
}

/* "Uncaught `Type` in thread N `name`, seen by `hook`. Classes: ..." */
static void exc_head(FILE *o, const cJSON *x)
{
    fputs("Uncaught ", o);
    render_md_code(o, cp_jstr_ne_at(x, "type"));
    double v;
    if (cp_jnum_at(x, "thread.native_id", &v))
        fprintf(o, " in thread %.0f", v);
    if (cp_jstr_ne_at(x, "thread.name")) {
        fputs(" ", o);
        render_md_code(o, cp_jstr_ne_at(x, "thread.name"));
    }
    if (cp_jstr_ne_at(x, "hook")) {
        fputs(", seen by ", o);
        render_md_code(o, cp_jstr_ne_at(x, "hook"));
    }
    const char *src = cp_jstr_ne_at(x, "source");
    if (src && !strcmp(src, "output")) { /* no hook saw it: the traceback the job printed */
        fputs(", parsed from the traceback in ", o);
        render_md_code(o, cp_jstr_ne_at(x, "output.member"));
        if (cp_jnum_at(x, "output.line", &v))
            fprintf(o, " (line %.0f)", v);
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
            render_md_code(o, cJSON_GetStringValue(m));
        }
        fputs(".", o);
    }
    if (cJSON_IsTrue(cp_jpath(x, "abandoned")))
        fputs(" The live snapshot of the process was abandoned (past its time limit).", o);
    fputs("\n\n", o);
}

/* The chain in Python's order, each as Python prints it. */
static void exc_chain(FILE *o, const cJSON *x)
{
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
}

/* The first exception raised in a worker: which, and its original traceback. */
static void exc_worker(FILE *o, const cJSON *x)
{
    double v;
    const cJSON *e;
    cJSON_ArrayForEach(e, cp_jpath(x, "chain"))
    {
        const cJSON *w = cp_jpath(e, "worker");
        if (!cJSON_IsObject(w))
            continue;
        fputs("\nRaised in a ", o);
        render_md(o, cp_jstr_ne_at(w, "kind"));
        fputs(" worker", o);
        if (cp_jnum_at(w, "id", &v))
            fprintf(o, " %.0f", v);
        if (cp_jnum_at(w, "pid", &v))
            fprintf(o, " (pid %.0f)", v);
        if (cp_jstr_ne_at(w, "original_type")) {
            fputs(" as ", o);
            render_md_code(o, cp_jstr_ne_at(w, "original_type"));
        }
        fputs(". Its original traceback:\n\n", o);
        struct render_block b = {.n = 0};
        const char *tb = cp_jstr_ne_at(w, "original_traceback");
        while (tb && *tb && b.n < RENDER_BLOCK_MAX) {
            const char *nl = strchr(tb, '\n');
            char line[1200];
            snprintf(line, sizeof(line), "%.*s", (int)(nl ? nl - tb : (long)strlen(tb)), tb);
            render_block_add(&b, line);
            tb = nl ? nl + 1 : NULL;
        }
        if (b.n == 0)
            render_block_add(&b, "(not recorded)");
        render_block_write(o, &b);
        break;
    }
}

/* The non-fatal events before the death, at most 10. */
static void exc_events(FILE *o, const cJSON *x)
{
    double v;
    const cJSON *e;
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
        render_md_code(o, cp_jstr_ne_at(e, "hook"));
        if (cp_jnum_at(e, "thread.native_id", &v))
            fprintf(o, " in thread %.0f", v);
        fputs(": ", o);
        render_md_code(o, cp_jstr_ne_at(e, "type"));
        if (cp_jstr_ne_at(e, "message")) {
            fputs(" ", o);
            render_md(o, cp_jstr_ne_at(e, "message"));
        }
        fputc('\n', o);
    }
}

/* The Python exception of exception.json (issue 13): type, message, the chain in Python's order
 * (the first cause first), the worker's original traceback, the non-fatal events. */
void render_md_exception(FILE *o, const cJSON *r)
{
    const cJSON *x = cp_jpath(r, "exception");
    if (cp_jstr_ne_at(r, "exception_error")) {
        fputs("\n## Python exception\n\nThe bundle's exception record is unusable: ", o);
        render_md(o, cp_jstr_ne_at(r, "exception_error"));
        fputs(".\n", o);
    }
    if (!cJSON_IsObject(x))
        return;
    if (!cp_jstr_ne_at(r, "exception_error"))
        fputs("\n## Python exception\n\n", o);
    exc_head(o, x);
    exc_chain(o, x);
    exc_worker(o, x);
    exc_events(o, x);
}
