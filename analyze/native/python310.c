/* python310.c - CPython 3.10 threads and frames from a core (see python310.h).
 *
 * Main data structure: struct w310 (python.c's walk, for its readers; the 3.10 layout; a one-entry
 * cache of the last code object read, and the frame and code types once seen).
 */
#include "python310.h"

#include "errmsg.h"
#include "pylayout310.h"
#include "python_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define R py_readers
#define PY310_MAX_DICT 65536u

struct code310 {
    uint64_t addr;
    char *function, *file;
    unsigned char *table;
    size_t table_len;
    int firstlineno;
    int64_t code_bytes; /* the size of co_code, in bytes */
};

struct w310 {
    struct walk *w;
    const struct py310_layout *L;
    struct code310 code;
    uint64_t frame_type, code_type,
        dict_type;      /* type objects, once one object was seen to be one */
    size_t frames_left; /* over all threads: PY_MAX_TOTAL_FRAMES */
};

const struct py_layout *py310_layout(void)
{
    return &pylayout310.base;
}

/* ---- the line table (CPython 3.10 Objects/lnotab_notes.txt, Objects/codeobject.c) ---- */

int py310_addr2line(const unsigned char *table, size_t len, int firstlineno, long addrq)
{
    if (addrq < 0)
        return firstlineno;
    const unsigned char *p = table, *end = table + len;
    long ar_start = -1, ar_end = 0;
    int computed = firstlineno, line = -1;
    /* _PyCode_CheckLineNumber: the next address range until it holds addrq */
    while (ar_end <= addrq) {
        if (end - p < 2) /* at_end (a lone last byte is no pair) */
            return -1;
        do { /* PyLineTable_NextAddressRange: advance, past empty ranges */
            ar_start = ar_end;
            ar_end += p[0];
            int ldelta = (signed char)p[1];
            p += 2;
            if (ldelta == -128) {
                line = -1;
            } else {
                computed += ldelta;
                line = computed;
            }
        } while (ar_start == ar_end && end - p >= 2);
    }
    return line;
}

/* ---- objects ---- */

/* The object's type is named want; the type's address remembered in *cache after the first. */
static int is_type(struct w310 *x, uint64_t obj, const char *want, uint64_t *cache)
{
    uint64_t type;
    if (R.rd_ptr(x->w, obj + x->L->base.ob_type, &type))
        return 0;
    if (*cache)
        return type == *cache;
    if (!R.type_is(x->w, obj, want))
        return 0;
    *cache = type;
    return 1;
}

static void code_clear(struct code310 *c)
{
    free(c->function);
    free(c->file);
    free(c->table);
    memset(c, 0, sizeof(*c));
}

