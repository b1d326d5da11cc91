/* python.c - CPython threads and frames from a core (see python.h).
 *
 * Main data structures: struct py_state (the interpreter found, the GIL, the Python threads) and
 * struct walk (the session, the layout, and a one-entry cache of the last code object read: a
 * thread's frames often share code objects, and every read goes through the bundle).
 */
#include "python.h"

#include "errmsg.h"
#include "modules.h"
#include "pylayout.h"
#include "pylocals.h"
#include "pylocks.h"
#include "python310.h"
#include "python_internal.h"
#include "unwind.h"

#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EVAL_FUNCTION "_PyEval_EvalFrameDefault"

struct code_info {
    uint64_t addr;
    char *function, *qualname, *file;
    unsigned char *table;
    size_t table_len;
    int firstlineno;
    int64_t ncodeunits;
    struct py_code_locals loc; /* its locals' names and kinds (want_locals) */
};

struct walk {
    python_read_fn read; /* every read of the process's memory */
    void *ctx;
    const struct py_layout *L; /* &lay */
    struct py_layout lay;      /* the version's row, with the core's debug offsets over it */
    struct code_info code;     /* the last code object read */
    uint64_t str_type;  /* the str type's address, once one object has been seen to be a str */
    size_t frames_left; /* over all threads: PY_MAX_TOTAL_FRAMES */
    int want_locals;    /* py_state.want_locals */
    struct py_locals_budget lb;
};

/* ---- memory ---- */

static int rd(struct walk *w, uint64_t addr, void *buf, size_t len)
{
    if (!addr || addr + len < addr)
        return -1;
    return w->read(w->ctx, addr, buf, len) ? -1 : 0;
}

static int session_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
    return unwind_read(ctx, addr, buf, len) ? -1 : 0;
}

static int rd_ptr(struct walk *w, uint64_t addr, uint64_t *out)
{
    return rd(w, addr, out, sizeof(*out));
}

static int rd_i64(struct walk *w, uint64_t addr, int64_t *out)
{
    return rd(w, addr, out, sizeof(*out));
}

static int rd_i32(struct walk *w, uint64_t addr, int32_t *out)
{
    return rd(w, addr, out, sizeof(*out));
}

/* The NUL-terminated string at addr (at most max bytes), malloc()ed; NULL when unreadable. */
static char *rd_cstr(struct walk *w, uint64_t addr, size_t max)
{
    char *s = malloc(max + 1);
    if (!s)
        return NULL;
    size_t n = 0;
    while (n < max && !rd(w, addr + n, s + n, 1) && s[n])
        n++;
    if (n == max || s[n]) {
        free(s);
        return NULL;
    }
    return s;
}

/* The type name (tp_name) of the object at addr equals want. */
static int type_is(struct walk *w, uint64_t obj, const char *want)
{
    uint64_t type, name;
    if (rd_ptr(w, obj + w->L->ob_type, &type) || rd_ptr(w, type + w->L->tp_name, &name))
        return 0;
    char *n = rd_cstr(w, name, 64);
    int ok = n && !strcmp(n, want);
    free(n);
    return ok;
}

static void put_utf8(char *out, size_t *n, uint32_t c)
{
    if (c < 0x80) {
        out[(*n)++] = (char)c;
    } else if (c < 0x800) {
        out[(*n)++] = (char)(0xc0 | c >> 6);
        out[(*n)++] = (char)(0x80 | (c & 0x3f));
    } else if (c < 0x10000) {
        out[(*n)++] = (char)(0xe0 | c >> 12);
        out[(*n)++] = (char)(0x80 | ((c >> 6) & 0x3f));
        out[(*n)++] = (char)(0x80 | (c & 0x3f));
    } else {
        out[(*n)++] = (char)(0xf0 | (c >> 18 & 0x07));
        out[(*n)++] = (char)(0x80 | ((c >> 12) & 0x3f));
        out[(*n)++] = (char)(0x80 | ((c >> 6) & 0x3f));
        out[(*n)++] = (char)(0x80 | (c & 0x3f));
    }
}

/* The type name (tp_name) of the object at obj in buf, printable ASCII ('?' for other bytes). */
static int type_name(struct walk *w, uint64_t obj, char *buf, size_t len)
{
    uint64_t type, name;
    if (!len || rd_ptr(w, obj + w->L->ob_type, &type) || rd_ptr(w, type + w->L->tp_name, &name))
        return -1;
    char *n = rd_cstr(w, name, 64);
    if (!n)
        return -1;
    size_t i = 0;
    for (; n[i] && i + 1 < len; i++)
        buf[i] = n[i] > ' ' && n[i] < 0x7f ? n[i] : '?';
    buf[i] = 0;
    free(n);
    return 0;
}

/* A str object (compact: every str a code object holds), as malloc()ed UTF-8; NULL when it is not
 * a readable compact str. Longer strings are cut at maxchars characters. */
static char *rd_str_max(struct walk *w, uint64_t obj, size_t maxchars)
{
    const struct py_layout *L = w->L;
    uint32_t state;
    int64_t len;
    if (!obj || rd(w, obj + L->str_state, &state, sizeof(state)) ||
        rd_i64(w, obj + L->str_length, &len) || len < 0)
        return NULL;
    unsigned kind = (state >> L->str_kind_shift) & 7, compact = (state >> L->str_compact_shift) & 1;
    unsigned ascii = (state >> L->str_ascii_shift) & 1;
    if (!compact || (kind != 1 && kind != 2 && kind != 4))
        return NULL;
    if (maxchars > PY_MAX_STRING)
        maxchars = PY_MAX_STRING;
    size_t n = len > (int64_t)maxchars ? maxchars : (size_t)len;
    uint64_t data = obj + (ascii ? L->str_ascii_data : L->str_compact_data);
    unsigned char *raw = malloc(n * kind + 1);
    char *out = malloc(n * 4 + 1);
    if (!raw || !out || (n && rd(w, data, raw, n * kind))) {
        free(raw);
        free(out);
        return NULL;
    }
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t c = kind == 1 ? raw[i]
                     : kind == 2
                         ? (uint32_t)(raw[2 * i] | raw[2 * i + 1] << 8)
                         : (uint32_t)(raw[4 * i] | raw[4 * i + 1] << 8 | raw[4 * i + 2] << 16 |
                                      (uint32_t)raw[4 * i + 3] << 24);
        if (c == 0 || c > 0x10ffff || (c >= 0xd800 && c < 0xe000))
            c = 0xfffd;
        put_utf8(out, &o, c);
    }
    out[o] = 0;
    free(raw);
    return out;
}

static char *rd_str(struct walk *w, uint64_t obj)
{
    return rd_str_max(w, obj, PY_MAX_STRING);
}

/* ---- the line table (CPython 3.11 Objects/locations.md, Objects/codeobject.c) ---- */

