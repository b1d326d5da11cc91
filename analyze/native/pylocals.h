/* pylocals.h - a Python frame's local variables read from memory (python_locals = on; issue 23,
 * docs/python.md "Local variables").
 *
 * CPython 3.11-3.14 keep a frame's locals in _PyInterpreterFrame.localsplus, one slot per name
 * of the code object's co_localsplusnames (a tuple), each slot's kind in co_localspluskinds: a
 * cell or free variable's slot holds a cell (its ob_ref is the value), 3.13+'s hidden slots are
 * an inlined comprehension's and are left out, an empty slot (NULL; 3.14 a NULL stack reference)
 * is an unbound name and is left out. 3.14's slots are _PyStackRefs: the low tag bits are masked,
 * and a tagged int is its value.
 *
 * Values as short reprs, the way Python prints them: None, True/False, int (up to 60 bits; a
 * larger one by type and address), float (the shortest repr that reads back), str (compact, cut)
 * and bytes with their quotes and escapes; any other object as "<TYPE object at 0xADDR>" (its own
 * __repr__ is Python code: not run). Each value is at most PY_LOCAL_VALUE_MAX bytes ("..." ends a
 * cut one), each name PY_LOCAL_NAME_MAX; a frame has at most PY_MAX_LOCALS; the walk as a whole
 * reads at most PY_MAX_TOTAL_LOCALS values and PY_MAX_TOTAL_SLOTS slots (a hostile core cannot
 * make it long). Secrets: each value is masked as `name=value` text by the shape scrubber
 * (common/scrub.h: `password='...'`, `api_key=...`, tokens by their form).
 * Every read goes through the walk's reader (python_internal.h): bounded, never trusted.
 */
#ifndef CRASHPACK_PYLOCALS_H
#define CRASHPACK_PYLOCALS_H

#include <stddef.h>
#include <stdint.h>

struct walk;
struct py_layout;
struct py_frame;

#define PY_MAX_LOCALS 32u          /* per frame */
#define PY_LOCAL_VALUE_MAX 120u    /* bytes of one repr */
#define PY_LOCAL_NAME_MAX 64u      /* bytes of one name */
#define PY_MAX_SLOTS 1024u         /* localsplus slots looked at per frame */
#define PY_MAX_TOTAL_LOCALS 4096u  /* values read over the whole walk */
#define PY_MAX_TOTAL_SLOTS 262144u /* slots read over the whole walk */

/* What one walk may still read. */
struct py_locals_budget {
    size_t locals_left, slots_left;
};

/* The code object's names and kinds, for the frames that run it. */
struct py_code_locals {
    uint64_t names;       /* co_localsplusnames (a tuple) */
    size_t n;             /* its size, at most PY_MAX_SLOTS */
    unsigned char *kinds; /* co_localspluskinds' first n bytes; NULL when unreadable */
};

/* Reads the names and kinds of code object `code` into c (zeroed first). */
void pylocals_code(struct walk *w, const struct py_layout *L, uint64_t code,
                   struct py_code_locals *c);
void pylocals_code_free(struct py_code_locals *c);

/* The locals of the frame at `frame` (running code c) into f->locals / f->nlocals /
 * f->locals_truncated. 0, or -1 when out of memory. */
int pylocals_read(struct walk *w, const struct py_layout *L, uint64_t frame,
                  const struct py_code_locals *c, struct py_locals_budget *b, struct py_frame *f);

/* Frees f's locals. */
void pylocals_free(struct py_frame *f);

/* Python's repr of a float: the shortest digits that read back as d, in fixed notation from
 * 1e-4 to 1e16 (with ".0" when whole), else as 1.5e+300. */
void pylocals_repr_float(double d, char *out, size_t len);
/* Python's repr of a str (UTF-8 s): quoted, escaped; cut to at most max bytes with "...". */
void pylocals_repr_str(const char *s, char *out, size_t max);
/* Python's repr of bytes (n of them, of a total of `total`): b'...', cut to max bytes. */
void pylocals_repr_bytes(const unsigned char *p, size_t n, size_t total, char *out, size_t max);

#endif
