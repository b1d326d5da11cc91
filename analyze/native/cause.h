/* cause.h - which thread crashed, on what signal, and why: from the core's notes and memory.
 *
 * The crashed thread: Linux writes the dumping thread's notes first and sets pr_cursig in every
 * thread's NT_PRSTATUS (all threads carry the signal), so "the thread with pr_cursig" only
 * decides when exactly one thread has it (other dumpers). Then, in order: the tid the capture
 * handler got from the kernel (%i, the manifest's `tid`), the thread whose NT_PRSTATUS note group
 * holds NT_SIGINFO (the kernel writes it right after the dumping thread's NT_PRSTATUS), and last
 * the first thread. Never "the first thread" while a better source exists: a reordered core still
 * names the right one. The source used is reported.
 *
 * The cause: signal name and si_code text (SEGV_MAPERR, BUS_ADRALN, SI_TKILL, ...), the fault
 * address or the sender, a stack overflow (fault address in or just below the crashed thread's
 * stack mapping, in its guard page or the kernel's guard gap, with sp next to it), glibc's abort
 * message (the `__abort_msg` global of libc: assert() and malloc_printerr() texts; or, when libc's
 * symbols are unavailable, a scan of the crashed thread's stack - heuristic), and for an uncaught
 * C++ exception the thrown type and what() (found through the libsupc++ exception header on the
 * crashed thread's stack - heuristic).
 *
 * Ownership: struct cause's strings are owned by it (cause_free). The library never prints or
 * exits.
 */
#ifndef CRASHPACK_CAUSE_H
#define CRASHPACK_CAUSE_H

#include <stddef.h>
#include <stdint.h>

struct core;
struct core_thread;
struct unwind_session;

struct cause {
    int crashed;                /* index into core->threads; -1 when there is no thread */
    const char *crashed_source; /* "cursig", "manifest", "siginfo_note", "first_thread" */
    int signo;
    char signame[32];  /* "SIGSEGV" */
    int code;
    int have_code;
    const char *code_name; /* "SEGV_MAPERR"; NULL when unknown */
    const char *code_text; /* "address not mapped to object" */
    int have_addr;         /* fault address meaningful (SIGSEGV/SIGBUS/SIGILL/SIGFPE/SIGTRAP) */
    uint64_t addr;
    int have_sender; /* sent by kill/tkill/sigqueue */
    int32_t sender_pid;
    uint32_t sender_uid;
    int self_sent; /* the sender is the crashed process (raise, abort, pthread_kill) */
    char summary[512];

    int stack_overflow;
    char overflow_detail[256];

    char *abort_message; /* NULL: none found */
    int abort_heuristic;
    const char *abort_source; /* "__abort_msg" or "stack scan" */

    char *exception_type; /* demangled, NULL: none found */
    char *exception_what;
    int exception_heuristic;
};

/* Picks the crashed thread (see above). hint_tid: the manifest's tid, 0 when unknown. */
void cause_crashed_thread(const struct core *c, int32_t hint_tid, struct cause *out);
/* Fills the signal fields and the summary from NT_SIGINFO (or the crashed thread's cursig). */
void cause_signal(const struct core *c, struct cause *out);
/* Stack overflow check for the crashed thread. */
void cause_stack_overflow(const struct core *c, struct cause *out);
/* glibc abort message and C++ exception (need symbols and memory: the unwind session). comm: the
 * program name for the stack-scan heuristic (may be NULL). */
void cause_abort_message(struct unwind_session *s, const struct core *c, const char *comm,
                         struct cause *out);
void cause_cxx_exception(struct unwind_session *s, const struct core *c, struct cause *out);
void cause_free(struct cause *out);

/* "SEGV_MAPERR" for (signo, code), NULL when unknown; *text gets a description. */
const char *cause_code_name(int signo, int code, const char **text);

#endif
