/* md_threads.c - the threads in the ticket Markdown: the hang analysis (deadlock cycles, each
 * thread's wait state) and the crashed (or raising) thread's native and Python frames. */
#include "render_internal.h"
#include "jpath.h"
#include "mdesc.h"

#include <stdlib.h>
#include <string.h>

static const cJSON *crashed_thread(const cJSON *r)
{
    double ctid = -1;
    cp_jnum_at(r, "process.crashed_tid", &ctid);
    const cJSON *t;
    cJSON_ArrayForEach(t,
                       cp_jpath(r, "threads")) if (cJSON_IsTrue(cp_jpath(t, "crashed"))) return t;
    /* a snapshot's only named thread is an exception's raising one (crashed_tid_source) */
    const char *src = cp_jstr_ne_at(r, "process.crashed_tid_source");
    if (render_is_snapshot(r) && !(src && !strcmp(src, "exception")))
        return NULL;
    cJSON_ArrayForEach(t, cp_jpath(r, "threads"))
    {
        double tid;
        if (cp_jnum_at(t, "tid", &tid) && tid == ctid)
            return t;
    }
    return NULL;
}

/* The thread's native frames (at most 24) in a code block. */
static void native_block(FILE *o, const cJSON *t)
{
    const cJSON *f;
    struct render_block b = {.n = 0};
    int i = 0;
    cJSON_ArrayForEach(f, cp_jpath(t, "frames"))
    {
        if (i >= 24) {
            char more[64];
            snprintf(more, sizeof(more), "... %d more frames",
                     cJSON_GetArraySize(cp_jpath(t, "frames")) - i);
            render_block_add(&b, more);
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
        render_block_add(&b, line);
        i++;
    }
    if (i == 0)
        render_block_add(&b, "(no frames)");
    render_block_write(o, &b);
}

/* Lines of a code block longer than struct render_block takes (a frame's source and locals). */
#define MD_PY_LINES 400
struct md_lines {
    char *v[MD_PY_LINES];
    int n;
};

static void md_line(struct md_lines *b, const char *s)
{
    if (b->n < MD_PY_LINES && (b->v[b->n] = strdup(s ? s : "")))
        b->n++;
}

static void md_lines_write(FILE *o, struct md_lines *b)
{
    render_lines_write(o, b->v, &b->n);
}

/* A Python frame's source line and locals (docs/python.md), under its File line. */
static void python_detail(struct md_lines *b, const cJSON *f)
{
    char line[1024];
    const cJSON *loc = cp_jpath(f, "locals"), *v;
    if (cp_jstr_ne_at(f, "source")) {
        snprintf(line, sizeof(line), "    %s", cp_jstr_ne_at(f, "source"));
        md_line(b, line);
    }
    cJSON_ArrayForEach(v, loc) if (v->string && cJSON_IsString(v))
    {
        snprintf(line, sizeof(line), "      %s = %s", v->string, v->valuestring);
        md_line(b, line);
    }
    if (cJSON_IsTrue(cp_jpath(f, "locals_truncated")))
        md_line(b, "      ... (more locals left out)");
}

/* The thread's Python frames (innermost first, at most 24; crashpack's own frames, `tool`, not
 * shown) in a code block, each with its source line and locals when the report has them. */
static void python_block(FILE *o, const cJSON *t)
{
    const cJSON *f;
    struct md_lines *b = calloc(1, sizeof(*b));
    int i = 0;
    if (!b)
        return;
    cJSON_ArrayForEach(f, cp_jpath(t, "python_frames"))
    {
        if (cJSON_IsTrue(cp_jpath(f, "tool")))
            continue;
        if (i++ >= 24)
            break;
        char line[1024];
        double ln = 0;
        cp_jnum_at(f, "line", &ln);
        snprintf(line, sizeof(line), "  File \"%s\", line %.0f, in %s",
                 cp_jstr_ne_at(f, "file") ? cp_jstr_ne_at(f, "file") : "?", ln,
                 cp_jstr_ne_at(f, "function") ? cp_jstr_ne_at(f, "function") : "?");
        md_line(b, line);
        python_detail(b, f);
    }
    if (b->n > 0) {
        fputs("\nPython frames (innermost first):\n\n", o);
        md_lines_write(o, b);
    }
    free(b);
}

void render_md_thread(FILE *o, const cJSON *r)
{
    const cJSON *t = crashed_thread(r);
    if (render_is_snapshot(r) && !t) {
        fputs("\n## Threads\n\nA live snapshot: no thread crashed (", o);
        fprintf(o, "%d threads; the hang analysis above says what each waits for).\n",
                cJSON_GetArraySize(cp_jpath(r, "threads")));
        return;
    }
    fputs(render_is_snapshot(r) ? "\n## Raising thread\n\n" : "\n## Crashed thread\n\n", o);
    if (!t) {
        fputs("No thread information (", o);
        render_md(o, cp_jstr_ne_at(r, "analysis.error") ? cp_jstr_ne_at(r, "analysis.error")
                                                        : "no core analysis in this report");
        fputs(").\n", o);
        return;
    }
    double tid = 0;
    cp_jnum_at(t, "tid", &tid);
    fprintf(o, "Thread %.0f", tid);
    if (cp_jstr_ne_at(t, "name")) {
        fputs(" ", o);
        render_md_code(o, cp_jstr_ne_at(t, "name"));
    }
    if (cp_jstr_ne_at(r, "cause.abort_message")) {
        fputs(", abort message ", o);
        render_md_code(o, cp_jstr_ne_at(r, "cause.abort_message"));
    }
    if (cp_jpath(r, "cause.exception") && cp_jstr_ne_at(r, "cause.exception.type")) {
        fputs(", uncaught ", o);
        render_md_code(o, cp_jstr_ne_at(r, "cause.exception.type"));
        if (cp_jstr_ne_at(r, "cause.exception.what")) {
            fputs(": ", o);
            render_md_code(o, cp_jstr_ne_at(r, "cause.exception.what"));
        }
    }
    fputs(":\n\n", o);
    native_block(o, t);
    python_block(o, t);
}

/* One row of a deadlock's table: the thread, the mutex it waits for, its owner, what it holds. */
static void deadlock_row(FILE *o, const cJSON *t)
{
    const cJSON *m;
    double tid = 0, ow = 0;
    cp_jnum_at(t, "tid", &tid);
    fprintf(o, "| %.0f", tid);
    if (cp_jstr_ne_at(t, "name")) {
        fputc(' ', o);
        render_md_code_cell(o, cp_jstr_ne_at(t, "name"));
    }
    fputs(" | ", o);
    render_md_code_cell(o, cp_jstr_ne_at(t, "waits_for_mutex_symbol")
                          ? cp_jstr_ne_at(t, "waits_for_mutex_symbol")
                          : cp_jstr_ne_at(t, "waits_for_mutex"));
    if (cp_jstr_ne_at(t, "waits_for_mutex_symbol") && cp_jstr_ne_at(t, "waits_for_mutex")) {
        fputs(" (", o);
        render_md(o, cp_jstr_ne_at(t, "waits_for_mutex"));
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
        render_md_code_cell(o, cp_jstr_ne_at(m, "symbol") ? cp_jstr_ne_at(m, "symbol")
                                                     : cp_jstr_ne_at(m, "mutex"));
    }
    fputs(" | ", o);
    render_md_code_cell(o, cp_jstr_ne_at(t, "blocked_in"));
    fputs(" |\n", o);
}

/* Every thread's blocking state, at most 64. */
static void thread_states(FILE *o, const cJSON *r)
{
    const cJSON *t;
    int n = 0, i = 0;
    cJSON_ArrayForEach(t, cp_jpath(r, "threads")) if (cJSON_IsObject(cp_jpath(t, "hang_state")))
        n++;
    if (!n)
        return;
    fputs("\nThread states:\n\n| thread | name | state | detail |\n|---|---|---|---|\n", o);
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
        render_md(o, cp_jstr_ne_at(t, "name"));
        fputs(" | ", o);
        render_md(o, cp_jstr_ne_at(hs, "state"));
        fputs(" | ", o);
        render_md(o, cp_jstr_ne_at(hs, "detail"));
        if (cp_jstr_ne_at(hs, "mutex")) {
            fputs(" [", o);
            render_md(o, cp_jstr_ne_at(hs, "mutex_symbol") ? cp_jstr_ne_at(hs, "mutex_symbol")
                                                           : cp_jstr_ne_at(hs, "mutex"));
            double ow;
            if (cp_jnum_at(hs, "mutex_owner", &ow))
                fprintf(o, ", owner %.0f", ow);
            fputc(']', o);
        }
        fputs(" |\n", o);
    }
}

