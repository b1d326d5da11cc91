/* text_exception.c - how the process ended (process.death) and the Python exception
 * (`exception`) in the text report. In the answer at the top: the type and message, the raising
 * thread and the innermost frame of the user's code with its source line
 * (render_text_exception_head). After it: the classes, the traceback, the chain in Python's
 * words, the worker's original traceback, the non-fatal events (render_text_exception). */
#include "render_internal.h"
#include "jpath.h"
#include "utf8.h"

#include <stdlib.h>
#include <string.h>

#define TEXT_FRAMES_MAX 20 /* frames of one exception */
#define TEXT_LINES_MAX 30  /* lines of a message or a worker traceback */

void render_text_death(FILE *out, const cJSON *r)
{
    const cJSON *d = cp_jpath(r, "process.death");
    const char *kind = cp_jstr(d, "kind");
    /* derived for an older bundle (a core from the kernel, a snap) it says nothing new: the
     * process line and the hang section have it */
    if (!kind || strcmp(cp_jstr_or(d, "source", ""), "manifest"))
        return;
    double v;
    const char *s;
    render_label(out, "death");
    fputs(kind, out);
    if (!strcmp(kind, "exit") && cp_jnum(d, "status", &v))
        fprintf(out, ", exit status %.0f", v);
    if (cp_jnum_at(d, "signal.number", &v)) {
        fprintf(out, ", signal %.0f (", v);
        cp_text_put(out, cp_jstr_at(d, "signal.name") ? cp_jstr_at(d, "signal.name") : "?");
        fputc(')', out);
    }
    if ((s = cp_jstr(d, "trigger"))) {
        fputs(", trigger ", out);
        cp_text_put(out, s);
    }
    if ((s = cp_jstr(d, "identity"))) {
        fputs(", identity ", out);
        cp_text_put(out, s);
        if (!strcmp(s, "reported") && cp_jnum(d, "reported_by_uid", &v))
            fprintf(out, " by uid %.0f", v);
    }
    fputc('\n', out);
    if ((s = cp_jstr(d, "reason")) && *s) {
        render_label(out, "");
        fputs("reason: ", out);
        render_put_cut(out, s, 300);
        fputc('\n', out);
    }
}

/* Prints up to TEXT_LINES_MAX lines of s, each indented. */
static void put_lines(FILE *out, const char *s, const char *indent)
{
    int n = 0;
    while (s && *s) {
        const char *nl = strchr(s, '\n');
        size_t l = nl ? (size_t)(nl - s) : strlen(s);
        if (n++ == TEXT_LINES_MAX) {
            fprintf(out, "%s...\n", indent);
            return;
        }
        char *line = strndup(s, l);
        fputs(indent, out);
        render_put_cut(out, line ? line : "", 400);
        fputc('\n', out);
        free(line);
        s = nl ? nl + 1 : NULL;
    }
}

/* "Type: first line of the message" */
static void put_head(FILE *out, const cJSON *e)
{
    cp_text_put(out, cp_jstr_or(e, "type", "?"));
    const char *m = cp_jstr(e, "message");
    if (m && *m) {
        fputs(": ", out);
        const char *nl = strchr(m, '\n');
        char *first = strndup(m, nl ? (size_t)(nl - m) : strlen(m));
        render_put_cut(out, first ? first : "", 300);
        free(first);
        if (nl)
            fputs(" ...", out);
    }
}

static void put_frames(FILE *out, const cJSON *e)
{
    const cJSON *fr = cp_jkey(e, "frames"), *f;
    int n = cJSON_GetArraySize(fr), i = 0;
    if (n == 0)
        return;
    render_label(out, "");
    fputs("Traceback (most recent call last):\n", out);
    cJSON_ArrayForEach(f, fr)
    {
        /* the innermost frames are the ones to keep */
        if (n > TEXT_FRAMES_MAX && i++ < n - TEXT_FRAMES_MAX) {
            if (i == 1) {
                render_label(out, "");
                fprintf(out, "  ... %d outer frames\n", n - TEXT_FRAMES_MAX);
            }
            continue;
        }
        double ln = 0;
        render_label(out, "");
        fputs("  File \"", out);
        cp_text_put(out, cp_jstr_or(f, "file", "?"));
        fputs("\", line ", out);
        if (cp_jnum(f, "line", &ln))
            fprintf(out, "%.0f", ln);
        else
            fputc('?', out);
        fputs(", in ", out);
        cp_text_put(out, cp_jstr(f, "qualname") ? cp_jstr(f, "qualname")
                                                : cp_jstr_or(f, "function", "?"));
        fputc('\n', out);
    }
    if (cJSON_IsTrue(cp_jkey(e, "frames_truncated"))) {
        render_label(out, "");
        fputs("  (frames truncated by the capture)\n", out);
    }
}

