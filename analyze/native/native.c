/* native.c - the native analysis, run in a sandboxed child that streams JSON lines to the parent.
 *
 * Main data structures: in the child, struct job (the bundle and the options) and the line
 * protocol - one JSON object per line, its "t" member saying what it is:
 *   core     {arch, threads, segments, warnings[], unwinder}
 *   crash    {crashed_tid, crashed_tid_source, signal{...}, summary, stack_overflow...}
 *   modules  {modules[]}           (before unwinding; sent again at the end, the last one wins:
 *                                   files are looked up lazily, for the modules frames fall in)
 *   thread   {thread}              (crashed thread first, then the core's order)
 *   cause    {abort_message..., exception}
 *   python   {python}              (the CPython runtime found, python.h; only when there is one)
 *   cap      {cap, threads}        (more threads than NATIVE_MAX_THREADS: the rest not unwound)
 *   error    {message}             (the analysis cannot go on)
 *   end      {}
 * In the parent, assemble() folds the lines into the object native.h describes.
 */
#include "util.h" /* write_all */
#include "native.h"
#include "jpath.h"

#include "bundle.h"
#include "cause.h"
#include "core.h"
#include "modules.h"
#include "python.h"
#include "sandbox.h"
#include "symbolize.h"
#include "unwind_ucd.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_CPU_S 120u
#define DEFAULT_WALL_S NATIVE_DEFAULT_WALL_S
#define DEFAULT_AS (32ull << 30) /* libdw maps whole files: a CUDA process maps several GiB */
#define MANIFEST_MAX (16u << 20)
#define SNAP_INFO_MAX (16u << 20) /* snap.json */
#define MAX_OUTPUT (512u << 20)

struct job {
    struct bundle *b;  /* NULL: open `path` (native_start_path) */
    const char *path;
    struct native_opts o;
    char comm[64];     /* the manifest's comm, when this job read it */
};

/* ---- small JSON helpers ---- */

static void add_hex(cJSON *o, const char *key, uint64_t v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "0x%" PRIx64, v);
    cJSON_AddStringToObject(o, key, buf);
}

/* Strings from the core or the binaries: cJSON escapes controls; invalid UTF-8 is the caller's
 * to clean (cmd_analyze does it for the whole report). NULL becomes null. */
static void add_str(cJSON *o, const char *key, const char *s)
{
    if (s)
        cJSON_AddStringToObject(o, key, s);
    else
        cJSON_AddNullToObject(o, key);
}

/* Sends one line (and frees j): printed into a buffer kept for the next line, and written with
 * its newline in one write (a 64-thread core sends ~70 lines of ~4 KiB). */
#define EMIT_BUF (256u << 10)
static int emit(int fd, const char *type, cJSON *j)
{
    static char *buf;
    if (!j)
        return -1;
    cJSON_AddStringToObject(j, "t", type);
    if (!buf)
        buf = malloc(EMIT_BUF);
    /* cJSON asks for 5 bytes of slack; one more is the newline's */
    char *s = buf && cJSON_PrintPreallocated(j, buf, (int)EMIT_BUF - 8, 0)
                  ? buf
                  : cJSON_PrintUnformatted(j); /* a line longer than the buffer */
    cJSON_Delete(j);
    if (!s)
        return -1;
    size_t len = strlen(s);
    if (s == buf) {
        buf[len] = '\n';
        return write_all(fd, buf, len + 1);
    }
    int rc = write_all(fd, s, len) || write_all(fd, "\n", 1);
    free(s);
    return rc;
}

static int emit_error(int fd, const char *message)
{
    cJSON *j = cJSON_CreateObject();
    add_str(j, "message", message);
    emit(fd, "error", j);
    return 2;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- child: lines ---- */

static cJSON *core_line(const struct core *c, const struct native_opts *o)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "arch", c->arch == CORE_ARCH_X86_64 ? "x86_64" : "aarch64");
    cJSON_AddNumberToObject(j, "threads", (double)c->nthreads);
    cJSON_AddNumberToObject(j, "segments", (double)c->nsegs);
    cJSON_AddNumberToObject(j, "mapped_files", (double)c->nfiles);
    cJSON *w = cJSON_AddArrayToObject(j, "warnings");
    for (size_t i = 0; i < c->nwarnings; i++)
        cJSON_AddItemToArray(w, cJSON_CreateString(c->warnings[i]));
    cJSON_AddStringToObject(j, "unwinder", unwind_method_name(o->unwind.method));
    return j;
}