static int scan_varint(const unsigned char *p, const unsigned char *end, unsigned *out)
{
    if (p >= end)
        return -1;
    unsigned read = *p++, val = read & 63, shift = 0;
    while (read & 64) {
        if (p >= end || shift > 24)
            return -1;
        read = *p++;
        shift += 6;
        val |= (read & 63) << shift;
    }
    *out = val;
    return 0;
}

static int line_delta(const unsigned char *p, const unsigned char *end)
{
    int code = (*p >> 3) & 15;
    unsigned u;
    switch (code) {
    case 15: /* no location */
        return 0;
    case 13: /* no columns */
    case 14: /* long form */
        if (scan_varint(p + 1, end, &u))
            return 0;
        return u & 1 ? -(int)(u >> 1) : (int)(u >> 1);
    case 10:
    case 11:
    case 12: /* one-line forms */
        return code - 10;
    default: /* short forms: same line */
        return 0;
    }
}

int python_addr2line(const unsigned char *table, size_t len, int firstlineno, long addrq)
{
    if (addrq < 0)
        return firstlineno;
    const unsigned char *p = table, *end = table + len;
    long ar_end = 0;
    int computed = firstlineno, line = -1;
    while (ar_end <= addrq) {
        if (p >= end)
            return -1;
        computed += line_delta(p, end);
        line = (*p >> 3) == 0x1f ? -1 : computed;
        ar_end += ((*p & 7) + 1) * 2;
        do
            p++;
        while (p < end && !(*p & 128));
    }
    return line;
}

/* ---- code objects ---- */

static void code_clear(struct code_info *c)
{
    free(c->function);
    free(c->qualname);
    free(c->file);
    free(c->table);
    pylocals_code_free(&c->loc);
    memset(c, 0, sizeof(*c));
}

/* Reads the code object at addr into w->code (kept while the next frame uses the same one). */
static int read_code(struct walk *w, uint64_t addr, char *err, size_t errlen)
{
    const struct py_layout *L = w->L;
    if (w->code.addr == addr && addr)
        return 0;
    code_clear(&w->code);
    if (!type_is(w, addr, "code")) {
        cp_errmsg(err, errlen, "f_code 0x%" PRIx64 " is not a readable code object", addr);
        return -1;
    }
    struct code_info *c = &w->code;
    uint64_t name, qual, file, table;
    int32_t first;
    int64_t table_len;
    if (rd_ptr(w, addr + L->co_name, &name) || rd_ptr(w, addr + L->co_qualname, &qual) ||
        rd_ptr(w, addr + L->co_filename, &file) || rd_ptr(w, addr + L->co_linetable, &table) ||
        rd_i32(w, addr + L->co_firstlineno, &first) ||
        rd_i64(w, addr + L->ob_size, &c->ncodeunits)) {
        cp_errmsg(err, errlen, "code object 0x%" PRIx64 " is not in the core", addr);
        return -1;
    }
    c->addr = addr;
    c->function = rd_str(w, name);
    c->qualname = rd_str(w, qual);
    c->file = rd_str(w, file);
    c->firstlineno = first;
    if (table && !rd_i64(w, table + L->ob_size, &table_len) && table_len > 0 &&
        table_len <= (int64_t)PY_MAX_LINETABLE) {
        c->table = malloc((size_t)table_len);
        if (c->table && !rd(w, table + L->bytes_sval, c->table, (size_t)table_len))
            c->table_len = (size_t)table_len;
    }
    if (w->want_locals)
        pylocals_code(w, L, addr, &c->loc);
    return 0;
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

/* ---- threads ---- */

/* The frame's owner is a shim: the C stack's entry frame (3.12/3.13 FRAME_OWNED_BY_CSTACK, 3.14
 * FRAME_OWNED_BY_INTERPRETER) that _PyEval_EvalFrameDefault pushes before the first Python frame
 * it runs. It is not a Python frame; the frame whose `previous` it is starts a C-level eval call.
 */
static int is_shim(const struct py_layout *L, unsigned char owner)
{
    return (L->owner_shim != PYLAYOUT_NO_OWNER && owner == L->owner_shim) ||
           (L->owner_shim2 != PYLAYOUT_NO_OWNER && owner == L->owner_shim2);
}

/* a new last frame of t (its array of capacity *cap grown as needed), or NULL */
static struct py_frame *push_frame(struct py_thread *t, size_t *cap)
{
    if (t->nframes == *cap) {
        size_t ncap = *cap ? 2 * *cap : 16;
        struct py_frame *v = realloc(t->frames, ncap * sizeof(*v));
        if (!v)
            return NULL;
        t->frames = v;
        *cap = ncap;
    }
    return &t->frames[t->nframes++];
}

static int walk_frames(struct walk *w, uint64_t tstate, struct py_thread *t)
{
    const struct py_layout *L = w->L;
    uint64_t cframe = 0, frame = 0;
    int bad;
    if (L->ts_cframe) /* 3.11, 3.12: tstate->cframe->current_frame */
        bad = rd_ptr(w, tstate + L->ts_cframe, &cframe) ||
              (cframe && rd_ptr(w, cframe + L->cframe_current_frame, &frame));
    else /* 3.13+ */
        bad = rd_ptr(w, tstate + L->ts_current_frame, &frame);
    if (bad) {
        cp_errmsg(t->error, sizeof(t->error),
                  "the thread state's frame pointer is not in the core");
        return 0;
    }
    size_t cap = 0, shims = 0;
    while (frame) {
        if (t->nframes == PY_MAX_FRAMES || !w->frames_left || shims > PY_MAX_FRAMES) {
            t->truncated = 1;
            break;
        }
        w->frames_left--;
        uint64_t code, prev, instr;
        unsigned char entry = 0, owner = 0;
        if (rd_ptr(w, frame + L->if_code, &code) || rd_ptr(w, frame + L->if_previous, &prev) ||
            rd_ptr(w, frame + L->if_instr, &instr) || rd(w, frame + L->if_owner, &owner, 1) ||
            (L->if_is_entry && rd(w, frame + L->if_is_entry, &entry, 1))) {
            cp_errmsg(t->error, sizeof(t->error),
                      "frame 0x%" PRIx64 " is not in the core (a slim core keeps only the stacks)",
                      frame);
            break;
        }
        if (prev == frame && is_shim(L, owner)) {
            cp_errmsg(t->error, sizeof(t->error), "frame 0x%" PRIx64 " links to itself", frame);
            break;
        }
        if (is_shim(L, owner)) {
            /* 3.12+: the frame before this shim (inner) was the first of its eval call */
            if (t->nframes) {
                t->frames[t->nframes - 1].is_entry = 1;
                t->frames[t->nframes - 1].shim = frame;
            }
            shims++;
            frame = prev;
            continue;
        }
        code &= ~(uint64_t)L->if_code_tag_mask; /* 3.14: a _PyStackRef */
        if (read_code(w, code, t->error, sizeof(t->error)))
            break;
        struct py_frame *f = push_frame(t, &cap);
        if (!f)
            return -1;
        struct code_info *c = &w->code;
        memset(f, 0, sizeof(*f));
        f->addr = frame;
        f->is_entry = entry != 0;
        f->function = dup_or_null(c->function);
        f->qualname = dup_or_null(c->qualname);
        f->file = dup_or_null(c->file);
        /* _PyInterpreterFrame_LASTI: code units from the first instruction to prev_instr (3.11,
         * 3.12) or instr_ptr (3.13+); the same formula for both
         * (PyUnstable_InterpreterFrame_GetLine) */
        int64_t lasti = ((int64_t)instr - (int64_t)(code + L->co_code)) / (int64_t)L->code_unit;
        f->line = lasti > c->ncodeunits ? -1
                  : c->table            ? python_addr2line(c->table, c->table_len, c->firstlineno,
                                                           (long)lasti * (long)L->code_unit)
                                        : -1;
        if (w->want_locals && pylocals_read(w, L, frame, &c->loc, &w->lb, f))
            return -1;
        if (prev == frame) {
            cp_errmsg(t->error, sizeof(t->error), "frame 0x%" PRIx64 " links to itself", frame);
            break;
        }
        frame = prev;
    }
    return 0;
}

static int add_thread(struct py_state *st, size_t *cap)
{
    if (st->nthreads == *cap) {
        size_t ncap = *cap ? 2 * *cap : 8;
        struct py_thread *v = realloc(st->threads, ncap * sizeof(*v));
        if (!v)
            return -1;
        st->threads = v;
        *cap = ncap;
    }
    memset(&st->threads[st->nthreads++], 0, sizeof(struct py_thread));
    return 0;
}

static void thread_names(struct walk *w, uint64_t interp, struct py_state *st, size_t first);

/* 3.12+: an interpreter's GIL (its own, or the main interpreter's it shares) in *ilocked and
 * *iholder; the main interpreter's is the report's */
static void interp_gil(struct walk *w, struct py_state *st, uint64_t interp, int64_t id,
                       int *ilocked, uint64_t *iholder)
{
    const struct py_layout *L = w->L;
    uint64_t gil, holder;
    int32_t locked;
    if (!L->interp_gil || rd_ptr(w, interp + L->interp_gil, &gil) || !gil ||
        rd_i32(w, gil + L->gil_locked, &locked) || rd_ptr(w, gil + L->gil_last_holder, &holder))
        return;
    *ilocked = locked == 1;
    *iholder = locked == 1 ? holder : 0;
    if (id == 0 || st->gil_locked < 0) {
        st->gil_locked = *ilocked;
        st->gil_holder = *iholder;
    }
}

static int walk_runtime(struct walk *w, struct py_state *st)
{
    const struct py_layout *L = w->L;
    uint64_t interp, holder;
    int32_t locked;
    if (L->rt_gil && !rd_i32(w, st->runtime + L->rt_gil + L->gil_locked, &locked) &&
        !rd_ptr(w, st->runtime + L->rt_gil + L->gil_last_holder, &holder)) { /* 3.11 */
        st->gil_locked = locked == 1;
        st->gil_holder = locked == 1 ? holder : 0;
    }
    if (rd_ptr(w, st->runtime + L->rt_interpreters_head, &interp)) {
        cp_errmsg(st->error, sizeof(st->error), "_PyRuntime at 0x%" PRIx64 " is not in the core",
                  st->runtime);
        return 0;
    }
    if (!interp)
        cp_errmsg(st->error, sizeof(st->error), "no interpreter (not started, or finalized)");
    size_t cap = 0;
    for (unsigned ni = 0; interp && ni < PY_MAX_INTERPRETERS; ni++) {
        size_t first = st->nthreads;
        uint64_t ts, next;
        int64_t id = -1;
        int ilocked = st->gil_locked;
        uint64_t iholder = st->gil_holder;
        rd_i64(w, interp + L->interp_id, &id);
        interp_gil(w, st, interp, id, &ilocked, &iholder);
        if (rd_ptr(w, interp + L->interp_threads_head, &ts) ||
            rd_ptr(w, interp + L->interp_next, &next)) {
            cp_errmsg(st->error, sizeof(st->error), "interpreter 0x%" PRIx64 " is not in the core",
                      interp);
            return 0;
        }
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
            if (rd_ptr(w, ts + L->ts_interp, &back) || back != interp ||
                rd_ptr(w, ts + L->ts_next, &tnext)) {
                cp_errmsg(st->error, sizeof(st->error),
                          "thread state 0x%" PRIx64 " is not readable or not this interpreter's",
                          ts);
                break;
            }
            if (add_thread(st, &cap))
                return -1;
            struct py_thread *t = &st->threads[st->nthreads - 1];
            t->tstate = ts;
            t->interp_id = id;
            t->holds_gil = ilocked == 1 && iholder == ts;
            uint64_t u;
            if (!rd_ptr(w, ts + L->ts_thread_id, &u))
                t->thread_id = u;
            if (!rd_ptr(w, ts + L->ts_native_thread_id, &u))
                t->native_tid = (int64_t)u;
            if (walk_frames(w, ts, t))
                return -1;
            if (tnext == ts)
                break;
            ts = tnext;
        }
        thread_names(w, interp, st, first);
        if (next == interp)
            break;
        interp = next;
    }
    return 0;
}

