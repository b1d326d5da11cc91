/* tailcall.c - the chain of tail calls between two frames, from DWARF call sites (as gdb does).
 *
 * Main data structures: struct search - the function entry to reach, the path of tail-call sites
 * found so far (return pcs, absolute), how many complete paths were found (only a unique one is
 * used) and a budget of DIEs visited, so a hostile or huge DWARF tree cannot stall the analysis;
 * struct tailcall_cache - the results per pair of frames. A call site that names a declaration
 * (a call into another compilation unit) is resolved through the symbol table (symtab.h).
 */
#include "tailcall.h"
#include "symbolize.h"
#include "symtab.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <stdlib.h>
#include <string.h>

#define VISIT_BUDGET 200000

struct search {
    Dwfl *dwfl;
    uint64_t target;                   /* entry of the callee to reach */
    uint64_t path[TAILCALL_MAX_CHAIN]; /* return pcs of the tail-call sites, caller side first */
    uint64_t found[TAILCALL_MAX_CHAIN];
    size_t depth, found_len;
    int paths;
    long budget;
};

static int is_call_site(Dwarf_Die *d)
{
    int tag = dwarf_tag(d);
    return tag == DW_TAG_call_site || tag == DW_TAG_GNU_call_site;
}

static int site_return_pc(Dwarf_Die *site, Dwarf_Addr *pc)
{
    Dwarf_Attribute a;
    if (dwarf_formaddr(dwarf_attr(site, DW_AT_call_return_pc, &a), pc) == 0)
        return 0;
    return dwarf_formaddr(dwarf_attr(site, DW_AT_low_pc, &a), pc);
}

static int site_is_tail(Dwarf_Die *site)
{
    Dwarf_Attribute a;
    bool flag = false;
    if (dwarf_attr(site, DW_AT_call_tail_call, &a) && dwarf_formflag(&a, &flag) == 0 && flag)
        return 1;
    return dwarf_attr(site, DW_AT_GNU_tail_call, &a) && dwarf_formflag(&a, &flag) == 0 && flag;
}

/* Results of tailcall_chain by (callee pc, activation, caller pc): threads of one process share
 * most of their frames (64 threads waiting in the same place), so each pair is searched once. */
#define MEMO_SLOTS 1024u
struct memo {
    uint64_t callee_pc, caller_pc;
    int activation, used;
    size_t n;
    uint64_t out[TAILCALL_MAX_CHAIN];
};

struct tailcall_cache {
    struct memo memo[MEMO_SLOTS];
};

struct tailcall_cache *tailcall_cache_new(void)
{
    return calloc(1, sizeof(struct tailcall_cache));
}

void tailcall_cache_free(struct tailcall_cache *c)
{
    free(c);
}

/* Entry address of the function a call site calls (0: unknown, e.g. an indirect call). */
static uint64_t site_target(Dwfl_Module *m, Dwarf_Die *site, Dwarf_Addr bias)
{
    Dwarf_Attribute a;
    Dwarf_Die fn;
    Dwarf_Addr entry;
    if (!dwarf_formref_die(dwarf_attr(site, DW_AT_call_origin, &a), &fn) &&
        !dwarf_formref_die(dwarf_attr(site, DW_AT_abstract_origin, &a), &fn))
        return 0;
    if (dwarf_entrypc(&fn, &entry) == 0)
        return entry + bias;
    const char *name = dwarf_formstring(dwarf_attr_integrate(&fn, DW_AT_linkage_name, &a));
    if (!name)
        name = dwarf_diename(&fn);
    return name ? symtab_function(m, name) : 0;
}

/* Entry of the function containing pc (lookup address), from the symbol table. */
static uint64_t function_entry(Dwfl *dwfl, uint64_t lookup)
{
    Dwfl_Module *m = dwfl_addrmodule(dwfl, lookup);
    GElf_Off off = 0;
    GElf_Sym sym;
    if (!m || !symbolize_addrinfo(m, lookup, &off, &sym))
        return 0;
    return lookup - off;
}

/* The call site in the scopes containing lookup whose return pc is ret (absolute). */
static int find_site(Dwfl_Module *m, uint64_t lookup, uint64_t ret, Dwarf_Die *out,
                     Dwarf_Addr *biasp)
{
    Dwarf_Addr bias = 0;
    Dwarf_Die *scopes = NULL;
    int n = symbolize_scopes(m, lookup, &bias, &scopes), found = 0;
    for (int i = 0; i < n && !found; i++) {
        Dwarf_Die child;
        if (dwarf_child(&scopes[i], &child) != 0)
            continue;
        do {
            Dwarf_Addr pc;
            if (is_call_site(&child) && site_return_pc(&child, &pc) == 0 && pc + bias == ret) {
                *out = child;
                found = 1;
            }
        } while (!found && dwarf_siblingof(&child, &child) == 0);
        if (dwarf_tag(&scopes[i]) == DW_TAG_subprogram)
            break;
    }
    free(scopes);
    *biasp = bias;
    return found;
}

