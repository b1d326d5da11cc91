/* text_native.c - the native analysis in the text report: signal and cause, the crashed
 * thread's frames, the other threads grouped by identical stacks ("4 threads: ..."), each with
 * its Python frames, and the module problems. struct group of the old report_native.c is a
 * done[] flag per thread: threads whose frames are identical (same pcs and functions) print once.
 */
#include "render_internal.h"
#include "jpath.h"
#include "utf8.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define TEXT_OTHER_FRAMES 12 /* the crashed thread's are all printed */
#define TEXT_GROUP_TIDS 8
#define TEXT_PYTHON_FRAMES 40
/* the crashed thread's Python frames: the innermost 200 (a corrupt chain runs to the analysis's
 * cap of 4096), a run of one repeated frame cut after 3 as Python's own traceback does */
#define TEXT_CRASHED_PYTHON_FRAMES 200
#define TEXT_REPEATS_SHOWN 3

static void line(FILE *out, const char *l, const char *s)
{
    if (!s)
        return;
    render_label(out, l);
    cp_text_put(out, s);
    fputc('\n', out);
}

static const char *base(const char *p)
{
    const char *s = p ? strrchr(p, '/') : NULL;
    return s && s[1] ? s + 1 : p;
}

static void print_frame(FILE *out, int n, const cJSON *f)
{
    const char *fn = cp_jstr(f, "function"), *mod = cp_jstr(f, "module"),
               *file = cp_jstr(f, "file");
    const char *off = cp_jstr(f, "module_offset"), *pc = cp_jstr(f, "pc");
    fprintf(out, "  #%-3d %-18s ", n, pc ? pc : "?");
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(f, "inline")))
        fputs("[inline] ", out);
    cp_text_put(out, fn ? fn : "??");
    if (mod) {
        fputs(" (", out);
        cp_text_put(out, mod);
        if (off) {
            fputc('+', out);
            cp_text_put(out, off);
        }
        fputc(')', out);
    }
    if (file) {
        fputc(' ', out);
        cp_text_put(out, base(file));
        double ln = cp_jnum_or(f, "line", 0);
        if (ln > 0)
            fprintf(out, ":%.0f", ln);
    }
    const char *trust = cp_jstr(f, "trust");
    if (trust && strcmp(trust, "cfi") && strcmp(trust, "context"))
        fprintf(out, " [%s]", trust);
    fputc('\n', out);
}

/* A Python frame's source line and locals, under its File line (docs/python.md). */
static void print_python_detail(FILE *out, const cJSON *f)
{
    const char *src = cp_jstr(f, "source");
    if (src && *src) {
        fputs("      ", out);
        cp_text_put(out, src);
        fputc('\n', out);
    }
    const cJSON *loc = cJSON_GetObjectItemCaseSensitive(f, "locals"), *v;
    if (!cJSON_IsObject(loc) || !loc->child)
        return;
    fputs("      locals:\n", out);
    cJSON_ArrayForEach(v, loc)
    {
        if (!v->string || !cJSON_IsString(v))
            continue;
        fputs("        ", out);
        cp_text_put(out, v->string);
        fputs(" = ", out);
        cp_text_put(out, v->valuestring);
        fputc('\n', out);
    }
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(f, "locals_truncated")))
        fputs("        ... (more locals left out)\n", out);
}

/* One Python frame's lines: File "...", line N, in fn [native #N], and its detail. */
static void print_python_frame(FILE *out, const cJSON *f)
{
    const char *file = cp_jstr(f, "file"), *fn = cp_jstr(f, "function");
    fputs("    File \"", out);
    cp_text_put(out, file ? file : "???");
    double ln = cp_jnum_or(f, "line", -1);
    if (ln >= 0)
        fprintf(out, "\", line %.0f, in ", ln);
    else
        fputs("\", line ???, in ", out);
    cp_text_put(out, fn ? fn : "???");
    double nf = cp_jnum_or(f, "native_frame_index", -1);
    if (nf >= 0)
        fprintf(out, "  [native #%.0f]", nf);
    fputc('\n', out);
    print_python_detail(out, f);
}

/* Whether two Python frames are the same code at the same line (a recursion's repeats) */
static int same_python_frame(const cJSON *a, const cJSON *b)
{
    const char *fa = cp_jstr(a, "file"), *fb = cp_jstr(b, "file");
    const char *na = cp_jstr(a, "function"), *nb = cp_jstr(b, "function");
    return fa && fb && na && nb && !strcmp(fa, fb) && !strcmp(na, nb) &&
           cp_jnum_or(a, "line", -1) == cp_jnum_or(b, "line", -1);
}