/* ---- thread names: threading._active[ident]._name ---- */

#define PY_MAX_DICT 65536u

static int is_str(struct walk *w, uint64_t obj)
{
    uint64_t type;
    if (rd_ptr(w, obj + w->L->ob_type, &type))
        return 0;
    if (w->str_type)
        return type == w->str_type;
    if (!type_is(w, obj, "str"))
        return 0;
    w->str_type = type;
    return 1;
}

/* Entry `key` (a str) of a dict's keys object; its value from the entry, or from `values` (a split
 * dict's or an instance's value array) when that is not 0. */
static int keys_find(struct walk *w, uint64_t keys, uint64_t values, const char *key,
                     uint64_t *value)
{
    const struct py_layout *L = w->L;
    unsigned char log2ib, kind;
    int64_t n;
    if (!keys || rd(w, keys + L->dk_log2_index_bytes, &log2ib, 1) ||
        rd(w, keys + L->dk_kind, &kind, 1) || rd_i64(w, keys + L->dk_nentries, &n) || log2ib > 32 ||
        n < 0)
        return -1;
    int general = kind == L->dk_kind_general;
    size_t esz = general ? L->entry_size : L->uentry_size;
    size_t ko = general ? L->entry_key : L->uentry_key,
           vo = general ? L->entry_value : L->uentry_value;
    uint64_t entries = keys + L->dk_indices + ((uint64_t)1 << log2ib);
    for (int64_t i = 0; i < n && i < (int64_t)PY_MAX_DICT; i++) {
        uint64_t k;
        if (rd_ptr(w, entries + (uint64_t)i * esz + ko, &k))
            return -1;
        if (!k || !is_str(w, k))
            continue;
        char *ks = rd_str(w, k);
        int match = ks && !strcmp(ks, key);
        free(ks);
        if (match)
            return values ? rd_ptr(w, values + L->dictvalues_values + (uint64_t)i * 8, value)
                          : rd_ptr(w, entries + (uint64_t)i * esz + vo, value);
    }
    return -1;
}