/* "raised in thread N (name), seen by HOOK" */
static void exc_thread(FILE *out, const cJSON *x)
{
    double v;
    const char *s;
    if (cp_jnum_at(x, "thread.native_id", &v))
        fprintf(out, "raised in thread %.0f", v);
    else
        fputs("raised in a thread the hook did not name", out);
    if ((s = cp_jstr_at(x, "thread.name"))) {
        fputs(" (", out);
        cp_text_put(out, s);
        fputc(')', out);
    }
    if ((s = cp_jstr(x, "hook"))) {
        fputs(", seen by ", out);
        cp_text_put(out, s);
    }
    if (cJSON_IsTrue(cp_jkey(x, "abandoned")))
        fputs("; the live snapshot was ABANDONED (past its time limit)", out);
    fputc('\n', out);
}

/* "exception Type: message" and the raising thread and hook (or where it was read from). */
static void exc_head(FILE *out, const cJSON *x)
{
    double v;
    const char *s;
    render_label(out, "exception");
    put_head(out, x);
    fputc('\n', out);
    render_label(out, "");
    if ((s = cp_jstr_at(x, "source")) && !strcmp(s, "output")) {
        /* no hook saw it: the traceback the process printed, read back */
        fputs("parsed from the traceback in ", out);
        cp_text_put(out, cp_jstr_or_at(x, "output.member", "the output"));
        if (cp_jnum_at(x, "output.line", &v))
            fprintf(out, ", line %.0f", v);
        fputc('\n', out);
    } else {
        exc_thread(out, x);
    }
}

static const char *base(const char *p)
{
    const char *s = p ? strrchr(p, '/') : NULL;
    return s && s[1] ? s + 1 : p;
}

/* A frame of the Python library, a package or crashpack, not the job's own code. */
static int library_file(const char *f)
{
    return !f || f[0] == '<' || strstr(f, "/lib/python") || strstr(f, "-packages/") ||
           strstr(f, "/crashpack/");
}

/* The innermost of the exception's frames (innermost last) that is the user's: the signature's
 * first frame ("file.py:function") when it is one of them, else the innermost outside the
 * library, else the innermost. */
static const cJSON *user_frame(const cJSON *r, const cJSON *x)
{
    const cJSON *fr = cp_jkey(x, "frames"), *f, *sig = NULL, *lib = NULL, *any = NULL;
    const cJSON *s0 = cJSON_GetArrayItem(cp_jpath(r, "signature_info.frames"), 0);
    const char *want = cJSON_GetStringValue(s0);
    cJSON_ArrayForEach(f, fr)
    {
        const char *file = cp_jstr(f, "file"), *fn = cp_jstr(f, "function");
        any = f;
        if (!library_file(file))
            lib = f;
        if (want && file && fn) {
            size_t bl = strlen(base(file));
            if (!strncmp(want, base(file), bl) && want[bl] == ':' && !strcmp(want + bl + 1, fn))
                sig = f;
        }
    }
    return sig ? sig : lib ? lib : any;
}

/* "at File "f", line N, in fn" and its source line: where the user's code raised. */
static void exc_at(FILE *out, const cJSON *r, const cJSON *x)
{
    const cJSON *f = user_frame(r, x);
    if (!f)
        return;
    double ln;
    render_label(out, "");
    fputs("at File \"", out);
    cp_text_put(out, cp_jstr_or(f, "file", "?"));
    fputs("\", line ", out);
    if (cp_jnum(f, "line", &ln))
        fprintf(out, "%.0f", ln);
    else
        fputc('?', out);
    fputs(", in ", out);
    cp_text_put(out,
                cp_jstr(f, "qualname") ? cp_jstr(f, "qualname") : cp_jstr_or(f, "function", "?"));
    fputc('\n', out);
    const char *src = cp_jstr(f, "source");
    if (src && *src) {
        render_label(out, "");
        fputs("    ", out);
        render_put_cut(out, src, 200);
        fputc('\n', out);
    }
}

