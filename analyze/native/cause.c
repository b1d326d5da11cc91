/* cause.c - the crashed thread, the signal's meaning, stack overflow, abort and exception texts.
 *
 * Main data structure: struct cause (cause.h), filled step by step by the cause_* functions. The
 * si_code tables follow <asm-generic/siginfo.h>. Memory is read through unwind_read() (the core's
 * dumped bytes, then the module files), and every string read from the process is bounded and
 * cleaned of control characters before it is kept.
 */
#include "cause.h"

#include "core.h"
#include "modules.h"
#include "symbolize.h"
#include "unwind.h"

#include <elfutils/libdwfl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STACK_SCAN_BYTES (64u << 10)
#define GUARD_GAP (1u << 20)      /* the kernel's stack_guard_gap (256 pages) */
#define OVERFLOW_SLACK (64u << 10) /* how far sp may be from the fault */
#define MAX_TEXT 4096u
#define CXX_EXCEPTION_CLASS 0x474e5543432b2b00ull /* "GNUCC++\0" */
#define CXX_DEPENDENT_CLASS 0x474e5543432b2b01ull /* "GNUCC++\1" */
/* x86_64/aarch64 libsupc++: the object follows a 128-byte __cxa_refcounted_exception whose
 * unwindHeader (32 bytes) ends it; exceptionType is 80 bytes before the unwindHeader. */
#define UNWIND_HEADER_TO_OBJECT 32u
#define UNWIND_HEADER_TO_TYPE 80u
#define OBJECT_TO_TYPE 112u

struct code_entry {
    int signo, code;
    const char *name, *text;
};

static const struct code_entry codes[] = {
    {SIGSEGV, 1, "SEGV_MAPERR", "address not mapped to object"},
    {SIGSEGV, 2, "SEGV_ACCERR", "invalid permissions for mapped object"},
    {SIGSEGV, 3, "SEGV_BNDERR", "failed address bound checks"},
    {SIGSEGV, 4, "SEGV_PKUERR", "failed protection key checks"},
    {SIGSEGV, 8, "SEGV_MTEAERR", "async MTE tag check fault"},
    {SIGSEGV, 9, "SEGV_MTESERR", "sync MTE tag check fault"},
    {SIGBUS, 1, "BUS_ADRALN", "invalid address alignment"},
    {SIGBUS, 2, "BUS_ADRERR", "non-existent physical address (e.g. a mapped file truncated)"},
    {SIGBUS, 3, "BUS_OBJERR", "object-specific hardware error"},
    {SIGBUS, 4, "BUS_MCEERR_AR", "hardware memory error consumed on a machine check"},
    {SIGBUS, 5, "BUS_MCEERR_AO", "hardware memory error detected, action optional"},
    {SIGILL, 1, "ILL_ILLOPC", "illegal opcode"},
    {SIGILL, 2, "ILL_ILLOPN", "illegal operand"},
    {SIGILL, 3, "ILL_ILLADR", "illegal addressing mode"},
    {SIGILL, 4, "ILL_ILLTRP", "illegal trap"},
    {SIGILL, 5, "ILL_PRVOPC", "privileged opcode"},
    {SIGILL, 6, "ILL_PRVREG", "privileged register"},
    {SIGILL, 7, "ILL_COPROC", "coprocessor error"},
    {SIGILL, 8, "ILL_BADSTK", "internal stack error"},
    {SIGFPE, 1, "FPE_INTDIV", "integer divide by zero"},
    {SIGFPE, 2, "FPE_INTOVF", "integer overflow"},
    {SIGFPE, 3, "FPE_FLTDIV", "floating-point divide by zero"},
    {SIGFPE, 4, "FPE_FLTOVF", "floating-point overflow"},
    {SIGFPE, 5, "FPE_FLTUND", "floating-point underflow"},
    {SIGFPE, 6, "FPE_FLTRES", "floating-point inexact result"},
    {SIGFPE, 7, "FPE_FLTINV", "invalid floating-point operation"},
    {SIGFPE, 8, "FPE_FLTSUB", "subscript out of range"},
    {SIGTRAP, 1, "TRAP_BRKPT", "process breakpoint"},
    {SIGTRAP, 2, "TRAP_TRACE", "process trace trap"},
    {SIGTRAP, 3, "TRAP_BRANCH", "process taken branch trap"},
    {SIGTRAP, 4, "TRAP_HWBKPT", "hardware breakpoint or watchpoint"},
};