static int dict_find(struct walk *w, uint64_t dict, const char *key, uint64_t *value)
{
    uint64_t keys, values;
    if (!dict || !type_is(w, dict, "dict") || rd_ptr(w, dict + w->L->dict_keys, &keys) ||
        rd_ptr(w, dict + w->L->dict_values, &values))
        return -1;
    return keys_find(w, keys, values, key, value);
}

/* An instance attribute: its __dict__, or the values its type's cached keys index: 3.11 a values
 * pointer before the object, 3.12 the same word as the dict pointer, tagged by a set low bit,
 * 3.13+ inline after the object header (Py_TPFLAGS_INLINE_VALUES). */
static int attr_find(struct walk *w, uint64_t obj, const char *key, uint64_t *value)
{
    const struct py_layout *L = w->L;
    uint64_t type, flags, dict, values, keys;
    int64_t off;
    if (rd_ptr(w, obj + L->ob_type, &type) || rd_ptr(w, type + L->tp_flags, &flags))
        return -1;
    if (flags & L->flag_managed_dict) {
        if (rd_ptr(w, obj - L->managed_dict_before, &dict))
            return -1;
        if (L->managed_values_before == L->managed_dict_before && (dict & 1)) { /* 3.12 */
            values = dict + 1;
            dict = 0;
        } else if (dict) {
            return dict_find(w, dict, key, value);
        } else if (L->flag_inline_values) { /* 3.13+ */
            unsigned char valid;
            if (!(flags & L->flag_inline_values) ||
                rd(w, obj + L->inline_values + L->dictvalues_valid, &valid, 1) || !valid)
                return -1;
            values = obj + L->inline_values;
        } else if (rd_ptr(w, obj - L->managed_values_before, &values)) { /* 3.11 */
            return -1;
        }
        if (!values || rd_ptr(w, type + L->ht_cached_keys, &keys))
            return -1;
        return keys_find(w, keys, values, key, value);
    }
    if (rd_i64(w, type + L->tp_dictoffset, &off) || off <= 0 || off > 4096 ||
        rd_ptr(w, obj + (uint64_t)off, &dict))
        return -1;
    return dict_find(w, dict, key, value);
}

/* A non-negative int object below 2**64. */
static int rd_ulong(struct walk *w, uint64_t obj, uint64_t *out)
{
    const struct py_layout *L = w->L;
    int64_t size;
    if (!type_is(w, obj, "int") || rd_i64(w, obj + L->ob_size, &size))
        return -1;
    if (L->long_tag_shift) { /* 3.12+: lv_tag = digits << shift | sign (0 +, 1 zero, 2 -) */
        uint64_t tag = (uint64_t)size;
        if ((tag & 3) == 2)
            return -1;
        size = (tag & 3) == 1 ? 0 : (int64_t)(tag >> L->long_tag_shift);
    }
    if (size < 0 || size * (int64_t)L->long_shift > 64 + (int64_t)L->long_shift)
        return -1;
    uint64_t v = 0;
    for (int64_t i = 0; i < size; i++) {
        uint32_t d;
        if (rd(w, obj + L->long_digit + 4 * (uint64_t)i, &d, sizeof(d)))
            return -1;
        v |= (uint64_t)d << (L->long_shift * (uint64_t)i);
    }
    *out = v;
    return 0;
}

/* Names the threads of one interpreter from threading._active. Best effort: silent when the
 * module is not loaded or an object is not readable. */
static void thread_names(struct walk *w, uint64_t interp, struct py_state *st, size_t first)
{
    const struct py_layout *L = w->L;
    uint64_t modules, mod, mdict, active, keys, values;
    unsigned char log2ib, kind;
    int64_t n;
    if (rd_ptr(w, interp + L->interp_modules, &modules) ||
        dict_find(w, modules, "threading", &mod) || rd_ptr(w, mod + L->module_dict, &mdict) ||
        dict_find(w, mdict, "_active", &active) || !type_is(w, active, "dict") ||
        rd_ptr(w, active + L->dict_keys, &keys) || rd_ptr(w, active + L->dict_values, &values) ||
        values || rd(w, keys + L->dk_log2_index_bytes, &log2ib, 1) ||
        rd(w, keys + L->dk_kind, &kind, 1) || rd_i64(w, keys + L->dk_nentries, &n) ||
        kind != L->dk_kind_general || log2ib > 32)
        return;
    uint64_t entries = keys + L->dk_indices + ((uint64_t)1 << log2ib);
    for (int64_t i = 0; i < n && i < (int64_t)PY_MAX_DICT; i++) {
        uint64_t e = entries + (uint64_t)i * L->entry_size, k, v, ident, name;
        if (rd_ptr(w, e + L->entry_key, &k) || !k || rd_ptr(w, e + L->entry_value, &v) || !v ||
            rd_ulong(w, k, &ident))
            continue;
        for (size_t t = first; t < st->nthreads; t++) {
            if (st->threads[t].thread_id != ident || st->threads[t].name)
                continue;
            if (!attr_find(w, v, "_name", &name) && is_str(w, name))
                st->threads[t].name = rd_str(w, name);
        }
    }
}

/* ---- finding the runtime ---- */

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static int is_python_module(const struct module *m)
{
    const char *b = base_name(m->name);
    return !strncmp(b, "python", 6) || !strncmp(b, "libpython", 9);
}

static int find_symbol(Dwfl_Module *dm, const char *want, uint64_t *addr)
{
    int n = dwfl_module_getsymtab(dm);
    for (int i = 0; i < n; i++) {
        GElf_Sym sym;
        GElf_Addr a;
        const char *name = dwfl_module_getsym_info(dm, i, &sym, &a, NULL, NULL, NULL);
        if (name && sym.st_shndx != SHN_UNDEF && !strcmp(name, want) && a) {
            *addr = a;
            return 0;
        }
    }
    return -1;
}

static int find_section(Dwfl_Module *dm, const char *want, uint64_t *addr)
{
    GElf_Addr bias = 0;
    Elf *e = dwfl_module_getelf(dm, &bias);
    size_t shstrndx;
    if (!e || elf_getshdrstrndx(e, &shstrndx))
        return -1;
    for (Elf_Scn *scn = elf_nextscn(e, NULL); scn; scn = elf_nextscn(e, scn)) {
        GElf_Shdr sh;
        const char *name = gelf_getshdr(scn, &sh) ? elf_strptr(e, shstrndx, sh.sh_name) : NULL;
        if (name && !strcmp(name, want) && sh.sh_addr) {
            *addr = sh.sh_addr + bias;
            return 0;
        }
    }
    return -1;
}

/* "python3.11", "libpython3.11.so.1.0" -> 3, 11; "python3.13t" (free-threaded) and "python3.13d"
 * (debug) also give the ABI letter in *abi (else 0) */
