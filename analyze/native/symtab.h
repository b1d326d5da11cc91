/* symtab.h - a module's symbol table read once: the symbol containing an address (the answer
 * dwfl_module_addrinfo gives) and a function's address by name, without a walk through libdwfl's
 * table per question.
 *
 * Tables are kept per Dwfl_Module until symtab_forget(), which must run before the Dwfl ends
 * (symbolize_forget calls it). Not thread-safe. Never prints or exits.
 */
#ifndef CRASHPACK_SYMTAB_H
#define CRASHPACK_SYMTAB_H

#include <elfutils/libdwfl.h>
#include <stdint.h>

/* dwfl_module_addrinfo(m, addr, off, sym, NULL, NULL, NULL): the same symbol, offset and GElf_Sym. */
const char *symtab_addrinfo(Dwfl_Module *m, GElf_Addr addr, GElf_Off *off, GElf_Sym *sym);

/* The lowest address of a function symbol named `name` (a "@version" suffix in the table is
 * ignored), 0 when there is none. */
uint64_t symtab_function(Dwfl_Module *m, const char *name);

void symtab_forget(void);

/* How many symtab_addrinfo calls the table answered and how many went on to libdwfl (tests). */
void symtab_counts(size_t *answered, size_t *passed_on);

#endif