static const struct code_entry any_codes[] = {
    {0, 0, "SI_USER", "sent by kill()"},
    {0, 0x80, "SI_KERNEL", "sent by the kernel"},
    {0, -1, "SI_QUEUE", "sent by sigqueue()"},
    {0, -2, "SI_TIMER", "POSIX timer expired"},
    {0, -3, "SI_MESGQ", "POSIX message queue state changed"},
    {0, -4, "SI_ASYNCIO", "AIO completed"},
    {0, -5, "SI_SIGIO", "queued SIGIO"},
    {0, -6, "SI_TKILL", "sent by tkill()/tgkill() (raise, abort, pthread_kill)"},
};

const char *cause_code_name(int signo, int code, const char **text)
{
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
        if (codes[i].signo == signo && codes[i].code == code) {
            *text = codes[i].text;
            return codes[i].name;
        }
    for (size_t i = 0; i < sizeof(any_codes) / sizeof(any_codes[0]); i++)
        if (any_codes[i].code == code) {
            *text = any_codes[i].text;
            return any_codes[i].name;
        }
    *text = NULL;
    return NULL;
}

static int fault_signal(int signo)
{
    return signo == SIGSEGV || signo == SIGBUS || signo == SIGILL || signo == SIGFPE ||
           signo == SIGTRAP;
}

/* ---- the crashed thread ---- */

void cause_crashed_thread(const struct core *c, int32_t hint_tid, struct cause *out)
{
    size_t with_sig = 0, last = 0;
    out->crashed = -1;
    out->crashed_source = NULL;
    if (!c->nthreads)
        return;
    for (size_t i = 0; i < c->nthreads; i++)
        if (c->threads[i].cursig) {
            with_sig++;
            last = i;
        }
    if (with_sig == 1) {
        out->crashed = (int)last;
        out->crashed_source = "cursig";
        return;
    }
    for (size_t i = 0; hint_tid > 0 && i < c->nthreads; i++)
        if (c->threads[i].tid == hint_tid) {
            out->crashed = (int)i;
            out->crashed_source = "manifest";
            return;
        }
    for (size_t i = 0; i < c->nthreads; i++)
        if (c->threads[i].owns_siginfo) {
            out->crashed = (int)i;
            out->crashed_source = "siginfo_note";
            return;
        }
    out->crashed = 0;
    out->crashed_source = "first_thread";
}

/* ---- the signal ---- */

static void signal_name(int sig, char *buf, size_t len)
{
    const char *abbr = sig > 0 && sig < 65 ? sigabbrev_np(sig) : NULL;
    if (abbr)
        snprintf(buf, len, "SIG%s", abbr);
    else
        snprintf(buf, len, "signal %d", sig);
}

static void summarize(const struct core *c, struct cause *o)
{
    char more[160] = "";
    if (o->have_addr)
        snprintf(more, sizeof(more), " at address 0x%llx", (unsigned long long)o->addr);
    else if (o->have_sender && o->self_sent)
        snprintf(more, sizeof(more), " by the process itself (pid %d)", (int)o->sender_pid);
    else if (o->have_sender)
        snprintf(more, sizeof(more), " by pid %d (uid %u)", (int)o->sender_pid, o->sender_uid);
    (void)c;
    snprintf(o->summary, sizeof(o->summary), "%s%s%s%s%s%s", o->signame,
             o->code_name ? " (" : "", o->code_name ? o->code_name : "", o->code_name ? ")" : "",
             o->code_text ? ": " : "", o->code_text ? o->code_text : "");
    size_t l = strlen(o->summary);
    snprintf(o->summary + l, sizeof(o->summary) - l, "%s", more);
}

void cause_signal(const struct core *c, struct cause *out)
{
    const struct core_siginfo *si = &c->siginfo;
    if (si->present) {
        out->signo = si->signo;
        out->code = si->code;
        out->have_code = 1;
    } else if (out->crashed >= 0) {
        out->signo = c->threads[out->crashed].cursig;
    }
    signal_name(out->signo, out->signame, sizeof(out->signame));
    if (out->have_code)
        out->code_name = cause_code_name(out->signo, out->code, &out->code_text);
    if (si->present && out->code > 0 && out->code != 0x80 && fault_signal(out->signo)) {
        out->have_addr = 1;
        out->addr = si->addr;
    } else if (si->present && out->code <= 0) {
        out->have_sender = 1;
        out->sender_pid = si->sender_pid;
        out->sender_uid = si->sender_uid;
        out->self_sent = c->psinfo.present && si->sender_pid == c->psinfo.pid;
        for (size_t i = 0; !out->self_sent && i < c->nthreads; i++)
            out->self_sent = c->threads[i].tid == si->sender_pid;
    }
    if (out->signo == SIGSEGV && out->code == 0x80)
        out->code_text = "general protection fault (a non-canonical address or a privileged "
                         "instruction; no fault address)";
    summarize(c, out);
}

