/* symbolize.h - from an unwound pc to named, located frames (inline frames expanded).
 *
 * symbolize_pc() looks the pc up in the libdwfl session of unwind.h: pc - 1 for a frame that is
 * not an activation (a return address points after the call), the module and its offset from
 * modules.h (so a pc still has module + build-id + offset when no file was found), the symbol
 * from the symbol table (dwfl_module_addrinfo), and from DWARF the chain of scopes at the pc:
 * each DW_TAG_inlined_subroutine becomes its own frame (inline = 1), innermost first, located at
 * the pc's line for the innermost and at the DW_AT_call_file/call_line/call_column of the inlined
 * call for each outer one; the containing DW_TAG_subprogram is the physical frame (inline = 0).
 *
 * Names: C++ symbols are demangled with __cxa_demangle; `function` is the name without the
 * parameter list (what gdb shows and what signatures match on), `function_full` keeps it, `symbol`
 * is the raw name.
 *
 * Ownership: a struct sym_list and its strings belong to the caller (symbolize_list_free). Module
 * pointers point into the session's module list. The library never prints or exits.
 */
#ifndef CRASHPACK_SYMBOLIZE_H
#define CRASHPACK_SYMBOLIZE_H

#include <elfutils/libdwfl.h>
#include <stddef.h>
#include <stdint.h>

struct module;
struct modules;

struct sym_frame {
    uint64_t pc;             /* as unwound */
    int inline_;             /* 1: an inlined call, inside the next frame of the list */
    char *function;          /* demangled, without parameters; NULL when unknown */
    char *function_full;     /* demangled with parameters; NULL when unknown */
    char *symbol;            /* raw (mangled) name; NULL when unknown */
    uint64_t symbol_offset;  /* pc - the symbol's start (physical frames with a symbol) */
    int have_symbol_offset;
    const struct module *module; /* NULL: no module maps this pc */
    uint64_t module_offset;  /* pc - module start */
    uint64_t elf_vaddr;      /* pc - load bias: the address in the ELF file (for addr2line) */
    int have_elf_vaddr;
    char *file;              /* source file; NULL when unknown */
    int line, column;        /* 0 when unknown */
};

struct sym_list {
    struct sym_frame *v;
    size_t n;
};

/* Symbolizes one unwound pc into out (innermost inline frame first, the physical frame last).
 * Returns 0, or -1 when out of memory (out is then empty). */
int symbolize_pc(Dwfl *dwfl, const struct modules *mods, uint64_t pc, int activation,
                 struct sym_list *out);
void symbolize_list_free(struct sym_list *l);
/* Keeps the first n frames of l (frees the rest). */
void symbolize_list_truncate(struct sym_list *l, size_t n);

/* dwfl_module_addrinfo(m, addr, off, sym, NULL, NULL, NULL), remembered by (m, addr): libdwfl
 * scans the module's whole symbol table for every lookup (libc's 10 000 entries: 0.05-0.2 ms on
 * the CI VMs), and the symbolization, the tail-call search and the other threads ask for the same
 * addresses. The name points into the module's string table. symbolize_forget() empties the memo:
 * unwind_end calls it before dwfl_end (a later Dwfl may reuse a module's address). */
const char *symbolize_addrinfo(Dwfl_Module *m, GElf_Addr addr, GElf_Off *off, GElf_Sym *sym);
void symbolize_forget(void);
/* Loads the C++ demangler now (it is otherwise opened on first use by its SONAME): before
 * sandbox_seal, after which nothing can be opened by path. */
void symbolize_preload(void);

/* The concrete scopes containing the innermost scope at addr (absolute), innermost first, as a
 * malloc()ed array in *chain (the count is returned; 0: none), and the module's DWARF bias in
 * *bias; remembered by (m, addr) like symbolize_addrinfo (symbolize_forget empties it too). */
int symbolize_scopes(Dwfl_Module *m, Dwarf_Addr addr, Dwarf_Addr *bias, Dwarf_Die **chain);

/* Demangles a C++ symbol (NULL when it is not one); with_params = 0 strips the parameter list,
 * qualifiers and clone suffixes. The result is malloc()ed. */
char *symbolize_demangle(const char *sym, int with_params);

/* A malloc()ed display name for a raw symbol: demangled without parameters, or a copy. */
char *symbolize_name(const char *sym);

#endif