static cJSON *crash_line(const struct core *c, const struct cause *z)
{
    cJSON *j = cJSON_CreateObject();
    if (z->crashed >= 0)
        cJSON_AddNumberToObject(j, "crashed_tid", c->threads[z->crashed].tid);
    else
        cJSON_AddNullToObject(j, "crashed_tid");
    add_str(j, "crashed_tid_source", z->crashed_source);
    cJSON *s = cJSON_AddObjectToObject(j, "signal");
    cJSON_AddNumberToObject(s, "number", z->signo);
    cJSON_AddStringToObject(s, "name", z->signame);
    if (z->have_code)
        cJSON_AddNumberToObject(s, "code", z->code);
    else
        cJSON_AddNullToObject(s, "code");
    add_str(s, "code_name", z->code_name);
    add_str(s, "code_text", z->code_text);
    if (z->have_addr)
        add_hex(s, "fault_address", z->addr);
    else
        cJSON_AddNullToObject(s, "fault_address");
    if (z->have_sender) {
        cJSON_AddNumberToObject(s, "sender_pid", z->sender_pid);
        cJSON_AddNumberToObject(s, "sender_uid", z->sender_uid);
        cJSON_AddBoolToObject(s, "self_sent", z->self_sent);
    }
    cJSON_AddStringToObject(j, "summary", z->summary);
    cJSON_AddBoolToObject(j, "stack_overflow", z->stack_overflow);
    add_str(j, "stack_overflow_detail", z->stack_overflow ? z->overflow_detail : NULL);
    return j;
}

static cJSON *cause_line(const struct cause *z)
{
    cJSON *j = cJSON_CreateObject();
    add_str(j, "abort_message", z->abort_message);
    add_str(j, "abort_message_source", z->abort_source);
    cJSON_AddBoolToObject(j, "abort_message_heuristic", z->abort_heuristic);
    if (z->exception_type) {
        cJSON *e = cJSON_AddObjectToObject(j, "exception");
        add_str(e, "type", z->exception_type);
        add_str(e, "what", z->exception_what);
        cJSON_AddBoolToObject(e, "heuristic", z->exception_heuristic);
    } else {
        cJSON_AddNullToObject(j, "exception");
    }
    return j;
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s && s[1] ? s + 1 : p;
}

static cJSON *modules_line(struct unwind_session *s)
{
    const struct modules *m = unwind_modules(s);
    Dwfl *dwfl = unwind_dwfl(s);
    cJSON *j = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(j, "modules");
    char hex[2 * MODULES_MAX_BUILD_ID + 1];
    for (size_t i = 0; i < m->n; i++) {
        const struct module *mod = &m->v[i];
        cJSON *o = cJSON_CreateObject();
        add_str(o, "path", mod->name);
        add_hex(o, "start", mod->start);
        add_hex(o, "end", mod->end);
        if (mod->bias_known)
            add_hex(o, "bias", mod->bias);
        else
            cJSON_AddNullToObject(o, "bias");
        add_str(o, "build_id", mod->build_id_len ? modules_build_id_hex(mod, hex, sizeof(hex)) : NULL);
        add_str(o, "found_at", mod->found_at);
        cJSON_AddBoolToObject(o, "debug_only", mod->debug_only);
        const char *mainf = NULL, *debugf = NULL;
        Dwfl_Module *dm = dwfl ? dwfl_addrmodule(dwfl, mod->start) : NULL;
        if (dm)
            dwfl_module_info(dm, NULL, NULL, NULL, NULL, NULL, &mainf, &debugf);
        add_str(o, "debug_file", debugf && (!mainf || strcmp(mainf, debugf)) ? debugf : NULL);
        add_str(o, "problem", mod->problem);
        cJSON_AddBoolToObject(o, "looked_up", mod->looked_up);
        cJSON_AddItemToArray(a, o);
    }
    return j;
}

static void frame_json(cJSON *arr, const struct sym_frame *f, size_t index,
                       const struct unwind_frame *uf)
{
    char hex[2 * MODULES_MAX_BUILD_ID + 1];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "index", (double)index);
    add_hex(o, "pc", f->pc);
    add_str(o, "function", f->function);
    add_str(o, "function_full", f->function_full);
    add_str(o, "symbol", f->symbol);
    if (f->have_symbol_offset)
        add_hex(o, "symbol_offset", f->symbol_offset);
    add_str(o, "module", f->module ? base_name(f->module->name) : NULL);
    if (f->module)
        add_hex(o, "module_offset", f->module_offset);
    else
        cJSON_AddNullToObject(o, "module_offset");
    add_str(o, "build_id", f->module && f->module->build_id_len
                               ? modules_build_id_hex(f->module, hex, sizeof(hex))
                               : NULL);
    if (f->have_elf_vaddr)
        add_hex(o, "elf_address", f->elf_vaddr);
    add_str(o, "file", f->file);
    if (f->line)
        cJSON_AddNumberToObject(o, "line", f->line);
    else
        cJSON_AddNullToObject(o, "line");
    if (f->column)
        cJSON_AddNumberToObject(o, "column", f->column);
    cJSON_AddBoolToObject(o, "inline", f->inline_);
    cJSON_AddStringToObject(o, "trust", unwind_trust_name(uf->trust));
    if (uf->tail_call)
        cJSON_AddBoolToObject(o, "tail_call", 1);
    cJSON_AddItemToArray(arr, o);
}

