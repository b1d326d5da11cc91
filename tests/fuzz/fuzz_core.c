/* fuzz_core.c - libFuzzer harness for the core parsing of `crashpack analyze`: any bytes as the
 * bundle's `core` member.
 *
 * The input is opened with core_open_mem (core.h: the ELF header, the program headers, the notes -
 * NT_PRSTATUS, NT_SIGINFO, NT_PRPSINFO, NT_FILE, NT_AUXV - and the PT_LOAD table) and then goes
 * through what the analyzer's child does with a core (native.c), minus the host's files:
 *   - memory reads at every thread's pc and sp, a segment boundary and the auxv's vdso;
 *   - the crashed thread, the signal and the stack-overflow check (cause.h);
 *   - the module list from the core alone (modules.h: NT_FILE grouping, build-ids and load biases
 *     read from the core's copies of the ELF headers, the vdso image) and, unless CP_FUZZ_UNWIND=0,
 *     a short unwind of the first threads (unwind.h: libdwfl attached through our callbacks, the
 *     frame-pointer fallback, NULL-call recovery), their symbolization (module + offset) and the
 *     abort-message / C++-exception scans (cause.h). The sysroot is a directory that does not
 *     exist, so no file of this machine is ever opened: everything parsed came from the input.
 * Walks are bounded (frames, threads, a deadline) so one input costs milliseconds.
 * Build: see tests/CMakeLists.txt. Seeds: tests/fuzz/make-corpus.sh (corpus-core/). */
#include "cause.h"
#include "core.h"
#include "modules.h"
#include "symbolize.h"
#include "unwind.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_THREADS 4  /* threads unwound per input */
#define MAX_FRAMES 32  /* frames kept per thread */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int unwind_enabled(void)
{
    static int on = -1;
    if (on < 0) {
        const char *v = getenv("CP_FUZZ_UNWIND");
        on = !(v && v[0] == '0');
        unsetenv("DEBUGINFOD_URLS"); /* never the network */
    }
    return on;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void read_some(struct core *c, uint64_t addr)
{
    unsigned char buf[256];
    size_t got = 0;
    (void)core_read(c, addr, buf, sizeof(buf), &got);
    (void)core_read_dumped(c, addr - 128, buf, sizeof(buf), &got);
}

static void unwind_some(struct core *c, struct cause *z)
{
    static const char *const no_debug[] = {"/nonexistent/crashpack-fuzz/debug"};
    struct unwind_opts o;
    memset(&o, 0, sizeof(o));
    o.method = UNWIND_DWFL;
    o.max_frames = MAX_FRAMES;
    o.count_limit = 4 * MAX_FRAMES;
    o.deadline = now() + 2.0;
    o.mods.sysroot = "/nonexistent/crashpack-fuzz";
    o.mods.debug_dirs = no_debug;
    o.mods.ndebug_dirs = 1;
    struct unwind_session *s = NULL;
    char err[256];
    if (unwind_begin(c, &o, &s, err, sizeof(err)))
        return;
    (void)unwind_warning(s);
    for (size_t i = 0; i < c->nthreads && i < MAX_THREADS; i++) {
        struct unwind_stack st;
        if (unwind_thread(s, &c->threads[i], &st))
            break;
        for (size_t k = 0; k < st.nframes; k++) {
            struct sym_list l = {0};
            if (symbolize_pc(unwind_dwfl(s), unwind_modules(s), st.frames[k].pc,
                             st.frames[k].activation, &l) == 0)
                symbolize_list_free(&l);
        }
        unwind_stack_free(&st);
    }
    cause_abort_message(s, c, c->psinfo.present ? c->psinfo.fname : NULL, z);
    cause_cxx_exception(s, c, z);
    unwind_end(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct core *c = NULL;
    char err[256];
    if (core_open_mem(data, size, &c, err, sizeof(err)))
        return 0;
    for (size_t i = 0; i < c->nthreads && i < MAX_THREADS; i++) {
        read_some(c, core_thread_pc(c, &c->threads[i]));
        read_some(c, core_thread_sp(c, &c->threads[i]));
        uint64_t regs[CORE_MAX_REGS];
        (void)core_thread_dwarf_regs(c, &c->threads[i], regs, CORE_MAX_REGS);
    }
    if (c->nsegs) {
        const struct core_segment *s = &c->segs[c->nsegs - 1];
        read_some(c, s->vaddr + s->memsz - 64);
    }
    int found = 0;
    uint64_t vdso = core_auxv(c, 33 /* AT_SYSINFO_EHDR */, &found);
    if (found)
        read_some(c, vdso);

    struct cause z;
    memset(&z, 0, sizeof(z));
    cause_crashed_thread(c, (size & 1) && c->nthreads ? c->threads[c->nthreads - 1].tid : 0, &z);
    cause_signal(c, &z);
    cause_stack_overflow(c, &z);

    if (unwind_enabled()) {
        unwind_some(c, &z);
    } else {
        struct modules *m = NULL;
        struct modules_opts mo = {.sysroot = "/nonexistent/crashpack-fuzz"};
        if (modules_build(c, &mo, &m, err, sizeof(err)) == 0) {
            if (c->nthreads)
                (void)modules_at(m, core_thread_pc(c, &c->threads[0]));
            modules_free(m);
        }
    }
    cause_free(&z);
    core_close(c);
    return 0;
}
