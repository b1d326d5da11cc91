/* pylocals.c - a Python frame's local variables, read from memory (see pylocals.h). */
#include "pylocals.h"

#include "pylayout.h"
#include "python.h"
#include "python_internal.h"
#include "scrub.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define R py_readers

/* ---- reprs ---- */

/* out (at most max bytes and its NUL) holds s; a longer s is cut on a UTF-8 boundary and ends in
 * "..." (Python's side cuts the same way: python/crashpack/_report.py _cut_value) */
static void put_cut(const char *s, size_t n, char *out, size_t max)
{
    if (n > max) {
        n = max > 3 ? max - 3 : 0;
        while (n && ((unsigned char)s[n] & 0xc0) == 0x80)
            n--;
        memcpy(out, s, n);
        memcpy(out + n, "...", max > 3 ? 4 : 1);
        return;
    }
    memcpy(out, s, n);
    out[n] = 0;
}

void pylocals_repr_float(double d, char *out, size_t len)
{
    if (isnan(d) || isinf(d)) {
        snprintf(out, len, "%s", isnan(d) ? "nan" : d > 0 ? "inf" : "-inf");
        return;
    }
    char e[48];
    for (int p = 1; p <= 17; p++) { /* the shortest that reads back */
        snprintf(e, sizeof(e), "%.*e", p - 1, d);
        if (strtod(e, NULL) == d)
            break;
    }
    /* e: [-]D[.DDD]e[+-]XX */
    const char *m = e[0] == '-' ? e + 1 : e, *ep = strchr(m, 'e');
    if (!ep) {
        snprintf(out, len, "%s", e);
        return;
    }
    char digits[24];
    size_t nd = 0;
    for (const char *p = m; p < ep && nd < sizeof(digits) - 1; p++)
        if (*p >= '0' && *p <= '9')
            digits[nd++] = *p;
    digits[nd] = 0;
    int x = atoi(ep + 1);
    const char *sign = e[0] == '-' ? "-" : "";
    if (x < -4 || x >= 16) { /* 1.5e+300, 1e-05 */
        snprintf(out, len, "%s%c%s%s%se%c%02d", sign, digits[0], nd > 1 ? "." : "", digits + 1, "",
                 x < 0 ? '-' : '+', x < 0 ? -x : x);
    } else if (x < 0) { /* 0.00123 */
        snprintf(out, len, "%s0.%.*s%s", sign, -x - 1, "0000", digits);
    } else if ((size_t)x + 1 >= nd) { /* 1500.0 */
        snprintf(out, len, "%s%s%.*s.0", sign, digits, (int)((size_t)x + 1 - nd),
                 "0000000000000000");
    } else { /* 12.5 */
        snprintf(out, len, "%s%.*s.%s", sign, x + 1, digits, digits + x + 1);
    }
}

/* one escaped character of a quoted repr into o (room for 4 bytes) */
static size_t esc_char(unsigned c, char q, char *o)
{
    if (c == (unsigned char)q || c == '\\') {
        o[0] = '\\';
        o[1] = (char)c;
        return 2;
    }
    if (c == '\n' || c == '\r' || c == '\t') {
        o[0] = '\\';
        o[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
        return 2;
    }
    return (size_t)snprintf(o, 5, "\\x%02x", c);
}

void pylocals_repr_str(const char *s, char *out, size_t max)
{
    size_t n = strlen(s);
    char q = strchr(s, '\'') && !strchr(s, '"') ? '"' : '\'';
    char *b = malloc(4 * n + 3);
    if (!b) {
        snprintf(out, max + 1, "<str>");
        return;
    }
    size_t o = 0;
    b[o++] = q;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        /* C1 controls (U+0080-U+009F, c2 80-c2 9f) print as \x80 in Python's repr */
        if (c == 0xc2 && i + 1 < n && (unsigned char)s[i + 1] >= 0x80 &&
            (unsigned char)s[i + 1] <= 0x9f) {
            o += esc_char((unsigned char)s[++i], q, b + o);
        } else if (c < 0x20 || c == 0x7f || c == (unsigned char)q || c == '\\') {
            o += esc_char(c, q, b + o);
        } else {
            b[o++] = (char)c;
        }
    }
    b[o++] = q;
    put_cut(b, o, out, max);
    free(b);
}