/* Which unwinder produced a thread's frames, and why the second one ran (see unwind_all). */
struct thread_how {
    const char *unwinder;  /* "dwfl", "fp" or "libunwind" */
    const char *fallback;  /* why libunwind ran after libdwfl; NULL when it did not */
    int fallback_used;     /* its frames were taken */
    const char *other;     /* how the walk whose frames were not taken ended */
};

/* symbolize_pc() results by (pc, activation), for the whole run: the threads of one process share
 * most of their frames (libdwfl's symbol lookup is a linear search of the symbol table). */
#define SYMCACHE_SLOTS 2048u
struct symcache {
    uint64_t pc;
    int activation, used;
    struct sym_list l;
};

static const struct sym_list *symbolize_cached(struct symcache *cache, struct unwind_session *s,
                                               uint64_t pc, int activation)
{
    struct symcache *e = &cache[((pc * 0x9E3779B97F4A7C15ull) >> 32 ^ (uint64_t)!!activation) %
                                SYMCACHE_SLOTS];
    if (e->used && e->pc == pc && e->activation == !!activation)
        return &e->l;
    if (e->used)
        symbolize_list_free(&e->l);
    e->used = 0;
    if (symbolize_pc(unwind_dwfl(s), unwind_modules(s), pc, activation, &e->l))
        return NULL;
    e->pc = pc;
    e->activation = !!activation;
    e->used = 1;
    return &e->l;
}

static void symcache_free(struct symcache *cache)
{
    for (size_t i = 0; cache && i < SYMCACHE_SLOTS; i++)
        if (cache[i].used)
            symbolize_list_free(&cache[i].l);
    free(cache);
}

static cJSON *frames_array(struct unwind_session *s, struct symcache *cache,
                           const struct unwind_stack *st)
{
    cJSON *frames = cJSON_CreateArray();
    for (size_t i = 0; frames && i < st->nframes; i++) {
        const struct unwind_frame *uf = &st->frames[i];
        const struct sym_list *l = symbolize_cached(cache, s, uf->pc, uf->activation);
        if (!l)
            break;
        if (uf->tail_call && l->n > 1) { /* as gdb: the innermost scope at the call site */
            struct sym_frame f0 = l->v[0];
            f0.inline_ = 0;
            frame_json(frames, &f0, i, uf);
            continue;
        }
        for (size_t k = 0; k < l->n; k++)
            frame_json(frames, &l->v[k], i, uf);
    }
    return frames;
}

/* frames[] already printed, by stack: the waiting threads of a process share a few stacks (63 of
 * a 64-thread core have 3), and each is built and printed once; a thread line then carries the
 * text as it is (cJSON_CreateRaw). What frames[] shows of a frame is its pc, activation, trust
 * and tail_call, so stacks equal in those print the same. */
#define PRINTED_MAX 4096
struct printed {
    size_t n;
    struct unwind_frame *f;
    char *json;
};
struct printed_set {
    struct printed *v;
    size_t n;
};

static int same_stack(const struct printed *p, const struct unwind_stack *st)
{
    if (p->n != st->nframes)
        return 0;
    for (size_t i = 0; i < p->n; i++) {
        const struct unwind_frame *a = &p->f[i], *b = &st->frames[i];
        if (a->pc != b->pc || !a->activation != !b->activation || a->trust != b->trust ||
            !a->tail_call != !b->tail_call)
            return 0;
    }
    return 1;
}

/* The printed frames[] of st (NULL: out of memory). */
static const char *printed_frames(struct printed_set *ps, struct unwind_session *s,
                                  struct symcache *cache, const struct unwind_stack *st)
{
    for (size_t i = 0; i < ps->n; i++)
        if (same_stack(&ps->v[i], st))
            return ps->v[i].json;
    if (ps->n == PRINTED_MAX)
        return NULL;
    cJSON *arr = frames_array(s, cache, st);
    char *json = arr ? cJSON_PrintUnformatted(arr) : NULL;
    cJSON_Delete(arr);
    struct printed *v = json ? realloc(ps->v, (ps->n + 1) * sizeof(*v)) : NULL;
    struct unwind_frame *f = v ? malloc((st->nframes + 1) * sizeof(*f)) : NULL;
    if (v)
        ps->v = v;
    if (!f) {
        free(json);
        return NULL;
    }
    memcpy(f, st->frames, st->nframes * sizeof(*f));
    ps->v[ps->n++] = (struct printed){st->nframes, f, json};
    return json;
}

