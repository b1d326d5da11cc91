/* report_native.c - merging the native analysis into the report, and its text summary.
 *
 * Main data structure: the report's cJSON tree (cmd_analyze.c builds it). For the text, struct
 * group gathers threads whose frames are identical (same pcs and functions) so that a process
 * with many parked workers prints each distinct stack once.
 */
#include "report_native.h"
#include "jpath.h"
#include "utf8.h"

#include <stdlib.h>
#include <string.h>

#define TEXT_CRASHED_FRAMES 40
#define TEXT_OTHER_FRAMES 12
#define TEXT_GROUP_TIDS 8
#define TEXT_PYTHON_FRAMES 40

/* ---- merge ---- */

static cJSON *take(cJSON *o, const char *key)
{
    return cJSON_DetachItemFromObjectCaseSensitive(o, key);
}


static cJSON *str_or_null(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? cJSON_CreateString(v->valuestring) : cJSON_CreateNull();
}

/* Contract order: tid, name, crashed, state first; then the rest of the thread. */
/* threads_json: proc/threads.json indexed by tid (one lookup per thread, not a pass) */
/* threads_ns: the same by ns_tid. A core's tids are the process's own (its pid namespace);
 * threads.json has the host's tid and, since it records them, the ns_tid too. */
static cJSON *shape_thread(cJSON *t, const struct cp_jindex *threads_json,
                           const struct cp_jindex *threads_ns)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *tid = take(t, "tid"), *crashed = take(t, "crashed");
    const cJSON *info = cJSON_IsNumber(tid) ? cp_jindex_find(threads_ns, tid->valuedouble) : NULL;
    if (!info && cJSON_IsNumber(tid))
        info = cp_jindex_find(threads_json, tid->valuedouble);
    double host;
    int other = info && cJSON_IsNumber(tid) && cp_jnum(info, "tid", &host) && host != tid->valuedouble;
    cp_json_set(o, "tid", tid);
    if (other)
        cJSON_AddNumberToObject(o, "host_tid", host);
    cp_json_set(o, "name", str_or_null(info, "name"));
    cp_json_set(o, "crashed", crashed ? crashed : cJSON_CreateFalse());
    cp_json_set(o, "state", cJSON_IsTrue(crashed) ? cJSON_CreateString("crashed")
                                               : str_or_null(info, "state"));
    cp_json_set(o, "wchan", str_or_null(info, "wchan"));
    while (t->child) {
        cJSON *v = cJSON_DetachItemViaPointer(t, t->child);
        cp_json_set(o, v->string, v);
    }
    cJSON_Delete(t);
    return o;
}

static void merge_process(cJSON *r, cJSON *nat)
{
    cJSON *p = cJSON_GetObjectItemCaseSensitive(r, "process");
    cJSON *tid = take(nat, "crashed_tid"), *src = take(nat, "crashed_tid_source");
    const cJSON *man_tid = cJSON_GetObjectItemCaseSensitive(p, "crashed_tid");
    if (cJSON_IsNumber(man_tid))
        cp_json_set(p, "manifest_tid", cJSON_CreateNumber(man_tid->valuedouble));
    if (cJSON_IsNumber(tid)) {
        cp_json_set(p, "crashed_tid", tid);
        cp_json_set(p, "crashed_tid_source", src);
    } else {
        cJSON_Delete(tid);
        cJSON_Delete(src);
    }
    cJSON *ns = take(nat, "signal"), *ps = cJSON_GetObjectItemCaseSensitive(p, "signal");
    if (!cJSON_IsObject(ns) || !ps) {
        cJSON_Delete(ns);
        return;
    }
    if (!cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(ps, "number"))) {
        cp_json_set(ps, "number", take(ns, "number"));
        cp_json_set(ps, "name", take(ns, "name"));
    }
    static const char *keys[] = {"code", "code_name", "code_text", "fault_address",
                                 "sender_pid", "sender_uid", "self_sent"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (cJSON_GetObjectItemCaseSensitive(ns, keys[i]))
            cp_json_set(ps, keys[i], take(ns, keys[i]));
    cJSON_Delete(ns);
}

void report_native_merge(cJSON *r, cJSON *nat, const cJSON *threads_json)
{
    cp_utf8_clean_tree(nat);
    merge_process(r, nat);
    cJSON *threads = take(nat, "threads"), *shaped = cJSON_CreateArray();
    struct cp_jindex info, info_ns;
    cp_jindex_build(&info, threads_json, "tid");
    cp_jindex_build(&info_ns, threads_json, "ns_tid");
    while (threads && threads->child)
        cJSON_AddItemToArray(shaped,
                             shape_thread(cJSON_DetachItemViaPointer(threads, threads->child),
                                          &info, &info_ns));
    cp_jindex_free(&info);
    cp_jindex_free(&info_ns);
    cJSON_Delete(threads);
    cp_json_set(r, "threads", shaped);
    cp_json_set(r, "unwinder", take(nat, "unwinder"));
    cp_json_set(r, "frames_dropped", take(nat, "frames_dropped"));
    cp_json_set(r, "cause", take(nat, "cause"));
    cp_json_set(r, "modules", take(nat, "modules"));
    cp_json_set(r, "python", take(nat, "python"));
    cJSON *a = cJSON_CreateObject();
    cp_json_set(a, "complete", take(nat, "complete"));
    cp_json_set(a, "error", take(nat, "error"));
    cp_json_set(a, "warnings", take(nat, "warnings"));
    cp_json_set(a, "core", take(nat, "core"));
    if (cJSON_GetObjectItemCaseSensitive(nat, "threads_cap"))
        cp_json_set(a, "threads_cap", take(nat, "threads_cap"));
    cp_json_set(r, "analysis", a);
    cJSON_Delete(nat);
}