static int version_from_name(const char *path, int *major, int *minor, char *abi)
{
    const char *b = base_name(path);
    int n = 0;
    b += !strncmp(b, "lib", 3) ? 9 : 6;
    if (sscanf(b, "%d.%d%n", major, minor, &n) != 2)
        return -1;
    *abi = b[n] == 't' || b[n] == 'd' ? b[n] : 0;
    return 0;
}

/* ---- _Py_DebugOffsets (3.13+) ---- */

#define DBG_MAX 8192u /* the table is 584 bytes in 3.13 */
#define DBG_MAX_STRUCT (1u << 24)

/* A layout field taken from the core's debug offsets: where it is in struct py_layout, where the
 * row says the table keeps it, and where the table keeps the size of its structure (0: none). */
struct dbg_field {
    const char *name;
    size_t field, pos, size_pos;
};
#define DF(f, sz)                                                                                  \
    {                                                                                              \
#f, offsetof(struct py_layout, f), offsetof(struct py_layout, dbg_##f),                    \
            offsetof(struct py_layout, sz)                                                         \
    }
#define DF0(f)                                                                                     \
    {                                                                                              \
#f, offsetof(struct py_layout, f), offsetof(struct py_layout, dbg_##f), 0                  \
    }
static const struct dbg_field dbg_fields[] = {
    DF(rt_interpreters_head, dbg_sz_runtime),
    DF(interp_id, dbg_sz_interp),
    DF(interp_next, dbg_sz_interp),
    DF(interp_threads_head, dbg_sz_interp),
    DF(interp_modules, dbg_sz_interp),
    DF(interp_gil, dbg_sz_interp),
    DF(ts_next, dbg_sz_tstate),
    DF(ts_interp, dbg_sz_tstate),
    DF(ts_current_frame, dbg_sz_tstate),
    DF(ts_thread_id, dbg_sz_tstate),
    DF(ts_native_thread_id, dbg_sz_tstate),
    DF(if_previous, dbg_sz_frame),
    DF(if_code, dbg_sz_frame),
    DF(if_instr, dbg_sz_frame),
    DF(if_owner, dbg_sz_frame),
    DF(if_localsplus, dbg_sz_frame),
    DF(co_filename, dbg_sz_code),
    DF(co_name, dbg_sz_code),
    DF(co_qualname, dbg_sz_code),
    DF(co_linetable, dbg_sz_code),
    DF(co_firstlineno, dbg_sz_code),
    DF(co_code, dbg_sz_code),
    DF(co_localsplusnames, dbg_sz_code),
    DF(co_localspluskinds, dbg_sz_code),
    DF0(ob_type),
    DF0(tp_name),
    DF0(tp_flags),
    DF0(dict_keys),
    DF0(dict_values),
    DF0(long_digit),
    DF0(ob_size),
    DF0(bytes_sval),
    DF0(str_state),
    DF0(str_length),
    DF0(str_ascii_data),
    DF0(tuple_item),
    DF0(float_value),
};

static size_t *lay_at(struct py_layout *L, size_t off)
{
    return (size_t *)(void *)((char *)L + off);
}

static uint64_t dbg_u64(const unsigned char *t, size_t pos)
{
    uint64_t v;
    memcpy(&v, t + pos, sizeof(v));
    return v;
}

static void check_note(struct py_state *st, const char *name, uint64_t table, uint64_t core)
{
    size_t n = strlen(st->layout_check);
    if (!n)
        n = (size_t)snprintf(st->layout_check, sizeof(st->layout_check),
                             "the core's _Py_DebugOffsets differ from the generated table:");
    if (n < sizeof(st->layout_check))
        snprintf(st->layout_check + n, sizeof(st->layout_check) - n,
                 " %s (table %" PRIu64 ", core %" PRIu64 ")", name, table, core);
}

/* Puts the core's debug offsets over w->lay (the row), each checked: inside its structure's size
 * as the table states it (at most 16 MiB), or under 4096 for the object fields. Differences from
 * the row are noted in st->layout_check. Returns 0, or -1 with st->error set when the table cannot
 * be used. */
static int apply_debug_offsets(struct walk *w, struct py_state *st)
{
    struct py_layout *L = &w->lay;
    size_t n = L->dbg_size;
    unsigned char *t = n && n <= DBG_MAX ? malloc(n) : NULL;
    if (!t || rd(w, st->runtime, t, n)) {
        free(t);
        snprintf(st->layout_check, sizeof(st->layout_check),
                 "the core's _Py_DebugOffsets (%zu bytes at _PyRuntime) are not readable: the "
                 "generated table is used",
                 n);
        return 0;
    }
    struct py_layout d = *L;
    const char *bad = NULL;
    uint64_t badv = 0;
    for (size_t i = 0; i < sizeof(dbg_fields) / sizeof(dbg_fields[0]) && !bad; i++) {
        const struct dbg_field *f = &dbg_fields[i];
        size_t pos = *lay_at(L, f->pos);
        uint64_t v = pos + 8 <= n ? dbg_u64(t, pos) : UINT64_MAX;
        uint64_t limit = 4096;
        if (f->size_pos) {
            size_t sp = *lay_at(L, f->size_pos);
            limit = sp + 8 <= n ? dbg_u64(t, sp) : 0;
            if (limit > DBG_MAX_STRUCT)
                limit = 0;
        }
        if (v >= limit) {
            bad = f->name;
            badv = v;
            break;
        }
        *lay_at(&d, f->field) = (size_t)v;
    }
    /* the GIL's fields: given as offsets in PyInterpreterState of its own embedded GIL */
    uint64_t gs = n >= L->dbg_interp_gil_state + 8 ? dbg_u64(t, L->dbg_interp_gil_state) : 0;
    uint64_t gl = n >= L->dbg_interp_gil_locked + 8 ? dbg_u64(t, L->dbg_interp_gil_locked) : 0;
    uint64_t gh = n >= L->dbg_interp_gil_holder + 8 ? dbg_u64(t, L->dbg_interp_gil_holder) : 0;
    if (!bad && (gl < gs || gh < gs || gl - gs > 4096 || gh - gs > 4096)) {
        bad = "gil_runtime_state";
        badv = gs;
    }
    free(t);
    if (bad) {
        cp_errmsg(
            st->error, sizeof(st->error),
            "unsupported CPython %s: the core's _Py_DebugOffsets are inconsistent (%s = %" PRIu64
            " is outside its structure)",
            st->version, bad, badv);
        return -1;
    }
    d.gil_locked = (size_t)(gl - gs);
    d.gil_last_holder = (size_t)(gh - gs);
    for (size_t i = 0; i < sizeof(dbg_fields) / sizeof(dbg_fields[0]); i++)
        if (*lay_at(&d, dbg_fields[i].field) != *lay_at(L, dbg_fields[i].field))
            check_note(st, dbg_fields[i].name, *lay_at(L, dbg_fields[i].field),
                       *lay_at(&d, dbg_fields[i].field));
    if (d.gil_locked != L->gil_locked)
        check_note(st, "gil_locked", L->gil_locked, d.gil_locked);
    if (d.gil_last_holder != L->gil_last_holder)
        check_note(st, "gil_last_holder", L->gil_last_holder, d.gil_last_holder);
    *L = d;
    st->layout_source = "debug_offsets";
    return 0;
}

