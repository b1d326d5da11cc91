/* native.h - the native half of `crashpack analyze`: the core's threads, frames, cause, modules.
 *
 * native_run() opens the bundle's core (core.h), picks the crashed thread and reads the signal
 * (cause.h), unwinds every thread (unwind.h), symbolizes every frame (symbolize.h), and looks for
 * the abort message, an uncaught C++ exception and a stack overflow - in a forked child under CPU,
 * memory and time limits (sandbox.h), since libelf/libdw parse untrusted cores and binaries. The
 * child streams its results as JSON lines (one per thread, crashed thread first), so a child that
 * crashes or runs out of time still leaves the threads it finished; the parent assembles them
 * into one object:
 *
 *   complete (bool), error (string|null: why not complete), unwinder ("dwfl"|"fp"|"libunwind"),
 *   core {arch, threads, segments, warnings[]},
 *   crashed_tid, crashed_tid_source ("cursig"|"manifest"|"siginfo_note"|"first_thread"),
 *   signal {number, name, code, code_name, code_text, fault_address (hex), sender_pid,
 *           sender_uid, self_sent},
 *   cause {summary, stack_overflow, stack_overflow_detail, abort_message, abort_message_source,
 *          abort_message_heuristic, exception {type, what, heuristic} | null},
 *   threads[] {tid, crashed, frames[], frames_dropped, unwind_complete, unwind_stop,
 *              unwinder ("dwfl"|"fp"|"libunwind": whose frames these are),
 *              unwinder_fallback {reason, used, other} | null (why libunwind ran after libdwfl,
 *              whether its frames were taken, how the other walk ended)},
 *     frames[] {index (physical frame number), pc (hex), function, function_full, symbol,
 *               module, module_offset (hex), build_id, elf_address (hex), file, line, column,
 *               inline, trust}
 *   threads_cap {cap, threads, not_analyzed} (only when the core has more than NATIVE_MAX_THREADS),
 *   frames_dropped (sum over threads), modules[] {path, start, end, bias, build_id, found_at,
 *   debug_only, debug_file, problem, looked_up (files are looked up only for the modules that
 *   frames or the cause analysis touch)}
 *
 * Output is deterministic for one input and one set of options (no times, stable orders).
 * Ownership: the returned cJSON object is the caller's. Never prints or exits.
 */
#ifndef CRASHPACK_NATIVE_H
#define CRASHPACK_NATIVE_H

#include "unwind.h"

#include <cjson/cJSON.h>
#include <stdint.h>

struct bundle;

/* Threads unwound and symbolized at most (the crashed thread first, then the core's order): the
 * rest of a core with more (a hostile one: 60,000 copies of a thread's notes) are counted, not
 * analyzed, and the result is partial: "threads_cap" {cap, threads, not_analyzed} and an error
 * saying so (issue 16, item 10). Every stage after the child is linear in the threads it keeps. */
#define NATIVE_MAX_THREADS 10000u

/* The wall-clock limit of an analysis when native_opts.wall_s is 0 (--timeout's default): the
 * child's, and report_build's for the stages after it. */
#define NATIVE_DEFAULT_WALL_S 180u

struct native_opts {
    struct unwind_opts unwind; /* method, max_frames, module lookup (sysroot, debug dirs) */
    int32_t manifest_tid;      /* the kernel's %i from the manifest; 0 when unknown */
    const char *comm;          /* program name for heuristics; NULL when unknown */
    unsigned cpu_s;            /* child's CPU limit (0: default 120) */
    unsigned wall_s;           /* child's wall-clock limit (0: NATIVE_DEFAULT_WALL_S) */
    uint64_t as_bytes;         /* child's address-space limit (0: default 32 GiB) */
    int in_process;            /* 1: no child (debugging); a crash then takes the caller down */
    int python_locals;         /* 1: Python frames' locals (python.h want_locals); a job that
                                  reads the bundle itself takes it from the manifest's
                                  capture.python_locals or snap.json's python_locals */
    int sealed;                /* 1: the child seals itself before it parses (sandbox_seal: no
                                  open by path; `crashpack enrich --root-fd`): what it needs by
                                  path (libstdc++, data files) is loaded first, and the second
                                  unwinder, which opens files by path, is off */
};

/* Returns the assembled object, or NULL when out of memory. *failed is set to 1 when the analysis
 * did not complete (the object says why in "error"), else 0. */
cJSON *native_run(struct bundle *b, const struct native_opts *o, int *failed);

/* native_run() in two steps, so the caller can work while the child runs: native_start() forks
 * the child (NULL when out of memory; a fork failure shows in native_finish's result), and
 * native_finish() collects and assembles as native_run() and frees the job. `b` and the strings
 * in `o` must live until native_finish(). With in_process the work happens in native_finish(). */
struct native_job;
struct native_job *native_start(struct bundle *b, const struct native_opts *o);
cJSON *native_finish(struct native_job *n, int *failed);

/* native_start() for a bundle the job opens itself, so the caller can fork before it has read
 * anything: the two processes then share few pages, and a page either writes is copied first
 * (13 us a fault on the VMs measured in docs/bench.md). The job reads the crashed tid and comm
 * from the bundle's manifest.json (o's manifest_tid and comm are the defaults). `path` must live
 * until native_finish(). */
struct native_job *native_start_path(const char *path, const struct native_opts *o);
/* Stops a job whose result is not wanted (kills the child) and frees it. */
void native_cancel(struct native_job *n);

#endif