static void printed_free(struct printed_set *ps)
{
    for (size_t i = 0; i < ps->n; i++) {
        free(ps->v[i].f);
        free(ps->v[i].json);
    }
    free(ps->v);
}

/* One thread's line. ps (NULL: none) supplies frames[] as printed text, for a thread without
 * Python frames (python_thread_json reads the array). */
static cJSON *thread_line(struct unwind_session *s, struct symcache *cache, struct printed_set *ps,
                          const struct unwind_stack *st, int crashed,
                          const struct thread_how *how)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "tid", st->tid);
    cJSON_AddBoolToObject(j, "crashed", crashed);
    cJSON_AddStringToObject(j, "unwinder", how->unwinder);
    if (how->fallback) {
        cJSON *f = cJSON_AddObjectToObject(j, "unwinder_fallback");
        add_str(f, "reason", how->fallback);
        cJSON_AddBoolToObject(f, "used", how->fallback_used);
        add_str(f, "other", how->other);
    } else {
        cJSON_AddNullToObject(j, "unwinder_fallback");
    }
    const char *text = ps ? printed_frames(ps, s, cache, st) : NULL;
    cJSON_AddItemToObject(j, "frames", text ? cJSON_CreateRaw(text) : frames_array(s, cache, st));
    cJSON_AddNumberToObject(j, "frames_dropped", (double)st->dropped);
    cJSON_AddBoolToObject(j, "unwind_complete", st->complete);
    add_str(j, "unwind_stop", st->stop[0] ? st->stop : NULL);
    return j;
}

/* ---- child: the run ---- */

/* CRASHPACK_TEST_CHILD_CRASH=N makes the child die by SIGSEGV after N threads: how the tests
 * check that a crash while parsing still gives a partial report (no bundle can set it). */
static long test_crash_after(void)
{
    const char *v = getenv("CRASHPACK_TEST_CHILD_CRASH");
    return v && *v ? strtol(v, NULL, 10) : -1;
}

/* CRASHPACK_TEST_DWFL_CUT=N cuts every libdwfl stack after N frames, as if libdwfl had stopped
 * there with an error: how the tests exercise the fallback to libunwind when the fixtures give no
 * natural case (no bundle can set it). */
static long test_dwfl_cut(void)
{
    const char *v = getenv("CRASHPACK_TEST_DWFL_CUT");
    return v && *v ? strtol(v, NULL, 10) : -1;
}

/* The second unwinder, started on first use; NULL (with the reason sent once as a warning) when
 * libunwind cannot unwind this core. */
struct second {
    struct ucd_session *ucd;
    int tried;
    int sealed; /* native_opts.sealed: libunwind-coredump opens its files by path */
    char err[512];
};

static struct ucd_session *second_get(int fd, struct unwind_session *s, struct core *c,
                                      struct second *u)
{
    if (!u->tried) {
        u->tried = 1;
        if (u->sealed)
            snprintf(u->err, sizeof(u->err), "%s",
                     "the second unwinder (libunwind) is off in a sealed analysis: it opens "
                     "files by path");
        if (u->sealed || ucd_begin(s, c, &u->ucd, u->err, sizeof(u->err))) {
            cJSON *w = cJSON_CreateObject();
            add_str(w, "message", u->err);
            emit(fd, "warning", w);
        }
    }
    return u->ucd;
}

static void describe_end(const struct unwind_stack *st, const char *who, char *buf, size_t len)
{
    if (st->complete)
        snprintf(buf, len, "%s: %zu frames, complete", who, st->nframes + st->dropped);
    else
        snprintf(buf, len, "%s: %zu frames, %s", who, st->nframes + st->dropped,
                 st->stop[0] ? st->stop : "stopped early");
}

/* One thread: with --unwinder=libunwind, libunwind alone (libdwfl when libunwind cannot run);
 * with fp, the frame-pointer walk; by default libdwfl, then libunwind as well when libdwfl's
 * stack looks cut short (ucd_fallback_reason), keeping libunwind's when it is better. */