/* The thread's Python frames as a Python traceback (most recent call last), each with the native
 * frame (#N) of the _PyEval_EvalFrameDefault that runs it, its source line and locals when the
 * report has them; crashpack's own frames (tool) are not shown. */
static void print_python(FILE *out, const cJSON *t, int max)
{
    const cJSON *pf = cJSON_GetObjectItemCaseSensitive(t, "python_frames");
    const cJSON *py = cJSON_GetObjectItemCaseSensitive(t, "python");
    /* the innermost max that are not the tool's, outermost first */
    int all = cJSON_GetArraySize(pf), k = 0, n = 0;
    const cJSON **shown = calloc((size_t)all + 1, sizeof(*shown)), *it;
    if (!shown)
        return;
    cJSON_ArrayForEach(it, pf)
    {
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(it, "tool")))
            continue;
        if (k < max)
            shown[k++] = it;
        n++;
    }
    if (!n && !cp_jstr(py, "error")) {
        free(shown);
        return;
    }
    fputs("  Python", out);
    if (cp_jstr(py, "thread_id")) {
        fputs(" thread ", out);
        cp_text_put(out, cp_jstr(py, "thread_id"));
    }
    if (cp_jstr(py, "name")) {
        fputs(" \"", out);
        cp_text_put(out, cp_jstr(py, "name"));
        fputc('"', out);
    }
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(py, "holds_gil")))
        fputs(", holds the GIL", out);
    fputs(" (most recent call last):\n", out);
    if (n > k)
        fprintf(out, "    ... %d outer frames shown by --json\n", n - k);
    int run = 0; /* how many times in a row the frame printed last came again */
    for (int i = k - 1; i >= 0; i--) {
        run = i < k - 1 && same_python_frame(shown[i], shown[i + 1]) ? run + 1 : 0;
        if (run >= TEXT_REPEATS_SHOWN && i > 0 && same_python_frame(shown[i - 1], shown[i]))
            continue;
        if (run > TEXT_REPEATS_SHOWN)
            fprintf(out, "    [Previous line repeated %d more times]\n",
                    run - TEXT_REPEATS_SHOWN + 1);
        else
            print_python_frame(out, shown[i]);
    }
    free(shown);
    const char *merge = cp_jstr(t, "python_merge");
    if (merge && strcmp(merge, "ok")) {
        fputs("    (", out);
        cp_text_put(out, merge);
        fputs(")\n", out);
    }
    if (cp_jstr(py, "error")) {
        fputs("    (Python frames stopped: ", out);
        cp_text_put(out, cp_jstr(py, "error"));
        fputs(")\n", out);
    }
}

/* A thread's frames, the first max (the crashed thread's: all), its Python frames (at most
 * max_py), and how many were left out and why. */
static void print_frames(FILE *out, const cJSON *t, int max, int max_py)
{
    const cJSON *frames = cJSON_GetObjectItemCaseSensitive(t, "frames"), *f;
    int n = 0, total = cJSON_GetArraySize(frames);
    cJSON_ArrayForEach(f, frames)
    {
        if (n == max)
            break;
        print_frame(out, n++, f);
    }
    double dropped = cp_jnum_or(t, "frames_dropped", 0);
    if (total > max)
        fprintf(out, "  ... %d more frames shown by --json", total - max);
    if (dropped > 0)
        fprintf(out, "%s %.0f more frames beyond the analysis's frame cap (--max-frames)",
                total > max ? "," : "  ...", dropped);
    if (total > max || dropped > 0)
        fputc('\n', out);
    const cJSON *fb = cJSON_GetObjectItemCaseSensitive(t, "unwinder_fallback");
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(fb, "used")) && cp_jstr(fb, "reason")) {
        fputs("  (frames from libunwind: ", out);
        cp_text_put(out, cp_jstr(fb, "reason"));
        fputs(")\n", out);
    }
    const char *stop = cp_jstr(t, "unwind_stop");
    if (stop) {
        fputs("  (unwinding stopped: ", out);
        cp_text_put(out, stop);
        fputs(")\n", out);
    }
    if (!total)
        fputs("  (no frames)\n", out);
    print_python(out, t, max_py);
}