void report_native_skipped(cJSON *r, const char *reason)
{
    cp_json_set(r, "unwinder", cJSON_CreateNull());
    cp_json_set(r, "frames_dropped", cJSON_CreateNumber(0));
    cp_json_set(r, "cause", cJSON_CreateNull());
    cp_json_set(r, "modules", cJSON_CreateArray());
    cJSON *a = cJSON_CreateObject();
    cp_json_set(a, "complete", cJSON_CreateFalse());
    cp_json_set(a, "error", cJSON_CreateString(reason));
    cp_json_set(a, "warnings", cJSON_CreateArray());
    cp_json_set(a, "core", cJSON_CreateNull());
    cp_json_set(r, "analysis", a);
}

/* ---- text ---- */

static void label(FILE *out, const char *l)
{
    fprintf(out, "%-10s", l);
}

static void line(FILE *out, const char *l, const char *s)
{
    if (!s)
        return;
    label(out, l);
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

/* The thread's Python frames as a Python traceback (most recent call last), each with the native
 * frame (#N) of the _PyEval_EvalFrameDefault that runs it. */
static void print_python(FILE *out, const cJSON *t)
{
    const cJSON *pf = cJSON_GetObjectItemCaseSensitive(t, "python_frames");
    const cJSON *py = cJSON_GetObjectItemCaseSensitive(t, "python");
    int n = cJSON_GetArraySize(pf);
    if (!n && !cp_jstr(py, "error"))
        return;
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
    /* the innermost TEXT_PYTHON_FRAMES, outermost first */
    const cJSON *shown[TEXT_PYTHON_FRAMES], *it;
    int k = 0;
    cJSON_ArrayForEach(it, pf)
    {
        if (k == TEXT_PYTHON_FRAMES)
            break;
        shown[k++] = it;
    }
    if (n > k)
        fprintf(out, "    ... %d outer frames shown by --json\n", n - k);
    for (int i = k - 1; i >= 0; i--) {
        const cJSON *f = shown[i];
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
    }
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

static void print_frames(FILE *out, const cJSON *t, int max)
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
    if (total > max || dropped > 0)
        fprintf(out, "  ... %d more frames shown by --json, %.0f beyond the frame cap\n",
                total > max ? total - max : 0, dropped);
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
    print_python(out, t);
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
    print_frames(out, first, TEXT_OTHER_FRAMES);
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
            print_frames(out, t, TEXT_CRASHED_FRAMES);
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

static void print_cause(FILE *out, const cJSON *r)
{
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(r, "cause");
    line(out, "signal", cp_jstr(c, "summary"));
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "stack_overflow")))
        line(out, "cause", cp_jstr(c, "stack_overflow_detail"));
    const char *am = cp_jstr(c, "abort_message");
    if (am) {
        label(out, "abort");
        cp_text_put(out, am);
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "abort_message_heuristic")))
            fputs(" (heuristic: found on the stack)", out);
        fputc('\n', out);
    }
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(c, "exception");
    if (cp_jstr(e, "type")) {
        label(out, "exception");
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

void report_native_print(FILE *out, const cJSON *r)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(r, "analysis");
    if (!a)
        return;
    print_cause(out, r);
    const cJSON *threads = cJSON_GetObjectItemCaseSensitive(r, "threads");
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(r, "process");
    if (cJSON_GetArraySize(threads) > 0) {
        label(out, "threads");
        fprintf(out, "%d, crashed tid %.0f", cJSON_GetArraySize(threads),
                cp_jnum_or(p, "crashed_tid", -1));
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
        label(out, "python");
        fputs("CPython ", out);
        cp_text_put(out, cp_jstr(py, "version") ? cp_jstr(py, "version") : "?");
        const cJSON *gil = cJSON_GetObjectItemCaseSensitive(py, "gil");
        if (cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(gil, "holder_tid")))
            fprintf(out, ", GIL held by tid %.0f", cp_jnum_or(gil, "holder_tid", 0));
        else if (cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(gil, "locked")))
            fputs(", GIL free", out);
        if (cp_jstr(py, "error")) {
            fputs(": ", out);
            cp_text_put(out, cp_jstr(py, "error"));
        }
        fputc('\n', out);
    }
    const cJSON *w;
    cJSON_ArrayForEach(w, cJSON_GetObjectItemCaseSensitive(a, "warnings"))
        if (cJSON_IsString(w))
            line(out, "warning", w->valuestring);
    cJSON_ArrayForEach(w, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(a, "core"), "warnings"))
        if (cJSON_IsString(w))
            line(out, "warning", w->valuestring);
    if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(a, "complete")))
        line(out, "analysis", cp_jstr(a, "error") ? cp_jstr(a, "error") : "incomplete");
    print_threads(out, r);
    print_modules(out, r);
}
