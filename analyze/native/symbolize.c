/* symbolize.c - names, source locations and inline frames for a pc, through libdw.
 *
 * Main data structure: struct sym_list (symbolize.h), a growable array of struct sym_frame filled
 * innermost first. The DWARF path (add_dwarf_frames) follows eu-addr2line -i: the innermost scope
 * at the pc (dwarf_getscopes), then its chain of containing DIEs (dwarf_getscopes_die), one frame
 * per inlined subroutine and one for the subprogram; without DWARF one frame carries the symbol
 * table's name and whatever the line table knows.
 */
#include "symbolize.h"

#include "lazylib.h"
#include "modules.h"
#include "symtab.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <stdlib.h>
#include <string.h>

/* libstdc++'s demangler (the Itanium C++ ABI entry point), opened the first time a C++ name
 * needs it (lazylib.h): loading libstdc++ costs ~4 ms of every start on the CI VMs, and the
 * analysis of a C program never needs it. NULL when it cannot be loaded (names stay mangled). */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

static __typeof__(&__cxa_demangle) demangler(void)
{
    static struct cp_lazylib lib = {.soname = CP_SONAME_LIBSTDCXX};
    static __typeof__(&__cxa_demangle) fn;
    char err[300];
    if (!fn && !lib.failed)
        (void)CP_LAZY_FN(&lib, fn, __cxa_demangle, err, sizeof(err));
    return fn;
}

void symbolize_preload(void)
{
    (void)demangler();
}

#define MAX_INLINE_DEPTH 64

/* ---- names ---- */

static int ends_with(const char *s, size_t len, const char *suffix)
{
    size_t l = strlen(suffix);
    return len >= l && !memcmp(s + len - l, suffix, l);
}

/* Template functions demangle with their return type ("int ns::f<int>"): keep what follows the
 * last space outside <>, () and [] that does not follow "operator" ("operator new" stays). */
static void strip_return_type(char *s)
{
    int depth = 0;
    size_t cut = 0;
    for (size_t i = 0; s[i]; i++) {
        char ch = s[i];
        if (!strncmp(s + i, "operator", 8)) { /* operator<, operator() ...: not brackets */
            i += 8;
            while (s[i] && strchr("<>=!+-*/%&|^~[](),", s[i]))
                i++;
            if (!s[i])
                break;
            ch = s[i];
        }
        if (ch == ' ' && s[i + 1] == '<') /* "operator<< <char>" */
            continue;
        if (ch == '<' || ch == '(' || ch == '[')
            depth++;
        else if ((ch == '>' || ch == ')' || ch == ']') && depth > 0)
            depth--;
        else if (ch == ' ' && depth == 0 && !(i >= 8 && !strncmp(s + i - 8, "operator", 8)))
            cut = i + 1;
    }
    if (cut && s[cut])
        memmove(s, s + cut, strlen(s + cut) + 1);
}

/* Cuts " [clone .cold]" suffixes, trailing qualifiers and the final parameter list. */
static void strip_params(char *s)
{
    static const char *quals[] = {" const", " volatile", " &&", " &", " noexcept"};
    size_t len = strlen(s);
    for (int again = 1; again;) {
        again = 0;
        while (len && s[len - 1] == ']') {
            char *open = NULL;
            for (size_t i = len; i-- > 0;)
                if (s[i] == '[') {
                    open = s + i;
                    break;
                }
            if (!open || (strncmp(open, "[clone ", 7) && strncmp(open, "[abi:", 5)))
                break;
            len = (size_t)(open - s);
            while (len && s[len - 1] == ' ')
                len--;
            again = 1;
        }
        for (size_t q = 0; q < sizeof(quals) / sizeof(quals[0]); q++)
            if (ends_with(s, len, quals[q])) {
                len -= strlen(quals[q]);
                again = 1;
            }
    }
    if (len && s[len - 1] == ')') {
        int depth = 0;
        for (size_t i = len; i-- > 0;) {
            if (s[i] == ')')
                depth++;
            else if (s[i] == '(' && --depth == 0) {
                if (i > 0)
                    len = i;
                break;
            }
        }
    }
    s[len] = 0;
    strip_return_type(s);
}

char *symbolize_demangle(const char *sym, int with_params)
{
    if (!sym || strncmp(sym, "_Z", 2))
        return NULL;
    __typeof__(&__cxa_demangle) demangle = demangler();
    if (!demangle)
        return NULL;
    int status = -1;
    char *d = demangle(sym, NULL, NULL, &status);
    if (status != 0 || !d) {
        free(d);
        return NULL;
    }
    if (!with_params)
        strip_params(d);
    return d;
}

char *symbolize_name(const char *sym)
{
    char *d = symbolize_demangle(sym, 0);
    return d ? d : sym ? strdup(sym) : NULL;
}

/* ---- the list ---- */

void symbolize_list_truncate(struct sym_list *l, size_t n)
{
    for (size_t i = n; i < l->n; i++) {
        free(l->v[i].function);
        free(l->v[i].function_full);
        free(l->v[i].symbol);
        free(l->v[i].file);
    }
    if (n < l->n)
        l->n = n;
}

