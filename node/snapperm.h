/* snapperm.h - what keeps this process from snapshotting pid, in words: another user's process
 * without CAP_SYS_PTRACE, kernel.yama.ptrace_scope (1 restricted, 2 admin-only, 3 no attach), a
 * tracer already attached, a process that is not dumpable, root without CAP_SYS_PTRACE, and
 * (need_capture) a caller that is not root, whose bundle crashpack-capture cannot write into the
 * root-owned bundle directory. */
#ifndef CRASHPACK_SNAPPERM_H
#define CRASHPACK_SNAPPERM_H
#include <stddef.h>
#include <sys/types.h>

/* 1 with why set (what blocks it and what would lift it), or 0 when none of these does. */
int snap_blocker(pid_t pid, int need_capture, char *why, size_t len);
#endif