/* The hang analysis as `analyze` prints it: each deadlock's waits-for cycle (thread, the mutex it
 * waits for, its owner, what it holds), then every thread's blocking state. */
void render_md_hang(FILE *o, const cJSON *r)
{
    const cJSON *h = cp_jpath(r, "hang"), *d, *t;
    const cJSON *dl = cp_jpath(h, "deadlocks");
    int snap = cJSON_IsTrue(cp_jpath(h, "snap"));
    if (!cJSON_IsObject(h) || (!snap && cJSON_GetArraySize(dl) == 0))
        return;
    fputs("\n## Hang analysis\n\n", o);
    fputs(snap ? "From a live capture" : "From the core", o);
    if (cp_jstr_ne_at(h, "reason")) {
        fputs(" (reason: ", o);
        render_md(o, cp_jstr_ne_at(h, "reason"));
        fputc(')', o);
    }
    fputs(".\n", o);
    int i = 0;
    cJSON_ArrayForEach(d, dl)
    {
        fprintf(o, "\n**Deadlock %d:** ", ++i);
        render_md(o, cp_jstr_ne_at(d, "summary"));
        fputs("\n\n| thread | waits for | held by | holds | blocked in |\n|---|---|---|---|---|\n",
              o);
        cJSON_ArrayForEach(t, cp_jpath(d, "threads")) deadlock_row(o, t);
    }
    thread_states(o, r);
}