void symbolize_list_free(struct sym_list *l)
{
    if (!l)
        return;
    symbolize_list_truncate(l, 0);
    free(l->v);
    l->v = NULL;
}

static struct sym_frame *add(struct sym_list *l, const struct sym_frame *proto)
{
    struct sym_frame *v = realloc(l->v, (l->n + 1) * sizeof(*v));
    if (!v)
        return NULL;
    l->v = v;
    v[l->n] = *proto;
    return &v[l->n++];
}

/* Sets function and function_full from a raw name (DWARF or symbol table; NULL: unknown) and
 * symbol from the symbol table's name. A symbol version ("memcpy@@GLIBC_2.14") is not part of
 * the function's name. */
static void set_names(struct sym_frame *f, const char *raw, const char *symbol)
{
    f->symbol = symbol ? strdup(symbol) : NULL;
    if (!raw)
        return;
    char *name = strdup(raw);
    if (!name)
        return;
    char *at = strchr(name, '@');
    if (at && at != name)
        *at = 0;
    f->function = symbolize_name(name);
    char *full = symbolize_demangle(name, 1);
    f->function_full = full ? full : strdup(name);
    free(name);
}

static void set_file(struct sym_frame *f, const char *file, int line, int col)
{
    f->file = file ? strdup(file) : NULL;
    f->line = line > 0 ? line : 0;
    f->column = col > 0 ? col : 0;
}

/* ---- DWARF ---- */

static const char *die_name(Dwarf_Die *die)
{
    Dwarf_Attribute a;
    const char *n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &a));
    if (!n)
        n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a));
    return n ? n : dwarf_diename(die);
}

static int is_function(Dwarf_Die *die)
{
    int tag = dwarf_tag(die);
    return tag == DW_TAG_inlined_subroutine || tag == DW_TAG_subprogram ||
           tag == DW_TAG_entry_point;
}

/* The call site of an inlined subroutine DIE: file, line, column. */
static void call_site(Dwarf_Die *die, const char **file, int *line, int *col)
{
    Dwarf_Attribute a;
    Dwarf_Word v;
    Dwarf_Die cu;
    Dwarf_Files *files;
    size_t nfiles = 0;
    *file = NULL;
    *line = *col = 0;
    if (dwarf_formudata(dwarf_attr(die, DW_AT_call_file, &a), &v) == 0 &&
        dwarf_diecu(die, &cu, NULL, NULL) && dwarf_getsrcfiles(&cu, &files, &nfiles) == 0 &&
        v < nfiles)
        *file = dwarf_filesrc(files, v, NULL, NULL);
    if (dwarf_formudata(dwarf_attr(die, DW_AT_call_line, &a), &v) == 0 && v < 1u << 30)
        *line = (int)v;
    if (dwarf_formudata(dwarf_attr(die, DW_AT_call_column, &a), &v) == 0 && v < 1u << 30)
        *col = (int)v;
}

/* The concrete chain of scopes containing the innermost scope at lookup: dwarf_getscopes continues
 * into the abstract origin of an inlined instance, dwarf_getscopes_die on its innermost scope gives
 * the containing DIEs of the concrete tree. */
static int scope_chain(Dwfl_Module *dm, Dwarf_Addr lookup, Dwarf_Addr *biasp, Dwarf_Die **chain)
{
    Dwarf_Addr bias = 0;
    Dwarf_Die *cudie = dwfl_module_addrdie(dm, lookup, &bias);
    Dwarf_Die *scopes = NULL, inner;
    *chain = NULL;
    *biasp = bias;
    if (!cudie)
        return 0;
    int n = dwarf_getscopes(cudie, lookup - bias, &scopes);
    if (n <= 0) {
        free(scopes);
        return 0;
    }
    Dwarf *dw = dwfl_module_getdwarf(dm, &bias);
    Dwarf_Off off = dwarf_dieoffset(&scopes[0]);
    free(scopes);
    if (!dw || !dwarf_offdie(dw, off, &inner))
        return 0;
    n = dwarf_getscopes_die(&inner, chain);
    return n > 0 ? n : 0;
}

/* scope_chain results by (module, address): the symbolization and the tail-call search walk the
 * same compilation units for the same addresses (dwarf_getscopes walks a CU's DIE tree). */
#define SCOPES_SLOTS 256u
static struct scopes_memo {
    Dwfl_Module *m; /* NULL: empty */
    Dwarf_Addr addr, bias;
    int n;
    Dwarf_Die *v;
} scopes_memo[SCOPES_SLOTS];