/* ---- stack overflow ---- */

/* The segment holding sp, or the lowest one above it within the slack (sp already past the
 * bottom of the stack when the push faulted). */
static const struct core_segment *stack_of(const struct core *c, uint64_t sp)
{
    const struct core_segment *s = core_segment_at(c, sp);
    if (s)
        return s;
    for (size_t i = 0; i < c->nsegs; i++)
        if (c->segs[i].vaddr > sp)
            return c->segs[i].vaddr - sp <= OVERFLOW_SLACK ? &c->segs[i] : NULL;
    return NULL;
}

void cause_stack_overflow(const struct core *c, struct cause *out)
{
    if (out->crashed < 0 || out->signo != SIGSEGV || !out->have_addr)
        return;
    const struct core_thread *t = &c->threads[out->crashed];
    uint64_t sp = core_thread_sp(c, t), f = out->addr;
    const struct core_segment *stack = stack_of(c, sp);
    if (!stack || f >= stack->vaddr + stack->memsz)
        return;
    int near_sp = (f <= sp ? sp - f : f - sp) <= OVERFLOW_SLACK;
    int near_bottom = sp - stack->vaddr <= OVERFLOW_SLACK || sp < stack->vaddr;
    const struct core_segment *g = core_segment_at(c, f);
    int in_guard = g && g != stack && (g->flags & (PF_R | PF_W | PF_X)) == 0 &&
                   g->vaddr + g->memsz == stack->vaddr;
    int in_gap = !g && f < stack->vaddr && stack->vaddr - f <= GUARD_GAP + OVERFLOW_SLACK;
    int at_bottom = g == stack && f - stack->vaddr < 4096;
    if (!(near_sp || near_bottom) || !(in_guard || in_gap || at_bottom))
        return;
    out->stack_overflow = 1;
    snprintf(out->overflow_detail, sizeof(out->overflow_detail),
             "stack overflow: the fault address 0x%llx is %s the stack mapping 0x%llx-0x%llx "
             "(sp 0x%llx)",
             (unsigned long long)f, in_guard ? "in the guard page below" : at_bottom ? "at the bottom of" : "just below",
             (unsigned long long)stack->vaddr, (unsigned long long)(stack->vaddr + stack->memsz),
             (unsigned long long)sp);
}

/* ---- strings from memory ---- */

/* Reads a NUL-terminated string of at most max bytes; NULL when unreadable or empty. Control
 * characters other than newline and tab become '?'; a trailing newline is dropped. */
static char *read_cstring(struct unwind_session *s, uint64_t addr, size_t max)
{
    char *buf = malloc(max + 1);
    size_t n = 0;
    if (!buf)
        return NULL;
    while (n < max) {
        size_t chunk = 64 - (size_t)((addr + n) % 64); /* stay within pages */
        if (chunk > max - n)
            chunk = max - n;
        if (unwind_read(s, addr + n, buf + n, chunk))
            break;
        void *nul = memchr(buf + n, 0, chunk);
        if (nul) {
            n = (size_t)((char *)nul - buf);
            break;
        }
        n += chunk;
    }
    buf[n] = 0;
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
        buf[--n] = 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)buf[i] < 0x20 && buf[i] != '\n' && buf[i] != '\t')
            buf[i] = '?';
    if (!n) {
        free(buf);
        return NULL;
    }
    return buf;
}

static int read_u64(struct unwind_session *s, uint64_t addr, uint64_t *v)
{
    return unwind_read(s, addr, v, sizeof(*v));
}

/* ---- abort message ---- */

static Dwfl_Module *libc_module(struct unwind_session *s)
{
    const struct modules *m = unwind_modules(s);
    for (size_t i = 0; i < m->n; i++) {
        const char *p = m->v[i].path ? m->v[i].path : "";
        const char *base = strrchr(p, '/') ? strrchr(p, '/') + 1 : p;
        if (!strncmp(base, "libc.so", 7) || !strncmp(base, "libc-2.", 7))
            return dwfl_addrmodule(unwind_dwfl(s), m->v[i].start);
    }
    return NULL;
}

static int find_symbol(Dwfl_Module *dm, const char *name, uint64_t *addr)
{
    int n = dm ? dwfl_module_getsymtab(dm) : -1;
    for (int i = 1; i < n; i++) {
        GElf_Sym sym;
        GElf_Addr a = 0;
        const char *nm = dwfl_module_getsym_info(dm, i, &sym, &a, NULL, NULL, NULL);
        if (nm && !strcmp(nm, name) && sym.st_shndx != SHN_UNDEF) {
            *addr = a;
            return 1;
        }
    }
    return 0;
}