/* A build whose layouts are not read (free-threaded, debug, or debug offsets of another version):
 * 1 with st->error said, else 0 */
static int unsupported_build(struct walk *w, struct py_state *st, char abi, int have_dbg,
                             uint64_t dver, int major, int minor)
{
    uint64_t freet = 0;
    const char *v = st->version[0] ? st->version : "(unknown version)";
    if (abi == 't' || (have_dbg && !rd_ptr(w, st->runtime + 16, &freet) && freet)) {
        cp_errmsg(st->error, sizeof(st->error),
                  "unsupported CPython %s: a free-threaded (Py_GIL_DISABLED, \"%st\") build; its "
                  "object and "
                  "frame layouts differ and only the default GIL build is read",
                  v, v);
        return 1;
    }
    if (abi == 'd') {
        cp_errmsg(
            st->error, sizeof(st->error),
            "unsupported CPython %s: a debug (Py_DEBUG, \"%sd\") build; only the default release "
            "build's layouts are read",
            v, v);
        return 1;
    }
    if (have_dbg && ((int)(dver >> 16 & 0xff) != minor || major != 3)) {
        cp_errmsg(
            st->error, sizeof(st->error),
            "unsupported CPython %s: its _Py_DebugOffsets say %d.%d, not the module's version", v,
            (int)(dver >> 24), (int)(dver >> 16 & 0xff));
        return 1;
    }
    return 0;
}

int python_walk(python_read_fn read, void *ctx, const char *module, uint64_t py_version,
                struct py_state *st)
{
    struct walk w = {.read = read,
                     .ctx = ctx,
                     .frames_left = PY_MAX_TOTAL_FRAMES,
                     .want_locals = st->want_locals,
                     .lb = {PY_MAX_TOTAL_LOCALS, PY_MAX_TOTAL_SLOTS}};
    int major = 0, minor = 0, nmajor = 0, nminor = 0;
    char abi = 0;
    uint64_t hex = 0, dver = 0;
    char cookie[8];
    int named = !version_from_name(module, &nmajor, &nminor, &abi);
    /* 3.13+: _PyRuntime starts with _Py_DebugOffsets: "xdebugpy", PY_VERSION_HEX, free_threaded */
    int have_dbg = !rd(&w, st->runtime, cookie, sizeof(cookie)) && !memcmp(cookie, "xdebugpy", 8) &&
                   !rd_ptr(&w, st->runtime + 8, &dver) && dver >> 24 == 3;
    /* the version: Py_Version, else the debug offsets', else (below) the module's name */
    if (!py_version || rd_ptr(&w, py_version, &hex) || hex >> 24 != 3)
        hex = have_dbg ? dver : 0;
    if (hex) {
        major = 3;
        minor = (int)(hex >> 16 & 0xff);
        snprintf(st->version, sizeof(st->version), "%d.%d.%d", major, minor,
                 (int)(hex >> 8 & 0xff));
    } else if (named) {
        major = nmajor;
        minor = nminor;
        snprintf(st->version, sizeof(st->version), "%d.%d", major, minor);
    }
    if (unsupported_build(&w, st, abi, have_dbg, dver, major, minor))
        return 0;
    if (major == 3 && minor == 10) { /* PyFrameObject frames: python310.c (no locals) */
        st->want_locals = 0;
        w.L = py310_layout();
        return py310_walk(&w, st);
    }
    const struct py_layout *row = major ? pylayout_find(major, minor) : NULL;
    if (!row) {
        const char *why =
            major == 3 && minor < 10 && minor >= 0
                ? "before 3.10 frames and line tables are another layout, not read"
            : major == 3 && minor > 11 && have_dbg
                ? "a newer _PyInterpreterFrame and _Py_DebugOffsets table than any generated row"
                : "no structure layout for this version";
        cp_errmsg(st->error, sizeof(st->error), "unsupported CPython %s: %s (supported: 3.10, %s)",
                  st->version[0] ? st->version : "(unknown version)", why, pylayout_versions());
        return 0;
    }
    w.lay = *row;
    w.L = &w.lay;
    st->layout_source = "table";
    if (row->dbg_size) {
        if (!have_dbg)
            snprintf(
                st->layout_check, sizeof(st->layout_check),
                "no _Py_DebugOffsets (\"xdebugpy\") at _PyRuntime: the generated table is used");
        else if (apply_debug_offsets(&w, st))
            return 0;
    }
    st->supported = 1;
    int rc = walk_runtime(&w, st);
    if (!rc) /* the threading locks the threads reach (issue 23): kept in a snap's slim core too */
        rc = pylocks_scan(&w, st);
    code_clear(&w.code);
    return rc;
}

/* How much a walk found: a supported runtime with threads with frames beats one with threads,
 * beats a supported one without (a second libpython that ctypes loaded but never started). */
static int walk_score(const struct py_state *c)
{
    int frames = 0;
    for (size_t i = 0; i < c->nthreads && !frames; i++)
        frames = c->threads[i].nframes > 0;
    return c->supported * 1 + (c->nthreads > 0) * 2 + frames * 4;
}

#define PY_MAX_RUNTIMES 8u

/* Every module named python* / libpython* with a runtime is walked (a process can map two: a
 * python3 executable with its own _PyRuntime and a libpython3.x.so that ctypes loaded); the one
 * whose interpreter runs threads is reported, and two live ones are said so in the error. */
