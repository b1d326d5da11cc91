/* pylocks.c - the threading locks a Python process's threads reach (see pylocks.h). */
#include "pylocks.h"

#include "pylayout.h"
#include "python.h"
#include "python_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define R py_readers

/* Where the versions keep what this file reads (the rows of pylayout.h tell the versions apart:
 * 3.11 alone has is_entry, 3.11 and 3.12 alone a cframe, 3.14 alone tags its stack refs). */
struct lock_layout {
    size_t f_globals, localsplus; /* _PyInterpreterFrame */
    uint64_t slot_tag_mask;       /* 3.14: local slots are _PyStackRef */
    int sem_pointer;              /* 3.11, 3.12: lock_lock / rlock_lock is a sem_t pointer */
};

static void lock_layout_of(const struct py_layout *L, struct lock_layout *ll)
{
    ll->f_globals = L->if_is_entry ? 8 : 24;
    ll->localsplus = L->if_code_tag_mask ? 80 : 72;
    ll->slot_tag_mask = L->if_code_tag_mask;
    ll->sem_pointer = L->ts_cframe != 0;
}

/* object offsets: PyObject_HEAD is 16 bytes; lock and RLock (pylocks.h); PyCFunctionObject m_self
 */
#define OFF_LOCK 16
#define OFF_LOCK_LOCKED 32
#define OFF_RLOCK_OWNER 24
#define OFF_RLOCK_COUNT 32
#define OFF_METHOD_SELF 24

enum kind { K_OTHER, K_RLOCK, K_LOCK, K_METHOD, K_CONDITION };

#define TYPE_CACHE 256
#define TYPE_LOOKUPS 4096 /* type names read at most (a hostile core's slots all of new types) */

struct scan {
    struct walk *w;
    struct py_state *st;
    struct lock_layout ll;
    size_t cap;
    int oom;
    struct {
        uint64_t type;
        enum kind kind;
    } types[TYPE_CACHE]; /* the types seen, by address: most slots hold the same few */
    unsigned ntypes, lookups;
};

/* What the object at obj is, by its type's name (each type's name read once). */
static enum kind kind_of(struct scan *s, uint64_t obj)
{
    const struct py_layout *L = R.layout(s->w);
    uint64_t type;
    if (R.rd_ptr(s->w, obj + L->ob_type, &type) || !type || (type & 7))
        return K_OTHER;
    for (unsigned i = 0; i < s->ntypes; i++)
        if (s->types[i].type == type)
            return s->types[i].kind;
    if (s->lookups++ >= TYPE_LOOKUPS)
        return K_OTHER;
    static const struct {
        const char *name;
        enum kind kind;
    } names[] = {{"_thread.RLock", K_RLOCK},
                 {"_thread.lock", K_LOCK},
                 {"builtin_function_or_method", K_METHOD},
                 {"Condition", K_CONDITION}};
    enum kind k = K_OTHER;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && k == K_OTHER; i++)
        if (R.type_is(s->w, obj, names[i].name))
            k = names[i].kind;
    if (s->ntypes < TYPE_CACHE) {
        s->types[s->ntypes].type = type;
        s->types[s->ntypes++].kind = k;
    }
    return k;
}

static struct py_lock *lock_of(struct scan *s, uint64_t addr)
{
    for (size_t i = 0; i < s->st->nlocks; i++)
        if (s->st->locks[i].addr == addr)
            return &s->st->locks[i];
    return NULL;
}

/* Records the lock at obj (an RLock when rlock), found under name (may be NULL) and referenced
 * from the innermost frame of the thread `seen` (0: none). */
static void add_lock(struct scan *s, uint64_t obj, int rlock, const char *name, uint64_t seen)
{
    struct py_lock *l = lock_of(s, obj);
    if (!l) {
        if (s->st->nlocks >= PYLOCKS_MAX)
            return;
        if (s->st->nlocks == s->cap) {
            size_t nc = s->cap ? 2 * s->cap : 16;
            struct py_lock *v = realloc(s->st->locks, nc * sizeof(*v));
            if (!v) {
                s->oom = 1;
                return;
            }
            s->st->locks = v;
            s->cap = nc;
        }
        l = &s->st->locks[s->st->nlocks++];
        memset(l, 0, sizeof(*l));
        l->addr = obj;
        l->rlock = rlock;
        l->locked = -1;
        uint64_t p = 0;
        if (s->ll.sem_pointer && !R.rd_ptr(s->w, obj + OFF_LOCK, &p))
            l->sem = p;
        if (rlock) {
            R.rd_ptr(s->w, obj + OFF_RLOCK_OWNER, &l->owner);
            R.rd_ptr(s->w, obj + OFF_RLOCK_COUNT, &l->count);
            l->locked = 0;
        } else {
            unsigned char b = 0;
            /* 3.11/3.12: the `locked` char; 3.13+: the PyMutex byte, bit 0 locked */
            if (!R.rd(s->w, obj + (s->ll.sem_pointer ? OFF_LOCK_LOCKED : OFF_LOCK), &b, 1))
                l->locked = s->ll.sem_pointer ? b != 0 : (b & 1) != 0;
        }
    }
    if (name && name[0] && !l->name[0])
        snprintf(l->name, sizeof(l->name), "%s", name);
    for (unsigned k = 0; seen && k < l->nseen; k++)
        if (l->seen_by[k] == seen)
            seen = 0;
    if (seen && l->nseen < PYLOCKS_SEEN)
        l->seen_by[l->nseen++] = seen;
}