static int read_code(struct w310 *x, uint64_t addr, char *err, size_t errlen)
{
    const struct py310_layout *L = x->L;
    if (x->code.addr == addr && addr)
        return 0;
    code_clear(&x->code);
    if (!addr || !is_type(x, addr, "code", &x->code_type)) {
        cp_errmsg(err, errlen, "f_code 0x%" PRIx64 " is not a readable code object", addr);
        return -1;
    }
    struct code310 *c = &x->code;
    uint64_t name, file, table, code;
    int32_t first;
    int64_t table_len;
    if (R.rd_ptr(x->w, addr + L->co_name, &name) || R.rd_ptr(x->w, addr + L->co_filename, &file) ||
        R.rd_ptr(x->w, addr + L->co_linetable, &table) ||
        R.rd_ptr(x->w, addr + L->co_code, &code) ||
        R.rd_i32(x->w, addr + L->co_firstlineno, &first)) {
        cp_errmsg(err, errlen, "code object 0x%" PRIx64 " is not in the core", addr);
        return -1;
    }
    c->addr = addr;
    c->function = R.rd_str(x->w, name);
    c->file = R.rd_str(x->w, file);
    c->firstlineno = first;
    if (!code || R.rd_i64(x->w, code + L->base.ob_size, &c->code_bytes) || c->code_bytes < 0)
        c->code_bytes = -1;
    if (table && !R.rd_i64(x->w, table + L->base.ob_size, &table_len) && table_len > 0 &&
        table_len <= (int64_t)PY_MAX_LINETABLE) {
        c->table = malloc((size_t)table_len);
        if (c->table && !R.rd(x->w, table + L->bytes_sval, c->table, (size_t)table_len))
            c->table_len = (size_t)table_len;
    }
    return 0;
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

/* ---- threads ---- */

static int walk_frames(struct w310 *x, uint64_t tstate, struct py_thread *t)
{
    const struct py310_layout *L = x->L;
    uint64_t frame;
    if (R.rd_ptr(x->w, tstate + L->ts_frame, &frame)) {
        cp_errmsg(t->error, sizeof(t->error),
                  "the thread state's frame pointer is not in the core");
        return 0;
    }
    size_t cap = 0;
    while (frame) {
        if (t->nframes == PY_MAX_FRAMES || !x->frames_left) {
            t->truncated = 1;
            break;
        }
        x->frames_left--;
        uint64_t code, back;
        int32_t lasti;
        if (!is_type(x, frame, "frame", &x->frame_type)) {
            cp_errmsg(t->error, sizeof(t->error),
                      "frame 0x%" PRIx64
                      " is not a readable frame object (a slim core keeps only the stacks)",
                      frame);
            break;
        }
        if (R.rd_ptr(x->w, frame + L->f_code, &code) || R.rd_ptr(x->w, frame + L->f_back, &back) ||
            R.rd_i32(x->w, frame + L->f_lasti, &lasti)) {
            cp_errmsg(t->error, sizeof(t->error), "frame 0x%" PRIx64 " is not in the core", frame);
            break;
        }
        if (read_code(x, code, t->error, sizeof(t->error)))
            break;
        if (t->nframes == cap) {
            size_t ncap = cap ? 2 * cap : 16;
            struct py_frame *v = realloc(t->frames, ncap * sizeof(*v));
            if (!v)
                return -1;
            t->frames = v;
            cap = ncap;
        }
        struct code310 *c = &x->code;
        struct py_frame *f = &t->frames[t->nframes++];
        memset(f, 0, sizeof(*f));
        f->addr = frame;
        f->is_entry = 1; /* every 3.10 frame is its own _PyEval_EvalFrameDefault call */
        f->function = dup_or_null(c->function);
        f->file = dup_or_null(c->file);
        /* PyCode_Addr2Line(f_code, f_lasti * sizeof(_Py_CODEUNIT)): f_lasti counts code units */
        int64_t addrq = (int64_t)lasti * (int64_t)L->code_unit;
        f->line = (c->code_bytes >= 0 && addrq >= c->code_bytes) || !c->table
                      ? (addrq < 0 ? c->firstlineno : -1)
                      : py310_addr2line(c->table, c->table_len, c->firstlineno, (long)addrq);
        if (back == frame) {
            cp_errmsg(t->error, sizeof(t->error), "frame 0x%" PRIx64 " links to itself", frame);
            break;
        }
        frame = back;
    }
    return 0;
}

/* ---- thread names: threading._active[ident]._name, 3.10 dicts ---- */

/* The entries of a dict's keys object: *entries, *n (dk_nentries, capped). */
static int keys_entries(struct w310 *x, uint64_t keys, uint64_t *entries, int64_t *n)
{
    const struct py310_layout *L = x->L;
    int64_t size;
    if (!keys || R.rd_i64(x->w, keys + L->dk_size, &size) ||
        R.rd_i64(x->w, keys + L->dk_nentries, n) || size < 8 || size > ((int64_t)1 << 40) ||
        (size & (size - 1)) || *n < 0 || *n > size)
        return -1;
    /* DK_IXSIZE: the index width grows with the table */
    uint64_t ix = size <= 0xff ? 1 : size <= 0xffff ? 2 : size <= 0xffffffffLL ? 4 : 8;
    *entries = keys + L->dk_indices + (uint64_t)size * ix;
    if (*n > (int64_t)PY310_MAX_DICT)
        *n = PY310_MAX_DICT;
    return 0;
}

/* Entry `key` (a str) of a dict; its value from the entry, or from the split dict's values. */
static int dict_find(struct w310 *x, uint64_t dict, const char *key, uint64_t *value)
{
    const struct py310_layout *L = x->L;
    uint64_t keys, values, entries;
    int64_t n;
    if (!dict || !is_type(x, dict, "dict", &x->dict_type) ||
        R.rd_ptr(x->w, dict + L->dict_keys, &keys) ||
        R.rd_ptr(x->w, dict + L->dict_values, &values) || keys_entries(x, keys, &entries, &n))
        return -1;
    for (int64_t i = 0; i < n; i++) {
        uint64_t e = entries + (uint64_t)i * L->entry_size, k;
        if (R.rd_ptr(x->w, e + L->entry_key, &k))
            return -1;
        if (!k || !R.is_str(x->w, k))
            continue;
        char *ks = R.rd_str(x->w, k);
        int match = ks && !strcmp(ks, key);
        free(ks);
        if (match)
            return values ? R.rd_ptr(x->w, values + (uint64_t)i * 8, value)
                          : R.rd_ptr(x->w, e + L->entry_value, value);
    }
    return -1;
}

/* An instance attribute, from its __dict__ (tp_dictoffset). */
static int attr_find(struct w310 *x, uint64_t obj, const char *key, uint64_t *value)
{
    uint64_t type, dict;
    int64_t off;
    if (R.rd_ptr(x->w, obj + x->L->base.ob_type, &type) ||
        R.rd_i64(x->w, type + x->L->tp_dictoffset, &off) || off <= 0 || off > 4096 ||
        R.rd_ptr(x->w, obj + (uint64_t)off, &dict))
        return -1;
    return dict_find(x, dict, key, value);
}

/* Names the threads of one interpreter from threading._active. Best effort: silent when the
 * module is not loaded or an object is not readable. */
static void thread_names(struct w310 *x, uint64_t interp, struct py_state *st, size_t first)
{
    const struct py310_layout *L = x->L;
    uint64_t modules, mod, mdict, active, keys, values, entries;
    int64_t n;
    if (R.rd_ptr(x->w, interp + L->interp_modules, &modules) ||
        dict_find(x, modules, "threading", &mod) || R.rd_ptr(x->w, mod + L->module_dict, &mdict) ||
        dict_find(x, mdict, "_active", &active) || !is_type(x, active, "dict", &x->dict_type) ||
        R.rd_ptr(x->w, active + L->dict_keys, &keys) ||
        R.rd_ptr(x->w, active + L->dict_values, &values) || values ||
        keys_entries(x, keys, &entries, &n))
        return;
    for (int64_t i = 0; i < n; i++) {
        uint64_t e = entries + (uint64_t)i * L->entry_size, k, v, ident, name;
        if (R.rd_ptr(x->w, e + L->entry_key, &k) || !k || R.rd_ptr(x->w, e + L->entry_value, &v) ||
            !v || R.rd_ulong(x->w, k, &ident))
            continue;
        for (size_t t = first; t < st->nthreads; t++) {
            if (st->threads[t].thread_id != ident || st->threads[t].name)
                continue;
            if (!attr_find(x, v, "_name", &name) && R.is_str(x->w, name))
                st->threads[t].name = R.rd_str(x->w, name);
        }
    }
}

/* ---- the runtime ---- */

/* What walk_runtime carries from one thread state to the next. */
struct tstate_walk {
    size_t cap;              /* st->threads' capacity (py_readers.add_thread) */
    size_t no_tid;           /* threads without a readable kernel thread id */
    uint64_t no_tid_example; /* the first one's pthread_t */
};

/* The threads of interpreter interp (id), from its first thread state ts on: each one's ids, GIL
 * and frames, added to st. A loop or a thread state not this interpreter's ends the list (noted
 * in st->error). 0, or -1 when out of memory. */
static int walk_tstates(struct w310 *x, struct py_state *st, uint64_t interp, int64_t id,
                        uint64_t ts, struct tstate_walk *tw)
{
    const struct py310_layout *L = x->L;
    for (unsigned nt = 0; ts && nt < PY_MAX_THREADS; nt++) {
        uint64_t back, tnext;
        int seen = 0;
        for (size_t k = 0; k < st->nthreads && !seen; k++)
            seen = st->threads[k].tstate == ts;
        if (seen || st->nthreads >= PY_MAX_THREADS) {
            cp_errmsg(st->error, sizeof(st->error), "the thread-state list %s",
                      seen ? "loops" : "is longer than the cap");
            break;
        }
        if (R.rd_ptr(x->w, ts + L->ts_interp, &back) || back != interp ||
            R.rd_ptr(x->w, ts + L->ts_next, &tnext)) {
            cp_errmsg(st->error, sizeof(st->error),
                      "thread state 0x%" PRIx64 " is not readable or not this interpreter's", ts);
            break;
        }
        if (py_readers.add_thread(st, &tw->cap))
            return -1;
        struct py_thread *t = &st->threads[st->nthreads - 1];
        t->tstate = ts;
        t->interp_id = id;
        t->holds_gil = st->gil_locked == 1 && st->gil_holder == ts;
        uint64_t u;
        int32_t tid;
        if (!R.rd_ptr(x->w, ts + L->ts_thread_id, &u))
            t->thread_id = u;
        /* the kernel tid: glibc's struct pthread (pthread_t is its address) */
        if (t->thread_id && !R.rd_i32(x->w, t->thread_id + L->pthread_tid, &tid) && tid > 0) {
            t->native_tid = tid;
        } else if (!tw->no_tid++) {
            tw->no_tid_example = t->thread_id;
        }
        if (walk_frames(x, ts, t))
            return -1;
        if (tnext == ts)
            break;
        ts = tnext;
    }
    return 0;
}

static int walk_runtime(struct w310 *x, struct py_state *st)
{
    const struct py310_layout *L = x->L;
    uint64_t interp, holder;
    int32_t locked;
    if (!R.rd_i32(x->w, st->runtime + L->rt_gil_locked, &locked) &&
        !R.rd_ptr(x->w, st->runtime + L->rt_gil_last_holder, &holder)) {
        st->gil_locked = locked == 1;
        st->gil_holder = locked == 1 ? holder : 0;
    }
    if (R.rd_ptr(x->w, st->runtime + L->rt_interpreters_head, &interp)) {
        cp_errmsg(st->error, sizeof(st->error), "_PyRuntime at 0x%" PRIx64 " is not in the core",
                  st->runtime);
        return 0;
    }
    if (!interp)
        cp_errmsg(st->error, sizeof(st->error), "no interpreter (not started, or finalized)");
    struct tstate_walk tw = {0, 0, 0};
    for (unsigned ni = 0; interp && ni < PY_MAX_INTERPRETERS; ni++) {
        size_t first = st->nthreads;
        uint64_t ts, next;
        int64_t id = -1;
        R.rd_i64(x->w, interp + L->interp_id, &id);
        if (R.rd_ptr(x->w, interp + L->interp_tstate_head, &ts) ||
            R.rd_ptr(x->w, interp + L->interp_next, &next)) {
            cp_errmsg(st->error, sizeof(st->error), "interpreter 0x%" PRIx64 " is not in the core",
                      interp);
            return 0;
        }
        if (walk_tstates(x, st, interp, id, ts, &tw))
            return -1;
        thread_names(x, interp, st, first);
        if (next == interp)
            break;
        interp = next;
    }
    if (tw.no_tid && !st->error[0])
        cp_errmsg(
            st->error, sizeof(st->error),
            "%zu Python thread%s (0x%" PRIx64 "%s) without a readable kernel thread id (glibc's "
            "struct pthread is not in the core): not placed on a native thread",
            tw.no_tid, tw.no_tid == 1 ? "" : "s", tw.no_tid_example, tw.no_tid == 1 ? "" : ", ...");
    return 0;
}

int py310_walk(struct walk *w, struct py_state *st)
{
    struct w310 x = {.w = w, .L = &pylayout310, .frames_left = PY_MAX_TOTAL_FRAMES};
    st->supported = 1;
    int rc = walk_runtime(&x, st);
    code_clear(&x.code);
    return rc;
}