static int unwind_one(int fd, struct core *c, struct unwind_session *s, struct second *u,
                      const struct core_thread *t, struct unwind_stack *st, struct thread_how *how,
                      char *why, size_t whylen, char *other, size_t otherlen)
{
    enum unwind_method m = unwind_options(s)->method;
    memset(how, 0, sizeof(*how));
    how->unwinder = unwind_method_name(m == UNWIND_FP ? UNWIND_FP : UNWIND_DWFL);
    if (m == UNWIND_LIBUNWIND) {
        struct ucd_session *ucd = second_get(fd, s, c, u);
        if (ucd) {
            how->unwinder = "libunwind";
            return ucd_thread(ucd, t, st);
        }
        return unwind_thread(s, t, st);
    }
    if (unwind_thread(s, t, st))
        return -1;
    long cut = test_dwfl_cut();
    if (m != UNWIND_DWFL)
        return 0;
    if (cut >= 0 && st->nframes > (size_t)cut) {
        st->nframes = (size_t)cut;
        st->dropped = 0;
        st->complete = 0;
        snprintf(st->stop, sizeof(st->stop), "cut after %ld frames by CRASHPACK_TEST_DWFL_CUT", cut);
    }
    if (!ucd_fallback_reason(s, st, why, whylen))
        return 0;
    how->fallback = why;
    struct ucd_session *ucd = second_get(fd, s, c, u);
    if (!ucd) {
        snprintf(other, otherlen, "libunwind: %s", u->err);
        how->other = other;
        return 0;
    }
    struct unwind_stack st2;
    if (ucd_thread(ucd, t, &st2)) {
        unwind_stack_free(&st2);
        return -1;
    }
    if (ucd_better(s, st, &st2)) {
        describe_end(st, "libdwfl", other, otherlen);
        unwind_stack_free(st);
        *st = st2;
        how->unwinder = "libunwind";
        how->fallback_used = 1;
    } else {
        describe_end(&st2, "libunwind", other, otherlen);
        unwind_stack_free(&st2);
    }
    how->other = other;
    return 0;
}

static int unwind_all(int fd, struct core *c, struct unwind_session *s, const struct cause *z,
                      const struct py_state *py, int sealed)
{
    long crash_after = test_crash_after();
    struct symcache *cache = calloc(SYMCACHE_SLOTS, sizeof(*cache));
    if (!cache)
        return emit_error(fd, "out of memory while unwinding");
    struct second u = {.sealed = sealed};
    struct printed_set ps = {0};
    int rc = 0;
    size_t todo = c->nthreads < NATIVE_MAX_THREADS ? c->nthreads : NATIVE_MAX_THREADS;
    for (size_t k = 0; k < todo && !rc; k++) {
        if (crash_after >= 0 && (long)k == crash_after)
            raise(SIGSEGV);
        /* the crashed thread first, then the others in the core's order */
        size_t i = z->crashed < 0 ? k : k == 0 ? (size_t)z->crashed : k <= (size_t)z->crashed ? k - 1 : k;
        struct unwind_stack st;
        struct thread_how how;
        char why[512], other[512];
        if (unwind_one(fd, c, s, &u, &c->threads[i], &st, &how, why, sizeof(why), other,
                       sizeof(other))) {
            unwind_stack_free(&st);
            rc = emit_error(fd, "out of memory while unwinding");
            break;
        }
        cJSON *tl = thread_line(s, cache, python_thread_known(py, st.tid) ? NULL : &ps, &st,
                                (int)i == z->crashed, &how);
        if (tl)
            python_thread_json(py, st.tid, tl, &st);
        rc = emit(fd, "thread", tl) ? 3 : 0;
        unwind_stack_free(&st);
    }
    if (!rc && todo < c->nthreads) {
        cJSON *cl = cJSON_CreateObject();
        cJSON_AddNumberToObject(cl, "cap", (double)todo);
        cJSON_AddNumberToObject(cl, "threads", (double)c->nthreads);
        rc = emit(fd, "cap", cl) ? 3 : 0;
    }
    printed_free(&ps);
    ucd_end(u.ucd);
    symcache_free(cache);
    return rc;
}

static int analyze(struct job *j, int fd, struct core *c)
{
    char err[512] = "";
    struct cause z;
    memset(&z, 0, sizeof(z));
    cause_crashed_thread(c, j->o.manifest_tid, &z);
    cause_signal(c, &z);
    cause_stack_overflow(c, &z);
    if (emit(fd, "core", core_line(c, &j->o)) || emit(fd, "crash", crash_line(c, &z)))
        return 3;
    struct unwind_session *s = NULL;
    if (unwind_begin(c, &j->o.unwind, &s, err, sizeof(err)))
        return emit_error(fd, err);
    struct py_state py;
    memset(&py, 0, sizeof(py));
    int rc = emit(fd, "modules", modules_line(s)) ? 3 : 0;
    if (!rc && python_scan(s, &py, j->o.python_locals))
        rc = emit_error(fd, "out of memory while reading the Python threads");
    cJSON *pyj = rc ? NULL : python_state_json(&py);
    if (pyj) {
        cJSON *line = cJSON_CreateObject();
        cJSON_AddItemToObject(line, "python", pyj);
        rc = emit(fd, "python", line) ? 3 : 0;
    }
    if (!rc)
        rc = unwind_all(fd, c, s, &z, &py, j->o.sealed);
    if (!rc && z.signo == SIGABRT) {
        cause_abort_message(s, c, j->o.comm, &z);
        cause_cxx_exception(s, c, &z);
    }
    if (!rc && (emit(fd, "cause", cause_line(&z)) || emit(fd, "modules", modules_line(s))))
        rc = 3;
    if (!rc && unwind_warning(s)[0]) {
        cJSON *w = cJSON_CreateObject();
        add_str(w, "message", unwind_warning(s));
        rc = emit(fd, "warning", w) ? 3 : 0;
    }
    if (!j->o.in_process) { /* the sandboxed child: _exit follows, the kernel frees faster */
        unwind_end_for_exit(s);
        return rc;
    }
    python_free(&py);
    cause_free(&z);
    unwind_end(s);
    return rc;
}