/* The exception's classes, and a message of several lines whole. */
static void exc_more(FILE *out, const cJSON *x)
{
    const cJSON *m = cp_jkey(x, "mro");
    if (cJSON_GetArraySize(m) > 1) {
        render_label(out, "");
        fputs("classes: ", out);
        const cJSON *e;
        int first = 1;
        cJSON_ArrayForEach(e, m)
        {
            if (!first)
                fputs(" < ", out);
            first = 0;
            cp_text_put(out, e->valuestring);
        }
        fputc('\n', out);
    }
    const char *msg = cp_jstr(x, "message");
    if (msg && strchr(msg, '\n')) {
        render_label(out, "");
        fputs("message:\n", out);
        put_lines(out, msg, "            ");
    }
}

/* The rest of the chain (the raised one is above): "caused by" / "while handling". */
static void exc_chain(FILE *out, const cJSON *x)
{
    const cJSON *e;
    int i = 0;
    cJSON_ArrayForEach(e, cp_jkey(x, "chain"))
    {
        if (i++ == 0)
            continue; /* the raised one, above */
        render_label(out, "");
        const char *rel = cp_jstr_or(e, "relation", "?");
        fputs(!strcmp(rel, "cause") ? "caused by " : "while handling ", out);
        put_head(out, e);
        fputc('\n', out);
        put_frames(out, e);
    }
    if (cJSON_IsTrue(cp_jkey(x, "chain_truncated"))) {
        render_label(out, "");
        fprintf(out, "(chain cut at %d exceptions)\n", cJSON_GetArraySize(cp_jkey(x, "chain")));
    }
}

/* The first exception of the chain raised in a worker: which, and its original traceback. */
static void exc_worker(FILE *out, const cJSON *x)
{
    const cJSON *e;
    double v;
    const char *s;
    cJSON_ArrayForEach(e, cp_jkey(x, "chain"))
    {
        const cJSON *w = cp_jkey(e, "worker");
        if (!cJSON_IsObject(w))
            continue;
        render_label(out, "worker");
        cp_text_put(out, cp_jstr_or(w, "kind", "?"));
        if (cp_jnum(w, "id", &v))
            fprintf(out, " worker %.0f", v);
        if (cp_jnum(w, "pid", &v))
            fprintf(out, " (pid %.0f)", v);
        if ((s = cp_jstr(w, "original_type"))) {
            fputs(": ", out);
            cp_text_put(out, s);
        }
        fputc('\n', out);
        if ((s = cp_jstr(w, "original_traceback"))) {
            render_label(out, "");
            fputs("original traceback:\n", out);
            put_lines(out, s, "            ");
        }
        break;
    }
}

/* The non-fatal events before the death, at most 10. */
static void exc_events(FILE *out, const cJSON *x)
{
    const cJSON *e;
    double v;
    const char *s;
    int i = 0;
    cJSON_ArrayForEach(e, cp_jkey(x, "events"))
    {
        if (i++ == 10) {
            render_label(out, "");
            fprintf(out, "... %d more events\n", cJSON_GetArraySize(cp_jkey(x, "events")) - 10);
            break;
        }
        render_label(out, i == 1 ? "events" : "");
        cp_text_put(out, cp_jstr_or(e, "hook", "?"));
        if (cp_jnum_at(e, "thread.native_id", &v))
            fprintf(out, " in thread %.0f", v);
        if ((s = cp_jstr_at(e, "thread.name"))) {
            fputs(" (", out);
            cp_text_put(out, s);
            fputc(')', out);
        }
        fputs(": ", out);
        put_head(out, e);
        fputs(" (non-fatal)\n", out);
    }
}

void render_text_exception_head(FILE *out, const cJSON *r)
{
    const char *err = cp_jstr(r, "exception_error");
    if (err) {
        render_label(out, "exception");
        fputs("unusable: ", out);
        cp_text_put(out, err);
        fputc('\n', out);
    }
    const cJSON *x = cp_jkey(r, "exception");
    if (!cJSON_IsObject(x))
        return;
    exc_head(out, x);
    exc_at(out, r, x);
}

void render_text_exception(FILE *out, const cJSON *r)
{
    const cJSON *x = cp_jkey(r, "exception");
    if (!cJSON_IsObject(x))
        return;
    exc_more(out, x);
    put_frames(out, x);
    exc_chain(out, x);
    exc_worker(out, x);
    exc_events(out, x);
}