int symbolize_scopes(Dwfl_Module *m, Dwarf_Addr addr, Dwarf_Addr *bias, Dwarf_Die **chain)
{
    *chain = NULL;
    *bias = 0;
    if (!m)
        return 0;
    struct scopes_memo *e =
        &scopes_memo[((addr * 0x9E3779B97F4A7C15ull) >> 32 ^ (uintptr_t)m >> 4) % SCOPES_SLOTS];
    if (e->m != m || e->addr != addr) {
        Dwarf_Die *v = NULL;
        Dwarf_Addr b = 0;
        int n = scope_chain(m, addr, &b, &v);
        free(e->v);
        *e = (struct scopes_memo){m, addr, b, n, v};
    }
    *bias = e->bias;
    if (e->n <= 0)
        return 0;
    if (!(*chain = malloc((size_t)e->n * sizeof(**chain))))
        return 0;
    memcpy(*chain, e->v, (size_t)e->n * sizeof(**chain));
    return e->n;
}

/* One frame per inlined subroutine, then the subprogram. Returns the number added, -1 on OOM. */
static int add_dwarf_frames(struct sym_list *l, const struct sym_frame *proto, Dwfl_Module *dm,
                            Dwarf_Addr lookup, const char *symname, const char *file, int line,
                            int col)
{
    Dwarf_Die *chain = NULL;
    Dwarf_Addr bias;
    int n = symbolize_scopes(dm, lookup, &bias, &chain), added = 0;
    for (int i = 0; i < n && added < MAX_INLINE_DEPTH; i++) {
        if (!is_function(&chain[i]))
            continue;
        int inl = dwarf_tag(&chain[i]) == DW_TAG_inlined_subroutine;
        struct sym_frame *f = add(l, proto);
        if (!f) {
            free(chain);
            return -1;
        }
        added++;
        f->inline_ = inl;
        const char *dn = die_name(&chain[i]);
        set_names(f, dn ? dn : inl ? NULL : symname, inl ? NULL : symname);
        set_file(f, file, line, col);
        if (!inl)
            break;
        f->have_symbol_offset = 0;
        call_site(&chain[i], &file, &line, &col); /* where the next (outer) frame is */
    }
    free(chain);
    return added;
}

#define ADDRINFO_SLOTS 1024u
static struct addrinfo_memo {
    Dwfl_Module *m; /* NULL: empty */
    GElf_Addr addr;
    const char *name;
    GElf_Off off;
    GElf_Sym sym;
} addrinfo_memo[ADDRINFO_SLOTS];

const char *symbolize_addrinfo(Dwfl_Module *m, GElf_Addr addr, GElf_Off *off, GElf_Sym *sym)
{
    struct addrinfo_memo *e =
        &addrinfo_memo[((addr * 0x9E3779B97F4A7C15ull) >> 32 ^ (uintptr_t)m >> 4) % ADDRINFO_SLOTS];
    if (!m || e->m != m || e->addr != addr) {
        GElf_Off o = 0;
        GElf_Sym y;
        memset(&y, 0, sizeof(y));
        const char *name = m ? symtab_addrinfo(m, addr, &o, &y) : NULL;
        if (!m)
            return NULL;
        *e = (struct addrinfo_memo){m, addr, name, o, y};
    }
    *off = e->off;
    *sym = e->sym;
    return e->name;
}

void symbolize_forget(void)
{
    memset(addrinfo_memo, 0, sizeof(addrinfo_memo));
    for (size_t i = 0; i < SCOPES_SLOTS; i++)
        free(scopes_memo[i].v);
    memset(scopes_memo, 0, sizeof(scopes_memo));
    symtab_forget();
}

int symbolize_pc(Dwfl *dwfl, const struct modules *mods, uint64_t pc, int activation,
                 struct sym_list *out)
{
    out->v = NULL;
    out->n = 0;
    Dwarf_Addr lookup = activation || pc == 0 ? pc : pc - 1;
    struct sym_frame proto = {.pc = pc};
    proto.module = modules_at(mods, lookup);
    if (proto.module) {
        proto.module_offset = pc - proto.module->start;
        proto.elf_vaddr = pc - proto.module->bias;
        proto.have_elf_vaddr = proto.module->bias_known;
    }
    Dwfl_Module *dm = dwfl ? dwfl_addrmodule(dwfl, lookup) : NULL;
    const char *symname = NULL, *file = NULL;
    int line = 0, col = 0;
    if (dm) {
        Dwarf_Addr bias = 0;
        GElf_Off off = 0;
        GElf_Sym sym;
        if (dwfl_module_getelf(dm, &bias)) {
            proto.elf_vaddr = pc - bias;
            proto.have_elf_vaddr = 1;
        }
        symname = symbolize_addrinfo(dm, lookup, &off, &sym);
        if (symname) {
            proto.symbol_offset = off + (pc - lookup);
            proto.have_symbol_offset = 1;
        }
        Dwfl_Line *ln = dwfl_module_getsrc(dm, lookup);
        if (ln)
            file = dwfl_lineinfo(ln, NULL, &line, &col, NULL, NULL);
        int added = add_dwarf_frames(out, &proto, dm, lookup, symname, file, line, col);
        if (added < 0) {
            symbolize_list_free(out);
            return -1;
        }
        if (added > 0)
            return 0;
    }
    struct sym_frame *f = add(out, &proto);
    if (!f)
        return -1;
    set_names(f, symname, symname);
    set_file(f, file, line, col);
    return 0;
}