/* What native_start's caller takes from the report, read here from manifest.json: the kernel's
 * crashed tid and the program name. */
static void manifest_hints(struct job *j)
{
    char *buf = NULL;
    size_t len = 0;
    int rc = bundle_read_all(j->b, "manifest.json", MANIFEST_MAX, &buf, &len);
    cJSON *m = rc == BUNDLE_OK || rc == BUNDLE_ETRUNC ? cJSON_ParseWithLength(buf, len) : NULL;
    free(buf);
    /* the core holds the tids of the process's own pid namespace (the kernel writes
     * task_pid_vnr): ns_tid, where the manifest has it, is the crashed thread's there */
    const cJSON *tid = cJSON_GetObjectItemCaseSensitive(m, "ns_tid");
    if (!cJSON_IsNumber(tid) || tid->valuedouble <= 0)
        tid = cJSON_GetObjectItemCaseSensitive(m, "tid");
    const cJSON *comm = cJSON_GetObjectItemCaseSensitive(m, "comm");
    if (cJSON_IsNumber(tid) && tid->valuedouble > 0 && tid->valuedouble < 2147483648.0)
        j->o.manifest_tid = (int32_t)tid->valuedouble;
    if (cJSON_IsString(comm)) {
        snprintf(j->comm, sizeof(j->comm), "%s", comm->valuestring);
        j->o.comm = j->comm;
    }
    /* python_locals: asked for at capture time (the configuration, snap --locals) */
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(m, "capture"), "python_locals")))
        j->o.python_locals = 1;
    cJSON_Delete(m);
    if (!j->o.python_locals && bundle_find(j->b, "snap.json")) {
        rc = bundle_read_all(j->b, "snap.json", SNAP_INFO_MAX, &buf, &len);
        cJSON *sj = rc == BUNDLE_OK ? cJSON_ParseWithLength(buf, len) : NULL;
        free(buf);
        j->o.python_locals = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(sj, "python_locals"));
        cJSON_Delete(sj);
    }
}

static int child_main(void *arg, int fd)
{
    struct job *j = arg;
    char err[512] = "";
    unsetenv("DEBUGINFOD_URLS"); /* never the network; the same answer for the same input */
    if (j->o.sealed && !j->o.in_process) {
        /* what is needed by path is loaded before no open by path is allowed */
        symbolize_preload();
        ucd_preload_data();
        if (sandbox_seal(err, sizeof(err)))
            return emit_error(fd, err);
    }
    if (j->o.unwind.deadline <= 0)
        j->o.unwind.deadline = now() + 0.8 * (j->o.wall_s ? j->o.wall_s : DEFAULT_WALL_S);
    struct bundle *own = NULL;
    if (!j->b) {
        if (bundle_open(j->path, &own, err, sizeof(err)))
            return emit_error(fd, err);
        j->b = own;
        manifest_hints(j);
    }
    struct core *c = NULL;
    if (core_open(j->b, "core", &c, err, sizeof(err)))
        return emit_error(fd, err);
    int rc = analyze(j, fd, c);
    if (j->o.in_process) {
        core_close(c);
        if (own) {
            bundle_close(own);
            j->b = NULL;
        }
    }
    if (!rc)
        rc = emit(fd, "end", cJSON_CreateObject()) ? 3 : 0;
    return rc;
}

/* ---- parent: assembling the lines ---- */

/* Moves every member of `from` except "t" into `to`. */
static void move_members(cJSON *to, cJSON *from)
{
    cJSON *it = from->child;
    while (it) {
        cJSON *next = it->next;
        if (strcmp(it->string, "t")) {
            cJSON *v = cJSON_DetachItemViaPointer(from, it);
            cp_json_set(to, v->string, v);
        }
        it = next;
    }
}

/* Returns 1 when the line itself went into r (the caller must not free it): a thread line is
 * moved, not copied. */
