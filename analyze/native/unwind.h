/* unwind.h - unwinding the threads of a core read from a bundle, with libdwfl as the engine.
 *
 * unwind_begin() builds the module list (modules.h), reports it to a libdwfl session whose
 * find_elf callback looks files up with build-id checks, and attaches libdwfl's unwinder to the
 * core through callbacks: the threads are the core's NT_PRSTATUS notes, registers come from
 * there in DWARF order, and every stack word is read with core_read_dumped() - never the whole core
 * as an Elf (that is what dwfl_core_file_report would need).
 *
 * unwind_thread() walks one thread:
 *   - frame 0 is the thread's context (trust "context");
 *   - a pc outside any code (a call through a NULL function pointer: pc 0) is recovered by popping
 *     the return address from the stack (x86_64) or taking the link register (aarch64), and the
 *     walk continues from the caller (trust "recovered");
 *   - each further frame says how it was derived from the one before: "cfi" when that frame's pc
 *     had DWARF/EH call-frame information, "frame_pointer" when libdwfl fell back to the frame
 *     pointer, or when our own frame-pointer walk continued after libdwfl stopped early;
 *   - frames that tail calls removed are put back from DWARF call sites (tailcall.h), marked
 *     tail_call, with the trust of the walk that found their neighbours ("cfi");
 *   - at most opts.max_frames frames are kept (the innermost); the walk goes on, up to
 *     opts.count_limit frames, only to count the dropped ones.
 * With UNWIND_FP the walk is the frame-pointer chain alone (for comparison).
 *
 * Frames hold the pc as unwound: a return address for every frame that is not an activation
 * (symbolize with pc - 1, see symbolize.h).
 *
 * Ownership: the session owns the Dwfl, the module list and everything libdwfl opened; the core
 * stays the caller's and must outlive the session. A struct unwind_stack is filled by
 * unwind_thread() and released with unwind_stack_free(). The library never prints or exits.
 */
#ifndef CRASHPACK_UNWIND_H
#define CRASHPACK_UNWIND_H

#include "modules.h"

#include <elfutils/libdwfl.h>
#include <stddef.h>
#include <stdint.h>

struct core;
struct core_thread;

/* UNWIND_LIBUNWIND: libunwind-coredump for every thread (unwind_ucd.h); this session then only
 * serves its memory, modules and tail calls, and walks like UNWIND_DWFL if asked to. */
enum unwind_method { UNWIND_DWFL = 0, UNWIND_FP = 1, UNWIND_LIBUNWIND = 2 };

enum unwind_trust {
    UNWIND_TRUST_CONTEXT = 0,   /* the thread's registers */
    UNWIND_TRUST_CFI,           /* from call-frame information */
    UNWIND_TRUST_FRAME_POINTER, /* from the frame-pointer chain */
    UNWIND_TRUST_RECOVERED,     /* popped from the stack after a jump to nowhere (NULL call) */
    UNWIND_TRUST_SCAN,          /* found by scanning the stack (not produced yet) */
};

#define UNWIND_DEFAULT_MAX_FRAMES 256u
#define UNWIND_DEFAULT_COUNT_LIMIT 100000u

struct unwind_opts {
    enum unwind_method method;
    size_t max_frames;  /* frames kept per thread (0: UNWIND_DEFAULT_MAX_FRAMES) */
    size_t count_limit; /* frames walked per thread (0: UNWIND_DEFAULT_COUNT_LIMIT) */
    double deadline;    /* CLOCK_MONOTONIC seconds after which walks stop; 0: none */
    const char *cache_dir; /* decompressed-debuginfo cache (dcache.h); NULL: none */
    struct modules_opts mods;
};

struct unwind_frame {
    uint64_t pc;
    uint64_t sp; /* 0 when unknown */
    int activation;
    enum unwind_trust trust;
    int tail_call; /* a function that tail-called the frame below: from DWARF call sites */
};

struct unwind_stack {
    int32_t tid;
    struct unwind_frame *frames;
    size_t nframes;
    size_t dropped;   /* frames past max_frames (counted up to count_limit) */
    int complete;     /* 1: reached the outermost frame; 0: stopped early (see stop) */
    char stop[256];   /* why the walk stopped early, "" when complete */
};

struct unwind_session;

/* The symbol name at pc (symbolize_addrinfo: libdwfl's choice, remembered per address). NULL when
 * unknown; the string lives as long as the session. */
const char *unwind_addrname(struct unwind_session *s, uint64_t pc);

/* Returns 0, or < 0 with a message (no usable session). A session whose libdwfl attach failed
 * still works in frame-pointer mode; unwind_warning() says why. */
int unwind_begin(struct core *c, const struct unwind_opts *o, struct unwind_session **out,
                 char *err, size_t errlen);
void unwind_end(struct unwind_session *s);
/* For a process that exits next (the sandboxed child): what unwind_end stores in the debuginfo
 * cache, without freeing anything (libdw's teardown of a large debug file takes 1-2 ms). */
void unwind_end_for_exit(struct unwind_session *s);

/* Walks thread t (a pointer into the core's thread array). Returns 0 (out filled, possibly with a
 * stop reason) or < 0 when out of memory. */
int unwind_thread(struct unwind_session *s, const struct core_thread *t, struct unwind_stack *out);
void unwind_stack_free(struct unwind_stack *st);

Dwfl *unwind_dwfl(struct unwind_session *s);
struct modules *unwind_modules(struct unwind_session *s);
const char *unwind_warning(const struct unwind_session *s); /* "" when none */
const char *unwind_method_name(enum unwind_method m);
const char *unwind_trust_name(enum unwind_trust t);

/* Reads process memory: the core's dumped bytes, else the bytes of the module file mapped there
 * (read-only data that a core does not keep). Returns 0 when all len bytes were read. */
int unwind_read(struct unwind_session *s, uint64_t addr, void *buf, size_t len);

/* For the second unwinder (unwind_ucd.h), so both treat frames alike:
 * unwind_recovery: 1 when thread t's pc is outside any code (a NULL call) and its caller could be
 * recovered: *pc, *sp are the caller's (the popped return address, or lr on aarch64), else 0.
 * unwind_add_tail_calls: puts back the frames tail calls removed (as unwind_thread does); < 0 when
 * out of memory.
 * unwind_options: the session's options with the defaults filled in. */
int unwind_recovery(struct unwind_session *s, const struct core_thread *t, uint64_t *pc, uint64_t *sp);
int unwind_add_tail_calls(struct unwind_session *s, struct unwind_stack *st);
const struct unwind_opts *unwind_options(const struct unwind_session *s);

#endif
