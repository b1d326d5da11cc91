/* snap_python.h - the memory a slim snap core must keep for the Python frames.
 *
 * A slim core keeps stacks and small mappings, but CPython's thread states, frames (data stack
 * chunks), code objects and strings live in the malloc heap and obmalloc arenas, which it does
 * not keep. snap_python_pages() runs the analysis's own Python walker (python.c's python_walk) on
 * the stopped process through /proc/<pid>/mem and reports every page the walk read; the core
 * then keeps those pages, so `crashpack analyze` later reads the same Python frames from the
 * core alone. Never prints or exits. */
#ifndef CRASHPACK_SNAP_PYTHON_H
#define CRASHPACK_SNAP_PYTHON_H
#include <libelf.h>
#include <stdint.h>
#include <sys/types.h>

typedef void (*snap_page_fn)(void *ctx, uint64_t page); /* a page-aligned address */

/* elffd: the file of a mapping with file offset 0 whose base name is python* or libpython*,
 * mapped at base, opened through the process's map_files (rootopen.h: cp_open_mapped; never by
 * the path its maps show); module: that path, as a name only. memfd: /proc/<pid>/mem. Returns
 * the number of pages reported (0: not a Python runtime, or nothing readable), or -1 when the
 * module's file cannot be read. With locals (python_locals), the walk reads each frame's locals
 * too (pylocals.h), so the pages of their objects are kept as well. */
int snap_python_pages(int elffd, int memfd, const char *module, uint64_t base, snap_page_fn page,
                      void *ctx, int locals);

/* Whether path's base name looks like a CPython interpreter or libpython. */
int snap_python_module(const char *path);

/* The load bias of ELF file e mapped (from file offset 0) at base: 0 for ET_EXEC, else base minus
 * the page of its lowest PT_LOAD vaddr. */
uint64_t snap_load_bias(Elf *e, uint64_t base);
#endif
