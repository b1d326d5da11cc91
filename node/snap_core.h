/* snap_core.h - stop a live process with ptrace, write an ELF core of it, let it go.
 *
 * Every thread is seized (PTRACE_SEIZE) and interrupted (PTRACE_INTERRUPT); a thread that does
 * not stop within the timeout (uninterruptible sleep: a driver ioctl, FUSE, vfork) is recorded
 * from what the kernel knows instead. The kernel's view of every thread (/proc/<tid>/stat,
 * wchan, syscall, stack) is read before the interrupt, so it shows the hang and not our stop.
 * The core is what gdb expects from the kernel: NT_PRSTATUS (+ FP and XSAVE state) per thread,
 * NT_PRPSINFO, NT_AUXV, NT_FILE, and PT_LOAD segments; slim keeps each thread's stack, the first
 * page of each mapped file, written file mappings (r_debug, link maps), small anonymous mappings
 * the pages holding the futex words threads wait on, and in a Python process the pages the Python
 * walker reads (snap_python.h); full keeps everything readable.
 * x86-64 only.
 *
 * The ELF files the Python walker reads are opened through /proc/<pid>/map_files as the
 * process's owner (rootopen.h), never by the paths its maps show.
 *
 * snap_stop_and_write must run in a process of its own that exits right after: the kernel
 * cannot detach a thread that never stopped, but it detaches every tracee, cleanly, when the
 * tracer exits. */
#ifndef CRASHPACK_SNAP_CORE_H
#define CRASHPACK_SNAP_CORE_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct snap_opts {
    int full;             /* everything readable, not the slim selection */
    uint64_t stack_max;   /* slim: bytes of each stack kept below the top, from sp - 4 KiB */
    unsigned timeout_ms;  /* how long each thread may take to stop */
    int pidfd;            /* > 0: the process's pidfd; the snapshot fails unless it still holds
                           * the pid once every thread is stopped (pidfd.h) */
    int python_locals;    /* slim: keep the pages of Python frames' locals too (pylocals.h) */
};

/* Stops pid, writes the core to core_fd (sequentially: a pipe is fine) and the stop report
 * (JSON, crashpack-snap/1) to info_fd, then detaches. Returns 0, or -1 with err set (the report
 * is still written when possible). */
int snap_stop_and_write(pid_t pid, const struct snap_opts *o, int core_fd, int info_fd, char *err,
                        size_t errlen);
#endif
