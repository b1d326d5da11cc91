/* unwind_ucd.h - the second unwinder: libunwind-coredump (_UCD_*) over a bundle's core.
 *
 * libunwind's coredump API wants a core file by name (_UCD_create(path)), but the bundle's core is
 * compressed inside the bundle and is never extracted. ucd_begin() therefore writes a small
 * stand-in core (a memfd, or failing that a file in a private temporary directory that is
 * removed as soon as libunwind has opened it): the ELF header, one NT_PRSTATUS note per thread
 * (registers from core.h, in the core's thread order, so _UCD_select_thread(i) is thread i), and
 * one PT_LOAD per module that holds code (modules.h), spanning the module from the address that
 * maps file offset 0 - no memory contents, except the bytes of a module that lives wholly in the
 * core (the vdso). Bounded: headers + notes + at most UCD_MAX_IMAGE_BYTES of such images.
 *
 * The walk uses libunwind's _UCD_* accessors for registers and unwind tables, with two of ours in
 * between:
 *   - access_mem reads through unwind_read() (unwind.h): the bundle's core on demand, else the
 *     module file mapped there - so stacks need not be copied, and file-backed pages the kernel did
 *     not dump are read at the file offset the mapping really has;
 *   - find_proc_info first registers the module's file (the one the libdwfl session found, with
 *     its build-id checked) with _UCD_add_backing_file_at_vaddr, lazily, for the modules frames
 *     fall in, then calls _UCD_find_proc_info.
 * libunwind 1.6 takes a code segment's file offset to be 0 (_UCD_find_proc_info: mapoff = 0);
 * the PT_LOAD per module starting at offset 0 is what makes its load-bias arithmetic right for
 * binaries whose code is not in their first segment (ld -z separate-code, the default).
 *
 * Frames are struct unwind_stack records like unwind_thread()'s, so symbolization and output are
 * shared: frame 0 "context" (an activation), then "cfi" when libunwind had unwind information for
 * the frame before (unw_get_proc_info), else "frame_pointer" (libunwind's x86_64 frame-chain
 * fallback); a NULL call is recovered as in unwind.c ("recovered"); the frame after a signal
 * frame is an activation; frame caps, walk limit and deadline as unwind_opts say; tail-call
 * frames put back from DWARF call sites (unwind_add_tail_calls).
 *
 * Only the host's architecture: libunwind-generic unwinds what it was built for.
 *
 * Ownership: the session borrows the unwind session (memory, modules, Dwfl) and the core, which
 * must outlive it. libunwind hands our callbacks its own argument (the UCD_info), so the session
 * of the walk in progress is a file-static pointer: one walk at a time per process (the analysis
 * child is single-threaded). The library never prints or exits.
 */
#ifndef CRASHPACK_UNWIND_UCD_H
#define CRASHPACK_UNWIND_UCD_H

#include "unwind.h"

#include <stddef.h>

#define UCD_MAX_IMAGE_BYTES (64u << 20)
#define UCD_MAX_MODULES 60000u /* e_phnum stays below PN_XNUM, which libunwind does not read */

struct ucd_session;

/* Returns 0, or < 0 with a message (no libunwind for this core: another architecture, no
 * threads, the stand-in core could not be written or opened). */
int ucd_begin(struct unwind_session *u, struct core *c, struct ucd_session **out, char *err,
              size_t errlen);
void ucd_end(struct ucd_session *s);
/* Reads the data file the fallback decision needs (rules/unwind/outermost.txt) now, before
 * sandbox_seal. */
void ucd_preload_data(void);

/* Walks thread t (a pointer into the core's thread array) with libunwind. Returns 0 (out filled,
 * possibly with a stop reason) or < 0 when out of memory. Free out with unwind_stack_free(). */
int ucd_thread(struct ucd_session *s, const struct core_thread *t, struct unwind_stack *out);

/* The default mode's test, on a libdwfl stack: 1 with the reason in why when it looks cut short -
 * the walk ended with an error before its end, or its outermost frame is a known function that is
 * not a thread's entry (rules/unwind/outermost.txt: _start, start_thread, clone3, ...). 0 when it
 * looks whole, was cut by the frame cap, or the time is up. */
int ucd_fallback_reason(struct unwind_session *u, const struct unwind_stack *st, char *why,
                        size_t len);

/* 1 when the libunwind stack b is better than the libdwfl stack a: it ends at a thread entry and
 * a does not, or it completed and a did not, or (equal on both) it has more frames that were not
 * found by scanning. */
int ucd_better(struct unwind_session *u, const struct unwind_stack *a, const struct unwind_stack *b);

/* 1 when the outermost frame of st is a thread entry (see ucd_fallback_reason). */
int ucd_plausible_end(struct unwind_session *u, const struct unwind_stack *st);

#endif