/* obj, if it is a lock, or reaches one in one step (a bound method of a lock: `with lock:` keeps
 * lock.__exit__ on the value stack; a threading.Condition's _lock). */
static void consider(struct scan *s, uint64_t obj, const char *name, uint64_t seen, int depth)
{
    if (!obj || (obj & 7) || depth > 1)
        return;
    enum kind k = kind_of(s, obj);
    if (k == K_RLOCK || k == K_LOCK) {
        add_lock(s, obj, k == K_RLOCK, name, seen);
    } else if (k == K_METHOD) {
        uint64_t self;
        if (!R.rd_ptr(s->w, obj + OFF_METHOD_SELF, &self))
            consider(s, self, NULL, seen, depth + 1);
    } else if (k == K_CONDITION) {
        uint64_t lk;
        char cn[128];
        snprintf(cn, sizeof(cn), "%s%s", name ? name : "", name ? " (a Condition's lock)" : "");
        if (!R.attr_find(s->w, obj, "_lock", &lk))
            consider(s, lk, name ? cn : NULL, seen, depth + 1);
    }
}

/* Every value of a dict whose key is a str, with that key as its name. */
static void scan_dict(struct scan *s, uint64_t dict)
{
    const struct py_layout *L = R.layout(s->w);
    uint64_t keys, values;
    unsigned char log2ib, kind;
    int64_t n;
    if (!dict || !R.type_is(s->w, dict, "dict") || R.rd_ptr(s->w, dict + L->dict_keys, &keys) ||
        R.rd_ptr(s->w, dict + L->dict_values, &values) ||
        R.rd(s->w, keys + L->dk_log2_index_bytes, &log2ib, 1) ||
        R.rd(s->w, keys + L->dk_kind, &kind, 1) || R.rd_i64(s->w, keys + L->dk_nentries, &n) ||
        log2ib > 32 || n < 0)
        return;
    int general = kind == L->dk_kind_general;
    size_t esz = general ? L->entry_size : L->uentry_size;
    size_t ko = general ? L->entry_key : L->uentry_key,
           vo = general ? L->entry_value : L->uentry_value;
    uint64_t entries = keys + L->dk_indices + ((uint64_t)1 << log2ib);
    for (int64_t i = 0; i < n && i < (int64_t)PYLOCKS_DICT && !s->oom; i++) {
        uint64_t k, v;
        if (R.rd_ptr(s->w, entries + (uint64_t)i * esz + ko, &k) || !k ||
            (values ? R.rd_ptr(s->w, values + L->dictvalues_values + (uint64_t)i * 8, &v)
                    : R.rd_ptr(s->w, entries + (uint64_t)i * esz + vo, &v)) ||
            !v || !R.is_str(s->w, k))
            continue;
        char *name = R.rd_str(s->w, k);
        if (name && strncmp(name, "__", 2))
            consider(s, v, name, 0, 0);
        free(name);
    }
}

/* The local slots of a frame (arguments, locals, cells, then the value stack; PYLOCKS_SLOTS at
 * most: a slot past the stack's top may hold a stale value, which only names a lock that exists).
 */
static void scan_slots(struct scan *s, uint64_t frame, uint64_t ident)
{
    for (unsigned i = 0; i < PYLOCKS_SLOTS && !s->oom; i++) {
        uint64_t v;
        if (R.rd_ptr(s->w, frame + s->ll.localsplus + 8u * i, &v))
            break;
        consider(s, v & ~s->ll.slot_tag_mask, NULL, ident, 0);
    }
}

int pylocks_scan(struct walk *w, struct py_state *st)
{
    const struct py_layout *L = R.layout(w);
    if (!L)
        return 0;
    struct scan s = {.w = w, .st = st};
    lock_layout_of(L, &s.ll);
    uint64_t dicts[16];
    size_t nd = 0;
    for (size_t t = 0; t < st->nthreads && !s.oom; t++) {
        const struct py_thread *pt = &st->threads[t];
        for (size_t f = 0; f < pt->nframes && f < PYLOCKS_FRAMES; f++) {
            uint64_t g;
            scan_slots(&s, pt->frames[f].addr, f == 0 ? pt->thread_id : 0);
            if (R.rd_ptr(w, pt->frames[f].addr + s.ll.f_globals, &g) || !g)
                continue;
            size_t k = 0;
            while (k < nd && dicts[k] != g)
                k++;
            if (k == nd && nd < sizeof(dicts) / sizeof(dicts[0]))
                dicts[nd++] = g;
        }
    }
    /* the globals last: a lock found there is named by its global name */
    for (size_t k = 0; k < nd && !s.oom; k++)
        scan_dict(&s, dicts[k]);
    return s.oom ? -1 : 0;
}