void pylocals_repr_bytes(const unsigned char *p, size_t n, size_t total, char *out, size_t max)
{
    int sq = memchr(p, '\'', n) != NULL, dq = memchr(p, '"', n) != NULL;
    char q = sq && !dq ? '"' : '\'';
    char *b = malloc(4 * n + 5);
    if (!b) {
        snprintf(out, max + 1, "<bytes>");
        return;
    }
    size_t o = 0;
    b[o++] = 'b';
    b[o++] = q;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = p[i];
        if (c < 0x20 || c >= 0x7f || c == (unsigned char)q || c == '\\')
            o += esc_char(c, q, b + o);
        else
            b[o++] = (char)c;
    }
    b[o++] = q;
    /* a longer object: n is more than max, its repr is cut ("...") */
    (void)total;
    put_cut(b, o, out, max);
    free(b);
}

/* ---- objects ---- */

/* A signed int object of at most two digits (60 bits). */
static int rd_long(struct walk *w, const struct py_layout *L, uint64_t obj, int64_t *out)
{
    int64_t size;
    int neg = 0;
    if (R.rd_i64(w, obj + L->ob_size, &size))
        return -1;
    if (L->long_tag_shift) { /* 3.12+: lv_tag = digits << shift | sign (0 +, 1 zero, 2 -) */
        uint64_t tag = (uint64_t)size;
        neg = (tag & 3) == 2;
        size = (tag & 3) == 1 ? 0 : (int64_t)(tag >> L->long_tag_shift);
    } else if (size < 0) { /* 3.11: ob_size's sign */
        neg = 1;
        size = -size;
    }
    if (size < 0 || size > 2 || L->long_shift > 30)
        return -1;
    uint64_t v = 0;
    for (int64_t i = 0; i < size; i++) {
        uint32_t d;
        if (R.rd(w, obj + L->long_digit + 4 * (uint64_t)i, &d, sizeof(d)) || d >> L->long_shift)
            return -1;
        v |= (uint64_t)d << (L->long_shift * (uint64_t)i);
    }
    *out = neg ? -(int64_t)v : (int64_t)v;
    return 0;
}

/* The object at obj as a short repr (see pylocals.h) in out (max bytes and a NUL). */
static void value_repr(struct walk *w, const struct py_layout *L, uint64_t obj, char *out,
                       size_t max)
{
    char tn[64];
    int64_t i;
    if (R.type_name(w, obj, tn, sizeof(tn))) {
        snprintf(out, max + 1, "<object at 0x%" PRIx64 " (not in the core)>", obj);
        return;
    }
    if (!strcmp(tn, "NoneType")) {
        snprintf(out, max + 1, "None");
    } else if (!strcmp(tn, "bool") && !rd_long(w, L, obj, &i)) {
        snprintf(out, max + 1, "%s", i ? "True" : "False");
    } else if (!strcmp(tn, "int") && !rd_long(w, L, obj, &i)) {
        snprintf(out, max + 1, "%" PRId64, i);
    } else if (!strcmp(tn, "float") && L->float_value) {
        double d;
        if (R.rd(w, obj + L->float_value, &d, sizeof(d)))
            snprintf(out, max + 1, "<float object at 0x%" PRIx64 ">", obj);
        else
            pylocals_repr_float(d, out, max + 1);
    } else if (!strcmp(tn, "str")) {
        char *s = R.rd_str_max(w, obj, PY_LOCAL_VALUE_MAX + 1);
        if (s)
            pylocals_repr_str(s, out, max);
        else
            snprintf(out, max + 1, "<str object at 0x%" PRIx64 ">", obj);
        free(s);
    } else if (!strcmp(tn, "bytes")) {
        int64_t n;
        unsigned char buf[PY_LOCAL_VALUE_MAX + 1];
        size_t k = 0;
        int ok = !R.rd_i64(w, obj + L->ob_size, &n) && n >= 0;
        if (ok) {
            k = n > (int64_t)sizeof(buf) ? sizeof(buf) : (size_t)n;
            ok = !k || !R.rd(w, obj + L->bytes_sval, buf, k);
        }
        if (ok)
            pylocals_repr_bytes(buf, k, (size_t)n, out, max);
        else
            snprintf(out, max + 1, "<bytes object at 0x%" PRIx64 ">", obj);
    } else {
        snprintf(out, max + 1, "<%s object at 0x%" PRIx64 ">", tn, obj);
    }
}

/* ---- frames ---- */

void pylocals_code(struct walk *w, const struct py_layout *L, uint64_t code,
                   struct py_code_locals *c)
{
    memset(c, 0, sizeof(*c));
    uint64_t names, kinds;
    int64_t n, nk;
    if (!L->if_localsplus || R.rd_ptr(w, code + L->co_localsplusnames, &names) ||
        !R.type_is(w, names, "tuple") || R.rd_i64(w, names + L->ob_size, &n) || n <= 0)
        return;
    c->names = names;
    c->n = n > (int64_t)PY_MAX_SLOTS ? PY_MAX_SLOTS : (size_t)n;
    if (!R.rd_ptr(w, code + L->co_localspluskinds, &kinds) &&
        !R.rd_i64(w, kinds + L->ob_size, &nk) && nk >= (int64_t)c->n && (c->kinds = malloc(c->n)) &&
        R.rd(w, kinds + L->bytes_sval, c->kinds, c->n)) {
        free(c->kinds);
        c->kinds = NULL;
    }
}