static const char *const malloc_prefixes[] = {
    "free(): ", "malloc(): ", "realloc(): ", "double free or corruption", "corrupted ",
    "munmap_chunk(): ", "malloc_consolidate(): ", "*** ", "Fatal glibc error",
};

static int looks_like_abort_text(const char *s, const char *comm)
{
    if (comm && comm[0] && !strncmp(s, comm, strlen(comm)) && strstr(s, ": ") &&
        strstr(s, "Assertion"))
        return 1;
    for (size_t i = 0; i < sizeof(malloc_prefixes) / sizeof(malloc_prefixes[0]); i++)
        if (!strncmp(s, malloc_prefixes[i], strlen(malloc_prefixes[i])))
            return 1;
    return 0;
}

/* How many bytes to scan up from sp (8-aligned): to the end of sp's segment, at most
 * STACK_SCAN_BYTES, never past the top of the address space (a hostile core can put a segment
 * there; `sp + len` must not wrap). 0 when sp is in no segment. */
static uint64_t scan_len(const struct core *c, uint64_t sp)
{
    const struct core_segment *seg = core_segment_at(c, sp);
    if (!seg || sp < seg->vaddr || sp - seg->vaddr >= seg->memsz)
        return 0;
    uint64_t len = seg->memsz - (sp - seg->vaddr);
    if (len > STACK_SCAN_BYTES)
        len = STACK_SCAN_BYTES;
    if (len > UINT64_MAX - sp)
        len = UINT64_MAX - sp;
    return len & ~(uint64_t)7;
}

/* Heuristic: pointers on the crashed thread's stack to a message-looking string. */
static char *scan_stack_for_text(struct unwind_session *s, const struct core *c,
                                 const struct core_thread *t, const char *comm)
{
    uint64_t sp = core_thread_sp(c, t) & ~(uint64_t)7, len = scan_len(c, sp);
    for (uint64_t off = 0; off + 8 <= len; off += 8) {
        uint64_t a = sp + off, p;
        char head[32];
        if (read_u64(s, a, &p) || p < 4096 || unwind_read(s, p, head, sizeof(head)))
            continue;
        int printable = 1;
        for (int i = 0; i < 4; i++)
            printable &= head[i] >= 0x20 && head[i] < 0x7f;
        if (!printable)
            continue;
        char *text = read_cstring(s, p, MAX_TEXT);
        if (text && looks_like_abort_text(text, comm))
            return text;
        free(text);
    }
    return NULL;
}

/* Heuristic: a pointer on the stack to glibc's struct abort_msg_s {uint32 size; char msg[];}, a
 * fresh page-sized mapping whose size field is a page multiple. */
static char *scan_stack_for_abort_msg(struct unwind_session *s, const struct core *c,
                                      const struct core_thread *t, const char *comm)
{
    uint64_t sp = core_thread_sp(c, t) & ~(uint64_t)7, len = scan_len(c, sp);
    for (uint64_t off = 0; off + 8 <= len; off += 8) {
        uint64_t a = sp + off, p;
        uint32_t size;
        if (read_u64(s, a, &p) || p % 4096 || !p || unwind_read(s, p, &size, 4) ||
            size % 4096 || !size || size > (1u << 20))
            continue;
        char *text = read_cstring(s, p + 4, size - 4 < MAX_TEXT ? size - 4 : MAX_TEXT);
        if (text && looks_like_abort_text(text, comm))
            return text;
        free(text);
    }
    return NULL;
}

void cause_abort_message(struct unwind_session *s, const struct core *c, const char *comm,
                         struct cause *out)
{
    uint64_t sym = 0, ptr = 0;
    if (out->crashed < 0)
        return;
    if (find_symbol(libc_module(s), "__abort_msg", &sym)) {
        uint32_t size = 0;
        if (read_u64(s, sym, &ptr) || !ptr || unwind_read(s, ptr, &size, 4) || size <= 4)
            return; /* libc's symbols are there and there is no message */
        size_t max = size - 4 < MAX_TEXT ? size - 4 : MAX_TEXT;
        out->abort_message = read_cstring(s, ptr + 4, max);
        out->abort_source = "__abort_msg";
        return;
    }
    out->abort_message = scan_stack_for_abort_msg(s, c, &c->threads[out->crashed], comm);
    if (!out->abort_message)
        out->abort_message = scan_stack_for_text(s, c, &c->threads[out->crashed], comm);
    if (out->abort_message) {
        out->abort_heuristic = 1;
        out->abort_source = "stack scan";
    }
}