static int take_line(cJSON *r, cJSON *line, int *ended, double *dropped)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(line, "t");
    const char *type = cJSON_IsString(t) ? t->valuestring : "";
    if (!strcmp(type, "core")) {
        cJSON *u = cJSON_DetachItemFromObjectCaseSensitive(line, "unwinder");
        if (u)
            cp_json_set(r, "unwinder", u);
        cJSON_DeleteItemFromObjectCaseSensitive(line, "t");
        cp_json_set(r, "core", cJSON_Duplicate(line, 1));
    } else if (!strcmp(type, "crash")) {
        cJSON *cause = cJSON_GetObjectItemCaseSensitive(r, "cause");
        cJSON *sum = cJSON_DetachItemFromObjectCaseSensitive(line, "summary");
        cJSON *so = cJSON_DetachItemFromObjectCaseSensitive(line, "stack_overflow");
        cJSON *sd = cJSON_DetachItemFromObjectCaseSensitive(line, "stack_overflow_detail");
        cp_json_set(cause, "summary", sum ? sum : cJSON_CreateNull());
        cp_json_set(cause, "stack_overflow", so ? so : cJSON_CreateFalse());
        cp_json_set(cause, "stack_overflow_detail", sd ? sd : cJSON_CreateNull());
        move_members(r, line);
    } else if (!strcmp(type, "cause")) {
        move_members(cJSON_GetObjectItemCaseSensitive(r, "cause"), line);
    } else if (!strcmp(type, "modules") || !strcmp(type, "python")) {
        move_members(r, line);
    } else if (!strcmp(type, "thread")) {
        cJSON_DeleteItemFromObjectCaseSensitive(line, "t");
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(line, "frames_dropped");
        *dropped += cJSON_IsNumber(d) ? d->valuedouble : 0;
        cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(r, "threads"), line);
        return 1;
    } else if (!strcmp(type, "error") || !strcmp(type, "warning")) {
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(line, "message");
        if (cJSON_IsString(m))
            cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(r, type[0] == 'e' ? "errors" : "warnings"),
                                 cJSON_CreateString(m->valuestring));
    } else if (!strcmp(type, "cap")) {
        double cap = 0, all = 0;
        cp_jnum(line, "cap", &cap);
        cp_jnum(line, "threads", &all);
        cJSON *tc = cJSON_CreateObject();
        cJSON_AddNumberToObject(tc, "cap", cap);
        cJSON_AddNumberToObject(tc, "threads", all);
        cJSON_AddNumberToObject(tc, "not_analyzed", all - cap);
        cp_json_set(r, "threads_cap", tc);
        char msg[256];
        snprintf(msg, sizeof(msg),
                 "the core has %.0f threads, more than the analyzer's cap (%.0f): the first %.0f "
                 "(the crashed thread first) were analyzed, %.0f were not",
                 all, cap, cap, all - cap);
        cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(r, "errors"), cJSON_CreateString(msg));
    } else if (!strcmp(type, "end")) {
        *ended = 1;
    }
    return 0;
}

static cJSON *empty_result(const struct native_opts *o)
{
    cJSON *r = cJSON_CreateObject();
    cJSON_AddBoolToObject(r, "complete", 0);
    cJSON_AddNullToObject(r, "error");
    cJSON_AddStringToObject(r, "unwinder", unwind_method_name(o->unwind.method));
    cJSON_AddNullToObject(r, "core");
    cJSON_AddNullToObject(r, "crashed_tid");
    cJSON_AddNullToObject(r, "crashed_tid_source");
    cJSON_AddNullToObject(r, "signal");
    cJSON *c = cJSON_AddObjectToObject(r, "cause");
    cJSON_AddNullToObject(c, "summary");
    cJSON_AddItemToObject(r, "threads", cJSON_CreateArray());
    cJSON_AddNumberToObject(r, "frames_dropped", 0);
    cJSON_AddItemToObject(r, "modules", cJSON_CreateArray());
    cJSON_AddNullToObject(r, "python");
    cJSON_AddItemToObject(r, "errors", cJSON_CreateArray());
    cJSON_AddItemToObject(r, "warnings", cJSON_CreateArray());
    return r;
}

/* The child's lines, taken into the result as they arrive (the parent parses while the child
 * still unwinds): complete lines only; a line cut by the child's death is left out. */
struct feed {
    cJSON *r;
    size_t off; /* the first byte not taken yet */
    int ended;
    double dropped;
};

static int feed_lines(void *ctx, const char *buf, size_t len)
{
    struct feed *f = ctx;
    while (f->off < len) {
        const char *p = buf + f->off;
        const char *nl = memchr(p, '\n', len - f->off);
        if (!nl)
            break;
        cJSON *line = cJSON_ParseWithLength(p, (size_t)(nl - p));
        if (!cJSON_IsObject(line) || !take_line(f->r, line, &f->ended, &f->dropped))
            cJSON_Delete(line);
        f->off = (size_t)(nl - buf) + 1;
    }
    return f->ended;
}