static void search_from(struct search *s, uint64_t entry);

/* Visits the DIE tree under d for tail-call sites. */
static void visit(struct search *s, Dwfl_Module *m, Dwarf_Addr bias, Dwarf_Die *d, int level)
{
    Dwarf_Die child;
    if (level > 64 || dwarf_child(d, &child) != 0)
        return;
    do {
        if (--s->budget < 0 || s->paths > 1)
            return;
        if (is_call_site(&child) && site_is_tail(&child)) {
            Dwarf_Addr ret;
            uint64_t t = site_target(m, &child, bias);
            if (t && site_return_pc(&child, &ret) == 0) {
                s->path[s->depth++] = ret + bias;
                if (t == s->target) {
                    if (++s->paths == 1) {
                        memcpy(s->found, s->path, sizeof(s->path));
                        s->found_len = s->depth;
                    }
                } else if (s->depth < TAILCALL_MAX_CHAIN) {
                    search_from(s, t);
                }
                s->depth--;
            }
        } else if (dwarf_haschildren(&child)) {
            int tag = dwarf_tag(&child);
            if (tag == DW_TAG_lexical_block || tag == DW_TAG_inlined_subroutine)
                visit(s, m, bias, &child, level + 1);
        }
    } while (dwarf_siblingof(&child, &child) == 0);
}

/* Looks for tail calls leading to s->target in the function starting at entry. */
static void search_from(struct search *s, uint64_t entry)
{
    Dwfl_Module *m = dwfl_addrmodule(s->dwfl, entry);
    Dwarf_Addr bias = 0;
    Dwarf_Die *scopes = NULL;
    int n = m ? symbolize_scopes(m, entry, &bias, &scopes) : 0;
    for (int i = 0; i < n; i++)
        if (dwarf_tag(&scopes[i]) == DW_TAG_subprogram) {
            visit(s, m, bias, &scopes[i], 0);
            break;
        }
    free(scopes);
}

static size_t chain(Dwfl *dwfl, uint64_t callee_pc, int callee_activation, uint64_t caller_pc,
                    uint64_t *out, size_t max);

size_t tailcall_chain(struct tailcall_cache *c, Dwfl *dwfl, uint64_t callee_pc,
                      int callee_activation, uint64_t caller_pc, uint64_t *out, size_t max)
{
    if (!dwfl || !callee_pc || !caller_pc)
        return 0;
    struct memo *e = &c->memo[((callee_pc * 0x9E3779B97F4A7C15ull) ^ caller_pc ^
                               (uint64_t)!!callee_activation) % MEMO_SLOTS];
    if (!(e->used && e->callee_pc == callee_pc && e->caller_pc == caller_pc &&
          e->activation == !!callee_activation)) {
        e->n = chain(dwfl, callee_pc, callee_activation, caller_pc, e->out, TAILCALL_MAX_CHAIN);
        e->callee_pc = callee_pc;
        e->caller_pc = caller_pc;
        e->activation = !!callee_activation;
        e->used = 1;
    }
    size_t n = e->n < max ? e->n : max;
    memcpy(out, e->out, n * sizeof(*out));
    return n;
}

static size_t chain(Dwfl *dwfl, uint64_t callee_pc, int callee_activation, uint64_t caller_pc,
                    uint64_t *out, size_t max)
{
    uint64_t callee = function_entry(dwfl, callee_activation ? callee_pc : callee_pc - 1);
    Dwfl_Module *m = dwfl_addrmodule(dwfl, caller_pc - 1);
    Dwarf_Die site;
    Dwarf_Addr bias = 0;
    if (!callee || !m || !find_site(m, caller_pc - 1, caller_pc, &site, &bias))
        return 0;
    uint64_t first = site_target(m, &site, bias);
    if (!first || first == callee)
        return 0;
    struct search s = {.dwfl = dwfl, .target = callee, .budget = VISIT_BUDGET};
    search_from(&s, first);
    if (s.paths != 1)
        return 0; /* none, or ambiguous: claim nothing */
    size_t n = 0;
    for (size_t i = s.found_len; i-- > 0 && n < max;)
        out[n++] = s.found[i]; /* innermost (closest to the callee) first */
    return n;
}