/* Two threads group together when their frames have the same pcs and functions. */
static int same_stack(const cJSON *a, const cJSON *b)
{
    const cJSON *fa = cJSON_GetObjectItemCaseSensitive(a, "frames");
    const cJSON *fb = cJSON_GetObjectItemCaseSensitive(b, "frames");
    if (cJSON_GetArraySize(fa) != cJSON_GetArraySize(fb) ||
        cp_jnum_or(a, "frames_dropped", 0) != cp_jnum_or(b, "frames_dropped", 0))
        return 0;
    for (const cJSON *x = fa->child, *y = fb->child; x && y; x = x->next, y = y->next) {
        const char *pa = cp_jstr(x, "pc"), *pb = cp_jstr(y, "pc");
        const char *na = cp_jstr(x, "function"), *nb = cp_jstr(y, "function");
        if (!pa || !pb || strcmp(pa, pb) || (!na != !nb) || (na && strcmp(na, nb)))
            return 0;
    }
    /* threads in the same native place may run different Python code */
    const cJSON *pa = cJSON_GetObjectItemCaseSensitive(a, "python_frames");
    const cJSON *pb = cJSON_GetObjectItemCaseSensitive(b, "python_frames");
    if (cJSON_GetArraySize(pa) || cJSON_GetArraySize(pb)) {
        char *sa = cJSON_PrintUnformatted(pa), *sb = cJSON_PrintUnformatted(pb);
        int same = sa && sb && !strcmp(sa, sb);
        free(sa);
        free(sb);
        if (!same)
            return 0;
    }
    return 1;
}

static void print_tid(FILE *out, const cJSON *t)
{
    fprintf(out, "%.0f", cp_jnum_or(t, "tid", 0));
    const char *name = cp_jstr(t, "name");
    if (name) {
        fputs(" (", out);
        cp_text_put(out, name);
        fputc(')', out);
    }
}

static void print_group(FILE *out, const cJSON *threads, const cJSON *first, char *done)
{
    int count = 0, i = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, threads)
    {
        if (!done[i] && same_stack(first, t))
            count++;
        i++;
    }
    fprintf(out, "\n%d thread%s: ", count, count == 1 ? "" : "s");
    int shown = 0;
    i = 0;
    cJSON_ArrayForEach(t, threads)
    {
        if (!done[i] && same_stack(first, t)) {
            done[i] = 1;
            if (shown < TEXT_GROUP_TIDS) {
                fputs(shown ? ", " : "", out);
                print_tid(out, t);
            }
            shown++;
        }
        i++;
    }
    if (shown > TEXT_GROUP_TIDS)
        fprintf(out, ", ... (%d more)", shown - TEXT_GROUP_TIDS);
    fputc('\n', out);
    print_frames(out, first, TEXT_OTHER_FRAMES, TEXT_PYTHON_FRAMES);
}

static void print_threads(FILE *out, const cJSON *r)
{
    const cJSON *threads = cJSON_GetObjectItemCaseSensitive(r, "threads"), *t;
    int n = cJSON_GetArraySize(threads), i = 0;
    char *done = calloc((size_t)n + 1, 1);
    if (!done)
        return;
    cJSON_ArrayForEach(t, threads)
    {
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(t, "crashed"))) {
            fputs("\ncrashed thread ", out);
            print_tid(out, t);
            fputc('\n', out);
            print_frames(out, t, INT_MAX, TEXT_CRASHED_PYTHON_FRAMES);
            done[i] = 1;
        }
        i++;
    }
    i = 0;
    cJSON_ArrayForEach(t, threads)
    {
        if (!done[i])
            print_group(out, threads, t, done);
        i++;
    }
    free(done);
}

/* Modules with a problem that frames refer to; the others only counted. */
static void print_modules(FILE *out, const cJSON *r)
{
    const cJSON *m, *t, *f;
    int other = 0, header = 0;
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(r, "modules"))
    {
        const char *prob = cp_jstr(m, "problem"), *path = cp_jstr(m, "path");
        if (!prob || !path)
            continue;
        int used = 0;
        cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(r, "threads"))
            cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(t, "frames"))
        {
            const char *fm = cp_jstr(f, "module");
            used |= fm && !strcmp(fm, base(path));
        }
        if (!used) {
            other++;
            continue;
        }
        if (!header++)
            fputs("\nmodule problems\n", out);
        fputs("  ", out);
        cp_text_put(out, path);
        fputs(": ", out);
        cp_text_put(out, prob);
        fputc('\n', out);
    }
    if (other)
        fprintf(out, "%s  %d module%s not on any stack %s problems too (see --json)\n",
                header ? "" : "\nmodule problems\n", other, other == 1 ? "" : "s",
                other == 1 ? "has" : "have");
}

void render_text_cause(FILE *out, const cJSON *r)
{
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(r, "cause");
    line(out, "signal", cp_jstr(c, "summary"));
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "stack_overflow")))
        line(out, "cause", cp_jstr(c, "stack_overflow_detail"));
    const char *am = cp_jstr(c, "abort_message");
    if (am) {
        render_label(out, "abort");
        cp_text_put(out, am);
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "abort_message_heuristic")))
            fputs(" (heuristic: found on the stack)", out);
        fputc('\n', out);
    }
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(c, "exception");
    if (cp_jstr(e, "type")) {
        render_label(out, "exception");
        fputs("uncaught C++ exception of type ", out);
        cp_text_put(out, cp_jstr(e, "type"));
        if (cp_jstr(e, "what")) {
            fputs(": what() = \"", out);
            cp_text_put(out, cp_jstr(e, "what"));
            fputc('"', out);
        }
        fputs(" (heuristic)\n", out);
    }
}