void pylocals_code_free(struct py_code_locals *c)
{
    free(c->kinds);
    memset(c, 0, sizeof(*c));
}

/* name=value through the shape scrubber: a value whose name or form says secret is masked */
static void mask(const char *name, char *value)
{
    char buf[PY_LOCAL_NAME_MAX * 4 + PY_LOCAL_VALUE_MAX + 8];
    size_t nl = strlen(name), vl = strlen(value);
    if (nl + 1 + vl + 1 > sizeof(buf))
        return;
    memcpy(buf, name, nl);
    buf[nl] = '=';
    memcpy(buf + nl + 1, value, vl + 1);
    cp_scrub_text(NULL, (uint8_t *)buf, nl + 1 + vl);
    memcpy(value, buf + nl + 1, vl);
}

static int add_local(struct py_frame *f, char *name, const char *value)
{
    struct py_local *v = realloc(f->locals, (f->nlocals + 1) * sizeof(*v));
    char *val = strdup(value);
    if (!v || !val) {
        if (v)
            f->locals = v;
        free(val);
        free(name);
        return -1;
    }
    f->locals = v;
    v[f->nlocals].name = name;
    v[f->nlocals++].value = val;
    return 0;
}

/* The object slot i holds, in *obj (0: unbound); *tagged set for 3.14's tagged int (its value in
 * *obj). -1 when the slot is not in the core. */
static int slot(struct walk *w, const struct py_layout *L, uint64_t frame, size_t i,
                unsigned char kind, uint64_t *obj, int *tagged)
{
    uint64_t v;
    if (R.rd_ptr(w, frame + L->if_localsplus + 8 * (uint64_t)i, &v))
        return -1;
    *tagged = L->stackref_int_tag && (v & L->if_code_tag_mask) == L->stackref_int_tag;
    if (!*tagged)
        v &= ~(uint64_t)L->if_code_tag_mask;
    /* a cell or free variable's slot holds the cell (once the frame made it) */
    if (v && !*tagged && (kind & (L->fast_cell | L->fast_free)) && R.type_is(w, v, "cell") &&
        R.rd_ptr(w, v + L->cell_ref, &v))
        v = 0;
    *obj = v;
    return 0;
}

int pylocals_read(struct walk *w, const struct py_layout *L, uint64_t frame,
                  const struct py_code_locals *c, struct py_locals_budget *b, struct py_frame *f)
{
    for (size_t i = 0; i < c->n; i++) {
        unsigned char kind = c->kinds ? c->kinds[i] : 0;
        uint64_t obj, name;
        int tagged;
        if (!b->slots_left) {
            f->locals_truncated = 1;
            break;
        }
        b->slots_left--;
        if ((L->fast_hidden && (kind & L->fast_hidden)))
            continue;
        if (slot(w, L, frame, i, kind, &obj, &tagged))
            break;
        if (!obj && !tagged)
            continue;
        if (f->nlocals == PY_MAX_LOCALS || !b->locals_left) {
            f->locals_truncated = 1;
            break;
        }
        if (R.rd_ptr(w, c->names + L->tuple_item + 8 * (uint64_t)i, &name) || !R.is_str(w, name))
            continue;
        char *nm = R.rd_str_max(w, name, PY_LOCAL_NAME_MAX);
        if (!nm || !*nm) {
            free(nm);
            continue;
        }
        char cut[PY_LOCAL_NAME_MAX + 4];
        put_cut(nm, strlen(nm), cut, PY_LOCAL_NAME_MAX);
        memcpy(nm, cut, strlen(cut) + 1); /* never longer than nm */
        b->locals_left--;
        char val[PY_LOCAL_VALUE_MAX + 1];
        if (tagged)
            snprintf(val, sizeof(val), "%" PRId64, (int64_t)obj >> 2);
        else
            value_repr(w, L, obj, val, PY_LOCAL_VALUE_MAX);
        mask(nm, val);
        if (add_local(f, nm, val))
            return -1;
    }
    return 0;
}

void pylocals_free(struct py_frame *f)
{
    for (unsigned i = 0; i < f->nlocals; i++) {
        free(f->locals[i].name);
        free(f->locals[i].value);
    }
    free(f->locals);
    f->locals = NULL;
    f->nlocals = 0;
}