/* ---- C++ exception ---- */

/* The mangled name of a std::type_info at addr (its __name member), malloc()ed. */
static char *typeinfo_mangled(struct unwind_session *s, uint64_t ti)
{
    uint64_t name = 0;
    if (read_u64(s, ti + 8, &name) || !name)
        return NULL;
    char *n = read_cstring(s, name, 512);
    if (n && n[0] == '*') /* local types are marked with a leading '*' */
        memmove(n, n + 1, strlen(n));
    return n;
}

static char *typeinfo_name(struct unwind_session *s, uint64_t ti)
{
    char *m = typeinfo_mangled(s, ti);
    if (!m) { /* fall back on the typeinfo object's symbol: _ZTI<type> */
        Dwfl_Module *dm = dwfl_addrmodule(unwind_dwfl(s), ti);
        GElf_Off off = 0;
        GElf_Sym sym;
        const char *nm = dm ? symbolize_addrinfo(dm, ti, &off, &sym) : NULL;
        if (!nm || off || strncmp(nm, "_ZTI", 4))
            return NULL;
        m = strdup(nm + 4);
        if (!m)
            return NULL;
    }
    char *z = NULL;
    if (asprintf(&z, "_Z%s", m) < 0) /* a type encoding demangles as the symbol "_Z<type>" */
        z = NULL;
    char *d = z ? symbolize_demangle(z, 1) : NULL;
    free(z);
    if (d) {
        free(m);
        return d;
    }
    return m;
}

/* Does the type derive (single inheritance) from a libstdc++ class holding its what() text in
 * a __cow_string right after the vptr? */
static int has_message_string(struct unwind_session *s, uint64_t ti)
{
    static const char *const bases[] = {
        "St13runtime_error", "St11logic_error", "St12out_of_range", "St16invalid_argument",
        "St12length_error", "St12domain_error", "St11range_error", "St14overflow_error",
        "St15underflow_error"};
    for (int depth = 0; depth < 8 && ti; depth++) {
        char *m = typeinfo_mangled(s, ti);
        int hit = 0;
        for (size_t i = 0; m && i < sizeof(bases) / sizeof(bases[0]); i++)
            hit |= !strcmp(m, bases[i]);
        free(m);
        if (hit)
            return 1;
        /* __si_class_type_info: {vptr, name, base}; others end the walk (base unreadable or 0) */
        uint64_t vptr = 0, base = 0;
        Dwfl_Module *dm;
        GElf_Off off;
        GElf_Sym sym;
        if (read_u64(s, ti, &vptr) || !(dm = dwfl_addrmodule(unwind_dwfl(s), vptr)))
            return 0;
        const char *nm = symbolize_addrinfo(dm, vptr, &off, &sym);
        if (!nm || !strstr(nm, "__si_class_type_info") || read_u64(s, ti + 16, &base))
            return 0;
        ti = base;
    }
    return 0;
}

static int exception_at(struct unwind_session *s, uint64_t hdr, struct cause *out)
{
    uint64_t cls = 0, obj = 0, ti = 0;
    if (read_u64(s, hdr, &cls))
        return 0;
    if (cls == CXX_EXCEPTION_CLASS)
        obj = hdr + UNWIND_HEADER_TO_OBJECT;
    else if (cls != CXX_DEPENDENT_CLASS || read_u64(s, hdr - UNWIND_HEADER_TO_TYPE, &obj) || !obj)
        return 0;
    if (read_u64(s, obj - OBJECT_TO_TYPE, &ti) || !ti || !(out->exception_type = typeinfo_name(s, ti)))
        return 0;
    uint64_t text = 0;
    if (has_message_string(s, ti) && !read_u64(s, obj + 8, &text) && text)
        out->exception_what = read_cstring(s, text, MAX_TEXT);
    out->exception_heuristic = 1;
    return 1;
}

void cause_cxx_exception(struct unwind_session *s, const struct core *c, struct cause *out)
{
    if (out->crashed < 0 || out->signo != SIGABRT)
        return;
    const struct core_thread *t = &c->threads[out->crashed];
    uint64_t sp = core_thread_sp(c, t) & ~(uint64_t)7, len = scan_len(c, sp);
    for (uint64_t off = 0; off + 8 <= len; off += 8) {
        uint64_t a = sp + off, p;
        if (read_u64(s, a, &p) || p < 4096 || p % 8)
            continue;
        if (exception_at(s, p, out))
            return;
    }
}

void cause_free(struct cause *out)
{
    free(out->abort_message);
    free(out->exception_type);
    free(out->exception_what);
    out->abort_message = out->exception_type = out->exception_what = NULL;
}