int python_scan(struct unwind_session *s, struct py_state *st, int want_locals)
{
    memset(st, 0, sizeof(*st));
    st->gil_locked = -1;
    st->want_locals = want_locals;
    const struct modules *mods = unwind_modules(s);
    Dwfl *dwfl = unwind_dwfl(s);
    char first[256] = "", live[2][256] = {"", ""};
    uint64_t walked[PY_MAX_RUNTIMES];
    int best = -1;
    unsigned seen = 0, nlive = 0;
    for (size_t i = 0; dwfl && i < mods->n && seen < PY_MAX_RUNTIMES; i++) {
        const struct module *m = &mods->v[i];
        if (!is_python_module(m))
            continue;
        if (!first[0]) /* the first candidate, for the messages when none has the runtime */
            snprintf(first, sizeof(first), "%s", m->name);
        Dwfl_Module *d = dwfl_addrmodule(dwfl, m->start);
        struct py_state c;
        memset(&c, 0, sizeof(c));
        c.gil_locked = -1;
        c.present = 1;
        c.want_locals = want_locals;
        if (!d)
            continue;
        if (!find_symbol(d, "_PyRuntime", &c.runtime))
            c.runtime_source = "symbol";
        else if (!find_section(d, ".PyRuntime", &c.runtime))
            c.runtime_source = "section";
        else
            continue;
        int dup = 0; /* one module listed twice: the same runtime */
        for (unsigned k = 0; k < seen && !dup; k++)
            dup = walked[k] == c.runtime;
        if (dup)
            continue;
        walked[seen++] = c.runtime;
        snprintf(c.module, sizeof(c.module), "%s", m->name);
        uint64_t vaddr;
        if (find_symbol(d, "Py_Version", &vaddr))
            vaddr = 0;
        if (python_walk(session_read, s, m->name, vaddr, &c)) {
            python_free(&c);
            python_free(st);
            return -1;
        }
        int score = walk_score(&c);
        if (c.nthreads && nlive < 2)
            snprintf(live[nlive], sizeof(live[0]), "%s", m->name);
        nlive += c.nthreads > 0;
        if (score > best) {
            python_free(st);
            *st = c;
            best = score;
        } else {
            python_free(&c);
        }
    }
    if (!first[0])
        return 0;
    st->present = 1;
    if (best < 0) {
        snprintf(st->module, sizeof(st->module), "%s", first);
        cp_errmsg(
            st->error, sizeof(st->error),
            "no _PyRuntime symbol or .PyRuntime section in %s (its file is needed: see modules[])",
            st->module);
        return 0;
    }
    st->runtimes = seen;
    if (nlive > 1 && !st->error[0])
        cp_errmsg(st->error, sizeof(st->error),
                  "%u CPython runtimes have thread states (%s, %s): %s's is reported", nlive,
                  base_name(live[0]), base_name(live[1]), base_name(st->module));
    return 0;
}

void python_free(struct py_state *st)
{
    for (size_t i = 0; i < st->nthreads; i++) {
        struct py_thread *t = &st->threads[i];
        for (size_t k = 0; k < t->nframes; k++) {
            free(t->frames[k].function);
            free(t->frames[k].qualname);
            free(t->frames[k].file);
            pylocals_free(&t->frames[k]);
        }
        free(t->frames);
        free(t->name);
    }
    free(st->threads);
    free(st->locks);
    memset(st, 0, sizeof(*st));
}

/* ---- JSON ---- */

static void add_hex(cJSON *o, const char *key, uint64_t v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "0x%" PRIx64, v);
    cJSON_AddStringToObject(o, key, buf);
}

static void add_str(cJSON *o, const char *key, const char *s)
{
    if (s && *s)
        cJSON_AddStringToObject(o, key, s);
    else
        cJSON_AddNullToObject(o, key);
}

static const struct py_thread *thread_of(const struct py_state *st, uint64_t tstate)
{
    for (size_t i = 0; i < st->nthreads; i++)
        if (st->threads[i].tstate == tstate)
            return &st->threads[i];
    return NULL;
}

/* python.locks[]: {addr, type, name, owner_thread_id, owner_tid, count, locked, sem, seen_by_tids}
 */
static cJSON *locks_json(const struct py_state *st)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < st->nlocks; i++) {
        const struct py_lock *l = &st->locks[i];
        cJSON *o = cJSON_CreateObject();
        add_hex(o, "addr", l->addr);
        cJSON_AddStringToObject(o, "type", l->rlock ? "threading.RLock" : "threading.Lock");
        add_str(o, "name", l->name);
        const struct py_thread *ow = NULL;
        for (size_t k = 0; l->rlock && l->owner && l->count && k < st->nthreads && !ow; k++)
            if (st->threads[k].thread_id == l->owner)
                ow = &st->threads[k];
        if (l->rlock && l->owner && l->count)
            add_hex(o, "owner_thread_id", l->owner);
        else
            cJSON_AddNullToObject(o, "owner_thread_id");
        if (ow && ow->native_tid)
            cJSON_AddNumberToObject(o, "owner_tid", (double)ow->native_tid);
        else
            cJSON_AddNullToObject(o, "owner_tid");
        if (l->rlock)
            cJSON_AddNumberToObject(o, "count", (double)l->count);
        else
            cJSON_AddNullToObject(o, "count");
        if (l->locked >= 0)
            cJSON_AddBoolToObject(o, "locked", l->rlock ? l->count > 0 : l->locked);
        else
            cJSON_AddNullToObject(o, "locked");
        if (l->sem)
            add_hex(o, "sem", l->sem);
        else
            cJSON_AddNullToObject(o, "sem");
        cJSON *sb = cJSON_AddArrayToObject(o, "referenced_by_tids");
        for (unsigned k = 0; k < l->nseen; k++)
            for (size_t t = 0; t < st->nthreads; t++)
                if (st->threads[t].thread_id == l->seen_by[k] && st->threads[t].native_tid)
                    cJSON_AddItemToArray(sb, cJSON_CreateNumber((double)st->threads[t].native_tid));
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

cJSON *python_state_json(const struct py_state *st)
{
    if (!st->present)
        return NULL;
    cJSON *j = cJSON_CreateObject();
    add_str(j, "module", st->module);
    add_str(j, "version", st->version);
    if (st->runtime)
        add_hex(j, "runtime", st->runtime);
    else
        cJSON_AddNullToObject(j, "runtime");
    add_str(j, "runtime_source", st->runtime_source);
    cJSON_AddBoolToObject(j, "supported", st->supported);
    add_str(j, "layout_source", st->layout_source);
    add_str(j, "layout_check", st->layout_check);
    cJSON_AddNumberToObject(j, "runtimes", (double)st->runtimes);
    cJSON_AddNumberToObject(j, "threads", (double)st->nthreads);
    cJSON *g = cJSON_AddObjectToObject(j, "gil");
    if (st->gil_locked < 0) {
        cJSON_AddNullToObject(g, "locked");
    } else {
        cJSON_AddBoolToObject(g, "locked", st->gil_locked);
    }
    const struct py_thread *h = st->gil_locked == 1 ? thread_of(st, st->gil_holder) : NULL;
    if (h && h->native_tid)
        cJSON_AddNumberToObject(g, "holder_tid", (double)h->native_tid);
    else
        cJSON_AddNullToObject(g, "holder_tid");
    if (h)
        add_hex(g, "holder_thread_id", h->thread_id);
    else
        cJSON_AddNullToObject(g, "holder_thread_id");
    cJSON_AddItemToObject(j, "locks", locks_json(st));
    add_str(j, "error", st->error);
    return j;
}

static int is_eval_frame(const cJSON *f)
{
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(f, "function");
    const cJSON *sym = cJSON_GetObjectItemCaseSensitive(f, "symbol");
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(f, "inline")))
        return 0;
    return (cJSON_IsString(fn) && !strcmp(fn->valuestring, EVAL_FUNCTION)) ||
           (cJSON_IsString(sym) && !strcmp(sym->valuestring, EVAL_FUNCTION));
}

