/* python_internal.h - python.c's bounded readers, for the per-version walkers (python310.c).
 *
 * python.c keeps its readers static; it exports them once, as the table py_readers, so a walker
 * in another file reads the process's memory the same way (every read through the walk's read
 * function, addresses checked, strings bounded) without a copy. struct walk stays python.c's:
 * a walker only passes it back. The readers that look at objects use the walk's layout (w->L):
 * ob_type, tp_name (type_is), str_* (rd_str), ob_size, long_* (rd_ulong).
 */
#ifndef CRASHPACK_PYTHON_INTERNAL_H
#define CRASHPACK_PYTHON_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

struct walk;
struct py_state;
struct py_layout;

struct py_readers {
    /* len bytes at addr: 0, or -1 (addr 0, wrapping, or not in the process) */
    int (*rd)(struct walk *w, uint64_t addr, void *buf, size_t len);
    int (*rd_ptr)(struct walk *w, uint64_t addr, uint64_t *out);
    int (*rd_i64)(struct walk *w, uint64_t addr, int64_t *out);
    int (*rd_i32)(struct walk *w, uint64_t addr, int32_t *out);
    /* 1 when the object's type is named want */
    int (*type_is)(struct walk *w, uint64_t obj, const char *want);
    /* a compact str as malloc()ed UTF-8 (at most PY_MAX_STRING characters); NULL when not one */
    char *(*rd_str)(struct walk *w, uint64_t obj);
    /* rd_str of at most maxchars characters */
    char *(*rd_str_max)(struct walk *w, uint64_t obj, size_t maxchars);
    /* the object's type name (tp_name, printable ASCII, '?' for any other byte) in buf: 0, or -1 */
    int (*type_name)(struct walk *w, uint64_t obj, char *buf, size_t len);
    /* 1 when the object is a str (the type remembered after the first) */
    int (*is_str)(struct walk *w, uint64_t obj);
    /* a non-negative int object below 2**64 */
    int (*rd_ulong)(struct walk *w, uint64_t obj, uint64_t *out);
    /* appends a zeroed thread to st->threads (capacity *cap, doubled as needed): 0, or -1 */
    int (*add_thread)(struct py_state *st, size_t *cap);
    /* the walk's layout (pylayout.h), for readers of other objects (pylocks.c) */
    const struct py_layout *(*layout)(struct walk *w);
    /* an instance attribute (its __dict__ or managed values): 0, or -1 when not found */
    int (*attr_find)(struct walk *w, uint64_t obj, const char *key, uint64_t *value);
};

extern const struct py_readers py_readers;

#endif
