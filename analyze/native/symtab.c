/* symtab.c - a module's symbol table read once into a compact array, for the two questions the
 * analysis asks of it many times: which symbol contains an address, and where a function is.
 *
 * libdwfl answers the first (dwfl_module_addrinfo) by walking the whole table through gelf on
 * every call: ~80 us for libc's 6700 symbols, and a 64-thread core asks ~25 times. Here the walk
 * reads a plain array. The choice is libdwfl's own, not an approximation of it: the same passes
 * (global symbols first, then the local ones), the same order (the table's) and the same
 * preferences between symbols that contain the address (closer start, stronger binding, then the
 * smaller one of two at the same start). What depends on symbols without a size (assembly labels)
 * - whether the locals are searched at all, and the fallback to such a label - is left to
 * dwfl_module_addrinfo itself: when no symbol with a size contains the address, or a global label
 * sits exactly at it, the answer comes from libdwfl.
 *
 * Main data structure: per module (struct table), the entries libdwfl's search considers (named,
 * defined, not a section/file/TLS symbol) in table order: value as dwfl_module_getsym_info gives
 * it, size, binding, type, index and the name without its @version.
 */
#include "symtab.h"

#include <gelf.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ENTRIES 4000000 /* the rest of a larger table is left out (and addresses to libdwfl) */

struct entry {
    uint64_t value, size;
    const char *name; /* into the module's string table: valid while the Dwfl lives */
    uint32_t ndx;
    uint32_t namelen; /* without a "@version" suffix */
    unsigned char bind, type;
};

struct table {
    Dwfl_Module *m;
    struct entry *v;
    size_t n;
    int first_global; /* dwfl_module_getsymtab_first_global */
    int usable;       /* 0: every address question goes to libdwfl */
};

static struct table *tables;
static size_t ntables;
static size_t n_answered, n_passed_on;

void symtab_counts(size_t *answered, size_t *passed_on)
{
    *answered = n_answered;
    *passed_on = n_passed_on;
}

void symtab_forget(void)
{
    for (size_t i = 0; i < ntables; i++)
        free(tables[i].v);
    free(tables);
    tables = NULL;
    ntables = 0;
}

/* Only where libdwfl's values are plain st_value + bias: no function descriptors (ppc64). */
static int plain_values(Dwfl_Module *m)
{
    GElf_Addr bias;
    Elf *e = dwfl_module_getelf(m, &bias);
    GElf_Ehdr eh;
    if (!e || !gelf_getehdr(e, &eh))
        return 0;
    return eh.e_machine == EM_X86_64 || eh.e_machine == EM_AARCH64 || eh.e_machine == EM_386;
}

static void fill(struct table *t)
{
    int n = dwfl_module_getsymtab(t->m), whole = 1;
    t->first_global = dwfl_module_getsymtab_first_global(t->m);
    if (n > MAX_ENTRIES) {
        n = MAX_ENTRIES;
        whole = 0;
    }
    if (n <= 1 || !(t->v = malloc((size_t)n * sizeof(*t->v))))
        return;
    for (int i = 1; i < n; i++) {
        GElf_Sym sym;
        GElf_Addr value = 0;
        const char *s = dwfl_module_getsym_info(t->m, i, &sym, &value, NULL, NULL, NULL);
        int type = GELF_ST_TYPE(sym.st_info);
        if (!s || !s[0] || sym.st_shndx == SHN_UNDEF || type == STT_SECTION || type == STT_FILE ||
            type == STT_TLS)
            continue;
        const char *at = strchr(s, '@');
        size_t len = at ? (size_t)(at - s) : strlen(s);
        t->v[t->n++] = (struct entry){value, sym.st_size, s, (uint32_t)i,
                                      len > UINT32_MAX ? UINT32_MAX : (uint32_t)len,
                                      (unsigned char)GELF_ST_BIND(sym.st_info), (unsigned char)type};
    }
    t->usable = whole && t->first_global >= 0 && plain_values(t->m);
}

static struct table *table_of(Dwfl_Module *m)
{
    for (size_t i = 0; i < ntables; i++)
        if (tables[i].m == m)
            return &tables[i];
    struct table *v = realloc(tables, (ntables + 1) * sizeof(*v));
    if (!v)
        return NULL;
    tables = v;
    struct table *t = &tables[ntables++];
    *t = (struct table){.m = m};
    fill(t);
    return t;
}

/* libdwfl's binding_value: higher is preferred */
static int rank(unsigned bind)
{
    return bind == STB_GLOBAL ? 3 : bind == STB_WEAK ? 2 : bind == STB_LOCAL ? 1 : 0;
}

/* libdwfl's choice among the symbols with a size that contain addr, with table indices in
 * [lo, hi), visited in table order (NULL: none). */
static const struct entry *best_sized(const struct table *t, uint64_t addr, uint32_t lo,
                                      uint32_t hi)
{
    const struct entry *best = NULL;
    for (size_t i = 0; i < t->n; i++) {
        const struct entry *e = &t->v[i];
        if (e->ndx < lo || e->ndx >= hi || !e->size || e->value > addr || addr - e->value >= e->size)
            continue;
        if (!best || best->value < e->value || rank(best->bind) < rank(e->bind))
            best = e;
        else if (best->value == e->value &&
                 ((best->size > e->size && rank(best->bind) <= rank(e->bind)) ||
                  (best->size >= e->size && rank(best->bind) < rank(e->bind))))
            best = e;
    }
    return best;
}

/* A global symbol without a size exactly at addr: libdwfl then skips the locals. */
static int global_label_at(const struct table *t, uint64_t addr, uint32_t lo)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->v[i].ndx >= lo && !t->v[i].size && t->v[i].value == addr)
            return 1;
    return 0;
}

const char *symtab_addrinfo(Dwfl_Module *m, GElf_Addr addr, GElf_Off *off, GElf_Sym *sym)
{
    struct table *t = m ? table_of(m) : NULL;
    const struct entry *e = NULL;
    if (t && t->usable) {
        uint32_t fg = t->first_global > 0 ? (uint32_t)t->first_global : 1;
        e = best_sized(t, addr, fg, UINT32_MAX);
        if (!e && t->first_global > 1 && !global_label_at(t, addr, fg))
            e = best_sized(t, addr, 1, fg);
    }
    if (!e) {
        n_passed_on++;
        return m ? dwfl_module_addrinfo(m, addr, off, sym, NULL, NULL, NULL) : NULL;
    }
    n_answered++;
    GElf_Addr value = 0;
    const char *name = dwfl_module_getsym_info(m, (int)e->ndx, sym, &value, NULL, NULL, NULL);
    *off = addr - e->value;
    return name;
}

uint64_t symtab_function(Dwfl_Module *m, const char *name)
{
    struct table *t = m ? table_of(m) : NULL;
    size_t len = strlen(name);
    uint64_t best = 0;
    for (size_t i = 0; t && i < t->n; i++) {
        const struct entry *e = &t->v[i];
        if (e->type == STT_FUNC && e->value && e->namelen == len && e->name[0] == name[0] &&
            !memcmp(e->name, name, len) && (!best || e->value < best))
            best = e->value;
    }
    return best;
}