static void set_error(cJSON *r, const char *status, int ended)
{
    const cJSON *errs = cJSON_GetObjectItemCaseSensitive(r, "errors");
    const cJSON *nt = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, "core"),
                                                       "threads");
    int done = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r, "threads"));
    char count[32] = "?", buf[1024];
    if (cJSON_IsNumber(nt))
        snprintf(count, sizeof(count), "%.0f", nt->valuedouble);
    if (cJSON_GetArraySize(errs) > 0)
        snprintf(buf, sizeof(buf), "%s", cJSON_GetArrayItem(errs, 0)->valuestring);
    else if (!ended)
        snprintf(buf, sizeof(buf), "the native analysis %s; partial result: %d of %s threads",
                 status, done, count);
    else
        snprintf(buf, sizeof(buf), "the native analysis %s", status);
    cp_json_set(r, "error", cJSON_CreateString(buf));
}

static int run_in_process(struct job *j, char **out, size_t *len, char *status, size_t slen)
{
    FILE *f = tmpfile();
    if (!f) {
        snprintf(status, slen, "could not start (tmpfile: %s)", strerror(errno));
        return -1;
    }
    int rc = child_main(j, fileno(f));
    long n = lseek(fileno(f), 0, SEEK_END);
    *out = malloc(n > 0 ? (size_t)n + 1 : 1);
    *len = 0;
    if (*out && n > 0 && pread(fileno(f), *out, (size_t)n, 0) == n)
        *len = (size_t)n;
    if (*out)
        (*out)[*len] = 0;
    fclose(f);
    snprintf(status, slen, rc ? "failed (status %d)" : "completed", rc);
    return rc ? 1 : 0;
}

struct native_job {
    struct job j;
    struct sandbox_child *h; /* NULL: in-process, or the child could not be started */
    int start_failed;
    char status[512];
};

static struct native_job *start(struct bundle *b, const char *path, const struct native_opts *o)
{
    struct native_job *n = calloc(1, sizeof(*n));
    if (!n)
        return NULL;
    n->j.b = b;
    n->j.path = path;
    n->j.o = *o;
    if (!o->in_process) {
        struct sandbox_limits l = {
            .cpu_s = o->cpu_s ? o->cpu_s : DEFAULT_CPU_S,
            .wall_s = o->wall_s ? o->wall_s : DEFAULT_WALL_S,
            .as_bytes = o->as_bytes ? o->as_bytes : DEFAULT_AS,
            .max_output = MAX_OUTPUT,
        };
        n->h = sandbox_start(child_main, &n->j, &l, n->status, sizeof(n->status));
        n->start_failed = !n->h;
    }
    return n;
}

struct native_job *native_start(struct bundle *b, const struct native_opts *o)
{
    return start(b, NULL, o);
}

struct native_job *native_start_path(const char *path, const struct native_opts *o)
{
    return start(NULL, path, o);
}

void native_cancel(struct native_job *n)
{
    if (!n)
        return;
    if (n->h)
        sandbox_cancel(n->h);
    free(n);
}

cJSON *native_run(struct bundle *b, const struct native_opts *o, int *failed)
{
    struct native_job *n = native_start(b, o);
    return n ? native_finish(n, failed) : NULL;
}

cJSON *native_finish(struct native_job *n, int *failed)
{
    const struct native_opts *o = &n->j.o;
    char *out = NULL, *status = n->status;
    size_t len = 0, slen = sizeof(n->status);
    struct feed f = {.r = empty_result(o)};
    if (!f.r) {
        if (n->h && sandbox_finish(n->h, &out, &len, status, slen) >= 0)
            free(out);
        free(n);
        return NULL;
    }
    int rc = o->in_process     ? run_in_process(&n->j, &out, &len, status, slen)
             : n->start_failed ? -1
                               : sandbox_finish_seen(n->h, feed_lines, &f, &out, &len, status, slen);
    if (rc >= 0 && out)
        feed_lines(&f, out, len);
    free(out);
    cJSON *r = f.r;
    cp_json_set(r, "frames_dropped", cJSON_CreateNumber(f.dropped));
    int ended = f.ended;
    /* a core whose headers or notes are damaged (core.h's warnings) gives a partial result */
    const cJSON *cw = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, "core"),
                                                       "warnings");
    if (cJSON_GetArraySize(cw) > 0 && cJSON_IsString(cJSON_GetArrayItem(cw, 0)) &&
        cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r, "errors")) == 0) {
        char msg[512];
        snprintf(msg, sizeof(msg), "the core is damaged or incomplete: %s",
                 cJSON_GetArrayItem(cw, 0)->valuestring);
        cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(r, "errors"), cJSON_CreateString(msg));
    }
    int ok = rc == 0 && ended && cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r, "errors")) == 0;
    cp_json_set(r, "complete", cJSON_CreateBool(ok));
    if (!ok)
        set_error(r, rc < 0 ? "could not be started" : status, ended);
    *failed = !ok;
    free(n);
    return r;
}