static const struct py_thread *thread_by_tid(const struct py_state *st, int64_t tid)
{
    for (size_t i = 0; st && i < st->nthreads; i++)
        if (st->threads[i].native_tid == tid)
            return &st->threads[i];
    return NULL;
}

int python_thread_known(const struct py_state *st, int64_t tid)
{
    return thread_by_tid(st, tid) != NULL;
}

/* Where each entry frame's shim (3.12+) lies on the native stack: physical frame i holds
 * [sp_i, sp_i+1). Fills eval[g] with the frames[] position of group g's native frame (the
 * non-inline entry of that physical frame); 1 when every group was placed, innermost first,
 * each strictly further out than the one before. */
static int frames_by_stack(const struct py_thread *pt, const struct unwind_stack *us,
                           const cJSON *frames, int *eval, size_t ngroups)
{
    int n = cJSON_GetArraySize(frames);
    if (!us || !pt->nframes || pt->truncated || pt->error[0] || !pt->frames[pt->nframes - 1].shim ||
        ngroups > (size_t)n)
        return 0;
    int *at = calloc(ngroups + 1, sizeof(int));
    if (!at)
        return 0;
    size_t g = 0, from = 0;
    int last = -1;
    for (size_t k = 0; k < pt->nframes; k++) {
        uint64_t a = pt->frames[k].shim;
        if (!pt->frames[k].is_entry)
            continue;
        if (!a || g >= ngroups)
            break;
        size_t i = from;
        for (; i + 1 < us->nframes; i++)
            if (us->frames[i].sp && us->frames[i + 1].sp && us->frames[i].sp <= a &&
                a < us->frames[i + 1].sp)
                break;
        if (i + 1 >= us->nframes)
            break;
        int pos = -1, p = 0;
        const cJSON *f;
        cJSON_ArrayForEach(f, frames)
        {
            const cJSON *ix = cJSON_GetObjectItemCaseSensitive(f, "index");
            if (cJSON_IsNumber(ix) && (size_t)ix->valuedouble == i &&
                !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(f, "inline")))
                pos = p;
            p++;
        }
        if (pos <= last)
            break;
        at[g++] = last = pos;
        from = i + 1;
    }
    int ok = g == ngroups;
    if (ok)
        memcpy(eval, at, ngroups * sizeof(int));
    free(at);
    return ok;
}

/* One python_frames[] entry; native (the eval frame's position in frames[]) < 0: unmerged. */
static cJSON *frame_json(const struct py_frame *pf, int native, int locals)
{
    cJSON *o = cJSON_CreateObject();
    add_str(o, "function", pf->function);
    add_str(o, "qualname", pf->qualname);
    add_str(o, "file", pf->file);
    if (pf->line >= 0)
        cJSON_AddNumberToObject(o, "line", pf->line);
    else
        cJSON_AddNullToObject(o, "line");
    cJSON_AddBoolToObject(o, "entry", pf->is_entry);
    if (native >= 0)
        cJSON_AddNumberToObject(o, "native_frame_index", native);
    else
        cJSON_AddNullToObject(o, "native_frame_index");
    if (locals) {
        cJSON *loc = cJSON_AddObjectToObject(o, "locals");
        for (unsigned i = 0; i < pf->nlocals; i++)
            cJSON_AddStringToObject(loc, pf->locals[i].name, pf->locals[i].value);
        if (pf->locals_truncated)
            cJSON_AddTrueToObject(o, "locals_truncated");
    }
    return o;
}

void python_thread_json(const struct py_state *st, int64_t tid, cJSON *t,
                        const struct unwind_stack *us)
{
    const struct py_thread *pt = thread_by_tid(st, tid);
    cJSON *arr = cJSON_CreateArray();
    if (!pt) {
        cJSON_AddNullToObject(t, "python");
        cJSON_AddItemToObject(t, "python_frames", arr);
        cJSON_AddNullToObject(t, "python_merge");
        return;
    }
    cJSON *p = cJSON_AddObjectToObject(t, "python");
    add_hex(p, "thread_id", pt->thread_id);
    add_str(p, "name", pt->name);
    cJSON_AddNumberToObject(p, "interpreter", (double)pt->interp_id);
    cJSON_AddBoolToObject(p, "holds_gil", pt->holds_gil);
    cJSON_AddBoolToObject(p, "frames_truncated", pt->truncated);
    add_str(p, "error", pt->error);

    /* the native eval frames, innermost first, as positions in frames[] */
    const cJSON *frames = cJSON_GetObjectItemCaseSensitive(t, "frames"), *f;
    size_t neval = 0, ngroups = 0;
    int nframes = cJSON_GetArraySize(frames);
    int *eval = calloc((size_t)nframes + 1, sizeof(int));
    int pos = 0;
    cJSON_ArrayForEach(f, frames)
    {
        if (eval && is_eval_frame(f))
            eval[neval++] = pos;
        pos++;
    }
    for (size_t k = 0; k < pt->nframes; k++)
        ngroups += pt->frames[k].is_entry;
    if (pt->nframes && !pt->frames[pt->nframes - 1].is_entry)
        ngroups++; /* an outermost group without its entry frame (a walk cut short) */
    /* 3.12+: each group's shim lives in its eval call's C stack frame: place the groups by it
     * (needs no symbol; Debian's 3.14 runs the loop in an unnamed local clone) */
    int by_stack = eval && frames_by_stack(pt, us, frames, eval, ngroups);
    if (by_stack)
        neval = ngroups;
    int merged = eval && pt->nframes && !pt->truncated && !pt->error[0] && ngroups == neval;
    size_t g = 0;
    for (size_t k = 0; k < pt->nframes; k++) {
        const struct py_frame *pf = &pt->frames[k];
        cJSON_AddItemToArray(arr, frame_json(pf, merged ? eval[g] : -1, st->want_locals));
        g += pf->is_entry;
    }
    cJSON_AddItemToObject(t, "python_frames", arr);
    char why[256];
    if (!pt->nframes)
        cJSON_AddNullToObject(t, "python_merge");
    else if (merged)
        cJSON_AddStringToObject(t, "python_merge", "ok");
    else {
        if (!eval)
            snprintf(why, sizeof(why), "unmerged: out of memory");
        else if (pt->truncated || pt->error[0])
            snprintf(why, sizeof(why), "unmerged: the Python frames are incomplete");
        else
            snprintf(why, sizeof(why),
                     "unmerged: %zu Python entry frame%s but %zu %s frame%s on the native stack",
                     ngroups, ngroups == 1 ? "" : "s", neval, EVAL_FUNCTION, neval == 1 ? "" : "s");
        cJSON_AddStringToObject(t, "python_merge", why);
    }
    free(eval);
}

/* python.c's readers, for python310.c (python_internal.h) */
static const struct py_layout *walk_layout(struct walk *w)
{
    return w->L;
}

const struct py_readers py_readers = {rd,         rd_ptr,      rd_i64,    rd_i32, type_is,
                                      rd_str,     rd_str_max,  type_name, is_str, rd_ulong,
                                      add_thread, walk_layout, attr_find};