/* The crashed thread's frame where the crash is: the signature's first frame (the skip lists
 * pass over abort(), raise() and the like), else its innermost named frame. */
static const cJSON *crash_frame(const cJSON *r, const cJSON *t, int *index)
{
    const cJSON *s0 = cJSON_GetArrayItem(cp_jpath(r, "signature_info.frames"), 0), *f;
    const char *want = cJSON_GetStringValue(s0);
    const cJSON *named = NULL;
    int i = 0, named_i = 0;
    cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(t, "frames"))
    {
        const char *fn = cp_jstr(f, "function");
        if (want && fn && !strcmp(fn, want)) {
            *index = i;
            return f;
        }
        if (fn && !named) {
            named = f;
            named_i = i;
        }
        i++;
    }
    *index = named_i;
    return named ? named : cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(t, "frames"), 0);
}

void render_text_crash_frame(FILE *out, const cJSON *r)
{
    if (cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(r, "exception")))
        return; /* the exception is the answer, with its own frame */
    const cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(r, "threads"))
    {
        if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(t, "crashed")))
            continue;
        int i = 0;
        const cJSON *f = crash_frame(r, t, &i);
        if (!f)
            return;
        const char *fn = cp_jstr(f, "function"), *mod = cp_jstr(f, "module"),
                   *file = cp_jstr(f, "file");
        render_label(out, "crash at");
        cp_text_put(out, fn ? fn : "??");
        if (file) {
            fputc(' ', out);
            cp_text_put(out, base(file));
            double ln = cp_jnum_or(f, "line", 0);
            if (ln > 0)
                fprintf(out, ":%.0f", ln);
        }
        if (mod) {
            fputs(" (", out);
            cp_text_put(out, mod);
            fputc(')', out);
        }
        fprintf(out, ", frame #%d of thread ", i);
        print_tid(out, t);
        fputc('\n', out);
        return;
    }
}

void render_text_native(FILE *out, const cJSON *r)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(r, "analysis");
    if (!a)
        return;
    const cJSON *threads = cJSON_GetObjectItemCaseSensitive(r, "threads");
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(r, "process");
    if (cJSON_GetArraySize(threads) > 0) {
        render_label(out, "threads");
        double tid;
        fprintf(out, "%d", cJSON_GetArraySize(threads));
        if (cp_jnum(p, "crashed_tid", &tid))
            fprintf(out, ", crashed tid %.0f", tid);
        else
            fputs(", no thread crashed", out);
        const char *src = cp_jstr(p, "crashed_tid_source");
        if (src) {
            fputs(" (from ", out);
            cp_text_put(out, src);
            fputc(')', out);
        }
        fputs(", unwinder ", out);
        cp_text_put(out, cp_jstr(r, "unwinder") ? cp_jstr(r, "unwinder") : "?");
        fputc('\n', out);
    }
    const cJSON *py = cJSON_GetObjectItemCaseSensitive(r, "python");
    if (cJSON_IsObject(py)) {
        render_label(out, "python");
        fputs("CPython ", out);
        cp_text_put(out, cp_jstr(py, "version") ? cp_jstr(py, "version") : "?");
        const cJSON *gil = cJSON_GetObjectItemCaseSensitive(py, "gil");
        if (cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(gil, "holder_tid")))
            fprintf(out, ", GIL held by tid %.0f", cp_jnum_or(gil, "holder_tid", 0));
        else if (cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(gil, "locked")))
            fputs(", GIL not held", out);
        if (cp_jstr(py, "error")) {
            fputs(": ", out);
            cp_text_put(out, cp_jstr(py, "error"));
        }
        fputc('\n', out);
    }
    const cJSON *w;
    cJSON_ArrayForEach(w, cJSON_GetObjectItemCaseSensitive(a, "warnings")) if (cJSON_IsString(w))
        line(out, "warning", w->valuestring);
    cJSON_ArrayForEach(w,
                       cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(a, "core"),
                                                        "warnings")) if (cJSON_IsString(w))
        line(out, "warning", w->valuestring);
    if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(a, "complete")))
        line(out, "analysis", cp_jstr(a, "error") ? cp_jstr(a, "error") : "incomplete");
    print_threads(out, r);
    print_modules(out, r);
}
